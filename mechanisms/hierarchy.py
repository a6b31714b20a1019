"""Hierarchical binary decomposition of a box in R^d (Holland et al. 2025, §4).

The data domain is a box ``[low_1, high_1] × … × [low_d, high_d]`` given by the user
(public, fixed before any data is seen).  Points are scaled to Ω = [0,1]^d, which
is split hierarchically in halves: going from level ℓ to level ℓ + 1 cuts coordinate
``ℓ mod d`` in its middle.  A level-ℓ subdomain is therefore indexed by a bit string
θ of length ℓ (stored as an unsigned integer whose most significant of the ℓ bits is
the first cut); its children are ``2θ`` (lower half) and ``2θ + 1`` (upper half), and
its ancestor at level m < ℓ is ``θ >> (ℓ − m)``.  After ℓ cuts coordinate c has been
halved ``m_c(ℓ) = ceil((ℓ − c) / d)`` times, so a level-ℓ cell has side 2^(−m_c(ℓ))
along c and Euclidean diameter ≈ √d · 2^(−ℓ/d).

Everything here is public, data-independent geometry (no privacy content).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms.errors import InputError, row_label
from continual_synth.mechanisms.record_checks import Problems

__all__ = ["MAX_DEPTH", "cuts_per_coordinate", "cell_sides", "diameter", "leaf_index",
           "ancestors", "cell_boxes", "Bounds", "unit_bounds", "check_points"]

MAX_DEPTH = 62  # θ at the deepest level must fit in an unsigned 64-bit integer


def cuts_per_coordinate(level: int, dims: int) -> np.ndarray:
    """``m_c(level)`` for c = 0..d−1: how many times coordinate c has been halved."""
    c = np.arange(dims)
    return np.maximum(0, -((c - level) // dims)).astype(np.int64)  # ceil((level − c)/d)


def cell_sides(level: int, dims: int) -> np.ndarray:
    """Side lengths (in [0,1]^d units) of a level-``level`` cell."""
    return np.ldexp(1.0, -cuts_per_coordinate(level, dims))


def diameter(level: int, dims: int) -> float:
    """Euclidean diameter of a level-``level`` cell of [0,1]^d."""
    return float(np.sqrt(np.sum(cell_sides(level, dims) ** 2)))


def leaf_index(unit_points: np.ndarray, level: int) -> np.ndarray:
    """θ (uint64) of the level-``level`` cell holding each row of ``unit_points`` (n × d,
    values in [0,1]; a point on an upper cell boundary belongs to the upper cell, the
    point 1.0 to the last cell).  The ancestors follow by shifting: ``θ >> (level − m)``."""
    if not 0 <= level <= MAX_DEPTH:
        raise ValueError(f"level must be in 0..{MAX_DEPTH}, got {level}")
    points = np.asarray(unit_points, dtype=np.float64)
    if points.ndim != 2:
        raise ValueError("unit_points must be a 2-D array (n × d)")
    n, dims = points.shape
    theta = np.zeros(n, dtype=np.uint64)
    if level == 0 or n == 0:
        return theta
    cuts = cuts_per_coordinate(level, dims)
    # integer cell coordinate along each axis at full resolution of this level
    q = []
    for c in range(dims):
        m = int(cuts[c])
        cells = np.floor(np.ldexp(points[:, c], m))
        q.append(np.clip(cells, 0, float(2 ** m - 1)).astype(np.uint64))
    one = np.uint64(1)
    for step in range(level):  # interleave: cut number `step` is on coordinate step mod d
        c, k = step % dims, step // dims
        shift = np.uint64(int(cuts[c]) - 1 - k)
        theta = (theta << one) | ((q[c] >> shift) & one)
    return theta


def ancestors(theta: np.ndarray, level: int, to_level: int) -> np.ndarray:
    """θ at ``to_level`` (≤ ``level``) of each level-``level`` cell θ."""
    if to_level > level:
        raise ValueError("to_level must not exceed level")
    return np.asarray(theta, dtype=np.uint64) >> np.uint64(level - to_level)


def cell_boxes(theta: np.ndarray, level: int, dims: int) -> Tuple[np.ndarray, np.ndarray]:
    """(lower corners, side lengths) in [0,1]^d of the level-``level`` cells ``theta``:
    arrays of shape (len(theta), d) and (d,)."""
    theta = np.asarray(theta, dtype=np.uint64)
    cuts = cuts_per_coordinate(level, dims)
    q = np.zeros((theta.size, dims), dtype=np.uint64)
    one = np.uint64(1)
    for step in range(level):
        c = step % dims
        bit = (theta >> np.uint64(level - 1 - step)) & one
        q[:, c] = (q[:, c] << one) | bit
    sides = np.ldexp(1.0, -cuts)
    return q.astype(np.float64) * sides, sides


@dataclass(frozen=True)
class Bounds:
    """The public bounding box of the data: ``low[c] ≤ x_c ≤ high[c]``."""

    low: Tuple[float, ...]
    high: Tuple[float, ...]

    def __post_init__(self):
        if len(self.low) != len(self.high) or not self.low:
            raise InputError("bounds need one low:high pair per column")
        for c, (lo, hi) in enumerate(zip(self.low, self.high)):
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise InputError(f"--bounds: pair {c + 1} must be finite with low < high, "
                                 f"got {lo}:{hi}")

    @property
    def dims(self) -> int:
        return len(self.low)

    @classmethod
    def parse(cls, text: str, dims: int) -> "Bounds":
        """``"0:1,-5:5"`` → Bounds((0, -5), (1, 5)); one pair per column (or one pair for all)."""
        pairs = [p.strip() for p in str(text).split(",") if p.strip()]
        if len(pairs) == 1 and dims > 1:
            pairs = pairs * dims
        if len(pairs) != dims:
            raise InputError(f"--bounds needs {dims} low:high pair(s) (one per column), "
                             f"got {text!r}")
        low, high = [], []
        for pair in pairs:
            try:
                lo, hi = (float(v) for v in pair.split(":"))
            except ValueError:
                raise InputError(f"--bounds: cannot read {pair!r} as low:high") from None
            low.append(lo)
            high.append(hi)
        return cls(tuple(low), tuple(high))

    def to_unit(self, points: np.ndarray) -> np.ndarray:
        low, high = np.asarray(self.low), np.asarray(self.high)
        return np.clip((np.asarray(points, dtype=np.float64) - low) / (high - low), 0.0, 1.0)

    def from_unit(self, unit: np.ndarray) -> np.ndarray:
        low, high = np.asarray(self.low), np.asarray(self.high)
        return low + np.asarray(unit, dtype=np.float64) * (high - low)

    def to_list(self) -> list:
        return [[lo, hi] for lo, hi in zip(self.low, self.high)]


def unit_bounds(dims: int) -> Bounds:
    return Bounds((0.0,) * dims, (1.0,) * dims)


def check_points(points: np.ndarray, bounds: Bounds, columns: Sequence[str], clip: bool,
                 where: str = "input", row_offset: int = 0,
                 hint: Optional[str] = None,
                 problems: Optional[Problems] = None) -> Tuple[np.ndarray, int]:
    """Validate an n × d float array against ``bounds``.

    Non-finite values are always an :class:`InputError` (naming the column and row);
    values outside the bounds are an error unless ``clip``, in which case they are
    moved onto the bounds (the error's ``hint``: default, widen ``--bounds`` or pass
    ``--clip``).  Given ``problems`` that drop, such points are added to them instead
    (the caller leaves them out).  Returns (points scaled to [0,1]^d, number of clipped
    rows among the valid ones).
    """
    points = np.asarray(points, dtype=np.float64)
    problems = Problems(points.shape[0]) if problems is None else problems
    bad = ~np.isfinite(points)
    problems.add(bad.any(axis=1) & ~problems.invalid, lambda row: (
        f"{where}: column {columns[_first(bad[row])]!r} holds a non-finite value "
        f"({float(points[row, _first(bad[row])])}) at {row_label(row, row_offset)}"),
        lambda row: f"column {columns[_first(bad[row])]!r} holds a non-finite value "
                    f"({float(points[row, _first(bad[row])])})")
    low, high = np.asarray(bounds.low), np.asarray(bounds.high)
    with np.errstate(invalid="ignore"):
        outside = (points < low) | (points > high)
    clipped = 0
    if outside.any():
        if not clip:
            problems.add(outside.any(axis=1) & ~problems.invalid, lambda row: (
                f"{where}: column {columns[_first(outside[row])]!r} value "
                f"{float(points[row, _first(outside[row])]):g} at "
                f"{row_label(row, row_offset)} is outside the bounds "
                f"{bounds.low[_first(outside[row])]}:{bounds.high[_first(outside[row])]} "
                f"({hint or 'widen --bounds or pass --clip'})"),
                lambda row: f"column {columns[_first(outside[row])]!r} value "
                            f"{float(points[row, _first(outside[row])]):g} is outside the "
                            f"bounds {bounds.low[_first(outside[row])]}:"
                            f"{bounds.high[_first(outside[row])]}")
        else:
            clipped = int((outside.any(axis=1) & ~problems.invalid).sum())
    kept = np.where(problems.invalid[:, None], low, points)  # invalid rows: any point, not NaN
    return bounds.to_unit(kept), clipped


def _first(row_mask: np.ndarray) -> int:
    """The first column a row's mask marks."""
    return int(np.flatnonzero(row_mask)[0])
