"""Beam's DirectRunner kept in this process: never the Prism runner.

Since Beam 2.68 the DirectRunner first hands every pipeline it judges Prism can run to
the ``PrismRunner`` (https://github.com/apache/beam/pull/34612), a Go binary that Beam
downloads from GitHub on first use and runs as a separate job server.  For our jobs that
means a download at run time (which this project never does), a second process and a
runner with other metric names on a machine with network; and on a machine without it
(a locked-down worker, CI) a worker pool started and a failed download before every
pipeline falls back to the local runners — 0.3-0.5 s of each pipeline, two or three
pipelines per command.  Beam's advice for users it breaks is to pin the in-process
runner (the pull request above).

:class:`DirectRunner` is Beam's DirectRunner with the Prism attempt switched off and
everything else unchanged: batch pipelines run on the ``FnApiRunner`` (with
``--direct_num_workers`` and ``--direct_running_mode`` as Beam reads them), streaming
ones (``TestStream``, Pub/Sub, real-time timers) on the ``BundleBasedDirectRunner`` —
what the DirectRunner did before 2.68 and what it falls back to.  ``--runner
DirectRunner`` and no ``--runner`` mean this runner (:func:`continual_synth.pipelines.
commands.options.pipeline_options`); ``--runner PrismRunner`` still selects Prism.

**A streaming pipeline's metrics kept bounded** (:func:`keep_stage_metrics_bounded`).  The
``FnApiRunner`` folds each bundle's metrics into its stage's with
``consolidate_monitoring_infos(itertools.chain(new, old))`` — a generator, consumed only
when the pipeline ends.  A batch pipeline runs a few bundles per stage; a streaming one
(the ``stream --watch`` watcher) nests one more generator, holding that bundle's
metrics, every bundle, for as long as it runs, so an idle ``window stream`` grows
without bound.  Its clock is paced (``transforms/ticks.py``: one bundle a tick, whatever
the bundle rate would be unpaced), and the chain would still grow by one every tick
without this.  Beam's own function, given as a
list, merges the same metrics without the chain.
"""
from __future__ import annotations

from apache_beam.metrics import monitoring_infos
from apache_beam.runners.direct import direct_runner
from apache_beam.runners.portability.fn_api_runner import fn_runner

__all__ = ["CLASS_PATH", "DIRECT_NAMES", "DirectRunner", "consolidated_metrics",
           "keep_stage_metrics_bounded"]

CLASS_PATH = "continual_synth.runners.direct.DirectRunner"
# the names Beam's ``create_runner`` resolves to its DirectRunner
DIRECT_NAMES = ("directrunner", "direct")


class DirectRunner(direct_runner.DirectRunner):
    """Beam's DirectRunner, never delegating to Prism (see the module docstring)."""

    def __init__(self):
        super().__init__()
        # Beam's DirectRunner keeps interactive sessions off Prism; this flag is the only
        # switch it reads for that, and nothing else in the runner reads it.
        self.is_interactive()

    def is_fnapi_compatible(self) -> bool:
        """True: ``Pipeline.run`` skips its test round trip through the runner API, as it
        does for Beam's own DirectRunner in batch (it recognises that runner by its class
        name, not this subclass).  The FnApiRunner translates the pipeline to the runner
        API itself; a streaming pipeline is run as it is by the BundleBasedDirectRunner."""
        return True


def consolidated_metrics(metrics, key=monitoring_infos.to_key):
    """``monitoring_infos.consolidate`` (Beam's merge of metrics with the same key), as a
    list instead of a generator: see the module docstring."""
    return list(monitoring_infos.consolidate(metrics, key))


def keep_stage_metrics_bounded() -> None:
    """Make the ``FnApiRunner`` merge each bundle's metrics into its stage's at once
    (:func:`consolidated_metrics`), so that a streaming pipeline holds one merged set per
    stage instead of every bundle's since it started.  The same values: every reader of
    those metrics iterates them.  Installed when this module is imported (before any
    pipeline of ours runs)."""
    if getattr(fn_runner, "consolidate_monitoring_infos", None) is monitoring_infos.consolidate:
        fn_runner.consolidate_monitoring_infos = consolidated_metrics


keep_stage_metrics_bounded()
