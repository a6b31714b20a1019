"""Materialising the synthetic people of Algorithm 1 in shards.

The synthesizer decides counts only (how many people of group z get value c).  To
keep the synthetic panel off any single worker, synthetic people are split into
shards of contiguous ids, and each period's counts are split across shards by a
multivariate hypergeometric draw given each shard's group sizes.  Choosing the
shard split this way and then, inside every shard, which members get which value
uniformly at random, is exactly Algorithm 1's "select p^t_{z1} indices I_{z1} from
I_z" uniformly at random over the whole group.  This is post-processing of the
private counts; its randomness is not privacy noise.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

from continual_synth.mechanisms.panel import decode_windows


PEOPLE_PER_SHARD = 500_000


def shard_sizes(num_synthetic: int, num_shards: int) -> np.ndarray:
    """Sizes of ``num_shards`` shards summing to ``num_synthetic``: balanced over as many
    shards as hold about :data:`PEOPLE_PER_SHARD` people each (at least one); the rest
    stay empty, so a small release is not scattered over many small files."""
    used = int(min(num_shards, max(1, -(-int(num_synthetic) // PEOPLE_PER_SHARD))))
    base, extra = divmod(int(num_synthetic), used)
    return np.array([base + (j < extra) if j < used else 0 for j in range(num_shards)],
                    dtype=np.int64)


def split_counts(counts: np.ndarray, quotas: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Split ``counts`` (items of each colour) among quotas: (len(quotas) × colours).

    Sequential multivariate hypergeometric draws: shard j takes quotas[j] items
    uniformly at random without replacement from what the earlier shards left.
    """
    remaining = np.asarray(counts, dtype=np.int64).copy()
    out = np.zeros((len(quotas), remaining.size), dtype=np.int64)
    for j, quota in enumerate(quotas):
        if quota == remaining.sum():
            out[j] = remaining
        elif quota:
            out[j] = rng.multivariate_hypergeometric(remaining, int(quota), method="marginals")
        remaining -= out[j]
    return out


def initial_shard_plan(initial_counts: np.ndarray, num_shards: int,
                       rng: np.random.Generator) -> np.ndarray:
    """Per-shard window counts at t = k: (shards × |A|^k)."""
    sizes = shard_sizes(int(initial_counts.sum()), num_shards)
    return split_counts(initial_counts, sizes, rng)


def extension_shard_plan(shard_group_sizes: np.ndarray, extension: np.ndarray,
                         rng: np.random.Generator) -> np.ndarray:
    """Per-shard extension counts at t > k: (shards × groups × |A|).

    ``shard_group_sizes[j, z]`` is how many of shard j's people are in group z.
    """
    shards, groups = shard_group_sizes.shape
    out = np.zeros((shards,) + extension.shape, dtype=np.int64)
    for z in range(groups):
        out[:, z, :] = split_counts(extension[z], shard_group_sizes[:, z], rng)
    return out


def group_sizes_after(window_counts: np.ndarray, alphabet_size: int) -> np.ndarray:
    """Group sizes (last k−1 values) implied by per-shard window counts (shards × |A|^k)."""
    shards = window_counts.shape[0]
    return window_counts.reshape(shards, alphabet_size, -1).sum(axis=1)


def assign_group_values(group: np.ndarray, extension: np.ndarray,
                        rng: np.random.Generator) -> np.ndarray:
    """Values for people in groups: of the members of group g, ``extension[g, c]`` chosen
    uniformly at random get value c (rows of ``extension`` sum to the group sizes).

    Algorithm 1's "select p_{z1} indices I_{z1} from I_z" and Algorithm 2's "randomly
    select ẑ_b indices from I = {i : weight b − 1}" are both this draw.
    """
    groups, width = extension.shape
    order = np.lexsort((rng.random(group.size), group))
    values = np.empty(group.size, dtype=np.int8)
    values[order] = np.repeat(np.tile(np.arange(width, dtype=np.int8), groups),
                              extension.reshape(-1))
    return values


class ShardPeople:
    """One shard's synthetic people and their current window codes."""

    def __init__(self, first_id: int, window_codes: np.ndarray):
        self.first_id = int(first_id)
        self.window_codes = np.asarray(window_codes, dtype=np.int64)

    @property
    def ids(self) -> np.ndarray:
        return np.arange(self.first_id, self.first_id + self.window_codes.size, dtype=np.int64)

    @classmethod
    def create(cls, first_id: int, window_counts: np.ndarray, alphabet_size: int, window: int,
               rng: np.random.Generator) -> Tuple["ShardPeople", np.ndarray]:
        """People for t = k: ``(shard, values)`` with values an n_j × k matrix of
        alphabet indices for periods 1..k, in random order."""
        codes = np.repeat(np.arange(window_counts.size, dtype=np.int64), window_counts)
        rng.shuffle(codes)
        return cls(first_id, codes), decode_windows(codes, alphabet_size, window)

    def extend(self, extension: np.ndarray, alphabet_size: int, window: int,
               rng: np.random.Generator) -> np.ndarray:
        """Give each member of group z one value so that extension[z, c] get c; return
        the new values (alphabet indices) and advance the window codes."""
        group = self.window_codes % alphabet_size ** (window - 1)
        values = assign_group_values(group, extension, rng)
        self.window_codes = group * alphabet_size + values
        return values


def shard_rng(seed: int, period: int, shard: int) -> np.random.Generator:
    """The post-processing generator of one shard at one period: re-emitting a period
    with the same seed reproduces the same records."""
    return np.random.default_rng([int(seed), int(period), int(shard)])


def plan_all_shards(releases: List, num_shards: int, alphabet_size: int,
                    rng: np.random.Generator) -> Dict[int, np.ndarray]:
    """Per-shard plans for a sequence of releases (first one at t = k): period → array
    (shards × |A|^k at t = k, shards × groups × |A| after)."""
    plans: Dict[int, np.ndarray] = {}
    sizes = None
    for release in releases:
        if release.initial_counts is not None:
            plan = initial_shard_plan(release.initial_counts, num_shards, rng)
            sizes = group_sizes_after(plan, alphabet_size)
        else:
            plan = extension_shard_plan(sizes, release.extension, rng)
            sizes = group_sizes_after(plan.reshape(num_shards, -1), alphabet_size)
        plans[release.period] = plan
    return plans
