"""The ``dask-local`` preset: a local dask.distributed cluster of single-threaded worker
*processes* (``--num_workers``), closed with its client and processes after the job; the
CLI's release on it equals the DirectRunner's with the same seed; a missing ``[dask]``
extra is a one-line error.  (Every batch job on every runner: test_runners_identical.py.)"""
from __future__ import annotations

import json
import logging
import sys

import pytest

pytest.importorskip("distributed")
pytest.importorskip("apache_beam.runners.dask.dask_runner")

from continual_synth.mechanisms.errors import InputError  # noqa: E402
from continual_synth.mechanisms.window import WindowConfig  # noqa: E402
from helpers_panels import window_jobs  # noqa: E402
from continual_synth.pipelines.commands.cli import main  # noqa: E402
from continual_synth.runners.presets import DASK_RUNNER, resolved_beam_args  # noqa: E402
from continual_synth.transforms.files import write_file  # noqa: E402

from helpers_panels import (check_release, long_table, markov_codes,  # noqa: E402
                            read_manifest, sorted_records)

SEED = 13
CONFIG = WindowConfig(window=2, horizon=5, rho=5.0, neighbor="add-remove")


def open_clients():
    """dask.distributed clients of this process that are not closed."""
    from distributed.client import _global_clients  # private, but the only registry
    return [client for client in list(_global_clients.values()) if client.status != "closed"]


@pytest.fixture(autouse=True)
def quiet_dask():
    """The local cluster logs its start-up and shut-down at INFO/ERROR; keep it out, and
    close the client Beam's Dask runner leaves behind (it would keep reconnecting to the
    closed cluster and print tracebacks when the interpreter exits)."""
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    for client in open_clients():
        client.close(timeout=5)
    logger.setLevel(level)


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask")
    codes = markov_codes(500, CONFIG.horizon, seed=17)
    path = str(root / "panel.parquet")
    write_file(long_table(codes), path, "parquet")
    return root, codes, path


@pytest.fixture(scope="module")
def direct_release(panel):
    root, _, path = panel
    out = str(root / "direct")
    return out, window_jobs.run(path, out, CONFIG, seed=SEED, num_shards=3)


def test_dask_local_resolves_to_beams_dask_runner():
    with resolved_beam_args(["--runner", "dask-local", "--foo=1"]) as args:
        assert args[0] == "--foo=1"
        assert args[1] == f"--runner={DASK_RUNNER}"
        assert args[2].startswith("--dask_client_address=")
        assert args[3] == "--dask_partition_size=1"  # one task per row group / shard
    with resolved_beam_args(["--runner=DaskRunner"]) as args:
        assert args == [f"--runner={DASK_RUNNER}", "--dask_partition_size=1"]
    with resolved_beam_args(["--runner=DaskRunner", "--dask_npartitions=4"]) as args:
        assert args == ["--dask_npartitions=4", f"--runner={DASK_RUNNER}"]
    with resolved_beam_args([]) as args:
        assert args == []


def test_cli_window_run_with_dask_local(panel, direct_release, tmp_path, capsys):
    _, codes, path = panel
    direct_out, _ = direct_release
    out = str(tmp_path / "release")
    code = main(["window", "run", "--input", path, "--output", out, "--window", "2",
                 "--horizon", "5", "--rho", "5", "--neighbor", "add-remove",
                 "--seed", str(SEED), "--shards", "3", "--format", "csv",
                 "--runner", "dask-local"])
    assert code == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest == read_manifest(out) and manifest["format"] == "csv"
    check_release(out, manifest, codes, typed=False)
    assert sorted_records(out).equals(sorted_records(direct_out))


def test_dask_local_runs_worker_processes_and_leaves_nothing_behind(panel, tmp_path):
    import distributed
    import psutil
    _, _, path = panel
    for client in open_clients():
        client.close(timeout=5)
    me = psutil.Process()
    before = {child.pid for child in me.children(recursive=True)}
    with resolved_beam_args(["--runner", "dask-local", "--num_workers=3"]) as beam_args:
        address, = (arg.split("=", 1)[1] for arg in beam_args
                    if arg.startswith("--dask_client_address="))
        with distributed.Client(address) as client:
            workers = client.run(lambda: (__import__("os").getpid(),
                                          __import__("threading").active_count()))
            pids = {pid for pid, _ in workers.values()}
            # glibc keeps its adaptive mmap threshold in the workers (see worker_environ)
            assert set(client.run(lambda: __import__("os").environ.get(
                "MALLOC_TRIM_THRESHOLD_")).values()) == {None}
        assert len(workers) == 3 and len(pids) == 3 and me.pid not in pids
        assert pids <= {child.pid for child in me.children(recursive=True)}
        window_jobs.run(path, str(tmp_path / "release"), CONFIG, seed=SEED, num_shards=3,
                        beam_args=beam_args)
    assert open_clients() == []
    psutil.wait_procs([psutil.Process(pid) for pid in pids if psutil.pid_exists(pid)],
                      timeout=10)
    assert not [pid for pid in pids if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert {child.pid for child in me.children(recursive=True)} <= before


def test_num_workers_must_be_positive():
    with pytest.raises(InputError, match="--num_workers must be a positive integer"):
        with resolved_beam_args(["--runner", "dask-local", "--num_workers=0"]):
            pass


@pytest.mark.parametrize("runner", [["--runner", "dask-local"],
                                    ["--runner=DaskRunner", "--dask_client_address=h:8786"]])
def test_missing_dask_extra_is_a_one_line_error(panel, tmp_path, capsys, monkeypatch, runner):
    _, _, path = panel
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if absent
    out = tmp_path / "release"
    code = main(["window", "run", "--input", path, "--output", str(out), "--window", "2",
                 "--horizon", "5", "--rho", "5", "--seed", "1", *runner])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and not out.exists()
    assert err.startswith("continual-synth: error: --runner dask-local and DaskRunner need "
                          "Dask")
    assert "pip install 'continual-synth[dask]'" in err


def test_an_unreachable_scheduler_is_a_one_line_error(panel, tmp_path, capsys):
    _, _, path = panel
    out = tmp_path / "release"
    code = main(["window", "run", "--input", path, "--output", str(out), "--window", "2",
                 "--horizon", "5", "--rho", "5", "--seed", "1", "--runner=DaskRunner",
                 "--dask_client_address=127.0.0.1:1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and not out.exists()
    assert "--dask_client_address 127.0.0.1:1: no Dask scheduler answers there" in err


def test_the_pipeline_is_translated_as_built_without_a_runner_api_round_trip(
        panel, direct_release, tmp_path, monkeypatch):
    """Beam's test round trip (the pipeline written to protos and read back into a second
    pipeline object) was serial work of the launching process, 0.3-0.45 CPU s of a
    2M x 12 window run before any worker started; the runner translates the pipeline
    it is given, and releases the same."""
    import apache_beam as beam
    _, _, path = panel
    direct_out, _ = direct_release
    round_trips = []
    to_protos = beam.Pipeline.to_runner_api

    def recorded(self, *args, **kwargs):
        round_trips.append(self)
        return to_protos(self, *args, **kwargs)

    monkeypatch.setattr(beam.Pipeline, "to_runner_api", recorded)
    out = str(tmp_path / "release")
    with resolved_beam_args(["--runner", "dask-local", "--num_workers=1"]) as beam_args:
        window_jobs.run(path, out, CONFIG, seed=SEED, num_shards=3, beam_args=beam_args)
    assert round_trips == []
    assert sorted_records(out).equals(sorted_records(direct_out))


def windowed(value):
    from apache_beam.transforms.window import GlobalWindow
    from apache_beam.utils.windowed_value import WindowedValue
    return WindowedValue(value, 0, (GlobalWindow(),))


def test_group_by_key_groups_every_key_with_its_values_in_input_order():
    import dask.bag as db
    from continual_synth.runners.dask_runner import group_by_key
    keys = [3, "a", 3, None, 19, "a", 3, (1, "x"), True, 1]
    items = [(key, windowed((key, i))) for i, key in enumerate(keys)]
    grouped = group_by_key(db.from_sequence(items, npartitions=4), partitions=16)
    # as many output partitions as asked for, even from fewer inputs: a one-partition
    # input (one CSV file, the plan) is spread over the workers too
    assert grouped.npartitions == 16
    result = grouped.compute(scheduler="sync")
    expected = {}
    for key, value in items:
        expected.setdefault(key, []).append(value.value)
    assert len(result) == len(set(keys))  # True == 1: one key, as in a dict
    assert dict(result) == expected


def test_group_by_key_puts_each_integer_key_in_its_own_partition_with_n_by_m_tasks():
    import dask.bag as db
    from continual_synth.runners.dask_runner import group_by_key
    shards, inputs = 16, 24
    items = [(j % shards, windowed(j)) for j in range(3 * shards)]
    bag = db.from_sequence(items, npartitions=inputs)
    grouped = group_by_key(bag, partitions=shards)
    assert grouped.npartitions == shards
    for j, partition in enumerate(grouped.to_delayed()):
        (key, values), = partition.compute(scheduler="sync")
        assert key == j and values == [j, j + shards, j + 2 * shards]
    # split + pick + group tasks: n + n*m + m, on top of the input's n
    assert len(grouped.__dask_graph__()) - len(bag.__dask_graph__()) == (
        inputs + inputs * shards + shards)


@pytest.mark.parametrize("runner", ["DaskRunner", "dask-local"])
@pytest.mark.parametrize("verbose", [False, True])
def test_own_clusters_are_quiet_unless_verbose(panel, tmp_path, verbose, runner):
    """``--runner DaskRunner`` without ``--dask_client_address``: Beam's runner starts a
    local cluster of its own, whose ``distributed.*`` INFO/WARNING lines (64 on a short
    run) must not reach stderr without ``--verbose``: stderr holds only the command's
    lines, as with ``dask-local``; ``--verbose`` (anywhere on the line) shows them, the
    scheduler's, and the workers' for ``dask-local`` too."""
    import os
    import subprocess
    _, _, path = panel
    script = os.path.join(os.path.dirname(sys.executable), "continual-synth")
    argv = [script, *(["-v"] if verbose else []), "window", "run", "--input", path,
            "--output", str(tmp_path / "out"), "--window", "2", "--horizon", "5",
            "--rho", "5", "--seed", "1", "--shards", "2", "--runner", runner]
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stderr.strip().splitlines()
    if verbose:
        # Dask's default cluster (DaskRunner without an address) spawns its workers with
        # LocalCluster's silence_logs=WARN, so their INFO lines never show; a worker's
        # WARNING (memory, a slow event loop) may, which made this test pass or fail
        # with the machine's load.  dask-local's forked workers log at this process's level.
        sources = ("distributed.scheduler",) + (
            ("distributed.worker",) if runner == "dask-local" else ())
        for source in sources:
            assert any(source in line for line in lines), (source, lines)
    else:
        assert lines and all(line.startswith("continual-synth window run: ")
                             for line in lines), lines


def _log_an_error():
    logging.getLogger("distributed.worker").error("a connection traceback at shutdown")


def test_quiet_cluster_keeps_worker_errors_off_stderr(capfd):
    """Without ``--verbose`` a worker's ERROR record stays off stderr, as Beam's do: under
    load a worker whose heartbeat met the closed scheduler at the end of a run logged a
    ``distributed/core.py … connect`` traceback at ERROR, the only line of a quiet run
    not the command's own (a failed task reaches the client as the job's exception).
    Spawned workers read the level from the environment; forked ones, and the scheduler
    in this process, from this process's ``distributed`` logger."""
    import distributed
    from continual_synth.runners.presets import local_dask_cluster, quiet_own_cluster
    with quiet_own_cluster(), local_dask_cluster(1, fork=False) as address:
        assert not logging.getLogger("distributed.scheduler").isEnabledFor(logging.ERROR)
        with distributed.Client(address) as client:
            client.run(_log_an_error)
    assert "connection traceback" not in capfd.readouterr().err
