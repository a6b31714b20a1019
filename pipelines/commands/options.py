"""Shared job options: column names, formats, alphabet parsing, argument types that
refuse bad numbers and paths, the base class of the jobs' Beam options and the check
that refuses options neither a job nor Beam knows."""
from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import os
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from continual_synth.mechanisms.errors import (InputError, ParameterError, positive_real,
                                               probability, whole_number)
from continual_synth.mechanisms.panel import encode_values
from continual_synth.runners import direct

__all__ = ["PanelColumns", "check_distinct_columns", "argument_type", "POSITIVE_INT",
           "NON_NEGATIVE_INT", "POSITIVE_REAL", "PROBABILITY", "JobOptions", "FORMATS",
           "INVALID_RECORDS", "ArgumentParser", "repeated_option", "closest_option",
           "HelpFormatter", "InputOptions", "OutputOptions", "StateOptions", "InitOptions",
           "INVALID_RECORDS_HELP", "InvalidRecordsOptions", "StepOptions", "BEAM_EPILOG",
           "add_job_commands", "add_job_options", "ADVANCED", "group_advanced",
           "job_parser", "option_strings", "beam_spelling", "check_directory_options",
           "SEPARATE", "check_separate_locations", "REPORT_HELP", "check_outside_releases",
           "parse_alphabet", "parse_value", "missing_code", "value_type", "record_schema",
           "check_beam_args", "OUR_RUNNERS", "check_runner", "pipeline_options"]


@dataclass(frozen=True)
class PanelColumns:
    """Names of the long-format panel's columns."""

    id_col: str = "id"
    period_col: str = "period"
    value_col: str = "value"

    def __post_init__(self):
        names = (self.id_col, self.period_col, self.value_col)
        if not all(names):
            raise InputError(f"--id-col, --period-col and --value-col must name three "
                             f"different columns, got {list(names)}")
        check_distinct_columns([("--id-col", [self.id_col]),
                                ("--period-col", [self.period_col]),
                                ("--value-col", [self.value_col])])

    @property
    def names(self) -> Tuple[str, str, str]:
        """The three columns a panel job reads (each must be flat)."""
        return self.id_col, self.period_col, self.value_col


def check_distinct_columns(named: Sequence[Tuple[str, Sequence[str]]]) -> None:
    """Refuse a column that one of a job's column options names twice, or that two of
    them name (``--period-col x`` with ``--columns x,y``: x would be read as the period
    and as a coordinate), before any data is read.  ``named``: (the option, the columns it
    names), in the order the message names them."""
    owner: Dict[str, str] = {}
    for option, columns in named:
        if len(set(columns)) != len(columns):
            raise InputError(f"{option} names a column twice: {list(columns)}")
        for column in columns:
            if column in owner:
                raise InputError(f"{owner[column]} and {option} must name different "
                                 f"columns: both name {column!r}")
            owner[column] = option


def argument_type(rule: Callable, parse: Callable = int, **limits) -> Callable[[str], object]:
    """An argparse ``type``: parse the text, then apply one of the rules of
    :mod:`continual_synth.mechanisms.errors`; argparse names the option in the message
    (``argument --shards: must be an integer >= 1, got 0``) and exits with status 2."""
    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            kind = "an integer" if parse is int else "a number"
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}") from None
        try:
            return rule("value", value, **limits)
        except ParameterError as exc:
            raise argparse.ArgumentTypeError(exc.problem) from None
    convert.__name__ = rule.__name__
    return convert


POSITIVE_INT = argument_type(whole_number)  # shards, periods, samples per shard …
NON_NEGATIVE_INT = argument_type(whole_number, minimum=0)  # seeds, counts that may be 0
POSITIVE_REAL = argument_type(positive_real, parse=float)  # ρ, ε, public guesses (--expected-n)
PROBABILITY = argument_type(probability, parse=float)  # β, δ, a share of the budget


class JobOptions(PipelineOptions):
    """Base of every job's options (``WindowRunOptions``, ``TabularStepOptions`` …).

    A job's class declares its options once, in ``_add_argparse_args``, the Beam way;
    the subcommand command line (``continual-synth window step``), the job modules
    (``python -m continual_synth.jobs.window_step``) and the Flex Template metadata are
    all built from it.  Job classes derive from this class, not directly from
    ``PipelineOptions``: Beam parses every *direct* subclass of ``PipelineOptions`` on
    each pipeline it builds, so a job's required options would be demanded of every
    pipeline and one job's options would be accepted for another.  ``PipelineOptions(
    argv).view_as(WindowStepOptions)`` reads a job's options as any Beam options.

    Options are declared with hyphens (``--id-col``), as the command line has always
    spelt them; Beam's spelling with underscores (``--id_col``, what Airflow's Beam
    operator and Flex Templates pass) is accepted too (:func:`hyphenated`).
    """

    description = ""  # one line: what the job does (help and Flex Template metadata)


FORMATS = ("parquet", "csv", "avro")
INVALID_RECORDS = ("refuse", "drop")  # :data:`continual_synth.mechanisms.errors.MODES`


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the project's one-line errors: ``continual-synth: error: --rho must
    be positive and finite, got 0.0`` (the words a config's check uses), exit status 2.
    Options are never abbreviated (``--hor`` is not ``--horizon``: it is refused with a
    suggestion), and a missing required option is reported with any misspelt one that
    was given instead (``--epsilonn`` → ``--epsilon``).  An option that takes one value is
    given once: argparse would keep the last of ``--rho=0.05 --rho=5`` without a word
    (a scheduler's options and a hand-added one can easily both set it)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._given: List[str] = []

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(args) if args is not None else []
        self._refuse_repeated()
        return super().parse_known_args(args, namespace)

    def _refuse_repeated(self) -> None:
        problem = repeated_option(self._actions, self._given)
        if problem:
            self.error(problem)

    def error(self, message):
        message = re.sub(r"^argument ([^:]+): ", lambda m: m.group(1).split("/")[0] + " ",
                         message)
        if message.startswith("the following arguments are required"):
            message = "; ".join(self._misspelt() + [message])
        self.exit(2, f"continual-synth: error: {message}\n")

    def _misspelt(self) -> List[str]:
        """``--x: did you mean --y?`` for each option given that is not this parser's but
        close to one of its own (Beam's options, not close to any, are left alone)."""
        own = [o for action in self._actions for o in action.option_strings]
        out = []
        for token in self._given:
            name = token.split("=", 1)[0]
            if name.startswith("--") and name not in own:
                close = closest_option(name, own)
                if close:
                    out.append(f"unrecognised option {name}: did you mean {close}?")
        return out


def repeated_option(actions: Sequence[argparse.Action], argv: Sequence[str]
                    ) -> Optional[str]:
    """``--rho is given 2 times (--rho 5, --rho 0.05): give each option once`` for the
    first option of ``actions`` (an argparse parser's) that takes one value and appears
    more than once in ``argv`` (as ``--opt value`` or ``--opt=value``, under any of its
    names), else None: argparse keeps the last value without a word.  Options that
    gather their values (``action="append"``, Beam's ``--experiments``), and flags, are
    left alone: only a plain ``store`` action keeps one value."""
    single = {name: action for action in actions
              if type(action) is argparse._StoreAction for name in action.option_strings}
    seen: Dict[int, List[str]] = {}
    for position, token in enumerate(argv):
        name, sep, value = token.partition("=")
        if name in single:
            if not sep and position + 1 < len(argv):
                value = argv[position + 1]
            seen.setdefault(id(single[name]), []).append(f"{name} {value}".strip())
    for given in seen.values():
        if len(given) > 1:
            return (f"{given[0].split()[0]} is given {len(given)} times "
                    f"({', '.join(given)}): give each option once")
    return None


def closest_option(name: str, valid: Sequence[str]) -> Optional[str]:
    """The valid option ``name`` most likely meant: the only one it abbreviates, else the
    closest spelling (difflib, ratio ≥ 0.75), else None."""
    prefixed = [option for option in valid if option.startswith(name) and len(name) > 3]
    if len(prefixed) == 1:
        return prefixed[0]
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.75)
    return close[0] if close else None


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default, unless it has none (None, False) or the
    help text already says what happens by default."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False \
                or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class InputOptions(JobOptions):
    """Where a job reads its records."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--input", required=True,
                            help="records: a file or a directory of files (a step: the "
                                 "period's records)")
        parser.add_argument("--input-format", default=None, choices=FORMATS,
                            help="format of --input (default: from the file names)")


class OutputOptions(JobOptions):
    """Where a job publishes its release."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--output", required=True, help="release directory")


class StateOptions(JobOptions):
    """The state directory of an incremental release (private: it holds people's data)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--state", required=True,
                            help="state directory of the incremental release (private)")


class InitOptions(StateOptions):
    """Options of a synthesizer's ``init`` besides the synthesizer's own."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--exists-ok", action="store_true",
                            help="if --state already holds a state of these same options, "
                                 "keep it and succeed (a scheduler's idempotent first task); "
                                 "a state of other options is still an error")


#: ``--help`` of ``--invalid-records``
INVALID_RECORDS_HELP = (
    "an invalid record (a value outside the alphabet or domain, an empty id or value, a "
    "period out of range or not a whole number, a point outside the bounds or not "
    "finite): refuse the input at the first one (exit 2, nothing written), or drop each "
    "one alone, counted in records_rejected and logged on stderr (a step's also in the "
    "state's dead letter STATE/rejected/); window and cumulative drop only with "
    "--missing-value, which fills the dropped reports")


class InvalidRecordsOptions(JobOptions):
    """``--invalid-records`` of a ``run`` and an ``init`` (which records it for its steps)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--invalid-records", choices=INVALID_RECORDS, default="refuse",
                            help=INVALID_RECORDS_HELP + " (init: what its steps do)")


class StepOptions(OutputOptions, InputOptions, StateOptions):
    """Options of every synthesizer's ``step`` (the rest is in the state)."""

    description = "ingest the next period and release it"

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--invalid-records", choices=INVALID_RECORDS, default=None,
                            help=INVALID_RECORDS_HELP + " (default: what init was given, "
                                 "refuse if nothing)")
        parser.add_argument("--period", type=POSITIVE_INT, default=None,
                            help="the period this file holds (checked; default: the next one)")
        parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                            help="if another step owns the state, wait up to this long for "
                                 "it (0: refuse at once)")


BEAM_EPILOG = ("Apache Beam's own pipeline options are accepted too (--runner, "
               "--direct_num_workers, --s3_endpoint_url, …; docs/deploy.md, "
               "docs/object_stores.md); an option neither the job nor Beam knows is an "
               "error.")


def add_job_commands(commands, family: str, help_text: str, jobs: Dict[str, type]):
    """``continual-synth FAMILY ACTION`` for each ``FAMILY_ACTION`` job of ``jobs`` (job
    name → options class); returns the family's sub-parsers (to add other commands)."""
    actions = commands.add_parser(family, help=help_text).add_subparsers(dest="action",
                                                                         required=True)
    for name, options_class in jobs.items():
        if name.startswith(family + "_"):
            add_job_options(actions.add_parser(
                name[len(family) + 1:], help=options_class.description,
                description=options_class.description, epilog=BEAM_EPILOG,
                formatter_class=HelpFormatter), options_class)
    return actions


def add_job_options(parser: argparse.ArgumentParser, options_class: type) -> None:
    """Declare ``options_class``'s options on ``parser``, as Beam does (each class of its
    MRO below ``PipelineOptions`` that defines ``_add_argparse_args``), last class of the
    MRO first: a job class lists its bases model-first, so ``--help`` starts with where
    the job reads and writes; the tuning options come last (:func:`group_advanced`)."""
    for klass in reversed(options_class.__mro__):
        if issubclass(klass, JobOptions) and "_add_argparse_args" in vars(klass):
            klass._add_argparse_args(parser)
    group_advanced(parser)


#: the tuning options of every family, shown under their own heading in ``--help``: the
#: defaults need no tuning (the synthesizers' pages say when one helps)
ADVANCED = frozenset({
    "--beta", "--delta", "--n-pad", "--shards", "--budget-split", "--population-share",
    "--counter", "--method", "--selections", "--selection-schedule", "--coverage",
    "--structure", "--utility-size", "--unseen-share", "--wide-cells", "--fit", "--rule",
    "--margins", "--selection-share", "--max-cells", "--model-growth", "--prune-k", "--sketch-width",
    "--memory", "--sketch-depth", "--level-epsilons", "--hash-seed", "--level-stride",
    "--batch-rows"})


def group_advanced(parser: argparse.ArgumentParser) -> None:
    """Move ``parser``'s :data:`ADVANCED` options (those in no mutually exclusive group)
    under an "advanced options" heading of ``--help``, after the options most runs need.
    Parsing is unchanged: only the help's grouping moves."""
    exclusive = {action for group in parser._mutually_exclusive_groups
                 for action in group._group_actions}
    moved = [action for action in parser._actions
             if ADVANCED.intersection(action.option_strings) and action not in exclusive]
    if not moved:
        return
    advanced = next((group for group in parser._action_groups
                     if group.title == "advanced options"), None)
    if advanced is None:
        advanced = parser.add_argument_group(
            "advanced options", "tuning: the defaults need none (see the synthesizer's page "
                                "of the guide before changing one)")
    for action in moved:
        for group in parser._action_groups:
            if action in group._group_actions and group is not advanced:
                group._group_actions.remove(action)
        if action not in advanced._group_actions:
            advanced._group_actions.append(action)


def job_parser(options_class: type, prog: str) -> argparse.ArgumentParser:
    """The parser of one job module: its options, defaults shown in ``--help``."""
    parser = ArgumentParser(prog=prog, description=options_class.description,
                            allow_abbrev=False, formatter_class=HelpFormatter,
                            epilog=BEAM_EPILOG)
    add_job_options(parser, options_class)
    parser.add_argument("--verbose", action="store_true", help="show Beam's logs")
    return parser


def option_strings(parser: argparse.ArgumentParser) -> List[str]:
    """Every ``--option`` ``parser`` declares."""
    return [name for action in parser._actions for name in action.option_strings
            if name.startswith("--")]


def beam_spelling(argv: Sequence[str], parser: argparse.ArgumentParser) -> List[str]:
    """Read options as Beam, Airflow's Beam operator and Flex Templates write them:
    ``--id_col=x`` is ``--id-col=x`` for the options declared with hyphens, and a flag
    given a value (``--clip=true`` / ``--clip=false``) is the flag or nothing.  A flag
    given more than once is refused, as any other option is (:func:`repeated_option`):
    once spelt as the flag or nothing, ``--public_population=true
    --public_population=false`` would read as true, whatever the last word said.
    Anything else, Beam's options included, is left as it is."""
    flags = {name for action in parser._actions if isinstance(action, argparse._StoreTrueAction)
             for name in action.option_strings}
    declared = set(option_strings(parser))
    out, given = [], {}
    for arg in argv:
        name, sep, value = arg.partition("=")
        if name.startswith("--") and name not in declared and name.replace("_", "-") in declared:
            name = name.replace("_", "-")
        if name in flags:
            given.setdefault(name, []).append(arg)
            if len(given[name]) > 1:
                raise InputError(f"{given[name][0].partition('=')[0]} is given "
                                 f"{len(given[name])} times "
                                 f"({', '.join(given[name])}): give each option once")
        if name in flags and sep:
            if value.lower() not in ("true", "false"):
                raise InputError(f"{name}={value}: a flag takes true or false")
            if value.lower() == "true":
                out.append(name)
            continue
        out.append(name + sep + value)
    return out


def check_directory_options(args: argparse.Namespace,
                            names: Sequence[str] = ("output", "state", "report")) -> None:
    """Refuse an ``--output`` / ``--state`` / ``--report`` that could not be a directory
    written by this job (it, or the nearest folder above it that exists, is a file or is
    not writable), before anything is read or written.  On ``s3://`` and ``gs://`` the
    bucket must exist and be listable (:func:`~continual_synth.transforms.storage.check_bucket`);
    other refusals are left to the store."""
    from continual_synth.transforms.storage import check_bucket, is_local
    for name in names:
        path = getattr(args, name, None)
        if path is None:
            continue
        if not is_local(path):
            check_bucket(name, path)
            continue
        existing = os.path.abspath(path)
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise InputError(f"--{name} {path}: {existing} is a file, not a directory")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise InputError(f"--{name} {path}: {existing} is not writable")


#: pairs of locations that must not be the same nor one inside the other
SEPARATE = (("output", "input"), ("output", "state"), ("output", "watch"), ("state", "watch"),
            ("report", "synthetic"), ("report", "truth"))


def check_separate_locations(args: argparse.Namespace) -> None:
    """Refuse an ``--output`` that is, holds or lies inside the ``--input``, ``--state`` or
    ``--watch`` directory, and a ``--state`` inside the watched directory (or holding it):
    private records or state would sit in the public release, a release would be read as
    input, a stream would list its own files.  An evaluation's ``--report`` (it holds the
    true counts, and plots of the real records) is kept out of the release it evaluates
    (``--synthetic``) and out of the ``--truth``.  Local paths are compared where their
    symbolic links lead, so a link into the release is no way around the rule."""
    from continual_synth.transforms.storage import resolved
    given = {name: getattr(args, name, None)
             for name in ("input", "watch", "state", "output", "report", "synthetic", "truth")}
    paths = {name: resolved(path) for name, path in given.items() if isinstance(path, str)}
    for first, second in SEPARATE:
        if first in paths and second in paths:
            a, b = paths[first], paths[second]
            if a == b or a.startswith(b + "/") or b.startswith(a + "/"):
                why = ("a report holds the true counts, so keep it apart from the release "
                       "and the truth" if first == "report" else
                       "keep the release, the state and the input apart (private records "
                       "and state never go in a release)")
                raise InputError(f"--{first} {given[first]} and --{second} {given[second]} "
                                 f"are the same place or one is inside the other: {why}")


#: ``--help`` of every evaluation's ``--report``
REPORT_HELP = ("directory for summary.json and plots (they hold the true counts: keep it "
               "private, outside every release and the truth)")


def check_outside_releases(args: argparse.Namespace) -> None:
    """Refuse private or new places that are, or lie inside, a release directory (a folder
    holding ``manifest.json``, links followed), whichever release it is, since everything
    in a release folder is published with it: an evaluation's ``--report`` (its
    ``summary.json`` holds the true counts), a ``--state`` (the private counts, and for
    some synthesizers the records themselves), ``tabular example``'s ``--output`` (records)
    and a new ``--output`` below another release (the release evaluated, or stepped into,
    is refused by :func:`check_separate_locations` and the lifecycle).  An ``--output``
    that *is* a release is the one a step publishes into.  Nothing is read before."""
    from continual_synth.pipelines.release.lifecycle import MANIFEST, release_around
    from continual_synth.transforms.storage import folder_and_parents
    example = getattr(args, "action", None) == "example"  # tabular example writes records
    private = [("report", "a report holds the true counts"),
               ("state", "a state holds the private counts")]
    if example:
        private.append(("output", "the example's files are the stream's records"))
    for name, what in private:
        path = getattr(args, name, None)
        release = release_around(path) if isinstance(path, str) else None
        if release is not None:
            raise InputError(f"--{name} {path} is or lies inside the release directory "
                             f"{release} (it holds {MANIFEST}): {what}, and whatever is in a "
                             f"release folder is published with it; keep {name}s on the "
                             f"private side, outside every release")
    output = getattr(args, "output", None)
    if isinstance(output, str) and not example:
        above = folder_and_parents(output)[1:]
        release = release_around(above[0]) if above else None
        if release is not None:
            raise InputError(f"--output {output} lies inside the release directory {release} "
                             f"(it holds {MANIFEST}): a release inside another would be "
                             f"published as part of it; choose an output directory outside "
                             f"every release")


def parse_alphabet(text: str) -> Tuple:
    """``"0,1,2"`` → (0, 1, 2); non-numeric values stay strings (``"low,high"``)."""
    items = [item.strip() for item in str(text).split(",") if item.strip() != ""]
    if len(items) < 2:
        raise InputError(f"--alphabet needs at least two comma-separated values, got {text!r}")
    try:
        return tuple(int(item) for item in items)
    except ValueError:
        return tuple(items)


def parse_value(text: Optional[str], alphabet: Sequence):
    """A command-line value (e.g. ``--missing-value``) in the alphabet's type."""
    if text is None:
        return None
    try:
        value = int(text) if isinstance(alphabet[0], int) else str(text)
    except ValueError:
        raise InputError(f"--missing-value {text!r} is not in the alphabet "
                         f"{list(alphabet)}") from None
    if value not in alphabet:
        raise InputError(f"value {text!r} is not in the alphabet {list(alphabet)}")
    return value


def missing_code(missing_value, alphabet: Sequence) -> Optional[int]:
    """Alphabet index that fills missing reports, or None (missing reports are errors)."""
    if missing_value is None:
        return None
    return int(encode_values([missing_value], alphabet, where="--missing-value")[0])


def value_type(alphabet: Sequence) -> pa.DataType:
    return pa.int64() if isinstance(alphabet[0], int) else pa.string()


def record_schema(alphabet: Sequence) -> pa.Schema:
    """Schema of released synthetic records."""
    return pa.schema([pa.field("synthetic_id", pa.int64(), nullable=False),
                      pa.field("period", pa.int32(), nullable=False),
                      pa.field("value", value_type(alphabet), nullable=False)])


def check_beam_args(beam_args: Sequence[str], command: str,
                    command_options: Sequence[str] = (),
                    init_options: Sequence[str] = ()) -> None:
    """Refuse what is left of a job's arguments after its own options are parsed, unless
    it is Apache Beam's (``--runner``, ``--direct_num_workers``, ``--s3_endpoint_url``):
    an option that neither the job nor Beam knows (``--rh0``, or an option of another
    job such as ``--alphabet`` for ``cumulative``), which Beam would otherwise discard
    with a warning while the job runs without it, or a stray word.  The message names
    the closest valid option (``--neighbour`` → ``--neighbor``).  A Beam option that
    keeps one value given twice (``--runner DirectRunner --runner dask-local``) is
    refused as the job's own are (:func:`repeated_option`: Beam would keep the last);
    the ones Beam's parser gathers (``--experiments``) may be repeated.
    ``init_options``: a ``step``'s or ``stream``'s family's ``init`` options, which the
    state fixes (the message says so of one given to a step)."""
    if not beam_args:
        return
    if not beam_args[0].startswith("-"):
        raise InputError(f"unrecognised argument {beam_args[0]!r} for '{command}': options "
                         f"are given as --key=value (see --help)")
    if any(arg.startswith("--dask") or arg.lower().split("=")[-1] in ("dask-local", "daskrunner")
           for arg in beam_args):  # registers Beam's DaskOptions, or says what to install
        from continual_synth.runners.presets import require_dask
        require_dask()
    options = PipelineOptions(list(beam_args))
    captured = io.StringIO()
    parsers: List[argparse.ArgumentParser] = []
    try:  # Beam's own parser prints its whole usage for a bad value (an invalid choice)
        with contextlib.redirect_stderr(captured):
            unknown = sorted(set(options.get_all_options(retain_unknown_options=True))
                             - set(options.get_all_options(add_extra_args_fn=parsers.append)))
    except SystemExit:
        problem = captured.getvalue().strip().splitlines()[-1:] or ["a bad Beam option"]
        raise InputError(problem[0].split("error: ", 1)[-1]) from None
    def closest(typed: str) -> Optional[str]:
        """The valid option closest to one typed as ``--rh0``, ``-neighbor`` or
        ``neighbor`` (computed only for an error's hint)."""
        return closest_option("--" + typed.lstrip("-"), list(command_options) + [
            "--verbose"] + ["--" + name for name in options.get_all_options()])

    if unknown:
        at_init = list(init_options)  # a step's state fixes what init was given
        # as typed (Beam reports ``--poll-intervall`` as ``poll_intervall``, and
        # ``-neighbor=x`` as ``neighbor``)
        typed = {arg.split("=", 1)[0].lstrip("-").replace("-", "_"): arg.split("=", 1)[0]
                 for arg in beam_args if arg.startswith("-")}
        unknown = [typed.get(name, "--" + name) for name in unknown]
        hints = []
        for name in unknown:
            close = closest(name)
            set_at_init = closest_option("--" + name.lstrip("-").replace("_", "-"), at_init)
            if close:
                hints.append(f"{name}: did you mean {close}?")
            elif set_at_init:
                family = command.replace("_", " ").split()[0]
                hints.append(f"{set_at_init} is an option of '{family} init': a state "
                             f"keeps the options it was made with")
        raise InputError(f"unrecognised option(s) {', '.join(unknown)}: "
                         f"not an option of '{command}' (see --help) nor of Apache Beam"
                         + (f" ({'; '.join(hints)})" if hints else ""))
    # what Beam's parser leaves that is not an option: a stray word or a single-dash
    # flag (``--runner DirectRunner -neighbor add-remove``), which Beam would discard
    # with a warning; every argument is checked, not only the first
    stray = [arg for arg in parsers[0].parse_known_args(list(beam_args))[1] if arg != "--"]
    if stray:
        hints = []
        for arg in stray:
            name = arg.split("=", 1)[0]
            if arg.startswith("-") or "=" in arg:  # -rho 5, neighbor=add-remove
                close = closest(name)
                if close:
                    hints.append(f"{name}: did you mean {close}?")
        raise InputError(f"unrecognised argument(s) {' '.join(repr(a) for a in stray)} for "
                         f"'{command}': options are given as --key=value or --key value "
                         f"(see --help)" + (f" ({'; '.join(hints)})" if hints else ""))
    repeated = repeated_option(parsers[0]._actions, beam_args)  # Beam's, as Beam declares them
    if repeated:
        raise InputError(repeated)
    check_runner(options.view_as(StandardOptions).runner)


#: the ``--runner`` names of this package (:mod:`continual_synth.runners.presets`)
OUR_RUNNERS = ("dask-local", "DaskRunner")


def check_runner(runner: Optional[str]) -> None:
    """Refuse an unknown ``--runner`` before any data is read, naming the closest known
    one: Beam resolves a name case-insensitively, with or without its ``Runner`` suffix,
    or imports a dotted class path (left to Beam)."""
    if runner is None or "." in runner or runner in OUR_RUNNERS:
        return
    from apache_beam.runners import runner as beam_runner
    known = beam_runner._RUNNER_MAP  # lower-case name → class path
    if runner.lower() in known or runner.lower() + "runner" in known:
        return
    names = list(OUR_RUNNERS) + sorted(path.rsplit(".", 1)[-1] for path in set(known.values()))
    close = closest_option(runner, names)
    raise InputError(f"--runner {runner}: unknown runner"
                     + (f" (did you mean {close}?)" if close else "")
                     + f"; known: {', '.join(names)}, or a runner's class path")


def pipeline_options(beam_args: Sequence[str] = ()) -> PipelineOptions:
    """Beam options from the remaining command-line arguments.  Beam's DirectRunner (the
    default, or ``--runner DirectRunner``) runs in this process and never on Prism
    (:mod:`continual_synth.runners.direct`); any other runner is Beam's choice."""
    options = PipelineOptions(list(beam_args))
    standard = options.view_as(StandardOptions)
    if standard.runner is None or standard.runner.lower() in direct.DIRECT_NAMES:
        standard.runner = direct.CLASS_PATH
    return options
