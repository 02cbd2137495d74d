"""HyperLogLog: the distinct keys of a dirty range counted in 16 KiB, to plan the hash slices of a
round whose keys do not fit one map (how many slices of the map's size hold them). Kafka's cleaner
needs no count (it stops the round where its map fills); this is ours.

Registers: ``HLL_REGISTERS`` = 2^``HLL_BITS`` one-byte registers. A key's 64-bit hash (``key_hash``)
picks register j = its top ``HLL_BITS`` bits; the register keeps the largest rank seen, the rank
being 1 + the number of leading zero bits of the hash's remaining 50 bits (51 when all are zero).
``hll_estimate`` is Flajolet et al.'s estimate with the small-range (linear counting) correction;
its standard error is 1.04 / sqrt(2^14) = 0.8%.
"""
from __future__ import annotations

import os

import numpy as np
from numba import njit

_CACHE = os.path.isfile(__file__)

HLL_BITS = 14                            # 16,384 one-byte registers: ~0.8% standard error
HLL_REGISTERS = 1 << HLL_BITS
_TOP_BIT = np.uint64(0x8000000000000000)


def new_registers() -> np.ndarray:
    """Empty registers (every rank 0)."""
    return np.zeros(HLL_REGISTERS, np.uint8)


@njit(cache=_CACHE, inline="always")
def hll_add(registers, h):
    """Count the key whose 64-bit hash is ``h`` into ``registers`` (uint8[HLL_REGISTERS]).

    :param registers: the registers, updated in place.
    :param h: the key's hash (uint64).
    """
    j = np.int64(h >> np.uint64(64 - HLL_BITS))
    w = h << np.uint64(HLL_BITS)
    rank = 1
    while rank <= 64 - HLL_BITS and (w & _TOP_BIT) == np.uint64(0):
        w <<= np.uint64(1)
        rank += 1
    if rank > registers[j]:
        registers[j] = np.uint8(rank)


def hll_estimate(registers: np.ndarray) -> float:
    """HyperLogLog's distinct count from its registers, with the small-range correction.

    :param registers: uint8 registers (``HLL_REGISTERS`` of them) filled by ``hll_add``.
    """
    m = float(len(registers))
    alpha = 0.7213 / (1 + 1.079 / m)
    e = alpha * m * m / float(np.sum(np.ldexp(1.0, -registers.astype(np.int64))))
    zeros = int(np.count_nonzero(registers == 0))
    if e <= 2.5 * m and zeros:
        return m * np.log(m / zeros)
    return e


__all__ = ["HLL_BITS", "HLL_REGISTERS", "hll_add", "hll_estimate", "new_registers"]
