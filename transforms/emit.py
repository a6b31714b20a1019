"""Emission stage: every shard of synthetic people draws its own records from the plan.

A shard holds a contiguous range of synthetic ids; it creates its people at t = k
(periods 1..k) and extends them every later period, as Algorithm 1 prescribes,
following its slice of the plan.  Records leave as Arrow tables
``(synthetic_id int64, period int32, value)``, one per shard and period.
"""
from __future__ import annotations

import os
from typing import Dict, Iterator, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa

from continual_synth.mechanisms.emission import ShardPeople, shard_rng


def records_table(ids: np.ndarray, period: int, codes: np.ndarray, alphabet: Sequence) -> pa.Table:
    """Synthetic records of one period: ids, the period, and alphabet values."""
    values = np.asarray(list(alphabet))[codes]
    return pa.table({"synthetic_id": pa.array(ids, pa.int64()),
                     "period": pa.array(np.full(ids.size, period, dtype=np.int32)),
                     "value": pa.array(values)})


def batch_key(shard: int, period: int) -> str:
    """Name of one shard's records of one period (becomes part of a file name)."""
    return f"t{period:04d}-s{shard:05d}"


def create_shard(shard: int, plan: Dict, alphabet: Sequence, window: int):
    """Shard ``shard``'s people at t = k and their keyed records for periods 1..k."""
    first_id = int(np.sum(plan["shard_sizes"][:shard]))
    people, values = ShardPeople.create(first_id, plan["plans"][window][shard], len(alphabet),
                                        window, shard_rng(plan["emission_seeds"][window], window, shard))
    tables = [(batch_key(shard, period),
               records_table(people.ids, period, values[:, period - 1], alphabet))
              for period in range(1, window + 1)]
    return people, tables


def extend_shard(people: ShardPeople, shard: int, period: int, plan: Dict,
                 alphabet: Sequence, window: int) -> Tuple[str, pa.Table]:
    """Extend shard ``shard``'s people by one period and return its keyed records."""
    values = people.extend(plan["plans"][period][shard], len(alphabet), window,
                           shard_rng(plan["emission_seeds"][period], period, shard))
    return batch_key(shard, period), records_table(people.ids, period, values, alphabet)


def emit_shard_panel(shard: int, plan: Dict, alphabet: Sequence, window: int,
                     horizon: int) -> Iterator[Tuple[str, pa.Table]]:
    """All released periods of one shard (batch mode)."""
    people, tables = create_shard(shard, plan, alphabet, window)
    yield from tables
    for period in range(window + 1, horizon + 1):
        yield extend_shard(people, shard, period, plan, alphabet, window)


class EmitSyntheticPanel(beam.PTransform):
    """``plan (singleton PCollection) → PCollection[(key, pa.Table)]`` of synthetic records."""

    def __init__(self, num_shards: int, alphabet: Sequence, window: int, horizon: int):
        super().__init__()
        self._args = (num_shards, tuple(alphabet), window, horizon)

    def expand(self, plan):
        num_shards, alphabet, window, horizon = self._args
        return (plan.pipeline
                | "Shards" >> beam.Create(range(num_shards))
                | "Reshuffle" >> beam.Reshuffle()
                | "EmitShard" >> beam.FlatMap(
                    lambda shard, plan: emit_shard_panel(shard, plan, alphabet, window, horizon),
                    plan=beam.pvalue.AsSingleton(plan)))


def synthetic_path(state_dir: str, version: int, shard: int) -> str:
    """Where shard ``shard`` keeps its synthetic people's window codes after ``version``."""
    return os.path.join(state_dir, "synthetic", f"v{version:04d}", f"shard-{shard:05d}.npy")
