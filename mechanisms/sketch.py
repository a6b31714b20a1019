"""Count-min sketch, linear and mergeable, made private once at release.

Cormode and Muthukrishnan (2005): a table of ``depth`` (j) rows × ``width`` (w)
counters; row i hashes a key with its own function h_i to one column and adds the
item's weight there; the estimate of a key is the minimum over rows of its cells.
Without noise the estimate never underestimates and, for w = ⌈e/ε_cm⌉ and
j = ⌈ln(1/δ_cm)⌉, overestimates by at most ε_cm·‖f‖₁ with probability ≥ 1 − δ_cm
(:func:`overestimate_bound`).

The table is a linear function of the input, so per-bundle sketches (same shape and
hash seeds) merge by adding their tables; the exact table is what a Beam accumulator
carries.  Privacy is added once, at release (:meth:`CountMinSketch.privatized`), as
in the private count-min sketch of Pagh and Thorup (2022) used by PrivHP (Holland et
al. 2025, §3.3-3.4 and Lemma 2): every cell gets independent discrete Laplace noise.
One item changes exactly one cell per row, i.e. j cells by 1, so the table's L1
sensitivity is j under add/remove of one item and 2j under replacement of one item
(it leaves j cells and enters j others); noise of scale sensitivity/ε makes the
released table ε-DP (discrete Laplace mechanism), and every estimate read from it is
post-processing.

Hash functions are public and data-independent: row i of a sketch applies the
SplitMix64 finaliser to ``key XOR seed_i``, with seeds derived from ``hash_seed``.
(The paper's error analysis assumes fully random hashes; its privacy does not.)
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from continual_synth.mechanisms.accounting import check_neighbor, laplace_scale

__all__ = ["splitmix64", "row_seeds", "sketch_sensitivity", "dimensions_for",
           "overestimate_bound", "CountMinSketch"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def row_seeds(hash_seed: int, depth: int) -> np.ndarray:
    """Public per-row hash seeds of a sketch."""
    base = np.uint64(hash_seed & 0xFFFFFFFFFFFFFFFF)
    return splitmix64(base ^ splitmix64(np.arange(1, depth + 1, dtype=np.uint64)))


def sketch_sensitivity(depth: int, neighbor: str) -> int:
    """L1 sensitivity of a count-min table with ``depth`` rows: j (add/remove), 2j (replace)."""
    check_neighbor(neighbor)
    return depth if neighbor == "add-remove" else 2 * depth


def dimensions_for(eps_cm: float, delta_cm: float):
    """(width, depth) = (⌈e/ε_cm⌉, ⌈ln 1/δ_cm⌉) for the classical guarantee."""
    return int(math.ceil(math.e / eps_cm)), int(math.ceil(math.log(1.0 / delta_cm)))


def overestimate_bound(width: int, total: float) -> float:
    """ε_cm·‖f‖₁ with ε_cm = e/w: a noise-free estimate exceeds the true count by at most
    this, with probability ≥ 1 − e^(−j) per key (Cormode and Muthukrishnan 2005, Thm. 1)."""
    return math.e / width * total


class CountMinSketch:
    """A count-min table (int64 when exact, float64 after privatisation)."""

    def __init__(self, width: int, depth: int, hash_seed: int = 0,
                 table: Optional[np.ndarray] = None):
        if width < 1 or depth < 1:
            raise ValueError("sketch width and depth must be at least 1")
        self.width, self.depth, self.hash_seed = int(width), int(depth), int(hash_seed)
        self._seeds = row_seeds(self.hash_seed, self.depth)
        self.table = (np.zeros((self.depth, self.width), dtype=np.int64) if table is None
                      else table)
        if self.table.shape != (self.depth, self.width):
            raise ValueError(f"table shape {self.table.shape} is not {(self.depth, self.width)}")

    @property
    def counters(self) -> int:
        return self.depth * self.width

    def columns(self, keys: np.ndarray) -> np.ndarray:
        """j × len(keys) array of the column each row hashes each key to."""
        keys = np.asarray(keys, dtype=np.uint64)
        width = np.uint64(self.width)
        return np.stack([splitmix64(keys ^ seed) % width for seed in self._seeds]).astype(
            np.int64)

    def update(self, keys: np.ndarray, weights: Optional[np.ndarray] = None) -> None:
        """Add each key (with weight 1, or ``weights``) to one cell per row."""
        keys = np.asarray(keys, dtype=np.uint64)
        if keys.size == 0:
            return
        for row, cols in enumerate(self.columns(keys)):
            self.table[row] += np.bincount(cols, weights=weights, minlength=self.width
                                           ).astype(self.table.dtype)

    def add_table(self, table: np.ndarray) -> None:
        """Add another table of the same shape and hashes (merging is addition)."""
        self.table += table

    def merge(self, other: "CountMinSketch") -> "CountMinSketch":
        if (other.width, other.depth, other.hash_seed) != (self.width, self.depth,
                                                           self.hash_seed):
            raise ValueError("can only merge sketches with equal width, depth and hash seed")
        return CountMinSketch(self.width, self.depth, self.hash_seed, self.table + other.table)

    def estimate(self, keys: np.ndarray) -> np.ndarray:
        """Count-min estimate of each key: the minimum over rows of its cells."""
        keys = np.asarray(keys, dtype=np.uint64)
        if keys.size == 0:
            return np.zeros(0, dtype=self.table.dtype)
        cols = self.columns(keys)
        return np.min(self.table[np.arange(self.depth)[:, None], cols], axis=0)

    def privatized(self, sampler, epsilon: float, neighbor: str = "add-remove"
                   ) -> "CountMinSketch":
        """A copy with discrete Laplace noise of scale Δ/ε in every cell, Δ =
        :func:`sketch_sensitivity` (j under add/remove of one item, 2j under replace):
        the released table is ε-DP (Pagh and Thorup 2022; Holland et al. 2025, Lemma 2).
        Call it once per release; the exact table is never released."""
        scale = laplace_scale(sketch_sensitivity(self.depth, neighbor), epsilon)
        noise = sampler.discrete_laplace(scale, self.counters).reshape(self.depth, self.width)
        return CountMinSketch(self.width, self.depth, self.hash_seed,
                              self.table.astype(np.float64) + noise)
