"""Expected workload error of a tabular release before it is run, by simulation on a
public synthetic table of the stream's shape (Kumar, Strohmer and Vershynin 2024, §7.3
metrics).  Pure numpy: no private data is read, only the public domain.

The error of Algorithm 3 has no closed form: it depends on how the selection, the
counters and the fitted model meet the data.  So the release's own synthesizer
(:class:`~continual_synth.mechanisms.tabular_synthesizer.TabularSynthesizer`, the state
machine the Beam jobs fold) is run on a stream of the same shape (domain, B records per
period, T periods) drawn from a *public* distribution, and scored as Tables 1-2 are: the
§7.3 metrics of the sampled release g_t against the stream so far f_t, averaged over the
last periods, and the mean over repeats.

**The public distribution** (:func:`public_distribution`) is built from first principles,
knowing nothing of any real table but its domain: a random tree-structured Bayesian
network.  The attributes in a random order; each after the first has one parent, drawn
uniformly among those before it (a random recursive tree, so dependencies chain and
branch).  Every attribute has a base margin m ~ Dirichlet(1, …, 1) (uniform over the
simplex: margins neither flat nor degenerate on average), and given its parent's value
v its values follow Dirichlet(c·m), the same margin blurred by a concentration of c =
:data:`CONCENTRATION` pseudo-records per value of the attribute, so that every pair of
attributes connected in the tree is dependent and no conditional is far from the
margin.  The root is drawn from its margin.  Records are i.i.d. draws of that network:
the stream is exchangeable, as a randomized stream of a real table is.

The figures are those of this public table, an *expected* error under this prior, not
a bound on any data set's error.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms.marginals import Domain, workload_histograms
from continual_synth.mechanisms.workload_error import METRICS, error_metrics, sampling_floor

#: pseudo-records per value of an attribute in each conditional's Dirichlet around the
#: attribute's margin: a moderate dependence on the parent
CONCENTRATION = 1.0
#: periods at the end of the stream the metrics are averaged over (Tables 1-2: 10)
LAST = 10


@dataclass(frozen=True)
class PublicDistribution:
    """A tree-structured Bayesian network over the domain's attributes: ``order`` the
    attributes' positions in sampling order, ``parent[j]`` the position of attribute j's
    parent (None for the root) and ``tables[j]`` its conditional (parent values × values;
    one row for the root)."""

    order: Tuple[int, ...]
    parent: Tuple[Optional[int], ...]
    tables: Tuple[np.ndarray, ...]

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` i.i.d. records as a (size × attributes) matrix of value codes."""
        codes = np.zeros((int(size), len(self.order)), dtype=np.int64)
        for j in self.order:
            table = self.tables[j]
            rows = (np.zeros(size, dtype=np.int64) if self.parent[j] is None
                    else codes[:, self.parent[j]])
            cumulative = np.cumsum(table, axis=1)[rows]
            draws = rng.random(size)[:, None]
            codes[:, j] = np.minimum((draws > cumulative).sum(axis=1), table.shape[1] - 1)
        return codes


def public_distribution(sizes: Sequence[int], seed: int,
                        concentration: float = CONCENTRATION) -> PublicDistribution:
    """The public network for attributes of ``sizes`` values (see the module's notes),
    drawn with ``seed``."""
    rng = np.random.default_rng([int(seed), 1])
    order = tuple(int(j) for j in rng.permutation(len(sizes)))
    parent: List[Optional[int]] = [None] * len(sizes)
    tables: List[np.ndarray] = [np.zeros(0)] * len(sizes)
    for i, j in enumerate(order):
        size = int(sizes[j])
        margin = rng.dirichlet(np.ones(size))
        if i == 0:
            tables[j] = margin[None, :]
            continue
        parent[j] = order[int(rng.integers(i))]
        alpha = np.maximum(concentration * size * margin, 1e-3)
        tables[j] = rng.dirichlet(alpha, size=int(sizes[parent[j]]))
    return PublicDistribution(order, tuple(parent), tuple(tables))


def released_records(synthesizer, table: Optional[np.ndarray], release, sample: bool = True
                     ) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """``(baseline table so far, the period's released records)``: the baseline's
    appended increments, or g_t sampled at its noisy size with the release's emission
    seed (None when ``sample`` is False: a period that is not scored)."""
    if release.increment:
        table = synthesizer.table_so_far(table, release)
        return table, table
    if not sample:
        return table, None
    rng = np.random.default_rng([release.emission_seed, release.period, 0])
    return table, release.model.sample(release.size, rng)


def simulate(synthesizer, batch_size: int, horizon: int, seed: int,
             last: int = LAST) -> Dict[str, float]:
    """One simulated stream: :func:`score_stream` on ``horizon`` periods of
    ``batch_size`` records drawn from the public distribution of ``seed``."""
    records = public_distribution(synthesizer.domain.sizes, seed).sample(
        batch_size * horizon, np.random.default_rng([int(seed), 2]))
    return score_stream(synthesizer, records, batch_size, seed, last)


def score_stream(synthesizer, records: np.ndarray, batch_size: int, seed: int,
                 last: int = LAST) -> Dict[str, float]:
    """The §7.3 metrics of ``synthesizer``'s releases (noise from ``seed``) at the last
    ``last`` periods of the stream whose period t holds rows (t−1)·B .. t·B−1 of
    ``records`` (value codes), averaged over those periods, and the sampling floor (a
    same-size sample drawn with replacement from f_t) at the same periods, as
    ``floor_<metric>``."""
    domain: Domain = synthesizer.domain
    workloads = synthesizer.workloads
    positions = [domain.index(w) for w in workloads]
    horizon = records.shape[0] // batch_size
    floor_rng = np.random.default_rng([int(seed), 3])
    state, table = synthesizer.initial_state(), None
    scores, floors = [], []
    first_scored = max(horizon - last, 0) + 1
    for period in range(1, horizon + 1):
        rows = records[(period - 1) * batch_size: period * batch_size]
        flat = np.concatenate(workload_histograms(rows, domain, synthesizer.input_workloads))
        state, release, _ = synthesizer.step_period(state, period, flat, seed)
        table, synthetic = released_records(synthesizer, table, release,
                                            sample=period >= first_scored)
        if period < first_scored:
            continue
        so_far = records[: period * batch_size]
        truth = workload_histograms(so_far, domain, workloads)
        scores.append(error_metrics(truth, workload_histograms(synthetic, domain, workloads)))
        floors.append(sampling_floor(so_far, so_far.shape[0], domain.sizes, positions,
                                     floor_rng, truth=truth))
    result = {metric: float(np.nanmean([s[metric] for s in scores])) for metric in METRICS}
    result.update({"floor_" + metric: float(np.nanmean([s[metric] for s in floors]))
                   for metric in METRICS})
    return result


def expected_error(synthesizer, batch_size: int, horizon: int, seeds: Sequence[int],
                   last: int = LAST, progress=None) -> Dict:
    """The plan of a tabular release: :func:`simulate` once per seed (each its own public
    table and noise), and the mean of every metric over them.  ``progress(seed, result)``
    is called after each run."""
    runs = []
    for seed in seeds:
        result = simulate(synthesizer, batch_size, horizon, int(seed), last)
        runs.append({"seed": int(seed), **result})
        if progress is not None:
            progress(int(seed), result)

    def mean(key):
        return float(np.mean([run[key] for run in runs]))

    spread = float(np.std([run["AvgWE"] for run in runs], ddof=1)) if len(runs) > 1 else None
    return {"expected_avg_we": mean("AvgWE"), "expected_max_we": mean("MaxWE"),
            "expected_avg_rel_we": mean("AvgRelWE"),
            "sampling_floor_avg_we": mean("floor_AvgWE"),
            "sampling_floor_max_we": mean("floor_MaxWE"),
            "avg_we_spread_over_repeats": spread,
            "repeats": len(runs), "seeds": [run["seed"] for run in runs],
            "periods_averaged": min(last, horizon),
            "runs": [{key: (round(value, 6) if isinstance(value, float) else value)
                      for key, value in run.items()} for run in runs]}


def concentration_note(concentration: float = CONCENTRATION) -> str:
    """The public table's construction, in one sentence for the plan's document."""
    return (f"i.i.d. records of a random tree-structured Bayesian network over the domain "
            f"(each attribute's parent uniform among those before it in a random order; "
            f"margins Dirichlet(1); conditionals Dirichlet({concentration:g} x values x "
            f"margin)), drawn from the seed; no data read")


__all__ = ["CONCENTRATION", "LAST", "PublicDistribution", "public_distribution",
           "released_records", "simulate", "score_stream", "expected_error", "concentration_note"]
