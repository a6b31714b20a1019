"""``remainder="adaptive"`` of the proposed tabular synthesizer (mechanisms/tabular/remainder.py):
the drift statistic over the pooled one-way margins, the stationary estimate's
James-Stein weight, and the choice between them on streams in random and sorted order."""
import dataclasses

import numpy as np
import pytest

from continual_synth.mechanisms import tabular
from continual_synth.mechanisms.errors import ParameterError
from continual_synth.mechanisms.marginals import all_workloads, workload_histograms
from continual_synth.mechanisms.samplers import SeededSampler
from helpers_tabular import DOMAIN, records

P = np.array([0.45, 0.25, 0.15, 0.1, 0.04, 0.01])


def period_z(margin, variance, batch, share=P):
    """z of one attribute in one period: :func:`tabular._drift_update` from empty sums
    (which hold w·z/κ, w/κ and w, the weight w = min(κ, B))."""
    total, weight, power = tabular._drift_update((0.0, 0.0, 0.0), {"a": share * 1e9},
                                                 {"a": (margin, variance)}, batch)
    null = P.size * variance + batch * (1 - np.sum(P * P))
    kappa = batch ** 2 / null
    assert power == pytest.approx(min(kappa, batch))
    assert weight == pytest.approx(power / kappa)
    return total / weight


@pytest.mark.parametrize("batch,scale", [(200, 0.0), (200, 3.0), (50, 10.0)])
def test_drift_statistic_has_mean_one_on_an_exchangeable_stream(batch, scale):
    """A period's margin drawn as B records from the stream's own margin and measured with
    Laplace noise of per-cell variance v = 2b²: E z = 1 exactly, whatever the share of
    sampling and noise in it (b = 10 at B = 50: noise 200 per cell against sampling ≤ 12).
    4 000 periods; |mean − 1| within 4 standard errors, and the standard error small
    enough that a null missing either term (z ≈ 1.3-30 here) fails."""
    rng = np.random.default_rng(batch + int(scale))
    variance = 2 * scale ** 2
    z = np.array([period_z(rng.multinomial(batch, P) + (rng.laplace(0, scale, P.size)
                                                         if scale else 0.0),
                           variance, batch) for _ in range(4000)])
    se = z.std(ddof=1) / np.sqrt(z.size)
    assert se < 0.05 and abs(z.mean() - 1) < 4 * se, (z.mean(), se)


def pooled_estimate(margins, variance, batch):
    """Δ̂ = Σw(z − 1)/κ / Σw over single-period updates (no discount; Σ(z − 1)/Σκ while
    κ ≤ B), and its standard error."""
    terms = np.array([tabular._drift_update((0.0, 0.0, 0.0), {"a": P * 1e9},
                                            {"a": (m, variance)}, batch) for m in margins])
    excess, power = terms[:, 0] - terms[:, 1], terms[:, 2]
    return excess.sum() / power.sum(), excess.std(ddof=1) * np.sqrt(excess.size) / power.sum()


def test_drift_estimate_is_unbiased_on_an_exchangeable_stream():
    """Periods of 50 records drawn from the stream's own shares, Laplace noise b = 10
    (variance 200 per cell, 4× the sampling): Δ̂ within 4 standard errors of 0 over
    4 000 periods, and the standard error below the shrinkage's full-weight edge."""
    rng = np.random.default_rng(4)
    margins = [rng.multinomial(50, P) + rng.laplace(0, 10.0, P.size) for _ in range(4000)]
    estimate, se = pooled_estimate(margins, 200.0, 50)
    assert se < tabular.EXCHANGEABLE_BELOW / 2 and abs(estimate) < 4 * se, (estimate, se)


@pytest.mark.parametrize("scale", [3.0, 30.0])
def test_drift_estimate_sees_sorted_periods_even_when_the_noise_swamps_them(scale):
    """Periods holding one value only (a stream sorted by the attribute), B = 50:
    E Δ̂ = ‖e − S‖² − (1 − Σ S²)/B (the second term: such a period has no sampling
    spread), 0.985 here, within 4 standard errors over 4 000 noisy periods.  With b = 30
    (variance 1 800 per cell) the mean z is about 1.2 — a rule on z alone would call the
    stream exchangeable — while Δ̂ still sits far above the drifting edge."""
    rng = np.random.default_rng(int(scale))
    sorted_margin = 50.0 * np.eye(P.size)[2]
    variance = 2 * scale ** 2
    margins = [sorted_margin + rng.laplace(0, scale, P.size) for _ in range(4000)]
    estimate, se = pooled_estimate(margins, variance, 50)
    expected = float(np.sum((np.eye(P.size)[2] - P) ** 2)) - (1 - float(np.sum(P * P))) / 50
    assert abs(estimate - expected) < 4 * se, (estimate, expected, se)
    assert estimate > 10 * tabular.DRIFTING_ABOVE
    if scale == 30.0:
        z = np.mean([period_z(m, variance, 50) for m in margins[:500]])
        assert z < 1.5, z


def test_drift_statistic_discounts_old_periods():
    """(Σ γ^age·z, Σ γ^age, Σ γ^age·κ): one update multiplies the old sums by γ =
    DRIFT_DISCOUNT."""
    total, weight, power = tabular._drift_update((10.0, 4.0, 8.0), {"a": P * 1e9}, {}, 200)
    assert (total, weight, power) == pytest.approx(
        (10 * tabular.DRIFT_DISCOUNT, 4 * tabular.DRIFT_DISCOUNT, 8 * tabular.DRIFT_DISCOUNT))


def test_stationary_weight_thresholds():
    lo, hi = tabular.EXCHANGEABLE_BELOW, tabular.DRIFTING_ABOVE
    assert tabular.drift_estimate((0.0, 0.0, 0.0)) is None
    assert tabular.stationary_weight((0.0, 0.0, 0.0)) == 0.0     # nothing scored yet
    # Δ̂ = (Σz − Σ1)/Σκ with Σ1 = 10, Σκ = 100
    assert tabular.stationary_weight((10.0, 10.0, 100.0)) == 1.0
    assert tabular.stationary_weight((10 + 100 * lo, 10.0, 100.0)) == pytest.approx(1.0)
    assert tabular.stationary_weight((10 + 50 * (lo + hi), 10.0, 100.0)) == pytest.approx(0.5)
    assert tabular.stationary_weight((10 + 100 * hi, 10.0, 100.0)) == pytest.approx(0.0)
    assert tabular.stationary_weight((40.0, 10.0, 100.0)) == 0.0


def test_shrunk_share_moves_from_the_imputation_to_the_counter_with_the_evidence():
    """w = max(0, 1 − ν/‖Ĉ − R̂‖²): the imputed share R̂ where the counter agrees with it
    or is noise, the counter's share where it holds many exact records far from R̂."""
    model = np.array([0.25, 0.25, 0.25, 0.25])
    same = 1000 * model
    assert np.allclose(tabular._shrunk_share(same, model, 0.0), model)
    far = np.array([9000.0, 500.0, 400.0, 100.0])
    assert np.allclose(tabular._shrunk_share(far, model, 0.0), far / far.sum(), atol=1e-3)
    noisy = np.array([12.0, 3.0, 9.0, 6.0])                       # 30 records, σ = 20
    assert np.allclose(tabular._shrunk_share(noisy, model, 400.0), model)
    assert np.allclose(tabular._shrunk_share(np.zeros(4), model, 1.0), model)


def test_shrunk_share_beats_both_the_counter_and_the_imputation_on_average():
    """On an exchangeable stream the counter's share is unbiased but noisy and the
    imputed share (here ``model``) exact but biased; with both errors of the same size,
    the James-Stein combination's mean squared error is below 0.9× each (2 000 draws: a
    counter of 400 records of a 12-cell marginal with Laplace noise of variance 50 per
    cell, the imputation off by 0.03 in four cells)."""
    rng = np.random.default_rng(5)
    truth = rng.dirichlet(np.full(12, 2.0))
    model = truth.copy()
    model[:4] += np.array([0.03, -0.03, 0.03, -0.03])
    model = np.clip(model, 1e-6, None)
    model /= model.sum()
    errors = {"counter": [], "model": [], "combined": []}
    for _ in range(2000):
        counter = rng.multinomial(400, truth) + rng.laplace(0, 5.0, 12)
        share = np.maximum(counter, 0) / np.maximum(counter, 0).sum()
        errors["counter"].append(np.sum((share - truth) ** 2))
        errors["model"].append(np.sum((model - truth) ** 2))
        errors["combined"].append(np.sum(
            (tabular._shrunk_share(counter, model, 50.0) - truth) ** 2))
    mse = {k: float(np.mean(v)) for k, v in errors.items()}
    assert mse["combined"] < 0.9 * min(mse["counter"], mse["model"]), mse


def fold(codes, epsilon, remainder="adaptive", seed=0, batch=100, **options):
    """The proposed method (k = 2 of the 15 two-way workloads, ipf fit) over ``codes`` in
    batches: (final state, mean per-cell error of the final model's two-way marginals)."""
    workloads = tuple(all_workloads(DOMAIN, 2))
    periods = codes.shape[0] // batch
    cfg = tabular.TabularConfig(domain=DOMAIN, workloads=workloads, epsilon=epsilon,
                                horizon=periods, selections=2, fit="ipf",
                                remainder=remainder, **options)
    state, sampler = tabular.initial_state(cfg), SeededSampler(seed)
    for t in range(periods):
        hists = workload_histograms(codes[batch * t:batch * (t + 1)], DOMAIN, workloads)
        state, release = tabular.step(cfg, state, hists, sampler)
    truth = workload_histograms(codes, DOMAIN, workloads)
    n = codes.shape[0]
    error = np.mean([np.abs(release.model.probabilities(w) - h / n).mean()
                     for w, h in zip(workloads, truth)])
    return state, error


@pytest.mark.parametrize("epsilon", [1.0, 1e6])
def test_adaptive_remainder_tells_a_random_order_from_a_sorted_one(epsilon):
    """The same 6 000 records in random order: γ = 1 at the last period; sorted by
    (x0, x1): γ = 0 at the last period, and the release within 10 % of the increment
    remainder's (the drift estimate averages over all attributes, so the first periods
    of a stream sorted by two of six may still give γ > 0).  ε = 10^6 (noise free) and
    ε = 1."""
    codes = records()
    shuffled = codes[np.random.default_rng(2).permutation(codes.shape[0])]
    ordered = codes[np.lexsort((codes[:, 1], codes[:, 0]))]
    state, _ = fold(shuffled, epsilon)
    assert tabular.stationary_weight(state.drift) == 1.0, state.drift
    state, _ = fold(ordered, epsilon)
    assert tabular.stationary_weight(state.drift) == 0.0, state.drift
    assert fold(ordered, epsilon)[1] < 1.1 * fold(ordered, epsilon, remainder="increment")[1]


def test_adaptive_remainder_lowers_the_error_of_a_random_order_stream():
    """ε = 2, 60 periods of 100 records in random order, 4 sampler seeds: the mean
    per-cell error of the final model with the adaptive remainder below 0.9× the
    increment remainder's (Adult in random order, batches of 200: 0.83× and 0.77× at
    ε = 1 and 2, 3 seeds, bench/results/tabular_tables_adult_adaptive_notes.md).  The
    selection at a public size estimate (``utility_size``, its default) narrows the gap
    here: it lowers the increment remainder's error more than the adaptive's."""
    codes = records()
    errors = {r: np.mean([fold(codes, 2.0, r, seed)[1] for seed in range(4)])
              for r in ("adaptive", "increment")}
    assert errors["adaptive"] < 0.9 * errors["increment"], errors


def test_saved_states_without_the_drift_statistic_load():
    codes = records()[:800]
    state, _ = fold(codes, 1.0)
    data = state.to_dict()
    assert data["drift"] == list(state.drift)
    del data["drift"]
    assert tabular.TabularState.from_dict(data).drift == (0.0, 0.0, 0.0)


def test_manifest_reports_the_drift_statistic_and_the_weight():
    state, _ = fold(records(), 1.0)
    config = tabular.TabularConfig.from_dict(state.config)
    fields = tabular.manifest_fields(config, state)
    assert fields["remainder"] == "adaptive"
    assert fields["remainder_drift"] == pytest.approx(tabular.drift_estimate(state.drift),
                                                      abs=1e-5)
    assert fields["remainder_stationary_weight"] == 1.0
    # dataclasses.replace, the config's copy API: a config's __dict__ also holds its
    # cached properties once computed, which are no fields of its constructor
    fields = tabular.manifest_fields(dataclasses.replace(config, remainder="increment",
                                                         selection_schedule="fixed",
                                                         unseen_share="carried"), state)
    assert fields["remainder_drift"] is None and fields["remainder_stationary_weight"] is None


def test_current_share_moves_the_carried_share_to_the_model_with_the_weight():
    carried, current = np.array([0.7, 0.2, 0.1]), np.array([0.4, 0.4, 0.2])
    np.testing.assert_allclose(tabular._current_share(carried, current, 0.0), carried)
    np.testing.assert_allclose(tabular._current_share(carried, current, 1.0), current)
    mixed = tabular._current_share(carried, current, 0.25)
    np.testing.assert_allclose(mixed, 0.75 * carried + 0.25 * current)
    assert mixed.sum() == pytest.approx(1.0)


def test_unseen_share_defaults_to_current_with_the_adaptive_remainder_only():
    """``unseen_share``: "current" by default with the adaptive remainder, "carried"
    with the others, under ``--rule paper`` and in a configuration saved before the
    option (which keeps the imputation it was run with)."""
    workloads = tuple(all_workloads(DOMAIN, 2))
    cfg = tabular.TabularConfig(domain=DOMAIN, workloads=workloads, epsilon=1.0, horizon=10)
    assert cfg.unseen_share == "current"
    assert tabular.TabularConfig(domain=DOMAIN, workloads=workloads, epsilon=1.0, horizon=10,
                                 remainder="increment").unseen_share == "carried"
    assert tabular.RULES["paper"]["unseen_share"] == "carried"
    with pytest.raises(ParameterError, match="unseen_share"):
        tabular.TabularConfig(domain=DOMAIN, workloads=workloads, epsilon=1.0, horizon=10,
                              remainder="increment", unseen_share="current")
    old = cfg.to_dict()
    del old["unseen_share"]
    assert tabular.TabularConfig.from_dict(old).unseen_share == "carried"


def test_current_share_changes_only_exchangeable_streams():
    """On a stream in random order (γ = 1) the unseen periods are imputed from the current
    model and the release moves; on one sorted by every attribute (γ = 0) it is the
    carried imputation's, to the last bit (same sampler seed: the imputation spends no
    budget and draws no noise)."""
    codes = records()
    ordered = codes[np.lexsort(codes.T[::-1])]
    for stream, changes in ((codes, True), (ordered, False)):
        states = [fold(stream, 2.0, unseen_share=u)[0] for u in ("current", "carried")]
        models = [s.model.probabilities(tuple(DOMAIN.names[:2])) for s in states]
        assert (not np.allclose(*models, rtol=0, atol=1e-12)) == changes
