"""Write a long binary panel (id, period, value) of N people × T periods to Parquet.

    python bench/make_panel.py --people 2000000 --periods 12 --output bench/out/panel_2m.parquet

Values follow a two-state Markov chain (persistent spells), generated in chunks so
even 10 000 000 × 12 needs little memory.
"""
import argparse
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--people", type=int, required=True)
    parser.add_argument("--periods", type=int, default=12)
    parser.add_argument("--output", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=1_000_000)
    args = parser.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    rng = np.random.default_rng(args.seed)
    schema = pa.schema([("id", pa.int64()), ("period", pa.int32()), ("value", pa.int64())])
    with pq.ParquetWriter(args.output, schema) as writer:
        for start in range(0, args.people, args.chunk):
            n = min(args.chunk, args.people - start)
            state = rng.random(n) < 0.12
            values = np.empty((n, args.periods), dtype=np.int64)
            for t in range(args.periods):
                stay = rng.random(n)
                state = np.where(state, stay < 0.85, stay < 0.02)
                values[:, t] = state
            ids = np.repeat(np.arange(start, start + n, dtype=np.int64), args.periods)
            periods = np.tile(np.arange(1, args.periods + 1, dtype=np.int32), n)
            writer.write_table(pa.table({"id": ids, "period": periods,
                                         "value": values.reshape(-1)}, schema=schema))


if __name__ == "__main__":
    main()
