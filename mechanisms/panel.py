"""Longitudinal panels as numpy arrays: validation, pivoting and window histograms.

A panel holds n people, each reporting one value of a finite alphabet A per period.
Values are encoded as alphabet indices (0..|A|−1).  A window string
s = (x^{t−k+1}, …, x^t) ∈ A^k is encoded base |A| with the earliest period most
significant, so the last k−1 values of a window code w are ``w % |A|^(k−1)``
(Bun et al. 2024, Alg. 1: C^t_s counts people whose last k values spell s).
"""
from __future__ import annotations

import numbers
from typing import Optional, Sequence, Tuple

import numpy as np

from continual_synth.mechanisms import accounting
from continual_synth.mechanisms.errors import InputError, row_label
from continual_synth.mechanisms.record_checks import Problems

__all__ = ["PUBLIC_INPUTS", "RELATIONS", "privacy_fields", "shown", "encode_values", "pivot", "pivot_people",
           "count_scope", "advance_suffix", "window_histograms", "decode_windows"]

#: what a panel release treats as public, by neighbouring relation (the end of every
#: panel manifest's ``privacy_statement``): the horizon and the alphabet are inputs the
#: user gives; under ``replace`` neighbours have the same people, so n is public
PUBLIC_INPUTS = {
    "replace": ("public, not protected: the horizon T, the alphabet and the number of "
                "people n (neighbours under replace have the same n)"),
    "add-remove": "public, not protected: the horizon T and the alphabet",
}

#: what two neighbouring panels differ by, by relation (the manifests' wording)
RELATIONS = {"replace": "replace one person's whole sequence",
             "add-remove": "add or remove one person"}


def privacy_fields(spent: float, rho: float, delta: float, neighbor: str) -> dict:
    """A panel manifest's accounting: ``rho_spent`` (zCDP so far), its (ε, δ) reading
    ``epsilon`` (:func:`~continual_synth.mechanisms.accounting.zcdp_to_approx_dp`, CKS
    2020 Proposition 12) and the ``privacy_statement`` naming the neighbouring relation
    and what is public."""
    epsilon = accounting.zcdp_to_approx_dp(spent, delta) if spent > 0 else 0.0
    return {"rho_spent": spent, "epsilon": epsilon,
            "privacy_statement": (f"{spent:.6g}-zCDP so far (of {rho:.6g}) for neighbouring "
                                  f"panels that {RELATIONS[neighbor]}; this implies ({epsilon:.4g}, "
                                  f"{delta:g})-DP; " + PUBLIC_INPUTS[neighbor])}


def shown(value) -> str:
    """A value for an error message: numpy scalars shown as plain Python values."""
    return repr(value.item() if isinstance(value, np.generic) else value)


#: text that spells a whole number (as ``int`` reads it: a CSV column with one stray word
#: holds its numbers as text)
_WHOLE_NUMBER_TEXT = r"^\s*[+-]?\d+\s*$"


def _whole_numbers(values: np.ndarray, alphabet: Sequence, where: str, first_row: int,
                   problems: Problems) -> np.ndarray:
    """Text values for a numeric alphabet: whole numbers spelled as text (as a CSV column
    with one stray word holds them) become int64; other text is added to ``problems``,
    naming the value and the row (not a comparison of int with str deep in numpy)."""
    try:
        return values.astype(np.int64)
    except (TypeError, ValueError, OverflowError):
        pass
    import pyarrow as pa
    import pyarrow.compute as pc
    text = pa.array(values, from_pandas=True).cast(pa.string())
    spelt = pc.match_substring_regex(text, _WHOLE_NUMBER_TEXT).fill_null(False) \
        .to_numpy(zero_copy_only=False)
    words = ~spelt
    count = int(words.sum())
    problems.add(words, lambda row: (
        f"{where}: value {shown(values[row])} ({row_label(row, first_row)}) is text, but "
        f"the alphabet {list(alphabet)} is numeric; {count} such value(s) (the alphabet "
        f"comes from --alphabet)"),
        lambda row: f"{_column(where)}value {shown(values[row])} is text, but the alphabet "
                    f"{list(alphabet)} is numeric")
    numbers = np.zeros(values.size, dtype=np.int64)
    try:
        numbers[spelt] = values[spelt].astype(np.int64)
    except OverflowError:  # beyond int64: in no alphabet
        numbers[spelt] = np.iinfo(np.int64).min
    return numbers


def _column(where: str) -> str:
    """``"column 'value': "`` of a ``where`` that names one (``"FILE, column 'value'"``)."""
    return where[where.index("column "):] + ": " if "column " in where else ""


def encode_values(values: np.ndarray, alphabet: Sequence, where: str = "input",
                  first_row: int = 0, problems: Optional[Problems] = None) -> np.ndarray:
    """Alphabet indices (int8) of ``values``; a value outside the alphabet is an error
    naming its row (``values[0]`` is the file's record ``first_row``, counted from 0) —
    or, given ``problems`` that drop, added to them (its code is then 0)."""
    values = np.asarray(values)
    problems = Problems(values.size) if problems is None else problems
    numeric = all(isinstance(a, numbers.Number) for a in alphabet)
    if numeric and values.dtype.kind in "OUS":
        values = _whole_numbers(values, alphabet, where, first_row, problems)
    try:
        alphabet_array = np.asarray(list(alphabet), dtype=values.dtype)
    except (TypeError, ValueError):
        alphabet_array = np.asarray([str(a) for a in alphabet])
        values = values.astype(str)
    order = np.argsort(alphabet_array, kind="stable")
    sorted_alphabet = alphabet_array[order]
    position = np.clip(np.searchsorted(sorted_alphabet, values), 0, len(sorted_alphabet) - 1)
    found = sorted_alphabet[position] == values
    if found.all():
        return order[position].astype(np.int8)
    outside = ~found & ~problems.invalid
    count = int(outside.sum())
    problems.add(outside, lambda row: (
        f"{where}: value {shown(values[row])} ({row_label(row, first_row)}) is not in the "
        f"alphabet {list(alphabet)}; {count} value(s) are outside it"),
        lambda row: f"{_column(where)}value {shown(values[row])} is not in the alphabet "
                    f"{list(alphabet)}")
    return np.where(found, order[position], 0).astype(np.int8)


def pivot(ids: np.ndarray, periods: np.ndarray, codes: np.ndarray, first_period: int,
          num_periods: int, missing_code: Optional[int] = None,
          where: str = "input") -> Tuple[np.ndarray, np.ndarray]:
    """``(unique ids, matrix)`` with ``matrix[i, j]`` the code of ids[i] at first_period + j
    (people in id order).

    Errors name the id and period: a period outside the range, an id reporting twice in
    a period, an id missing a period (unless ``missing_code`` fills it).
    """
    unique_ids, person = np.unique(np.asarray(ids), return_inverse=True)
    return unique_ids, pivot_people(unique_ids, person, periods, codes, first_period,
                                    num_periods, missing_code, where)


def pivot_people(people: np.ndarray, person: np.ndarray, periods: np.ndarray,
                 codes: np.ndarray, first_period: int, num_periods: int,
                 missing_code: Optional[int] = None, where: str = "input",
                 scope: str = "in all") -> np.ndarray:
    """:func:`pivot` of records already assigned to people: record r is person
    ``person[r]``, whose id is ``people[person[r]]`` (any order of people, e.g. the
    first-seen order of a hash-based dictionary encoding, which costs O(n) where sorting
    the ids costs O(n log n)).  Returns the len(people) × num_periods matrix.
    ``scope`` says what the counts in an error cover (:func:`count_scope`)."""
    periods = np.asarray(periods, dtype=np.int64)
    offset = periods - first_period
    outside = (offset < 0) | (offset >= num_periods)
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise InputError(f"{where}: period {periods[row]} (id {shown(people[person[row]])}) is "
                         f"outside the expected periods {first_period}.."
                         f"{first_period + num_periods - 1}")
    unique_ids = people
    cell = np.asarray(person).astype(np.int64) * num_periods + offset
    counts = np.bincount(cell, minlength=unique_ids.size * num_periods)
    if (counts > 1).any():
        bad = int(np.flatnonzero(counts > 1)[0])
        raise InputError(f"{where}: id {shown(unique_ids[bad // num_periods])} reports "
                         f"{counts[bad]} times in period {first_period + bad % num_periods}; "
                         f"{int((counts > 1).sum())} duplicate report(s) {scope}")
    matrix = np.empty(unique_ids.size * num_periods, dtype=np.int8)
    if (counts == 0).any():
        if missing_code is None:
            silent = np.flatnonzero((counts.reshape(-1, num_periods) == 0).all(axis=0))
            if silent.size:
                raise InputError(f"{where}: no id reports in period {first_period + silent[0]} "
                                 f"({unique_ids.size} people {scope}): is that period "
                                 f"missing from the input?")
            bad = int(np.flatnonzero(counts == 0)[0])
            raise InputError(f"{where}: id {shown(unique_ids[bad // num_periods])} has no report in "
                             f"period {first_period + bad % num_periods}; "
                             f"{int((counts == 0).sum())} missing report(s) {scope} "
                             f"(pass --missing-value to fill them)")
        matrix[:] = missing_code
    matrix[cell] = codes
    return matrix.reshape(unique_ids.size, num_periods)


def count_scope(num_shards: int) -> str:
    """What the counts in an input error cover: a sharded pipeline checks each shard of
    the ids on its own and stops at the first shard that fails, so its counts are that
    shard's."""
    if num_shards <= 1:
        return "in all"
    return f"in this one of {num_shards} shards of the ids"


def advance_suffix(suffix: np.ndarray, codes: np.ndarray, alphabet_size: int,
                   window: int) -> Tuple[np.ndarray, np.ndarray]:
    """Append one period: ``(window codes ending now, new (k−1)-suffix codes)``.

    ``suffix`` holds each person's last k−1 values (fewer before period k) as a base-|A|
    code; the window code is suffix·|A| + value, meaningful once k periods were seen.
    """
    window_codes = suffix.astype(np.int64) * alphabet_size + codes
    return window_codes, window_codes % (alphabet_size ** (window - 1))


def window_histograms(matrix: np.ndarray, alphabet_size: int, window: int) -> np.ndarray:
    """Histograms C^t for t = k..T: an array (T − k + 1) × |A|^k from a people × T matrix."""
    num_people, horizon = matrix.shape
    bins = alphabet_size ** window
    out = np.zeros((max(horizon - window + 1, 0), bins), dtype=np.int64)
    suffix = np.zeros(num_people, dtype=np.int64)
    for t in range(horizon):
        window_codes, suffix = advance_suffix(suffix, matrix[:, t], alphabet_size, window)
        if t + 1 >= window:
            out[t + 1 - window] = np.bincount(window_codes, minlength=bins)
    return out


def decode_windows(window_codes: np.ndarray, alphabet_size: int, window: int) -> np.ndarray:
    """The k values (alphabet indices, earliest first) of each window code: n × k int8."""
    powers = alphabet_size ** np.arange(window - 1, -1, -1, dtype=np.int64)
    return ((np.asarray(window_codes, dtype=np.int64)[:, None] // powers) % alphabet_size
            ).astype(np.int8)
