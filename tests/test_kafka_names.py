"""Names and references a reader can follow (issue 31).

* No citation of a document a user's clone does not have: no section of "the spec" (our reading of
  Kafka's source lives outside the repository) in the code, tests, README.md or docs/, and no
  section sign except after a standard's name (``RFC 8878``). Code cites Kafka's own files and
  classes instead.
* The table "Modules and their Kafka counterparts" (README.md or a page under docs/) is true: every
  path it lists exists; every module of kafkalog/ is listed, itself or under a package row; every
  Kafka name it gives a row (``LogSegment.recover``, ``deletableSegments``) is mentioned in that row's
  modules; and a Kafka class we define under Kafka's name (``class LogSegment``) is mapped to the
  module that defines it, so the table cannot send a reader to another module for it.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
CITING_DIRS = ("kafkalog", "udfs", "jobs", "bench", "tests", "docs", "conf", "scripts", ".ci")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".txt", ".toml", ".cfg", ".conf", ".properties", ".ini", ".xml", ".pom"}
SECTION = "\u00a7"
# A section sign is followable after a standard's name: "RFC 8878 §3.1".
STANDARD_BEFORE = re.compile(r"RFC \d+ $")
# Documents outside the repository, by name (spelled in pieces so this file does not cite them).
OUTSIDE_DOCUMENTS = ("kafka-log-semantics" + ".md", "real-broker" + ".md", "shared/" + "spec/")

TABLE_HEADING = re.compile(r"^#+\s+Modules and their Kafka counterparts\s*$")
REPO_LEVEL = ("udfs/", "jobs/", "conf/", "bench/", "spark-submit.sh")
NO_COUNTERPART = "—"
KAFKA_NAME = re.compile(r"^([A-Za-z][A-Za-z0-9]*)(?:\.([A-Za-z][A-Za-z0-9]*))?$")
CLASS_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")


# --- citations -----------------------------------------------------------------------------------

def unfollowable_citations(text: str, label: str) -> List[str]:
    """Each place in ``text`` citing a section of a document not in the repository, as
    ``label:line: text``."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        bad = any(doc in line for doc in OUTSIDE_DOCUMENTS)
        for m in re.finditer(SECTION, line):
            if not STANDARD_BEFORE.search(line[:m.start()]):
                bad = True
        if bad:
            found.append(f"{label}:{n}: {line.strip()}")
    return found


def citing_files() -> Iterable[Path]:
    yield ROOT / "README.md"
    for top in CITING_DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and (path.suffix in TEXT_SUFFIXES or top == ".ci") and "__pycache__" not in path.parts:
                yield path


def test_no_citation_of_a_document_outside_the_repository():
    found = [hit for path in citing_files()
             for hit in unfollowable_citations(path.read_text(encoding="utf-8", errors="replace"),
                                               str(path.relative_to(ROOT)))]
    assert not found, "cite Kafka's source file and class instead:\n" + "\n".join(found)


@pytest.mark.parametrize("line, caught", [
    ("Rules (spec " + SECTION + "7.4).", True),
    ("checked in this order (" + SECTION + "4.1, " + SECTION + "4.5):", True),
    ("the recipe (" + OUTSIDE_DOCUMENTS[1] + " 4.3)", True),
    ("block headers only (RFC 8878 " + SECTION + "3.1): the stream", False),
    ("RFC 8878 " + SECTION + "3.1 and then spec " + SECTION + "2", True),
    ("Kafka's ``Cleaner.buildOffsetMap`` (``Cleaner.java``)", False),
])
def test_citation_check_catches_each_spelling(line, caught):
    assert bool(unfollowable_citations(line, "x")) is caught


# --- the module table ----------------------------------------------------------------------------

Row = Tuple[List[str], List[str]]          # (module paths as written, Kafka names as written)


def table_under_heading(text: str) -> Optional[List[Row]]:
    """The rows of the first table after the heading, or None when the text has no such heading
    followed by a table before the next heading."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if TABLE_HEADING.match(line)), None)
    if start is None:
        return None
    rows: List[Row] = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or set(cells[0]) <= set("-: "):
            continue
        rows.append((re.findall(r"`([^`]+)`", cells[0]), re.findall(r"`([^`]+)`", cells[1])))
    return rows[1:] or None                 # the first row is the header


def find_module_table() -> Tuple[Path, List[Row]]:
    places = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [(p, rows) for p in places if p.is_file()
             for rows in [table_under_heading(p.read_text(encoding="utf-8"))] if rows]
    assert found, "no table under '## Modules and their Kafka counterparts' in README.md or docs/*.md"
    assert len(found) == 1, f"the module table is in more than one place: {[str(p) for p, _ in found]}"
    return found[0]


def resolve(written: str) -> Path:
    """A path as the table writes it: under kafkalog/ unless it starts at the repository's top."""
    return ROOT / written if written.startswith(REPO_LEVEL) else ROOT / "kafkalog" / written


def kafkalog_modules() -> List[Path]:
    return sorted(p for p in (ROOT / "kafkalog").rglob("*.py")
                  if "__pycache__" not in p.parts and p.name != "__init__.py")


def module_files(path: Path) -> List[Path]:
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def defined_classes(paths: Iterable[Path]) -> Dict[str, Path]:
    """Top-level class name -> the module defining it."""
    out: Dict[str, Path] = {}
    for path in paths:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, path)
    return out


def table_problems(rows: List[Row], *, exists: Callable[[Path], bool], modules: List[Path],
                   text_of: Callable[[Path], str], defined: Dict[str, Path]) -> List[str]:
    """What is untrue in the table.

    :param rows: (module paths, Kafka names) per row, as written
    :param exists: whether a resolved path is a file or folder of the repository
    :param modules: the kafkalog modules every one of which the table must cover
    :param text_of: the source text of the modules under a resolved path, joined
    :param defined: class name -> defining module, for the classes kafkalog defines
    """
    problems = []
    listed: List[Path] = []
    for written_paths, names in rows:
        paths = [resolve(w) for w in written_paths]
        missing = [w for w, p in zip(written_paths, paths) if not exists(p)]
        problems += [f"`{w}` is in the table but not in the repository" for w in missing]
        listed += paths
        if missing:
            continue
        text = "\n".join(text_of(p) for p in paths)
        for name in names:
            m = KAFKA_NAME.match(name)
            if name == NO_COUNTERPART or not m:
                continue
            for word in filter(None, m.groups()):
                if not re.search(rf"\b{word}\b", text):
                    problems.append(f"{', '.join(written_paths)}: the table names `{name}` but `{word}` "
                                    "appears nowhere in the module")
            cls, method = m.groups()
            home = defined.get(cls)
            if method is None and CLASS_NAME.match(cls) and home is not None \
                    and not any(home == p or p in home.parents for p in paths):
                problems.append(f"{', '.join(written_paths)}: the table maps `{cls}` here, but our `{cls}` "
                                f"is {home.relative_to(ROOT)}")
    for module in modules:
        if not any(module == p or p in module.parents for p in listed):
            problems.append(f"{module.relative_to(ROOT)} is in no row of the table")
    return problems


def read_modules(path: Path) -> str:
    return "\n".join(f.read_text(encoding="utf-8") for f in module_files(path))


def test_the_module_table_is_true():
    where, rows = find_module_table()
    modules = kafkalog_modules()
    problems = table_problems(rows, exists=Path.exists, modules=modules, text_of=read_modules,
                              defined=defined_classes(modules))
    assert not problems, f"{where.relative_to(ROOT)}:\n" + "\n".join(problems)


# The checks themselves, on a small repository described in memory.
FAKE = {
    ROOT / "kafkalog/log/segment.py": "class LogSegment:\n    '''Kafka's LogSegment; recover.'''",
    ROOT / "kafkalog/log/records_io.py": "'''Segments read as Arrow (LogSegment).'''",
    ROOT / "kafkalog/retention/policy.py": "'''UnifiedLog.deleteOldSegments, deletableSegments'''",
}
FAKE_DIRS = {ROOT / "kafkalog/retention"}


def fake_problems(table: str) -> List[str]:
    rows = table_under_heading("## Modules and their Kafka counterparts\n\n| module | Kafka | what |\n|---|---|---|\n"
                               + table)
    return table_problems(rows or [], exists=lambda p: p in FAKE or p in FAKE_DIRS,
                          modules=sorted(FAKE), text_of=lambda p: "\n".join(
                              t for f, t in FAKE.items() if f == p or p in f.parents),
                          defined={"LogSegment": ROOT / "kafkalog/log/segment.py"})


TRUE_TABLE = ("| `log/segment.py` | `LogSegment`, `LogSegment.recover` | a segment |\n"
              "| `log/records_io.py` | — | Arrow |\n"
              "| `retention/` | `UnifiedLog.deleteOldSegments`, `deletableSegments` | retention |\n")


@pytest.mark.parametrize("change, expected", [
    (None, []),
    (("`log/segment.py` | `LogSegment`, `LogSegment.recover`", "`log/segment.py` | `LogSegment.recover`"), []),
    (("| `log/records_io.py` | — |", "| `log/records_io.py` | `LogSegment` |"), ["our `LogSegment` is"]),
    (("`log/records_io.py`", "`log/record_io.py`"), ["not in the repository", "in no row"]),
    (("`deletableSegments`", "`deletableSegment`"), ["`deletableSegment` appears nowhere"]),
    (("`LogSegment.recover`", "`LogSegment.append`"), ["`append` appears nowhere"]),
    (("| `retention/` |", "| `retention/run.py` |"), ["not in the repository", "policy.py is in no row"]),
])
def test_table_check_catches_each_untruth(change, expected):
    table = TRUE_TABLE if change is None else TRUE_TABLE.replace(*change)
    assert table != TRUE_TABLE or change is None
    problems = fake_problems(table)
    assert len(problems) == len(expected), problems
    for problem, part in zip(problems, expected):
        assert part in problem
