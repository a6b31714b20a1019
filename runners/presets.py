"""Runner presets: how ``--runner`` names map to Beam runners.

* ``DirectRunner`` (default): Beam's local runner, in this process.
* ``dask-local``: Beam's Dask runner against a ``dask.distributed`` cluster started on
  this machine for the job (``--dask-workers`` workers, one thread each) and closed
  after it.  For an existing cluster use
  ``--runner apache_beam.runners.dask.dask_runner.DaskRunner --dask_client_address HOST:PORT``.
* ``DaskRunner``: shorthand for Beam's Dask runner's full class name.
* ``FlinkRunner``, ``DataflowRunner``, …: passed to Beam unchanged, with their own
  options (``--flink_master``, ``--project`` …); ship the code with
  ``--setup_file ./setup.py``.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List, Sequence

DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


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


@contextlib.contextmanager
def resolved_beam_args(beam_args: Sequence[str], dask_workers: int = 2) -> Iterator[List[str]]:
    """Beam arguments with presets resolved; a ``dask-local`` cluster lives as long as
    the ``with`` block."""
    index, runner = _runner_value(beam_args)
    if runner == "DaskRunner":
        yield _without(beam_args, index) + [f"--runner={DASK_RUNNER}"]
    elif runner == "dask-local":
        with local_dask_cluster(dask_workers) as address:
            yield _without(beam_args, index) + [f"--runner={DASK_RUNNER}",
                                                f"--dask_client_address={address}"]
    else:
        yield list(beam_args)


@contextlib.contextmanager
def local_dask_cluster(workers: int = 2) -> Iterator[str]:
    """A ``dask.distributed.LocalCluster`` on this machine; yields the scheduler address."""
    try:
        from distributed import LocalCluster
    except ImportError:  # pragma: no cover - depends on the install
        from continual_synth.mechanisms.errors import InputError
        raise InputError("--runner dask-local needs Dask: pip install 'continual-synth[dask]'"
                         ) from None
    import logging

    import distributed

    logging.getLogger("distributed").setLevel(logging.ERROR)
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=False,
                           dashboard_address=None)
    try:
        yield cluster.scheduler_address
    finally:
        _close_clients(distributed)
        cluster.close()


def _close_clients(distributed) -> None:
    """Close the client Beam's Dask runner opened on the cluster (it does not close it)."""
    while True:
        try:
            client = distributed.Client.current(allow_global=True)
        except ValueError:
            return
        client.close()
