"""The .index and .timeindex formats and the index.interval.bytes rule (docs/semantics.md#indexes)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from minikafka.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from minikafka.storage.segment import LogSegment
from tests.storage_helpers import TS, make_batch, open_log, topic_config


def test_offset_index_file_holds_big_endian_relative_offset_and_position(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    index.open_active(rewrite=True)
    index.append(105, 0)
    index.append(230, 4200)
    index.close_active()
    assert (tmp_path / "00000000000000000100.index").read_bytes() == struct.pack(">iiii", 5, 0, 130, 4200)


def test_active_index_is_preallocated_to_whole_entries_and_trimmed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 1000)  # 1000 bytes -> 125 entries
    index.open_active(rewrite=True)
    assert path.stat().st_size == 1000
    index.append(3, 100)
    index.close_active()
    assert path.stat().st_size == 8
    tindex = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 1000)  # 83 entries of 12
    tindex.open_active(rewrite=True)
    assert tindex.path.stat().st_size == 996
    tindex.close_active()
    assert tindex.path.stat().st_size == 0


def test_offset_lookup_gives_greatest_entry_at_or_below_target_else_base(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">iiiiii", 9, 0, 19, 4500, 29, 9000))
    index = OffsetIndex.load(path, 50, 4096, log_size=20000)
    assert index.entries() == [(59, 0), (69, 4500), (79, 9000)]
    assert index.lookup(50) == (50, 0)
    assert index.lookup(58) == (50, 0)
    assert index.lookup(59) == (59, 0)
    assert index.lookup(75) == (69, 4500)
    assert index.lookup(10**6) == (79, 9000)


def test_offset_index_load_drops_the_zero_preallocated_tail_left_by_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">iiii", 9, 100, 16, 256) + bytes(8 * 10))
    assert OffsetIndex.load(path, 0, 4096, log_size=20000).entries() == [(9, 100), (16, 256)]


def test_offset_index_load_rejects_entries_that_do_not_increase(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">iiiiii", 9, 100, 0, 0, 12, 300))
    with pytest.raises(CorruptIndexError):
        OffsetIndex.load(path, 0, 4096, log_size=20000)


def test_offset_index_load_rejects_partial_entries_and_positions_past_the_log(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">ii", 9, 100) + b"\x00\x01")
    with pytest.raises(CorruptIndexError):
        OffsetIndex.load(path, 0, 4096, log_size=20000)
    path.write_bytes(struct.pack(">ii", 9, 30000))
    with pytest.raises(CorruptIndexError):
        OffsetIndex.load(path, 0, 4096, log_size=20000)


def test_time_index_file_holds_big_endian_timestamp_and_relative_offset(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000010.timeindex", 10, 1200)
    index.open_active(rewrite=True)
    index.maybe_append(TS, 12)
    index.maybe_append(TS, 15)  # not above the last timestamp: skipped
    index.maybe_append(TS - 5, 16)  # below: skipped
    index.maybe_append(TS + 7, 20)
    index.close_active()
    assert index.path.read_bytes() == struct.pack(">qiqi", TS, 2, TS + 7, 10)


def test_time_index_lookup_below_finds_last_entry_with_a_smaller_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    path.write_bytes(struct.pack(">qiqi", 100, 4, 200, 9))
    index = TimeIndex.load(path, 1000, 4096)
    assert index.lookup_below(100) is None
    assert index.lookup_below(101) == (100, 1004)
    assert index.lookup_below(200) == (100, 1004)
    assert index.lookup_below(10**15) == (200, 1009)
    assert index.last_entry() == (200, 1009)


def test_time_index_load_rejects_decreasing_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    path.write_bytes(struct.pack(">qiqiqi", 200, 4, 0, 0, 300, 9))
    with pytest.raises(CorruptIndexError):
        TimeIndex.load(path, 0, 4096)


def _expected_entries(sizes: list[int], counts: list[int], interval: int) -> list[tuple[int, int]]:
    """docs/semantics.md#index-interval written out: an entry (last offset, position) when more than ``interval``
    bytes were appended since the last entry, counter reset, then the batch size added."""
    entries, since, pos, offset = [], 0, 0, 0
    for size, count in zip(sizes, counts, strict=True):
        last = offset + count - 1
        if since > interval:
            entries.append((last, pos))
            since = 0
        since += size
        pos += size
        offset = last + 1
    return entries


def test_index_entries_follow_the_index_interval_bytes_rule(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(index_interval_bytes=1000))
    sizes, counts = [], []
    for i in range(40):
        batch = make_batch(count=1 + i % 4, value=b"x" * (50 + 37 * i))
        sizes.append(len(batch))
        counts.append(1 + i % 4)
        plog.append_from_client(batch)
    seg = plog.segments[0]
    expected = _expected_entries(sizes, counts, 1000)
    assert len(expected) >= 5
    assert seg.offset_index.entries() == expected
    plog.close()
    data = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    assert data == b"".join(struct.pack(">ii", off, pos) for off, pos in expected)


def test_first_append_into_a_segment_never_gets_an_index_entry(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(index_interval_bytes=0))
    plog.append_from_client(make_batch())
    assert plog.segments[0].offset_index.entries() == []
    plog.append_from_client(make_batch())
    assert plog.segments[0].offset_index.entries() == [(1, plog.segments[0].size - len(make_batch()))]


def test_time_index_tracks_running_max_timestamp_and_its_batch(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(index_interval_bytes=0))
    stamps = [TS + 50, TS + 10, TS + 80, TS + 20, TS + 90]
    for ts in stamps:
        plog.append_from_client(make_batch(timestamp=ts))
    # entries are written at appends 2..5 with the running max (ts, offset of the batch that had it)
    assert plog.segments[0].time_index.entries() == [(TS + 50, 0), (TS + 80, 2), (TS + 90, 4)]


def test_rebuilt_indexes_are_byte_identical_to_the_ones_appends_wrote(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", topic_config(index_interval_bytes=300))
    for i in range(60):
        plog.append_from_client(make_batch(count=2, timestamp=TS + (i * 7919) % 1000, value=b"v" * (i % 90)))
    plog.close()
    directory = tmp_path / "t-0"
    index = (directory / "00000000000000000000.index").read_bytes()
    tindex = (directory / "00000000000000000000.timeindex").read_bytes()
    assert len(index) >= 8 * 5
    seg, reason = LogSegment.open(directory, 0, 10485760, 300, 0)
    assert reason is None
    truncated, _ = seg.recover()
    assert truncated == 0
    seg.save_indexes()
    seg.close()
    assert (directory / "00000000000000000000.index").read_bytes() == index
    assert (directory / "00000000000000000000.timeindex").read_bytes() == tindex
