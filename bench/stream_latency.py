"""`window stream` through a watched directory against `window step` per period.

    python bench/stream_latency.py --people 1000000 --periods 12 \\
        --output bench/results/stream_latency.md

For each period, in order: land its file (atomic rename) in the watched directory and
wait until the stream has released it (the state's committed version has the period
and nothing pending); latency = landing → release.  The baseline runs `window step`
(a fresh process per period, as a DAG task does) on a copy of the same files and the
same options; its latency is the process's wall time.  Both use the seeded sampler and
the same per-period seeds, so the two releases are checked equal at the end.

Reported: per-period latency (stream and step, and their ratio), records per second
(people × periods / the stream's total release time), peak memory (max RSS) of the
stream process and of the largest step process, from ``wait4``, and the stream's resident
memory after each release (``VmRSS``), to show whether a long-running stream grows.

    python bench/stream_latency.py --people 200000 --periods 120 --skip-steps \
        --output bench/results/stream_memory.md      # a long stream's memory only

The machine is shared (2 cores, several engineers): the load average at start and end is
in the report.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from continual_synth.mechanisms.errors import StateError
from continual_synth.pipelines.release.lifecycle import load_state

CLI = [sys.executable, "-m", "continual_synth"]


def write_period_files(people: int, periods: int, directory: str, seed: int = 0) -> list:
    """One Parquet file per period (id, value): the Markov panel of bench/make_panel.py."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    state = rng.random(people) < 0.12
    ids = np.arange(people, dtype=np.int64)
    paths = []
    for t in range(1, periods + 1):
        stay = rng.random(people)
        state = np.where(state, stay < 0.85, stay < 0.02)
        path = os.path.join(directory, f"period_{t:02d}.parquet")
        pq.write_table(pa.table({"id": ids, "value": state.astype(np.int64)}), path)
        paths.append(path)
    return paths


def released(state_dir: str) -> int:
    try:
        state = load_state(state_dir)
    except StateError:
        return 0
    return -1 if state["pending"] else state["synthesizer_state"]["period"]


def finish(process: subprocess.Popen):
    """(exit status, peak RSS in MiB) of a child, from wait4."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_maxrss / 1024


def resident_mib(pid: int) -> float:
    """The process's resident memory now (``VmRSS``, Linux), in MiB."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_stream(paths, root, options, poll):
    watch, state, out = (os.path.join(root, name) for name in ("watch", "state", "out"))
    os.makedirs(watch)
    log = open(os.path.join(root, "stream.log"), "w")
    process = subprocess.Popen(CLI + ["window", "stream", "--watch", watch, "--state", state,
                                      "--output", out, "--until-period", str(len(paths)),
                                      "--poll-interval", str(poll), *options],
                               stdout=subprocess.DEVNULL, stderr=log)
    while not os.path.exists(os.path.join(state, "versions")):  # started and initialised
        time.sleep(0.05)
    time.sleep(2 * poll)
    latencies, resident = [], []
    for period, path in enumerate(paths, start=1):
        hidden = os.path.join(watch, "." + os.path.basename(path))
        shutil.copyfile(path, hidden)
        landed = time.monotonic()
        os.replace(hidden, os.path.join(watch, os.path.basename(path)))
        while released(state) != period:
            if process.poll() is not None:
                raise SystemExit(f"the stream exited ({process.returncode}); see {log.name}")
            time.sleep(0.02)
        latencies.append(time.monotonic() - landed)
        resident.append(resident_mib(process.pid))
        print(f"stream period {period}: {latencies[-1]:.2f} s, {resident[-1]:.0f} MiB",
              flush=True)
    status, rss = finish(process)
    if status != 0:
        raise SystemExit(f"the stream exited with {status}; see {log.name}")
    with open(log.name) as handle:  # the lifecycle step's own time inside the stream
        events = [json.loads(line) for line in handle if line.startswith("{")]
    inside = {e["period"]: e["seconds"] for e in events if "seconds" in e}
    return latencies, [inside.get(p) for p in range(1, len(paths) + 1)], rss, resident, out


def run_steps(paths, root, options):
    state, out = os.path.join(root, "state"), os.path.join(root, "out")
    subprocess.run(CLI + ["window", "init", "--state", state, *options], check=True,
                   stdout=subprocess.DEVNULL)
    latencies, peak = [], 0.0
    for period, path in enumerate(paths, start=1):
        started = time.monotonic()
        process = subprocess.Popen(CLI + ["window", "step", "--state", state, "--input", path,
                                          "--output", out], stdout=subprocess.DEVNULL)
        status, rss = finish(process)
        if status != 0:
            raise SystemExit(f"window step for period {period} exited with {status}")
        latencies.append(time.monotonic() - started)
        peak = max(peak, rss)
        print(f"step period {period}: {latencies[-1]:.2f} s", flush=True)
    return latencies, peak, out


def same_release(a: str, b: str) -> bool:
    def table(directory):
        files = sorted(f for f in os.listdir(directory) if f.endswith(".parquet"))
        t = pa.concat_tables(pq.read_table(os.path.join(directory, f)) for f in files)
        return t.sort_by([("synthetic_id", "ascending"), ("period", "ascending")])
    return table(a).equals(table(b))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--people", type=int, default=1_000_000)
    parser.add_argument("--periods", type=int, default=12)
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--poll-interval", type=float, default=0.5)
    parser.add_argument("--skip-steps", action="store_true",
                        help="run the stream only (its latency and memory), no step baseline")
    parser.add_argument("--output", default="bench/results/stream_latency.md")
    parser.add_argument("--workdir", default=None, help="scratch (default: a temp dir)")
    args = parser.parse_args()
    root = args.workdir or tempfile.mkdtemp(prefix="stream-latency-")
    options = ["--window", str(args.window), "--horizon", str(args.periods), "--rho", "1",
               "--seed", "1", "--shards", str(args.shards)]
    load_start = os.getloadavg()
    paths = write_period_files(args.people, args.periods, os.path.join(root, "periods"))
    stream_lat, stream_step, stream_rss, resident, stream_out = run_stream(
        paths, os.path.join(root, "stream"), options, args.poll_interval)
    records = args.people * args.periods
    result = {"people": args.people, "periods": args.periods, "window": args.window,
              "shards": args.shards, "poll_interval": args.poll_interval,
              "stream_latency_s": stream_lat, "stream_step_s": stream_step,
              "stream_resident_mib": resident,
              "stream_records_per_s": records / sum(stream_lat),
              "stream_peak_rss_mib": stream_rss, "cpus": os.cpu_count()}
    if not args.skip_steps:
        step_lat, step_rss, step_out = run_steps(paths, os.path.join(root, "steps"), options)
        result.update({"step_latency_s": step_lat,
                       "ratio": [s / t for s, t in zip(stream_lat, step_lat)],
                       "step_records_per_s": records / sum(step_lat),
                       "step_peak_rss_mib": step_rss,
                       "releases_equal": same_release(stream_out, step_out)})
    result.update({"load_average_start": load_start, "load_average_end": os.getloadavg()})
    write_report(result, args.output)
    shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, list)}, indent=2))


def resident_growth(resident) -> float:
    """MiB per period of the least-squares line through the second half's resident memory
    (after the warm-up: the first half holds the imports' and first bundles' growth)."""
    half = np.asarray(resident[len(resident) // 2:], dtype=float)
    if half.size < 2:
        return float("nan")
    return float(np.polyfit(np.arange(half.size), half, 1)[0])


def write_report(result: dict, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    steps = "step_latency_s" in result
    periods = range(1, result["periods"] + 1)
    shown = [p for p in periods if result["periods"] <= 24 or p <= 3 or p % 10 == 0
             or p == result["periods"]]
    rows = []
    for p in shown:
        cells = [f"{result['stream_latency_s'][p - 1]:.2f}", f"{result['stream_step_s'][p - 1]:.2f}",
                 f"{result['stream_resident_mib'][p - 1]:.0f}"]
        if steps:
            cells += [f"{result['step_latency_s'][p - 1]:.2f}", f"{result['ratio'][p - 1]:.2f}"]
        rows.append(f"| {p} | " + " | ".join(cells) + " |")
    header = ("| period | stream: landing → release (s) | of which the lifecycle step (s) | "
              "stream resident after the release (MiB) |")
    rule = "|---|---|---|---|"
    if steps:
        header += " `window step` process (s) | ratio stream / step |"
        rule += "---|---|"
    title = "`window stream` vs `window step`" if steps else "`window stream` alone"
    command = (f"python bench/stream_latency.py --people {result['people']} --periods "
               f"{result['periods']} --window {result['window']} --shards {result['shards']} "
               f"--poll-interval {result['poll_interval']}" + ("" if steps else " --skip-steps"))
    resident = result["stream_resident_mib"]
    lines = [
        "- landing → release includes the wait for two listings (a file is taken when it is",
        "  unchanged one listing after it appeared: between 1 and 2 poll intervals).",
        f"- stream resident memory: {resident[0]:.0f} MiB after period 1, "
        f"{max(resident):.0f} MiB at most, {resident[-1]:.0f} MiB after the last; "
        f"growth over the second half {resident_growth(resident):+.2f} MiB per period",
        f"- records per second: stream {result['stream_records_per_s']:,.0f}"
        + (f", step {result['step_records_per_s']:,.0f}" if steps else ""),
        f"- peak memory (max RSS): stream process {result['stream_peak_rss_mib']:.0f} MiB "
        f"(the whole run)" + (f", largest step process {result['step_peak_rss_mib']:.0f} MiB"
                              if steps else "")]
    if steps:
        lines[2:2] = ["- the `step` column is a whole `window step` process (start-up, imports, "
                      "the same lifecycle step), as a scheduler runs it once per period."]
        lines += [f"- median ratio stream / step: **{float(np.median(result['ratio'])):.2f}** "
                  f"(target ≤ 1.2); worst {max(result['ratio']):.2f}",
                  f"- the two releases are identical: {result['releases_equal']}"]
    text = (f"## {title}: {result['people']:,} people × {result['periods']} periods\n\n"
            f"Command: `{command}`\n\n"
            f"Machine: {result['cpus']} cores; load average "
            f"{result['load_average_start'][0]:.1f} at start, "
            f"{result['load_average_end'][0]:.1f} at end.\n\n"
            + "\n".join([header, rule, *rows]) + "\n\n" + "\n".join(lines) + "\n\n")
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)
    with open(os.path.splitext(path)[0] + ".json", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
