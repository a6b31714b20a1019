"""The event-time form of ``stream`` (Pub/Sub, Kafka): ``TestStream`` drives the same
pipeline the command builds — out-of-order and duplicated arrival, late records to the
dead letter, an empty period — and the releases equal ``run``'s for the same seed; the
Pub/Sub and Kafka graphs are built and checked without a server."""
from __future__ import annotations

import glob
import json
import os
import time

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_stream import TestStream as BeamTestStream  # not "Test*": pytest would collect it

from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.marginals import Domain, all_workloads
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
from continual_synth.mechanisms.cumulative import CumulativeConfig
from continual_synth.mechanisms.panel_synthesizers import CumulativeSynthesizer, WindowSynthesizer
from continual_synth.mechanisms.window import WindowConfig
from continual_synth.pipelines.families import driver, jobs, tabular
from continual_synth.pipelines.release import logs
from continual_synth.pipelines.commands.cli import main
from continual_synth.pipelines.release.lifecycle import load_state
from continual_synth.pipelines.streaming.stream import event_pipeline, open_state
from continual_synth.transforms.files import read_dataset, write_file
from continual_synth.transforms.monitoring import RECORDS_REJECTED
from continual_synth.transforms.stream_sources import (PeriodClock, event_time,
                                                       kafka_reader)

from helpers_publication import differences, published
from helpers_panels import (long_table, markov_codes, read_manifest, release_snapshot,
                            sorted_records)

N, T, K, SEED, SHARDS = 40, 4, 2, 5, 2
MISSING = 0  # the panels' --missing-value: a quiet period is every person reporting it
LENGTH, ORIGIN = 10.0, 1000.0
CONFIG = WindowConfig(window=K, horizon=T, rho=1.0, alphabet=(0, 1))


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    root = tmp_path_factory.mktemp("events")
    table = long_table(markov_codes(N, T, seed=9))
    write_file(table, str(root / "panel.parquet"), "parquet")
    run_dir = str(root / "run")
    jobs.run(WindowSynthesizer(CONFIG), str(root / "panel.parquet"), run_dir, seed=SEED,
             num_shards=SHARDS)
    records = {p: [] for p in range(1, T + 1)}
    for row in table.to_pylist():
        # event times spread inside the period; the period column is not sent
        offset = (row["id"] * 7919 % 97) / 97 * (LENGTH - 0.01)
        records[row["period"]].append({"id": row["id"], "value": row["value"],
                                       "ts": ORIGIN + (row["period"] - 1) * LENGTH + offset})
    return root, records, run_dir


def panel_document(model=None, seed: int = SEED):
    """A panel state's document as ``stream`` creates it, with ``--missing-value``."""
    return jobs.initial_document(model or WindowSynthesizer(CONFIG), seed=seed,
                                 num_shards=SHARDS, missing_value=MISSING)


def run_events(events: BeamTestStream, state: str, out: str, before=lambda: None,
               until_period=None, model=None):
    """The command's event pipeline (as ``follow_events`` builds it: the horizon, the
    periods the state had released) on ``events``; stops as the command does (``model``:
    the panel synthesizer, window by default; ``--missing-value`` MISSING, which an
    event-time panel stream requires)."""
    model = model or WindowSynthesizer(CONFIG)
    document = panel_document(model)
    open_state(state, document)
    before()
    job = jobs.PanelJob(model.kind)
    stream_events(job, state, out, events, distinct_rows=True, horizon=T,
                  released_through=job.periods_seen(load_state(state)),
                  until_period=until_period)


def stream_events(job, state: str, out: str, records, clock=None, **options) -> None:
    """The event pipeline of ``job`` on the TestStream ``records``, in streaming mode, as
    the command runs it (``options``: :func:`event_pipeline`'s)."""
    from continual_synth.pipelines.streaming.stream import _stopping
    pipeline_options = PipelineOptions()
    pipeline_options.view_as(StandardOptions).streaming = True
    with _stopping(), beam.Pipeline(options=pipeline_options) as pipeline:
        event_pipeline(pipeline, job, state, out, clock=clock or PeriodClock(LENGTH, ORIGIN),
                       timestamp_col="ts", records=pipeline | records, **options)


def rejected(state):
    """The dead letter's documents (in the private state directory; none in the release)."""
    return [json.load(open(path)) for path in sorted(glob.glob(os.path.join(state, "rejected",
                                                                             "*.json")))]


def test_out_of_order_duplicated_and_late_records_equal_run(panel, tmp_path):
    _, records, run_dir = panel
    events = BeamTestStream()
    # period 2's first half arrives before period 1's records, within period 1's time
    events = events.add_elements(records[2][: N // 2] + records[1][::-1])
    events = events.advance_watermark_to(ORIGIN + LENGTH)  # period 1 complete
    events = events.add_elements(records[2][N // 2:] + records[3][:5])
    events = events.advance_watermark_to(ORIGIN + 2 * LENGTH)  # period 2 complete
    late = dict(records[2][0], value=1 - records[2][0]["value"])  # a late, changed report
    events = events.add_elements([late] + records[3][5:] + records[3][:5])  # 5 redelivered
    events = events.advance_watermark_to(ORIGIN + 3 * LENGTH)
    events = events.add_elements(records[4]).advance_watermark_to_infinity()
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    run_events(events, state, out)
    assert sorted_records(out).equals(sorted_records(run_dir))
    entries = load_state(state)["synthesizer_state"]["ledger"]["entries"]
    assert [e["label"] for e in entries] == [f"period {p}" for p in range(K, T + 1)]
    assert read_manifest(out)["rho_spent"] == pytest.approx(read_manifest(run_dir)["rho_spent"])
    dead = rejected(state)
    assert not glob.glob(os.path.join(out, "*rejected*"))
    assert len(dead) == 1 and dead[0]["period"] == 2 and dead[0]["record"] == late
    assert "closed" in dead[0]["reason"]


PANELS = {"window": WindowSynthesizer(CONFIG),
          "cumulative": CumulativeSynthesizer(CumulativeConfig(
              horizon=T, rho=1.0, neighbor="add-remove", public_population=True))}


@pytest.mark.parametrize("kind", sorted(PANELS))
def test_a_quiet_panel_period_is_every_person_reporting_the_missing_value(panel, tmp_path,
                                                                          kind):
    """A panel period in which no report arrived is a period in which every person's
    report is missing: with ``--missing-value`` V it is released at its own end like any
    other — the same synthetic records and synthesizer state (ledger, history) as
    ``init`` + ``step`` over the period files with every person reporting V in that
    period."""
    _, records, _ = panel
    events = (BeamTestStream()
              .add_elements(records[1]).advance_watermark_to(ORIGIN + LENGTH)
              .advance_watermark_to(ORIGIN + 2 * LENGTH)  # period 2: nothing arrived
              .add_elements(records[3]).advance_watermark_to(ORIGIN + 3 * LENGTH)
              .add_elements(records[4]).advance_watermark_to_infinity())
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    run_events(events, state, out, model=PANELS[kind])
    assert rejected(state) == []
    steps_state, steps_out = str(tmp_path / "steps-state"), str(tmp_path / "steps-out")
    open_state(steps_state, panel_document(PANELS[kind]))
    for period in range(1, T + 1):
        rows = ([{"id": r["id"], "value": MISSING} for r in records[1]] if period == 2 else
                [{"id": r["id"], "value": r["value"]} for r in records[period]])
        path = str(tmp_path / f"p{period}.parquet")
        write_file(pa.Table.from_pylist(rows), path, "parquet")
        driver.step(steps_state, path, steps_out, period=period)
    assert read_manifest(out)["periods_released"] == list(range(1, T + 1))
    assert sorted_records(out).equals(sorted_records(steps_out))
    assert load_state(state)["synthesizer_state"] == \
        load_state(steps_state)["synthesizer_state"]


def test_a_quiet_first_panel_period_stops_the_stream(panel, tmp_path):
    """Period 1 defines a panel's people: a period 1 in which no report arrived is an
    empty panel (no people at all), so no period of it can ever be released; the
    stream stops with an error naming the period (exit 2), releasing nothing, instead of
    waiting for ever."""
    _, records, _ = panel
    events = (BeamTestStream().advance_watermark_to(ORIGIN + LENGTH)
              .add_elements(records[2]).advance_watermark_to_infinity())
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    with pytest.raises(InputError, match=r"^period 1: no records arrived, .* the panel is "
                                         r"empty \(no people at all\)"):
        run_events(events, state, out)
    assert load_state(state)["synthesizer_state"]["period"] == 0
    assert not os.path.exists(os.path.join(out, "manifest.json"))


def test_bad_messages_are_dead_lettered_and_the_stream_goes_on(panel, tmp_path):
    """One message the stream cannot read — not JSON, not an object, no time, a time
    that is not one, before --origin, or in milliseconds (beyond the horizon) — goes to
    the dead letter with its reason; the releases are those of the good records."""
    _, records, run_dir = panel
    bad = ["not json {", json.dumps([1, 2]), {"id": 1, "value": 0},
           {"id": 1, "value": 0, "ts": "1001"}, {"id": 1, "value": 0, "ts": float("nan")},
           {"id": 1, "value": 0, "ts": ORIGIN - 1}, {"id": 1, "value": 0, "ts": ORIGIN * 1000}]
    good = [json.dumps(r) for r in records[1]]  # as Pub/Sub delivers them: JSON text
    events = BeamTestStream().add_elements(good[:5] + bad + good[5:])
    for period in range(1, T + 1):
        events = events.add_elements(records[period] if period > 1 else []).advance_watermark_to(
            ORIGIN + period * LENGTH)
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    before = logs.totals().get(RECORDS_REJECTED, 0)
    run_events(events.advance_watermark_to_infinity(), state, out)
    assert sorted_records(out).equals(sorted_records(run_dir))
    dead = rejected(state)
    assert [d["period"] for d in dead] == [None] * len(bad)
    assert logs.totals().get(RECORDS_REJECTED, 0) - before == len(bad)  # in the summary
    reasons = " | ".join(sorted(d["reason"] for d in dead))
    for expected in ("not JSON", "JSON list, not an object", "has no --timestamp-col 'ts'",
                     "'1001' is neither seconds", "nan is not a time",
                     "before --origin", "beyond the horizon T=4 (a time in milliseconds"):
        assert expected in reasons, reasons
    assert not glob.glob(os.path.join(out, "*rejected*"))


def test_records_that_do_not_make_a_table_dead_letter_their_period(panel, tmp_path):
    """A report whose value is text among numbers: the period is refused with the
    reason (as ``step`` refuses such a file), not the stream ended."""
    _, records, _ = panel
    odd = [dict(records[2][0], value=str(records[2][0]["value"]))] + records[2][1:]
    events = (BeamTestStream().add_elements(records[1]).advance_watermark_to(ORIGIN + LENGTH)
              .add_elements(odd).advance_watermark_to(ORIGIN + 2 * LENGTH)
              .add_elements(records[3]).advance_watermark_to_infinity())
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    run_events(events, state, out)
    assert load_state(state)["synthesizer_state"]["period"] == 1
    dead = rejected(state)
    assert [d["period"] for d in dead] == [2]  # once, not again at every later period
    assert "do not make one table" in dead[0]["reason"]


def test_a_quiet_period_closes_at_its_own_end(panel, tmp_path):
    """The watermark passes the end of period 2 with nothing for it: period 2 is closed
    and released then (every person's report missing), so its records arriving
    afterwards are all late — none is released as a part of the period or of a later
    one."""
    _, records, _ = panel
    events = (BeamTestStream().add_elements(records[1]).advance_watermark_to(ORIGIN + LENGTH)
              .advance_watermark_to(ORIGIN + 2.5 * LENGTH)
              .add_elements(records[2][:5]).advance_watermark_to(ORIGIN + 2.9 * LENGTH)
              .add_elements(records[2][5:] + records[3]).advance_watermark_to_infinity())
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    run_events(events, state, out)
    assert load_state(state)["synthesizer_state"]["period"] == T
    dead = rejected(state)
    assert len(dead) == N and {d["period"] for d in dead} == {2}
    assert all("closed (the watermark passed its end)" in d["reason"] for d in dead)


def step_periods(records, tmp_path, state, out, pending=None):
    """``window step`` periods 1, 2 on ``state``; ``pending=2``: period 2's step is
    SIGKILLed right after its commit (computed, not published)."""
    import subprocess
    import sys
    for period in (1, 2):
        path = str(tmp_path / f"p{period}.parquet")
        write_file(pa.Table.from_pylist([{"id": r["id"], "value": r["value"]}
                                         for r in records[period]]), path, "parquet")
        if period != pending:
            driver.step(state, path, out)
            continue
        env = dict(os.environ, CONTINUAL_SYNTH_CRASH_AT="committed")
        done = subprocess.run([sys.executable, "-m", "continual_synth", "window", "step",
                               "--state", state, "--input", path, "--output", out,
                               "--period", str(period)], env=env, capture_output=True)
        assert done.returncode == -9, done.stderr.decode()[-500:]
        assert load_state(state)["pending"]["period"] == pending


def follow_kafka(state, out, **options):
    """``follow_events`` of a Kafka stream whose broker is never contacted."""
    from continual_synth.pipelines.streaming.stream import follow_events
    document = panel_document()
    return follow_events(jobs.PanelJob("window"), document, state, out,
                         clock=PeriodClock(LENGTH, ORIGIN), timestamp_col="ts",
                         kafka_topic="reports", kafka_bootstrap="127.0.0.1:1", **options)


def test_a_restarted_stream_publishes_the_pending_period_and_refuses_released_ones(
        panel, tmp_path):
    """A stream that starts on a state whose period 2 is committed but unpublished (a
    step killed after its commit) publishes it from its plan at once, without its
    records; redelivered records of periods 1-2 go to the dead letter as released
    before the stream started; ``--until-period 3`` is not overshot."""
    root, records, run_dir = panel
    state, out = str(tmp_path / "state"), str(tmp_path / "out")

    events = (BeamTestStream().add_elements(records[1][:3] + records[2][:4])  # redelivered
              .add_elements(records[3]).advance_watermark_to(ORIGIN + 3 * LENGTH)
              .add_elements(records[4]).advance_watermark_to_infinity())
    run_events(events, state, out, lambda: step_periods(records, tmp_path, state, out, 2),
               until_period=3)
    state_now = load_state(state)
    assert state_now["pending"] is None and state_now["synthesizer_state"]["period"] == 3
    expected = sorted_records(run_dir)
    assert sorted_records(out).equals(expected.filter(pa.compute.less_equal(
        expected["period"], 3)))
    dead = rejected(state)
    assert sorted(d["period"] for d in dead) == [1] * 3 + [2] * 4
    assert all("ingested before this stream started" in d["reason"] for d in dead)


def test_a_retried_stream_past_its_until_period_releases_nothing(panel, tmp_path):
    """The same ``--until-period 2`` command again (a retried task) on a state that has
    released period 2 returns at once: no source is read, nothing more is spent."""
    _, records, _ = panel
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    open_state(state, panel_document())
    step_periods(records, tmp_path, state, out)
    before = load_state(state)
    summary = follow_kafka(state, out, until_period=2)
    assert summary["periods_released"] == [1, 2] and load_state(state) == before


def test_a_pending_period_is_published_when_the_stream_starts(panel, tmp_path):
    """A stream started on a state whose period 2 is committed but unpublished publishes
    it at once, before any record arrives (not at the next period's end: a month for a
    monthly panel); with ``--until-period 2`` it then stops without reading its source."""
    _, records, _ = panel
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    open_state(state, panel_document())
    step_periods(records, tmp_path, state, out, pending=2)
    summary = follow_kafka(state, out, until_period=2)
    assert summary["periods_released"] == [1, 2] and not summary["pending"]
    assert read_manifest(out)["periods_released"][-1] == 2


def test_until_period_is_refused_where_the_stop_would_be_retried(tmp_path):
    """``--until-period`` stops the stream by raising inside the pipeline: on Dataflow or
    Flink that is retried without end, so it is refused there, before anything is
    written."""
    with pytest.raises(InputError, match="DirectRunner only"):
        follow_kafka(str(tmp_path / "state"), str(tmp_path / "out"), until_period=2,
                     beam_args=["--runner=FlinkRunner"])
    assert not (tmp_path / "state").exists()


def test_pubsub_graph(tmp_path):
    """The command's Pub/Sub pipeline, built (not run): source, event time, late split,
    per-period grouping and the stateful release, in that order; the release schedule
    of both stateful DoFns starts from an element of its own, not from the data."""
    pipeline = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    event_pipeline(pipeline, jobs.PanelJob("window"), str(tmp_path / "s"), str(tmp_path / "o"),
                   clock=PeriodClock(LENGTH, ORIGIN), timestamp_col="ts", horizon=T,
                   pubsub_subscription="projects/my-project/subscriptions/panel")
    proto = pipeline.to_runner_api()
    labels = [t.unique_name for t in proto.components.transforms.values()]
    order = ["ReadPubSub", "EventPeriods/EventTime", "EventPeriods/ScheduleStart",
             "EventPeriods/SplitLate", "EventPeriods/PeriodBatches/Periods",
             "EventPeriods/PeriodBatches/Group", "ScheduleStart", "ReleaseClosed",
             "DeadLetter"]
    for label in order:
        assert label in labels, (label, sorted(labels))
    stateful = {t.unique_name for t in proto.components.transforms.values()
                if t.spec.urn == "beam:transform:pardo:v1"
                and _timers(t.spec.payload)}
    assert {"EventPeriods/SplitLate/ParDo(SplitLateRecords)",
            "ReleaseClosed"} <= stateful


def _timers(payload: bytes) -> bool:
    from apache_beam.portability.api import beam_runner_api_pb2
    pardo = beam_runner_api_pb2.ParDoPayload.FromString(payload)
    return bool(pardo.timer_family_specs) and bool(pardo.state_specs)


def test_kafka_reader_configuration():
    reader = kafka_reader("panel-reports", "broker:9092", "continual-synth-0123")
    assert reader._urn.startswith("beam:transform:org.apache.beam:kafka_read")
    # a consumer group of its own that commits what the runner has checkpointed, from the
    # earliest offset the first time: a restart goes on where the last stream stopped
    for expected in (b"panel-reports", b"broker:9092", b"CreateTime", b"group.id",
                     b"continual-synth-0123", b"auto.offset.reset", b"earliest"):
        assert expected in reader._payload
    assert b"commit_offset_in_finalize" in reader._payload
    with pytest.raises(InputError, match="--kafka-bootstrap-servers"):
        kafka_reader("panel-reports", None)


def test_event_time_and_period_clock():
    clock = PeriodClock(LENGTH, ORIGIN)
    assert [clock.period(ORIGIN), clock.period(ORIGIN + 9.99), clock.period(ORIGIN + 10)] == \
        [1, 1, 2]
    assert float(clock.end(2)) == ORIGIN + 20
    assert event_time("1970-01-01T00:16:40Z", "ts").micros == 1000 * 10**6
    assert event_time("1970-01-01T02:16:40.25+02:00", "ts").micros == 1000.25 * 10**6
    assert event_time(12.5, "ts").micros == 12.5 * 10**6
    # whole microseconds, as Beam's timestamps and windows: no float boundary errors
    tenths = PeriodClock(0.1, 0)
    assert [tenths.period(tenths.end(p)) for p in range(1, 6)] == [2, 3, 4, 5, 6]
    hours = PeriodClock(3600, 0.1)
    assert hours.period(event_time(0.1 + 73 * 3600, "ts")) == 74
    assert hours.period(event_time(0.1 + 73 * 3600 - 1e-6, "ts")) == 73
    with pytest.raises(InputError, match="--timestamp-col ts"):
        event_time("yesterday", "ts")
    with pytest.raises(InputError, match="--period-length"):
        PeriodClock(0)
    with pytest.raises(InputError, match="--origin"):
        PeriodClock(10, float("nan"))


@pytest.mark.parametrize("argv, subject", [
    (["--pubsub-subscription", "projects/p1/subscriptions/s", "--period-length", "10"],
     "--timestamp-col"),
    (["--watch", "WATCH", "--timestamp-col", "ts"], "--timestamp-col is for"),
    (["--watch", "WATCH", "--origin", "5"], "--origin is for"),
    (["--kafka-topic", "t", "--timestamp-col", "ts", "--period-length", "10"],
     "--kafka-topic needs --kafka-bootstrap-servers"),
    (["--pubsub-subscription", "panel", "--timestamp-col", "ts", "--period-length", "10"],
     "expected projects/PROJECT/subscriptions/NAME"),
    (["--pubsub-subscription", "projects/p1234567/subscriptions/s", "--timestamp-col", "ts",
      "--period-length", "10", "--poll-interval", "3"], "--poll-interval is for --watch"),
])
def test_event_options_checked(tmp_path, capsys, argv, subject):
    (tmp_path / "w").mkdir()
    argv = [str(tmp_path / "w") if a == "WATCH" else a for a in argv]
    code = main(["window", "stream", *argv, "--state", str(tmp_path / "state"), "--output",
                 str(tmp_path / "out"), "--window", "2", "--horizon", "4", "--rho", "1"])
    assert code == 2 and subject in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


def test_a_second_event_stream_on_a_state_is_refused_and_dataflow_names_its_job(tmp_path,
                                                                                  capsys):
    """One stream per state on the event path too (two consumers of one subscription or
    group would each release periods with part of their records): refused at start,
    before the source is opened, touching nothing.  On Dataflow the job is named after
    the state, so Dataflow itself refuses a second one once the launcher has gone."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions
    from continual_synth.pipelines.release.lifecycle import Ownership, StateDir
    from continual_synth.pipelines.streaming.stream import consumer_group, name_dataflow_job
    from helpers_panels import snapshot
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    privacy = ["--window", "2", "--horizon", "4", "--rho", "1", "--missing-value", "0"]
    assert main(["window", "init", "--state", state, *privacy]) == 0
    capsys.readouterr()
    with Ownership(StateDir(state), role="stream"):
        before = snapshot(state)
        code = main(["window", "stream", "--kafka-topic", "t", "--kafka-bootstrap-servers",
                     "127.0.0.1:9", "--timestamp-col", "ts", "--period-length", "10",
                     "--state", state, "--output", out, *privacy])
        err = capsys.readouterr().err
        assert code == 2 and "another stream is releasing into this state (pid " in err, err
        assert snapshot(state) == before and not os.path.exists(out)
    for runner, given, named in (("DataflowRunner", [], consumer_group(state)),
                                 ("DataflowRunner", ["--job_name=mine"], "mine"),
                                 ("FlinkRunner", [], None)):
        options = PipelineOptions(["--runner", runner, *given])
        name_dataflow_job(options, state)
        assert options.view_as(GoogleCloudOptions).job_name == named


def test_event_periods_are_spooled_next_to_the_state_and_removed(panel, tmp_path,
                                                                  monkeypatch):
    """The step reads a period's records from a file: it is written under
    ``STATE/spool/`` on the state's own store (never a worker's temp folder), exists
    while the step runs, and is gone afterwards; a killed stream's spool is removed when
    the next stream starts."""
    from continual_synth.pipelines.streaming import stream

    _, records, run_dir = panel
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    leftover = os.path.join(state, "spool", "dead-run", "period_0001.parquet")

    def killed_stream_leftover():  # as a stream killed mid-step leaves it
        os.makedirs(os.path.dirname(leftover))
        open(leftover, "wb").close()
    seen = []
    real = stream.release_period

    def spy(job, state_dir, output_dir, path, period, **kw):
        seen.append((path, os.path.exists(path), os.path.exists(leftover)))
        return real(job, state_dir, output_dir, path, period, **kw)

    monkeypatch.setattr(stream, "release_period", spy)
    events = BeamTestStream()
    for period in range(1, T + 1):
        events = events.add_elements(records[period]).advance_watermark_to(
            ORIGIN + period * LENGTH)
    run_events(events.advance_watermark_to_infinity(), state, out, killed_stream_leftover)
    assert sorted_records(out).equals(sorted_records(run_dir))
    assert len(seen) == T
    for path, existed, stale in seen:
        assert path.startswith(os.path.join(state, "spool") + os.sep) and existed
        assert not stale
    assert not os.path.exists(os.path.join(state, "spool")) or \
        not [f for _, _, files in os.walk(os.path.join(state, "spool")) for f in files]


TABULAR_DOMAIN = {"a": [0, 1, 2], "b": ["x", "y", None], "c": [0, 1]}


def tabular_synthesizer(horizon: int = T) -> TabularSynthesizer:
    domain = Domain(TABULAR_DOMAIN)
    return TabularSynthesizer.create(domain=domain, workloads=all_workloads(domain),
                                     epsilon=2.0, fit="mw", horizon=horizon)


@pytest.mark.parametrize("quiet", [(2,), (1, 3)])
def test_a_quiet_tabular_period_is_released_as_step_releases_an_empty_file(tmp_path, quiet):
    """A tabular period in which no event arrived is a period like any other (Kumar et
    al.: a period's batch may be empty; ``tabular step`` takes a file with the columns and
    no rows): the stream releases it when the watermark passes its end, through the same
    step as a 0-row file — the same synthetic tables, manifest and synthesizer state
    (ledger, counters, model) as ``init`` + ``step`` over the period files with an empty
    one for each quiet period."""
    rng = np.random.default_rng(3)
    records = {p: [] for p in range(1, T + 1)}
    for period in (p for p in range(1, T + 1) if p not in quiet):
        for i in range(30):
            records[period].append({"a": int(rng.integers(0, 3)),
                                    "b": [None, "x", "y"][int(rng.integers(0, 3))],
                                    "c": int(rng.integers(0, 2)),
                                    "ts": ORIGIN + (period - 1) * LENGTH + i * LENGTH / 31})
    # the steps: one file per period, a 0-row one (the attribute columns) for a quiet one
    columns = {"a": pa.int64(), "b": pa.string(), "c": pa.int64()}
    steps_state, steps_out = str(tmp_path / "steps-state"), str(tmp_path / "steps-out")
    driver.init(steps_state, tabular.initial_document(tabular_synthesizer(), seed=SEED))
    for period in range(1, T + 1):
        path = str(tmp_path / f"p{period}.parquet")
        rows = [{k: r[k] for k in columns} for r in records[period]]
        write_file(pa.Table.from_pylist(rows, pa.schema(columns)), path, "parquet")
        # --period: two quiet periods' files hold the same bytes (a copy, without it)
        assert driver.step(steps_state, path, steps_out, period=period)["status"] == \
            "released"
    # the stream: the watermark passes each period's end; nothing arrives in a quiet one
    events = BeamTestStream()
    for period in range(1, T + 1):
        events = events.add_elements(records[period]).advance_watermark_to(
            ORIGIN + period * LENGTH)
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    open_state(state, tabular.initial_document(tabular_synthesizer(), seed=SEED))
    job = tabular.TabularJob()
    assert job.empty_period_valid(load_state(state))
    stream_events(job, state, out, events.advance_watermark_to_infinity(), horizon=T,
                  released_through=0)
    assert rejected(state) == []
    assert read_manifest(out)["periods_released"] == list(range(1, T + 1))
    assert release_snapshot(out) == release_snapshot(steps_out)
    streamed, stepped = load_state(state), load_state(steps_state)
    assert streamed["synthesizer_state"] == stepped["synthesizer_state"]
    assert [e["label"] for e in streamed["synthesizer_state"]["ledger"]["entries"]] == \
        [e["label"] for e in stepped["synthesizer_state"]["ledger"]["entries"]]
    assert not [f for _, _, files in os.walk(os.path.join(state, "spool")) for f in files]


# ------------------------------------------------------- the release schedule


SCHEDULE_T = 5  # the horizon of the schedule tests
#: the schedule tests' seed: one for which the neighbours' synthetic records differ in
#: every family (with seed 5 the tabular synthesizer's releases happen to coincide)
SCHEDULE_SEED = 1
PRIVHP_INIT = ["privhp", "init", "--horizon", str(SCHEDULE_T), "--columns", "x,y",
                "--bounds", "0:1,0:1", "--epsilon", "1", "--samples", "200", "--depth", "8",
                "--memory", "1000", "--seed", str(SCHEDULE_SEED), "--shards", "2"]


def schedule_family(family: str):
    """``(job, create_state(state_dir), record(period, i, rng), distinct_rows)`` of a
    family over the horizon SCHEDULE_T, seed SCHEDULE_SEED (a panel with
    ``--missing-value``)."""
    from continual_synth.pipelines.families.privhp_continual import ContinualPrivHPJob

    def at(period, i):
        return ORIGIN + (period - 1) * LENGTH + (i + 1) * LENGTH / 64
    if family == "tabular":
        return (tabular.TabularJob(),
                lambda state: open_state(state, tabular.initial_document(
                    tabular_synthesizer(SCHEDULE_T), seed=SCHEDULE_SEED)),
                lambda period, i, rng: {"a": int(rng.integers(0, 3)),
                                        "b": [None, "x", "y"][int(rng.integers(0, 3))],
                                        "c": int(rng.integers(0, 2)), "ts": at(period, i)},
                False)
    if family == "privhp":
        return (ContinualPrivHPJob(),
                lambda state: main([*PRIVHP_INIT, "--state", state]),
                lambda period, i, rng: {"x": float(rng.random()), "y": float(rng.random()),
                                        "ts": at(period, i)},
                False)
    model = (WindowSynthesizer(WindowConfig(window=K, horizon=SCHEDULE_T, rho=1.0,
                                            alphabet=(0, 1))) if family == "window" else
             # (little noise: one report's difference shows through the monotonisation
             # of 12 people's counts)
             CumulativeSynthesizer(CumulativeConfig(horizon=SCHEDULE_T, rho=100.0)))
    return (jobs.PanelJob(family),
            lambda state: open_state(state, panel_document(model, SCHEDULE_SEED)),
            lambda period, i, rng: {"id": i, "value": int(rng.integers(0, 2)),
                                    "ts": at(period, i)},
            True)


def schedule_run(family: str, records, state: str, out: str, capsys) -> list:
    """The event stream of ``family`` over ``records`` ({period: records}), the watermark
    advanced to the end of every period 1..SCHEDULE_T in turn (the same advances
    whatever the records), then to the end of time; returns its log (the stream's
    events, one JSON line each on stderr)."""
    job, create_state, _, distinct_rows = schedule_family(family)
    create_state(state)
    capsys.readouterr()
    events = BeamTestStream()
    for period in range(1, SCHEDULE_T + 1):
        events = events.add_elements(records.get(period, [])).advance_watermark_to(
            ORIGIN + period * LENGTH)
    stream_events(job, state, out, events.advance_watermark_to_infinity(),
                  horizon=SCHEDULE_T, distinct_rows=distinct_rows)
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()
            if line.startswith('{"event"')]


def release_content(out: str) -> pa.Table:
    """The synthetic records the manifest lists, in one order."""
    files = [os.path.join(out, name) for name in read_manifest(out)["files"]]
    table = pa.concat_tables([read_dataset(path) for path in files])
    return table.sort_by([(name, "ascending") for name in table.column_names])


@pytest.mark.parametrize("family", ["tabular", "privhp", "window", "cumulative"])
def test_neighbouring_inputs_release_the_same_periods_at_the_same_watermarks(
        tmp_path, capsys, monkeypatch, family):
    """What a release publishes may depend on the data only through noise, and that
    includes when a period is released.  D holds records in periods 1-2 only, D' is D
    plus one record in period 4; the same seed (SCHEDULE_SEED) and the same watermark
    advances.  Both
    streams close and release period p when the watermark passes its end, before period
    p + 1 closes, whatever arrived (periods 3-5 of D and 3 and 5 of D' are quiet; a
    panel's quiet period is every person reporting ``--missing-value``): the same
    periods, the same file names and the same manifest lists, while the synthetic
    records differ."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # the manifests' creation time
    _, _, record, _ = schedule_family(family)
    rng = np.random.default_rng(11)
    people = 12
    d = {period: [record(period, i, rng) for i in range(people)] for period in (1, 2)}
    neighbour = {**d, 4: [record(4, 0, rng)]}
    if family in ("window", "cumulative"):
        neighbour[4][0]["value"] = 1 - MISSING  # a report the missing value would not give
    runs = {}
    for name, records in (("d", d), ("neighbour", neighbour)):
        state, out = str(tmp_path / f"{name}-state"), str(tmp_path / f"{name}-out")
        runs[name] = (out, schedule_run(family, records, state, out, capsys))
        assert rejected(state) == []
    (out, log), (neighbour_out, neighbour_log) = runs["d"], runs["neighbour"]
    everything = list(range(1, SCHEDULE_T + 1))
    assert read_manifest(out)["periods_released"] == everything
    assert read_manifest(neighbour_out)["periods_released"] == everything
    assert read_manifest(out)["files"] == read_manifest(neighbour_out)["files"]
    assert sorted(os.listdir(out)) == sorted(os.listdir(neighbour_out))

    def schedule(events):  # the firings and the releases, in the order they happened
        return [(e["event"], e["period"]) for e in events
                if e["event"] in ("closed", "released", "ingested", "drain")]
    first = K if family == "window" else 1  # the window synthesizer releases from period k
    expected = [step for period in everything
                for step in (("closed", period),
                             ("released" if period >= first else "ingested", period))]
    assert schedule(log) == expected
    assert schedule(neighbour_log) == expected
    assert not release_content(out).equals(release_content(neighbour_out))
    # every published field classified, the public ones identical (the publication
    # boundary's neighbour test, tests/test_publication_boundary.py, in this mode)
    assert differences(published(out, []), published(neighbour_out, []))


@pytest.mark.parametrize("argv, subject", [
    (["window", "stream", "--window", "2", "--horizon", "4", "--rho", "1"],
     "an event-time window stream needs --missing-value V"),
    (["cumulative", "stream", "--horizon", "4", "--rho", "1"],
     "an event-time cumulative stream needs --missing-value V"),
    (["tabular", "stream", "--domain", "DOMAIN", "--epsilon", "1"],
     "releases every period 1..T when the watermark passes its end, so it needs "
     "--horizon T"),
])
def test_an_event_stream_that_could_not_release_every_period_is_refused_at_start(
        tmp_path, capsys, argv, subject):
    """An event-time stream releases every period 1..T when the watermark passes its
    end, records or not: a panel without ``--missing-value`` (a quiet period could not
    be released, so whether a period is released would depend on which records
    arrived) and a tabular stream without ``--horizon`` are refused at start (exit 2),
    nothing written."""
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps(TABULAR_DOMAIN))
    argv = [str(domain) if a == "DOMAIN" else a for a in argv]
    code = main([*argv, "--pubsub-subscription", "projects/p1234567/subscriptions/s",
                 "--timestamp-col", "ts", "--period-length", "10",
                 "--state", str(tmp_path / "state"), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and subject in err, err
    assert not (tmp_path / "state").exists() and not (tmp_path / "out").exists()


def test_a_drain_releases_no_period_that_has_not_ended(tmp_path, capsys):
    """A drain (or the end of a bounded source) moves the watermark to the end of time:
    the periods that ended by the wall clock are released, and the firing for the first
    period that has not ended yet releases nothing — not the rest of the horizon as
    empty periods — and ends the schedule; the state stays at the last period
    released, for a restarted stream to resume from."""
    hour = 3600.0
    origin = float(int(time.time())) - 2.5 * hour  # periods 1-2 have ended, 3 has not
    clock = PeriodClock(hour, origin)
    rng = np.random.default_rng(5)
    _, _, record, _ = schedule_family("tabular")

    def at(period):
        return [dict(record(period, i, rng), ts=origin + (period - 1) * hour + i)
                for i in range(10)]
    events = (BeamTestStream()
              .add_elements(at(1)).advance_watermark_to(origin + hour)
              .add_elements(at(2)).advance_watermark_to(origin + 2 * hour)
              .add_elements(at(3))  # period 3 is under way when the drain comes
              .advance_watermark_to_infinity())
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    open_state(state, tabular.initial_document(tabular_synthesizer(SCHEDULE_T), seed=SEED))
    capsys.readouterr()
    stream_events(tabular.TabularJob(), state, out, events, clock=clock, horizon=SCHEDULE_T)
    log = [json.loads(line) for line in capsys.readouterr().err.splitlines()
           if line.startswith('{"event"')]
    assert read_manifest(out)["periods_released"] == [1, 2]
    assert load_state(state)["synthesizer_state"]["period"] == 2
    assert load_state(state)["pending"] is None
    assert [(e["event"], e["period"]) for e in log
            if e["event"] in ("closed", "released", "drain")] == [
        ("closed", 1), ("released", 1), ("closed", 2), ("released", 2), ("drain", 3)]
