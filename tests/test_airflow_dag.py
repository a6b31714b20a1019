"""The example Airflow DAG (examples/airflow/continual_synth_monthly.py) run with real
Apache Airflow (SQLite metadata in a temporary AIRFLOW_HOME): three DAG runs, one per
period, release exactly what ``continual-synth window run`` releases for the same seed."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("airflow.providers.apache.beam", reason="the [airflow] extra is not "
                    "installed (pip install -e '.[test]' installs it)")

from continual_synth.pipelines.commands.cli import main  # noqa: E402
from continual_synth.transforms.files import read_dataset, write_file  # noqa: E402

from helpers_panels import (long_table, markov_codes, read_manifest, snapshot,  # noqa: E402
                            sorted_records, write_period_files)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRFLOW = os.path.join(os.path.dirname(sys.executable), "airflow")
PARAMS = {"window": 2, "horizon": 3, "rho": 5, "seed": 4}


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory):
    """Environment of an Airflow with SQLite metadata in a fresh AIRFLOW_HOME whose DAG
    folder is examples/airflow (migrated once per session)."""
    home = tmp_path_factory.mktemp("airflow_home")
    env = {**os.environ, "AIRFLOW_HOME": str(home),
           "AIRFLOW__CORE__DAGS_FOLDER": os.path.join(REPO, "examples", "airflow"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "CONTINUAL_SYNTH_PYTHON": sys.executable}
    ran = subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return env


def dags_test(env, conf, logical_date=None):
    return subprocess.run([AIRFLOW, "dags", "test", "continual_synth_monthly",
                           *([logical_date] if logical_date else []), "-c", json.dumps(conf)],
                          env=env, capture_output=True, text=True, timeout=900)


def test_three_monthly_dag_runs_release_what_window_run_releases(airflow_env, tmp_path):
    codes = markov_codes(120, 3, seed=9)
    table = long_table(codes)
    panel = str(tmp_path / "panel.parquet")
    write_file(table, panel, "parquet")
    periods = write_period_files(table, str(tmp_path / "periods"))
    batch = str(tmp_path / "batch")
    assert main(["window", "run", "--input", panel, "--output", batch, "--shards", "16",
                 *[a for k, v in PARAMS.items() for a in (f"--{k}", str(v))]]) == 0

    state, out = str(tmp_path / "state"), str(tmp_path / "release")
    for period, path in enumerate(periods, 1):
        conf = {"input": path, "state": state, "output": out, **PARAMS}
        # period 1 from the run's logical date (the DAG's start_date is period 1); the
        # others given as the param
        ran = (dags_test(airflow_env, conf, "2026-01-01") if period == 1
               else dags_test(airflow_env, {**conf, "period": period}))
        log = ran.stdout + ran.stderr
        assert ran.returncode == 0, log[-4000:]
        assert "continual_synth.jobs.window_step --runner=DirectRunner" in log
        assert f"--period={period}" in log
        assert "state=success" in log
        assert ("ingested" if period == 1 else "released") in log
        if period == 1:
            assert '"status": "initialised"' in log
        else:
            assert '"status": "kept"' in log  # the state made by run 1, kept as it is
    assert read_manifest(out)["periods_released"] == [1, 2, 3]
    assert sorted_records(out).equals(sorted_records(batch))
    released = snapshot(out), snapshot(state)

    # period 2's file exported again with its rows in another order (other bytes): with
    # the period known it is recognised, nothing read and nothing spent
    rows = read_dataset(periods[1])
    write_file(rows.take(list(range(rows.num_rows - 1, -1, -1))), periods[1], "parquet")
    ran = dags_test(airflow_env, {"input": periods[1], "state": state, "output": out,
                                  **PARAMS, "period": 2})
    log = ran.stdout + ran.stderr
    assert ran.returncode == 0 and '"status": "already-released"' in log, log[-4000:]
    assert (snapshot(out), snapshot(state)) == released

    # a misspelt conf key fails the run at once (no retries), naming it
    ran = dags_test(airflow_env, {"input": periods[2], "state": state, "output": out,
                                  **PARAMS, "period": 3, "rhoo": 1})
    log = ran.stdout + ran.stderr
    assert ran.returncode != 0 and "unknown conf key(s) ['rhoo']" in log, log[-4000:]
    assert "up_for_retry" not in log
    assert (snapshot(out), snapshot(state)) == released


def test_each_monthly_run_fires_after_its_month_and_releases_that_month(airflow_env):
    """Airflow 3 gives ``schedule="@monthly"`` a CronTriggerTimetable: the run dated
    1 February fired on 1 February and was told period 2, a month before February's data
    existed.  The DAG's timetable, as the scheduler sees it: the first two runs cover
    January and February, fire when each has ended, and release periods 1 and 2."""
    script = f"""
import importlib.util
from airflow.serialization.encoders import coerce_to_core_timetable
from airflow.timetables.base import TimeRestriction
spec = importlib.util.spec_from_file_location(
    "dag_file", {os.path.join(REPO, "examples", "airflow", "continual_synth_monthly.py")!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
dag = module.dag
timetable = coerce_to_core_timetable(dag.timetable)
restriction = TimeRestriction(earliest=dag.start_date, latest=None, catchup=True)
info = None
for _ in range(2):
    info = timetable.next_dagrun_info_v2(last_dagrun_info=info, restriction=restriction)
    start, end = info.data_interval
    print(start.date(), end.date(), info.run_after.date(),
          module.period_of(info.logical_date, dag.start_date))
"""
    ran = subprocess.run([sys.executable, "-c", script], env=airflow_env, capture_output=True,
                         text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.split("\n")[:2] == ["2026-01-01 2026-02-01 2026-02-01 1",
                                          "2026-02-01 2026-03-01 2026-03-01 2"]
