"""Synthetic high-dimensional tabular streams (Kumar, Strohmer and Vershynin 2024) as pure
state machines: the baseline (§5, Algorithm 2, "StreamingMWEM") and the proposed method
(§6, Algorithm 3), both in the workload form of §7.2.  References below are to that
paper unless another is named; "line n" is a line of Algorithm 3.

Where each piece is (one module per concept):

* the options, the two rule sets, the budget split and privacy (Algorithms 2-3, Theorem
  6.1) — :mod:`.config` (:class:`TabularConfig`, :func:`period_cost` in :mod:`.state`);
* what a period carries and releases — :mod:`.state` (:class:`TabularState`,
  :class:`TabularRelease`, :func:`initial_state`, :func:`check_step`);
* selection (§6.4, lines 9-12; Definition 3.8) — :mod:`.selection`;
* measurement of the periods a counter did not see (§6.2, lines 15-17 and 20-21) and the
  drift test — :mod:`.remainder`; wide measurements — :mod:`.wide`;
* which measurements the fit takes (§6.3, line 18, A_Dataset) — :mod:`.structure`, with
  :class:`~continual_synth.mechanisms.fitting.Fitter` and
  :mod:`~continual_synth.mechanisms.pooled_margins`;
* one period of each method (Algorithm 3's lines 9-21; Algorithm 2) — :mod:`.methods`
  (:func:`step`);
* the manifest's privacy facts — :mod:`.manifest`.

Setting (§3).  At period t a batch ∇f_t of records over the public domain 𝒳 arrives; the
stream so far is f_t = ∇f_1 + … + ∇f_t.  After every period a synthetic table g_t is
released that should answer the workloads Q (marginal histograms, §7.2 Definition 7.1)
as f_t does.

Neighbours and sensitivity (§3.3 Definition 3.3; papers README point 6).  **Event
level**: two streams are neighbours when one record is added or removed at one time
(‖f − f̃‖_∇ = 1).  Every workload histogram of ∇f_t then has L1 sensitivity 1 (a record
is in one cell of each workload, §7.2), and a record of period t changes no other
period's ∇f.

Algorithm (Algorithm 3 in the workload form of §7.2), per period t with k selections
(``selections``; the paper's k = 3, more at large ε by default: :func:`auto_selections`):

* h_{t,0} = g_{t−1}, with g_0 the uniform distribution over 0 records (the paper's
  g(0, x) = 1, line 4, would put |𝒳| phantom records into g_0, some 10^9 for 12
  attributes);
* for l = 1..k (lines 9-18): select j among the workloads J_{t,l} not yet selected in
  the period (and whose addition keeps the fitted model within its size limit), feed
  counter C_j with W_j(∇f_t) (line 15, *selective counting*: only the selected counters
  see period t), measure m(t, j), fit h_{t,l} = A_Dataset({(W_i, m(t, i))}_{i ∈ I_{t,l}},
  h_{t,l−1}) (line 18, warm start);
* release g_t (line 19); every workload i not selected keeps C_i(t) = C_i(t − 1)
  (line 20).
"""
from __future__ import annotations

# every module's names, the private ones too (tests and benchmarks reach some of them)
from continual_synth.mechanisms.tabular.config import (ALGORITHMS, METHODS,
                                                       BIAS_CORRECTIONS, BIAS_NOISES,
                                                       COVERAGES, UTILITIES, UTILITY_SIZES,
                                                       REMAINDERS,
                                                       COMBINES, MARGINS, BASELINE_STARTS,
                                                       SELECTION_DISCOUNTS, MODEL_GROWTHS,
                                                       SELECTION_SCHEDULES, WIDE_FITS,
                                                       STRUCTURES, UNSEEN_SHARES,
                                                       WIDE_RATIO, WIDE_CELLS,
                                                       WIDE_NOISE, PAPER_SELECTIONS,
                                                       AUTO_SELECTIONS_MAX, WIDE_SELECTIONS,
                                                       RULES, DEFAULT_SELECTION_SHARES,
                                                       SAVED_CONFIG_DEFAULTS, RELATION,
                                                       MAX_WORKLOAD_CELLS,
                                                       resolved_selection_share,
                                                       quiet_selections, wide_regime,
                                                       auto_selections, TabularConfig,
                                                       saved_config, _domain_key, _FITTERS)
from continual_synth.mechanisms.tabular.state import (FORMAT_VERSION, TabularState,
                                                      TabularRelease, initial_state,
                                                      check_step, period_cost,
                                                      _check_histograms, _copy_state)
from continual_synth.mechanisms.tabular.remainder import (INCREMENT_PULL, DRIFT_DISCOUNT,
                                                          DRIFT_WARMUP, EXCHANGEABLE_BELOW,
                                                          DRIFTING_ABOVE, _size_estimate,
                                                          _drift_update, drift_estimate,
                                                          stationary_weight, _shrunk_share,
                                                          _carry_increment, _current_share)
from continual_synth.mechanisms.tabular.selection import (_log_factorials, _sampling_biases,
                                                          _sampling_deviations, _utilities,
                                                          estimate_noise, _bias,
                                                          starved_cover, _staleness,
                                                          _count_discounted,
                                                          balanced_selections,
                                                          period_selections, selection_size)
from continual_synth.mechanisms.tabular.structure import (informative, _departure, yielding,
                                                          room_for)
from continual_synth.mechanisms.tabular.wide import (_wide_set, _wide_extras, _project)
from continual_synth.mechanisms.tabular.methods import (step, _select_measure_fit,
                                                        _step_proposed, _add_noise_terms,
                                                        _step_baseline)
from continual_synth.mechanisms.tabular.manifest import (_periods_by_selections,
                                                         manifest_fields, never_measured)

__all__ = ["ALGORITHMS", "METHODS", "BIAS_CORRECTIONS", "BIAS_NOISES", "COVERAGES",
           "UTILITIES", "UTILITY_SIZES", "REMAINDERS", "COMBINES", "MARGINS",
           "BASELINE_STARTS",
           "SELECTION_DISCOUNTS", "MODEL_GROWTHS", "SELECTION_SCHEDULES", "WIDE_FITS",
           "STRUCTURES", "UNSEEN_SHARES", "WIDE_RATIO", "WIDE_CELLS", "WIDE_NOISE", "PAPER_SELECTIONS",
           "AUTO_SELECTIONS_MAX", "WIDE_SELECTIONS", "RULES", "DEFAULT_SELECTION_SHARES",
           "SAVED_CONFIG_DEFAULTS", "RELATION", "MAX_WORKLOAD_CELLS",
           "resolved_selection_share", "quiet_selections", "wide_regime", "auto_selections",
           "TabularConfig", "saved_config", "FORMAT_VERSION", "TabularState",
           "TabularRelease", "initial_state", "check_step", "period_cost", "INCREMENT_PULL",
           "DRIFT_DISCOUNT", "DRIFT_WARMUP", "EXCHANGEABLE_BELOW", "DRIFTING_ABOVE",
           "drift_estimate", "stationary_weight", "estimate_noise", "starved_cover",
           "balanced_selections", "period_selections", "selection_size", "informative",
           "yielding",
           "room_for", "step", "manifest_fields", "never_measured"]
