"""The ``continual-synth`` command line.

    continual-synth window run  --input PANEL --output DIR --window K --horizon T --rho R [...]
    continual-synth window init --state STATE --window K --horizon T --rho R [...]
    continual-synth window step --state STATE --input PERIOD_FILE --output DIR
    continual-synth window stream --watch DIR --state STATE --output DIR [--until-period P] [...]
    continual-synth cumulative run | init | step | stream  (same options; --counter, --public-population)
    continual-synth evaluate window --truth PANEL --synthetic DIR [--report REPORT_DIR]
    continual-synth evaluate cumulative --truth PANEL --synthetic DIR [--report REPORT_DIR]
    continual-synth demo --output DIR

Arguments the command does not know (``--runner``, ``--direct_num_workers`` …) are
passed to Apache Beam as pipeline options; ``--runner dask-local`` runs on a local
dask.distributed cluster (see :mod:`continual_synth.runners.presets`).
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from typing import List, Optional

# Beam logs import-time warnings and each failing DoFn's traceback; the command
# reports errors itself, so keep Beam quiet unless --verbose is given.
logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")


def _add_release_options(parser: argparse.ArgumentParser) -> None:
    """Options both synthesizers share."""
    from continual_synth.pipelines.options import NON_NEGATIVE_INT, POSITIVE_INT
    parser.add_argument("--horizon", type=int, required=True, help="number of periods T")
    parser.add_argument("--rho", type=float, required=True, help="total zCDP budget ρ")
    parser.add_argument("--neighbor", choices=["replace", "add-remove"], default="replace",
                        help="neighbouring relation (default: replace one person's sequence)")
    parser.add_argument("--beta", type=float, default=0.05,
                        help="failure probability of the error bound (default 0.05)")
    parser.add_argument("--delta", type=float, default=1e-6,
                        help="δ of the (ε, δ) reading in the manifest (default 1e-6)")
    parser.add_argument("--seed", type=NON_NEGATIVE_INT, default=None,
                        help="use the reproducible simulation sampler (NOT for publication)")
    parser.add_argument("--format", dest="out_format", default="parquet",
                        choices=["parquet", "csv", "avro"], help="output format")
    parser.add_argument("--id-col", default="id")
    parser.add_argument("--period-col", default="period")
    parser.add_argument("--value-col", default="value")
    parser.add_argument("--missing-value", default=None,
                        help="fill a missing report with this value instead of failing")
    parser.add_argument("--shards", type=POSITIVE_INT, default=16,
                        help="shards of people for pivoting and emission (default 16)")


def _add_window_options(parser: argparse.ArgumentParser) -> None:
    _add_release_options(parser)
    parser.add_argument("--window", type=int, required=True, help="window length k (periods)")
    parser.add_argument("--n-pad", type=int, default=None,
                        help="padding records per bin (default: Theorem 3.2's bound at β)")
    parser.add_argument("--alphabet", default="0,1", help="values a report can take (default 0,1)")


def _add_cumulative_options(parser: argparse.ArgumentParser) -> None:
    from continual_synth.mechanisms.counters import UNBOUNDED_KINDS, counter_kinds
    _add_release_options(parser)
    parser.add_argument("--counter", default="tree",
                        choices=[k for k in counter_kinds() if k not in UNBOUNDED_KINDS],
                        help="private stream counter per threshold (default: tree, the paper's; "
                             "blt or sqrt-factorisation have the least error)")
    parser.add_argument("--budget-split", default=None, choices=["paper", "equal-variance"],
                        help="rho across the counters: App. B's (paper) or equal worst-case "
                             "variance (default: the one with the lower error bound, named "
                             "in the manifest)")
    parser.add_argument("--public-population", action="store_true",
                        help="under add-remove, treat the number of people n as public "
                             "(otherwise n is released with noise from a share of ρ)")
    parser.add_argument("--population-share", type=float, default=0.02,
                        help="share of ρ for the noisy n under add-remove (default 0.02)")


def _add_job_commands(commands, name: str, help_text: str, add_options) -> None:
    from continual_synth.pipelines.options import POSITIVE_INT
    jobs = commands.add_parser(name, help=help_text).add_subparsers(dest="action", required=True)
    run = jobs.add_parser("run", help="synthesize a whole panel in one job")
    run.add_argument("--input", required=True, help="long panel: file or directory")
    run.add_argument("--input-format", default=None, choices=["parquet", "csv", "avro"])
    run.add_argument("--output", required=True, help="release directory")
    add_options(run)
    init = jobs.add_parser("init", help="create the state of an incremental release")
    init.add_argument("--state", required=True, help="state directory (holds private data)")
    add_options(init)
    step = jobs.add_parser("step", help="ingest the next period and release it")
    step.add_argument("--state", required=True)
    step.add_argument("--input", required=True, help="one period's reports (id, value)")
    step.add_argument("--input-format", default=None, choices=["parquet", "csv", "avro"])
    step.add_argument("--output", required=True, help="release directory")
    step.add_argument("--period", type=POSITIVE_INT, default=None,
                      help="the period this file holds (checked; default: the next one)")
    step.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                      help="if another step owns the state, wait up to this long for it "
                           "(default 0: refuse at once)")
    from continual_synth.pipelines.stream import add_stream_arguments
    stream = jobs.add_parser("stream", help="release each period when its file lands in "
                             "a watched directory (the state as init/step keep it)")
    add_stream_arguments(stream)
    add_options(stream)


def build_parser() -> argparse.ArgumentParser:
    from continual_synth.pipelines.options import NON_NEGATIVE_INT
    parser = argparse.ArgumentParser(
        prog="continual-synth",
        description="Continual differentially private synthetic data (Apache Beam pipelines).")
    parser.add_argument("--verbose", action="store_true", help="show Beam's logs")
    commands = parser.add_subparsers(dest="command", required=True)

    _add_job_commands(commands, "window", "fixed-time-window synthesizer (Bun et al. 2024, "
                      "Algorithm 1)", _add_window_options)
    _add_job_commands(commands, "cumulative", "cumulative synthesizer (Bun et al. 2024, "
                      "Algorithm 2)", _add_cumulative_options)

    evaluate = commands.add_parser("evaluate", help="evaluate a release against the truth"
                                   ).add_subparsers(dest="action", required=True)
    ev_window = evaluate.add_parser("window", help="window histograms, Theorem 3.2 bound, "
                                    "quarterly queries")
    ev_window.add_argument("--truth", required=True)
    ev_window.add_argument("--synthetic", required=True)
    ev_window.add_argument("--report", default=None, help="directory for summary.json and plots")
    ev_window.add_argument("--id-col", default="id")
    ev_window.add_argument("--period-col", default="period")
    ev_window.add_argument("--value-col", default="value")
    ev_cumulative = evaluate.add_parser("cumulative", help="counts of people with at least b "
                                        "ones by period against the truth and the bound")
    ev_cumulative.add_argument("--truth", required=True)
    ev_cumulative.add_argument("--synthetic", required=True)
    ev_cumulative.add_argument("--report", default=None,
                               help="directory for summary.json and plots")
    ev_cumulative.add_argument("--id-col", default="id")
    ev_cumulative.add_argument("--period-col", default="period")
    ev_cumulative.add_argument("--value-col", default="value")

    for extension in _extensions():
        extension.add_commands(commands, evaluate)

    demo = commands.add_parser("demo", help="run everything on an embedded SIPP-like panel")
    demo.add_argument("--output", required=True)
    demo.add_argument("--seed", type=NON_NEGATIVE_INT, default=None,
                      help="reproducible simulation sampler (NOT for publication)")
    return parser


def _config(args):
    if args.command == "window":
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
    from continual_synth.runners.presets import resolved_beam_args
    with resolved_beam_args(beam_args) as resolved:
        return _dispatch(args, resolved)


def _extensions():
    """Command families defined in their own modules (each has ``add_commands`` and
    ``dispatch``, which returns None for a command it does not own)."""
    from continual_synth.pipelines import bounded_cli, tabular_cli
    return (tabular_cli, bounded_cli)


def _dispatch(args, beam_args: List[str]) -> dict:
    from continual_synth.pipelines import jobs
    for extension in _extensions():
        result = extension.dispatch(args, beam_args)
        if result is not None:
            return result
    if args.command in ("window", "cumulative"):
        if args.action == "step":
            return jobs.step(args.state, args.input, args.output, in_format=args.input_format,
                             period=args.period, beam_args=beam_args, kind=args.command,
                             wait=args.wait)
        model = _model(args)
        if args.action == "stream":
            from continual_synth.pipelines.stream import run_stream
            return run_stream(jobs.PanelJob(args.command),
                              jobs.initial_document(model, **_common(args, model.alphabet)),
                              args, beam_args, period_col=args.period_col, distinct_rows=True)
        if args.action == "run":
            return jobs.run(model, args.input, args.output, in_format=args.input_format,
                            beam_args=beam_args, **_common(args, model.alphabet))
        jobs.init(model, args.state, **_common(args, model.alphabet))
        return {"status": "initialised", "state": args.state,
                **{key: value for key, value in model.manifest(model.initial_state()).items()
                   if key in ("n_pad", "error_bound", "counter_rhos")}}
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


def _headline(summary: dict) -> dict:
    """The few numbers worth printing from an evaluation summary."""
    keys = [k for k in summary if not isinstance(summary[k], (list, dict))]
    return {**{k: summary[k] for k in keys}, "error_bound": summary["error_bound"],
            "overall": summary["overall"]}


def _clean_message(exc: BaseException) -> str:
    """One line: without Beam's stage label, a library's multi-line message joined."""
    text = re.sub(r" \[while running '[^']*'\]", "", str(exc)).strip()
    return re.sub(r"\s*\n\s*", " ", text)


def _command_options(parser: argparse.ArgumentParser, args) -> List[str]:
    """The option strings of the subcommand ``args`` chose (for "did you mean")."""
    for word in (args.command, getattr(args, "action", None)):
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or word not in subparsers[0].choices:
            break
        parser = subparsers[0].choices[word]
    return [option for action in parser._actions for option in action.option_strings]


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    if args.verbose:
        logging.getLogger().setLevel(logging.INFO)
    else:  # Beam logs each failing DoFn's traceback at ERROR; the error is reported below
        logging.getLogger("apache_beam").setLevel(logging.CRITICAL)
    if beam_args and not beam_args[0].startswith("--"):
        parser.error(f"unrecognised arguments: {' '.join(beam_args)}")
    from continual_synth.mechanisms.accounting import BudgetExceededError
    from continual_synth.mechanisms.errors import InputError, ParameterError, StateError
    from continual_synth.pipelines.options import check_beam_args, check_directory_options
    try:
        check_beam_args(beam_args, f"{args.command} {getattr(args, 'action', '')}".strip(),
                        _command_options(parser, args))
        check_directory_options(args)
        result = dispatch(args, beam_args)
    except ParameterError as exc:  # a config's check: name the option that set the value
        print(f"continual-synth: error: {exc.for_command_line()}", file=sys.stderr)
        return 2
    except (InputError, StateError, BudgetExceededError, ValueError) as exc:
        print(f"continual-synth: error: {_clean_message(exc)}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
