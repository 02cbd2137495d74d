"""``kafkalog.tools.warm``: the warm-up writes, decodes and cleans a partition per codec (one in
hash-slice passes, every map grown), and leaves numba's cache holding the cleaner's kernels."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kafkalog.tools import warm


def test_warm_decodes_and_cleans_every_codec(tmp_path):
    assert warm.warm(tmp_path) == len(warm.CODECS) * warm.RECORDS
    for codec in warm.CODECS:
        assert (tmp_path / codec / "cleaner-offset-checkpoint").read_text().splitlines()[2].endswith(" 10000")


@pytest.fixture(scope="module")
def warmed(warm_up_run):
    """A numba cache filled by ``python -m kafkalog.tools.warm`` into an empty folder (its stderr, the cache
    folder): the run tests/tools/conftest.py started with the folder's first test."""
    code, stderr = warm_up_run.wait()
    assert code == 0, stderr
    return stderr, warm_up_run.cache


def test_warm_fills_the_cache_the_jobs_read(warmed):
    stderr, cache = warmed
    assert f"compiled into {cache}" in stderr
    names = {p.name.split("-")[0] for p in cache.rglob("*.nbi")}
    assert {"key_walk.walk_keys_kernel", "key_map.grow_kernel", "key_map.clear_kernel",
            "filter_to_kernel.filter_window_kernel", "records_accel.decode_v2_kernel"} <= names


def test_the_cli_reads_the_cache_the_warm_up_fills(monkeypatch):
    from kafkalog.tools import cli
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert cli.main(["--version"]) == 0
    assert os.environ["NUMBA_CACHE_DIR"] == cli.NUMBA_CACHE_DIR == warm.DEFAULT_CACHE_DIR


def test_after_the_warm_up_the_clis_first_fetch_and_compact_compile_nothing(warmed, tmp_path):
    """The kernels `kafkalog dump`, `fetch`, `offsets` and `compact` run are all in the warmed cache: running them
    adds no compiled kernel to it (the issue's first `kafkalog fetch` compiled for 12 s)."""
    _stderr, cache = warmed
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    before = {p.name for p in cache.rglob("*.nb*")}
    kafkalog = [sys.executable, "-m", "kafkalog.tools.cli"]
    logs = tmp_path / "logs"
    for args in (["demo", logs, "--partitions", "1", "--records", "6000"],
                 ["dump", "--files", logs / "demo-orders-0" / "00000000000000000000.log", "--deep-iteration",
                  "--print-data-log"],
                 ["fetch", "--log-dirs", logs, "--topic", "demo-orders", "--partition", "0", "--offset", "5500",
                  "--max-records", "3"],
                 ["offsets", "--log-dirs", logs, "--topic", "demo-orders", "--time", "2026-01-01T01:00:00Z"],
                 ["compact", "--log-dir", logs, "--topic-config", "demo-orders:cleanup.policy=compact"]):
        proc = subprocess.run(kafkalog + [str(a) for a in args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        compiled = {p.name for p in cache.rglob("*.nb*")} - before
        assert not compiled, f"kafkalog {args[0]} compiled {sorted(compiled)}: the warm-up does not cover them"
