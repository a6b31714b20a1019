"""JSON documents whose numeric arrays are packed: the format of state versions
(``versions/vNNNNNN.json``) and of the fitted model a step hands to its emission.

A state can hold large numeric arrays (the tabular synthesizer's clique marginals reach
10^5 values).  Written as decimal floats with indentation, every value is formatted
and parsed as text, twice per step.  Here every numeric array
(a numpy array, or a rectangular list of numbers) of at least :data:`PACK_MIN` values is
written as::

    {"__array__": "<f8", "shape": [...], "base64": "<the values' bytes, little-endian>"}

which is exact (the bits themselves, not a decimal rendering), about half the size
(a value's 8 bytes take about 11 characters of base64) and faster both ways (one copy of
the buffer, no per-value formatting).  The document is compact JSON (no indentation).  Reading
restores packed arrays as the nested lists the unpacked document would have held, so a
reader sees the same document either way, and documents written before packing (plain
lists) read unchanged.  A list mixing integers and floats comes back as floats (the
values are equal; every reader turns such lists into float arrays), and so would a boolean
inside a list of numbers (no state holds one; lists of booleans stay as they are).
"""
from __future__ import annotations

import base64
import json
from typing import Any, Dict

import numpy as np

__all__ = ["PACK_MIN", "pack", "dumps", "loads"]

#: the smallest array packed (smaller ones stay legible decimal lists)
PACK_MIN = 64
_TAG = "__array__"
_KINDS = {"f": "<f8", "i": "<i8", "u": "<i8"}


def _packed(array: np.ndarray) -> Dict:
    dtype = _KINDS[array.dtype.kind]
    data = np.ascontiguousarray(array, dtype=dtype)
    return {_TAG: dtype, "shape": list(data.shape),
            "base64": base64.b64encode(data.tobytes()).decode("ascii")}


def _numeric(value) -> bool:
    while isinstance(value, list) and value:
        value = value[0]
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def pack(document: Any) -> Any:
    """``document`` with its numeric arrays of at least :data:`PACK_MIN` values packed."""
    if isinstance(document, dict):
        return {key: pack(value) for key, value in document.items()}
    if isinstance(document, np.ndarray):
        if document.dtype.kind in _KINDS and document.size >= PACK_MIN:
            return _packed(document)
        return pack(document.tolist())
    if isinstance(document, (list, tuple)):
        if len(document) and _numeric(document[0]):
            try:
                array = np.asarray(document)
            except (ValueError, OverflowError):  # ragged, or beyond 64-bit integers
                array = None
            if (array is not None and array.dtype.kind in ("f", "i")
                    and array.size >= PACK_MIN):
                return _packed(array)
        return [pack(value) for value in document]
    if isinstance(document, np.integer):
        return int(document)
    if isinstance(document, np.floating):
        return float(document)
    return document


def _unpack(obj: Dict) -> Any:
    if _TAG not in obj:
        return obj
    values = np.frombuffer(base64.b64decode(obj["base64"], validate=True), dtype=obj[_TAG])
    return values.reshape(obj["shape"]).tolist()


def dumps(document: Dict) -> bytes:
    """The bytes of ``document``: compact JSON with its numeric arrays packed."""
    return (json.dumps(pack(document), separators=(",", ":")) + "\n").encode("utf-8")


def loads(data: bytes) -> Dict:
    """The document :func:`dumps` wrote (or any JSON document), arrays as lists."""
    return json.loads(data.decode("utf-8"), object_hook=_unpack)
