"""A round split across tasks (``split_round``) writes ``clean_partition``'s bytes: the slices and the
groups run in this process in a shuffled order over the cleaner parity scenarios (transactions whose
markers sit in a later group than their data, aborted data, tombstone horizons, producers still
active, empty batches, codecs), random logs (hypothesis), budgets that need more slices or cannot
be met, and a crash between the groups' ``.cleaned`` files and the swap-in."""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkalog.cleaner import clean_partition
from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.key_map import MIN_BUDGET
from kafkalog.cleaner.plan import plan_partition
from kafkalog.cleaner.split_round import (clean_partition_split, clean_split_group, merge_bits, plan_split_round,
                                          slice_bits, swap_in_split_round)
from kafkalog.cleaner.swap import STEP_INSTALL
from kafkalog.errors import KafkalogError
from kafkalog.format import control_record as cr
from kafkalog.log.recover import recover_partition

from cleaner_model import DAY, T0, data, example_log, log_config, marker, write_partition
from test_cleaner_properties import build, op

NOW = T0 + 10 * DAY


def _files(log_dir: Path) -> dict:
    d = log_dir / "compacted-0"
    out = {p.name: p.read_bytes() for p in sorted(d.iterdir())}
    cp = log_dir / "cleaner-offset-checkpoint"
    out["cleaner-offset-checkpoint"] = cp.read_bytes() if cp.exists() else None
    return out


def _both(src: Path, tmp: Path, config, now: int, *, seed: int = 0, **split_kw):
    """clean_partition on one copy, the split round (shuffled) on another: (results, files) each."""
    one, split = tmp / "one", tmp / "split"
    shutil.copytree(src, one)
    shutil.copytree(src, split)
    res_one = clean_partition(one / "compacted-0", config=config, now_ms=now,
                              options=CleanOptions(record_decisions=False, engine="compiled"))
    plan = plan_partition(split / "compacted-0", config=config, now_ms=now)
    if not plan.offsets.cleanable:
        assert res_one.skipped_reason is not None
        return res_one, None, _files(one), _files(split)
    res_split = clean_partition_split(plan, options=CleanOptions(engine="compiled"),
                                      order=np.random.default_rng(seed), **split_kw)
    return res_one, res_split, _files(one), _files(split)


def _assert_same(src: Path, tmp: Path, config, now: int = NOW, **kw):
    res_one, res_split, f_one, f_split = _both(src, tmp, config, now, **kw)
    assert f_split == f_one
    if res_split is not None:
        assert res_split.error is None and res_one.error is None
        assert res_split.outcome == res_one.outcome
        assert res_split.counts == res_one.counts
        assert [g.counts for g in res_split.groups] == [g.counts for g in res_one.groups]
    return res_split


def spanning_log():
    """Transactions whose markers sit in a later segment (group) than their data, an aborted one
    whose .txnindex entry must be re-recorded, tombstones, null keys, an empty control batch."""
    k = lambda i: b"k%d" % i  # noqa: E731
    return [
        [data(0, [(k(1), b"a" * 30), (k(2), b"b" * 30)]), data(2, [(k(3), b"t" * 30)], pid=7, txn=True),
         data(3, [(k(4), b"u" * 30)], pid=8, txn=True)],
        [data(4, [(k(1), None), (None, b"n")]), marker(6, 7, cr.COMMIT), data(7, [(k(3), b"v" * 30)], pid=9, txn=True)],
        [marker(8, 8, cr.ABORT), data(9, [(k(2), b"w" * 30), (k(5), None)]), marker(11, 9, cr.COMMIT)],
        [data(12, [(k(6), b"x" * 30)], pid=7, txn=True), data(13, [(k(1), b"y" * 30)])],
        [data(14, [(k(7), b"active")])],
    ]


@pytest.mark.parametrize("log,segment_bytes,now", [
    (spanning_log, 120, NOW), (spanning_log, 400, T0 + 1000), (example_log, 200, NOW), (example_log, 1 << 30, NOW)])
def test_parity_scenarios_split_equal_clean_partition(tmp_path, log, segment_bytes, now):
    write_partition(tmp_path / "src", log())
    for slices in (1, 3):
        res = _assert_same(tmp_path / "src", tmp_path / f"s{slices}", log_config(segment_bytes=segment_bytes), now,
                           slices=slices, seed=slices)
        assert res is not None and res.map_stats.passes == slices
    if segment_bytes == 120:
        assert len(res.groups) >= 3       # the markers are judged in other groups than their data


def test_second_round_past_the_horizons_and_empty_batches(tmp_path):
    """Round 1 stamps delete horizons and leaves empty batches; round 2 (past the horizons, from
    round 1's output) removes tombstones: both rounds, split, equal clean_partition's."""
    write_partition(tmp_path / "src", spanning_log())
    cfg = log_config(segment_bytes=150)
    _assert_same(tmp_path / "src", tmp_path / "r1", cfg, NOW, slices=2)
    (tmp_path / "r1" / "one").rename(tmp_path / "src2")
    (tmp_path / "src2" / "cleaner-offset-checkpoint").unlink()     # the whole log dirty again
    res = _assert_same(tmp_path / "src2", tmp_path / "r2", cfg, NOW + 3 * DAY, slices=2, seed=5)
    assert res is not None and res.counts.as_dict()["tombstones_removed"] > 0


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, min_size=3, max_size=30), checkpoint_at=st.floats(0, 1), producers_active=st.booleans(),
       codec=st.sampled_from([0, 1, 3]), slices=st.integers(1, 4), segment_bytes=st.sampled_from([90, 250, 1 << 30]),
       seed=st.integers(0, 100))
def test_random_logs_split_equal_clean_partition(ops, checkpoint_at, producers_active, codec, slices, segment_bytes,
                                                 seed):
    segments, _open = build(ops)
    segments = [[b if b.control else replace(b, codec=codec) for b in seg] for seg in segments]
    leo = segments[-1][-1].last + 1
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_partition(tmp / "src", segments, checkpoint=int(checkpoint_at * leo))
        _assert_same(tmp / "src", tmp, log_config(segment_bytes=segment_bytes),
                     T0 + (1000 if producers_active else 10 * DAY), slices=slices, seed=seed)


def _many_keys(n: int, key_len: int = 8):
    batches = [data(i * 10, [(b"%0*d" % (key_len, (i * 10 + j) % (n // 2)), b"v") for j in range(10)])
               for i in range(n // 10)]
    return [batches[:len(batches) // 2], batches[len(batches) // 2:], [data(n, [(b"z", b"active")])]]


def test_a_budget_too_small_for_one_map_plans_more_slices(tmp_path):
    write_partition(tmp_path / "src", _many_keys(400))
    cfg = log_config(segment_bytes=1 << 30)
    plan = plan_partition(tmp_path / "src" / "compacted-0", config=cfg, now_ms=NOW)
    split = plan_split_round(plan, options=CleanOptions(map_budget_bytes=MIN_BUDGET))
    assert split.slices > 1 and split.estimated_keys == pytest.approx(200, rel=0.05)
    assert plan_split_round(plan, options=CleanOptions(map_budget_bytes=1 << 20)).slices == 1
    one, two = tmp_path / "b1", tmp_path / "b2"
    shutil.copytree(tmp_path / "src", one)
    shutil.copytree(tmp_path / "src", two)
    clean_partition(one / "compacted-0", config=cfg, now_ms=NOW, options=CleanOptions(record_decisions=False))
    small = clean_partition_split(plan_partition(two / "compacted-0", config=cfg, now_ms=NOW),
                                  options=CleanOptions(map_budget_bytes=MIN_BUDGET))
    assert small.cleaned and small.map_stats.passes == split.slices and small.map_stats.bytes <= MIN_BUDGET
    assert _files(two) == _files(one)


def test_a_slice_whose_keys_overflow_its_task_takes_more_passes_of_its_own(tmp_path):
    """Slices planned without a count (as many as the task slots: no counting walk before the slices
    start) whose keys do not fit one task's map: each slice task walks sub-slices of its slice until
    they fit; the bytes are clean_partition's."""
    write_partition(tmp_path / "src", _many_keys(400))
    cfg = log_config(segment_bytes=1 << 30)
    one, two = tmp_path / "b1", tmp_path / "b2"
    shutil.copytree(tmp_path / "src", one)
    shutil.copytree(tmp_path / "src", two)
    clean_partition(one / "compacted-0", config=cfg, now_ms=NOW, options=CleanOptions(record_decisions=False))
    plan = plan_partition(two / "compacted-0", config=cfg, now_ms=NOW)
    budget = CleanOptions(map_budget_bytes=MIN_BUDGET)
    counted = plan_split_round(plan, options=budget, min_slices=2, max_slices=8)   # slots to spare: count
    assert counted.slices > 2 and counted.estimated_keys == pytest.approx(200, rel=0.05)
    as_many = plan_split_round(plan, options=budget, min_slices=2, max_slices=2)   # every slot a slice
    assert as_many.slices == 2 and as_many.estimated_keys is None
    small = clean_partition_split(plan, options=budget, min_slices=2, max_slices=2)
    assert small.cleaned and small.map_stats.passes > 2 and small.map_stats.keys == 200
    assert small.map_stats.bytes <= MIN_BUDGET
    assert _files(two) == _files(one)


def test_a_budget_no_slice_count_meets_is_an_error_before_anything_is_written(tmp_path):
    long_key = b"k" * (2 * MIN_BUDGET)           # one key's bytes alone exceed the budget
    write_partition(tmp_path / "src", [[data(0, [(long_key, b"1"), (long_key, b"2")])], [data(2, [(b"z", b"a")])]])
    before = _files(tmp_path / "src")
    plan = plan_partition(tmp_path / "src" / "compacted-0", config=log_config(), now_ms=NOW)
    with pytest.raises(KafkalogError, match="do not fit the cleaner's map"):
        clean_partition_split(plan, options=CleanOptions(map_budget_bytes=MIN_BUDGET), slices=4)
    assert _files(tmp_path / "src") == before


def test_a_crash_between_the_groups_cleaned_files_and_the_swap_in_recovers_and_converges(tmp_path):
    write_partition(tmp_path / "src", spanning_log())
    cfg = log_config(segment_bytes=120)
    shutil.copytree(tmp_path / "src", tmp_path / "one")
    clean_partition(tmp_path / "one" / "compacted-0", config=cfg, now_ms=NOW, options=CleanOptions(record_decisions=False))
    shutil.copytree(tmp_path / "src", tmp_path / "crash")
    d = tmp_path / "crash" / "compacted-0"
    original = _files(tmp_path / "crash")
    split = plan_split_round(plan_partition(d, config=cfg, now_ms=NOW), slices=2)
    superseded, found, stats = merge_bits(split, [slice_bits(split, s) for s in (1, 0)])
    done = [clean_split_group(split, g, superseded, found) for g in reversed(range(len(split.groups)))]
    assert len(list(d.glob("*.cleaned"))) >= len(split.groups)   # every group written; the driver dies here
    with pytest.raises(KafkalogError, match="interrupted compaction"):
        plan_partition(d, config=cfg, now_ms=NOW)
    recover_partition(d)
    assert _files(tmp_path / "crash") == original
    rerun = clean_partition_split(plan_partition(d, config=cfg, now_ms=NOW), slices=3)
    assert rerun.cleaned and _files(tmp_path / "crash") == _files(tmp_path / "one")
    # a crash inside the swap-in (in the second group's install): recover finishes or rolls it back
    shutil.copytree(tmp_path / "src", tmp_path / "mid")
    d = tmp_path / "mid" / "compacted-0"
    split = plan_split_round(plan_partition(d, config=cfg, now_ms=NOW), slices=2)
    superseded, found, stats = merge_bits(split, [slice_bits(split, s) for s in range(2)])
    done = [clean_split_group(split, g, superseded, found) for g in range(len(split.groups))]
    installs = []

    def crash(step, path):
        if step == STEP_INSTALL:
            installs.append(path)
            if len(installs) == 4:
                raise OSError(5, "injected crash", str(path))
    res = swap_in_split_round(split, done, stats, options=CleanOptions(on_step=crash))
    assert res.error and not res.cleaned and 1 <= res.groups_committed < len(split.groups)
    recover_partition(d)           # then a rerun, split or not, writes the same bytes
    rerun = _assert_same(tmp_path / "mid", tmp_path / "rerun", cfg, slices=2)
    assert rerun is not None and rerun.cleaned
