"""Tests of mechanisms/privhp.py (Holland et al. 2025, Algorithms 1-3).

Privacy accounting (Σ ε_ℓ = ε, noise scale Δ_ℓ/ε_ℓ per level, checked against the
draws the release actually makes and against OpenDP's privacy map), the consistency
invariants (property tests on random families and on grown trees), exactness of the
pass (merging partial accumulators equals one pass; fixed memory), sampling
frequencies against the leaf counts (chi-square) and a utility sanity check.
"""
from __future__ import annotations


import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms import hierarchy, privhp
from continual_synth.mechanisms.samplers import SeededSampler


class RecordingSampler(SeededSampler):
    """A seeded sampler that records every discrete Laplace call (scale, size)."""

    def __init__(self, seed, zero=False):
        super().__init__(seed)
        self.calls, self.zero = [], zero

    def discrete_laplace(self, scale, size):
        self.calls.append((scale, size))
        return np.zeros(size, dtype=np.int64) if self.zero else super().discrete_laplace(
            scale, size)


def clusters(n, dims, seed):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.2] * dims, [0.7] * dims, [0.45] * dims])[:, :dims]
    which = rng.integers(0, 3, n)
    return np.clip(centres[which] + rng.normal(0, 0.01, (n, dims)), 0, 1)


CONFIG = dict(epsilon=1.0, dims=2, prune_k=8, depth=10, sketch_width=256, sketch_depth=3)


# --------------------------------------------------------------------------- accounting

@pytest.mark.parametrize("split", ["sqrt", "sqrt-sensitivity", "uniform"])
@pytest.mark.parametrize("neighbor", ["add-remove", "replace"])
def test_budget_split_sums_to_epsilon_and_noise_matches_sensitivity(split, neighbor):
    config = privhp.PrivHPConfig(**CONFIG, neighbor=neighbor, budget_split=split)
    eps = config.epsilons()
    assert eps.size == config.depth + 1 and np.all(eps > 0)
    assert eps.sum() == pytest.approx(config.epsilon, rel=1e-12)
    factor = 1 if neighbor == "add-remove" else 2
    assert config.complete_depth == 3
    exact = config.exact_depth  # 2^9 = 512 ≤ j·w = 768 < 2^10: levels 0..9 exact
    assert exact == 9
    for level in range(config.depth + 1):
        expected = factor * (1 if level <= exact else config.sketch_depth)
        assert config.sensitivity(level) == expected
    # the release draws exactly one noise vector per level with scale Δ_ℓ / ε_ℓ
    sampler = RecordingSampler(0)
    privhp.release(privhp.PrivHPAccumulator(config), sampler)
    scales = [scale for scale, _ in sampler.calls]
    sizes = [size for _, size in sampler.calls]
    np.testing.assert_allclose(scales, config.noise_scales(), rtol=1e-12)
    assert sizes == [2 ** l for l in range(exact + 1)] + [
        config.sketch_depth * config.sketch_width] * (config.depth - exact)
    spent = sum(config.sensitivity(l) / s for l, s in enumerate(scales))
    assert spent == pytest.approx(config.epsilon, rel=1e-12)
    if split == "sqrt":
        weights = np.sqrt([config.nodes_released(l) * hierarchy.diameter(l, 2)
                           for l in range(config.depth + 1)])
        np.testing.assert_allclose(eps / eps.sum(), weights / weights.sum(), rtol=1e-12)
    if split == "uniform":
        np.testing.assert_allclose(eps, config.epsilon / (config.depth + 1))


def test_noise_scales_agree_with_opendp_privacy_map():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    config = privhp.PrivHPConfig(**CONFIG)
    total = 0.0
    for level, scale in enumerate(config.noise_scales()):
        measurement = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)),
                                        dp.l1_distance(T=int), scale=float(scale))
        total += measurement.map(int(config.sensitivity(level)))
    assert total == pytest.approx(config.epsilon, rel=1e-9)


def test_explicit_level_epsilons_and_their_errors():
    eps = [1 / 11] * 10 + [1 / 11 - 1e-10]
    config = privhp.PrivHPConfig(**{**CONFIG, "epsilon": 1.0}, level_epsilons=eps)
    assert config.epsilons().sum() == pytest.approx(1.0, rel=1e-12)
    assert config.accounting()["budget_split"] == "explicit"
    with pytest.raises(ValueError, match="11 values"):
        privhp.PrivHPConfig(**CONFIG, level_epsilons=[0.5, 0.5])
    with pytest.raises(ValueError, match="sum to"):
        privhp.PrivHPConfig(**CONFIG, level_epsilons=[0.2] * 11)
    with pytest.raises(ValueError, match="positive"):
        privhp.PrivHPConfig(**CONFIG, level_epsilons=[1.1] + [-0.01] * 10)


def test_memory_is_fixed_by_the_parameters_not_by_n():
    config = privhp.PrivHPConfig(**CONFIG)
    assert config.memory_counters == 1023 + 1 * 3 * 256
    small = privhp.accumulate(clusters(10, 2, 0), config)
    large = privhp.accumulate(clusters(100_000, 2, 0), config)
    assert small.counters == large.counters == config.memory_counters
    full = privhp.PrivHPConfig(**{**CONFIG, "prune_k": 2 ** 10})
    assert full.is_full_tree and full.memory_counters == 2 ** 11 - 1
    assert privhp.default_depth(1.0, 1_000_000) == 20


# ------------------------------------------------------------------------ the pass

def test_merging_partial_accumulators_equals_one_pass():
    config = privhp.PrivHPConfig(**CONFIG)
    points = clusters(30_000, 2, 1)
    whole = privhp.accumulate(points, config)
    rng = np.random.default_rng(3)
    cuts = np.sort(rng.choice(points.shape[0], 6, replace=False))
    parts = [privhp.accumulate(chunk, config) for chunk in np.split(points, cuts)]
    merged = privhp.PrivHPAccumulator(config)
    for part in reversed(parts):
        merged.merge(part)
    np.testing.assert_array_equal(merged.tree, whole.tree)
    np.testing.assert_array_equal(merged.sketches, whole.sketches)
    # exact tree counts: every level sums to n and matches a direct histogram
    for level in range(config.exact_depth + 1):
        counts = whole.level_counts(level)
        assert counts.sum() == points.shape[0]
        direct = np.bincount(hierarchy.leaf_index(points, level).astype(np.int64),
                             minlength=2 ** level)
        np.testing.assert_array_equal(counts, direct)


# ---------------------------------------------------------------------- consistency

def test_consistency_property_random_families():
    rng = np.random.default_rng(4)
    for scale in (1.0, 10.0, 1000.0):
        parent = np.maximum(rng.normal(50, scale, 20_000), 0)
        parent[:100] = 0
        left, right = rng.normal(25, scale, 20_000), rng.normal(25, scale, 20_000)
        a, b = privhp.make_consistent(parent, left, right)
        assert np.all(a >= 0) and np.all(b >= 0)
        np.testing.assert_allclose(a + b, parent, rtol=1e-12, atol=1e-9)
        # He et al.'s rule: a deficit raises both children, a surplus lowers both
        # (Algorithm 3 shares it evenly unless a correction fires)
        la, lb = np.maximum(left, 0), np.maximum(right, 0)
        plain = (a > 0) & (b > 0)
        np.testing.assert_allclose((a - la)[plain], (b - lb)[plain], atol=1e-9)
    # already consistent, non-negative families are left alone
    a, b = privhp.make_consistent(np.array([5.0, 3.0]), np.array([2.0, 3.0]),
                                  np.array([3.0, 0.0]))
    np.testing.assert_array_equal(a, [2.0, 3.0])
    np.testing.assert_array_equal(b, [3.0, 0.0])
    # the corrections: a child pushed below 0 is set to 0, its sibling gets c(p)
    a, b = privhp.make_consistent(np.array([4.0]), np.array([-3.0]), np.array([10.0]))
    assert (a[0], b[0]) == (0.0, 4.0)


@pytest.mark.parametrize("dims,prune_k,epsilon", [(1, 4, 0.5), (2, 8, 1.0), (2, 16, 0.05)])
def test_grown_tree_is_consistent_and_pruned(dims, prune_k, epsilon):
    config = privhp.PrivHPConfig(epsilon=epsilon, dims=dims, prune_k=prune_k, depth=12,
                                 sketch_width=128, sketch_depth=2)
    rel = privhp.release(privhp.accumulate(clusters(20_000, dims, 5), config),
                         SeededSampler(6))
    tree = rel.tree
    assert tree.total >= 0
    for level in range(config.depth + 1):
        counts = tree.counts[level]
        assert np.all(counts >= 0)
        assert counts.size == config.nodes_released(level)
        assert np.all(np.diff(tree.thetas[level].astype(np.int64)) > 0)
        parents = np.flatnonzero(tree.children[level] >= 0)
        if level < config.depth:
            assert parents.size == min(prune_k if level >= config.complete_depth
                                       else 2 ** level, counts.size)
            left = tree.children[level][parents]
            np.testing.assert_allclose(tree.counts[level + 1][left]
                                       + tree.counts[level + 1][left + 1], counts[parents],
                                       rtol=1e-9, atol=1e-6)
            np.testing.assert_array_equal(tree.thetas[level + 1][left],
                                          2 * tree.thetas[level][parents])
            if level >= config.complete_depth:  # the hot set is the top-k
                threshold = np.sort(counts)[::-1][parents.size - 1]
                assert np.all(counts[parents] >= threshold)
        else:
            assert parents.size == 0
    _, _, leaf_counts = tree.leaves()
    assert leaf_counts.sum() == pytest.approx(tree.total, rel=1e-9)
    assert rel.manifest()["memory"]["released_tree_nodes"] == tree.num_nodes


def test_noise_free_release_recovers_exact_counts():
    """With zero noise and a wide sketch (no collisions among the few occupied cells),
    the grown tree's hot nodes carry the exact counts of their cells."""
    config = privhp.PrivHPConfig(epsilon=1.0, dims=1, prune_k=4, depth=9,
                                 sketch_width=1 << 16, sketch_depth=3)
    points = clusters(5_000, 1, 7)
    rel = privhp.release(privhp.accumulate(points, config), RecordingSampler(0, zero=True))
    for level in range(config.depth + 1):
        exact = np.bincount(hierarchy.leaf_index(points, level).astype(np.int64),
                            minlength=2 ** level)
        np.testing.assert_allclose(rel.tree.counts[level],
                                   exact[rel.tree.thetas[level].astype(np.int64)])


# ------------------------------------------------------------------------- sampling

def test_sampling_frequencies_match_leaf_counts():
    config = privhp.PrivHPConfig(epsilon=2.0, dims=2, prune_k=8, depth=8,
                                 sketch_width=128, sketch_depth=2)
    rel = privhp.release(privhp.accumulate(clusters(20_000, 2, 8), config), SeededSampler(9))
    tree = rel.tree
    n = 200_000
    points = np.concatenate([privhp.sample_shard(tree, n, 3, s, 123) for s in range(3)])
    assert points.shape == (n, 2) and np.all((points >= 0) & (points <= 1))
    levels, thetas, counts = tree.leaves()
    # which leaf holds each synthetic point: the level whose cell containing it is a leaf
    observed = np.zeros(levels.size)
    found = np.zeros(n, dtype=bool)
    for level in range(config.depth + 1):
        at_level = np.flatnonzero(levels == level)  # leaves of this level, θ sorted
        if at_level.size == 0:
            continue
        cell = hierarchy.leaf_index(points, level)
        pos = np.minimum(np.searchsorted(thetas[at_level], cell), at_level.size - 1)
        hit = thetas[at_level][pos] == cell
        assert not np.any(hit & found)  # leaves are disjoint
        np.add.at(observed, at_level[pos[hit]], 1)
        found |= hit
    assert found.all()
    p = counts / counts.sum()
    assert np.all(observed[p == 0] == 0)
    keep = p > 0
    expected = n * p[keep]
    # merge small cells so every expected count is ≥ 5
    order = np.argsort(expected)
    obs, exp = observed[keep][order], expected[order]
    small = np.cumsum(exp) < 50
    obs = np.concatenate([[obs[small].sum()], obs[~small]])
    exp = np.concatenate([[exp[small].sum()], exp[~small]])
    chi2 = ((obs - exp) ** 2 / np.maximum(exp, 1e-12)).sum()
    assert chi2 < stats.chi2.ppf(1 - 1e-6, df=obs.size - 1)
    # power: the same statistic rejects uniform sampling over the leaves
    wrong = np.full(exp.size, n / exp.size)
    assert ((obs - wrong) ** 2 / wrong).sum() > stats.chi2.ppf(1 - 1e-6, df=obs.size - 1)


def test_sharded_sampling_is_deterministic_and_uniform_fallback():
    config = privhp.PrivHPConfig(**CONFIG)
    rel = privhp.release(privhp.PrivHPAccumulator(config), RecordingSampler(0, zero=True))
    assert rel.tree.total == 0  # no data, no noise: uniform fallback
    pts = privhp.sample_shard(rel.tree, 1000, 2, 1, 5)
    assert pts.shape == (500, 2)
    np.testing.assert_array_equal(pts, privhp.sample_shard(rel.tree, 1000, 2, 1, 5))
    assert privhp.shard_sizes(10, 3).tolist() == [4, 3, 3]


def test_utility_far_better_than_uniform_in_one_dimension():
    points = clusters(100_000, 1, 10)
    config = privhp.PrivHPConfig(epsilon=1.0, dims=1, prune_k=16, depth=16,
                                 sketch_width=512, sketch_depth=3)
    _, synthetic = privhp.synthesize(points, config, SeededSampler(11), 100_000, num_shards=2)
    w_privhp = stats.wasserstein_distance(points[:, 0], synthetic[:, 0])
    w_uniform = stats.wasserstein_distance(points[:, 0], np.random.default_rng(0).random(100_000))
    assert w_privhp < 0.05 * w_uniform
    assert w_privhp < 0.005


# ------------------------------------------------------------- the synthesizer protocol

def test_synthesizer_step_is_the_release_with_epsilon_charged_once():
    from continual_synth.mechanisms.errors import StateError
    from continual_synth.mechanisms.privhp_synthesizer import PrivHPSynthesizer
    from continual_synth.mechanisms.synthesizer import PointsRelease

    config = privhp.PrivHPConfig(**CONFIG)
    statistics = privhp.accumulate(clusters(5_000, 2, 3), config)
    synthesizer = PrivHPSynthesizer(config, samples=300)
    state = synthesizer.initial_state()
    assert state.period == 0 and state.ledger.spent == 0 and state.ledger.unit == "epsilon"
    new_state, release = synthesizer.step(state, statistics, SeededSampler(11))
    # the same noise, tree and emission seed as the mechanism's release with that sampler
    expected = privhp.release(statistics, SeededSampler(11))
    assert isinstance(release, PointsRelease)
    assert (release.period, release.size) == (1, 300)
    assert release.emission_seed == expected.emission_seed
    for ours, theirs in zip(release.tree.counts, expected.tree.counts):
        np.testing.assert_array_equal(ours, theirs)
    assert new_state.period == 1 and new_state.ledger.spent == pytest.approx(config.epsilon)
    assert state.ledger.spent == 0  # the step does not change the state it was given
    assert synthesizer.manifest(new_state) == expected.manifest()
    assert "noisy_total" not in synthesizer.manifest(state)
    # one period only: a second step, or a step out of order, is refused before any noise
    with pytest.raises(StateError, match="beyond the horizon"):
        synthesizer.step(new_state, statistics, SeededSampler(12))
    with pytest.raises(StateError, match="out of order"):
        synthesizer.check_step(new_state, 1)
    with pytest.raises(ValueError, match="another PrivHP configuration"):
        other = privhp.PrivHPConfig(**{**CONFIG, "epsilon": 2.0})
        synthesizer.step(state, privhp.PrivHPAccumulator(other), SeededSampler(11))
