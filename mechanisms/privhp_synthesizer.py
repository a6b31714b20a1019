"""PrivHP (Holland, Camtepe, Thapa and Xue, SIGMOD 2025) as the jobs drive it: the
protocol of :mod:`continual_synth.mechanisms.synthesizer` with a horizon of one period.

The one-shot release is a single step: ``statistics`` is the exact PrivHP state of all
the points (:class:`~continual_synth.mechanisms.privhp.PrivHPAccumulator`: the complete
tree's counters and the level sketches, which the Beam CombineFn of
:mod:`continual_synth.transforms.points` merges by addition); :meth:`PrivHPSynthesizer.
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

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from continual_synth.mechanisms import privhp
from continual_synth.mechanisms.accounting import BudgetLedger
from continual_synth.mechanisms.errors import StateError
from continual_synth.mechanisms.samplers import Sampler
from continual_synth.mechanisms.synthesizer import PointsRelease


@dataclass(frozen=True)
class PrivHPState:
    """``period`` 0 (nothing released) or 1; the ε ledger; and the released tree's facts
    that the manifest states (:meth:`~continual_synth.mechanisms.privhp.PrivHPRelease.
    facts`; None before the release)."""

    period: int
    ledger: BudgetLedger
    released: Optional[Dict] = None


class PrivHPSynthesizer:
    """One PrivHP release of ``samples`` synthetic points with ``config``."""

    kind = "privhp"
    horizon = 1

    def __init__(self, config: privhp.PrivHPConfig, samples: int):
        self.config = config
        self.samples = int(samples)

    def initial_state(self) -> PrivHPState:
        return PrivHPState(0, BudgetLedger(total=self.config.epsilon, unit="epsilon"))

    def check_step(self, state: PrivHPState, period: int) -> None:
        """Refuse a period beyond the horizon (1), out of order or over budget."""
        if period > self.horizon:
            raise StateError(f"period {period} is beyond the horizon T={self.horizon} "
                             f"(PrivHP releases once)")
        if period != state.period + 1:
            raise StateError(f"period {period} is out of order: the next period is "
                             f"{state.period + 1}")
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
