"""Continual PrivHP: after every period t = 1..T, synthetic points of *all* the points
seen so far, in memory that does not grow with the stream (new; built on Holland et al.
2025's decomposition, :mod:`continual_synth.mechanisms.privhp`, and the continual
counters of :mod:`continual_synth.mechanisms.counters`).

The structure is one-shot PrivHP's (:class:`~continual_synth.mechanisms.privhp.
PrivHPConfig`: exact counters on levels 0..L_e, a count-min sketch on each level
L_e+1..r, the same public hashes).  Each *cell* — an exact counter or a sketch cell —
becomes a continual counter over periods: period t brings the exact PrivHP state z^t of
the period's points (:class:`~continual_synth.mechanisms.privhp.PrivHPAccumulator`, the
same pass), and level ℓ's counter (one vector counter over the level's cells) releases
the noisy prefix sums S̃_ℓ^t ≈ z_ℓ^1 + … + z_ℓ^t.  The release at t is post-processing
of the counters' outputs: first the exact levels 0..L_e are replaced by their best
linear unbiased estimate given the counters' exact variances at t (Hay et al. 2010 with
per-level variances, :func:`~continual_synth.mechanisms.privhp.least_squares_tree`: a
parent's S̃ and the sum of its children's are two estimates of one prefix count), then
Algorithm 2's growth (top-k hot nodes) and Algorithm 3's consistency (non-negativity)
redone from them, then sampling (:func:`~continual_synth.mechanisms.privhp.grow`,
:func:`~continual_synth.mechanisms.privhp.sample_unit`).

Privacy (event level, pure ε-DP for the whole stream).  Neighbouring streams differ by
adding or removing one point in one period (``replace``: replacing one point by another
in the same period).  That point changes, at level ℓ, one entry (its period) of Δ_ℓ
coordinates of level ℓ's counter: Δ_ℓ = 1 on an exact level, j on a sketch level (one
cell per row), doubled under ``replace`` — the one-shot sensitivities, now *per stream
entry* (``entries_changed`` = Δ_ℓ).  Level ℓ's counter is calibrated to ε_ℓ by the
counter library (b = Δ_ℓ·h/ε_ℓ with h the nodes one entry touches: the counter's exact
sensitivity across all T periods), so it is ε_ℓ-DP over the whole stream, and by basic
composition over the measured levels (all of 0..r at stride 1) the stream of releases is
ε-DP with ε = Σ_ℓ ε_ℓ; everything else is post-processing of the counters' outputs.

Split.  The default split is ``uniform`` (ε_ℓ = ε/(r+1) at stride 1), not one-shot PrivHP's
``sqrt`` (:meth:`PrivHPConfig.epsilons`; any split can still be given): with the
least-squares step every level's noise also informs the levels above it, so the deep
levels need no larger share of ε (the default: bench/results/privhp_continual_tuning.md).

Counter.  Pure ε needs discrete Laplace noise; among the library's pure-ε counters the
k-ary tree (Andersson et al. 2025) has the least maximum variance over t = 1..T
(bench/results/counters_error.md).  ``auto`` takes it with its best arity; when that
arity exceeds T the tree has one level and is exactly Chan-Shi-Song's Simple II (noise
b = Δ/ε on every entry, variance t·2q/(1−q)² at t), which is stored as the ``simple``
counter: one word per cell instead of two.  For T = 50 that is the choice (variance at
T: 92/ε² per unit sensitivity, against 63 for ``block`` with 3 words per cell, 122 for
``honaker`` and 216 for ``tree``).  The variance of a cell at t is the counter's exact
``variance(t)``; one-shot PrivHP at the same ε has 2q/(1−q)² (≈ 1.84/ε²): the price of
releasing T times.  ``anchored`` (Simple II plus one node of all T periods at T, least-
squares combined) lowers the variance at T and raises it before T: it favours the
last release over the others (bench/results/privhp_continual_anchored.md), so it is an
option, not ``auto``.

Stride (Qardaji, Yang and Li 2013, "Understanding hierarchical methods for
differentially private histograms": with constrained inference a hierarchy of fan-out
above 2 has the lower error).  Counters sit on every s-th level only
(:attr:`ContinualPrivHPConfig.measured_levels`: r, r − s, … on the sketch levels, L_e,
L_e − s, … on the exact ones), so each measured level gets ε·s/(r + 1) or so instead of
ε/(r + 1) — variance s² times smaller — and a level between is the sum of its measured
descendants (:func:`noisy_structure`; exact levels through the least-squares step with
infinite variance, sketch levels by :class:`ChildrenSum`).  In d = 2 the default s = 2
makes the measured levels a quadtree (every measured level halves both axes) (the
default: bench/results/privhp_continual_grid.md; larger strides:
bench/results/privhp_continual_grid_strides_j3.md).  Only the measured levels compose:
ε = Σ_{ℓ measured} ε_ℓ.  A saved state without a stride has s = 1 (every level).

Sketch rows.  The default count-min depth is j = 2, not one-shot PrivHP's 3: a sketch
level's sensitivity is j, and a continual counter's noise at t is about t times one-shot's
in variance, so the balance between collisions (fewer with more rows) and noise (more with
more rows) moves to fewer rows (the default: bench/results/privhp_continual_grid.md);
any j can still be given.

Memory.  The counters hold ``words_per_cell`` floats per cell (the counter's state:
1 for ``simple``, 2 per tree level for ``kary``, …), never anything per point or per
period.  A budget of M words (``memory``) sizes the structure for ⌊M / words_per_cell⌋
cells with one-shot PrivHP's rule (:func:`~continual_synth.mechanisms.privhp.
sketch_width_for`), so the words used are ≤ M, ≤ the plain continual tree of the same
depth, and non-decreasing in prune_k.  With s > 1 only the measured levels hold counters,
so the words used are fewer still (about half at s = 2): the structure stays the one-shot
structure of the same budget (its sketch width and exact levels), and the freed words are
not spent on wider sketches, so a stride changes where the noise goes and not which
cells collide.
Pure numpy; no Beam.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from continual_synth.mechanisms import privhp
from continual_synth.mechanisms.counters import (StreamCounter, kary_levels, make_counter)
from continual_synth.mechanisms.errors import ParameterError, whole_number
from continual_synth.mechanisms.samplers import Sampler

__all__ = ["COUNTERS", "DEFAULT_SPLIT", "DEFAULT_STRIDE", "DEFAULT_SKETCH_DEPTH",
           "resolve_counter", "words_per_cell", "ContinualPrivHPConfig", "ChildrenSum",
           "noisy_structure", "feed"]

COUNTERS = ("auto", "simple", "block", "tree", "honaker", "kary", "anchored")
DEFAULT_SPLIT = "uniform"  # the levels' budget split unless one is given (see above)
DEFAULT_STRIDE = 2  # counters on every second level (see above)
DEFAULT_SKETCH_DEPTH = 2  # count-min rows j unless given (one-shot PrivHP's default is 3)


def resolve_counter(kind: str, horizon: int) -> Tuple[str, Dict]:
    """(counter kind, options) of ``kind`` for horizon T (``auto``: see the module
    docstring)."""
    if kind not in COUNTERS:
        raise ParameterError("counter", f"must be one of {', '.join(COUNTERS)}, got {kind!r}")
    if kind != "auto":
        return kind, {}
    arity = make_counter("kary", horizon, epsilon=1.0).arity
    if kary_levels(horizon, arity) == 1:
        return "simple", {}
    return "kary", {"arity": int(arity)}


def words_per_cell(kind: str, horizon: int, options: Optional[Dict] = None) -> int:
    """Floats a counter of ``kind`` holds per coordinate (its state's size at dim 1)."""
    counter = make_counter(kind, horizon, epsilon=1.0, **(options or {}))
    return int(sum(np.asarray(v).size for v in counter._state().values()))


@dataclass(frozen=True)
class ContinualPrivHPConfig:
    """Public parameters: the structure (``structure``, a one-shot configuration whose ε
    is the whole stream's), the horizon T, the counter (resolved: never ``auto``) and the
    memory budget in words, if any."""

    structure: privhp.PrivHPConfig
    horizon: int
    counter: str
    counter_options: Tuple[Tuple[str, int], ...] = ()
    memory: Optional[int] = None
    stride: int = 1  # configurations saved before the option counted every level

    @classmethod
    def create(cls, *, horizon: int, counter: str = "auto", memory: Optional[int] = None,
               counter_options: Optional[Dict] = None, stride: Optional[int] = None,
               **structure) -> "ContinualPrivHPConfig":
        """Resolve the counter (``counter_options``: the library's options of an explicit
        kind, e.g. ``{"block_size": 25}``), size the structure from ``memory`` words (if
        given) and check the budget covers it; ``stride`` s: counters on every s-th level
        (:attr:`measured_levels`; default :data:`DEFAULT_STRIDE`)."""
        horizon = whole_number("horizon", horizon)
        explicit = structure.get("level_epsilons") is not None
        if stride is None:  # explicit ε_0..ε_r: every level is measured with its own ε_ℓ
            stride = 1 if explicit else DEFAULT_STRIDE
        stride = whole_number("level_stride", stride)  # the command line's --level-stride
        if explicit and stride != 1:
            raise ParameterError("level_epsilons", "one ε per level needs counters on every "
                                 "level: give --level-stride 1 (or leave it out)")
        depth = structure.get("depth")
        if depth is not None and stride > whole_number("depth", depth):
            raise ParameterError("level_stride", f"{stride} is more than the depth "
                                 f"r = {depth}: at most r")
        if structure.get("budget_split") is None:
            structure["budget_split"] = DEFAULT_SPLIT
        if structure.get("sketch_depth") is None:
            structure["sketch_depth"] = DEFAULT_SKETCH_DEPTH
        kind, options = resolve_counter(counter, horizon)
        if counter_options:
            if counter == "auto":
                raise ParameterError("counter", "options need an explicit counter kind")
            make_counter(kind, horizon, epsilon=1.0, **counter_options)  # validates them
            options = dict(counter_options)
        cells = None
        if memory is not None:
            memory = whole_number("memory", memory)
            cells = memory // words_per_cell(kind, horizon, options)
            if cells < 1:
                raise ParameterError("memory", f"{memory} words hold no {kind} counter "
                                     f"cell; raise --memory")
        try:
            config = privhp.PrivHPConfig(**structure, memory=cells)
        except ParameterError as exc:
            if cells is None:
                raise
            per_cell = words_per_cell(kind, horizon, options)
            raise ParameterError("memory", f"{memory} words = {cells} cells of {per_cell} "
                                 f"words ({kind} counter), and in cells: {exc.args[-1]}; "
                                 f"--memory counts words: {per_cell} per cell") from None
        return cls(config, horizon, kind, tuple(sorted(options.items())), memory, stride)

    @property
    def epsilon(self) -> float:
        return self.structure.epsilon

    @property
    def words_per_cell(self) -> int:
        return words_per_cell(self.counter, self.horizon, dict(self.counter_options))

    @property
    def measured_levels(self) -> Tuple[int, ...]:
        """The levels that hold counters, shallowest first: r, r − s, r − 2s, … while
        deeper than L_e (sketch levels), then L_e, L_e − s, … ≥ 0 (exact levels).  The
        levels between are sums of their measured descendants (:func:`noisy_structure`):
        the deepest level and the deepest exact level are always measured."""
        s = self.structure
        sketch = range(s.depth, s.exact_depth, -self.stride)
        exact = range(s.exact_depth, -1, -self.stride)
        return tuple(sorted(set(sketch) | set(exact)))

    @property
    def counted_sketch_levels(self) -> Tuple[int, ...]:
        """The sketch levels a period's pass must fill (the measured ones): the others'
        count-min updates would be work no counter reads."""
        return tuple(l for l in self.measured_levels if l > self.structure.exact_depth)

    @property
    def cells(self) -> int:
        """Cells holding a counter: the measured levels' (≤ the structure's counters)."""
        return int(sum(self.level_cells(level) for level in self.measured_levels))

    @property
    def measured_cells(self) -> Tuple[int, int]:
        """Cells holding a counter on the exact levels and on the sketch levels."""
        s = self.structure
        exact = sum(self.level_cells(l) for l in self.measured_levels if l <= s.exact_depth)
        return exact, self.cells - exact

    @property
    def memory_words(self) -> int:
        """Floats the counters hold: cells × words per cell (constant over the stream)."""
        return self.cells * self.words_per_cell

    def level_cells(self, level: int) -> int:
        s = self.structure
        return 2 ** level if level <= s.exact_depth else s.sketch_depth * s.sketch_width

    def level_epsilons(self) -> Dict[int, float]:
        """ε_ℓ of each measured level: the structure's split (:meth:`PrivHPConfig.
        epsilons`) restricted to the measured levels and rescaled to sum to ε."""
        eps = self.structure.epsilons()
        levels = list(self.measured_levels)
        return dict(zip(levels, eps[levels] * (self.epsilon / eps[levels].sum())))

    def new_counters(self) -> List[StreamCounter]:
        """One counter per measured level ℓ (in :attr:`measured_levels`' order): dim = the
        level's cells, ε_ℓ, entries changed Δ_ℓ (the level's one-shot sensitivity; see
        the module docstring)."""
        eps = self.level_epsilons()
        return [make_counter(self.counter, self.horizon, epsilon=float(eps[level]),
                             dim=self.level_cells(level),
                             entries_changed=self.structure.sensitivity(level),
                             **dict(self.counter_options))
                for level in self.measured_levels]

    def to_dict(self) -> Dict:
        return {"structure": self.structure.to_dict(), "horizon": self.horizon,
                "counter": self.counter, "counter_options": dict(self.counter_options),
                "memory": self.memory, "stride": self.stride}

    @classmethod
    def from_dict(cls, data: Dict) -> "ContinualPrivHPConfig":
        structure = dict(data["structure"])
        cells = structure.pop("memory")
        if structure["level_epsilons"] is not None:
            structure["level_epsilons"] = tuple(structure["level_epsilons"])
        return cls(privhp.PrivHPConfig(**structure, memory=cells), data["horizon"],
                   data["counter"], tuple(sorted(data["counter_options"].items())),
                   data["memory"], data.get("stride", 1))

    def accounting(self) -> Dict:
        """The manifest's privacy and memory statement."""
        counters = dict(zip(self.measured_levels, self.new_counters()))
        eps = self.level_epsilons()
        one_shot = self.structure.accounting()
        levels = []
        for level in one_shot["levels"]:
            counter = counters.get(level["level"])
            if counter is None:
                levels.append({**level, "measured": False, "epsilon": 0.0, "noise": None,
                               "noise_scale": None, "counter": None,
                               "estimate": "the sum of its children's estimates"})
                continue
            levels.append({**level, "measured": True, "epsilon": float(eps[level["level"]]),
                           "counter": counter.kind,
                           "noise_scale": float(counter._entry_groups()[0][1]),
                           "counter_nodes_per_entry": sum(k for k, _ in counter._entry_groups()),
                           "variance_at_horizon": float(counter.variance(self.horizon))})
        meaning = ("streams differ by adding or removing one point in one period"
                   if self.structure.neighbor == "add-remove" else
                   "streams differ by replacing one point by another in one period "
                   "(sensitivities doubled)")
        return {
            **one_shot,
            "privacy_statement": (f"{self.epsilon:.6g}-DP (pure) for the whole stream where "
                                  f"{meaning}; public, not protected: the columns, their "
                                  f"bounds and the horizon T (inputs the user gives)"),
            "level_epsilons": [level["epsilon"] for level in levels],
            "composition": ("basic (pure ε-DP): ε = Σ_ℓ ε_ℓ over the measured levels; "
                            "level ℓ's continual counter is ε_ℓ-DP over the whole stream"),
            "privacy_level": "event-level",
            "stride": self.stride,
            "measured_levels": list(self.measured_levels),
            "post_processing": ("levels without counters are sums of their measured "
                                "descendants; least squares over the exact levels 0..L_e "
                                "with the counters' variances at t (Hay et al. 2010), then "
                                "Algorithms 2-3 (growth, consistency, non-negativity)"),
            "neighbor_meaning": meaning,
            "sensitivity_note": ("a point changes one period's entry of Δ_ℓ cells of each "
                                 "measured level ℓ (1 exact, j sketch); the counter's noise "
                                 "scale is Δ_ℓ·h/ε_ℓ, h = nodes one entry touches over all "
                                 "T periods"),
            "levels": levels,
            "horizon": self.horizon,
            "counter": {"kind": self.counter, "options": dict(self.counter_options),
                        "words_per_cell": self.words_per_cell},
        }


class ChildrenSum:
    """The estimator of a sketch level without counters (``stride`` > 1): a node's count
    is the sum of its two children's estimates one level down, where the children's
    level is measured or is itself such a sum.  Post-processing of the measured levels."""

    def __init__(self, below):
        self.below = below

    def estimate(self, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.uint64)
        return (np.asarray(self.below.estimate(2 * keys), dtype=np.float64)
                + self.below.estimate(2 * keys + np.uint64(1)))


def noisy_structure(config: ContinualPrivHPConfig, sums: Dict[int, np.ndarray]
                    ) -> Tuple[np.ndarray, List]:
    """The noisy prefix sums of the measured levels (``sums[ℓ]``) as one-shot PrivHP's
    noisy state: the exact levels 0..L_e in heap order (a level without counters holds
    its children's sums) and one estimator per sketch level L_e+1..r (a count-min sketch
    where measured, else :class:`ChildrenSum`)."""
    s = config.structure
    exact = {}
    for level in range(s.exact_depth, -1, -1):
        exact[level] = (sums[level] if level in sums
                        else exact[level + 1].reshape(-1, 2).sum(axis=1))
    tree = np.concatenate([exact[level] for level in range(s.exact_depth + 1)])
    sketches = {}
    for level in reversed(s.sketch_levels):
        sketches[level] = (s.sketch(level, sums[level].reshape(s.sketch_depth, s.sketch_width))
                           if level in sums else ChildrenSum(sketches[level + 1]))
    return tree, [sketches[level] for level in s.sketch_levels]


def feed(config: ContinualPrivHPConfig, counters: List[StreamCounter],
         period: privhp.PrivHPAccumulator, sampler: Sampler) -> privhp.PrivHPTree:
    """One period: feed each measured level's exact entry z_ℓ^t to its counter (levels
    in order, one sampler), take the least-squares estimate of the exact levels given
    the counters' variances at t (levels without counters: infinite), then grow and
    make consistent."""
    s = config.structure
    if period.config != s:
        raise ValueError("the period's statistics were accumulated with another "
                         "PrivHP structure")
    levels = config.measured_levels
    if len(counters) != len(levels):
        raise ValueError(f"{len(counters)} counters for the {len(levels)} measured levels "
                         f"of this configuration")
    if not set(config.counted_sketch_levels) <= set(period.counted):
        raise ValueError("the period's statistics left out a measured sketch level")
    sums = {}
    for level, counter in zip(levels, counters):
        entry = (period.level_counts(level) if level <= s.exact_depth
                 else period.sketches[level - s.exact_depth - 1].ravel())
        sums[level] = counter.feed(entry, sampler)
    tree, sketches = noisy_structure(config, sums)
    t = counters[0]._time
    variance = {level: counter.variance(t) for level, counter in zip(levels, counters)}
    tree = privhp.least_squares_tree(
        tree, [variance.get(level, np.inf) for level in range(s.exact_depth + 1)],
        s.exact_depth)
    return privhp.grow(s, tree, sketches)
