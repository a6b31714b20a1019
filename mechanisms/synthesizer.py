"""The synthesizer protocol: what every continual synthesizer exposes to the jobs.

A synthesizer is a state machine over periods t = 1..T:

    (state_{t−1}, statistics of period t, sampler_t)  →  (state_t, release_t)

Every family implements :class:`Synthesizer` (``tests/test_synthesizer_protocol.py`` runs
one conformance test over all of them).  ``statistics`` are the exact statistics of the
period's data (Bun et al. 2024: :class:`PanelStatistics`, the window histogram C^t or the
threshold counts z_b^t with the panel's population n; Kumar et al. 2024: the workload histograms
of the period's new records; Holland et al. 2025: PrivHP's exact tree counters and
sketches, one period only); the step adds the noise, charges the ledger in ``state``
and returns a typed :class:`Release`: :class:`PanelRelease` (synthetic people to create and
extend), :class:`TableRelease` (a synthetic table, as a fitted distribution to sample
or the baseline's sampled increment) or :class:`PointsRelease` (a noisy consistent tree
to sample synthetic points from).  The synthesizers are in
:mod:`~continual_synth.mechanisms.panel_synthesizers`,
:mod:`~continual_synth.mechanisms.tabular_synthesizer` and
:mod:`~continual_synth.mechanisms.privhp_synthesizer`.  Release rules (which records make up the release
at t) live with the synthesizer, not in the jobs.

Randomness: the noise of period t comes from :func:`period_sampler` — the exact OpenDP
sampler, or with a seed the simulation sampler seeded by ``[seed, t]`` — so the batch,
incremental and streaming drivers draw the same noise for the same seed; the seed of the
period's post-processing (sampling records) is :func:`emission_seed`, drawn from that
sampler after the noise (PrivHP's one-shot release is period 1).
Pure numpy; no Beam.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, NamedTuple, Optional, Tuple

import numpy as np

from continual_synth.mechanisms.accounting import BudgetLedger
from continual_synth.mechanisms.samplers import Sampler, make_sampler

__all__ = ["period_sampler", "emission_seed", "Release", "PanelStatistics", "PanelRelease",
           "TableRelease", "PointsRelease", "Stepped", "Synthesizer"]


def period_sampler(seed: Optional[int], period: int) -> Sampler:
    """The sampler of period ``period``'s noise (None: the exact OpenDP sampler)."""
    return make_sampler(None if seed is None else [int(seed), int(period)])


def emission_seed(sampler: Sampler) -> int:
    """The seed of a period's post-processing randomness (drawn after its noise)."""
    return int(sampler.rng.integers(2 ** 63))


@dataclass(frozen=True)
class Release:
    """What a synthesizer's step publishes: ``period``, the period released (every family's
    release type below adds what its emission needs)."""

    period: int


@dataclass(frozen=True)
class PanelStatistics:
    """The exact statistics of a panel's period: ``counts`` (Algorithm 1: the window
    histogram C^t, zeros before period k; Algorithm 2: the threshold counts z_b^t) and
    ``population``, the number of people in the panel (Algorithm 2 creates its synthetic
    people from it at period 1 when n is public)."""

    counts: np.ndarray
    population: int


@dataclass(frozen=True)
class PanelRelease(Release):
    """A panel synthesizer's release at ``period``: counts of synthetic people to create
    by code (``initial``; Algorithm 1 at t = k, Algorithm 2 at t = 1) and how many of each
    group get each value (``extension``); either may be None."""

    period: int
    initial: Optional[np.ndarray]
    extension: Optional[np.ndarray]


@dataclass(frozen=True)
class TableRelease(Release):
    """A tabular synthesizer's release at ``period``: the synthetic table g_t is
    ``size`` records sampled from ``model`` with ``emission_seed`` (Algorithm 3), or —
    ``increment`` — the records ``codes`` of the baseline's increment ∇g_t, already
    sampled, that are appended to the table of t − 1 (Algorithm 2).  ``accuracy``: the
    release's error bounds (:mod:`~continual_synth.mechanisms.tabular_accuracy`), the
    document of ``accuracy-tTTTT.json``."""

    period: int
    size: int
    increment: bool
    emission_seed: int
    model: Any = None
    codes: Optional[np.ndarray] = None
    accuracy: Optional[Dict] = None


@dataclass(frozen=True)
class PointsRelease(Release):
    """PrivHP's release (Holland et al. 2025; one period, horizon 1): ``size`` synthetic
    points of [0,1]^d sampled from ``tree``, the noisy consistent grown tree
    (:class:`~continual_synth.mechanisms.privhp.PrivHPTree`), with ``emission_seed``
    (shard s of S draws with the generator ``[emission_seed, s]``)."""

    period: int
    tree: Any
    size: int
    emission_seed: int


class Stepped(NamedTuple):
    """One period the driver stepped: the synthesizer's new ``state``, its ``release``
    (None when the period releases nothing) and the period's ``sampler``, whose generator
    the period's post-processing continues (:func:`emission_seed`)."""

    state: Any
    release: Optional[Release]
    sampler: Sampler


class Synthesizer(ABC):
    """The protocol every continual synthesizer implements, and all the jobs need of one
    (the state machine of the module docstring).  Its public configuration is fixed at
    construction; ``kind`` names the family in a state directory; ``horizon`` is T (None:
    an open horizon).  States are immutable values: :meth:`step` returns a new one."""

    kind: str = ""
    horizon: Optional[int] = None
    #: the family's state type: ``period``, ``ledger``, ``to_dict`` and ``from_dict``,
    #: which the methods below read (a family whose state has other names overrides them)
    state_class: Any = None

    @abstractmethod
    def initial_state(self) -> Any:
        """The state before period 1 (nothing spent)."""

    def period(self, state: Any) -> int:
        """The last period ``state`` has stepped (0 before the first)."""
        return state.period

    @abstractmethod
    def check_step(self, state: Any, period: int) -> None:
        """Refuse a period out of order, past the horizon or over budget (before data)."""

    @abstractmethod
    def step(self, state: Any, statistics: Any, sampler: Sampler
             ) -> Tuple[Any, Optional[Release]]:
        """One period: ``(new state, release or None)`` from the period's exact
        ``statistics`` and the period's ``sampler`` (:func:`period_sampler`)."""

    def step_period(self, state: Any, period: int, statistics: Any, seed: Optional[int]
                    ) -> Stepped:
        """Step period ``period`` (the one after ``state``'s) with its own sampler,
        :func:`period_sampler` of ``seed``: the one rule by which the batch fold, the
        incremental step and the stream draw the same noise for the same seed."""
        if period != self.period(state) + 1:
            raise ValueError(f"cannot step period {period} after period "
                             f"{self.period(state)}: periods are stepped in order")
        sampler = period_sampler(seed, period)
        state, release = self.step(state, statistics, sampler)
        return Stepped(state, release, sampler)

    def fold(self, periods: Iterable[Tuple[int, Any]], seed: Optional[int],
             state: Any = None) -> Iterator[Stepped]:
        """The synthesizer folded over ``periods``, ``(t, statistics of period t)`` in
        order from the one after ``state`` (default: the initial state): every batch
        job's loop over periods, lazily, so that a period's statistics are read only when
        it is stepped and each release can be written before the next is drawn."""
        state = self.initial_state() if state is None else state
        for period, statistics in periods:
            stepped = self.step_period(state, period, statistics, seed)
            state = stepped.state
            yield stepped

    def ledger(self, state: Any) -> BudgetLedger:
        """The privacy cost so far: the ledger's charges and its total budget."""
        return state.ledger

    def state_to_dict(self, state: Any) -> Dict:
        """``state`` as JSON-able data (the state directory's ``synthesizer_state``)."""
        return state.to_dict()

    def state_from_dict(self, data: Dict) -> Any:
        """The state :meth:`state_to_dict` wrote."""
        return self.state_class.from_dict(data)

    @abstractmethod
    def manifest(self, state: Any) -> Dict:
        """The release's manifest fields (the algorithm, the accounting, the release)."""
