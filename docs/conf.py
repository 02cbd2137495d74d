"""Sphinx configuration of kafkalog's documentation site (docs/*.md, written in MyST Markdown).

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (what .ci/run does). ``-W`` makes
every warning an error: a link to a page or heading that does not exist, an image that is missing, a page
left out of the table of contents, a docstring the API reference cannot render. External links are never
fetched (CI has no network); tests/test_docs.py checks their syntax and lists them.

Why Sphinx + MyST-parser: Sphinx is the documentation generator of the Python data ecosystem (pyarrow,
pyspark, pandas, numba), released several times a year; MyST lets the pages stay plain Markdown that GitHub
renders too; autodoc builds the API reference from the docstrings of ``kafkalog.__all__``. MkDocs was the
alternative: its last release (1.6.1) is from August 2024.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # import kafkalog from this checkout

project = "kafkalog"
author = "the kafkalog developers"
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3             # [text](page.md#a-heading) links are checked against the page's headings
myst_enable_extensions = ["colon_fence"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
html_theme = "alabaster"             # ships with Sphinx: no theme dependency
html_title = "kafkalog"
html_static_path: list = []


def _write_api_members(app) -> None:
    """The API page's entries, one per name of ``kafkalog.__all__``, each documented from the object its name
    resolves to (``getattr``, so names a lazy module ``__getattr__`` provides are found too, which autodoc's
    own member listing — ``dir(module)`` — would miss). Written under _build/, included by api.md."""
    import inspect

    import kafkalog

    lines = []
    for name in kafkalog.__all__:
        obj = getattr(kafkalog, name)                 # an __all__ name that does not resolve fails the build
        if inspect.isclass(obj):
            kind = "autoexception" if issubclass(obj, BaseException) else "autoclass"
            lines += [f".. {kind}:: kafkalog.{name}", "   :members:", ""]
        elif callable(obj):
            lines += [f".. autofunction:: kafkalog.{name}", ""]
        else:
            lines += [f".. autodata:: kafkalog.{name}", "   :annotation:", ""]
    out = Path(app.srcdir) / "_build" / "api" / "members.rst"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)


def setup(app):
    app.connect("builder-inited", _write_api_members)
