"""Read stage: files of records into a PCollection of Arrow tables (batches).

Parquet goes through Beam's ``ReadAllFromParquetBatched`` (pyarrow, one table per
row group).  CSV and Avro files are read whole per file with pyarrow.csv and
fastavro (one table per file), so no stage handles one Python object per record.
Every file is opened on the driver first (:func:`~continual_synth.transforms.files.
check_dataset`), so an unreadable or empty input is refused, naming the file, before a
job writes anything.
"""
from __future__ import annotations

from typing import Optional

import apache_beam as beam
from apache_beam.io.parquetio import ReadAllFromParquetBatched

from continual_synth.transforms.files import check_dataset, detect_format, read_file


class ReadRecordBatches(beam.PTransform):
    """``PBegin → PCollection[pyarrow.Table]`` for a file, a directory or a list of files."""

    def __init__(self, path: str, fmt: Optional[str] = None):
        super().__init__()
        self._files = check_dataset(path, fmt)  # on the driver: refused before any write
        self._format = detect_format(path, fmt)

    def expand(self, pbegin):
        files = pbegin | "ListFiles" >> beam.Create(self._files)
        if self._format == "parquet":
            return files | "ReadParquet" >> ReadAllFromParquetBatched()
        fmt = self._format
        return files | f"Read{fmt.capitalize()}" >> beam.Map(lambda path: read_file(path, fmt))
