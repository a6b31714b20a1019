"""Fixed-time-window synthesizer jobs (Bun et al. 2024, Algorithm 1): ``run(input, output,
WindowConfig)``, ``init(state, WindowConfig)``, ``step(state, input, output)`` — the shared
jobs of :mod:`continual_synth.pipelines.jobs` with the window model."""
from continual_synth.mechanisms.panel_synthesizers import WindowSynthesizer
from continual_synth.pipelines.jobs import SynthesizerJobs

_JOBS = SynthesizerJobs(WindowSynthesizer)
run, init, step = _JOBS.run, _JOBS.init, _JOBS.step
