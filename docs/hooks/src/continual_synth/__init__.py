"""continual-synth: continual differentially private synthetic data.

Subpackages: :mod:`continual_synth.mechanisms` (pure numpy privacy core and
synthesizer state machines), :mod:`continual_synth.transforms` (Beam stages),
:mod:`continual_synth.pipelines` (jobs and the command line) and
:mod:`continual_synth.runners` (runner presets).
"""
__version__ = "0.1.0"

# In the source tree the subpackages are the repository's top-level folders
# (``pipelines/`` …), which ``setup.py``'s ``package_dir`` installs under this package.
# Run from the repository root (``python -m continual_synth``, ``--setup_file
# ./setup.py``), this folder shadows an installed copy; extend the package's path so that
# ``continual_synth.pipelines`` is then ``./pipelines`` rather than missing.
import os as _os

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_SOURCE_ROOT = _os.path.dirname(_HERE)
if not _os.path.isdir(_os.path.join(_HERE, "pipelines")) and \
        _os.path.isfile(_os.path.join(_SOURCE_ROOT, "pipelines", "__init__.py")):
    __path__.append(_SOURCE_ROOT)  # noqa: F821  (the package's own __path__)

#: the Python API (:mod:`continual_synth.pipelines.api`), imported on first use so that
#: ``import continual_synth`` stays light for the command line
_API = ("Release", "ContinualSynthesizer", "WindowSynthesizer", "CumulativeSynthesizer",
        "TabularSynthesizer", "PrivHPSynthesizer", "load")
__all__ = list(_API)


def __getattr__(name):
    if name in _API:
        from continual_synth.pipelines import api
        return getattr(api, name)
    raise AttributeError(f"module 'continual_synth' has no attribute {name!r}")
