"""Tests of mechanisms/sketch.py: count-min guarantees without noise, linearity and
merging, and the calibration and distribution of the release noise.

Tolerances come from theory: a sample variance of N i.i.d. draws has standard error
sqrt((μ4 − σ⁴)/N) (μ4 of the discrete Laplace computed from its mass function); we
allow 6 standard errors, so with the fixed seeds a correct implementation never fails
and a noise scale off by the factor j (the sensitivity) is rejected by far.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms.samplers import SeededSampler, discrete_laplace_variance
from continual_synth.mechanisms.sketch import (CountMinSketch, dimensions_for,
                                               overestimate_bound, sketch_sensitivity)


def zipf_stream(n, keys, seed):
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, keys + 1) ** 1.1
    return rng.choice(keys, size=n, p=weights / weights.sum()).astype(np.uint64) * 7919 + 3


def test_never_underestimates_and_overestimate_bound():
    eps_cm, delta_cm = 0.01, 0.05
    width, depth = dimensions_for(eps_cm, delta_cm)
    assert (width, depth) == (272, 3)
    stream = zipf_stream(200_000, 5000, seed=1)
    sketch = CountMinSketch(width, depth, hash_seed=11)
    sketch.update(stream)
    keys, truth = np.unique(stream, return_counts=True)
    estimate = sketch.estimate(keys)
    assert np.all(estimate >= truth)
    bound = overestimate_bound(width, stream.size)
    assert bound == pytest.approx(eps_cm * stream.size, rel=0.02)
    failures = int(np.sum(estimate - truth > bound))
    # each key fails with probability ≤ δ_cm (e^{-j} ≈ 0.0498); binomial tail allowance
    allowed = delta_cm * keys.size + 6 * math.sqrt(delta_cm * keys.size)
    assert failures <= allowed
    # the bound is not vacuous: a 1-column sketch must break it for the light keys
    tiny = CountMinSketch(1, 1)
    tiny.update(stream)
    assert np.sum(tiny.estimate(keys) - truth > bound) > 0.5 * keys.size


def test_merge_and_linearity():
    stream = zipf_stream(50_000, 2000, seed=2)
    whole = CountMinSketch(128, 4, hash_seed=5)
    whole.update(stream)
    parts = [CountMinSketch(128, 4, hash_seed=5) for _ in range(3)]
    for part, chunk in zip(parts, np.array_split(stream, [1000, 30_000])):
        part.update(chunk)
    merged = parts[0].merge(parts[1]).merge(parts[2])
    np.testing.assert_array_equal(merged.table, whole.table)
    assert whole.table.sum() == 4 * stream.size  # one cell per row per item
    with pytest.raises(ValueError):
        parts[0].merge(CountMinSketch(128, 4, hash_seed=6))


def test_hash_rows_spread_keys_uniformly():
    sketch = CountMinSketch(64, 3, hash_seed=9)
    cols = sketch.columns(np.arange(64_000, dtype=np.uint64))
    for row in cols:  # chi-square against uniform over 64 columns (p < 1e-6 rejects)
        counts = np.bincount(row, minlength=64)
        chi2 = ((counts - 1000) ** 2 / 1000).sum()
        assert chi2 < stats.chi2.ppf(1 - 1e-6, df=63)


@pytest.mark.parametrize("neighbor,factor", [("add-remove", 1), ("replace", 2)])
def test_release_noise_has_the_discrete_laplace_variance(neighbor, factor):
    depth, width, epsilon = 4, 25_000, 0.5
    assert sketch_sensitivity(depth, neighbor) == factor * depth
    sketch = CountMinSketch(width, depth)
    sketch.update(np.arange(1000, dtype=np.uint64))
    noisy = sketch.privatized(SeededSampler(7), epsilon, neighbor)
    noise = (noisy.table - sketch.table).ravel()
    assert np.all(noise == np.round(noise))  # integer noise
    scale = factor * depth / epsilon
    var = discrete_laplace_variance(scale)
    q = math.exp(-1 / scale)
    support = np.arange(-4000, 4001)
    pmf = (1 - q) / (1 + q) * q ** np.abs(support)
    mu4 = float((support.astype(float) ** 4 * pmf).sum())
    se = math.sqrt((mu4 - var ** 2) / noise.size)
    assert abs(np.mean(noise ** 2) - var) < 6 * se
    assert abs(noise.mean()) < 6 * math.sqrt(var / noise.size)
    # the wrong calibration (sensitivity 1 instead of j) would be far outside
    assert abs(discrete_laplace_variance(1 / epsilon) - var) > 50 * se
    assert sketch.table.dtype == np.int64  # the exact table is untouched
