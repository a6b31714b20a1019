"""Visible work: one log line per stage, Beam quiet unless --verbose
(anywhere on the line), Beam Metrics counters in the job's summary, progress lines."""
from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.pipelines.release import logs
from continual_synth.pipelines.commands.cli import main
from continual_synth.transforms import monitoring
from continual_synth.transforms.files import read_dataset, write_file

from helpers_panels import long_table, markov_codes, write_period_files

CONSOLE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "continual-synth")
PEOPLE, T = 120, 4
SUMMARY = re.compile(r"done in [\d.]+ s: records read (\d+), rejected (\d+), periods released "
                     r"(\d+), synthetic records written (\d+)$")


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    root = tmp_path_factory.mktemp("monitoring")
    path = str(root / "panel.parquet")
    write_file(long_table(markov_codes(PEOPLE, T, seed=8)), path, "parquet")
    return root, path


def _window_run(path, out, *extra):
    return ["window", "run", "--input", path, "--output", out, "--window", "2",
            "--horizon", str(T), "--rho", "2", "--seed", "3", "--shards", "2", *extra]


def test_strip_verbose_anywhere():
    assert logs.strip_verbose(["window", "-v", "run", "--rho", "1", "--verbose"]) == \
        (["window", "run", "--rho", "1"], True)
    assert logs.strip_verbose(["window", "run"]) == (["window", "run"], False)
    assert logs.beam_log_args(["--runner", "x"], False) == \
        ["--runner", "x", "--default_sdk_harness_log_level=ERROR"]
    assert logs.beam_log_args(["--default_sdk_harness_log_level=INFO"], False) == \
        ["--default_sdk_harness_log_level=INFO"]
    assert logs.beam_log_args([], True) == []


def _lines(err: str, job: str):
    lines = err.strip().splitlines()
    assert lines and all(line.startswith(f"continual-synth {job}: ") for line in lines), lines
    return [line[len(f"continual-synth {job}: "):] for line in lines]


def test_stage_lines_and_counters_match_the_release(panel, tmp_path, capsys):
    _, path = panel
    out = str(tmp_path / "out")
    assert main(_window_run(path, out)) == 0
    lines = _lines(capsys.readouterr().err, "window run")
    assert lines[0] == f"reading {path} (periods 1..{T})"
    assert lines[1] == f"released periods 1..{T} → {out}"
    read, rejected, periods, written = map(int, SUMMARY.match(lines[-1]).groups())
    assert len(lines) == 3
    assert read == PEOPLE * T and rejected == 0 and periods == T
    assert written == read_dataset(out).num_rows > 0


def test_commands_without_a_pipeline_say_what_they_do_and_end_with_a_closing_line(
        panel, tmp_path, capsys):
    """``tabular example`` and ``evaluate`` run no Beam pipeline: a stage line, then
    ``done in … s`` (the example is not silent, evaluate has its closing line)."""
    _, path = panel
    out, example = str(tmp_path / "out"), str(tmp_path / "example")
    assert main(_window_run(path, out)) == 0
    capsys.readouterr()
    assert main(["evaluate", "window", "--truth", path, "--synthetic", out]) == 0
    lines = _lines(capsys.readouterr().err, "evaluate window")
    assert lines[0] == f"reading the truth {path} and the release {out}"
    assert len(lines) == 2 and re.fullmatch(r"done in [\d.]+ s", lines[-1]), lines
    assert main(["tabular", "example", "--output", example, "--periods", "3"]) == 0
    lines = _lines(capsys.readouterr().err, "tabular example")
    assert lines[0] == (f"writing the cces2016 example stream (randomized, 3 periods of 50 "
                        f"records) → {example}")
    assert len(lines) == 2 and re.fullmatch(r"done in [\d.]+ s", lines[-1]), lines


def test_verbose_after_the_subcommand_shows_beam_logging(panel, tmp_path, caplog):
    _, path = panel
    for flag, shown in (("--verbose", True), ("-v", True), (None, False)):
        caplog.clear()
        extra = [flag] if flag else []
        assert main(_window_run(path, str(tmp_path / f"out{flag}"), *extra)) == 0
        beam_info = [r for r in caplog.records
                     if r.name.startswith("apache_beam") and r.levelno == logging.INFO]
        assert bool(beam_info) == shown, flag


@pytest.mark.skipif(not os.path.exists(CONSOLE_SCRIPT), reason="console script not installed")
def test_multi_processing_run_prints_no_worker_logging(panel, tmp_path):
    """The job's own lines only on stderr, not the SDK harness's logging (42 lines).
    (With the Google provider's BigQuery client but not google-apitools, each worker
    warned while importing Beam and then printed its bootstrap INFO line: the [airflow]
    extra installs apitools.)"""
    _, path = panel
    ran = subprocess.run([CONSOLE_SCRIPT, *_window_run(path, str(tmp_path / "out")),
                          "--direct_running_mode=multi_processing", "--direct_num_workers=2"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stderr.strip().splitlines()
    ours = [line for line in lines if line.startswith("continual-synth window run: ")]
    assert len(ours) == 3 and len(lines) == len(ours), lines
    assert not any("sdk_worker" in line or "Pipeline_options" in line for line in lines)
    read, _, periods, _ = map(int, SUMMARY.search(ours[-1]).groups())
    assert read == PEOPLE * T and periods == T


def test_progress_lines_are_rate_limited(caplog):
    progress = monitoring.Progress(40, "periods done", seconds=3600)
    with caplog.at_level(logging.INFO, logger="continual_synth"):
        for _ in range(40):
            progress.advance()
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 10  # one per tenth, not one per period
    assert messages[0].startswith("periods done 4 of 40") and \
        messages[-1].startswith("periods done 40 of 40")


def _tabular_run(tmp_path, *extra):
    """``tabular run`` on a three-period stream of six records (the exit status)."""
    path = str(tmp_path / "stream.csv")
    write_file(pa.table({"period": [1, 1, 2, 2, 3, 3], "a": [0, 1, 1, 0, 1, 1],
                         "b": [1, 1, 0, 0, 1, 0]}), path, "csv")
    domain = tmp_path / "domain.json"
    domain.write_text('{"a": [0, 1], "b": [0, 1]}')
    return main(["tabular", "run", "--input", path, "--output", str(tmp_path / "out"),
                 "--domain", str(domain), "--epsilon", "1", "--seed", "1", *extra])


def test_tabular_run_reports_periods_done(tmp_path, capsys):
    assert _tabular_run(tmp_path) == 0
    lines = _lines(capsys.readouterr().err, "tabular run")
    assert [line.split(" (")[0] for line in lines if line.startswith("periods done")] == \
        ["periods done 1 of 3", "periods done 2 of 3", "periods done 3 of 3"]
    read, rejected, periods, written = map(int, SUMMARY.match(lines[-1]).groups())
    assert (read, rejected, periods) == (6, 0, 3)
    assert written == read_dataset(str(tmp_path / "out")).num_rows


def test_tabular_run_reports_periods_done_from_worker_processes(tmp_path, capfd):
    """Under DirectRunner ``multi_processing`` the fold runs in a worker process, where
    Beam's harness level (ERROR unless --verbose) would drop the lines: progress is
    still reported."""
    assert _tabular_run(tmp_path, "--direct_num_workers=2",
                        "--direct_running_mode=multi_processing") == 0
    lines = _lines(capfd.readouterr().err, "tabular run")  # and no Beam worker lines
    assert [line.split(" (")[0] for line in lines if line.startswith("periods done")] == \
        ["periods done 1 of 3", "periods done 2 of 3", "periods done 3 of 3"]
    assert monitoring.LOGGER.handlers  # the driver's own (a worker adds one only there)


def test_a_window_step_reports_every_period_it_publishes(tmp_path, capsys):
    """Algorithm 1's first release (t = k) publishes periods 1..k at once: the step's
    stage line, its metrics and its summary say so; later steps publish one period."""
    periods = write_period_files(long_table(markov_codes(PEOPLE, T, seed=8)),
                                 str(tmp_path / "periods"))
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert main(["window", "init", "--state", state, "--window", "3", "--horizon", str(T),
                 "--rho", "2", "--seed", "3", "--shards", "2"]) == 0
    capsys.readouterr()
    seen = []
    for path in periods:
        assert main(["window", "step", "--state", state, "--input", path,
                     "--output", out]) == 0
        captured = capsys.readouterr()
        lines = _lines(captured.err, "window step")
        _, _, released, written = map(int, SUMMARY.match(lines[-1]).groups())
        summary = json.loads(captured.out)
        seen.append((lines[1].split(" → ")[0], released, summary["periods_published"]))
    assert seen == [("ingested period 1 of 4 (nothing released yet)", 0, []),
                    ("ingested period 2 of 4 (nothing released yet)", 0, []),
                    ("released periods 1..3 of 4", 3, [1, 2, 3]),
                    ("released period 4 of 4", 1, [4])]


def test_continual_bounded_run_and_step_report_their_work(tmp_path, capsys):
    """Continual PrivHP reads its points on the driver, period by period: the run still
    says what it reads, how many periods are done, and the same summary counts as the
    other jobs; so does a step."""
    rng = np.random.default_rng(5)
    points = str(tmp_path / "points.parquet")
    write_file(pa.table({"x": rng.random(400), "y": rng.random(400),
                         "period": np.repeat(np.arange(1, 5), 100)}), points, "parquet")
    common = ["--columns", "x,y", "--bounds", "0:1,0:1", "--epsilon", "1", "--seed", "1",
              "--samples", "50", "--depth", "6", "--horizon", "4"]
    assert main(["privhp", "run", "--input", points, "--output", str(tmp_path / "out"),
                 *common]) == 0
    lines = _lines(capsys.readouterr().err, "privhp run")
    assert lines[0] == f"reading {points} (periods 1..4)"
    assert [line.split(" (")[0] for line in lines if line.startswith("periods done")][-1] == \
        "periods done 4 of 4"
    assert tuple(map(int, SUMMARY.match(lines[-1]).groups())) == (400, 0, 4, 200)
    state = str(tmp_path / "state")
    assert main(["privhp", "init", "--state", state, *common]) == 0
    period = str(tmp_path / "p1.parquet")
    write_file(pa.table({"x": rng.random(30), "y": rng.random(30)}), period, "parquet")
    capsys.readouterr()
    assert main(["privhp", "step", "--state", state, "--input", period,
                 "--output", str(tmp_path / "steps")]) == 0
    lines = _lines(capsys.readouterr().err, "privhp step")
    assert tuple(map(int, SUMMARY.match(lines[-1]).groups())) == (30, 0, 1, 50)


def test_continual_bounded_run_on_dask_prints_no_partial_counters(tmp_path):
    """Beam's Dask runner reports no metrics; continual PrivHP's run counts the points it
    reads on the driver, which must not turn the missing counters into zeros ("records
    read 400, rejected 0, periods released 0, synthetic records written 0"): the summary
    is the same honest line as every other Dask run's.  A fresh interpreter: the local
    cluster forks its workers, which must not happen in a test process that has loaded
    JAX (multithreaded) for the tabular tests."""
    pytest.importorskip("distributed")
    rng = np.random.default_rng(5)
    points = str(tmp_path / "points.parquet")
    write_file(pa.table({"x": rng.random(400), "y": rng.random(400),
                         "period": np.repeat(np.arange(1, 5), 100)}), points, "parquet")
    ran = subprocess.run(
        [sys.executable, "-m", "continual_synth", "privhp", "run", "--input", points,
         "--output", str(tmp_path / "out"), "--columns", "x,y", "--bounds", "0:1,0:1",
         "--epsilon", "1", "--seed", "1", "--samples", "50", "--depth", "6", "--horizon",
         "4", "--runner", "dask-local"], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-2000:]
    lines = _lines(ran.stderr, "privhp run")
    assert re.fullmatch(r"done in [\d.]+ s \(this runner reports no Beam metrics\)",
                        lines[-1]), lines[-1]
    assert not any(SUMMARY.match(line) for line in lines)


def test_missing_metrics_are_not_hidden_by_driver_counts():
    """:func:`logs.summary_line` after a pipeline without metrics and a driver-side
    count: the missing-metrics line, not the driver's count beside zeros."""

    class NoMetrics:
        def metrics(self):
            raise NotImplementedError

    class Ran:
        result = NoMetrics()

    logs.configure("test", False)
    try:
        logs.add_totals({monitoring.RECORDS_READ: 18000})
        logs.record_metrics(Ran())
        assert logs.summary_line().endswith("(this runner reports no Beam metrics)")
    finally:
        logs.configure("test", False)
