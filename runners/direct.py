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
options.pipeline_options`); ``--runner PrismRunner`` still selects Prism.
"""
from __future__ import annotations

from apache_beam.runners.direct import direct_runner

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
