"""Statistical tests of mechanisms/samplers.py.

Every sampler is tested by its distribution: the sample second moment against the
exact variance, the mass function by a chi-square goodness-of-fit test, and tails
against both the exact tail and a published bound.  Tolerances are derived:

* the sample mean of N draws has standard error sqrt(Var/N);
* the sample second moment m2 = mean(x²) (the mean is exactly 0 by symmetry, so m2
  is the variance estimator) has standard error sqrt((μ4 − Var²)/N), with μ4 the
  exact fourth moment computed from the mass function;
* a tail frequency has binomial standard error sqrt(p(1 − p)/N);
* a chi-square statistic is compared with its (1 − 1e-6) quantile.

We allow 6 standard errors (two-sided normal tail ≈ 2e-9 per check), so with the
fixed seeds below the tests are deterministic and a correct sampler never fails,
while a wrong distribution (see the power checks) is rejected.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms.samplers import (
    OpenDPSampler,
    SeededSampler,
    discrete_gaussian_variance,
    discrete_laplace_variance,
    make_sampler,
)

Z = 6.0                 # standard errors allowed for a moment check
CHI2_LEVEL = 1e-6       # significance level of every goodness-of-fit check
N_SEEDED = 200_000      # draws per seeded-sampler check (vectorised, cheap)
N_OPENDP_GAUSS = 20_000  # OpenDP draws cost ~10 µs each: 20k + 10k + a few in total
N_OPENDP_LAPLACE = 10_000


# --------------------------------------------------------------------------- exact pmfs
# Computed here independently of the module (wider support, direct normalisation).

def discrete_gaussian_pmf(sigma2: float):
    sigma = math.sqrt(sigma2)
    bound = int(math.ceil(40 * sigma)) + 10   # mass beyond 40σ is < e^{-800}
    x = np.arange(-bound, bound + 1)
    w = np.exp(-(x.astype(float) ** 2) / (2 * sigma2))
    return x, w / w.sum()


def discrete_laplace_pmf(scale: float):
    bound = int(math.ceil(80 * scale)) + 10   # mass beyond is < e^{-80}
    x = np.arange(-bound, bound + 1)
    w = np.exp(-np.abs(x) / scale)
    return x, w / w.sum()


def moments(x, p):
    """(variance, fourth moment) of a symmetric, mean-zero law."""
    x = x.astype(float)
    return float((x ** 2 * p).sum()), float((x ** 4 * p).sum())


def second_moment_tolerance(x, p, n):
    var, mu4 = moments(x, p)
    return Z * math.sqrt((mu4 - var ** 2) / n)


def chi_square(draws, x, p):
    """Chi-square statistic and its (1 − CHI2_LEVEL) critical value.

    Values with expected count ≥ 5 get their own cell; the tails below/above are
    merged into the two edge cells (so every cell has expected count ≥ 5)."""
    n = draws.size
    expected = n * p
    keep = np.flatnonzero(expected >= 5)
    lo, hi = x[keep[0]], x[keep[-1]]
    clipped = np.clip(draws, lo, hi)
    observed = np.bincount(clipped - lo, minlength=hi - lo + 1)
    exp_cells = expected[(x >= lo) & (x <= hi)].copy()
    exp_cells[0] += expected[x < lo].sum()
    exp_cells[-1] += expected[x > hi].sum()
    stat = float(((observed - exp_cells) ** 2 / exp_cells).sum())
    df = exp_cells.size - 1
    return stat, float(stats.chi2.isf(CHI2_LEVEL, df))


# --------------------------------------------------------------------------- exact formulas

@pytest.mark.parametrize("sigma2", [0.1, 0.5, 1.0, 4.0, 37.5, 1000.0])
def test_discrete_gaussian_variance_formula_matches_direct_summation(sigma2):
    x, p = discrete_gaussian_pmf(sigma2)
    exact, _ = moments(x, p)
    assert discrete_gaussian_variance(sigma2) == pytest.approx(exact, rel=1e-12)
    # CKS 2020 Prop. 19: strictly below sigma2 (visible in floating point for σ² ≤ 1) ...
    if sigma2 <= 1:
        assert discrete_gaussian_variance(sigma2) < sigma2
    # ... and within an exponentially small amount of it once sigma2 ≥ 1
    # (Poisson summation: σ² − Var ≈ 4π²σ⁴·e^{−2π²σ²} ≪ 1e-6 at σ² = 1).
    if sigma2 >= 1:
        assert discrete_gaussian_variance(sigma2) == pytest.approx(sigma2, rel=1e-6)


def test_discrete_gaussian_variance_small_sigma_hand_value():
    # σ² = 0.5: Var = 2Σ x² e^{−x²} / (1 + 2Σ e^{−x²}), summed by hand to x = 6.
    num = 2 * sum(x * x * math.exp(-x * x) for x in range(1, 7))
    den = 1 + 2 * sum(math.exp(-x * x) for x in range(1, 7))
    assert discrete_gaussian_variance(0.5) == pytest.approx(num / den, rel=1e-12)
    assert discrete_gaussian_variance(0.1) < 0.1 * 0.5  # far below σ² for tiny σ²


@pytest.mark.parametrize("scale", [0.3, 1.0, 3.0, 50.0])
def test_discrete_laplace_variance_formula_matches_direct_summation(scale):
    x, p = discrete_laplace_pmf(scale)
    exact, _ = moments(x, p)
    assert discrete_laplace_variance(scale) == pytest.approx(exact, rel=1e-10)


# --------------------------------------------------------------------------- seeded sampler

@pytest.mark.parametrize("sigma2", [0.5, 4.0, 1000.0])
def test_seeded_discrete_gaussian_variance_and_mean(sigma2):
    draws = SeededSampler(101).discrete_gaussian(sigma2, N_SEEDED)
    assert draws.shape == (N_SEEDED,)
    assert np.issubdtype(draws.dtype, np.integer)
    x, p = discrete_gaussian_pmf(sigma2)
    var = discrete_gaussian_variance(sigma2)
    m2 = float(np.mean(draws.astype(float) ** 2))
    assert abs(m2 - var) <= second_moment_tolerance(x, p, N_SEEDED), (m2, var)
    assert abs(draws.mean()) <= Z * math.sqrt(var / N_SEEDED)


@pytest.mark.parametrize("sigma2", [0.5, 4.0])
def test_seeded_discrete_gaussian_pmf_chi_square(sigma2):
    draws = SeededSampler(202).discrete_gaussian(sigma2, N_SEEDED)
    x, p = discrete_gaussian_pmf(sigma2)
    stat, critical = chi_square(draws, x, p)
    assert stat <= critical, (stat, critical)


def test_chi_square_check_has_power_against_a_rounded_continuous_gaussian():
    """The goodness-of-fit check above can fail: a rounded N(0, σ²) is not N_Z(0, σ²)
    (P(0) = 0.520 vs 0.564 at σ² = 0.5) and is rejected at the same level and size."""
    rng = np.random.default_rng(303)
    sigma2 = 0.5
    rounded = np.rint(rng.normal(0, math.sqrt(sigma2), N_SEEDED)).astype(np.int64)
    x, p = discrete_gaussian_pmf(sigma2)
    stat, critical = chi_square(rounded, x, p)
    assert stat > critical


@pytest.mark.parametrize("sigma2", [4.0, 1000.0])
def test_seeded_discrete_gaussian_tails(sigma2):
    """Tail frequencies against the exact tail (binomial tolerance) and against the
    subgaussian bound P(|X| ≥ λ) ≤ 2 exp(−λ²/(2σ²)) (CKS 2020, N_Z is σ²-subgaussian)."""
    draws = np.abs(SeededSampler(404).discrete_gaussian(sigma2, N_SEEDED))
    x, p = discrete_gaussian_pmf(sigma2)
    sigma = math.sqrt(sigma2)
    for multiple in (1, 2, 3, 4):
        lam = int(math.ceil(multiple * sigma))
        exact = float(p[np.abs(x) >= lam].sum())
        bound = 2 * math.exp(-lam ** 2 / (2 * sigma2))
        assert exact <= bound
        freq = float((draws >= lam).mean())
        se = math.sqrt(max(exact * (1 - exact), 1e-12) / N_SEEDED)
        assert abs(freq - exact) <= Z * se + 1 / N_SEEDED, (lam, freq, exact)
        assert freq <= bound + Z * math.sqrt(bound * (1 - min(bound, 1)) / N_SEEDED) + 1 / N_SEEDED


@pytest.mark.parametrize("scale", [0.5, 3.0, 50.0])
def test_seeded_discrete_laplace_variance_and_mean(scale):
    draws = SeededSampler(505).discrete_laplace(scale, N_SEEDED)
    assert np.issubdtype(draws.dtype, np.integer)
    x, p = discrete_laplace_pmf(scale)
    var = discrete_laplace_variance(scale)
    m2 = float(np.mean(draws.astype(float) ** 2))
    assert abs(m2 - var) <= second_moment_tolerance(x, p, N_SEEDED), (m2, var)
    assert abs(draws.mean()) <= Z * math.sqrt(var / N_SEEDED)


def test_seeded_discrete_laplace_pmf_and_tail():
    scale = 3.0
    draws = SeededSampler(606).discrete_laplace(scale, N_SEEDED)
    x, p = discrete_laplace_pmf(scale)
    stat, critical = chi_square(draws, x, p)
    assert stat <= critical, (stat, critical)
    # exact tail: P(|X| ≥ m) = 2 q^m / (1 + q), q = e^{−1/scale}
    q = math.exp(-1 / scale)
    for m in (3, 9, 15):
        exact = 2 * q ** m / (1 + q)
        assert exact == pytest.approx(float(p[np.abs(x) >= m].sum()), rel=1e-9)
        freq = float((np.abs(draws) >= m).mean())
        assert abs(freq - exact) <= Z * math.sqrt(exact * (1 - exact) / N_SEEDED)


def test_seeded_sampler_is_reproducible_and_seed_dependent():
    a, b, c = SeededSampler(7), SeededSampler(7), SeededSampler(8)
    np.testing.assert_array_equal(a.discrete_gaussian(4.0, 1000), b.discrete_gaussian(4.0, 1000))
    np.testing.assert_array_equal(a.discrete_laplace(2.0, 1000), b.discrete_laplace(2.0, 1000))
    np.testing.assert_array_equal(a.rng.random(10), b.rng.random(10))
    # different seeds: 1000 draws of variance ≈ 4 agree everywhere with prob. ≪ 1e-300
    assert not np.array_equal(SeededSampler(7).discrete_gaussian(4.0, 1000),
                              c.discrete_gaussian(4.0, 1000))


def test_size_zero_and_small_sizes():
    s = SeededSampler(1)
    assert s.discrete_gaussian(4.0, 0).shape == (0,)
    assert s.discrete_gaussian(4.0, 1).shape == (1,)
    assert s.discrete_laplace(4.0, 0).shape == (0,)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_seeded_sampler_rejects_bad_parameters(bad):
    s = SeededSampler(1)
    with pytest.raises(ValueError):
        s.discrete_gaussian(bad, 10)
    with pytest.raises(ValueError):
        s.discrete_laplace(bad, 10)


# --------------------------------------------------------------------------- OpenDP sampler

@pytest.fixture(scope="module")
def opendp_sampler():
    return OpenDPSampler()


def test_opendp_discrete_gaussian_distribution(opendp_sampler):
    """20 000 exact OpenDP draws: integer dtype, variance vs the exact formula,
    mean 0, chi-square against the exact pmf (σ² = 4 keeps ~15 cells well filled)."""
    sigma2 = 4.0
    draws = opendp_sampler.discrete_gaussian(sigma2, N_OPENDP_GAUSS)
    assert draws.shape == (N_OPENDP_GAUSS,)
    assert draws.dtype == np.int64
    x, p = discrete_gaussian_pmf(sigma2)
    var = discrete_gaussian_variance(sigma2)
    m2 = float(np.mean(draws.astype(float) ** 2))
    assert abs(m2 - var) <= second_moment_tolerance(x, p, N_OPENDP_GAUSS), (m2, var)
    assert abs(draws.mean()) <= Z * math.sqrt(var / N_OPENDP_GAUSS)
    stat, critical = chi_square(draws, x, p)
    assert stat <= critical, (stat, critical)


def test_opendp_discrete_laplace_distribution(opendp_sampler):
    scale = 3.0
    draws = opendp_sampler.discrete_laplace(scale, N_OPENDP_LAPLACE)
    assert draws.dtype == np.int64
    x, p = discrete_laplace_pmf(scale)
    var = discrete_laplace_variance(scale)
    m2 = float(np.mean(draws.astype(float) ** 2))
    assert abs(m2 - var) <= second_moment_tolerance(x, p, N_OPENDP_LAPLACE), (m2, var)
    assert abs(draws.mean()) <= Z * math.sqrt(var / N_OPENDP_LAPLACE)


def test_opendp_sampler_edge_cases(opendp_sampler):
    assert opendp_sampler.discrete_gaussian(4.0, 0).shape == (0,)
    for bad in (0.0, -2.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            opendp_sampler.discrete_gaussian(bad, 5)
        with pytest.raises(ValueError):
            opendp_sampler.discrete_laplace(bad, 5)
    # unseeded: two samplers disagree (50 draws of σ² = 1e6 coincide w.p. < 1e-100)
    a = opendp_sampler.discrete_gaussian(1e6, 50)
    b = OpenDPSampler().discrete_gaussian(1e6, 50)
    assert not np.array_equal(a, b)


def test_make_sampler():
    default = make_sampler(None)
    assert isinstance(default, OpenDPSampler)
    assert default.name == "opendp" and default.for_publication is True
    seeded = make_sampler(3)
    assert isinstance(seeded, SeededSampler)
    assert seeded.name == "seeded" and seeded.for_publication is False
    np.testing.assert_array_equal(seeded.discrete_gaussian(9.0, 200),
                                  SeededSampler(3).discrete_gaussian(9.0, 200))


def test_variances_of_noise_too_wide_to_tabulate_are_refused_without_allocating():
    """Guards against discrete_gaussian_variance(7.6e20) (ρ = 1e-18) asking numpy for
    506 GiB, and discrete_laplace_variance dividing by zero once 1 − e^(−1/scale) rounds
    to 0."""
    from continual_synth.mechanisms.errors import InputError
    from continual_synth.mechanisms.samplers import MAX_VARIANCE_TABLE_SIGMA2
    assert discrete_gaussian_variance(MAX_VARIANCE_TABLE_SIGMA2) > 0  # the largest that fits
    for sigma2 in (MAX_VARIANCE_TABLE_SIGMA2 * 1.001, 7.6e20, 1e300):
        with pytest.raises(InputError, match="too wide to sum"):
            discrete_gaussian_variance(sigma2)
    with pytest.raises(InputError, match="too wide"):
        discrete_laplace_variance(1e17)
