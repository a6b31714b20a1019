"""Beam's Dask runner with a GroupByKey that costs inputs × outputs small tasks, not the
square of a growing partition count.

Beam's Dask runner (2.77) translates every ``GroupByKey`` to ``dask.bag.groupby`` (a task
shuffle with as many output partitions as input partitions, keys placed by a hash).
Partitions add up through every ``Flatten``/``CoGroupByKey``, so on the 2M × 12 panel a
``window run`` became thousands of tasks whose scheduling (in the launching process)
cost as much CPU as the whole job on the DirectRunner, and the 16 shards landed in
hashed partitions, two or three to some and none to others.

Here a ``GroupByKey`` over ``n`` partitions is ``n`` split tasks, ``n × m`` picks and ``m``
group tasks with ``m = min(n, 2 × worker threads)`` (every thread has work, twice over for
balance, and the count does not grow along the pipeline); an integer key ``k`` (a shard)
goes to partition ``k mod m``, so shards spread evenly; any other key by dask's
deterministic ``tokenize``.  Values keep their input order (partition by partition), as
in ``dask.bag.groupby``.  Everything else is Beam's runner unchanged.
"""
from __future__ import annotations

import itertools
import operator

import dask
import dask.bag as db
from apache_beam.pipeline import PipelineVisitor
from apache_beam.runners.dask import dask_runner as beam_dask
from apache_beam.runners.dask.overrides import _GroupByKeyOnly, dask_overrides
from apache_beam.runners.dask.transform_evaluator import defenestrate
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph


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
    n, m = bag.npartitions, max(1, min(bag.npartitions, partitions))
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
    :func:`group_by_key`."""

    def __init__(self, beam_visitor, partitions: int):
        self.beam, self.partitions = beam_visitor, partitions

    def visit_transform(self, node) -> None:
        if node.transform.__class__ is _GroupByKeyOnly:
            (source,) = node.inputs
            self.beam.bags[node] = group_by_key(self.beam.bags[source.producer],
                                                self.partitions)
        else:
            self.beam.visit_transform(node)
