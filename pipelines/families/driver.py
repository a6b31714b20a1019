"""Every family's incremental release through one driver: ``init`` creates a state
directory from the family's state document, ``step`` ingests one period into it.

A state directory names its family (``kind``); :func:`incremental_job` is the family's
:class:`~continual_synth.pipelines.release.lifecycle.IncrementalJob` (its period's
statistics, the synthesizer's step and the emission), and the lifecycle's write-ahead step
(:func:`~continual_synth.pipelines.release.lifecycle.incremental_step`) runs it with
ownership, fencing and the ledger.  The command line's ``init`` and ``step``
(:func:`continual_synth.pipelines.commands.family.drive`), the Python API and the
streams use these.
"""
from __future__ import annotations

from typing import Dict, Optional

from continual_synth.pipelines.release.lifecycle import (IncrementalJob, StateDir,
                                                         incremental_step)

__all__ = ["KINDS", "incremental_job", "init", "step"]

#: the state kinds, one per family with an incremental release
KINDS = ("window", "cumulative", "tabular", "continual-privhp")


def incremental_job(kind: str) -> IncrementalJob:
    """The incremental job of the family whose states are of kind ``kind``."""
    if kind in ("window", "cumulative"):
        from continual_synth.pipelines.families.jobs import PanelJob
        return PanelJob(kind)
    if kind == "tabular":
        from continual_synth.pipelines.families.tabular import TabularJob
        return TabularJob()
    if kind == "continual-privhp":
        from continual_synth.pipelines.families.privhp_continual import ContinualPrivHPJob
        return ContinualPrivHPJob()
    raise ValueError(f"no synthesizer family keeps states of kind {kind!r}; "
                     f"known: {', '.join(KINDS)}")


def init(state_dir: str, document: Dict) -> Dict:
    """Create ``state_dir`` holding ``document`` (a family's ``initial_document``) as
    version 0; a state already there is refused."""
    StateDir(state_dir).create(document)
    return document


def step(state_dir: str, input_path: str, output_dir: str, *, kind: Optional[str] = None,
         in_format: Optional[str] = None, period: Optional[int] = None,
         beam_args=(), wait: float = 0.0, invalid_records: Optional[str] = None) -> Dict:
    """Ingest the next period of ``input_path`` into ``state_dir`` and publish its release
    into ``output_dir``; return the step's summary (``status`` says what happened).
    ``kind``: the family the state must be (default: the state's own); ``period`` (default
    the next), ``wait`` (seconds to wait for a step that owns the state) and
    ``invalid_records`` (refuse or drop; default the state's) as ``step``'s options."""
    if kind is None:
        kind = StateDir(state_dir).read()[1]["kind"]
    return incremental_step(incremental_job(kind), state_dir, input_path, output_dir,
                            in_format=in_format, period=period, beam_args=beam_args,
                            wait=wait, invalid_records=invalid_records)
