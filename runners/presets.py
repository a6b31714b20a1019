"""Runner presets: how ``--runner`` names map to Beam runners.

* ``DirectRunner`` (default): Beam's local runner, in this process, never handing the
  pipeline to Prism (:mod:`continual_synth.runners.direct`).
* ``dask-local``: Beam's Dask runner against a ``dask.distributed`` cluster started on
  this machine for the job and closed after it: ``--num_workers`` (Beam's worker
  option; default 2) worker *processes* of one thread each, so every transform and
  element is pickled across processes as on a real cluster (the package must be
  importable by the workers, as it is after ``pip install`` or ``pip install -e``).
  On Linux the workers are forked from the job's process as it starts (they begin with
  its modules imported instead of importing Beam again: the cluster starts in 0.3 s, not
  2-5 s); elsewhere they are spawned.  Each row group and shard is a task of its own
  (``--dask_partition_size=1``).  The cluster's and its workers' ``distributed.*``
  log lines show only with ``--verbose`` (:func:`quiet_own_cluster`).  For an existing
  cluster use ``--runner DaskRunner --dask_client_address HOST:PORT``.
* ``DaskRunner``: :class:`continual_synth.runners.dask_runner.DaskRunner`, Beam's Dask
  runner with a cheaper ``GroupByKey``.  Without ``--dask_client_address`` Beam's runner
  starts ``dask.distributed``'s default local cluster for the job (worker processes and
  threads sized from this machine's cores, closed after the job); its ``distributed.*``
  INFO and WARNING lines, the driver's and the workers', are shown only with
  ``--verbose`` (:func:`quiet_own_cluster`), as ``dask-local``'s are.
* ``FlinkRunner``, ``DataflowRunner``, …: passed to Beam unchanged, with their own
  options (``--flink_master``, ``--project`` …); ship the code with
  ``--setup_file ./setup.py``.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Iterator, List, Sequence

__all__ = ["DASK_RUNNER", "num_workers", "resolved_beam_args", "local_dask_cluster",
           "QUIETER_MONITORS", "worker_environ", "QUIET_WORKERS_ENV", "quiet_own_cluster",
           "check_scheduler", "require_dask"]

DASK_RUNNER = "continual_synth.runners.dask_runner.DaskRunner"


def _runner_value(beam_args: Sequence[str]):
    """``(index, value)`` of a ``--runner`` option in ``beam_args``, or (None, None)."""
    for index, arg in enumerate(beam_args):
        if arg == "--runner" and index + 1 < len(beam_args):
            return index, beam_args[index + 1]
        if arg.startswith("--runner="):
            return index, arg.split("=", 1)[1]
    return None, None


def _without(beam_args: Sequence[str], index: int) -> List[str]:
    args = list(beam_args)
    width = 2 if args[index] == "--runner" else 1
    return args[:index] + args[index + width:]


def num_workers(beam_args: Sequence[str], default: int = 2) -> int:
    """Beam's ``--num_workers`` from ``beam_args`` (``default`` when absent)."""
    from apache_beam.options.pipeline_options import PipelineOptions, WorkerOptions
    from continual_synth.mechanisms.errors import InputError
    value = PipelineOptions(list(beam_args)).view_as(WorkerOptions).num_workers
    if value is None:
        return default
    if value < 1:
        raise InputError(f"--num_workers must be a positive integer, got {value}")
    return value


def _partitions(beam_args: Sequence[str]) -> List[str]:
    """``--dask_partition_size=1`` unless the partitioning is given: Beam's Dask runner
    puts up to 128 elements of a ``Create`` in one partition (one task), but our elements
    are whole row groups and shards, so each must be a task of its own for the workers to
    share them."""
    given = any(arg.split("=", 1)[0] in ("--dask_partition_size", "--dask_npartitions")
                for arg in beam_args)
    return [] if given else ["--dask_partition_size=1"]


@contextlib.contextmanager
def resolved_beam_args(beam_args: Sequence[str], verbose: bool = False
                       ) -> Iterator[List[str]]:
    """Beam arguments with presets resolved; a ``dask-local`` cluster lives as long as
    the ``with`` block, and so does the cluster ``DaskRunner`` starts without
    ``--dask_client_address`` (quiet unless ``verbose``)."""
    index, runner = _runner_value(beam_args)
    if runner == "DaskRunner":
        require_dask()
        check_scheduler(beam_args)
        resolved = _without(beam_args, index) + [f"--runner={DASK_RUNNER}"] \
            + _partitions(beam_args)
        with _quiet_unless(verbose or bool(_scheduler_address(beam_args))):
            yield resolved
    elif runner == "dask-local":
        require_dask()
        with _quiet_unless(verbose), local_dask_cluster(num_workers(beam_args)) as address:
            yield (_without(beam_args, index) + [f"--runner={DASK_RUNNER}",
                                                 f"--dask_client_address={address}"]
                   + _partitions(beam_args))
    else:
        yield list(beam_args)


def _quiet_unless(verbose: bool):
    """:func:`quiet_own_cluster`, or nothing with ``--verbose`` (the cluster's and its
    workers' ``distributed.*`` lines then show, as Beam's workers' do)."""
    return contextlib.nullcontext() if verbose else quiet_own_cluster()


@contextlib.contextmanager
def local_dask_cluster(workers: int = 2, fork: bool = sys.platform.startswith("linux")
                       ) -> Iterator[str]:
    """A ``dask.distributed.LocalCluster`` of ``workers`` single-threaded worker
    processes on this machine; yields the scheduler address.  The cluster, its worker
    processes and the client Beam's Dask runner opened on it are closed on exit.

    ``fork``: fork the workers from this process (before the job has run anything, so
    they inherit imported modules, not job state) rather than spawn fresh interpreters;
    with ``fork=False`` nothing is inherited, which tests use to prove that every
    transform really is shipped to the workers.  The CLI starts the cluster before it
    imports or runs any job code (one thread, no JAX); a program that already runs
    threads of its own should pass ``fork=False``.  Its ``distributed.*`` logging is this
    process's (the CLI quiets it unless ``--verbose``: :func:`quiet_own_cluster`)."""
    require_dask()
    import dask
    import distributed

    with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ(),
                          "distributed.worker.multiprocessing-method":
                              "fork" if fork else "spawn", **QUIETER_MONITORS}):
        # the dashboard on any free port: a second job's cluster does not clash on 8787
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                           processes=True, dashboard_address=":0")
    try:
        yield cluster.scheduler_address
    finally:
        _close_clients(distributed)
        cluster.close()


# The event-loop tick (a blocked-loop diagnostic, every 20 ms) and the memory monitors
# (every 100 ms) run in the scheduler, every nanny and every worker; in the job's process
# they cost CPU in proportion to the run's length (6.5 -> 5.2 CPU s of the driver's on a
# 10M x 12 window run with two workers).  A job's cluster needs neither that often.
QUIETER_MONITORS = {"distributed.admin.tick.interval": "500ms",
                    "distributed.worker.memory.monitor-interval": "1s"}


def worker_environ() -> dict:
    """Dask's environment for new worker processes without ``MALLOC_TRIM_THRESHOLD_``.

    Dask sets it (65536) to return freed memory to the system in long-lived workers;
    setting it also turns off glibc's adaptive mmap threshold, so every numpy array over
    128 KiB is a fresh ``mmap`` whose pages fault in zeroed: the shard pivots and the
    row-group reads of a 2M x 12 ``window run`` take 1.3-3x their DirectRunner time.
    A job's own cluster lives as long as the job, so glibc's default serves it better."""
    import dask
    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    return environ


# Dask's configuration of its loggers, read by ``import distributed`` in each new worker
# process (the old-style ``logging: {distributed: error}``)
QUIET_WORKERS_ENV = "DASK_LOGGING__DISTRIBUTED"


@contextlib.contextmanager
def quiet_own_cluster() -> Iterator[None]:
    """While the ``with`` block runs, the ``distributed`` logger of this process (the
    scheduler and nannies of a local cluster) and of the worker processes started in it
    log critical records only; on exit the clients opened in it are closed (with the
    local cluster a client started, before it can log its shutdown), then the levels are
    restored.

    For ``--runner dask-local``, and ``--runner DaskRunner`` without
    ``--dask_client_address`` (Beam's runner then opens ``distributed.Client()``, which
    starts a cluster of its own), without ``--verbose``: their ``distributed.*`` INFO
    lines (about 60 for a short job) would otherwise reach stderr.  ERROR is quiet too,
    as Beam's is (:func:`continual_synth.pipelines.release.logs.configure`): a failed task reaches
    the client as the job's exception, which the command reports in one line, while a
    worker whose heartbeat meets the scheduler already closed at the end of a loaded run
    logs a connection traceback at ERROR that says nothing about the job."""
    import logging
    import os

    import distributed

    logger = logging.getLogger("distributed")
    level, environ = logger.level, os.environ.get(QUIET_WORKERS_ENV)
    logger.setLevel(logging.CRITICAL)
    os.environ[QUIET_WORKERS_ENV] = "critical"
    try:
        yield
    finally:
        try:
            _close_clients(distributed)
        finally:
            logger.setLevel(level)
            if environ is None:
                os.environ.pop(QUIET_WORKERS_ENV, None)
            else:
                os.environ[QUIET_WORKERS_ENV] = environ


def _scheduler_address(beam_args: Sequence[str]):
    """``--dask_client_address`` of ``beam_args`` (None if not given)."""
    from apache_beam.options.pipeline_options import PipelineOptions
    return PipelineOptions(list(beam_args)).get_all_options().get("address")  # its dest


def check_scheduler(beam_args: Sequence[str]) -> None:
    """``--dask_client_address``, if given, must answer (Beam's Dask client would wait
    30 s and end in a traceback)."""
    from continual_synth.transforms.storage import check_answers
    address = _scheduler_address(beam_args)
    if address:
        check_answers("--dask_client_address", address, "Dask scheduler", scheme="tcp")


def require_dask() -> None:
    """A one-line error (exit 2 from the CLI) when the ``[dask]`` extra is missing."""
    try:
        import distributed  # noqa: F401
        import apache_beam.runners.dask.dask_runner  # noqa: F401
    except ImportError as exc:
        from continual_synth.mechanisms.errors import InputError
        raise InputError(f"--runner dask-local and DaskRunner need Dask ({exc.name or exc} is not "
                         f"installed): pip install 'continual-synth[dask]'") from None


def _close_clients(distributed) -> None:
    """Close the client Beam's Dask runner opened on the cluster (it does not close it)."""
    while True:
        try:
            client = distributed.Client.current(allow_global=True)
        except ValueError:
            return
        client.close()
