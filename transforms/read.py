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

from typing import Optional, Sequence, Tuple

import apache_beam as beam

from continual_synth.transforms.arrow_coder import TABLE
from continual_synth.transforms.files import (check_dataset, detect_format, parquet_row_groups,
                                              read_file, read_row_group, with_origin)

__all__ = ["ReadRecordBatches"]


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
