"""The tabular stream synthesizer's jobs (Kumar, Strohmer and Vershynin 2024).

* :func:`run` — a whole stream (records with a period column) in one Beam pipeline.
* :func:`init` + :func:`step` — one period per run, the state kept in a directory.

Both fold the same state machine (:class:`continual_synth.mechanisms.tabular_synthesizer.
TabularSynthesizer`), with noise drawn per period (:func:`continual_synth.mechanisms.
synthesizer.period_sampler`), and emit with the same sampling, so with the same seed they release the same
tables.  The release directory holds files ``synthetic-tTTTT-sSSS.<format>`` readable
together as one dataset whose ``period`` column says which release a row belongs to —
the proposed method's table g_t is the rows with period t; the baseline's increment of t
is the rows with period t, appended, so its table at t is the rows of periods ≤ t (the
manifest's ``release_form`` says which) — and ``manifest.json``.

The lifecycle (staging, ownership, write-ahead commits, fencing) is
:mod:`continual_synth.pipelines.release.lifecycle`'s; :class:`TabularJob` supplies the period's
workload histograms, the step and the emission.  The baseline's increment, sampled in
the step, is the one private file a version names, until it is published (appended).
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.record_checks import REFUSE, Problems, check_mode
from continual_synth.mechanisms.marginals import Domain
from continual_synth.mechanisms.synthesizer import TableRelease
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
from continual_synth.pipelines.release import lifecycle, logs
from continual_synth.pipelines.families.jobs import save_manifest_after
from continual_synth.pipelines.release.lifecycle import IncrementalJob
from continual_synth.pipelines.commands.options import (check_distinct_columns,
                                                        pipeline_options)
from continual_synth.pipelines.release.publication import DOMAIN_FROM_DATA, DOMAIN_GIVEN
from continual_synth.transforms import monitoring, packed_json, storage
from continual_synth.transforms.files import (accuracy_file_name, check_dataset, check_format,
                                              detect_format, read_dataset, read_file)
from continual_synth.transforms.monitoring import (RECORDS_READ, SYNTHETIC_RECORDS_WRITTEN,
                                                   CountPeriodsReleased, CountRecords)
from continual_synth.transforms.invalid_records import DropSink, parts_folder, sink_for
from continual_synth.transforms.periods import periods_out_of_range, record_periods
from continual_synth.transforms.read import DEFAULT_BATCH_ROWS, file_batches, require_columns
from continual_synth.transforms.read import ReadRecordBatches
from continual_synth.transforms.tabular import (ACCURACY, MANIFEST, TASK,
                                                EmitSyntheticTables, PeriodWorkloadHistograms,
                                                model_file_tasks, of_kind, release_tasks,
                                                synthesize_periods, synthetic_schema,
                                                write_accuracy)
from continual_synth.transforms.write import WriteRecordBatches

__all__ = ["KIND", "NO_HORIZON", "STEP_DOMAIN_HINT", "read_domain", "check_period_col",
           "NEAR_UNIQUE_SHARE", "NEAR_UNIQUE_MIN_VALUES", "domain_source", "infer_domain",
           "last_period", "SynthesizeTables", "run", "initial_document", "TabularJob",
           "text_columns"]

KIND = "tabular"
#: ``horizon_source`` of a state whose synthesizer has no horizon (steps without --horizon)
NO_HORIZON = "none: no --horizon was given (unbounded counters)"
#: the hint of a step's file that lacks an attribute column: ``step`` takes no
#: ``--domain`` (its state keeps the one ``init`` was given), so not to pass one
STEP_DOMAIN_HINT = ("the state was made with a --domain that holds them: a new state "
                    "('tabular init') is needed to change it")


def read_domain(path: str) -> Domain:
    """The public domain in the JSON file ``path`` (``--domain``), read through Beam's
    FileSystems: a local path, ``gs://``, ``s3://`` …"""
    if not storage.is_file(path):
        raise InputError(f"domain file {path} does not exist")
    return Domain.from_json(storage.read_bytes(path), f"domain file {path}")


def check_period_col(domain: Domain, period_col: str, domain_from: str = "--domain") -> None:
    """The period column is a column of its own, not one of the domain's attributes
    (checked before any data is read: it would be read as both); ``domain_from`` names
    where the domain came from in the message."""
    check_distinct_columns([(domain_from, domain.names), ("--period-col", [period_col])])


#: ``--infer-domain`` warns of an attribute with more distinct values (null counted as
#: one) than this share of the rows read and at least :data:`NEAR_UNIQUE_MIN_VALUES`:
#: an id, a timestamp or an unbinned number, whose values the release would publish.
#: A categorical attribute has its values repeated many times over (CCES's largest has
#: 8 values in 64 600 rows); a column whose values are mostly distinct is not one.
NEAR_UNIQUE_SHARE = 0.5
#: ... and the minimum number of values for that warning: on a few dozen rows a short
#: categorical column (8 values in 12 rows) is not taken for an id.
NEAR_UNIQUE_MIN_VALUES = 20


def domain_source(synthesizer: TabularSynthesizer) -> str:
    """Where a release's domain came from (``domain_source``; read off the data, it makes
    the release one not for publication: :mod:`continual_synth.pipelines.release.publication`)."""
    return DOMAIN_FROM_DATA if synthesizer.domain_inferred else DOMAIN_GIVEN


def infer_domain(input_path: str, period_col: str = "period",
                 in_format: Optional[str] = None) -> Domain:
    """The values that occur in every non-period column (``--infer-domain``).

    NOT differentially private: the domain discloses which values occur, which is why the
    manifest says so.  The user's own ``--domain`` is the private way.  Every column
    becomes an attribute, so a nearly unique one (an id; see :data:`NEAR_UNIQUE_SHARE`)
    is logged as a warning naming it: its values would be published in the manifest's
    domain and the synthetic rows."""
    table = read_dataset(input_path, in_format, columns=None)  # every column is read
    attributes = {}
    for name in table.column_names:
        if name == period_col:
            continue
        column = table.column(name)
        values = sorted(v for v in pc.unique(column).to_pylist() if v is not None)
        attributes[name] = values + ([None] if column.null_count else [])
    if not attributes:
        raise InputError(f"{input_path}: no attribute columns besides {period_col!r}")
    for name, values in attributes.items():
        if len(values) >= NEAR_UNIQUE_MIN_VALUES and \
                len(values) > NEAR_UNIQUE_SHARE * table.num_rows:
            logs.LOGGER.warning(
                "--infer-domain: column %r holds %d distinct values in the %d rows read "
                "(more than %d %% of them): an id or an unbinned number? It becomes an "
                "attribute, and its values are published in the manifest's domain and the "
                "synthetic rows; drop the column from the input, bin it, or give --domain "
                "(docs/tabular.md, Domain)", name, len(values), table.num_rows,
                round(100 * NEAR_UNIQUE_SHARE))
    return Domain(attributes)


def last_period(input_path: str, period_col: str = "period",
                in_format: Optional[str] = None, invalid_records: str = REFUSE) -> int:
    """The largest value of the period column (``run``'s default horizon T), of the
    records whose period is valid (``invalid_records`` drop: the others are left out, as
    the run drops them).

    Read from the data, so NOT a public parameter (a stream whose last period holds one
    record has a neighbour with a smaller T): the manifest says where T came from
    (``horizon_source``) and the release is marked not for publication."""
    fmt = detect_format(input_path, in_format)
    last = 0
    for path in check_dataset(input_path, fmt, columns=[period_col]):  # only it is read
        for offset, table in file_batches(path, fmt, [period_col], DEFAULT_BATCH_ROWS,
                                          "--period-col"):
            if table.num_rows:
                problems = Problems(table.num_rows, invalid_records)
                periods = record_periods(table, period_col, path, offset, problems)
                periods_out_of_range(periods, path, offset, problems, period_col=period_col)
                valid = periods[~problems.invalid]
                if valid.size:
                    last = max(last, int(valid.max()))
    if last < 1:
        raise InputError(f"{input_path}: the stream holds no records")
    return last


# --------------------------------------------------------------------------- batch


class SynthesizeTables(beam.PTransform):
    """A whole stream's records (with the period column) → ``{"manifest": the manifest
    (one element), "records": (key, pa.Table) synthetic records, "accuracy": each
    period's error bounds (the document of ``accuracy-tTTTT.json``)}``: the periods' workload
    histograms, the synthesizer folded over periods 1..T, the sharded sampling (``run``'s
    pipeline between reading and writing; ``continual_synth.beam`` too).  Each period's
    shards leave the fold as it releases them (no element holds all periods), then the
    manifest."""

    def __init__(self, synthesizer: TabularSynthesizer, *, seed: Optional[int],
                 period_col: str, where: str, sink: Optional[DropSink] = None):
        super().__init__()
        self.synthesizer, self.seed, self.period_col, self.where = (synthesizer, seed,
                                                                    period_col, where)
        self.sink = sink  # drop mode: where the invalid records go

    def expand(self, batches):
        synthesizer, period_col = self.synthesizer, self.period_col
        released = (batches
                    | "Histograms" >> PeriodWorkloadHistograms(
                        synthesizer.domain, synthesizer.input_workloads, period_col,
                        horizon=synthesizer.horizon, where=self.where, sink=self.sink)
                    | "AllPeriods" >> beam.combiners.ToList()
                    | "Synthesize" >> beam.FlatMap(
                        synthesize_periods, synthesizer, self.seed, synthesizer.horizon,
                        monitoring.command()))
        records = (released
                   | "Tasks" >> beam.FlatMap(of_kind(TASK))
                   | "Emit" >> EmitSyntheticTables(synthesizer.domain, period_col)
                   | "CountWritten" >> CountRecords(SYNTHETIC_RECORDS_WRITTEN))
        return {"manifest": released | "Manifest" >> beam.FlatMap(of_kind(MANIFEST)),
                "records": records,
                "accuracy": released | "Accuracy" >> beam.FlatMap(of_kind(ACCURACY))}


def run(synthesizer: TabularSynthesizer, input_path: str, output_dir: str, *,
        seed: Optional[int] = None, in_format: Optional[str] = None,
        out_format: str = "parquet", period_col: str = "period",
        beam_args: Sequence[str] = (), horizon_source: str = "--horizon",
        invalid_records: str = REFUSE) -> Dict:
    """Synthesize a whole stream in one pipeline; return the manifest
    (``horizon_source``: where the synthesizer's horizon T came from, for the manifest;
    ``invalid_records``: refuse the stream at its first invalid record, or drop each)."""
    check_format(out_format)
    sink = sink_for(check_mode(invalid_records))
    domain = synthesizer.domain
    check_period_col(domain, period_col)
    reader = ReadRecordBatches(input_path, in_format,  # fails early on a missing input
                               string_columns=text_columns(domain),
                               columns=[*domain.names, period_col])
    schema = synthetic_schema(domain, period_col)

    def write(staging: str, plan_path: str) -> None:
        with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
            released = (pipeline
                        | "Read" >> reader
                        | "CountRead" >> CountRecords(RECORDS_READ)
                        | "Synthesize" >> SynthesizeTables(synthesizer, seed=seed,
                                                           period_col=period_col,
                                                           where=input_path, sink=sink))
            written = (released["records"]
                       | "Write" >> WriteRecordBatches(storage.join(staging, "synthetic"),
                                                       out_format, schema))
            bounds = released["accuracy"] | "WriteAccuracy" >> beam.Map(
                lambda document: write_accuracy(staging, document))
            plan = released["manifest"] | "AsPlan" >> beam.Map(lambda m: {"manifest": m})
            save_manifest_after((written, bounds) | "AllWritten" >> beam.Flatten(), plan,
                                plan_path)
        logs.record_metrics(pipeline)

    extras = {"domain_source": domain_source(synthesizer),
              "sampler": "opendp" if seed is None else "seeded",
              "format": out_format, "mode": "run",
              "period_col": period_col, "horizon_source": horizon_source}
    logs.LOGGER.info("reading %s", input_path)
    return lifecycle.release_whole_run(output_dir, write, extras,
                                       f"{input_path}: the stream holds no records")


# --------------------------------------------------------------------- incremental


def initial_document(synthesizer: TabularSynthesizer, *, seed: Optional[int] = None,
                     out_format: str = "parquet", period_col: str = "period",
                     invalid_records: str = REFUSE) -> Dict:
    """The state document :func:`init` creates (version 0), checked but not written; it
    records the period column, where the horizon T came from (``horizon_source``,
    which the manifest reports as ``run``'s does: an incremental release never reads T
    from the data) and what its steps do with an invalid record (``invalid_records``)."""
    check_format(out_format)
    check_period_col(synthesizer.domain, period_col)
    return lifecycle.new_state_document(
        KIND, seed, out_format, config=synthesizer.config_dict(),
        synthesizer_state=synthesizer.state_to_dict(synthesizer.initial_state()),
        period_col=period_col, horizon_source=_horizon_source(synthesizer.horizon),
        invalid_records=check_mode(invalid_records))


def _horizon_source(horizon: Optional[int]) -> str:
    """``horizon_source`` of an incremental release: its T is ``--horizon``'s, if any."""
    return "--horizon" if horizon is not None else NO_HORIZON


class TabularJob(IncrementalJob):
    """The write-ahead step of the tabular stream synthesizer."""

    kind = KIND

    def empty_period_valid(self, state: Dict) -> bool:
        """Always: a period's batch may be empty (Kumar et al.: the counters and the fit
        still step); ``step`` takes a file with the attribute columns and no rows."""
        return True

    def empty_period(self, state: Dict, period: int) -> pa.Table:
        """The domain's attribute columns, typed as the released tables', no rows."""
        domain = TabularSynthesizer.from_config_dict(state["config"]).domain
        return synthetic_schema(domain).remove(0).empty_table()  # the period comes first

    def canonical(self, document: Dict) -> Dict:
        """A state saved before ``horizon_source`` was recorded compares equal to today's
        document for the same options (the source follows from the configuration)."""
        if "horizon_source" in document:
            return document
        horizon = TabularSynthesizer.from_config_dict(document["config"]).horizon
        return {**document, "horizon_source": _horizon_source(horizon)}

    def synthesizer(self, state: Dict):
        synthesizer = TabularSynthesizer.from_config_dict(state["config"])
        return synthesizer, synthesizer.state_from_dict(state["synthesizer_state"])

    def period_statistics(self, state, input_path, in_format, period, store, run_dir,
                          beam_args, invalid_records):
        """The workload histograms of the period's new records (Kumar et al. 2024 §7.2)."""
        synthesizer, _ = self.synthesizer(state)
        counts = _period_histograms(synthesizer, input_path, in_format, period,
                                    state["period_col"], run_dir, beam_args,
                                    sink_for(invalid_records, parts_folder(run_dir)))
        return counts[1:], {}

    def advance(self, state, period, statistics, files, store, run_dir) -> Dict:
        synthesizer, tstate = self.synthesizer(state)
        tstate, release, _ = synthesizer.step_period(tstate, period, statistics, state["seed"])
        files = {**state["files"], **files}
        rows = release.size
        if release.increment:  # sampled now: kept (private) until it is published
            path = storage.join(run_dir, "increment.npy")
            storage.save_array(path, release.codes)
            files["increment"] = store.relative(path)
            rows = int(release.codes.shape[0])
        # the released model: g_t is the state's own model (proposed), written once, in
        # the synthesizer's state; a model of its own only if a release ever differs
        own_model = not release.increment and release.model is not tstate.model
        pending = {"period": period, "increment": release.increment, "rows": rows,
                   "size": release.size, "emission_seed": release.emission_seed,
                   "model": synthesizer.model_to_dict(release.model) if own_model else None,
                   "accuracy": release.accuracy}
        return {**state, "synthesizer_state": synthesizer.state_to_dict(tstate),
                "files": files, "pending": pending}

    def emit(self, state, staging_dir, store, run_dir, beam_args):
        domain = TabularSynthesizer.from_config_dict(state["config"]).domain  # no state
        pending = state["pending"]
        period = pending["period"]
        files = {name: path for name, path in state["files"].items() if name != "increment"}
        if pending["increment"]:  # appended: the period's rows are its increment
            codes = storage.load_array(store.path(state["files"]["increment"]))
            tasks = release_tasks(TableRelease(period, pending["size"], True,
                                               pending["emission_seed"], codes=codes))
        else:  # the shards read the model from this run's folder (private, removed)
            model_path = storage.join(run_dir, "model.json")
            model = pending["model"]  # None: the state's own model is g_t
            storage.write_bytes(model_path, packed_json.dumps(
                model if model is not None else state["synthesizer_state"]["model"]))
            tasks = model_file_tasks(period, pending["size"], model_path,
                                     pending["emission_seed"])
        schema = synthetic_schema(domain, state["period_col"])
        with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
            _ = (pipeline | "Period" >> beam.Create([period])
                 | "CountPeriod" >> CountPeriodsReleased(lambda _: 1))
            (pipeline
             | "Tasks" >> beam.Create(tasks)
             | "Emit" >> EmitSyntheticTables(domain, state["period_col"])
             | "CountWritten" >> CountRecords(SYNTHETIC_RECORDS_WRITTEN)
             | "Write" >> WriteRecordBatches(storage.join(staging_dir, "synthetic"),
                                             state["format"], schema))
        logs.record_metrics(pipeline)
        if pending.get("accuracy") is not None:  # (a step pending before bounds existed: none)
            write_accuracy(staging_dir, pending["accuracy"])
        return (f"synthetic-t{period:04d}-*", accuracy_file_name(period)), files

    def manifest(self, state: Dict) -> Dict:
        synthesizer, tstate = self.synthesizer(state)
        return {**synthesizer.manifest(tstate), "domain_source": domain_source(synthesizer),
                "sampler": state["sampler"], "format": state["format"],
                "mode": "incremental", "period_col": lifecycle.recorded(state, "period_col"),
                "horizon_source": lifecycle.recorded(state, "horizon_source")}

    def summary(self, state: Dict, pending: Dict, released: bool, resumed: bool) -> Dict:
        period = pending["period"]
        return {"status": "released", "period": period, "resumed": resumed,
                "rows": pending["rows"],
                "epsilon_spent": self.budget_spent(state),
                "message": f"period {period}: released the synthetic table of the stream so far"
                           + (" (its increment, appended)" if pending["increment"] else "")}


def text_columns(domain: Domain) -> list:
    """The attributes whose domain values are text: read from CSV as text."""
    return [name for name, values in domain.values.items()
            if all(v is None or isinstance(v, str) for v in values)]


def _check_empty_period(input_path: str, in_format: Optional[str], domain: Domain,
                        all_dropped: bool = False) -> None:
    """That a period's input without records still has the domain's columns (a step's:
    the hint is that the state fixes them, :data:`STEP_DOMAIN_HINT`); ``all_dropped``: its
    records may all have been dropped as invalid."""
    fmt = detect_format(input_path, in_format)
    for path in check_dataset(input_path, fmt, allow_empty=True):
        table = read_file(path, fmt)
        if table.num_rows and not all_dropped:
            raise InputError(f"{input_path}: no records for this period")
        require_columns(table.column_names, domain.names, path, hint=STEP_DOMAIN_HINT)


def _period_histograms(synthesizer: TabularSynthesizer, input_path: str,
                       in_format: Optional[str], period: int, period_col: str,
                       run_dir: str, beam_args: Sequence[str],
                       sink: Optional[DropSink] = None) -> np.ndarray:
    """``[n, workload histograms…]`` of one period's records (a Beam pipeline).  A file
    with the domain's columns and no records is a period without records (zeros), as
    ``run`` releases a period the period column skips; so is a file whose every record
    was dropped (``sink``: drop invalid records into it)."""
    reader = ReadRecordBatches(input_path, in_format, allow_empty=True,
                               string_columns=text_columns(synthesizer.domain),
                               columns=[*synthesizer.domain.names, period_col])
    result_path = storage.join(run_dir, "histograms.npy")
    with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
        _ = (pipeline
             | "Read" >> reader
             | "CountRead" >> CountRecords(RECORDS_READ)
             | "Histograms" >> PeriodWorkloadHistograms(
                 synthesizer.domain, synthesizer.input_workloads, period_col, period=period,
                 where=input_path, hint=STEP_DOMAIN_HINT, sink=sink)
             | "Save" >> beam.MapTuple(lambda _, counts: storage.save_array(result_path, counts)))
    logs.record_metrics(pipeline)
    if not storage.is_file(result_path):
        _check_empty_period(input_path, in_format, synthesizer.domain,
                            all_dropped=sink is not None)
        return np.zeros(1 + synthesizer.histogram_width, dtype=np.int64)
    counts = storage.load_array(result_path)
    storage.remove(result_path)
    return counts
