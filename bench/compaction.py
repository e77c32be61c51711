"""Log cleaner throughput: one cleaning beside a plain sequential read + write of the same bytes.

A compacted partition is filled with batches of 100 records (``--value`` bytes each) over
``--keys`` distinct keys, rolled at 8 MiB segments, so most records are shadowed by later ones.
Each run copies that log to a fresh directory (not timed), then, in alternating order:

* the cleaner: ``LogCleaner.clean_once`` (offset map, filtering, rebuilt batches, fsynced
  ``.cleaned`` files, the swap), synchronously on this thread, without an I/O bound;
* the baseline: the same segment files read sequentially in 1 MiB chunks and written to one file,
  fsynced — the least any cleaning of those bytes must do.

Both are reported as MiB/s of input segment bytes, with their ratio.

Usage: ``python bench/compaction.py [--size MiB] [--keys N] [--value BYTES] [--repeat N] [--dir PATH]``.
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
from minikafka.storage.cleaner import LogCleaner  # noqa: E402
from minikafka.storage.log import PartitionLog  # noqa: E402

MIB = 1 << 20
TS = 1_700_000_000_000


def config() -> dict[str, object]:
    cfg = BrokerConfig().topic_defaults()
    cfg.update({"cleanup.policy": "compact", "segment.bytes": 8 * MIB, "min.cleanable.dirty.ratio": 0.0})
    return cfg


def fill(directory: Path, size: int, keys: int, value_size: int) -> int:
    plog = PartitionLog.open("bench", 0, directory, config())
    value = os.urandom(value_size)
    n = 0
    while plog.size_bytes < size:
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
        for i in range(100):
            builder.append(i, TS + n, b"key-%08d" % ((n * 7919) % keys), value, [])
            n += 1
        plog.append_from_client(bytearray(builder.build()))
    plog.roll()
    total = sum(s.size for s in plog.segments)
    plog.close()
    return total


def segment_files(directory: Path) -> list[Path]:
    files = sorted(directory.glob("*.log"))
    return files[:-1]  # the active (empty) segment is not cleaned


def baseline(src: Path, out: Path) -> tuple[float, int]:
    started = time.perf_counter()
    moved = 0
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for path in segment_files(src):
            with open(path, "rb", buffering=0) as f:
                while chunk := f.read(MIB):
                    os.write(fd, chunk)
                    moved += len(chunk)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - started, moved


def clean(directory: Path) -> tuple[float, int, int]:
    plog = PartitionLog.open("bench", 0, directory, config())
    cleaner = LogCleaner(directory.parent, lambda: [plog], lambda: TS + 10**9)
    started = time.perf_counter()
    result = cleaner.clean_once()
    seconds = time.perf_counter() - started
    plog.close()
    assert result is not None
    return seconds, result.bytes_read, result.bytes_written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="MiB of log to clean (default 64)")
    parser.add_argument("--keys", type=int, default=20000, help="distinct keys (default 20000)")
    parser.add_argument("--value", type=int, default=100, help="value bytes per record (default 100)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where to put the logs (default: a temp dir)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="mk-compaction-", dir=args.dir))
    try:
        seed = root / "seed" / "bench-0"
        total = fill(seed, args.size * MIB, args.keys, args.value)
        print(f"log: {total / MIB:.1f} MiB in {len(segment_files(seed))} segments, {args.keys} keys, "
              f"{args.value}-byte values, {args.repeat} run(s)")
        ratios = []
        for run in range(args.repeat):
            work = root / f"run-{run}" / "bench-0"
            shutil.copytree(seed, work)
            if run % 2:
                cs, read, written = clean(work)
                bs, moved = baseline(seed, root / "plain.bin")
            else:
                bs, moved = baseline(seed, root / "plain.bin")
                cs, read, written = clean(work)
            ratio = (read / cs) / (moved / bs)
            ratios.append(ratio)
            print(f"run {run + 1}: cleaner {read / MIB / cs:7.1f} MiB/s ({read / MIB:.1f} MiB read, "
                  f"{written / MIB:.1f} MiB written)  read+write {moved / MIB / bs:7.1f} MiB/s  ratio {ratio:.3f}")
            shutil.rmtree(work.parent)
        print(f"median ratio cleaner / plain read+write: {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
