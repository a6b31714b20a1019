"""Continual PrivHP against one-shot PrivHP on every prefix of a stream.

The skewed 2-D data of bench/privhp_space_utility.py (five tight clusters), n points
split into T equal periods in arrival order (the points are i.i.d., so every period is a
random sample).  After each period t:

* **continual**: one step of :class:`~continual_synth.mechanisms.privhp_synthesizer.
  ContinualPrivHPSynthesizer` (ε for the whole stream, event level, memory budget M
  words, the ``auto`` counter), its tree sampled;
* **one-shot**: PrivHP (:func:`~continual_synth.mechanisms.privhp.release`) run afresh
  on the prefix 1..t at the same ε and the same budget M counters — each of these T
  releases alone spends ε (T·ε in all): the yardstick, not a competitor;
* **floor**: the same W1 statistic between two disjoint random halves of real points of
  the prefix — what W1 reads for two samples of the same distribution.

W1 is measured without evaluation noise, at every period: the **marginal W1**, the mean
over the two coordinates of the exact 1-D W1 between the marginal of the synthetic
distribution (the grown tree's leaves, each spread uniformly over its cell, as
:func:`~continual_synth.mechanisms.privhp.sample_unit` samples it) and the marginal of
the *whole* prefix (all its points): both CDFs are computed on the dyadic grid of 2^G
cells per axis (G = 8 + the most cuts a coordinate gets by level r: every leaf boundary
lies on the grid, and points are resolved 2^8 times finer than the finest cell), so the
figure is exact up to 2^-G, with no subsampling and no synthetic sample.
Its **floor** is the same distance for the noise-free tree of depth r (every point
spread over its own level-r cell): the resolution term of Theorem 3, which no private
tree of this depth can beat.  At the last period the sliced W1 on subsamples (the
statistic of bench/privhp_space_utility.py, ``--projections`` directions on
``--eval-points`` points per side, with its real-vs-real floor) is a cross-check.
Memory is the number of words the method holds, measured from its
state after each period (continual: the counters' state arrays; one-shot: its counters).

    python bench/privhp_continual.py [--n 1000000] [--periods 50] [--reps 6]

Writes bench/results/privhp_continual.{md,json,png}.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from privhp_space_utility import (marginal_cdfs_of_points, marginal_cdfs_of_tree,  # noqa: E402
                                  marginal_w1, resolution_tree, skewed)

from continual_synth.mechanisms import hierarchy, privhp  # noqa: E402
from continual_synth.mechanisms.continual_privhp import ContinualPrivHPConfig  # noqa: E402
from continual_synth.mechanisms.privhp_synthesizer import (  # noqa: E402
    ContinualPrivHPSynthesizer)
from continual_synth.mechanisms.samplers import SeededSampler  # noqa: E402
from continual_synth.pipelines.evaluation.evaluate_privhp import w1_sliced  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def state_words(counters) -> int:
    return int(sum(np.asarray(v).size for c in counters for v in c._state().values()))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--periods", type=int, default=50)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--prune-k", type=int, default=64)
    parser.add_argument("--memory", type=int, default=65_536)
    parser.add_argument("--continual-depth", type=int, default=None,
                        help="continual PrivHP's depth (default: --depth)")
    parser.add_argument("--continual-prune-k", type=int, default=None,
                        help="continual PrivHP's prune_k (default: --prune-k)")
    parser.add_argument("--counter", default="auto")
    parser.add_argument("--block-size", type=int, default=None,
                        help="the block counter's block size (with --counter block)")
    parser.add_argument("--final-share", type=float, default=None,
                        help="the anchored counter's final share (with --counter anchored)")
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--stride", type=int, default=None,
                        help="continual: counters on every s-th level (default: the library's)")
    parser.add_argument("--sketch-depth", type=int, default=None,
                        help="continual: count-min rows j (default: the library's)")
    parser.add_argument("--eval-points", type=int, default=200_000)
    parser.add_argument("--projections", type=int, default=64)
    parser.add_argument("--out", default=os.path.join(RESULTS, "privhp_continual"))
    args = parser.parse_args()
    started, cpu_started = time.time(), time.process_time()
    truth = skewed(args.n, 2, np.random.default_rng(102))
    edges = np.linspace(0, args.n, args.periods + 1).astype(int)
    structure = dict(epsilon=args.epsilon, dims=2, prune_k=args.prune_k, depth=args.depth)
    continual = ContinualPrivHPConfig.create(
        horizon=args.periods, counter=args.counter, memory=args.memory, stride=args.stride,
        counter_options={k: v for k, v in (("block_size", args.block_size),
                                           ("final_share", args.final_share))
                         if v is not None} or None,
        **{**structure, "depth": args.continual_depth or args.depth,
           "prune_k": args.continual_prune_k or args.prune_k,
           "sketch_depth": args.sketch_depth})
    one_shot = privhp.PrivHPConfig(**structure, memory=args.memory)
    rows, floors, sliced = [], {}, []
    # leaf boundaries lie on the 2^(cuts of level r) grid; 8 more bits resolve the points
    # inside a cell, so the figure is exact up to 2^-(cuts + 8) per coordinate
    deepest = max(args.depth, continual.structure.depth)
    cuts = int(hierarchy.cuts_per_coordinate(deepest, 2).max()) + 8
    for rep in range(args.reps):
        synthesizer = ContinualPrivHPSynthesizer(continual, 0)
        state = synthesizer.initial_state()
        prefix = privhp.PrivHPAccumulator(one_shot)
        for t in range(1, args.periods + 1):
            part = truth[edges[t - 1]:edges[t]]
            state, release, _ = synthesizer.step_period(
                state, t, privhp.accumulate(part, continual.structure), rep)
            prefix.merge(privhp.accumulate(part, one_shot))
            baseline = privhp.release(prefix.copy(), SeededSampler([1000 + rep, t]))
            real = marginal_cdfs_of_points(truth[:edges[t]], cuts)
            if t not in floors:
                floors[t] = marginal_w1(real, marginal_cdfs_of_tree(
                    resolution_tree(truth[:edges[t]], args.depth), cuts))
            row = {"rep": rep, "period": t, "points": int(edges[t]),
                   "continual_words": state_words(state.counters),
                   "one_shot_words": one_shot.memory_counters,
                   "w1_continual": marginal_w1(real, marginal_cdfs_of_tree(release.tree, cuts)),
                   "w1_one_shot": marginal_w1(real, marginal_cdfs_of_tree(baseline.tree, cuts)),
                   "w1_floor": floors[t]}
            rows.append(row)
            print(f"rep {rep} t={t:2d} marginal W1 continual {row['w1_continual']:.3g} "
                  f"one-shot {row['w1_one_shot']:.3g} floor {row['w1_floor']:.3g} words "
                  f"{row['continual_words']}", flush=True)
        m = min(args.eval_points, args.n // 2)
        rng = np.random.default_rng([rep, args.periods])
        real = truth[np.random.default_rng(rep).choice(args.n, 2 * m, replace=False)]
        sliced.append({"rep": rep, "m": m, "continual": w1_sliced(
            real[:m], privhp.sample_unit(release.tree, m, rng), args.projections, rep),
            "one_shot": w1_sliced(real[:m], privhp.sample_unit(baseline.tree, m, rng),
                                  args.projections, rep),
            "floor": w1_sliced(real[:m], real[m:], args.projections, rep)})
        print("sliced W1 at the last period", sliced[-1], flush=True)
    meta = {"n": args.n, "periods": args.periods, "epsilon": args.epsilon,
            "depth": args.depth, "prune_k": args.prune_k, "memory_budget": args.memory,
            "continual_depth": continual.structure.depth,
            "continual_prune_k": continual.structure.prune_k,
            "continual_stride": continual.stride,
            "continual_measured_levels": list(continual.measured_levels),
            "continual_sketch_depth": continual.structure.sketch_depth,
            "counter": continual.counter,
            "budget_split": continual.structure.budget_split,
            "one_shot_budget_split": one_shot.budget_split,
            "counter_options": dict(continual.counter_options),
            "words_per_cell": continual.words_per_cell,
            "continual_cells": continual.cells, "continual_sketch_width":
                continual.structure.sketch_width, "continual_exact_depth":
                continual.structure.exact_depth,
            "one_shot_counters": one_shot.memory_counters,
            "one_shot_sketch_width": one_shot.sketch_width,
            "full_tree_counters": one_shot.full_tree_counters,
            "reps": args.reps, "eval_points": args.eval_points,
            "projections": args.projections, "grid_cells_per_axis": 2 ** cuts,
            "seconds_total": time.time() - started,
            "cpu_seconds": time.process_time() - cpu_started,
            "load_1min_at_end": os.getloadavg()[0]}
    summary = summarise(rows, args.periods)
    summary["sliced_last_period"] = {k: float(np.mean([s[k] for s in sliced]))
                                     for k in ("continual", "one_shot", "floor")}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as handle:
        json.dump({"meta": meta, "summary": summary, "rows": rows, "sliced": sliced},
                  handle, indent=2)
    write_table(meta, summary, rows, args.out + ".md")
    plot(rows, meta, args.out + ".png")
    print(json.dumps(summary, indent=1))
    print(f"wrote {args.out}.{{json,md,png}} in {meta['seconds_total']:.0f}s")


def summarise(rows, periods):
    def mean(key, t):
        return float(np.mean([r[key] for r in rows if r["period"] == t]))
    last = {k: mean(k, periods) for k in ("w1_continual", "w1_one_shot", "w1_floor")}
    ratios = np.array([mean("w1_continual", t) / mean("w1_one_shot", t)
                       for t in range(1, periods + 1)])
    return {"last_period": last,
            "ratio_worst": float(ratios.max()), "ratio_worst_period": int(ratios.argmax() + 1),
            "ratio_median": float(np.median(ratios)),
            "ratio_continual_to_one_shot": last["w1_continual"] / last["w1_one_shot"],
            "excess_ratio": ((last["w1_continual"] - last["w1_floor"])
                             / (last["w1_one_shot"] - last["w1_floor"])),
            "continual_words": sorted({r["continual_words"] for r in rows}),
            "target_met": last["w1_continual"] <= 1.5 * last["w1_one_shot"]}


def write_table(meta, summary, rows, path):
    last = summary["last_period"]
    lines = [
        f"# Continual PrivHP vs one-shot PrivHP on every prefix (n = {meta['n']:,}, "
        f"T = {meta['periods']}, ε = {meta['epsilon']}, r = {meta['depth']}, "
        f"prune_k = {meta['prune_k']}, M = {meta['memory_budget']:,} words, "
        f"{meta['reps']} seeds)", "",
        "Skewed 2-D data of bench/privhp_space_utility.py, periods of equal size in "
        "arrival order.  W1 = exact marginal W1 (mean over the two coordinates of the 1-D "
        "W1 between the synthetic distribution's marginal and the whole prefix's, on the "
        f"dyadic grid of {meta['grid_cells_per_axis']:,} cells per axis: no subsampling, "
        "no evaluation noise); floor = the same for the noise-free tree of depth r (the "
        "resolution term).  Continual: one release per period, ε = "
        f"{meta['epsilon']} for the whole stream (event level), counters on every s-th level "
        f"(s = {meta['continual_stride']}: levels {meta['continual_measured_levels']}; the "
        f"others are sums of their children), {meta['budget_split']} split over them, "
        f"count-min sketches of {meta['continual_sketch_depth']} rows (one-shot: 3), "
        "least squares over the exact levels (Hay et al. 2010, the "
        "counters' variances at t) before growth, counter "
        f"`{meta['counter']}` {meta['counter_options'] or ''} ({meta['words_per_cell']} "
        "word(s) per cell).  One-shot: PrivHP "
        f"afresh on each prefix at ε = {meta['epsilon']} (each alone spends ε; the paper's "
        f"{meta['one_shot_budget_split']} split) with the same budget M, depth "
        f"{meta['depth']} and prune_k {meta['prune_k']}; continual depth "
        f"{meta['continual_depth']}, prune_k {meta['continual_prune_k']}.", "",
        f"Structure: continual {meta['continual_cells']:,} cells (sketch width "
        f"{meta['continual_sketch_width']}, exact levels 0..{meta['continual_exact_depth']}); "
        f"one-shot {meta['one_shot_counters']:,} counters (sketch width "
        f"{meta['one_shot_sketch_width']}); the full tree of depth {meta['depth']} has "
        f"{meta['full_tree_counters']:,}.", "",
        f"**Last period:** W1 continual {last['w1_continual']:.4g}, one-shot "
        f"{last['w1_one_shot']:.4g}, floor {last['w1_floor']:.4g}: ratio "
        f"{summary['ratio_continual_to_one_shot']:.2f} (target ≤ 1.5: "
        f"{'met' if summary['target_met'] else 'NOT met'}); excess over the floor "
        f"{summary['excess_ratio']:.2f}× one-shot's.  Over all periods the ratio's median is "
        f"{summary['ratio_median']:.2f} and its worst {summary['ratio_worst']:.2f} (period "
        f"{summary['ratio_worst_period']}).  Continual memory over all periods: "
        f"{', '.join(f'{w:,}' for w in summary['continual_words'])} words (flat).", "",
        "Cross-check at the last period, sliced W1 on subsamples "
        f"({meta['projections']} projections, {min(meta['eval_points'], meta['n'] // 2):,} "
        "points per side, mean over seeds): continual "
        f"{summary['sliced_last_period']['continual']:.4g}, one-shot "
        f"{summary['sliced_last_period']['one_shot']:.4g}, real-vs-real floor "
        f"{summary['sliced_last_period']['floor']:.4g}.", "",
        "| period | points | W1 continual | W1 one-shot | floor | continual / one-shot | "
        "continual words | one-shot counters |", "|---|---|---|---|---|---|---|---|"]
    periods = sorted({r["period"] for r in rows})
    for t in periods:
        sel = [r for r in rows if r["period"] == t]
        c, o, f = (float(np.mean([r[k] for r in sel]))
                   for k in ("w1_continual", "w1_one_shot", "w1_floor"))
        lines.append(f"| {t} | {sel[0]['points']:,} | {c:.4g} | {o:.4g} | {f:.4g} | "
                     f"{c / o:.2f} | {sel[0]['continual_words']:,} | "
                     f"{sel[0]['one_shot_words']:,} |")
    lines += ["", f"Run time {meta['seconds_total']:.0f} s wall, {meta['cpu_seconds']:.0f} CPU s, "
              f"1-min load {meta['load_1min_at_end']:.2f} at the end, 2 shared cores "
              "(python bench/privhp_continual.py)."]
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def plot(rows, meta, path):
    fig = Figure(figsize=(11, 4.2))
    FigureCanvasAgg(fig)
    periods = sorted({r["period"] for r in rows})

    def series(key):
        return [np.mean([r[key] for r in rows if r["period"] == t]) for t in periods]
    ax = fig.add_subplot(1, 2, 1)
    ax.plot(periods, series("w1_continual"), "o-", ms=3, label="continual PrivHP (ε total)")
    ax.plot(periods, series("w1_one_shot"), "s-", ms=3,
            label="one-shot PrivHP on the prefix (ε each)")
    ax.plot(periods, series("w1_floor"), ":", color="grey",
            label="floor (noise-free tree of depth r)")
    ax.plot(periods, 1.5 * np.array(series("w1_one_shot")), "--", color="grey", lw=0.8,
            label="1.5 × one-shot")
    ax.set_yscale("log")
    ax.set_xlabel("period t")
    ax.set_ylabel("marginal W1 to the prefix (exact)")
    ax.legend(fontsize=7)
    ax = fig.add_subplot(1, 2, 2)
    ax.plot(periods, series("continual_words"), "o-", ms=3, label="continual (words)")
    ax.plot(periods, series("one_shot_words"), "s-", ms=3, label="one-shot (counters)")
    ax.axhline(meta["memory_budget"], ls="--", color="grey", label="budget M")
    ax.set_ylim(0, 1.2 * meta["memory_budget"])
    ax.set_xlabel("period t")
    ax.set_ylabel("memory")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
