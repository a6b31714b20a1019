"""Paths on any filesystem, through Beam's ``FileSystems``.

Every read, listing, write, move and removal of the jobs goes through these few
helpers, so a path may be local or a URL of any filesystem Beam knows (``gs://``,
``s3://``, ``hdfs://`` …); nothing here creates a local folder for a URL.  Object
stores have no directories: a "directory" is a prefix (``s3://bucket/out/``), which
exists while it holds an object.

Beam's S3 and GCS filesystems take their settings (``--s3_endpoint_url``, credentials,
``--project`` …) from pipeline options: :func:`configure` hands a job's Beam arguments
to ``FileSystems`` once, so the driver-side reads and writes outside pipelines use the
same store as the pipelines.

Beam's S3 filesystem opens a new ``boto3`` session, and a client in it, for every call
(every listing, open, exists, rename …); a session loads botocore's service models again,
which costs far more CPU than the call, and a step with its state and output on S3 makes
such calls for every file it lists, opens or renames.  :func:`reuse_s3_clients` gives
Beam's client one session per thread and one client per set of settings instead.
"""
from __future__ import annotations

import errno
import os
import socket
import stat
import threading
from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence
from urllib.parse import urlsplit

from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from continual_synth.mechanisms.errors import InputError

__all__ = ["configure", "configured_options", "scheme", "is_local", "reuse_s3_clients",
           "check_answers", "check_bucket", "absolute", "resolved", "folder_and_parents",
           "join", "basename", "is_file", "is_dir", "exists", "list_files", "file_sizes",
           "relative_parts", "size", "not_a_file", "check_not_special", "special_files",
           "open_read", "create", "read_bytes", "write_bytes", "makedirs", "rename",
           "remove", "remove_tree", "remove_if_empty", "children", "save_array",
           "load_array", "save_arrays", "load_arrays"]

_RAW = CompressionTypes.UNCOMPRESSED  # never guess a compression from the file name
_options: Dict = {"options": PipelineOptions([])}


def configure(beam_args: Sequence[str] = ()) -> PipelineOptions:
    """Give ``FileSystems`` (and :func:`pipeline_options`) the options in ``beam_args``."""
    reuse_s3_clients()
    options = PipelineOptions(list(beam_args))
    _check_endpoint(options)
    FileSystems.set_options(options)
    _options["options"] = options
    return options


def configured_options() -> PipelineOptions:
    """The options last passed to :func:`configure`."""
    return _options["options"]


def scheme(path: str) -> Optional[str]:
    """``"s3"``, ``"gs"``, ``"hdfs"`` … of a URL; None for a local path."""
    found = FileSystems.get_scheme(path)
    return None if found in (None, "file") else found


def is_local(path: str) -> bool:
    return scheme(path) is None


class _ReusedClients:
    """A ``boto3`` session whose ``client(**settings)`` returns the client it made for
    the same settings before (clients are thread-safe; these stay with one thread)."""

    def __init__(self, session):
        self._session, self._clients = session, {}

    def client(self, **settings):
        key = tuple(sorted(settings.items()))
        if key not in self._clients:
            self._clients[key] = self._session.client(**settings)
        return self._clients[key]


class _SessionPerThread:
    """Stands in for the ``boto3`` module inside Beam's S3 client, whose only use of it is
    ``boto3.session.Session()``: that returns this thread's one session (boto3's sessions
    are not thread-safe), which reuses its clients (:class:`_ReusedClients`).  Credentials
    are resolved as boto3 resolves them for a session (refreshed when they come from a
    role); explicit ``--s3_access_key_id`` … are part of the client's settings."""

    def __init__(self, boto3_module):
        self.boto3 = boto3_module
        self._local = threading.local()
        self.session = SimpleNamespace(Session=self._session)

    def _session(self) -> _ReusedClients:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = _ReusedClients(self.boto3.session.Session())
        return session


def reuse_s3_clients() -> None:
    """Make Beam's S3 filesystem reuse one boto3 session per thread and its clients
    (see the module docstring); nothing without Beam's AWS extra.  Called by
    :func:`configure` (every command) and for every ``s3://`` path (Beam workers)."""
    if _s3["reused"]:
        return
    try:
        from apache_beam.io.aws.clients.s3 import boto3_client
    except ImportError:
        return
    if boto3_client.boto3 is not None and not isinstance(boto3_client.boto3, _SessionPerThread):
        boto3_client.boto3 = _SessionPerThread(boto3_client.boto3)
    _s3["reused"] = True


_s3 = {"reused": False}  # reuse_s3_clients has run in this process


def _available(path: str) -> str:
    """``path``, or a one-line :class:`InputError` if Beam has no filesystem for it here
    (``hdfs://`` without Beam's hadoop extra …)."""
    if not _s3["reused"] and path.startswith("s3://"):
        reuse_s3_clients()
    try:
        FileSystems.get_filesystem(path)
    except BeamIOError as error:
        causes = "; ".join(str(cause) for cause in error.exception_details.values())
        raise InputError(f"{path}: no {scheme(path)}:// filesystem here ({causes})") from None
    return path


_ANSWERED = set()  # addresses that accepted a connection in this process


def check_answers(option: str, address: str, what: str, scheme: str = "http",
                  timeout: float = 10.0) -> None:
    """A one-line :class:`InputError` within ``timeout`` seconds when the server an
    option names (``--s3_endpoint_url``, ``--dask_client_address``) does not accept a
    connection: its client would retry for 30 s to minutes, then end in a traceback."""
    if address in _ANSWERED:
        return
    parts = urlsplit(address if "://" in address else f"{scheme}://{address}")
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"{option} {address}: no {what} answers there ({exc})") from None
    _ANSWERED.add(address)


_BUCKETS = set()  # (scheme, bucket) pairs found usable in this process


def check_bucket(option: str, path: str) -> None:
    """A one-line :class:`InputError` when the bucket of an ``s3://`` or ``gs://`` path
    an option names does not exist or these credentials may not list it (Beam would fail
    at the first write, in a traceback, after the data was read).  Listing one key is
    what the jobs need anyway (no bucket-level permission is asked for)."""
    kind = scheme(path)
    if kind not in ("s3", "gs"):
        return
    bucket = path.split("://", 1)[1].split("/", 1)[0]
    if (kind, bucket) in _BUCKETS:
        return
    _available(path)
    try:
        if kind == "s3":
            from apache_beam.io.aws.clients.s3.boto3_client import Client
            Client(configured_options()).client.list_objects_v2(Bucket=bucket, MaxKeys=1)
        else:
            from google.cloud import storage as gcs
            list(gcs.Client().list_blobs(bucket, max_results=1))
    except Exception as error:  # botocore / google.api_core: name what the store said
        status = getattr(error, "code", None) or getattr(error, "response", {}).get(
            "ResponseMetadata", {}).get("HTTPStatusCode")
        reason = {404: "does not exist", 403: "may not be listed with these credentials",
                  401: "may not be listed with these credentials"}.get(status)
        raise InputError(f"--{option} {path}: bucket {bucket!r} "
                         f"{reason or f'cannot be used ({type(error).__name__}: {error})'}"
                         ) from None
    _BUCKETS.add((kind, bucket))


def _check_endpoint(options: PipelineOptions) -> None:
    """``--s3_endpoint_url``, if given, must answer (without it the store is AWS's own,
    not checked here)."""
    endpoint = options.get_all_options().get("s3_endpoint_url")
    if endpoint:
        check_answers("--s3_endpoint_url", endpoint, "S3 server")


def absolute(path: str) -> str:
    """A local path made absolute; a URL without its trailing slash."""
    return os.path.abspath(path) if is_local(path) else path.rstrip("/")


def resolved(path: str) -> str:
    """Where a path really leads: a local path absolute with its symbolic links followed
    (as far as it exists); a URL without its trailing slash.  For deciding whether two
    locations are the same or nested: ``release/`` and ``rl/state`` are nested when
    ``rl`` links to ``release``."""
    return os.path.realpath(path) if is_local(path) else path.rstrip("/")


def folder_and_parents(path: str) -> List[str]:
    """``path`` (as :func:`resolved` gives it) and every folder above it, nearest first:
    up to ``/`` locally, up to the bucket (``s3://bucket``) on an object store."""
    path = resolved(path)
    if is_local(path):
        out = [path]
        while os.path.dirname(out[-1]) != out[-1]:
            out.append(os.path.dirname(out[-1]))
        return out
    prefix, _, rest = path.partition("://")
    parts = rest.split("/")
    return [f"{prefix}://" + "/".join(parts[:end]) for end in range(len(parts), 0, -1)]


def join(directory: str, *names: str) -> str:
    return FileSystems.join(_available(directory), *names)


def basename(path: str) -> str:
    return FileSystems.split(path.rstrip("/"))[1]


def _prefix(directory: str) -> str:
    return directory.rstrip("/") + "/"


def is_file(path: str) -> bool:
    if is_local(path):
        return os.path.isfile(path)
    return not path.endswith("/") and FileSystems.exists(_available(path))


def is_dir(path: str) -> bool:
    """A local directory, or a prefix holding at least one object."""
    if is_local(path):
        return os.path.isdir(path)
    return not is_file(path) and bool(_match(_prefix(path)))


def exists(path: str) -> bool:
    return is_file(path) or is_dir(path)


def _match(pattern: str) -> list:
    """The metadata of the files matching ``pattern`` (none if there are none)."""
    return FileSystems.match([pattern])[0].metadata_list


def list_files(directory: str, pattern: str = "**") -> List[str]:
    """The files under ``directory`` (recursively with ``**``; ``*`` stays in one
    folder, ``synthetic-*`` names a glob of file names), sorted."""
    return sorted(file_sizes(directory, pattern))


def file_sizes(directory: str, pattern: str = "**") -> Dict[str, int]:
    """``{path: size in bytes}`` of the files :func:`list_files` lists: one listing (on
    an object store a LIST returns the sizes; no request per file)."""
    if is_local(directory) and not os.path.isdir(directory):
        return {}
    return {m.path: m.size_in_bytes for m in _match(join(directory, pattern))}


def relative_parts(directory: str, path: str) -> List[str]:
    """The folder names and file name of ``path`` below ``directory``."""
    return path[len(_prefix(directory)):].split("/")


def size(path: str) -> int:
    if is_local(path):
        return os.path.getsize(path)
    return _match(path)[0].size_in_bytes


_SPECIAL_FILES = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def not_a_file(path: str) -> Optional[str]:
    """Why the local ``path`` is neither a regular file nor a folder, from ``os.stat``
    alone (opening a FIFO for reading waits for a writer, for ever if none comes): "is a
    FIFO (named pipe), not a data file" (a device, a socket), "is a symbolic link that
    loops", "points to …, which does not exist".  None for a regular file, a folder, a
    path that does not exist, and a URL (object stores hold objects only)."""
    if not is_local(path):
        return None
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if not os.path.islink(path):
            return None
        if error.errno == errno.ELOOP:
            return "is a symbolic link that loops"
        return f"points to {os.path.realpath(path)}, which does not exist"
    for test, kind in _SPECIAL_FILES:
        if test(mode):
            return f"is {kind}, not a data file"
    return None


def check_not_special(path: str) -> None:
    """An :class:`InputError` naming ``path`` and what it is when :func:`not_a_file`
    says it cannot be read as a file."""
    reason = not_a_file(path)
    if reason:
        raise InputError(f"{path} {reason}")


def special_files(directory: str) -> Dict[str, str]:
    """``{path: reason}`` (:func:`not_a_file`) of the entries under a local ``directory``
    that are neither files nor folders.  :func:`list_files` lists a FIFO, a device or a
    socket as a file and leaves out, silently, a symbolic link that loops or points
    nowhere (Beam drops an entry whose size it cannot read); this walk finds both, as
    Beam's own walk does (``os.walk``, symbolic links to folders not followed).  Nothing
    on an object store."""
    if not (is_local(directory) and os.path.isdir(directory)):
        return {}
    found = {}
    for folder, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(folder, name)
            reason = not_a_file(path)
            if reason:
                found[path] = reason
    return dict(sorted(found.items()))


def open_read(path: str):
    """A binary file object to read ``path`` (seekable: pyarrow's readers take it); a
    local FIFO, device or socket is refused, never opened (:func:`not_a_file`)."""
    check_not_special(path)
    return FileSystems.open(path, compression_type=_RAW)


def create(path: str):
    """A binary file object writing ``path`` (its folders created if local); on an
    object store the object appears whole when the file is closed, or not at all."""
    if is_local(path):
        makedirs(os.path.dirname(os.path.abspath(path)))
    return FileSystems.create(path, compression_type=_RAW)


def read_bytes(path: str) -> bytes:
    with open_read(path) as handle:
        return handle.read()


def write_bytes(path: str, data: bytes) -> None:
    with create(path) as handle:
        handle.write(data)


def makedirs(path: str) -> None:
    """A local directory and its parents; nothing on an object store (no directories)."""
    if is_local(path) and not os.path.isdir(path):
        try:
            FileSystems.mkdirs(path)
        except IOError:
            if not os.path.isdir(path):  # created meanwhile by another writer: fine
                raise


def rename(source: str, target: str) -> None:
    """Move one file (replacing ``target``): atomic locally, copy + delete on object
    stores (the reason a release's manifest is written last)."""
    FileSystems.rename([source], [target])


def remove(path: str) -> None:
    """Remove one file if it exists."""
    if is_file(path):
        FileSystems.delete([path])


def remove_tree(path: str) -> None:
    """Remove a directory (a prefix's objects) and everything under it, if it exists."""
    if is_local(path):
        if os.path.isdir(path):
            FileSystems.delete([path])
    else:  # Beam deletes only a prefix's direct children: name every object
        files = list_files(path)
        if files:
            FileSystems.delete(files)


def remove_if_empty(directory: str) -> None:
    """Remove a local directory if it holds nothing (it was made for a write that
    failed); nothing on an object store, where an empty prefix does not exist."""
    if is_local(directory) and os.path.isdir(directory) and not os.listdir(directory):
        try:
            os.rmdir(directory)
        except OSError:  # filled meanwhile by another writer: keep it
            pass


def children(directory: str) -> List[str]:
    """The names of the files and folders directly in ``directory``, sorted; on an
    object store, the folders are those holding objects."""
    if is_local(directory):
        return sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    return sorted({relative_parts(directory, path)[0] for path in list_files(directory)})


def save_array(path: str, array) -> None:
    """A numpy array as a ``.npy`` file."""
    import numpy as np
    with create(path) as handle:
        np.save(handle, array)


def load_array(path: str):
    """A ``.npy`` file as a numpy array."""
    import numpy as np
    with open_read(path) as handle:
        return np.load(handle)


def save_arrays(path: str, **arrays) -> None:
    """Named numpy arrays as one ``.npz`` file."""
    import numpy as np
    with create(path) as handle:
        np.savez(handle, **arrays)


def load_arrays(path: str) -> dict:
    """A ``.npz`` file as a dict of numpy arrays (read whole: object-store files are not
    always seekable)."""
    import io
    import numpy as np
    with np.load(io.BytesIO(read_bytes(path))) as data:
        return {name: data[name] for name in data.files}
