"""The most a split round can gain on two cores, with Spark's fixed costs left out (issue 34): the
round's pieces (``kafkalog.cleaner.split_round``: plan, one hash slice each, the merge, one segment group
each, the swap-in) run one after the other in this process, each timed in thread CPU seconds, and
``clean_partition`` on a fresh copy of the same partition. The critical path on two cores is the plan,
the slowest slice (the slices run side by side), the merge, the groups as two cores would take them
(longest first) and the swap-in; one task ÷ that path is the split's ceiling on this data. It is an
upper bound for the job's speed-up: Spark's scheduling, the Python workers and moving the bitsets come
on top.

    python -m bench.split_ceiling            # on bench.compact's *big* partition
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from bench.compact import DAY, NOW, SEGMENT_BYTES, TOPIC, _fresh, ensure_data
from kafkalog.cleaner import CleanOptions, clean_partition
from kafkalog.cleaner import split_round
from kafkalog.cleaner.plan import plan_partition
from kafkalog.config import configs_from_mappings

BUDGET = 64 << 20            # a task's share of a 128 MiB dedupe buffer on local[2], as the job's


def _configs():
    return configs_from_mappings(topics={TOPIC: {"cleanup.policy": "compact", "delete.retention.ms": str(DAY),
                                                 "segment.bytes": str(SEGMENT_BYTES)}})


def _partition(logs: Path, name: str) -> Path:
    return sorted(p for p in _fresh(logs, name).iterdir() if p.is_dir())[0]


def measure_split_ceiling(logs: Path, *, slices: int = 2, cores: int = 2) -> dict:
    """One task and the split round's pieces on the first partition of ``logs`` (kernels warmed first
    on *tiny*); see the module docstring."""
    configs = _configs()
    config, broker = configs.for_topic(TOPIC), configs.broker
    warm = _fresh(ensure_data("tiny"), "ceiling-warm")
    for p in sorted(q for q in warm.iterdir() if q.is_dir()):
        clean_partition(p, config=config, now_ms=NOW, broker=broker)
    options = CleanOptions(record_decisions=False, map_budget_bytes=BUDGET)
    folder = _partition(logs, "ceiling-one")
    c = time.thread_time()
    clean_partition(folder, config=config, now_ms=NOW, broker=broker, options=options)
    one = time.thread_time() - c
    folder = _partition(logs, "ceiling-split")
    c = time.thread_time()
    split = split_round.plan_split_round(plan_partition(folder, config=config, now_ms=NOW, broker=broker),
                                         broker=broker, options=options, min_slices=slices,
                                         max_slices=cores)
    plan_s = time.thread_time() - c
    slice_s, parts = [], []
    for s in range(split.slices):
        c = time.thread_time()
        parts.append(split_round.slice_bits(split, s))
        slice_s.append(time.thread_time() - c)
    c = time.thread_time()
    superseded, found, stats = split_round.merge_bits(split, parts)
    merge_s = time.thread_time() - c
    group_s, done = [], []
    for g in range(len(split.groups)):
        c = time.thread_time()
        done.append(split_round.clean_split_group(split, g, superseded, found, stats=stats))
        group_s.append(time.thread_time() - c)
    c = time.thread_time()
    result = split_round.swap_in_split_round(split, done, stats)
    swap_s = time.thread_time() - c
    if not result.cleaned:
        raise SystemExit(f"the split round did not clean: {result.error}")
    per_core = [0.0] * cores
    for x in sorted(group_s, reverse=True):                  # longest first onto the least loaded core
        per_core[per_core.index(min(per_core))] += x
    slice_path = [0.0] * cores
    for x in sorted(slice_s, reverse=True):
        slice_path[slice_path.index(min(slice_path))] += x
    path = plan_s + max(slice_path) + merge_s + max(per_core) + swap_s
    return dict(one_task_cpu_s=one, plan_s=plan_s, slice_s=slice_s, merge_s=merge_s, group_s=group_s, swap_s=swap_s,
                split_cpu_s=plan_s + sum(slice_s) + merge_s + sum(group_s) + swap_s, critical_path_s=path,
                ceiling=one / path, cores=cores, slices=split.slices, groups=len(split.groups))


if __name__ == "__main__":
    print(json.dumps(measure_split_ceiling(ensure_data("big")), indent=1))
