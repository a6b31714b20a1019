"""The Python API: each synthesizer as an object, for notebooks and services.

    import continual_synth as cs
    synth = cs.WindowSynthesizer(window=3, horizon=12, rho=0.05, seed=1)
    release = synth.step(wave)            # one period's records (id, value): Arrow or pandas
    release.synthetic                     # pyarrow.Table: the synthetic records this step released
    release.manifest                      # the release's manifest, as manifest.json holds it
    synth.save("state/")                  # the state directory the command line uses
    synth = cs.load("state/")
    cs.WindowSynthesizer(window=3, horizon=12, rho=0.05).run(panel)   # id, period, value

The objects are a face of the command line's jobs, run in this process: their keyword
arguments are the options of ``continual-synth FAMILY init`` (``rho=0.05`` is ``--rho
0.05``, ``public_population=True`` the flag, ``alphabet=[0, 1, 2]`` and ``columns=["x",
"y"]`` lists, ``bounds=[(0, 1), (-5, 5)]`` pairs, a tabular ``domain`` a dict or a JSON
file), parsed and checked by the same parser, and a step is the lifecycle's write-ahead
step (:func:`~continual_synth.pipelines.release.lifecycle.incremental_step`) on a state
directory: ownership, fencing, the ledger and the publication boundary apply, and with
the same seed the API, ``run`` and ``init`` + ``step`` release identical records.  Errors
are the typed errors the command line turns into exit 2 (:class:`~continual_synth.
mechanisms.errors.InputError`, :class:`~continual_synth.mechanisms.errors.StateError`,
:class:`~continual_synth.mechanisms.accounting.BudgetExceededError`).

Where things are kept.  ``state`` (a path, local or ``gs://`` / ``s3://`` …) is the state
directory — private: it holds the counts, and for the panels people's last reports — and
``output`` the release folder the steps publish into.  Without ``state`` both live in a
private temporary directory that is removed, with everything in it, when the object is
closed or collected; :meth:`ContinualSynthesizer.save` moves them to a lasting place (the
state to ``path``, the release beside it, ``path`` + ``-release``, unless ``output`` is
given), and :func:`load` opens a saved or command-line state again.  A period's records
are written for the step into the state's own ``spool/`` folder (on the state's store, so
that a distributed runner's workers read them there) and removed after it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import pyarrow as pa

from continual_synth.mechanisms.errors import InputError, StateError

__all__ = ["Release", "ContinualSynthesizer", "WindowSynthesizer", "CumulativeSynthesizer",
           "TabularSynthesizer", "PrivHPSynthesizer", "load"]

#: options the objects set themselves, not keyword arguments
_MANAGED = {"--state", "--exists-ok", "--verbose", "--input", "--output", "--input-format",
            "--period", "--wait"}
SPOOL = "spool"  # STATE/spool/<token>/: a period's records while its step runs


@dataclass(frozen=True)
class Release:
    """What one ``step`` (or a whole ``run``) released: ``synthetic``, the synthetic
    records it published (empty before the window synthesizer's first release);
    ``manifest``, the release's manifest after it; ``summary``, what the command line
    prints (``status``, ``period``, the budget spent …); ``accuracy``, a tabular
    release's error bounds of each period it published (the ``accuracy-tTTTT.json``
    documents; empty for the other families)."""

    synthetic: pa.Table
    manifest: Dict[str, Any]
    summary: Dict[str, Any]
    accuracy: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def periods(self) -> List[int]:
        """The periods whose records this release published."""
        return _published_periods(self.summary, self.manifest)

    def to_pandas(self):
        """``synthetic`` as a pandas DataFrame."""
        return self.synthetic.to_pandas()


class ContinualSynthesizer:
    """One continual synthesizer (subclasses name the family); see the module."""

    family = ""

    def __init__(self, *, state: Optional[str] = None, output: Optional[str] = None,
                 beam_options: Sequence[str] = (), **options):
        from continual_synth.transforms import storage
        self._beam_options = list(beam_options)
        self._options = dict(options)
        self._work = None
        if state is None:
            self._work = tempfile.mkdtemp(prefix="continual-synth-")  # mode 0700
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._work, True)
            state = os.path.join(self._work, "state")
            output = output or os.path.join(self._work, "release")
        self._state, self._output = state, output or f"{state.rstrip('/')}-release"
        self._spent_by_run = False
        if options or not storage.is_dir(storage.join(self._state, "versions")):
            self._command("init", self._init_argv(options) + ["--exists-ok"])

    # ------------------------------------------------------------------ the faces
    def step(self, records, period: Optional[int] = None) -> Release:
        """Take one period's records (a pyarrow Table or a pandas DataFrame: the columns a
        ``step`` file holds) and release; ``period`` (default: the next) as ``--period``
        (a period already released is released again from nothing: no data read, no
        budget spent)."""
        self._check_not_run()
        from continual_synth.pipelines.release import lifecycle
        from continual_synth.transforms import storage
        from continual_synth.transforms.files import write_file
        spool = storage.join(self._state, SPOOL, lifecycle.new_token())
        path = storage.join(spool, "period.parquet")
        try:
            write_file(_as_table(records), path, "parquet")
            argv = ["--state", self._state, "--input", path, "--output", self._output]
            summary = self._command("step", argv + (["--period", str(period)]
                                                    if period is not None else []))
        finally:
            storage.remove_tree(spool)
        return self._release(summary)

    def run(self, records) -> Release:
        """Release a whole input at once (the records of every period, with the period
        column), as ``continual-synth FAMILY run``: a synthesizer that has stepped cannot
        also run (the two would spend the budget twice on the same people), and one that
        ran cannot step."""
        from continual_synth.pipelines.release import lifecycle
        from continual_synth.transforms import storage
        from continual_synth.transforms.files import write_file
        if self._spent_by_run or lifecycle.load_state(self._state)["output_dir"] is not None:
            raise StateError("this synthesizer has released already: run takes a whole input "
                             "with the whole budget, so use a new synthesizer")
        work = tempfile.mkdtemp(prefix="continual-synth-run-")
        try:
            path = os.path.join(work, "input.parquet")
            write_file(_as_table(records), path, "parquet")
            output = storage.join(self._output, "run") if self._work else self._output
            manifest = self._command("run", self._run_argv(self._options) + [
                "--input", path, "--output", output])
        finally:
            shutil.rmtree(work, ignore_errors=True)
        self._spent_by_run = True
        from continual_synth.pipelines.release import release_dir
        from continual_synth.transforms.files import read_files
        full = release_dir.read_json(storage.join(output, lifecycle.MANIFEST))
        files = [storage.join(output, name) for name in full["files"]]
        return Release(read_files(files) if files else pa.table({}), full, manifest)

    def save(self, path: str, output: Optional[str] = None) -> "ContinualSynthesizer":
        """Move this synthesizer's state to ``path`` (a new or empty directory; any Beam
        filesystem path) and its release folder to ``output`` (default ``path`` +
        ``-release``), where :func:`load` and the command line (``step --state path
        --output …``) go on; the object goes on there too.  Only a synthesizer kept in a
        temporary directory moves: one whose state is already at a lasting place is saved
        after every step (a copy would let two states spend one budget twice)."""
        from continual_synth.pipelines.release import lifecycle
        from continual_synth.transforms import storage
        if storage.absolute(path) == storage.absolute(self._state):
            return self
        if self._work is None:
            raise StateError(f"this synthesizer's state is kept at {self._state}, where every "
                             f"step saves it; a copy at {path} would let two states spend one "
                             f"budget twice")
        output = output or f"{path.rstrip('/')}-release"
        lifecycle.relocate(self._state, path, self._output, output)
        self._state, self._output = path, output
        self._cleanup()
        self._work = None
        return self

    def close(self) -> None:
        """Remove the temporary directory of an unsaved synthesizer (its state and
        releases) now, rather than when the object is collected."""
        if self._work is not None:
            self._cleanup()

    @property
    def state(self) -> str:
        """The state directory (private)."""
        return self._state

    @property
    def output(self) -> str:
        """The release folder the steps publish into."""
        return self._output

    @property
    def manifest(self) -> Optional[Dict[str, Any]]:
        """The release folder's current manifest (None before the first step)."""
        from continual_synth.pipelines.release import lifecycle, release_dir
        from continual_synth.transforms import storage
        return release_dir.read_json(storage.join(self._output, lifecycle.MANIFEST))

    # ------------------------------------------------------------------ the jobs
    def _command(self, action: str, argv: List[str]) -> dict:
        """``continual-synth FAMILY ACTION argv`` in this process: its result, or its
        error raised."""
        from continual_synth.pipelines.commands.cli import job_options, perform
        from continual_synth.pipelines.commands.options import option_strings
        parser = _raising_parser(job_options()[f"{self.family}_{action}"])
        args, beam_args = parser.parse_known_args(argv + self._beam_options)
        args.command, args.action = self.family, action
        return perform(args, beam_args, f"{self.family} {action}", option_strings(parser))

    def _init_argv(self, options: Mapping[str, Any]) -> List[str]:
        return ["--state", self._state] + self._option_argv("init", options)

    def _run_argv(self, options: Mapping[str, Any]) -> List[str]:
        return self._option_argv("run", options)

    def _option_argv(self, action: str, options: Mapping[str, Any]) -> List[str]:
        return option_argv(self.family, action, options, type(self).__name__,
                           self._work_file)

    def _work_file(self, name: str, text: str) -> str:
        """A file of this object's own (a tabular domain given as a dict)."""
        folder = self._work or tempfile.mkdtemp(prefix="continual-synth-")
        path = os.path.join(folder, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        return path

    def _check_not_run(self) -> None:
        if self._spent_by_run:
            raise StateError("this synthesizer released a whole input with run: its budget is "
                             "spent; use a new synthesizer")

    def _release(self, summary: dict) -> Release:
        """The records the step that printed ``summary`` published."""
        from continual_synth.transforms import storage
        from continual_synth.transforms.files import accuracy_file_name, read_files
        manifest = self.manifest or {}
        periods = _published_periods(summary, manifest)
        prefixes = tuple(f"synthetic-t{p:04d}-" for p in periods)
        files = [storage.join(self._output, name) for name in manifest.get("files", [])
                 if name.startswith(prefixes)]
        wanted = {accuracy_file_name(p) for p in periods}
        accuracy = [json.loads(storage.read_bytes(storage.join(self._output, name)))
                    for name in manifest.get("accuracy_files", []) if name in wanted]
        return Release(read_files(files) if files else pa.table({}), manifest, summary,
                       accuracy)


def _published_periods(summary: Mapping, manifest: Mapping) -> List[int]:
    """The periods a step's records belong to: a panel's (window: 1..k at its first
    release), or the one period a tabular or PrivHP step releases; a whole run's all."""
    if "periods_published" in summary:
        return list(summary["periods_published"])
    if summary.get("status") == "released" and "period" in summary:
        return [summary["period"]]
    if summary.get("status") == "already-released":
        return []
    return list(manifest.get("periods_released", []))


def option_argv(family: str, action: str, options: Mapping[str, Any], owner: str,
                work_file) -> List[str]:
    """Keyword arguments as the command-line options of ``FAMILY ACTION`` (an unknown name
    is an :class:`InputError` naming the closest one; ``owner`` names the object in the
    message; ``work_file(name, text)`` writes a file an option names, e.g. a domain)."""
    from continual_synth.pipelines.commands.cli import job_options
    from continual_synth.pipelines.commands.options import closest_option, option_strings
    known = [o for o in option_strings(_raising_parser(job_options()[f"{family}_{action}"]))
             if o not in _MANAGED]
    argv = []
    for name, value in options.items():
        option = "--" + name.replace("_", "-")
        if option not in known:
            close = closest_option(option, known)
            hint = f"; did you mean {close[2:].replace('-', '_')}?" if close else ""
            raise InputError(f"{owner} takes no option {name!r}{hint}")
        argv += _option_words(option, value, work_file)
    return argv


def parse_options(family: str, action: str, argv: List[str]) -> argparse.Namespace:
    """``argv`` parsed by ``FAMILY ACTION``'s parser, errors raised (:class:`InputError`)."""
    from continual_synth.pipelines.commands.cli import job_options
    args, rest = _raising_parser(job_options()[f"{family}_{action}"]).parse_known_args(argv)
    if rest:
        raise InputError(f"unrecognised options {' '.join(rest)}")
    args.command, args.action = family, action
    return args


def _option_words(option: str, value, work_file) -> List[str]:
    """One keyword argument as the words of its command-line option."""
    if value is None or value is False:
        return []
    if value is True:
        return [option]
    if option == "--domain" and isinstance(value, Mapping):
        return [option, work_file("domain.json", json.dumps(value))]
    if option == "--bounds" and not isinstance(value, str):
        return [option, ",".join(f"{lo}:{hi}" for lo, hi in value)]
    if isinstance(value, (list, tuple)):
        return [option, ",".join(str(v) for v in value)]
    return [option, str(value)]


def _as_table(records) -> pa.Table:
    """A pyarrow Table of ``records`` (a Table, a RecordBatch or a pandas DataFrame)."""
    if isinstance(records, pa.Table):
        return records
    if isinstance(records, pa.RecordBatch):
        return pa.Table.from_batches([records])
    if hasattr(records, "to_records") and hasattr(records, "columns"):  # pandas
        return pa.Table.from_pandas(records, preserve_index=False)
    raise InputError(f"records must be a pyarrow Table or a pandas DataFrame, not "
                     f"{type(records).__name__}")


class _RaisingParser(argparse.ArgumentParser):
    """Marker base: a job parser whose errors are raised as :class:`InputError`."""


def _raising_parser(options_class: type) -> argparse.ArgumentParser:
    """The job's parser (:func:`~continual_synth.pipelines.commands.options.job_parser`), its
    errors raised as :class:`InputError` instead of printed with exit 2."""
    from continual_synth.pipelines.commands.options import job_parser
    parser = job_parser(options_class, prog="continual-synth")

    def exit_with(status=0, message=None):
        raise InputError((message or "").strip().replace("continual-synth: error: ", "", 1))
    parser.exit = exit_with
    return parser


class WindowSynthesizer(ContinualSynthesizer):
    """Bun et al. (2024) Algorithm 1, the fixed-time-window synthesizer: ``window``,
    ``horizon``, ``rho`` and ``window init``'s other options; a step takes one period's
    ``id, value`` records."""

    family = "window"


class CumulativeSynthesizer(ContinualSynthesizer):
    """Bun et al. (2024) Algorithm 2, the cumulative synthesizer: ``horizon``, ``rho`` and
    ``cumulative init``'s other options (``counter``, ``neighbor`` …)."""

    family = "cumulative"


class TabularSynthesizer(ContinualSynthesizer):
    """Kumar, Strohmer and Vershynin (2024), the tabular stream synthesizer: ``domain`` (a
    dict of each attribute's values, or a JSON file), ``epsilon``, ``horizon`` and
    ``tabular init``'s other options; a step takes one period's records."""

    family = "tabular"


class PrivHPSynthesizer(ContinualSynthesizer):
    """Holland et al. (2025), PrivHP: ``columns``, ``bounds``, ``epsilon``, ``samples``,
    ``depth`` (or ``expected_n``) and ``horizon`` (continual PrivHP: a step takes one
    period's points); ``run`` releases a whole input (with its period column)."""

    family = "privhp"


FAMILIES = {cls.family: cls for cls in (WindowSynthesizer, CumulativeSynthesizer,
                                        TabularSynthesizer, PrivHPSynthesizer)}
KINDS = {"window": "window", "cumulative": "cumulative", "tabular": "tabular",
         "continual-privhp": "privhp"}


def load(state: str, output: Optional[str] = None,
         beam_options: Sequence[str] = ()) -> ContinualSynthesizer:
    """The synthesizer of the state directory ``state`` (saved by :meth:`~Continual
    Synthesizer.save` or made by ``continual-synth FAMILY init``), releasing into the
    folder the state publishes into (or ``output`` before its first release)."""
    from continual_synth.pipelines.release import lifecycle
    from continual_synth.transforms import storage
    if not storage.is_dir(storage.join(state, "versions")):
        raise StateError(f"{state}: no state directory here (no versions/)")
    document = lifecycle.load_state(state)
    family = KINDS.get(document["kind"])
    if family is None:
        raise StateError(f"{state}: a state of kind {document['kind']!r}, which no synthesizer "
                         f"of this version reads")
    released_into = document.get("output_dir")
    if output is not None and released_into not in (None, storage.absolute(output)):
        raise StateError(f"{state} releases into {released_into}, not {output}")
    return FAMILIES[family](state=state, output=output or released_into,
                            beam_options=beam_options)
