"""A table of malformed inputs and parameters for every synthesizer's jobs: window,
cumulative, tabular and bounded; run, init and step.

Each case runs the command line in-process (``main(argv)``, a ``SystemExit`` from argparse
caught) and must

* exit with status 2,
* name its subject (the file, column, row, value or option) in the error message,
* print no traceback, and
* leave the state and output directories byte-identical (every file hashed before and
  after; a directory the command was given but that did not exist must still hold no
  file).

The steps run against copies of initialised states that have already ingested period 1,
so a refused period-2 step would show any file it touched.  A few cases go through the
installed console script in a subprocess, to prove that no traceback reaches a user.

The data folder holds FIFOs (as an input and inside input folders): while a case runs, a
watchdog opens each FIFO for writing whenever a reader holds it open, which records that
the command opened it (a FIFO must be refused from ``os.stat`` alone) and lets that
reader see the end of the file instead of waiting for ever.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from continual_synth.pipelines.commands.cli import main
from continual_synth.transforms.files import write_file

from helpers_panels import (clone_incremental, long_table, markov_codes, release_snapshot,
                            snapshot, write_period_files)
from helpers_processes import overriding

PEOPLE, HORIZON = 30, 3
CONSOLE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "continual-synth")

WINDOW = ("--window", "2", "--horizon", str(HORIZON), "--rho", "5", "--seed", "1",
          "--shards", "2")
CUMULATIVE = ("--horizon", str(HORIZON), "--rho", "5", "--seed", "1", "--shards", "2")
TABULAR = ("--epsilon", "2", "--fit", "mw", "--seed", "1", "--horizon", str(HORIZON))
PRIVHP = ("--columns", "x,y", "--bounds", "0:1", "--samples", "10", "--depth", "4",
           "--seed", "1", "--shards", "2")
DOMAIN = {"a": [0, 1, 2], "b": ["x", "y"]}


# ----------------------------------------------------------------------------- data


def _with_value(table: pa.Table, column: str, values) -> pa.Table:
    return table.set_column(table.column_names.index(column), column, pa.array(values))


def _write_text(path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _panel_files(data) -> None:
    """The long panel (ids 1..30, periods 1..3, values 0/1), its period files, and bad
    variants of both."""
    table = long_table(markov_codes(PEOPLE, HORIZON, seed=5))
    write_file(table, str(data / "panel.parquet"), "parquet")
    write_period_files(table, str(data / "periods"))
    values = np.asarray(table["value"].to_pylist())
    rows = np.arange(values.size)
    write_file(_with_value(table, "value", np.where(values == 1, "yes", "no")),
               str(data / "strings.parquet"), "parquet")
    _write_text(data / "mixed.csv", "id,period,value\n1,1,0\n1,2,yes\n1,3,1\n")
    for name, bad in (("nan", np.nan), ("inf", np.inf), ("half", 0.5)):
        write_file(_with_value(table, "value", np.where(rows == 7, bad, values.astype(float))),
                   str(data / f"{name}.parquet"), "parquet")
    write_file(_with_value(table, "value", np.where(rows == 7, 2, values)),
               str(data / "two.parquet"), "parquet")
    periods = np.asarray(table["period"].to_pylist())
    write_file(_with_value(table, "period", np.where(rows == 4, 9, periods).astype(np.int32)),
               str(data / "period9.parquet"), "parquet")
    ids = table["id"].to_pylist()
    ids[3] = None
    write_file(_with_value(table, "id", pa.array(ids, pa.int64())),
               str(data / "null_id.parquet"), "parquet")
    (data / "empty.parquet").write_bytes(b"")
    _write_text(data / "header.csv", "id,period,value\n")
    (data / "latin1_header.csv").write_bytes(b"id,period,val\xe9\n1,1,0\n")
    write_file(table.slice(0, 0), str(data / "zero_rows.parquet"), "parquet")
    whole = (data / "panel.parquet").read_bytes()
    (data / "truncated.parquet").write_bytes(whole[: len(whole) // 2])
    corrupt = bytearray(whole)  # a valid footer in front of broken data pages
    corrupt[4: len(whole) // 3] = bytes(len(whole) // 3 - 4)
    (data / "corrupt.parquet").write_bytes(bytes(corrupt))
    # a folder of per-period parts, one of them with its ids as text
    parts = write_period_files(table, str(data / "mixed_types"), keep_period=True)
    part = pq.read_table(parts[1])
    write_file(_with_value(part, "id", pa.array([str(i) for i in part["id"].to_pylist()])),
               parts[1], "parquet")
    write_file(table, str(data / "mixed_dir" / "a.parquet"), "parquet")
    write_file(table, str(data / "mixed_dir" / "b.csv"), "csv")
    _write_text(data / "a_file", "not a directory\n")
    (data / "corrupt_state" / "versions").mkdir(parents=True)
    _write_text(data / "corrupt_state" / "versions" / "v000000.json", "{\"kind\": \"window\",")
    (data / "old_state").mkdir()
    _write_text(data / "old_state" / "state.json", "{\"kind\": \"window\"}")

    # period 2 of the panel, and bad variants of it (the states below have seen period 1)
    p2 = pa.table({"id": pa.array(np.arange(1, PEOPLE + 1, dtype=np.int64)),
                   "value": pa.array((np.arange(PEOPLE) % 2).astype(np.int64))})
    write_file(p2, str(data / "p2.parquet"), "parquet")
    write_file(_with_value(p2, "value", ["yes" if v else "no" for v in p2["value"].to_pylist()]),
               str(data / "p2_strings.csv"), "csv")
    write_file(_with_value(p2, "value", np.where(np.arange(PEOPLE) == 3, np.inf, 0.0)),
               str(data / "p2_inf.parquet"), "parquet")
    write_file(_with_value(p2, "value", np.where(np.arange(PEOPLE) == 3, 2, 0)),
               str(data / "p2_two.parquet"), "parquet")
    write_file(p2.append_column("period", pa.array(np.full(PEOPLE, 3, dtype=np.int64))),
               str(data / "p2_period3.parquet"), "parquet")
    write_file(pa.concat_tables([p2, p2.slice(0, 1)]), str(data / "p2_duplicate.parquet"),
               "parquet")
    p1 = pa.table({"id": p2["id"], "value": p2["value"]})
    write_file(pa.concat_tables([p1, p1.slice(4, 1)]), str(data / "p1_duplicate.parquet"),
               "parquet")
    write_file(p2.slice(0, PEOPLE - 1), str(data / "p2_missing_id.parquet"), "parquet")
    write_file(_with_value(p2, "id", np.r_[np.arange(1, PEOPLE), 999]),
               str(data / "p2_new_id.parquet"), "parquet")
    _write_text(data / "p2_header.csv", "id,value\n")
    _panel_shape_files(data, table, p2)


def _panel_shape_files(data, table: pa.Table, p2: pa.Table) -> None:
    """Panels whose columns are nested or named twice, and special files where data
    files should be: FIFOs, a symbolic link that loops, one that points nowhere."""
    write_file(_with_value(table, "id", [{"person": i} for i in table["id"].to_pylist()]),
               str(data / "struct_id.parquet"), "parquet")
    write_file(_with_value(table, "value", [[v] for v in table["value"].to_pylist()]),
               str(data / "list_value.parquet"), "parquet")
    write_file(_with_value(p2, "id", [{"person": i} for i in p2["id"].to_pylist()]),
               str(data / "p2_struct_id.parquet"), "parquet")
    write_file(_with_value(p2, "value", [[v] for v in p2["value"].to_pylist()]),
               str(data / "p2_list_value.parquet"), "parquet")
    rows = list(zip(*(table[name].to_pylist() for name in ("id", "period", "value"))))
    _write_text(data / "repeated.csv", "id,period,value,value\n" + "".join(
        f"{i},{t},{v},{v}\n" for i, t, v in rows))
    _write_text(data / "p2_repeated.csv", "id,value,id\n" + "".join(
        f"{i},{v},{i}\n" for i, v in zip(p2["id"].to_pylist(), p2["value"].to_pylist())))
    write_file(pa.Table.from_arrays([table["id"], table["period"], table["value"],
                                     table["value"]], names=["id", "period", "value", "value"]),
               str(data / "repeated.parquet"), "parquet")
    schema = {"type": "record", "name": "Report", "fields": [
        {"name": "id", "type": {"type": "record", "name": "Person",
                                "fields": [{"name": "number", "type": "long"}]}},
        {"name": "period", "type": "long"}, {"name": "value", "type": "long"}]}
    with open(data / "struct_id.avro", "wb") as handle:
        fastavro.writer(handle, schema, [{"id": {"number": i}, "period": t, "value": v}
                                         for i, t, v in rows])
    os.mkfifo(data / "fifo.parquet")
    (data / "fifo_dir").mkdir()
    write_file(table, str(data / "fifo_dir" / "a.parquet"), "parquet")
    os.mkfifo(data / "fifo_dir" / "b.parquet")
    (data / "p2_fifo_dir").mkdir()
    write_file(p2, str(data / "p2_fifo_dir" / "a.parquet"), "parquet")
    os.mkfifo(data / "p2_fifo_dir" / "b.parquet")
    os.symlink("loop.parquet", data / "loop.parquet")
    (data / "dangling_dir").mkdir()
    write_file(table, str(data / "dangling_dir" / "a.parquet"), "parquet")
    os.symlink(str(data / "gone.parquet"), data / "dangling_dir" / "b.parquet")


def _tabular_files(data) -> None:
    with open(data / "domain.json", "w", encoding="utf-8") as handle:
        json.dump(DOMAIN, handle)
    _write_text(data / "domain_syntax.json", "{\"a\": [0, 1,\n")
    _write_text(data / "domain_list.json", "[[0, 1], [\"x\"]]")
    _write_text(data / "domain_empty_attribute.json", "{\"a\": [], \"b\": [\"x\"]}")
    _write_text(data / "domain_nested.json", "{\"a\": [[0], [1]], \"b\": [\"x\"]}")
    with open(data / "domain_wide.json", "w", encoding="utf-8") as handle:  # 10^10-cell pair
        json.dump({"a": list(range(10 ** 5)), "b": list(range(10 ** 5))}, handle)
    with open(data / "domain_30.json", "w", encoding="utf-8") as handle:
        json.dump({f"a{i}": [0, 1] for i in range(30)}, handle)
    rng = np.random.default_rng(3)
    n = 20 * HORIZON
    stream = pa.table({"period": pa.array(np.repeat(np.arange(1, HORIZON + 1), 20)),
                       "a": pa.array(rng.integers(0, 3, n)),
                       "b": pa.array(rng.choice(["x", "y"], n))})
    write_file(stream, str(data / "stream.parquet"), "parquet")
    a = stream["a"].to_pylist()
    write_file(_with_value(stream, "a", np.where(np.arange(n) == 5, 7, a)),
               str(data / "stream_outside.parquet"), "parquet")
    write_file(_with_value(stream, "a", np.where(np.arange(n) == 5, np.nan, a)),
               str(data / "stream_nan.parquet"), "parquet")
    write_file(_with_value(stream, "a", ["q" if i == 5 else str(v) for i, v in enumerate(a)]),
               str(data / "stream_text.parquet"), "parquet")
    write_file(_with_value(stream, "period", stream["period"].cast(pa.float64())),
               str(data / "stream_float_period.parquet"), "parquet")
    write_file(_with_value(stream, "period", np.where(np.arange(n) == 9, 7,
                                                      stream["period"].to_pylist())),
               str(data / "stream_period7.parquet"), "parquet")
    parts = write_period_files(stream, str(data / "stream_mixed_types"), keep_period=True)
    part = pq.read_table(parts[2])
    write_file(_with_value(part, "a", pa.array([str(v) for v in part["a"].to_pylist()])),
               parts[2], "parquet")
    _write_text(data / "stream_na.csv", "period,a,b\n" + "".join(  # a as 1.0, one "NA": text
        f"{t},{'NA' if i == 5 else float(v)},{w}\n" for i, (t, v, w) in enumerate(
            zip(stream["period"].to_pylist(), a, stream["b"].to_pylist()))))
    _write_text(data / "stream_header.csv", "period,a,b\n")
    period = stream.slice(0, 20).drop_columns(["period"])
    write_file(period, str(data / "t1.csv"), "csv")
    write_file(stream.slice(20, 20).drop_columns(["period"]), str(data / "t2.csv"), "csv")
    write_file(_with_value(period, "b", ["z"] + period["b"].to_pylist()[1:]),
               str(data / "t2_outside.csv"), "csv")
    write_file(period.drop_columns(["b"]), str(data / "t2_no_b.csv"), "csv")
    write_file(period.append_column("period", pa.array(np.full(20, 3))),
               str(data / "t2_period3.csv"), "csv")
    # no records and no column b (no records alone is a period without records: released)
    _write_text(data / "t2_header.csv", "a\n")
    write_file(stream.set_column(1, "a", pa.array([[("code", v)] for v in a],
                                                  pa.map_(pa.string(), pa.int64()))),
               str(data / "stream_map.parquet"), "parquet")
    write_file(pa.Table.from_arrays([stream["period"], stream["a"], stream["b"], stream["b"]],
                                    names=["period", "a", "b", "b"]),
               str(data / "stream_repeated.parquet"), "parquet")
    _write_text(data / "t2_repeated.csv", "a,b,a\n" + "".join(
        f"{v},{w},{v}\n" for v, w in zip(period["a"].to_pylist(), period["b"].to_pylist())))
    (data / "t2_fifo_dir").mkdir()
    write_file(stream.slice(20, 20).drop_columns(["period"]), str(data / "t2_fifo_dir" / "a.csv"),
               "csv")
    os.mkfifo(data / "t2_fifo_dir" / "b.csv")


def _point_files(data) -> None:
    rng = np.random.default_rng(4)
    points = rng.random((200, 2))
    write_file(pa.table({"x": points[:, 0], "y": points[:, 1]}), str(data / "points.parquet"),
               "parquet")
    for name, value in (("inf", np.inf), ("nan", np.nan), ("outside", 1.5)):
        bad = points.copy()
        bad[11, 1] = value
        write_file(pa.table({"x": bad[:, 0], "y": bad[:, 1]}),
                   str(data / f"points_{name}.parquet"), "parquet")
    write_file(pa.table({"x": pa.array(["a"] * 200), "y": points[:, 1]}),
               str(data / "points_text.parquet"), "parquet")
    _write_text(data / "points_header.csv", "x,y\n")
    write_file(pa.table({"x": points[:, 0], "y": [{"y": v} for v in points[:, 1]]}),
               str(data / "points_struct.parquet"), "parquet")
    _write_text(data / "points_repeated.csv", "x,y,x\n" + "".join(
        f"{x},{y},{x}\n" for x, y in points))
    (data / "points_fifo_dir").mkdir()
    write_file(pa.table({"x": points[:, 0], "y": points[:, 1]}),
               str(data / "points_fifo_dir" / "a.parquet"), "parquet")
    os.mkfifo(data / "points_fifo_dir" / "b.parquet")


def run_cli(argv) -> Tuple[int, str]:
    """``(exit status, stderr)`` of ``main(argv)`` in this process."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse refuses an option
            code = exc.code
    return code, err.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Every input file, and one state per incremental synthesizer that has released
    period 1 (``states[kind] = (state dir, output dir)``), plus fresh window and
    cumulative states in 4 shards (``states["window-new"]`` …)."""
    root = tmp_path_factory.mktemp("fuzz")
    data = root / "data"
    data.mkdir()
    _panel_files(data)
    _tabular_files(data)
    _point_files(data)
    states = {}
    for kind, init, first in (("window", WINDOW, "periods/p01.parquet"),
                              ("cumulative", CUMULATIVE, "periods/p01.parquet"),
                              ("tabular", ("--domain", str(data / "domain.json"), *TABULAR),
                               "t1.csv")):
        state, out = str(root / kind / "state"), str(root / kind / "release")
        code, err = run_cli([kind, "init", "--state", state, *init])
        assert code == 0, err
        code, err = run_cli([kind, "step", "--state", state, "--input", str(data / first),
                             "--output", out])
        assert code == 0, err
        states[kind] = (state, out)
        if kind != "tabular":
            fresh = str(root / kind / "new")
            code, err = run_cli([kind, "init", "--state", fresh,
                                 *overriding(init, ["--shards", "4"])])
            assert code == 0, err
            states[f"{kind}-new"] = (fresh, str(root / kind / "new-release"))
    return data, states


# ---------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """``argv`` and ``subjects`` may hold ``{data}`` (the input folder), ``{state}`` and
    ``{out}`` (the case's state and output directories)."""

    name: str
    argv: Tuple[str, ...]
    subjects: Tuple[str, ...]
    state: Optional[str] = None  # a key of world's states: the step runs on a copy of it


def run_case(kind, source, *extra, subjects, **marks) -> Case:
    name = f"{kind}-run-{' '.join(extra) or source}"
    inputs = ("--input", f"{{data}}/{source}")
    common = {"window": WINDOW, "cumulative": CUMULATIVE, "privhp": ("--epsilon", "1", *PRIVHP),
              "tabular": ("--domain", "{data}/domain.json", *TABULAR)}[kind]
    return Case(name, (kind, "run", *inputs, "--output", "{out}", *overriding(common, extra)),
                subjects, **marks)


def step_case(kind, source, *extra, subjects, state=None, **marks) -> Case:
    return Case(f"{state or kind}-step-{' '.join(extra) or source}",
                (kind, "step", "--state", "{state}", "--input", f"{{data}}/{source}",
                 "--output", "{out}", *extra), subjects, state=state or kind, **marks)


def init_case(kind, label, *argv, subjects) -> Case:
    return Case(f"{kind}-init-{label}",
                (kind, "init", "--state", "{state}", *overriding(argv)), subjects)


def _panel_cases():
    w, c = "window", "cumulative"
    files = [
        ("strings.parquet", ("strings.parquet", "column 'value'", "'yes' (row 1)", "text")),
        ("mixed.csv", ("mixed.csv", "column 'value'", "'yes' (row 2)")),
        ("nan.parquet", ("nan.parquet", "column 'value'", "nan (row 8)")),
        ("inf.parquet", ("inf.parquet", "column 'value'", "inf (row 8)")),
        ("half.parquet", ("half.parquet", "column 'value'", "0.5 (row 8)")),
        ("two.parquet", ("two.parquet", "column 'value'", "value 2 (row 8)", "alphabet")),
        ("period9.parquet", ("period9.parquet", "row 5 holds period 9")),
        ("null_id.parquet", ("null_id.parquet", "column 'id'", "empty")),
        ("empty.parquet", ("empty.parquet", "empty (0 bytes)")),
        ("header.csv", ("header.csv", "no records")),
        # before: "'utf-8' codec can't decode byte 0xe9", naming no file
        ("latin1_header.csv", ("latin1_header.csv", "header is not UTF-8")),
        ("zero_rows.parquet", ("zero_rows.parquet", "no records")),
        ("truncated.parquet", ("truncated.parquet", "cannot read as parquet")),
        ("corrupt.parquet", ("corrupt.parquet", "cannot read row group 0")),
        ("mixed_dir", ("mixed_dir", "--input-format")),
        # before: "Could not convert '1' with type str: tried to convert to int64"
        ("mixed_types", ("mixed_types/p02.parquet", "column 'id'", "string",
                         "mixed_types/p01.parquet", "int64")),
        ("no_such_file.parquet", ("no_such_file.parquet", "no such file")),
    ]
    # nested columns, a column named twice, special files where a data file should be
    files += [
        # before: "TypeError: '<' not supported between instances of 'dict' and 'dict'"
        ("struct_id.parquet", ("struct_id.parquet", "column 'id'", "struct<person: int64>",
                               "flat")),
        # before: "column 'value' holds text ([0]) (row 1)"
        ("list_value.parquet", ("list_value.parquet", "column 'value'", "list<", "flat")),
        ("struct_id.avro", ("struct_id.avro", "column 'id'", "record Person", "flat")),
        # before: "KeyError: 'Field \"value\" exists 2 times in schema'"
        ("repeated.csv", ("repeated.csv", "'value' appears 2 times")),
        ("repeated.parquet", ("repeated.parquet", "'value' appears 2 times")),
        # before: "no such file or directory" (the FIFO, the loop), a hang (the folder)
        ("fifo.parquet", ("fifo.parquet", "is a FIFO (named pipe), not a data file")),
        ("fifo_dir", ("fifo_dir/b.parquet", "is a FIFO (named pipe)")),
        ("loop.parquet", ("loop.parquet", "is a symbolic link that loops")),
        # before: skipped silently (the release made of the folder's other file)
        ("dangling_dir", ("dangling_dir/b.parquet", "points to", "gone.parquet",
                          "which does not exist")),
    ]
    cases = [run_case(w, source, subjects=subjects) for source, subjects in files]
    cases.append(Case("window-run-/dev/null",
                      ("window", "run", "--input", "/dev/null", "--output", "{out}", *WINDOW),
                      ("/dev/null is a character device, not a data file",)))
    cases += [run_case(c, "mixed_types", subjects=("mixed_types/p02.parquet", "column 'id'")),
              run_case(c, "strings.parquet", subjects=("strings.parquet", "column 'value'")),
              run_case(c, "two.parquet", subjects=("two.parquet", "value 2 (row 8)")),
              run_case(c, "list_value.parquet", subjects=("list_value.parquet",
                                                          "column 'value'", "list<")),
              run_case(c, "dangling_dir", subjects=("dangling_dir/b.parquet", "does not exist"))]
    options = [
        (w, ("--rho", "0"), ("--rho", "positive")), (w, ("--rho", "-1"), ("--rho",)),
        (w, ("--rho", "nan"), ("--rho", "nan")), (c, ("--rho", "inf"), ("--rho", "inf")),
        (w, ("--horizon", "0"), ("--horizon", "got 0")),
        (c, ("--horizon", "-3"), ("--horizon", "got -3")),
        (c, ("--horizon", "100000000"), ("--horizon", "at most")),
        (w, ("--window", "4"), ("--window", "longer than the horizon")),
        (w, ("--window", "40", "--horizon", "40"), ("--window 40 with 2 values", "2^40",
                                                    "8 TiB")),
        (w, ("--shards", "0"), ("--shards", "got 0")), (c, ("--shards", "-2"), ("--shards",)),
        (w, ("--shards", "two"), ("--shards", "'two'")),
        (w, ("--seed", "-1"), ("--seed", "got -1")),
        (w, ("--delta", "0"), ("--delta", "(0, 1)")), (c, ("--delta", "1.5"), ("--delta",)),
        (w, ("--beta", "nan"), ("--beta", "nan")),
        (c, ("--population-share", "1"), ("--population-share",)),
        (w, ("--n-pad", "-1"), ("--n-pad", "got -1")),
        (w, ("--alphabet", "0"), ("--alphabet",)), (w, ("--alphabet", "a,a"), ("--alphabet",)),
        (w, ("--missing-value", "x"), ("--missing-value", "'x'")),
        (w, ("--value-col", "status"), ("panel.parquet", "['status']", "--value-col")),
        (c, ("--id-col", "value"), ("--id-col", "different columns")),
        (c, ("--alphabet", "0,1,2"), ("--alphabet", "cumulative run")),
        (w, ("--neighbour", "add-remove"), ("--neighbour", "did you mean --neighbor?")),
        (c, ("--budget_split", "paper"), ("--budget_split", "did you mean --budget-split?")),
        (w, ("--runer", "DirectRunner"), ("--runer", "did you mean --runner?")),
        (w, ("--format", "xlsx"), ("--format", "xlsx")),
        (w, ("--input-format", "json"), ("--input-format", "json")),
    ]
    cases += [run_case(kind, "panel.parquet", *extra, subjects=subjects)
              for kind, extra, subjects in options]
    cases.append(Case("window-run-output-is-a-file",
                      ("window", "run", "--input", "{data}/panel.parquet", "--output",
                       "{data}/a_file", *WINDOW), ("--output", "a_file", "not a directory")))
    cases.append(Case("cumulative-run-output-under-a-file",
                      ("cumulative", "run", "--input", "{data}/panel.parquet", "--output",
                       "{data}/a_file/release", *CUMULATIVE), ("--output", "a_file/release",
                                                               "is a file")))
    cases += [init_case(w, "rho-nan", *WINDOW, "--rho", "nan", subjects=("--rho",)),
              init_case(w, "window-30", *WINDOW, "--window", "30", "--horizon", "30",
                        subjects=("--window 30", "GiB")),
              init_case(c, "horizon-0", *CUMULATIVE, "--horizon", "0", subjects=("--horizon",)),
              Case("window-init-state-is-a-file",
                   ("window", "init", "--state", "{data}/a_file", *WINDOW),
                   ("--state", "a_file"))]
    steps = [
        (w, "p2_strings.csv", (), ("p2_strings.csv", "column 'value'", "'no' (row 1)")),
        (w, "p2_inf.parquet", (), ("p2_inf.parquet", "column 'value'", "inf (row 4)")),
        (c, "p2_two.parquet", (), ("p2_two.parquet", "value 2 (row 4)")),
        (c, "p2_strings.csv", (), ("p2_strings.csv", "column 'value'")),
        (w, "p2_period3.parquet", (), ("p2_period3.parquet", "period 3", "next period")),
        (w, "p2_header.csv", (), ("p2_header.csv", "no records")),
        (c, "latin1_header.csv", (), ("latin1_header.csv", "header is not UTF-8")),
        (c, "empty.parquet", (), ("empty.parquet", "empty")),
        (w, "truncated.parquet", (), ("truncated.parquet", "cannot read as parquet")),
        (c, "corrupt.parquet", (), ("corrupt.parquet", "cannot read row group 0")),
        (w, "mixed_dir", (), ("mixed_dir", "--input-format")),
        (w, "p2.parquet", ("--period", "0"), ("--period", "got 0")),
        (w, "p2.parquet", ("--period", "x"), ("--period", "'x'")),
        (w, "p2.parquet", ("--period", "3"), ("period 3", "out of order", "next period is 2")),
        (w, "p2_struct_id.parquet", (), ("p2_struct_id.parquet", "column 'id'", "struct<")),
        (c, "p2_list_value.parquet", (), ("p2_list_value.parquet", "column 'value'", "list<")),
        (w, "p2_repeated.csv", (), ("p2_repeated.csv", "'id' appears 2 times")),
        # before: the step waited, holding the state's lock, until the FIFO had a writer
        (w, "p2_fifo_dir", (), ("p2_fifo_dir/b.parquet", "FIFO (named pipe)")),
        (c, "fifo.parquet", (), ("fifo.parquet", "FIFO (named pipe)")),
        (c, "loop.parquet", (), ("loop.parquet", "symbolic link that loops")),
    ]
    cases += [step_case(kind, source, *extra, subjects=subjects)
              for kind, source, extra, subjects in steps]
    cases += [
        step_case(w, "p2.parquet", "--period", "13", subjects=("period 13", "beyond the horizon")),
        step_case(w, "p2_duplicate.parquet", subjects=("period 2", "id 1 ")),
        step_case(c, "p2_missing_id.parquet", subjects=("period 2", "id 30 ")),
        step_case(w, "p2_new_id.parquet", subjects=("period 2", "id 999 ")),
        # the shards before the one holding the duplicate write their new history first
        step_case(w, "p1_duplicate.parquet", subjects=("period 1", "id 5 "),
                  state="window-new"),
        step_case(c, "p1_duplicate.parquet", subjects=("period 1", "id 5 "),
                  state="cumulative-new"),
        # before: pyarrow's "Unable to merge: Field id has incompatible types", a traceback
        Case("evaluate-cumulative-truth-mixed_types",
             ("evaluate", c, "--truth", "{data}/mixed_types", "--synthetic", "{out}"),
             ("mixed_types/p02.parquet", "column 'id'", "string", "int64"), state=c),
        Case("evaluate-cumulative-truth-list_value",
             ("evaluate", c, "--truth", "{data}/list_value.parquet", "--synthetic", "{out}"),
             ("list_value.parquet", "column 'value'", "list<"), state=c),
        Case("window-step-into-another-output",
             ("window", "step", "--state", "{state}", "--input", "{data}/p2.parquet",
              "--output", "{data}/elsewhere"), ("releases into",), state=w),
        Case("window-step-on-a-cumulative-state",
             ("window", "step", "--state", "{state}", "--input", "{data}/p2.parquet",
              "--output", "{out}"), ("cumulative", "not a window"), state=c),
        Case("window-step-on-a-corrupt-state",
             ("window", "step", "--state", "{data}/corrupt_state", "--input",
              "{data}/p2.parquet", "--output", "{out}"), ("corrupt_state", "v000000.json")),
        Case("window-step-on-an-old-format-state",
             ("window", "step", "--state", "{data}/old_state", "--input",
              "{data}/p2.parquet", "--output", "{out}"), ("old_state", "old single-file format")),
        Case("window-step-without-a-state",
             ("window", "step", "--state", "{data}/no_state", "--input", "{data}/p2.parquet",
              "--output", "{out}"), ("no_state", "no state here")),
    ]
    return cases


def _tabular_cases():
    t = "tabular"
    cases = [run_case(t, "stream.parquet", *extra, subjects=subjects) for extra, subjects in [
        (("--epsilon", "0"), ("--epsilon", "got 0")), (("--epsilon", "-1"), ("--epsilon",)),
        (("--epsilon", "nan"), ("--epsilon", "nan")), (("--epsilon", "inf"), ("--epsilon",)),
        (("--horizon", "0"), ("--horizon", "got 0")),
        (("--selections", "0"), ("--selections",)),
        (("--selections", "9"), ("--selections", "at most")),
        (("--marginals", "a,zz"), ("--marginals", "'zz'")),
        (("--marginals", "5"), ("--marginals",)),
        (("--seed", "-4"), ("--seed",)),
        (("--domain", "{data}/domain_syntax.json"), ("domain_syntax.json", "not valid JSON")),
        (("--domain", "{data}/domain_list.json"), ("domain_list.json", "JSON object")),
        (("--domain", "{data}/domain_empty_attribute.json"),
         ("domain_empty_attribute.json", "'a' has no values")),
        (("--domain", "{data}/domain_nested.json"), ("domain_nested.json", "JSON object")),
        (("--domain", "{data}/no_domain.json"), ("no_domain.json", "does not exist")),
        (("--horizon", "2"), ("stream.parquet", "periods must be 1..2")),
    ]]
    cases += [run_case(t, source, subjects=subjects) for source, subjects in [
        ("stream_outside.parquet", ("stream_outside.parquet", "column 'a'", "value 7 (row 6)")),
        ("stream_nan.parquet", ("stream_nan.parquet", "column 'a'", "nan (row 6)")),
        # before: "value '2.0' (row 1) is not in the domain", the first row of a text column
        ("stream_na.csv", ("stream_na.csv", "column 'a'", "'NA' (row 6)", "not a number")),
        ("stream_text.parquet", ("stream_text.parquet", "column 'a'", "'q' (row 6)")),
        ("stream_float_period.parquet", ("stream_float_period.parquet", "'period'")),
        ("stream_period7.parquet", ("stream_period7.parquet", "row 10", "period 7")),
        ("stream_header.csv", ("stream_header.csv", "no records")),
        ("panel.parquet", ("panel.parquet", "missing attribute column")),
        ("stream_map.parquet", ("stream_map.parquet", "column 'a'", "map<string, int64",
                                "flat")),
        ("stream_repeated.parquet", ("stream_repeated.parquet", "'b' appears 2 times")),
    ]]
    cases += [
        Case("tabular-run-infer-domain-from-headers-only",
             (t, "run", "--input", "{data}/stream_header.csv", "--output", "{out}",
              "--infer-domain", "--epsilon", "1", "--fit", "mw"),
             ("stream_header.csv", "no records")),
    ]
    cases += [init_case(t, "epsilon-0", "--domain", "{data}/domain.json", *TABULAR,
                        "--epsilon", "0", subjects=("--epsilon",)),
              # run takes T from the stream's last period; init has nothing to take it from
              init_case(t, "bounded-counter-without-horizon", "--domain",
                        "{data}/domain.json", "--epsilon", "1", "--fit", "mw", "--counter",
                        "tree", subjects=("--counter 'tree'", "--horizon")),
              init_case(t, "domain-syntax", "--domain", "{data}/domain_syntax.json", *TABULAR,
                        subjects=("domain_syntax.json",)),
              init_case(t, "domain-too-wide", "--domain", "{data}/domain_wide.json", *TABULAR,
                        subjects=("--marginals", "1e+10", "GiB")),
              init_case(t, "12-way-of-30", "--domain", "{data}/domain_30.json", *TABULAR,
                        "--marginals", "12", subjects=("--marginals 12", "8.65e+07"))]
    cases += [step_case(t, source, *extra, subjects=subjects) for source, extra, subjects in [
        ("t2_outside.csv", (), ("t2_outside.csv", "column 'b'", "'z' (row 1)")),
        ("t2_no_b.csv", (), ("t2_no_b.csv", "'b'")),
        ("t2_period3.csv", (), ("t2_period3.csv", "period 3")),
        ("t2_header.csv", (), ("t2_header.csv", "'b'")),
        ("t2.csv", ("--period", "-1"), ("--period", "got -1")),
        ("t2_repeated.csv", (), ("t2_repeated.csv", "'a' appears 2 times")),
        ("t2_fifo_dir", (), ("t2_fifo_dir/b.csv", "FIFO (named pipe)")),
    ]]
    cases.append(Case("evaluate-tabular-truth-stream_mixed_types",
                      ("evaluate", t, "--truth", "{data}/stream_mixed_types", "--synthetic",
                       "{out}"), ("stream_mixed_types/p03.parquet", "column 'a'", "string",
                                  "int64"), state=t))
    cases.append(Case("evaluate-tabular-truth-stream_map",
                      ("evaluate", t, "--truth", "{data}/stream_map.parquet", "--synthetic",
                       "{out}"), ("stream_map.parquet", "column 'a'", "map<"), state=t))
    return cases


def _bounded_cases():
    b = "privhp"
    cases = [run_case(b, "points.parquet", *extra, subjects=subjects) for extra, subjects in [
        (("--epsilon", "0"), ("--epsilon", "got 0")), (("--epsilon", "nan"), ("--epsilon",)),
        (("--epsilon", "inf", "--expected-n", "100"), ("--epsilon", "inf")),
        (("--bounds", "1:0"), ("--bounds", "low < high")),
        (("--bounds", "0:nan"), ("--bounds", "nan")),
        (("--bounds", "abc"), ("--bounds", "'abc'")),
        (("--bounds", "0:1,0:1,0:1"), ("--bounds", "2 low:high")),
        (("--columns", ","), ("--columns",)), (("--columns", "x,x"), ("--columns", "twice")),
        (("--columns", "x,z"), ("points.parquet", "['z']")),
        (("--samples", "-1"), ("--samples", "got -1")),
        (("--samples", "1000000000000"), ("--samples", "raise --shards")),
        (("--shards", "0"), ("--shards",)), (("--batch-rows", "0"), ("--batch-rows",)),
        (("--depth", "70"), ("--depth", "1..62")), (("--depth", "0"), ("--depth", "got 0")),
        (("--expected-n", "-5"), ("--expected-n", "got -5")),
        (("--level-epsilons", "0.5,0.5"), ("--level-epsilons", "5 values")),
        (("--depth", "12", "--sketch-width", "100000000000"), ("--sketch-width", "TiB")),
        (("--prune-k", "0"), ("--prune-k", "got 0")),
        (("--hash-seed", "-1"), ("--hash-seed",)),
    ]]
    cases += [run_case(b, source, subjects=subjects) for source, subjects in [
        ("points_inf.parquet", ("points_inf.parquet", "column 'y'", "row 12")),
        ("points_nan.parquet", ("points_nan.parquet", "column 'y'", "row 12")),
        ("points_outside.parquet", ("points_outside.parquet", "column 'y'", "row 12", "--bounds")),
        ("points_text.parquet", ("points_text.parquet", "column 'x'", "numeric")),
        ("points_header.csv", ("points_header.csv", "no records")),
        ("empty.parquet", ("empty.parquet", "empty")),
        ("points_struct.parquet", ("points_struct.parquet", "column 'y'", "struct<y: double>")),
        ("points_repeated.csv", ("points_repeated.csv", "'x' appears 2 times")),
        ("points_fifo_dir", ("points_fifo_dir/b.parquet", "FIFO (named pipe)")),
        ("loop.parquet", ("loop.parquet", "symbolic link that loops")),
    ]]
    cases.append(Case("privhp-run-/dev/null",
                      (b, "run", "--input", "/dev/null", "--output", "{out}", "--epsilon", "1",
                       *PRIVHP), ("/dev/null", "character device")))
    return cases


CASES = _panel_cases() + _tabular_cases() + _bounded_cases()


# --------------------------------------------------------------------------- running


def tree_hashes(directory: str) -> Dict[str, str]:
    """SHA-256 of every file under ``directory`` (relative path → digest)."""
    return {path: hashlib.sha256(data).hexdigest()
            for path, data in snapshot(directory).items()}


def fifos(directory) -> List[str]:
    """The FIFOs under ``directory``."""
    return sorted(os.path.join(root, name) for root, _, names in os.walk(directory)
                  for name in names if stat.S_ISFIFO(os.lstat(os.path.join(root, name)).st_mode))


class FifoWatchdog:
    """While a command runs: opens each FIFO for writing whenever a reader holds it open
    (only then does a non-blocking open for writing succeed), recording the FIFO, and
    closes it at once, so that the reader sees the end of the file instead of waiting for
    a writer for ever."""

    def __init__(self, paths):
        self.paths, self.opened = list(paths), []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self._done.wait(0.02):
            for path in self.paths:
                try:
                    descriptor = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:  # no reader (ENXIO)
                    continue
                self.opened.append(path)
                os.close(descriptor)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


# A refusal is decided before any pipeline runs: well within this, on a shared machine
PROMPT_SECONDS = 60


@dataclass
class Outcome:
    code: int
    stderr: str
    subjects: Tuple[str, ...]
    state_before: Dict[str, str]
    state_after: Dict[str, str]
    output_before: Dict[str, str]
    output_after: Dict[str, str]
    fifos_opened: Tuple[str, ...] = ()
    seconds: float = 0.0


_OUTCOMES: Dict[str, Outcome] = {}


@pytest.fixture
def outcome(world, request, tmp_path_factory) -> Outcome:
    """Run a case once (both tests below read the same run)."""
    case = request.param
    if case.name not in _OUTCOMES:
        data, states = world
        place = tmp_path_factory.mktemp("case")
        state, out = str(place / "state"), str(place / "release")
        if case.state:
            state, out = clone_incremental(*states[case.state], str(place))
        fill = {"data": str(data), "state": state, "out": out}
        argv = [arg.format(**fill) for arg in case.argv]
        before = tree_hashes(state), tree_hashes(out)
        started = time.monotonic()
        with FifoWatchdog(fifos(data)) as watchdog:
            code, stderr = run_cli(argv)
        _OUTCOMES[case.name] = Outcome(code, stderr,
                                       tuple(s.format(**fill) for s in case.subjects),
                                       before[0], tree_hashes(state), before[1],
                                       tree_hashes(out), tuple(watchdog.opened),
                                       time.monotonic() - started)
    return _OUTCOMES[case.name]


def _params(cases):
    return [pytest.param(case, id=case.name) for case in cases]


def test_the_table_is_large_enough():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))
    assert len(CASES) >= 40
    jobs = {(case.argv[0], case.argv[1]) for case in CASES}
    for kind in ("window", "cumulative", "tabular"):
        assert {(kind, "run"), (kind, "init"), (kind, "step")} <= jobs
    assert ("privhp", "run") in jobs


@pytest.mark.parametrize("outcome", _params(CASES), indirect=True)
def test_refused_with_exit_2_naming_the_subject(outcome):
    assert outcome.code == 2, outcome.stderr
    assert "Traceback" not in outcome.stderr
    message = outcome.stderr.strip().splitlines()[-1]
    assert "error:" in message, outcome.stderr
    for subject in outcome.subjects:
        assert subject in message, (subject, message)
    assert outcome.output_after == outcome.output_before
    assert not outcome.fifos_opened  # a special file is refused from os.stat, never opened
    assert outcome.seconds < PROMPT_SECONDS


@pytest.mark.parametrize("outcome", _params(CASES), indirect=True)
def test_state_left_byte_identical(outcome):
    assert outcome.state_after == outcome.state_before


# ----------------------------------------------------------------- real subprocesses


SUBPROCESS_CASES = ["window-run-strings.parquet", "window-run-truncated.parquet",
                    "window-run---horizon 0", "privhp-run---shards 0",
                    "tabular-step-t2_outside.csv",
                    # no watchdog here: a command that opened the FIFO would wait for a
                    # writer until the timeout
                    "window-step-p2_fifo_dir"]


@pytest.mark.skipif(not os.path.exists(CONSOLE_SCRIPT), reason="console script not installed")
@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_console_script_prints_one_line_and_no_traceback(world, tmp_path, name):
    [case] = [case for case in CASES if case.name == name]
    data, states = world
    state, out = str(tmp_path / "state"), str(tmp_path / "release")
    if case.state:
        state, out = clone_incremental(*states[case.state], str(tmp_path))
    fill = {"data": str(data), "state": state, "out": out}
    before = tree_hashes(state), tree_hashes(out)
    ran = subprocess.run([CONSOLE_SCRIPT, *[arg.format(**fill) for arg in case.argv]],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 2
    assert "Traceback" not in ran.stderr
    lines = [line for line in ran.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, ran.stderr
    for subject in case.subjects:
        assert subject.format(**fill) in lines[0]
    assert (tree_hashes(state), tree_hashes(out)) == before


# ----------------------------------------------------------------- the rules themselves


@pytest.mark.parametrize("rule, value, accepted", [
    ("positive_real", 1e-9, True), ("positive_real", 0.0, False),
    ("positive_real", -1.0, False), ("positive_real", float("nan"), False),
    ("positive_real", float("inf"), False), ("positive_real", True, False),
    ("probability", 0.5, True), ("probability", 0.0, False), ("probability", 1.0, False),
    ("probability", float("nan"), False),
    ("whole_number", 1, True), ("whole_number", np.int64(3), True), ("whole_number", 0, False),
    ("whole_number", 2.0, False), ("whole_number", False, False),
])
def test_parameter_rules(rule, value, accepted):
    from continual_synth.mechanisms import errors
    check = getattr(errors, rule)
    if accepted:
        assert check("x", value) == value
    else:
        with pytest.raises(errors.ParameterError, match=r"^x (must|got)"):
            check("x", value)


def test_parameter_error_names_the_option_and_survives_pickling():
    import pickle

    from continual_synth.mechanisms.errors import ParameterError, format_bytes
    error = pickle.loads(pickle.dumps(ParameterError("n_pad", "must be an integer >= 0")))
    assert isinstance(error, ValueError) and str(error) == "n_pad must be an integer >= 0"
    assert error.for_command_line() == "--n-pad must be an integer >= 0"
    assert format_bytes(2 ** 40 * 8) == "8 TiB" and format_bytes(1536) == "1.5 KiB"


# ------------------------------------------------- one invalid record: refused or dropped


def _family_periods(kind: str):
    """``(three period tables, period 2 with one invalid record, the invalid row, what the
    refusal names (``{row}``: the record's row in its file, from 1), the family's options)``: a value outside the alphabet (panels), a value
    outside the domain (tabular), a point outside the bounds (bounded)."""
    if kind in ("window", "cumulative"):
        table = long_table(markov_codes(PEOPLE, HORIZON, seed=5))
        periods = [table.filter(pc.equal(table["period"], t)).drop_columns(["period"])
                   for t in range(1, HORIZON + 1)]
        row, column, value = 3, "value", 2
        options = (*(WINDOW if kind == "window" else CUMULATIVE), "--missing-value", "0")
        named = ("column 'value'", "value 2 (row {row})")
    elif kind == "tabular":
        rng = np.random.default_rng(3)
        periods = [pa.table({"a": pa.array(rng.integers(0, 3, 20)),
                             "b": pa.array(rng.choice(["x", "y"], 20))})
                   for _ in range(HORIZON)]
        row, column, value = 5, "a", 7
        options = ("--domain", "{data}/domain.json", *TABULAR)
        named = ("column 'a'", "value 7 (row {row})")
    else:
        rng = np.random.default_rng(4)
        periods = [pa.table({"x": rng.random(50), "y": rng.random(50)})
                   for _ in range(HORIZON)]
        row, column, value = 11, "y", 1.5
        options = ("--epsilon", "1", *PRIVHP, "--horizon", str(HORIZON))
        named = ("column 'y'", "at row {row}", "outside the bounds")
    second = periods[1]
    cells = second[column].to_pylist()
    cells[row] = value
    bad = second.set_column(second.column_names.index(column), column,
                            pa.array(cells, type=None if kind == "privhp" else
                                     second[column].type))
    return periods, bad, row, named, options


def _with_periods(tables) -> pa.Table:
    return pa.concat_tables([t.append_column("period", pa.array(np.full(t.num_rows, p)))
                             for p, t in enumerate(tables, 1)])


FAMILIES = ("window", "cumulative", "tabular", "privhp")


@pytest.mark.parametrize("kind", FAMILIES)
def test_run_refuses_or_drops_one_invalid_record(world, tmp_path, kind):
    """``run`` with one invalid record: by default refused naming the file and row, with
    nothing written; with ``--invalid-records drop`` the release is exactly the release of
    the input without that record (same seed: the same files and manifest, apart from
    the input's digest), the record counted in records_rejected and logged on stderr."""
    data, _ = world
    periods, bad, row, named, options = _family_periods(kind)
    options = [o.format(data=data) for o in options]
    good = periods[1].filter(pa.array(np.arange(periods[1].num_rows) != row))
    write_file(_with_periods([periods[0], bad, periods[2]]), str(tmp_path / "bad.parquet"),
               "parquet")
    write_file(_with_periods([periods[0], good, periods[2]]), str(tmp_path / "good.parquet"),
               "parquet")
    run = [kind, "run", "--output"]
    code, err = run_cli([*run, str(tmp_path / "refused"), "--input",
                         str(tmp_path / "bad.parquet"), *options])
    message = err.strip().splitlines()[-1]
    assert code == 2 and "bad.parquet" in message, err
    line = periods[0].num_rows + row + 1
    assert all(part.format(row=line) in message for part in named), message
    assert tree_hashes(str(tmp_path / "refused")) == {}
    code, err = run_cli([*run, str(tmp_path / "dropped"), "--input",
                         str(tmp_path / "bad.parquet"), "--invalid-records", "drop", *options])
    assert code == 0, err
    assert "rejected 1," in err.strip().splitlines()[-1], err
    assert f"dropped 1 invalid record(s) of {tmp_path / 'bad.parquet'}" in err, err
    code, err = run_cli([*run, str(tmp_path / "reference"), "--input",
                         str(tmp_path / "good.parquet"), *options])
    assert code == 0, err
    assert release_snapshot(str(tmp_path / "dropped")) == \
        release_snapshot(str(tmp_path / "reference"))


def _init_and_first_step(kind, options, tmp_path, name, data_files, *init_extra):
    state, out = str(tmp_path / name / "state"), str(tmp_path / name / "out")
    code, err = run_cli([kind, "init", "--state", state, *options, *init_extra])
    assert code == 0, err
    code, err = run_cli([kind, "step", "--state", state, "--input", data_files[0],
                         "--output", out])
    assert code == 0, err
    return state, out


@pytest.mark.parametrize("kind", FAMILIES)
def test_step_refuses_or_drops_one_invalid_record(world, tmp_path, kind):
    """A step whose file holds one invalid record: a state made without
    ``--invalid-records`` refuses it (exit 2, today's message, state and output
    byte-identical); a state made with ``--invalid-records drop`` releases the period
    from the valid records, exactly as a step on the file without that record does, and
    files the record (its file, row, reason and values) in ``STATE/rejected/``, never
    in the release."""
    data, _ = world
    periods, bad, row, named, options = _family_periods(kind)
    options = [o.format(data=data) for o in options]
    files = []
    for index, table in enumerate(
            [periods[0], bad, periods[2],
             periods[1].filter(pa.array(np.arange(periods[1].num_rows) != row))], 1):
        files.append(str(tmp_path / f"f{index}.parquet"))
        write_file(table, files[-1], "parquet")
    refusing = _init_and_first_step(kind, options, tmp_path, "refusing", files)
    before = tree_hashes(refusing[0]), tree_hashes(refusing[1])
    code, err = run_cli([kind, "step", "--state", refusing[0], "--input", files[1],
                         "--output", refusing[1]])
    message = err.strip().splitlines()[-1]
    assert code == 2 and files[1] in message, err
    assert all(part.format(row=row + 1) in message for part in named), message
    assert (tree_hashes(refusing[0]), tree_hashes(refusing[1])) == before

    dropping = _init_and_first_step(kind, options, tmp_path, "dropping", files,
                                    "--invalid-records", "drop")
    reference = _init_and_first_step(kind, options, tmp_path, "reference", files)
    for state, out, second in (dropping + (files[1],), reference + (files[3],)):
        code, err = run_cli([kind, "step", "--state", state, "--input", second,
                             "--output", out])
        assert code == 0, err
        dropped = "rejected 1," if second == files[1] else "rejected 0,"
        assert dropped in err.strip().splitlines()[-1], err
        code, err = run_cli([kind, "step", "--state", state, "--input", files[2],
                             "--output", out])
        assert code == 0, err
    assert release_snapshot(dropping[1]) == release_snapshot(reference[1])
    (document,) = glob.glob(os.path.join(dropping[0], "rejected", "*.json"))
    with open(document, encoding="utf-8") as handle:
        dead = json.load(handle)
    assert dead["period"] == 2 and dead["dropped"] == 1
    (record,) = dead["records"]
    assert record["file"] == files[1] and record["row"] == row + 1
    assert record["record"] == bad.slice(row, 1).to_pylist()[0]
    assert not os.path.exists(os.path.join(reference[0], "rejected"))
    assert not [name for name in os.listdir(dropping[1]) if "reject" in name]


@pytest.mark.parametrize("kind", FAMILIES)
def test_watch_stream_releases_a_period_from_its_valid_records(world, tmp_path, kind):
    """``stream --watch`` drops each invalid record alone: a landed file with one invalid
    record is released from its valid records — what steps on the file without that
    record release — instead of being dead-lettered whole and holding back every later
    period; the record goes to the stream's dead letter."""
    data, _ = world
    periods, bad, row, _, options = _family_periods(kind)
    options = [o.format(data=data) for o in options]
    watch = tmp_path / "watch"
    watch.mkdir()
    files = []
    for period, table in enumerate([periods[0], bad, periods[2]], 1):
        write_file(table, str(watch / f"period_{period:02d}.parquet"), "parquet")
        files.append(str(watch / f"period_{period:02d}.parquet"))
    good = str(tmp_path / "good_02.parquet")
    write_file(periods[1].filter(pa.array(np.arange(periods[1].num_rows) != row)), good,
               "parquet")
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    # a process with a time limit: a period held back would keep the stream waiting
    ran = subprocess.run([sys.executable, "-m", "continual_synth", kind,
                          "stream", "--watch", str(watch), "--state", state, "--output", out,
                          "--until-period", str(HORIZON), "--poll-interval", "0.1",
                          *options], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["periods_released"][-1] == HORIZON
    assert "rejected 1," in ran.stderr.strip().splitlines()[-1], ran.stderr
    reference = _init_and_first_step(kind, options, tmp_path, "reference", files)
    for path in (good, files[2]):
        code, err = run_cli([kind, "step", "--state", reference[0], "--input", path,
                             "--output", reference[1]])
        assert code == 0, err
    assert release_snapshot(out) == release_snapshot(reference[1])
    dead = [json.load(open(path, encoding="utf-8"))
            for path in glob.glob(os.path.join(state, "rejected", "*.json"))]
    assert [(d["period"], [r["row"] for r in d["records"]]) for d in dead] == [(2, [row + 1])]


@pytest.mark.parametrize("argv", [
    ("window", "run", "--input", "{data}/panel.parquet", "--output", "{out}", *WINDOW,
     "--invalid-records", "drop"),
    ("cumulative", "init", "--state", "{state}", *CUMULATIVE, "--invalid-records", "drop"),
    ("window", "stream", "--watch", "{data}/periods", "--state", "{state}", "--output",
     "{out}", *WINDOW),
])
def test_a_panel_drops_only_with_missing_value(world, tmp_path, argv):
    """A dropped report leaves its person without a report that period: ``window`` and
    ``cumulative`` drop only with ``--missing-value`` (a stream always drops), refused
    before anything is read or written."""
    data, _ = world
    fill = {"data": str(data), "state": str(tmp_path / "state"), "out": str(tmp_path / "out")}
    code, err = run_cli([arg.format(**fill) for arg in argv])
    assert code == 2 and "needs --missing-value" in err, err
    assert not os.path.exists(fill["state"]) and not os.path.exists(fill["out"])
