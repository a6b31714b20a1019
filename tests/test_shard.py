"""The shard stage: every record of a person in one shard, the ids narrowed to 32 bits
where they fit (what crosses the shuffle), the values unchanged."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.transforms.shard import (concat_columns, narrow_ints, shard_of,
                                              split_by_shard)


@pytest.mark.parametrize("values, dtype", [
    (np.array([0, 5, 2 ** 31 - 1], dtype=np.int64), np.int32),
    (np.array([-2 ** 31, 7], dtype=np.int64), np.int32),
    (np.array([0, 2 ** 31], dtype=np.int64), np.int64),      # one beyond int32
    (np.array([-2 ** 31 - 1], dtype=np.int64), np.int64),
    (np.array([3, 2 ** 40], dtype=np.uint64), np.uint64),
    (np.array([1, 2], dtype=np.uint64), np.int32),
    (np.array([1, 2], dtype=np.int16), np.int16),            # already narrow
    (np.array(["a", "b"]), np.dtype("<U1")),                 # string ids untouched
    (np.array([], dtype=np.int64), np.int64),
])
def test_narrow_ints_keeps_every_value(values, dtype):
    narrowed = narrow_ints(values)
    assert narrowed.dtype == dtype
    assert narrowed.tolist() == values.tolist()


@pytest.mark.parametrize("read_type", [np.int32, np.uint32, np.int64])
def test_ids_get_back_the_type_they_were_read_with(read_type):
    """The type reaches the shard's history file and its error messages ("the ids are
    float64 here but int64 in period 1"): the user's, never the shuffle's."""
    table = pa.table({"id": np.arange(10, dtype=read_type), "code": np.zeros(10, np.int8)})
    merged = concat_columns(columns for _, columns in split_by_shard(table, 1))
    assert merged["id"].dtype == read_type and merged["id"].tolist() == list(range(10))


def test_split_by_shard_narrows_ids_and_keeps_people_together():
    rng = np.random.default_rng(0)
    small = rng.integers(0, 2 ** 31, size=400)
    large = small[:200] + 2 ** 33          # a second batch beyond 32 bits
    periods = np.tile(np.arange(1, 3, dtype=np.int16), 200)
    batches = [pa.table({"id": np.repeat(ids[:200], 2), "period": periods,
                         "code": np.zeros(400, dtype=np.int8)}) for ids in (small, large)]
    shards = {}
    for batch in batches:
        for shard, columns in split_by_shard(batch, 4):
            shards.setdefault(shard, []).append(columns)
    parts = [columns for pieces in shards.values() for columns in pieces]
    # what crosses the shuffle: the first batch's ids in 32 bits, the second's in 64
    assert {part["id"].dtype for part in parts} == {np.dtype(np.int32), np.dtype(np.int64)}
    for shard, pieces in shards.items():
        merged = concat_columns(pieces)
        assert sorted(merged) == ["code", "id", "period"]
        assert merged["id"].dtype == np.int64    # the type read, whichever crossed
        only_small = concat_columns([pieces[0]])
        assert only_small["id"].dtype == np.int64
        # the shard of every id is the one its 64-bit value hashes to
        assert (shard_of(merged["id"].astype(np.int64), 4) == shard).all()
    every = np.sort(np.concatenate([concat_columns(p)["id"] for p in shards.values()]))
    expected = np.sort(np.concatenate([b.column("id").to_numpy() for b in batches]))
    assert (every == expected).all()


@pytest.mark.parametrize("horizon, period_type", [(12, np.int8), (127, np.int8),
                                                  (128, np.int16), (1000, np.int16)])
def test_validated_periods_are_as_narrow_as_the_horizon_allows(horizon, period_type):
    """What crosses the shuffle with the ids: the validated period, one byte up to 127
    periods; the values are the periods read, up to the last one."""
    from continual_synth.transforms.validate import encode_panel_batch
    periods = np.array([1, horizon // 2 + 1, horizon])
    table = pa.table({"id": [1, 2, 3], "period": periods, "value": ["a", "b", "a"]})
    encoded = encode_panel_batch(table, "id", "period", "value", ["a", "b"], (1, horizon))
    assert encoded.column("period").type == pa.from_numpy_dtype(period_type)
    assert encoded.column("period").to_pylist() == periods.tolist()
