"""PrivHP (Holland, Camtepe, Thapa and Xue, SIGMOD 2025) as the jobs drive it: the
protocol of :mod:`continual_synth.mechanisms.synthesizer` — one-shot
(:class:`PrivHPSynthesizer`, a horizon of one period) and continual
(:class:`ContinualPrivHPSynthesizer`, T periods, each releasing all points so far).

The one-shot release is a single step: ``statistics`` is the exact PrivHP state of all
the points (:class:`~continual_synth.mechanisms.privhp.PrivHPAccumulator`: the complete
tree's counters and the level sketches, which the Beam CombineFn of
:mod:`continual_synth.transforms.privhp` merges by addition); :meth:`PrivHPSynthesizer.
step` adds the noise, grows and makes the tree consistent
(:func:`~continual_synth.mechanisms.privhp.release`), debits ε in the state's ledger and
returns a :class:`~continual_synth.mechanisms.synthesizer.PointsRelease` — the tree to
sample, the number of synthetic points and the emission seed.  Sampling the points
(:func:`~continual_synth.mechanisms.privhp.sample_shard`) is post-processing.

Randomness: the release's noise comes from ``period_sampler(seed, 1)`` and its emission
seed from :func:`~continual_synth.mechanisms.synthesizer.emission_seed`, as for every
synthesizer.
Pure numpy; no Beam.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from continual_synth.mechanisms import continual_privhp, privhp
from continual_synth.mechanisms.accounting import BudgetLedger
from continual_synth.mechanisms.counters import StreamCounter
from continual_synth.mechanisms.errors import check_next_period
from continual_synth.mechanisms.samplers import Sampler
from continual_synth.mechanisms.synthesizer import PointsRelease, Synthesizer, emission_seed

__all__ = ["PrivHPState", "PrivHPSynthesizer", "ContinualPrivHPState",
           "ContinualPrivHPSynthesizer", "CONTINUAL_W1_NOTE", "continual_release_manifest"]


@dataclass(frozen=True)
class PrivHPState:
    """``period`` 0 (nothing released) or 1; the ε ledger; and the released tree's facts
    that the manifest states (:meth:`~continual_synth.mechanisms.privhp.PrivHPRelease.
    facts`; None before the release)."""

    period: int
    ledger: BudgetLedger
    released: Optional[Dict] = None

    def to_dict(self) -> Dict:
        return {"period": self.period, "ledger": self.ledger.to_dict(),
                "released": self.released}

    @classmethod
    def from_dict(cls, data: Dict) -> "PrivHPState":
        return cls(data["period"], BudgetLedger.from_dict(data["ledger"]), data["released"])


class PrivHPSynthesizer(Synthesizer):
    """One PrivHP release of ``samples`` synthetic points with ``config``."""

    kind = "privhp"
    horizon = 1
    state_class = PrivHPState

    def __init__(self, config: privhp.PrivHPConfig, samples: int):
        self.config = config
        self.samples = int(samples)

    def initial_state(self) -> PrivHPState:
        return PrivHPState(0, BudgetLedger(total=self.config.epsilon, unit="epsilon"))

    def check_step(self, state: PrivHPState, period: int) -> None:
        """Refuse a period beyond the horizon (1), out of order or over budget."""
        check_next_period(period, state.period, self.horizon)  # PrivHP releases once
        state.ledger.check(self.config.epsilon, f"period {period}")

    def step(self, state: PrivHPState, statistics: privhp.PrivHPAccumulator,
             sampler: Sampler) -> Tuple[PrivHPState, PointsRelease]:
        """The release: noise once (levels 0..r, ε = Σ_ℓ ε_ℓ by basic composition),
        growth and consistency; ε debited in the new state's ledger."""
        period = state.period + 1
        self.check_step(state, period)
        if statistics.config != self.config:
            raise ValueError("the statistics were accumulated with another PrivHP "
                             "configuration")
        rel = privhp.release(statistics, sampler)
        ledger = BudgetLedger.from_dict(state.ledger.to_dict())
        ledger.charge(self.config.epsilon, f"period {period}", period=period)
        new_state = PrivHPState(period, ledger, rel.facts())
        return new_state, PointsRelease(period, rel.tree, self.samples, rel.emission_seed)

    def manifest(self, state: PrivHPState) -> Dict:
        """The release's manifest fields (algorithm, accounting, parameters, memory and,
        once released, the released tree's size, noisy total and sampler)."""
        return privhp.release_manifest(self.config, **(state.released or {}))


# ----------------------------------------------------------------------- continual


@dataclass
class ContinualPrivHPState:
    """``period`` t released so far, the ε ledger (the whole stream's ε, charged at
    period 1), the level counters (private: true partial sums) and the facts of the
    last release (None before)."""

    period: int
    ledger: BudgetLedger
    counters: List[StreamCounter]
    released: Optional[Dict] = None

    def to_dict(self) -> Dict:
        return {"period": self.period, "ledger": self.ledger.to_dict(),
                "counters": [c.to_dict() for c in self.counters],
                "released": self.released}

    @classmethod
    def from_dict(cls, data: Dict) -> "ContinualPrivHPState":
        return cls(data["period"], BudgetLedger.from_dict(data["ledger"]),
                   [StreamCounter.from_dict(c) for c in data["counters"]], data["released"])


class ContinualPrivHPSynthesizer(Synthesizer):
    """Continual PrivHP (:mod:`~continual_synth.mechanisms.continual_privhp`): at every
    period t = 1..T, ``samples`` synthetic points of all the points seen so far.
    ``statistics`` of a step are the exact PrivHP state of the period's points only."""

    kind = "continual-privhp"
    state_class = ContinualPrivHPState

    def __init__(self, config: continual_privhp.ContinualPrivHPConfig, samples: int):
        self.config = config
        self.samples = int(samples)
        self.horizon = config.horizon

    def initial_state(self) -> ContinualPrivHPState:
        return ContinualPrivHPState(0, BudgetLedger(total=self.config.epsilon,
                                                    unit="epsilon"),
                                    self.config.new_counters())

    def _charge(self, period: int) -> float:
        """ε of the whole stream at period 1 (event level: every period's counters share
        it, see the module docstring of continual_privhp), nothing afterwards."""
        return self.config.epsilon if period == 1 else 0.0

    def check_step(self, state: ContinualPrivHPState, period: int) -> None:
        check_next_period(period, state.period, self.horizon)
        state.ledger.check(self._charge(period), f"period {period}")

    def step(self, state: ContinualPrivHPState, statistics: privhp.PrivHPAccumulator,
             sampler: Sampler) -> Tuple[ContinualPrivHPState, PointsRelease]:
        """Feed the period to the counters, grow and make consistent; the emission seed
        is drawn after the noise.  ``state`` is not modified."""
        period = state.period + 1
        self.check_step(state, period)
        counters = copy.deepcopy(state.counters)
        tree = continual_privhp.feed(self.config, counters, statistics, sampler)
        ledger = BudgetLedger.from_dict(state.ledger.to_dict())
        ledger.charge(self._charge(period), f"period {period}", period=period)
        seed = emission_seed(sampler)
        released = {"period": period, "released_tree_nodes": tree.num_nodes,
                    "noisy_total": tree.total}
        return (ContinualPrivHPState(period, ledger, counters, released),
                PointsRelease(period, tree, self.samples, seed))

    def manifest(self, state: ContinualPrivHPState) -> Dict:
        return {**continual_release_manifest(self.config),
                "epsilon_spent": state.ledger.spent,
                "ledger": state.ledger.to_dict(),
                "periods_released": list(range(1, state.period + 1)),
                "last_release": state.released,
                "samples_per_period": self.samples}


#: why a continual PrivHP manifest states no W1 bound
CONTINUAL_W1_NOTE = (
    "no W1 bound: Holland et al. (2025) prove Theorem 3 for the one-pass release only "
    "(Section 3.1 says the counters could be replaced by continual ones, with no bound), "
    "and continual PrivHP departs from the proof's accounting: its counts are tree-counter "
    "partial sums, made consistent by least squares (not Algorithm 3 on independent "
    "noise), with unmeasured levels when the level stride exceeds 1")


def continual_release_manifest(config: continual_privhp.ContinualPrivHPConfig) -> Dict:
    """What a continual PrivHP manifest says from the configuration alone (the
    algorithm, the accounting, the parameters and the memory); a release adds what it
    has spent and released (:meth:`ContinualPrivHPSynthesizer.manifest`)."""
    structure = privhp.release_manifest(config.structure)
    structure.pop("memory_counters")
    return {
        **structure,
        **config.accounting(),
        "algorithm": ("continual PrivHP: PrivHP's decomposition (Holland et al. 2025, "
                      "Algorithms 1-3) with every exact counter and sketch cell a "
                      "continual counter over periods; growth and consistency redone "
                      "each period"),
        "memory_counters": config.memory_words,
        "memory": {**structure["memory"], "budget": config.memory,
                   "counters_used": config.memory_words, "cells": config.cells,
                   "tree_counters": config.measured_cells[0],
                   "sketch_counters": config.measured_cells[1],
                   "words_per_cell": config.words_per_cell,
                   "unit": ("float words held by the counters (constant over the "
                            "stream): cells × words_per_cell; tree_counters and "
                            "sketch_counters are the cells of the measured exact and "
                            "sketch levels; full_tree_counters the cells of the plain "
                            "tree of depth r")},
        "w1_bound": None,
        "w1_bound_note": CONTINUAL_W1_NOTE,
    }
