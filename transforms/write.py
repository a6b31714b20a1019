"""Write stage: synthetic record batches to Parquet, CSV or Avro files.

Every batch carries a key (its shard and period) and becomes one file
``<prefix>-<key>.<format>`` opened through Beam's ``FileSystems`` (local disk, GCS,
S3, HDFS …) and encoded with pyarrow (Parquet, CSV) or fastavro (Avro).  Names are
deterministic, so a retried bundle rewrites the same file instead of adding one.

Beam's own sinks (``WriteToParquetBatched`` …) are not used here: their
initialise/write/finalise steps rely on side inputs that Beam's Dask runner
recomputes, which on a local dask.distributed cluster left three temporary
directories and finalised an empty file (Beam 2.77).  The job moves these files
into the release directory only once all of them are written.
"""
from __future__ import annotations

import apache_beam as beam
import pyarrow as pa

from continual_synth.transforms.files import write_file

__all__ = ["write_batch", "WriteRecordBatches"]


def write_batch(table: pa.Table, path: str, fmt: str, schema: pa.Schema) -> str:
    """Write one batch to ``path`` through Beam's FileSystems; return the path."""
    write_file(table.cast(schema), path, fmt)
    return path


class WriteRecordBatches(beam.PTransform):
    """``PCollection[(key, pa.Table)] → PCollection[path]``: one file per non-empty batch."""

    def __init__(self, prefix: str, fmt: str, schema: pa.Schema):
        super().__init__()
        self._prefix, self._format, self._schema = prefix, fmt, schema

    def expand(self, keyed_tables):
        prefix, fmt, schema = self._prefix, self._format, self._schema
        return (keyed_tables
                | "NonEmpty" >> beam.Filter(lambda keyed: keyed[1].num_rows > 0)
                | "WriteFiles" >> beam.MapTuple(
                    lambda key, table: write_batch(table, f"{prefix}-{key}.{fmt}", fmt, schema)))
