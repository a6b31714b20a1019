"""The guide builds as a site (mkdocs.yml): ``mkdocs build --strict`` from a clone, warnings
as errors, with the command-line reference generated from the parsers and the API reference
from the docstrings."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="needs the [docs] extra")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    cli = (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("window step", "tabular run", "privhp init", "cumulative stream"):
        assert f"continual-synth {command}" in cli
    api = (tmp_path / "site" / "python" / "index.html").read_text(encoding="utf-8")
    for name in ("WindowSynthesizer", "TabularRelease", "load"):
        assert name in api
