"""Writing a benchmark's table into its marked block of bench/README.md (added at the end, under a heading,
the first time)."""
from __future__ import annotations

from pathlib import Path


def update_block(path: Path, start: str, end: str, heading: str, body: str) -> None:
    """Replace the text between the ``start`` and ``end`` markers of ``path`` with ``body``."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    block = f"{start}\n{body.rstrip()}\n{end}"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n{heading}\n\n{block}\n"
    path.write_text(text)
