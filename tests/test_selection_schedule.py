"""``selection_schedule="drift"`` of the proposed tabular synthesizer
(mechanisms/tabular.py: :func:`period_selections`, :func:`balanced_selections`): fewer,
quieter selections in periods the drift estimate reads as exchangeable, k on a drifting
stream, and ε spent on each period's records either way."""
import numpy as np
import pytest

from continual_synth.mechanisms import tabular
from continual_synth.mechanisms.errors import ParameterError
from continual_synth.mechanisms.marginals import all_workloads, workload_histograms
from continual_synth.mechanisms.samplers import SeededSampler
from helpers_tabular import DOMAIN, records

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
