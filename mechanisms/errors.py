"""Errors that the jobs turn into clear messages, and the checks of public parameters.

Every rule for a parameter is written here once and used by the configs
(``WindowConfig``, ``CumulativeConfig``, ``TabularConfig``, ``PrivHPConfig``) and by the
command line's argument types (:mod:`continual_synth.pipelines.commands.options`), so the same
value is refused with the same words wherever it enters.
"""
from __future__ import annotations

import math
import numbers
import re
from typing import Optional

__all__ = ["MAX_NOISE_RECORDS", "InputError", "row_label", "StateError", "StateBusy",
           "ParameterError", "positive_real", "MAX_BUDGET", "privacy_budget", "probability",
           "whole_number", "check_noise_records", "format_bytes", "PeriodError",
           "check_next_period", "one_line", "ENVIRONMENT_EXIT", "environment_fault"]


# The most records a release may write for its noise alone, whatever its input (Algorithm 1's
# padding people, Algorithm 2's noisy population, a tabular stream's noisy table size):
# 10M people x 12 periods, the largest release the benchmarks run (its memory:
# bench/results/dask_scaling.md).  Noise beyond it buries any panel: a window run of 300
# people at rho = 1e-12 would write 1.7e8 records, and at 1e-15 run out of memory.
MAX_NOISE_RECORDS = 10_000_000 * 12


class InputError(ValueError):
    """Bad input: the message says what is wrong and where.  Nothing has been written."""


def row_label(index, first_row: int = 0) -> str:
    """``'row 12'``: where a bad record is, counted from 1 in its file (row 1 is the
    file's first record; a CSV's header line is not a row).  ``index`` is the record's
    position in a batch whose first record is the file's record ``first_row`` (counted
    from 0, as :func:`continual_synth.transforms.files.table_origin` gives it)."""
    return f"row {int(index) + int(first_row) + 1}"


class StateError(RuntimeError):
    """A state directory that is missing, mismatched or asked for an impossible step."""


class StateBusy(StateError):
    """Another step owns the state right now (nothing was read or written)."""


class ParameterError(InputError):
    """A bad public parameter.  ``option`` is its name (``rho``, ``n_pad``); the command
    line shows it as the option that set it (``--rho``, ``--n-pad``)."""

    def __init__(self, option: str, problem: str):
        self.option, self.problem = option, problem
        super().__init__(f"{option} {problem}")

    def __reduce__(self):  # picklable with its two arguments (Beam ships exceptions)
        return type(self), (self.option, self.problem)

    def for_command_line(self) -> str:
        return f"--{self.option.replace('_', '-')} {self.problem}"


def positive_real(option: str, value) -> float:
    """A finite number > 0 (ρ, ε): zero, negative, NaN and ±inf are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not (value > 0 and math.isfinite(value)):
        raise ParameterError(option, f"must be positive and finite, got {value!r}")
    return float(value)


#: The largest privacy budget (ε or ρ) a mechanism takes.  Its noise is already nil (a
#: scale of 1/ε records), and from about 10^154 the variances square it past a float;
#: from about 10^308 the per-level and per-counter scales underflow to 0.  Before this
#: limit, ``tabular run --epsilon 1e160`` failed mid-run with an OverflowError (exit 1),
#: ``cumulative run --rho 1.7e308`` said "the privacy budget must be ... finite, got inf"
#: and ``privhp run --epsilon 1.7e308`` "scale must be a positive finite number".
MAX_BUDGET = 1e100


def privacy_budget(option: str, value) -> float:
    """A privacy budget (ε, ρ): :func:`positive_real`, and at most :data:`MAX_BUDGET`."""
    value = positive_real(option, value)
    if value > MAX_BUDGET:
        raise ParameterError(option, f"{value:g} is too large: at most {MAX_BUDGET:g}, whose "
                                     f"noise is already nil")
    return value


def probability(option: str, value) -> float:
    """A number in the open interval (0, 1) (β, δ, a share of the budget)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < 1:
        raise ParameterError(option, f"must be in (0, 1), got {value!r}")
    return float(value)


def whole_number(option: str, value, minimum: int = 1) -> int:
    """An integer ≥ ``minimum`` (a horizon, a count of shards, a seed with minimum 0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ParameterError(option, f"must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_noise_records(option: str, value: float, records: float, what: str,
                        smallest: float) -> None:
    """Refuse a budget ``option`` = ``value`` whose noise alone would have a release write
    ``records`` records, above :data:`MAX_NOISE_RECORDS` (``what`` says which: "n_pad = 7
    padding people in each of 8 bins over 12 periods"); ``smallest``: the least value
    of ``option`` that fits."""
    if records <= MAX_NOISE_RECORDS:
        return
    raise ParameterError(option, f"{value:g} is too small: its noise alone ({what}) would "
                                 f"write {records:.3g} records; at most "
                                 f"{MAX_NOISE_RECORDS:.3g} fit: use --{option.replace('_', '-')} "
                                 f">= {smallest:.3g}")


def format_bytes(size: float) -> str:
    """``8796093022208`` → ``'8 TiB'`` (for memory estimates in messages)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024 or unit == "EiB":
            return f"{size:.3g} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class PeriodError(StateError, ValueError):
    """A period a state cannot take: beyond the horizon or out of order."""


def check_next_period(period: int, last_seen: int, horizon: Optional[int]) -> None:
    """Refuse a period beyond the horizon (None: an open one) or out of order: every
    synthesizer's rule (:class:`PeriodError`)."""
    if horizon is not None and period > horizon:
        raise PeriodError(f"period {period} is beyond the horizon T={horizon}")
    if period != last_seen + 1:
        raise PeriodError(f"period {period} is out of order: the state has seen periods "
                          f"1..{last_seen}, so the next period is {last_seen + 1}")


def one_line(error) -> str:
    """An error (or its message) as one line: without Beam's stage label
    (`` [while running 'Stage']``), a multi-line message joined."""
    text = re.sub(r" \[while running '[^']*'\]", "", str(error)).strip()
    return re.sub(r"\s*\n\s*", " ", text)


#: the exit status of a job stopped by its environment (no space, no permission, an I/O
#: error, a store that timed out): nothing was published; run it again once it is fixed
ENVIRONMENT_EXIT = 3

#: what an operating-system error number means for the operator
_ENVIRONMENT = {28: "no space left on the device", 122: "disk quota exceeded",
                13: "permission denied", 1: "operation not permitted",
                30: "read-only file system", 5: "input/output error",
                110: "the store did not answer in time", 24: "too many open files",
                12: "out of memory", 111: "the store refused the connection"}


def environment_fault(error: BaseException):
    """One line for an error the environment caused (an ``OSError``, also as Beam wraps
    one raised in a pipeline stage: ``RuntimeError('OSError: [Errno 28] … [while running
    …]')``), or None for any other error."""
    seen = error
    while seen is not None:
        if isinstance(seen, OSError) and not isinstance(seen, BrokenPipeError):
            code, text = seen.errno, seen.strerror or str(seen)
            where = seen.filename
            break
        match = re.search(r"(?:OSError|IOError|\w+Error): \[Errno (\d+)\] ([^:\[]+)"
                          r"(?:: '([^']*)')?", str(seen))
        if match:
            code, text, where = int(match.group(1)), match.group(2).strip(), match.group(3)
            break
        seen = seen.__cause__ or seen.__context__
    else:
        return None
    what = _ENVIRONMENT.get(code, text.lower() if text else "an error of the system")
    place = f" writing or reading {where}" if where else ""
    return (f"{what}{place} (errno {code}); fix it and run the same command again: it "
            f"goes on from where it stopped (a step's committed period is published "
            f"without being charged twice; a run publishes all or nothing) "
            f"(exit {ENVIRONMENT_EXIT})")
