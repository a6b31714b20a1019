"""Statistics stage: per-shard pivots of the panel into the synthesizer's statistic,
summed over shards — Algorithm 1's window histograms C^t ("the count of individuals
that have suffix s"), Algorithm 2's threshold counts z_b^t.

Batch form (:class:`ComputePanelStatistics`): each shard pivots all its people over periods
1..T.  Incremental form (:func:`step_shard_statistics`): each shard joins one period's
reports with its people's codes (last k−1 values; weights) kept in the state directory
(the job names the files).
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from continual_synth.mechanisms.errors import InputError
from continual_synth.transforms.invalid_records import ORIGIN_FILE, ORIGIN_ROW, DropSink
from continual_synth.mechanisms.panel import count_scope, pivot_people, shown
from continual_synth.transforms import storage
from continual_synth.transforms.files import write_parquet

__all__ = ["dictionary_encode", "SumArrays", "ShardDrops", "shown_value",
           "shard_statistics", "ComputePanelStatistics", "step_shard_statistics"]


def dictionary_encode(ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(distinct ids in first-seen order, index of each record's id among them)``."""
    encoded = pa.array(ids).dictionary_encode()
    return (encoded.dictionary.to_numpy(zero_copy_only=False),
            encoded.indices.to_numpy(zero_copy_only=False))


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


class ShardDrops:
    """Where a shard reports the records it drops in drop mode (an id that reports twice
    in a period, an id new after period 1): the job's sink, the input's data files (the
    records' :data:`ORIGIN_FILE` indexes them) and the panel's column names."""

    def __init__(self, sink: DropSink, files: Sequence[str], columns):
        self.sink, self.files = sink, tuple(files)
        self.id_col, self.period_col, self.value_col = (columns.id_col, columns.period_col,
                                                        columns.value_col)

    def report(self, columns: Dict[str, np.ndarray], mask: np.ndarray, alphabet: Sequence,
               reason: Callable[[int], str], period: Optional[int] = None) -> None:
        """Report the records ``mask`` selects among a shard's ``columns`` (``reason(r)``:
        why record r is dropped; ``period``: the step's, when the columns hold none)."""
        entries = []
        for r in np.flatnonzero(mask):
            origin = int(columns[ORIGIN_FILE][r])
            record_period = int(columns["period"][r]) if "period" in columns else period
            entries.append({
                "file": self.files[origin] if 0 <= origin < len(self.files) else "input",
                "row": int(columns[ORIGIN_ROW][r]), "reason": reason(int(r)),
                "record": {self.id_col: shown_value(columns["id"][r]),
                           self.period_col: record_period,
                           self.value_col: alphabet[int(columns["code"][r])]}})
        self.sink.report(entries)


def shown_value(value):
    """A numpy scalar as the plain Python value a JSON document holds."""
    return value.item() if isinstance(value, np.generic) else value


def _keep(columns: Dict[str, np.ndarray], keep: np.ndarray) -> Dict[str, np.ndarray]:
    """A shard's columns without the records ``keep`` leaves out."""
    return {name: column[keep] for name, column in columns.items()}


def shard_statistics(columns: Dict[str, np.ndarray], model, missing_code: Optional[int],
                     where: str = "panel", num_shards: int = 1,
                     dropped: Optional[ShardDrops] = None) -> np.ndarray:
    """[number of people, statistics of periods 1..T flattened]: one shard's contribution.

    The ids are dictionary-encoded by hash (Arrow), O(n) in any row order: panels arrive
    grouped by period with ids in no order, where sorting them (``np.unique``) would
    cost O(n log n) and most of the stage.  ``dropped`` (drop mode): an id's reports in a
    period where it reports more than once are all dropped and reported to it (the
    person has no report that period), instead of refusing the panel."""
    people, person = dictionary_encode(columns["id"])
    if dropped is not None:
        cell = person.astype(np.int64) * model.horizon + (columns["period"].astype(np.int64) - 1)
        _, inverse, counts = np.unique(cell, return_inverse=True, return_counts=True)
        twice = counts[inverse] > 1
        if twice.any():
            dropped.report(columns, twice, model.alphabet, lambda r: (
                f"id {shown(columns['id'][r])} reports {int(counts[inverse[r]])} times in "
                f"period {int(columns['period'][r])}: all its reports there are dropped"))
            columns = _keep(columns, ~twice)
            people, person = dictionary_encode(columns["id"])
    matrix = pivot_people(people, person, columns["period"], columns["code"], 1,
                          model.horizon, missing_code=missing_code, where=where,
                          scope=count_scope(num_shards))
    return np.concatenate([[matrix.shape[0]], model.panel_statistics(matrix).reshape(-1)])


class ComputePanelStatistics(beam.PTransform):
    """``PCollection[(shard, columns)] → PCollection[(num_people, T × width array)]`` with a
    single element: the synthesizer's statistic of every period, summed over shards."""

    def __init__(self, synthesizer, missing_code: Optional[int] = None, where: str = "panel",
                 num_shards: int = 1, dropped: Optional[ShardDrops] = None):
        super().__init__()
        self.synthesizer, self.missing_code, self.where = synthesizer, missing_code, where
        self.num_shards, self.dropped = num_shards, dropped

    def expand(self, shards):
        model, fill, where, num_shards, dropped = (self.synthesizer, self.missing_code,
                                                   self.where, self.num_shards, self.dropped)
        return (shards
                | "ShardStatistics" >> beam.MapTuple(
                    lambda _, columns: shard_statistics(columns, model, fill, where,
                                                        num_shards, dropped))
                | "SumShards" >> beam.CombineGlobally(SumArrays()).without_defaults()
                | "Unpack" >> beam.Map(lambda flat: (int(flat[0]), flat[1:].reshape(
                    model.horizon, model.stat_width))))


def step_shard_statistics(shard: int, columns: Optional[Dict[str, np.ndarray]], model,
                          period: int, history_before: Optional[str], history_after: str,
                          missing_code: Optional[int], source: Optional[str] = None,
                          num_shards: int = 1,
                          dropped: Optional[ShardDrops] = None) -> Tuple[int, np.ndarray]:
    """Join one period's reports of one shard with the shard's history (the Parquet
    file ``history_before``; None at period 1).

    Writes the shard's new history to ``history_after`` and returns (people, the
    period's statistic).  Period 1 defines who is in the panel; afterwards an unknown
    id, a duplicate or a missing report is an error naming the id (and ``source``, the
    input, if given).  ``dropped`` (drop mode): the reports of an id that reports more
    than once, and of an id new after period 1, are dropped and reported to it instead
    (the person then has no report: ``missing_code``).
    """
    where = f"{source} (period {period})" if source else f"period {period}"
    scope = count_scope(num_shards)
    if columns is None:
        columns = {"id": np.zeros(0, dtype=np.int64), "code": np.zeros(0, dtype=np.int8)}
    ids, codes = columns["id"], columns["code"]
    unique_ids, first_index, inverse, counts = np.unique(ids, return_index=True,
                                                         return_inverse=True,
                                                         return_counts=True)
    if dropped is not None and (counts > 1).any():
        twice = counts[inverse] > 1
        dropped.report(columns, twice, model.alphabet, lambda r: (
            f"id {shown(ids[r])} reports {int(counts[inverse[r]])} times in period "
            f"{period}: all its reports there are dropped"), period)
        columns = _keep(columns, ~twice)
        ids, codes = columns["id"], columns["code"]
        unique_ids, first_index, counts = np.unique(ids, return_index=True,
                                                    return_counts=True)
    if (counts > 1).any():
        bad = unique_ids[np.flatnonzero(counts > 1)[0]]
        raise InputError(f"{where}: id {shown(bad)} reports more than once "
                         f"({int((counts > 1).sum())} duplicated id(s) {scope})")
    codes = codes[first_index]
    if period == 1:
        people, history = unique_ids, np.zeros(unique_ids.size, dtype=np.int64)
    else:
        with storage.open_read(history_before) as handle:
            old = pq.read_table(handle)
        people = old.column("id").to_numpy(zero_copy_only=False)
        history = old.column("code").to_numpy()
        kinds = {people.dtype.kind, ids.dtype.kind}
        if unique_ids.size and len(kinds) > 1 and not kinds <= set("iu"):  # 7.0 is not 7
            raise InputError(f"{where}: the ids are {ids.dtype} here but {people.dtype} in "
                             f"period 1 (write the id column with one type in every "
                             f"period)")
        position = np.clip(np.searchsorted(people, unique_ids), 0, max(people.size - 1, 0))
        known = people.size > 0
        unknown = ~(people[position] == unique_ids) if known else np.ones(unique_ids.size, bool)
        if dropped is not None and unknown.any():
            new = np.isin(ids, unique_ids[unknown])
            dropped.report(columns, new, model.alphabet, lambda r: (
                f"id {shown(ids[r])} did not report in period 1 (the panel's people are "
                f"fixed by period 1)"), period)
            position, unique_ids, codes = (position[~unknown], unique_ids[~unknown],
                                           codes[~unknown])
            unknown = unknown[~unknown]
        if unknown.any():
            raise InputError(f"{where}: id {shown(unique_ids[np.flatnonzero(unknown)[0]])} did not "
                             f"report in period 1; {int(unknown.sum())} unknown id(s) "
                             f"{scope} "
                             f"(the panel's people are fixed by period 1)")
        full = np.full(people.size, -1, dtype=np.int16)
        full[position] = codes
        if (full < 0).any():
            if missing_code is None:
                raise InputError(f"{where}: id {shown(people[np.flatnonzero(full < 0)[0]])} has no "
                                 f"report; {int((full < 0).sum())} missing report(s) "
                                 f"{scope} (pass --missing-value to fill them)")
            full[full < 0] = missing_code
        codes = full.astype(np.int8)
    new_history, statistics = model.advance(history, codes.astype(np.int64), period)
    with storage.create(history_after) as handle:
        write_parquet(pa.table({"id": people, "code": new_history}), handle)
    return int(people.size), statistics
