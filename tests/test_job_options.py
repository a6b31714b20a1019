"""Job options the Beam way: one ``PipelineOptions`` class per
job, the same declaration behind the subcommands, the ``continual_synth.jobs.*`` modules
and the Flex Template metadata; unknown options refused with a suggestion; Beam's own
options passed through."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from continual_synth import jobs
from continual_synth.jobs import flex_template
from continual_synth.pipelines.commands.cli import build_parser, job_options, main
from continual_synth.pipelines.commands.options import (JobOptions, beam_spelling,
                                                        job_parser, option_strings)

from helpers_panels import long_table, markov_codes, snapshot, sorted_records, \
    write_period_files

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB_NAMES = ["window_run", "window_init", "window_step", "cumulative_run", "cumulative_init",
             "cumulative_step", "tabular_run", "tabular_init", "tabular_step", "privhp_run"]
PRIVACY = {"window": "2", "horizon": "3", "rho": "5", "neighbor": "add-remove", "seed": "4",
           "shards": "2"}


def subcommand_parser(job: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in job.split("_", 1):
        [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[word]
    return parser


def run_job(job: str, argv, timeout=300):
    """``python -m continual_synth.jobs.JOB argv`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", f"continual_synth.jobs.{job}", *argv],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def call_job(job: str, argv):
    """(exit status, stdout, stderr) of ``continual_synth.jobs.main(job, argv)``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = jobs.main(job, list(argv))
        except SystemExit as exc:  # argparse refuses an option
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_every_job_has_a_module_and_the_subcommands_options():
    """One declaration: a job module's options are exactly its subcommand's."""
    table = job_options()
    assert set(JOB_NAMES) <= set(table)
    for job, options_class in table.items():
        assert issubclass(options_class, JobOptions) and issubclass(options_class,
                                                                   PipelineOptions)
        assert os.path.exists(os.path.join(REPO, "continual_synth", "jobs", f"{job}.py")), \
            f"a job module continual_synth/jobs/{job}.py is missing"
        module = set(option_strings(job_parser(options_class, job))) - {"--help", "--verbose"}
        command = set(option_strings(subcommand_parser(job))) - {"--help"}
        assert module == command, job
        assert "--input" in module or "--state" in module


def test_options_read_the_beam_way_and_stay_out_of_other_pipelines():
    """``view_as`` reads a job's options (validated); Beam's global parse of a pipeline's
    options does not see them, so one job's option is not accepted for another."""
    from continual_synth.pipelines.commands.panel_cli import WindowRunOptions
    argv = ["--input=p.parquet", "--output=out", "--window=2", "--horizon=3", "--rho=0.5",
            "--runner=DirectRunner"]
    options = PipelineOptions(argv).view_as(WindowRunOptions)
    assert (options.window, options.horizon, options.rho, options.beta) == (2, 3, 0.5, 0.05)
    assert "window" not in PipelineOptions(argv).get_all_options()
    with pytest.raises(SystemExit):  # the argument type refuses rho = 0
        PipelineOptions(argv[:4] + ["--rho=0"]).view_as(WindowRunOptions)
    code, _, err = call_job("cumulative_run", ["--input=p", "--output=o", "--horizon=3",
                                               "--rho=1", "--alphabet=0,1"])
    assert code == 2 and "--alphabet" in err and "not an option of 'cumulative_run'" in err


@pytest.mark.parametrize("argv, words", [
    (["--neighbour=add-remove"], ["--neighbour: did you mean --neighbor?"]),
    (["--rho0=1"], ["--rho0: did you mean --rho?"]),
    (["--runer=DirectRunner"], ["--runer: did you mean --runner?"]),
    (["--runner=dask-locale"], ["--runner dask-locale: unknown runner (did you mean "
                                "dask-local?)"]),
    (["--direct_running_mode=multiprocessing"], ["argument --direct_running_mode: invalid "
                                                 "choice: 'multiprocessing'"]),
    (["--window=0"], ["--window must be an integer >= 1, got 0"]),
    (["--rho=nan"], ["--rho must be positive and finite, got nan"]),
    (["--beta=1"], ["--beta must be in (0, 1), got 1.0"]),
    (["stray"], ["unrecognised argument 'stray'"]),
    # after a Beam option, a stray word or a single-dash option (which Beam would
    # discard with a warning, the job running without them, exit 0)
    (["--runner=DirectRunner", "add-remove"], ["unrecognised argument(s) 'add-remove'"]),
    (["--runner=DirectRunner", "-neighbor", "add-remove"],
     ["'-neighbor' 'add-remove'", "(-neighbor: did you mean --neighbor?)"]),
    (["--direct_num_workers=1", "-rho", "5"], ["(-rho: did you mean --rho?)"]),
    (["--direct_num_workers=1", "neighbor=add-remove"],
     ["(neighbor: did you mean --neighbor?)"]),
    # the hint names the word as given, not "--neighbor: did you mean --neighbor?"
    (["-neighbor=add-remove"], ["(-neighbor: did you mean --neighbor?)"]),
    # not argparse's last value wins (here a privacy budget 100 times the first)
    (["--rho", "0.05"], ["--rho is given 2 times (--rho 5, --rho 0.05): give each option "
                         "once"]),
    (["--horizon=4"], ["--horizon is given 2 times (--horizon 3, --horizon 4)"]),
    # Beam's own options too (Beam would keep the last value, and --runner's preset read
    # the first): both spellings, every value named
    (["--runner", "DirectRunner", "--runner=dask-local"],
     ["--runner is given 2 times (--runner DirectRunner, --runner dask-local): give each "
      "option once"]),
    (["--direct_num_workers=1", "--direct_num_workers", "2"],
     ["--direct_num_workers is given 2 times (--direct_num_workers 1, "
      "--direct_num_workers 2)"]),
])
def test_bad_options_exit_2_with_one_line_and_nothing_written(tmp_path, argv, words):
    base = {"input": "never-read.parquet", "output": str(tmp_path / "out"), **PRIVACY}
    base.pop("neighbor") if "--neighbour=add-remove" in argv else None
    if not any("given 2 times" in word for word in words):  # argv's value replaces base's
        for arg in argv:
            base.pop(arg.split("=", 1)[0][2:], None)
    code, out, err = call_job("window_run", [f"--{k}={v}" for k, v in base.items()] + argv)
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("continual-synth: error: ")
    for word in words:
        assert word in line
    assert not os.path.exists(tmp_path / "out")


def test_beam_options_beam_gathers_may_be_repeated():
    """A Beam option whose argparse action gathers its values (append, Beam's
    comma-separated lists) is not refused when given twice, in either spelling; a flag
    given twice says nothing new either."""
    from continual_synth.pipelines.commands.options import check_beam_args
    check_beam_args(["--experiments=a", "--experiments", "b", "--experiment=c",
                     "--dataflow_service_options=x", "--dataflow_service_options=y",
                     "--sdk_harness_container_image_overrides=p,q",
                     "--sdk_harness_container_image_overrides", "r,s",
                     "--save_main_session", "--save_main_session"], "window run")
    options = PipelineOptions(["--experiments=a", "--experiments", "b"])
    assert options.get_all_options()["experiments"] == ["a", "b"]


def test_required_options_are_named():
    code, _, err = call_job("window_init", ["--state=s", "--window=2"])
    assert code == 2
    assert err.strip() == ("continual-synth: error: the following arguments are required: "
                           "--horizon, --rho")


def test_beam_spelling_of_names_and_flags():
    from continual_synth.pipelines.commands.privhp_cli import PrivHPRunOptions
    parser = job_parser(PrivHPRunOptions, "privhp_run")
    assert beam_spelling(["--prune_k=8", "--clip=true", "--direct_num_workers=2",
                          "--hash_seed", "3"], parser) == [
        "--prune-k=8", "--clip", "--direct_num_workers=2", "--hash-seed", "3"]
    assert beam_spelling(["--clip=False"], parser) == []
    with pytest.raises(ValueError, match="--clip=yes: a flag takes true or false"):
        beam_spelling(["--clip=yes"], parser)
    # a flag given twice is refused whatever its spellings (with the last word false,
    # the flag-or-nothing spelling would read it as true)
    for twice in (["--clip=true", "--clip=false"], ["--clip=false", "--clip=true"],
                  ["--clip", "--clip=false"], ["--clip", "--clip"]):
        with pytest.raises(ValueError, match=r"--clip is given 2 times \(.*\): give each"):
            beam_spelling(twice, parser)


def test_a_privacy_flag_given_twice_in_the_job_form_exits_2(tmp_path, capsys):
    from continual_synth.jobs import main as job_main
    state = tmp_path / "state"
    code = job_main("cumulative_init", [
        f"--state={state}", "--horizon=4", "--rho=5", "--seed=9", "--neighbor=add-remove",
        "--public_population=true", "--public_population=false"])
    assert code == 2 and not state.exists()
    assert "--public_population is given 2 times" in capsys.readouterr().err


def test_job_modules_release_what_window_run_releases(tmp_path, capsys):
    """``window_init`` + three ``window_step`` through ``python -m continual_synth.jobs.*``
    (``--key=value`` only, Beam's spelling and Beam options mixed in) release exactly the
    records of ``continual-synth window run`` for the same seed; a misspelt option exits 2
    with a suggestion and leaves state and release byte-identical."""
    codes = markov_codes(120, 3, seed=5)
    table = long_table(codes, id_col="pid")
    panel = str(tmp_path / "panel.parquet")
    from continual_synth.transforms.files import write_file
    write_file(table, panel, "parquet")
    paths = write_period_files(table, str(tmp_path / "periods"))
    batch = str(tmp_path / "batch")
    assert main(["window", "run", "--input", panel, "--output", batch, "--id-col", "pid",
                 *[a for k, v in PRIVACY.items() for a in (f"--{k}", v)]]) == 0
    capsys.readouterr()

    state, out = str(tmp_path / "state"), str(tmp_path / "release")
    ran = run_job("window_init", [f"--state={state}", "--id_col=pid",
                                  *[f"--{k}={v}" for k, v in PRIVACY.items()]])
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["status"] == "initialised"
    statuses = []
    for period, path in enumerate(paths, 1):
        ran = run_job("window_step", [f"--state={state}", f"--input={path}", f"--output={out}",
                                      f"--period={period}", "--runner=DirectRunner",
                                      "--direct_num_workers=1"])
        assert ran.returncode == 0, ran.stderr
        statuses.append(json.loads(ran.stdout)["status"])
    assert statuses == ["ingested", "released", "released"]
    assert sorted_records(out).equals(sorted_records(batch))

    before = snapshot(state), snapshot(out)
    ran = run_job("window_step", [f"--state={state}", f"--input={paths[2]}",
                                  f"--output={out}", "--perod=3"])
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert ran.stderr.strip().splitlines() == [
        "continual-synth: error: unrecognised option(s) --perod: not an option of "
        "'window_step' (see --help) nor of Apache Beam (--perod: did you mean --period?)"]
    assert (snapshot(state), snapshot(out)) == before


@pytest.mark.parametrize("job", sorted(job_options()))
def test_flex_template_metadata_is_up_to_date(job):
    """The committed ``deploy/dataflow/JOB/metadata.json`` is what the generator writes
    from the options class (run ``python -m continual_synth.jobs.flex_template``)."""
    path = os.path.join(REPO, flex_template.DEFAULT_OUTPUT, job, "metadata.json")
    options_class = job_options()[job]
    with open(path, encoding="utf-8") as handle:
        assert handle.read() == flex_template.render(job, options_class), \
            "stale: run python -m continual_synth.jobs.flex_template"
    metadata = json.loads(flex_template.render(job, options_class))
    names = {p["name"] for p in metadata["parameters"]}
    parser = job_parser(options_class, job)
    declared = {o[2:].replace("-", "_") for o in option_strings(parser)} - {"help", "verbose"}
    assert names == declared
    required = {p["name"] for p in metadata["parameters"] if not p["isOptional"]}
    assert required == {a.option_strings[0][2:].replace("-", "_") for a in parser._actions
                        if a.required}


def test_init_exists_ok_keeps_the_same_state_and_refuses_other_options(tmp_path, capsys):
    """``--exists-ok`` (a scheduler's idempotent first task): the same options keep the
    state byte for byte; other options fail naming them; without it, a second init fails."""
    state = str(tmp_path / "state")
    argv = ["window", "init", "--state", state, "--window", "2", "--horizon", "3", "--rho", "1",
            "--seed", "1"]
    assert main(argv + ["--exists-ok"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "initialised"
    before = snapshot(state)
    assert main(argv + ["--exists-ok"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "kept"
    assert main(argv[:-1] + ["2", "--exists-ok"]) == 2
    err = capsys.readouterr().err
    assert "holds a state created with other options (seed: state 1, options 2)" in err
    assert main(argv) == 2 and "already holds a state" in capsys.readouterr().err
    assert snapshot(state) == before


def test_init_exists_ok_that_loses_the_race_keeps_the_winners_state(tmp_path, capsys,
                                                                     monkeypatch):
    """Two ``init --exists-ok`` with the same options started together (the loser must
    not exit 2, as it did in 5 of 6 trials on S3): the one whose exclusive create
    of version 0 loses keeps the winner's state.  Without ``--exists-ok`` it still fails;
    another init's work in progress (its folders, lock and probe) is not "other files"."""
    from continual_synth.pipelines.release import lifecycle
    state = tmp_path / "state"
    (state / "versions").mkdir(parents=True)  # another init's skeleton, before version 0
    (state / "lock").write_text("")
    (state / ".conditional-create-probe-0123").write_text("1")
    argv = ["window", "init", "--state", str(state), "--window", "2", "--horizon", "3",
            "--rho", "1", "--seed", "1"]
    original = lifecycle.StateDir.create

    def racing(self, document):
        original(self, document)  # the other init creates version 0 first
        original(self, document)  # this one's exclusive create loses

    monkeypatch.setattr(lifecycle.StateDir, "create", racing)
    assert main(argv + ["--exists-ok"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "kept"
    other = tmp_path / "other"
    assert main(argv[:3] + [str(other)] + argv[4:]) == 2
    assert "another init created it first" in capsys.readouterr().err


def _tabular_init(tmp_path):
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps({"a": [0, 1], "b": ["x", "y"]}))
    period = tmp_path / "p01.csv"
    period.write_text("a,b,period\n0,x,1\n1,y,1\n1,x,1\n")
    return (["tabular", "init", "--domain", str(domain), "--epsilon", "2", "--horizon", "3"],
            str(period))


def _bounded_init(tmp_path):
    period = tmp_path / "p01.csv"
    period.write_text("x,y\n0.1,0.2\n0.7,0.4\n0.5,0.9\n")
    return (["privhp", "init", "--horizon", "3", "--columns", "x,y", "--bounds", "0:1",
             "--epsilon", "2", "--samples", "20", "--depth", "3"], str(period))


@pytest.mark.parametrize("family", ["tabular", "privhp"])
def test_tabular_and_bounded_init_exists_ok_as_window_init(family, tmp_path, capsys):
    """``tabular init`` and ``privhp init`` take ``--exists-ok`` (the scheduler modules
    ``tabular_init`` and ``privhp_init`` as an idempotent first task), with window
    init's meaning: a state of the same settings is kept, byte for byte, even after a
    step; one of other settings is refused (exit 2) naming the setting."""
    command, period = {"tabular": _tabular_init, "privhp": _bounded_init}[family](tmp_path)
    state, out = str(tmp_path / "state"), str(tmp_path / "out")
    argv = command + ["--state", state, "--seed", "1"]
    assert main(argv + ["--exists-ok"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "initialised"
    assert main([family, "step", "--state", state, "--input", period, "--output", out]) == 0
    capsys.readouterr()
    before = snapshot(state)
    assert main(argv + ["--exists-ok"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "kept"
    assert main(argv[:-1] + ["2", "--exists-ok"]) == 2
    assert "holds a state created with other options (seed: state 1, options 2)" in \
        capsys.readouterr().err
    other = [arg if arg != "2" else "3" for arg in argv]  # --epsilon 3
    assert main(other + ["--exists-ok"]) == 2
    assert "epsilon: state 2.0, options 3.0" in capsys.readouterr().err
    assert main(argv) == 2 and "already holds a state" in capsys.readouterr().err
    assert snapshot(state) == before


def test_the_source_tree_imports_as_the_installed_package():
    """Run from the repository root (``python -m continual_synth``, a Flex Template
    image's workdir, ``--setup_file ./setup.py``), ``./continual_synth`` shadows an
    installed copy: its subpackages must then resolve to the repository's top-level
    folders.  ``-S`` (no site-packages: only the repository on the path) makes this the
    only copy there is."""
    ran = subprocess.run([sys.executable, "-S", "-c",
                          "import continual_synth.mechanisms.errors as m, "
                          "continual_synth.jobs as j; print(m.__file__); print(j.__file__)"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [os.path.join(REPO, "mechanisms", "errors.py"),
                                  os.path.join(REPO, "continual_synth", "jobs", "__init__.py")]


@pytest.mark.parametrize("given, said", [
    ("--rho=1", "--rho is an option of 'window init': a state keeps the options it was made "
                "with"),
    ("--neighbour=add-remove", "--neighbor is an option of 'window init'"),
    ("--verbos", "--verbos: did you mean --verbose?"),
])
def test_a_step_given_an_init_option_says_where_it_belongs(tmp_path, given, said):
    code, out, err = call_job("window_step", [f"--state={tmp_path / 'state'}",
                                              "--input=never-read.parquet",
                                              f"--output={tmp_path / 'out'}", given])
    assert code == 2 and out == "" and said in err


@pytest.mark.parametrize("extra", [["--runner", "DirectRunner", "-neighbor", "add-remove"],
                                   ["--direct_num_workers=1", "extra"]])
def test_the_command_line_refuses_what_beam_would_discard_after_a_beam_option(tmp_path,
                                                                               capsys, extra):
    """``window run … --runner DirectRunner -neighbor add-remove`` must not exit 0 and
    release under ``replace`` (Beam discards such words with a warning)."""
    argv = ["window", "run", "--input", "never-read.parquet", "--output",
            str(tmp_path / "out"), "--window", "2", "--horizon", "3", "--rho", "5"]
    assert main(argv + extra) == 2
    assert "unrecognised argument(s)" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")


def test_verbose_may_be_given_true_or_false_on_the_command_line():
    """As the job modules take a flag (``--verbose=true`` is not refused with
    "--verbose: did you mean --verbose?")."""
    from continual_synth.pipelines.release.logs import strip_verbose
    assert strip_verbose(["a", "--verbose=true", "b"]) == (["a", "b"], True)
    assert strip_verbose(["a", "--verbose=False"]) == (["a"], False)
    assert strip_verbose(["-v", "a"]) == (["a"], True)
    assert strip_verbose(["--verbose=maybe"]) == (["--verbose=maybe"], False)


def _leaf_parsers(parser, path=()):
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield " ".join(path), parser
    for action in subparsers:
        for name, child in action.choices.items():
            yield from _leaf_parsers(child, path + (name,))


def test_every_command_shows_its_options_defaults_in_help():
    """Guards against evaluate window/cumulative/bounded, tabular example and demo listing
    options with defaults (--id-col id, --ot-points 4000, --format parquet) without
    saying them, and demo's and example's --output without help."""
    from continual_synth.pipelines.commands.options import HelpFormatter
    missing = []
    for command, parser in _leaf_parsers(build_parser()):
        for action in parser._actions:
            if not action.option_strings or action.dest == "help":
                continue
            shown = issubclass(parser.formatter_class, HelpFormatter) or \
                action.default in (None, False) or "default" in (action.help or "")
            if not action.help or not shown:
                missing.append(f"{command} {action.option_strings[0]}")
    assert not missing, missing
