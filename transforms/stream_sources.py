"""Event-time sources of a streaming job and the release schedule of its periods.

``--pubsub-subscription`` (Beam's ``ReadFromPubSub``) or ``--kafka-topic`` (Beam's
``ReadFromKafka``, a cross-language transform: Java and an expansion service at
launch) deliver one JSON record per message.  Event time comes from the record's
``--timestamp-col`` (seconds since the epoch, or an ISO 8601 string); period t is the
event-time window ``[origin + (t − 1)·L, origin + t·L)`` of ``--period-length`` L from
``--origin``::

    messages ─ ParseEventRecords (a JSON object; event time from the column; a
        message that is not one, has no time, or falls outside periods 1..T goes to the
        dead letter with the reason — one bad message never stops the stream)
      ─ SplitLateRecords: a record whose period is already closed (the watermark has
        passed its end, or the period was ingested before this stream started) goes to
        the dead letter with the reason, never to a later period
      ─ PeriodBatches: FixedWindows(L) ─ GroupByKey per period ─ Arrow tables
      ─ (period, pa.Table) in the global window, for the stateful release DoFn

**The schedule is public.**  What a release publishes, including when a period is
released, may depend on the private data only through calibrated noise.  So every
period 1..T closes when the watermark passes its end, whether or not any record
arrived, and no record ever sets a timer: both stateful DoFns (:class:`SplitLateRecords`
and the release DoFn) follow one :class:`PeriodSchedule`, armed by a
:class:`ScheduleStart` element of their own (:func:`with_schedule_start`) at the end of
the first period not yet released and re-armed by each firing at the next period's end,
up to the horizon T (public configuration: an event-time stream needs one).  A firing
for a period that has not ended by the wall clock is a drain (or the end of a bounded
source), not a period closed by time: nothing is released for it and the schedule stops
there (:class:`PeriodSchedule`).

A period is complete when the watermark passes the end of its window: on Dataflow the
Pub/Sub watermark (with ``timestamp_attribute``), on Flink Kafka's timestamp policy.
Records arrive as one Python object per message (that is what the sources deliver);
they are batched into Arrow tables per period before any per-record work.
"""
from __future__ import annotations

import datetime
import json
import math
import time
from typing import Any, Optional, Tuple

import apache_beam as beam
import pyarrow as pa
from apache_beam.coders import VarIntCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import (ReadModifyWriteStateSpec, TimerSpec,
                                              on_timer)
from apache_beam.transforms.window import FixedWindows, GlobalWindows, TimestampedValue
from apache_beam.utils.timestamp import Duration, Timestamp

from continual_synth.mechanisms.errors import InputError

__all__ = ["LATE", "STREAM_KEY", "PeriodClock", "event_time", "read_event_records",
           "check_event_source", "kafka_reader", "ParseEventRecords", "ScheduleStart",
           "with_schedule_start", "PeriodSchedule", "SplitLateRecords", "UnreadableBatch",
           "period_table", "PeriodBatches", "EventPeriods"]

LATE = "late"
STREAM_KEY = "stream"  # the one key of an event-time stream's stateful DoFns


class PeriodClock:
    """Periods of ``length`` seconds from ``origin`` (seconds since the epoch), in whole
    microseconds as Beam's timestamps and ``FixedWindows`` count: a record at exactly
    ``origin + t·length`` opens period t + 1 whatever the decimal fractions (in floating
    point, ``0.1 + 73·3600`` would fall in period 73 and the end of period 3 of 0.1 s in
    period 3)."""

    def __init__(self, length: float, origin: float = 0.0):
        if not length > 0 or length == float("inf"):
            raise InputError(f"--period-length must be a positive number of seconds, "
                             f"not {length}")
        if not abs(origin) < float("inf"):
            raise InputError(f"--origin must be a finite number of seconds, not {origin}")
        self.length_micros, self.origin_micros = round(length * 1e6), round(origin * 1e6)
        if self.length_micros < 1:
            raise InputError(f"--period-length must be at least a microsecond, not {length}")

    def period(self, timestamp) -> int:
        """The period of ``timestamp`` (a Beam ``Timestamp``, or seconds)."""
        micros = timestamp.micros if isinstance(timestamp, Timestamp) else \
            round(float(timestamp) * 1e6)
        return (micros - self.origin_micros) // self.length_micros + 1

    def end(self, period: int) -> Timestamp:
        return Timestamp(micros=self.origin_micros + period * self.length_micros)

    def start(self, period: int) -> Timestamp:
        return Timestamp(micros=self.origin_micros + (period - 1) * self.length_micros)

    def windows(self) -> FixedWindows:
        """The periods as Beam's event-time windows."""
        return FixedWindows(Duration(micros=self.length_micros),
                            offset=Timestamp(micros=self.origin_micros))


# Beam's timestamps are microseconds in a signed 64-bit integer; a time in milliseconds
# or nanoseconds read as seconds is far outside this range of years 1677-2262.
_LARGEST_SECONDS = 9.2e12


def event_time(value, column: str) -> Timestamp:
    """A record's event time as a Beam ``Timestamp`` (whole microseconds, rounded):
    seconds since the epoch (a JSON number), or an ISO 8601 string (UTC unless it names
    a zone)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not (math.isfinite(value) and abs(value) < _LARGEST_SECONDS):
            raise InputError(f"--timestamp-col {column}: {value!r} is not a time in seconds "
                             f"since the epoch")
        return Timestamp(micros=round(value * 1e6))
    try:
        moment = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--timestamp-col {column}: {value!r} is neither seconds since the "
                         f"epoch (a JSON number) nor an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    since = moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return Timestamp(micros=since // datetime.timedelta(microseconds=1))


def read_event_records(pipeline, *, pubsub_subscription: Optional[str] = None,
                       kafka_topic: Optional[str] = None,
                       kafka_bootstrap: Optional[str] = None,
                       consumer_group: Optional[str] = None):
    """The messages (bytes, one JSON record each) from Pub/Sub or Kafka (exactly one of
    the two); :class:`ParseEventRecords` reads them.  ``consumer_group``: Kafka's
    ``group.id`` (see :func:`kafka_reader`)."""
    check_event_source(pubsub_subscription, kafka_topic, kafka_bootstrap)
    if pubsub_subscription is not None:
        from apache_beam.io.gcp.pubsub import ReadFromPubSub
        return pipeline | "ReadPubSub" >> ReadFromPubSub(subscription=pubsub_subscription)
    return (pipeline
            | "ReadKafka" >> kafka_reader(kafka_topic, kafka_bootstrap, consumer_group)
            | "Values" >> beam.Map(lambda kv: kv[1]))


def check_event_source(pubsub_subscription: Optional[str], kafka_topic: Optional[str],
                       kafka_bootstrap: Optional[str]) -> None:
    """The source options, checked before the stream writes anything."""
    if (pubsub_subscription is None) == (kafka_topic is None):
        raise InputError("give exactly one of --pubsub-subscription and --kafka-topic")
    if kafka_topic is not None and not kafka_bootstrap:
        raise InputError("--kafka-topic needs --kafka-bootstrap-servers HOST:PORT")
    if pubsub_subscription is not None:
        from apache_beam.io.gcp.pubsub import parse_subscription
        try:
            parse_subscription(pubsub_subscription)
        except ValueError as exc:
            raise InputError(f"--pubsub-subscription {pubsub_subscription}: {exc} (expected "
                             f"projects/PROJECT/subscriptions/NAME)") from None


def kafka_reader(topic: str, bootstrap: Optional[str], group: Optional[str] = None):
    """Beam's ``ReadFromKafka`` for one topic, event time from the broker's log time
    until :class:`ParseEventRecords` sets it from the record.  The consumer belongs to
    ``group`` (default ``continual-synth-<topic>``; the stream passes one per state
    directory) and commits its offsets once the runner has checkpointed what it read
    (``commit_offset_in_finalize``), starting from the earliest offset the first time: a
    restarted stream goes on where the last one's checkpoint was instead of at the topic's
    end (records sent while it was down were skipped).  Records re-read after a restart
    whose period was released meanwhile go to the dead letter, never into a period."""
    from apache_beam.io.kafka import ReadFromKafka
    if not bootstrap:
        raise InputError("--kafka-topic needs --kafka-bootstrap-servers HOST:PORT")
    return ReadFromKafka(consumer_config={"bootstrap.servers": bootstrap,
                                          "group.id": group or f"continual-synth-{topic}",
                                          "auto.offset.reset": "earliest"},
                         topics=[topic], timestamp_policy=ReadFromKafka.create_time_policy,
                         commit_offset_in_finalize=True)


class ParseEventRecords(beam.DoFn):
    """A message (JSON bytes or text, or a record already parsed) → the record, at its
    event time from ``timestamp_col`` (the column is kept); a message that is not a JSON
    object, has no usable time, or whose period is before 1 (before ``--origin``) or
    after ``horizon`` goes to the ``late`` output as ``(None, message, reason)``: the
    dead letter, never the stream's end (on Pub/Sub an unacknowledged message that
    failed the pipeline would come back at every restart)."""

    def __init__(self, timestamp_col: str, clock: PeriodClock, horizon: Optional[int] = None):
        super().__init__()
        self.timestamp_col, self.clock, self.horizon = timestamp_col, clock, horizon

    def process(self, message):
        record = message
        try:
            if isinstance(message, (bytes, str)):
                try:
                    record = json.loads(message)
                except ValueError:
                    raise InputError("the message is not JSON") from None
            if not isinstance(record, dict):
                raise InputError(f"the message is a JSON {type(record).__name__}, not an "
                                 f"object (one record per message)")
            if self.timestamp_col not in record:
                raise InputError(f"the record has no --timestamp-col {self.timestamp_col!r} "
                                 f"(fields: {sorted(record)})")
            moment = event_time(record[self.timestamp_col], self.timestamp_col)
            period = self.clock.period(moment)
            if period < 1:
                raise InputError(f"its time {moment.to_rfc3339()} is before --origin "
                                 f"{self.clock.start(1).to_rfc3339()} (period {period})")
            if self.horizon is not None and period > self.horizon:
                raise InputError(f"its time {moment.to_rfc3339()} is in period {period}, "
                                 f"beyond the horizon T={self.horizon} (a time in "
                                 f"milliseconds read as seconds?)")
        except InputError as exc:  # no period of the stream (the reason names any)
            if isinstance(record, bytes):
                record = record.decode("utf-8", errors="replace")
            yield beam.pvalue.TaggedOutput(LATE, (None, record, str(exc)))
            return
        yield TimestampedValue(record, moment)


class ScheduleStart:
    """The element that starts an event-time stream's release schedule: one, from a
    ``beam.Create`` (:func:`with_schedule_start`), never from the data, so the timer it
    arms is the same for every input."""


def with_schedule_start(keyed, label: str):
    """``keyed`` (``(STREAM_KEY, element)`` pairs) with one ``(STREAM_KEY,
    ScheduleStart())`` flattened in: the stateful DoFn that reads them arms its
    :class:`PeriodSchedule` on it."""
    start = keyed.pipeline | f"{label}Start" >> beam.Create([(STREAM_KEY, ScheduleStart())])
    return ((keyed, start) | f"{label}WithStart" >> beam.Flatten().with_output_types(
        Tuple[str, Any]))  # a text key: a deterministic coder for the stateful DoFn


class PeriodSchedule:
    """The release schedule of an event-time stream, one rule for every stateful DoFn
    of it (:class:`SplitLateRecords`, the release DoFn): periods close one at a time,
    in order, each when the watermark passes its end, up to the horizon T, whether or
    not any record arrived.  No record ever sets the timer: :meth:`start`, on the
    :class:`ScheduleStart` element, arms it at the end of the first period not yet
    released (``released_through + 1``), and every firing (:meth:`close`) re-arms it at
    the next period's end.  So when a period closes depends on the public horizon and
    the watermark only, never on which records arrived.

    **Drains.** A Dataflow drain, or the end of a bounded source (a test's), moves the
    watermark to the end of time and fires every remaining timer.  A firing for a
    period whose end is later than the wall clock's now is therefore not a period
    closed by time: :meth:`close` returns None, the period is not closed, nothing is
    released for it and the chain stops (a restarted stream resumes after the last
    period the state released).  The rule reads the wall clock only, never the data.
    A watermark ahead of the wall clock (event times stamped in the future) is taken as
    a drain too.  Each DoFn declares the specs with :meth:`specs` (a timer spec has one
    callback)."""

    @staticmethod
    def specs():
        return (ReadModifyWriteStateSpec("closed_through", VarIntCoder()),
                TimerSpec("close", TimeDomain.WATERMARK))

    def __init__(self, clock: PeriodClock, horizon: int, released_through: int = 0):
        self.clock, self.horizon, self.released_through = clock, horizon, released_through

    def start(self, closed_state, timer) -> None:
        """Arm the timer at the end of the first period to close (once: a firing has
        re-armed it since)."""
        if closed_state.read() is None and self.released_through < self.horizon:
            timer.set(self.clock.end(self.released_through + 1))

    def closed_through(self, closed_state) -> int:
        """The last period closed: by a firing of this stream, or released before it
        started."""
        return max(closed_state.read() or 0, self.released_through)

    def close(self, fire_time, closed_state, timer) -> Optional[int]:
        """The period this firing closes (the one ending at ``fire_time``), the timer
        re-armed at the next period's end up to T; None for a drain (the period ends
        after the wall clock's now): nothing closed, the timer not re-armed."""
        period = self.clock.period(fire_time) - 1
        if self.clock.end(period).micros > time.time() * 1e6:
            return None
        closed_state.write(max(self.closed_through(closed_state), period))
        if period < self.horizon:
            timer.set(self.clock.end(period + 1))
        return period


class SplitLateRecords(beam.DoFn):
    """``(key, record)`` → records of open periods; records of closed periods to the
    ``late`` output as ``(period, record, reason)``.

    A period closes when the watermark passes its end (:class:`PeriodSchedule`, the
    release DoFn's schedule too); from then on it has been (or is being) released, so a
    record for it must never join it or a later period.  Periods up to
    ``released_through`` were released before this stream started (a restart: Beam's
    state starts empty, the release's state does not)."""

    CLOSED, CLOSE = PeriodSchedule.specs()

    def __init__(self, clock: PeriodClock, horizon: int, released_through: int = 0):
        super().__init__()
        self.schedule = PeriodSchedule(clock, horizon, released_through)

    def process(self, element, timestamp=beam.DoFn.TimestampParam,
                closed=beam.DoFn.StateParam(CLOSED), close=beam.DoFn.TimerParam(CLOSE)):
        _, record = element
        if isinstance(record, ScheduleStart):
            self.schedule.start(closed, close)
            return
        period = self.schedule.clock.period(timestamp)
        if period <= self.schedule.closed_through(closed):
            why = ("was ingested before this stream started"
                   if period <= self.schedule.released_through
                   else "closed (the watermark passed its end) before this record arrived")
            yield beam.pvalue.TaggedOutput(LATE, (period, record, f"period {period} {why}"))
            return
        yield TimestampedValue(record, timestamp)

    @on_timer(CLOSE)
    def on_close(self, fire_time=beam.DoFn.TimestampParam,
                 closed=beam.DoFn.StateParam(CLOSED), close=beam.DoFn.TimerParam(CLOSE)):
        self.schedule.close(fire_time, closed, close)


class UnreadableBatch:
    """A period's records that do not make one table (a column of numbers and text);
    the release DoFn dead-letters the period with ``reason``."""

    def __init__(self, reason: str):
        self.reason = reason


def period_table(period: int, rows) -> "pa.Table | UnreadableBatch":
    """One batch of a period's records as an Arrow table."""
    try:
        return pa.Table.from_pylist(list(rows))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        return UnreadableBatch(f"period {period}: its records do not make one table: "
                               f"{str(exc).splitlines()[0]}")


class PeriodBatches(beam.PTransform):
    """Timestamped records → ``(period, pa.Table)`` batches of up to ``batch_size``
    rows in the global window, each timestamped at its period's start.

    The records are grouped by a ``GroupByKey`` per period window: its watermark hold
    keeps the release DoFn's watermark, and so its timer at the period's end, behind the
    period's records on every runner.  (A stateful DoFn's timer, which
    ``GroupIntoBatches`` flushes with, holds no watermark on the DirectRunner: the
    release timer, set by :class:`PeriodSchedule` and not by the batches, could fire
    before the batches came.)  The windows allow lateness over the whole horizon, so a
    record behind the watermark that :class:`SplitLateRecords` let through (its period's
    timer had not fired yet) comes in a late pane instead of being dropped: the release
    DoFn releases it with its period, or dead-letters it if the period is released."""

    def __init__(self, clock: PeriodClock, horizon: int, batch_size: int = 10_000):
        super().__init__()
        self.clock, self.horizon, self.batch_size = clock, horizon, batch_size

    def expand(self, records):
        clock, batch_size = self.clock, self.batch_size
        lateness = Duration(micros=self.horizon * clock.length_micros)
        return (records
                | "Periods" >> beam.WindowInto(clock.windows(), allowed_lateness=lateness)
                | "ByPeriod" >> beam.Map(lambda r, t=beam.DoFn.TimestampParam:
                                         (clock.period(t), r))
                | "Group" >> beam.GroupByKey()
                | "Tables" >> beam.FlatMapTuple(lambda period, rows: (
                    TimestampedValue((period, period_table(period, chunk)),
                                     clock.start(period))
                    for chunk in _chunks(rows, batch_size)))
                | "Global" >> beam.WindowInto(GlobalWindows()))


def _chunks(rows, size: int):
    """``rows`` (an iterable) in lists of at most ``size``."""
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class EventPeriods(beam.PTransform):
    """Messages (JSON records) → ``{"periods": (period, pa.Table), "late": (period,
    record, reason)}``: the event-time form of a stream, up to the release DoFn
    (``late`` also holds the messages :class:`ParseEventRecords` refused, period None
    when it has none).  ``horizon``: T, the last period the schedule closes."""

    def __init__(self, clock: PeriodClock, timestamp_col: str, horizon: int,
                 batch_size: int = 10_000, released_through: int = 0):
        super().__init__()
        self.clock, self.timestamp_col, self.batch_size = clock, timestamp_col, batch_size
        self.horizon, self.released_through = horizon, released_through

    def expand(self, messages):
        parsed = messages | "EventTime" >> beam.ParDo(ParseEventRecords(
            self.timestamp_col, self.clock, self.horizon)).with_outputs(LATE, main="records")
        keyed = parsed.records | "OneKey" >> beam.WithKeys(lambda _: STREAM_KEY)
        split = (with_schedule_start(keyed, "Schedule")
                 | "SplitLate" >> beam.ParDo(SplitLateRecords(
                     self.clock, self.horizon, self.released_through)).with_outputs(
                         LATE, main="on_time"))
        late = (parsed[LATE], split[LATE]) | "Unusable" >> beam.Flatten()
        return {"periods": split.on_time | "PeriodBatches" >> PeriodBatches(
                    self.clock, self.horizon, self.batch_size),
                "late": late}
