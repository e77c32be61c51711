"""Producer-id allocation that never hands out an id twice, even across crashes.

Ids are reserved in blocks: the end of the current block is written (atomically, fsynced) to
``<data-dir>/minikafka-producer-ids`` before any id of the block is handed out, so a restart
continues after the block. Reusing an id would let a new producer's first batch match an old
producer's cached ``(epoch 0, seq 0)`` batch and be acknowledged without being written
(docs/semantics.md#producer-ids).
"""

from __future__ import annotations

from pathlib import Path

from minikafka.storage.atomic_files import atomic_write

BLOCK_SIZE = 1000
FILE_NAME = "minikafka-producer-ids"


class ProducerIdAllocator:
    def __init__(self, data_dir: Path, block_size: int = BLOCK_SIZE) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self.block_size = block_size
        self._next = self._read_reserved()
        self._block_end = self._next

    def _read_reserved(self) -> int:
        try:
            text = self.path.read_text().strip()
            return int(text)
        except FileNotFoundError:
            return 0
        except ValueError as exc:
            raise RuntimeError(f"{self.path} is unreadable ({exc}); refusing to reuse producer ids") from exc

    def _reserve(self, end: int) -> None:
        atomic_write(self.path, f"{end}\n".encode())
        self._block_end = end

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._reserve(self._next + self.block_size)
        pid = self._next
        self._next += 1
        return pid
