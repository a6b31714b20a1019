"""Write a long binary panel (id, period, value) of N people × T periods to Parquet.

    python bench/make_panel.py --people 2000000 --periods 12 --output bench/out/panel_2m.parquet
    python bench/make_panel.py --people 2000000 --order arrival --output bench/out/panel_2m_arrival.parquet

Values follow a two-state Markov chain (persistent spells).  ``--order sorted`` (the
default) writes ids 0..N−1, each person's T rows together, generated in chunks so even
10 000 000 × 12 needs little memory.  ``--order arrival`` writes the panel as a survey
receives it: rows grouped by period, sparse ids (distinct, uniform in 0..10^12) in a
new random order in every period.
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
    parser.add_argument("--order", choices=["sorted", "arrival"], default="sorted")
    args = parser.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    rng = np.random.default_rng(args.seed)
    schema = pa.schema([("id", pa.int64()), ("period", pa.int32()), ("value", pa.int64())])
    if args.order == "arrival":
        return write_arrival(args, rng, schema)
    with pq.ParquetWriter(args.output, schema) as writer:
        for start in range(0, args.people, args.chunk):
            n = min(args.chunk, args.people - start)
            values = markov_values(rng, n, args.periods).astype(np.int64)
            ids = np.repeat(np.arange(start, start + n, dtype=np.int64), args.periods)
            periods = np.tile(np.arange(1, args.periods + 1, dtype=np.int32), n)
            writer.write_table(pa.table({"id": ids, "period": periods,
                                         "value": values.reshape(-1)}, schema=schema))


def markov_values(rng, n: int, periods: int) -> np.ndarray:
    """n × periods binary values of the two-state chain (int8)."""
    state = rng.random(n) < 0.12
    values = np.empty((n, periods), dtype=np.int8)
    for t in range(periods):
        stay = rng.random(n)
        state = np.where(state, stay < 0.85, stay < 0.02)
        values[:, t] = state
    return values


def write_arrival(args, rng, schema) -> None:
    """Rows grouped by period; sparse distinct ids in a new random order each period."""
    ids = np.unique(rng.integers(0, 10 ** 12, int(args.people * 1.01) + 16))
    ids = rng.permutation(ids)[:args.people]
    if ids.size < args.people:
        raise SystemExit("could not draw enough distinct ids")
    values = markov_values(rng, args.people, args.periods)
    with pq.ParquetWriter(args.output, schema) as writer:
        for t in range(args.periods):
            order = rng.permutation(args.people)
            for start in range(0, args.people, args.chunk):
                rows = order[start:start + args.chunk]
                writer.write_table(pa.table({
                    "id": ids[rows], "period": np.full(rows.size, t + 1, np.int32),
                    "value": values[rows, t].astype(np.int64)}, schema=schema))


if __name__ == "__main__":
    main()
