"""The ``continual-synth`` command line.

    continual-synth window run  --input PANEL --output DIR --window K --horizon T --rho R [...]
    continual-synth window init --state STATE --window K --horizon T --rho R [...]
    continual-synth window step --state STATE --input PERIOD_FILE --output DIR
    continual-synth window stream --watch DIR --state STATE --output DIR [--until-period P] [...]
    continual-synth cumulative run | init | step | stream  (same options; --counter, --public-population)
    continual-synth evaluate window --truth PANEL --synthetic DIR [--report REPORT_DIR]
    continual-synth evaluate cumulative --truth PANEL --synthetic DIR [--report REPORT_DIR]
    continual-synth plan window | cumulative | bounded | tabular  (expected error, no data)
    continual-synth demo --output DIR

Each Beam job's options are a ``PipelineOptions`` class (:data:`JOBS`, and each
extension's ``JOBS``), the one declaration the sub-commands, the job modules
(:mod:`continual_synth.jobs`) and the Flex Template metadata are built from.  Apache
Beam's own options (``--runner``, ``--direct_num_workers`` …) pass through to the
pipeline; an option neither the job nor Beam knows is an error naming the closest
valid one.  ``--runner dask-local`` runs on a local dask.distributed cluster (see
:mod:`continual_synth.runners.presets`).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Callable, Dict, List, Optional

# Beam logs import-time warnings and each failing DoFn's traceback; the command
# reports errors itself, so keep Beam quiet unless --verbose is given.
logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")

from continual_synth.pipelines.options import (FORMATS, NON_NEGATIVE_INT,  # noqa: E402
                                               POSITIVE_INT, POSITIVE_REAL, PROBABILITY,
                                               ArgumentParser, HelpFormatter, InitOptions,
                                               InputOptions, InvalidRecordsOptions,
                                               JobOptions, OutputOptions,
                                               REPORT_HELP, StepOptions,
                                               add_job_commands, add_job_options)


def add_budget_options(parser) -> None:
    """The privacy and accuracy parameters both panel synthesizers share (a release's
    and ``plan``'s)."""
    parser.add_argument("--horizon", type=POSITIVE_INT, required=True,
                        help="number of periods T")
    parser.add_argument("--rho", type=POSITIVE_REAL, required=True,
                        help="total zCDP budget ρ")
    parser.add_argument("--neighbor", choices=["replace", "add-remove"], default="replace",
                        help="neighbouring relation: replace one person's sequence, or "
                             "add/remove one person")
    parser.add_argument("--beta", type=PROBABILITY, default=0.05,
                        help="failure probability β of the error bound")
    parser.add_argument("--delta", type=PROBABILITY, default=1e-6,
                        help="δ of the (ε, δ) reading in the manifest")


def add_window_parameters(parser) -> None:
    """Algorithm 1's own parameters (a release's and ``plan window``'s)."""
    parser.add_argument("--window", type=POSITIVE_INT, required=True,
                        help="window length k (periods)")
    parser.add_argument("--n-pad", type=NON_NEGATIVE_INT, default=None,
                        help="padding records per bin (default: Theorem 3.2's bound at β)")
    parser.add_argument("--alphabet", default="0,1", help="values a report can take")


def add_cumulative_parameters(parser) -> None:
    """Algorithm 2's own parameters (a release's and ``plan cumulative``'s)."""
    from continual_synth.mechanisms.counters import UNBOUNDED_KINDS, counter_kinds
    parser.add_argument("--counter", default="tree",
                        choices=[k for k in counter_kinds() if k not in UNBOUNDED_KINDS],
                        help="private stream counter per threshold (tree is the paper's; "
                             "blt or sqrt-factorisation have the least error)")
    parser.add_argument("--budget-split", default=None, choices=["paper", "equal-variance"],
                        help="rho across the counters: App. B's (paper) or equal worst-case "
                             "variance (default: the one with the lower error bound, named "
                             "in the manifest)")
    parser.add_argument("--public-population", action="store_true",
                        help="under add-remove, treat the number of people n as public "
                             "(otherwise n is released with noise from a share of ρ)")
    parser.add_argument("--population-share", type=PROBABILITY, default=0.02,
                        help="share of ρ for the noisy n under add-remove")


class ReleaseOptions(JobOptions):
    """Options both panel synthesizers share."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_budget_options(parser)
        parser.add_argument("--seed", type=NON_NEGATIVE_INT, default=None,
                            help="use the reproducible simulation sampler (NOT for "
                                 "publication)")
        parser.add_argument("--format", dest="out_format", default="parquet", choices=FORMATS,
                            help="output format")
        parser.add_argument("--id-col", default="id", help="column of the person's id")
        parser.add_argument("--period-col", default="period", help="column of the period")
        parser.add_argument("--value-col", default="value", help="column of the report")
        parser.add_argument("--missing-value", default=None,
                            help="fill a missing report with this value (default: a missing "
                                 "report is an error)")
        parser.add_argument("--shards", type=POSITIVE_INT, default=16,
                            help="shards of people for pivoting and emission")


class WindowOptions(ReleaseOptions):
    """The fixed-time-window synthesizer's options (Bun et al. 2024, Algorithm 1)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_window_parameters(parser)


class CumulativeOptions(ReleaseOptions):
    """The cumulative synthesizer's options (Bun et al. 2024, Algorithm 2)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_cumulative_parameters(parser)


class WindowRunOptions(InvalidRecordsOptions, WindowOptions, OutputOptions, InputOptions):
    description = "window synthesizer: synthesize a whole panel in one job"


class WindowInitOptions(InvalidRecordsOptions, WindowOptions, InitOptions):
    description = "window synthesizer: create the state of an incremental release"


class CumulativeRunOptions(InvalidRecordsOptions, CumulativeOptions, OutputOptions,
                           InputOptions):
    description = "cumulative synthesizer: synthesize a whole panel in one job"


class CumulativeInitOptions(InvalidRecordsOptions, CumulativeOptions, InitOptions):
    description = "cumulative synthesizer: create the state of an incremental release"


# The Beam jobs of this module's commands: job name (``window_step`` is ``continual-synth
# window step`` and ``python -m continual_synth.jobs.window_step``) → options class.
JOBS = {"window_run": WindowRunOptions, "window_init": WindowInitOptions,
        "window_step": StepOptions,
        "cumulative_run": CumulativeRunOptions, "cumulative_init": CumulativeInitOptions,
        "cumulative_step": StepOptions}


def job_options() -> Dict[str, type]:
    """Every Beam job of the command line, this module's and its extensions' (``JOBS``:
    a family that declares its jobs there gets job modules and Flex Template metadata)."""
    table = dict(JOBS)
    for extension in _extensions():
        table.update(getattr(extension, "JOBS", {}))
    return table


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="continual-synth",
        description="Continual differentially private synthetic data (Apache Beam pipelines).")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="show Beam's logs (accepted anywhere on the line)")
    commands = parser.add_subparsers(dest="command", required=True)

    from continual_synth.pipelines.stream import add_stream_command
    window = add_job_commands(commands, "window", "fixed-time-window synthesizer (Bun et al. "
                              "2024, Algorithm 1)", JOBS)
    add_stream_command(window, lambda parser: add_job_options(parser, WindowOptions))
    cumulative = add_job_commands(commands, "cumulative", "cumulative synthesizer (Bun et al. "
                                  "2024, Algorithm 2)", JOBS)
    add_stream_command(cumulative, lambda parser: add_job_options(parser, CumulativeOptions))

    evaluate = commands.add_parser("evaluate", help="evaluate a release against the truth"
                                   ).add_subparsers(dest="action", required=True)
    ev_window = evaluate.add_parser("window", help="window histograms, Theorem 3.2 bound, "
                                    "quarterly queries", formatter_class=HelpFormatter)
    ev_window.add_argument("--truth", required=True,
                           help="the real panel (file or directory: id, period, value)")
    ev_window.add_argument("--synthetic", required=True, help="the release directory to evaluate")
    ev_window.add_argument("--report", default=None, help=REPORT_HELP)
    ev_window.add_argument("--id-col", default="id", help="the truth's id column")
    ev_window.add_argument("--period-col", default="period", help="the truth's period column")
    ev_window.add_argument("--value-col", default="value", help="the truth's value column")
    ev_cumulative = evaluate.add_parser("cumulative", help="counts of people with at least b "
                                        "ones by period against the truth and the bound",
                                        formatter_class=HelpFormatter)
    ev_cumulative.add_argument("--truth", required=True,
                           help="the real panel (file or directory: id, period, value)")
    ev_cumulative.add_argument("--synthetic", required=True, help="the release directory to evaluate")
    ev_cumulative.add_argument("--report", default=None, help=REPORT_HELP)
    ev_cumulative.add_argument("--id-col", default="id", help="the truth's id column")
    ev_cumulative.add_argument("--period-col", default="period", help="the truth's period column")
    ev_cumulative.add_argument("--value-col", default="value", help="the truth's value column")

    for extension in _extensions():
        extension.add_commands(commands, evaluate)

    demo = commands.add_parser("demo", help="run everything on an embedded SIPP-like panel",
                               formatter_class=HelpFormatter)
    demo.add_argument("--output", required=True,
                      help="a new or empty directory for the demo's panel, releases and "
                           "reports")
    demo.add_argument("--seed", type=NON_NEGATIVE_INT, default=None,
                      help="reproducible simulation sampler (NOT for publication)")
    return parser


def _config(args, kind: Optional[str] = None):
    """The window or cumulative configuration the options describe (``kind``: which,
    default the command's)."""
    if (kind or args.command) == "window":
        from continual_synth.mechanisms.window import WindowConfig
        from continual_synth.pipelines.options import parse_alphabet
        return WindowConfig(window=args.window, horizon=args.horizon, rho=args.rho,
                            alphabet=parse_alphabet(args.alphabet), neighbor=args.neighbor,
                            beta=args.beta, n_pad=args.n_pad, delta=args.delta)
    from continual_synth.mechanisms.cumulative import CumulativeConfig
    return CumulativeConfig(horizon=args.horizon, rho=args.rho, neighbor=args.neighbor,
                            counter=args.counter, beta=args.beta, delta=args.delta,
                            population_share=args.population_share,
                            public_population=args.public_population,
                            budget_split=args.budget_split)


def _model(args):
    from continual_synth.mechanisms.panel_synthesizers import CumulativeSynthesizer, WindowSynthesizer
    config = _config(args)
    return WindowSynthesizer(config) if args.command == "window" else CumulativeSynthesizer(config)


def _common(args, alphabet):
    from continual_synth.pipelines.options import PanelColumns, parse_value
    return dict(seed=args.seed, out_format=args.out_format,
                columns=PanelColumns(args.id_col, args.period_col, args.value_col),
                missing_value=parse_value(args.missing_value, alphabet),
                num_shards=args.shards)


def dispatch(args, beam_args: List[str]) -> dict:
    if args.command == "plan":  # runs no pipeline: no runner to resolve or start
        return _dispatch(args, beam_args)
    from continual_synth.runners.presets import resolved_beam_args
    with resolved_beam_args(beam_args, getattr(args, "verbose", False)) as resolved:
        return _dispatch(args, resolved)


def _extensions():
    """Command families defined in their own modules (each has ``add_commands`` and
    ``dispatch``, which returns None for a command it does not own)."""
    from continual_synth.pipelines import bounded_cli, plan_cli, tabular_cli
    return (tabular_cli, bounded_cli, plan_cli)


def _dispatch(args, beam_args: List[str]) -> dict:
    from continual_synth.pipelines import jobs, lifecycle, release_dir
    from continual_synth.transforms import storage
    for extension in _extensions():
        result = extension.dispatch(args, beam_args)
        if result is not None:
            return result
    if args.command in ("window", "cumulative"):
        if args.action == "step":
            summary = jobs.step(args.state, args.input, args.output,
                                in_format=args.input_format, period=args.period,
                                beam_args=beam_args, kind=args.command, wait=args.wait,
                                invalid_records=args.invalid_records)
            if summary.get("status") == "released":
                jobs.warn_if_mostly_noise(release_dir.read_json(
                    storage.join(args.output, lifecycle.MANIFEST)))
            return summary
        model = _model(args)
        if args.action == "stream":
            from continual_synth.pipelines.stream import run_stream
            return run_stream(jobs.PanelJob(args.command),
                              jobs.initial_document(model, **_common(args, model.alphabet)),
                              args, beam_args, period_col=args.period_col, distinct_rows=True)
        if args.action == "run":
            manifest = jobs.run(model, args.input, args.output, in_format=args.input_format,
                                beam_args=beam_args, invalid_records=args.invalid_records,
                                **_common(args, model.alphabet))
            jobs.warn_if_mostly_noise(manifest)
            return manifest
        common = {**_common(args, model.alphabet), "invalid_records": args.invalid_records}
        if initialise(args.exists_ok, args.state, jobs.initial_document(model, **common),
                      lambda: jobs.init(model, args.state, **common)):
            return kept_state(args.state)
        return {"status": "initialised", "state": args.state,
                **{key: value for key, value in model.manifest(model.initial_state()).items()
                   if key in ("window", "horizon", "neighbor", "rho", "n_pad", "error_bound",
                              "counter_rhos")}}
    if args.command == "evaluate":
        if args.action == "window":
            from continual_synth.pipelines.evaluate_window import evaluate_window as evaluate
        else:
            from continual_synth.pipelines.evaluate_cumulative import (
                evaluate_cumulative as evaluate)
        summary = evaluate(args.truth, args.synthetic, args.report, id_col=args.id_col,
                           period_col=args.period_col, value_col=args.value_col)
        return _headline(summary)
    from continual_synth.pipelines.demo import demo
    return demo(args.output, seed=args.seed, beam_args=beam_args)


def _holds_same_state(state_dir: str, document: dict, canonical=None) -> bool:
    """Whether ``state_dir`` holds a state (False: none yet) made by ``init`` with the
    settings of ``document`` (the state document this ``init`` would create), however many
    steps it has taken since; a state made with other settings is a :class:`StateError`
    naming them (``init --exists-ok`` of every family; :func:`lifecycle.check_same_settings`)."""
    from continual_synth.pipelines.lifecycle import StateDir, check_same_settings
    store = StateDir(state_dir)
    if not store.exists():
        return False
    check_same_settings(state_dir, store.read(document["kind"])[1], document, canonical)
    return True


def initialise(exists_ok: bool, state_dir: str, document: dict, init: Callable[[], None],
               canonical=None) -> bool:
    """``init`` (which creates ``state_dir`` holding ``document``), or, with
    ``exists_ok``, keep a state already there made with the same settings: True if kept.
    Two ``init --exists-ok`` started together with the same options both succeed: the
    one whose exclusive create loses finds the winner's state and keeps it."""
    from continual_synth.mechanisms.errors import StateError
    if exists_ok and _holds_same_state(state_dir, document, canonical):
        return True
    try:
        init()
    except StateError:
        if exists_ok and _holds_same_state(state_dir, document, canonical):
            return True  # another init created it meanwhile, with these settings
        raise
    return False


def kept_state(state_dir: str) -> dict:
    """The summary of ``init --exists-ok`` on a state it keeps."""
    return {"status": "kept", "state": state_dir,
            "message": "the state exists with these options; kept as it is"}


def _headline(summary: dict) -> dict:
    """The few numbers worth printing from an evaluation summary."""
    keys = [k for k in summary if not isinstance(summary[k], (list, dict))]
    return {**{k: summary[k] for k in keys}, "error_bound": summary["error_bound"],
            "overall": summary["overall"]}


def _command_options(parser: argparse.ArgumentParser, args) -> List[str]:
    """The option strings of the subcommand ``args`` chose (for "did you mean")."""
    for word in (args.command, getattr(args, "action", None)):
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or word not in subparsers[0].choices:
            break
        parser = subparsers[0].choices[word]
    return [option for action in parser._actions for option in action.option_strings]


def main(argv: Optional[List[str]] = None) -> int:
    from continual_synth.pipelines import logs
    argv, verbose = logs.strip_verbose(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    args.verbose = verbose or getattr(args, "verbose", False)
    if beam_args and not beam_args[0].startswith("--"):
        parser.error(f"unrecognised arguments: {' '.join(beam_args)}")
    return execute(args, beam_args, f"{args.command} {getattr(args, 'action', '')}".strip(),
                   _command_options(parser, args))


def perform(args, beam_args: List[str], command: str, command_options: List[str]) -> dict:
    """Run parsed options (``args.command`` and ``args.action`` say which job) with the
    rest of the arguments as Beam's options, after every check that needs no data; return
    the job's result (what the command prints).  Errors are raised, typed: the command
    line's :func:`execute` and the Python API (:mod:`continual_synth.pipelines.api`)
    share this.  ``command_options`` are the job's own options (for "did you mean")."""
    from continual_synth.pipelines import logs
    from continual_synth.pipelines.options import (check_beam_args, check_directory_options,
                                                   check_outside_releases,
                                                   check_separate_locations)
    from continual_synth.pipelines.publication import source_date
    from continual_synth.transforms.storage import configure
    check_beam_args(beam_args, command, command_options)
    source_date()  # SOURCE_DATE_EPOCH, before anything is read
    configure(beam_args)  # --s3_endpoint_url … reach the driver's reads and writes too
    check_separate_locations(args)
    check_directory_options(args)
    check_outside_releases(args)  # (the buckets exist: checked above)
    if args.command == "evaluate":
        logs.LOGGER.info("reading the truth %s and the release %s", args.truth,
                         args.synthetic)
    result = dispatch(args, logs.beam_log_args(beam_args, getattr(args, "verbose", False)))
    if getattr(args, "report", None):
        logs.LOGGER.info("report written → %s", args.report)
    return result


def execute(args, beam_args: List[str], command: str, command_options: List[str]) -> int:
    """:func:`perform`, then print the result as JSON and return 0, or print a one-line
    error and return 2."""
    from continual_synth.pipelines import logs
    logs.configure(command, getattr(args, "verbose", False))
    from continual_synth.mechanisms.accounting import BudgetExceededError
    from continual_synth.mechanisms.errors import (InputError, ParameterError, StateError,
                                                   one_line)
    try:
        result = perform(args, beam_args, command, command_options)
    except ParameterError as exc:  # a config's check: name the option that set the value
        print(f"continual-synth: error: {exc.for_command_line()}", file=sys.stderr)
        return 2
    except (InputError, StateError, BudgetExceededError, ValueError) as exc:
        print(f"continual-synth: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # the environment failed the job: one line, exit 3
        from continual_synth.mechanisms.errors import ENVIRONMENT_EXIT, environment_fault
        fault = environment_fault(exc)
        if fault is None:
            raise
        places = ", ".join(f"--{name} {getattr(args, name)}" for name in ("output", "state")
                           if getattr(args, name, None))
        print(f"continual-synth: error: {fault}{f' [the job writes {places}]' if places else ''}",
              file=sys.stderr)
        return ENVIRONMENT_EXIT
    except KeyboardInterrupt:  # 128 + SIGINT, as a shell reports an interrupted command
        print("continual-synth: interrupted (Ctrl-C): a release is published all or nothing "
              "and a step commits all or nothing, so run the same command again to finish",
              file=sys.stderr)
        return 130
    from continual_synth.pipelines.publication import printed
    logs.LOGGER.info(logs.summary_line())
    try:
        print(json.dumps(printed(result, command), indent=2, default=str, ensure_ascii=False))
        sys.stdout.flush()
    except BrokenPipeError:  # `| head` closed the pipe: the job has finished, only its
        # summary was cut; no traceback, and none at exit (Python's documented idiom)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    from continual_synth.launch import console_main
    console_main()


def reference_markdown() -> str:
    """The command-line reference as Markdown, generated from the parsers: every command's
    ``--help`` (the guide's page ``docs/cli.md`` is built from it)."""
    parser = build_parser()
    sections = []

    def walk(parser_, words):
        subparsers = [a for a in parser_._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers:
            text = parser_.format_help().replace("usage: continual-synth",
                                                 "usage: continual-synth", 1)
            sections.append(f"## `continual-synth {' '.join(words)}`\n\n```text\n{text}```\n")
            return
        for name, child in subparsers[0].choices.items():
            walk(child, words + [name])
    walk(parser, [])
    return "\n".join(sections)
