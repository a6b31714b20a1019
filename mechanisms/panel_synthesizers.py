"""Bun et al. 2024's two panel synthesizers as the jobs drive them (the protocol of
:mod:`continual_synth.mechanisms.synthesizer`): their statistic of the real panel, their
state machine, and how their synthetic people are created and extended.

Both of Bun et al.'s synthesizers give every synthetic person a *code* (Algorithm 1:
the window of its last k values; Algorithm 2: its number of ones so far), split the
people into *groups* by code (the last k−1 values; the weight), and each period
decide how many members of each group get each value.  The jobs
(:mod:`continual_synth.pipelines.families.jobs`), the Beam stages and the emission code
(:mod:`continual_synth.mechanisms.emission`) only talk to this interface:

* data side: ``panel_statistics(matrix)`` (batch: all periods at once) and
  ``advance(codes, values, period)`` (incremental: one period against each real
  person's code kept in the state);
* synthesizer: ``initial_state`` / ``state_from_dict`` / ``step`` (a
  :class:`~continual_synth.mechanisms.synthesizer.PanelRelease` out) / ``manifest``;
* emission: ``codes``, the rules of its people's codes and groups
  (:class:`~continual_synth.mechanisms.emission.WindowCodes`,
  :class:`~continual_synth.mechanisms.emission.WeightCodes`).
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from continual_synth.mechanisms import cumulative, window
from continual_synth.mechanisms.emission import WeightCodes, WindowCodes
from continual_synth.mechanisms.panel import advance_suffix, window_histograms
from continual_synth.mechanisms.synthesizer import PanelRelease, PanelStatistics, Synthesizer

__all__ = ["WindowSynthesizer", "CumulativeSynthesizer", "synthesizer_from_dict"]


class _PanelSynthesizer(Synthesizer):
    """The part of the protocol both delegate to their mechanism module (``mechanism``:
    :mod:`~continual_synth.mechanisms.window` or :mod:`~continual_synth.mechanisms.
    cumulative`, each with its state class, ``check_step`` and ``manifest_fields``)."""

    mechanism = None
    state_class = None

    def initial_state(self):
        return self.state_class.initial(self.config)

    def check_step(self, state, period: int) -> None:
        self.mechanism.check_step(state, period)

    def manifest(self, state) -> Dict:
        return self.mechanism.manifest_fields(state)


class WindowSynthesizer(_PanelSynthesizer):
    """Algorithm 1: codes are k-windows, groups their last k − 1 values."""

    kind = "window"
    mechanism, state_class = window, window.WindowState

    def __init__(self, config: window.WindowConfig):
        self.config = config
        self.alphabet: Tuple = config.alphabet
        self.horizon = config.horizon
        self.stat_width = config.num_bins
        self.codes = WindowCodes(config.alphabet_size, config.window)

    # data side -------------------------------------------------------------------
    def panel_statistics(self, matrix: np.ndarray) -> np.ndarray:
        """Row t − 1: C^t for t ≥ k, zeros before."""
        out = np.zeros((self.horizon, self.stat_width), dtype=np.int64)
        out[self.config.window - 1:] = window_histograms(matrix, self.config.alphabet_size,
                                                         self.config.window)
        return out

    def advance(self, codes: np.ndarray, values: np.ndarray, period: int):
        window_codes, suffix = advance_suffix(codes, values, self.config.alphabet_size,
                                              self.config.window)
        stats = (np.bincount(window_codes, minlength=self.stat_width)
                 if period >= self.config.window else np.zeros(self.stat_width, np.int64))
        return suffix, stats

    # synthesizer -----------------------------------------------------------------
    def step(self, state, statistics: PanelStatistics, sampler
             ) -> Tuple[window.WindowState, Optional[PanelRelease]]:
        """``(state, release)``; no release before period k."""
        period = state.period + 1
        state, release = window.step(
            state, statistics.counts if period >= self.config.window else None, sampler)
        if release is None:
            return state, None
        return state, PanelRelease(period, release.initial_counts, release.extension)


    def before_first_release_note(self, state) -> Optional[str]:
        k = self.config.window
        if state.period >= k:
            return None
        return (f"nothing is released before period {k} (the window length); periods 1..{k} "
                f"are released at period {k}")


class CumulativeSynthesizer(_PanelSynthesizer):
    """Algorithm 2: codes are weights (ones so far), groups are the weights themselves."""

    kind = "cumulative"
    mechanism, state_class = cumulative, cumulative.CumulativeState

    def __init__(self, config: cumulative.CumulativeConfig):
        self.config = config
        self.alphabet: Tuple = (0, 1)
        self.horizon = config.horizon
        self.stat_width = config.horizon
        self.codes = WeightCodes()

    # data side -------------------------------------------------------------------
    def panel_statistics(self, matrix: np.ndarray) -> np.ndarray:
        """Row t − 1: z_b^t for b = 1..t (zeros beyond)."""
        out = np.zeros((self.horizon, self.stat_width), dtype=np.int64)
        weights = np.zeros(matrix.shape[0], dtype=np.int64)
        for t in range(1, self.horizon + 1):
            weights, out[t - 1] = self.advance(weights, matrix[:, t - 1], t)
        return out

    def advance(self, codes: np.ndarray, values: np.ndarray, period: int):
        stats = np.zeros(self.stat_width, dtype=np.int64)
        stats[:period] = cumulative.threshold_counts(codes, values, period)
        return codes + values, stats

    # synthesizer -----------------------------------------------------------------
    def step(self, state, statistics: PanelStatistics, sampler
             ) -> Tuple[cumulative.CumulativeState, PanelRelease]:
        """``(state, release)``: the people are created at period 1 from the statistics'
        ``population`` n (public under replace and with --public-population; released
        with noise otherwise)."""
        period = state.period + 1
        state, release = cumulative.step(
            state, statistics.counts[:period], sampler,
            population=statistics.population if period == 1 else None)
        initial = np.array([release.num_synthetic]) if period == 1 else None
        return state, PanelRelease(period, initial, release.extension)


    def before_first_release_note(self, state) -> Optional[str]:
        return None


def synthesizer_from_dict(kind: str, config: Dict):
    """The synthesizer of a saved state."""
    if kind == "window":
        return WindowSynthesizer(window.WindowConfig.from_dict(config))
    if kind == "cumulative":
        return CumulativeSynthesizer(cumulative.CumulativeConfig.from_dict(config))
    raise ValueError(f"unknown synthesizer {kind!r}")
