"""The exponential mechanism (report noisy max with Gumbel noise) of both samplers:
selection frequencies against P(i) ∝ exp(ε·u_i / (2Δ)), chi-square with fixed seeds."""
import math

import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms.samplers import OpenDPSampler, SeededSampler

UTILITIES = np.array([0.0, 1.0, 2.5, -1.0, 2.0])


def probabilities(u, epsilon, sensitivity):
    logits = epsilon * np.asarray(u) / (2 * sensitivity)
    w = np.exp(logits - logits.max())
    return w / w.sum()


def frequencies(sampler, draws, epsilon, sensitivity, u=UTILITIES):
    counts = np.zeros(len(u), dtype=np.int64)
    for _ in range(draws):
        counts[sampler.exponential_mechanism(u, epsilon, sensitivity)] += 1
    return counts


def chi2_pvalue(counts, p):
    return stats.chisquare(counts, counts.sum() * p).pvalue


@pytest.mark.parametrize("epsilon,sensitivity", [(1.0, 1.0), (2.0, 0.25), (0.3, 0.5)])
def test_seeded_frequencies_match_exponential_mechanism(epsilon, sensitivity):
    counts = frequencies(SeededSampler(11), 20000, epsilon, sensitivity)
    assert chi2_pvalue(counts, probabilities(UTILITIES, epsilon, sensitivity)) > 1e-3


def test_seeded_frequencies_reject_a_wrong_calibration():
    """Power check: the same frequencies are far from exp(ε·u/Δ) (the paper's formula
    without the factor 2), so the test above can fail."""
    counts = frequencies(SeededSampler(12), 20000, 2.0, 0.5)
    assert chi2_pvalue(counts, probabilities(UTILITIES, 2.0, 0.5)) > 1e-3
    assert chi2_pvalue(counts, probabilities(UTILITIES, 4.0, 0.5)) < 1e-6


def test_opendp_frequencies_match_exponential_mechanism():
    counts = frequencies(OpenDPSampler(), 3000, 1.0, 0.5)
    assert chi2_pvalue(counts, probabilities(UTILITIES, 1.0, 0.5)) > 1e-4


def test_seeded_selection_is_reproducible_and_shift_invariant():
    a = [SeededSampler(5).exponential_mechanism(UTILITIES, 1.0, 1.0) for _ in range(3)]
    b = [SeededSampler(5).exponential_mechanism(UTILITIES + 100.0, 1.0, 1.0) for _ in range(3)]
    assert a == b


def test_large_epsilon_selects_the_maximum():
    for sampler in (SeededSampler(3), OpenDPSampler()):
        picks = {sampler.exponential_mechanism(UTILITIES, 1e6, 1.0) for _ in range(20)}
        assert picks == {int(np.argmax(UTILITIES))}


def test_single_candidate_and_bad_arguments():
    for sampler in (SeededSampler(1), OpenDPSampler()):
        assert sampler.exponential_mechanism([3.0], 1.0, 1.0) == 0
        with pytest.raises(ValueError):
            sampler.exponential_mechanism([], 1.0, 1.0)
        with pytest.raises(ValueError):
            sampler.exponential_mechanism([1.0, math.nan], 1.0, 1.0)
        with pytest.raises(ValueError):
            sampler.exponential_mechanism([1.0, 2.0], 0.0, 1.0)
        with pytest.raises(ValueError):
            sampler.exponential_mechanism([1.0, 2.0], 1.0, -1.0)
