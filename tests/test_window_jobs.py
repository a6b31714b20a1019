"""End-to-end tests of the fixed-window jobs (pipelines/families/jobs.py with the window
synthesizer): run, init and step.

Every job here is a real Beam pipeline on the DirectRunner; panels are small and the
seeded simulation sampler makes every outcome deterministic.
"""
from __future__ import annotations

import os
import shutil
from types import SimpleNamespace

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from continual_synth.mechanisms.accounting import BudgetExceededError
from continual_synth.mechanisms.errors import InputError, StateError
from continual_synth.mechanisms.window import WindowConfig
from continual_synth.pipelines.release import release_dir
from continual_synth.pipelines.families import jobs
from continual_synth.pipelines.release.lifecycle import StateDir, load_state
from continual_synth.pipelines.commands.options import PanelColumns
from continual_synth.pipelines.examples.sipp_like import all_ones_panel
from continual_synth.transforms import files
from continual_synth.transforms.files import write_file

from helpers_panels import (check_release, clone_incremental, data_files,
                            long_table, markov_codes, period_table, read_manifest,
                            release_snapshot, released_periods, snapshot, sorted_records,
                            staging_leftovers, window_jobs, without_provenance,
                            write_period_files)

SEED = 7
SHARDS = 3
N = 600
T = 5
K = 3
RHO = 5.0
CONFIG = WindowConfig(window=K, horizon=T, rho=RHO, neighbor="add-remove")

MANIFEST_KEYS = {"algorithm", "window", "horizon", "alphabet", "neighbor", "rho", "rho_spent",
                 "epsilon", "delta", "n_pad", "num_synthetic", "periods_released",
                 "clamp_events", "error_bound", "beta", "sampler", "for_publication"}

# string-valued alphabet, string ids, non-default column names
LEVELS = ("low", "mid", "high")
S_COLUMNS = PanelColumns(id_col="pid", period_col="month", value_col="status")
S_CONFIG = WindowConfig(window=2, horizon=4, rho=RHO, alphabet=LEVELS, neighbor="add-remove")
S_PEOPLE = 400


def run_job(panel, out, config=CONFIG, **kwargs):
    kwargs.setdefault("seed", SEED)
    kwargs.setdefault("num_shards", SHARDS)
    return window_jobs.run(str(panel), str(out), config, **kwargs)


def assert_wrote_nothing(output_dir):
    assert data_files(output_dir) == []
    assert not os.path.exists(os.path.join(output_dir, "manifest.json"))
    assert staging_leftovers(output_dir) == []


# ------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    """A binary panel (N people, T periods) as one Parquet file and per-period files."""
    root = tmp_path_factory.mktemp("binary")
    codes = markov_codes(N, T, seed=11)
    table = long_table(codes)
    panel = str(root / "panel.parquet")
    write_file(table, panel, "parquet")
    periods = write_period_files(table, str(root / "periods"), "parquet")
    return SimpleNamespace(root=root, codes=codes, table=table, panel=panel, periods=periods)


@pytest.fixture(scope="module")
def batch(binary):
    out = str(binary.root / "batch")
    manifest = run_job(binary.panel, out)
    return SimpleNamespace(out=out, manifest=manifest)


@pytest.fixture(scope="module")
def incremental(binary):
    """init + T steps on the per-period files; what each step left behind."""
    state, out = str(binary.root / "state"), str(binary.root / "incremental")
    window_jobs.init(state, CONFIG, seed=SEED, num_shards=SHARDS)
    steps = []
    for path in binary.periods:
        result = window_jobs.step(state, path, out)
        steps.append(SimpleNamespace(result=result, manifest=read_manifest(out),
                                     files=data_files(out), periods=released_periods(out)))
    return SimpleNamespace(state=state, out=out, steps=steps, manifest=steps[-1].manifest)


@pytest.fixture(scope="module")
def early_state(binary):
    """A state that has ingested periods 1..k−1 (nothing released, nothing spent)."""
    state, out = str(binary.root / "early-state"), str(binary.root / "early-release")
    window_jobs.init(state, CONFIG, seed=SEED, num_shards=SHARDS)
    for path in binary.periods[:K - 1]:
        window_jobs.step(state, path, out)
    return SimpleNamespace(state=state, out=out)


@pytest.fixture
def early(early_state, tmp_path):
    """A private copy of ``early_state`` for a test that may change it."""
    state, out = clone_incremental(early_state.state, early_state.out, str(tmp_path))
    return SimpleNamespace(state=state, out=out)


@pytest.fixture(scope="module")
def strings(tmp_path_factory):
    """A three-level panel with string ids and columns pid/month/status, written as
    CSV, Avro and Parquet, each synthesized to a different output format."""
    root = tmp_path_factory.mktemp("strings")
    codes = markov_codes(S_PEOPLE, S_CONFIG.horizon, alphabet_size=3, seed=5)
    table = long_table(codes, LEVELS, "pid", "month", "status", string_ids=True)
    releases = {}
    for in_fmt, out_fmt in (("csv", "avro"), ("avro", "csv"), ("parquet", "parquet")):
        panel = str(root / f"panel.{in_fmt}")
        write_file(table, panel, in_fmt)
        out = str(root / f"release-{in_fmt}-to-{out_fmt}")
        manifest = run_job(panel, out, S_CONFIG, out_format=out_fmt, columns=S_COLUMNS)
        releases[(in_fmt, out_fmt)] = SimpleNamespace(out=out, manifest=manifest)
    return SimpleNamespace(root=root, codes=codes, table=table, releases=releases)


# ------------------------------------------------------------ 1. release validity


def test_run_parquet_release_is_valid(binary, batch):
    manifest = batch.manifest
    assert manifest == read_manifest(batch.out)
    codes = check_release(batch.out, manifest, binary.codes, typed=True)
    assert codes.shape == (manifest["num_synthetic"], T)
    assert manifest["clamp_events"] == 0
    assert manifest["n_pad"] == CONFIG.n_pad >= manifest["error_bound"]
    # n* = n + |A|^k n_pad + (noise in the k-histogram), which Theorem 3.2 bounds
    padding = 2 ** K * manifest["n_pad"]
    assert abs(manifest["num_synthetic"] - padding - N) <= 2 ** K * manifest["error_bound"]
    assert manifest["debias"]["real_population_estimate"] == manifest["num_synthetic"] - padding


@pytest.mark.parametrize("formats", [("csv", "avro"), ("avro", "csv"), ("parquet", "parquet")],
                         ids=lambda f: f"{f[0]}-to-{f[1]}")
def test_run_formats_string_alphabet_and_custom_columns(strings, formats):
    release = strings.releases[formats]
    in_fmt, out_fmt = formats
    manifest = release.manifest
    assert manifest["alphabet"] == list(LEVELS)
    assert manifest["format"] == out_fmt
    names = data_files(release.out)
    assert names and all(name.endswith("." + out_fmt) for name in names)
    codes = check_release(release.out, manifest, strings.codes, typed=out_fmt == "parquet")
    assert codes.max() == 2  # all three levels occur
    values = set(sorted_records(release.out)["value"].to_pylist())
    assert values == set(LEVELS)


def test_output_format_does_not_change_the_records(strings):
    tables = [sorted_records(r.out) for r in strings.releases.values()]
    assert tables[0].num_rows > 0
    for other in tables[1:]:
        assert other.equals(tables[0])


def test_avro_output_declares_int64_ids_and_int32_periods(strings):
    release = strings.releases[("csv", "avro")]
    path = os.path.join(release.out, data_files(release.out)[0])
    with open(path, "rb") as handle:
        schema = fastavro.reader(handle).writer_schema
    types = {field["name"]: field["type"] for field in schema["fields"]}
    assert types == {"synthetic_id": "long", "period": "int", "value": "string"}


def test_parquet_files_stop_hashing_many_valued_columns(tmp_path):
    """write_file caps each column's dictionary page (files.PARQUET_DICTIONARY_PAGE_BYTES):
    an id column falls back to plain encoding after that many bytes of distinct values
    (pyarrow's default page of 1 MiB hashed 131 072 ids per shard file first), while a
    few-valued column stays dictionary-encoded; the rows read back unchanged."""
    rng = np.random.default_rng(0)
    table = pa.table({"synthetic_id": pa.array(rng.permutation(200_000), pa.int64()),
                      "value": pa.array(rng.integers(0, 3, 200_000))})
    path = str(tmp_path / "records.parquet")
    write_file(table, path, "parquet")
    assert pq.read_table(path).equals(table)
    ids, values = (pq.ParquetFile(path).metadata.row_group(0).column(j) for j in (0, 1))
    assert ids.has_dictionary_page and "PLAIN" in ids.encodings
    dictionary_page = ids.data_page_offset - ids.dictionary_page_offset
    assert dictionary_page <= files.PARQUET_DICTIONARY_PAGE_BYTES + 1024  # + the page header
    assert values.has_dictionary_page and values.data_page_offset - values.dictionary_page_offset < 100


def test_tables_cross_stages_in_arrow_ipc_and_are_measured_without_encoding(tmp_path):
    """transforms/arrow_coder.py: Beam estimates the size of a PCollection's first
    elements by encoding them; batches read as pa.Table were pickled for it (194 times,
    1.8 GB, in a 2M x 12 run).  The read stage now declares pa.Table, whose coder writes
    Arrow IPC (a slice without its parent's buffers) and estimates with ``nbytes``."""
    import apache_beam as beam

    from continual_synth.transforms.arrow_coder import TABLE, ArrowTableCoder
    from continual_synth.transforms.read import ReadRecordBatches
    coder = beam.coders.registry.get_coder(TABLE)
    assert isinstance(coder, ArrowTableCoder)
    table = pa.table({"id": np.arange(100_000), "value": np.arange(100_000) % 3})
    part = table.slice(10, 5)
    assert coder.decode(coder.encode(part)).equals(part)
    assert len(coder.encode(part)) < 10_000 < len(coder.encode(table))
    coder.encode = lambda value: pytest.fail("encoded to estimate a size")
    assert coder.estimate_size(table) == table.nbytes
    path = str(tmp_path / "records.parquet")
    pq.write_table(table, path)
    with beam.Pipeline() as pipeline:
        batches = pipeline | ReadRecordBatches(path)
        assert batches.element_type is TABLE


# ------------------------------------------------------------ 2. same algorithm


def test_run_equals_init_plus_steps(batch, incremental):
    batch_records = sorted_records(batch.out)
    assert batch_records.num_rows == batch.manifest["num_synthetic"] * T
    assert sorted_records(incremental.out).equals(batch_records)
    run_manifest = dict(batch.manifest)
    step_manifest = dict(incremental.manifest)
    assert run_manifest.pop("mode") == "run"
    assert step_manifest.pop("mode") == "incremental"
    assert without_provenance(step_manifest) == without_provenance(run_manifest)


def test_run_equals_steps_with_period_column_csv_and_string_ids(strings, tmp_path):
    """Per-period CSV files that keep their period column (month), string ids."""
    paths = write_period_files(strings.table, str(tmp_path / "periods"), "csv",
                               period_col="month", keep_period=True)
    state, out = str(tmp_path / "state"), str(tmp_path / "release")
    window_jobs.init(state, S_CONFIG, seed=SEED, out_format="csv", columns=S_COLUMNS,
                     num_shards=SHARDS)
    for period, path in enumerate(paths, 1):
        assert window_jobs.step(state, path, out, period=period)["period"] == period
    batch = strings.releases[("csv", "avro")]
    assert sorted_records(out).equals(sorted_records(batch.out))
    manifest = read_manifest(out)
    for key in ("num_synthetic", "rho_spent", "clamp_events", "periods_released", "n_pad"):
        assert manifest[key] == batch.manifest[key], key
    assert manifest["format"] == "csv" and data_files(out)[0].endswith(".csv")


def test_different_seed_gives_a_different_release(binary, batch, tmp_path):
    out = str(tmp_path / "other-seed")
    manifest = run_job(binary.panel, out, seed=SEED + 1)
    check_release(out, manifest, binary.codes)
    assert not sorted_records(out).equals(sorted_records(batch.out))


# ------------------------------------------------------------ 3. manifest contract


@pytest.mark.parametrize("mode", ["run", "incremental"])
def test_manifest_contract(batch, incremental, mode):
    manifest = batch.manifest if mode == "run" else incremental.manifest
    assert MANIFEST_KEYS <= set(manifest), MANIFEST_KEYS - set(manifest)
    assert manifest["mode"] == mode
    assert manifest["algorithm"] == "bun2024-algorithm-1-fixed-time-window"
    assert (manifest["window"], manifest["horizon"]) == (K, T)
    assert manifest["alphabet"] == [0, 1]
    assert manifest["neighbor"] == "add-remove"
    assert manifest["rho"] == RHO
    assert manifest["rho_spent"] == pytest.approx(RHO, rel=1e-12)
    assert manifest["periods_released"] == list(range(1, T + 1))
    assert manifest["delta"] == CONFIG.delta and manifest["beta"] == CONFIG.beta
    assert manifest["epsilon"] > RHO  # (ε, δ) from ρ-zCDP: ε > ρ for δ < 1
    assert manifest["n_pad"] == CONFIG.n_pad
    assert manifest["error_bound"] == pytest.approx(CONFIG.error_bound)
    assert manifest["clamp_events"] == 0
    assert manifest["sampler"] == "seeded" and manifest["for_publication"] is False
    assert manifest["num_synthetic"] == len(set(sorted_records(
        batch.out if mode == "run" else incremental.out)["synthetic_id"].to_pylist()))
    assert "note" not in manifest


# ------------------------------------------------------------ 4. incremental contract


def test_incremental_releases_nothing_before_k_then_periods_1_to_t(incremental):
    per_update = RHO / CONFIG.num_updates
    for period, seen in enumerate(incremental.steps, 1):
        manifest = seen.manifest
        assert seen.result["period"] == period
        assert manifest["last_period_seen"] == period
        assert manifest["mode"] == "incremental"
        if period < K:
            assert seen.result["status"] == "ingested"
            assert seen.files == []
            assert manifest["periods_released"] == []
            assert manifest["num_synthetic"] == 0 and manifest["rho_spent"] == 0
            assert f"period {K}" in manifest["note"]
        else:
            assert seen.result["status"] == "released"
            assert seen.periods == list(range(1, period + 1))
            assert manifest["periods_released"] == list(range(1, period + 1))
            assert manifest["rho_spent"] == pytest.approx(per_update * (period - K + 1))
            assert seen.result["rho_spent"] == pytest.approx(manifest["rho_spent"])
            assert "note" not in manifest
    check_release(incremental.out, incremental.manifest, None)


def test_rerunning_a_released_period_is_a_noop(binary, incremental, tmp_path):
    state, out = clone_incremental(incremental.state, incremental.out, str(tmp_path))
    before = (snapshot(state), snapshot(out))
    for period in (K, T):
        result = window_jobs.step(state, binary.periods[period - 1], out)
        assert result["status"] == "already-released"
        assert result["period"] == period
    assert (snapshot(state), snapshot(out)) == before
    assert read_manifest(out)["rho_spent"] == pytest.approx(RHO)


def test_smaller_period_is_a_noop_and_larger_is_refused(binary, early):
    before = (snapshot(early.state), snapshot(early.out))
    # a file never seen, but --period names an ingested period: nothing read
    result = window_jobs.step(early.state, binary.periods[3], early.out, period=K - 1)
    assert result["status"] == "already-released" and result["period"] == K - 1
    with pytest.raises(StateError, match=f"period {K + 1} is out of order: the next period "
                                         f"is {K}"):
        window_jobs.step(early.state, binary.periods[K - 1], early.out, period=K + 1)
    assert (snapshot(early.state), snapshot(early.out)) == before


def test_period_zero_is_refused(binary, tmp_path):
    state = str(tmp_path / "state")
    window_jobs.init(state, CONFIG, seed=SEED, num_shards=SHARDS)
    with pytest.raises((StateError, ValueError)):
        window_jobs.step(state, binary.periods[0], str(tmp_path / "release"), period=0)


def test_step_beyond_horizon_refused_before_reading(incremental, tmp_path):
    state, out = clone_incremental(incremental.state, incremental.out, str(tmp_path))
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"this is not parquet")
    before = (snapshot(state), snapshot(out))
    with pytest.raises(ValueError, match=f"period {T + 1} is beyond the horizon T={T}"):
        window_jobs.step(state, str(garbage), out)
    with pytest.raises(ValueError, match="beyond the horizon"):
        window_jobs.step(state, str(garbage), out, period=T + 1)
    assert (snapshot(state), snapshot(out)) == before


def test_step_beyond_horizon_with_missing_file_names_the_horizon(incremental, tmp_path):
    state, out = clone_incremental(incremental.state, incremental.out, str(tmp_path))
    with pytest.raises(ValueError, match="beyond the horizon"):
        window_jobs.step(state, str(tmp_path / "does-not-exist.parquet"), out)


def test_budget_overspend_refused_before_reading(binary, early, tmp_path):
    store = StateDir(early.state)
    version, state = store.read()
    state["synthesizer_state"]["ledger"]["entries"].append(
        {"label": "an earlier release", "amount": RHO * 0.9})
    store.commit(version, state)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"PAR1 not really")
    before = (snapshot(early.state), snapshot(early.out))
    for input_path in (str(garbage), binary.periods[K - 1]):
        with pytest.raises(BudgetExceededError, match=f"period {K}: .*would exceed the budget"):
            window_jobs.step(early.state, input_path, early.out)
    assert (snapshot(early.state), snapshot(early.out)) == before
    assert data_files(early.out) == []


def test_step_into_another_output_dir_refused(binary, early, tmp_path):
    before = snapshot(early.state)
    other = str(tmp_path / "elsewhere")
    with pytest.raises(StateError, match="releases into"):
        window_jobs.step(early.state, binary.periods[K - 1], other)
    assert not os.path.exists(other)
    assert snapshot(early.state) == before


def test_crash_after_commit_resumes_and_charges_once(binary, incremental, early, monkeypatch):
    per_update = RHO / CONFIG.num_updates
    real_emit = jobs.PanelJob.emit
    crashes = {"publish": 0, "files": 0}

    def crash_before_publication(*args, **kwargs):
        crashes["publish"] += 1
        raise RuntimeError("simulated crash before publication")

    # period k: crash after the state commit, before anything is published
    monkeypatch.setattr(jobs.PanelJob, "emit", crash_before_publication)
    with pytest.raises(RuntimeError, match="simulated crash"):
        window_jobs.step(early.state, binary.periods[K - 1], early.out)
    monkeypatch.setattr(jobs.PanelJob, "emit", real_emit)
    state = load_state(early.state)
    assert state["pending"]["period"] == K
    assert state["synthesizer_state"]["ledger"]["entries"][-1]["amount"] == pytest.approx(per_update)
    assert data_files(early.out) == []
    assert read_manifest(early.out)["periods_released"] == []

    result = window_jobs.step(early.state, binary.periods[K - 1], early.out)
    assert result["status"] == "released" and result["resumed"] is True
    assert result["rho_spent"] == pytest.approx(per_update)
    assert released_periods(early.out) == list(range(1, K + 1))

    # period k+1: crash after the data files are published, before the manifest
    real_publish_files = release_dir.publish_staged_files

    def publish_then_crash(*args, **kwargs):
        real_publish_files(*args, **kwargs)
        crashes["files"] += 1
        raise RuntimeError("simulated crash after publishing files")

    monkeypatch.setattr(release_dir, "publish_staged_files", publish_then_crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        window_jobs.step(early.state, binary.periods[K], early.out)
    monkeypatch.setattr(release_dir, "publish_staged_files", real_publish_files)
    assert read_manifest(early.out)["periods_released"] == list(range(1, K + 1))
    result = window_jobs.step(early.state, binary.periods[K], early.out)
    assert result["resumed"] is True and result["period"] == K + 1
    assert result["rho_spent"] == pytest.approx(2 * per_update)

    for path in binary.periods[K + 1:]:
        window_jobs.step(early.state, path, early.out)
    assert crashes == {"publish": 1, "files": 1}
    manifest = read_manifest(early.out)
    assert manifest["rho_spent"] == pytest.approx(RHO)
    ledger = load_state(early.state)["synthesizer_state"]["ledger"]["entries"]
    assert [entry["label"] for entry in ledger] == [f"period {t}" for t in range(K, T + 1)]
    assert staging_leftovers(early.out) == []
    assert sorted_records(early.out).equals(sorted_records(incremental.out))
    assert manifest.pop("mode") == "incremental"
    expected = {key: value for key, value in incremental.manifest.items() if key != "mode"}
    assert without_provenance(manifest) == without_provenance(expected)


def test_crash_in_histogram_pipeline_leaves_everything_as_before(binary, incremental, early,
                                                                  monkeypatch):
    real = jobs.step_shard_statistics

    def crash_in_shard_1(shard, *args, **kwargs):
        if shard == 1:
            raise RuntimeError("simulated worker crash")
        return real(shard, *args, **kwargs)

    output_before = snapshot(early.out)
    state_before = snapshot(early.state)
    monkeypatch.setattr(jobs, "step_shard_statistics", crash_in_shard_1)
    with pytest.raises(Exception, match="simulated worker crash"):
        window_jobs.step(early.state, binary.periods[K - 1], early.out)
    monkeypatch.setattr(jobs, "step_shard_statistics", real)
    assert snapshot(early.state) == state_before
    assert snapshot(early.out) == output_before
    assert staging_leftovers(early.out) == []

    # the step then succeeds and releases what an uninterrupted run releases
    assert window_jobs.step(early.state, binary.periods[K - 1], early.out)["status"] == "released"
    first_k = sorted_records(incremental.out)
    first_k = first_k.filter(pc.less_equal(first_k["period"], K))
    assert sorted_records(early.out).equals(first_k)


def test_identical_files_for_two_periods_are_both_ingested(tmp_path):
    table = all_ones_panel(200, 3)
    paths = write_period_files(table, str(tmp_path / "periods"), "parquet")
    config = WindowConfig(window=2, horizon=3, rho=RHO, neighbor="add-remove")
    state, out = str(tmp_path / "state"), str(tmp_path / "release")
    window_jobs.init(state, config, seed=SEED, num_shards=2)
    results = [window_jobs.step(state, path, out, period=t) for t, path in enumerate(paths, 1)]
    assert [r["status"] for r in results] == ["ingested", "released", "released"]
    assert read_manifest(out)["periods_released"] == [1, 2, 3]


# ------------------------------------------------------------ 5. bad input (run)


def _drop_row(table, id_value, period):
    keep = pc.invert(pc.and_(pc.equal(table["id"], id_value), pc.equal(table["period"], period)))
    return table.filter(keep)


def _with_value(table, row, value):
    values = table["value"].to_numpy().copy()
    values[row] = value
    return table.set_column(2, "value", pa.array(values))


def _with_period(table, row, period):
    periods = table["period"].to_numpy().copy()
    periods[row] = period
    return table.set_column(1, "period", pa.array(periods))


def _duplicate(table, id_value, period):
    extra = table.filter(pc.and_(pc.equal(table["id"], id_value),
                                 pc.equal(table["period"], period)))
    return pa.concat_tables([table, extra])


def _period_column(transform):
    """The table with its period column's values passed through ``transform``."""
    def change(table):
        index = table.schema.get_field_index("period")
        return table.set_column(index, "period", transform(table["period"]))
    return change


def _fifth_row_null(column):
    values = column.to_pylist()
    values[4] = None
    return pa.array(values, column.type)


# row r of long_table is person r // T + 1 (id), period r % T + 1.
# (make, format, message); validation errors name the file, pivot errors the id and period
BAD_RUN_INPUTS = {
    "missing-column": (lambda t: t.drop_columns(["value"]), "csv",
                       r"missing column\(s\) \['value'\]"),
    "duplicate": (lambda t: _duplicate(t, 5, 2), "parquet",
                  r"id 5 reports 2 times in period 2"),
    "missing-report": (lambda t: _drop_row(t, 7, 3), "parquet",
                       r"id 7 has no report in period 3"),
    "value-outside-alphabet": (lambda t: _with_value(t, 3 * T + 1, 2), "avro",
                               r"value 2 \(row \d+\) is not in the alphabet \[0, 1\]"),
    "period-0": (lambda t: _with_period(t, 10, 0), "parquet",
                 rf"row 11 holds period 0; periods must be 1\.\.{T}"),
    "period-T+1": (lambda t: _with_period(t, 12, T + 1), "csv",
                   rf"row 13 holds period {T + 1}; periods must be 1\.\.{T}"),
    # not "must hold whole-number periods without gaps, found type int32" (no row,
    # and an integer type named as the problem)
    "null-period": (_period_column(_fifth_row_null), "parquet",
                    r"column 'period' has 1 empty \(null\) value\(s\), the first at row 5"),
    "whole-float-periods": (_period_column(lambda c: c.cast(pa.float64())), "parquet",
                            r"column 'period' must hold whole-number periods in an integer "
                            r"column, found type double \(write the periods as integers"),
}


@pytest.mark.parametrize("case", sorted(BAD_RUN_INPUTS))
def test_run_bad_input_clear_error_and_nothing_written(binary, tmp_path, case):
    make, fmt, message = BAD_RUN_INPUTS[case]
    panel = str(tmp_path / f"panel.{fmt}")
    write_file(make(binary.table), panel, fmt)
    out = str(tmp_path / "release")
    with pytest.raises(InputError, match=message) as raised:
        run_job(panel, out)
    if case not in ("duplicate", "missing-report"):
        assert str(raised.value).startswith(panel)
    assert_wrote_nothing(out)


def test_run_value_error_names_the_file(binary, tmp_path):
    panel = str(tmp_path / "bad-values.parquet")
    write_file(_with_value(binary.table, 4, 9), panel, "parquet")
    with pytest.raises(InputError, match="bad-values.parquet, column 'value'"):
        run_job(panel, tmp_path / "release")


def test_error_messages_show_plain_values(binary, tmp_path):
    panel = str(tmp_path / "panel.parquet")
    write_file(_with_value(binary.table, 4, 2), panel, "parquet")
    with pytest.raises(InputError) as raised:
        run_job(panel, tmp_path / "release")
    assert "value 2 (row 5) is not in the alphabet [0, 1]" in str(raised.value)
    assert "np." not in str(raised.value)


def test_error_names_the_file_and_its_row_in_a_directory_of_row_groups(binary, tmp_path):
    """A bad record in the third row group of the second file of a directory input is
    reported by that file and its row in the file (counted from 1), not by the directory
    and its position in the row group."""
    panel = tmp_path / "panel"
    panel.mkdir()
    table = binary.table
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), str(panel / "part-0.parquet"), row_group_size=7)
    bad = 2 * 7 + 3  # record 17 of the second file (from 0): row group 2, its record 3
    pq.write_table(_with_value(table.slice(half), bad, 2), str(panel / "part-1.parquet"),
                   row_group_size=7)
    with pytest.raises(InputError) as raised:
        run_job(str(panel), tmp_path / "release")
    message = str(raised.value)
    assert f"part-1.parquet, column 'value': value 2 (row {bad + 1}) is not in" in message


def test_run_nonexistent_input(tmp_path):
    out = str(tmp_path / "release")
    with pytest.raises(InputError, match="does-not-exist.parquet: no such file or directory"):
        run_job(tmp_path / "does-not-exist.parquet", out)
    assert not os.path.exists(out)


def test_run_refuses_an_output_that_holds_a_release(binary, batch, tmp_path):
    out = str(tmp_path / "release")
    shutil.copytree(batch.out, out)
    before = snapshot(out)
    with pytest.raises(InputError, match="already holds a release"):
        run_job(binary.panel, out)
    assert snapshot(out) == before


def test_missing_value_fills_missing_reports(tmp_path):
    """run(missing_value=0) on a panel with gaps == run on the panel with 0 filled in,
    and == init(missing_value=0) + steps on its per-period files."""
    config = WindowConfig(window=2, horizon=3, rho=RHO, neighbor="add-remove")
    codes = markov_codes(300, 3, seed=3)
    gaps = [(4, 2), (9, 3), (10, 2), (11, 3)]  # (id, period): not period 1
    filled_codes = codes.copy()
    table = long_table(codes)
    for id_value, period in gaps:
        table = _drop_row(table, id_value, period)
        filled_codes[id_value - 1, period - 1] = 0
    gappy = str(tmp_path / "gappy.parquet")
    filled = str(tmp_path / "filled.parquet")
    write_file(table, gappy, "parquet")
    write_file(long_table(filled_codes), filled, "parquet")

    with pytest.raises(InputError, match="has no report in period"):
        run_job(gappy, tmp_path / "refused", config)
    manifest = run_job(gappy, tmp_path / "gappy", config, missing_value=0)
    run_job(filled, tmp_path / "filled", config)
    check_release(str(tmp_path / "gappy"), manifest, filled_codes)
    assert sorted_records(str(tmp_path / "gappy")).equals(sorted_records(str(tmp_path / "filled")))

    state, out = str(tmp_path / "state"), str(tmp_path / "incremental")
    window_jobs.init(state, config, seed=SEED, missing_value=0, num_shards=SHARDS)
    for path in write_period_files(table, str(tmp_path / "periods")):
        window_jobs.step(state, path, out)
    assert sorted_records(out).equals(sorted_records(str(tmp_path / "filled")))


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_period_without_records_is_every_report_missing_with_a_missing_value(tmp_path,
                                                                              fmt):
    """With ``--missing-value`` V a period file with the id and value columns and no
    rows is the period in which every person's report is missing: ``step`` releases it
    as if every person reported V (an event-time stream releases a quiet panel period
    through this step).  Period 1 defines the panel's people, so it needs records; a
    file without records must still have the columns."""
    config = WindowConfig(window=2, horizon=3, rho=RHO, neighbor="add-remove")
    codes = markov_codes(50, 3, seed=3)
    filled = codes.copy()
    filled[:, 1] = 0  # period 2: every person's report missing, filled with 0
    table, filled_table = long_table(codes), long_table(filled)
    empty, no_columns = str(tmp_path / f"empty.{fmt}"), str(tmp_path / f"person.{fmt}")
    write_file(period_table(table, 2).slice(0, 0), empty, fmt)
    write_file(pa.table({"person": pa.array([], pa.int64())}), no_columns, fmt)
    files_of = {name: write_period_files(t, str(tmp_path / name))
                for name, t in (("periods", table), ("filled", filled_table))}
    state, out = str(tmp_path / "state"), str(tmp_path / "release")
    window_jobs.init(state, config, seed=SEED, missing_value=0, num_shards=SHARDS)
    before = snapshot(state)
    with pytest.raises(InputError, match="holds no records"):
        window_jobs.step(state, empty, out)  # period 1: the panel's people
    assert snapshot(state) == before
    window_jobs.step(state, files_of["periods"][0], out)
    before = snapshot(state)
    with pytest.raises(InputError, match=r"missing column\(s\) \['id', 'value'\]"):
        window_jobs.step(state, no_columns, out)
    assert snapshot(state) == before
    assert window_jobs.step(state, empty, out)["period"] == 2
    window_jobs.step(state, files_of["periods"][2], out)
    expected_state, expected = str(tmp_path / "filled-state"), str(tmp_path / "filled-out")
    window_jobs.init(expected_state, config, seed=SEED, missing_value=0, num_shards=SHARDS)
    for path in files_of["filled"]:
        window_jobs.step(expected_state, path, expected)
    assert sorted_records(out).equals(sorted_records(expected))


def test_drop_mode_drops_duplicate_and_new_ids_and_fills_them(tmp_path):
    """``invalid_records="drop"``: an id that reports twice in a period loses both reports
    (it is missing that period: ``missing_value``), an id new after period 1 is dropped;
    both go to the step's dead letter.  The release equals the one of files without those
    reports; ``run`` drops the duplicate pair alike."""
    import glob
    import json
    config = WindowConfig(window=2, horizon=3, rho=RHO, neighbor="add-remove")
    table = long_table(markov_codes(300, 3, seed=3))
    twice = pa.table({"id": pa.array([6], pa.int64()), "period": pa.array([2], pa.int64()),
                      "value": pa.array([1], pa.int64())}).cast(table.schema)
    new = twice.set_column(0, "id", pa.array([10 ** 6], table["id"].type))
    bad = pa.concat_tables([table, twice, new])
    good = _drop_row(table, 6, 2)
    states = {}
    for name, panel, mode in (("bad", bad, "drop"), ("good", good, "refuse")):
        state, out = str(tmp_path / name / "state"), str(tmp_path / name / "out")
        window_jobs.init(state, config, seed=SEED, missing_value=0, num_shards=SHARDS,
                         invalid_records=mode)
        for path in write_period_files(panel, str(tmp_path / name / "periods")):
            window_jobs.step(state, path, out)
        states[name] = (state, out)
    assert release_snapshot(states["bad"][1]) == release_snapshot(states["good"][1])
    (document,) = glob.glob(os.path.join(states["bad"][0], "rejected", "dropped-0002-*.json"))
    with open(document, encoding="utf-8") as handle:
        records = json.load(handle)["records"]
    assert sorted((r["record"]["id"], r["reason"].split(":")[0].split(" (")[0])
                  for r in records) == [
        (6, "id 6 reports 2 times in period 2"), (6, "id 6 reports 2 times in period 2"),
        (10 ** 6, "id 1000000 did not report in period 1")]
    write_file(pa.concat_tables([table, twice]), str(tmp_path / "twice.parquet"), "parquet")
    write_file(good, str(tmp_path / "good.parquet"), "parquet")
    with pytest.raises(InputError, match="id 6 reports 2 times in period 2"):
        run_job(tmp_path / "twice.parquet", tmp_path / "refused", config, missing_value=0)
    run_job(tmp_path / "twice.parquet", tmp_path / "dropped", config, missing_value=0,
            invalid_records="drop")
    run_job(tmp_path / "good.parquet", tmp_path / "reference", config, missing_value=0)
    assert release_snapshot(str(tmp_path / "dropped")) == \
        release_snapshot(str(tmp_path / "reference"))


# ------------------------------------------------------------ 5. bad input (step)


def _step_file(binary, period, transform=None, keep_period=False):
    table = period_table(binary.table, period, keep_period=keep_period)
    return table if transform is None else transform(table)


def _unknown_id(table):
    extra = pa.table({"id": pa.array([10 ** 6], pa.int64()), "value": pa.array([1], pa.int64())})
    return pa.concat_tables([table, extra])


def _fifth_row_next_period(table):
    periods = table["period"].to_numpy().copy()
    periods[4] += 1
    return table.set_column(table.schema.get_field_index("period"), "period",
                            pa.array(periods, table["period"].type))


def _dup_first(table):
    return pa.concat_tables([table, table.slice(5, 1)])


# (period of the file, transform, keep period column, format, message)
BAD_STEP_INPUTS = {
    "duplicate": (K, _dup_first, False, "parquet",
                  rf"period\.parquet \(period {K}\): id 6 reports more than once"),
    "missing-report": (K, lambda t: t.slice(1), False, "csv",
                       rf"period\.csv \(period {K}\): id 1 has no report"),
    "unknown-id": (K, _unknown_id, False, "parquet",
                   rf"period\.parquet \(period {K}\): id 1000000 did not report in period 1"),
    "wrong-period-column": (K + 1, None, True, "parquet",
                            rf"period\.parquet: row 1 holds period {K + 1}, but the next period "
                            rf"of this state is {K}( \[|$)"),
    # not "holds period 4, but the next period … is 3", read as the whole file's
    "one-row-of-another-period": (K, _fifth_row_next_period, True, "parquet",
                                  rf"period\.parquet: row 5 holds period {K + 1}, but the next "
                                  rf"period of this state is {K} \(1 of its {N} rows here "
                                  rf"hold another period than {K}\)"),
    # the period column's rule of every synthesizer's run and step (transforms/periods.py):
    # 3.0 is not taken as period 3, "3" does not read "row 1 holds period 3, but the next
    # period of this state is 3", nor a null "row 5 holds period nan"
    "whole-float-period-column": (K, _period_column(lambda c: c.cast(pa.float64())), True,
                                  "parquet", r"period\.parquet: column 'period' must hold "
                                  r"whole-number periods in an integer column, found type "
                                  r"double"),
    "text-period-column": (K, _period_column(lambda c: c.cast(pa.string())), True, "parquet",
                           r"period\.parquet: column 'period' must hold whole-number "
                           r"periods in an integer column, found type string"),
    "null-in-period-column": (K, _period_column(_fifth_row_null), True, "parquet",
                              r"period\.parquet: column 'period' has 1 empty \(null\) "
                              r"value\(s\), the first at row 5"),
    "value-outside-alphabet": (K, lambda t: t.set_column(1, "value", pa.array(
        [7] + t["value"].to_pylist()[1:], pa.int64())), False, "avro",
        r"value 7 \(row 1\) is not in the alphabet"),
    "float-ids": (K, lambda t: t.set_column(0, "id", t["id"].cast(pa.float64())), False,
                  "parquet", r"the ids are float64 here but int64 in period 1"),
    "missing-column": (K, lambda t: t.rename_columns(["person", "value"]), False, "parquet",
                       r"missing column\(s\) \['id'\]"),
    "empty-parquet": (K, lambda t: t.slice(0, 0), False, "parquet", "holds no records"),
    "header-only-csv": (K, lambda t: t.slice(0, 0), False, "csv", "holds no records"),
}


@pytest.mark.parametrize("case", sorted(BAD_STEP_INPUTS))
def test_step_bad_input_clear_error_and_state_unchanged(binary, early, tmp_path, case):
    period, transform, keep_period, fmt, message = BAD_STEP_INPUTS[case]
    path = str(tmp_path / f"period.{fmt}")
    write_file(_step_file(binary, period, transform, keep_period), path, fmt)
    before = (snapshot(early.state), snapshot(early.out))
    with pytest.raises(InputError, match=message):
        window_jobs.step(early.state, path, early.out)
    assert (snapshot(early.state), snapshot(early.out)) == before
    assert data_files(early.out) == [] and staging_leftovers(early.out) == []


def test_step_nonexistent_input(early, tmp_path):
    before = (snapshot(early.state), snapshot(early.out))
    with pytest.raises(InputError, match="nope.parquet: no such file or directory"):
        window_jobs.step(early.state, str(tmp_path / "nope.parquet"), early.out)
    assert (snapshot(early.state), snapshot(early.out)) == before


def test_step_duplicate_in_period_1(binary, tmp_path):
    state, out = str(tmp_path / "state"), str(tmp_path / "release")
    window_jobs.init(state, CONFIG, seed=SEED, num_shards=SHARDS)
    path = str(tmp_path / "p1.parquet")
    write_file(_step_file(binary, 1, _dup_first), path, "parquet")
    before = snapshot(state)
    with pytest.raises(InputError, match=r"\(period 1\): id 6 reports more than once"):
        window_jobs.step(state, path, out)
    assert snapshot(state) == before
    assert not os.path.exists(out)


def test_init_refuses_an_existing_state(early):
    with pytest.raises(StateError, match="already holds a state"):
        window_jobs.init(early.state, CONFIG, seed=SEED)


def test_step_refuses_an_output_that_holds_another_release(binary, batch, tmp_path):
    out = str(tmp_path / "release")
    shutil.copytree(batch.out, out)
    before = snapshot(out)
    state = str(tmp_path / "state")
    window_jobs.init(state, CONFIG, seed=SEED + 1, num_shards=SHARDS)
    with pytest.raises((InputError, StateError), match="already holds a release"):
        window_jobs.step(state, binary.periods[0], out)
    assert snapshot(out) == before


def test_run_shuffles_only_where_the_job_needs_to(binary, tmp_path, monkeypatch):
    """A whole-panel run groups its data four times: by shard, to sum the shards'
    statistics, to spread the shards' emission, and to join the manifest with the
    written files.  Every other shuffle (a second reshuffle of the row groups, a Create
    of the shards joined to the plan, a count of the writes) cost the launching process
    pipeline construction and translation, and Beam's Dask runner 100-140 more tasks
    on a 2M x 12 panel, for the same release."""
    import apache_beam as beam
    from apache_beam.pipeline import PipelineVisitor
    from continual_synth.runners.direct import DirectRunner

    class Shuffles(PipelineVisitor):
        def __init__(self):
            self.labels = []

        def visit_transform(self, node):
            if isinstance(node.transform, beam.GroupByKey):
                self.labels.append(node.full_label)

        enter_composite_transform = visit_transform

    shuffles = Shuffles()
    run_pipeline = DirectRunner.run_pipeline

    def recorded(self, pipeline, options):
        pipeline.visit(shuffles)
        return run_pipeline(self, pipeline, options)

    monkeypatch.setattr(DirectRunner, "run_pipeline", recorded)
    assert pq.ParquetFile(binary.panel).num_row_groups == 1  # no Create reshuffle
    run_job(binary.panel, tmp_path / "out")
    assert len(shuffles.labels) == 4, shuffles.labels
