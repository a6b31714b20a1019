"""Validate stage: check columns and domains of panel batches and encode values.

Each output batch is an Arrow table with columns ``id`` (as given), ``period``
(int8, int16 beyond 127 periods) and ``code`` (int8 alphabet index).  An invalid record
(:func:`validate_panel_batch`) raises :class:`~continual_synth.mechanisms.errors.InputError`
naming the column, the value and the row, before anything is written — or, with
``--invalid-records drop``, is dropped alone (:mod:`~continual_synth.transforms.
invalid_records`).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa

from continual_synth.mechanisms.errors import InputError, row_label
from continual_synth.mechanisms.record_checks import DROP, REFUSE, Problems
from continual_synth.mechanisms.panel import encode_values
from continual_synth.transforms.arrow_coder import TABLE
from continual_synth.transforms.files import table_origin
from continual_synth.transforms.invalid_records import ORIGIN_FILE, ORIGIN_ROW, DropSink
from continual_synth.transforms.monitoring import counting_rejections
from continual_synth.transforms.periods import periods_out_of_range, record_periods

__all__ = ["encode_panel_batch", "validate_panel_batch", "drop_invalid_panel_records",
           "ValidatePanelBatches"]


def encode_panel_batch(table: pa.Table, id_col: str, period_col: Optional[str],
                       value_col: str, alphabet: Sequence, period_range: Sequence[int],
                       where: str = "input") -> pa.Table:
    """Validated ``(id, period, code)`` table; ``period_col`` None means the whole
    batch belongs to the single period ``period_range[0]``, else its periods must be
    1..T, ``period_range`` = (1, T).  The first invalid record is an error."""
    return validate_panel_batch(table, id_col, period_col, value_col, alphabet,
                                period_range, where)[0]


def validate_panel_batch(table: pa.Table, id_col: str, period_col: Optional[str],
                         value_col: str, alphabet: Sequence, period_range: Sequence[int],
                         where: str = "input", mode: str = REFUSE,
                         step_period_col: Optional[str] = None,
                         files: Sequence[str] = ()) -> Tuple[pa.Table, Problems]:
    """The panels' rule about one record, and the batch's valid records encoded:
    ``((id, period, code) table, the problems found)``.  A record is invalid if its id or
    value is empty, its value is not in the alphabet (text for a numeric alphabet, NaN,
    inf, 0.5 …) or its period is not a whole number in ``period_range`` (``period_col``;
    None: the batch is the single period ``period_range[0]``, whose file may still hold
    the period in ``step_period_col``, which must then be that period).  ``mode`` refuse:
    the first invalid record's error; drop: the invalid records are left out of the
    table, which then also carries each record's origin (:data:`ORIGIN_FILE`, the file's
    position in ``files``, and :data:`ORIGIN_ROW`) for the records a shard drops later.
    Missing columns are refused in either mode."""
    source, first_row = table_origin(table, where)
    needed = [c for c in (id_col, period_col, value_col) if c]
    missing = [c for c in needed if c not in table.column_names]
    if missing:
        raise InputError(f"{source}: missing column(s) {missing}; found {table.column_names} "
                         f"(use --id-col/--period-col/--value-col)")
    problems = Problems(table.num_rows, mode)
    first, last = period_range
    if step_period_col and step_period_col in table.column_names:
        periods_out_of_range(record_periods(table, step_period_col, source, first_row,
                                            problems),
                             source, first_row, problems, period=first,
                             period_col=step_period_col)
    ids = table.column(id_col)
    values = table.column(value_col)
    for name, column in ((id_col, ids), (value_col, values)):
        if column.null_count:
            count = column.null_count
            problems.add(column.is_null().to_numpy(zero_copy_only=False),
                         lambda row, name=name, count=count: (
                             f"{source}: column {name!r} has {count} empty value(s), the "
                             f"first at {row_label(row, first_row)}"),
                         lambda row, name=name: f"column {name!r} is empty")
    if period_col:
        periods = record_periods(table, period_col, source, first_row, problems)
        periods_out_of_range(periods, source, first_row, problems, horizon=last,
                             period_col=period_col)
    else:
        periods = np.full(table.num_rows, first)
    value_array = values.to_numpy(zero_copy_only=False)
    codes = encode_values(value_array, alphabet, where=f"{source}, column {value_col!r}",
                          first_row=first_row, problems=problems)
    period_type = np.int8 if last <= np.iinfo(np.int8).max else np.int16  # less to shuffle
    encoded = {"id": ids, "period": pa.array(periods.astype(period_type)),
               "code": pa.array(codes)}
    if mode == REFUSE:
        return pa.table(encoded), problems
    index = {path: position for position, path in enumerate(files)}
    encoded[ORIGIN_FILE] = pa.array(np.full(table.num_rows, index.get(source, -1), np.int32))
    encoded[ORIGIN_ROW] = pa.array(np.arange(first_row + 1, first_row + 1 + table.num_rows,
                                             dtype=np.int64))
    valid = pa.array(~problems.invalid)
    return pa.table(encoded).filter(valid), problems


def drop_invalid_panel_records(table: pa.Table, sink: DropSink, files: Sequence[str],
                               *args, **kwargs) -> pa.Table:
    """:func:`validate_panel_batch` in drop mode, the invalid records reported to
    ``sink``: the batch's valid records."""
    valid, problems = validate_panel_batch(table, *args, mode=DROP, files=files, **kwargs)
    if problems.any():
        sink.report(problems.entries(table, *table_origin(table, kwargs.get("where", "input"))))
    return valid


class ValidatePanelBatches(beam.PTransform):
    """``PCollection[pa.Table] → PCollection[pa.Table(id, period, code)]``: the first
    invalid record refuses the job, or, given a ``sink`` (drop mode), each invalid record
    is dropped and reported to it (``files``: the input's data files, which the records'
    origin names)."""

    def __init__(self, id_col: str, period_col: Optional[str], value_col: str,
                 alphabet: Sequence, period_range: Sequence[int], where: str = "input",
                 sink: Optional[DropSink] = None, files: Sequence[str] = ()):
        super().__init__()
        self._args = (id_col, period_col, value_col, tuple(alphabet), tuple(period_range), where)
        self._sink, self._files = sink, tuple(files)

    def expand(self, batches):
        args = self._args
        nonempty = batches | "DropEmpty" >> beam.Filter(lambda table: table.num_rows > 0)
        if self._sink is None:
            return nonempty | "Encode" >> beam.Map(counting_rejections(encode_panel_batch),
                                                   *args).with_output_types(TABLE)
        sink, files = self._sink, self._files
        id_col, period_col, value_col, alphabet, period_range, where = args
        return nonempty | "EncodeValid" >> beam.Map(
            lambda table: drop_invalid_panel_records(
                table, sink, files, id_col, period_col, value_col, alphabet, period_range,
                where=where)).with_output_types(TABLE)
