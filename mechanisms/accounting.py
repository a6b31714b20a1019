"""Privacy accounting: zCDP and pure-DP composition, conversion to (ε, δ), a budget ledger.

* zCDP (Bun and Steinke 2016): ρ-zCDP mechanisms compose by adding ρ; the
  Gaussian mechanism with L2 sensitivity Δ₂ and variance σ² is Δ₂²/(2σ²)-zCDP, and
  so is the discrete Gaussian (Canonne, Kamath, Steinke 2020, Theorem 4).
* pure DP: ε-DP mechanisms compose by adding ε; the discrete Laplace with L1
  sensitivity Δ₁ and scale b is Δ₁/b-DP; ε-DP implies ε²/2-zCDP (BS16 Prop. 1.4).
* Conversion of ρ-zCDP to (ε, δ)-DP: the tight Rényi conversion of Canonne,
  Kamath and Steinke 2020 (Proposition 12 / Corollary 13), minimised over the
  Rényi order α, never worse than Bun-Steinke's ρ + 2√(ρ log(1/δ)).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np

__all__ = ["NEIGHBOR_RELATIONS", "BudgetExceededError", "gaussian_rho", "gaussian_sigma2",
           "laplace_epsilon", "laplace_scale", "histogram_l2_sensitivity",
           "histogram_l1_sensitivity", "check_neighbor", "pure_dp_to_zcdp",
           "zcdp_to_approx_dp", "gaussian_mechanism_epsilon",
           "zcdp_to_approx_dp_bun_steinke", "BudgetLedger"]

NEIGHBOR_RELATIONS = ("replace", "add-remove")


class BudgetExceededError(RuntimeError):
    """A step would spend more privacy budget than the release has."""


def gaussian_rho(l2_sensitivity: float, sigma2: float) -> float:
    """ρ of the (discrete) Gaussian mechanism: Δ₂² / (2σ²)."""
    return l2_sensitivity ** 2 / (2.0 * sigma2)


def gaussian_sigma2(l2_sensitivity: float, rho: float) -> float:
    """Variance σ² that makes the (discrete) Gaussian mechanism exactly ρ-zCDP."""
    return l2_sensitivity ** 2 / (2.0 * rho)


def laplace_epsilon(l1_sensitivity: float, scale: float) -> float:
    """ε of the (discrete) Laplace mechanism: Δ₁ / b."""
    return l1_sensitivity / scale


def laplace_scale(l1_sensitivity: float, epsilon: float) -> float:
    """Scale b that makes the (discrete) Laplace mechanism exactly ε-DP."""
    return l1_sensitivity / epsilon


def histogram_l2_sensitivity(neighbor: str) -> float:
    """L2 sensitivity of a histogram in which every person falls in exactly one bin.

    ``add-remove``: one person appears or disappears, one bin moves by 1 → 1.
    ``replace``: one person's data changes, one bin loses 1 and another gains 1 → √2.
    (shared/papers/README.md, point 1.)
    """
    check_neighbor(neighbor)
    return 1.0 if neighbor == "add-remove" else math.sqrt(2.0)


def histogram_l1_sensitivity(neighbor: str) -> float:
    """L1 sensitivity of such a histogram: 1 under add-remove, 2 under replace."""
    check_neighbor(neighbor)
    return 1.0 if neighbor == "add-remove" else 2.0


def check_neighbor(neighbor: str) -> None:
    if neighbor not in NEIGHBOR_RELATIONS:
        raise ValueError(f"neighbouring relation must be one of {NEIGHBOR_RELATIONS}, "
                         f"got {neighbor!r}")


def pure_dp_to_zcdp(epsilon: float) -> float:
    """ε-DP implies (ε²/2)-zCDP (Bun and Steinke 2016, Proposition 1.4)."""
    return epsilon ** 2 / 2.0


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP.

    CKS 2020 Proposition 12 applied to the Rényi curve ε_α = αρ of ρ-zCDP:
    ε = min_{α>1} αρ + (log(1/δ) + (α−1) log(1 − 1/α) − log α) / (α − 1).
    """
    if rho < 0 or not 0 < delta < 1:
        raise ValueError("need rho >= 0 and 0 < delta < 1")
    if rho == 0:
        return 0.0
    alphas = 1.0 + np.logspace(-4, 6, 20000)
    values = (alphas * rho
              + (math.log(1 / delta) + (alphas - 1) * np.log1p(-1 / alphas) - np.log(alphas))
              / (alphas - 1))
    return float(max(values.min(), 0.0))


def gaussian_mechanism_epsilon(rho: float, delta: float) -> float:
    """ε such that a *continuous* Gaussian mechanism that is ρ-zCDP is (ε, δ)-DP, exactly.

    Its privacy loss at the worst neighbouring pair is N(μ²/2, μ²) with μ = Δ₂/σ = √(2ρ)
    (linear post-processing keeps it), so δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)
    (Balle, Wang 2018, the analytic Gaussian mechanism); ε solves δ(ε) = δ.  Tighter than
    :func:`zcdp_to_approx_dp`, which holds for any ρ-zCDP mechanism (the discrete
    Gaussian's loss is not exactly Gaussian, so its families keep that conversion)."""
    from scipy import optimize, stats
    if rho < 0 or not 0 < delta < 1:
        raise ValueError("need rho >= 0 and 0 < delta < 1")
    if rho == 0:
        return 0.0
    mu = math.sqrt(2.0 * rho)

    def excess(epsilon):
        return (stats.norm.cdf(mu / 2 - epsilon / mu)
                - math.exp(epsilon) * stats.norm.cdf(-mu / 2 - epsilon / mu) - delta)

    if excess(0.0) <= 0:
        return 0.0
    return float(optimize.brentq(excess, 0.0, zcdp_to_approx_dp(rho, delta) + 1.0,
                                 xtol=1e-12))


def zcdp_to_approx_dp_bun_steinke(rho: float, delta: float) -> float:
    """The simpler conversion ε = ρ + 2√(ρ log(1/δ)) (Bun and Steinke 2016, Prop. 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


@dataclass
class BudgetLedger:
    """The privacy budget of one release and every debit against it.

    ``unit`` is ``"rho"`` (zCDP, composing by addition) or ``"epsilon"`` (pure DP).
    :meth:`charge` refuses, before anything happens, a debit that would overspend.
    """

    total: float
    unit: str = "rho"
    entries: List[Dict] = field(default_factory=list)

    # relative slack for floating-point sums of equal shares (R × ρ/R may exceed ρ by an ulp)
    _TOLERANCE = 1e-9

    def __post_init__(self):
        if self.unit not in ("rho", "epsilon"):
            raise ValueError(f"unknown budget unit {self.unit!r}")
        if not (self.total > 0 and math.isfinite(self.total)):
            raise ValueError(f"the privacy budget must be positive, got {self.total!r}")

    @property
    def spent(self) -> float:
        return float(sum(entry["amount"] for entry in self.entries))

    @property
    def remaining(self) -> float:
        return self.total - self.spent

    def check(self, amount: float, label: str) -> None:
        """Raise :class:`BudgetExceededError` if ``amount`` more would overspend."""
        if not (math.isfinite(amount) and amount >= 0):
            raise ValueError(f"{label}: a charge must be a finite non-negative number, "
                             f"got {amount!r}")
        if self.spent + amount > self.total * (1 + self._TOLERANCE):
            raise BudgetExceededError(
                f"{label}: spending {self.unit}={amount:.6g} would exceed the budget "
                f"({self.spent:.6g} of {self.total:.6g} already spent)")

    def charge(self, amount: float, label: str, **details) -> None:
        """Debit ``amount`` for ``label`` (e.g. ``"period 7"``) after :meth:`check`."""
        self.check(amount, label)
        self.entries.append({"label": label, "amount": float(amount), **details})

    def to_dict(self) -> Dict:
        return {"total": self.total, "unit": self.unit, "entries": list(self.entries)}

    @classmethod
    def from_dict(cls, data: Dict) -> "BudgetLedger":
        return cls(total=float(data["total"]), unit=data["unit"], entries=list(data["entries"]))
