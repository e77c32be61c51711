"""The ``minikafka`` data source over object storage: a real S3-protocol server (moto's server
mode, on 127.0.0.1, with access keys checked), a data dir copied there by ``minikafka upload``,
and Spark reading it with ``s3://bucket/prefix`` and Spark's ``fs.s3a.*`` option names.

A byte-counting relay sits between the reader and the server, so the test sees that a read of a
slice of a segment downloads that slice (ranged GETs), not the whole object.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.spark_helpers import (
    CountingProxy,
    LogDirWriter,
    S3Server,
    build_batch,
    expected_rows,
    free_port,
    project,
    spark,  # noqa: F401  (session fixture)
    spark_rows,
)

pytest.importorskip("moto", reason="the object-store tests need moto[server]")

pytestmark = pytest.mark.spark_scale
ROOT = Path(__file__).resolve().parents[2]
MINIKAFKA = str(Path(sys.executable).with_name("minikafka"))
T0 = 1_700_000_000_000
BUCKET = "minikafka-data"
COLS = ["topic", "partition", "offset", "key", "value", "timestamp_ms", "timestampType", "headers"]


@pytest.fixture(scope="module")
def s3(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A moto S3 server that checks access keys, a bucket, and a byte-counting relay in front."""
    server = S3Server(tmp_path_factory.mktemp("moto"), BUCKET)
    proxy = None
    try:
        proxy = CountingProxy(server.port)
        yield {"proxy": proxy, "options": server.options(proxy.port)}
    finally:
        if proxy is not None:
            proxy.close()
        server.stop()


@pytest.fixture(scope="module")
def uploaded(s3, tmp_path_factory) -> dict[str, Any]:
    """A data dir with two topics, several segments, every codec, copied with ``minikafka upload``."""
    import random

    root = tmp_path_factory.mktemp("s3data") / "data"
    rng = random.Random(5)
    w = LogDirWriter(str(root), segment_bytes=40_000, index_interval=2000)
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    for b in range(60):
        recs = [(b"k%d" % rng.randint(0, 9), os.urandom(rng.choice([10, 300, 900])), T0 + b * 10 + i,
                 [("h", b"%d" % i)] if i % 2 else []) for i in range(rng.randint(1, 12))]
        w.append("orders", b % 2, build_batch(recs, codec=codecs[b % 5]))
    big = LogDirWriter(str(root))  # one large single-segment partition for the range-read check
    for b in range(200):
        big.append("big", 0, build_batch([(None, os.urandom(1000), T0 + b, [])] * 10))
    w.close()
    big.close()
    url = f"s3://{BUCKET}/clusters/c1"
    args = [MINIKAFKA, "upload", "--data-dir", str(root), "--to", url]
    for k, v in s3["options"].items():
        args += ["--option", f"{k}={v}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return {"root": str(root), "url": url}


def _read(spark, url: str, options: dict[str, str], **more: str):  # noqa: F811
    return spark.read.format("minikafka").options(**options, **more).load(url)


def test_s3_read_returns_the_same_rows_as_the_local_directory(spark, s3, uploaded):  # noqa: F811
    want = sorted(expected_rows(uploaded["root"]), key=lambda r: (r["topic"], r["partition"], r["offset"]))
    got = spark_rows(_read(spark, uploaded["url"], s3["options"], includeHeaders="true"))
    assert len(got) == len(want) > 2000
    assert project(got, COLS) == project(want, COLS)
    # the same directory through file:// and a plain path
    local = spark_rows(spark.read.format("minikafka").option("includeHeaders", "true").load("file://" + uploaded["root"]))
    assert project(local, COLS) == project(want, COLS)


def test_pyarrow_option_names_work_too(spark, s3, uploaded):  # noqa: F811
    opts = s3["options"]
    endpoint = opts["fs.s3a.endpoint"].removeprefix("http://")
    pyarrow_names = {"endpoint_override": endpoint, "scheme": "http", "access_key": opts["fs.s3a.access.key"],
                     "secret_key": opts["fs.s3a.secret.key"]}
    assert _read(spark, uploaded["url"], pyarrow_names, subscribe="orders").count() == len(
        expected_rows(uploaded["root"], ["orders"]))


def test_a_slice_of_a_segment_downloads_that_slice_not_the_object(s3, uploaded):
    """Reading the last 20 of 2,000 offsets of a ~2 MB segment transfers a small part of it."""
    from minikafka.spark_export.arrow_build import arrow_schema
    from minikafka.spark_export.options import parse_options
    from minikafka.spark_export.planner import plan
    from minikafka.spark_export.slice_reader import SliceReader

    segment = os.path.join(uploaded["root"], "big-0", "00000000000000000000.log")
    size = os.path.getsize(segment)
    proxy = s3["proxy"]
    opts = parse_options({"path": uploaded["url"], **s3["options"], "assign": '{"big":[0]}',
                          "startingOffsets": '{"big":{"0":1980}}'})
    before = proxy.received
    slices = plan(opts)
    rows = sum(rb.num_rows for sl in slices
               for rb in SliceReader(sl, arrow_schema(False, False), True, opts.storage.files()))
    downloaded = proxy.received - before
    assert rows == 20
    assert downloaded < size // 10, (downloaded, size)


@pytest.mark.parametrize("problem", ["bad key", "bad secret", "unreachable endpoint", "no such bucket"])
def test_bad_credentials_or_endpoint_fail_with_a_clear_error(spark, s3, uploaded, problem):  # noqa: F811
    opts = dict(s3["options"])
    url = uploaded["url"]
    if problem == "bad key":
        opts["fs.s3a.access.key"] = "AKIAEXAMPLEWRONG"
    elif problem == "bad secret":
        opts["fs.s3a.secret.key"] = "wrong-secret"
    elif problem == "unreachable endpoint":
        opts["fs.s3a.endpoint"] = f"http://127.0.0.1:{free_port()}"
    else:
        url = "s3://no-such-bucket-here/c1"
    with pytest.raises(Exception) as info:
        _read(spark, url, opts).count()
    text = str(info.value)
    assert f"cannot read s3://{url.removeprefix('s3://')}" in text, text[-2000:]
    assert "Check the endpoint (fs.s3a.endpoint), the credentials" in text
    # and the export command says the same in one line, exit 2, before starting Spark
    args = [MINIKAFKA, "export", "--data-dir", url, "--out", str(Path(uploaded["root"]).parent / "never")]
    for k, v in opts.items():
        args += ["--option", f"{k}={v}"]
    result = subprocess.run(args, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot read s3://" in lines[0]


def test_the_object_store_example_of_the_docs_runs_as_written(spark, s3, uploaded):  # noqa: F811
    from tests.doc_examples import example

    opts = s3["options"]
    code = example("object-store", {
        "http://minio.internal:9000": opts["fs.s3a.endpoint"], "AKIAEXAMPLE": opts["fs.s3a.access.key"],
        '"SECRET"': repr(opts["fs.s3a.secret.key"]), "s3://analytics/minikafka/broker-1": uploaded["url"]})
    namespace = {"spark": spark}
    exec(code, namespace)
    assert namespace["df"].count() == len(expected_rows(uploaded["root"], ["orders"]))
