"""Wide measurements: a selected workload measured as the marginal of a public superset
S_j, projected onto the workloads inside it (post-processing).

Wide measurements (``wide_cells``, proposed method, simple counter; :data:`WIDE_CELLS`
by default from :meth:`TabularSynthesizer.create` and the command line with the aim
rules, off in :class:`TabularConfig`).  Otherwise a workload's interaction is seen only
through the records of the periods that selected it
(``bench/results/tabular_error_anatomy.md``).  The selection is unchanged, but the
selected j is measured as the marginal of a public S_j ⊇ j (:attr:`TabularConfig.wide_sets`,
shortened by ``wide_noise``: :func:`_wide_set`) with the noise of j's counter entry,
1/((1 − s)·ε/k_t) per cell.  **Sensitivity:** one record is in exactly one cell of S_j,
so the L1 sensitivity is 1 whatever |S_j|, and the wide measurement costs what feeding
C_j costs.  Its projections onto j and onto the other workloads i ⊆ S_j not yet measured
this period with |S_j| ≤ ``wide_ratio``·|W_i| are post-processing, fed to those counters
as entries without noise of their own (:meth:`SimpleCounter.feed_measured`, per-cell
variance v·|S_j|/|W_i|; :func:`_wide_extras`).  So a period still spends ε, and one record
informs every workload fed from its period's wide measurements.  Under
``wide_fit="inside"`` (default) a fed workload is fitted only when the model's junction
tree already holds it; fitting every fed workload (``"all"``) fills the model with large
cliques that leave workloads unselectable (``bench/results/tabular_wide_measurements.md``).
"""
from __future__ import annotations

from typing import List

import numpy as np

from continual_synth.mechanisms.distributions import marginal_table
from continual_synth.mechanisms.marginals import Domain, Workload


def _wide_set(config, j: int, cap: float) -> Workload:
    """The longest prefix S_j' of S_j (j, then its added attributes in order) of at most
    ``cap`` cells, at least j itself (``wide_noise`` = c: cap = c·B̂/v, the batch's
    expected count over the per-cell noise variance of an entry, both public).  A cell
    of a workload i projected from S_j' then carries noise v·|S_j'|/|W_i|, within c
    times the sampling variance of a batch's count in it, about B̂/|W_i|.  The exact
    histogram of S_j' is summed from S_j's before the noise is drawn, so the sensitivity
    is still 1."""
    wide = config.wide_sets[j]
    n = len(config.workloads[j])
    while len(wide) > n and config.domain.size(wide) > cap:
        wide = wide[:-1]
    return wide


def _wide_extras(config, fitter, structure, j, wide, selected, limit) -> List[int]:
    """The workloads other than j that the wide measurement of S_j feeds this period:
    those inside S_j, not yet measured this period, whose projection sums at most
    ``wide_ratio`` cells of S_j per cell; none when S_j = j, or under ``wide_fit="all"``
    when the model would outgrow ``limit`` with S_j.  Public (the structure, the
    selections)."""
    if len(wide) == len(config.workloads[j]) or (
            config.wide_fit == "all" and not fitter.fits(structure, wide, limit)):
        return []
    size = config.domain.size(wide)
    return [i for i, w in enumerate(config.workloads)
            if i != j and i not in selected and set(w) <= set(wide)
            and size <= config.wide_ratio * config.cells[i]]


def _project(domain: Domain, wide: Workload, workload: Workload, hist: np.ndarray
             ) -> np.ndarray:
    """The histogram of ``workload`` ⊆ ``wide`` summed from ``wide``'s (C order)."""
    table = hist.reshape([domain.size((a,)) for a in wide])
    return marginal_table(table, wide, workload).reshape(-1)
