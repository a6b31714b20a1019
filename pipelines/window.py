"""Fixed-time-window synthesizer jobs (Bun et al. 2024, Algorithm 1): the shared jobs of
:mod:`continual_synth.pipelines.jobs` with the window model."""
from __future__ import annotations

from typing import Dict

from continual_synth.mechanisms.models import WindowModel
from continual_synth.mechanisms.window import WindowConfig
from continual_synth.pipelines import jobs


def run(input_path: str, output_dir: str, config: WindowConfig, **options) -> Dict:
    """Synthesize a whole panel in one pipeline (see :func:`jobs.run` for the options)."""
    return jobs.run(WindowModel(config), input_path, output_dir, **options)


def init(state_dir: str, config: WindowConfig, **options) -> Dict:
    """Create the state of an incremental release (see :func:`jobs.init`)."""
    return jobs.init(WindowModel(config), state_dir, **options)


def step(state_dir: str, input_path: str, output_dir: str, **options) -> Dict:
    """Ingest the next period (see :func:`jobs.step`)."""
    return jobs.step(state_dir, input_path, output_dir, kind="window", **options)
