"""The shell entry points check Java and the interpreter before starting anything slow, and say in
one line what to install or run (exit 2)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("bash", "dirname", "basename", "sed", "head", "cut", "cat", "env", "cp", "mkdir")


@pytest.fixture
def clone(tmp_path) -> Path:
    """The scripts of a clone where setup has not run (no .venv)."""
    root = tmp_path / "clone"
    root.mkdir()
    for name in ("demo.sh", "spark-submit.sh"):
        shutil.copy2(REPO / name, root / name)
    for name in ("scripts", ".ci", "jobs", "conf"):
        shutil.copytree(REPO / name, root / name)
    return root


def _bin(tmp_path: Path, java: str | None = None) -> Path:
    """A PATH folder with the basic tools and, when given, a fake ``java`` printing that version."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in TOOLS:
        found = shutil.which(tool)
        if found and not (folder / tool).exists():
            (folder / tool).symlink_to(found)
    if java is not None:
        (folder / "java").write_text(f"#!/bin/sh\necho 'openjdk version \"{java}\" 2024-01-16' >&2\n")
        (folder / "java").chmod(0o755)
    return folder


def _run(args, *, path: Path, extra=None, timeout=60):
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "KAFKALOG_PYTHON")}
    env.update(PATH=str(path), **(extra or {}))
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)


def _one_line_exit_2(done, *fragments):
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("script", [["demo.sh"], [".ci/run"], ["spark-submit.sh", "catalog", "--log-dirs", "x"]])
def test_no_java_is_one_line_saying_what_to_install(clone, tmp_path, script):
    extra = {"KAFKALOG_PYTHON": sys.executable} if script[0] == "spark-submit.sh" else {}
    done = _run([str(clone / script[0]), *script[1:]], path=_bin(tmp_path), extra=extra)
    _one_line_exit_2(done, "Spark needs Java 17+", "no java on PATH", "openjdk-17-jre-headless", "JAVA_HOME")
    assert not (clone / ".venv").exists()                 # checked before setup starts installing


@pytest.mark.parametrize("version, major", [("11.0.22", 11), ("1.8.0_392", 8)])
def test_an_old_java_is_named(clone, tmp_path, version, major):
    done = _run([str(clone / "demo.sh")], path=_bin(tmp_path, java=version))
    _one_line_exit_2(done, f"is Java {major}", "Java 17+")


def test_java_home_without_java(clone, tmp_path):
    done = _run([str(clone / ".ci/run")], path=_bin(tmp_path, java="17.0.1"),
                extra={"JAVA_HOME": str(tmp_path / "jdk")})
    _one_line_exit_2(done, f"JAVA_HOME={tmp_path / 'jdk'} has no bin/java")


def test_a_new_enough_java_passes_the_check(clone, tmp_path):
    done = _run(["bash", "-c", f"source {clone}/scripts/preflight.sh && kafkalog_require_java && echo fine"],
                path=_bin(tmp_path, java="21.0.2"))
    assert done.returncode == 0 and done.stdout == "fine\n", done.stderr


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A Python without kafkalog's dependencies (an empty virtual environment)."""
    root = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    return root / "bin" / "python3"


@pytest.mark.parametrize("how", ["python3 on PATH", "KAFKALOG_PYTHON"])
def test_a_python_without_the_dependencies_says_to_run_setup(clone, tmp_path, bare_python, how):
    path = _bin(tmp_path, java="17.0.15")
    extra = {}
    if how == "KAFKALOG_PYTHON":
        extra["KAFKALOG_PYTHON"] = str(bare_python)
    else:
        (path / "python3").symlink_to(bare_python)
    for args in (["compact", "--help"], ["retention", "--log-dirs", "x"]):
        done = _run([str(clone / "spark-submit.sh"), *args], path=path, extra=extra)
        _one_line_exit_2(done, "lacks what the jobs need (pyarrow", "run scripts/bootstrap.sh")


def test_bootstrap_names_a_missing_python(clone, tmp_path):
    done = _run([str(clone / "scripts" / "bootstrap.sh")], path=_bin(tmp_path), extra={"PYTHON": "python3.99"})
    _one_line_exit_2(done, "no python3.99 found", "Python 3.10 or newer")
