"""Evaluation of a cumulative release (Bun et al. 2024, Algorithm 2) against the truth.

For every period t and threshold b the count c_b^t of people with at least b ones
among their reports up to t, in the truth and in the synthetic panel; the error of
every count against the manifest's bound (Lemma 4.2 with the counters' tails, and
Corollary B.1), and the shares c_b^t / n by period in the style of the paper's
Figure 8.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from continual_synth.pipelines.evaluation.evaluate_window import (
    SYNTHETIC_COLUMNS, panel_indices)
from continual_synth.pipelines.commands.options import PanelColumns
from continual_synth.pipelines.evaluation.plots import (plot_error_over_time,
                                                        plot_query_panels, privacy_subtitle)
from continual_synth.pipelines.release.release_dir import read_json, write_summary
from continual_synth.transforms import storage
from continual_synth.transforms.files import InputError, read_dataset, read_release

__all__ = ["MANIFEST_KEYS", "SHARE_THRESHOLDS", "at_least_counts", "evaluate_cumulative",
           "write_report"]

MANIFEST_KEYS = ("algorithm", "horizon", "neighbor", "rho", "rho_spent", "num_synthetic",
                 "periods_released", "error_bound", "beta", "sampler")
SHARE_THRESHOLDS = 4  # Figure 8 panels: b = 1..4


def at_least_counts(panel: np.ndarray) -> np.ndarray:
    """c_b^t: row t − 1, column b = number of people with at least b ones by period t."""
    people, horizon = panel.shape
    weights = np.cumsum(panel, axis=1)
    counts = np.zeros((horizon, horizon + 1), dtype=np.int64)
    for t in range(horizon):
        histogram = np.bincount(weights[:, t], minlength=horizon + 1)
        counts[t] = histogram[::-1].cumsum()[::-1]
    return counts


def evaluate_cumulative(truth: str, synthetic: str, report_dir: Optional[str] = None,
                        id_col: str = "id", period_col: str = "period", value_col: str = "value",
                        truth_format: Optional[str] = None) -> dict:
    """Compare a cumulative release directory with the true panel; return the summary and,
    with ``report_dir``, write ``summary.json``, ``cumulative_error.png`` and
    ``cumulative_shares.png`` there.  Column names that are not three different ones are
    refused before anything is read, as by ``cumulative run``."""
    PanelColumns(id_col, period_col, value_col)
    manifest = read_json(storage.join(synthetic, "manifest.json"))
    if manifest is None:
        raise InputError(f"{synthetic}: no manifest.json; not a release directory")
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing or not str(manifest["algorithm"]).startswith("bun2024-algorithm-2"):
        raise InputError(f"{synthetic}: not a cumulative release (manifest lacks "
                         f"{missing or 'the Algorithm 2 tag'})")
    if not manifest["periods_released"]:
        raise InputError(f"{synthetic}: nothing released yet")
    last = max(manifest["periods_released"])
    synthetic_panel = panel_indices(read_release(synthetic), *SYNTHETIC_COLUMNS, [0, 1],
                                    where=f"synthetic release {synthetic}")
    truth_panel = panel_indices(read_dataset(truth, truth_format,
                                             columns=[id_col, period_col, value_col]),
                                id_col, period_col,
                                value_col, [0, 1], where=f"truth {truth}")
    if truth_panel.shape[1] < last or synthetic_panel.shape[1] != last:
        raise InputError(f"the truth covers periods 1..{truth_panel.shape[1]} and the release "
                         f"1..{synthetic_panel.shape[1]}, but the manifest says 1..{last}")
    truth_counts = at_least_counts(truth_panel[:, :last].astype(np.int64))
    synthetic_counts = at_least_counts(synthetic_panel.astype(np.int64))
    n, n_synthetic = truth_panel.shape[0], synthetic_panel.shape[0]
    errors = synthetic_counts[:, 1:] - truth_counts[:, 1:]
    shares_true = truth_counts / n
    shares_synthetic = synthetic_counts / max(n_synthetic, 1)
    bound = float(manifest["error_bound"])
    per_period = [{"period": t + 1,
                   "max_abs_error": int(np.abs(errors[t]).max()),
                   "max_abs_error_proportion": float(np.abs(errors[t]).max() / n),
                   "max_abs_share_error": float(np.abs(shares_synthetic[t, 1:]
                                                       - shares_true[t, 1:]).max())}
                  for t in range(last)]
    worst = int(np.abs(errors).max())
    summary = {
        "truth": truth, "synthetic": synthetic,
        "horizon": last,
        "num_people": n, "num_synthetic": n_synthetic, "manifest": manifest,
        "error_bound": {"counts": bound, "proportion": bound / n, "beta": manifest["beta"],
                        "paper_corollary_b1_counts": manifest.get("paper_corollary_b1_bound")},
        "overall": {"max_abs_error": worst, "max_abs_error_proportion": worst / n,
                    "within_bound": worst <= bound},
        "periods": per_period,
        "counts": {"true": truth_counts.tolist(), "synthetic": synthetic_counts.tolist()},
    }
    if report_dir is not None:
        write_report(summary, shares_true, shares_synthetic, report_dir)
    return summary


def write_report(summary: dict, shares_true: np.ndarray, shares_synthetic: np.ndarray,
                 report_dir: str) -> None:
    write_summary(report_dir, summary)
    periods = [row["period"] for row in summary["periods"]]
    subtitle = privacy_subtitle(summary["manifest"])
    beta = summary["error_bound"]["beta"]
    plot_error_over_time(
        periods, {"count error, max over thresholds b: |synthetic − true| / n":
                  [row["max_abs_error_proportion"] for row in summary["periods"]]},
        summary["error_bound"]["proportion"], storage.join(report_dir, "cumulative_error.png"),
        "Cumulative counts: worst error over thresholds b, per period",
        bound_label=f"error bound / n (Lemma 4.2, counters' tails; probability ≥ {1 - beta:g}, "
                    f"all b and t)",
        subtitle=subtitle,
        notes="synthetic, true: people with at least b ones in periods 1..t, in the release "
              "and in the real panel; n: real people.")
    thresholds = range(1, min(SHARE_THRESHOLDS, len(periods)) + 1)
    panels = {f"at least {b} one{'s' if b > 1 else ''} so far":
              {"truth": shares_true[:, b], "synthetic": shares_synthetic[:, b]}
              for b in thresholds}
    plot_query_panels(periods, panels, storage.join(report_dir, "cumulative_shares.png"),
                      "Share of people with at least b ones by period (Figure 8 style)",
                      xlabel="period t", subtitle=subtitle)
