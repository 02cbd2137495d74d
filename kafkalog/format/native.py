"""C functions that installed packages already ship, made callable from numba kernels: LZ4's block
decoder and encoder (the lz4 package), zstd's streaming decoder and encoder (zstandard's CFFI
backend, or the system libzstd) and CRC-32C (the crc32c package). Kernels call them through function pointers passed as
integers, so they release the GIL and need no Python call per batch.

Nothing here is required: a function that is not found (another build of a package, another
platform) is 0, and callers take their pure-Python path. Whether the compiled engine calls them is
its own detail (found: used); there is no switch. Tests that want the compiled engine without them
replace :func:`look_up` (then :func:`reset_native_functions`).
Every function found is checked on known input before it is used.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import os
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

ZSTD_MIN_VERSION = 10400          # ZSTD_DCtx_reset and ZSTD_decompressStream on a DCtx: zstd 1.4.0
ZSTD_RESET_SESSION_ONLY = 1


@dataclass(frozen=True)
class NativeFunctions:
    """Addresses of the C functions kernels call (0 when not found), and where they came from."""
    lz4_decompress_safe: int = 0          # int (const char* src, char* dst, int srcSize, int dstCapacity)
    zstd_decompress_stream: int = 0       # size_t (ZSTD_DCtx*, ZSTD_outBuffer*, ZSTD_inBuffer*)
    zstd_dctx_reset: int = 0              # size_t (ZSTD_DCtx*, ZSTD_ResetDirective)
    zstd_is_error: int = 0                # unsigned (size_t)
    zstd_create_dctx: int = 0
    zstd_free_dctx: int = 0
    crc32c_update: int = 0                # uint32_t (uint32_t crc, const unsigned char* buf, size_t len)
    lz4_reset_stream: int = 0             # void (LZ4_stream_t*)
    lz4_compress_fast_continue: int = 0   # int (LZ4_stream_t*, const char* src, char* dst, int srcSize, int dstCapacity,
                                          #      int acceleration)
    zstd_compress_stream2: int = 0        # size_t (ZSTD_CCtx*, ZSTD_outBuffer*, ZSTD_inBuffer*, ZSTD_EndDirective)
    zstd_cctx_reset: int = 0              # size_t (ZSTD_CCtx*, ZSTD_ResetDirective)
    zstd_create_cctx: int = 0
    zstd_free_cctx: int = 0
    zstd_cctx_set_parameter: int = 0      # size_t (ZSTD_CCtx*, ZSTD_cParameter, int)
    sources: tuple = ()                   # (what, file) pairs, for diagnostics
    enabled: bool = False                 # false when nothing was looked up: kernels leave every codec to Python


def _extension_file(module: str) -> Optional[str]:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin and os.path.isfile(spec.origin) else None


def _open(path: Optional[str]) -> Optional[ctypes.CDLL]:
    if not path:
        return None
    try:
        return ctypes.CDLL(path)
    except OSError:
        return None


def _address(lib: Optional[ctypes.CDLL], name: str) -> int:
    if lib is None:
        return 0
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0
    except AttributeError:
        return 0


def _lz4():
    """The lz4 package's block extension links liblz4 statically and exports its API; the system
    library is the second choice."""
    import lz4.block

    sample = b"kafkalog " * 64
    packed = lz4.block.compress(sample, store_size=False)
    for path in (_extension_file("lz4.block._block"), ctypes.util.find_library("lz4")):
        address = _address(_open(path), "LZ4_decompress_safe")
        if not address:
            continue
        fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)(address)
        out = ctypes.create_string_buffer(len(sample))
        if fn(packed, out, len(packed), len(sample)) == len(sample) and out.raw == sample:
            return address, path
    return 0, ""


def _zstd_library(names, version_ok):
    """zstandard's CFFI backend exports libzstd's API (its C backend does not); then the system's:
    the first of them exporting every name whose ZSTD_versionNumber() passes ``version_ok``."""
    for path in (_extension_file("zstandard._cffi"), ctypes.util.find_library("zstd")):
        lib = _open(path)
        if lib is None or not all(_address(lib, n) for n in names + ("ZSTD_versionNumber",)):
            continue
        lib.ZSTD_versionNumber.restype = ctypes.c_uint
        if version_ok(lib.ZSTD_versionNumber()):
            return lib, path
    return None, ""


def _zstd():
    names = ("ZSTD_decompressStream", "ZSTD_DCtx_reset", "ZSTD_isError", "ZSTD_createDCtx", "ZSTD_freeDCtx")
    lib, path = _zstd_library(names, lambda v: v >= ZSTD_MIN_VERSION)
    if lib is None:
        return 0, 0, 0, 0, 0, ""
    return tuple(_address(lib, n) for n in names) + (path,)


LZ4_STREAM_BYTES = 16416          # sizeof(LZ4_stream_t) (lz4 1.9), what LZ4_resetStream clears


def _lz4_compress() -> tuple:
    """LZ4_resetStream and LZ4_compress_fast_continue from the library whose decoder was found: what
    lz4.block.compress calls for each block (a fresh stream, acceleration 1), which gives other bytes
    than LZ4_compress_default. Used only when they give ``lz4.block.compress``'s bytes on samples."""
    import lz4.block

    for path in (_extension_file("lz4.block._block"), ctypes.util.find_library("lz4")):
        lib = _open(path)
        reset, compress = _address(lib, "LZ4_resetStream"), _address(lib, "LZ4_compress_fast_continue")
        size = _address(lib, "LZ4_sizeofState")
        if not (reset and compress and size) or ctypes.CFUNCTYPE(ctypes.c_int)(size)() > LZ4_STREAM_BYTES:
            continue
        reset_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(reset)
        fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int,
                              ctypes.c_int, ctypes.c_int)(compress)
        state = ctypes.create_string_buffer(LZ4_STREAM_BYTES)
        letters = bytes((7 * i * i + 3 * i) % 26 + 97 for i in range(65534))
        for sample in (b"kafkalog " * 700, bytes(range(256)) * 3, b"x", letters):
            cap = len(sample) + len(sample) // 255 + 16
            out = ctypes.create_string_buffer(cap)
            reset_fn(state)
            n = fn(state, sample, out, len(sample), cap, 1)
            if n <= 0 or out.raw[:n] != lz4.block.compress(sample, store_size=False):
                break
        else:
            return reset, compress
    return 0, 0


def _zstd_compress() -> tuple:
    """The streaming encoder of the same library build as zstandard's (same version: the same bytes
    for the same parameters; ``compression_accel.zstd_compressor`` checks that too)."""
    import zstandard

    major, minor, patch = zstandard.ZSTD_VERSION
    names = ("ZSTD_compressStream2", "ZSTD_CCtx_reset", "ZSTD_createCCtx", "ZSTD_freeCCtx", "ZSTD_CCtx_setParameter")
    lib, _path = _zstd_library(names, lambda v: v == major * 10000 + minor * 100 + patch)
    if lib is None:
        return 0, 0, 0, 0, 0
    return tuple(_address(lib, n) for n in names)


def _crc32c():
    """The crc32c package's own implementation (hardware when it found the instruction, else its
    slicing-by-8), with the same pre- and post-inversion as its Python function."""
    import crc32c

    name = "_crc32c_hw_adler" if getattr(crc32c, "hardware_based", False) else "_crc32c_sw_slicing_by_8"
    path = _extension_file("crc32c._crc32c")
    address = _address(_open(path), name)
    if not address:
        return 0, ""
    fn = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t)(address)
    for sample in (b"123456789", bytes(range(256)) * 9 + b"x"):
        if fn(0xFFFFFFFF, sample, len(sample)) ^ 0xFFFFFFFF != crc32c.crc32c(sample):
            return 0, ""
    return address, path


_FOUND: Optional[NativeFunctions] = None
_LOCK = threading.Lock()


def native_functions() -> NativeFunctions:
    """What this process can call (:func:`look_up`, once)."""
    global _FOUND
    with _LOCK:
        if _FOUND is None:
            _FOUND = look_up()
        return _FOUND


def look_up() -> NativeFunctions:
    """Find the C functions of the installed packages (nothing on a platform whose addresses are not
    64-bit: the kernels lay out zstd's buffer structs and pass addresses as 64-bit words)."""
    if ctypes.sizeof(ctypes.c_size_t) != 8:
        return NativeFunctions()
    lz4, lz4_path = _lz4()
    stream, reset, is_error, create, free, zstd_path = _zstd()
    crc, crc_path = _crc32c()
    return NativeFunctions(lz4, stream, reset, is_error, create, free, crc,
                           **dict(zip(("lz4_reset_stream", "lz4_compress_fast_continue"),
                                      _lz4_compress() if lz4 else (0, 0))),
                           **dict(zip(("zstd_compress_stream2", "zstd_cctx_reset", "zstd_create_cctx",
                                       "zstd_free_cctx", "zstd_cctx_set_parameter"),
                                      _zstd_compress() if stream else (0,) * 5)),
                           sources=(("lz4", lz4_path), ("zstd", zstd_path), ("crc32c", crc_path)),
                           enabled=True)


def reset_native_functions() -> None:
    """Look again on the next call (tests that replace :func:`look_up`)."""
    global _FOUND
    with _LOCK:
        _FOUND = None


class ZstdContexts:
    """zstd decompression contexts, one per concurrent window: a context is not thread-safe, and a
    reader's worker threads come and go with each call, so contexts are pooled, not per thread.
    Pooled per library (a context goes back to the library that made it); at most KEEP kept each."""

    KEEP = 8

    def __init__(self):
        self._free: Dict[int, List[int]] = {}
        self._lock = threading.Lock()

    def acquire(self, native: NativeFunctions) -> int:
        if not native.zstd_create_dctx:
            return 0
        with self._lock:
            free = self._free.get(native.zstd_create_dctx)
            if free:
                return free.pop()
        return ctypes.CFUNCTYPE(ctypes.c_void_p)(native.zstd_create_dctx)() or 0

    def release(self, native: NativeFunctions, dctx: int) -> None:
        if dctx:
            with self._lock:
                free = self._free.setdefault(native.zstd_create_dctx, [])
                if len(free) < self.KEEP:
                    free.append(dctx)
                    return
            if native.zstd_free_dctx:
                ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p)(native.zstd_free_dctx)(dctx)


ZSTD_CONTEXTS = ZstdContexts()


# --- calls through function pointers (numba intrinsics; pointers and addresses are uintp) ----------

_I8P = ir.IntType(8).as_pointer()


def _call(builder, context, address, ret, params, args):
    size_t = context.get_value_type(types.uintp)
    lowered = [size_t if p == "size_t" else p for p in params]
    ret = size_t if ret == "size_t" else ret
    fnty = ir.FunctionType(ret, lowered)
    fp = builder.inttoptr(address, fnty.as_pointer())
    cast = [builder.inttoptr(a, _I8P) if p == _I8P else a for p, a in zip(lowered, args)]
    return builder.call(fp, cast)


@intrinsic
def lz4_decompress_safe(typingctx, fn, src, dst, src_size, dst_capacity):
    """LZ4_decompress_safe(src, dst, srcSize, dstCapacity) at address ``fn``."""
    sig = types.int32(types.uintp, types.uintp, types.uintp, types.int32, types.int32)

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        return _call(builder, context, args[0], i32, [_I8P, _I8P, i32, i32], args[1:])

    return sig, codegen


@intrinsic
def zstd_decompress_stream(typingctx, fn, dctx, output, input_):
    """ZSTD_decompressStream(dctx, ZSTD_outBuffer*, ZSTD_inBuffer*) at address ``fn``."""
    sig = types.uintp(types.uintp, types.uintp, types.uintp, types.uintp)

    def codegen(context, builder, signature, args):
        return _call(builder, context, args[0], "size_t", [_I8P, _I8P, _I8P], args[1:])

    return sig, codegen


@intrinsic
def zstd_dctx_reset(typingctx, fn, dctx, directive):
    """ZSTD_DCtx_reset(dctx, directive) at address ``fn``."""
    sig = types.uintp(types.uintp, types.uintp, types.int32)

    def codegen(context, builder, signature, args):
        return _call(builder, context, args[0], "size_t", [_I8P, ir.IntType(32)], args[1:])

    return sig, codegen


@intrinsic
def zstd_is_error(typingctx, fn, code):
    """ZSTD_isError(code) at address ``fn``."""
    sig = types.uint32(types.uintp, types.uintp)

    def codegen(context, builder, signature, args):
        return _call(builder, context, args[0], ir.IntType(32), ["size_t"], args[1:])

    return sig, codegen


@intrinsic
def crc32c_update(typingctx, fn, crc, data, length):
    """The crc32c package's crc function (crc, buf, len) at address ``fn``, without inversions."""
    sig = types.uint32(types.uintp, types.uint32, types.uintp, types.uintp)

    def codegen(context, builder, signature, args):
        return _call(builder, context, args[0], ir.IntType(32), [ir.IntType(32), _I8P, "size_t"], args[1:])

    return sig, codegen


@intrinsic
def lz4_reset_stream(typingctx, fn, state):
    """LZ4_resetStream(state) at address ``fn``."""
    sig = types.void(types.uintp, types.uintp)

    def codegen(context, builder, signature, args):
        _call(builder, context, args[0], ir.VoidType(), [_I8P], args[1:])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def lz4_compress_fast_continue(typingctx, fn, state, src, dst, src_size, dst_capacity, acceleration):
    """LZ4_compress_fast_continue(state, src, dst, srcSize, dstCapacity, acceleration) at address ``fn``."""
    sig = types.int32(types.uintp, types.uintp, types.uintp, types.uintp, types.int32, types.int32, types.int32)

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        return _call(builder, context, args[0], i32, [_I8P, _I8P, _I8P, i32, i32, i32], args[1:])

    return sig, codegen


@intrinsic
def zstd_compress_stream2(typingctx, fn, cctx, output, input_, end_op):
    """ZSTD_compressStream2(cctx, ZSTD_outBuffer*, ZSTD_inBuffer*, endOp) at address ``fn``."""
    sig = types.uintp(types.uintp, types.uintp, types.uintp, types.uintp, types.int32)

    def codegen(context, builder, signature, args):
        return _call(builder, context, args[0], "size_t", [_I8P, _I8P, _I8P, ir.IntType(32)], args[1:])

    return sig, codegen
