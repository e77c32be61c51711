"""What one Spark task does: turn a segment slice into Arrow record batches.

Batches are collected into groups of a few MiB of (decompressed) records, each group is decoded
at once (:func:`.records.decode_records`) and becomes one Arrow record batch. Control batches
(transaction markers) and empty batches (left by compaction to keep producer state) carry no
records for a reader and are passed over, as a consumer does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from minikafka.spark_export.arrow_build import BatchFields, build_record_batch
from minikafka.spark_export.codecs import Buffer, CodecError, decompress
from minikafka.spark_export.files import Files
from minikafka.spark_export.records import (
    PADDING,
    RecordColumns,
    RecordFormatError,
    decode_records,
    decode_records_in,
)
from minikafka.spark_export.scan import BatchReader, SegmentSlice
from minikafka.storage.batch import HEADER_SIZE, BatchHeader

#: Decompressed record bytes per Arrow batch, and a cap on its rows.
GROUP_BYTES = 4 << 20
GROUP_RECORDS = 65536


@dataclass(slots=True)
class _Group:
    headers: list[BatchHeader] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    sections: list[Buffer] = field(default_factory=list)
    nbytes: int = 0
    records: int = 0
    #: The bytes read from the segment that every section lies in, uncompressed, at ``begins``;
    #: None once a section is not (decompressed), and the sections are joined to be decoded.
    chunk: memoryview | None = None
    begins: list[int] = field(default_factory=list)

    def add(self, position: int, header: BatchHeader, section: Buffer,
            chunk: memoryview | None = None, begin: int = 0) -> None:
        if not self.headers:
            self.chunk = chunk
        elif chunk is not self.chunk:
            self.chunk = None
        self.positions.append(position)
        self.headers.append(header)
        self.sections.append(section)
        self.begins.append(begin)
        self.nbytes += len(section)
        self.records += header.records_count

    def drop(self, i: int) -> None:
        self.positions.pop(i)
        header = self.headers.pop(i)
        section = self.sections.pop(i)
        self.begins.pop(i)
        self.nbytes -= len(section)
        self.records -= header.records_count

    def decode(self) -> RecordColumns:
        counts = [h.records_count for h in self.headers]
        chunk = self.chunk
        if chunk is not None:
            begins = np.asarray(self.begins, dtype=np.int64)
            ends = begins + np.fromiter((len(s) for s in self.sections), dtype=np.int64, count=len(self.sections))
            if int(ends[-1]) + PADDING <= len(chunk):
                try:
                    return decode_records_in(chunk, begins, ends, counts)
                except RecordFormatError:
                    pass  # decoded again below: the error is the one the joined sections give
        return decode_records(self.sections, counts)


def batch_fields(headers: list[BatchHeader]) -> BatchFields:
    attrs = np.fromiter((h.attributes for h in headers), dtype=np.int64, count=len(headers))
    return BatchFields(
        base_offset=np.fromiter((h.base_offset for h in headers), dtype=np.int64, count=len(headers)),
        log_append_time=(attrs & 0x08) != 0,
        base_timestamp=np.fromiter((h.base_timestamp for h in headers), dtype=np.int64, count=len(headers)),
        max_timestamp=np.fromiter((h.max_timestamp for h in headers), dtype=np.int64, count=len(headers)),
        producer_id=np.fromiter((h.producer_id for h in headers), dtype=np.int64, count=len(headers)),
        producer_epoch=np.fromiter((h.producer_epoch for h in headers), dtype=np.int64, count=len(headers)),
        base_sequence=np.fromiter((h.base_sequence for h in headers), dtype=np.int64, count=len(headers)),
        transactional=(attrs & 0x10) != 0,
    )


class SliceReader:
    """Reads one :class:`SegmentSlice` into Arrow record batches of ``schema``."""

    def __init__(self, sl: SegmentSlice, schema: pa.Schema, fail_on_data_loss: bool, files: Files,
                 read_committed: bool = False, buffers: list[bytearray] | None = None) -> None:
        self.slice = sl
        self.schema = schema
        self.batches = BatchReader(sl, fail_on_data_loss, files, buffers)
        self.read_committed = read_committed

    def _aborted(self, header: BatchHeader) -> bool:
        """A transactional batch inside one of the slice's aborted transactions (read_committed)."""
        pid, offset = header.producer_id, header.base_offset
        return any(a.producer_id == pid and a.first_offset <= offset <= a.last_offset for a in self.slice.aborted)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        group = _Group()
        section: Buffer
        for position, header, section in self.batches:
            if header.is_control or header.records_count == 0:
                continue
            if self.read_committed and header.is_transactional and self._aborted(header):
                continue
            if header.compression:
                try:
                    section = decompress(header.compression, section)
                except CodecError as exc:
                    self.batches.damaged(position, f"batch at offset {header.base_offset}: {exc}")
                    continue
                group.add(position, header, section)
            else:
                chunk = self.batches.chunk
                if group.chunk is not None and chunk is not group.chunk:
                    # a group decoded where it was read ends where the bytes read end
                    yield from self._emit(group)
                    group = _Group()
                group.add(position, header, section, chunk, position + HEADER_SIZE - self.batches.chunk_position)
            if group.nbytes >= GROUP_BYTES or group.records >= GROUP_RECORDS:
                yield from self._emit(group)
                group = _Group()
        if group.headers:
            yield from self._emit(group)

    def _emit(self, group: _Group) -> Iterator[pa.RecordBatch]:
        while group.headers:
            try:
                cols = group.decode()
            except RecordFormatError as exc:
                bad = exc.batch if exc.batch is not None else 0
                self.batches.damaged(group.positions[bad], f"batch at offset {group.headers[bad].base_offset}: {exc}")
                group.drop(bad)
                continue
            fields = batch_fields(group.headers)
            sl = self.slice
            offsets = fields.base_offset[cols.batch] + cols.offset_delta
            keep = (offsets >= sl.start_offset) & (offsets < sl.end_offset)
            if not keep.all():  # the slice starts or ends inside a batch
                cols = cols.take(np.flatnonzero(keep))
            if len(cols):
                yield build_record_batch(cols, fields, sl.topic, sl.partition, self.schema)
            return


def read_slices(slices: Sequence[SegmentSlice], schema: pa.Schema, fail_on_data_loss: bool, files: Files,
                read_committed: bool = False) -> Iterator[pa.RecordBatch]:
    """The Arrow record batches of one input partition: its slices one after the other, in offset
    order, sharing their read buffers."""
    buffers: list[bytearray] = []
    for sl in slices:
        yield from SliceReader(sl, schema, fail_on_data_loss, files, read_committed, buffers)
