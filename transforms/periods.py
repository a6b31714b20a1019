"""The period column's rules, one place for every synthesizer's ``run`` and ``step``.

A record's period t is a whole number held in an integer column (Parquet/Avro integer
types; a CSV column of whole numbers is read as int64): a float column (``2.0``) or a
text column (``"2"``) is refused naming the column and its type, an empty value naming
its row.  A batch without rows holds no periods, whatever its column's type (a
header-only CSV's column has type null): an empty period is valid input to a step.
A run's input holds periods 1..T, T the horizon: a row holding another is refused naming
it (:func:`check_run_periods`).  A step's file holds one period, the next period t of its
state: a row holding another is refused naming it (:func:`check_step_periods`).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa

from continual_synth.mechanisms.errors import InputError, row_label
from continual_synth.transforms.files import first_null

__all__ = ["period_values", "check_run_periods", "check_step_periods"]


def period_values(table: pa.Table, period_col: str, where: str,
                  first_row: int = 0) -> np.ndarray:
    """The periods of a batch (int64), column ``period_col`` of ``table``, the records of
    file ``where`` from its record ``first_row`` (counted from 0) on; an
    :class:`InputError` for an empty value (its row) or a column that is not of an
    integer type (its type)."""
    if table.num_rows == 0:  # a header-only CSV's column has type null: no periods
        return np.empty(0, dtype=np.int64)
    column = table.column(period_col)
    if column.null_count:
        raise InputError(f"{where}: column {period_col!r} has {column.null_count} empty "
                         f"(null) value(s), the first at "
                         f"{row_label(first_null(column), first_row)}: every record needs "
                         f"its period")
    if not pa.types.is_integer(column.type):
        raise InputError(f"{where}: column {period_col!r} must hold whole-number periods "
                         f"in an integer column, found type {column.type} (write the "
                         f"periods as integers: 2, not 2.0 or \"2\")")
    return column.to_numpy().astype(np.int64, copy=False)


def check_step_periods(periods: np.ndarray, period: int, where: str,
                       first_row: int = 0) -> None:
    """Refuse a step's batch whose periods (:func:`period_values`) are not all ``period``,
    the next period of the state, naming the first row that holds another."""
    wrong = periods != period
    if wrong.any():
        row = int(np.flatnonzero(wrong)[0])
        others = "" if wrong.all() else (f" ({int(wrong.sum())} of its {wrong.size} rows "
                                         f"here hold another period than {period})")
        raise InputError(f"{where}: {row_label(row, first_row)} holds period "
                         f"{int(periods[row])}, but the next period of this state is "
                         f"{period}" + others)


def check_run_periods(periods: np.ndarray, horizon: Optional[int], where: str,
                      first_row: int = 0) -> None:
    """Refuse a run's batch whose periods (:func:`period_values`) are not all in
    1..``horizon`` (1 or more when ``horizon`` is None), naming the first row that holds
    another."""
    top = np.inf if horizon is None else horizon
    wrong = (periods < 1) | (periods > top)
    if wrong.any():
        row = int(np.flatnonzero(wrong)[0])
        span = "1 or more" if horizon is None else f"1..{horizon} (the horizon T = {horizon})"
        raise InputError(f"{where}: {row_label(row, first_row)} holds period "
                         f"{int(periods[row])}; periods must be {span}")
