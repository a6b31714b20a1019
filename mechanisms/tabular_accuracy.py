"""Error bounds of a tabular release: how far each workload marginal of the released
table g_t can be from the true one, with a stated confidence (post-processing of the
noisy measurements and of the release itself: no privacy cost).

Setting (Kumar, Strohmer and Vershynin 2024, §6 Algorithm 3 with the simple counter of
§3.6).  At period t a workload W_j whose counter has been fed in **every** period 1..t
(directly, line 15, or from a wide measurement that holds it) has the noisy cumulative
histogram C_j = x + Z, x the true histogram of f_t (n = Σ_c x_c records) and Z a sum of
independent discrete Laplace draws per cell, whose scales the synthesizer records as it
draws them (:attr:`~continual_synth.mechanisms.tabular.TabularState.noise_terms`).  The
released table is N = ``size`` records drawn i.i.d. from the fitted model g_t, whose
marginal on W_j is π.  Write r for the released records' normalised marginal and p = x/n
the true one.  Every such workload's total Σ_c C_c is n plus noise; n̂ is the one whose
noise bound s is the smallest (:func:`total_errors`: |n̂ − n| ≤ s).  For every cell c

    |r_c − p_c| ≤ |r_c − π_c| + |π_c − C_c/n̂| + |C_c/n̂ − p_c|,
    C_c/n̂ − p_c = Z_c/n̂ + p_c·(n − n̂)/n̂,

so on the event E = {max_c |Z_c| ≤ z, |n̂ − n| ≤ s, |r_c − π_c| ≤ b_c for every c}

    max_c |r_c − p_c| ≤ max_c [ b_c + |π_c − C_c/n̂| + (z + p̄_c·s)/n̂ ],
    p̄_c = min(1, (C_c + z)/(n̂ − s))  (x_c ≤ C_c + z and n ≥ n̂ − s on E),

and the bound is capped at 1 (two distributions never differ by more in one cell).
P(E) ≥ 1 − α, α = 1 − confidence, split α/3 three ways:

* z and s: Chernoff bounds of sums of independent discrete Laplace variables, exact
  moment generating function (P(x) ∝ q^|x|, q = e^{−1/b}: M(λ) = (1 − q)² /
  ((1 − q e^λ)(1 − q e^{−λ})), |λ| < 1/b), union-bounded over the cells (z), over the
  workloads whose total may serve as n̂ (s), both signs and the grid of λ the bound is
  minimised over (:data:`LAMBDA_GRID`: the grid point is chosen after the noise is
  known, so each is paid for).  Which periods fed which counter, and at which scale,
  was chosen before that period's noise was drawn, so the per-period terms form a
  martingale and the bound with the realised scales holds (optional stopping of
  exp(λS − K(λ)) for each fixed λ).
* b_c: Bernstein's inequality for the Binomial(N, π_c) share of cell c, union-bounded
  over the cells: |r_c − π_c| ≤ (2L/3 + √(4L²/9 + 8 N L π_c(1 − π_c)))/(2N),
  L = ln(2·cells·3/α).

The confidence is per workload (each workload's bound holds with probability ≥ the
confidence; all of them together with at least 1 − q·α by a union bound).  A workload
whose counter missed a period has no measurement of the records of that period: its
released marginal there is the model's imputation (the remainder, lines 16-17), which no
noisy quantity bounds, so it is reported as not measured with no bound.  The window and
cumulative synthesizers' manifests carry the analogous bounds of Bun et al. 2024
(Theorem 3.2 and Lemma 4.2), which hold for every count at once.
"""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

__all__ = ["CONFIDENCE", "LAMBDA_GRID", "NoiseTerms", "laplace_sum_tail",
           "sampling_deviation", "total_errors", "workload_bound", "period_accuracy"]

#: the confidence of the bounds a release carries
CONFIDENCE = 0.95
#: the λ·b values (b the largest scale of a sum) the Chernoff bound is minimised over
LAMBDA_GRID = np.geomspace(0.05, 0.98, 12)

#: ``NoiseTerms``: per workload cell, how many discrete Laplace draws of each scale b
#: the workload's counter value holds, ``{b: count}``
NoiseTerms = Mapping[float, float]


def _log_mgf(lam: np.ndarray, scale: float) -> np.ndarray:
    """ln E e^{λZ} of one discrete Laplace Z of scale b (P(x) ∝ e^{−|x|/b}), |λ| < 1/b,
    with q·e^{±λ} = e^{±λ − 1/b} computed as one exponent (a scale far below one count,
    as at ε = 1000, makes 1/b and λ both huge: 0 · ∞ otherwise)."""
    inverse = 1.0 / scale
    return (2 * math.log1p(-math.exp(-inverse)) - np.log1p(-np.exp(lam - inverse))
            - np.log1p(-np.exp(-lam - inverse)))


def laplace_sum_tail(terms: NoiseTerms, delta: float) -> float:
    """A number a with P(Σ Z > a) ≤ δ for ``terms`` independent discrete Laplace draws
    ({scale: count}), by Chernoff: P(Σ Z > a) ≤ exp(K(λ) − λa), K the summed log moment
    generating function; each λ of :data:`LAMBDA_GRID` (over the largest scale) is
    charged δ/len(grid), so the smallest a over the grid is a valid bound whichever λ
    gives it.  0 for no terms."""
    terms = {float(b): float(k) for b, k in terms.items() if k > 0}
    if not terms:
        return 0.0
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    lam = LAMBDA_GRID / max(terms)
    cumulant = sum(k * _log_mgf(lam, b) for b, k in terms.items())
    return float(np.min((cumulant + math.log(len(LAMBDA_GRID) / delta)) / lam))


def sampling_deviation(pi: np.ndarray, rows: int, delta: float) -> np.ndarray:
    """Per cell, b_c with P(|r_c − π_c| > b_c) ≤ δ for the share r_c of ``rows`` i.i.d.
    records from π falling in cell c (Bernstein)."""
    pi = np.clip(np.asarray(pi, dtype=np.float64), 0.0, 1.0)
    log_term = math.log(2.0 / delta)
    return ((2 * log_term / 3 + np.sqrt(4 * log_term ** 2 / 9
                                        + 8 * rows * log_term * pi * (1 - pi)))
            / (2 * rows))


def total_errors(measured: Sequence[np.ndarray], terms: Sequence[NoiseTerms],
                 confidence: float = CONFIDENCE) -> List[float]:
    """s_j for each noisy histogram C_j: |Σ_c C_j,c − n| ≤ s_j for all j at once with
    probability ≥ 1 − α/3 (their totals' noise, union-bounded over the workloads and
    both signs), so that any of them may serve as the estimate n̂ of n."""
    alpha = 1.0 - confidence
    share = alpha / (3 * 2 * len(measured))
    return [laplace_sum_tail({b: k * np.asarray(c).size for b, k in noise.items()}, share)
            for c, noise in zip(measured, terms)]


def workload_bound(released: np.ndarray, measured: np.ndarray, terms: NoiseTerms,
                   rows: int, total: float, total_error: float,
                   confidence: float = CONFIDENCE) -> float:
    """The bound on max_c |r_c − p_c| of the module docstring for one workload:
    ``released`` π (the model's marginal the rows were drawn from), ``measured`` C (the
    noisy cumulative histogram), ``terms`` the noise per cell of C, ``rows`` N, and the
    estimate n̂ = ``total`` of n with |n̂ − n| ≤ ``total_error`` (:func:`total_errors`)."""
    alpha = 1.0 - confidence
    if not 0 < alpha < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    pi = np.asarray(released, dtype=np.float64)
    counts = np.asarray(measured, dtype=np.float64)
    cells = counts.size
    if rows < 1 or total <= 0:
        return 1.0
    z = laplace_sum_tail(terms, alpha / (3 * 2 * cells))
    spread = sampling_deviation(pi, rows, alpha / (3 * cells))
    share_max = (np.minimum(1.0, (counts + z) / (total - total_error))
                 if total > total_error else np.ones(cells))
    bound = np.max(spread + np.abs(pi - counts / total)
                   + (z + share_max * total_error) / total)
    return float(min(1.0, bound))


def period_accuracy(period: int, workloads: Sequence, fed: Sequence[int], rows: int,
                    model=None, measured: Optional[Sequence[np.ndarray]] = None,
                    terms: Optional[Sequence[NoiseTerms]] = None,
                    confidence: float = CONFIDENCE) -> Dict:
    """The accuracy document of period t's release (``accuracy-tTTTT.json``): per
    workload, whether it is measured over the whole stream (its counter ``fed`` in all t
    periods) and then its bound, else null.  ``model`` (the fitted g_t the ``rows`` are
    drawn from), ``measured`` (the counters' values C_j) and ``terms`` (their noise):
    None where the release is not a whole table drawn from a model with known noise (no
    bound then); the model's marginals are computed for the bounded workloads only."""
    bounded = ([] if model is None or measured is None or terms is None else
               [i for i, feeds in enumerate(fed) if feeds == period])
    bounds = {}
    if bounded:
        errors = total_errors([measured[i] for i in bounded], [terms[i] for i in bounded],
                              confidence)
        best = int(np.argmin(errors))   # n̂: the total known most precisely
        total, total_error = float(np.sum(measured[bounded[best]])), errors[best]
        released = model.probabilities_of([workloads[i] for i in bounded])
        bounds = {i: round(workload_bound(pi, measured[i], terms[i], rows, total,
                                          total_error, confidence), 6)
                  for i, pi in zip(bounded, released)}
    out: List[Dict] = [{"attributes": list(w), "measured": i in bounds,
                        "periods_measured": int(feeds), "max_abs_error": bounds.get(i)}
                       for i, (w, feeds) in enumerate(zip(workloads, fed))]
    return {"period": int(period), "confidence": confidence, "rows": int(rows),
            "bound": ("max over the workload's cells of |released share - true share| "
                      "at this period, with the stated confidence per workload; "
                      "measured: the workload's noisy counter covers every period so far"),
            "workloads": out}
