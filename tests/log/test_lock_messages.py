"""Every command that refuses a locked log dir names the real holder and says what fits it (issue 36,
D5): another kafkalog job (its PID and command: wait for it), a Kafka broker (stop it or work on a
copy), or a process the lock does not identify (find it first). Before, the Spark jobs gave every
holder the broker's hint and ``recover`` called any holder "a running broker"."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.cleaner import clean_log_dir, clean_partition
from kafkalog.config import configs_from_mappings
from kafkalog.errors import LogDirLockedError
from kafkalog.fs.lock import JAVA_WHOLE_FILE_LOCK_LENGTH
from kafkalog.tools.cli import main

from logdirs import make_partition, snapshot

REPO = Path(__file__).resolve().parents[2]

HOLDERS = {
    # (program, its extra argv, what the message must name, the hint's words)
    "kafkalog": ("import sys\nfrom kafkalog.fs.lock import lock_log_dir\nwith lock_log_dir(sys.argv[1]):\n"
                 "    print('locked', flush=True)\n    sys.stdin.read()\n",
                 ["jobs/compact.py"], "another kafkalog job (PID {pid}, ", "wait for that job to finish"),
    "broker": ("import fcntl, os, sys\nfd = os.open(sys.argv[1] + '/.lock', os.O_RDWR | os.O_CREAT)\n"
               f"fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, {JAVA_WHOLE_FILE_LOCK_LENGTH})\n"
               "print('locked', flush=True)\nsys.stdin.read()\n",
               ["kafka.Kafka", "config/server.properties"], "a Kafka broker (PID {pid}, ", "stop the broker"),
    "unknown": ("import fcntl, os, sys\nfd = os.open(sys.argv[1] + '/.lock', os.O_RDWR | os.O_CREAT)\n"
                "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nprint('locked', flush=True)\nsys.stdin.read()\n",
                [], "a broker or other process (PID {pid}, ", "find what holds it"),
}


@pytest.fixture(params=sorted(HOLDERS))
def held(request, tmp_path):
    """A log dir with a compacted topic and a retained one, its lock held by each kind of holder:
    (log dir, the holder's pid, the words the message must hold, the hint's words)."""
    program, argv, names, hint = HOLDERS[request.param]
    d = tmp_path / "logs"
    make_partition(d, "t", 0, [[1, 2], [3]])
    proc = subprocess.Popen([sys.executable, "-c", program, str(d), *argv], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    try:
        yield d, proc.pid, names.format(pid=proc.pid), hint, request.param
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def check(message: str, names: str, hint: str, kind: str) -> None:
    assert names in message and hint in message, message
    if kind == "kafkalog":
        assert "broker" not in message, message


def test_recover_names_the_holder(held, capsys):
    d, _pid, names, hint, kind = held
    before = snapshot(d)
    assert main(["recover", "--log-dirs", str(d)]) == 1
    err = capsys.readouterr().err
    check(err, names, hint, kind)
    assert "recover is for a log dir nothing holds" in err
    assert snapshot(d) == before


def test_compaction_in_process_names_the_holder(held):
    d, _pid, names, hint, kind = held
    configs = configs_from_mappings(topics={"t": {"cleanup.policy": "compact"}})
    with pytest.raises(LogDirLockedError) as partition:
        clean_partition(d / "t-0", config=configs.for_topic("t"), now_ms=10)
    with pytest.raises(LogDirLockedError) as log_dir:
        clean_log_dir(d, configs=configs, now_ms=10)
    for e in (partition.value, log_dir.value):
        check(str(e), names, hint, kind)


@pytest.mark.parametrize("job, args", [
    ("compact_job", ["--now-ms", "10", "--topic-config", "t:cleanup.policy=compact"]),
    ("retention_job", ["--execute", "--topic-config", "t:retention.ms=1"]),
    ("reindex_job", []),
])
def test_every_modifying_job_names_the_holder(held, tmp_path, job, args):
    import importlib

    d, _pid, names, hint, kind = held
    before = snapshot(d)
    report = tmp_path / "report.json"
    module = importlib.import_module(f"udfs.{job}")
    code = module.main(["--log-dirs", str(d), *args, "--report", str(report)], spark=object())  # refused first
    assert code == 1
    refused = json.loads(report.read_text())["summary"]["log_dirs_refused"]
    assert len(refused) == 1
    check(refused[0]["message"], names, hint, kind)
    assert snapshot(d) == before
