"""Do a tabular release's error bounds hold, how tight are they, and how many workloads
get one?  (``accuracy-tTTTT.json``; :mod:`continual_synth.mechanisms.tabular_accuracy`.)

Two settings on the shipped example table (CCES 2016, the randomized construction):

* **bounded**: the attributes ``--attributes`` (default four of them), all their 2-way
  workloads, each measured in every period (``--selections`` = their number,
  ``selection_schedule="fixed"``, no wide measurements), so every workload has a bound;
  for each ε and seed, every period's bounds against the true error of the released
  rows: the share that held, the median bound, the median bound / true error, and the
  median bound at the last period;
* **defaults**: all 14 attributes and all 2-way workloads with the library's defaults,
  the share of workloads with a bound at the last period (Algorithm 3 measures k of them
  a period, so few are measured in every period).

    python bench/accuracy_coverage.py
    python bench/accuracy_coverage.py --epsilons 1 --seeds 0-1 --periods 10
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import RESULTS, Timer, command_line, parse_seeds, write_result  # noqa: E402

from continual_synth.mechanisms.marginals import (Domain, all_workloads,  # noqa: E402
                                                  encode_records, workload_histograms)
from continual_synth.mechanisms.tabular_accuracy import CONFIDENCE  # noqa: E402
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer  # noqa: E402
from continual_synth.pipelines.examples.example_tables import (  # noqa: E402
    load_table, make_stream, table_domain)

ATTRIBUTES = "region,female,collegeed,racef"


def stream_of(attributes, batch, periods, seed):
    full = table_domain()
    names = list(attributes) if attributes else list(full)
    domain = Domain({a: full[a] for a in names})
    stream = make_stream(load_table(), "randomized", batch, seed=seed, periods=periods,
                         domain=full).select([*names, "period"])
    return domain, encode_records(stream, domain), stream["period"].to_numpy()


def run(domain, codes, periods, epsilon, seed, horizon, bounded):
    """Per period and bounded workload (true error, bound); and the share of workloads
    with a bound at the last period."""
    workloads = all_workloads(domain, 2)
    options = (dict(selections=len(workloads), selection_schedule="fixed", wide_cells=0)
               if bounded else {})
    synthesizer = TabularSynthesizer.create(domain=domain, workloads=workloads,
                                            epsilon=epsilon, horizon=horizon, **options)
    state = synthesizer.initial_state()
    pairs, share = [], 0.0
    for t in range(1, horizon + 1):
        flat = np.concatenate(workload_histograms(codes[periods == t], domain,
                                                  synthesizer.input_workloads))
        state, release, _ = synthesizer.step_period(state, t, flat, seed)
        entries = release.accuracy["workloads"]
        share = np.mean([e["measured"] for e in entries])
        if not bounded:
            continue
        rows = release.model.sample(release.size, np.random.default_rng([seed, t]))
        truth = workload_histograms(codes[periods <= t], domain, workloads)
        fake = workload_histograms(rows, domain, workloads)
        for i, entry in enumerate(entries):
            if entry["measured"] and fake[i].sum() > 0:
                error = np.abs(fake[i] / fake[i].sum() - truth[i] / truth[i].sum()).max()
                pairs.append((t, error, entry["max_abs_error"]))
    return pairs, float(share)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attributes", default=ATTRIBUTES)
    parser.add_argument("--epsilons", default="0.5,1,2")
    parser.add_argument("--seeds", default="0-4")
    parser.add_argument("--batches", default="100,1000")
    parser.add_argument("--periods", type=int, default=20)
    parser.add_argument("--default-batch", type=int, default=50)
    parser.add_argument("--default-periods", type=int, default=100)
    parser.add_argument("--out", default=os.path.join(RESULTS, "accuracy_coverage"))
    args = parser.parse_args()
    epsilons = [float(e) for e in args.epsilons.split(",")]
    seeds = parse_seeds(args.seeds)
    rows, defaults = [], []
    with Timer() as timer:
        for epsilon, batch in [(e, int(b)) for b in args.batches.split(",")
                               for e in epsilons]:
            pairs = []
            for seed in seeds:
                domain, codes, periods = stream_of(args.attributes.split(","), batch,
                                                   args.periods, seed)
                pairs += run(domain, codes, periods, epsilon, seed, args.periods, True)[0]
            t, error, bound = (np.array(x) for x in zip(*pairs))
            row = {"epsilon": epsilon, "batch": batch, "bounds_checked": int(len(bound)),
                   "share_held": float(np.mean(error <= bound)),
                   "median_bound": float(np.median(bound)),
                   "median_bound_last_period": float(np.median(bound[t == args.periods])),
                   "median_error_last_period": float(np.median(error[t == args.periods])),
                   "median_bound_to_error": float(np.median(bound / np.maximum(error,
                                                                               1e-12)))}
            rows.append(row)
            print(row, flush=True)
        for epsilon in epsilons:
            domain, codes, periods = stream_of(None, args.default_batch, args.default_periods,
                                               seeds[0])
            share = run(domain, codes, periods, epsilon, seeds[0], args.default_periods,
                        False)[1]
            defaults.append({"epsilon": epsilon, "share_bounded_last_period": share})
            print(defaults[-1], flush=True)
    result = {"command": command_line(), "confidence": CONFIDENCE, "seeds": seeds,
              "attributes": args.attributes, "batches": args.batches, "periods": args.periods,
              "bounded": rows, "defaults": defaults,
              "default_batch": args.default_batch, "default_periods": args.default_periods,
              "seconds": timer.wall}
    lines = [
        "# Error bounds of tabular releases: coverage and tightness", "",
        f"`{command_line()}` ({timer.wall:.0f} s). Confidence {CONFIDENCE} per workload.", "",
        f"**Bounded**: CCES attributes {args.attributes}, all their 2-way workloads measured "
        f"in every period, batches of B records, {args.periods} periods, seeds "
        f"{args.seeds}; every period's bound against the true error of the released rows.",
        "",
        "| B | ε | bounds checked | share held | median bound | median bound, last period "
        "| median true error, last period | median bound / true error |",
        "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['batch']} | {r['epsilon']:g} | {r['bounds_checked']} | "
              f"{r['share_held']:.3f} | "
              f"{r['median_bound']:.3f} | {r['median_bound_last_period']:.3f} | "
              f"{r['median_error_last_period']:.4f} | {r['median_bound_to_error']:.1f} |"
              for r in rows]
    lines += ["", f"**Defaults**: all 14 attributes, all 2-way workloads, the library's "
              f"defaults, batches of {args.default_batch}, {args.default_periods} periods, "
              f"seed {seeds[0]}: the share of workloads with a bound at the last period.", "",
              "| ε | share bounded |", "|---|---|"]
    lines += [f"| {d['epsilon']:g} | {d['share_bounded_last_period']:.3f} |" for d in defaults]
    write_result(args.out, result, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
