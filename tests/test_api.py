"""The Python API: ``import kafkalog`` exposes the main verbs by a curated ``__all__``, each with a
docstring naming its parameters and an example that uses only top-level names; the import loads no
heavy module (numba, pyarrow) until a verb needs it; the README's and docs' Python snippets import
only from ``kafkalog``'s top level (``kafkalog.testing`` is the testing helpers' own documented package).
"""
from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kafkalog

REPO = Path(__file__).resolve().parents[1]
VERBS = {"read_segment", "iter_segment", "write_segment", "load_partition_path", "plan_retention", "retain_partition",
         "retain_log_dir", "clean_partition", "clean_log_dir", "lookup_offsets", "PartitionLog", "load_configs",
         "describe_configs", "KafkalogError"}


def public_names() -> list[str]:
    return [n for n in kafkalog.__all__ if n != "__version__"]


def test_all_resolves_and_holds_the_main_verbs():
    assert VERBS <= set(kafkalog.__all__)
    assert len(set(kafkalog.__all__)) == len(kafkalog.__all__)
    for name in kafkalog.__all__:
        value = getattr(kafkalog, name)
        if name != "__version__":
            assert getattr(value, "__name__", name) == name, f"kafkalog.{name} is {value!r}"
    namespace: dict = {}
    exec("from kafkalog import *", namespace)
    assert set(kafkalog.__all__) <= set(namespace)
    assert set(kafkalog.__all__) <= set(dir(kafkalog))


def test_a_name_not_in_the_api_is_an_attribute_error():
    with pytest.raises(AttributeError, match="read_segmnet"):
        kafkalog.read_segmnet  # noqa: B018
    assert not hasattr(kafkalog, "records_io_internal")


def _example(doc: str) -> str:
    m = re.search(r"Example::\n\n((?:[ \t]+.*\n|\n)+)", doc + "\n")
    assert m, "no 'Example::' block"
    return textwrap.dedent(m.group(1))


def _parameters(obj) -> list[str]:
    target = obj.__init__ if inspect.isclass(obj) else obj
    if inspect.isclass(obj) and (target is object.__init__ or not (target.__doc__ or "").strip()):
        return []            # a class documents its fields in its own docstring; an inherited __init__ has none
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values() if p.name not in ("self", "cls")
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


@pytest.mark.parametrize("name", public_names())
def test_each_public_name_has_a_docstring_with_its_parameters_and_an_example(name):
    obj = getattr(kafkalog, name)
    doc = inspect.getdoc(obj) or ""
    assert len(doc) > 40, f"kafkalog.{name} has no docstring"
    init_doc = inspect.getdoc(obj.__init__) if inspect.isclass(obj) else ""
    text = doc + "\n" + (init_doc or "")
    missing = [p for p in _parameters(obj) if not re.search(rf"\b{re.escape(p)}\b", text)]
    assert not missing, f"kafkalog.{name}'s docstring names no {missing}"
    example = _example(doc)
    tree = ast.parse(example)          # the example is Python
    check_top_level_only(tree, f"kafkalog.{name}'s example")
    assert "kafkalog" in example


def check_top_level_only(tree: ast.AST, where: str) -> None:
    """Every ``kafkalog`` import and attribute in ``tree`` is a top-level API name (or kafkalog.testing)."""
    api = set(kafkalog.__all__)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name == "kafkalog" or alias.name.startswith("kafkalog.testing") or \
                    not alias.name.startswith("kafkalog"), f"{where}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kafkalog"):
            if node.module.startswith("kafkalog.testing"):
                continue
            assert node.module == "kafkalog", f"{where}: from {node.module} import ..."
            unknown = [a.name for a in node.names if a.name not in api]
            assert not unknown, f"{where}: from kafkalog import {unknown}: not in kafkalog.__all__"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "kafkalog":
            assert node.attr in api or node.attr == "testing", f"{where}: kafkalog.{node.attr} is not in __all__"


def python_snippets(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def documentation_files() -> list[Path]:
    return [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md"))


def test_the_readme_and_docs_snippets_import_only_top_level_names():
    checked = 0
    for path in documentation_files():
        for i, snippet in enumerate(python_snippets(path.read_text(encoding="utf-8"))):
            check_top_level_only(ast.parse(snippet), f"{path.relative_to(REPO)} snippet {i + 1}")
            checked += 1
    assert checked >= 1


def test_import_kafkalog_is_cheap():
    """``import kafkalog`` loads neither numba nor pyarrow; the first verb does."""
    code = ("import sys, kafkalog; heavy = [m for m in ('numba', 'pyarrow', 'numpy') if m in sys.modules]; "
            "print(','.join(heavy)); kafkalog.read_segment; print('numba' in sys.modules or 'pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    first, second = out.splitlines()
    assert first == "", f"import kafkalog loaded {first}"
    assert second == "True"


def test_the_cli_commands_statuses_are_the_library_ones():
    """kafkalog compact/retention keep the statuses as constants (not importing the cleaner at --help time)."""
    from kafkalog.cleaner import partition_run
    from kafkalog.retention import run
    from kafkalog.tools import compact_command, retention_command
    assert (compact_command.CLEANED, compact_command.WOULD_CLEAN, compact_command.ERROR) == \
        (partition_run.CLEANED, partition_run.WOULD_CLEAN, partition_run.ERROR)
    assert retention_command.ERROR == run.ERROR


def test_all_is_the_export_table():
    """``__all__`` is a literal list (what tools read without importing); it names exactly the table the
    lazy ``__getattr__`` serves, so a name added to one and not the other fails here."""
    assert sorted(n for n in kafkalog.__all__ if n != "__version__") == sorted(kafkalog._EXPORTS)
