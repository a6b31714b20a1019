"""The expected-W1 bound of one-shot PrivHP (Holland et al. 2025, Theorem 3;
mechanisms/privhp.py, ``theorem3_w1_bound``): the manifest states the function's value,
and the bound holds on generated data — the mean over seeds of the measured W1 between
the input's points and the released generator is below the mean bound — while a bound
computed for much less noise is violated (the check can fail)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import linear_sum_assignment

from continual_synth.mechanisms import privhp
from continual_synth.mechanisms.privhp_synthesizer import PrivHPSynthesizer
from continual_synth.mechanisms.samplers import SeededSampler
from continual_synth.pipelines.release import publication

SEEDS = range(6)
#: the finer level the 1-D generator is discretised at, below the tree's depth
REFINE = 6


def points(kind: str, n: int, dims: int, seed: int = 0) -> np.ndarray:
    """``uniform`` points of [0,1]^d, or ``skewed``: three tight clusters."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.random((n, dims))
    centres = np.array([[0.2] * dims, [0.7] * dims, [0.45] * dims])
    return np.clip(centres[rng.integers(0, 3, n)] + rng.normal(0, 0.01, (n, dims)), 0, 1)


def generator_w1_1d(unit_points: np.ndarray, tree: privhp.PrivHPTree) -> float:
    """An upper estimate of W1 between the points and the generator in 1-D: each leaf's
    mass spread evenly over the centres of its sub-cells at depth r + REFINE (exact 1-D
    W1, scipy.stats.wasserstein_distance with weights), plus W1 between that and the
    uniform spread (a quarter of a sub-cell's width)."""
    finest = tree.depth + REFINE
    values, weights = [], []
    for level, theta, count in zip(*tree.leaves()):
        if count > 0:
            cells = 2 ** (finest - int(level))
            values.append((int(theta) * cells + np.arange(cells) + 0.5) / 2 ** finest)
            weights.append(np.full(cells, count / cells))
    return (stats.wasserstein_distance(unit_points[:, 0], np.concatenate(values), None,
                                       np.concatenate(weights)) + 2.0 ** -finest / 4)


def sampled_w1(unit_points: np.ndarray, tree: privhp.PrivHPTree, seed: int) -> float:
    """Exact W1 (optimal assignment, Euclidean) between the points and as many synthetic
    points: its expectation over the sampling is at least W1 to the generator (W1 is
    convex), so it over-estimates the distance the bound is about."""
    synthetic = privhp.sample_unit(tree, len(unit_points), np.random.default_rng(seed))
    cost = np.linalg.norm(unit_points[:, None, :] - synthetic[None, :, :], axis=2)
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


def measured_and_bound(kind, dims, n, bound_config=None, **options):
    """(mean measured W1, mean manifest bound, mean bound of ``bound_config``) over SEEDS."""
    config = privhp.PrivHPConfig(dims=dims, **options)
    unit = points(kind, n, dims)
    accumulator = privhp.accumulate(unit, config)
    measured, bounds, other = [], [], []
    for seed in SEEDS:
        release = privhp.release(accumulator, SeededSampler(seed))
        measured.append(generator_w1_1d(unit, release.tree) if dims == 1
                        else sampled_w1(unit, release.tree, seed))
        bounds.append(release.manifest()["w1_bound"])
        if bound_config is not None:
            other.append(privhp.theorem3_w1_bound(
                bound_config, release.tree.total,
                privhp.released_leaf_mass(release.tree))["w1_bound"])
    return float(np.mean(measured)), float(np.mean(bounds)), (
        float(np.mean(other)) if other else None)


CASES = {
    "1-D uniform, full tree": ("uniform", 1, 2000, dict(prune_k=1024, depth=10)),
    "1-D skewed, pruned": ("skewed", 1, 2000, dict(prune_k=8, depth=12)),
    "1-D skewed, sketches": ("skewed", 1, 2000, dict(prune_k=4, depth=14, sketch_width=64)),
    "1-D uniform, sketches": ("uniform", 1, 2000, dict(prune_k=4, depth=14,
                                                       sketch_width=64)),
    "2-D uniform, full tree": ("uniform", 2, 500, dict(prune_k=256, depth=8)),
    "2-D skewed, pruned": ("skewed", 2, 500, dict(prune_k=16, depth=10)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_measured_expected_w1_is_below_the_bound(case):
    kind, dims, n, options = CASES[case]
    measured, bound, _ = measured_and_bound(kind, dims, n, epsilon=1.0, **options)
    assert 0 < measured < bound, (case, measured, bound)


def test_a_bound_for_much_less_noise_is_violated():
    """The planted bug: the bound of a configuration with 100 times the budget (a
    hundredth of the noise scale) is far below the W1 the release actually has."""
    kind, dims, n, options = CASES["1-D uniform, full tree"]
    planted = privhp.PrivHPConfig(dims=dims, epsilon=100.0, **options)
    measured, bound, too_small = measured_and_bound(kind, dims, n, planted, epsilon=1.0,
                                                    **options)
    assert too_small < measured < bound, (too_small, measured, bound)


def test_the_manifest_states_the_functions_value():
    config = privhp.PrivHPConfig(epsilon=4.0, dims=2, prune_k=8, depth=12, sketch_width=64)
    synthesizer = PrivHPSynthesizer(config, 10)
    accumulator = privhp.accumulate(points("skewed", 3000, 2), config)
    state, release = synthesizer.step(synthesizer.initial_state(), accumulator,
                                      SeededSampler(3))
    manifest = publication.manifest(synthesizer.manifest(state))
    expected = privhp.theorem3_w1_bound(config, release.tree.total,
                                        privhp.released_leaf_mass(release.tree))
    assert manifest["w1_bound"] == pytest.approx(expected["w1_bound"], rel=1e-9)
    assert manifest["w1_bound_kind"] == "expected"
    assert "Theorem 3" in manifest["w1_bound_theorem"]
    terms = manifest["w1_bound_terms"]
    assert terms["leaf_source"] == "the released tree" and terms["n"] == pytest.approx(
        release.tree.total)
    assert manifest["w1_bound"] == pytest.approx(
        terms["leaf"] + terms["noise_points"] / terms["n"] + terms["sketch_approximation"])
    assert manifest["w1_bound"] < terms["domain_diameter"]  # not capped
    # the leaf term of a release is at most the data-free one a plan states
    free = privhp.theorem3_w1_bound(config, release.tree.total)
    assert config.depth > privhp.shallowest_leaf_level(config)
    assert privhp.hierarchy.diameter(config.depth, 2) <= terms["leaf"] <= free["leaf"]


def test_the_bound_follows_the_noise_in_force():
    """More budget or the add-remove relation: less noise, a lower bound; the full tree's
    leaf term is its resolution; W1 never exceeds the cube's diameter."""
    base = dict(dims=1, prune_k=1024, depth=10)

    def bound(**options):
        return privhp.theorem3_w1_bound(privhp.PrivHPConfig(**{**base, **options}), 1000)

    assert bound(epsilon=2.0)["w1_bound"] < bound(epsilon=1.0)["w1_bound"]
    assert bound(epsilon=1.0)["w1_bound"] < bound(epsilon=1.0, neighbor="replace")["w1_bound"]
    assert bound(epsilon=1.0)["leaf"] == 2.0 ** -10
    plane = privhp.PrivHPConfig(epsilon=1.0, dims=2, prune_k=8, depth=10)
    uniform = privhp.PrivHPConfig(epsilon=1.0, dims=2, prune_k=8, depth=10,
                                  budget_split="uniform")
    assert privhp.theorem3_w1_bound(plane, 1000)["noise_points"] != pytest.approx(
        privhp.theorem3_w1_bound(uniform, 1000)["noise_points"])
    tiny = privhp.theorem3_w1_bound(privhp.PrivHPConfig(epsilon=0.01, **base), 10)
    assert tiny["w1_bound"] == tiny["domain_diameter"] == 1.0
    assert privhp.theorem3_w1_bound(privhp.PrivHPConfig(epsilon=1.0, **base),
                                    None)["w1_bound"] is None
