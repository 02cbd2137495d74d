"""``kafkalog.tools.warm``: the warm-up writes, decodes and cleans a partition per codec (one in
hash-slice passes, every map grown), and leaves numba's cache holding the cleaner's kernels."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kafkalog.tools import warm

REPO = Path(__file__).resolve().parents[2]


def test_warm_decodes_and_cleans_every_codec(tmp_path):
    assert warm.warm(tmp_path) == len(warm.CODECS) * warm.RECORDS
    for codec in warm.CODECS:
        assert (tmp_path / codec / "cleaner-offset-checkpoint").read_text().splitlines()[2].endswith(" 10000")


def test_warm_fills_the_cache_the_jobs_read(tmp_path):
    cache = tmp_path / "cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-m", "kafkalog.tools.warm"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"compiled into {cache}" in done.stderr
    names = {p.name.split("-")[0] for p in cache.rglob("*.nbi")}
    assert {"key_map.walk_keys_kernel", "key_map.grow_kernel", "key_map.clear_kernel",
            "filter_to_kernel.filter_window_kernel", "records_accel.decode_v2_kernel"} <= names
