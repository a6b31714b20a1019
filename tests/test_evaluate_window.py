"""Tests of the fixed-window evaluation (pipelines/evaluation/evaluate_window.py).

The "perfect" releases are built by hand: the truth's people plus ``copies``
copies of every sequence in A^T.  Every k-window pattern then appears
|A|^(T−k) times per copy in the padding at every period t, so each bin carries
exactly n_pad = copies·|A|^(T−k) padding people, as Algorithm 1's padding does,
and the debiased error must be exactly zero.
"""
from __future__ import annotations

import collections
import itertools
import json

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.mechanisms.panel import window_histograms
from continual_synth.pipelines.evaluation.evaluate_window import evaluate_window
from continual_synth.pipelines.examples.sipp_like import generate_panel, panel_table
from continual_synth.transforms.files import InputError, write_file

PERIODS = 6


def panel_values(table: pa.Table, periods: int) -> np.ndarray:
    return table["value"].to_numpy().reshape(-1, periods)


def all_sequences(periods: int, base: int = 2) -> np.ndarray:
    return np.array(list(itertools.product(range(base), repeat=periods)), dtype=np.int64)


def write_truth(tmp_path, values: np.ndarray, name: str = "truth.parquet") -> str:
    path = str(tmp_path / name)
    write_file(panel_table(values), path, None)
    return path


def write_release(directory, synthetic_values: np.ndarray, window: int, n_pad: int,
                  error_bound: float = 50.0, **manifest_overrides) -> str:
    """A release directory: one Parquet file of synthetic people plus manifest.json."""
    directory.mkdir()
    table = panel_table(synthetic_values, first_id=0).rename_columns(
        ["synthetic_id", "period", "value"])
    write_file(table, str(directory / "part-00000.parquet"), "parquet")
    horizon = synthetic_values.shape[1]
    manifest = {"algorithm": "fixed_window", "window": window, "horizon": horizon,
                "alphabet": [0, 1], "neighbor": "add-remove", "rho": 0.005, "rho_spent": 0.005,
                "n_pad": n_pad, "num_synthetic": len(synthetic_values),
                "periods_released": list(range(window, horizon + 1)), "clamp_events": 0,
                "beta": 0.05, "error_bound": error_bound, "sampler": "hand-made"}
    manifest.update(manifest_overrides)
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return str(directory)


def perfect_release(truth_values: np.ndarray, window: int, copies: int = 1, seed: int = 0):
    """Synthetic people (shuffled) and n_pad of a release with zero debiased error."""
    periods = truth_values.shape[1]
    padding = np.tile(all_sequences(periods), (copies, 1))
    synthetic = np.random.default_rng(seed).permutation(np.vstack([truth_values, padding]))
    return synthetic, copies * 2 ** (periods - window)


@pytest.fixture
def truth_values() -> np.ndarray:
    return panel_values(generate_panel(300, PERIODS, seed=7), PERIODS)


@pytest.mark.parametrize("window", [1, 3, 4])
def test_perfect_release_has_zero_debiased_error(tmp_path, truth_values, window):
    synthetic, n_pad = perfect_release(truth_values, window, copies=2)
    summary = evaluate_window(write_truth(tmp_path, truth_values),
                              write_release(tmp_path / "release", synthetic, window, n_pad))

    assert summary["num_people"] == 300 and summary["num_synthetic"] == len(synthetic)
    assert summary["debiased_denominator"] == 300
    assert [row["period"] for row in summary["periods"]] == list(range(window, PERIODS + 1))
    for row in summary["periods"]:
        assert row["max_abs_error"] == 0
        assert row["debiased_max_abs_proportion_error"] == 0.0
        assert row["raw_max_abs_error_proportion"] > 0  # the padding biases raw proportions
        assert row["within_bound"]
    assert summary["overall"]["max_abs_error"] == 0 and summary["overall"]["within_bound"]
    synthetic_counts = np.array(summary["bins"]["synthetic_counts"])
    true_counts = np.array(summary["bins"]["true_counts"])
    np.testing.assert_array_equal(synthetic_counts - n_pad, true_counts)

    queries = summary["queries"]
    assert [row["period"] for row in queries["results"]["all_three"]["rows"]] == list(range(3, 7))
    if window >= 3:
        assert queries["debiasing_supported"] and queries["note"] is None
        per_three = {"at_least_one": 7, "at_least_two": 4, "two_consecutive": 3, "all_three": 1}
        for name, result in queries["results"].items():
            assert result["pad_bins"] == per_three[name] * 2 ** (window - 3)
            for row in result["rows"]:
                assert row["debiased"] == row["true"]
                assert row["raw"] != row["true"]
    else:
        assert not queries["debiasing_supported"] and "not supported" in queries["note"]
        for result in queries["results"].values():
            assert result["pad_bins"] is None
            assert all(row["debiased"] is None for row in result["rows"])


def test_hand_counted_windows_and_queries(tmp_path):
    truth = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 1], [0, 0, 0]])
    summary = evaluate_window(write_truth(tmp_path, truth),
                              write_release(tmp_path / "release", truth, window=2, n_pad=0))
    bins = summary["bins"]
    assert bins["patterns"] == ["00", "01", "10", "11"]
    assert bins["periods"] == [2, 3]
    # t=2 (periods 1-2): 10, 01, 11, 00; t=3 (periods 2-3): 01, 11, 11, 00
    assert bins["true_counts"] == [[1, 1, 1, 1], [1, 1, 0, 2]]

    rows = {name: result["rows"] for name, result in summary["queries"]["results"].items()}
    assert [row["quarter_end"] for row in rows["all_three"]] == [True]
    expected = {"at_least_one": 3 / 4, "at_least_two": 3 / 4, "two_consecutive": 2 / 4,
                "all_three": 1 / 4}
    for name, proportion in expected.items():
        assert rows[name][0]["true"] == proportion
        assert rows[name][0]["raw"] == proportion
        assert rows[name][0]["debiased"] is None  # window 2 < 3


def test_one_changed_record_shows_up_in_its_windows(tmp_path, truth_values):
    synthetic, n_pad = perfect_release(truth_values, window=3)
    synthetic[0, 3] = 1 - synthetic[0, 3]  # one synthetic person, period 4
    summary = evaluate_window(write_truth(tmp_path, truth_values),
                              write_release(tmp_path / "release", synthetic, 3, n_pad,
                                            error_bound=0.5))
    errors = {row["period"]: row["max_abs_error"] for row in summary["periods"]}
    assert errors == {3: 0, 4: 1, 5: 1, 6: 1}
    within = {row["period"]: row["within_bound"] for row in summary["periods"]}
    assert within == {3: True, 4: False, 5: False, 6: False}
    assert summary["overall"]["max_abs_error"] == 1 and not summary["overall"]["within_bound"]
    assert summary["overall"]["max_abs_error_proportion"] == pytest.approx(1 / 300)
    changed = [row["period"] for row in summary["queries"]["results"]["at_least_one"]["rows"]
               if row["debiased"] != row["true"]]
    assert set(changed) <= {4, 5, 6}


def test_report_files(tmp_path, truth_values):
    synthetic, n_pad = perfect_release(truth_values, window=3)
    report = tmp_path / "report"
    summary = evaluate_window(write_truth(tmp_path, truth_values),
                              write_release(tmp_path / "release", synthetic, 3, n_pad),
                              report_dir=str(report))
    from continual_synth.pipelines.release.publication import (  # as the file's floats
        tidy_floats)
    assert json.loads((report / "summary.json").read_text()) == \
        json.loads(json.dumps(tidy_floats(summary)))
    for name in ("window_error.png", "quarterly_queries.png"):
        assert (report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_csv_truth_with_other_column_names(tmp_path, truth_values):
    synthetic, n_pad = perfect_release(truth_values, window=3)
    table = panel_table(truth_values).rename_columns(["household", "month", "poor"])
    write_file(table, str(tmp_path / "truth.csv"), "csv")
    summary = evaluate_window(str(tmp_path / "truth.csv"),
                              write_release(tmp_path / "release", synthetic, 3, n_pad),
                              id_col="household", period_col="month", value_col="poor")
    assert summary["overall"]["max_abs_error"] == 0


def test_window_histograms_match_a_direct_count():
    rng = np.random.default_rng(3)
    panel = rng.integers(0, 3, size=(500, 5))
    histograms = window_histograms(panel, 3, 2)
    for row, end in enumerate(range(2, 6)):
        direct = collections.Counter(3 * a + b for a, b in panel[:, end - 2:end])
        assert histograms[row].tolist() == [direct.get(code, 0) for code in range(9)]


# --- bad inputs -------------------------------------------------------------------------

@pytest.fixture
def good_inputs(tmp_path, truth_values):
    synthetic, n_pad = perfect_release(truth_values, window=3)
    return tmp_path, truth_values, synthetic, n_pad


def test_missing_manifest(good_inputs):
    tmp_path, truth, synthetic, n_pad = good_inputs
    release = write_release(tmp_path / "release", synthetic, 3, n_pad)
    (tmp_path / "release" / "manifest.json").unlink()
    with pytest.raises(InputError, match="manifest.json: missing"):
        evaluate_window(write_truth(tmp_path, truth), release)


def test_manifest_missing_keys(good_inputs):
    tmp_path, truth, synthetic, n_pad = good_inputs
    release = write_release(tmp_path / "release", synthetic, 3, n_pad)
    manifest = json.loads((tmp_path / "release" / "manifest.json").read_text())
    del manifest["n_pad"], manifest["error_bound"]
    (tmp_path / "release" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="missing key.*n_pad, error_bound"):
        evaluate_window(write_truth(tmp_path, truth), release)


def test_truth_missing_column(good_inputs):
    tmp_path, truth, synthetic, n_pad = good_inputs
    path = str(tmp_path / "truth.parquet")
    write_file(panel_table(truth).drop_columns(["value"]), path, None)
    with pytest.raises(InputError, match=r"truth .*missing column\(s\) 'value'"):
        evaluate_window(path, write_release(tmp_path / "release", synthetic, 3, n_pad))


def test_synthetic_periods_do_not_match_manifest(good_inputs):
    tmp_path, truth, synthetic, n_pad = good_inputs
    release = write_release(tmp_path / "release", synthetic, 3, n_pad,
                            periods_released=[3, 4, 5])
    with pytest.raises(InputError, match="1..6 but the manifest's periods_released end at 5"):
        evaluate_window(write_truth(tmp_path, truth), release)


def test_synthetic_values_outside_alphabet(good_inputs):
    tmp_path, truth, synthetic, n_pad = good_inputs
    synthetic[5, 2] = 2
    release = write_release(tmp_path / "release", synthetic, 3, n_pad)
    with pytest.raises(InputError, match=r"synthetic release .*value 2 .*is not in the alphabet"):
        evaluate_window(write_truth(tmp_path, truth), release)


def test_num_synthetic_mismatch(good_inputs):
    tmp_path, truth, synthetic, n_pad = good_inputs
    release = write_release(tmp_path / "release", synthetic, 3, n_pad, num_synthetic=1)
    with pytest.raises(InputError, match="num_synthetic = 1"):
        evaluate_window(write_truth(tmp_path, truth), release)


def test_truth_missing_a_period(good_inputs):
    tmp_path, truth, synthetic, n_pad = good_inputs
    table = panel_table(truth)
    path = str(tmp_path / "truth.parquet")
    write_file(pa.concat_tables([table.slice(0, 8), table.slice(9)]), path, None)  # id 2, period 3
    with pytest.raises(InputError, match="id 2 has no report in period 3"):
        evaluate_window(path, write_release(tmp_path / "release", synthetic, 3, n_pad))


def test_truth_reporting_twice(good_inputs):
    tmp_path, truth, synthetic, n_pad = good_inputs
    table = panel_table(truth)
    path = str(tmp_path / "truth.parquet")
    write_file(pa.concat_tables([table, table.slice(13, 1)]), path, None)  # id 3, period 2
    with pytest.raises(InputError, match="id 3 reports 2 times in period 2"):
        evaluate_window(path, write_release(tmp_path / "release", synthetic, 3, n_pad))


def test_truth_shorter_than_release(good_inputs):
    tmp_path, truth, synthetic, n_pad = good_inputs
    release = write_release(tmp_path / "release", synthetic, 3, n_pad)
    with pytest.raises(InputError, match="release goes up to period 6"):
        evaluate_window(write_truth(tmp_path, truth[:, :5]), release)
