"""The synthesizer protocol: what every continual synthesizer exposes to the jobs.

A synthesizer is a state machine over periods t = 1..T:

    (state_{t−1}, statistics of period t, sampler_t)  →  (state_t, release_t)

``statistics`` are the exact statistics of the period's data (Bun et al. 2024: the window
histogram C^t or the threshold counts z_b^t; Kumar et al. 2024: the workload histograms
of the period's new records; Holland et al. 2025: PrivHP's exact tree counters and
sketches, one period only); the step adds the noise, charges the ledger in ``state``
and returns a typed release: :class:`PanelRelease` (synthetic people to create and
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

from dataclasses import dataclass
from typing import Any, Dict, Optional, Protocol, Tuple

import numpy as np

from continual_synth.mechanisms.samplers import Sampler, make_sampler


def period_sampler(seed: Optional[int], period: int) -> Sampler:
    """The sampler of period ``period``'s noise (None: the exact OpenDP sampler)."""
    return make_sampler(None if seed is None else [int(seed), int(period)])


def emission_seed(sampler: Sampler) -> int:
    """The seed of a period's post-processing randomness (drawn after its noise)."""
    return int(sampler.rng.integers(2 ** 63))


@dataclass(frozen=True)
class PanelRelease:
    """A panel synthesizer's release at ``period``: counts of synthetic people to create
    by code (``initial``; Algorithm 1 at t = k, Algorithm 2 at t = 1) and how many of each
    group get each value (``extension``); either may be None."""

    period: int
    initial: Optional[np.ndarray]
    extension: Optional[np.ndarray]


@dataclass(frozen=True)
class TableRelease:
    """A tabular synthesizer's release at ``period``: the synthetic table g_t is
    ``size`` records sampled from ``model`` with ``emission_seed`` (Algorithm 3), or —
    ``increment`` — the records ``codes`` of the baseline's increment ∇g_t, already
    sampled, that are appended to the table of t − 1 (Algorithm 2)."""

    period: int
    size: int
    increment: bool
    emission_seed: int
    model: Any = None
    codes: Optional[np.ndarray] = None


@dataclass(frozen=True)
class PointsRelease:
    """PrivHP's release (Holland et al. 2025; one period, horizon 1): ``size`` synthetic
    points of [0,1]^d sampled from ``tree``, the noisy consistent grown tree
    (:class:`~continual_synth.mechanisms.privhp.PrivHPTree`), with ``emission_seed``
    (shard s of S draws with the generator ``[emission_seed, s]``)."""

    period: int
    tree: Any
    size: int
    emission_seed: int


class Synthesizer(Protocol):
    """What the jobs (:mod:`continual_synth.pipelines.jobs`, :mod:`continual_synth.
    pipelines.tabular`, :mod:`continual_synth.pipelines.bounded`) need of a synthesizer."""

    kind: str

    def initial_state(self) -> Any: ...

    def check_step(self, state: Any, period: int) -> None:
        """Refuse a period out of order, past the horizon or over budget (before data)."""

    def step(self, state: Any, statistics: np.ndarray, sampler: Sampler
             ) -> Tuple[Any, Optional[Any]]:
        """One period: ``(new state, release or None)``."""

    def manifest(self, state: Any) -> Dict: ...
