"""Figures for the evaluation of fixed-window releases (plain arrays in, PNG out).

The functions take plain sequences and dicts so that the single-release
evaluation (:mod:`continual_synth.pipelines.evaluate_window`) and the benchmarks
over many runs (the paper's App. C.1 Figures 3-4: median and 2.5/97.5
percentiles of 1000 runs) draw the same figures.

A *series* is either a sequence of values (one line) or a tuple
``(median, lo, hi)`` (a line with a shaded band and dotted edges between
``lo`` and ``hi``; ``lo``/``hi`` may be ``None``).  ``None`` entries inside a sequence are gaps.

Matplotlib is used through its object API with the Agg canvas, so no global
backend is switched and no window is ever opened.
"""
from __future__ import annotations

import os
from typing import Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

Values = Sequence[Optional[float]]
Series = Union[Values, Tuple[Values, Optional[Values], Optional[Values]]]


def plot_error_over_time(periods: Sequence[int], series: Mapping[str, Series],
                         bound: Optional[float], path: str, title: str,
                         ylabel: str = "max |error| (proportion of n)",
                         bound_label: str = "Theorem 3.2 bound λ/n") -> str:
    """Error per period: a line (median) with a percentile band per series and a
    dashed horizontal line at ``bound`` (as in the paper's Figures 3 and 4).

    Returns ``path``.
    """
    fig = _figure(7.0, 4.0)
    ax = fig.add_subplot()
    for label, values in series.items():
        _draw_series(ax, periods, label, values)
    if bound is not None:
        ax.axhline(bound, color="black", linestyle="--", linewidth=1.2, label=bound_label)
    ax.set_ylim(bottom=0)
    _finish_axes(ax, periods, xlabel="period t", ylabel=ylabel)
    ax.set_title(title)
    ax.legend(frameon=False, fontsize="small")
    return _save(fig, path)


def plot_query_panels(periods: Sequence[int], panels: Mapping[str, Mapping[str, Series]],
                      path: str, title: str, marked_periods: Sequence[int] = (),
                      truth_label: str = "truth", ylabel: str = "proportion",
                      xlabel: str = "period t (end of window)") -> str:
    """One panel per query (2 columns), each comparing series over the period t
    at which the query's window ends.

    ``panels`` maps a panel title to ``{label: series}``; the series labelled
    ``truth_label`` is drawn as black crosses (the paper's "X = ground truth").
    ``marked_periods`` (e.g. the quarter ends 3, 6, 9, 12) get light vertical lines.
    Returns ``path``.
    """
    columns = 2 if len(panels) > 1 else 1
    rows = -(-len(panels) // columns)
    fig = _figure(5.0 * columns, 3.4 * rows)
    axes = fig.subplots(rows, columns, squeeze=False)
    for ax, (panel_title, panel_series) in zip(axes.ravel(), panels.items()):
        for period in marked_periods:
            ax.axvline(period, color="0.85", linewidth=0.8, zorder=0)
        for label, values in panel_series.items():
            if label == truth_label:
                ax.plot(periods, _as_float(values), "x", color="black", markersize=7,
                        markeredgewidth=1.6, label=label, zorder=3)
            else:
                _draw_series(ax, periods, label, values)
        _finish_axes(ax, periods, xlabel=xlabel, ylabel=ylabel)
        ax.set_title(panel_title, fontsize="medium")
        ax.legend(frameon=False, fontsize="small")
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title)
    return _save(fig, path)


def _draw_series(ax, periods: Sequence[int], label: str, values: Series) -> None:
    if isinstance(values, tuple):
        median, lo, hi = values
        line, = ax.plot(periods, _as_float(median), marker="o", markersize=3, label=label)
        if lo is not None and hi is not None:
            color = line.get_color()
            ax.fill_between(periods, _as_float(lo), _as_float(hi), color=color, alpha=0.15,
                            linewidth=0, label=f"{label} (percentile band)")
            for edge in (lo, hi):  # the paper's dotted percentile lines
                ax.plot(periods, _as_float(edge), linestyle=":", linewidth=1, color=color)
    else:
        ax.plot(periods, _as_float(values), marker="o", markersize=3, label=label)


def _as_float(values: Values) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _finish_axes(ax, periods: Sequence[int], xlabel: str, ylabel: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if len(periods) and len(periods) <= 24:
        ax.set_xticks(list(periods))
    ax.grid(axis="y", color="0.9")
    ax.spines[["top", "right"]].set_visible(False)


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
