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
counters compose: ρ = ρ_n + Σ_b ρ_b.  The ledger is charged ρ_b when counter b starts
(time b).

Budget split (``budget_split``, any counter kind):

* ``paper`` — App. B: ρ_b ∝ max(⌈log2(T − b + 1)⌉, 1)³;
* ``equal-variance`` — ρ_b ∝ V_b, counter b's maximum variance over its horizon at unit
  budget, so every counter has the same worst-case variance V_b/ρ_b.  This minimises
  max_b V_b/ρ_b subject to Σ_b ρ_b fixed, hence the union bound below, for every counter
  kind; App. B instead gives the counter for b = T − 1 far more noise than the others.

Unset, the split is the one whose ``variance_bound`` is lower, computed for both (it is
``equal-variance`` by the argument above; the manifest names it and gives both bounds).

Accuracy (Lemma 4.2).  Monotonisation does not increase the worst error, so
max_{b,t} |Ŝ_b^t − S_b^t| ≤ max_{b,t} |S̃_b^t − S_b^t| + ½ when the counter's output is
real-valued (it is rounded).  The manifest's headline ``error_bound`` is this, from the
counters' variances calibrated to the relation in force (sub-Gaussian tails with the
discrete Gaussian's proxy σ², not its smaller exact variance; union over the T(T+1)/2
pairs).  The paper's Corollary B.1 is printed beside it, labelled as
the paper's, only where the paper states it: tree counters, App. B's split, add-remove
(under replace one person moves two entries per counter, the calibrated noise doubles in
variance and the corollary, which depends on ρ alone, no longer bounds the error at level
β: bench/results/fig7_cumulative_error*.txt).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

import numpy as np

from continual_synth.mechanisms import accounting
from continual_synth.mechanisms.errors import (MAX_NOISE_RECORDS, ParameterError,
                                               check_next_period, check_noise_records,
                                               privacy_budget, probability, whole_number)
from continual_synth.mechanisms.counters import (
    DISCRETE_GAUSSIAN,
    INTEGER_KINDS,
    StreamCounter,
    make_counter,
    max_variance,
)
from continual_synth.mechanisms.panel import RELATIONS, privacy_fields
from continual_synth.mechanisms.samplers import MAX_VARIANCE_TABLE_SIGMA2, Sampler

__all__ = ["ALGORITHM", "MAX_HORIZON", "BUDGET_SPLITS", "appendix_b_weights",
           "CumulativeConfig", "CumulativeState", "CumulativeRelease", "period_cost",
           "check_step", "threshold_counts", "step", "manifest_fields"]

ALGORITHM = "bun2024-algorithm-2-cumulative"
MAX_HORIZON = 100_000  # T counters run side by side; beyond this the state outgrows memory
BUDGET_SPLITS = ("paper", "equal-variance")


def appendix_b_weights(horizon: int) -> np.ndarray:
    """max(⌈log2(T − b + 1)⌉, 1)³ for b = 1..T (App. B; also Corollary B.1's sum)."""
    horizons = horizon - np.arange(1, horizon + 1) + 1
    return np.maximum(np.ceil(np.log2(horizons)), 1) ** 3


@lru_cache(maxsize=64)
def _unit_max_variances(counter: str, horizon: int, entries_changed: int) -> Tuple[float, ...]:
    """V_b: max_t Var(S̃_b^t − S_b^t) of counter b (horizon T − b + 1) at ρ_b = 1."""
    return tuple(max_variance(counter, int(h), rho=1.0, entries_changed=entries_changed)
                 for h in range(horizon, 0, -1))


@lru_cache(maxsize=64)
def _unit_node_sigma2(counter: str, horizon: int, entries_changed: int) -> Tuple[float, ...]:
    """The widest discrete Gaussian σ² among counter b's nodes at ρ_b = 1, b = 1..T (0 for
    a counter without discrete Gaussian noise); at ρ_b it is this / ρ_b (σ² ∝ 1/ρ)."""
    widest = []
    for h in range(horizon, 0, -1):
        made = make_counter(counter, int(h), rho=1.0, entries_changed=entries_changed)
        widest.append(max(made.node_params()) if made.noise == DISCRETE_GAUSSIAN else 0.0)
    return tuple(widest)


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
    budget_split: Optional[str] = None

    def __post_init__(self):
        object.__setattr__(self, "horizon", whole_number("horizon", self.horizon))
        if self.horizon > MAX_HORIZON:
            raise ParameterError("horizon", f"{self.horizon} would run {self.horizon} private "
                                 f"counters (one per threshold b = 1..T); at most "
                                 f"{MAX_HORIZON} are supported")
        privacy_budget("rho", self.rho)
        probability("beta", self.beta)
        probability("delta", self.delta)
        probability("population_share", self.population_share)
        accounting.check_neighbor(self.neighbor)
        make_counter(self.counter, self.horizon, rho=self.rho)  # validates the counter kind
        if self.budget_split is not None and self.budget_split not in BUDGET_SPLITS:
            raise ParameterError("budget_split", f"must be one of {BUDGET_SPLITS}, "
                                                 f"got {self.budget_split!r}")
        self._check_noise()
        if self.budget_split is None:
            bounds = self.error_bound_by_split
            object.__setattr__(self, "budget_split", min(BUDGET_SPLITS, key=bounds.get))

    def _check_noise(self) -> None:
        """Refuse, before any variance is summed, a ρ whose noise is too wide to work with:
        a counter node's discrete Gaussian beyond the exact variance's table
        (:data:`~continual_synth.mechanisms.samplers.MAX_VARIANCE_TABLE_SIGMA2`; at
        ρ = 10^-18 summing it would ask numpy for 506 GiB), or, where n is released with
        noise, a noisy population whose noise alone (its error bound at β) would write more
        than :data:`MAX_NOISE_RECORDS` records over the horizon."""
        splits = BUDGET_SPLITS if self.budget_split is None else (self.budget_split,)
        unit = np.array(_unit_node_sigma2(self.counter, self.horizon, self.entries_changed))
        widest = max(float(np.max(unit / self._counter_rhos(split))) for split in splits)
        if widest > MAX_VARIANCE_TABLE_SIGMA2:
            raise ParameterError("rho", (
                f"{self.rho:g} is too small: its counters' discrete Gaussian noise of "
                f"variance up to {widest:.3g} is too wide to sum its exact variance (at most "
                f"{MAX_VARIANCE_TABLE_SIGMA2:.3g}): use --rho >= "
                f"{self.rho * widest / MAX_VARIANCE_TABLE_SIGMA2:.3g}"))
        if self.noisy_population:
            people = self.population_error_bound
            records = people * self.horizon
            check_noise_records("rho", self.rho, records,
                                f"a noisy population off by up to {people:.3g} people over "
                                f"{self.horizon} periods",
                                self.rho * (records / MAX_NOISE_RECORDS) ** 2)

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
    def population_error_bound(self) -> Optional[float]:
        """With probability ≥ 1 − β the released number of people is within this of n
        (discrete Gaussian, sub-Gaussian two-sided tail); None where n is public."""
        if not self.noisy_population:
            return None
        return math.sqrt(self.population_variance) * math.sqrt(2 * math.log(2 / self.beta))

    @property
    def counter_horizons(self) -> np.ndarray:
        """Counter b (b = 1..T) runs from time b to T: horizon T − b + 1."""
        return self.horizon - np.arange(1, self.horizon + 1) + 1

    @property
    def counter_rhos(self) -> np.ndarray:
        """ρ_b for b = 1..T under ``budget_split`` (module docstring)."""
        return self._counter_rhos(self.budget_split)

    def _counter_rhos(self, split: str) -> np.ndarray:
        budget = self.rho - self.population_rho
        if split == "paper":
            weights = appendix_b_weights(self.horizon)
        else:
            weights = np.array(_unit_max_variances(self.counter, self.horizon,
                                                   self.entries_changed))
        return budget * weights / weights.sum()

    def counter_for(self, threshold: int) -> StreamCounter:
        """A fresh counter for threshold b, calibrated to ρ_b."""
        return make_counter(self.counter, int(self.counter_horizons[threshold - 1]),
                            rho=float(self.counter_rhos[threshold - 1]),
                            entries_changed=self.entries_changed)

    @property
    def paper_corollary_b1_bound(self) -> Optional[float]:
        """Bun et al. (2024) Corollary B.1 as the paper states it (counts, β* = β):
        √(Σ_b max(⌈log2(T−b+1)⌉,1)³ / ρ · log(T/β)) — only for tree counters with App. B's
        split under add-remove, where the paper derives it; None otherwise.  The paper's
        statement, not this release's guarantee (``variance_bound`` is)."""
        if not (self.neighbor == "add-remove" and self.counter == "tree"
                and self.budget_split == "paper"):
            return None
        return math.sqrt(appendix_b_weights(self.horizon).sum()
                         / (self.rho - self.population_rho)
                         * math.log(self.horizon / self.beta))

    @property
    def variance_bound(self) -> float:
        """With probability ≥ 1 − β every |Ŝ_b^t − S_b^t| ≤ this (counts): sub-Gaussian
        tails (the counters' exact variances calibrated to the relation in force, times
        ``StreamCounter.sub_gaussian_factor``: the discrete Gaussian's proxy is σ², above
        its variance), union over the T(T+1)/2 (b, t) pairs, + ½ when the counter's output
        is rounded."""
        return self._variance_bound(self.budget_split)

    def _variance_bound(self, split: str) -> float:
        pairs = self.horizon * (self.horizon + 1) / 2
        worst = max(max_variance(self.counter, int(h), rho=float(r),
                                 entries_changed=self.entries_changed, sub_gaussian=True)
                    for h, r in zip(self.counter_horizons, self._counter_rhos(split)))
        rounding = 0.0 if self.counter in INTEGER_KINDS else 0.5
        return math.sqrt(2 * worst * math.log(2 * pairs / self.beta)) + rounding

    @property
    def error_bound_by_split(self) -> Dict[str, float]:
        """``variance_bound`` under each budget split (what the default choice compares)."""
        return {split: self._variance_bound(split) for split in BUDGET_SPLITS}

    def to_dict(self) -> Dict:
        return {k: getattr(self, k) for k in ("horizon", "rho", "neighbor", "counter", "beta",
                                              "delta", "population_share",
                                              "public_population", "budget_split")}

    @classmethod
    def from_dict(cls, data: Dict) -> "CumulativeConfig":
        return cls(**{k: data[k] for k in ("horizon", "rho", "neighbor", "counter", "beta",
                                           "delta", "population_share", "public_population")},
                   budget_split=data.get("budget_split", "paper" if data["counter"] == "tree"
                                         else "equal-variance"))


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
    return {
        "algorithm": ALGORITHM,
        "paper": "Bun, Gaboardi, Neunhoeffer, Zhang (2024), Algorithm 2, App. A-B",
        "horizon": config.horizon, "alphabet": [0, 1], "neighbor": config.neighbor,
        "counter": config.counter, "rho": config.rho,
        "counter_rhos": config.counter_rhos.tolist(), "delta": config.delta,
        **privacy_fields(state.ledger.spent, config.rho, config.delta, config.neighbor),
        "population": ("public (replace relation: neighbours have the same n)"
                       if config.neighbor == "replace" else
                       "declared public by the user" if config.public_population else
                       f"released with discrete Gaussian noise (rho {config.population_rho:.4g}, "
                       f"standard deviation {math.sqrt(config.population_variance):.4g}; "
                       f"not covered by error_bound)"),
        "beta": config.beta,
        "budget_split": config.budget_split,
        "budget_split_note": _split_note(config),
        "error_bound": config.variance_bound,
        "error_bound_note": (f"with probability >= 1 - beta every released count of people "
                             f"with at least b >= 1 ones by period t is within error_bound of the "
                             f"truth, for neighbouring panels that "
                             f"{RELATIONS[config.neighbor]} (counters' "
                             f"exact variances, union bound; Lemma 4.2)"),
        "error_bound_by_split": config.error_bound_by_split,
        **_corollary_fields(config),
        "num_synthetic": state.num_synthetic,
        "periods_released": list(range(1, state.period + 1)),
        "last_period_seen": state.period,
        "monotonisation_events": state.monotonised,
        "released_counts": None if state.released is None else
        state.released[: state.period + 1].tolist(),
    }


def _split_note(config: CumulativeConfig) -> str:
    rule = ("App. B: rho_b proportional to max(ceil(log2(T-b+1)), 1)^3"
            if config.budget_split == "paper" else
            "equal worst-case variance: rho_b proportional to counter b's maximum variance")
    bounds = config.error_bound_by_split
    lower = min(BUDGET_SPLITS, key=bounds.get)
    verdict = ("the split with the lower error bound" if config.budget_split == lower else
               f"chosen by the user; {lower} would give error_bound {bounds[lower]:.4g}")
    return f"{rule} ({verdict}; both in error_bound_by_split)"


def _corollary_fields(config: CumulativeConfig) -> Dict:
    bound = config.paper_corollary_b1_bound
    if bound is not None:
        return {"paper_corollary_b1_bound": bound,
                "paper_corollary_b1_note": (
                    "Bun et al. (2024) Corollary B.1 as stated in the paper (tree counters, "
                    "App. B split, add/remove); the paper's claim, shown for comparison - "
                    "the guarantee of this release is error_bound")}
    return {"paper_corollary_b1_note": (
        "Bun et al. (2024) Corollary B.1 omitted: the paper states it only for tree "
        "counters with App. B's split under add/remove, and this release uses "
        f"{config.counter} counters, the {config.budget_split} split, {config.neighbor}")}
