"""The error bounds a tabular release ships (``accuracy-tTTTT.json``,
:mod:`continual_synth.mechanisms.tabular_accuracy`): their tail bounds against the
distributions they bound, and their coverage on a real table across seeds and periods,
with a planted bug (bounds that leave out the measurement noise) that the coverage test
catches."""
from __future__ import annotations

import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest

from continual_synth.mechanisms import tabular_accuracy as acc
from continual_synth.mechanisms.marginals import (Domain, all_workloads, encode_records,
                                                  workload_histograms)
from continual_synth.mechanisms.samplers import SeededSampler
from continual_synth.mechanisms.synthesizer import period_sampler
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer

#: a real table's attributes whose 6 two-way workloads a period can all measure (k = 6)
ATTRIBUTES = ("region", "female", "collegeed", "racef")
SEEDS = range(5)
PERIODS, BATCH, EPSILON = 20, 100, 1.0


def _laplace_sums(scales_counts, draws, seed):
    sampler = SeededSampler(seed)
    total = np.zeros(draws)
    for scale, count in scales_counts.items():
        total += np.asarray(sampler.discrete_laplace(scale, draws * count),
                            dtype=np.float64).reshape(draws, count).sum(axis=1)
    return total


@pytest.mark.parametrize("terms", [{2.0: 1}, {5.0: 30}, {3.0: 10, 12.0: 4}, {0.4: 50}])
def test_laplace_sum_tail_bounds_the_tail_and_is_not_loose(terms):
    """P(Σ Z > a(δ)) ≤ δ for sums of discrete Laplace draws (200 000 draws: the
    empirical tail at δ = 0.01 has a standard error of 0.0002), and a(δ) is within 3×
    the empirical quantile (Chernoff's slack and the λ grid's union bound), so a bound
    that mistook the scale would fail one side."""
    delta = 0.01
    sums = _laplace_sums(terms, 200_000, seed=7)
    bound = acc.laplace_sum_tail(terms, delta)
    assert np.mean(sums > bound) <= delta
    quantile = np.quantile(sums, 1 - delta)
    assert quantile <= bound <= 3 * quantile


def test_laplace_sum_tail_of_noise_far_below_one_count_is_finite_and_tiny():
    """At ε = 1000 a counter's scale is about 10⁻³: the tail is a tiny number, not NaN."""
    assert 0 <= acc.laplace_sum_tail({1e-4: 10}, 0.01) < 1e-2
    assert math.isfinite(acc.laplace_sum_tail({1e-4: 10, 2.0: 3}, 0.01))


def test_sampling_deviation_bounds_binomial_shares():
    rng = np.random.default_rng(3)
    rows, delta = 400, 0.02
    pi = np.array([0.5, 0.1, 0.01, 0.0])
    shares = rng.multinomial(rows, np.append(pi, 1 - pi.sum()), size=100_000)[:, :4] / rows
    bound = acc.sampling_deviation(pi, rows, delta)
    assert (np.mean(np.abs(shares - pi) > bound, axis=0) <= delta).all()
    assert bound[3] == pytest.approx(2 * math.log(2 / delta) / (3 * rows), rel=1e-9)


def test_workload_bound_is_trivial_without_rows_or_a_positive_total():
    pi, counts = np.array([0.5, 0.5]), np.array([3.0, 4.0])
    assert acc.workload_bound(pi, counts, {1.0: 1}, 0, total=7.0, total_error=2.0) == 1.0
    assert acc.workload_bound(pi, counts, {1.0: 1}, 9, total=-2.0, total_error=2.0) == 1.0
    assert acc.workload_bound(pi, 100 * counts, {1.0: 1}, 900, total=700.0,
                              total_error=20.0) < 0.2


@pytest.fixture(scope="module")
def real_stream():
    from continual_synth.pipelines.examples.example_tables import (
        load_table, make_stream, table_domain)
    full = table_domain()
    domain = Domain({a: full[a] for a in ATTRIBUTES})
    stream = make_stream(load_table(), "randomized", BATCH, seed=0, periods=PERIODS,
                         domain=full).select([*ATTRIBUTES, "period"])
    return domain, encode_records(stream, domain), stream["period"].to_numpy()


def _bounds_and_errors(real_stream, seed):
    """Per (period, measured workload): the true error of the released rows, the stated
    bound, and the planted bug's bound: the distance from the model to the noisy
    measurement alone, without the measurement's noise or the rows' sampling."""
    domain, codes, periods = real_stream
    workloads = all_workloads(domain, 2)
    synthesizer = TabularSynthesizer.create(
        domain=domain, workloads=workloads, epsilon=EPSILON, horizon=PERIODS,
        selections=len(workloads), selection_schedule="fixed", wide_cells=0)
    state = synthesizer.initial_state()
    out = []
    for t in range(1, PERIODS + 1):
        flat = np.concatenate(workload_histograms(codes[periods == t], domain,
                                                  synthesizer.input_workloads))
        state, release = synthesizer.step(state, flat, period_sampler(seed, t))
        rows = release.model.sample(release.size, np.random.default_rng([seed, t]))
        truth = workload_histograms(codes[periods <= t], domain, workloads)
        fake = workload_histograms(rows, domain, workloads)
        released = release.model.probabilities_of(workloads)
        for i, entry in enumerate(release.accuracy["workloads"]):
            if not entry["measured"]:
                continue
            error = np.abs(fake[i] / fake[i].sum() - truth[i] / truth[i].sum()).max()
            counts = state.counter_values[i]
            planted = np.abs(released[i] - counts / counts.sum()).max()
            out.append((error, entry["max_abs_error"], planted))
    return np.array(out)


def test_bounds_cover_the_true_error_on_a_real_table(real_stream):
    """Across 5 seeds × 20 periods × 6 workloads of a real table (CCES), the stated
    bounds hold at least at the stated confidence; the planted bug's do not; and the
    bounds are not vacuous once the stream has grown (a bound of 1 everywhere would hold
    too; on the first periods' few hundred records at ε = 1 they are 1)."""
    results = np.concatenate([_bounds_and_errors(real_stream, seed) for seed in SEEDS])
    assert len(results) == len(SEEDS) * PERIODS * 6   # every workload measured throughout
    errors, bounds, planted = results.T
    assert np.mean(errors <= bounds) >= acc.CONFIDENCE
    assert np.mean(errors <= planted) < acc.CONFIDENCE   # the test has power
    last = bounds.reshape(len(SEEDS), PERIODS, 6)[:, -1]   # 2 000 records by then
    assert np.median(last) < 0.5 and np.median(bounds / errors) < 30


def test_run_writes_accuracy_files_and_evaluate_reports_coverage(tmp_path, real_stream):
    """``tabular run`` publishes one accuracy file per period, listed in the manifest;
    ``evaluate tabular`` checks them against the truth."""
    from continual_synth.pipelines.commands.cli import main
    from continual_synth.pipelines.examples.example_tables import (
        load_table, make_stream, table_domain)
    domain, _, _ = real_stream
    stream = make_stream(load_table(), "randomized", BATCH, seed=0, periods=PERIODS,
                         domain=table_domain()).select([*ATTRIBUTES, "period"])
    pq.write_table(stream, tmp_path / "stream.parquet")
    (tmp_path / "domain.json").write_text(json.dumps(domain.to_dict()))
    assert main(["tabular", "run", "--input", str(tmp_path / "stream.parquet"),
                 "--domain", str(tmp_path / "domain.json"), "--output",
                 str(tmp_path / "rel"), "--epsilon", str(EPSILON), "--horizon", str(PERIODS),
                 "--selections", "6", "--selection-schedule", "fixed", "--wide-cells", "0",
                 "--seed", "2"]) == 0
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    names = [f"accuracy-t{t:04d}.json" for t in range(1, PERIODS + 1)]
    assert manifest["accuracy_files"] == names
    assert all((tmp_path / "rel" / name).is_file() for name in names)
    assert main(["evaluate", "tabular", "--truth", str(tmp_path / "stream.parquet"),
                 "--synthetic", str(tmp_path / "rel"), "--report", str(tmp_path / "rep")]) == 0
    coverage = json.loads((tmp_path / "rep" / "summary.json").read_text())["accuracy_coverage"]
    assert coverage["bounds_checked"] == PERIODS * 6
    assert coverage["share_held"] >= coverage["confidence"] == acc.CONFIDENCE


def test_python_api_release_carries_the_periods_bounds(tmp_path, monkeypatch):
    import pandas as pd
    import continual_synth as cs
    monkeypatch.chdir(tmp_path)
    synth = cs.TabularSynthesizer(domain={"a": ["x", "y"], "b": ["u", "v", "w"]},
                                  epsilon=1.0, horizon=3, seed=1, selections=1,
                                  selection_schedule="fixed", wide_cells=0)
    for period in (1, 2):
        records = pd.DataFrame({"a": ["x", "y"] * 50,
                                "b": ["u", "v", "w", "u"] * 24 + ["vw"[period - 1]] * 4})
        release = synth.step(records)
        [document] = release.accuracy
        assert document["period"] == period
        [entry] = document["workloads"]
        assert entry["measured"] and 0 < entry["max_abs_error"] <= 1
