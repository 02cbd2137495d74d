"""A log dir's ``meta.properties``: which cluster and node the dir belongs to.

Layout: a Java ``.properties`` file (ISO-8859-1, ``#``/``!`` comments, ``key=value``, ``key: value``
or ``key value``; ``kafkalog.checkpoint.properties``) with ``version`` (0 or 1), ``cluster.id``, ``broker.id``
(version 0) or ``node.id`` (version 1) and, since 3.7, ``directory.id``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional, Union

from kafkalog.checkpoint.text import parse_java_int, parse_kafka_uuid
from kafkalog.errors import CheckpointError
from kafkalog.java_types import INT32_MAX, INT32_MIN
from kafkalog.checkpoint.properties import parse_properties
from kafkalog.fs import filesystem

META_PROPERTIES_VERSIONS = (0, 1)

PathLike = Union[str, os.PathLike]


# --- data structures ---------------------------------------------------------------------------

@dataclass(frozen=True)
class MetaProperties:
    """``meta.properties``. ``node_id`` is ``broker.id`` for version 0 and ``node.id`` for version 1
    (as Kafka's ``MetaProperties.Builder`` reads them); ``raw`` holds every property as read."""

    version: int
    cluster_id: Optional[str]
    node_id: Optional[int]
    directory_id: Optional[str]
    raw: dict = field(default_factory=dict)


# --- parsing and reading ---------------------------------------------------------------------

def parse_meta_properties(text: str, *, path: Optional[PathLike] = None) -> MetaProperties:
    """Parse ``meta.properties`` and check it the way Kafka's MetaProperties.Builder does."""
    raw = parse_properties(text, path=path)

    def integer(key: str) -> int:
        value = parse_java_int(raw[key], INT32_MIN, INT32_MAX)
        if value is None:
            raise CheckpointError(f"{key}={raw[key]!r} is not an int32", path=path)
        return value

    version_text = raw.get("version", "0")
    version = parse_java_int(version_text, INT32_MIN, INT32_MAX)
    if version not in META_PROPERTIES_VERSIONS:
        raise CheckpointError(f"unknown meta.properties version {version_text!r}", path=path)
    node_id: Optional[int] = None
    if version == 0:
        if "broker.id" in raw:
            node_id = integer("broker.id")
    else:
        if "node.id" not in raw:
            raise CheckpointError("node.id was not found (required by version 1)", path=path)
        node_id = integer("node.id")
    cluster_id = raw.get("cluster.id")
    if version == 1 and cluster_id is None:
        raise CheckpointError("cluster.id was not found (required by version 1)", path=path)
    directory_id = raw.get("directory.id")
    if directory_id is not None:
        try:
            parse_kafka_uuid(directory_id)
        except ValueError as exc:
            raise CheckpointError(f"directory.id: {exc}", path=path) from None
    return MetaProperties(version, cluster_id, node_id, directory_id, raw)


def read_meta_properties(path: PathLike) -> Optional[MetaProperties]:
    """Read ``meta.properties`` (ISO-8859-1, as Properties.load(InputStream)); None when absent."""
    try:
        data = filesystem.read_bytes(path)
    except FileNotFoundError:
        return None
    return parse_meta_properties(data.decode("latin-1"), path=path)
