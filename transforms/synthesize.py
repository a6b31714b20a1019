"""Synthesizer stage: fold a synthesizer's state machine over the periods' statistics.

Runs on one worker (its input is a handful of small count arrays): adds the noise,
makes each period consistent, and splits every period's counts across the emission
shards.  Its output, the *plan*, is small and broadcast to emission.  The same
:func:`emission_plan` serves the batch fold and the incremental step.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import apache_beam as beam
import numpy as np

from continual_synth.mechanisms import emission
from continual_synth.mechanisms.synthesizer import PanelStatistics, Stepped, emission_seed

__all__ = ["emission_plan", "fold_synthesizer", "SynthesizePanel"]


def emission_plan(synthesizer, stepped: Stepped, num_shards: int,
                  code_counts: Optional[np.ndarray]) -> Tuple:
    """The emission of a stepped period, as batch and incremental jobs both make it:
    ``(shard plan, per-shard code counts, emission seed)``; the plan and seed are None
    when the period releases nothing (Algorithm 1 before period k).  The split across
    shards and the emission seed continue the period's sampler after its noise, so a batch
    run and T incremental steps with the same seed release the same records."""
    release = stepped.release
    if release is None:
        return None, code_counts, None
    plan, code_counts = emission.period_shard_plan(synthesizer.codes, release.initial,
                                                   release.extension, code_counts,
                                                   num_shards, stepped.sampler.rng)
    return plan, code_counts, emission_seed(stepped.sampler)


def fold_synthesizer(num_people: int, statistics: np.ndarray, synthesizer, num_shards: int,
                     seed: Optional[int]) -> Dict:
    """Run the synthesizer over all periods; return the plan for emission and the manifest."""
    plans, seeds, code_counts, state = {}, {}, None, synthesizer.initial_state()
    periods = ((t, PanelStatistics(statistics[t - 1], num_people))
               for t in range(1, synthesizer.horizon + 1))
    for stepped in synthesizer.fold(periods, seed):
        state = stepped.state
        plan, code_counts, period_seed = emission_plan(synthesizer, stepped, num_shards,
                                                       code_counts)
        if plan is not None:
            plans[synthesizer.period(state)], seeds[synthesizer.period(state)] = plan, period_seed
    return {
        "plans": plans,
        "emission_seeds": seeds,
        "shard_sizes": emission.shard_sizes(state.num_synthetic, num_shards),
        "manifest": {**synthesizer.manifest(state),
                     "sampler": "opendp" if seed is None else "seeded"},
    }


class SynthesizePanel(beam.PTransform):
    """``PCollection[(num_people, statistics)] → PCollection[plan dict]`` (one element)."""

    def __init__(self, synthesizer, num_shards: int, seed: Optional[int]):
        super().__init__()
        self.synthesizer, self.num_shards, self.seed = synthesizer, num_shards, seed

    def expand(self, statistics):
        synthesizer, num_shards, seed = self.synthesizer, self.num_shards, self.seed
        return statistics | "Synthesizer" >> beam.MapTuple(
            lambda num_people, counts: fold_synthesizer(num_people, counts, synthesizer,
                                                        num_shards, seed))
