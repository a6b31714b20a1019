"""Wall time and peak memory: ``continual-synth window|cumulative run`` against a plain
numpy job doing the same (``bench/numpy_baseline.py``), on panels sorted by id and in
arrival order (rows grouped by period, sparse ids in no order within a period).

    python bench/perf.py --people 2000000                            # window, sorted, 2M x 12
    python bench/perf.py --people 2000000 --synthesizer cumulative   # Algorithm 2
    python bench/perf.py --people 2000000 --synthesizer window cumulative \\
        --order sorted arrival --repeats 2 --table perf_orders_2m.md   # the 2 x 2 table
    python bench/perf.py --people 10000000 --skip-baseline

Generates each panel once (``bench/make_panel.py --order``), then runs each job in its own
process, the baselines and the pipeline alternately, and reads that process's wall time
and peak resident memory (``os.wait4``) and the 1-minute load average before it (the
machine has 2 cores; a load above 2 means other work shared them).
Targets: the pipeline at most 1.0x the numpy script's wall time
on both orders and both synthesizers; 10 000 000 x 12 completing within 24 GiB.

Two baselines: the plain script (glibc's malloc defaults, as any script runs), and the
same script with the allocator settings the console command gives itself
(``continual_synth.launch.ALLOCATOR_ENVIRON``), so that a reader sees how much of the
ratio is the pipeline and how much the allocator.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from continual_synth.launch import ALLOCATOR_ENVIRON

HERE = os.path.dirname(os.path.abspath(__file__))
PIPELINE = "run (DirectRunner)"
BASELINE = "numpy baseline"
BASELINE_ALLOCATOR = "numpy baseline, the CLI's allocator"
PLAIN = {name: value for name, value in os.environ.items() if name not in ALLOCATOR_ENVIRON}


def measure(command, environ=None):
    """(wall seconds, peak RSS in GiB, 1-min load average before) of one child process."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=environ or PLAIN)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}")
    return wall, usage.ru_maxrss / 2 ** 20, load


def panel_path(work_dir, people, periods, order):
    """The benchmark panel of this size and order, generated if absent."""
    tag = f"{people // 1_000_000}m" if people >= 1_000_000 else str(people)
    suffix = "" if order == "sorted" else f"_{order}"
    path = os.path.join(work_dir, f"panel_{tag}{suffix}.parquet")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(HERE, "make_panel.py"), "--people",
                        str(people), "--periods", str(periods), "--order", order,
                        "--output", path], check=True)
    return tag, path


def bench(args, synthesizer, order):
    """Runs of one synthesizer on one panel order; returns the summary dict."""
    tag, panel = panel_path(args.work_dir, args.people, args.periods, order)
    common = ["--horizon", str(args.periods), "--rho", str(args.rho), "--seed", "0"]
    if synthesizer == "window":
        common += ["--window", str(args.window)]
    def baseline(out):
        return [sys.executable, os.path.join(HERE, "numpy_baseline.py"), "--synthesizer",
                synthesizer, "--input", panel, "--output", out]

    jobs = [] if args.skip_baseline else [(BASELINE, baseline, None),
                                          (BASELINE_ALLOCATOR, baseline,
                                           {**PLAIN, **ALLOCATOR_ENVIRON})]
    jobs.append((PIPELINE, lambda out: [sys.executable, "-m", "continual_synth",
                                        synthesizer, "run", "--input", panel,
                                        "--output", out], None))
    rows = []
    for _ in range(args.repeats):
        for job, command, environ in jobs:
            out = os.path.join(args.work_dir, f"out_{synthesizer}_{order}_{tag}")
            subprocess.run(["rm", "-rf", out], check=True)
            wall, peak, load = measure(command(out) + common, environ)
            rows.append({"job": job, "wall_s": wall, "peak_gib": peak, "load_before": load})
            print(f"{synthesizer:10s} {order:8s} {job:20s} {wall:8.2f} s {peak:6.2f} GiB "
                  f"load {load:.2f}", flush=True)
            subprocess.run(["rm", "-rf", out], check=True)
    best = {job: min(r["wall_s"] for r in rows if r["job"] == job) for job, _, _ in jobs}
    summary = {"synthesizer": synthesizer, "order": order, "people": args.people,
               "periods": args.periods, "runs": rows, "best_wall_s": best}
    if not args.skip_baseline:
        summary["pipeline_over_numpy"] = best[PIPELINE] / best[BASELINE]
        summary["pipeline_over_numpy_same_allocator"] = best[PIPELINE] / best[BASELINE_ALLOCATOR]
    name = f"{synthesizer}_perf_{tag}" + ("" if order == "sorted" else f"_{order}")
    with open(os.path.join(args.results, name + ".json"), "w") as handle:
        json.dump(summary, handle, indent=2)
    return summary


def markdown(summaries, people, periods) -> str:
    lines = [f"{people:,} people x {periods} periods; best of the repeats; wall seconds "
             f"(peak GiB); load = 1-minute load average before each run (2 cores).", "",
             "| synthesizer | order | numpy baseline | numpy, the CLI's allocator | "
             "pipeline (DirectRunner) | pipeline / numpy | pipeline / numpy, same allocator "
             "| load range |", "|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        cells = []
        for job in (BASELINE, BASELINE_ALLOCATOR, PIPELINE):
            runs = [r for r in s["runs"] if r["job"] == job]
            best = min(runs, key=lambda r: r["wall_s"]) if runs else None
            cells.append(f"{best['wall_s']:.1f} s ({best['peak_gib']:.2f})" if best else "—")
        loads = [r["load_before"] for r in s["runs"]]
        ratios = [s.get(key) for key in ("pipeline_over_numpy",
                                         "pipeline_over_numpy_same_allocator")]
        lines.append(f"| {s['synthesizer']} | {s['order']} | {' | '.join(cells)} | "
                     + " | ".join("—" if r is None else f"{r:.2f}" for r in ratios)
                     + f" | {min(loads):.1f}–{max(loads):.1f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=2_000_000)
    parser.add_argument("--periods", type=int, default=12)
    parser.add_argument("--synthesizer", nargs="+", choices=["window", "cumulative"],
                        default=["window"])
    parser.add_argument("--order", nargs="+", choices=["sorted", "arrival"],
                        default=["sorted"])
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--rho", type=float, default=0.005)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--work-dir", default=os.path.join(HERE, "out"))
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--results", default=os.path.join(HERE, "results"))
    parser.add_argument("--table", default=None,
                        help="also write a markdown table to this file under --results")
    args = parser.parse_args()
    os.makedirs(args.results, exist_ok=True)
    summaries = [bench(args, synthesizer, order)
                 for order in args.order for synthesizer in args.synthesizer]
    table = markdown(summaries, args.people, args.periods)
    print(table)
    if args.table:
        with open(os.path.join(args.results, args.table), "w") as handle:
            handle.write(table)


if __name__ == "__main__":
    main()
