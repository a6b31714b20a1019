"""The period column's rules, one place for every synthesizer's ``run`` and ``step``.

A record's period t is a whole number held in an integer column (Parquet/Avro integer
types; a CSV column of whole numbers is read as int64): a float column (``2.0``) or a
text column (``"2"``) is refused naming the column and its type, an empty value naming
its row.  A batch without rows holds no periods, whatever its column's type (a
header-only CSV's column has type null): an empty period is valid input to a step.
A run's input holds periods 1..T, T the horizon: a row holding another is refused naming
it (:func:`check_run_periods`).  A step's file holds one period, the next period t of its
state: a row holding another is refused naming it (:func:`check_step_periods`).  Each of
these is a rule about one record (:func:`record_periods`, :func:`periods_out_of_range`):
with ``--invalid-records drop`` a record that breaks one is dropped instead
(:mod:`~continual_synth.transforms.invalid_records`).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from continual_synth.mechanisms.errors import InputError, row_label
from continual_synth.mechanisms.record_checks import REFUSE, Problems

__all__ = ["period_values", "check_run_periods", "check_step_periods", "record_periods",
           "periods_out_of_range"]

#: text that spells a whole number (a CSV period column holding one word is read as text)
WHOLE_NUMBER_TEXT = r"^\s*[+-]?\d+\s*$"


def record_periods(table: pa.Table, period_col: str, where: str, first_row: int,
                   problems: Problems) -> np.ndarray:
    """The periods of a batch (int64), column ``period_col`` of ``table`` (the records of
    file ``where`` from its record ``first_row``, counted from 0, on), with the rows whose
    period is empty or not a whole number added to ``problems``.  A column that is not of
    an integer type is refused whole when ``problems`` refuses (write the periods as
    integers); when it drops, its values are judged one by one (a CSV column's type
    follows from all its cells: one ``2.5`` makes every period a float), a whole number
    (``2.0``, ``"2"``) read as that period.  Invalid rows hold 0."""
    if table.num_rows == 0:  # a header-only CSV's column has type null: no periods
        return np.empty(0, dtype=np.int64)
    column = table.column(period_col)
    if column.null_count:
        count = column.null_count
        problems.add(column.is_null().to_numpy(zero_copy_only=False), lambda row: (
            f"{where}: column {period_col!r} has {count} empty (null) value(s), the first at "
            f"{row_label(row, first_row)}: every record needs its period"),
            lambda row: f"column {period_col!r} is empty: every record needs its period")
    if pa.types.is_integer(column.type):
        periods = (column.fill_null(0) if column.null_count else column).to_numpy() \
            .astype(np.int64, copy=False)
    elif problems.mode == REFUSE:
        raise InputError(f"{where}: column {period_col!r} must hold whole-number periods "
                         f"in an integer column, found type {column.type} (write the "
                         f"periods as integers: 2, not 2.0 or \"2\")")
    else:
        periods, whole = _whole_periods(column)
        problems.add(~whole & ~problems.invalid,
                     lambda row: f"{where}: {row_label(row, first_row)} holds period "
                                 f"{column[row].as_py()!r}, not a whole number",
                     lambda row: f"column {period_col!r}: period {column[row].as_py()!r} is "
                                 f"not a whole number")
    return np.where(problems.invalid, 0, periods) if problems.any() else periods


def periods_out_of_range(periods: np.ndarray, where: str, first_row: int, problems: Problems,
                         horizon: Optional[int] = None, period: Optional[int] = None,
                         period_col: str = "period") -> None:
    """Add to ``problems`` the rows (not already invalid) of a step's batch whose period
    is not ``period``, the next period of its state, or — ``period`` None — of a run's
    batch whose period is not in 1..``horizon`` (1 or more when ``horizon`` is None)."""
    valid = ~problems.invalid if problems.any() else True  # only rows not already invalid
    if period is not None:
        wrong = (periods != period) & valid
        others = int(wrong.sum())
        problems.add(wrong, lambda row: (
            f"{where}: {row_label(row, first_row)} holds period {int(periods[row])}, but "
            f"the next period of this state is {period}"
            + ("" if others == wrong.size else f" ({others} of its {wrong.size} rows here "
                                               f"hold another period than {period})")),
            lambda row: f"column {period_col!r}: period {int(periods[row])}, but the next "
                        f"period of this state is {period}")
        return
    top = np.inf if horizon is None else horizon
    span = "1 or more" if horizon is None else f"1..{horizon} (the horizon T = {horizon})"
    wrong = ((periods < 1) | (periods > top)) & valid
    problems.add(wrong, lambda row: f"{where}: {row_label(row, first_row)} holds period "
                                    f"{int(periods[row])}; periods must be {span}",
                 lambda row: f"column {period_col!r}: period {int(periods[row])}; periods "
                             f"must be {span}")


def _whole_periods(column) -> Tuple[np.ndarray, np.ndarray]:
    """(int64 periods, whether each value is a whole number) of a column that is not of an
    integer type: finite integral floats, text spelling an integer; others 0 and False."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    periods = np.zeros(n, dtype=np.int64)
    if pa.types.is_floating(column.type):
        values = column.to_numpy(zero_copy_only=False).astype(np.float64)
        with np.errstate(invalid="ignore"):
            whole = np.isfinite(values) & (values == np.floor(values)) & (np.abs(values) < 2.0 ** 62)
        periods[whole] = values[whole].astype(np.int64)
    elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        whole = pc.match_substring_regex(column, WHOLE_NUMBER_TEXT).fill_null(False) \
            .to_numpy(zero_copy_only=False)
        spelt = pc.filter(column, pa.array(whole)).to_numpy(zero_copy_only=False)
        try:
            periods[whole] = spelt.astype(np.int64)
        except OverflowError:  # beyond int64: no period of any horizon
            whole = np.zeros(n, dtype=bool)
    else:
        whole = np.zeros(n, dtype=bool)
    return periods, whole


def period_values(table: pa.Table, period_col: str, where: str,
                  first_row: int = 0) -> np.ndarray:
    """The periods of a batch (int64), column ``period_col`` of ``table``, the records of
    file ``where`` from its record ``first_row`` (counted from 0) on; an
    :class:`InputError` for an empty value (its row) or a column that is not of an
    integer type (its type)."""
    return record_periods(table, period_col, where, first_row, Problems(table.num_rows))


def check_step_periods(periods: np.ndarray, period: int, where: str,
                       first_row: int = 0) -> None:
    """Refuse a step's batch whose periods (:func:`period_values`) are not all ``period``,
    the next period of the state, naming the first row that holds another."""
    periods_out_of_range(periods, where, first_row, Problems(periods.size), period=period)


def check_run_periods(periods: np.ndarray, horizon: Optional[int], where: str,
                      first_row: int = 0) -> None:
    """Refuse a run's batch whose periods (:func:`period_values`) are not all in
    1..``horizon`` (1 or more when ``horizon`` is None), naming the first row that holds
    another."""
    periods_out_of_range(periods, where, first_row, Problems(periods.size), horizon=horizon)
