"""Throughput of ``privhp run`` (PrivHP through the Beam pipeline) in points per second.

Generates n points in d = 2 (a mixture of clusters) as Parquet files, then times

* the Beam pipeline (:func:`continual_synth.pipelines.families.privhp.run_privhp`, DirectRunner,
  read + validate + CombineFn pass + release + sampling + write), once per Beam
  configuration given by ``--beam`` (e.g. the default in-process runner, and
  ``--direct_num_workers 2 --direct_running_mode multi_processing``), and
* the pure-numpy path (read all points, one pass, release, sampling; no writing) for
  comparison.

    python bench/privhp_throughput.py [--n 3000000] [--files 4] [--samples 1000000]

Writes bench/results/privhp_throughput.{json,md}.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from continual_synth.mechanisms import privhp
from continual_synth.mechanisms.hierarchy import Bounds
from continual_synth.pipelines.families.privhp import run_privhp, synthesize_numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import RESULTS, Timer, write_result  # noqa: E402  (bench/harness.py)

BEAM_CONFIGS = {
    "DirectRunner (default, in-process)": [],
    "DirectRunner, 2 workers multi_processing": ["--direct_num_workers", "2",
                                                 "--direct_running_mode", "multi_processing"],
}


def make_input(path, n, files, seed=0):
    rng = np.random.default_rng(seed)
    os.makedirs(path, exist_ok=True)
    centres = rng.random((8, 2))
    for i, size in enumerate(np.full(files, n // files)):
        pts = np.clip(centres[rng.integers(0, 8, size)] + rng.normal(0, 0.01, (size, 2)), 0, 1)
        pq.write_table(pa.table({"x": pts[:, 0] * 360 - 180, "y": pts[:, 1] * 180 - 90}),
                       os.path.join(path, f"part-{i:03d}.parquet"), row_group_size=1 << 18)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--prune-k", type=int, default=256)
    parser.add_argument("--depth", type=int, default=22)
    parser.add_argument("--sketch-width", type=int, default=2048)
    parser.add_argument("--sketch-depth", type=int, default=3)
    parser.add_argument("--configs", default="all", help="comma-separated indexes or 'all'")
    parser.add_argument("--out", default=os.path.join(RESULTS, "privhp_throughput"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="privhp-throughput-")
    try:
        data = os.path.join(work, "points")
        make_input(data, args.n, args.files)
        n = args.n // args.files * args.files
        bounds = Bounds.parse("-180:180,-90:90", 2)
        config = privhp.PrivHPConfig(epsilon=1.0, dims=2, prune_k=args.prune_k,
                                     depth=args.depth, sketch_width=args.sketch_width,
                                     sketch_depth=args.sketch_depth)
        rows = []
        with Timer() as timer:
            synthesize_numpy(data, ["x", "y"], bounds, config, args.samples, seed=1)
        seconds = timer.wall
        rows.append({"path": "pure numpy (no write)", "seconds": seconds,
                     "points_per_second": n / seconds})
        print(f"numpy: {seconds:.1f}s, {n / seconds:,.0f} points/s", flush=True)
        names = list(BEAM_CONFIGS)
        chosen = names if args.configs == "all" else [names[int(i)] for i in
                                                      args.configs.split(",")]
        for i, name in enumerate(chosen):
            out = os.path.join(work, f"release-{i}")
            with Timer() as timer:
                manifest = run_privhp(data, out, ["x", "y"], bounds, config, args.samples,
                                       seed=1, beam_args=BEAM_CONFIGS[name])
            seconds = timer.wall
            rows.append({"path": f"Beam: {name}", "seconds": seconds,
                         "points_per_second": n / seconds,
                         "memory_counters": manifest["memory_counters"]})
            print(f"{name}: {seconds:.1f}s, {n / seconds:,.0f} points/s", flush=True)
        meta = {"n": n, "files": args.files, "dims": 2, "samples": args.samples,
                "prune_k": args.prune_k, "depth": args.depth, "sketch_width": args.sketch_width,
                "sketch_depth": args.sketch_depth, "memory_counters": config.memory_counters,
                "cpu_count": os.cpu_count(),
                "note": "wall time of the whole job, including reading, the one-pass combine, "
                        "noise and growth, sampling and writing the synthetic points"}
        lines = [f"# PrivHP `privhp run` throughput (n = {n:,} points, d = 2, {args.files} "
                 f"Parquet files, {args.samples:,} synthetic points, prune_k = {args.prune_k},"
                 f" r = {args.depth}, w × j = {args.sketch_width} × {args.sketch_depth}, "
                 f"{os.cpu_count()} cores)", "",
                 "| path | wall time (s) | input points / s |", "|---|---|---|"]
        lines += [f"| {r['path']} | {r['seconds']:.1f} | {r['points_per_second']:,.0f} |"
                  for r in rows]
        write_result(args.out, {"meta": meta, "rows": rows}, "\n".join(lines), indent=2)
        print("\n".join(lines))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
