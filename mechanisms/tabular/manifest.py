"""The privacy facts a tabular release publishes in its manifest (post-processing of
the configuration and of the noisy state)."""
from __future__ import annotations

from typing import Dict, List

from continual_synth.mechanisms.counters import make_counter
from continual_synth.mechanisms.tabular.config import ALGORITHMS, RELATION, TabularConfig
from continual_synth.mechanisms.tabular.state import TabularState
from continual_synth.mechanisms.tabular.remainder import drift_estimate, stationary_weight

__all__ = ["manifest_fields", "never_measured"]


def _periods_by_selections(state: TabularState) -> Dict[str, int]:
    """How many periods made each number of selections k_t (from the ledger)."""
    counts: Dict[int, int] = {}
    for entry in state.ledger.entries:
        k = len(entry.get("selections", []))
        counts[k] = counts.get(k, 0) + 1
    return {str(k): counts[k] for k in sorted(counts)}


def manifest_fields(config: TabularConfig, state: TabularState) -> Dict:
    """The privacy facts of a tabular release, for ``manifest.json``."""
    spent = state.ledger.spent
    proposed = config.method == "proposed"
    fitter = config.fitter()
    drift = drift_estimate(state.drift)
    return {
        "algorithm": ALGORITHMS[config.method],
        "paper": ("Kumar, Strohmer, Vershynin (2024), "
                  + ("§6 Algorithm 3 with the §7.2 workload form" if proposed
                     else "§5 Algorithm 2 (StreamingMWEM), workload form")),
        "method": config.method,
        "neighbor": "event-level",
        "relation": RELATION,
        "epsilon": config.epsilon,
        "epsilon_spent": spent,
        "privacy_statement": (
            f"{spent:.6g}-DP (pure, of {config.epsilon:.6g}) for the whole stream under "
            f"event-level neighbours (one record added or removed at one time): each "
            f"period spends epsilon on its own records only ("
            + (("at most " if config.selection_ceiling == config.selections else "")
               + f"k = {config.selections} exponential mechanisms of "
               f"{config.selection_epsilon:.6g} and as many "
               + ("selected counters" if proposed else "Laplace measurements")
               + f" of {config.measure_epsilon:.6g}; "
               + ("a period the drift estimate reads as exchangeable makes k_t < k"
                  + (f", and one it reads as drifting, whose noisy batch size affords "
                     f"measurements quieter than its sampling, up to k_t = "
                     f"{config.selection_ceiling},"
                     if config.selection_ceiling > config.selections else "")
                  + f" of {config.selection_epsilon_at(1):.6g}/k_t and "
                  f"{config.measure_epsilon_at(1):.6g}/k_t each, chosen "
                  f"from earlier releases only; "
                  if config.selection_schedule == "drift" else "")
               + "a period whose model has room for "
               "fewer workloads makes fewer and leaves the rest unspent"
               + ("; each measurement is the marginal of a wide set S_j holding the "
                  "selected workload (L1 sensitivity 1: one record is one cell), "
                  "projected without further noise on the workloads inside it"
                  if config.wide_cells is not None else "")) + "), parallel "
            "composition across periods; public, not protected: the domain, the workloads "
            "and the horizon T (inputs the user gives)"),
        "selections": config.selections,
        "selection_schedule": config.selection_schedule,
        "selection_ceiling": config.selection_ceiling,
        "periods_by_selections": _periods_by_selections(state),
        "selection_epsilon": config.selection_epsilon,
        "measurement_epsilon": config.measure_epsilon,
        "utility_sensitivity": config.utility_sensitivity,
        "utility_sensitivity_unsized": config.utility_sensitivity_at(False),
        "utility_size": config.utility_size,
        "unseen_share": config.unseen_share,
        "bias_correction": config.bias_correction,
        "bias_noise": config.bias_noise,
        "coverage": config.coverage,
        "utility": config.utility,
        "remainder": config.remainder,
        "remainder_drift": (None if config.remainder != "adaptive" or drift is None
                            else round(drift, 5)),
        "remainder_stationary_weight": (stationary_weight(state.drift)
                                        if config.remainder == "adaptive" else None),
        "combine": config.combine,
        "margins": config.margins,
        "counter": config.counter if proposed else None,
        "counter_epsilon": config.measure_epsilon if proposed else None,
        "selection_share": config.selection_share,
        "measurement_noise": ("per cell of a selected workload: " + make_counter(
                                  config.counter, config.horizon,
                                  epsilon=config.measure_epsilon).noise_description()
                              if proposed else
                              f"discrete Laplace, scale {config.laplace_scale:.6g} per cell"),
        "fit": config.fit,
        "fit_model": fitter.model_kind,
        "structure": config.structure,
        "fit_iterations": int(config.fit_iterations),
        "model_cells": config.model_cells if fitter.model_kind == "junction-tree" else None,
        "model_workloads": (len(fitter.structure(state.model))
                            if fitter.model_kind == "junction-tree" else None),
        "model_growth": config.model_growth,
        "horizon": config.horizon,
        "workloads": [list(w) for w in config.workloads],
        "periods_released": list(range(1, state.period + 1)),  # a table after every period
        "size": int(state.size),
        "size_note": ("noisy size of the stream so far, post-processing of the noisy "
                      "measurements (no extra budget)"),
        "selection_counts": {",".join(w): int(c) for w, c in
                             zip(config.workloads, state.selection_counts)},
        "last_selected": [list(config.workloads[i]) for i in state.last_selected],
        "attributes_never_measured": never_measured(config, state),
        "workloads_never_measured": [list(w) for w, c in
                                     zip(config.workloads, state.selection_counts) if c == 0],
        "release_form": "whole table g_t" if proposed else "increment (appended)",
        **({} if config.wide_cells is None else
           {"wide_cells": int(config.wide_cells), "wide_ratio": config.wide_ratio,
            "wide_fit": config.wide_fit,
            "wide_sets": {",".join(w): list(s) for w, s in
                          zip(config.workloads, config.wide_sets) if s != w}}),
    }


def never_measured(config: TabularConfig, state: TabularState) -> List[str]:
    """The attributes in no workload selected so far: no measurement has seen them, so
    the release's shares of their values are the model's completion (uniform), not the
    data's.  The proposed method's selection weighs a workload's error on one period's
    batch against the noise of one measurement, so on small batches at moderate ε it can
    pass over every workload of a many-valued attribute for the whole stream; coverage
    (:func:`starved_cover`) measures it where that would carry information
    (docs/tabular.md, "Coverage")."""
    if state.period < 1:
        return []
    seen = {a for w, c in zip(config.workloads, state.selection_counts) if c > 0 for a in w}
    return [a for a in config.domain.names
            if a not in seen and any(a in w for w in config.workloads)]
