"""The Spark exporter's reading and planning code, exercised without a SparkSession.

Log directories are written with Kafka's layout by ``LogDirWriter`` from producer batches built by
kafka-python; expected records come from kafka-python's own batch reader.
"""

from __future__ import annotations

import os
import random
import re
import struct
from pathlib import Path

import cramjam
import numpy as np
import pytest

from minikafka.spark_export.arrow_build import arrow_schema
from minikafka.spark_export.codecs import XERIAL_MAGIC, CodecError, decompress
from minikafka.spark_export.errors import DataLossError, ExportOptionError
from minikafka.spark_export.files import LocalFiles
from minikafka.spark_export.indexes import OffsetIndex, TimeIndex
from minikafka.spark_export.layout import list_partitions
from minikafka.spark_export.offsets import log_end_offset, offset_for_timestamp
from minikafka.spark_export.options import parse_options
from minikafka.spark_export.planner import plan, plan_read
from minikafka.spark_export.records import RecordFormatError, decode_records
from minikafka.spark_export.scan import CHUNK_BYTES
from minikafka.spark_export.slice_reader import SliceReader, read_slices
from minikafka.storage.batch import BatchHeader, compute_crc
from tests.spark.spark_helpers import LogDirWriter, build_batch, control_batch, expected_rows

T0 = 1_700_000_000_000
COLUMNS = ["topic", "partition", "offset", "key", "value", "timestamp_ms", "timestampType", "headers"]


def random_records(rng: random.Random, n: int, ts: int, headers: bool = True) -> list:
    out = []
    for i in range(n):
        key = None if rng.random() < 0.15 else os.urandom(rng.randint(0, 24))
        value = None if rng.random() < 0.1 else os.urandom(rng.choice([0, 5, 90, 700, 3000]))
        hdrs = [(f"h{j}-é", None if rng.random() < 0.3 else os.urandom(rng.randint(0, 9)))
                for j in range(rng.randint(0, 3))] if headers else []
        out.append((key, value, ts + rng.randint(-50, 500) + i, hdrs))
    return out


def read_all(root: str, **options: str) -> list[dict]:
    opts = parse_options({"path": root, "includeHeaders": "true", "includeProducerFields": "true", **options})
    schema = arrow_schema(True, True)
    rows = []
    for sl in plan(opts):
        for rb in SliceReader(sl, schema, opts.fail_on_data_loss, opts.storage.files()):
            assert rb.schema == schema
            for r in rb.to_pylist():
                r["timestamp_ms"] = int(r.pop("timestamp").timestamp() * 1000)
                if r["headers"] is not None:
                    r["headers"] = [(h["key"], h["value"]) for h in r["headers"]]
                rows.append(r)
    return rows


def project(rows: list[dict], cols: list[str] = COLUMNS) -> list[tuple]:
    return sorted((tuple(r[c] for c in cols) for r in rows), key=lambda t: (t[0], t[1], t[2]))


def raw_snappy(batch: bytearray) -> bytearray:
    """Re-compress an uncompressed batch's records as one raw snappy block (librdkafka's form)."""
    header = BatchHeader.parse(batch)
    assert header.compression == 0
    body = bytes(cramjam.snappy.compress_raw(bytes(batch[61:])))
    out = bytearray(batch[:61]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, header.attributes | 2)
    struct.pack_into(">I", out, 17, compute_crc(out, 0, len(out)))
    return out


# -- codecs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_codec_decodes_to_the_records_the_producer_wrote(tmp_path, codec):
    rng = random.Random(codec)
    w = LogDirWriter(tmp_path)
    for b in range(12):
        w.append("t", 0, build_batch(random_records(rng, rng.randint(1, 60), T0 + b * 1000), codec=codec))
    w.close()
    got = read_all(str(tmp_path))
    assert len(got) > 100
    assert project(got) == project(expected_rows(str(tmp_path)))


def test_xerial_framed_and_raw_snappy_both_decode():
    payload = os.urandom(5000) * 20
    xerial = bytearray(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for i in range(0, len(payload), 32 * 1024):
        block = bytes(cramjam.snappy.compress_raw(payload[i : i + 32 * 1024]))
        xerial += struct.pack(">i", len(block)) + block
    assert bytes(decompress(2, xerial)) == payload
    assert bytes(decompress(2, bytes(cramjam.snappy.compress_raw(payload)))) == payload


def test_raw_snappy_batches_as_librdkafka_writes_them_are_read(tmp_path):
    rng = random.Random(7)
    w = LogDirWriter(tmp_path)
    for b in range(5):
        w.append("t", 0, raw_snappy(build_batch(random_records(rng, 30, T0 + b))))
    w.close()
    assert project(read_all(str(tmp_path))) == project(expected_rows(str(tmp_path)))
    assert len(read_all(str(tmp_path))) == 150


def test_truncated_compressed_stream_is_a_codec_error():
    good = bytes(cramjam.zstd.compress(b"x" * 10000))
    with pytest.raises(CodecError):
        decompress(4, good[: len(good) // 2])
    with pytest.raises(CodecError):
        decompress(6, good)


# -- record decoding --------------------------------------------------------------------------------


@pytest.mark.parametrize("walk", ["python", "lockstep", "uniform"])
def test_decoder_matches_kafka_python_on_random_batches(walk):
    from kafka.record.default_records import DefaultRecordBatch

    rng = random.Random(11)
    sections, counts, base_ts, expected = [], [], [], []
    for _ in range(30):
        recs = random_records(rng, rng.randint(1, 80), T0)
        batch = bytes(build_batch(recs))
        sections.append(batch[61:])
        counts.append(len(recs))
        base_ts.append(BatchHeader.parse(batch).base_timestamp)
        for rec in DefaultRecordBatch(batch):
            expected.append((rec.offset, rec.timestamp, rec.key, rec.value, [(k, v) for k, v in rec.headers]))
    cols = decode_records(sections, counts, walk=walk)
    data = cols.data.tobytes()

    def cut(pos, length):
        return None if length < 0 else data[pos : pos + length]

    got, h = [], 0
    for i in range(len(cols)):
        headers = []
        for _ in range(int(cols.header_count[i])):
            headers.append((cut(cols.header_key_pos[h], cols.header_key_len[h]).decode(),
                            cut(cols.header_value_pos[h], cols.header_value_len[h])))
            h += 1
        got.append((int(cols.offset_delta[i]), base_ts[cols.batch[i]] + int(cols.timestamp_delta[i]),
                    cut(cols.key_pos[i], cols.key_len[i]), cut(cols.value_pos[i], cols.value_len[i]), headers))
    assert got == expected


def test_batches_of_same_size_records_decode_as_the_record_walk_does():
    rng = random.Random(5)
    sections, counts = [], []
    for b in range(12):
        n = rng.randint(2, 40)
        if b % 3 == 2:  # sizes vary: these batches are walked
            recs = random_records(rng, n, T0)
        else:  # one key and value size per batch, contents and header values differ
            size = rng.randint(0, 300)
            recs = [(b"k%03d" % i, rng.randbytes(size), T0 + i, [("h", rng.randbytes(3))]) for i in range(n)]
        sections.append(bytes(build_batch(recs))[61:])
        counts.append(n)
    walked = decode_records(sections, counts, walk="python")
    proven = decode_records(sections, counts, walk="uniform")
    for name in walked.__slots__:
        assert np.array_equal(getattr(walked, name), getattr(proven, name)), name
    # a same-size guess that a record's length varint contradicts is not taken
    tampered = bytearray(sections[0])
    stride = len(tampered) // counts[0]
    tampered[stride] ^= 0x02  # the second record claims one byte more or less
    with pytest.raises(RecordFormatError) as info:
        decode_records([bytes(tampered), *sections[1:]], counts, walk="uniform")
    assert info.value.batch == 0


def test_timestamp_deltas_are_decoded_including_negative_ones():
    recs = [(b"k", b"v", T0 + d, []) for d in (0, -5, 100000, 3, -(1 << 40))]
    batch = bytes(build_batch(recs))
    header = BatchHeader.parse(batch)
    cols = decode_records([batch[61:]], [len(recs)])
    assert [header.base_timestamp + int(d) for d in cols.timestamp_delta] == [r[2] for r in recs]


@pytest.mark.parametrize("walk", ["python", "lockstep", "uniform"])
@pytest.mark.parametrize("damage", ["short", "long", "count", "negative"])
def test_malformed_records_name_the_bad_batch(damage, walk):
    good = bytes(build_batch([(b"k", b"value", T0, [])] * 3))[61:]
    bad = bytes(build_batch([(b"k", b"value", T0, [("h", b"x")])] * 3))[61:]
    counts = [3, 3, 3]
    if damage == "short":
        bad = bad[:-3]
    elif damage == "long":
        bad = bad + b"\x00\x00"
    elif damage == "count":
        counts = [3, 4, 3]
    else:
        bad = b"\x03" + bad[1:]  # zig-zag -2: a negative record length
    with pytest.raises(RecordFormatError) as info:
        decode_records([good, bad, good], counts, walk=walk)
    assert info.value.batch == 1


@pytest.mark.parametrize("walk", ["python", "lockstep", "uniform"])
def test_random_damage_to_records_never_escapes_as_anything_but_a_format_error(walk):
    rng = random.Random(walk)
    batches = [bytes(build_batch(random_records(rng, rng.randint(1, 12), T0))) for _ in range(4)]
    sections = [b[61:] for b in batches]
    counts = [BatchHeader.parse(b).records_count for b in batches]
    for _ in range(400):
        damaged = [bytearray(sec) for sec in sections]
        target = damaged[rng.randrange(len(damaged))]
        for _ in range(rng.randint(1, 3)):
            target[rng.randrange(len(target))] = rng.randrange(256)
        try:
            cols = decode_records([bytes(d) for d in damaged], counts, walk=walk)
        except RecordFormatError:
            continue
        limit = len(cols.data)
        for pos, length in ((cols.key_pos, cols.key_len), (cols.value_pos, cols.value_len),
                            (cols.header_key_pos, cols.header_key_len)):
            assert ((pos + length.clip(0)) <= limit).all()


def test_record_whose_fields_overrun_its_length_is_rejected():
    section = bytearray(bytes(build_batch([(b"key", b"value", T0, [])]))[61:])
    # key length varint sits after length(1) attrs(1) tsDelta(1) offDelta(1): claim 10 bytes of key
    section[4] = 20
    with pytest.raises(RecordFormatError):
        decode_records([bytes(section)], [1])


# -- indexes ----------------------------------------------------------------------------------------


def test_preallocated_zero_index_entries_are_ignored(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(struct.pack(">iiii", 5, 4100, 9, 8300) + bytes(8 * 100))
    index = OffsetIndex.load(LocalFiles(""), str(path), 100, 10_000)
    assert index.offsets == [105, 109] and index.positions == [4100, 8300]
    assert index.floor(104) is None and index.floor(107) == (105, 4100) and index.floor(500) == (109, 8300)
    # entries pointing past the end of the log are not trusted
    assert OffsetIndex.load(LocalFiles(""), str(path), 100, 8000).positions == [4100]
    tpath = tmp_path / "00000000000000000100.timeindex"
    tpath.write_bytes(struct.pack(">qiqi", T0, 5, T0 + 9, 9) + bytes(12 * 50))
    tindex = TimeIndex.load(LocalFiles(""), str(tpath), 100)
    assert tindex.timestamps == [T0, T0 + 9] and tindex.offsets == [105, 109]
    assert tindex.last_below(T0) is None and tindex.last_below(T0 + 1) == (T0, 105)


# -- whole-directory reads --------------------------------------------------------------------------


def kafka_style_dir(tmp_path, rng: random.Random, segment_bytes: int = 30_000) -> LogDirWriter:
    w = LogDirWriter(tmp_path, segment_bytes=segment_bytes, index_interval=2000)
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    for b in range(80):
        recs = random_records(rng, rng.randint(1, 25), T0 + b * 1000)
        w.append("orders", b % 2, build_batch(recs, codec=codecs[b % 5], producer_id=77, producer_epoch=2,
                                              base_sequence=b * 100))
        if b % 9 == 0:
            w.append("orders", b % 2, control_batch(77, 2, T0 + b * 1000))
        if b % 13 == 0:
            w.skip_offsets("orders", b % 2, 5)
    w.append("__consumer_offsets", 0, build_batch([(b"g", b"o", T0, [])]))
    return w


def add_kafka_clutter(root: str) -> None:
    """Files a Kafka broker keeps next to the segments, which the reader must ignore."""
    with open(os.path.join(root, "meta.properties"), "w") as f:
        f.write("version=1\ncluster.id=abc\nnode.id=1\n")
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        with open(os.path.join(root, name), "w") as f:
            f.write("0\n0\n")
    os.makedirs(os.path.join(root, "orders-0.0123456789abcdef0123456789abcdef-delete"))
    os.makedirs(os.path.join(root, "__cluster_metadata-0"))
    with open(os.path.join(root, "minikafka-topics.json"), "w") as f:
        f.write("{}")
    part = os.path.join(root, "orders-0")
    for name in ("00000000000000000000.snapshot", "leader-epoch-checkpoint", "partition.metadata",
                 "00000000000000000000.txnindex", "00000000000000000003.log.deleted"):
        with open(os.path.join(part, name), "wb") as f:
            f.write(b"\x00garbage")


def test_kafka_layout_with_clutter_control_batches_and_gaps_reads_every_record(tmp_path):
    w = kafka_style_dir(tmp_path, random.Random(5))
    w.close(clean=False)
    add_kafka_clutter(str(tmp_path))
    got = read_all(str(tmp_path))
    exp = expected_rows(str(tmp_path), topics=["orders"])
    assert project(got) == project(exp)
    assert len(w.segments("orders", 0)) > 3
    cols = ["offset", "producerId", "producerEpoch", "sequence", "isTransactional"]
    assert project(got, cols) == project(exp, cols)
    offsets = sorted(r["offset"] for r in got if r["partition"] == 0)
    assert any(b - a > 1 for a, b in zip(offsets, offsets[1:], strict=False))  # gaps (control batches, skips)
    assert not any(r["topic"].startswith("__") for r in got)
    internal = read_all(str(tmp_path), subscribe="__consumer_offsets")
    assert [(r["key"], r["value"]) for r in internal] == [(b"g", b"o")]


def test_log_append_time_batches_take_the_broker_time(tmp_path):
    w = LogDirWriter(tmp_path, log_append_time_ms=T0 + 777)
    w.append("t", 0, build_batch([(b"a", b"1", T0, []), (b"b", b"2", T0 + 5, [])], codec="lz4"))
    w.close()
    got = read_all(str(tmp_path))
    assert [(r["timestamp_ms"], r["timestampType"]) for r in got] == [(T0 + 777, 1), (T0 + 777, 1)]
    assert project(got) == project(expected_rows(str(tmp_path)))


def test_sequence_wraps_past_int32_max(tmp_path):
    w = LogDirWriter(tmp_path)
    w.append("t", 0, build_batch([(None, b"v", T0, [])] * 4, producer_id=5, producer_epoch=0,
                                  base_sequence=2147483646))
    w.close()
    assert [r["sequence"] for r in read_all(str(tmp_path))] == [2147483646, 2147483647, 0, 1]


def test_log_end_offset_ignores_a_torn_tail(tmp_path):
    w = LogDirWriter(tmp_path)
    for _ in range(4):
        w.append("t", 0, build_batch([(b"k", b"v" * 100, T0, [])] * 10))
    w.close()
    seg = w.segments("t", 0)[0]
    with open(seg, "ab") as f:
        f.write(bytes(build_batch([(b"k", b"v" * 100, T0, [])] * 10))[:70])
    assert log_end_offset(LocalFiles(str(tmp_path)), list_partitions(LocalFiles(str(tmp_path)))[0]) == 40
    assert len(read_all(str(tmp_path))) == 40


@pytest.mark.parametrize("fail", ["true", "false"])
def test_corrupt_batch_fails_or_is_skipped_by_failOnDataLoss(tmp_path, fail):
    w = LogDirWriter(tmp_path)
    for b in range(5):
        w.append("t", 0, build_batch([(b"k%d" % b, b"v" * 50, T0, [])] * 3, codec="gzip" if b % 2 else "none"))
    w.close()
    seg = w.segments("t", 0)[0]
    data = bytearray(Path(seg).read_bytes())
    # flip one byte inside the records of the third batch
    pos = 0
    for _ in range(2):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    data[pos + 70] ^= 0xFF
    Path(seg).write_bytes(data)
    if fail == "true":
        with pytest.raises(DataLossError, match="CRC mismatch"):
            read_all(str(tmp_path))
    else:
        got = read_all(str(tmp_path), failOnDataLoss="false")
        assert sorted({r["key"] for r in got}) == [b"k0", b"k1", b"k3", b"k4"]
        assert [r["offset"] for r in got] == [0, 1, 2, 3, 4, 5, 9, 10, 11, 12, 13, 14]


def test_batches_kept_while_the_rest_of_the_segment_is_read_keep_their_records(tmp_path):
    """The reader reuses its read buffers; batches already handed out must not change."""
    rng = random.Random(3)
    w = LogDirWriter(tmp_path)
    for _ in range(3 * CHUNK_BYTES // (8 << 16)):  # three read buffers' worth of 64 KiB values
        w.append("t", 0, build_batch([(b"k", rng.randbytes(1 << 16), T0, [])] * 8))
    w.close()
    opts = parse_options({"path": str(tmp_path)})
    schema = arrow_schema(False, False)
    (sl,) = plan(opts)
    kept = list(SliceReader(sl, schema, True, opts.storage.files()))
    assert len(kept) > 3
    got = [(r["offset"], r["key"], r["value"]) for rb in kept for r in rb.to_pylist()]
    assert got == [(r["offset"], r["key"], r["value"]) for r in expected_rows(str(tmp_path))]


@pytest.mark.parametrize("fail", ["true", "false"])
def test_malformed_records_under_a_good_crc_are_reported_as_the_decoder_finds_them(tmp_path, fail):
    batches = [bytearray(build_batch([(b"k%d" % b, b"v" * 50, T0, [])] * 3)) for b in range(4)]
    batches[2][61] = 0x03  # the first record's length: zig-zag -2
    struct.pack_into(">I", batches[2], 17, compute_crc(batches[2], 0, len(batches[2])))
    with pytest.raises(RecordFormatError) as info:
        decode_records([bytes(b[61:]) for b in batches], [3] * 4)
    assert info.value.batch == 2
    w = LogDirWriter(tmp_path)
    for b in batches:
        w.append("t", 0, b)
    w.close()
    if fail == "true":
        with pytest.raises(DataLossError, match=re.escape(f"batch at offset 6: {info.value}")):
            read_all(str(tmp_path))
    else:
        got = read_all(str(tmp_path), failOnDataLoss="false")
        assert [r["offset"] for r in got] == [0, 1, 2, 3, 4, 5, 9, 10, 11]


def test_damaged_length_resyncs_at_the_next_index_entry(tmp_path):
    w = LogDirWriter(tmp_path, index_interval=500)
    for b in range(10):
        w.append("t", 0, build_batch([(b"k%d" % b, b"v" * 300, T0, [])] * 2))
    w.close()
    seg = w.segments("t", 0)[0]
    data = bytearray(Path(seg).read_bytes())
    struct.pack_into(">i", data, 8, 3)  # first batch: impossible length
    Path(seg).write_bytes(data)
    with pytest.raises(DataLossError, match="invalid batch"):
        read_all(str(tmp_path))
    got = read_all(str(tmp_path), failOnDataLoss="false")
    first_indexed = w.index_entries("t", 0)[0][0][0] - 1  # last offset of the batch at the entry
    assert got and got[0]["offset"] > 0 and got[-1]["offset"] == 19
    assert got[0]["offset"] == first_indexed


def test_missing_segment_is_data_loss(tmp_path):
    w = LogDirWriter(tmp_path, segment_bytes=2000)
    for _b in range(10):
        w.append("t", 0, build_batch([(b"k", b"v" * 400, T0, [])] * 2))
    w.close()
    opts = parse_options({"path": str(tmp_path)})
    slices = plan(opts)
    os.remove(slices[1].log_path)
    with pytest.raises(DataLossError, match="no longer exists"):
        list(SliceReader(slices[1], arrow_schema(False, False), True, LocalFiles(str(tmp_path))))
    assert list(SliceReader(slices[1], arrow_schema(False, False), False, LocalFiles(str(tmp_path)))) == []


# -- offsets, timestamps and planning ---------------------------------------------------------------


def test_starting_and_ending_offsets_json(tmp_path):
    w = kafka_style_dir(tmp_path, random.Random(9))
    w.close()
    exp = expected_rows(str(tmp_path), topics=["orders"])
    got = read_all(str(tmp_path), subscribe="orders", startingOffsets='{"orders":{"0":40,"1":-2}}',
                   endingOffsets='{"orders":{"0":-1,"1":101}}')
    want = [r for r in exp if (r["partition"] == 0 and r["offset"] >= 40) or (r["partition"] == 1 and r["offset"] < 101)]
    assert project(got) == project(want)


def test_offset_json_must_name_every_partition(tmp_path):
    w = kafka_style_dir(tmp_path, random.Random(9))
    w.close()
    with pytest.raises(ExportOptionError, match="must specify all TopicPartitions"):
        plan(parse_options({"path": str(tmp_path), "subscribe": "orders", "startingOffsets": '{"orders":{"0":4}}'}))


@pytest.mark.parametrize("bad", [
    {"startingOffsets": "latest"},
    {"endingOffsets": "earliest"},
    {"startingOffsets": '{"t":{"0":-1}}'},
    {"subscribe": "a", "assign": '{"a":[0]}'},
    {"minPartitions": "0"},
    {"failOnDataLoss": "maybe"},
    {"assign": "a"},
    {"startingTimestamp": "yesterday"},
])
def test_invalid_options_are_refused(bad):
    with pytest.raises(ExportOptionError):
        parse_options({"path": "/nowhere", **bad})


def test_offsets_below_log_start_are_data_loss(tmp_path):
    w = LogDirWriter(tmp_path)
    w.skip_offsets("t", 0, 100)
    w.append("t", 0, build_batch([(b"k", b"v", T0, [])] * 5))
    w.close()
    opts = {"path": str(tmp_path), "startingOffsets": '{"t":{"0":50}}'}
    with pytest.raises(DataLossError, match="below the log start offset 100"):
        plan(parse_options(opts))
    assert [r["offset"] for r in read_all(str(tmp_path), **{k: v for k, v in opts.items() if k != "path"},
                                          failOnDataLoss="false")] == [100, 101, 102, 103, 104]


def test_timestamp_lookup_is_the_earliest_offset_at_or_after_the_time(tmp_path):
    rng = random.Random(3)
    w = LogDirWriter(tmp_path, segment_bytes=2500, index_interval=700)
    for b in range(60):
        # CreateTime, not monotonic within or across batches
        recs = [(b"k", os.urandom(40), T0 + b * 100 + rng.randint(-300, 300), []) for _ in range(rng.randint(1, 8))]
        w.append("t", 0, build_batch(recs, codec="snappy" if b % 2 else "none"))
    w.close(clean=False)
    exp = sorted(expected_rows(str(tmp_path)), key=lambda r: r["offset"])
    pdir = list_partitions(LocalFiles(str(tmp_path)))[0]
    assert len(pdir.segments) > 4
    for target in [T0 - 10_000, T0, T0 + 1234, T0 + 3000, T0 + 5555, T0 + 5900, T0 + 6200, T0 + 99_999]:
        want = next((r["offset"] for r in exp if r["timestamp_ms"] >= target), None)
        assert offset_for_timestamp(LocalFiles(str(tmp_path)), pdir, target, 0) == want, target
    got = read_all(str(tmp_path), startingTimestamp=str(T0 + 2000), endingTimestamp=str(T0 + 4000))
    lo = next(r["offset"] for r in exp if r["timestamp_ms"] >= T0 + 2000)
    hi = next(r["offset"] for r in exp if r["timestamp_ms"] >= T0 + 4000)
    assert [r["offset"] for r in got] == [r["offset"] for r in exp if lo <= r["offset"] < hi]
    with pytest.raises(ExportOptionError, match="No offset matched"):
        plan(parse_options({"path": str(tmp_path), "startingTimestamp": str(T0 + 99_999)}))
    assert read_all(str(tmp_path), startingTimestamp=str(T0 + 99_999), startingOffsetsByTimestampStrategy="latest") == []


def test_large_segments_are_split_at_index_entries_without_losing_or_repeating_records(tmp_path):
    rng = random.Random(2)
    w = LogDirWriter(tmp_path, index_interval=1000)
    for b in range(300):
        recs = [(os.urandom(8), os.urandom(rng.randint(0, 500)), T0, []) for _ in range(rng.randint(1, 10))]
        w.append("t", 0, build_batch(recs, codec=["none", "zstd"][b % 2]))
    w.close(clean=False)
    whole = read_all(str(tmp_path))
    opts = parse_options({"path": str(tmp_path), "maxBytesPerPartition": "20000"})
    slices = plan(opts)
    size = os.path.getsize(w.segments("t", 0)[0])
    assert len(slices) >= size // 20000 > 3
    assert all(s.end_position - s.start_position <= 20000 for s in slices)
    assert all(a.end_offset == b.start_offset and a.end_position == b.start_position
               for a, b in zip(slices, slices[1:], strict=False))
    split = read_all(str(tmp_path), maxBytesPerPartition="20000")
    assert [r["offset"] for r in split] == [r["offset"] for r in whole]
    assert project(split) == project(whole)


def test_max_records_and_min_partitions_split_by_offsets(tmp_path):
    w = LogDirWriter(tmp_path, index_interval=300)
    for _ in range(40):
        w.append("t", 0, build_batch([(b"k", b"v" * 30, T0, [])] * 7))
    w.close()
    slices = plan(parse_options({"path": str(tmp_path), "maxRecordsPerPartition": "25"}))
    assert all(s.end_offset - s.start_offset <= 25 for s in slices) and len(slices) == 12
    assert len(read_all(str(tmp_path), maxRecordsPerPartition="25")) == 280
    slices = plan(parse_options({"path": str(tmp_path), "minPartitions": "9"}))
    assert len(slices) >= 9
    got = read_all(str(tmp_path), minPartitions="9")
    assert [r["offset"] for r in got] == list(range(280))


def read_partitions(parts: list, opts) -> list[list[tuple]]:
    """(topic, partition, offset, value) of every record, per input partition, as a task reads them."""
    schema = arrow_schema(False, False)
    return [[(r["topic"], r["partition"], r["offset"], r["value"])
             for rb in read_slices(part, schema, True, opts.storage.files()) for r in rb.to_pylist()]
            for part in parts]


def test_segments_of_a_partition_are_packed_into_input_partitions_up_to_the_byte_bound(tmp_path):
    rng = random.Random(5)
    w = LogDirWriter(tmp_path, segment_bytes=20000, index_interval=1000)
    for _ in range(80):
        for p in (0, 1):
            w.append("t", p, build_batch([(os.urandom(8), os.urandom(rng.randint(0, 900)), T0, [])
                                          for _ in range(rng.randint(1, 6))]))
    w.close()
    want = [(r["topic"], r["partition"], r["offset"], r["value"]) for r in expected_rows(str(tmp_path))]
    assert len(w.segments("t", 0)) > 4 and len(w.segments("t", 1)) > 4

    # by default, all the segments of a partition are one input partition, read in order
    opts = parse_options({"path": str(tmp_path)})
    parts = plan_read(opts)[1]
    assert [[sl.log_path for sl in part] for part in parts] == [w.segments("t", 0), w.segments("t", 1)]
    got = read_partitions(parts, opts)
    assert [{row[1] for row in rows} for rows in got] == [{0}, {1}]
    assert [row for rows in got for row in rows] == want
    assert len(plan_read(parse_options({"path": str(tmp_path), "subscribe": "t",
                                        "startingOffsets": '{"t":{"0":30,"1":-2}}'}))[1]) == 2

    # a bound smaller than the data: several input partitions, each within it, every record once
    opts = parse_options({"path": str(tmp_path), "maxBytesPerPartition": "50000"})
    parts = plan_read(opts)[1]
    assert len(parts) > 4
    for part in parts:
        assert len({(sl.topic, sl.partition) for sl in part}) == 1
        assert sum(sl.end_position - sl.start_position for sl in part) <= 50000
        assert all(a.end_offset == b.start_offset for a, b in zip(part, part[1:], strict=False))
    assert any(len(part) > 1 for part in parts)
    assert [row for rows in read_partitions(parts, opts) for row in rows] == want

    # maxRecordsPerPartition cuts packed partitions inside segments; minPartitions splits further
    for extra, check in (({"maxRecordsPerPartition": "60"}, lambda n: n > 2),
                         ({"minPartitions": "7"}, lambda n: n >= 7)):
        opts = parse_options({"path": str(tmp_path), **extra})
        parts = plan_read(opts)[1]
        assert check(len(parts))
        if "maxRecordsPerPartition" in extra:
            assert all(part[-1].end_offset - part[0].start_offset <= 60 for part in parts)
        assert [row for rows in read_partitions(parts, opts) for row in rows] == want


def test_pattern_and_assign_select_partitions(tmp_path):
    w = LogDirWriter(tmp_path)
    for topic in ("orders.eu", "orders.us", "payments"):
        for p in range(2):
            w.append(topic, p, build_batch([(topic.encode(), b"%d" % p, T0, [])]))
    w.close()
    got = read_all(str(tmp_path), subscribePattern=r"orders\..*")
    assert sorted((r["topic"], r["partition"]) for r in got) == [("orders.eu", 0), ("orders.eu", 1),
                                                                 ("orders.us", 0), ("orders.us", 1)]
    got = read_all(str(tmp_path), assign='{"payments":[1],"orders.us":[0]}')
    assert sorted((r["topic"], r["partition"]) for r in got) == [("orders.us", 0), ("payments", 1)]
    with pytest.raises(ExportOptionError, match="not found"):
        plan(parse_options({"path": str(tmp_path), "assign": '{"payments":[7]}'}))


def test_header_keys_that_are_not_utf8_read_with_replacement_characters(tmp_path):
    batch = build_batch([(b"k", b"v", T0, [("h\u00e9", b"1"), ("ok", b"2")]), (b"k2", b"v2", T0, [("fine", b"3")])])
    at = bytes(batch).index("h\u00e9".encode())
    batch[at + 1] = 0xFF  # a lone continuation byte follows: not UTF-8
    struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))
    w = LogDirWriter(tmp_path)
    w.append("t", 0, batch)
    w.close()
    got = read_all(str(tmp_path))
    assert got[0]["headers"] == [("h\ufffd\ufffd", b"1"), ("ok", b"2")]
    assert got[1]["headers"] == [("fine", b"3")]


def test_a_partition_directory_instead_of_the_data_directory_is_refused(tmp_path):
    w = LogDirWriter(tmp_path)
    w.append("t", 0, build_batch([(b"k", b"v", T0, [])]))
    w.append("__consumer_offsets", 0, build_batch([(b"g", b"o", T0, [])]))
    w.close()
    with pytest.raises(ExportOptionError, match="one partition's directory"):
        plan(parse_options({"path": str(tmp_path / "t-0")}))
    # a pattern never matches internal topics; naming one does
    assert [r["topic"] for r in read_all(str(tmp_path), subscribePattern=".*")] == ["t"]
    assert [r["topic"] for r in read_all(str(tmp_path), assign='{"__consumer_offsets":[0]}')] == ["__consumer_offsets"]
