"""Tests of mechanisms/emission.py: splitting the private counts across shards and
materialising synthetic people.

The materialised people must reproduce the released counts exactly (checked with
panel.window_histograms on the produced values).  The randomness is checked by its
distribution: a shard's share of one colour is hypergeometric, so its mean over N
splits has standard error sqrt(Var_hyp/N) with
Var_hyp = q·(K/M)·(1 − K/M)·(M − q)/(M − 1); the whole marginal is checked by a
chi-square test at level 1e-6; "which members of a group get value c" must be
uniform, so each member gets c with probability extension[z, c]/G_z (binomial
standard error).  We allow 6 standard errors.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms.emission import (
    PEOPLE_PER_SHARD,
    ShardPeople,
    WindowCodes,
    extension_shard_plan,
    period_shard_plan,
    shard_rng,
    shard_sizes,
    split_counts,
)
from continual_synth.mechanisms.panel import window_histograms
from continual_synth.mechanisms.samplers import SeededSampler
from continual_synth.mechanisms.window import WindowConfig, WindowState, step
from helpers_panels import markov_codes

Z = 6.0
CHI2_LEVEL = 1e-6




# --------------------------------------------------------------------------- splitting

@pytest.mark.parametrize("total, shards, used", [
    (0, 3, 1), (10, 3, 1), (1000, 7, 1), (PEOPLE_PER_SHARD, 4, 1), (PEOPLE_PER_SHARD + 1, 4, 2),
    (3 * PEOPLE_PER_SHARD + 7, 16, 4), (2 * PEOPLE_PER_SHARD + 7, 16, 4),
    (4 * PEOPLE_PER_SHARD + 1, 16, 8), (4 * PEOPLE_PER_SHARD + 1, 6, 6),
    (40 * PEOPLE_PER_SHARD, 16, 16)])
def test_shard_sizes_fill_as_many_shards_as_the_population_needs(total, shards, used):
    sizes = shard_sizes(total, shards)
    assert sizes.size == shards and sizes.sum() == total and (sizes >= 0).all()
    assert (sizes[used:] == 0).all()                          # unused shards stay empty
    assert sizes[:used].max() - sizes[:used].min() <= 1       # used shards are balanced
    assert sizes[:used].max() <= max(PEOPLE_PER_SHARD, -(-total // shards))


def test_split_counts_rows_sum_to_quotas_and_columns_to_counts():
    rng = np.random.default_rng(1)
    for _ in range(300):
        colours = int(rng.integers(1, 9))
        counts = rng.integers(0, 30, size=colours) * (rng.random(colours) < 0.8)
        total = int(counts.sum())
        shards = int(rng.integers(1, 6))
        cuts = np.sort(rng.integers(0, total + 1, size=shards - 1))
        quotas = np.diff(np.concatenate([[0], cuts, [total]]))
        out = split_counts(counts, quotas, rng)
        assert out.shape == (shards, colours) and (out >= 0).all()
        np.testing.assert_array_equal(out.sum(axis=1), quotas)
        np.testing.assert_array_equal(out.sum(axis=0), counts)


def _chi_square_against(observed_values, pmf_support, pmf):
    """Chi-square of draws against a pmf, merging low-expectation cells into the edges."""
    n = observed_values.size
    expected = n * pmf
    keep = np.flatnonzero(expected >= 5)
    lo, hi = pmf_support[keep[0]], pmf_support[keep[-1]]
    observed = np.bincount(np.clip(observed_values, lo, hi) - lo, minlength=hi - lo + 1)
    exp_cells = expected[(pmf_support >= lo) & (pmf_support <= hi)].copy()
    exp_cells[0] += expected[pmf_support < lo].sum()
    exp_cells[-1] += expected[pmf_support > hi].sum()
    stat = float(((observed - exp_cells) ** 2 / exp_cells).sum())
    return stat, float(stats.chi2.isf(CHI2_LEVEL, exp_cells.size - 1))


def test_split_counts_shares_are_hypergeometric():
    counts = np.array([30, 0, 12, 58, 7])
    total = int(counts.sum())
    quotas = np.array([27, 27, 27, 26])              # four balanced shards of the 107
    reps = 3000
    rng = np.random.default_rng(2)
    draws = np.stack([split_counts(counts, quotas, rng) for _ in range(reps)])
    mean = draws.mean(axis=0)
    for j, q in enumerate(quotas):
        for c, k in enumerate(counts):
            expected = q * k / total
            var = q * (k / total) * (1 - k / total) * (total - q) / (total - 1)
            assert abs(mean[j, c] - expected) <= Z * math.sqrt(var / reps) + 1e-12, (j, c)
    # the full marginal of the first shard (a hypergeometric draw) and of the last
    # shard (which takes what is left): both are hypergeometric by exchangeability
    for j, c in ((0, 3), (len(quotas) - 1, 0), (1, 2)):
        support = np.arange(0, min(quotas[j], counts[c]) + 1)
        pmf = stats.hypergeom(total, counts[c], quotas[j]).pmf(support)
        stat, critical = _chi_square_against(draws[:, j, c], support, pmf)
        assert stat <= critical, (j, c, stat, critical)


# --------------------------------------------------------------------------- people

@pytest.mark.parametrize("alphabet,window", [(2, 3), (3, 2), (2, 1)])
def test_create_produces_exactly_the_planned_window_histogram(alphabet, window):
    rng = np.random.default_rng(3)
    bins = alphabet ** window
    planned = rng.integers(0, 12, size=bins)
    planned[0] = 0
    people, values = ShardPeople.create(500, planned, WindowCodes(alphabet, window), rng)
    assert values.shape == (planned.sum(), window)
    np.testing.assert_array_equal(window_histograms(values, alphabet, window)[0], planned)
    np.testing.assert_array_equal(people.ids, np.arange(500, 500 + planned.sum()))
    # window codes are the base-|A| codes of the values, earliest most significant
    powers = alphabet ** np.arange(window - 1, -1, -1)
    np.testing.assert_array_equal(people.codes, values.astype(np.int64) @ powers)


@pytest.mark.parametrize("alphabet,window", [(2, 3), (3, 3), (4, 2)])
def test_extend_produces_exactly_the_planned_extension(alphabet, window):
    rng = np.random.default_rng(4)
    bins, groups = alphabet ** window, alphabet ** (window - 1)
    people, values = ShardPeople.create(0, rng.integers(0, 9, size=bins),
                                        WindowCodes(alphabet, window), rng)
    ids = people.ids.copy()
    columns = [values]
    for _ in range(4):
        group = people.codes % groups
        sizes = np.bincount(group, minlength=groups)
        extension = np.stack([rng.multinomial(size, np.ones(alphabet) / alphabet)
                              for size in sizes])
        new = people.extend(extension, rng)
        assert new.shape == (ids.size,) and new.dtype == np.int8
        columns.append(new[:, None])
        panel = np.hstack(columns)
        histograms = window_histograms(panel, alphabet, window)
        np.testing.assert_array_equal(histograms[-1], extension.reshape(-1))
        np.testing.assert_array_equal(people.codes,
                                      panel[:, -window:].astype(np.int64)
                                      @ alphabet ** np.arange(window - 1, -1, -1))
        np.testing.assert_array_equal(people.ids, ids)      # ids stable across periods


def test_extend_chooses_members_of_a_group_uniformly():
    """Algorithm 1 selects the p^t_{zc} members uniformly from the group: each member
    of group z gets value c with probability extension[z, c]/G_z."""
    alphabet, window = 3, 2
    codes = np.repeat([0, 4, 7], [10, 6, 4])           # groups (code % 3): 0, 1, 1
    extension = np.array([[2, 3, 5], [4, 0, 6], [0, 0, 0]])
    reps = 4000
    hits = np.zeros((codes.size, alphabet))
    for r in range(reps):
        people = ShardPeople(0, codes, WindowCodes(alphabet, window))
        values = people.extend(extension, np.random.default_rng([5, r]))
        hits[np.arange(codes.size), values] += 1
    group = codes % alphabet
    p = extension[group] / extension[group].sum(axis=1, keepdims=True)
    freq = hits / reps
    se = np.sqrt(p * (1 - p) / reps)
    assert (np.abs(freq - p) <= Z * se + 1e-12).all(), (freq, p)


# --------------------------------------------------------------------------- full run

def plan_all_shards(releases, num_shards, rules, rng):
    """Per-shard plans of a run's releases: period → the initial or extension split."""
    plans, code_counts = {}, None
    for release in releases:
        plan, code_counts = period_shard_plan(rules, release.initial_counts, release.extension,
                                              code_counts, num_shards, rng)
        plans[release.period] = plan.get("initial", plan.get("extension"))
    return plans


def materialise(plans, releases, num_shards, alphabet, window, seed):
    """All shards' people, period by period, with their shard_rng; (ids, panel)."""
    first = releases[0]
    initial = plans[first.period]
    starts = np.concatenate([[0], np.cumsum(initial.sum(axis=1))[:-1]])
    ids, rows = [], []
    for j in range(num_shards):
        people, values = ShardPeople.create(int(starts[j]), initial[j],
                                            WindowCodes(alphabet, window),
                                            shard_rng(seed, first.period, j))
        columns = [values]
        for release in releases[1:]:
            columns.append(people.extend(plans[release.period][j],
                                         shard_rng(seed, release.period, j))[:, None])
        ids.append(people.ids)
        rows.append(np.hstack(columns))
    return np.concatenate(ids), np.vstack(rows)


@pytest.mark.parametrize("alphabet", [2, 3])
def test_plan_all_shards_reproduces_every_released_histogram(alphabet):
    window, horizon, shards = 3, 8, 4
    config = WindowConfig(window=window, horizon=horizon, rho=1.0, neighbor="add-remove",
                          alphabet=tuple(range(alphabet)))
    histograms = window_histograms(markov_codes(300, horizon, alphabet, seed=6), alphabet, window)
    sampler = SeededSampler(7)
    state = WindowState.initial(config)
    releases, counts_after = [], {}
    for t in range(1, horizon + 1):
        state, release = step(state, histograms[t - window] if t >= window else None, sampler)
        if release is not None:
            releases.append(release)
            counts_after[t] = state.counts.copy()
    plans = plan_all_shards(releases, shards, WindowCodes(alphabet, window),
                            np.random.default_rng(8))
    # the plans split each release exactly
    np.testing.assert_array_equal(plans[window].sum(axis=0), releases[0].initial_counts)
    np.testing.assert_array_equal(plans[window].sum(axis=1),
                                  shard_sizes(state.num_synthetic, shards))
    for release in releases[1:]:
        np.testing.assert_array_equal(plans[release.period].sum(axis=0), release.extension)
    ids, panel = materialise(plans, releases, shards, alphabet, window, seed=9)
    np.testing.assert_array_equal(ids, np.arange(state.num_synthetic))   # contiguous
    assert panel.shape == (state.num_synthetic, horizon)
    produced = window_histograms(panel, alphabet, window)
    for t, counts in counts_after.items():
        np.testing.assert_array_equal(produced[t - window], counts)
    np.testing.assert_array_equal(produced[-1], state.counts)
    # the same seed re-emits identical records; another seed gives other records
    _, again = materialise(plans, releases, shards, alphabet, window, seed=9)
    np.testing.assert_array_equal(again, panel)
    _, other = materialise(plans, releases, shards, alphabet, window, seed=10)
    assert not np.array_equal(other, panel)
    np.testing.assert_array_equal(window_histograms(other, alphabet, window), produced)


def test_shard_plans_match_group_sizes_step_by_step():
    rng = np.random.default_rng(11)
    alphabet, window, shards = 2, 3, 3
    initial = rng.integers(20, 60, size=alphabet ** window)
    codes_rules = WindowCodes(alphabet, window)
    plan, _ = period_shard_plan(codes_rules, initial, None, None, shards, rng)
    plan = plan["initial"]
    sizes = codes_rules.group_sizes(plan)
    # group z of a window code w is w mod |A|^(k−1): computed here independently
    codes = np.arange(initial.size)
    for j in range(shards):
        expected = [plan[j][codes % alphabet ** (window - 1) == z].sum()
                    for z in range(alphabet ** (window - 1))]
        np.testing.assert_array_equal(sizes[j], expected)
    totals = sizes.sum(axis=0)
    extension = np.stack([[s // 2, s - s // 2] for s in totals])
    ext_plan = extension_shard_plan(sizes, extension, rng)
    np.testing.assert_array_equal(ext_plan.sum(axis=0), extension)
    np.testing.assert_array_equal(ext_plan.sum(axis=2), sizes)


def test_shard_rng_is_deterministic_per_seed_period_and_shard():
    a = shard_rng(1, 5, 2).integers(0, 2 ** 62, size=4)
    np.testing.assert_array_equal(a, shard_rng(1, 5, 2).integers(0, 2 ** 62, size=4))
    for other in (shard_rng(2, 5, 2), shard_rng(1, 6, 2), shard_rng(1, 5, 3)):
        assert not np.array_equal(a, other.integers(0, 2 ** 62, size=4))
