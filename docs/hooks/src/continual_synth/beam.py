"""Beam PTransforms for users' own pipelines: ``WindowRelease``, ``CumulativeRelease``,
``TabularRelease`` and ``PrivHPRelease`` (see :mod:`continual_synth.pipelines.beam_api`)."""
from continual_synth.pipelines.beam_api import (CumulativeRelease, PrivHPRelease,
                                                TabularRelease, ToArrowTables, WindowRelease)

__all__ = ["WindowRelease", "CumulativeRelease", "TabularRelease", "PrivHPRelease",
           "ToArrowTables"]
