"""The tabular stream synthesizer's jobs (Kumar, Strohmer and Vershynin 2024).

* :func:`run` — a whole stream (records with a period column) in one Beam pipeline.
* :func:`init` + :func:`step` — one period per run, the state kept in a directory.

Both fold the same state machine (:class:`continual_synth.mechanisms.tabular_model.
TabularSynthesizer`), with noise drawn per period (``[seed, period]`` for the seeded
sampler), and emit with the same sampling, so with the same seed they release the same
tables.  The release directory holds one synthetic table per period — files
``synthetic-tTTTT-sSSS.<format>`` readable together as one dataset whose ``period``
column says which release a row belongs to (the table at t is the rows with period t)
— and ``manifest.json``.

A step is write-ahead, like the panel synthesizers' (:mod:`continual_synth.pipelines.
jobs`): (1) read the period and compute its workload histograms, (2) add the noise, fit,
and commit the state with the ledger charged and the period's table *pending*, (3) emit
and publish the table and the manifest, (4) clear the pending mark.  A crash before (2)
leaves the old state and nothing released; after (2) a re-run reads no data, draws no
noise and spends nothing, and re-emits the same table.
"""
from __future__ import annotations

import os
import shutil
from typing import Dict, Optional, Sequence

import apache_beam as beam
import numpy as np
import pyarrow.compute as pc

from continual_synth.mechanisms.errors import InputError, StateError
from continual_synth.mechanisms.marginals import Domain
from continual_synth.mechanisms.tabular_model import TabularSynthesizer
from continual_synth.pipelines import release_dir
from continual_synth.pipelines.jobs import (MANIFEST, STATE, _check_format, check_fresh_output,
                                            fingerprint, load_state, save_manifest_after)
from continual_synth.pipelines.options import pipeline_options
from continual_synth.transforms.files import read_dataset
from continual_synth.transforms.read import ReadRecordBatches
from continual_synth.transforms.tabular import (EmitSyntheticTables, PeriodWorkloadHistograms,
                                                emission_tasks, fold_tabular_stream,
                                                increment_codes, synthetic_schema)
from continual_synth.transforms.write import WriteRecordBatches

KIND = "tabular"


def _sampler_fields(seed: Optional[int]) -> Dict:
    return {"sampler": "opendp" if seed is None else "seeded", "for_publication": seed is None}


def infer_domain(input_path: str, period_col: str = "period",
                 in_format: Optional[str] = None) -> Domain:
    """The values that occur in every non-period column (``--infer-domain``).

    NOT differentially private: the domain discloses which values occur, which is why the
    manifest says so.  The user's own ``--domain`` is the private way."""
    table = read_dataset(input_path, in_format)
    attributes = {}
    for name in table.column_names:
        if name == period_col:
            continue
        column = table.column(name)
        values = sorted(v for v in pc.unique(column).to_pylist() if v is not None)
        attributes[name] = values + ([None] if column.null_count else [])
    if not attributes:
        raise InputError(f"{input_path}: no attribute columns besides {period_col!r}")
    return Domain(attributes)


# --------------------------------------------------------------------------- batch


def run(synthesizer: TabularSynthesizer, input_path: str, output_dir: str, *,
        seed: Optional[int] = None, in_format: Optional[str] = None,
        out_format: str = "parquet", period_col: str = "period",
        beam_args: Sequence[str] = ()) -> Dict:
    """Synthesize a whole stream in one pipeline; return the manifest."""
    _check_format(out_format)
    reader = ReadRecordBatches(input_path, in_format)  # fails early on a missing input
    os.makedirs(output_dir, exist_ok=True)
    check_fresh_output(output_dir)
    release_dir.remove_stale_staging(output_dir)
    staging = release_dir.new_staging_dir(output_dir)
    manifest_path = os.path.join(staging, ".manifest.json")
    domain = synthesizer.domain
    schema = synthetic_schema(domain, period_col)
    try:
        with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
            plan = (pipeline
                    | "Read" >> reader
                    | "Histograms" >> PeriodWorkloadHistograms(
                        domain, synthesizer.workloads, period_col,
                        horizon=synthesizer.horizon, where=input_path)
                    | "AllPeriods" >> beam.combiners.ToList()
                    | "Synthesize" >> beam.Map(
                        lambda counts: fold_tabular_stream(counts, synthesizer, seed,
                                                           synthesizer.horizon)))
            increments = plan | "Increments" >> beam.Map(
                lambda p: increment_codes(p["releases"], len(domain.names)))
            written = (plan
                       | "Tasks" >> beam.FlatMap(lambda p: emission_tasks(p["releases"]))
                       | "Emit" >> EmitSyntheticTables(domain, increments, period_col)
                       | "Write" >> WriteRecordBatches(os.path.join(staging, "synthetic"),
                                                       out_format, schema))
            save_manifest_after(written, plan, manifest_path)
        manifest = release_dir.read_json(manifest_path)
        if manifest is None:
            raise InputError(f"{input_path}: the stream holds no records")
        os.remove(manifest_path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    release_dir.publish_staged_files(staging, output_dir)
    manifest.update({**_sampler_fields(seed), "format": out_format, "mode": "run",
                     "period_col": period_col})
    release_dir.write_json_atomic(os.path.join(output_dir, MANIFEST), manifest)
    return manifest


# --------------------------------------------------------------------- incremental


def init(synthesizer: TabularSynthesizer, state_dir: str, *, seed: Optional[int] = None,
         out_format: str = "parquet", period_col: str = "period") -> Dict:
    """Create the state directory of an incremental tabular release."""
    _check_format(out_format)
    if os.path.exists(os.path.join(state_dir, STATE)):
        raise StateError(f"{state_dir} already holds a state; use a new directory")
    state = {"kind": KIND, "config": synthesizer.config_dict(),
             "synthesizer_state": synthesizer.state_to_dict(synthesizer.initial_state()),
             "seed": seed, **_sampler_fields(seed), "format": out_format,
             "period_col": period_col, "fingerprints": {}, "pending": None,
             "output_dir": None, "increments_version": 0}
    release_dir.write_json_atomic(os.path.join(state_dir, STATE), state)
    return state


def _increments_path(state_dir: str, version: int) -> str:
    return os.path.join(state_dir, "increments", f"v{version:04d}.npy")


def step(state_dir: str, input_path: str, output_dir: str, *, in_format: Optional[str] = None,
         period: Optional[int] = None, beam_args: Sequence[str] = ()) -> Dict:
    """Ingest the next period's records and release the synthetic table of the stream so
    far; return a summary (``status`` says what happened)."""
    state = load_state(state_dir, KIND)
    synthesizer = TabularSynthesizer.from_config_dict(state["config"])
    tstate = synthesizer.state_from_dict(state["synthesizer_state"])
    if state["output_dir"] is None:
        check_fresh_output(output_dir)
    elif os.path.abspath(output_dir) != state["output_dir"]:
        raise StateError(f"this state releases into {state['output_dir']}, not {output_dir}")
    seen = (state["fingerprints"].get(fingerprint(input_path))
            if os.path.exists(input_path) else None)
    pending = state["pending"]
    if pending is not None:
        if period not in (None, pending["period"]) or seen not in (None, pending["period"]):
            raise StateError(f"period {pending['period']} was computed but not published "
                             f"(interrupted run); re-run the step with that period's file")
        return _publish(synthesizer, state_dir, output_dir, state, tstate, beam_args,
                        resumed=True)
    target = synthesizer.period(tstate) + 1
    if period is not None:
        if period < 1:
            raise StateError(f"period {period} does not exist: periods start at 1")
        if period < target:
            return _already_released(period)
        if period != target:
            raise StateError(f"period {period} is out of order: the next period is {target}")
    elif seen is not None:
        return _already_released(seen)
    synthesizer.check_step(tstate, target)  # horizon and budget, before reading any data
    digest = fingerprint(input_path)
    counts = _period_histograms(synthesizer, input_path, in_format, target,
                                state["period_col"], state_dir, beam_args)
    tstate, release = synthesizer.step(tstate, counts[1:], [state["seed"], target]
                                       if state["seed"] is not None else None)
    if release["increment"]:  # the baseline's table at t: every sampled increment so far
        previous = (np.load(_increments_path(state_dir, target - 1))
                    if state["increments_version"] else
                    np.zeros((0, len(synthesizer.domain.names)), dtype=np.int32))
        path = _increments_path(state_dir, target)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        np.save(path, np.concatenate([previous, release["codes"]]))
    state["pending"] = {"period": target, "increment": release["increment"],
                        "size": int(release["size"]),
                        "emission_seed": release["emission_seed"],
                        "model": (None if release["increment"]
                                  else synthesizer.model_to_dict(release["model"]))}
    state["synthesizer_state"] = synthesizer.state_to_dict(tstate)
    state["fingerprints"][digest] = target
    state["output_dir"] = os.path.abspath(output_dir)
    if release["increment"]:
        state["increments_version"] = target
    release_dir.write_json_atomic(os.path.join(state_dir, STATE), state)  # commit point
    if release["increment"] and target > 1:
        _remove_file(_increments_path(state_dir, target - 1))
    return _publish(synthesizer, state_dir, output_dir, state, tstate, beam_args,
                    resumed=False)


def _already_released(period: int) -> Dict:
    return {"status": "already-released", "period": period,
            "message": f"period {period} was already ingested; nothing read, nothing spent"}


def _remove_file(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)


def _period_histograms(synthesizer: TabularSynthesizer, input_path: str,
                       in_format: Optional[str], period: int, period_col: str,
                       state_dir: str, beam_args: Sequence[str]) -> np.ndarray:
    """``[n, workload histograms…]`` of one period's records (a Beam pipeline)."""
    reader = ReadRecordBatches(input_path, in_format)
    result_path = os.path.join(state_dir, f".histograms-{period:04d}.npy")
    with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
        _ = (pipeline
             | "Read" >> reader
             | "Histograms" >> PeriodWorkloadHistograms(
                 synthesizer.domain, synthesizer.workloads, period_col, period=period,
                 where=input_path)
             | "Save" >> beam.MapTuple(lambda _, counts: np.save(result_path, counts)))
    if not os.path.exists(result_path):
        raise InputError(f"{input_path}: no records for period {period}")
    counts = np.load(result_path)
    os.remove(result_path)
    return counts


def _publish(synthesizer: TabularSynthesizer, state_dir: str, output_dir: str, state: Dict,
             tstate, beam_args: Sequence[str], resumed: bool) -> Dict:
    """Emit the pending period's table, publish it and the manifest, clear pending."""
    pending = state["pending"]
    period = pending["period"]
    domain = synthesizer.domain
    os.makedirs(output_dir, exist_ok=True)
    release_dir.remove_stale_staging(output_dir)
    staging = release_dir.new_staging_dir(output_dir)
    if pending["increment"]:
        release = {"period": period, "increment": True,
                   "codes": np.load(_increments_path(state_dir, period))}
        increments = release["codes"]
        tasks = emission_tasks([release])
    else:
        release = {"period": period, "increment": False, "size": pending["size"],
                   "model": synthesizer.model_from_dict(pending["model"]),
                   "emission_seed": pending["emission_seed"]}
        increments = np.zeros((0, len(domain.names)), dtype=np.int32)
        tasks = emission_tasks([release])
    schema = synthetic_schema(domain, state["period_col"])
    fmt = state["format"]
    try:
        with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
            codes = pipeline | "Increments" >> beam.Create([increments])
            (pipeline
             | "Tasks" >> beam.Create(tasks)
             | "Emit" >> EmitSyntheticTables(domain, codes, state["period_col"])
             | "Write" >> WriteRecordBatches(os.path.join(staging, "synthetic"), fmt, schema))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    release_dir.publish_staged_files(staging, output_dir,
                                     replace_glob=f"synthetic-t{period:04d}-*")
    manifest = {**synthesizer.manifest(tstate), "sampler": state["sampler"],
                "for_publication": state["for_publication"], "format": fmt,
                "mode": "incremental", "period_col": state["period_col"]}
    release_dir.write_json_atomic(os.path.join(output_dir, MANIFEST), manifest)
    state["pending"] = None
    release_dir.write_json_atomic(os.path.join(state_dir, STATE), state)
    return {"status": "released", "period": period, "resumed": resumed,
            "rows": int(sum(t[2] for t in tasks)),
            "epsilon_spent": manifest.get("epsilon_spent"),
            "message": f"period {period}: released the synthetic table of the stream so far"}

