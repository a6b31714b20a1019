"""Evaluate a fixed-time-window synthetic release against the true panel.

Bun, Gaboardi, Neunhoeffer, Zhang (2024), Algorithm 1 releases synthetic people
whose histogram over every window of k consecutive periods approximates the
true one.  For every period t = k..t_max (the last released period) and every
window pattern s ∈ A^k this module compares

* C_s^t, the number of true people whose values at periods t−k+1..t spell s (§3.1);
* p_s^t, the same count among the n* synthetic people;
* the debiased count p_s^t − n_pad (§3.2 after Corollary 3.1; papers/README.md
  point 5): each bin carries n_pad padding people, so the error
  (p_s^t − n_pad) − C_s^t is what Theorem 3.2 bounds by λ with probability ≥ 1 − β.

It also answers the paper's quarterly poverty queries (§5, Figure 1; App. C
Figures 5-7) on every 3-period window, from the truth, from the raw synthetic
data and debiased.  Everything is vectorised: both panels are pivoted to
(people × periods) arrays of alphabet indices, windows are coded in base |A|
(earliest period most significant) and counted with ``np.bincount``.
"""
from __future__ import annotations

import json
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import sliding_window_view

from continual_synth.mechanisms.panel import decode_windows, encode_values, pivot, window_histograms
from continual_synth.pipelines.commands.options import PanelColumns
from continual_synth.pipelines.evaluation.plots import (plot_error_over_time,
                                                        plot_query_panels, privacy_subtitle)
from continual_synth.pipelines.release.release_dir import write_summary
from continual_synth.transforms import storage
from continual_synth.transforms.files import InputError, read_dataset, read_release

__all__ = ["MANIFEST_NAME", "MANIFEST_KEYS", "SYNTHETIC_COLUMNS", "QUERY_WINDOW",
           "WindowQuery", "QUARTERLY_QUERIES", "evaluate_window", "read_manifest",
           "panel_indices", "bin_patterns", "query_counts", "evaluate_release",
           "write_report", "pattern_label"]

MANIFEST_NAME = "manifest.json"
MANIFEST_KEYS = ("algorithm", "window", "horizon", "alphabet", "neighbor", "rho", "rho_spent",
                 "n_pad", "num_synthetic", "periods_released", "clamp_events", "beta",
                 "error_bound", "sampler")
SYNTHETIC_COLUMNS = ("synthetic_id", "period", "value")
QUERY_WINDOW = 3  # the quarterly queries of §5 span 3 monthly periods


class WindowQuery(NamedTuple):
    """A query on a 3-period window: ``holds`` maps booleans (..., 3), True where
    the period's value is the positive one, to booleans (...)."""

    name: str
    description: str
    holds: Callable[[np.ndarray], np.ndarray]


#: The four quarterly poverty queries of §5 (Figure 1).
QUARTERLY_QUERIES = (
    WindowQuery("at_least_one", "at least one period positive",
                lambda positive: positive.sum(axis=-1) >= 1),
    WindowQuery("at_least_two", "at least two periods positive",
                lambda positive: positive.sum(axis=-1) >= 2),
    WindowQuery("two_consecutive", "two consecutive periods positive",
                lambda positive: (positive[..., 0] & positive[..., 1])
                | (positive[..., 1] & positive[..., 2])),
    WindowQuery("all_three", "all three periods positive",
                lambda positive: positive.all(axis=-1)),
)


def evaluate_window(truth: str, synthetic: str, report_dir: Optional[str] = None,
                    id_col: str = "id", period_col: str = "period", value_col: str = "value",
                    truth_format: Optional[str] = None) -> dict:
    """Compare a fixed-window release directory with the true panel it was made from.

    Args:
        truth: long-format panel (file or directory; Parquet, CSV or Avro) with
            one record per (id, period), periods 1..T.
        synthetic: release directory: data files ``synthetic_id, period, value``
            and ``manifest.json``.
        report_dir: if given, ``summary.json``, ``window_error.png`` and
            ``quarterly_queries.png`` are written there.
        id_col, period_col, value_col: column names of the truth.
        truth_format: format of the truth if its extension does not say.

    Returns:
        The summary (JSON-serialisable); see :func:`evaluate_release`.

    Raises:
        InputError: column names that are not three different ones (before anything is
            read, as for ``window run``), missing manifest or columns, a release whose
            periods or values do not match its manifest, or a truth that is not a
            complete panel.
    """
    PanelColumns(id_col, period_col, value_col)  # three different columns, as run's
    manifest = read_manifest(synthetic)
    alphabet = manifest["alphabet"]
    last_period = max(manifest["periods_released"])

    synthetic_panel = panel_indices(read_release(synthetic), *SYNTHETIC_COLUMNS, alphabet,
                                    where=f"synthetic release {synthetic}")
    if synthetic_panel.shape[1] != last_period:
        raise InputError(f"synthetic release {synthetic}: data cover periods"
                         f" 1..{synthetic_panel.shape[1]} but the manifest's periods_released"
                         f" end at {last_period}")
    if synthetic_panel.shape[0] != manifest["num_synthetic"]:
        raise InputError(f"synthetic release {synthetic}: {synthetic_panel.shape[0]} synthetic"
                         f" people but the manifest says"
                         f" num_synthetic = {manifest['num_synthetic']}")

    truth_panel = panel_indices(read_dataset(truth, truth_format,
                                             columns=[id_col, period_col, value_col]),
                                id_col, period_col, value_col,
                                alphabet, where=f"truth {truth}")
    if truth_panel.shape[1] < last_period:
        raise InputError(f"truth {truth}: periods 1..{truth_panel.shape[1]} but the release goes up"
                         f" to period {last_period}")

    summary = {"truth": truth, "synthetic": synthetic,
               **evaluate_release(truth_panel[:, :last_period], synthetic_panel, manifest)}
    if report_dir is not None:
        write_report(summary, report_dir)
    return summary


def read_manifest(release_dir: str) -> dict:
    """The manifest of a release directory, checked for the keys evaluation needs."""
    if not storage.is_dir(release_dir):
        raise InputError(f"{release_dir}: not a release directory"
                         f" (data files plus {MANIFEST_NAME})")
    path = storage.join(release_dir, MANIFEST_NAME)
    if not storage.is_file(path):
        raise InputError(f"{path}: missing; a release directory must carry its {MANIFEST_NAME}")
    try:
        manifest = json.loads(storage.read_bytes(path).decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read as JSON: {exc}") from exc
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise InputError(f"{path}: missing key(s) {', '.join(missing)}")
    alphabet, window = manifest["alphabet"], manifest["window"]
    released = manifest["periods_released"]
    if not (isinstance(alphabet, list) and alphabet
            and len(set(map(repr, alphabet))) == len(alphabet)):
        raise InputError(f"{path}: alphabet must be a non-empty list of distinct values,"
                         f" got {alphabet!r}")
    if not isinstance(window, int) or window < 1:
        raise InputError(f"{path}: window must be a positive integer, got {window!r}")
    if not (isinstance(released, list) and all(isinstance(t, int) for t in released)):
        raise InputError(f"{path}: periods_released must be a list of integers")
    if not released:
        raise InputError(f"{path}: nothing released yet (the first release is at period {window})")
    not_numbers = [key for key in ("n_pad", "num_synthetic", "error_bound", "beta")
                   if isinstance(manifest[key], bool)
                   or not isinstance(manifest[key], (int, float))]
    if not_numbers:
        raise InputError(f"{path}: {', '.join(not_numbers)} must be numbers")
    if max(released) < window:
        raise InputError(f"{path}: periods_released end at {max(released)}, before the first full"
                         f" window (period {window})")
    return manifest


def panel_indices(table: pa.Table, id_col: str, period_col: str, value_col: str,
                  alphabet: Sequence, where: str) -> np.ndarray:
    """A long-format panel as a (people × periods) array of alphabet indices.

    Rows follow the sorted ids; column j is period j + 1.  Raises
    :class:`InputError` unless the periods run 1..P and every id reports every
    period exactly once with a value from ``alphabet``.
    """
    missing = [col for col in (id_col, period_col, value_col) if col not in table.column_names]
    if missing:
        raise InputError(f"{where}: missing column(s) {', '.join(map(repr, missing))};"
                         f" found {', '.join(table.column_names)}")
    if table.num_rows == 0:
        raise InputError(f"{where}: no records")
    for col in (id_col, period_col):
        if table[col].null_count:
            raise InputError(f"{where}: column {col!r} has {table[col].null_count} empty values")
    if not pa.types.is_integer(table[period_col].type):
        raise InputError(f"{where}: column {period_col!r} must hold integer periods,"
                         f" found {table[period_col].type}")

    periods = table[period_col].to_numpy().astype(np.int64)
    present = np.unique(periods)
    num_periods = int(present[-1])
    if present[0] < 1 or len(present) != num_periods:
        raise InputError(f"{where}: periods must run 1..T without gaps, found {present.tolist()}")
    codes = encode_values(table[value_col].to_numpy(zero_copy_only=False), alphabet,
                          where=f"{where}, column {value_col!r}")
    _, matrix = pivot(table[id_col].to_numpy(zero_copy_only=False), periods, codes, 1,
                      num_periods, where=where)
    return matrix


def bin_patterns(window: int, base: int) -> np.ndarray:
    """Alphabet indices of every pattern s ∈ A^k, row = bin code: shape (|A|^k, k)."""
    return decode_windows(np.arange(base ** window), base, window)


def query_counts(panel: np.ndarray, positive_index: int) -> Dict[str, np.ndarray]:
    """For each quarterly query, the number of people for whom it holds in the
    3-period window ending at t = 3..P (§5)."""
    if panel.shape[1] < QUERY_WINDOW:
        return {query.name: np.zeros(0, dtype=np.int64) for query in QUARTERLY_QUERIES}
    windows = sliding_window_view(panel == positive_index, QUERY_WINDOW, axis=1)
    return {query.name: query.holds(windows).sum(axis=0) for query in QUARTERLY_QUERIES}


def evaluate_release(truth_panel: np.ndarray, synthetic_panel: np.ndarray, manifest: dict) -> dict:
    """The evaluation on in-memory panels (alphabet indices, same periods 1..t_max).

    Benchmarks that run the synthesizer many times call this directly.  Layout of
    the result:

    * ``manifest``, ``window``, ``alphabet``, ``num_people`` (n), ``num_synthetic``
      (n*), ``n_pad``, ``num_bins`` (|A|^k), ``debiased_denominator`` (n* − |A|^k n_pad);
    * ``error_bound``: λ of Theorem 3.2 in ``counts`` and as a ``proportion`` (λ/n), ``beta``;
    * ``periods``: one row per t = k..t_max (see :func:`_period_rows`);
    * ``overall``: the maxima over all periods and whether they are within λ;
    * ``bins``: ``patterns`` and the ``true_counts`` / ``synthetic_counts`` per period;
    * ``queries``: the quarterly queries (see :func:`_query_summary`).
    """
    alphabet, window = manifest["alphabet"], manifest["window"]
    base, n_pad, bound = len(alphabet), manifest["n_pad"], float(manifest["error_bound"])
    num_people, num_synthetic = truth_panel.shape[0], synthetic_panel.shape[0]
    if truth_panel.shape[1] != synthetic_panel.shape[1] or truth_panel.shape[1] < window:
        raise InputError(f"truth and synthetic panels need the same periods, at least the window"
                         f" {window}; got {truth_panel.shape[1]} and {synthetic_panel.shape[1]}")
    num_bins = base ** window
    true_counts = window_histograms(truth_panel, base, window)
    synthetic_counts = window_histograms(synthetic_panel, base, window)
    denominator = num_synthetic - num_bins * n_pad
    patterns = [pattern_label(row, alphabet) for row in bin_patterns(window, base)]
    periods = np.arange(window, window + true_counts.shape[0])

    rows = _period_rows(periods, true_counts, synthetic_counts, n_pad, denominator, bound,
                        patterns)
    worst = max(rows, key=lambda row: row["max_abs_error"])
    overall = {key: _max_or_none(row[key] for row in rows) for key in
               ("max_abs_error", "max_abs_error_proportion", "raw_max_abs_error_proportion",
                "debiased_max_abs_proportion_error")}
    overall.update(worst_period=worst["period"], worst_pattern=worst["worst_pattern"],
                   within_bound=all(row["within_bound"] for row in rows))
    return {
        "manifest": manifest,
        "window": window,
        "alphabet": alphabet,
        "num_people": num_people,
        "num_synthetic": num_synthetic,
        "n_pad": n_pad,
        "num_bins": num_bins,
        "debiased_denominator": denominator,
        "error_bound": {"counts": bound, "proportion": bound / num_people,
                        "beta": manifest["beta"], "source": "Theorem 3.2"},
        "periods": rows,
        "overall": overall,
        "bins": {"patterns": patterns, "periods": periods.tolist(),
                 "true_counts": true_counts.tolist(),
                 "synthetic_counts": synthetic_counts.tolist()},
        "queries": _query_summary(truth_panel, synthetic_panel, window, alphabet, n_pad,
                                  denominator),
    }


def _period_rows(periods: np.ndarray, true_counts: np.ndarray, synthetic_counts: np.ndarray,
                 n_pad: float, denominator: float, bound: float,
                 patterns: List[str]) -> List[dict]:
    """Per period t: the window-histogram errors of Theorem 3.2 and Corollary 3.1.

    * ``max_abs_error``: max_s |(p_s^t − n_pad) − C_s^t| in counts (Theorem 3.2),
      ``max_abs_error_proportion`` the same over n, ``worst_pattern`` its argmax;
    * ``raw_max_abs_error_proportion``: max_s |p_s^t / n* − C_s^t / n|, no debiasing
      (Corollary 3.1); ``raw_error_bound_proportion`` = (λ + n_pad)/n* +
      max_s(C_s^t/n)·|n* − n|/n*, the first inequality of its proof at this release's n*;
    * ``debiased_max_abs_proportion_error``:
      max_s |(p_s^t − n_pad)/(n* − |A|^k n_pad) − C_s^t/n| (papers/README.md point 5),
      null if the denominator is not positive;
    * ``within_bound``: ``max_abs_error`` ≤ λ.
    """
    num_people, num_synthetic = true_counts[0].sum(), synthetic_counts[0].sum()  # n, n*
    true_proportions = true_counts / num_people
    abs_errors = np.abs(synthetic_counts - n_pad - true_counts)
    worst_bins = abs_errors.argmax(axis=1)
    max_abs_errors = abs_errors.max(axis=1)
    raw_errors = np.abs(synthetic_counts / num_synthetic - true_proportions).max(axis=1)
    raw_bounds = ((bound + n_pad) / num_synthetic
                  + true_proportions.max(axis=1) * abs(num_synthetic - num_people) / num_synthetic)
    if denominator > 0:
        debiased_errors = np.abs((synthetic_counts - n_pad) / denominator
                                 - true_proportions).max(axis=1).tolist()
    else:
        debiased_errors = [None] * len(periods)
    return [{
        "period": int(t),
        "max_abs_error": _plain(max_abs_errors[r]),
        "max_abs_error_proportion": float(max_abs_errors[r] / num_people),
        "worst_pattern": patterns[worst_bins[r]],
        "raw_max_abs_error_proportion": float(raw_errors[r]),
        "raw_error_bound_proportion": float(raw_bounds[r]),
        "debiased_max_abs_proportion_error": debiased_errors[r],
        "within_bound": bool(max_abs_errors[r] <= bound),
    } for r, t in enumerate(periods)]


def _query_summary(truth_panel: np.ndarray, synthetic_panel: np.ndarray, window: int,
                   alphabet: Sequence, n_pad: float, denominator: float) -> dict:
    """The quarterly queries on every 3-period window ending at t = 3..t_max.

    Per query: ``true`` C/n, ``raw`` count/n*, and ``debiased`` (count − pad) /
    (n* − |A|^k n_pad) with pad = n_pad × ``pad_bins``, ``pad_bins`` = |A|^(k−3)·|Q|
    the k-window bins in which the query holds (its last 3 values satisfy it; for
    t < k the 3 periods lie inside the first k-window, which holds the same
    number of such bins).  A query longer than the window (k < 3) is not a sum
    of k-bins, so it has no debiased answer (App. C.1, Figure 3 bottom panel).
    """
    base, positive_index = len(alphabet), len(alphabet) - 1
    num_people, num_synthetic = truth_panel.shape[0], synthetic_panel.shape[0]
    supported = window >= QUERY_WINDOW
    true_counts = query_counts(truth_panel, positive_index)
    synthetic_counts = query_counts(synthetic_panel, positive_index)
    periods = list(range(QUERY_WINDOW, truth_panel.shape[1] + 1))
    bin_is_positive = bin_patterns(window, base)[:, -QUERY_WINDOW:] == positive_index

    results = {}
    for query in QUARTERLY_QUERIES:
        pad_bins = int(query.holds(bin_is_positive).sum()) if supported else None
        debiased = ((synthetic_counts[query.name] - n_pad * pad_bins) / denominator).tolist() \
            if supported and denominator > 0 else [None] * len(periods)
        results[query.name] = {
            "description": query.description,
            "pad_bins": pad_bins,
            "rows": [{"period": t, "quarter_end": t % QUERY_WINDOW == 0,
                      "true": float(true_counts[query.name][r] / num_people),
                      "raw": float(synthetic_counts[query.name][r] / num_synthetic),
                      "debiased": debiased[r]} for r, t in enumerate(periods)],
        }
    return {
        "window": QUERY_WINDOW,
        "positive_value": alphabet[positive_index],
        "debiasing_supported": supported,
        "note": None if supported else (
            f"queries span {QUERY_WINDOW} periods but the release preserves windows of"
            f" {window}; queries longer than the window are not supported (App. C.1),"
            " so no debiased answer is given"),
        "results": results,
    }


def write_report(summary: dict, report_dir: str) -> None:
    """``summary.json``, ``window_error.png`` and ``quarterly_queries.png`` in ``report_dir``."""
    write_summary(report_dir, summary)
    rows = summary["periods"]
    k, beta = summary["window"], summary["error_bound"]["beta"]
    subtitle = privacy_subtitle(summary["manifest"])
    plot_error_over_time(
        [row["period"] for row in rows],
        {"debiased count error, max over patterns: |p − n_pad − C| / n":
             [row["max_abs_error_proportion"] for row in rows]},
        bound=summary["error_bound"]["proportion"],
        bound_label=f"Theorem 3.2 bound λ/n (holds with probability ≥ {1 - beta:g} "
                    f"for debiased counts)",
        uncovered={"raw share error, max over patterns: |p / n* − C / n|":
                   [row["raw_max_abs_error_proportion"] for row in rows]},
        path=storage.join(report_dir, "window_error.png"),
        title=f"Window histogram error per period (k = {k},"
              f" n = {summary['num_people']}, n_pad = {summary['n_pad']})",
        subtitle=subtitle,
        notes=(f"p: synthetic people whose {k}-period window ending at t shows a pattern; "
               f"C: real people with that pattern; n: real people;\n"
               f"n*: synthetic people ({summary['num_synthetic']}, padding included); "
               f"n_pad: padding people per pattern (subtract it to debias); "
               f"λ: Theorem 3.2's error bound on every debiased count."))

    queries = summary["queries"]
    panels = {}
    for result in queries["results"].values():
        query_rows = result["rows"]
        series = {"truth": [row["true"] for row in query_rows],
                  "synthetic, raw": [row["raw"] for row in query_rows]}
        if queries["debiasing_supported"]:
            series["synthetic, debiased"] = [row["debiased"] for row in query_rows]
        panels[result["description"]] = series
    query_periods = [row["period"] for row in next(iter(queries["results"].values()))["rows"]]
    if query_periods:
        plot_query_panels(query_periods, panels,
                          path=storage.join(report_dir, "quarterly_queries.png"),
                          title=f"Proportion with value {queries['positive_value']!r} in the"
                                f" {QUERY_WINDOW} periods ending at t (every"
                                f" {QUERY_WINDOW}rd period marked: quarter ends if periods"
                                f" are months;"
                                f" no error bound is claimed for these queries)"
                                + (f". NOTE: {queries['note']}" if queries["note"] else ""),
                          subtitle=subtitle,
                          marked_periods=[t for t in query_periods if t % QUERY_WINDOW == 0])


def pattern_label(pattern: Sequence[int], alphabet: Sequence) -> str:
    """A window pattern as text: "011" for one-character values, else "a,b,c"."""
    symbols = [str(alphabet[index]) for index in pattern]
    return ("" if all(len(symbol) == 1 for symbol in symbols) else ",").join(symbols)


def _plain(number):
    """A numpy scalar as a plain int (when whole) or float, for JSON."""
    number = float(number)
    return int(number) if number.is_integer() else number


def _max_or_none(values):
    """The largest value that is not None; None if there is none."""
    present = [value for value in values if value is not None]
    return max(present) if present else None
