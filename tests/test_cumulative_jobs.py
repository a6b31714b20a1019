"""The cumulative synthesizer's jobs (Bun et al. 2024, Algorithm 2) end to end: the same
contract as the window jobs, through the shared driver."""
import json
import os

import numpy as np
import pytest

from continual_synth.mechanisms.cumulative import CumulativeConfig
from continual_synth.mechanisms.errors import InputError, StateError
from helpers_panels import cumulative_jobs
from continual_synth.pipelines.commands.cli import main
from continual_synth.pipelines.evaluation.evaluate_cumulative import (
    at_least_counts, evaluate_cumulative)
from continual_synth.transforms.files import read_dataset, write_file

from helpers_panels import long_table, markov_codes, sorted_records, write_period_files

T, PEOPLE, SEED = 5, 400, 21
CONFIG = CumulativeConfig(horizon=T, rho=2.0, neighbor="add-remove", public_population=True)


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    root = tmp_path_factory.mktemp("cumulative")
    codes = markov_codes(PEOPLE, T, 2, seed=3)
    table = long_table(codes)
    path = str(root / "panel.parquet")
    write_file(table, path, "parquet")
    periods = write_period_files(table, str(root / "periods"), "parquet")
    return {"root": root, "codes": codes, "path": path, "periods": periods}


@pytest.fixture(scope="module")
def batch(panel):
    out = str(panel["root"] / "batch")
    manifest = cumulative_jobs.run(panel["path"], out, CONFIG, seed=SEED, num_shards=3)
    return out, manifest


def test_release_is_valid_and_within_the_bound(panel, batch):
    out, manifest = batch
    records = read_dataset(out)
    assert records.num_rows == manifest["num_synthetic"] * T
    assert manifest["num_synthetic"] == PEOPLE          # n declared public
    assert manifest["rho_spent"] == pytest.approx(CONFIG.rho)
    assert manifest["periods_released"] == list(range(1, T + 1))
    synthetic = np.zeros((manifest["num_synthetic"], T), dtype=np.int64)
    synthetic[records["synthetic_id"].to_numpy(), records["period"].to_numpy() - 1] = \
        records["value"].to_numpy()
    # the synthetic counts are exactly the released (monotonised) counts
    released = at_least_counts(synthetic)[-1, : T + 1]
    np.testing.assert_array_equal(released, manifest["released_counts"][: T + 1])
    error = np.abs(at_least_counts(synthetic) - at_least_counts(panel["codes"])).max()
    assert error <= manifest["error_bound"]


def test_run_and_steps_release_identical_records(panel, batch, tmp_path):
    out, manifest = batch
    state, incremental = str(tmp_path / "state"), str(tmp_path / "out")
    cumulative_jobs.init(state, CONFIG, seed=SEED, num_shards=3)
    statuses = [cumulative_jobs.step(state, path, incremental)["status"]
                for path in panel["periods"]]
    assert statuses == ["released"] * T
    assert sorted_records(incremental).equals(sorted_records(out))
    with open(os.path.join(incremental, "manifest.json")) as handle:
        stepped = json.load(handle)
    assert {k: v for k, v in stepped.items() if k not in ("mode", "provenance")} == \
        {k: v for k, v in manifest.items() if k not in ("mode", "provenance")}
    # a re-run spends nothing; beyond the horizon is refused before reading
    assert cumulative_jobs.step(state, panel["periods"][-1], incremental)["status"] == \
        "already-released"
    with pytest.raises(ValueError, match="beyond the horizon"):
        cumulative_jobs.step(state, str(tmp_path / "missing.parquet"), incremental)
    # a window step on a cumulative state is refused
    from helpers_panels import window_jobs
    with pytest.raises(StateError, match="cumulative synthesizer state"):
        window_jobs.step(state, panel["periods"][0], incremental)


def test_values_outside_zero_one_are_refused(panel, tmp_path):
    codes = panel["codes"].copy()
    codes[7, 2] = 2
    path = str(tmp_path / "bad.parquet")
    write_file(long_table(codes, alphabet=(0, 1, 2)), path, "parquet")
    with pytest.raises(InputError, match="value 2 .*not in the alphabet"):
        cumulative_jobs.run(path, str(tmp_path / "out"), CONFIG, seed=1)
    assert not os.path.exists(os.path.join(tmp_path, "out", "manifest.json"))


def test_cli_run_and_evaluate(panel, tmp_path, capsys):
    out, report = str(tmp_path / "cli"), str(tmp_path / "report")
    assert main(["cumulative", "run", "--input", panel["path"], "--output", out,
                 "--horizon", str(T), "--rho", "1", "--counter", "honaker",
                 "--seed", "4", "--shards", "2"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "cumulative", "--truth", panel["path"], "--synthetic", out,
                 "--report", report]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["overall"]["within_bound"] is True
    assert sorted(os.listdir(report)) == ["cumulative_error.png", "cumulative_shares.png",
                                          "summary.json"]
    summary = evaluate_cumulative(panel["path"], out)
    assert summary["manifest"]["counter"] == "honaker"
    assert summary["manifest"]["population"].startswith("public")   # replace: n is public
