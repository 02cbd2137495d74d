"""One hash slice of a round's map pass on its own (``Cleaner.buildOffsetMap`` in Kafka's ``Cleaner.java``,
one slice of its keys at a time): the split round's slice tasks (``split_round``) each run one, and the
bits of all slices OR together into what ``key_walk.build_key_verdicts`` gives in one process."""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from kafkalog.cleaner.bitsets import new_bitsets
from kafkalog.cleaner.hyper_log_log import hll_estimate, new_registers
from kafkalog.cleaner.key_map import MAX_MARKED_RECORDS, KeyMap
from kafkalog.cleaner.key_walk import WALK_COUNT, DirtyWalk, dirty_outside_walk, insert_pass, mark_pass
from kafkalog.cleaner.source_segments import start_position
from kafkalog.log.segment import LogSegment


def dirty_walk(plan, first_ordinals: Dict[int, int]) -> DirtyWalk:
    """The map pass's batches: the dirty segments, the first from ``offsetIndex.lookup(firstDirty)``;
    ``first_ordinals``: each recopied segment's first record's ordinal (``segment_ordinals``)."""
    starts = [(s, start_position(s, plan.first_dirty_offset) if i == 0 else 0, first_ordinals[s.base_offset])
              for i, s in enumerate(plan.dirty_segments())]
    records = 0
    for s, pos, _ in starts:
        h = s.scan().headers
        first = int(np.searchsorted(h.position, pos, side="left"))
        records += int(np.maximum(h.recordsCount[first:].astype(np.int64), 0).sum())
    return DirtyWalk(starts, records)


def insert_walk_marks(plan, recopied: Sequence[LogSegment], walk: DirtyWalk, nbits: int) -> bool:
    """Whether the insert walk may set the dirty records' bits as it goes (``build_key_verdicts``'
    ``mark``): the range's ordinals fit, and no dirty batch lies before the walk's start."""
    return nbits < MAX_MARKED_RECORDS and not dirty_outside_walk(recopied, walk.segments, plan.first_dirty_offset)


def count_distinct_keys(plan, walk: DirtyWalk, m: KeyMap, max_batch_bytes: int) -> float:
    """The dirty range's distinct keys, counted by HyperLogLog in one keys-only walk."""
    registers = new_registers()
    insert_pass(plan, walk, m, 1, 0, max_batch_bytes, mode=WALK_COUNT, registers=registers)
    return hll_estimate(registers)


def slice_pass(plan, walk: DirtyWalk, m: KeyMap, n_slices: int, s: int, *, recopied: Sequence[LogSegment],
               first_ordinals: Dict[int, int], nbits: int, mark: bool, max_batch_bytes: int
               ) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """Hash slice ``s`` of ``n_slices`` alone, as one iteration of ``build_key_verdicts``' slice loop:
    its keys into ``m`` (cleared first), then (found, superseded) bitsets over the ``nbits`` records of
    the recopied range for the records whose keys are in this slice. None when the slice's keys do
    not fit ``m``. The bits of several slices OR together into the round's."""
    m.clear()
    found, superseded = new_bitsets(nbits)
    result = insert_pass(plan, walk, m, n_slices, s, max_batch_bytes, bits=(found, superseded) if mark else None)
    if not result.complete:
        return None
    if mark and not result.marked:           # bits the map would not give: mark every record by lookup
        mark = False
        found, superseded = new_bitsets(nbits)
        m.clear()
        insert_pass(plan, walk, m, n_slices, s, max_batch_bytes)
    mark_pass(plan, recopied, first_ordinals, m, n_slices, s,
               plan.first_dirty_offset if mark else plan.upper_bound_offset, found, superseded, max_batch_bytes)
    return found, superseded


__all__ = ["count_distinct_keys", "dirty_walk", "insert_walk_marks", "slice_pass"]
