"""``CleanOptions``: one frozen value says how a round runs; wrong values are refused before anything
is touched, and each option does what it says in ``clean_partition`` and ``clean_log_dir``."""
from __future__ import annotations

import dataclasses

import pytest

from kafkalog.cleaner import CleanOptions, clean_log_dir, clean_partition
from kafkalog.config import configs_from_mappings

from cleaner_model import TOPIC, write_partition
from test_cleaner_crash import NOW, crash_log, grouped_config


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_options_are_frozen_and_a_variant_is_a_new_value():
    base = CleanOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.dry_run = True                                   # type: ignore[misc]
    dry = dataclasses.replace(base, dry_run=True)
    assert dry.dry_run and not base.dry_run


@pytest.mark.parametrize("bad", [dict(io_buffer_size=0), dict(map_budget_bytes=-1), dict(io_buffer_size=True),
                                 dict(high_watermark=-5)])
def test_nonsense_sizes_are_refused_when_the_options_are_made(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        CleanOptions(**bad)


def test_dry_run_changes_nothing_and_the_same_options_clean_twice_alike(tmp_path):
    d = write_partition(tmp_path / "a", crash_log())
    before = _files(d)
    dry = CleanOptions(dry_run=True, record_decisions=False)
    first = clean_partition(d, config=grouped_config(d), now_ms=NOW, options=dry)
    second = clean_partition(d, config=grouped_config(d), now_ms=NOW, options=dry)
    assert first.error is None and first.groups and _files(d) == before
    assert first.counts == second.counts and first.end_offset == second.end_offset


def test_steps_and_checkpoint_follow_the_options(tmp_path):
    d = write_partition(tmp_path / "a", crash_log())
    steps = []
    res = clean_partition(d, config=grouped_config(d), now_ms=NOW,
                          options=CleanOptions(on_step=lambda step, path: steps.append(step), update_checkpoint=False))
    assert res.cleaned and steps and "checkpoint-written" not in steps
    assert not (d.parent / "cleaner-offset-checkpoint").exists()


@pytest.mark.parametrize("bad", [CleanOptions(lock=False), CleanOptions(high_watermark=3)])
def test_clean_log_dir_refuses_options_that_are_per_partition(tmp_path, bad):
    d = write_partition(tmp_path / "a", crash_log())
    before = _files(d)
    with pytest.raises(ValueError, match="clean_partition"):
        clean_log_dir(d.parent, configs=configs_from_mappings(topics={TOPIC: {"cleanup.policy": "compact"}}),
                      now_ms=NOW, options=bad)
    assert _files(d) == before
