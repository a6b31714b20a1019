"""The first and last acts of a process that runs one command and ends: the
``continual-synth`` console command, ``python -m continual_synth`` and the job modules
(``python -m continual_synth.jobs.window_step`` …).

This module imports nothing heavy, so that this comes first:

1. **Freed memory kept for reuse** (:func:`allocate_for_one_job`: a restart with glibc's
   malloc settings in the environment; Linux with glibc, not for ``stream``).
2. **The imports without garbage collection.**  Importing the command line loads Apache
   Beam, pyarrow and pandas (about 230 000 objects, none of them garbage); with the
   collector on, its collections would traverse them again and again while they load:
   serial work (about a fifth of the import's CPU time) before any Dask worker or Beam
   bundle starts.
3. **The loaded objects frozen** (``gc.freeze``), then the collector switched back on for
   the job: its full collections during the job do not walk the loaded modules, and Dask
   workers forked later inherit the frozen objects (the launching process's CPU time:
   ``bench/results/dask_scaling.md``).  Python's ``gc``
   documentation gives this order (collector off early, freeze before forking) for a
   process that forks workers.  Frozen objects are never collected, so only a process's
   entry point does this.
4. **The exit without the interpreter's teardown** (:func:`exit_process`).
"""
from __future__ import annotations

import gc
import os
import sys
from typing import Callable, Sequence

__all__ = ["ALLOCATOR_ENVIRON", "run_command", "console_main", "job_main",
           "runs_until_stopped", "allocate_for_one_job", "exit_process"]

# glibc malloc's thresholds for a process that runs one job and ends, as the environment
# variables glibc reads when a process starts: blocks below 1 GiB come from the heap, not
# a fresh mmap; the heap's free top is kept (up to 2 GiB)
ALLOCATOR_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": str(2 ** 30),
                     "MALLOC_TRIM_THRESHOLD_": str(2 ** 31 - 1)}


def run_command(load: Callable[[], Callable[[], int]]) -> None:
    """``load()`` imports what the command needs and returns its main; run it as above and
    leave the process with its status (``SystemExit``, e.g. argparse's ``--help``, gives
    its code)."""
    gc.disable()
    try:
        main = load()
    finally:
        gc.freeze()
        gc.enable()
    try:
        code = main()
    except SystemExit as stop:
        code = stop.code
    exit_process(code)


def console_main() -> None:
    """The ``continual-synth`` command and ``python -m continual_synth``."""
    allocate_for_one_job()

    def load():
        from continual_synth.pipelines.commands.cli import main
        return main
    run_command(load)


def job_main(job: str) -> None:
    """``python -m continual_synth.jobs.<job>``."""
    allocate_for_one_job()

    def load():
        from continual_synth.jobs import main
        # (imported for its effect: the imports, uncollected)
        from continual_synth.pipelines.commands import cli  # noqa: F401
        return lambda: main(job)
    run_command(load)


def runs_until_stopped(argv: Sequence[str]) -> bool:
    """Whether the command line ``argv`` is a ``stream`` command (its first two words)."""
    return "stream" in [arg for arg in argv if not arg.startswith("-")][:2]


def allocate_for_one_job() -> None:
    """Restart this process (``exec``, the same pid and arguments) with glibc's malloc set
    to keep freed memory for reuse: blocks under 1 GiB come from the heap, not a fresh
    ``mmap``, and the heap's free top is not handed back to the system.  Only on Linux
    with glibc, and not for ``stream`` (it runs until it is stopped) or when either
    variable is already set (the user's choice).  The restart comes before the heavy
    imports, so it costs a few hundredths of a second.

    By default every numpy array above malloc's adaptive threshold (at most 32 MiB) is
    a fresh ``mmap`` and a free heap top over 128 KiB is trimmed, so the next array
    faults its pages in again, zeroed by the kernel: a large ``window run`` spends a
    good part of its time in the kernel, and reaches a higher peak, than with the memory
    kept.  A process that runs one job and ends needs nothing back before it exits.
    glibc reads the variables only when a process starts (``mallopt`` later does not
    have the same effect), hence the restart; processes the job starts (Dask or Beam
    workers) inherit them (docs/runners.md; the workers' case in
    ``bench/results/dask_scaling.md``)."""
    if (not sys.platform.startswith("linux") or not _glibc()
            or runs_until_stopped(sys.argv[1:])
            or any(name in os.environ for name in ALLOCATOR_ENVIRON)
            or not getattr(sys, "orig_argv", None)):  # Python 3.9: no restart
        return
    os.environ.update(ALLOCATOR_ENVIRON)
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError, AttributeError):
        return False


def exit_process(code=0):
    """Leave the process with ``code`` as ``sys.exit(code)`` would, but without the
    interpreter's teardown: with Apache Beam, pandas and pyarrow loaded, freeing every
    module at exit takes a second or more (``bench/results/tabular_step_cli_ab.md``).
    What the teardown
    would do that matters is done first, as ``Py_FinalizeEx`` does it: the threading
    module's exit hooks run and non-daemon threads are joined (``threading._shutdown``),
    then the ``atexit`` handlers (Dask clusters, temporary directories, logging), then
    stdout and stderr are flushed.  Only for a process's last act."""
    import atexit
    import os
    import threading

    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    shutdown = getattr(threading, "_shutdown", None)
    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exit_functions is None:  # not CPython: the normal exit
        sys.exit(code)
    shutdown()
    run_exit_functions()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or a broken pipe: nothing more to say
            pass
    os._exit(code)
