"""Beam stages of the tabular stream synthesizer (Kumar, Strohmer and Vershynin 2024).

* :class:`PeriodWorkloadHistograms` — Arrow batches of records → one element per period:
  the exact workload histograms of that period's new records ∇f_t, concatenated.  Each
  batch is encoded against the public domain in one vectorised pass (pyarrow
  ``index_in``), split by period, histogrammed with ``np.bincount`` and summed by a
  CombineFn per period (:class:`WorkloadHistogramsFn`); no stage touches a record as a
  Python object.
* :func:`synthesize_periods` — the synthesizer's state machine folded over periods on one
  worker (its inputs are a few small count vectors per period); noise is drawn here and
  only here, per period, so a batch run and T incremental steps with the same seed make
  the same release.  Each period's emission tasks leave as it is released (one element
  per shard, never all periods in one element).
* :func:`release_tasks` / :func:`emit_table` — every period's synthetic table sampled
  from its fitted model in shards of at most ``ROWS_PER_SHARD`` rows, as Arrow tables
  ``(period, attribute columns…)``.
"""
from __future__ import annotations

import json
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa

from continual_synth.mechanisms.distributions import model_from_dict
from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.record_checks import DROP, REFUSE, Problems
from continual_synth.mechanisms.marginals import (Domain, decode_records, encode_records,
                                                  workload_histograms)
from continual_synth.transforms import packed_json, storage
from continual_synth.transforms.files import accuracy_file_name, table_origin
from continual_synth.transforms.invalid_records import DropSink
from continual_synth.transforms.monitoring import PERIODS_RELEASED, Progress, count
from continual_synth.transforms.read import require_columns
from continual_synth.transforms.periods import periods_out_of_range, record_periods

__all__ = ["ROWS_PER_SHARD", "encode_stream_batch", "split_by_period", "histogram_width",
           "split_histograms", "WorkloadHistogramsFn", "PeriodWorkloadHistograms",
           "synthesize_periods", "of_kind", "table_tasks", "sample_tasks",
           "model_file_tasks", "release_tasks", "sample_rng", "task_codes", "emit_table",
           "synthetic_table", "synthetic_schema", "write_accuracy", "EmitSyntheticTables"]

ROWS_PER_SHARD = 500_000


# ------------------------------------------------------------------------ encoding


def encode_stream_batch(table: pa.Table, domain: Domain, period_col: str,
                        period: Optional[int] = None, horizon: Optional[int] = None,
                        where: str = "input", hint: Optional[str] = None,
                        sink: Optional[DropSink] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``(periods, codes)`` of one batch of records: the period of every row (int64) and
    its attribute codes (n × p).  ``period`` given (an incremental step): a period
    column, if present, must hold that period only.  Otherwise the period column is
    required and must hold integers in 1..``horizon`` (any positive period if None).
    ``hint``: what the error naming a missing attribute column says to do (a step's:
    its state fixes the domain).  The tabular rule about one record: every attribute's
    value in the domain, the period a whole number in range; the first record that breaks
    it refuses the batch, or, given a ``sink`` (drop mode), each such record is left out
    and reported to it.  Missing columns are refused in either mode."""
    where, first_row = table_origin(table, where)
    if hint is not None:
        require_columns(table.column_names, domain.names, where, hint=hint)
    problems = Problems(table.num_rows, REFUSE if sink is None else DROP)
    if period_col not in table.column_names and period is None:
        encode_records(table, domain, where, first_row, problems)  # a missing attribute first
        raise InputError(f"{where}: no period column {period_col!r} (columns: "
                         f"{table.column_names}); pass --period-col")
    codes = encode_records(table, domain, where, first_row, problems)
    if period_col not in table.column_names:
        periods = np.full(table.num_rows, period, dtype=np.int64)
    else:
        periods = record_periods(table, period_col, where, first_row, problems)
        periods_out_of_range(periods, where, first_row, problems, horizon=horizon,
                             period=period, period_col=period_col)
    if problems.any():
        sink.report(problems.entries(table, where, first_row))
        valid = ~problems.invalid
        return periods[valid], codes[valid]
    return periods, codes


def split_by_period(periods: np.ndarray, codes: np.ndarray) -> Iterator[Tuple[int, np.ndarray]]:
    """``(period, codes of that period's rows)`` for every period present in a batch."""
    if periods.size == 0:
        return
    order = np.argsort(periods, kind="stable")
    sorted_periods = periods[order]
    starts = np.flatnonzero(np.r_[True, sorted_periods[1:] != sorted_periods[:-1]])
    ends = np.r_[starts[1:], sorted_periods.size]
    for start, end in zip(starts, ends):
        yield int(sorted_periods[start]), codes[order[start:end]]


# ---------------------------------------------------------------------- histograms


def histogram_width(domain: Domain, workloads: Sequence) -> int:
    """Length of the concatenation of every workload's histogram."""
    return int(sum(domain.size(w) for w in workloads))


def split_histograms(flat: np.ndarray, domain: Domain, workloads: Sequence) -> List[np.ndarray]:
    """The concatenated histograms back into one array per workload."""
    edges = np.cumsum([0] + [domain.size(w) for w in workloads])
    return [flat[edges[i]:edges[i + 1]] for i in range(len(workloads))]


class WorkloadHistogramsFn(beam.CombineFn):
    """Combine code batches of one period into the concatenated workload histograms of
    their records, with the record count in front: ``[n, hist_1 …, hist_m]``."""

    def __init__(self, domain: Domain, workloads: Sequence):
        super().__init__()
        self._domain, self._workloads = domain, list(workloads)

    def create_accumulator(self):
        return np.zeros(1 + histogram_width(self._domain, self._workloads), dtype=np.int64)

    def add_input(self, accumulator, codes):
        accumulator[0] += codes.shape[0]
        accumulator[1:] += np.concatenate(workload_histograms(codes, self._domain,
                                                              self._workloads))
        return accumulator

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        total = next(accumulators).copy()
        for accumulator in accumulators:
            total += accumulator
        return total

    def extract_output(self, accumulator):
        return accumulator


class PeriodWorkloadHistograms(beam.PTransform):
    """``PCollection[pa.Table] → PCollection[(period, [n, histograms…])]``.

    ``period`` (an incremental step) fixes the period of every record; otherwise each
    record's period comes from ``period_col`` and must lie in 1..``horizon``.  ``hint``,
    ``sink`` (drop invalid records into it): see :func:`encode_stream_batch`.
    """

    def __init__(self, domain: Domain, workloads: Sequence, period_col: str = "period",
                 period: Optional[int] = None, horizon: Optional[int] = None,
                 where: str = "input", hint: Optional[str] = None,
                 sink: Optional[DropSink] = None):
        super().__init__()
        self._args = (domain, list(workloads), period_col, period, horizon, where, hint, sink)

    def expand(self, batches):
        domain, workloads, period_col, period, horizon, where, hint, sink = self._args
        return (batches
                | "EncodeAndSplit" >> beam.FlatMap(lambda table: split_by_period(
                    *encode_stream_batch(table, domain, period_col, period, horizon, where,
                                         hint, sink)))
                | "PerPeriod" >> beam.CombinePerKey(WorkloadHistogramsFn(domain, workloads)))


# ---------------------------------------------------------------- synthesizer fold


# the kinds of :func:`synthesize_periods`' output
TASK, ACCURACY, MANIFEST = "task", "accuracy", "manifest"


def synthesize_periods(period_counts: Sequence[Tuple[int, np.ndarray]], synthesizer,
                       seed: Optional[int], horizon: Optional[int] = None,
                       command: Optional[str] = None) -> Iterator:
    """Run the synthesizer over periods 1..T (T = ``horizon`` or the last period with
    records; a period without records is an empty period, released like any other — and
    not listed in the manifest: which periods held no record is not private).

    A generator for a Beam ``FlatMap``: ``(TASK, task)`` for every shard of a period and
    ``(ACCURACY, document)``, its error bounds, as soon as the period is released, then
    ``(MANIFEST, manifest)``, so that no element
    holds all the periods' releases (a fitted model is up to ~1 MB: a thousand periods in
    one element came near the 2 GB limit of Beam's data channel).  One output, split by
    :func:`of_kind` (Beam's Dask runner does not split tagged outputs).  ``command``:
    whose progress lines a worker process prints (:func:`monitoring.command`).
    """
    by_period = {int(p): np.asarray(c) for p, c in period_counts}
    if not by_period:
        raise InputError("the stream holds no records")
    last = horizon or max(by_period)
    empty = np.zeros(1 + synthesizer.histogram_width, dtype=np.int64)
    periods = ((t, by_period.get(t, empty)[1:]) for t in range(1, last + 1))
    state = synthesizer.initial_state()
    progress = Progress(last, "periods done", command=command)
    for state, release, _ in synthesizer.fold(periods, seed):
        count(PERIODS_RELEASED, 1)
        for task in release_tasks(release):
            yield TASK, task
        yield ACCURACY, release.accuracy
        progress.advance()
    yield MANIFEST, synthesizer.manifest(state)


def of_kind(kind: str):
    """``FlatMap`` function keeping the values of one kind of ``(kind, value)`` pairs."""
    def keep(item):
        if item[0] == kind:
            yield item[1]
    return keep


# ------------------------------------------------------------------------ emission


def table_tasks(period: int, codes: np.ndarray) -> List[Tuple]:
    """The shards of records already sampled (the baseline's increment ∇g_t): each task
    carries its rows."""
    return [(period, shard, stop - start, ("codes", codes[start:stop]))
            for shard, (start, stop) in enumerate(_row_shards(codes.shape[0]))]


def sample_tasks(release) -> List[Tuple]:
    """The shards of a table to sample from a fitted distribution (g_t, Algorithm 3)."""
    return [(release.period, shard, stop - start,
             ("model", release.model, release.emission_seed))
            for shard, (start, stop) in enumerate(_row_shards(release.size))]


def model_file_tasks(period: int, rows: int, model_path: str,
                     emission_seed: int) -> List[Tuple]:
    """The shards of a table to sample from a fitted distribution whose ``to_dict`` is
    saved at ``model_path`` (:mod:`packed_json`): what a step's emission pipeline carries, so that
    the model (up to 10^5 clique values) is read from a file by the shard that samples
    it rather than pickled into the pipeline (Beam compresses ``Create``'s values with
    bz2: seconds for such a model)."""
    return [(period, shard, stop - start, ("model_file", model_path, emission_seed))
            for shard, (start, stop) in enumerate(_row_shards(rows))]


def release_tasks(release) -> List[Tuple]:
    """The shards of one period's synthetic table, as ``(period, shard, rows, source)``.
    The proposed method releases the whole table g_t each period: its shards sample
    ``rows`` records from the fitted distribution.  The baseline releases increments
    ∇g_t, already sampled, each once (appended: the table at t is every increment up to
    t): its shards carry their rows."""
    if release.increment:
        return table_tasks(release.period, release.codes)
    return sample_tasks(release)


def _row_shards(size: int) -> List[Tuple[int, int]]:
    size = int(size)
    return [(start, min(start + ROWS_PER_SHARD, size))
            for start in range(0, size, ROWS_PER_SHARD)] or [(0, 0)]


def sample_rng(emission_seed: int, period: int, shard: int) -> np.random.Generator:
    """Post-processing randomness of one shard of one period's sample: the same model,
    seed and shard always give the same records (a re-emitted period reproduces them)."""
    return np.random.default_rng([int(emission_seed), int(period), int(shard)])


def task_codes(task: Tuple, domain: Domain) -> np.ndarray:
    """The attribute codes of one emission task's records."""
    period, shard, rows, source = task
    if source[0] == "codes":
        return source[1]
    if rows == 0:
        return np.zeros((0, len(domain.names)), dtype=np.int32)
    model = source[1]
    if source[0] == "model_file":
        model = model_from_dict(packed_json.loads(storage.read_bytes(model)), domain)
    return model.sample(rows, sample_rng(source[2], period, shard))


def emit_table(task: Tuple, domain: Domain, period_col: str = "period") -> Tuple[str, pa.Table]:
    """One shard of one period's synthetic table: ``(file key, Arrow table)``."""
    period, shard = task[0], task[1]
    codes = task_codes(task, domain)
    return f"t{period:04d}-s{shard:03d}", synthetic_table(codes, period, domain, period_col)


def synthetic_table(codes: np.ndarray, period: int, domain: Domain,
                    period_col: str = "period") -> pa.Table:
    columns = {period_col: pa.array(np.full(codes.shape[0], period, dtype=np.int32))}
    columns.update(decode_records(codes, domain))
    return pa.table(columns)


def synthetic_schema(domain: Domain, period_col: str = "period") -> pa.Schema:
    """Schema of the released tables: the period, then the attribute columns (typed as
    the domain's values; nullable only where the domain lists null)."""
    fields = [pa.field(period_col, pa.int32(), nullable=False)]
    for name in domain.names:
        values = list(domain.values[name])
        kind = pa.array([v for v in values if v is not None] or [None]).type
        if pa.types.is_null(kind):
            kind = pa.string()
        fields.append(pa.field(name, kind, nullable=None in values))
    return pa.schema(fields)


def write_accuracy(folder: str, document: Dict) -> str:
    """Write one period's accuracy document into ``folder`` (``accuracy-tTTTT.json``);
    return its path."""
    path = storage.join(folder, accuracy_file_name(document["period"]))
    storage.write_bytes(path, (json.dumps(document, indent=1) + "\n").encode("utf-8"))
    return path


class EmitSyntheticTables(beam.PTransform):
    """``PCollection[emission task] → PCollection[(key, pa.Table)]``, one per shard."""

    def __init__(self, domain: Domain, period_col: str = "period"):
        super().__init__()
        self._args = (domain, period_col)

    def expand(self, tasks):
        domain, period_col = self._args
        return (tasks
                | "Reshuffle" >> beam.Reshuffle()
                | "Sample" >> beam.Map(emit_table, domain, period_col))
