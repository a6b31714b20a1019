"""Algorithm 1 of Bun, Gaboardi, Neunhoeffer and Zhang (2024): private synthetic data
preserving fixed-time-window queries, as a pure state machine.

``state, release = step(state, C^t)`` for t = 1..T, where C^t is the true histogram
of the k-period windows ending at t (None before t = k).  For t ≥ k:

    Ĉ^t_s = C^t_s + n_pad + N_Z(0, σ²)                 (noisy padded histogram)
    t = k:  p^k_s = Ĉ^k_s  — the synthetic people are created
    t > k:  p^t = consistent extension of p^{t−1} towards Ĉ^t   (see consistency.py)

Privacy (Theorem 3.1, recalibrated per shared/papers/README.md point 1).  Each of
the R = T − k + 1 histograms has L2 sensitivity Δ₂ = 1 when neighbours add or remove
one person (``add-remove``, the paper's calibration) and √2 when one person's whole
sequence is replaced (``replace``, the paper's definition, our default).  With
σ² = Δ₂² R / (2ρ) each update is (ρ/R)-zCDP and the whole run ρ-zCDP.

Accuracy (Theorem 3.2, for |A| = 2 with add-remove): with probability ≥ 1 − β,
max_{s,t} |p^t_s − (C^t_s + n_pad)| ≤ (√(R/ρ) + 1/√2) √(log(2^k R / β)).  In terms of
the noise σ in force this is λ = (σ + ½)·√(2 log(|A|^k R / β)): the proof's error is
a variance-σ² mixture of the noise draws (the |A|-ary consistency step also keeps
the variance, see tests) plus a mean-zero rounding term of range ≤ 1, i.e.
½-subgaussian, union-bounded over |A|^k R bins.  n_pad defaults to ⌈λ⌉.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Dict, List, Optional, Tuple

import numpy as np

from continual_synth.mechanisms import accounting
from continual_synth.mechanisms.errors import (MAX_NOISE_RECORDS, ParameterError,
                                               check_next_period, check_noise_records,
                                               format_bytes, privacy_budget, probability,
                                               whole_number)
from continual_synth.mechanisms.consistency import consistent_extension
from continual_synth.mechanisms.panel import privacy_fields
from continual_synth.mechanisms.samplers import Sampler

__all__ = ["ALGORITHM", "BIN_BYTES", "MAX_BINS", "WindowConfig", "WindowState",
           "WindowRelease", "check_step", "step", "debias_counts", "manifest_fields"]

ALGORITHM = "bun2024-algorithm-1-fixed-time-window"
# |A|^k bins of int64 counts are held several times at once (true, noisy and synthetic
# histograms, per-shard plans); a window above this size is refused before any work.
BIN_BYTES = 8
MAX_BINS = 2 ** 24


@dataclass(frozen=True)
class WindowConfig:
    """Public parameters of one fixed-window release (all go into the manifest)."""

    window: int
    horizon: int
    rho: float
    alphabet: Tuple = (0, 1)
    neighbor: str = "replace"
    beta: float = 0.05
    n_pad: Optional[int] = None
    delta: float = 1e-6

    def __post_init__(self):
        horizon = whole_number("horizon", self.horizon)
        window = whole_number("window", self.window)
        if window > horizon:
            raise ParameterError("window", f"{window} is longer than the horizon {horizon}: "
                                 f"need 1 <= window <= horizon")
        object.__setattr__(self, "horizon", horizon)
        object.__setattr__(self, "window", window)
        privacy_budget("rho", self.rho)
        probability("beta", self.beta)
        probability("delta", self.delta)
        accounting.check_neighbor(self.neighbor)
        alphabet = tuple(self.alphabet)
        if len(alphabet) < 2 or len(set(alphabet)) != len(alphabet):
            raise ParameterError("alphabet", f"needs at least two distinct values, "
                                 f"got {list(alphabet)}")
        object.__setattr__(self, "alphabet", alphabet)
        bins = len(alphabet) ** window
        if bins > MAX_BINS:
            raise ParameterError("window", (
                f"{window} with {len(alphabet)} values needs {len(alphabet)}^{window} = "
                f"{bins:.3g} bins: one histogram alone would take "
                f"{format_bytes(bins * BIN_BYTES)}; at most {MAX_BINS} bins "
                f"({format_bytes(MAX_BINS * BIN_BYTES)}) fit (shorten --window or merge "
                f"values of --alphabet)"))
        if self.n_pad is None:
            object.__setattr__(self, "n_pad", int(math.ceil(self.error_bound)))
        else:
            n_pad = self.n_pad  # a whole float (7.0, as JSON may hold it) is accepted
            n_pad = int(n_pad) if isinstance(n_pad, float) and n_pad.is_integer() else n_pad
            object.__setattr__(self, "n_pad", whole_number("n_pad", n_pad, minimum=0))
        self._check_padding()

    def _check_padding(self) -> None:
        """Refuse a ρ (or an ``n_pad``) whose padding alone would have the release write
        more than :data:`MAX_NOISE_RECORDS` records: every synthetic person has a value in
        each of the T periods, and ⌈λ⌉ people per bin are noise (as padding by default,
        or, below an ``n_pad`` given smaller, as noisy counts clamped at 0).  At ρ = 10^-18
        numpy's hypergeometric split of the people failed (over 10^9 of them)."""
        per_bin = math.ceil(self.error_bound)
        records = max(self.n_pad, per_bin) * self.num_bins * self.horizon
        if self.n_pad > per_bin and records > MAX_NOISE_RECORDS:
            raise ParameterError("n_pad", (
                f"{self.n_pad} padding people in each of {self.num_bins} bins over "
                f"{self.horizon} periods would write {records:.3g} records; at most "
                f"{MAX_NOISE_RECORDS:.3g} fit: use --n-pad <= "
                f"{MAX_NOISE_RECORDS // (self.num_bins * self.horizon)}"))
        # λ = (σ + ½)·L with σ² ∝ 1/ρ: the largest σ whose ⌈λ⌉ fits gives the least ρ
        fitting = MAX_NOISE_RECORDS // (self.num_bins * self.horizon)
        spread = self.error_bound / (math.sqrt(self.noise_variance) + 0.5)   # L
        sigma = fitting / spread - 0.5
        what = (f"n_pad = {per_bin} people in each of {self.num_bins} window bins over "
                f"{self.horizon} periods")
        if sigma <= 0 and records > MAX_NOISE_RECORDS:   # the rounding term alone: any ρ
            raise ParameterError("window", (
                f"{self.window} pads at least {what} whatever --rho: {records:.3g} records; "
                f"at most {MAX_NOISE_RECORDS:.3g} fit (shorten --window)"))
        check_noise_records("rho", self.rho, records, what,
                            self.rho * self.noise_variance / max(sigma, 1e-300) ** 2)

    @property
    def alphabet_size(self) -> int:
        return len(self.alphabet)

    @property
    def num_updates(self) -> int:
        """R = T − k + 1 private histograms."""
        return self.horizon - self.window + 1

    @property
    def num_bins(self) -> int:
        return self.alphabet_size ** self.window

    @property
    def num_groups(self) -> int:
        """|A|^(k−1) groups of synthetic people (their last k−1 values)."""
        return self.alphabet_size ** (self.window - 1)

    @property
    def l2_sensitivity(self) -> float:
        return accounting.histogram_l2_sensitivity(self.neighbor)

    @property
    def noise_variance(self) -> float:
        """σ² = Δ₂² R / (2ρ): each of the R histograms is (ρ/R)-zCDP."""
        return accounting.gaussian_sigma2(self.l2_sensitivity, self.rho / self.num_updates)

    @property
    def rho_per_update(self) -> float:
        return accounting.gaussian_rho(self.l2_sensitivity, self.noise_variance)

    @property
    def error_bound(self) -> float:
        """Theorem 3.2's λ at β (counts): (σ + ½)·√(2 log(|A|^k R / β))."""
        sigma = math.sqrt(self.noise_variance)
        return (sigma + 0.5) * math.sqrt(2 * math.log(self.num_bins * self.num_updates / self.beta))

    def to_dict(self) -> Dict:
        data = asdict(self)
        data["alphabet"] = list(self.alphabet)
        return data

    @classmethod
    def from_dict(cls, data: Dict) -> "WindowConfig":
        fields = {k: data[k] for k in ("window", "horizon", "rho", "alphabet", "neighbor",
                                       "beta", "n_pad", "delta") if k in data}
        fields["alphabet"] = tuple(fields["alphabet"])
        return cls(**fields)


@dataclass
class WindowState:
    """Everything Algorithm 1 carries between periods, on the synthetic side.

    ``counts`` is p^{t−1} (the synthetic window histogram, |A|^k integers) once the
    synthetic people exist.  The ledger records every privacy debit.
    """

    config: WindowConfig
    ledger: accounting.BudgetLedger
    period: int = 0
    counts: Optional[np.ndarray] = None
    clamp_events: int = 0
    periods_released: List[int] = field(default_factory=list)

    @classmethod
    def initial(cls, config: WindowConfig) -> "WindowState":
        return cls(config=config, ledger=accounting.BudgetLedger(total=config.rho, unit="rho"))

    @property
    def num_synthetic(self) -> int:
        return 0 if self.counts is None else int(self.counts.sum())

    def to_dict(self) -> Dict:
        return {"config": self.config.to_dict(), "ledger": self.ledger.to_dict(),
                "period": self.period,
                "counts": None if self.counts is None else self.counts.tolist(),
                "clamp_events": self.clamp_events, "periods_released": list(self.periods_released)}

    @classmethod
    def from_dict(cls, data: Dict) -> "WindowState":
        counts = data.get("counts")
        return cls(config=WindowConfig.from_dict(data["config"]),
                   ledger=accounting.BudgetLedger.from_dict(data["ledger"]),
                   period=int(data["period"]),
                   counts=None if counts is None else np.asarray(counts, dtype=np.int64),
                   clamp_events=int(data["clamp_events"]),
                   periods_released=[int(p) for p in data["periods_released"]])


@dataclass(frozen=True)
class WindowRelease:
    """What one period releases: the synthetic counts to materialise.

    At t = k, ``initial_counts[s]`` synthetic people get the k values of window s
    (periods 1..k are released).  At t > k, ``extension[z, c]`` people of group z
    get value c at period t.
    """

    period: int
    initial_counts: Optional[np.ndarray] = None
    extension: Optional[np.ndarray] = None
    clamp_events: int = 0


def check_step(state: WindowState, period: int) -> None:
    """Refuse, before any data is read, a period out of order or beyond the horizon,
    or one whose noise would overspend the budget."""
    config = state.config
    check_next_period(period, state.period, config.horizon)
    if period >= config.window:
        state.ledger.check(config.rho_per_update, f"period {period}")


def step(state: WindowState, histogram: Optional[np.ndarray], sampler: Sampler
         ) -> Tuple[WindowState, Optional[WindowRelease]]:
    """One period of Algorithm 1: returns the new state and the period's release.

    ``histogram`` is C^t (|A|^k true counts of the windows ending at t) for t ≥ k, and
    ignored before.  The input state is not modified.
    """
    config = state.config
    period = state.period + 1
    check_step(state, period)
    new_state = replace(state, period=period, ledger=accounting.BudgetLedger.from_dict(
        state.ledger.to_dict()), periods_released=list(state.periods_released))
    if period < config.window:
        return new_state, None
    histogram = np.asarray(histogram, dtype=np.int64)
    if histogram.shape != (config.num_bins,):
        raise ValueError(f"period {period}: expected a histogram of {config.num_bins} bins, "
                         f"got shape {histogram.shape}")
    noise = sampler.discrete_gaussian(config.noise_variance, config.num_bins)
    noisy = histogram + config.n_pad + noise
    new_state.ledger.charge(config.rho_per_update, f"period {period}", period=period,
                            mechanism="discrete Gaussian", noise_variance=config.noise_variance,
                            l2_sensitivity=config.l2_sensitivity)
    if period == config.window:
        clamped = int((noisy < 0).sum())
        counts = np.maximum(noisy, 0)
        release = WindowRelease(period=period, initial_counts=counts, clamp_events=clamped)
        new_state.periods_released.extend(range(1, period + 1))
    else:
        width = config.alphabet_size
        group_sizes = state.counts.reshape(width, config.num_groups).sum(axis=0)
        extension, clamped = consistent_extension(
            group_sizes, noisy.reshape(config.num_groups, width), sampler.rng)
        counts = extension.reshape(-1)
        release = WindowRelease(period=period, extension=extension, clamp_events=clamped)
        new_state.periods_released.append(period)
    new_state.counts = counts
    new_state.clamp_events = state.clamp_events + clamped
    return new_state, release


def debias_counts(synthetic_counts: np.ndarray, n_pad: int) -> np.ndarray:
    """Debiased window counts: subtract the n_pad padding records of every bin
    (shared/papers/README.md point 5)."""
    return np.asarray(synthetic_counts) - n_pad


def manifest_fields(state: WindowState) -> Dict:
    """The privacy and debiasing facts of a release, for ``manifest.json``."""
    config = state.config
    return {
        "algorithm": ALGORITHM,
        "paper": "Bun, Gaboardi, Neunhoeffer, Zhang (2024), Algorithm 1",
        "window": config.window,
        "horizon": config.horizon,
        "alphabet": list(config.alphabet),
        "neighbor": config.neighbor,
        "rho": config.rho,
        "rho_per_period": config.rho_per_update,
        "delta": config.delta,
        **privacy_fields(state.ledger.spent, config.rho, config.delta, config.neighbor),
        "noise": "discrete Gaussian",
        "noise_variance": config.noise_variance,
        "l2_sensitivity": config.l2_sensitivity,
        "beta": config.beta,
        "n_pad": config.n_pad,
        "error_bound": config.error_bound,
        "error_bound_note": (
            "Theorem 3.2's bound (sigma + 1/2) * sqrt(2 log(|A|^k R / beta)) with the noise "
            "in force (sigma^2 = noise_variance"
            + (", twice the paper's: its sensitivity 1 holds for add-remove, this release's "
               "relation moves one person between two bins" if config.neighbor == "replace"
               else ", the paper's calibration") +
            "): with probability >= 1 - beta, every released window count is within "
            "error_bound of the true count + n_pad"),
        "num_synthetic": state.num_synthetic,
        "periods_released": list(state.periods_released),
        "last_period_seen": state.period,
        "clamp_events": state.clamp_events,
        "debias": {
            "subtract_per_bin": config.n_pad,
            "padding_records": config.n_pad * config.num_bins,
            "real_population_estimate": state.num_synthetic - config.n_pad * config.num_bins,
            "how": ("for a query summing |S| window bins: subtract n_pad * |S| from the "
                    "synthetic count; for a proportion divide by num_synthetic - "
                    "|alphabet|^window * n_pad"),
        },
    }
