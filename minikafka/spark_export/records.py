"""Decode the records of many batches at once into numpy columns (docs/semantics.md#records).

Records are variable-length and their fields are zig-zag varints, so the only inherently
sequential step is finding where each record starts: one short Python loop reads the leading
length varint of every record. Every other field is then decoded for all records together with
numpy: each step gathers the bytes at the current position of every record, decodes one field and
moves all positions on. Keys, values and headers stay where they are in the records buffer; the
columns hold their positions and lengths (-1 for null) and :mod:`.arrow_build` copies the bytes
into Arrow arrays in one pass.

Every record is checked the way Kafka's reader checks it: the fields must add up to exactly the
record's length, the records must fill exactly the batch's records section, header counts and
header key lengths must not be negative. A failure raises :class:`RecordFormatError` naming the
batch, so the caller can report or skip that batch alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Buffer = bytes | bytearray | memoryview

#: Zero bytes after the data, so that gathering up to 10 varint bytes never leaves the array.
PADDING = 16
#: The smallest possible record: length, attributes, timestamp delta, offset delta, key length,
#: value length and header count, one byte each.
MIN_RECORD_SIZE = 7
_VARINT_MAX = 5
_VARLONG_MAX = 10


class RecordFormatError(ValueError):
    """Malformed records inside a batch whose CRC was fine; ``batch`` is its index in the group."""

    def __init__(self, message: str, batch: int | None = None) -> None:
        super().__init__(message)
        self.batch = batch


@dataclass(slots=True)
class RecordColumns:
    """Per-record fields of a group of batches, in log order.

    ``data`` is the buffer the records sections were decoded in: the sections of all batches back
    to back (decompressed) followed by :data:`PADDING` zero bytes, or the bytes read from a segment
    file around them; all ``*_pos`` values index into it.
    """

    data: np.ndarray
    batch: np.ndarray
    offset_delta: np.ndarray
    timestamp_delta: np.ndarray
    key_pos: np.ndarray
    key_len: np.ndarray
    value_pos: np.ndarray
    value_len: np.ndarray
    header_count: np.ndarray
    header_key_pos: np.ndarray
    header_key_len: np.ndarray
    header_value_pos: np.ndarray
    header_value_len: np.ndarray

    def __len__(self) -> int:
        return len(self.batch)

    def take(self, rows: np.ndarray) -> RecordColumns:
        """The records at ``rows`` (sorted), with their headers."""
        starts = np.zeros(len(self.header_count) + 1, dtype=np.int64)
        np.cumsum(self.header_count, out=starts[1:])
        counts = self.header_count[rows]
        hrows = _expand_ranges(starts[rows], counts)
        return RecordColumns(
            self.data, self.batch[rows], self.offset_delta[rows], self.timestamp_delta[rows],
            self.key_pos[rows], self.key_len[rows], self.value_pos[rows], self.value_len[rows], counts,
            self.header_key_pos[hrows], self.header_key_len[hrows],
            self.header_value_pos[hrows], self.header_value_len[hrows],
        )


def _expand_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``range(s, s + c)`` for every pair, without a Python loop."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    firsts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=firsts[1:])
    return np.repeat(starts - firsts, counts) + np.arange(total, dtype=np.int64)


def _walk(data: Buffer, pos: int, end: int, count: int, out: list[int]) -> int:
    """Append the start of each of ``count`` records from ``pos``; return where the last ends."""
    append = out.append
    for _ in range(count):
        append(pos)
        c = data[pos]
        if c < 0x80:
            pos += 1 + ((c >> 1) ^ -(c & 1))
            continue
        c2 = data[pos + 1]
        if c2 < 0x80:
            value = (c & 0x7F) | (c2 << 7)
            pos += 2 + ((value >> 1) ^ -(value & 1))
            continue
        value, shift, n = (c & 0x7F) | ((c2 & 0x7F) << 7), 14, 2
        while True:
            c = data[pos + n]
            value |= (c & 0x7F) << shift
            n += 1
            if c < 0x80:
                break
            if n >= _VARINT_MAX:
                raise RecordFormatError("record length varint longer than 5 bytes")
            shift += 7
        length = (value >> 1) ^ -(value & 1)
        if length < 0:
            raise RecordFormatError("negative record length")
        pos += n + length
        if pos > end:
            break
    return pos


def _walk_lockstep(data: np.ndarray, section_start: np.ndarray, section_end: np.ndarray,
                   counts: np.ndarray) -> np.ndarray:
    """Record starts of many batches at once: step k reads the k-th record length of every batch
    that has more than k records. Pays per step, not per record, so it wins when many batches are
    walked together."""
    first = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    out = np.empty(int(counts.sum()), dtype=np.int64)
    pos = section_start.copy()
    active = np.flatnonzero(counts > 0)
    k = 0
    while len(active):
        p = pos[active]
        out[first[active] + k] = p
        length, size = _varints(data, p, _VARINT_MAX)
        p = p + size + length
        bad = (length < 0) | (p > section_end[active])
        if bad.any():
            raise RecordFormatError("records run past the end of the batch", int(active[np.argmax(bad)]))
        pos[active] = p
        k += 1
        active = active[counts[active] > k]
    short = pos != section_end
    if short.any():
        raise RecordFormatError("bytes left after the last record of the batch", int(np.argmax(short)))
    return out


#: Rounds of :func:`_stride_starts` before the batches still unproven are left to a walk.
_STRIDE_ROUNDS = 8


def _stride_starts(data: np.ndarray, begins: np.ndarray, ends: np.ndarray, counts: np.ndarray,
                   rec_batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Record starts of batches made of runs of same-size records, found without a walk.

    Records of one producer often have one size, or a few sizes in long runs (the offset and
    timestamp deltas grow a byte now and then). Each round guesses, for every batch at once, that
    the records from a known start on all have the size of the record there, and checks every guess
    at once: a guessed start is proven when all records before it (from the known start) hold a
    length varint that ends exactly at the next guess. The first guess that fails is itself proven
    (the record before it ends there) and becomes the next round's known start. A batch is done when
    its last record ends exactly at the end of its records. Returns ``(starts, proven)``: starts are
    meaningful for records of batches where ``proven`` (per batch) is True; the others need a walk.
    """
    nbatches = len(counts)
    first = np.zeros(nbatches, dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    starts = np.zeros(len(rec_batch), dtype=np.int64)
    proven = np.zeros(nbatches, dtype=bool)
    pos = begins.copy()
    done = np.zeros(nbatches, dtype=np.int64)
    active = np.flatnonzero(counts > 0)
    for _ in range(_STRIDE_ROUNDS):
        if not len(active):
            break
        active = active[pos[active] < ends[active]]
        length, size = _varints(data, pos[active], _VARINT_MAX, lenient=True)
        active, length, size = active[length >= 0], length[length >= 0], size[length >= 0]
        if not len(active):
            break
        stride = length + size
        remaining = counts[active] - done[active]
        lane = np.repeat(np.arange(len(active)), remaining)
        lane_first = np.zeros(len(active), dtype=np.int64)
        np.cumsum(remaining[:-1], out=lane_first[1:])
        k = np.arange(len(lane), dtype=np.int64) - lane_first[lane]
        guess = pos[active][lane] + k * stride[lane]
        # A guess holds when its length varint is the known start's, byte for byte.
        match = guess < ends[active][lane]
        guess_at = np.where(match, guess, 0)
        lane_size = size[lane]
        for j in range(int(size.max())):
            match &= (lane_size <= j) | (data[guess_at + j] == data[pos[active] + j][lane])
        run = remaining.copy()  # per batch: how many guesses hold before the first that fails
        misses = np.flatnonzero(~match)
        missed_lanes, at = np.unique(lane[misses], return_index=True)
        run[missed_lanes] = k[misses[at]]
        take = k < run[lane]
        starts[(first[active] + done[active])[lane[take]] + k[take]] = guess[take]
        pos[active] += run * stride
        done[active] += run
        finished = done[active] == counts[active]
        proven[active[finished]] = pos[active[finished]] == ends[active[finished]]
        active = active[~finished & (run > 0)]
    return starts, proven


def _varints(data: np.ndarray, pos: np.ndarray, max_bytes: int,
             lenient: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints starting at every ``pos``: (values, encoded sizes). A varint longer than
    ``max_bytes`` raises, or with ``lenient`` (positions that are only guesses) reads as -1."""
    first = data[pos]
    two = np.flatnonzero(first & 0x80)
    second = data[pos[two] + 1]
    if not (second & 0x80).any():  # the common case: no varint longer than two bytes
        short = first.astype(np.int64)
        short[two] = (short[two] & 0x7F) | (second.astype(np.int64) << 7)
        size = np.ones(len(pos), dtype=np.int64)
        size[two] = 2
        return (short >> 1) ^ -(short & 1), size
    raw = (first & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), dtype=np.int64)
    more = np.flatnonzero(first & 0x80)
    shift = 7
    while len(more):
        if shift >= 7 * max_bytes:
            if not lenient:
                raise RecordFormatError(f"varint longer than {max_bytes} bytes")
            break
        byte = data[pos[more] + size[more]]
        raw[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[more] += 1
        more = more[(byte & 0x80) != 0]
        shift += 7
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    values[more] = -1  # empty unless lenient gave up on over-long varints
    return values, size


def _check(ok: np.ndarray, message: str, batch_of: np.ndarray) -> None:
    if not ok.all():
        bad = int(np.argmin(ok))
        raise RecordFormatError(message, int(batch_of[bad]))


#: Estimated cost of one record in the Python walk, and of one lock-step round (seconds).
_WALK_RECORD_COST = 0.2e-6
_LOCKSTEP_ROUND_COST = 15e-6


def decode_records(sections: list[Buffer], counts: list[int], walk: str = "auto") -> RecordColumns:
    """Decode ``counts[i]`` records from each records section ``sections[i]``.

    ``walk`` picks how record starts are found: ``python`` (a loop over records), ``lockstep``
    (numpy rounds over batches), ``uniform`` (batches made of runs of same-size records proven with
    numpy, a loop over the others) or ``auto`` (``uniform``, then whichever the cost estimate favours for the rest).
    """
    joined = b"".join([*sections, bytes(PADDING)])
    sizes = np.fromiter((len(s) for s in sections), dtype=np.int64, count=len(sections))
    ends = np.cumsum(sizes)
    return decode_records_in(joined, ends - sizes, ends, counts, walk)


def decode_records_in(buffer: Buffer, begins: np.ndarray, ends: np.ndarray, counts: list[int],
                      walk: str = "auto") -> RecordColumns:
    """:func:`decode_records` of records sections that lie in one buffer, batch ``i``'s in
    ``buffer[begins[i]:ends[i]]`` (ascending, not overlapping), read where they are.

    The buffer must hold at least :data:`PADDING` bytes after the last section. Records that decode
    come out the same whatever those bytes and the bytes between sections are (every field is
    checked to lie inside its record, and the records to fill their section); the message of a
    :class:`RecordFormatError` may depend on them, so a caller that reports it decodes the sections
    again with :func:`decode_records`.
    """
    nbatches = len(counts)
    data = np.frombuffer(buffer, dtype=np.uint8)
    count_arr = np.asarray(counts, dtype=np.int64)
    sizes = ends - begins
    impossible = (count_arr < 0) | (count_arr * MIN_RECORD_SIZE > sizes)
    if impossible.any():
        i = int(np.argmax(impossible))
        raise RecordFormatError(f"{counts[i]} records cannot fit in {int(sizes[i])} bytes", i)
    rec_batch = np.repeat(np.arange(nbatches, dtype=np.int64), count_arr)
    total = len(rec_batch)
    if total == 0:
        return _decode_fields(data, np.zeros(0, dtype=np.int64), rec_batch)

    proven = np.zeros(nbatches, dtype=bool)
    if walk in ("auto", "uniform"):
        # Producers often write records of one size, or of a few sizes in long runs.
        start, proven = _stride_starts(data, begins, ends, count_arr, rec_batch)
        if proven.all():
            return _decode_fields(data, start, rec_batch)
        walk = "python" if walk == "uniform" else walk
    if walk == "auto":
        walk = "lockstep" if int(count_arr.max()) * _LOCKSTEP_ROUND_COST < total * _WALK_RECORD_COST else "python"
    if walk == "lockstep":
        start = _walk_lockstep(data, begins, ends, count_arr)
        return _decode_fields(data, start, rec_batch)

    starts: list[int] = []
    expected = np.cumsum(count_arr).tolist()
    for i in range(nbatches):
        count, pos, end = counts[i], int(begins[i]), int(ends[i])
        if proven[i]:
            starts.extend(start[expected[i] - count : expected[i]].tolist())
            continue
        try:
            stop = _walk(buffer, pos, end, count, starts) if count else pos
        except IndexError:
            raise RecordFormatError("records run past the end of the batch", i) from None
        except RecordFormatError as exc:
            exc.batch = i
            raise
        if stop > end or len(starts) != expected[i]:
            raise RecordFormatError("premature end of batch records", i)
        if stop < end:
            raise RecordFormatError("bytes left after the last record of the batch", i)
    start = np.array(starts, dtype=np.int64)
    return _decode_fields(data, start, rec_batch)


def _decode_fields(data: np.ndarray, start: np.ndarray, batch_of: np.ndarray) -> RecordColumns:
    length, size = _varints(data, start, _VARINT_MAX)
    _check(length >= 0, "negative record length", batch_of)
    end = start + size + length
    p = start + size + 1  # attributes byte, unused
    _check(p <= end, "record shorter than its fixed fields", batch_of)

    ts_delta, size = _varints(data, p, _VARLONG_MAX)
    p += size
    offset_delta, size = _varints(data, p, _VARINT_MAX)
    p += size
    _check(p < end, "record truncated before its key", batch_of)

    key_len, size = _varints(data, p, _VARINT_MAX)
    key_len = np.maximum(key_len, -1)  # any negative length reads as null
    key_pos = p + size
    p = key_pos + np.maximum(key_len, 0)
    _check(p < end, "record truncated in its key", batch_of)

    value_len, size = _varints(data, p, _VARINT_MAX)
    value_len = np.maximum(value_len, -1)
    value_pos = p + size
    p = value_pos + np.maximum(value_len, 0)
    _check(p < end, "record truncated in its value", batch_of)

    header_count, size = _varints(data, p, _VARINT_MAX)
    p += size
    # every header takes at least two bytes (two length varints)
    _check((header_count >= 0) & (2 * header_count <= end - p), "invalid header count", batch_of)

    total = int(header_count.sum())
    hk_pos = np.zeros(total, dtype=np.int64)
    hk_len = np.zeros(total, dtype=np.int64)
    hv_pos = np.zeros(total, dtype=np.int64)
    hv_len = np.zeros(total, dtype=np.int64)
    if total:
        first_slot = np.zeros(len(header_count), dtype=np.int64)
        np.cumsum(header_count[:-1], out=first_slot[1:])
        rows = np.flatnonzero(header_count)
        h = 0
        while len(rows):
            q = p[rows]
            klen, size = _varints(data, q, _VARINT_MAX)
            _check(klen >= 0, "negative header key length", batch_of[rows])
            kpos = q + size
            q = kpos + klen
            _check(q < end[rows], "record truncated in a header key", batch_of[rows])
            vlen, size = _varints(data, q, _VARINT_MAX)
            vlen = np.maximum(vlen, -1)
            vpos = q + size
            q = vpos + np.maximum(vlen, 0)
            _check(q <= end[rows], "record truncated in a header value", batch_of[rows])
            slot = first_slot[rows] + h
            hk_pos[slot], hk_len[slot], hv_pos[slot], hv_len[slot] = kpos, klen, vpos, vlen
            p[rows] = q
            h += 1
            rows = rows[header_count[rows] > h]

    _check(p == end, "record fields do not add up to the record length", batch_of)
    return RecordColumns(
        data, batch_of, offset_delta, ts_delta, key_pos, key_len, value_pos, value_len, header_count,
        hk_pos, hk_len, hv_pos, hv_len,
    )
