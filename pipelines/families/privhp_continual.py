"""Continual PrivHP jobs: ``privhp init`` + ``privhp step`` (incremental, write-ahead)
and ``privhp run --horizon T`` (the whole stream at once, a period column, read one
period at a time).

After every period t the release is ``samples`` synthetic points of all the points seen
so far (:class:`~continual_synth.mechanisms.privhp_synthesizer.ContinualPrivHPSynthesizer`),
written as ``synthetic-tNNNN-sSSSSS.<format>`` (one file per shard; the files of earlier
periods stay).  The step follows :func:`continual_synth.pipelines.release.lifecycle.
incremental_step`: the period's exact PrivHP state is built by a Beam pipeline
(:class:`~continual_synth.transforms.privhp.BuildPrivHP`), the counters are fed with the
noise of ``period_sampler(seed, t)``, and the new counter state and the grown tree are
written (private) under the run's folder before the state version commits; a re-run
after the commit re-emits the same points from the saved tree.  ``run`` draws exactly
the noise and points of ``init`` + ``step`` per period with the same seed.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Dict, Optional, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa

from continual_synth.mechanisms import privhp
from continual_synth.mechanisms.continual_privhp import ContinualPrivHPConfig
from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.record_checks import DROP, REFUSE, Problems, check_mode
from continual_synth.mechanisms.hierarchy import Bounds, check_points
from continual_synth.mechanisms.privhp_synthesizer import (ContinualPrivHPState,
                                                           ContinualPrivHPSynthesizer)
from continual_synth.mechanisms.synthesizer import PointsRelease
from continual_synth.pipelines.release import lifecycle, logs, release_dir
from continual_synth.pipelines.families.privhp import check_columns
from continual_synth.pipelines.release.lifecycle import IncrementalJob, StateDir
from continual_synth.pipelines.commands.options import pipeline_options
from continual_synth.transforms import storage
from continual_synth.transforms.files import (check_format, detect_format,
                                              list_data_files)
from continual_synth.transforms.privhp import (BuildPrivHP, ReadPointBatches,
                                               SampleSyntheticPoints, load_tree,
                                               point_schema, save_tree, table_points)
from continual_synth.transforms.read import DEFAULT_BATCH_ROWS, file_batches
from continual_synth.transforms.invalid_records import parts_folder, sink_for
from continual_synth.transforms.periods import periods_out_of_range, record_periods
from continual_synth.transforms.monitoring import (RECORDS_READ, SYNTHETIC_RECORDS_WRITTEN,
                                                   CountPeriodsReleased, CountRecords,
                                                   Progress)
from continual_synth.transforms.write import WriteRecordBatches

__all__ = ["KIND", "RECORDED_DEFAULTS", "initial_document", "ContinualPrivHPJob",
           "period_accumulators", "run"]

KIND = "continual-privhp"
#: settings a state records for the manifest, absent from states of earlier versions; a
#: step's file may hold the period column (``privhp stream`` reads a landed file's period
#: from it too): if present it must hold the period the step ingests, as in every step
RECORDED_DEFAULTS = {"period_col": "period", "horizon_source": "--horizon"}


def _extras(columns, bounds: Bounds, num_shards: int, clip: bool,
            depth_from: Optional[Dict] = None) -> Dict:
    """The release's facts beside the synthesizer's manifest (``depth_from``: how the depth
    came from ``--expected-n``, when it did)."""
    return {"columns": list(columns), "bounds": bounds.to_list(), "shards": int(num_shards),
            "clip": bool(clip), "release_form": (
                "the rows of synthetic-tNNNN-* are the synthetic sample of all the points "
                "of periods 1..t, released after period t"),
            **({"depth_from": depth_from} if depth_from is not None else {})}


def _check(columns, bounds: Bounds, config: ContinualPrivHPConfig, samples: int,
           num_shards: int, out_format: str, period_col: str) -> None:
    check_columns(columns, bounds, period_col)
    check_format(out_format)
    if samples < 0 or num_shards < 1:
        raise InputError("--samples must be ≥ 0 and --shards ≥ 1")
    if config.structure.dims != bounds.dims:
        raise InputError("the configuration's dimension differs from the bounds'")


# --------------------------------------------------------------------- incremental


def initial_document(config: ContinualPrivHPConfig, columns: Sequence[str], bounds: Bounds,
                     samples: int, *, seed: Optional[int] = None, out_format: str = "parquet",
                     clip: bool = False, num_shards: int = 8,
                     depth_from: Optional[Dict] = None, period_col: str = "period",
                     invalid_records: str = REFUSE) -> Dict:
    """The state document ``init`` creates (version 0); ``stream`` creates it too.  It
    records, for the manifest as ``run`` writes it, the period column ``period_col`` (the
    column ``stream`` reads a watched file's period from when its name holds none; a
    step's file is one period, and if it has the column every row must hold that period)
    and ``horizon_source`` (T is always ``--horizon``'s), and what its steps do with an
    invalid point (``invalid_records``)."""
    _check(columns, bounds, config, samples, num_shards, out_format, period_col)
    check_mode(invalid_records)
    fresh = ContinualPrivHPSynthesizer(config, samples).initial_state().to_dict()
    fresh.pop("counters")  # zero counters: made again from the configuration at period 1
    return lifecycle.new_state_document(
        KIND, seed, out_format, config=config.to_dict(), synthesizer_state=fresh,
        samples=int(samples), **_extras(columns, bounds, num_shards, clip, depth_from),
        **{**RECORDED_DEFAULTS, "period_col": period_col}, invalid_records=invalid_records)


class ContinualPrivHPJob(IncrementalJob):
    """The write-ahead step of continual PrivHP (``privhp step`` and ``privhp stream``)."""

    kind = KIND

    def empty_period_valid(self, state: Dict) -> bool:
        """Always: a period with no points feeds the zero state and the counters
        advance (as ``run --horizon`` releases a period its period column skips)."""
        return True

    def empty_period(self, state: Dict, period: int) -> pa.Table:
        """The point columns, no rows."""
        return point_schema(state["columns"]).empty_table()

    def canonical(self, document: Dict) -> Dict:
        """The configuration as today's :class:`ContinualPrivHPConfig` writes it (a state
        saved before ``stride`` existed has none: it reads as stride 1), and the recorded
        settings a state saved before them lacks (:data:`RECORDED_DEFAULTS`: the only
        values there have been)."""
        config = ContinualPrivHPConfig.from_dict(document["config"]).to_dict()
        return {**RECORDED_DEFAULTS, **document, "config": json.loads(json.dumps(config))}

    def synthesizer(self, state: Dict, store: Optional[StateDir] = None):
        """(synthesizer, its state); the counters are read only when ``store`` is given
        (they are private and large; order and budget checks do not need them)."""
        synthesizer = ContinualPrivHPSynthesizer(
            ContinualPrivHPConfig.from_dict(state["config"]), state["samples"])
        counters = []
        if store is not None and "counters" in state["files"]:
            counters = release_dir.read_json(store.path(state["files"]["counters"]))[
                "counters"]
        cstate = ContinualPrivHPState.from_dict({**state["synthesizer_state"],
                                                 "counters": counters})
        if store is not None and "counters" not in state["files"]:  # before period 1
            cstate.counters = synthesizer.config.new_counters()
        return synthesizer, cstate

    def _bounds(self, state: Dict) -> Bounds:
        low, high = zip(*state["bounds"])
        return Bounds(tuple(low), tuple(high))

    def period_statistics(self, state, input_path, in_format, period, store, run_dir,
                          beam_args, invalid_records):
        """PrivHP's exact tree counts and sketches of the period's points (Holland et al.
        2025, Algorithm 1, one period)."""
        config = self.synthesizer(state)[0].config
        statistics = _period_statistics(config.structure, input_path, in_format,
                                        state["columns"], self._bounds(state), state["clip"],
                                        run_dir, beam_args, config.counted_sketch_levels,
                                        step_period=(state.get("period_col",
                                                               RECORDED_DEFAULTS["period_col"]),
                                                     period),
                                        sink=sink_for(invalid_records, parts_folder(run_dir),
                                                      also_read=True))
        return statistics, {}

    def advance(self, state, period, statistics, files, store, run_dir) -> Dict:
        synthesizer, cstate = self.synthesizer(state, store)
        cstate, release, _ = synthesizer.step_period(cstate, period, statistics, state["seed"])
        document = cstate.to_dict()
        counters_path = storage.join(run_dir, "counters.json")
        release_dir.write_json_atomic(counters_path, {"counters": document.pop("counters")})
        tree_path = storage.join(run_dir, "tree.npz")
        save_tree(release.tree, tree_path)
        files = {**state["files"], **files, "counters": store.relative(counters_path),
                 "tree": store.relative(tree_path)}
        pending = {"period": period, "size": release.size,
                   "emission_seed": release.emission_seed}
        return {**state, "synthesizer_state": document, "files": files, "pending": pending}

    def emit(self, state, staging_dir, store, run_dir, beam_args):
        pending = state["pending"]
        period = pending["period"]
        release = PointsRelease(period, load_tree(store.path(state["files"]["tree"])),
                                pending["size"], pending["emission_seed"])
        files = {name: path for name, path in state["files"].items() if name != "tree"}
        _write_releases([release], staging_dir, self._bounds(state), state["columns"],
                        state["shards"], state["format"], beam_args)
        return f"synthetic-t{period:04d}-*", files

    def manifest(self, state: Dict) -> Dict:
        synthesizer, cstate = self.synthesizer(state)
        return {**synthesizer.manifest(cstate), "sampler": state["sampler"],
                "format": state["format"],
                "mode": "incremental",
                **{k: state[k] for k in ("columns", "bounds", "shards", "clip",
                                         "release_form", "depth_from") if k in state},
                **{k: lifecycle.recorded(state, k) for k in RECORDED_DEFAULTS}}

    def summary(self, state: Dict, pending: Dict, released: bool, resumed: bool) -> Dict:
        period = pending["period"]
        return {"status": "released", "period": period, "resumed": resumed,
                "samples": pending["size"],
                "epsilon_spent": self.budget_spent(state),
                "message": f"period {period}: released synthetic points of all the points "
                           f"of periods 1..{period}"}


def _period_statistics(structure: privhp.PrivHPConfig, input_path: str,
                       in_format: Optional[str], columns, bounds: Bounds, clip: bool,
                       run_dir: str, beam_args, counted: Optional[Sequence[int]] = None,
                       step_period=None, sink=None) -> privhp.PrivHPAccumulator:
    """The exact PrivHP state of one period's points (a Beam pipeline; an empty period
    gives the zero state; ``counted``: the sketch levels filled; ``step_period``, ``sink``:
    see :func:`~continual_synth.transforms.privhp.read_point_batches`)."""
    result = storage.join(run_dir, "statistics.npz")
    reader = ReadPointBatches(input_path, columns, bounds, clip, in_format, allow_empty=True,
                              step_period=step_period, sink=sink)

    def save(accumulator):
        storage.save_arrays(result, tree=accumulator.tree, sketches=accumulator.sketches)

    with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
        _ = (pipeline | "ReadPoints" >> reader
             | "CountRead" >> CountRecords(RECORDS_READ, progress="points read")
             | "PrivHP" >> BuildPrivHP(structure, counted)
             | "Save" >> beam.Map(save))
    logs.record_metrics(pipeline)
    data = storage.load_arrays(result)
    accumulator = privhp.PrivHPAccumulator(structure, data["tree"], data["sketches"],
                                           counted=counted)
    storage.remove(result)
    return accumulator


def _save_tree(release: PointsRelease, path: str) -> PointsRelease:
    """``release`` with its tree saved at ``path`` and named by it (read by the tasks
    that sample it: :class:`~continual_synth.transforms.privhp.SampleSyntheticPoints`)."""
    save_tree(release.tree, path)
    return dataclasses.replace(release, tree=path)


def _write_releases(releases: Sequence[PointsRelease], staging_dir: str, bounds: Bounds,
                    columns, num_shards: int, out_format: str, beam_args) -> None:
    """Sample the points of each release shard by shard and write its
    ``synthetic-tNNNN-s*``, every release in one pipeline: a pipeline costs a start of
    the SDK workers on every runner but the in-process one (seconds of imports each under
    ``--direct_running_mode=multi_processing``, so T pipelines would make a run several
    times slower there).  A release's ``tree`` may be a saved tree's path
    (:func:`_save_tree`): neither the driver nor the shuffle to the shards then holds T
    trees."""
    with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
        _ = (pipeline
             | "Releases" >> beam.Create([(None, release) for release in releases])
             | "CountPeriod" >> CountPeriodsReleased(lambda _: 1)
             | "SamplePoints" >> SampleSyntheticPoints(num_shards, bounds, columns,
                                                       by_period=True)
             | "CountWritten" >> CountRecords(SYNTHETIC_RECORDS_WRITTEN)
             | "Write" >> WriteRecordBatches(storage.join(staging_dir, "synthetic"),
                                             out_format, point_schema(columns)))
    logs.record_metrics(pipeline)


# --------------------------------------------------------------------------- run


def _period_column(table, period_col: str, horizon: int, path: str, offset: int,
                   problems: Problems) -> np.ndarray:
    """The batch's periods (the rule of every synthesizer: :mod:`~continual_synth.
    transforms.periods`); a period empty, not whole or outside 1..T is added to
    ``problems`` (refused: an error naming the file and row)."""
    periods = record_periods(table, period_col, path, offset, problems)
    periods_out_of_range(periods, path, offset, problems, horizon=horizon,
                         period_col=period_col)
    return periods


def _batches(files, fmt: str, columns: Sequence[str], batch_rows: int,
             option: str = "--columns"):
    """(file, row offset, table) of every non-empty batch, in a fixed order."""
    for path in files:
        for offset, table in file_batches(path, fmt, columns, batch_rows, option):
            if table.num_rows:
                yield path, offset, table


def period_accumulators(input_path: str, structure: privhp.PrivHPConfig,
                        columns: Sequence[str], bounds: Bounds, period_col: str,
                        horizon: int, clip: bool = False, in_format: Optional[str] = None,
                        batch_rows: int = DEFAULT_BATCH_ROWS,
                        counted: Optional[Sequence[int]] = None, sink=None):
    """The exact PrivHP state of each period t = 1..T in order (an empty period gives
    the zero state), in memory bounded like the stream's: never the whole stream.

    Two passes over Arrow batches of ``batch_rows`` rows.  The first reads only the
    period column, validates it (an error names the file and row) and notes the last
    batch holding each period; the second reads the points, adds each batch's points to
    the open state of their period, and hands period t over as soon as the batches
    holding periods ≤ t have all been read.  Memory: one batch, plus one state per
    period still open — one or two when the input is ordered by period (a file per
    period, or sorted rows), at most T states (T × the structure's counters, never
    anything per point) when periods are interleaved.  ``sink`` (drop mode): a point whose
    period or coordinates are invalid is left out and reported to it (the first pass
    skips invalid periods; the second reports each such point once)."""
    fmt = detect_format(input_path, in_format)
    files = list_data_files(input_path)
    last = np.full(horizon + 1, -1, dtype=np.int64)
    batches = 0
    for i, (path, offset, table) in enumerate(_batches(files, fmt, [period_col],
                                                        batch_rows, "--period-col")):
        problems = Problems(table.num_rows, REFUSE if sink is None else DROP)
        periods = _period_column(table, period_col, horizon, path, offset, problems)
        last[np.unique(periods[~problems.invalid])] = i
        batches = i + 1
    if not batches:
        raise InputError(f"{input_path}: the stream holds no points")
    complete = np.maximum.accumulate(last)[1:]  # periods 1..t all read after this batch
    open_states: Dict[int, privhp.PrivHPAccumulator] = {}

    def fresh() -> privhp.PrivHPAccumulator:
        return privhp.PrivHPAccumulator(structure, counted=counted)

    period = 1
    for i, (path, offset, table) in enumerate(_batches(files, fmt, list(columns)
                                                       + [period_col], batch_rows)):
        problems = Problems(table.num_rows, REFUSE if sink is None else DROP)
        periods = _period_column(table, period_col, horizon, path, offset, problems)
        unit, _ = check_points(table_points(table, columns, path, offset, problems), bounds,
                               columns, clip, where=path, row_offset=offset,
                               problems=problems)
        if problems.any():
            sink.report(problems.entries(table, path, offset))
            periods, unit = periods[~problems.invalid], unit[~problems.invalid]
        for t in np.unique(periods):
            state = open_states.get(int(t))
            if state is None:
                state = open_states[int(t)] = fresh()
            state.add_unit_points(unit[periods == t])
        while period <= horizon and complete[period - 1] <= i:
            yield period, open_states.pop(period, None) or fresh()
            period += 1
    for t in range(period, horizon + 1):
        yield t, open_states.pop(t, None) or fresh()


def _counting_points(periods):
    """``periods`` as they are read, each period's points added to the run's totals."""
    for t, statistics in periods:
        logs.add_totals({RECORDS_READ: statistics.num_points})
        yield t, statistics


def run(config: ContinualPrivHPConfig, input_path: str, output_dir: str,
        columns: Sequence[str], bounds: Bounds, samples: int, *, period_col: str = "period",
        seed: Optional[int] = None, in_format: Optional[str] = None,
        out_format: str = "parquet", clip: bool = False, num_shards: int = 8,
        batch_rows: int = DEFAULT_BATCH_ROWS, beam_args: Sequence[str] = (),
        depth_from: Optional[Dict] = None, invalid_records: str = REFUSE) -> Dict:
    """The whole stream at once, read one period at a time
    (:func:`period_accumulators`): every period's release (as ``init`` + ``step`` per
    period with the same seed) published together, manifest last.  Each period's grown
    tree is saved in the staging directory as it is released, and one pipeline samples
    them all (:func:`_write_releases`).  Bad input found while reading leaves the output
    untouched (releases are staged); ``invalid_records`` drop: each invalid point is left
    out instead (logged, counted in records_rejected)."""
    _check(columns, bounds, config, samples, num_shards, out_format, period_col)
    sink = sink_for(check_mode(invalid_records), on_driver=True, also_read=True)
    synthesizer = ContinualPrivHPSynthesizer(config, samples)

    def write(staging: str, plan_path: str) -> None:
        state = synthesizer.initial_state()
        progress = Progress(config.horizon, "periods done")
        trees = storage.join(staging, ".trees")  # hidden: never published
        storage.makedirs(trees)
        releases = []
        periods = period_accumulators(input_path, config.structure, columns, bounds,
                                      period_col, config.horizon, clip, in_format, batch_rows,
                                      config.counted_sketch_levels, sink)
        for state, release, _ in synthesizer.fold(_counting_points(periods), seed):
            releases.append(_save_tree(release, storage.join(
                trees, f"tree-t{release.period:04d}.npz")))
            progress.advance()
        _write_releases(releases, staging, bounds, columns, num_shards, out_format,
                        beam_args)
        storage.remove_tree(trees)
        manifest = {**synthesizer.manifest(state), **_extras(columns, bounds, num_shards,
                                                              clip, depth_from),
                    "format": out_format, "period_col": period_col,
                    "horizon_source": RECORDED_DEFAULTS["horizon_source"]}
        release_dir.write_json_atomic(plan_path, manifest)

    extras = {"sampler": "opendp" if seed is None else "seeded",
              "mode": "run"}
    logs.LOGGER.info("reading %s (periods 1..%d)", input_path, config.horizon)
    return lifecycle.release_whole_run(output_dir, write, extras,
                                       f"{input_path}: the stream holds no points")
