"""Validate stage: check columns and domains of panel batches and encode values.

Each output batch is an Arrow table with columns ``id`` (as given), ``period``
(int8, int16 beyond 127 periods) and ``code`` (int8 alphabet index).  Problems raise
:class:`~continual_synth.mechanisms.errors.InputError` naming the column, the value
and the row, before anything is written.
"""
from __future__ import annotations

from typing import Optional, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa

from continual_synth.mechanisms.errors import InputError, row_label
from continual_synth.mechanisms.panel import encode_values
from continual_synth.transforms.arrow_coder import TABLE
from continual_synth.transforms.files import first_null, table_origin
from continual_synth.transforms.monitoring import counting_rejections
from continual_synth.transforms.periods import check_run_periods, period_values


def encode_panel_batch(table: pa.Table, id_col: str, period_col: Optional[str],
                       value_col: str, alphabet: Sequence, period_range: Sequence[int],
                       where: str = "input") -> pa.Table:
    """Validated ``(id, period, code)`` table; ``period_col`` None means the whole
    batch belongs to the single period ``period_range[0]``, else its periods must be
    1..T, ``period_range`` = (1, T)."""
    where, first_row = table_origin(table, where)
    needed = [c for c in (id_col, period_col, value_col) if c]
    missing = [c for c in needed if c not in table.column_names]
    if missing:
        raise InputError(f"{where}: missing column(s) {missing}; found {table.column_names} "
                         f"(use --id-col/--period-col/--value-col)")
    ids = table.column(id_col)
    values = table.column(value_col)
    for name, column in ((id_col, ids), (value_col, values)):
        if column.null_count:
            row = first_null(column)
            raise InputError(f"{where}: column {name!r} has {column.null_count} empty value(s), "
                             f"the first at {row_label(row, first_row)}")
    first, last = period_range
    if period_col:
        periods = period_values(table, period_col, where, first_row)
        check_run_periods(periods, last, where, first_row)
    else:
        periods = np.full(table.num_rows, first)
    value_array = values.to_numpy(zero_copy_only=False)
    codes = encode_values(value_array, alphabet, where=f"{where}, column {value_col!r}",
                          first_row=first_row)
    period_type = np.int8 if last <= np.iinfo(np.int8).max else np.int16  # less to shuffle
    return pa.table({"id": ids, "period": pa.array(periods.astype(period_type)),
                     "code": pa.array(codes)})


class ValidatePanelBatches(beam.PTransform):
    """``PCollection[pa.Table] → PCollection[pa.Table(id, period, code)]``."""

    def __init__(self, id_col: str, period_col: Optional[str], value_col: str,
                 alphabet: Sequence, period_range: Sequence[int], where: str = "input"):
        super().__init__()
        self._args = (id_col, period_col, value_col, tuple(alphabet), tuple(period_range), where)

    def expand(self, batches):
        args = self._args
        return (batches
                | "DropEmpty" >> beam.Filter(lambda table: table.num_rows > 0)
                | "Encode" >> beam.Map(counting_rejections(encode_panel_batch),
                                       *args).with_output_types(TABLE))
