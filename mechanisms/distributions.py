"""Fitted synthetic datasets as models (the outputs of ``A_Dataset``, Kumar, Strohmer and
Vershynin 2024 §4.2; the fits themselves are in :mod:`continual_synth.mechanisms.fitting`).

A model stands for ``total`` records distributed over the domain 𝒳: ``answers(workloads)``
(workload histograms, flattened C order as
:func:`~continual_synth.mechanisms.marginals.workload_histogram`, scaled to ``total``),
``probabilities(workload)``, ``sample(n, rng)`` (an n × p int32 code matrix, deterministic
given the numpy ``rng``) and ``to_dict()`` / :func:`model_from_dict` (JSON-serialisable).
Kinds: ``uniform`` (the data-independent start), ``dense`` (MW), ``junction-tree``
(IPF: consistent clique marginals on a junction forest, pure numpy), ``mrf`` and
``mixture-of-products`` (``mbi``), and ``mixture`` (a weighted average of models:
Algorithm 3's g_t = avg_l h_{t,l}).  Post-processing only: no privacy budget.
"""
from __future__ import annotations

import functools
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.marginals import Domain, Workload

__all__ = ["FittedModel", "marginal_table", "UniformModel", "DenseModel",
           "MixtureOfProductsModel", "MRFModel", "JunctionTreeModel", "MixtureModel",
           "average_models", "model_from_dict"]


@functools.lru_cache(maxsize=1)
def _mbi():
    """Import ``mbi`` with float64 JAX and the persistent compilation cache disabled
    (the settings ``mbi`` asks for; the cache only slows sweeps of small programs)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mbi
        from mbi import estimation, marginal_oracles
        from mbi.extensions import mixture_of_products
    return mbi, estimation, marginal_oracles, mixture_of_products


def _cells(domain: Domain, workload: Workload) -> int:
    return domain.size(workload)


class FittedModel:
    """A synthetic dataset as a model: ``total`` records distributed over 𝒳."""

    kind = "abstract"

    def __init__(self, domain: Domain, total: float):
        self.domain = domain
        self.total = max(float(total), 0.0)

    # -- interface ----------------------------------------------------------------------
    def probabilities(self, workload: Workload) -> np.ndarray:
        """The model's distribution of the workload's cells (sums to 1)."""
        raise NotImplementedError

    def probabilities_of(self, workloads: Sequence[Workload]) -> List[np.ndarray]:
        """:meth:`probabilities` of each of ``workloads`` (a model may compute them
        together)."""
        return [self.probabilities(tuple(w)) for w in workloads]

    def answers(self, workloads: Sequence[Workload]) -> List[np.ndarray]:
        """Workload histograms (float64, C order) scaled to ``total``."""
        return [p * self.total for p in self.probabilities_of(workloads)]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` records drawn i.i.d. from the model: an n × p int32 code matrix."""
        raise NotImplementedError

    def to_dict(self) -> Dict:
        raise NotImplementedError

    def scaled(self, total: float) -> "FittedModel":
        """The same distribution standing for ``total`` records."""
        data = self.to_dict()
        data["total"] = float(total)
        return model_from_dict(data, self.domain)

    def _check_n(self, n) -> int:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"sample size must be a non-negative integer, got {n!r}")
        return int(n)


def _project_dense(table: np.ndarray, table_attrs: Sequence[str],
                   workload: Workload) -> np.ndarray:
    """Marginal of a dense table (axes ``table_attrs``) on ``workload`` (C order)."""
    return marginal_table(table, table_attrs, workload).reshape(-1)


def marginal_table(table: np.ndarray, table_attrs: Sequence[str],
                   attrs: Sequence[str]) -> np.ndarray:
    """Σ of ``table`` (one axis per attribute of ``table_attrs``) over every attribute
    not in ``attrs``, axes in ``attrs`` order.  One single-operand ``einsum``: on the
    junction-tree fits' clique tables (6-7 axes, 10⁴-10⁵ cells) it is faster than numpy's
    ``sum`` over several axes, whose pairwise reduction walks short strided axes.
    ``table`` itself when nothing is summed out and the order is the same."""
    table_attrs, attrs = tuple(table_attrs), tuple(attrs)
    if attrs == table_attrs:
        return table
    return np.einsum(_reduction_spec(table_attrs, attrs), table)


@functools.lru_cache(maxsize=8192)
def _reduction_spec(table_attrs: Tuple[str, ...], attrs: Tuple[str, ...]) -> str:
    letters = [_letter(k) for k in range(len(table_attrs))]
    return "".join(letters) + "->" + "".join(letters[table_attrs.index(a)] for a in attrs)


def _letter(k: int) -> str:
    """The k-th einsum subscript (a-z, then A-Z)."""
    return chr(ord("a") + k) if k < 26 else chr(ord("A") + k - 26)


class UniformModel(FittedModel):
    """The uniform distribution on 𝒳 (the data-independent start; Algorithm 3 line 4
    initialises g(0, x) = 1, i.e. uniform with |𝒳| records; we keep the uniform
    distribution with a chosen total, 0 by default, see ``tabular``)."""

    kind = "uniform"

    def probabilities(self, workload):
        cells = _cells(self.domain, workload)
        return np.full(cells, 1.0 / cells)

    def sample(self, n, rng):
        n = self._check_n(n)
        return np.stack([rng.integers(0, s, n) for s in self.domain.sizes], axis=1
                        ).astype(np.int32).reshape(n, len(self.domain.sizes))

    def to_dict(self):
        return {"kind": self.kind, "total": self.total}


class DenseModel(FittedModel):
    """A probability vector over all of 𝒳 (C order over the domain's attributes): MW."""

    kind = "dense"

    def __init__(self, domain, total, probs: np.ndarray):
        super().__init__(domain, total)
        probs = np.asarray(probs, dtype=np.float64).reshape(domain.sizes)
        s = probs.sum()
        self.probs = probs / s if s > 0 else np.full(domain.sizes, 1.0 / probs.size)

    def probabilities(self, workload):
        return _project_dense(self.probs, list(self.domain.names), workload)

    def sample(self, n, rng):
        n = self._check_n(n)
        flat = self.probs.reshape(-1)
        cdf = np.cumsum(flat)
        idx = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
        idx = np.minimum(idx, flat.size - 1)
        return np.stack(np.unravel_index(idx, self.domain.sizes), axis=1).astype(np.int32)

    def to_dict(self):
        return {"kind": self.kind, "total": self.total,
                "probs": self.probs.reshape(-1).tolist()}


class MixtureOfProductsModel(FittedModel):
    """``mbi``'s mixture of products: K equally weighted components, each a product of
    per-attribute categoricals softmax(logits[a][k])."""

    kind = "mixture-of-products"

    def __init__(self, domain, total, logits: Dict[str, np.ndarray]):
        super().__init__(domain, total)
        self.logits = {a: np.asarray(logits[a], dtype=np.float64) for a in domain.names}
        self._products = {}
        for a, lg in self.logits.items():
            e = np.exp(lg - lg.max(axis=1, keepdims=True))
            self._products[a] = e / e.sum(axis=1, keepdims=True)

    @property
    def components(self) -> int:
        return next(iter(self.logits.values())).shape[0]

    def probabilities(self, workload):
        mats = [self._products[a] for a in workload]
        out = mats[0]
        for m in mats[1:]:
            out = (out[:, :, None] * m[:, None, :]).reshape(out.shape[0], -1)
        return out.mean(axis=0)

    def sample(self, n, rng):
        n = self._check_n(n)
        comp = rng.integers(0, self.components, n)
        cols = []
        for a in self.domain.names:
            cdf = np.cumsum(self._products[a], axis=1)[comp]
            u = rng.random(n)[:, None] * cdf[:, -1:]
            cols.append(np.minimum((cdf <= u).sum(axis=1), cdf.shape[1] - 1))
        return np.stack(cols, axis=1).astype(np.int32).reshape(n, len(self.domain.names))

    def to_dict(self):
        return {"kind": self.kind, "total": self.total,
                "logits": {a: v.tolist() for a, v in self.logits.items()}}


class MRFModel(FittedModel):
    """``mbi``'s Markov random field: potentials and marginals on the maximal cliques of
    the junction tree (held as numpy tables; the ``mbi`` object is rebuilt on demand).

    ``measured``: the workloads the model was fitted to so far (its *structure*: the next
    warm-started fit keeps them, anchored, see :class:`Fitter`).  Marginals of any other
    workload are computed exactly in numpy (:meth:`probabilities`)."""

    kind = "mrf"

    def __init__(self, domain, total, cliques: Sequence[Tuple[str, ...]],
                 potentials: Dict, marginals: Dict,
                 measured: Optional[Sequence[Workload]] = None):
        super().__init__(domain, total)
        self.cliques = [tuple(c) for c in cliques]
        self.potentials = {tuple(c): np.asarray(potentials[tuple(c)], dtype=np.float64)
                           for c in self.cliques if tuple(c) in potentials}
        self.marginals = {}
        for c in self.cliques:
            m = np.clip(np.asarray(marginals[tuple(c)], dtype=np.float64), 0, None)
            s = m.sum()
            self.marginals[c] = m / s if s > 0 else np.full(m.shape, 1.0 / m.size)
        self.measured = [tuple(w) for w in (measured if measured is not None
                                            else self.cliques)]
        self._cache: Dict[Workload, np.ndarray] = {}
        self._forest = None

    def probabilities(self, workload):
        return self.probabilities_of([workload])[0]

    def probabilities_of(self, workloads):
        """Exact marginals: a workload that a clique holds is summed from the smallest
        such clique; two-way workloads across cliques of one tree of the junction forest
        are computed together, grouped by a shared attribute (:meth:`_pair_marginals`);
        any other by summing out the other attributes of the smallest subtree of the
        junction tree that connects cliques holding its attributes (a connected subtree
        of a junction tree factorises as Π μ_C / Π μ_S over its cliques and separators;
        attributes in different components of the junction forest are independent)."""
        workloads = [tuple(w) for w in workloads]
        pending = [w for w in dict.fromkeys(workloads) if len(w) == 2 and w[0] != w[1]
                   and w not in self._cache
                   and not any(set(w) <= set(c) for c in self.cliques)]
        if pending:
            self._pair_marginals(pending)
        for w in workloads:
            if w not in self._cache:
                self._cache[w] = self._marginal(w)
        return [self._cache[w] for w in workloads]

    def _pair_marginals(self, pairs):
        """Cache the marginals of two-way workloads (a, b) of attributes in different
        cliques of one tree of the junction forest, one attribute a at a time (the one
        most pending pairs share), by messages from a clique R holding a towards the
        cliques holding its partners b: a clique C beyond the cliques holding a (which
        form a subtree, by the running intersection property) receives the conditional
        p(a | x_S) over its separator S with its parent, and
        p(a, x_O) = Σ_{x_S} p(a | x_S)·μ_C(x_S, x_O) for the attributes O it passes on
        (its children's separators, or b): only separator-sized tables, and each
        clique table summed once per set of attributes for all the a.  One pass per
        attribute instead of one per pair (for the 35 of CCES's 91 two-way workloads
        that no clique of a k = 12 model holds, less than half the time)."""
        import networkx as nx

        forest = self._junction_forest()
        tree, component = forest["tree"], forest["component"]
        homes = {a: [c for c in self.cliques if a in c] for w in pairs for a in w}
        pending = {w for w in pairs if homes[w[0]] and homes[w[1]]
                   and component[homes[w[0]][0]] == component[homes[w[1]][0]]}
        partners: Dict[str, set] = {}
        for a, b in pending:
            partners.setdefault(a, set()).add(b)
            partners.setdefault(b, set()).add(a)
        names = self.domain.names
        projections: Dict = {}  # (clique, attributes) → μ_C's marginal, for every a

        def projection(node, attrs):
            if (node, attrs) not in projections:
                projections[(node, attrs)] = marginal_table(self.marginals[node], node, attrs)
            return projections[(node, attrs)]

        while partners:
            a = max(partners, key=lambda x: (len(partners[x]), -names.index(x)))
            others = partners.pop(a)
            for b in others:
                partners[b].discard(a)
                if not partners[b]:
                    del partners[b]
            root = min(homes[a], key=lambda c: self.marginals[c].size)
            parent = {root: None}
            parent.update({v: u for u, v in nx.bfs_edges(tree, root)})
            depth = {root: 0}
            for v in list(parent)[1:]:
                depth[v] = depth[parent[v]] + 1
            target = {b: min(homes[b], key=lambda c: (depth[c], self.marginals[c].size))
                      for b in others}
            needed = set()
            for node in target.values():
                while node is not None and node not in needed:
                    needed.add(node)
                    node = parent[node]
            conditional = {}  # clique without a → (S, p(a | x_S))

            def joint(node, out):
                """p(a, x_O), axes (a,) + O, for attributes O of ``node``."""
                if a in node:
                    return projection(node, (a,) + out)
                sep, cond = conditional[node]
                union = tuple(x for x in node if x in sep or x in out)
                return _einsum([((a,) + sep, cond), (union, projection(node, union))],
                               (a,) + out)

            for node in parent:  # breadth-first: a clique's parent comes first
                if node not in needed or node == root or a in node:
                    continue
                sep = tuple(x for x in node if x in parent[node])
                with_a = joint(parent[node], sep)
                sep_marg = projection(node, sep)[None]
                conditional[node] = (sep, np.divide(with_a, sep_marg,
                                                    out=np.zeros_like(with_a),
                                                    where=sep_marg > 0))
            for b, node in target.items():
                table = joint(node, (b,))
                for w, marg in (((a, b), table), ((b, a), table.T)):
                    if w in pending:
                        marg = marg.reshape(-1)
                        s = marg.sum()
                        self._cache[w] = (marg / s if s > 0
                                          else np.full(marg.size, 1.0 / marg.size))

    def _marginal(self, workload):
        holding = [c for c in self.cliques if set(workload) <= set(c)]
        if holding:  # the smallest table holding it: the least to sum
            c = min(holding, key=lambda c: self.marginals[c].size)
            return _project_dense(self.marginals[c], list(c), workload)
        forest = self._junction_forest()
        groups: Dict = {}
        for a in workload:
            home = next((c for c in self.cliques if a in c), None)
            key = forest["component"][home] if home is not None else ("absent", a)
            groups.setdefault(key, []).append((a, home))
        factors = []
        for members in groups.values():
            attrs = tuple(a for a, _ in members)
            if members[0][1] is None:  # an attribute outside the model: uniform
                size = self.domain.sizes[self.domain.index(attrs)[0]]
                factors.append((attrs, np.full(size, 1.0 / size)))
            else:
                factors.append((attrs, self._tree_marginal(attrs, dict(members), forest)))
        table = _einsum(factors, workload)
        s = table.sum()
        return (table / s).reshape(-1) if s > 0 else np.full(table.size, 1.0 / table.size)

    def _junction_forest(self):
        if self._forest is None:
            import networkx as nx

            graph = nx.Graph()
            graph.add_nodes_from(self.cliques)
            for i, c1 in enumerate(self.cliques):
                for c2 in self.cliques[i + 1:]:
                    shared = len(set(c1) & set(c2))
                    if shared:
                        graph.add_edge(c1, c2, weight=shared)
            tree = nx.maximum_spanning_tree(graph)
            component = {}
            for k, nodes in enumerate(nx.connected_components(tree)):
                component.update({c: k for c in nodes})
            self._forest = {"tree": tree, "component": component}
        return self._forest

    def _tree_marginal(self, attrs, homes, forest):
        import networkx as nx

        tree = forest["tree"]
        root = homes[attrs[0]]
        nodes = {root}
        for a in attrs[1:]:
            nodes.update(nx.shortest_path(tree, root, homes[a]))

        def message(node, parent):
            factors = [(node, self.marginals[node])]
            for child in tree.neighbors(node):
                if child != parent and child in nodes:
                    factors.append(message(child, node))
            if parent is None:
                return _einsum(factors, tuple(attrs))
            sep = tuple(a for a in node if a in parent)
            present = set().union(*[f[0] for f in factors])
            keep = sep + tuple(a for a in attrs if a in present and a not in sep)
            sep_marg = _project_dense(self.marginals[node], list(node), sep).reshape(
                [self.domain.sizes[i] for i in self.domain.index(sep)])
            # a separator cell of subnormal mass holds (numerically) none: its inverse
            # would overflow to inf, and inf × 0 make the product NaN
            inverse = np.divide(1.0, sep_marg, out=np.zeros_like(sep_marg),
                                where=sep_marg > np.finfo(sep_marg.dtype).tiny)
            return keep, _einsum(factors + [(sep, inverse)], keep)

        return message(root, None)

    def mbi_potentials(self):
        mbi, *_ = _mbi()
        dom = _mbi_domain(self.domain)
        tables = {c: mbi.Factor(dom.project(c), self.potentials[c]) for c in self.cliques}
        return mbi.CliqueVector(dom, self.cliques, tables)

    def sample(self, n, rng):
        """Forward sampling along the junction tree (``mbi``'s ``synthetic_data`` with
        method "sample"), with numpy's global generator seeded from ``rng`` and restored
        afterwards, so the result is deterministic given ``rng``."""
        n = self._check_n(n)
        if n == 0:
            return np.zeros((0, len(self.domain.names)), dtype=np.int32)
        mbi, _, marginal_oracles, _ = _mbi()
        potentials = self.mbi_potentials()
        model = mbi.MarkovRandomField(
            potentials=potentials,
            marginals=marginal_oracles.message_passing_stable(potentials, 1.0),
            total=1.0)
        saved = np.random.get_state()
        try:
            np.random.seed(int(rng.integers(0, 2 ** 32 - 1)))
            data = model.synthetic_data(rows=n, method="sample")
        finally:
            np.random.set_state(saved)
        return np.stack([np.asarray(data.to_dict()[a]) if hasattr(data, "to_dict")
                         else np.asarray(data.df[a]) for a in self.domain.names],
                        axis=1).astype(np.int32)

    def to_dict(self):
        return {"kind": self.kind, "total": self.total,
                "cliques": [list(c) for c in self.cliques],
                "potentials": [self.potentials[c].tolist() for c in self.cliques],
                "marginals": [self.marginals[c].tolist() for c in self.cliques],
                "measured": [list(w) for w in self.measured]}


class JunctionTreeModel(MRFModel):
    """A decomposable distribution held as consistent clique marginals μ_C on a junction
    forest (p(x) = Π_C μ_C(x_C) / Π_S μ_S(x_S)): the ``ipf`` fit's model.  Pure numpy:
    marginals of any workload as :class:`MRFModel`, forward sampling along the forest
    (each clique's new attributes drawn from μ_C / μ_S given its separator, by
    systematic sampling within each separator value: :func:`_systematic_positions`)."""

    kind = "junction-tree"

    def __init__(self, domain, total, cliques, marginals: Dict,
                 measured: Optional[Sequence[Workload]] = None):
        super().__init__(domain, total, cliques, {}, marginals, measured)

    def scaled(self, total):
        return JunctionTreeModel(self.domain, total, self.cliques, self.marginals,
                                 self.measured)

    def sample(self, n, rng):
        n = self._check_n(n)
        out = np.zeros((n, len(self.domain.names)), dtype=np.int32)
        forest = self._junction_forest()["tree"]
        import networkx as nx

        for component in nx.connected_components(forest):
            root = min(component)
            for parent, node in [(None, root)] + list(nx.bfs_edges(forest, root)):
                sep = tuple(a for a in node if parent is not None and a in parent)
                new = tuple(a for a in node if a not in sep)
                table = _project_dense(self.marginals[node], list(node), sep + new)
                sep_sizes = [self.domain.sizes[i] for i in self.domain.index(sep)]
                new_sizes = [self.domain.sizes[i] for i in self.domain.index(new)]
                table = table.reshape(int(np.prod(sep_sizes, dtype=np.int64)), -1)
                width = table.shape[1]
                cdf = np.cumsum(table.reshape(-1))
                row = (np.ravel_multi_index(tuple(out[:, self.domain.index([a])[0]]
                                                  for a in sep), sep_sizes)
                       if sep else np.zeros(n, dtype=np.int64))
                start = np.concatenate([[0.0], cdf])[row * width]
                u = start + _systematic_positions(row, rng) * (
                    cdf[row * width + width - 1] - start)
                cell = np.searchsorted(cdf, u, side="right") - row * width
                cell = np.clip(cell, 0, width - 1)
                for a, code in zip(new, np.unravel_index(cell, new_sizes)):
                    out[:, self.domain.index([a])[0]] = code
        return out

    def to_dict(self):
        return {"kind": self.kind, "total": self.total,
                "cliques": [list(c) for c in self.cliques],
                "marginals": [self.marginals[c].tolist() for c in self.cliques],
                "measured": [list(w) for w in self.measured]}


def _systematic_positions(groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Positions in [0, 1) for inverse-CDF sampling within each group of records: the
    ``n_g`` records of group g, in a random order, get (rank + U_g) / n_g with one
    uniform U_g per group (systematic sampling).  Each record's position is still
    uniform on [0, 1) — its cell is drawn from the conditional distribution exactly —
    but the group's cell counts are within 1 of n_g × p(cell | g): the randomised
    rounding of private-pgm's ``synthetic_data(method="round")`` (its default), which
    keeps the released table's marginals on the model's instead of adding i.i.d.
    sampling noise to them."""
    n = groups.size
    # by group, in a random order within a group (keys stay below the next group's)
    order = np.argsort(groups + 0.5 * rng.random(n))
    ordered = groups[order]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    sizes = np.diff(np.r_[first, n])
    rank = np.arange(n) - np.repeat(first, sizes)
    positions = np.empty(n)
    positions[order] = ((rank + np.repeat(rng.random(first.size), sizes))
                        / np.repeat(sizes, sizes))
    return positions


def _einsum(factors, keep):
    """Σ over every attribute not in ``keep`` of the product of named tables
    ``factors`` [(attributes, array with one axis per attribute)], axes in ``keep``
    order."""
    letters = {}
    for attrs, _ in factors:
        for a in attrs:
            letters.setdefault(a, _letter(len(letters)))
    spec = ",".join("".join(letters[a] for a in attrs) for attrs, _ in factors)
    spec += "->" + "".join(letters[a] for a in keep)
    operands = [np.asarray(t) for _, t in factors]
    if len(factors) <= 2:
        return np.einsum(spec, *operands, optimize=False)
    return np.einsum(spec, *operands,
                     optimize=_contraction_order(spec, tuple(t.shape for t in operands)))


@functools.lru_cache(maxsize=4096)
def _contraction_order(spec: str, shapes: Tuple[Tuple[int, ...], ...]) -> list:
    """numpy's greedy contraction order for ``spec`` on operands of these shapes (what
    ``optimize=True`` would search on every call; it depends on the shapes only)."""
    return np.einsum_path(spec, *[np.broadcast_to(0.0, shape) for shape in shapes],
                          optimize="greedy")[0]


class MixtureModel(FittedModel):
    """The average of datasets h_1..h_k (Algorithm 3 line 19: g_t = avg_l h_{t,l}):
    ``total`` = mean of the components' totals; answers = mean of their answers; a
    record comes from component l with probability |h_l| / Σ|h|."""

    kind = "mixture"

    def __init__(self, domain, components: Sequence[FittedModel]):
        if not components:
            raise ValueError("a mixture needs at least one component")
        self.components = list(components)
        super().__init__(domain, float(np.mean([c.total for c in self.components])))

    def _weights(self):
        totals = np.array([c.total for c in self.components])
        if totals.sum() <= 0:
            return np.full(len(totals), 1.0 / len(totals))
        return totals / totals.sum()

    def probabilities(self, workload):
        return self.probabilities_of([workload])[0]

    def probabilities_of(self, workloads):
        w = self._weights()
        tables = [c.probabilities_of(workloads) for c in self.components]
        return [sum(wi * t[k] for wi, t in zip(w, tables)) for k in range(len(workloads))]

    def sample(self, n, rng):
        n = self._check_n(n)
        counts = rng.multinomial(n, self._weights())
        parts = [c.sample(int(k), rng) for c, k in zip(self.components, counts)]
        out = np.concatenate(parts, axis=0) if parts else np.zeros((0, len(self.domain.names)))
        return out[rng.permutation(out.shape[0])].astype(np.int32)

    def to_dict(self):
        return {"kind": self.kind, "total": self.total,
                "components": [c.to_dict() for c in self.components]}

    def scaled(self, total):
        factor = total / self.total if self.total > 0 else 0.0
        return MixtureModel(self.domain, [c.scaled(c.total * factor) if self.total > 0
                                          else c.scaled(total) for c in self.components])


def average_models(domain: Domain, models: Sequence[FittedModel]) -> FittedModel:
    """avg_l h_l as a model: exact dense average for MW, else a :class:`MixtureModel`."""
    models = list(models)
    if len(models) == 1:
        return models[0]
    if any(isinstance(m, DenseModel) for m in models) and \
            all(isinstance(m, (DenseModel, UniformModel)) for m in models):
        models = [_as_dense(m) for m in models]
    if all(isinstance(m, JunctionTreeModel) for m in models):
        return _average_junction_trees(domain, models)
    if all(isinstance(m, DenseModel) for m in models):
        total = float(np.mean([m.total for m in models]))
        acc = sum(m.probs * m.total for m in models)
        return DenseModel(domain, total, acc if total > 0 else
                          sum(m.probs for m in models))
    return MixtureModel(domain, models)


def _average_junction_trees(domain, models) -> "JunctionTreeModel":
    """avg_l h_l of decomposable models as one decomposable model on the last one's
    junction forest (whose structure contains the others'): its clique marginals are
    exactly those of the average (weights |h_l| / Σ|h|), so it answers every workload of
    the structure as the average does; elsewhere it is the maximum-entropy completion."""
    last = models[-1]
    totals = np.array([m.total for m in models])
    weights = totals / totals.sum() if totals.sum() > 0 else np.full(len(models),
                                                                    1 / len(models))
    margs = {}
    for c in last.cliques:
        shape = [domain.sizes[i] for i in domain.index(c)]
        margs[c] = sum(w * m.probabilities(c).reshape(shape) for w, m in zip(weights, models))
    return JunctionTreeModel(domain, float(totals.mean()), last.cliques, margs, last.measured)


def _as_dense(model: FittedModel) -> "DenseModel":
    """A small-domain model as a dense distribution over 𝒳."""
    if isinstance(model, DenseModel):
        return model
    if isinstance(model, UniformModel):
        return DenseModel(model.domain, model.total, np.ones(model.domain.sizes))
    if isinstance(model, MixtureModel):
        comps = [_as_dense(c) for c in model.components]
        w = model._weights()
        return DenseModel(model.domain, model.total, sum(wi * c.probs for wi, c in zip(w, comps)))
    raise InputError(f"MW cannot start from a {model.kind} model")


def model_from_dict(data: Dict, domain: Domain) -> FittedModel:
    """Inverse of ``FittedModel.to_dict`` (the domain is passed separately)."""
    kind = data.get("kind")
    total = float(data["total"])
    if kind == "uniform":
        return UniformModel(domain, total)
    if kind == "dense":
        return DenseModel(domain, total, np.asarray(data["probs"], dtype=np.float64))
    if kind == "mixture-of-products":
        return MixtureOfProductsModel(domain, total, data["logits"])
    if kind == "mrf":
        cliques = [tuple(c) for c in data["cliques"]]
        return MRFModel(domain, total, cliques, dict(zip(cliques, data["potentials"])),
                        dict(zip(cliques, data["marginals"])), data.get("measured"))
    if kind == "junction-tree":
        cliques = [tuple(c) for c in data["cliques"]]
        return JunctionTreeModel(domain, total, cliques, dict(zip(cliques, data["marginals"])),
                                 data.get("measured"))
    if kind == "mixture":
        return MixtureModel(domain, [model_from_dict(c, domain) for c in data["components"]])
    raise ValueError(f"unknown fitted model kind {kind!r}")


def _mbi_domain(domain: Domain):
    mbi, *_ = _mbi()
    return mbi.Domain(list(domain.names), list(domain.sizes))
