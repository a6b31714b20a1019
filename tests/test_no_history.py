"""Code and docs without their own history.

Docstrings, comments and the guide say what the code does and why, citing the paper where
one applies; the history of the work (references to issues, numbered rounds of work, dated
notes) belongs to git history.  The benchmark results in ``bench/results/`` say what was
measured and how: their ``.md`` notes and the string values of their ``.json`` files are
scanned too.  A hit is reported as ``file:line: text`` (``file:key: text`` in a JSON file).
"""
from __future__ import annotations

import glob
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: what is scanned: the code, the guide, the bench scripts (not their results), the tests
SCANNED = ["mechanisms", "pipelines", "transforms", "runners", "continual_synth", "docs",
           "bench", "tests", "deploy", "examples", "README.md", "setup.py", "mkdocs.yml"]
SKIPPED_DIRS = {"results", "__pycache__", ".venv", "site"}
TEXT_SUFFIXES = (".py", ".md", ".sh", ".yml", ".yaml", ".toml", ".cfg", ".ini", ".txt")

MONTH = (r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)"
         r"(?:uary|ruary|ch|il|e|y|ust|tember|ober|ember)?\.?")
HISTORY = {
    "an issue reference": re.compile(r"\bissues?[ -]#?\d+", re.I),
    "a numbered round of work": re.compile(r"\b(?:stop|session|round)s? \d+\b", re.I),
    "a dated note": re.compile(
        rf"\b\d{{1,2}}(?:st|nd|rd|th)? {MONTH} (?:19|20)\d\d\b"   # 28 Nov 2026
        rf"|\b{MONTH} \d{{1,2}}(?:st|nd|rd|th)?,? (?:19|20)\d\d\b"  # Nov 28, 2026
        r"|\b(?:19|20)\d\d-[01]\d-[0-3]\d\b"),                   # 2026-11-28
}

#: (path pattern, line pattern) pairs whose hits are legitimate uses, not history
ALLOWED = [
    # RFC 3339 timestamps (a release's created_utc, SOURCE_DATE_EPOCH's examples, event times)
    (r"", r"\b(?:19|20)\d\d-[01]\d-[0-3]\dT\d\d:\d\d"),
    # the Unix epoch, as SOURCE_DATE_EPOCH and event times count from it
    (r"", r"\b1970-01-01\b"),
    # Airflow's logical dates of the example DAG's monthly runs
    (r"^tests/test_airflow_dag\.py$", r"\b20\d\d-[01]\d-01\b"),
    (r"^docs/deploy\.md$", r"airflow dags test .* 20\d\d-[01]\d-01\b"),
]

THIS_FILE = "tests/test_no_history.py"

#: the benchmark results: their notes, and the string values of their JSON files
RESULTS = "bench/results"


def scanned_files():
    for entry in SCANNED:
        path = os.path.join(ROOT, entry)
        if os.path.isfile(path):
            yield entry
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            for name in sorted(files):
                if name.endswith(TEXT_SUFFIXES):
                    yield os.path.relpath(os.path.join(folder, name), ROOT).replace(os.sep, "/")


def allowed(path: str, line: str, match: re.Match) -> bool:
    for path_pattern, line_pattern in ALLOWED:
        if re.search(path_pattern, path):
            for allowed_match in re.finditer(line_pattern, line):
                if allowed_match.start() <= match.start() < allowed_match.end():
                    return True
    return False


def results_texts():
    """(path, where, text) for every line of a results note and every JSON string value."""
    folder = os.path.join(ROOT, RESULTS)
    for path in sorted(glob.glob(os.path.join(folder, "*.md"))):
        relative = os.path.relpath(path, ROOT).replace(os.sep, "/")
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                yield relative, str(number), line
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        relative = os.path.relpath(path, ROOT).replace(os.sep, "/")
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        try:
            documents = [json.loads(text)]
        except ValueError:  # JSON lines: one document a line
            documents = [json.loads(line) for line in text.splitlines() if line.strip()]
        for where, value in json_strings(documents, ""):
            yield relative, where, value


def json_strings(value, where):
    """The string values (and keys) inside a JSON document, with where each one sits."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{where}.{key}", str(key)
            yield from json_strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from json_strings(item, f"{where}[{index}]")


def results_hits():
    hits = []
    for path, where, text in results_texts():
        for what, pattern in HISTORY.items():
            for match in pattern.finditer(text):
                if not allowed(path, text, match):
                    hits.append(f"{path}:{where}: {what}: {text.strip()[:160]}")
    return hits


def history_hits():
    hits = []
    for path in scanned_files():
        if path == THIS_FILE:
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                for what, pattern in HISTORY.items():
                    for match in pattern.finditer(line):
                        if not allowed(path, line, match):
                            hits.append(f"{path}:{number}: {what}: {line.strip()[:160]}")
    return hits


def test_the_scan_finds_history():
    lines = ["(issue 12, item 1)", "as until session 42", "stop 50", "the rule before 28 Nov "
             "2026", "measured Nov 28, 2026", "a note of 2026-11-28"]
    for line in lines:
        assert any(p.search(line) for p in HISTORY.values()), line
    for line in ["Kumar et al. 2024, §6", "created_utc 2026-11-23T19:30:00Z",
                 "round(x, 3)", "rounds to 2 decimals", "one session per thread"]:
        assert not any(p.search(line) and not allowed("docs/x.md", line, p.search(line))
                       for p in HISTORY.values()), line


def test_code_docs_and_tests_carry_no_history():
    hits = history_hits()
    assert not hits, ("history belongs to git and bench/results/, not to the code or the "
                      "guide:\n" + "\n".join(hits))


def test_benchmark_results_carry_no_history():
    hits = results_hits()
    assert not hits, ("a results file says what was measured and how; its history belongs to "
                      "git:\n" + "\n".join(hits))
