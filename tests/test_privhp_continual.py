"""Continual PrivHP (mechanisms/continual_privhp.py, the continual synthesizer in
mechanisms/privhp_synthesizer.py, pipelines/families/privhp_continual.py).

* Calibration: each level's counter spends ε_ℓ for Δ_ℓ changed cells (Σ_ℓ = ε), and the
  empirical variance of every level's noisy prefix sum at t matches the counter's exact
  variance (chi-square interval over seeded repetitions).
* With T = 1 and the Simple II counter the continual release is one-shot PrivHP's noisy
  counts (same draws) through the least-squares step, then the same growth (same
  emission seed); the least-squares step is the generalised least-squares estimate
  (checked against numpy's solve) and lowers the root's variance to its formula.
* The continual default split is uniform; one-shot's stays sqrt.
* Memory is constant over the stream, ≤ the budget, ≤ the plain continual tree, and
  non-decreasing in prune_k.
* Empirical privacy: the threshold test of mechanisms/privacy_tester.py on a tiny
  continual case stays under ε and refutes a planted calibration bug.
* Jobs: ``privhp run --horizon`` releases byte-identical files to ``init`` + ``step``
  with the same seed; a re-run step spends nothing; bad input exits 2 and leaves the
  state untouched.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal

import numpy as np
import pyarrow as pa
import pyarrow.csv  # noqa: F401
import pyarrow.parquet as pq
import pytest

from continual_synth.mechanisms import continual_privhp as cp
from continual_synth.mechanisms import privacy_tester as pt
from continual_synth.mechanisms import privhp
from continual_synth.mechanisms.counters import make_counter
from continual_synth.mechanisms.errors import ParameterError
from continual_synth.mechanisms.privhp_synthesizer import (ContinualPrivHPSynthesizer,
                                                           PrivHPSynthesizer)
from continual_synth.mechanisms.samplers import SeededSampler
from continual_synth.mechanisms.synthesizer import period_sampler
from continual_synth.pipelines.commands.cli import main
from continual_synth.pipelines.release.lifecycle import NOT_RECORDED
from continual_synth.transforms.files import read_file, write_file
from helpers_panels import refused_before_reading, release_snapshot
from helpers_processes import cli_child

STRUCTURE = dict(epsilon=1.0, dims=2, prune_k=4, depth=8, sketch_width=16, sketch_depth=3)


def clustered(n, seed):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.2, 0.3], [0.7, 0.8]])
    return np.clip(centres[rng.integers(0, 2, n)] + rng.normal(0, 0.02, (n, 2)), 0, 1)


# ------------------------------------------------------------------- calibration


@pytest.mark.parametrize("counter", ["auto", "block", "honaker", "kary", "anchored"])
@pytest.mark.parametrize("neighbor", ["add-remove", "replace"])
@pytest.mark.parametrize("stride", [1, 2, 3])
def test_levels_spend_epsilon_for_their_sensitivity(counter, neighbor, stride):
    config = cp.ContinualPrivHPConfig.create(horizon=12, counter=counter, stride=stride,
                                             **{**STRUCTURE, "neighbor": neighbor})
    s = config.structure
    assert 0 < s.exact_depth < s.depth  # exact and sketch levels both present
    measured = config.measured_levels
    assert s.depth in measured and s.exact_depth in measured
    assert all(b - a <= stride for a, b in zip(measured, measured[1:]))
    if stride == 1:
        assert measured == tuple(range(s.depth + 1))
    factor = 1 if neighbor == "add-remove" else 2
    spent = 0.0
    for level, counter_ in zip(measured, config.new_counters()):
        delta = factor * (1 if level <= s.exact_depth else s.sketch_depth)
        assert counter_.entries_changed == delta == s.sensitivity(level)
        assert counter_.dim == config.level_cells(level)
        # the loss of one changed entry times the Δ_ℓ entries one point changes
        spent += delta * counter_.entry_cost()
        assert delta * counter_.entry_cost() == pytest.approx(config.level_epsilons()[level],
                                                              rel=1e-9)
    assert spent == pytest.approx(1.0, rel=1e-9)
    accounting = config.accounting()
    assert accounting["privacy_level"] == "event-level"
    assert [lv["l1_sensitivity"] for lv in accounting["levels"]] == [
        s.sensitivity(l) for l in range(s.depth + 1)]
    assert [lv["level"] for lv in accounting["levels"] if lv["measured"]] == list(measured)
    assert sum(lv["epsilon"] for lv in accounting["levels"]) == pytest.approx(1.0, rel=1e-9)


def test_auto_counter_is_the_kary_choice():
    assert cp.resolve_counter("auto", 50) == ("simple", {})  # best arity > T: one level
    kind, options = cp.resolve_counter("auto", 5000)
    assert kind == "kary" and options["arity"] >= 2
    with pytest.raises(ParameterError, match="counter"):
        cp.resolve_counter("tre", 10)
    block = cp.ContinualPrivHPConfig.create(horizon=50, counter="block",
                                            counter_options={"block_size": 25}, **STRUCTURE)
    assert block.new_counters()[0].block_size == 25 and block.words_per_cell == 3
    assert cp.ContinualPrivHPConfig.from_dict(block.to_dict()) == block
    with pytest.raises(ParameterError, match="explicit counter"):
        cp.ContinualPrivHPConfig.create(horizon=50, counter_options={"block_size": 5},
                                        **STRUCTURE)
    with pytest.raises(ValueError, match="option"):
        cp.ContinualPrivHPConfig.create(horizon=50, counter="block",
                                        counter_options={"blocksize": 5}, **STRUCTURE)


@pytest.mark.parametrize("counter", ["simple", "block", "anchored"])
def test_noisy_prefix_sums_have_the_counters_variance(counter):
    """200 seeded repetitions of a 6-period stream: at every period and level the
    empirical variance of S̃_ℓ^t − S_ℓ^t over all cells and repetitions is within 4.5
    standard errors of the counter's exact variance (cells are independent; the
    standard error of a sample variance is √((m4 − s⁴)/m): Laplace sums are
    heavy-tailed, a Gaussian chi-square interval would be too narrow)."""
    config = cp.ContinualPrivHPConfig.create(horizon=6, counter=counter,
                                             **{**STRUCTURE, "depth": 5, "sketch_width": 4})
    s = config.structure
    levels = config.measured_levels
    assert len(levels) < s.depth + 1  # the default stride leaves levels out

    def entries(period):
        return [period.level_counts(l) if l <= s.exact_depth else
                period.sketches[l - s.exact_depth - 1].ravel() for l in levels]

    periods = [privhp.accumulate(clustered(300, t), s) for t in range(6)]
    truth = np.cumsum([np.concatenate(entries(p)) for p in periods], axis=0)
    reps = 200
    errors = np.zeros((reps, 6, truth.shape[1]))
    for rep in range(reps):
        counters = config.new_counters()
        sampler = SeededSampler(rep)
        for t, period in enumerate(periods):
            sums = [c.feed(entry, sampler) for c, entry in zip(counters, entries(period))]
            errors[rep, t] = np.concatenate(sums) - truth[t]
    start = 0
    for level, counter_ in zip(levels, config.new_counters()):
        cells = config.level_cells(level)
        for t in range(6):
            sample = errors[:, t, start:start + cells].ravel()
            expected = counter_.variance(t + 1)
            centred = sample - sample.mean()
            se = np.sqrt((np.mean(centred ** 4) - np.mean(centred ** 2) ** 2) / sample.size)
            assert abs(sample.var(ddof=1) - expected) <= 4.5 * se, (level, t, expected)
            assert se < 0.25 * expected  # the test has power
            assert abs(sample.mean()) < 5 * np.sqrt(expected / sample.size)
        start += cells


def test_horizon_one_with_simple_ii_is_one_shot_privhp_then_least_squares():
    config = cp.ContinualPrivHPConfig.create(horizon=1, counter="simple", stride=1,
                                             **STRUCTURE)
    s = config.structure
    assert s.budget_split == "uniform"
    points = clustered(3000, 7)
    acc = privhp.accumulate(points, s)
    continual = ContinualPrivHPSynthesizer(config, 100)
    one_shot = PrivHPSynthesizer(s, 100)
    _, a = continual.step(continual.initial_state(), acc, period_sampler(3, 1))
    _, b = one_shot.step(one_shot.initial_state(), acc, period_sampler(3, 1))
    assert a.emission_seed == b.emission_seed
    # one-shot's draws, in its order, through the least-squares step
    expected = privhp.release(acc.copy(), period_sampler(3, 1), least_squares=True).tree
    # without the step the trees differ (the step is not a no-op here)
    assert not all(np.array_equal(x, y) for x, y in zip(a.tree.counts, b.tree.counts))


def test_least_squares_tree_is_the_weighted_least_squares_estimate():
    levels, rng = 4, np.random.default_rng(5)
    variances = np.array([9.0, 4.0, 1.0, 2.5, 0.5])
    nodes = 2 ** (levels + 1) - 1
    x = np.concatenate([rng.normal(0, 20, nodes), [7.0, -3.0]])  # two entries beyond
    design = np.zeros((nodes, 2 ** levels))  # node × leaf: which leaves a node sums
    for level in range(levels + 1):
        for theta in range(2 ** level):
            width = 2 ** (levels - level)
            design[2 ** level - 1 + theta, theta * width:(theta + 1) * width] = 1.0
    weights = 1.0 / np.repeat(variances, 2 ** np.arange(levels + 1))
    gram = design.T @ (weights[:, None] * design)
    leaves = np.linalg.solve(gram, design.T @ (weights * x[:nodes]))
    out = privhp.least_squares_tree(x, variances, levels)
    np.testing.assert_allclose(out[:nodes], design @ leaves, rtol=1e-10, atol=1e-9)
    np.testing.assert_array_equal(out[nodes:], [7.0, -3.0])
    # the root's variance: the formula u_0 = (design gram inverse) and by simulation
    root_var = float(np.linalg.inv(gram).sum())
    noise = rng.normal(size=(20000, nodes)) * np.sqrt(np.repeat(variances,
                                                                2 ** np.arange(levels + 1)))
    roots = np.array([privhp.least_squares_tree(e, variances, levels)[0] for e in noise])
    assert abs(roots.var() / root_var - 1) < 4 * np.sqrt(2 / roots.size)
    assert root_var < 0.5 * variances[0]  # the children's evidence halves it at least


def test_a_configuration_saved_before_the_stride_counts_every_level():
    """States written before ``stride`` existed have no such key: they keep counters on
    every level (the layout their counters were created for); new ones default to 2
    with two-row sketches, and the stride round-trips."""
    config = cp.ContinualPrivHPConfig.create(horizon=5, **{**STRUCTURE, "sketch_depth": None})
    assert config.stride == cp.DEFAULT_STRIDE == 2 and config.structure.sketch_depth == 2
    saved = config.to_dict()
    assert cp.ContinualPrivHPConfig.from_dict(saved) == config
    del saved["stride"]
    old = cp.ContinualPrivHPConfig.from_dict(saved)
    assert old.stride == 1 and old.measured_levels == tuple(range(old.structure.depth + 1))
    assert len(old.new_counters()) == old.structure.depth + 1
    with pytest.raises(ParameterError, match="stride"):
        cp.ContinualPrivHPConfig.create(horizon=5, stride=0, **STRUCTURE)
    with pytest.raises(ParameterError, match="more than the depth"):
        cp.ContinualPrivHPConfig.create(horizon=5, stride=9, **STRUCTURE)
    # explicit per-level ε: every level measured (stride 1 by default, any other refused)
    explicit = {**STRUCTURE, "level_epsilons": (0.5,) + (0.0625,) * 8}
    assert cp.ContinualPrivHPConfig.create(horizon=5, **explicit).stride == 1
    with pytest.raises(ParameterError, match="level-stride 1"):
        cp.ContinualPrivHPConfig.create(horizon=5, stride=2, **explicit)


def test_least_squares_tree_with_unmeasured_levels_is_the_measured_levels_estimate():
    """Levels of infinite variance (continual PrivHP's ``stride``) carry no evidence: the
    estimate is the generalised least-squares fit to the measured levels only (numpy's
    solve), and the deepest level must be measured."""
    levels, rng = 5, np.random.default_rng(11)
    variances = np.array([4.0, np.inf, 2.0, np.inf, np.inf, 1.5])
    nodes = 2 ** (levels + 1) - 1
    x = rng.normal(0, 20, nodes)
    design = np.zeros((nodes, 2 ** levels))
    for level in range(levels + 1):
        for theta in range(2 ** level):
            width = 2 ** (levels - level)
            design[2 ** level - 1 + theta, theta * width:(theta + 1) * width] = 1.0
    per_node = np.repeat(variances, 2 ** np.arange(levels + 1))
    rows = np.isfinite(per_node)
    weights = 1.0 / per_node[rows]
    gram = design[rows].T @ (weights[:, None] * design[rows])
    leaves = np.linalg.solve(gram, design[rows].T @ (weights * x[rows]))
    np.testing.assert_allclose(privhp.least_squares_tree(x, variances, levels),
                               design @ leaves, rtol=1e-10, atol=1e-9)
    with pytest.raises(ValueError, match="deepest"):
        privhp.least_squares_tree(x, [1.0] * levels + [np.inf], levels)


def test_levels_without_counters_are_sums_of_their_children():
    """``noisy_structure``: an exact level without counters holds its children's sums, a
    sketch level without counters estimates a node by its two children's estimates."""
    config = cp.ContinualPrivHPConfig.create(horizon=3, stride=2,
                                             **{**STRUCTURE, "depth": 9, "sketch_width": 8})
    s = config.structure
    assert s.exact_depth == 4 and config.measured_levels == (0, 2, 4, 5, 7, 9)
    rng = np.random.default_rng(3)
    sums = {level: rng.normal(0, 5, config.level_cells(level))
            for level in config.measured_levels}
    tree, sketches = cp.noisy_structure(config, sums)
    for level in (1, 3):
        below = tree[2 ** (level + 1) - 1: 2 ** (level + 2) - 1]
        np.testing.assert_allclose(tree[2 ** level - 1: 2 ** (level + 1) - 1],
                                   below[0::2] + below[1::2])
    keys = np.arange(2 ** 6, dtype=np.uint64)
    measured = {level: s.sketch(level, sums[level].reshape(s.sketch_depth, s.sketch_width))
                for level in (7, 9)}
    np.testing.assert_allclose(sketches[8 - 5].estimate(keys[:2 ** 8 // 4]),
                               measured[9].estimate(2 * keys[:64])
                               + measured[9].estimate(2 * keys[:64] + np.uint64(1)))
    np.testing.assert_allclose(  # level 6 from level 7, measured
        sketches[6 - 5].estimate(keys), measured[7].estimate(2 * keys)
        + measured[7].estimate(2 * keys + np.uint64(1)))
    np.testing.assert_allclose(sketches[7 - 5].table, measured[7].table)


def test_the_pass_fills_only_the_measured_sketch_levels():
    """A period's pass skips the count-min updates of the sketch levels without counters
    (their tables stay zero) and releases exactly what the full pass releases; a pass
    that left out a measured level is refused."""
    config = cp.ContinualPrivHPConfig.create(horizon=3, **{**STRUCTURE, "depth": 9,
                                                            "sketch_width": 8})
    s = config.structure
    assert config.counted_sketch_levels == (5, 7, 9) and list(s.sketch_levels) == [5, 6, 7, 8, 9]
    points = [clustered(400, t) for t in range(3)]
    releases = []
    for counted in (None, config.counted_sketch_levels):
        synthesizer = ContinualPrivHPSynthesizer(config, 50)
        state = synthesizer.initial_state()
        for t, part in enumerate(points, start=1):
            acc = privhp.accumulate(part, s, counted=counted)
            if counted is not None:
                assert not acc.sketches[[1, 3]].any() and acc.sketches[[0, 2, 4]].any()
            state, release = synthesizer.step(state, acc, period_sampler(2, t))
        releases.append(release)
    for a, b in zip(releases[0].tree.counts, releases[1].tree.counts):
        np.testing.assert_array_equal(a, b)
    short = privhp.accumulate(points[0], s, counted=(5, 7))
    with pytest.raises(ValueError, match="left out a measured sketch level"):
        cp.feed(config, config.new_counters(), short, period_sampler(2, 1))


def test_without_noise_every_stride_grows_the_same_tree():
    """Given the true counts of its measured levels (what the counters estimate), every
    stride reconstructs the levels between exactly and grows the tree of counters on
    every level: exact levels through the least-squares step, which returns consistent
    counts unchanged whatever the variances."""
    accumulator = privhp.accumulate(clustered(2000, 4), cp.ContinualPrivHPConfig.create(
        horizon=2, stride=1, **{**STRUCTURE, "sketch_width": 1024}).structure)
    trees = []
    for stride in (1, 2, 3):
        config = cp.ContinualPrivHPConfig.create(horizon=2, stride=stride,
                                                 **{**STRUCTURE, "sketch_width": 1024})
        s = config.structure
        assert s.exact_depth == s.depth and accumulator.config == s
        sums = {level: accumulator.level_counts(level).astype(float)
                for level in config.measured_levels}
        tree, sketches = cp.noisy_structure(config, sums)
        np.testing.assert_array_equal(tree, accumulator.tree)
        variances = [float(level + 1) if level in sums else np.inf
                     for level in range(s.exact_depth + 1)]
        tree = privhp.least_squares_tree(tree, variances, s.exact_depth)
        np.testing.assert_allclose(tree, accumulator.tree, rtol=1e-12, atol=1e-9,
                                   equal_nan=False)
        trees.append(privhp.grow(s, tree, sketches))
    for tree in trees[1:]:
        for a, b in zip(trees[0].counts, tree.counts):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9, equal_nan=False)
        assert all(np.array_equal(a, b) for a, b in zip(trees[0].thetas, tree.thetas))


# ------------------------------------------------------------------------- memory


def test_memory_is_flat_bounded_and_monotone_in_prune_k():
    config = cp.ContinualPrivHPConfig.create(horizon=20, counter="block", memory=6000,
                                             **{**STRUCTURE, "depth": 12})
    assert config.words_per_cell == 3
    assert config.memory_words <= 6000
    assert config.memory_words <= 3 * (2 ** 13 - 1)  # the plain continual tree
    synthesizer = ContinualPrivHPSynthesizer(config, 10)
    state = synthesizer.initial_state()
    sizes = []
    for t in range(1, 21):
        acc = privhp.accumulate(clustered(50 * t, t), config.structure)
        state, _ = synthesizer.step(state, acc, period_sampler(1, t))
        sizes.append(sum(np.asarray(v).size for c in state.counters
                         for v in c._state().values()))
    assert sizes == [config.memory_words] * 20
    used = [cp.ContinualPrivHPConfig.create(horizon=20, counter="block", memory=6000,
                                            **{**STRUCTURE, "depth": 12, "prune_k": k}
                                            ).memory_words for k in (1, 4, 16, 64, 256)]
    assert used == sorted(used) and max(used) <= 6000
    with pytest.raises(ParameterError, match="memory"):
        cp.ContinualPrivHPConfig.create(horizon=20, counter="block", memory=60,
                                        **{**STRUCTURE, "depth": 12})


def test_the_release_follows_the_stream():
    """After each period the synthetic points follow all the points so far: the second
    cluster appears only from period 3 on, and its share grows."""
    config = cp.ContinualPrivHPConfig.create(horizon=4, **{**STRUCTURE, "depth": 10})
    synthesizer = ContinualPrivHPSynthesizer(config, 4000)
    state = synthesizer.initial_state()
    rng = np.random.default_rng(0)
    shares = []
    for t in range(1, 5):
        centre = [0.2, 0.3] if t <= 2 else [0.7, 0.8]
        points = np.clip(centre + rng.normal(0, 0.02, (5000, 2)), 0, 1)
        state, release = synthesizer.step(state, privhp.accumulate(points, config.structure),
                                          period_sampler(2, t))
        synthetic = privhp.sample_unit(release.tree, 4000, np.random.default_rng(t))
        shares.append(float(np.mean(synthetic[:, 0] > 0.5)))
        assert release.tree.total == pytest.approx(5000 * t, rel=0.05)
    assert shares[0] < 0.05 and shares[1] < 0.05
    assert shares[2] == pytest.approx(1 / 3, abs=0.05)
    assert shares[3] == pytest.approx(1 / 2, abs=0.05)
    assert state.ledger.spent == pytest.approx(1.0)


# --------------------------------------------------------------------------- jobs


def run_cli(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


OPTIONS = ["--columns", "x,y", "--bounds", "0:10,0:10", "--epsilon", "1", "--samples",
           "300", "--depth", "10", "--memory", "2500", "--seed", "9", "--shards", "2"]


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    root = tmp_path_factory.mktemp("continual")
    parts = []
    for t in range(1, 4):
        points = 10 * clustered(800 + 100 * t, 20 + t)
        table = pa.table({"x": points[:, 0], "y": points[:, 1],
                          "period": np.full(len(points), t)})
        write_file(table, str(root / f"period_{t:02d}.parquet"), "parquet")
        parts.append(table)
    write_file(pa.concat_tables(parts), str(root / "all.csv"), "csv")
    return root


def snapshot(directory):
    return {name: open(os.path.join(directory, name), "rb").read()
            for name in sorted(os.listdir(directory)) if not name.startswith(".")}


def step_all(stream, state, out, periods=(1, 2, 3), crash=None):
    """``privhp step`` for each period; with ``crash`` = (period, phase) that period's
    first attempt is killed at the phase and re-run."""
    for t in periods:
        args = ["privhp", "step", "--state", state, "--input",
                str(stream / f"period_{t:02d}.parquet"), "--output", out]
        if crash and crash[0] == t:
            assert _killed_step(args, crash[1])
        code, stdout, err = run_cli(args)
        assert code == 0, err
        assert json.loads(stdout)["period"] == t


@pytest.fixture(scope="module")
def stepped(stream, tmp_path_factory):
    """init + three steps, uninterrupted: (state dir, output dir)."""
    root = tmp_path_factory.mktemp("stepped")
    state, out = str(root / "state"), str(root / "out")
    code, _, err = run_cli(["privhp", "init", "--state", state, "--horizon", "3"] + OPTIONS)
    assert code == 0, err
    step_all(stream, state, out)
    return state, out


def test_bounded_stream_releases_what_init_plus_steps_release(stream, stepped, tmp_path):
    """``privhp stream --watch``: periods landing out of order (3, then 1, then 2) are
    released in order through the same write-ahead step: the release and the ledger
    equal init + steps for the same seed."""
    import shutil
    watched, state, out = tmp_path / "landing", str(tmp_path / "state"), str(tmp_path / "out")
    watched.mkdir()
    for t in (3, 1, 2):
        shutil.copy(stream / f"period_{t:02d}.parquet", watched / f"period_{t:02d}.parquet")
    code, stdout, err = run_cli(["privhp", "stream", "--watch", str(watched), "--state", state,
                                 "--output", out, "--horizon", "3", "--until-period", "3",
                                 "--poll-interval", "0.2"] + OPTIONS)
    assert code == 0, err
    assert release_snapshot(out) == release_snapshot(stepped[1])
    ledger = json.loads(open(os.path.join(out, "manifest.json")).read())
    reference = json.loads(open(os.path.join(stepped[1], "manifest.json")).read())
    assert ledger["epsilon"] == reference["epsilon"]


def test_period_col_of_init_and_stream(stream, stepped, tmp_path):
    """``privhp init`` and ``privhp stream`` take ``--period-col`` as the other
    synthesizers' do: ``stream`` reads a landed file's period from that column when its
    name holds none, a step checks it, and the manifest records it."""
    import shutil
    def renamed(t):
        table = read_file(str(stream / f"period_{t:02d}.parquet"))
        return table.rename_columns(["t" if c == "period" else c for c in table.column_names])
    watched, state, out = tmp_path / "landing", str(tmp_path / "state"), str(tmp_path / "out")
    watched.mkdir()
    for name, t in (("march.parquet", 3), ("january.parquet", 1), ("february.parquet", 2)):
        write_file(renamed(t), str(tmp_path / name), "parquet")
        shutil.move(str(tmp_path / name), str(watched / name))
    code, stdout, err = run_cli(["privhp", "stream", "--watch", str(watched), "--state", state,
                                 "--output", out, "--horizon", "3", "--until-period", "3",
                                 "--poll-interval", "0.2", "--period-col", "t"] + OPTIONS)
    assert code == 0, err
    released, reference = release_snapshot(out), release_snapshot(stepped[1])
    data = [name for name in reference if name.startswith("synthetic-")]
    assert data and all(released[name] == reference[name] for name in data)
    assert json.loads(open(os.path.join(out, "manifest.json")).read())["period_col"] == "t"
    state = str(tmp_path / "state2")
    assert run_cli(["privhp", "init", "--state", state, "--horizon", "3",
                    "--period-col", "t"] + OPTIONS)[0] == 0
    wrong = str(tmp_path / "wrong.parquet")
    write_file(renamed(2), wrong, "parquet")  # period 2's rows given as period 1
    code, _, err = run_cli(["privhp", "step", "--state", state, "--input", wrong,
                            "--output", str(tmp_path / "out2")])
    assert code == 2 and "column 't'" not in err and \
        "row 1 holds period 2, but the next period of this state is 1" in err, err


def test_run_equals_init_plus_steps_and_reruns_spend_nothing(stream, stepped, tmp_path):
    state, out = stepped
    out_run = str(tmp_path / "run")
    before = snapshot(out)
    code, stdout, _ = run_cli(["privhp", "step", "--state", state, "--input",
                               str(stream / "period_03.parquet"), "--output", out])
    assert code == 0 and json.loads(stdout)["status"] == "already-released"
    assert snapshot(out) == before
    code, _, err = run_cli(["privhp", "run", "--input", str(stream / "all.csv"),
                            "--output", out_run, "--horizon", "3"] + OPTIONS)
    assert code == 0, err
    stepped_files, ran = snapshot(out), snapshot(out_run)
    data = [n for n in stepped_files if n.startswith("synthetic-")]
    assert len(data) == 6 and data == [n for n in ran if n.startswith("synthetic-")]
    assert all(stepped_files[n] == ran[n] for n in data)
    manifest = json.loads(stepped_files["manifest.json"])
    assert manifest["periods_released"] == [1, 2, 3] and manifest["epsilon_spent"] == 1.0
    # what run records of the period column and T, the incremental manifest records too
    # (not absent, read as null)
    ran_manifest = json.loads(ran["manifest.json"])
    assert ran_manifest["horizon_source"] == "--horizon" and ran_manifest["period_col"] == "period"
    for key in ("period_col", "horizon_source"):
        assert manifest[key] == ran_manifest[key]
    assert manifest["privacy_level"] == "event-level"
    assert manifest["memory"]["budget"] == 2500
    assert manifest["memory"]["counters_used"] <= 2500
    assert manifest["counter"]["kind"] == "simple"
    assert manifest["stride"] == 2 and manifest["parameters"]["sketch_depth"] == 2
    measured = [lv["level"] for lv in manifest["levels"] if lv["measured"]]
    assert measured == manifest["measured_levels"] and 10 in measured
    assert sum(lv["epsilon"] for lv in manifest["levels"]) == pytest.approx(1.0)


def test_a_state_of_an_earlier_version_says_not_recorded(stream, tmp_path):
    """A state saved before the period column and the horizon's source were recorded
    still steps, its manifest says "not recorded", and ``init --exists-ok`` with the
    options it was created with keeps it (the missing settings are not a difference)."""
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    init = ["privhp", "init", "--state", state, "--horizon", "3"] + OPTIONS
    assert run_cli(init)[0] == 0
    version = os.path.join(state, "versions", "v000000.json")
    saved = json.loads(open(version).read())
    for key in ("period_col", "horizon_source"):
        del saved[key]
    with open(version, "w") as handle:
        json.dump(saved, handle)
    code, stdout, err = run_cli(init + ["--exists-ok"])
    assert code == 0, err
    step_all(stream, state, out, periods=(1,))
    manifest = json.loads(open(os.path.join(out, "manifest.json")).read())
    assert manifest["period_col"] == manifest["horizon_source"] == NOT_RECORDED


def test_level_stride_option(tmp_path):
    """``--level-stride`` reaches the configuration; one-shot PrivHP refuses it."""
    state = str(tmp_path / "state")
    code, _, err = run_cli(["privhp", "init", "--state", state, "--horizon", "3",
                            "--level-stride", "3"] + OPTIONS)
    assert code == 0, err
    saved = json.loads(open(os.path.join(state, "versions", "v000000.json")).read())
    assert saved["config"]["stride"] == 3
    code, _, err = run_cli(["privhp", "run", "--input", "x.csv", "--output",
                            str(tmp_path / "out"), "--level-stride", "2"] + OPTIONS)
    assert code == 2 and "--level-stride applies to continual PrivHP" in err
    with pytest.raises(SystemExit) as exc:  # argparse: "--level-stride must be an integer >= 1"
        run_cli(["privhp", "init", "--state", str(tmp_path / "s2"), "--horizon", "3",
                 "--level-stride", "0"] + OPTIONS)
    assert exc.value.code == 2 and not os.path.exists(tmp_path / "s2")


def test_run_releases_every_period_in_one_pipeline(stream, stepped, tmp_path, monkeypatch):
    """``privhp run --horizon 3`` runs one Beam pipeline for its three releases, not one
    per period (T pipelines would each start the SDK workers again under
    ``--direct_running_mode=multi_processing``, seconds each); the files are the steps'
    and no saved tree is published."""
    import apache_beam as beam
    runs = []
    pipeline_run = beam.Pipeline.run

    def counting_run(self, *args, **kwargs):
        runs.append(self)
        return pipeline_run(self, *args, **kwargs)

    monkeypatch.setattr(beam.Pipeline, "run", counting_run)
    out = str(tmp_path / "run")
    code, _, err = run_cli(["privhp", "run", "--input", str(stream / "all.csv"), "--output",
                            out, "--horizon", "3"] + OPTIONS)
    assert code == 0, err
    assert len(runs) == 1
    stepped_files = snapshot(stepped[1])
    data = sorted(n for n in stepped_files if n.startswith("synthetic-"))
    assert sorted(os.listdir(out)) == sorted(data + ["manifest.json"])
    assert all(open(os.path.join(out, n), "rb").read() == stepped_files[n] for n in data)


def test_run_reads_one_period_at_a_time(stream, stepped, tmp_path, monkeypatch):
    """``privhp run --horizon`` never holds the whole stream: with a counting reader, at
    the release of period t it has read at most the points of periods 1..t plus one
    batch (the input is ordered by period); interleaved periods release the same files;
    a bad point in the last batch exits 2 and publishes nothing."""
    from continual_synth.pipelines.families import privhp_continual
    read, seen = {"points": 0}, []
    file_batches, save_tree = privhp_continual.file_batches, privhp_continual._save_tree

    def counting_batches(path, fmt, columns, batch_rows, *option):
        for offset, table in file_batches(path, fmt, columns, batch_rows, *option):
            if "x" in columns:
                read["points"] += table.num_rows
            yield offset, table

    def noting_release(release, *args):
        seen.append((release.period, read["points"]))
        return save_tree(release, *args)

    monkeypatch.setattr(privhp_continual, "file_batches", counting_batches)
    monkeypatch.setattr(privhp_continual, "_save_tree", noting_release)
    out = str(tmp_path / "ordered")
    code, _, err = run_cli(["privhp", "run", "--input", str(stream / "all.csv"), "--output",
                            out, "--horizon", "3", "--batch-rows", "256"] + OPTIONS)
    assert code == 0, err
    cumulative = np.cumsum([900, 1000, 1100])
    assert [t for t, _ in seen] == [1, 2, 3]
    for t, points in seen:
        assert cumulative[t - 1] <= points <= cumulative[t - 1] + 256, (t, points)
    assert read["points"] == cumulative[-1]
    data = [n for n in snapshot(stepped[1]) if n.startswith("synthetic-")]
    assert {n: snapshot(out)[n] for n in data} == {n: snapshot(stepped[1])[n] for n in data}

    table = pa.concat_tables([pa.Table.from_pandas(pa.csv.read_csv(
        str(stream / "all.csv")).to_pandas().sample(frac=1.0, random_state=1),
        preserve_index=False)])
    write_file(table, str(tmp_path / "shuffled.csv"), "csv")
    out = str(tmp_path / "shuffled")
    code, _, err = run_cli(["privhp", "run", "--input", str(tmp_path / "shuffled.csv"),
                            "--output", out, "--horizon", "3", "--batch-rows", "256"]
                           + OPTIONS)
    assert code == 0, err
    assert {n: snapshot(out)[n] for n in data} == {n: snapshot(stepped[1])[n] for n in data}

    bad = table.to_pandas()
    bad.loc[len(bad) - 1, "x"] = 11.0
    write_file(pa.Table.from_pandas(bad, preserve_index=False), str(tmp_path / "bad.csv"),
               "csv")
    code, _, err = run_cli(["privhp", "run", "--input", str(tmp_path / "bad.csv"),
                            "--output", str(tmp_path / "bad"), "--horizon", "3",
                            "--batch-rows", "256"] + OPTIONS)
    assert code == 2 and "outside the bounds" in err and f"row {len(bad)}" in err, err
    assert not os.path.exists(tmp_path / "bad") or not os.listdir(tmp_path / "bad")


def _killed_step(args, phase):
    """Run the CLI ``args`` in a child process (``helpers_processes``: never a fork of
    this one) killed (SIGKILL) at ``phase``."""
    code, _ = cli_child(args, env={"CONTINUAL_SYNTH_CRASH_AT": phase})
    return code == -signal.SIGKILL


def test_a_step_killed_after_its_commit_then_rerun_releases_the_same_files(
        stream, stepped, tmp_path):
    """kill -9 after period 2's state committed (release pending), then the step again:
    it re-emits from the saved tree without drawing noise, and every file and the
    manifest are byte-identical to the uninterrupted init + steps."""
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert run_cli(["privhp", "init", "--state", state, "--horizon", "3"] + OPTIONS)[0] == 0
    step_all(stream, state, out, crash=(2, "committed"))
    assert release_snapshot(out) == release_snapshot(stepped[1])
    assert not [p for p in os.listdir(out) if p.startswith(".")]


def test_bad_period_input_exits_2_and_leaves_the_state(stream, tmp_path):
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert run_cli(["privhp", "init", "--state", state, "--horizon", "2"] + OPTIONS)[0] == 0
    bad = str(tmp_path / "bad.csv")
    write_file(pa.table({"x": [1.0, 11.0], "y": [1.0, 1.0]}), bad, "csv")
    before = snapshot(os.path.join(state, "versions"))
    code, _, err = run_cli(["privhp", "step", "--state", state, "--input", bad,
                            "--output", out])
    assert code == 2 and "outside the bounds" in err and "row 2" in err
    assert snapshot(os.path.join(state, "versions")) == before
    code, _, err = run_cli(["privhp", "run", "--input", str(stream / "all.csv"),
                            "--output", str(tmp_path / "r"), "--horizon", "2"] + OPTIONS)
    assert code == 2 and "row 1901 holds period 3; periods must be 1..2" in err
    code, _, err = run_cli(["privhp", "run", "--input", str(stream / "all.csv"),
                            "--output", str(tmp_path / "r"), "--counter", "block"] + OPTIONS)
    assert code == 2 and "--horizon" in err


def test_a_steps_errors_say_the_state_fixes_the_columns_and_bounds(stream, tmp_path):
    """``step`` takes no --bounds, --clip or --columns (its state keeps them): its hint
    on a point outside the bounds or a missing column is that a new state is needed,
    where ``run``'s still says which option to give."""
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert run_cli(["privhp", "init", "--state", state, "--horizon", "2"] + OPTIONS)[0] == 0
    outside, missing = str(tmp_path / "outside.csv"), str(tmp_path / "missing.csv")
    write_file(pa.table({"x": [1.0, 11.0], "y": [1.0, 1.0]}), outside, "csv")
    write_file(pa.table({"x": [1.0, 2.0], "z": [1.0, 1.0]}), missing, "csv")
    code, _, err = run_cli(["privhp", "step", "--state", state, "--input", outside,
                            "--output", out])
    assert code == 2 and "outside the bounds" in err and "pass --clip" not in err, err
    assert "the state was made with --bounds 0:10,0:10 and without --clip" in err
    assert "a new state ('privhp init') is needed to change them" in err
    code, _, err = run_cli(["privhp", "step", "--state", state, "--input", missing,
                            "--output", out])
    assert code == 2 and "missing column(s) ['y']" in err and "choose them" not in err, err
    assert "the state was made with --columns x,y" in err and "'privhp init'" in err
    code, _, err = run_cli(["privhp", "run", "--input", outside, "--output",
                            str(tmp_path / "r")] + OPTIONS)
    assert code == 2 and "(widen --bounds or pass --clip)" in err, err
    code, _, err = run_cli(["privhp", "run", "--input", missing, "--output",
                            str(tmp_path / "r")] + OPTIONS)
    assert code == 2 and "(choose them with --columns)" in err, err


@pytest.mark.parametrize("command", ["init", "run", "stream", "job privhp_init",
                                     "job privhp_run"])
def test_a_period_col_among_the_columns_is_refused_before_anything(stream, tmp_path,
                                                                    monkeypatch, command):
    """``--period-col x`` with ``--columns x,y`` would read x as the period and as a
    coordinate.  Guards against init writing a state every step then refusing (or, on a
    file whose x holds 1 everywhere, taking every point at x = 1), and run failing after
    reading the data with a message about the period's type.  Init, run --horizon, stream and
    the job modules exit 2 naming both options, before reading or writing anything."""
    from continual_synth.pipelines.families import privhp_continual
    code, err = refused_before_reading(
        monkeypatch, tmp_path, "privhp", command, str(stream / "all.csv"),
        ["--horizon", "3", "--period-col", "x"] + OPTIONS,
        readers=[(privhp_continual, "period_accumulators")])
    assert code == 2 and "--columns and --period-col must name different columns: both " \
        "name 'x'" in err, err
    assert not (tmp_path / "state").exists() and not (tmp_path / "out").exists()


def tree_snapshot(root):
    """Every file under ``root`` (relative path → bytes)."""
    return {os.path.relpath(os.path.join(folder, name), root):
            open(os.path.join(folder, name), "rb").read()
            for folder, _, names in os.walk(root) for name in names}


def _fifth_row(table, value, type_=None):
    periods = table["period"].to_pylist()
    periods[4] = value
    return table.set_column(table.schema.get_field_index("period"), "period",
                            pa.array(periods, type_ or table["period"].type))


def _as(table, type_, convert=lambda v: v):
    return table.set_column(table.schema.get_field_index("period"), "period",
                            pa.array([convert(v) for v in table["period"].to_pylist()], type_))


# period 2's file, changed: (transform, message); the rule of every step (panel, tabular)
BAD_STEP_PERIODS = {
    "another-period": (lambda t: _fifth_row(t, 99),
                       "row 5 holds period 99, but the next period of this state is 2"),
    "period-0": (lambda t: _fifth_row(t, 0),
                 "row 5 holds period 0, but the next period of this state is 2"),
    "null": (lambda t: _fifth_row(t, None),
             "column 'period' has 1 empty (null) value(s), the first at row 5"),
    "fraction": (lambda t: _fifth_row(_as(t, pa.float64(), float), 1.5),
                 "column 'period' must hold whole-number periods in an integer column, "
                 "found type double"),
    "whole-floats": (lambda t: _as(t, pa.float64(), float),
                     "column 'period' must hold whole-number periods in an integer column, "
                     "found type double"),
    "text": (lambda t: _as(t, pa.string(), str),
             "column 'period' must hold whole-number periods in an integer column, "
             "found type string"),
}


@pytest.mark.parametrize("case", sorted(BAD_STEP_PERIODS))
def test_a_step_checks_its_files_period_column(stream, tmp_path, case):
    """``privhp step`` (and ``privhp stream``, the same job) refuses a period column
    that does not hold the next period, as window, cumulative and tabular steps do; it
    read the points only, and released period 2 from a file whose row 5 said 99."""
    transform, message = BAD_STEP_PERIODS[case]
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert run_cli(["privhp", "init", "--state", state, "--horizon", "3"] + OPTIONS)[0] == 0
    step_all(stream, state, out, periods=(1,))
    bad = str(tmp_path / "period2.parquet")
    write_file(transform(read_file(str(stream / "period_02.parquet"))), bad, "parquet")
    before = tree_snapshot(str(tmp_path))
    code, _, err = run_cli(["privhp", "step", "--state", state, "--input", bad,
                            "--output", out])
    assert code == 2 and f"period2.parquet: {message}" in err, err
    assert tree_snapshot(str(tmp_path)) == before
    # without a period column the file is period 2's points (docs/privhp.md)
    plain = str(tmp_path / "plain.parquet")
    write_file(read_file(str(stream / "period_02.parquet")).drop_columns(["period"]), plain,
               "parquet")
    code, stdout, err = run_cli(["privhp", "step", "--state", state, "--input", plain,
                                 "--output", out])
    assert code == 0 and json.loads(stdout)["period"] == 2, err


def test_run_refuses_a_float_period_column_as_every_synthesizer_does(stream, tmp_path):
    """``privhp run --horizon`` took 2.0 as period 2 where window, cumulative and tabular
    runs and every step refuse a period column that is not of an integer type."""
    floats = str(tmp_path / "floats.parquet")
    table = read_file(str(stream / "all.csv"))
    write_file(_as(table, pa.float64(), float), floats, "parquet")
    code, _, err = run_cli(["privhp", "run", "--input", floats, "--output",
                            str(tmp_path / "r"), "--horizon", "3"] + OPTIONS)
    assert code == 2 and ("floats.parquet: column 'period' must hold whole-number periods in "
                          "an integer column, found type double") in err, err
    assert not os.path.exists(tmp_path / "r")
    nulls = str(tmp_path / "nulls.parquet")
    write_file(_fifth_row(table, None), nulls, "parquet")
    code, _, err = run_cli(["privhp", "run", "--input", nulls, "--output",
                            str(tmp_path / "r"), "--horizon", "3"] + OPTIONS)
    assert code == 2 and ("nulls.parquet: column 'period' has 1 empty (null) value(s), the "
                          "first at row 5") in err, err


def test_continual_manifest_says_where_the_depth_came_from(stream, tmp_path):
    options = [o for o in OPTIONS if o not in ("--depth", "10")] + ["--expected-n", "3000"]
    code, _, err = run_cli(["privhp", "run", "--input", str(stream / "all.csv"), "--output",
                            str(tmp_path / "r"), "--horizon", "3"] + options)
    assert code == 0, err
    manifest = json.loads(open(tmp_path / "r" / "manifest.json").read())
    assert manifest["depth_from"]["expected_n"] == 3000
    assert manifest["parameters"]["depth"] == 12  # round(log2(1 * 3000))
    memory = manifest["memory"]
    assert memory["tree_counters"] + memory["sketch_counters"] == memory["cells"]
    assert memory["counters_used"] == memory["cells"] * memory["words_per_cell"]


def test_a_failed_first_run_leaves_no_output_directory(stream, tmp_path):
    out = tmp_path / "never"
    code, _, err = run_cli(["privhp", "run", "--input", str(stream / "all.csv"),
                            "--output", str(out), "--horizon", "2"] + OPTIONS)
    assert code == 2 and not out.exists()
    code, _, err = run_cli(["privhp", "run", "--input", str(stream / "all.csv"), "--output",
                            str(out), "--horizon", "3", "--period-col", "wave"] + OPTIONS)
    assert code == 2 and "--period-col" in err and not out.exists()


def test_a_period_without_points_steps_as_run_releases_it(stream, tmp_path):
    """A header-only period file is a valid period (the counters advance): init + steps
    release the files ``run --horizon`` releases when the period column skips it; a
    header-only file without the point columns is still refused."""
    table = pa.concat_tables([read_file(str(stream / f"period_{t:02d}.parquet"))
                              for t in (1, 3)])
    whole = str(tmp_path / "gap.parquet")
    write_file(table, whole, "parquet")
    code, _, err = run_cli(["privhp", "run", "--input", whole, "--output",
                            str(tmp_path / "run"), "--horizon", "3"] + OPTIONS)
    assert code == 0, err
    empty = str(tmp_path / "empty.csv")
    write_file(table.slice(0, 0), empty, "csv")
    wrong = str(tmp_path / "wrong.csv")
    write_file(table.slice(0, 0).rename_columns(["x", "z", "period"]), wrong, "csv")
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert run_cli(["privhp", "init", "--state", state, "--horizon", "3"] + OPTIONS)[0] == 0
    for path in (str(stream / "period_01.parquet"), wrong, empty,
                 str(stream / "period_03.parquet")):
        code, _, err = run_cli(["privhp", "step", "--state", state, "--input", path,
                                "--output", out])
        if path == wrong:
            assert code == 2 and "missing column(s) ['y']" in err
        else:
            assert code == 0, err
    stepped, ran = snapshot(out), snapshot(str(tmp_path / "run"))
    data = [n for n in ran if n.startswith("synthetic-")]
    assert len(data) == 6 and all(stepped[n] == ran[n] for n in data)


def test_stream_resumes_a_state_saved_before_the_stride(tmp_path):
    """A state written before ``stride`` existed (no such key) compares equal to the same
    options given now (stride 1, three rows); other options are named field by field."""
    from continual_synth.pipelines.families import privhp_continual
    from continual_synth.pipelines.streaming import stream as stream_jobs
    from continual_synth.pipelines.release.lifecycle import StateError
    state = str(tmp_path / "state")
    old = OPTIONS + ["--level-stride", "1", "--sketch-depth", "3"]
    assert run_cli(["privhp", "init", "--state", state, "--horizon", "3"] + old)[0] == 0
    version = os.path.join(state, "versions", "v000000.json")
    document = json.loads(open(version).read())
    del document["config"]["stride"]
    open(version, "w").write(json.dumps(document))
    job = privhp_continual.ContinualPrivHPJob()
    given = json.loads(json.dumps(document))
    given["config"]["stride"] = 1
    assert stream_jobs.open_state(state, given, job.canonical)["config"] == document["config"]
    given["config"]["stride"] = 2
    with pytest.raises(StateError, match=r"config\.stride: state 1, options 2"):
        stream_jobs.open_state(state, given, job.canonical)


def test_evaluate_a_continual_release_at_one_period(stream, stepped, tmp_path):
    """``evaluate privhp`` reads one period's files (default the last) against the
    truth's rows of periods 1..t."""
    code, stdout, err = run_cli(["evaluate", "privhp", "--truth", str(stream / "all.csv"),
                                 "--synthetic", stepped[1], "--columns", "x,y"])
    assert code == 0, err
    last = json.loads(stdout)
    assert last["period"] == 3 and last["truth_rows"] == "period <= 3"
    assert last["synthetic_points"] == 300 and last["truth_points"] == 900 + 1000 + 1100
    code, stdout, err = run_cli(["evaluate", "privhp", "--truth", str(stream / "all.csv"),
                                 "--synthetic", stepped[1], "--columns", "x,y", "--period", "1"])
    first = json.loads(stdout)
    assert first["period"] == 1 and first["truth_points"] == 900
    code, _, err = run_cli(["evaluate", "privhp", "--truth", str(stream / "all.csv"),
                            "--synthetic", stepped[1], "--columns", "x,y", "--period", "7"])
    assert code == 2 and "holds periods 1..3" in err
    truth = pa.concat_tables([pq.read_table(str(stream / f"period_{t:02d}.parquet"))
                              for t in (1, 2, 3)])
    floats = truth.set_column(2, "period", truth.column("period").cast(pa.float64()))
    write_file(floats, str(tmp_path / "floats.parquet"), "parquet")  # periods 1.0, 2.0, ...
    code, _, err = run_cli(["evaluate", "privhp", "--truth", str(tmp_path / "floats.parquet"),
                            "--synthetic", stepped[1], "--columns", "x,y"])
    assert code == 2 and "integer column, found type double" in err, err


@pytest.mark.parametrize("release, options, said", [
    ("continual", ["--columns", "x,period"], "--columns and --period-col must name "
                                             "different columns: both name 'period'"),
    ("continual", ["--columns", "x,y", "--period-col", "y"],
     "--columns and --period-col must name different columns: both name 'y'"),
    ("continual", ["--columns", "x,x"], "--columns names a column twice: ['x', 'x']"),
    ("one-shot", ["--columns", "y,y"], "--columns names a column twice: ['y', 'y']")])
def test_evaluate_refuses_columns_that_name_one_column_before_reading(
        stream, stepped, tmp_path, monkeypatch, release, options, said):
    """privhp run, init and step refuse a --columns that names a column twice, or a
    --period-col among them (continual PrivHP).  So does evaluate privhp: not the W1 of
    (x, x) against (x, x) with exit 0 for ``--columns x,x``, nor a failure on what it
    read for ``--columns x,period`` or ``--period-col x``; it exits 2 with run's words,
    before reading any points and writing no report (a one-shot release has no period
    column to check)."""
    from continual_synth.pipelines.evaluation import evaluate_privhp
    synthetic = stepped[1]
    if release == "one-shot":
        synthetic = str(tmp_path / "one-shot")
        code, _, err = run_cli(["privhp", "run", "--input", str(stream / "all.csv"),
                                "--output", synthetic] + OPTIONS)
        assert code == 0, err
    for name in ("read_dataset", "read_files", "load_points"):
        monkeypatch.setattr(evaluate_privhp, name, lambda *a, **k: pytest.fail("points read"))
    report = tmp_path / "report"
    code, _, err = run_cli(["evaluate", "privhp", "--truth", str(stream / "all.csv"),
                            "--synthetic", synthetic, "--report", str(report), *options])
    assert code == 2 and err.strip().splitlines()[-1] == f"continual-synth: error: {said}", err
    assert not report.exists()


# ----------------------------------------------------------------- empirical privacy


def continual_case(counter: str, horizon: int = 3):
    """Tiny continual PrivHP (d = 1, r = 3, prune_k = 2, one sketch level of 2 × 2): the
    noisy prefix sums of every level at every period (everything the releases are
    post-processing of), on a stream and on the stream without one point of period 2.
    n releases at once: each level's counter runs over n copies of its cells."""
    config = cp.ContinualPrivHPConfig.create(
        horizon=horizon, counter=counter, epsilon=1.0, dims=1, prune_k=2, depth=3,
        sketch_width=2, sketch_depth=2)
    s = config.structure
    assert s.exact_depth == 2 and list(s.sketch_levels) == [3]
    rng = np.random.default_rng(0)
    stream = [rng.random((5, 1)) for _ in range(horizon)]
    neighbour = [p if t != 1 else p[:-1] for t, p in enumerate(stream)]
    entries = [[privhp.accumulate(p, s) for p in d] for d in (stream, neighbour)]

    def draw(sampler, n):
        out = []
        for periods in entries:
            counters = [make_counter(c.kind, config.horizon, epsilon=c.budget, dim=c.dim * n,
                                     entries_changed=c.entries_changed, **c.options)
                        for c in config.new_counters()]
            released = []
            for acc in periods:
                for level, counter_ in zip(config.measured_levels, counters):
                    entry = (acc.level_counts(level) if level <= s.exact_depth
                             else acc.sketches[level - s.exact_depth - 1].ravel())
                    released.append(counter_.feed(np.tile(entry, n), sampler).reshape(n, -1))
            out.append(np.hstack(released))
        return tuple(out)

    return pt.AuditCase(f"continual PrivHP ({counter})", "add-remove", draw,
                     epsilon=config.epsilon)


@pytest.mark.parametrize("counter", ["simple", "block", "anchored"])
def test_empirical_privacy_of_a_tiny_continual_case(counter):
    """The threshold test's ε lower bound (20 000 releases per input, α = 10⁻³) stays
    under the claim ε = 1, and with the noise scale halved (a planted calibration bug:
    2ε) the claim is refuted."""
    case = continual_case(counter)
    honest = pt.run_case(case, SeededSampler([903, 1]), 20_000, 1e-3)
    assert honest.epsilon_lower_bound <= 1.0 and not honest.refuted
    buggy = pt.run_case(case, pt.ScaledNoiseSampler(SeededSampler([903, 2]), 0.5), 20_000,
                        1e-3)
    assert buggy.refuted, buggy.to_dict()


def test_a_quiet_bounded_period_is_released_by_the_event_stream_as_step_releases_it(
        stream, tmp_path):
    """``privhp stream`` on an event source: period 2, in which no point arrived, is
    released (empty) when the watermark passes its end, through the same step as a 0-row
    file with the point columns, so the release and the synthesizer state equal ``init``
    + ``step`` over period 1's file, an empty file and period 3's file."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    from apache_beam.testing.test_stream import TestStream as BeamTestStream
    from continual_synth.pipelines.families.privhp_continual import ContinualPrivHPJob
    from continual_synth.pipelines.release.lifecycle import load_state
    from continual_synth.pipelines.streaming.stream import _stopping, event_pipeline
    from continual_synth.transforms.stream_sources import PeriodClock
    length = 10.0
    empty = str(tmp_path / "empty.parquet")
    write_file(read_file(str(stream / "period_01.parquet")).slice(0, 0), empty, "parquet")
    init = ["privhp", "init", "--horizon", "3"] + OPTIONS
    steps_state, steps_out = str(tmp_path / "steps-state"), str(tmp_path / "steps-out")
    assert run_cli(init + ["--state", steps_state])[0] == 0
    for path in (str(stream / "period_01.parquet"), empty, str(stream / "period_03.parquet")):
        code, _, err = run_cli(["privhp", "step", "--state", steps_state, "--input", path,
                                "--output", steps_out])
        assert code == 0, err
    events = BeamTestStream()
    for t in (1, 2, 3):
        points = [] if t == 2 else read_file(str(stream / f"period_{t:02d}.parquet")).to_pylist()
        events = events.add_elements([{"x": p["x"], "y": p["y"],
                                       "ts": (t - 1) * length + i * length / (len(points) + 1)}
                                      for i, p in enumerate(points)])
        events = events.advance_watermark_to(t * length)
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    assert run_cli(init + ["--state", state])[0] == 0
    job = ContinualPrivHPJob()
    assert job.empty_period_valid(load_state(state))
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    with _stopping(), beam.Pipeline(options=options) as pipeline:
        event_pipeline(pipeline, job, state, out, clock=PeriodClock(length),
                       timestamp_col="ts",
                       records=pipeline | events.advance_watermark_to_infinity(),
                       horizon=3, released_through=0)
    assert not os.path.exists(os.path.join(state, "rejected"))
    assert snapshot(out).keys() == snapshot(steps_out).keys()
    data = [n for n in snapshot(out) if n.startswith("synthetic-")]
    assert len(data) == 6 and all(snapshot(out)[n] == snapshot(steps_out)[n] for n in data)
    assert load_state(state)["synthesizer_state"] == load_state(steps_state)["synthesizer_state"]
