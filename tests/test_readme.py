"""The README and the docs pages are the first things a user runs: every shell command and every Python
snippet they show (after the two set-up commands) runs as written, in reading order — README.md, then
docs/ in the order of docs/index.md's table of contents — from one folder laid out like a clone after
./demo.sh. One set-up serves every page: a page may use what an earlier one made (demo-logs-2, the export
table), as a reader going through them in order would have.

`kafkalog …` lines and `./spark-submit.sh --help` run in a subprocess with `.venv/bin` first on PATH (what
`source .venv/bin/activate` does); `./spark-submit.sh <job> …` lines run the job's own entry (same
argument parsing, same code, same exit codes) on the tests' shared SparkSession, since starting a JVM
per line would add minutes; tests/test_spark_jobs.py runs the script itself end to end. A command shown
on two pages (the README's tour repeats the pages' commands) runs once, where it first appears.

Python blocks run in one namespace per page with `spark` bound to the tests' session (the pages say: a
pyspark shell's `spark`); a block that defines `test_*` functions is a pytest example, and each is called
with its fixtures (`spark` / `kafkalog_spark`: the session; `tmp_path`: a fresh folder). The one snippet
that needs a real Kafka broker runs in tests/broker/ (RUN_ELSEWHERE), where the broker's jars are.
"""
from __future__ import annotations

import importlib
import inspect
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

from kafkalog.tools.demo import generate_demo_log_dir

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SETUP_COMMANDS = ("./demo.sh", "bash .ci/run")        # run on a fresh clone (the report times them), not here
ACTIVATE = "source .venv/bin/activate"
# Blocks another test runs as written (and checks the output of), found by a string only they hold -> that
# test (file, function); run there, not twice: the broker example needs the broker's jars.
RUN_ELSEWHERE = {
    "KafkaBroker(tmp_path": ("tests/broker/test_harness.py", "test_the_readme_broker_example_runs"),
    "def test_drop_tombstones(": ("tests/testing/test_testing_helpers.py", "test_the_readme_user_test_runs"),
    "kafkalog diverge --log-dirs demo-replica-a,demo-replica-b": ("tests/log/test_replica_divergence.py",
                                                                 "test_the_readme_example_runs"),
}
FIXTURES = ("spark", "kafkalog_spark", "tmp_path")


def code_blocks(text: str) -> list[tuple[str, str, int]]:
    """The ```bash and ```python blocks of a Markdown text: (language, code, line of the opening fence)."""
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in re.finditer(r"^```(bash|python)\n(.*?)^```", text, flags=re.S | re.M)]


def shell_commands(block: str) -> list[str]:
    """A bash block's commands: continuation lines joined, comments dropped."""
    commands, pending = [], ""
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


def readme_commands(text: str) -> list[str]:
    """The commands of a Markdown text's ```bash blocks, in order."""
    return [c for lang, code, _ in code_blocks(text) if lang == "bash" for c in shell_commands(code)]


def docs_pages() -> list[Path]:
    """docs/*.md in the order of docs/index.md's toctrees (the site's reading order), index first."""
    index = (DOCS / "index.md").read_text()
    names = []
    for block in re.findall(r"^```\{toctree\}\n(.*?)^```", index, flags=re.S | re.M):
        names += [line.strip() for line in block.splitlines() if line.strip() and not line.startswith(":")]
    return [DOCS / "index.md"] + [DOCS / f"{name}.md" for name in names]


def documents() -> list[Path]:
    return [REPO / "README.md"] + docs_pages()


def test_the_documented_commands_are_found():
    readme = (REPO / "README.md").read_text()
    assert readme_commands(readme)[:2] == list(SETUP_COMMANDS) and ACTIVATE in readme_commands(readme)
    assert len(readme.splitlines()) <= 200, "the README fits on a screen or two: move details to docs/"
    pages = docs_pages()
    assert sorted(pages) == sorted(DOCS.glob("*.md")), "every docs page is in docs/index.md's toctree, once"
    commands = [c for doc in documents() for c in readme_commands(doc.read_text())]
    jobs = {shlex.split(c)[1] for c in commands if c.startswith("./spark-submit.sh ")}
    assert {"--help", "catalog", "retention", "compact", "reindex", "lookup", "export", "restore", "lag"} <= jobs
    assert any(c.startswith("kafkalog dump") for c in commands)
    for job in jobs - {"--help"}:           # each job's page shows the job
        assert any(c.startswith(f"./spark-submit.sh {job} ") for c in readme_commands((DOCS / f"{job}.md").read_text()))


def test_the_links_lead_somewhere():
    """Relative links of README.md and docs/*.md name files that exist (the Sphinx build checks the pages'
    headings too); external links are never fetched here (no network in CI), but must be well-formed."""
    bad, external = [], []
    for doc in [REPO / "README.md", *DOCS.glob("*.md")]:
        text = re.sub(r"^```.*?^```", "", doc.read_text(), flags=re.S | re.M)      # links inside code are code
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                url = urlparse(target)
                external.append(target)
                if url.scheme not in ("http", "https") or "." not in url.netloc or " " in target:
                    bad.append(f"{doc.name}: malformed external link {target}")
                continue
            path = target.split("#")[0]
            if path and not (doc.parent / path).exists():
                bad.append(f"{doc.relative_to(REPO)}: {target} does not exist")
    assert not bad, "\n".join(bad)


def _job_main(job: str):
    module = importlib.import_module(f"udfs.{job}_job")
    return module.main


def _run_python(code: str, where: str, scope: dict, spark, tmp_path: Path) -> None:
    before = {name for name in scope if name.startswith("test_")}
    exec(compile(code, where, "exec"), scope)
    for name, function in list(scope.items()):
        if name.startswith("test_") and name not in before and callable(function):
            params = list(inspect.signature(function).parameters)
            assert set(params) <= set(FIXTURES), f"{where}: {name} asks for fixtures {params}"
            folder = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}"
            folder.mkdir()
            function(**{p: folder if p == "tmp_path" else spark for p in params})


def test_every_documented_command_and_snippet_runs(spark, tmp_path, monkeypatch, capsys):
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
    snippets = tmp_path / "snippets"
    snippets.mkdir()
    ran, snippets_ran, elsewhere_ran, seen = [], [], [], set()
    for doc in documents():
        scope = {"spark": spark, "__name__": "__docs__"}
        for lang, code, line in code_blocks(doc.read_text()):
            where = f"{doc.relative_to(REPO)}:{line}"
            elsewhere = [test for marker, test in RUN_ELSEWHERE.items() if marker in code]
            if elsewhere:
                (file, function), = elsewhere
                source = (REPO / file).read_text()
                assert f"def {function}(" in source and str(doc.relative_to(REPO)) in source, \
                    f"{where}: {file}::{function} no longer runs this block"
                elsewhere_ran.append(where)
                continue
            if lang == "python":
                try:
                    _run_python(code, where, scope, spark, snippets)
                finally:
                    capsys.readouterr()
                snippets_ran.append(where)
                continue
            for command in shell_commands(code):
                if command in SETUP_COMMANDS or command == ACTIVATE or command in seen:
                    continue
                seen.add(command)
                argv = shlex.split(command)
                if argv[0] == "./spark-submit.sh" and argv[1] != "--help":
                    code_ = run(argv[1], lambda a, job=argv[1]: _job_main(job)(a, spark=spark), argv[2:])
                    captured = capsys.readouterr()
                    out, err = captured.out, captured.err
                else:
                    done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True,
                                          text=True, timeout=300)
                    code_, out, err = done.returncode, done.stdout, done.stderr
                assert code_ == 0 and "Traceback" not in err, \
                    f"{where}: {command}\nexit {code_}\n{out[-2000:]}\n{err[-3000:]}"
                assert out.strip(), f"{where}: {command} printed nothing on stdout"
                ran.append(command)
    assert len(ran) >= 30 and len(snippets_ran) >= 6 and len(elsewhere_ran) == len(RUN_ELSEWHERE), \
        (len(ran), snippets_ran, elsewhere_ran)
