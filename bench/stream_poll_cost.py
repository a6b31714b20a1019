"""What one poll of ``stream --watch`` costs with N files in the watched directory or prefix.

    python bench/stream_poll_cost.py --files 1000 --folders 100 --parts 10 \\
        --output bench/results/stream_poll_cost.md

Every ``--poll-interval`` the watcher lists the whole watched directory or prefix through
Beam's ``FileSystems.match(DIR/**)`` (``ReleaseCompletePeriods._landed``): a released
file stays listed as long as it stays there.  Measured: the median wall time of one
listing (``_landed``, which is ``_entries`` and the comparison with the last listing)
on a local directory and on an S3-compatible store (moto's server on 127.0.0.1, through
Beam's S3 filesystem), and on S3 the requests one poll sends (Beam's S3 client calls).
moto is far slower per page than S3 itself: its times bound the client's share from
above; the request count is what a real store bills.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
import uuid

from continual_synth.pipelines.streaming.stream import ReleaseCompletePeriods


def listing_time(watch_dir: str, repeats: int) -> float:
    """Median seconds of one poll's listing of ``watch_dir`` (all entries settled)."""
    releaser = ReleaseCompletePeriods.__new__(ReleaseCompletePeriods)
    releaser.watch_dir = watch_dir
    known: dict = {}
    releaser._landed(known)
    releaser._landed(known)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        releaser._landed(known)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def names(files: int, folders: int, parts: int):
    """(relative name, bytes) of the watched objects: released period files and folders."""
    for i in range(files):
        yield f"period_{i + 1:05d}.parquet", b"x" * 1000
    for i in range(folders):
        for j in range(parts):
            yield f"period_{files + i + 1:05d}/part-{j}.parquet", b"x" * 1000


def local(files: int, folders: int, parts: int, repeats: int) -> float:
    root = tempfile.mkdtemp(prefix="poll-cost-")
    try:
        for name, data in names(files, folders, parts):
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            with open(os.path.join(root, name), "wb") as handle:
                handle.write(data)
        return listing_time(root, repeats)
    finally:
        shutil.rmtree(root)


def s3(files: int, folders: int, parts: int, repeats: int):
    """(seconds, {client call: count}) of one poll on moto's S3 server."""
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    import boto3
    from apache_beam.io.aws.clients.s3 import boto3_client
    from moto.server import ThreadedMotoServer

    from continual_synth.transforms import storage
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="poll-cost")
        storage.configure([f"--s3_endpoint_url={endpoint}", "--s3_access_key_id=testing",
                           "--s3_secret_access_key=testing", "--s3_region_name=us-east-1"])
        prefix = uuid.uuid4().hex[:8]
        for name, data in names(files, folders, parts):
            client.put_object(Bucket="poll-cost", Key=f"{prefix}/{name}", Body=data)
        calls: dict = {}
        for method in ("list", "get_object_metadata", "get_range"):
            original = getattr(boto3_client.Client, method)

            def counted(self, *args, _original=original, _method=method, **kwargs):
                calls[_method] = calls.get(_method, 0) + 1
                return _original(self, *args, **kwargs)
            setattr(boto3_client.Client, method, counted)
        seconds = listing_time(f"s3://poll-cost/{prefix}", repeats)
        return seconds, {name: count // (repeats + 2) for name, count in calls.items()}
    finally:
        server.stop()


def main() -> None:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's request log
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--folders", type=int, default=100)
    parser.add_argument("--parts", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    rows = ["| watched | objects | store | one poll (median) | requests per poll |",
            "|---|---|---|---|---|"]
    for files, folders in ((args.files, 0), (args.files, args.folders)):
        what = f"{files} files" + (f" + {folders} folders × {args.parts} parts"
                                   if folders else "")
        count = files + folders * args.parts
        rows.append(f"| {what} | {count} | local | "
                    f"{local(files, folders, args.parts, 20) * 1e3:.1f} ms | none |")
        seconds, calls = s3(files, folders, args.parts, args.repeats)
        listed = ", ".join(f"{n} {name}" for name, n in sorted(calls.items()) if n) or "none"
        rows.append(f"| {what} | {count} | S3 (moto) | {seconds * 1e3:.0f} ms | {listed} |")
    report = "\n".join([f"# One poll of `stream --watch` ({time.strftime('%Y-%m-%d')}, "
                        f"load {os.getloadavg()[0]:.1f})", "", *rows, ""])
    print(report)
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(report)


if __name__ == "__main__":
    main()
