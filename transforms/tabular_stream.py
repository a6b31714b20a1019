"""Streaming form of the tabular stream synthesizer (Kumar, Strohmer and Vershynin 2024).

For an unbounded source (Pub/Sub, Kafka …) on Flink or Dataflow: record batches carry
event-time timestamps; period t is the event-time window
``[origin + (t−1)·period_seconds, origin + t·period_seconds)``.

    batches ─ WindowInto(FixedWindows) ─ per-window workload histograms (CombinePerKey)
       ─ GlobalWindows ─ StepTabularStream (stateful DoFn, one key per stream)
       ─ emission tasks ─ sampled synthetic tables

:class:`StepTabularStream` holds the synthesizer's whole state in Beam state: the
per-workload private counters, the remainders r(t, i), the last fitted model and the
ledger.  Algorithm 3 is a feedback loop — period t's selection depends on g_{t−1}, which depends on every
counter — so the counters of one stream live under one key: they cannot be split across
keys without a cycle in the pipeline graph, which Beam does not allow.  A period is
processed when the watermark passes the end of its window (an event-time timer), in
order; a window with no records is an empty period; a batch arriving after its period
closed goes to the ``late`` dead letter (:class:`~continual_synth.transforms.
stream_sources.SplitLateRecords`).  Each period's noise is drawn with
the same per-period sampler seed as the batch and incremental jobs, so the three drivers
release the same tables for the same seed.
"""
from __future__ import annotations

from typing import Optional

import apache_beam as beam
import numpy as np
from apache_beam.coders import PickleCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import (BagStateSpec, ReadModifyWriteStateSpec,
                                              TimerSpec, on_timer)
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.timestamp import Timestamp

from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.synthesizer import period_sampler
from continual_synth.transforms.stream_sources import LATE, PeriodClock, SplitLateRecords
from continual_synth.transforms.tabular import (WorkloadHistogramsFn, emit_table,
                                                encode_stream_batch, release_tasks)


class _PeriodOfWindow(beam.DoFn):
    """Encode a batch against the domain and key it by its window's period; a batch
    the domain refuses (a value outside it, a missing attribute) goes to the ``late``
    output as ``(period, table, reason)`` instead of failing the stream."""

    def __init__(self, domain, clock: PeriodClock, where: str):
        super().__init__()
        self.domain, self.clock, self.where = domain, clock, where

    def process(self, table, window=beam.DoFn.WindowParam):
        period = self.clock.period(window.start)
        try:
            _, codes = encode_stream_batch(table, self.domain, "\0no-period-column",
                                           period=period, where=self.where)
        except InputError as exc:
            yield beam.pvalue.TaggedOutput(LATE, (period, table, str(exc)))
            return
        yield period, codes


class StepTabularStream(beam.DoFn):
    """Stateful step of one stream: ``(key, (period, [n, histograms…]))`` in, one
    :class:`~continual_synth.mechanisms.synthesizer.TableRelease` out per period, in
    period order (see the module docstring)."""

    STATE = ReadModifyWriteStateSpec("synthesizer_state", PickleCoder())
    BUFFER = BagStateSpec("waiting_periods", PickleCoder())
    FLUSH = TimerSpec("flush", TimeDomain.WATERMARK)

    def __init__(self, synthesizer, seed: Optional[int], clock: PeriodClock):
        super().__init__()
        self._synthesizer, self._seed, self._clock = synthesizer, seed, clock

    def _period_end(self, period: int) -> Timestamp:
        return self._clock.end(period)

    def process(self, element, buffer=beam.DoFn.StateParam(BUFFER),
                flush=beam.DoFn.TimerParam(FLUSH)):
        _, (period, counts) = element
        # one timer per key: it aims at the earliest waiting period (a later period's
        # histograms arriving first must not leave an earlier one without a timer)
        earliest = min([int(period)] + [p for p, _ in buffer.read()])
        buffer.add((int(period), counts))
        flush.set(self._period_end(earliest))

    @on_timer(FLUSH)
    def on_flush(self, fire_time=beam.DoFn.TimestampParam,
                 state=beam.DoFn.StateParam(STATE), buffer=beam.DoFn.StateParam(BUFFER),
                 flush=beam.DoFn.TimerParam(FLUSH)):
        synthesizer = self._synthesizer
        waiting = dict(buffer.read())
        buffer.clear()
        current = state.read()
        if current is None:
            current = synthesizer.initial_state()
        period = synthesizer.period(current)
        ripe = [p for p in waiting if self._period_end(p) <= fire_time]
        last = max(ripe, default=period)
        releases = []
        while period < last:
            period += 1
            counts = waiting.pop(period, None)
            flat = (np.zeros(synthesizer.histogram_width, dtype=np.int64) if counts is None
                    else np.asarray(counts)[1:])
            current, release = synthesizer.step(current, flat,
                                                period_sampler(self._seed, period))
            releases.append(release)
        later = {p: counts for p, counts in waiting.items() if p > period}
        for p, counts in later.items():
            buffer.add((p, counts))
        if later:
            flush.set(self._period_end(min(later)))
        state.write(current)
        yield from releases


def _period_tables(release, domain, period_col: str):
    """The records one period releases, in shards ``(key, pa.Table)``: the table g_t, or
    the baseline's increment (appended to the earlier periods' rows)."""
    for task in release_tasks(release):
        yield emit_table(task, domain, period_col)


class SynthesizeTabularStream(beam.PTransform):
    """``PCollection[pa.Table]`` (timestamped record batches) →
    ``PCollection[(key, pa.Table)]``: every period's synthetic table, ready for
    :class:`continual_synth.transforms.write.WriteRecordBatches`.

    A batch whose period has closed (the watermark passed its end) never joins it or a
    later period: it goes to ``late`` (a PTransform of ``(period, pa.Table, reason)``,
    e.g. a dead-letter writer), or is dropped — counted nowhere — if ``late`` is None.
    So does a batch the domain refuses (its period is released without it)."""

    def __init__(self, synthesizer, *, period_seconds: float, origin: float = 0.0,
                 seed: Optional[int] = None, period_col: str = "period",
                 key: str = "stream", where: str = "stream",
                 late: Optional[beam.PTransform] = None):
        super().__init__()
        self.late = late
        self.synthesizer, self.seed, self.key, self.where = synthesizer, seed, key, where
        self.period_seconds, self.origin, self.period_col = period_seconds, origin, period_col

    def expand(self, batches):
        synthesizer, seed, key, where = self.synthesizer, self.seed, self.key, self.where
        period_col = self.period_col
        domain, clock = synthesizer.domain, PeriodClock(self.period_seconds, self.origin)
        split = (batches
                 | "KeyForLateness" >> beam.WithKeys(lambda _: key)
                 | "SplitLate" >> beam.ParDo(SplitLateRecords(clock)).with_outputs(
                     LATE, main="on_time"))
        encoded = (split.on_time
                   | "Periods" >> beam.WindowInto(clock.windows())
                   | "Encode" >> beam.ParDo(_PeriodOfWindow(domain, clock, where)).with_outputs(
                       LATE, main="codes"))
        if self.late is not None:
            _ = ((split[LATE], encoded[LATE] | "RefusedGlobal" >> beam.WindowInto(GlobalWindows()))
                 | "Unusable" >> beam.Flatten()
                 | "DeadLetter" >> self.late)
        return (encoded.codes
                | "Histograms" >> beam.CombinePerKey(
                    WorkloadHistogramsFn(domain, synthesizer.input_workloads))
                | "Global" >> beam.WindowInto(GlobalWindows())
                | "OneKey" >> beam.Map(lambda kv: (key, kv))
                | "Step" >> beam.ParDo(StepTabularStream(synthesizer, seed, clock))
                | "Tables" >> beam.FlatMap(_period_tables, domain, period_col))
