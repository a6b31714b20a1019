"""Every batch job releases the same thing on every runner: the DirectRunner in this
process, the DirectRunner with worker processes (``multi_processing``) and Beam's Dask
runner on a local cluster of worker *processes* — so every transform, side input and
Arrow/numpy element is pickled across processes, as on Dataflow or Flink.

The seeded samplers are keyed by (seed, period, shard), never by which worker runs a
bundle or in what order, so the releases (records and manifest) must be identical.
One Dask cluster serves the whole session (starting one takes seconds).
"""
from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("distributed")
pytest.importorskip("apache_beam.runners.dask.dask_runner")

from continual_synth.mechanisms import privhp  # noqa: E402
from continual_synth.mechanisms.cumulative import CumulativeConfig  # noqa: E402
from continual_synth.mechanisms.hierarchy import Bounds  # noqa: E402
from continual_synth.mechanisms.marginals import Domain, all_workloads  # noqa: E402
from continual_synth.mechanisms.panel_synthesizers import (CumulativeSynthesizer,  # noqa: E402
                                                          WindowSynthesizer)
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer  # noqa: E402
from continual_synth.mechanisms.window import WindowConfig  # noqa: E402
from continual_synth.pipelines.families import jobs, tabular  # noqa: E402
from continual_synth.pipelines.families.privhp import run_privhp  # noqa: E402
from continual_synth.runners.presets import (DASK_RUNNER, QUIET_WORKERS_ENV,  # noqa: E402
                                             local_dask_cluster, quiet_own_cluster)
from continual_synth.transforms.files import list_data_files, read_file, write_file  # noqa: E402

from helpers_panels import long_table, markov_codes, without_provenance  # noqa: E402

SEED = 7
SHARDS = 3
RUNNERS = ["direct", "multi_processing", "dask_processes"]


@pytest.fixture(scope="session")
def dask_address():
    """A local dask.distributed cluster of two single-threaded worker processes, spawned
    (fresh interpreters: nothing of this process is inherited).

    The workers read ``quiet_own_cluster``'s environment variable as they start; it is
    taken out of this process's environment while the cluster serves the session, or
    every command a later test starts would inherit it (a ``--verbose`` command then
    showed no ``distributed`` line, so ``test_dask_runner``'s verbose test failed
    whenever this file ran before it)."""
    with quiet_own_cluster(), local_dask_cluster(2, fork=False) as address:
        quiet = os.environ.pop(QUIET_WORKERS_ENV)
        try:
            yield address
        finally:
            os.environ[QUIET_WORKERS_ENV] = quiet


@pytest.fixture
def beam_args(request, dask_address):
    """Beam arguments of each runner; Beam's Dask runner opens a client per pipeline and
    leaves it open, so it is closed after the job."""
    def args(runner):
        if runner == "direct":
            return []
        if runner == "multi_processing":
            return ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
        return [f"--runner={DASK_RUNNER}", f"--dask_client_address={dask_address}"]
    yield args
    import distributed
    from continual_synth.runners.presets import _close_clients
    _close_clients(distributed)


def release(output_dir):
    """(manifest without its provenance, {data file name: table}) of a release folder."""
    with open(f"{output_dir}/manifest.json", encoding="utf-8") as handle:
        manifest = without_provenance(json.load(handle))
    files = {path[len(output_dir):]: read_file(path) for path in list_data_files(output_dir)}
    return manifest, files


def assert_identical(releases):
    (first_manifest, first_files), *others = releases
    assert first_files and sum(t.num_rows for t in first_files.values()) > 0
    for manifest, files in others:
        assert manifest == first_manifest
        assert sorted(files) == sorted(first_files)
        for name, table in files.items():
            assert table.equals(first_files[name]), name


# ------------------------------------------------------------------------- jobs


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("panel") / "panel.parquet")
    write_file(long_table(markov_codes(300, 5, seed=3)), path, "parquet")
    return path


def window_run(panel, out, args):
    model = WindowSynthesizer(WindowConfig(window=2, horizon=5, rho=5.0))
    jobs.run(model, panel, out, seed=SEED, num_shards=SHARDS, beam_args=args)


def cumulative_run(panel, out, args):
    model = CumulativeSynthesizer(CumulativeConfig(horizon=5, rho=5.0))
    jobs.run(model, panel, out, seed=SEED, num_shards=SHARDS, beam_args=args)


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    rng = np.random.default_rng(5)
    n = 4 * 60
    a = rng.integers(0, 3, n)
    table = pa.table({"period": np.repeat(np.arange(1, 5), 60), "a": a,
                      "b": (a + (rng.random(n) < 0.2)) % 2})
    path = str(tmp_path_factory.mktemp("stream") / "stream.parquet")
    write_file(table, path, "parquet")
    return path


def tabular_run(stream, out, args):
    domain = Domain({"a": [0, 1, 2], "b": [0, 1]})
    model = TabularSynthesizer.create(domain=domain, workloads=all_workloads(domain),
                                      epsilon=2.0, method="proposed", fit="mw", horizon=4)
    tabular.run(model, stream, out, seed=SEED, beam_args=args)


@pytest.fixture(scope="module")
def points(tmp_path_factory):
    rng = np.random.default_rng(9)
    xy = np.clip(rng.normal([0.0, 50.0], [3.0, 20.0], (2000, 2)), [-10, 0], [10, 100])
    path = str(tmp_path_factory.mktemp("points") / "points.parquet")
    write_file(pa.table({"lon": xy[:, 0], "lat": xy[:, 1]}), path, "parquet")
    return path


def privhp_run(points, out, args):
    config = privhp.PrivHPConfig(epsilon=1.0, dims=2, prune_k=8, depth=10, sketch_width=128,
                                 sketch_depth=3)
    run_privhp(points, out, ["lon", "lat"], Bounds.parse("-10:10,0:100", 2), config, 500,
                seed=SEED, num_shards=SHARDS, batch_rows=400, beam_args=args)


@pytest.mark.parametrize("job,data", [(window_run, "panel"), (cumulative_run, "panel"),
                                      (tabular_run, "stream"), (privhp_run, "points")],
                         ids=["window run", "cumulative run", "tabular run", "privhp run"])
def test_every_runner_releases_the_same(job, data, request, beam_args, tmp_path):
    path = request.getfixturevalue(data)
    releases = []
    for runner in RUNNERS:
        out = str(tmp_path / runner)
        job(path, out, beam_args(runner))
        releases.append(release(out))
    assert_identical(releases)
