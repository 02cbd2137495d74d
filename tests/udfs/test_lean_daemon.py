"""``udfs.lean_daemon``: the compact job's workers never load pandas, and what they run needs none."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from udfs import compact_job

REPO = Path(__file__).resolve().parents[2]

_CHILD = """
import sys
from udfs.lean_daemon import RefusePandas
sys.meta_path.insert(0, RefusePandas())
try:
    import pandas
except ImportError as e:
    print("refused:", e)
import numpy as np
import pyarrow as pa
from kafkalog.cleaner.partition_run import ROW_FIELDS
from kafkalog.format.record_columns import NO_HEADERS
from udfs.compact_job import ROW_SCHEMA
batch = pa.RecordBatch.from_pylist([{"topic": "t", "partition": 0, "status": "cleaned"}], schema=ROW_SCHEMA)
print(batch.num_rows, pa.array(np.arange(3)).to_pylist(), len(NO_HEADERS), "pandas" in sys.modules)
"""


def test_workers_of_the_lean_daemon_build_arrow_without_pandas():
    out = subprocess.run([sys.executable, "-c", _CHILD], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("refused: pandas is not loaded")
    assert lines[1] == "1 [0, 1, 2] 0 False"


def test_only_a_local_master_uses_the_lean_daemon(monkeypatch):
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    assert compact_job._session_conf("local[2]") == {"spark.python.daemon.module": "udfs.lean_daemon"}
    assert compact_job._session_conf(None) == {"spark.python.daemon.module": "udfs.lean_daemon"}
    assert compact_job._session_conf("spark://host:7077") == {}
    monkeypatch.setenv("SPARK_MASTER", "yarn")
    assert compact_job._session_conf(None) == {}
