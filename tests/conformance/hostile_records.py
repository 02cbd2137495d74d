"""v2 records written the unusual ways Kafka's readers accept (``DefaultRecord.readFrom``): varints
padded with continuation bytes up to their maximum size (5 bytes for a varint, 10 for a varlong),
null keys and values as -1 or another negative length, empty keys and values, headers (null
values, empty keys), control records, records that end exactly at the batch end; and the batch
bytes around them (any codec), CRC fixed. The conformance tests feed them to every record walker
and to both engines."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from hypothesis import strategies as st

from kafkalog.format import compression as codecs
from kafkalog.format import record_batch as rb

T0 = 1_700_000_000_000


def varint_bytes(raw: int, pad: int, max_bytes: int) -> bytes:
    """The unsigned varint ``raw`` with ``pad`` extra continuation bytes (never past ``max_bytes``)."""
    out = bytearray()
    while True:
        b = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(b | 0x80)
        else:
            out.append(b)
            break
    room = max(0, min(pad, max_bytes - len(out)))
    if room:
        out[-1] |= 0x80
        out += b"\x80" * (room - 1) + b"\x00"
    return bytes(out)


def zz32(v: int, pad: int = 0) -> bytes:
    return varint_bytes(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF, pad, 5)


def zz64(v: int, pad: int = 0) -> bytes:
    return varint_bytes(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF, pad, 10)


@dataclass
class Rec:
    """One record as the walkers should read it, and how its fields are padded."""

    ts_delta: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: List[Tuple[bytes, Optional[bytes]]]
    null_len: int = -1          # the negative length written for a null key/value
    pad: int = 0                # continuation bytes added to every varint of the record
    attributes: int = 0         # unused by Kafka; any byte

    def encode(self, offset_delta: int) -> bytes:
        p = self.pad

        def field(b: Optional[bytes]) -> bytes:
            return zz32(self.null_len, p) if b is None else zz32(len(b), p) + b

        body = (bytes([self.attributes]) + zz64(self.ts_delta, p) + zz32(offset_delta, p) + field(self.key)
                + field(self.value) + zz32(len(self.headers), p)
                + b"".join(zz32(len(k), p) + k + field(v) for k, v in self.headers))
        return zz32(len(body), p) + body


def batch(records: List[Rec], *, base_offset: int = 0, codec: int = 0, control: bool = False) -> bytes:
    """A v2 batch of ``records`` (CreateTime, base timestamp T0), framed as ``encode_batch`` frames it."""
    template = rb.encode_batch([rb.V2Record(base_offset + i, T0 + r.ts_delta, b"k", b"v") for i, r in enumerate(records)],
                               base_offset=base_offset, control=control, transactional=control,
                               producer_id=7 if control else -1, producer_epoch=0 if control else -1)
    region = b"".join(r.encode(i) for i, r in enumerate(records))
    out = bytearray(template[:rb.RECORDS_OFFSET] + (codecs.compress(codec, region) if codec else region))
    out[rb.ATTRIBUTES_OFFSET:rb.ATTRIBUTES_OFFSET + 2] = (
        int.from_bytes(out[rb.ATTRIBUTES_OFFSET:rb.ATTRIBUTES_OFFSET + 2], "big") & ~7 | codec).to_bytes(2, "big")
    out[rb.BASE_TIMESTAMP_OFFSET:rb.BASE_TIMESTAMP_OFFSET + 8] = T0.to_bytes(8, "big")
    out[8:12] = (len(out) - rb.LOG_OVERHEAD).to_bytes(4, "big", signed=True)
    out[rb.CRC_OFFSET:rb.ATTRIBUTES_OFFSET] = rb.compute_crc(out).to_bytes(4, "big")
    return bytes(out)


KEYS = [b"", b"a", b"b", b"key-\xff", b"k" * 40]
_bytes = st.one_of(st.sampled_from(KEYS), st.binary(max_size=24))

record = st.builds(
    Rec,
    ts_delta=st.one_of(st.integers(0, 5_000), st.integers(-(1 << 40), 1 << 40)),
    key=st.one_of(st.none(), st.sampled_from(KEYS)),
    value=st.one_of(st.none(), _bytes),
    headers=st.lists(st.tuples(st.sampled_from([b"", b"h", b"trace-id"]), st.one_of(st.none(), _bytes)), max_size=3),
    null_len=st.sampled_from([-1, -1, -2, -1000]),
    pad=st.sampled_from([0, 0, 1, 4, 9]),
    attributes=st.sampled_from([0, 0, 0x55]),
)


def control_record(ctype: int, pad: int = 0) -> Rec:
    """A transaction marker's record: key (version 0, type), value (version 0, coordinator epoch 1)."""
    return Rec(0, b"\x00\x00\x00" + bytes([ctype]), b"\x00\x00\x00\x00\x00\x01", [], pad=pad)
