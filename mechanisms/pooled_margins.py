"""Pooled one-way margins for the proposed tabular synthesizer (Kumar, Strohmer and
Vershynin 2024, Algorithm 3; our departure from it, ``TabularConfig.margins="pooled"``,
docs/tabular.md "Pooled one-way margins"; the comparison: bench/results/tabular_floor.md).

Why.  Algorithm 3 measures a workload W_j only in the periods that select it, and the
fit sees W_j's counter C_j(t) plus an imputed remainder for all the other periods.  An
attribute a is held by many workloads, and every period's k selections usually measure
some of them: summed over the workload's other attributes, the counter increment
∇C_j(t) = W_j(∇f_t) + noise is an unbiased measurement of the period's one-way margin
of every a ∈ W_j.  The information about a's margin is spread over all these
measurements; the remainder of any one workload cannot see it.

What.  For period t and attribute a, the pool's period estimate is

    m_a(t) = Σ_j (1/v_{j,a}) · Σ_{W_j \\ a} ∇C_j(t) / Σ_j (1/v_{j,a}),
    v_{j,a} = σ_j² · |W_j| / |a|,

over the workloads j selected at t that hold a (inverse-variance weighted; σ_j² the
per-cell variance of the increment, exact for the ``simple`` counter, the counter's
one-step variance for the others), with per-cell variance 1 / Σ_j 1/v_{j,a}.  A period
in which no selected workload holds a is imputed at B̂_t · ŝ_a: the period's noisy size
times a's *level share*, the measured increments m_a(τ) discounted by
``LEVEL_DISCOUNT`` per later measurement of a and normalised (the model's margin before
a is first measured): an average of a's last ten or so measurements, however far apart
they are.  (Discounted per period instead, an attribute measured once in many periods
— a many-valued one reached only by the coverage slot — would be imputed from its last
noisy measurement alone, clipped at 0, which can be further from the truth than
uniform: bench/results/tabular_flights_check.md.)  The pooled
margin M_a(t) = Σ_{τ ≤ t} m_a(τ) goes to the fit (A_Dataset) beside the selected
workloads' measurements, after them.

On a stream that reads as exchangeable (the adaptive remainder's γ > 0,
``tabular.stationary_weight``), the target is mixed with the stream's size times a's
share weighted by each period's precision (:func:`shares_update`,
:func:`exchangeable_targets`): M_a(t) ← (1 − γ)·M_a(t) + γ·|M_a(t)|·p̂_a.  Why: M_a sums
every period's estimate with weight 1, which is right while every period carries the same
noise; under the selection schedule (``tabular.period_selections``) the first periods make
k = 3 measurements at 3 times the noise of the later ones' one, and their noise would stay
in M_a for good.  The weighting helps most on small batches
(bench/results/tabular_selection_schedule.md).  States saved without the shares start
them at the next period (until then the sums are used).

Privacy.  Post-processing of the counters' outputs and of the noisy sizes: no budget.
The pool's sums are derived from private counters and live in the private state.
"""
from __future__ import annotations

from typing import Dict, Mapping, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms.marginals import Domain, Workload

__all__ = ["LEVEL_DISCOUNT", "Margins", "attributes", "period_margins", "level_share",
           "period_estimate", "targets", "commit", "shares_update", "weighted_share",
           "exchangeable_targets"]

LEVEL_DISCOUNT = 0.9  # weight of a measured one-way increment, per later measurement

Margins = Dict[str, np.ndarray]


def attributes(workloads: Sequence[Workload]) -> Tuple[str, ...]:
    """The attributes the pool tracks: those of the workloads, in first-seen order."""
    seen = []
    for w in workloads:
        seen.extend(a for a in w if a not in seen)
    return tuple(seen)


def period_margins(domain: Domain, workloads: Sequence[Workload],
                   increments: Mapping[int, np.ndarray],
                   variances: Mapping[int, float]) -> Dict[str, Tuple[np.ndarray, float]]:
    """m_a(t) and its per-cell variance for every attribute a measured this period.

    ``increments[j]``: the noisy increment ∇C_j(t) of selected workload j (C order over
    the workload's cells); ``variances[j]``: its per-cell noise variance σ_j²."""
    sizes = dict(zip(domain.names, domain.sizes))
    weighted: Dict[str, list] = {}
    for j, increment in increments.items():
        w = workloads[j]
        table = np.asarray(increment, dtype=np.float64).reshape([sizes[a] for a in w])
        for k, a in enumerate(w):
            others = tuple(x for x in range(len(w)) if x != k)
            margin = table.sum(axis=others) if others else table
            variance = max(float(variances[j]), 1e-12)  # noise-free counters: equal weights
            weight = sizes[a] / (variance * domain.size(w))  # 1 / v_{j,a}
            weighted.setdefault(a, []).append((margin, weight))
    out = {}
    for a, parts in weighted.items():
        total = sum(weight for _, weight in parts)
        out[a] = (sum(margin * weight for margin, weight in parts) / total, 1.0 / total)
    return out


def level_share(levels: Margins, a: str, model) -> np.ndarray:
    """ŝ_a: the discounted measured increments of a, normalised; before a has been
    measured (or if they sum to nothing), the model's one-way distribution of a."""
    level = levels.get(a)
    if level is not None:
        positive = np.clip(level, 0.0, None)
        if positive.sum() > 0:
            return positive / positive.sum()
    return np.asarray(model.probabilities((a,)), dtype=np.float64)


def period_estimate(measured: Mapping[str, Tuple[np.ndarray, float]], levels: Margins,
                    a: str, batch: float, model) -> np.ndarray:
    """m_a(t) where a was measured, else the imputation B̂_t · ŝ_a."""
    if a in measured:
        return measured[a][0]
    return max(float(batch), 0.0) * level_share(levels, a, model)


def targets(sums: Margins, levels: Margins, measured, batch: float, model) -> Margins:
    """M_a(t) = M_a(t − 1) + m_a(t) for every tracked attribute (``sums`` hold
    M_a(t − 1)): what the fit matches."""
    return {a: sums[a] + period_estimate(measured, levels, a, batch, model) for a in sums}


def commit(sums: Margins, levels: Margins, measured, batch: float, model
           ) -> Tuple[Margins, Margins]:
    """The pool after period t: M_a(t), and the levels L_a ← γ·L_a + m_a(t) for measured
    a (γ = ``LEVEL_DISCOUNT``; an unmeasured a keeps its level)."""
    new_sums = targets(sums, levels, measured, batch, model)
    new_levels = dict(levels)
    for a, (margin, _) in measured.items():
        if a in new_sums:
            new_levels[a] = LEVEL_DISCOUNT * new_levels.get(a, 0.0) + margin
    return new_sums, new_levels


def shares_update(shares: Margins, measured, batch: float) -> Margins:
    """The precision-weighted one-way shares after a period: for every measured attribute
    a, its period margin m_a(t) (per-cell noise variance v) estimates the shares by
    m_a(t)/B with per-cell variance (v + B/|a|)/B² at a cell of average share; weight
    w = B²/(v + B/|a|).  ``shares[a]`` holds (Σ w·m_a/B, Σ w) as one array (the sum's
    cells, then the weight).  ``batch``: the public batch estimate B̂ (at period 1, the
    margin's own noisy total)."""
    out = dict(shares)
    for a, (margin, variance) in measured.items():
        size = float(batch) if batch > 0 else max(float(np.sum(margin)), 1.0)
        w = size * size / (max(float(variance), 0.0) + size / margin.size)
        held = out.get(a)
        held = np.zeros(margin.size + 1) if held is None else held
        out[a] = held + np.append(w * np.asarray(margin, dtype=np.float64) / size, w)
    return out


def weighted_share(shares: Margins, a: str):
    """p̂_a: the positive part of Σ w·m_a/B / Σ w, normalised; None before a is measured."""
    held = shares.get(a)
    if held is None or held[-1] <= 0:
        return None
    positive = np.clip(held[:-1] / held[-1], 0.0, None)
    return positive / positive.sum() if positive.sum() > 0 else None


def exchangeable_targets(targets_: Margins, shares: Margins, gamma: float) -> Margins:
    """(1 − γ)·M_a + γ·|M_a|·p̂_a for every a with a weighted share (the others as given):
    on an exchangeable stream every period's margin estimates the same shares, so the
    stream's margin is its size times their precision-weighted mean."""
    out = dict(targets_)
    for a, values in targets_.items():
        share = weighted_share(shares, a)
        if share is not None:
            out[a] = (1.0 - gamma) * values + gamma * float(np.sum(values)) * share
    return out
