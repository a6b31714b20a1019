"""Code and docs without their own history.

Docstrings, comments and the guide say what the code does and why, citing the paper where
one applies; the history of the work (references to issues, numbered rounds of work, dated
notes) belongs to git history.  The benchmark results in ``bench/results/`` say what was
measured and how: their ``.md`` notes and the string values of their ``.json`` files are
scanned too.  A hit is reported as ``file:line: text`` (``file:key: text`` in a JSON file).

The package's comments and docstrings do not quote measured figures either: a default
chosen by a benchmark points to its results file, which holds the figures, and the code
says why.  A measured ratio (``1.44×``, ``1.9-2.3×``), a percentage or a timing set
against another, or a percentage or timing in a paragraph that cites a benchmark, is
reported as ``file:line: what: text``.  Whole-number factors (``2×``, ``2 × 2`` cells) and
a model's or a test's parameters (``a rate of about 11 %``, ``two-sided 68%``) are not.
"""
from __future__ import annotations

import ast
import glob
import io
import json
import os
import re
import tokenize

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

#: the package's folders (all in SCANNED): their modules' comments and docstrings quote no
#: measurements
PACKAGE = ["mechanisms", "transforms", "pipelines", "runners", "continual_synth"]

NUMBER = r"(?<![\w.])\d+(?:\.\d+)?"
PERCENT = rf"{NUMBER} ?%"
TIMING = rf"{NUMBER} ?(?:ns|µs|us|ms|s|min)\b"
#: figures that are measurements wherever they stand in a comment or docstring (a factor
#: times a power of ten, 1.2 × 10⁹, is a number's notation, not a ratio)
MEASURED = {
    "a measured ratio": re.compile(
        r"(?:(?<![\w.])\d+\.\d+(?: ?[-–] ?\d+(?:\.\d+)?)?"     # 1.44×, 1.9-2.3×
        r"|(?<![\w.])\d+ ?[-–] ?\d+(?:\.\d+)?) ?×(?! ?10[⁰¹²³⁴⁵⁶⁷⁸⁹^*])"),  # 2-3×
    "a measured percentage": re.compile(
        rf"\bwithin {PERCENT}|{PERCENT} (?:above|below|smaller|larger|faster|slower|fewer"
        r"|more|less|lower|higher|of (?:the |its )?\d)"),
    "a measured timing": re.compile(rf"{TIMING},? (?:against|vs\.?|instead of|of the)"),
}
#: a benchmark cited in the paragraph ...
BENCHMARK = re.compile(r"bench/results/|\bbenchmark", re.I)
#: ... makes any percentage or timing in it a measurement
NEAR_BENCHMARK = {"a percentage next to a benchmark": re.compile(PERCENT),
                  "a timing next to a benchmark": re.compile(TIMING)}

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


def commented_paragraphs(source: str):
    """(first line, text) of every paragraph of a module's docstrings (every string
    statement: module, class, function and attribute docstrings) and comment blocks (runs
    of comments on consecutive lines)."""
    paragraphs = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            line = node.lineno
            for paragraph in re.split(r"(\n[ \t]*\n)", node.value.value):
                if paragraph.strip():
                    paragraphs.append((line, paragraph))
                line += paragraph.count("\n")
    block, last = [], None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        row = token.start[0]
        if block and row != last + 1:
            paragraphs.append((block[0][0], "\n".join(text for _, text in block)))
            block = []
        block.append((row, token.string))
        last = row
    if block:
        paragraphs.append((block[0][0], "\n".join(text for _, text in block)))
    return paragraphs


def figure_hits_in(path: str, source: str):
    """``path:line: what: text`` for every measured figure in the module's comments and
    docstrings."""
    hits = []
    for first, paragraph in commented_paragraphs(source):
        found = [(what, m) for what, pattern in MEASURED.items()
                 for m in pattern.finditer(paragraph)]
        if BENCHMARK.search(paragraph):
            found += [(what, m) for what, pattern in NEAR_BENCHMARK.items()
                      for m in pattern.finditer(paragraph)]
        for what, match in found:
            number = first + paragraph.count("\n", 0, match.start())
            line = paragraph.splitlines()[paragraph.count("\n", 0, match.start())]
            hits.append(f"{path}:{number}: {what}: {line.strip()[:160]}")
    return sorted(set(hits))


def figure_hits():
    hits = []
    for path in scanned_files():
        if path.endswith(".py") and path.split("/")[0] in PACKAGE:
            with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
                hits += figure_hits_in(path, handle.read())
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


def test_the_scan_finds_measured_figures():
    for line in ["the last period's W1 1.44× one-shot PrivHP's against 1.47× widened",
                 "lowers the variance at T to 0.38× Simple II's for 1.56× before T",
                 "maximum std is 1.9-2.3× below the binary tree's",
                 "it is 2-3× numpy's sum",
                 "Max std within 0.8 % of sqrt-factorisation",
                 "max std at most 0.8 % above",
                 "the file takes 9 ms, is 20 % smaller",
                 "(27 648 cells to 2 axes: 89 µs against 36 µs)",
                 "O(n log n): 7.8 ms against 41 ms for a 250 000-person shard"]:
        assert any(p.search(line) for p in MEASURED.values()), line
    # a percentage is a measurement where its paragraph cites a benchmark, not elsewhere
    cited = "# exceeded in 5.4-5.7 % of the runs under replace\n# (bench/results/x.txt)\n"
    assert figure_hits_in("x.py", cited) == [
        "x.py:1: a percentage next to a benchmark: # exceeded in 5.4-5.7 % of the runs under "
        "replace"]
    assert figure_hits_in("x.py", "# exceeded in 5.4-5.7 % of the runs under replace\n") == []
    for line in ["b = 2×Δ/ε", "≈ 4× in variance", "(2 × 2, 4 × 6 and 8 × 12 cells)",
                 "1.2 × 10⁹ records", "2.5×10^-4 of the total",
                 "a poverty rate of about 11 %", "one-σ (two-sided 68%) bounds",
                 "one-sided 2.5 %", "Student's 97.5 % quantile", "√(2/π)·σ per cell",
                 "variance at T: 92/ε² per unit sensitivity, against 63 for block"]:
        assert not any(p.search(line) for p in MEASURED.values()), line


def test_the_scan_reads_comments_and_docstrings(tmp_path):
    """A sentence of the kind the package's docstrings no longer carry, planted back in a
    module's docstring and in a comment, is found; the same figures in code are not."""
    module = tmp_path / "planted.py"
    module.write_text('''"""Memory.  The structure stays the one-shot structure of the same budget,
which does better than widening the sketches into the freed words (at s = 2 on the
benchmark's data, the last period's W1 1.44× one-shot PrivHP's against 1.47× widened).

Split.  A default (bench/results/counters_error.md).
"""
RATIO = "1.44× one-shot"


def f():
    """Max std within 0.8 % of ``sqrt-factorisation``."""
    # an independent pair joins in 8-12 % of its tests
    # (bench/results/tabular_structure.md)
    return "within 0.8 %"
''', encoding="utf-8")
    hits = figure_hits_in("planted.py", module.read_text(encoding="utf-8"))
    assert sorted(hit.split(": ")[0:2] for hit in hits) == [
        ["planted.py:11", "a measured percentage"],
        ["planted.py:12", "a percentage next to a benchmark"],
        ["planted.py:3", "a measured ratio"]], hits


def test_package_comments_quote_no_measured_figures():
    hits = figure_hits()
    assert not hits, ("a comment or docstring says why; the figures that justify a default "
                      "live in bench/results/, cited by path:\n" + "\n".join(hits))
