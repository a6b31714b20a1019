"""Window-histogram stage: per-shard pivots of the panel into C^t (Bun et al. 2024,
Alg. 1, "calculate the count of individuals that have suffix s"), summed over shards.

Batch form (:class:`PanelWindowHistograms`): each shard pivots all its people over
periods 1..T and counts every k-window; the result is a (T−k+1) × |A|^k array.
Incremental form (:func:`step_shard_histogram`): each shard joins one period's
reports with its people's last k−1 values kept in the state directory.
"""
from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.panel import advance_suffix, pivot, shown, window_histograms
from continual_synth.mechanisms.window import WindowConfig


class SumArrays(beam.CombineFn):
    """Element-wise sum of equally shaped numpy arrays (histograms, counts)."""

    def create_accumulator(self):
        return None

    def add_input(self, accumulator, array):
        return np.array(array, copy=True) if accumulator is None else accumulator + array

    def merge_accumulators(self, accumulators):
        total = None
        for accumulator in accumulators:
            if accumulator is not None:
                total = accumulator if total is None else total + accumulator
        return total

    def extract_output(self, accumulator):
        return accumulator


def shard_window_histograms(columns: Dict[str, np.ndarray], config: WindowConfig,
                            missing_code: Optional[int], where: str = "panel") -> np.ndarray:
    """[number of people, C^k, …, C^T flattened]: one shard's contribution."""
    _, matrix = pivot(columns["id"], columns["period"], columns["code"],
                      1, config.horizon, missing_code=missing_code, where=where)
    counts = window_histograms(matrix, config.alphabet_size, config.window)
    return np.concatenate([[matrix.shape[0]], counts.reshape(-1)])


class PanelWindowHistograms(beam.PTransform):
    """``PCollection[(shard, columns)] → PCollection[(num_people, (T−k+1) × |A|^k array)]``
    with a single element."""

    def __init__(self, config: WindowConfig, missing_code: Optional[int] = None,
                 where: str = "panel"):
        super().__init__()
        self._args = (config, missing_code, where)

    def expand(self, shards):
        args = self._args
        config = args[0]
        return (shards
                | "ShardHistograms" >> beam.MapTuple(
                    lambda _, columns: shard_window_histograms(columns, *args))
                | "SumShards" >> beam.CombineGlobally(SumArrays()).without_defaults()
                | "Unpack" >> beam.Map(lambda flat: (int(flat[0]), flat[1:].reshape(
                    config.num_updates, config.num_bins))))


def history_path(state_dir: str, version: int, shard: int) -> str:
    """Where shard ``shard`` keeps its people's last k−1 values after period ``version``."""
    return os.path.join(state_dir, "history", f"v{version:04d}", f"shard-{shard:05d}.parquet")


def step_shard_histogram(shard: int, columns: Optional[Dict[str, np.ndarray]],
                         config: WindowConfig,
                         period: int, state_dir: str, missing_code: Optional[int]
                         ) -> Tuple[int, np.ndarray]:
    """Join one period's reports of one shard with the shard's history.

    Writes the shard's new history (version ``period``) and returns (people, C^t or zeros
    before t = k).  Period 1 defines who is in the panel; afterwards an unknown id, a
    duplicate or a missing report is an error naming the id.
    """
    where = f"period {period}"
    if columns is None:
        columns = {"id": np.zeros(0, dtype=np.int64), "code": np.zeros(0, dtype=np.int8)}
    ids, codes = columns["id"], columns["code"]
    unique_ids, first_index, counts = np.unique(ids, return_index=True, return_counts=True)
    if (counts > 1).any():
        bad = unique_ids[np.flatnonzero(counts > 1)[0]]
        raise InputError(f"{where}: id {shown(bad)} reports more than once "
                         f"({int((counts > 1).sum())} duplicated id(s))")
    codes = codes[first_index]
    if period == 1:
        people, suffix = unique_ids, np.zeros(unique_ids.size, dtype=np.int64)
    else:
        old = pq.read_table(history_path(state_dir, period - 1, shard))
        people = old.column("id").to_numpy(zero_copy_only=False)
        suffix = old.column("suffix").to_numpy()
        position = np.clip(np.searchsorted(people, unique_ids), 0, max(people.size - 1, 0))
        known = people.size > 0
        unknown = ~(people[position] == unique_ids) if known else np.ones(unique_ids.size, bool)
        if unknown.any():
            raise InputError(f"{where}: id {shown(unique_ids[np.flatnonzero(unknown)[0]])} did not "
                             f"report in period 1; {int(unknown.sum())} unknown id(s) "
                             f"(the panel's people are fixed by period 1)")
        full = np.full(people.size, -1, dtype=np.int16)
        full[position] = codes
        if (full < 0).any():
            if missing_code is None:
                raise InputError(f"{where}: id {shown(people[np.flatnonzero(full < 0)[0]])} has no "
                                 f"report; {int((full < 0).sum())} missing report(s) "
                                 f"(pass --missing-value to fill them)")
            full[full < 0] = missing_code
        codes = full.astype(np.int8)
    window_codes, new_suffix = advance_suffix(suffix, codes, config.alphabet_size, config.window)
    out_path = history_path(state_dir, period, shard)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    pq.write_table(pa.table({"id": people, "suffix": new_suffix}), out_path)
    histogram = (np.bincount(window_codes, minlength=config.num_bins) if period >= config.window
                 else np.zeros(config.num_bins, dtype=np.int64))
    return int(people.size), histogram
