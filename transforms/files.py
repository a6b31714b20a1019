"""Reading and writing whole files of records as Arrow tables.

Used by the Beam read/write stages (one file or one batch at a time) and by the
driver-side jobs that read small things (a truth panel for evaluation, a period
file).  Formats: Parquet (pyarrow), CSV (pyarrow.csv) and Avro (fastavro).  Paths
are local or URLs of any filesystem Beam knows: files are listed, opened and created
through :mod:`continual_synth.transforms.storage` (Beam's ``FileSystems``), and the
readers decode the file objects it opens.
"""
from __future__ import annotations

import collections
import json
import os
import re
from typing import Iterable, List, Optional, Sequence, Tuple

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from continual_synth.mechanisms.errors import InputError, row_label  # noqa: F401  (InputError re-exported)
from continual_synth.transforms import storage

__all__ = ["FORMATS", "PARQUET_DICTIONARY_PAGE_BYTES", "check_format", "detect_format",
           "list_data_files", "digest_data_files", "read_file", "has_records",
           "avro_header_columns", "FLAT_COLUMNS", "arrow_columns", "avro_columns",
           "check_columns", "parquet_footer", "check_same_types", "count_records",
           "parquet_row_groups", "read_row_group", "with_origin", "table_origin",
           "first_null", "check_dataset", "avro_bytes_to_table", "release_file_names",
           "ACCURACY_FILE_PREFIX", "accuracy_file_name", "accuracy_file_names",
           "release_files", "read_release", "read_files", "read_dataset", "avro_schema",
           "write_file", "write_parquet", "records"]

FORMATS = ("parquet", "csv", "avro")
# Parquet's dictionary page limit per column chunk.  A column with more distinct values
# than fit falls back to plain encoding, which every reader reads: the writer then stops
# hashing its values.  pyarrow's default (1 MiB: 131 072 distinct int64) hashes every
# synthetic id of a 250 000-person shard file before falling back, most of the file's
# write time; at 64 KiB (8 192 int64) the id column falls back early, the file is smaller,
# and columns with fewer distinct values (periods, categories, codes) stay
# dictionary-encoded (the limit: bench/results/perf_orders_2m.md).
PARQUET_DICTIONARY_PAGE_BYTES = 1 << 16
_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".avro": "avro"}


def check_format(fmt: str) -> str:
    """``fmt`` if it is one of :data:`FORMATS`; else a clear error."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def detect_format(path: str, fmt: Optional[str] = None) -> str:
    """The format named by ``fmt``, else the one the file extension names (a FIFO, a
    device or a broken symbolic link is refused first: :func:`list_data_files`)."""
    storage.check_not_special(path)
    if fmt:
        return check_format(fmt)
    ext = os.path.splitext(path.rstrip("/"))[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if storage.is_dir(path):
        found = {detect_format(p) for p in list_data_files(path)}
        if len(found) == 1:
            return found.pop()
        if not found:
            raise InputError(f"{path}: no .parquet, .csv or .avro files in this directory")
        raise InputError(f"{path}: mixes formats {sorted(found)}; pass --input-format "
                         f"(and keep one format per dataset)")
    raise InputError(f"{path}: cannot tell the format from the extension; pass "
                     f"--input-format")


def list_data_files(path: str) -> List[str]:
    """Data files of a dataset: ``path`` itself, or the data files under a directory.

    Hidden and underscore-prefixed entries (staging areas, Beam temp dirs) and
    ``manifest.json`` are skipped.  A local FIFO, device or socket, and a symbolic link
    that loops or points nowhere, given as ``path`` or as a data file in its folder, is
    refused naming it and what it is (:func:`~continual_synth.transforms.storage.
    not_a_file`), never opened: reading a FIFO waits for a writer, and a broken link would
    otherwise drop out of the listing silently.
    """
    storage.check_not_special(path)
    if storage.is_file(path):
        return [path]
    if not storage.is_dir(path):
        raise InputError(f"{path}: no such file or directory")
    for special, reason in storage.special_files(path).items():
        if _is_data_file(path, special):
            raise InputError(f"{special} {reason}")
    return [file_path for file_path in storage.list_files(path)
            if _is_data_file(path, file_path)]


def _is_data_file(directory: str, file_path: str) -> bool:
    """Whether ``file_path``, under ``directory``, is one of its data files: a data file
    extension, and no hidden or underscore-prefixed folder or name on the way."""
    parts = storage.relative_parts(directory, file_path)
    return (not any(part.startswith((".", "_")) for part in parts)
            and os.path.splitext(parts[-1])[1].lower() in _EXTENSIONS)


def digest_data_files(digest, path: str):
    """Feed the bytes of ``path``'s data files, in listing order, into the hashlib
    ``digest`` and return it (the one rule for an input's content digest)."""
    for file_path in list_data_files(path):
        with storage.open_read(file_path) as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest


def read_file(path: str, fmt: Optional[str] = None,
              string_columns: Sequence[str] = (),
              columns: Optional[Sequence[str]] = ()) -> pa.Table:
    """One data file as an Arrow table.  CSV: only an empty field is a missing value (as
    pyarrow writes nulls; "NA", "null" or "NaN" are values like any other), and
    ``string_columns`` are read as text (a category "02" stays "02", not the number 2).
    A file that names a column twice is refused, and so is one whose ``columns`` (the
    ones the caller reads; None: every column) hold nested values
    (:func:`check_columns`)."""
    fmt = detect_format(path, fmt)
    try:
        with storage.open_read(path) as handle:
            if fmt == "avro":  # checked before decoding: records are dicts, one per name
                return avro_bytes_to_table(handle, path, columns)
            if fmt == "parquet":  # checked from the footer: a read fails on a repeated name
                parquet = pq.ParquetFile(handle)
                check_columns(path, arrow_columns(parquet.schema_arrow), columns)
                return parquet.read()
            return _read_csv_file(path, handle, string_columns, columns)
    except InputError:
        raise
    except Exception as exc:  # pyarrow / fastavro parse errors name no file
        message = _not_utf8(path, string_columns, exc) if fmt == "csv" else None
        raise InputError(message or _unreadable(path, fmt, exc)) from exc


def _read_csv_file(path: str, handle, string_columns: Sequence[str],
                   columns: Optional[Sequence[str]] = ()) -> pa.Table:
    """The CSV file ``path`` (open as ``handle``) as :func:`read_file` reads it."""
    types = {name: pa.string() for name in string_columns}
    table = _read_csv(handle, types)
    check_columns(path, arrow_columns(table.schema), columns)  # a header not UTF-8 fails here
    wide = _whole_numbers_beyond_int64(table)
    if not wide:
        return table
    with storage.open_read(path) as again:  # those columns again, as text
        text = _read_csv(again, {**types, **{name: pa.string() for name in wide}})
    for name in wide:  # kept as text if written as whole numbers ("1e20" is a float)
        if pc.all(pc.match_substring_regex(text[name], r"^\s*[+-]?\d+\s*$")).as_py() is not False:
            table = table.set_column(table.column_names.index(name), name, text[name])
    return table


def _read_csv(handle, column_types) -> pa.Table:
    """A CSV file object as a table: only an empty field is a missing value."""
    return pacsv.read_csv(handle, convert_options=pacsv.ConvertOptions(
        strings_can_be_null=True, null_values=[""], column_types=column_types))


def _whole_numbers_beyond_int64(table: pa.Table) -> List[str]:
    """The columns of a CSV table that pyarrow read as floats although they hold only
    whole numbers, some beyond int64 (an id 10**20 + 1): as floats they would be rounded
    (two ids, one number), so they are read as text instead, exactly (a column that also
    holds "1.5" or "2.0" or "1e20" stays a float column)."""
    wide = []
    for name, column in zip(table.column_names, table.columns):
        if not pa.types.is_floating(column.type) or column.null_count == len(column):
            continue
        values = column.to_numpy(zero_copy_only=False)
        values = values[np.isfinite(values)]
        if values.size and np.abs(values).max() >= 2.0 ** 63 and (values == np.floor(values)).all():
            wide.append(name)
    return wide


_NOT_UTF8 = re.compile(r"In CSV column #(\d+): CSV conversion error to string: invalid UTF8")


def _not_utf8(path: str, string_columns: Sequence[str], exc: Exception) -> Optional[str]:
    """The message for a text column of a CSV file holding bytes that are not UTF-8,
    naming the column and the row (pyarrow names the column by its position only), or
    None for another error."""
    match = _NOT_UTF8.search(str(exc))
    if not match:
        return None
    try:
        with storage.open_read(path) as handle:  # the text columns as bytes, to find the row
            table = _read_csv(handle, {name: pa.binary() for name in string_columns})
        name = table.column_names[int(match.group(1))]
        for row, value in enumerate(table.column(name).to_pylist()):
            if value is not None:
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    return (f"{path}: cannot read as csv: column {name!r} holds text that "
                            f"is not UTF-8 at {row_label(row)} (save the file as UTF-8)")
    except Exception:  # noqa: BLE001 — the original error is reported instead
        return None
    return None


def _unreadable(path: str, fmt: str, exc: Exception) -> str:
    """The message for a data file pyarrow or fastavro cannot read (their errors name no
    file)."""
    if fmt == "csv" and isinstance(exc, UnicodeDecodeError):
        return f"{path}: cannot read as csv: its header is not UTF-8 text ({exc})"
    return f"{path}: cannot read as {fmt}: {exc}"


def has_records(path: str, fmt: str) -> bool:
    """Whether one data file holds at least one record, from its Parquet footer or its
    first CSV block / Avro record; an :class:`InputError` naming the file if it cannot be
    read (an empty or truncated file, a CSV row with the wrong number of fields …) or
    names a column twice (:func:`check_columns`)."""
    if fmt == "parquet":
        return parquet_footer(path)[0] > 0
    _check_not_empty(path, fmt)
    try:
        with storage.open_read(path) as handle:
            if fmt == "csv":
                reader = pacsv.open_csv(handle)
                # a header that is not UTF-8 fails here
                check_columns(path, arrow_columns(reader.schema))
                return any(batch.num_rows for batch in reader)
            reader = fastavro.reader(handle)
            check_columns(path, avro_columns(reader.writer_schema))
            return next(iter(reader), None) is not None
    except InputError:
        raise
    except Exception as exc:  # pyarrow / fastavro errors name no file
        raise InputError(_unreadable(path, fmt, exc)) from exc


def avro_header_columns(path: str) -> List[Tuple[str, Optional[str]]]:
    """The columns of one Avro file (:func:`avro_columns`), from its header alone."""
    _check_not_empty(path, "avro")
    try:
        with storage.open_read(path) as handle:
            return avro_columns(fastavro.reader(handle).writer_schema)
    except Exception as exc:  # fastavro errors name no file
        raise InputError(_unreadable(path, "avro", exc)) from exc


# What the columns a job reads hold (ids, periods, values, tabular attributes, point
# coordinates): one value per cell.  A struct, list or map column would reach the
# pipeline's stages as Python dicts and lists (an id column of structs fails when a shard
# sorts its ids) or be taken for text.
FLAT_COLUMNS = "ids, periods, values and attributes are flat: a number or a text"


def _nested(data_type: pa.DataType) -> bool:
    """Whether an Arrow type holds more than one value per cell: a struct, list, map or
    union, or a dictionary, run-end encoded or extension type over one."""
    if pa.types.is_dictionary(data_type) or pa.types.is_run_end_encoded(data_type):
        return _nested(data_type.value_type)
    if isinstance(data_type, pa.BaseExtensionType):
        return _nested(data_type.storage_type)
    return pa.types.is_nested(data_type)


def arrow_columns(schema: pa.Schema) -> List[Tuple[str, Optional[str]]]:
    """``(name, its type if nested, else None)`` for each field of an Arrow schema, in
    order (a repeated name appears as often as the schema holds it)."""
    return [(field.name, str(field.type) if _nested(field.type) else None)
            for field in schema]


_AVRO_PRIMITIVE = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_AVRO_NAMED = {"record", "error", "enum", "fixed"}


def avro_columns(writer_schema: dict) -> List[Tuple[str, Optional[str]]]:
    """:func:`arrow_columns` of an Avro record schema: a field is nested if its type is a
    record, an array or a map, or a union or named reference holding one (an enum, a
    fixed, a logical type over a primitive and a union such as ``["null", "long"]`` are
    flat)."""
    named: dict = {}
    _avro_named_types(writer_schema, named, None)
    return [(field["name"], _avro_nested(field["type"], named))
            for field in writer_schema.get("fields", ())]


def _avro_named_types(avro_type, named: dict, namespace: Optional[str]) -> None:
    """Record in ``named`` (full and short name → definition) every named type that
    ``avro_type`` defines, however deep (a field may refer to one by name later)."""
    if isinstance(avro_type, list):
        for branch in avro_type:
            _avro_named_types(branch, named, namespace)
    if not isinstance(avro_type, dict):
        return
    kind = avro_type.get("type")
    if kind in _AVRO_NAMED and "name" in avro_type:
        name = avro_type["name"]
        namespace = avro_type.get("namespace", namespace)
        named[name] = named[name.rsplit(".", 1)[-1]] = avro_type
        if namespace and "." not in name:
            named[f"{namespace}.{name}"] = avro_type
    for field in avro_type.get("fields", ()) if kind in ("record", "error") else ():
        _avro_named_types(field.get("type"), named, namespace)
    for key in ("items", "values"):
        if key in avro_type:
            _avro_named_types(avro_type[key], named, namespace)
    if isinstance(kind, (dict, list)):
        _avro_named_types(kind, named, namespace)


def _avro_nested(avro_type, named: dict) -> Optional[str]:
    """The description of an Avro type holding more than one value per record (``record
    Address``, ``array<long>``, ``map<string>``), or None for a flat one."""
    if isinstance(avro_type, list):  # a union: nested if any branch is
        return next(filter(None, (_avro_nested(branch, named) for branch in avro_type)),
                    None)
    if isinstance(avro_type, str):
        if avro_type in _AVRO_PRIMITIVE:
            return None
        definition = named.get(avro_type)
        return avro_type if definition is None else _avro_nested(definition, named)
    if not isinstance(avro_type, dict):
        return None
    kind = avro_type.get("type")
    if kind in ("record", "error"):
        return f"record {avro_type.get('name', '')}".strip()
    if kind == "array":
        return f"array<{_avro_name(avro_type.get('items'))}>"
    if kind == "map":
        return f"map<{_avro_name(avro_type.get('values'))}>"
    if kind in ("enum", "fixed"):
        return None
    return _avro_nested(kind, named)  # {"type": "long", "logicalType": …} and the like


def _avro_name(avro_type) -> str:
    """A short name of an Avro type, for a message."""
    if isinstance(avro_type, dict):
        return str(avro_type.get("name") or avro_type.get("type"))
    if isinstance(avro_type, list):
        return "|".join(_avro_name(branch) for branch in avro_type)
    return str(avro_type)


def check_columns(path: str, columns: Sequence[Tuple[str, Optional[str]]],
                  read: Optional[Sequence[str]] = ()) -> None:
    """Refuse the file ``path`` whose ``columns`` (``(name, nested type or None)``:
    :func:`arrow_columns`, :func:`avro_columns`) name one column twice, whichever it is
    (a table cannot tell the two apart), or whose columns in ``read`` (the ones a job
    reads; None: every column) hold nested values (:data:`FLAT_COLUMNS`)."""
    counts = collections.Counter(name for name, _ in columns)
    for name, _ in columns:
        if counts[name] > 1:
            raise InputError(f"{path}: column name {name!r} appears {counts[name]} times; "
                             f"each column needs a name of its own")
    for name, nested in columns:
        if nested and (read is None or name in read):
            raise InputError(f"{path}: column {name!r} holds {nested} values; "
                             f"{FLAT_COLUMNS}")


def _check_not_empty(path: str, fmt: str) -> None:
    if storage.size(path) == 0:
        raise InputError(f"{path}: the file is empty (0 bytes), not a {fmt} file")


def parquet_footer(path: str) -> Tuple[int, pa.Schema]:
    """``(records, Arrow schema)`` of one Parquet file, from its footer; an
    :class:`InputError` naming the file if it cannot be read."""
    _check_not_empty(path, "parquet")
    try:
        with storage.open_read(path) as handle:
            parquet = pq.ParquetFile(handle)
            return parquet.metadata.num_rows, parquet.schema_arrow
    except Exception as exc:  # pyarrow errors name no file
        raise InputError(_unreadable(path, "parquet", exc)) from exc


# How the files of one dataset may differ in a column's type: a wider number (int32 and
# int64 parts, ints and floats) or a longer string type is the same column; text in one
# file and numbers in another is not (one person's id 17 and "17" are two people).
_PROMOTE = "permissive"


def check_same_types(schemas: Sequence[Tuple[str, pa.Schema]]) -> None:
    """Refuse data files of one dataset (``(path, schema)`` pairs) whose columns' types
    cannot be merged (:data:`_PROMOTE`), naming the two files, the column and the two
    types (pyarrow names neither file)."""
    try:
        pa.unify_schemas([schema for _, schema in schemas], promote_options=_PROMOTE)
        return
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        pass
    seen = {}  # column -> (first file, its field merged with the later ones)
    for path, schema in schemas:
        for field in schema:
            first_path, merged = seen.setdefault(field.name, (path, field))
            try:
                merged = pa.unify_schemas([pa.schema([merged]), pa.schema([field])],
                                          promote_options=_PROMOTE).field(0)
            except (pa.ArrowTypeError, pa.ArrowInvalid):
                raise InputError(
                    f"{path}: column {field.name!r} has type {field.type} but "
                    f"{first_path} has it as {merged.type}; the files of one dataset must "
                    f"agree on each column's type") from None
            seen[field.name] = (first_path, merged)


def count_records(path: str, fmt: Optional[str] = None) -> Optional[int]:
    """How many records one data file holds (a Parquet footer's count; a CSV or Avro
    file read whole), or None if it cannot be read as ``fmt``."""
    try:
        fmt = detect_format(path, fmt)
        if fmt == "parquet":
            with storage.open_read(path) as handle:
                return pq.ParquetFile(handle).metadata.num_rows
        return read_file(path, fmt).num_rows
    except Exception:  # an unreadable file holds no records anyone could count
        return None


def parquet_row_groups(path: str) -> int:
    """The number of row groups of a Parquet file (from its footer)."""
    try:
        with storage.open_read(path) as handle:
            return pq.ParquetFile(handle).num_row_groups
    except Exception as exc:  # pyarrow errors name no file
        raise InputError(f"{path}: cannot read as parquet: {exc}") from exc


def read_row_group(path: str, group: int) -> pa.Table:
    """Row group ``group`` of a Parquet file as an Arrow table, with its origin (the
    file and the row where the group starts, :func:`with_origin`)."""
    try:
        with storage.open_read(path) as handle:
            parquet = pq.ParquetFile(handle)
            first_row = sum(parquet.metadata.row_group(g).num_rows for g in range(group))
            return with_origin(parquet.read_row_group(group), path, first_row)
    except Exception as exc:  # a corrupt page behind a valid footer
        raise InputError(f"{path}: cannot read row group {group} as parquet: {exc}") from exc


_ORIGIN_PATH, _ORIGIN_ROW = b"continual_synth.origin.path", b"continual_synth.origin.first_row"


def with_origin(table: pa.Table, path: str, first_row: int = 0) -> pa.Table:
    """``table`` marked (in its schema's metadata) as the records of file ``path`` from
    its record ``first_row`` (counted from 0) on, so that a bad record found later in
    the pipeline is reported by file and row (:func:`table_origin`)."""
    metadata = {**(table.schema.metadata or {}), _ORIGIN_PATH: path.encode(),
                _ORIGIN_ROW: str(int(first_row)).encode()}
    return table.replace_schema_metadata(metadata)


def table_origin(table: pa.Table, where: str) -> Tuple[str, int]:
    """``(file, first row)`` of a batch marked by :func:`with_origin`; ``(where, 0)``
    for any other table."""
    metadata = table.schema.metadata or {}
    if _ORIGIN_PATH not in metadata:
        return where, 0
    return metadata[_ORIGIN_PATH].decode(), int(metadata[_ORIGIN_ROW])


def first_null(column) -> int:
    """The position of the first empty value of an Arrow column that has one."""
    return int(column.is_null().to_numpy(zero_copy_only=False).argmax())


def check_dataset(path: str, fmt: Optional[str] = None, allow_empty: bool = False,
                  columns: Optional[Sequence[str]] = ()) -> List[str]:
    """The data files of ``path`` (see :func:`list_data_files`) after checking, on the
    driver and before any pipeline runs, that together they hold at least one record (a
    header-only CSV or a 0-row Parquet file holds none; ``allow_empty``: a period with no
    records is valid input, as for continual PrivHP's points).  Every Parquet footer is
    read (cheap, and Beam's Parquet reader would not name a broken file), and the files
    must agree on their columns' types (:func:`check_same_types`); every Avro header is
    read; CSV files are opened until one holds a record (:func:`read_file` names a broken
    one later).  No schema read may name a column twice, nor give a nested type to one of
    ``columns``, the columns the job reads (None: every column; :func:`check_columns`):
    a CSV header is checked where the file is opened, here or by :func:`read_file`."""
    files = list_data_files(path)
    if not files:
        raise InputError(f"{path}: no .parquet, .csv or .avro files found")
    fmt = detect_format(path, fmt)
    if fmt == "parquet":
        footers = [parquet_footer(file_path) for file_path in files]  # names a broken file
        schemas = [(file_path, schema) for file_path, (_, schema) in zip(files, footers)]
        for file_path, schema in schemas:
            check_columns(file_path, arrow_columns(schema), columns)
        check_same_types(schemas)
        holds_records = any(records for records, _ in footers)
    else:
        if fmt == "avro":
            for file_path in files:
                check_columns(file_path, avro_header_columns(file_path), columns)
        holds_records = allow_empty or any(has_records(file_path, fmt) for file_path in files)
    if not (allow_empty or holds_records):
        raise InputError(f"{path}: holds no records (only headers or empty tables)")
    return files


def avro_bytes_to_table(handle, where: str = "avro input",
                        columns: Optional[Sequence[str]] = ()) -> pa.Table:
    """Decode an Avro container (file object) into columns with fastavro, after
    :func:`check_columns` of its schema (``where``: the file, for the message)."""
    reader = fastavro.reader(handle)
    check_columns(where, avro_columns(reader.writer_schema), columns)
    fields = [f["name"] for f in reader.writer_schema["fields"]]
    columns = {name: [] for name in fields}
    for record in reader:
        for name in fields:
            columns[name].append(record[name])
    return pa.table(columns)


def release_file_names(directory: str) -> List[str]:
    """The data files of a release directory, as names relative to it, sorted: what its
    manifest lists (``files``) when it is published (none in an object-store prefix that
    holds nothing yet)."""
    if not storage.is_dir(directory):
        return []
    return sorted("/".join(storage.relative_parts(directory, path))
                  for path in list_data_files(directory))


#: the names of a release's accuracy files (``accuracy-t0001.json``: a tabular release's
#: error bounds per period), which sit beside its data files and are not data files
ACCURACY_FILE_PREFIX = "accuracy-"


def accuracy_file_name(period: int) -> str:
    """The accuracy file of period ``period``'s release."""
    return f"{ACCURACY_FILE_PREFIX}t{int(period):04d}.json"


def accuracy_file_names(directory: str) -> List[str]:
    """The accuracy files of a release directory, as names, sorted (the manifest's
    ``accuracy_files``)."""
    if not storage.is_dir(directory):
        return []
    return sorted(storage.basename(path) for path in
                  storage.list_files(directory, f"{ACCURACY_FILE_PREFIX}t*.json"))


def release_files(directory: str) -> List[str]:
    """The data files of a release directory that its ``manifest.json`` lists: written
    last, the manifest leaves out files that an interrupted publication put in place
    before it (a killed step's next period).  Without a manifest, or with one written
    before manifests listed their files: every data file."""
    manifest_path = storage.join(directory, "manifest.json")
    names = None
    if storage.is_file(manifest_path):
        manifest = json.loads(storage.read_bytes(manifest_path).decode("utf-8"))
        names = manifest.get("files") if isinstance(manifest, dict) else None
    if names is None:
        return list_data_files(directory)
    return [storage.join(directory, name) for name in names]


def read_release(directory: str) -> pa.Table:
    """The records of a published release (:func:`release_files`); a directory without
    ``manifest.json`` holds no published release."""
    if not storage.is_file(storage.join(directory, "manifest.json")):
        raise InputError(f"{directory}: no manifest.json, so no published release (an "
                         f"interrupted publication, or not a release directory)")
    files = release_files(directory)
    if not files:
        raise InputError(f"{directory}: the release holds no records yet")
    return read_files(files)


def read_files(paths: Sequence[str], fmt: Optional[str] = None,
               columns: Optional[Sequence[str]] = ()) -> pa.Table:
    """The data files ``paths`` (at least one) concatenated into one table
    (``columns``: see :func:`read_file`)."""
    tables = [read_file(path, fmt, columns=columns) for path in paths]
    if len(tables) == 1:
        return tables[0]
    check_same_types([(path, table.schema) for path, table in zip(paths, tables)])
    return pa.concat_tables(tables, promote_options=_PROMOTE)


def read_dataset(path: str, fmt: Optional[str] = None,
                 columns: Optional[Sequence[str]] = ()) -> pa.Table:
    """All data files of a file or directory, concatenated into one table (``columns``:
    the ones the caller reads, which must be flat; see :func:`read_file`)."""
    files = list_data_files(path)
    if not files:
        raise InputError(f"{path}: no .parquet, .csv or .avro files found")
    return read_files(files, fmt, columns)


def avro_schema(table_schema: pa.Schema) -> dict:
    """An Avro record schema for a flat Arrow schema of ints, floats and strings; a
    nullable Arrow field becomes the union ``["null", type]`` (so missing values, e.g. a
    domain value ``null``, round-trip)."""
    fields = []
    for field in table_schema:
        if pa.types.is_integer(field.type):
            kind = "int" if field.type.bit_width <= 32 and field.type != pa.uint32() else "long"
        elif pa.types.is_floating(field.type):
            kind = "double"
        elif pa.types.is_boolean(field.type):
            kind = "boolean"
        else:
            kind = "string"
        fields.append({"name": field.name, "type": ["null", kind] if field.nullable else kind})
    return {"type": "record", "name": "Record", "fields": fields}


def write_file(table: pa.Table, path: str, fmt: str) -> None:
    """Write one table to one file (directories created as needed)."""
    fmt = detect_format(path, fmt)
    with storage.create(path) as handle:
        if fmt == "parquet":
            write_parquet(table, handle)
        elif fmt == "csv":
            pacsv.write_csv(table, handle)
        else:
            fastavro.writer(handle, avro_schema(table.schema), records(table))


def write_parquet(table: pa.Table, handle) -> None:
    """Write ``table`` to an open binary file as Parquet, with the project's one encoding
    rule (:data:`PARQUET_DICTIONARY_PAGE_BYTES`)."""
    pq.write_table(table, handle, dictionary_pagesize_limit=PARQUET_DICTIONARY_PAGE_BYTES)


def records(table: pa.Table) -> Iterable[dict]:
    """A table's rows as dicts (what fastavro writes)."""
    for batch in table.to_batches():
        yield from batch.to_pylist()
