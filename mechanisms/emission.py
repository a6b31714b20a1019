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

from typing import Dict, Optional, Tuple

import numpy as np

from continual_synth.mechanisms.panel import decode_windows

__all__ = ["PEOPLE_PER_SHARD", "shard_sizes", "split_counts", "assign_group_values",
           "WindowCodes", "WeightCodes", "extension_shard_plan", "period_shard_plan",
           "ShardPeople", "shard_rng"]


PEOPLE_PER_SHARD = 500_000


def shard_sizes(num_synthetic: int, num_shards: int) -> np.ndarray:
    """Sizes of ``num_shards`` shards summing to ``num_synthetic``: balanced over the
    fewest shards that hold at most :data:`PEOPLE_PER_SHARD` people each (at least one),
    rounded up to a power of two (at most ``num_shards``); the rest stay empty, so a small
    release is not scattered over many small files.

    The power of two is for the workers: a shard is one emission task, and 2M people make
    5 shards of 400 000 by the first rule, which 2 workers can only split 3 : 2 (the
    worker with 3 sets the wall time: bench/results/dask_scaling.md); 8 shards of
    250 000 split evenly over 2, 4 or 8."""
    needed = max(1, -(-int(num_synthetic) // PEOPLE_PER_SHARD))
    used = int(min(num_shards, 1 << (needed - 1).bit_length()))
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


def assign_group_values(group: np.ndarray, extension: np.ndarray,
                        rng: np.random.Generator) -> np.ndarray:
    """Values for people in groups: of the members of group g, ``extension[g, c]`` chosen
    uniformly at random get value c (rows of ``extension`` sum to the group sizes).

    Algorithm 1's "select p_{z1} indices I_{z1} from I_z" and Algorithm 2's "randomly
    select ẑ_b indices from I = {i : weight b − 1}" are both this draw.

    The members of each group, in the order they are held, receive the group's values
    (``extension[g, c]`` copies of each c) in a uniformly random order: a Fisher-Yates
    shuffle of each group's segment, O(n), rather than a sort by (group, random key),
    O(n log n).
    """
    groups, width = extension.shape
    small = groups <= np.iinfo(np.int16).max  # numpy's stable sort of int16 is a radix sort
    order = np.argsort(group.astype(np.int16) if small else group, kind="stable")
    sequence = np.repeat(np.tile(np.arange(width, dtype=np.int8), groups),
                         extension.reshape(-1))
    start = 0
    for end in np.cumsum(extension.sum(axis=1)):
        if end - start > 1:
            rng.shuffle(sequence[start:end])  # a view: shuffled in place
        start = end
    values = np.empty(group.size, dtype=np.int8)
    values[order] = sequence
    return values


class WindowCodes:
    """Algorithm 1's codes: a person's last k values (a window code, base |A|, earliest
    period first); its group is the last k − 1 values."""

    def __init__(self, alphabet_size: int, window: int):
        self.alphabet_size, self.window = alphabet_size, window
        self.num_groups = alphabet_size ** (window - 1)

    def group_of(self, codes: np.ndarray) -> np.ndarray:
        return codes % self.num_groups

    def next_codes(self, groups: np.ndarray, values: np.ndarray) -> np.ndarray:
        return groups * self.alphabet_size + values

    def creation_values(self, codes: np.ndarray) -> np.ndarray:
        """People created at t = k carry the values of periods 1..k (people × k)."""
        return decode_windows(codes, self.alphabet_size, self.window)

    def group_sizes(self, code_counts: np.ndarray) -> np.ndarray:
        """Per-shard group sizes from per-shard code counts (shards × |A|^k)."""
        return code_counts.reshape(code_counts.shape[0], self.alphabet_size, -1).sum(axis=1)

    def code_counts_after(self, extension_plan: np.ndarray) -> np.ndarray:
        """Group z extended by value c becomes window z·|A| + c."""
        return extension_plan.reshape(extension_plan.shape[0], -1)


class WeightCodes:
    """Algorithm 2's codes: a person's number of ones so far; groups are the weights."""

    def group_of(self, codes: np.ndarray) -> np.ndarray:
        return codes

    def next_codes(self, groups: np.ndarray, values: np.ndarray) -> np.ndarray:
        return groups + values

    def creation_values(self, codes: np.ndarray) -> np.ndarray:
        """People are created at period 1 before its values are drawn: none yet."""
        return np.zeros((codes.size, 0), dtype=np.int8)

    def group_sizes(self, code_counts: np.ndarray) -> np.ndarray:
        return code_counts

    def code_counts_after(self, extension_plan: np.ndarray) -> np.ndarray:
        """Weight w extended by value v becomes weight w + v."""
        shards, groups, _ = extension_plan.shape
        out = np.zeros((shards, groups + 1), dtype=np.int64)
        out[:, :groups] += extension_plan[:, :, 0]
        out[:, 1:] += extension_plan[:, :, 1]
        return out


def extension_shard_plan(shard_group_sizes: np.ndarray, extension: np.ndarray,
                         rng: np.random.Generator) -> np.ndarray:
    """Per-shard extension counts: (shards × groups × |A|).

    ``shard_group_sizes[j, z]`` is how many of shard j's people are in group z.
    """
    shards, groups = shard_group_sizes.shape
    out = np.zeros((shards,) + extension.shape, dtype=np.int64)
    for z in range(groups):
        out[:, z, :] = split_counts(extension[z], shard_group_sizes[:, z], rng)
    return out


def period_shard_plan(rules, initial: Optional[np.ndarray], extension: Optional[np.ndarray],
                      code_counts: Optional[np.ndarray], num_shards: int,
                      rng: np.random.Generator) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
    """Split one period's counts across shards: ``(plan, per-shard code counts after)``.

    ``initial`` (code counts of people created this period) is split over balanced shard
    sizes; ``extension`` (groups × values) over each shard's group sizes.
    """
    plan: Dict[str, np.ndarray] = {}
    if initial is not None:
        sizes = shard_sizes(int(np.sum(initial)), num_shards)
        plan["initial"] = code_counts = split_counts(initial, sizes, rng)
    if extension is not None:
        plan["extension"] = extension_shard_plan(rules.group_sizes(code_counts), extension, rng)
        code_counts = rules.code_counts_after(plan["extension"])
    return plan, code_counts


class ShardPeople:
    """One shard's synthetic people (contiguous ids) and their current codes."""

    def __init__(self, first_id: int, codes: np.ndarray, rules):
        self.first_id = int(first_id)
        self.codes = np.asarray(codes, dtype=np.int64)
        self.rules = rules

    @property
    def ids(self) -> np.ndarray:
        return np.arange(self.first_id, self.first_id + self.codes.size, dtype=np.int64)

    @classmethod
    def create(cls, first_id: int, code_counts: np.ndarray, rules,
               rng: np.random.Generator) -> Tuple["ShardPeople", np.ndarray]:
        """``code_counts[c]`` people with code c, in random order, and the values they
        carry from creation (people × periods; Algorithm 1: periods 1..k)."""
        codes = np.repeat(np.arange(code_counts.size, dtype=np.int64), code_counts)
        rng.shuffle(codes)
        return cls(first_id, codes, rules), rules.creation_values(codes)

    def extend(self, extension: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Of group g's members, ``extension[g, c]`` chosen at random get value c; return
        the values and advance the codes."""
        groups = self.rules.group_of(self.codes)
        values = assign_group_values(groups, extension, rng)
        self.codes = self.rules.next_codes(groups, values)
        return values


def shard_rng(seed: int, period: int, shard: int) -> np.random.Generator:
    """The post-processing generator of one shard at one period: re-emitting a period
    with the same seed reproduces the same records."""
    return np.random.default_rng([int(seed), int(period), int(shard)])
