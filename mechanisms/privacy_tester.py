"""Empirical privacy tester: a statistical lower bound on ε from releases on neighbouring
inputs, in the spirit of Google's DP stochastic tester (Ding, Wang, Wang, Zhang, Kifer
2018, "Detecting violations of differential privacy"), DP-Sniper (Bichsel, Steffen,
Bogunovic, Vechev 2021) and statistical auditing with Clopper–Pearson bounds (Jagielski,
Ullman, Oprea 2020, "Auditing differentially private machine learning").

The test (one *case* = one mechanism, one pair of neighbouring inputs D, D')
---------------------------------------------------------------------------------
A mechanism M is (ε, δ)-DP under a neighbouring relation if for every pair D ~ D' and
every event E, P(M(D) ∈ E) ≤ e^ε·P(M(D') ∈ E) + δ.  So for any event E,

    ε ≥ ln((P(E | D) − δ) / P(E | D')).

We draw N seeded releases of M(D) and N of M(D') (vectorised through the project's
samplers, :mod:`continual_synth.mechanisms.samplers`), split each into two halves and

1. on the first half, fit a scalar test statistic s (below) on its first quarter of the
   releases and, on its second quarter, choose the event E = {s ≥ c} — or {s ≤ c} with
   the roles of D and D' swapped — whose bound (2), predicted for the second half's size,
   is largest (fitting and choosing on separate data keeps the choice honest about the
   fitted statistic's quality);
2. on the second half, count k = #{E} among the D releases and k' among the D' releases
   and report the Clopper–Pearson bound

       ε_lb = ln((p_lb − δ) / p'_ub),                                              (2)

   p_lb the one-sided (1 − α/2) lower Clopper–Pearson bound on P(E | D) (``scipy.stats.
   beta`` quantiles) and p'_ub the one-sided (1 − α/2) upper bound on P(E | D').

Because E is fixed before the second half is looked at, P(ε_lb > ε_true) ≤ α for a
correct (ε_true, δ)-DP mechanism (a union bound over the two one-sided bounds).  A
result ε_lb > claimed ε therefore shows, at confidence 1 − α, that the mechanism is not
as private as it claims; ε_lb ≤ claimed ε shows nothing more than that this test could
not refute the claim (a lower bound is never a proof of privacy).  The tester must be
able to fail: :class:`ScaledNoiseSampler` plants the bug "noise scale halved".

Test statistics (``statistics``: the test fits each on the first quarter and keeps the
event with the best bound on the second, so trying several costs no validity)
-----------------------------------------------------------------------------------
* ``"linear"``: s = x·w with w = Σ̂⁻¹(μ̂_D − μ̂_D') from the first quarter (Fisher's linear
  discriminant).  For Gaussian noise with a common covariance this is the likelihood
  ratio, i.e. the Neyman–Pearson optimal statistic; used for releases whose coordinates
  are correlated (a counter's prefix sums S̃^1..S̃^T).
* ``"sign"``: for outputs whose coordinates carry independent (discrete Laplace) noise:
  keep the coordinates whose means differ on the first quarter (|z| > 4; at least the most
  different one) and sum, over them, the empirical log likelihood ratio of the indicator
  "above the midpoint of the two means".  For a discrete Laplace shift by 1 this
  indicator *is* the likelihood ratio (|x − μ'| − |x − μ| takes two values), which a
  linear statistic misses.
* ``"innovation-sign"``: ``"sign"`` on the innovations L⁻¹x (Σ̂ = LLᵀ, the Cholesky factor
  of the first quarter's pooled covariance): each coordinate minus its best linear
  prediction from the earlier ones.  For a counter's prefix sums the innovations are
  close to the independent noisy nodes, where the sign statistic is the likelihood ratio.
* ``"categorical"``: outputs are labels (the exponential mechanism's choice); s is the
  empirical log likelihood ratio of the label.

Claimed ε.  Pure-DP families claim their ε (δ = 0).  zCDP families claim ρ; the tester
compares with ε(ρ, δ) from :func:`accounting.zcdp_to_approx_dp` (CKS 2020 Prop. 12) at the
δ of the case.  That conversion holds for every ρ-zCDP mechanism and is loose for a
Gaussian one (ρ = 0.5, δ = 10⁻³: 3.54 against the exact 3.14), so loose that a
calibration bug which doubles ρ (4.85: the replace relation's √2 ignored) can hide in
the gap.  Families whose release is a linear map of *continuous* Gaussian noise
(``sqrt-factorisation``, ``blt``) are compared with the exact Gaussian curve
(:func:`accounting.gaussian_mechanism_epsilon`); discrete-Gaussian families keep the
conversion, and their calibration is checked exactly by unit tests
(``test_counters.py::test_node_noise_matches_sensitivity``,
``test_window_mechanism.py::test_noise_calibration_and_per_update_budget``).

Families (``*_case`` builders, one per mechanism family; each states its relation)
-------------------------------------------------------------------------------------
* :func:`window_case`: Bun et al. 2024 Algorithm 1's noisy padded window histogram
  (:func:`window_releases`, the law of :func:`window.step`'s release), ``replace`` or
  ``add-remove``, zCDP.
* :func:`counter_case`: every kind of :func:`counters.counter_kinds` (the registry), one
  changed entry (add-remove) or two (replace: one bin down, another up at the same time),
  at the worst entry found from the counter's own ``release_rows``; ρ or ε; and the
  simple counter with that entry fed at 3 times the budget (an entry share).
* :func:`selection_case`: Kumar et al. 2024's selection, ``Sampler.exponential_mechanism``
  with a :class:`tabular.TabularConfig`'s ε' = ε/(2k) and Δ = 1/min|W_i|, on the
  worst-case neighbouring utilities (every u_i moved by Δ, candidate 0 up, the rest down).
* :func:`measurement_case`: the baseline's measurement W_j(∇f_t) + discrete Laplace of the
  config's scale 2k/ε, event level (one record added).
* :func:`privhp_case`: PrivHP's noisy tree counters and count-min cells (the input of the
  deterministic growth), add-remove or replace of one point, ε = Σ_ℓ ε_ℓ.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Dict, Optional, Tuple

import numpy as np
from scipy import stats

from continual_synth.mechanisms import accounting
from continual_synth.mechanisms.samplers import Sampler

__all__ = ["STATISTICS", "MIN_SHIFT_Z", "CHOICE_ALPHA", "clopper_pearson",
           "epsilon_lower_bound", "ThresholdTest", "threshold_test", "ScaledNoiseSampler",
           "Draw", "AuditCase", "AuditResult", "run_case", "window_releases", "window_case",
           "worst_entry", "counter_case", "selection_case", "measurement_case",
           "privhp_noisy_counters", "privhp_case", "SIZES", "counter_units", "audit_cases"]

STATISTICS = ("linear", "sign", "innovation-sign", "categorical")
MIN_SHIFT_Z = 4.0   # sign: coordinates whose means differ by more than 4 std. errors
CHOICE_ALPHA = 0.32  # choosing an event: one-σ (two-sided 68%) Clopper–Pearson bounds


# ------------------------------------------------------------------ Clopper–Pearson bound

def clopper_pearson(successes, trials: int, alpha: float) -> Tuple[np.ndarray, np.ndarray]:
    """One-sided (1 − α/2) lower and upper Clopper–Pearson bounds on a binomial p from
    ``successes`` of ``trials`` (arrays allowed); together a (1 − α) interval."""
    k = np.asarray(successes, dtype=np.float64)
    lower = np.where(k > 0, stats.beta.ppf(alpha / 2, np.maximum(k, 1), trials - k + 1), 0.0)
    upper = np.where(k < trials,
                     stats.beta.ppf(1 - alpha / 2, k + 1, np.maximum(trials - k, 1)), 1.0)
    return lower, upper


def epsilon_lower_bound(count: np.ndarray, count_neighbour: np.ndarray, trials: int,
                        delta: float, alpha: float) -> np.ndarray:
    """ε_lb = ln((p_lb(E | D) − δ) / p_ub(E | D')) from event counts among ``trials``
    releases on D and on D' (−inf where p_lb ≤ δ)."""
    p_lower, _ = clopper_pearson(count, trials, alpha)
    _, q_upper = clopper_pearson(count_neighbour, trials, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p_lower > delta, np.log(np.maximum(p_lower - delta, 1e-300) / q_upper),
                        -np.inf)


# ---------------------------------------------------------------------- test statistics

def _fit_linear(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    diff = x.mean(axis=0) - y.mean(axis=0)
    pooled = (np.cov(x, rowvar=False) + np.cov(y, rowvar=False)) / 2
    w = np.linalg.lstsq(np.atleast_2d(pooled), diff, rcond=None)[0]
    return lambda r: r @ w


def _fit_sign(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    n = x.shape[0]
    mean_x, mean_y = x.mean(axis=0), y.mean(axis=0)
    se = np.sqrt((x.var(axis=0) + y.var(axis=0)) / n) + 1e-12
    z = np.abs(mean_x - mean_y) / se
    columns = np.flatnonzero(z > MIN_SHIFT_Z)
    if columns.size == 0:
        columns = np.array([int(np.argmax(z))])
    mid = (mean_x[columns] + mean_y[columns]) / 2
    px = ((x[:, columns] > mid).sum(axis=0) + 0.5) / (n + 1)
    py = ((y[:, columns] > mid).sum(axis=0) + 0.5) / (n + 1)
    above, below = np.log(px / py), np.log((1 - px) / (1 - py))
    return lambda r: np.where(r[:, columns] > mid, above, below).sum(axis=1)


def _fit_innovation_sign(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    pooled = (np.cov(x, rowvar=False) + np.cov(y, rowvar=False)) / 2
    pooled = np.atleast_2d(pooled) + 1e-9 * np.trace(np.atleast_2d(pooled)) * np.eye(x.shape[1])
    inverse_factor = np.linalg.inv(np.linalg.cholesky(pooled)).T
    sign = _fit_sign(x @ inverse_factor, y @ inverse_factor)
    return lambda r: sign(r @ inverse_factor)


def _fit_categorical(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    labels = int(max(x.max(), y.max())) + 1
    llr = np.log((np.bincount(x.ravel(), minlength=labels) + 0.5)
                 / (np.bincount(y.ravel(), minlength=labels) + 0.5))
    # a label never seen while fitting carries no evidence: ratio 1
    return lambda r: np.where(r.ravel() < labels, llr[np.minimum(r.ravel(), labels - 1)], 0.0)


_FITS = {"linear": _fit_linear, "sign": _fit_sign, "innovation-sign": _fit_innovation_sign,
         "categorical": _fit_categorical}


def _best_threshold(s: np.ndarray, t: np.ndarray, delta: float, alpha: float,
                    trials: int) -> Tuple[float, float]:
    """The c maximising the bound (2) of E = {score ≥ c} predicted for ``trials`` releases
    per input, from scores s (D) and t (D'): the bound at ``trials`` of the cautious
    frequencies P(E | D) ≈ its one-σ lower and P(E | D') ≈ its one-σ upper
    Clopper–Pearson bound here.  A rare, strong event is judged by the counts it will
    have in the estimation half, while an event whose few hits here are lucky is
    discounted (the winner's curse of choosing among thousands of thresholds)."""
    candidates = np.unique(np.concatenate([s, t]))
    if candidates.size > 2048:
        candidates = np.unique(np.quantile(candidates, np.linspace(0, 1, 2048)))
    s_sorted, t_sorted = np.sort(s), np.sort(t)
    hits = s.size - np.searchsorted(s_sorted, candidates, side="left")
    hits_neighbour = t.size - np.searchsorted(t_sorted, candidates, side="left")
    p_low, _ = clopper_pearson(hits, s.size, CHOICE_ALPHA)
    _, q_high = clopper_pearson(hits_neighbour, t.size, CHOICE_ALPHA)
    bounds = epsilon_lower_bound(np.rint(p_low * trials), np.rint(q_high * trials), trials,
                                 delta, alpha)
    best = int(np.argmax(bounds))
    return float(candidates[best]), float(bounds[best])


@dataclass(frozen=True)
class ThresholdTest:
    """The outcome of one threshold test (the fields of a benchmark row)."""

    epsilon_lower_bound: float
    statistic: str
    threshold: float
    direction: str          # "D" : E = {s ≥ c} is likelier under D; "D'" : the reverse
    p_hat: float            # P̂(E | D_first) on the second half
    p_hat_neighbour: float  # P̂(E | D_second) on the second half
    releases: int           # releases per input (both halves)


def threshold_test(released: np.ndarray, released_neighbour: np.ndarray, *, delta: float,
                   alpha: float,
                   statistics: Tuple[str, ...] = ("linear", "sign", "innovation-sign")
                   ) -> ThresholdTest:
    """The threshold test of the module docstring on N releases (rows) of M(D) and N of
    M(D'): fit each statistic on the first quarter, choose the statistic and event on the
    second quarter, bound ε on the second half."""
    unknown = set(statistics) - set(STATISTICS)
    if not statistics or unknown:
        raise ValueError(f"statistics must be some of {STATISTICS}, got {statistics!r}")
    if not 0 < alpha < 1 or not 0 <= delta < 1:
        raise ValueError(f"need 0 < alpha < 1 and 0 <= delta < 1, got {alpha!r}, {delta!r}")
    x, y = _as_rows(released), _as_rows(released_neighbour)
    if x.shape != y.shape or x.shape[0] < 100:
        raise ValueError(f"need equally many (>= 100) releases on both inputs, got "
                         f"{x.shape} and {y.shape}")
    half, quarter = x.shape[0] // 2, x.shape[0] // 4
    best = None
    for statistic in statistics:
        score = _FITS[statistic](x[:quarter], y[:quarter])
        s_fit, t_fit = score(x[quarter:half]), score(y[quarter:half])
        for direction, (a, b, sign) in (("D", (s_fit, t_fit, 1.0)),
                                        ("D'", (-t_fit, -s_fit, -1.0))):
            threshold, bound = _best_threshold(a, b, delta, alpha, x.shape[0] - half)
            if best is None or bound > best[0]:
                best = (bound, statistic, score, direction, sign * threshold)
    _, statistic, score, direction, threshold = best
    s, t = score(x[half:]), score(y[half:])
    if direction == "D":
        hit, hit_neighbour = s >= threshold, t >= threshold
    else:
        hit, hit_neighbour = t <= threshold, s <= threshold
    bound = float(epsilon_lower_bound(int(hit.sum()), int(hit_neighbour.sum()), s.size,
                                      delta, alpha))
    return ThresholdTest(epsilon_lower_bound=max(bound, 0.0), statistic=statistic,
                         threshold=threshold, direction=direction, p_hat=float(hit.mean()),
                         p_hat_neighbour=float(hit_neighbour.mean()), releases=x.shape[0])


def _as_rows(a) -> np.ndarray:
    a = np.asarray(a)
    return a.reshape(-1, 1) if a.ndim == 1 else a


# ------------------------------------------------------------------------ planted bug

class ScaledNoiseSampler(Sampler):
    """A sampler whose noise *scale* is ``factor`` times the requested one — the planted
    bug of the audits (``factor = 0.5``: "noise scale halved"), never used for a release.

    Discrete and continuous Gaussian: σ → factor·σ (σ² → factor²·σ²); discrete Laplace:
    b → factor·b; exponential mechanism: Gumbel scale 2Δ/ε → factor·2Δ/ε (ε → ε/factor).
    With factor ½ a ρ-zCDP Gaussian mechanism becomes 4ρ-zCDP and an ε-DP Laplace or
    exponential mechanism 2ε-DP."""

    def __init__(self, inner: Sampler, factor: float):
        if not (factor > 0 and math.isfinite(factor)):
            raise ValueError(f"factor must be a positive number, got {factor!r}")
        super().__init__(inner.rng)
        self.inner, self.factor = inner, float(factor)
        self.name = f"{inner.name}-noise-scaled-{factor:g}"

    def discrete_gaussian(self, sigma2, size):
        return self.inner.discrete_gaussian(sigma2 * self.factor ** 2, size)

    def discrete_laplace(self, scale, size):
        return self.inner.discrete_laplace(scale * self.factor, size)

    def gaussian(self, sigma2, size):
        return self.inner.gaussian(sigma2 * self.factor ** 2, size)

    def exponential_mechanism(self, utilities, epsilon, sensitivity):
        return self.inner.exponential_mechanism(utilities, epsilon / self.factor, sensitivity)


# ------------------------------------------------------------------------------ cases

Draw = Callable[[Sampler, int], Tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class AuditCase:
    """One mechanism on one pair of neighbouring inputs.  ``draw(sampler, n)`` returns n
    releases (rows) on D and n on D'.  The claim is ``epsilon`` (pure DP) or ``rho``
    (zCDP, compared at ``delta``); ``gaussian_mechanism``: the release is a linear map of
    continuous Gaussian noise, so ρ-zCDP is compared through the exact Gaussian curve."""

    family: str
    relation: str
    draw: Draw
    epsilon: Optional[float] = None
    rho: Optional[float] = None
    delta: float = 0.0
    statistics: Tuple[str, ...] = ("linear", "sign", "innovation-sign")
    gaussian_mechanism: bool = False

    @property
    def claimed_epsilon(self) -> float:
        if self.rho is None:
            return float(self.epsilon)
        if self.gaussian_mechanism:
            return accounting.gaussian_mechanism_epsilon(self.rho, self.delta)
        return accounting.zcdp_to_approx_dp(self.rho, self.delta)


@dataclass(frozen=True)
class AuditResult:
    """A case's claim and the bound the threshold test found."""

    family: str
    relation: str
    sampler: str
    claimed_rho: Optional[float]
    claimed_epsilon: float
    delta: float
    alpha: float
    test: ThresholdTest

    @property
    def epsilon_lower_bound(self) -> float:
        return self.test.epsilon_lower_bound

    @property
    def refuted(self) -> bool:
        """True when the bound exceeds the claim: the mechanism is not as private as it
        says (at confidence 1 − α)."""
        return self.epsilon_lower_bound > self.claimed_epsilon

    def to_dict(self) -> Dict:
        out = {k: v for k, v in asdict(self).items() if k != "test"}
        out.update(asdict(self.test), refuted=self.refuted)
        return out


def run_case(case: AuditCase, sampler: Sampler, releases: int, alpha: float = 0.05
             ) -> AuditResult:
    """Draw ``releases`` releases on each input and run :func:`threshold_test`."""
    released, released_neighbour = case.draw(sampler, releases)
    test = threshold_test(released, released_neighbour, delta=case.delta, alpha=alpha,
                          statistics=case.statistics)
    return AuditResult(case.family, case.relation, sampler.name, case.rho,
                       case.claimed_epsilon, case.delta, alpha, test)


def window_releases(config, histogram: np.ndarray, sampler: Sampler, n: int) -> np.ndarray:
    """n independent releases of :func:`window.step` at t = k on the window histogram C^k,
    in one sampler call: max(C^k + n_pad + N_Z(0, σ²), 0) per bin with σ² =
    ``config.noise_variance`` (the step's ``initial_counts``; tests check that ``step``
    draws exactly this, one discrete Gaussian call of σ² per release)."""
    bins = config.num_bins
    noise = sampler.discrete_gaussian(config.noise_variance, n * bins).reshape(n, bins)
    return np.maximum(np.asarray(histogram, dtype=np.int64) + config.n_pad + noise, 0)


def window_case(neighbor: str, rho: float, delta: float, window: int = 2,
                alphabet: Tuple = (0, 1), people: int = 12) -> AuditCase:
    """Bun et al. 2024 Algorithm 1, the release at t = k (horizon k, so R = 1 and the one
    noisy padded histogram spends the whole ρ), drawn by :func:`window_releases`.  Neighbouring
    panels: person 0 (all first letters) is replaced by all last letters (``replace``:
    one window bin −1, another +1, L2 sensitivity √2) or removed (``add-remove``)."""
    from continual_synth.mechanisms import panel, window as window_mechanism

    config = window_mechanism.WindowConfig(window=window, horizon=window, rho=rho,
                                           alphabet=alphabet, neighbor=neighbor, delta=delta)
    size = config.alphabet_size
    matrix = np.random.default_rng(0).integers(0, size, (people, window))
    matrix[0] = 0
    neighbour = (np.vstack([np.full((1, window), size - 1), matrix[1:]])
                 if neighbor == "replace" else matrix[1:])
    histograms = [panel.window_histograms(m, size, window)[0] for m in (matrix, neighbour)]

    def draw(sampler, n):
        return tuple(window_releases(config, h, sampler, n) for h in histograms)

    return AuditCase(f"window k={window}, {size} letters", neighbor, draw, rho=config.rho,
                     delta=delta)


def worst_entry(counter, length: int) -> int:
    """The entry (0-based, among the first ``length``) whose unit change costs the most
    privacy: max over entries s of Σ_rows R[r, s]²/(2σ_r²) (ρ) or Σ_rows |R[r, s]|/b_r
    (ε), from the counter's own ``release_rows``."""
    rows, params, _ = counter.release_rows(length)
    if counter.unit == "rho":
        loss = (rows ** 2 / (2 * params[:, None])).sum(axis=0)
    else:
        loss = (np.abs(rows) / params[:, None]).sum(axis=0)
    return int(np.argmax(loss))


def counter_case(kind: str, unit: str, neighbor: str, budget: float, horizon: int = 8,
                 delta: float = 0.0, share: float = 1.0, **options) -> AuditCase:
    """A stream counter of ``kind`` over a two-bin histogram stream (dim 2 per release; the
    counter's ``dim`` axis carries n independent releases at once).  Neighbours differ at
    the worst entry s (:func:`worst_entry`): ``add-remove`` — one person in bin 0 at time s
    or not (entries_changed 1); ``replace`` — the person is in bin 0 or in bin 1 at time s
    (entries_changed 2, one entry down and one up).  Unbounded kinds run without a horizon
    and are audited over their first ``horizon`` entries.  The claim is the requested
    budget; the counter's own :func:`counters.privacy_cost` must not exceed it.
    ``share`` m ≠ 1 (kinds with entry shares: the tabular selection schedule's feeds)
    feeds the audited entry with m times the budget, every other entry with the budget,
    and claims m·budget for that entry."""
    from continual_synth.mechanisms import counters

    accounting.check_neighbor(neighbor)
    entries_changed = 1 if neighbor == "add-remove" else 2
    bound = None if kind in counters.UNBOUNDED_KINDS else horizon

    def make(dim):
        return counters.make_counter(kind, bound, dim=dim, entries_changed=entries_changed,
                                     **{unit: budget}, **options)

    probe = make(1)
    cost = counters.privacy_cost(probe)[unit]
    if cost > budget * (1 + 1e-9):
        raise ValueError(f"counter {kind}: privacy_cost {cost} exceeds the requested {budget}")
    entry = worst_entry(probe, horizon)

    def draw(sampler, n):
        out = []
        for moved in (0, 1 if neighbor == "replace" else None):
            counter = make(2 * n)
            releases = np.empty((horizon, 2 * n))
            for t in range(horizon):
                z = np.full(2 * n, 3.0)
                if t == entry and moved is not None:
                    z[moved::2] += 1
                releases[t] = counter.feed(z, sampler, share if t == entry else 1.0)
            out.append(releases.reshape(horizon, n, 2).transpose(1, 0, 2).reshape(n, -1))
        return out[0], out[1]

    claimed = budget * share
    claim = {"rho": claimed, "delta": delta} if unit == "rho" else {"epsilon": claimed}
    family = f"counter {kind} ({unit})" + (f", entry share {share:g}" if share != 1.0 else "")
    return AuditCase(family, neighbor, draw, **claim,
                     gaussian_mechanism=probe.noise == counters.GAUSSIAN)


def _one_way_config(epsilon: float, selections: int, attributes: int, values: int):
    from continual_synth.mechanisms import marginals, tabular

    domain = marginals.Domain({f"a{i}": tuple(range(values)) for i in range(attributes)})
    # the paper's split (selection share 1/2: ε/(2k) each), so that with k = 1 and 2ε
    # each claim below is ε; the step uses config.selection_epsilon / measure_epsilon for
    # any share (tests/test_privacy_tester.py checks the calls at the default share)
    return tabular.TabularConfig(domain, tuple((f"a{i}",) for i in range(attributes)),
                                 epsilon, selections=selections, selection_share=0.5)


def selection_case(epsilon: float, selections: int = 1, candidates: int = 16) -> AuditCase:
    """Kumar et al. 2024's selection step (Algorithm 3 line 12 / Algorithm 2): one
    ``Sampler.exponential_mechanism`` call with a :class:`tabular.TabularConfig`'s
    ε' = ε/(2k) and Δ = 1/min_i |W_i| over ``candidates`` one-way workloads.  Event-level
    neighbours move every utility by at most Δ, in either direction (the utilities are
    not monotone); the case uses the extreme pair u = 0, u' = Δ·(+1, −1, …, −1), whose
    loss ε'·(u'_0 − u_0)/(2Δ) + ln(Z/Z') tends to ε' as the candidates grow.  The release
    is the selected index (one sampler call per release: the interface draws one
    selection)."""
    config = _one_way_config(epsilon, selections, candidates, 2)
    delta_u = config.utility_sensitivity
    utilities = np.zeros(candidates)
    neighbour = np.full(candidates, -delta_u)
    neighbour[0] = delta_u

    epsilon_selection, sensitivity = config.selection_epsilon, config.utility_sensitivity

    def draw(sampler, n):
        return tuple(np.array([sampler.exponential_mechanism(u, epsilon_selection, sensitivity)
                               for _ in range(n)]) for u in (utilities, neighbour))

    return AuditCase(f"tabular selection (EM, {candidates} candidates)", "event-level", draw,
                     epsilon=config.selection_epsilon, statistics=("categorical",))


def measurement_case(epsilon: float, selections: int = 1, cells: int = 4) -> AuditCase:
    """The baseline's measurement (Kumar et al. 2024 Algorithm 2, workload form):
    W_j(∇f_t) + discrete Laplace of the config's scale 2k/ε per cell on a ``cells``-cell
    workload; event-level neighbours add one record (one cell +1, L1 sensitivity 1), so
    the claim is ε/(2k).  (The proposed method measures through its counters, audited by
    :func:`counter_case`.)"""
    config = _one_way_config(epsilon, selections, 1, cells)
    histogram = np.arange(cells, dtype=np.int64) + 5
    neighbour = histogram.copy()
    neighbour[0] += 1

    def draw(sampler, n):
        return tuple(h + np.asarray(sampler.discrete_laplace(config.laplace_scale, n * cells),
                                    dtype=np.int64).reshape(n, cells)
                     for h in (histogram, neighbour))

    return AuditCase(f"tabular measurement ({cells} cells)", "event-level", draw,
                     epsilon=config.measure_epsilon)


def privhp_noisy_counters(accumulator, sampler: Sampler, n: int) -> np.ndarray:
    """n independent draws of the noisy counters PrivHP's :func:`privhp.release` computes
    before growing (every later step is deterministic post-processing): each tree level ℓ
    ≤ L* plus discrete Laplace of scale ``config.noise_scales()[ℓ]`` per counter, each
    sketch level's table plus the same law at its level's scale (the scale of
    ``CountMinSketch.privatized``).  Rows: the levels' counters, then the sketch cells."""
    config = accumulator.config
    scales = config.noise_scales()
    blocks = []
    for level in range(config.exact_depth + 1):
        counts = accumulator.level_counts(level)
        blocks.append(counts + sampler.discrete_laplace(scales[level], n * counts.size
                                                        ).reshape(n, counts.size))
    for i, level in enumerate(config.sketch_levels):
        table = accumulator.sketches[i].ravel()
        blocks.append(table + sampler.discrete_laplace(scales[level], n * table.size
                                                       ).reshape(n, table.size))
    return np.hstack(blocks)


def privhp_case(neighbor: str, epsilon: float, prune_k: int = 4, depth: int = 4,
                sketch_width: int = 2, sketch_depth: int = 2, points: int = 40,
                level_shares: Optional[Tuple[float, ...]] = None) -> AuditCase:
    """PrivHP (Holland et al. 2025) on points of [0, 1]: the noisy tree counters and
    sketch cells (:func:`privhp_noisy_counters`).  Neighbours: the last point removed
    (``add-remove``: one counter per tree level and j cells per sketch level +1) or moved
    by ½ (``replace``: it changes cell at every level, so every level's sensitivity is
    doubled).  Claim: the config's ε (= Σ_ℓ ε_ℓ, basic composition).  ``level_shares``:
    explicit ε_ℓ/ε (the config's ``level_epsilons``), else the default split.

    Under ``replace`` the root count n does not change, so ε_0 is never lost and the
    true ε is at most ε − ε_0; the catalogue gives the root a small share there so that
    the planted bug stays detectable."""
    from continual_synth.mechanisms import privhp

    config = privhp.PrivHPConfig(
        epsilon=epsilon, dims=1, prune_k=prune_k, depth=depth, sketch_width=sketch_width,
        sketch_depth=sketch_depth, neighbor=neighbor,
        level_epsilons=None if level_shares is None else tuple(epsilon * np.asarray(
            level_shares) / float(np.sum(level_shares))))
    data = np.random.default_rng(0).random((points, 1))
    if neighbor == "replace":
        neighbour = data.copy()
        neighbour[-1] = (data[-1] + 0.5) % 1.0
    else:
        neighbour = data[:-1]
    accumulators = [privhp.accumulate(d, config) for d in (data, neighbour)]

    def draw(sampler, n):
        return tuple(privhp_noisy_counters(a, sampler, n) for a in accumulators)

    return AuditCase(f"PrivHP k={prune_k} r={depth} sketch {sketch_depth}x{sketch_width}",
                     neighbor, draw, epsilon=config.epsilon)


# ---------------------------------------------------------------------- the catalogue

SIZES = ("ci", "bench")


def counter_units(kind: str):
    """The budgets (``"rho"``, ``"epsilon"``) a counter kind accepts, from its class."""
    from continual_synth.mechanisms import counters

    return type(counters.make_counter(kind, None if kind in counters.UNBOUNDED_KINDS
                                      else 4, rho=1.0)).units


def audit_cases(size: str = "ci", rho: float = 0.5, delta: float = 1e-3,
                epsilon: float = 1.0) -> list:
    """Every mechanism family under every relation it supports: the window histogram,
    every counter kind of the registry in every unit it takes, the tabular selection and
    measurement, PrivHP.  ``ci``: small inputs for the test suite; ``bench``: larger
    windows, horizons, candidate sets and sketches for the benchmark.  zCDP cases claim
    ``rho`` (compared at ``delta``), pure-DP cases ``epsilon``."""
    from continual_synth.mechanisms.counters import SHARE_KINDS, counter_kinds

    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    big = size == "bench"
    relations = accounting.NEIGHBOR_RELATIONS
    cases = [window_case(r, rho, delta) for r in relations]
    if big:
        cases += [window_case(r, rho, delta, window=3, alphabet=(0, 1, 2), people=40)
                  for r in relations]
    for kind in counter_kinds():
        for unit in counter_units(kind):
            budget = rho if unit == "rho" else epsilon
            cases += [counter_case(kind, unit, r, budget, horizon=16 if big else 8, delta=delta)
                      for r in relations]
    # an entry fed with 3 times the budget (the tabular schedule's k/k_t at k = 3, k_t = 1)
    cases += [counter_case(kind, "epsilon", "add-remove", epsilon / 3, share=3.0,
                           horizon=16 if big else 8) for kind in sorted(SHARE_KINDS)]
    # Kumar et al.: ε/(2k) per selection and per measurement; k = 1 and ε = 2·epsilon
    # make each claim ``epsilon``
    cases.append(selection_case(2 * epsilon, candidates=64 if big else 16))
    cases.append(measurement_case(2 * epsilon, cells=16 if big else 4))
    cases.append(privhp_case("add-remove", epsilon))
    cases.append(privhp_case("replace", epsilon, prune_k=2, depth=2, sketch_width=4,
                             sketch_depth=1, level_shares=(0.1, 0.45, 0.45)))
    if big:
        cases.append(privhp_case("add-remove", epsilon, prune_k=8, depth=6, sketch_width=16,
                                 sketch_depth=3, points=200))
        cases.append(privhp_case("replace", epsilon))
    return cases
