"""Session fixtures shared by test modules.

``s3_server``: a real S3-compatible server (moto's server mode) on 127.0.0.1, started
once per test session, with one bucket; the tests reach it through Beam's S3
filesystem (``--s3_endpoint_url``) and boto3, as a job on AWS would.

``gcs_server``: a GCS emulator (``gcp-storage-emulator``, PyPI) on 127.0.0.1, started
once per test session, with one bucket; Beam's GCS filesystem and google-cloud-storage
reach it through ``STORAGE_EMULATOR_HOST`` with anonymous credentials.
"""
from __future__ import annotations

import os
import uuid
from types import SimpleNamespace

import pytest

BUCKET = "continual-synth-tests"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="session")
def s3_server():
    """``.beam_args`` (the options a job needs), ``.client`` (boto3), ``.bucket`` and
    ``.prefix()`` (a fresh ``s3://bucket/<random>`` folder per call)."""
    server_module = pytest.importorskip("moto.server", reason="needs the [s3] extra")
    pytest.importorskip("apache_beam.io.aws.s3filesystem", reason="needs apache-beam[aws]")
    import boto3

    saved = {name: os.environ.get(name) for name in CREDENTIALS}
    os.environ.update(CREDENTIALS)  # never a real account's keys
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        beam_args = [f"--s3_endpoint_url={endpoint}", "--s3_access_key_id=testing",
                     "--s3_secret_access_key=testing", "--s3_region_name=us-east-1"]
        yield SimpleNamespace(
            endpoint=endpoint, client=client, bucket=BUCKET, beam_args=beam_args,
            prefix=lambda: f"s3://{BUCKET}/{uuid.uuid4().hex[:10]}")
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


GCS_BUCKET = "continual-synth-gcs-tests"


@pytest.fixture(scope="session")
def gcs_server():
    """``.bucket``, ``.client`` (an anonymous google-cloud-storage client) and
    ``.prefix()`` (a fresh ``gs://bucket/<random>`` folder per call)."""
    emulator = pytest.importorskip("gcp_storage_emulator.server",
                                   reason="needs gcp-storage-emulator (the [test] extra)")
    pytest.importorskip("apache_beam.io.gcp.gcsfilesystem",
                        reason="needs Beam's GCS filesystem (apache-beam[gcp])")
    gcs = pytest.importorskip("google.cloud.storage", reason="needs google-cloud-storage")
    import socket

    with socket.socket() as probe:  # a free port (the emulator cannot bind port 0)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = emulator.create_server("127.0.0.1", port, in_memory=True,
                                    default_bucket=GCS_BUCKET)
    server.start()
    saved = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{port}"
    try:
        yield SimpleNamespace(
            bucket=GCS_BUCKET, client=gcs.Client.create_anonymous_client(),
            prefix=lambda: f"gs://{GCS_BUCKET}/{uuid.uuid4().hex[:10]}")
    finally:
        server.stop()
        if saved is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = saved


# ------------------------------------------------------------------ test tiers

#: each test module's tier (a pytest marker); every module is in one.  The quick tier,
#: ``pytest -m unit``, tests the mechanisms alone (no Beam pipeline, no server);
#: ``-m "not slow"`` adds the jobs; CI runs everything.
TIERS = {
    "unit": ["accounting", "adaptive_remainder", "bias_noise", "consistency", "counters",
             "cumulative_mechanism", "emission", "example_tables", "exponential_mechanism",
             "fitting", "hierarchy", "import_graph", "packed_json", "pooled_margins",
             "privhp", "privhp_memory", "privhp_w1_bound", "samplers", "selection_schedule",
             "shard",
             "sipp_like", "sketch", "synthesizer_protocol", "tabular_mechanism",
             "window_mechanism", "workload_error"],
    "pipeline": ["api", "beam_api", "privhp_jobs", "cumulative_jobs", "evaluate_tabular",
                 "evaluate_window", "job_options", "monitoring", "plan", "privhp_continual",
                 "publication", "reports", "tabular_accuracy", "tabular_jobs", "window_cli",
                 "window_jobs"],
    "faults": ["environment_faults", "fuzz_inputs", "lifecycle_faults", "release_folders",
               "state_chain"],
    "stores": ["gcs_store", "object_store"],
    "streams": ["stream_events", "stream_watch"],
    "platform": ["airflow_dag", "dask_runner", "direct_runner", "runners_identical"],
    "privacy": ["privacy_tester", "publication_boundary"],
    "docs": ["bench_readme", "docs_examples", "docs_python", "docs_site", "no_history"],
}
#: the tiers that start servers, clusters or many pipelines (minutes each)
SLOW = {"faults", "stores", "streams", "platform", "privacy", "docs"}
TIER_OF = {module: tier for tier, modules in TIERS.items() for module in modules}


def pytest_configure(config):
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: the {tier} tier of the test suite")
    config.addinivalue_line("markers", "slow: a tier that takes minutes (not the quick tiers)")


def pytest_collection_modifyitems(config, items):
    """Mark every test with its module's tier (and ``slow``); a module in no tier is an
    error, so that a new test file is placed in one."""
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        tier = TIER_OF.get(module[len("test_"):])
        if tier is None:
            raise pytest.UsageError(f"{module} is in no test tier: add it to TIERS in "
                                    f"tests/conftest.py")
        item.add_marker(getattr(pytest.mark, tier))
        if tier in SLOW:
            item.add_marker(pytest.mark.slow)


def pytest_ignore_collect(collection_path, config):
    """With ``-m TIER`` or ``-m "not slow"``, modules of other tiers are not even
    imported (their imports — Airflow, servers — are most of a quick run's time)."""
    expression = (config.getoption("markexpr") or "").strip()
    name = collection_path.name
    if not (name.startswith("test_") and name.endswith(".py")):
        return None
    tier = TIER_OF.get(name[len("test_"):-len(".py")])
    if tier is None:
        return None  # an untiered module is collected, and refused by the hook below
    if expression in TIERS:
        return True if tier != expression else None
    if expression == "not slow":
        return True if tier in SLOW else None
    return None
