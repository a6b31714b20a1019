"""Atomic files and release directories.

The file primitives of :mod:`continual_synth.pipelines.release.lifecycle`, on any filesystem
(:mod:`continual_synth.transforms.storage`): JSON documents (manifest, state) are
replaced atomically — locally a temporary file, fsync and rename; on an object store
one ``PUT``, which makes the object appear whole or not at all — so a crash leaves
either the old document or the new one, never a mix; staged data files are moved into
a release directory only once they are complete.  Moving several files is never
atomic on an object store (each is a copy and a delete): a release is complete when
its ``manifest.json`` exists, which is why the manifest is always written last.
"""
from __future__ import annotations

import json
import os
import uuid
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from continual_synth.mechanisms.errors import InputError, StateError
from continual_synth.transforms import packed_json, storage

__all__ = ["json_bytes", "write_json_atomic", "write_summary", "read_json",
           "periods_released", "fsync_directory", "publish_staged_files"]


def _default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def json_bytes(document: Dict) -> bytes:
    """A JSON document as the bytes every writer of this module saves."""
    text = json.dumps(document, indent=2, default=_default, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def write_json_atomic(path: str, document: Dict) -> None:
    """Replace ``path`` by ``document`` atomically."""
    if not storage.is_local(path):
        storage.write_bytes(path, json_bytes(document))  # one PUT: whole or nothing
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(json_bytes(document))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    fsync_directory(directory)


def write_summary(report_dir: str, summary: Dict) -> str:
    """An evaluation's ``summary.json`` in ``report_dir`` (any filesystem), its floats
    tidied as the printed summary's; its path."""
    from continual_synth.pipelines.release.publication import tidy_floats
    path = storage.join(report_dir, "summary.json")
    text = json.dumps(tidy_floats(summary), indent=2, allow_nan=False, ensure_ascii=False)
    storage.write_bytes(path, (text + "\n").encode("utf-8"))
    return path


def read_json(path: str) -> Optional[Dict]:
    if not storage.is_file(path):
        return None
    data = storage.read_bytes(path)
    try:
        return packed_json.loads(data)  # any JSON; a state's packed arrays as lists
    except ValueError as error:  # not JSON, not UTF-8, or a damaged packed array
        raise StateError(f"{path} is not readable JSON ({error}); it was damaged outside "
                         f"continual-synth: restore it from a backup") from None


def periods_released(manifest: Optional[Dict], where: str) -> List[int]:
    """A release manifest's ``periods_released``: the periods released, ascending (``[]``
    without a manifest or before anything was released).  Every manifest lists them; the
    ``tabular`` and ``bounded`` manifests of earlier versions held their number N instead,
    meaning 1..N, and are read so (a release on disk from before still evaluates)."""
    listed = (manifest or {}).get("periods_released")
    if listed is None:
        return []
    if isinstance(listed, int) and not isinstance(listed, bool) and listed >= 0:
        return list(range(1, listed + 1))
    if isinstance(listed, list) and all(isinstance(p, int) and not isinstance(p, bool)
                                        and p >= 1 for p in listed):
        return sorted(set(listed))
    raise InputError(f"{where}: periods_released must be a list of periods or a number of "
                     f"periods, got {listed!r}")


def fsync_directory(directory: str) -> None:
    """Make a local directory's entries durable (nothing to do on an object store)."""
    if not storage.is_local(directory):
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_staged_files(staging_dir: str, output_dir: str,
                         replace_glob: Union[str, Sequence[str], None] = None) -> List[str]:
    """Move the data files written into ``staging_dir`` into ``output_dir`` (same names),
    first removing the files of ``output_dir`` matching ``replace_glob`` (a glob or
    several; an earlier,
    interrupted publication of the same period), then remove the staging directory.
    A staging directory that is gone (another run of the same state cleared it as a
    crashed step's) publishes nothing and removes nothing."""
    if not storage.is_dir(staging_dir):
        raise StateError(f"{staging_dir}: this run's staged release is gone (another step "
                         f"of the same state took over); nothing published")
    globs = [replace_glob] if isinstance(replace_glob, str) else list(replace_glob or ())
    for glob in globs:
        for stale in storage.list_files(output_dir, glob):
            storage.remove(stale)
    staged = [path for path in storage.list_files(staging_dir, "*")
              if not storage.basename(path).startswith(".")]
    moved = []
    for path in staged:
        target = storage.join(output_dir, storage.basename(path))
        storage.rename(path, target)
        moved.append(target)
    fsync_directory(output_dir)
    storage.remove_tree(staging_dir)
    return moved

