"""Cumulative synthesizer jobs (Bun et al. 2024, Algorithm 2): ``run(input, output,
CumulativeConfig)``, ``init(state, CumulativeConfig)``, ``step(state, input, output)`` — the
shared jobs of :mod:`continual_synth.pipelines.jobs` with the cumulative model."""
from continual_synth.mechanisms.panel_synthesizers import CumulativeSynthesizer
from continual_synth.pipelines.jobs import SynthesizerJobs

_JOBS = SynthesizerJobs(CumulativeSynthesizer)
run, init, step = _JOBS.run, _JOBS.init, _JOBS.step
