"""The Python daemon of the compact job's workers: pyspark's own (``pyspark.daemon``), started with
pandas made unimportable, so that the workers it forks never load it.

pyarrow imports pandas the first time any array is built, when it can; nothing a compaction task
runs uses pandas (its rows go back through ``mapInArrow``), and loading it costs each worker
25-35 MiB of resident memory — a tenth of what the issue allows a worker. The daemon module is a
per-session setting (``spark.python.daemon.module``), so only the compact job's session uses it.
"""
from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder


class RefusePandas(MetaPathFinder):
    """An import finder that refuses ``pandas`` (and its submodules): pyarrow then goes without."""

    def find_spec(self, name, path, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not loaded in the compact job's Python workers (udfs.lean_daemon)")
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, RefusePandas())
    from pyspark.daemon import manager

    manager()
