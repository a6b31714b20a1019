"""The publication boundary: the one module that decides what leaves the private side.

A release publishes its synthetic records, the names of its files, its ``manifest.json``
and the JSON document the command prints on stdout.  Differential privacy covers them
only if they depend on the private input through calibrated noise alone, so every field
of a manifest and of a printed summary is classified here, once, as one of

* :data:`PUBLIC` — public configuration: given by the user, fixed by the software or the
  paper, or computed from those alone (budgets, noise scales, error bounds, the periods a
  horizon releases), never read off the data;
* :data:`NOISY` — the output of a named noisy mechanism (its mechanism is named);
* :data:`DERIVED` — post-processing of public configuration and noisy outputs.

:func:`manifest` finishes every manifest (whole run and step, every synthesizer): it adds
``provenance`` (the software and the time of writing, ``SOURCE_DATE_EPOCH`` if set), sets
``for_publication`` by the one rule :func:`not_for_publication`, tidies floats, and refuses
a field the schema does not classify (:class:`UnclassifiedField`: a programming error,
caught by every test that writes a manifest).  :func:`printed` does the same for what a
command prints.  Anything exact about the input — digests of its files, record counts,
rejected records, the values that occur — stays in the private state directory or the
operator's log (stderr and Beam's metrics).

Published facts a release states plainly (and which the neighbour test,
``tests/test_publication_boundary.py``, checks job by job: neighbouring inputs with one
seed publish identical :data:`PUBLIC` fields and file names):

* the domain (alphabet, a tabular ``--domain``, PrivHP's ``--bounds``) and the horizon T
  are public inputs;
* under the ``replace`` relation the number of people n is public (neighbours have the
  same n): a cumulative release's ``num_synthetic`` and ``released_counts[0]`` are n.

A release whose public choices were read off the data (``--infer-domain``, a ``tabular
run`` whose T is its input's last period) or whose noise is a seeded simulation
(``--seed``) is marked ``"for_publication": false`` with the reasons in
``not_for_publication``; its manifest is the operator's, not the public's.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Dict, List, Mapping, Optional

from continual_synth.mechanisms.errors import InputError

__all__ = ["SIGNIFICANT_DIGITS", "DISTRIBUTION", "HORIZON_FROM_DATA", "DOMAIN_GIVEN",
           "DOMAIN_FROM_DATA", "SEEDED", "UnclassifiedField", "Field", "MANIFEST_FIELDS",
           "SUMMARY_FIELDS", "unclassified", "check_classified", "not_for_publication",
           "manifest", "printed", "software_version", "SOURCE_DATE_EPOCH", "source_date",
           "created_utc", "tidy_floats"]

SIGNIFICANT_DIGITS = 12
DISTRIBUTION = "continual-synth"

PUBLIC, NOISY, DERIVED = "public", "noisy", "derived"

#: ``horizon_source`` of a ``tabular run`` whose T is its input's last period
HORIZON_FROM_DATA = ("the input's last period: read from the data (no --horizon), so the "
                     "release is not for publication; give --horizon")
#: ``domain_source`` of a release whose domain the user gave (``--domain``)
DOMAIN_GIVEN = "given by the user (public)"
#: ``domain_source`` of a release whose domain was read off the data (``--infer-domain``)
DOMAIN_FROM_DATA = ("inferred from the private data (--infer-domain): the set of values "
                    "that occur is disclosed, so the release is not for publication")
#: ``sampler`` of a release whose noise is the seeded simulation sampler (``--seed``)
SEEDED = "seeded"


class UnclassifiedField(RuntimeError):
    """A manifest or printed field that :data:`MANIFEST_FIELDS` / :data:`SUMMARY_FIELDS`
    does not classify: a programming error, raised before anything is published."""


@dataclass(frozen=True)
class Field:
    """How a published field depends on the input: ``kind`` (:data:`PUBLIC`,
    :data:`NOISY` or :data:`DERIVED`) and ``source`` (the option, the paper's quantity,
    or the noisy mechanism)."""

    kind: str
    source: str


def _public(source: str) -> Field:
    return Field(PUBLIC, source)


def _noisy(mechanism: str) -> Field:
    return Field(NOISY, mechanism)


def _derived(source: str) -> Field:
    return Field(DERIVED, source)


_RELEASE = {
    "algorithm": _public("the synthesizer"),
    "paper": _public("the synthesizer's paper"),
    "mode": _public("the command (run or incremental)"),
    "format": _public("--format"),
    "sampler": _public("--seed: seeded simulation or OpenDP's exact sampler"),
    "for_publication": _public("the rule of not_for_publication over public choices"),
    "not_for_publication": _public("why not: seeded noise or a choice read off the data"),
    "provenance": _public("the software's version and the time the manifest was written"),
    "files": _derived("the periods released and the shards of the noisy synthetic "
                      "population or table"),
    "accuracy_files": _derived("the error bounds of each period's release: post-processing "
                               "of the noisy measurements and of the release"),
    "note": _public("the window synthesizer's note before its first release"),
    "periods_released": _public("the periods stepped so far (the horizon and window)"),
    "last_period_seen": _public("the periods stepped so far"),
    "horizon": _public("--horizon (read from the data only where horizon_source says so)"),
    "horizon_source": _public("where T came from"),
    "period_col": _public("--period-col"),
}

_ACCOUNTING = {
    "neighbor": _public("--neighbor"),
    "relation": _public("the neighbouring relation"),
    "neighbor_meaning": _public("the neighbouring relation"),
    "rho": _public("--rho"),
    "rho_spent": _public("the ledger: rho per period stepped"),
    "ledger": _public("the budget's charges per period stepped"),
    "rho_per_period": _public("--rho and the horizon"),
    "epsilon": _public("--epsilon, or the (epsilon, delta) reading of rho"),
    "epsilon_spent": _derived("the ledger: epsilon per period stepped (tabular: a period "
                              "whose noisy model has no room for a selection leaves it "
                              "unspent)"),
    "delta": _public("--delta"),
    "privacy_statement": _derived("the relation, the budgets and the ledger"),
    "composition": _public("how the levels' budgets compose"),
    "privacy_level": _public("the neighbouring relation's unit"),
    "stride": _public("--level-stride"),
    "measured_levels": _public("--level-stride over the depth"),
    "post_processing": _public("how unmeasured levels are estimated"),
    "sensitivity_note": _public("the counters' calibration"),
    "budget_split": _public("--budget-split"),
    "budget_split_note": _public("--budget-split and the bounds it gives"),
    "levels": _public("each level's budget, sensitivity and noise"),
    "level_epsilons": _public("--level-epsilons or --budget-split"),
    "noise": _public("the noise distribution"),
    "noise_variance": _public("Theorem 3.1's calibration"),
    "l2_sensitivity": _public("the relation"),
    "beta": _public("--beta"),
    "n_pad": _public("Theorem 3.2's padding at beta"),
    "error_bound": _public("the paper's bound at beta for the noise in force"),
    "error_bound_note": _public("the bound's derivation"),
    "error_bound_by_split": _public("the bound under each budget split"),
    "paper_corollary_b1_bound": _public("Bun et al. (2024) Corollary B.1"),
    "paper_corollary_b1_note": _public("Bun et al. (2024) Corollary B.1"),
    "counter": _public("--counter"),
    "counter_rhos": _public("--budget-split over the counters"),
    "counter_epsilon": _public("--epsilon and --selection-share"),
    "population": _public("how n is published under the relation in force"),
}

_PANELS = {
    "window": _public("--window"),
    "alphabet": _public("--alphabet"),
    "num_synthetic": _derived("Algorithm 1: the noisy window histogram plus padding; "
                              "Algorithm 2: n (public under replace) or the noisy n"),
    "clamp_events": _derived("Algorithm 1: clamps of the noisy consistent targets"),
    "debias": _derived("n_pad and the noisy synthetic population"),
    "monotonisation_events": _derived("Algorithm 2: monotonisations of the noisy counts"),
    "released_counts": _noisy("Algorithm 2's stream counters (discrete Gaussian), "
                              "monotonised; S_0 = n"),
}

_TABULAR = {
    "method": _public("--method"),
    "selections": _public("--selections"),
    "selection_schedule": _public("--selection-schedule"),
    "selection_ceiling": _public("--selection-schedule"),
    "periods_by_selections": _derived("k_t per period, chosen from earlier releases and the "
                                      "noisy batch sizes"),
    "selection_epsilon": _public("--epsilon and --selection-share"),
    "measurement_epsilon": _public("--epsilon and --selection-share"),
    "utility_sensitivity": _public("the utility's sensitivity"),
    "utility_sensitivity_unsized": _public("the utility's sensitivity before any size is "
                                           "public"),
    "utility_size": _public("--utility-size"),
    "unseen_share": _public("--unseen-share"),
    "bias_correction": _public("--rule"),
    "bias_noise": _public("--rule"),
    "coverage": _public("--coverage"),
    "utility": _public("--rule"),
    "remainder": _public("--rule"),
    "remainder_drift": _derived("the drift estimate from the released margins"),
    "remainder_stationary_weight": _derived("the drift estimate from the released margins"),
    "combine": _public("--rule"),
    "margins": _public("--margins"),
    "selection_share": _public("--selection-share"),
    "measurement_noise": _public("the counters' calibration"),
    "fit": _public("--fit"),
    "fit_model": _public("--fit"),
    "structure": _public("--structure"),
    "fit_iterations": _public("--rule"),
    "model_cells": _public("--max-cells and --model-growth"),
    "model_workloads": _derived("the workloads the fitted model holds (noisy selections)"),
    "model_growth": _public("--model-growth"),
    "workloads": _public("--marginals over the domain"),
    "size": _derived("the noisy size of the stream so far (the noisy measurements)"),
    "size_note": _public("what size is"),
    "selection_counts": _noisy("Kumar et al. Algorithm 3's exponential mechanism (and the "
                               "public refresh and coverage slots)"),
    "last_selected": _noisy("Kumar et al. Algorithm 3's exponential mechanism"),
    "attributes_never_measured": _derived("the noisy selections"),
    "workloads_never_measured": _derived("the noisy selections"),
    "release_form": _public("--method"),
    "wide_cells": _public("--wide-cells"),
    "wide_ratio": _public("--wide-cells"),
    "wide_fit": _public("--rule"),
    "wide_sets": _public("--wide-cells over the domain"),
    "domain": _public("--domain (read off the data only where domain_source says so)"),
    "domain_source": _public("where the domain came from"),
}

_POINTS = {
    "parameters": _public("--prune-k, --depth, --sketch-width, --sketch-depth, --hash-seed"),
    "memory_counters": _public("the configuration's counters"),
    "memory": _derived("the configuration's counters, and the size of the noisy grown "
                       "tree (released_tree_nodes)"),
    "noisy_total": _noisy("PrivHP's root counter (discrete Laplace), made consistent"),
    "columns": _public("--columns"),
    "bounds": _public("--bounds"),
    "samples": _public("--samples"),
    "samples_per_period": _public("--samples"),
    "shards": _public("--shards"),
    "clip": _public("--clip"),
    "clip_note": _public("what --clip does"),
    "depth_from": _public("--depth or --expected-n"),
    "unit": _public("the ledger's unit"),
    "last_release": _derived("the noisy tree of the last period"),
    "w1_bound": _derived("Holland et al. (2025) Theorem 3's terms at the noisy total and "
                         "the released tree's leaves (post-processing of the noisy tree)"),
    "w1_bound_kind": _public("what w1_bound bounds (an expectation over the noise)"),
    "w1_bound_theorem": _public("the paper's theorem"),
    "w1_bound_terms": _derived("the configuration's noise and sketch terms (public) and the "
                               "leaf term and n of the noisy tree"),
    "w1_bound_note": _public("the bound's derivation, or why a synthesizer states none"),
    "w1_bound_input_scale": _public("--bounds: the widest column's width"),
}

#: every field a release's ``manifest.json`` may hold
MANIFEST_FIELDS: Mapping[str, Field] = {**_RELEASE, **_ACCOUNTING, **_PANELS, **_TABULAR,
                                        **_POINTS}

#: every field a ``run``, ``init``, ``step`` or ``stream`` command may print besides the
#: manifest's own (a whole ``run`` prints its manifest, or its scalar fields)
SUMMARY_FIELDS: Mapping[str, Field] = {
    **MANIFEST_FIELDS,
    "status": _public("what the command did (released, ingested, already-released, "
                      "initialised, kept, stopped)"),
    "state": _public("--state"),
    "output": _public("--output"),
    "message": _derived("the status in words"),
    "period": _public("the period stepped"),
    "periods_published": _public("the periods this step published"),
    "resumed": _public("whether the step resumed a committed period"),
    "rows": _derived("the noisy size of the period's synthetic table"),
    "periods": _public("--horizon"),
    "depth": _public("--depth or --expected-n"),
    "prune_k": _public("--prune-k"),
    "periods_ingested": _public("the periods the state has taken in"),
    "pending": _public("whether a committed period awaits publication"),
}


def unclassified(document: Mapping, schema: Mapping[str, Field]) -> List[str]:
    """The fields of ``document`` that ``schema`` does not classify."""
    return sorted(key for key in document if key not in schema)


def check_classified(document: Mapping, schema: Mapping[str, Field], what: str) -> None:
    """Refuse ``document`` if a field of it is not classified (:class:`UnclassifiedField`)."""
    missing = unclassified(document, schema)
    if missing:
        raise UnclassifiedField(
            f"{what}: field(s) {', '.join(missing)} are not classified in "
            f"continual_synth.pipelines.release.publication (public, noisy or derived); nothing "
            f"was published")


def not_for_publication(document: Mapping) -> List[str]:
    """Why a release must not be published, from the choices its manifest records (empty:
    it may be): its noise is the seeded simulation (``sampler``), its horizon was read
    from the data (``horizon_source``), or its domain was (``domain_source``)."""
    reasons = []
    if document.get("sampler") == SEEDED:
        reasons.append("seeded: --seed draws the noise from a reproducible simulation "
                       "sampler, not OpenDP's exact one")
    if document.get("horizon_source") == HORIZON_FROM_DATA:
        reasons.append("the horizon T was read from the data (the input's last period): "
                       "give --horizon")
    if document.get("domain_source") == DOMAIN_FROM_DATA:
        reasons.append("the domain was inferred from the data (--infer-domain): give "
                       "--domain")
    return reasons


def manifest(document: Dict) -> Dict:
    """``document`` as published: ``for_publication`` by :func:`not_for_publication`
    (with the reasons, when there are any), ``provenance``, floats tidied, every field
    classified (:class:`UnclassifiedField` otherwise)."""
    reasons = not_for_publication(document)
    verdict = {"for_publication": not reasons, **({"not_for_publication": reasons}
                                                  if reasons else {})}
    published = {}
    for key, value in document.items():
        if key not in ("for_publication", "not_for_publication", "provenance"):
            published[key] = value
            if key == "sampler":  # the verdict next to the sampler it mostly follows
                published.update(verdict)
    published.update(verdict)
    published["provenance"] = {"software": software_version(), "created_utc": created_utc()}
    check_classified(published, MANIFEST_FIELDS, "manifest.json")
    return tidy_floats(published)


def printed(document: Dict, command: str) -> Dict:
    """What ``command`` prints on stdout, checked: a ``run``, ``init``, ``step`` or
    ``stream`` of a synthesizer prints classified fields only (``evaluate`` compares a
    release with the private truth and prints on the private side; ``demo`` and
    ``tabular example`` print what they generated)."""
    action = command.split()[-1] if command else ""
    if action.split("_")[-1] in ("run", "init", "step", "stream") and \
            not command.startswith("evaluate"):
        check_classified(document, SUMMARY_FIELDS, f"{command}'s printed summary")
    return tidy_floats(document)


def software_version() -> str:
    """``continual-synth <version>`` of the installed distribution."""
    try:
        return f"{DISTRIBUTION} {metadata.version(DISTRIBUTION)}"
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return f"{DISTRIBUTION} (not installed)"


#: the environment variable that fixes a manifest's creation time (reproducible builds)
SOURCE_DATE_EPOCH = "SOURCE_DATE_EPOCH"


def source_date() -> Optional[datetime.datetime]:
    """The time ``SOURCE_DATE_EPOCH`` fixes (None if unset or empty), checked: whole
    seconds since the epoch, within the years 1970-9999 that ISO 8601 writes with four
    digits (:class:`~continual_synth.mechanisms.errors.InputError` naming the variable
    otherwise).  Every job calls it before it reads data or charges a budget, so a bad
    value never leaves a period charged without its manifest."""
    text = os.environ.get(SOURCE_DATE_EPOCH, "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise InputError(f"{SOURCE_DATE_EPOCH}={text!r} is not a whole number of seconds "
                         f"since 1970-01-01 (the reproducible-builds convention); fix or "
                         f"unset it")
    seconds = int(text)
    largest = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.timezone.utc)
    if seconds > largest.timestamp():
        raise InputError(f"{SOURCE_DATE_EPOCH}={text} is after the year 9999 (at most "
                         f"{int(largest.timestamp())}); fix or unset it")
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def created_utc() -> str:
    """Now (or ``SOURCE_DATE_EPOCH``), UTC, ISO 8601 to the second: ``2026-11-23T19:30:00Z``."""
    moment = source_date() or datetime.datetime.now(datetime.timezone.utc)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def tidy_floats(document: Any) -> Any:
    """``document`` with every float rounded to :data:`SIGNIFICANT_DIGITS` significant
    digits (dicts, lists and tuples are walked; other values are kept), so that
    ``rho_spent`` prints 0.05, not 0.049999999999999996.  The saved state keeps exact
    floats; only what is printed is rounded."""
    if isinstance(document, float):
        return float(f"{document:.{SIGNIFICANT_DIGITS}g}")
    if isinstance(document, dict):
        return {key: tidy_floats(value) for key, value in document.items()}
    if isinstance(document, (list, tuple)):
        return [tidy_floats(value) for value in document]
    if hasattr(document, "dtype") and getattr(document, "ndim", None) == 0:  # numpy scalar
        return tidy_floats(document.item())
    if hasattr(document, "tolist"):  # numpy array
        return tidy_floats(document.tolist())
    return document
