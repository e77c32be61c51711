"""What an append tells its caller: where the batch went (Produce's answer per partition)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class AppendResult:
    base_offset: int  # first offset of the batch (the original one for a duplicate)
    last_offset: int
    log_append_time: int  # -1 on CreateTime topics, broker time on LogAppendTime, cached ts for a duplicate
    log_start_offset: int
    duplicate: bool
