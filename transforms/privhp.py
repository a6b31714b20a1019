"""Beam stages of the bounded-memory synthesizer (PrivHP, Holland et al. 2025).

::

    files ─ ReadPointBatches (Arrow batches → validated n × d arrays in [0,1]^d)
          ─ BuildPrivHP (CombineFn: per-bundle exact tree + sketches, merged by addition)
          ─ ReleasePrivHP (one worker: the synthesizer's step — noise once, growth,
                           consistency, ε charged)
          ─ SampleSyntheticPoints (the grown tree sent to one task per shard)
          ─ WriteRecordBatches

Records move as Arrow batches and numpy arrays (``batch_rows`` rows each), never one
Python object per point.  The CombineFn's accumulator is the *exact* PrivHP state
(:class:`~continual_synth.mechanisms.privhp.PrivHPAccumulator`): fixed-size integer
arrays whose size never depends on the number of points, merged by addition; no noise
is ever added to a partial accumulator.  Noise is added once, in ReleasePrivHP, by
:meth:`~continual_synth.mechanisms.privhp_synthesizer.PrivHPSynthesizer.step` (the
protocol of :mod:`continual_synth.mechanisms.synthesizer`).
"""
from __future__ import annotations

from typing import Iterator, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from continual_synth.mechanisms import privhp
from continual_synth.mechanisms.errors import InputError, row_label
from continual_synth.mechanisms.record_checks import DROP, REFUSE, Problems
from continual_synth.mechanisms.hierarchy import Bounds, check_points
from continual_synth.mechanisms.privhp_synthesizer import PrivHPState, PrivHPSynthesizer
from continual_synth.mechanisms.synthesizer import PointsRelease
from continual_synth.transforms import storage
from continual_synth.transforms.files import check_dataset, detect_format
from continual_synth.transforms.invalid_records import DropSink
from continual_synth.transforms.periods import periods_out_of_range, record_periods
from continual_synth.transforms.read import DEFAULT_BATCH_ROWS, file_batches, require_columns

__all__ = ["state_hints", "table_points", "NUMBER_TEXT", "read_point_batches", "batch_points",
           "ReadPointBatches", "PrivHPCombineFn", "BuildPrivHP", "release_once",
           "ReleasePrivHP", "save_tree", "load_tree", "shard_table", "point_schema",
           "SampleSyntheticPoints"]

def state_hints(columns: Sequence[str], bounds: Bounds) -> Tuple[str, str]:
    """The hints of a step's missing column and out-of-bounds point: ``step`` takes no
    ``--columns``, ``--bounds`` or ``--clip`` (its state keeps those ``init`` was given),
    so the hint is that a new state is needed, not to pass them."""
    remake = "a new state ('privhp init') is needed to change them"
    box = ",".join(f"{lo:g}:{hi:g}" for lo, hi in zip(bounds.low, bounds.high))
    return (f"the state was made with --columns {','.join(columns)}: {remake}",
            f"the state was made with --bounds {box} and without --clip: {remake}")


def table_points(table: pa.Table, columns: Sequence[str], where: str,
                 row_offset: int = 0, problems: Optional[Problems] = None) -> np.ndarray:
    """The n × d float64 array of ``columns``; an :class:`InputError` for a missing or
    non-numeric column or an empty cell (naming the column and the row).  Given
    ``problems`` that drop, an empty cell is added to them, and a text column's cells
    are read one by one (a CSV column's type follows from all its cells: one word makes
    every coordinate text), a cell that is not a number added to them; invalid cells hold
    NaN."""
    require_columns(table.column_names, columns, where)
    problems = Problems(table.num_rows) if problems is None else problems
    out = np.empty((table.num_rows, len(columns)), dtype=np.float64)
    for j, name in enumerate(columns):
        column = table.column(name)
        numeric = pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
        text = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        if not numeric and (problems.mode == REFUSE or not text):
            raise InputError(f"{where}: column {name!r} must be numeric, found type "
                             f"{column.type}")
        if column.null_count:
            problems.add(column.is_null().to_numpy(zero_copy_only=False),
                         lambda row, name=name: (f"{where}: column {name!r} has an empty "
                                                 f"value at {row_label(row, row_offset)}"),
                         lambda row, name=name: f"column {name!r} is empty")
        if numeric:
            out[:, j] = column.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            continue
        number = pc.match_substring_regex(column, NUMBER_TEXT).fill_null(False) \
            .to_numpy(zero_copy_only=False)
        problems.add(~number & ~problems.invalid,
                     lambda row, column=column, name=name: (
                         f"{where}: column {name!r} value {column[row].as_py()!r} at "
                         f"{row_label(row, row_offset)} is not a number"),
                     lambda row, column=column, name=name: (
                         f"column {name!r} value {column[row].as_py()!r} is not a number"))
        out[:, j] = np.nan
        out[number, j] = pc.cast(pc.filter(column, pa.array(number)), pa.float64()) \
            .to_numpy(zero_copy_only=False)
    return out


#: text that reads as a number (with a sign, a decimal point, an exponent)
NUMBER_TEXT = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"


def read_point_batches(path: str, fmt: str, columns: Sequence[str], bounds: Bounds,
                       clip: bool, batch_rows: int = DEFAULT_BATCH_ROWS,
                       step_period: Optional[Tuple[str, int]] = None,
                       sink: Optional[DropSink] = None) -> Iterator[Tuple[np.ndarray, int]]:
    """(points scaled to [0,1]^d, number clipped) per batch of one file, validated.
    ``step_period``: ``(period column, t)`` of a step ingesting period t, whose file's
    period column, if it has one, must hold t only (:mod:`~continual_synth.transforms.
    periods`), whose state fixes the columns and bounds (the errors' hints say so).  The
    points' rule about one record: every coordinate a finite number within the bounds
    (or clipped onto them), the period, if any, the step's; the first point that breaks
    it refuses the file, or, given a ``sink`` (drop mode), each such point is left out and
    reported to it.  Missing columns are refused in either mode."""
    period_col = [step_period[0]] if step_period else []
    columns_hint = state_hints(columns, bounds)[0] if step_period else None
    for offset, table in file_batches(path, fmt, columns, batch_rows, optional=period_col,
                                      hint=columns_hint):
        if table.num_rows == 0:  # a header-only file (file_batches checked its columns)
            continue
        yield batch_points(table, columns, bounds, clip, path, offset, step_period, sink)


def batch_points(table: pa.Table, columns: Sequence[str], bounds: Bounds, clip: bool,
                 where: str, offset: int = 0, step_period: Optional[Tuple[str, int]] = None,
                 sink: Optional[DropSink] = None) -> Tuple[np.ndarray, int]:
    """(points scaled to [0,1]^d, number clipped) of one batch of records, by the points'
    rule about one record (see :func:`read_point_batches`): the batch's first invalid
    point refuses it, or, given a ``sink``, each one is left out and reported to it
    (``where`` and ``offset``: the batch's file and first row)."""
    period_col = [step_period[0]] if step_period else []
    bounds_hint = state_hints(columns, bounds)[1] if step_period else None
    problems = Problems(table.num_rows, REFUSE if sink is None else DROP)
    if period_col and period_col[0] in table.column_names:
        periods_out_of_range(record_periods(table, period_col[0], where, offset, problems),
                             where, offset, problems, period=step_period[1],
                             period_col=period_col[0])
    points = table_points(table, columns, where, offset, problems)
    unit, clipped = check_points(points, bounds, columns, clip, where=where,
                                 row_offset=offset, hint=bounds_hint, problems=problems)
    if problems.any():
        sink.report(problems.entries(table, where, offset))
        unit = unit[~problems.invalid]
    return unit, clipped


class ReadPointBatches(beam.PTransform):
    """``PBegin → PCollection[(n × d array in [0,1]^d, clipped count)]`` (``step_period``,
    ``sink``: see :func:`read_point_batches`)."""

    def __init__(self, path: str, columns: Sequence[str], bounds: Bounds, clip: bool = False,
                 fmt: Optional[str] = None, batch_rows: int = DEFAULT_BATCH_ROWS,
                 allow_empty: bool = False, step_period: Optional[Tuple[str, int]] = None,
                 sink: Optional[DropSink] = None):
        super().__init__()
        # on the driver: refused before any write (``allow_empty``: a period without points)
        self._files = check_dataset(path, fmt, allow_empty,
                                    list(columns) + ([step_period[0]] if step_period else []))
        self._format = detect_format(path, fmt)
        self._args = (list(columns), bounds, bool(clip), int(batch_rows), step_period, sink)

    def expand(self, pbegin):
        fmt = self._format
        columns, bounds, clip, batch_rows, step_period, sink = self._args
        return (pbegin
                | "ListFiles" >> beam.Create(self._files)
                | "Reshuffle" >> beam.Reshuffle()
                | "ReadValidate" >> beam.FlatMap(
                    lambda path: read_point_batches(path, fmt, columns, bounds, clip,
                                                    batch_rows, step_period, sink)))


class PrivHPCombineFn(beam.CombineFn):
    """Exact PrivHP state of a PCollection of point batches (Holland et al. Algorithm 1's
    pass).  Accumulators are fixed-size integer arrays; merging adds them; no noise."""

    def __init__(self, config: privhp.PrivHPConfig, counted: Optional[Sequence[int]] = None):
        super().__init__()
        self._config, self._counted = config, counted

    def create_accumulator(self):
        return privhp.PrivHPAccumulator(self._config, counted=self._counted)

    def add_input(self, accumulator, element):
        unit_points, clipped = element
        accumulator.add_unit_points(unit_points)
        accumulator.clipped += int(clipped)
        return accumulator

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        total = next(accumulators).copy()
        for accumulator in accumulators:
            total.merge(accumulator)
        return total

    def extract_output(self, accumulator):
        return accumulator


class BuildPrivHP(beam.PTransform):
    """``PCollection[(points, clipped)] → PCollection[PrivHPAccumulator]`` (one element):
    the exact combine, no noise — the statistics of the synthesizer's step (``counted``:
    the sketch levels to fill, see :class:`~continual_synth.mechanisms.privhp.
    PrivHPAccumulator`)."""

    def __init__(self, config: privhp.PrivHPConfig, counted: Optional[Sequence[int]] = None):
        super().__init__()
        self._config, self._counted = config, counted

    def expand(self, batches):
        return batches | "Combine" >> beam.CombineGlobally(
            PrivHPCombineFn(self._config, self._counted))


def release_once(accumulator: privhp.PrivHPAccumulator, synthesizer: PrivHPSynthesizer,
                 seed: Optional[int]) -> Tuple[PrivHPState, PointsRelease]:
    """The synthesizer's one step from its initial state (runs on one worker)."""
    state, release, _ = synthesizer.step_period(synthesizer.initial_state(), 1, accumulator, seed)
    return state, release


class ReleasePrivHP(beam.PTransform):
    """``PCollection[PrivHPAccumulator] → PCollection[(PrivHPState, PointsRelease)]`` (one
    element): noise once, growth and consistency, ε charged in the state's ledger."""

    def __init__(self, synthesizer: PrivHPSynthesizer, seed: Optional[int] = None):
        super().__init__()
        self._synthesizer, self._seed = synthesizer, seed

    def expand(self, statistics):
        return statistics | "Step" >> beam.Map(release_once, self._synthesizer, self._seed)


def save_tree(tree: privhp.PrivHPTree, path: str) -> None:
    """A grown tree as one ``.npz`` file (per level θ, counts, children)."""
    arrays = {"meta": np.array([tree.dims, tree.depth, len(tree.thetas)])}
    for i, (theta, count, child) in enumerate(zip(tree.thetas, tree.counts, tree.children)):
        arrays.update({f"theta{i}": theta, f"count{i}": count, f"child{i}": child})
    storage.save_arrays(path, **arrays)


def load_tree(path: str) -> privhp.PrivHPTree:
    """The tree :func:`save_tree` saved at ``path``."""
    data = storage.load_arrays(path)
    dims, depth, levels = (int(v) for v in data["meta"])
    return privhp.PrivHPTree(dims, depth, [data[f"theta{i}"] for i in range(levels)],
                             [data[f"count{i}"] for i in range(levels)],
                             [data[f"child{i}"] for i in range(levels)])


def shard_table(release: PointsRelease, num_shards: int, shard: int, bounds: Bounds,
                columns: Sequence[str]) -> pa.Table:
    """Shard ``shard``'s synthetic points in the input's units and column names (the
    release's ``tree``: a grown tree, or the path :func:`save_tree` saved one at)."""
    tree = load_tree(release.tree) if isinstance(release.tree, str) else release.tree
    unit = privhp.sample_shard(tree, release.size, num_shards, shard,
                               release.emission_seed)
    points = bounds.from_unit(unit)
    return pa.table({name: pa.array(points[:, j]) for j, name in enumerate(columns)})


def point_schema(columns: Sequence[str]) -> pa.Schema:
    return pa.schema([(name, pa.float64()) for name in columns])


class SampleSyntheticPoints(beam.PTransform):
    """``PCollection[(PrivHPState, PointsRelease)] → PCollection[(shard key, pa.Table)]``:
    the release's ``size`` points split over ``num_shards`` shards, each drawn from the
    grown tree with its own generator.

    The release travels to the shards as the *main input* (one task element per shard,
    each carrying the tree), not as a side input, and ``on_release`` (e.g. saving the
    manifest; called with the state and the release) runs as one more task of the same
    collection: every consumer sees the one release computed once, even on a runner that
    recomputes side inputs (a recomputed release would draw fresh noise: two trees, twice
    the privacy cost).

    The shard key is ``sSSSSS``; with ``by_period`` it is ``tNNNN-sSSSSS`` (the
    release's period), so that one pipeline can sample and write the releases of many
    periods (continual PrivHP's ``run --horizon``); their trees are then best given as
    the paths of saved trees (:func:`save_tree`), each read by the shard's task, so that
    the shuffle holds T × S paths, not T × S trees."""

    def __init__(self, num_shards: int, bounds: Bounds, columns: Sequence[str],
                 on_release=None, by_period: bool = False):
        super().__init__()
        self.num_shards = int(num_shards)
        self.bounds = bounds
        self.columns = list(columns)
        self.on_release = on_release
        self.by_period = bool(by_period)

    def expand(self, released):
        num_shards, bounds, columns = self.num_shards, self.bounds, self.columns
        on_release, by_period = self.on_release, self.by_period

        def tasks(stepped):
            yield from ((shard, stepped) for shard in range(num_shards))
            if on_release is not None:
                yield -1, stepped

        def run(task):
            shard, (state, release) = task
            if shard < 0:
                on_release(state, release)
                return
            key = f"t{release.period:04d}-s{shard:05d}" if by_period else f"s{shard:05d}"
            yield key, shard_table(release, num_shards, shard, bounds, columns)

        return (released
                | "ShardTasks" >> beam.FlatMap(tasks)
                | "Reshuffle" >> beam.Reshuffle()
                | "Sample" >> beam.FlatMap(run))
