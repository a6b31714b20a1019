"""The Python API (pipelines/api.py, ``import continual_synth as cs``): the same releases as
the command line for the same seed, state directories it shares with the command line,
and the command line's typed errors."""
from __future__ import annotations

import contextlib
import io
import json
import os

import numpy as np
import pyarrow as pa
import pytest

import continual_synth as cs
from continual_synth.mechanisms.errors import InputError, StateError
from continual_synth.pipelines.commands.cli import main
from continual_synth.transforms.files import read_dataset, write_file

from helpers_panels import long_table, markov_codes, period_table, write_period_files

T = 4


def cli(*argv) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert code == 0, err.getvalue()[-1500:]
    return json.loads(out.getvalue())


def ordered(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.column_names])


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    table = long_table(markov_codes(60, T, seed=2))
    write_file(table, str(root / "panel.parquet"), "parquet")
    return root, table, write_period_files(table, str(root / "periods"))


WINDOW = dict(window=2, horizon=T, rho=1.0, seed=4)
WINDOW_ARGV = ["--window", "2", "--horizon", str(T), "--rho", "1.0", "--seed", "4"]


def test_steps_release_what_init_and_step_release(panel, tmp_path):
    _, table, paths = panel
    synth = cs.WindowSynthesizer(**WINDOW)
    released = []
    for period in range(1, T + 1):
        release = synth.step(period_table(table, period).to_pandas())  # pandas in
        released.append(release)
    assert [r.summary["status"] for r in released] == ["ingested"] + ["released"] * (T - 1)
    assert released[0].synthetic.num_rows == 0 and released[1].periods == [1, 2]
    assert released[-1].manifest["periods_released"] == list(range(1, T + 1))
    cli("window", "init", "--state", str(tmp_path / "state"), *WINDOW_ARGV)
    for path in paths:
        cli("window", "step", "--state", str(tmp_path / "state"), "--input", path,
            "--output", str(tmp_path / "out"))
    by_cli = read_dataset(str(tmp_path / "out"))
    by_api = pa.concat_tables([r.synthetic for r in released[1:]])
    assert by_api.num_rows == by_cli.num_rows > 0
    assert ordered(by_api).equals(ordered(by_cli))
    with open(tmp_path / "out" / "manifest.json") as handle:
        on_disk = json.load(handle)
    assert {k: v for k, v in released[-1].manifest.items() if k != "provenance"} == \
        {k: v for k, v in on_disk.items() if k != "provenance"}


def test_run_releases_what_the_command_line_runs(panel, tmp_path):
    root, table, _ = panel
    release = cs.WindowSynthesizer(**WINDOW).run(table)
    cli("window", "run", "--input", str(root / "panel.parquet"), "--output",
        str(tmp_path / "run"), *WINDOW_ARGV)
    assert ordered(release.synthetic).equals(ordered(read_dataset(str(tmp_path / "run"))))
    assert release.periods == list(range(1, T + 1))


def test_save_and_load_go_on_where_the_command_line_can_too(panel, tmp_path):
    _, table, paths = panel
    synth = cs.WindowSynthesizer(**WINDOW)
    first = [synth.step(period_table(table, p)) for p in (1, 2)]
    temporary = synth.state
    synth.save(str(tmp_path / "state"))
    assert not os.path.exists(temporary)  # the private temporary copy is gone
    assert synth.output == str(tmp_path / "state") + "-release"
    again = cs.load(str(tmp_path / "state"))
    assert isinstance(again, cs.WindowSynthesizer)
    third = again.step(period_table(table, 3))
    # the command line steps the same state on
    cli("window", "step", "--state", str(tmp_path / "state"), "--input", paths[3],
        "--output", again.output)
    reference = cs.WindowSynthesizer(**WINDOW)
    expected = [reference.step(period_table(table, p)) for p in range(1, T + 1)]
    assert ordered(third.synthetic).equals(ordered(expected[2].synthetic))
    assert ordered(read_dataset(again.output)).equals(ordered(read_dataset(reference.output)))
    assert first[1].synthetic.num_rows > 0


def test_a_state_given_at_construction_is_the_command_lines(panel, tmp_path):
    _, table, paths = panel
    state = str(tmp_path / "state")
    synth = cs.WindowSynthesizer(state=state, output=str(tmp_path / "out"), **WINDOW)
    synth.step(period_table(table, 1))
    cli("window", "step", "--state", state, "--input", paths[1], "--output",
        str(tmp_path / "out"))
    assert cs.load(state).step(period_table(table, 3)).periods == [3]
    with pytest.raises(StateError, match="two states spend one budget twice"):
        synth.save(str(tmp_path / "copy"))


def test_errors_are_the_command_lines_typed_errors(panel, tmp_path):
    _, table, _ = panel
    with pytest.raises(InputError, match="did you mean rho"):
        cs.WindowSynthesizer(window=2, horizon=T, rhoo=1.0)
    with pytest.raises(InputError, match="rho"):
        cs.WindowSynthesizer(window=2, horizon=T, rho=-1.0)
    with pytest.raises(InputError, match="required"):
        cs.WindowSynthesizer(window=2, rho=1.0)
    synth = cs.WindowSynthesizer(**WINDOW)
    with pytest.raises(InputError, match="'value'"):  # a file the step refuses, named
        synth.step(period_table(table, 1).rename_columns(["id", "report"]))
    with pytest.raises(InputError, match="pyarrow Table or a pandas DataFrame"):
        synth.step([{"id": 1, "value": 0}])
    synth.step(period_table(table, 1))
    with pytest.raises(StateError, match="released already"):
        synth.run(table)
    spent = cs.WindowSynthesizer(**WINDOW)
    spent.run(table)
    with pytest.raises(StateError, match="budget is spent"):
        spent.step(period_table(table, 1))


def test_an_unsaved_synthesizer_leaves_no_private_files(panel):
    _, table, _ = panel
    synth = cs.WindowSynthesizer(**WINDOW)
    synth.step(period_table(table, 1))
    state = synth.state
    assert os.path.isdir(state)
    synth.close()
    assert not os.path.exists(state)


def test_the_other_synthesizers_step_as_their_command_lines(tmp_path):
    """Cumulative, tabular (domain as a dict) and continual PrivHP: API steps against
    init + step with the same seed."""
    rng = np.random.default_rng(1)
    tabular = pa.table({"period": np.repeat(np.arange(1, 4), 30),
                        "a": rng.integers(0, 3, 90), "b": rng.integers(0, 2, 90)})
    points = pa.table({"x": rng.random(90), "y": rng.random(90),
                       "period": np.repeat(np.arange(1, 4), 30)})
    domain = {"a": [0, 1, 2], "b": [0, 1]}
    (tmp_path / "domain.json").write_text(json.dumps(domain))
    cases = [
        (cs.CumulativeSynthesizer, "cumulative", long_table(markov_codes(40, 3, seed=5)),
         dict(horizon=3, rho=1.0, seed=2), ["--horizon", "3", "--rho", "1.0", "--seed", "2"]),
        (cs.TabularSynthesizer, "tabular", tabular,
         dict(domain=domain, epsilon=2.0, horizon=3, seed=2),
         ["--domain", str(tmp_path / "domain.json"), "--epsilon", "2.0", "--horizon", "3",
          "--seed", "2"]),
        (cs.PrivHPSynthesizer, "privhp", points,
         dict(columns=["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=2.0, samples=20, depth=4,
              horizon=3, seed=2),
         ["--columns", "x,y", "--bounds", "0:1,0:1", "--epsilon", "2.0", "--samples", "20",
          "--depth", "4", "--horizon", "3", "--seed", "2"]),
    ]
    for cls, family, table, options, argv in cases:
        synth = cls(**options)
        state, out = str(tmp_path / family / "state"), str(tmp_path / family / "out")
        cli(family, "init", "--state", state, *argv)
        released = []
        for period in (1, 2, 3):
            rows = period_table(table, period, keep_period=family != "cumulative")
            released.append(synth.step(rows).synthetic)
            path = str(tmp_path / family / f"p{period}.parquet")
            write_file(rows, path, "parquet")
            cli(family, "step", "--state", state, "--input", path, "--output", out)
        assert ordered(pa.concat_tables(released)).equals(ordered(read_dataset(out))), family
