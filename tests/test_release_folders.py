"""What may be in a release folder (``--output``) when a job writes into it.

README: "``--output`` must be a new or empty directory".  A ``run``, the ``demo``, a
state's first ``step`` and a new ``stream`` refuse an output that holds anything (hidden
entries aside: a killed job's ``.staging-*`` folder, which readers skip); a ``run`` also
takes the ``synthetic-*`` files a run killed while publishing left (it replaces them:
tests/test_lifecycle_faults.py).  A step on a state that publishes into its output refuses
files there that are not the release's.  Every refusal exits 2 naming the folder and the
files, and leaves state and output byte-identical."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.jobs import main as job_main
from continual_synth.pipelines.commands.cli import main

from helpers_panels import (long_table, markov_codes, read_manifest, snapshot,
                            write_period_files)

WINDOW = ["--window", "2", "--horizon", "3", "--rho", "5", "--seed", "3", "--shards", "2",
          "--missing-value", "0"]  # a panel stream needs it
CUMULATIVE = ["--horizon", "3", "--rho", "5", "--seed", "3", "--shards", "2"]
POINTS = ["--columns", "x,y", "--bounds", "0:1", "--epsilon", "2", "--samples", "50",
          "--depth", "4", "--seed", "3", "--shards", "2"]


def run_cli(argv, job=None):
    """(exit code, stderr) of the command line (or of the job module ``job``)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = job_main(job, argv) if job else main(argv)
    return code, err.getvalue()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A panel (whole and one file per period), a tabular stream with its domain, points
    with a period column."""
    root = tmp_path_factory.mktemp("inputs")
    table = long_table(markov_codes(80, 3, seed=5))
    from continual_synth.transforms.files import write_file
    write_file(table, str(root / "panel.parquet"), "parquet")
    write_period_files(table, str(root / "periods"))
    rng = np.random.default_rng(5)
    write_file(pa.table({"a": rng.integers(0, 3, 90), "b": rng.integers(0, 2, 90),
                         "period": np.repeat([1, 2, 3], 30)}), str(root / "stream.parquet"),
               "parquet")
    (root / "domain.json").write_text(json.dumps({"a": [0, 1, 2], "b": [0, 1]}))
    write_file(pa.table({"x": rng.random(90), "y": rng.random(90),
                         "period": np.repeat([1, 2, 3], 30)}), str(root / "points.parquet"),
               "parquet")
    return root


def run_commands(root):
    """Every command that publishes a release folder in one go: (argv, job module)."""
    tabular = ["--domain", str(root / "domain.json"), "--epsilon", "2", "--fit", "mw",
               "--seed", "3"]
    return {
        "window run": (["window", "run", "--input", str(root / "panel.parquet"), *WINDOW],
                       None),
        "cumulative run": (["cumulative", "run", "--input", str(root / "panel.parquet"),
                            *CUMULATIVE], None),
        "tabular run": (["tabular", "run", "--input", str(root / "stream.parquet"),
                         *tabular], None),
        "tabular run --infer-domain": (["tabular", "run", "--input",
                                        str(root / "stream.parquet"), "--infer-domain",
                                        *tabular[2:]], None),
        "privhp run": (["privhp", "run", "--input", str(root / "points.parquet"),
                         *POINTS], None),
        "privhp run --horizon": (["privhp", "run", "--input", str(root / "points.parquet"),
                                   "--horizon", "3", *POINTS], None),
        "job window_run": ([f"--input={root / 'panel.parquet'}",
                            *[f"{a}={b}" for a, b in zip(WINDOW[::2], WINDOW[1::2])]],
                           "window_run"),
        "demo": (["demo", "--seed", "3"], None),
    }


@pytest.mark.parametrize("command", ["window run", "cumulative run", "tabular run",
                                     "tabular run --infer-domain", "privhp run",
                                     "privhp run --horizon", "job window_run", "demo"])
def test_a_release_goes_into_a_new_or_empty_folder(inputs, tmp_path, monkeypatch, command):
    """Guards against an --output holding other files being accepted, the release written
    beside them, and a data file among them listed in the manifest's ``files`` as the
    release's (``window run --output out`` with out/mine.csv: exit 0, ``"files":
    ["mine.csv", "synthetic-t0001-s00000.parquet", ...]``), by the demo too.  Every
    such command exits 2 naming the folder and its files, before reading the data
    (tabular run read it first for the horizon or the domain), and writes nothing."""
    from continual_synth.pipelines.families import tabular
    for name in ("last_period", "infer_domain"):
        monkeypatch.setattr(tabular, name, lambda *a, **k: pytest.fail("data read"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    (out / "mine.csv").write_text("a,b\n1,2\n")
    argv, job = run_commands(inputs)[command]
    argv = argv + ([f"--output={out}"] if job else ["--output", str(out)])
    before = snapshot(str(tmp_path))
    code, err = run_cli(argv, job)
    assert code == 2, err
    assert f"--output {out} is not empty: it holds mine.csv, notes.txt; a release goes " \
        f"into a new or empty directory" in err, err
    assert snapshot(str(tmp_path)) == before


def test_a_run_takes_an_output_with_hidden_entries_only(inputs, tmp_path):
    """Hidden entries (a killed run's ``.staging-*`` folder, which may be a live run's,
    a lease, a ``.DS_Store``) are no one's release: readers skip them, and they stay."""
    out = tmp_path / "out"
    (out / ".staging-20260101T000000-abc").mkdir(parents=True)
    (out / ".DS_Store").write_bytes(b"\0")
    argv, _ = run_commands(inputs)["window run"]
    code, err = run_cli(argv + ["--output", str(out)])
    assert code == 0, err
    manifest = read_manifest(str(out))
    assert manifest["files"] and all(name.startswith("synthetic-")
                                     for name in manifest["files"])
    assert (out / ".DS_Store").exists()


def test_a_first_step_and_a_new_stream_need_a_new_or_empty_output(inputs, tmp_path):
    """A state's first step does not publish into a folder holding other files (listing
    a data file there as the release's), nor does a new stream start on it."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    state = str(tmp_path / "state")
    assert run_cli(["window", "init", "--state", state, *WINDOW])[0] == 0
    before = snapshot(str(tmp_path))
    code, err = run_cli(["window", "step", "--state", state, "--input",
                         str(inputs / "periods" / "p01.parquet"), "--output", str(out)])
    assert code == 2 and f"--output {out} is not empty: it holds notes.txt" in err, err
    assert snapshot(str(tmp_path)) == before
    (tmp_path / "landing").mkdir()
    before = snapshot(str(tmp_path))
    code, err = run_cli(["window", "stream", "--watch", str(tmp_path / "landing"), "--state",
                         str(tmp_path / "new-state"), "--output", str(out), "--until-period",
                         "1", *WINDOW])
    assert code == 2 and f"--output {out} is not empty: it holds notes.txt" in err, err
    assert snapshot(str(tmp_path)) == before and not (tmp_path / "new-state").exists()


@pytest.mark.parametrize("stray", ["notes.txt", "extra.parquet", "report"])
def test_a_step_refuses_files_in_its_release_that_are_not_the_releases(inputs, tmp_path,
                                                                        stray):
    """A file put into a state's release folder must not be listed by the next step as
    the release's (``"files": ["extra.parquet", "synthetic-t0001-s00000.parquet",
    ...]``) and read by evaluations: the step (and
    a stream started on the state) exits 2 naming it, and state and release are
    unchanged; once it is moved out the step goes on."""
    state, out = str(tmp_path / "state"), tmp_path / "out"
    periods = [str(inputs / "periods" / f"p0{t}.parquet") for t in (1, 2, 3)]
    step = ["window", "step", "--state", state, "--output", str(out), "--input"]
    assert run_cli(["window", "init", "--state", state, *WINDOW])[0] == 0
    assert run_cli(step + [periods[0]])[0] == 0
    if stray == "report":
        (out / stray).mkdir()
        (out / stray / "summary.json").write_text("{}")
    elif stray.endswith(".parquet"):
        shutil.copy(inputs / "panel.parquet", out / stray)
    else:
        (out / stray).write_text("mine\n")
    (out / ".DS_Store").write_bytes(b"\0")  # hidden: no one's release, left alone
    before = snapshot(str(tmp_path))
    for argv in (step + [periods[1]], step + [periods[0]]):  # the next period, a repeat
        code, err = run_cli(argv)
        assert code == 2 and f"--output {out} holds {stray}, not files of the release this " \
            f"state publishes there" in err, err
        assert snapshot(str(tmp_path)) == before
    (tmp_path / "landing").mkdir()
    before = snapshot(str(tmp_path))
    code, err = run_cli(["window", "stream", "--watch", str(tmp_path / "landing"), "--state",
                         state, "--output", str(out), "--until-period", "2", *WINDOW])
    assert code == 2 and f"--output {out} holds {stray}" in err, err
    assert snapshot(str(tmp_path)) == before
    shutil.move(str(out / stray), str(tmp_path / stray))
    assert run_cli(step + [periods[1]])[0] == 0
    manifest = read_manifest(str(out))
    assert manifest["periods_released"] == [1, 2]
    assert all(name.startswith("synthetic-") for name in manifest["files"])
