"""``spark-submit.sh compact --output-dir``: the Spark job's tasks write the compacted copy (the bytes of
in-place compaction, the source untouched) and a rerun on the finished copy runs no task."""
from __future__ import annotations

import shutil

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from kafkalog.errors import UsageError  # noqa: E402
from kafkalog.tools.cli import main  # noqa: E402
from udfs import compact_job  # noqa: E402

from cleaner_model import TOPIC  # noqa: E402
from cleaner.test_output_dir import _build, _tree  # noqa: E402
from cleaner.test_cleaner_crash import NOW  # noqa: E402


def test_the_spark_job_writes_the_in_place_bytes_elsewhere(spark, tmp_path, capsys):
    src, segment_bytes = _build(tmp_path)
    in_place = tmp_path / "in-place"
    shutil.copytree(src, in_place)
    configs = ["--topic-config", f"{TOPIC}:cleanup.policy=compact", "--topic-config",
               f"{TOPIC}:min.cleanable.dirty.ratio=0", "--topic-config", f"{TOPIC}:segment.bytes={segment_bytes}"]
    assert main(["compact", "--log-dir", str(in_place), "--now-ms", str(NOW), *configs]) == 0
    before = _tree(src)
    out = tmp_path / "out"
    argv = ["--log-dirs", str(src), "--now-ms", str(NOW), *configs, "--output-dir", str(out)]
    assert compact_job.main(argv, spark=spark) == 0
    assert "[output: written]" in capsys.readouterr().out
    assert _tree(out) == _tree(in_place) and _tree(src) == before
    assert compact_job.main(argv, spark=spark) == 0
    assert capsys.readouterr().out.count("[output: skipped-complete]") == 2
    with pytest.raises(UsageError, match="takes one log dir"):       # before any Spark work or any file
        compact_job.main(["--log-dirs", f"{src},{in_place}", "--output-dir", str(tmp_path / "two"), *configs],
                         spark=spark)
    assert not (tmp_path / "two").exists()
