"""Fault injection for the release lifecycle (:mod:`continual_synth.pipelines.release.lifecycle`).

* Crashes: for the window, cumulative and tabular (baseline) synthesizers, a step is
  killed with SIGKILL at every phase boundary (``CONTINUAL_SYNTH_CRASH_AT``) in a child
  process — a real kill -9: no handler runs, the kernel drops the lock — then the step
  is re-run and the release finished.  The release files and the ledger must be
  byte-identical to an uninterrupted run with the same seed, and the state must hold no
  orphan private files.  The same matrix with a raised exception instead of a kill (the
  failure paths, in-process) must leave nothing behind after each failure.
* Collisions: 8 simultaneous ``step`` processes on one state, mixing the same and the
  next period's file: exactly one release per period, the ledger charged once per
  published period, no traceback; the losers exit 2 with the ownership message, or
  (``--wait``) finish one after another.

The children run the command line (``continual-synth window step …``, whose ``step`` is
the function the in-process reference calls).  They are forked by a fork server, a new
interpreter that has imported the jobs and runs none (:mod:`helpers_processes`), never
by the test process: a fork of pytest, which holds the threads of earlier Beam
pipelines (gRPC), can deadlock starting its own gRPC server.  Colliding children start
together, at a barrier.
"""
from __future__ import annotations

import os
import shutil
import signal
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.mechanisms.cumulative import CumulativeConfig
from continual_synth.mechanisms.marginals import Domain, all_workloads
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
from continual_synth.mechanisms.window import WindowConfig
from continual_synth.mechanisms.errors import StateError
from continual_synth.pipelines.commands import cli
from continual_synth.pipelines.families import driver, jobs, tabular
from continual_synth.pipelines.release import lifecycle, release_dir
from helpers_panels import cumulative_jobs, window_jobs
from continual_synth.pipelines.release.lifecycle import PHASES, StateDir, load_state
from continual_synth.transforms import storage
from continual_synth.transforms.files import (read_dataset, read_release, release_file_names,
                                              write_file)

from helpers_panels import (clone_incremental, long_table, markov_codes,
                            release_snapshot, snapshot, staging_leftovers,
                            write_period_files)
from helpers_processes import cli_child, cli_children

SEED, SHARDS = 3, 2
T = 4
CRASH_PERIOD = 3  # a period with a release before it (synthetic people to extend)


# --------------------------------------------------------------- the synthesizers


def _panel_files(root, horizon, seed):
    codes = markov_codes(60, horizon, seed=seed)
    return write_period_files(long_table(codes), str(root / "periods"))


def _window(root):
    config = WindowConfig(window=2, horizon=T, rho=4.0, neighbor="add-remove")
    return SimpleNamespace(
        name="window", files=_panel_files(root, T, 1), step=window_jobs.step, cli="window",
        init=lambda state: window_jobs.init(state, config, seed=SEED, num_shards=SHARDS))


def _cumulative(root):
    config = CumulativeConfig(horizon=T, rho=2.0, neighbor="add-remove",
                              public_population=True)
    return SimpleNamespace(
        name="cumulative", files=_panel_files(root, T, 2), step=cumulative_jobs.step,
        cli="cumulative",
        init=lambda state: cumulative_jobs.init(state, config, seed=SEED, num_shards=SHARDS))


def _tabular(root):
    domain = Domain({"a": [0, 1, 2], "b": ["x", "y"]})
    synthesizer = TabularSynthesizer.create(domain=domain, workloads=all_workloads(domain),
                                            epsilon=2.0, method="baseline", fit="mw",
                                            horizon=T)
    rng = np.random.default_rng(4)
    files = []
    os.makedirs(root / "periods")
    for period in range(1, T + 1):
        path = str(root / "periods" / f"p{period}.csv")
        write_file(pa.table({"a": rng.integers(0, 3, 40),
                             "b": pa.array(rng.choice(["x", "y"], 40))}), path, "csv")
        files.append(path)
    return SimpleNamespace(
        name="tabular", files=files, step=driver.step, cli="tabular",
        init=lambda state: driver.init(state, tabular.initial_document(synthesizer,
                                                                       seed=SEED)))


SYNTHESIZERS = {"window": _window, "cumulative": _cumulative, "tabular": _tabular}


def _outcome(state, out):
    """What must not depend on crashes: the release's bytes (the manifest's provenance
    aside: its creation time) and the ledger."""
    return release_snapshot(out, hidden=True), load_state(state)["synthesizer_state"]["ledger"]


def _orphans(state, named_by=None):
    """Run folders that the current state — or, ``named_by="any"``, any committed
    version — does not name: private files nobody will read."""
    store = StateDir(state)
    last = store.read()[0]
    versions = [last] if named_by is None else [  # every version not retired (emptied)
        v for v in range(last + 1) if os.path.getsize(store.version_path(v))]
    used = {path.split(os.sep)[1] for version in versions
            for path in release_dir.read_json(store.version_path(version))["files"].values()}
    return sorted(set(os.listdir(store.runs)) - used)


@pytest.fixture(scope="module", params=sorted(SYNTHESIZERS))
def history(request, tmp_path_factory):
    """A synthesizer, its uninterrupted release, and its state just before CRASH_PERIOD."""
    root = tmp_path_factory.mktemp(request.param)
    synth = SYNTHESIZERS[request.param](root)
    state, out = str(root / "state"), str(root / "out")
    synth.init(state)
    for path in synth.files[:CRASH_PERIOD - 1]:
        synth.step(state, path, out)
    before = str(root / "before")
    os.makedirs(before)
    early = clone_incremental(state, out, before)
    synth.step(state, synth.files[CRASH_PERIOD - 1], out)
    at_crash_period = _outcome(state, out)
    for path in synth.files[CRASH_PERIOD:]:
        synth.step(state, path, out)
    return SimpleNamespace(synth=synth, early=early, at_crash_period=at_crash_period,
                           reference=_outcome(state, out), root=root)


def _finish(synth, state, out, last=T):
    """Step the periods CRASH_PERIOD..last (those already published are no-ops)."""
    for period in range(CRASH_PERIOD, last + 1):
        result = synth.step(state, synth.files[period - 1], out, period=period)
        assert result["status"] in ("released", "ingested", "already-released")


# ----------------------------------------------------------------------- crashes


@pytest.mark.parametrize("phase", PHASES)
def test_kill_at_every_phase_then_rerun_is_byte_identical(history, phase, tmp_path):
    synth = history.synth
    state, out = clone_incremental(*history.early, str(tmp_path))
    path = synth.files[CRASH_PERIOD - 1]
    code, stderr = cli_child([synth.cli, "step", "--state", state, "--input", path,
                              "--output", out], env={lifecycle.CRASH_VARIABLE: phase})
    assert code == -signal.SIGKILL, stderr  # the phase was reached and the child killed
    _finish(synth, state, out, last=CRASH_PERIOD)
    assert _outcome(state, out) == history.at_crash_period
    assert _orphans(state) == [] and staging_leftovers(out) == []


def _killed_step(history, tmp_path, phase):
    """(state, output) of a copy of the history whose step of CRASH_PERIOD was killed
    (SIGKILL) at ``phase``."""
    state, out = clone_incremental(*history.early, str(tmp_path))
    code, stderr = cli_child([history.synth.cli, "step", "--state", state, "--input",
                              history.synth.files[CRASH_PERIOD - 1], "--output", out],
                             env={lifecycle.CRASH_VARIABLE: phase})
    assert code == -signal.SIGKILL, stderr  # the phase was reached and the child killed
    return state, out


def test_after_a_kill_another_file_without_period_is_refused(history, tmp_path):
    """A step killed after its commit leaves its period pending.  A step given another
    period's file and no --period (a scheduler's next run, an input re-exported with other
    bytes) must not publish the pending period in its name and exit 0: it is refused,
    nothing changes, and the interrupted period's own file then completes the release."""
    synth = history.synth
    state, out = _killed_step(history, tmp_path, "committed")

    def files():  # the ownership lock aside: the refused step reclaimed the killed one's
        return {k: v for k, v in snapshot(state).items() if k != "lock"}, snapshot(out)

    before = files()
    with pytest.raises(StateError, match=rf"period {CRASH_PERIOD} was computed but not "
                                         rf"published.*--period {CRASH_PERIOD}"):
        synth.step(state, synth.files[CRASH_PERIOD], out)
    assert files() == before
    assert synth.step(state, synth.files[CRASH_PERIOD - 1], out)["resumed"] is True
    assert _outcome(state, out) == history.at_crash_period


def test_readers_of_the_manifest_never_see_an_unannounced_period(history, tmp_path):
    """A step killed after moving its period's files into place but before the manifest:
    the files are there, the manifest (written last) does not list them, and
    ``read_release`` — the manifest's files — holds the periods before only; the re-run
    publishes the period and its manifest lists every data file."""
    synth = history.synth
    state, out = _killed_step(history, tmp_path, "published")
    on_disk = read_dataset(out)["period"].to_numpy()
    assert on_disk.max() == CRASH_PERIOD  # the unannounced period's files are in place
    assert read_release(out)["period"].to_numpy().max() == CRASH_PERIOD - 1
    _finish(synth, state, out, last=CRASH_PERIOD)
    assert read_release(out)["period"].to_numpy().max() == CRASH_PERIOD
    assert release_dir.read_json(os.path.join(out, "manifest.json"))["files"] == \
        release_file_names(out)


def test_a_raised_failure_at_every_phase_leaves_nothing_behind(history, tmp_path,
                                                                monkeypatch):
    """The failure paths, in-process: an exception at each phase in turn on the same
    period (each attempt resumes what the last one left); after each one, no private
    file is left unnamed and no staging remains; then the release is as uninterrupted."""
    synth = history.synth
    state, out = clone_incremental(*history.early, str(tmp_path))
    path = synth.files[CRASH_PERIOD - 1]

    class Injected(Exception):
        pass

    for phase in PHASES:
        def crash(at, phase=phase):
            if at == phase:
                raise Injected(phase)
        monkeypatch.setattr(lifecycle, "crash_point", crash)
        with pytest.raises(Injected):
            synth.step(state, path, out)
        # a failed run removed its own files (the previous version's are collected by the
        # step that completes)
        assert _orphans(state, named_by="any") == [] and staging_leftovers(out) == [], phase
    monkeypatch.undo()
    _finish(synth, state, out, last=CRASH_PERIOD)
    assert _outcome(state, out) == history.at_crash_period


# -------------------------------------------------------------------- collisions


def _collide(synth, state, out, wait):
    """8 simultaneous steps: 4 with period CRASH_PERIOD's file, 4 with the next one's."""
    periods = [CRASH_PERIOD + i % 2 for i in range(8)]
    results = cli_children([
        [synth.cli, "step", "--state", state, "--input", synth.files[period - 1],
         "--output", out, "--period", str(period), "--wait", str(wait)]
        for period in periods])
    return [(period, *result) for period, result in zip(periods, results)]


@pytest.mark.parametrize("wait", [0, 120])
def test_eight_simultaneous_steps_release_each_period_once(history, tmp_path, wait):
    synth = history.synth
    if wait and synth.name != "window":
        pytest.skip("--wait is the shared lifecycle's: checked once, on the window job")
    state, out = clone_incremental(*history.early, str(tmp_path))
    for attempt in range(10):
        results = _collide(synth, state, out, wait)
        for period, code, stderr in results:
            assert "Traceback" not in stderr, stderr
            assert code in (0, 2), (code, stderr)
            if code == 2:
                assert ("another step owns this state" in stderr
                        or f"period {period} is out of order" in stderr), stderr
        # Without --wait every child may be refused (a next-period child can own the state
        # first and be refused as out of order while the others are refused as collisions);
        # that is correct, and then nothing changed: collide again.  The children start
        # within milliseconds of each other, so this is frequent (1 round in 2 to 4).
        if wait or any(code == 0 for _, code, _ in results):
            break
        assert load_state(state)["fingerprints"] == load_state(
            history.early[0])["fingerprints"]
    if wait == 0:  # the first owner is still running when the others try
        assert sum(code == 0 for _, code, _ in results) >= 1
        assert any("another step owns this state" in stderr for *_, stderr in results)
    else:  # everyone waited its turn: every child of the period's file succeeded
        assert all(code == 0 for period, code, _ in results if period == CRASH_PERIOD)
    seen = max(int(period) for period in load_state(state)["fingerprints"].values())
    assert seen in (CRASH_PERIOD, CRASH_PERIOD + 1)
    released = sorted(set(read_dataset(out)["period"].to_pylist()))
    assert released[-1] == seen  # every period the state took in is published, once:
    ledger = load_state(state)["synthesizer_state"]["ledger"]["entries"]
    labels = [entry["label"] for entry in ledger]
    assert len(labels) == len(set(labels))  # no period charged twice
    assert _orphans(state) == [] and staging_leftovers(out) == []
    _finish(synth, state, out)
    # and what was published is exactly what the uninterrupted run published
    assert _outcome(state, out) == history.reference


# ----------------------------------------------------------------------- fencing


def bare_state(**fields):
    """The least a state version holds (:data:`~continual_synth.pipelines.release.lifecycle.
    REQUIRED_FIELDS`), with ``fields``."""
    return {"kind": "test", "state_id": "t", "pending": None, "output_dir": None,
            "files": {}, "fingerprints": {}, "synthesizer_state": {}, **fields}


def read_bare(store):
    """``store.read()`` without what every version records of itself (its chain and its
    files' digests)."""
    version, state = store.read()
    return version, {key: value for key, value in state.items()
                     if key not in (lifecycle.CHAIN, lifecycle.FILE_DIGESTS)}


def test_a_commit_on_a_superseded_version_is_refused(tmp_path):
    """Fencing: of two commits on the version they both read, the second is refused
    and the first stands (exclusive creation of version N + 1)."""
    store = StateDir(str(tmp_path / "state"))
    store.create(bare_state(who="init"))
    assert store.commit(0, bare_state(who="first")) == 1
    with pytest.raises(StateError, match="another step committed state version 1 first"):
        store.commit(0, bare_state(who="second"))
    assert read_bare(store) == (1, bare_state(who="first"))
    with pytest.raises(StateError, match="already holds a state"):
        store.create(bare_state())


def test_old_versions_are_retired_but_stay_fenced(tmp_path):
    """A completed step empties every version before the previous one (the directory
    does not grow by a state per step), and an emptied version still fences: a run
    that read it cannot commit the version after it."""
    store = StateDir(str(tmp_path / "state"))
    store.create(bare_state(n=0))
    for n in range(1, 6):
        store.commit(n - 1, bare_state(n=n))
        store.retire_old_versions()
    sizes = [os.path.getsize(store.version_path(v)) for v in range(6)]
    assert sizes[:4] == [0, 0, 0, 0] and min(sizes[4:]) > 0
    assert read_bare(store) == (5, bare_state(n=5))
    for stale in range(5):
        with pytest.raises(StateError, match="another step committed"):
            store.commit(stale, bare_state(n=-1))
    assert store.read()[0] == 5


def test_retiring_versions_reads_their_sizes_from_one_listing(tmp_path, monkeypatch):
    """retire_old_versions asks no store for one version's size: on an object store that
    was a request per earlier step, every step (2 more requests a period)."""
    store = StateDir(str(tmp_path / "state"))
    store.create({"kind": "test", "files": {}, "n": 0})
    for n in range(1, 6):
        store.commit(n - 1, {"kind": "test", "files": {}, "n": n})
    monkeypatch.setattr(storage, "size", lambda path: pytest.fail(f"asked the size of {path}"))
    store.retire_old_versions()
    store.retire_old_versions()  # nothing left to empty: writes nothing
    sizes = [os.path.getsize(store.version_path(v)) for v in range(6)]
    assert sizes[:4] == [0, 0, 0, 0] and min(sizes[4:]) > 0


def test_a_stale_owner_publishes_nothing(history, tmp_path, monkeypatch):
    """A step whose state is superseded while it computes (its lock lost: another run
    committed) fails at its commit, publishes nothing and leaves no private file."""
    synth = history.synth
    state, out = clone_incremental(*history.early, str(tmp_path))
    store = StateDir(state)
    job_class = {"tabular": tabular.TabularJob}.get(synth.name, jobs.PanelJob)
    real_compute = job_class.compute

    def compute_then_lose_the_state(self, current, *args, **kwargs):
        new = real_compute(self, current, *args, **kwargs)
        version, _ = store.read()
        store.commit(version, current)  # another run commits first
        return new

    monkeypatch.setattr(job_class, "compute", compute_then_lose_the_state)
    before = snapshot(out)
    with pytest.raises(StateError, match="another step committed state version"):
        synth.step(state, synth.files[CRASH_PERIOD - 1], out)
    assert snapshot(out) == before
    assert _orphans(state) == []
    monkeypatch.undo()
    _finish(synth, state, out, last=CRASH_PERIOD)
    assert _outcome(state, out) == history.at_crash_period


@pytest.mark.parametrize("moment", ["emitting", "staged", "published"])
def test_a_run_paused_past_its_ownership_publishes_nothing(history, tmp_path, monkeypatch,
                                                           moment):
    """A step paused after committing its plan (SIGSTOP, a lease that expired) while
    another run resumed its period and went on: when it wakes, it must neither move files
    into the release nor write the manifest (it would remove the newer run's files or
    roll the manifest back), and says so."""
    synth = history.synth
    state, out = clone_incremental(*history.early, str(tmp_path))
    store = StateDir(state)
    job_class = {"tabular": tabular.TabularJob}.get(synth.name, jobs.PanelJob)

    def another_run_commits():
        version, current = store.read()
        store.commit(version, current)

    if moment == "emitting":  # woken mid-emission: the run that went on collected its files
        def emit_after_the_files_went(self, *args):
            another_run_commits()
            raise FileNotFoundError("runs/…/synthetic/shard-00000.npy")

        monkeypatch.setattr(job_class, "emit", emit_after_the_files_went)
    elif moment == "staged":
        real_emit = job_class.emit

        def emit_then_pause(self, *args):
            result = real_emit(self, *args)
            another_run_commits()
            return result

        monkeypatch.setattr(job_class, "emit", emit_then_pause)
    else:
        real_publish = release_dir.publish_staged_files

        def publish_then_pause(*args, **kwargs):
            moved = real_publish(*args, **kwargs)
            another_run_commits()
            return moved

        monkeypatch.setattr(release_dir, "publish_staged_files", publish_then_pause)
    before = snapshot(out)
    with pytest.raises(StateError, match="after the version .* stops without publishing"):
        synth.step(state, synth.files[CRASH_PERIOD - 1], out)
    after = snapshot(out)
    assert after["manifest.json"] == before["manifest.json"]
    if moment != "published":
        assert after == before


# ---------------------------------------------------------------- whole-run release


@pytest.mark.parametrize("phase", ["staged", "published"])
def test_a_killed_run_publishes_no_release_and_a_rerun_completes_it(phase, tmp_path):
    """``window run`` killed after staging or in the middle of publishing: no manifest,
    so no release; a re-run into the same directory publishes exactly what an
    uninterrupted run does (a crashed run's staging folder stays hidden)."""
    config = WindowConfig(window=2, horizon=3, rho=4.0, neighbor="add-remove")
    panel = str(tmp_path / "panel.parquet")
    write_file(long_table(markov_codes(60, 3, seed=5)), panel, "parquet")
    options = dict(seed=SEED, num_shards=SHARDS)
    reference, out = str(tmp_path / "reference"), str(tmp_path / "out")
    window_jobs.run(panel, reference, config, **options)
    code, stderr = cli_child(  # the command line of window_jobs.run(... **options)
        ["window", "run", "--input", panel, "--output", out,
         "--window", str(config.window), "--horizon", str(config.horizon),
         "--rho", str(config.rho), "--neighbor", config.neighbor,
         "--seed", str(SEED), "--shards", str(SHARDS)],
        env={lifecycle.CRASH_VARIABLE: phase})
    assert code == -signal.SIGKILL, stderr
    assert not os.path.exists(os.path.join(out, "manifest.json"))
    window_jobs.run(panel, out, config, **options)
    assert release_snapshot(out) == release_snapshot(reference)  # provenance aside


def test_colliding_runs_publish_one_release(tmp_path):
    """Three simultaneous ``window run`` into one directory (different seeds): one
    publishes, the others are refused with exit 2; the release is one run's, whole."""
    panel = str(tmp_path / "panel.parquet")
    write_file(long_table(markov_codes(60, 3, seed=6)), panel, "parquet")
    out = str(tmp_path / "out")
    results = cli_children([["window", "run", "--input", panel, "--output", out,
                             "--window", "2", "--horizon", "3", "--rho", "4",
                             "--seed", str(seed), "--shards", "2"] for seed in (1, 2, 3)])
    assert sorted(code for code, _ in results) == [0, 2, 2], results
    assert all("already holds a release" in err for code, err in results if code == 2)
    winner = [seed for seed, (code, _) in zip((1, 2, 3), results) if code == 0][0]
    reference = str(tmp_path / "reference")
    assert cli.main(["window", "run", "--input", panel, "--output", reference, "--window",
                     "2", "--horizon", "3", "--rho", "4", "--seed", str(winner),
                     "--shards", "2"]) == 0
    assert release_snapshot(out) == release_snapshot(reference)  # provenance aside


def test_a_staged_release_cleared_by_another_run_publishes_and_removes_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "synthetic-t0004-s00000.parquet").write_bytes(b"the newer run's file")
    with pytest.raises(StateError, match="staged release is gone"):
        release_dir.publish_staged_files(str(out / ".staging-gone"), str(out),
                                         replace_glob="synthetic-t0004-*")
    assert (out / "synthetic-t0004-s00000.parquet").read_bytes() == b"the newer run's file"


def test_the_same_records_under_another_path_are_not_the_next_period(history, tmp_path):
    """A retry that downloads the period's file to a fresh path (an Airflow attempt's
    temporary folder) must not be ingested, and charged, as the next period: without
    --period it is refused, nothing changes; --period says it really is the next one."""
    synth = history.synth
    state, out = clone_incremental(*history.early, str(tmp_path))
    last = synth.files[CRASH_PERIOD - 2]  # the last period the early state ingested
    copy = str(tmp_path / ("copy" + os.path.splitext(last)[1]))
    shutil.copyfile(last, copy)
    before = snapshot(state), snapshot(out)
    with pytest.raises(StateError, match=rf"same bytes as the file ingested as period "
                                         rf"{CRASH_PERIOD - 1}.*--period {CRASH_PERIOD}"):
        synth.step(state, copy, out)
    assert (snapshot(state), snapshot(out)) == before
    result = synth.step(state, copy, out, period=CRASH_PERIOD)
    assert result["status"] in ("released", "ingested")


@pytest.mark.parametrize("damage", ["manifest", "a file"])
def test_a_release_directory_that_lost_its_files_is_not_stepped_on(history, tmp_path, damage):
    """Someone removed the published release (or one of its files): the next step must
    not write a manifest announcing the periods whose records are gone."""
    synth = history.synth
    state, out = clone_incremental(*history.early, str(tmp_path))
    listed = release_dir.read_json(os.path.join(out, "manifest.json"))["files"]
    os.remove(os.path.join(out, "manifest.json" if damage == "manifest" or not listed
                           else listed[0]))
    before = snapshot(state), snapshot(out)
    with pytest.raises(StateError, match="restore"):
        synth.step(state, synth.files[CRASH_PERIOD - 1], out)
    assert (snapshot(state), snapshot(out)) == before


def test_a_rerun_on_a_folder_that_gained_a_file_is_not_the_next_period(history, tmp_path,
                                                                         capsys):
    """A step read a folder while another part was landing in it, so it ingested the
    folder as period 3 without that part; the same command run again found the folder's
    contents changed (another fingerprint) and took it as period 4, counting the first
    part's records in periods 3 and 4.  Without --period it is refused (exit 2, one
    line, nothing changes); --period says it is the next one (one landing path
    overwritten every period)."""
    synth = history.synth
    state, out = clone_incremental(*history.early, str(tmp_path))
    extension = os.path.splitext(synth.files[0])[1]
    folder = tmp_path / "landing"
    folder.mkdir()
    shutil.copyfile(synth.files[CRASH_PERIOD - 1], folder / f"part-0{extension}")
    assert synth.step(state, str(folder), out)["status"] in ("released", "ingested")
    shutil.copyfile(synth.files[CRASH_PERIOD], folder / f"part-1{extension}")  # landed late
    argv = [synth.cli, "step", "--state", state, "--input", str(folder), "--output", out]
    before = snapshot(state), snapshot(out)
    capsys.readouterr()
    assert cli.main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0, error
    assert f"{folder} was ingested as period {CRASH_PERIOD} with other contents" in error
    assert error.endswith(f"pass --period {CRASH_PERIOD + 1}"), error
    assert (snapshot(state), snapshot(out)) == before
    # the landing folder overwritten with the next period's file: --period takes it
    os.remove(folder / f"part-0{extension}")
    assert cli.main(argv) == 2
    assert (snapshot(state), snapshot(out)) == before
    result = synth.step(state, str(folder), out, period=CRASH_PERIOD + 1)
    assert result["status"] in ("released", "ingested")
    assert load_state(state)["synthesizer_state"]["ledger"] == history.reference[1]
    assert load_state(state)["inputs"][os.path.realpath(folder)] == CRASH_PERIOD + 1


def test_an_input_that_changes_while_the_step_reads_it_is_not_committed(
        history, tmp_path, monkeypatch, capsys):
    """A part landed in the folder after the step had fingerprinted it and before it
    committed: the step read an input its fingerprint does not name.  Nothing is
    committed (committed, the complete folder taken later with --period would count the
    first part twice), and the same command run again takes the complete folder.
    (A panel's half is refused anyway, for the reports it misses: tabular records only.)"""
    synth = history.synth
    if synth.cli != "tabular":
        pytest.skip("a part of a panel period fails the missing-report check first")
    state, out = clone_incremental(*history.early, str(tmp_path))
    extension = os.path.splitext(synth.files[0])[1]
    folder = tmp_path / "landing"
    folder.mkdir()
    table = read_dataset(synth.files[CRASH_PERIOD - 1])
    half = table.num_rows // 2
    write_file(table.slice(0, half), str(folder / f"part-0{extension}"),
               extension.lstrip("."))

    def land_the_other_part(phase):
        if phase == "computed":
            write_file(table.slice(half), str(folder / f"part-1{extension}"),
                       extension.lstrip("."))

    monkeypatch.setattr(lifecycle, "crash_point", land_the_other_part)
    before = snapshot(state), snapshot(out)
    argv = [synth.cli, "step", "--state", state, "--input", str(folder), "--output", out]
    capsys.readouterr()
    assert cli.main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "changed while this step read it" in errors[0], errors
    assert (snapshot(state), snapshot(out)) == before
    monkeypatch.undo()
    assert cli.main(argv) == 0
    assert _outcome(state, out) == history.at_crash_period  # the whole period, once


def test_a_state_saved_before_inputs_were_recorded_steps_on(history, tmp_path, capsys):
    """A state version without ``inputs`` (written by an earlier version) is read and
    stepped as before; the step records its input from then on.  Its earlier periods'
    input locations cannot be recovered (a fingerprint digests a path with the bytes it
    held then), so every step without --period says, in one warning line, which periods
    the re-run check cannot protect and that --period does; a
    step with --period, and a state recorded from period 1, say nothing."""
    synth = history.synth

    def old_state(name):
        state, out = clone_incremental(*history.early, str(tmp_path / name))
        store = StateDir(state)
        version, document = store.read()
        document.pop("inputs", None)
        store.commit(version, document)
        return [synth.cli, "step", "--state", state, "--output", out, "--input"], state

    def warnings():
        return [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]

    step, state = old_state("old")
    capsys.readouterr()
    for period in (CRASH_PERIOD, CRASH_PERIOD + 1):  # still periods 1..2, not CRASH_PERIOD
        assert cli.main(step + [synth.files[period - 1]]) == 0
        [warning] = warnings()
        assert f"periods 1..{CRASH_PERIOD - 1} of this state were ingested before" in warning
        assert "pass --period on each step" in warning
        assert f"periods from {CRASH_PERIOD} on are recorded" in warning
    saved = load_state(state)
    assert saved["inputs"] == {os.path.realpath(synth.files[t - 1]): t
                               for t in (CRASH_PERIOD, CRASH_PERIOD + 1)}
    assert saved["inputs_from"] == CRASH_PERIOD
    # with --period, and on a state recorded from period 1, nothing to say
    step, _ = old_state("with_period")
    assert cli.main(step + [synth.files[CRASH_PERIOD - 1], "--period", str(CRASH_PERIOD)]) == 0
    assert warnings() == []
    fresh, fresh_out = clone_incremental(*history.early, str(tmp_path / "fresh"))
    assert cli.main([synth.cli, "step", "--state", fresh, "--output", fresh_out, "--input",
                     synth.files[CRASH_PERIOD - 1]]) == 0
    assert warnings() == [] and "inputs_from" not in load_state(fresh)
