"""Which source segments are recopied into one cleaned segment (``Cleaner.groupSegmentsBySize``,
Kafka's ``Cleaner.java``). Pure.

Greedy from the oldest: a segment joins the current group while

    group .log bytes        + its .log bytes        <= segment.bytes
    group offset-index bytes + its offset-index bytes <= segment.index.bytes
    group time-index bytes  + its time-index bytes  <= segment.index.bytes
    its size == 0  OR  (its estimated last offset - the group's first base offset) <= 2**31 - 1

where index bytes are what Kafka counts (file length of a rolled segment's trimmed index) and the
estimated last offset is the next segment's base - 1, or upperBound - 1 for the last segment.
Each group becomes one segment whose base offset is its first segment's.
"""
from __future__ import annotations

from typing import List, Sequence

from kafkalog.log.segment import SegmentInfo
from kafkalog.java_types import INT32_MAX



def group_segments_by_size(segments: Sequence[SegmentInfo], *, max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> List[List[int]]:
    """Group ``segments`` (ascending base offset); returns lists of indexes into ``segments``."""
    groups: List[List[int]] = []
    i, n = 0, len(segments)
    while i < n:
        first = segments[i]
        group = [i]
        log_size, index_size, time_size = first.size, first.offset_index_bytes, first.time_index_bytes
        i += 1
        while i < n:
            s = segments[i]
            last_offset = (segments[i + 1].base_offset if i + 1 < n else first_uncleanable_offset) - 1
            if not (log_size + s.size <= max_size
                    and index_size + s.offset_index_bytes <= max_index_size
                    and time_size + s.time_index_bytes <= max_index_size
                    and (s.size == 0 or last_offset - first.base_offset <= INT32_MAX)):
                break
            group.append(i)
            log_size += s.size
            index_size += s.offset_index_bytes
            time_size += s.time_index_bytes
            i += 1
        groups.append(group)
    return groups
