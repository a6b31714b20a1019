"""bench/README.md and bench/results/ agree: every claim's script and result file exist, and
every file in bench/results/ is a claim's result (so the folder keeps one result per claim,
not a history of re-runs)."""
from __future__ import annotations

import itertools
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
RESULTS = os.path.join(BENCH, "results")
README = os.path.join(BENCH, "README.md")
HEADER = ["claim", "script", "rerun", "result"]
RESULT_NAME = re.compile(r"^(?:bench/results/)?([^/\s]+\.(?:md|json|png|txt))$")
SCRIPT = re.compile(r"\bbench/[\w/]+\.(?:py|sh)\b")


def expand(text: str) -> list:
    """``a{,_b}.{md,json}`` → a.md, a.json, a_b.md, a_b.json."""
    parts = re.split(r"\{([^{}]*)\}", text)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def claim_rows():
    """The rows of every ``| claim | script | rerun | result |`` table, as lists of cells."""
    rows, in_table = [], False
    with open(README, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line.startswith("|"):
                in_table = False
                continue
            cells = [c.strip() for c in line.strip("|").split("|")]
            if [c.lower() for c in cells] == HEADER:
                in_table = True
            elif in_table and not set(line) <= set("|-: "):
                assert len(cells) == len(HEADER), f"a claim row needs 4 cells: {line}"
                rows.append(cells)
    return rows


def result_files(cell: str) -> list:
    names = []
    for span in re.findall(r"`([^`]+)`", cell):
        for name in expand(span):
            match = RESULT_NAME.match(name)
            if match:
                names.append(match.group(1))
    return names


def pending(row) -> bool:
    return "pending" in row[3].lower()


def test_readme_has_claims():
    rows = claim_rows()
    assert len(rows) >= 20
    for row in rows:
        if not pending(row):
            assert result_files(row[3]), f"no result file named for: {row[0]}"
            assert SCRIPT.search(row[1]) or row[1] == "—", f"no script for: {row[0]}"


def test_named_results_exist():
    missing = sorted({name for row in claim_rows() if not pending(row)
                      for name in result_files(row[3])
                      if not os.path.isfile(os.path.join(RESULTS, name))})
    assert not missing, f"bench/README.md names results that bench/results/ lacks: {missing}"


def test_named_scripts_exist():
    missing = sorted({script for row in claim_rows() if not pending(row)
                      for script in SCRIPT.findall(" ".join(row))
                      if not os.path.isfile(os.path.join(ROOT, script))})
    assert not missing, f"bench/README.md names scripts that bench/ lacks: {missing}"


def test_every_result_is_named():
    named = {name for row in claim_rows() for name in result_files(row[3])}
    unnamed = sorted(name for name in os.listdir(RESULTS) if name not in named)
    assert not unnamed, ("files in bench/results/ that no claim in bench/README.md names "
                         f"(name the claim, or remove the file; git keeps it): {unnamed}")


@pytest.mark.parametrize("text, expected", [
    ("a.{md,json}", ["a.md", "a.json"]),
    ("x_perf_2m{,_arrival}.json", ["x_perf_2m.json", "x_perf_2m_arrival.json"]),
    ("plain.md", ["plain.md"]),
])
def test_expand(text, expected):
    assert expand(text) == expected
