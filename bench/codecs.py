"""Record decompression and varint decoding, side by side: can the broker and the Spark reader share one stack?

The broker decompresses a batch's records section through kafka-python's ``kafka.codec`` (zlib,
python-snappy, lz4, zstandard: :func:`minikafka.storage.records.decompress`, which returns
``bytes``); the Spark reader through zlib and cramjam (:func:`minikafka.spark_export.codecs.decompress`,
which returns cramjam's buffer). Both decode the same bytes here, in one run: a records section
of ~1 KiB JSON-like values built by kafka-python's batch builder, compressed as producers do
(snappy both raw and in the Java producer's xerial framing). Each number is the median of
``--repeat`` decodes; a ratio is broker time / cramjam time (above 1: cramjam is faster).
"cramjam as bytes" adds the copy the broker's record walkers would need (they index and slice
``bytes``; cramjam's buffer is neither indexable nor sliceable).

Varints: the zig-zag varints of a records section (lengths, deltas) decoded one at a time by
storage's one decoder (``storage/records.py`` ``read_varint``: one- and two-byte varints without a
loop, as the cleaner's copy had), the plain loop ``storage/records.py`` had before, and
kafka-python's ``decode_varint``. (The Spark reader decodes the varints of many batches at once
with numpy; a scalar decoder is no substitute for that, nor it for one.)

Usage: ``python bench/codecs.py [--size MiB] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kafka import codec as kc
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import decode_varint, encode_varint

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minikafka.spark_export import codecs as cramjam_stack  # noqa: E402
from minikafka.storage import records as broker_stack  # noqa: E402
from minikafka.storage.batch import HEADER_SIZE  # noqa: E402


def records_section(size: int) -> bytes:
    """The uncompressed records section of one batch of ~``size`` bytes of JSON-like records."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=size + 4096)
    i = 0
    while builder.size() < size:
        value = (f'{{"order": {i}, "customer": "c-{i % 977:05d}", "amount": {i * 37 % 10000 / 100:.2f}, '
                 f'"items": [{", ".join(str(i * k % 101) for k in range(40))}], "note": "{"x" * (i % 300)}"}}')
        builder.append(i, timestamp=1_700_000_000_000 + i, key=f"k{i % 1000}".encode(), value=value.encode(),
                       headers=[("source", b"bench")])
        i += 1
    return bytes(builder.build())[HEADER_SIZE:]


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_decompression(raw: bytes, repeat: int) -> None:
    compressed = {
        "gzip": (1, kc.gzip_encode(raw)),
        "snappy (raw block)": (2, kc.snappy_encode(raw, xerial_compatible=False)),
        "snappy (xerial)": (2, kc.snappy_encode(raw, xerial_compatible=True)),
        "lz4 (frame)": (3, kc.lz4_encode(raw)),
        "zstd": (4, kc.zstd_encode(raw)),
    }
    print(f"decompression of a {len(raw) / 2**20:.2f} MiB records section, median of {repeat}")
    print(f"{'codec':<20}{'compressed':>12}{'kafka.codec ms':>16}{'cramjam ms':>12}{'ratio':>8}"
          f"{'cramjam as bytes ms':>21}{'ratio':>8}")
    for name, (codec, data) in compressed.items():
        assert broker_stack.decompress(codec, data) == raw
        assert bytes(cramjam_stack.decompress(codec, data)) == raw
        broker = median_seconds(lambda c=codec, d=data: broker_stack.decompress(c, d), repeat)
        cram = median_seconds(lambda c=codec, d=data: cramjam_stack.decompress(c, d), repeat)
        copied = median_seconds(lambda c=codec, d=data: bytes(cramjam_stack.decompress(c, d)), repeat)
        print(f"{name:<20}{len(data):>12}{broker * 1000:>16.3f}{cram * 1000:>12.3f}{broker / cram:>8.2f}"
              f"{copied * 1000:>21.3f}{broker / copied:>8.2f}")


def walk(decode: Callable[[bytes, int], tuple[int, int]], data: bytes, count: int) -> int:
    pos = total = 0
    for _ in range(count):
        value, pos = decode(data, pos)
        total += value
    return total


def kafka_python_varint(data: bytes, pos: int) -> tuple[int, int]:
    value, pos = decode_varint(data, pos)
    return value, pos


def bench_varints(raw: bytes, repeat: int) -> None:
    # the varints a records section holds: record lengths (~1 KiB), deltas (small), key/value lengths
    values = [v for i in range(len(raw) // 16) for v in (1000 + i % 300, i % 64, -1, 5, 900 + i % 200)]
    data = bytearray()
    for v in values:
        encode_varint(v, data.append)
    data = bytes(data)
    decoders = {
        "read_varint (storage's one)": broker_stack.read_varint,
        "the loop it replaces": broker_stack.read_varint_loop,  # records.py's decoder before, unchanged
        "kafka-python decode_varint": kafka_python_varint,
    }
    expected = sum(values)
    print(f"\nzig-zag varints: {len(values)} values ({len(data)} bytes), median of {repeat}")
    print(f"{'decoder':<30}{'ms':>10}{'ns/varint':>12}")
    for name, fn in decoders.items():
        assert walk(fn, data, len(values)) == expected, name
        seconds = median_seconds(lambda f=fn: walk(f, data, len(values)), repeat)
        print(f"{name:<30}{seconds * 1000:>10.2f}{seconds * 1e9 / len(values):>12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=float, default=1.0, help="records section size in MiB (default 1)")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    raw = records_section(int(args.size * 2**20))
    bench_decompression(raw, args.repeat)
    bench_varints(raw, args.repeat)


if __name__ == "__main__":
    main()
