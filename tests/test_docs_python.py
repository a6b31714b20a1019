"""The Python examples of the README and the guide run as written: every ```python block
marked ``<!-- docs-test: python -->`` on the line before its fence runs, in order, in one
sandbox per document that holds a small panel where the examples read the demo's
(``demo_out/input/sipp_like_panel.parquet``) and a release where they read the demo's
(``demo_out/synthetic/``)."""
from __future__ import annotations

import contextlib
import glob
import io
import os
import re

import pytest

from continual_synth.pipelines.commands.cli import main
from continual_synth.transforms.files import write_file

from helpers_panels import long_table, markov_codes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = "<!-- docs-test: python -->"
DOCUMENTS = ["README.md"] + sorted(os.path.relpath(path, ROOT)
                                   for path in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def python_blocks(document: str):
    """The marked ```python blocks of ``document``: [(line, code)]."""
    with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() == "```python" and i > 0 and lines[i - 1].strip() == MARKER:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append((i + 1, "\n".join(lines[i + 1:end])))
    return blocks


MARKED = [document for document in DOCUMENTS if python_blocks(document)]


def test_the_readme_has_its_python_and_beam_examples_marked():
    assert len(python_blocks("README.md")) >= 3


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_python_example_runs_or_says_why_not(document):
    """A ```python block is marked to run here, or skipped with its reason (as the bash
    examples are: ``<!-- docs-test: skip REASON -->``)."""
    with open(os.path.join(ROOT, document), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "```python":
            before = lines[i - 1].strip() if i else ""
            assert before == MARKER or re.fullmatch(r"<!--\s*docs-test:\s*skip\s+.+-->",
                                                    before), f"{document}:{i + 1}"


@pytest.mark.parametrize("document", MARKED)
def test_python_examples_run(document, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    panel = long_table(markov_codes(40, 12, seed=4))  # the demo panel's columns, 12 periods
    write_file(panel, "demo_out/input/sipp_like_panel.parquet", "parquet")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["window", "run", "--input", "demo_out/input/sipp_like_panel.parquet",
                     "--output", "demo_out/synthetic", "--window", "3", "--horizon", "12",
                     "--rho", "0.05", "--seed", "1"]) == 0
    for line, code in python_blocks(document):
        namespace = {"__name__": f"docs_example_{line}"}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, f"{document}:{line}", "exec"), namespace)
    assert os.path.isdir("state") or "state" not in "".join(c for _, c in python_blocks(document))


def test_the_panels_expected_error_tables_are_what_the_bounds_give_now():
    """docs/panels.md's tables of expected error come from bench/expected_error.py: they
    must be what the configurations' bounds are today."""
    import importlib.util
    import sys
    sys.path.insert(0, os.path.join(ROOT, "bench"))  # the script imports bench/harness.py
    spec = importlib.util.spec_from_file_location(
        "expected_error", os.path.join(ROOT, "bench", "expected_error.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.markdown(module.window_rows(12, (2, 3, 4), "replace"),
                           module.cumulative_rows(12, ("tree", "blt"), "replace"), "")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    with open(os.path.join(ROOT, "docs", "panels.md"), encoding="utf-8") as handle:
        page = handle.read()
    assert rows and all(row in page for row in rows)
