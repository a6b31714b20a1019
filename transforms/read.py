"""Read stage: files of records into a PCollection of Arrow tables (batches).

Parquet files are read one row group per task (pyarrow), so a large file is read by
many workers at once; CSV and Avro files are read whole per file with pyarrow.csv and
fastavro (one table per file).  No stage handles one Python object per record.  Each
table carries its file and first row (:func:`~continual_synth.transforms.files.
with_origin`), so that a bad record is reported by file and row.

Every file is opened on the driver first (:func:`~continual_synth.transforms.files.
check_dataset`), so an unreadable or empty input, a special file, a column named twice
or a nested column the job reads is refused, naming the file, before a job writes
anything; a file that breaks later (a corrupt page behind a valid footer) is refused
naming the file too.
"""
from __future__ import annotations

from typing import Iterator, Optional, Sequence, Tuple

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq

from continual_synth.mechanisms.errors import InputError
from continual_synth.transforms import storage
from continual_synth.transforms.arrow_coder import TABLE
from continual_synth.transforms.files import (check_dataset, detect_format, parquet_row_groups,
                                              read_file, read_row_group, with_origin)

__all__ = ["ReadRecordBatches", "DEFAULT_BATCH_ROWS", "require_columns", "file_batches"]

#: rows per Arrow batch when a job reads a file in pieces (:func:`file_batches`)
DEFAULT_BATCH_ROWS = 1 << 18


class ReadRecordBatches(beam.PTransform):
    """``PBegin → PCollection[pyarrow.Table]`` for a file or a directory of files."""

    def __init__(self, path: str, fmt: Optional[str] = None, allow_empty: bool = False,
                 string_columns: Sequence[str] = (), columns: Sequence[str] = ()):
        super().__init__()
        # on the driver: refused before any write (``allow_empty``: a period without
        # records; ``columns``: the ones the job reads, which must be flat)
        self._files = check_dataset(path, fmt, allow_empty, columns)
        self._format = detect_format(path, fmt)
        self._strings = tuple(string_columns)  # CSV columns read as text

    @property
    def files(self) -> Tuple[str, ...]:
        """The input's data files, in the order they are read (checked on the driver)."""
        return tuple(self._files)

    def expand(self, pbegin):
        fmt = self._format
        if fmt == "parquet":
            tasks = [(path, group) for path in self._files
                     for group in range(parquet_row_groups(path))]
            # Create reshuffles its elements itself when it has more than one (Beam's
            # MaybeReshuffle), so the row groups are read in parallel without one here
            return (pbegin
                    | "ListRowGroups" >> beam.Create(tasks)
                    | "ReadParquet" >> beam.MapTuple(read_row_group).with_output_types(TABLE))
        return (pbegin
                | "ListFiles" >> beam.Create(self._files)
                | f"Read{fmt.capitalize()}" >> beam.Map(
                    lambda path, strings: with_origin(read_file(path, fmt, strings), path),
                    self._strings).with_output_types(TABLE))


def require_columns(found: Sequence[str], columns: Sequence[str], where: str,
                    option: str = "--columns", hint: Optional[str] = None) -> None:
    """An :class:`InputError` naming the columns missing from ``found`` and the option
    that chooses them (``hint``: what to do instead, where that option cannot be given)."""
    missing = [c for c in columns if c not in found]
    if missing:
        raise InputError(f"{where}: missing column(s) {missing}; found {list(found)} "
                         f"({hint or f'choose them with {option}'})")


def file_batches(path: str, fmt: str, columns: Sequence[str], batch_rows: int,
                 option: str = "--columns", optional: Sequence[str] = (),
                 hint: Optional[str] = None) -> Iterator[Tuple[int, pa.Table]]:
    """(row offset, table) batches of one data file, ``batch_rows`` rows at a time
    (``option``: what chooses ``columns``, for the error naming a missing one, or
    ``hint``: that error's hint; ``optional``: columns read too when the file has them)."""
    if fmt == "parquet":
        with storage.open_read(path) as handle:
            try:
                parquet = pq.ParquetFile(handle)
            except Exception as exc:
                raise InputError(f"{path}: cannot read as parquet: {exc}") from exc
            names = parquet.schema_arrow.names
            require_columns(names, columns, path, option, hint)
            read = list(columns) + [c for c in optional if c in names and c not in columns]
            offset = 0
            for batch in parquet.iter_batches(batch_size=batch_rows, columns=read):
                yield offset, pa.Table.from_batches([batch])
                offset += batch.num_rows
        return
    table = read_file(path, fmt)
    require_columns(table.column_names, columns, path, option, hint)
    for offset in range(0, max(table.num_rows, 1), batch_rows):
        yield offset, table.slice(offset, batch_rows)
