"""Workload errors of a synthetic table or stream (Kumar, Strohmer and Vershynin 2024,
§7.3 "Evaluation metrics").  Pure numpy.

A workload W is a tuple of attributes; its value on a dataset h is the histogram
W(h) = (q(h))_{q ∈ W} of all its |W| marginal queries (§7.2, Definition 7.1), as produced
by :func:`continual_synth.mechanisms.marginals.workload_histograms`.  At time t the input
stream is f_t (every record of periods 1..t) and the synthetic stream is g_t (the table
released at t).  The paper defines (§7.3):

* Workload error:           WE(W, f, g, t)    := (1/|W|) Σ_{q∈W} |q(f_t) − q(g_t)|
* Relative workload error:  RelWE(W, f, g, t) := (1/|W|) Σ_{q∈W} |(q(f_t) − q(g_t)) / q(f_t)|
* AvgWE(Q, f, g, t)    := (1/|Q|) Σ_{W∈Q} WE(W, f, g, t)
* MaxWE(Q, f, g, t)    := max_{W∈Q} WE(W, f, g, t)
* AvgRelWE(Q, f, g, t) := (1/|Q|) Σ_{W∈Q} RelWE(W, f, g, t)
* MaxRelWE(Q, f, g, t) := max_{W∈Q} RelWE(W, f, g, t)

Two points the formulas leave open, and what is done here:

1. **Scale of q.**  Definition 3.5 makes q(h) = Σ_x h(x) q(x) a *count*, but the values
   the paper reports (e.g. AvgWE ≈ 0.015 on Adult-randomized-bs-50 after hundreds of
   batches of 50, Table 1) can only be errors of *normalised* answers (proportions), as
   in the code base of Liu et al. (2021) the experiments build on.  The default
   ``scale="proportion"`` therefore compares q(f_t)/|f_t| with q(g_t)/|g_t| (each table
   normalised by its own size; |g_t| is the synthetic table's noisy size).
   ``scale="count"`` applies the formulas to raw counts.  RelWE is the same under both
   scales whenever |g_t| = |f_t|.
2. **q(f_t) = 0 in RelWE.**  The term is undefined (0/0 or x/0).  With the default
   ``zero_truth="skip"`` RelWE(W) averages over the cells with q(f_t) > 0 only (the
   queries whose relative error exists); with ``zero_truth="zero"`` such terms count as 0
   and the sum is still divided by |W|.  A workload with no positive true cell (f_t
   empty) has RelWE = NaN; with ``scale="proportion"`` an empty f_t also has WE = NaN
   (there is nothing to normalise by).  An empty synthetic table answers 0 everywhere.
   The aggregates leave NaN workloads out; all-NaN gives NaN.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from continual_synth.mechanisms.errors import InputError

__all__ = ["METRICS", "SCALES", "ZERO_TRUTH", "workload_errors", "aggregate",
           "error_metrics", "period_histograms", "stream_metrics", "sampling_floor",
           "average_last"]

METRICS = ("AvgWE", "MaxWE", "AvgRelWE", "MaxRelWE")
SCALES = ("proportion", "count")
ZERO_TRUTH = ("skip", "zero")


def _check_options(scale: str, zero_truth: str) -> None:
    if scale not in SCALES:
        raise InputError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    if zero_truth not in ZERO_TRUTH:
        raise InputError(f"unknown zero_truth {zero_truth!r}; choose one of "
                         f"{', '.join(ZERO_TRUTH)}")


def _as_histograms(histograms: Sequence, name: str) -> List[np.ndarray]:
    out = []
    for i, h in enumerate(histograms):
        h = np.asarray(h, dtype=np.float64)
        if h.ndim < 1 or h.size == 0:
            raise InputError(f"{name} histogram of workload {i} is empty")
        if not np.all(np.isfinite(h)):
            raise InputError(f"{name} histogram of workload {i} has non-finite values")
        out.append(h)
    if not out:
        raise InputError(f"no {name} workload histograms (the workload set Q is empty)")
    return out


def _check_pair(true: List[np.ndarray], synthetic: List[np.ndarray]) -> None:
    if len(true) != len(synthetic):
        raise InputError(f"{len(true)} true workload histograms but {len(synthetic)} "
                         f"synthetic ones; both must cover the same workloads")
    for i, (a, b) in enumerate(zip(true, synthetic)):
        if a.shape != b.shape:
            raise InputError(f"workload {i}: the true histogram has shape {a.shape} but the "
                             f"synthetic one {b.shape}; the domains do not match")


def workload_errors(true_histograms: Sequence, synthetic_histograms: Sequence, *,
                    scale: str = "proportion", zero_truth: str = "skip") -> Dict[str, np.ndarray]:
    """WE(W) and RelWE(W) of every workload W ∈ Q at one time (§7.3, (1) and (2)).

    ``true_histograms[i]`` / ``synthetic_histograms[i]`` are W_i(f_t) and W_i(g_t) (any
    shape, the same for both; the last axes are the cells, flattened).  Returns
    ``{"WE": array(|Q|), "RelWE": array(|Q|)}`` (NaN where undefined, see module notes).
    """
    _check_options(scale, zero_truth)
    true = _as_histograms(true_histograms, "true")
    synthetic = _as_histograms(synthetic_histograms, "synthetic")
    _check_pair(true, synthetic)
    we = np.empty(len(true))
    rel = np.empty(len(true))
    for i, (f, g) in enumerate(zip(true, synthetic)):
        w, r = _row_errors(f.reshape(1, -1), g.reshape(1, -1), scale, zero_truth)
        we[i], rel[i] = w[0], r[0]
    return {"WE": we, "RelWE": rel}


def _row_errors(f: np.ndarray, g: np.ndarray, scale: str, zero_truth: str):
    """WE and RelWE of one workload for every row (time) of (T × cells) truth ``f`` and
    synthetic ``g``."""
    totals = f.sum(axis=1)
    if scale == "proportion":
        f, g = _normalise_rows(f), _normalise_rows(g)
    diff = np.abs(f - g)
    we = diff.mean(axis=1)
    if scale == "proportion":
        we[totals <= 0] = np.nan  # f_t / |f_t| is undefined for an empty f_t
    positive = f > 0
    ratio = np.divide(diff, f, out=np.zeros_like(diff), where=positive)
    defined = positive.sum(axis=1)
    denominator = defined if zero_truth == "skip" else np.full(f.shape[0], f.shape[1])
    rel = np.divide(ratio.sum(axis=1), denominator, out=np.full(f.shape[0], np.nan),
                    where=defined > 0)
    return we, rel


def _normalise_rows(h: np.ndarray) -> np.ndarray:
    """Each row divided by its total; an empty table (total 0) answers 0 everywhere."""
    totals = h.sum(axis=1, keepdims=True)
    return np.divide(h, totals, out=np.zeros_like(h), where=totals > 0)


def aggregate(we: np.ndarray, relwe: np.ndarray) -> Dict[str, float]:
    """The four §7.3 metrics from per-workload WE and RelWE (NaN-aware: a workload whose
    RelWE is undefined is left out of AvgRelWE/MaxRelWE; all-NaN gives NaN)."""
    we = np.asarray(we, dtype=np.float64)
    relwe = np.asarray(relwe, dtype=np.float64)
    return {"AvgWE": _nan_reduce(np.mean, we), "MaxWE": _nan_reduce(np.max, we),
            "AvgRelWE": _nan_reduce(np.mean, relwe), "MaxRelWE": _nan_reduce(np.max, relwe)}


def _nan_reduce(reduce, values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(reduce(values)) if values.size else float("nan")


def error_metrics(true_histograms: Sequence, synthetic_histograms: Sequence, *,
                  scale: str = "proportion", zero_truth: str = "skip") -> Dict[str, float]:
    """AvgWE, MaxWE, AvgRelWE and MaxRelWE (§7.3) of one synthetic table against the truth."""
    errors = workload_errors(true_histograms, synthetic_histograms, scale=scale,
                             zero_truth=zero_truth)
    return aggregate(errors["WE"], errors["RelWE"])


def period_histograms(codes: np.ndarray, periods: np.ndarray, horizon: int,
                      sizes: Sequence[int], workloads: Sequence[Sequence[int]]) -> List[np.ndarray]:
    """Per-period workload histograms in one pass: for each workload (given as positions of
    its attributes in ``codes``' columns, with ``sizes`` the attributes' domain sizes) a
    (horizon × cells) int64 array whose row t − 1 counts the records of period t.

    ``codes`` is the n × p matrix of :func:`marginals.encode_records`; ``periods`` the
    records' periods in 1..horizon.
    """
    codes = np.asarray(codes)
    periods = np.asarray(periods, dtype=np.int64)
    if codes.ndim != 2 or periods.shape != (codes.shape[0],):
        raise InputError(f"codes of shape {codes.shape} and periods of shape {periods.shape} "
                         f"do not describe the same records")
    if periods.size and (periods.min() < 1 or periods.max() > horizon):
        raise InputError(f"periods must lie in 1..{horizon}; found {periods.min()}.."
                         f"{periods.max()}")
    out = []
    for positions in workloads:
        shape = tuple(int(sizes[j]) for j in positions)
        cells = int(np.prod(shape))
        if codes.shape[0] == 0:
            out.append(np.zeros((horizon, cells), dtype=np.int64))
            continue
        flat = np.ravel_multi_index(tuple(codes[:, j] for j in positions), shape)
        if horizon > 1:
            flat = (periods - 1) * cells + flat
        counts = np.bincount(flat, minlength=horizon * cells)
        out.append(counts.reshape(horizon, cells).astype(np.int64))
    return out


def stream_metrics(true_increments: Sequence, synthetic_histograms: Sequence, *,
                   scale: str = "proportion", zero_truth: str = "skip") -> Dict[str, np.ndarray]:
    """The four §7.3 metrics at every time t = 1..T of a stream.

    ``true_increments[i]`` is a (T × cells_i) array whose row t − 1 is W_i(∇f_t), the
    histogram of the records *arriving* at t (e.g. from :func:`period_histograms`); the
    truth at t is the cumulative f_t = Σ_{τ ≤ t} ∇f_τ (a cumsum, never a re-read).
    ``synthetic_histograms[i]`` is a (T × cells_i) array whose row t − 1 is W_i(g_t), the
    histogram of the synthetic table released at t (a whole table, not an increment).
    Returns ``{metric: array(T)}`` for the four metrics plus ``"WE"`` and ``"RelWE"``,
    (T × |Q|) arrays of the per-workload errors.
    """
    _check_options(scale, zero_truth)
    increments = [np.asarray(h, dtype=np.float64) for h in true_increments]
    synthetic = [np.asarray(h, dtype=np.float64) for h in synthetic_histograms]
    if not increments:
        raise InputError("no workload histograms (the workload set Q is empty)")
    if len(increments) != len(synthetic):
        raise InputError(f"{len(increments)} true workload streams but {len(synthetic)} "
                         f"synthetic ones; both must cover the same workloads")
    horizon = None
    for i, (a, b) in enumerate(zip(increments, synthetic)):
        if a.ndim != 2 or b.ndim != 2:
            raise InputError(f"workload {i}: expected (periods × cells) arrays, got shapes "
                             f"{a.shape} and {b.shape}")
        if a.shape != b.shape:
            raise InputError(f"workload {i}: the truth has shape {a.shape} (periods × cells) "
                             f"but the synthetic stream {b.shape}; the domains or the "
                             f"periods do not match")
        if horizon is not None and a.shape[0] != horizon:
            raise InputError(f"workload {i} covers {a.shape[0]} periods, workload 0 {horizon}")
        horizon = a.shape[0]
    we = np.empty((horizon, len(increments)))
    rel = np.empty((horizon, len(increments)))
    for i, (inc, g) in enumerate(zip(increments, synthetic)):
        we[:, i], rel[:, i] = _row_errors(np.cumsum(inc, axis=0), g, scale, zero_truth)
    result = {name: np.empty(horizon) for name in METRICS}
    for t in range(horizon):
        for name, value in aggregate(we[t], rel[t]).items():
            result[name][t] = value
    result["WE"], result["RelWE"] = we, rel
    return result


def sampling_floor(codes: np.ndarray, size: int, sizes: Sequence[int],
                   workloads: Sequence[Sequence[int]], rng: np.random.Generator, *,
                   truth: Optional[Sequence] = None, scale: str = "proportion",
                   zero_truth: str = "skip") -> Dict[str, float]:
    """The **sampling floor** of f_t: the four §7.3 metrics of a sample of ``size``
    records drawn uniformly with replacement from f_t's records (``codes``, the n × p
    matrix of :func:`marginals.encode_records`), against f_t itself.

    It is the error of the real table's own records resampled at the release's size: a
    synthesizer whose model were f_t and whose release were i.i.d. draws from it would
    score this.  A release drawn by randomised rounding (the tabular synthesizer's) can
    score below it, so read a release's metric as a multiple of it, not as bounded by it
    (as bench/results/tabular_floor.md does).  One draw,
    ``codes[rng.integers(0, n, size)]``; average it over periods or draws.  ``truth``:
    f_t's workload histograms, when the caller has them (else they are counted from
    ``codes``).  With n = 0 or size = 0 every metric is NaN."""
    codes = np.asarray(codes)
    n = codes.shape[0]
    if n == 0 or size <= 0:
        return {name: float("nan") for name in METRICS}
    sample = codes[rng.integers(0, n, int(size))]
    if truth is None:
        truth = period_histograms(codes, np.ones(n, dtype=np.int64), 1, sizes, workloads)
    truth = [np.asarray(h).reshape(1, -1) for h in truth]
    drawn = period_histograms(sample, np.ones(int(size), dtype=np.int64), 1, sizes,
                              workloads)
    return error_metrics(truth, drawn, scale=scale, zero_truth=zero_truth)


def average_last(values: Sequence[float], last: int = 10) -> float:
    """Mean of the last ``last`` values, ignoring NaN (the Tables 1-2 summary: "the value
    of each metric averaged over the last 10 time steps")."""
    if last < 1:
        raise InputError(f"last must be at least 1, got {last}")
    tail = np.asarray(values, dtype=np.float64)[-last:]
    return _nan_reduce(np.mean, tail)
