"""Evaluation of a synthetic tabular stream against the true stream (Kumar, Strohmer and
Vershynin 2024, §7.3 metrics; Figures 1-6 and Tables 1-2).

The truth is a stream of records with a period column: f_t is every record of periods
1..t.  The release directory holds, for every released period t, the synthetic table
g_t (the rows whose period column equals t), as files readable together as one dataset,
and optionally ``manifest.json``; a release whose rows of period t are only the records
*added* at t (the §5 baseline, manifest ``"release_form": "increment ..."``) is read as
g_t = every row of periods ≤ t.  For every released t this module computes the four
metrics AvgWE, MaxWE, AvgRelWE and MaxRelWE of
:mod:`continual_synth.mechanisms.workload_error` over the workloads ``marginals`` (all
2-way by default), their mean over the last ``last`` periods (the Tables 1-2 figure),
and, with ``report_dir``, writes ``summary.json`` and ``tabular_metrics.png`` (one panel
per metric over time, as in Figures 1-6).

Every figure of those last periods stands next to its **sampling floor**
(:func:`continual_synth.mechanisms.workload_error.sampling_floor`): the same metric for a
sample of |g_t| records drawn with replacement from f_t itself, the error of the real
records resampled at the release's size (one seeded draw per period, averaged like the
metric; a release drawn by randomised rounding can score below it).  ``floor_reading``
says how many times the floor the release's AvgWE is.

Nothing is re-read per period: the truth's per-period workload histograms ∇f_t are
counted in one pass and accumulated by a cumulative sum; the release is read one file at
a time (a release of T periods of a growing table holds Σ_t |g_t| ≈ B·T²/2 rows, far more
than the truth) and each file's rows are counted into its periods' histograms.
"""
from __future__ import annotations

import json
import math
import os
from typing import Dict, List, Mapping, Optional

import numpy as np
import pyarrow as pa

from continual_synth.mechanisms.errors import row_label
from continual_synth.mechanisms.marginals import Domain, encode_records, parse_workloads
from continual_synth.mechanisms.workload_error import (METRICS, average_last,
                                                       period_histograms, sampling_floor,
                                                       stream_metrics)
from continual_synth.pipelines.evaluation.plots import (_figure, _finish_axes,
                                                        privacy_subtitle, save_figure,
                                                        suptitle)
from continual_synth.pipelines.release.release_dir import periods_released, write_summary
from continual_synth.transforms import storage
from continual_synth.transforms.files import InputError, read_dataset, read_file, release_files
from continual_synth.transforms.periods import period_values

__all__ = ["MANIFEST_NAME", "MANIFEST_KEYS", "PANEL_TITLES", "PLOT_NAME", "FLOOR_SEED",
           "evaluate_tabular", "accuracy_coverage", "floor_reading", "write_report",
           "plot_metrics_over_time"]

MANIFEST_NAME = "manifest.json"
#: manifest fields copied into the summary when present
MANIFEST_KEYS = ("algorithm", "paper", "method", "epsilon", "epsilon_spent", "counter", "fit",
                 "marginals", "selections", "neighbor", "sampler", "seed", "horizon",
                 "periods_released", "size", "release_form", "domain_private")
PANEL_TITLES = {"AvgWE": "(a) Average of workload errors",
                "MaxWE": "(b) Maximum of workload errors",
                "AvgRelWE": "(c) Average of relative workload errors",
                "MaxRelWE": "(d) Maximum of relative workload errors"}
PLOT_NAME = "tabular_metrics.png"
FLOOR_SEED = 0  # the sampling floor's draws: the same floor for every evaluation of a stream


def _periods_of(table: pa.Table, period_col: str, where: str) -> np.ndarray:
    """The periods of a truth or release table: the inputs' rule
    (:func:`~continual_synth.transforms.periods.period_values`), and periods from 1."""
    if period_col not in table.column_names:
        raise InputError(f"{where}: no period column {period_col!r}; the columns are "
                         f"{table.column_names}")
    values = period_values(table, period_col, where)
    if values.size and values.min() < 1:
        row = int(np.argmax(values < 1))
        raise InputError(f"{where}: periods must be whole numbers 1, 2, ...; "
                         f"{row_label(row)} holds period {int(values[row])}")
    return values


def _read_manifest(synthetic_dir: str) -> Optional[dict]:
    path = storage.join(synthetic_dir, MANIFEST_NAME)
    if not storage.is_file(path):
        return None
    try:
        manifest = json.loads(storage.read_bytes(path).decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise InputError(f"{path} is not a JSON object")
    return manifest


def _domain(domain_path: Optional[str], manifest: Optional[dict], where: str) -> Domain:
    """``--domain``'s file, or else the domain the release's manifest (``where``)
    records."""
    if domain_path is not None:
        from continual_synth.pipelines.families.tabular import read_domain
        return read_domain(domain_path)
    if manifest is None or "domain" not in manifest:
        raise InputError(f"{where} " + ("does not exist" if manifest is None else
                                       "records no domain") +
                         ": give the domain file with --domain")
    return Domain.from_mapping(manifest["domain"], f"the domain of {where}")


def _count_release(synthetic_dir: str, domain: Domain, positions: List[List[int]],
                   period_col: str, fmt: Optional[str]) -> Dict[int, List[np.ndarray]]:
    """Per released period t, the workload histograms of g_t (read file by file)."""
    files = release_files(synthetic_dir)
    if not files:
        raise InputError(f"{synthetic_dir}: no .parquet, .csv or .avro files found")
    counts: Dict[int, List[np.ndarray]] = {}
    for path in files:
        table = read_file(path, fmt)
        where = f"synthetic release {path}"
        periods = _periods_of(table, period_col, where)
        if not periods.size:
            continue
        codes = encode_records(table, domain, where=where)
        present, local = np.unique(periods, return_inverse=True)
        histograms = period_histograms(codes, local + 1, len(present), domain.sizes, positions)
        for j, period in enumerate(present.tolist()):
            rows = [h[j] for h in histograms]
            if period in counts:
                for total, row in zip(counts[period], rows):
                    total += row
            else:
                counts[period] = rows
    return counts


def evaluate_tabular(truth_path: str, synthetic_dir: str, report_dir: Optional[str] = None, *,
                     domain_path: Optional[str] = None, marginals: str = "2",
                     period_col: str = "period",
                     last: int = 10, truth_format: Optional[str] = None,
                     synthetic_format: Optional[str] = None, scale: str = "proportion",
                     zero_truth: str = "skip", label: Optional[str] = None,
                     synthetic_form: str = "auto") -> dict:
    """Compare a synthetic tabular release with the true stream; return the summary and,
    with ``report_dir``, write ``summary.json`` and ``tabular_metrics.png`` there.

    ``synthetic_form`` says what the rows of period t are: ``"table"``, the whole synthetic
    table g_t (Algorithm 3, the proposed method); ``"increment"``, the synthetic records
    added at t, so that g_t is every row of periods ≤ t (the §5 baseline, which releases
    an independent synthetic batch per period and accumulates them); ``"auto"`` (default)
    reads the manifest's ``release_form`` ("increment ..." → increment) and otherwise
    takes ``"table"``.

    The released periods are the manifest's ``periods_released`` when present (a list of
    periods; the releases of earlier versions of the ``tabular`` and ``bounded`` jobs
    hold the number N of periods released, read as 1..N; a listed period without
    rows is an empty table or increment), else every period 1..t_max of the release; in
    ``"table"`` form each of them must then have rows.  ``domain_path``: the public
    domain's JSON file (``--domain``); default: the domain the release's manifest records
    (the one it was synthesized over, given or inferred).  The truth must cover every
    released period; its later periods are ignored.  ``scale`` and ``zero_truth`` are
    passed to :func:`continual_synth.mechanisms.workload_error.stream_metrics`.
    """
    if int(last) != last or last < 1:
        raise InputError(f"--last must be a positive integer, got {last!r}")
    manifest = _read_manifest(synthetic_dir)
    domain_source = domain_path or f"{synthetic_dir}/{MANIFEST_NAME}"
    domain = _domain(domain_path, manifest, domain_source)
    from continual_synth.pipelines.families.tabular import check_period_col
    check_period_col(domain, period_col,  # before any records are read, as run's
                     "--domain" if domain_path else f"the domain of {domain_source}")
    workloads = parse_workloads(marginals, domain)
    positions = [domain.index(w) for w in workloads]
    synthetic_form = _release_form(synthetic_form, manifest)

    truth = read_dataset(truth_path, truth_format, columns=[*domain.names, period_col])
    truth_periods = _periods_of(truth, period_col, f"truth {truth_path}")
    if not truth_periods.size:
        raise InputError(f"truth {truth_path}: no records")
    truth_codes = encode_records(truth, domain, where=f"truth {truth_path}")
    del truth

    released_counts = _count_release(synthetic_dir, domain, positions, period_col,
                                     synthetic_format)
    listed = manifest.get("periods_released") if manifest else None
    if listed is not None:
        periods = periods_released(manifest, f"{synthetic_dir}/{MANIFEST_NAME}")
        unlisted = sorted(set(released_counts) - set(periods))
        if unlisted:
            raise InputError(f"{synthetic_dir}: rows for period(s) {unlisted[:10]} that the "
                             f"manifest does not list as released")
    else:
        if not released_counts:
            raise InputError(f"{synthetic_dir}: the release has no rows")
        top = max(released_counts)
        missing = sorted(set(range(1, top + 1)) - set(released_counts))
        if missing and synthetic_form == "table":
            raise InputError(f"{synthetic_dir}: no synthetic table for period(s) "
                             f"{missing[:10]}{' …' if len(missing) > 10 else ''} "
                             f"(the release goes up to period {top})")
        periods = list(range(1, top + 1))
    if not periods:
        raise InputError(f"{synthetic_dir}: nothing released yet")
    horizon = periods[-1]
    if not set(periods) & set(np.unique(truth_periods).tolist()):
        raise InputError(f"truth {truth_path}: periods {int(truth_periods.min())}.."
                         f"{int(truth_periods.max())} but the release has periods "
                         f"{periods[0]}..{horizon}, none of them in the truth (is it the "
                         f"stream this release was made from?)")
    if truth_periods.max() < horizon:
        raise InputError(f"the truth covers periods up to {int(truth_periods.max())} but "
                         f"the release goes up to period {horizon}")
    keep = truth_periods <= horizon
    increments = period_histograms(truth_codes[keep], truth_periods[keep], horizon,
                                   domain.sizes, positions)
    synthetic = [np.zeros_like(h) for h in increments]
    for period, rows in released_counts.items():
        for matrix, row in zip(synthetic, rows):
            matrix[period - 1] = row
    if synthetic_form == "increment":
        synthetic = [np.cumsum(matrix, axis=0) for matrix in synthetic]
    metrics = stream_metrics(increments, synthetic, scale=scale, zero_truth=zero_truth)
    index = np.asarray(periods) - 1
    true_sizes = np.cumsum(increments[0].sum(axis=1))
    synthetic_sizes = synthetic[0].sum(axis=1)
    floors = _floors(truth_codes, truth_periods, increments, periods[-int(last):],
                     synthetic_sizes, domain.sizes, positions, scale, zero_truth)
    per_period = [{"period": int(t), "true_size": int(true_sizes[t - 1]),
                   "synthetic_size": int(synthetic_sizes[t - 1]),
                   **{name: _finite(metrics[name][t - 1]) for name in METRICS},
                   **({"floor_" + name: _finite(floors[t][name]) for name in METRICS}
                      if t in floors else {})}
                  for t in periods]
    average = {name: _finite(average_last(metrics[name][index], int(last)))
               for name in METRICS}
    floor = {name: _finite(average_last([f[name] for f in floors.values()], len(floors)))
             for name in METRICS}
    final = periods[-1] - 1
    order = np.argsort(-np.nan_to_num(metrics["WE"][final], nan=-1.0), kind="stable")
    # WE averages |f − g| over a workload's cells, so a many-valued workload's error is
    # diluted by its cell count; its total variation distance is not (proportions only)
    cells = np.array([domain.size(w) for w in workloads], dtype=np.float64)
    tv = metrics["WE"][final] * cells / 2 if scale == "proportion" else None
    shown = ({key: manifest[key] for key in MANIFEST_KEYS if key in manifest}
             if manifest else None)
    if listed is not None:  # as a list, also from a release whose manifest held a count N
        shown["periods_released"] = [int(t) for t in periods]
    summary = {
        "label": label or _default_label(manifest, synthetic_dir),
        "truth": truth_path, "synthetic": synthetic_dir,
        "domain": domain_source,
        "marginals": str(marginals), "num_workloads": len(workloads),
        "scale": scale, "zero_truth": zero_truth, "period_col": period_col,
        "synthetic_form": synthetic_form,
        "method": manifest.get("method") if manifest else None,
        "epsilon": manifest.get("epsilon") if manifest else None,
        "manifest": shown,
        "periods_released": [int(t) for t in periods], "horizon": horizon,
        "empty_periods": [int(t) for t in periods if t not in released_counts],
        "last": int(last),
        "average_last": average,
        "sampling_floor": floor,
        "floor_reading": floor_reading(average["AvgWE"], floor["AvgWE"], len(floors),
                                       average.get("AvgRelWE"), floor.get("AvgRelWE")),
        "periods": per_period,
        "final_period_worst_workloads": [_workload_entry(workloads, metrics, tv, final, i)
                                         for i in order[:10]],
    }
    coverage = accuracy_coverage(synthetic_dir, manifest, workloads, increments, synthetic,
                                 synthetic_form)
    if coverage is not None:
        summary["accuracy_coverage"] = coverage
    if tv is not None:
        summary["final_period_worst_workloads_by_total_variation"] = [
            _workload_entry(workloads, metrics, tv, final, i)
            for i in np.argsort(-np.nan_to_num(tv, nan=-1.0), kind="stable")[:10]]
    if report_dir is not None:
        write_report(summary, report_dir)
    return summary


def accuracy_coverage(synthetic_dir: str, manifest: Optional[dict], workloads, increments,
                      synthetic, synthetic_form: str) -> Optional[Dict]:
    """How often the release's stated error bounds (its ``accuracy-tTTTT.json`` files,
    :mod:`continual_synth.mechanisms.tabular_accuracy`) hold against the truth: over
    every period and every bounded workload among the evaluated ones, the share whose
    true max_c |released share − true share| is within its ``max_abs_error``; the
    confidence the files state beside it.  None if the release has no accuracy files."""
    names = (manifest or {}).get("accuracy_files") or []
    if not names or synthetic_form != "table":
        return None
    index = {tuple(w): i for i, w in enumerate(workloads)}
    checked, covered, worst, confidence = 0, 0, 0.0, None
    for name in names:
        document = json.loads(storage.read_bytes(storage.join(synthetic_dir, name)))
        t = int(document["period"])
        confidence = document["confidence"]
        for entry in document["workloads"]:
            i = index.get(tuple(entry["attributes"]))
            if i is None or entry["max_abs_error"] is None or t > increments[i].shape[0]:
                continue
            truth = increments[i][:t].sum(axis=0).astype(np.float64)
            released = synthetic[i][t - 1].astype(np.float64)
            if truth.sum() <= 0 or released.sum() <= 0:
                continue
            error = float(np.abs(released / released.sum() - truth / truth.sum()).max())
            checked += 1
            covered += error <= entry["max_abs_error"]
            worst = max(worst, error / entry["max_abs_error"]
                        if entry["max_abs_error"] > 0 else math.inf)
    return {"confidence": confidence, "bounds_checked": checked,
            "bounds_held": covered, "share_held": covered / checked if checked else None,
            "largest_error_to_bound": _finite(worst) if checked else None}


def _workload_entry(workloads, metrics, tv, final: int, i: int) -> Dict:
    """One workload's errors at the last released period: WE, RelWE and (proportions)
    the total variation distance ½‖f_t/|f_t| − g_t/|g_t|‖₁ of its histograms."""
    entry = {"workload": list(workloads[i]), "WE": _finite(metrics["WE"][final, i]),
             "RelWE": _finite(metrics["RelWE"][final, i])}
    if tv is not None:
        entry["total_variation"] = _finite(tv[i])
    return entry


def _floors(truth_codes: np.ndarray, truth_periods: np.ndarray, increments,
            periods: List[int], synthetic_sizes: np.ndarray, sizes, positions, scale: str,
            zero_truth: str) -> Dict[int, Dict[str, float]]:
    """The sampling floor at each of ``periods`` (the last ``--last`` released ones), of
    a sample of the release's size |g_t| from f_t (whose histograms are the sums of
    ``increments`` up to t)."""
    rng = np.random.default_rng(FLOOR_SEED)
    return {int(t): sampling_floor(truth_codes[truth_periods <= t],
                                   int(synthetic_sizes[t - 1]), sizes, positions, rng,
                                   truth=[h[:t].sum(axis=0, keepdims=True) for h in increments],
                                   scale=scale, zero_truth=zero_truth)
            for t in periods}


def floor_reading(avg_we: Optional[float], floor: Optional[float], periods: int,
                  avg_rel: Optional[float] = None, rel_floor: Optional[float] = None) -> str:
    """One sentence: the release's AvgWE as a multiple of its sampling floor, and its
    AvgRelWE as a multiple of that metric's floor where both are defined (AvgWE weighs
    every cell by its share, so rare cells' relative errors show only in AvgRelWE, which
    can be several times further from its floor than AvgWE is)."""
    where = (f"a sample of the release's size drawn with replacement from the true table "
             f"f_t, mean over the last {periods} period(s)")
    if avg_we is None or floor is None:
        return f"AvgWE or its sampling floor is undefined ({where})"
    if floor <= 0:
        return f"AvgWE {avg_we:.4g} against a sampling floor of 0 ({where})"
    relative = ""
    if avg_rel is not None and rel_floor is not None and rel_floor > 0:
        relative = (f"; AvgRelWE {avg_rel:.4g} is {avg_rel / rel_floor:.2f}× its floor "
                    f"{rel_floor:.4g}")
    return (f"AvgWE {avg_we:.4g} is {avg_we / floor:.2f}× the sampling floor {floor:.4g} "
            f"({where}){relative}; 1× is the error of the real records resampled at that "
            f"size")


def _release_form(requested: str, manifest: Optional[dict]) -> str:
    if requested not in ("auto", "table", "increment"):
        raise InputError(f"unknown synthetic form {requested!r}; choose auto, table or "
                         f"increment")
    if requested != "auto":
        return requested
    form = str((manifest or {}).get("release_form", "")).strip().lower()
    return "increment" if form.startswith("increment") else "table"


def _default_label(manifest: Optional[dict], synthetic_dir: str) -> str:
    if manifest and manifest.get("method"):
        epsilon = manifest.get("epsilon")
        return f"{manifest['method']}" + (f" (ε={epsilon})" if epsilon is not None else "")
    return os.path.basename(os.path.normpath(synthetic_dir)) or synthetic_dir


def _finite(value) -> Optional[float]:
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def write_report(summary: dict, report_dir: str) -> None:
    """``summary.json`` and ``tabular_metrics.png`` (one release) into ``report_dir``."""
    write_summary(report_dir, summary)
    plot_metrics_over_time({summary["label"]: summary}, storage.join(report_dir, PLOT_NAME),
                           subtitle=_plot_subtitle(summary))


def _plot_subtitle(summary: Dict) -> str:
    """The release's privacy and relation, and where the floor is drawn."""
    manifest = summary.get("manifest")
    parts = [privacy_subtitle(manifest, unit="record")] if manifest else []
    floors = [row["period"] for row in summary.get("periods", [])
              if row.get("floor_AvgWE") is not None]
    if floors:
        parts.append(f"sampling floor drawn for periods {floors[0]}-{floors[-1]} "
                     f"(the --last periods)")
    return " · ".join(parts)


def _as_columns(metrics) -> Dict[str, List]:
    """Per-period metrics as columns: accepts a summary (with ``"periods"``), a list of
    per-period dicts, or a dict of columns (``"period"`` plus the metrics)."""
    if isinstance(metrics, Mapping) and isinstance(metrics.get("periods"), list):
        metrics = metrics["periods"]
    if isinstance(metrics, Mapping):
        columns = {key: list(value) for key, value in metrics.items()}
    else:
        rows = list(metrics)
        columns = {key: [row.get(key) for row in rows]
                   for key in ("period", *METRICS, *("floor_" + name for name in METRICS))}
    if "period" not in columns:
        length = len(next(iter(columns.values()), []))
        columns["period"] = list(range(1, length + 1))
    return columns


def plot_metrics_over_time(series: Mapping[str, object], path: str,
                           title: Optional[str] = None, subtitle: str = "") -> str:
    """The four metrics over time, one panel each (2 × 2, as in Figures 1-6), with one line
    per release: ``series`` maps a label (e.g. "baseline", "proposed") to its per-period
    metrics (a summary from :func:`evaluate_tabular`, a list of per-period dicts, or a
    dict of columns with ``"period"`` and the metric names).  Returns ``path``."""
    if not series:
        raise InputError("plot_metrics_over_time: no series to plot")
    fig = _figure(10.0, 7.0)
    axes = fig.subplots(2, 2, squeeze=False).ravel()
    columns = {label: _as_columns(values) for label, values in series.items()}
    for ax, name in zip(axes, METRICS):
        periods_all: List[int] = []
        for label, values in columns.items():
            periods = values["period"]
            ys = np.array([np.nan if v is None else v for v in values.get(name, [])],
                          dtype=float)
            if ys.size != len(periods):
                raise InputError(f"series {label!r}: {ys.size} values of {name} for "
                                 f"{len(periods)} periods")
            marker = "o" if len(periods) <= 40 else None
            line, = ax.plot(periods, ys, marker=marker, markersize=3, linewidth=1.2,
                            label=label)
            floor = values.get("floor_" + name) or []
            shown = [(t, v) for t, v in zip(periods, floor) if v is not None]
            if shown:
                ax.plot(*zip(*shown), linestyle="--", marker=marker, markersize=3,
                        linewidth=1.5, color=line.get_color(),
                        label=f"{label}: sampling floor (a sample of the truth)")
            if len(periods) > len(periods_all):
                periods_all = list(periods)
        ax.set_ylim(bottom=0)
        _finish_axes(ax, periods_all, xlabel="time t", ylabel=name)
        ax.set_title(PANEL_TITLES[name], fontsize="medium")
    # one legend for the four panels (the same lines in each), below them: inside a
    # panel it covered the curves
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 2),
               frameon=False, fontsize="small")
    suptitle(fig, title or "Workload errors over time (Kumar et al. 2024, §7.3)", subtitle)
    return save_figure(fig, path)
