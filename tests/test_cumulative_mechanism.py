"""Algorithm 2 (Bun et al. 2024) as a state machine: budget split (App. B), monotonisation,
synthetic extension, privacy accounting and the accuracy bound, checked statistically."""

import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms.accounting import BudgetExceededError
from continual_synth.mechanisms.cumulative import (CumulativeConfig, CumulativeState, step,
                                                   threshold_counts)
from continual_synth.mechanisms.samplers import SeededSampler
from helpers_panels import markov_codes


def true_counts(panel):
    """S_b^t (people with at least b ones by period t), array T × (T + 1), and z_b^t."""
    people, horizon = panel.shape
    weights = np.zeros(people, dtype=np.int64)
    z, s = [], np.zeros((horizon, horizon + 1), dtype=np.int64)
    for t in range(1, horizon + 1):
        z.append(threshold_counts(weights, panel[:, t - 1], t))
        weights = weights + panel[:, t - 1]
        s[t - 1] = [(weights >= b).sum() for b in range(horizon + 1)]
    return z, s


def run(config, panel, seed):
    z, _ = true_counts(panel)
    state, releases = CumulativeState.initial(config), []
    sampler = SeededSampler(seed)
    for t in range(1, config.horizon + 1):
        state, release = step(state, z[t - 1], sampler, population=panel.shape[0])
        releases.append((state.released.copy(), release))
    return state, releases


def test_tree_budget_split_is_appendix_b():
    config = CumulativeConfig(horizon=12, rho=0.005, neighbor="add-remove", public_population=True)
    levels = np.maximum(np.ceil(np.log2(12 - np.arange(1, 13) + 1)), 1) ** 3
    np.testing.assert_allclose(config.counter_rhos, 0.005 * levels / levels.sum(), rtol=1e-12)
    assert config.population_rho == 0.0 and config.entries_changed == 1


def test_add_remove_spends_a_share_on_the_population_and_replace_does_not():
    private = CumulativeConfig(horizon=6, rho=1.0, neighbor="add-remove")
    assert private.population_rho == pytest.approx(0.02)
    assert private.counter_rhos.sum() == pytest.approx(0.98, rel=1e-12)
    replace = CumulativeConfig(horizon=6, rho=1.0, neighbor="replace")
    assert replace.population_rho == 0.0 and replace.entries_changed == 2


def test_noise_free_limit_reproduces_the_truth_exactly():
    panel = markov_codes(300, 6, 2, seed=1)
    config = CumulativeConfig(horizon=6, rho=1e9, neighbor="replace")
    state, releases = run(config, panel, seed=0)
    _, s = true_counts(panel)
    for t, (released, _) in enumerate(releases, start=1):
        np.testing.assert_array_equal(released[: t + 1], s[t - 1, : t + 1])


@pytest.mark.parametrize("neighbor", ["replace", "add-remove"])
def test_released_counts_are_monotone_and_extensions_consistent(neighbor):
    panel = markov_codes(500, 8, 2, seed=2)
    config = CumulativeConfig(horizon=8, rho=0.05, neighbor=neighbor)
    state, releases = run(config, panel, seed=3)
    previous = np.zeros(9, dtype=np.int64)
    previous[0] = releases[0][0][0]
    for t, (released, release) in enumerate(releases, start=1):
        assert (released[1: t + 1] >= previous[1: t + 1]).all()        # non-decreasing in t
        assert (released[1: t + 1] <= previous[0: t]).all()            # Ŝ_b^t ≤ Ŝ_{b−1}^{t−1}
        sizes = previous[0: t] - previous[1: t + 1]
        assert (release.extension >= 0).all()
        np.testing.assert_array_equal(release.extension.sum(axis=1), sizes)
        previous = released
    assert state.ledger.spent == pytest.approx(config.rho, rel=1e-9)


def test_materialised_people_reproduce_every_released_count():
    from continual_synth.mechanisms.emission import assign_group_values
    panel = markov_codes(400, 7, 2, seed=4)
    config = CumulativeConfig(horizon=7, rho=0.1, neighbor="replace")
    _, releases = run(config, panel, seed=5)
    rng = np.random.default_rng(0)
    weights = np.zeros(releases[0][1].num_synthetic, dtype=np.int64)
    for t, (released, release) in enumerate(releases, start=1):
        weights = weights + assign_group_values(weights, release.extension, rng)
        counts = [(weights >= b).sum() for b in range(t + 1)]
        np.testing.assert_array_equal(counts, released[: t + 1])


def test_worst_error_exceeds_the_bound_in_at_most_beta_of_runs():
    """Lemma 4.2 + counters' tails: P(max_{b,t} |Ŝ_b^t − S_b^t| > bound) ≤ β.  With 200 runs
    the count of exceedances is at most the binomial(200, β) 1 − 1e-6 quantile."""
    panel = markov_codes(2000, 12, 2, seed=6)
    config = CumulativeConfig(horizon=12, rho=0.005, neighbor="add-remove",
                              public_population=True)
    _, s = true_counts(panel)
    runs, exceed = 200, 0
    worst = []
    for seed in range(runs):
        _, releases = run(config, panel, seed)
        err = max(np.abs(r[: t + 1] - s[t - 1, : t + 1]).max()
                  for t, (r, _) in enumerate(releases, start=1))
        worst.append(err)
        exceed += err > config.variance_bound
    assert exceed <= stats.binom(runs, config.beta).ppf(1 - 1e-6)
    assert np.median(worst) > 0   # the noise is real


def test_refusals_before_any_data():
    config = CumulativeConfig(horizon=2, rho=1.0, neighbor="replace")
    sampler = SeededSampler(0)
    state = CumulativeState.initial(config)
    with pytest.raises(ValueError, match="population size"):
        step(state, [0], sampler)
    state, _ = step(state, [5], sampler, population=10)
    state, _ = step(state, [1, 2], sampler)
    with pytest.raises(ValueError, match="beyond the horizon"):
        step(state, [0, 0, 0], sampler)
    squeezed = CumulativeState.from_dict(CumulativeState.initial(config).to_dict())
    squeezed.ledger.charge(0.999, "elsewhere")
    with pytest.raises(BudgetExceededError):
        step(squeezed, [1], sampler, population=10)


def test_state_round_trip_continues_identically():
    panel = markov_codes(300, 6, 2, seed=7)
    config = CumulativeConfig(horizon=6, rho=0.2, neighbor="replace")
    z, _ = true_counts(panel)
    a, b = SeededSampler(9), SeededSampler(9)
    state = CumulativeState.initial(config)
    for t in range(1, 4):
        state, _ = step(state, z[t - 1], a, population=300)
    clone = CumulativeState.from_dict(state.to_dict())
    twin = CumulativeState.initial(config)
    for t in range(1, 4):
        twin, _ = step(twin, z[t - 1], b, population=300)
    for t in range(4, 7):
        state, _ = step(state, z[t - 1], a)
        clone_next, _ = step(CumulativeState.from_dict(twin.to_dict()), z[t - 1], b)
        twin = clone_next
        np.testing.assert_array_equal(state.released, twin.released)
    assert clone.period == 3
