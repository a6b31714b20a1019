"""What a release published, and checks on it (tests/test_publication_boundary.py and
the event-time stream's neighbour test): neighbouring inputs publish the same public
fields and file names; no published byte holds a digest of an input."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import zlib
from typing import List, Sequence

from continual_synth.pipelines.release import publication


def published(out: str, printed: List[dict]) -> dict:
    """What left the private side: the release folder's files (names and bytes, the
    manifest parsed) and the printed documents."""
    files = {}
    for name in sorted(os.listdir(out)):
        if name.startswith("."):
            continue
        with open(os.path.join(out, name), "rb") as handle:
            files[name] = handle.read()
    manifest = json.loads(files["manifest.json"])
    return {"manifest": manifest, "files": files, "printed": printed}


def differences(a: dict, b: dict) -> List[str]:
    """The noisy or derived artefacts that differ between two publications of
    neighbouring inputs; fails if anything else differs or is unclassified."""
    differ = []
    for document_a, document_b, schema, what in (
            [(a["manifest"], b["manifest"], publication.MANIFEST_FIELDS, "manifest")]
            + [(x, y, publication.SUMMARY_FIELDS, "printed")
               for x, y in zip(a["printed"], b["printed"])]):
        assert publication.unclassified(document_a, schema) == [], what
        assert set(document_a) == set(document_b), what
        for key in document_a:
            if document_a[key] == document_b[key]:
                continue
            assert schema[key].kind != publication.PUBLIC, \
                f"{what} field {key!r} is public yet differs between neighbours: " \
                f"{document_a[key]!r} vs {document_b[key]!r}"
            differ.append(f"{what}.{key}")
    assert len(a["printed"]) == len(b["printed"])
    assert sorted(a["files"]) == sorted(b["files"]), "file names differ between neighbours"
    differ += [name for name in a["files"]
               if name != "manifest.json" and a["files"][name] != b["files"][name]]
    return differ


def digests(data: bytes) -> List[bytes]:
    """Every common digest of ``data``, as raw bytes, hex (both cases) and base64."""
    found = []
    for name in ("md5", "sha1", "sha224", "sha256", "sha384", "sha512", "blake2b",
                 "blake2s", "sha3_256"):
        raw = hashlib.new(name, data).digest()
        found += [raw, raw.hex().encode(), raw.hex().upper().encode(),
                  base64.b64encode(raw), base64.urlsafe_b64encode(raw).rstrip(b"=")]
    crc = zlib.crc32(data)
    found += [f"{crc:08x}".encode()]
    return found


def assert_holds_no_digest(release: dict, inputs: Sequence[str]) -> None:
    """No published byte sequence (a release's files, what its commands printed) holds a
    digest of an input file (each file's bytes; the period files together, as a step's
    fingerprint of a folder takes them)."""
    blobs = []
    for path in inputs:
        with open(path, "rb") as handle:
            blobs.append(handle.read())
    candidates = [d for blob in blobs + [b"".join(blobs[1:])] for d in digests(blob)]
    published_bytes = list(release["files"].values()) + [
        json.dumps(document).encode() for document in release["printed"]]
    for data in published_bytes:
        for digest in candidates:
            assert digest not in data, "a release holds a digest of its input"
