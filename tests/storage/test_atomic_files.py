"""The one atomic-file-write helper: every byte lands even when os.write writes less than asked,
a failed rename leaves no temp file behind, and the old file survives until the rename."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minikafka.storage import atomic_files
from minikafka.storage.atomic_files import atomic_write, fsync_dir


def test_short_writes_are_continued_until_every_byte_is_written(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def short_write(fd: int, data: bytes) -> int:  # the kernel may write less than it is given
        calls.append(len(data))
        return real_write(fd, bytes(data)[:7])

    monkeypatch.setattr(atomic_files.os, "write", short_write)
    data = bytes(range(256)) * 3
    atomic_write(tmp_path / "f", data)
    assert (tmp_path / "f").read_bytes() == data
    assert len(calls) == -(-len(data) // 7)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


@pytest.mark.parametrize("durable", [True, False])
def test_replaces_the_old_content_through_the_named_temp_file(tmp_path: Path, durable: bool) -> None:
    path = tmp_path / "00000000000000000005.snapshot"
    path.write_bytes(b"old")
    temp = tmp_path / "00000000000000000005.snapshot.tmp"
    atomic_write(path, bytearray(b"new content"), durable=durable, temp=temp)
    assert path.read_bytes() == b"new content"
    assert not temp.exists()


def test_a_failed_rename_removes_the_temp_file_and_keeps_nothing_half_written(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "occupied").write_text("x")  # a non-empty directory cannot be replaced by a file
    with pytest.raises(OSError):
        atomic_write(target, b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]
    assert (target / "occupied").read_text() == "x"


def test_fsync_dir_of_a_missing_directory_raises(tmp_path: Path) -> None:
    fsync_dir(tmp_path)
    with pytest.raises(FileNotFoundError):
        fsync_dir(tmp_path / "gone")
