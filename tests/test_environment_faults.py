"""Faults of the environment (a full disk, a refused permission) end in one line and exit 3,
leave no partial output outside staging and no staging folder, and the same command run
again once the fault is gone goes on as if nothing had happened (mechanisms/errors.py
``environment_fault``; pipelines/commands/cli.py; the lifecycle's staging)."""
from __future__ import annotations

import contextlib
import errno
import io
import os

import pytest

from continual_synth.pipelines.release import conditional_create, release_dir
from continual_synth.pipelines.commands.cli import main
from continual_synth.pipelines.release.lifecycle import load_state
from continual_synth.transforms import storage
from continual_synth.transforms.files import write_file

from helpers_panels import (clone_incremental, long_table, markov_codes, release_snapshot,
                            write_period_files)

OPTIONS = ["--window", "2", "--horizon", "3", "--rho", "1", "--seed", "2",
           "--missing-value", "0"]  # a panel stream needs it


def run(*argv):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


class Full:
    """Writes under ``prefix`` fail as on a full disk (``errno`` ENOSPC), by every way
    the jobs write: Beam's FileSystems (``storage.create``), and the local atomic writes
    of versions and manifests."""

    def __init__(self, monkeypatch, prefix: str, error: int = errno.ENOSPC):
        self.prefix, self.error = os.path.abspath(prefix), error
        create, real_open = storage.create, open

        def guarded_create(path):
            self.check(path)
            return create(path)

        def guarded_open(path, mode="r", *args, **kwargs):
            if "w" in mode or "a" in mode:
                self.check(path)
            return real_open(path, mode, *args, **kwargs)
        monkeypatch.setattr(storage, "create", guarded_create)
        for module in (release_dir, conditional_create):
            monkeypatch.setattr(module, "open", guarded_open, raising=False)

    def check(self, path):
        if os.path.abspath(str(path)).startswith(self.prefix):
            raise OSError(self.error, os.strerror(self.error), str(path))


def staging_left(directory) -> list:
    return [name for name in (os.listdir(directory) if os.path.isdir(directory) else [])
            if name.startswith(".staging")]


def assert_one_line(code, err, words):
    assert code == 3, err
    lines = [line for line in err.splitlines() if line.startswith("continual-synth: error")]
    assert len(lines) == 1 and words in lines[0], err
    assert "Traceback" not in err


@pytest.fixture()
def stepped(tmp_path):
    """A window state after period 1 (nothing released yet), the period files, and a
    clone of it to step on without faults (the reference)."""
    paths = write_period_files(long_table(markov_codes(40, 3, seed=6)), str(tmp_path / "p"))
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert run("window", "init", "--state", state, *OPTIONS)[0] == 0
    assert run("window", "step", "--state", state, "--input", paths[0], "--output", out)[0] == 0
    reference = clone_incremental(state, out, str(tmp_path / "reference"))
    return state, out, paths, reference


@pytest.mark.parametrize("where, error, words", [
    ("out", errno.ENOSPC, "no space left on the device"),
    ("out/.staging", errno.ENOSPC, "no space left on the device"),
    ("out/.manifest.json", errno.ENOSPC, "no space left on the device"),
    ("state/runs", errno.ENOSPC, "no space left on the device"),
    ("state/versions", errno.ENOSPC, "no space left on the device"),
    ("out", errno.EACCES, "permission denied"),
])
def test_a_step_stopped_by_its_environment_says_so_and_goes_on_when_run_again(
        stepped, monkeypatch, where, error, words):
    """At each place a step writes (its private files, its versions, the staged release,
    the manifest, written as a hidden temporary file first): exit 3 with one line, no
    staging left; then the same step, the fault
    gone, releases what a step without the fault releases."""
    state, out, paths, (ref_state, ref_out) = stepped
    root = os.path.dirname(state)
    with monkeypatch.context() as patch:
        Full(patch, os.path.join(root, where), error)
        code, err = run("window", "step", "--state", state, "--input", paths[1],
                        "--output", out)
    assert_one_line(code, err, words)
    assert staging_left(out) == []
    assert run("window", "step", "--state", state, "--input", paths[1], "--output", out)[0] == 0
    assert run("window", "step", "--state", ref_state, "--input", paths[1],
               "--output", ref_out)[0] == 0
    assert release_snapshot(out) == release_snapshot(ref_out)
    ledger = lambda s: load_state(s)["synthesizer_state"]["ledger"]["entries"]  # noqa: E731
    assert ledger(state) == ledger(ref_state)


def test_a_run_on_a_full_disk_publishes_nothing(tmp_path, monkeypatch):
    table = long_table(markov_codes(40, 3, seed=6))
    write_file(table, str(tmp_path / "panel.parquet"), "parquet")
    out = str(tmp_path / "out")
    with monkeypatch.context() as patch:
        Full(patch, out)
        code, err = run("window", "run", "--input", str(tmp_path / "panel.parquet"),
                        "--output", out, *OPTIONS)
    assert_one_line(code, err, "no space left on the device")
    assert not os.path.exists(out) or os.listdir(out) == []
    assert run("window", "run", "--input", str(tmp_path / "panel.parquet"), "--output", out,
               *OPTIONS)[0] == 0


def test_a_stream_on_a_full_disk_stops_with_one_line(stepped, tmp_path, monkeypatch):
    state, out, paths, _ = stepped
    watch = tmp_path / "watch"
    watch.mkdir()
    os.link(paths[1], watch / "period_02.parquet")
    with monkeypatch.context() as patch:
        Full(patch, out)
        code, err = run("window", "stream", "--watch", str(watch), "--state", state,
                        "--output", out, "--until-period", "2", "--poll-interval", "0.05",
                        *OPTIONS)
    assert_one_line(code, err, "no space left on the device")
    assert staging_left(out) == []
