"""Write stage: synthetic record batches to Parquet, CSV or Avro with Beam's sinks.

Parquet: ``WriteToParquetBatched`` (pyarrow, one row group per batch).  CSV:
``WriteToText`` with one CSV chunk per batch and a header.  Avro:
``WriteToAvro`` (fastavro), which takes one dict per record.
"""
from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.avroio import WriteToAvro
from apache_beam.io.parquetio import WriteToParquetBatched
from apache_beam.io.textio import WriteToText

from continual_synth.transforms.files import avro_schema, table_to_csv_text


class WriteRecordBatches(beam.PTransform):
    """``PCollection[pa.Table] → files <prefix>-SSSSS-of-NNNNN.<format>``."""

    def __init__(self, prefix: str, fmt: str, schema: pa.Schema):
        super().__init__()
        self._prefix, self._format, self._schema = prefix, fmt, schema

    def expand(self, tables):
        prefix, schema = self._prefix, self._schema
        if self._format == "parquet":
            return tables | "WriteParquet" >> WriteToParquetBatched(
                prefix, schema=schema, file_name_suffix=".parquet")
        if self._format == "csv":
            return (tables
                    | "NonEmpty" >> beam.Filter(lambda table: table.num_rows > 0)
                    | "ToCsvText" >> beam.Map(lambda table: table_to_csv_text(table, header=False))
                    | "WriteCsv" >> WriteToText(prefix, file_name_suffix=".csv",
                                                header=",".join(schema.names)))
        return (tables
                | "ToRecords" >> beam.FlatMap(lambda table: table.to_pylist())
                | "WriteAvro" >> WriteToAvro(prefix, schema=avro_schema(schema),
                                             file_name_suffix=".avro"))
