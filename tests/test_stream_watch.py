"""``stream --watch``: files landing with delays and out of order, duplicates, late and
empty files, kill -9 and SIGTERM, step ↔ stream interchange — every release equal to
``run``'s for the same seed, with each period charged once in the ledger.

The streams run as real processes of the console script (tiny panels, a 0.2 s poll)."""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from continual_synth.mechanisms.errors import StateError
from continual_synth.pipelines.commands.cli import main
from continual_synth.pipelines.release.lifecycle import load_state
from continual_synth.pipelines.streaming.stream import PERIOD_IN_NAME, file_period
from continual_synth.transforms.files import read_dataset, write_file

from helpers_panels import (long_table, markov_codes, period_table, read_manifest,
                            snapshot, sorted_records)

N, T, K, SEED, SHARDS = 150, 4, 2, 7, 2
# a panel stream drops invalid reports, which --missing-value fills
WINDOW = ["--window", str(K), "--horizon", str(T), "--rho", "1", "--seed", str(SEED),
          "--shards", str(SHARDS), "--missing-value", "0"]
CUMULATIVE = ["--horizon", str(T), "--rho", "1", "--seed", str(SEED), "--shards", str(SHARDS),
              "--missing-value", "0"]
ALL = list(range(1, T + 1))  # the periods a whole stream releases
POLL = "0.2"
TIMEOUT = 90


# ------------------------------------------------------------------ helpers


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    """A tiny binary panel: the whole panel, one file per period, and run's releases."""
    root = tmp_path_factory.mktemp("stream")
    table = long_table(markov_codes(N, T, seed=3))
    write_file(table, str(root / "panel.parquet"), "parquet")
    periods = {}
    for period in range(1, T + 1):
        periods[period] = str(root / "periods" / f"period_{period:02d}.parquet")
        os.makedirs(os.path.dirname(periods[period]), exist_ok=True)
        write_file(period_table(table, period), periods[period], "parquet")
    runs = {}
    for kind, options in (("window", WINDOW), ("cumulative", CUMULATIVE)):
        runs[kind] = str(root / f"run-{kind}")
        assert main([kind, "run", "--input", str(root / "panel.parquet"), "--output",
                     runs[kind], *options]) == 0
    return root, table, periods, runs


STARTED = []


@pytest.fixture(autouse=True)
def no_stream_left_running():
    """A failing test must not leave its stream process running."""
    yield
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


def land(source: str, watch: str, name: str = None) -> str:
    """Land a file atomically (hidden name, then rename), as the README asks."""
    target = os.path.join(watch, name or os.path.basename(source))
    hidden = os.path.join(watch, "." + os.path.basename(target))
    shutil.copyfile(source, hidden)
    os.replace(hidden, target)
    return target


def start(kind: str, options, watch, state, out, *extra, env=None) -> subprocess.Popen:
    command = [sys.executable, "-m", "continual_synth", kind, "stream",
               "--watch", str(watch), "--state", str(state), "--output", str(out),
               "--poll-interval", POLL, *options, *extra]
    log = open(os.path.join(os.path.dirname(str(state)), f"{kind}-stream.log"), "ab")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log,
                               env={**os.environ, **(env or {})})
    STARTED.append(process)
    return process


def seen(state) -> int:
    """Periods the state has ingested (0 before the first)."""
    try:
        return load_state(str(state))["synthesizer_state"]["period"]
    except StateError:  # not created yet (or being created)
        return 0


def wait_until(condition, process=None, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not condition():
        assert process is None or process.poll() is None, "the stream exited early"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def finish(process, timeout=TIMEOUT) -> dict:
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, process.returncode
    return json.loads(out)


def events(state, kind: str):
    path = os.path.join(os.path.dirname(str(state)), f"{kind}-stream.log")
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.startswith("{")]


def rejected(state):
    """The dead letter's documents (in the private state directory)."""
    return [json.load(open(path)) for path in sorted(glob.glob(os.path.join(str(state),
                                                                             "rejected", "*")))]


def assert_equals_run(out, state, run_dir):
    """Same records as ``run`` and every period charged exactly once."""
    assert sorted_records(str(out)).equals(sorted_records(run_dir))
    ledger = load_state(str(state))["synthesizer_state"]["ledger"]["entries"]
    labels = [entry["label"] for entry in ledger]
    assert len(labels) == len(set(labels)), labels
    spent = sum(entry["amount"] for entry in ledger)
    assert spent == pytest.approx(read_manifest(run_dir)["rho_spent"], rel=1e-12)
    assert read_manifest(str(out))["rho_spent"] == pytest.approx(spent, rel=1e-12)


# ------------------------------------------------------------------ the watched stream


def write_refused(table, path: str) -> None:
    """A period file the step refuses whole: no records and no value column (a file
    without records but with the columns is a period of missing reports, with the
    streams' --missing-value; a record that is invalid is dropped alone)."""
    write_file(period_table(table, 2).select(["id"]).slice(0, 0), path, "parquet")


def test_out_of_order_duplicate_late_and_empty_files(panel, tmp_path):
    _, table, periods, runs = panel
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    land(periods[3], watch)  # 3 and 4 land before 1 and 2: they wait
    land(periods[4], watch)
    land(periods[4], watch, "period_04_again.parquet")  # same bytes: a duplicate
    land(periods[1], watch)
    process = start("window", WINDOW, watch, state, out, "--until-period", str(T))
    wait_until(lambda: seen(state) >= 1, process)
    # a different file for released period 1 is late: dead letter, never a later period;
    # a file for period 2 without the value column is refused by the step (state
    # untouched): dead letter
    write_file(period_table(table, 1).slice(0, 10), str(tmp_path / "late.parquet"), "parquet")
    land(str(tmp_path / "late.parquet"), watch, "period_01_late.parquet")
    write_refused(table, str(tmp_path / "empty.parquet"))
    land(str(tmp_path / "empty.parquet"), watch, "period_02_empty.parquet")
    wait_until(lambda: len(rejected(state)) >= 2, process)
    assert seen(state) == 1  # 3 and 4 still wait for 2
    land(periods[2], watch)
    summary = finish(process)
    assert summary["periods_released"] == ALL and not summary["pending"]
    assert_equals_run(out, state, runs["window"])
    reasons = {os.path.basename(doc["file"]): (doc["period"], doc["reason"])
               for doc in rejected(state)}
    assert set(reasons) == {"period_01_late.parquet", "period_02_empty.parquet"}
    assert reasons["period_01_late.parquet"][0] == 1
    assert reasons["period_01_late.parquet"][1] == (
        f"period 1 was already ingested (taken from {watch / 'period_01.parquet'}); a late "
        f"file is never counted in a later period")
    assert reasons["period_02_empty.parquet"][0] == 2
    assert "missing column" in reasons["period_02_empty.parquet"][1]
    log = events(state, "window")
    duplicates = [e for e in log if e["event"] == "duplicate"]
    # one poll may list the two copies in either order: one of them is the duplicate
    assert [e["period"] for e in duplicates] == [4]
    assert os.path.basename(duplicates[0]["file"]) in ("period_04.parquet",
                                                       "period_04_again.parquet")
    assert [e["period"] for e in log if e["event"] in ("released", "ingested")] == [1, 2, 3, 4]
    # the counters count the dead letter's records (not "rejected 0", the refusing
    # step's counters lost with its failed pipeline)
    done = [line for line in open(os.path.join(os.path.dirname(str(state)), "window-stream.log"))
            if ": done in " in line]
    assert len(done) == 1 and f"records read {N * T + 10}, rejected 10, " in done[0], done


def test_step_then_stream_then_kill_9_and_restart(panel, tmp_path):
    """init + step for period 1, a stream for 2.., killed (SIGKILL) after releasing 3 and
    restarted: the files of released periods are recognised, nothing is re-spent."""
    _, _, periods, runs = panel
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    for period in (1, 2, 3):
        land(periods[period], watch)
    assert main(["window", "init", "--state", str(state), *WINDOW]) == 0
    assert main(["window", "step", "--state", str(state), "--input",
                 str(watch / "period_01.parquet"), "--output", str(out)]) == 0
    process = start("window", WINDOW, watch, state, out)
    wait_until(lambda: seen(state) >= 3 and load_state(str(state))["pending"] is None, process)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=TIMEOUT)
    before = load_state(str(state))["synthesizer_state"]["ledger"]["entries"]
    restarted = start("window", WINDOW, watch, state, out, "--until-period", str(T))
    land(periods[4], watch)
    summary = finish(restarted)
    assert summary["periods_released"] == ALL and len(rejected(state)) == 0
    assert_equals_run(out, state, runs["window"])
    after = load_state(str(state))["synthesizer_state"]["ledger"]["entries"]
    assert after[:len(before)] == before and len(after) == len(before) + 1
    duplicates = {os.path.basename(e["file"]) for e in events(state, "window")
                  if e["event"] == "duplicate"}
    # re-listed files of released periods are duplicates (those processed before the stop)
    assert duplicates <= {"period_01.parquet", "period_02.parquet", "period_03.parquet"}


def test_a_stream_that_meets_a_step_waits_for_it_and_goes_on(panel, tmp_path):
    """A step owns the state when a landed file's turn comes: the stream logs that it
    waits (once) and releases the period once the step has finished, instead of stopping
    with "another step owns this state" (every later period then waited for a restart)."""
    from continual_synth.pipelines.release.lifecycle import Ownership, StateDir
    _, _, periods, _ = panel
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    assert main(["window", "init", "--state", str(state), *WINDOW]) == 0
    with Ownership(StateDir(str(state))):  # a step that runs for a while
        process = start("window", WINDOW, watch, state, out, "--until-period", "2")
        land(periods[1], watch)
        wait_until(lambda: any(e["event"] == "busy" for e in events(state, "window")),
                   process)
        time.sleep(10 * float(POLL))  # several polls while the step owns the state
        assert process.poll() is None and seen(state) == 0
    land(periods[2], watch)
    summary = finish(process)
    assert summary["periods_ingested"] == 2
    assert [e["event"] for e in events(state, "window")].count("busy") == 1


def test_crash_after_commit_resumes_without_new_noise(panel, tmp_path):
    """Killed between the commit (ledger charged) and the publication of period 1: the
    restarted stream publishes the saved plan; cumulative synthesizer."""
    _, _, periods, runs = panel
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    land(periods[1], watch)
    crashed = start("cumulative", CUMULATIVE, watch, state, out,
                    env={"CONTINUAL_SYNTH_CRASH_AT": "committed"})
    assert crashed.wait(timeout=TIMEOUT) == -signal.SIGKILL
    committed = load_state(str(state))
    assert committed["pending"]["period"] == 1
    for period in range(2, T + 1):
        land(periods[period], watch)
    summary = finish(start("cumulative", CUMULATIVE, watch, state, out,
                           "--until-period", str(T)))
    assert summary["periods_released"] == ALL
    assert_equals_run(out, state, runs["cumulative"])
    resumed = [e for e in events(state, "cumulative") if e.get("resumed")]
    assert [e["period"] for e in resumed] == [1]
    entries = committed["synthesizer_state"]["ledger"]["entries"]
    final = load_state(str(state))["synthesizer_state"]["ledger"]["entries"]
    assert final[:len(entries)] == entries


def stream_past_period_1(periods, tmp_path):
    """A window stream that has released period 1 and waits for period 2's file:
    (process, watch, state, out)."""
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    land(periods[1], watch)
    process = start("window", WINDOW, watch, state, out)
    wait_until(lambda: seen(state) >= 1 and load_state(str(state))["pending"] is None, process)
    return process, watch, state, out


def test_sigterm_stops_cleanly_between_periods(panel, tmp_path):
    _, _, periods, _ = panel
    process, _, state, out = stream_past_period_1(periods, tmp_path)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    summary = finish(process, timeout=30)
    # k = 2: period 1 is ingested, nothing is released yet (not 1, the count ingested)
    assert summary["periods_released"] == [] and summary["periods_ingested"] == 1
    assert not summary["pending"]
    assert not glob.glob(str(out / ".staging-*"))
    # a step carries on from the stream's state (stream ↔ step interchange)
    assert main(["window", "step", "--state", str(state), "--input", periods[2],
                 "--output", str(out)]) == 0
    assert seen(state) == 2


def without_locks(state_dir: str):
    """The state's files but its lock files, whose content is the note of whoever holds
    them at the moment.  CI once saw the first stream's note in the step lock at the
    first snapshot and the lock empty at the second: the state already said period 1
    was published while that step still held the lock, and it let go between the two."""
    return {name: data for name, data in snapshot(state_dir).items()
            if name not in ("lock", "stream-lock")}


def test_a_second_stream_on_a_state_is_refused_while_the_first_runs(panel, tmp_path, capsys):
    """One stream per state: a second one (a redeployed task whose old process still runs)
    is refused at start, touching nothing; once the first has stopped it may start."""
    _, _, periods, _ = panel
    process, watch, state, out = stream_past_period_1(periods, tmp_path)
    before, released = without_locks(str(state)), snapshot(str(out))
    second = ["window", "stream", "--watch", str(watch), "--state", str(state), "--output",
              str(out), "--poll-interval", POLL, *WINDOW]
    capsys.readouterr()
    assert main([*second, "--until-period", "1"]) == 2  # (unlocked: returns 0 at once)
    err = capsys.readouterr().err
    assert "another stream is releasing into this state (pid " in err, err
    assert without_locks(str(state)) == before and snapshot(str(out)) == released
    # the lock files hold the note of whoever holds them: the first stream's step may
    # still hold the step lock at the first snapshot; this process must never take either
    for lock in ("lock", "stream-lock"):
        assert f"pid {os.getpid()} ".encode() not in (state / lock).read_bytes()
    assert process.poll() is None                      # the first one runs on
    process.send_signal(signal.SIGTERM)
    assert finish(process, timeout=30)["periods_ingested"] == 1
    land(periods[2], watch)
    assert main([*second, "--until-period", "2"]) == 0  # free again once it stopped
    assert seen(state) == 2


def test_tabular_stream_equals_run(tmp_path):
    domain = {"a": [0, 1, 2], "b": ["x", "y"]}
    rng = np.random.default_rng(4)
    periods, batch = 3, 60
    stream = pa.table({"period": np.repeat(np.arange(1, periods + 1), batch),
                       "a": rng.integers(0, 3, periods * batch),
                       "b": pa.array(rng.choice(["x", "y"], periods * batch))})
    write_file(stream, str(tmp_path / "stream.parquet"), "parquet")
    (tmp_path / "domain.json").write_text(json.dumps(domain))
    options = ["--domain", str(tmp_path / "domain.json"), "--epsilon", "2", "--seed", "5",
               "--horizon", str(periods)]
    assert main(["tabular", "run", "--input", str(tmp_path / "stream.parquet"), "--output",
                 str(tmp_path / "run"), *options]) == 0
    watch = tmp_path / "watch"
    watch.mkdir()
    for period in (2, 1, 3):  # the period is in the period column (names carry none)
        rows = stream.filter(np.asarray(stream["period"]) == period)
        write_file(rows, str(watch / f"batch-{chr(96 + period)}.parquet"), "parquet")
    assert main(["tabular", "stream", "--watch", str(watch), "--state", str(tmp_path / "state"),
                 "--output", str(tmp_path / "out"), "--poll-interval", POLL,
                 "--until-period", str(periods), *options]) == 0
    released = read_dataset(str(tmp_path / "out")).sort_by([(c, "ascending") for c in
                                                            ("period", "a", "b")])
    expected = read_dataset(str(tmp_path / "run")).sort_by([(c, "ascending") for c in
                                                            ("period", "a", "b")])
    assert released.num_rows == expected.num_rows > 0
    assert released.equals(expected)


# ------------------------------------------------------------------ refusals


def test_state_with_other_options_is_refused(panel, tmp_path, capsys):
    _, _, periods, _ = panel
    state, out, watch = tmp_path / "state", tmp_path / "out", tmp_path / "watch"
    watch.mkdir()
    assert main(["window", "init", "--state", str(state), *WINDOW]) == 0
    before = snapshot(str(state))
    other = [v if v != "1" else "2" for v in WINDOW]  # --rho 2
    assert main(["window", "stream", "--watch", str(watch), "--state", str(state),
                 "--output", str(out), "--until-period", "1", *other]) == 2
    message = capsys.readouterr().err
    assert "created with other options" in message and "rho" in message
    assert snapshot(str(state)) == before and not out.exists()


def exit_code(argv) -> int:
    """``main``'s status, whether argparse (SystemExit) or the command refused."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("argv, subject", [
    (["--poll-interval", "0"], "--poll-interval"),
    (["--poll-interval", "1e-9"], "--poll-interval must be at least"),
    (["--until-period", "0"], "--until-period"),
    (["--until-period", str(T + 1)], f"--until-period {T + 1} is beyond the horizon"),
    (["--poll-intervl", "1"], "did you mean --poll-interval"),
    (["--wait", "-1"], "--wait"),
])
def test_bad_stream_options_exit_2(tmp_path, capsys, argv, subject):
    watch = tmp_path / "watch"
    watch.mkdir()
    assert exit_code(["window", "stream", "--watch", str(watch), "--state",
                      str(tmp_path / "state"), "--output", str(tmp_path / "out"), *WINDOW,
                      *argv]) == 2
    assert subject in capsys.readouterr().err
    assert not (tmp_path / "state").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("watch, state, out", [
    ("w", "s", "w"), ("w", "s", "w/release"), ("w", "w", "o"), ("w", "w/state", "o"),
    ("w", "o/state", "o"), ("w/x", "s", "w")])
def test_overlapping_watch_state_and_output_exit_2(tmp_path, capsys, watch, state, out):
    """Guards against --output = --watch publishing the raw period files beside the
    synthetic ones, and --state = --watch putting the private state in the landing
    directory."""
    (tmp_path / watch).mkdir(parents=True)
    before = snapshot(str(tmp_path))
    assert exit_code(["window", "stream", "--watch", str(tmp_path / watch), "--state",
                      str(tmp_path / state), "--output", str(tmp_path / out), *WINDOW]) == 2
    assert "one is inside the other" in capsys.readouterr().err
    assert snapshot(str(tmp_path)) == before


def test_run_into_its_own_input_directory_exit_2(panel, tmp_path, capsys):
    root, _, _, _ = panel
    assert exit_code(["window", "run", "--input", str(root / "periods"), "--output",
                      str(root / "periods" / "release"), *WINDOW]) == 2
    assert "--output" in capsys.readouterr().err
    assert not (root / "periods" / "release").exists()


def test_a_symbolic_link_is_no_way_around_keeping_state_and_input_out_of_a_release(
        panel, tmp_path, capsys):
    """Paths are compared resolved, not as written: else ``--state link/state`` with
    ``link`` pointing at the release directory puts people's histories in the release
    (exit 0), and ``--output link/release`` with ``link`` pointing at the input writes
    into the input."""
    _, table, periods, _ = panel
    release, inputs = tmp_path / "release", tmp_path / "inputs"
    release.mkdir()
    inputs.mkdir()
    (tmp_path / "to-release").symlink_to(release)
    (tmp_path / "to-inputs").symlink_to(inputs)
    state = tmp_path / "to-release" / "state"
    assert exit_code(["window", "init", "--state", str(state), *WINDOW]) == 0
    before = snapshot(str(tmp_path))
    assert exit_code(["window", "step", "--state", str(state), "--input", periods[1],
                      "--output", str(release)]) == 2
    assert "one is inside the other" in capsys.readouterr().err
    assert snapshot(str(tmp_path)) == before
    write_file(table, str(inputs / "panel.parquet"), "parquet")
    before = snapshot(str(tmp_path))
    assert exit_code(["window", "run", "--input", str(inputs), "--output",
                      str(tmp_path / "to-inputs" / "release"), *WINDOW]) == 2
    assert "one is inside the other" in capsys.readouterr().err
    assert snapshot(str(tmp_path)) == before


def test_a_new_stream_into_another_release_exit_2(panel, tmp_path, capsys):
    """Guards against the state being created, then every file rejected as "already
    holds a release" (into the other release's directory) and the stream waiting
    forever."""
    _, _, periods, runs = panel
    watch = tmp_path / "watch"
    watch.mkdir()
    land(periods[1], watch)
    before = snapshot(runs["window"])
    assert exit_code(["window", "stream", "--watch", str(watch), "--state",
                      str(tmp_path / "state"), "--output", runs["window"], *WINDOW]) == 2
    assert "already holds a release" in capsys.readouterr().err
    assert not (tmp_path / "state").exists() and snapshot(runs["window"]) == before


def test_watch_that_is_a_file_exit_2(panel, tmp_path, capsys):
    _, _, periods, _ = panel
    assert exit_code(["window", "stream", "--watch", periods[1], "--state",
                      str(tmp_path / "state"), "--output", str(tmp_path / "out"), *WINDOW]) == 2
    assert "is a file" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


def test_missing_watch_directory_exit_2(tmp_path, capsys):
    assert exit_code(["window", "stream", "--watch", str(tmp_path / "nowhere"), "--state",
                      str(tmp_path / "state"), "--output", str(tmp_path / "out"),
                      *WINDOW]) == 2
    assert "--watch" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


def test_period_from_name_or_column(tmp_path):
    assert PERIOD_IN_NAME.search("period_07.parquet").group(1) == "7"
    assert PERIOD_IN_NAME.search("2026-wave-12.csv").group(1) == "12"
    assert PERIOD_IN_NAME.search("p07.parquet") is None
    mixed = pa.table({"period": [1, 2], "value": [0, 1]})
    write_file(mixed, str(tmp_path / "x.parquet"), "parquet")
    with pytest.raises(Exception, match="holds 2 different values"):
        file_period(str(tmp_path / "x.parquet"), "period", None)
    write_file(mixed.slice(1), str(tmp_path / "y.parquet"), "parquet")
    assert file_period(str(tmp_path / "y.parquet"), "period", None) == 2
    write_file(pa.table({"period": [2.0], "value": [1]}), str(tmp_path / "z.parquet"), "parquet")
    with pytest.raises(Exception, match="integer column, found type double"):
        file_period(str(tmp_path / "z.parquet"), "period", None)  # the inputs' rule


def test_a_stop_wrapped_by_beam_is_still_a_clean_stop():
    """A SIGTERM that lands while a bundle decodes its input reaches the job as Beam's
    "Error decoding input stream …" raised from the stop (seen once under load): still a
    clean stop; a library error wrapped the same way is not."""
    from continual_synth.mechanisms.errors import InputError
    from continual_synth.pipelines.streaming.stream import (StreamStopped, _is_stop,
                                                            _stopping)

    def wrapped(inner):
        try:
            try:
                raise inner
            except Exception as exn:
                raise ValueError("Error decoding input stream with coder …") from exn
        except ValueError as outer:
            return outer

    assert _is_stop(wrapped(StreamStopped("SIGTERM")))
    assert not _is_stop(wrapped(InputError("bad file")))
    with _stopping():
        raise wrapped(StreamStopped("SIGTERM"))  # ends the stream: nothing escapes
    with pytest.raises(InputError):
        with _stopping():
            raise wrapped(InputError("bad file"))


# ------------------------------------------------------------------ operations


def test_a_period_a_step_left_pending_is_published_without_its_file(panel, tmp_path):
    """A step killed after its commit leaves period 2 computed but unpublished; a stream
    whose landing directory does not hold that file (another machine) publishes it from
    the saved plan at once, then goes on (it does not reject period 2's file as
    "already released", leaving 2 unpublished and waiting forever)."""
    _, _, periods, runs = panel
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    assert main(["window", "init", "--state", str(state), *WINDOW]) == 0
    assert main(["window", "step", "--state", str(state), "--input", periods[1],
                 "--output", str(out)]) == 0
    killed = subprocess.run([sys.executable, "-m", "continual_synth", "window",
                             "step", "--state", str(state), "--input", periods[2],
                             "--output", str(out)], capture_output=True,
                            env={**os.environ, "CONTINUAL_SYNTH_CRASH_AT": "committed"})
    assert killed.returncode == -signal.SIGKILL
    assert load_state(str(state))["pending"]["period"] == 2
    process = start("window", WINDOW, watch, state, out, "--until-period", str(T))
    wait_until(lambda: load_state(str(state))["pending"] is None, process)
    for period in (3, 4):
        land(periods[period], watch)
    summary = finish(process)
    assert summary["periods_released"] == ALL and len(rejected(state)) == 0
    assert_equals_run(out, state, runs["window"])
    resumed = [e for e in events(state, "window") if e.get("resumed")]
    assert [e["period"] for e in resumed] == [2]


def test_copies_corrections_and_restarts(panel, tmp_path):
    """A copy of period 1's file landed as period 2 is rejected, not released and
    charged as 2; a refused file corrected under the same name is released; a restarted
    stream does not reject the rejected files again (adding a document with another,
    wrong reason at each restart)."""
    _, table, periods, runs = panel
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    land(periods[1], watch)
    process = start("window", WINDOW, watch, state, out, "--until-period", "2")
    wait_until(lambda: seen(state) >= 1, process)
    land(periods[1], watch, "period_02_copy.parquet")
    write_refused(table, str(tmp_path / "empty.parquet"))
    land(str(tmp_path / "empty.parquet"), watch, "period_02.parquet")
    wait_until(lambda: len(rejected(state)) >= 2, process)
    assert seen(state) == 1
    land(periods[2], watch, "period_02.parquet")  # corrected, same name
    summary = finish(process)
    assert summary["periods_released"] == [1, 2] and len(rejected(state)) == 2
    reasons = sorted((os.path.basename(d["file"]), d["reason"]) for d in rejected(state))
    assert reasons[0][0] == "period_02.parquet" and "missing column" in reasons[0][1]
    assert reasons[1][0] == "period_02_copy.parquet" and "same bytes" in reasons[1][1]
    assert not [n for n in os.listdir(out) if "reject" in n]  # nothing private in OUT
    restarted = start("window", WINDOW, watch, state, out, "--until-period", str(T))
    for period in (3, 4):
        land(periods[period], watch)
    summary = finish(restarted)
    assert summary["periods_released"] == ALL and len(rejected(state)) == 2
    assert_equals_run(out, state, runs["window"])


class _Job:
    """What ``ReleaseCompletePeriods`` asks of a job, over a fake state."""

    kind = "window"

    def periods_seen(self, state):
        return state["seen"]

    def horizon(self, state):
        return T


def _releaser(tmp_path, accepts):
    """A ``ReleaseCompletePeriods`` whose steps are recorded, not run: ``accepts(path)``
    says whether the step takes a file (else InputError)."""
    from continual_synth.mechanisms.errors import InputError
    from continual_synth.pipelines.streaming import stream

    class Recorded(stream.ReleaseCompletePeriods):
        seen, steps = 0, []

        def _state(self):
            return {"seen": self.seen, "pending": None}

        def _step(self, path, period, resumed):
            if not accepts(path):
                raise InputError(f"{path}: refused")
            self.steps.append((period, path))
            self.seen = period

    releaser = Recorded(_Job(), str(tmp_path), str(tmp_path / "state"), str(tmp_path / "out"),
                        in_format=None, period_col="period", until_period=None,
                        beam_args=[], wait=0.0)
    releaser.rejected = set()
    return releaser


def test_a_stop_request_ends_the_backlog_after_the_period_in_progress(tmp_path):
    """SIGTERM stops the stream without releasing the waiting periods."""
    from continual_synth.pipelines.streaming import stream
    releaser = _releaser(tmp_path, accepts=lambda path: True)
    original = releaser._step

    def step_then_stop(path, period, resumed):
        original(path, period, resumed)
        stream._Stop.requested.set()  # SIGTERM arrives during period 1

    releaser._step = step_then_stop
    arrived = {p: [(f"period_0{p}.parquet", f"f{p}", f"c{p}")] for p in (1, 2, 3)}
    try:
        releaser._release_ready(arrived)
    finally:
        stream._Stop.requested.clear()
    assert releaser.steps == [(1, "period_01.parquet")] and sorted(arrived) == [2, 3]


def test_a_periods_files_are_tried_in_landing_order(tmp_path):
    """The first file of a period the step refuses does not block a later good one."""
    releaser = _releaser(tmp_path, accepts=lambda path: "bad" not in path)
    arrived = {1: [("bad_period_01.parquet", "f1", "c1"), ("period_01.parquet", "f2", "c2"),
                   ("period_01_again.parquet", "f3", "c3")]}
    releaser._release_ready(arrived)
    assert releaser.steps == [(1, "period_01.parquet")] and not arrived
    dead = sorted((d["file"], d["reason"]) for d in rejected(tmp_path / "state"))
    assert dead == [("bad_period_01.parquet", "bad_period_01.parquet: refused"),
                    ("period_01_again.parquet",
                     "period 1 was taken from period_01.parquet (landed first); this file "
                     "is not counted")]
    assert releaser.rejected == {"f1", "f3"}


def test_a_file_is_taken_once_it_is_unchanged_one_listing_later(tmp_path):
    """A period file written in place in two parts (not landed atomically) is taken only
    once a listing finds it as the one before did, so that the first listing after the
    first part does not take the half file as the whole period (a CSV parses either
    way)."""
    releaser = _releaser(tmp_path, accepts=lambda path: True)
    (tmp_path / "w").mkdir()
    releaser.watch_dir = str(tmp_path / "w")
    path = tmp_path / "w" / "period_01.csv"
    known = {}
    path.write_text("id,value\n1,0\n")
    (tmp_path / "w" / ".period_02.csv").write_text("id,value\n")  # hidden: being written
    assert releaser._landed(known) == []            # new: wait one listing
    with open(path, "a") as handle:
        handle.write("2,1\n")
    assert releaser._landed(known) == []            # changed: wait again
    assert releaser._landed(known) == [str(path)]   # unchanged: taken, once
    assert releaser._landed(known) == []


def test_paths_no_longer_listed_are_forgotten_and_a_relanded_file_is_new(tmp_path):
    """The listing state does not keep every path ever seen (memory growing with every
    file a long-running stream sees), and a file removed and landed again with the same
    size and time is taken again (so checked: ingested, rejected, a copy)."""
    releaser = _releaser(tmp_path, accepts=lambda path: True)
    watch = tmp_path / "w"
    watch.mkdir()
    releaser.watch_dir = str(watch)
    known = {}
    paths = []
    for period in range(1, 6):
        path = watch / f"period_{period:02d}.csv"
        path.write_text(f"id,value\n{period},0\n")
        os.utime(path, (1_700_000_000, 1_700_000_000))
        paths.append(path)
    assert releaser._landed(known) == []
    assert releaser._landed(known) == [str(p) for p in paths]
    for path in paths[:4]:  # moved away once taken, as a landing job may do
        path.unlink()
    assert releaser._landed(known) == [] and set(known) == {str(paths[4])}
    paths[0].write_text("id,value\n1,0\n")  # landed again: the same bytes, size and time
    os.utime(paths[0], (1_700_000_000, 1_700_000_000))
    assert releaser._landed(known) == []
    assert releaser._landed(known) == [str(paths[0])]
    assert set(known) == {str(paths[0]), str(paths[4])}


def test_a_file_landed_again_after_removal_is_checked_again(panel, tmp_path):
    """End to end: period 1's file, ingested, is removed and landed again unchanged
    (same bytes and time): a duplicate (logged, ignored), not a silent nothing; a file of
    period 2 that was refused, removed and landed again unchanged is recognised as
    rejected before (no second dead letter)."""
    _, table, periods, _ = panel
    process, watch, state, out = stream_past_period_1(periods, tmp_path)
    first = watch / "period_01.parquet"
    stat = first.stat()
    kept = tmp_path / "kept.parquet"
    shutil.move(str(first), kept)
    write_refused(table, str(tmp_path / "empty.parquet"))
    empty = land(str(tmp_path / "empty.parquet"), watch, "period_02.parquet")
    wait_until(lambda: len(rejected(state)) == 1, process)
    empty_stat = os.stat(empty)
    shutil.move(empty, tmp_path / "empty-kept.parquet")
    # a file beyond the horizon, dead-lettered: listings have run without the two
    land(periods[1], watch, "period_09.parquet")
    wait_until(lambda: len(rejected(state)) == 2, process)
    shutil.move(str(kept), first)
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    shutil.move(str(tmp_path / "empty-kept.parquet"), empty)
    os.utime(empty, ns=(empty_stat.st_atime_ns, empty_stat.st_mtime_ns))

    def duplicates():
        return sorted(os.path.basename(e["file"]) for e in events(state, "window")
                      if e["event"] == "duplicate")
    wait_until(lambda: set(duplicates()) == {"period_01.parquet", "period_02.parquet"},
               process)
    process.send_signal(signal.SIGTERM)
    finish(process, timeout=30)
    assert len(rejected(state)) == 2
    assert seen(state) == 1


def test_a_waiting_file_removed_before_its_turn_is_withdrawn(panel, tmp_path):
    """Period 3's file lands while period 2's has not, then is removed: a ``withdrawn``
    event, and period 2 is released alone; the removed file does not stay queued until
    period 3's turn to be dead-lettered as unreadable."""
    _, _, periods, _ = panel
    process, watch, state, out = stream_past_period_1(periods, tmp_path)
    third = land(periods[3], watch)

    def said(kind):
        return [e for e in events(state, "window") if e["event"] == kind]
    wait_until(lambda: any(e.get("period") == 3 for e in said("waiting")), process)
    os.remove(third)
    wait_until(lambda: said("withdrawn"), process)
    assert said("withdrawn")[0]["period"] == 3
    land(periods[2], watch)
    wait_until(lambda: seen(state) == 2 and load_state(str(state))["pending"] is None, process)
    time.sleep(3 * float(POLL))  # old code: period 3's turn comes at the next listing
    process.send_signal(signal.SIGTERM)
    finish(process, timeout=30)
    assert len(rejected(state)) == 0
    assert seen(state) == 2 and rejected(state) == []


def test_a_folder_is_a_period_once_its_listing_is_unchanged(tmp_path):
    """A period delivered as a folder of parts (``period_02/part-*.parquet``) was never
    listed: no event, no dead letter, the stream stalled.  It is taken once a listing
    finds the same files (names, sizes, times) as the listing before; a part added
    meanwhile makes it wait one more listing."""
    releaser = _releaser(tmp_path, accepts=lambda path: True)
    watch = tmp_path / "w"
    (watch / "period_02").mkdir(parents=True)
    releaser.watch_dir = str(watch)
    (watch / "period_02" / "part-0.parquet").write_bytes(b"zero")
    known = {}
    assert releaser._landed(known) == []
    (watch / "period_02" / ".part-1.parquet").write_bytes(b"on")  # being written
    assert releaser._landed(known) == []
    os.replace(watch / "period_02" / ".part-1.parquet", watch / "period_02" / "part-1.parquet")
    assert releaser._landed(known) == []
    assert releaser._landed(known) == [str(watch / "period_02")]
    assert releaser._landed(known) == []
    (watch / "_tmp").mkdir()  # hidden folders stay hidden
    (watch / "_tmp" / "period_03.parquet").write_bytes(b"x")
    assert releaser._landed(known) == [] and releaser._landed(known) == []


def test_a_period_landed_as_a_folder_is_released(panel, tmp_path):
    """End to end: period 2 lands as a folder of two parts (renamed in); the stream
    releases it as period 2 and the release equals ``run``'s.  A folder that holds no
    data file goes to the dead letter, visibly."""
    _, table, periods, runs = panel
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    land(periods[1], watch)
    process = start("window", WINDOW, watch, state, out, "--until-period", str(T))
    wait_until(lambda: seen(state) >= 1, process)
    second = period_table(table, 2)
    hidden = watch / ".period_02"
    hidden.mkdir()
    half = second.num_rows // 2
    write_file(second.slice(0, half), str(hidden / "part-0.parquet"), "parquet")
    write_file(second.slice(half), str(hidden / "part-1.parquet"), "parquet")
    os.rename(hidden, watch / "period_02")
    (watch / "notes").mkdir()
    (watch / "notes" / "readme.txt").write_text("not data\n")
    for period in (3, 4):
        land(periods[period], watch)
    summary = finish(process)
    assert summary["periods_released"] == ALL and len(rejected(state)) == 1
    assert_equals_run(out, state, runs["window"])
    log = events(state, "window")
    released = {e["period"]: e["file"] for e in log if e["event"] in ("released", "ingested")}
    assert released[2] == str(watch / "period_02")
    (dead,) = rejected(state)
    assert dead["file"] == str(watch / "notes") and "no .parquet" in dead["reason"]
    assert not [n for n in os.listdir(out) if n.startswith(("notes", "period_"))]


def test_files_of_one_listing_are_taken_in_landing_order(tmp_path):
    """Two files for period 5 settled at the same listing: ``wave_05_v2`` landed (was
    written) a second before ``period_05_fix``, which in name order would be tried
    first and released as period 5."""
    releaser = _releaser(tmp_path, accepts=lambda path: True)
    (tmp_path / "w").mkdir()
    releaser.watch_dir = str(tmp_path / "w")
    first, second = tmp_path / "w" / "wave_05_v2.parquet", tmp_path / "w" / "period_05_fix.parquet"
    first.write_bytes(b"first")
    second.write_bytes(b"second")
    os.utime(first, (1_700_000_000, 1_700_000_000))
    os.utime(second, (1_700_000_001, 1_700_000_001))
    known = {}
    assert releaser._landed(known) == []
    assert releaser._landed(known) == [str(first), str(second)]
    # the same modification time: the path decides
    (tmp_path / "w" / "b_period_06.parquet").write_bytes(b"b")
    (tmp_path / "w" / "a_period_06.parquet").write_bytes(b"a")
    for name in ("a_period_06.parquet", "b_period_06.parquet"):
        os.utime(tmp_path / "w" / name, (1_700_000_002, 1_700_000_002))
    assert releaser._landed(known) == []
    assert [os.path.basename(p) for p in releaser._landed(known)] == [
        "a_period_06.parquet", "b_period_06.parquet"]


def test_waiting_files_of_one_period_are_released_in_landing_order(panel, tmp_path):
    """End to end: two files for period 3 listed together while period
    2 is missing, ``wave_03_v2`` landed before ``period_03_fix``; when period 2 lands,
    period 3 is released from ``wave_03_v2`` and ``period_03_fix`` is rejected (by
    landing order, not the other way round by name)."""
    _, table, periods, runs = panel
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    land(periods[1], watch)
    wave = land(periods[3], watch, "wave_03_v2.parquet")
    pq.write_table(period_table(table, 3), str(tmp_path / "fix.parquet"), compression="gzip")
    fix = land(str(tmp_path / "fix.parquet"), watch, "period_03_fix.parquet")  # other bytes
    os.utime(wave, (1_700_000_000, 1_700_000_000))
    os.utime(fix, (1_700_000_001, 1_700_000_001))
    process = start("window", WINDOW, watch, state, out, "--until-period", "3")
    wait_until(lambda: seen(state) >= 1, process)
    land(periods[2], watch)
    summary = finish(process)
    assert summary["periods_released"] == [1, 2, 3] and len(rejected(state)) == 1
    log = events(state, "window")
    released = {e["period"]: e["file"] for e in log if e["event"] in ("released", "ingested")}
    assert released[3] == wave
    (dead,) = rejected(state)
    assert dead["file"] == fix and dead["reason"] == (f"period 3 was taken from {wave} (landed "
                                                      f"first); this file is not counted")


# ------------------------------------------------------------------ what the reasons say

WINDOW_3 = ["--window", "3", "--horizon", str(T), "--rho", "1", "--seed", str(SEED),
            "--missing-value", "0"]


def test_reasons_under_window_3_say_ingested_and_waiting_is_true(panel, tmp_path):
    """``window`` with k = 3 releases nothing until period 3 is in.  Periods 2 and 1 land
    in one listing, period 2 first (landing order): period 2 is not logged as
    ``waiting`` for "period 1 has not landed yet" while period 1's file is in the same
    listing; both are taken at once, so no ``waiting`` event is true.  A copy of period
    1's file under another name, landed after period 1 was ingested and before anything
    was released, is dead-lettered with a reason that says the period was ingested and
    from which file, not "already released"."""
    _, _, periods, _ = panel
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    second = land(periods[2], watch)
    first = land(periods[1], watch)
    os.utime(second, (1_700_000_000, 1_700_000_000))
    os.utime(first, (1_700_000_001, 1_700_000_001))
    process = start("window", WINDOW_3, watch, state, out, "--until-period", "3")
    wait_until(lambda: seen(state) >= 2, process)
    assert read_manifest(str(out))["periods_released"] == []  # ingested, not released
    copy = land(periods[1], watch, "period_01_copy.parquet")
    wait_until(lambda: len(rejected(state)) >= 1, process)
    land(periods[3], watch)
    finish(process)
    (dead,) = rejected(state)
    assert dead["file"] == copy and dead["period"] == 1
    assert dead["reason"] == (f"period 1 was already ingested (taken from {first}); a late "
                              f"file is never counted in a later period")
    log = events(state, "window")
    assert [e for e in log if e["event"] == "waiting"] == []
    assert [(e["event"], e["period"]) for e in log if e["event"] in ("released", "ingested")] \
        == [("ingested", 1), ("ingested", 2), ("released", 3)]


def test_a_waiting_event_names_the_periods_really_missing(tmp_path, capsys):
    """Files of periods 2 and 4 land in one listing of a stream that has ingested
    nothing: both wait, period 2 for period 1 and period 4 for periods 1 and 3 (not
    "period 1 has not landed yet" for each, whatever else the listing holds)."""
    releaser = _releaser(tmp_path, accepts=lambda path: True)
    (tmp_path / "w").mkdir()
    releaser.watch_dir = str(tmp_path / "w")
    for name in ("period_02.parquet", "period_04.parquet"):
        (tmp_path / "w" / name).write_bytes(name.encode())
    known, arrived = {}, {}
    assert releaser._landed(known) == []
    landed = releaser._landed(known)
    capsys.readouterr()
    for path in landed:
        releaser._arrive(path, arrived, {"seen": 0, "pending": None, "fingerprints": {}})
    releaser._release_ready(arrived)
    releaser._announce_waiting(landed, arrived)
    waiting = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert sorted((e["period"], e["reason"]) for e in waiting if e["event"] == "waiting") == [
        (2, "period 1 has not landed yet"), (4, "periods 1, 3 have not landed yet")]
    assert releaser.steps == [] and sorted(arrived) == [2, 4]


def test_a_folder_or_file_that_changes_after_its_period_was_taken(panel, tmp_path):
    """Period 1 lands as a folder of one part, period 2 as a file; once each is taken, a
    part lands in the folder and the file is rewritten in place (other bytes).  Both are
    dead-lettered with a reason that says what happened, not "period P was already
    released from another file" (it is this very folder or file), and the ``rejected``
    event names the dead-letter document; the state and the release are untouched."""
    _, table, periods, _ = panel
    watch, state, out = tmp_path / "watch", tmp_path / "state", tmp_path / "out"
    watch.mkdir()
    hidden = watch / ".period_01"
    hidden.mkdir()
    write_file(period_table(table, 1), str(hidden / "part-0.parquet"), "parquet")
    os.rename(hidden, watch / "period_01")
    second = land(periods[2], watch)
    process = start("window", WINDOW, watch, state, out)
    wait_until(lambda: seen(state) >= 2 and load_state(str(state))["pending"] is None, process)
    before, released = without_locks(str(state)), snapshot(str(out))
    write_file(period_table(table, 1).slice(0, 7), str(tmp_path / "late.parquet"), "parquet")
    land(str(tmp_path / "late.parquet"), watch / "period_01", "part-1.parquet")
    write_file(period_table(table, 2).slice(0, 9), str(tmp_path / "rewrite.parquet"), "parquet")
    land(str(tmp_path / "rewrite.parquet"), watch, "period_02.parquet")
    wait_until(lambda: len(rejected(state)) >= 2, process)
    process.send_signal(signal.SIGTERM)
    finish(process, timeout=30)
    assert len(rejected(state)) == 2
    assert snapshot(str(out)) == released
    assert {k: v for k, v in without_locks(str(state)).items()
            if not k.startswith("rejected/")} == before
    reasons = {doc["file"]: (doc["period"], doc["reason"]) for doc in rejected(state)}
    assert reasons[str(watch / "period_01")] == (1, (
        "the folder changed after period 1 was taken from it (a part landed or changed in "
        "it late): period 1 counts the parts it held then; the new contents are not "
        "counted, and a late part is never counted in a later period"))
    assert reasons[second] == (2, (
        "the file was rewritten in place after period 2 was taken from it: period 2 counts "
        "the bytes it held then; the new ones are not counted, in period 2 or in a later "
        "one"))
    for event in (e for e in events(state, "window") if e["event"] == "rejected"):
        assert json.load(open(event["dead_letter"]))["reason"] == event["reason"]
        assert os.path.dirname(event["dead_letter"]) == str(state / "rejected")
