"""PrivHP's space-utility trade-off (Holland et al. 2025): W1 and memory against prune_k.

For a skewed data set (a mixture of tight clusters) and a uniform one, n = 1 000 000
points, ε = 1, d = 1 and d = 2, depth r = 20 (≈ log2(ε n)), it runs PrivHP (pure-numpy
path, :func:`continual_synth.mechanisms.privhp.synthesize`) for a range of prune_k at
each of a few memory budgets (``--memory`` M counters: the sketch width and the exact levels
follow from it, :func:`continual_synth.mechanisms.privhp.sketch_width_for`) and
compares, at the same ε and depth, with

* the unpruned full tree (prune_k = 2^r: every level complete, 2^(r+1) − 1 counters,
  memory growing with the domain), and
* a uniform generator over the domain (no memory, no privacy cost).

W1 in [0,1]^d units between the synthetic *distribution* (the grown tree's leaves, each
spread uniformly over its cell, as sampling draws from it) and the n real points, with no
synthetic sample: d = 1 the exact W1, d = 2 the exact *marginal* W1 (mean over the
coordinates of the 1-D W1), both from CDFs on the dyadic grid of 2^G cells per axis,
G = min(8 + the most cuts a coordinate gets by level r, 22): every leaf boundary is on
the grid, so the figure is exact up to 2^-G.  (Comparing n real with n sampled
synthetic points, or the sliced W1 on 200 000-point subsamples, would add the
evaluation's own sampling noise — 0.0007 real-vs-real in d = 2 — larger than most of
the differences to show.)  ``w1_floor`` is the same distance for the
noise-free tree of depth r (the resolution term).  Each figure is the mean over
``--reps`` seeds of the seeded sampler.

    python bench/privhp_space_utility.py [--n 1000000] [--reps 3]

Writes bench/results/privhp_space_utility.{md,json,png}.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from continual_synth.mechanisms import hierarchy, privhp
from continual_synth.mechanisms.samplers import SeededSampler

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def skewed(n, dims, rng):
    """Five tight clusters (sd 0.004) with unequal weights."""
    centres = np.array([[0.11, 0.83], [0.37, 0.22], [0.52, 0.57], [0.74, 0.91], [0.93, 0.08]])
    weights = np.array([0.35, 0.25, 0.2, 0.12, 0.08])
    which = rng.choice(5, n, p=weights)
    return np.clip(centres[which, :dims] + rng.normal(0, 0.004, (n, dims)), 0, 1)


def uniform(n, dims, rng):
    return rng.random((n, dims))


def marginal_cdfs_of_tree(tree: privhp.PrivHPTree, cuts: int) -> np.ndarray:
    """d × 2^cuts: the synthetic distribution's marginal CDF at the end of every grid
    cell (leaf mass spread uniformly over its cell; all leaf sides are multiples of
    2^-cuts)."""
    grid = 2 ** cuts
    levels, thetas, counts = tree.leaves()
    counts = np.maximum(counts, 0.0)
    out = np.zeros((tree.dims, grid))
    for level in np.unique(levels):
        rows = levels == level
        corners, sides = hierarchy.cell_boxes(thetas[rows], int(level), tree.dims)
        mass = counts[rows]
        for c in range(tree.dims):
            lo = np.rint(corners[:, c] * grid).astype(np.int64)
            width = int(round(sides[c] * grid))
            density = np.zeros(grid + 1)
            np.add.at(density, lo, mass / width)
            np.add.at(density, lo + width, -mass / width)
            out[c] += np.cumsum(density[:grid])
    total = out[0].sum()
    return np.cumsum(out, axis=1) / total if total > 0 else np.cumsum(
        np.full((tree.dims, grid), 1.0 / grid), axis=1)


def marginal_cdfs_of_points(points: np.ndarray, cuts: int) -> np.ndarray:
    """d × 2^cuts: the points' marginal CDF at the end of every grid cell."""
    grid = 2 ** cuts
    cells = np.minimum((points * grid).astype(np.int64), grid - 1)
    return np.stack([np.cumsum(np.bincount(cells[:, c], minlength=grid)) / len(points)
                     for c in range(points.shape[1])])


def marginal_w1(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over coordinates of ∫|F_a − F_b| (CDFs at grid-cell ends, cell width 2^-G)."""
    return float(np.abs(a - b).sum(axis=1).mean() / a.shape[1])


def resolution_tree(points: np.ndarray, depth: int) -> privhp.PrivHPTree:
    """The noise-free depth-r tree: every non-empty level-r cell a leaf with its count
    (the floor of every tree of depth r)."""
    theta, counts = np.unique(hierarchy.leaf_index(points, depth), return_counts=True)
    empty = [np.zeros(0, dtype=np.int64)] * depth
    return privhp.PrivHPTree(points.shape[1], depth, empty + [theta],
                             empty + [counts.astype(np.float64)],
                             empty + [np.full(theta.size, -1, dtype=np.int64)])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--prune-k", default="16,64,256,1024,4096")
    parser.add_argument("--sketch-depth", type=int, default=3)
    parser.add_argument("--memory", default="16384,65536",
                        help="memory budgets in counters, each for every prune_k")
    parser.add_argument("--dims", default="1,2")
    parser.add_argument("--out", default=os.path.join(RESULTS, "privhp_space_utility"))
    args = parser.parse_args()
    ks = [int(k) for k in args.prune_k.split(",")]
    budgets = [int(m) for m in args.memory.split(",")]
    rows = []
    started = time.time()
    for dims in [int(d) for d in args.dims.split(",")]:
        for name, make in (("skewed", skewed), ("uniform", uniform)):
            truth = make(args.n, dims, np.random.default_rng(100 + dims))
            # exact (marginal) W1 of the tree; floor: the noise-free tree of depth r
            cuts = min(int(hierarchy.cuts_per_coordinate(args.depth, dims).max()) + 8, 22)
            real = marginal_cdfs_of_points(truth, cuts)
            floor = marginal_w1(real, marginal_cdfs_of_tree(resolution_tree(truth, args.depth),
                                                            cuts))
            settings = [("privhp", k, m) for m in budgets for k in ks] + [
                ("full tree", 2 ** args.depth, None), ("uniform generator", None, None)]
            for method, k, budget in settings:
                values, memory, seconds, width = [], 0, [], None
                for rep in range(args.reps):
                    t0 = time.time()
                    tree = privhp.PrivHPTree(dims, 0, [np.zeros(1, dtype=np.uint64)],
                                             [np.ones(1)], [np.full(1, -1)])  # uniform
                    if k is not None:
                        config = privhp.PrivHPConfig(
                            epsilon=args.epsilon, dims=dims, prune_k=k, depth=args.depth,
                            sketch_depth=args.sketch_depth,
                            memory=budget)
                        memory, width = config.memory_counters, config.sketch_width
                        tree = privhp.release(privhp.accumulate(truth, config),
                                              SeededSampler(rep)).tree
                    seconds.append(time.time() - t0)
                    values.append(marginal_w1(real, marginal_cdfs_of_tree(tree, cuts)))
                row = {"dims": dims, "data": name, "method": method, "prune_k": k,
                       "memory_budget": budget,
                       "sketch_width": width if method == "privhp" else None,
                       "exact_depth": config.exact_depth if method == "privhp" else None,
                       "memory_counters": memory, "w1_mean": float(np.mean(values)),
                       "w1_runs": values, "seconds_per_run": float(np.mean(seconds)),
                       "w1_floor": floor}
                rows.append(row)
                print(f"d={dims} {name:8s} {method:18s} k={k} mem={memory} "
                      f"W1={row['w1_mean']:.3g} ({row['seconds_per_run']:.1f}s)", flush=True)
    for row in rows:  # ratios against the full tree of the same data
        full = next(r for r in rows if r["dims"] == row["dims"] and r["data"] == row["data"]
                    and r["method"] == "full tree")
        row["w1_vs_full"] = row["w1_mean"] / full["w1_mean"]
        row["memory_vs_full"] = row["memory_counters"] / full["memory_counters"]
    meta = {"n": args.n, "epsilon": args.epsilon, "depth": args.depth, "reps": args.reps,
            "sketch_depth": args.sketch_depth, "memory_budgets": budgets,
            "budget_split": "sqrt (default)", "neighbor": "add-remove",
            "w1": ("exact W1 (d = 1) / exact marginal W1 (d = 2: mean over the coordinates) "
                   "between the synthetic distribution and the data, on the dyadic grid of "
                   "2^G cells per axis, G = min(8 + cuts at level r, 22); no sampling; "
                   "w1_floor: the same "
                   "for the noise-free tree of depth r"),
            "seconds_total": time.time() - started}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as handle:
        json.dump({"meta": meta, "rows": rows}, handle, indent=2)
    write_table(rows, meta, args.out + ".md")
    plot(rows, args.out + ".png")
    print(f"wrote {args.out}.{{json,md,png}} in {meta['seconds_total']:.0f}s")


def write_table(rows, meta, path):
    lines = [f"# PrivHP space-utility trade-off (n = {meta['n']:,}, ε = {meta['epsilon']}, "
             f"r = {meta['depth']}, j = {meta['sketch_depth']}, memory budgets "
             f"{', '.join(f'{m:,}' for m in meta['memory_budgets'])} counters, "
             f"{meta['reps']} seeds)", "",
             "The sketch width w and the exact levels 0..L_e come from the budget "
             "(`--memory`); levels whose 2^ℓ cells are no more than a sketch's j·w are "
             "exact.", "",
             "W1 in [0,1]^d units between the synthetic *distribution* and the data (no "
             "synthetic sample, no evaluation noise): d = 1 the exact W1, d = 2 the exact "
             "marginal W1 (mean over the two coordinates); see the script's docstring.", "",
             "| d | data | method | budget | prune_k | w | L_e | memory (counters) | "
             "memory / full | W1 | W1 / full |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        k = "" if r["prune_k"] is None or r["method"] != "privhp" else r["prune_k"]
        w = "" if r.get("sketch_width") is None else r["sketch_width"]
        le = "" if r.get("exact_depth") is None else r["exact_depth"]
        budget = "" if r.get("memory_budget") is None else f"{r['memory_budget']:,}"
        lines.append(f"| {r['dims']} | {r['data']} | {r['method']} | {budget} | {k} | {w} | "
                     f"{le} | "
                     f"{r['memory_counters']:,} | {100 * r['memory_vs_full']:.2f}% | "
                     f"{r['w1_mean']:.3g} | {r['w1_vs_full']:.2f} |")
    floors = {(r["dims"], r["data"]): r["w1_floor"] for r in rows if r["w1_floor"]}
    if floors:
        lines += ["", "W1 floor (the noise-free tree of depth r): " + ", ".join(
            f"d={d} {data}: {v:.3g}" for (d, data), v in floors.items())]
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def plot(rows, path):
    fig = Figure(figsize=(11, 8))
    FigureCanvasAgg(fig)
    combos = sorted({(r["dims"], r["data"]) for r in rows})
    for i, (dims, data) in enumerate(combos):
        ax = fig.add_subplot(2, 2, i + 1)
        sel = [r for r in rows if r["dims"] == dims and r["data"] == data]
        for budget in sorted({r["memory_budget"] for r in sel if r["method"] == "privhp"}):
            pr = [r for r in sel if r["method"] == "privhp" and r["memory_budget"] == budget]
            ax.plot([r["prune_k"] for r in pr], [r["w1_mean"] for r in pr], "o-",
                    label=f"PrivHP, budget {budget:,} counters "
                          f"({100 * pr[0]['memory_vs_full']:.1f}% of full)")
        full = next(r for r in sel if r["method"] == "full tree")
        ax.axhline(full["w1_mean"], color="black", lw=0.8,
                   label=f"full tree ({full['memory_counters']:,} counters)")
        ax.axhline(1.5 * full["w1_mean"], ls=":", color="grey", label="1.5 × full tree W1")
        uni = next(r for r in sel if r["method"] == "uniform generator")
        ax.axhline(uni["w1_mean"], color="red", lw=0.8, label="uniform generator")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("prune_k")
        ax.set_ylabel("W1 (exact)" if dims == 1 else "marginal W1 (exact)")
        ax.set_title(f"d = {dims}, {data}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
