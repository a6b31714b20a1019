"""Conditional create: "write this file only if no file has its name", per store kind.

The one operation the lifecycle's fencing and leases need beyond Beam's
``FileSystems`` (which has no conditional write), and, with the same client, the plain
one-request write of a small document (:meth:`ConditionalCreate.put`; Beam's S3
filesystem writes every file as a multipart upload, three requests, and cannot write
an empty object):

=========  ==========================================================================
store      how
=========  ==========================================================================
local      write a temporary file, then ``os.link`` it to the name (fails if the name
           exists), fsync the directory — also right on NFS
``s3://``  ``PutObject`` with ``If-None-Match: *`` (boto3, the client Beam's S3
           filesystem builds from the same options; HTTP 412 if the key exists)
``gs://``  an upload with ``ifGenerationMatch=0`` (google-cloud-storage, which
           ``apache-beam[gcp]`` installs; HTTP 412 if the object exists)
others     none (``hdfs://`` …): :func:`for_path` refuses, naming the stores that work
=========  ==========================================================================

An S3-compatible server may ignore ``If-None-Match`` (old MinIO, some gateways) and
overwrite silently, which would let two steps both "create" version N + 1:
:meth:`ConditionalCreate.check_honoured` creates a probe object twice and refuses a
store whose second create succeeds.
"""
from __future__ import annotations

import os
import uuid
from typing import Dict

from continual_synth.mechanisms.errors import StateError
from continual_synth.transforms import storage

__all__ = ["PROBE_PREFIX", "ConditionalCreate", "LocalCreate", "S3Create", "GcsCreate",
           "for_path"]


PROBE_PREFIX = ".conditional-create-probe-"  # a probe object's name (removed after)


class ConditionalCreate:
    """The interface: one implementation per store kind."""

    kind = ""

    def create(self, path: str, data: bytes) -> bool:
        """Create ``path`` holding ``data`` if no file has that name: True; else False
        (and nothing is written)."""
        raise NotImplementedError

    def put(self, path: str, data: bytes) -> None:
        """Write (or replace) the small document ``path`` in one request."""
        storage.write_bytes(path, data)

    def check_honoured(self, directory: str) -> None:
        """Refuse a store that ignores the condition (a probe created twice)."""
        probe = storage.join(directory, f"{PROBE_PREFIX}{uuid.uuid4().hex}")
        try:
            first, second = self.create(probe, b"1"), self.create(probe, b"2")
        finally:
            storage.remove(probe)
        if not (first and not second):
            raise StateError(
                f"{directory}: this {self.kind} store does not honour conditional create "
                f"(a second create of one name succeeded), so two steps could both commit; "
                f"keep --state on a local disk, on AWS S3 or on GCS")


class LocalCreate(ConditionalCreate):
    kind = "local"

    def create(self, path: str, data: bytes) -> bool:
        from continual_synth.pipelines.release.release_dir import fsync_directory
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        temporary = os.path.join(directory, f".{uuid.uuid4().hex}.tmp")
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)  # exclusive: fails if the name exists
        except FileExistsError:
            return False
        finally:
            os.remove(temporary)
        fsync_directory(directory)
        return True

    def check_honoured(self, directory: str) -> None:
        """``link(2)`` is exclusive on every POSIX file system."""


def _bucket_key(path: str):
    bucket, _, key = path.split("://", 1)[1].partition("/")
    return bucket, key


class S3Create(ConditionalCreate):
    """``PutObject`` with ``If-None-Match: *`` (AWS S3 since August 2024, moto ≥ 5)."""

    kind = "s3"

    def __init__(self):
        from apache_beam.io.aws.clients.s3.boto3_client import Client
        self._client = Client(storage.configured_options()).client

    def create(self, path: str, data: bytes) -> bool:
        import botocore.exceptions
        bucket, key = _bucket_key(path)
        try:
            self._client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except botocore.exceptions.ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or \
                    error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 412:
                return False
            raise
        return True

    def put(self, path: str, data: bytes) -> None:
        bucket, key = _bucket_key(path)
        self._client.put_object(Bucket=bucket, Key=key, Body=data)


class GcsCreate(ConditionalCreate):
    """An upload with ``ifGenerationMatch=0`` (google-cloud-storage; ``gs://`` paths
    reach an emulator through ``STORAGE_EMULATOR_HOST``, as in tests/test_gcs_store.py)."""

    kind = "gs"

    def __init__(self):
        try:
            from google.cloud import storage as gcs
        except ImportError:  # pragma: no cover - depends on the install
            raise StateError("state on gs:// needs google-cloud-storage: "
                             "pip install 'apache-beam[gcp]'") from None
        self._client = gcs.Client()

    def create(self, path: str, data: bytes) -> bool:
        from google.api_core.exceptions import PreconditionFailed
        bucket, key = _bucket_key(path)
        try:
            self._client.bucket(bucket).blob(key).upload_from_string(data, if_generation_match=0)
        except PreconditionFailed:
            return False
        return True

    def put(self, path: str, data: bytes) -> None:
        bucket, key = _bucket_key(path)
        self._client.bucket(bucket).blob(key).upload_from_string(data)


_KINDS = {None: LocalCreate, "s3": S3Create, "gs": GcsCreate}
_checked: Dict = {}


def for_path(path: str) -> ConditionalCreate:
    """The conditional create of ``path``'s store, checked once per process and bucket;
    a :class:`StateError` for a store that has none."""
    kind = storage.scheme(path)
    if kind not in _KINDS:
        raise StateError(
            f"{path}: an incremental state cannot live on {kind}:// (no conditional "
            f"create there, so two steps could both commit the same period); keep --state "
            f"on a local disk, s3:// or gs:// (the release, --output, may stay on {kind}://)")
    implementation = _KINDS[kind]()
    where = kind and (kind, _bucket_key(path)[0])
    if where and where not in _checked:
        implementation.check_honoured(storage.absolute(path))
        _checked[where] = True
    return implementation
