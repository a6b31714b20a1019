"""Reports a statistician reads: plots say what each line is, show the
privacy and the neighbouring relation, share y-axes where panels are compared, keep
what a bound does not cover off its axis; `evaluate privhp` reads W1 against its floor."""
from __future__ import annotations

import numpy as np
import pytest

from continual_synth.pipelines.evaluation import plots
from continual_synth.pipelines.evaluation.evaluate_privhp import wasserstein_summary

WINDOW_MANIFEST = {"rho": 0.05, "epsilon": 1.4715947562, "delta": 1e-6, "neighbor": "replace"}


def test_privacy_subtitle_names_the_budget_and_the_relation():
    assert plots.privacy_subtitle(WINDOW_MANIFEST) == \
        "ρ = 0.05 zCDP (ε = 1.47 at δ = 1e-06) · neighbours: replace one person's data"
    assert plots.privacy_subtitle({"epsilon": 1.0, "neighbor": "add-remove"}, unit="point") == \
        "ε = 1 (pure ε-DP) · neighbours: add or remove one point"
    assert "unknown" in plots.privacy_subtitle({})
    assert plots.privacy_subtitle({"epsilon": 2.0, "neighbor": "event-level"}, unit="record") \
        == "ε = 2 (pure ε-DP) · neighbours: add or remove one record at one time (event level)"


def test_a_long_title_stays_inside_the_figure(figures):
    """The quarterly-query and bounded plots' titles stay within the figure's edges."""
    title = ("Proportion with value 'yes' in the 3 periods ending at t (every 3rd period "
             "marked: quarter ends if periods are months; no error bound is claimed for "
             "these queries). NOTE: queries span 3 periods but the release preserves "
             "windows of 2")
    plots.plot_query_panels([3, 4], {"a": {"truth": [0.1, 0.2]}}, "unused.png", title,
                            subtitle=plots.privacy_subtitle(WINDOW_MANIFEST))
    [fig] = figures
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    extent = fig._suptitle.get_window_extent(renderer)
    assert 0 <= extent.x0 and extent.x1 <= fig.bbox.x1


@pytest.fixture
def figures(monkeypatch):
    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path, dpi=120: drawn.append(fig) or path)
    return drawn


def test_error_plot_keeps_uncovered_series_off_the_bound_axis(figures):
    plots.plot_error_over_time([3, 4], {"debiased": [0.01, 0.02]}, 0.05, "x.png", "title",
                               subtitle=plots.privacy_subtitle(WINDOW_MANIFEST),
                               uncovered={"raw": [0.2, 0.3]}, notes="p: synthetic people")
    fig = figures[0]
    covered, uncovered, notes = fig.axes
    assert [line.get_label() for line in covered.get_lines()] == \
        ["debiased", "Theorem 3.2 bound λ/n"]
    assert [line.get_label() for line in uncovered.get_lines()] == ["raw"]
    assert "NOT covered" in uncovered.get_title()
    assert covered.get_ylim()[1] >= 0.05  # the bound is in view
    assert "ρ = 0.05" in fig._suptitle.get_text() and "replace" in fig._suptitle.get_text()
    assert notes.texts[0].get_text() == "p: synthetic people"


def test_query_panels_share_one_y_axis(figures):
    panels = {name: {"truth": [0.1, 0.2], "synthetic": [0.15, 0.9 if name == "b" else 0.2]}
              for name in ("a", "b", "c")}
    plots.plot_query_panels([1, 2], panels, "x.png", "title", subtitle="ε = 1")
    axes = [ax for ax in figures[0].axes if ax.get_visible()]
    assert len(axes) == 3
    assert len({ax.get_ylim() for ax in axes}) == 1 and axes[0].get_ylim()[1] >= 0.9


@pytest.mark.parametrize("dims", [1, 2])
def test_w1_is_read_against_its_floor(dims):
    """A fresh sample of the real distribution sits near the floor (the two are W1s of
    independent same-size samples: their ratio is near 1); a shifted one is far above."""
    rng = np.random.default_rng(5)
    truth = rng.normal(size=(6000, dims))
    fresh = wasserstein_summary(truth, rng.normal(size=(3000, dims)), ot_points=600,
                                projections=16)
    assert 0.6 < fresh["w1_same_size"] / fresh["w1_floor"] < 1.7, fresh
    assert ("within the noise of its sampling floor" in fresh["w1_verdict"]) == \
        fresh["w1_within_floor"]
    shifted = wasserstein_summary(truth, rng.normal(size=(3000, dims)) + 1.0, ot_points=600,
                                  projections=16)
    assert not shifted["w1_within_floor"] and shifted["w1_same_size"] > 3 * shifted["w1_floor"]
    assert "× the sampling floor" in shifted["w1_verdict"]


def test_w1_has_its_floor_with_fewer_real_points_than_two_ot_samples():
    """2-D with fewer than 2 × --ot-points real points: the floor is taken at half of them
    (the summary holds every floor key)."""
    rng = np.random.default_rng(6)
    truth = rng.normal(size=(900, 2))
    fresh = wasserstein_summary(truth, rng.normal(size=(3000, 2)), ot_points=600,
                                projections=8)
    assert "450 real points" in fresh["w1_floor_method"], fresh["w1_floor_method"]
    assert 0.6 < fresh["w1_same_size"] / fresh["w1_floor"] < 1.7, fresh
    assert fresh["w1"] == fresh["w1_same_size"]  # the headline is the W1 the floor reads
    assert "w1_emd_truth_floor" not in fresh  # it repeated w1_floor
    shifted = wasserstein_summary(truth, rng.normal(size=(3000, 2)) + 1.0, ot_points=600,
                                  projections=8)
    assert not shifted["w1_within_floor"]


@pytest.mark.parametrize("dims", [1, 2])
def test_the_floor_verdict_does_not_depend_on_the_evaluation_seed(dims):
    """With one draw of the floor the same release would read "within" or "1.2× the
    floor" as --seed changed (an ε = 1 release: within, within, not, not).  A fresh real
    sample must read within at every seed; the floor is the mean of several draws."""
    rng = np.random.default_rng(5)
    truth, fresh = rng.normal(size=(6000, dims)), rng.normal(size=(3000, dims))
    verdicts = [wasserstein_summary(truth, fresh, ot_points=600, projections=16, seed=seed)
                for seed in range(6)]
    assert all(v["w1_within_floor"] for v in verdicts), [v["w1_verdict"] for v in verdicts]
    assert all(v["w1_floor_draws"] > 1 for v in verdicts)


def test_the_joint_panels_share_one_colour_scale_and_span_the_bounds(figures, tmp_path,
                                                                      monkeypatch):
    """The 2-D histograms share one colour scale (else a sparser panel looks as bright),
    with a colour bar, over the release's box rather than the points' range."""
    from continual_synth.pipelines.evaluation import evaluate_privhp
    monkeypatch.setattr(evaluate_privhp, "save_figure", plots.save_figure)  # the fixture's
    plot_points = evaluate_privhp.plot_points
    rng = np.random.default_rng(3)
    truth = rng.uniform(0.0, 0.9, size=(4000, 2))
    synthetic = rng.normal(0.5, 0.05, size=(1000, 2))  # far denser where it lies
    plot_points(truth, synthetic, ["x", "y"], str(tmp_path), bounds=[[0.0, 1.0], [0.0, 2.0]])
    marginals, joint = figures
    real, synth, bar = joint.axes
    [real_image], [synth_image] = real.collections, synth.collections
    assert real_image.get_clim() == synth_image.get_clim()
    assert synth_image.get_clim()[1] >= synth_image.get_array().max() > 0
    assert "density" in bar.get_ylabel()
    assert real.get_xlim() == (0.0, 1.0) and real.get_ylim() == (0.0, 2.0)
    assert marginals.axes[0].get_xlim()[1] >= 1.0
