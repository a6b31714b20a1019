"""Synthetic high-dimensional tabular streams (Kumar, Strohmer and Vershynin 2024) as pure
state machines: the baseline (§5, Algorithm 2, "StreamingMWEM") and the proposed method
(§6, Algorithm 3), both in the workload form of §7.2.  References below are to that
paper unless another is named; "line n" is a line of Algorithm 3.

Where each piece is:

* setting, neighbours, sensitivity (§3, Definitions 3.2-3.3; §7.2) — :data:`RELATION`,
  :func:`step` (one period: ∇f_t's workload histograms in, a release out);
* budget split and privacy (Algorithms 2-3, Theorem 6.1) — :func:`resolved_selection_share`,
  :func:`period_cost`, :func:`period_selections`, :meth:`TabularConfig.selection_epsilon_at`;
* selection (§6.4, lines 9-12; Definition 3.8) — :func:`_utilities`, :func:`_bias`,
  :func:`estimate_noise`, :func:`starved_cover`, :func:`_select_measure_fit`;
* measurement (§6.2, lines 15-17 and 20-21; counters, Definition 3.11) —
  :func:`_step_proposed`, :func:`_carry_increment`, :func:`_shrunk_share`,
  :func:`_wide_set`, :mod:`~continual_synth.mechanisms.counters`;
* fit (§6.3, line 18, A_Dataset) — :class:`~continual_synth.mechanisms.fitting.Fitter`,
  :func:`informative`, :func:`yielding`, :func:`room_for`,
  :mod:`~continual_synth.mechanisms.pooled_margins`;
* release (line 19) and the baseline (§5, Algorithm 2) — :func:`_step_proposed`,
  :func:`_step_baseline`, :func:`manifest_fields`.

Setting (§3).  At period t a batch ∇f_t of records over the public domain 𝒳 arrives; the
stream so far is f_t = ∇f_1 + … + ∇f_t.  After every period a synthetic table g_t is
released that should answer the workloads Q (marginal histograms, §7.2 Definition 7.1)
as f_t does.

Neighbours and sensitivity (§3.3 Definition 3.3; papers README point 6).  **Event
level**: two streams are neighbours when one record is added or removed at one time
(‖f − f̃‖_∇ = 1).  Every workload histogram of ∇f_t then has L1 sensitivity 1 (a record
is in one cell of each workload, §7.2), and a record of period t changes no other
period's ∇f.

Algorithm (Algorithm 3 in the workload form of §7.2), per period t with k selections
(``selections``; the paper's k = 3, more at large ε by default: :func:`auto_selections`):

* h_{t,0} = g_{t−1}, with g_0 the uniform distribution over 0 records (the paper's
  g(0, x) = 1, line 4, would put |𝒳| phantom records into g_0, some 10^9 for 12
  attributes);
* for l = 1..k (lines 9-18): select j among the workloads J_{t,l} not yet selected in
  the period (and whose addition keeps the fitted model within its size limit), feed
  counter C_j with W_j(∇f_t) (line 15, *selective counting*: only the selected counters
  see period t), measure m(t, j), fit h_{t,l} = A_Dataset({(W_i, m(t, i))}_{i ∈ I_{t,l}},
  h_{t,l−1}) (line 18, warm start);
* release g_t (line 19); every workload i not selected keeps C_i(t) = C_i(t − 1)
  (line 20).

Two rule sets (:data:`RULES`; each rule is also its own option): ``paper``, Algorithm 3
as printed (to reproduce the paper), and ``aim`` (the default), the rules below that
depart from it where the printed ones stay far from the sampling floor even without
noise (``bench/results/tabular_floor.md``).  A configuration saved before an option
existed keeps the rule it was calibrated for (:data:`SAVED_CONFIG_DEFAULTS`).

Budget split and privacy (Algorithms 2-3, Theorem 6.1).  Each period's ε goes s·ε to
its k selections (s·ε/k each) and (1 − s)·ε to its k measurements ((1 − s)·ε/k each), s
= ``selection_share``.  Algorithms 2-3 take s = 1/2 (ε/(2k) each: ``RULES["paper"]``);
the proposed method defaults to s = 0.1, AIM's share for selection (McKenna et al. 2022):
a selection only has to find a workload whose error is far above the noise, while a
measurement's noise goes straight into the release
(``bench/results/tabular_tables_adult_share.md``).  The baseline keeps 1/2
(:data:`DEFAULT_SELECTION_SHARES`): its selections see one batch only.  A record of period
t enters (i) the period's k exponential mechanisms — the utilities of other periods use
∇f_{t'} and g_{t'−1}, a release — and (ii) the period-t entry of the k counters selected
at t, one entry each (later feeds and remainders use releases only).  So its loss is
k·s·ε/k + k·(1 − s)·ε/k = ε whatever the number of periods: the stream is ε-DP under
event-level neighbours (adaptive composition inside a period, parallel composition across
periods; Theorem 6.1's selective counting).  Under ``selection_schedule="drift"``
(:func:`period_selections`) period t makes k_t ≤ K selections of s·ε/k_t and feeds k_t
counters at (1 − s)·ε/k_t each (K the ``selection_ceiling``): ε again, with k_t a
function of earlier releases only.  The counters' noise is exact discrete Laplace
(``epsilon=(1 − s)·ε/k``, ``entries_changed=1``).  Below, "ε/(2k)" is the paper's value
of s·ε/k and (1 − s)·ε/k.

Selection (§6.4, lines 9-12).  The exponential mechanism (Definition 3.8) with the
standard calibration P(i) ∝ exp(ε'·u_i/(2Δ)), ε' = s·ε/k and Δ the exact sensitivity of
the utilities (Algorithm 3 writes ExponentialMechanism(e, ε/2k) and Algorithm 2
exp(ε/(2k)·e_i), which drop it; the factor 2 stays because the utilities are not
monotone).  Utilities:

* ``paper`` (§7.2 item 3): u_i = ‖T_i − W_i(h_{t,l−1})‖_1/|W_i| − b_i with
  T_i = W_i(∇f_t + g_{t−1}) (§6.4) and b_i = |W_i|.  One record moves ‖·‖_1 by at most
  1, so Δ = 1/min_i |W_i| (the paper's "1/4 for 2-way workloads" for binary attributes).
* ``aim``: u_i = ‖T_i − |T|·P_i(h)‖_1 − b_i, the model's distribution P_i(h) at the
  target's size (at l = 1, h = g_{t−1}, the paper's difference is the batch alone and
  cannot see g_{t−1}'s error).  One record moves T_i by 1 in one cell and |T|·P_i(h) by
  P_i(h) (L1 norm 1): Δ = 2 for every workload.

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
  (``bench/results/tabular_tables_adult_adaptive_notes.md``).
* ``model``: (n̂_t − |C_j(t)|)·P_j(g_{t−1}), the unseen periods from the current model,
  a fixed point that does not correct the model's own error on ordered streams
  (``bench/results/tabular_floor.md``).

Wide measurements (``wide_cells``, proposed method, simple counter; :data:`WIDE_CELLS`
by default from :meth:`TabularSynthesizer.create` and the command line with the aim
rules, off in :class:`TabularConfig`).  Otherwise a workload's interaction is seen only
through the records of the periods that selected it
(``bench/results/tabular_error_anatomy.md``).  The selection is unchanged, but the
selected j is measured as the marginal of a public S_j ⊇ j (:attr:`TabularConfig.wide_sets`,
shortened by ``wide_noise``: :func:`_wide_set`) with the noise of j's counter entry,
1/((1 − s)·ε/k_t) per cell.  **Sensitivity:** one record is in exactly one cell of S_j,
so the L1 sensitivity is 1 whatever |S_j|, and the wide measurement costs what feeding
C_j costs.  Its projections onto j and onto the other workloads i ⊆ S_j not yet measured
this period with |S_j| ≤ ``wide_ratio``·|W_i| are post-processing, fed to those counters
as entries without noise of their own (:meth:`SimpleCounter.feed_measured`, per-cell
variance v·|S_j|/|W_i|; :func:`_wide_extras`).  So a period still spends ε, and one record
informs every workload fed from its period's wide measurements.  Under
``wide_fit="inside"`` (default) a fed workload is fitted only when the model's junction
tree already holds it; fitting every fed workload (``"all"``) fills the model with large
cliques that leave workloads unselectable (``bench/results/tabular_wide_measurements.md``).

Fit (§6.3, line 18).  A_Dataset is :class:`~continual_synth.mechanisms.fitting.Fitter`
(``fit``: ``ipf`` on a junction-tree model by default, ``mw`` the paper's
multiplicative weights), warm-started from h_{t,l−1} and kept within the model's size
limit (:meth:`TabularConfig.model_limit`).  Pooled one-way margins (``margins="pooled"``,
the default where the fit takes them: ``ipf`` or ``mw`` with the ``adaptive``,
``increment`` or ``model`` remainder): every fit also matches each attribute's one-way
margin pooled over all the periods' counter increments of the workloads holding it
(:mod:`~continual_synth.mechanisms.pooled_margins`).  Structure
(``structure="informative"``, the default with the ``ipf`` fit and the pooled margins;
``"measured"``, every measurement fitted as the paper's A_Dataset does, under ``paper``):
a selected pair outside the model's junction tree joins the fit only when its counter's
sum departs from independence by more than the counter's noise would (:func:`informative`);
otherwise its measurement feeds only its counter and the pooled margins, and the model
completes the pair.  At the size limit, pairs of the tree whose sums show no departure
beyond sampling and noise give way to a selected workload that needs their room
(:func:`yielding`, :func:`room_for`).

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

Budget ledger (unit ε): the whole-stream guarantee ε is debited once, at period 1 (entry
"stream"), and every later period records a zero debit with what it spent on its own
records (ε: s·ε selection + (1 − s)·ε counters or measurements).  After any number of
periods ``ledger.spent`` = ε.  Periods beyond ``horizon`` are refused before any data is
used.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms import accounting, pooled_margins
from continual_synth.mechanisms.counters import (
    SHARE_KINDS,
    StreamCounter,
    UNBOUNDED_KINDS,
    counter_kinds,
    counter_units,
    make_counter,
)
from continual_synth.mechanisms.distributions import (
    FittedModel,
    average_models,
    marginal_table,
    model_from_dict,
)
from continual_synth.mechanisms.errors import (MAX_NOISE_RECORDS, InputError, ParameterError,
                                               StateError, check_next_period,
                                               check_noise_records, format_bytes,
                                               privacy_budget, probability, whole_number)
from continual_synth.mechanisms.fitting import (
    DEFAULT_MAX_CELLS,
    DEFAULT_MODEL_CELLS,
    FIT_METHODS,
    PGM_MODELS,
    Fitter,
    Measurement,
    junction_tree_cells,
)
from continual_synth.mechanisms.marginals import Domain, Workload
from continual_synth.mechanisms.samplers import Sampler, discrete_laplace_variance

ALGORITHMS = {
    "proposed": "kumar2024-algorithm-3-select-measure-fit-with-counters",
    "baseline": "kumar2024-algorithm-2-streaming-mwem",
}
METHODS = tuple(ALGORITHMS)
BIAS_CORRECTIONS = ("noise+sampling", "noise", "paper", "none")
BIAS_NOISES = ("estimate", "counter")
COVERAGES = ("reachable", "none")
UTILITIES = ("aim", "paper")
REMAINDERS = ("adaptive", "increment", "model", "paper")
COMBINES = ("last", "average")
MARGINS = ("pooled", "none")
BASELINE_STARTS = ("previous", "uniform")
SELECTION_DISCOUNTS = ("none", "count")
MODEL_GROWTHS = ("fixed", "horizon")
SELECTION_SCHEDULES = ("drift", "fixed")
WIDE_FITS = ("inside", "all")
STRUCTURES = ("informative", "measured")
# wide_ratio's default: a workload's projected cell sums at most 8 noisy cells of the wide
# set (8 against 4: bench/results/tabular_wide_measurements.md)
WIDE_RATIO = 8.0
# TabularSynthesizer.create's wide_cells for the proposed method with the simple counter
# and the aim rules (the command line's default --wide-cells): the largest wide set, in
# cells (measured on Adult in bench/results/tabular_wide_measurements.md and on tables it
# was not tuned to in bench/results/tabular_wide_untuned.md)
WIDE_CELLS = 64
# wide_noise given with wide_cells by TabularSynthesizer.create (the command line's
# --wide-cells): a projected cell's noise within the batch's sampling variance
# (_wide_set); without the cap the error rises at small eps on small batches
# (bench/results/tabular_wide_measurements.md)
WIDE_NOISE = 1.0
# Selections per period k (``selections=None`` in :meth:`TabularSynthesizer.create`, the
# command line's default): the paper's k = 3, more once a measurement's noise is below one
# record per cell (see :func:`auto_selections`).
PAPER_SELECTIONS = 3
AUTO_SELECTIONS_MAX = 12  # each selection costs a fit: a step's time grows with k
# ... except in the wide regime (noise of at most one record per cell even at k = 24):
# there k = 24 with the model's size limit growing over the horizon (model_growth).
WIDE_SELECTIONS = 24
# The two rule sets: ours (the defaults) and the paper's as printed (to reproduce it).
RULES = {"aim": {"utility": "aim", "bias_correction": "noise+sampling", "remainder": "adaptive",
                 "combine": "last", "refresh": 0, "baseline_start": "previous", "margins": None,
                 "selection_share": None, "selection_discount": "none",
                 "model_growth": None, "bias_noise": None, "coverage": None,
                 "structure": None},
         "paper": {"utility": "paper", "bias_correction": "paper", "remainder": "paper",
                   "combine": "average", "refresh": 0, "baseline_start": "uniform",
                   "margins": "none", "selection_share": 0.5, "selection_discount": "none",
                   "model_growth": "fixed", "bias_noise": "counter", "coverage": "none",
                   "structure": "measured"}}
# Share s of each period's ε spent on its k selections (the rest on its k measurements).
# The paper's is 1/2; AIM (McKenna et al. 2022) gives selection a tenth, which the proposed
# method takes.  The baseline's selections see one batch, whose errors are small next to
# the selection noise, and s = 0.1 does not help it consistently, so it keeps the paper's
# 1/2 (both measured in bench/results/tabular_tables_adult_share.md).
DEFAULT_SELECTION_SHARES = {"proposed": 0.1, "baseline": 0.5}
# What a configuration saved before an option existed meant: no pool, the paper's split.
SAVED_CONFIG_DEFAULTS = {"margins": "none", "selection_share": 0.5, "selection_discount": "none",
                         "model_growth": "fixed", "selection_schedule": "fixed",
                         "bias_noise": "counter", "coverage": "none",
                         "structure": "measured"}
RELATION = "event-level add/remove of one record"
MAX_WORKLOAD_CELLS = 1 << 26  # cells of all workload histograms together (512 MiB of int64)
INCREMENT_PULL = 0.2  # weight of g_t in the prior of the increment model δ_t
FORMAT_VERSION = 2  # 2: the aim rules, the ipf fit (junction-tree models)
# remainder="adaptive": the drift estimate Δ̂ (the mean squared distance between a
# period's one-way shares and the stream's, from the pooled margins' period increments,
# discounted by DRIFT_DISCOUNT per period, from period DRIFT_WARMUP + 1) and the weight
# of the shrinkage γ = 1 at Δ̂ ≤ EXCHANGEABLE_BELOW, 0 at Δ̂ ≥ DRIFTING_ABOVE, linear
# between (see :func:`_drift_update`, :func:`stationary_weight`).
DRIFT_DISCOUNT = 0.98
DRIFT_WARMUP = 5
EXCHANGEABLE_BELOW = 0.02
DRIFTING_ABOVE = 0.06


# ---------------------------------------------------------------------------- config


def resolved_selection_share(method: str, selection_share: Optional[float]) -> float:
    """s: the method's default (:data:`DEFAULT_SELECTION_SHARES`) or the one given."""
    if selection_share is None:
        return DEFAULT_SELECTION_SHARES[method]
    return probability("selection_share", selection_share)


def quiet_selections(epsilon: float, selection_share: float) -> int:
    """The most measurements per period whose noise is at most one record per cell:
    the largest k with √2·k/((1 − s)·ε) ≤ 1, the standard deviation of a Laplace
    measurement of budget (1 − s)·ε/k."""
    return int(math.floor((1.0 - selection_share) * epsilon / math.sqrt(2.0)))


def wide_regime(epsilon: float, selection_share: float) -> bool:
    """Whether even ``WIDE_SELECTIONS`` measurements a period are that quiet: there the
    default is k = 24 (:func:`auto_selections`) with the model's size limit growing over
    the horizon (``model_growth``)."""
    return quiet_selections(epsilon, selection_share) >= WIDE_SELECTIONS


def auto_selections(epsilon: float, method: str, num_workloads: int,
                    selection_share: Optional[float] = None) -> int:
    """The default k: the most measurements per period whose noise stays at or below one
    record per cell (:func:`quiet_selections`) but never fewer than the paper's k = 3 nor
    more than 12, and 24 once 24 are that quiet (the *wide* regime, where the model's
    size limit also grows over the horizon: :meth:`TabularConfig.model_limit`); never
    more than |W|; the baseline keeps 3.  So k = 3 up to ε ≈ 6.3 (s = 0.1), 5 at ε = 8,
    12 from ε ≈ 19, 24 from ε ≈ 38.

    Why.  Each of a period's k measurements gets (1 − s)·ε/k.  With k fixed at 3, budget
    beyond the paper's range makes the same three measurements ever more exact while every
    other workload's counter sees only the periods that select it, so at large ε the
    error is set by that coverage, not by privacy.  Where a measurement's noise is still
    several records per cell, more selections lose; below one record, more precision
    buys less than coverage (and in periods whose batch makes a measurement's noise small
    next to its own sampling, the default k rises up to 12: ``selection_ceiling``,
    :func:`period_selections`).  Beyond 12 the model's size limit is what binds: k = 24
    pays only with the limit growing over the horizon, and the growing limit pays only
    at k = 24, so below the wide regime k stays at most 12 with the fixed limit
    (``bench/results/tabular_selections.md``).  k depends on ε, s and |W| only (public),
    so the privacy statement is the one for that k (docs/tabular.md,
    "Selections").  The baseline's measurements see one batch and are not counted across
    periods.  Fewer than 3 win on streams whose periods are exchangeable but lose on
    sorted streams, so 3 stays the floor of k, and the selection schedule
    (:func:`period_selections`) lowers k_t period by period where the stream reads as
    exchangeable (``bench/results/tabular_selections_k1.md``,
    ``bench/results/tabular_selection_schedule.md``)."""
    epsilon = privacy_budget("epsilon", epsilon)
    k = PAPER_SELECTIONS
    if method == "proposed":
        share = resolved_selection_share(method, selection_share)
        k = WIDE_SELECTIONS if wide_regime(epsilon, share) else min(
            AUTO_SELECTIONS_MAX, max(k, quiet_selections(epsilon, share)))
    return min(k, num_workloads)


@dataclass(frozen=True)
class TabularConfig:
    """Public parameters of one tabular stream release (all go into the manifest)."""

    domain: Domain
    workloads: Tuple[Workload, ...]
    epsilon: float
    horizon: Optional[int] = None
    method: str = "proposed"
    selections: int = 3
    counter: str = "simple"
    fit: str = "ipf"
    fit_iterations: int = 100
    pgm_model: str = "auto"
    mixture_components: int = 32
    anchor_weight: float = 1.0
    bias_correction: str = "noise+sampling"
    max_cells: Optional[int] = None
    utility: str = "aim"
    remainder: str = "adaptive"
    combine: str = "last"
    refresh: int = 0
    baseline_start: str = "previous"
    margins: Optional[str] = None
    selection_share: Optional[float] = None
    selection_discount: str = "none"
    model_growth: Optional[str] = None
    selection_schedule: Optional[str] = None
    selection_ceiling: Optional[int] = None
    bias_noise: Optional[str] = None
    coverage: Optional[str] = None
    structure: Optional[str] = None
    wide_cells: Optional[int] = None
    wide_ratio: float = WIDE_RATIO
    wide_fit: str = "inside"
    wide_noise: Optional[float] = None

    def __post_init__(self):
        if not isinstance(self.domain, Domain):
            raise InputError("domain must be a marginals.Domain")
        workloads = tuple(tuple(str(a) for a in w) for w in self.workloads)
        if not workloads:
            raise InputError("at least one workload is needed")
        for w in workloads:
            positions = self.domain.index(w)
            if len(set(positions)) != len(positions):
                raise InputError(f"workload {w} repeats an attribute")
        if len(set(workloads)) != len(workloads):
            raise InputError("a workload is listed twice")
        cells = sum(self.domain.size(w) for w in workloads)
        if cells > MAX_WORKLOAD_CELLS:
            raise ParameterError("marginals", (
                f"{len(workloads)} workload(s) hold {cells:.3g} histogram cells "
                f"({format_bytes(8 * cells)} per period); at most {MAX_WORKLOAD_CELLS} fit: "
                f"choose fewer or smaller marginals"))
        object.__setattr__(self, "workloads", workloads)
        object.__setattr__(self, "epsilon", privacy_budget("epsilon", self.epsilon))
        if self.method not in METHODS:
            raise InputError(f"method must be one of {METHODS}, got {self.method!r}")
        selections = whole_number("selections", self.selections)
        if selections > len(workloads):
            raise ParameterError("selections", f"must be at most the number of workloads "
                                 f"({len(workloads)}), got {selections}")
        object.__setattr__(self, "selections", selections)
        if self.horizon is not None:
            object.__setattr__(self, "horizon", whole_number("horizon", self.horizon))
        if self.counter not in counter_kinds():
            raise InputError(f"unknown counter {self.counter!r}; choose from {counter_kinds()}")
        if self.method == "proposed" and self.horizon is None \
                and self.counter not in UNBOUNDED_KINDS:
            raise ParameterError("counter", f"{self.counter!r} needs a horizon (--horizon); "
                                            f"without one use {sorted(UNBOUNDED_KINDS)}")
        if "epsilon" not in counter_units(self.counter):
            raise InputError(f"the {self.counter} counter takes only a zCDP budget; "
                             "this synthesizer is pure ε-DP (discrete Laplace counters)")
        if self.fit not in FIT_METHODS:
            raise InputError(f"fit must be one of {FIT_METHODS}, got {self.fit!r}")
        if self.pgm_model not in PGM_MODELS:
            raise InputError(f"pgm_model must be one of {PGM_MODELS}")
        if not isinstance(self.fit_iterations, (int, np.integer)) or self.fit_iterations < 1:
            raise InputError("fit_iterations must be a positive integer")
        if self.bias_correction not in BIAS_CORRECTIONS:
            raise InputError(f"bias_correction must be one of {BIAS_CORRECTIONS}")
        self._resolve_choice("bias_noise", BIAS_NOISES,
                             "estimate" if self.method == "proposed" else "counter", "estimate",
                             self.method == "proposed",
                             "the noise of a workload's running estimate is the proposed "
                             "method's (the baseline measures each period afresh)")
        covers = self.method == "proposed" and self.bias_noise == "estimate"
        self._resolve_choice("coverage", COVERAGES, "reachable" if covers else "none",
                             "reachable", covers,
                             "keeping every attribute within the selection's reach needs the "
                             "proposed method with bias_noise='estimate' (under which a "
                             "measured workload's bias falls)")
        if self.utility not in UTILITIES:
            raise InputError(f"utility must be one of {UTILITIES}, got {self.utility!r}")
        if self.combine not in COMBINES:
            raise InputError(f"combine must be one of {COMBINES}, got {self.combine!r}")
        if self.remainder not in REMAINDERS:
            raise InputError(f"remainder must be one of {REMAINDERS}, got "
                             f"{self.remainder!r}")
        if isinstance(self.refresh, bool) or not isinstance(self.refresh, (int, np.integer)) \
                or not 0 <= self.refresh <= selections:
            raise ParameterError("refresh", f"must be a whole number from 0 to the selections "
                                            f"({selections}), got {self.refresh!r}")
        if self.selection_discount not in SELECTION_DISCOUNTS:
            raise ParameterError("selection_discount", f"must be one of {SELECTION_DISCOUNTS}, "
                                                       f"got {self.selection_discount!r}")
        if self.baseline_start not in BASELINE_STARTS:
            raise InputError(f"baseline_start must be one of {BASELINE_STARTS}, got "
                             f"{self.baseline_start!r}")
        pools = (self.method == "proposed" and self.fit in ("ipf", "mw")
                 and self.remainder in ("adaptive", "increment", "model"))
        if self.margins is None:
            object.__setattr__(self, "margins", "pooled" if pools else "none")
        elif self.margins not in MARGINS:
            raise ParameterError("margins", f"must be one of {MARGINS}, got {self.margins!r}")
        elif self.margins == "pooled" and not pools:
            raise ParameterError("margins", "pooled one-way margins need the proposed method, "
                                            "the ipf or mw fit and the adaptive, increment "
                                            "or model remainder")
        object.__setattr__(self, "selection_share",
                           resolved_selection_share(self.method, self.selection_share))
        informs = self.margins == "pooled" and self.fit == "ipf"
        self._resolve_choice("structure", STRUCTURES, "informative" if informs else "measured",
                             "informative", informs,
                             "leaving a pair out of the fitted structure needs the ipf fit "
                             "(a junction tree) and the pooled one-way margins "
                             "(margins='pooled'), which carry its margins")
        grows = self.method == "proposed" and self.fit == "ipf" and self.horizon is not None
        # by default the model grows in the wide regime of auto_selections
        self._resolve_choice("model_growth", MODEL_GROWTHS,
                             "horizon" if grows and self.wide else "fixed", "horizon", grows,
                             "a model size growing over the horizon needs the proposed "
                             "method, the ipf fit and a horizon (--horizon)")
        schedules = (self.method == "proposed" and self.remainder == "adaptive"
                     and self.margins == "pooled" and self.refresh == 0
                     and self.counter in SHARE_KINDS)
        self._resolve_choice("selection_schedule", SELECTION_SCHEDULES,
                             "drift" if schedules else "fixed", "drift", schedules,
                             "fewer selections on exchangeable periods need the proposed "
                             "method, the adaptive remainder with pooled margins, no refresh "
                             "slots and the simple counter")
        ceiling = (self.selections if self.selection_ceiling is None
                   else whole_number("selection_ceiling", self.selection_ceiling))
        if not self.selections <= ceiling <= len(workloads):
            raise ParameterError("selection_ceiling", f"must be between the selections "
                                 f"({self.selections}) and the number of workloads "
                                 f"({len(workloads)}), got {ceiling}")
        if ceiling > self.selections and self.selection_schedule != "drift":
            raise ParameterError("selection_ceiling", "more selections on large batches need "
                                 "the drift selection schedule")
        object.__setattr__(self, "selection_ceiling", ceiling)
        if self.max_cells is not None and (
                isinstance(self.max_cells, bool)
                or not isinstance(self.max_cells, (int, np.integer)) or self.max_cells < 1):
            raise InputError(f"max_cells must be a positive integer, got {self.max_cells!r}")
        if self.max_cells is not None and self.fit != "mw" and \
                self.max_cells < self._one_workload_model:
            raise ParameterError("max_cells", f"must be at least {self._one_workload_model} "
                                              f"(the largest model of one workload: its "
                                              f"clique and every other attribute's one-way "
                                              f"table), got {self.max_cells}; below that "
                                              f"no workload could be measured")
        if self.wide_cells is not None and (
                isinstance(self.wide_cells, bool)
                or not isinstance(self.wide_cells, (int, np.integer)) or self.wide_cells < 1):
            raise ParameterError("wide_cells", f"must be a positive whole number, got "
                                               f"{self.wide_cells!r}")
        if self.wide_cells is not None and (self.method != "proposed"
                                            or self.counter != "simple"):
            raise ParameterError("wide_cells", "wide measurements need the proposed method "
                                               "and the simple counter")
        shaped = (self.wide_noise is not None or self.wide_ratio != WIDE_RATIO
                  or self.wide_fit != "inside")
        if self.wide_cells is None and shaped:
            raise ParameterError("wide_cells", "wide_noise, wide_ratio and wide_fit shape "
                                               "wide measurements: give wide_cells too")
        if self.wide_fit not in WIDE_FITS:
            raise ParameterError("wide_fit", f"must be one of {WIDE_FITS}, got {self.wide_fit!r}")
        if not (self.wide_ratio >= 1 and math.isfinite(self.wide_ratio)):
            raise ParameterError("wide_ratio", f"must be a number of at least 1, got "
                                               f"{self.wide_ratio!r}")
        if self.wide_noise is not None and not (
                not isinstance(self.wide_noise, bool)
                and isinstance(self.wide_noise, (int, float, np.integer, np.floating))
                and self.wide_noise > 0 and math.isfinite(self.wide_noise)):
            raise ParameterError("wide_noise", f"must be a positive number, got "
                                               f"{self.wide_noise!r}")
        if not (self.anchor_weight >= 0 and math.isfinite(self.anchor_weight)):
            raise InputError("anchor_weight must be a non-negative number")
        if not isinstance(self.mixture_components, (int, np.integer)) \
                or self.mixture_components < 1:
            raise InputError("mixture_components must be a positive integer")
        self._check_noisy_size()

    def _check_noisy_size(self) -> None:
        """Refuse an ε whose noise alone makes a released table larger than
        :data:`MAX_NOISE_RECORDS` plausible, before any record is read (at ε = 10^-12 the
        emission's list of shards for a table of ~10^12 rows outgrew memory).  A period's
        noisy size B̂ is a weighted mean of sums of its k_t noisy workload histograms, each
        measured with discrete Laplace noise of scale k_t/((1 − s)·ε) per cell (variance
        ≈ 2·scale²): its standard deviation is at least √(2·min_i |W_i|)/((1 − s)·ε),
        whatever k_t.  The table's size is the sum of the periods' B̂, so after T periods
        (T = the horizon, 1 without one) one standard deviation of it is √T times that."""
        periods = self.horizon or 1
        # the domain, not self.cells: a cached property would join the dataclass's __dict__
        deviation = (math.sqrt(2 * min(self.domain.size(w) for w in self.workloads))
                     / ((1 - self.selection_share) * self.epsilon))
        rows = math.sqrt(periods) * deviation
        check_noise_records("epsilon", self.epsilon, rows,
                            f"a released table whose noisy size is off by {rows:.3g} rows "
                            f"after {periods} period(s), one standard deviation",
                            self.epsilon * rows / MAX_NOISE_RECORDS)

    # -- derived ------------------------------------------------------------------------
    def _resolve_choice(self, name: str, choices, default: str, restricted: str,
                        allowed: bool, needs: str) -> None:
        """An option of ``choices`` that None resolves to ``default``; its value
        ``restricted`` only where ``allowed`` (else ``needs`` says what it needs)."""
        if getattr(self, name) is None:
            object.__setattr__(self, name, default)
        value = getattr(self, name)
        if value not in choices:
            raise ParameterError(name, f"must be one of {choices}, got {value!r}")
        if value == restricted and not allowed:
            raise ParameterError(name, needs)

    @property
    def cells(self) -> List[int]:
        """|W_i|: cells (marginal queries) of every workload."""
        return list(self._cells)

    @functools.cached_property
    def _cells(self) -> Tuple[int, ...]:
        return tuple(self.domain.size(w) for w in self.workloads)

    @functools.cached_property
    def wide_sets(self) -> Tuple[Workload, ...]:
        """S_j for every workload j (``wide_cells``): j and the smallest other attributes
        (ties in the domain's order, rotated by j) while |S_j| ≤ min(``wide_cells``,
        ``wide_ratio``·|W_j|) (j's own projection sums at most ``wide_ratio`` cells); S_j = j
        when none fits or ``wide_cells`` is None.  Public (the domain)."""
        names = list(self.domain.values)
        out = []
        for n, w in enumerate(self.workloads):
            s = list(w)
            if self.wide_cells is not None:
                rest = [a for a in names if a not in w]
                rest.sort(key=lambda a: (self.domain.size((a,)),
                                         (names.index(a) - n) % len(names)))
                cap = min(self.wide_cells, self.wide_ratio * self.domain.size(w))
                for a in rest:
                    if self.domain.size(s + [a]) <= cap:
                        s.append(a)
            out.append(tuple(s))
        return tuple(out)

    @functools.cached_property
    def input_workloads(self) -> Tuple[Workload, ...]:
        """The histograms a period's input holds: the workloads, then every wide set S_j
        that is not a workload (in first-use order)."""
        extra = []
        for s in self.wide_sets:
            if s not in self.workloads and s not in extra:
                extra.append(s)
        return self.workloads + tuple(extra)

    @property
    def wide(self) -> bool:
        """Whether this configuration is in the wide regime of :func:`auto_selections`
        (every measurement quiet even at k = 24, and k at least 24 or every workload):
        where the model's size limit grows over the horizon by default."""
        return (wide_regime(self.epsilon, self.selection_share)
                and self.selections >= min(WIDE_SELECTIONS, len(self.workloads)))

    def selection_epsilon_at(self, selections: int) -> float:
        """ε' = s·ε/k_t of each exponential mechanism of a period making ``selections``
        = k_t of them (s = ``selection_share``)."""
        return self.epsilon * self.selection_share / selections

    def measure_epsilon_at(self, selections: int) -> float:
        """(1 − s)·ε/k_t of each measurement of a period making ``selections`` = k_t."""
        return self.epsilon * (1.0 - self.selection_share) / selections

    @property
    def selection_epsilon(self) -> float:
        """ε' = s·ε/k of every exponential mechanism at k (s = ``selection_share``; the
        paper's s = 1/2 gives ε/(2k))."""
        return self.selection_epsilon_at(self.selections)

    @property
    def measure_epsilon(self) -> float:
        """(1 − s)·ε/k: every counter's budget (proposed) or every Laplace measurement's
        (baseline) at k; the paper's ε/(2k) at s = 1/2."""
        return self.measure_epsilon_at(self.selections)

    @property
    def utility_sensitivity(self) -> float:
        """Δ of the utilities (see the module docstring): 2 for ``aim``, max_i 1/|W_i|
        for ``paper``."""
        return 2.0 if self.utility == "aim" else 1.0 / min(self.cells)

    @property
    def model_cells(self) -> int:
        """The fitted model's size limit: ``max_cells``, else 2^22 for the dense MW fit
        and 2^17 junction-tree cells for graphical models (the error at ε = 1000 and the
        step's time against the limit: bench/results/tabular_floor.md)."""
        if self.max_cells is not None:
            return int(self.max_cells)
        return DEFAULT_MAX_CELLS if self.fit == "mw" else DEFAULT_MODEL_CELLS

    def model_limit(self, period: int) -> int:
        """The fitted model's size limit at ``period``: :attr:`model_cells`, or under
        ``model_growth="horizon"`` the share of it the horizon has reached,
        ⌊model_cells·t/T⌋, never below the largest model of one workload (so that every
        workload can be selected from the first period).  AIM's model-size control
        (McKenna et al. 2022 §4.3) grows the model with the share of the budget spent; a
        stream spends each period's ε on that period's records, and the share of the
        horizon elapsed is the public analogue.  Why: at large ε the first periods'
        selections fill a fixed-size junction tree with large cliques for good; grown
        with the horizon, the same cells end up holding more of the workloads.  Public
        (t, T and the workloads' sizes).  The default only in the wide regime of
        :func:`auto_selections` (k = 24 at ε ≳ 38), where it is measured to help: with
        k = 12 or at ε = 1 (k = 3) it costs accuracy, and on a small sorted stream with a
        tight ``max_cells`` it leaves the model too small for most of the stream
        (bench/results/tabular_selections.md).  The price: early in a long horizon the
        model is small (at t = T/10 a tenth of ``max_cells``)."""
        if self.model_growth != "horizon":
            return self.model_cells
        share = min(1.0, period / self.horizon)
        return min(self.model_cells,
                   max(int(self.model_cells * share), self._one_workload_model))

    @functools.cached_property
    def _one_workload_model(self) -> int:
        """Cells of the largest junction forest of a single workload (the workload's
        clique and every other attribute's one-way table)."""
        return max(junction_tree_cells(self.domain, [w]) for w in self.workloads)

    @property
    def laplace_scale(self) -> float:
        """Baseline measurement noise: discrete Laplace of scale k/((1 − s)·ε) (the
        paper's 2k/ε)."""
        return accounting.laplace_scale(1.0, self.measure_epsilon)

    def fitter(self) -> Fitter:
        """The A_Dataset of this configuration (shared per process: it holds ``mbi``'s
        compiled fit)."""
        key = (_domain_key(self.domain), self.workloads, self.fit, int(self.fit_iterations),
               self.pgm_model, int(self.mixture_components), self.model_cells,
               float(self.anchor_weight))
        if key not in _FITTERS:
            _FITTERS[key] = Fitter(self.domain, self.workloads, self.fit,
                                   iterations=int(self.fit_iterations),
                                   pgm_model=self.pgm_model,
                                   components=int(self.mixture_components),
                                   max_cells=self.model_cells,
                                   anchor_weight=float(self.anchor_weight))
        return _FITTERS[key]

    def make_counter(self) -> List[StreamCounter]:
        return [make_counter(self.counter, self.horizon, epsilon=self.measure_epsilon,
                             dim=c, entries_changed=1) for c in self.cells]

    def to_dict(self) -> Dict:
        return {"domain": self.domain.to_dict(),
                "workloads": [list(w) for w in self.workloads],
                "epsilon": self.epsilon, "horizon": self.horizon, "method": self.method,
                "selections": self.selections, "counter": self.counter, "fit": self.fit,
                "fit_iterations": int(self.fit_iterations), "pgm_model": self.pgm_model,
                "mixture_components": int(self.mixture_components),
                "anchor_weight": float(self.anchor_weight),
                "bias_correction": self.bias_correction, "max_cells": self.max_cells,
                "utility": self.utility, "remainder": self.remainder,
                "combine": self.combine, "refresh": int(self.refresh),
                "baseline_start": self.baseline_start, "margins": self.margins,
                "selection_share": self.selection_share,
                "selection_discount": self.selection_discount,
                "model_growth": self.model_growth,
                "selection_schedule": self.selection_schedule,
                "bias_noise": self.bias_noise, "coverage": self.coverage,
                "structure": self.structure,
                **({} if self.selection_ceiling == self.selections else
                   {"selection_ceiling": int(self.selection_ceiling)}),
                **({} if self.wide_cells is None else
                   {"wide_cells": int(self.wide_cells), "wide_ratio": self.wide_ratio,
                    "wide_fit": self.wide_fit, "wide_noise": self.wide_noise})}

    @classmethod
    def from_dict(cls, data: Dict) -> "TabularConfig":
        data = dict(data)
        data["domain"] = Domain(data["domain"])
        data["workloads"] = tuple(tuple(w) for w in data["workloads"])
        return cls(**saved_config(data))


def saved_config(data: Dict) -> Dict:
    """A saved configuration dict with the options it predates filled in as they were
    then (``SAVED_CONFIG_DEFAULTS``), so that it steps with the budgets its counters were
    calibrated for and compares equal to its resolved :class:`TabularConfig`."""
    return {**SAVED_CONFIG_DEFAULTS, **data}


def _domain_key(domain: Domain):
    return tuple((name, tuple(map(repr, values))) for name, values in domain.values.items())


_FITTERS: Dict = {}


# ---------------------------------------------------------------------------- state

@dataclass
class TabularState:
    """What the synthesizer carries between periods (no raw records).

    ``model``: g_{t−1} (proposed), or the baseline's last increment ∇g_{t−1} (its next
    period's start under ``baseline_start="previous"``, else None).
    ``counters``, ``counter_values`` (C_i at its last feed), ``remainders`` (r(t, i)),
    ``anchor_times`` (counter time when r was last set): proposed only.
    ``margin_sums`` (M_a(t)), ``margin_levels`` (L_a) and ``margin_shares`` (the
    precision-weighted shares, :func:`pooled_margins.shares_update`): the pooled one-way margins
    (:mod:`~continual_synth.mechanisms.pooled_margins`), under ``margins="pooled"``.
    ``noise_terms``: per workload, the discrete Laplace draws its counter value C_i holds
    per cell, ``{scale: count}`` (proposed method with the simple counter; None
    otherwise): the error bounds of :mod:`~continual_synth.mechanisms.tabular_accuracy`.
    **Holds private information** (counter states contain true running sums); keep it on
    the private side.
    """

    config: Dict
    ledger: accounting.BudgetLedger
    period: int = 0
    model: Optional[FittedModel] = None
    counters: List[StreamCounter] = field(default_factory=list)
    counter_values: List[np.ndarray] = field(default_factory=list)
    remainders: List[np.ndarray] = field(default_factory=list)
    drift: Tuple[float, float, float] = (0.0, 0.0, 0.0)
    increment_model: Optional[FittedModel] = None
    anchor_times: List[int] = field(default_factory=list)
    margin_sums: Dict[str, np.ndarray] = field(default_factory=dict)
    margin_levels: Dict[str, np.ndarray] = field(default_factory=dict)
    margin_shares: Dict[str, np.ndarray] = field(default_factory=dict)
    size: int = 0
    selection_counts: List[int] = field(default_factory=list)
    last_selected: List[int] = field(default_factory=list)
    noise_terms: Optional[List[Dict[float, float]]] = None

    def to_dict(self) -> Dict:
        return {"format": FORMAT_VERSION, "config": self.config,
                "ledger": self.ledger.to_dict(), "period": self.period,
                "model": None if self.model is None else self.model.to_dict(),
                "counters": [c.to_dict() for c in self.counters],
                "counter_values": [np.asarray(v).tolist() for v in self.counter_values],
                "remainders": [np.asarray(v).tolist() for v in self.remainders],
                "drift": [float(x) for x in self.drift],
                "increment_model": (None if self.increment_model is None
                                    else self.increment_model.to_dict()),
                "anchor_times": list(self.anchor_times),
                "margin_sums": {a: v.tolist() for a, v in self.margin_sums.items()},
                "margin_levels": {a: v.tolist() for a, v in self.margin_levels.items()},
                "margin_shares": {a: v.tolist() for a, v in self.margin_shares.items()},
                "size": int(self.size),
                "selection_counts": list(self.selection_counts),
                "last_selected": list(self.last_selected),
                "noise_terms": (None if self.noise_terms is None else
                                [sorted([b, k] for b, k in terms.items())
                                 for terms in self.noise_terms])}

    @classmethod
    def from_dict(cls, data: Dict) -> "TabularState":
        if data.get("format") != FORMAT_VERSION:
            raise StateError(f"unknown tabular state format {data.get('format')!r}")
        domain = Domain(data["config"]["domain"])
        config = saved_config(data["config"])
        return cls(config=config,
                   ledger=accounting.BudgetLedger.from_dict(data["ledger"]),
                   period=int(data["period"]),
                   model=None if data["model"] is None else model_from_dict(data["model"],
                                                                            domain),
                   counters=[StreamCounter.from_dict(c) for c in data["counters"]],
                   counter_values=[np.asarray(v, dtype=np.float64)
                                   for v in data["counter_values"]],
                   remainders=[np.asarray(v, dtype=np.float64) for v in data["remainders"]],
                   drift=tuple(float(x) for x in
                               (list(data.get("drift", [])) + [0.0, 0.0, 0.0])[:3]),
                   increment_model=(None if data.get("increment_model") is None
                                    else model_from_dict(data["increment_model"], domain)),
                   anchor_times=[int(x) for x in data["anchor_times"]],
                   margin_sums={a: np.asarray(v, dtype=np.float64)
                                for a, v in data.get("margin_sums", {}).items()},
                   margin_levels={a: np.asarray(v, dtype=np.float64)
                                  for a, v in data.get("margin_levels", {}).items()},
                   margin_shares={a: np.asarray(v, dtype=np.float64)
                                  for a, v in data.get("margin_shares", {}).items()},
                   size=int(data["size"]),
                   selection_counts=[int(x) for x in data["selection_counts"]],
                   last_selected=[int(x) for x in data["last_selected"]],
                   noise_terms=(None if data.get("noise_terms") is None else
                                [{float(b): float(k) for b, k in terms}
                                 for terms in data["noise_terms"]]))


@dataclass(frozen=True)
class TabularRelease:
    """One period's release.

    ``model``: the table to release — g_t (``increment`` False, proposed) or the increment
    ∇g_t (``increment`` True, baseline: append ``increment_size`` records sampled from it
    to the previous table).  ``size``: the noisy size of the stream so far (int ≥ 0,
    post-processing, see the module docstring); ``increment_size``: records to draw from
    ``model`` now (= ``size`` for the proposed method).  ``chosen``: the workloads this
    period's k_t selection slots chose, in order (the ledger's ``selections``);
    ``selected``: those and the workloads measured with them from a wide set.
    """

    period: int
    model: FittedModel
    size: int
    increment: bool
    increment_size: int
    selected: Tuple[Workload, ...]
    method: str
    chosen: Tuple[Workload, ...] = ()


def initial_state(config: TabularConfig) -> TabularState:
    """The state before period 1: fresh counters (proposed), r = 0, C = 0, g_0 uniform."""
    q = len(config.workloads)
    state = TabularState(config=config.to_dict(),
                         ledger=accounting.BudgetLedger(total=config.epsilon, unit="epsilon"),
                         selection_counts=[0] * q)
    if config.method == "proposed":
        state.model = config.fitter().start(0.0)
        state.counters = config.make_counter()
        state.counter_values = [np.zeros(c) for c in config.cells]
        state.remainders = [np.zeros(c) for c in config.cells]
        state.anchor_times = [0] * q
        if config.margins == "pooled":
            state.margin_sums = {a: np.zeros(config.domain.size((a,)))
                                 for a in pooled_margins.attributes(config.workloads)}
        if config.counter == "simple":
            state.noise_terms = [{} for _ in range(q)]
    return state


def check_step(config: TabularConfig, state: TabularState, period: int) -> None:
    """Refuse a mismatched state, a period out of order or beyond the horizon, or an
    overspend — before any data is used."""
    if state.config != config.to_dict():
        raise StateError("the state was made with a different configuration")
    check_next_period(period, state.period, config.horizon)
    state.ledger.check(period_cost(config, period), f"period {period}")


def period_cost(config: TabularConfig, period: int) -> float:
    """ε debited at ``period``: the whole-stream ε at period 1, 0 afterwards (parallel
    composition across periods under event-level neighbours)."""
    return config.epsilon if period == 1 else 0.0


def _check_histograms(config: TabularConfig, period_histograms) -> List[np.ndarray]:
    hists = list(period_histograms)
    inputs = config.input_workloads
    if len(hists) != len(inputs):
        raise InputError(f"expected {len(inputs)} workload histograms, "
                         f"got {len(hists)}")
    out = []
    for w, h in zip(inputs, hists):
        c = config.domain.size(w)
        arr = np.asarray(h)
        if arr.shape != (c,):
            raise InputError(f"histogram of workload {w} has shape {arr.shape}, "
                             f"expected ({c},)")
        if not np.issubdtype(arr.dtype, np.integer) or (arr < 0).any():
            raise InputError(f"histogram of workload {w} must hold non-negative integer counts")
        out.append(arr.astype(np.int64))
    return out


def _size_estimate(sums: Sequence[float], variances: Sequence[float]) -> float:
    """Inverse-variance weighted mean of noisy totals, clipped at 0."""
    w = 1.0 / np.maximum(np.asarray(variances, dtype=np.float64), 1e-12)
    return max(float(np.dot(w, sums) / w.sum()), 0.0)


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


def _utilities(config, targets, model, candidates, bias, batch: int = 0) -> np.ndarray:
    """u_i for i in ``candidates``: ``aim`` — ‖T_i − |T|·P_i(h)‖_1 − b_i (the model's
    distribution at the target's size), minus the batch's sampling deviation under
    ``noise+sampling`` (a public estimate ``batch`` of the batch size); ``paper`` —
    ‖T_i − W_i(h)‖_1/|W_i| − b_i."""
    workloads, cells = config.workloads, config.cells
    out = np.empty(len(candidates))
    tables = model.probabilities_of([workloads[i] for i in candidates])
    for n, (i, p) in enumerate(zip(candidates, tables)):
        if config.utility == "aim":
            out[n] = np.abs(targets[i] - p * targets[i].sum()).sum() - bias[i]
        else:
            out[n] = np.abs(targets[i] - p * model.total).sum() / cells[i] - bias[i]
    if config.utility == "aim" and config.bias_correction == "noise+sampling":
        out -= _sampling_biases(tables, batch)
    return out


def _copy_state(state: TabularState) -> TabularState:
    return TabularState(
        config=state.config,
        ledger=accounting.BudgetLedger.from_dict(state.ledger.to_dict()),
        period=state.period, model=state.model,
        counters=[StreamCounter.from_dict(c.to_dict()) for c in state.counters],
        counter_values=[v.copy() for v in state.counter_values],
        remainders=[v.copy() for v in state.remainders],
        drift=state.drift,
        increment_model=state.increment_model,
        anchor_times=list(state.anchor_times),
        margin_sums={a: v.copy() for a, v in state.margin_sums.items()},
        margin_levels={a: v.copy() for a, v in state.margin_levels.items()},
        margin_shares={a: v.copy() for a, v in state.margin_shares.items()},
        size=state.size,
        selection_counts=list(state.selection_counts),
        last_selected=list(state.last_selected),
        noise_terms=(None if state.noise_terms is None
                     else [dict(terms) for terms in state.noise_terms]))


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
    (``"counter"``, the rule of ``--rule paper`` and of states saved before the option)
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
    are exchangeable, above ``DRIFTING_ABOVE`` on Adult sorted by every attribute
    (bench/results/tabular_tables_adult_adaptive_notes.md).  Dividing by κ keeps
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
    are equal.  Against the best fixed k of 1, 2 and 3 on CCES and Adult:
    bench/results/tabular_selections_k1.md."""
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


def _shrunk_share(counter: np.ndarray, imputed: np.ndarray, variance: float) -> np.ndarray:
    """The share of a workload's unseen periods on an exchangeable stream: w·Ĉ + (1 − w)·R̂,
    Ĉ = C_j⁺/|C_j⁺| the share of the periods j's counter saw (unbiased when the periods
    are exchangeable, but noisy: the counter's noise and the sampling of the |C_j| records
    it holds), R̂ = R_j/|R_j| the increment remainder's (less noisy, biased where the
    increment models miss j), with the positive-part James-Stein weight
    w = max(0, 1 − ν/‖Ĉ − R̂‖²), ν = |W_j|·σ²/|C_j|² + (1 − Σ R̂²)/|C_j| the expected
    ‖Ĉ − R̂‖² were R̂ the truth (σ² the counter's per-cell variance).

    With ``selection_schedule="drift"`` a counter's feeds can differ in noise (σ² is then
    their sum).  Weighing them by their precision instead does worse
    (bench/results/tabular_selection_schedule.md)."""
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


def informative(fitter, structure: Sequence[Workload], workload: Workload,
                counts: np.ndarray, variance: float) -> bool:
    """``structure="informative"``: whether the fit takes a selected workload's
    measurement, i.e. lets it join the model's structure.  Always for a workload the
    structure already holds (inside a clique of its junction tree) and for one of other
    than two attributes.  A pair W = (a, b) outside it joins only when what its counter
    has measured departs from independence by more than the counter's noise would:

        D = ‖m − m_a ⊗ m_b / n‖_1  >  N = √(2/π)·σ·|W|,

    m = ``counts``, the counter's own sum C_W(t) over the periods that measured W,
    clipped at 0 (not the remainder imputed for the other periods: that is the model's
    own answer, and would carry the model's dependence into the test), n its total,
    m_a and m_b its margins, σ² = ``variance`` its noise variance per cell.  N is the
    expected L1 norm of that noise (AIM's bias term); on a table whose attributes are
    independent D reads the noise less what the margins absorb, about
    √((a − 1)(b − 1)/(ab))·N.  Below N the measurement shows no dependence its noise
    does not swamp: fitting it would put about N of noise into the model's W marginal,
    while leaving it out costs W's true departure from independence, which is smaller;
    its one-way margins reach the fit through the pooled margins either way.  It also
    keeps such pairs from filling the model's size limit (``max_cells``), where they
    would lock out strongly dependent pairs for good (bench/results/tabular_structure.md).
    An independent pair joins in 8-12 % of its tests (2 × 2, 4 × 6 and 8 × 12 cells, in
    simulation), and then stays until a selected workload needs its room
    (:func:`yielding`): over many tests the rule delays such pairs rather than keeping
    them out for good.  The test reads the periods W's counter measured as a sample of
    the stream.  In a stream sorted by a place they may all lie in one
    precinct, a table of one row, which is a product whatever the pair's dependence: on
    MplsStops sorted by neighbourhood the tied pair precinct × neighbourhood stays out
    longer, and more released records fall in absent precinct-neighbourhood
    combinations, though AvgWE falls (bench/results/tabular_structure.md).  Restricting
    the test to the periods the drift test reads as exchangeable, or to counters whose
    margins match the stream's, does worse.  At ε → ∞, N → 0 and every measured pair joins, as in the
    paper's A_Dataset, which fits every measurement (``structure="measured"``); at the
    size limit a pair of no shown dependence then gives way (:func:`yielding`).
    Post-processing of the counter's output with its public variance: no budget."""
    if len(workload) != 2 or fitter.fits(structure, workload, 0):
        return True
    departure, independent, _ = _departure(fitter, workload, counts)
    if independent is None:
        return False
    return bool(departure > math.sqrt(2.0 / math.pi) * math.sqrt(variance) * independent.size)


def _departure(fitter, workload: Workload, counts: np.ndarray):
    """A pair's measured departure from independence: (‖m − e‖_1, e, n) with m =
    ``counts`` clipped at 0 as an a × b table, n its total and e = m_a ⊗ m_b / n the
    table of its margins under independence; e is None when m holds no record."""
    a, b = (fitter.domain.size((x,)) for x in workload)
    table = np.maximum(np.asarray(counts, dtype=np.float64), 0.0).reshape(a, b)
    n = table.sum()
    if n <= 0:
        return 0.0, None, 0.0
    independent = np.outer(table.sum(axis=1), table.sum(axis=0)) / n
    return float(np.abs(table - independent).sum()), independent, n


def yielding(fitter, structure: Sequence[Workload], index: Dict[Workload, int],
             evidence, keep) -> List[Workload]:
    """``structure="informative"``: the pairs of the model's ``structure`` that give way
    to a selected workload needing their room under the size limit, weakest first: those
    whose counter's own sum m = C_W(t) departs from independence by no more than a
    table of independent attributes would from sampling and noise alone,

        D = ‖m − e‖_1  ≤  √(2/π)·Σ_cells √(e·(1 − e/n) + σ²),

    e = m_a ⊗ m_b / n (:func:`_departure`), σ² W's counter noise variance per cell: the
    expected L1 norm of a multinomial sample of n records from e plus the noise, cell by
    cell.  Ordered by D over that null (ties by the structure's order).  ``evidence(i)``
    as for :func:`informative`; ``keep``: indices that do not give way (those measured
    this period, which the fit keeps in the structure).

    Why.  At ε → ∞ every measured pair passes :func:`informative`, so the structure
    fills the size limit (``max_cells``) with the pairs selected first: a nearly
    independent pair can hold the room a strongly dependent pair then cannot get, and
    that pair's error stays the largest (MaxWE).  Using this sampling null to keep such
    pairs out from the start (a stricter :func:`informative`) cures that but raises
    AvgWE elsewhere, since a weak but real dependence is still worth its room when the
    room is free; here a pair leaves only when a selected workload needs the room
    (bench/results/tabular_structure.md).  Post-processing of
    the counters' outputs and their public variances: no budget."""
    out = []
    for position, w in enumerate(structure):
        if len(w) != 2 or index[w] in keep:
            continue
        counts, variance = evidence(index[w])
        departure, e, n = _departure(fitter, w, counts)
        if e is None:
            out.append((0.0, position, w))
            continue
        null = math.sqrt(2.0 / math.pi) * float(
            np.sqrt(np.maximum(e * (1.0 - e / n), 0.0) + variance).sum())
        if departure <= null:
            out.append((departure / null if null > 0 else 0.0, position, w))
    return [w for *_, w in sorted(out)]


def room_for(fitter, structure: Sequence[Workload], workload: Workload,
             yielding_pairs: Sequence[Workload], limit: Optional[int]
             ) -> Optional[List[Workload]]:
    """The fewest of ``yielding_pairs`` (a prefix, weakest first: :func:`yielding`)
    whose leaving the ``structure`` lets ``workload`` fit within ``limit``, or None when
    all of them leaving would not.  A binary search on the prefix's length (the prefix it
    returns always fits; the shortest one when fewer pairs never make a larger tree,
    which the fitter's greedy triangulation makes likely but does not promise)."""
    def fits(count):
        gone = set(yielding_pairs[:count])
        return fitter.fits([w for w in structure if w not in gone], workload, limit)
    if not yielding_pairs or not fits(len(yielding_pairs)):
        return None
    low, high = 1, len(yielding_pairs)
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return list(yielding_pairs[:low])


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
            u = _utilities(config, targets, h, candidates, bias, batch)
            if config.selection_discount == "count":
                u = _count_discounted(u, counts, candidates)
            j = candidates[sampler.exponential_mechanism(
                u, config.selection_epsilon_at(k), config.utility_sensitivity)]
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


def _wide_set(config, j: int, cap: float) -> Workload:
    """The longest prefix S_j' of S_j (j, then its added attributes in order) of at most
    ``cap`` cells, at least j itself (``wide_noise`` = c: cap = c·B̂/v, the batch's
    expected count over the per-cell noise variance of an entry, both public).  A cell
    of a workload i projected from S_j' then carries noise v·|S_j'|/|W_i|, within c
    times the sampling variance of a batch's count in it, about B̂/|W_i|.  The exact
    histogram of S_j' is summed from S_j's before the noise is drawn, so the sensitivity
    is still 1."""
    wide = config.wide_sets[j]
    n = len(config.workloads[j])
    while len(wide) > n and config.domain.size(wide) > cap:
        wide = wide[:-1]
    return wide


def _wide_extras(config, fitter, structure, j, wide, selected, limit) -> List[int]:
    """The workloads other than j that the wide measurement of S_j feeds this period:
    those inside S_j, not yet measured this period, whose projection sums at most
    ``wide_ratio`` cells of S_j per cell; none when S_j = j, or under ``wide_fit="all"``
    when the model would outgrow ``limit`` with S_j.  Public (the structure, the
    selections)."""
    if len(wide) == len(config.workloads[j]) or (
            config.wide_fit == "all" and not fitter.fits(structure, wide, limit)):
        return []
    size = config.domain.size(wide)
    return [i for i, w in enumerate(config.workloads)
            if i != j and i not in selected and set(w) <= set(wide)
            and size <= config.wide_ratio * config.cells[i]]


def _project(domain: Domain, wide: Workload, workload: Workload, hist: np.ndarray
             ) -> np.ndarray:
    """The histogram of ``workload`` ⊆ ``wide`` summed from ``wide``'s (C order)."""
    table = hist.reshape([domain.size((a,)) for a in wide])
    return marginal_table(table, wide, workload).reshape(-1)


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
    at small ε a running average over the periods.  (A positive-part weight that also
    discounts the batch's sampling deviation does worse on CCES:
    bench/results/tabular_floor.md.)  What a workload's counter did not
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


def _periods_by_selections(state: TabularState) -> Dict[str, int]:
    """How many periods made each number of selections k_t (from the ledger)."""
    counts: Dict[int, int] = {}
    for entry in state.ledger.entries:
        k = len(entry.get("selections", []))
        counts[k] = counts.get(k, 0) + 1
    return {str(k): counts[k] for k in sorted(counts)}


def manifest_fields(config: TabularConfig, state: TabularState) -> Dict:
    """The privacy facts of a tabular release, for ``manifest.json``."""
    spent = state.ledger.spent
    proposed = config.method == "proposed"
    fitter = config.fitter()
    drift = drift_estimate(state.drift)
    return {
        "algorithm": ALGORITHMS[config.method],
        "paper": ("Kumar, Strohmer, Vershynin (2024), "
                  + ("§6 Algorithm 3 with the §7.2 workload form" if proposed
                     else "§5 Algorithm 2 (StreamingMWEM), workload form")),
        "method": config.method,
        "neighbor": "event-level",
        "relation": RELATION,
        "epsilon": config.epsilon,
        "epsilon_spent": spent,
        "privacy_statement": (
            f"{spent:.6g}-DP (pure, of {config.epsilon:.6g}) for the whole stream under "
            f"event-level neighbours (one record added or removed at one time): each "
            f"period spends epsilon on its own records only ("
            + (("at most " if config.selection_ceiling == config.selections else "")
               + f"k = {config.selections} exponential mechanisms of "
               f"{config.selection_epsilon:.6g} and as many "
               + ("selected counters" if proposed else "Laplace measurements")
               + f" of {config.measure_epsilon:.6g}; "
               + ("a period the drift estimate reads as exchangeable makes k_t < k"
                  + (f", and one it reads as drifting, whose noisy batch size affords "
                     f"measurements quieter than its sampling, up to k_t = "
                     f"{config.selection_ceiling},"
                     if config.selection_ceiling > config.selections else "")
                  + f" of {config.selection_epsilon_at(1):.6g}/k_t and "
                  f"{config.measure_epsilon_at(1):.6g}/k_t each, chosen "
                  f"from earlier releases only; "
                  if config.selection_schedule == "drift" else "")
               + "a period whose model has room for "
               "fewer workloads makes fewer and leaves the rest unspent"
               + ("; each measurement is the marginal of a wide set S_j holding the "
                  "selected workload (L1 sensitivity 1: one record is one cell), "
                  "projected without further noise on the workloads inside it"
                  if config.wide_cells is not None else "")) + "), parallel "
            "composition across periods; public, not protected: the domain, the workloads "
            "and the horizon T (inputs the user gives)"),
        "selections": config.selections,
        "selection_schedule": config.selection_schedule,
        "selection_ceiling": config.selection_ceiling,
        "periods_by_selections": _periods_by_selections(state),
        "selection_epsilon": config.selection_epsilon,
        "measurement_epsilon": config.measure_epsilon,
        "utility_sensitivity": config.utility_sensitivity,
        "bias_correction": config.bias_correction,
        "bias_noise": config.bias_noise,
        "coverage": config.coverage,
        "utility": config.utility,
        "remainder": config.remainder,
        "remainder_drift": (None if config.remainder != "adaptive" or drift is None
                            else round(drift, 5)),
        "remainder_stationary_weight": (stationary_weight(state.drift)
                                        if config.remainder == "adaptive" else None),
        "combine": config.combine,
        "margins": config.margins,
        "counter": config.counter if proposed else None,
        "counter_epsilon": config.measure_epsilon if proposed else None,
        "selection_share": config.selection_share,
        "measurement_noise": ("per cell of a selected workload: " + make_counter(
                                  config.counter, config.horizon,
                                  epsilon=config.measure_epsilon).noise_description()
                              if proposed else
                              f"discrete Laplace, scale {config.laplace_scale:.6g} per cell"),
        "fit": config.fit,
        "fit_model": fitter.model_kind,
        "structure": config.structure,
        "fit_iterations": int(config.fit_iterations),
        "model_cells": config.model_cells if fitter.model_kind == "junction-tree" else None,
        "model_workloads": (len(fitter.structure(state.model))
                            if fitter.model_kind == "junction-tree" else None),
        "model_growth": config.model_growth,
        "horizon": config.horizon,
        "workloads": [list(w) for w in config.workloads],
        "periods_released": list(range(1, state.period + 1)),  # a table after every period
        "size": int(state.size),
        "size_note": ("noisy size of the stream so far, post-processing of the noisy "
                      "measurements (no extra budget)"),
        "selection_counts": {",".join(w): int(c) for w, c in
                             zip(config.workloads, state.selection_counts)},
        "last_selected": [list(config.workloads[i]) for i in state.last_selected],
        "attributes_never_measured": never_measured(config, state),
        "workloads_never_measured": [list(w) for w, c in
                                     zip(config.workloads, state.selection_counts) if c == 0],
        "release_form": "whole table g_t" if proposed else "increment (appended)",
        **({} if config.wide_cells is None else
           {"wide_cells": int(config.wide_cells), "wide_ratio": config.wide_ratio,
            "wide_fit": config.wide_fit,
            "wide_sets": {",".join(w): list(s) for w, s in
                          zip(config.workloads, config.wide_sets) if s != w}}),
    }


def never_measured(config: TabularConfig, state: TabularState) -> List[str]:
    """The attributes in no workload selected so far: no measurement has seen them, so
    the release's shares of their values are the model's completion (uniform), not the
    data's.  The proposed method's selection weighs a workload's error on one period's
    batch against the noise of one measurement, so on small batches at moderate ε it can
    pass over every workload of a many-valued attribute for the whole stream; coverage
    (:func:`starved_cover`) measures it where that would carry information
    (docs/tabular.md, "Coverage")."""
    if state.period < 1:
        return []
    seen = {a for w, c in zip(config.workloads, state.selection_counts) if c > 0 for a in w}
    return [a for a in config.domain.names
            if a not in seen and any(a in w for w in config.workloads)]
