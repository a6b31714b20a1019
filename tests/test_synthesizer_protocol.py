"""Every synthesizer implements one protocol (mechanisms/synthesizer.py, ``Synthesizer``):
the conformance test runs the same checks over all of them — window, cumulative, tabular,
PrivHP and continual PrivHP — with their own small statistics."""
from __future__ import annotations

import json

import numpy as np
import pytest

from continual_synth.mechanisms import continual_privhp, privhp
from continual_synth.mechanisms.cumulative import CumulativeConfig
from continual_synth.mechanisms.errors import StateError
from continual_synth.mechanisms.marginals import Domain, all_workloads, workload_histograms
from continual_synth.mechanisms.panel_synthesizers import (CumulativeSynthesizer,
                                                           WindowSynthesizer)
from continual_synth.mechanisms.privhp_synthesizer import (ContinualPrivHPSynthesizer,
                                                           PrivHPSynthesizer)
from continual_synth.mechanisms.synthesizer import (PanelStatistics, Release, Synthesizer,
                                                    period_sampler)
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
from continual_synth.mechanisms.window import WindowConfig

from helpers_panels import markov_codes

T = 3


def panel_statistics(synthesizer, seed):
    """The panel statistics of periods 1..T of a 0/1 panel of 30 people."""
    matrix = markov_codes(30, T, seed=seed)
    counts = synthesizer.panel_statistics(matrix)
    return [PanelStatistics(counts[t], matrix.shape[0]) for t in range(T)]


def tabular_statistics(synthesizer, seed):
    """The workload histograms of T periods of 40 records."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(T):
        codes = np.stack([rng.integers(0, 3, 40), rng.integers(0, 2, 40)], axis=1)
        out.append(np.concatenate(workload_histograms(codes, synthesizer.domain,
                                                      synthesizer.input_workloads)))
    return out


def points_statistics(config, seed, periods, counted=None):
    """PrivHP's exact statistics of ``periods`` periods of 60 points of [0,1]²."""
    rng = np.random.default_rng(seed)
    return [privhp.accumulate(rng.random((60, 2)), config, counted=counted)
            for _ in range(periods)]


def cases():
    window = WindowSynthesizer(WindowConfig(window=2, horizon=T, rho=1.0, alphabet=(0, 1)))
    cumulative = CumulativeSynthesizer(CumulativeConfig(horizon=T, rho=1.0))
    domain = Domain({"a": [0, 1, 2], "b": [0, 1]})
    tabular = TabularSynthesizer.create(domain=domain, workloads=all_workloads(domain, 2),
                                        epsilon=2.0, horizon=T, selections=1)
    one_shot = privhp.PrivHPConfig(dims=2, epsilon=2.0, depth=4, prune_k=4,
                                   sketch_width=16, sketch_depth=2)
    points = PrivHPSynthesizer(one_shot, samples=10)
    continual = ContinualPrivHPSynthesizer(continual_privhp.ContinualPrivHPConfig.create(
        horizon=T, epsilon=2.0, dims=2, depth=4, prune_k=4, sketch_width=16), samples=10)
    return {
        "window": (window, lambda seed: panel_statistics(window, seed)),
        "cumulative": (cumulative, lambda seed: panel_statistics(cumulative, seed)),
        "tabular": (tabular, lambda seed: tabular_statistics(tabular, seed)),
        "privhp": (points, lambda seed: points_statistics(one_shot, seed, 1)),
        "continual-privhp": (continual, lambda seed: points_statistics(
            continual.config.structure, seed, T, continual.config.counted_sketch_levels)),
    }


CASES = cases()


def round_trip(synthesizer, state):
    """``state`` through its serialisation, as a state directory keeps it."""
    data = json.loads(json.dumps(synthesizer.state_to_dict(state), default=lambda a: a.tolist()))
    return synthesizer.state_from_dict(data)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_synthesizer_conforms_to_the_protocol(name):
    synthesizer, statistics_of = CASES[name]
    assert isinstance(synthesizer, Synthesizer) and synthesizer.kind
    horizon = synthesizer.horizon
    statistics = statistics_of(seed=1)
    state = synthesizer.initial_state()
    assert synthesizer.period(state) == 0 and synthesizer.ledger(state).spent == 0
    released, spent = 0, 0.0
    for t, period_statistics in enumerate(statistics, 1):
        with pytest.raises(StateError):  # out of order, before any data
            synthesizer.check_step(state, t + 1)
        synthesizer.check_step(state, t)
        # the same step on the state as saved and read back: the same release and state
        again = round_trip(synthesizer, state)
        state, release = synthesizer.step(state, period_statistics, period_sampler(7, t))
        state_again, release_again = synthesizer.step(again, period_statistics,
                                                      period_sampler(7, t))
        assert synthesizer.state_to_dict(state) == synthesizer.state_to_dict(state_again) \
            if name != "tabular" else \
            json.dumps(synthesizer.state_to_dict(state), default=str, sort_keys=True) == \
            json.dumps(synthesizer.state_to_dict(state_again), default=str, sort_keys=True)
        assert synthesizer.period(state) == t
        if release is not None:
            released += 1
            assert isinstance(release, Release) and release.period == t
            assert type(release_again) is type(release)
        ledger = synthesizer.ledger(state)
        assert spent <= ledger.spent <= ledger.total * (1 + 1e-9)  # never decreases
        assert ledger.spent > 0 or release is None  # a release has a privacy cost
        spent = ledger.spent
        assert "algorithm" in synthesizer.manifest(state)
    assert released >= 1
    if horizon is not None:
        with pytest.raises(StateError):  # past the horizon
            synthesizer.check_step(state, horizon + 1)
    with pytest.raises(ValueError):  # the same error the command line turns into exit 2
        synthesizer.check_step(state, synthesizer.period(state) + 2)


def test_the_panels_population_is_part_of_their_statistics():
    """Algorithm 2 creates its synthetic people from the statistics' population at period
    1 (under replace: exactly n)."""
    synthesizer, statistics_of = CASES["cumulative"]
    first = statistics_of(seed=2)[0]
    state, release = synthesizer.step(synthesizer.initial_state(), first, period_sampler(1, 1))
    assert int(release.initial.sum()) == first.population == 30
