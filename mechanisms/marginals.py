"""Categorical domains, marginal workloads and their histograms (Kumar, Strohmer and
Vershynin 2024, §3.3 Definition 3.5 and §7.2 Definition 7.1).

A *domain* 𝒳 = 𝒳_1 × … × 𝒳_p is an ordered mapping from attribute (column) names to the
list of values each may take; it is public knowledge given by the user (``--domain
DOMAIN.json``), never read off the private data.  A missing value is a value like any
other: write ``null`` in the JSON list to allow it.

A *k-way workload* W is a tuple of k attribute names (in domain order); it stands for
the ordered collection of all k-way marginal queries on those attributes, i.e. the
histogram of the records over 𝒳_{c_1} × … × 𝒳_{c_k}, flattened in C (lexicographic)
order.  Each record falls in exactly one cell, so under the paper's event-level
neighbouring relation (add or remove one record) a workload histogram has L1
sensitivity 1, whatever its number of cells (parallel composition, §7.2).

Everything here is numpy / pyarrow on whole columns; nothing loops over records.
"""
from __future__ import annotations

import itertools
import json
import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from continual_synth.mechanisms.errors import InputError, row_label
from continual_synth.mechanisms.record_checks import Problems

__all__ = ["Workload", "MAX_WORKLOADS", "Domain", "all_workloads", "parse_workloads",
           "encode_column", "encode_records", "decode_records", "workload_histogram",
           "workload_histograms"]

Workload = Tuple[str, ...]
MAX_WORKLOADS = 100_000  # every workload is measured and fitted each period


class Domain:
    """The public attribute domain: names in order and each attribute's values."""

    def __init__(self, attributes: Mapping[str, Sequence]):
        if not attributes:
            raise InputError("the domain has no attributes")
        self.values: Dict[str, Tuple] = {}
        for name, values in attributes.items():
            values = tuple(values)
            if len(values) < 1:
                raise InputError(f"domain attribute {name!r} has no values")
            if len(set(values)) != len(values):
                raise InputError(f"domain attribute {name!r} lists a value twice")
            self.values[str(name)] = values
        self.names: Tuple[str, ...] = tuple(self.values)
        self.sizes: Tuple[int, ...] = tuple(len(v) for v in self.values.values())

    @classmethod
    def from_json(cls, text, where: str) -> "Domain":
        """The domain a JSON document (``text``: str or bytes) describes; ``where`` names
        the document in errors (reading it is the caller's:
        :func:`continual_synth.pipelines.families.tabular.read_domain` reads a file on any
        filesystem)."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{where} is not valid JSON: {exc}") from None
        return cls.from_mapping(data, where)

    @classmethod
    def from_mapping(cls, data, where: str) -> "Domain":
        """The domain of a JSON object ``{attribute: [values]}`` (numbers, strings or
        null), checked; ``where`` names it in errors."""
        if not isinstance(data, dict) or not all(
                isinstance(values, list) and all(v is None or isinstance(v, (str, int, float))
                                                 for v in values)
                for values in data.values()):
            raise InputError(f"{where} must be a JSON object mapping each "
                             f"attribute to the list of its values (numbers, strings or "
                             f"null)")
        try:
            return cls(data)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None

    def to_dict(self) -> Dict[str, List]:
        return {name: list(values) for name, values in self.values.items()}

    def size(self, attributes: Sequence[str] = None) -> int:
        """Number of cells of the histogram over ``attributes`` (default: all)."""
        attributes = self.names if attributes is None else attributes
        return math.prod(len(self.values[a]) for a in attributes)

    def index(self, attributes: Sequence[str]) -> List[int]:
        """Positions of ``attributes`` in the domain order."""
        unknown = [a for a in attributes if a not in self.values]
        if unknown:
            raise InputError(f"attribute(s) {unknown} are not in the domain {list(self.names)}")
        return [self.names.index(a) for a in attributes]

    def __eq__(self, other) -> bool:
        return isinstance(other, Domain) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Domain({dict(zip(self.names, self.sizes))})"


def all_workloads(domain: Domain, way: int = 2) -> List[Workload]:
    """All ``way``-way workloads over the domain's attributes, in lexicographic order."""
    have = len(domain.names)
    if way > have:
        choices = "1" if have == 1 else f"1 to {have}"
        raise InputError(f"--marginals {way}: {way}-way workloads need at least {way} "
                         f"attributes, and the domain has {have} ({', '.join(domain.names)}); "
                         f"give --marginals {choices}")
    if way < 1:
        raise InputError(f"--marginals {way}: a workload needs between 1 and {have} "
                         f"attributes")
    count = math.comb(len(domain.names), way)
    if count > MAX_WORKLOADS:
        raise InputError(f"--marginals {way}: {len(domain.names)} attributes make {count:.3g} "
                         f"{way}-way workloads; at most {MAX_WORKLOADS} are supported")
    return [tuple(combo) for combo in itertools.combinations(domain.names, way)]


def parse_workloads(spec: str, domain: Domain) -> List[Workload]:
    """``"2"`` → all 2-way workloads; ``"age,sex;age,income"`` → those two workloads."""
    spec = str(spec).strip()
    if spec.isdigit():
        return all_workloads(domain, int(spec))
    workloads = []
    for part in spec.split(";"):
        names = tuple(name.strip() for name in part.split(",") if name.strip())
        if not names:
            continue
        try:
            positions = domain.index(names)
        except InputError as exc:
            raise InputError(f"--marginals {spec!r}: {exc}") from None
        if len(set(positions)) != len(positions):
            raise InputError(f"--marginals {spec!r}: workload {part!r} repeats an attribute")
        workload = tuple(domain.names[i] for i in sorted(positions))
        if workload not in workloads:
            workloads.append(workload)
    if not workloads:
        raise InputError(f"--marginals {spec!r} names no workload")
    return workloads


_NUMBER = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"  # text that reads as a number


def encode_column(values: pa.Array, domain_values: Sequence, where: str,
                  first_row: int = 0, problems: Optional[Problems] = None) -> np.ndarray:
    """Codes 0..|𝒳_i|−1 of one column; a value outside the domain is an InputError
    naming its row (``values[0]`` is the file's record ``first_row``, counted from 0) —
    or, given ``problems`` that drop, added to them (its code is then 0).  A column whose
    type cannot be compared with the domain's values is refused in either mode."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    problems = Problems(len(values)) if problems is None else problems
    value_set = pa.array(list(domain_values))
    if pa.types.is_null(value_set.type):  # only null allowed
        value_set = pa.array(list(domain_values), type=values.type)
    text_for_numbers = (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)) \
        and (pa.types.is_integer(value_set.type) or pa.types.is_floating(value_set.type))
    try:
        if values.type != value_set.type and not pa.types.is_null(values.type):
            if pa.types.is_string(value_set.type) or pa.types.is_large_string(value_set.type):
                values = pc.cast(values, value_set.type)
            else:
                value_set = pc.cast(value_set, values.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise InputError(f"{where}: column type {values.type} does not match the domain's "
                         f"values {list(domain_values)[:5]}") from None
    codes = pc.index_in(values, value_set=value_set, skip_nulls=False)
    column = where[where.index("column "):] + ": " if "column " in where else ""
    if codes.null_count and text_for_numbers:
        # text where the domain has numbers: a whole CSV column is text when one of its
        # cells is (a lone "NA" makes 4.0 the text '4.0'), so name that cell
        words = pc.invert(pc.match_substring_regex(values, _NUMBER)).fill_null(False) \
            .to_numpy(zero_copy_only=False)
        count = int(words.sum())
        problems.add(words, lambda row: (
            f"{where}: value {values[row].as_py()!r} ({row_label(row, first_row)}) is not "
            f"a number, and the domain's values are {list(domain_values)} (an empty field "
            f"is the missing value); {count} such row(s)"),
            lambda row: f"{column}value {values[row].as_py()!r} is not a number, and the "
                        f"domain's values are {list(domain_values)}")
    if codes.null_count:
        outside = codes.is_null().to_numpy(zero_copy_only=False) & ~problems.invalid
        count = int(outside.sum())
        problems.add(outside, lambda row: (
            f"{where}: value {values[row].as_py()!r} ({row_label(row, first_row)}) is not in "
            f"the domain {list(domain_values)}; {count} such row(s)"),
            lambda row: f"{column}value {values[row].as_py()!r} is not in the domain "
                        f"{list(domain_values)}")
    return codes.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32)


def encode_records(table: pa.Table, domain: Domain, where: str = "input",
                   first_row: int = 0, problems: Optional[Problems] = None) -> np.ndarray:
    """The n × p matrix of attribute codes of ``table``'s rows (columns in domain order;
    ``first_row``, ``problems``: see :func:`encode_column`).  Missing attribute columns
    are refused in either mode."""
    missing = [name for name in domain.names if name not in table.column_names]
    if missing:
        raise InputError(f"{where}: missing attribute column(s) {missing}; "
                         f"the table has {table.column_names}")
    problems = Problems(table.num_rows) if problems is None else problems
    codes = np.empty((table.num_rows, len(domain.names)), dtype=np.int32)
    for j, name in enumerate(domain.names):
        codes[:, j] = encode_column(table.column(name), domain.values[name],
                                    f"{where}, column {name!r}", first_row, problems)
    return codes


def decode_records(codes: np.ndarray, domain: Domain) -> Dict[str, pa.Array]:
    """Attribute columns (values, not codes) of an n × p code matrix."""
    return {name: pa.array(list(domain.values[name])).take(pa.array(codes[:, j]))
            for j, name in enumerate(domain.names)}


def workload_histogram(codes: np.ndarray, domain: Domain, workload: Workload) -> np.ndarray:
    """Counts of the records in every cell of ``workload`` (flattened, C order)."""
    positions = domain.index(workload)
    shape = tuple(domain.sizes[i] for i in positions)
    if codes.shape[0] == 0:
        return np.zeros(int(np.prod(shape)), dtype=np.int64)
    flat = np.ravel_multi_index(tuple(codes[:, i] for i in positions), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).astype(np.int64)


def workload_histograms(codes: np.ndarray, domain: Domain,
                        workloads: Sequence[Workload]) -> List[np.ndarray]:
    """:func:`workload_histogram` for every workload, in order."""
    return [workload_histogram(codes, domain, w) for w in workloads]
