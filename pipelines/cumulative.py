"""Cumulative synthesizer jobs (Bun et al. 2024, Algorithm 2): the shared jobs of
:mod:`continual_synth.pipelines.jobs` with the cumulative model."""
from __future__ import annotations

from typing import Dict

from continual_synth.mechanisms.cumulative import CumulativeConfig
from continual_synth.mechanisms.models import CumulativeModel
from continual_synth.pipelines import jobs


def run(input_path: str, output_dir: str, config: CumulativeConfig, **options) -> Dict:
    """Synthesize a whole panel in one pipeline (see :func:`jobs.run` for the options)."""
    return jobs.run(CumulativeModel(config), input_path, output_dir, **options)


def init(state_dir: str, config: CumulativeConfig, **options) -> Dict:
    """Create the state of an incremental release (see :func:`jobs.init`)."""
    return jobs.init(CumulativeModel(config), state_dir, **options)


def step(state_dir: str, input_path: str, output_dir: str, **options) -> Dict:
    """Ingest the next period (see :func:`jobs.step`)."""
    return jobs.step(state_dir, input_path, output_dir, kind="cumulative", **options)
