"""Expected error before a panel release is run: the bounds its manifest will carry.

Both panel synthesizers' error bounds depend only on public parameters, never on the data:

* Algorithm 1 (Bun et al. 2024, Theorem 3.2): with probability >= 1 - beta every released
  window count is within ``error_bound`` of the true count plus n_pad, the padding people
  per window bin (n_pad = the bound, rounded up);
* Algorithm 2 (Lemma 4.2 with the counters' exact variances, union bound): every released
  count of people with at least b ones by period t is within ``error_bound`` of the truth.

The bounds are counts of people, the same whatever the panel's size n; as a share of n they
shrink like 1/n.  ``continual-synth plan window`` and ``plan cumulative`` print them for
one setting (:mod:`continual_synth.mechanisms.planning`, which this script calls); this
script tabulates them for a grid of budgets rho, horizons and (window) lengths, with the
share of n for a few panel sizes, so a user can choose rho for the n they have.  It reads no data: ``python bench/expected_error.py``.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import RESULTS, command_line, write_result  # noqa: E402

from continual_synth.mechanisms.cumulative import CumulativeConfig  # noqa: E402
from continual_synth.mechanisms.planning import cumulative_plan, window_plan  # noqa: E402
from continual_synth.mechanisms.window import WindowConfig  # noqa: E402

RHOS = (0.005, 0.05, 0.5, 2.0)
SIZES = (1_000, 10_000, 100_000)


def window_rows(horizon: int, windows, relation: str):
    """``plan window``'s figures (:func:`~continual_synth.mechanisms.planning.window_plan`)
    for each window length and ρ."""
    rows = []
    for window in windows:
        for rho in RHOS:
            config = WindowConfig(window=window, horizon=horizon, rho=rho, neighbor=relation)
            plans = {n: window_plan(config, n) for n in SIZES}
            plan = plans[SIZES[0]]
            rows.append({"window": window, "horizon": horizon, "rho": rho,
                         "neighbor": relation, "error_bound": plan["error_bound"],
                         "n_pad": plan["n_pad"], "padding_people": plan["padding_people"],
                         "share_of_n": {n: p["error_bound_share_of_n"]
                                        for n, p in plans.items()}})
    return rows


def cumulative_rows(horizon: int, counters, relation: str):
    """``plan cumulative``'s figures (:func:`~continual_synth.mechanisms.planning.
    cumulative_plan`) for each counter and ρ."""
    rows = []
    for counter in counters:
        for rho in RHOS:
            config = CumulativeConfig(horizon=horizon, rho=rho, counter=counter,
                                      neighbor=relation)
            plans = {n: cumulative_plan(config, n) for n in SIZES}
            plan = plans[SIZES[0]]
            rows.append({"counter": counter, "horizon": horizon, "rho": rho,
                         "neighbor": relation, "error_bound": plan["error_bound"],
                         "budget_split": plan["budget_split"],
                         "share_of_n": {n: p["error_bound_share_of_n"]
                                        for n, p in plans.items()}})
    return rows


def markdown(window, cumulative, argv: str) -> str:
    sizes = " | ".join(f"n = {n:,}".replace(",", " ") for n in SIZES)
    lines = ["# Expected error before a panel release", "",
             f"`{argv}`: the bounds a manifest states (probability >= 1 - beta, beta = 0.05),",
             "from the public parameters alone; the share of n is the bound over the panel's",
             "number of people.", "",
             "## Window synthesizer (Algorithm 1, Theorem 3.2)", "",
             f"| k | T | rho | error bound (people) | padding people | {sizes} |",
             "|---|---|---|---|---|" + "---|" * len(SIZES)]
    for row in window:
        shares = " | ".join(f"{row['share_of_n'][n]:.2%}" for n in SIZES)
        lines.append(f"| {row['window']} | {row['horizon']} | {row['rho']:g} | "
                     f"{row['error_bound']:.1f} | {row['padding_people']} | {shares} |")
    lines += ["", "## Cumulative synthesizer (Algorithm 2, Lemma 4.2)", "",
              f"| counter | T | rho | error bound (people) | split | {sizes} |",
              "|---|---|---|---|---|" + "---|" * len(SIZES)]
    for row in cumulative:
        shares = " | ".join(f"{row['share_of_n'][n]:.2%}" for n in SIZES)
        lines.append(f"| {row['counter']} | {row['horizon']} | {row['rho']:g} | "
                     f"{row['error_bound']:.1f} | {row['budget_split']} | {shares} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=12)
    parser.add_argument("--neighbor", choices=["replace", "add-remove"], default="replace")
    parser.add_argument("--out", default=os.path.join(RESULTS, "expected_error"),
                        help="result stem (writes STEM.json and STEM.md)")
    args = parser.parse_args(argv)
    window = window_rows(args.horizon, (2, 3, 4), args.neighbor)
    cumulative = cumulative_rows(args.horizon, ("tree", "blt"), args.neighbor)
    text = markdown(window, cumulative, command_line())
    write_result(args.out, {"window": window, "cumulative": cumulative}, text)
    print(text)


if __name__ == "__main__":
    main()
