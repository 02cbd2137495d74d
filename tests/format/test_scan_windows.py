"""A mapped file is walked and CRC-checked a window at a time with each window's pages released
(``scan_buffer(drop_pages=True)``, what ``scan_batches`` does for local files): the result is the
whole-buffer walk's, errors included, and the file's pages no longer count in the process's RSS."""
from __future__ import annotations

import os

import numpy as np
import pytest

from kafkalog import errors
from kafkalog.format import file_records as fr
from kafkalog.format import record_batch as rb
from kafkalog.fs.filesystem import MappedFile

from engines import engine_param

MIB = 1 << 20


def _batch(offset: int, n: int = 20, value: bytes = b"v" * 200) -> bytes:
    return rb.encode_batch([rb.V2Record(offset + i, 1000 + i, b"k%d" % (offset + i), value) for i in range(n)])


def _segment(batches: int) -> bytes:
    return b"".join(_batch(20 * i) for i in range(batches))


def _scan(buf, drop_pages, **kw):
    try:
        return fr.scan_buffer(buf, drop_pages=drop_pages, **kw), None
    except errors.KafkalogError as e:
        return None, (type(e), e.position, str(e))


def _same(a, b):
    (ra, ea), (rb_, eb) = a, b
    assert ea == eb
    if ra is None:
        return
    assert ra.batches.equals(rb_.batches)
    assert (ra.valid_bytes, ra.file_size, repr(ra.error)) == (rb_.valid_bytes, rb_.file_size, repr(rb_.error))


@engine_param
@pytest.mark.parametrize("damage", ["none", "crc_late", "crc_first_window", "truncated", "crc_then_truncated"])
@pytest.mark.parametrize("on_corrupt", ["raise", "stop"])
def test_windows_give_the_whole_walk(tmp_path, monkeypatch, engine, damage, on_corrupt):
    """Windows of a few batches over a mapped copy: the same headers, CRC verdicts, valid bytes and
    first error (a bad CRC before a torn tail is the error reported, as in the whole-buffer walk)."""
    data = bytearray(_segment(40))
    size = len(_batch(0))
    if damage in ("crc_late", "crc_then_truncated"):
        data[size * 31 + 100] ^= 0xFF
    if damage == "crc_first_window":
        data[size * 1 + 100] ^= 0xFF
    if damage in ("truncated", "crc_then_truncated"):
        data += _batch(800)[:70]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    monkeypatch.setattr(fr, "SCAN_WINDOW_BYTES", 3 * size + 17)       # windows end mid-batch
    whole = _scan(np.frombuffer(bytes(data), np.uint8), False, engine=engine, on_corrupt=on_corrupt)
    with MappedFile(path) as f:
        windowed = _scan(f.array, True, engine=engine, on_corrupt=on_corrupt)
    _same(whole, windowed)
    if damage == "none":
        assert windowed[0].batches.num_rows == 40 and windowed[0].batches.column("crcValid").to_pylist() == [True] * 40
    elif on_corrupt == "raise":
        kind = errors.TruncatedBatchError if damage == "truncated" else errors.CrcMismatchError
        assert windowed[1][0] is kind


def test_max_bytes_and_no_crc_in_windows(tmp_path, monkeypatch):
    data = _segment(30)
    size = len(_batch(0))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    monkeypatch.setattr(fr, "SCAN_WINDOW_BYTES", 2 * size)
    buf = np.frombuffer(data, np.uint8)
    for kw in (dict(max_bytes=size * 7 + 5), dict(verify_crc=False), dict(start=size * 3, max_bytes=size * 11)):
        with MappedFile(path) as f:
            _same(_scan(buf, False, **kw), _scan(f.array, True, **kw))


def _mapping_rss_kib(array: np.ndarray) -> int:
    """Resident KiB of the mapping that holds ``array`` (from /proc/self/smaps)."""
    start = array.ctypes.data
    rss, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= start < hi
            elif inside and head == "Rss:":
                rss += int(line.split()[1])
    return rss


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="reads the mapping's RSS from Linux's /proc")
def test_scan_batches_leaves_the_file_out_of_the_rss(tmp_path):
    """A 48 MiB segment CRC-checked by scan_batches' walk: its pages are released window by window, so
    after the walk (map still open) the mapping holds less than a window; the whole-buffer walk of the
    same mapping leaves the file resident."""
    value = bytes(range(256)) * 60
    one = len(_batch(0, n=4, value=value))
    batches = 48 * MIB // one
    path = tmp_path / "00000000000000000000.log"
    with open(path, "wb") as f:
        for i in range(batches):
            f.write(_batch(4 * i, n=4, value=value))
    with MappedFile(path) as f:
        kept = fr.scan_buffer(f.array, drop_pages=False)
        whole_rss = _mapping_rss_kib(f.array)
    with MappedFile(path) as f:
        dropped = fr.scan_buffer(f.array, drop_pages=True)
        windowed_rss = _mapping_rss_kib(f.array)
    assert kept.batches.equals(dropped.batches) and dropped.batches.num_rows == batches
    assert whole_rss > 40 * 1024, whole_rss
    assert windowed_rss < fr.SCAN_WINDOW_BYTES // 1024, (windowed_rss, whole_rss)
