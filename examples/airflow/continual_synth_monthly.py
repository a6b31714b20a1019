"""Airflow DAG ``continual_synth_monthly``: one DAG run per period of a continual release.

Each run (monthly; or by hand: ``airflow dags test continual_synth_monthly -c '{...}'``)

1. ``init_state`` — creates the state of the window synthesizer (Bun et al. 2024,
   Algorithm 1) if there is none: ``python -m continual_synth.jobs.window_init
   --exists-ok``.  Idempotent: a state made with the same options is kept; a state made
   with other options fails the task with a message naming them.
2. ``step`` — ingests this period's file and publishes the release through Airflow's
   ``BeamRunPythonPipelineOperator`` on the DirectRunner: ``python -m
   continual_synth.jobs.window_step --state=… --input=… --output=…``.

Retries are safe by construction: the step is the release lifecycle's
(:mod:`continual_synth.pipelines.release.lifecycle`): a re-run of a period already released is
recognised (``already-released``) and a run interrupted half-way resumes; one step owns
the state at a time (``max_active_runs=1`` keeps the periods in order).

Params (all overridable with ``-c``): ``input`` (this period's file), ``state``,
``output``, ``window``, ``horizon``, ``rho``, ``seed`` (null: the OpenDP sampler, for
publication) and ``period``: the period t this run releases, passed to the step as
``--period=t`` (null: :func:`period_of` the run's month).  The schedule is a
``CronDataIntervalTimetable``: each run covers one calendar month (its data interval, from
the 1st of the month) and starts once that month has ended, so the run dated January
fires on 1 February and releases January.  Airflow 3 gives a plain ``"@monthly"`` a
``CronTriggerTimetable`` instead, whose run dated 1 February fires on 1 February with an
empty interval: a run would be told the period of a month whose data does not exist yet.
Set ``start_date`` to the first day of period 1's month.  With the period known, a file
re-exported with other bytes after its period was released, or a month's run triggered
out of order, is refused (``already-released`` / "out of order") instead of being taken
as the state's next period.  ``conf`` keys that are not params fail the run (a misspelt
``rhoo`` is never silently replaced by the default).  The jobs run in the interpreter that has continual-synth installed:
``$CONTINUAL_SYNTH_PYTHON`` if set, else the one running this DAG file (never a fresh
virtualenv).  For Dataflow or Flink, set ``runner`` and the runner's options
(``--setup_file``, ``--project`` …) on the operator; see ``docs/deploy.md``.  State and
releases on ``s3://`` or ``gs://`` take the store's settings from the workers'
environment in both tasks (``AWS_*`` credentials, ``AWS_ENDPOINT_URL_S3`` for an
S3-compatible server; ``GOOGLE_APPLICATION_CREDENTIALS``); see ``docs/object_stores.md``.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pendulum
from airflow.providers.apache.beam.operators.beam import BeamRunPythonPipelineOperator
from airflow.sdk import DAG, CronDataIntervalTimetable, Param, task
from airflow.sdk.exceptions import AirflowFailException

PYTHON = os.environ.get("CONTINUAL_SYNTH_PYTHON", sys.executable)


def period_of(month_start, start_date) -> int:
    """The period a run releases: months from ``start_date`` (period 1's month) to the
    start of the run's data interval (its logical date), plus one."""
    return (month_start.year - start_date.year) * 12 + month_start.month - start_date.month + 1


with DAG(
    dag_id="continual_synth_monthly",
    description="continual DP synthetic panel: one period per run (window synthesizer)",
    schedule=CronDataIntervalTimetable("@monthly", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": pendulum.duration(minutes=1)},
    params={
        "input": Param("/data/panel/current.parquet", type="string",
                       description="this period's records (id, value)"),
        "state": Param("/data/continual-synth/state", type="string",
                       description="state directory (private; one owner at a time)"),
        "output": Param("/data/continual-synth/release", type="string",
                        description="release directory"),
        "window": Param(3, type="integer", minimum=1, description="window length k"),
        "horizon": Param(12, type="integer", minimum=1, description="number of periods T"),
        "rho": Param(0.05, type="number", exclusiveMinimum=0,
                     description="total zCDP budget ρ"),
        "seed": Param(None, type=["null", "integer"],
                      description="null for publication; an integer for a reproducible "
                                  "simulation (NOT for publication)"),
        "period": Param(None, type=["null", "integer"], minimum=1,
                        description="the period t this run releases; null: months from "
                                    "start_date to the run's month (its data interval), "
                                    "plus one"),
    },
    tags=["continual-synth"],
) as dag:

    @task
    def init_state(params=None, dag_run=None, dag=None) -> int:
        """Create the state once (keep it if it exists with the same options); return
        the period this run releases."""
        declared = set(dag.params)  # (``params`` has the conf merged in, typos too)
        unknown = sorted(set((dag_run.conf or {}) if dag_run else {}) - declared)
        if unknown:
            raise AirflowFailException(f"unknown conf key(s) {unknown}; the params are "
                                       f"{sorted(declared)}")
        period = params["period"]
        if period is None:
            when = dag_run.logical_date if dag_run else None
            if when is None:
                raise AirflowFailException("this run has no logical date: give the period, "
                                           "-c '{\"period\": t, ...}'")
            period = period_of(when, dag.start_date)
        argv = [PYTHON, "-m", "continual_synth.jobs.window_init", f"--state={params['state']}",
                f"--window={params['window']}", f"--horizon={params['horizon']}",
                f"--rho={params['rho']}", "--exists-ok"]
        if params["seed"] is not None:
            argv.append(f"--seed={params['seed']}")
        ran = subprocess.run(argv, capture_output=True, text=True)
        if ran.returncode != 0:  # exit 2: bad options or a mismatched state, not retried
            error = AirflowFailException if ran.returncode == 2 else RuntimeError
            raise error(ran.stderr.strip() or f"window_init exited {ran.returncode}")
        print(ran.stdout)
        return int(period)

    step = BeamRunPythonPipelineOperator(
        task_id="step",
        py_file="continual_synth.jobs.window_step",
        py_options=["-m"],  # run the module: python -m continual_synth.jobs.window_step
        py_interpreter=PYTHON,
        runner="DirectRunner",
        pipeline_options={"state": "{{ params.state }}", "input": "{{ params.input }}",
                          "output": "{{ params.output }}",
                          "period": "{{ ti.xcom_pull(task_ids='init_state') }}"},
    )

    init_state() >> step
