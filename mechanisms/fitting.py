"""A_Dataset: fit a synthetic dataset to noisy workload measurements (Kumar, Strohmer and
Vershynin 2024, §4.2 and the ``A_Dataset`` subroutine of Algorithms 1-3).

``A_Dataset`` takes noisy measurements ``{(q_i, m_i)}`` of some workloads and an
initialisation h (warm start) and returns a dataset complying with the measurements.  It
does not touch private data and needs no privacy budget: everything here is
post-processing of already-private measurements.

Three fits:

* ``ipf`` (default) — the ``mw`` update on a **decomposable graphical model**: the
  junction forest (:func:`junction_tree`, greedy elimination) of the workloads measured
  so far (the warm start's ``measured`` plus the new ones), held as consistent clique
  marginals μ_C in numpy (:class:`JunctionTreeModel`).  Each measured workload W ⊆ C
  rescales μ_C by m̂_W/μ_W and the change is propagated along the forest, which is the
  iterative-proportional-fitting step p(x) ← p(x)·m̂_W(x_W)/p_W(x_W) on the whole
  distribution; cycling gives the distribution closest in KL to the warm start that
  matches the measurements (noise-free: exactly).  No compilation, milliseconds per fit.
  :meth:`Fitter.fits` is AIM's model-size control (McKenna et al. 2022): a workload may
  join the structure only while the junction tree stays under ``max_cells``.
* ``mw`` — **multiplicative weights** over the full distribution on 𝒳 (Hardt, Ligett,
  McSherry 2012; §4.2.1), for small domains only: the model is a dense probability vector
  over all |𝒳| cells, refused with an :class:`InputError` above ``max_cells``.  Each
  measured workload is applied as the multiplicative-weights update with the exact
  (entropic) step, p(x) ← p(x)·m̂_W(c(x)) / p_W(c(x)) (the KL projection of p onto
  {W(p) = m̂_W}, i.e. iterative proportional fitting; MWEM's update
  p(x) ∝ p(x)·exp(q(x)(m − q(p))/(2n)) is its first-order version and converges far
  more slowly), cycling ``iterations`` times over the measured workloads from the warm
  start.  m̂_W is the measurement projected onto the nonnegative histograms of its
  total and normalised (:func:`nonnegative_target`).
* ``pgm`` — private-pgm (``mbi`` 2.0, McKenna et al. 2019; §4.2.2):
  ``mbi.estimation.MirrorDescent`` on a Markov random field over the measured workloads
  (``pgm_model`` ``auto``/``mrf``; the structure grows as for ``ipf``, the unmeasured
  workloads of the structure anchored at the warm start's answers with weight
  ``anchor_weight``; every new structure costs a JAX compilation of several seconds), or
  ``mixture``: ``mbi``'s ``MixtureOfProductsEstimator`` fitted to **all** the workloads
  (the unmeasured ones anchored), which compiles once per run.  ``mbi`` fits run on the
  normalised scale (total 1).

The models these fits return live in :mod:`continual_synth.mechanisms.distributions`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.distributions import (
    DenseModel, FittedModel, JunctionTreeModel, MixtureModel, MixtureOfProductsModel,
    MRFModel, UniformModel, _as_dense, _cells, _mbi, _mbi_domain, _project_dense,
    marginal_table)
from continual_synth.mechanisms.marginals import Domain, Workload

__all__ = ["FIT_METHODS", "PGM_MODELS", "DEFAULT_MAX_CELLS", "DEFAULT_MODEL_CELLS",
           "IPF_TOLERANCE", "RECORD_TOLERANCE", "STEER_TOLERANCE", "SUPPORT_FLOOR",
           "PAIR_CORRELATION", "PAIR_AFTER", "CACHE_ENTRIES", "Measurement",
           "nonnegative_target", "junction_tree", "canonical_correlation",
           "mean_square_contingency", "rake_pair", "junction_tree_cells", "Fitter"]

FIT_METHODS = ("ipf", "pgm", "mw")
PGM_MODELS = ("auto", "mrf", "mixture")
DEFAULT_MAX_CELLS = 1 << 22    # dense MW distributions
DEFAULT_MODEL_CELLS = 1 << 17  # junction trees of the graphical-model fits
IPF_TOLERANCE = 1e-5  # on proportions
RECORD_TOLERANCE = 0.005  # on counts: a 200th of a record, below the released table's rounding
STEER_TOLERANCE = 10  # × the tolerance, for fits that only steer the next selection
SUPPORT_FLOOR = 1e-6  # weight of the uniform distribution mixed into an IPF warm start
PAIR_CORRELATION = 0.9  # one-way margins of attributes this dependent are fitted as a pair
PAIR_AFTER = 2  # sweeps after which slow one-way margins are looked at for such pairs
# Entries of a fitter's caches of junction trees and of their sizes (one per structure, and
# per structure and candidate workload) before they are emptied: a process that folds a
# long stream (``tabular run``, a stream) meets a new structure whenever a pair joins or
# leaves, and the size checks of the workloads that would need room (``tabular.room_for``)
# add sub-structures; CCES at ε = 1000 filled 27 890 size entries in 100 periods.
CACHE_ENTRIES = 20_000



@dataclass(frozen=True)
class Measurement:
    """A noisy measurement of one workload histogram: ``values`` (float, C order over the
    workload's cells, on the count scale) with noise standard deviation ``stddev`` per
    cell (any positive number: it only weighs the measurements against each other)."""

    workload: Workload
    values: np.ndarray
    stddev: float = 1.0


def nonnegative_target(values) -> np.ndarray:
    """The proportions a fit matches for a noisy histogram y: the Euclidean projection
    of y onto {x ≥ 0, Σx = Σy}, x_i = max(y_i − τ, 0) with the one τ that keeps the
    total (Duchi et al. 2008, sort-based), normalised; where Σy ≤ 0, y clipped at 0
    and normalised; an empty array when nothing positive is left.

    Why not clip at 0 and normalise: clipping keeps every cell's
    positive noise, E[max(0, Z)] = b/2 for a Laplace Z of scale b, so a workload of many
    empty cells gains mass in all of them and loses it from the populated ones; the
    projection subtracts one threshold from every cell (the *Norm-Sub* of Wang et al.
    2020, for the same problem in local DP) and keeps the total, an unbiased estimate
    (the comparison: bench/results/tabular_floor.md); without noise it
    changes nothing.  Post-processing of private measurements: no budget."""
    y = np.asarray(values, dtype=np.float64)
    total = float(y.sum())
    threshold = 0.0
    if total > 0:
        u = np.sort(y)[::-1]
        excess = np.cumsum(u) - total
        last = np.flatnonzero(u - excess / np.arange(1, u.size + 1) > 0)[-1]
        threshold = excess[last] / (last + 1)
    t = np.maximum(y - threshold, 0.0)
    s = t.sum()
    return t / s if s > 0 else np.zeros(0)


def junction_tree(domain: Domain, workloads: Sequence[Workload]) -> List[Tuple[str, ...]]:
    """Maximal cliques (attributes in domain order) of a junction forest covering every
    workload and every attribute: greedy elimination on the workloads' interaction
    graph, eliminating first the attribute whose clique has the fewest cells."""
    import itertools

    neighbours = {a: set() for a in domain.names}
    for w in workloads:
        for a, b in itertools.combinations(w, 2):
            neighbours[a].add(b)
            neighbours[b].add(a)
    size = dict(zip(domain.names, domain.sizes))
    cliques, remaining = [], set(domain.names)
    while remaining:
        a = min(remaining, key=lambda x: (math.prod(size[b] for b in neighbours[x]) * size[x],
                                          domain.names.index(x)))
        clique = neighbours[a] | {a}
        cliques.append(clique)
        for b, c in itertools.combinations(neighbours[a], 2):
            neighbours[b].add(c)
            neighbours[c].add(b)
        for b in neighbours[a]:
            neighbours[b].discard(a)
        remaining.discard(a)
    maximal = [c for c in cliques if not any(c < d for d in cliques)]
    unique = {tuple(a for a in domain.names if a in c) for c in maximal}
    return sorted(unique, key=lambda c: [domain.names.index(a) for a in c])


def _standardised(table: np.ndarray) -> np.ndarray:
    """D_r^{-1/2} P D_c^{-1/2} of a two-way distribution P (normalised first): its
    singular values are 1 and the canonical correlations."""
    p = table / table.sum()
    scale = np.sqrt(np.outer(p.sum(axis=1), p.sum(axis=0)))
    return np.divide(p, scale, out=np.zeros_like(p), where=scale > 0)


def canonical_correlation(table: np.ndarray) -> float:
    """The first canonical correlation of a two-way distribution P (rows × columns): the
    second singular value of :func:`_standardised` P.  IPF on P's two one-way margins
    contracts the error by its square per sweep."""
    s = np.linalg.svd(_standardised(table), compute_uv=False)
    return float(s[1]) if s.size > 1 else 0.0


def mean_square_contingency(table: np.ndarray) -> float:
    """φ² = Σ_ij P_ij² / (P_i· P_·j) − 1 of a two-way distribution: the sum of its squared
    canonical correlations, so an upper bound on the first one's square."""
    return float(np.sum(_standardised(table) ** 2) - 1)


def rake_pair(table: np.ndarray, rows: np.ndarray, cols: np.ndarray,
              tolerance: float = 1e-10, max_steps: int = 100) -> np.ndarray:
    """The I-projection of a two-way distribution P onto {Q : Q's margins are ``rows``
    and ``cols``} (both normalised): Q_ij = P_ij·exp(α_i + β_j), found by Newton's method
    on the dual f(α, β) = Σ_ij P_ij e^{α_i+β_j} − α·rows − β·cols (gradient: Q's
    margins minus the targets; Hessian: [[diag Q_r, Q], [Qᵀ, diag Q_c]]; β's last entry
    fixed, the dual's one redundant direction; backtracking line search).  IPF reaches
    the same Q at the rate ρ² per sweep (ρ: :func:`canonical_correlation`), thousands
    of sweeps for a pair of attributes that nearly determine each other; Newton takes
    a few steps.  Rows and columns whose target is 0 are set to 0."""
    keep_r, keep_c = rows > 0, cols > 0
    base = table[np.ix_(keep_r, keep_c)]
    a, b = rows[keep_r], cols[keep_c]
    m, n = base.shape
    alpha, beta = np.zeros(m), np.zeros(n)

    def dual(al, be):
        with np.errstate(over="ignore", invalid="ignore"):
            q = base * np.exp(al[:, None] + be[None, :])
            value = float(q.sum() - al @ a - be @ b)
        return (value if math.isfinite(value) else math.inf), q

    f, q = dual(alpha, beta)
    for _ in range(max_steps):
        qr, qc = q.sum(axis=1), q.sum(axis=0)
        gradient = np.concatenate([qr - a, qc - b])
        if np.abs(gradient).max() < tolerance:
            break
        try:
            direction = np.append(-_newton_solve(q, qr, qc, gradient), 0.0)
        except np.linalg.LinAlgError:
            direction = -gradient
        slope, t = float(gradient @ direction), 1.0
        if slope > -1e-15:  # the dual's decrease is below its rounding: converged
            break
        while True:
            al, be = alpha + t * direction[:m], beta + t * direction[m:]
            new_f, new_q = dual(al, be)
            if new_f <= f + 1e-4 * t * slope or t < 1e-10:
                break
            t *= 0.5
        if not new_f <= f:
            break
        alpha, beta, f, q = al, be, new_f, new_q
    out = np.zeros_like(table)
    out[np.ix_(keep_r, keep_c)] = q
    return out


def _newton_solve(q: np.ndarray, qr: np.ndarray, qc: np.ndarray,
                  gradient: np.ndarray) -> np.ndarray:
    """x with H·x = g[:-1] for :func:`rake_pair`'s Hessian H = [[diag q_r, Q'],
    [Q'ᵀ, diag q_c']] (Q' = Q without its last column, q_c' = q_c without its last
    entry: β's last entry is fixed), by the Schur complement of the diagonal block on
    the longer side: an (n − 1) × (n − 1) or m × m solve instead of an (m + n − 1)-square
    one (a 105 × 16 pair: 15 × 15 against 120 × 120).  Raises LinAlgError where H is
    singular (a margin of Q at 0) or so near it that the step is not finite (the caller
    then takes the gradient step: a NaN step would end the raking early, and print
    numpy's "invalid value encountered in matmul")."""
    m, n = q.shape
    g_a, g_b = gradient[:m], gradient[m:-1]
    qp, dc = q[:, :-1], qc[:-1]
    if np.any(qr <= 0) or np.any(dc <= 0):
        raise np.linalg.LinAlgError("a margin of Q is 0")
    with np.errstate(all="ignore"):
        if n - 1 <= m:   # eliminate α: (diag q_c' − Q'ᵀ diag(q_r)⁻¹ Q') β = g_b − Q'ᵀ g_a / q_r
            scaled = qp / qr[:, None]
            beta = np.linalg.solve(np.diag(dc) - qp.T @ scaled, g_b - scaled.T @ g_a)
            alpha = (g_a - qp @ beta) / qr
        else:            # eliminate β: (diag q_r − Q' diag(q_c')⁻¹ Q'ᵀ) α = g_a − Q' g_b / q_c'
            scaled = qp / dc[None, :]
            alpha = np.linalg.solve(np.diag(qr) - scaled @ qp.T, g_a - scaled @ g_b)
            beta = (g_b - qp.T @ alpha) / dc
    step = np.concatenate([alpha, beta])
    if not np.isfinite(step).all():
        raise np.linalg.LinAlgError("the Newton step is not finite (H nearly singular)")
    return step


@functools.lru_cache(maxsize=16)
def _shared_estimator(kind: str, components: int, learning_rate: float):
    """One estimator object per setting and process: ``mbi``'s jit cache is keyed on
    the estimator (a static argument), so sharing it lets every run in a process with
    the same structure reuse one compiled program."""
    _, estimation, _, mop = _mbi()
    if kind == "mrf":
        return estimation.MirrorDescent()
    import optax

    return mop.MixtureOfProductsEstimator(optimizer=optax.adam(learning_rate),
                                          num_components=components, seed=0)


def junction_tree_cells(domain: Domain, workloads: Sequence[Workload]) -> int:
    """Cells of the junction forest over the workloads (:func:`junction_tree`)."""
    return int(sum(domain.size(c) for c in junction_tree(domain, workloads)))


def _view_layout(table_attrs, attrs, sizes):
    """How :func:`_axes_view` lays out a factor on ``attrs`` against a table on
    ``table_attrs``: its axes' sizes, their order in the table, the broadcast shape."""
    order = sorted(range(len(attrs)), key=lambda k: table_attrs.index(attrs[k]))
    shape = tuple(sizes[a] if a in attrs else 1 for a in table_attrs)
    if order == sorted(order):   # already in the table's order: one reshape
        return None, None, shape
    return tuple(sizes[a] for a in attrs), tuple(order), shape


def _axes_view(factor, layout):
    """``factor`` (axes ``attrs``, a subset of ``table_attrs``) reshaped to broadcast
    against a table with axes ``table_attrs`` (``layout``: :func:`_view_layout`)."""
    split, order, shape = layout
    if order is None:
        return factor.reshape(shape)
    return factor.reshape(split).transpose(order).reshape(shape)


class _LazyPropagation:
    """IPF steps on a junction forest with messages passed only where the next step
    needs them (the Hugin architecture: Jensen, Lauritzen and Olesen 1990).

    The distribution is p(x) = Π_C μ_C(x_C) / Π_S φ_S(x_S) over the forest's cliques C
    and separators S, with the separators' tables φ_S stored.  An IPF step on a
    workload W ⊆ H multiplies μ_H by m̂_W / μ_W (and normalises): p changes exactly as
    p(x) ← p(x)·m̂_W(x_W)/p_W(x_W) while every other table stays as it was.  Passing a
    message from clique A to its neighbour B over S sets μ_B ← μ_B · μ_A(S)/φ_S and
    φ_S ← μ_A(S), which leaves p unchanged.  So the product always represents p, and a
    clique's table is p's marginal once every change has reached it: before a step on
    H only the path from the clique of the last step (which every earlier change has
    reached) to H is passed, not the whole forest; :meth:`finish` passes outward from
    the last step's clique to every clique.  The same fit as propagating every step
    through the whole forest, in a fraction of the message passes.

    Where several cliques hold W, the step is the same change of p in any of them, so
    :meth:`nearest` takes the one fewest passes from the freshest clique (then the
    smallest table): one-way margins and workloads on attributes most cliques share
    (age, religion, …) cost no message at all."""

    def __init__(self, model: "JunctionTreeModel", tree, component, layouts: Dict):
        self.model, self.tree, self.component = model, tree, component
        self.sizes = dict(zip(model.domain.names, model.domain.sizes))
        self.separators = {}
        for a, b in tree.edges:
            sep = tuple(x for x in b if x in a)  # domain order, as every clique
            self.separators[frozenset((a, b))] = (sep, marginal_table(model.marginals[a], a,
                                                                      sep))
        self.fresh: Dict = {}  # per tree of the forest: the clique every change reached
        self._paths: Dict = {}
        self._distance: Dict = {}
        # (table's attributes, factor's) → _view_layout; the fitter's, shared by its fits
        self._layouts = layouts

    def _view(self, table_attrs, attrs, factor):
        key = (table_attrs, attrs)
        if key not in self._layouts:
            self._layouts[key] = _view_layout(table_attrs, attrs, self.sizes)
        return _axes_view(factor, self._layouts[key])

    def _pass(self, source, target) -> None:
        key = frozenset((source, target))
        sep, old = self.separators[key]
        marginals = self.model.marginals
        new = marginal_table(marginals[source], source, sep)
        update = np.divide(new, old, out=np.zeros(new.shape, new.dtype), where=old > 0)
        marginals[target] *= self._view(target, sep, update)
        self.separators[key] = (sep, new)

    def nearest(self, homes) -> Tuple[str, ...]:
        """The clique among ``homes`` (cliques of one tree) that the fewest passes make
        p's marginal, then the smallest."""
        import networkx as nx

        fresh = self.fresh.get(self.component[homes[0]])
        if fresh is None:  # nothing changed yet: every clique is p's marginal
            return min(homes, key=lambda h: self.model.marginals[h].size)
        if fresh not in self._distance:
            self._distance[fresh] = nx.single_source_shortest_path_length(self.tree, fresh)
        distance = self._distance[fresh]
        return min(homes, key=lambda h: (distance[h], self.model.marginals[h].size))

    def reach(self, home) -> None:
        """Make μ_home p's marginal (pass along the path from the freshest clique)."""
        import networkx as nx

        tree_id = self.component[home]
        fresh = self.fresh.get(tree_id, home)
        if fresh != home:
            if (fresh, home) not in self._paths:
                self._paths[(fresh, home)] = nx.shortest_path(self.tree, fresh, home)
            path = self._paths[(fresh, home)]
            for source, target in zip(path, path[1:]):
                self._pass(source, target)
        self.fresh[tree_id] = home

    def step(self, home, workload, ratio, current) -> None:
        """Multiply p(x) by ``ratio``(x_W) and normalise (W ⊆ ``home``; μ_home must be
        p's marginal, ``current`` its marginal on W: the new total Σ_w ratio(w)·μ_W(w)
        is computed on the marginal, not on the clique's table)."""
        s = float(np.dot(ratio, current))
        if s > 0:
            ratio = ratio / s
        # in place: the fit's clique tables are its own (``current`` may be a view of
        # μ_home, and is not read after this)
        self.model.marginals[home] *= self._view(home, workload, ratio)

    def finish(self) -> None:
        """Pass every change to every clique: each table p's marginal again."""
        import networkx as nx

        for fresh in self.fresh.values():
            for source, target in nx.bfs_edges(self.tree, fresh):
                self._pass(source, target)
        self.fresh = {}


class Fitter:
    """A_Dataset for one domain and one ordered list of workloads (fixed per run).

    ``fit(measurements, total, warm_start)`` returns a model of ``total`` records that
    complies with ``measurements`` (a list of :class:`Measurement`, workloads among the
    fitter's), initialised at ``warm_start`` (a :class:`FittedModel`, or None for the
    uniform start).  Deterministic: no randomness is used.
    """

    def __init__(self, domain: Domain, workloads: Sequence[Workload], method: str = "pgm",
                 iterations: int = 100, pgm_model: str = "auto", components: int = 32,
                 max_cells: int = DEFAULT_MAX_CELLS, anchor_weight: float = 1.0,
                 learning_rate: float = 0.05):
        if method not in FIT_METHODS:
            raise InputError(f"fit must be one of {FIT_METHODS}, got {method!r}")
        if pgm_model not in PGM_MODELS:
            raise InputError(f"pgm_model must be one of {PGM_MODELS}, got {pgm_model!r}")
        if not isinstance(iterations, (int, np.integer)) or iterations < 1:
            raise InputError(f"fit iterations must be a positive integer, got {iterations!r}")
        self.domain = domain
        self.workloads = [tuple(w) for w in workloads]
        if not self.workloads:
            raise InputError("the fit needs at least one workload")
        self.index = {w: i for i, w in enumerate(self.workloads)}
        self.method = method
        self.iterations = int(iterations)
        self.components = int(components)
        self.anchor_weight = float(anchor_weight)
        self.learning_rate = float(learning_rate)
        self.max_cells = int(max_cells)
        self._trees: Dict = {}
        self._layouts: Dict = {}  # the IPF steps' factor layouts (_LazyPropagation)
        if method == "ipf":
            self.model_kind = "junction-tree"
        elif method == "mw":
            cells = domain.size()
            if cells > self.max_cells:
                raise InputError(
                    f"--fit mw keeps a distribution over all of the domain's {cells:.3g} "
                    f"cells, above the limit of {self.max_cells}; use --fit pgm")
            self.model_kind = "dense"
        elif pgm_model in ("auto", "mrf"):
            self.model_kind = "mrf"
        else:
            self.model_kind = "mixture-of-products"
        self._fits_cache: Dict = {}
        self._estimator = None

    # -- public ---------------------------------------------------------------------------
    def start(self, total: float = 0.0) -> FittedModel:
        """The data-independent start: the uniform distribution with ``total`` records."""
        return UniformModel(self.domain, total)

    def fit(self, measurements: Sequence[Measurement], total: float,
            warm_start: Optional[FittedModel] = None, steer: bool = False,
            drop: Sequence[Workload] = ()) -> FittedModel:
        """``steer``: the fit only steers the next selection and is not released (the
        k − 1 first iterates of a period whose release is the last, h_{t,l}, l < k):
        the ``ipf`` fit then stops at ``STEER_TOLERANCE`` times its tolerance.
        ``drop``: workloads of the warm start's structure that leave it (``ipf``; one
        measured in ``measurements`` stays): the model keeps, of their dependence, only
        what the remaining structure implies."""
        total = max(float(total), 0.0)
        warm = warm_start if warm_start is not None else self.start(total)
        measurements = [m for m in measurements]
        for m in measurements:
            if tuple(m.workload) not in self.index and not self._is_margin(m.workload):
                raise InputError(f"measurement of unknown workload {m.workload}")
            if np.asarray(m.values).shape != (_cells(self.domain, m.workload),):
                raise InputError(f"measurement of {m.workload} has the wrong shape")
        if not measurements or total <= 0:
            return warm.scaled(total)
        if self.model_kind == "dense":
            return self._fit_mw(measurements, total, warm)
        if self.model_kind == "junction-tree":
            return self._fit_ipf(measurements, total, warm, steer, drop)
        return self._fit_mbi(measurements, total, warm)

    def _is_margin(self, workload) -> bool:
        """A measurement the ``ipf`` and ``mw`` fits also take: a marginal on attributes
        that one of the fitter's workloads holds (e.g. a pooled one-way margin)."""
        return (self.model_kind in ("junction-tree", "dense") and len(set(workload)) ==
                len(workload) and any(set(workload) <= set(w) for w in self.workloads))

    # -- MW ---------------------------------------------------------------------------------
    def _fit_mw(self, measurements, total, warm):
        p = _as_dense(warm).probs.copy()
        targets, cells = [], []
        for m in measurements:
            t = nonnegative_target(m.values)
            if t.size == 0:
                continue
            pos = self.domain.index(m.workload)
            grids = np.indices(self.domain.sizes, sparse=True)
            shape = tuple(self.domain.sizes[i] for i in pos)
            flat = np.ravel_multi_index(tuple(grids[i] for i in pos), shape)
            cells.append(np.broadcast_to(flat, self.domain.sizes).reshape(-1))
            targets.append(t)
        flat_p = p.reshape(-1)
        for _ in range(self.iterations):
            for cell, target in zip(cells, targets):
                current = np.bincount(cell, weights=flat_p, minlength=target.size)
                ratio = np.divide(target, current, out=np.zeros_like(target),
                                  where=current > 0)
                flat_p = flat_p * ratio[cell]
                s = flat_p.sum()
                flat_p = flat_p / s if s > 0 else np.full(flat_p.size, 1.0 / flat_p.size)
        return DenseModel(self.domain, total, flat_p)

    # -- mbi --------------------------------------------------------------------------------
    def _estimator_for(self):
        if self._estimator is None:
            self._estimator = _shared_estimator(self.model_kind, self.components,
                                                self.learning_rate)
        return self._estimator

    def structure(self, warm: Optional[FittedModel]) -> List[Workload]:
        """The workloads a warm-started ``mrf`` fit keeps (those the warm start was fitted
        to), in the fitter's order; the ``mixture`` fit always uses all of them."""
        if self.model_kind not in ("mrf", "junction-tree"):
            return list(self.workloads)
        last = warm.components[-1] if isinstance(warm, MixtureModel) else warm
        kept = set(last.measured) if isinstance(last, MRFModel) else set()
        return [w for w in self.workloads if w in kept]

    def fits(self, structure: Sequence[Workload], workload: Workload,
             limit: Optional[int] = None) -> bool:
        """Whether the junction tree of ``structure`` plus ``workload`` has at most
        ``limit`` cells (default ``max_cells``; AIM's model-size control, McKenna et al.
        2022 §4.3: only such workloads may be selected).  Always true for the other
        model kinds."""
        if self.model_kind not in ("mrf", "junction-tree") or workload in structure:
            return True
        if self.model_kind == "junction-tree" and any(
                set(workload) <= set(c) for c in self._tree(structure)):
            return True  # already inside a clique: the tree does not grow
        key = (tuple(structure), tuple(workload))
        if key not in self._fits_cache:
            if len(self._fits_cache) >= CACHE_ENTRIES:
                self._fits_cache.clear()
            self._fits_cache[key] = junction_tree_cells(self.domain,
                                                        list(structure) + [tuple(workload)])
        return self._fits_cache[key] <= (self.max_cells if limit is None else limit)

    # -- IPF on a junction tree ------------------------------------------------------------
    def _tree(self, structure):
        key = tuple(structure)
        if key not in self._trees:
            if len(self._trees) >= CACHE_ENTRIES:
                self._trees.clear()
            self._trees[key] = junction_tree(self.domain, structure)
        return self._trees[key]

    def _fit_ipf(self, measurements, total, warm, steer=False, drop=()):
        """The MW fit (exact entropic step = iterative proportional fitting) restricted to
        decomposable models: the warm start is expressed on the junction forest of the
        structure (its measured workloads plus these), then each measured workload W ⊆ C
        rescales μ_C by m̂_W / μ_W, which is the IPF step on the whole distribution
        p(x) ← p(x)·m̂_W(x_W)/p_W(x_W); the change reaches the other cliques by
        messages (μ_D ← μ_D · μ'_S / φ_S), passed only where the next step needs them
        and to every clique at the end (:class:`_LazyPropagation`).  Cycles
        ``iterations`` times over the measurements in their order (the pooled margins
        last, so that each sweep ends on them: they pool every selected workload's
        measurement: ordering the steps by clique to save messages would fit the pooled
        margins first and cost accuracy), until every measured marginal is
        matched to the tolerance or the largest mismatch stops changing by more than
        that (inconsistent noisy measurements: IPF's limit cycle).  The tolerance is
        ``IPF_TOLERANCE`` of the total or ``RECORD_TOLERANCE`` records, whichever is
        larger: a model of 50 records (the increment model of a period's batch) is not
        fitted to 5·10⁻⁴ of a record, which sparse targets (most cells of a batch's
        two-way table are empty, and IPF approaches zeros sublinearly) make cost up to
        the ``iterations`` cap; released tables are whole records.  A fit that only
        steers the next selection (``steer``) stops at ``STEER_TOLERANCE`` times that
        (10⁻⁴ of the total: the utilities it feeds compare workloads' errors of tens of
        records; the next fit starts from it and the period's last fit, the one released,
        is matched to the full tolerance).
        Marginals of fewer attributes than a workload (pooled margins) take part in the
        cycle but not in the structure; two one-way margins of attributes that nearly
        determine each other are fitted as one block step after ``PAIR_AFTER`` sweeps
        (:meth:`_pair_dependent_margins`)."""
        given = {tuple(m.workload) for m in measurements}
        kept = set(self.structure(warm)) - {tuple(w) for w in drop}
        structure = [w for w in self.workloads if w in given or w in kept]
        cliques = self._tree(structure)
        last = warm.components[-1] if isinstance(warm, MixtureModel) else warm
        if isinstance(last, MRFModel) and last.cliques == cliques and warm is last:
            margs = {c: last.marginals[c].copy() for c in cliques}
        else:
            margs = {c: warm.probabilities(c).reshape(
                [self.domain.sizes[i] for i in self.domain.index(c)]) for c in cliques}
        # Full support, so that the multiplicative steps can put mass where the warm start
        # has none (mixing consistent clique marginals with the uniform ones keeps them
        # consistent, and consistent marginals on a junction tree are always realisable).
        margs = {c: (1 - SUPPORT_FLOOR) * m + SUPPORT_FLOOR / m.size for c, m in margs.items()}
        model = JunctionTreeModel(self.domain, total, cliques, margs, structure)
        forest = model._junction_forest()
        propagation = _LazyPropagation(model, forest["tree"], forest["component"],
                                       self._layouts)
        targets = []
        for m in measurements:
            t = nonnegative_target(m.values)
            if t.size:
                homes = [c for c in cliques if set(m.workload) <= set(c)]
                targets.append((tuple(m.workload), homes, t, None))
        tolerance = max(IPF_TOLERANCE, RECORD_TOLERANCE / total) * (STEER_TOLERANCE
                                                                     if steer else 1)
        previous, errors = math.inf, []
        for sweep in range(self.iterations):
            worst, last, errors = 0.0, errors, []
            for w, homes, t, margins in targets:
                home = propagation.nearest(homes)
                propagation.reach(home)
                current = _project_dense(model.marginals[home], list(home), w)
                if margins is None:
                    errors.append(float(np.abs(current - t).max()))
                else:  # a dependent pair: one step onto both one-way margins
                    table = current.reshape(margins[0].size, margins[1].size)
                    errors.append(max(float(np.abs(table.sum(axis=1) - margins[0]).max()),
                                      float(np.abs(table.sum(axis=0) - margins[1]).max())))
                    t = rake_pair(table, *margins).reshape(-1)
                worst = max(worst, errors[-1])
                # np.zeros, not zeros_like: the cheaper call on these small arrays
                ratio = np.divide(t, current, out=np.zeros(t.shape, t.dtype),
                                  where=current > 0)
                propagation.step(home, w, ratio, current)
            # matched, or (inconsistent noisy targets) settled on IPF's limit cycle
            if worst < tolerance or abs(previous - worst) < tolerance:
                break
            previous = worst
            if sweep == PAIR_AFTER - 1:
                targets = self._pair_dependent_margins(targets, model.marginals, last, errors,
                                                       tolerance)
        propagation.finish()
        model._cache.clear()
        return model

    def _pair_dependent_margins(self, targets, tables, before, after, tolerance):
        """Pairs of slow one-way targets (pooled margins) whose attributes share a clique
        and nearly determine each other (first canonical correlation above
        ``PAIR_CORRELATION`` in the current clique tables; e.g. two survey questions
        skipped by the same respondents) become one target: the IPF step onto both
        margins at once (:func:`rake_pair`, the exact I-projection of their two-way
        marginal), in the place of the first.  Alone, their steps undo each other and IPF
        crawls at ρ² per sweep (0.988 for CCES's angryracism and whiteadv, whose missing
        values coincide: 87 sweeps for the first fit of a period instead of 5).  Slow:
        still off by more than the fit's tolerance after ``PAIR_AFTER`` sweeps and not
        halved by the last (``before``, ``after``: each target's largest error in the
        last two sweeps), so that fits already converging pay nothing.  Pairs are taken
        by decreasing ρ, each attribute in at most one."""
        sizes = dict(zip(self.domain.names, self.domain.sizes))
        ones = [k for k, target in enumerate(targets) if len(target[0]) == 1
                and after[k] > tolerance and after[k] > before[k] / 2]
        scored = []
        for x, i in enumerate(ones):
            a = targets[i][0][0]
            for j in ones[x + 1:]:
                b = targets[j][0][0]
                if b == a:  # a one-way workload and the pooled margin of its attribute
                    continue
                common = [c for c in targets[i][1] if b in c]
                if not common:
                    continue
                home = min(common, key=lambda c: tables[c].size)
                pair = tuple(v for v in home if v in (a, b))
                table = _project_dense(tables[home], list(home), pair).reshape(
                    sizes[pair[0]], sizes[pair[1]])
                if mean_square_contingency(table) <= PAIR_CORRELATION ** 2:
                    continue  # ρ² ≤ φ²: no SVD needed (most pairs)
                rho = canonical_correlation(table)
                if rho > PAIR_CORRELATION:
                    scored.append((-rho, i, j, pair))
        if not scored:
            return targets
        out, taken = list(targets), set()
        for _, i, j, pair in sorted(scored):
            if i in taken or j in taken:
                continue
            taken |= {i, j}
            by_attribute = {targets[i][0][0]: targets[i][2], targets[j][0][0]: targets[j][2]}
            homes = [c for c in targets[i][1] if pair[1] in c and pair[0] in c]
            out[i] = (pair, homes, None, (by_attribute[pair[0]], by_attribute[pair[1]]))
            out[j] = None
        return [target for target in out if target is not None]

    def _linear_measurements(self, measurements, total, warm):
        """The structure's workloads in the fitter's order: measured ones with their
        noise, the others anchored at the warm start's answers (normalised scale)."""
        mbi, *_ = _mbi()
        given = {tuple(m.workload): m for m in measurements}
        structure = self.structure(warm)
        structure = [w for w in self.workloads if w in given or w in structure]
        worst = max(float(m.stddev) for m in measurements)
        anchor_sd = worst / math.sqrt(self.anchor_weight) if self.anchor_weight > 0 else 1e12
        out = []
        for w in structure:
            if w in given:
                m = given[w]
                values = np.asarray(m.values, dtype=np.float64) / total
                sd = max(float(m.stddev), 1e-9) / total
            else:
                values = warm.probabilities(w)
                sd = anchor_sd / total
            out.append(mbi.LinearMeasurement(values, w, stddev=sd))
        return structure, out

    def _fit_mbi(self, measurements, total, warm):
        mbi, estimation, marginal_oracles, mop = _mbi()
        dom = _mbi_domain(self.domain)
        structure, lms = self._linear_measurements(measurements, total, warm)
        estimator = self._estimator_for()
        last = warm.components[-1] if isinstance(warm, MixtureModel) else warm
        if self.model_kind == "mrf":
            warm_start = last.mbi_potentials() if isinstance(last, MRFModel) else None
            model = estimator.estimate(dom, lms, known_total=1.0, iters=self.iterations,
                                       warm_start=warm_start)
            cliques = [tuple(c) for c in model.potentials.cliques]
            pots = {c: np.asarray(model.potentials[c].datavector(flatten=False))
                    for c in cliques}
            margs = {c: np.asarray(model.marginals.project(c).datavector(flatten=False))
                     for c in cliques}
            return MRFModel(self.domain, total, cliques, pots, margs, structure)
        warm_start = None
        if isinstance(last, MixtureOfProductsModel) and last.components == self.components:
            import jax.numpy as jnp

            warm_start = mop.MixtureOfProducts(
                {a: jnp.asarray(v) for a, v in last.logits.items()}, dom, 1.0)
        model = estimator.estimate(dom, lms, known_total=1.0, iters=self.iterations,
                                   warm_start=warm_start)
        logits = {a: np.asarray(model._logits[a]) for a in self.domain.names}
        return MixtureOfProductsModel(self.domain, total, logits)

