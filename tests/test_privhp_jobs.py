"""End-to-end tests of ``privhp run`` / ``evaluate privhp`` (pipelines/families/privhp.py,
transforms/privhp.py, pipelines/commands/privhp_cli.py, pipelines/evaluation/evaluate_privhp.py).

The Beam pipeline must release exactly what the pure-numpy path releases with the same
seed (however the input is split into files and batches: the combine merges exact
integer states), publish nothing on bad input, and say in its manifest what was spent.
"""
from __future__ import annotations

import contextlib
import io
import json
import os

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.mechanisms import privhp
from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.hierarchy import Bounds
from continual_synth.pipelines.families.privhp import run_privhp, synthesize_numpy
from continual_synth.pipelines.commands.cli import main
from continual_synth.transforms.files import list_data_files, read_dataset, read_file, write_file

from helpers_processes import overriding

BOUNDS = Bounds.parse("-10:10,0:100", 2)
COLUMNS = ["lon", "lat"]
CONFIG = privhp.PrivHPConfig(epsilon=1.0, dims=2, prune_k=8, depth=12, sketch_width=256,
                             sketch_depth=3)


def make_points(n, seed):
    rng = np.random.default_rng(seed)
    centres = np.array([[-5.0, 20.0], [3.0, 70.0], [8.0, 40.0]])
    pts = centres[rng.integers(0, 3, n)] + rng.normal(0, [0.3, 1.5], (n, 2))
    return np.clip(pts, [-10, 0], [10, 100])


def points_table(points, extra=True):
    columns = {"lon": points[:, 0], "lat": points[:, 1]}
    if extra:
        columns["label"] = np.array(["a"] * len(points))
    return pa.table(columns)


def released_points(output_dir, columns=COLUMNS):
    files = [f for f in list_data_files(output_dir)]
    assert files == sorted(files)
    table = pa.concat_tables([read_file(f) for f in files])
    assert table.column_names == list(columns)
    return np.column_stack([table.column(c).to_numpy() for c in columns])


def no_release(output_dir):
    return (not os.path.exists(output_dir)) or os.listdir(output_dir) == []


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("privhp")
    points = make_points(6000, 1)
    single = str(root / "points.parquet")
    write_file(points_table(points), single, "parquet")
    split = root / "split"
    for i, part in enumerate(np.array_split(points, 3)):
        write_file(points_table(part), str(split / f"part-{i}.csv"), "csv")
    return root, points, single, str(split)


def test_beam_release_equals_numpy_path_with_the_same_seed(data):
    root, points, single, split = data
    out = str(root / "beam")
    manifest = run_privhp(single, out, COLUMNS, BOUNDS, CONFIG, 5000, seed=4, num_shards=3,
                           batch_rows=700)
    _, expected = synthesize_numpy(single, COLUMNS, BOUNDS, CONFIG, 5000, seed=4, num_shards=3)
    np.testing.assert_array_equal(released_points(out), expected)
    # three CSV files read in 500-row batches: other bundles, same exact state, same release
    out2 = str(root / "beam_split")
    run_privhp(split, out2, COLUMNS, BOUNDS, CONFIG, 5000, seed=4, num_shards=3,
                batch_rows=500)
    np.testing.assert_array_equal(released_points(out2), expected)
    assert manifest["sampler"] == "seeded" and manifest["for_publication"] is False
    assert manifest["epsilon"] == 1.0 and manifest["neighbor"] == "add-remove"
    assert sum(manifest["level_epsilons"]) == pytest.approx(1.0)
    assert manifest["memory_counters"] == CONFIG.memory_counters
    assert manifest["columns"] == COLUMNS and manifest["samples"] == 5000
    assert [lvl["noise_scale"] for lvl in manifest["levels"]] == pytest.approx(
        list(CONFIG.noise_scales()))
    assert manifest["parameters"]["prune_k"] == 8 and manifest["parameters"]["depth"] == 12
    assert manifest["clip"] is False and "clipped_points" not in manifest
    on_disk = json.load(open(os.path.join(out, "manifest.json")))
    assert on_disk["memory_counters"] == CONFIG.memory_counters
    assert not [p for p in os.listdir(out) if p.startswith(".")]
    synthetic = released_points(out)
    assert np.all((synthetic >= [-10, 0]) & (synthetic <= [10, 100]))
    # the synthetic points follow the clusters: most lie within 3 sd of a centre
    near = np.min(np.abs(synthetic[:, :1] - np.array([[-5.0, 3.0, 8.0]])), axis=1) < 1.0
    assert near.mean() > 0.9


def test_bad_input_is_refused_and_nothing_is_written(data, tmp_path):
    root, points, single, _ = data
    bad = points.copy()
    bad[123, 1] = 150.0
    path = str(tmp_path / "bad.parquet")
    write_file(points_table(bad), path, "parquet")
    out = str(tmp_path / "out")
    with pytest.raises(InputError, match=r"column 'lat' value 150 at row 124 is outside"):
        run_privhp(path, out, COLUMNS, BOUNDS, CONFIG, 100, seed=1, batch_rows=100)
    assert no_release(out)
    nan = points.copy()
    nan[7, 0] = np.nan
    path = str(tmp_path / "nan.csv")
    write_file(points_table(nan), path, "csv")
    with pytest.raises(InputError, match=r"column 'lon'.*row 8"):
        run_privhp(path, out, COLUMNS, BOUNDS, CONFIG, 100, seed=1)
    assert no_release(out)
    with pytest.raises(InputError, match=r"missing column\(s\) \['height'\]"):
        run_privhp(single, out, ["lon", "height"], BOUNDS, CONFIG, 100, seed=1)
    with pytest.raises(InputError, match=r"column 'label' must be numeric"):
        run_privhp(single, out, ["lon", "label"], BOUNDS, CONFIG, 100, seed=1)
    assert no_release(out)


def test_clip_is_recorded_without_a_non_private_count(data, tmp_path):
    _, points, _, _ = data
    bad = points[:2000].copy()
    bad[:5, 0] = 50.0
    bad[3:9, 1] = -1.0
    path = str(tmp_path / "clip.avro")
    write_file(points_table(bad), path, "avro")
    out = str(tmp_path / "out")
    manifest = run_privhp(path, out, COLUMNS, BOUNDS, CONFIG, 300, seed=2, clip=True,
                           out_format="avro", num_shards=2)
    assert manifest["clip"] is True and "clipped_points" not in manifest  # not private
    assert "not released" in manifest["clip_note"]
    assert read_dataset(out).num_rows == 300
    with pytest.raises(InputError, match="already holds a release"):
        run_privhp(path, out, COLUMNS, BOUNDS, CONFIG, 300, seed=2, clip=True)


def run_cli(args):
    """(exit code, stdout, stderr) of the command line, as the console script exits
    (argparse's refusals included)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as stop:
            code = stop.code
    return code, out.getvalue(), err.getvalue()


def test_cli_run_and_evaluate(data, tmp_path):
    root, points, single, _ = data
    out = str(tmp_path / "release")
    code, stdout, err = run_cli(["privhp", "run", "--input", single, "--output", out,
                                 "--columns", "lon,lat", "--bounds=-10:10,0:100",
                                 "--epsilon", "2", "--prune-k", "16", "--expected-n", "6000",
                                 "--sketch-width", "128", "--sketch-depth", "2",
                                 "--samples", "4000", "--seed", "5", "--format", "csv",
                                 "--neighbor", "replace", "--budget-split", "uniform"])
    assert code == 0, err
    result = json.loads(stdout)
    assert result["depth"] == privhp.default_depth(2.0, 6000) == 14
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    assert manifest["neighbor"] == "replace" and manifest["budget_split"] == "uniform"
    assert manifest["depth_from"]["expected_n"] == 6000
    scales = [lvl["noise_scale"] for lvl in manifest["levels"]]
    # replace doubles the sensitivity: tree levels 2/ε_ℓ, sketch levels 2j/ε_ℓ
    eps_l = 2.0 / 15
    assert scales[0] == pytest.approx(2 / eps_l) and scales[-1] == pytest.approx(4 / eps_l)
    assert len(list_data_files(out)) == 8
    report = str(tmp_path / "report")
    code, stdout, err = run_cli(["evaluate", "privhp", "--truth", single, "--synthetic", out,
                                 "--columns", "lon,lat", "--report", report,
                                 "--ot-points", "800", "--projections", "32"])
    assert code == 0, err
    summary = json.load(open(os.path.join(report, "summary.json")))
    assert sorted(os.listdir(report)) == ["joint.png", "marginals.png", "summary.json"]
    assert summary["w1"] < 0.2 * summary["uniform_baseline_w1"]
    assert summary["w1_sliced"] < summary["uniform_baseline_w1_sliced"]
    assert "ot.emd2" in summary["w1_method"]


@pytest.mark.parametrize("extra,message", [
    ([], "give --depth R, or --expected-n"),
    (["--depth", "10", "--level-epsilons", "0.5,0.5"], "11 values"),
    (["--depth", "10", "--bounds", "0:1,0:1,0:1"], "2 low:high"),
    (["--depth", "10", "--columns", "lon,nope"], "missing column"),
    (["--depth", "70"], "depth must be in"),
    (["--depth", "10", "--memory", "50"], "raise --memory"),
    (["--depth", "10", "--memory", "5000", "--sketch-width", "64"], "not both"),
    (["--depth", "10", "--memroy", "5000"], "--memory"),
    (["--depth", "10", "--expected-n", "10000"], "--depth R or --expected-n M"),
    (["--depth", "10", "--samples", "0"], "--samples must be an integer >= 1"),
    (["--depth", "1", "--level-epsilons", "0.5,0.5", "--budget-split", "uniform"],
     "--level-epsilons (every level's ε) or --budget-split"),
])
def test_cli_errors_exit_2_with_a_clear_message(data, tmp_path, extra, message):
    _, _, single, _ = data
    args = ["privhp", "run", "--input", single, "--output", str(tmp_path / "o"),
            "--columns", "lon,lat", "--bounds=-10:10,0:100", "--epsilon", "1",
            "--samples", "10", "--seed", "1"]
    code, _, err = run_cli(overriding(args, extra))  # extra's options replace args's
    assert code == 2
    assert message in err and err.splitlines()[-1].startswith("continual-synth: error:")
    assert no_release(str(tmp_path / "o"))


def test_evaluate_one_dimension_is_exact(tmp_path):
    rng = np.random.default_rng(0)
    truth = rng.normal(0.5, 0.1, 3000)
    write_file(pa.table({"v": truth}), str(tmp_path / "truth.parquet"), "parquet")
    synthetic = truth + 0.25  # a shift by 0.25: W1 is exactly 0.25
    os.makedirs(tmp_path / "syn")
    write_file(pa.table({"v": synthetic}), str(tmp_path / "syn" / "synthetic-s00000.parquet"),
               "parquet")
    from continual_synth.pipelines.evaluation.evaluate_privhp import evaluate_privhp
    summary = evaluate_privhp(str(tmp_path / "truth.parquet"), str(tmp_path / "syn"), ["v"])
    assert summary["w1"] == pytest.approx(0.25, rel=1e-9)
    assert summary["w1_method"].startswith("exact")


@pytest.mark.parametrize("empty", ["truth", "synthetic"])
def test_evaluate_without_points_names_the_file(tmp_path, empty):
    """A zero-row truth is refused naming its file, as the other evaluations do ("truth …:
    no records"), not with scipy's "Distribution can't be empty."."""
    points = {"truth": pa.table({"v": [0.1, 0.5, 0.9]}), "synthetic": pa.table({"v": [0.4]})}
    points[empty] = points[empty].slice(0, 0)
    write_file(points["truth"], str(tmp_path / "truth.parquet"), "parquet")
    os.makedirs(tmp_path / "syn")
    write_file(points["synthetic"], str(tmp_path / "syn" / "synthetic-s00000.parquet"),
               "parquet")
    (tmp_path / "syn" / "manifest.json").write_text("{}")
    code, _, err = run_cli(["evaluate", "privhp", "--truth", str(tmp_path / "truth.parquet"),
                            "--synthetic", str(tmp_path / "syn"), "--columns", "v"])
    assert code == 2
    where = {"truth": "truth.parquet", "synthetic": "syn"}[empty]
    assert f"{tmp_path / where}: no records" in err.strip().splitlines()[-1], err


def test_default_sampler_is_opendp_and_fit_for_publication(data, tmp_path):
    _, points, _, _ = data
    path = str(tmp_path / "small.parquet")
    write_file(points_table(points[:500]), path, "parquet")
    manifest = run_privhp(path, str(tmp_path / "out"), COLUMNS, BOUNDS, CONFIG, 200,
                           num_shards=2)
    assert manifest["sampler"] == "opendp" and manifest["for_publication"] is True
    assert read_dataset(str(tmp_path / "out")).num_rows == 200


def test_the_old_command_name_says_the_new_one(tmp_path):
    """``bounded`` was this family's command word: it is refused, naming ``privhp``, and
    nothing is written."""
    code, _, err = run_cli(["bounded", "run", "--input", str(tmp_path / "p.parquet"),
                            "--output", str(tmp_path / "out")])
    assert code == 2 and "is now 'privhp'" in err and "continual-synth privhp run" in err
    assert not os.path.exists(tmp_path / "out")
