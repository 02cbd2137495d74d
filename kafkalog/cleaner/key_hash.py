"""The cleaner's key hash: 64 bits of a key's bytes, read 8 at a time, for the compiled offset map's
slots and for the hash slices of a round whose keys do not fit one map (Kafka's ``SkimpyOffsetMap``
hashes a key with MD5 for both; an exact map needs no cryptographic digest, only a well-mixed one).

* ``key_hash``: splitmix64's finaliser over the key's little-endian 8-byte words, seeded with its
  length; ``weak`` (tests) makes every key of one length collide, so that only the byte comparison
  tells keys apart;
* ``key_word``: bytes [i, i + 8) of a key as one word, 0 past its end (how slots hold a key's
  first 16 bytes, and how they are compared);
* ``fastrange``: a 32-bit hash mapped onto [0, n) without a division (a slot, a slice);
* ``slice_of``: the hash slice of a key (its hash's high 32 bits), independent of its slot (low 32).

Kernels live at module level, ``inline="always"``, so that numba's on-disk cache serves new
processes and the callers' loops keep their speed.
"""
from __future__ import annotations

import os
import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

_CACHE = os.path.isfile(__file__)

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


@intrinsic
def load_word(typingctx, arr, index):
    """The 8 bytes ``arr[index:index+8]`` of a uint8 array as one little-endian uint64, in one
    unaligned load (bounds checked by the caller): a key's bytes are hashed and compared 8 at a time."""
    sig = types.uint64(arr, types.intp)

    def codegen(context, builder, signature, args):
        a, i = args
        ary = context.make_array(signature.args[0])(context, builder, a)
        word = builder.load(builder.bitcast(builder.gep(ary.data, [i]), ir.IntType(64).as_pointer()), align=1)
        return builder.bswap(word) if sys.byteorder == "big" else word

    return sig, codegen


@intrinsic
def prefetch_write(typingctx, arr, index):
    """Ask the CPU to bring the cache line of ``arr[index]`` in, for writing, without waiting for it
    (LLVM's ``llvm.prefetch``; a hint: an index out of bounds is ignored, never read). The map pass
    parses a few records ahead of its probes and prefetches their slots, so that the probes' cache
    misses overlap instead of following one another."""
    sig = types.void(arr, types.intp)

    def codegen(context, builder, signature, args):
        a, i = args
        ary = context.make_array(signature.args[0])(context, builder, a)
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]), "llvm.prefetch.p0")
        # rw = 1 (write), locality = 3 (keep in every cache level), cache type = 1 (data)
        builder.call(fn, [builder.bitcast(builder.gep(ary.data, [i]), byte_ptr), ir.Constant(i32, 1),
                          ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=_CACHE, inline="always")
def _mix(x):
    """splitmix64's finaliser."""
    x = (x ^ (x >> np.uint64(30))) * _M2
    x = (x ^ (x >> np.uint64(27))) * _M3
    return x ^ (x >> np.uint64(31))


@njit(cache=_CACHE, inline="always")
def key_word(src, p, n, i):
    """Bytes [i, i + 8) of the key ``src[p:p+n]`` as a little-endian word, 0-padded past its end
    (0 when i >= n).

    :param src: uint8 array holding the key.
    :param p: where the key starts in ``src``.
    :param n: the key's length.
    :param i: the first byte of the word, within the key.
    """
    if i + 8 <= n:
        return load_word(src, p + i)
    if i >= n:
        return np.uint64(0)
    if n >= 8:                      # the key's last 8 bytes, shifted down to the ones from i
        return load_word(src, p + n - 8) >> np.uint64(8 * (8 - (n - i)))
    if p + i + 8 <= src.shape[0]:   # 8 bytes from i, the ones past the key masked off
        return load_word(src, p + i) & ((np.uint64(1) << np.uint64(8 * (n - i))) - np.uint64(1))
    w = np.uint64(0)
    s = np.uint64(0)
    while i < n:
        w |= np.uint64(src[p + i]) << s
        s += np.uint64(8)
        i += 1
    return w


@njit(cache=_CACHE, inline="always")
def key_hash(src, p, n, weak):
    """64-bit hash of ``src[p:p+n]``.

    :param src: uint8 array holding the key.
    :param p: where the key starts.
    :param n: the key's length (0: the empty key, which has a hash like any other).
    :param weak: low 32 bits the length only, high 32 bits the first byte (tests: every key of one
        length collides into one slot chain, so only the byte comparison tells keys apart; slices
        still split keys by their first byte).
    """
    if weak:
        first = np.uint64(src[p]) if n > 0 else np.uint64(0)
        return (first * np.uint64(0x01010101) << np.uint64(32)) | np.uint64(n)
    h = _M1 ^ (np.uint64(n) * _M3)
    i = 0
    while i + 8 <= n:
        h = _mix(h ^ load_word(src, p + i)) + _M1
        i += 8
    if i < n:
        h = _mix(h ^ key_word(src, p, n, i)) + _M1
    return _mix(h)


@njit(cache=_CACHE, inline="always")
def fastrange(x32, n):
    """``x32`` (a 32-bit hash) mapped onto [0, n): (x32 * n) >> 32, Lemire's division-free range."""
    return np.int64((np.uint64(x32) * np.uint64(n)) >> np.uint64(32))


@njit(cache=_CACHE, inline="always")
def slice_of(h, n_slices):
    """The hash slice (of ``n_slices``) a key with hash ``h`` belongs to: from its high 32 bits, so
    that the keys of one slice still spread over the whole map (slots use the low 32)."""
    return fastrange(h >> np.uint64(32), n_slices)


__all__ = ["fastrange", "key_hash", "key_word", "load_word", "prefetch_write", "slice_of"]
