"""A plain single-process numpy job doing what ``continual-synth window run`` does:
read the long Parquet panel, pivot, synthesize (Algorithm 1), write long Parquet.

It reuses the library's numpy kernels (the point is to measure what Beam costs on
top of the same arithmetic), but no Beam, no shards and no staging.

    python bench/window_numpy_baseline.py --input panel.parquet --output out/ --window 3 --horizon 12 --rho 0.005
"""
import argparse
import os
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from continual_synth.mechanisms import emission, panel, window
from continual_synth.mechanisms.samplers import make_sampler


def synthesize(input_path, output_dir, config, seed):
    table = pq.read_table(input_path)
    codes = panel.encode_values(table.column("value").to_numpy(), config.alphabet)
    _, matrix = panel.pivot(table.column("id").to_numpy(), table.column("period").to_numpy(),
                            codes, 1, config.horizon)
    del table, codes
    histograms = panel.window_histograms(matrix, config.alphabet_size, config.window)
    del matrix
    sampler = make_sampler(seed)
    state = window.WindowState.initial(config)
    releases = []
    for period in range(1, config.horizon + 1):
        h = histograms[period - config.window] if period >= config.window else None
        state, release = window.step(state, h, sampler)
        if release is not None:
            releases.append(release)
    plans = emission.plan_all_shards(releases, 1, config.alphabet_size, sampler.rng)
    people, values = emission.ShardPeople.create(0, plans[config.window][0], config.alphabet_size,
                                                 config.window, sampler.rng)
    columns = [values[:, t] for t in range(config.window)]
    for period in range(config.window + 1, config.horizon + 1):
        columns.append(people.extend(plans[period][0], config.alphabet_size, config.window,
                                     sampler.rng))
    alphabet = np.asarray(config.alphabet)
    os.makedirs(output_dir, exist_ok=True)
    ids = people.ids
    schema = pa.schema([("synthetic_id", pa.int64()), ("period", pa.int32()),
                        ("value", pa.int64())])
    with pq.ParquetWriter(os.path.join(output_dir, "synthetic.parquet"), schema) as writer:
        for period, column in enumerate(columns, start=1):
            writer.write_table(pa.table({
                "synthetic_id": ids, "period": np.full(ids.size, period, dtype=np.int32),
                "value": alphabet[column]}, schema=schema))
    return state


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--horizon", type=int, default=12)
    parser.add_argument("--rho", type=float, default=0.005)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = window.WindowConfig(window=args.window, horizon=args.horizon, rho=args.rho)
    start = time.perf_counter()
    state = synthesize(args.input, args.output, config, args.seed)
    print(f"numpy baseline: {time.perf_counter() - start:.2f} s, "
          f"{state.num_synthetic} synthetic people")


if __name__ == "__main__":
    main()
