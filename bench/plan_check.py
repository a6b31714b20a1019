"""``plan tabular``'s prediction against the measured error on the shipped example.

For each stream shape (B records a period, T periods) and ε the same synthesizer —
built from the command line's options by ``tabular_cli.synthesizer_from_args``, the
library's defaults — is

* **planned**: ``continual-synth plan tabular``'s simulation
  (:func:`continual_synth.mechanisms.tabular_planning.expected_error`) on ``--repeats``
  public synthetic tables of the domain's shape, which never see the example's data;
* **measured**: run over the shipped example (``continual-synth tabular example``: CCES
  2016, the randomized construction) for each stream seed of ``--seeds`` (its order and
  the noise), and scored the same way
  (:func:`~continual_synth.mechanisms.tabular_planning.score_stream`: AvgWE of the sampled
  release against the stream so far, averaged over the last 10 periods).

The ratio measured / predicted is the claim: ``plan`` is within a factor 2 of the
measured AvgWE.  The first shape is the guide's example (``tabular example --batch-size
50 --periods 100``); the others check shapes the prediction was not looked at for.

    python bench/plan_check.py
    python bench/plan_check.py --shapes 50x100 --epsilons 1 --repeats 1 --seeds 0
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import RESULTS, Timer, command_line, parse_seeds, write_result  # noqa: E402

from continual_synth.mechanisms.marginals import encode_records  # noqa: E402
from continual_synth.mechanisms.tabular_planning import (expected_error,  # noqa: E402
                                                          score_stream)
from continual_synth.pipelines.commands.cli import build_parser  # noqa: E402
from continual_synth.pipelines.examples.example_tables import (  # noqa: E402
    load_table, make_stream, write_domain)
from continual_synth.pipelines.families.tabular import read_domain  # noqa: E402
from continual_synth.pipelines.commands.tabular_cli import (  # noqa: E402
    synthesizer_from_args)

FACTOR = 2.0


def synthesizer(domain_path: str, batch: int, horizon: int, epsilon: float):
    """The synthesizer ``plan tabular`` (and ``tabular run``) builds from these options."""
    args = build_parser().parse_args(["plan", "tabular", "--domain", domain_path,
                                      "--batch-size", str(batch), "--horizon", str(horizon),
                                      "--epsilon", repr(epsilon)])
    return synthesizer_from_args(args, domain=read_domain(domain_path))


def measured(synth, table, batch: int, horizon: int, seeds):
    """AvgWE etc. of the synthesizer on the example's randomized stream, per seed."""
    runs = []
    for seed in seeds:
        stream = make_stream(table, "randomized", batch, seed=seed, periods=horizon,
                             domain=synth.domain.to_dict())
        codes = encode_records(stream, synth.domain)
        runs.append({"seed": seed, **score_stream(synth, codes, batch, seed)})
        print(f"  measured seed {seed}: AvgWE {runs[-1]['AvgWE']:.5f}", flush=True)
    return runs


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="50x100,200x60,25x200",
                        help="BxT stream shapes (the first is the guide's example)")
    parser.add_argument("--epsilons", default="0.5,1,2")
    parser.add_argument("--repeats", type=int, default=3, help="plan's simulated streams")
    parser.add_argument("--seeds", default="0-2", help="the example's stream seeds")
    parser.add_argument("--out", default=os.path.join(RESULTS, "plan_check"),
                        help="result stem (writes STEM.json and STEM.md)")
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    table = load_table()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Timer() as timer:
        domain_path = write_domain(os.path.join(tmp, "domain.json"))
        for shape in args.shapes.split(","):
            batch, horizon = (int(v) for v in shape.split("x"))
            for epsilon in (float(e) for e in args.epsilons.split(",")):
                print(f"B = {batch}, T = {horizon}, epsilon = {epsilon:g}", flush=True)
                synth = synthesizer(domain_path, batch, horizon, epsilon)
                plan = expected_error(synth, batch, horizon, range(args.repeats))
                runs = measured(synth, table, batch, horizon, seeds)
                truth = float(np.mean([r["AvgWE"] for r in runs]))
                rows.append({
                    "batch": batch, "horizon": horizon, "epsilon": epsilon,
                    "predicted_avg_we": plan["expected_avg_we"],
                    "predicted_max_we": plan["expected_max_we"],
                    "predicted_floor": plan["sampling_floor_avg_we"],
                    "measured_avg_we": truth,
                    "measured_max_we": float(np.mean([r["MaxWE"] for r in runs])),
                    "measured_floor": float(np.mean([r["floor_AvgWE"] for r in runs])),
                    "ratio": truth / plan["expected_avg_we"],
                    "plan_seeds": plan["seeds"], "measured_seeds": seeds,
                    "plan_runs": plan["runs"], "measured_runs": runs})
                print(f"  predicted {plan['expected_avg_we']:.5f}, measured {truth:.5f}, "
                      f"ratio {rows[-1]['ratio']:.2f}", flush=True)
    text = markdown(rows, args, command_line(), timer.wall)
    write_result(args.out, {"rows": rows, "factor": FACTOR, "seconds": timer.wall}, text)
    print(text)


def markdown(rows, args, argv: str, seconds: float) -> str:
    within = all(1 / FACTOR <= r["ratio"] <= FACTOR for r in rows)
    lines = ["# plan tabular against the shipped example", "",
             f"`{argv}` ({seconds:.0f} s).  Predicted: `plan tabular`'s mean AvgWE over "
             f"{args.repeats} public synthetic tables of the domain's shape (seeds "
             f"0..{args.repeats - 1}); measured: the same synthesizer (library defaults) on "
             f"the CCES 2016 example's randomized stream, mean over stream seeds "
             f"{args.seeds}.  Both: AvgWE of the sampled release against the stream so far, "
             f"averaged over the last 10 periods.  Ratio = measured / predicted; the claim "
             f"is a ratio within [1/{FACTOR:g}, {FACTOR:g}] everywhere: "
             f"**{'holds' if within else 'fails'}**.", "",
             "| B | T | ε | predicted AvgWE | measured AvgWE | ratio | predicted MaxWE | "
             "measured MaxWE | floor (public) | floor (example) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['batch']} | {r['horizon']} | {r['epsilon']:g} | "
                     f"{r['predicted_avg_we']:.5f} | {r['measured_avg_we']:.5f} | "
                     f"{r['ratio']:.2f} | {r['predicted_max_we']:.4f} | "
                     f"{r['measured_max_we']:.4f} | {r['predicted_floor']:.5f} | "
                     f"{r['measured_floor']:.5f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
