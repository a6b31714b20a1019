"""What a release's manifest says about how it was made, and how its numbers print.

Every manifest (whole run or incremental step, every synthesizer) is finished by
:func:`finish_manifest`, the one place that adds

* ``provenance.software``: ``continual-synth <version>`` (the installed distribution's
  version, :mod:`importlib.metadata`);
* ``provenance.created_utc``: when the manifest was written, UTC, ISO 8601
  (``SOURCE_DATE_EPOCH``, the reproducible-builds convention, fixes it if set);
* ``provenance.input_sha256``: SHA-256 of the input's bytes (its data files in listing
  order; independent of the path, so the same data gives the same digest), and for a
  step ``provenance.input_period``, the period that file held;

and the one place that prints floats without binary noise: every float of the document
is rounded to :data:`SIGNIFICANT_DIGITS` significant digits (``rho_spent`` 0.05, not
0.049999999999999996).  The saved state keeps exact floats; only what is printed is
rounded.  The CLI prints its JSON summaries through :func:`tidy_floats` too.
"""
from __future__ import annotations

import datetime
import hashlib
import os
from importlib import metadata
from typing import Any, Dict, Optional

from continual_synth.transforms.files import digest_data_files

SIGNIFICANT_DIGITS = 12
DISTRIBUTION = "continual-synth"


def software_version() -> str:
    """``continual-synth <version>`` of the installed distribution."""
    try:
        return f"{DISTRIBUTION} {metadata.version(DISTRIBUTION)}"
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return f"{DISTRIBUTION} (not installed)"


def created_utc() -> str:
    """Now (or ``SOURCE_DATE_EPOCH``), UTC, ISO 8601 to the second: ``2026-11-23T19:30:00Z``."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
              else datetime.datetime.now(datetime.timezone.utc))
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def input_sha256(path: str) -> str:
    """SHA-256 of the bytes of the input's data files, in listing order."""
    return digest_data_files(hashlib.sha256(), path).hexdigest()


def truth_check(truth_path: str, manifest: Optional[Dict]) -> Dict:
    """``{"truth_is_release_input": bool}`` for a release made in one run from one input
    (its manifest has ``provenance.input_sha256`` and no ``input_period``): whether the
    truth's bytes are that input's.  When they are not, an evaluation may compare the
    release with another panel, so a warning is logged.  ``{}`` for step releases (each
    manifest fingerprints one period's file) and releases without a fingerprint."""
    held = (manifest or {}).get("provenance") or {}
    if "input_sha256" not in held or "input_period" in held:
        return {}
    same = input_sha256(truth_path) == held["input_sha256"]
    if not same:
        from continual_synth.pipelines import logs
        logs.LOGGER.warning(
            "the truth %s is not the input this release was made from (the SHA-256 of its "
            "data files differs from the manifest's input_sha256): unless it is the same "
            "data in another form, this evaluation compares the release with other data",
            truth_path)
    return {"truth_is_release_input": same}


def tidy_floats(document: Any) -> Any:
    """``document`` with every float rounded to :data:`SIGNIFICANT_DIGITS` significant
    digits (dicts, lists and tuples are walked; other values are kept)."""
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


def finish_manifest(manifest: Dict, input_path: Optional[str],
                    input_period: Optional[int] = None,
                    input_digest: Optional[str] = None) -> Dict:
    """``manifest`` with its ``provenance`` block, floats tidied (see the module);
    ``input_digest``: the input's SHA-256 when already known (``input_path`` unread)."""
    provenance = {"software": software_version(), "created_utc": created_utc()}
    if input_digest is not None:
        provenance["input_sha256"] = input_digest
    elif input_path is not None:
        provenance["input_sha256"] = input_sha256(input_path)
    if input_period is not None:
        provenance["input_period"] = int(input_period)
    return tidy_floats({**manifest, "provenance": provenance})
