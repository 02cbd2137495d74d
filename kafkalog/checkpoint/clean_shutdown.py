"""A log dir's ``.kafka_cleanshutdown`` marker: JSON ``{"version":0,"brokerEpoch":N}`` (brokers before
3.7 left it empty); its mere presence tells the broker to skip recovery."""
from __future__ import annotations

import json
import os
from typing import Optional, Union

from kafkalog.checkpoint.text import read_utf8
from kafkalog.errors import CheckpointError

PathLike = Union[str, os.PathLike]


def parse_clean_shutdown(text: str, *, path: Optional[PathLike] = None) -> dict:
    """The JSON object of a ``.kafka_cleanshutdown`` file; an empty file (brokers before 3.7) is {}."""
    if text.strip() == "":
        return {}
    try:
        content = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"not valid JSON: {exc.msg}", path=path,
                              position=len(text[:exc.pos].encode("utf-8"))) from None
    if not isinstance(content, dict):
        raise CheckpointError("expected a JSON object like {\"version\":0,\"brokerEpoch\":N}", path=path)
    return content


def read_clean_shutdown(path: PathLike) -> Optional[dict]:
    """Read ``.kafka_cleanshutdown``: its JSON object ({} for the empty pre-3.7 marker), or None when
    the file is absent (the broker will recover the unflushed segments)."""
    text = read_utf8(path)
    return None if text is None else parse_clean_shutdown(text, path=path)
