"""Tests of mechanisms/window.py: Algorithm 1 of Bun, Gaboardi, Neunhoeffer and Zhang
(2024) as a state machine, checked against Theorems 3.1 and 3.2.

Theorem 3.2 is checked statistically over many seeded runs.  Write e^t_s =
p^t_s − (C^t_s + n_pad) for the error of bin s after period t.  The paper's proof
shows e^t_s = G + B with Var(G) = σ² at every update step (the noise variance, flat
in time) and B a mean-zero rounding term.  For |A| = 2 and the |A|-ary
generalisation alike, the consistency step maps the errors linearly,
e^t_{zc} = N_{zc} − (1/|A|)Σ_c' N_{zc'} + (1/|A|)Σ_a e^{t−1}_{az} + rounding,
which keeps every bin's variance at σ² and (by induction) the bins of one period
uncorrelated, hence, being near-Gaussian, independent.  The rounding adds at most
r(|A|−r)/|A|² ≤ 1/4 per step, i.e. at most |A|/(|A|−1)·¼ ≤ ½ to the stationary
variance, which we allow on top of the statistical tolerance.

So for one period, the mean of e² over N runs × B bins estimates σ² with standard
error σ²·sqrt(2/(N·B)) (Var(e²) = 2σ⁴ for a Gaussian), and the mean of e has
standard error σ/sqrt(N·B); we allow 6 standard errors.  The probability bound of
the theorem is checked with a binomial tolerance: the number of runs (out of N)
whose max error exceeds the bound must not exceed the (1 − 1e-6) quantile of
Binomial(N, β).
"""
from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms import accounting
from continual_synth.mechanisms.accounting import BudgetExceededError
from continual_synth.mechanisms.consistency import consistent_extension
from continual_synth.mechanisms.panel import window_histograms
from continual_synth.mechanisms.samplers import SeededSampler
from continual_synth.mechanisms.window import (
    WindowConfig,
    WindowState,
    check_step,
    debias_counts,
    manifest_fields,
    step,
)
from helpers_panels import markov_codes

Z = 6.0
BINOMIAL_LEVEL = 1e-6


# --------------------------------------------------------------------------- helpers



def run(config: WindowConfig, histograms, sampler):
    """Run all T periods; returns the final state and the list of (state, release)."""
    state = WindowState.initial(config)
    history = []
    for t in range(1, config.horizon + 1):
        hist = histograms[t - config.window] if t >= config.window else None
        state, release = step(state, hist, sampler)
        history.append((state, release))
    return state, history


def simulate(config: WindowConfig, panel, runs: int, seed0: int):
    """Errors p^t_s − (C^t_s + n_pad) of ``runs`` seeded runs: (runs × R × bins), and
    the clamp events of every run."""
    histograms = window_histograms(panel, config.alphabet_size, config.window)
    errors = np.empty((runs, config.num_updates, config.num_bins))
    clamps = np.zeros(runs, dtype=np.int64)
    for r in range(runs):
        sampler = SeededSampler(seed0 + r)
        state = WindowState.initial(config)
        for t in range(1, config.horizon + 1):
            index = t - config.window
            state, _ = step(state, histograms[index] if index >= 0 else None, sampler)
            if index >= 0:
                errors[r, index] = state.counts - (histograms[index] + config.n_pad)
        clamps[r] = state.clamp_events
    return errors, clamps


# --------------------------------------------------------------------------- configuration

@pytest.mark.parametrize("horizon,window", [(12, 3), (5, 5), (30, 1), (24, 4)])
@pytest.mark.parametrize("rho", [0.001, 0.005, 0.5])
def test_noise_calibration_and_per_update_budget(horizon, window, rho):
    updates = horizon - window + 1
    add_remove = WindowConfig(window=window, horizon=horizon, rho=rho, neighbor="add-remove")
    replace = WindowConfig(window=window, horizon=horizon, rho=rho, neighbor="replace")
    assert add_remove.num_updates == replace.num_updates == updates
    assert add_remove.noise_variance == pytest.approx(updates / (2 * rho), rel=1e-14)
    assert replace.noise_variance == pytest.approx(updates / rho, rel=1e-14)
    for config in (add_remove, replace):
        assert config.rho_per_update * updates == pytest.approx(rho, rel=1e-12)
        # the ρ per update is exactly the Gaussian mechanism's at the histogram sensitivity
        assert config.rho_per_update == pytest.approx(accounting.gaussian_rho(
            accounting.histogram_l2_sensitivity(config.neighbor), config.noise_variance),
            rel=1e-14)
    assert add_remove.num_bins == 2 ** window and add_remove.num_groups == 2 ** (window - 1)
    assert replace.neighbor == "replace" and WindowConfig(window, horizon, rho).neighbor == "replace"


@pytest.mark.parametrize("horizon,window", [(12, 3), (6, 2), (20, 5)])
@pytest.mark.parametrize("rho", [0.001, 0.005, 1.0])
@pytest.mark.parametrize("beta", [0.01, 0.05, 0.5])
def test_error_bound_is_the_papers_closed_form(horizon, window, rho, beta):
    """Theorem 3.2 / Corollary 3.1 (|A| = 2, add-remove):
    (√(R/ρ) + 1/√2)·√(log(2^k R / β))."""
    config = WindowConfig(window=window, horizon=horizon, rho=rho, beta=beta,
                          neighbor="add-remove")
    updates = horizon - window + 1
    paper = (math.sqrt(updates / rho) + 1 / math.sqrt(2)) * math.sqrt(
        math.log(2 ** window * updates / beta))
    assert config.error_bound == pytest.approx(paper, rel=1e-12)
    assert config.n_pad == math.ceil(paper)
    # the generalisation: (σ + ½)·√(2 log(|A|^k R/β)) with the σ in force
    for neighbor, alphabet in (("replace", (0, 1)), ("add-remove", ("a", "b", "c"))):
        other = WindowConfig(window=window, horizon=horizon, rho=rho, beta=beta,
                             neighbor=neighbor, alphabet=alphabet)
        expected = (math.sqrt(other.noise_variance) + 0.5) * math.sqrt(
            2 * math.log(len(alphabet) ** window * updates / beta))
        assert other.error_bound == pytest.approx(expected, rel=1e-12)
        assert other.n_pad == math.ceil(expected)


def test_explicit_n_pad_and_round_trip():
    config = WindowConfig(window=3, horizon=12, rho=0.005, n_pad=0)
    assert config.n_pad == 0
    assert WindowConfig(window=3, horizon=12, rho=0.005, n_pad=7.0).n_pad == 7
    config = WindowConfig(window=3, horizon=12, rho=0.005, alphabet=("x", "y", "z"),
                          neighbor="add-remove", beta=0.1, delta=1e-8)
    restored = WindowConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert restored == config


@pytest.mark.parametrize("kwargs", [
    dict(window=0, horizon=5, rho=1.0),
    dict(window=6, horizon=5, rho=1.0),
    dict(window=2.0, horizon=5, rho=1.0),
    dict(window=2, horizon=5, rho=0.0),
    dict(window=2, horizon=5, rho=-1.0),
    dict(window=2, horizon=5, rho=float("inf")),
    dict(window=2, horizon=5, rho=float("nan")),
    dict(window=2, horizon=5, rho=1.0, beta=0.0),
    dict(window=2, horizon=5, rho=1.0, beta=1.0),
    dict(window=2, horizon=5, rho=1.0, delta=0.0),
    dict(window=2, horizon=5, rho=1.0, delta=1.0),
    dict(window=2, horizon=5, rho=1.0, neighbor="swap"),
    dict(window=2, horizon=5, rho=1.0, alphabet=(0,)),
    dict(window=2, horizon=5, rho=1.0, alphabet=(0, 0, 1)),
    dict(window=2, horizon=5, rho=1.0, n_pad=-1),
    dict(window=2, horizon=5, rho=1.0, n_pad=2.5),
])
def test_invalid_configs_raise(kwargs):
    with pytest.raises(ValueError):
        WindowConfig(**kwargs)


# --------------------------------------------------------------------------- one run, exactly

def test_nothing_is_released_or_spent_before_period_k():
    config = WindowConfig(window=4, horizon=8, rho=1.0)
    state = WindowState.initial(config)
    sampler = SeededSampler(1)
    for t in range(1, 4):
        state, release = step(state, None, sampler)
        assert release is None
        assert state.period == t and state.counts is None
        assert state.ledger.spent == 0 and state.ledger.entries == []
        assert state.periods_released == []
    # the sampler was not touched before period k
    np.testing.assert_array_equal(sampler.rng.random(5), SeededSampler(1).rng.random(5))


@pytest.mark.parametrize("n_pad", [None, 0])
def test_period_k_releases_the_noisy_padded_histogram(n_pad):
    """At t = k, p^k = C^k + n_pad + N_Z(0, σ²): reproduced exactly with a twin sampler
    (same seed, same draws); with n_pad = 0 some bins go negative and are clamped to 0
    (each clamp counted)."""
    config = WindowConfig(window=3, horizon=6, rho=0.5, neighbor="add-remove", n_pad=n_pad)
    panel = markov_codes(40, 6, 2, seed=0)
    histograms = window_histograms(panel, 2, 3)
    seed = 17
    state = WindowState.initial(config)
    sampler = SeededSampler(seed)
    for _ in range(2):
        state, _ = step(state, None, sampler)
    state, release = step(state, histograms[0], sampler)
    noise = SeededSampler(seed).discrete_gaussian(config.noise_variance, config.num_bins)
    noisy = histograms[0] + config.n_pad + noise
    np.testing.assert_array_equal(state.counts, np.maximum(noisy, 0))
    np.testing.assert_array_equal(release.initial_counts, state.counts)
    assert release.extension is None and release.period == 3
    assert release.clamp_events == state.clamp_events == int((noisy < 0).sum())
    if n_pad == 0:
        assert state.clamp_events > 0       # 8 bins of ~5 people with σ² = 4: some go < 0
    assert state.periods_released == [1, 2, 3]
    assert state.ledger.spent == pytest.approx(config.rho / config.num_updates, rel=1e-14)
    assert state.num_synthetic == int(state.counts.sum())


@pytest.mark.parametrize("alphabet", [2, 3])
def test_later_periods_are_the_consistent_extension_of_the_noisy_histogram(alphabet):
    """t > k: group sizes G_z are computed here independently (bins w with
    w mod |A|^(k−1) = z), the targets Ĉ_{zc} read from bin z·|A| + c, and the result
    must equal consistent_extension driven by a twin sampler."""
    k, horizon = 3, 7
    config = WindowConfig(window=k, horizon=horizon, rho=0.2, neighbor="add-remove",
                          alphabet=tuple(range(alphabet)))
    histograms = window_histograms(markov_codes(300, horizon, alphabet, seed=4), alphabet, k)
    sampler, twin = SeededSampler(99), SeededSampler(99)
    state = WindowState.initial(config)
    groups = alphabet ** (k - 1)
    for t in range(1, horizon + 1):
        previous = state
        state, release = step(state, histograms[t - k] if t >= k else None, sampler)
        if t < k:
            continue
        noise = twin.discrete_gaussian(config.noise_variance, config.num_bins)
        noisy = histograms[t - k] + config.n_pad + noise
        if t == k:
            np.testing.assert_array_equal(state.counts, np.maximum(noisy, 0))
            continue
        codes = np.arange(config.num_bins)
        sizes = np.array([previous.counts[codes % groups == z].sum() for z in range(groups)])
        targets = np.array([[noisy[z * alphabet + c] for c in range(alphabet)]
                            for z in range(groups)])
        expected, clamps = consistent_extension(sizes, targets, twin.rng)
        np.testing.assert_array_equal(release.extension, expected)
        np.testing.assert_array_equal(release.extension.sum(axis=1), sizes)
        np.testing.assert_array_equal(state.counts, expected.reshape(-1))
        assert (state.counts >= 0).all()
        assert state.num_synthetic == previous.num_synthetic   # nobody appears or vanishes
        assert release.clamp_events == clamps
        assert state.periods_released[-1] == t


def test_full_run_spends_exactly_rho_then_refuses_to_go_on():
    config = WindowConfig(window=3, horizon=12, rho=0.005, neighbor="add-remove")
    histograms = window_histograms(np.ones((200, 12), dtype=np.int8), 2, 3)
    state, _ = run(config, histograms, SeededSampler(5))
    assert state.ledger.spent == pytest.approx(config.rho, rel=1e-12)
    assert len(state.ledger.entries) == config.num_updates
    assert [e["period"] for e in state.ledger.entries] == list(range(3, 13))
    assert all(e["noise_variance"] == config.noise_variance for e in state.ledger.entries)
    assert state.periods_released == list(range(1, 13))
    with pytest.raises(ValueError, match="beyond the horizon"):
        step(state, histograms[-1], SeededSampler(6))
    fields = manifest_fields(state)
    assert fields["rho_spent"] == pytest.approx(config.rho, rel=1e-12)
    assert fields["epsilon"] == pytest.approx(accounting.zcdp_to_approx_dp(
        state.ledger.spent, config.delta), rel=1e-12)
    assert fields["n_pad"] == config.n_pad and fields["neighbor"] == "add-remove"
    assert fields["debias"]["real_population_estimate"] == (
        state.num_synthetic - config.n_pad * config.num_bins)
    np.testing.assert_array_equal(debias_counts(state.counts, config.n_pad),
                                  state.counts - config.n_pad)


def test_overspend_and_out_of_order_are_refused_before_anything_happens():
    config = WindowConfig(window=2, horizon=5, rho=1.0)
    histograms = window_histograms(markov_codes(50, 5, 2, seed=1), 2, 2)
    state = WindowState.initial(config)
    state.ledger.charge(0.9, "another release")         # leaves 0.1 < ρ/R = 0.25
    state, release = step(state, None, SeededSampler(0))  # period 1 spends nothing
    assert release is None
    snapshot = json.dumps(state.to_dict())
    with pytest.raises(BudgetExceededError):
        step(state, histograms[0], SeededSampler(0))
    assert json.dumps(state.to_dict()) == snapshot
    fresh = WindowState.initial(config)
    with pytest.raises(ValueError, match="out of order"):
        check_step(fresh, 2)
    with pytest.raises(ValueError, match="out of order"):
        check_step(fresh, 0)
    with pytest.raises(ValueError, match="beyond the horizon"):
        check_step(fresh, 6)
    check_step(fresh, 1)                                   # the right period passes
    with pytest.raises(ValueError):                        # wrong histogram size
        step(step(fresh, None, SeededSampler(0))[0], np.zeros(3), SeededSampler(0))


def test_step_does_not_mutate_its_input_state():
    config = WindowConfig(window=2, horizon=6, rho=1.0, alphabet=(0, 1, 2))
    histograms = window_histograms(markov_codes(100, 6, 3, seed=2), 3, 2)
    sampler = SeededSampler(3)
    state = WindowState.initial(config)
    for t in range(1, 7):
        before = copy.deepcopy(state.to_dict())
        counts_before = None if state.counts is None else state.counts.copy()
        new_state, _ = step(state, histograms[t - 2] if t >= 2 else None, sampler)
        assert state.to_dict() == before
        if counts_before is not None:
            np.testing.assert_array_equal(state.counts, counts_before)
            assert new_state.counts is not state.counts
        assert new_state.ledger is not state.ledger
        state = new_state


def test_state_survives_serialisation_between_periods():
    """Resuming from JSON after every period gives the same run as keeping the state."""
    config = WindowConfig(window=3, horizon=8, rho=0.3, alphabet=(0, 1, 2))
    histograms = window_histograms(markov_codes(200, 8, 3, seed=8), 3, 3)
    direct, _ = run(config, histograms, SeededSampler(4))
    sampler = SeededSampler(4)
    state = WindowState.initial(config)
    for t in range(1, 9):
        state = WindowState.from_dict(json.loads(json.dumps(state.to_dict())))
        state, _ = step(state, histograms[t - 3] if t >= 3 else None, sampler)
    assert state.to_dict() == direct.to_dict()


# --------------------------------------------------------------------------- Theorem 3.2

PEOPLE, HORIZON, WINDOW, RHO, RUNS = 2000, 12, 3, 0.005, 400

SCENARIOS = {
    # name: (alphabet size, neighbour relation, panel)
    "binary-add-remove-all-ones": (2, "add-remove",
                                   lambda: np.ones((PEOPLE, HORIZON), dtype=np.int8)),
    "binary-add-remove-markov": (2, "add-remove", lambda: markov_codes(PEOPLE, HORIZON, 2, seed=31)),
    "ternary-add-remove-markov": (3, "add-remove", lambda: markov_codes(PEOPLE, HORIZON, 3, seed=32)),
    "binary-replace-markov": (2, "replace", lambda: markov_codes(PEOPLE, HORIZON, 2, seed=33)),
}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def scenario(request):
    alphabet, neighbor, make_panel = SCENARIOS[request.param]
    config = WindowConfig(window=WINDOW, horizon=HORIZON, rho=RHO, neighbor=neighbor,
                          alphabet=tuple(range(alphabet)), beta=0.05)
    seed0 = 10_000 * (sorted(SCENARIOS).index(request.param) + 1)
    errors, clamps = simulate(config, make_panel(), RUNS, seed0)
    return config, errors, clamps


def test_theorem_3_2_max_error_exceeds_the_bound_with_probability_at_most_beta(scenario):
    config, errors, clamps = scenario
    max_error = np.abs(errors).max(axis=(1, 2))
    exceed = int((max_error > config.error_bound).sum())
    allowed = int(stats.binom.ppf(1 - BINOMIAL_LEVEL, RUNS, config.beta))
    assert exceed <= allowed, (exceed, allowed, config.error_bound)
    # n_pad ≥ the bound: a negative target needs an error beyond n_pad, so clamping
    # (the algorithm's failure event) is at least as rare.
    assert config.n_pad >= config.error_bound
    assert int((clamps > 0).sum()) <= allowed


def test_theorem_3_2_error_is_mean_zero_with_flat_variance_sigma2(scenario):
    config, errors, _ = scenario
    sigma2 = config.noise_variance
    runs, updates, bins = errors.shape
    cells = runs * bins
    variance_se = sigma2 * math.sqrt(2 / cells)
    rounding_allowance = 0.5            # |A|/(|A|−1)·¼ ≤ ½, see the module docstring
    second_moment = (errors ** 2).mean(axis=(0, 2))      # one value per period
    mean = errors.mean(axis=(0, 2))
    target = [sigma2] * updates
    assert np.all(np.abs(second_moment - sigma2) <= Z * variance_se + rounding_allowance), (
        second_moment, target)
    assert np.all(np.abs(mean) <= Z * math.sqrt((sigma2 + rounding_allowance) / cells)), mean
    # flat over time: first and last update agree (positively correlated, so the SE of
    # the difference is at most √2 times one period's)
    assert abs(second_moment[-1] - second_moment[0]) <= (
        Z * math.sqrt(2) * variance_se + rounding_allowance)


def test_variance_check_would_catch_a_miscalibrated_sigma(scenario):
    """Power of the check above: the observed error variance rules out the σ² of the
    other neighbouring relation (a factor 2 either way), so a calibration mix-up or an
    error that grew to 2σ² would be caught."""
    config, errors, _ = scenario
    runs, _, bins = errors.shape
    other = 2 * config.noise_variance if config.neighbor == "add-remove" else (
        config.noise_variance / 2)
    pooled = (errors ** 2).mean()
    assert abs(pooled - other) > Z * other * math.sqrt(2 / (runs * bins))


def test_every_bin_keeps_variance_sigma2(scenario):
    """Per bin (the |A|-ary step must not favour some bins): the mean of e² over the R
    periods of one run has variance ≤ Var(e²) = 2σ⁴ whatever the correlation between
    periods (an average of equal-variance terms), so over N runs its standard error is
    at most σ²·sqrt(2/N)."""
    config, errors, _ = scenario
    sigma2 = config.noise_variance
    runs = errors.shape[0]
    per_bin = (errors ** 2).mean(axis=(0, 1))
    assert np.all(np.abs(per_bin - sigma2) <= Z * sigma2 * math.sqrt(2 / runs) + 0.5), (
        per_bin / sigma2)
