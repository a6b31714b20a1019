"""Error of every private counter at equal privacy (issue #3).

For T ∈ {12, 64, 1024}, ρ = 1 (zCDP), add/remove neighbours (entries_changed = 1), the
maximum and the mean over t = 1..T of the standard deviation of S̃^t − S^t, for every
counter kind:

* exact: from ``variance(t)`` (the counters' variance formulas);
* empirical: from seeded runs (SeededSampler; 2 000 runs for T ≤ 64, 300 for T = 1024).
  The runs are the coordinates of one vector counter (``dim`` = runs): coordinates get
  independent noise, so each is an independent run of the scalar counter; std(t) is
  sqrt(mean over runs of (S̃^t − S^t)²) (the error has mean 0).

The unbounded counters (``hybrid``, ``unbounded-block``) are built without a horizon
(their calibration never depends on T) and read for T steps.  The table also gives each
better counter's gain over the binary tree: tree max std / its max std, tree mean std /
its mean std.  Writes ``bench/results/counters_error.{json,md}``.

    python bench/counters_error.py [--horizons 12 64 1024] [--rho 1] [--seed 2024]
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from continual_synth.mechanisms.counters import UNBOUNDED_KINDS, counter_kinds, make_counter
from continual_synth.mechanisms.samplers import SeededSampler

BETTER = ("honaker", "sqrt-factorisation")
HERE = os.path.dirname(os.path.abspath(__file__))


def runs_for(horizon: int) -> int:
    return 2000 if horizon <= 64 else 300


def measure(kind: str, horizon: int, rho: float, runs: int, seed: int) -> dict:
    counter = make_counter(kind, None if kind in UNBOUNDED_KINDS else horizon, rho=rho,
                           dim=runs, entries_changed=1)
    ts = np.arange(1, horizon + 1)
    exact = np.sqrt(counter.variances(ts))
    sampler = SeededSampler([seed, horizon, counter_kinds().index(kind)])
    data = np.random.default_rng([seed, horizon])
    truth = np.zeros(runs)
    sq = np.empty(horizon)
    start = time.perf_counter()
    for t in range(horizon):
        z = data.integers(0, 5, size=runs)      # any stream: the error does not depend on it
        truth += z
        sq[t] = np.mean((counter.feed(z, sampler) - truth) ** 2)
    empirical = np.sqrt(sq)
    return {"kind": kind, "horizon": horizon, "runs": runs,
            "exact_max_std": float(exact.max()), "exact_mean_std": float(exact.mean()),
            "empirical_max_std": float(empirical.max()),
            "empirical_mean_std": float(empirical.mean()),
            "seconds": time.perf_counter() - start,
            "exact_std": exact.tolist(), "empirical_std": empirical.tolist()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--horizons", type=int, nargs="+", default=[12, 64, 1024])
    parser.add_argument("--rho", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args(argv)

    results = []
    for horizon in args.horizons:
        rows = {kind: measure(kind, horizon, args.rho, runs_for(horizon), args.seed)
                for kind in counter_kinds()}
        tree = rows["tree"]
        for kind in BETTER:
            r = rows[kind]
            r["gain_over_tree"] = {
                "exact_max": tree["exact_max_std"] / r["exact_max_std"],
                "exact_mean": tree["exact_mean_std"] / r["exact_mean_std"],
                "empirical_max": tree["empirical_max_std"] / r["empirical_max_std"],
                "empirical_mean": tree["empirical_mean_std"] / r["empirical_mean_std"]}
        results.extend(rows.values())

    header = ("| T | counter | runs | max std (exact) | max std (empirical) | mean std (exact) "
              "| mean std (empirical) | gain over tree, max / mean: exact | empirical |")
    lines = [f"Counter error at equal privacy: rho = {args.rho:g} zCDP, add/remove neighbours "
             "(entries_changed = 1); std of S~^t - S^t over t = 1..T.  Gain = tree std / "
             "counter std (> 1 is better).", "", header,
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in results:
        gain = r.get("gain_over_tree")
        gain_text = (f"{gain['exact_max']:.2f}x / {gain['exact_mean']:.2f}x | "
                     f"{gain['empirical_max']:.2f}x / {gain['empirical_mean']:.2f}x"
                     if gain else " | ")
        lines.append(f"| {r['horizon']} | {r['kind']} | {r['runs']} | {r['exact_max_std']:.3f} "
                     f"| {r['empirical_max_std']:.3f} | {r['exact_mean_std']:.3f} "
                     f"| {r['empirical_mean_std']:.3f} | {gain_text} |")
    table = "\n".join(lines)
    print(table)

    os.makedirs(args.out, exist_ok=True)
    meta = {"rho": args.rho, "neighbor": "add-remove", "entries_changed": 1,
            "seed": args.seed, "sampler": "seeded (simulation, not for publication)",
            "noise": "discrete Gaussian (sqrt-factorisation: continuous Gaussian)",
            "std": "sqrt(Var(S~^t - S^t)), exact from variance(t), empirical from runs",
            "runs": "independent runs = coordinates of one vector counter (independent noise)",
            "unbounded": "hybrid and unbounded-block built without a horizon, read for T steps"}
    with open(os.path.join(args.out, "counters_error.json"), "w") as fh:
        json.dump({"meta": meta, "results": results}, fh, indent=1)
    with open(os.path.join(args.out, "counters_error.md"), "w") as fh:
        fh.write(table + "\n")


if __name__ == "__main__":
    main()
