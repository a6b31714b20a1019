"""The command line in child processes, for the tests that kill a step or start several
at once (tests/test_lifecycle_faults.py, tests/test_object_store.py).

Never a fork of the test process: a child forked from pytest, which holds the threads
of earlier Beam pipelines (gRPC), can deadlock starting its own gRPC server (it did
once, in a full run of the suite).  The children are forked by a fork server
(:mod:`multiprocessing`'s ``forkserver``): a new interpreter, started at the first call
and living until the test session ends, that imports the command line and the jobs
and runs no pipeline, so holds no gRPC thread.  A new interpreter per child would
import Beam each time (2-3 s): over 2 minutes more for these tests on a loaded 2-core
machine.  A child takes the caller's environment and working directory of the moment,
not the test process's patches (``lease_seconds`` sets the one a test needs).

A child's exit status is its command's (2: a refusal), or −9 if it died of SIGKILL
(``CONTINUAL_SYNTH_CRASH_AT``).
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import threading
import time
import traceback
from typing import Dict, List, Optional, Sequence, Tuple

TIMEOUT = 300.0  # seconds a group of children may take; then it is killed

_FORKSERVER = multiprocessing.get_context("forkserver")
_FORKSERVER.set_forkserver_preload([  # what a command imports before it runs a pipeline
    __name__, "continual_synth.pipelines.commands.cli", "continual_synth.pipelines.families.jobs",
    "continual_synth.pipelines.families.tabular", "continual_synth.pipelines.commands.privhp_cli",
    "continual_synth.pipelines.commands.tabular_cli", "continual_synth.pipelines.streaming.stream",
    "continual_synth.runners.presets"])


def cli_child(argv: Sequence[str], env: Optional[Dict[str, str]] = None,
              lease_seconds: Optional[float] = None,
              timeout: float = TIMEOUT) -> Tuple[int, str]:
    """``continual-synth argv`` in a child process: (exit status, or −signal if it was
    killed; its stderr).  ``env``: variables added to this process's environment;
    ``lease_seconds``: the child's ``Lease.SECONDS`` (an object-store lease's length)."""
    return cli_children([argv], env=env, lease_seconds=lease_seconds, timeout=timeout)[0]


def cli_children(argvs: Sequence[Sequence[str]], env: Optional[Dict[str, str]] = None,
                 lease_seconds: Optional[float] = None,
                 timeout: float = TIMEOUT) -> List[Tuple[int, str]]:
    """Each ``argv`` of ``argvs`` in its own child process, all started at the same
    instant (a barrier); waits for all: [(exit status or −signal, stderr)] in the order
    of ``argvs``.  Children not ready or not done within ``timeout`` seconds are
    killed and the test fails; no child outlives the call."""
    environment = {**os.environ, **(env or {})}
    gate = _FORKSERVER.Barrier(len(argvs) + 1)
    children = []
    with tempfile.TemporaryDirectory() as folder:
        stderrs = [os.path.join(folder, f"stderr-{i}") for i in range(len(argvs))]
        try:
            for argv, stderr in zip(argvs, stderrs):
                child = _FORKSERVER.Process(target=_child, args=(
                    list(argv), environment, os.getcwd(), stderr, lease_seconds, gate,
                    timeout))
                child.start()
                children.append(child)
            try:
                gate.wait(timeout)  # every child is ready: all start now
            except threading.BrokenBarrierError:
                raise AssertionError(f"children not ready after {timeout:.0f} s: {argvs}\n"
                                     + "\n".join(map(_text, stderrs))) from None
            deadline = time.monotonic() + timeout
            for child, argv, stderr in zip(children, argvs, stderrs):
                child.join(max(deadline - time.monotonic(), 0.0))
                if child.exitcode is None:
                    raise AssertionError(f"child {child.pid} hung (killed after "
                                         f"{timeout:.0f} s): {argv}\n{_text(stderr)}")
            return [(child.exitcode, _text(stderr))
                    for child, stderr in zip(children, stderrs)]
        finally:
            for child in children:  # none is left behind, whatever happened
                if child.exitcode is None:
                    child.kill()
                    child.join()
                child.close()


def _text(path: str) -> str:
    if not os.path.exists(path):
        return ""
    with open(path, "rb") as handle:
        return handle.read().decode(errors="replace")


def _child(argv: List[str], env: Dict[str, str], cwd: str, stderr: str,
           lease_seconds: Optional[float], gate, timeout: float) -> None:
    """In the forked child: the caller's environment and folder, stderr into a file,
    then the command when every child of the call is ready."""
    code = 1
    try:
        os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.environ.clear()  # the fork server's are those of when it started
        os.environ.update(env)
        os.chdir(cwd)
        from continual_synth.pipelines.commands import cli
        from continual_synth.pipelines.release.lifecycle import Lease
        if lease_seconds is not None:
            Lease.SECONDS = lease_seconds
        gate.wait(timeout)
        code = cli.main(argv)
    except SystemExit as exc:  # an argparse error: its status, as the command's
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - a traceback is what the tests look for
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)



def overriding(*parts: Sequence[str]) -> List[str]:
    """The options of ``parts`` in order, each option given again later replacing the
    earlier one (``--rho 5 … --rho 0`` → ``… --rho 0``): the command line refuses an
    option given twice, so a test that varies one option of a common set replaces it.
    ``--name value`` and ``--name=value`` are options; a value never starts with ``--``."""
    args = [arg for part in parts for arg in part]
    groups, position = [], 0
    while position < len(args):
        arg = args[position]
        size = 1
        if arg.startswith("--") and "=" not in arg and position + 1 < len(args) \
                and not args[position + 1].startswith("--"):
            size = 2
        name = arg.split("=", 1)[0] if arg.startswith("--") else None
        groups.append((name, args[position:position + size]))
        position += size
    last = {name: index for index, (name, _) in enumerate(groups) if name}
    return [arg for index, (name, group) in enumerate(groups)
            if name is None or last[name] == index for arg in group]
