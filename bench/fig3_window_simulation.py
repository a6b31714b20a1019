"""Reproduce the simulation of Bun, Gaboardi, Neunhoeffer and Zhang (2024), App. C.1,
Figure 3 (Figure 1 of §5 in the arXiv v1): Algorithm 1 (fixed-time-window synthetic
longitudinal data) on the extreme all-ones panel, repeated over many seeded runs.

Parameters (the paper's): n = 25 000 people, T = 12 periods, every report is 1
(``pipelines.examples.sipp_like.all_ones_panel``), window k = 3, ρ = 0.005-zCDP under the
add-remove neighbouring relation (the paper's calibration: σ² = R/(2ρ) = 1000 with
R = T − k + 1 = 10 noisy histograms), β = 0.05, n_pad = ⌈λ⌉, and 1 000 runs of the
*seeded* (simulation, not-for-publication) sampler with seeds 0..999.

Each run folds the synthesizer's ``step_period`` and ``transforms.synthesize.emission_plan``
(one shard), i.e. Algorithm 1's state machine ``mechanisms.window.step`` with the sampler seeded by [seed, period], over
the true window histograms C^t (``mechanisms.panel.window_histograms``).  After every
period t ≥ k the synthetic window histogram p^t is ``state.counts`` (the emitted records
reproduce it exactly; checked here on the runs that are materialised).

Top panel (window-k queries), per period t = k..T, over runs:

* ``count``: max_s |p^t_s − n_pad − C^t_s| / n — the debiased error in proportion of n
  that Theorem 3.2 bounds by λ/n with probability ≥ 1 − β, λ = ``config.error_bound``;
* ``proportion``: max_s |(p^t_s − n_pad) / (n* − 2^k n_pad) − C^t_s / n| — the debiased
  proportion an analyst would compute (shared/papers/README.md, point 5).

Median and 2.5/97.5 percentiles are printed against λ/n, with the fraction of runs whose
max over all (s, t) exceeds λ (Theorem 3.2 says ≤ β).

Middle and bottom panels (queries of window w = 2 ≤ k and w = 4 > k) need records: the
first ``--record-runs`` runs are materialised exactly as the batch pipeline emits one
shard (``ShardPeople.create/extend`` with ``shard_rng(emission seed, period, 0)``).  Per
period t (end of the w-window) the error is max over the 2^w patterns of
|synthetic count − pad_w − true count| / n, where pad_w is the padding per w-bin:
n_pad·2^(k−w) for w ≤ k (each w-bin is a sum of 2^(k−w) k-bins, so Theorem 3.2 gives
2^(k−w)·λ), and, for w > k, where the release fixes no per-bin padding, the uniform
(maximum-entropy) spread n_pad·2^k / 2^w, the only padding profile whose every k-sub-window
marginal is n_pad.  The paper does not say how it debiased w > k queries.

Run (from the repository root; about 5 s on 2 cores, about 20-35 s with --record-runs 1000)::

    python bench/fig3_window_simulation.py                      # 1000 runs, 100 materialised
    python bench/fig3_window_simulation.py --runs 200 --people 5000 --output-dir /tmp/fig3

Writes ``<output-dir>/fig3_window_error.json`` and ``fig3_window_error.png`` (median with
the 2.5–97.5 % band and the dashed bound, as in the paper's top panel), plus
``fig3_window_error_query_w2.png`` and ``fig3_window_error_query_w4.png`` when records
are materialised.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Dict, List, Optional, Tuple

import matplotlib
import numpy as np

from continual_synth.mechanisms import panel, window
from continual_synth.mechanisms.panel_synthesizers import WindowSynthesizer
from continual_synth.mechanisms.emission import ShardPeople, shard_rng
from continual_synth.pipelines.evaluation.plots import plot_error_over_time
from continual_synth.pipelines.examples.sipp_like import all_ones_panel
from continual_synth.mechanisms.synthesizer import PanelStatistics
from continual_synth.transforms.synthesize import emission_plan

PERCENTILES = (2.5, 50.0, 97.5)
QUERY_WINDOWS = (2, 4)
FLAT_TOLERANCE = 0.10  # "flat": fitted drift of the median over t = k..T below 10 % of its mean


def true_matrix(num_people: int, horizon: int, alphabet) -> np.ndarray:
    """The all-ones panel as (people × periods) alphabet indices, through the pipeline's
    own pivot (long table → matrix)."""
    table = all_ones_panel(num_people, horizon)
    codes = panel.encode_values(table.column("value").to_numpy(), alphabet)
    _, matrix = panel.pivot(table.column("id").to_numpy(), table.column("period").to_numpy(),
                            codes, 1, horizon)
    return matrix


def run_once(seed: int, config: window.WindowConfig, histograms: np.ndarray,
             materialise: bool) -> Tuple[np.ndarray, int, int, Optional[np.ndarray]]:
    """One run of Algorithm 1 with the seeded sampler, one shard.

    Returns ``(counts, n*, clamp events, records)``: counts[t − k] = p^t, records the
    n* × T matrix of synthetic alphabet indices (None unless ``materialise``).
    """
    k = config.window
    model = WindowSynthesizer(config)
    state = model.initial_state()
    counts = np.empty((config.num_updates, config.num_bins), dtype=np.int64)
    no_stats = np.zeros(config.num_bins, dtype=np.int64)
    code_counts, people, columns = None, None, []
    for period in range(1, config.horizon + 1):
        stats = histograms[period - k] if period >= k else no_stats
        stepped = model.step_period(state, period, PanelStatistics(stats, int(histograms[0].sum())),
                                seed)
        state = stepped.state
        plan, code_counts, emission_seed = emission_plan(model, stepped, 1, code_counts)
        if plan is None:
            continue
        counts[period - k] = state.counts
        if materialise:  # as transforms.emit.emit_shard_period for shard 0
            rng = shard_rng(emission_seed, period, 0)
            if "initial" in plan:
                people, values = ShardPeople.create(0, plan["initial"][0], model.codes, rng)
                columns.extend(values.T)
            else:
                columns.append(people.extend(plan["extension"][0], rng))
    records = np.stack(columns, axis=1) if materialise else None
    return counts, state.num_synthetic, state.clamp_events, records


def run_chunk(seeds: List[int], config: window.WindowConfig, histograms: np.ndarray,
              record_runs: int, truth_queries: Dict[int, np.ndarray]) -> Dict:
    """Runs for ``seeds``; seeds < ``record_runs`` are materialised and their w-window
    query histograms computed (records are dropped right after, to keep memory small)."""
    counts, synthetic, clamps, queries = [], [], [], {w: [] for w in truth_queries}
    record_seeds, mismatches = [], 0
    k, width = config.window, config.alphabet_size
    for seed in seeds:
        materialise = seed < record_runs
        run_counts, num_synthetic, clamp_events, records = run_once(seed, config, histograms,
                                                                    materialise)
        counts.append(run_counts)
        synthetic.append(num_synthetic)
        clamps.append(clamp_events)
        if materialise:
            record_seeds.append(seed)
            emitted = panel.window_histograms(records, width, k)
            mismatches += int(not np.array_equal(emitted, run_counts))
            for w in truth_queries:
                queries[w].append(panel.window_histograms(records, width, w))
    return {"counts": counts, "synthetic": synthetic, "clamps": clamps, "queries": queries,
            "record_seeds": record_seeds, "mismatches": mismatches}


def band(values: np.ndarray) -> Dict[str, List[float]]:
    """Percentiles over runs (axis 0): p2.5, median, p97.5 per period."""
    lo, median, hi = np.percentile(values, PERCENTILES, axis=0)
    return {"median": median.tolist(), "p2.5": lo.tolist(), "p97.5": hi.tolist()}


def drift(periods: np.ndarray, median: np.ndarray) -> float:
    """Least-squares change of the median from the first to the last period, relative
    to its mean (0 = perfectly flat)."""
    slope = np.polyfit(periods, median, 1)[0]
    return float(slope * (periods[-1] - periods[0]) / median.mean())


def print_table(title: str, periods, stats: Dict, bound: Optional[float],
                bound_name: str = "bound") -> None:
    print(f"\n{title}")
    print(f"{'period':>6} {'median':>10} {'p2.5':>10} {'p97.5':>10} {bound_name:>10}")
    for i, t in enumerate(periods):
        shown = f"{bound:10.5f}" if bound is not None else f"{'—':>10}"
        print(f"{t:>6} {stats['median'][i]:10.5f} {stats['p2.5'][i]:10.5f} "
              f"{stats['p97.5'][i]:10.5f} {shown}")


def main(argv=None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000, help="runs, seeds 0..runs−1 (1000)")
    parser.add_argument("--people", type=int, default=25_000, help="n (25 000)")
    parser.add_argument("--horizon", type=int, default=12, help="T (12)")
    parser.add_argument("--window", type=int, default=3, help="k (3)")
    parser.add_argument("--rho", type=float, default=0.005, help="total zCDP ρ (0.005)")
    parser.add_argument("--beta", type=float, default=0.05, help="β of Theorem 3.2 (0.05)")
    parser.add_argument("--record-runs", type=int, default=100,
                        help="materialise synthetic records for the first N runs, for the "
                             "window-2 and window-4 query panels (100; 0 = skip)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes (2)")
    parser.add_argument("--output-dir", default=os.path.join("bench", "results"))
    args = parser.parse_args(argv)
    if args.runs < 1 or args.people < 1:
        parser.error("--runs and --people must be positive")

    started = time.perf_counter()
    config = window.WindowConfig(window=args.window, horizon=args.horizon, rho=args.rho,
                                 neighbor="add-remove", beta=args.beta)
    k, width, n, n_pad = config.window, config.alphabet_size, args.people, config.n_pad
    lam = config.error_bound
    matrix = true_matrix(n, config.horizon, config.alphabet)
    histograms = panel.window_histograms(matrix, width, k)
    query_windows = [w for w in QUERY_WINDOWS if w <= config.horizon]
    record_runs = min(max(args.record_runs, 0), args.runs)
    truth_queries = {w: panel.window_histograms(matrix, width, w) for w in query_windows} \
        if record_runs else {}

    seeds = list(range(args.runs))
    workers = max(1, min(args.workers, args.runs))
    chunks = [seeds[i::workers] for i in range(workers)]  # interleaved: spreads record runs
    if workers == 1:
        parts = [run_chunk(seeds, config, histograms, record_runs, truth_queries)]
    else:
        with ProcessPoolExecutor(workers) as pool:
            parts = list(pool.map(run_chunk, chunks, [config] * workers,
                                  [histograms] * workers, [record_runs] * workers,
                                  [truth_queries] * workers))
    order = np.argsort(np.concatenate(chunks))
    counts = np.stack([c for part in parts for c in part["counts"]])[order]  # runs × R × bins
    num_synthetic = np.array([s for part in parts for s in part["synthetic"]])[order]
    clamp_events = np.array([c for part in parts for c in part["clamps"]])[order]
    simulate_seconds = time.perf_counter() - started

    # ---- top panel: window-k histogram error, vectorised over runs -------------------
    periods = np.arange(k, config.horizon + 1)
    errors = np.abs(counts - n_pad - histograms[None])                  # runs × R × bins
    count_error = errors.max(axis=2) / n                                # runs × R
    denominator = (num_synthetic - config.num_bins * n_pad).astype(float)
    proportion_error = np.abs((counts - n_pad) / denominator[:, None, None]
                              - histograms[None] / n).max(axis=2)
    run_max = errors.max(axis=(1, 2))
    exceed = float((run_max > lam).mean())
    exceed_proportion = float((proportion_error.max(axis=1) > lam / n).mean())
    top = {"count": band(count_error), "proportion": band(proportion_error)}
    top_drift = drift(periods, np.asarray(top["count"]["median"]))
    bound = lam / n
    median_max = max(top["count"]["median"])
    band_max = max(top["count"]["p97.5"])

    # ---- middle / bottom panels: w-window queries on materialised records -----------
    queries = {}
    if record_runs:
        record_seeds = np.array([s for part in parts for s in part["record_seeds"]])
        record_order = np.argsort(record_seeds)
        record_synthetic = num_synthetic[np.sort(record_seeds)]
        mismatches = sum(part["mismatches"] for part in parts)
        for w in query_windows:
            synthetic_w = np.stack([q for part in parts for q in part["queries"][w]])[record_order]
            truth_w = truth_queries[w]
            pad = n_pad * width ** (k - w) if w <= k else n_pad * width ** k / width ** w
            w_errors = np.abs(synthetic_w - pad - truth_w[None])
            w_count = w_errors.max(axis=2) / n
            w_denominator = (record_synthetic - config.num_bins * n_pad).astype(float)
            w_proportion = np.abs((synthetic_w - pad) / w_denominator[:, None, None]
                                  - truth_w[None] / n).max(axis=2)
            w_periods = np.arange(w, config.horizon + 1)
            guaranteed = w <= k
            w_bound = (width ** (k - w) * lam / n) if guaranteed else None
            queries[f"w{w}"] = {
                "window": w, "periods": w_periods.tolist(), "pad_per_bin": pad,
                "pad_rule": ("n_pad·|A|^(k−w): each w-bin is a sum of |A|^(k−w) k-bins"
                             if guaranteed else
                             "n_pad·|A|^k/|A|^w: uniform (max-entropy) padding; the release "
                             "fixes none for w > k"),
                "bound": w_bound,
                "bound_note": ("Theorem 3.2's event implies |error| ≤ |A|^(k−w)·λ per w-bin"
                               if guaranteed else "no guarantee for queries longer than k"),
                "count": band(w_count), "proportion": band(w_proportion),
                "drift": drift(w_periods, np.asarray(band(w_count)["median"])),
                "fraction_runs_above_lambda_over_n": float((w_count.max(axis=1) > bound).mean()),
                "fraction_runs_above_bound": (float((w_count.max(axis=1) > w_bound).mean())
                                              if guaranteed else None),
            }
        queries = {"runs": int(record_runs), "emitted_window_histograms_mismatch": int(mismatches),
                   **queries}
    seconds = time.perf_counter() - started

    # ---- report ------------------------------------------------------------------
    print(f"Bun et al. (2024) App. C.1 / Figure 3: all-ones panel, n = {n}, T = {config.horizon},"
          f" k = {k}, ρ = {config.rho} (add-remove), σ² = {config.noise_variance:g},"
          f" β = {config.beta}, λ = {lam:.3f}, n_pad = {n_pad}, {args.runs} runs (seeds 0.."
          f"{args.runs - 1}, seeded sampler)")
    print(f"n* (synthetic people): median {np.median(num_synthetic):.0f},"
          f" range {num_synthetic.min()}..{num_synthetic.max()}; clamp events:"
          f" {int(clamp_events.sum())} in {int((clamp_events > 0).sum())} run(s)")
    print_table("Top panel — window-3 histogram, debiased error max_s |p − n_pad − C| / n",
                periods, top["count"], bound, "λ/n")
    print_table("Top panel (proportions) — max_s |(p − n_pad)/(n* − 2^k n_pad) − C/n|",
                periods, top["proportion"], bound, "λ/n")
    for key in (f"w{w}" for w in query_windows):
        if key in queries:
            q = queries[key]
            print_table(f"{'Middle' if q['window'] <= k else 'Bottom'} panel — window-"
                        f"{q['window']} queries, max_s |p − {q['pad_per_bin']:g} − C| / n"
                        f" ({record_runs} materialised runs)",
                        q["periods"], q["count"], q["bound"],
                        f"{width ** (k - q['window'])}λ/n" if q["bound"] else "bound")
    if queries:
        print(f"\nemitted records reproduce state.counts in all {record_runs} materialised runs:"
              f" {queries['emitted_window_histograms_mismatch'] == 0}")

    flat = abs(top_drift) < FLAT_TOLERANCE
    under = median_max <= bound
    verdict = (f"VERDICT: {'flat' if flat else 'NOT flat'} over time (median drift"
               f" {100 * top_drift:+.1f} % from t = {k} to {config.horizon}); median"
               f" {'under' if under else 'OVER'} the bound at every period (max median"
               f" {median_max:.5f}, max p97.5 {band_max:.5f} vs λ/n = {bound:.5f});"
               f" {100 * exceed:.1f} % of runs exceed λ somewhere (β = {config.beta}:"
               f" {'OK' if exceed <= config.beta else 'ABOVE β'})")
    note = (f"note: the debiased-proportion version exceeds λ/n somewhere in"
            f" {100 * exceed_proportion:.1f} % of runs; Theorem 3.2 bounds counts, and the"
            f" denominator n* − 2^k n_pad carries the sum of the 2^k noise draws of t = k")
    print()
    print(verdict)
    print(note)
    print(f"runtime {seconds:.1f} s ({simulate_seconds:.1f} s simulation, {workers} worker(s))")

    os.makedirs(args.output_dir, exist_ok=True)
    summary = {
        "paper": "Bun, Gaboardi, Neunhoeffer, Zhang (2024), App. C.1, Figure 3",
        "panel": "all ones", "num_people": n, "runs": args.runs,
        "seeds": [0, args.runs - 1], "sampler": "seeded (not for publication)",
        "config": config.to_dict(), "noise_variance": config.noise_variance,
        "error_bound": {"lambda": lam, "proportion": bound, "beta": config.beta,
                        "source": "Theorem 3.2 (config.error_bound)"},
        "periods": periods.tolist(),
        "window_error": {
            "count": {**top["count"], "definition": "max_s |p^t_s − n_pad − C^t_s| / n"},
            "proportion": {**top["proportion"], "definition":
                           "max_s |(p^t_s − n_pad)/(n* − 2^k n_pad) − C^t_s/n|"},
            "median_drift": top_drift,
        },
        "exceedance": {"fraction_runs_max_over_s_t_above_lambda": exceed,
                       "per_period": (errors.max(axis=2) > lam).mean(axis=0).tolist(),
                       "fraction_runs_proportion_version_above_lambda_over_n":
                           exceed_proportion,
                       "run_max_error_counts": {key: value[0] for key, value in
                                                band(run_max[:, None].astype(float)).items()}},
        "num_synthetic": {"median": float(np.median(num_synthetic)),
                          "min": int(num_synthetic.min()), "max": int(num_synthetic.max())},
        "clamp_events": {"total": int(clamp_events.sum()),
                         "runs_with_clamps": int((clamp_events > 0).sum())},
        "queries": queries,
        "verdict": verdict,
        "runtime_seconds": seconds, "workers": workers,
    }
    with open(os.path.join(args.output_dir, "fig3_window_error.json"), "w",
              encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2, allow_nan=False)

    # head-room above the dashed bound so that the legend does not sit on it
    with matplotlib.rc_context({"axes.ymargin": 1.0, "legend.loc": "upper right"}):
        draw_figures(args.output_dir, config, n, args.runs, record_runs, periods, top, bound,
                     queries, query_windows)
    return summary


def draw_figures(output_dir: str, config: window.WindowConfig, n: int, runs: int,
                 record_runs: int, periods: np.ndarray, top: Dict, bound: float,
                 queries: Dict, query_windows: List[int]) -> None:
    """The top panel (``fig3_window_error.png``) and the w-window query panels."""
    k, width = config.window, config.alphabet_size
    plot_error_over_time(
        periods.tolist(),
        {"max_s |p − n_pad − C| / n: median, 2.5–97.5 %":
             (top["count"]["median"], top["count"]["p2.5"], top["count"]["p97.5"])},
        bound=bound, path=os.path.join(output_dir, "fig3_window_error.png"),
        title=f"Window-{k} queries (= k), all-ones panel, n = {n}, {runs} runs")
    for key in (f"w{w}" for w in query_windows):
        if key in queries:
            q = queries[key]
            guaranteed = q["bound"] is not None
            plot_error_over_time(
                q["periods"],
                {f"max_s |p − {q['pad_per_bin']:g} − C| / n: median, 2.5–97.5 %":
                     (q["count"]["median"], q["count"]["p2.5"], q["count"]["p97.5"])},
                bound=q["bound"] if guaranteed else bound,
                bound_label=(f"Theorem 3.2 ⇒ {width ** (k - q['window'])}·λ/n" if guaranteed
                             else "λ/n (reference only: no guarantee for w > k)"),
                path=os.path.join(output_dir, f"fig3_window_error_query_w{q['window']}.png"),
                title=f"Window-{q['window']} queries, synthesizer k = {k}, all ones"
                      f" (n = {n}, {record_runs} runs)")


if __name__ == "__main__":
    main()
