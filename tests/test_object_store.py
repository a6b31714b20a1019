"""The jobs on an object store: a real S3-compatible server (moto, ``conftest.s3_server``)
reached through Beam's S3 filesystem, as on AWS.

Each job runs twice through the command line, once on local paths and once on
``s3://`` paths, with the same seed: the releases must be the same bytes.  The state's
fencing and ownership are exercised on the server: a conditional create of an existing
name is refused (HTTP 412), a stale step cannot commit, a held lease refuses a second
step without touching anything, and a lease whose owner died expires.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from continual_synth.mechanisms.errors import StateBusy, StateError
from continual_synth.pipelines.release import conditional_create
from continual_synth.pipelines.release.lifecycle import Lease, Ownership, StateDir
from continual_synth.transforms import storage
from continual_synth.transforms.files import write_file

from helpers_panels import (cli, long_table, markov_codes, period_table, snapshot,
                            sorted_records)
from helpers_processes import cli_child

PRIVACY = ["--window", "2", "--horizon", "3", "--rho", "5", "--neighbor", "add-remove",
           "--seed", "9", "--shards", "2", "--missing-value", "0"]  # a panel stream needs it
PEOPLE, PERIODS = 150, 3




def objects(s3, prefix: str) -> dict:
    """Every object under ``s3://bucket/prefix`` (relative key → bytes)."""
    key_prefix = prefix.split(f"s3://{s3.bucket}/", 1)[1].rstrip("/") + "/"
    pages = s3.client.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket,
                                                                Prefix=key_prefix)
    return {item["Key"][len(key_prefix):]:
            s3.client.get_object(Bucket=s3.bucket, Key=item["Key"])["Body"].read()
            for page in pages for item in page.get("Contents", [])}


def release(files: dict) -> dict:
    """The published files of a release (hidden staging and lease files excluded)."""
    return {name: data for name, data in files.items() if not name.startswith(".")}


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    """A panel split into two Parquet parts (a dataset folder) and per-period files."""
    root = tmp_path_factory.mktemp("object-store")
    table = long_table(markov_codes(PEOPLE, PERIODS, seed=5))
    half = table.num_rows // 2
    for part, rows in enumerate((table.slice(0, half), table.slice(half))):
        write_file(rows, str(root / "panel" / f"part-{part}.parquet"), "parquet")
    for period in range(1, PERIODS + 1):
        write_file(period_table(table, period), str(root / "periods" / f"p{period}.parquet"),
                   "parquet")
    return root


def upload(s3, local_dir, url: str) -> None:
    storage.configure(s3.beam_args)  # a local job before may have configured no S3 options
    for name in sorted(os.listdir(local_dir)):
        with open(os.path.join(local_dir, name), "rb") as handle:
            storage.write_bytes(storage.join(url, name), handle.read())


def test_the_server_honours_conditional_create(s3_server):
    storage.configure(s3_server.beam_args)
    path = storage.join(s3_server.prefix(), "once")
    create = conditional_create.for_path(path)  # runs the probe too
    assert create.create(path, b"first") is True
    assert create.create(path, b"second") is False  # HTTP 412: nothing written
    assert storage.read_bytes(path) == b"first"

    class IgnoresCondition(conditional_create.S3Create):
        def create(self, path, data):
            storage.write_bytes(path, data)
            return True

    with pytest.raises(StateError, match="does not honour conditional create"):
        IgnoresCondition().check_honoured(s3_server.prefix())
    with pytest.raises(StateError, match="cannot live on hdfs://"):
        conditional_create.for_path("hdfs://namenode/state")


@pytest.fixture(scope="module", autouse=True)
def fixed_creation_time():
    """Byte-identical manifests across the local and the S3 runs: fix the manifests'
    creation time (``SOURCE_DATE_EPOCH``, see :mod:`continual_synth.pipelines.release.publication`)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SOURCE_DATE_EPOCH", "1790000000")
        yield


@pytest.fixture(scope="module")
def local_run(panel):
    """The reference: ``window run`` on local paths (printed manifest, release folder)."""
    code, printed = cli("window", "run", "--input", str(panel / "panel"), "--output",
                        str(panel / "local-run"), *PRIVACY)
    assert code == 0, printed
    return printed, str(panel / "local-run")


def test_window_run_on_s3_releases_what_the_local_run_releases(s3_server, panel, local_run,
                                                               tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a URL must never become a local folder here
    root = s3_server.prefix()
    upload(s3_server, panel / "panel", f"{root}/panel")
    local, local_out = local_run
    code, remote = cli("window", "run", "--input", f"{root}/panel", "--output",
                       f"{root}/out", *PRIVACY, *s3_server.beam_args)
    assert code == 0, remote
    assert remote == local
    published = release(objects(s3_server, f"{root}/out"))
    assert len(published) > 2 and published == snapshot(local_out)
    assert not [name for name in objects(s3_server, f"{root}/out") if name.startswith(".")]
    assert os.listdir(tmp_path) == []  # no ./s3: folder

    code, message = cli("window", "run", "--input", f"{root}/panel", "--output",
                        f"{root}/out", *PRIVACY, *s3_server.beam_args)
    assert code == 2 and "already holds a release" in message
    code, message = cli("window", "run", "--input", f"{root}/missing", "--output",
                        f"{root}/out2", *PRIVACY, *s3_server.beam_args)
    assert code == 2 and f"{root}/missing: no such file or directory" in message


def test_a_run_that_loses_the_race_to_publish_leaves_no_lease_in_the_release(s3_server):
    """Two runs into one new output pass the first freshness check together; the one
    that takes the publication lease second finds the other's manifest and is refused.
    Its lease must not stay in the published release (``OUTPUT/.leases/``), which
    ``docs/object_stores.md`` says is removed once the manifest is published."""
    from continual_synth.mechanisms.errors import InputError
    from continual_synth.pipelines.release import lifecycle
    storage.configure(s3_server.beam_args)
    out = storage.join(s3_server.prefix(), "raced")
    storage.write_bytes(storage.join(out, "manifest.json"), b"{}")  # the winner's
    with pytest.raises(InputError, match="already holds a release"):
        with lifecycle._output_claim(out):
            lifecycle.check_fresh_output(out)
    assert list(objects(s3_server, out)) == ["manifest.json"]


def test_window_steps_with_s3_state_release_what_the_local_run_releases(s3_server, panel,
                                                                        local_run,
                                                                        monkeypatch):
    """``run`` and ``init`` + T × ``step`` are the same algorithm (tests/test_window_jobs.py
    checks it locally): the steps on S3 release the local run's records."""
    root = s3_server.prefix()
    upload(s3_server, panel / "periods", f"{root}/periods")
    code, _ = cli("window", "init", "--state", f"{root}/state", *PRIVACY, *s3_server.beam_args)
    assert code == 0
    step = ["window", "step", "--state", f"{root}/state", "--output", f"{root}/out",
            *s3_server.beam_args]
    code, summary = cli(*step, "--input", f"{root}/periods/p1.parquet")
    assert code == 0 and summary["status"] == "ingested", summary

    # killed (SIGKILL) after period 2's files were moved into place, before its manifest:
    # readers still see period 1's manifest; a re-run publishes the committed plan
    manifest_before = objects(s3_server, f"{root}/out")["manifest.json"]
    monkeypatch.setattr(Lease, "SECONDS", 3.0)  # the dead step's lease expires in 3 s
    code, stderr = cli_child([*step, "--input", f"{root}/periods/p2.parquet"],
                             env={"CONTINUAL_SYNTH_CRASH_AT": "published"},
                             lease_seconds=Lease.SECONDS)  # not inherited by a child
    assert code == -signal.SIGKILL, stderr  # killed by SIGKILL at the phase
    crashed = objects(s3_server, f"{root}/out")
    assert crashed["manifest.json"] == manifest_before
    assert any(name.startswith("synthetic-t0002-") for name in crashed)
    code, message = cli(*step, "--input", f"{root}/periods/p2.parquet")
    assert code == 2 and "another step owns this state" in message  # until the lease expires
    code, summary = cli(*step, "--input", f"{root}/periods/p2.parquet", "--wait", "20")
    assert code == 0 and summary["status"] == "released" and summary["resumed"] is True
    code, summary = cli(*step, "--input", f"{root}/periods/p3.parquet")
    assert code == 0 and summary["status"] == "released" and summary["resumed"] is False
    assert sorted_records(f"{root}/out").equals(sorted_records(local_run[1]))
    manifest = json.loads(objects(s3_server, f"{root}/out")["manifest.json"])
    for key in ("periods_released", "rho_spent", "n_pad", "num_synthetic", "error_bound"):
        assert manifest[key] == local_run[0][key]

    # the state: old versions retired (names kept), no orphan run folders, leases tidied
    state_objects = objects(s3_server, f"{root}/state")
    versions = sorted(name for name in state_objects if name.startswith("versions/"))
    assert versions == [f"versions/v{v:06d}.json" for v in range(7)]
    assert [len(state_objects[name]) == 0 for name in versions] == [True] * 5 + [False] * 2
    s3_version, s3_state = StateDir(f"{root}/state").read("window")
    assert s3_version == 6 and s3_state["pending"] is None
    used = StateDir.named_runs(s3_state)
    assert {name.split("/")[1] for name in state_objects if name.startswith("runs/")} == used
    assert [name for name in state_objects if name.startswith("leases/")] == [
        "leases/000004.json", "leases/000004.released"]  # 4 steps ran; older leases tidied

    # a re-run of an ingested period reads nothing, spends nothing, changes nothing
    before = (objects(s3_server, f"{root}/state"), objects(s3_server, f"{root}/out"))
    code, summary = cli("window", "step", "--state", f"{root}/state", "--input",
                        f"{root}/periods/p3.parquet", "--output", f"{root}/out",
                        *s3_server.beam_args)
    assert code == 0 and summary["status"] == "already-released"
    after = (objects(s3_server, f"{root}/state"), objects(s3_server, f"{root}/out"))
    assert {k: v for k, v in after[0].items() if not k.startswith("leases/")} == \
        {k: v for k, v in before[0].items() if not k.startswith("leases/")}
    assert after[1] == before[1]


def test_beams_s3_client_reuses_its_boto3_session(s3_server, panel, monkeypatch):
    """Beam's S3 filesystem opened a new boto3 session (botocore's models loaded again,
    about 0.1 CPU s) for every call: 6 for a ``window init`` and 62-152 for each ``window
    step`` of 50 000 people on S3, most of the step's time.  ``storage.reuse_s3_clients``
    gives it one session per thread: a few at most for an init and two steps."""
    import boto3
    made = []
    original = boto3.session.Session.__init__

    def counting(self, *args, **kwargs):
        made.append(threading.current_thread().name)
        original(self, *args, **kwargs)

    monkeypatch.setattr(boto3.session.Session, "__init__", counting)
    root = s3_server.prefix()
    upload(s3_server, panel / "periods", f"{root}/periods")
    code, _ = cli("window", "init", "--state", f"{root}/state", *PRIVACY, *s3_server.beam_args)
    assert code == 0
    for period in (1, 2):
        code, summary = cli("window", "step", "--state", f"{root}/state", "--output",
                            f"{root}/out", "--input", f"{root}/periods/p{period}.parquet",
                            *s3_server.beam_args)
        assert code == 0, summary
    assert len(made) <= 4, made


def test_colliding_steps_on_s3_state_are_refused(s3_server, panel):
    root = s3_server.prefix()
    storage.configure(s3_server.beam_args)
    upload(s3_server, panel / "periods", f"{root}/periods")
    code, _ = cli("window", "init", "--state", f"{root}/state", *PRIVACY, *s3_server.beam_args)
    assert code == 0
    store = StateDir(f"{root}/state")
    version, state = store.read("window")

    # ownership: while one step owns the state a second is refused, touching nothing
    before = objects(s3_server, f"{root}/state")
    with Ownership(store):
        code, message = cli("window", "step", "--state", f"{root}/state", "--input",
                            f"{root}/periods/p1.parquet", "--output", f"{root}/out",
                            *s3_server.beam_args)
        assert code == 2 and "another step owns this state (pid" in message
        held = objects(s3_server, f"{root}/state")
    assert {k: v for k, v in held.items() if not k.startswith("leases/")} == before
    assert not objects(s3_server, f"{root}/out")

    # --wait: a second owner waits for the first to release
    first = Ownership(store).__enter__()
    started = time.monotonic()
    threading.Timer(0.5, first.__exit__).start()
    with Ownership(store, wait=10):
        assert time.monotonic() - started >= 0.4

    # a stream's ownership is its own lease: its steps (and a manual step) run beside it,
    # while a second stream is refused
    with Ownership(store, role="stream"):
        with Ownership(store):
            pass
        with pytest.raises(StateBusy, match="another stream is releasing into this state"):
            Ownership(store, role="stream").__enter__()
    assert "stream-leases/000001.released" in objects(s3_server, f"{root}/state")

    # fencing: of two runs that read version 0, only the first commits version 1
    assert store.commit(version, {**state, "note": "first"}) == 1
    with pytest.raises(StateError, match="another step committed state version 1 first"):
        store.commit(version, {**state, "note": "second"})
    assert store.read("window")[1]["note"] == "first"


def test_a_dead_owners_lease_expires(s3_server):
    storage.configure(s3_server.beam_args)
    leases = storage.join(s3_server.prefix(), "leases")
    create = conditional_create.for_path(leases)
    # 2 s: long enough that the refused acquire below happens inside the lease on a
    # loaded machine (0.6 s once let it expire first: "DID NOT RAISE")
    dead = Lease(leases, create, seconds=2.0).acquire("state")
    dead._stop.set()  # killed: it renews no more and never releases
    with pytest.raises(StateError, match="another step owns this state"):
        Lease(leases, create).acquire("state")
    started = time.monotonic()
    alive = Lease(leases, create, wait=10).acquire("state")
    assert 0.2 < time.monotonic() - started < 10 and alive.number == dead.number + 1
    alive.release()


def test_tabular_steps_with_s3_state_release_what_local_steps_release(s3_server, tmp_path):
    """The baseline keeps its sampled increment in the state (an array file) until it
    is published: the state's array files go through S3 too."""
    from continual_synth.mechanisms.marginals import Domain, all_workloads
    from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
    from continual_synth.pipelines.families import driver, tabular
    import numpy as np
    import pyarrow as pa

    domain = Domain({"a": [0, 1, 2], "c": [0, 1]})
    rng = np.random.default_rng(3)
    root = s3_server.prefix()
    storage.configure(s3_server.beam_args)
    places = {"local": (str(tmp_path / "state"), str(tmp_path / "out"), str(tmp_path)),
              "s3": (f"{root}/state", f"{root}/out", root)}
    batch = pa.table({"a": rng.integers(0, 3, 60), "c": rng.integers(0, 2, 60)})
    for _, _, inputs in places.values():
        write_file(batch, storage.join(inputs, "p1.csv"), "csv")
    summaries = {}
    for where, (state, out, inputs) in places.items():
        synthesizer = TabularSynthesizer.create(domain=domain, workloads=all_workloads(domain),
                                                epsilon=2.0, method="baseline", fit="mw")
        driver.init(state, tabular.initial_document(synthesizer, seed=5))
        summaries[where] = driver.step(state, storage.join(inputs, "p1.csv"), out,
                                       beam_args=s3_server.beam_args)
    assert summaries["s3"] == summaries["local"] and summaries["s3"]["rows"] > 0
    assert release(objects(s3_server, f"{root}/out")) == snapshot(str(tmp_path / "out"))
    assert not [name for name in objects(s3_server, f"{root}/state") if name.startswith("runs/")]


def test_evaluate_reads_a_release_and_writes_its_report_on_s3(s3_server, panel, local_run,
                                                              tmp_path, monkeypatch):
    """``evaluate window`` with the release and the report on s3://: the same summary as
    on local paths, and the plots land in the bucket (no ./s3: folder)."""
    monkeypatch.chdir(tmp_path)
    root = s3_server.prefix()
    _, local_out = local_run
    upload(s3_server, local_out, f"{root}/release")
    code, local = cli("evaluate", "window", "--truth", str(panel / "panel"), "--synthetic",
                      local_out, "--report", str(tmp_path / "report"))
    assert code == 0, local
    code, remote = cli("evaluate", "window", "--truth", str(panel / "panel"), "--synthetic",
                       f"{root}/release", "--report", f"{root}/report", *s3_server.beam_args)
    assert code == 0, remote
    def without_path(summary):
        return {key: value for key, value in summary.items() if key != "synthetic"}
    assert remote["synthetic"] == f"{root}/release"
    assert without_path(remote) == without_path(local)
    report = objects(s3_server, f"{root}/report")
    assert without_path(json.loads(report["summary.json"])) == without_path(json.loads(
        (tmp_path / "report" / "summary.json").read_bytes()))
    assert {"window_error.png", "quarterly_queries.png"} <= set(report)
    assert report["window_error.png"].startswith(b"\x89PNG")
    assert sorted(os.listdir(tmp_path)) == ["report"]  # no ./s3: folder
    # a report inside another release on the store is refused, not written into it
    upload(s3_server, local_out, f"{root}/other")
    before = objects(s3_server, f"{root}/other")
    code, message = cli("evaluate", "window", "--truth", str(panel / "panel"), "--synthetic",
                        f"{root}/release", "--report", f"{root}/other/report",
                        *s3_server.beam_args)
    assert code == 2 and f"the release directory {root}/other (it holds manifest.json)" \
        in message, message
    assert objects(s3_server, f"{root}/other") == before


def test_an_s3_endpoint_that_does_not_answer_is_a_one_line_error():
    """boto3 would retry for minutes and end in a traceback; the job says it at once."""
    started = time.monotonic()
    code, message = cli("window", "run", "--input", "s3://bucket/panel/", "--output",
                        "s3://bucket/out", *PRIVACY, "--s3_endpoint_url=http://127.0.0.1:1",
                        "--s3_region_name=us-east-1")
    assert code == 2 and "\n" not in message
    assert "--s3_endpoint_url http://127.0.0.1:1: no S3 server answers there" in message
    assert time.monotonic() - started < 30


def test_a_missing_bucket_is_a_one_line_error_before_anything_is_read(s3_server, panel,
                                                                       tmp_path):
    """Guards against the run reading its input, then Beam failing its first write in a
    traceback (NoSuchBucket), and init failing in the conditional-create probe, exit 1."""
    for argv in (["window", "run", "--input", str(panel / "panel"), "--output",
                  "s3://no-such-bucket/out", *PRIVACY],
                 ["window", "init", "--state", "s3://no-such-bucket/state", *PRIVACY[:-2]]):
        code, message = cli(*argv, *s3_server.beam_args)
        option = "--output" if "run" in argv else "--state"
        assert code == 2 and "\n" not in message, message
        assert f"{option} s3://no-such-bucket/" in message and \
            "bucket 'no-such-bucket' does not exist" in message
    assert not os.listdir(tmp_path)


def test_a_stream_watching_an_s3_prefix_releases_what_the_local_run_releases(
        s3_server, panel, local_run):
    """``stream`` with --watch, --state and --output on S3 (a prefix exists only once it
    holds an object: --watch on S3 is not refused as "no such directory or prefix")."""
    root = s3_server.prefix()
    storage.configure(s3_server.beam_args)
    code, message = cli("window", "stream", "--watch", "s3://no-such-bucket/land", "--state",
                        f"{root}/state", "--output", f"{root}/out", *PRIVACY,
                        *s3_server.beam_args)
    assert code == 2 and "bucket 'no-such-bucket' does not exist" in message
    for period in range(1, PERIODS + 1):
        storage.write_bytes(f"{root}/land/period_{period:02d}.parquet",
                            (panel / "periods" / f"p{period}.parquet").read_bytes())
    code, summary = cli("window", "stream", "--watch", f"{root}/land", "--state",
                        f"{root}/state", "--output", f"{root}/out", "--until-period",
                        str(PERIODS), "--poll-interval", "0.2", *PRIVACY,
                        *s3_server.beam_args)
    assert code == 0 and summary["periods_released"] == list(range(1, PERIODS + 1)), summary
    assert not storage.list_files(f"{root}/state/rejected")  # the dead letter is empty
    assert sorted_records(f"{root}/out").equals(sorted_records(local_run[1]))


def test_an_event_stream_with_its_state_on_s3_releases_what_the_local_run_releases(
        s3_server, panel, local_run):
    """The event-time stream (``TestStream`` in place of Pub/Sub) with state and output on
    S3: each period's step builds Beam pipelines of its own, and a pipeline hands its
    options to ``FileSystems`` when it is built, so the steps must get the store's
    settings (with none, the first step would reset them and go to AWS)."""
    import apache_beam as beam
    import pyarrow.parquet as pq
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    from apache_beam.testing.test_stream import TestStream

    from continual_synth.pipelines.families import jobs
    from continual_synth.pipelines.streaming.stream import (_stopping, event_pipeline,
                                                            step_arguments)
    from continual_synth.transforms.stream_sources import PeriodClock

    root = s3_server.prefix()
    storage.configure(s3_server.beam_args)
    code, _ = cli("window", "init", "--state", f"{root}/state", *PRIVACY, *s3_server.beam_args)
    assert code == 0
    events = TestStream()
    for period in range(1, PERIODS + 1):
        rows = pq.read_table(panel / "periods" / f"p{period}.parquet").to_pylist()
        events = events.add_elements([{**row, "ts": 100.0 * period - 50} for row in rows])
        events = events.advance_watermark_to(100.0 * period)
    options = PipelineOptions(list(s3_server.beam_args))
    options.view_as(StandardOptions).streaming = True
    with _stopping(), beam.Pipeline(options=options) as pipeline:
        event_pipeline(pipeline, jobs.PanelJob("window"), f"{root}/state", f"{root}/out",
                       clock=PeriodClock(100, 0), timestamp_col="ts",
                       records=pipeline | events.advance_watermark_to_infinity(),
                       distinct_rows=True, horizon=PERIODS,
                       beam_args=step_arguments(s3_server.beam_args))
    storage.configure(s3_server.beam_args)
    assert sorted_records(f"{root}/out").equals(sorted_records(local_run[1]))


def test_a_run_that_listed_before_a_tidy_does_not_take_a_tidied_lease(s3_server):
    """A run pauses between its listing (lease 1 released) and its create; meanwhile two
    runs take leases 2 and 3, and the owner of 3 tidies 1 and 2 away.  The paused run's
    create of 2 then succeeds on the store: it must see lease 3 and not hold 2 (else two
    live owners at once)."""
    import threading

    storage.configure(s3_server.beam_args)
    leases = storage.join(s3_server.prefix(), "leases")
    real = conditional_create.for_path(leases)
    listed, resume = threading.Event(), threading.Event()

    class PausedOnce:
        paused = False

        def create(self, path, data):
            if not PausedOnce.paused:
                PausedOnce.paused = True
                listed.set()
                resume.wait(30)
            return real.create(path, data)

        def put(self, path, data):
            return real.put(path, data)

    Lease(leases, real).acquire("state").release()
    stale = Lease(leases, PausedOnce(), wait=30)
    taken = threading.Thread(target=stale.acquire, args=("state",))
    taken.start()
    assert listed.wait(30)
    Lease(leases, real).acquire("state").release()  # lease 2
    holder = Lease(leases, real).acquire("state")   # lease 3: tidies 1 and 2
    assert holder.number == 3
    resume.set()
    time.sleep(1.0)  # the paused run creates 2, finds 3 held, and waits for it
    assert stale.number is None
    holder.release()
    taken.join(30)
    assert stale.number == 4  # it took the lease once it was free, above the holder's
    stale.release()


def test_tabular_run_and_evaluate_read_the_domain_file_from_s3(s3_server, tmp_path,
                                                               monkeypatch):
    """``tabular run --domain s3://…`` reads the domain through Beam's FileSystems (it
    was read with ``open``), and ``evaluate tabular`` without ``--domain`` scores the
    release over the domain its manifest records: the same summary as on local paths."""
    import numpy as np
    import pyarrow as pa

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(4)
    stream = pa.table({"period": np.repeat(np.arange(1, 4), 40),
                       "a": rng.integers(0, 3, 120), "c": rng.integers(0, 2, 120)})
    domain = json.dumps({"a": [0, 1, 2], "c": [0, 1]}).encode()
    root = s3_server.prefix()
    storage.configure(s3_server.beam_args)
    local = {"stream": str(tmp_path / "stream.parquet"), "domain": str(tmp_path / "d.json"),
             "out": str(tmp_path / "out")}
    remote = {"stream": f"{root}/stream.parquet", "domain": f"{root}/d.json",
              "out": f"{root}/out"}
    for paths in (local, remote):
        write_file(stream, paths["stream"], "parquet")
        storage.write_bytes(paths["domain"], domain)
    summaries = {}
    for where, paths in (("local", local), ("s3", remote)):
        extra = s3_server.beam_args if where == "s3" else []
        code, out = cli("tabular", "run", "--input", paths["stream"], "--domain",
                        paths["domain"], "--output", paths["out"], "--epsilon", "4",
                        "--horizon", "3", "--seed", "2", *extra)
        assert code == 0, out
        code, summaries[where] = cli("evaluate", "tabular", "--truth", paths["stream"],
                                     "--synthetic", paths["out"], "--last", "2", *extra)
        assert code == 0, summaries[where]
        assert summaries[where]["domain"] == f"{paths['out']}/manifest.json"
    assert release(objects(s3_server, remote["out"])).keys() == set(
        os.listdir(local["out"]))
    def scores(summary):
        return summary["average_last"], summary["sampling_floor"]
    assert scores(summaries["s3"]) == scores(summaries["local"])
    assert sorted(os.listdir(tmp_path)) == ["d.json", "out", "stream.parquet"]  # no ./s3:


def test_tabular_example_writes_its_stream_and_domain_to_s3(s3_server, tmp_path,
                                                            monkeypatch):
    """``tabular example --output s3://…``: the stream and its domain land in the bucket,
    the same bytes as a local example (the domain was written with ``open``)."""
    monkeypatch.chdir(tmp_path)
    root = s3_server.prefix()
    args = ["tabular", "example", "--batch-size", "20", "--periods", "2"]
    code, local = cli(*args, "--output", str(tmp_path / "example"))
    assert code == 0, local
    code, remote = cli(*args, "--output", f"{root}/example", *s3_server.beam_args)
    assert code == 0, remote
    assert remote["domain"] == f"{root}/example/domain.json"
    assert objects(s3_server, f"{root}/example") == snapshot(str(tmp_path / "example"))
    assert sorted(os.listdir(tmp_path)) == ["example"]  # no ./s3: folder
