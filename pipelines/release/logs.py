"""The command's logging: one INFO line per stage on stderr, Beam quiet unless --verbose.

By default the ``continual_synth`` logger writes ``continual-synth <job>: <message>``
lines (``reading input …``, ``released period 3 of 12 → OUT``, progress, and the job's
summary with its Beam counters); Beam's own logging is off in this process and, through
``--default_sdk_harness_log_level=ERROR``, in the SDK worker processes of
``--direct_running_mode=multi_processing`` and of portable runners.  ``--verbose`` (or
``-v``), accepted anywhere on the command line, shows Beam's INFO logging everywhere.

Counters of every pipeline a command runs are summed by :func:`record_metrics` and
reported once by :func:`summary_line` (see :mod:`continual_synth.transforms.monitoring`:
exact counts, for the operator, never part of a release).
"""
from __future__ import annotations

import logging
import time
from typing import Dict, List, Sequence, Tuple

from continual_synth.transforms import monitoring

__all__ = ["LOGGER", "VERBOSE_FLAGS", "HARNESS_LEVEL_OPTION", "strip_verbose", "configure",
           "beam_log_args", "record_metrics", "add_totals", "summary_line", "totals"]

LOGGER = logging.getLogger("continual_synth")
VERBOSE_FLAGS = ("--verbose", "-v")
HARNESS_LEVEL_OPTION = "--default_sdk_harness_log_level"

_totals: Dict[str, int] = {}
_metrics_missing = False
_started = time.monotonic()


def strip_verbose(argv: Sequence[str]) -> Tuple[List[str], bool]:
    """``argv`` without ``--verbose``/``-v`` (wherever they are; also
    ``--verbose=true|false``, as the job modules take a flag), and whether it was asked."""
    kept, verbose = [], False
    for arg in argv:
        name, sep, value = arg.partition("=")
        if arg in VERBOSE_FLAGS or (name == "--verbose" and value.lower() == "true"):
            verbose = True
        elif not (name == "--verbose" and sep and value.lower() == "false"):
            kept.append(arg)
    return kept, verbose


def configure(job: str, verbose: bool) -> None:
    """Route the ``continual_synth`` logger's INFO lines to stderr, prefixed with the
    job's name, and set Beam's level (ERROR and above are reported by the command)."""
    global _metrics_missing, _started
    _totals.clear()
    _metrics_missing, _started = False, time.monotonic()
    for handler in list(LOGGER.handlers):
        LOGGER.removeHandler(handler)
    LOGGER.addHandler(monitoring.line_handler(job))
    monitoring.set_command(None if verbose else job)  # its workers' progress lines
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
    logging.getLogger().setLevel(logging.INFO if verbose else logging.ERROR)
    # Beam logs each failing DoFn's traceback at ERROR; the command reports the error
    logging.getLogger("apache_beam").setLevel(logging.NOTSET if verbose else logging.CRITICAL)


def beam_log_args(beam_args: Sequence[str], verbose: bool) -> List[str]:
    """``beam_args`` with the SDK workers' log level (ERROR unless ``verbose``), unless
    the user set it."""
    if verbose or any(arg.startswith(HARNESS_LEVEL_OPTION) for arg in beam_args):
        return list(beam_args)
    return [*beam_args, f"{HARNESS_LEVEL_OPTION}=ERROR"]


def record_metrics(pipeline) -> None:
    """Add the counters of a finished ``beam.Pipeline`` (run by its ``with`` block) to
    the command's totals."""
    global _metrics_missing
    totals = monitoring.counter_totals(pipeline.result)
    if totals is None:
        _metrics_missing = True
        return
    for name, value in totals.items():
        _totals[name] = _totals.get(name, 0) + value


def add_totals(counts: Dict[str, int]) -> None:
    """Add counts made outside a Beam pipeline (a driver-side pass over the input) to
    the command's totals.  They never stand in for a runner's missing metrics: if any
    pipeline of the command reported none, :func:`summary_line` says so instead of
    printing these beside zeros for what the pipelines counted."""
    for name, value in counts.items():
        _totals[name] = _totals.get(name, 0) + int(value)


def summary_line() -> str:
    """``done in 12.3 s: records read 2000, rejected 0, periods released 6, synthetic
    records written 12000``; ``done in 0.8 s`` if no pipeline ran (``evaluate``,
    ``tabular example``); ``done in 5.3 s (this runner reports no Beam metrics)`` if a
    pipeline's runner reported none (Beam's Dask runner), whatever was counted on the
    driver: partial counts would read as zeros."""
    elapsed = f"done in {time.monotonic() - _started:.1f} s"
    if _metrics_missing:
        return f"{elapsed} (this runner reports no Beam metrics)"
    if not _totals:
        return elapsed
    counts = {name: _totals.get(name, 0) for name in monitoring.COUNTERS}
    return (f"{elapsed}: records read {counts[monitoring.RECORDS_READ]}, rejected "
            f"{counts[monitoring.RECORDS_REJECTED]}, periods released "
            f"{counts[monitoring.PERIODS_RELEASED]}, synthetic records written "
            f"{counts[monitoring.SYNTHETIC_RECORDS_WRITTEN]}")


def totals() -> Dict[str, int]:
    """The counters summed so far (empty if no pipeline reported any)."""
    return dict(_totals)
