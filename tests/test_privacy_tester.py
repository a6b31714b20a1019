"""Tests of mechanisms/privacy_tester.py: the empirical privacy tester.

* The statistics: Clopper–Pearson bounds against their closed forms and scipy's exact
  binomial interval; the threshold test's coverage on randomized response, whose ε is
  known exactly (P(ε_lb > ε) ≤ α is the tester's guarantee), and its power there.
* Every mechanism family of the CI catalogue (``audit_cases("ci")``: window histogram,
  every counter kind × unit × relation, tabular selection and measurement, PrivHP):
  the lower bound stays at or under the claimed ε, and with the planted bug (noise scale
  halved, :class:`ScaledNoiseSampler`) it exceeds it — the tester can fail.
* Conformance: the vectorised draws are the mechanisms' own law — ``window.step`` and
  ``privhp.release`` make exactly the sampler calls the tester replays, and the tabular
  baseline's step calls the sampler with the config's calibration.
* The seeded sampler, which the audits use, follows the exact law (pmf / cdf) at every
  noise parameter the audits draw with, and agrees with OpenDP's exact sampler.

Fixed seeds make every check deterministic; tolerances are derived (binomial standard
errors, chi-square quantiles at 1e-6).
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from continual_synth.mechanisms import accounting, privacy_tester as pt, privhp, window
from continual_synth.mechanisms.samplers import (
    OpenDPSampler,
    Sampler,
    SeededSampler,
    discrete_gaussian_variance,
    discrete_laplace_variance,
)
from test_samplers import chi_square, discrete_gaussian_pmf, discrete_laplace_pmf

RELEASES = 20_000      # per input and case: the whole file takes ~18 s of CPU
ALPHA = 0.05           # the statistics' own tests
# The family audits run at confidence 1 − 1e-3: several mechanisms are tight (simple and
# block counters, the measurement: ε_lb within 0.1 of ε), so a correct one exceeds its
# claim with probability up to AUDIT_ALPHA under a new seed or sampler stream.
AUDIT_ALPHA = 1e-3
# Claims of the CI catalogue: ρ = 0.5 compared at δ = 1e-2 (ε(ρ, δ) = 2.75) and pure ε = 2.
# At 20 000 releases these keep the planted bug's verdict away from the seed: over six
# seeds of the weakest cases (Honaker ρ, tree ε under replace, the selection, PrivHP)
# the bugged ε_lb exceeded the claim by ≥ 0.38 at α = 0.05, and with the seeds below it
# does by ≥ 0.38 at α = 1e-3; at δ = 1e-3 and ε = 1 some margins were within the
# seed-to-seed spread.
CASES = pt.audit_cases("ci", rho=0.5, delta=1e-2, epsilon=2.0)
IDS = [f"{c.family} | {c.relation}" for c in CASES]


class RecordingSampler(Sampler):
    """Delegates to ``inner`` and records every call: (method, parameters, size)."""

    def __init__(self, inner: Sampler):
        super().__init__(inner.rng)
        self.inner, self.name, self.calls = inner, inner.name, []

    def discrete_gaussian(self, sigma2, size):
        out = self.inner.discrete_gaussian(sigma2, size)
        self.calls.append(("discrete_gaussian", float(sigma2), int(size), out))
        return out

    def discrete_laplace(self, scale, size):
        out = self.inner.discrete_laplace(scale, size)
        self.calls.append(("discrete_laplace", float(scale), int(size), out))
        return out

    def gaussian(self, sigma2, size):
        out = self.inner.gaussian(sigma2, size)
        self.calls.append(("gaussian", float(sigma2), int(size), out))
        return out

    def exponential_mechanism(self, utilities, epsilon, sensitivity):
        out = self.inner.exponential_mechanism(utilities, epsilon, sensitivity)
        self.calls.append(("exponential_mechanism", (float(epsilon), float(sensitivity)),
                           len(utilities), np.asarray(utilities, dtype=float)))
        return out


# ----------------------------------------------------------------- the statistics

@pytest.mark.parametrize("n", [10, 1000])
def test_clopper_pearson_closed_forms_and_scipy(n):
    lo, hi = pt.clopper_pearson(np.array([0, n]), n, ALPHA)
    assert lo[0] == 0.0 and hi[1] == 1.0
    assert hi[0] == pytest.approx(1 - (ALPHA / 2) ** (1 / n), rel=1e-9)
    assert lo[1] == pytest.approx((ALPHA / 2) ** (1 / n), rel=1e-9)
    for k in (1, n // 3, n - 1):
        interval = stats.binomtest(k, n).proportion_ci(1 - ALPHA, method="exact")
        lo, hi = pt.clopper_pearson(k, n, ALPHA)
        assert (float(lo), float(hi)) == pytest.approx((interval.low, interval.high), rel=1e-9)


def test_epsilon_lower_bound_formula():
    n, delta = 1000, 0.01
    p_lo, _ = pt.clopper_pearson(600, n, ALPHA)
    _, q_hi = pt.clopper_pearson(100, n, ALPHA)
    assert float(pt.epsilon_lower_bound(600, 100, n, delta, ALPHA)) == pytest.approx(
        math.log((p_lo - delta) / q_hi))
    assert pt.epsilon_lower_bound(5, 100, n, 0.5, ALPHA) == -np.inf


def randomized_response(epsilon, n, rng):
    """Releases of ε-randomized response on a bit 1 (D) and 0 (D'): exactly ε-DP, and
    ε is attained by the event {output = 1}."""
    keep = math.exp(epsilon) / (1 + math.exp(epsilon))
    return ((rng.random(n) < keep).astype(float), (rng.random(n) >= keep).astype(float))


def test_threshold_test_covers_the_true_epsilon_and_has_power():
    """On randomized response (true ε known) P(ε_lb > ε) ≤ α must hold: over 200 runs the
    exceedance count stays under the binomial(200, α) 1e-6 quantile.  Power: the median
    bound is at least the bound at the expected counts with 4-σ fluctuations."""
    epsilon, n, runs = 1.0, 4000, 200
    rng = np.random.default_rng(5)
    bounds = np.array([pt.threshold_test(*randomized_response(epsilon, n, rng), delta=0.0,
                                         alpha=ALPHA, statistics=("linear",))
                       .epsilon_lower_bound for _ in range(runs)])
    assert (bounds > epsilon).sum() <= stats.binom.ppf(1 - 1e-6, runs, ALPHA)
    half = n - n // 2
    p = math.exp(epsilon) / (1 + math.exp(epsilon))
    sd = math.sqrt(p * (1 - p) / half)
    p_lo, _ = pt.clopper_pearson(round((p - 4 * sd) * half), half, ALPHA)
    _, q_hi = pt.clopper_pearson(round((1 - p + 4 * sd) * half), half, ALPHA)
    assert np.median(bounds) >= math.log(p_lo / q_hi) > 0.4


def test_threshold_test_refuses_bad_arguments():
    x = np.zeros((200, 2))
    with pytest.raises(ValueError, match="statistics"):
        pt.threshold_test(x, x, delta=0, alpha=0.05, statistics=("magic",))
    with pytest.raises(ValueError, match="alpha"):
        pt.threshold_test(x, x, delta=0, alpha=1.5)
    with pytest.raises(ValueError, match="releases"):
        pt.threshold_test(x, x[:150], delta=0, alpha=0.05)
    with pytest.raises(ValueError, match="size"):
        pt.audit_cases("huge")


# -------------------------------------------------------------- the families

def test_catalogue_covers_every_family_and_every_counter_kind_and_unit():
    from continual_synth.mechanisms.counters import counter_kinds

    families = {(c.family, c.relation) for c in CASES}
    for kind in counter_kinds():
        for unit in pt.counter_units(kind):
            for relation in accounting.NEIGHBOR_RELATIONS:
                assert (f"counter {kind} ({unit})", relation) in families
    assert {r for f, r in families if f.startswith("window")} == {"replace", "add-remove"}
    assert {r for f, r in families if f.startswith("PrivHP")} == {"replace", "add-remove"}
    assert ("counter simple (epsilon), entry share 3", "add-remove") in families
    assert any(f.startswith("tabular selection") for f, _ in families)
    assert any(f.startswith("tabular measurement") for f, _ in families)


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_lower_bound_stays_under_the_claim(index):
    case = CASES[index]
    result = pt.run_case(case, SeededSampler([901, index]), RELEASES, AUDIT_ALPHA)
    assert 0 <= result.epsilon_lower_bound <= result.claimed_epsilon, result.to_dict()
    assert not result.refuted


# The one case whose planted bug the CI-sized test does not reliably catch: Honaker's
# counter releases best linear estimates, a lossy post-processing of its noisy nodes, and
# under replace the doubled loss is spread over two bins; at 20 000 releases ε_lb of the
# bugged counter lands between about 1.75 and 2.2 against the claim ε = 2, depending on
# the seed (the benchmark misses it too: 0.90 against ε = 1 at 100 000 releases,
# T = 16).  Not strict: a lucky seed may catch it.
WEAK_POWER = {"counter honaker (epsilon) | replace"}


@pytest.mark.parametrize("index", [
    pytest.param(i, marks=pytest.mark.xfail(reason="weak power: lossy BLUE outputs",
                                            strict=False)) if IDS[i] in WEAK_POWER else i
    for i in range(len(CASES))], ids=IDS)
def test_planted_bug_noise_scale_halved_is_caught(index):
    case = CASES[index]
    buggy = pt.ScaledNoiseSampler(SeededSampler([902, index]), 0.5)
    result = pt.run_case(case, buggy, RELEASES, AUDIT_ALPHA)
    assert result.refuted, result.to_dict()
    assert result.epsilon_lower_bound > result.claimed_epsilon


GAUSSIAN = [i for i, case in enumerate(CASES) if case.gaussian_mechanism]


@pytest.mark.parametrize("index", GAUSSIAN, ids=[IDS[i] for i in GAUSSIAN])
def test_planted_bug_doubled_rho_is_caught_for_continuous_gaussian_counters(index):
    """σ² halved (noise scale × √½) is what ignoring the replace relation's √2 does: 2ρ.
    Against the zCDP conversion (2.75 at ρ = 0.5, δ = 10⁻²) it hid in the conversion's
    slack (an audit: not caught for sqrt-factorisation at 100 000 releases); against
    the exact Gaussian curve (2.32; 2ρ gives 3.71) it is caught.  60 000 releases (≈ 1 s
    each): over two seeds the bugged ε_lb was 2.60-2.97, the correct one 1.77-2.02."""
    case = CASES[index]
    buggy = pt.ScaledNoiseSampler(SeededSampler([903, index]), 2 ** -0.5)
    result = pt.run_case(case, buggy, 60_000, AUDIT_ALPHA)
    assert result.refuted, result.to_dict()


def test_zcdp_claim_is_the_accounting_conversion():
    case = next(c for c in CASES if c.rho is not None and not c.gaussian_mechanism)
    assert case.claimed_epsilon == accounting.zcdp_to_approx_dp(case.rho, case.delta)
    kinds = {c.family.split()[1] for c in CASES if c.gaussian_mechanism}
    assert kinds == {"sqrt-factorisation", "blt"}
    case = CASES[GAUSSIAN[0]]
    assert case.claimed_epsilon == accounting.gaussian_mechanism_epsilon(case.rho, case.delta)
    assert case.claimed_epsilon < accounting.zcdp_to_approx_dp(case.rho, case.delta)


def test_scaled_noise_sampler_scales_every_law():
    """Variances of the bugged draws against the exact variances at the scaled
    parameters (6 standard errors of the second moment, fourth moment ≤ 6·Var² + Var)."""
    n = 100_000
    bugged = pt.ScaledNoiseSampler(SeededSampler(3), 0.5)
    checks = [(bugged.discrete_gaussian(16.0, n), discrete_gaussian_variance(4.0)),
              (bugged.discrete_laplace(6.0, n), discrete_laplace_variance(3.0)),
              (bugged.gaussian(16.0, n), 4.0)]
    for draws, var in checks:
        tolerance = 6 * math.sqrt((6 * var ** 2 + var) / n)
        assert abs(np.mean(np.asarray(draws, float) ** 2) - var) <= tolerance
    # the exponential mechanism at ε/0.5: P(0) for u = (1, 0), Δ = 1, ε = 1 → ε' = 2
    picks = np.array([bugged.exponential_mechanism([1.0, 0.0], 1.0, 1.0) for _ in range(4000)])
    p0 = 1 / (1 + math.exp(-1.0))
    assert abs((picks == 0).mean() - p0) <= 6 * math.sqrt(p0 * (1 - p0) / 4000)
    with pytest.raises(ValueError):
        pt.ScaledNoiseSampler(SeededSampler(1), 0.0)


# ---------------------------------------------------------------- conformance

def test_window_releases_are_the_law_of_window_step():
    """``window.step`` at t = k draws exactly one discrete Gaussian vector of σ² =
    config.noise_variance and |A|^k values, and releases max(C + n_pad + noise, 0) —
    what :func:`window_releases` draws n times at once."""
    config = window.WindowConfig(window=2, horizon=2, rho=0.05, neighbor="replace", n_pad=1)
    histogram = np.array([0, 1, 4, 2])
    sampler = RecordingSampler(SeededSampler(4))
    state, _ = window.step(window.WindowState.initial(config), None, sampler)
    assert sampler.calls == []
    clamped = 0
    for _ in range(200):
        sampler.calls.clear()
        _, release = window.step(state, histogram, sampler)
        [(method, sigma2, size, noise)] = [c for c in sampler.calls]
        assert (method, sigma2, size) == ("discrete_gaussian", config.noise_variance,
                                          config.num_bins)
        expected = np.maximum(histogram + config.n_pad + noise, 0)
        np.testing.assert_array_equal(release.initial_counts, expected)
        clamped += int((histogram + config.n_pad + noise < 0).sum())
    assert clamped > 0   # σ² = 40, n_pad = 1: the clamp at 0 is exercised
    vectorised = pt.window_releases(config, histogram, RecordingSampler(SeededSampler(4)), 3)
    assert vectorised.shape == (3, config.num_bins) and (vectorised >= 0).all()


def test_privhp_noisy_counters_are_the_noise_of_privhp_release():
    """``privhp.release`` draws, in order, discrete Laplace of scale noise_scales()[ℓ] for
    the 2^ℓ counters of every tree level ℓ ≤ L*, then one draw of the sketch scale per
    sketch level for its j·w cells — the calls :func:`privhp_noisy_counters` makes with
    n·size values (the rest of ``release`` is deterministic post-processing)."""
    for neighbor in accounting.NEIGHBOR_RELATIONS:
        config = privhp.PrivHPConfig(epsilon=1.0, dims=1, prune_k=4, depth=4, sketch_width=8,
                                     sketch_depth=2, neighbor=neighbor)
        accumulator = privhp.accumulate(np.random.default_rng(0).random((30, 1)), config)
        in_release = RecordingSampler(SeededSampler(5))
        privhp.release(accumulator, in_release)
        in_tester = RecordingSampler(SeededSampler(5))
        noisy = pt.privhp_noisy_counters(accumulator, in_tester, 7)
        assert [c[:3] for c in in_release.calls] == [
            (m, p, s // 7) for m, p, s, _ in in_tester.calls]
        assert noisy.shape == (7, config.tree_counters + config.sketch_counters)


@pytest.mark.parametrize("rule, sensitivity, expected_epsilon, scale",
                         [("paper", 0.5, 0.5, 2.0), ("aim", 2.0, 0.5, 2.0)])
def test_tabular_baseline_step_calls_the_sampler_with_the_audited_calibration(
        rule, sensitivity, expected_epsilon, scale):
    """One baseline period (Algorithm 2) makes k exponential-mechanism calls with
    (s·ε/k, Δ) — Δ = 1/min|W_i| for the paper's normalised utility, 2 for the AIM-style
    one; s = 1/2, the baseline's share under both rules — and k discrete Laplace calls of
    scale k/((1 − s)·ε) and |W_j| cells: the calibration :func:`selection_case` and
    :func:`measurement_case` audit."""
    from continual_synth.mechanisms import marginals, tabular

    domain = marginals.Domain({"a": (0, 1), "b": (0, 1, 2), "c": (0, 1)})
    config = tabular.TabularConfig(domain, (("a",), ("b",), ("a", "c")), epsilon=2.0,
                                   method="baseline", selections=2, fit="mw",
                                   fit_iterations=5, **tabular.RULES[rule])
    histograms = [np.array([3, 4]), np.array([1, 2, 4]), np.array([1, 2, 2, 2])]
    sampler = RecordingSampler(SeededSampler(6))
    tabular.step(config, tabular.initial_state(config), histograms, sampler)
    selections = [c for c in sampler.calls if c[0] == "exponential_mechanism"]
    measurements = [c for c in sampler.calls if c[0] == "discrete_laplace"]
    assert len(selections) == len(measurements) == 2
    for _, (epsilon, drawn), _, _ in selections:
        assert epsilon == pytest.approx(config.selection_epsilon) and \
            config.selection_epsilon == pytest.approx(expected_epsilon)
        assert drawn == config.utility_sensitivity == sensitivity
    for _, drawn_scale, size, _ in measurements:
        assert drawn_scale == pytest.approx(config.laplace_scale) and \
            config.laplace_scale == pytest.approx(scale)
        assert size in config.cells


def test_tabular_wide_measurement_draws_one_audited_laplace_vector_per_selection():
    """``wide_cells``: each of the proposed method's selections draws one discrete Laplace
    vector of |S_j| cells at the counter entry's scale 1/((1 − s)·ε/k) — the calibration
    :func:`measurement_case` audits for any number of cells (one record is one cell of
    S_j: L1 sensitivity 1) — and the other workloads fed from it draw nothing (their
    entries are projections, post-processing)."""
    from continual_synth.mechanisms import marginals, tabular

    domain = marginals.Domain({"a": (0, 1, 2), "b": (0, 1, 2, 3), "c": (0, 1), "e": (0, 1)})
    workloads = tuple(marginals.all_workloads(domain, 2))
    config = tabular.TabularConfig(domain, workloads, epsilon=2.0, horizon=4, selections=2,
                                   fit="mw", fit_iterations=5, wide_cells=24,
                                   selection_schedule="fixed", coverage="none")
    rng = np.random.default_rng(4)
    codes = np.stack([rng.integers(0, n, 40) for n in domain.sizes], axis=1)
    histograms = marginals.workload_histograms(codes, domain, config.input_workloads)
    sampler = RecordingSampler(SeededSampler(6))
    state, release = tabular.step(config, tabular.initial_state(config), histograms, sampler)
    selections = [c for c in sampler.calls if c[0] == "exponential_mechanism"]
    measurements = [c for c in sampler.calls if c[0] == "discrete_laplace"]
    assert len(selections) == len(measurements) == 2
    assert len(release.selected) > 2          # more workloads fed than measurements drawn
    scale = accounting.laplace_scale(1.0, config.measure_epsilon)
    sizes = {domain.size(config.wide_sets[workloads.index(w)]) for w in release.selected}
    for _, drawn_scale, size, _ in measurements:
        assert drawn_scale == pytest.approx(scale) and size in sizes


# ------------------------------------------------- the seeded sampler's law where used

def _parameters_used():
    """Every (law, parameter) the CI audits draw with, from a recorded small draw of
    every case, with and without the planted bug."""
    used = defaultdict(set)
    for factor in (1.0, 0.5):
        for case in CASES:
            recorder = RecordingSampler(SeededSampler(7))
            case.draw(pt.ScaledNoiseSampler(recorder, factor) if factor != 1 else recorder, 2)
            for method, param, size, values in recorder.calls:
                used[method].add(param if method != "exponential_mechanism"
                                 else (param, tuple(values)))
    return used


USED = _parameters_used()


def test_seeded_discrete_laws_match_the_exact_pmf_at_every_parameter_used():
    """Chi-square goodness of fit (test_samplers' check, level 1e-6) of 100 000 seeded
    draws against the exact pmf at every σ² and scale the audits use."""
    assert USED["discrete_gaussian"] and USED["discrete_laplace"]
    for method, pmf in (("discrete_gaussian", discrete_gaussian_pmf),
                        ("discrete_laplace", discrete_laplace_pmf)):
        for i, param in enumerate(sorted(USED[method])):
            draws = getattr(SeededSampler([8, i]), method)(param, 100_000)
            stat, critical = chi_square(draws, *pmf(param))
            assert stat <= critical, (method, param, stat, critical)


def test_seeded_gaussian_and_selection_match_the_exact_law_where_used():
    for i, sigma2 in enumerate(sorted(USED["gaussian"])):
        draws = SeededSampler([9, i]).gaussian(sigma2, 100_000)
        assert stats.kstest(draws / math.sqrt(sigma2), "norm").pvalue > 1e-6
    for i, ((epsilon, sensitivity), utilities) in enumerate(sorted(USED["exponential_mechanism"])):
        u = np.asarray(utilities)
        exact = np.exp(epsilon * u / (2 * sensitivity))
        exact /= exact.sum()
        sampler = SeededSampler([10, i])
        picks = np.array([sampler.exponential_mechanism(u, epsilon, sensitivity)
                          for _ in range(20_000)])
        stat, critical = chi_square(picks, np.arange(u.size), exact)
        assert stat <= critical, (epsilon, sensitivity, stat, critical)


def test_seeded_and_opendp_samplers_agree_at_the_audited_window_and_privhp_parameters():
    """Two-sample chi-square (seeded vs OpenDP's exact sampler, 20 000 draws each) at the
    window case's σ² and PrivHP's largest scale."""
    opendp = OpenDPSampler()
    for method, param in (("discrete_gaussian", min(USED["discrete_gaussian"])),
                          ("discrete_laplace", max(USED["discrete_laplace"]))):
        a = getattr(SeededSampler(11), method)(param, 20_000)
        b = getattr(opendp, method)(param, 20_000)
        edges = np.unique(np.quantile(np.concatenate([a, b]), np.linspace(0, 1, 21)))
        table = np.array([np.histogram(a, edges)[0], np.histogram(b, edges)[0]])
        table = table[:, table.sum(axis=0) > 0]
        assert stats.chi2_contingency(table)[1] > 1e-6, (method, param)
