"""Pooled one-way margins of the proposed tabular synthesizer
(:mod:`continual_synth.mechanisms.pooled_margins`)."""
import json

import numpy as np
import pytest

from continual_synth.mechanisms import pooled_margins, tabular
from continual_synth.mechanisms.errors import ParameterError
from continual_synth.mechanisms.marginals import Domain, all_workloads, workload_histograms
from continual_synth.mechanisms.samplers import SeededSampler, discrete_laplace_variance

# a and b have the same size, so a transposed workload still has the right shape (the
# planted axis bug below); c is large, so the workloads' variances differ per attribute.
DOMAIN = Domain({"a": [0, 1, 2], "b": [0, 1, 2], "c": list(range(8))})
WORKLOADS = (("a", "b"), ("a", "c"), ("b", "c"))


def pooling_statistics(workloads_seen, draws=20000, scale=2.0, seed=5):
    """Pool ``draws`` noisy measurements of one period (each workload's true histogram
    plus discrete Laplace noise of ``scale`` per cell, from the project's sampler) with
    :func:`pooled_margins.period_margins`, told the workloads are ``workloads_seen``.
    Returns, per attribute, (largest |z| of the mean error per cell, empirical variance
    / the variance period_margins predicts, per cell)."""
    rng = np.random.default_rng(seed)
    codes = np.stack([rng.choice(3, 500, p=[0.6, 0.3, 0.1]), rng.choice(3, 500),
                      rng.choice(8, 500, p=np.arange(1, 9) / 36)], axis=1).astype(np.int32)
    hists = workload_histograms(codes, DOMAIN, WORKLOADS)
    truth = {a: np.bincount(codes[:, k], minlength=DOMAIN.sizes[k])
             for k, a in enumerate(DOMAIN.names)}
    sampler = SeededSampler(seed)
    variance = discrete_laplace_variance(scale)
    errors = {a: [] for a in DOMAIN.names}
    predicted = {}
    for _ in range(draws):
        increments = {j: h + np.asarray(sampler.discrete_laplace(scale, h.size))
                      for j, h in enumerate(hists)}
        pooled = pooled_margins.period_margins(DOMAIN, workloads_seen, increments,
                                               {j: variance for j in increments})
        for a, (margin, var) in pooled.items():
            errors[a].append(margin - truth[a])
            predicted[a] = var
    out = {}
    for a, e in errors.items():
        e = np.asarray(e)
        z = np.abs(e.mean(axis=0)) / np.sqrt(predicted[a] / draws)
        out[a] = (float(z.max()), e.var(axis=0) / predicted[a])
    return out


def test_pooled_margins_are_unbiased_with_the_predicted_variance():
    """Every attribute's pooled margin is unbiased (mean error within 4.5 standard errors
    per cell) and its variance is 1 / Σ_j |a| / (σ²·|W_j|) (empirical / predicted within
    5 standard errors of a variance estimate, √((2 + κ)/n) with κ ≤ 3 the excess kurtosis
    of a Laplace variable).  The same test catches a planted bug that marginalises a
    workload along the wrong axis (``("a", "b")`` read as ``("b", "a")``)."""
    draws = 20000
    tolerance = 5 * np.sqrt(5 / draws)
    stats = pooling_statistics(WORKLOADS, draws)
    for a, (z, ratio) in stats.items():
        assert z < 4.5, (a, z)
        assert np.abs(ratio - 1).max() < tolerance, (a, ratio)
    # the predicted variance is the inverse-variance formula (here for b: |W_ab| = 9,
    # |W_bc| = 24 cells summed into 3)
    sigma2 = discrete_laplace_variance(2.0)
    _, var_b = pooled_margins.period_margins(
        DOMAIN, WORKLOADS, {0: np.zeros(9), 2: np.zeros(24)}, {0: sigma2, 2: sigma2})["b"]
    assert var_b == pytest.approx(1 / (3 / (sigma2 * 9) + 3 / (sigma2 * 24)))
    planted = pooling_statistics((("b", "a"),) + WORKLOADS[1:], draws)
    assert planted["a"][0] > 4.5 or planted["b"][0] > 4.5


def test_pooled_margins_impute_unmeasured_periods_at_the_discounted_level_share():
    """A period that measured no workload holding ``a`` adds B̂·ŝ_a: the levels (measured
    increments discounted by γ per later measurement of ``a``, not per period) normalised;
    before any measurement, the model's margin.  Measured attributes add their pooled
    measurement."""
    class Model:
        @staticmethod
        def probabilities(attrs):
            return np.full(3, 1 / 3) if attrs == ("a",) else np.full(8, 1 / 8)

    gamma = pooled_margins.LEVEL_DISCOUNT
    sums = {"a": np.array([10.0, 5.0, 5.0]), "c": np.zeros(8)}
    levels = {}
    measured = {"a": (np.array([6.0, 3.0, 1.0]), 1.0)}
    targets = pooled_margins.targets(sums, levels, measured, 10.0, Model)
    np.testing.assert_allclose(targets["a"], [16, 8, 6])
    np.testing.assert_allclose(targets["c"], np.full(8, 10 / 8))  # the model's margin
    sums, levels = pooled_margins.commit(sums, levels, measured, 10.0, Model)
    np.testing.assert_allclose(levels["a"], [6, 3, 1])
    assert "c" not in levels
    # next periods: a unmeasured -> 20 · (6, 3, 1)/10, and its level kept as it was
    # (however many periods pass without a measurement); then a measured again
    second = {"c": (np.arange(8.0), 1.0)}
    for _ in range(5):
        sums, levels = pooled_margins.commit(sums, levels, second, 20.0, Model)
    np.testing.assert_allclose(sums["a"], [16 + 5 * 12, 8 + 5 * 6, 6 + 5 * 2])
    np.testing.assert_allclose(levels["a"], [6, 3, 1])
    np.testing.assert_allclose(levels["c"], np.arange(8.0) * sum(gamma ** i for i in range(5)))
    third = {"a": (np.array([0.0, 0.0, 10.0]), 1.0)}
    _, levels = pooled_margins.commit(sums, levels, third, 10.0, Model)
    np.testing.assert_allclose(levels["a"], gamma * np.array([6, 3, 1]) + [0, 0, 10])
    share = pooled_margins.level_share(levels, "a", Model)
    np.testing.assert_allclose(share, levels["a"] / levels["a"].sum())
    assert share[2] > 0.5  # the recent measurement outweighs the discounted older one


def config(**kw):
    base = dict(domain=DOMAIN, workloads=WORKLOADS, epsilon=1.0, horizon=10,
                selections=2, fit="ipf")
    base.update(kw)
    return tabular.TabularConfig(**base)


def test_pooled_margins_validation_and_old_states():
    assert config().margins == "pooled"
    assert config(fit="pgm").margins == "none"
    assert config(method="baseline").margins == "none"
    assert config(remainder="paper").margins == "none"
    for bad in ({"margins": "pooled", "method": "baseline"},
                {"margins": "pooled", "fit": "pgm"},
                {"margins": "pooled", "remainder": "paper"}, {"margins": "sum"}):
        with pytest.raises(ParameterError, match="margins"):
            config(**bad)
    # a state written before the pool and the selection share (neither in its config)
    # loads and steps as "none" with the paper's split; a pooled state round-trips its
    # sums and levels
    rng = np.random.default_rng(0)
    codes = np.stack([rng.choice(3, 40), rng.choice(3, 40), rng.choice(8, 40)],
                     axis=1).astype(np.int32)
    hists = workload_histograms(codes, DOMAIN, WORKLOADS)
    old = config(margins="none", selection_share=0.5)
    document = tabular.initial_state(old).to_dict()
    del document["config"]["margins"]
    del document["config"]["selection_share"]  # nor the selection share: the paper's 1/2
    document.pop("margin_sums")
    document.pop("margin_levels")
    loaded = tabular.TabularState.from_dict(json.loads(json.dumps(document)))
    restored = tabular.TabularConfig.from_dict(document["config"])
    assert restored.margins == "none" and restored.selection_share == 0.5
    assert loaded.counters[0].budget == pytest.approx(restored.measure_epsilon)
    state, _ = tabular.step(restored, loaded, hists, SeededSampler(1))
    assert state.period == 1 and not state.margin_sums
    pooled = config()
    state, _ = tabular.step(pooled, tabular.initial_state(pooled), hists, SeededSampler(1))
    again = tabular.TabularState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert set(again.margin_sums) == {"a", "b", "c"} and again.margin_levels
    for a in again.margin_sums:
        np.testing.assert_array_equal(again.margin_sums[a], state.margin_sums[a])


def test_weighted_shares_weigh_each_period_by_its_precision():
    """w = B²/(v + B/|a|): equal periods give the plain share of their sum; a period with
    9 times the noise variance counts for less; γ mixes the sum and |M|·p̂."""
    m1, m2 = np.array([30.0, 15.0, 5.0]), np.array([20.0, 20.0, 10.0])
    shares = pooled_margins.shares_update({}, {"a": (m1, 4.0)}, 50.0)
    shares = pooled_margins.shares_update(shares, {"a": (m2, 4.0)}, 50.0)
    assert pooled_margins.weighted_share(shares, "a") == pytest.approx((m1 + m2) / 100)
    noisy = pooled_margins.shares_update({}, {"a": (m1, 4.0)}, 50.0)
    noisy = pooled_margins.shares_update(noisy, {"a": (m2, 36.0)}, 50.0)
    w1, w2 = 2500 / (4 + 50 / 3), 2500 / (36 + 50 / 3)
    assert pooled_margins.weighted_share(noisy, "a") == pytest.approx(
        (w1 * m1 / 50 + w2 * m2 / 50) / (w1 + w2))
    assert pooled_margins.weighted_share(noisy, "b") is None
    sums = {"a": np.array([500.0, 300.0, 200.0]), "b": np.array([1.0, 2.0, 3.0])}
    mixed = pooled_margins.exchangeable_targets(sums, noisy, 0.25)
    share = pooled_margins.weighted_share(noisy, "a")
    assert mixed["a"] == pytest.approx(0.75 * sums["a"] + 0.25 * 1000 * share)
    assert mixed["b"] is sums["b"]                     # never measured: the sum as it is
    # period 1 (no batch estimate yet): the margin's own noisy total stands for B
    first = pooled_margins.shares_update({}, {"a": (m1, 4.0)}, 0.0)
    assert first["a"][-1] == pytest.approx(50 ** 2 / (4 + 50 / 3))


def test_weighted_share_beats_the_plain_sum_when_the_noise_varies():
    """An exchangeable stream, 200 periods of 50 records with shares p over 8 cells,
    Laplace noise of variance 20 per cell (noise above sampling, as at ε = 0.5 in
    batches of 50): the first 20 periods measured with 9 times that variance (k = 3 then
    k = 1).  Over 400 streams the weighted share's mean squared error is below 0.8× the
    plain sum's (0.68× in theory), and with equal noise the two agree to 1 %."""
    rng = np.random.default_rng(9)
    p = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
    errors = {"plain": [], "weighted": [], "plain_equal": [], "weighted_equal": []}
    for _ in range(400):
        for label, early in (("", 9.0), ("_equal", 1.0)):
            shares, total = {}, np.zeros(8)
            for t in range(200):
                v = 20.0 * (early if t < 20 else 1.0)
                m = rng.multinomial(50, p) + rng.laplace(0, np.sqrt(v / 2), 8)
                total += m
                shares = pooled_margins.shares_update(shares, {"a": (m, v)}, 50.0)
            plain = np.clip(total, 0, None) / np.clip(total, 0, None).sum()
            errors["plain" + label].append(np.sum((plain - p) ** 2))
            errors["weighted" + label].append(
                np.sum((pooled_margins.weighted_share(shares, "a") - p) ** 2))
    mse = {k: float(np.mean(v)) for k, v in errors.items()}
    assert mse["weighted"] < 0.8 * mse["plain"], mse
    assert mse["weighted_equal"] == pytest.approx(mse["plain_equal"], rel=0.01), mse
