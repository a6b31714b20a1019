"""The jobs on Google Cloud Storage paths: a GCS emulator (``conftest.gcs_server``) on
127.0.0.1 reached through Beam's GCS filesystem, as on GCP.

* ``window run`` with input and output on ``gs://`` releases the bytes the local run
  releases (the release path: listing, reading, staging, publishing, manifest last).
* The state's ownership needs a conditional create (``ifGenerationMatch=0``).  The
  emulator ignores that precondition (a second create of one name overwrites it), so a
  state on it must be **refused** by the probe (:meth:`ConditionalCreate.
  check_honoured`) before anything is written: that is what this test proves.  The
  precondition itself is GCS's documented behaviour and is not exercised here (no
  emulator on PyPI honours it; see docs/object_stores.md).
"""
from __future__ import annotations

import os

import pytest

from continual_synth.pipelines.release import conditional_create
from continual_synth.transforms import storage
from continual_synth.transforms.files import write_file

from helpers_panels import cli, long_table, markov_codes, snapshot

PRIVACY = ["--window", "2", "--horizon", "3", "--rho", "5", "--neighbor", "add-remove",
           "--seed", "9", "--shards", "2"]




def objects(gcs, prefix: str) -> dict:
    key_prefix = prefix.split(f"gs://{gcs.bucket}/", 1)[1].rstrip("/") + "/"
    return {blob.name[len(key_prefix):]: blob.download_as_bytes()
            for blob in gcs.client.list_blobs(gcs.bucket, prefix=key_prefix)}


@pytest.fixture(autouse=True)
def fixed_creation_time(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1790000000")


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    root = tmp_path_factory.mktemp("gcs")
    table = long_table(markov_codes(150, 3, seed=5))
    half = table.num_rows // 2
    for part, rows in enumerate((table.slice(0, half), table.slice(half))):
        write_file(rows, str(root / "panel" / f"part-{part}.parquet"), "parquet")
    return root


def test_window_run_on_gcs_releases_what_the_local_run_releases(gcs_server, panel, tmp_path,
                                                                monkeypatch):
    code, local = cli("window", "run", "--input", str(panel / "panel"), "--output",
                      str(tmp_path / "local"), *PRIVACY)
    assert code == 0, local
    monkeypatch.chdir(tmp_path)  # a URL must never become a local folder here
    root = gcs_server.prefix()
    storage.configure([])
    for name in sorted(os.listdir(panel / "panel")):
        storage.write_bytes(f"{root}/panel/{name}", (panel / "panel" / name).read_bytes())
    code, remote = cli("window", "run", "--input", f"{root}/panel", "--output",
                       f"{root}/out", *PRIVACY)
    assert code == 0, remote
    assert remote == local
    published = {n: b for n, b in objects(gcs_server, f"{root}/out").items()
                 if not n.startswith(".")}
    assert len(published) > 2 and published == snapshot(str(tmp_path / "local"))
    assert not [n for n in objects(gcs_server, f"{root}/out") if n.startswith(".")]
    assert sorted(os.listdir(tmp_path)) == ["local"]  # no ./gs: folder
    code, message = cli("window", "run", "--input", f"{root}/panel", "--output",
                        f"{root}/out", *PRIVACY)
    assert code == 2 and "already holds a release" in message


def test_a_state_on_a_store_that_ignores_the_precondition_is_refused(gcs_server):
    root = gcs_server.prefix()
    storage.configure([])
    conditional_create._checked.clear()
    code, message = cli("window", "init", "--state", f"{root}/state", *PRIVACY[:-2])
    assert code == 2, message
    assert "does not honour conditional create" in message
    # nothing but the probe's own object may be left: no state document, no lease
    assert not [n for n in objects(gcs_server, f"{root}/state") if not n.startswith(".")]


def test_a_missing_bucket_is_a_one_line_error(gcs_server, panel):
    code, message = cli("window", "run", "--input", str(panel / "panel"), "--output",
                        "gs://no-such-bucket/out", *PRIVACY)
    assert code == 2 and "\n" not in message, message
    assert "--output gs://no-such-bucket/out: bucket 'no-such-bucket' does not exist" in message
