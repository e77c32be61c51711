"""The one RecordBatch v2 builder of the tests, and the one codec table.

Batches are built by kafka-python's ``DefaultRecordBatchBuilder``, so the broker is checked
against an encoder it does not share code with. The protocol, storage and Spark helpers each
keep their own defaults on top of :func:`batch_of_records`.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka.record.default_records import DefaultRecordBatchBuilder

#: Compression codec name -> the id in a batch's attributes (bits 0-2).
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

Record = tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]


def batch_of_records(
    records: Iterable[Record],
    codec: str | int = "none",
    producer_id: int = -1,
    epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytearray:
    """One batch as a producer sends it (baseOffset 0); ``records`` are (key, value, timestamp, headers)
    with offset deltas 0, 1, 2, ...; ``codec`` is a name from :data:`CODECS` or its id."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=CODECS[codec] if isinstance(codec, str) else codec,
        is_transactional=transactional, producer_id=producer_id, producer_epoch=epoch,
        base_sequence=base_sequence, batch_size=1 << 30,
    )
    for i, (key, value, ts, headers) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    return bytearray(builder.build())
