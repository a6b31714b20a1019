"""Memory and time of the event-time ``stream`` (the Pub/Sub and Kafka form) over many
periods, on the DirectRunner.

The event-time form runs on Beam's BundleBasedDirectRunner (the ``--watch`` form runs on
the FnApiRunner, measured by ``stream_memory.py``).  No Pub/Sub or Kafka emulator is
available here, so Beam's ``TestStream`` feeds the command's own event pipeline
(:func:`continual_synth.pipelines.streaming.stream.event_pipeline`, as ``stream --subscription`` or
``--kafka-topic`` builds it): each period's records in event time, then the watermark past
the period's end.  The whole input is built before the run starts, so what grows during
the run is the runner's and the pipeline's.

    python bench/stream_events_memory.py                      # 200 periods of 2 000 people
    python bench/stream_events_memory.py --periods 40 --people 500    # a quick check

A sampler reads this process's resident memory every 0.2 s and notes when each period's
release lands (the manifest's ``periods_released``).  Prints the resident memory at
periods 10, 25, 50, 100, … and the slope over the second half of the stream (MiB a
period); results in ``bench/results/stream_events_memory.{json,md}``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time

import numpy as np
import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stream_latency import resident_growth  # noqa: E402  (one rule for the slope)

LENGTH, ORIGIN = 10.0, 1000.0


def period_records(people: int, periods: int, seed: int = 0):
    """{period: [{"id", "value", "ts"}]}: a two-state Markov panel, each record's event
    time spread inside its period, people in a shuffled order within a period."""
    rng = np.random.default_rng(seed)
    codes = np.empty((people, periods), dtype=np.int64)
    codes[:, 0] = rng.integers(0, 2, people)
    for t in range(1, periods):
        stay = rng.random(people) < 0.8
        codes[:, t] = np.where(stay, codes[:, t - 1], 1 - codes[:, t - 1])
    ids = rng.choice(10 ** 9, size=people, replace=False)
    records = {}
    for t in range(periods):
        order = rng.permutation(people)
        offsets = rng.random(people) * (LENGTH - 0.01)
        records[t + 1] = [{"id": int(ids[i]), "value": int(codes[i, t]),
                           "ts": ORIGIN + t * LENGTH + float(offsets[i])} for i in order]
    return records


def manifest_periods(out: str) -> int:
    try:
        with open(os.path.join(out, "manifest.json"), encoding="utf-8") as handle:
            return len(json.load(handle).get("periods_released", []))
    except (OSError, ValueError):
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=2000)
    parser.add_argument("--periods", type=int, default=200)
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--results", default=os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "results"))
    parser.add_argument("--name", default="stream_events_memory")
    args = parser.parse_args()

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    from apache_beam.testing.test_stream import TestStream as BeamTestStream

    from continual_synth.mechanisms.panel_synthesizers import WindowSynthesizer
    from continual_synth.mechanisms.window import WindowConfig
    from continual_synth.pipelines.families import jobs
    from continual_synth.pipelines.release.lifecycle import load_state
    from continual_synth.pipelines.streaming.stream import (_stopping, event_pipeline,
                                                            open_state)
    from continual_synth.transforms.stream_sources import PeriodClock

    records = period_records(args.people, args.periods)
    events = BeamTestStream()
    for period in range(1, args.periods + 1):
        events = events.add_elements(records[period])
        events = events.advance_watermark_to(ORIGIN + period * LENGTH)
    events = events.advance_watermark_to_infinity()
    del records

    config = WindowConfig(window=args.window, horizon=args.periods, rho=1.0, alphabet=(0, 1))
    work = tempfile.mkdtemp(prefix="stream_events_")
    state, out = os.path.join(work, "state"), os.path.join(work, "out")
    open_state(state, jobs.initial_document(WindowSynthesizer(config), seed=1,
                                            num_shards=args.shards))
    job = jobs.PanelJob("window")
    process = psutil.Process()
    start_rss = process.memory_info().rss / 2 ** 20
    samples, done = [], threading.Event()   # (seconds, periods released, RSS MiB)
    began = time.perf_counter()

    def sample():
        while not done.is_set():
            samples.append((time.perf_counter() - began, manifest_periods(out),
                            process.memory_info().rss / 2 ** 20))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    with _stopping(), beam.Pipeline(options=options) as pipeline:
        event_pipeline(pipeline, job, state, out, clock=PeriodClock(LENGTH, ORIGIN),
                       timestamp_col="ts", records=pipeline | events, distinct_rows=True,
                       horizon=args.periods,
                       released_through=job.periods_seen(load_state(state)))
    done.set()
    sampler.join()
    wall = time.perf_counter() - began
    released = manifest_periods(out)
    shutil.rmtree(work)

    # the peak resident memory seen while each number of periods was released (a period
    # released between two samples has the figure of the one before it)
    by_period = {}
    for _, periods, rss in samples:
        by_period[periods] = max(rss, by_period.get(periods, 0.0))
    resident = []
    for period in range(1, released + 1):
        resident.append(by_period.get(period, resident[-1] if resident else float("nan")))
    marks = [p for p in (10, 25, 50, 100, 150, 200, 300, 500) if p <= released]
    slope = resident_growth(resident)
    first_release = next((s for s, p, _ in samples if p >= 1), float("nan"))
    figures = {"people": args.people, "periods": args.periods, "released": released,
               "window": args.window, "shards": args.shards, "wall_s": round(wall, 1),
               "first_release_s": round(first_release, 1),
               "seconds_per_period_after_first": round((wall - first_release)
                                                       / max(released - 1, 1), 3),
               "rss_mib_before_run": round(start_rss, 1),
               "rss_mib_at_period": {p: round(resident[p - 1], 1) for p in marks},
               "rss_mib_peak": round(max(r for _, _, r in samples), 1),
               "slope_mib_per_period_second_half": round(slope, 3)}
    print(json.dumps(figures, indent=2))
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, args.name + ".json"), "w", encoding="utf-8") as handle:
        json.dump(figures, handle, indent=2)


if __name__ == "__main__":
    main()
