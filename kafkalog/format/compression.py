"""Kafka's compression codecs as the JVM writes and reads them (Kafka's ``CompressionType.java`` and
``compress/*Compression.java``, snappy-java's ``SnappyOutputStream``, ``Lz4BlockOutputStream``): gzip, xerial/raw snappy,
Kafka's LZ4 frame subset (with the magic-0 broken header checksum), and zstd.

``decompress`` is bounded: a payload that expands beyond ``max_bytes`` raises DecompressedSizeError
before the memory is spent. ``compress`` writes what Kafka's producers write (Java's gzip header,
32 KiB xerial chunks, FLG 0x60 / BD 0x40 LZ4 frames, zstd level 3 without content size).
"""
from __future__ import annotations

import struct
import threading
import traceback
import zlib
from typing import Optional

import cramjam
import lz4.block
import lz4.frame
import numpy as np
import zstandard

from kafkalog.errors import DecompressedSizeError, DecompressionError, UnknownCodecError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: cid for cid, name in CODEC_NAMES.items()}
CODEC_IDS["uncompressed"] = NONE

DEFAULT_MAX_BATCH_BYTES = 256 << 20   # a batch may expand to this much; DecompressedSizeError past it

# gzip: the 10-byte member header java.util.zip.GZIPOutputStream writes (OS byte 0xFF on JDK 16+).
JAVA_GZIP_HEADER = bytes.fromhex("1f8b08000000000000ff")
GZIP_MAGIC = b"\x1f\x8b"

# snappy-java's SnappyOutputStream framing: 8-byte magic, int32 version, int32 min compatible version,
# then chunks of (int32 compressed length, raw snappy block of <= 32 KiB input).
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_HEADER_SIZE = 16
XERIAL_BLOCK_SIZE = 32 * 1024
XERIAL_MAGIC_AS_LENGTH = struct.unpack(">i", XERIAL_MAGIC[:4])[0]

# LZ4 frame (Kafka's Lz4BlockOutputStream / Lz4BlockInputStream), little-endian fields.
LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_FLG = 0x60            # version 01, independent blocks, no checksums, no content size
LZ4_BD = 0x40             # block max size id 4 = 64 KiB
LZ4_FLG_VERSION_SHIFT = 6
LZ4_FLG_BLOCK_INDEPENDENT = 0x20
LZ4_FLG_BLOCK_CHECKSUM = 0x10
LZ4_FLG_CONTENT_SIZE = 0x08
LZ4_FLG_CONTENT_CHECKSUM = 0x04
LZ4_FLG_RESERVED = 0x03
LZ4_BD_RESERVED = 0x8F
LZ4_BLOCK_UNCOMPRESSED = 0x80000000
LZ4_BLOCK_SIZES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_U32 = struct.Struct("<I")

ZSTD_LEVEL = 3
GZIP_LEVEL = 6


def codec_name(codec: int) -> str:
    return CODEC_NAMES.get(codec, f"unknown({codec})")


def parse_codec(name: str | int) -> int:
    """'gzip' / 'zstd' / 1 … → codec id (the names kafka-configs and producers use)."""
    if isinstance(name, int):
        if name not in CODEC_NAMES:
            raise ValueError(f"unknown compression codec id {name}")
        return name
    try:
        return CODEC_IDS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown compression {name!r}; one of {', '.join(CODEC_NAMES.values())}") from None


# --- xxh32, only for the LZ4 frame descriptor checksum (a few bytes) ----------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 in plain Python: used on LZ4 frame descriptors (2-10 bytes), never on payloads."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for k in range(4):
                lane = int.from_bytes(data[i:i + 4], "little")
                v[k] = (_rotl((v[k] + lane * _P2) & _M32, 13) * _P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[i:i + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def lz4_header_checksum(descriptor: bytes) -> int:
    return (xxh32(descriptor) >> 8) & 0xFF


# --- decompression -------------------------------------------------------------------------

class OutputBuffer:
    """A growable byte buffer that codecs decompress into. Reusing one across batches (and windows)
    keeps its pages warm, which matters more than the copy itself at these speeds."""

    def __init__(self, capacity: int = 1 << 20):
        self.array = np.empty(capacity, dtype=np.uint8)

    def reserve(self, size: int, keep: int) -> np.ndarray:
        """Make room for ``size`` bytes, keeping the first ``keep``; returns the array."""
        if size > len(self.array):
            grown = np.empty(max(size, 2 * len(self.array)), dtype=np.uint8)
            grown[:keep] = self.array[:keep]
            self.array = grown
        return self.array

    def release(self) -> None:
        """Let go of what a rejected payload made it grow to (a zstd bomb: up to max_bytes) now,
        rather than when the garbage collector frees the error's traceback."""
        if len(self.array) > _KEPT_AFTER_ERROR:
            self.array = np.empty(_KEPT_AFTER_ERROR, dtype=np.uint8)


_KEPT_AFTER_ERROR = 1 << 20
_THREAD_BUFFERS = threading.local()


def thread_output_buffer(role: str) -> OutputBuffer:
    """This thread's ``OutputBuffer`` for ``role``, kept from one call to the next: a walk that runs
    segment after segment (the cleaner's map pass, its recopy) reuses pages it already touched
    instead of faulting in a fresh buffer per segment. One user per role at a time."""
    buffers = getattr(_THREAD_BUFFERS, "buffers", None)
    if buffers is None:
        buffers = _THREAD_BUFFERS.buffers = {}
    buf = buffers.get(role)
    if buf is None:
        buf = buffers[role] = OutputBuffer(1 << 20)
    return buf


def release_frames(error: Optional[BaseException]) -> None:
    """Drop the locals of the finished frames an error's traceback holds (decompression buffers,
    views of them), so a rejected batch's memory is freed when the error is raised."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)
        error = error.__context__ or error.__cause__


def _too_big(codec: int, max_bytes: int) -> DecompressedSizeError:
    return DecompressedSizeError(f"{codec_name(codec)} payload expands beyond {max_bytes} bytes")


def _block_too_big(codec: int, block_bytes: int, used: int, max_bytes: int) -> DecompressedSizeError:
    """A block whose declared size does not fit: names that size, what came before it, and the cap."""
    return DecompressedSizeError(f"{codec_name(codec)} block expands to {block_bytes} bytes; with the {used} bytes "
                                 f"before it the payload would exceed {max_bytes} bytes")


def _put(out: OutputBuffer, at: int, data) -> int:
    n = len(data)
    out.reserve(at + n, at)[at:at + n] = np.frombuffer(data, dtype=np.uint8)
    return at + n


def _gunzip(data, out: OutputBuffer, at: int, max_bytes: int) -> int:
    start = at
    rest = data
    first = True
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(rest, max_bytes - (at - start) + 1)
        except zlib.error as e:
            if not first:    # GZIPInputStream ends the stream at trailing bytes that are not a member
                return at
            raise DecompressionError(f"gzip: {e}") from None
        first = False
        if at - start + len(chunk) > max_bytes:
            raise _too_big(GZIP, max_bytes)
        at = _put(out, at, chunk)
        if not d.eof:
            raise DecompressionError("gzip stream is truncated")
        rest = d.unused_data
        # GZIPInputStream reads concatenated members and ignores trailing bytes that are not one.
        if len(rest) < 10 or rest[:2] != GZIP_MAGIC:
            return at


def _unsnappy(data, out: OutputBuffer, at: int, max_bytes: int) -> int:
    if len(data) < XERIAL_HEADER_SIZE or bytes(data[:8]) != XERIAL_MAGIC:
        return _raw_snappy(data, out, at, max_bytes)            # producers that wrote raw snappy
    (version,) = struct.unpack_from(">i", data, 8)
    if version < 1:     # SnappyInputStream.readHeader: "compressed with an incompatible codec version"
        raise DecompressionError(f"snappy: xerial stream has version {version}, below the minimum compatible 1")
    start = at
    pos = XERIAL_HEADER_SIZE
    end = len(data)
    while pos + 4 <= end:
        (length,) = struct.unpack_from(">i", data, pos)
        if length == XERIAL_MAGIC_AS_LENGTH:
            if bytes(data[pos:pos + 8]) != XERIAL_MAGIC:
                break          # snappy-java ends the stream here
            if pos + XERIAL_HEADER_SIZE > end:
                raise DecompressionError("snappy: truncated concatenated stream header")
            version, _ = struct.unpack_from(">ii", data, pos + 8)
            if version < 1:
                raise DecompressionError(f"snappy: concatenated stream has version {version}")
            pos += XERIAL_HEADER_SIZE
            continue
        if length < 0:
            raise DecompressionError(f"snappy: negative chunk length {length} at payload byte {pos}")
        pos += 4
        if pos + length > end:
            raise DecompressionError(f"snappy: chunk of {length} bytes runs past the payload end")
        at = _raw_snappy(data[pos:pos + length], out, at, max_bytes, used=at - start)
        pos += length
    return at


def _raw_snappy(block, out: OutputBuffer, at: int, max_bytes: int, used: int = 0) -> int:
    """One raw snappy block at ``at``; ``used`` bytes of the payload's ``max_bytes`` came before it."""
    try:
        n = cramjam.snappy.decompress_raw_len(block)
    except Exception as e:  # cramjam raises its own DecompressionError
        raise DecompressionError(f"snappy: {e}") from None
    if used + n > max_bytes:
        raise _block_too_big(SNAPPY, n, used, max_bytes)
    arr = out.reserve(at + n, at)
    try:
        written = cramjam.snappy.decompress_raw_into(block, arr[at:at + n])  # type: ignore[arg-type, unused-ignore]
    except Exception as e:
        raise DecompressionError(f"snappy: {e}") from None
    return at + written


_LZ4_HC_CACHE: dict = {}


def _lz4_hc(descriptor: bytes) -> int:
    hc = _LZ4_HC_CACHE.get(descriptor)
    if hc is None:
        hc = _LZ4_HC_CACHE[descriptor] = lz4_header_checksum(descriptor)
    return hc


# The frame header Kafka's producers write (FLG 0x60, BD 0x40), with the correct and the magic-0 checksum.
KAFKA_LZ4_HEADER = LZ4_MAGIC + bytes([LZ4_FLG, LZ4_BD, 0x82])
_KAFKA_LZ4_HEADER_V0 = LZ4_MAGIC + bytes([LZ4_FLG, LZ4_BD, 0x1A])


def _unlz4(data, out: OutputBuffer, at: int, max_bytes: int, magic: int) -> int:
    head = bytes(data[:7])
    if head == KAFKA_LZ4_HEADER or (magic == 0 and head == _KAFKA_LZ4_HEADER_V0):
        return _lz4_blocks(data, 7, out, at, max_bytes, LZ4_BLOCK_SIZES[4])    # the usual frame: no parsing
    if len(data) < 7 or head[:4] != LZ4_MAGIC:
        raise DecompressionError("lz4: payload does not start with the LZ4 frame magic 04 22 4D 18")
    flg, bd = data[4], data[5]
    if flg & LZ4_FLG_RESERVED or bd & LZ4_BD_RESERVED:
        raise DecompressionError("lz4: reserved bits set in the frame descriptor")
    if flg >> LZ4_FLG_VERSION_SHIFT != 1:
        raise DecompressionError(f"lz4: frame version {flg >> LZ4_FLG_VERSION_SHIFT}, expected 1")
    if not flg & LZ4_FLG_BLOCK_INDEPENDENT:
        raise DecompressionError("lz4: dependent blocks are not supported (Kafka rejects them too)")
    block_max = LZ4_BLOCK_SIZES.get((bd >> 4) & 0x07)
    if block_max is None:
        raise DecompressionError(f"lz4: block size id {(bd >> 4) & 0x07} outside 4..7")
    pos = 6 + (8 if flg & LZ4_FLG_CONTENT_SIZE else 0)
    if pos >= len(data):
        raise DecompressionError("lz4: truncated frame descriptor")
    expected_hc = _lz4_hc(bytes(data[4:pos]))
    if magic >= 1 and data[pos] != expected_hc:
        raise DecompressionError("lz4: stream frame descriptor corrupted (header checksum)")
    if flg & LZ4_FLG_BLOCK_CHECKSUM:
        # Third-party frames with block checksums: python-lz4's frame decoder verifies them, as Kafka
        # does. Kafka skips the content size and does not verify the content checksum, so the frame
        # is re-headed without those flags (and with a correct header checksum, which Kafka skips
        # for magic 0) before it is handed over.
        flg2 = flg & ~(LZ4_FLG_CONTENT_SIZE | LZ4_FLG_CONTENT_CHECKSUM)
        frame = LZ4_MAGIC + bytes([flg2, bd, _lz4_hc(bytes([flg2, bd]))]) + bytes(data[pos + 1:])
        try:
            d = lz4.frame.LZ4FrameDecompressor()
            result = d.decompress(frame, max_length=max_bytes + 1)
        except RuntimeError as e:
            raise DecompressionError(f"lz4: {e}") from None
        if len(result) > max_bytes:
            raise _too_big(LZ4, max_bytes)
        if not d.eof:
            raise DecompressionError("lz4: frame is truncated")
        return _put(out, at, result)
    return _lz4_blocks(data, pos + 1, out, at, max_bytes, block_max)


def _lz4_blocks(data, pos: int, out: OutputBuffer, at: int, max_bytes: int, block_max: int) -> int:
    """The blocks of a frame without checksums, from ``pos`` to the end mark."""
    start = at
    end = len(data)
    while True:
        if pos + 4 > end:
            raise DecompressionError("lz4: frame ends without an end mark")
        (word,) = _U32.unpack_from(data, pos)
        pos += 4
        size = word & ~LZ4_BLOCK_UNCOMPRESSED
        if size == 0:
            return at       # the end mark: Kafka's Lz4BlockInputStream masks bit 31 before testing for it
        if size > block_max:
            raise DecompressionError(f"lz4: block of {size} bytes exceeds the frame's {block_max}")
        if pos + size > end:
            raise DecompressionError("lz4: block runs past the payload end")
        if word & LZ4_BLOCK_UNCOMPRESSED:
            at = _put(out, at, data[pos:pos + size])
        else:
            arr = out.reserve(at + block_max, at)
            try:
                # output_len is required: without it cramjam 2.14 may read the block's first four bytes
                # as a size prefix and decode the rest, returning wrong bytes without an error when that
                # rest happens to be a valid block (hypothesis found a 3-record batch that does it)
                at += cramjam.lz4.decompress_block_into(data[pos:pos + size], arr[at:at + block_max],  # type: ignore[arg-type, unused-ignore]
                                                        output_len=block_max)
            except Exception as e:
                raise DecompressionError(f"lz4: {e}") from None
        if at - start > max_bytes:
            raise _too_big(LZ4, max_bytes)
        pos += size


_ZSTD_STEP = 1 << 20
_ZSTD_LOCAL = threading.local()


def _zstd_dctx() -> zstandard.ZstdDecompressor:
    """One decompression context per thread: zstandard's contexts are not thread-safe."""
    dctx = getattr(_ZSTD_LOCAL, "dctx", None)
    if dctx is None:
        dctx = _ZSTD_LOCAL.dctx = zstandard.ZstdDecompressor()
    return dctx


ZSTD_FRAME_MAGIC = 0xFD2FB528
ZSTD_SKIPPABLE_MASK, ZSTD_SKIPPABLE_MAGIC = 0xFFFFFFF0, 0x184D2A50
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)
_ZSTD_BLOCK_RLE, _ZSTD_BLOCK_RESERVED = 1, 3


def _zstd_truncated_frame(data) -> Optional[int]:
    """Where a zstd frame starts that the payload ends inside of, or None. Walks frame headers and
    block headers only (RFC 8878 §3.1): the stream decoder stops quietly at the end of its input,
    where Kafka's zstd-jni stream fails on a truncated source."""
    end = len(data)
    pos = 0
    while pos + 4 <= end:
        start = pos
        (magic,) = _U32.unpack_from(data, pos)
        if magic & ZSTD_SKIPPABLE_MASK == ZSTD_SKIPPABLE_MAGIC:
            if pos + 8 > end:
                return start
            pos += 8 + _U32.unpack_from(data, pos + 4)[0]
        elif magic == ZSTD_FRAME_MAGIC:
            if pos + 5 > end:
                return start
            fhd = data[pos + 4]
            single_segment = (fhd >> 5) & 1
            fcs_size = (1 if single_segment else 0, 2, 4, 8)[fhd >> 6]
            pos += 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[fhd & 3] + fcs_size
            while True:
                if pos + 3 > end:
                    return start
                header = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
                kind = (header >> 1) & 3
                if kind == _ZSTD_BLOCK_RESERVED:
                    return None                     # corrupt, not truncated: zstd itself says so
                pos += 3 + (1 if kind == _ZSTD_BLOCK_RLE else header >> 3)
                if header & 1:                      # last block
                    break
            pos += 4 if (fhd >> 2) & 1 else 0       # content checksum
        else:
            return None                             # not a frame: zstd itself reports that
        if pos > end:
            return start
    return None


def _unzstd(data, out: OutputBuffer, at: int, max_bytes: int) -> int:
    start = at
    try:
        reader = _zstd_dctx().stream_reader(data, read_size=max(len(data), 1), read_across_frames=True)
        while True:
            arr = out.reserve(at + _ZSTD_STEP, at)
            n = reader.readinto(memoryview(arr)[at:at + _ZSTD_STEP])  # type: ignore[arg-type, unused-ignore]
            if n == 0:
                break
            at += n
            if at - start > max_bytes:
                raise _too_big(ZSTD, max_bytes)
    except zstandard.ZstdError as e:
        raise DecompressionError(f"zstd: {e}") from None
    if at == start and len(data):
        raise DecompressionError("zstd: no complete frame in the payload")
    cut = _zstd_truncated_frame(data)
    if cut is not None:
        raise DecompressionError(f"zstd: the payload ends inside the frame at payload byte {cut} (truncated source)")
    return at


def decompress_into(codec: int, data, out: OutputBuffer, at: int = 0, *, magic: int = 2,
                    max_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> int:
    """Decompress one batch payload into ``out`` from byte ``at``; returns the end position. On an
    error, what ``out`` grew to is released before it is raised."""
    try:
        return _decompress_into(codec, data, out, at, magic, max_bytes)
    except BaseException as e:
        out.release()
        release_frames(e)
        raise


def _decompress_into(codec: int, data, out: OutputBuffer, at: int, magic: int, max_bytes: int) -> int:
    if codec == GZIP:
        return _gunzip(data, out, at, max_bytes)
    if codec == SNAPPY:
        return _unsnappy(data, out, at, max_bytes)
    if codec == LZ4:
        return _unlz4(data, out, at, max_bytes, magic)
    if codec == ZSTD:
        if magic < 2:
            raise UnknownCodecError(f"zstd is not allowed with magic {magic}")
        return _unzstd(data, out, at, max_bytes)
    if codec == NONE:
        return _put(out, at, data)
    raise UnknownCodecError(f"unknown compression type id {codec}")


def decompress(codec: int, data, *, magic: int = 2, max_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> bytes:
    """Decompress one batch payload (v2 records region, or a legacy wrapper's value) to bytes."""
    out = OutputBuffer(max(64, 4 * len(data)))
    end = decompress_into(codec, data, out, 0, magic=magic, max_bytes=max_bytes)   # may replace out.array
    return out.array[:end].tobytes()


# --- compression (what Kafka's producers write) ----------------------------------------------

def _gzip(data: bytes, level: Optional[int]) -> bytes:
    c = zlib.compressobj(GZIP_LEVEL if level is None or level < 0 else level, zlib.DEFLATED, -zlib.MAX_WBITS, 8, 0)
    body = c.compress(data) + c.flush()
    return JAVA_GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data) & _M32, len(data) & _M32)


def _snappy(data: bytes) -> bytes:
    out = [XERIAL_HEADER]
    for i in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(data[i:i + XERIAL_BLOCK_SIZE]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _lz4(data: bytes, magic: int) -> bytes:
    descriptor = bytes([LZ4_FLG, LZ4_BD])
    # Kafka's historical bug for magic 0: the header checksum hashed the magic too.
    hc = lz4_header_checksum(LZ4_MAGIC + descriptor if magic == 0 else descriptor)
    out = [LZ4_MAGIC, descriptor, bytes([hc])]
    block_max = LZ4_BLOCK_SIZES[4]
    for i in range(0, len(data), block_max):
        raw = data[i:i + block_max]
        comp = lz4.block.compress(raw, store_size=False)
        if len(comp) >= len(raw):
            out.append(_U32.pack(len(raw) | LZ4_BLOCK_UNCOMPRESSED))
            out.append(raw)
        else:
            out.append(_U32.pack(len(comp)))
            out.append(comp)
    out.append(_U32.pack(0))
    return b"".join(out)


def _zstd_cctx(level: int) -> zstandard.ZstdCompressor:
    """One compression context per thread and level, reused (zstandard's contexts are not
    thread-safe; making one per batch cost as much as compressing a 16 KiB batch)."""
    cache = getattr(_ZSTD_LOCAL, "cctx", None)
    if cache is None:
        cache = _ZSTD_LOCAL.cctx = {}
    cctx = cache.get(level)
    if cctx is None:
        cctx = cache[level] = zstandard.ZstdCompressor(level=level, write_content_size=False, write_checksum=False)
    return cctx


def _zstd(data: bytes, level: Optional[int]) -> bytes:
    obj = _zstd_cctx(ZSTD_LEVEL if level is None else level).compressobj()
    return obj.compress(data) + obj.flush()


def compress(codec: int, data: bytes, *, magic: int = 2, level: Optional[int] = None) -> bytes:
    if codec == GZIP:
        return _gzip(data, level)
    if codec == SNAPPY:
        return _snappy(data)
    if codec == LZ4:
        return _lz4(data, magic)
    if codec == ZSTD:
        if magic < 2:
            raise UnknownCodecError(f"zstd is not allowed with magic {magic}")
        return _zstd(data, level)
    if codec == NONE:
        return data
    raise UnknownCodecError(f"unknown compression type id {codec}")
