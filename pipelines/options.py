"""Shared job options: column names, formats, alphabet parsing, argument types that
refuse bad numbers and paths, Beam options."""
from __future__ import annotations

import argparse
import difflib
import os
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

import pyarrow as pa
from apache_beam.options.pipeline_options import PipelineOptions

from continual_synth.mechanisms.errors import (InputError, ParameterError, positive_real,
                                               whole_number)
from continual_synth.mechanisms.panel import encode_values


@dataclass(frozen=True)
class PanelColumns:
    """Names of the long-format panel's columns."""

    id_col: str = "id"
    period_col: str = "period"
    value_col: str = "value"

    def __post_init__(self):
        names = (self.id_col, self.period_col, self.value_col)
        if len(set(names)) != 3 or not all(names):
            raise InputError(f"--id-col, --period-col and --value-col must name three "
                             f"different columns, got {list(names)}")


def argument_type(rule: Callable, parse: Callable = int, **limits) -> Callable[[str], object]:
    """An argparse ``type``: parse the text, then apply one of the rules of
    :mod:`continual_synth.mechanisms.errors`; argparse names the option in the message
    (``argument --shards: must be an integer >= 1, got 0``) and exits with status 2."""
    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            kind = "an integer" if parse is int else "a number"
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}") from None
        try:
            return rule("value", value, **limits)
        except ParameterError as exc:
            raise argparse.ArgumentTypeError(exc.problem) from None
    convert.__name__ = rule.__name__
    return convert


POSITIVE_INT = argument_type(whole_number)  # shards, periods, samples per shard …
NON_NEGATIVE_INT = argument_type(whole_number, minimum=0)  # seeds, counts that may be 0
POSITIVE_REAL = argument_type(positive_real, parse=float)  # public guesses such as --expected-n


def check_directory_options(args: argparse.Namespace,
                            names: Sequence[str] = ("output", "state", "report")) -> None:
    """Refuse an ``--output`` / ``--state`` / ``--report`` that could not be a directory
    written by this job (it, or the nearest folder above it that exists, is a file or is
    not writable), before anything is read or written.  A URL (``s3://…``) is left to
    its store, which refuses a write it does not allow."""
    from continual_synth.transforms.storage import is_local
    for name in names:
        path = getattr(args, name, None)
        if path is None or not is_local(path):
            continue
        existing = os.path.abspath(path)
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise InputError(f"--{name} {path}: {existing} is a file, not a directory")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise InputError(f"--{name} {path}: {existing} is not writable")


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
    try:
        value = int(text) if isinstance(alphabet[0], int) else str(text)
    except ValueError:
        raise InputError(f"--missing-value {text!r} is not in the alphabet "
                         f"{list(alphabet)}") from None
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


def check_beam_args(beam_args: Sequence[str], command: str,
                    command_options: Sequence[str] = ()) -> None:
    """Refuse arguments that neither the command nor Beam knows (``--rh0``, or an option
    of another command such as ``--alphabet`` for ``cumulative``), which Beam would
    otherwise discard with a warning while the job runs without them; name the closest
    valid option (``--neighbour`` → ``--neighbor``)."""
    if not beam_args:
        return
    if any("dask" in arg.lower() for arg in beam_args):  # registers Beam's DaskOptions
        try:
            import apache_beam.runners.dask.dask_runner  # noqa: F401
        except ImportError:
            pass
    options = PipelineOptions(list(beam_args))
    unknown = sorted(set(options.get_all_options(retain_unknown_options=True))
                     - set(options.get_all_options()))
    if unknown:
        valid = list(command_options) + ["--" + name for name in options.get_all_options()]
        hints = []
        for name in unknown:
            close = difflib.get_close_matches("--" + name, valid, n=1, cutoff=0.75)
            if close:
                hints.append(f"--{name}: did you mean {close[0]}?")
        raise InputError(f"unrecognised option(s) {', '.join('--' + u for u in unknown)}: "
                         f"not an option of '{command}' (see --help) nor of Apache Beam"
                         + (f" ({'; '.join(hints)})" if hints else ""))


def pipeline_options(beam_args: Sequence[str] = ()) -> PipelineOptions:
    """Beam options from the remaining command-line arguments (DirectRunner by default)."""
    return PipelineOptions(list(beam_args))
