"""``python -m kafkalog.tools.warm`` into an empty numba cache, in the background (tests/tools/test_warm.py).

That run is numba compiling every kernel: one core busy for ~25 s on an idle machine. tests/conftest.py starts
it when the first test of tests/tools starts (the folder's other files are collected before test_warm.py and
keep one core busy for about as long: measured 603 tests, 24.8 s wall, 18.7 s CPU at load 2.4), and the
``warmed`` fixture waits for it, so CI's two cores share the work instead of taking it in turn.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600
FOLDER = "tools"          # the tests/ folder whose first test starts the run
USED_BY = "warmed"        # the fixture that waits for it


class WarmUpRun:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="kafkalog-warm-up-test-"))
        self.cache = self.folder / "cache"
        self._stderr = open(self.folder / "stderr.txt", "w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "kafkalog.tools.warm"], cwd=REPO,
                                     env=dict(os.environ, NUMBA_CACHE_DIR=str(self.cache)),
                                     stdout=subprocess.DEVNULL, stderr=self._stderr, text=True)

    def wait(self) -> tuple:
        """(exit code, stderr) once the run has ended."""
        code = self.proc.wait(timeout=TIMEOUT_S)
        self._stderr.seek(0)
        return code, self._stderr.read()

    def stop(self) -> None:
        """Kill the run if it is still going; remove its folder."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()
        shutil.rmtree(self.folder, ignore_errors=True)
