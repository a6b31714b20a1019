"""The configuration of a tabular stream synthesizer (Kumar, Strohmer and Vershynin
2024): the options, the two rule sets, the budget split, and the public choices that
follow from them (:class:`TabularConfig`).

Two rule sets (:data:`RULES`; each rule is also its own option): ``paper``, Algorithm 3
as printed (to reproduce the paper), and ``aim`` (the default), the rules below that
depart from it where the printed ones stay far from the sampling floor even without
noise (``bench/results/tabular_floor.md``).  A saved configuration without an option
keeps the rule it was calibrated for (:data:`SAVED_CONFIG_DEFAULTS`).

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
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from continual_synth.mechanisms import accounting
from continual_synth.mechanisms.counters import (SHARE_KINDS, StreamCounter,
                                                 UNBOUNDED_KINDS, counter_kinds,
                                                 counter_units, make_counter)
from continual_synth.mechanisms.errors import (InputError, MAX_NOISE_RECORDS,
                                               ParameterError, check_noise_records,
                                               format_bytes, privacy_budget, probability,
                                               whole_number)
from continual_synth.mechanisms.fitting import (DEFAULT_MAX_CELLS, DEFAULT_MODEL_CELLS,
                                                FIT_METHODS, Fitter, PGM_MODELS,
                                                junction_tree_cells)
from continual_synth.mechanisms.marginals import Domain, Workload

__all__ = ["ALGORITHMS", "METHODS", "BIAS_CORRECTIONS", "BIAS_NOISES", "COVERAGES",
           "UTILITIES", "REMAINDERS", "COMBINES", "MARGINS", "BASELINE_STARTS",
           "SELECTION_DISCOUNTS", "MODEL_GROWTHS", "SELECTION_SCHEDULES", "WIDE_FITS",
           "STRUCTURES", "UNSEEN_SHARES", "WIDE_RATIO", "WIDE_CELLS", "WIDE_NOISE", "PAPER_SELECTIONS",
           "AUTO_SELECTIONS_MAX", "WIDE_SELECTIONS", "RULES", "DEFAULT_SELECTION_SHARES",
           "SAVED_CONFIG_DEFAULTS", "RELATION", "MAX_WORKLOAD_CELLS",
           "resolved_selection_share", "quiet_selections", "wide_regime", "auto_selections",
           "TabularConfig", "saved_config"]


ALGORITHMS = {
    "proposed": "kumar2024-algorithm-3-select-measure-fit-with-counters",
    "baseline": "kumar2024-algorithm-2-streaming-mwem",
}


METHODS = tuple(ALGORITHMS)


BIAS_CORRECTIONS = ("noise+sampling", "noise", "paper", "none")


BIAS_NOISES = ("estimate", "counter")


COVERAGES = ("reachable", "none")


UTILITIES = ("aim", "paper")


UTILITY_SIZES = ("estimate", "target")


REMAINDERS = ("adaptive", "increment", "model", "paper")


COMBINES = ("last", "average")


MARGINS = ("pooled", "none")


BASELINE_STARTS = ("previous", "uniform")


SELECTION_DISCOUNTS = ("none", "count")


MODEL_GROWTHS = ("fixed", "horizon")


SELECTION_SCHEDULES = ("drift", "fixed")


WIDE_FITS = ("inside", "all")


STRUCTURES = ("informative", "measured")


UNSEEN_SHARES = ("current", "carried")


# wide_ratio's default: a workload's projected cell sums at most 8 noisy cells of the wide
# set (the default: bench/results/tabular_wide_measurements.md)
WIDE_RATIO = 8.0


# TabularSynthesizer.create's wide_cells for the proposed method with the simple counter
# and the aim rules (the command line's default --wide-cells): the largest wide set, in
# cells (the default: bench/results/tabular_wide_measurements.md; on other tables:
# bench/results/tabular_wide_untuned.md)
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
                 "structure": None, "utility_size": None, "unseen_share": None},
         "paper": {"utility": "paper", "bias_correction": "paper", "remainder": "paper",
                   "combine": "average", "refresh": 0, "baseline_start": "uniform",
                   "margins": "none", "selection_share": 0.5, "selection_discount": "none",
                   "model_growth": "fixed", "bias_noise": "counter", "coverage": "none",
                   "structure": "measured", "utility_size": "target",
                   "unseen_share": "carried"}}


# Share s of each period's ε spent on its k selections (the rest on its k measurements).
# The paper's is 1/2; AIM (McKenna et al. 2022) gives selection a tenth, which the proposed
# method takes.  The baseline's selections see one batch, whose errors are small next to
# the selection noise, so they keep the paper's 1/2 (both defaults:
# bench/results/tabular_tables_adult_share.md).
DEFAULT_SELECTION_SHARES = {"proposed": 0.1, "baseline": 0.5}


# What a saved configuration without an option means: no pool, the paper's split.
SAVED_CONFIG_DEFAULTS = {"margins": "none", "selection_share": 0.5, "selection_discount": "none",
                         "model_growth": "fixed", "selection_schedule": "fixed",
                         "bias_noise": "counter", "coverage": "none",
                         "structure": "measured", "utility_size": "target",
                         "unseen_share": "carried"}


RELATION = "event-level add/remove of one record"


MAX_WORKLOAD_CELLS = 1 << 26  # cells of all workload histograms together (512 MiB of int64)


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
    utility_size: Optional[str] = None
    unseen_share: Optional[str] = None
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
        self._resolve_choice("utility_size", UTILITY_SIZES,
                             "estimate" if self.utility == "aim" and self.method == "proposed"
                             else "target", "estimate", self.utility == "aim",
                             "scaling the model to a public size estimate is the aim "
                             "utility's (the paper's compares counts at the model's size)")
        if self.combine not in COMBINES:
            raise InputError(f"combine must be one of {COMBINES}, got {self.combine!r}")
        if self.remainder not in REMAINDERS:
            raise InputError(f"remainder must be one of {REMAINDERS}, got "
                             f"{self.remainder!r}")
        self._resolve_choice("unseen_share", UNSEEN_SHARES,
                             "current" if self.remainder == "adaptive" else "carried",
                             "current", self.remainder == "adaptive",
                             "re-imputing a workload's unseen periods from the current model "
                             "is the adaptive remainder's (its drift test says when the "
                             "periods are exchangeable)")
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
        """Δ of the utilities (:mod:`.selection`): 1 for ``aim`` scaled to a public size
        estimate (``utility_size="estimate"``), 2 for ``aim`` scaled to the target's own
        size, max_i 1/|W_i| for ``paper``."""
        return self.utility_sensitivity_at(True)

    def utility_sensitivity_at(self, sized: bool) -> float:
        """Δ of a selection whose utilities have a public size estimate (``sized``) or
        not: under ``utility_size="estimate"`` the selections made before any size is
        public (period 1's first) fall back to the target's own size, Δ = 2."""
        if self.utility != "aim":
            return 1.0 / min(self.cells)
        return 1.0 if self.utility_size == "estimate" and sized else 2.0

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
        :func:`auto_selections` (k = 24 at ε ≳ 38): with k = 12 or at ε = 1 (k = 3) the
        smaller early models cost accuracy, and on a small sorted stream with a tight
        ``max_cells`` the model stays too small for most of the stream (the default:
        bench/results/tabular_selections.md).  The price: early in a long horizon the
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
                "structure": self.structure, "utility_size": self.utility_size,
                "unseen_share": self.unseen_share,
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
