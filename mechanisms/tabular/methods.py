"""One period of the proposed method (Kumar et al. 2024, §6, Algorithm 3: select,
measure, fit, release) and of the baseline (§5, Algorithm 2).

Release (line 19).  ``combine="last"`` (the aim rules): g_t = h_{t,k}, since the average
gives the last measurement 1/k of its weight; ``"average"`` (``paper``):
g_t = avg_l h_{t,l}.  Sizes are post-processing of the noisy measurements (no extra
budget): every noisy histogram of a period's records sums to an unbiased estimate of
|∇f_t|, and the fit of iteration l uses B̂_t, the inverse-variance weighted mean of these
sums over the workloads measured so far in the period (variance = cells × per-cell noise
variance).  The proposed method fits at n̂_t = max(|g_{t−1}| + B̂_t, 0) and releases
``size`` = round(|g_t|).

Baseline (§5, Algorithm 2, StreamingMWEM, workload form).  An independent offline
MWEM-style synthesizer on each period's new records ∇f_t with budget ε per period: k
selections by the exponential mechanism (the same utilities with T_i = W_i(∇f_t), same
Δ) and k measurements W_j(∇f_t) + discrete Laplace of scale 1/((1 − s)·ε/k) (L1
sensitivity 1), fitted with A_Dataset from h_{t,0} = the previous increment ∇g_{t−1}
(``baseline_start="previous"``, default; a release, so post-processing) or the uniform
distribution (``"uniform"``: Algorithm 2 leaves h_{t,0} unstated, and from uniform every
attribute the period's measurements miss is uniform in ∇g_t).  By parallel composition
across periods (each record lives in one period's ∇f) the stream is ε-DP.  The release is
the increment ∇g_t, which the I/O layer appends: g_t = g_{t−1} + ∇g_t.  The paper's MW
step uses the true |∇f_t|, which is private; the code uses the noisy size
(``increment_size`` = round(|∇g_t|), ``size`` = Σ_{s ≤ t} increment sizes).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms import pooled_margins
from continual_synth.mechanisms.distributions import average_models
from continual_synth.mechanisms.fitting import Measurement
from continual_synth.mechanisms.samplers import Sampler, discrete_laplace_variance
from continual_synth.mechanisms.tabular.config import TabularConfig
from continual_synth.mechanisms.tabular.state import (TabularRelease, TabularState,
                                                      _check_histograms, _copy_state,
                                                      check_step, period_cost)
from continual_synth.mechanisms.tabular.remainder import (DRIFT_WARMUP, _carry_increment,
                                                          _current_share, _drift_update,
                                                          _shrunk_share, _size_estimate,
                                                          stationary_weight)
from continual_synth.mechanisms.tabular.selection import (_bias, _count_discounted,
                                                          _staleness, _utilities,
                                                          estimate_noise, period_selections,
                                                          selection_size, starved_cover)
from continual_synth.mechanisms.tabular.structure import informative, room_for, yielding
from continual_synth.mechanisms.tabular.wide import _project, _wide_extras, _wide_set

__all__ = ["step"]


def step(config: TabularConfig, state: TabularState, period_histograms,
         sampler: Sampler) -> Tuple[TabularState, TabularRelease]:
    """One period.  ``period_histograms``: the exact workload histograms of ∇f_t in
    ``config.workloads`` order (non-negative int arrays).  Returns a new state and the
    release; the input state is not modified."""
    period = state.period + 1
    check_step(config, state, period)
    hists = _check_histograms(config, period_histograms)
    new = _copy_state(state)
    new.period = period
    if config.method == "proposed":
        release = _step_proposed(config, new, hists, sampler, period)
    else:
        release = _step_baseline(config, new, hists, sampler, period)
    label = "stream" if period == 1 else f"period {period}"
    new.ledger.charge(period_cost(config, period), label, period=period,
                      epsilon_on_period_records=config.epsilon,
                      selections=[list(w) for w in release.chosen])
    return new, release


def _select_measure_fit(config, sampler, targets, start, bias, measure, measurement,
                        size_of, rescale: bool, counts: Sequence[int], batch: int = 0,
                        margins=None, limit: Optional[int] = None,
                        selections: Optional[int] = None, cover: bool = False,
                        fed: Optional[List[int]] = None, wide_cap: float = math.inf,
                        steer: bool = False, evidence=None):
    """The k select-measure-fit iterations both algorithms share (Algorithm 3 lines 9-18;
    Algorithm 2 lines 6-20): select j among the eligible workloads not yet selected this
    period by the exponential mechanism on the utilities against ``targets``, measure it
    (``measure(j)`` feeds the period's records → a noisy histogram of ∇f_t and its
    per-cell noise variance; the last ``refresh`` of the k iterations take instead the
    stalest candidate, :func:`_staleness`: a public choice that spends none of the
    selection budget and keeps every attribute and workload measured now and then), and
    fit h_{t,l} = A_Dataset(measurements so far, warm start
    h_{t,l−1}) at the noisy size ``size_of(B̂)`` (B̂: the inverse-variance weighted mean
    of the noisy period sizes measured so far; ``measurement(j, size)`` → the values the
    fit matches and their per-cell variance).  A workload is eligible when the fitted
    model stays within ``limit`` with it (a public check on the model).  ``rescale``:
    warm-start from h_{t,l−1} rescaled to the new size (the baseline, whose h_{t,0} is
    the empty uniform table).  ``margins(selected, size)``: further measurements (the
    pooled one-way margins) fitted after the selected workloads'.  ``limit``: the
    model's size limit this period (:meth:`TabularConfig.model_limit`; default the
    fitter's ``max_cells``).  ``selections``: k_t, this period's k (default
    ``config.selections``; :func:`period_selections`), each selection at s·ε/k_t.
    ``cover``: the period's first slot measures :func:`starved_cover` instead, when there
    is one (a public choice, like a refresh slot).  ``fed`` (``wide_cells``): the list
    that receives the workloads fed from a wide measurement but not fitted
    (``wide_fit="inside"``); the fitted ones join the selected.  ``steer``: only the
    last iterate is released (``combine="last"``), so the others are fitted as steering
    fits (:meth:`~continual_synth.mechanisms.fitting.Fitter.fit`) and the last to the
    full tolerance (refitted if the candidates ran out before slot k).  ``evidence(i)``
    (``structure="informative"``): workload i's counter sum C_i(t) and its noise
    variance, from which :func:`informative` decides whether the fit takes i's
    measurement, and :func:`yielding` which pairs of the structure give way to a
    workload that would not fit otherwise (such a workload is eligible, and its
    selection takes the fewest of them out: :func:`room_for`); None: the fit takes every
    measurement and nothing leaves.  Returns (selected indices, chosen indices, iterates):
    ``chosen`` the workloads the k slots chose, in order; ``selected`` adds those measured
    with them from a wide set."""
    fitter = config.fitter()
    workloads, cells = config.workloads, config.cells
    h = start
    k = config.selections if selections is None else selections
    selected, chosen, sums, variances, iterates = [], [], [], [], []
    steered = False  # whether the last iterate is a steering fit
    total = None     # the fits' size: this period's noisy size once a measurement is made
    for slot in range(k):   # slot l − 1 (``selected`` also holds the wide extras)
        structure = fitter.structure(h)
        open_ = [i for i in range(len(workloads)) if i not in selected
                 and (fed is None or i not in fed)]
        candidates = [i for i in open_ if fitter.fits(structure, workloads[i], limit)]
        rooms = {}   # a workload that fits once pairs of no shown dependence give way
        if evidence is not None and len(candidates) < len(open_):
            index = {w: i for i, w in enumerate(workloads)}
            giving = yielding(fitter, structure, index, evidence, set(selected))
            for i in (set(open_) - set(candidates) if giving else ()):
                room = room_for(fitter, structure, workloads[i], giving, limit)
                if room is not None:
                    rooms[i] = room
            candidates = sorted(candidates + list(rooms))
        if not candidates:
            break
        forced = (starved_cover(config, h, candidates, bias, batch, counts)
                  if cover and slot == 0 else None)
        if forced is not None:  # a public choice (no data used)
            j = forced
        elif slot >= k - config.refresh:
            # a refresh slot: a public choice (no data used)
            j = min(candidates, key=lambda i: _staleness(workloads, counts, selected, i))
        else:
            size = selection_size(config, total, size_of(batch) if batch > 0 else None)
            u = _utilities(config, targets, h, candidates, bias, batch, size)
            if config.selection_discount == "count":
                u = _count_discounted(u, counts, candidates)
            j = candidates[sampler.exponential_mechanism(
                u, config.selection_epsilon_at(k),
                config.utility_sensitivity_at(size is not None))]
        wide = _wide_set(config, j, wide_cap)
        extras = _wide_extras(config, fitter, structure, j, wide, selected + (fed or []), limit)
        selected.append(j)
        chosen.append(j)
        increment, variance = measure(j, extras, wide) if extras else measure(j)
        if extras and config.wide_fit == "inside":   # fit an extra only inside the tree
            fed.extend(i for i in extras if not fitter.fits(structure, workloads[i], 0))
            extras = [i for i in extras if i not in fed]
        selected.extend(extras)
        sums.append(float(increment.sum()))
        variances.append(variance * cells[j])
        total = size_of(_size_estimate(sums, variances))
        measurements = []
        for i in selected:
            if evidence is not None and not informative(fitter, structure, workloads[i],
                                                        *evidence(i)):
                continue   # a departure from independence within its noise: not fitted
            values, var = measurement(i, total)
            measurements.append(Measurement(workloads[i], values, math.sqrt(var)))
        if margins is not None:
            measurements.extend(margins(selected, total))
        steered = steer and slot < k - 1
        h = fitter.fit(measurements, total, warm_start=h.scaled(total) if rescale else h,
                       steer=steered, drop=rooms.get(j, ()))
        iterates.append(h)
    if steered:  # the candidates ran out: the released iterate to the full tolerance
        iterates[-1] = fitter.fit(measurements, total, warm_start=h)
    return selected, chosen, iterates


def _step_proposed(config, new, hists, sampler, period) -> TabularRelease:
    workloads = config.workloads
    q = len(workloads)
    g_prev = new.model
    targets = [p * g_prev.total + hist
               for p, hist in zip(g_prev.probabilities_of(workloads), hists)]

    batch = int(round(g_prev.total / (period - 1))) if period > 1 else 0
    # k_t and the share of a counter's budget each of its measurements spends, k/k_t
    selections = period_selections(config, new.drift, batch)
    share = config.selections / selections

    def measurement_variance(i, time):
        counter = new.counters[i]
        if config.remainder in ("adaptive", "model", "increment"):
            return max(counter.variance(time), counter.last_variance)
        anchor = new.anchor_times[i]
        var = counter.variance(time) - (counter.variance(anchor) if anchor >= 1 else 0.0)
        return max(var, counter.variance(1))

    def next_variance(i):
        counter = new.counters[i]
        if config.remainder not in ("adaptive", "model", "increment"):
            return measurement_variance(i, counter.time + 1)
        if share != 1.0:
            return counter.next_variance(share)
        return max(counter.next_variance(), counter.last_variance)

    next_sds = [math.sqrt(next_variance(i))
                if (config.horizon is None or new.counters[i].time < config.horizon) else 0.0
                for i in range(q)]
    if config.bias_noise == "estimate":
        next_sds = estimate_noise(next_sds, [c.time for c in new.counters])
    bias = _bias(config, next_sds)

    increments = {}
    # γ of the adaptive remainder, from the periods before this one (needs the pool)
    gamma = (stationary_weight(new.drift)
             if config.remainder == "adaptive" and config.margins == "pooled" else 0.0)

    def measure(j, extras=(), wide=None):
        if not extras:
            values = {j: new.counters[j].feed(hists[j], sampler, share)}   # line 15
            if new.noise_terms is not None:
                _add_noise_terms(new.noise_terms[j], new.counters[j].entry_param(share), 1)
        else:  # the wide measurement of S_j at the budget of j's entry, projected
            param = new.counters[j].entry_param(share)
            full = config.wide_sets[j]
            exact = _project(config.domain, full, wide,
                             hists[config.input_workloads.index(full)])   # exact, then noise
            noisy = exact + np.asarray(
                sampler.discrete_laplace(param, config.domain.size(wide)), dtype=np.float64)
            v = new.counters[j].node_variance(param) * config.domain.size(wide)
            values = {i: new.counters[i].feed_measured(
                _project(config.domain, wide, workloads[i], noisy), v / config.cells[i])
                for i in [j, *extras]}
            if new.noise_terms is not None:  # a cell of W_i sums |S|/|W_i| wide cells
                for i in values:
                    _add_noise_terms(new.noise_terms[i], param,
                                     config.domain.size(wide) / config.cells[i])
        for i, value in values.items():
            increments[i] = value - new.counter_values[i]
            new.counter_values[i] = value
        return increments[j], new.counters[j].last_variance

    def measurement(j, total):
        value = new.counter_values[j]
        if config.remainder == "model":
            rest = max(total - float(value.sum()), 0.0)
            values = value + rest * g_prev.probabilities(workloads[j])
        else:  # ``paper`` (lines 16-17), ``increment`` or ``adaptive``
            values = value + new.remainders[j]
            unseen = float(new.remainders[j].sum())
            if config.remainder == "adaptive" and gamma > 0 and unseen > 0:
                imputed = new.remainders[j] / unseen
                if config.unseen_share == "current":   # re-imputed from g_{t−1}
                    current = _current_share(imputed, g_prev.probabilities(workloads[j]),
                                             gamma)
                    values = values + unseen * (current - imputed)
                    imputed = current
                shrunk = _shrunk_share(value, imputed,
                                       new.counters[j].variance(new.counters[j].time))
                values = values + gamma * unseen * (shrunk - imputed)
        return values, measurement_variance(j, new.counters[j].time)

    def measured_margins(selected):
        return pooled_margins.period_margins(
            config.domain, workloads, {j: increments[j] for j in selected},
            {j: new.counters[j].last_variance for j in selected})

    def margins(selected, total):
        measured = measured_margins(list(selected) + fed)
        pooled = pooled_margins.targets(new.margin_sums, new.margin_levels, measured,
                                        total - g_prev.total, g_prev)
        if gamma > 0:   # an exchangeable stream: its shares, weighted by precision
            pooled = pooled_margins.exchangeable_targets(
                pooled, pooled_margins.shares_update(new.margin_shares, measured, batch),
                gamma)
        return [Measurement((a,), values) for a, values in pooled.items()]

    pooling = config.margins == "pooled"
    fed = []
    # a wide set's cap c·B̂/v: none where the entry's noise variance v is 0 (a discrete
    # Laplace of scale far below one count, as at ε = 1000: before, a division by zero)
    wide_cap = math.inf
    if config.wide_cells is not None and config.wide_noise is not None:  # simple counter
        entry_variance = new.counters[0].node_variance(new.counters[0].entry_param(share))
        if entry_variance > 0:
            wide_cap = config.wide_noise * batch / entry_variance
    selected, chosen, iterates = _select_measure_fit(
        config, sampler, targets, g_prev, bias, measure, measurement,
        lambda increment: max(g_prev.total + increment, 0.0), rescale=False,
        counts=new.selection_counts, batch=batch, margins=margins if pooling else None,
        limit=config.model_limit(period), selections=selections,
        cover=config.coverage == "reachable", fed=fed,   # lines 9-18
        wide_cap=wide_cap, steer=config.combine == "last",
        evidence=(lambda j: (new.counter_values[j], new.counters[j].variance(
            new.counters[j].time))) if config.structure == "informative" else None)
    g = (average_models(config.domain, iterates) if config.combine == "average"
         else iterates[-1])                                      # line 19
    if pooling:
        measured = measured_margins(selected + fed)
        if period > DRIFT_WARMUP:
            new.drift = _drift_update(new.drift, new.margin_sums, measured,
                                      g.total - g_prev.total)
        new.margin_sums, new.margin_levels = pooled_margins.commit(
            new.margin_sums, new.margin_levels, measured, g.total - g_prev.total, g_prev)
        new.margin_shares = pooled_margins.shares_update(new.margin_shares, measured, batch)
    if config.remainder in ("adaptive", "increment"):
        _carry_increment(config, new, g, g.total - g_prev.total, selected, increments, fed)
    for i in range(q):                                           # lines 20-21
        if i not in selected and i not in fed:
            if config.remainder == "paper":
                new.remainders[i] = g.probabilities(workloads[i]) * g.total \
                    - new.counter_values[i]
            new.anchor_times[i] = new.counters[i].time
        else:
            new.selection_counts[i] += 1
    new.model = g
    new.size = int(round(g.total))
    new.last_selected = list(chosen)
    return TabularRelease(period=period, model=g, size=new.size, increment=False,
                          increment_size=new.size,
                          selected=tuple(workloads[j] for j in selected), method="proposed",
                          chosen=tuple(workloads[j] for j in chosen))


def _add_noise_terms(terms: Dict[float, float], scale: float, count: float) -> None:
    """Record ``count`` more discrete Laplace draws of ``scale`` in each cell of a
    counter value (:attr:`TabularState.noise_terms`)."""
    terms[float(scale)] = terms.get(float(scale), 0.0) + float(count)


def _step_baseline(config, new, hists, sampler, period) -> TabularRelease:
    fitter = config.fitter()
    workloads, cells = config.workloads, config.cells
    q = len(workloads)
    scale = config.laplace_scale
    noise_var = discrete_laplace_variance(scale)
    bias = _bias(config, [math.sqrt(noise_var)] * q)
    targets = [h_.astype(np.float64) for h_ in hists]
    noisy = {}

    def measure(j):
        noisy[j] = (hists[j] + np.asarray(sampler.discrete_laplace(scale, cells[j]),
                                          dtype=np.int64)).astype(np.float64)
        return noisy[j], noise_var

    start = fitter.start(0.0)
    if config.baseline_start == "previous" and new.model is not None:
        start = new.model.scaled(0.0)
    selected, chosen, iterates = _select_measure_fit(
        config, sampler, targets, start, bias, measure,
        lambda j, total: (noisy[j], noise_var), lambda increment: increment, rescale=True,
        counts=new.selection_counts,
        batch=int(round(new.size / (period - 1))) if period > 1 else 0)
    increment = average_models(config.domain, iterates)
    increment_size = int(round(increment.total))
    for j in selected:
        new.selection_counts[j] += 1
    new.size = state_size = new.size + increment_size
    new.last_selected = list(chosen)
    if config.baseline_start == "previous":
        new.model = increment
    return TabularRelease(period=period, model=increment, size=state_size, increment=True,
                          increment_size=increment_size,
                          selected=tuple(workloads[j] for j in selected), method="baseline",
                          chosen=tuple(workloads[j] for j in chosen))
