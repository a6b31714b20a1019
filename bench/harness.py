"""What the benchmarks share: timing, seeds, and writing a result as ``.json`` + ``.md``.

    from harness import RESULTS, Timer, parse_seeds, write_result

    with Timer() as timer:
        run_something()
    write_result(os.path.join(RESULTS, "my_benchmark"), {"seconds": timer.wall},
                 "# My benchmark\\n\\n| seconds |\\n|---|\\n| %.1f |" % timer.wall)

A result is two files with one stem: ``STEM.json`` (the figures, for a program) and
``STEM.md`` (the same figures as a table, for a reader). ``bench/README.md`` names, for each
claim, the stem its current result is written to; write a new variant to a new ``--out``.
Standard library only, so that every script can import it (scripts are run as
``python bench/SCRIPT.py``, which puts ``bench/`` on the import path).
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import time
from typing import Any, Iterable, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


class Timer:
    """Wall and process-CPU seconds of a ``with`` block (``.wall``, ``.cpu``)."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self._wall = self._cpu = 0.0

    def __enter__(self) -> "Timer":
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def timed(function, *args: Any, **kwargs: Any) -> Tuple[Any, float]:
    """``function(*args, **kwargs)`` and its wall seconds."""
    with Timer() as timer:
        value = function(*args, **kwargs)
    return value, timer.wall


def parse_seeds(text: str) -> List[int]:
    """Seeds from the command line: ``"0,1,2"``, ``"0-2"`` or a mix (``"0-2,7"``)."""
    seeds: List[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            seeds.extend(range(int(low), int(high) + 1))
        else:
            seeds.append(int(part))
    return seeds


def rng(*seed: int):
    """A numpy generator for a benchmark's data, seeded by one or more integers."""
    import numpy as np  # imported here: the harness itself needs only the standard library

    return np.random.default_rng(list(seed) if len(seed) != 1 else seed[0])


def command_line(argv: Optional[Iterable[str]] = None) -> str:
    """The command that reruns this script, as a reader would type it."""
    argv = list(sys.argv if argv is None else argv)
    script = os.path.relpath(os.path.abspath(argv[0]), os.path.dirname(HERE)) if argv else ""
    return " ".join(["python", shlex.quote(script), *map(shlex.quote, argv[1:])])


def write_result(stem: str, data: Any, markdown: str, *, indent: int = 1,
                 ensure_ascii: bool = True, encoding: Optional[str] = None,
                 allow_nan: bool = True) -> Tuple[str, str]:
    """Write ``data`` to ``STEM.json`` and ``markdown`` to ``STEM.md``; return both paths.

    ``stem`` is a path without extension (a script's ``--out``); its folder is created. The
    Markdown gets a final newline if it lacks one. The JSON options are ``json.dump``'s, so
    a script keeps the exact format its committed results have.
    """
    folder = os.path.dirname(os.path.abspath(stem))
    os.makedirs(folder, exist_ok=True)
    json_path, md_path = stem + ".json", stem + ".md"
    with open(json_path, "w", encoding=encoding) as handle:
        json.dump(data, handle, indent=indent, ensure_ascii=ensure_ascii, allow_nan=allow_nan)
    with open(md_path, "w", encoding=encoding) as handle:
        handle.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return json_path, md_path
