"""Wall time and peak memory: ``continual-synth window|cumulative run`` against a plain
numpy job doing the same (``bench/numpy_baseline.py``).

    python bench/perf.py --people 2000000                            # window, 2M x 12
    python bench/perf.py --people 2000000 --synthesizer cumulative   # Algorithm 2
    python bench/perf.py --people 10000000 --skip-baseline

Generates the panel once (``bench/make_panel.py``), then runs each job in its own
process and reads that process's wall time and peak resident memory (``os.wait4``).
Targets (issues #2, #3): the pipeline at most 1.5x the numpy script's wall time on
this 2-core machine, and 10 000 000 x 12 completing within 24 GiB.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PIPELINE = "run (DirectRunner)"


def measure(command):
    """(wall seconds, peak RSS in GiB) of one command run as a child process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}")
    return wall, usage.ru_maxrss / 2 ** 20


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--people", type=int, default=2_000_000)
    parser.add_argument("--periods", type=int, default=12)
    parser.add_argument("--synthesizer", choices=["window", "cumulative"], default="window")
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--rho", type=float, default=0.005)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--work-dir", default=os.path.join(HERE, "out"))
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--results", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    tag = f"{args.people // 1_000_000}m" if args.people >= 1_000_000 else str(args.people)
    panel = os.path.join(args.work_dir, f"panel_{tag}.parquet")
    if not os.path.exists(panel):
        subprocess.run([sys.executable, os.path.join(HERE, "make_panel.py"), "--people",
                        str(args.people), "--periods", str(args.periods), "--output", panel],
                       check=True)
    common = ["--horizon", str(args.periods), "--rho", str(args.rho)]
    window_option = ["--window", str(args.window)] if args.synthesizer == "window" else []
    rows = []
    for repeat in range(args.repeats):
        if not args.skip_baseline:
            out = os.path.join(args.work_dir, f"numpy_{tag}")
            subprocess.run(["rm", "-rf", out], check=True)
            wall, peak = measure([sys.executable, os.path.join(HERE, "numpy_baseline.py"),
                                  "--synthesizer", args.synthesizer, "--input", panel,
                                  "--output", out, "--seed", "0"] + common + window_option)
            rows.append({"job": "numpy baseline", "wall_s": wall, "peak_gib": peak})
        out = os.path.join(args.work_dir, f"pipeline_{tag}")
        subprocess.run(["rm", "-rf", out], check=True)
        wall, peak = measure([sys.executable, "-m", "continual_synth.pipelines.cli",
                              args.synthesizer, "run", "--input", panel, "--output", out,
                              "--seed", "0"] + common + window_option)
        rows.append({"job": PIPELINE, "wall_s": wall, "peak_gib": peak})
    print(f"{args.synthesizer}: {args.people} people x {args.periods} periods")
    print(f"{'job':28s} {'wall s':>8s} {'peak GiB':>9s}")
    for row in rows:
        print(f"{row['job']:28s} {row['wall_s']:8.2f} {row['peak_gib']:9.2f}")
    best = {job: min(r["wall_s"] for r in rows if r["job"] == job) for job in {r["job"] for r in rows}}
    summary = {"synthesizer": args.synthesizer, "people": args.people, "periods": args.periods, "runs": rows, "best_wall_s": best}
    if not args.skip_baseline:
        ratio = best[PIPELINE] / best["numpy baseline"]
        summary["pipeline_over_numpy"] = ratio
        print(f"pipeline / numpy = {ratio:.2f} (target <= 1.5)")
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, f"{args.synthesizer}_perf_{tag}.json"), "w") as handle:
        json.dump(summary, handle, indent=2)


if __name__ == "__main__":
    main()
