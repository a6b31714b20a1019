"""Tests of mechanisms/consistency.py: the consistency step of Algorithm 1
(Bun et al. 2024, §3.1, Eqs. (1)-(4)) and its |A|-ary generalisation.

Exact properties (row sums, integrality, the paper's update when Δ_z is an integer)
are checked exactly; randomised ones statistically, with the tolerance derived in
each test: a rounded entry is floor + Bernoulli(f), so the mean of N independent
roundings has standard error sqrt(f(1 − f)/N) and we allow 6 of them; subset
frequencies are checked by a chi-square test at level 1e-6.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms.consistency import (
    clamp_into_group,
    consistent_extension,
    unbiased_group_rounding,
)

Z = 6.0
CHI2_LEVEL = 1e-6


def rows_with_multiple_sums(rng, rows, width, denominator, low=-40, high=60):
    """Random integer rows whose sums are multiples of ``denominator``."""
    numerators = rng.integers(low, high, size=(rows, width))
    numerators[:, -1] -= numerators.sum(axis=1) % denominator
    assert (numerators.sum(axis=1) % denominator == 0).all()
    return numerators


# --------------------------------------------------------------------------- rounding

@pytest.mark.parametrize("denominator", [2, 3, 5])
@pytest.mark.parametrize("width_extra", [0, 4])
def test_rounding_keeps_row_sums_exactly_and_rounds_to_neighbours(denominator, width_extra):
    rng = np.random.default_rng(denominator * 10 + width_extra)
    width = denominator + width_extra
    numerators = rows_with_multiple_sums(rng, 5000, width, denominator)
    rounded = unbiased_group_rounding(numerators, denominator, rng)
    assert rounded.dtype.kind == "i"
    np.testing.assert_array_equal(rounded.sum(axis=1), numerators.sum(axis=1) // denominator)
    floor = numerators // denominator
    assert np.isin(rounded - floor, (0, 1)).all()
    # entries that are already integers are never moved
    exact = numerators % denominator == 0
    np.testing.assert_array_equal(rounded[exact], floor[exact])


@pytest.mark.parametrize("denominator", [2, 3, 5])
def test_rounding_is_unbiased(denominator):
    """Each entry rounds up with probability (its fractional part) exactly.  One row
    pattern is tiled N = 20 000 times (rows are rounded independently)."""
    rng = np.random.default_rng(100 + denominator)
    width = denominator + 2
    pattern = rows_with_multiple_sums(rng, 1, width, denominator, low=-17, high=23)[0]
    n = 20_000
    rounded = unbiased_group_rounding(np.tile(pattern, (n, 1)), denominator, rng)
    fraction = (pattern % denominator) / denominator
    mean = rounded.mean(axis=0)
    target = pattern / denominator
    se = np.sqrt(fraction * (1 - fraction) / n)
    assert (np.abs(mean - target) <= Z * se + 1e-12).all(), (mean, target)


@pytest.mark.parametrize("denominator,remainder", [(2, 1), (3, 1), (3, 2), (4, 1), (4, 2),
                                                   (5, 2), (5, 3)])
def test_equal_fractional_parts_round_up_a_uniform_subset(denominator, remainder):
    """Width = denominator = |A| and all remainders r: exactly r entries go up, and
    every r-subset is equally likely (chi-square against uniform)."""
    rng = np.random.default_rng(1000 * denominator + remainder)
    width = denominator
    base = rng.integers(-5, 20, size=width) * denominator + remainder
    assert base.sum() % denominator == 0
    n = 12_000
    rounded = unbiased_group_rounding(np.tile(base, (n, 1)), denominator, rng)
    up = rounded - base // denominator
    assert (up.sum(axis=1) == remainder * width // denominator).all()
    subsets = list(itertools.combinations(range(width), remainder * width // denominator))
    index = {s: i for i, s in enumerate(subsets)}
    observed = np.bincount([index[tuple(np.flatnonzero(row))] for row in up],
                           minlength=len(subsets))
    if len(subsets) == 1:
        return
    stat, p_value = stats.chisquare(observed)
    assert p_value > CHI2_LEVEL, (observed, stat)


def test_rounding_rejects_rows_not_summing_to_a_multiple():
    with pytest.raises(ValueError):
        unbiased_group_rounding(np.array([[1, 1, 0]]), 3, np.random.default_rng(0))


# --------------------------------------------------------------------------- clamping

def euclidean_projection(x, total):
    """Projection of x onto {y ≥ 0, Σy = total} (sort-based, Duchi et al. 2008)."""
    x = np.asarray(x, dtype=float)
    if total == 0:
        return np.zeros_like(x)
    u = np.sort(x)[::-1]
    css = np.cumsum(u)
    k = np.arange(1, x.size + 1)
    r = k[u - (css - total) / k > 0][-1]
    tau = (css[r - 1] - total) / r
    return np.maximum(x - tau, 0.0)


def test_clamp_into_group_gives_nonnegative_counts_with_the_group_sum():
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(3000):
        width = int(rng.integers(2, 9))
        x = rng.integers(-60, 40, size=width)
        total = int(x.sum())
        if total < 0:
            continue
        y = clamp_into_group(x, total, rng)
        assert (y >= 0).all() and y.sum() == total
        if (x >= 0).all():
            np.testing.assert_array_equal(y, x)     # nothing to do: unchanged
        else:
            assert (y <= np.maximum(x, 0)).all()    # only takes from positive entries
        checked += 1
    assert checked > 500
    with pytest.raises(ValueError):
        clamp_into_group(np.array([3, -1]), 5, rng)
    with pytest.raises(ValueError):
        clamp_into_group(np.array([-3, 1]), -2, rng)


@pytest.mark.parametrize("width", [2, 3])
def test_clamp_is_the_integer_euclidean_projection_for_small_alphabets(width):
    """The integer projection onto {y ≥ 0 integer, Σy = G} subtracts ⌊τ⌋ or ⌈τ⌉ from
    every surviving entry, so it lies within < 1 of the real projection."""
    rng = np.random.default_rng(50 + width)
    for _ in range(3000):
        x = rng.integers(-60, 40, size=width)
        total = int(x.sum())
        if total < 0 or (x >= 0).all():
            continue
        y = clamp_into_group(x, total, rng)
        assert np.abs(y - euclidean_projection(x, total)).max() < 1, (x, y)


def test_clamp_takes_the_deficit_evenly_for_wide_groups():
    x = np.array([-5, 1, 7, 7])
    results = {tuple(clamp_into_group(x, 10, np.random.default_rng(seed)).tolist())
               for seed in range(200)}
    assert results == {(0, 0, 5, 5)}
    rng = np.random.default_rng(58)
    for _ in range(3000):
        x = rng.integers(-60, 40, size=int(rng.integers(4, 9)))
        total = int(x.sum())
        if total < 0 or (x >= 0).all():
            continue
        y = clamp_into_group(x, total, rng)
        assert np.abs(y - euclidean_projection(x, total)).max() < 1, (x, y)


# --------------------------------------------------------------------------- consistent extension

def test_binary_extension_reproduces_equations_1_to_4_when_delta_is_an_integer():
    """Δ_z = ½(p_{0z} + p_{1z} − Ĉ_{z0} − Ĉ_{z1}) integer ⇒ p_{zc} = Ĉ_{zc} + Δ_z exactly."""
    rng = np.random.default_rng(21)
    groups = 400
    targets = rng.integers(0, 200, size=(groups, 2))
    delta = rng.integers(-40, 40, size=groups)
    delta = np.maximum(delta, -targets.min(axis=1))           # keep results ≥ 0
    group_sizes = targets.sum(axis=1) + 2 * delta
    for seed in range(5):
        counts, clamps = consistent_extension(group_sizes, targets, np.random.default_rng(seed))
        np.testing.assert_array_equal(counts, targets + delta[:, None])
        assert clamps == 0


def test_binary_extension_rounds_half_integer_delta_by_a_fair_plus_minus_half():
    """Δ_z half-integer ⇒ (p_{z0}, p_{z1}) = (Ĉ_{z0} + Δ_z + b, Ĉ_{z1} + Δ_z − b) with
    b = ±½ fair: the frequency of b = +½ over N groups is ½ ± 6·sqrt(1/(4N))."""
    rng = np.random.default_rng(22)
    groups = 20_000
    targets = rng.integers(50, 200, size=(groups, 2))
    odd = 2 * rng.integers(-20, 20, size=groups) + 1
    group_sizes = targets.sum(axis=1) + odd
    delta = odd / 2.0
    counts, clamps = consistent_extension(group_sizes, targets, rng)
    assert clamps == 0
    b = counts[:, 0] - (targets[:, 0] + delta)
    assert np.isin(b, (-0.5, 0.5)).all()
    np.testing.assert_array_equal(counts[:, 1], targets[:, 1] + delta - b)
    np.testing.assert_array_equal(counts.sum(axis=1), group_sizes)
    assert abs((b > 0).mean() - 0.5) <= Z * math.sqrt(0.25 / groups)


def test_ternary_extension_keeps_group_sizes_and_is_unbiased():
    """|A| = 3: p_{zc} = Ĉ_{zc} + Δ_z with Δ_z = (G_z − Σ_c Ĉ_{zc})/3 in expectation."""
    rng = np.random.default_rng(23)
    targets = np.array([[40, 10, 25], [0, 5, 9], [100, 100, 101], [7, 7, 7]])
    group_sizes = np.array([76, 20, 300, 22])
    n = 20_000
    tiled_targets = np.tile(targets, (n, 1))
    counts, clamps = consistent_extension(np.tile(group_sizes, n), tiled_targets, rng)
    assert clamps == 0
    np.testing.assert_array_equal(counts.sum(axis=1), np.tile(group_sizes, n))
    expected = targets + ((group_sizes - targets.sum(axis=1)) / 3.0)[:, None]
    mean = counts.reshape(n, 4, 3).mean(axis=0)
    fraction = expected - np.floor(expected)
    se = np.sqrt(fraction * (1 - fraction) / n)
    assert (np.abs(mean - expected) <= Z * se + 1e-12).all(), (mean, expected)


def test_extension_clamps_inside_the_group_and_counts_events():
    rng = np.random.default_rng(24)
    group_sizes = np.array([0, 2, 10, 5])
    targets = np.array([[5, 3],        # Δ = −4 → (1, −1) → clamped to (0, 0)
                        [10, -6],      # Δ = −1 → (9, −7) → clamped to (2, 0)
                        [6, 4],        # Δ = 0 → unchanged
                        [-2, 3]])      # Δ = 2 → (0, 5): fine, no clamp
    counts, clamps = consistent_extension(group_sizes, targets, rng)
    np.testing.assert_array_equal(counts, [[0, 0], [2, 0], [6, 4], [0, 5]])
    assert clamps == 2
    # ternary rows that go negative are clamped too, keeping the group size
    counts, clamps = consistent_extension(np.array([3, 30]),
                                          np.array([[20, -30, 10], [10, 10, 10]]), rng)
    assert clamps == 1
    assert (counts >= 0).all() and counts.sum(axis=1).tolist() == [3, 30]
