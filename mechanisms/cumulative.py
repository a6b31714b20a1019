"""Algorithm 2 of Bun, Gaboardi, Neunhoeffer and Zhang (2024): private synthetic data
preserving cumulative time queries, as a pure state machine.

For every threshold b = 1..T a private stream counter M_b counts
z_b^t = #{i : x_i^1 + … + x_i^{t−1} = b − 1 and x_i^t = 1} (people whose number of
ones reaches b at time t); counter b starts at time b (horizon T − b + 1).  Each
period, for b = 1..t:

    S̃_b^t = M_b(z_b^1..z_b^t)  (rounded to an integer: post-processing)
    Ŝ_b^t = min(max(S̃_b^t, Ŝ_b^{t−1}), Ŝ_{b−1}^{t−1})          (monotonisation)
    ẑ_b^t = Ŝ_b^t − Ŝ_b^{t−1}  synthetic people of weight b − 1 get a 1

with Ŝ_0^t = n for all t (shared/papers/README.md point 3: S_0 is not counted with
noise when n is public; under ``add-remove`` n is private and is released once with
discrete Gaussian noise from a share of ρ, unless the user declares it public).

Privacy (Theorem 4.1).  One person's reports reach each threshold b at most once,
so each counter sees a stream in which one entry changes by 1 under add-remove and
two entries (one down, one up) under replace (``entries_changed`` = 1 or 2); the
counters compose: ρ = ρ_n + Σ_b ρ_b.  Budget split (App. B): for tree counters
ρ_b ∝ max(⌈log2(T − b + 1)⌉, 1)³; for any other counter ρ_b ∝ its maximum variance at
unit budget over its horizon, which equalises the counters' worst-case standard
deviation.  The ledger is charged ρ_b when counter b starts (time b).

Accuracy (Lemma 4.2, Corollary B.1).  Monotonisation does not increase the worst
error, so max_{b,t} |Ŝ_b^t − S_b^t| ≤ max_{b,t} |S̃_b^t − S_b^t| (+½ for rounding a
real-valued counter).  The manifest reports the Corollary B.1 bound and the bound from
the counters' exact variances (sub-Gaussian tails, union over the T(T+1)/2 pairs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from continual_synth.mechanisms import accounting
from continual_synth.mechanisms.errors import (ParameterError, check_next_period, positive_real,
                                               probability, whole_number)
from continual_synth.mechanisms.counters import StreamCounter, make_counter, max_variance
from continual_synth.mechanisms.samplers import Sampler

ALGORITHM = "bun2024-algorithm-2-cumulative"
MAX_HORIZON = 100_000  # T counters run side by side; beyond this the state outgrows memory


@dataclass(frozen=True)
class CumulativeConfig:
    """Public parameters of one cumulative release (all go into the manifest)."""

    horizon: int
    rho: float
    neighbor: str = "replace"
    counter: str = "tree"
    beta: float = 0.05
    delta: float = 1e-6
    population_share: float = 0.02
    public_population: bool = False

    def __post_init__(self):
        object.__setattr__(self, "horizon", whole_number("horizon", self.horizon))
        if self.horizon > MAX_HORIZON:
            raise ParameterError("horizon", f"{self.horizon} would run {self.horizon} private "
                                 f"counters (one per threshold b = 1..T); at most "
                                 f"{MAX_HORIZON} are supported")
        positive_real("rho", self.rho)
        probability("beta", self.beta)
        probability("delta", self.delta)
        probability("population_share", self.population_share)
        accounting.check_neighbor(self.neighbor)
        self.counter_rhos  # validates the counter kind

    @property
    def entries_changed(self) -> int:
        """Stream entries of one counter that one person's change moves (papers README 1)."""
        return 2 if self.neighbor == "replace" else 1

    @property
    def noisy_population(self) -> bool:
        """n is private (add-remove) and not declared public: released once with noise."""
        return self.neighbor == "add-remove" and not self.public_population

    @property
    def population_rho(self) -> float:
        return self.rho * self.population_share if self.noisy_population else 0.0

    @property
    def population_variance(self) -> float:
        """σ² of the noisy n: sensitivity 1 under add-remove."""
        return accounting.gaussian_sigma2(1.0, self.population_rho)

    @property
    def counter_horizons(self) -> np.ndarray:
        """Counter b (b = 1..T) runs from time b to T: horizon T − b + 1."""
        return self.horizon - np.arange(1, self.horizon + 1) + 1

    @property
    def counter_rhos(self) -> np.ndarray:
        """ρ_b for b = 1..T (App. B for trees; equal worst-case std for other counters)."""
        budget = self.rho - self.population_rho
        if self.counter == "tree":
            weights = np.maximum(np.ceil(np.log2(self.counter_horizons)), 1) ** 3
        else:
            weights = np.array([max_variance(self.counter, int(h), rho=1.0,
                                             entries_changed=self.entries_changed)
                                for h in self.counter_horizons])
        return budget * weights / weights.sum()

    def counter_for(self, threshold: int) -> StreamCounter:
        """A fresh counter for threshold b, calibrated to ρ_b."""
        return make_counter(self.counter, int(self.counter_horizons[threshold - 1]),
                            rho=float(self.counter_rhos[threshold - 1]),
                            entries_changed=self.entries_changed)

    @property
    def corollary_b1_bound(self) -> float:
        """Corollary B.1 (counts, β* = β): √(Σ_b max(⌈log2(T−b+1)⌉,1)³ / ρ · log(T/β)).
        Stated for tree counters under the paper's add-remove calibration."""
        levels = np.maximum(np.ceil(np.log2(self.counter_horizons)), 1) ** 3
        return math.sqrt(levels.sum() / (self.rho - self.population_rho)
                         * math.log(self.horizon / self.beta))

    @property
    def variance_bound(self) -> float:
        """With probability ≥ 1 − β every |S̃_b^t − S_b^t| ≤ this (counts): sub-Gaussian
        tails of the counters' exact variances, union over the T(T+1)/2 (b, t) pairs."""
        pairs = self.horizon * (self.horizon + 1) / 2
        worst = max(max_variance(self.counter, int(h), rho=float(r),
                                 entries_changed=self.entries_changed)
                    for h, r in zip(self.counter_horizons, self.counter_rhos))
        return math.sqrt(2 * worst * math.log(2 * pairs / self.beta))

    def to_dict(self) -> Dict:
        return {k: getattr(self, k) for k in ("horizon", "rho", "neighbor", "counter", "beta",
                                              "delta", "population_share",
                                              "public_population")}

    @classmethod
    def from_dict(cls, data: Dict) -> "CumulativeConfig":
        return cls(**{k: data[k] for k in ("horizon", "rho", "neighbor", "counter", "beta",
                                           "delta", "population_share", "public_population")})


@dataclass
class CumulativeState:
    """What Algorithm 2 carries between periods (synthetic side plus the counters).

    ``released[b]`` is Ŝ_b^t for b = 0..T (Ŝ_0 = synthetic population size).
    """

    config: CumulativeConfig
    ledger: accounting.BudgetLedger
    period: int = 0
    released: Optional[np.ndarray] = None
    counters: List[StreamCounter] = field(default_factory=list)
    monotonised: int = 0

    @classmethod
    def initial(cls, config: CumulativeConfig) -> "CumulativeState":
        return cls(config=config, ledger=accounting.BudgetLedger(total=config.rho, unit="rho"))

    @property
    def num_synthetic(self) -> int:
        return 0 if self.released is None else int(self.released[0])

    def to_dict(self) -> Dict:
        return {"config": self.config.to_dict(), "ledger": self.ledger.to_dict(),
                "period": self.period,
                "released": None if self.released is None else self.released.tolist(),
                "counters": [c.to_dict() for c in self.counters],
                "monotonised": self.monotonised}

    @classmethod
    def from_dict(cls, data: Dict) -> "CumulativeState":
        released = data["released"]
        return cls(config=CumulativeConfig.from_dict(data["config"]),
                   ledger=accounting.BudgetLedger.from_dict(data["ledger"]),
                   period=int(data["period"]),
                   released=None if released is None else np.asarray(released, np.int64),
                   counters=[StreamCounter.from_dict(c) for c in data["counters"]],
                   monotonised=int(data["monotonised"]))


@dataclass(frozen=True)
class CumulativeRelease:
    """One period's plan: ``extension[w, v]`` synthetic people of weight w get value v."""

    period: int
    extension: np.ndarray
    num_synthetic: int


def period_cost(state: CumulativeState, period: int) -> float:
    """ρ charged at ``period``: counter b = period starts (plus the noisy n at period 1)."""
    config = state.config
    cost = float(config.counter_rhos[period - 1])
    return cost + (config.population_rho if period == 1 else 0.0)


def check_step(state: CumulativeState, period: int) -> None:
    """Refuse a period out of order, beyond the horizon, or overspending — before any data."""
    config = state.config
    check_next_period(period, state.period, config.horizon)
    state.ledger.check(period_cost(state, period), f"period {period}")


def threshold_counts(weights_before: np.ndarray, values: np.ndarray, period: int) -> np.ndarray:
    """z_b^t for b = 1..t: people of weight b − 1 before t reporting 1 at t (length t)."""
    return np.bincount(weights_before[values == 1], minlength=period)[:period]


def step(state: CumulativeState, counts: np.ndarray, sampler: Sampler,
         population: Optional[int] = None) -> Tuple[CumulativeState, CumulativeRelease]:
    """One period of Algorithm 2.  ``counts`` is z_b^t for b = 1..t; ``population`` is
    the true n, needed at period 1 (public under replace, noised under add-remove unless
    declared public).  Returns a new state; the input state is not modified."""
    config = state.config
    period = state.period + 1
    check_step(state, period)
    counts = np.asarray(counts, dtype=np.int64)
    if counts.shape != (period,) or (counts < 0).any():
        raise ValueError(f"period {period}: expected {period} non-negative threshold counts")
    new = CumulativeState.from_dict(state.to_dict())
    new.period = period
    new.ledger.charge(period_cost(state, period), f"period {period}", period=period,
                      counter=config.counter, threshold=period,
                      counter_rho=float(config.counter_rhos[period - 1]))
    if period == 1:
        if population is None:
            raise ValueError("period 1 needs the population size n")
        size = int(population)
        if config.noisy_population:
            size = max(size + int(sampler.discrete_gaussian(config.population_variance, 1)[0]), 0)
        new.released = np.zeros(config.horizon + 1, dtype=np.int64)
        new.released[0] = size
    new.counters.append(config.counter_for(period))
    noisy = np.array([np.rint(counter.feed(z, sampler)[0])
                      for counter, z in zip(new.counters, counts)], dtype=np.int64)
    old = state.released if state.released is not None else new.released
    previous = old[1: period + 1]
    ceiling = old[0: period]
    monotone = np.minimum(np.maximum(noisy, previous), ceiling)
    new.monotonised = state.monotonised + int((monotone != noisy).sum())
    new.released = old.copy()
    new.released[1: period + 1] = monotone
    ones = monotone - previous
    group_sizes = old[0: period] - old[1: period + 1]
    extension = np.stack([group_sizes - ones, ones], axis=1)
    return new, CumulativeRelease(period=period, extension=extension,
                                  num_synthetic=int(new.released[0]))


def manifest_fields(state: CumulativeState) -> Dict:
    """The privacy and accuracy facts of a cumulative release, for ``manifest.json``."""
    config = state.config
    spent = state.ledger.spent
    epsilon = accounting.zcdp_to_approx_dp(spent, config.delta) if spent > 0 else 0.0
    relation = ("replace one person's whole sequence" if config.neighbor == "replace"
                else "add or remove one person")
    return {
        "algorithm": ALGORITHM,
        "paper": "Bun, Gaboardi, Neunhoeffer, Zhang (2024), Algorithm 2, App. A-B",
        "horizon": config.horizon, "alphabet": [0, 1], "neighbor": config.neighbor,
        "counter": config.counter, "rho": config.rho, "rho_spent": spent,
        "counter_rhos": config.counter_rhos.tolist(), "epsilon": epsilon, "delta": config.delta,
        "privacy_statement": (f"{spent:.6g}-zCDP so far (of {config.rho:.6g}) for neighbouring "
                              f"panels that {relation}; this implies ({epsilon:.4g}, "
                              f"{config.delta:g})-DP"),
        "population": ("public (replace relation: neighbours have the same n)"
                       if config.neighbor == "replace" else
                       "declared public by the user" if config.public_population else
                       f"released with discrete Gaussian noise (rho {config.population_rho:.4g})"),
        "beta": config.beta,
        "error_bound": config.variance_bound,
        "error_bound_note": ("with probability >= 1 - beta every released count of people "
                             "with at least b ones by period t is within error_bound of the "
                             "truth (counters' exact variances, union bound; Lemma 4.2)"),
        "corollary_b1_bound": config.corollary_b1_bound,
        "num_synthetic": state.num_synthetic,
        "periods_released": list(range(1, state.period + 1)),
        "last_period_seen": state.period,
        "monotonisation_events": state.monotonised,
        "released_counts": None if state.released is None else
        state.released[: state.period + 1].tolist(),
    }
