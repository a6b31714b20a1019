"""Embedded demo panels: a simulated SIPP-like poverty panel and the all-ones panel.

The project never downloads data, so the demo of the fixed-window synthesizer
(Bun, Gaboardi, Neunhoeffer, Zhang 2024, Algorithm 1) runs on panels generated
here.

* :func:`generate_panel` imitates the *shape* of the paper's SIPP experiment (§5:
  23 374 households, 12 monthly reports of 2021, 1 = household income below the
  poverty threshold that month).  It is **simulated, not real SIPP data**: a
  Markov chain per household with a latent household type, tuned to a monthly
  poverty rate of about 11 % and persistent poverty spells.
* :func:`all_ones_panel` is the extreme simulation of App. C.1 (n = 25 000,
  T = 12, every report is 1).

Both return the long format the pipelines read: columns ``id`` (int64),
``period`` (int32, 1..T) and ``value`` (int64), one row per (id, period),
sorted by id then period.
"""
from __future__ import annotations

from typing import NamedTuple, Tuple

import numpy as np
import pyarrow as pa

__all__ = ["HouseholdType", "HOUSEHOLD_TYPES", "generate_panel", "all_ones_panel",
           "panel_table"]


class HouseholdType(NamedTuple):
    """A latent household type and its two-state monthly poverty chain.

    ``entry``: P(poor this month | not poor last month).
    ``persistence``: P(poor this month | poor last month).
    """

    name: str
    share: float
    entry: float
    persistence: float

    @property
    def stationary_rate(self) -> float:
        """Long-run share of months in poverty: entry / (entry + 1 − persistence)."""
        return self.entry / (self.entry + 1.0 - self.persistence)


#: Household heterogeneity of the simulated panel.  Overall (stationary) values:
#: monthly poverty rate ≈ 0.11, P(poor_t | poor_{t−1}) ≈ 0.87,
#: P(poor_t | not poor_{t−1}) ≈ 0.016.
HOUSEHOLD_TYPES: Tuple[HouseholdType, ...] = (
    HouseholdType("chronic", share=0.06, entry=0.30, persistence=0.97),
    HouseholdType("transitory", share=0.25, entry=0.05, persistence=0.80),
    HouseholdType("secure", share=0.69, entry=0.004, persistence=0.50),
)


def generate_panel(num_households: int = 23_000, periods: int = 12,
                   seed: int = 2021) -> pa.Table:
    """A simulated SIPP-like monthly poverty panel (not real SIPP data).

    Each household draws a latent type from :data:`HOUSEHOLD_TYPES` (chronic
    poor 6 %, transitory 25 %, secure 69 %), starts in its type's stationary
    distribution and then follows the type's two-state Markov chain, so the
    monthly poverty rate is stable over time (≈ 11 %), poverty spells persist
    (P(poor_t | poor_{t−1}) ≈ 0.87) and entries are rare (≈ 1.6 % a month).

    Args:
        num_households: n, the number of households (the paper's SIPP sample
            has 23 374).
        periods: T, the number of monthly reports (12 in the paper).
        seed: seed of ``numpy.random.default_rng``; equal seeds give equal panels.

    Returns:
        Long-format table ``id``, ``period``, ``value`` (1 = in poverty that month).
    """
    if num_households < 1 or periods < 1:
        raise ValueError("num_households and periods must be positive")
    rng = np.random.default_rng(seed)
    shares = np.array([t.share for t in HOUSEHOLD_TYPES])
    household_type = rng.choice(len(HOUSEHOLD_TYPES), size=num_households, p=shares / shares.sum())
    entry = np.array([t.entry for t in HOUSEHOLD_TYPES])[household_type]
    persistence = np.array([t.persistence for t in HOUSEHOLD_TYPES])[household_type]
    stationary = np.array([t.stationary_rate for t in HOUSEHOLD_TYPES])[household_type]

    uniforms = rng.random((num_households, periods))
    poor = np.empty((num_households, periods), dtype=bool)
    poor[:, 0] = uniforms[:, 0] < stationary
    for month in range(1, periods):  # one vectorised step per month
        stay_or_enter = np.where(poor[:, month - 1], persistence, entry)
        poor[:, month] = uniforms[:, month] < stay_or_enter
    return panel_table(poor.astype(np.int64))


def all_ones_panel(num_people: int = 25_000, periods: int = 12) -> pa.Table:
    """The extreme simulation of App. C.1: every one of n people reports 1 at every period."""
    return panel_table(np.ones((num_people, periods), dtype=np.int64))


def panel_table(values: np.ndarray, first_id: int = 1) -> pa.Table:
    """A (people × periods) array as a long-format table sorted by id then period.

    Person ``i`` (row ``i``) gets id ``first_id + i``; column ``j`` is period ``j + 1``.
    """
    values = np.asarray(values)
    num_people, periods = values.shape
    return pa.table({
        "id": pa.array(np.repeat(np.arange(first_id, first_id + num_people, dtype=np.int64),
                                 periods)),
        "period": pa.array(np.tile(np.arange(1, periods + 1, dtype=np.int32), num_people)),
        "value": pa.array(values.reshape(-1).astype(np.int64)),
    })
