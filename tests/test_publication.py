"""The publication boundary (pipelines/release/publication.py): manifests say how a release was
made (software version, UTC creation time) and nothing exact about the input, print
budgets without binary float noise, classify every field, and say by one rule whether a
release is for publication."""
from __future__ import annotations

import datetime
import hashlib
import json
import os
from importlib import metadata

import numpy as np
import pytest

from continual_synth.pipelines.release import publication
from continual_synth.pipelines.commands.cli import main
from continual_synth.transforms.files import write_file

from helpers_panels import long_table, markov_codes, write_period_files


def test_tidy_floats_rounds_to_twelve_significant_digits_everywhere():
    noisy = 0.1 * 3  # 0.30000000000000004
    document = {"rho_spent": 0.049999999999999996, "levels": [noisy, {"x": np.float64(noisy)}],
                "count": 3, "name": "tree", "flag": True, "array": np.array([noisy, 1.5])}
    assert publication.tidy_floats(document) == {
        "rho_spent": 0.05, "levels": [0.3, {"x": 0.3}], "count": 3, "name": "tree",
        "flag": True, "array": [0.3, 1.5]}
    assert json.dumps(publication.tidy_floats(1 / 3)) == "0.333333333333"
    assert publication.tidy_floats(1e-300) == 1e-300  # rounding is relative, not absolute


def test_created_utc_is_iso_8601_utc_and_honours_source_date_epoch(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert publication.created_utc() == "2023-11-14T22:13:20Z"
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    stamp = datetime.datetime.strptime(publication.created_utc(), "%Y-%m-%dT%H:%M:%SZ")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert abs((now - stamp).total_seconds()) < 5


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
    assert manifest["provenance"]["created_utc"].endswith("Z")
    assert set(manifest["provenance"]) == {"software", "created_utc"}  # no input digest


def test_step_manifests_name_no_input(panel, capsys):
    """A step's manifest says nothing of the file it ingested (no digest, no period of
    an input): the state keeps the fingerprints."""
    root, _, paths = panel
    state, out = str(root / "state"), str(root / "steps")
    assert main(["window", "init", "--state", state, *PRIVACY]) == 0
    capsys.readouterr()
    for path in paths:
        assert main(["window", "step", "--state", state, "--input", path,
                     "--output", out]) == 0
        printed = json.loads(capsys.readouterr().out)
        manifest = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
        assert set(manifest["provenance"]) == {"software", "created_utc"}
    assert printed["rho_spent"] == 0.05 and manifest["rho_spent"] == 0.05


def test_an_unclassified_manifest_field_is_refused_before_publication():
    with pytest.raises(publication.UnclassifiedField, match="input_sha256"):
        publication.manifest({"algorithm": "x", "sampler": "opendp",
                              "input_sha256": "00" * 32})
    with pytest.raises(publication.UnclassifiedField, match="records_read"):
        publication.printed({"status": "released", "records_read": 12}, "window step")
    # evaluate prints on the private side: not checked
    assert publication.printed({"truth_rows": 12}, "evaluate window") == {"truth_rows": 12}


@pytest.mark.parametrize("fields, reasons", [
    ({"sampler": "opendp"}, []),
    ({"sampler": "seeded"}, ["seeded"]),
    ({"sampler": "opendp", "horizon_source": publication.HORIZON_FROM_DATA}, ["horizon"]),
    ({"sampler": "opendp", "domain_source": publication.DOMAIN_FROM_DATA}, ["domain"]),
    ({"sampler": "seeded", "horizon_source": publication.HORIZON_FROM_DATA,
      "domain_source": publication.DOMAIN_FROM_DATA}, ["seeded", "horizon", "domain"]),
    ({"sampler": "opendp", "horizon_source": "--horizon",
      "domain_source": publication.DOMAIN_GIVEN}, []),
])
def test_one_rule_says_whether_a_release_is_for_publication(fields, reasons):
    manifest = publication.manifest({"algorithm": "x", **fields, "for_publication": True})
    assert manifest["for_publication"] is (not reasons)
    said = manifest.get("not_for_publication", [])
    assert len(said) == len(reasons)
    for reason, word in zip(said, reasons):
        assert word in reason
    # the verdict stands next to the sampler, and a job's own value never wins
    keys = list(manifest)
    assert keys[keys.index("sampler") + 1] == "for_publication"


@pytest.mark.parametrize("value", ["abc", "1700000000.5", "-5", "99999999999999999999",
                                   "253402300800"])  # the last: 10000-01-01
def test_a_bad_source_date_epoch_is_refused_before_anything_is_charged(panel, tmp_path, capsys,
                                                                      monkeypatch, value):
    """Guards against the step charging the period, then failing to write its manifest
    (a ``ValueError`` or ``OverflowError`` that never named the variable), leaving the
    period's files without a manifest and the period charged."""
    from helpers_panels import snapshot
    _, path, paths = panel
    state, out = str(tmp_path / "state"), str(tmp_path / "steps")
    assert main(["window", "init", "--state", state, *PRIVACY]) == 0
    capsys.readouterr()
    before = snapshot(state)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    assert main(["window", "step", "--state", state, "--input", paths[0],
                 "--output", out]) == 2
    assert "SOURCE_DATE_EPOCH" in capsys.readouterr().err
    assert snapshot(state) == before and not os.path.exists(out)
    assert main(["window", "run", "--input", path, "--output", str(tmp_path / "run"),
                 *PRIVACY]) == 2
    assert "SOURCE_DATE_EPOCH" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "run")
    # the lifecycle checks it too, for callers that are not the command line
    from continual_synth.mechanisms.errors import InputError
    from continual_synth.pipelines.families import driver
    with pytest.raises(InputError, match="SOURCE_DATE_EPOCH"):
        driver.step(state, paths[0], out, kind="window")
    assert snapshot(state) == before


def test_a_report_summary_file_is_tidied_as_the_printed_summary(tmp_path):
    """``summary.json`` rounds floats as the printed summary does, not keeping every
    float's full repr (0.013424934968143655)."""
    from continual_synth.pipelines.release import release_dir
    path = release_dir.write_summary(str(tmp_path), {"w1": 0.1 + 0.2, "nested": [[2 / 3]]})
    with open(path, encoding="utf-8") as handle:
        assert json.load(handle) == {"w1": 0.3, "nested": [[0.666666666667]]}


def test_a_summary_cut_by_a_closed_pipe_ends_without_a_traceback(tmp_path):
    """``continual-synth … | head -c 1``: no BrokenPipeError traceback."""
    import subprocess
    import sys
    command = (f"{sys.executable} -m continual_synth tabular example --output "
               f"{tmp_path / 'example'} --periods 2 | head -c 1")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True,
                          text=True, timeout=300)
    assert done.stdout == "{"
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 0
