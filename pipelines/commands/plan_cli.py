"""The ``continual-synth plan`` commands: the expected error of a release before it is
run, from public parameters only (no private data is read).

    continual-synth plan window --window K --horizon T --rho R [--population N] [...]
    continual-synth plan cumulative --horizon T --rho R [--counter tree] [--population N] [...]
    continual-synth plan privhp --columns x,y --bounds 0:1,0:1 --epsilon E
                                 (--depth R | --expected-n M) [--population N]
                                 [--horizon T] [...]
    continual-synth plan tabular --domain DOMAIN.json --batch-size B --horizon T --epsilon E
                                 [--repeats 2] [--seed 0] [tabular run's rule options]

Each prints one JSON document.  Window, cumulative and privhp state what the release's
manifest will (:mod:`continual_synth.mechanisms.planning`); tabular simulates the
release's synthesizer on a public synthetic table of the stream's shape
(:mod:`continual_synth.mechanisms.tabular_planning`).  The options shared with a
family's release are that family's own declarations (``add_budget_options``,
``add_structure_options``, ``add_model_options`` …).  Wired into
:mod:`continual_synth.pipelines.commands.cli` through :func:`add_commands` and :func:`plan`.
"""
from __future__ import annotations

import time
from typing import List

from continual_synth.pipelines.commands.options import (NON_NEGATIVE_INT, POSITIVE_INT,
                                                        HelpFormatter, group_advanced)

__all__ = ["POPULATION_HELP", "REPEATS", "add_commands", "plan"]

POPULATION_HELP = ("the number of people n you expect (public): also state each bound as a "
                   "share of n")
#: simulated streams by default (each its own public table and noise)
REPEATS = 2


def add_commands(commands) -> None:
    """Add ``plan window|cumulative|privhp|tabular``."""
    from continual_synth.pipelines.commands.privhp_cli import add_structure_options
    from continual_synth.pipelines.commands.panel_cli import (
        add_budget_options, add_cumulative_parameters, add_window_parameters)
    from continual_synth.pipelines.commands.tabular_cli import add_model_options
    plans = commands.add_parser(
        "plan", help="expected error of a release before it is run (public parameters "
        "only)").add_subparsers(dest="action", required=True)

    window = plans.add_parser("window", formatter_class=HelpFormatter,
                              help="Theorem 3.2's error bound and the padding, as the "
                                   "manifest states them")
    add_budget_options(window)
    add_window_parameters(window)
    window.add_argument("--population", type=POSITIVE_INT, default=None, help=POPULATION_HELP)

    cumulative = plans.add_parser("cumulative", formatter_class=HelpFormatter,
                                  help="Lemma 4.2's error bound and the noisy population's, "
                                       "as the manifest states them")
    add_budget_options(cumulative)
    add_cumulative_parameters(cumulative)
    cumulative.add_argument("--population", type=POSITIVE_INT, default=None,
                            help=POPULATION_HELP)

    privhp = plans.add_parser("privhp", formatter_class=HelpFormatter,
                               help="every level's noise, the memory and Theorem 3's "
                                    "expected-W1 bound, as the manifest states them")
    add_structure_options(privhp, release=False)
    privhp.add_argument("--population", type=POSITIVE_INT, default=None,
                         help="the number of points n you expect (public): state the "
                              "expected-W1 bound at this n (default: --expected-n)")
    privhp.add_argument("--horizon", type=POSITIVE_INT, default=None,
                         help="continual PrivHP over T periods (default: one-shot PrivHP)")

    tabular = plans.add_parser("tabular", formatter_class=HelpFormatter,
                               help="expected AvgWE and MaxWE, simulated on a public "
                                    "synthetic table of the stream's shape")
    tabular.add_argument("--domain", required=True,
                         help="public domain: JSON object mapping each attribute column to "
                              "the list of its values (the only file read)")
    tabular.add_argument("--batch-size", type=POSITIVE_INT, required=True,
                         help="records per period B")
    tabular.add_argument("--horizon", type=POSITIVE_INT, required=True,
                         help="number of periods T")
    add_model_options(tabular)
    tabular.add_argument("--repeats", type=POSITIVE_INT, default=REPEATS,
                         help=f"simulated streams, each its own public table and noise "
                              f"(default {REPEATS}; a stream of T periods takes about as "
                              f"long as the release's synthesizer on T periods)")
    tabular.add_argument("--seed", type=NON_NEGATIVE_INT, default=0,
                         help="first seed: the streams use seeds S, S+1, … (default 0)")
    tabular.add_argument("--last", type=POSITIVE_INT, default=10,
                         help="average the metrics over the last N periods (default 10, "
                              "as evaluate tabular)")
    for parser in (window, cumulative, privhp, tabular):
        group_advanced(parser)


def plan(args, beam_args: List[str]) -> dict:
    """``continual-synth plan ACTION``: the plan as one JSON-able document."""
    from continual_synth.mechanisms.errors import InputError
    from continual_synth.pipelines.release.logs import HARNESS_LEVEL_OPTION
    extra = [arg for arg in beam_args if not arg.startswith(HARNESS_LEVEL_OPTION)]
    if extra:  # Beam's own options: plan runs no pipeline
        raise InputError(f"{extra[0].split('=')[0]} is not an option of 'plan "
                         f"{args.action}': a plan runs no pipeline (see --help)")
    from continual_synth.mechanisms import planning
    if args.action == "window":
        from continual_synth.pipelines.commands.panel_cli import config_from_args
        return planning.window_plan(config_from_args(args, "window"), args.population)
    if args.action == "cumulative":
        from continual_synth.pipelines.commands.panel_cli import config_from_args
        return planning.cumulative_plan(config_from_args(args, "cumulative"), args.population)
    if args.action == "privhp":
        from continual_synth.pipelines.commands.privhp_cli import config_from_args
        _, bounds, config, depth_from = config_from_args(args)
        return planning.bounded_plan(config, depth_from, args.population,
                                     max(hi - lo for lo, hi in zip(bounds.low, bounds.high)))
    return _tabular(args)


def _tabular(args) -> dict:
    """``plan tabular``: the release's synthesizer on ``--repeats`` public streams."""
    from continual_synth.mechanisms import tabular_planning
    from continual_synth.pipelines.release.logs import LOGGER
    from continual_synth.pipelines.families.tabular import read_domain
    from continual_synth.pipelines.commands.tabular_cli import synthesizer_from_args
    synthesizer = synthesizer_from_args(args, domain=read_domain(args.domain))
    seeds = list(range(args.seed, args.seed + args.repeats))
    LOGGER.info("simulating %d stream(s) of %d periods of %d records on a public "
                "synthetic table of the domain's shape (no data read)",
                len(seeds), args.horizon, args.batch_size)
    start = time.perf_counter()

    def progress(seed, result):
        LOGGER.info("seed %d: AvgWE %.4g (sampling floor %.4g), %.0f s so far", seed,
                    result["AvgWE"], result["floor_AvgWE"], time.perf_counter() - start)

    plan = tabular_planning.expected_error(synthesizer, args.batch_size, args.horizon, seeds,
                                           args.last, progress)
    config = synthesizer.config
    return {"synthesizer": "tabular", **plan,
            "expected_avg_we_note": (
                f"mean over {plan['repeats']} simulated stream(s) of AvgWE (Kumar et al. "
                f"2024 §7.3: mean over the {len(synthesizer.workloads)} workloads of the mean "
                f"absolute error of their cells' proportions) of the sampled release against "
                f"the stream so far, averaged over the last {plan['periods_averaged']} "
                f"periods; an expectation under the public table, not a bound"),
            "public_table": tabular_planning.concentration_note(),
            "epsilon": config.epsilon, "method": config.method,
            "selections": config.selections, "counter": config.counter,
            "batch_size": args.batch_size, "horizon": args.horizon,
            "workloads": len(synthesizer.workloads),
            "seconds": round(time.perf_counter() - start, 1)}
