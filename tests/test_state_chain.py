"""A tamper-evident state (pipelines/release/lifecycle.py, ``sealed`` and ``StateDir.read``): each
version records the digest of the version before it and its ledger's running total, so a
damaged or hand-edited state is refused, naming the file, instead of resetting the budget."""
from __future__ import annotations

import contextlib
import glob
import io
import json
import os

import pytest

from continual_synth.pipelines.commands.cli import main
from continual_synth.pipelines.release.lifecycle import CHAIN, StateDir
from continual_synth.transforms import packed_json

from helpers_panels import (clone_incremental, long_table, markov_codes, snapshot,
                           write_period_files)

OPTIONS = ["--window", "2", "--horizon", "4", "--rho", "0.1", "--seed", "1"]


def run(*argv):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


@pytest.fixture()
def stepped(tmp_path):
    """A window state after three steps, and the fourth period's file."""
    paths = write_period_files(long_table(markov_codes(30, 4, seed=2)), str(tmp_path / "p"))
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert run("window", "init", "--state", state, *OPTIONS)[0] == 0
    for path in paths[:3]:
        assert run("window", "step", "--state", state, "--input", path, "--output", out)[0] == 0
    return state, out, paths[3]


def newest(state: str) -> str:
    return sorted(path for path in glob.glob(os.path.join(state, "versions", "v*.json"))
                  if os.path.getsize(path))[-1]


def edit(path: str, change) -> None:
    with open(path, "rb") as handle:
        document = packed_json.loads(handle.read())
    change(document)
    with open(path, "wb") as handle:
        handle.write(packed_json.dumps(document))


def refused(stepped, message: str):
    state, out, path = stepped
    unlocked = lambda: {k: v for k, v in snapshot(state).items() if k != "lock"}  # a holder's pid
    before = unlocked()
    code, err = run("window", "step", "--state", state, "--input", path, "--output", out)
    assert code == 2 and message in err, err
    assert "Traceback" not in err
    assert unlocked() == before
    return err


def test_a_ledger_emptied_by_hand_is_refused_not_reset(stepped):
    """``entries`` edited to [] is refused, not accepted with the next step reporting
    half the budget spent that has been."""
    state = stepped[0]
    target = newest(state)
    edit(target, lambda d: d["synthesizer_state"]["ledger"].update(entries=[]))
    err = refused(stepped, "does not match its history")
    assert os.path.basename(target) in err and "backup" in err


def test_a_ledger_and_its_total_edited_together_are_refused(stepped):
    state = stepped[0]
    def forget(document):
        document["synthesizer_state"]["ledger"]["entries"] = []
        document[CHAIN].update(spent=0.0, entries=0)
    edit(newest(state), forget)
    refused(stepped, "less than")


def test_an_older_version_copied_over_the_newest_is_refused(stepped):
    state = stepped[0]
    versions = sorted(glob.glob(os.path.join(state, "versions", "v*.json")))
    newest_path = newest(state)
    previous = versions[versions.index(newest_path) - 1]
    with open(previous, "rb") as handle:
        older = handle.read()
    with open(newest_path, "wb") as handle:
        handle.write(older)
    refused(stepped, "does not match its history")


@pytest.mark.parametrize("content", [b"{}", b'{"kind": "window"}', b"[1, 2]"])
def test_an_incomplete_version_is_refused_naming_the_file(stepped, content):
    """``{}`` is refused naming the file, and JSON with keys missing does not end in
    ``KeyError: 'output_dir'`` (exit 1)."""
    target = newest(stepped[0])
    with open(target, "wb") as handle:
        handle.write(content)
    err = refused(stepped, "not a complete state")
    assert os.path.basename(target) in err


def test_an_untouched_state_steps_on_and_its_chain_verifies(stepped):
    state, out, path = stepped
    assert run("window", "step", "--state", state, "--input", path, "--output", out)[0] == 0
    version, document = StateDir(state).read("window")
    assert document[CHAIN]["entries"] == len(document["synthesizer_state"]["ledger"]["entries"])
    with open(os.path.join(out, "manifest.json")) as handle:
        assert json.load(handle)["rho_spent"] == pytest.approx(document[CHAIN]["spent"])


def test_a_state_written_before_chains_still_reads(stepped):
    """A state saved by a version before versions were chained has no ``chain`` in any
    version: it reads and steps on (its next version starts the chain)."""
    state, out, path = stepped
    for version in glob.glob(os.path.join(state, "versions", "v*.json")):
        if os.path.getsize(version):
            edit(version, lambda d: d.pop(CHAIN))
    assert run("window", "step", "--state", state, "--input", path, "--output", out)[0] == 0
    assert CHAIN in StateDir(state).read("window")[1]


def named_file(state: str, part: str) -> str:
    """A file the current version names whose path holds ``part`` (e.g. ``synthetic/``)."""
    version, document = StateDir(state).read("window")
    files = StateDir(state).named_files(document)
    return sorted(full for relative, full in files.items() if part in relative)[0]


def test_a_damaged_private_file_is_refused_before_the_period_is_charged(stepped):
    """Garbage in the saved synthetic people was found only when the step emitted, after
    its period was charged."""
    state = stepped[0]
    target = named_file(state, "synthetic/")
    with open(target, "r+b") as handle:
        handle.seek(max(os.path.getsize(target) - 8, 0))
        handle.write(b"garbage!")
    err = refused(stepped, "does not hold the bytes it was written with")
    assert os.path.basename(target) in err and "nothing was read or charged" in err


def test_a_pending_period_whose_files_are_damaged_says_what_to_restore(stepped, tmp_path):
    """A step killed after its commit leaves its period charged and pending; if a file
    its release needs is then damaged, the re-run names it, and once it is restored the
    same step publishes the period without charging again."""
    from helpers_processes import cli_child
    state, out, path = stepped
    reference_state, reference_out = clone_incremental(state, out, str(tmp_path / "reference"))
    code, _ = cli_child(["window", "step", "--state", state, "--input", path, "--output", out],
                        env={"CONTINUAL_SYNTH_CRASH_AT": "committed"})
    assert code == -9
    pending = StateDir(state).read("window")[1]["pending"]
    assert pending is not None
    target = named_file(state, "synthetic/")
    with open(target, "rb") as handle:
        intact = handle.read()
    with open(target, "wb") as handle:
        handle.write(b"not the people")
    err = refused(stepped, "is charged and waits for it")
    assert os.path.basename(target) in err
    with open(target, "wb") as handle:
        handle.write(intact)
    assert run("window", "step", "--state", state, "--input", path, "--output", out)[0] == 0
    assert run("window", "step", "--state", reference_state, "--input", path,
               "--output", reference_out)[0] == 0
    spent = [StateDir(s).read("window")[1][CHAIN]["spent"] for s in (state, reference_state)]
    assert spent[0] == pytest.approx(spent[1])
