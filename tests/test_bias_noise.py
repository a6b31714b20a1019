"""The noise term of the proposed tabular synthesizer's selection bias
(mechanisms/tabular/selection.py: ``bias_noise``, :func:`tabular.estimate_noise`): the noise a
workload's running estimate would carry after the measurement, on the batch's scale
(``"estimate"``, the default), against the counter sum's own noise in counts
(``"counter"``, the rule of ``--rule paper`` and of states saved before the option)."""
import numpy as np
import pytest

from continual_synth.mechanisms import tabular
from continual_synth.mechanisms.counters import make_counter
from continual_synth.mechanisms.errors import ParameterError
from continual_synth.mechanisms.marginals import all_workloads, workload_histograms
from continual_synth.mechanisms.samplers import SeededSampler
from helpers_tabular import DOMAIN, records

WORKLOADS = tuple(all_workloads(DOMAIN, 2))
BATCH, PERIODS = 50, 120
Z = 6.0  # standard errors


def config(epsilon=1.0, **options):
    return tabular.TabularConfig(domain=DOMAIN, workloads=WORKLOADS, epsilon=epsilon,
                                 horizon=PERIODS, selections=3, **options)


def test_estimate_noise_is_the_running_share_estimates_noise_on_the_batch_scale():
    """A counter holding τ + 1 batches of B records estimates the shares as S̃/|S̃|; on
    the batch's scale (times B) its per-cell error is (S̃ − S)/(τ + 1).  Over 20 000
    coordinates and the schedule's uneven entry shares, that error's standard deviation
    is estimate_noise(σ^next, τ) within 6 standard errors (the standard error of a
    standard deviation, sd·√((κ − 1)/(4n)), at the kurtosis κ = 6 of one Laplace entry,
    the largest); the counter's own σ^next (``"counter"``) is rejected from the second
    entry on."""
    dim = 20_000
    counter = make_counter("simple", None, epsilon=0.45, dim=dim)
    rng, sampler, truth = np.random.default_rng(3), SeededSampler(3), np.zeros(dim)
    for tau, share in enumerate([1.0, 3.0, 1.0, 1.5, 3.0, 3.0]):
        assert counter.time == tau
        before = np.sqrt(counter.next_variance(share))
        stated = tabular.estimate_noise([before], [counter.time])[0]
        z = rng.integers(0, 4, size=dim)
        truth += z
        sd = ((counter.feed(z, sampler, share) - truth) / (tau + 1)).std()
        se = sd * np.sqrt(5 / (4 * dim))
        assert abs(sd - stated) < Z * se, (tau, sd, stated)
        if tau >= 1:
            assert abs(sd - before) > Z * se, (tau, sd, before)


class UtilitySampler(SeededSampler):
    """A seeded sampler that keeps the utilities of every exponential mechanism."""

    def __init__(self, seed, log):
        super().__init__(seed)
        self.log = log

    def exponential_mechanism(self, utilities, epsilon, sensitivity):
        self.log.append(np.max(utilities))
        return super().exponential_mechanism(utilities, epsilon, sensitivity)


def best_utilities(cfg):
    """The largest utility of each selection over 120 periods of 50 chain records."""
    codes, log = records(seed=12, n=BATCH * PERIODS), []
    state = tabular.initial_state(cfg)
    for t in range(PERIODS):
        hists = workload_histograms(codes[BATCH * t:BATCH * (t + 1)], DOMAIN, WORKLOADS)
        state, _ = tabular.step(cfg, state, hists, UtilitySampler(t, log))
    return np.array(log)


@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_late_in_the_stream_the_selection_still_reads_the_batch(epsilon):
    """With the counter's σ in counts the bias of a workload grows as √(τ + 1) with
    its measurements, until no batch can show more: in the last third of 120 periods of
    50 records no workload's utility is positive, and the exponential mechanism picks by
    the bias alone.  With the running estimate's noise the best workload's utility is
    positive in most of those periods: the selection still follows what the batch shows
    against the model.  Both at the target's own size (``utility_size="target"``): a
    public size estimate adds its error to every utility alike, which the draw does not
    see but the sign read here does."""
    estimate = best_utilities(config(epsilon, utility_size="target"))[-40:]
    counter = best_utilities(config(epsilon, bias_noise="counter",
                                    utility_size="target"))[-40:]
    assert np.mean(estimate > 0) >= 0.4, np.mean(estimate > 0)
    assert np.mean(counter > 0) <= 0.1, np.mean(counter > 0)   # "counter": swamped
    assert np.median(estimate) > np.median(counter) + 20


def test_bias_noise_defaults_validation_and_manifest():
    assert config().bias_noise == "estimate"
    baseline = tabular.TabularConfig(domain=DOMAIN, workloads=WORKLOADS, epsilon=1.0,
                                     method="baseline", horizon=PERIODS)
    assert baseline.bias_noise == "counter"
    paper = tabular.TabularConfig(domain=DOMAIN, workloads=WORKLOADS, epsilon=1.0,
                                  horizon=PERIODS, **tabular.RULES["paper"])
    assert paper.bias_noise == "counter"
    with pytest.raises(ParameterError, match="bias_noise"):
        config(bias_noise="cumulative")
    with pytest.raises(ParameterError, match="bias_noise"):
        tabular.TabularConfig(domain=DOMAIN, workloads=WORKLOADS, epsilon=1.0,
                              method="baseline", horizon=PERIODS, bias_noise="estimate")
    # a state saved before the option steps with the rule it was made with
    saved = config().to_dict()
    del saved["bias_noise"], saved["coverage"]   # saved before both options
    assert tabular.TabularConfig.from_dict(saved).bias_noise == "counter"
    assert tabular.TabularConfig.from_dict(config().to_dict()) == config()
    cfg = config()
    assert tabular.manifest_fields(cfg, tabular.initial_state(cfg))["bias_noise"] == "estimate"
