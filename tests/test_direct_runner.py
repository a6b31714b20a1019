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

from continual_synth.pipelines.options import pipeline_options
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
