"""Figures for the evaluation of fixed-window releases (plain arrays in, PNG out).

The functions take plain sequences and dicts so that the single-release
evaluation (:mod:`continual_synth.pipelines.evaluation.evaluate_window`) and the benchmarks
over many runs (the paper's App. C.1 Figures 3-4: median and 2.5/97.5
percentiles of 1000 runs) draw the same figures.

A *series* is either a sequence of values (one line) or a tuple
``(median, lo, hi)`` (a line with a shaded band and dotted edges between
``lo`` and ``hi``; ``lo``/``hi`` may be ``None``).  ``None`` entries inside a sequence are gaps.

Matplotlib is used through its object API with the Agg canvas, so no global
backend is switched and no window is ever opened.
"""
from __future__ import annotations

import io
import textwrap
from typing import Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from continual_synth.transforms import storage

__all__ = ["Values", "Series", "NEIGHBOURS", "privacy_subtitle", "plot_error_over_time",
           "plot_query_panels", "suptitle", "save_figure"]

Values = Sequence[Optional[float]]
Series = Union[Values, Tuple[Values, Optional[Values], Optional[Values]]]


NEIGHBOURS = {"replace": "replace one {unit}'s data", "add-remove": "add or remove one {unit}",
              "event-level": "add or remove one {unit} at one time (event level)"}


def privacy_subtitle(manifest: Mapping, unit: str = "person") -> str:
    """The release's privacy in one line, from its manifest: ``ρ = 0.05 zCDP (ε = 1.47 at
    δ = 1e-06) · neighbours: replace one person's data`` (ε-DP releases: ``ε = 1``)."""
    parts = []
    if manifest.get("rho") is not None:
        text = f"ρ = {manifest['rho']:g} zCDP"
        if manifest.get("epsilon") is not None and manifest.get("delta") is not None:
            text += f" (ε = {manifest['epsilon']:.3g} at δ = {manifest['delta']:g})"
        parts.append(text)
    elif manifest.get("epsilon") is not None:
        parts.append(f"ε = {manifest['epsilon']:g} (pure ε-DP)")
    neighbor = manifest.get("neighbor")
    if neighbor:
        words = NEIGHBOURS.get(neighbor, neighbor).format(unit=unit)
        parts.append(f"neighbours: {words}")
    return " · ".join(parts) if parts else "privacy parameters unknown (no manifest)"


def plot_error_over_time(periods: Sequence[int], series: Mapping[str, Series],
                         bound: Optional[float], path: str, title: str,
                         ylabel: str = "max |error| (proportion of n)",
                         bound_label: str = "Theorem 3.2 bound λ/n",
                         subtitle: str = "", uncovered: Optional[Mapping[str, Series]] = None,
                         notes: str = "") -> str:
    """Error per period: a line (median) with a percentile band per series and a
    dashed horizontal line at ``bound`` (as in the paper's Figures 3 and 4).

    ``series`` are what the bound covers; ``uncovered`` series (e.g. raw counts, which the
    bound does not cover) are drawn on a separate panel below, labelled so.  ``subtitle``
    (e.g. :func:`privacy_subtitle`) goes under the title, ``notes`` (definitions of the
    symbols, in words) under the figure.  Returns ``path``.
    """
    notes = "\n".join(textwrap.fill(line, 120) for line in notes.splitlines())
    note_lines = notes.count("\n") + 1 if notes else 0
    ratios = [1.6] + ([1.0] if uncovered else []) + ([0.09 * note_lines] if notes else [])
    fig = _figure(8.0, 4.4 + (2.6 if uncovered else 0) + 0.2 * note_lines)
    axes = fig.subplots(len(ratios), 1, squeeze=False, height_ratios=ratios).ravel()
    ax = axes[0]
    for label, values in series.items():
        _draw_series(ax, periods, label, values)
    if bound is not None:
        ax.axhline(bound, color="black", linestyle="--", linewidth=1.2, label=bound_label)
        ax.set_ylim(top=1.25 * max(bound, np.nanmax([np.nanmax(_as_float(
            v[0] if isinstance(v, tuple) else v)) for v in series.values()] or [0])))
    ax.set_ylim(bottom=0)
    _finish_axes(ax, periods, xlabel="period t", ylabel=ylabel)
    ax.set_title("covered by the bound" if uncovered else "", fontsize="medium")
    ax.legend(frameon=False, fontsize="small")
    if uncovered:
        low = axes[1]
        for label, values in uncovered.items():
            _draw_series(low, periods, label, values)
        low.set_ylim(bottom=0)
        _finish_axes(low, periods, xlabel="period t", ylabel=ylabel)
        low.set_title("NOT covered by the bound (separate scale)", fontsize="medium")
        low.legend(frameon=False, fontsize="small")
    if notes:
        axes[-1].axis("off")
        axes[-1].text(0, 1, notes, fontsize="small", va="top", ha="left",
                      transform=axes[-1].transAxes)
    suptitle(fig, title, subtitle)
    return save_figure(fig, path)


def plot_query_panels(periods: Sequence[int], panels: Mapping[str, Mapping[str, Series]],
                      path: str, title: str, marked_periods: Sequence[int] = (),
                      truth_label: str = "truth", ylabel: str = "proportion",
                      xlabel: str = "period t (end of window)", subtitle: str = "") -> str:
    """One panel per query (2 columns), each comparing series over the period t
    at which the query's window ends.

    ``panels`` maps a panel title to ``{label: series}``; the series labelled
    ``truth_label`` is drawn as black crosses (the paper's "X = ground truth").
    ``marked_periods`` (e.g. the quarter ends 3, 6, 9, 12) get light vertical lines.
    The panels share one y-axis, so they can be compared.  Returns ``path``.
    """
    columns = 2 if len(panels) > 1 else 1
    rows = -(-len(panels) // columns)
    fig = _figure(5.0 * columns, 3.4 * rows + 0.3)
    axes = fig.subplots(rows, columns, squeeze=False, sharey=True)
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
    for ax in axes.ravel():
        ax.yaxis.set_tick_params(labelleft=True)
    suptitle(fig, title, subtitle)
    return save_figure(fig, path)


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


def suptitle(fig: Figure, title: str, subtitle: str = "", **options) -> None:
    """``title`` and ``subtitle`` above the whole figure, each line wrapped to the figure's
    width (a long title is never cut at the edges)."""
    width = max(40, int(fig.get_figwidth() * 9))  # about 10 characters an inch at 12 pt
    text = f"{title}\n{subtitle}" if subtitle else title
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in text.strip().splitlines()),
                 **options)


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: str, dpi: int = 120) -> str:
    """Write ``fig`` as a PNG to ``path`` (any filesystem Beam knows) and return the path."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")  # nothing cut at the edges
    storage.write_bytes(path, buffer.getvalue())
    return path
