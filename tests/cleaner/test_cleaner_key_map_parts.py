"""The compiled map's parts one by one (``key_hash``, ``key_map``'s table, ``hyper_log_log``,
``bitsets``), each against a plain Python model: the whole-round tests (test_cleaner_key_map,
test_cleaner_fast) say the parts agree with the reference engine together; these say which part is
wrong when they do not."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from numba import njit

from kafkalog.cleaner import bitsets, hyper_log_log as hll
from kafkalog.cleaner import key_map as km
from kafkalog.cleaner.key_hash import fastrange, key_hash, key_word, slice_of
from kafkalog.cleaner.key_walk import bits_kernel

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _buffer(keys, pad_before=0):
    """The keys back to back after ``pad_before`` filler bytes, and where each starts."""
    src = bytearray(b"\xee" * pad_before)
    pos = []
    for k in keys:
        pos.append(len(src))
        src += k
    return np.frombuffer(bytes(src) or b"\x00", np.uint8).copy(), pos


# --- the hash --------------------------------------------------------------------------------

@SETTINGS
@given(key=st.binary(max_size=40), pad=st.integers(0, 9), after=st.integers(0, 9))
def test_key_word_is_the_keys_little_endian_bytes_padded_with_zeros(key, pad, after):
    """Every 8-byte word of a key, wherever it sits in the buffer (at its very end too: the short-key
    path must not read past it), is its bytes little-endian with zeros past its end."""
    src = np.frombuffer(b"\xff" * pad + key + b"\xff" * after or b"\x00", np.uint8).copy()
    for i in range(0, len(key) + 9, 8):
        want = int.from_bytes(key[i:i + 8].ljust(8, b"\x00"), "little")
        assert int(key_word(src, pad, len(key), i)) == want, (key, pad, i)


@SETTINGS
@given(keys=st.lists(st.binary(max_size=30), min_size=1, max_size=8), pad=st.integers(0, 7))
def test_key_hash_depends_on_the_key_bytes_only(keys, pad):
    src, pos = _buffer(keys, pad)
    for k, p in zip(keys, pos):
        alone = np.frombuffer(k or b"\x00", np.uint8).copy()
        assert key_hash(src, p, len(k), False) == key_hash(alone, 0, len(k), False)


def test_distinct_keys_do_not_collide_and_spread_over_slots_and_slices():
    keys = [b"key-%d" % i for i in range(20_000)] + [b"\x00" * n for n in range(40)]
    src, pos = _buffer(keys)
    hashes = [int(key_hash(src, p, len(k), False)) for k, p in zip(keys, pos)]
    assert len(set(hashes)) == len(keys)                                   # 64 bits: no collision expected
    slots = np.bincount([int(fastrange(np.uint32(h & 0xFFFFFFFF), 64)) for h in hashes], minlength=64)
    slices = np.bincount([int(slice_of(np.uint64(h), 8)) for h in hashes], minlength=8)
    assert slots.min() > 0.7 * len(keys) / 64 and slices.min() > 0.9 * len(keys) / 8


def test_the_weak_hash_collides_by_length():
    src, pos = _buffer([b"abcd", b"wxyz", b"abcde"])
    a, b, c = (int(key_hash(src, p, n, True)) for p, n in zip(pos, (4, 4, 5)))
    assert a & 0xFFFFFFFF == b & 0xFFFFFFFF != c & 0xFFFFFFFF


@given(x=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 2 ** 31))
def test_fastrange_stays_in_range(x, n):
    assert 0 <= fastrange(np.uint32(x), n) < n


# --- the table (SkimpyOffsetMap's role) ------------------------------------------------------

def _put(m, src, p, n, offset, weak):
    h = np.uint64(key_hash(src, p, n, weak))
    none = np.zeros(1, np.uint8)
    while not km.map_put(*m.arrays(), m.state, src, p, n, h, offset, 0, False, none, none):
        assert m.grow(), "the map is full"


def _get(m, src, p, n, weak):
    return int(km.map_get(*m.arrays(), src, p, n, np.uint64(key_hash(src, p, n, weak))))


@SETTINGS
@given(ops=st.lists(st.tuples(st.binary(max_size=24), st.integers(0, 1 << 40)), min_size=1, max_size=120),
       absent=st.lists(st.binary(max_size=24), max_size=10), weak=st.booleans())
def test_the_table_answers_as_a_dict(ops, absent, weak):
    """Puts then gets against a dict: the last offset put per key, NOT_FOUND for any other key — with
    the weak hash too, where every key of one length shares one probe chain (wrapping past the last
    slot of the 16 a map starts with) and only the byte comparison tells them apart."""
    src, pos = _buffer([k for k, _ in ops] + absent)
    m = km.KeyMap(km.MIN_BUDGET * 64, 0.9, weak_hash=weak, max_records=len(ops))
    model = {}
    for (k, off), p in zip(ops, pos):
        _put(m, src, p, len(k), off, weak)
        model[k] = off
    assert len(m) == len(model)
    for (k, _), p in zip(ops, pos):
        assert _get(m, src, p, len(k), weak) == model[k]
    for k, p in zip(absent, pos[len(ops):]):
        assert _get(m, src, p, len(k), weak) == model.get(k, km.NOT_FOUND)


@pytest.mark.parametrize("length", [8, 9, 15, 16, 17, 24, 31])
def test_keys_alike_but_for_one_byte_are_told_apart(length):
    """Keys of one length (one probe chain under the weak hash) that differ in one byte only, at every
    position: in the first inline word, the second, or the tail held in the arena."""
    base = bytes(range(1, length + 1))
    keys = [base] + [base[:i] + b"\xff" + base[i + 1:] for i in range(length)]
    src, pos = _buffer(keys)
    m = km.KeyMap(km.MIN_BUDGET * 16, 0.9, weak_hash=True, max_records=len(keys))
    for i, (k, p) in enumerate(zip(keys, pos)):
        _put(m, src, p, length, 100 + i, True)
    assert len(m) == len(keys)
    assert [_get(m, src, p, length, True) for p in pos] == [100 + i for i in range(len(keys))]


def test_a_probe_chain_wraps_around_the_last_slot():
    """Keys whose home slot is the last one continue at slot 0, 1, ... and are all found."""
    m = km.KeyMap(km.MIN_BUDGET, 1.0, max_records=km.MIN_CAPACITY - 1)
    cap = m.capacity
    keys = []
    for i in range(100_000):
        k = b"k%d" % i
        src, _ = _buffer([k])
        if fastrange(np.uint32(int(key_hash(src, 0, len(k), False)) & 0xFFFFFFFF), cap) == cap - 1:
            keys.append(k)
            if len(keys) == 5:
                break
    src, pos = _buffer(keys)
    for i, (k, p) in enumerate(zip(keys, pos)):
        _put(m, src, p, len(k), 10 + i, False)
    assert [_get(m, src, p, len(k), False) for k, p in zip(keys, pos)] == [10, 11, 12, 13, 14]
    used = np.flatnonzero(m.slots[0::km.SLOT_WORDS] != km.EMPTY_SLOT).tolist()
    assert used == [0, 1, 2, 3, cap - 1]


# --- HyperLogLog ----------------------------------------------------------------------------

@njit(cache=False)
def _count(src, n_keys, key_len, repeat, registers):
    for _ in range(repeat):
        for i in range(n_keys):
            hll.hll_add(registers, key_hash(src, i * key_len, key_len, False))


@pytest.mark.parametrize("n", [10, 1_000, 30_000, 300_000])
def test_the_estimate_is_within_its_error_bound(n):
    """Within 4 standard errors (1.04 / sqrt(registers): 3.25%) of the true count of distinct keys,
    whatever the count (small range: linear counting; large: the harmonic mean); counting every key
    three times changes no register."""
    rng = np.random.default_rng(n)
    src = rng.integers(0, 256, n * 12, dtype=np.uint8)       # n random 12-byte keys (distinct w.h.p.)
    distinct = len({bytes(src[i * 12:(i + 1) * 12]) for i in range(n)})
    once, thrice = hll.new_registers(), hll.new_registers()
    _count(src, n, 12, 1, once)
    _count(src, n, 12, 3, thrice)
    assert np.array_equal(once, thrice)
    bound = 4 * 1.04 / math.sqrt(hll.HLL_REGISTERS)
    assert abs(hll.hll_estimate(once) - distinct) <= max(bound * distinct, 1.0), (hll.hll_estimate(once), distinct)


def test_a_register_keeps_the_longest_run_of_leading_zeros():
    regs = hll.new_registers()
    j = 5
    for zeros in (3, 0, 7, 2):              # hash: register j in the top bits, then `zeros` zero bits, then a one
        h = (j << (64 - hll.HLL_BITS)) | (1 << (64 - hll.HLL_BITS - zeros - 1))
        hll.hll_add(regs, np.uint64(h))
    assert regs[j] == 8 and np.count_nonzero(regs) == 1
    hll.hll_add(regs, np.uint64(j << (64 - hll.HLL_BITS)))     # all zero past the index: the longest rank
    assert regs[j] == 64 - hll.HLL_BITS + 1


# --- bitsets ---------------------------------------------------------------------------------

@SETTINGS
@given(found=st.sets(st.integers(0, 199)), superseded=st.sets(st.integers(0, 199)))
def test_bits_answer_a_lookup_as_the_map_would(found, superseded):
    f, s = bitsets.new_bitsets(200)
    for i in found:
        bitsets.set_bit(f, i)
    for i in superseded:
        bitsets.set_bit(s, i)
    assert [i for i in range(200) if bitsets.bit_is_set(f, i)] == sorted(found)
    ordinals = np.arange(200, dtype=np.int64)
    offsets = ordinals * 10 + 3
    out = np.empty(200, np.int64)
    bits_kernel(f, s, ordinals, offsets, out)
    want = [o + 1 if i in superseded else o if i in found else km.NOT_FOUND for i, o in enumerate(offsets.tolist())]
    assert out.tolist() == want
