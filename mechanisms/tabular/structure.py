"""Which measured workloads join the fitted model (Kumar et al. 2024, §6.3, line 18,
A_Dataset), and which give way at the model's size limit.

Fit (§6.3, line 18).  A_Dataset is :class:`~continual_synth.mechanisms.fitting.Fitter`
(``fit``: ``ipf`` on a junction-tree model by default, ``mw`` the paper's
multiplicative weights), warm-started from h_{t,l−1} and kept within the model's size
limit (:meth:`TabularConfig.model_limit`).  Pooled one-way margins (``margins="pooled"``,
the default where the fit takes them: ``ipf`` or ``mw`` with the ``adaptive``,
``increment`` or ``model`` remainder): every fit also matches each attribute's one-way
margin pooled over all the periods' counter increments of the workloads holding it
(:mod:`~continual_synth.mechanisms.pooled_margins`).  Structure
(``structure="informative"``, the default with the ``ipf`` fit and the pooled margins;
``"measured"``, every measurement fitted as the paper's A_Dataset does, under ``paper``):
a selected pair outside the model's junction tree joins the fit only when its counter's
sum departs from independence by more than the counter's noise would (:func:`informative`);
otherwise its measurement feeds only its counter and the pooled margins, and the model
completes the pair.  At the size limit, pairs of the tree whose sums show no departure
beyond sampling and noise give way to a selected workload that needs their room
(:func:`yielding`, :func:`room_for`).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import numpy as np

from continual_synth.mechanisms.marginals import Workload

__all__ = ["informative", "yielding", "room_for"]


def informative(fitter, structure: Sequence[Workload], workload: Workload,
                counts: np.ndarray, variance: float) -> bool:
    """``structure="informative"``: whether the fit takes a selected workload's
    measurement, i.e. lets it join the model's structure.  Always for a workload the
    structure already holds (inside a clique of its junction tree) and for one of other
    than two attributes.  A pair W = (a, b) outside it joins only when what its counter
    has measured departs from independence by more than the counter's noise would:

        D = ‖m − m_a ⊗ m_b / n‖_1  >  N = √(2/π)·σ·|W|,

    m = ``counts``, the counter's own sum C_W(t) over the periods that measured W,
    clipped at 0 (not the remainder imputed for the other periods: that is the model's
    own answer, and would carry the model's dependence into the test), n its total,
    m_a and m_b its margins, σ² = ``variance`` its noise variance per cell.  N is the
    expected L1 norm of that noise (AIM's bias term); on a table whose attributes are
    independent D reads the noise less what the margins absorb, about
    √((a − 1)(b − 1)/(ab))·N.  Below N the measurement shows no dependence its noise
    does not swamp: fitting it would put about N of noise into the model's W marginal,
    while leaving it out costs W's true departure from independence, which is smaller;
    its one-way margins reach the fit through the pooled margins either way.  It also
    keeps such pairs from filling the model's size limit (``max_cells``), where they
    would lock out strongly dependent pairs for good (bench/results/tabular_structure.md).
    An independent pair joins when noise and sampling happen to push D above N, and then
    stays until a selected workload needs its room (:func:`yielding`): over many tests
    the rule delays such pairs rather than keeping them out for good.  The test reads the
    periods W's counter measured as a sample of the stream.  In a stream sorted by a
    place they may all lie in one precinct, a table of one row, which is a product
    whatever the pair's dependence: on MplsStops sorted by neighbourhood the tied pair
    precinct × neighbourhood stays out longer, and more released records fall in absent
    precinct-neighbourhood combinations, though AvgWE falls
    (bench/results/tabular_structure.md).  The test reads every period the counter saw,
    whatever the drift test reads (at small ε the drift estimate can read an exchangeable
    stream as drifting) and whether or not the counter's margins match the model's (same
    file).  At ε → ∞, N → 0 and every measured pair joins, as in the paper's A_Dataset,
    which fits every measurement (``structure="measured"``); at the size limit a pair of
    no shown dependence then gives way (:func:`yielding`).
    Post-processing of the counter's output with its public variance: no budget."""
    if len(workload) != 2 or fitter.fits(structure, workload, 0):
        return True
    departure, independent, _ = _departure(fitter, workload, counts)
    if independent is None:
        return False
    return bool(departure > math.sqrt(2.0 / math.pi) * math.sqrt(variance) * independent.size)


def _departure(fitter, workload: Workload, counts: np.ndarray):
    """A pair's measured departure from independence: (‖m − e‖_1, e, n) with m =
    ``counts`` clipped at 0 as an a × b table, n its total and e = m_a ⊗ m_b / n the
    table of its margins under independence; e is None when m holds no record."""
    a, b = (fitter.domain.size((x,)) for x in workload)
    table = np.maximum(np.asarray(counts, dtype=np.float64), 0.0).reshape(a, b)
    n = table.sum()
    if n <= 0:
        return 0.0, None, 0.0
    independent = np.outer(table.sum(axis=1), table.sum(axis=0)) / n
    return float(np.abs(table - independent).sum()), independent, n


def yielding(fitter, structure: Sequence[Workload], index: Dict[Workload, int],
             evidence, keep) -> List[Workload]:
    """``structure="informative"``: the pairs of the model's ``structure`` that give way
    to a selected workload needing their room under the size limit, weakest first: those
    whose counter's own sum m = C_W(t) departs from independence by no more than a
    table of independent attributes would from sampling and noise alone,

        D = ‖m − e‖_1  ≤  √(2/π)·Σ_cells √(e·(1 − e/n) + σ²),

    e = m_a ⊗ m_b / n (:func:`_departure`), σ² W's counter noise variance per cell: the
    expected L1 norm of a multinomial sample of n records from e plus the noise, cell by
    cell.  Ordered by D over that null (ties by the structure's order).  ``evidence(i)``
    as for :func:`informative`; ``keep``: indices that do not give way (those measured
    this period, which the fit keeps in the structure).

    Why.  At ε → ∞ every measured pair passes :func:`informative`, so the structure
    fills the size limit (``max_cells``) with the pairs selected first: a nearly
    independent pair can hold the room a strongly dependent pair then cannot get, and
    that pair's error stays the largest (MaxWE).  Using this sampling null to keep such
    pairs out from the start (a stricter :func:`informative`) would cure that but raise
    AvgWE elsewhere, since a weak but real dependence is still worth its room when the
    room is free; here a pair leaves only when a selected workload needs the room
    (bench/results/tabular_structure.md).  Post-processing of
    the counters' outputs and their public variances: no budget."""
    out = []
    for position, w in enumerate(structure):
        if len(w) != 2 or index[w] in keep:
            continue
        counts, variance = evidence(index[w])
        departure, e, n = _departure(fitter, w, counts)
        if e is None:
            out.append((0.0, position, w))
            continue
        null = math.sqrt(2.0 / math.pi) * float(
            np.sqrt(np.maximum(e * (1.0 - e / n), 0.0) + variance).sum())
        if departure <= null:
            out.append((departure / null if null > 0 else 0.0, position, w))
    return [w for *_, w in sorted(out)]


def room_for(fitter, structure: Sequence[Workload], workload: Workload,
             yielding_pairs: Sequence[Workload], limit: Optional[int]
             ) -> Optional[List[Workload]]:
    """The fewest of ``yielding_pairs`` (a prefix, weakest first: :func:`yielding`)
    whose leaving the ``structure`` lets ``workload`` fit within ``limit``, or None when
    all of them leaving would not.  A binary search on the prefix's length (the prefix it
    returns always fits; the shortest one when fewer pairs never make a larger tree,
    which the fitter's greedy triangulation makes likely but does not promise)."""
    def fits(count):
        gone = set(yielding_pairs[:count])
        return fitter.fits([w for w in structure if w not in gone], workload, limit)
    if not yielding_pairs or not fits(len(yielding_pairs)):
        return None
    low, high = 1, len(yielding_pairs)
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return list(yielding_pairs[:low])
