"""PrivHP's memory: exact levels where they are smaller than a sketch, and the
``memory`` budget (mechanisms/privhp.py, :func:`privhp.sketch_width_for`).

Invariants over a grid of budgets, depths and prune_k: counters used ≤ budget, ≤ the
full tree of the same depth, non-decreasing in prune_k; the issue's two figures; the
calibration stays exact with exact levels; and utility at the default width is not
worse than the former all-sketch structure (seeded W1 over repetitions).
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms import privhp
from continual_synth.mechanisms.errors import ParameterError
from continual_synth.mechanisms.samplers import SeededSampler


def config(**kw):
    base = dict(epsilon=1.0, dims=1, prune_k=64, depth=15)
    return privhp.PrivHPConfig(**{**base, **kw})


@pytest.mark.parametrize("depth", [6, 11, 15, 20])
@pytest.mark.parametrize("budget", [400, 4_095, 10_000, 50_000, 3_000_000])
def test_budget_bounds_memory_and_is_monotone_in_prune_k(depth, budget):
    used = []
    for k in [2 ** i for i in range(depth + 1)]:
        try:
            c = config(depth=depth, prune_k=k, memory=budget)
        except ParameterError as exc:  # too small for this k: then for every larger k
            assert "raise --memory" in str(exc)
            assert all(privhp.structure_counters(min(i, depth), depth, 3, 1) > budget
                       for i in range(k.bit_length() - 1, depth + 1))
            break
        assert c.memory_counters <= budget
        assert c.memory_counters <= c.full_tree_counters
        assert c.memory_counters == c.tree_counters + c.sketch_counters
        assert c.memory_counters == privhp.structure_counters(
            c.complete_depth, depth, 3, c.sketch_width)
        used.append(c.memory_counters)
    assert used == sorted(used)
    if used:  # at the largest prune_k that fits, one more column would not fit
        c = config(depth=depth, prune_k=2 ** (len(used) - 1), memory=budget)
        assert c.exact_depth == depth or privhp.structure_counters(
            c.complete_depth, depth, 3, c.sketch_width + 1) > budget
    if budget >= 2 ** (depth + 1) - 1:  # the full tree fits: every level exact
        assert config(depth=depth, prune_k=1, memory=budget).exact_depth == depth


def test_a_smaller_prune_k_costs_no_more_counters():
    # 1-D, r = 15, default sketch (w = 1024, j = 3): not 33 823 counters at prune_k = 16
    # and 22 015 at 256; levels up to 11 (2^11 ≤ 3 072) are exact
    small, large = config(prune_k=16), config(prune_k=256)
    assert small.exact_depth == large.exact_depth == 11
    assert small.memory_counters == large.memory_counters == 4_095 + 4 * 3 * 1024
    # 2-D, r = 11: the plain tree has 4 095 counters, and no more are held (not 21 535)
    for k in (4, 16, 64, 256):
        c = config(dims=2, depth=11, prune_k=k)
        assert c.memory_counters == c.full_tree_counters == 4_095
        assert c.sketch_counters == 0


def test_budget_errors_name_the_option():
    with pytest.raises(ParameterError, match="memory.*raise --memory"):
        config(memory=100)
    with pytest.raises(ParameterError, match="memory"):
        config(memory=privhp.MAX_COUNTERS + 1)
    with pytest.raises(ParameterError, match="memory"):
        config(memory=0)


def test_exact_levels_are_calibrated_and_the_manifest_reports_the_budget():
    c = config(depth=12, prune_k=8, memory=6_000)
    kinds = [c.level_kind(l) for l in range(c.depth + 1)]
    assert kinds[:4] == ["tree"] * 4 and "exact" in kinds and kinds[-1] == "sketch"
    for level in range(c.depth + 1):
        assert c.sensitivity(level) == (1 if level <= c.exact_depth else c.sketch_depth)
    assert sum(c.sensitivity(l) / s for l, s in enumerate(c.noise_scales())) == \
        pytest.approx(1.0, rel=1e-12)
    manifest = privhp.release_manifest(c)
    assert manifest["memory"]["budget"] == 6_000
    assert manifest["memory"]["counters_used"] == c.memory_counters <= 6_000
    assert manifest["parameters"]["exact_depth"] == c.exact_depth
    assert [lv["kind"] for lv in manifest["levels"]] == kinds
    # the pass holds exactly the counters the configuration states
    acc = privhp.accumulate(np.random.default_rng(0).random((1000, 1)), c)
    assert acc.counters == c.memory_counters
    for level in range(c.exact_depth + 1):
        assert acc.level_counts(level).sum() == 1000


class SketchEverywhere(privhp.PrivHPConfig):
    """The structure before exact fallback: sketches on every level below L*."""

    @property
    def exact_depth(self):
        return self.complete_depth


def test_w1_at_the_default_width_not_worse_than_all_sketches():
    """Seeded, 12 repetitions each on 1-D clustered data (n = 20 000, r = 14, k = 16,
    default w = 1 024): exact levels have sensitivity 1 instead of 3 and no collisions,
    so the mean W1 must not exceed the former structure's by more than two standard
    errors of the difference."""
    rng = np.random.default_rng(5)
    truth = np.clip(rng.choice([0.2, 0.45, 0.7], 20_000)[:, None]
                    + rng.normal(0, 0.01, (20_000, 1)), 0, 1)
    params = dict(epsilon=1.0, dims=1, prune_k=16, depth=14)
    new, old = privhp.PrivHPConfig(**params), SketchEverywhere(**params)
    assert new.memory_counters < old.memory_counters
    diffs = []
    for rep in range(12):
        w = []
        for c in (new, old):
            _, synthetic = privhp.synthesize(truth, c, SeededSampler(rep), truth.shape[0])
            w.append(stats.wasserstein_distance(truth[:, 0], synthetic[:, 0]))
        diffs.append(w[0] - w[1])
    diffs = np.array(diffs)
    assert diffs.mean() <= 2 * diffs.std(ddof=1) / np.sqrt(diffs.size)
