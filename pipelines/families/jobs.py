"""The panel synthesizers' jobs, for either synthesizer (:mod:`continual_synth.mechanisms.panel_synthesizers`:
Bun et al. 2024 Algorithm 1, fixed time window; Algorithm 2, cumulative).

* :func:`run` — the whole panel in one Beam pipeline (batch or backfill).
* :func:`init` + :func:`step` — one period per run (a monthly DAG task), the state
  kept in a directory between runs.

Both fold the same state machine and emit with the same sharded emission, so they
are the same algorithm.  The release lifecycle (staging, ownership, write-ahead
commits, fencing, publication) is :mod:`continual_synth.pipelines.release.lifecycle`'s; this
module supplies the panel's pipelines: the period's statistic joined with the people's
history (:class:`PanelJob.compute`) and the sharded emission (:class:`PanelJob.emit`).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa

from continual_synth.mechanisms import emission
from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.record_checks import DROP, REFUSE, check_mode
from continual_synth.mechanisms.panel_synthesizers import synthesizer_from_dict
from continual_synth.mechanisms.synthesizer import PanelStatistics
from continual_synth.pipelines.release import lifecycle, logs, release_dir
from continual_synth.pipelines.release.lifecycle import IncrementalJob
from continual_synth.pipelines.commands.options import (PanelColumns, missing_code,
                                                        pipeline_options, record_schema,
                                                        value_type)
from continual_synth.transforms import storage
from continual_synth.transforms.emit import EmitSyntheticPanel, emit_shard_period
from continual_synth.transforms.files import (check_dataset, check_format, detect_format,
                                              has_records, read_file)
from continual_synth.transforms.invalid_records import DropSink, parts_folder, sink_for
from continual_synth.transforms.read import require_columns
from continual_synth.transforms.monitoring import (RECORDS_READ, SYNTHETIC_RECORDS_WRITTEN,
                                                   CountPeriodsReleased, CountRecords,
                                                   counting_rejections)
from continual_synth.transforms.histogram import (ComputePanelStatistics, ShardDrops,
                                                  SumArrays, step_shard_statistics)
from continual_synth.transforms.read import ReadRecordBatches
from continual_synth.transforms.shard import GroupByShard
from continual_synth.transforms.synthesize import SynthesizePanel, emission_plan
from continual_synth.transforms.validate import (ValidatePanelBatches,
                                                 drop_invalid_panel_records,
                                                 validate_panel_batch)
from continual_synth.transforms.write import WriteRecordBatches

__all__ = ["DEFAULT_SHARDS", "save_manifest_after", "shard_file", "SynthesizePanelTables",
           "run", "initial_document", "check_drop_fills", "PanelJob",
           "warn_if_mostly_noise"]

DEFAULT_SHARDS = 16


def save_manifest_after(written, plan, path: str):
    """Save ``plan["manifest"]`` to ``path`` once every file of ``written`` is written.

    The manifest is saved last, after the writes, as the pipeline's one leaf, so runners
    that compute only a pipeline's final stage (Beam's Dask runner) run everything.  The
    written paths join the plan by key, not as a side input, which Beam's Dask runner
    would recompute from the input in the task that reads it."""
    done = written | "KeyWritten" >> beam.Map(lambda written_path: (None, written_path))
    manifest = plan | "KeyManifest" >> beam.Map(lambda p: (None, p["manifest"]))
    return ({"written": done, "manifest": manifest}
            | "JoinWrites" >> beam.CoGroupByKey()
            | "SaveManifest" >> beam.MapTuple(
                lambda _, joined: release_dir.write_json_atomic(
                    path, joined["manifest"][0])))


def shard_file(directory: str, shard: int, suffix: str) -> str:
    """One shard's file in a run folder of the state (``shard-SSSSS.<suffix>``)."""
    return storage.join(directory, f"shard-{shard:05d}.{suffix}")


# --------------------------------------------------------------------------- batch


class SynthesizePanelTables(beam.PTransform):
    """A whole panel's records → ``{"plan": the plan (one element, its ``manifest``
    inside), "records": (key, pa.Table) synthetic records}``: validation, shards, the
    panel statistics, the synthesizer folded over periods 1..T and the sharded emission
    (``run``'s pipeline between reading and writing; ``continual_synth.beam`` too)."""

    def __init__(self, model, *, seed: Optional[int], columns: PanelColumns, fill,
                 num_shards: int, where: str, sink: Optional[DropSink] = None,
                 files: Sequence[str] = ()):
        super().__init__()
        self.model, self.seed, self.columns, self.fill = model, seed, columns, fill
        self.num_shards, self.where = num_shards, where
        self.sink, self.files = sink, tuple(files)  # drop mode; the input's data files

    def expand(self, batches):
        model, columns, num_shards = self.model, self.columns, self.num_shards
        sink, files = self.sink, self.files
        statistics = (batches
                      | "Validate" >> ValidatePanelBatches(
                          columns.id_col, columns.period_col, columns.value_col,
                          model.alphabet, (1, model.horizon), where=self.where,
                          sink=sink, files=files)
                      | "Shard" >> GroupByShard(num_shards)
                      | "Statistics" >> ComputePanelStatistics(
                          model, self.fill, where=self.where, num_shards=num_shards,
                          dropped=None if sink is None else ShardDrops(sink, files, columns)))
        plan = (statistics
                | "Synthesize" >> SynthesizePanel(model, num_shards, self.seed)
                | "CountPeriods" >> CountPeriodsReleased(
                    lambda p: len(p["manifest"]["periods_released"])))
        records = (plan
                   | "Emit" >> EmitSyntheticPanel(num_shards, model)
                   | "CountWritten" >> CountRecords(SYNTHETIC_RECORDS_WRITTEN))
        return {"plan": plan, "records": records}


def run(model, input_path: str, output_dir: str, *,
        seed: Optional[int] = None, in_format: Optional[str] = None,
        out_format: str = "parquet", columns: PanelColumns = PanelColumns(),
        missing_value=None, num_shards: int = DEFAULT_SHARDS,
        beam_args: Sequence[str] = (), invalid_records: str = REFUSE) -> Dict:
    """Synthesize a whole panel (periods 1..T) in one pipeline; return the manifest
    (``invalid_records``: refuse the panel at its first invalid record, or drop each)."""
    check_format(out_format)
    fill = missing_code(missing_value, model.alphabet)
    check_drop_fills(invalid_records, missing_value)
    # fails early on a missing input
    reader = ReadRecordBatches(input_path, in_format, columns=columns.names)
    sink = sink_for(invalid_records)

    def write(staging: str, plan_path: str) -> None:
        with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
            released = (pipeline
                        | "Read" >> reader
                        | "CountRead" >> CountRecords(RECORDS_READ)
                        | "Synthesize" >> SynthesizePanelTables(
                            model, seed=seed, columns=columns, fill=fill,
                            num_shards=num_shards, where=input_path, sink=sink,
                            files=reader.files))
            written = (released["records"]
                       | "Write" >> WriteRecordBatches(storage.join(staging, "synthetic"),
                                                       out_format, record_schema(model.alphabet)))
            save_manifest_after(written, released["plan"], plan_path)
        logs.record_metrics(pipeline)

    logs.LOGGER.info("reading %s (periods 1..%d)", input_path, model.horizon)
    return lifecycle.release_whole_run(output_dir, write, {"format": out_format, "mode": "run"},
                                       f"{input_path}: the panel holds no records")


# --------------------------------------------------------------------- incremental


def initial_document(model, *, seed: Optional[int] = None,
                     out_format: str = "parquet", columns: PanelColumns = PanelColumns(),
                     missing_value=None, num_shards: int = DEFAULT_SHARDS,
                     invalid_records: str = REFUSE) -> Dict:
    """The state document :func:`init` creates (version 0), checked but not written
    (``invalid_records``: what its steps do with an invalid record, unless a step says)."""
    check_format(out_format)
    missing_code(missing_value, model.alphabet)
    check_drop_fills(invalid_records, missing_value)
    return lifecycle.new_state_document(
        model.kind, seed, out_format, config=model.config.to_dict(),
        synthesizer_state=model.initial_state().to_dict(), columns=vars(columns),
        missing_value=missing_value, num_shards=num_shards, shard_sizes=None,
        shard_code_counts=None, invalid_records=check_mode(invalid_records))


def check_drop_fills(invalid_records: str, missing_value, why: str = "") -> None:
    """Refuse dropping invalid records from a panel without ``--missing-value`` (before
    anything is read): a dropped report leaves its person without a report that period,
    which only ``--missing-value`` fills (``why``: how the job came to drop)."""
    if check_mode(invalid_records) == DROP and missing_value is None:
        raise InputError(f"{why or '--invalid-records drop'} needs --missing-value: a "
                         f"dropped report leaves its person without a report that period, "
                         f"and a panel needs every person's report each period "
                         f"(--missing-value V fills it with V)")


class PanelJob(IncrementalJob):
    """The write-ahead step of a panel synthesizer (see :mod:`continual_synth.pipelines.
    release.lifecycle`): the people's history (their last k − 1 values or their weight) and the
    synthetic people's codes are the private files a version names."""

    def __init__(self, kind: Optional[str] = None):
        self.kind = kind

    def empty_period_valid(self, state: Dict) -> bool:
        """Every person reports each period, so a period without records is one in
        which every person's report is missing: valid when the state fills a missing
        report (``--missing-value V``, ``state["missing_value"]``), released like any
        other with every person's value V; without it ``step`` refuses a file that holds
        no records.  Period 1 defines the panel's people, so it needs records whatever
        the state (:meth:`empty_period`)."""
        return state.get("missing_value") is not None

    def empty_period(self, state: Dict, period: int) -> pa.Table:
        """The id and value columns, no rows: a period in which every person's report
        is missing, which ``step`` fills with the missing value."""
        kind = self.kind or state["kind"]
        if not self.empty_period_valid(state):
            raise InputError(f"period {period}: no records arrived, and a {kind} period "
                             f"without records can be released only with --missing-value "
                             f"V (every person's report missing)")
        if period == 1:
            raise InputError("period 1: no records arrived, and a panel's people are those "
                             "who report in period 1: the panel is empty (no people at "
                             "all), so no period of it can be released; the stream stops")
        model, _ = self.synthesizer(state)
        columns = PanelColumns(**state["columns"])
        return pa.table({columns.id_col: pa.array([], pa.int64()),
                         columns.value_col: pa.array([], value_type(model.alphabet))})

    def check_event_stream(self, state: Dict) -> None:
        """A panel's event-time stream needs ``--missing-value``: it releases every
        period when the watermark passes its end, and a period in which no record
        arrived can be released only as every person's report missing; otherwise
        whether a period could be released would depend on which records arrived."""
        if not self.empty_period_valid(state):
            raise InputError(f"an event-time {self.kind or state['kind']} stream needs "
                             f"--missing-value V: it releases every period when the "
                             f"watermark passes its end, and a period in which no record "
                             f"arrived is one in which every person's report is missing "
                             f"(without V, whether a period could be released would "
                             f"depend on which records arrived)")
        super().check_event_stream(state)

    def synthesizer(self, state: Dict):
        model = synthesizer_from_dict(state["kind"], state["config"])
        return model, model.state_from_dict(state["synthesizer_state"])

    def check_invalid_records(self, state: Dict, mode: str, why: str = "") -> None:
        check_drop_fills(mode, state["missing_value"], why)

    def period_statistics(self, state, input_path, in_format, period, store, run_dir,
                          beam_args, invalid_records):
        """The period's panel statistics (Algorithm 1: the window histogram C^t;
        Algorithm 2: the threshold counts z_b^t) with the panel's population, from the
        people's history, whose next version (private) is written under ``run_dir``."""
        model, _ = self.synthesizer(state)
        history = storage.join(run_dir, "history")
        people, statistics = _period_statistics(
            model, state, input_path, in_format, period,
            store.path(state["files"]["history"]) if period > 1 else None, history, beam_args,
            sink_for(invalid_records, parts_folder(run_dir)),
            allow_empty=period > 1 and self.empty_period_valid(state))
        return PanelStatistics(statistics, people), {"history": store.relative(history)}

    def advance(self, state, period, statistics, files, store, run_dir) -> Dict:
        model, wstate = self.synthesizer(state)
        code_counts = state["shard_code_counts"]
        stepped = model.step_period(wstate, period, statistics, state["seed"])
        wstate = stepped.state
        plan, code_counts, emission_seed = emission_plan(
            model, stepped, state["num_shards"],
            None if code_counts is None else np.asarray(code_counts))
        new = {**state, "synthesizer_state": wstate.to_dict(),
               "files": {**state["files"], **files},
               "pending": {"period": period, "plan": None}}
        if plan is not None:
            if "initial" in plan:
                new["shard_sizes"] = emission.shard_sizes(wstate.num_synthetic,
                                                          state["num_shards"]).tolist()
            new["shard_code_counts"] = code_counts.tolist()
            new["pending"] = {"period": period, "emission_seed": emission_seed,
                              "plan": {part: counts.tolist() for part, counts in plan.items()}}
        return new

    def emit(self, state, staging_dir, store, run_dir, beam_args):
        pending = state["pending"]
        if pending["plan"] is None:
            return None, state["files"]
        model, _ = self.synthesizer(state)
        period = pending["period"]
        plan = {"plans": {period: {part: np.asarray(counts)
                                   for part, counts in pending["plan"].items()}},
                "shard_sizes": np.asarray(state["shard_sizes"]),
                "emission_seeds": {period: pending["emission_seed"]}}
        creates = "initial" in pending["plan"]
        before = None if creates else store.path(state["files"]["synthetic"])
        after = storage.join(run_dir, "synthetic")
        storage.makedirs(after)
        with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
            (pipeline
             | "Shards" >> beam.Create(range(state["num_shards"]))
             | "CountPeriod" >> CountPeriodsReleased(
                 lambda shard, count=len(self.published_periods(state)): count * (shard == 0))
             | "Reshuffle" >> beam.Reshuffle()
             | "EmitShard" >> beam.FlatMap(lambda shard: _emit_step_shard(
                 model, shard, period, plan, before, after))
             | "CountWritten" >> CountRecords(SYNTHETIC_RECORDS_WRITTEN)
             | "Write" >> WriteRecordBatches(storage.join(staging_dir, "synthetic"),
                                             state["format"], record_schema(model.alphabet)))
        logs.record_metrics(pipeline)
        replaces = "synthetic-t*" if creates else f"synthetic-t{period:04d}-*"
        return replaces, {**state["files"], "synthetic": store.relative(after)}

    def manifest(self, state: Dict) -> Dict:
        model, wstate = self.synthesizer(state)
        manifest = {**model.manifest(wstate), "sampler": state["sampler"],
                    "format": state["format"],
                    "mode": "incremental"}
        note = model.before_first_release_note(wstate)
        if note:
            manifest["note"] = note
        return manifest

    def published_periods(self, state: Dict) -> List[int]:
        """A release's first step publishes every period so far (Algorithm 1: periods
        1..k at t = k, the synthetic people's first k values); later ones their own."""
        plan = state["pending"].get("plan") or {}
        if "initial" in plan:
            model, wstate = self.synthesizer(state)
            return [int(p) for p in model.manifest(wstate)["periods_released"]]
        return [state["pending"]["period"]]

    def summary(self, state: Dict, pending: Dict, released: bool, resumed: bool) -> Dict:
        model, wstate = self.synthesizer(state)
        note = model.before_first_release_note(wstate)
        published = self.published_periods({**state, "pending": pending}) if released else []
        return {"status": "released" if released else "ingested", "period": wstate.period,
                "periods_published": published, "resumed": resumed,
                "rho_spent": wstate.ledger.spent,
                "message": f"period {wstate.period}: " + (
                    f"released {lifecycle.period_span(published)}" if released
                    else f"ingested; {note}")}


def _period_statistics(model, state: Dict, input_path: str, in_format: Optional[str],
                       period: int, history_before: Optional[str], history_after: str,
                       beam_args: Sequence[str], sink: Optional[DropSink] = None,
                       allow_empty: bool = False):
    """(people in the panel, the period's statistic), writing the people's new history
    into ``history_after`` (a folder of this run's); ``sink``: drop invalid records (and
    duplicate and new ids) into it instead of refusing the period.  ``allow_empty``: a
    file without records (with the id and value columns) is the period in which every
    report is missing (:meth:`PanelJob.empty_period_valid`)."""
    columns = PanelColumns(**state["columns"])
    fill = missing_code(state["missing_value"], model.alphabet)
    num_shards = state["num_shards"]
    reader = ReadRecordBatches(input_path, in_format, allow_empty=allow_empty,
                               columns=columns.names)
    if allow_empty:
        _check_columns_without_records(input_path, in_format, columns)
    dropped = None if sink is None else ShardDrops(sink, reader.files, columns)
    storage.makedirs(history_after)
    result_path = storage.join(history_after, ".statistics.npy")

    def shard_step(shard, parts):
        return step_shard_statistics(
            shard, parts["data"][0] if parts["data"] else None, model, period,
            None if history_before is None else shard_file(history_before, shard, "parquet"),
            shard_file(history_after, shard, "parquet"), fill, input_path, num_shards,
            dropped)

    with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
        batches = (pipeline
                   | "Read" >> reader
                   | "CountRead" >> CountRecords(RECORDS_READ)
                   | "Validate" >> _ValidatePeriod(columns, model.alphabet, period, input_path,
                                                 sink, reader.files))
        grouped = batches | "Shard" >> GroupByShard(num_shards)
        every_shard = pipeline | "AllShards" >> beam.Create([(j, None) for j in range(num_shards)])
        _ = ({"data": grouped, "all": every_shard}
             | "JoinShards" >> beam.CoGroupByKey()
             | "StepShard" >> beam.MapTuple(shard_step)
             | "Counts" >> beam.MapTuple(lambda people, counts: np.concatenate([[people], counts]))
             | "Sum" >> beam.CombineGlobally(SumArrays())
             | "Save" >> beam.Map(lambda total: storage.save_array(result_path, total)))
    logs.record_metrics(pipeline)
    total = storage.load_array(result_path)
    storage.remove(result_path)
    if total[0] == 0:
        raise InputError(f"{input_path}: no records for period {period}")
    return int(total[0]), total[1:]


def _check_columns_without_records(input_path: str, in_format: Optional[str],
                                   columns: PanelColumns) -> None:
    """A period's input that holds no records (every report missing) must still have
    the id and value columns, as one with records must."""
    fmt = detect_format(input_path, in_format)
    files = check_dataset(input_path, fmt, allow_empty=True)
    if any(has_records(path, fmt) for path in files):
        return
    for path in files:
        require_columns(read_file(path, fmt).column_names, [columns.id_col, columns.value_col],
                        path, hint="the state's --id-col and --value-col")


def warn_if_mostly_noise(manifest: Optional[Dict]) -> Optional[str]:
    """Log (and return) a warning when a panel release is mostly noise at its ρ: over half
    of Algorithm 1's synthetic people are padding (n_pad in each of the |A|^k window
    histories), or Algorithm 2's error bound exceeds half its synthetic population.
    Everything compared is in the manifest (public).  The bounds still hold; they only
    say little (an audit released 342 synthetic people for a 3-person panel, 344 of
    them padding, and nothing said so)."""
    if not manifest or not manifest.get("num_synthetic"):
        return None
    people, bound = int(manifest["num_synthetic"]), float(manifest["error_bound"])
    budget = f"at ρ = {manifest['rho']:g}"
    if "n_pad" in manifest:
        histories = len(manifest["alphabet"]) ** int(manifest["window"])
        share = manifest["n_pad"] * histories / people
        if share <= 0.5:
            return None
        message = (f"{min(share, 1):.0%} of the {people} synthetic people are padding "
                   f"(n_pad = {manifest['n_pad']} in each of the {histories} window "
                   f"histories): {budget} this panel is too small for its counts to say much "
                   f"(each within ±{bound:.4g} of the truth, Theorem 3.2); a larger ρ or a "
                   f"larger panel would say more")
    else:
        if bound <= 0.5 * people:
            return None
        message = (f"the error bound (±{bound:.4g} people per count) is {bound / people:.0%} "
                   f"of the {people} synthetic people: {budget} this panel is too small for "
                   f"its counts to say much; a larger ρ or a larger panel would say more")
    logs.LOGGER.warning(message)
    return message


class _ValidatePeriod(beam.PTransform):
    """Validation of a step's file: a period column, if present, must be the period
    (``sink``: drop invalid records into it instead of refusing the file)."""

    def __init__(self, columns: PanelColumns, alphabet, period: int, where: str,
                 sink: Optional[DropSink] = None, files: Sequence[str] = ()):
        super().__init__()
        self.columns, self.alphabet = columns, tuple(alphabet)
        self.period, self.where = period, where
        self.sink, self.files = sink, tuple(files)

    def expand(self, batches):
        columns, alphabet, period, where = self.columns, self.alphabet, self.period, self.where
        has_period = beam.pvalue.AsSingleton(
            batches | beam.Map(lambda t: columns.period_col in t.column_names)
            | beam.CombineGlobally(all))
        if self.sink is None:
            return batches | "EncodePeriod" >> beam.Map(
                counting_rejections(_encode_step_batch), columns, alphabet, period, where,
                with_period=has_period)
        sink, files = self.sink, self.files
        return batches | "EncodeValid" >> beam.Map(
            lambda table, with_period: drop_invalid_panel_records(
                table, sink, files, columns.id_col, None, columns.value_col, alphabet,
                (period, period), where=where,
                step_period_col=columns.period_col if with_period else None),
            with_period=has_period)


def _encode_step_batch(table, columns, alphabet, period, where, with_period):
    return validate_panel_batch(table, columns.id_col, None, columns.value_col, alphabet,
                                (period, period), where=where,
                                step_period_col=columns.period_col if with_period
                                else None)[0]


def _emit_step_shard(model, shard: int, period: int, plan: Dict, before: Optional[str],
                     after: str):
    """One shard's records for one step, saving its people's new codes into ``after``."""
    people = None
    if before is not None:
        first_id = int(np.sum(plan["shard_sizes"][:shard]))
        people = emission.ShardPeople(first_id, storage.load_array(shard_file(before, shard, "npy")),
                                      model.codes)
    people, tables = emit_shard_period(people, shard, period, plan, model)
    storage.save_array(shard_file(after, shard, "npy"), people.codes)
    return tables

