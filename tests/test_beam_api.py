"""The Beam PTransforms (``continual_synth.beam``) in a user's own pipeline: with the same
seed they release what the command line's ``run`` releases, from dicts, ``beam.Row``\\ s
or Arrow tables."""
from __future__ import annotations

import contextlib
import io
import json
import pickle
import tempfile

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest

import continual_synth.beam as csb
from continual_synth.mechanisms.errors import InputError
from continual_synth.pipelines.commands.cli import main
from continual_synth.transforms.files import read_dataset, write_file

from helpers_panels import long_table, markov_codes


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(list(argv)) == 0, err.getvalue()[-1500:]


def keep(path):
    """A sink for a test: every element of a PCollection, pickled into ``path``."""
    def save(elements):
        with open(path, "wb") as handle:
            pickle.dump(list(elements), handle)
    return beam.combiners.ToList() | beam.Map(save)


def kept(path):
    with open(path, "rb") as handle:
        return pickle.load(handle)


def in_pipeline(elements, transform):
    """(synthetic records as one table, the manifest) of ``beam.Create(elements) |
    transform`` on the DirectRunner."""
    folder = tempfile.mkdtemp()
    with beam.Pipeline() as pipeline:
        released = pipeline | beam.Create(elements, reshuffle=False) | transform
        released.synthetic | "Keep" >> keep(f"{folder}/synthetic")
        released.manifest | "KeepManifest" >> keep(f"{folder}/manifest")
    synthetic, manifests = kept(f"{folder}/synthetic"), kept(f"{folder}/manifest")
    assert len(manifests) == 1
    if synthetic and isinstance(synthetic[0], pa.Table):
        return pa.concat_tables(synthetic), manifests[0]
    return pa.Table.from_pylist(synthetic), manifests[0]


def ordered(table: pa.Table, columns) -> list:
    """The rows of ``columns``, sorted, as dicts (records given as dicts come back typed
    as Python values: int64 where the files hold int32)."""
    return table.select(columns).sort_by([(c, "ascending") for c in columns]).to_pylist()


def same_manifest(beam_manifest, run_dir):
    with open(f"{run_dir}/manifest.json") as handle:
        on_disk = json.load(handle)
    ignore = {"provenance", "files", "accuracy_files", "mode", "format"}
    assert {k: v for k, v in beam_manifest.items() if k not in ignore} == \
        {k: v for k, v in on_disk.items() if k not in ignore}


@pytest.mark.parametrize("form", ["dicts", "rows", "tables"])
def test_window_release_equals_window_run(tmp_path, form):
    table = long_table(markov_codes(60, 4, seed=3))
    write_file(table, str(tmp_path / "panel.parquet"), "parquet")
    run_cli("window", "run", "--input", str(tmp_path / "panel.parquet"), "--output",
            str(tmp_path / "run"), "--window", "2", "--horizon", "4", "--rho", "1", "--seed", "6")
    elements = {"dicts": table.to_pylist(),
                "rows": [beam.Row(**record) for record in table.to_pylist()],
                "tables": [table.slice(0, 100), table.slice(100)]}[form]
    synthetic, manifest = in_pipeline(elements, csb.WindowRelease(
        window=2, horizon=4, rho=1, seed=6, as_tables=form == "tables"))
    expected = read_dataset(str(tmp_path / "run"))
    columns = ["synthetic_id", "period", "value"]
    assert synthetic.num_rows == expected.num_rows > 0
    assert ordered(synthetic, columns) == ordered(expected, columns)
    same_manifest(manifest, tmp_path / "run")
    assert manifest["for_publication"] is False  # seeded


def test_cumulative_tabular_and_privhp_releases_equal_their_runs(tmp_path):
    rng = np.random.default_rng(2)
    panel = long_table(markov_codes(50, 3, seed=4))
    stream = pa.table({"period": np.repeat(np.arange(1, 4), 40),
                       "a": rng.integers(0, 3, 120), "b": rng.integers(0, 2, 120)})
    points = pa.table({"x": rng.random(300), "y": rng.beta(2, 3, 300)})
    domain = {"a": [0, 1, 2], "b": [0, 1]}
    (tmp_path / "domain.json").write_text(json.dumps(domain))
    cases = [
        ("cumulative", panel, ["--horizon", "3", "--rho", "1"],
         csb.CumulativeRelease(horizon=3, rho=1, seed=2), ["synthetic_id", "period", "value"]),
        ("tabular", stream, ["--domain", str(tmp_path / "domain.json"), "--epsilon", "2",
                             "--horizon", "3"],
         csb.TabularRelease(domain=domain, epsilon=2, horizon=3, seed=2),
         ["period", "a", "b"]),
        ("privhp", points, ["--columns", "x,y", "--bounds", "0:1", "--epsilon", "2",
                             "--samples", "50", "--depth", "5"],
         csb.PrivHPRelease(columns="x,y", bounds="0:1", epsilon=2, samples=50, depth=5,
                           seed=2), ["x", "y"]),
    ]
    for family, table, argv, transform, columns in cases:
        write_file(table, str(tmp_path / f"{family}.parquet"), "parquet")
        run_dir = tmp_path / f"{family}-run"
        run_cli(family, "run", "--input", str(tmp_path / f"{family}.parquet"), "--output",
                str(run_dir), *argv, "--seed", "2")
        synthetic, manifest = in_pipeline(table.to_pylist(), transform)
        expected = read_dataset(str(run_dir))
        assert synthetic.num_rows == expected.num_rows > 0, family
        assert ordered(synthetic, columns) == ordered(expected, columns), family
        same_manifest(manifest, run_dir)


def test_tabular_release_outputs_the_runs_accuracy_documents(tmp_path):
    """``TabularRelease``'s ``accuracy`` output holds, per period, the document ``run``
    writes as ``accuracy-tTTTT.json`` (same seed, same bounds); other families have none."""
    rng = np.random.default_rng(5)
    stream = pa.table({"period": np.repeat(np.arange(1, 4), 60),
                       "a": rng.integers(0, 3, 180), "b": rng.integers(0, 2, 180)})
    domain = {"a": [0, 1, 2], "b": [0, 1]}
    (tmp_path / "domain.json").write_text(json.dumps(domain))
    write_file(stream, str(tmp_path / "stream.parquet"), "parquet")
    options = dict(epsilon=2, horizon=3, selections=1, selection_schedule="fixed",
                   wide_cells=0)
    run_cli("tabular", "run", "--input", str(tmp_path / "stream.parquet"), "--output",
            str(tmp_path / "run"), "--domain", str(tmp_path / "domain.json"), "--epsilon", "2",
            "--horizon", "3", "--selections", "1", "--selection-schedule", "fixed",
            "--wide-cells", "0", "--seed", "2")
    with beam.Pipeline() as pipeline:
        released = (pipeline | beam.Create(stream.to_pylist(), reshuffle=False)
                    | csb.TabularRelease(domain=domain, seed=2, **options))
        released.accuracy | keep(f"{tmp_path}/accuracy")
    documents = sorted(kept(f"{tmp_path}/accuracy"), key=lambda d: d["period"])
    on_disk = [json.loads((tmp_path / "run" / f"accuracy-t{t:04d}.json").read_text())
               for t in (1, 2, 3)]
    assert documents == on_disk
    assert [entry["measured"] for d in documents for entry in d["workloads"]] == [True] * 3
    with beam.Pipeline() as pipeline:
        window = (pipeline | beam.Create(long_table(markov_codes(20, 3, seed=1)).to_pylist())
                  | csb.WindowRelease(window=2, horizon=3, rho=1, seed=1))
        assert window.accuracy is None


def test_options_are_checked_when_the_transform_is_built():
    with pytest.raises(InputError, match="did you mean rho"):
        csb.WindowRelease(window=2, horizon=4, rhoo=1)
    with pytest.raises(InputError, match="window"):
        csb.WindowRelease(horizon=4, rho=1)
    with pytest.raises(InputError, match="horizon"):
        with beam.Pipeline() as pipeline:
            _ = pipeline | beam.Create([{"period": 1, "a": 0}]) | csb.TabularRelease(
                domain={"a": [0, 1]}, epsilon=1)


def test_drop_mode_leaves_out_invalid_records_as_run_does(tmp_path):
    """``invalid_records="drop"``: the transform releases what ``run`` releases from the
    records without the invalid one (a value outside the alphabet)."""
    table = long_table(markov_codes(60, 4, seed=3))
    records = table.to_pylist()
    bad = records + [{"id": 0, "period": 2, "value": 7}]  # a second report, outside {0, 1}
    write_file(table, str(tmp_path / "panel.parquet"), "parquet")
    run_cli("window", "run", "--input", str(tmp_path / "panel.parquet"), "--output",
            str(tmp_path / "run"), "--window", "2", "--horizon", "4", "--rho", "1", "--seed",
            "6")
    synthetic, _ = in_pipeline(bad, csb.WindowRelease(
        window=2, horizon=4, rho=1, seed=6, missing_value=0, invalid_records="drop"))
    columns = ["synthetic_id", "period", "value"]
    assert ordered(synthetic, columns) == ordered(read_dataset(str(tmp_path / "run")), columns)
    with pytest.raises(InputError, match="missing-value"):
        csb.WindowRelease(window=2, horizon=4, rho=1, invalid_records="drop")


def test_nested_columns_are_refused_as_in_a_file():
    with pytest.raises(Exception, match="column 'id' holds struct"):
        in_pipeline([{"id": {"person": 1}, "period": 1, "value": 0}],
                    csb.WindowRelease(window=2, horizon=4, rho=1, seed=6))
