"""Tests of mechanisms/accounting.py: calibration formulas against OpenDP's own privacy
maps, histogram sensitivities against brute-force neighbours, the zCDP → (ε, δ)
conversion against OpenDP and against the exact privacy profile of the Gaussian
mechanism, and the budget ledger."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms import accounting
from continual_synth.mechanisms.accounting import BudgetExceededError, BudgetLedger
from continual_synth.mechanisms.panel import window_histograms

dp = pytest.importorskip("opendp.prelude")
dp.enable_features("contrib")


def opendp_gaussian(sigma: float):
    return dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=float),
                              scale=float(sigma))


def opendp_laplace(scale: float):
    return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int),
                             scale=float(scale))


# --------------------------------------------------------------------------- calibration

@pytest.mark.parametrize("sensitivity", [1.0, math.sqrt(2.0), 3.0])
@pytest.mark.parametrize("rho", [1e-4, 0.005, 0.5, 2.0])
def test_gaussian_rho_and_sigma2_are_inverse(sensitivity, rho):
    sigma2 = accounting.gaussian_sigma2(sensitivity, rho)
    assert sigma2 == pytest.approx(sensitivity ** 2 / (2 * rho), rel=1e-14)
    assert accounting.gaussian_rho(sensitivity, sigma2) == pytest.approx(rho, rel=1e-14)


@pytest.mark.parametrize("sensitivity", [1.0, 2.0, 5.0])
@pytest.mark.parametrize("epsilon", [0.01, 1.0, 3.0])
def test_laplace_epsilon_and_scale_are_inverse(sensitivity, epsilon):
    scale = accounting.laplace_scale(sensitivity, epsilon)
    assert scale == pytest.approx(sensitivity / epsilon, rel=1e-14)
    assert accounting.laplace_epsilon(sensitivity, scale) == pytest.approx(epsilon, rel=1e-14)


@pytest.mark.parametrize("sigma", [0.5, 3.0, math.sqrt(1000.0)])
@pytest.mark.parametrize("sensitivity", [1.0, math.sqrt(2.0), 3.0])
def test_gaussian_rho_agrees_with_opendp_privacy_map(sigma, sensitivity):
    """OpenDP's discrete Gaussian on integer vectors is Δ₂²/(2σ²)-zCDP; its map may
    round up by float ulps (it is conservative), hence rel=1e-9."""
    measurement = opendp_gaussian(sigma)
    assert "ZeroConcentratedDivergence" in str(measurement.output_measure)
    expected = accounting.gaussian_rho(sensitivity, sigma ** 2)
    assert measurement.map(sensitivity) == pytest.approx(expected, rel=1e-9)
    assert measurement.map(sensitivity) >= expected * (1 - 1e-12)


@pytest.mark.parametrize("scale", [0.5, 2.0, 10.0])
@pytest.mark.parametrize("neighbor", ["add-remove", "replace"])
def test_laplace_epsilon_agrees_with_opendp_privacy_map(scale, neighbor):
    measurement = opendp_laplace(scale)
    sensitivity = accounting.histogram_l1_sensitivity(neighbor)
    expected = accounting.laplace_epsilon(sensitivity, scale)
    assert measurement.map(int(sensitivity)) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_pure_dp_to_zcdp_agrees_with_opendp(scale):
    converted = dp.c.make_pureDP_to_zCDP(opendp_laplace(scale))
    epsilon = accounting.laplace_epsilon(1.0, scale)
    assert converted.map(1) == pytest.approx(accounting.pure_dp_to_zcdp(epsilon), rel=1e-9)


# --------------------------------------------------------------------------- sensitivities

def test_histogram_sensitivity_constants():
    assert accounting.histogram_l2_sensitivity("add-remove") == 1.0
    assert accounting.histogram_l2_sensitivity("replace") == pytest.approx(math.sqrt(2), rel=1e-15)
    assert accounting.histogram_l1_sensitivity("add-remove") == 1.0
    assert accounting.histogram_l1_sensitivity("replace") == 2.0
    for bad in ("add_remove", "bounded", ""):
        with pytest.raises(ValueError):
            accounting.histogram_l2_sensitivity(bad)
        with pytest.raises(ValueError):
            accounting.histogram_l1_sensitivity(bad)


def _max_distances(base, neighbours, bins):
    hist = np.bincount(base, minlength=bins)
    l1 = l2 = 0.0
    for other in neighbours:
        diff = hist - np.bincount(other, minlength=bins)
        l1 = max(l1, float(np.abs(diff).sum()))
        l2 = max(l2, float(np.sqrt((diff ** 2).sum())))
    return l1, l2


def test_histogram_sensitivity_by_brute_force_over_all_neighbours():
    """Enumerate every neighbour of a small dataset: the largest change of its
    histogram equals the declared sensitivity (so it is attained, not just bounded)."""
    bins = 4
    base = np.array([0, 0, 1, 3, 3, 3])
    replaced = []
    for i, v in itertools.product(range(base.size), range(bins)):
        if v != base[i]:
            other = base.copy()
            other[i] = v
            replaced.append(other)
    l1, l2 = _max_distances(base, replaced, bins)
    assert l1 == accounting.histogram_l1_sensitivity("replace")
    assert l2 == pytest.approx(accounting.histogram_l2_sensitivity("replace"), rel=1e-15)

    added_removed = [np.delete(base, i) for i in range(base.size)]
    added_removed += [np.append(base, v) for v in range(bins)]
    l1, l2 = _max_distances(base, added_removed, bins)
    assert l1 == accounting.histogram_l1_sensitivity("add-remove")
    assert l2 == accounting.histogram_l2_sensitivity("add-remove")


def test_window_histogram_sensitivity_per_period_by_brute_force():
    """The histograms Algorithm 1 actually privatises: replacing one person's whole
    sequence (all |A|^T alternatives) moves every window histogram by ≤ √2 in L2,
    attained; removing one person moves each by exactly 1."""
    rng = np.random.default_rng(11)
    alphabet, window, horizon = 2, 2, 5
    panel = rng.integers(0, alphabet, size=(6, horizon)).astype(np.int8)
    base = window_histograms(panel, alphabet, window)
    worst = 0.0
    for sequence in itertools.product(range(alphabet), repeat=horizon):
        other = panel.copy()
        other[0] = sequence
        per_period = np.sqrt(((base - window_histograms(other, alphabet, window)) ** 2).sum(axis=1))
        worst = max(worst, float(per_period.max()))
    assert worst == pytest.approx(accounting.histogram_l2_sensitivity("replace"), rel=1e-15)
    removed = window_histograms(panel[1:], alphabet, window)
    per_period = np.sqrt(((base - removed) ** 2).sum(axis=1))
    np.testing.assert_allclose(per_period, accounting.histogram_l2_sensitivity("add-remove"))


# --------------------------------------------------------------------------- (ε, δ) conversion

RHOS = [1e-4, 0.005, 1 / 18, 0.5, 1.0, 5.0]
DELTAS = [1e-10, 1e-6, 1e-3]


def gaussian_exact_delta(epsilon: float, rho: float) -> float:
    """Exact privacy profile of the Gaussian mechanism with Δ/σ = μ = √(2ρ), which is
    exactly ρ-zCDP (Balle and Wang 2018, Thm. 8):
    δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)."""
    mu = math.sqrt(2 * rho)
    first = stats.norm.cdf(mu / 2 - epsilon / mu)
    second = math.exp(epsilon + stats.norm.logcdf(-mu / 2 - epsilon / mu))
    return float(first - second)


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_zcdp_to_approx_dp_is_valid_and_no_worse_than_bun_steinke(rho, delta):
    epsilon = accounting.zcdp_to_approx_dp(rho, delta)
    assert 0 < epsilon <= accounting.zcdp_to_approx_dp_bun_steinke(rho, delta)
    # Validity on the worst case we can compute exactly: the Gaussian mechanism that is
    # exactly ρ-zCDP must be (ε, δ)-DP at the reported ε.
    assert gaussian_exact_delta(epsilon, rho) <= delta * (1 + 1e-9)


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_zcdp_to_approx_dp_agrees_with_opendp(rho, delta):
    """OpenDP's zCDP → approx-DP conversion implements the same CKS 2020 bound.
    Our grid over α has multiplicative step h = 10^(10/20000) − 1 ≈ 1.15e-3 in α − 1;
    near the optimum the objective is quadratic, so the grid loses ≤ ε·h²/8 ≈ 1.7e-7·ε
    (relative); we allow 1e-6 relative."""
    measurement = dp.c.make_zCDP_to_approxDP(opendp_gaussian(math.sqrt(1 / (2 * rho))))
    reference = measurement.map(1.0).epsilon(delta)
    ours = accounting.zcdp_to_approx_dp(rho, delta)
    assert ours == pytest.approx(reference, rel=1e-6)


def test_zcdp_to_approx_dp_known_values_and_monotonicity():
    # CKS 2020's bound at ρ = 0.5, δ = 1e-6 (and Bun-Steinke's looser 5.7565).
    assert accounting.zcdp_to_approx_dp(0.5, 1e-6) == pytest.approx(5.2215345, abs=1e-5)
    assert accounting.zcdp_to_approx_dp_bun_steinke(0.5, 1e-6) == pytest.approx(
        0.5 + 2 * math.sqrt(0.5 * math.log(1e6)), rel=1e-14)
    rhos = np.logspace(-5, 1, 40)
    eps = [accounting.zcdp_to_approx_dp(r, 1e-6) for r in rhos]
    assert all(b > a for a, b in zip(eps, eps[1:]))          # increasing in ρ
    deltas = np.logspace(-12, -1, 30)
    eps = [accounting.zcdp_to_approx_dp(0.1, d) for d in deltas]
    assert all(b < a for a, b in zip(eps, eps[1:]))          # decreasing in δ
    assert accounting.zcdp_to_approx_dp(0.0, 1e-6) == 0.0
    for rho, delta in ((-0.1, 1e-6), (0.1, 0.0), (0.1, 1.0), (0.1, -1e-3)):
        with pytest.raises(ValueError):
            accounting.zcdp_to_approx_dp(rho, delta)


# --------------------------------------------------------------------------- ledger

def test_ledger_accumulates_and_refuses_overspend_before_recording():
    ledger = BudgetLedger(total=1.0)
    ledger.charge(0.25, "period 1", period=1)
    ledger.charge(0.5, "period 2", period=2)
    assert ledger.spent == pytest.approx(0.75, rel=1e-15)
    assert ledger.remaining == pytest.approx(0.25, rel=1e-14)
    assert [e["label"] for e in ledger.entries] == ["period 1", "period 2"]
    assert ledger.entries[0]["period"] == 1
    before = json.dumps(ledger.to_dict())
    with pytest.raises(BudgetExceededError):
        ledger.charge(0.26, "period 3")
    with pytest.raises(BudgetExceededError):
        ledger.check(0.3, "period 3")
    assert json.dumps(ledger.to_dict()) == before          # nothing recorded
    ledger.charge(0.25, "period 3")                          # exactly the rest is fine
    assert ledger.remaining == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(BudgetExceededError):
        ledger.charge(1e-6, "one more")
    with pytest.raises(ValueError):
        ledger.charge(-0.1, "refund")


@pytest.mark.parametrize("total", [0.005, 1 / 3, 0.1, 7.3])
@pytest.mark.parametrize("updates", [1, 3, 7, 10, 49, 100])
def test_ledger_accepts_r_equal_shares_and_nothing_more(total, updates):
    """R charges of ρ/R must fit despite floating-point summation (tolerance 1e-9
    relative, far above the ~R·ulp rounding), and the next share must not."""
    ledger = BudgetLedger(total=total)
    for r in range(updates):
        ledger.charge(total / updates, f"period {r}")
    assert ledger.spent == pytest.approx(total, rel=1e-12)
    with pytest.raises(BudgetExceededError):
        ledger.charge(total / updates, "period R+1")
    # the tolerance is tiny: a debit of 1e-6 of the total is refused too
    with pytest.raises(BudgetExceededError):
        ledger.charge(total * 1e-6, "epsilon more")


def test_ledger_round_trip_and_validation():
    ledger = BudgetLedger(total=0.5, unit="epsilon")
    ledger.charge(0.1, "a", mechanism="discrete Laplace", scale=3.0)
    ledger.charge(0.2, "b")
    data = json.loads(json.dumps(ledger.to_dict()))
    restored = BudgetLedger.from_dict(data)
    assert restored.total == ledger.total and restored.unit == "epsilon"
    assert restored.entries == ledger.entries
    assert restored.spent == pytest.approx(ledger.spent, rel=1e-15)
    restored.charge(0.1, "c")                               # independent copies
    assert len(ledger.entries) == 2
    for bad_total in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            BudgetLedger(total=bad_total)
    with pytest.raises(ValueError):
        BudgetLedger(total=1.0, unit="delta")


def test_ledger_refuses_a_nan_charge_and_stays_enforcing():
    ledger = BudgetLedger(total=1.0)
    try:
        ledger.charge(float("nan"), "corrupt")
    except (ValueError, BudgetExceededError):
        pass
    assert ledger.entries == []
    with pytest.raises(BudgetExceededError):
        ledger.charge(100.0, "a 100x overspend")
