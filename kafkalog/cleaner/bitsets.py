"""Bitsets over the records of a round's recopied range: one bit per record, numbered by its
ordinal (its index in the range, segment after segment). The map pass sets two of them — which
records' keys are in the map (found) and which records a later record of the same key supersedes —
so that the recopy tests two bits instead of hashing and probing the map again, and so that hash
slices (several maps in turn) can clean the whole range in one round. Kafka's cleaner asks its
``SkimpyOffsetMap`` per record instead; the bits are ours.
"""
from __future__ import annotations

import os
from typing import Tuple

import numpy as np
from numba import njit

_CACHE = os.path.isfile(__file__)


def new_bitsets(nbits: int) -> Tuple[np.ndarray, np.ndarray]:
    """Two cleared bitsets (found, superseded) of ``nbits`` bits each.

    :param nbits: records of the range.
    """
    return np.zeros((nbits + 7) // 8, np.uint8), np.zeros((nbits + 7) // 8, np.uint8)


@njit(cache=_CACHE, inline="always")
def set_bit(bits, i):
    """Set bit ``i`` of ``bits`` (uint8 array, bit i in byte i // 8 at i % 8)."""
    bits[i >> 3] |= np.uint8(1 << (i & 7))


@njit(cache=_CACHE, inline="always")
def bit_is_set(bits, i):
    """Whether bit ``i`` of ``bits`` is set."""
    return (bits[i >> 3] & np.uint8(1 << (i & 7))) != 0


__all__ = ["bit_is_set", "new_bitsets", "set_bit"]
