"""The layout rules the code keeps, checked on its syntax trees (not by grep): no ``_private`` name
imported from another module in product code, no Spark import when a ``kafkalog`` module loads, no
module over MAX_MODULE_LINES lines, imports that run one way down the layers (LAYERS), and no import
cycle among modules (function-level imports included)."""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT_PACKAGES = ("kafkalog", "udfs", "jobs")
SIZED_PACKAGES = ("kafkalog", "udfs")
MAX_MODULE_LINES = 600

# The layers, bottom first: a package may import from its own layer and the layers below, never above.
# A package is ``kafkalog.<name>`` (a subpackage or a top-level module), the root ``kafkalog`` (its
# __init__, the public API), ``udfs`` or ``jobs``. Within a layer, the cycle checks keep the arrows one way.
LAYERS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    # the I/O floor: errors, Java's integer ranges, the partition name, file names / paths / URIs /
    # durable writes / the .lock
    # the engine switch (reference | compiled) every engine reads; report rows typed once for Arrow
    ("floor", ("kafkalog.errors", "kafkalog.java_types", "kafkalog.topic_partition", "kafkalog.fs",
               "kafkalog.engine", "kafkalog.row_types")),
    # Kafka's bytes <-> Arrow: record batches, and the small text files beside the segments
    ("bytes", ("kafkalog.format", "kafkalog.checkpoint")),
    ("index", ("kafkalog.index",)),
    # Kafka's log (storage/internals/log), with LogConfig: a topic's effective configs
    ("log", ("kafkalog.log", "kafkalog.config")),
    # decisions over the log: what to delete, compact, find, read
    ("decisions", ("kafkalog.retention", "kafkalog.cleaner", "kafkalog.lookup", "kafkalog.coordinator",
                   "kafkalog.metadata", "kafkalog.source", "kafkalog.catalog", "kafkalog.config_describe")),
    # what users call: the API, the CLI and its tools, HTML reports, test helpers and the broker harness
    ("surface", ("kafkalog", "kafkalog.report_html", "kafkalog.tools", "kafkalog.testing")),
    ("spark", ("udfs",)),
    ("jobs", ("jobs",)),
)
LAYER_OF: Dict[str, Tuple[int, str]] = {package: (rank, name) for rank, (name, packages) in enumerate(LAYERS)
                                        for package in packages}

# Modules allowed over MAX_MODULE_LINES while a split of them is under way on another branch; empty
# on main. Nothing is added here to get a large module past the test.
BEING_SPLIT: set = set()


def product_modules(packages=PRODUCT_PACKAGES) -> list[Path]:
    return sorted(p for package in packages for p in (ROOT / package).rglob("*.py")
                  if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of this repository."""
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module an ``ImportFrom`` reads from (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(path: Path) -> list[str]:
    return private_imports_in(path.read_text(), module_name(path), path.name == "__init__.py",
                              str(path.relative_to(ROOT)))


def private_imports_in(source: str, me: str, is_package: bool, label: str) -> list[str]:
    """Every ``_private`` name module ``me`` takes from another module: ``from m import _x``, ``import
    m._x``, and ``alias._x`` on a module of this repository bound by an import."""
    tree = ast.parse(source, filename=label)
    found, module_aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = absolute(node, me, is_package)
            for alias in node.names:
                if is_private(alias.name) and origin != me:
                    found.append(f"{label}:{node.lineno}: from {origin} import {alias.name}")
                elif is_module(f"{origin}.{alias.name}"):
                    module_aliases[alias.asname or alias.name] = f"{origin}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if any(is_private(part) for part in parts) and is_module(alias.name):
                    found.append(f"{label}:{node.lineno}: import {alias.name}")
                if alias.asname and is_module(alias.name):
                    module_aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module_aliases
                and is_private(node.attr) and module_aliases[node.value.id] != me):
            found.append(f"{label}:{node.lineno}: {module_aliases[node.value.id]}.{node.attr}")
    return found


def import_time_statements(tree: ast.Module):
    """The statements a module runs when it is imported: its body, into if/try/with blocks and class
    bodies, but not into functions."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) or isinstance(child, ast.excepthandler):
                pending.append(child)


def spark_imports_at_load(path: Path) -> list[str]:
    return spark_imports_in(path.read_text(), str(path.relative_to(ROOT)))


def spark_imports_in(source: str, label: str) -> list[str]:
    tree = ast.parse(source, filename=label)
    found = []
    for node in import_time_statements(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            if name == "pyspark" or name.startswith("pyspark."):
                found.append(f"{label}:{node.lineno}: {name}")
    return found


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


# --- the import graph -------------------------------------------------------------------------------

class Import(NamedTuple):
    importer: str    # the module that imports
    target: str      # the module of this repository it reads from (a package's __init__ for a name of it)
    where: str       # file:line
    text: str        # the statement as written

    def shown(self) -> str:
        return f"{self.where}: {self.text}"


def repo_modules(packages=PRODUCT_PACKAGES) -> Dict[str, Tuple[str, bool, str]]:
    """module -> (source, is_package, label) for every module of ``packages``."""
    return {module_name(p): (p.read_text(), p.name == "__init__.py", str(p.relative_to(ROOT)))
            for p in product_modules(packages)}


def imports_among(modules: Dict[str, Tuple[str, bool, str]]) -> List[Import]:
    """Every import of one of ``modules`` by another, at any depth (in functions too: a function-level
    import is an arrow all the same). ``import a.b`` reads module ``a.b``; ``from a import b`` reads
    ``a`` — a package's __init__, so a submodule takes names from the module defining them, not from
    its package — and also ``a.b`` when that is a module."""
    def known(name: str) -> Optional[str]:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found = []
    for me, (source, is_package, label) in sorted(modules.items()):
        for node in ast.walk(ast.parse(source, filename=label)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                origin = absolute(node, me, is_package)
                names = [origin] + [f"{origin}.{a.name}" for a in node.names if f"{origin}.{a.name}" in modules]
            else:
                continue
            for target in dict.fromkeys(filter(None, map(known, names))):
                if target != me:
                    found.append(Import(me, target, f"{label}:{node.lineno}", ast.unparse(node)))
    return found


@lru_cache(maxsize=1)
def repo_imports() -> Tuple[Import, ...]:
    """The imports among the product modules, parsed once per test session."""
    return tuple(imports_among(repo_modules()))


def package_of(module: str) -> str:
    """The unit LAYERS places: ``kafkalog.<name>`` for kafkalog's modules, else the top-level package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "kafkalog" else parts[0]


def unplaced_packages(modules) -> List[str]:
    return sorted({package_of(m) for m in modules} - set(LAYER_OF))


def back_arrows(imports: List[Import]) -> List[str]:
    """Every import that runs up the layers, naming the importer, the line and both layers."""
    found = []
    for imp in imports:
        low, high = package_of(imp.importer), package_of(imp.target)
        if low in LAYER_OF and high in LAYER_OF and LAYER_OF[high][0] > LAYER_OF[low][0]:
            found.append(f"{imp.shown()}  -- {low} (layer {LAYER_OF[low][1]}) imports {high} "
                         f"(layer {LAYER_OF[high][1]}, above it)")
    return list(dict.fromkeys(found))          # one line per statement and package


def strongly_connected(graph: Dict[str, Dict[str, Import]]) -> List[List[str]]:
    """Tarjan's strongly connected components of more than one node, each sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def one_cycle(graph: Dict[str, Dict[str, Import]], component: List[str]) -> List[Import]:
    """A shortest cycle through the component's first node, as the imports that make it."""
    start, members = component[0], set(component)
    came: Dict[str, Tuple[str, Import]] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w, imp in sorted(graph.get(v, {}).items()):
                if w not in members or w in came:
                    continue
                came[w] = (v, imp)
                if w == start:
                    path, node = [], start
                    while True:
                        node, step = came[node]
                        path.append(step)
                        if node == start:
                            return path[::-1]
                following.append(w)
        frontier = following
    raise AssertionError(f"no cycle through {start}")   # a component of more than one node has one


def cycles(imports: List[Import], unit=lambda module: module) -> List[str]:
    """Every import cycle among the units (modules by default) ``imports`` connect, one shortest cycle
    of each strongly connected set shown import by import."""
    graph: Dict[str, Dict[str, Import]] = {}
    for imp in imports:
        a, b = unit(imp.importer), unit(imp.target)
        if a != b:
            graph.setdefault(a, {}).setdefault(b, imp)
    return [f"{' <-> '.join(component)}, e.g.\n      " + "\n      ".join(imp.shown() for imp in one_cycle(graph, component))
            for component in strongly_connected(graph)]


# --- the rules -------------------------------------------------------------------------------------

def test_no_private_name_is_imported_across_modules():
    found = [hit for path in product_modules() for hit in private_imports(path)]
    assert found == [], ("a helper two modules need is public in the lower one:\n  " + "\n  ".join(found))


def test_no_spark_import_when_a_kafkalog_module_loads():
    found = [hit for path in product_modules(("kafkalog",)) for hit in spark_imports_at_load(path)]
    assert found == [], "kafkalog/ never imports Spark at module level:\n  " + "\n  ".join(found)


def test_no_module_over_the_size_limit():
    over = {str(p.relative_to(ROOT)): line_count(p) for p in product_modules(SIZED_PACKAGES)
            if line_count(p) > MAX_MODULE_LINES}
    unexpected = {name: n for name, n in over.items() if name not in BEING_SPLIT}
    assert unexpected == {}, f"modules over {MAX_MODULE_LINES} lines: {unexpected}"


def test_the_allow_list_holds_only_modules_still_over_the_limit():
    stale = sorted(name for name in BEING_SPLIT
                   if not (ROOT / name).is_file() or line_count(ROOT / name) <= MAX_MODULE_LINES)
    assert stale == [], f"split already: remove from BEING_SPLIT: {stale}"


def test_every_package_has_a_layer():
    assert unplaced_packages(repo_modules()) == [], "place it in LAYERS where its imports say"


def test_no_import_runs_up_the_layers():
    found = back_arrows(list(repo_imports()))
    layers = " < ".join(name for name, _ in LAYERS)
    assert found == [], f"imports go down the layers ({layers}):\n  " + "\n  ".join(found)


def test_no_import_cycle_among_modules():
    found = cycles(list(repo_imports()))
    assert found == [], "import cycles (function-level imports count):\n  " + "\n  ".join(found)


def test_no_import_cycle_among_packages():
    found = cycles(list(repo_imports()), unit=package_of)
    assert found == [], "packages importing each other:\n  " + "\n  ".join(found)


# --- the checks catch what they are meant to ---------------------------------------------------------

@pytest.mark.parametrize("source, expected", [
    ("from kafkalog.format.records_accel import _varint\n", 1),
    ("from kafkalog.format import records_accel as ra\nra._varint(b'', 0)\n", 1),
    ("import kafkalog.format.records_accel as ra\nx = ra._varint\n", 1),
    ("from kafkalog.format.records_accel import varint_size\n", 0),
    ("from kafkalog import __version__\n", 0),
    ("from .records_accel import _varint\n", 1),                    # relative, from a sibling
])
def test_private_import_check_catches_each_spelling(source, expected):
    assert len(private_imports_in(source, "kafkalog.format.probe", False, "probe.py")) == expected


@pytest.mark.parametrize("source, expected", [
    ("import pyspark\n", 1),
    ("try:\n    from pyspark.sql import SparkSession\nexcept ImportError:\n    pass\n", 1),
    ("class A:\n    import pyspark.sql as s\n", 1),
    ("def f():\n    import pyspark\n", 0),
])
def test_spark_import_check_looks_only_at_load_time(source, expected):
    assert len(spark_imports_in(source, "probe.py")) == expected


def probe_modules(**sources: str) -> Dict[str, Tuple[str, bool, str]]:
    """Modules named with ``__`` for ``.`` (``kafkalog__index__probe``); a trailing ``__init`` makes a
    package."""
    out = {}
    for key, source in sources.items():
        parts = key.split("__")
        package = parts[-1] == "init"
        name = ".".join(parts[:-1] if package else parts)
        out[name] = (source, package, name.replace(".", "/") + ("/__init__.py" if package else ".py"))
    return out


@pytest.mark.parametrize("source, shown", [
    ("from kafkalog.log.local_log import LocalLog\n", "from kafkalog.log.local_log import LocalLog"),
    ("def f():\n    from kafkalog.log import local_log\n", "from kafkalog.log import local_log"),  # in a function
    ("import kafkalog.log.local_log as ll\n", "import kafkalog.log.local_log as ll"),
    ("from ..log import local_log\n", "from ..log import local_log"),                      # relative
])
def test_layer_check_names_importer_line_and_both_layers(source, shown):
    modules = probe_modules(kafkalog__index__probe=source, kafkalog__log__local_log="", kafkalog__log__init="")
    found = back_arrows(imports_among(modules))
    assert len(found) == 1
    assert found[0].startswith("kafkalog/index/probe.py:") and shown in found[0]
    assert "kafkalog.index (layer index) imports kafkalog.log (layer log" in found[0]


def test_layer_check_lets_imports_run_down_and_sideways():
    modules = probe_modules(kafkalog__log__probe="from kafkalog.index.builder import build_indexes\n"
                                                 "from kafkalog.config import LogConfig\n",
                            kafkalog__index__builder="", kafkalog__config="")
    assert back_arrows(imports_among(modules)) == []


def test_layer_check_catches_kafkalog_importing_spark_glue():
    modules = probe_modules(kafkalog__testing__init="def f():\n    from udfs.session import build_session\n",
                            udfs__session="")
    assert ["kafkalog.testing (layer surface) imports udfs (layer spark" in line
            for line in back_arrows(imports_among(modules))] == [True]


def test_an_unplaced_package_is_reported():
    assert unplaced_packages(probe_modules(kafkalog__newthing__init="")) == ["kafkalog.newthing"]


@pytest.mark.parametrize("a, b, cyclic", [
    ("from kafkalog.format.b import y\n", "from kafkalog.format.a import x\n", True),
    ("from kafkalog.format.b import y\n", "def f():\n    from kafkalog.format.a import x\n", True),  # hidden in a function
    ("from kafkalog.format import b\n", "import kafkalog.format.a\n", True),
    ("from kafkalog.format.b import y\n", "import os\n", False),
])
def test_cycle_check_shows_each_import_of_the_cycle(a, b, cyclic):
    found = cycles(imports_among(probe_modules(kafkalog__format__a=a, kafkalog__format__b=b,
                                               kafkalog__format__init="")))
    assert len(found) == cyclic
    if cyclic:
        assert "kafkalog.format.a <-> kafkalog.format.b" in found[0]
        assert "kafkalog/format/a.py:1: " in found[0] and "kafkalog/format/b.py:" in found[0]


def test_a_name_taken_from_a_package_is_an_arrow_to_its_init():
    init = "from kafkalog.cleaner.swap import swap_in\nfrom kafkalog.cleaner.results import CleanResult\n"
    through_init = probe_modules(kafkalog__cleaner__init=init, kafkalog__cleaner__results="",
                                 kafkalog__cleaner__swap="from kafkalog.cleaner import CleanResult\n")
    found = cycles(imports_among(through_init))
    assert len(found) == 1 and "kafkalog/cleaner/swap.py:1: from kafkalog.cleaner import CleanResult" in found[0]
    direct = probe_modules(kafkalog__cleaner__init=init, kafkalog__cleaner__results="",
                           kafkalog__cleaner__swap="from kafkalog.cleaner.results import CleanResult\n")
    assert cycles(imports_among(direct)) == []


def test_package_cycle_check_catches_two_packages_importing_each_other():
    modules = probe_modules(kafkalog__format__a="from kafkalog.checkpoint.c import z\n",
                            kafkalog__checkpoint__c="", kafkalog__checkpoint__d="from kafkalog.format.b import y\n",
                            kafkalog__format__b="")
    assert cycles(imports_among(modules)) == []             # no module cycle ...
    found = cycles(imports_among(modules), unit=package_of)  # ... but the two packages depend on each other
    assert len(found) == 1 and "kafkalog.checkpoint <-> kafkalog.format" in found[0]


def top_level_names(tree: ast.Module) -> set:
    """The names a module binds when it loads: assignments (tuples too), definitions and imports at its
    top level, including inside top-level ``if``/``try``/``with`` blocks (not inside functions or classes)."""
    names: set = set()

    def visit(statements) -> None:
        for n in statements:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(n.name)
            elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    names.update(t.id for t in ast.walk(target) if isinstance(t, ast.Name))
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in n.names)
            elif isinstance(n, (ast.If, ast.Try, ast.With, ast.For)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(n, block, []))
                for handler in getattr(n, "handlers", []):
                    visit(handler.body)
    visit(tree.body)
    return names


def unresolved_imports(modules: Dict[str, Tuple[str, bool, str]], roots=("kafkalog", "udfs", "jobs")) -> List[str]:
    """Every ``import kafkalog.x`` / ``from kafkalog.x import y`` (any depth) naming a module of this
    repository that does not exist, or a name that module does not define at its top level: what a move
    leaves behind in a file the move's sed did not see (an ImportError only when that code path runs)."""
    found = []
    for me, (source, is_package, label) in sorted(modules.items()):
        for node in ast.walk(ast.parse(source, filename=label)):
            if isinstance(node, ast.Import):
                wanted = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                wanted = [(absolute(node, me, is_package), alias.name) for alias in node.names]
            else:
                continue
            for module, name in wanted:
                if module.split(".")[0] not in roots:
                    continue
                if module not in modules:
                    found.append(f"{label}:{node.lineno}: {ast.unparse(node)}  -- no module {module}")
                elif name is not None and name != "*" and f"{module}.{name}" not in modules:
                    defined = top_level_names(ast.parse(modules[module][0]))
                    if name not in defined and "__getattr__" not in defined:
                        found.append(f"{label}:{node.lineno}: {ast.unparse(node)}  -- {module} defines no {name}")
    return found


def test_every_import_of_our_modules_resolves():
    found = unresolved_imports(repo_modules())
    assert found == [], "imports of modules or names that do not exist:\n  " + "\n  ".join(found)


def test_unresolved_import_check_catches_a_moved_module_and_a_moved_name():
    modules = {"kafkalog.fs.names": ("LIVE = 1\n", False, "fs/names.py"),
               "kafkalog.job": ("from kafkalog.log.names import LIVE\nfrom kafkalog.fs.names import GONE\n"
                                "from kafkalog.fs.names import LIVE\n", False, "job.py")}
    found = unresolved_imports(modules)
    assert len(found) == 2 and "no module kafkalog.log.names" in found[0] and "defines no GONE" in found[1]


def test_no_conftest_below_the_tests_root():
    """Tests import the root conftest's helpers (``from conftest import REAL_FIXTURES``); a second
    conftest.py further down takes the module name ``conftest`` and those imports fail at collection."""
    extra = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("conftest.py") if p.parent != ROOT / "tests")
    assert extra == [], f"put these fixtures in tests/conftest.py or a helper module it imports: {extra}"
