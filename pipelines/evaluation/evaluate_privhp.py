"""``evaluate privhp``: how close a PrivHP release is to the real points.

The utility measure of Holland et al. (2025) is the 1-Wasserstein distance W1 between
the synthetic and the real empirical measures (Euclidean ground metric, the input's
units).

* d = 1: exact, on all points, with ``scipy.stats.wasserstein_distance``.
* d > 1: (a) exact optimal transport with POT (``ot.emd2``, Euclidean cost) between
  uniform subsamples of ``ot_points`` points of each side.  This estimates W1 with an
  upward sampling bias (≈ n^(−1/d) for m points), so the summary also gives the same
  estimate between two disjoint subsamples of the *truth* (its noise floor, below; m is
  at most half the real points, so that the headline W1 is the one the floor is read
  against); and
  (b) the sliced W1 (mean over ``projections`` random directions of the exact 1-D W1
  of the projected points, up to 100 000 points a side; :func:`w1_sliced`), a
  lower-variance distance that is at most W1.  Exact per-column 1-D W1 of the marginals is reported in every case.

Every W1 is read against its **noise floor** (:func:`_floor`): the same W1 between two
disjoint samples of the real points of the same size m (d = 1: m = min(n/2, synthetic
points); d > 1: the OT subsample size), each averaged over a few draws.  ``w1_verdict``
says whether the release's W1 at that size is within the floor (the mean paired
difference not significantly above 0, one-sided 2.5 %, with the ratio and the few draws
the test rests on) or how many times the floor it is.

A continual release (``privhp step`` / ``run --horizon``: files ``synthetic-tNNNN-*``,
one set per period) is evaluated at one period t (``period``; default the last released):
its synthetic points against the real points of periods 1..t — the truth's rows with
``period_col`` ≤ t when it has that column, else the truth as given (the summary says
which).

A report directory receives ``summary.json`` and PNG plots (histograms of real against
synthetic per column; in d ≥ 2, 2-D histograms of the first two columns).
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy import stats

from continual_synth.mechanisms.errors import InputError, row_label
from continual_synth.pipelines.release import release_dir
from continual_synth.pipelines.commands.options import check_distinct_columns
from continual_synth.pipelines.evaluation.plots import (privacy_subtitle, save_figure,
                                                        suptitle)
from continual_synth.transforms import storage
from continual_synth.transforms.files import read_dataset, read_files, release_files
from continual_synth.transforms.periods import period_values
from continual_synth.transforms.privhp import table_points

__all__ = ["SLICED_MAX_POINTS", "FLOOR_DRAWS", "FLOOR_DRAWS_1D", "PERIOD_FILE",
           "load_points", "finite_points", "w1_exact_1d", "w1_emd", "w1_sliced",
           "wasserstein_summary", "continual_files", "evaluate_privhp", "plot_points"]

SLICED_MAX_POINTS = 100_000
FLOOR_DRAWS = 3  # draws of the OT floor (d > 1: two exact transports of --ot-points each)
FLOOR_DRAWS_1D = 10  # draws of the exact 1-D floor (cheap)
PERIOD_FILE = re.compile(r"^synthetic-t(\d+)-")  # a continual release's files of period t


def load_points(path: str, columns: Sequence[str], in_format: Optional[str] = None,
                where: Optional[str] = None) -> np.ndarray:
    return finite_points(read_dataset(path, in_format, columns=columns), columns,
                         where or path)


def finite_points(table: pa.Table, columns: Sequence[str], where: str) -> np.ndarray:
    """The n × d points of ``columns``; an :class:`InputError` for a non-finite value."""
    points = table_points(table, columns, where)
    bad = ~np.isfinite(points)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise InputError(f"{where}: column {columns[col]!r} holds a non-finite value "
                         f"at {row_label(row)}")
    return points


def _subsample(points: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    if points.shape[0] <= m:
        return points
    return points[rng.choice(points.shape[0], m, replace=False)]


def w1_exact_1d(a: np.ndarray, b: np.ndarray) -> float:
    return float(stats.wasserstein_distance(np.ravel(a), np.ravel(b)))


def w1_emd(a: np.ndarray, b: np.ndarray) -> float:
    """Exact W1 between two uniform empirical measures (POT's network simplex)."""
    import ot
    cost = ot.dist(a, b, metric="euclidean")
    return float(ot.emd2(np.full(a.shape[0], 1 / a.shape[0]), np.full(b.shape[0], 1 / b.shape[0]),
                         cost, numItermax=10_000_000))


def w1_sliced(a: np.ndarray, b: np.ndarray, projections: int, seed: int) -> float:
    """Sliced W1: the mean over random unit directions θ of the exact 1-D W1 between the
    projections a·θ and b·θ (equal-size samples, so each 1-D W1 is the mean absolute
    difference of the sorted projections).  The directions come from POT's
    ``ot.sliced.get_random_projections``; the 1-D transport is done here because POT's
    ``sliced_wasserstein_distance`` takes over a minute on 2 × 200 000 points."""
    from ot.sliced import get_random_projections
    m = min(a.shape[0], b.shape[0])
    rng = np.random.default_rng(seed)
    a, b = _subsample(a, m, rng), _subsample(b, m, rng)
    directions = get_random_projections(a.shape[1], projections, seed=seed)  # d × P
    total = 0.0
    for start in range(0, projections, 32):
        block = directions[:, start:start + 32]
        pa_, pb_ = np.sort(a @ block, axis=0), np.sort(b @ block, axis=0)
        total += float(np.abs(pa_ - pb_).mean(axis=0).sum())
    return total / projections


def wasserstein_summary(truth: np.ndarray, synthetic: np.ndarray, *, ot_points: int = 4000,
                        projections: int = 128, seed: int = 0) -> Dict:
    """W1 figures between two n × d point sets (see the module docstring)."""
    dims = truth.shape[1]
    rng = np.random.default_rng(seed)
    out: Dict = {"dims": dims, "truth_points": int(truth.shape[0]),
                 "synthetic_points": int(synthetic.shape[0]),
                 "w1_marginals": [w1_exact_1d(truth[:, j], synthetic[:, j])
                                  for j in range(dims)]}
    if truth.shape[0] == 0 or synthetic.shape[0] == 0:
        raise InputError("cannot compare an empty set of points")
    if dims == 1:
        out.update(w1=out["w1_marginals"][0], w1_method="exact (scipy.stats."
                   "wasserstein_distance, all points)")
        m = int(min(truth.shape[0] // 2, synthetic.shape[0]))
        if m >= 1:
            out.update(_floor(*_floor_draws(truth, synthetic, m, w1_exact_1d, rng,
                                            FLOOR_DRAWS_1D), m, "exact 1-D W1"))
        return out
    # the floor needs two disjoint real samples of m points: m is at most half the real
    # points, and the headline W1 is taken at the same m, so that the summary compares
    # one W1 with its floor
    m = int(min(ot_points, truth.shape[0] // 2, synthetic.shape[0]))
    if m >= 1:
        same, floor = _floor_draws(truth, synthetic, m, w1_emd, rng, FLOOR_DRAWS)
        out.update(_floor(same, floor, m, "exact optimal transport"))
        out["w1_emd_subsample"] = out["w1_same_size"]
    else:  # one real point: no floor
        m = 1
        out["w1_emd_subsample"] = w1_emd(truth[:1], _subsample(synthetic, 1, rng))
    s_truth = _subsample(truth, SLICED_MAX_POINTS, rng)
    s_synth = _subsample(synthetic, SLICED_MAX_POINTS, rng)
    out["w1_sliced"] = w1_sliced(s_truth, s_synth, projections, seed)
    out.update(w1=out["w1_emd_subsample"],
               w1_method=(f"exact optimal transport (POT ot.emd2, Euclidean cost) between "
                          f"uniform subsamples of {m} points per side; biased upwards by "
                          f"subsampling, see w1_floor. w1_sliced: mean "
                          f"exact 1-D W1 over {projections} random projections (POT "
                          f"directions), up to {SLICED_MAX_POINTS} points per side"),
               ot_points=m, projections=projections)
    return out


def _floor_draws(truth: np.ndarray, synthetic: np.ndarray, m: int, distance, rng,
                 draws: int) -> Tuple[List[float], List[float]]:
    """``draws`` pairs (W1 of m real points against m synthetic ones, W1 of the same m
    real points against m other real ones): each draw takes 2m distinct real points."""
    same, floor = [], []
    for _ in range(draws):
        split = truth[rng.choice(truth.shape[0], 2 * m, replace=False)]
        same.append(distance(split[:m], _subsample(synthetic, m, rng)))
        floor.append(distance(split[:m], split[m:]))
    return same, floor


def _floor(same: Sequence[float], floor: Sequence[float], m: int, method: str) -> Dict:
    """W1 of the release next to its noise floor, each the mean of the draws
    (:func:`_floor_draws`): the release is *within* the floor when the mean paired
    difference W1 − floor is within Student's 97.5 % quantile of its standard error (one
    draw alone flipped the verdict with the evaluation's seed)."""
    w1, base = float(np.mean(same)), float(np.mean(floor))
    differences = np.asarray(same) - np.asarray(floor)
    error = float(np.std(differences, ddof=1) / np.sqrt(len(differences))) \
        if len(differences) > 1 else 0.0
    within = bool(differences.mean()
                  <= stats.t.ppf(0.975, max(len(differences) - 1, 1)) * error)
    ratio = f"{w1 / base:.3g}× the floor, " if base > 0 else ""
    if within:
        verdict = (f"W1 {w1:.5g} is within the noise of its sampling floor {base:.5g} "
                   f"({ratio}{m} points a side; the difference {differences.mean():.3g} "
                   f"± {error:.2g} is not significantly above 0 at 2.5 % with "
                   f"{len(same)} draws)")
    else:
        verdict = (f"W1 {w1:.5g} is {w1 / base:.3g}× the sampling floor {base:.5g} "
                   f"(real against real at the same size, {m} points a side; mean of "
                   f"{len(same)} draws)"
                   if base > 0 else f"W1 {w1:.5g} against a sampling floor of 0")
    return {"w1_same_size": w1, "w1_floor": base, "w1_floor_draws": len(same),
            "w1_difference_se": error, "w1_within_floor": within,
            "w1_floor_method": (f"{method} between two disjoint uniform samples of {m} real "
                                f"points (the floor), and between {m} real and {m} "
                                f"synthetic points (w1_same_size), each the mean of "
                                f"{len(same)} draws"),
            "w1_verdict": verdict}


def continual_files(synthetic_dir: str, period: Optional[int]
                    ) -> Tuple[Optional[List[str]], Optional[int]]:
    """(files, t) of period t of a continual release (``period``, default the last one);
    (None, None) for a one-shot release."""
    files = release_files(synthetic_dir)
    by_period: Dict[int, List[str]] = {}
    for path in files:
        match = PERIOD_FILE.match(os.path.basename(path))
        if match:
            by_period.setdefault(int(match.group(1)), []).append(path)
    if not by_period:
        if period is not None:
            raise InputError(f"--period {period}: {synthetic_dir} is a one-shot release "
                             f"(no synthetic-tNNNN-* files)")
        return None, None
    chosen = max(by_period) if period is None else period
    if chosen not in by_period:
        raise InputError(f"--period {period}: {synthetic_dir} holds periods "
                         f"{min(by_period)}..{max(by_period)}")
    return sorted(by_period[chosen]), chosen


def evaluate_privhp(truth_path: str, synthetic_dir: str, columns: Sequence[str],
                     report_dir: Optional[str] = None, *, in_format: Optional[str] = None,
                     ot_points: int = 4000, projections: int = 128, seed: int = 0,
                     period: Optional[int] = None, period_col: str = "period") -> Dict:
    """Compare a release with the real points; write summary.json and plots if asked.
    A continual release is compared at ``period`` (see the module docstring)."""
    columns = list(columns)
    files, chosen = continual_files(synthetic_dir, period)
    # before any points are read, as privhp run checks them (with --period-col for a
    # continual release, whose truth is read by period)
    check_distinct_columns([("--columns", columns)]
                           + ([("--period-col", [period_col])] if files is not None else []))
    summary: Dict = {"columns": columns}
    if files is None:
        truth = load_points(truth_path, columns, in_format, where=truth_path)
        synthetic = finite_points(read_files(release_files(synthetic_dir)), columns,
                                  synthetic_dir)
    else:
        table = read_dataset(truth_path, in_format, columns=[*columns, period_col])
        if period_col in table.column_names:
            periods = period_values(table, period_col, f"truth {truth_path}")
            table = table.filter(pa.array(periods <= chosen))
            summary["truth_rows"] = f"{period_col} <= {chosen}"
        else:
            summary["truth_rows"] = f"all (no {period_col!r} column)"
        truth = finite_points(table, columns, truth_path)
        synthetic = finite_points(read_files(files), columns, synthetic_dir)
        summary["period"] = chosen
    if not truth.shape[0]:  # as the other evaluations say it, naming the file
        rows = summary.get("truth_rows", "all")
        raise InputError(f"truth {truth_path}: no records"
                         + ("" if rows.startswith("all") else f" with {rows}"))
    if not synthetic.shape[0]:
        raise InputError(f"synthetic release {synthetic_dir}: no records")
    manifest = release_dir.read_json(storage.join(synthetic_dir, "manifest.json")) or {}
    summary.update(wasserstein_summary(truth, synthetic, ot_points=ot_points,
                                       projections=projections, seed=seed))
    bounds = _box(manifest, columns)
    if bounds is not None:
        uniform = np.random.default_rng(seed + 1).uniform(
            bounds[:, 0], bounds[:, 1], size=(min(truth.shape[0], SLICED_MAX_POINTS),
                                              truth.shape[1]))
        baseline = wasserstein_summary(truth, uniform, ot_points=ot_points,
                                       projections=projections, seed=seed)
        summary["uniform_baseline_w1"] = baseline["w1"]
        if "w1_sliced" in baseline:
            summary["uniform_baseline_w1_sliced"] = baseline["w1_sliced"]
        for key in ("epsilon", "neighbor", "memory_counters", "sampler", "for_publication"):
            if key in manifest:
                summary[key] = manifest[key]
        summary["prune_k"] = manifest.get("parameters", {}).get("prune_k")
        summary["depth"] = manifest.get("parameters", {}).get("depth")
    if report_dir:
        storage.makedirs(report_dir)
        subtitle = privacy_subtitle(manifest, unit="point")
        if "period" in summary:
            subtitle = f"the release of period {summary['period']} · {subtitle}"
        if "w1_verdict" in summary:
            subtitle += "\n" + summary["w1_verdict"]
        summary["plots"] = plot_points(truth, synthetic, columns, report_dir, subtitle,
                                       bounds=bounds)
        release_dir.write_summary(report_dir, summary)
    return summary


def _box(manifest: Dict, columns: Sequence[str]) -> Optional[np.ndarray]:
    """The release's bounds (d × 2) in the order of the evaluated ``columns``; None
    where the manifest gives none or does not bound every evaluated column (the rows
    follow ``--columns``, not the manifest's order)."""
    if not manifest.get("bounds"):
        return None
    named = manifest.get("columns", list(columns))
    if not set(columns) <= set(named):
        return None
    rows = np.asarray(manifest["bounds"], dtype=np.float64)
    return rows[[named.index(name) for name in columns]]


def plot_points(truth: np.ndarray, synthetic: np.ndarray, columns: Sequence[str],
                report_dir: str, subtitle: str = "", bounds=None) -> list:
    """Histograms per column (real against synthetic) and, in d ≥ 2, side-by-side 2-D
    histograms of the first two columns on one colour scale (densities, one colour bar),
    each titled with ``subtitle`` (the release's privacy and its W1 against the floor).
    The axes span ``bounds`` (the release's box, from its manifest) where given, else
    the points.  Returns the files written."""
    written = []
    dims = truth.shape[1]

    def span(j):
        if bounds is not None:
            return float(bounds[j][0]), float(bounds[j][1])
        return (float(min(truth[:, j].min(), synthetic[:, j].min())),
                float(max(truth[:, j].max(), synthetic[:, j].max())))

    fig = Figure(figsize=(max(4.5 * dims, 8.0), 4.2))
    FigureCanvasAgg(fig)
    suptitle(fig, "Real and synthetic points, per column", subtitle, fontsize="medium")
    for j in range(dims):
        ax = fig.add_subplot(1, dims, j + 1)
        bins = np.linspace(*span(j), 101)
        ax.hist(truth[:, j], bins=bins, density=True, alpha=0.5, label="real")
        ax.hist(synthetic[:, j], bins=bins, density=True, alpha=0.5, label="synthetic")
        ax.set_xlabel(columns[j])
        ax.set_ylabel("density")
        ax.legend()
    fig.tight_layout()
    written.append(save_figure(fig, storage.join(report_dir, "marginals.png"), dpi=100))
    if dims >= 2:
        fig = Figure(figsize=(10, 5.2))
        FigureCanvasAgg(fig)
        suptitle(fig, f"Real and synthetic points, {columns[0]} × {columns[1]}", subtitle,
                 fontsize="medium")
        ranges = [list(span(0)), list(span(1))]
        sets = (("real", truth), ("synthetic", synthetic))
        # one colour scale for both panels, so that their densities compare
        top = max(np.histogram2d(pts[:, 0], pts[:, 1], bins=128, range=ranges,
                                 density=True)[0].max() for _, pts in sets)
        axes = [fig.add_subplot(1, 2, i + 1) for i in range(2)]
        for ax, (name, pts) in zip(axes, sets):
            image = ax.hist2d(pts[:, 0], pts[:, 1], bins=128, range=ranges, density=True,
                              cmap="viridis", vmin=0.0, vmax=top)[3]
            ax.set_title(f"{name} ({pts.shape[0]} points)")
            ax.set_xlabel(columns[0])
            ax.set_ylabel(columns[1])
        fig.tight_layout()
        fig.colorbar(image, ax=axes, label="density (points per unit area, share of "
                                           "each set)", shrink=0.85)
        written.append(save_figure(fig, storage.join(report_dir, "joint.png"), dpi=100))
    return written
