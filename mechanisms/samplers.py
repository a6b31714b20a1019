"""Noise samplers: the only source of privacy noise in continual-synth.

Two samplers share one interface:

* :class:`OpenDPSampler` (``"sampler": "opendp"``) draws exact discrete Gaussian and
  discrete Laplace noise through OpenDP's vetted samplers (Canonne, Kamath and
  Steinke 2020, "The Discrete Gaussian for Differential Privacy").  This is the
  default and the only sampler whose releases are fit for publication.
* :class:`SeededSampler` (``"sampler": "seeded"``) is a reproducible simulation
  sampler for experiments and tests: the same rejection algorithm (CKS 2020,
  Algorithm 3) vectorised over numpy's PCG64 with floating-point acceptance tests.
  Its releases are *not for publication*; manifests say so.

Both also implement the exponential mechanism (``exponential_mechanism``) as report
noisy max with Gumbel noise: OpenDP's exact ``make_noisy_max``, or a numpy Gumbel-max.

Both also draw continuous Gaussian noise (``gaussian``) for the continuous Gaussian
mechanism on real-valued releases (the square-root factorisation counter).

Both also hand out a numpy ``Generator`` for the non-private randomness of
post-processing (random rounding, choosing which synthetic people are extended);
that randomness never touches the data before noise is added.
"""
from __future__ import annotations

import math
import secrets
import types

import numpy as np

from continual_synth.mechanisms.errors import InputError, format_bytes

__all__ = ["VARIANCE_TABLE_POINTS", "MAX_VARIANCE_TABLE_SIGMA2", "Sampler", "OpenDPSampler",
           "SeededSampler", "make_sampler", "discrete_gaussian_variance",
           "discrete_laplace_variance"]

# discrete_gaussian_variance sums N_Z(0, σ²)'s mass function over |x| ≤ ⌈12σ⌉ + 2 (the
# mass beyond 12σ is below e^-72, under float64's resolution): a table of 2⌈12σ⌉ + 5
# float64 points, held four times at once (x, x², the weights, their product).  A σ whose
# table exceeds VARIANCE_TABLE_POINTS (the window histogram's 2^24 bins again, 128 MiB a
# copy: the variance of σ² = 4.9·10^11 in about a second) is refused, not summed: a budget
# of ρ = 10^-12 would take about a minute and ρ = 10^-18 ask numpy for 506 GiB.  Such
# noise is far beyond any count: the callers refuse the budget first (CumulativeConfig,
# --rho).
VARIANCE_TABLE_POINTS = 2 ** 24
# the largest σ² whose table fits, 2⌈12σ⌉ + 5 ≤ VARIANCE_TABLE_POINTS (two points spare
# for the rounding of σ)
MAX_VARIANCE_TABLE_SIGMA2 = (math.floor((VARIANCE_TABLE_POINTS - 5) / 2) - 2) ** 2 / 144


class Sampler:
    """Interface: integer-valued noise arrays and post-processing randomness."""

    name = "abstract"
    for_publication = False

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def discrete_gaussian(self, sigma2: float, size: int) -> np.ndarray:
        """``size`` draws of N_Z(0, sigma2): P(x) ∝ exp(-x² / (2 sigma2)) on the integers."""
        raise NotImplementedError

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        """``size`` draws of the discrete Laplace: P(x) ∝ exp(-|x| / scale) on the integers."""
        raise NotImplementedError

    def gaussian(self, sigma2: float, size: int) -> np.ndarray:
        """``size`` draws of the continuous Gaussian N(0, sigma2) (float64).

        This is the noise of the continuous Gaussian mechanism: a real-valued query with
        L2 sensitivity Δ plus N(0, σ²) per coordinate is Δ²/(2σ²)-zCDP (Bun and Steinke
        2016, Prop. 1.6).  Used where the released quantity is not integer-valued (the
        square-root factorisation counter releases C·z with real C); integer-valued
        queries use :meth:`discrete_gaussian`.
        """
        raise NotImplementedError

    def exponential_mechanism(self, utilities, epsilon: float, sensitivity: float) -> int:
        """Index i of ``utilities`` drawn with P(i) ∝ exp(ε·u_i / (2Δ)) — the exponential
        mechanism of McSherry and Talwar (2007) (Kumar et al. 2024 Definition 3.8, with the
        sign of a utility to maximise) — as *report noisy max with Gumbel noise*:
        argmax_i u_i + Gumbel(scale 2Δ/ε), which has exactly that distribution.

        Privacy: if every u_i changes by at most Δ (``sensitivity``, L∞ over candidates)
        between neighbouring inputs, the selection is ε-DP (utilities that may move in
        opposite directions need the factor 2; we never assume monotone utilities).
        """
        raise NotImplementedError


def _check_selection(utilities, epsilon: float, sensitivity: float) -> np.ndarray:
    _check_positive("epsilon", epsilon)
    _check_positive("sensitivity", sensitivity)
    u = np.asarray(utilities, dtype=np.float64).ravel()
    if u.size == 0:
        raise ValueError("the exponential mechanism needs at least one candidate")
    if not np.isfinite(u).all():
        raise ValueError("utilities must be finite")
    return u


class OpenDPSampler(Sampler):
    """Exact, secure noise from OpenDP (``opendp.measurements.make_gaussian`` /
    ``make_laplace`` on integer vectors, which sample N_Z and discrete Laplace exactly)."""

    name = "opendp"
    for_publication = True

    def __init__(self):
        super().__init__(np.random.default_rng(secrets.randbits(128)))
        # The modules themselves, not ``opendp.prelude``: the prelude also imports
        # OpenDP's scikit-learn extras when scikit-learn is installed (the test extras pull
        # it in), seconds of every unseeded command's start
        import opendp.domains
        import opendp.measurements
        import opendp.measures
        import opendp.metrics
        from opendp.mod import enable_features

        enable_features("contrib")
        self._dp = types.SimpleNamespace(
            m=opendp.measurements, vector_domain=opendp.domains.vector_domain,
            atom_domain=opendp.domains.atom_domain, l1_distance=opendp.metrics.l1_distance,
            l2_distance=opendp.metrics.l2_distance,
            linf_distance=opendp.metrics.linf_distance,
            zero_concentrated_divergence=opendp.measures.zero_concentrated_divergence)

    def _vector_noise(self, make, metric, scale: float, size: int) -> np.ndarray:
        dp = self._dp
        if size == 0:
            return np.zeros(0, dtype=np.int64)
        measurement = make(dp.vector_domain(dp.atom_domain(T=int)), metric, scale=float(scale))
        return np.asarray(measurement([0] * size), dtype=np.int64)

    def discrete_gaussian(self, sigma2: float, size: int) -> np.ndarray:
        _check_positive("sigma2", sigma2)
        return self._vector_noise(self._dp.m.make_gaussian, self._dp.l2_distance(T=float),
                                  math.sqrt(sigma2), size)

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        _check_positive("scale", scale)
        return self._vector_noise(self._dp.m.make_laplace, self._dp.l1_distance(T=int),
                                  scale, size)

    def gaussian(self, sigma2: float, size: int) -> np.ndarray:
        """Continuous Gaussian mechanism through OpenDP's float ``make_gaussian`` on
        ``vector_domain(atom_domain(T=float))`` with ``l2_distance(T=float)`` (OpenDP
        samples it without the floating-point attacks of a naive sampler)."""
        _check_positive("sigma2", sigma2)
        dp = self._dp
        if size == 0:
            return np.zeros(0, dtype=np.float64)
        measurement = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                                         dp.l2_distance(T=float), scale=math.sqrt(sigma2))
        return np.asarray(measurement([0.0] * size), dtype=np.float64)

    def exponential_mechanism(self, utilities, epsilon: float, sensitivity: float) -> int:
        """OpenDP's exact report-noisy-max with Gumbel noise: ``opendp.measurements.
        make_noisy_max`` on ``vector_domain(atom_domain(T=float, nan=False))`` with the
        non-monotonic ``linf_distance(T=float)``, scale 2Δ/ε and output measure
        ``zero_concentrated_divergence()`` — the measure under which OpenDP draws *Gumbel*
        noise, so the selection is distributed exactly as P(i) ∝ exp(ε·u_i/(2Δ)), the
        exponential mechanism, which is ε-DP (McSherry and Talwar 2007).  (With
        ``max_divergence()`` OpenDP 0.16 draws exponential noise instead — permute-and-flip,
        also ε-DP but a different distribution.)  OpenDP's privacy map is checked before
        the draw: it must give ρ ≤ ε²/8, the exponential mechanism's zCDP bound (Cesar and
        Rogers 2021), i.e. the same calibration."""
        u = _check_selection(utilities, epsilon, sensitivity)
        if u.size == 1:
            return 0
        dp = self._dp
        space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                 dp.linf_distance(T=float))
        scale = 2.0 * float(sensitivity) / float(epsilon)
        measurement = dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(),
                                          scale=scale)
        if measurement.map(float(sensitivity)) > float(epsilon) ** 2 / 8 * (1 + 1e-9):
            raise RuntimeError("OpenDP's privacy map exceeds the requested epsilon")
        return int(measurement([float(v) for v in u]))


class SeededSampler(Sampler):
    """Reproducible simulation noise (not for publication).

    Discrete Laplace as the difference of two geometric variables; discrete
    Gaussian by CKS 2020 Algorithm 3: draw Y from the discrete Laplace with scale
    t = floor(sigma) + 1 and accept with probability
    exp(-(|Y| - sigma²/t)² / (2 sigma²)).
    """

    name = "seeded"
    for_publication = False

    def __init__(self, seed):
        """``seed``: an int, or a sequence of ints (e.g. ``[seed, period]`` for one step
        of an incremental job)."""
        super().__init__(np.random.default_rng(seed))

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        _check_positive("scale", scale)
        p = -math.expm1(-1.0 / scale)  # success probability 1 - e^{-1/scale}
        return self.rng.geometric(p, size) - self.rng.geometric(p, size)

    def discrete_gaussian(self, sigma2: float, size: int) -> np.ndarray:
        _check_positive("sigma2", sigma2)
        sigma = math.sqrt(sigma2)
        t = math.floor(sigma) + 1
        out = np.empty(size, dtype=np.int64)
        filled = 0
        while filled < size:
            need = size - filled
            batch = max(2 * need, 64)
            y = self.discrete_laplace(t, batch)
            accept = self.rng.random(batch) < np.exp(-((np.abs(y) - sigma2 / t) ** 2) / (2 * sigma2))
            kept = y[accept][:need]
            out[filled:filled + kept.size] = kept
            filled += kept.size
        return out

    def gaussian(self, sigma2: float, size: int) -> np.ndarray:
        """Continuous Gaussian N(0, sigma2) from numpy's ``rng.normal`` (simulation only)."""
        _check_positive("sigma2", sigma2)
        return self.rng.normal(0.0, math.sqrt(sigma2), size)

    def exponential_mechanism(self, utilities, epsilon: float, sensitivity: float) -> int:
        """Gumbel-max with numpy's ``rng.gumbel`` (simulation only): argmax_i
        ε·u_i/(2Δ) + G_i, G_i i.i.d. standard Gumbel, which is distributed exactly as
        P(i) ∝ exp(ε·u_i/(2Δ))."""
        u = _check_selection(utilities, epsilon, sensitivity)
        if u.size == 1:
            return 0
        scores = u * (float(epsilon) / (2.0 * float(sensitivity)))
        return int(np.argmax(scores + self.rng.gumbel(size=u.size)))


def make_sampler(seed) -> Sampler:
    """The exact OpenDP sampler, or the seeded simulation sampler when a seed is given."""
    return OpenDPSampler() if seed is None else SeededSampler(seed)


def discrete_gaussian_variance(sigma2: float) -> float:
    """Exact variance of N_Z(0, sigma2), by summing the mass function (CKS 2020, Prop. 19:
    it is strictly below sigma2 and tends to it as sigma2 grows).  A sigma2 above
    :data:`MAX_VARIANCE_TABLE_SIGMA2` is an :class:`InputError` (its table would not fit)."""
    sigma = math.sqrt(sigma2)
    bound = int(math.ceil(12 * sigma)) + 2
    if 2 * bound + 1 > VARIANCE_TABLE_POINTS:
        raise InputError(
            f"the discrete Gaussian of variance {sigma2:.3g} is too wide to sum: "
            f"{2 * bound + 1:.3g} points ({format_bytes(8 * (2 * bound + 1))} a copy), at most "
            f"{VARIANCE_TABLE_POINTS} (variance <= {MAX_VARIANCE_TABLE_SIGMA2:.3g}); a privacy "
            f"budget this small buries every count in noise")
    x = np.arange(-bound, bound + 1, dtype=np.float64)
    weight = np.exp(-(x ** 2) / (2 * sigma2))
    return float((x ** 2 * weight).sum() / weight.sum())


def discrete_laplace_variance(scale: float) -> float:
    """Exact variance of the discrete Laplace with P(x) ∝ exp(-|x|/scale): 2q/(1-q)², q = e^{-1/scale}."""
    q = math.exp(-1.0 / scale)
    if q == 1.0:  # 1/scale below float64's resolution: 1 − q rounds to 0
        raise InputError(f"the discrete Laplace of scale {scale:.3g} is too wide for its "
                         f"variance to be computed (1 - e^(-1/scale) rounds to 0); a privacy "
                         f"budget this small buries every count in noise")
    return 2 * q / (1 - q) ** 2


def _check_positive(name: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
