"""Where the tabular stream synthesizer's error sits at the end of a stream:
the model's structure, its one-way margins, or the interactions of its measured workloads.

    python bench/tabular_error_anatomy.py --dataset adult --construction randomized \
        --batch 50 --epsilon 2 --seeds 0,1,2 --out results/tabular_error_anatomy.json

Runs the proposed method with the library's defaults over the whole stream in-process
(recording which workloads each period selected) and reads the final model g_T (its
probabilities, before the release is sampled), against the true cumulative table f_T.
Every figure is a workload error WE(W) = (1/|W|) Σ_q |q(f_T) − q(g_T)| on proportions
(Kumar et al. §7.3), averaged over the workloads named:

* ``model``: AvgWE of g_T over all two-way workloads; ``floor``: of a same-size sample of
  f_T (``workload_error.sampling_floor``).
* ``structure_oracle``: the final model's structure (the workloads its junction tree was
  fitted to) fitted by the same IPF to the *true* marginals of those workloads — what the
  structure alone would allow.  ``independence_oracle``: the true one-way margins only.
* ``one_way``: the mean one-way WE of g_T's margins, and ``one_way_direct`` the same for
  the noise-free margins of the records of the periods that measured the attribute (what
  the data a measurement saw could give without noise).
* Over the workloads measured at least once: ``measured_model`` (g_T), ``direct`` (the
  noise-free histogram of the records of the periods that selected the workload),
  ``direct_raked_true`` / ``direct_raked_model`` (that histogram raked to the true /
  g_T's one-way margins), ``counter_raked_model`` (the workload's noisy counter sum raked
  to g_T's margins).

Read: if ``structure_oracle`` is far below ``model`` the structure does not limit; if
``direct_raked_true`` is close to ``model`` the records each workload was measured on do
(coverage); the gap from ``direct_raked_model`` to ``counter_raked_model`` is the
measurement noise's.  A diagnostic, not a release: it reads the true data throughout.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from continual_synth.mechanisms.fitting import Measurement, rake_pair  # noqa: E402
from continual_synth.mechanisms.marginals import (all_workloads, encode_records,  # noqa: E402
                                                  workload_histograms)
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer  # noqa: E402
from continual_synth.mechanisms.workload_error import (sampling_floor,  # noqa: E402
                                                      workload_errors)
from tabular_tables import load_stream  # noqa: E402  (bench/tabular_tables.py)


def avg_we(estimates, truths) -> float:
    """The mean WE on proportions (``workload_error.workload_errors``) of ``estimates``
    against ``truths``, workload by workload."""
    return float(np.mean(workload_errors([np.ravel(t) for t in truths],
                                         [np.ravel(e) for e in estimates])["WE"]))


def raked(table, shape, rows, cols) -> np.ndarray:
    """``table`` (a two-way histogram, flattened) raked to the one-way margins ``rows``,
    ``cols`` (I-projection, :func:`fitting.rake_pair`)."""
    p = np.clip(np.asarray(table, dtype=float), 0, None).reshape(shape)
    p = p / p.sum() + 1e-9
    return np.asarray(rake_pair(p, rows / rows.sum(), cols / cols.sum())).ravel()


def anatomy(dataset, construction, batch, epsilon, seed, periods=None):
    stream, domain, _ = load_stream(dataset, construction, batch, seed, periods)
    workloads = all_workloads(domain, 2)
    codes = encode_records(stream, domain)
    period_of = stream["period"].to_numpy()
    horizon = int(period_of.max())
    synthesizer = TabularSynthesizer.create(domain=domain, workloads=workloads,
                                            epsilon=epsilon, horizon=horizon)
    state, selected = synthesizer.initial_state(), []
    start = time.perf_counter()
    for period in range(1, horizon + 1):
        rows = codes[period_of == period]
        flat = np.concatenate(workload_histograms(rows, domain, synthesizer.input_workloads))
        state, _, _ = synthesizer.step_period(state, period, flat, seed)
        selected.append(set(state.last_selected))
    seconds = time.perf_counter() - start
    g, total = state.model, float(len(codes))
    truth = workload_histograms(codes, domain, workloads)
    fitter = synthesizer.config.fitter()

    def avg(model, which=range(len(workloads))):
        return avg_we(model.probabilities_of([workloads[i] for i in which]),
                      [truth[i] for i in which])

    structure = fitter.structure(g)
    exact = [Measurement(w, truth[workloads.index(w)].ravel().astype(float))
             for w in structure]
    one_true = [np.bincount(codes[:, k], minlength=n).astype(float)
                for k, n in enumerate(domain.sizes)]
    independent = [Measurement((a,), one_true[k]) for k, a in enumerate(domain.names)]
    one_model = [np.asarray(g.probabilities((a,))).ravel() for a in domain.names]
    positions = [domain.index(w) for w in workloads]
    floor = sampling_floor(codes, len(codes), domain.sizes, positions,
                           np.random.default_rng([seed, 7]), truth=truth)["AvgWE"]

    def records_of(measured):
        periods_of = [t + 1 for t, chosen in enumerate(selected) if measured(chosen)]
        return codes[np.isin(period_of, periods_of)]

    one_direct = [np.bincount(records_of(lambda c: any(a in workloads[j] for j in c))[:, k],
                              minlength=domain.sizes[k]) for k, a in enumerate(domain.names)]
    measured = [i for i in range(len(workloads)) if state.selection_counts[i] > 0]
    parts = {"direct": [], "direct_raked_true": [], "direct_raked_model": [],
             "counter_raked_model": []}
    for i in measured:
        a, b = positions[i]
        shape = (domain.sizes[a], domain.sizes[b])
        direct = workload_histograms(records_of(lambda c: i in c), domain, [workloads[i]])[0]
        counter = np.asarray(state.counter_values[i], dtype=float)
        parts["direct"].append(direct)
        parts["direct_raked_true"].append(raked(direct, shape, one_true[a], one_true[b]))
        parts["direct_raked_model"].append(raked(direct, shape, one_model[a], one_model[b]))
        parts["counter_raked_model"].append(raked(counter, shape, one_model[a], one_model[b]))
    measured_truth = [truth[i] for i in measured]
    return {"dataset": dataset, "construction": construction, "batch": batch,
            "epsilon": epsilon, "seed": seed, "periods": horizon, "run_seconds": seconds,
            "model": avg(g), "floor": floor,
            "structure_workloads": len(structure),
            "structure_oracle": avg(fitter.fit(exact, total, warm_start=fitter.start(total))),
            "independence_oracle": avg(fitter.fit(independent, total,
                                                  warm_start=fitter.start(total))),
            "one_way": avg_we(one_model, one_true),
            "one_way_direct": avg_we(one_direct, one_true),
            "measured_workloads": len(measured),
            "measured_model": avg(g, measured),
            **{k: avg_we(v, measured_truth) for k, v in parts.items()}}


FIELDS = ("model", "floor", "structure_oracle", "independence_oracle", "one_way",
          "one_way_direct", "measured_model", "direct", "direct_raked_true",
          "direct_raked_model", "counter_raked_model")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="adult", choices=("adult", "cces2016"))
    parser.add_argument("--construction", default="randomized")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--periods", type=int, default=None, help="default: the whole stream")
    parser.add_argument("--out", default=None, help="JSON file for the rows")
    args = parser.parse_args()
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        row = anatomy(args.dataset, args.construction, args.batch, args.epsilon, seed,
                      args.periods)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("| " + " | ".join(FIELDS) + " |")
    print("|" + "---|" * len(FIELDS))
    print("| " + " | ".join(f"{np.mean([r[f] for r in rows]):.5f}" for f in FIELDS) + " |")
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"args": vars(args), "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
