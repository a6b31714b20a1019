"""Which workloads the tabular synthesizer's final model gets wrong, and why.

Folds the proposed method (the library's defaults, or ``--selections`` /
``--option key=value``) over a Kumar et al. §7.1 stream of Adult or CCES 2016 without
noise to speak of (``--epsilon``, default 1000) and, at the last period, prints for every
two-way workload the total-variation distance to the whole stream of

* the fitted model's marginal (what the release is sampled from),
* the public estimate C_i + R_i of its cumulative histogram (the counter's noisy value
  plus the increment model's remainders, normalised; post-processing of the measurements),

with how often it was selected, whether a clique of the model holds it, and whether it
could still be selected under the model's size limit.  Used to find why the sorted Adult
stream stays far above the sampling floor at k = 12 (bench/results/tabular_selections.md:
the model is full and the leading sort key's pairs can no longer enter).

    python bench/tabular_model_coverage.py --dataset adult --construction ordered --batch 200
    python bench/tabular_model_coverage.py --construction ordered --selections 12 \\
        --option model_growth=fixed
"""
from __future__ import annotations

import argparse

import numpy as np

from continual_synth.mechanisms.marginals import all_workloads, encode_records, workload_histograms
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
from tabular_floor import parse_options  # bench/tabular_floor.py
from tabular_tables import load_stream    # bench/tabular_tables.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="adult", choices=("adult", "cces2016"))
    parser.add_argument("--construction", default="ordered")
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--epsilon", type=float, default=1000.0)
    parser.add_argument("--selections", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0, help="stream and sampler seed")
    parser.add_argument("--option", action="append", help="key=value for the synthesizer")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()

    stream, domain, _ = load_stream(args.dataset, args.construction, args.batch, args.seed, None)
    workloads = all_workloads(domain, 2)
    codes = encode_records(stream, domain)
    period_of = stream["period"].to_numpy()
    horizon = int(period_of.max())
    synthesizer = TabularSynthesizer.create(
        domain=domain, workloads=workloads, epsilon=args.epsilon, selections=args.selections,
        fit="ipf", horizon=horizon, **parse_options(args.option))
    config = synthesizer.config
    state, truth = synthesizer.initial_state(), None
    for t in range(1, horizon + 1):
        hists = workload_histograms(codes[period_of == t], domain, config.input_workloads)
        truth = (hists[:len(workloads)] if truth is None
                 else [a + b for a, b in zip(truth, hists)])
        state, _, _ = synthesizer.step_period(state, t, np.concatenate(hists), args.seed)

    model, n = state.model, float(truth[0].sum())
    fitter = config.fitter()
    structure = fitter.structure(model)
    cliques = getattr(model, "cliques", [])
    rows = []
    for i, (w, p) in enumerate(zip(workloads, model.probabilities_of(workloads))):
        estimate = np.maximum(state.counter_values[i] + state.remainders[i], 0.0)
        estimate = estimate / estimate.sum() if estimate.sum() > 0 else estimate
        rows.append({"workload": w, "model_tv": 0.5 * float(np.abs(p - truth[i] / n).sum()),
                     "estimate_tv": 0.5 * float(np.abs(estimate - truth[i] / n).sum()),
                     "selected": int(state.selection_counts[i]),
                     "in_model": any(set(w) <= set(c) for c in cliques),
                     "selectable": fitter.fits(structure, w, config.model_limit(horizon))})
    rows.sort(key=lambda r: -r["model_tv"])
    inside = [r["model_tv"] for r in rows if r["in_model"]]
    outside = [r["model_tv"] for r in rows if not r["in_model"]]
    print(f"{args.dataset} {args.construction}, batches of {args.batch}, {horizon} periods, "
          f"epsilon {args.epsilon:g}, k = {config.selections}, model_growth "
          f"{config.model_growth}")
    print(f"model: {sum(t.size for t in getattr(model, 'marginals', {}).values()):,} of "
          f"{config.model_cells:,} cells, {len(structure)} of {len(workloads)} workloads")
    print(f"mean TV: model {np.mean([r['model_tv'] for r in rows]):.4f}, public estimate "
          f"{np.mean([r['estimate_tv'] for r in rows]):.4f}; inside the model "
          f"{np.mean(inside) if inside else float('nan'):.4f} ({len(inside)}), outside "
          f"{np.mean(outside) if outside else float('nan'):.4f} ({len(outside)})")
    print("| workload | model TV | public estimate TV | selected | in model | selectable |")
    print("|---|---|---|---|---|---|")
    for r in rows[:args.top]:
        print(f"| {','.join(r['workload'])} | {r['model_tv']:.4f} | {r['estimate_tv']:.4f} | "
              f"{r['selected']} | {r['in_model']} | {r['selectable']} |")


if __name__ == "__main__":
    main()
