"""Replacing segments crash-safely: Kafka's ``.cleaned`` / ``.swap`` / ``.deleted`` protocol.

The log cleaner writes the cleaned copy of each group of segments as ``<base>.log.cleaned`` (with
``.index.cleaned`` and ``.timeindex.cleaned``), fsynced, then replaces the groups:

1. every ``.cleaned`` file of the cleaning is renamed ``.swap`` — groups from the highest base down,
   each group's log file last — and the directory fsynced (the commit point of the cleaning);
2. per group, the old segments' files are renamed ``.deleted``;
3. the group's ``.swap`` files are renamed to their final names — the log file last — and the
   directory fsynced; then the ``.deleted`` files are removed.

Loading a directory (:func:`complete_interrupted_swaps`) turns whatever a crash left into the log
before or after the cleaning, never a mix:

* ``.deleted`` files are removed (their segment's replacement is complete: a ``.swap`` or a final file);
* any ``.cleaned`` file means the swap had not started for that cleaning: every ``.cleaned`` file
  and every ``.swap`` at or above the lowest ``.cleaned`` base is removed (the log is as before);
* each remaining ``<base>.log.swap`` completes: the segment files with a base offset in
  ``[base, next offset of the swap segment)`` are the ones it replaces and are removed, its index
  swaps take their final names (a missing index is rebuilt by the segment's loading), and the
  ``.log.swap`` becomes ``<base>.log`` (the log is as after).

The cleaner keeps the last batch of each group (empty if all its records go), so a cleaned segment
always ends at the same offset as the group it replaces and the range above is exact. Kafka's
sources: ``storage/src/main/java/org/apache/kafka/storage/internals/log/LogLoader.java`` and
``core/src/main/scala/kafka/log/LogCleaner.scala``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path

from minikafka.storage.atomic_files import fsync_dir
from minikafka.storage.batch import HEADER_SIZE, BatchHeader
from minikafka.storage.disk_format import offset_file_name

log = logging.getLogger(__name__)

CLEANED, SWAP, DELETED = ".cleaned", ".swap", ".deleted"
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
#: The files of a cleaned segment, in the order they are renamed: the log file last.
_SWAPPED = (".index", ".timeindex", ".txnindex", ".log")
_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)(\.cleaned|\.swap|\.deleted)?$")

#: Called with a step name before each step of a swap (tests kill the process there).
StepHook = Callable[[str], None]


def _next_offset(path: Path) -> int | None:
    """Offset after the last complete batch of a segment file (None if it holds none)."""
    end: int | None = None
    with open(path, "rb") as f:
        pos, size = 0, os.fstat(f.fileno()).st_size
        while size - pos >= HEADER_SIZE:
            f.seek(pos)
            header = BatchHeader.parse(f.read(HEADER_SIZE))
            if header.size < HEADER_SIZE or pos + header.size > size:
                break
            end = header.next_offset
            pos += header.size
    return end


def complete_interrupted_swaps(directory: Path, name: str) -> None:
    """Bring ``directory`` back to a log before or after each interrupted cleaning (module doc)."""
    files: dict[str, list[tuple[int, str]]] = {CLEANED: [], SWAP: [], DELETED: []}
    for entry in os.listdir(directory):
        m = _FILE.match(entry)
        if m and m.group(3):
            files[m.group(3)].append((int(m.group(1)), entry))
    for _base, entry in files[DELETED]:
        log.info("%s: removing %s left by a finished segment replacement", name, entry)
        (directory / entry).unlink(missing_ok=True)
    if files[CLEANED]:
        lowest = min(base for base, _e in files[CLEANED])
        for _base, entry in files[CLEANED] + [s for s in files[SWAP] if s[0] >= lowest]:
            log.warning("%s: removing %s of a cleaning that did not reach its swap", name, entry)
            (directory / entry).unlink(missing_ok=True)
        files[SWAP] = [s for s in files[SWAP] if s[0] < lowest]
    swaps = sorted({base for base, entry in files[SWAP] if entry.endswith(".log" + SWAP)})
    for base in swaps:
        log_swap = directory / (offset_file_name(base, ".log") + SWAP)
        end = _next_offset(log_swap)
        if end is None:
            log.warning("%s: removing the empty swap segment %s", name, log_swap.name)
            log_swap.unlink()
            continue
        for entry in os.listdir(directory):
            m = _FILE.match(entry)
            if m and not m.group(3) and base <= int(m.group(1)) < end:
                log.info("%s: removing %s, replaced by the interrupted cleaning's swap %d", name, entry, base)
                (directory / entry).unlink(missing_ok=True)
        for suffix in (".index", ".timeindex", ".txnindex"):
            swap = directory / (offset_file_name(base, suffix) + SWAP)
            if swap.exists():
                os.replace(swap, directory / offset_file_name(base, suffix))
        os.replace(log_swap, directory / offset_file_name(base, ".log"))
        log.warning("%s: completed the interrupted swap of cleaned segment %d (offsets %d..%d)",
                    name, base, base, end - 1)
    for base, entry in files[SWAP]:  # index swaps whose log was already in place
        if base not in swaps and (directory / entry).exists():
            log.warning("%s: removing %s (its segment is already in place; the index is rebuilt)", name, entry)
            (directory / entry).unlink(missing_ok=True)
            (directory / entry.removesuffix(SWAP)).unlink(missing_ok=True)
    if any(files.values()):
        fsync_dir(directory)


def cleaned_path(directory: Path, base: int, suffix: str) -> Path:
    return directory / (offset_file_name(base, suffix) + CLEANED)


def promote_cleaned(directory: Path, bases: list[int], hook: StepHook | None = None) -> None:
    """Step 1 for every cleaned segment of one cleaning, highest base first and each log file
    last: until the last rename, a crash leaves a ``.cleaned`` file below every ``.swap``, and the
    loading discards the whole cleaning; after it (the commit point) the loading completes it."""
    step = hook or (lambda _s: None)
    for base in sorted(bases, reverse=True):
        for suffix in _SWAPPED:
            if suffix == ".txnindex" and not cleaned_path(directory, base, suffix).exists():
                continue  # a segment without aborted transactions has no .txnindex
            step(f"rename-{base}{suffix}.cleaned")
            os.replace(cleaned_path(directory, base, suffix), directory / (offset_file_name(base, suffix) + SWAP))
    step("fsync-dir-swap")
    fsync_dir(directory)


def replace_with_swap(directory: Path, base: int, old_bases: list[int], hook: StepHook | None = None) -> None:
    """Steps 2-3 for one promoted segment at ``base`` replacing the segments at ``old_bases``."""
    step = hook or (lambda _s: None)
    for old in old_bases:
        for suffix in SEGMENT_SUFFIXES:
            path = directory / offset_file_name(old, suffix)
            if path.exists():
                step(f"delete-rename-{old}{suffix}")
                os.replace(path, directory / (offset_file_name(old, suffix) + DELETED))
    for suffix in _SWAPPED:  # the log file last
        swap = directory / (offset_file_name(base, suffix) + SWAP)
        if suffix == ".txnindex" and not swap.exists():
            continue
        step(f"rename-{base}{suffix}.swap")
        os.replace(swap, directory / offset_file_name(base, suffix))
    step("fsync-dir-final")
    fsync_dir(directory)
    for old in old_bases:
        for suffix in SEGMENT_SUFFIXES:
            step(f"unlink-{old}{suffix}.deleted")
            (directory / (offset_file_name(old, suffix) + DELETED)).unlink(missing_ok=True)
