"""A plain single-process numpy job doing what ``continual-synth window run`` (Algorithm 1)
or ``continual-synth cumulative run`` (Algorithm 2) does: read the long Parquet panel,
pivot, synthesize, write long Parquet.

It reuses the library's numpy kernels and its Parquet encoding rule (the point is to
measure what Beam costs on top of the same arithmetic and the same files), but no Beam,
no shards and no staging: one file, one row group per period.

    python bench/numpy_baseline.py --input panel.parquet --output out/ --window 3 --horizon 12 --rho 0.005
    python bench/numpy_baseline.py --synthesizer cumulative --input panel.parquet --output out/ --horizon 12 --rho 0.005
"""
import argparse
import os
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from continual_synth.mechanisms import emission, panel, window
from continual_synth.mechanisms.cumulative import CumulativeConfig
from continual_synth.mechanisms.panel_synthesizers import (CumulativeSynthesizer,
                                                          WindowSynthesizer)
from continual_synth.mechanisms.synthesizer import PanelStatistics
from continual_synth.transforms.synthesize import emission_plan

# The project's Parquet encoding rule, transforms.files.PARQUET_DICTIONARY_PAGE_BYTES
# (not imported: that module loads Beam, 0.9 CPU s and 100 MB this script does not use).
PARQUET_DICTIONARY_PAGE_BYTES = 1 << 16


def synthesize(input_path, output_dir, model, seed):
    table = pq.read_table(input_path)
    codes = panel.encode_values(table.column("value").to_numpy(), model.alphabet)
    _, matrix = panel.pivot(table.column("id").to_numpy(), table.column("period").to_numpy(),
                            codes, 1, model.horizon)
    del table, codes
    statistics = model.panel_statistics(matrix)
    population = matrix.shape[0]
    del matrix
    state, code_counts, people = model.initial_state(), None, None
    alphabet = np.asarray(model.alphabet)
    schema = pa.schema([("synthetic_id", pa.int64()), ("period", pa.int32()),
                        ("value", pa.int64())])
    os.makedirs(output_dir, exist_ok=True)
    with pq.ParquetWriter(os.path.join(output_dir, "synthetic.parquet"), schema,
                          dictionary_pagesize_limit=PARQUET_DICTIONARY_PAGE_BYTES) as writer:
        def write(period, values):
            writer.write_table(pa.table({
                "synthetic_id": people.ids, "period": np.full(values.size, period, np.int32),
                "value": alphabet[values]}, schema=schema))

        for period in range(1, model.horizon + 1):
            stepped = model.step_period(state, period,
                                    PanelStatistics(statistics[period - 1], population), seed)
            state, release = stepped.state, stepped.release
            if release is None:
                continue
            plan, code_counts, _ = emission_plan(model, stepped, 1, code_counts)
            if "initial" in plan:
                people, created = emission.ShardPeople.create(0, plan["initial"][0],
                                                              model.codes, stepped.sampler.rng)
                first = period - created.shape[1] + 1
                for j in range(created.shape[1]):
                    write(first + j, created[:, j])
            if "extension" in plan:
                write(period, people.extend(plan["extension"][0], stepped.sampler.rng))
    return state


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--horizon", type=int, default=12)
    parser.add_argument("--rho", type=float, default=0.005)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--synthesizer", choices=["window", "cumulative"], default="window")
    args = parser.parse_args()
    if args.synthesizer == "window":
        model = WindowSynthesizer(window.WindowConfig(window=args.window, horizon=args.horizon,
                                                rho=args.rho))
    else:
        model = CumulativeSynthesizer(CumulativeConfig(horizon=args.horizon, rho=args.rho))
    start = time.perf_counter()
    state = synthesize(args.input, args.output, model, args.seed)
    print(f"numpy baseline: {time.perf_counter() - start:.2f} s, "
          f"{state.num_synthetic} synthetic people")


if __name__ == "__main__":
    main()
