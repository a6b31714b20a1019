"""Synthesizer stage: fold Algorithm 1's state machine over the periods' histograms.

Runs on one worker (its input is a handful of small histograms): adds the noise,
makes each period consistent, and splits every period's counts across the
emission shards.  Its output, the *plan*, is small and broadcast to emission.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import apache_beam as beam
import numpy as np

from continual_synth.mechanisms import emission, window
from continual_synth.mechanisms.samplers import make_sampler


def synthesize_period(state: window.WindowState, histogram: Optional[np.ndarray],
                      seed: Optional[int], num_shards: int,
                      shard_group_sizes: Optional[np.ndarray]) -> Tuple:
    """One period of Algorithm 1 and its emission plan, as batch and incremental jobs
    both run it: ``(state, release, shard plan, emission seed)`` (the last three None
    before period k).

    Randomness is drawn per period (the seeded sampler from ``[seed, period]``), so a
    batch run and T incremental steps with the same seed release the same records.
    """
    sampler = make_sampler(None if seed is None else [seed, state.period + 1])
    state, release = window.step(state, histogram, sampler)
    if release is None:
        return state, None, None, None
    if release.initial_counts is not None:
        plan = emission.initial_shard_plan(release.initial_counts, num_shards, sampler.rng)
    else:
        plan = emission.extension_shard_plan(shard_group_sizes, release.extension, sampler.rng)
    return state, release, plan, int(sampler.rng.integers(2 ** 63))


def fold_window_synthesizer(num_people: int, histograms: np.ndarray, config: window.WindowConfig,
                            num_shards: int, seed: Optional[int]) -> Dict:
    """Run Algorithm 1 over all periods; return the plan for emission and the manifest."""
    state = window.WindowState.initial(config)
    plans, seeds, group_sizes = {}, {}, None
    for period in range(1, config.horizon + 1):
        histogram = histograms[period - config.window] if period >= config.window else None
        state, release, plan, emission_seed = synthesize_period(state, histogram, seed,
                                                                num_shards, group_sizes)
        if release is not None:
            plans[period], seeds[period] = plan, emission_seed
            group_sizes = emission.group_sizes_after(plan.reshape(num_shards, -1),
                                                     config.alphabet_size)
    sampler_name = "opendp" if seed is None else "seeded"
    return {
        "plans": plans,
        "emission_seeds": seeds,
        "shard_sizes": emission.shard_sizes(state.num_synthetic, num_shards),
        "manifest": {**window.manifest_fields(state), "sampler": sampler_name,
                     "for_publication": seed is None},
    }


class SynthesizeWindowPanel(beam.PTransform):
    """``PCollection[(num_people, histograms)] → PCollection[plan dict]`` (one element)."""

    def __init__(self, config: window.WindowConfig, num_shards: int, seed: Optional[int]):
        super().__init__()
        self._args = (config, num_shards, seed)

    def expand(self, histograms):
        args = self._args
        return histograms | "Algorithm1" >> beam.MapTuple(
            lambda num_people, counts: fold_window_synthesizer(num_people, counts, *args))
