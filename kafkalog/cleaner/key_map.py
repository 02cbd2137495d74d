"""The cleaner's key -> latest offset map, compiled and bounded: an open-addressing table in flat
arrays within a byte budget (Kafka's ``SkimpyOffsetMap.java``; filled as ``Cleaner.buildOffsetMap`` fills it). The key hash is
``key_hash``'s, the record walk that fills the table is ``key_walk``'s, the bits ``map_put`` sets
when it marks are ``bitsets``'.

Exact where Kafka is not: Kafka keeps a 16-byte MD5 per key and accepts that two keys whose digests
collide are one key; here a slot holds the key's bytes (its first 16 in the slot, the rest in an
arena) and a probe compares them all, so a record is only ever superseded by a later record with
the identical key.

Layout (``SLOT_BYTES`` = 40 per slot: a Kafka entry's 24 bytes, digest + offset, and 16 key
bytes), one slot's fields side by side so that a probe touches one cache line (two when the slot
straddles a line boundary: adjacent lines, fetched together, not one after the other)::

    slots   int64[5 x capacity]  per slot, at the word positions ``META``, ``PLACE``, ``OFFSET``,
                                 ``INLINE``: meta = (low 32 bits of the key hash) << 32 | (key
                                 length + 1), 0 when free; place = (ordinal of its latest record)
                                 << 32 | where the key's tail starts in ``arena``; its latest offset;
                                 two words of the key's first 16 bytes (``INLINE_BYTES``),
                                 little-endian, 0 past the key's end
    arena   uint8[...]           the tails of keys longer than 16 bytes (bytes 16 on), appended (at
                                 most ``ARENA_LIMIT`` bytes); keys of 16 bytes or fewer take none
    state   int64[5]             keys held, arena bytes used, most keys allowed (capacity x load factor),
                                 1 once a marking walk met a key's offsets out of order, arena bytes
                                 allowed (the budget less the slots)

A key of at most 16 bytes is thus found, or told apart from another, in its slot alone: the probe of
a key already held (most records, as keys repeat) costs one cache miss instead of two (the slot, then
its bytes in the arena). The key's bytes are read, hashed and compared 8 at a time (``load_word``).

Marking as it inserts (``mark``): the record at ordinal r (its index in the round's recopied range)
sets its bit in ``found_bits``; when its key was already held, the held record (the slot's ordinal)
gets its bit in ``superseded_bits``. As the dirty range's offsets only grow, that is exactly the
answer a lookup in the finished map gives (superseded: the map's offset is greater) — so the recopy
tests two bits instead of hashing and probing again. A key whose new offset is not greater than the
held one (a log with offsets out of order) sets state[3]: the caller then asks the map instead.

Slot of a key: fastrange(low 32 bits of its hash, capacity), then linear probing; the stored hash
and length are compared, then the 16 bytes in the slot, then the tail in the arena. The budget
(``log.cleaner.dedupe.buffer.size`` / concurrent cleaners) is shared by the slots and the arena as
they fill: the slots start small (``INITIAL_CAPACITY``, at most half the budget) and double,
rehashed from the stored hashes, to at most as many as the budget holds with their keys' tails, the
tails averaging what the keys held so far have (keys of at most 16 bytes: the whole budget, the last
step taking what is left); the arena may use what the slots leave. The map is full when a new key finds no room in
either. So ``nbytes`` (slots + arena used) never exceeds the budget, keys of at most 16 bytes take
no arena at all (a budget holds budget / 40 x load factor of them: a fifth more than 24-byte slots
with the budget in halves held), and a map sized to its keys stays in cache where a budget-sized
one would not.

Kernels live at module level so numba's on-disk cache serves new processes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np
from numba import njit

from kafkalog.cleaner.bitsets import set_bit
from kafkalog.cleaner.key_hash import fastrange, key_hash, key_word, load_word, prefetch_write
from kafkalog.format.records_accel import copy_bytes

_CACHE = os.path.isfile(__file__)

# a slot: SLOT_WORDS int64 words, at these positions
META = 0              # (low 32 bits of the key hash) << 32 | (key length + 1); EMPTY_SLOT when free
PLACE = 1             # (ordinal of the key's latest record) << 32 | where the key's tail starts in the arena
OFFSET = 2            # the key's latest offset
INLINE = 3            # INLINE_WORDS words: the key's first INLINE_BYTES bytes, little-endian, 0 past its end
INLINE_WORDS = 2
INLINE_BYTES = 8 * INLINE_WORDS          # keys this long or shorter are held whole in their slot
SLOT_WORDS = INLINE + INLINE_WORDS
SLOT_BYTES = 8 * SLOT_WORDS
EMPTY_SLOT = 0                           # a free slot's meta word
NOT_FOUND = np.iinfo(np.int64).min       # what a lookup answers for a key not in the map
MIN_CAPACITY = 16
INITIAL_CAPACITY = 1 << 16               # slots a map starts with (2.5 MiB), doubled as keys come
MIN_BUDGET = MIN_CAPACITY * SLOT_BYTES * 2     # the smallest map: 24 slots and 320 arena bytes

# state slots
_KEYS, _ARENA_USED, _MAX_KEYS, _OUT_OF_ORDER, _ARENA_ROOM = 0, 1, 2, 3, 4

ORDINAL_SHIFT = np.int64(32)
ARENA_LIMIT = 1 << 32                    # arena bytes a slot's place word can address
MAX_MARKED_RECORDS = 1 << 31             # records a marking walk can number (ordinals in the place word)
_PLACE_MASK = np.int64(0xFFFFFFFF)

# --- the map -------------------------------------------------------------------------------

@njit(cache=_CACHE, inline="always")
def _same_key(arena, a, src, p, n):
    j = 0
    while j + 8 <= n:
        if load_word(arena, a + j) != load_word(src, p + j):
            return False
        j += 8
    while j < n:
        if arena[a + j] != src[p + j]:
            return False
        j += 1
    return True


@njit(cache=_CACHE, inline="always")
def _meta(h, n):
    return np.int64(((h & np.uint64(0xFFFFFFFF)) << np.uint64(32)) | np.uint64(n + 1))


@njit(cache=_CACHE, inline="always")
def _find_slot(slots, arena, src, p, n, h, k0, k1):
    """The key's slot (index of its first word), or the free slot where it would go (meta 0).
    ``k0``, ``k1``: the key's first 16 bytes (``_key_word``): a key of at most INLINE_BYTES is
    compared in the slot alone, a longer one's tail in the arena too."""
    cap = slots.shape[0] // SLOT_WORDS
    meta = _meta(h, n)
    i = fastrange(np.uint32(h & np.uint64(0xFFFFFFFF)), cap)
    while True:
        w = i * SLOT_WORDS
        m = slots[w + META]
        if m == EMPTY_SLOT:
            return w
        if (m == meta and slots[w + INLINE] == k0 and slots[w + INLINE + 1] == k1
                and (n <= INLINE_BYTES or _same_key(arena, slots[w + PLACE] & _PLACE_MASK, src, p + INLINE_BYTES,
                                                    n - INLINE_BYTES))):
            return w
        i += 1
        if i == cap:
            i = 0


@njit(cache=_CACHE, inline="always")
def prefetch_slot(slots, h):
    """Start loading the slot a key with hash ``h`` probes first (both cache lines it may straddle),
    without waiting: a walk calls it some records before ``map_put``/``map_get`` of that key."""
    w = fastrange(np.uint32(h & np.uint64(0xFFFFFFFF)), slots.shape[0] // SLOT_WORDS) * SLOT_WORDS
    prefetch_write(slots, w)
    prefetch_write(slots, w + SLOT_WORDS - 1)


@njit(cache=_CACHE, inline="always")
def map_put(slots, arena, state, src, p, n, h, offset, ordinal, mark, found_bits, superseded_bits):
    """map[key] = offset (a later put of the same key replaces it, as the walk is in log order);
    ``mark``: set the bits of the record at ``ordinal`` and of the record it supersedes (see the
    module docstring). Returns False, changing nothing, when a new key does not fit."""
    k0 = np.int64(key_word(src, p, n, 0))
    k1 = np.int64(key_word(src, p, n, 8))
    w = _find_slot(slots, arena, src, p, n, h, k0, k1)
    if slots[w + META] != EMPTY_SLOT:
        if mark:
            if offset > slots[w + OFFSET]:
                set_bit(superseded_bits, slots[w + PLACE] >> ORDINAL_SHIFT)
            else:
                state[_OUT_OF_ORDER] = 1
            set_bit(found_bits, ordinal)
            slots[w + PLACE] = (ordinal << ORDINAL_SHIFT) | (slots[w + PLACE] & _PLACE_MASK)
        slots[w + OFFSET] = offset
        return True
    used = state[_ARENA_USED]
    tail = max(n - INLINE_BYTES, 0)
    if state[_KEYS] >= state[_MAX_KEYS] or used + tail > state[_ARENA_ROOM]:
        return False
    if tail:
        copy_bytes(arena, used, src, p + INLINE_BYTES, tail)
    slots[w + META] = _meta(h, n)
    slots[w + PLACE] = (ordinal << ORDINAL_SHIFT) | used if mark else used
    slots[w + OFFSET] = offset
    slots[w + INLINE] = k0
    slots[w + INLINE + 1] = k1
    if mark:
        set_bit(found_bits, ordinal)
    state[_KEYS] += 1
    state[_ARENA_USED] = used + tail
    return True


@njit(cache=_CACHE, inline="always")
def map_get(slots, arena, src, p, n, h):
    w = _find_slot(slots, arena, src, p, n, h, np.int64(key_word(src, p, n, 0)), np.int64(key_word(src, p, n, 8)))
    if slots[w + META] == EMPTY_SLOT:
        return NOT_FOUND
    return slots[w + OFFSET]


@njit(cache=_CACHE, nogil=True)
def lookup_kernel(key_offsets, key_data, index, weak, slots, arena, out):
    """out[j] = map[key of record index[j]] (NOT_FOUND when absent), the keys given as an Arrow
    binary column's offsets and data."""
    for j in range(index.shape[0]):
        r = index[j]
        p = np.int64(key_offsets[r])
        n = np.int64(key_offsets[r + 1]) - p
        h = key_hash(key_data, p, n, weak)
        out[j] = map_get(slots, arena, key_data, p, n, h)


@njit(cache=_CACHE, nogil=True)
def grow_kernel(old, new):
    """Rehash every key of ``old`` slots into the larger ``new`` ones (from the stored hash)."""
    cap = new.shape[0] // SLOT_WORDS
    for w in range(0, old.shape[0], SLOT_WORDS):
        m = old[w]
        if m == EMPTY_SLOT:
            continue
        i = fastrange(np.uint32(np.uint64(m) >> np.uint64(32)), cap)
        while new[i * SLOT_WORDS] != EMPTY_SLOT:
            i += 1
            if i == cap:
                i = 0
        for j in range(SLOT_WORDS):
            new[i * SLOT_WORDS + j] = old[w + j]


@njit(cache=_CACHE, nogil=True)
def clear_kernel(slots, state):
    for w in range(0, slots.shape[0], SLOT_WORDS):
        slots[w] = EMPTY_SLOT
    state[_KEYS] = 0
    state[_ARENA_USED] = 0
    state[_OUT_OF_ORDER] = 0


# --- Python side ---------------------------------------------------------------------------

def dedupe_budget(dedupe_buffer_size: int, concurrent_cleaners: int) -> int:
    """The bytes one cleaner's map may take: ``log.cleaner.dedupe.buffer.size`` split evenly across
    the cleaners that run at once (a broker's ``log.cleaner.threads``; a Spark job's task slots)."""
    return max(int(dedupe_buffer_size) // max(int(concurrent_cleaners), 1), MIN_BUDGET)


@dataclass
class KeyMapStats:
    """What the report says of one partition's map."""

    passes: int = 0
    keys: int = 0                 # distinct keys of the dirty range
    budget: int = 0               # bytes the map may take
    bytes: int = 0                # bytes the map took (slots + arena)
    capacity: int = 0             # slots
    max_keys: int = 0             # keys one pass holds at most (capacity x load factor)

    def as_dict(self) -> dict:
        return dict(passes=self.passes, keys=self.keys, budget=self.budget, bytes=self.bytes)


class KeyMap:
    """The flat arrays of one map within ``budget`` bytes, reused by every pass (``clear``): slots
    and arena share the budget as they fill (see the module docstring). ``max_records``: the most
    keys it can be asked to hold (the dirty range's records), which bounds its slots below the
    budget's."""

    def __init__(self, budget: int, load_factor: float, *, weak_hash: bool = False,
                 max_records: Optional[int] = None):
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor {load_factor} is not in (0, 1]")
        budget = max(int(budget), MIN_BUDGET)
        limit = budget // SLOT_BYTES
        if max_records is not None:
            limit = max(min(limit, int(max_records / load_factor) + 2), MIN_CAPACITY)
        self.budget = budget
        self.load_factor = load_factor
        self.weak_hash = weak_hash
        self.limit = limit                                         # the most slots it may grow to
        # at most half the budget to start with: the other half is for the keys' tails until some are seen
        self.initial_capacity = max(min(limit, INITIAL_CAPACITY, budget // 2 // SLOT_BYTES), MIN_CAPACITY)
        self.slots = np.zeros(self.initial_capacity * SLOT_WORDS, np.int64)
        # as long as the slots' smallest size leaves room for; pages are touched only where written
        self.arena = np.empty(min(budget - MIN_CAPACITY * SLOT_BYTES, ARENA_LIMIT), np.uint8)
        self.state = np.array([0, 0, self._max_keys(self.capacity), 0, self._arena_room(self.capacity)], np.int64)

    def _max_keys(self, capacity: int) -> int:
        return min(int(capacity * self.load_factor), capacity - 1)

    def _arena_room(self, capacity: int) -> int:
        return min(self.budget - capacity * SLOT_BYTES, len(self.arena))

    def _slots_for_budget(self) -> int:
        """Slots whose keys fit the budget with their tails, the tails averaging what the keys held
        so far have (none held: no tails)."""
        keys = len(self)
        tail = int(self.state[_ARENA_USED]) / keys if keys else 0.0
        return int(self.budget / (SLOT_BYTES + self.load_factor * tail))

    def _grown_capacity(self) -> int:
        """The slots ``grow`` would make now; 0 when it would not grow."""
        if len(self) < self.state[_MAX_KEYS]:
            return 0
        capacity = min(self.limit, self.capacity * 2, self._slots_for_budget(),
                       (self.budget - int(self.state[_ARENA_USED])) // SLOT_BYTES)
        return capacity if self._max_keys(capacity) > len(self) else 0

    @property
    def growing_nbytes(self) -> int:
        """The bytes the map holds while ``grow`` runs (old and new slots side by side, the arena
        bytes used): what a caller sharing the budget frees first. ``nbytes`` when it would not grow."""
        capacity = self._grown_capacity()
        return self.nbytes + capacity * SLOT_BYTES

    def grow(self) -> bool:
        """Double the slots (to at most the limit, and to what the budget holds with the keys' tails,
        as ``_slots_for_budget`` estimates them and as the arena's used bytes leave room for),
        rehashing the keys held. False when they cannot hold more keys, or when the arena, not the
        slots, is what is full."""
        capacity = self._grown_capacity()
        if not capacity:
            return False
        new = np.zeros(capacity * SLOT_WORDS, np.int64)
        grow_kernel(self.slots, new)
        self.slots = new
        self.state[_MAX_KEYS] = self._max_keys(capacity)
        self.state[_ARENA_ROOM] = self._arena_room(capacity)
        return True

    @property
    def capacity(self) -> int:
        return len(self.slots) // SLOT_WORDS

    @property
    def max_keys(self) -> int:
        """Keys one pass holds at most, when the keys' tails past 16 bytes average what the keys
        held so far have (none held: no tails): what the hash slices are planned with."""
        return max(self._max_keys(min(self.limit, self._slots_for_budget())), 1)

    @property
    def nbytes(self) -> int:
        """The bytes the map holds: its slots and the arena bytes used so far (at most the budget)."""
        return self.capacity * SLOT_BYTES + int(self.state[_ARENA_USED])

    def __len__(self) -> int:
        return int(self.state[_KEYS])

    def clear(self) -> None:
        """Empty the map for the next pass. Slots grown past their first size go back to it: the
        budget a pass's keys gave the slots may be what the next pass's longer keys need for their
        tails (with the weak hash of the tests, one slice can hold only short keys and the next only
        long ones)."""
        if self.capacity > self.initial_capacity:
            self.slots = np.zeros(self.initial_capacity * SLOT_WORDS, np.int64)
        clear_kernel(self.slots, self.state)
        self.state[_MAX_KEYS] = self._max_keys(self.capacity)
        self.state[_ARENA_ROOM] = self._arena_room(self.capacity)

    @property
    def out_of_order(self) -> bool:
        """Whether a marking walk met a key whose offsets went backwards (its bits are then wrong)."""
        return bool(self.state[_OUT_OF_ORDER])

    def arrays(self):
        """The slots and the arena (what a lookup reads)."""
        return self.slots, self.arena

    def table(self):
        """(slots, arena, state): what a walk that inserts reads and writes."""
        return self.slots, self.arena, self.state

    def lookup(self, keys, index: np.ndarray) -> np.ndarray:
        """map[key] for the records ``index`` of an Arrow binary column ``keys`` (non-null there);
        NOT_FOUND where absent."""
        _validity, key_offsets, key_data = keys.buffers()
        offs = np.frombuffer(key_offsets, dtype=np.int32)[keys.offset:keys.offset + len(keys) + 1]
        data = np.frombuffer(key_data, dtype=np.uint8) if key_data is not None and key_data.size else \
            np.zeros(1, np.uint8)
        out = np.empty(len(index), np.int64)
        lookup_kernel(offs, data, index.astype(np.int64, copy=False), self.weak_hash, *self.arrays(), out)
        return out


__all__ = ["ARENA_LIMIT", "EMPTY_SLOT", "INITIAL_CAPACITY", "INLINE_BYTES", "KeyMap", "KeyMapStats", "MAX_MARKED_RECORDS",
           "MIN_BUDGET", "MIN_CAPACITY", "NOT_FOUND", "SLOT_BYTES", "SLOT_WORDS", "clear_kernel", "dedupe_budget",
           "grow_kernel", "lookup_kernel", "map_get", "map_put", "prefetch_slot"]
