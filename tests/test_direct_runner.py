"""The DirectRunner our jobs run on stays in this process: it never hands a pipeline to
Beam's Prism runner (which Beam's own DirectRunner tries first since 2.68, downloading
a Go binary from GitHub), and it runs batch pipelines on the FnApiRunner and streaming
ones on the BundleBasedDirectRunner, as Beam's did before."""
from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.portability import prism_runner
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.testing import test_stream
from apache_beam.testing.util import assert_that, equal_to

from continual_synth.pipelines.commands.options import pipeline_options
from continual_synth.runners import direct


@pytest.fixture
def runs(monkeypatch):
    """Which runners ran a pipeline: Prism's and the FnApiRunner's ``run_pipeline``
    recorded (Prism's then fails, as it does on a machine without network, so Beam's
    DirectRunner falls back)."""
    ran = []

    def prism(self, pipeline, options):
        ran.append("prism")
        raise RuntimeError("Prism is not reachable in this test")

    original = fn_runner.FnApiRunner.run_pipeline

    def fnapi(self, pipeline, options):
        ran.append("fnapi")
        return original(self, pipeline, options)

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", prism)
    monkeypatch.setattr(fn_runner.FnApiRunner, "run_pipeline", fnapi)
    return ran


def _doubles(options):
    with beam.Pipeline(options=options) as pipeline:
        assert_that(pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x: 2 * x),
                    equal_to([2, 4, 6]))


@pytest.mark.parametrize("args", [[], ["--runner=DirectRunner"], ["--runner", "direct"],
                                  ["--runner=DirectRunner", "--direct_num_workers=2"]])
def test_the_direct_runner_is_ours(args):
    assert (pipeline_options(args).view_as(StandardOptions).runner
            == "continual_synth.runners.direct.DirectRunner")


def test_other_runners_are_left_to_beam():
    for name in ("PrismRunner", "DataflowRunner", "continual_synth.runners.dask_runner.DaskRunner"):
        assert pipeline_options([f"--runner={name}"]).view_as(StandardOptions).runner == name


def test_batch_pipelines_run_in_process_never_on_prism(runs):
    _doubles(pipeline_options([]))
    assert runs == ["fnapi"]


def test_beams_own_direct_runner_tries_prism_first(runs):
    """The control: the recording above sees Prism when Beam's DirectRunner is used as
    it comes (Beam ≥ 2.68), so the test before it can fail."""
    if not _prism_is_default():
        pytest.skip("this Beam's DirectRunner does not try Prism")
    _doubles(PipelineOptions([]))
    assert runs == ["prism", "fnapi"]


def _prism_is_default() -> bool:
    import inspect

    from apache_beam.runners.direct import direct_runner
    return "PrismRunner" in inspect.getsource(direct_runner.SwitchingDirectRunner.run_pipeline)


def test_streaming_pipelines_run_on_the_bundle_based_runner(runs):
    options = pipeline_options([])
    options.view_as(StandardOptions).streaming = True
    stream = test_stream.TestStream().add_elements([1, 2]).add_elements([3]).advance_watermark_to_infinity()
    with beam.Pipeline(options=options) as pipeline:
        assert_that(pipeline | stream | beam.Map(lambda x: 2 * x), equal_to([2, 4, 6]))
    assert runs == []  # neither Prism nor the FnApiRunner: the BundleBasedDirectRunner


def test_runner_is_a_beam_direct_runner():
    assert isinstance(direct.DirectRunner(), beam.runners.DirectRunner)


def _live_metric_chains() -> int:
    """Generators of Beam's ``monitoring_infos.consolidate`` alive now: each holds one
    bundle's metrics folded into its stage's by the FnApiRunner (runners/direct.py)."""
    import gc
    import types
    return sum(1 for obj in gc.get_objects()
               if isinstance(obj, types.GeneratorType) and obj.gi_code.co_name == "consolidate")


class _CountChains(beam.DoFn):
    """Counts the live metric chains once the stream has run ``after`` ticks."""
    seen, chains = [], []

    def __init__(self, after: int):
        self.after = after

    def process(self, element):
        _CountChains.seen.append(element)
        if len(_CountChains.seen) == self.after:
            _CountChains.chains.append(_live_metric_chains())


def _chains_after_ticks(ticks: int) -> int:
    """Run a streaming pipeline of ``PeriodicImpulse`` ticks (one bundle each, as the
    ``stream --watch`` watcher) on our DirectRunner; the live metric chains counted after
    ``ticks`` - 20 of them."""
    import time

    from apache_beam.transforms.periodicsequence import PeriodicImpulse
    _CountChains.seen, _CountChains.chains = [], []
    options = pipeline_options(["--direct_running_mode=in_memory", "--direct_num_workers=1"])
    options.view_as(StandardOptions).streaming = True
    interval, now = 0.01, time.time()
    with beam.Pipeline(options=options) as pipeline:
        _ = (pipeline
             | PeriodicImpulse(start_timestamp=now, stop_timestamp=now + ticks * interval,
                               fire_interval=interval)
             | beam.ParDo(_CountChains(after=ticks - 20)))
    assert len(_CountChains.seen) >= ticks - 20, "the impulse stopped early"
    return _CountChains.chains[0]


def test_a_streaming_pipeline_keeps_one_merged_set_of_metrics_per_stage(monkeypatch):
    """The leak runners/direct.py removes: Beam's FnApiRunner nests a generator holding each
    bundle's metrics under its stage's, for as long as a streaming pipeline runs (75 KB a
    bundle).  With the fix none is alive after 180 ticks; with Beam's own generator (the
    fix undone) about one per stage and bundle (1 001 here on an idle machine; a loaded
    one runs several ticks a bundle), so this test sees the leak."""
    assert _chains_after_ticks(200) <= 5
    monkeypatch.setattr(fn_runner, "consolidate_monitoring_infos",
                        direct.monitoring_infos.consolidate)
    assert _chains_after_ticks(200) >= 50


class _Enough(Exception):
    """Ends an unbounded test pipeline once it has seen enough ticks."""


class _StopAfter(beam.DoFn):
    seen = []

    def __init__(self, ticks: int):
        self.ticks = ticks

    def process(self, element):
        _StopAfter.seen.append(element)
        if len(_StopAfter.seen) >= self.ticks:
            raise _Enough()


def _bundles_for_ticks(source, ticks: int, monkeypatch) -> int:
    """Bundles the FnApiRunner ran while ``source`` (a clock transform) gave ``ticks``
    ticks in a streaming pipeline on our DirectRunner."""
    counted = []
    original = fn_runner.FnApiRunner._execute_bundle

    def counting(self, *args, **kwargs):
        counted.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(fn_runner.FnApiRunner, "_execute_bundle", counting)
    _StopAfter.seen = []
    options = pipeline_options(["--direct_running_mode=in_memory", "--direct_num_workers=1"])
    options.view_as(StandardOptions).streaming = True
    with pytest.raises(Exception) as stopped:
        with beam.Pipeline(options=options) as pipeline:
            _ = pipeline | source | beam.ParDo(_StopAfter(ticks))
    assert "_Enough" in repr(stopped.value) or isinstance(stopped.value, _Enough)
    monkeypatch.undo()
    return len(counted)


def test_the_watchers_clock_wakes_once_per_tick(monkeypatch):
    """transforms/ticks.py: Beam's PeriodicImpulse, whose deferred remainder the
    FnApiRunner runs again at once, spins between ticks (about 270 bundles a second, half a
    core for an idle stream); the paced clock sleeps until each tick is due: a few bundles a
    tick, and its ticks never come early (here 20 bundles for 20 ticks, against 236-240
    for Beam's, idle machine)."""
    import time

    from apache_beam.transforms.periodicsequence import PeriodicImpulse
    from apache_beam.utils.timestamp import Timestamp

    from continual_synth.transforms.ticks import Ticks
    interval, ticks = 0.05, 20
    started = time.monotonic()
    paced = _bundles_for_ticks(Ticks(interval), ticks, monkeypatch)
    assert time.monotonic() - started >= (ticks - 1) * interval
    assert [b - a for a, b in zip(_StopAfter.seen, _StopAfter.seen[1:])] == \
        pytest.approx([interval] * (ticks - 1), abs=1e-5)  # Beam's tick times, one interval apart
    assert paced <= 3 * ticks, paced
    spinning = _bundles_for_ticks(PeriodicImpulse(start_timestamp=Timestamp.now(),
                                                  fire_interval=interval), ticks, monkeypatch)
    assert spinning >= 3 * paced, (spinning, paced)
