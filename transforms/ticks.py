"""The watcher's clock: one element every ``interval`` seconds, for as long as a stream runs.

Beam's ``PeriodicImpulse`` is a splittable DoFn that, when its next tick is not yet due,
defers the rest of its restriction until then (``defer_remainder(next_time)``).  The
in-process ``FnApiRunner`` does not wait for that time: it runs the deferred residual
again at once, so an idle ``stream --watch`` ran about 270 bundles a second whatever
``--poll-interval`` said, which kept half a core busy (16-17.5 CPU s in 30 s, at
``--poll-interval`` 1 and 5 alike; Beam 2.77).

:class:`Ticks` is ``PeriodicImpulse`` with its element generator paced: before it looks
at the clock, :class:`PacedImpulseSeqGenDoFn` sleeps until its next tick is due, so each
bundle of the generator emits one tick and the runner wakes once per interval.  The
ticks, their timestamps and the watermark are Beam's (the generator is Beam's own,
``ImpulseSeqGenDoFn``).  The sleep blocks the bundle; the watcher runs alone on its
in-process runner (``pipelines/streaming/stream.py``), and a stop signal interrupts the sleep like
any other point of the stream.
"""
from __future__ import annotations

import time

import apache_beam as beam
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
from apache_beam.transforms.periodicsequence import (ImpulseSeqGenDoFn,
                                                     ImpulseSeqGenRestrictionProvider)
from apache_beam.utils.timestamp import MAX_TIMESTAMP, Timestamp

__all__ = ["PacedImpulseSeqGenDoFn", "Ticks"]


class PacedImpulseSeqGenDoFn(ImpulseSeqGenDoFn):
    """Beam's ``ImpulseSeqGenDoFn`` that sleeps until its next tick is due before it
    emits it (see the module docstring)."""

    @beam.DoFn.unbounded_per_element()
    def process(self, element,
                restriction_tracker=beam.DoFn.RestrictionParam(
                    ImpulseSeqGenRestrictionProvider()),
                watermark_estimator=beam.DoFn.WatermarkEstimatorParam(
                    ManualWatermarkEstimator.default_provider())):
        start, _, interval = element
        if isinstance(start, Timestamp):
            start = start.micros / 1e6
        due = start + interval * restriction_tracker.current_restriction().start
        wait = due - time.time()
        if wait > 0:
            time.sleep(wait)
        yield from super().process(element, restriction_tracker, watermark_estimator)


class Ticks(beam.PTransform):
    """``PBegin → PCollection[Timestamp]``: one tick every ``interval`` seconds from now
    (the tick's due time, as ``PeriodicImpulse`` emits it), without end."""

    def __init__(self, interval: float):
        super().__init__()
        self.interval = float(interval)

    def expand(self, pbegin):
        return (pbegin
                | "Start" >> beam.Create([(Timestamp.now(), MAX_TIMESTAMP, self.interval)])
                | "Generate" >> beam.ParDo(PacedImpulseSeqGenDoFn()))
