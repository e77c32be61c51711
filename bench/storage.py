"""Storage throughput: PartitionLog append/read beside plain os.write/os.pread of the same bytes.

Each append is one 1 MiB batch of 1 KiB records (built once with kafka-python's batch builder,
re-used with a fresh copy per append as the Produce handler would hand it over). The baseline
writes the same bytes with one ``os.write`` each to a file in the same directory, in the same run,
so the ratio compares like with like on this disk. Reads: ``PartitionLog.read`` of 1 MiB at a time
from offset 0 to the end versus ``os.pread`` of the same sizes from the baseline file.

Usage: ``python bench/storage.py [--size MiB] [--dir PATH] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minikafka.config import BrokerConfig  # noqa: E402
from minikafka.storage.log import PartitionLog  # noqa: E402

MIB = 1 << 20


def build_batch(target: int = MIB, record: int = 1024) -> bytes:
    """An idempotent-less batch of ~``target`` bytes with ``record``-byte values."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    value = os.urandom(record)
    ts = int(time.time() * 1000)
    i = 0
    while builder.size_in_bytes(i, ts, None, value, []) + builder.size() < target - 64:
        builder.append(i, ts, None, value, [])
        i += 1
    return bytes(builder.build())


def bench_append(directory: Path, batch: bytes, count: int) -> tuple[float, float, PartitionLog, Path]:
    """Interleaved: plain write of batch i, then append of batch i, so both meet the same
    page-cache and writeback conditions. Returns (plain seconds, PartitionLog seconds, ...)."""
    config = BrokerConfig().topic_defaults()
    plog = PartitionLog.open("bench", 0, directory / "bench-0", config)
    plain_path = directory / "plain.bin"
    fd = os.open(plain_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    plain = ours = 0.0
    clock = time.perf_counter
    for i in range(count):
        buf = bytearray(batch)  # the Produce handler owns a fresh buffer per request
        if i % 2:  # alternate which goes first, so neither always meets a fresh writeback wave
            t0 = clock()
            os.write(fd, buf)
            t1 = clock()
            plog.append_from_client(buf)
            t2 = clock()
            plain += t1 - t0
            ours += t2 - t1
        else:
            t0 = clock()
            plog.append_from_client(buf)
            t1 = clock()
            os.write(fd, buf)
            t2 = clock()
            ours += t1 - t0
            plain += t2 - t1
    os.close(fd)
    return plain, ours, plog, plain_path


def bench_read(plog: PartitionLog, plain_path: Path, chunk: int) -> tuple[float, float, int]:
    """Interleaved like :func:`bench_append`: ``PartitionLog.read`` of up to ``chunk`` bytes from
    the next offset, and ``os.pread`` of as many bytes from the plain file."""
    fd = os.open(plain_path, os.O_RDONLY)
    plain = ours = 0.0
    clock = time.perf_counter
    offset = pos = total = 0
    i = 0
    data: bytes | memoryview = b""
    copy: bytes = b""
    while offset < plog.log_end_offset:
        i += 1
        # Both results stay alive until the next round, so both meet the same allocator state.
        if i % 2:
            t0 = clock()
            data = plog.read(offset, chunk)
            t1 = clock()
            copy = os.pread(fd, len(data), pos)
            t2 = clock()
            ours += t1 - t0
            plain += t2 - t1
        else:
            t0 = clock()
            copy = os.pread(fd, chunk, pos)
            t1 = clock()
            data = plog.read(offset, chunk)
            t2 = clock()
            plain += t1 - t0
            ours += t2 - t1
        assert len(copy) >= len(data) > 0
        pos += len(data)
        total += len(data)
        view = memoryview(data)
        at = 0
        while at < len(view):  # the next offset follows the last batch returned
            last = int.from_bytes(view[at : at + 8], "big") + int.from_bytes(view[at + 23 : at + 27], "big")
            at += 12 + int.from_bytes(view[at + 8 : at + 12], "big")
        offset = last + 1
    os.close(fd)
    return plain, ours, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="MiB appended per run (default 256)")
    parser.add_argument("--dir", type=Path, default=None, help="directory on the disk to test (default: tmp)")
    parser.add_argument("--repeat", type=int, default=5, help="runs; the verdict uses the median ratio")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    batch = build_batch()
    count = max(1, args.size)
    print(f"batch: {len(batch)} bytes, {count} appends per run, {args.repeat} run(s)")
    append_ratios: list[float] = []
    read_ratios: list[float] = []
    for run in range(args.repeat):
        directory = Path(tempfile.mkdtemp(prefix="minikafka-bench-", dir=args.dir))
        try:
            plain_w, ours_w, plog, plain_path = bench_append(directory, batch, count)
            plain_r, ours_r, total = bench_read(plog, plain_path, len(batch))
            plog.close()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        mib = count * len(batch) / MIB
        ratio_w, ratio_r = plain_w / ours_w, plain_r / ours_r
        append_ratios.append(ratio_w)
        read_ratios.append(ratio_r)
        print(f"run {run + 1}: append {mib / ours_w:8.0f} MiB/s vs os.write {mib / plain_w:8.0f} MiB/s "
              f"(ratio {ratio_w:.3f}); read {total / MIB / ours_r:8.0f} MiB/s vs os.pread "
              f"{total / MIB / plain_r:8.0f} MiB/s (ratio {ratio_r:.3f})")
    append, read = statistics.median(append_ratios), statistics.median(read_ratios)
    verdict = "OK" if append >= 0.8 and read >= 0.8 else "BELOW TARGET"
    print(f"median of {args.repeat} runs: append ratio {append:.3f} (min {min(append_ratios):.3f}), "
          f"read ratio {read:.3f} (min {min(read_ratios):.3f}); target >= 0.8: {verdict}")


if __name__ == "__main__":
    main()
