"""Where the tabular stream synthesizer's relative workload error sits:
AvgRelWE (Kumar et al. §7.3) of the released table at the end of a stream, split by the
true count of the cells it comes from.

    python bench/tabular_relwe_anatomy.py --construction randomized --batch 200 \
        --epsilon 2 --seed 0 --out results/tabular_relwe_anatomy.json

Runs the proposed method with the library's defaults over the whole Adult stream
in-process (as ``tabular_tables.py`` does), samples the last period's release and scores
it against the true cumulative table f_T.  RelWE(W) = (1/|W|) Σ_q |q(f_T) − q(g_T)| / q(f_T)
over the cells with q(f_T) > 0; AvgRelWE averages it over all two-way workloads.  Each
cell's term, divided by its workload's number of non-empty cells and by |Q|, is added to
the bucket of its true count, so the buckets sum to AvgRelWE.  Also: how many cells of
each bucket the release leaves empty (a relative error of exactly 1), and the workloads
of largest RelWE.  A diagnostic, not a release: it reads the true data throughout.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tabular_tables import load_stream, released_records  # noqa: E402

from continual_synth.mechanisms.marginals import (all_workloads, encode_records,  # noqa: E402
                                                  workload_histograms)
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer  # noqa: E402

BUCKETS = ((1, 1), (2, 5), (6, 20), (21, 100), (101, None))


def anatomy(construction: str, batch: int, epsilon: float, seed: int) -> dict:
    stream, domain, _ = load_stream("adult", construction, batch, seed, None)
    workloads = all_workloads(domain, 2)
    codes = encode_records(stream, domain)
    period_of = stream["period"].to_numpy()
    horizon = int(period_of.max())
    synthesizer = TabularSynthesizer.create(domain=domain, workloads=workloads,
                                            epsilon=epsilon, method="proposed",
                                            fit="ipf", horizon=horizon)
    state, table, synthetic = synthesizer.initial_state(), None, None
    for period in range(1, horizon + 1):
        rows = codes[period_of == period]
        flat = np.concatenate(workload_histograms(rows, domain,
                                                  synthesizer.config.input_workloads))
        state, release, _ = synthesizer.step_period(state, period, flat, seed)
        table, synthetic = released_records(synthesizer, table, release,
                                            sample=period == horizon)
    truth = workload_histograms(codes, domain, workloads)
    fake = workload_histograms(synthetic, domain, workloads)
    n, m = codes.shape[0], synthetic.shape[0]
    share = {bucket: 0.0 for bucket in BUCKETS}
    cells = {bucket: 0 for bucket in BUCKETS}
    empty = {bucket: 0 for bucket in BUCKETS}
    by_workload = []
    for workload, f, g in zip(workloads, truth, fake):
        f, g = np.asarray(f, float), np.asarray(g, float)
        kept = f > 0
        rel = np.abs(f[kept] / n - g[kept] / m) / (f[kept] / n)
        by_workload.append((float(rel.mean()), list(workload)))
        for low, high in BUCKETS:
            inside = (f[kept] >= low) & (f[kept] <= (high or np.inf))
            share[(low, high)] += rel[inside].sum() / kept.sum() / len(workloads)
            cells[(low, high)] += int(inside.sum())
            empty[(low, high)] += int((g[kept][inside] == 0).sum())
    label = {bucket: f"{bucket[0]}-{bucket[1]}" if bucket[1] else f">{bucket[0] - 1}"
             for bucket in BUCKETS}
    return {"dataset": "adult", "construction": construction, "batch": batch,
            "epsilon": epsilon, "seed": seed, "records": n, "released": m,
            "AvgRelWE": float(sum(share.values())),
            "by_true_count": {label[b]: {"AvgRelWE_part": round(share[b], 4),
                                         "cells": cells[b], "released_empty": empty[b]}
                              for b in BUCKETS},
            "worst_workloads": [{"workload": w, "RelWE": round(r, 3)}
                                for r, w in sorted(by_workload, reverse=True)[:5]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--construction", default="randomized",
                        choices=["randomized", "ordered", "stored"])
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    result = anatomy(args.construction, args.batch, args.epsilon, args.seed)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
