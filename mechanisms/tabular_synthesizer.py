"""The tabular stream synthesizer as the jobs drive it (batch, incremental, streaming).

:class:`TabularSynthesizer` binds a :class:`~continual_synth.mechanisms.tabular.
TabularConfig` (Kumar, Strohmer and Vershynin 2024: §6 Algorithm 3, or the §5 Algorithm 2
baseline) to what the three drivers need: the concatenated workload histograms a period
brings, one step with the per-period sampler (the protocol of
:mod:`continual_synth.mechanisms.synthesizer`), and a typed release they can emit
(:class:`~continual_synth.mechanisms.synthesizer.TableRelease`) — the fitted
distribution of g_t and its noisy size (proposed), or the baseline's increment ∇g_t
already sampled — and the release rule: the baseline's table at t is every increment so
far (:meth:`TabularSynthesizer.table_so_far`), so each increment is drawn once and
published once (appended: the rows of period t are the increment of t; the manifest's
``release_form`` says so).
Pure numpy; no Beam.
"""
from __future__ import annotations

import dataclasses

from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms import tabular, tabular_accuracy
from continual_synth.mechanisms.distributions import FittedModel, model_from_dict
from continual_synth.mechanisms.marginals import Domain
from continual_synth.mechanisms.samplers import Sampler
from continual_synth.mechanisms.synthesizer import Synthesizer, TableRelease, emission_seed

__all__ = ["DEFAULT_COUNTER", "TabularSynthesizer"]

DEFAULT_COUNTER = "simple"  # the counter of the paper's experiments (§7)


class TabularSynthesizer(Synthesizer):
    """One tabular stream release: configuration, state machine and release form."""

    kind = "tabular"
    state_class = tabular.TabularState

    def __init__(self, config: tabular.TabularConfig, domain_inferred: bool = False):
        self.config = config
        self.domain_inferred = bool(domain_inferred)
        edges = np.cumsum([0] + [config.domain.size(w) for w in config.input_workloads])
        self._edges = edges

    @classmethod
    def create(cls, *, domain: Domain, workloads: Sequence, epsilon: float,
               method: str = "proposed", selections: Optional[int] = None,
               counter: Optional[str] = None, fit: str = "ipf",
               horizon: Optional[int] = None, domain_inferred: bool = False,
               **options) -> "TabularSynthesizer":
        """A synthesizer from command-line style options (None: the default).  The
        default k (:func:`~continual_synth.mechanisms.tabular.auto_selections`) may rise
        to :data:`~continual_synth.mechanisms.tabular.AUTO_SELECTIONS_MAX` in periods
        whose batch affords it (``selection_ceiling``,
        :func:`~continual_synth.mechanisms.tabular.period_selections`); a k given here is
        the most a period makes.  Wide measurements
        (:data:`~continual_synth.mechanisms.tabular.WIDE_CELLS` cells, with ``wide_noise``
        :data:`~continual_synth.mechanisms.tabular.WIDE_NOISE`) are on for the proposed
        method with the simple counter and the aim rules unless ``wide_cells`` is given
        (0: off)."""
        auto = selections is None
        if "wide_cells" not in options and method == "proposed" \
                and (counter or DEFAULT_COUNTER) == "simple" \
                and options.get("utility", "aim") == "aim":
            options["wide_cells"] = tabular.WIDE_CELLS
        if options.get("wide_cells") == 0:
            options["wide_cells"] = None
        elif options.get("wide_cells") is not None and "wide_noise" not in options:
            options["wide_noise"] = tabular.WIDE_NOISE
        if auto:
            selections = tabular.auto_selections(epsilon, method, len(workloads),
                                                 options.get("selection_share"))
        config = tabular.TabularConfig(
            domain=domain, workloads=tuple(workloads), epsilon=epsilon, horizon=horizon,
            method=method, selections=selections, counter=counter or DEFAULT_COUNTER,
            fit=fit, **options)
        ceiling = max(selections, min(tabular.AUTO_SELECTIONS_MAX, len(config.workloads)))
        if auto and config.selection_schedule == "drift" and ceiling > selections \
                and options.get("selection_ceiling") is None:
            config = dataclasses.replace(config, selection_ceiling=ceiling)
        return cls(config, domain_inferred)

    # -- description ----------------------------------------------------------------
    @property
    def domain(self) -> Domain:
        return self.config.domain

    @property
    def workloads(self):
        return self.config.workloads

    @property
    def input_workloads(self):
        """The histograms a period's input concatenates: the workloads, then the wide
        sets (``wide_cells``) that are not workloads."""
        return self.config.input_workloads

    @property
    def horizon(self) -> Optional[int]:
        return self.config.horizon

    @property
    def histogram_width(self) -> int:
        """Length of a period's concatenated workload histograms."""
        return int(self._edges[-1])

    def config_dict(self) -> Dict:
        return {"tabular": self.config.to_dict(), "domain_inferred": self.domain_inferred}

    @classmethod
    def from_config_dict(cls, data: Dict) -> "TabularSynthesizer":
        return cls(tabular.TabularConfig.from_dict(data["tabular"]), data["domain_inferred"])

    # -- state machine --------------------------------------------------------------
    def initial_state(self) -> tabular.TabularState:
        return tabular.initial_state(self.config)


    def check_step(self, state: tabular.TabularState, period: int) -> None:
        """Refuse a period out of order, past the horizon or over budget (before reading)."""
        tabular.check_step(self.config, state, period)

    def step(self, state: tabular.TabularState, histograms: np.ndarray, sampler: Sampler
             ) -> Tuple[tabular.TabularState, TableRelease]:
        """One period: ``histograms`` is the concatenation of the exact workload histograms
        of the period's new records; ``sampler`` the period's
        (:func:`~continual_synth.mechanisms.synthesizer.period_sampler`).  The
        baseline's increment is sampled here (``codes``) with the emission seed."""
        flat = np.asarray(histograms)
        if flat.shape != (self.histogram_width,):
            raise ValueError(f"expected {self.histogram_width} histogram cells, got "
                             f"{flat.shape}")
        parts = [flat[self._edges[i]:self._edges[i + 1]] for i in range(len(self._edges) - 1)]
        state, release = tabular.step(self.config, state, parts, sampler)
        seed = emission_seed(sampler)
        if not release.increment:
            return state, TableRelease(release.period, int(release.size), False, seed,
                                       model=release.model,
                                       accuracy=self.accuracy(state, release))
        rng = np.random.default_rng([seed, release.period])
        codes = release.model.sample(int(release.increment_size), rng)
        return state, TableRelease(release.period, int(release.size), True, seed, codes=codes,
                                   accuracy=self.accuracy(state, release))

    def accuracy(self, state: tabular.TabularState, release: tabular.TabularRelease) -> Dict:
        """The error bounds of ``release`` (``accuracy-tTTTT.json``;
        :mod:`~continual_synth.mechanisms.tabular_accuracy`): a bound for each workload
        whose noisy counter covers every period so far (the proposed method's whole
        table g_t), none for the others and for the baseline's appended increments."""
        whole_table = not release.increment and state.noise_terms is not None
        return tabular_accuracy.period_accuracy(
            release.period, self.config.workloads, state.selection_counts,
            int(release.size), model=release.model if whole_table else None,
            measured=state.counter_values, terms=state.noise_terms)

    def table_so_far(self, previous: Optional[np.ndarray], release: TableRelease
                     ) -> np.ndarray:
        """The baseline's release rule (Algorithm 2): the table at t is the table at
        t − 1 (``previous``; None at the start) followed by the increment of t."""
        if not release.increment:
            raise ValueError("only the baseline's releases are increments")
        if previous is None:
            previous = np.zeros((0, len(self.domain.names)), dtype=release.codes.dtype)
        return np.concatenate([previous, release.codes])

    # -- models and manifest --------------------------------------------------------
    @staticmethod
    def model_to_dict(model: FittedModel) -> Dict:
        return model.to_dict()

    def model_from_dict(self, data: Dict) -> FittedModel:
        return model_from_dict(data, self.domain)

    def manifest(self, state: tabular.TabularState) -> Dict:
        manifest = tabular.manifest_fields(self.config, state)
        manifest["release_form"] = (
            "increment: the rows with period t are the records added at t (the increment "
            "of g_t, Algorithm 2); the table released at t is every row of periods <= t"
            if self.config.method == "baseline" else
            "table: the rows with period t are the synthetic table g_t released at t "
            "(Algorithm 3)")
        manifest["domain"] = self.domain.to_dict()
        return manifest
