"""continual-synth: continual differentially private synthetic data.

Subpackages: :mod:`continual_synth.mechanisms` (pure numpy privacy core and
synthesizer state machines), :mod:`continual_synth.transforms` (Beam stages),
:mod:`continual_synth.pipelines` (jobs and the command line) and
:mod:`continual_synth.runners` (runner presets).
"""
__version__ = "0.1.0"
