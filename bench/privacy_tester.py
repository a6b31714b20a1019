"""Empirical privacy audit of every mechanism family, benchmark size.

For every case of ``audit_cases("bench")`` (window histogram with k = 2 over 2 letters and
k = 3 over 3 letters, every counter kind × unit × relation over T = 16, tabular selection
over 64 candidates and measurement over 16 cells, PrivHP in four configurations — two
per relation): draw ``--releases``
seeded releases on each neighbouring input, run the Clopper–Pearson threshold test
(mechanisms/privacy_tester.py) at confidence 1 − α, once with the correct sampler and
with two planted bugs: noise scale halved (``ScaledNoiseSampler(·, 0.5)``, 4× the loss) and
noise variance halved (``ScaledNoiseSampler(·, √½)``: what ignoring the replace relation's
√2 does, 2× the loss).  The
seeded simulation sampler draws all of these; the families whose noise is a plain
discrete Gaussian / Laplace vector (window k = 2, tabular measurement, the smaller PrivHP
configurations) are also run with OpenDP's exact sampler, the one that makes publishable
releases, at ``--exact-releases`` releases (not seeded: those rows vary between runs).

A correct mechanism must give ε_lb ≤ claimed ε; the bugged one should give ε_lb >
claimed ε ("caught").  zCDP cases claim ρ and are compared at ε(ρ, δ) (CKS 2020
conversion, ``accounting.zcdp_to_approx_dp``; the exact Gaussian curve for the
continuous-Gaussian counters, ``AuditCase.gaussian_mechanism``).  Writes
``bench/results/privacy_tester.{json,md}``.

    python bench/privacy_tester.py [--releases 100000] [--alpha 0.05] [--seed 2026]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from continual_synth.mechanisms.privacy_tester import ScaledNoiseSampler, audit_cases, run_case
from continual_synth.mechanisms.samplers import OpenDPSampler, SeededSampler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import write_result  # noqa: E402  (bench/harness.py)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--releases", type=int, default=100_000,
                        help="releases per neighbouring input and case (default 100000)")
    parser.add_argument("--alpha", type=float, default=0.05,
                        help="1 - confidence of the Clopper-Pearson bound (default 0.05)")
    parser.add_argument("--rho", type=float, default=0.5, help="zCDP claim (default 0.5)")
    parser.add_argument("--delta", type=float, default=1e-3,
                        help="delta at which zCDP claims are compared (default 1e-3)")
    parser.add_argument("--epsilon", type=float, default=1.0,
                        help="pure-DP claim (default 1)")
    parser.add_argument("--exact-releases", type=int, default=20_000,
                        help="releases with OpenDP's exact sampler (default 20000; 0: skip)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    if args.releases < 1000 or 0 < args.exact_releases < 1000:
        parser.error("--releases and --exact-releases (unless 0) must be at least 1000")
    if not 0 < args.alpha < 1:
        parser.error("--alpha must lie in (0, 1)")

    rows = []
    started = time.time()
    cases = audit_cases("bench", rho=args.rho, delta=args.delta, epsilon=args.epsilon)
    runs = [(index, case, "seeded", args.releases) for index, case in enumerate(cases)]
    if args.exact_releases:
        runs += [(index, case, "opendp", args.exact_releases)
                 for index, case in enumerate(cases)
                 if case.family.startswith(("window k=2", "tabular measurement",
                                            "PrivHP k=4", "PrivHP k=2"))]
    for index, case, kind, releases in runs:
        tick = time.time()
        samplers = ((OpenDPSampler(), OpenDPSampler(), OpenDPSampler()) if kind == "opendp"
                    else tuple(SeededSampler([args.seed, index, j]) for j in range(3)))
        correct = run_case(case, samplers[0], releases, args.alpha)
        bugged = run_case(case, ScaledNoiseSampler(samplers[1], 0.5), releases, args.alpha)
        doubled = run_case(case, ScaledNoiseSampler(samplers[2], 2 ** -0.5), releases,
                           args.alpha)
        row = {"family": case.family, "relation": case.relation, "sampler": kind,
               "claimed_rho": case.rho, "delta": case.delta,
               "claimed_epsilon": case.claimed_epsilon, "releases": releases,
               "correct": correct.to_dict(), "bugged": bugged.to_dict(),
               "doubled": doubled.to_dict(),
               "seconds": round(time.time() - tick, 2)}
        rows.append(row)
        print(f"{case.family:42s} {case.relation:11s} {kind:6s} "
              f"claim {case.claimed_epsilon:5.2f}  "
              f"lb {correct.epsilon_lower_bound:5.2f} ({correct.test.statistic})  "
              f"bug lb {bugged.epsilon_lower_bound:5.2f} ({bugged.test.statistic})  "
              f"{'CAUGHT' if bugged.refuted else 'missed'}  "
              f"doubled lb {doubled.epsilon_lower_bound:5.2f} "
              f"{'CAUGHT' if doubled.refuted else 'missed'}"
              f"{'  CLAIM REFUTED' if correct.refuted else ''}  {row['seconds']}s", flush=True)

    meta = {"releases": args.releases, "exact_releases": args.exact_releases,
            "alpha": args.alpha, "rho": args.rho, "delta": args.delta,
            "epsilon": args.epsilon, "seed": args.seed,
            "seconds": round(time.time() - started, 1)}
    caught = sum(r["bugged"]["refuted"] for r in rows)
    caught_doubled = sum(r["doubled"]["refuted"] for r in rows)
    refuted = sum(r["correct"]["refuted"] for r in rows)
    lines = [
        f"Empirical privacy audit: {args.releases} seeded releases per neighbouring input "
        f"({args.exact_releases} for the rows with OpenDP's exact sampler), "
        f"Clopper-Pearson lower bound on epsilon at confidence {1 - args.alpha:g} "
        f"(statistic fitted on the first quarter, event chosen on the second, bound from the "
        f"second half). "
        f"zCDP claims rho = {args.rho:g} compared at delta = {args.delta:g}; pure-DP claims "
        f"epsilon = {args.epsilon:g} (continuous-Gaussian counters, sqrt-factorisation and "
        f"blt: the exact Gaussian curve, which is tighter).  Planted bugs: noise scale "
        f"halved (4x the privacy loss) and noise variance halved (2x: the replace "
        f"relation's sqrt 2 ignored).",
        "",
        f"Correct mechanisms refuted: {refuted} of {len(rows)}.  Planted bug caught: "
        f"{caught} of {len(rows)}"
        + (" (missed: " + "; ".join(f"{r['family']}, {r['relation']}, {r['sampler']}"
                                    for r in rows if not r["bugged"]["refuted"]) + ")"
           if caught < len(rows) else "")
        + f".  Variance halved caught: {caught_doubled} of {len(rows)}.  Total time "
        f"{meta['seconds']} s.",
        "",
        "A miss means that this test, at this number of releases, found no event whose "
        "bound beats the claim; it is not evidence that the bug is harmless.  Known causes: "
        "Honaker's counter releases best linear estimates, a lossy post-processing of its "
        "noisy nodes, so under replace the doubled loss is hard to observe in its outputs; "
        "a long binary tree under replace spreads the loss over 2(floor(log2 T) + 1) nodes; "
        "PrivHP under replace leaves the root count unchanged, so the root's share of "
        "epsilon is never lost and the default split spreads the rest thinly over many "
        "counters (the catalogue's second PrivHP replace case gives the root a 10% share "
        "and is caught).  A variance-halved (doubled rho) bug in a discrete-Gaussian family "
        "sits inside the slack of the zCDP conversion (rho = 0.5, delta = 1e-3: the exact "
        "Gaussian curve gives 3.14, the conversion 3.54, the doubled rho 4.85), so this "
        "test catches it only where its bound is tight; the unit tests "
        "test_counters.py::test_node_noise_matches_sensitivity and "
        "test_window_mechanism.py::test_noise_calibration_and_per_update_budget check that "
        "calibration exactly.",
        "",
        "| family | relation | sampler | releases | claimed rho | claimed eps | "
        "eps_lb (correct) | statistic | eps_lb (noise halved) | statistic | bug caught | "
        "eps_lb (variance halved) | caught |",
        "|---|---|---|---:|---:|---:|---:|---|---:|---|---|---:|---|",
    ]
    for r in rows:
        c, b, d = r["correct"], r["bugged"], r["doubled"]
        lines.append(
            f"| {r['family']} | {r['relation']} | {r['sampler']} | {r['releases']} | "
            f"{'' if r['claimed_rho'] is None else format(r['claimed_rho'], 'g')} | "
            f"{r['claimed_epsilon']:.3f} | {c['epsilon_lower_bound']:.3f} | {c['statistic']} | "
            f"{b['epsilon_lower_bound']:.3f} | {b['statistic']} | "
            f"{'yes' if b['refuted'] else '**no**'} | {d['epsilon_lower_bound']:.3f} | "
            f"{'yes' if d['refuted'] else 'no'} |")
    write_result(os.path.join(args.out, "privacy_tester"), {"meta": meta, "results": rows},
                 "\n".join(lines), encoding="utf-8")
    print("\n".join(lines[:3]))


if __name__ == "__main__":
    main()
