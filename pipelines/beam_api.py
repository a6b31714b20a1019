"""Beam PTransforms for users' own pipelines (``continual_synth.beam``).

    import apache_beam as beam
    import continual_synth.beam as csb

    with beam.Pipeline() as p:
        released = (p
                    | beam.Create(records)            # dicts or beam.Rows: id, period, value
                    | csb.WindowRelease(window=3, horizon=12, rho=0.05))
        released.synthetic | beam.Map(print)          # the synthetic records, as dicts
        released.manifest | beam.Map(print)           # the release's manifest (one element)

Each transform takes a PCollection of records — dicts or schema'd ``beam.Row``\\ s with the
columns a ``run`` input holds (a period column included), or pyarrow Tables / RecordBatches
for speed — from whatever source the pipeline reads, and returns a tagged pair:
``synthetic``, the synthetic records (dicts, or pyarrow Tables with ``as_tables=True``, one
per shard and period), and ``manifest``, the manifest a ``run`` would publish (its fields
classified by :mod:`~continual_synth.pipelines.release.publication`; no ``files``); the
tabular transform adds ``accuracy``, each period's error bounds (the documents a ``run``
writes as ``accuracy-tTTTT.json``, :mod:`~continual_synth.mechanisms.tabular_accuracy`).
Between the
records and the synthetic records run the very stages of ``continual-synth FAMILY run``
(:class:`~continual_synth.pipelines.families.jobs.SynthesizePanelTables`, :class:`~continual_synth.
pipelines.families.tabular.SynthesizeTables`, PrivHP's combine, step and sampling), so with the same
seed a pipeline releases what the command line's ``run`` releases.  Keyword arguments are
``run``'s options (``rho=0.05``, ``alphabet=[0, 1, 2]``, a tabular ``domain`` as a dict …),
checked by its parser before the pipeline is built.

These are batch transforms over a whole input (periods 1..T, or PrivHP's points): the
synthesizer folds over the periods on one worker, the statistics and the emission are
sharded.  A continual release that goes on as data arrives — one period per run, or a
stream — keeps its state between periods in a state directory: use the Python API
(:mod:`continual_synth.pipelines.api`) or ``continual-synth FAMILY step | stream``.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Dict

import apache_beam as beam
import pyarrow as pa

from continual_synth.pipelines import api
from continual_synth.pipelines.release import publication

__all__ = ["WindowRelease", "CumulativeRelease", "TabularRelease", "PrivHPRelease"]

SYNTHETIC, MANIFEST, ACCURACY = "synthetic", "manifest", "accuracy"
BATCH_ROWS = 10_000  # records per Arrow table built from dicts or Rows


def _record_dict(record) -> Dict[str, Any]:
    """A dict of a record given as a dict or a ``beam.Row``."""
    if isinstance(record, dict):
        return record
    if hasattr(record, "_asdict"):
        return record._asdict()
    if hasattr(record, "as_dict"):
        return record.as_dict()
    return dict(vars(record))


class _SplitForm(beam.DoFn):
    """Arrow tables (and record batches) to the main output, records to ``rows``."""

    def process(self, element):
        if isinstance(element, pa.Table):
            yield element
        elif isinstance(element, pa.RecordBatch):
            yield pa.Table.from_batches([element])
        else:
            yield beam.pvalue.TaggedOutput("rows", _record_dict(element))


def _table_of_rows(rows) -> pa.Table:
    return pa.Table.from_pylist(rows)


def _flat(table: pa.Table, read) -> pa.Table:
    """``table``, its columns checked as an input file's are (no name twice, the columns
    the job reads flat: :func:`~continual_synth.transforms.files.check_columns`)."""
    from continual_synth.transforms.files import arrow_columns, check_columns
    check_columns("the pipeline's records", arrow_columns(table.schema), read)
    return table


class ToArrowTables(beam.PTransform):
    """Records (dicts, ``beam.Row``\\ s, pyarrow Tables or RecordBatches) → pyarrow Tables:
    records in batches of up to :data:`BATCH_ROWS` rows, tables as they are; ``read``: the
    columns the job reads, which must be flat (None: every column)."""

    def __init__(self, read=None):
        super().__init__()
        self.read = None if read is None else tuple(read)

    def expand(self, records):
        split = records | "Form" >> beam.ParDo(_SplitForm()).with_outputs("rows",
                                                                           main="tables")
        batched = (split.rows
                   | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=BATCH_ROWS)
                   | "Table" >> beam.Map(_table_of_rows))
        return ((split.tables, batched) | "Tables" >> beam.Flatten()
                | "Flat" >> beam.Map(_flat, self.read))


class _Release(beam.PTransform):
    """What the four transforms share: options parsed by ``run``'s parser, the records as
    Arrow tables, the family's stages, the synthetic records in the form asked for."""

    family = ""

    def __init__(self, *, as_tables: bool = False, **options):
        super().__init__()
        self.as_tables = as_tables
        self._folder = tempfile.mkdtemp(prefix="continual-synth-beam-")
        argv = api.option_argv(self.family, "run", options, type(self).__name__,
                               self._work_file)
        # --input and --output are the pipeline's own source and sink
        self.args = api.parse_options(self.family, "run",
                                      argv + ["--input", "-", "--output", "-"])
        self.check()

    def check(self) -> None:
        """The family's checks of its options that the parser cannot make (when the
        transform is built, before any pipeline runs)."""

    def _work_file(self, name: str, text: str) -> str:
        path = os.path.join(self._folder, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        return path

    def expand(self, records):
        tables = records | "ToArrow" >> ToArrowTables(self.read_columns())
        synthetic, manifest, *accuracy = self.synthesize(tables)
        if not self.as_tables:
            synthetic = synthetic | "ToDicts" >> beam.FlatMap(lambda table: table.to_pylist())
        manifest = manifest | "Publish" >> beam.Map(_published)
        return _Released(synthetic, manifest, *accuracy)

    def synthesize(self, tables):
        raise NotImplementedError

    def read_columns(self):
        """The columns of the records the family reads."""
        raise NotImplementedError


class _Released(dict):
    """The outputs of a release transform: ``.synthetic`` and ``.manifest`` (also as
    ``released["synthetic"]``, ``released["manifest"]``), and a tabular release's
    ``.accuracy`` (None for the other families)."""

    def __init__(self, synthetic, manifest, accuracy=None):
        super().__init__({SYNTHETIC: synthetic, MANIFEST: manifest,
                          **({} if accuracy is None else {ACCURACY: accuracy})})

    @property
    def accuracy(self):
        return self.get(ACCURACY)

    @property
    def synthetic(self):
        return self[SYNTHETIC]

    @property
    def manifest(self):
        return self[MANIFEST]


def _published(manifest: Dict) -> Dict:
    """A ``run``'s manifest as the boundary publishes it (no ``files``: no folder)."""
    return publication.manifest({key: value for key, value in manifest.items()
                                 if key != "files"})


class _PanelRelease(_Release):
    def read_columns(self):
        return (self.args.id_col, self.args.period_col, self.args.value_col)

    def check(self) -> None:
        from continual_synth.pipelines.families.jobs import check_drop_fills
        check_drop_fills(self.args.invalid_records, self.args.missing_value)

    def synthesize(self, tables):
        from continual_synth.pipelines.families import jobs
        from continual_synth.pipelines.commands import panel_cli
        from continual_synth.pipelines.commands.options import missing_code
        from continual_synth.transforms.invalid_records import sink_for
        model = panel_cli.synthesizer_from_args(self.args)
        common = panel_cli.common_options(self.args, model.alphabet)
        released = tables | "Synthesize" >> jobs.SynthesizePanelTables(
            model, seed=common["seed"], columns=common["columns"],
            fill=missing_code(common["missing_value"], model.alphabet),
            num_shards=common["num_shards"], where="the pipeline's records",
            sink=sink_for(self.args.invalid_records))
        extras = {"format": None, "mode": "beam"}
        manifest = released["plan"] | "Manifest" >> beam.Map(
            lambda plan: {**plan["manifest"], **extras})
        return released["records"] | "Records" >> beam.Values(), manifest


class WindowRelease(_PanelRelease):
    """Bun et al. (2024) Algorithm 1 over a panel's records (``id``, ``period``,
    ``value``): ``window``, ``horizon``, ``rho`` and ``window run``'s other options."""

    family = "window"


class CumulativeRelease(_PanelRelease):
    """Bun et al. (2024) Algorithm 2 over a panel's records: ``horizon``, ``rho`` and
    ``cumulative run``'s other options."""

    family = "cumulative"


class TabularRelease(_Release):
    """Kumar et al. (2024) over a stream's records (the domain's attributes and the period
    column): ``domain`` (a dict or a JSON file), ``epsilon``, ``horizon`` (required: T is
    a public input) and ``tabular run``'s other options."""

    family = "tabular"

    def read_columns(self):
        return None  # every column but the period is an attribute

    def synthesize(self, tables):
        from continual_synth.mechanisms.errors import InputError
        from continual_synth.pipelines.families import tabular
        from continual_synth.pipelines.commands.tabular_cli import synthesizer_from_args
        if self.args.horizon is None:
            raise InputError("TabularRelease needs horizon: the horizon T is a public input, "
                             "never read off the records")
        if self.args.infer_domain:
            raise InputError("TabularRelease needs domain: the domain is a public input, "
                             "never read off the records")
        synthesizer = synthesizer_from_args(self.args)
        from continual_synth.transforms.invalid_records import sink_for
        released = tables | "Synthesize" >> tabular.SynthesizeTables(
            synthesizer, seed=self.args.seed, period_col=self.args.period_col,
            where="the pipeline's records", sink=sink_for(self.args.invalid_records))
        extras = {"domain_source": tabular.domain_source(synthesizer),
                  "sampler": "opendp" if self.args.seed is None else "seeded",
                  "format": None, "mode": "beam", "period_col": self.args.period_col,
                  "horizon_source": "--horizon"}
        manifest = released["manifest"] | "Manifest" >> beam.Map(
            lambda document: {**document, **extras})
        return (released["records"] | "Records" >> beam.Values(), manifest,
                released["accuracy"])


class PrivHPRelease(_Release):
    """Holland et al. (2025), PrivHP, over points (records holding ``columns``):
    ``columns``, ``bounds``, ``epsilon``, ``samples``, ``depth`` (or ``expected_n``) and
    ``privhp run``'s other options; one release of all the points (continual PrivHP,
    with ``horizon``, steps through the Python API or the command line)."""

    family = "privhp"

    def read_columns(self):
        from continual_synth.pipelines.commands.privhp_cli import _columns
        return _columns(self.args.columns)

    def synthesize(self, tables):
        from continual_synth.mechanisms.errors import InputError
        from continual_synth.mechanisms.privhp_synthesizer import PrivHPSynthesizer
        from continual_synth.pipelines.families.privhp import manifest_extras
        from continual_synth.pipelines.commands.privhp_cli import config_from_args
        from continual_synth.transforms.invalid_records import sink_for
        from continual_synth.transforms.privhp import (BuildPrivHP, ReleasePrivHP,
                                                       SampleSyntheticPoints, batch_points)
        if self.args.horizon is not None:
            raise InputError("PrivHPRelease releases all the points once; continual PrivHP "
                             "(horizon) steps through the Python API or the command line")
        columns, bounds, config, depth_from = config_from_args(self.args)
        clip, shards = self.args.clip, self.args.shards
        synthesizer = PrivHPSynthesizer(config, self.args.samples)
        where = "the pipeline's records"
        sink = sink_for(self.args.invalid_records)
        points = tables | "Points" >> beam.Map(
            lambda table: batch_points(table, columns, bounds, clip, where, sink=sink))
        released = (points
                    | "PrivHP" >> BuildPrivHP(config)
                    | "Release" >> ReleasePrivHP(synthesizer, self.args.seed))
        records = (released
                   | "Sample" >> SampleSyntheticPoints(shards, bounds, columns)
                   | "Records" >> beam.Values())
        extras = manifest_extras(config, columns, bounds, self.args.samples, shards, None,
                                 clip, depth_from)
        manifest = released | "Manifest" >> beam.MapTuple(
            lambda state, release: {**synthesizer.manifest(state), **extras, "mode": "beam"})
        return records, manifest
