"""Reproduce the worst-case-error experiment of Bun, Gaboardi, Neunhoeffer and Zhang for
Algorithm 2 (synthetic data preserving cumulative time queries) on simulated panels:
arXiv v1 §5, Figure 7 ("empirical distribution of the worst case error ... compared to the
error bound of Corollary 4.7" = Corollary B.1 of the 2024 paper), plus the Figure 8 view
(2024 App. C.3: share of people with at least b ones by period, synthetic vs truth).

Parameters (the paper's): n = 25 000 people, T = 12 periods, ρ = 0.005-zCDP under the
add-remove relation with the population declared public (``public_population=True``: n
is not noised, all of ρ goes to the T counters, as in the paper), β = 0.05, and 1 000
runs of the *seeded* (simulation, not-for-publication) sampler, ``SeededSampler(seed)``
with seeds 0..999 (the same seeds for every counter and panel, so the counters' noise
draws are shared across panels; the panels differ only through monotonisation).

Variants ``counter/split`` (``--variants``): ``tree/paper`` (the paper's: tree counters,
App. B's split ρ_b ∝ max(⌈log2(T−b+1)⌉,1)³), and with the equal-variance split (ρ_b ∝
counter b's worst-case variance, the default of ``CumulativeConfig``): ``tree``,
``honaker``, ``kary``, ``sqrt-factorisation`` and ``blt`` (the best zCDP counter in
bench/results/counters_error.md, at O(d) memory).  ``--neighbor replace`` re-runs the
setting under the replace relation (Corollary B.1 is then not stated, so not shown).

Panels: the all-ones panel (App. C.1's extreme case, ``sipp_like.all_ones_panel``) and a
realistic simulated SIPP-like poverty panel (``sipp_like.generate_panel(25_000, 12)``).

Each run folds Algorithm 2's state machine ``mechanisms.cumulative.step`` over the true
threshold counts z_b^t (``threshold_counts``) and keeps Ŝ_b^t (``state.released``) after
every period t.  Errors, vectorised over runs:

* worst-case error of a run: max_{b,t} |Ŝ_b^t − S_b^t| (counts; /n for proportions —
  with n public the synthetic population is exactly n, so Ŝ_b^t/n* − S_b^t/n is the
  count error divided by n);
* per period t: max_b |Ŝ_b^t − S_b^t|.

The distribution over runs (median, 2.5/97.5 percentiles) is compared with

* Corollary B.1 (``paper_corollary_b1_bound`` of the tree/paper/add-remove config,
  β* = β): the paper's bound, derived for tree counters with ⌈log2 h⌉ noisy levels; shown
  for every variant as the reference (add-remove only);
* the variance bound (``config.variance_bound``, the manifest's headline ``error_bound``):
  the counters' exact variances, sub-Gaussian tails, union over the T(T+1)/2 pairs (b, t);

with the fraction of runs whose worst-case error exceeds each (the bounds promise ≤ β)
and a one-sided binomial p-value for "the exceedance probability is ≤ β".

Figure 8 view (realistic panel, b = 1..4): the share Ŝ_b^t / n* of synthetic people with
at least b ones by period t, mean and 2.5–97.5 % band over runs, against the truth
S_b^t / n.  Shares are read from the released counts; the first ``--record-runs`` runs of
each counter are also materialised into synthetic people
(``emission.assign_group_values``, as Algorithm 2 draws them) to check that the people
reproduce the released counts exactly.

Run (from the repository root; about 6 minutes on 2 cores for the six variants)::

    python bench/fig7_cumulative_simulation.py
    python bench/fig7_cumulative_simulation.py --runs 200 --panels realistic --output-dir /tmp/f7

Writes (with ``_replace`` before the extension under ``--neighbor replace``)
``<output-dir>/fig7_cumulative_error.json``, ``fig7_cumulative_error.png`` (worst
error per period: median and 2.5–97.5 % band per counter, dashed Corollary B.1 line,
dotted variance bounds), ``fig7_cumulative_error_hist.png`` (the paper's Figure 7 form:
histogram of the runs' worst-case error with the bound as a vertical line) and
``fig8_cumulative_shares.png``.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Dict, List, Sequence, Tuple

import numpy as np
from scipy import stats

from continual_synth.mechanisms.counters import counter_kinds
from continual_synth.mechanisms.cumulative import (BUDGET_SPLITS, CumulativeConfig,
                                                   CumulativeState, step, threshold_counts)
from continual_synth.mechanisms.emission import assign_group_values
from continual_synth.mechanisms.samplers import SeededSampler
from continual_synth.pipelines.evaluation.plots import (_draw_series, _figure, _finish_axes,
                                                        save_figure)
from continual_synth.pipelines.examples.sipp_like import all_ones_panel, generate_panel

PERCENTILES = (2.5, 50.0, 97.5)
PANELS = ("all-ones", "realistic")
COUNTERS = ("tree/paper", "tree/equal-variance", "honaker/equal-variance",
            "kary/equal-variance", "sqrt-factorisation/equal-variance", "blt/equal-variance")
SHARE_THRESHOLDS = (1, 2, 3, 4)
SHARE_COUNTERS = ("tree/paper", "blt/equal-variance")   # Figure 8 view (all in JSON)
PANEL_TITLES = {"all-ones": "all-ones panel (App. C.1)",
                "realistic": "SIPP-like panel (generate_panel)"}


# ---------------------------------------------------------------------------- truth

def panel_matrix(name: str, num_people: int, horizon: int) -> np.ndarray:
    """The (people × periods) 0/1 matrix of a demo panel (long table sorted by id, period)."""
    table = all_ones_panel(num_people, horizon) if name == "all-ones" \
        else generate_panel(num_people, horizon)
    ids = table.column("id").to_numpy()
    periods = table.column("period").to_numpy()
    if not (np.array_equal(periods, np.tile(np.arange(1, horizon + 1), num_people))
            and np.array_equal(ids, np.repeat(ids[::horizon], horizon))):
        raise RuntimeError(f"panel {name!r} is not sorted by id then period")
    return table.column("value").to_numpy().reshape(num_people, horizon).astype(np.int64)


def truth(matrix: np.ndarray) -> Tuple[List[np.ndarray], np.ndarray]:
    """z_b^t (list over t of length-t arrays, from the mechanism's ``threshold_counts``)
    and S (T × (T+1)): S[t−1, b] = #{i : x_i^1 + … + x_i^t ≥ b}, b = 0..T."""
    people, horizon = matrix.shape
    cumulative = matrix.cumsum(axis=1)
    at_least = np.stack([np.bincount(cumulative[:, t], minlength=horizon + 1)[::-1]
                         .cumsum()[::-1] for t in range(horizon)])
    weights = np.concatenate([np.zeros((people, 1), np.int64), cumulative[:, :-1]], axis=1)
    z = [threshold_counts(weights[:, t - 1], matrix[:, t - 1], t)
         for t in range(1, horizon + 1)]
    # consistency: S_b^t = z_b^1 + … + z_b^t for b ≥ 1
    for t in range(1, horizon + 1):
        summed = np.zeros(horizon, np.int64)
        for tau in range(1, t + 1):
            summed[:tau] += z[tau - 1]
        if not np.array_equal(summed, at_least[t - 1, 1:]):
            raise RuntimeError(f"threshold counts do not add up to S at t = {t}")
    return z, at_least


# ---------------------------------------------------------------------------- runs

def run_chunk(task: Tuple[str, str, List[int], CumulativeConfig, List[np.ndarray], int,
                          int]) -> Dict:
    """Runs of Algorithm 2 for ``seeds``: released counts Ŝ^t (runs × T × (T+1)),
    monotonisation events, and the materialisation check for seeds < record_runs."""
    panel_name, counter, seeds, config, z, num_people, record_runs = task
    horizon = config.horizon
    released = np.empty((len(seeds), horizon, horizon + 1), dtype=np.int64)
    monotonised = np.empty(len(seeds), dtype=np.int64)
    checked = mismatches = 0
    for r, seed in enumerate(seeds):
        sampler = SeededSampler(seed)
        state = CumulativeState.initial(config)
        materialise = seed < record_runs
        rng = np.random.default_rng([seed, 7])
        weights = None
        for t in range(1, horizon + 1):
            state, release = step(state, z[t - 1], sampler, population=num_people)
            released[r, t - 1] = state.released
            if materialise:
                if weights is None:
                    weights = np.zeros(release.num_synthetic, dtype=np.int64)
                weights = weights + assign_group_values(weights, release.extension, rng)
                counts = np.bincount(weights, minlength=horizon + 1)[::-1].cumsum()[::-1]
                mismatches += int(not np.array_equal(counts[: t + 1],
                                                     state.released[: t + 1]))
        checked += int(materialise)
        monotonised[r] = state.monotonised
    return {"panel": panel_name, "counter": counter, "seeds": list(seeds),
            "released": released, "monotonised": monotonised,
            "records_checked": checked, "record_mismatches": mismatches}


def band(values: np.ndarray) -> Dict[str, List[float]]:
    """Percentiles over runs (axis 0)."""
    lo, median, hi = np.percentile(values, PERCENTILES, axis=0)
    return {"median": np.atleast_1d(median).tolist(), "p2.5": np.atleast_1d(lo).tolist(),
            "p97.5": np.atleast_1d(hi).tolist()}


def cor_cells(result) -> str:
    """'>CorB.1' and 'p' columns (blank where the corollary is not stated)."""
    if result is None:
        return f"{'n/a':>7} {'':>6}"
    return (f"{100 * result['fraction_above']:6.1f}%"
            f" {result['p_value_if_rate_is_beta']:6.3f}")


def exceedance(run_max: np.ndarray, bound: float, beta: float) -> Dict[str, float]:
    """Fraction of runs above ``bound`` and the one-sided binomial p-value of seeing at
    least that many if the true exceedance probability were β."""
    above = int((run_max > bound).sum())
    return {"bound": float(bound), "runs_above": above,
            "fraction_above": above / run_max.size,
            "p_value_if_rate_is_beta": float(stats.binom.sf(above - 1, run_max.size, beta))}


# ---------------------------------------------------------------------------- figures

def draw_error_figure(path: str, periods: np.ndarray, results: Dict, configs: Dict,
                      n: int, runs: int, corollary) -> None:
    """Worst error per period (/n): median + band per counter, one axes per panel."""
    panels = list(results)
    fig = _figure(6.2 * len(panels), 4.4)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    top = 0.0
    for ax, panel_name in zip(axes, panels):
        for counter, res in results[panel_name].items():
            per = res["per_period_proportion"]
            _draw_series(ax, periods, counter, (per["median"], per["p2.5"], per["p97.5"]))
            color = ax.get_lines()[-3].get_color()
            ax.axhline(configs[counter].variance_bound / n, color=color, linestyle=":",
                       linewidth=1.4, label=f"{counter}: variance bound")
            top = max(top, configs[counter].variance_bound / n)
        if corollary is not None:
            ax.axhline(corollary / n, color="black", linestyle="--",
                       linewidth=1.2, label="paper's Corollary B.1 bound α*")
        _finish_axes(ax, periods, xlabel="period t", ylabel="max_b |Ŝ_b^t − S_b^t| / n")
        ax.set_title(PANEL_TITLES[panel_name], fontsize="medium")
    for ax in axes:
        ax.set_ylim(0, top * 1.45)
    axes[0].legend(frameon=False, fontsize="x-small", loc="upper left", ncol=2)
    any_config = next(iter(configs.values()))
    fig.suptitle(f"Algorithm 2, worst error over b per period: median and 2.5–97.5 % of "
                 f"{runs} runs (n = {n}, ρ = {any_config.rho}, {any_config.neighbor})",
                 fontsize="medium")
    save_figure(fig, path)


def draw_histogram_figure(path: str, results: Dict, configs: Dict, n: int,
                          runs: int, corollary) -> None:
    """The paper's Figure 7 form: histogram of max_{b,t} error / n with the bounds."""
    panels = list(results)
    fig = _figure(6.2 * len(panels), 4.0)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    top = max(configs[c].variance_bound for c in configs) / n
    bins = np.linspace(0, top * 1.05, 70)
    for ax, panel_name in zip(axes, panels):
        for counter, res in results[panel_name].items():
            values = np.asarray(res["run_max_counts"]) / n
            _, _, patches = ax.hist(values, bins=bins, alpha=0.45, label=counter)
            color = patches[0].get_facecolor()
            ax.axvline(configs[counter].variance_bound / n, color=color[:3], linestyle=":",
                       linewidth=1.6, label=f"{counter}: variance bound")
        if corollary is not None:
            ax.axvline(corollary / n, color="black", linestyle="--", linewidth=1.2,
                       label="paper's Corollary B.1 bound α*")
        ax.set_xlabel("worst-case error max_{b,t} |Ŝ_b^t − S_b^t| / n")
        ax.set_ylabel("runs")
        ax.spines[["top", "right"]].set_visible(False)
        ax.set_title(PANEL_TITLES[panel_name], fontsize="medium")
    axes[-1].legend(frameon=False, fontsize="x-small")
    any_config = next(iter(configs.values()))
    fig.suptitle(f"Distribution of the worst-case error over {runs} runs (arXiv v1 Fig. 7"
                 f" form; n = {n}, ρ = {any_config.rho}, {any_config.neighbor})",
                 fontsize="medium")
    save_figure(fig, path)


def draw_share_figure(path: str, periods: np.ndarray, shares: Dict, shown: List[str],
                      n: int, rho: float, runs: int) -> None:
    """Figure 8 view: share with ≥ b ones by period, truth (crosses) vs synthetic mean
    with the 2.5–97.5 % band, one axes per b (periods t < b are empty: both are 0)."""
    thresholds = list(shares[shown[0]])
    columns = 2
    rows = -(-len(thresholds) // columns)
    fig = _figure(5.2 * columns, 3.5 * rows)
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax, b in zip(axes, thresholds):
        valid = periods >= b

        def masked(values):
            return [v if ok else None for v, ok in zip(values, valid)]

        for c in shown:
            s = shares[c][b]
            _draw_series(ax, periods, c,
                         (masked(s["mean"]), masked(s["p2.5"]), masked(s["p97.5"])))
        ax.plot(periods[valid], np.asarray(shares[shown[0]][b]["truth"])[valid], "x",
                color="black", markersize=7, markeredgewidth=1.6, label="truth", zorder=3)
        _finish_axes(ax, periods, xlabel="period t", ylabel="share of people")
        ax.set_title(f"at least b = {b} ones by period t", fontsize="medium")
    axes[0].legend(frameon=False, fontsize="x-small", loc="upper left")
    for ax in axes[len(thresholds):]:
        ax.set_visible(False)
    fig.suptitle(f"Share with at least b ones, synthetic mean and 2.5–97.5 % of runs vs truth,"
                 f" SIPP-like simulated panel (n = {n}, ρ = {rho},"
                 f" {runs} runs)", fontsize="medium")
    save_figure(fig, path)


# ---------------------------------------------------------------------------- main

def main(argv: Sequence[str] = None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000, help="runs, seeds 0..runs−1 (1000)")
    parser.add_argument("--people", type=int, default=25_000, help="n (25 000)")
    parser.add_argument("--horizon", type=int, default=12, help="T (12)")
    parser.add_argument("--rho", type=float, default=0.005, help="total zCDP ρ (0.005)")
    parser.add_argument("--beta", type=float, default=0.05, help="β (0.05)")
    parser.add_argument("--counters", default=",".join(COUNTERS),
                        help=f"comma-separated counter/split variants ({','.join(COUNTERS)}); "
                             "a bare counter kind takes the default split")
    parser.add_argument("--neighbor", default="add-remove", choices=["add-remove", "replace"],
                        help="neighbouring relation (add-remove, the paper's)")
    parser.add_argument("--panels", default=",".join(PANELS),
                        help=f"comma-separated panels from {PANELS} (both)")
    parser.add_argument("--record-runs", type=int, default=20,
                        help="materialise synthetic people for the first N runs of each "
                             "counter and panel to check they reproduce the released counts "
                             "(20; 0 = skip)")
    parser.add_argument("--chunk", type=int, default=100, help="seeds per task (100)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes (2)")
    parser.add_argument("--output-dir", default=os.path.join("bench", "results"))
    args = parser.parse_args(argv)
    counters = [c.strip() for c in args.counters.split(",") if c.strip()]
    panels = [p.strip() for p in args.panels.split(",") if p.strip()]
    for c in counters:
        kind, _, split = c.partition("/")
        if kind not in counter_kinds() or split not in ("",) + BUDGET_SPLITS:
            parser.error(f"unknown variant {c!r}; counters {counter_kinds()}, splits "
                         f"{BUDGET_SPLITS}")
    for p in panels:
        if p not in PANELS:
            parser.error(f"unknown panel {p!r}; choose from {PANELS}")
    if args.runs < 1 or args.people < 1 or args.horizon < 1 or args.chunk < 1:
        parser.error("--runs, --people, --horizon and --chunk must be positive")

    started = time.perf_counter()
    n, horizon, beta = args.people, args.horizon, args.beta
    configs = {c: CumulativeConfig(horizon=horizon, rho=args.rho, neighbor=args.neighbor,
                                   counter=c.partition("/")[0], beta=beta,
                                   public_population=True,
                                   budget_split=c.partition("/")[2] or None)
               for c in counters}
    corollary = CumulativeConfig(horizon=horizon, rho=args.rho, neighbor=args.neighbor,
                                 counter="tree", beta=beta, public_population=True,
                                 budget_split="paper").paper_corollary_b1_bound
    truths = {p: truth(panel_matrix(p, n, horizon)) for p in panels}

    seeds = list(range(args.runs))
    chunks = [seeds[i: i + args.chunk] for i in range(0, args.runs, args.chunk)]
    record_runs = min(max(args.record_runs, 0), args.runs)
    tasks = [(p, c, chunk, configs[c], truths[p][0], n, record_runs)
             for chunk in chunks for p in panels for c in counters]
    workers = max(1, min(args.workers, len(tasks)))
    if workers == 1:
        parts = [run_chunk(task) for task in tasks]
    else:
        with ProcessPoolExecutor(workers) as pool:
            parts = list(pool.map(run_chunk, tasks))
    simulate_seconds = time.perf_counter() - started

    periods = np.arange(1, horizon + 1)
    results: Dict[str, Dict[str, Dict]] = {p: {} for p in panels}
    shares: Dict[str, Dict] = {}
    for p in panels:
        s_true = truths[p][1]                                         # T × (T+1)
        for c in counters:
            mine = [part for part in parts if part["panel"] == p and part["counter"] == c]
            released = np.concatenate([part["released"] for part in mine])   # runs × T × (T+1)
            monotonised = np.concatenate([part["monotonised"] for part in mine])
            errors = np.abs(released - s_true[None])                  # runs × T × (T+1)
            per_period = errors.max(axis=2)                           # runs × T
            run_max = per_period.max(axis=1)                          # runs
            per_threshold = errors.max(axis=1)[:, 1:]                 # runs × T (b = 1..T)
            config = configs[c]
            synthetic_n = released[:, 0, 0].astype(float)            # n* (= n here)
            share = released / synthetic_n[:, None, None]             # Ŝ_b^t / n*
            prop_error = np.abs(share - s_true[None] / n).max(axis=(1, 2))
            std_exact = [float(np.sqrt(config.counter_for(b).variances(
                np.arange(1, horizon - b + 2)).max())) for b in range(1, horizon + 1)]
            results[p][c] = {
                "run_max_counts": run_max.tolist(),
                "worst_error_counts": {k: v[0] for k, v in band(run_max.astype(float)).items()},
                "worst_error_proportion": {k: v[0] / n for k, v in
                                           band(run_max.astype(float)).items()},
                "worst_error_proportion_from_shares": {k: v[0] for k, v in
                                                       band(prop_error[:, None]).items()},
                "per_period_counts": band(per_period.astype(float)),
                "per_period_proportion": band(per_period / n),
                "per_threshold_median_counts": np.median(per_threshold, axis=0).tolist(),
                "per_threshold_max_std_exact": std_exact,
                "counter_rhos": config.counter_rhos.tolist(),
                "corollary_b1": (None if corollary is None
                                 else exceedance(run_max, corollary, beta)),
                "variance_bound": exceedance(run_max, config.variance_bound, beta),
                "monotonisation_events": {"median": float(np.median(monotonised)),
                                          "max": int(monotonised.max())},
                "num_synthetic": {"min": int(synthetic_n.min()), "max": int(synthetic_n.max())},
                "records_checked": sum(part["records_checked"] for part in mine),
                "record_mismatches": sum(part["record_mismatches"] for part in mine),
            }
            if p == "realistic":
                per_b = {}
                for b in SHARE_THRESHOLDS:
                    if b > horizon:
                        continue
                    values = share[:, :, b]                           # runs × T
                    lo, hi = np.percentile(values, (2.5, 97.5), axis=0)
                    mean = values.mean(axis=0)
                    sd = values.std(axis=0, ddof=1)
                    truth_b = s_true[:, b] / n
                    valid = periods >= b
                    z_bias = np.where(valid & (sd > 0),
                                      (mean - truth_b) / np.where(sd > 0, sd, 1) *
                                      np.sqrt(args.runs), 0.0)
                    per_b[b] = {"truth": truth_b.tolist(), "mean": mean.tolist(),
                                "p2.5": lo.tolist(), "p97.5": hi.tolist(),
                                "max_abs_bias": float(np.abs(mean - truth_b)[valid].max()),
                                "max_abs_bias_z": float(np.abs(z_bias).max())}
                shares[c] = per_b
    seconds = time.perf_counter() - started

    # ---- report --------------------------------------------------------------------
    print(f"Bun et al. Algorithm 2 (cumulative), worst-case error as in arXiv v1 Fig. 7 /"
          f" 2024 Cor. B.1: n = {n}, T = {horizon}, ρ = {args.rho} ({args.neighbor}, n public),"
          f" β = {beta}, {args.runs} runs (seeds 0..{args.runs - 1}, seeded sampler)")
    if corollary is not None:
        print(f"paper's Corollary B.1 bound α* = {corollary:.1f} people"
              f" = {corollary / n:.5f} of n (same for every variant)")
    else:
        print(f"Corollary B.1: not stated by the paper under {args.neighbor}; not shown")
    for c in counters:
        print(f"error_bound (variance bound) {c:>34}: {configs[c].variance_bound:8.1f} people"
              f" = {configs[c].variance_bound / n:.5f} of n")
    header = (f"{'panel':>9} {'variant':>34} | {'median':>7} {'p2.5':>7} {'p97.5':>7} {'max':>6}"
              f" | {'median/n':>8} {'p97.5/n':>8} | {'>CorB.1':>7} {'p':>6} | {'>varbd':>7}"
              f" {'p':>6} | {'monot.':>6}")
    print("\nWorst-case error max_{b,t} |Ŝ_b^t − S_b^t| per run (counts; /n = proportion)")
    print(header)
    print("-" * len(header))
    for p in panels:
        for c in counters:
            r = results[p][c]
            w = r["worst_error_counts"]
            print(f"{p:>9} {c:>34} | {w['median']:7.1f} {w['p2.5']:7.1f} {w['p97.5']:7.1f}"
                  f" {max(r['run_max_counts']):6d} | {w['median'] / n:8.5f}"
                  f" {w['p97.5'] / n:8.5f} | {cor_cells(r['corollary_b1'])} |"
                  f" {100 * r['variance_bound']['fraction_above']:6.1f}%"
                  f" {r['variance_bound']['p_value_if_rate_is_beta']:6.3f} |"
                  f" {r['monotonisation_events']['median']:6.0f}")
    print("(>CorB.1, >varbd: share of runs whose worst error exceeds the bound, should be"
          f" ≤ β = {beta}; p: P(≥ that many | rate β); monot.: median monotonisation events)")

    for p in panels:
        print(f"\nPer period t, max_b |Ŝ_b^t − S_b^t| / n — {PANEL_TITLES[p]}: median [p2.5, p97.5]")
        print(f"{'t':>3} " + " ".join(f"{c:>27}" for c in counters))
        for i, t in enumerate(periods):
            cells = []
            for c in counters:
                per = results[p][c]["per_period_proportion"]
                cells.append(f"{per['median'][i]:.5f} [{per['p2.5'][i]:.5f},"
                             f"{per['p97.5'][i]:.5f}]")
            print(f"{t:>3} " + " ".join(f"{cell:>27}" for cell in cells))

    if "realistic" in panels:
        print("\nPer threshold b, median over runs of max_t |Ŝ_b^t − S_b^t| (counts) vs the"
              " counter's exact max std — realistic panel")
        print(f"{'b':>3} " + " ".join(f"{c + ' med/std':>27}" for c in counters))
        for b in range(1, horizon + 1):
            print(f"{b:>3} " + " ".join(
                f"{results['realistic'][c]['per_threshold_median_counts'][b - 1]:>18.1f}"
                f" / {results['realistic'][c]['per_threshold_max_std_exact'][b - 1]:6.1f}"
                for c in counters))
        print("\nFigure 8 view (realistic panel): share with ≥ b ones, synthetic mean vs truth")
        for c in counters:
            print(f"  {c:>34}: max |mean − truth| over b = 1..{max(SHARE_THRESHOLDS)}, t ="
                  f" {max(v['max_abs_bias'] for v in shares[c].values()):.5f}"
                  f" (max |z| of the mean {max(v['max_abs_bias_z'] for v in shares[c].values()):.1f})")
        t_show = [3, 6, 9, 12]
        print(f"  {'b':>3} {'t':>3} {'truth':>8} " + " ".join(f"{c + ' mean [2.5,97.5]':>34}"
                                                            for c in counters))
        for b in SHARE_THRESHOLDS:
            for t in t_show:
                if t < b or t > horizon:
                    continue
                cells = [f"{shares[c][b]['mean'][t - 1]:.4f} [{shares[c][b]['p2.5'][t - 1]:.4f},"
                         f"{shares[c][b]['p97.5'][t - 1]:.4f}]" for c in counters]
                print(f"  {b:>3} {t:>3} {shares[counters[0]][b]['truth'][t - 1]:8.4f} "
                      + " ".join(f"{cell:>34}" for cell in cells))

    checked = sum(results[p][c]["records_checked"] for p in panels for c in counters)
    bad = sum(results[p][c]["record_mismatches"] for p in panels for c in counters)
    if checked:
        print(f"\nmaterialised synthetic people reproduce every released count in {checked}"
              f" runs: {bad == 0} ({bad} mismatching periods)")

    verdict_parts = []
    ok = True
    for p in panels:
        for c in counters:
            r = results[p][c]
            var = r["variance_bound"]["fraction_above"]
            good_var = var <= beta
            ok &= good_var
            cor_text = ""
            if r["corollary_b1"] is not None:
                cor = r["corollary_b1"]["fraction_above"]
                cor_text = (f"{100 * cor:.1f} % > paper's Cor. B.1"
                            f"{'' if cor <= beta else ' (ABOVE β)'}, ")
            verdict_parts.append(f"{p}/{c}: {cor_text}{100 * var:.1f} % >"
                                 f" error_bound{'' if good_var else ' (ABOVE β)'}")
    gains = []
    if "tree/paper" in counters:
        for p in panels:
            for c in counters:
                if c != "tree/paper":
                    ratio = (results[p]["tree/paper"]["worst_error_counts"]["median"]
                             / results[p][c]["worst_error_counts"]["median"])
                    gains.append(f"{p}: {c} {ratio:.2f}x")
    verdict = (f"VERDICT: {'OK' if ok else 'CHECK'} — exceedance ≤ β = {beta} for every"
               f" headline error_bound (variance bound); the paper's Corollary B.1 for"
               f" reference: "
               + "; ".join(verdict_parts)
               + (f".  Median worst error, tree/paper / variant: {', '.join(gains)}."
                  if gains else ""))
    print()
    print(verdict)
    print(f"runtime {seconds:.1f} s ({simulate_seconds:.1f} s simulation, {workers} worker(s),"
          f" {len(tasks)} tasks)")

    os.makedirs(args.output_dir, exist_ok=True)
    summary = {
        "paper": ("Bun, Gaboardi, Neunhoeffer, Zhang: arXiv v1 §5 Figure 7 (worst-case error "
                  "of Algorithm 2 vs Corollary 4.7 = 2024 Corollary B.1) and 2024 App. C.3 "
                  "Figure 8 (share with ≥ b ones), on simulated panels"),
        "num_people": n, "horizon": horizon, "runs": args.runs, "seeds": [0, args.runs - 1],
        "sampler": "seeded (not for publication)", "panels": panels,
        "configs": {c: configs[c].to_dict() for c in counters},
        "neighbor": args.neighbor,
        "bounds": {"paper_corollary_b1_counts": corollary,
                   "paper_corollary_b1_proportion": None if corollary is None
                   else corollary / n,
                   "error_bound_by_split": {c: configs[c].error_bound_by_split
                                            for c in counters},
                   "variance_bound_counts": {c: configs[c].variance_bound for c in counters},
                   "variance_bound_proportion": {c: configs[c].variance_bound / n
                                                 for c in counters},
                   "beta": beta},
        "periods": periods.tolist(),
        "true_counts": {p: truths[p][1].tolist() for p in panels},
        "results": results,
        "figure8_shares": {"panel": "realistic", "thresholds": list(SHARE_THRESHOLDS),
                           "by_counter": {c: {str(b): v for b, v in shares[c].items()}
                                          for c in shares}},
        "verdict": verdict, "runtime_seconds": seconds, "workers": workers,
    }
    tag = "" if args.neighbor == "add-remove" else f"_{args.neighbor}"
    with open(os.path.join(args.output_dir, f"fig7_cumulative_error{tag}.json"), "w",
              encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2, allow_nan=False)

    draw_error_figure(os.path.join(args.output_dir, f"fig7_cumulative_error{tag}.png"), periods,
                      results, configs, n, args.runs, corollary)
    draw_histogram_figure(os.path.join(args.output_dir, f"fig7_cumulative_error_hist{tag}.png"),
                          results, configs, n, args.runs, corollary)
    if shares:
        shown = [c for c in SHARE_COUNTERS if c in shares] or list(shares)[:2]
        draw_share_figure(os.path.join(args.output_dir, f"fig8_cumulative_shares{tag}.png"),
                          periods, shares, shown, n, args.rho, args.runs)
    return summary


if __name__ == "__main__":
    main()
