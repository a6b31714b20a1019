"""End-to-end tests of the ``continual-synth`` command line (pipelines/commands/cli.py)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.mechanisms.window import WindowConfig
from helpers_panels import window_jobs
from continual_synth.pipelines.commands.cli import main
from continual_synth.pipelines.commands.options import PanelColumns
from continual_synth.transforms.files import write_file

from helpers_panels import (check_release, data_files, long_table, markov_codes, read_manifest,
                            snapshot, sorted_records, staging_leftovers, write_period_files)

LEVELS = ("low", "mid", "high")
PEOPLE, HORIZON, WINDOW = 300, 4, 2
PRIVACY = ["--window", str(WINDOW), "--horizon", str(HORIZON), "--rho", "5",
           "--neighbor", "add-remove", "--seed", "3", "--shards", "2"]
CONSOLE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "continual-synth")


def error_lines(text: str):
    return [line for line in text.splitlines() if line.startswith("continual-synth: error:")]


@pytest.fixture(scope="module")
def string_panel(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    codes = markov_codes(PEOPLE, HORIZON, alphabet_size=3, seed=21)
    table = long_table(codes, LEVELS, "pid", "month", "status")
    path = str(root / "panel.csv")
    write_file(table, path, "csv")
    return root, codes, table, path


@pytest.fixture(scope="module")
def cli_release(string_panel):
    """``window run`` through main(): CSV in, CSV out, string alphabet, custom columns."""
    root, codes, _, panel = string_panel
    out = str(root / "release")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["window", "run", "--input", panel, "--output", out, *PRIVACY,
                     "--alphabet", ",".join(LEVELS), "--format", "csv", "--id-col", "pid",
                     "--period-col", "month", "--value-col", "status"])
    return code, stdout.getvalue(), out


def test_window_run_exits_0_and_prints_the_manifest(string_panel, cli_release, tmp_path):
    code, stdout, out = cli_release
    root, codes, _, panel = string_panel
    assert code == 0
    printed = json.loads(stdout)
    manifest = read_manifest(out)
    assert printed == manifest
    assert manifest["alphabet"] == list(LEVELS) and manifest["format"] == "csv"
    assert manifest["sampler"] == "seeded" and manifest["for_publication"] is False
    assert all(name.endswith(".csv") for name in data_files(out))
    check_release(out, manifest, codes, typed=False)

    # the same job through the Python API gives the same records
    config = WindowConfig(window=WINDOW, horizon=HORIZON, rho=5.0, alphabet=LEVELS,
                          neighbor="add-remove")
    api_out = str(tmp_path / "api")
    window_jobs.run(panel, api_out, config, seed=3, num_shards=2, out_format="csv",
                    columns=PanelColumns("pid", "month", "status"))
    assert sorted_records(api_out).equals(sorted_records(out))


def test_error_returns_2_with_one_clean_line(tmp_path, capsys):
    codes = markov_codes(100, HORIZON, seed=1)
    table = long_table(codes)
    values = table["value"].to_numpy().copy()
    values[17] = 5
    panel = str(tmp_path / "bad.parquet")
    write_file(table.set_column(2, "value", pa.array(values)), panel, "parquet")
    out = str(tmp_path / "release")
    code = main(["window", "run", "--input", panel, "--output", out, *PRIVACY])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = error_lines(captured.err)
    assert lines == [f"continual-synth: error: {panel}, column 'value': value 5 (row 18) is not "
                     f"in the alphabet [0, 1]; 1 value(s) are outside it"]
    assert "[while running" not in lines[0]
    assert data_files(out) == [] and staging_leftovers(out) == []
    assert not os.path.exists(os.path.join(out, "manifest.json"))


@pytest.mark.parametrize("argv, message", [
    (["--window", "5", "--horizon", "3", "--rho", "1"], "need 1 <= window <= horizon"),
    (["--window", "2", "--horizon", "3", "--rho", "-1"], "rho must be positive"),
    (["--window", "2", "--horizon", "3", "--rho", "1", "--alphabet", "0"],
     "--alphabet needs at least two"),
    (["--window", "2", "--horizon", "3", "--rho", "1", "--missing-value", "7"],
     "value '7' is not in the alphabet [0, 1]"),
    # not numpy's "sum(colors) must be less than 1000000000" (1e-18), a MemoryError
    # (1e-15) or 1.7e8 records of padding written with exit 0 (1e-12)
    (["--window", "2", "--horizon", "6", "--rho", "1e-18"], "--rho 1e-18 is too small"),
    (["--window", "2", "--horizon", "6", "--rho", "1e-12"], "use --rho >= "),
    (["--window", "24", "--horizon", "30", "--rho", "1e6"],
     "--window 24 pads at least n_pad = 4 people in each of 16777216 window bins"),
    (["--window", "2", "--horizon", "6", "--rho", "1", "--n-pad", "100000000"],
     "--n-pad 100000000 padding people"),
])
def test_bad_options_exit_2_before_any_pipeline(tmp_path, capsys, argv, message):
    panel = str(tmp_path / "never-read.parquet")
    try:
        code = main(["window", "run", "--input", panel, "--output", str(tmp_path / "out"),
                     *argv])
    except SystemExit as exc:  # the option's argument type refuses it (argparse)
        code = exc.code
    captured = capsys.readouterr()
    assert code == 2
    [line] = error_lines(captured.err)
    assert message in line
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("argv", [["--rho", "1e-18"], ["--rho", "1e-12"],
                                  ["--rho", "1e-12", "--neighbor", "add-remove"],
                                  ["--rho", "1e-13", "--neighbor", "add-remove",
                                   "--counter", "blt"]])
def test_cumulative_rho_whose_noise_is_too_wide_exits_2_before_any_pipeline(tmp_path, capsys,
                                                                            argv):
    """Guards against ρ = 1e-18 as a traceback (numpy: "Unable to allocate 506. GiB",
    summing the counters' discrete Gaussian variance) and ρ = 1e-12 taking about a minute;
    the blt counter's continuous noise needs no table, but its noisy population would be
    off by millions."""
    code = main(["cumulative", "run", "--input", str(tmp_path / "never-read.parquet"),
                 "--output", str(tmp_path / "out"), "--horizon", "6", *argv])
    [line] = error_lines(capsys.readouterr().err)
    assert code == 2
    assert line.startswith(f"continual-synth: error: --rho {argv[1]} is too small"), line
    assert "use --rho >= " in line
    assert not os.path.exists(tmp_path / "out")


def test_stray_positional_argument_is_refused(tmp_path):
    with pytest.raises(SystemExit) as raised:
        main(["demo", "--output", str(tmp_path / "d"), "stray"])
    assert raised.value.code == 2
    assert not os.path.exists(tmp_path / "d")


def test_incremental_through_the_cli(tmp_path, capsys):
    codes = markov_codes(200, 3, seed=2)
    paths = write_period_files(long_table(codes), str(tmp_path / "periods"))
    state, out = str(tmp_path / "state"), str(tmp_path / "release")
    privacy = ["--window", "3", "--horizon", "3", "--rho", "5", "--neighbor", "add-remove",
               "--seed", "4", "--shards", "2"]

    def run_cli(*argv):
        code = main(list(argv))
        captured = capsys.readouterr()
        return code, (json.loads(captured.out) if code == 0 else error_lines(captured.err))

    code, printed = run_cli("window", "init", "--state", state, *privacy)
    assert code == 0 and printed["status"] == "initialised"
    config = WindowConfig(window=3, horizon=3, rho=5.0, neighbor="add-remove")
    assert printed["n_pad"] == config.n_pad
    assert printed["error_bound"] == pytest.approx(config.error_bound)
    code, printed = run_cli("window", "init", "--state", state, *privacy)
    assert code == 2 and "already holds a state" in printed[0]

    statuses = []
    for period, path in enumerate(paths, 1):
        code, printed = run_cli("window", "step", "--state", state, "--input", path,
                                "--output", out, "--period", str(period))
        assert code == 0, printed
        statuses.append(printed["status"])
    assert statuses == ["ingested", "ingested", "released"]
    manifest = read_manifest(out)
    assert manifest["periods_released"] == [1, 2, 3]
    assert manifest["rho_spent"] == pytest.approx(5.0)
    check_release(out, manifest, codes)

    before = (snapshot(state), snapshot(out))
    code, printed = run_cli("window", "step", "--state", state, "--input", paths[2],
                            "--output", out)
    assert code == 0 and printed["status"] == "already-released" and printed["period"] == 3
    garbage = tmp_path / "period4.parquet"
    garbage.write_bytes(b"not parquet: must not be read")
    code, printed = run_cli("window", "step", "--state", state, "--input", str(garbage),
                            "--output", out, "--period", "4")
    assert code == 2 and printed == ["continual-synth: error: period 4 is beyond the "
                                     "horizon T=3"]
    code, printed = run_cli("window", "step", "--state", str(tmp_path / "no-state"),
                            "--input", paths[0], "--output", out)
    assert code == 2 and "no state here" in printed[0]
    assert (snapshot(state), snapshot(out)) == before


def test_evaluate_window_writes_the_report(string_panel, cli_release, tmp_path, capsys):
    _, codes, _, panel = string_panel
    _, _, out = cli_release
    report = str(tmp_path / "report")
    code = main(["evaluate", "window", "--truth", panel, "--synthetic", out, "--report", report,
                 "--id-col", "pid", "--period-col", "month", "--value-col", "status"])
    captured = capsys.readouterr()
    assert code == 0
    headline = json.loads(captured.out)
    manifest = read_manifest(out)
    assert headline["num_people"] == PEOPLE
    assert headline["num_synthetic"] == manifest["num_synthetic"]
    assert headline["overall"]["within_bound"] is True
    assert headline["overall"]["max_abs_error"] <= manifest["error_bound"]
    assert sorted(os.listdir(report)) == ["quarterly_queries.png", "summary.json",
                                          "window_error.png"]
    for name in ("quarterly_queries.png", "window_error.png"):
        with open(os.path.join(report, name), "rb") as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(os.path.join(report, "summary.json"), encoding="utf-8") as handle:
        summary = json.load(handle)
    assert [row["period"] for row in summary["periods"]] == list(range(WINDOW, HORIZON + 1))
    assert np.array(summary["bins"]["synthetic_counts"]).sum(axis=1).tolist() == \
        [manifest["num_synthetic"]] * (HORIZON - WINDOW + 1)


@pytest.mark.parametrize("where", ["release", "inside-release", "truth-folder"])
def test_evaluate_refuses_a_report_in_the_release_or_the_truth(string_panel, cli_release,
                                                               tmp_path, capsys, where):
    """``--report`` the release itself (or a folder in it) is refused: it must not exit 0
    leaving summary.json with the panel's exact counts in the public release."""
    import shutil
    _, _, _, panel = string_panel
    _, _, out = cli_release
    release = tmp_path / "release"
    shutil.copytree(out, release)
    truth = tmp_path / "truth"
    truth.mkdir()
    shutil.copy(panel, truth / os.path.basename(panel))
    report = {"release": release, "inside-release": release / "report",
              "truth-folder": truth / "report"}[where]
    before = snapshot(str(tmp_path))
    code = main(["evaluate", "window", "--truth", str(truth), "--synthetic", str(release),
                 "--report", str(report), "--id-col", "pid", "--period-col", "month",
                 "--value-col", "status"])
    assert code == 2
    [line] = error_lines(capsys.readouterr().err)
    assert "a report holds the true counts" in line
    assert snapshot(str(tmp_path)) == before


@pytest.mark.parametrize("evaluate", ["window", "cumulative", "tabular", "privhp"])
@pytest.mark.parametrize("where", ["other-release", "inside-other-release", "deep-inside",
                                   "linked"])
def test_evaluate_refuses_a_report_in_any_other_release(string_panel, cli_release, tmp_path,
                                                       capsys, evaluate, where):
    """``evaluate window --synthetic r1 --report r2`` with r2 another release must not
    write summary.json (the truth's exact counts) and the plots into r2, or into a folder
    inside it, to be published with it: every evaluate command refuses
    a --report that is, or lies inside, a folder holding a manifest.json (links
    followed), naming it, before reading anything and writing nothing."""
    import shutil
    _, _, _, panel = string_panel
    _, _, out = cli_release
    other = tmp_path / "other"
    shutil.copytree(out, other)
    (tmp_path / "to-other").symlink_to(other)
    report = {"other-release": other, "inside-other-release": other / "report",
              "deep-inside": other / "a" / "b", "linked": tmp_path / "to-other" / "r"}[where]
    options = {"window": ["--id-col", "pid", "--period-col", "month", "--value-col", "status"],
               "cumulative": ["--id-col", "pid", "--period-col", "month", "--value-col",
                              "status"],
               "tabular": [], "privhp": ["--columns", "x,y"]}[evaluate]
    before = snapshot(str(tmp_path))
    code = main(["evaluate", evaluate, "--truth", panel, "--synthetic", out,
                 "--report", str(report), *options])
    assert code == 2
    [line] = error_lines(capsys.readouterr().err)
    assert f"--report {report}" in line and f"the release directory {other}" in line, line
    assert "a report holds the true counts" in line
    assert snapshot(str(tmp_path)) == before and not os.path.exists(other / "report")


@pytest.mark.parametrize("where", ["state-in-release", "state-deep-inside", "state-linked",
                                   "run-output-inside", "stream-output-inside",
                                   "example-in-release"])
def test_state_and_new_outputs_outside_every_release(string_panel, cli_release, tmp_path,
                                                     capsys, where):
    """``window init --state r/state`` with r a release folder must not keep the private
    state (the window's histograms of real records) inside the release, to be published
    with it; nor ``window run --output r/sub`` publish a release inside another; nor
    ``tabular example --output r`` write the stream's records into it.  All are
    refused, naming the release folder, before anything is read or written."""
    import shutil
    _, _, _, panel = string_panel
    _, _, out = cli_release
    other = tmp_path / "other"
    shutil.copytree(out, other)
    (tmp_path / "to-other").symlink_to(other)
    privacy = ["--window", str(WINDOW), "--horizon", str(HORIZON), "--rho", "5"]
    columns = ["--id-col", "pid", "--period-col", "month", "--value-col", "status",
               "--alphabet", ",".join(LEVELS)]
    place = {"state-in-release": other / "state", "state-deep-inside": other / "a" / "state",
             "state-linked": tmp_path / "to-other" / "state",
             "run-output-inside": other / "sub", "stream-output-inside": other / "sub",
             "example-in-release": other}[where]
    argv = {"state-in-release": ["window", "init", "--state", str(place), *privacy],
            "run-output-inside": ["window", "run", "--input", panel, "--output", str(place),
                                  *PRIVACY, *columns, "--format", "csv"],
            "stream-output-inside": ["window", "stream", "--watch", str(tmp_path / "in"),
                                     "--state", str(tmp_path / "state"), "--output",
                                     str(place), *privacy, *columns],
            "example-in-release": ["tabular", "example", "--output", str(place),
                                   "--periods", "2"]}
    argv["state-deep-inside"] = argv["state-linked"] = argv["state-in-release"]
    before = snapshot(str(tmp_path))
    code = main(argv[where])
    assert code == 2
    [line] = error_lines(capsys.readouterr().err)
    option = "--state" if "state" in where else "--output"
    assert f"{option} {place}" in line and f"the release directory {other}" in line, line
    assert snapshot(str(tmp_path)) == before
    assert where == "example-in-release" or not os.path.exists(place)


@pytest.mark.parametrize("job, budget", [
    (["window", "run", "--window", "2", "--horizon", "4"], ["--rho", "1.7e308"]),
    (["window", "init", "--window", "2", "--horizon", "4"], ["--rho", "1e101"]),
    (["cumulative", "run", "--horizon", "4"], ["--rho", "1.7e308"]),
    (["privhp", "run", "--columns", "x,y", "--bounds", "0:1,0:1", "--samples", "10",
      "--depth", "4"], ["--epsilon", "1.7e308"]),
    (["privhp", "run", "--columns", "x,y", "--bounds", "0:1,0:1", "--samples", "10",
      "--depth", "1"], ["--level-epsilons", "1,1e101", "--epsilon", "2"])])
def test_a_budget_past_the_largest_is_refused_by_every_job(tmp_path, capsys, job, budget):
    """Every job takes at most errors.MAX_BUDGET (1e100, whose noise is nil), as
    ``tabular`` does: exit 2 naming the option, before anything is read.  Guards against
    ``cumulative run --rho 1.7e308`` saying "the privacy budget must be a positive finite
    number, got inf" (a value the user did not give, no option named), ``privhp run
    --epsilon 1.7e308`` "scale must be a positive finite number, got np.float64(0.0)",
    and ``window run`` running."""
    place = ["--state", str(tmp_path / "s")] if "init" in job else [
        "--input", str(tmp_path / "never-read.parquet"), "--output", str(tmp_path / "o")]
    code = main([*job, *place, *budget])
    [line] = error_lines(capsys.readouterr().err)
    option = budget[0]
    assert code == 2 and line.startswith(f"continual-synth: error: {option} 1"), line
    assert line.endswith("is too large: at most 1e+100, whose noise is already nil"), line
    assert os.listdir(tmp_path) == []


def test_the_largest_budget_runs(string_panel, tmp_path):
    _, _, _, panel = string_panel
    assert main(["window", "run", "--input", panel, "--output", str(tmp_path / "o"),
                 "--window", str(WINDOW), "--horizon", str(HORIZON), "--rho", "1e100",
                 "--alphabet", ",".join(LEVELS), "--format", "csv", "--id-col", "pid",
                 "--period-col", "month", "--value-col", "status", "--seed", "1"]) == 0


def test_evaluate_window_missing_release_exits_2(tmp_path, capsys):
    code = main(["evaluate", "window", "--truth", str(tmp_path / "t.parquet"),
                 "--synthetic", str(tmp_path / "nothing")])
    assert code == 2
    [line] = error_lines(capsys.readouterr().err)
    assert "nothing: not a release directory" in line



@pytest.mark.parametrize("evaluate", ["window", "cumulative"])
@pytest.mark.parametrize("columns, said", [
    (["--id-col", "month"], "--id-col and --period-col must name different columns: both "
                            "name 'month'"),
    (["--value-col", "pid"], "--id-col and --value-col must name different columns: both "
                             "name 'pid'"),
    (["--period-col", "status", "--value-col", "status"],
     "--period-col and --value-col must name different columns: both name 'status'")])
def test_evaluate_refuses_column_options_naming_one_column_before_reading(
        string_panel, cli_release, tmp_path, capsys, monkeypatch, evaluate, columns, said):
    """run, init and step refuse an --id-col, --period-col and --value-col that name one
    column twice (options.check_distinct_columns).  So do both evaluations, with run's
    words, rather than reading the truth and failing on what they find (``--id-col
    period``: "truth panel.parquet: id 1 reports 60 times in period 1; 4 duplicate
    report(s) in all"): they exit 2 before reading anything and writing no
    report."""
    from continual_synth.pipelines.evaluation import evaluate_cumulative, evaluate_window
    for module in (evaluate_window, evaluate_cumulative):
        for name in ("read_dataset", "read_release"):
            monkeypatch.setattr(module, name, lambda *a, **k: pytest.fail("data read"))
    monkeypatch.setattr(evaluate_window, "read_manifest",
                        lambda *a, **k: pytest.fail("the release was read"))
    _, _, _, panel = string_panel
    _, _, out = cli_release
    given = dict(zip(["--id-col", "--period-col", "--value-col"], ["pid", "month", "status"]))
    given.update(zip(columns[::2], columns[1::2]))
    report = tmp_path / "report"
    code = main(["evaluate", evaluate, "--truth", panel, "--synthetic", out, "--report",
                 str(report), *[word for pair in given.items() for word in pair]])
    assert code == 2
    assert error_lines(capsys.readouterr().err) == [f"continual-synth: error: {said}"]
    assert not report.exists()

def test_demo(tmp_path, capsys):
    output = str(tmp_path / "demo")
    assert main(["demo", "--output", output, "--seed", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert sorted(os.listdir(output)) == ["cumulative", "cumulative_report", "input", "report",
                                          "synthetic"]
    assert os.listdir(os.path.join(output, "input")) == ["sipp_like_panel.parquet"]
    manifest = read_manifest(os.path.join(output, "synthetic"))
    window = printed["window"]
    assert manifest["sampler"] == window["sampler"] == "seeded"
    assert manifest["for_publication"] is False
    assert manifest["window"] == 3 and manifest["horizon"] == 12
    assert manifest["periods_released"] == list(range(1, 13))
    assert window["num_synthetic"] == manifest["num_synthetic"]
    assert window["plots"] == ["quarterly_queries.png", "window_error.png"]
    assert os.path.isfile(os.path.join(output, "report", "summary.json"))
    assert window["overall"]["within_bound"] is True
    cumulative = printed["cumulative"]
    assert read_manifest(os.path.join(output, "cumulative"))["algorithm"].startswith(
        "bun2024-algorithm-2")
    assert cumulative["plots"] == ["cumulative_error.png", "cumulative_shares.png"]
    assert cumulative["overall"]["within_bound"] is True
    # a second demo into the same place is refused before anything is written
    before = snapshot(output)
    assert main(["demo", "--output", output, "--seed", "1"]) == 2
    assert "already holds a release" in error_lines(capsys.readouterr().err)[0]
    assert snapshot(output) == before


@pytest.mark.skipif(not os.path.exists(CONSOLE_SCRIPT), reason="console script not installed")
def test_console_script(tmp_path):
    helped = subprocess.run([CONSOLE_SCRIPT, "--help"], capture_output=True, text=True,
                            timeout=120)
    assert helped.returncode == 0
    for command in ("window", "evaluate", "demo"):
        assert command in helped.stdout

    panel = str(tmp_path / "panel.parquet")
    write_file(long_table(markov_codes(100, 3, seed=9)), panel, "parquet")
    out = str(tmp_path / "release")
    ran = subprocess.run([CONSOLE_SCRIPT, "window", "run", "--input", panel, "--output", out,
                          "--window", "2", "--horizon", "3", "--rho", "5", "--seed", "1",
                          "--shards", "2", "--format", "avro"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == read_manifest(out)
    assert data_files(out) and all(name.endswith(".avro") for name in data_files(out))


@pytest.mark.skipif(not os.path.exists(CONSOLE_SCRIPT), reason="console script not installed")
def test_console_script_error_output_is_one_line(tmp_path):
    table = long_table(markov_codes(50, 3, seed=9))
    panel = str(tmp_path / "bad.parquet")
    values = table["value"].to_numpy().copy()
    values[4] = 3
    write_file(table.set_column(2, "value", pa.array(values)), panel, "parquet")
    ran = subprocess.run([CONSOLE_SCRIPT, "window", "run", "--input", panel,
                          "--output", str(tmp_path / "out"), "--window", "2", "--horizon", "3",
                          "--rho", "5", "--seed", "1", "--shards", "2"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 2
    lines = ran.stderr.strip().splitlines()
    assert lines[-1:] == [
        f"continual-synth: error: {panel}, column 'value': value 3 (row 5) is not in the "
        f"alphabet [0, 1]; 1 value(s) are outside it"]
    # before it, only the job's own stage lines (Beam's logging is off)
    assert all(line.startswith("continual-synth window run: ") for line in lines[:-1]), lines


def test_python_dash_m_runs_the_command_line(tmp_path):
    """``python -m continual_synth`` is the same command line (platforms call modules)."""
    ran = subprocess.run([sys.executable, "-m", "continual_synth", "window", "init",
                          "--state", str(tmp_path / "state"), "--window", "2",
                          "--horizon", "3", "--rho", "0"], capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 2
    assert ran.stderr.strip().splitlines() == [
        "continual-synth: error: --rho must be positive and finite, got 0.0"], ran.stderr


def test_the_commands_exit_without_teardown_but_finish_their_work(tmp_path):
    """``exit_process`` (the console command, ``python -m continual_synth``, the job
    modules) skips the interpreter's teardown, not what it does that matters: the
    result on stdout is whole, threads' exit hooks and atexit handlers run, the status
    is kept (sys.exit's conventions: None is 0, a message is printed with status 1)."""
    ran = subprocess.run([sys.executable, "-m", "continual_synth", "window", "init",
                          "--state", str(tmp_path / "state"), "--window", "2",
                          "--horizon", "3", "--rho", "1", "--seed", "1"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["status"] == "initialised"
    marker = tmp_path / "atexit.txt"
    script = (
        "import atexit, sys, threading, time\n"
        "from continual_synth.launch import exit_process\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'a').write('atexit\\n'))\n"
        f"def late():\n    time.sleep(0.5)\n    open({str(marker)!r}, 'a').write('thread\\n')\n"
        "threading.Thread(target=late).start()\n"
        "for i in range(20000):\n    print(i)\n"
        "exit_process(int(sys.argv[1]) if sys.argv[1].isdigit() else sys.argv[1])\n")
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    for code, status in (("3", 3), ("0", 0), ("bye", 1)):
        marker.unlink(missing_ok=True)
        ran = subprocess.run([sys.executable, "-c", script, code], capture_output=True,
                             text=True, timeout=300, env=buffered)
        assert ran.returncode == status
        assert ran.stdout == "\n".join(map(str, range(20000))) + "\n"
        assert marker.read_text() == "thread\natexit\n"  # joined, then the handlers
        assert ran.stderr.strip().endswith("bye") == (code == "bye")


def test_the_commands_import_uncollected_and_freeze_the_loaded_modules(monkeypatch):
    """The console command, ``python -m continual_synth`` and the job modules import the
    command line with the garbage collector off, then move the objects alive (the loaded
    modules: Beam, pyarrow, pandas) out of its sight and switch it back on for the job:
    no collection traverses the modules while they load or during the job (serial work
    of the launching process)."""
    import gc
    from importlib import metadata
    from continual_synth import launch
    (script,) = [entry for entry in metadata.entry_points(group="console_scripts")
                 if entry.name == "continual-synth"]
    assert script.value == "continual_synth.launch:console_main"
    assert gc.isenabled() and gc.get_freeze_count() == 0
    seen = []

    def load():
        seen.append(gc.isenabled())
        return lambda: seen.append((gc.isenabled(), gc.get_freeze_count())) or 3

    monkeypatch.setattr(launch, "exit_process", seen.append)
    try:
        launch.run_command(load)
    finally:
        gc.unfreeze()
    loading, (running, frozen), code = seen
    assert not loading and running and frozen > 10_000 and code == 3
    assert gc.isenabled()
    for module in ("continual_synth.__main__", "continual_synth.jobs.window_step"):
        source = open(__import__(module, fromlist=["_"]).__file__).read()
        assert "from continual_synth.launch import" in source, module


def test_a_one_job_command_restarts_with_malloc_keeping_freed_memory(monkeypatch):
    """On Linux with glibc the console command and the job modules restart themselves
    (exec: same pid, same arguments) with glibc's malloc told to keep freed memory
    (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_), once; not for ``stream``, nor
    when the user set either variable."""
    from continual_synth import launch
    if not (sys.platform.startswith("linux") and launch._glibc()
            and hasattr(sys, "orig_argv")):
        pytest.skip("glibc on Linux, Python >= 3.10")
    execs = []
    monkeypatch.setattr(launch.os, "execv", lambda path, argv: execs.append((path, argv)))
    environ = {name: value for name, value in os.environ.items()
               if name not in launch.ALLOCATOR_ENVIRON}
    monkeypatch.setattr(launch.os, "environ", environ)  # this process's stays as it is
    line = ["/usr/bin/python3", "-m", "continual_synth", "-v", "window", "run", "--input", "x"]
    monkeypatch.setattr(sys, "orig_argv", line)
    monkeypatch.setattr(sys, "argv", ["continual-synth", *line[3:]])
    launch.allocate_for_one_job()
    assert execs == [(sys.executable, [sys.executable, *line[1:]])]
    assert all(environ[name] == value for name, value in launch.ALLOCATOR_ENVIRON.items())
    launch.allocate_for_one_job()  # the restarted process: already set, no second restart
    assert len(execs) == 1
    for name in launch.ALLOCATOR_ENVIRON:
        del environ[name]
    monkeypatch.setattr(sys, "argv", ["continual-synth", "-v", "tabular", "stream", "--x"])
    launch.allocate_for_one_job()
    assert len(execs) == 1 and not any(name in environ for name in launch.ALLOCATOR_ENVIRON)
    environ["MALLOC_TRIM_THRESHOLD_"] = "131072"  # the user's own choice
    monkeypatch.setattr(sys, "argv", ["continual-synth", "window", "run"])
    launch.allocate_for_one_job()
    assert len(execs) == 1 and environ["MALLOC_TRIM_THRESHOLD_"] == "131072"
    assert "MALLOC_MMAP_THRESHOLD_" not in environ


def test_a_step_on_a_state_another_step_owns_exits_2_before_reading(tmp_path, capsys):
    """Ownership: a held state is refused at once (exit 2, nothing read or written), or
    waited for with --wait; a bad --wait is refused."""
    from continual_synth.pipelines.release.lifecycle import Ownership, StateDir
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert main(["window", "init", "--state", state, "--window", "2", "--horizon", "3",
                 "--rho", "1", "--seed", "1"]) == 0
    garbage = tmp_path / "p1.parquet"
    garbage.write_bytes(b"not parquet: must not be read")
    capsys.readouterr()
    with Ownership(StateDir(state)):
        before = snapshot(state)
        code = main(["window", "step", "--state", state, "--input", str(garbage),
                     "--output", out, "--wait", "0.2"])
        err = capsys.readouterr().err
        assert code == 2 and "another step owns this state (pid " in err, err
        assert snapshot(state) == before and not os.path.exists(out)
    for wait in ("-1", "nan", "inf"):
        code = main(["window", "step", "--state", state, "--input", str(garbage),
                     "--output", out, "--wait", wait])
        assert code == 2 and "--wait must be a finite number" in capsys.readouterr().err
    # once free, the step runs (and reads the file: an input error, no longer ownership)
    code = main(["window", "step", "--state", state, "--input", str(garbage), "--output", out])
    err = capsys.readouterr().err
    assert code == 2 and "owns this state" not in err and "Parquet" in err, err


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys, tmp_path):
    """Ctrl-C on a step prints no traceback (README: never a traceback)."""
    from continual_synth.pipelines.commands import cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "dispatch", interrupted)
    assert cli.main(["window", "init", "--state", str(tmp_path / "state"), "--window", "2",
                     "--horizon", "3", "--rho", "1"]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("continual-synth: interrupted (Ctrl-C)")


@pytest.mark.parametrize("kind", ["window", "cumulative"])
def test_a_release_that_is_mostly_noise_says_so(tmp_path, capsys, kind):
    """A 3-person panel at ρ = 0.05, whose release is almost all padding, gets a warning,
    not exit 0 and not a word.  A panel of 3 000 at ρ = 1 gets no warning."""
    options = ["--horizon", "4", "--seed", "1"] + (["--window", "2"] if kind == "window" else [])
    said = {}
    for people, rho in ((3, "0.05"), (3000, "1")):
        panel = tmp_path / f"panel{people}.parquet"
        write_file(long_table(markov_codes(people, 4, seed=2)), str(panel), "parquet")
        assert main([kind, "run", "--input", str(panel), "--output",
                     str(tmp_path / f"out{people}"), "--rho", rho, *options]) == 0
        said[people] = capsys.readouterr().err
    warning = "padding" if kind == "window" else "the error bound"
    assert warning in said[3] and "this panel is too small" in said[3]
    assert "this panel is too small" not in said[3000]


def test_a_step_release_that_is_mostly_noise_says_so(tmp_path, capsys):
    from helpers_panels import period_table
    table = long_table(markov_codes(3, 3, seed=2))
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert main(["window", "init", "--state", state, "--window", "2", "--horizon", "3",
                 "--rho", "0.05"]) == 0
    for period in (1, 2):
        path = str(tmp_path / f"p{period}.parquet")
        write_file(period_table(table, period), path, "parquet")
        capsys.readouterr()
        assert main(["window", "step", "--state", state, "--input", path, "--output", out]) == 0
    assert "this panel is too small" in capsys.readouterr().err


def _release_bytes(panel: str, out: str) -> dict:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["window", "run", "--input", panel, "--output", out, *PRIVACY]) == 0
    return {name: data for name, data in snapshot(out).items() if name != "manifest.json"}


def test_csv_ids_beyond_int64_are_read_exactly(tmp_path):
    """Ids 10**20 + k in a CSV file are not read as the float 1e+20 (the panel refused
    with "id 1e+20 reports 300 times in period 1"): they are read as text, exactly
    as the same ids given as text in Parquet (the same release); ordinary integer ids in a
    CSV file are still integers (the same release as from Parquet)."""
    table = long_table(markov_codes(PEOPLE, HORIZON, seed=4))
    wide = table.set_column(0, "id", pa.array([str(10 ** 20 + i) for i in table["id"].to_pylist()]))
    write_file(wide, str(tmp_path / "wide.csv"), "csv")
    write_file(wide, str(tmp_path / "wide.parquet"), "parquet")
    assert (_release_bytes(str(tmp_path / "wide.csv"), str(tmp_path / "from_csv"))
            == _release_bytes(str(tmp_path / "wide.parquet"), str(tmp_path / "from_parquet")))
    write_file(table, str(tmp_path / "ints.csv"), "csv")
    write_file(table, str(tmp_path / "ints.parquet"), "parquet")
    assert (_release_bytes(str(tmp_path / "ints.csv"), str(tmp_path / "ints_csv"))
            == _release_bytes(str(tmp_path / "ints.parquet"), str(tmp_path / "ints_parquet")))
