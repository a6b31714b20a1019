"""Consistency step of Algorithm 1 (Bun et al. 2024, §3.1, Eqs. (1)-(4)), for any alphabet.

At time t each synthetic person belongs to the group z of its last k−1 values.
The group's size G_z = Σ_a p^{t−1}_{az} is fixed; the noisy targets Ĉ^t_{zc}
(c in the alphabet A) must be adjusted to sum to G_z:

    Δ_z = (G_z − Σ_c Ĉ^t_{zc}) / |A|,       p^t_{zc} = Ĉ^t_{zc} + Δ_z  (then rounded).

With |A| = 2 this is the paper's Δ_z = ½(p_{0z} + p_{1z} − Ĉ_{z0} − Ĉ_{z1}).  Every
p^t_{zc} has the same fractional part r/|A|; rounding up exactly r of the |A|
entries of a group, chosen uniformly at random, keeps the group's size and
rounds each entry up with probability r/|A| (unbiased).  For |A| = 2 this is the
paper's b_z ∈ {−½, ½}.

Padding makes a negative target unlikely (probability ≤ β, Theorem 3.2), not
impossible (shared/papers/README.md, point 4).  A group whose rounded targets
leave [0, G_z] is clamped inside the group by integer water-filling (the integer
form of the Euclidean projection onto {x ≥ 0, Σx = G_z}); such groups are counted
and reported as clamp events.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

__all__ = ["unbiased_group_rounding", "clamp_into_group", "consistent_extension"]


def unbiased_group_rounding(numerators: np.ndarray, denominator: int,
                            rng: np.random.Generator) -> np.ndarray:
    """Round the rows of ``numerators / denominator`` to integers keeping row sums.

    Each row must sum to a multiple of ``denominator``.  Entry i of a row rounds up
    with probability (its fractional part), exactly: systematic sampling with an
    integer random start over a random permutation of the row.  When all fractional
    parts of a row are equal, the set rounded up is a uniformly random subset.
    """
    numerators = np.asarray(numerators, dtype=np.int64)
    rows, width = numerators.shape
    floor, remainder = np.divmod(numerators, denominator)
    if not (remainder.sum(axis=1) % denominator == 0).all():
        raise ValueError("each row must sum to a multiple of the denominator")
    order = rng.permuted(np.tile(np.arange(width), (rows, 1)), axis=1)
    rem_perm = np.take_along_axis(remainder, order, axis=1)
    start = rng.integers(0, denominator, size=(rows, 1))
    cumulative = np.cumsum(rem_perm, axis=1) + start
    previous = cumulative - rem_perm
    up_perm = cumulative // denominator - previous // denominator
    up = np.empty_like(up_perm)
    np.put_along_axis(up, order, up_perm, axis=1)
    return floor + up


def clamp_into_group(counts: np.ndarray, group_size: int, rng: np.random.Generator) -> np.ndarray:
    """Integer Euclidean projection onto {x ≥ 0 integer, Σx = ``group_size``} of counts
    that already sum to ``group_size`` but have negative entries.

    The real projection is x_i = max(v_i − τ, 0) with survivors S = {i : v_i > τ} and
    τ = (Σ_S v − G)/|S| (the standard sorting algorithm).  Here every survivor gives up
    ⌊τ⌋ and a uniformly random (Σ_S v − G) mod |S| of them one more, so the deficit is
    taken evenly; survivors stay ≥ 0 because v_i > τ implies v_i ≥ ⌈τ⌉.
    """
    values = np.asarray(counts, dtype=np.int64)
    if group_size < 0 or values.sum() != group_size:
        raise ValueError("counts must sum to a non-negative group size")
    if group_size == 0:
        return np.zeros_like(values)
    descending = np.sort(values)[::-1]
    excess = np.cumsum(descending) - group_size
    sizes = np.arange(1, values.size + 1)
    survivors = int(np.flatnonzero(descending * sizes > excess)[-1]) + 1
    cut, extra = divmod(int(excess[survivors - 1]), survivors)
    # survivors are the `survivors` largest values; ties at the threshold broken at random
    order = np.lexsort((rng.random(values.size), -values))[:survivors]
    out = np.zeros_like(values)
    out[order] = values[order] - cut
    if extra:
        out[rng.choice(order, size=extra, replace=False)] -= 1
    return out


def consistent_extension(group_sizes: np.ndarray, noisy_targets: np.ndarray,
                         rng: np.random.Generator) -> Tuple[np.ndarray, int]:
    """One consistency step: ``(extension counts, clamp events)``.

    ``group_sizes``: G_z for the |A|^(k−1) groups.  ``noisy_targets``: Ĉ^t_{zc} as a
    (groups × |A|) integer array.  Returns p^t_{zc} (same shape), rows summing to G_z,
    all entries ≥ 0, and the number of groups that had to be clamped.
    """
    group_sizes = np.asarray(group_sizes, dtype=np.int64)
    targets = np.asarray(noisy_targets, dtype=np.int64)
    width = targets.shape[1]
    # |A| · (Ĉ_zc + Δ_z) = |A| Ĉ_zc + G_z − Σ_c Ĉ_zc: an exact integer numerator.
    numerators = width * targets + (group_sizes - targets.sum(axis=1))[:, None]
    counts = unbiased_group_rounding(numerators, width, rng)
    bad = np.flatnonzero((counts < 0).any(axis=1))
    for row in bad:
        counts[row] = clamp_into_group(counts[row], int(group_sizes[row]), rng)
    return counts, int(bad.size)
