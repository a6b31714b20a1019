"""The synthesizer jobs, for any synthesizer model (:mod:`continual_synth.mechanisms.models`:
Bun et al. 2024 Algorithm 1, fixed time window; Algorithm 2, cumulative).

* :func:`run` — the whole panel in one Beam pipeline (batch or backfill).
* :func:`init` + :func:`step` — one period per run (a monthly DAG task), the state
  kept in a directory between runs.

Both fold the same state machine and emit with the same sharded emission, so they
are the same algorithm.

Incremental crash safety: a step (1) reads the period and computes its statistic in a
pipeline that writes the people's new history to a fresh versioned folder,
(2) adds the noise and commits the state with the ledger charged and the
period's plan marked *pending*, (3) emits and publishes the synthetic records and
the manifest, (4) commits the state with nothing pending.  A crash before (2)
leaves the old state and nothing released; after (2) a re-run of the same step
reads no data, draws no noise and spends nothing: it finishes (3)-(4) with the
saved plan and emission seed, reproducing the same records.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from typing import Dict, Optional, Sequence

import apache_beam as beam
import numpy as np

from continual_synth.mechanisms import emission
from continual_synth.mechanisms.errors import InputError, StateError
from continual_synth.mechanisms.models import model_from_dict
from continual_synth.pipelines import release_dir
from continual_synth.pipelines.options import (PanelColumns, missing_code, pipeline_options,
                                               record_schema)
from continual_synth.transforms.emit import (EmitSyntheticPanel, emit_shard_period,
                                             synthetic_path)
from continual_synth.transforms.files import FORMATS, list_data_files
from continual_synth.transforms.histogram import (PanelStatistics, SumArrays, history_path,
                                                  step_shard_statistics)
from continual_synth.transforms.read import ReadRecordBatches
from continual_synth.transforms.shard import GroupByShard
from continual_synth.transforms.synthesize import SynthesizePanel, synthesize_period
from continual_synth.transforms.validate import ValidatePanelBatches, encode_panel_batch
from continual_synth.transforms.write import WriteRecordBatches

DEFAULT_SHARDS = 16
MANIFEST = "manifest.json"
STATE = "state.json"


def _check_format(out_format: str) -> None:
    if out_format not in FORMATS:
        raise InputError(f"unknown output format {out_format!r}; choose one of {FORMATS}")


def check_fresh_output(output_dir: str) -> None:
    if os.path.exists(os.path.join(output_dir, MANIFEST)):
        raise InputError(f"{output_dir} already holds a release (manifest.json); "
                         f"choose an empty output directory")


def save_manifest_after(written, plan, path: str):
    """Save ``plan["manifest"]`` to ``path`` once every file of ``written`` is written.

    The manifest is saved last, after the writes, as the pipeline's one leaf, so runners
    that compute only a pipeline's final stage (Beam's Dask runner) run everything."""
    return (written
            | "WritesDone" >> beam.combiners.Count.Globally()
            | "SaveManifest" >> beam.Map(
                lambda _, p: release_dir.write_json_atomic(path, p["manifest"]),
                p=beam.pvalue.AsSingleton(plan)))


# --------------------------------------------------------------------------- batch


def run(model, input_path: str, output_dir: str, *,
        seed: Optional[int] = None, in_format: Optional[str] = None,
        out_format: str = "parquet", columns: PanelColumns = PanelColumns(),
        missing_value=None, num_shards: int = DEFAULT_SHARDS,
        beam_args: Sequence[str] = ()) -> Dict:
    """Synthesize a whole panel (periods 1..T) in one pipeline; return the manifest."""
    _check_format(out_format)
    fill = missing_code(missing_value, model.alphabet)
    reader = ReadRecordBatches(input_path, in_format)  # fails early on a missing input
    os.makedirs(output_dir, exist_ok=True)
    check_fresh_output(output_dir)
    release_dir.remove_stale_staging(output_dir)
    staging = release_dir.new_staging_dir(output_dir)
    plan_path = os.path.join(staging, ".manifest.json")
    try:
        with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
            statistics = (pipeline
                          | "Read" >> reader
                          | "Validate" >> ValidatePanelBatches(
                              columns.id_col, columns.period_col, columns.value_col,
                              model.alphabet, (1, model.horizon), where=input_path)
                          | "Shard" >> GroupByShard(num_shards)
                          | "Statistics" >> PanelStatistics(model, fill, where=input_path))
            plan = statistics | "Synthesize" >> SynthesizePanel(model, num_shards, seed)
            written = (plan
                       | "Emit" >> EmitSyntheticPanel(num_shards, model)
                       | "Write" >> WriteRecordBatches(os.path.join(staging, "synthetic"),
                                                       out_format, record_schema(model.alphabet)))
            save_manifest_after(written, plan, plan_path)
        manifest = release_dir.read_json(plan_path)
        if manifest is None:
            raise InputError(f"{input_path}: the panel holds no records")
        os.remove(plan_path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    release_dir.publish_staged_files(staging, output_dir)
    manifest.update({"format": out_format, "mode": "run"})
    release_dir.write_json_atomic(os.path.join(output_dir, MANIFEST), manifest)
    return manifest


# --------------------------------------------------------------------- incremental


def init(model, state_dir: str, *, seed: Optional[int] = None,
         out_format: str = "parquet", columns: PanelColumns = PanelColumns(),
         missing_value=None, num_shards: int = DEFAULT_SHARDS) -> Dict:
    """Create a state directory for an incremental release."""
    _check_format(out_format)
    missing_code(missing_value, model.alphabet)
    if os.path.exists(os.path.join(state_dir, STATE)):
        raise StateError(f"{state_dir} already holds a state; use a new directory")
    state = {
        "kind": model.kind, "config": model.config.to_dict(),
        "synthesizer_state": model.initial_state().to_dict(),
        "seed": seed, "sampler": "opendp" if seed is None else "seeded",
        "format": out_format, "columns": vars(columns), "missing_value": missing_value,
        "num_shards": num_shards, "fingerprints": {}, "pending": None,
        "history_version": 0, "synthetic_version": 0,
        "shard_sizes": None, "shard_code_counts": None, "output_dir": None,
    }
    release_dir.write_json_atomic(os.path.join(state_dir, STATE), state)
    return state


def load_state(state_dir: str, kind: Optional[str] = None) -> Dict:
    """The saved state; ``kind`` (``window`` / ``cumulative``) must match if given."""
    state = release_dir.read_json(os.path.join(state_dir, STATE))
    if state is None:
        raise StateError(f"{state_dir}: no state here; run 'continual-synth "
                         f"{kind or 'window'} init' first")
    if kind is not None and state.get("kind") != kind:
        raise StateError(f"{state_dir}: holds a {state.get('kind')} synthesizer state, "
                         f"not a {kind} one")
    return state


def fingerprint(path: str) -> str:
    """SHA-256 of the input's absolute path and bytes: recognises a re-run of a step (the
    same file again).  Identical contents at another path are another period's file;
    ``--period`` settles any doubt."""
    digest = hashlib.sha256(os.path.abspath(path).encode())
    for file_path in list_data_files(path):
        with open(file_path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _seen_period(state: Dict, input_path: str) -> Optional[int]:
    """The period an identical input file (same path and bytes) was ingested as, if any."""
    if not os.path.exists(input_path):
        return None
    return state["fingerprints"].get(fingerprint(input_path))


def _already_released(period: int) -> Dict:
    return {"status": "already-released", "period": period,
            "message": f"period {period} was already ingested; nothing read, nothing spent"}


def step(state_dir: str, input_path: str, output_dir: str, *, in_format: Optional[str] = None,
         period: Optional[int] = None, beam_args: Sequence[str] = (),
         kind: Optional[str] = None) -> Dict:
    """Ingest the next period; return a summary (``status`` says what happened)."""
    state = load_state(state_dir, kind)
    model = model_from_dict(state["kind"], state["config"])
    wstate = model.state_from_dict(state["synthesizer_state"])
    config = model.config
    if state["output_dir"] is None:
        check_fresh_output(output_dir)
    elif os.path.abspath(output_dir) != state["output_dir"]:
        raise StateError(f"this state releases into {state['output_dir']}, not {output_dir}")
    pending = state["pending"]
    if pending is not None:
        seen = _seen_period(state, input_path)
        if period not in (None, pending["period"]) or seen not in (None, pending["period"]):
            raise StateError(f"period {pending['period']} was computed but not published "
                             f"(interrupted run); re-run the step with that period's file")
        return _publish(model, state_dir, output_dir, state, wstate, beam_args, resumed=True)
    target = wstate.period + 1
    if period is not None:
        if period < 1:
            raise StateError(f"period {period} does not exist: periods run 1..{config.horizon}")
        if period <= wstate.period:
            return _already_released(period)
        if period != target:
            raise StateError(f"period {period} is out of order: the next period is {target}")
    elif wstate.period:
        seen = _seen_period(state, input_path)
        if seen is not None:
            return _already_released(seen)
    model.check_step(wstate, target)  # horizon and budget, before reading any data
    digest = fingerprint(input_path)
    people, statistics = _period_statistics(model, state, input_path, in_format, target,
                                            state_dir, beam_args)
    code_counts = state["shard_code_counts"]
    wstate, plan, code_counts, emission_seed = synthesize_period(
        model, wstate, statistics, state["seed"], state["num_shards"],
        None if code_counts is None else np.asarray(code_counts), people)
    state["pending"] = None
    if plan is not None:
        if "initial" in plan:
            state["shard_sizes"] = emission.shard_sizes(wstate.num_synthetic,
                                                        state["num_shards"]).tolist()
        state["shard_code_counts"] = code_counts.tolist()
        state["pending"] = {"period": target, "emission_seed": emission_seed,
                            "plan": {part: counts.tolist() for part, counts in plan.items()}}
    state["synthesizer_state"] = wstate.to_dict()
    state["history_version"] = target
    state["fingerprints"][digest] = target
    state["output_dir"] = os.path.abspath(output_dir)
    release_dir.write_json_atomic(os.path.join(state_dir, STATE), state)  # commit point
    _remove_version(state_dir, "history", target - 1)
    return _publish(model, state_dir, output_dir, state, wstate, beam_args, resumed=False)


def _period_statistics(model, state: Dict, input_path: str, in_format: Optional[str],
                       period: int, state_dir: str, beam_args: Sequence[str]):
    """(people in the panel, the period's statistic), writing the people's new history."""
    columns = PanelColumns(**state["columns"])
    fill = missing_code(state["missing_value"], model.alphabet)
    num_shards = state["num_shards"]
    reader = ReadRecordBatches(input_path, in_format)
    shutil.rmtree(os.path.dirname(history_path(state_dir, period, 0)), ignore_errors=True)
    result_path = os.path.join(state_dir, f".statistics-{period:04d}.npy")
    with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
        batches = (pipeline
                   | "Read" >> reader
                   | "Validate" >> _ValidatePeriod(columns, model.alphabet, period, input_path))
        grouped = batches | "Shard" >> GroupByShard(num_shards)
        every_shard = pipeline | "AllShards" >> beam.Create([(j, None) for j in range(num_shards)])
        _ = ({"data": grouped, "all": every_shard}
             | "JoinShards" >> beam.CoGroupByKey()
             | "StepShard" >> beam.MapTuple(lambda shard, parts: step_shard_statistics(
                 shard, parts["data"][0] if parts["data"] else None, model, period,
                 state_dir, fill))
             | "Counts" >> beam.MapTuple(lambda people, counts: np.concatenate([[people], counts]))
             | "Sum" >> beam.CombineGlobally(SumArrays())
             | "Save" >> beam.Map(lambda total: np.save(result_path, total)))
    total = np.load(result_path)
    os.remove(result_path)
    if total[0] == 0:
        raise InputError(f"{input_path}: no records for period {period}")
    return int(total[0]), total[1:]


class _ValidatePeriod(beam.PTransform):
    """Validation of a step's file: a period column, if present, must be the period."""

    def __init__(self, columns: PanelColumns, alphabet, period: int, where: str):
        super().__init__()
        self._args = (columns, tuple(alphabet), period, where)

    def expand(self, batches):
        columns, alphabet, period, where = self._args
        has_period = beam.pvalue.AsSingleton(
            batches | beam.Map(lambda t: columns.period_col in t.column_names)
            | beam.CombineGlobally(all))
        return batches | "EncodePeriod" >> beam.Map(
            lambda table, with_period: _encode_step_batch(table, columns, alphabet, period,
                                                          where, with_period),
            with_period=has_period)


def _encode_step_batch(table, columns, alphabet, period, where, with_period):
    if with_period:
        periods = table.column(columns.period_col).to_numpy(zero_copy_only=False)
        wrong = periods != period
        if wrong.any():
            raise InputError(f"{where}: holds period {periods[np.flatnonzero(wrong)[0]]}, but "
                             f"the next period of this state is {period}")
    return encode_panel_batch(table, columns.id_col, None, columns.value_col, alphabet,
                              (period, period), where=where)


def _publish(model, state_dir: str, output_dir: str, state: Dict, wstate,
             beam_args: Sequence[str], resumed: bool) -> Dict:
    """Emit the pending period's records, publish them and the manifest, clear pending."""
    pending = state["pending"]
    os.makedirs(output_dir, exist_ok=True)
    release_dir.remove_stale_staging(output_dir)
    if pending is not None:
        period = pending["period"]
        staging = release_dir.new_staging_dir(output_dir)
        plan = {"plans": {period: {part: np.asarray(counts)
                                   for part, counts in pending["plan"].items()}},
                "shard_sizes": np.asarray(state["shard_sizes"]),
                "emission_seeds": {period: pending["emission_seed"]}}
        shards, fmt = state["num_shards"], state["format"]
        with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
            (pipeline
             | "Shards" >> beam.Create(range(shards))
             | "Reshuffle" >> beam.Reshuffle()
             | "EmitShard" >> beam.FlatMap(lambda shard: _emit_step_shard(
                 model, shard, period, plan, state_dir))
             | "Write" >> WriteRecordBatches(os.path.join(staging, "synthetic"), fmt,
                                             record_schema(model.alphabet)))
        creates = "initial" in pending["plan"]
        release_dir.publish_staged_files(staging, output_dir, replace_glob=(
            "synthetic-t*" if creates else f"synthetic-t{period:04d}-*"))
    manifest = {**model.manifest(wstate), "sampler": state["sampler"],
                "for_publication": state["seed"] is None, "format": state["format"],
                "mode": "incremental"}
    note = model.before_first_release_note(wstate)
    if note:
        manifest["note"] = note
    release_dir.write_json_atomic(os.path.join(output_dir, MANIFEST), manifest)
    if pending is not None:
        state["pending"] = None
        state["synthetic_version"] = pending["period"]
        release_dir.write_json_atomic(os.path.join(state_dir, STATE), state)
        _remove_version(state_dir, "synthetic", pending["period"] - 1)
    released = pending is not None
    return {"status": "released" if released else "ingested", "period": wstate.period,
            "resumed": resumed, "rho_spent": wstate.ledger.spent,
            "message": f"period {wstate.period}: " + ("released" if released else
                                                      f"ingested; {note}")}


def _emit_step_shard(model, shard: int, period: int, plan: Dict, state_dir: str):
    """One shard's records for one step, saving its people's new codes."""
    people = None
    if "initial" not in plan["plans"][period]:
        first_id = int(np.sum(plan["shard_sizes"][:shard]))
        people = emission.ShardPeople(first_id, np.load(synthetic_path(state_dir, period - 1,
                                                                       shard)), model.codes)
    people, tables = emit_shard_period(people, shard, period, plan, model)
    path = synthetic_path(state_dir, period, shard)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, people.codes)
    return tables


def _remove_version(state_dir: str, kind: str, version: int) -> None:
    if version >= 1:
        shutil.rmtree(os.path.join(state_dir, kind, f"v{version:04d}"), ignore_errors=True)


class SynthesizerJobs:
    """``run`` / ``init`` / ``step`` bound to one synthesizer: ``config`` in, model inside."""

    def __init__(self, model_class):
        self.model_class = model_class

    def run(self, input_path: str, output_dir: str, config, **options) -> Dict:
        """Synthesize a whole panel in one pipeline (options: see :func:`run`)."""
        return run(self.model_class(config), input_path, output_dir, **options)

    def init(self, state_dir: str, config, **options) -> Dict:
        """Create the state of an incremental release (options: see :func:`init`)."""
        return init(self.model_class(config), state_dir, **options)

    def step(self, state_dir: str, input_path: str, output_dir: str, **options) -> Dict:
        """Ingest the next period (options: see :func:`step`)."""
        return step(state_dir, input_path, output_dir, kind=self.model_class.kind, **options)
