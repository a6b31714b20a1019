"""The first and last acts of a process that runs one command and ends: the
``continual-synth`` console command, ``python -m continual_synth`` and the job modules
(``python -m continual_synth.jobs.window_step`` …).

This module imports nothing heavy, so that :func:`run_command` comes first:

1. **The imports without garbage collection.**  Importing the command line loads Apache
   Beam, pyarrow and pandas (about 230 000 objects, none of them garbage); with the
   collector on, its collections traversed them again and again while they loaded:
   the import took 1.43-1.56 CPU s, against 1.15-1.20 s with it off, and
   ``continual-synth window run --help`` 1.50-1.58 s against 1.24-1.33 s: serial work
   before any Dask worker or Beam bundle starts.
2. **The loaded objects frozen** (``gc.freeze``), then the collector switched back on for
   the job: its full collections during the job no longer walk the loaded modules (a 2M
   x 12 ``window run`` on Dask: 0.5 → 0.2 CPU s of the launching process's collections),
   and Dask workers forked later inherit the frozen objects.  Python's ``gc``
   documentation gives this order (collector off early, freeze before forking) for a
   process that forks workers.  Frozen objects are never collected, so only a process's
   entry point does this.
3. **The exit without the interpreter's teardown** (:func:`exit_process`).
"""
from __future__ import annotations

import gc
import sys
from typing import Callable


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
    def load():
        from continual_synth.pipelines.cli import main
        return main
    run_command(load)


def job_main(job: str) -> None:
    """``python -m continual_synth.jobs.<job>``."""
    def load():
        from continual_synth.jobs import main
        from continual_synth.pipelines import cli  # noqa: F401  (the imports, uncollected)
        return lambda: main(job)
    run_command(load)


def exit_process(code=0):
    """Leave the process with ``code`` as ``sys.exit(code)`` would, but without the
    interpreter's teardown: with Apache Beam, pandas and pyarrow loaded, freeing every
    module at exit took 1-1.5 s, a fifth of a ``tabular step``.  What the teardown
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
