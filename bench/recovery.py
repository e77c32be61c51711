"""Restart time of ``minikafka serve``: clean shutdown vs crash, and how each scales with the log.

Three data dirs are built in this process with the real storage code (``LogManager``,
``PartitionLog.append_from_client``), one partition each, ``segment.bytes`` = ``--tail-mib`` (256 MiB,
so a 1 GiB log has four segments, each roll writing a producer snapshot):

* clean-small: ``--small-mib`` (64 MiB) of batches, then ``LogManager.shutdown()``;
* clean-big:   ``--size-mib`` (1 GiB), then ``LogManager.shutdown()``;
* crashed:     ``--size-mib - --tail-mib`` (768 MiB), ``flush()`` + ``LogManager.checkpoint()`` so the
  recovery point covers it, ``--tail-mib`` (256 MiB) more, then ``LogManager.abandon()``: what
  SIGKILL leaves on disk (no snapshot at the log end, no clean-shutdown marker, untrimmed index
  files, recovery point 256 MiB behind). The crash is simulated in-process rather than by killing a
  broker so that the tail is exactly one segment: the producer snapshot written when that segment
  was rolled is the newest one, so the restart replays exactly the tail.

Batches are what 1,000 idempotent producers would send round-robin: kafka-python's
``DefaultRecordBatchBuilder`` builds one batch of ~1 KiB records padded to exactly ``--batch-kib``;
each producer's copy gets its producer id, epoch 0 and its next base sequence, and a fresh CRC.

Each timed restart spawns ``python -m minikafka serve --port 0 --data-dir D`` and measures from
just before ``Popen`` to the first successful Metadata response for the partition. Afterwards
(untimed) ListOffsets and DescribeProducers check that the whole log and all 1,000 producers with
their last sequences were loaded, and the broker's log is checked for the kind of start expected
(clean, or unclean with exactly the tail re-validated and replayed). The crashed dir is copied
afresh before every unclean run (recovery repairs it); the copy is not timed.

Page cache: as root, each mode is measured ``cold`` (``sync; echo 3 > /proc/sys/vm/drop_caches``
before every plain read and every restart) and ``warm`` (everything in the page cache). Without
root only ``warm`` runs. The plain read is ``os.read`` in 1 MiB chunks of the same tail segment.

    .venv/bin/python -m bench.recovery [--size-mib 1024] [--small-mib 64] [--tail-mib 256] [--runs 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c
from kafka.protocol.admin import DescribeProducersRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from minikafka.config import BrokerConfig
from minikafka.storage.batch import ATTRIBUTES_OFFSET, CRC_OFFSET
from minikafka.storage.log_manager import LogManager
from tests.kafka_wire import RawClient

MIB = 1 << 20
TOPIC = "recovery"
FIRST_PRODUCER_ID = 1000
REPO = Path(__file__).resolve().parent.parent
_HEADER_FIELDS = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at byte 43
_PRODUCER_ID_OFFSET = 43


# ---------------------------------------------------------------------------------- building


def batch_template(batch_bytes: int, record_bytes: int) -> tuple[bytearray, int]:
    """A RecordBatch v2 of exactly ``batch_bytes`` bytes and its record count: ~``record_bytes``
    values, the last value's length adjusted so every batch (and so every segment) has the same size."""
    ts = int(time.time() * 1000)
    value = os.urandom(record_bytes)

    def build(full: int, last: int) -> bytearray:
        builder = DefaultRecordBatchBuilder(2, 0, False, 0, 0, 0, 1 << 30)
        for i in range(full):
            builder.append(i, timestamp=ts + i, key=None, value=value, headers=[])
        builder.append(full, timestamp=ts + full, key=None, value=value[:1] * last, headers=[])
        return bytearray(builder.build())

    full = max(1, batch_bytes // (record_bytes + 16) - 1)
    last = 0
    for _ in range(16):  # converges in a step or two; varint lengths make the size a step function
        size = len(build(full, last))
        if size == batch_bytes:
            return build(full, last), full + 1
        last = max(0, last + batch_bytes - size)
    for candidate in range(max(0, last - 8), last + 8):  # straddling a varint step: try neighbours
        if len(build(full, candidate)) == batch_bytes:
            return build(full, candidate), full + 1
    raise ValueError(f"cannot build a batch of exactly {batch_bytes} bytes")


@dataclass
class BuiltLog:
    path: Path
    batches: int
    records: int
    last_sequences: dict[int, int] = field(default_factory=dict)  # producer id -> last sequence
    tail_segment: Path | None = None  # crashed log: the segment written after the recovery point
    tail_bytes: int = 0


def build_log(path: Path, segment_bytes: int, batches: int, template: bytearray, records_per_batch: int,
              producers: int, crash_tail_batches: int | None = None) -> BuiltLog:
    """Append ``batches`` producer batches round-robin over ``producers`` ids, then shut down cleanly
    or, with ``crash_tail_batches``, checkpoint before the last ones and abandon the log."""
    manager = LogManager(path, BrokerConfig(data_dir=str(path)))
    manager.load()
    manager.create_topic(TOPIC, 1, {"segment.bytes": str(segment_bytes)})
    plog = manager.get_log(TOPIC, 0)
    assert plog is not None
    next_seq = [0] * producers
    checkpoint_at = batches - crash_tail_batches if crash_tail_batches is not None else -1
    for i in range(batches):
        if i == checkpoint_at:
            plog.flush()
            manager.checkpoint()
        p = i % producers
        buf = bytearray(template)
        _HEADER_FIELDS.pack_into(buf, _PRODUCER_ID_OFFSET, FIRST_PRODUCER_ID + p, 0, next_seq[p])
        struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
        plog.append_from_client(buf)
        next_seq[p] += records_per_batch
    built = BuiltLog(path, batches, batches * records_per_batch,
                     {FIRST_PRODUCER_ID + p: s - 1 for p, s in enumerate(next_seq) if s})
    if crash_tail_batches is not None:
        tail = plog.segments[-1]
        if tail.base_offset != checkpoint_at * records_per_batch:
            raise RuntimeError(f"the tail segment starts at {tail.base_offset}, not at the recovery point "
                               f"{checkpoint_at * records_per_batch}: segment sizes do not line up")
        built.tail_segment = tail.log_path.relative_to(path)
        built.tail_bytes = tail.size
        manager.abandon()
    else:
        manager.shutdown()
    os.sync()
    return built


# ---------------------------------------------------------------------------------- measuring


def drop_caches() -> bool:
    """Empty the page cache (root only); False if this machine does not allow it."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        return False
    return True


def plain_read_seconds(path: Path, chunk: int = MIB) -> float:
    fd = os.open(path, os.O_RDONLY)
    started = time.perf_counter()
    try:
        while os.read(fd, chunk):
            pass
    finally:
        os.close(fd)
    return time.perf_counter() - started


@dataclass
class Restart:
    seconds: float
    load_ms: float  # the broker's own "loaded ... in N ms" (LogManager.load)
    log_text: str


def _read_line(proc: subprocess.Popen[str], deadline: float) -> str:
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            return proc.stdout.readline()
        if proc.poll() is not None:
            return ""
    return ""


def _metadata_ok(bootstrap: str, deadline: float) -> RawClient:
    request = MetadataRequest[4](topics=[MetadataRequest[4].MetadataRequestTopic(name=TOPIC)],
                                 allow_auto_topic_creation=False)
    while True:
        try:
            client = RawClient(bootstrap, client_id="bench-recovery", timeout=120)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)
            continue
        response = client.request(request)
        topic = response.topics[0]
        if topic.error_code == 0 and topic.partitions and topic.partitions[0].error_code == 0:
            return client
        client.close()
        if time.monotonic() > deadline:
            raise RuntimeError(f"Metadata for {TOPIC} still failing: {response}")
        time.sleep(0.002)


def _check_loaded(client: RawClient, built: BuiltLog) -> None:
    """Untimed: the whole log and every producer's last sequence must be back."""
    LO = ListOffsetsRequest[4]
    offsets = client.request(LO(replica_id=-1, isolation_level=0, topics=[LO.ListOffsetsTopic(
        name=TOPIC, partitions=[LO.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
    end = offsets.topics[0].partitions[0].offset
    if end != built.records:
        raise RuntimeError(f"log end offset {end} after restart, expected {built.records}")
    DP = DescribeProducersRequest[0]
    described = client.request(DP(topics=[DP.TopicRequest(name=TOPIC, partition_indexes=[0])]))
    producers = {p.producer_id: p.last_sequence for p in described.topics[0].partitions[0].active_producers}
    if producers != built.last_sequences:
        raise RuntimeError(f"{len(producers)} producers after restart, expected {len(built.last_sequences)}; "
                           f"{sum(producers.get(k) != v for k, v in built.last_sequences.items())} differ")


def timed_restart(data_dir: Path, built: BuiltLog, log_file: Path) -> Restart:
    """Seconds from just before Popen to the first good Metadata answer; then verify and SIGTERM."""
    with open(log_file, "w") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "minikafka", "serve", "--port", "0", "--data-dir", str(data_dir),
             "--log-level", "INFO"],
            stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO,
        )
        try:
            deadline = time.monotonic() + 300
            line = ""
            while "listening on" not in line:
                line = _read_line(proc, deadline)
                if not line:
                    raise RuntimeError(f"broker did not start:\n{log_file.read_text()[-3000:]}")
            port = re.search(r"listening on \S+:(\d+)", line)
            assert port is not None
            client = _metadata_ok(f"127.0.0.1:{port.group(1)}", deadline)
            seconds = time.perf_counter() - started
            with client:
                _check_loaded(client, built)
        finally:
            proc.terminate()
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    text = log_file.read_text()
    loaded = re.search(r"loaded \d+ partition\(s\).* in (\d+) ms", text)
    return Restart(seconds, float(loaded.group(1)) if loaded else float("nan"), text)


def expect_clean(r: Restart, data_dir: Path) -> None:
    if "(clean shutdown)" not in r.log_text or "re-validating" in r.log_text or "rebuilt from" in r.log_text:
        raise RuntimeError(f"expected a clean start:\n{r.log_text[-3000:]}")
    if not (data_dir / ".kafka_cleanshutdown").exists():
        raise RuntimeError(f"{data_dir}: no clean-shutdown marker after SIGTERM; the next run would not be clean")


def expect_unclean(r: Restart, tail_batches: int) -> None:
    replay = re.search(r"producer state rebuilt from offset \d+ to \d+ \((\d+) batches replayed\)", r.log_text)
    if ("UNCLEAN shutdown" not in r.log_text or "re-validating 1 segment(s)" not in r.log_text
            or replay is None or int(replay.group(1)) != tail_batches):
        raise RuntimeError(f"expected an unclean start replaying {tail_batches} batches:\n{r.log_text[-3000:]}")


def report(args: argparse.Namespace, tail_bytes: int, seconds: dict[str, list[float]],
           load_ms: dict[str, list[float]]) -> None:
    """Medians (and minimums) per kind; the tail's cost is the median of per-run paired differences
    unclean - clean on the same log size, both as seen by a client and inside the broker."""
    med = {k: statistics.median(v) for k, v in seconds.items()}
    low = {k: min(v) for k, v in seconds.items()}
    ms = {k: statistics.median(v) for k, v in load_ms.items()}
    big, small = f"{args.size_mib} MiB", f"{args.small_mib} MiB"
    print(f"{'':34s} process start -> Metadata    broker: LogManager.load")
    print(f"{'':34s}   median       min           median")
    for key, label in (("clean-small", f"clean restart, {small} log"), ("clean-big", f"clean restart, {big} log"),
                       ("unclean", f"unclean restart, {big} log")):
        print(f"{label:34s} {med[key]:7.3f} s  {low[key]:7.3f} s       {ms[key]:7.0f} ms")
    print(f"{'clean ' + big + ' / ' + small:34s} {med['clean-big'] / med['clean-small']:7.2f}    "
          f"{low['clean-big'] / low['clean-small']:7.2f}           {ms['clean-big'] / ms['clean-small']:7.2f}")
    tail_mib = tail_bytes / MIB
    plain = med["plain"]
    print(f"{f'plain os.read of the {tail_mib:.0f} MiB tail':34s} {plain:7.3f} s  ({tail_mib / plain:.0f} MiB/s)")
    client = statistics.median(u - c for u, c in zip(seconds["unclean"], seconds["clean-big"], strict=True))
    broker = statistics.median(u - c for u, c in zip(load_ms["unclean"], load_ms["clean-big"], strict=True)) / 1000
    for label, extra in (("tail recovery, client-seen", client), ("tail recovery, inside the broker", broker)):
        if extra > 0:
            print(f"{label:34s} {extra:7.3f} s  ({tail_mib / extra:.0f} MiB/s, "
                  f"{plain / extra:.2f} of the plain read's speed)")
        else:
            print(f"{label:34s} {extra:7.3f} s  (not measurable here)")


def fresh_copy(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    os.sync()


# ---------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="the big log (default 1024)")
    parser.add_argument("--small-mib", type=int, default=64, help="the small clean log (default 64)")
    parser.add_argument("--tail-mib", type=int, default=256, help="written after the recovery point (default 256)")
    parser.add_argument("--runs", type=int, default=3, help="timed restarts of each kind per mode (median)")
    parser.add_argument("--producers", type=int, default=1000)
    parser.add_argument("--batch-kib", type=int, default=64, help="bytes per batch (default 64 KiB)")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--dir", type=Path, default=None, help="where to build the logs (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the data dirs")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the in-process builds log every roll and the abandon
    # segment.bytes = the tail, so the tail is exactly the newest segment (see the module docstring)
    segment_bytes = args.tail_mib * MIB
    batch_bytes = args.batch_kib * 1024
    if args.size_mib % args.tail_mib or args.size_mib <= args.tail_mib or segment_bytes % batch_bytes:
        parser.error("--size-mib must be a multiple of --tail-mib (and larger), --batch-kib divide --tail-mib")
    template, records_per_batch = batch_template(batch_bytes, args.record_bytes)
    per_mib = MIB // batch_bytes
    root = Path(tempfile.mkdtemp(prefix="minikafka-recovery-", dir=args.dir))
    began = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{time.monotonic() - began:6.1f}s] {message}", flush=True)

    try:
        progress(f"building logs in {root}: batches of {batch_bytes} bytes ({records_per_batch} records), "
                 f"{args.producers} producers")
        small = build_log(root / "clean-small", segment_bytes, args.small_mib * per_mib, template, records_per_batch,
                          args.producers)
        progress(f"clean {args.small_mib} MiB log built")
        big = build_log(root / "clean-big", segment_bytes, args.size_mib * per_mib, template, records_per_batch, args.producers)
        progress(f"clean {args.size_mib} MiB log built")
        tail_batches = args.tail_mib * per_mib
        crashed = build_log(root / "crashed", segment_bytes, args.size_mib * per_mib, template, records_per_batch,
                            args.producers, crash_tail_batches=tail_batches)
        assert crashed.tail_segment is not None
        progress(f"crashed {args.size_mib} MiB log built ({crashed.tail_bytes} bytes after the recovery point)")
        copy = root / "crashed-copy"
        logs = root / "broker-logs"
        logs.mkdir()

        # Warm-up, untimed: catches a broken setup early and fills the cache with the interpreter's files.
        expect_clean(timed_restart(small.path, small, logs / "warmup.log"), small.path)

        can_drop = drop_caches()
        modes = ["cold", "warm"] if can_drop else ["warm"]
        if not can_drop:
            progress("cannot drop the page cache (not root?): every read below comes from the page cache")
        names = ("plain", "clean-small", "clean-big", "unclean")
        results = {m: {k: [] for k in names} for m in modes}
        load_ms = {m: {k: [] for k in names[1:]} for m in modes}
        for run in range(args.runs):
            for mode in modes:
                cold = mode == "cold"
                r = results[mode]
                fresh_copy(crashed.path, copy)
                if cold:
                    drop_caches()
                r["plain"].append(plain_read_seconds(copy / crashed.tail_segment))
                for name, built in (("clean-small", small), ("clean-big", big)):
                    if cold:
                        drop_caches()
                    restart = timed_restart(built.path, built, logs / f"{mode}-{name}-{run}.log")
                    expect_clean(restart, built.path)
                    r[name].append(restart.seconds)
                    load_ms[mode][name].append(restart.load_ms)
                if cold:
                    drop_caches()
                restart = timed_restart(copy, crashed, logs / f"{mode}-unclean-{run}.log")
                expect_unclean(restart, tail_batches)
                r["unclean"].append(restart.seconds)
                load_ms[mode]["unclean"].append(restart.load_ms)
                progress(f"run {run + 1} {mode}: plain read {r['plain'][-1]:.3f}s, clean {args.small_mib} MiB "
                         f"{r['clean-small'][-1]:.3f}s, clean {args.size_mib} MiB {r['clean-big'][-1]:.3f}s, "
                         f"unclean {args.size_mib} MiB {r['unclean'][-1]:.3f}s")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    print()
    print(f"partition: {args.producers} producers, batches of {batch_bytes} bytes ({records_per_batch} records of "
          f"~{args.record_bytes} B), segment.bytes {args.tail_mib} MiB, {args.runs} run(s) of each")
    for mode in modes:
        print(f"-- {mode} page cache" + (" (dropped before every read and restart)" if mode == "cold" else ""))
        report(args, crashed.tail_bytes, results[mode], load_ms[mode])
    print(f"total {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
