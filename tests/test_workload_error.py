"""The §7.3 metrics (Kumar, Strohmer and Vershynin 2024) on hand-checkable cases."""
import itertools
import math

import numpy as np
import pytest

from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.workload_error import (
    aggregate, average_last, error_metrics, period_histograms, sampling_floor,
    stream_metrics, workload_errors)


def brute_force(true, synthetic, scale="proportion", zero_truth="skip"):
    """The paper's formulas written out with plain Python loops."""
    we, rel = [], []
    for f, g in zip(true, synthetic):
        f, g = [float(v) for v in f], [float(v) for v in g]
        if scale == "proportion":
            nf, ng = sum(f), sum(g)
            f = [v / nf for v in f]
            g = [v / ng if ng else 0.0 for v in g]
        we.append(sum(abs(a - b) for a, b in zip(f, g)) / len(f))
        terms = [abs((a - b) / a) for a, b in zip(f, g) if a > 0]
        rel.append(sum(terms) / (len(terms) if zero_truth == "skip" else len(f)))
    return {"AvgWE": sum(we) / len(we), "MaxWE": max(we),
            "AvgRelWE": sum(rel) / len(rel), "MaxRelWE": max(rel)}


TRUE = [np.array([3, 1, 0, 0]), np.array([2, 2])]
SYNTH = [np.array([2, 2, 0, 0]), np.array([4, 0])]


def test_counts_by_hand():
    # W1: |3-2|,|1-2|,0,0 -> WE 2/4; RelWE (1/3 + 1/1)/2 over the two defined cells.
    # W2: |2-4|,|2-0| -> WE 4/2; RelWE (1 + 1)/2.
    m = error_metrics(TRUE, SYNTH, scale="count")
    assert m["AvgWE"] == pytest.approx((0.5 + 2.0) / 2)
    assert m["MaxWE"] == pytest.approx(2.0)
    assert m["AvgRelWE"] == pytest.approx((2 / 3 + 1.0) / 2)
    assert m["MaxRelWE"] == pytest.approx(1.0)
    e = workload_errors(TRUE, SYNTH, scale="count")
    np.testing.assert_allclose(e["WE"], [0.5, 2.0])
    np.testing.assert_allclose(e["RelWE"], [2 / 3, 1.0])


def test_proportions_by_hand():
    # W1: f = (.75, .25, 0, 0), g = (.5, .5, 0, 0) -> WE .5/4; RelWE (1/3 + 1)/2.
    # W2: f = (.5, .5), g = (1, 0) -> WE 1/2; RelWE 1.
    m = error_metrics(TRUE, SYNTH)
    assert m["AvgWE"] == pytest.approx((0.125 + 0.5) / 2)
    assert m["MaxWE"] == pytest.approx(0.5)
    assert m["AvgRelWE"] == pytest.approx((2 / 3 + 1) / 2)
    assert m["MaxRelWE"] == pytest.approx(1.0)


def test_zero_truth_counts_as_zero_over_all_cells():
    # W1 has two cells with q(f) = 0: (1/3 + 1)/4 instead of /2.
    e = workload_errors(TRUE, SYNTH, scale="count", zero_truth="zero")
    np.testing.assert_allclose(e["RelWE"], [(1 / 3 + 1) / 4, 1.0])


def test_synthetic_mass_on_a_zero_true_cell():
    # q(f) = 0 < q(g): in WE, skipped by RelWE ("skip").
    e = workload_errors([np.array([2, 0])], [np.array([1, 1])], scale="count")
    assert e["WE"][0] == pytest.approx(1.0)
    assert e["RelWE"][0] == pytest.approx(0.5)


@pytest.mark.parametrize("scale", ["proportion", "count"])
@pytest.mark.parametrize("zero_truth", ["skip", "zero"])
def test_matches_brute_force_on_random_histograms(scale, zero_truth):
    rng = np.random.default_rng(7)
    true = [rng.integers(0, 5, size=s) for s in (4, 6, 9, 2)]
    synth = [rng.integers(0, 5, size=s) for s in (4, 6, 9, 2)]
    true[0][0] = 3  # every workload has a positive true cell
    for h in true:
        h[0] += 1
    got = error_metrics(true, synth, scale=scale, zero_truth=zero_truth)
    want = brute_force(true, synth, scale, zero_truth)
    for name in want:
        assert got[name] == pytest.approx(want[name])


@pytest.mark.parametrize("scale", ["proportion", "count"])
def test_zero_error_when_synthetic_equals_truth(scale):
    m = error_metrics(TRUE, [h.copy() for h in TRUE], scale=scale)
    assert m == {"AvgWE": 0.0, "MaxWE": 0.0, "AvgRelWE": 0.0, "MaxRelWE": 0.0}


def test_scale_behaviour():
    big_true = [10 * h for h in TRUE]
    big_synth = [10 * h for h in SYNTH]
    small, big = error_metrics(TRUE, SYNTH), error_metrics(big_true, big_synth)
    for name in small:  # proportions do not see a common scale
        assert big[name] == pytest.approx(small[name])
    small_c = error_metrics(TRUE, SYNTH, scale="count")
    big_c = error_metrics(big_true, big_synth, scale="count")
    assert big_c["AvgWE"] == pytest.approx(10 * small_c["AvgWE"])
    assert big_c["MaxWE"] == pytest.approx(10 * small_c["MaxWE"])
    assert big_c["AvgRelWE"] == pytest.approx(small_c["AvgRelWE"])
    assert big_c["MaxRelWE"] == pytest.approx(small_c["MaxRelWE"])
    # a synthetic table twice as large with the same distribution: no proportion error
    doubled = error_metrics(TRUE, [2 * h for h in TRUE])
    assert doubled["MaxWE"] == 0.0 and doubled["MaxRelWE"] == 0.0
    assert error_metrics(TRUE, [2 * h for h in TRUE], scale="count")["MaxRelWE"] == 1.0


def test_mismatched_workloads_are_refused():
    with pytest.raises(InputError, match="domains do not match"):
        error_metrics(TRUE, [SYNTH[0], np.array([1, 2, 3])])
    with pytest.raises(InputError, match="same workloads"):
        error_metrics(TRUE, SYNTH[:1])
    with pytest.raises(InputError, match="empty"):
        error_metrics([], [])
    with pytest.raises(InputError, match="unknown scale"):
        error_metrics(TRUE, SYNTH, scale="percent")


def test_aggregate_leaves_out_undefined_workloads():
    m = aggregate(np.array([0.1, 0.3]), np.array([np.nan, 0.5]))
    assert m["AvgWE"] == pytest.approx(0.2) and m["MaxWE"] == pytest.approx(0.3)
    assert m["AvgRelWE"] == pytest.approx(0.5) and m["MaxRelWE"] == pytest.approx(0.5)
    assert math.isnan(aggregate(np.array([np.nan]), np.array([np.nan]))["AvgWE"])


def test_period_histograms_count_each_period():
    codes = np.array([[0, 1], [1, 1], [0, 0], [1, 0], [1, 1]])
    periods = np.array([1, 1, 2, 3, 3])
    h01, = period_histograms(codes, periods, 3, (2, 2), [[0, 1]])
    # cells in C order: (0,0) (0,1) (1,0) (1,1)
    np.testing.assert_array_equal(h01, [[0, 1, 0, 1], [1, 0, 0, 0], [0, 0, 1, 1]])
    h0, h1 = period_histograms(codes, periods, 4, (2, 2), [[0], [1]])
    np.testing.assert_array_equal(h0, [[1, 1], [1, 0], [0, 2], [0, 0]])
    np.testing.assert_array_equal(h1, [[0, 2], [1, 0], [1, 1], [0, 0]])
    with pytest.raises(InputError, match="1..2"):
        period_histograms(codes, periods, 2, (2, 2), [[0]])


def test_stream_metrics_cumulate_the_truth():
    # one workload of 2 cells, 3 periods; increments ∇f_t and synthetic tables g_t
    increments = [np.array([[2, 0], [0, 2], [1, 1]])]   # f_t: (2,0) (2,2) (3,3)
    synthetic = [np.array([[1, 1], [2, 2], [4, 2]])]
    out = stream_metrics(increments, synthetic, scale="count")
    # t=1: |2-1|,|0-1| -> WE 1, RelWE 1/2 (one defined cell); t=2: 0; t=3: (1+1)/2, (1/3+1/3)/2
    np.testing.assert_allclose(out["AvgWE"], [1.0, 0.0, 1.0])
    np.testing.assert_allclose(out["MaxRelWE"], [0.5, 0.0, 1 / 3])
    prop = stream_metrics(increments, synthetic)
    # proportions: t=1 f=(1,0) g=(.5,.5) -> WE .5, RelWE .5; t=3 f=(.5,.5) g=(2/3,1/3)
    np.testing.assert_allclose(prop["AvgWE"], [0.5, 0.0, 1 / 6])
    np.testing.assert_allclose(prop["AvgRelWE"], [0.5, 0.0, 1 / 3])
    for t in range(3):  # the same as the one-time metrics on f_t and g_t
        f_t = [increments[0][:t + 1].sum(axis=0)]
        assert prop["MaxWE"][t] == pytest.approx(error_metrics(f_t, [synthetic[0][t]])["MaxWE"])


def test_stream_metrics_undefined_before_any_record():
    out = stream_metrics([np.array([[0, 0], [1, 1]])], [np.array([[0, 0], [1, 1]])])
    assert all(math.isnan(out[name][0]) for name in ("AvgWE", "MaxWE", "AvgRelWE"))
    assert out["AvgWE"][1] == 0.0
    with pytest.raises(InputError, match="periods do not match"):
        stream_metrics([np.zeros((2, 2))], [np.zeros((3, 2))])


def test_average_last():
    assert average_last([5, 1, 2, 3], last=3) == pytest.approx(2.0)
    assert average_last([1.0, float("nan"), 3.0], last=10) == pytest.approx(2.0)
    with pytest.raises(InputError):
        average_last([1.0], last=0)


def test_many_random_streams_match_one_time_metrics():
    rng = np.random.default_rng(3)
    for _ in range(5):
        inc = [rng.integers(0, 3, size=(4, k)) for k in (3, 6)]
        for h in inc:
            h[0, 0] += 1
        syn = [rng.integers(0, 9, size=(4, k)) for k in (3, 6)]
        out = stream_metrics(inc, syn)
        for t, name in itertools.product(range(4), ("AvgWE", "MaxWE", "AvgRelWE", "MaxRelWE")):
            want = brute_force([h[:t + 1].sum(axis=0) for h in inc], [h[t] for h in syn])
            assert out[name][t] == pytest.approx(want[name])


def mean_absolute_deviation(n: int, p: float) -> float:
    """E|X − np| for X ~ Binomial(n, p), exactly (de Moivre):
    2·m·C(n, m)·p^m·(1 − p)^(n − m + 1) with m = ⌊np⌋ + 1."""
    m = math.floor(n * p) + 1
    log_term = (math.lgamma(n + 1) - math.lgamma(m + 1) - math.lgamma(n - m + 1)
                + m * math.log(p) + (n - m + 1) * math.log(1 - p))
    return 2 * m * math.exp(log_term)


@pytest.mark.parametrize("size", [2000, 500])
def test_sampling_floor_matches_the_binomial_mean_absolute_deviation(size):
    """A binary attribute with share p = 0.3 in n = 2000 records: a with-replacement sample
    of ``size`` records has X ~ Binomial(size, p) ones, and the one-way workload's WE is
    |X/size − p| (both cells off by the same amount).  The mean over 400 draws must sit
    within 4 standard errors of de Moivre's exact E|X − size·p|/size."""
    codes = np.zeros((2000, 1), dtype=np.int64)
    codes[:600, 0] = 1
    rng = np.random.default_rng(5)
    draws = [sampling_floor(codes, size, [2], [[0]], rng)["AvgWE"] for _ in range(400)]
    mad = mean_absolute_deviation(size, 0.3) / size
    sd = math.sqrt(0.3 * 0.7 / size - mad ** 2)       # of |X/size − p|
    assert abs(np.mean(draws) - mad) < 4 * sd / math.sqrt(400)
    # a different size is a different floor: it cannot pass for the other's
    other = mean_absolute_deviation(2500 - size, 0.3) / (2500 - size)
    assert abs(np.mean(draws) - other) > 4 * sd / math.sqrt(400)


def test_sampling_floor_takes_the_truth_it_is_given_and_is_nan_without_records():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 3, size=(300, 2))
    truth = period_histograms(codes, np.ones(300, dtype=np.int64), 1, [3, 3], [[0, 1]])
    a = sampling_floor(codes, 300, [3, 3], [[0, 1]], np.random.default_rng(2))
    b = sampling_floor(codes, 300, [3, 3], [[0, 1]], np.random.default_rng(2), truth=truth)
    assert a == b and a["AvgWE"] > 0
    for empty in (sampling_floor(codes[:0], 10, [3, 3], [[0, 1]], rng),
                  sampling_floor(codes, 0, [3, 3], [[0, 1]], rng)):
        assert all(math.isnan(v) for v in empty.values())
