"""The ``continual-synth tabular`` commands (Kumar, Strohmer and Vershynin 2024).

    continual-synth tabular run  --input STREAM --output DIR --domain DOMAIN.json --epsilon E
                                 [--method proposed|baseline] [--selections K] [--marginals 2]
                                 [--counter simple] [--fit ipf|pgm|mw] [--horizon T] [--seed S] …
    continual-synth tabular init --state STATE --domain DOMAIN.json --epsilon E [same options]
                                 [--exists-ok]
    continual-synth tabular step --state STATE --input PERIOD_FILE --output DIR [--period P]
    continual-synth tabular stream --watch DIR --state STATE --output DIR [--until-period P]
                                 --domain DOMAIN.json --epsilon E [same options as init]
    continual-synth tabular example --output DIR [--construction randomized|ordered]
                                 [--batch-size 50] [--periods N] [--seed 0]
    continual-synth evaluate tabular --truth STREAM --synthetic DIR --domain DOMAIN.json
                                 [--marginals 2] [--report DIR] [--last 10]

Declared as one :class:`~continual_synth.pipelines.commands.family.Family` record,
:data:`TABULAR`, from which :mod:`continual_synth.pipelines.commands.cli` builds and runs
the commands.
"""
from __future__ import annotations

import argparse
from typing import List, Optional

from continual_synth.pipelines.commands.family import Family, invalid_records_option
from continual_synth.pipelines.commands.options import (FORMATS, NON_NEGATIVE_INT,
                                                        POSITIVE_INT, POSITIVE_REAL,
                                                        PROBABILITY, HelpFormatter,
                                                        InitOptions, InputOptions,
                                                        InvalidRecordsOptions,
                                                        OutputOptions, REPORT_HELP,
                                                        StepOptions)

__all__ = ["add_model_options", "TabularRunOptions", "TabularInitOptions",
           "add_example_command", "write_example", "add_evaluate_arguments",
           "synthesizer_from_args", "evaluate", "run", "prepare", "initialised", "TABULAR"]


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """ε, the method, the workloads and the selection, measurement and fit rules: what
    decides a release's error (a release's options and ``plan tabular``'s)."""
    from continual_synth.mechanisms.counters import counter_kinds, counter_units
    parser.add_argument("--epsilon", type=POSITIVE_REAL, required=True,
                        help="total ε of event-level ε-DP for the whole stream")
    parser.add_argument("--method", choices=["proposed", "baseline"], default="proposed",
                        help="proposed: select-measure-fit with counters (§6, Algorithm 3); "
                             "baseline: an independent synthesizer per period (§5, "
                             "Algorithm 2)")
    parser.add_argument("--selections", type=POSITIVE_INT, default=None,
                        help="workloads selected per period, the paper's k (default: 3, or "
                             "for the proposed method the most measurements whose noise is at "
                             "most one record per cell, up to 12, then 24 with a growing "
                             "model size (--model-growth) once 24 are that quiet: 5 at "
                             "epsilon 8, 12 from about 19, 24 from about 38, and a default "
                             "k rises up to 12 in large periods of a drifting stream "
                             "(--selection-schedule); a k given here is the most a period "
                             "makes; --rule paper: 3; docs/tabular.md, Selections)")
    parser.add_argument("--selection-schedule", choices=["drift", "fixed"], default=None,
                        help="drift: a period the drift estimate reads as exchangeable makes "
                             "fewer selections, each with more budget: the most whose noise "
                             "variance per cell stays within the batch's sampling variance, "
                             "and a large period of a drifting stream as many, up to 12 "
                             "(only a default k rises) "
                             "(default for the proposed method with --rule aim and the "
                             "simple counter); fixed: k every period (docs/tabular.md, "
                             "Selections)")
    parser.add_argument("--coverage", choices=["reachable", "none"], default=None,
                        help="reachable: while some attribute's every workload is too large "
                             "for one batch to show its error, measure one of them each "
                             "period until it has an average workload's share of the "
                             "measurements, where that many would carry information (a "
                             "public choice; for many-valued attributes on small batches); "
                             "none: the utility alone selects (docs/tabular.md, Coverage)")
    parser.add_argument("--utility-size", choices=["estimate", "target"], default=None,
                        help="estimate: a selection scores the model at a public estimate "
                             "of the target's size (earlier releases' noisy sizes and the "
                             "period's measurements so far), sensitivity 1 (default for the "
                             "proposed method with --rule aim); target: at the target's own "
                             "size, sensitivity 2 (docs/tabular.md, Rules)")
    parser.add_argument("--unseen-share", choices=["current", "carried"], default=None,
                        help="current: where the stream reads as exchangeable, the periods "
                             "a workload's counter did not see are imputed from the current "
                             "model, moved toward the counter's own share (default with the "
                             "adaptive remainder); carried: from the increment models of "
                             "their own time (docs/tabular.md, Rules)")
    parser.add_argument("--structure", choices=["informative", "measured"], default=None,
                        help="informative: a measured pair joins the fitted model only when "
                             "its measurement departs from independence by more than its "
                             "noise would, and at the model's size limit a pair of no shown "
                             "dependence gives way to a selected workload that needs its room "
                             "(default for the proposed method with the ipf fit and pooled "
                             "margins); measured: every measured workload, as the paper "
                             "(docs/tabular.md, Structure)")
    parser.add_argument("--wide-cells", type=NON_NEGATIVE_INT, default=None,
                        help="measure each selected workload as the marginal of a wider "
                             "attribute set holding it, of at most N cells and as many as "
                             "the period's noise leaves room for, at the same budget (one "
                             "record is one cell), and feed its projections to the "
                             "workloads inside it (proposed method, simple counter); 0: "
                             "off (default: 64 for the proposed method with the simple "
                             "counter and --rule aim, else off; docs/tabular.md, Wide "
                             "measurements)")
    parser.add_argument("--marginals", default="2",
                        help="workloads: a number k for all k-way marginals (default 2), or "
                             "a list 'a,b;a,c'")
    parser.add_argument("--counter", default=None,
                        choices=[k for k in counter_kinds() if "epsilon" in counter_units(k)],
                        help="private stream counter per workload (default: simple, as the "
                             "paper's experiments; kary has the least error under ε-DP)")
    parser.add_argument("--fit", choices=["ipf", "pgm", "mw"], default="ipf",
                        help="ipf: decomposable graphical model on the measured workloads, "
                             "fitted by iterative proportional fitting in numpy (default); "
                             "pgm: private-pgm (mbi, JAX); mw: multiplicative weights over "
                             "the whole domain (small domains only)")
    parser.add_argument("--rule", choices=["aim", "paper"], default="aim",
                        help="selection and measurement rules: aim (default: AIM-style "
                             "utility with noise and sampling bias correction, remainder "
                             "imputed from per-period increment models and, on a stream "
                             "whose periods look exchangeable, shrunk toward the "
                             "counters' own shares; g_t = last iterate) "
                             "or paper "
                             "(Kumar et al. §7.2 utility, bias |W|, r(t, i) of lines 16-21, "
                             "g_t = average of the iterates); see docs/tabular.md")
    parser.add_argument("--margins", choices=["pooled", "none"], default=None,
                        help="pooled: fit every attribute's one-way margin pooled over all "
                             "the periods' measurements of the workloads holding it "
                             "(default with --rule aim and --fit ipf or mw); none: the "
                             "paper's fit of the selected workloads only; see "
                             "docs/tabular.md")
    parser.add_argument("--selection-share", type=PROBABILITY, default=None,
                        help="share of each period's epsilon spent on its k selections, the "
                             "rest on its k measurements (default with --rule aim: 0.1 for "
                             "the proposed method, as AIM, 0.5 for the baseline; the paper's "
                             "0.5 with --rule paper); see docs/tabular.md")
    parser.add_argument("--max-cells", type=POSITIVE_INT, default=None,
                        help="largest fitted model (junction-tree cells); workloads that "
                             "would exceed it are not selected (default: 131072 = 2^17 for "
                             "the ipf and pgm fits, 2^22 for mw)")
    parser.add_argument("--model-growth", choices=["fixed", "horizon"], default=None,
                        help="horizon: the model's size limit grows with the periods, "
                             "max-cells x t/T at period t (the proposed method with the ipf "
                             "fit and a horizon; the default there with 24 selections whose "
                             "noise is at most one record per cell, from epsilon about 38); "
                             "fixed: max-cells from the first period (docs/tabular.md, "
                             "Selections)")


def _add_synthesizer_options(parser: argparse.ArgumentParser, with_infer: bool) -> None:
    # one of --domain and --infer-domain where the data can be read for it (run); else
    # --domain is simply required (a group of one would say "one of the arguments")
    domain = parser.add_mutually_exclusive_group(required=True) if with_infer else parser
    domain.add_argument("--domain", required=not with_infer,
                        help="public domain: JSON object mapping each attribute "
                        "column to the list of its values (null allows a missing value)")
    if with_infer:
        domain.add_argument("--infer-domain", action="store_true",
                            help="read the domain off the private data (NOT private: the "
                                 "release is marked not for publication)")
    add_model_options(parser)
    parser.add_argument("--horizon", type=POSITIVE_INT, default=None,
                        help="number of periods T, a public input (needed by bounded "
                             "counters and event-time streams; default: for run the stream's "
                             "last period — read from the data, so the release is marked not "
                             "for publication — and unbounded counters for steps)")
    parser.add_argument("--seed", type=NON_NEGATIVE_INT, default=None,
                        help="use the reproducible simulation sampler (NOT for publication)")
    parser.add_argument("--format", dest="out_format", default="parquet",
                        choices=FORMATS, help="output format")
    parser.add_argument("--period-col", default="period", help="column of the period")


class TabularRunOptions(InvalidRecordsOptions, OutputOptions, InputOptions):
    description = "tabular synthesizer: synthesize a whole stream (records with a period " \
                  "column) in one job"

    @classmethod
    def _add_argparse_args(cls, parser):
        _add_synthesizer_options(parser, with_infer=True)


class TabularInitOptions(InvalidRecordsOptions, InitOptions):
    description = "tabular synthesizer: create the state of an incremental release"

    @classmethod
    def _add_argparse_args(cls, parser):
        _add_synthesizer_options(parser, with_infer=False)


def add_example_command(actions) -> None:
    """``tabular example``: write a stream built from a real public table."""
    from continual_synth.pipelines.examples.example_tables import CONSTRUCTIONS
    example = actions.add_parser("example", help="write a stream built from a real public "
                                 "table (CCES 2016) and its domain.json",
                                 formatter_class=HelpFormatter)
    example.add_argument("--output", required=True,
                         help="directory for the stream's file and its domain.json")
    example.add_argument("--construction", choices=list(CONSTRUCTIONS),
                         default="randomized",
                         help="§7.1's stream constructions: a random order, sorted by "
                              "every attribute, or the table's stored row order")
    example.add_argument("--batch-size", type=POSITIVE_INT, default=50,
                         help="records per period (default 50; the paper's 50 or 200)")
    example.add_argument("--periods", type=POSITIVE_INT, default=None,
                         help="stop after this many periods (default: the whole table)")
    example.add_argument("--seed", type=NON_NEGATIVE_INT, default=0,
                         help="seed of the randomized order (default 0)")
    example.add_argument("--format", dest="out_format", default="parquet",
                         choices=["parquet", "csv", "avro"], help="the stream's file format")


def write_example(args) -> dict:
    """``tabular example``."""
    from continual_synth.pipelines.examples.example_tables import write_example as write
    return write(args.output, construction=args.construction, batch_size=args.batch_size,
                 seed=args.seed, periods=args.periods, fmt=args.out_format)


def add_evaluate_arguments(ev) -> None:
    """``evaluate tabular``: the truth, the release and the workloads scored."""
    ev.add_argument("--truth", required=True, help="the real stream (with a period column)")
    ev.add_argument("--synthetic", required=True, help="release directory")
    ev.add_argument("--domain", default=None,
                    help="the public domain's JSON file (default: the domain the "
                         "release's manifest records)")
    ev.add_argument("--marginals", default="2",
                    help="the workloads scored: 2 (all 2-way, default), 3, or "
                         "\"a,b;a,c\"")
    ev.add_argument("--report", default=None, help=REPORT_HELP)
    ev.add_argument("--period-col", default="period",
                    help="the period column of the truth and the release (default period)")
    ev.add_argument("--last", type=POSITIVE_INT, default=10,
                    help="average the metrics over the last N periods (default 10)")


def synthesizer_from_args(args, input_path: Optional[str] = None, domain=None):
    """The synthesizer the options describe (the domain given, else read or, if asked,
    inferred)."""
    from continual_synth.mechanisms.marginals import parse_workloads
    from continual_synth.mechanisms.errors import InputError
    from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
    if args.counter is not None and args.method == "baseline":
        raise InputError("--counter is for the proposed method: the baseline measures each "
                         "period's records once, with no counter")
    inferred = bool(getattr(args, "infer_domain", False))
    if domain is None and inferred:
        from continual_synth.pipelines.families.tabular import infer_domain
        from continual_synth.transforms.files import check_dataset
        check_dataset(input_path, getattr(args, "input_format", None))  # names an empty file
        domain = infer_domain(input_path, args.period_col, getattr(args, "input_format", None))
    elif domain is None:
        from continual_synth.pipelines.families.tabular import read_domain
        domain = read_domain(args.domain)
    from continual_synth.mechanisms.tabular import PAPER_SELECTIONS, RULES
    workloads = parse_workloads(args.marginals, domain)
    options = dict(RULES[args.rule])
    if args.max_cells is not None:
        options["max_cells"] = args.max_cells
    if args.margins is not None:
        options["margins"] = args.margins
    if args.model_growth is not None:
        options["model_growth"] = args.model_growth
    if args.selection_share is not None:
        options["selection_share"] = args.selection_share
    if args.selection_schedule is not None:
        options["selection_schedule"] = args.selection_schedule
    if args.coverage is not None:
        options["coverage"] = args.coverage
    if args.structure is not None:
        options["structure"] = args.structure
    if args.utility_size is not None:
        options["utility_size"] = args.utility_size
    if args.unseen_share is not None:
        options["unseen_share"] = args.unseen_share
    if args.wide_cells is not None:
        options["wide_cells"] = args.wide_cells
    selections = args.selections
    if selections is None and args.rule == "paper":
        selections = min(PAPER_SELECTIONS, len(workloads))
    return TabularSynthesizer.create(
        domain=domain, workloads=workloads, epsilon=args.epsilon, method=args.method,
        selections=selections, counter=args.counter, fit=args.fit,
        horizon=args.horizon, domain_inferred=inferred, **options)


def evaluate(args) -> dict:
    """``evaluate tabular``: the summary's figures, without its per-period lists."""
    from continual_synth.pipelines.evaluation.evaluate_tabular import evaluate_tabular
    summary = evaluate_tabular(args.truth, args.synthetic, args.report,
                               domain_path=args.domain, marginals=args.marginals,
                               period_col=args.period_col, last=args.last)
    printed = {key: value for key, value in summary.items()
               if not isinstance(value, (list, dict))
               or key in ("average_last", "sampling_floor", "periods_released",
                          "accuracy_coverage")}
    if "final_period_worst_workloads_by_total_variation" in summary:  # all: --report
        printed["worst_workloads_by_total_variation"] = summary[
            "final_period_worst_workloads_by_total_variation"][:3]
    return printed


def run(args, beam_args: List[str]) -> dict:
    """``tabular run``: the whole stream in one job."""
    from continual_synth.pipelines.families import tabular
    from continual_synth.pipelines.release.lifecycle import check_fresh_output
    check_fresh_output(args.output, replaces_leftovers=True)  # before reading the data
    domain = None
    if not args.infer_domain:  # checked before the data is read for the horizon
        domain = tabular.read_domain(args.domain)
        tabular.check_period_col(domain, args.period_col)
    source = "--horizon"
    if args.horizon is None:  # the documented default: the stream's last period
        args.horizon = tabular.last_period(args.input, args.period_col, args.input_format,
                                           args.invalid_records)
        from continual_synth.pipelines.release.publication import HORIZON_FROM_DATA
        source = HORIZON_FROM_DATA
    synthesizer = synthesizer_from_args(args, args.input, domain)
    manifest = tabular.run(synthesizer, args.input, args.output, seed=args.seed,
                           in_format=args.input_format, out_format=args.out_format,
                           period_col=args.period_col, beam_args=beam_args,
                           horizon_source=source, invalid_records=args.invalid_records)
    _warn_unmeasured(manifest)
    return {key: value for key, value in manifest.items()
            if not isinstance(value, (list, dict)) or key == "periods_released"}


def _warn_unmeasured(manifest: dict) -> None:
    """Log the attributes and workloads no selection measured in a whole run."""
    from continual_synth.pipelines.release.logs import LOGGER
    if manifest.get("attributes_never_measured"):
        LOGGER.warning("no selected workload held %s in %d periods: the release's shares "
                       "of their values are the model's completion (uniform), not the "
                       "data's; a larger ε, larger batches or fewer values would let the "
                       "selection measure them (docs/tabular.md, Coverage)",
                       ", ".join(manifest["attributes_never_measured"]),
                       len(manifest["periods_released"]))
    unmeasured = manifest.get("workloads_never_measured") or []
    if unmeasured:
        LOGGER.info("%d of %d workloads were never selected in %d periods (%s%s): the "
                    "release's joint of each is the model's completion from the measured "
                    "ones, not a measurement (manifest: workloads_never_measured)",
                    len(unmeasured), len(manifest["workloads"]),
                    len(manifest["periods_released"]),
                    "; ".join(",".join(w) for w in unmeasured[:3]),
                    "; …" if len(unmeasured) > 3 else "")


def prepare(args):
    """The synthesizer the options describe and the state document of its ``init``."""
    from continual_synth.pipelines.families import tabular
    synthesizer = synthesizer_from_args(args)
    return synthesizer, tabular.initial_document(
        synthesizer, seed=args.seed, out_format=args.out_format, period_col=args.period_col,
        **invalid_records_option(args))


def initialised(args, synthesizer) -> dict:
    """What ``init`` prints: the method, ε and the selections (with a warning when the
    model's size limit cannot grow)."""
    config = synthesizer.config
    summary = {"status": "initialised", "state": args.state, "method": args.method,
               "epsilon": args.epsilon, "workloads": len(synthesizer.workloads)}
    if config.method == "proposed":
        summary.update(selections=config.selections, model_growth=config.model_growth,
                       selection_schedule=config.selection_schedule)
        if (config.wide and config.model_growth == "fixed" and config.fit == "ipf"
                and config.horizon is None and args.max_cells is None
                and args.model_growth is None):
            from continual_synth.pipelines.release.logs import LOGGER
            LOGGER.warning("k = %d selections a period at ε = %g, with a model size limit that "
                           "stays fixed: give --horizon to let it grow over the horizon, as "
                           "it does by default where T is known (docs/tabular.md, "
                           "Model size)",
                           config.selections, config.epsilon)
    return summary


TABULAR = Family(
    name="tabular", help="synthetic tabular streams (Kumar et al. 2024, Algorithms 2-3)",
    jobs={"run": TabularRunOptions, "init": TabularInitOptions, "step": StepOptions},
    stream_options=lambda parser: _add_synthesizer_options(parser, with_infer=False),
    kind="tabular", prepare=prepare, initialised=initialised, run=run,
    more_commands={"example": (add_example_command, write_example)},
    evaluations={"tabular": (add_evaluate_arguments, evaluate,
                             "AvgWE, MaxWE, AvgRelWE, MaxRelWE per period (Kumar et al. "
                             "2024 §7.3)")})
