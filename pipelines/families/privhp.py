"""The ``privhp run`` job: PrivHP (Holland et al. 2025) over a file or directory of points.

One Beam pipeline: read and validate point batches → exact PrivHP state by a CombineFn
→ the synthesizer's one step (:class:`~continual_synth.mechanisms.privhp_synthesizer.
PrivHPSynthesizer`: noise, growth and consistency once, ε charged) → sharded sampling of the synthetic points with the
grown tree sent to each shard task (the manifest is one more task) → write.  Files are
published by :func:`continual_synth.pipelines.release.lifecycle.release_whole_run`: staged, and
moved into place with ``manifest.json`` last only when the whole pipeline has succeeded;
an error leaves the output directory without a release.

:func:`synthesize_numpy` is the same mechanism without Beam (all points in memory); with
the same seed it releases exactly the same points as :func:`run_privhp`.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np

from continual_synth.mechanisms import privhp
from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.record_checks import REFUSE, check_mode
from continual_synth.mechanisms.hierarchy import Bounds
from continual_synth.mechanisms.privhp_synthesizer import PrivHPSynthesizer
from continual_synth.mechanisms.synthesizer import PointsRelease
from continual_synth.pipelines.release import lifecycle, logs, release_dir
from continual_synth.pipelines.commands.options import (check_distinct_columns,
                                                        pipeline_options)
from continual_synth.transforms import storage
from continual_synth.transforms.files import check_format, detect_format, list_data_files
from continual_synth.transforms.invalid_records import sink_for
from continual_synth.transforms.privhp import (BuildPrivHP, ReadPointBatches,
                                               ReleasePrivHP, SampleSyntheticPoints,
                                               point_schema, read_point_batches)
from continual_synth.transforms.read import DEFAULT_BATCH_ROWS
from continual_synth.transforms.monitoring import (RECORDS_READ, SYNTHETIC_RECORDS_WRITTEN,
                                                   CountPeriodsReleased, CountRecords)
from continual_synth.transforms.write import WriteRecordBatches

__all__ = ["DEFAULT_SHARDS", "check_columns", "manifest_extras", "run_privhp",
           "read_unit_points", "synthesize_numpy"]

DEFAULT_SHARDS = 8


def check_columns(columns: Sequence[str], bounds: Bounds,
                  period_col: Optional[str] = None) -> None:
    """``--columns`` against ``--bounds`` and, for continual PrivHP, ``--period-col``
    (a column of its own: not read as a coordinate too)."""
    if not columns:
        raise InputError("--columns needs at least one column name")
    check_distinct_columns([("--columns", columns)]
                           + ([("--period-col", [period_col])] if period_col is not None
                              else []))
    if len(columns) != bounds.dims:
        raise InputError(f"--columns names {len(columns)} column(s) but --bounds gives "
                         f"{bounds.dims} pair(s)")


def manifest_extras(config: privhp.PrivHPConfig, columns, bounds: Bounds, samples: int,
                     num_shards: int, out_format: str, clip: bool,
                     depth_from: Optional[Dict]) -> Dict:
    extras = {
        "columns": list(columns),
        "bounds": bounds.to_list(),
        "samples": int(samples),
        "shards": int(num_shards),
        "format": out_format,
        "files": "synthetic-sSSSSS.<format>, one per shard",
        "clip": bool(clip),
        "w1_bound_input_scale": max(hi - lo for lo, hi in zip(bounds.low, bounds.high)),
    }
    if clip:  # how many were clipped is not released: an exact count is not private
        extras["clip_note"] = ("points outside the bounds were moved onto them; their "
                               "number is not released (it is not covered by epsilon)")
    if depth_from is not None:
        extras["depth_from"] = depth_from
    return extras


def run_privhp(input_path: str, output_dir: str, columns: Sequence[str], bounds: Bounds,
                config: privhp.PrivHPConfig, samples: int, *, seed: Optional[int] = None,
                in_format: Optional[str] = None, out_format: str = "parquet",
                clip: bool = False, num_shards: int = DEFAULT_SHARDS,
                batch_rows: int = DEFAULT_BATCH_ROWS, beam_args: Sequence[str] = (),
                depth_from: Optional[Dict] = None, invalid_records: str = REFUSE) -> Dict:
    """Run PrivHP over ``input_path`` and publish ``samples`` synthetic points and the
    manifest into ``output_dir``; return the manifest (``invalid_records``: refuse the
    input at its first invalid point, or drop each)."""
    check_columns(columns, bounds)
    check_format(out_format)
    sink = sink_for(check_mode(invalid_records), also_read=True)
    if samples < 0 or num_shards < 1:
        raise InputError("--samples must be ≥ 0 and --shards ≥ 1")
    if config.dims != bounds.dims:
        raise InputError("the configuration's dimension differs from the bounds'")
    reader = ReadPointBatches(input_path, columns, bounds, clip, in_format, batch_rows,
                              sink=sink)

    synthesizer = PrivHPSynthesizer(config, samples)

    def write(staging: str, plan_path: str) -> None:
        def save_manifest(state, release):
            manifest = synthesizer.manifest(state)
            manifest.update(manifest_extras(config, columns, bounds, samples, num_shards,
                                             out_format, clip, depth_from))
            release_dir.write_json_atomic(plan_path, manifest)

        with beam.Pipeline(options=pipeline_options(beam_args)) as pipeline:
            released = (pipeline
                        | "ReadPoints" >> reader
                        | "CountRead" >> CountRecords(RECORDS_READ, progress="points read")
                        | "PrivHP" >> BuildPrivHP(config)
                        | "Release" >> ReleasePrivHP(synthesizer, seed)
                        | "CountPeriods" >> CountPeriodsReleased(lambda _: 1))
            _ = (released
                 | "SamplePoints" >> SampleSyntheticPoints(num_shards, bounds, columns,
                                                           on_release=save_manifest)
                 | "CountWritten" >> CountRecords(SYNTHETIC_RECORDS_WRITTEN)
                 | "Write" >> WriteRecordBatches(storage.join(staging, "synthetic"),
                                                 out_format, point_schema(columns)))
        logs.record_metrics(pipeline)

    logs.LOGGER.info("reading %s", input_path)
    return lifecycle.release_whole_run(output_dir, write, {"mode": "privhp run"},
                                       f"{input_path}: the pipeline finished without a "
                                       f"manifest")


def read_unit_points(input_path: str, columns: Sequence[str], bounds: Bounds,
                     clip: bool = False, in_format: Optional[str] = None
                     ) -> Tuple[np.ndarray, int]:
    """All points of a dataset scaled to [0,1]^d (validated as in the pipeline)."""
    fmt = detect_format(input_path, in_format)
    parts, clipped = [], 0
    for path in list_data_files(input_path):
        for unit, count in read_point_batches(path, fmt, columns, bounds, clip):
            parts.append(unit)
            clipped += count
    points = np.concatenate(parts) if parts else np.zeros((0, bounds.dims))
    return points, clipped


def synthesize_numpy(input_path: str, columns: Sequence[str], bounds: Bounds,
                     config: privhp.PrivHPConfig, samples: int, *, seed: Optional[int] = None,
                     in_format: Optional[str] = None, clip: bool = False,
                     num_shards: int = DEFAULT_SHARDS) -> Tuple[PointsRelease, np.ndarray]:
    """The pure-numpy path: (release, synthetic points in the input's units), the shards
    concatenated in order as the Beam pipeline writes them."""
    check_columns(columns, bounds)
    unit, _ = read_unit_points(input_path, columns, bounds, clip, in_format)
    synthesizer = PrivHPSynthesizer(config, samples)
    _, release, _ = synthesizer.step_period(synthesizer.initial_state(), 1,
                                        privhp.accumulate(unit, config), seed)
    synthetic = [privhp.sample_shard(release.tree, release.size, num_shards, shard,
                                     release.emission_seed) for shard in range(num_shards)]
    unit_synthetic = np.concatenate(synthetic) if synthetic else np.zeros((0, config.dims))
    return release, bounds.from_unit(unit_synthetic)
