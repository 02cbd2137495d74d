"""The README is the first thing a user runs: every shell command it shows (after the two setup
commands) runs as written, in order, from a folder laid out like a clone after ./demo.sh.

`kafkalog …` lines and `./spark-submit.sh --help` run in a subprocess with `.venv/bin` first on PATH (what
`source .venv/bin/activate` does); `./spark-submit.sh <job> …` lines run the job's own entry (same
argument parsing, same code, same exit codes) on the tests' shared SparkSession, since starting a JVM
per line would add minutes; tests/test_spark_jobs.py runs the script itself end to end.
"""
from __future__ import annotations

import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from kafkalog.tools.demo import generate_demo_log_dir

REPO = Path(__file__).resolve().parents[1]
SETUP_COMMANDS = ("./demo.sh", "bash .ci/run")        # run on a fresh clone (the report times them), not here
ACTIVATE = "source .venv/bin/activate"


def readme_commands(text: str) -> list[str]:
    """The commands of the README's ```bash blocks: continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        pending = ""
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).rstrip()
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            command = (pending + line).strip()
            pending = ""
            if command:
                commands.append(re.sub(r"\s+", " ", command))
    return commands


def test_the_readme_commands_are_found():
    commands = readme_commands((REPO / "README.md").read_text())
    assert commands[:2] == list(SETUP_COMMANDS)
    jobs = {shlex.split(c)[1] for c in commands if c.startswith("./spark-submit.sh ")}
    assert {"--help", "catalog", "retention", "compact", "reindex", "lookup"} <= jobs
    assert any(c.startswith("kafkalog dump") for c in commands) and ACTIVATE in commands


def _job_main(job: str):
    module = importlib.import_module(f"udfs.{job}_job")
    return module.main


def test_every_readme_command_runs_as_written(spark, tmp_path, monkeypatch, capsys):
    from udfs.job import run

    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("spark-submit.sh", "jobs", "conf", "scripts", "examples"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, clone / name)
    generate_demo_log_dir(clone / "demo-logs", partitions=3, records=20_000, consumer_groups=1,
                          compacted_topic="demo-customers")                     # what ./demo.sh generates
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               KAFKALOG_PYTHON=sys.executable, PYTHONPATH=str(REPO))
    monkeypatch.chdir(clone)
    ran = []
    commands = readme_commands((REPO / "README.md").read_text())
    for command in commands:
        if command in SETUP_COMMANDS or command == ACTIVATE:
            continue
        argv = shlex.split(command)
        if argv[0] == "./spark-submit.sh" and argv[1] != "--help":
            code = run(argv[1], lambda a, job=argv[1]: _job_main(job)(a, spark=spark), argv[2:])
            captured = capsys.readouterr()
            out, err = captured.out, captured.err
        else:
            done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                                  timeout=300)
            code, out, err = done.returncode, done.stdout, done.stderr
        assert code == 0 and "Traceback" not in err, f"{command}\nexit {code}\n{out[-2000:]}\n{err[-3000:]}"
        assert out.strip(), f"{command} printed nothing on stdout"
        ran.append(command)
    assert len(ran) == len(commands) - len(SETUP_COMMANDS) - 1 >= 19
