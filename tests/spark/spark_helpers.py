"""Shared pieces of the Spark exporter tests (no tests here).

* ``spark`` — one local[2] SparkSession for every Spark test module in the run;
* :class:`LogDirWriter` — writes record batches into a directory with Kafka's layout the way a
  broker does: assigns offsets, rolls segments, writes ``.index`` / ``.timeindex`` entries by
  Kafka's ``index.interval.bytes`` rule (docs/semantics.md#index-interval), optionally leaves the active
  segment's indexes pre-allocated with zero entries as a live broker does;
* :func:`build_batch` — a batch exactly as a producer sends it (kafka-python's builder);
* :func:`expected_rows` — the records of a log directory decoded by kafka-python's own batch
  reader, an implementation independent of the one under test.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from minikafka.storage.batch import (
    BatchHeader,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from tests.batches import batch_of_records

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from minikafka.spark_export import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("minikafka-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def build_batch(
    records: list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]],
    codec: str = "none",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytearray:
    """A RecordBatch v2 as a producer sends it; ``records`` are (key, value, timestamp, headers)."""
    return batch_of_records(records, codec, producer_id, producer_epoch, base_sequence, transactional)


def control_batch(producer_id: int, epoch: int, ts: int, commit: bool = True) -> bytearray:
    """A transaction marker batch as a broker writes it (control + transactional attributes)."""
    from kafka.record.util import calc_crc32c, encode_varint

    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    body = bytearray(b"\x00")  # attributes
    encode_varint(0, body.append)  # timestamp delta
    encode_varint(0, body.append)  # offset delta
    encode_varint(len(key), body.append)
    body += key
    encode_varint(len(value), body.append)
    body += value
    encode_varint(0, body.append)  # headers
    record = bytearray()
    encode_varint(len(body), record.append)
    record += body
    header = struct.pack(">qiibIhiqqqhii", 0, 49 + len(record), 0, 2, 0, 0x30, 0, ts, ts, producer_id, epoch, -1, 1)
    buf = bytearray(header) + record
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return buf


@dataclass
class _Segment:
    base: int
    log: Any
    size: int = 0
    index: list[tuple[int, int]] = field(default_factory=list)
    time_index: list[tuple[int, int]] = field(default_factory=list)
    bytes_since_entry: int = 0
    max_ts: int = -1
    max_ts_offset: int = -1


class LogDirWriter:
    """Appends batches to ``<root>/<topic>-<partition>/`` like a broker (single writer, tests only)."""

    def __init__(self, root: str, segment_bytes: int = 1 << 30, index_interval: int = 4096,
                 log_append_time_ms: int | None = None) -> None:
        self.root = str(root)
        self.segment_bytes = segment_bytes
        self.index_interval = index_interval
        self.log_append_time_ms = log_append_time_ms
        self._parts: dict[tuple[str, int], list[_Segment]] = {}
        self._next: dict[tuple[str, int], int] = {}
        os.makedirs(self.root, exist_ok=True)
        meta = os.path.join(self.root, "meta.properties")
        if not os.path.exists(meta):  # every broker writes it into each log directory
            with open(meta, "w") as f:
                f.write("version=1\nbroker.id=0\ncluster.id=spark-tests\n")

    def _dir(self, topic: str, partition: int) -> str:
        path = os.path.join(self.root, f"{topic}-{partition}")
        os.makedirs(path, exist_ok=True)
        return path

    def _open_segment(self, topic: str, partition: int, base: int) -> _Segment:
        log = open(os.path.join(self._dir(topic, partition), f"{base:020d}.log"), "wb")
        seg = _Segment(base, log)
        self._parts.setdefault((topic, partition), []).append(seg)
        return seg

    def skip_offsets(self, topic: str, partition: int, count: int) -> None:
        """Leave a gap in the offsets (as compaction or aborted appends do)."""
        self._next[(topic, partition)] = self._next.get((topic, partition), 0) + count

    def append(self, topic: str, partition: int, batch: bytearray) -> int:
        """Append one producer batch; returns its assigned base offset."""
        key = (topic, partition)
        buf = bytearray(batch)
        header = BatchHeader.parse(buf)
        base = self._next.get(key, 0)
        segs = self._parts.get(key)
        if not segs:
            seg = self._open_segment(topic, partition, base)
        else:
            seg = segs[-1]
            if seg.size and seg.size + len(buf) > self.segment_bytes:
                self._close_segment(topic, partition, seg)
                seg = self._open_segment(topic, partition, base)
        set_base_offset(buf, 0, base)
        set_partition_leader_epoch(buf, 0, 0)
        if self.log_append_time_ms is not None and not header.is_control:
            set_log_append_time(buf, 0, header, self.log_append_time_ms)
        header = BatchHeader.parse(buf)
        position = seg.size
        seg.log.write(buf)
        seg.log.flush()
        seg.size += len(buf)
        if header.max_timestamp > seg.max_ts:
            seg.max_ts, seg.max_ts_offset = header.max_timestamp, header.last_offset
        if seg.bytes_since_entry > self.index_interval:
            seg.index.append((header.last_offset - seg.base, position))
            self._maybe_time_entry(seg)
            seg.bytes_since_entry = 0
        seg.bytes_since_entry += len(buf)
        self._next[key] = header.next_offset
        self._write_indexes(topic, partition, seg, preallocate=True)
        return base

    def _maybe_time_entry(self, seg: _Segment) -> None:
        if seg.max_ts >= 0 and (not seg.time_index or seg.max_ts > seg.time_index[-1][0]):
            seg.time_index.append((seg.max_ts, seg.max_ts_offset - seg.base))

    def _write_indexes(self, topic: str, partition: int, seg: _Segment, preallocate: bool) -> None:
        stem = os.path.join(self._dir(topic, partition), f"{seg.base:020d}")
        index = b"".join(struct.pack(">ii", r, p) for r, p in seg.index)
        times = b"".join(struct.pack(">qi", t, r) for t, r in seg.time_index)
        if preallocate:  # live broker: files pre-sized with zero entries
            index += bytes(8 * 64)
            times += bytes(12 * 64)
        with open(stem + ".index", "wb") as f:
            f.write(index)
        with open(stem + ".timeindex", "wb") as f:
            f.write(times)

    def _close_segment(self, topic: str, partition: int, seg: _Segment) -> None:
        self._maybe_time_entry(seg)
        self._write_indexes(topic, partition, seg, preallocate=False)
        seg.log.close()

    def segments(self, topic: str, partition: int) -> list[str]:
        return [os.path.join(self._dir(topic, partition), f"{s.base:020d}.log") for s in self._parts[(topic, partition)]]

    def index_entries(self, topic: str, partition: int) -> list[list[tuple[int, int]]]:
        return [list(s.index) for s in self._parts[(topic, partition)]]

    def close(self, clean: bool = True) -> None:
        """Trim every active segment's indexes (clean shutdown) or leave them pre-allocated."""
        for (topic, partition), segs in self._parts.items():
            seg = segs[-1]
            if clean:
                self._close_segment(topic, partition, seg)
            else:
                seg.log.close()


def expected_rows(root: str, topics: list[str] | None = None) -> list[dict[str, Any]]:
    """Every data record under ``root`` decoded by kafka-python's record batch reader."""
    from kafka.record.default_records import DefaultRecordBatch

    rows = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not os.path.isdir(path) or "-" not in name:
            continue
        topic, _, part = name.rpartition("-")
        if topics is not None and topic not in topics:
            continue
        for seg in sorted(n for n in os.listdir(path) if n.endswith(".log")):
            with open(os.path.join(path, seg), "rb") as f:
                data = f.read()
            pos = 0
            while pos + 12 <= len(data):
                (length,) = struct.unpack_from(">i", data, pos + 8)
                if pos + 12 + length > len(data) or length < 49:
                    break
                batch = DefaultRecordBatch(bytes(data[pos : pos + 12 + length]))
                if not batch.is_control_batch and batch.validate_crc():
                    for i, rec in enumerate(batch):
                        seq = -1 if batch.base_sequence < 0 else (batch.base_sequence + rec.offset - batch.base_offset)
                        if seq > 2147483647:
                            seq -= 2147483648
                        rows.append({
                            "key": rec.key, "value": rec.value, "topic": topic, "partition": int(part),
                            "offset": rec.offset, "timestamp_ms": rec.timestamp,
                            "timestampType": rec.timestamp_type,
                            "headers": [(k, v) for k, v in rec.headers] or None,
                            "producerId": batch.producer_id, "producerEpoch": batch.producer_epoch,
                            "sequence": seq, "isTransactional": batch.is_transactional, "_index": i,
                        })
                pos += 12 + length
    return rows


def spark_rows(df: Any) -> list[dict[str, Any]]:
    """Collect a DataFrame of the source into comparable dicts, in topic/partition/offset order."""
    out = []
    for row in df.orderBy("topic", "partition", "offset").collect():
        d = row.asDict(recursive=True)
        ts = d.pop("timestamp")
        d["timestamp_ms"] = round(ts.timestamp() * 1000) if ts is not None else None
        for k in ("key", "value"):
            if d[k] is not None:
                d[k] = bytes(d[k])
        if "headers" in d and d["headers"] is not None:
            d["headers"] = [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in d["headers"]]
        out.append(d)
    return out


def project(rows: list[dict[str, Any]], columns: list[str]) -> list[tuple[Any, ...]]:
    return [tuple(r[c] for c in columns) for r in rows]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: Any, timeout: float = 60) -> None:
    """Until something accepts connections on 127.0.0.1:``port`` (or ``proc`` exited)."""
    import socket
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


class CountingProxy:
    """A TCP relay on 127.0.0.1 that counts the bytes the upstream server sends back: put in front
    of an object store, it shows how much of each file a reader really downloaded."""

    def __init__(self, upstream_port: int) -> None:
        import socket
        import threading

        self.upstream_port = upstream_port
        self.received = 0
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._run, daemon=True)
        self._accept.start()

    def _run(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            done = threading.Barrier(2, action=lambda c=client, u=upstream: (c.close(), u.close()))
            for src, dst, counted in ((client, upstream, False), (upstream, client, True)):
                t = threading.Thread(target=self._pump, args=(src, dst, counted, done), daemon=True)
                self._threads.append(t)
                t.start()

    def _pump(self, src: Any, dst: Any, counted: bool, done: Any) -> None:
        import socket

        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if counted:
                    with self._lock:
                        self.received += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            done.wait()  # the pair's sockets close when both directions are done

    def close(self) -> None:
        import socket

        try:
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        except OSError:
            pass
        self._server.close()
        self._accept.join(timeout=10)


def spark_class() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers (one core, 1 GiB each) as child processes
    on 127.0.0.1, started with the pyspark installation's ``spark-class``; workers' Python workers
    import minikafka from ``pythonpath``."""

    def __init__(self, workdir: Any, workers: int = 2, pythonpath: str | None = None) -> None:
        import subprocess
        from pathlib import Path

        self.workdir = Path(workdir)
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        root = pythonpath or str(Path(__file__).resolve().parents[2])
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1",
                    "PYTHONPATH": root, "SPARK_NO_DAEMONIZE": "1"}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        try:
            self._start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                   str(self.port), "--webui-port", str(free_port())])
            wait_for_port(self.port, self.procs[0], timeout=120)
            for i in range(workers):
                self._start(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                                           "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                                           "--work-dir", str(self.workdir / f"worker{i}")])
            self._wait_for_workers(workers)
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, args: list[str]) -> None:
        import subprocess

        log = self.workdir / f"{name}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            self.procs.append(subprocess.Popen([spark_class(), *args], env=self.env, stdout=out,
                                               stderr=subprocess.STDOUT, cwd=self.workdir))

    def _wait_for_workers(self, count: int, timeout: float = 120) -> None:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.logs[0].read_text(errors="replace").count("Registering worker") >= count:
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.2)
        raise RuntimeError("workers did not register:\n" + "\n".join(p.read_text()[-2000:] for p in self.logs))

    def stop(self) -> None:
        """SIGTERM, and SIGKILL for a daemon still shutting down after 5 s (nothing of a throwaway
        test cluster needs a graceful end)."""
        import subprocess
        import time

        for proc in reversed(self.procs):
            proc.terminate()
        deadline = time.monotonic() + 5
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


class S3Server:
    """moto's S3 server (``moto_server``, a real S3-protocol HTTP server) on 127.0.0.1 that checks
    access keys: one IAM user with an allow-all policy and a key pair, and one bucket."""

    ALLOW_ALL = ('{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", '
                 '"Resource": "*"}]}')

    def __init__(self, workdir: Any, bucket: str) -> None:
        import subprocess
        import sys

        import boto3

        self.port = free_port()
        self.bucket = bucket
        self._log = open(os.path.join(str(workdir), "moto.log"), "w")  # noqa: SIM115
        # The first three requests (the IAM user, its policy, its key) run before keys are checked.
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3"}
        server = os.path.join(os.path.dirname(sys.executable), "moto_server")
        self.proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(self.port)], env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        try:
            wait_for_port(self.port, self.proc)
            direct = f"http://127.0.0.1:{self.port}"
            iam = boto3.client("iam", endpoint_url=direct, aws_access_key_id="setup",
                               aws_secret_access_key="setup", region_name="us-east-1")
            iam.create_user(UserName="spark")
            iam.put_user_policy(UserName="spark", PolicyName="all", PolicyDocument=self.ALLOW_ALL)
            key = iam.create_access_key(UserName="spark")["AccessKey"]
            self.access_key, self.secret_key = key["AccessKeyId"], key["SecretAccessKey"]
            boto3.client("s3", endpoint_url=direct, aws_access_key_id=self.access_key,
                         aws_secret_access_key=self.secret_key, region_name="us-east-1").create_bucket(Bucket=bucket)
        except BaseException:
            self.stop()
            raise

    def options(self, port: int | None = None) -> dict[str, str]:
        """The data source's connection options, through ``port`` (a relay) or straight to the server."""
        return {"fs.s3a.endpoint": f"http://127.0.0.1:{port or self.port}", "fs.s3a.access.key": self.access_key,
                "fs.s3a.secret.key": self.secret_key}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self._log.close()
