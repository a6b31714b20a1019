"""Manifests say how a release was made (software version, UTC creation time, input
digest) and print budgets without binary float noise (issue 10, item 6)."""
from __future__ import annotations

import datetime
import hashlib
import json
import os
from importlib import metadata

import numpy as np
import pytest

from continual_synth.pipelines import provenance
from continual_synth.pipelines.cli import main
from continual_synth.transforms.files import write_file

from helpers_panels import long_table, markov_codes, write_period_files


def test_tidy_floats_rounds_to_twelve_significant_digits_everywhere():
    noisy = 0.1 * 3  # 0.30000000000000004
    document = {"rho_spent": 0.049999999999999996, "levels": [noisy, {"x": np.float64(noisy)}],
                "count": 3, "name": "tree", "flag": True, "array": np.array([noisy, 1.5])}
    assert provenance.tidy_floats(document) == {
        "rho_spent": 0.05, "levels": [0.3, {"x": 0.3}], "count": 3, "name": "tree",
        "flag": True, "array": [0.3, 1.5]}
    assert json.dumps(provenance.tidy_floats(1 / 3)) == "0.333333333333"
    assert provenance.tidy_floats(1e-300) == 1e-300  # rounding is relative, not absolute


def test_created_utc_is_iso_8601_utc_and_honours_source_date_epoch(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert provenance.created_utc() == "2023-11-14T22:13:20Z"
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    stamp = datetime.datetime.strptime(provenance.created_utc(), "%Y-%m-%dT%H:%M:%SZ")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert abs((now - stamp).total_seconds()) < 5


def test_input_digest_is_the_bytes_not_the_path(tmp_path):
    table = long_table(markov_codes(5, 2, seed=1))
    first, second = str(tmp_path / "a.csv"), str(tmp_path / "b.csv")
    write_file(table, first, "csv")
    write_file(table, second, "csv")
    with open(first, "rb") as handle:
        expected = hashlib.sha256(handle.read()).hexdigest()
    assert provenance.input_sha256(first) == provenance.input_sha256(second) == expected
    write_file(long_table(markov_codes(5, 2, seed=2)), second, "csv")
    assert provenance.input_sha256(second) != expected


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    root = tmp_path_factory.mktemp("provenance")
    table = long_table(markov_codes(40, 3, seed=3))
    path = str(root / "panel.parquet")
    write_file(table, path, "parquet")
    return root, path, write_period_files(table, str(root / "periods"), "csv")


PRIVACY = ["--window", "2", "--horizon", "3", "--rho", "0.05", "--seed", "1", "--shards", "2"]


def test_run_manifest_carries_provenance_and_a_clean_budget(panel, capsys):
    root, path, _ = panel
    out = str(root / "run")
    assert main(["window", "run", "--input", path, "--output", out, *PRIVACY]) == 0
    printed = json.loads(capsys.readouterr().out)
    text = open(os.path.join(out, "manifest.json"), encoding="utf-8").read()
    assert '"rho_spent": 0.05,' in text
    manifest = json.loads(text)
    assert printed == manifest
    assert manifest["provenance"]["software"] == \
        f"continual-synth {metadata.version('continual-synth')}"
    assert manifest["provenance"]["input_sha256"] == provenance.input_sha256(path)
    assert manifest["provenance"]["created_utc"].endswith("Z")


@pytest.mark.parametrize("continual", [False, True])
def test_bounded_run_manifest_carries_the_input_fingerprint(tmp_path, capsys, continual):
    """``bounded run`` and ``bounded run --horizon T`` (continual PrivHP's whole-run
    release) fingerprint their input as every other manifest does."""
    path = str(tmp_path / "points.csv")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("x,y,period\n0.1,0.2,1\n0.7,0.4,2\n0.5,0.9,2\n0.3,0.3,1\n")
    out = str(tmp_path / "release")
    argv = ["bounded", "run", "--input", path, "--output", out, "--columns", "x,y",
            "--bounds", "0:1", "--epsilon", "2", "--samples", "10", "--depth", "3",
            "--seed", "1", "--shards", "2"] + (["--horizon", "2"] if continual else [])
    assert main(argv) == 0
    capsys.readouterr()
    manifest = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
    assert manifest["provenance"]["input_sha256"] == provenance.input_sha256(path)


def test_step_manifest_names_the_period_file_it_ingested(panel, capsys):
    root, _, paths = panel
    state, out = str(root / "state"), str(root / "steps")
    assert main(["window", "init", "--state", state, *PRIVACY]) == 0
    capsys.readouterr()
    for period, path in enumerate(paths, 1):
        assert main(["window", "step", "--state", state, "--input", path,
                     "--output", out]) == 0
        printed = json.loads(capsys.readouterr().out)
        manifest = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
        assert manifest["provenance"]["input_period"] == period
        assert manifest["provenance"]["input_sha256"] == provenance.input_sha256(path)
    assert printed["rho_spent"] == 0.05 and manifest["rho_spent"] == 0.05


def test_a_report_summary_file_is_tidied_as_the_printed_summary(tmp_path):
    """Before: ``summary.json`` kept every float's full repr (0.013424934968143655),
    while the printed summary rounded the same values."""
    from continual_synth.pipelines import release_dir
    path = release_dir.write_summary(str(tmp_path), {"w1": 0.1 + 0.2, "nested": [[2 / 3]]})
    with open(path, encoding="utf-8") as handle:
        assert json.load(handle) == {"w1": 0.3, "nested": [[0.666666666667]]}


def test_a_summary_cut_by_a_closed_pipe_ends_without_a_traceback(tmp_path):
    """``continual-synth … | head -c 1``: before, a BrokenPipeError traceback."""
    import subprocess
    import sys
    command = (f"{sys.executable} -m continual_synth tabular example --output "
               f"{tmp_path / 'example'} --periods 2 | head -c 1")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True,
                          text=True, timeout=300)
    assert done.stdout == "{"
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 0
