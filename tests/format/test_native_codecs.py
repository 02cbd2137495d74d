"""The native window path (format.native + compression_accel + the CRC kernel) against the
reference codecs: same tables, same windows, same errors, for every framing Kafka's producers write
and for the unusual ones it hands back. Three readers are compared: the compiled engine with native
functions, the compiled engine without them (``native.look_up`` replaced: none found) and the
reference engine."""
from __future__ import annotations

import os
import platform
import random
import struct
import subprocess
import sys
import textwrap

import cramjam
import lz4.block
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog import errors
from kafkalog.log import records_io as segment
from kafkalog.format import compression as codecs
from kafkalog.format import native
from kafkalog.format import record_batch as rb

NATIVE_PLATFORM = sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64")


@pytest.fixture
def without_native(monkeypatch):
    """The compiled engine as on a platform where no C function is found: ``switch(True)``."""
    real = native.look_up

    def switch(off: bool):
        monkeypatch.setattr(native, "look_up", native.NativeFunctions if off else real)
        native.reset_native_functions()
    yield switch
    monkeypatch.setattr(native, "look_up", real)
    native.reset_native_functions()


def _records(n, seed=1, value_size=100, headers=False):
    rnd = random.Random(seed)
    words = [bytes(rnd.choice(b"abcdefgh") for _ in range(rnd.randint(1, 9))) for _ in range(50)]
    out = []
    for i in range(n):
        value = b" ".join(rnd.choice(words) for _ in range(value_size // 4))[:value_size]
        hdrs = [("h%d" % (i % 3), b"x" * (i % 5))] if headers and i % 2 else []
        out.append(rb.V2Record(i, 1_000 + i, b"key-%06d" % (i % 97) if i % 11 else None, value, hdrs))
    return out


def _with_payload(records, codec: int, payload: bytes, base_offset=None) -> bytes:
    """An uncompressed batch of ``records`` re-framed with ``payload`` as its compressed records."""
    plain = bytearray(rb.encode_batch(records, base_offset=base_offset))
    attrs = struct.unpack_from(">h", plain, rb.ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", plain, rb.ATTRIBUTES_OFFSET, (attrs & ~7) | codec)
    out = bytearray(plain[:rb.RECORDS_OFFSET]) + payload
    struct.pack_into(">i", out, rb.LENGTH_OFFSET, len(out) - rb.LOG_OVERHEAD)
    struct.pack_into(">I", out, rb.CRC_OFFSET, rb.compute_crc(out))
    return bytes(out)


def _region(records) -> bytes:
    return rb.encode_batch(records)[rb.RECORDS_OFFSET:]


def _write(tmp_path, data: bytes, name="topic-0"):
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    p = d / "00000000000000000000.log"
    p.write_bytes(data)
    return p


def _three_ways(path, without_native, **options):
    """(batches with native, batches without, python engine's table)."""
    without_native(False)
    fast = list(segment.iter_segment(path, engine="compiled", **options))
    without_native(True)
    slow = list(segment.iter_segment(path, engine="compiled", **options))
    without_native(False)
    ref = segment.read_segment(path, engine="reference", **options)
    return fast, slow, ref


def _assert_same(path, without_native, **options):
    fast, slow, ref = _three_ways(path, without_native, **options)
    assert [b.num_rows for b in fast] == [b.num_rows for b in slow], "windows differ"
    for a, b in zip(fast, slow):
        assert a.equals(b)
    import pyarrow as pa
    table = pa.Table.from_batches(fast, schema=ref.schema) if fast else ref.slice(0, 0)
    assert table.equals(ref)
    return table


# --- what the machine offers -----------------------------------------------------------------

@pytest.mark.skipif(not NATIVE_PLATFORM, reason="the pinned lz4/zstandard/crc32c wheels export their C API on "
                                                "linux x86_64; elsewhere the reference path is used")
def test_native_functions_are_found_and_checked(without_native):
    without_native(False)
    found = native.native_functions()
    assert found.lz4_decompress_safe and found.zstd_decompress_stream and found.crc32c_update, found
    without_native(True)
    assert native.native_functions() == native.NativeFunctions()


# --- each codec, each framing ----------------------------------------------------------------

SNAPPY_CASES = {
    "xerial": lambda region: codecs.compress(codecs.SNAPPY, region),
    "raw": lambda region: bytes(cramjam.snappy.compress_raw(region)),
    "xerial-empty-trailer": lambda region: codecs.compress(codecs.SNAPPY, region) + b"\x00\x00",
}
LZ4_CASES = {
    "kafka-frame": lambda region: codecs.compress(codecs.LZ4, region),
    # another frame descriptor (content size and checksum flags): the reference path decodes it
    "frame-with-content-size": lambda region: lz4.frame.compress(
        region, content_checksum=True, store_size=True, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX64KB),
    "trailing-bytes-after-end-mark": lambda region: codecs.compress(codecs.LZ4, region) + b"junk",
}
ZSTD_CASES = {
    "java-like": lambda region: codecs.compress(codecs.ZSTD, region),
    "with-content-size": lambda region: zstandard.ZstdCompressor(write_content_size=True).compress(region),
    "two-frames": lambda region: (zstandard.ZstdCompressor().compress(region[:len(region) // 2])
                                  + zstandard.ZstdCompressor().compress(region[len(region) // 2:])),
}


@pytest.mark.parametrize("codec,case", [(codecs.SNAPPY, c) for c in SNAPPY_CASES] + [(codecs.LZ4, c) for c in LZ4_CASES]
                         + [(codecs.ZSTD, c) for c in ZSTD_CASES])
@pytest.mark.parametrize("n,value_size", [(40, 100), (300, 400)])   # the second passes 64 KiB (several blocks)
def test_framings_decode_like_the_reference(tmp_path, without_native, codec, case, n, value_size):
    make = {codecs.SNAPPY: SNAPPY_CASES, codecs.LZ4: LZ4_CASES, codecs.ZSTD: ZSTD_CASES}[codec][case]
    data = b""
    for b in range(3):
        recs = _records(n, seed=b, value_size=value_size, headers=b == 1)
        recs = [rb.V2Record(b * n + r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]
        data += _with_payload(recs, codec, make(_region(recs)))
    table = _assert_same(_write(tmp_path, data), without_native)
    assert table.num_rows == 3 * n


def test_incompressible_lz4_blocks_are_stored_and_copied(tmp_path, without_native):
    rnd = random.Random(5)
    recs = [rb.V2Record(i, i, None, bytes(rnd.getrandbits(8) for _ in range(3000))) for i in range(40)]
    payload = codecs.compress(codecs.LZ4, _region(recs))
    assert struct.unpack_from("<I", payload, 7)[0] & 0x80000000, "the first block is stored uncompressed"
    _assert_same(_write(tmp_path, _with_payload(recs, codecs.LZ4, payload)), without_native)


def test_lz4_block_that_also_reads_as_size_prefixed_decodes_as_plain(tmp_path, without_native):
    """cramjam's block decoder, asked without an output length, read this block's first four bytes
    (c3 0e 00 00) as a size prefix and returned 17 wrong bytes without an error; found by
    hypothesis in the cleaner's writer test."""
    recs = [rb.V2Record(offset, 1_700_000_000_000, None, None) for offset in (128, 129, 130)]
    region = rb.encode_batch(recs, base_offset=0)[rb.RECORDS_OFFSET:]
    payload = codecs.compress(codecs.LZ4, region)
    assert payload[11:15] == bytes.fromhex("c30e0000")
    assert codecs.decompress(codecs.LZ4, payload) == region
    table = _assert_same(_write(tmp_path, _with_payload(recs, codecs.LZ4, payload, base_offset=0)), without_native)
    assert table.column("offset").to_pylist() == [128, 129, 130]
    assert table.column("value").null_count == 3


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.binary(max_size=300) | st.sampled_from([b"a" * 70, b"ab" * 40, b"abcdefghij" * 9,
                                                                  b"0123456789abcdefXY" * 5]),
                       min_size=1, max_size=60),
       codec=st.sampled_from([codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]))
def test_any_records_decode_like_the_reference(tmp_path_factory, without_native, values, codec):
    """Repeating patterns (snappy copies with offsets < 8 and < 16, long literals) and random bytes."""
    recs = [rb.V2Record(i, i, b"k" if i % 2 else None, v) for i, v in enumerate(values)]
    path = _write(tmp_path_factory.mktemp("p"), rb.encode_batch(recs, codec=codec))
    _assert_same(path, without_native)


# --- windows and budgets ---------------------------------------------------------------------

@pytest.mark.parametrize("codec", [codecs.NONE, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD])
def test_windows_split_the_same_way(tmp_path, without_native, codec):
    data = b"".join(rb.encode_batch([rb.V2Record(b * 50 + i, i, b"k", b"v" * 200) for i in range(50)], codec=codec)
                    for b in range(30))
    fast, slow, ref = _three_ways(_write(tmp_path, data), without_native, window_bytes=40_000)
    assert len(fast) > 5 and [b.num_rows for b in fast] == [b.num_rows for b in slow]
    assert sum(b.num_rows for b in fast) == ref.num_rows == 1500


def test_a_batch_bigger_than_the_thread_buffer_grows_it(tmp_path, without_native):
    """WIN_SPACE: 20 MiB of records in one zstd batch and one lz4 batch (the buffer starts at 16 MiB)."""
    value = bytes(range(256)) * 4096          # 1 MiB
    data = b""
    for b, codec in enumerate((codecs.ZSTD, codecs.LZ4, codecs.SNAPPY)):
        data += rb.encode_batch([rb.V2Record(b * 20 + i, i, None, value) for i in range(20)], codec=codec)
    table = _assert_same(_write(tmp_path, data), without_native)
    assert table.num_rows == 60


def test_empty_and_mixed_batches(tmp_path, without_native):
    data = (rb.encode_batch([rb.V2Record(0, 0, b"a", b"b")], codec=codecs.LZ4)
            + rb.encode_batch([], base_offset=1, last_offset_delta=0, codec=codecs.ZSTD)
            + rb.encode_batch([rb.V2Record(2, 0, b"c", b"d")])
            + rb.encode_batch([rb.V2Record(3, 0, b"e", b"f")], codec=codecs.GZIP)
            + rb.encode_batch([rb.V2Record(4, 0, b"g", b"h")], codec=codecs.SNAPPY))
    assert _assert_same(_write(tmp_path, data), without_native).num_rows == 4


# --- errors: the reference path reports them -------------------------------------------------

def _corrupt_payload(codec: int, region: bytes) -> bytes:
    payload = bytearray(codecs.compress(codec, region))
    if codec == codecs.SNAPPY:
        payload[20] ^= 0xFF                  # inside the first chunk's tags
    elif codec == codecs.LZ4:
        payload[13] ^= 0xFF
    else:
        payload[-5] ^= 0xFF
    return bytes(payload)


@pytest.mark.parametrize("codec", [codecs.SNAPPY, codecs.LZ4, codecs.ZSTD])
@pytest.mark.parametrize("how", ["corrupt", "truncated", "too-big"])
def test_errors_are_the_reference_errors(tmp_path, without_native, codec, how):
    good = rb.encode_batch(_records(20), codec=codec)
    recs = [rb.V2Record(20 + r.offset, r.timestamp, r.key, r.value) for r in _records(200, value_size=400)]
    region = _region(recs)
    if how == "corrupt":
        bad = _with_payload(recs, codec, _corrupt_payload(codec, region))
    elif how == "truncated":
        bad = _with_payload(recs, codec, codecs.compress(codec, region)[:-40])
    else:
        bad = _with_payload(recs, codec, codecs.compress(codec, region))
    options = {"max_batch_bytes": 10_000} if how == "too-big" else {}
    path = _write(tmp_path, good + bad)
    raised = []
    for off in (False, True):
        without_native(off)
        try:
            segment.read_segment(path, engine="compiled", **options)
        except errors.KafkalogError as e:
            raised.append((type(e), str(e), e.position))
        else:
            raised.append(None)
        reader = segment.SegmentReader(path, segment.ReadOptions(on_corrupt="stop", engine="compiled", **options))
        assert sum(b.num_rows for b in reader) in (20, 220) and reader.valid_bytes in (len(good), len(good + bad))
    assert raised[0] == raised[1], raised
    if how != "truncated" or codec != codecs.SNAPPY:
        assert raised[0] is not None and raised[0][2] == len(good), raised
    if how == "too-big":
        assert raised[0][0] is errors.DecompressedSizeError


# --- the CRC kernel --------------------------------------------------------------------------

def test_crc_kernel_finds_the_bad_batch(tmp_path, without_native):
    batches = [rb.encode_batch([rb.V2Record(b * 5 + i, i, b"k", b"v" * 30) for i in range(5)], codec=c)
               for b, c in enumerate([0, codecs.LZ4, 0, codecs.ZSTD])]
    data = bytearray(b"".join(batches))
    flip = len(batches[0]) + len(batches[1]) + 70
    data[flip] ^= 1
    path = _write(tmp_path, bytes(data))
    seen = []
    for off in (False, True):
        without_native(off)
        with pytest.raises(errors.CrcMismatchError) as e:
            segment.read_segment(path)
        seen.append((str(e.value), e.value.position))
    assert seen[0] == seen[1] and seen[0][1] == len(batches[0]) + len(batches[1])


def test_crc_kernel_hands_legacy_entries_to_python(tmp_path, without_native):
    from kafkalog.format import legacy_record as legacy

    data = rb.encode_batch([rb.V2Record(0, 0, b"k", b"v")]) + legacy.encode_message(
        magic=1, offset=1, timestamp=5, key=b"k", value=b"v")
    path = _write(tmp_path, data)
    without_native(False)
    assert segment.read_segment(path).num_rows == 2
    bad = bytearray(data)
    bad[-1] ^= 1
    path.write_bytes(bytes(bad))
    with pytest.raises(errors.CrcMismatchError) as e:
        segment.read_segment(path)
    assert e.value.position == len(rb.encode_batch([rb.V2Record(0, 0, b"k", b"v")]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(codec=st.sampled_from([codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]), seed=st.integers(0, 2 ** 32 - 1),
       flips=st.integers(1, 4), cut=st.integers(0, 3))
def test_corrupt_payloads_never_crash_and_match_the_reference(tmp_path_factory, without_native, codec, seed, flips,
                                                              cut):
    """Payload bytes flipped (CRC recomputed, so the codec sees them) or cut short: the native path
    either decodes what the reference codecs decode or raises what they raise, never crashes."""
    rnd = random.Random(seed)
    recs = _records(60, seed=seed % 7, value_size=rnd.choice([20, 150, 1200]))
    payload = bytearray(codecs.compress(codec, _region(recs)))
    for _ in range(flips):
        payload[rnd.randrange(len(payload))] = rnd.getrandbits(8)
    if cut:
        payload = payload[:max(1, len(payload) - rnd.randrange(1, 64))]
    path = _write(tmp_path_factory.mktemp("c"), _with_payload(recs, codec, bytes(payload)))
    outcomes = []
    for off in (False, True):
        without_native(off)
        try:
            outcomes.append(("rows", segment.read_segment(path, engine="compiled")))
        except errors.KafkalogError as e:
            outcomes.append(("error", type(e), str(e), e.position))
    if outcomes[0][0] == "rows" and outcomes[1][0] == "rows":
        assert outcomes[0][1].equals(outcomes[1][1])
    else:
        assert outcomes[0] == outcomes[1]


def _outcome(path, engine="compiled", **options):
    try:
        return ("rows", segment.read_segment(path, engine=engine, **options).to_pylist())
    except errors.KafkalogError as e:
        return ("error", type(e).__name__, str(e), e.position)


# --- found in review: each of these failed before its fix ------------------------------------------

ZSTD_NOTHING = {
    "empty-frame": zstandard.ZstdCompressor(write_content_size=False).compress(b""),
    "skippable-frame-only": struct.pack("<II", 0x184D2A50, 3) + b"abc",
}


@pytest.mark.parametrize("case", sorted(ZSTD_NOTHING))
def test_zstd_payload_without_output_raises_the_reference_error(tmp_path, without_native, case):
    """(review) compression_accel._zstd returned WIN_DONE with 0 bytes where compression._unzstd raises
    "zstd: no complete frame in the payload", so the accel reader raised another error."""
    recs = _records(5)
    path = _write(tmp_path, _with_payload(recs, codecs.ZSTD, ZSTD_NOTHING[case]))
    without_native(False)
    fast = _outcome(path)
    without_native(True)
    slow = _outcome(path)
    ref = _outcome(path, engine="reference")
    assert slow == ref
    assert fast == ref


# --- limits the kernels must not trust ----------------------------------------------------------------

def test_negative_max_batch_bytes_is_refused_and_the_zstd_kernel_survives_it(tmp_path):
    """(review) _zstd once set ZSTD_outBuffer.size = min(cap, at + limit + 1): with limit <= -2 that is
    ~2**64 as size_t, and zstd wrote past the 16 MiB workspace buffer (SIGSEGV). ReadOptions now
    refuses a limit below 1, and the kernel itself falls back on a negative one (run in a
    subprocess: a regression would kill the process)."""
    with pytest.raises(ValueError, match="max_batch_bytes"):
        segment.ReadOptions(max_batch_bytes=-2)
    value = os.urandom(1000) * 1000                       # 1 MB, compresses well
    recs = [rb.V2Record(i, i, None, value) for i in range(24)]   # 24 MB > the 16 MiB workspace buffer
    path = _write(tmp_path, rb.encode_batch(recs, codec=codecs.ZSTD))
    script = textwrap.dedent(f"""
        import numpy as np
        from kafkalog.format import compression_accel as ca
        from kafkalog.format.native import ZSTD_CONTEXTS, native_functions
        nat = native_functions()
        buf = np.fromfile({str(path)!r}, np.uint8)
        start, end = 61, len(buf)
        dst = np.zeros(16 << 20, np.uint8)
        dctx = ZSTD_CONTEXTS.acquire(nat)
        fns = np.array([nat.zstd_decompress_stream, nat.zstd_dctx_reset, nat.zstd_is_error], np.uintp)
        st, r = ca._zstd(buf, start, end, dst, 0, -2, fns, np.uintp(dctx), np.zeros(6, np.uint64))
        print(st == ca.WIN_FALLBACK)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert run.returncode == 0, f"kernel crashed: returncode {run.returncode}\n{run.stderr[-2000:]}"
    assert run.stdout.split() == ["True"]


def test_lz4_stored_block_of_size_zero_is_the_end_mark_like_kafka(tmp_path, without_native):
    """(review) Kafka's Lz4BlockInputStream.readBlock masks the 'uncompressed' bit before testing for
    the end mark, as liblz4's LZ4F_decompress does: 0x80000000 ends the frame. Both of our decoders
    tested the unmasked word and read on past it."""
    recs = _records(20)
    frame = codecs.compress(codecs.LZ4, _region(recs))
    assert frame[-4:] == b"\0\0\0\0"
    payload = frame[:-4] + struct.pack("<I", 0x80000000) + b"junk"
    path = _write(tmp_path, _with_payload(recs, codecs.LZ4, payload))
    expected = segment.read_segment(_write(tmp_path, rb.encode_batch(recs, codec=codecs.LZ4), name="good-0"))
    without_native(False)
    table = segment.read_segment(path, engine="compiled")
    assert table.column("value").equals(expected.column("value"))
    assert table.num_rows == 20


def test_xerial_stream_version_below_1_is_rejected_like_snappy_java(tmp_path, without_native):
    """(review) snappy-java's SnappyInputStream.readHeader refuses a xerial header whose version is
    below MINIMUM_COMPATIBLE_VERSION (1); we checked only the magic, so the batch decoded where
    Kafka's consumer fails. Both engines now refuse it."""
    recs = _records(20)
    good = codecs.compress(codecs.SNAPPY, _region(recs))
    payload = codecs.XERIAL_MAGIC + struct.pack(">ii", 0, 0) + good[codecs.XERIAL_HEADER_SIZE:]
    path = _write(tmp_path, _with_payload(recs, codecs.SNAPPY, payload))
    for engine in ("compiled", "reference"):
        without_native(False)
        with pytest.raises(errors.DecompressionError, match="version 0"):
            segment.read_segment(path, engine=engine)


def test_without_native_functions_snappy_goes_to_the_reference_codec(tmp_path, without_native, monkeypatch):
    """(review) Without the native functions (then: KAFKALOG_NATIVE=0) the numba snappy decoder stayed on, so the "without native" leg of
    these tests checked the same snappy code as the "with native" one."""
    from kafkalog.format import decoder

    calls = []
    real = decoder.decompress_into

    def counting(codec, *args, **kwargs):
        calls.append(codec)
        return real(codec, *args, **kwargs)

    monkeypatch.setattr(decoder, "decompress_into", counting)
    path = _write(tmp_path, rb.encode_batch(_records(20), codec=codecs.SNAPPY))
    without_native(True)
    assert segment.read_segment(path, engine="compiled").num_rows == 20
    assert calls == [codecs.SNAPPY]


@pytest.mark.parametrize("cut", [1, 4, 700, 5000])
def test_truncated_zstd_frame_is_an_error_like_zstd_jni(tmp_path, without_native, cut):
    """zstd's stream decoder stops quietly where its input ends, so a frame cut short decoded partially
    and the record walk failed later with another error; Kafka's zstd-jni stream raises on a
    truncated source. Every engine now raises DecompressionError at the batch."""
    rnd = random.Random(cut)
    recs = [rb.V2Record(i, i, None, bytes(rnd.getrandbits(8) for _ in range(100)) + b"x" * 100)
            for i in range(100)]
    payload = codecs.compress(codecs.ZSTD, _region(recs))
    path = _write(tmp_path, _with_payload(recs, codecs.ZSTD, payload[:-cut]))
    for engine, off in (("compiled", False), ("compiled", True), ("reference", False)):
        without_native(off)
        with pytest.raises(errors.DecompressionError, match="truncated source|no complete frame") as e:
            segment.read_segment(path, engine=engine)
        assert e.value.position == 0


def test_zstd_frame_walk_accepts_every_complete_framing():
    """The truncation check walks headers only: checksums, content sizes, skippable frames and
    several frames must all pass through."""
    region = _region(_records(200, value_size=300))
    framings = [codecs.compress(codecs.ZSTD, region),
                zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(region),
                struct.pack("<II", 0x184D2A5F, 4) + b"skip" + zstandard.ZstdCompressor(level=1).compress(region),
                zstandard.ZstdCompressor().compress(region[:999]) + zstandard.ZstdCompressor().compress(region[999:])]
    for payload in framings:
        assert codecs._zstd_truncated_frame(payload) is None
        assert codecs.decompress(codecs.ZSTD, payload) == region
        assert codecs._zstd_truncated_frame(payload[:-1]) is not None
