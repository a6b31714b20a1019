"""The panel synthesizers' commands (Bun, Gaboardi, Neunhoeffer and Zhang 2024).

    continual-synth window run  --input PANEL --output DIR --window K --horizon T --rho R [...]
    continual-synth window init --state STATE --window K --horizon T --rho R [...]
    continual-synth window step --state STATE --input PERIOD_FILE --output DIR
    continual-synth window stream --watch DIR --state STATE --output DIR [--until-period P] [...]
    continual-synth cumulative run | init | step | stream  (same options; --counter, --public-population)
    continual-synth evaluate window --truth PANEL --synthetic DIR [--report REPORT_DIR]
    continual-synth evaluate cumulative --truth PANEL --synthetic DIR [--report REPORT_DIR]

Declared as two :class:`~continual_synth.pipelines.commands.family.Family` records,
:data:`WINDOW` and :data:`CUMULATIVE`, from which :mod:`continual_synth.pipelines.commands.
cli` builds and runs the commands, as it does the other families'.
"""
from __future__ import annotations

from typing import List, Optional

from continual_synth.pipelines.commands.family import Family, invalid_records_option
from continual_synth.pipelines.commands.options import (FORMATS, NON_NEGATIVE_INT,
                                                        POSITIVE_INT, POSITIVE_REAL,
                                                        PROBABILITY, InitOptions,
                                                        InputOptions, InvalidRecordsOptions,
                                                        JobOptions, OutputOptions,
                                                        REPORT_HELP, StepOptions,
                                                        add_job_options)

__all__ = ["WINDOW", "CUMULATIVE", "add_budget_options", "add_window_parameters",
           "add_cumulative_parameters", "config_from_args", "synthesizer_from_args",
           "common_options"]


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


def add_evaluate_arguments(parser) -> None:
    """``evaluate window`` and ``evaluate cumulative``: the truth and the release."""
    parser.add_argument("--truth", required=True,
                        help="the real panel (file or directory: id, period, value)")
    parser.add_argument("--synthetic", required=True, help="the release directory to evaluate")
    parser.add_argument("--report", default=None, help=REPORT_HELP)
    parser.add_argument("--id-col", default="id", help="the truth's id column")
    parser.add_argument("--period-col", default="period", help="the truth's period column")
    parser.add_argument("--value-col", default="value", help="the truth's value column")


def config_from_args(args, kind: Optional[str] = None):
    """The window or cumulative configuration the options describe (``kind``: which,
    default the command's)."""
    if (kind or args.command) == "window":
        from continual_synth.mechanisms.window import WindowConfig
        from continual_synth.pipelines.commands.options import parse_alphabet
        return WindowConfig(window=args.window, horizon=args.horizon, rho=args.rho,
                            alphabet=parse_alphabet(args.alphabet), neighbor=args.neighbor,
                            beta=args.beta, n_pad=args.n_pad, delta=args.delta)
    from continual_synth.mechanisms.cumulative import CumulativeConfig
    return CumulativeConfig(horizon=args.horizon, rho=args.rho, neighbor=args.neighbor,
                            counter=args.counter, beta=args.beta, delta=args.delta,
                            population_share=args.population_share,
                            public_population=args.public_population,
                            budget_split=args.budget_split)


def synthesizer_from_args(args):
    """The window or cumulative synthesizer the options describe."""
    from continual_synth.mechanisms.panel_synthesizers import (CumulativeSynthesizer,
                                                               WindowSynthesizer)
    config = config_from_args(args)
    return WindowSynthesizer(config) if args.command == "window" else CumulativeSynthesizer(config)


def common_options(args, alphabet) -> dict:
    """The job options both panel families' run, init and stream take."""
    from continual_synth.pipelines.commands.options import PanelColumns, parse_value
    return dict(seed=args.seed, out_format=args.out_format,
                columns=PanelColumns(args.id_col, args.period_col, args.value_col),
                missing_value=parse_value(args.missing_value, alphabet),
                num_shards=args.shards)


def prepare(args):
    """The synthesizer the options describe and the state document of its ``init``."""
    from continual_synth.pipelines.families import jobs
    model = synthesizer_from_args(args)
    return model, jobs.initial_document(model, **common_options(args, model.alphabet),
                                        **invalid_records_option(args))


def initialised(args, model) -> dict:
    """What ``init`` prints: the synthesizer's public parameters and its error bound."""
    return {"status": "initialised", "state": args.state,
            **{key: value for key, value in model.manifest(model.initial_state()).items()
               if key in ("window", "horizon", "neighbor", "rho", "n_pad", "error_bound",
                          "counter_rhos")}}


def run(args, beam_args: List[str]) -> dict:
    """``run``: the whole panel in one job."""
    from continual_synth.pipelines.families import jobs
    model = synthesizer_from_args(args)
    manifest = jobs.run(model, args.input, args.output, in_format=args.input_format,
                        beam_args=beam_args, invalid_records=args.invalid_records,
                        **common_options(args, model.alphabet))
    jobs.warn_if_mostly_noise(manifest)
    return manifest


def released(args) -> None:
    """After a step that released: warn if the release is mostly noise."""
    from continual_synth.pipelines.families import jobs
    from continual_synth.pipelines.release import lifecycle, release_dir
    from continual_synth.transforms import storage
    jobs.warn_if_mostly_noise(release_dir.read_json(storage.join(args.output,
                                                                 lifecycle.MANIFEST)))


def evaluate(args) -> dict:
    """``evaluate window`` or ``evaluate cumulative``: the headline of the summary."""
    if args.action == "window":
        from continual_synth.pipelines.evaluation.evaluate_window import (
            evaluate_window as evaluation)
    else:
        from continual_synth.pipelines.evaluation.evaluate_cumulative import (
            evaluate_cumulative as evaluation)
    summary = evaluation(args.truth, args.synthetic, args.report, id_col=args.id_col,
                         period_col=args.period_col, value_col=args.value_col)
    return _headline(summary)


def _panel_family(name: str, help_text: str, run_options: type, init_options: type,
                  options: type, evaluation_help: str) -> Family:
    """A panel synthesizer's record: both share their state document, jobs and driver."""
    return Family(
        name=name, help=help_text,
        jobs={"run": run_options, "init": init_options, "step": StepOptions},
        stream_options=lambda parser: add_job_options(parser, options),
        kind=name, prepare=prepare, initialised=initialised, run=run, released=released,
        evaluations={name: (add_evaluate_arguments, evaluate, evaluation_help)},
        distinct_rows=True)


WINDOW = _panel_family("window", "fixed-time-window synthesizer (Bun et al. 2024, "
                       "Algorithm 1)", WindowRunOptions, WindowInitOptions, WindowOptions,
                       "window histograms, Theorem 3.2 bound, quarterly queries")
CUMULATIVE = _panel_family("cumulative", "cumulative synthesizer (Bun et al. 2024, "
                           "Algorithm 2)", CumulativeRunOptions, CumulativeInitOptions,
                           CumulativeOptions, "counts of people with at least b ones by "
                           "period against the truth and the bound")


def _headline(summary: dict) -> dict:
    """The few numbers worth printing from an evaluation summary."""
    keys = [k for k in summary if not isinstance(summary[k], (list, dict))]
    return {**{k: summary[k] for k in keys}, "error_bound": summary["error_bound"],
            "overall": summary["overall"]}
