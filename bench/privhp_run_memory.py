"""Peak memory of ``privhp run --horizon T`` against the stream's size.

``run --horizon`` reads the stream one period at a time
(:func:`continual_synth.pipelines.families.privhp_continual.period_accumulators`), so its peak
memory should not grow with the number of points (it follows the largest file: the
reader buffers one file).  For each (n, T), uniform 2-D points in T parquet files (one
per period) are released by continual PrivHP (M = 65 536 words,
r = 20, prune_k = 64, ε = 1, 1 000 synthetic points per period) in a fresh process whose
peak resident set size (ru_maxrss) is reported with its wall and CPU seconds and the
1-minute load average.

    python bench/privhp_run_memory.py [--runs 2000000:8,8000000:8,8000000:32]

Writes bench/results/privhp_run_memory.{md,json}.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import RESULTS, write_result  # noqa: E402  (bench/harness.py)

CHILD = """
import json, resource, sys, time
from continual_synth.mechanisms.continual_privhp import ContinualPrivHPConfig
from continual_synth.mechanisms.hierarchy import Bounds
from continual_synth.pipelines.families import privhp_continual
stream, out, periods = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = ContinualPrivHPConfig.create(horizon=periods, memory=65536, epsilon=1.0, dims=2,
                                      prune_k=64, depth=20)
wall, cpu = time.time(), time.process_time()
privhp_continual.run(config, stream, out, ["x", "y"], Bounds((0.0, 0.0), (1.0, 1.0)),
                      1000, seed=1)
print(json.dumps({"wall_s": time.time() - wall, "cpu_s": time.process_time() - cpu,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", default="2000000:8,8000000:8,8000000:32",
                        help="n:periods pairs")
    parser.add_argument("--row-group", type=int, default=1 << 18,
                        help="parquet row-group size of the stream's files (pyarrow decodes a "
                             "whole row group at a time)")
    parser.add_argument("--out", default=os.path.join(RESULTS, "privhp_run_memory"))
    args = parser.parse_args()
    rows = []
    for n, periods in (map(int, v.split(":")) for v in args.runs.split(",")):
        with tempfile.TemporaryDirectory() as root:
            stream = os.path.join(root, "stream")
            os.makedirs(stream)
            rng = np.random.default_rng(0)
            for t in range(1, periods + 1):
                m = n // periods
                pq.write_table(pa.table({"x": rng.random(m), "y": rng.random(m),
                                         "period": np.full(m, t)}),
                               os.path.join(stream, f"p{t:02d}.parquet"),
                               row_group_size=args.row_group)
            done = subprocess.run([sys.executable, "-c", CHILD, stream,
                                   os.path.join(root, "out"), str(periods)],
                                  check=True, capture_output=True, text=True)
            row = {"n": n, "periods": periods,
                   **json.loads(done.stdout.strip().splitlines()[-1]),
                   "load_1min": os.getloadavg()[0],
                   "points_mb": n * 3 * 8 / 2 ** 20,
                   "file_mb": os.path.getsize(os.path.join(stream, "p01.parquet")) / 2 ** 20}
            rows.append(row)
            print(row, flush=True)
    lines = ["# Peak memory of `privhp run --horizon` (continual PrivHP, one period at a time)",
             "", "python bench/privhp_run_memory.py: uniform 2-D points, one parquet file per "
             f"period in row groups of {args.row_group:,} rows, M = 65 536 words, r = 20, prune_k = 64, ε = 1, 1 000 synthetic points "
             "per period; a fresh process per n (peak RSS includes Python, numpy, pyarrow "
             "and Beam).  *points* = the size of the stream as float64 x, y, period; *file* "
             "= one period's file.", "",
             "| n | periods | points (MB) | file (MB) | peak RSS (MB) | wall s | CPU s | "
             "1-min load |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['n']:,} | {r['periods']} | {r['points_mb']:.0f} | "
              f"{r['file_mb']:.1f} | {r['peak_rss_mb']:.0f} "
              f"| {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['load_1min']:.2f} |" for r in rows]
    write_result(args.out, rows, "\n".join(lines))


if __name__ == "__main__":
    main()
