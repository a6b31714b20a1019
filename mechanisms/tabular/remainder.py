"""The periods a workload's counter did not see (Kumar et al. 2024, §6.2, lines 16-17 and
20-21), and the drift test of the pooled one-way margins that the adaptive remainder and
the selection schedule read.

Measurement (§6.2, lines 15-17 and 20-21).  The selected counter C_j (a ``dim = |W_j|``
counter of budget (1 − s)·ε/k, Definition 3.11, kind ``counter``) is fed W_j(∇f_t), and
m(t, j) = C_j(t) + the remainder, the estimate of j's share of the periods C_j did not
see (``remainder``):

* ``paper``: r(t, i) = W_i(g_t) − C_i(t) for unselected i (line 21), m(t, j) = C_j(t) +
  r(t − 1, j) (lines 16-17).  §6.2 prints r's two cases the other way round; the code
  follows the algorithm's lines 16 and 20-21.
* ``increment``: R_j(t − 1), the unseen periods imputed from the increment model δ_τ of
  each such period τ, the estimate of ∇f_τ made at its own time (§6.2's intent: "at any
  such time τ … we assume that q_i(g_τ) is close to the true value";
  :func:`_carry_increment`).
* ``adaptive`` (default): ``increment`` plus, while the stream reads as exchangeable, a
  shrinkage of the imputation toward the share the counter itself saw,
  m(t, j) = C_j(t) + R_j(t − 1) + γ·w·|R_j|·(Ĉ_j − R̂_j), γ from a public test of the
  pooled one-way margins (:func:`_drift_update`, :func:`stationary_weight`: 1 on a
  stream in random order, 0 on a sorted one) and w a James-Stein weight
  (:func:`_shrunk_share`); on a sorted stream it is ``increment``
  (``bench/results/tabular_tables_adult_adaptive_notes.md``).  Under
  ``unseen_share="current"`` (its default) R̂_j is first moved to
  (1 − γ)·R̂_j + γ·P_j(g_{t−1}): on an exchangeable stream the unseen periods are imputed
  from the current model, not from the increment models of their own time
  (:func:`_current_share`); ``"carried"`` keeps R̂_j (saved states, ``--rule paper``).
* ``model``: (n̂_t − |C_j(t)|)·P_j(g_{t−1}), the unseen periods from the current model,
  a fixed point that does not correct the model's own error on ordered streams
  (``bench/results/tabular_floor.md``).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms.distributions import average_models
from continual_synth.mechanisms.fitting import Measurement

__all__ = ["INCREMENT_PULL", "DRIFT_DISCOUNT", "DRIFT_WARMUP", "EXCHANGEABLE_BELOW",
           "DRIFTING_ABOVE", "drift_estimate", "stationary_weight"]


INCREMENT_PULL = 0.2  # weight of g_t in the prior of the increment model δ_t


# remainder="adaptive": the drift estimate Δ̂ (the mean squared distance between a
# period's one-way shares and the stream's, from the pooled margins' period increments,
# discounted by DRIFT_DISCOUNT per period, from period DRIFT_WARMUP + 1) and the weight
# of the shrinkage γ = 1 at Δ̂ ≤ EXCHANGEABLE_BELOW, 0 at Δ̂ ≥ DRIFTING_ABOVE, linear
# between (see :func:`_drift_update`, :func:`stationary_weight`).
DRIFT_DISCOUNT = 0.98


DRIFT_WARMUP = 5


EXCHANGEABLE_BELOW = 0.02


DRIFTING_ABOVE = 0.06


def _size_estimate(sums: Sequence[float], variances: Sequence[float]) -> float:
    """Inverse-variance weighted mean of noisy totals, clipped at 0."""
    w = 1.0 / np.maximum(np.asarray(variances, dtype=np.float64), 1e-12)
    return max(float(np.dot(w, sums) / w.sum()), 0.0)


def _drift_update(drift: Tuple[float, float, float], sums, measured, batch: float
                  ) -> Tuple[float, float, float]:
    """One period's update of the drift estimate of ``remainder="adaptive"``: for every
    attribute a whose one-way margin the period measured (the pool's m_a(t), per-cell
    noise variance v_a; :func:`pooled_margins.period_margins`), with S_a = M_a(t − 1)/
    |M_a(t − 1)| the pooled share so far and ν_a = |a|·v_a + B̂_t·(1 − Σ S_a²) what
    ‖m_a(t) − B̂_t·S_a‖² is on average if the period is B̂_t records drawn from S_a and
    measured with that noise (the multinomial's Σ_c B·s_c(1 − s_c) plus the noise),

        z_a = ‖m_a(t) − B̂_t·S_a‖² / ν_a,    κ_a = B̂_t² / ν_a.

    E z_a = 1 on an exchangeable stream (records in random order); a period whose shares
    are p_t adds κ_a·‖p_t − S_a‖² to it, so Δ̂ = Σ(z − 1)/Σκ estimates the mean squared
    distance ‖p_t − S‖² between a period's shares and the stream's: 0 when the periods
    are exchangeable, above ``DRIFTING_ABOVE`` on a stream sorted by an attribute (the
    threshold: bench/results/tabular_tables_adult_adaptive_notes.md).  Dividing by κ keeps
    Δ̂ on that scale when the noise swamps the sampling (small batches, small ε: z is
    then near 1 on any stream, and z alone would call a sorted stream exchangeable).
    Δ̂ is the κ-weighted mean of the attributes' d_a = (z_a − 1)/κ_a, with each weight
    capped at w_a = min(κ_a, B̂): κ_a > B̂ only where the noise is below the sampling
    deficit of a skewed attribute, and there every attribute counts the same.  Uncapped,
    an attribute constant so far (Σ S_a² = 1: ν_a is its noise alone) would have, at
    large ε, a κ_a thousands of times the others', so its d_a ≈ 0 (constant again this
    period) would outvote every drifting attribute and a stream sorted by it would read
    as exchangeable.
    Where the noise dominates (κ_a < B̂) the sums are the plain ones.  Returns the
    discounted sums (Σ γ^age·w·z/κ, Σ γ^age·w/κ, Σ γ^age·w), γ = ``DRIFT_DISCOUNT``.
    Post-processing of the counters' outputs (no budget)."""
    total, weight, power = (DRIFT_DISCOUNT * x for x in drift)
    if batch > 0:
        for a, (margin, variance) in measured.items():
            mass = float(sums[a].sum()) if a in sums else 0.0
            if mass <= 0:
                continue
            share = np.clip(sums[a] / mass, 0.0, 1.0)
            null = margin.size * variance + batch * (1.0 - float(np.sum(share * share)))
            if null > 0:
                z = float(np.sum((margin - batch * share) ** 2)) / null
                kappa = batch ** 2 / null
                w = min(kappa, batch)
                total += w * z / kappa
                weight += w / kappa
                power += w
    return total, weight, power


def drift_estimate(drift: Tuple[float, float, float]) -> Optional[float]:
    """Δ̂ = Σw(z − 1)/κ / Σw of :func:`_drift_update` (Σ(z − 1)/Σκ while no weight is
    capped); None before any period was scored."""
    total, weight, power = drift
    if weight <= 0 or power <= 0:
        return None
    return (total - weight) / power


def stationary_weight(drift: Tuple[float, float, float]) -> float:
    """γ of ``remainder="adaptive"``: 1 while the drift estimate Δ̂ (:func:`drift_estimate`)
    is at most ``EXCHANGEABLE_BELOW``, 0 from ``DRIFTING_ABOVE``, linear between; 0
    before any period has been scored."""
    d = drift_estimate(drift)
    if d is None:
        return 0.0
    return float(np.clip((DRIFTING_ABOVE - d) / (DRIFTING_ABOVE - EXCHANGEABLE_BELOW),
                         0.0, 1.0))


def _shrunk_share(counter: np.ndarray, imputed: np.ndarray, variance: float) -> np.ndarray:
    """The share of a workload's unseen periods on an exchangeable stream: w·Ĉ + (1 − w)·R̂,
    Ĉ = C_j⁺/|C_j⁺| the share of the periods j's counter saw (unbiased when the periods
    are exchangeable, but noisy: the counter's noise and the sampling of the |C_j| records
    it holds), R̂ = R_j/|R_j| the increment remainder's (less noisy, biased where the
    increment models miss j), with the positive-part James-Stein weight
    w = max(0, 1 − ν/‖Ĉ − R̂‖²), ν = |W_j|·σ²/|C_j|² + (1 − Σ R̂²)/|C_j| the expected
    ‖Ĉ − R̂‖² were R̂ the truth (σ² the counter's per-cell variance).

    With ``selection_schedule="drift"`` a counter's feeds can differ in noise (σ² is then
    their sum, and the feeds count equally, as the counter sums them:
    bench/results/tabular_selection_schedule.md)."""
    positive = np.maximum(counter, 0.0)
    mass = float(positive.sum())
    if mass <= 0:
        return imputed
    share = positive / mass
    distance = float(np.sum((share - imputed) ** 2))
    if distance <= 0:
        return imputed
    null = (counter.size * max(variance, 0.0) / mass ** 2
            + (1.0 - float(np.sum(imputed * imputed))) / mass)
    w = max(0.0, 1.0 - null / distance)
    return w * share + (1.0 - w) * imputed


def _current_share(carried: np.ndarray, current: np.ndarray, gamma: float) -> np.ndarray:
    """``unseen_share="current"``: the share imputed to the periods a workload's counter
    did not see, (1 − γ)·R̂_j + γ·P_j(g_{t−1}), before :func:`_shrunk_share` moves it
    toward the counter's own share.

    R̂_j = R_j/|R_j| sums each unseen period's increment model δ_τ as it was estimated at
    its own time τ: right on a drifting stream (each period's batch differs, and δ_τ is the
    best estimate of ∇f_τ made then), but on an exchangeable one every batch is a sample
    of the same population, whose best estimate is the newest, and R̂_j keeps the errors
    of the early, poorly measured models for good.  So where the
    drift test reads the stream as exchangeable (γ = 1) the unseen periods are imputed
    afresh from the current model g_{t−1}, which holds every measurement so far; on a
    sorted stream (γ = 0) nothing changes.  The current model alone would be a fixed
    point (a workload the model has wrong imputed from the wrong model, the ``model``
    remainder's flaw), which the James-Stein step toward the counter's share
    (:func:`_shrunk_share`, with this share as its prior) corrects, so the step is part of
    the rule (the effect of each: ``bench/results/aim_compare.md``).  g_{t−1} is a release and the counters' outputs are post-processing of
    their measurements: no budget."""
    return (1.0 - gamma) * carried + gamma * current


def _carry_increment(config, state, g, batch, selected, increments, fed=()) -> None:
    """``remainder="increment"``: the increment model δ_t and the remainders
    R_i(t) = Σ_{s ≤ t, i not selected at s} W_i(δ_s), so that a selected workload is
    measured as m(t, j) = C_j(t) + R_j(t − 1).

    Why (bench/results/tabular_floor.md, ordered streams): imputing the periods j's
    counter did not see from the current model g_{t−1} (``model``) is a fixed point — a
    workload the model has wrong is imputed from the wrong model, and a counter that saw a
    share c of the stream corrects the model only by c per selection; in an ordered
    stream the model's cumulative distribution is also not what the unseen periods held.
    δ_t estimates the period's own batch ∇f_t instead: the previous period's δ_{t−1}
    carried forward (g_1 at t = 1) and mixed with the current model g_t (weight
    ``INCREMENT_PULL``: what the periods have not measured for a while drifts back to the
    cumulative model, and a batch unlike the last one finds g_t's conditionals, not
    uniform ones, where δ_{t−1} has no mass) at the noisy batch size B̂_t, fitted (A_Dataset, warm
    start δ_{t−1}) to the period's noisy increments ∇C_j(t) of the selected workloads,
    each shrunk toward δ_{t−1}'s answer by λ_j = B̂_t / (B̂_t + E‖noise‖_1) (E‖noise‖_1 =
    √(2/π)·σ·|W_j|, σ² the increment's per-cell variance): at ε → ∞ the measured batch,
    at small ε a running average over the periods.  (λ_j discounts the noise only, not
    the batch's sampling deviation: bench/results/tabular_floor.md.)  What a workload's
    counter did not
    see is thus the sum of the batches as they were estimated at their own time (the
    drift of an ordered stream is carried, and a marginal measured once is carried to
    the later periods).  Post-processing of the counters' outputs (no budget)."""
    if batch <= 0:
        return
    fitter = config.fitter()
    prior = g.scaled(batch)
    if state.increment_model is not None:
        prior = average_models(config.domain, [state.increment_model.scaled(
            (1 - INCREMENT_PULL) * batch), g.scaled(INCREMENT_PULL * batch)]).scaled(batch)
    measurements = []
    fitted = fitter.structure(g)
    for j in selected:
        w = config.workloads[j]
        if w not in fitted:   # left out of g_t's fit (structure="informative"): and of δ_t's
            continue
        counter = state.counters[j]
        sd = math.sqrt(counter.last_variance)
        expected = batch * prior.probabilities(w)
        lam = batch / (batch + math.sqrt(2 / math.pi) * sd * config.cells[j])
        measurements.append(Measurement(w, expected + lam * (increments[j] - expected), sd))
    delta = fitter.fit(measurements, batch, warm_start=prior)
    state.increment_model = delta
    chosen = set(selected) | set(fed)
    rest = [i for i in range(len(config.workloads)) if i not in chosen]
    for i, p in zip(rest, delta.probabilities_of([config.workloads[i] for i in rest])):
        state.remainders[i] = state.remainders[i] + batch * p
