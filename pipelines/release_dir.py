"""Atomic files and release directories.

The file primitives of :mod:`continual_synth.pipelines.lifecycle`: JSON documents
(manifest, state) are replaced atomically (temporary file, fsync, rename), so a crash
leaves either the old document or the new one, never a mix; staged data files are
moved into a release directory only once they are complete.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import uuid
from typing import Dict, List, Optional

import numpy as np

from continual_synth.mechanisms.errors import StateError


def _default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def write_json_atomic(path: str, document: Dict) -> None:
    """Replace ``path`` by ``document`` atomically."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, default=_default)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    fsync_directory(directory)


def read_json(path: str) -> Optional[Dict]:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise StateError(f"{path} is not readable JSON ({error}); it was damaged outside "
                             f"continual-synth: restore it from a backup") from None


def fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_staged_files(staging_dir: str, output_dir: str, replace_glob: Optional[str] = None
                         ) -> List[str]:
    """Move the data files written into ``staging_dir`` into ``output_dir`` (same names),
    first removing the files of ``output_dir`` matching ``replace_glob`` (an earlier,
    interrupted publication of the same period), then remove the staging directory."""
    if replace_glob:
        for stale in glob.glob(os.path.join(output_dir, replace_glob)):
            os.remove(stale)
    staged = sorted(p for p in glob.glob(os.path.join(staging_dir, "*"))
                    if os.path.isfile(p) and not os.path.basename(p).startswith("."))
    moved = []
    for path in staged:
        target = os.path.join(output_dir, os.path.basename(path))
        os.replace(path, target)
        moved.append(target)
    fsync_directory(output_dir)
    shutil.rmtree(staging_dir, ignore_errors=True)
    return moved

