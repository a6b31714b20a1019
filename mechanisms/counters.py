"""Private continual counters: release S̃^t ≈ S^t = z^1 + … + z^t at every time t.

A *stream counter* reads a stream z^1, z^2, … of non-negative values (scalars, or vectors
of length ``dim``: one counter over a whole histogram, independent noise per coordinate)
and after each entry releases a noisy prefix sum.  Every counter here releases a set of
noisy linear statistics of the stream ("nodes": entries, blocks, dyadic intervals, rows
of a matrix) and post-processes them into S̃^t; its privacy follows from the sensitivity
of the released nodes, its error from their noise.

Kinds (``counter_kinds()``):

=====================  ===========================================================  =========
kind                   algorithm                                                    horizon
=====================  ===========================================================  =========
``simple``             Chan, Shi, Song 2011 "Simple II": noise on every entry       optional
``block``              CSS 2011 two-level mechanism (Kumar et al. 2024 "Block")     bounded
``tree``               Bun et al. 2024 App. A Algorithm 3 = CSS binary mechanism    bounded
``honaker``            the same dyadic tree, all nodes, Honaker's (2015) BLUE       bounded
``kary``               k-ary tree, best k for T (Andersson et al. 2025 §3, no        bounded
                       negative digits); the best pure ε-DP counter here
``sqrt-factorisation`` A = C·C, C Toeplitz c_k = binom(2k,k)/4^k (FHU 2023)          bounded
``blt``                buffered linear Toeplitz C, d ≤ 8 buffers (Dvijotham et al.   bounded
                       2024): sqrt-factorisation's error in O(d) time and memory
``hybrid``             CSS 2011 hybrid: logarithmic epochs + a tree per epoch        unbounded
``unbounded-block``    Kumar, Strohmer, Vershynin 2024 §8, Algorithm 4              unbounded
``anchored``           Simple II + a node per block of B | T entries (default B = T), bounded
                       combined by least squares: less variance at block ends (new)
=====================  ===========================================================  =========

Neighbouring streams and sensitivity
------------------------------------
Two streams are neighbours when ``entries_changed`` = E stream entries (an entry is one
time step of one coordinate) each change by at most 1 (L1 = L2 = 1 per entry): E = 1
under add/remove of one record or one person (Bun et al. 2024 App. A), E = 2 under the
replace relation, where one person leaves one entry and joins another (papers README
point 1).  If one entry touches at most ``k`` released nodes, the release has
L1 ≤ E·k and L2² ≤ E·k: the L1 bound is the triangle inequality; the L2² bound holds
because the E changes either lie in different coordinates (disjoint nodes) or, in the
same coordinate, have opposite signs (one leaves, one joins) and every release matrix
here has non-negative entries, so shared nodes only cancel.  (E changes of the *same*
sign in one coordinate would need L2² = E²·k; that is not a relation this project uses.)
Every counter is calibrated *exactly* to these sensitivities, with the exact number of
nodes an entry touches (e.g. ⌊log2 T⌋ + 1 for the tree, papers README point 2):

* ``rho``: discrete Gaussian noise N_Z(0, σ²) per node, σ² = E·k / (2ρ), so the release
  is Δ₂²/(2σ²) = ρ-zCDP (Canonne, Kamath, Steinke 2020, Thm. 4; Bun, Steinke 2016);
* ``epsilon``: discrete Laplace noise of scale b = E·k / ε per node: Δ₁/b = ε-DP;
* ``sqrt-factorisation`` and ``blt`` release real numbers and take the continuous
  Gaussian (``Sampler.gaussian``; ``rho`` only, see ``counter_units``).

Variances are exact: the variance of a node's noise is the exact variance of the discrete
Gaussian (``discrete_gaussian_variance``, slightly below σ²), of the discrete Laplace
(2q/(1−q)², q = e^{−1/b}) or σ² for the continuous Gaussian; ``variance(t)`` is the
weighted sum over the nodes S̃^t uses.

Unbounded counters and the budget across epochs
-----------------------------------------------
``hybrid`` and ``unbounded-block`` cut time into data-independent epochs and spend the
*whole* per-entry budget in every epoch, as CSS 2011 (Hybrid mechanism) and
Kumar et al. (Thm. 8.1) do.  This is parallel composition, not a series: each stream
entry lies in exactly one epoch and touches only that epoch's nodes (plus, for the
hybrid, exactly one logarithmic node), so the privacy loss of a neighbouring pair is the
sum over its E changed entries of a per-entry loss that is the same in every epoch.
Hence ``privacy_cost`` = E × per-entry loss = the requested budget for any stream
length; no convergent split (ρ_m ∝ 1/m², …) is needed, and one would only add noise.

State
-----
``to_dict`` / ``StreamCounter.from_dict`` round-trip the whole state through JSON (the
sampler is passed to every ``feed`` instead).  **The state holds private data** (true
partial sums of the current nodes; for ``sqrt-factorisation`` the whole input stream;
for ``blt`` the noise buffers, which with a release would reveal the data):
keep it on the private side.  ``release_rows`` lists every released node as a row over
the entries (for audits: sensitivities, best linear estimators; tests use it).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

import numpy as np

from continual_synth.mechanisms import accounting
from continual_synth.mechanisms.samplers import (
    Sampler,
    discrete_gaussian_variance,
    discrete_laplace_variance,
)

__all__ = ["FORMAT_VERSION", "DISCRETE_GAUSSIAN", "DISCRETE_LAPLACE", "GAUSSIAN",
           "tree_levels", "sqrt_factor_coefficients", "StreamCounter", "SimpleCounter",
           "block_max_count", "default_block_size", "BlockCounter", "AnchoredCounter",
           "TreeCounter", "honaker_weight", "HonakerTreeCounter", "kary_levels",
           "kary_digit_sums", "kary_arity_candidates", "KaryTreeCounter",
           "SqrtFactorisationCounter", "blt_coefficients", "blt_inverse_coefficients",
           "optimise_blt_parameters", "blt_parameters", "BLTCounter", "HybridCounter",
           "UnboundedBlockCounter", "UNBOUNDED_KINDS", "SHARE_KINDS", "INTEGER_KINDS",
           "counter_kinds", "counter_units", "make_counter", "max_variance", "privacy_cost"]

FORMAT_VERSION = 1

DISCRETE_GAUSSIAN = "discrete_gaussian"
DISCRETE_LAPLACE = "discrete_laplace"
GAUSSIAN = "gaussian"


# ---------------------------------------------------------------------------- helpers

def tree_levels(horizon: int) -> int:
    """Levels of the binary tree over ``horizon`` leaves that one entry can touch:
    ⌊log2 T⌋ + 1 (T = 1 → 1, 12 → 4, 16 → 5; papers README point 2)."""
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    return int(horizon).bit_length()


def _lowbit(t: int) -> int:
    """Index of the lowest set bit of t ≥ 1."""
    return (t & -t).bit_length() - 1


def _popcount(ts: np.ndarray) -> np.ndarray:
    ts = np.asarray(ts, dtype=np.int64).copy()
    count = np.zeros(ts.shape, dtype=np.int64)
    while ts.any():
        count += ts & 1
        ts >>= 1
    return count


@lru_cache(maxsize=4096)
def _dg_var(sigma2: float) -> float:
    return discrete_gaussian_variance(sigma2)


@lru_cache(maxsize=4096)
def _dl_var(scale: float) -> float:
    return discrete_laplace_variance(scale)


def sqrt_factor_coefficients(n: int) -> np.ndarray:
    """c_0..c_{n−1} with c_k = binom(2k, k)/4^k: the Toeplitz square root of the all-ones
    lower-triangular matrix (Σ_{j=0}^{k} c_j c_{k−j} = 1 for all k)."""
    c = np.empty(max(int(n), 0), dtype=np.float64)
    if n > 0:
        c[0] = 1.0
        for k in range(1, n):
            c[k] = c[k - 1] * (2 * k - 1) / (2 * k)
    return c


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


# ---------------------------------------------------------------------------- base class

class StreamCounter:
    """Private continual counter of a stream z^1, z^2, … of non-negative values (scalars,
    or vectors of length ``dim`` for one counter over a whole histogram).

    Build counters with :func:`make_counter`.  ``feed(z, sampler)`` adds z^t and returns
    S̃^t (float64 array of length ``dim``); ``variance(t)`` is the exact per-coordinate
    variance of S̃^t − S^t; :func:`privacy_cost` gives the budget the counter spends.
    """

    kind = "abstract"
    unbounded = False          # True: horizon may be None (epochs continue forever)
    entry_shares = False       # True: feed(…, share=m) may spend m × the budget on one entry
    units = ("rho", "epsilon")   # budgets the counter accepts
    integer_valued = True        # integer inputs give integer outputs (discrete noise sums)
    option_names: Tuple[str, ...] = ()

    def __init__(self, horizon: Optional[int], *, rho: Optional[float] = None,
                 epsilon: Optional[float] = None, dim: int = 1, entries_changed: int = 1,
                 **options):
        unknown = set(options) - set(self.option_names)
        if unknown:
            raise ValueError(f"counter {self.kind!r} has no option(s) {sorted(unknown)}; "
                             f"it accepts {list(self.option_names) or 'none'}")
        if horizon is None:
            if not self.unbounded:
                raise ValueError(f"counter {self.kind!r} needs a horizon T (only "
                                 f"{sorted(UNBOUNDED_KINDS)} run without one)")
            self.horizon = None
        else:
            self.horizon = _check_int("horizon", horizon, 1)
        self.dim = _check_int("dim", dim, 1)
        self.entries_changed = _check_int("entries_changed", entries_changed, 1)
        if (rho is None) == (epsilon is None):
            raise ValueError("give exactly one of rho (zCDP, discrete Gaussian) and "
                             "epsilon (pure DP, discrete Laplace)")
        budget = rho if rho is not None else epsilon
        if isinstance(budget, bool) or not isinstance(budget, (int, float, np.floating,
                                                                np.integer)) \
                or not (budget > 0 and math.isfinite(budget)):
            raise ValueError(f"the privacy budget must be a positive finite number, "
                             f"got {budget!r}")
        self.unit = "rho" if rho is not None else "epsilon"
        if self.unit not in self.units:
            raise ValueError(f"counter {self.kind!r} takes only {' or '.join(self.units)}")
        self.budget = float(budget)
        self.noise = self._noise_type()
        self.options = dict(options)
        self._time = 0

    # -- noise ----------------------------------------------------------------------
    def _noise_type(self) -> str:
        return DISCRETE_GAUSSIAN if self.unit == "rho" else DISCRETE_LAPLACE

    def _calibrate(self, touches: int, share: float = 1.0) -> float:
        """Noise parameter of nodes of which one entry touches ``touches``, spending
        ``share`` of the budget per entry: σ² = E·k/(2·share·ρ) or b = E·k/(share·ε)."""
        budget = share * self.budget
        if self.unit == "rho":
            return accounting.gaussian_sigma2(math.sqrt(self.entries_changed * touches), budget)
        return accounting.laplace_scale(self.entries_changed * touches, budget)

    def _node_cost(self, param: float) -> float:
        """Privacy loss of one unit change in one node with noise parameter ``param``."""
        if self.unit == "rho":
            return accounting.gaussian_rho(1.0, param)
        return accounting.laplace_epsilon(1.0, param)

    def node_variance(self, param: float) -> float:
        """Exact variance of one node's noise with parameter σ² (Gaussian) or b (Laplace)."""
        if self.noise == DISCRETE_GAUSSIAN:
            return _dg_var(float(param))
        if self.noise == DISCRETE_LAPLACE:
            return _dl_var(float(param))
        return float(param)

    def node_params(self) -> List[float]:
        """Every noise parameter the counter's nodes use (over its whole horizon)."""
        return [param for _, param in self._entry_groups()]

    def sub_gaussian_factor(self) -> float:
        """How far a release's sub-Gaussian variance proxy can exceed its exact variance.

        N_Z(0, σ²) is σ²-sub-Gaussian (its moment generating function is at most that of
        N(0, σ²); Canonne, Kamath, Steinke 2020) while its variance is below σ², far below
        for small σ² (σ² = 0.05: 1.1·10⁻⁴).  S̃^t − S^t = Σ_i w_i Z_i over independent
        nodes, so its proxy Σ w_i² σ_i² is at most max_i σ_i²/Var(Z_i) × its variance.
        1 for the continuous Gaussian.  Pure-DP (Laplace) noise is not sub-Gaussian.
        A node whose variance underflows to 0 (σ² below about 10⁻³) draws anything but 0
        with probability below 10⁻³⁰⁰ and is left out."""
        if self.unit != "rho":
            raise ValueError("discrete Laplace noise is not sub-Gaussian")
        if self.noise != DISCRETE_GAUSSIAN:
            return 1.0
        ratios = [float(p) / v for p in self.node_params() if (v := self.node_variance(p)) > 0]
        return max(ratios, default=1.0)

    def _draw(self, sampler: Sampler, param: float, nodes: int) -> np.ndarray:
        """Noise for ``nodes`` nodes × ``dim`` coordinates, as float64 (nodes, dim)."""
        size = nodes * self.dim
        if self.noise == DISCRETE_GAUSSIAN:
            noise = sampler.discrete_gaussian(param, size)
        elif self.noise == DISCRETE_LAPLACE:
            noise = sampler.discrete_laplace(param, size)
        else:
            noise = sampler.gaussian(param, size)
        return np.asarray(noise, dtype=np.float64).reshape(nodes, self.dim)

    # -- streaming ------------------------------------------------------------------
    @property
    def time(self) -> int:
        """Number of entries fed so far (t)."""
        return self._time

    def _check_input(self, z) -> np.ndarray:
        arr = np.asarray(z, dtype=np.float64)
        if arr.ndim == 0:
            if self.dim != 1:
                raise ValueError(f"expected a vector of length dim={self.dim}, got a scalar")
            arr = arr.reshape(1)
        if arr.shape != (self.dim,):
            raise ValueError(f"expected an entry of shape ({self.dim},), got {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError("stream entries must be finite")
        return arr.copy()

    def feed(self, z, sampler: Sampler, share: float = 1.0) -> np.ndarray:
        """Add z^t (scalar when dim = 1, or a length-``dim`` array); return S̃^t, a new
        float64 array of length ``dim``.  Entries are meant to be non-negative counts;
        only finiteness is enforced (neither privacy nor the variance depends on signs).

        ``share`` m ≠ 1 (counters with ``entry_shares`` only: the simple counter, whose
        every entry has its own node) releases this entry with noise calibrated to m times
        the budget: the entry then costs m·(its budget), which the caller accounts for
        (the tabular synthesizer's per-period selections, :func:`tabular.period_selections`)."""
        self._check_room()
        share = float(share)
        if share != 1.0:
            if not self.entry_shares:
                raise ValueError(f"counter {self.kind!r} spends the same budget on every "
                                 f"entry; only the simple counter takes share")
            if not (share > 0 and math.isfinite(share)):
                raise ValueError(f"share must be a positive finite number, got {share!r}")
        arr = self._check_input(z)
        self._time += 1
        noisy = (self._feed(arr, sampler, self._time) if share == 1.0
                 else self._feed_share(arr, sampler, self._time, share))
        return np.asarray(noisy, dtype=np.float64)

    def _check_room(self) -> None:
        """An entry may still be fed (``time`` < T, or no horizon)."""
        if self.horizon is not None and self._time >= self.horizon:
            raise ValueError(f"counter {self.kind!r} has reached its horizon T={self.horizon}")

    def _feed(self, z: np.ndarray, sampler: Sampler, t: int) -> np.ndarray:
        raise NotImplementedError

    def _feed_share(self, z: np.ndarray, sampler: Sampler, t: int, share: float
                    ) -> np.ndarray:
        raise NotImplementedError

    @property
    def last_variance(self) -> float:
        """Per-coordinate variance of the noise the latest entry added, S̃^t − S̃^{t−1} −
        z^t: exact for the simple counter (its own node, whatever its share); for the
        other kinds the variance of S̃^1 (a one-entry count), as the tabular synthesizer's
        pooled margins use it."""
        return self.variance(1)

    def next_variance(self, share: float = 1.0) -> float:
        """Per-coordinate variance of S̃^{t+1} − S^{t+1} if the next entry is fed with
        ``share`` (the simple counter) or at the counter's budget (every kind)."""
        if float(share) != 1.0:
            raise ValueError(f"counter {self.kind!r} spends the same budget on every entry")
        return self.variance(self._time + 1)

    # -- error ----------------------------------------------------------------------
    def _check_times(self, ts) -> np.ndarray:
        ts = np.asarray(ts, dtype=np.int64)
        if (ts < 1).any() or (self.horizon is not None and (ts > self.horizon).any()):
            raise ValueError(f"t must lie in 1..{self.horizon or '∞'}")
        return ts

    def variance(self, t: int) -> float:
        """Exact per-coordinate variance of S̃^t − S^t."""
        return float(self.variances([t])[0])

    def variances(self, ts) -> np.ndarray:
        """Vectorised :meth:`variance` over an array of times."""
        return self._variances(self._check_times(ts))

    def _variances(self, ts: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # -- privacy --------------------------------------------------------------------
    def _entry_groups(self) -> List[Tuple[int, float]]:
        """For the worst-case entry: (number of nodes touched, noise parameter) per node
        group.  The loss of one changed entry is Σ_groups touches/(2σ²) or touches/b."""
        raise NotImplementedError

    def entry_cost(self) -> float:
        """Privacy loss (ρ or ε) of changing one entry by 1, from the noise parameters."""
        return float(sum(k * self._node_cost(p) for k, p in self._entry_groups()))

    def noise_description(self) -> str:
        """The counter's own noise, for manifests: the distribution, each group of nodes
        one entry touches with its parameter (b for Laplace, σ² for Gaussian noise), and
        the worst standard deviation of a released count over t ≤ T."""
        name = {DISCRETE_LAPLACE: ("discrete Laplace", "scale"),
                DISCRETE_GAUSSIAN: ("discrete Gaussian", "sigma^2"),
                GAUSSIAN: ("Gaussian", "sigma^2")}[self.noise]
        groups = ", ".join(f"{touches} node{'s' if touches > 1 else ''} of {name[1]} "
                           f"{param:.6g}" for touches, param in self._entry_groups())
        text = f"{self.kind} counter, {name[0]} noise; one entry is in {groups}"
        if self.horizon is not None:
            worst = float(self.variances(np.arange(1, self.horizon + 1)).max())
            text += f"; worst std of a count over t <= {self.horizon}: {math.sqrt(worst):.6g}"
        return text

    def release_rows(self, n: Optional[int] = None):
        """Every node the counter releases while reading entries 1..n (n defaults to the
        horizon): (rows (k × n) — each row the node's coefficients on the entries —,
        noise parameter per row, time at which each row is released).  For audits."""
        n = self._audit_length(n)
        rows, params, times = self._release_rows(n)
        return (np.asarray(rows, dtype=np.float64).reshape(-1, n),
                np.asarray(params, dtype=np.float64), np.asarray(times, dtype=np.int64))

    def _audit_length(self, n: Optional[int]) -> int:
        if n is None:
            if self.horizon is None:
                raise ValueError("an unbounded counter needs n")
            return self.horizon
        n = _check_int("n", n, 1)
        if self.horizon is not None and n > self.horizon:
            raise ValueError(f"n={n} exceeds the horizon {self.horizon}")
        return n

    def _release_rows(self, n: int):
        raise NotImplementedError

    # -- serialisation ----------------------------------------------------------------
    def to_dict(self) -> Dict:
        """JSON-serialisable state (parameters and the running sums; no sampler)."""
        return {"format": FORMAT_VERSION, "kind": self.kind, "horizon": self.horizon,
                self.unit: self.budget, "dim": self.dim,
                "entries_changed": self.entries_changed, "options": dict(self.options),
                "time": self._time, "state": {k: np.asarray(v).tolist()
                                              for k, v in self._state().items()}}

    @classmethod
    def from_dict(cls, d: Dict) -> "StreamCounter":
        if d.get("format") != FORMAT_VERSION:
            raise ValueError(f"unknown counter state format {d.get('format')!r}")
        counter = make_counter(d["kind"], d["horizon"], rho=d.get("rho"),
                               epsilon=d.get("epsilon"), dim=d["dim"],
                               entries_changed=d["entries_changed"], **d["options"])
        counter._time = _check_int("time", d["time"], 0)
        if counter.horizon is not None and counter._time > counter.horizon:
            raise ValueError("state time exceeds the horizon")
        counter._restore({k: np.asarray(v, dtype=np.float64) for k, v in d["state"].items()})
        return counter

    def _state(self) -> Dict[str, np.ndarray]:
        raise NotImplementedError

    def _restore(self, state: Dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(horizon={self.horizon}, {self.unit}={self.budget:g}, "
                f"dim={self.dim}, entries_changed={self.entries_changed}, t={self._time})")


# ---------------------------------------------------------------------------- simple

class SimpleCounter(StreamCounter):
    """Chan, Shi, Song 2011 "Simple II" (Kumar et al. 2024 "Simple" counter).

    Every entry is released with its own noise; S̃^t = Σ_{s≤t} (z^s + η_s).
    Sensitivity: each entry touches 1 node → L1 = L2² = E.  Noise σ² = E/(2ρ) or b = E/ε.
    Variance: Var(S̃^t − S^t) = t·v, v the exact node variance.  Works without a horizon.

    Entry shares: an entry fed with ``share`` m gets its node calibrated to m times the
    budget (b/m, or σ²/m), and costs m times as much; no other entry is touched, so the
    loss of a changed entry s is its own node's.  The counter then keeps the variance of
    S̃^t exactly, Σ_s v_s (``variance(t)`` for t ≥ the entries fed so far; the variance of
    an earlier count is not kept once shares have varied).
    """

    kind = "simple"
    unbounded = True
    entry_shares = True

    def __init__(self, horizon, **kw):
        super().__init__(horizon, **kw)
        self.param = self._calibrate(1)
        self._sum = np.zeros(self.dim)
        self._shared = False        # some entry was fed with a share ≠ 1
        self._variance = 0.0        # Σ_s v_s over the entries fed
        self._last = self.node_variance(self.param)   # v of the latest (or the next) entry

    def _param(self, share: float) -> float:
        return self.param if share == 1.0 else self._calibrate(1, share)

    def _feed(self, z, sampler, t):
        return self._feed_share(z, sampler, t, 1.0)

    def _feed_share(self, z, sampler, t, share):
        param = self._param(share)
        return self._add(z + self._draw(sampler, param, 1)[0], self.node_variance(param),
                         share != 1.0)

    def _add(self, entry, variance: float, shared: bool) -> np.ndarray:
        """S̃^t = S̃^{t−1} + ``entry``, whose per-coordinate variance is ``variance``."""
        self._sum += entry
        self._last = variance
        self._variance += variance
        self._shared = self._shared or shared
        return self._sum.copy()

    def entry_param(self, share: float = 1.0) -> float:
        """The noise parameter of an entry fed with ``share`` of the budget."""
        return self._param(float(share))

    def feed_measured(self, noisy, variance: float) -> np.ndarray:
        """Add an entry that is already a private measurement (post-processing of noise
        drawn elsewhere, per-coordinate variance ``variance``); this counter adds no noise
        and spends none of its budget.  Returns S̃^t like :meth:`feed`."""
        self._check_room()
        arr = self._check_input(noisy)
        self._time += 1
        return self._add(arr, float(variance), True)

    def _variances(self, ts):
        v = self.node_variance(self.param)
        if not self._shared:
            return ts * v
        if (ts < self._time).any():
            raise ValueError("the entries were fed with varying shares: the variance is "
                             f"kept for t >= {self._time} only")
        return self._variance + (ts - self._time) * v

    @property
    def last_variance(self) -> float:
        return self._last

    def next_variance(self, share: float = 1.0) -> float:
        share = float(share)
        if not (share > 0 and math.isfinite(share)):
            raise ValueError(f"share must be a positive finite number, got {share!r}")
        return (self.variance(self._time) if self._time else 0.0) + self.node_variance(
            self._param(share))

    def _entry_groups(self):
        return [(1, self.param)]

    def _release_rows(self, n):
        return np.eye(n), [self.param] * n, np.arange(1, n + 1)

    def _state(self):
        state = {"sum": self._sum}
        if self._shared:
            state["shared_variance"] = np.array([self._variance, self._last])
        return state

    def _restore(self, state):
        self._sum = state["sum"].reshape(self.dim)
        v = self.node_variance(self.param)
        self._shared = "shared_variance" in state
        self._variance, self._last = ((float(x) for x in state["shared_variance"])
                                      if self._shared else (self._time * v, v))


# ---------------------------------------------------------------------------- block

def block_max_count(horizon: int, block: int) -> int:
    """max_{t≤T} (⌊t/B⌋ + t mod B): the most nodes S̃^t of the block counter sums."""
    best = horizon // block + horizon % block
    q = (horizon - block + 1) // block
    if q >= 0 and q * block + block - 1 <= horizon:
        best = max(best, q + block - 1)
    return best


def default_block_size(horizon: int) -> int:
    """The block size B minimising the block counter's maximum variance
    touches(B)·max_t(⌊t/B⌋ + t mod B) (≈ √T; ties go to the smaller mean variance)."""
    root = math.isqrt(horizon)
    candidates = {1} | set(range(max(1, root // 2), min(horizon, 2 * root + 2) + 1))
    ts = np.arange(1, horizon + 1)

    def key(b):
        touches = BlockCounter.touches(horizon, b)
        mean = float((ts // b + ts % b).mean())
        return (touches * block_max_count(horizon, b), touches * mean, b)

    return min(candidates, key=key)


class BlockCounter(StreamCounter):
    """Chan, Shi, Song 2011 two-level mechanism (Kumar et al. 2024 "Block" counter),
    bounded horizon T, block size B (option ``block_size``, default ≈ √T, the B of least
    maximum variance).

    At a block end (t = qB) the block sum is released with noise; every other entry is
    released with its own noise (as in Kumar et al. Algorithm 4, block-end entries need
    no entry noise: S̃^{qB} uses only block sums).  S̃^t = Σ noisy complete blocks +
    Σ noisy entries of the current block.
    Sensitivity: an entry touches its own node and its block's (if that block ends by T):
    k = 2 (k = 1 when B = 1 or B > T) → σ² = E·k/(2ρ), b = E·k/ε.
    Variance: Var(S̃^t − S^t) = (⌊t/B⌋ + t mod B)·v.
    """

    kind = "block"
    option_names = ("block_size",)

    def __init__(self, horizon, block_size: Optional[int] = None, **kw):
        options = {} if block_size is None else {"block_size": block_size}
        super().__init__(horizon, **kw, **options)
        if block_size is None:
            self.block_size = default_block_size(self.horizon)
        else:
            self.block_size = _check_int("block_size", block_size, 1)
            if self.block_size > self.horizon:
                raise ValueError(f"block_size {block_size} exceeds the horizon {self.horizon}")
        self.param = self._calibrate(self.touches(self.horizon, self.block_size))
        self._blocks = np.zeros(self.dim)      # Σ noisy complete blocks
        self._true = np.zeros(self.dim)        # true sum of the current block (private)
        self._noisy = np.zeros(self.dim)       # Σ noisy entries of the current block

    @staticmethod
    def touches(horizon: int, block: int) -> int:
        """Nodes the worst entry touches: 2 when some non-block-end entry has its block
        end within the horizon (B ≥ 2 and B ≤ T), else 1."""
        return 2 if 2 <= block <= horizon else 1

    def _feed(self, z, sampler, t):
        self._true += z
        noise = self._draw(sampler, self.param, 1)[0]
        if t % self.block_size == 0:
            self._blocks += self._true + noise
            self._true[:] = 0
            self._noisy[:] = 0
            return self._blocks.copy()
        self._noisy += z + noise
        return self._blocks + self._noisy

    def _variances(self, ts):
        b = self.block_size
        return (ts // b + ts % b) * self.node_variance(self.param)

    def _entry_groups(self):
        return [(self.touches(self.horizon, self.block_size), self.param)]

    def _release_rows(self, n):
        rows, times, b = [], [], self.block_size
        for t in range(1, n + 1):
            row = np.zeros(n)
            if t % b == 0:
                row[t - b:t] = 1
            else:
                row[t - 1] = 1
            rows.append(row)
            times.append(t)
        return np.array(rows), [self.param] * n, times

    def _state(self):
        return {"blocks": self._blocks, "true": self._true, "noisy": self._noisy}

    def _restore(self, state):
        self._blocks, self._true, self._noisy = (state[k].reshape(self.dim)
                                                 for k in ("blocks", "true", "noisy"))


# ------------------------------------------------------------------------- anchored

class AnchoredCounter(StreamCounter):
    """Simple II anchored every B periods (new, for continual PrivHP's last period): CSS
    2011's Simple II on a share 1 − a of the budget, plus, at every block end t = qB, one
    node — the sum of the block's B entries — on the share a (options ``final_share`` a,
    default 0.2, and ``block_size`` B, a divisor of T, default T: one anchor at T).

    At a block end there are two independent unbiased estimates of the block's sum: its
    B noisy entries (variance B·v_s) and the block node (variance v_F); the block's
    estimate is their least-squares combination, of variance w = B·v_s·v_F/(B·v_s + v_F).
    S̃^t = Σ combined complete blocks + Σ noisy entries of the current block, so
    Var(S̃^t − S^t) = ⌊t/B⌋·w + (t mod B)·v_s.  It trades variance inside blocks
    (×1/(1−a)² against Simple II) for variance at block ends (e.g. T = 50, B = T,
    a = 0.2: 78 v at every t < T against 50 v, and 19 v at T against 50 v; v the variance
    of one count at the full budget).
    Sensitivity: an entry touches its own node (share 1 − a) and its block's node (share
    a): σ_s² = E/(2(1−a)ρ), σ_F² = E/(2aρ) or b_s = E/((1−a)ε), b_F = E/(aε), so the loss
    of one changed entry is exactly the budget.  State: the running estimate and the
    current block's entry-noise sum D (the block node minus the entries' sum is η_F − D:
    no exact sum is kept), 2 words per coordinate.
    """

    kind = "anchored"
    option_names = ("final_share", "block_size")
    integer_valued = False   # the combination at block ends is real-valued

    def __init__(self, horizon, final_share: Optional[float] = None,
                 block_size: Optional[int] = None, **kw):
        options = {k: v for k, v in (("final_share", final_share),
                                     ("block_size", block_size)) if v is not None}
        super().__init__(horizon, **kw, **options)
        self.final_share = 0.2 if final_share is None else float(final_share)
        if not 0 < self.final_share < 1:
            raise ValueError(f"final_share must lie in (0, 1), got {final_share!r}")
        self.block_size = (self.horizon if block_size is None
                           else _check_int("block_size", block_size, 1))
        if self.horizon % self.block_size:
            raise ValueError(f"block_size {block_size} must divide the horizon "
                             f"{self.horizon}")
        self.param = self._calibrate(1, 1.0 - self.final_share)
        self.final_param = self._calibrate(1, self.final_share)
        self._sum = np.zeros(self.dim)     # the running estimate S̃^t
        self._noise = np.zeros(self.dim)   # D: Σ entry noise of the current block (private)

    def _final_weight(self) -> float:
        """B·v_s / (B·v_s + v_F): the weight of the block node in a block's estimate."""
        spread = self.block_size * self.node_variance(self.param)
        return spread / (spread + self.node_variance(self.final_param))

    def _feed(self, z, sampler, t):
        noise = self._draw(sampler, self.param, 1)[0]
        self._sum += z + noise
        self._noise += noise
        if t % self.block_size == 0:
            final = self._draw(sampler, self.final_param, 1)[0]
            self._sum += (final - self._noise) * self._final_weight()
            self._noise[:] = 0
        return self._sum.copy()

    def _variances(self, ts):
        v_s = self.node_variance(self.param)
        block = self.block_size * v_s * (1.0 - self._final_weight())
        return ts // self.block_size * block + ts % self.block_size * v_s

    def _entry_groups(self):
        return [(1, self.param), (1, self.final_param)]

    def _release_rows(self, n):
        b = self.block_size
        rows, params, times = [np.eye(n)], [self.param] * n, list(range(1, n + 1))
        for end in range(b, n + 1, b):
            row = np.zeros((1, n))
            row[0, end - b:end] = 1
            rows.append(row)
            params.append(self.final_param)
            times.append(end)
        return np.vstack(rows), params, times

    def _state(self):
        return {"sum": self._sum, "noise": self._noise}

    def _restore(self, state):
        self._sum, self._noise = (state[k].reshape(self.dim) for k in ("sum", "noise"))


# ---------------------------------------------------------------------------- tree

class _Alg3Tree:
    """Algorithm 3 of Bun et al. 2024 (App. A) over a local stream 1..horizon: at time r
    with lowest set bit i, α_i ← Σ_{j<i} α_j + z^r, α_j ← 0 for j < i, α̃_i ← α_i + noise;
    S̃^r = Σ_{j: bit j of r} α̃_j.  The node α_i released at r covers (r − 2^i, r]."""

    def __init__(self, levels: int, dim: int):
        self.alpha = np.zeros((levels, dim))
        self.noisy = np.zeros((levels, dim))

    def feed(self, z, noise, r):
        i = _lowbit(r)
        self.alpha[i] = self.alpha[:i].sum(axis=0) + z
        self.alpha[:i] = 0
        self.noisy[:i] = 0
        self.noisy[i] = self.alpha[i] + noise
        bits = [j for j in range(self.alpha.shape[0]) if (r >> j) & 1]
        return self.noisy[bits].sum(axis=0)

    @staticmethod
    def rows(horizon: int, n: int, offset: int = 0, width: Optional[int] = None):
        """Rows (over ``width`` entries) of the nodes released at local times 1..n."""
        width = offset + n if width is None else width
        rows, times = [], []
        for r in range(1, min(n, horizon) + 1):
            i = _lowbit(r)
            row = np.zeros(width)
            row[offset + r - (1 << i): offset + r] = 1
            rows.append(row)
            times.append(offset + r)
        return rows, times


class TreeCounter(StreamCounter):
    """Binary tree counter: Bun et al. 2024 App. A Algorithm 3 (tree-based aggregation,
    Dwork et al. 2010 / CSS 2011 binary mechanism), bounded horizon T.

    At time t with lowest set bit i, the dyadic node (t − 2^i, t] is released with noise;
    S̃^t sums the popcount(t) nodes of t's binary expansion.
    Sensitivity: an entry lies in at most one released node per level, and entry 1 in one
    node at each of the exact ⌊log2 T⌋ + 1 levels (papers README point 2; the paper writes
    log T) → L1 = L2² = E·(⌊log2 T⌋ + 1); σ² = E(⌊log2 T⌋+1)/(2ρ), b = E(⌊log2 T⌋+1)/ε.
    Variance: Var(S̃^t − S^t) = popcount(t)·v.
    """

    kind = "tree"

    def __init__(self, horizon, **kw):
        super().__init__(horizon, **kw)
        self.levels = tree_levels(self.horizon)
        self.param = self._calibrate(self.levels)
        self._tree = _Alg3Tree(self.levels, self.dim)

    def _feed(self, z, sampler, t):
        return self._tree.feed(z, self._draw(sampler, self.param, 1)[0], t)

    def _variances(self, ts):
        return _popcount(ts) * self.node_variance(self.param)

    def _entry_groups(self):
        return [(self.levels, self.param)]

    def _release_rows(self, n):
        rows, times = _Alg3Tree.rows(self.horizon, n)
        return np.array(rows), [self.param] * len(rows), times

    def _state(self):
        return {"alpha": self._tree.alpha, "noisy": self._tree.noisy}

    def _restore(self, state):
        self._tree.alpha = state["alpha"].reshape(self.levels, self.dim)
        self._tree.noisy = state["noisy"].reshape(self.levels, self.dim)


def honaker_weight(level: int) -> float:
    """w_j = 2^j / (2^{j+1} − 1): variance (in node variances) of the best linear unbiased
    estimate of a height-j dyadic node's sum from its whole subtree."""
    return 2.0 ** level / (2.0 ** (level + 1) - 1.0)


class HonakerTreeCounter(StreamCounter):
    """Binary tree with *every* dyadic node released and Honaker's (2015, "Efficient use
    of differentially private binary trees") optimal estimator: S̃^t is the best linear
    unbiased estimate (BLUE, generalised least squares) of S^t from all nodes released by
    time t.  Bounded horizon T.

    Release: at time t the dyadic nodes (t − 2^j, t] for j = 0..lowbit(t) (all dyadic
    intervals inside [1, T], right children included), each with the tree's noise.
    Sensitivity: still one node per level per entry, ⌊log2 T⌋ + 1 levels (entry 1 touches
    one at each level) → the same σ² = E(⌊log2 T⌋+1)/(2ρ) or b = E(⌊log2 T⌋+1)/ε as
    ``tree``, so privacy is identical and the extra right-child nodes are free.
    Estimator: the nodes released by t lie in the disjoint subtrees rooted at the
    popcount(t) nodes of t's binary expansion, so the BLUE of S^t is the sum of the BLUEs
    of those roots; each comes from Honaker/Hay et al.'s bottom-up pass
    ẑ_j = w_j·(y_j + (ẑ_left + ẑ_right)/(2 w_{j−1})), w_0 = 1, with variance w_j·v,
    w_j = 2^j/(2^{j+1} − 1) (inverse-variance combination of the node with its children).
    Variance: Var(S̃^t − S^t) = v·Σ_{j: bit j of t} 2^j/(2^{j+1} − 1) ≤ popcount(t)·v,
    strictly smaller unless t = 1 (max over t: → about half of the tree's for large T).
    Only the O(log T) left-child estimates are kept.
    """

    kind = "honaker"
    integer_valued = False       # weighted averages

    def __init__(self, horizon, **kw):
        super().__init__(horizon, **kw)
        self.levels = tree_levels(self.horizon)
        self.param = self._calibrate(self.levels)
        self.weights = np.array([honaker_weight(j) for j in range(self.levels)])
        self._left_true = np.zeros((self.levels, self.dim))   # private
        self._left_est = np.zeros((self.levels, self.dim))

    def _feed(self, z, sampler, t):
        i = _lowbit(t)
        noise = self._draw(sampler, self.param, i + 1)
        true, est = z, z + noise[0]                 # leaf (t−1, t]: ẑ = y, weight 1
        for j in range(1, i + 1):                   # node (t − 2^j, t]: children are the
            true = self._left_true[j - 1] + true    # stored left child and the chain
            y = true + noise[j]
            w, w_child = self.weights[j], self.weights[j - 1]
            est = w * (y + (self._left_est[j - 1] + est) / (2.0 * w_child))
        self._left_true[i] = true                   # t/2^i is odd: a left child
        self._left_est[i] = est
        bits = [j for j in range(self.levels) if (t >> j) & 1]
        return self._left_est[bits].sum(axis=0)

    def _variances(self, ts):
        total = np.zeros(ts.shape)
        for j in range(self.levels):
            total += ((ts >> j) & 1) * self.weights[j]
        return total * self.node_variance(self.param)

    def _entry_groups(self):
        return [(self.levels, self.param)]

    def _release_rows(self, n):
        rows, times = [], []
        for t in range(1, n + 1):
            for j in range(_lowbit(t) + 1):
                row = np.zeros(n)
                row[t - (1 << j): t] = 1
                rows.append(row)
                times.append(t)
        return np.array(rows), [self.param] * len(rows), times

    def _state(self):
        return {"left_true": self._left_true, "left_est": self._left_est}

    def _restore(self, state):
        self._left_true = state["left_true"].reshape(self.levels, self.dim)
        self._left_est = state["left_est"].reshape(self.levels, self.dim)


# ---------------------------------------------------------------------------- k-ary tree

def kary_levels(horizon: int, arity: int) -> int:
    """Levels i ≥ 0 of the k-ary tree with a node of size k^i ≤ T: ⌊log_k T⌋ + 1
    (exact integer arithmetic; the binary case is :func:`tree_levels`)."""
    levels, size = 0, 1
    while size <= horizon:
        levels += 1
        size *= arity
    return levels


def kary_digit_sums(ts: np.ndarray, arity: int) -> np.ndarray:
    """Σ of the base-k digits of each t: the number of nodes S̃^t sums."""
    ts = np.asarray(ts, dtype=np.int64).copy()
    total = np.zeros(ts.shape, dtype=np.int64)
    while ts.any():
        total += ts % arity
        ts //= arity
    return total


@lru_cache(maxsize=4096)
def _kary_digit_stats(horizon: int, arity: int) -> Tuple[int, float]:
    """(max, mean) over t = 1..T of the base-k digit sums."""
    digits = kary_digit_sums(np.arange(1, horizon + 1), arity)
    return int(digits.max()), float(digits.mean())


def kary_arity_candidates(horizon: int) -> List[int]:
    """Arities worth trying: 2 ≤ k ≤ 2√T + 2 (beyond √T the tree has two levels and the
    block counter's optimum is near √T) and k = T + 1 (one level: the simple counter)."""
    return sorted(set(range(2, min(horizon, 2 * math.isqrt(horizon) + 2) + 1)) | {horizon + 1})


class KaryTreeCounter(StreamCounter):
    """k-ary tree counter (Chan, Shi, Song 2011's binary mechanism in base k; the k-ary
    tree mechanism of Andersson, Pagh, Steiner, Torkamani, "Count on your elders:
    Laplace vs Gaussian noise", FORC 2025, §3, *without* their negative digits), bounded
    horizon T, option ``arity`` = k ≥ 2 (default: among :func:`kary_arity_candidates`,
    the k of least maximum variance over t = 1..T with this counter's exact node noise
    — ties: least mean variance).  Made for pure ε-DP (discrete Laplace), where
    its few levels pay twice: variance ∝ (levels)² per node.

    Nodes: the aligned blocks (q·k^i, (q+1)·k^i] for levels i = 0..h−1, h = ⌊log_k T⌋ + 1.
    At time t, for every level i with k^i | t, the node ending at t is released with noise
    unless it is the last (k-th) child of its parent — then the parent, which ends at t
    too, covers it, and the node is never used.  S̃^t sums, for each level i, the
    released children of the current level-(i+1) parent: Σ_i digit_i(t) nodes (base-k
    digits of t).  Memory and time per step O(h·dim).
    Sensitivity: an entry lies in one node per level and entry 1 in a released node at
    every one of the h levels (its nodes are first children) → L1 = L2² = E·h;
    σ² = E·h/(2ρ), b = E·h/ε.
    Variance: Var(S̃^t − S^t) = (Σ_i digit_i(t))·v.  Under ε, with the default arity, the
    maximum std is below the binary tree's and ``honaker``'s for T = 10² … 2^16 (the
    comparison: bench/results/counters_error.md).  For short horizons the best k exceeds
    √T, the tree has two levels and the counter is the block counter (k = 32 at T = 1024);
    for longer ones three or more levels have the lower maximum variance (k = 22 at
    T = 10⁴).  Under ρ it beats only the tree.
    """

    kind = "kary"
    option_names = ("arity",)

    def __init__(self, horizon, arity: Optional[int] = None, **kw):
        options = {} if arity is None else {"arity": arity}
        super().__init__(horizon, **kw, **options)
        self.arity = (self._best_arity() if arity is None
                      else _check_int("arity", arity, 2))
        self.levels = kary_levels(self.horizon, self.arity)
        self.param = self._calibrate(self.levels)
        self._true = np.zeros((self.levels, self.dim))    # current node per level (private)
        self._noisy = np.zeros((self.levels, self.dim))   # Σ released children per level

    def _best_arity(self) -> int:
        def key(k):
            v = self.node_variance(self._calibrate(kary_levels(self.horizon, k)))
            most, mean = _kary_digit_stats(self.horizon, k)
            return (v * most, v * mean, k)
        return min(kary_arity_candidates(self.horizon), key=key)

    def _ending(self, t: int) -> List[Tuple[int, bool]]:
        """(level, released) for every node ending at t: released unless a last child."""
        out, size = [], 1
        for level in range(self.levels):
            if t % size:
                break
            out.append((level, (t // size) % self.arity != 0))
            size *= self.arity
        return out

    def _feed(self, z, sampler, t):
        self._true += z
        ending = self._ending(t)
        noise = self._draw(sampler, self.param, sum(released for _, released in ending))
        drawn = 0
        for level, released in ending:
            if released:
                self._noisy[level] += self._true[level] + noise[drawn]
                drawn += 1
            else:
                self._noisy[level] = 0.0
            self._true[level] = 0.0
        return self._noisy.sum(axis=0)

    def _variances(self, ts):
        return kary_digit_sums(ts, self.arity) * self.node_variance(self.param)

    def _entry_groups(self):
        return [(self.levels, self.param)]

    def _release_rows(self, n):
        rows, times = [], []
        for t in range(1, n + 1):
            for level, released in self._ending(t):
                if released:
                    row = np.zeros(n)
                    row[t - self.arity ** level: t] = 1
                    rows.append(row)
                    times.append(t)
        return np.array(rows), [self.param] * len(rows), times

    def _state(self):
        return {"true": self._true, "noisy": self._noisy}

    def _restore(self, state):
        self._true = state["true"].reshape(self.levels, self.dim)
        self._noisy = state["noisy"].reshape(self.levels, self.dim)


# ---------------------------------------------------------------------------- factorisations

class _ToeplitzFactorisation(StreamCounter):
    """Factorisation mechanism A = B·C for the T × T all-ones lower-triangular A, with C
    lower-triangular Toeplitz (first column c, c_0 = 1, c_k ≥ 0) and B = A·C⁻¹ (also
    lower-triangular Toeplitz, first column b).  ``rho`` only.

    Release: y = C z + g, g ~ N(0, σ²) i.i.d. per step (continuous Gaussian mechanism,
    ``Sampler.gaussian``); output S̃ = B y = A z + B g (post-processing).
    Sensitivity: an entry s moves column s of C, whose squared norm Σ_{k<T−s+1} c_k² is
    largest for s = 1: Δ² = E·Σ_{k<T} c_k² (E = ``entries_changed``; for E = 2 the two
    changes have opposite signs and C ≥ 0 entrywise, so ‖C(e_s − e_r)‖² ≤ 2·max column²,
    module docstring) → σ² = Δ²/(2ρ), and the release is Δ²/(2σ²) = ρ-zCDP.
    Variance: Var(S̃^t − S^t) = σ²·Σ_{k<t} b_k² (largest at t = T).
    Subclasses set c and b through :meth:`_factor`.
    """

    units = ("rho",)
    integer_valued = False

    def _noise_type(self):
        return GAUSSIAN

    def _factor(self, c: np.ndarray, b: np.ndarray) -> None:
        if c[0] != 1.0 or (c < 0).any():
            raise ValueError("the factor C must have c_0 = 1 and non-negative entries")
        self.coefficients = c
        self._b_sq_cumsum = np.cumsum(b ** 2)
        self.column_norm2 = float(np.sum(c ** 2))
        self.param = accounting.gaussian_sigma2(
            math.sqrt(self.entries_changed * self.column_norm2), self.budget)

    def _variances(self, ts):
        return self._b_sq_cumsum[ts - 1] * self.param

    def entry_cost(self) -> float:
        """One entry moves one column of C: Δ² = Σ_{k<T} c_k² (first column) → Δ²/(2σ²)."""
        return accounting.gaussian_rho(math.sqrt(self.column_norm2), self.param)

    def _release_rows(self, n):
        c = self.coefficients
        rows = np.zeros((n, n))
        for t in range(1, n + 1):
            rows[t - 1, :t] = c[:t][::-1]
        return rows, [self.param] * n, np.arange(1, n + 1)


class SqrtFactorisationCounter(_ToeplitzFactorisation):
    """Square-root factorisation of the prefix-sum matrix (Fichtenberger, Henzinger,
    Upadhyay 2023, "Constant matters: fine-grained error bound on differentially private
    continual observation"; Henzinger, Upadhyay, Upadhyay 2023), bounded horizon T,
    ``rho`` only: the factorisation mechanism (:class:`_ToeplitzFactorisation`) with
    B = C, C[i, j] = c_{i−j}, c_k = binom(2k, k)/4^k (C·C = A).
    Sensitivity Δ² = E·Σ_{k<T} c_k² ≈ E·(1 + ln(T)/π); variance σ²·Σ_{k<t} c_k²
    (max at t = T: (E/2ρ)·(Σ_{k<T} c_k²)², O(log² T) with constant 1/π², against the
    tree's (⌊log2 T⌋+1)·popcount(t)).
    Compared with ``tree`` at equal ρ its maximum and mean variance are far lower (a third
    of the max std at T = 1024); it is also lower at every single t for T ≤ 1353 (beyond,
    at t = 2^⌊log2 T⌋, where the tree sums a single node, the tree is lower), as long as
    the tree's node σ² is not tiny (the discrete Gaussian's variance then drops below σ²).
    Memory and time per step are O(t·dim): it keeps the input and the released stream
    (``blt`` reaches the same error in O(d·dim)).
    """

    kind = "sqrt-factorisation"

    def __init__(self, horizon, **kw):
        super().__init__(horizon, **kw)
        c = sqrt_factor_coefficients(self.horizon)
        self._factor(c, c)
        self._z = np.zeros((0, self.dim))    # the input stream (private)
        self._y = np.zeros((0, self.dim))    # the released stream C z + g

    def _reserve(self, rows: int) -> None:
        """Grow the history buffers (doubling, capped at the horizon) to ``rows`` rows."""
        if rows > self._z.shape[0]:
            size = min(self.horizon, max(rows, 2 * self._z.shape[0], 16))
            for name in ("_z", "_y"):
                grown = np.zeros((size, self.dim))
                old = getattr(self, name)
                grown[: old.shape[0]] = old
                setattr(self, name, grown)

    def _feed(self, z, sampler, t):
        c = self.coefficients[:t][::-1]      # c_{t−1}, …, c_0 against entries 1..t
        self._reserve(t)
        self._z[t - 1] = z
        self._y[t - 1] = c @ self._z[:t] + self._draw(sampler, self.param, 1)[0]
        return c @ self._y[:t]

    def _state(self):
        return {"z": self._z[: self._time], "y": self._y[: self._time]}

    def _restore(self, state):
        z = state["z"].reshape(-1, self.dim)
        y = state["y"].reshape(-1, self.dim)
        if z.shape[0] != self._time or y.shape[0] != self._time:
            raise ValueError("sqrt-factorisation state does not match its time")
        self._reserve(self._time)
        self._z[: self._time] = z
        self._y[: self._time] = y


# BLT parameters (θ_1..θ_4, ω_1..ω_4) for d = 4 buffers, optimised by
# ``optimise_blt_parameters(2**m, 4)`` for m = 1..16 (warm-started from m − 1); a horizon T
# uses the entry of m = ⌈log2 T⌉.  Their max and mean std track the square-root
# factorisation's at every T ≤ 2^16 (the comparison: bench/results/counters_error.md; the
# tests re-check it at 2^10 … 2^16).
_BLT_TABLE_D4 = {
    1: ((0.00217785762, 0.204626143372, 0.367952792497, 0.498796780771),
         (0.098508770894, 0.098501228148, 0.098501026572, 0.098504149473)),
    2: ((0.387003964595, 0.620175318357, 0.770993203928, 0.851888114803),
         (0.119676303527, 0.103415241127, 0.109278121425, 0.126916740876)),
    3: ((0.270581186023, 0.756459315357, 0.915046528332, 0.87971505205),
         (0.091838814281, 0.21644576241, 0.088947304003, 0.090581861216)),
    4: ((0.355982544788, 0.785303744475, 0.953490770802, 0.921624829638),
         (0.12704512127, 0.154233995303, 0.084588042124, 0.132885802255)),
    5: ((0.276800298108, 0.694790037439, 0.973390458639, 0.92323917764),
         (0.087734766257, 0.160312972358, 0.112063169598, 0.142151968682)),
    6: ((0.338226197229, 0.749855159206, 0.98249951399, 0.925306982552),
         (0.114000844479, 0.155981839266, 0.130008350402, 0.102674088989)),
    7: ((0.345743140039, 0.764700414714, 0.989880427789, 0.935709189497),
         (0.119527778631, 0.159967851681, 0.111177310846, 0.111592557143)),
    8: ((0.412122513808, 0.827407335478, 0.994750215052, 0.961210974042),
         (0.152685789812, 0.167148573277, 0.082589464339, 0.098967263984)),
    9: ((0.477521258156, 0.875391647105, 0.997274749526, 0.976827401899),
         (0.186342899565, 0.167477302759, 0.06109355759, 0.08525928524)),
    10: ((0.539251232398, 0.910647248828, 0.998581544746, 0.986175211208),
         (0.218252878808, 0.162649848826, 0.045152019637, 0.072283014666)),
    11: ((0.595942275764, 0.936036490114, 0.999258934719, 0.991726369114),
         (0.246932344905, 0.154460004294, 0.033400173832, 0.060730739617)),
    12: ((0.647037461608, 0.95415452996, 0.999611085229, 0.995020626747),
         (0.271551506252, 0.144365049721, 0.024755694127, 0.050761994787)),
    13: ((0.69253631034, 0.967042601557, 0.999794888329, 0.996982400102),
         (0.291765574013, 0.133387164044, 0.018394166796, 0.04230622183)),
    14: ((0.732803070791, 0.976243756195, 0.999891362628, 0.998160105817),
         (0.30763053066, 0.12216853839, 0.013696817175, 0.035176435178)),
    15: ((0.768125015661, 0.982815561418, 0.999942244173, 0.998871234827),
         (0.319312079417, 0.111198690441, 0.010218553754, 0.029208519474)),
    16: ((0.799116042076, 0.987539142105, 0.999969212933, 0.999304282836),
         (0.327170186294, 0.100671866462, 0.007632073193, 0.024214883022)),
}


def blt_coefficients(theta: np.ndarray, omega: np.ndarray, horizon: int) -> np.ndarray:
    """c_0..c_{T−1} of the BLT matrix C: c_0 = 1, c_k = Σ_j ω_j θ_j^{k−1} (k ≥ 1)."""
    k = np.arange(max(horizon - 1, 0))
    c = np.empty(horizon)
    c[0] = 1.0
    c[1:] = (omega[:, None] * theta[:, None] ** k).sum(axis=0)
    return c


def blt_inverse_coefficients(theta: np.ndarray, omega: np.ndarray,
                             horizon: int) -> np.ndarray:
    """First column of C⁻¹ (the impulse response of the noise recurrence): the recurrence
    x_t = g_t − ωᵀu_t, u_{t+1} = Θu_t + 1·x_t is the state-space system
    u_{t+1} = (Θ − 1ωᵀ)u_t + 1·g_t, x_t = −ωᵀu_t + g_t, so (C⁻¹)_0 = 1 and
    (C⁻¹)_k = −ωᵀ(Θ − 1ωᵀ)^{k−1}·1, evaluated by diagonalising the d × d matrix
    (C⁻¹ is again BLT, with the eigenvalues as its decays; Dvijotham et al. 2024 Lemma 5.2)."""
    d = theta.size
    ones = np.ones(d)
    eigvals, vectors = np.linalg.eig(np.diag(theta) - np.outer(ones, omega))
    weights = -(omega @ vectors) * np.linalg.solve(vectors, ones)
    k = np.arange(max(horizon - 1, 0))
    x = np.empty(horizon)
    x[0] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        x[1:] = np.real((weights[:, None] * eigvals[:, None] ** k).sum(axis=0))
    return x


def _blt_loss(params: np.ndarray, buffers: int, horizon: int) -> float:
    """log max std + log mean std of the BLT counter at unit ρ, E = 1 (the objective)."""
    theta, omega = _blt_unpack(params, buffers)
    if not (np.isfinite(theta).all() and np.isfinite(omega).all()):
        return 1e3
    c = blt_coefficients(theta, omega, horizon)
    b = np.cumsum(blt_inverse_coefficients(theta, omega, horizon))
    var = np.cumsum(b ** 2) * np.sum(c ** 2)
    if not np.isfinite(var).all():
        return 1e3
    return float(0.5 * math.log(var[-1]) + math.log(np.mean(np.sqrt(var))))


def _blt_unpack(params: np.ndarray, buffers: int):
    """θ = logistic(a) ∈ (0, 1), ω = exp(w) > 0: C ≥ 0 entrywise, decays below 1."""
    params = np.clip(params, -40.0, 40.0)
    return 1.0 / (1.0 + np.exp(-params[:buffers])), np.exp(params[buffers:])


@lru_cache(maxsize=64)
def optimise_blt_parameters(horizon: int, buffers: int) -> Tuple[Tuple[float, ...],
                                                                Tuple[float, ...]]:
    """(θ, ω) minimising log(max std) + log(mean std) of the prefix-sum errors at horizon T
    (the variance σ²·Σ_{k<t} b_k² with σ² ∝ Σ_{k<T} c_k², see :class:`BLTCounter`), by
    L-BFGS-B then Nelder-Mead (scipy), warm-started from :func:`blt_parameters` at ⌈T/2⌉
    (the shipped table where it has the entry, else recursively this function) with the
    time constants 1/(1 − θ) doubled; T ≤ 2 starts from log-spaced decays.  Seconds up to
    T = 2^12, about a minute at 2^16; cached."""
    from scipy.optimize import minimize

    if horizon <= 2:
        theta0 = 1.0 - np.logspace(-0.5, -1.5, buffers)
        omega0 = np.full(buffers, 0.5 / buffers)
    else:
        theta, omega = blt_parameters((horizon + 1) // 2, buffers)
        theta0 = np.clip(1.0 - (1.0 - np.asarray(theta)) / 2.0, 1e-9, 1.0 - 1e-15)
        omega0 = np.asarray(omega)
    x = np.concatenate([np.log(theta0 / (1.0 - theta0)), np.log(omega0)])
    best = None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for method in ("L-BFGS-B", "Nelder-Mead", "L-BFGS-B"):
            result = minimize(_blt_loss, x if best is None else best.x,
                              args=(buffers, horizon), method=method)
            if best is None or result.fun < best.fun:
                best = result
    theta, omega = _blt_unpack(best.x, buffers)
    return tuple(float(v) for v in theta), tuple(float(v) for v in omega)


def blt_parameters(horizon: int, buffers: int = 4) -> Tuple[np.ndarray, np.ndarray]:
    """(θ, ω) for a BLT counter of horizon T: the shipped d = 4 table at
    m = ⌈log2 T⌉ ≤ 16, else :func:`optimise_blt_parameters` at 2^m (cached)."""
    m = max(1, (int(horizon) - 1).bit_length())
    if buffers == 4 and m in _BLT_TABLE_D4:
        theta, omega = _BLT_TABLE_D4[m]
    else:
        theta, omega = optimise_blt_parameters(1 << m, buffers)
    return np.array(theta, dtype=np.float64), np.array(omega, dtype=np.float64)


class BLTCounter(_ToeplitzFactorisation):
    """Buffered linear Toeplitz (BLT) factorisation: Dvijotham, McMahan, Pillutla,
    Steinke, Thakurta 2024, "Efficient and near-optimal noise generation for streaming
    differential privacy"; McKenna 2024 ("Scaling up the banded matrix factorization
    mechanism").  Bounded horizon T, ``rho`` only, option ``buffers`` = d ∈ 1..8
    (default 4).

    The factorisation mechanism (:class:`_ToeplitzFactorisation`) with the BLT matrix
    C[i, j] = c_{i−j}, c_0 = 1, c_k = Σ_{j=1}^{d} ω_j θ_j^{k−1} (decays θ_j ∈ (0, 1),
    weights ω_j > 0, so C ≥ 0).  The correlated noise B g = A C⁻¹ g is generated online:
    x = C⁻¹ g by forward substitution through d buffers u_j = Σ_{s<t} θ_j^{t−1−s} x_s,

        x_t = g_t − Σ_j ω_j u_j,    u_j ← θ_j u_j + x_t,    S̃^t = S^t + Σ_{s≤t} x_s

    (= B y for y = C z + g: A C⁻¹(C z + g) = A z + A C⁻¹ g), so time and memory per step
    are O(d·dim), against O(t·dim) for ``sqrt-factorisation``.
    Sensitivity: Δ² = E·Σ_{k<T} c_k² (first column of C, computed from θ, ω for this T)
    → σ² = Δ²/(2ρ); variance σ²·Σ_{k<t} b_k², b = cumulative sums of the first column of
    C⁻¹ (:func:`blt_inverse_coefficients`).
    Parameters: :func:`blt_parameters` (θ, ω minimising log max std + log mean std at
    2^⌈log2 T⌉, optimised numerically; shipped for d = 4, T ≤ 2^16).  Max and mean std
    track ``sqrt-factorisation``'s at every T ≤ 2^16 (bench/results/counters_error.md).
    The state keeps θ and ω, so a restored counter uses the same factorisation.
    """

    kind = "blt"
    option_names = ("buffers",)

    def __init__(self, horizon, buffers: Optional[int] = None, **kw):
        options = {} if buffers is None else {"buffers": buffers}
        super().__init__(horizon, **kw, **options)
        self.buffers = 4 if buffers is None else _check_int("buffers", buffers, 1)
        if self.buffers > 8:
            raise ValueError(f"buffers must be at most 8, got {buffers!r}")
        self._set_parameters(*blt_parameters(self.horizon, self.buffers))
        self._u = np.zeros((self.buffers, self.dim))   # buffers u_j (noise only)
        self._noise = np.zeros(self.dim)               # Σ_{s≤t} x_s
        self._sum = np.zeros(self.dim)                 # S^t (private)

    def _set_parameters(self, theta: np.ndarray, omega: np.ndarray) -> None:
        if theta.shape != (self.buffers,) or omega.shape != (self.buffers,) \
                or not ((theta > 0) & (theta < 1)).all() or not (omega > 0).all():
            raise ValueError("BLT parameters need d decays in (0, 1) and d positive weights")
        self.theta, self.omega = theta, omega
        self._factor(blt_coefficients(theta, omega, self.horizon),
                     np.cumsum(blt_inverse_coefficients(theta, omega, self.horizon)))

    def _feed(self, z, sampler, t):
        g = self._draw(sampler, self.param, 1)[0]
        x = g - self.omega @ self._u
        self._u *= self.theta[:, None]
        self._u += x
        self._noise += x
        self._sum += z
        return self._sum + self._noise

    def _state(self):
        return {"theta": self.theta, "omega": self.omega, "u": self._u,
                "noise": self._noise, "sum": self._sum}

    def _restore(self, state):
        self._set_parameters(state["theta"].reshape(-1), state["omega"].reshape(-1))
        self._u = state["u"].reshape(self.buffers, self.dim)
        self._noise = state["noise"].reshape(self.dim)
        self._sum = state["sum"].reshape(self.dim)


# ---------------------------------------------------------------------------- hybrid

class HybridCounter(StreamCounter):
    """Chan, Shi, Song 2011 Hybrid mechanism (unbounded; Kumar et al. 2024's "Binary Tree"
    counter): a logarithmic mechanism over epochs plus a binary tree inside each epoch.

    Logarithmic part: at t = 2^m the interval sum over (2^{m−1}, 2^m] (for m = 0: {1}) is
    released with noise and added to β_m, so β_m ≈ S^{2^m}.  Epoch m ≥ 1 is the open
    interval (2^m, 2^{m+1}); its entries feed a fresh Algorithm 3 tree (``tree``) over
    local times r = t − 2^m = 1..2^m − 1, which has ⌊log2(2^m − 1)⌋ + 1 = m levels.
    Output: S̃^{2^m} = β_m; S̃^{2^m + r} = β_m + tree_m(r).
    Budget split (option ``log_share`` = a, default ½ as in CSS): per entry a·ρ to the
    logarithmic part and (1 − a)·ρ to its epoch's tree.  An entry touches one
    logarithmic node and m tree nodes, so σ²_log = E/(2aρ), σ²_m = E·m/(2(1−a)ρ)
    (b_log = E/(aε), b_m = E·m/((1−a)ε)); every entry's loss is at most ρ/E and epochs are
    disjoint in time, so the whole unbounded counter is ρ-zCDP (ε-DP) — parallel
    composition over epochs, no series needed (module docstring).
    Variance at t = 2^m + r (0 ≤ r < 2^m): (m + 1)·v_log + popcount(r)·v_m.
    """

    kind = "hybrid"
    unbounded = True
    option_names = ("log_share",)

    def __init__(self, horizon, log_share: Optional[float] = None, **kw):
        options = {} if log_share is None else {"log_share": log_share}
        super().__init__(horizon, **kw, **options)
        self.log_share = 0.5 if log_share is None else float(log_share)
        if not 0 < self.log_share < 1:
            raise ValueError(f"log_share must lie in (0, 1), got {log_share!r}")
        self.log_param = self._calibrate(1, self.log_share)
        self._beta = np.zeros(self.dim)        # Σ noisy logarithmic nodes
        self._log_true = np.zeros(self.dim)    # true sum since the last power of 2
        self._tree = _Alg3Tree(0, self.dim)

    def tree_param(self, epoch: int) -> float:
        """Noise parameter of epoch m's tree (m levels)."""
        return self._calibrate(epoch, 1.0 - self.log_share)

    @staticmethod
    def epoch_of(t: int) -> int:
        return int(t).bit_length() - 1

    def _feed(self, z, sampler, t):
        self._log_true += z
        m = self.epoch_of(t)
        if t == 1 << m:                        # power of two: logarithmic node, new epoch
            self._beta += self._log_true + self._draw(sampler, self.log_param, 1)[0]
            self._log_true[:] = 0
            self._tree = _Alg3Tree(m, self.dim)
            return self._beta.copy()
        noise = self._draw(sampler, self.tree_param(m), 1)[0]
        return self._beta + self._tree.feed(z, noise, t - (1 << m))

    def _variances(self, ts):
        m = np.array([int(t).bit_length() - 1 for t in ts.ravel()],
                     dtype=np.int64).reshape(ts.shape)
        r = ts - (np.int64(1) << m)
        v_tree = np.array([self.node_variance(self.tree_param(int(e))) if e > 0 else 0.0
                           for e in range(int(m.max()) + 1)])
        return (m + 1) * self.node_variance(self.log_param) + _popcount(r) * v_tree[m]

    def node_params(self):
        last = self.epoch_of(self.horizon) if self.horizon else 60
        return [self.log_param] + [self.tree_param(m) for m in range(1, last + 1)]

    def _entry_groups(self):
        # an entry of epoch m touches 1 log node and m tree nodes; the loss is the same
        # in every epoch (checked over the first 60 epochs, covering any int64 time)
        costs = [self._node_cost(self.log_param) + m * self._node_cost(self.tree_param(m))
                 for m in range(1, 61)]
        worst = int(np.argmax(costs)) + 1
        return [(1, self.log_param), (worst, self.tree_param(worst))]

    def _release_rows(self, n):
        rows, params, times = [], [], []
        m = 0
        while (1 << m) <= n:
            row = np.zeros(n)
            lo = 0 if m == 0 else (1 << (m - 1))
            row[lo: 1 << m] = 1
            rows.append(row), params.append(self.log_param), times.append(1 << m)
            if m >= 1:
                start = 1 << m
                local = min(start - 1, n - start)
                if local > 0:
                    tr, tt = _Alg3Tree.rows(start - 1, local, offset=start, width=n)
                    rows += tr
                    params += [self.tree_param(m)] * len(tr)
                    times += tt
            m += 1
        return np.array(rows), params, times

    def _state(self):
        return {"beta": self._beta, "log_true": self._log_true,
                "alpha": self._tree.alpha, "noisy": self._tree.noisy}

    def _restore(self, state):
        self._beta = state["beta"].reshape(self.dim)
        self._log_true = state["log_true"].reshape(self.dim)
        levels = self.epoch_of(self._time) if self._time > 0 else 0
        self._tree = _Alg3Tree(levels, self.dim)
        self._tree.alpha = state["alpha"].reshape(levels, self.dim)
        self._tree.noisy = state["noisy"].reshape(levels, self.dim)


# ---------------------------------------------------------------------------- unbounded block

class UnboundedBlockCounter(StreamCounter):
    """Kumar, Strohmer, Vershynin 2024 §8, Algorithm 4 (unbounded block counter).

    Time is cut into epochs of B² entries for B = 2, 3, 4, … (4, 9, 16, …); inside the
    epoch with block size B, at every block end (δ = kB, δ = t − t_partition) the block
    sum is added with noise to α_lastBlock and S̃^t = α_lastBlock; at any other step the
    entry is added with noise to α_synthInBlock and S̃^t = α_lastBlock + α_synthInBlock.
    Sensitivity: an entry touches its own node (unless it ends a block) and its block →
    k = 2 per entry in every epoch: σ² = 2E/(2ρ) = E/ρ, b = 2E/ε (the paper's Lap(2/ε)
    for E = 1).  Epochs are disjoint in time, so the budget is not split across them
    (the paper's Theorem 8.1; parallel composition, see the module docstring).
    Variance: Var(S̃^t − S^t) = (complete blocks by t + entries of the current block)·v.
    """

    kind = "unbounded-block"
    unbounded = True

    def __init__(self, horizon, **kw):
        super().__init__(horizon, **kw)
        self.param = self._calibrate(2)
        self._last_block = np.zeros(self.dim)   # α_lastBlock
        self._true = np.zeros(self.dim)         # α_trueInBlock (private)
        self._synth = np.zeros(self.dim)        # α_synthInBlock

    @staticmethod
    def position(t: int) -> Tuple[int, int, int]:
        """(B, δ, blocks completed in earlier epochs) for time t ≥ 1."""
        block, start, earlier = 2, 0, 0
        while t > start + block * block:
            start += block * block
            earlier += block
            block += 1
        return block, t - start, earlier

    def _feed(self, z, sampler, t):
        block, delta, _ = self.position(t)
        self._true += z
        noise = self._draw(sampler, self.param, 1)[0]
        if delta % block == 0:
            self._last_block += self._true + noise
            self._true[:] = 0
            self._synth[:] = 0
            return self._last_block.copy()
        self._synth += z + noise
        return self._last_block + self._synth

    def _variances(self, ts):
        top = int(ts.max())
        sizes = np.arange(2, math.isqrt(top) + 3, dtype=np.int64)   # B = 2, 3, …
        ends = np.cumsum(sizes ** 2)                                 # last t of each epoch
        epoch = np.searchsorted(ends, ts)                            # first end >= t
        block = sizes[epoch]
        delta = ts - (ends[epoch] - block ** 2)
        earlier = np.concatenate([[0], np.cumsum(sizes)])[epoch]     # blocks before epoch
        counts = earlier + delta // block + delta % block
        return counts * self.node_variance(self.param)

    def _entry_groups(self):
        return [(2, self.param)]

    def _release_rows(self, n):
        rows = []
        for t in range(1, n + 1):
            block, delta, _ = self.position(t)
            row = np.zeros(n)
            if delta % block == 0:
                row[t - block: t] = 1
            else:
                row[t - 1] = 1
            rows.append(row)
        return np.array(rows), [self.param] * n, np.arange(1, n + 1)

    def _state(self):
        return {"last_block": self._last_block, "true": self._true, "synth": self._synth}

    def _restore(self, state):
        self._last_block, self._true, self._synth = (
            state[k].reshape(self.dim) for k in ("last_block", "true", "synth"))


# ---------------------------------------------------------------------------- registry

_KINDS = {cls.kind: cls for cls in (SimpleCounter, BlockCounter, TreeCounter,
                                    HonakerTreeCounter, KaryTreeCounter,
                                    SqrtFactorisationCounter, BLTCounter, HybridCounter,
                                    UnboundedBlockCounter, AnchoredCounter)}
UNBOUNDED_KINDS = frozenset(k for k, cls in _KINDS.items() if cls.unbounded)
SHARE_KINDS = frozenset(k for k, cls in _KINDS.items() if cls.entry_shares)  # feed(share=m)
INTEGER_KINDS = frozenset(k for k, cls in _KINDS.items() if cls.integer_valued)


def counter_kinds() -> List[str]:
    """All counter kinds, in the order of the module docstring's table."""
    return list(_KINDS)


def counter_units(kind: str) -> Tuple[str, ...]:
    """The budgets a counter kind accepts: ``("rho", "epsilon")`` or ``("rho",)`` for the
    continuous-Gaussian factorisations (``sqrt-factorisation``, ``blt``)."""
    if kind not in _KINDS:
        raise ValueError(f"unknown counter kind {kind!r}; choose from {counter_kinds()}")
    return _KINDS[kind].units


def make_counter(kind: str, horizon: Optional[int], *, rho: Optional[float] = None,
                 epsilon: Optional[float] = None, dim: int = 1, entries_changed: int = 1,
                 **options) -> StreamCounter:
    """A fresh counter of ``kind`` for ``horizon`` entries, calibrated to exactly ``rho``
    (zCDP, discrete Gaussian; continuous Gaussian for ``sqrt-factorisation``) or
    ``epsilon`` (pure DP, discrete Laplace) under neighbouring streams in which
    ``entries_changed`` entries change by at most 1.  ``horizon`` None only for unbounded
    kinds (``simple``, ``hybrid``, ``unbounded-block``).  Options: ``block_size``
    (block, anchored), ``arity`` (kary), ``buffers`` (blt), ``log_share`` (hybrid),
    ``final_share`` (anchored)."""
    if kind not in _KINDS:
        raise ValueError(f"unknown counter kind {kind!r}; choose from {counter_kinds()}")
    return _KINDS[kind](horizon, rho=rho, epsilon=epsilon, dim=dim,
                        entries_changed=entries_changed, **options)


def max_variance(kind: str, horizon: Optional[int], *, rho: Optional[float] = None,
                 epsilon: Optional[float] = None, entries_changed: int = 1,
                 sub_gaussian: bool = False, **options) -> float:
    """max_{t=1..T} Var(S̃^t − S^t) of a counter with these parameters (for splitting a
    budget across counters); ``sub_gaussian``: the variance proxy of its tails instead
    (× :meth:`StreamCounter.sub_gaussian_factor`, zCDP only).  Unbounded kinds need a
    horizon here too."""
    if horizon is None:
        raise ValueError("max_variance needs a horizon (the variance of an unbounded "
                         "counter grows without bound)")
    counter = make_counter(kind, horizon, rho=rho, epsilon=epsilon,
                           entries_changed=entries_changed, **options)
    worst = float(counter.variances(np.arange(1, counter.horizon + 1)).max())
    return worst * counter.sub_gaussian_factor() if sub_gaussian else worst


def privacy_cost(counter: StreamCounter) -> Dict[str, float]:
    """The budget the whole counter spends, from its noise parameters and sensitivity:
    ``{"rho": …}`` (zCDP) or ``{"epsilon": …}`` (pure DP) = E × the loss of one changed
    entry (Σ over the nodes it touches of 1/(2σ²) resp. 1/b).  For unbounded counters this
    holds for streams of any length."""
    return {counter.unit: counter.entries_changed * counter.entry_cost()}
