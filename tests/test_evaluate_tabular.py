"""`evaluate tabular`: the §7.3 metrics per period of a release directory."""
import json
import os
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.mechanisms.errors import InputError
from continual_synth.pipelines.evaluation.evaluate_tabular import (
    evaluate_tabular, plot_metrics_over_time)
from continual_synth.transforms.files import write_file

DOMAIN = {"a": ["x", "y"], "b": [0, 1, None], "c": [0, 1]}

# truth: period 1 adds two records, period 2 one, period 3 two
TRUTH = [("x", 0, 0, 1), ("y", 1, 1, 1), ("x", None, 1, 2), ("y", 0, 0, 3), ("x", 0, 1, 3)]
# synthetic table g_t per period (whole tables, not increments)
SYNTH = {1: [("x", 0, 0), ("x", 1, 1)],
         2: [("x", 0, 0), ("y", 1, 1), ("x", None, 1)],
         3: [("x", 0, 0), ("x", 0, 0), ("y", 0, 0), ("x", 0, 1), ("y", 1, 1), ("x", 1, 0)]}


def table(rows, with_period=True):
    names = ["a", "b", "c"] + (["period"] if with_period else [])
    columns = list(zip(*rows)) if rows else [[] for _ in names]
    types = [pa.string(), pa.int64(), pa.int64(), pa.int32()]
    return pa.table({n: pa.array(list(col), type=t) for n, col, t in zip(names, columns, types)})


@pytest.fixture
def files(tmp_path):
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps(DOMAIN))
    truth = tmp_path / "truth.parquet"
    write_file(table(TRUTH), str(truth), "parquet")
    release = tmp_path / "release"
    for t, rows in SYNTH.items():
        write_file(table([r + (t,) for r in rows]), str(release / f"synthetic-t{t:04d}-s00000.parquet"),
                   "parquet")
    (release / "manifest.json").write_text(json.dumps({"method": "proposed", "epsilon": 1.0}))
    return tmp_path, str(domain), str(truth), str(release)


def expected(t, scale_rows=True):
    """The four metrics at t, by brute force from the record lists (all 2-way workloads)."""
    truth = [r[:3] for r in TRUTH if r[3] <= t]
    synth = SYNTH[t]
    names = list(DOMAIN)
    wes, rels = [], []
    for i in range(3):
        for j in range(i + 1, 3):
            cells = [(u, v) for u in DOMAIN[names[i]] for v in DOMAIN[names[j]]]
            cf = Counter((r[i], r[j]) for r in truth)
            cg = Counter((r[i], r[j]) for r in synth)
            f = {c: cf[c] / len(truth) for c in cells}
            g = {c: cg[c] / len(synth) for c in cells}
            wes.append(sum(abs(f[c] - g[c]) for c in cells) / len(cells))
            defined = [c for c in cells if f[c] > 0]
            rels.append(sum(abs(f[c] - g[c]) / f[c] for c in defined) / len(defined))
    return {"AvgWE": sum(wes) / 3, "MaxWE": max(wes),
            "AvgRelWE": sum(rels) / 3, "MaxRelWE": max(rels)}


def test_metrics_per_period_summary_and_plot(files):
    tmp_path, domain, truth, release = files
    report = tmp_path / "report"
    summary = evaluate_tabular(truth, release, str(report), domain_path=domain, last=2)
    assert [row["period"] for row in summary["periods"]] == [1, 2, 3]
    assert [row["true_size"] for row in summary["periods"]] == [2, 3, 5]
    assert [row["synthetic_size"] for row in summary["periods"]] == [2, 3, 6]
    assert summary["num_workloads"] == 3
    for row in summary["periods"]:
        want = expected(row["period"])
        for name, value in want.items():
            assert row[name] == pytest.approx(value), (row["period"], name)
    assert summary["periods"][1]["MaxWE"] == 0.0  # g_2 == f_2
    for name in ("AvgWE", "MaxWE", "AvgRelWE", "MaxRelWE"):
        assert summary["average_last"][name] == pytest.approx(
            (expected(2)[name] + expected(3)[name]) / 2)
    assert summary["method"] == "proposed" and summary["epsilon"] == 1.0
    assert summary["label"] == "proposed (ε=1.0)"
    on_disk = json.loads((report / "summary.json").read_text())
    from continual_synth.pipelines.release.publication import (  # as the file's floats
        tidy_floats)
    assert on_disk["average_last"] == tidy_floats(summary["average_last"])
    assert (report / "tabular_metrics.png").stat().st_size > 1000


def test_the_domain_defaults_to_the_one_the_manifest_records(files):
    """Without ``--domain`` (a release made with ``--infer-domain`` has no domain file)
    the release is scored over the domain its manifest records: the same figures; a
    manifest without one is a clear error naming ``--domain``."""
    _, domain, truth, release = files
    given = evaluate_tabular(truth, release, domain_path=domain, last=2)
    with pytest.raises(InputError, match="records no domain: give the domain file with "
                                         "--domain"):
        evaluate_tabular(truth, release, last=2)
    manifest_path = os.path.join(release, "manifest.json")
    manifest = json.loads(open(manifest_path).read())
    manifest["domain"] = {"b": [0, 1, None], "a": ["x", "y"], "c": [0, 1]}  # its own order
    with open(manifest_path, "w") as handle:
        json.dump(manifest, handle)
    recorded = evaluate_tabular(truth, release, last=2)
    assert recorded["domain"] == f"{release}/manifest.json"
    assert recorded["average_last"] == pytest.approx(given["average_last"])
    assert recorded["periods"][1]["MaxWE"] == 0.0
    manifest["domain"] = {"a": "x"}
    with open(manifest_path, "w") as handle:
        json.dump(manifest, handle)
    with pytest.raises(InputError, match="the domain of .*manifest.json must be a JSON object"):
        evaluate_tabular(truth, release, last=2)


def test_zero_error_when_release_is_the_cumulative_truth(tmp_path, files):
    _, domain, truth, _ = files
    release = tmp_path / "exact"
    rows = [r + (t,) for t in (1, 2, 3) for r in [x[:3] for x in TRUTH if x[3] <= t]]
    write_file(table(rows), str(release / "all.csv"), "csv")  # one file, several periods, CSV
    summary = evaluate_tabular(truth, str(release), domain_path=domain, marginals="1")
    assert summary["num_workloads"] == 3 and summary["manifest"] is None
    for row in summary["periods"]:
        assert (row["AvgWE"], row["MaxWE"], row["AvgRelWE"], row["MaxRelWE"]) == (0, 0, 0, 0)


def test_truth_as_a_directory_of_csv_and_a_workload_list(tmp_path, files):
    _, domain, _, release = files
    truth_dir = tmp_path / "truth_dir"
    for t in (1, 2, 3):
        write_file(table([r for r in TRUTH if r[3] == t]), str(truth_dir / f"p{t}.csv"), "csv")
    summary = evaluate_tabular(str(truth_dir), release, domain_path=domain, marginals="a,b")
    assert summary["num_workloads"] == 1
    assert summary["final_period_worst_workloads"][0]["workload"] == ["a", "b"]


def test_missing_period_is_refused(tmp_path, files):
    _, domain, truth, release = files
    os.remove(os.path.join(release, "synthetic-t0002-s00000.parquet"))
    os.remove(os.path.join(release, "manifest.json"))
    with pytest.raises(InputError, match=r"no synthetic table for period\(s\) \[2\]"):
        evaluate_tabular(truth, release, domain_path=domain)


def test_manifest_lists_the_released_periods(tmp_path, files):
    _, domain, truth, release = files
    with open(os.path.join(release, "manifest.json"), "w") as handle:
        json.dump({"method": "baseline", "epsilon": 2, "periods_released": [1, 2]}, handle)
    with pytest.raises(InputError, match="does not list"):
        evaluate_tabular(truth, release, domain_path=domain)
    with open(os.path.join(release, "manifest.json"), "w") as handle:
        json.dump({"method": "baseline", "periods_released": [1, 2, 3, 4]}, handle)
    with pytest.raises(InputError, match="truth covers periods up to 3"):
        evaluate_tabular(truth, release, domain_path=domain)


def test_domain_mismatch_is_refused(tmp_path, files):
    _, _, truth, release = files
    small = tmp_path / "small.json"
    small.write_text(json.dumps({"a": ["x", "y"], "b": [0, 1], "c": [0, 1]}))  # no null
    with pytest.raises(InputError, match="not in the domain"):
        evaluate_tabular(truth, release, domain_path=str(small))
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({**DOMAIN, "d": [0, 1]}))
    with pytest.raises(InputError, match="missing attribute column"):
        evaluate_tabular(truth, release, domain_path=str(extra))


def test_no_period_column_is_refused(tmp_path, files):
    _, domain, truth, _ = files
    release = tmp_path / "noperiod"
    write_file(table([r[:3] for r in TRUTH], with_period=False), str(release / "x.parquet"),
               "parquet")
    with pytest.raises(InputError, match="no period column"):
        evaluate_tabular(truth, str(release), domain_path=domain)


def test_plot_overlays_several_releases(tmp_path, files, monkeypatch):
    from continual_synth.pipelines.evaluation import evaluate_tabular as module
    _, domain, truth, release = files
    summary = evaluate_tabular(truth, release, domain_path=domain)
    columns = {"period": [1, 2, 3], "AvgWE": [0.3, 0.2, 0.1], "MaxWE": [0.5, 0.4, 0.3],
               "AvgRelWE": [1.0, None, 0.5], "MaxRelWE": [2.0, 1.5, 1.0]}
    figures = []
    save = module.save_figure
    monkeypatch.setattr(module, "save_figure", lambda fig, path: figures.append(fig)
                        or save(fig, path))
    path = plot_metrics_over_time({"proposed": summary, "baseline": columns,
                                   "rows": summary["periods"]}, str(tmp_path / "cmp.png"))
    assert os.path.getsize(path) > 1000
    # one legend below the panels, naming each release once (none inside a panel, where
    # it covered the curves)
    fig, = figures
    assert [ax.get_legend() for ax in fig.axes] == [None] * 4
    legend, = fig.legends
    labels = [text.get_text() for text in legend.get_texts()]
    assert [label for label in labels if "floor" not in label] == ["proposed", "baseline", "rows"]
    assert "proposed: sampling floor (a sample of the truth)" in labels
    with pytest.raises(InputError):
        plot_metrics_over_time({}, str(tmp_path / "none.png"))


def test_increment_releases_accumulate(tmp_path, files):
    """The §5 baseline appends each period's synthetic records: g_t = rows of periods ≤ t."""
    _, domain, truth, _ = files
    release = tmp_path / "increments"
    increments = {1: SYNTH[1], 2: [("x", 0, 0)], 3: []}  # g_3 = g_2: period 3 adds nothing
    for t, rows in increments.items():
        if rows:
            write_file(table([r + (t,) for r in rows]), str(release / f"inc-{t}.parquet"),
                       "parquet")
    (release / "manifest.json").write_text(json.dumps(
        {"method": "baseline", "epsilon": 0.5, "periods_released": 3,
         "release_form": "increment (appended)"}))
    summary = evaluate_tabular(truth, str(release), domain_path=domain)
    # a release of an earlier version (periods_released: a count) still evaluates; the
    # summary lists the periods, not a count
    assert summary["periods_released"] == [1, 2, 3]
    assert summary["manifest"]["periods_released"] == [1, 2, 3]
    assert summary["synthetic_form"] == "increment"
    assert [row["synthetic_size"] for row in summary["periods"]] == [2, 3, 3]
    assert summary["empty_periods"] == [3]
    assert summary["manifest"]["release_form"] == "increment (appended)"
    as_tables = evaluate_tabular(truth, str(release), domain_path=domain,
                                 synthetic_form="table")
    assert [row["synthetic_size"] for row in as_tables["periods"]] == [2, 1, 0]
    # the same metrics as the equivalent whole-table release
    whole = tmp_path / "whole"
    cumulative = {1: SYNTH[1], 2: SYNTH[1] + [("x", 0, 0)], 3: SYNTH[1] + [("x", 0, 0)]}
    for t, rows in cumulative.items():
        write_file(table([r + (t,) for r in rows]), str(whole / f"g-{t}.parquet"), "parquet")
    reference = evaluate_tabular(truth, str(whole), domain_path=domain)
    for got, want in zip(summary["periods"], reference["periods"]):
        for name in ("AvgWE", "MaxWE", "AvgRelWE", "MaxRelWE"):
            assert got[name] == pytest.approx(want[name])
    with pytest.raises(InputError, match="synthetic form"):
        evaluate_tabular(truth, str(release), domain_path=domain, synthetic_form="delta")


def test_bad_periods_released_is_refused(files):
    _, domain, truth, release = files
    with open(os.path.join(release, "manifest.json"), "w") as handle:
        json.dump({"periods_released": "all"}, handle)
    with pytest.raises(InputError, match="periods_released"):
        evaluate_tabular(truth, release, domain_path=domain)


def test_sampling_floor_beside_the_metrics(tmp_path):
    """Each of the last periods' metrics stands next to the sampling floor of a sample of
    the release's size drawn from f_t.  A release that *is* such a sample reads about 1×
    its floor at full size and at a quarter of the size (the floor follows |g_t|, while
    the quarter-size release's AvgWE is about twice the full-size one's); the truth
    itself reads 0×.  6 attributes (15 workloads), 40 periods of 200 records, last 20."""
    rng = np.random.default_rng(11)
    sizes = [2, 3, 4, 2, 5, 3]
    names = [f"v{j}" for j in range(6)]
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps({n: list(range(k)) for n, k in zip(names, sizes)}))
    skew = [rng.dirichlet(np.ones(k) * 0.7) for k in sizes]
    rows = np.stack([rng.choice(k, size=8000, p=p) for k, p in zip(sizes, skew)], axis=1)
    rows[:, 1] = (rows[:, 0] + rows[:, 1]) % 3          # a dependence worth a 2-way
    periods = np.repeat(np.arange(1, 41), 200)

    def write(path, codes, period_of):
        columns = {n: pa.array(codes[:, j], pa.int64()) for j, n in enumerate(names)}
        columns["period"] = pa.array(period_of, pa.int32())
        write_file(pa.table(columns), str(path), "parquet")

    truth = tmp_path / "truth.parquet"
    write(truth, rows, periods)
    readings = {}
    for name, fraction in (("full", 1.0), ("quarter", 0.25), ("exact", None)):
        release = tmp_path / name
        for t in range(1, 41):
            so_far = rows[periods <= t]
            g = (so_far if fraction is None else
                 so_far[rng.integers(0, len(so_far), int(len(so_far) * fraction))])
            write(release / f"g-{t:03d}.parquet", g, np.full(len(g), t))
        summary = evaluate_tabular(str(truth), str(release), domain_path=str(domain), last=20)
        readings[name] = summary
        last = summary["periods"][-20:]
        assert all("floor_AvgWE" in row for row in last)
        assert not any("floor_AvgWE" in row for row in summary["periods"][:-20])
        assert summary["sampling_floor"]["AvgWE"] == pytest.approx(
            np.mean([row["floor_AvgWE"] for row in last]))
    full, quarter, exact = (readings[n] for n in ("full", "quarter", "exact"))
    for summary in (full, quarter):
        ratio = summary["average_last"]["AvgWE"] / summary["sampling_floor"]["AvgWE"]
        assert 0.8 < ratio < 1.25, ratio
        assert f"is {ratio:.2f}× the sampling floor" in summary["floor_reading"]
        relative = (summary["average_last"]["AvgRelWE"]
                    / summary["sampling_floor"]["AvgRelWE"])
        assert f"AvgRelWE {summary['average_last']['AvgRelWE']:.4g} is {relative:.2f}× its " \
               f"floor" in summary["floor_reading"]
    assert 1.6 < quarter["sampling_floor"]["AvgWE"] / full["sampling_floor"]["AvgWE"] < 2.4
    assert exact["average_last"]["AvgWE"] == 0
    assert "is 0.00× the sampling floor" in exact["floor_reading"]
    assert exact["sampling_floor"] == full["sampling_floor"]   # seeded: one floor per stream


def test_worst_workloads_by_total_variation(files):
    """WE averages over a workload's cells and dilutes a many-valued workload's error
    (an audit found a 125-cell pair at total variation 0.6 ranked 28th of 66 by WE), so
    the summary also ranks by total variation, computed here by brute force."""
    _, domain, truth, release = files
    summary = evaluate_tabular(truth, release, domain_path=domain)
    names = list(DOMAIN)
    rows, synth = [r[:3] for r in TRUTH], SYNTH[3]
    tv = {}
    for i in range(3):
        for j in range(i + 1, 3):
            cf = Counter((r[i], r[j]) for r in rows)
            cg = Counter((r[i], r[j]) for r in synth)
            tv[(names[i], names[j])] = 0.5 * sum(
                abs(cf[(u, v)] / len(rows) - cg[(u, v)] / len(synth))
                for u in DOMAIN[names[i]] for v in DOMAIN[names[j]])
    ranked = summary["final_period_worst_workloads_by_total_variation"]
    got = [tv[tuple(e["workload"])] for e in ranked]
    assert len(got) == len(tv) and got == sorted(got, reverse=True)
    for entry in ranked + summary["final_period_worst_workloads"]:
        assert entry["total_variation"] == pytest.approx(tv[tuple(entry["workload"])])


def test_command_line_prints_the_averages_and_the_worst_workloads_by_total_variation(
        files, capsys):
    from continual_synth.pipelines.commands.cli import main
    _, domain, truth, release = files
    assert main(["evaluate", "tabular", "--truth", truth, "--synthetic", release,
                 "--domain", domain]) == 0
    printed = json.loads(capsys.readouterr().out)
    summary = evaluate_tabular(truth, release, domain_path=domain)
    assert printed["average_last"] == pytest.approx(summary["average_last"])
    assert printed["floor_reading"] == summary["floor_reading"]
    expected = summary["final_period_worst_workloads_by_total_variation"][:3]
    got = printed["worst_workloads_by_total_variation"]
    assert [e["workload"] for e in got] == [e["workload"] for e in expected]
    assert [e["total_variation"] for e in got] == pytest.approx(
        [e["total_variation"] for e in expected])


@pytest.mark.parametrize("periods, error", [
    (pa.array([1.0, 1.0, 2.0, 3.0, 3.0]), "integer column, found type double"),
    (pa.array(["1", "1", "2", "3", "3"]), "integer column, found type string"),
    (pa.array([1, 1, None, 3, 3], type=pa.int64()), "the first at row 3"),
    (pa.array([1, 1, 0, 3, 3], type=pa.int64()), "row 3 holds period 0"),
])
def test_truth_periods_follow_the_inputs_rule(tmp_path, files, periods, error):
    """The truth's period column is read by the rule every run and step applies to its
    input (transforms/periods.py): 2.0 is refused as it is there, not read as period 2."""
    _, domain, _, release = files
    truth = table(TRUTH).set_column(3, "period", periods)
    path = str(tmp_path / "odd_truth.parquet")
    write_file(truth, path, "parquet")
    with pytest.raises(InputError, match=error):
        evaluate_tabular(path, release, domain_path=domain)


def test_truth_of_other_periods_is_refused_naming_both(tmp_path, files, capsys):
    """A truth whose periods (31..33) miss every released period (1..3) is refused, not
    scored with every metric null in a report and exit 0."""
    from continual_synth.pipelines.commands.cli import main
    _, domain, _, release = files
    path = str(tmp_path / "shifted_truth.parquet")
    write_file(table([r[:3] + (r[3] + 30,) for r in TRUTH]), path, "parquet")
    report = tmp_path / "report"
    assert main(["evaluate", "tabular", "--truth", path, "--synthetic", release,
                 "--domain", domain, "--report", str(report)]) == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "shifted_truth.parquet: periods 31..33" in message, message
    assert "release has periods 1..3" in message, message
    assert not report.exists()


@pytest.mark.parametrize("domain_given", [True, False])
def test_a_period_col_that_is_a_domain_attribute_is_refused_before_reading(
        tmp_path, files, capsys, monkeypatch, domain_given):
    """``--period-col b`` with b an attribute of the domain would read b as the period and
    as an attribute, as tabular run/init/step refuse (tabular.check_period_col).  Guards
    against evaluate tabular reading the truth and failing on b's values as periods, or
    scoring them as periods were they 1, 2, ...: it exits 2 naming both
    (--domain, or the domain the release's manifest records), before reading any records
    and writing no report."""
    from continual_synth.pipelines.evaluation import evaluate_tabular as module
    from continual_synth.pipelines.commands.cli import main
    for name in ("read_dataset", "_count_release"):
        monkeypatch.setattr(module, name, lambda *a, **k: pytest.fail("records read"))
    _, domain, truth, release = files
    if not domain_given:  # the domain the release's manifest records
        with open(os.path.join(release, "manifest.json"), "w") as handle:
            json.dump({"method": "proposed", "epsilon": 1.0, "domain": DOMAIN}, handle)
    report = tmp_path / "report"
    assert main(["evaluate", "tabular", "--truth", truth, "--synthetic", release,
                 "--period-col", "b", "--report", str(report)]
                + (["--domain", domain] if domain_given else [])) == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    owner = "--domain" if domain_given else f"the domain of {release}/manifest.json"
    assert message == f"continual-synth: error: {owner} and --period-col must name " \
        f"different columns: both name 'b'", message
    assert not report.exists()
