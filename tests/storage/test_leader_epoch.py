"""The leader-epoch cache and its checkpoint file: Kafka's format and Kafka's lookup rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    LeaderEpochCache,
    LeaderEpochFileError,
)


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache.load(tmp_path)
    for epoch, start in entries:
        assert cache.assign(epoch, start)
    return cache


def test_the_file_is_kafkas_text_format_and_loads_back(tmp_path: Path) -> None:
    cache_with(tmp_path, (0, 0), (2, 1047), (5, 1200))
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n3\n0 0\n2 1047\n5 1200\n"
    assert LeaderEpochCache.load(tmp_path).entries == [EpochEntry(0, 0), EpochEntry(2, 1047), EpochEntry(5, 1200)]
    assert not (tmp_path / (LEADER_EPOCH_CHECKPOINT + ".tmp")).exists()


def test_a_missing_or_empty_file_is_an_empty_cache(tmp_path: Path) -> None:
    assert LeaderEpochCache.load(tmp_path).entries == []
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"")
    cache = LeaderEpochCache.load(tmp_path)
    assert cache.entries == [] and cache.latest_epoch == -1
    cache.clear()
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n0\n"


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\n0 0\n", "0\n1\n0 x\n", "0\n1\n0 0 0\n", "zero\n"])
def test_a_file_in_another_format_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text(text)
    with pytest.raises(LeaderEpochFileError, match=LEADER_EPOCH_CHECKPOINT):
        LeaderEpochCache.load(tmp_path)


def test_assign_skips_what_the_latest_entry_already_says(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (3, 10))
    assert not cache.assign(3, 15)  # later batches of the same epoch
    assert not cache.assign(-1, 20)  # batches of old clients carry no epoch
    assert cache.entries == [EpochEntry(3, 10)]
    assert cache.assign(3, 5)  # the same epoch starting earlier replaces the entry
    assert cache.entries == [EpochEntry(3, 5)]


def test_assign_drops_entries_the_new_one_contradicts(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (2, 10), (4, 20))
    assert cache.assign(3, 15)  # epoch 4 is higher: gone
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(3, 15)]
    assert cache.assign(5, 10)  # epochs 2 and 3 start at or after 10: gone
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(5, 10)]
    assert LeaderEpochCache.load(tmp_path).entries == cache.entries


@pytest.mark.parametrize(("requested", "expected"), [
    (-1, (-1, -1)),   # undefined
    (5, (5, 1300)),   # the latest epoch ends at the log end
    (6, (-1, -1)),    # above every epoch
    (0, (0, 100)),    # below the first entry: ends where the first starts
    (1, (1, 1047)),   # a cached epoch ends where the next starts
    (3, (2, 1200)),   # between entries: the floor epoch, ending where the next starts
])
def test_end_offset_for_answers_as_kafka(tmp_path: Path, requested: int, expected: tuple[int, int]) -> None:
    cache = cache_with(tmp_path, (1, 100), (2, 1047), (5, 1200))
    assert cache.end_offset_for(requested, 1300) == expected


def test_end_offset_for_on_an_empty_cache_is_undefined(tmp_path: Path) -> None:
    assert LeaderEpochCache.load(tmp_path).end_offset_for(0, 10) == (-1, -1)


def test_truncation_from_the_end_drops_entries_at_or_after_the_offset(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (2, 10), (4, 20))
    cache.truncate_from_end(25)  # nothing starts there
    assert cache.latest_epoch == 4
    cache.truncate_from_end(20)  # an empty leadership's entry goes as well
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10)]
    cache.truncate_from_end(0)
    assert cache.entries == []
    assert LeaderEpochCache.load(tmp_path).entries == []


def test_truncation_from_the_start_moves_the_last_dropped_entry_up(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (2, 10), (4, 20))
    cache.truncate_from_start(15)
    assert cache.entries == [EpochEntry(2, 15), EpochEntry(4, 20)]
    assert cache.epoch_for_offset(15) == 2 and cache.epoch_for_offset(19) == 2 and cache.epoch_for_offset(20) == 4
    cache.truncate_from_start(3)  # below the first entry: nothing changes
    assert cache.entries == [EpochEntry(2, 15), EpochEntry(4, 20)]
    assert cache.epoch_for_offset(3) == -1
    assert LeaderEpochCache.load(tmp_path).entries == cache.entries
