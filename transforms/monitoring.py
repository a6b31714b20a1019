"""What a running job tells its operator: Beam ``Metrics`` counters and progress lines.

Counters (namespace :data:`NAMESPACE`, summed over workers by the runner, shown by
Dataflow/Flink UIs and queried from the ``PipelineResult`` by :func:`counter_totals`):

* ``records_read`` — input records (rows or points) read;
* ``records_rejected`` — input records refused by validation: with ``--invalid-records
  refuse`` the job then fails with a message naming the file, column and row (its
  counters reach a runner's UI, not the command's summary, which a failed job never
  prints); with ``drop`` (and in every stream) each invalid record dropped
  (:mod:`continual_synth.transforms.invalid_records`).  A ``stream`` also adds the
  records of every file or message it dead-letters whole to ``records read`` and
  ``rejected`` in its summary (:func:`continual_synth.pipelines.streaming.stream.count_rejected`);
* ``periods_released`` — periods whose synthetic data the job releases;
* ``synthetic_records_written`` — synthetic records written to the release.

These are exact counts of the private input, for the operator's eyes: they are NOT
differentially private and are never written into a release or its manifest.

:class:`Progress` writes a rate-limited INFO line (``period 3 of 12 done``, ``points read:
…``) on the ``continual_synth`` logger: at most one line per :data:`PROGRESS_SECONDS`
unless another tenth of a known total is done.  In a worker process of a local runner
(DirectRunner ``multi_processing``, Dask worker processes), where the command did not set
up its logging and Beam's harness level (ERROR unless ``--verbose``) would drop them, the
lines go to that process's stderr with the command's prefix (:func:`command`).
"""
from __future__ import annotations

import logging
import sys
import time
from typing import Dict, Optional

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter

__all__ = ["NAMESPACE", "RECORDS_READ", "RECORDS_REJECTED", "PERIODS_RELEASED",
           "SYNTHETIC_RECORDS_WRITTEN", "COUNTERS", "PROGRESS_SECONDS", "LOGGER",
           "line_handler", "set_command", "command", "worker_lines", "count",
           "CountRecords", "Progress", "counter_totals", "CountPeriodsReleased",
           "counting_rejections"]

NAMESPACE = "continual_synth"
RECORDS_READ = "records_read"
RECORDS_REJECTED = "records_rejected"
PERIODS_RELEASED = "periods_released"
SYNTHETIC_RECORDS_WRITTEN = "synthetic_records_written"
COUNTERS = (RECORDS_READ, RECORDS_REJECTED, PERIODS_RELEASED, SYNTHETIC_RECORDS_WRITTEN)
PROGRESS_SECONDS = 10.0

LOGGER = logging.getLogger("continual_synth")
_command: Optional[str] = None  # the command whose lines this process prints (the driver's)


def line_handler(command: str) -> logging.Handler:
    """The handler of a command's lines: stderr, ``continual-synth <command>: message``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"continual-synth {command}: %(message)s"))
    return handler


def set_command(name: Optional[str]) -> None:
    """The command whose progress lines its workers print (None: leave the workers'
    lines to Beam's logging, as under ``--verbose``)."""
    global _command
    _command = name


def command() -> Optional[str]:
    """What :func:`set_command` set, read where a transform is built (on the driver)."""
    return _command


def worker_lines(name: Optional[str]) -> None:
    """In a process where the command's logging is not set up (a worker), its lines go
    to stderr under the command's prefix; elsewhere nothing changes."""
    if name is None or LOGGER.handlers:
        return
    LOGGER.addHandler(line_handler(name))
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False


def count(name: str, amount: int) -> None:
    """Add ``amount`` to the counter ``name`` (inside a running DoFn)."""
    Metrics.counter(NAMESPACE, name).inc(int(amount))


def _rows(element) -> int:
    """Records in an element: an Arrow table, a ``(key, table)`` pair, or a
    ``(points array, clipped)`` pair."""
    if isinstance(element, tuple):
        element = element[1] if hasattr(element[1], "num_rows") else element[0]
    return element.num_rows if hasattr(element, "num_rows") else len(element)


class CountRecords(beam.PTransform):
    """Pass elements through, adding their records to the counter ``name``; with
    ``progress``, also write a rate-limited "<progress>: N" line (records so far in this
    worker process)."""

    def __init__(self, name: str, progress: Optional[str] = None):
        super().__init__()
        self.name, self.progress = name, progress

    def expand(self, elements):
        # the elements pass through: their type (and so their coder) too
        return elements | beam.ParDo(_CountRecordsFn(self.name, self.progress)).with_output_types(
            elements.element_type)


class _CountRecordsFn(beam.DoFn):
    def __init__(self, name: str, progress: Optional[str]):
        self.name, self.progress = name, progress
        self.command = command()  # built on the driver
        self.counter = None
        self.lines = None

    def setup(self):
        self.counter = Metrics.counter(NAMESPACE, self.name)
        self.lines = Progress(None, self.progress, command=self.command) \
            if self.progress else None

    def process(self, element):
        rows = _rows(element)
        self.counter.inc(rows)
        if self.lines is not None:
            self.lines.advance(rows)
        yield element


class Progress:
    """Rate-limited progress lines: ``what`` so far (``of total`` if known)."""

    def __init__(self, total: Optional[int], what: str, seconds: float = PROGRESS_SECONDS,
                 command: Optional[str] = None):
        worker_lines(command)  # ``command``: the driver's :func:`command`
        self.total, self.what, self.seconds = total, what, seconds
        self.done = 0
        self.started = self.last_time = time.monotonic()
        self.last_tenth = 0

    def advance(self, amount: int = 1) -> None:
        self.done += amount
        now = time.monotonic()
        tenth = 10 * self.done // self.total if self.total else 0
        if now - self.last_time >= self.seconds or tenth > self.last_tenth:
            self.last_time, self.last_tenth = now, tenth
            of = f" of {self.total}" if self.total else ""
            LOGGER.info("%s %d%s (%.0f s)", self.what, self.done, of, now - self.started)


def counter_totals(result) -> Optional[Dict[str, int]]:
    """The counters of a finished pipeline (committed values, or attempted ones where the
    runner has no committed metrics), or None if the runner reports no metrics."""
    try:
        results = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    except (AttributeError, NotImplementedError):  # e.g. Beam's Dask runner
        return None
    totals = dict.fromkeys(COUNTERS, 0)
    for counter in results["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        totals[counter.key.metric.name] = totals.get(counter.key.metric.name, 0) + int(value)
    return totals


class CountPeriodsReleased(beam.PTransform):
    """``PCollection[x] → PCollection[x]``, adding ``periods(x)`` to ``periods_released``
    for each element (the plan of a run, or the one task of a step's emission)."""

    def __init__(self, periods):
        super().__init__()
        self.periods = periods

    def expand(self, elements):
        periods = self.periods

        def counted(element):
            count(PERIODS_RELEASED, periods(element))
            return element

        return elements | beam.Map(counted)


def counting_rejections(validate):
    """``validate(batch, …)`` that, when it refuses a batch (``InputError``), adds the
    batch's records to ``records_rejected`` before the error stops the job."""
    from continual_synth.mechanisms.errors import InputError

    def validated(batch, *args, **kwargs):
        try:
            return validate(batch, *args, **kwargs)
        except InputError:
            count(RECORDS_REJECTED, _rows(batch))
            raise

    return validated
