"""The ``continual-synth privhp`` commands (PrivHP, Holland et al. 2025).

    continual-synth privhp run --input POINTS --output DIR --columns x,y --bounds 0:1,0:1
                                --epsilon E --samples N [--prune-k K] [--depth R | --expected-n M]
                                [--memory COUNTERS | --sketch-width W] [--sketch-depth J]
                                [--neighbor add-remove|replace]
                                [--budget-split sqrt|sqrt-sensitivity|uniform | --level-epsilons e0,..,er]
                                [--seed S] [--format parquet|csv|avro] [--input-format F] [--clip]
                                [--shards 8] [--hash-seed 0] [Beam options]
    continual-synth privhp run  ... --horizon T [--period-col period] [--counter auto]
                                [--level-stride 2]
    continual-synth privhp init --state STATE --horizon T [run's options, no --input/--output]
                                [--exists-ok]
    continual-synth privhp step --state STATE --input PERIOD_FILE --output DIR [--period P]
    continual-synth privhp stream --watch DIR --state STATE --output DIR --horizon T
                                [init's options] [--until-period P] [--poll-interval S]
    continual-synth evaluate privhp --truth POINTS --synthetic DIR --columns x,y [--report DIR]
                                     [--period P]

Declared as one :class:`~continual_synth.pipelines.commands.family.Family` record,
:data:`PRIVHP`, from which :mod:`continual_synth.pipelines.commands.cli` builds and runs
the commands (``init``, ``step`` and ``stream`` are continual PrivHP's; ``run`` is one-shot
PrivHP, or continual PrivHP with ``--horizon``).
"""
from __future__ import annotations

from typing import List

from continual_synth.mechanisms.errors import (InputError, ParameterError, format_bytes,
                                               privacy_budget)
from continual_synth.pipelines.commands.family import Family, invalid_records_option
from continual_synth.pipelines.commands.options import (FORMATS, NON_NEGATIVE_INT,
                                                        POSITIVE_INT, POSITIVE_REAL,
                                                        InitOptions, InputOptions,
                                                        InvalidRecordsOptions, JobOptions,
                                                        OutputOptions, REPORT_HELP,
                                                        StepOptions, add_job_options)

__all__ = ["MAX_SHARD_VALUES", "add_structure_options", "PrivHPReleaseOptions",
           "PrivHPRunOptions", "PrivHPInitOptions", "add_evaluate_arguments",
           "config_from_args", "prepare", "initialised", "run", "evaluate", "PRIVHP"]

MAX_SHARD_VALUES = 2 ** 25  # float64 coordinates sampled in one shard (256 MiB)


def _columns(text: str) -> List[str]:
    return [c.strip() for c in str(text).split(",") if c.strip()]


def add_structure_options(parser, release: bool = True) -> None:
    """PrivHP's parameters: the columns and bounds, ε, the hierarchy, the sketches and the
    budget split, and with ``release`` what a release draws and writes (the synthetic
    points, the sampler's seed, the format, clipping, shards; ``plan privhp`` has none
    of these)."""
    parser.add_argument("--columns", required=True,
                        help="comma-separated numeric columns, e.g. x,y")
    parser.add_argument("--bounds", required=True,
                        help="public bounding box, one low:high per column (e.g. "
                             "0:1,-5:5); a single pair applies to every column")
    parser.add_argument("--epsilon", type=POSITIVE_REAL, required=True,
                        help="total ε (pure DP)")
    if release:
        parser.add_argument("--samples", type=POSITIVE_INT, required=True,
                            help="synthetic points to draw")
    parser.add_argument("--prune-k", type=POSITIVE_INT, default=64,
                        help="hot nodes kept per level; L* = floor(log2 k) levels are "
                             "complete")
    parser.add_argument("--depth", type=POSITIVE_INT, default=None,
                        help="hierarchy depth r (required unless --expected-n is given)")
    parser.add_argument("--expected-n", type=POSITIVE_REAL, default=None,
                        help="a PUBLIC guess of the number of points; sets r = "
                             "round(log2(ε·n)) when --depth is not given (the true n is "
                             "private and never used)")
    parser.add_argument("--sketch-width", type=POSITIVE_INT, default=None,
                        help="count-min columns w (default 1024; not with --memory)")
    parser.add_argument("--memory", type=POSITIVE_INT, default=None, metavar="COUNTERS",
                        help="memory budget in counters: sizes the sketch width and the "
                             "exact levels (reported in the manifest); not with "
                             "--sketch-width")
    parser.add_argument("--sketch-depth", type=POSITIVE_INT, default=None,
                        help="count-min rows j (default 3; 2 for continual PrivHP: "
                             "--horizon, init)")
    parser.add_argument("--neighbor", choices=["add-remove", "replace"],
                        default="add-remove",
                        help="neighbouring relation: add/remove one point (the paper's) "
                             "or replace one point (sensitivities doubled)")
    parser.add_argument("--budget-split", choices=["sqrt", "sqrt-sensitivity", "uniform"],
                        default=None,
                        help="per-level split of ε: ε_ℓ ∝ √(N_ℓ·diam_ℓ) (sqrt), "
                             "∝ √(N_ℓ·Δ_ℓ·diam_ℓ) (sqrt-sensitivity) or equal "
                             "(uniform); default sqrt, uniform for continual PrivHP "
                             "(--horizon, init)")
    parser.add_argument("--level-epsilons", default=None,
                        help="explicit ε_0,…,ε_r (r + 1 values summing to --epsilon); "
                             "overrides --budget-split")
    if release:
        parser.add_argument("--seed", type=NON_NEGATIVE_INT, default=None,
                            help="reproducible simulation sampler (NOT for publication)")
        parser.add_argument("--format", dest="out_format", default="parquet", choices=FORMATS,
                            help="output format")
        parser.add_argument("--clip", action="store_true",
                            help="move points outside --bounds onto them instead of failing "
                                 "(the manifest says clipping was on, not how many: that "
                                 "is not private)")
        parser.add_argument("--shards", type=POSITIVE_INT, default=8,
                            help="shards of synthetic points")
    parser.add_argument("--hash-seed", type=NON_NEGATIVE_INT, default=0,
                        help="public seed of the sketches' hash functions")
    parser.add_argument("--counter", default="auto",
                        choices=["auto", "simple", "block", "tree", "honaker", "kary",
                                 "anchored"],
                        help="continual PrivHP (init, stream, run --horizon): the "
                             "continual counter of every cell; auto = the k-ary tree of least "
                             "variance for T (Simple II for small T)")
    parser.add_argument("--level-stride", type=POSITIVE_INT, default=None, metavar="S",
                        help="continual PrivHP (init, stream, run --horizon): counters on "
                             "every S-th level of the hierarchy (r, r-S, ...; the levels "
                             "between are sums of their children), each with more of ε; "
                             "default 2 (1 = every level, as in states saved before the option)")


class PrivHPReleaseOptions(JobOptions):
    """The options of a PrivHP release (``run`` and ``init``)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_structure_options(parser)


class PrivHPRunOptions(InvalidRecordsOptions, OutputOptions, InputOptions,
                        PrivHPReleaseOptions):
    description = "bounded-memory synthesizer (PrivHP): one pass over the points, then N " \
                  "synthetic points (with --horizon: continual PrivHP over a period column)"

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--horizon", type=POSITIVE_INT, default=None,
                            help="continual PrivHP over periods 1..T of --period-col: a "
                                 "release of all points so far after every period "
                                 "(event-level ε)")
        parser.add_argument("--period-col", default="period",
                            help="the period column (with --horizon)")
        from continual_synth.transforms.read import DEFAULT_BATCH_ROWS
        parser.add_argument("--batch-rows", type=POSITIVE_INT, default=DEFAULT_BATCH_ROWS,
                            help="rows per Arrow batch when reading")


def _add_state_options(parser) -> None:
    """What a continual PrivHP state records beyond the release options (``init`` and
    ``stream``)."""
    parser.add_argument("--horizon", type=POSITIVE_INT, required=True,
                        help="number of periods T")
    parser.add_argument("--period-col", default="period",
                        help="the period column: a step's file that has it must hold the "
                             "step's period in it; stream reads a landed file's period "
                             "from it when the file's name holds none")


class PrivHPInitOptions(InvalidRecordsOptions, InitOptions, PrivHPReleaseOptions):
    description = "continual PrivHP: create the state of an incremental release"

    @classmethod
    def _add_argparse_args(cls, parser):
        _add_state_options(parser)


def _add_stream_options(parser) -> None:
    """``privhp stream``: continual PrivHP's options (those of ``init``)."""
    add_job_options(parser, PrivHPReleaseOptions)
    _add_state_options(parser)


def add_evaluate_arguments(ev) -> None:
    """``evaluate privhp``: the truth, the release, the columns and the OT's sizes."""
    ev.add_argument("--truth", required=True, help="the real points (file or directory)")
    ev.add_argument("--synthetic", required=True, help="a privhp run's release directory")
    ev.add_argument("--columns", required=True, help="comma-separated columns, e.g. x,y")
    ev.add_argument("--report", default=None, help=REPORT_HELP)
    ev.add_argument("--input-format", default=None, choices=FORMATS,
                    help="the truth's format (default: from its file names)")
    ev.add_argument("--ot-points", type=POSITIVE_INT, default=4000,
                    help="points per side for exact optimal transport in d > 1")
    ev.add_argument("--projections", type=POSITIVE_INT, default=128,
                    help="random directions for the sliced W1 in d > 1")
    ev.add_argument("--seed", type=NON_NEGATIVE_INT, default=0,
                    help="seed of the evaluation's subsampling")
    ev.add_argument("--period", type=POSITIVE_INT, default=None,
                    help="a continual release (synthetic-tNNNN-* files): the period to "
                         "evaluate, against the truth's rows of periods 1..P (default: the "
                         "last period released)")
    ev.add_argument("--period-col", default="period",
                    help="the truth's period column, for --period (default period)")


def config_from_args(args):
    from continual_synth.mechanisms import privhp
    from continual_synth.mechanisms.hierarchy import Bounds
    from continual_synth.pipelines.families.privhp import check_columns
    columns = _columns(args.columns)
    bounds = Bounds.parse(args.bounds, max(len(columns), 1))
    check_columns(columns, bounds)
    privacy_budget("epsilon", args.epsilon)  # before it sets the depth
    depth_from = None
    depth = args.depth
    if depth is not None and args.expected_n is not None:
        raise InputError("give --depth R or --expected-n M (which sets the depth), not both")
    if args.level_epsilons and args.budget_split is not None:
        raise InputError("give --level-epsilons (every level's ε) or --budget-split (a rule "
                         "for them), not both")
    if depth is None:
        if args.expected_n is None:
            raise InputError("give --depth R, or --expected-n M (a public guess of the number "
                             "of points) to use the paper's r = log2(ε·M)")
        depth = privhp.default_depth(args.epsilon, args.expected_n)
        depth_from = {"expected_n": args.expected_n, "rule": "round(log2(epsilon * expected_n))"}
    level_eps = None
    if args.level_epsilons:
        try:
            level_eps = tuple(float(v) for v in args.level_epsilons.split(",") if v.strip())
        except ValueError:
            raise InputError(f"--level-epsilons: cannot read {args.level_epsilons!r}") from None
    per_shard = -(-getattr(args, "samples", 0) // getattr(args, "shards", 1))  # plan: none
    if per_shard * len(columns) > MAX_SHARD_VALUES:
        raise ParameterError("samples", (
            f"{args.samples} over --shards {args.shards} puts {per_shard:.3g} points "
            f"({format_bytes(8 * per_shard * len(columns))}) in one shard; at most "
            f"{MAX_SHARD_VALUES // len(columns)} fit: raise --shards"))
    if args.memory is not None and args.sketch_width is not None:
        raise InputError("give --memory COUNTERS (the sketch width follows from it) or "
                         "--sketch-width W, not both")
    structure = dict(
        epsilon=args.epsilon, dims=len(columns), prune_k=args.prune_k, depth=depth,
        sketch_width=1024 if args.sketch_width is None else args.sketch_width,
        sketch_depth=args.sketch_depth, neighbor=args.neighbor,
        budget_split=args.budget_split, level_epsilons=level_eps, hash_seed=args.hash_seed)
    horizon = getattr(args, "horizon", None)
    if horizon is None:
        if args.counter != "auto":
            raise InputError("--counter applies to continual PrivHP: give --horizon T")
        if args.level_stride is not None:
            raise InputError("--level-stride applies to continual PrivHP: give --horizon T")
        if getattr(args, "period_col", "period") != "period":
            raise InputError("--period-col applies to continual PrivHP: give --horizon T")
        structure["budget_split"] = args.budget_split or "sqrt"
        structure["sketch_depth"] = args.sketch_depth or 3
        return columns, bounds, privhp.PrivHPConfig(**structure, memory=args.memory), \
            depth_from
    from continual_synth.mechanisms.continual_privhp import ContinualPrivHPConfig
    config = ContinualPrivHPConfig.create(horizon=horizon, counter=args.counter,
                                          memory=args.memory, stride=args.level_stride,
                                          **structure)
    return columns, bounds, config, depth_from


def prepare(args):
    """Continual PrivHP's configuration the options describe and the state document of
    its ``init`` (``init`` and ``stream`` always have a horizon)."""
    from continual_synth.pipelines.families import privhp_continual
    columns, bounds, config, depth_from = config_from_args(args)
    return config, privhp_continual.initial_document(
        config, columns, bounds, args.samples, seed=args.seed, out_format=args.out_format,
        clip=args.clip, num_shards=args.shards, depth_from=depth_from,
        period_col=args.period_col, **invalid_records_option(args))


def initialised(args, config) -> dict:
    """What ``init`` prints: T, ε, the relation, the counter and the memory."""
    return {"status": "initialised", "state": args.state, "horizon": config.horizon,
            "epsilon": config.epsilon, "neighbor": config.structure.neighbor,
            "counter": config.counter, "memory_counters": config.memory_words}


def run(args, beam_args: List[str]) -> dict:
    """``privhp run``: one-shot PrivHP, or with ``--horizon`` continual PrivHP over the
    period column, in one job."""
    columns, bounds, config, depth_from = config_from_args(args)
    common = dict(seed=args.seed, in_format=args.input_format, out_format=args.out_format,
                  clip=args.clip, num_shards=args.shards, batch_rows=args.batch_rows,
                  beam_args=beam_args, depth_from=depth_from,
                  invalid_records=args.invalid_records)
    if args.horizon is not None:
        from continual_synth.pipelines.families import privhp_continual
        manifest = privhp_continual.run(config, args.input, args.output, columns, bounds,
                                         args.samples, period_col=args.period_col, **common)
        return {"status": "released", "output": args.output, "periods": config.horizon,
                **{k: manifest[k] for k in ("epsilon", "neighbor", "memory_counters",
                                            "sampler", "for_publication")}}
    from continual_synth.pipelines.families.privhp import run_privhp
    manifest = run_privhp(args.input, args.output, columns, bounds, config, args.samples,
                           **common)
    keys = ("epsilon", "neighbor", "budget_split", "memory_counters", "samples",
            "sampler", "for_publication", "clip")
    return {"status": "released", "output": args.output,
            **{k: manifest[k] for k in keys if k in manifest},
            "depth": config.depth, "prune_k": config.prune_k}


def evaluate(args) -> dict:
    """``evaluate privhp``: the summary's figures."""
    from continual_synth.pipelines.evaluation.evaluate_privhp import evaluate_privhp
    summary = evaluate_privhp(args.truth, args.synthetic, _columns(args.columns),
                               args.report, in_format=args.input_format,
                               ot_points=args.ot_points, projections=args.projections,
                               seed=args.seed, period=args.period,
                               period_col=args.period_col)
    return {k: v for k, v in summary.items() if not isinstance(v, (list, dict))}


PRIVHP = Family(
    name="privhp", help="bounded-memory one-pass synthetic points (PrivHP, Holland et al. "
                         "2025)",
    jobs={"run": PrivHPRunOptions, "init": PrivHPInitOptions, "step": StepOptions},
    stream_options=_add_stream_options, kind="continual-privhp", prepare=prepare,
    initialised=initialised, run=run,
    evaluations={"privhp": (add_evaluate_arguments, evaluate,
                             "1-Wasserstein distance between synthetic and real points, "
                             "with plots")})
