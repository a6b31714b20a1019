"""PrivHP: one-pass, bounded-memory private synthetic data (Holland, Camtepe, Thapa and
Xue, SIGMOD 2025), as restated in ``shared/papers/README.md`` ("PrivHP, restated").

* **Algorithm 1 (initialise and pass).** A complete binary tree of exact counters over
  levels 0..L*, L* = ⌊log2 prune_k⌋, and one count-min sketch (j × w) per level
  L*+1..r, fed the level-ℓ cell θ of every point (:class:`PrivHPAccumulator`).  The
  accumulator is the *exact* state: integers, linear in the input, so partial
  accumulators over parts of the stream merge by addition (a Beam CombineFn).  Its size
  is fixed by (prune_k, r, j, w); it never depends on the number of points n.
* **Noise (Lemma 2 / Theorem 2).** Added once, at release (:func:`release`): each
  counter of tree level ℓ ≤ L* gets discrete Laplace noise of scale Δ_ℓ/ε_ℓ with
  Δ_ℓ = 1 (one point changes one counter per level under add/remove of one point) or
  2 (replace one point: one counter down, one up); each cell of sketch ℓ > L* gets
  scale Δ_ℓ/ε_ℓ with Δ_ℓ = j (one point changes one cell in each of the j rows) or 2j
  (replace).  Each level is ε_ℓ-DP; by basic composition over levels 0..r the whole
  release is ε-DP with ε = Σ_ℓ ε_ℓ.  Initialising counters with noise (the paper) and
  adding the noise after the pass (here) give the same distribution.
* **Algorithm 2 (grow)** and **Algorithm 3 (consistency, with both corrections)** are
  deterministic post-processing of the noisy counters: :func:`grow`,
  :func:`make_consistent`.
* **Sampling** (§5): a root-to-leaf walk by counts and a uniform point in the leaf's
  cell (:func:`sample_unit`), also post-processing.
* **Utility** (Theorem 3): :func:`theorem3_w1_bound`, the expected-W1 bound of a release
  with this configuration's noise, stated in the one-shot manifest.
* **Budget split** (Lemma 5, after He et al. 2023): the default ``sqrt`` minimises
  Σ_ℓ N_ℓ·diam_ℓ/ε_ℓ subject to Σ ε_ℓ = ε, giving ε_ℓ ∝ √(N_ℓ·diam_ℓ), N_ℓ the number
  of nodes released at level ℓ; ``sqrt-sensitivity`` also weighs the noise scale's
  sensitivity (ε_ℓ ∝ √(N_ℓ·Δ_ℓ·diam_ℓ)); ``uniform`` gives ε/(r+1) to every level; or
  explicit per-level values.

Memory (:attr:`PrivHPConfig.memory_counters`) is the number of counters held during the
pass.  A level is stored *exactly* (one counter per cell, 2^ℓ counters) when that is no
larger than a sketch (j·w cells), i.e. for ℓ ≤ L_e = max(L*, ⌊log2(j·w)⌋) (capped at r),
and as a count-min sketch below: 2^(L_e+1) − 1 exact counters plus (r − L_e)·j·w sketch
cells, never more than the full tree's 2^(r+1) − 1 and non-decreasing in prune_k at a
given w.  Levels L* < ℓ ≤ L_e are still *grown* as in Algorithm 2 (top-k hot nodes,
children read from the level's noisy exact counters instead of a sketch estimate): the
released tree is the paper's; only the storage and the sensitivity (1 instead of j)
change.  The unpruned full tree of depth r is the special case prune_k ≥ 2^r (L* = r).

Memory budget (``memory`` = M counters, :func:`sketch_width_for`): w is the largest
width whose structure fits in M (the full tree if it fits), capped so that a smaller
prune_k never uses more counters than a larger one at the same M.  What changes in the
utility bound (Theorem 3: noise + approximation + resolution terms): the proof of
Corollary 1 takes w = Θ(k) so that the count-min error of a level (Lemma 4: the ℓ1 norm
of the level's tail beyond its top-w cells, divided by w, decaying in j) is of the order
of the pruning error; with w fixed by M instead, the approximation term of every sketch
level is that Lemma 4 bound at this w (smaller than the paper's when w > k, larger when
w < k), exact levels have no approximation term at all, and their noise term uses
Δ_ℓ = 1 instead of j.  The privacy calibration (Δ_ℓ/ε_ℓ per level, Σ_ℓ ε_ℓ = ε) is exact
for any w: the budget only chooses public parameters.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms import hierarchy
from continual_synth.mechanisms.accounting import check_neighbor, laplace_scale
from continual_synth.mechanisms.errors import (ParameterError, format_bytes, privacy_budget,
                                               whole_number)
from continual_synth.mechanisms.samplers import discrete_laplace_variance
from continual_synth.mechanisms.sketch import CountMinSketch, sketch_sensitivity, splitmix64
from continual_synth.mechanisms.synthesizer import emission_seed as draw_emission_seed

__all__ = ["BUDGET_SPLITS", "COUNTER_BYTES", "MAX_COUNTERS", "PrivHPConfig", "exact_depth",
           "structure_counters", "sketch_width_for", "default_depth", "PrivHPAccumulator",
           "accumulate", "make_consistent", "least_squares_tree", "PrivHPTree", "grow",
           "W1_BOUND_THEOREM", "W1_BOUND_NOTE", "released_leaf_mass",
           "shallowest_leaf_level", "theorem3_w1_bound", "w1_bound_fields", "PrivHPRelease",
           "release_manifest", "release", "sample_unit", "shard_sizes", "sample_shard",
           "synthesize"]

BUDGET_SPLITS = ("sqrt", "sqrt-sensitivity", "uniform")


# The pass holds memory_counters int64 counters (tree + sketches); larger configurations
# are refused before any work.
COUNTER_BYTES = 8
MAX_COUNTERS = 2 ** 27


@dataclass(frozen=True)
class PrivHPConfig:
    """Public parameters of a PrivHP release."""

    epsilon: float
    dims: int
    prune_k: int
    depth: int
    sketch_width: int = 1024
    sketch_depth: int = 3
    neighbor: str = "add-remove"
    budget_split: str = "sqrt"
    level_epsilons: Optional[Tuple[float, ...]] = None
    hash_seed: int = 0
    memory: Optional[int] = None

    def __post_init__(self):
        check_neighbor(self.neighbor)
        object.__setattr__(self, "epsilon", privacy_budget("epsilon", self.epsilon))
        whole_number("dims", self.dims)
        whole_number("prune_k", self.prune_k)
        depth = whole_number("depth", self.depth)
        if depth > hierarchy.MAX_DEPTH:
            raise ParameterError("depth", f"must be in 1..{hierarchy.MAX_DEPTH}, got {depth}")
        whole_number("sketch_depth", self.sketch_depth)
        if self.memory is not None:
            budget = whole_number("memory", self.memory)
            if budget > MAX_COUNTERS:
                raise ParameterError("memory", f"{budget} counters "
                                     f"({format_bytes(COUNTER_BYTES * budget)}) exceed the "
                                     f"{MAX_COUNTERS} that fit")
            object.__setattr__(self, "sketch_width", sketch_width_for(
                budget, self.prune_k, depth, self.sketch_depth))
        whole_number("sketch_width", self.sketch_width)
        if self.sketch_width * self.sketch_depth > MAX_COUNTERS:  # even when levels are exact
            raise ParameterError("sketch_width", (
                f"{self.sketch_width} × {self.sketch_depth} rows = "
                f"{format_bytes(COUNTER_BYTES * self.sketch_width * self.sketch_depth)} per "
                f"sketch; at most {MAX_COUNTERS} counters "
                f"({format_bytes(COUNTER_BYTES * MAX_COUNTERS)}) fit"))
        whole_number("hash_seed", self.hash_seed, minimum=0)
        if self.budget_split not in BUDGET_SPLITS:
            raise ValueError(f"budget split must be one of {BUDGET_SPLITS}")
        if self.level_epsilons is not None:
            values = tuple(privacy_budget("level_epsilons", e) for e in self.level_epsilons)
            if len(values) != self.depth + 1:
                raise ParameterError("level_epsilons", f"need one value per level "
                                     f"0..{self.depth} ({self.depth + 1} values), "
                                     f"got {len(values)}")
            if abs(sum(values) - self.epsilon) > 1e-6 * self.epsilon:
                raise ParameterError("level_epsilons", f"sum to {sum(values):.10g}, not to "
                                     f"epsilon = {self.epsilon:.10g}")
            object.__setattr__(self, "level_epsilons", values)
        if self.memory_counters > MAX_COUNTERS:
            option = "prune_k" if self.tree_counters > self.sketch_counters else "sketch_width"
            raise ParameterError(option, (
                f"{getattr(self, option)} needs {self.memory_counters:.3g} counters "
                f"({self.tree_counters:.3g} in the complete tree, {self.sketch_counters:.3g} "
                f"in the sketches) = {format_bytes(COUNTER_BYTES * self.memory_counters)}; at "
                f"most {MAX_COUNTERS} counters ({format_bytes(COUNTER_BYTES * MAX_COUNTERS)}) "
                f"fit"))

    # ------------------------------------------------------------------ structure
    @property
    def complete_depth(self) -> int:
        """L* = ⌊log2 prune_k⌋ (capped at r): the levels kept complete with exact counters."""
        return min(int(math.floor(math.log2(self.prune_k))), self.depth)

    @property
    def exact_depth(self) -> int:
        """L_e: levels 0..L_e hold exact counters — the complete levels 0..L*, and every
        deeper level whose 2^ℓ cells are no more than a sketch's j·w."""
        return exact_depth(self.complete_depth, self.depth, self.sketch_depth,
                           self.sketch_width)

    @property
    def sketch_levels(self) -> range:
        return range(self.exact_depth + 1, self.depth + 1)

    @property
    def is_full_tree(self) -> bool:
        return self.complete_depth == self.depth

    def nodes_released(self, level: int) -> int:
        """N_ℓ: nodes of level ℓ in the released tree (2^ℓ up to L*, then 2·min(k, N_{ℓ−1}))."""
        if level <= self.complete_depth:
            return 2 ** level
        return 2 * min(self.prune_k, self.nodes_released(level - 1))

    def level_kind(self, level: int) -> str:
        """``tree`` (complete, ℓ ≤ L*), ``exact`` (exact counters, grown; L* < ℓ ≤ L_e)
        or ``sketch``."""
        if level <= self.complete_depth:
            return "tree"
        return "exact" if level <= self.exact_depth else "sketch"

    def sensitivity(self, level: int) -> int:
        """L1 sensitivity of level ℓ's counters: 1 / 2 (exact level, add-remove / replace),
        j / 2j (sketch level)."""
        if level <= self.exact_depth:
            return 1 if self.neighbor == "add-remove" else 2
        return sketch_sensitivity(self.sketch_depth, self.neighbor)

    def epsilons(self) -> np.ndarray:
        """ε_0..ε_r, summing to ε (basic composition)."""
        if self.level_epsilons is not None:
            values = np.asarray(self.level_epsilons, dtype=np.float64)
            return values * (self.epsilon / values.sum())
        levels = range(self.depth + 1)
        if self.budget_split == "uniform":
            weights = np.ones(self.depth + 1)
        else:
            weights = np.array([self.nodes_released(l) * hierarchy.diameter(l, self.dims)
                                * (self.sensitivity(l) if self.budget_split
                                   == "sqrt-sensitivity" else 1.0) for l in levels])
            weights = np.sqrt(weights)
        return self.epsilon * weights / weights.sum()

    def noise_scales(self) -> np.ndarray:
        """Discrete Laplace scale of each level's counters: Δ_ℓ / ε_ℓ."""
        eps = self.epsilons()
        return np.array([laplace_scale(self.sensitivity(l), eps[l])
                         for l in range(self.depth + 1)])

    @property
    def tree_counters(self) -> int:
        """Exact counters: the tree of levels 0..L_e."""
        return 2 ** (self.exact_depth + 1) - 1

    @property
    def sketch_counters(self) -> int:
        return len(self.sketch_levels) * self.sketch_depth * self.sketch_width

    @property
    def memory_counters(self) -> int:
        """Counters held during the pass (exact tree + sketches); independent of n."""
        return self.tree_counters + self.sketch_counters

    @property
    def full_tree_counters(self) -> int:
        """Counters of the plain (unpruned) tree of the same depth: 2^(r+1) − 1."""
        return 2 ** (self.depth + 1) - 1

    def level_hash_seed(self, level: int) -> int:
        """Public hash seed of sketch ``level`` (independent hashes per level)."""
        return int(splitmix64(np.uint64(self.hash_seed & 0xFFFFFFFFFFFFFFFF)
                              ^ splitmix64(np.uint64(level + 101))))

    def sketch(self, level: int, table: Optional[np.ndarray] = None) -> CountMinSketch:
        return CountMinSketch(self.sketch_width, self.sketch_depth,
                              self.level_hash_seed(level), table)

    def to_dict(self) -> Dict:
        out = asdict(self)
        out["level_epsilons"] = None if self.level_epsilons is None else list(
            self.level_epsilons)
        return out

    def accounting(self) -> Dict:
        """What a manifest says about the privacy of a release with this configuration."""
        eps = self.epsilons()
        meaning = ("datasets differ by adding or removing one point"
                   if self.neighbor == "add-remove" else
                   "datasets differ by replacing one point by another (sensitivities doubled)")
        return {
            "epsilon": self.epsilon,
            "epsilon_spent": float(eps.sum()),
            "privacy_statement": (f"{float(eps.sum()):.6g}-DP (pure, of {self.epsilon:.6g}) "
                                  f"where {meaning}; public, not protected: the columns "
                                  f"and their bounds (inputs the user gives)"),
            "composition": "basic (pure ε-DP): ε = Σ_ℓ ε_ℓ over levels 0..r",
            "neighbor": self.neighbor,
            "neighbor_meaning": meaning,
            "budget_split": ("explicit" if self.level_epsilons is not None
                             else self.budget_split),
            "levels": [{"level": l,
                        "kind": self.level_kind(l),
                        "epsilon": float(eps[l]),
                        "l1_sensitivity": self.sensitivity(l),
                        "noise": "discrete_laplace",
                        "noise_scale": float(self.sensitivity(l) / eps[l]),
                        "nodes_released": self.nodes_released(l)}
                       for l in range(self.depth + 1)],
        }


def exact_depth(complete_depth: int, depth: int, sketch_depth: int, sketch_width: int) -> int:
    """L_e = min(r, max(L*, ⌊log2(j·w)⌋)): the deepest level stored exactly."""
    return min(depth, max(complete_depth, (sketch_depth * sketch_width).bit_length() - 1))


def structure_counters(complete_depth: int, depth: int, sketch_depth: int,
                       sketch_width: int) -> int:
    """Counters of the structure: 2^(L_e+1) − 1 exact + (r − L_e)·j·w sketch cells."""
    le = exact_depth(complete_depth, depth, sketch_depth, sketch_width)
    return 2 ** (le + 1) - 1 + (depth - le) * sketch_depth * sketch_width


def _widest(budget: int, complete_depth: int, depth: int, sketch_depth: int
            ) -> Optional[int]:
    """The largest w whose structure fits in ``budget`` counters (None if w = 1 does not);
    beyond w = ⌈2^r / j⌉ every level is exact and the count no longer changes."""
    def fits(w):
        return structure_counters(complete_depth, depth, sketch_depth, w) <= budget
    low, high = 1, -(-2 ** depth // sketch_depth)
    if not fits(low):
        return None
    if fits(high):
        return high
    while high - low > 1:  # fits(low), not fits(high); the count is monotone in w
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def sketch_width_for(budget: int, prune_k: int, depth: int, sketch_depth: int) -> int:
    """The sketch width w of a memory budget of ``budget`` counters.

    For L = r, r − 1, …, L* = ⌊log2 prune_k⌋ in turn, w_L is the widest width whose
    structure fits in min(budget, the counters used at L + 1), so the counters used are
    ≤ budget and never larger for a smaller prune_k (memory is monotone in prune_k; the
    cap costs at most (r − L)·j counters of rounding).  Exact levels where they are
    smaller than a sketch make the count ≤ the full tree's 2^(r+1) − 1 for every w."""
    lstar = min(int(math.floor(math.log2(prune_k))), depth)
    cap, width = budget, None
    for level in range(depth, lstar - 1, -1):
        width = _widest(cap, level, depth, sketch_depth)
        if width is not None:
            cap = structure_counters(level, depth, sketch_depth, width)
    if width is None:
        need = structure_counters(lstar, depth, sketch_depth, 1)
        raise ParameterError("memory", f"{budget} counters cannot hold prune_k={prune_k} "
                             f"at depth r={depth} (at least {need} with sketch width 1); "
                             f"raise --memory or lower --prune-k or --depth")
    return width


def default_depth(epsilon: float, expected_n: float) -> int:
    """The paper's r ≈ log2(ε·n), from a *public* guess of n (n itself is private)."""
    return int(min(hierarchy.MAX_DEPTH, max(1, round(math.log2(max(2.0, epsilon
                                                                   * expected_n))))))


# --------------------------------------------------------------------------- the pass


class PrivHPAccumulator:
    """Exact (noise-free) PrivHP state: the exact tree's counters (levels 0..L_e) in heap
    order (level ℓ's node θ at index 2^ℓ − 1 + θ) and one count-min table per sketch level.  Integer
    arrays of fixed size; adding points and merging are exact integer additions.
    ``counted``: the sketch levels the pass fills (default all; continual PrivHP with a
    stride reads only its measured ones, and the others' tables stay zero)."""

    def __init__(self, config: PrivHPConfig, tree: Optional[np.ndarray] = None,
                 sketches: Optional[np.ndarray] = None, clipped: int = 0,
                 counted: Optional[Sequence[int]] = None):
        self.config = config
        self.tree = (np.zeros(config.tree_counters, dtype=np.int64) if tree is None else tree)
        shape = (len(config.sketch_levels), config.sketch_depth, config.sketch_width)
        self.sketches = np.zeros(shape, dtype=np.int64) if sketches is None else sketches
        self.clipped = int(clipped)
        self.counted = tuple(config.sketch_levels if counted is None else counted)

    @property
    def num_points(self) -> int:
        """The exact number of points added (private; never released as is)."""
        return int(self.tree[0])

    @property
    def counters(self) -> int:
        return int(self.tree.size + self.sketches.size)

    def level_counts(self, level: int) -> np.ndarray:
        return self.tree[2 ** level - 1: 2 ** (level + 1) - 1]

    def add_unit_points(self, unit_points: np.ndarray) -> "PrivHPAccumulator":
        """One pass over a batch of points of [0,1]^d (n × d)."""
        config = self.config
        unit_points = np.asarray(unit_points, dtype=np.float64).reshape(-1, config.dims)
        if unit_points.shape[0] == 0:
            return self
        lstar, r = config.exact_depth, config.depth
        deepest = hierarchy.leaf_index(unit_points, r)
        leaves = deepest >> np.uint64(r - lstar)
        counts = np.bincount(leaves.astype(np.int64), minlength=2 ** lstar)
        for level in range(lstar, -1, -1):  # leaf counts, then sums of siblings upwards
            self.tree[2 ** level - 1: 2 ** (level + 1) - 1] += counts
            counts = counts.reshape(-1, 2).sum(axis=1) if level else counts
        for i, level in enumerate(config.sketch_levels):
            if level in self.counted:
                config.sketch(level, self.sketches[i]).update(deepest >> np.uint64(r - level))
        return self

    def merge(self, other: "PrivHPAccumulator") -> "PrivHPAccumulator":
        """In-place sum with another accumulator of the same configuration."""
        if other.config != self.config or other.counted != self.counted:
            raise ValueError("cannot merge PrivHP accumulators of different configurations")
        self.tree += other.tree
        self.sketches += other.sketches
        self.clipped += other.clipped
        return self

    def copy(self) -> "PrivHPAccumulator":
        return PrivHPAccumulator(self.config, self.tree.copy(), self.sketches.copy(),
                                 self.clipped, self.counted)


def accumulate(unit_points: np.ndarray, config: PrivHPConfig,
               batch_size: int = 1 << 18, counted: Optional[Sequence[int]] = None
               ) -> PrivHPAccumulator:
    """The pure-numpy pass over points of [0,1]^d, in batches (``counted``: see
    :class:`PrivHPAccumulator`)."""
    accumulator = PrivHPAccumulator(config, counted=counted)
    for start in range(0, len(unit_points), batch_size):
        accumulator.add_unit_points(unit_points[start:start + batch_size])
    return accumulator


# ----------------------------------------------------------------- consistency, tree


def make_consistent(parent: np.ndarray, left: np.ndarray, right: np.ndarray
                    ) -> Tuple[np.ndarray, np.ndarray]:
    """Holland et al. Algorithm 3 for families (parent ≥ 0, children a, b), vectorised:
    clamp a, b at 0; add (c(p) − c(a) − c(b))/2 to each; if a child is now negative,
    set it to 0 and give its sibling c(p) (the two corrections).  Afterwards both are
    ≥ 0 and a + b = c(p)."""
    parent = np.asarray(parent, dtype=np.float64)
    a = np.maximum(np.asarray(left, dtype=np.float64), 0.0)
    b = np.maximum(np.asarray(right, dtype=np.float64), 0.0)
    half = (parent - a - b) / 2.0
    a, b = a + half, b + half
    a_neg, b_neg = a < 0, b < 0
    a = np.where(a_neg, 0.0, np.where(b_neg, parent, a))
    b = np.where(b_neg, 0.0, np.where(a_neg, parent, b))
    return a, b


def least_squares_tree(noisy_tree: np.ndarray, variances: Sequence[float], levels: int
                       ) -> np.ndarray:
    """The best linear unbiased estimate of the complete binary tree of levels
    0..``levels`` (heap order) from noisy counts whose errors are uncorrelated with
    variance ``variances[ℓ]`` at level ℓ: Hay et al. 2010 ("Boosting the accuracy of
    differentially private histograms through consistency", §4, the two-pass estimator)
    with per-level variances.  The parent's count x_v and the sum of its children's
    estimates are two unbiased estimates of the same count; bottom up,

        z_v = (x_v·c_ℓ + (z_left + z_right)·v_ℓ) / (v_ℓ + c_ℓ),   c_ℓ = 2·u_{ℓ+1},
        u_ℓ = v_ℓ·c_ℓ / (v_ℓ + c_ℓ)   (u_L = v_L, z = x at level L),

    then top down each family's children share the difference f_parent − z_left −
    z_right equally (equal variances within a level), so f_left + f_right = f_parent.
    A level of infinite variance is one that was not measured (continual PrivHP's
    ``stride``): its estimate is its children's sum (z_v = z_left + z_right, u_ℓ = c_ℓ)
    and its entries in ``noisy_tree`` are ignored; the deepest level must be measured.
    Linear post-processing of the noisy counts: no privacy cost.  Entries beyond the
    tree are returned unchanged."""
    tree = np.asarray(noisy_tree, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)[:levels + 1]
    if not np.isfinite(v[levels]):
        raise ValueError("the deepest level of the tree must be measured")
    z, u = [None] * (levels + 1), np.empty(levels + 1)
    z[levels] = tree[2 ** levels - 1: 2 ** (levels + 1) - 1]
    u[levels] = v[levels]
    for level in range(levels - 1, -1, -1):
        children = z[level + 1][0::2] + z[level + 1][1::2]
        c = 2.0 * u[level + 1]
        if np.isinf(v[level]):
            z[level], u[level] = children, c
            continue
        z[level] = (tree[2 ** level - 1: 2 ** (level + 1) - 1] * c + children * v[level]) \
            / (v[level] + c)
        u[level] = v[level] * c / (v[level] + c)
    final = [z[0]]
    for level in range(1, levels + 1):
        half = (final[-1] - z[level][0::2] - z[level][1::2]) / 2.0
        final.append(np.column_stack([z[level][0::2] + half,
                                      z[level][1::2] + half]).reshape(-1))
    out = tree.copy()
    out[:2 ** (levels + 1) - 1] = np.concatenate(final)
    return out


@dataclass
class PrivHPTree:
    """The released decomposition: per level the nodes' θ (sorted), their consistent
    counts, and for each node the index of its left child in the next level (−1 for a
    leaf; the right child follows the left one)."""

    dims: int
    depth: int
    thetas: List[np.ndarray]
    counts: List[np.ndarray]
    children: List[np.ndarray]

    @property
    def total(self) -> float:
        return float(self.counts[0][0])

    @property
    def num_nodes(self) -> int:
        return int(sum(t.size for t in self.thetas))

    def leaves(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(level, θ, count) of every leaf, level by level."""
        levels, thetas, counts = [], [], []
        for level in range(len(self.thetas)):
            mask = self.children[level] < 0
            levels.append(np.full(int(mask.sum()), level))
            thetas.append(self.thetas[level][mask])
            counts.append(self.counts[level][mask])
        return np.concatenate(levels), np.concatenate(thetas), np.concatenate(counts)


def grow(config: PrivHPConfig, noisy_tree: np.ndarray,
         noisy_sketches: Sequence[CountMinSketch]) -> PrivHPTree:
    """Algorithm 2: make the complete tree consistent, then from level L* expand the hot
    nodes with their children's noisy counts (the level's exact counter for ℓ ≤ L_e, the
    sketch estimate below), make each family consistent (Algorithm 3) and keep the
    top-k nodes of the new level as the next hot set, until depth r.  ``noisy_tree``
    holds the noisy exact counters of levels 0..L_e in heap order, ``noisy_sketches``
    one sketch per level L_e+1..r.  Deterministic post-processing of the noisy counters
    (ties in the top-k broken by θ)."""
    lstar = config.complete_depth
    thetas = [np.arange(2 ** l, dtype=np.uint64) for l in range(lstar + 1)]
    counts = [np.maximum(np.asarray(noisy_tree[0:1], dtype=np.float64), 0.0)]
    for level in range(1, lstar + 1):
        raw = np.asarray(noisy_tree[2 ** level - 1: 2 ** (level + 1) - 1], dtype=np.float64)
        left, right = make_consistent(counts[-1], raw[0::2], raw[1::2])
        counts.append(np.column_stack([left, right]).reshape(-1))
    children = [np.arange(0, 2 ** (l + 1), 2, dtype=np.int64) for l in range(lstar)]
    hot = np.arange(2 ** lstar, dtype=np.int64)
    for level in range(lstar + 1, config.depth + 1):
        parents = thetas[-1][hot]
        child_theta = np.column_stack([2 * parents, 2 * parents + np.uint64(1)]).reshape(-1)
        if level <= config.exact_depth:
            estimates = np.asarray(noisy_tree, dtype=np.float64)[
                2 ** level - 1 + child_theta.astype(np.int64)]
        else:
            estimates = noisy_sketches[level - config.exact_depth - 1].estimate(
                child_theta).astype(np.float64)
        left, right = make_consistent(counts[-1][hot], estimates[0::2], estimates[1::2])
        link = np.full(thetas[-1].size, -1, dtype=np.int64)
        link[hot] = np.arange(0, 2 * hot.size, 2)
        children.append(link)
        thetas.append(child_theta)
        counts.append(np.column_stack([left, right]).reshape(-1))
        order = np.argsort(-counts[-1], kind="stable")[:config.prune_k]
        hot = np.sort(order)
    children.append(np.full(thetas[-1].size, -1, dtype=np.int64))
    return PrivHPTree(config.dims, config.depth, thetas, counts, children)


# ----------------------------------------------------------------- utility bound

#: what :func:`theorem3_w1_bound` computes
W1_BOUND_THEOREM = ("Holland et al. 2025, Theorem 3 (noise, approximation, pruning and "
                    "resolution terms), made explicit for the noise of this configuration "
                    "as in the proofs of Lemmas 7-9, the pruning and resolution terms read "
                    "off the released tree")

W1_BOUND_NOTE = (
    "Expected 1-Wasserstein distance between the input's points and the released generator "
    "(the distribution the synthetic points are drawn from), on the unit cube [0,1]^d the "
    "bounds are scaled to (Euclidean metric), over the noise and the sketches' hashing: "
    "E W1 <= leaf + noise_points / n + sketch_approximation, at most the cube's diameter. "
    "leaf = sum over the released leaves of their share of the noisy total times their "
    "diameter (the resolution term, plus the cost of cells left unsplit by pruning; the "
    "release states its own, post-processing of the noisy tree); noise_points = "
    "sd(lambda_0) * diam_0 + sum over levels l >= 1 of (N_l / 2) families * s_l * "
    "diam_(l-1), s_l = sqrt(V_l / 2) for a level of exact counters and sqrt(j * V_l) for a "
    "sketch level (V_l the variance of the level's discrete Laplace noise at the budget "
    "split in force, under the neighbouring relation in force); sketch_approximation = "
    "sum over sketch levels of (N_l / 2) * diam_(l-1) / w (expected count-min collisions, "
    "fully random hashes). n is a public figure (w1_bound_terms.n_source: a release's noisy "
    "total, a plan's expected n), never the exact number of points. An "
    "expectation over the noise, not a bound on every release; evaluate privhp measures "
    "W1 against finitely many synthetic points, which adds sampling error. In the input's "
    "units the bound is w1_bound times w1_bound_input_scale, the widest column's width "
    "(exact in 1-D, an upper bound when the widths differ).")


def released_leaf_mass(tree: PrivHPTree) -> np.ndarray:
    """The released tree's count mass in its leaves, level by level (post-processing of
    the noisy tree)."""
    mass = np.zeros(tree.depth + 1)
    for level in range(len(tree.thetas)):
        mass[level] = float(tree.counts[level][tree.children[level] < 0].sum())
    return mass


def shallowest_leaf_level(config: PrivHPConfig) -> int:
    """The shallowest level a released leaf can be at: L* + 1 when the top-k selection
    leaves nodes unsplit above depth r, else r (every leaf at r)."""
    return min(config.complete_depth + 1, config.depth)


def theorem3_w1_bound(config: PrivHPConfig, n: Optional[float],
                      leaf_mass: Optional[Sequence[float]] = None) -> Dict:
    """Holland et al. 2025, **Theorem 3**: a bound on the expected 1-Wasserstein distance
    between the empirical measure μ_X of the n input points and the released generator
    μ_T on Ω = [0,1]^d (Euclidean metric), the sum of a noise term and an approximation
    term (both divided by n), a pruning term and a resolution term, with each term made
    explicit for the noise this configuration adds:

        E W1(μ_X, μ_T) ≤ leaf + noise_points/n + sketch_approximation  (and ≤ γ_0).

    Theorem 3 holds for every per-level budget ε_ℓ, so the bound is the one of the split
    in force (``config.epsilons()``, noise scale Δ_ℓ/ε_ℓ, variance V_ℓ of its discrete
    Laplace).  The neighbouring relation is the configuration's: under ``add-remove``
    Δ_ℓ = 1 (exact counters) or j (sketch), under ``replace`` twice that, so the
    variances, and the bound, are those of the relation in force.

    The accounting is the proof of Lemma 9 (after He et al. 2023): turn the input's
    points into the generator in steps, each moving mass a bounded distance.

    * **Consistency errors.**  Algorithm 3 gives a family (parent, children a, b) the
      error e = (err_a − err_b)/2 of its children's counts, moved between the children:
      distance at most the parent's diameter γ_{ℓ−1}.  An exact level's counters are
      independent: E|e| ≤ √(V_ℓ/2).  A sketch child's estimate is the minimum over j
      cells of count + collisions + noise, so |err| ≤ min-row collisions + max_i |λ_i|:
      E|e| ≤ √(j·V_ℓ) + n/w (expected collisions in one row ≤ n/w with fully random
      hashes: Lemma 4 with the tail taken at its data-free maximum n).  The clamping
      corrections of Algorithm 3 only reduce these errors (Lemma 6).  A level ℓ has
      N_ℓ/2 families.
    * **Root.**  The noisy total differs from n by |λ_0| (adding or removing points,
      He et al.'s Lemma 11): E|λ_0|·γ_0 ≤ √V_0·γ_0.
    * **Leaves** (resolution and pruning).  Each unit of mass ends in a released leaf
      and is spread uniformly over it: at most the leaf's diameter.  With the released
      tree's ``leaf_mass`` (mass per level) this is Σ_ℓ mass_ℓ·γ_ℓ / Σ mass — γ_r for an
      unpruned tree (Theorem 3's resolution term), more when cells are left unsplit
      (Lemma 7's pruning term, which depends on the data: the release measures it on its
      own noisy tree).  Without a release it is its data-free maximum, the diameter
      γ_{L*+1} of the shallowest level a leaf can be at (γ_r when nothing is pruned).

    ``n`` is the number of points the noise term is divided by: not the exact n (private)
    but a public figure — a release's noisy total, or a plan's expected n; None leaves
    ``w1_bound`` unset.  W1 never exceeds the cube's diameter γ_0, which caps the bound.
    Returns the bound and its terms (in [0,1]^d units)."""
    gamma = [hierarchy.diameter(level, config.dims) for level in range(config.depth + 1)]
    variances = [discrete_laplace_variance(scale) for scale in config.noise_scales()]
    noise = math.sqrt(variances[0]) * gamma[0]
    approximation = 0.0
    for level in range(1, config.depth + 1):
        families = config.nodes_released(level) / 2
        if config.level_kind(level) == "sketch":
            per_family = math.sqrt(config.sketch_depth * variances[level])
            approximation += families * gamma[level - 1] / config.sketch_width
        else:
            per_family = math.sqrt(variances[level] / 2)
        noise += families * per_family * gamma[level - 1]
    if leaf_mass is not None and float(np.sum(leaf_mass)) > 0:
        mass = np.asarray(leaf_mass, dtype=np.float64)
        leaf = float(mass @ np.asarray(gamma[:mass.size]) / mass.sum())
        leaf_source = "the released tree"
    else:
        leaf = gamma[shallowest_leaf_level(config)]
        leaf_source = ("the data-free maximum (the diameter of the shallowest level a "
                       "released leaf can be at)")
    bound = None
    if n is not None:
        bound = gamma[0] if not n > 0 else min(gamma[0], leaf + noise / n + approximation)
    return {"w1_bound": bound, "leaf": leaf, "leaf_source": leaf_source,
            "noise_points": noise, "sketch_approximation": approximation,
            "n": None if n is None else float(n), "domain_diameter": gamma[0]}


def w1_bound_fields(bound: Dict, n_source: str) -> Dict:
    """The manifest's fields of a :func:`theorem3_w1_bound` result (``n_source``: what
    n is)."""
    terms = {key: value for key, value in bound.items() if key != "w1_bound"}
    return {"w1_bound": bound["w1_bound"], "w1_bound_kind": "expected",
            "w1_bound_theorem": W1_BOUND_THEOREM,
            "w1_bound_terms": {**terms, "n_source": n_source, "units": "[0,1]^d"},
            "w1_bound_note": W1_BOUND_NOTE}


# ------------------------------------------------------------------------ release


@dataclass
class PrivHPRelease:
    """What the noisy step produces: the grown tree, the seed of the (non-private)
    synthetic-point sampling, and facts for the manifest."""

    config: PrivHPConfig
    tree: PrivHPTree
    emission_seed: int
    sampler: str
    clipped: int = 0
    info: Dict = field(default_factory=dict)

    def manifest(self) -> Dict:
        return {**release_manifest(self.config, **self.facts()), **self.info}

    def facts(self) -> Dict:
        """The release's facts a manifest states (see :func:`release_manifest`)."""
        return {"released_tree_nodes": self.tree.num_nodes, "noisy_total": self.tree.total,
                "sampler": self.sampler,
                "leaf_mass_by_level": released_leaf_mass(self.tree).tolist()}


def release_manifest(config: PrivHPConfig, released_tree_nodes: Optional[int] = None,
                     noisy_total: Optional[float] = None, sampler: Optional[str] = None,
                     leaf_mass_by_level: Optional[Sequence[float]] = None) -> Dict:
    """What a manifest says of a release with ``config``: the algorithm, the accounting,
    the parameters and memory, and — once released (:meth:`PrivHPRelease.facts`) — the
    released tree's size, its noisy total, the sampler and the expected-W1 bound of
    :func:`theorem3_w1_bound` at the noisy total and the released tree's leaves."""
    manifest = {
        "algorithm": "PrivHP (Holland, Camtepe, Thapa, Xue, SIGMOD 2025), Algorithms 1-3",
        **config.accounting(),
        "level_epsilons": [float(e) for e in config.epsilons()],
        "parameters": {"dims": config.dims, "prune_k": config.prune_k,
                       "complete_depth": config.complete_depth, "depth": config.depth,
                       "exact_depth": config.exact_depth,
                       "sketch_width": config.sketch_width,
                       "sketch_depth": config.sketch_depth,
                       "hash_seed": config.hash_seed,
                       "full_tree": config.is_full_tree},
        "memory_counters": config.memory_counters,
        "memory": {"counters_used": config.memory_counters, "budget": config.memory,
                   "tree_counters": config.tree_counters,
                   "sketch_counters": config.sketch_counters,
                   "full_tree_counters": config.full_tree_counters},
    }
    if released_tree_nodes is not None:
        manifest["memory"]["released_tree_nodes"] = int(released_tree_nodes)
        manifest.update({"noisy_total": noisy_total, "sampler": sampler})
        manifest.update(w1_bound_fields(theorem3_w1_bound(
            config, noisy_total, leaf_mass_by_level), "the release's noisy total"))
    return manifest


def release(accumulator: PrivHPAccumulator, sampler, least_squares: bool = False
            ) -> PrivHPRelease:
    """Add the noise once (levels 0..r in order, see the module docstring for the
    calibration), grow and make the tree consistent.  ``sampler`` comes from
    :func:`continual_synth.mechanisms.samplers.make_sampler`.  ``least_squares``: first
    replace the exact levels by :func:`least_squares_tree` (the post-processing continual
    PrivHP applies; not the paper's, off by default)."""
    config = accumulator.config
    scales = config.noise_scales()
    noisy_tree = accumulator.tree.astype(np.float64)
    for level in range(config.exact_depth + 1):
        lo, hi = 2 ** level - 1, 2 ** (level + 1) - 1
        noisy_tree[lo:hi] += sampler.discrete_laplace(scales[level], hi - lo)
    eps = config.epsilons()
    noisy_sketches = [config.sketch(level, accumulator.sketches[i]).privatized(
        sampler, eps[level], config.neighbor) for i, level in enumerate(config.sketch_levels)]
    if least_squares:
        noisy_tree = least_squares_tree(noisy_tree, [discrete_laplace_variance(b)
                                                     for b in scales], config.exact_depth)
    tree = grow(config, noisy_tree, noisy_sketches)
    return PrivHPRelease(config, tree, draw_emission_seed(sampler), sampler.name,
                         clipped=accumulator.clipped)


# ----------------------------------------------------------------------- sampling


def sample_unit(tree: PrivHPTree, n: int, rng: np.random.Generator) -> np.ndarray:
    """n synthetic points of [0,1]^d: draw u uniform in [0, c(root)), walk down (left if
    u < c(left), else subtract c(left) and go right), then a uniform point of the leaf's
    cell.  A tree whose root count is 0 (all noise) gives uniform points of [0,1]^d."""
    dims = tree.dims
    if n <= 0:
        return np.zeros((0, dims))
    total = tree.total
    if not total > 0:
        return rng.random((n, dims))
    u = rng.random(n) * total
    idx = np.arange(n)
    pos = np.zeros(n, dtype=np.int64)
    leaf_level = np.zeros(n, dtype=np.int64)
    leaf_pos = np.zeros(n, dtype=np.int64)
    for level in range(len(tree.thetas)):
        child = tree.children[level][pos]
        stop = child < 0
        leaf_level[idx[stop]] = level
        leaf_pos[idx[stop]] = pos[stop]
        keep = ~stop
        idx, pos, u, child = idx[keep], pos[keep], u[keep], child[keep]
        if idx.size == 0:
            break
        c_left = tree.counts[level + 1][child]
        c_right = tree.counts[level + 1][child + 1]
        go_left = (u < c_left) | (c_right <= 0)
        u = np.where(go_left, u, u - c_left)
        pos = np.where(go_left, child, child + 1)
    out = np.empty((n, dims))
    offsets = rng.random((n, dims))
    for level in np.unique(leaf_level):
        rows = np.flatnonzero(leaf_level == level)
        corners, sides = hierarchy.cell_boxes(tree.thetas[level][leaf_pos[rows]], int(level),
                                              dims)
        out[rows] = corners + offsets[rows] * sides
    return out


def shard_sizes(n: int, num_shards: int) -> np.ndarray:
    """n split as evenly as possible over shards (the first n mod S get one more)."""
    sizes = np.full(num_shards, n // num_shards, dtype=np.int64)
    sizes[: n % num_shards] += 1
    return sizes


def sample_shard(tree: PrivHPTree, n: int, num_shards: int, shard: int,
                 emission_seed: int) -> np.ndarray:
    """Shard ``shard``'s synthetic points of [0,1]^d (its own generator, so shards can be
    drawn anywhere and in any order with the same result)."""
    size = int(shard_sizes(n, num_shards)[shard])
    return sample_unit(tree, size, np.random.default_rng([emission_seed, shard]))


def synthesize(unit_points: np.ndarray, config: PrivHPConfig, sampler, samples: int,
               num_shards: int = 1) -> Tuple[PrivHPRelease, np.ndarray]:
    """The whole mechanism in numpy: pass, release, and ``samples`` synthetic points of
    [0,1]^d (shards concatenated in order, as the Beam pipeline writes them)."""
    rel = release(accumulate(unit_points, config), sampler)
    points = [sample_shard(rel.tree, samples, num_shards, s, rel.emission_seed)
              for s in range(num_shards)]
    return rel, np.concatenate(points) if points else np.zeros((0, config.dims))
