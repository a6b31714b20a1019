"""Event-time sources of a streaming job and the completeness of a period.

``--pubsub-subscription`` (Beam's ``ReadFromPubSub``) or ``--kafka-topic`` (Beam's
``ReadFromKafka``, a cross-language transform: Java and an expansion service at
launch) deliver one JSON record per message.  Event time comes from the record's
``--timestamp-col`` (seconds since the epoch, or an ISO 8601 string); period t is the
event-time window ``[origin + (t − 1)·L, origin + t·L)`` of ``--period-length`` L from
``--origin``::

    messages ─ JSON records ─ TimestampRecords (event time from the column)
      ─ SplitLateRecords: a record whose period is already closed (the watermark has
        passed its end) goes to the dead letter with the reason, never to a later period
      ─ PeriodBatches: FixedWindows(L) ─ GroupIntoBatches per period ─ Arrow tables
      ─ (period, pa.Table) in the global window, for a stateful release DoFn whose
        watermark timer at a period's end says the period is complete

A period is complete when the watermark passes the end of its window: on Dataflow the
Pub/Sub watermark (with ``timestamp_attribute``), on Flink Kafka's timestamp policy.
Records arrive as one Python object per message (that is what the sources deliver);
they are batched into Arrow tables per period before any per-record work.
"""
from __future__ import annotations

import datetime
import json
from typing import Dict, Optional

import apache_beam as beam
import pyarrow as pa
from apache_beam.coders import PickleCoder, VarIntCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import (ReadModifyWriteStateSpec, TimerSpec,
                                              on_timer)
from apache_beam.transforms.window import FixedWindows, GlobalWindows, TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from continual_synth.mechanisms.errors import InputError

LATE = "late"


class PeriodClock:
    """Periods of ``length`` seconds from ``origin`` (seconds since the epoch)."""

    def __init__(self, length: float, origin: float = 0.0):
        if not length > 0 or length == float("inf"):
            raise InputError(f"--period-length must be a positive number of seconds, "
                             f"not {length}")
        if not abs(origin) < float("inf"):
            raise InputError(f"--origin must be a finite number of seconds, not {origin}")
        self.length, self.origin = float(length), float(origin)

    def period(self, timestamp: float) -> int:
        return int((float(timestamp) - self.origin) // self.length) + 1

    def end(self, period: int) -> Timestamp:
        return Timestamp(self.origin + period * self.length)

    def start(self, period: int) -> Timestamp:
        return Timestamp(self.origin + (period - 1) * self.length)


def event_seconds(value, column: str) -> float:
    """A record's event time: seconds since the epoch, or an ISO 8601 string."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        moment = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--timestamp-col {column}: {value!r} is neither seconds since the "
                         f"epoch nor an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def read_event_records(pipeline, *, pubsub_subscription: Optional[str] = None,
                       kafka_topic: Optional[str] = None,
                       kafka_bootstrap: Optional[str] = None,
                       timestamp_col: Optional[str] = None):
    """JSON records from Pub/Sub or Kafka (exactly one of the two)."""
    if (pubsub_subscription is None) == (kafka_topic is None):
        raise InputError("give exactly one of --pubsub-subscription and --kafka-topic")
    if pubsub_subscription is not None:
        from apache_beam.io.gcp.pubsub import ReadFromPubSub
        messages = pipeline | "ReadPubSub" >> ReadFromPubSub(subscription=pubsub_subscription)
    else:
        messages = (pipeline
                    | "ReadKafka" >> kafka_reader(kafka_topic, kafka_bootstrap)
                    | "Values" >> beam.Map(lambda kv: kv[1]))
    return messages | "Json" >> beam.Map(json.loads)


def kafka_reader(topic: str, bootstrap: Optional[str]):
    """Beam's ``ReadFromKafka`` for one topic, event time from the broker's log time
    until :class:`TimestampRecords` sets it from the record."""
    from apache_beam.io.kafka import ReadFromKafka
    if not bootstrap:
        raise InputError("--kafka-topic needs --kafka-bootstrap-servers HOST:PORT")
    return ReadFromKafka(consumer_config={"bootstrap.servers": bootstrap},
                         topics=[topic], timestamp_policy=ReadFromKafka.create_time_policy)


class TimestampRecords(beam.DoFn):
    """A record's event time from ``timestamp_col`` (the column is kept)."""

    def __init__(self, timestamp_col: str):
        super().__init__()
        self.timestamp_col = timestamp_col

    def process(self, record: Dict):
        if self.timestamp_col not in record:
            raise InputError(f"a record has no --timestamp-col {self.timestamp_col!r} "
                             f"(fields: {sorted(record)})")
        yield TimestampedValue(record, event_seconds(record[self.timestamp_col],
                                                     self.timestamp_col))


class OpenPeriods:
    """Watermark-timer bookkeeping shared by the stateful DoFns of an event-time stream:
    the periods that hold data and are not closed yet, and the timer set at the end of
    the earliest of them (one timer per key, so it always aims at the earliest).  Each
    DoFn declares its own specs with :meth:`specs` (a timer spec has one callback)."""

    @staticmethod
    def specs():
        return (ReadModifyWriteStateSpec("open_periods", PickleCoder()),
                TimerSpec("close", TimeDomain.WATERMARK))

    def __init__(self, clock: PeriodClock):
        self.clock = clock

    def add(self, period: int, open_state, timer) -> None:
        periods = open_state.read() or set()
        if period not in periods:
            periods.add(period)
            open_state.write(periods)
            timer.set(self.clock.end(min(periods)))

    def close(self, fire_time, open_state, timer) -> int:
        """The last closed period at ``fire_time``; re-aims the timer."""
        closed = self.clock.period(float(fire_time)) - 1
        periods = {p for p in (open_state.read() or set()) if p > closed}
        open_state.write(periods)
        if periods:
            timer.set(self.clock.end(min(periods)))
        return closed


class SplitLateRecords(beam.DoFn):
    """``(key, record)`` → records of open periods; records of closed periods to the
    ``late`` output as ``(period, record, reason)``.

    A period closes when the watermark passes its end (a watermark timer); from then
    on it has been (or is being) released, so a record for it must never join it or a
    later period."""

    CLOSED = ReadModifyWriteStateSpec("closed_through", VarIntCoder())
    OPEN, CLOSE = OpenPeriods.specs()

    def __init__(self, clock: PeriodClock):
        super().__init__()
        self.clock = clock

    def process(self, element, timestamp=beam.DoFn.TimestampParam,
                closed=beam.DoFn.StateParam(CLOSED), open_periods=beam.DoFn.StateParam(OPEN),
                close=beam.DoFn.TimerParam(CLOSE)):
        _, record = element
        period = self.clock.period(float(timestamp))
        if period <= (closed.read() or 0):
            yield beam.pvalue.TaggedOutput(LATE, (period, record,
                                                  f"period {period} closed (the watermark "
                                                  f"passed its end) before this record "
                                                  f"arrived"))
            return
        OpenPeriods(self.clock).add(period, open_periods, close)
        yield TimestampedValue(record, timestamp)

    @on_timer(CLOSE)
    def on_close(self, fire_time=beam.DoFn.TimestampParam,
                 closed=beam.DoFn.StateParam(CLOSED), open_periods=beam.DoFn.StateParam(OPEN),
                 close=beam.DoFn.TimerParam(CLOSE)):
        last = OpenPeriods(self.clock).close(fire_time, open_periods, close)
        closed.write(max(closed.read() or 0, last))


class PeriodBatches(beam.PTransform):
    """Timestamped records → ``(period, pa.Table)`` batches in the global window, each
    timestamped at its period's start."""

    def __init__(self, clock: PeriodClock, batch_size: int = 10_000):
        super().__init__()
        self.clock, self.batch_size = clock, batch_size

    def expand(self, records):
        clock = self.clock
        return (records
                | "Periods" >> beam.WindowInto(FixedWindows(clock.length, offset=clock.origin))
                | "ByPeriod" >> beam.Map(lambda r, t=beam.DoFn.TimestampParam:
                                         (clock.period(float(t)), r))
                | "Batch" >> beam.GroupIntoBatches(self.batch_size)
                | "Tables" >> beam.MapTuple(lambda period, rows: TimestampedValue(
                    (period, pa.Table.from_pylist(list(rows))), clock.start(period)))
                | "Global" >> beam.WindowInto(GlobalWindows()))


class EventPeriods(beam.PTransform):
    """JSON records → ``{"periods": (period, pa.Table), "late": (period, record,
    reason)}``: the event-time form of a stream, up to the release DoFn."""

    def __init__(self, clock: PeriodClock, timestamp_col: str, batch_size: int = 10_000):
        super().__init__()
        self.clock, self.timestamp_col, self.batch_size = clock, timestamp_col, batch_size

    def expand(self, records):
        split = (records
                 | "EventTime" >> beam.ParDo(TimestampRecords(self.timestamp_col))
                 | "OneKey" >> beam.WithKeys(lambda _: "stream")
                 | "SplitLate" >> beam.ParDo(SplitLateRecords(self.clock)).with_outputs(
                     LATE, main="on_time"))
        return {"periods": split.on_time | "PeriodBatches" >> PeriodBatches(self.clock,
                                                                          self.batch_size),
                "late": split[LATE]}
