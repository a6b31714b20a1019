"""What a tabular stream synthesizer carries between periods (:class:`TabularState`),
what one period releases (:class:`TabularRelease`), and the checks and debits before a
period's data is used.

Budget ledger (unit ε): the whole-stream guarantee ε is debited once, at period 1 (entry
"stream"), and every later period records a zero debit with what it spent on its own
records (ε: s·ε selection + (1 − s)·ε counters or measurements).  After any number of
periods ``ledger.spent`` = ε.  Periods beyond ``horizon`` are refused before any data is
used.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from continual_synth.mechanisms import accounting, pooled_margins
from continual_synth.mechanisms.counters import StreamCounter
from continual_synth.mechanisms.distributions import FittedModel, model_from_dict
from continual_synth.mechanisms.errors import InputError, StateError, check_next_period
from continual_synth.mechanisms.marginals import Domain, Workload
from continual_synth.mechanisms.tabular.config import TabularConfig, saved_config

__all__ = ["FORMAT_VERSION", "TabularState", "TabularRelease", "initial_state",
           "check_step", "period_cost"]


FORMAT_VERSION = 2  # 2: the aim rules, the ipf fit (junction-tree models)


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
