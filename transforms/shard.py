"""Shard stage: split batches by a stable hash of the person id.

All of one person's records land in the same shard, so a shard can pivot its
people without seeing any other shard.  Integer ids are hashed vectorised with the
splitmix64 finaliser; other ids (strings) through BLAKE2b of each distinct id in
the batch.  Both are stable across processes, machines and runs.
"""
from __future__ import annotations

from typing import Dict, Iterable, Iterator, Tuple

import apache_beam as beam
import numpy as np
import hashlib

import pyarrow as pa

__all__ = ["shard_of", "ID_TYPE", "split_by_shard", "narrow_ints", "concat_columns",
           "GroupByShard"]


def shard_of(ids: np.ndarray, num_shards: int) -> np.ndarray:
    """Shard index of each id (stable: the same id always maps to the same shard)."""
    ids = np.asarray(ids)
    if ids.dtype.kind in "iub":
        hashed = _splitmix64(ids.astype(np.int64).view(np.uint64))
    else:
        distinct, inverse = np.unique(ids.astype(str), return_inverse=True)
        hashed = np.array([int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(),
                                          "little") for v in distinct], dtype=np.uint64)[inverse]
    return (hashed % np.uint64(num_shards)).astype(np.int64)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a bijective, well-mixed 64-bit hash."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


#: the key of the empty array whose type is the ids' own while they cross the shuffle
#: narrowed (:func:`narrow_ints`); :func:`concat_columns` gives the ids that type back
ID_TYPE = "id type"


def split_by_shard(table: pa.Table, num_shards: int) -> Iterator[Tuple[int, Dict[str, np.ndarray]]]:
    """``(shard, columns)`` pairs covering ``table``'s rows, each a dict of compact
    numpy copies.  (Pickling an Arrow slice would ship its parent's whole buffers.)
    The ids travel as 32-bit integers when they fit (:func:`narrow_ints`), with
    :data:`ID_TYPE` to restore their type."""
    columns = {name: table.column(name).to_numpy(zero_copy_only=False)
               for name in table.column_names}
    shard = shard_of(columns["id"], num_shards)
    id_type = columns["id"][:0]
    columns["id"] = narrow_ints(columns["id"])
    if num_shards <= np.iinfo(np.uint16).max:  # numpy's stable sort of 16-bit ints is a radix sort
        shard = shard.astype(np.uint16)
    order = np.argsort(shard, kind="stable")
    bounds = np.searchsorted(shard[order], np.arange(num_shards + 1))
    ordered = {name: column[order] for name, column in columns.items()}
    for j in range(num_shards):
        if bounds[j + 1] > bounds[j]:
            yield j, {**{name: column[bounds[j]:bounds[j + 1]].copy()
                         for name, column in ordered.items()}, ID_TYPE: id_type}


def narrow_ints(values: np.ndarray) -> np.ndarray:
    """64-bit integers as 32-bit ones when every value fits (the same values; other
    arrays unchanged).  The ids cross the shuffle between reading and the shards'
    statistics: with 4 bytes for the id instead of 8, a record (id, int8 period, int8
    code) is 6 bytes to encode, copy and decode instead of 10, which lowers a large
    ``window run``'s time and peak memory (bench/results/dask_scaling.md)."""
    if (values.dtype.kind in "iu" and values.dtype.itemsize > 4 and values.size
            and values.min() >= np.iinfo(np.int32).min
            and values.max() <= np.iinfo(np.int32).max):
        return values.astype(np.int32)
    return values


def concat_columns(parts: Iterable[Dict[str, np.ndarray]]) -> Dict[str, np.ndarray]:
    """One dict of columns from several; narrowed ids get back the type the parts' ids
    had (:data:`ID_TYPE`: the type the concatenation of the ids as read would have)."""
    parts = list(parts)
    merged = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
    if ID_TYPE in merged:
        merged["id"] = merged["id"].astype(merged.pop(ID_TYPE).dtype, copy=False)
    return merged


class GroupByShard(beam.PTransform):
    """``PCollection[pa.Table] → PCollection[(shard, {column: numpy array})]``, one
    element per non-empty shard."""

    def __init__(self, num_shards: int):
        super().__init__()
        self._num_shards = num_shards

    def expand(self, batches):
        num_shards = self._num_shards
        return (batches
                | "SplitByShard" >> beam.FlatMap(lambda table: split_by_shard(table, num_shards))
                | "GroupByShard" >> beam.GroupByKey()
                | "ConcatShard" >> beam.MapTuple(lambda shard, parts: (shard, concat_columns(parts))))
