"""Expected error before a release is run, from its public parameters alone: what the
manifest of the window, cumulative and bounded synthesizers will state (``plan window``,
``plan cumulative``, ``plan privhp``; the tabular synthesizer's expected error is a
simulation, :mod:`continual_synth.mechanisms.tabular_planning`).

* Window (Bun et al. 2024, Algorithm 1, Theorem 3.2): with probability ≥ 1 − β every
  released window count is within ``error_bound`` of the true count plus n_pad, the
  padding people per window bin; the release holds n_pad·|A|^k padding people.
* Cumulative (Algorithm 2, Lemma 4.2 with the counters' exact variances, union bound):
  every released count of people with at least b ones by period t is within
  ``error_bound`` of the truth; under add-remove, unless n is declared public, the number
  of people is itself released with discrete Gaussian noise, within
  ``population_error_bound`` of n with probability ≥ 1 − β.
* Bounded (PrivHP, Holland et al. 2025, Theorem 3): the noise of every level (its ε,
  sensitivity and scale; for continual PrivHP its counter's variance at the horizon), the
  memory and, for one-shot PrivHP, the expected-W1 bound ``w1_bound`` of
  :func:`~continual_synth.mechanisms.privhp.theorem3_w1_bound` at the n the user expects
  (``--population`` or ``--expected-n``), with the leaf term at its data-free maximum (a
  release states its own, at most that).  Continual PrivHP states no W1 bound (its
  manifest says why).

The window and cumulative bounds count people, whatever the panel's size n; given n, the
plan also states them as a share of n (``*_share_of_n``), so a user sees what n makes a
release useful.  Each figure is the one the manifest computes (the same properties of
the same configuration), never a second formula.
"""
from __future__ import annotations

from typing import Dict, Optional

from continual_synth.mechanisms import accounting, cumulative, window

#: the manifest's keys a window release states from its configuration alone
WINDOW_KEYS = ("algorithm", "paper", "window", "horizon", "alphabet", "neighbor", "rho",
               "rho_per_period", "delta", "noise", "noise_variance", "l2_sensitivity", "beta",
               "n_pad", "error_bound", "error_bound_note")
#: ... and a cumulative release
CUMULATIVE_KEYS = ("algorithm", "paper", "horizon", "neighbor", "counter", "rho",
                   "counter_rhos", "delta", "population", "beta", "budget_split",
                   "budget_split_note", "error_bound", "error_bound_note",
                   "error_bound_by_split", "paper_corollary_b1_bound",
                   "paper_corollary_b1_note")


def _shares(population: Optional[int], **counts: Optional[float]) -> Dict:
    """``{name}_share_of_n`` for each count, given the population n."""
    if population is None:
        return {}
    return {"planned_population": int(population),
            **{f"{name}_share_of_n": None if count is None else count / population
               for name, count in counts.items()}}


def _epsilon(rho: float, delta: float) -> float:
    """The (ε, δ) reading of the whole budget, as the manifest states it once spent."""
    return accounting.zcdp_to_approx_dp(rho, delta)


def window_plan(config: window.WindowConfig, population: Optional[int] = None) -> Dict:
    """The window manifest's bounds for ``config`` (see the module's notes), the padding
    people, and with ``population`` n both as a share of n."""
    fields = window.manifest_fields(window.WindowState.initial(config))
    padding = config.n_pad * config.num_bins
    return {"synthesizer": "window",
            **{key: fields[key] for key in WINDOW_KEYS},
            "epsilon": _epsilon(config.rho, config.delta),
            "padding_people": padding,
            "padding_note": (f"n_pad = {config.n_pad} padding people in each of the "
                             f"{config.num_bins} window bins: the release holds n + "
                             f"{padding} synthetic people; subtract n_pad per bin to debias"),
            **_shares(population, error_bound=config.error_bound, padding_people=padding)}


def cumulative_plan(config: cumulative.CumulativeConfig, population: Optional[int] = None
                    ) -> Dict:
    """The cumulative manifest's bounds for ``config`` (see the module's notes), the noisy
    population's, and with ``population`` n both as a share of n."""
    fields = cumulative.manifest_fields(cumulative.CumulativeState.initial(config))
    noisy = config.population_error_bound
    return {"synthesizer": "cumulative",
            **{key: fields[key] for key in CUMULATIVE_KEYS if key in fields},
            "epsilon": _epsilon(config.rho, config.delta),
            "population_error_bound": noisy,
            "population_error_note": (
                "n is public: the release has n synthetic people" if noisy is None else
                f"with probability >= 1 - beta the release's number of synthetic people is "
                f"within {noisy:.4g} of n (discrete Gaussian, rho {config.population_rho:.4g})"),
            **_shares(population, error_bound=config.variance_bound,
                      population_error_bound=noisy)}


def bounded_plan(config, depth_from: Optional[Dict] = None,
                 population: Optional[float] = None,
                 input_scale: Optional[float] = None) -> Dict:
    """What a bounded release's manifest states from ``config`` alone (a one-shot
    :class:`~continual_synth.mechanisms.privhp.PrivHPConfig` or a
    :class:`~continual_synth.mechanisms.continual_privhp.ContinualPrivHPConfig`): the
    accounting with every level's noise, the parameters, the memory and, one-shot, the
    expected-W1 bound at n = ``population`` (else the ``--expected-n`` of
    ``depth_from``; without either, the bound's terms and no ``w1_bound``).
    ``input_scale``: the widest column's width (the bound in the input's units is
    ``w1_bound`` times it)."""
    from continual_synth.mechanisms import privhp
    from continual_synth.mechanisms.privhp_synthesizer import continual_release_manifest
    scale = {} if input_scale is None else {"w1_bound_input_scale": input_scale}
    if isinstance(config, privhp.PrivHPConfig):
        fields = privhp.release_manifest(config)
        synthesizer = "privhp"
        if population is None and depth_from is not None:
            population, source = depth_from.get("expected_n"), "--expected-n (public)"
        else:
            source = "--population (public)"
        bound = privhp.theorem3_w1_bound(config, population)
        fields.update(privhp.w1_bound_fields(bound, source if population is not None
                                             else "not given: --population N"))
        if bound["w1_bound"] is not None and input_scale is not None:
            scale["w1_bound_input_units"] = bound["w1_bound"] * input_scale
        note = ("w1_bound is Theorem 3's expected-W1 bound at the n given, with the leaf "
                "term at its data-free maximum (a release states the leaf term of its own "
                "noisy tree, at most this); the noise each level adds is in "
                "levels[].noise_scale")
    else:
        fields = continual_release_manifest(config)
        synthesizer = "privhp (continual)"
        note = ("continual PrivHP states no W1 bound (w1_bound_note says why); the noise "
                "each level adds is in levels[].variance_at_horizon")
    fields.pop("epsilon_spent", None)  # a release states what it has spent
    return {"synthesizer": synthesizer, **fields, **scale,
            **({"depth_from": depth_from} if depth_from is not None else {}),
            "error_note": note}


__all__ = ["window_plan", "cumulative_plan", "bounded_plan"]
