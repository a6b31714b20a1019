"""Shared job options: column names, formats, alphabet parsing, Beam options."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import pyarrow as pa
from apache_beam.options.pipeline_options import PipelineOptions

from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.panel import encode_values


@dataclass(frozen=True)
class PanelColumns:
    """Names of the long-format panel's columns."""

    id_col: str = "id"
    period_col: str = "period"
    value_col: str = "value"


def parse_alphabet(text: str) -> Tuple:
    """``"0,1,2"`` → (0, 1, 2); non-numeric values stay strings (``"low,high"``)."""
    items = [item.strip() for item in str(text).split(",") if item.strip() != ""]
    if len(items) < 2:
        raise InputError(f"--alphabet needs at least two comma-separated values, got {text!r}")
    try:
        return tuple(int(item) for item in items)
    except ValueError:
        return tuple(items)


def parse_value(text: Optional[str], alphabet: Sequence):
    """A command-line value (e.g. ``--missing-value``) in the alphabet's type."""
    if text is None:
        return None
    value = int(text) if isinstance(alphabet[0], int) else str(text)
    if value not in alphabet:
        raise InputError(f"value {text!r} is not in the alphabet {list(alphabet)}")
    return value


def missing_code(missing_value, alphabet: Sequence) -> Optional[int]:
    """Alphabet index that fills missing reports, or None (missing reports are errors)."""
    if missing_value is None:
        return None
    return int(encode_values([missing_value], alphabet, where="--missing-value")[0])


def value_type(alphabet: Sequence) -> pa.DataType:
    return pa.int64() if isinstance(alphabet[0], int) else pa.string()


def record_schema(alphabet: Sequence) -> pa.Schema:
    """Schema of released synthetic records."""
    return pa.schema([pa.field("synthetic_id", pa.int64(), nullable=False),
                      pa.field("period", pa.int32(), nullable=False),
                      pa.field("value", value_type(alphabet), nullable=False)])


def pipeline_options(beam_args: Sequence[str] = ()) -> PipelineOptions:
    """Beam options from the remaining command-line arguments (DirectRunner by default)."""
    return PipelineOptions(list(beam_args))
