"""Read stage: files of records into a PCollection of Arrow tables (batches).

Parquet goes through Beam's ``ReadAllFromParquetBatched`` (pyarrow, one table per
row group).  CSV and Avro files are read whole per file with pyarrow.csv and
fastavro (one table per file), so no stage handles one Python object per record.
"""
from __future__ import annotations

from typing import Optional

import apache_beam as beam
from apache_beam.io.parquetio import ReadAllFromParquetBatched

from continual_synth.transforms.files import detect_format, list_data_files, read_file


class ReadRecordBatches(beam.PTransform):
    """``PBegin → PCollection[pyarrow.Table]`` for a file, a directory or a list of files."""

    def __init__(self, path: str, fmt: Optional[str] = None):
        super().__init__()
        self._files = list_data_files(path)
        self._format = detect_format(path, fmt)

    def expand(self, pbegin):
        files = pbegin | "ListFiles" >> beam.Create(self._files)
        if self._format == "parquet":
            return files | "ReadParquet" >> ReadAllFromParquetBatched()
        fmt = self._format
        return files | f"Read{fmt.capitalize()}" >> beam.Map(lambda path: read_file(path, fmt))
