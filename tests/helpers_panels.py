"""Shared panel builders and release checks for the end-to-end job tests.

Independent of the code under test: window histograms are recomputed here from the
released records, not taken from ``evaluate_window``.
"""
from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import shutil
from typing import Dict, List, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from continual_synth.mechanisms.panel_synthesizers import (CumulativeSynthesizer,
                                                            WindowSynthesizer)
from continual_synth.pipelines.families import driver, jobs
from continual_synth.pipelines.release.lifecycle import StateDir
from continual_synth.pipelines.examples.sipp_like import panel_table
from continual_synth.transforms.files import read_dataset, write_file

RECORD_COLUMNS = ["synthetic_id", "period", "value"]


class SynthesizerJobs:
    """``run`` / ``init`` / ``step`` of one panel synthesizer with its configuration as
    the first argument: the family's ``run`` and the driver's ``init`` and ``step``."""

    def __init__(self, synthesizer_class):
        self.synthesizer_class = synthesizer_class

    def run(self, input_path: str, output_dir: str, config, **options) -> Dict:
        return jobs.run(self.synthesizer_class(config), input_path, output_dir, **options)

    def init(self, state_dir: str, config, **options) -> Dict:
        return driver.init(state_dir, jobs.initial_document(self.synthesizer_class(config),
                                                            **options))

    def step(self, state_dir: str, input_path: str, output_dir: str, **options) -> Dict:
        return driver.step(state_dir, input_path, output_dir,
                           kind=self.synthesizer_class.kind, **options)


#: each panel synthesizer's jobs
window_jobs = SynthesizerJobs(WindowSynthesizer)
cumulative_jobs = SynthesizerJobs(CumulativeSynthesizer)


# ------------------------------------------------------------------ building panels


def markov_codes(num_people: int, periods: int, alphabet_size: int = 2, seed: int = 0,
                 stay: float = 0.7) -> np.ndarray:
    """A people × periods array of alphabet indices: each person keeps last period's
    value with probability ``stay``, else draws a fresh one (so windows are uneven)."""
    rng = np.random.default_rng(seed)
    codes = np.empty((num_people, periods), dtype=np.int64)
    codes[:, 0] = rng.integers(0, alphabet_size, num_people)
    for t in range(1, periods):
        fresh = rng.integers(0, alphabet_size, num_people)
        codes[:, t] = np.where(rng.random(num_people) < stay, codes[:, t - 1], fresh)
    return codes


def long_table(codes: np.ndarray, alphabet: Sequence = (0, 1), id_col: str = "id",
               period_col: str = "period", value_col: str = "value",
               string_ids: bool = False) -> pa.Table:
    """The long panel of ``codes`` (alphabet indices) with the given column names."""
    base = panel_table(codes)
    values = np.asarray(list(alphabet), dtype=object)[codes.reshape(-1)]
    value_array = (pa.array(values.astype(np.int64)) if isinstance(alphabet[0], int)
                   else pa.array(values.astype(str)))
    ids = base["id"]
    if string_ids:
        ids = pa.array([f"hh-{i:05d}" for i in ids.to_pylist()])
    return pa.table({id_col: ids, period_col: base["period"], value_col: value_array})


def period_table(table: pa.Table, period: int, period_col: str = "period",
                 keep_period: bool = False) -> pa.Table:
    """One period's reports of a long panel (the period column dropped unless asked)."""
    rows = table.filter(pc.equal(table[period_col], period))
    return rows if keep_period else rows.drop_columns([period_col])


def write_period_files(table: pa.Table, directory: str, fmt: str = "parquet",
                       period_col: str = "period", keep_period: bool = False) -> List[str]:
    """One file per period (``p01.<fmt>`` …); returns their paths in period order."""
    os.makedirs(directory, exist_ok=True)
    periods = sorted(set(table[period_col].to_pylist()))
    paths = []
    for period in periods:
        path = os.path.join(directory, f"p{period:02d}.{fmt}")
        write_file(period_table(table, period, period_col, keep_period), path, fmt)
        paths.append(path)
    return paths


# --------------------------------------------------------------- reading releases


def read_manifest(release_dir: str) -> Dict:
    with open(os.path.join(release_dir, "manifest.json"), encoding="utf-8") as handle:
        return json.load(handle)


def data_files(release_dir: str) -> List[str]:
    """Names of the visible data files of a directory (not manifest, not hidden)."""
    if not os.path.isdir(release_dir):
        return []
    return sorted(name for name in os.listdir(release_dir)
                  if os.path.isfile(os.path.join(release_dir, name))
                  and not name.startswith(".")
                  and name.endswith((".parquet", ".csv", ".avro")))


def staging_leftovers(release_dir: str) -> List[str]:
    return glob.glob(os.path.join(release_dir, ".staging-*"))


def snapshot(directory: str) -> Dict[str, bytes]:
    """Every file under ``directory`` (relative path → bytes): compare before/after."""
    out = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                out[os.path.relpath(path, directory)] = handle.read()
    return out


def without_provenance(manifest: Dict) -> Dict:
    """A manifest without its ``provenance`` block (its creation time): what two
    runs releasing the same thing must agree on."""
    return {key: value for key, value in manifest.items() if key != "provenance"}


def release_snapshot(directory: str, hidden: bool = False) -> Dict[str, object]:
    """The files of a release (relative path → bytes; hidden ones only if ``hidden``),
    the manifest parsed and without its provenance: compare two runs' releases."""
    out = {name: data for name, data in snapshot(directory).items()
           if hidden or not name.startswith(".")}
    if "manifest.json" in out:
        out["manifest.json"] = without_provenance(json.loads(out["manifest.json"]))
    return out


def sorted_records(release_dir: str) -> pa.Table:
    """All released records, types normalised (CSV/Avro read back as int64; every field
    nullable, as CSV readers make them), sorted."""
    table = read_dataset(release_dir)
    assert table.column_names == RECORD_COLUMNS, table.column_names
    table = table.set_column(1, "period", table["period"].cast(pa.int32()))
    table = table.cast(pa.schema([field.with_nullable(True) for field in table.schema]))
    return table.sort_by([("synthetic_id", "ascending"), ("period", "ascending")])


def released_periods(release_dir: str) -> List[int]:
    if not data_files(release_dir):
        return []
    return sorted(set(read_dataset(release_dir)["period"].to_pylist()))


# -------------------------------------------------------------------- checks


def window_histograms(codes: np.ndarray, window: int, alphabet_size: int) -> np.ndarray:
    """C^t for t = k..P of a people × P array of alphabet indices: (P−k+1) × |A|^k."""
    people, periods = codes.shape
    bins = alphabet_size ** window
    out = []
    for end in range(window, periods + 1):
        window_code = np.zeros(people, dtype=np.int64)
        for t in range(end - window, end):
            window_code = window_code * alphabet_size + codes[:, t]
        out.append(np.bincount(window_code, minlength=bins))
    return np.array(out, dtype=np.int64).reshape(-1, bins)


def check_release(release_dir: str, manifest: Dict, truth_codes: Optional[np.ndarray],
                  typed: bool = True) -> np.ndarray:
    """Assert a release directory is a valid Algorithm-1 release; return its
    synthetic people × periods array of alphabet indices.

    * columns synthetic_id, period, value (int64 / int32 when ``typed``);
    * every synthetic id has exactly one record per period 1..max(periods_released);
    * the window histograms of the records each count num_synthetic people;
    * with ``truth_codes``: max |p − n_pad − C| ≤ error_bound (Theorem 3.2).
    """
    assert staging_leftovers(release_dir) == []
    table = read_dataset(release_dir)
    assert table.column_names == RECORD_COLUMNS
    if typed:
        assert table.schema.field("synthetic_id").type == pa.int64()
        assert table.schema.field("period").type == pa.int32()
    assert pa.types.is_integer(table["synthetic_id"].type)
    assert pa.types.is_integer(table["period"].type)
    alphabet = manifest["alphabet"]
    released = manifest["periods_released"]
    last = max(released)
    assert released == list(range(1, last + 1))

    ids = table["synthetic_id"].to_numpy()
    periods = table["period"].to_numpy().astype(np.int64)
    assert sorted(set(periods.tolist())) == released
    people = np.unique(ids)
    assert people.size == manifest["num_synthetic"]
    assert table.num_rows == people.size * last
    cell = np.searchsorted(people, ids) * last + (periods - 1)
    assert np.array_equal(np.bincount(cell, minlength=people.size * last),
                          np.ones(people.size * last, dtype=np.int64))

    index = {value: i for i, value in enumerate(alphabet)}
    values = table["value"].to_pylist()
    assert set(values) <= set(alphabet), set(values) - set(alphabet)
    codes = np.empty(people.size * last, dtype=np.int64)
    codes[cell] = [index[value] for value in values]
    codes = codes.reshape(people.size, last)

    k = manifest["window"]
    synthetic = window_histograms(codes, k, len(alphabet))
    assert synthetic.shape == (last - k + 1, len(alphabet) ** k)
    assert (synthetic.sum(axis=1) == manifest["num_synthetic"]).all()
    if truth_codes is not None:
        truth = window_histograms(truth_codes[:, :last], k, len(alphabet))
        error = np.abs(synthetic - manifest["n_pad"] - truth).max()
        assert error <= manifest["error_bound"], (error, manifest["error_bound"])
    return codes


def clone_incremental(state_dir: str, output_dir: str, new_root: str):
    """Copy a state directory and its release directory; point the copy's state at
    the copied release.  Returns (state copy, output copy)."""
    state_copy = os.path.join(new_root, "state")
    output_copy = os.path.join(new_root, "release")
    shutil.copytree(state_dir, state_copy)
    if os.path.isdir(output_dir):
        shutil.copytree(output_dir, output_copy)
    store = StateDir(state_copy)
    version, state = store.read()
    if state.get("output_dir"):
        store.commit(version, {**state, "output_dir": os.path.abspath(output_copy)})
    return state_copy, output_copy


def cli(*argv):
    """Run the command line in-process: (exit code, printed JSON or the error line)."""
    from continual_synth.pipelines.commands.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, (json.loads(out.getvalue()) if code == 0 else err.getvalue().strip())


def refused_before_reading(monkeypatch, tmp_path, family: str, command: str,
                           input_path: str, options: Sequence[str], readers=()):
    """(exit code, stderr) of ``FAMILY COMMAND`` (init, run or stream; ``job
    FAMILY_ACTION``: its job module) with ``options``, its state ``tmp_path/state`` and
    output ``tmp_path/out``, for a refusal due before any data is read: each reader of
    ``readers`` ((module, name) pairs) and ``stream``'s watcher fail the test if called."""
    import pytest
    from continual_synth.jobs import main as job_main
    from continual_synth.pipelines.streaming import stream
    from continual_synth.pipelines.commands.cli import main

    def no_reading(*args, **kwargs):
        pytest.fail("the data was read before the options were checked")
    for module, name in list(readers) + [(stream, "watch")]:
        monkeypatch.setattr(module, name, no_reading)
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    (tmp_path / "landing").mkdir()
    where = {"init": ["--state", state], "run": ["--input", input_path, "--output", out],
             "stream": ["--watch", str(tmp_path / "landing"), "--state", state, "--output",
                        out, "--until-period", "1"]}
    action = command.split("_")[-1]
    argv = where[action] + list(options)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = (job_main(command.split()[1], argv) if command.startswith("job")
                else main([family, action] + argv))
    return code, err.getvalue()
