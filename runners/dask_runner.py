"""Beam's Dask runner with a GroupByKey that costs inputs × outputs small tasks, not the
square of a growing partition count.

Beam's Dask runner (2.77) translates every ``GroupByKey`` to ``dask.bag.groupby`` (a task
shuffle with as many output partitions as input partitions, keys placed by a hash).
Partitions add up through every ``Flatten``/``CoGroupByKey``, so on the 2M × 12 panel a
``window run`` became thousands of tasks whose scheduling (in the launching process)
cost as much CPU as the whole job on the DirectRunner, and the 16 shards landed in
hashed partitions, two or three to some and none to others.

Here a ``GroupByKey`` over ``n`` partitions is ``n`` split tasks, ``n × m`` picks and ``m``
group tasks with ``m = 2 × worker threads`` whatever ``n`` is (every thread has work,
twice over for balance, even after a one-partition input such as a single CSV file or
the one-element plan; the count does not grow along the pipeline); an integer key ``k``
(a shard) goes to partition ``k mod m``, so shards spread evenly; any other key by dask's
deterministic ``tokenize``.  Values keep their input order (partition by partition), as
in ``dask.bag.groupby``.

The pipeline is translated as it was built, without Beam's test round trip through the
runner API (:meth:`DaskRunner.is_fnapi_compatible`): serial work in the launching process
before any worker starts.  Everything else is Beam's runner unchanged.
"""
from __future__ import annotations

import itertools
import operator

import dask
import dask.bag as db
from apache_beam.pipeline import PipelineVisitor
from apache_beam.transforms.core import ParDo
from apache_beam.runners.dask import dask_runner as beam_dask
from apache_beam.runners.dask.overrides import _GroupByKeyOnly, dask_overrides
from apache_beam.runners.dask.transform_evaluator import defenestrate
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

__all__ = ["partition_of", "split_partition", "group_pieces", "group_by_key", "DaskRunner",
           "side_input_placeholders"]


def partition_of(key, partitions: int) -> int:
    """Output partition of ``key``: ``key mod partitions`` for an integer, else a stable hash
    (the same in every worker process)."""
    if isinstance(key, int):
        return key % partitions
    return int(tokenize(key), 16) % partitions


def split_partition(items, partitions: int):
    """One input partition's ``(key, windowed value)`` items as ``partitions`` lists."""
    pieces = [[] for _ in range(partitions)]
    for item in items:
        pieces[partition_of(item[0], partitions)].append(item)
    return pieces


def group_pieces(pieces):
    """``[(key, [values])]`` of one output partition, keys in first-seen order."""
    groups = {}
    for key, value in itertools.chain.from_iterable(pieces):
        groups.setdefault(key, []).append(defenestrate(value))
    return list(groups.items())


def group_by_key(bag: db.Bag, partitions: int) -> db.Bag:
    """Beam's ``GroupByKeyOnly`` on a bag of ``(key, windowed value)`` pairs."""
    n, m = bag.npartitions, max(1, partitions)
    token = tokenize(bag.name, m)
    split, pick, group = (f"beam-gbk-{part}-{token}" for part in ("split", "pick", "group"))
    layer = {}
    for i in range(n):
        layer[(split, i)] = (split_partition, (bag.name, i), m)
        for j in range(m):
            layer[(pick, i, j)] = (operator.getitem, (split, i), j)
    for j in range(m):
        layer[(group, j)] = (group_pieces, [(pick, i, j) for i in range(n)])
    graph = HighLevelGraph.from_collections(group, layer, dependencies=[bag])
    return db.Bag(graph, group, m)


class DaskRunner(beam_dask.DaskRunner):
    """Beam's ``DaskRunner`` with :func:`group_by_key` for every ``GroupByKey``."""

    def is_fnapi_compatible(self) -> bool:
        """True: ``Pipeline.run`` then skips its test round trip through the runner API
        (the whole pipeline written to protos and read back into a second pipeline
        object, which Beam runs instead), as it does for the DirectRunner in batch.  This
        runner translates the pipeline object to dask bags itself; the round trip cost
        the launching process 0.35-0.45 CPU s of a 2M x 12 ``window run`` (serial, before
        any worker starts).  The only other effect in Beam 2.77 is the ``beam_fn_api``
        experiment flag, which no Python runner but Dataflow's reads."""
        return True

    def run_pipeline(self, pipeline, options):
        import dask.distributed as ddist

        dask_options = options.view_as(beam_dask.DaskOptions).get_all_options(
            drop_default=True, current_only=True)
        bag_kwargs = beam_dask.DaskOptions._extract_bag_kwargs(dask_options)
        client = ddist.Client(**dask_options)
        threads = sum(client.nthreads().values())
        pipeline.replace_all(dask_overrides())
        visitor = _Visitor(self.to_dask_bag_visitor(bag_kwargs), 2 * threads)
        pipeline.visit(visitor)
        # the last bag is the pipeline's leaf: computing it runs every stage
        futures = client.compute(dask.optimize(list(visitor.beam.bags.values())[-1]))
        return beam_dask.DaskRunnerResult(client, futures)


class _Visitor(PipelineVisitor):
    """Beam's Dask bag visitor, except that ``GroupByKeyOnly`` becomes
    :func:`group_by_key` and a ``ParDo`` with side inputs gets placeholders in their
    places (:func:`side_input_placeholders`)."""

    def __init__(self, beam_visitor, partitions: int):
        self.beam, self.partitions = beam_visitor, partitions

    def visit_transform(self, node) -> None:
        if node.transform.__class__ is _GroupByKeyOnly:
            (source,) = node.inputs
            self.beam.bags[node] = group_by_key(self.beam.bags[source.producer],
                                                self.partitions)
        else:
            if isinstance(node.transform, ParDo) and node.side_inputs:
                side_input_placeholders(node.transform)
            self.beam.visit_transform(node)


def side_input_placeholders(pardo: ParDo) -> None:
    """Make ``pardo``'s ``raw_side_inputs`` its arguments with placeholders where its side
    inputs go (``pardo.args``, ``pardo.kwargs``).

    Beam's Dask translation hands the DoFn invoker ``raw_side_inputs``, the arguments as
    written with the ``AsList(...)`` objects in them, where the invoker expects the
    placeholders it fills with the side inputs' values (the job fails: "object of type
    'AsList' has no len()").  Beam's test round trip through the runner API, which
    :class:`DaskRunner` skips, hid that: a ParDo read back from protos is built from the
    placeholder arguments, so this is what the round trip left."""
    pardo.raw_side_inputs = pardo.args, pardo.kwargs
