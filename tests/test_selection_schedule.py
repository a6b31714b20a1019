"""``selection_schedule="drift"`` of the proposed tabular synthesizer
(mechanisms/tabular/selection.py: :func:`period_selections`, :func:`balanced_selections`): fewer,
quieter selections in periods the drift estimate reads as exchangeable, k on a drifting
stream, and ε spent on each period's records either way."""
import dataclasses
import math

import numpy as np
import pytest

from continual_synth.mechanisms import tabular
from continual_synth.mechanisms.errors import ParameterError
from continual_synth.mechanisms.marginals import all_workloads, workload_histograms
from continual_synth.mechanisms.samplers import SeededSampler
from helpers_tabular import DOMAIN, SIZES, records

WORKLOADS = tuple(all_workloads(DOMAIN, 2))


def config(epsilon=0.5, selections=3, periods=60, **options):
    return tabular.TabularConfig(domain=DOMAIN, workloads=WORKLOADS, epsilon=epsilon,
                                 horizon=periods, selections=selections, **options)


class RecordingSampler(SeededSampler):
    """A seeded sampler that records, per call, the ε of every exponential mechanism and
    the scale of every discrete Laplace draw (the counters' feeds)."""

    def __init__(self, seed):
        super().__init__(seed)
        self.selections, self.scales = [], []

    def exponential_mechanism(self, utilities, epsilon, sensitivity):
        self.selections.append(epsilon)
        return super().exponential_mechanism(utilities, epsilon, sensitivity)

    def discrete_laplace(self, scale, size):
        self.scales.append(scale)
        return super().discrete_laplace(scale, size)


def fold(codes, cfg, batch=100, seed=0):
    """Step ``cfg`` over ``codes`` in batches; per period (k_t, the selections' ε, the
    feeds' discrete Laplace scales)."""
    state, periods = tabular.initial_state(cfg), []
    for t in range(codes.shape[0] // batch):
        sampler = RecordingSampler(seed * 1000 + t)
        hists = workload_histograms(codes[batch * t:batch * (t + 1)], DOMAIN, WORKLOADS)
        state, release = tabular.step(cfg, state, hists, sampler)
        periods.append((len(release.selected), sampler.selections, sampler.scales))
    return state, periods


def test_balanced_selections_is_the_largest_k_whose_noise_is_within_the_sampling():
    """k_bal = the largest k ≥ 1 with 2k²/((1 − s)ε)² ≤ B/|W̄|: at the boundary and just
    past it."""
    cfg = config(epsilon=1.0)
    cells = float(np.mean(cfg.cells))
    per_k = lambda k: 2 * k * k / ((1 - cfg.selection_share) * cfg.epsilon) ** 2 * cells
    for k in (1, 2, 3, 5):
        assert tabular.balanced_selections(cfg, per_k(k) * (1 + 1e-9)) == k
        assert tabular.balanced_selections(cfg, per_k(k + 1) * (1 - 1e-9)) == k
    assert tabular.balanced_selections(cfg, 0.0) == 1
    assert tabular.balanced_selections(cfg, 1e-3) == 1


def test_period_selections_follows_the_stationary_weight():
    """k while γ = 0 (nothing scored yet, or a drifting stream) and under the fixed
    schedule; min(k, k_bal) at γ = 1; ⌈γ·k_bal + (1 − γ)·k⌉ between."""
    cfg = config(epsilon=0.5, selections=5)
    batch = 100.0
    low = tabular.balanced_selections(cfg, batch)
    assert low == 1
    exchangeable, drifting = (10.0, 10.0, 100.0), (40.0, 10.0, 100.0)
    assert tabular.stationary_weight(exchangeable) == 1.0
    assert tabular.stationary_weight(drifting) == 0.0
    assert tabular.period_selections(cfg, (0.0, 0.0, 0.0), batch) == 5
    assert tabular.period_selections(cfg, drifting, batch) == 5
    assert tabular.period_selections(cfg, exchangeable, batch) == 1
    half = (10 + 50 * (tabular.EXCHANGEABLE_BELOW + tabular.DRIFTING_ABOVE), 10.0, 100.0)
    assert tabular.stationary_weight(half) == pytest.approx(0.5)
    assert tabular.period_selections(cfg, half, batch) == 3        # ⌈0.5·1 + 0.5·5⌉
    fixed = config(epsilon=0.5, selections=5, selection_schedule="fixed")
    assert tabular.period_selections(fixed, exchangeable, batch) == 5
    # k_bal above k: k
    assert tabular.period_selections(config(epsilon=50.0, selections=2),
                                     exchangeable, batch) == 2


def test_every_period_spends_epsilon_on_its_records():
    """Random order, ε = 0.5, k = 3, 60 periods of 100: the schedule goes down to k_t = 1
    once the stream reads as exchangeable; in every period the k_t selections spend s·ε/k_t
    each and the k_t counter feeds are discrete Laplace of scale k_t/((1 − s)·ε) (every
    cell of one feed one draw), so the period's records cost s·ε + (1 − s)·ε = ε."""
    codes = records()
    codes = codes[np.random.default_rng(2).permutation(codes.shape[0])]
    cfg = config(epsilon=0.5)
    assert cfg.selection_schedule == "drift"
    s, eps = cfg.selection_share, cfg.epsilon
    _, periods = fold(codes, cfg)
    ks = [k for k, _, _ in periods]
    assert ks[0] == 3 and ks.count(1) >= 20, ks
    for k, selections, scales in periods:
        assert len(selections) == k and selections == pytest.approx([s * eps / k] * k)
        assert len(scales) == k
        assert scales == pytest.approx([k / ((1 - s) * eps)] * k)
        assert sum(selections) + sum(1 / b for b in scales) == pytest.approx(eps)


def test_a_sorted_stream_keeps_k_and_the_fixed_schedule_never_changes_it():
    """The same records sorted by every attribute: the drift estimate reads γ = 0 and the
    last 30 periods make k = 3 selections; under ``fixed`` every period does."""
    codes = records()
    ordered = codes[np.lexsort(codes.T[::-1])]
    _, periods = fold(ordered, config(epsilon=0.5))
    assert [k for k, _, _ in periods[-30:]] == [3] * 30
    shuffled = codes[np.random.default_rng(2).permutation(codes.shape[0])]
    _, periods = fold(shuffled, config(epsilon=0.5, selection_schedule="fixed"))
    assert [k for k, _, _ in periods] == [3] * len(periods)


def test_the_manifest_states_the_schedule_and_the_periods_of_each_k():
    codes = records()
    codes = codes[np.random.default_rng(2).permutation(codes.shape[0])]
    cfg = config(epsilon=0.5)
    state, periods = fold(codes, cfg)
    fields = tabular.manifest_fields(cfg, state)
    assert fields["selection_schedule"] == "drift"
    expected = {}
    for k, _, _ in periods:
        expected[str(k)] = expected.get(str(k), 0) + 1
    assert fields["periods_by_selections"] == expected
    assert "k_t < k" in fields["privacy_statement"]


def test_the_default_schedule_and_where_drift_is_refused():
    """drift by default where the pool's drift estimate and entry shares exist (the
    proposed method, the adaptive remainder with pooled margins, the simple counter, no
    refresh slots); fixed otherwise, and for configurations saved before the option; an
    explicit drift without them is an error naming the option."""
    assert config().selection_schedule == "drift"
    assert config(**tabular.RULES["paper"]).selection_schedule == "fixed"
    assert config(counter="kary").selection_schedule == "fixed"
    assert config(refresh=1).selection_schedule == "fixed"
    assert config(remainder="increment").selection_schedule == "fixed"
    assert config(method="baseline").selection_schedule == "fixed"
    for options in ({"counter": "kary"}, {"remainder": "increment"}, {"margins": "none"}):
        with pytest.raises(ParameterError, match="selection_schedule"):
            config(selection_schedule="drift", **options)
    with pytest.raises(ParameterError, match="selection_schedule"):
        config(selection_schedule="sometimes")
    saved = config().to_dict()
    del saved["selection_schedule"]
    assert tabular.TabularConfig.from_dict(saved).selection_schedule == "fixed"


def test_a_large_batch_raises_k_to_the_balance_up_to_the_ceiling_on_a_drifting_stream():
    """k_bal > k: k_t = min(K, k_bal over the median workload size) while the stream
    reads as drifting (γ = 0), min(k, k_bal over the mean size) while it reads as
    exchangeable, the blend between, and k before the drift estimate has read a
    period; a ceiling of k (a k the user gave) never rises; a small batch keeps k."""
    cfg = config(epsilon=2.0, selections=3, selection_ceiling=12)
    assert np.median(cfg.cells) < np.mean(cfg.cells)
    exchangeable, drifting = (10.0, 10.0, 100.0), (40.0, 10.0, 100.0)
    half = (10 + 50 * (tabular.EXCHANGEABLE_BELOW + tabular.DRIFTING_ABOVE), 10.0, 100.0)
    for batch, want in ((200.0, None), (1000.0, None), (5000.0, 12)):
        balanced = tabular.balanced_selections(cfg, batch)
        high = want or min(12, max(3, tabular.balanced_selections(cfg, batch, np.median)))
        assert tabular.period_selections(cfg, drifting, batch) == high
        assert tabular.period_selections(cfg, (0.0, 0.0, 0.0), batch) == 3
        assert tabular.period_selections(cfg, exchangeable, batch) == min(3, balanced)
        assert tabular.period_selections(cfg, half, batch) == math.ceil(
            0.5 * min(3, balanced) + 0.5 * high)
    assert tabular.balanced_selections(cfg, 1000.0) > 3  # the middle case does rise
    assert tabular.period_selections(cfg, drifting, 50.0) == 3
    fixed_k = config(epsilon=2.0, selections=3)
    assert fixed_k.selection_ceiling == 3
    assert tabular.period_selections(fixed_k, drifting, 5000.0) == 3


def drifting_periods(periods, seed=0, n=2000, sizes=SIZES, copy=0.7):
    """``periods`` batches of ``n`` records from a chain whose maps change every second
    period (a stream the drift estimate reads as drifting)."""
    return [records(100 * seed + t // 2, n, sizes, copy) for t in range(periods)]


def test_raised_periods_still_spend_epsilon_on_their_records():
    """Ten periods of 2 000 records of a drifting stream at ε = 2 with the ceiling 12:
    k = 3 until the drift estimate has read a period (period 7), then k_t = 12, each
    selection at s·ε/k_t and each feed discrete Laplace of scale k_t/((1 − s)·ε): the
    period's records cost ε."""
    codes = np.concatenate(drifting_periods(10))
    cfg = config(epsilon=2.0, periods=10, selection_ceiling=12)
    s, eps = cfg.selection_share, cfg.epsilon
    _, periods = fold(codes, cfg, batch=2000)
    assert [k for k, _, _ in periods] == [3] * 6 + [12] * 4
    for k, selections, scales in periods:
        assert selections == pytest.approx([s * eps / k] * k)
        assert scales == pytest.approx([k / ((1 - s) * eps)] * k)
        assert sum(selections) + sum(1 / b for b in scales) == pytest.approx(eps)


def test_the_default_k_may_rise_and_a_given_k_may_not():
    """``TabularSynthesizer.create``: the default k gets the ceiling
    ``AUTO_SELECTIONS_MAX`` (at most |W|) where the drift schedule applies; a k given,
    the paper's rules and a fixed schedule keep k as the ceiling; a configuration saved
    before the option steps as it did; the manifest states the ceiling."""
    from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer

    def created(**options):
        return TabularSynthesizer.create(domain=DOMAIN, workloads=WORKLOADS, epsilon=2.0,
                                         horizon=10, **options).config
    assert len(WORKLOADS) == 15 and created().selections == 3
    assert created().selection_ceiling == tabular.AUTO_SELECTIONS_MAX
    assert created(selections=3).selection_ceiling == 3
    assert created(selection_schedule="fixed").selection_ceiling == 3
    assert created(**tabular.RULES["paper"]).selection_ceiling == 3
    saved = created().to_dict()
    assert saved["selection_ceiling"] == 12
    assert tabular.TabularConfig.from_dict(saved) == created()
    del saved["selection_ceiling"]
    assert tabular.TabularConfig.from_dict(saved).selection_ceiling == 3
    assert "selection_ceiling" not in created(selections=3).to_dict()
    fields = tabular.manifest_fields(created(), tabular.initial_state(created()))
    assert fields["selection_ceiling"] == 12
    assert "up to k_t = 12" in fields["privacy_statement"]
    for ceiling in (2, 16):
        with pytest.raises(ParameterError, match="selection_ceiling"):
            config(selection_ceiling=ceiling)
    with pytest.raises(ParameterError, match="selection_ceiling"):
        config(selection_ceiling=6, selection_schedule="fixed")


def test_more_selections_on_few_large_periods_of_a_drifting_stream_lower_the_error():
    """The reason for the ceiling: 12 attributes (66 two-way workloads), 12 periods of
    2 000 records from a population that changes every second period, ε = 4.  At k = 3
    most workloads see one period or none, and a period a counter does not see is not
    told by the others; once the drift estimate has read the stream as drifting (period
    7) the balance raises k_t to 12 and the final model's AvgWE falls (measured
    0.57-0.70× on three seeds; GSS 1972-2018: 0.2-0.3× at ε = 4).  Without the raise
    the ratio is 1."""
    from continual_synth.mechanisms.marginals import Domain
    from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
    sizes = (3, 2, 6, 4, 5, 2, 3, 3, 2, 4, 3, 2)
    domain = Domain({f"a{i}": list(range(size)) for i, size in enumerate(sizes)})
    workloads = tuple(all_workloads(domain, 2))

    def final_error(cfg, periods, seed):
        state, ks = tabular.initial_state(cfg), []
        for t, codes in enumerate(periods):
            hists = workload_histograms(codes, domain, cfg.input_workloads)
            state, release = tabular.step(cfg, state, hists, SeededSampler(seed * 1000 + t))
            ks.append(len(release.selected))
        truth = workload_histograms(np.concatenate(periods), domain, workloads)
        return np.mean([np.abs(h / h.sum() - p).mean()
                        for h, p in zip(truth, state.model.probabilities_of(workloads))]), ks

    raised, kept = [], []
    for seed in range(2):
        periods = drifting_periods(12, seed, sizes=sizes, copy=0.6)
        # the raise alone (a release's ``selected`` would also list the workloads wide
        # measurements fed and fitted; tabular_wide_*.md measure those)
        default = TabularSynthesizer.create(domain=domain, workloads=workloads, epsilon=4.0,
                                            horizon=12, wide_cells=0).config
        assert default.selections == 3 and default.selection_ceiling == 12
        error, ks = final_error(default, periods, seed)
        assert ks == [3] * 6 + [12] * 6
        raised.append(error)
        error, ks = final_error(dataclasses.replace(default, selection_ceiling=3), periods,
                                seed)
        assert ks == [3] * 12
        kept.append(error)
    assert np.mean(raised) <= 0.7 * np.mean(kept), (raised, kept)


def test_the_raise_reads_the_median_workload_and_the_lowering_the_mean():
    """Four binary attributes and one of 30 values: six workloads of 4 cells, four of 60
    (median 4, mean 26.4).  On a drifting stream the raise goes to the balance of the
    typical (median) workload, not to that of the mean, which the four large ones set;
    on an exchangeable one k is lowered only as far as the mean's balance allows."""
    from continual_synth.mechanisms.marginals import Domain
    domain = Domain({**{f"b{i}": [0, 1] for i in range(4)}, "wide": list(range(30))})
    cfg = tabular.TabularConfig(domain=domain, workloads=tuple(all_workloads(domain, 2)),
                                epsilon=1.0, horizon=20, selections=3, selection_ceiling=10)
    assert (np.median(cfg.cells), np.mean(cfg.cells)) == (4.0, 26.4)
    batch = 400.0
    by_mean = tabular.balanced_selections(cfg, batch)
    by_median = tabular.balanced_selections(cfg, batch, np.median)
    assert (by_mean, by_median) == (2, 6)   # √(400/26.4/2.47) = 2.5, √(400/4/2.47) = 6.4
    assert tabular.period_selections(cfg, (40.0, 10.0, 100.0), batch) == 6
    assert tabular.period_selections(cfg, (10.0, 10.0, 100.0), batch) == 2
