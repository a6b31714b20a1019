"""Emission stage: every shard of synthetic people draws its own records from the plan.

A shard holds a contiguous range of synthetic ids; it creates its people when the
plan says so (Algorithm 1: at t = k, carrying periods 1..k; Algorithm 2: at t = 1)
and extends them every period after, following its slice of the plan.  Records leave as Arrow tables
``(synthetic_id int64, period int32, value)``, one per shard and period.
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa

from continual_synth.mechanisms.emission import ShardPeople, shard_rng
from continual_synth.transforms.arrow_coder import TABLE

__all__ = ["records_table", "batch_key", "emit_shard_period", "emit_shard_panel",
           "EmitSyntheticPanel"]


def records_table(ids: np.ndarray, period: int, codes: np.ndarray, alphabet: Sequence) -> pa.Table:
    """Synthetic records of one period: ids, the period, and alphabet values."""
    values = np.asarray(list(alphabet))[codes]
    return pa.table({"synthetic_id": pa.array(ids, pa.int64()),
                     "period": pa.array(np.full(ids.size, period, dtype=np.int32)),
                     "value": pa.array(values)})


def batch_key(shard: int, period: int) -> str:
    """Name of one shard's records of one period (becomes part of a file name)."""
    return f"t{period:04d}-s{shard:05d}"


def emit_shard_period(people: Optional[ShardPeople], shard: int, period: int, plan: Dict,
                      model) -> Tuple[ShardPeople, List[Tuple[str, pa.Table]]]:
    """One shard's records of one period: create its people if the plan says so (with the
    values they carry from creation), then extend them by the period's values."""
    period_plan = plan["plans"][period]
    rng = shard_rng(plan["emission_seeds"][period], period, shard)
    tables = []
    if "initial" in period_plan:
        first_id = int(np.sum(plan["shard_sizes"][:shard]))
        people, created = ShardPeople.create(first_id, period_plan["initial"][shard],
                                             model.codes, rng)
        first = period - created.shape[1] + 1
        tables += [(batch_key(shard, first + j),
                    records_table(people.ids, first + j, created[:, j], model.alphabet))
                   for j in range(created.shape[1])]
    if "extension" in period_plan:
        values = people.extend(period_plan["extension"][shard], rng)
        tables.append((batch_key(shard, period),
                       records_table(people.ids, period, values, model.alphabet)))
    return people, tables


def emit_shard_panel(shard: int, plan: Dict, model) -> Iterator[Tuple[str, pa.Table]]:
    """All released periods of one shard (batch mode)."""
    people = None
    for period in sorted(plan["plans"]):
        people, tables = emit_shard_period(people, shard, period, plan, model)
        yield from tables


class EmitSyntheticPanel(beam.PTransform):
    """``plan (singleton PCollection) → PCollection[(key, pa.Table)]`` of synthetic records."""

    def __init__(self, num_shards: int, synthesizer):
        super().__init__()
        self.num_shards, self.synthesizer = num_shards, synthesizer

    def expand(self, plan):
        # the (small) plan travels with each shard's key, not as a side input: Beam's Dask
        # runner recomputes a side input's whole upstream (read, shard, pivot) in every task
        # that reads it.  Grouping by shard puts the shards where the runner puts keys,
        # so their emission is spread over the workers (on Dask: shard mod partitions).
        num_shards, model = self.num_shards, self.synthesizer
        return (plan
                | "PlanPerShard" >> beam.FlatMap(
                    lambda p: ((shard, p) for shard in range(num_shards)))
                | "GroupByShard" >> beam.GroupByKey()
                | "EmitShard" >> beam.FlatMapTuple(
                    lambda shard, plans: emit_shard_panel(shard, next(iter(plans)), model)
                ).with_output_types(Tuple[str, TABLE]))
