"""Time the tabular stream synthesizer's Beam jobs on ~1 000 periods of 50 records.

The stream is CCES 2016 "randomized" with batch size 50 (Kumar et al. 2024 §7.1),
1 000 periods, all 2-way workloads (91), IPF fit, simple counter, proposed method.

* ``tabular run`` (one Beam pipeline, DirectRunner): total wall time, and per period;
  the release holds one synthetic table per period (Σ_t |g_t| ≈ 25 million rows).
* ``tabular step`` (one period per run, as a DAG task would call it): wall time of
  ``--steps`` consecutive steps, each its own pair of Beam pipelines.

* ``--mechanism-only``: the state machine alone (``TabularSynthesizer.step``, what the
  jobs fold), per-step seconds over ``--periods`` periods (mean, p95, max), then
  ``--steps`` ``continual-synth tabular step`` commands as separate processes (the whole
  command line: start, imports, Beam pipelines, the step, writing).

    python bench/tabular_timing.py --periods 1000 --steps 20
    python bench/tabular_timing.py --periods 1000 --steps 3 --mechanism-only
    python bench/tabular_timing.py --periods 1000 --steps 5 --mechanism-only --epsilon 1000
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import pyarrow.compute as pc

from continual_synth.mechanisms.marginals import Domain, all_workloads
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
from continual_synth.pipelines.families import driver, tabular
from continual_synth.pipelines.examples.example_tables import (
    load_table, make_stream, table_domain)
from continual_synth.transforms.files import write_file


def synthesizer(horizon, epsilon=1.0, wide_cells=None):
    """The timed synthesizer; ``wide_cells`` None: the default of ``create`` (wide
    measurements of at most ``WIDE_CELLS`` cells), 0: off, as ``--wide-cells 0``."""
    domain = Domain(table_domain())
    options = {} if wide_cells is None else {"wide_cells": wide_cells}
    return TabularSynthesizer.create(domain=domain, workloads=all_workloads(domain),
                                     epsilon=epsilon, counter="simple", fit="ipf",
                                     horizon=horizon, **options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--periods", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--epsilon", type=float, default=1.0,
                        help="epsilon of the stream (default 1; the default selections "
                             "grow with it: k = 12 from about 19)")
    parser.add_argument("--wide-cells", type=int, default=None,
                        help="as the command's --wide-cells (default: the command's "
                             "default; 0: no wide measurements)")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--mechanism-only", action="store_true")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    if args.mechanism_only:
        figures = mechanism_timing(args)
        if args.out:
            with open(args.out, "w") as handle:
                json.dump(figures, handle, indent=1)
        return
    work = args.workdir or tempfile.mkdtemp(prefix="tabular-timing-")
    stream = make_stream(load_table(), "randomized", args.batch, seed=0,
                         periods=args.periods, domain=table_domain())
    stream_path = os.path.join(work, "stream.parquet")
    write_file(stream, stream_path, "parquet")
    figures = {"periods": args.periods, "batch": args.batch, "epsilon": args.epsilon,
               "wide_cells": args.wide_cells, "records": stream.num_rows}

    out = os.path.join(work, "run")
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    manifest = tabular.run(synthesizer(args.periods, args.epsilon, args.wide_cells),
                           stream_path, out, seed=1)
    seconds = time.perf_counter() - start
    rows = sum(pq_rows(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".parquet"))
    figures.update({"run_seconds": round(seconds, 1),
                    "run_seconds_per_period": round(seconds / args.periods, 3),
                    "released_rows": rows, "final_size": manifest["size"]})
    print(json.dumps(figures), flush=True)

    state, steps_out = os.path.join(work, "state"), os.path.join(work, "steps")
    for path in (state, steps_out):
        shutil.rmtree(path, ignore_errors=True)
    driver.init(state, tabular.initial_document(
        synthesizer(args.periods, args.epsilon, args.wide_cells), seed=1))
    step_seconds = time_steps(stream, work, args.steps,
                              lambda path: driver.step(state, path, steps_out))
    figures.update({"steps": args.steps,
                    "step_seconds_mean": round(sum(step_seconds) / len(step_seconds), 2),
                    "step_seconds_max": round(max(step_seconds), 2)})
    print(json.dumps(figures), flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(figures, handle, indent=1)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


def time_steps(stream, work, steps, run_step):
    """Seconds of ``run_step(path)`` for each of the first ``steps`` periods, each period's
    records written to its own Parquet file first."""
    seconds = []
    for period in range(1, steps + 1):
        part = stream.filter(pc.equal(stream["period"], period)).drop(["period"])
        path = os.path.join(work, f"p{period:04d}.parquet")
        write_file(part, path, "parquet")
        start = time.perf_counter()
        run_step(path)
        seconds.append(time.perf_counter() - start)
    return seconds


def mechanism_timing(args) -> dict:
    import subprocess
    import sys

    import numpy as np

    from continual_synth.mechanisms.marginals import encode_records, workload_histograms

    work = args.workdir or tempfile.mkdtemp(prefix="tabular-timing-")
    domain = Domain(table_domain())
    stream = make_stream(load_table(), "randomized", args.batch, seed=0,
                         periods=args.periods, domain=table_domain())
    codes = encode_records(stream, domain)
    period_of = stream["period"].to_numpy()
    synth = synthesizer(args.periods, args.epsilon, args.wide_cells)
    workloads = synth.input_workloads  # the workloads, then the wide sets
    state = synth.initial_state()
    seconds = []
    for period in range(1, args.periods + 1):
        flat = np.concatenate(workload_histograms(codes[period_of == period], domain,
                                                  workloads))
        start = time.perf_counter()
        state, _, _ = synth.step_period(state, period, flat, 1)
        seconds.append(time.perf_counter() - start)
    seconds = np.array(seconds)
    figures = {"periods": args.periods, "batch": args.batch, "epsilon": args.epsilon,
               "selections": synth.config.selections,
               "mechanism_seconds_total": round(float(seconds.sum()), 1),
               "mechanism_step_mean": round(float(seconds.mean()), 3),
               "mechanism_step_p95": round(float(np.percentile(seconds, 95)), 3),
               "mechanism_step_max": round(float(seconds.max()), 3),
               "mechanism_step_mean_last_100": round(float(seconds[-100:].mean()), 3)}
    print(json.dumps(figures), flush=True)
    domain_path = os.path.join(work, "domain.json")
    with open(domain_path, "w") as handle:
        json.dump(table_domain(), handle)
    state_dir, out_dir = os.path.join(work, "state"), os.path.join(work, "steps")
    cli = [sys.executable, "-m", "continual_synth"]  # as the continual-synth command
    subprocess.run(cli + ["tabular", "init", "--state", state_dir, "--domain", domain_path,
                          "--epsilon", str(args.epsilon), "--horizon", str(args.periods),
                          "--seed", "1", *([] if args.wide_cells is None
                                           else ["--wide-cells", str(args.wide_cells)])],
                   check=True, capture_output=True)
    step_seconds = time_steps(stream, work, args.steps, lambda path: subprocess.run(
        cli + ["tabular", "step", "--state", state_dir, "--input", path, "--output", out_dir],
        check=True, capture_output=True))
    figures.update({"cli_steps": args.steps,
                    "cli_step_seconds": [round(x, 2) for x in step_seconds]})
    print(json.dumps(figures), flush=True)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return figures


def pq_rows(path: str) -> int:
    import pyarrow.parquet as pq
    return pq.ParquetFile(path).metadata.num_rows


if __name__ == "__main__":
    main()
