"""Error, memory and speed of every private counter at equal privacy.

Two budgets, add/remove neighbours (entries_changed = 1):

* ρ = 1 (zCDP): every counter (discrete Gaussian; ``sqrt-factorisation`` and ``blt``
  continuous Gaussian);
* ε = 1 (pure DP): the counters that take ε (discrete Laplace).

For T ∈ {2^10, 2^12, 2^14, 2^16} (``--horizons``), per counter:

* max and mean over t = 1..T of the std of S̃^t − S^t, exact (``variance(t)``) and
  empirical from seeded runs (SeededSampler).  The runs are the coordinates of one
  vector counter (``dim`` = runs): coordinates get independent noise, so each is an
  independent run of the scalar counter; std(t) = sqrt(mean over runs of (S̃^t − S^t)²).
  ``sqrt-factorisation`` costs O(t) per step, so above T = 2^12 it is given exact only;
* memory: floats of counter state per coordinate after T steps (``_state()``);
* speed: scalar steps per second of a vector counter of ``--speed-dim`` coordinates
  (a tenth for ``sqrt-factorisation``) over min(T, 2^12) steps (dim × steps / seconds,
  SeededSampler, one core).

Gains are against the binary tree at the same budget: tree std / counter std (> 1 is
better).  Writes ``bench/results/counters_error.{json,md}``.

    python bench/counters_error.py [--horizons 1024 4096 16384 65536] [--seed 2024]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from continual_synth.mechanisms.counters import (
    UNBOUNDED_KINDS,
    counter_kinds,
    counter_units,
    make_counter,
)
from continual_synth.mechanisms.samplers import SeededSampler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import write_result  # noqa: E402  (bench/harness.py)
QUADRATIC = ("sqrt-factorisation",)     # O(t) per step: empirical runs only up to 2^12
QUADRATIC_LIMIT = 2 ** 12


def runs_for(horizon: int) -> int:
    return 300 if horizon <= 2 ** 12 else 100


def build(kind: str, horizon: int, unit: str, dim: int):
    return make_counter(kind, None if kind in UNBOUNDED_KINDS else horizon,
                        **{unit: 1.0}, dim=dim, entries_changed=1)


def state_floats(counter) -> float:
    """Floats of state per coordinate (parameters of the factorisation excluded)."""
    total = sum(np.asarray(v).size for v in counter._state().values())
    return total / counter.dim


def measure(kind: str, unit: str, horizon: int, runs: int, seed: int, speed_dim: int) -> dict:
    exact = np.sqrt(build(kind, horizon, unit, 1).variances(np.arange(1, horizon + 1)))
    row = {"kind": kind, "unit": unit, "horizon": horizon,
           "exact_max_std": float(exact.max()), "exact_mean_std": float(exact.mean())}
    if kind in QUADRATIC and horizon > QUADRATIC_LIMIT:
        row.update(runs=0, empirical_max_std=None, empirical_mean_std=None,
                   memory_floats_per_coordinate=2.0 * horizon)
    else:
        counter = build(kind, horizon, unit, runs)
        sampler = SeededSampler([seed, horizon, counter_kinds().index(kind)])
        data = np.random.default_rng([seed, horizon])
        truth = np.zeros(runs)
        sq = np.empty(horizon)
        for t in range(horizon):
            z = data.integers(0, 5, size=runs)      # any stream: the error does not depend on it
            truth += z
            sq[t] = np.mean((counter.feed(z, sampler) - truth) ** 2)
        empirical = np.sqrt(sq)
        row.update(runs=runs, empirical_max_std=float(empirical.max()),
                   empirical_mean_std=float(empirical.mean()),
                   memory_floats_per_coordinate=state_floats(counter))
    steps = min(horizon, QUADRATIC_LIMIT)
    if kind in QUADRATIC:                   # O(t·dim) per step: a tenth of the width
        speed_dim = max(speed_dim // 10, 1)
    counter = build(kind, horizon, unit, speed_dim)
    sampler = SeededSampler([seed, 1])
    z = np.ones(speed_dim)
    start = time.perf_counter()
    for _ in range(steps):
        counter.feed(z, sampler)
    row["scalar_steps_per_second"] = speed_dim * steps / (time.perf_counter() - start)
    row["speed_steps"], row["speed_dim"] = steps, speed_dim
    return row


def fmt(value, digits=3):
    return "—" if value is None else f"{value:.{digits}f}"


def table(results, unit, budget_text):
    lines = [f"### {budget_text}", "",
             "| T | counter | runs | max std (exact) | max std (empirical) | mean std (exact) "
             "| mean std (empirical) | gain over tree: max / mean (exact) | state floats "
             "per coordinate | scalar steps/s |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in (r for r in results if r["unit"] == unit):
        tree = next(x for x in results if x["unit"] == unit and x["kind"] == "tree"
                    and x["horizon"] == r["horizon"])
        gain = (f"{tree['exact_max_std'] / r['exact_max_std']:.2f}x / "
                f"{tree['exact_mean_std'] / r['exact_mean_std']:.2f}x")
        lines.append(f"| {r['horizon']} | {r['kind']} | {r['runs']} | {fmt(r['exact_max_std'])} "
                     f"| {fmt(r['empirical_max_std'])} | {fmt(r['exact_mean_std'])} "
                     f"| {fmt(r['empirical_mean_std'])} | {gain} "
                     f"| {r['memory_floats_per_coordinate']:.0f} "
                     f"| {r['scalar_steps_per_second']:.3g} |")
    return lines


def blt_summary(results):
    lines = ["### BLT against the square-root factorisation (ρ = 1)", "",
             "| T | blt / sqrt max std | blt / sqrt mean std | blt state floats | "
             "sqrt state floats | blt scalar steps/s |", "|---|---:|---:|---:|---:|---:|"]
    for horizon in sorted({r["horizon"] for r in results}):
        pick = {r["kind"]: r for r in results if r["unit"] == "rho" and r["horizon"] == horizon}
        blt, sqrt = pick["blt"], pick["sqrt-factorisation"]
        lines.append(f"| {horizon} | {blt['exact_max_std'] / sqrt['exact_max_std']:.4f} "
                     f"| {blt['exact_mean_std'] / sqrt['exact_mean_std']:.4f} "
                     f"| {blt['memory_floats_per_coordinate']:.0f} "
                     f"| {sqrt['memory_floats_per_coordinate']:.0f} "
                     f"| {blt['scalar_steps_per_second']:.3g} |")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--horizons", type=int, nargs="+",
                        default=[2 ** 10, 2 ** 12, 2 ** 14, 2 ** 16])
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--speed-dim", type=int, default=10_000)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args(argv)

    results = []
    for unit in ("rho", "epsilon"):
        for horizon in args.horizons:
            for kind in counter_kinds():
                if unit in counter_units(kind):
                    start = time.perf_counter()
                    results.append(measure(kind, unit, horizon, runs_for(horizon), args.seed,
                                           args.speed_dim))
                    print(f"{unit} T={horizon} {kind}: {time.perf_counter() - start:.1f}s",
                          flush=True)

    lines = ["Counter error at equal privacy, add/remove neighbours (entries_changed = 1); "
             "std of S~^t - S^t over t = 1..T.  Gain = tree std / counter std (> 1 is "
             "better).  Empirical columns: seeded runs (— : not run, O(T^2) cost).  State: "
             "floats per coordinate after T steps.  Speed: scalar steps/s of a "
             f"{args.speed_dim}-coordinate vector counter (seeded sampler, one core, "
             "machine shared).", ""]
    lines += blt_summary(results) + [""]
    lines += table(results, "rho", "ρ = 1 zCDP (discrete Gaussian; blt and "
                   "sqrt-factorisation continuous Gaussian)") + [""]
    lines += table(results, "epsilon", "ε = 1 pure DP (discrete Laplace)")
    text = "\n".join(lines)
    print(text)

    meta = {"neighbor": "add-remove", "entries_changed": 1, "budgets": {"rho": 1.0,
                                                                       "epsilon": 1.0},
            "seed": args.seed, "sampler": "seeded (simulation, not for publication)",
            "std": "sqrt(Var(S~^t - S^t)), exact from variance(t), empirical from runs",
            "runs": "independent runs = coordinates of one vector counter (independent noise)",
            "unbounded": "hybrid and unbounded-block built without a horizon, read for T steps",
            "memory": "floats of counter state per coordinate after T steps",
            "speed": f"scalar steps/s, dim {args.speed_dim}, min(T, {QUADRATIC_LIMIT}) steps"}
    write_result(os.path.join(args.out, "counters_error"), {"meta": meta, "results": results},
                 text)


if __name__ == "__main__":
    main()
