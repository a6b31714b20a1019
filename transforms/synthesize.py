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


def fold_window_synthesizer(num_people: int, histograms: np.ndarray, config: window.WindowConfig,
                            num_shards: int, seed: Optional[int]) -> Dict:
    """Run Algorithm 1 over all periods; return the plan for emission and the manifest."""
    sampler = make_sampler(seed)
    state = window.WindowState.initial(config)
    releases = []
    for period in range(1, config.horizon + 1):
        histogram = histograms[period - config.window] if period >= config.window else None
        state, release = window.step(state, histogram, sampler)
        if release is not None:
            releases.append(release)
    plans = emission.plan_all_shards(releases, num_shards, config.alphabet_size, sampler.rng)
    return {
        "plans": plans,
        "shard_sizes": emission.shard_sizes(state.num_synthetic, num_shards),
        "emission_seed": int(sampler.rng.integers(2 ** 63)),
        "state": state.to_dict(),
        "manifest": {**window.manifest_fields(state), "sampler": sampler.name,
                     "for_publication": sampler.for_publication},
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
