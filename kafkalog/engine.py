"""The one switch between kafkalog's two engines, honoured by every part that has both: the
decoder, the encoder, the cleaner's map pass (key map) and its recopy (``filterTo``).

* ``reference``: plain Python, readable, one object per record: the oracle the tests hold the
  compiled engine to.
* ``compiled``: numba kernels over Arrow/numpy buffers (the default). Where the C codec and CRC
  functions are found (``format/native.py``: liblz4, libzstd, crc32c through ctypes) the kernels
  call them; where not, the compiled engine takes its own slower paths. That is the compiled
  engine's detail, not a third engine.

Chosen per call by the keyword ``engine=`` (``"reference"`` | ``"compiled"``), or, when it is None,
by the environment variable ``KAFKALOG_ENGINE`` (same two names; unset or empty: ``compiled``).
Any other value is a :class:`UnknownEngineError` before anything is read or written — never
silently the default; the names of earlier releases (``python``, ``accel``, ``fast``) say which
name replaced them.
"""
from __future__ import annotations

import os
from typing import Optional

from kafkalog.errors import UsageError

REFERENCE = "reference"
COMPILED = "compiled"
ENGINES = (REFERENCE, COMPILED)
DEFAULT = COMPILED
ENV = "KAFKALOG_ENGINE"

# Names earlier releases used for the same two engines (the decoder's KAFKALOG_ENGINE values and the
# cleaner's module switch): refused, with the name that replaced them.
RENAMED = {"python": REFERENCE, "accel": COMPILED, "fast": COMPILED, "numba": COMPILED}


class UnknownEngineError(UsageError, ValueError):
    """An engine name that is neither ``reference`` nor ``compiled`` (keyword or environment)."""

    default_hint = f"unset, {ENV} means {DEFAULT!r}"


def resolve(engine: Optional[str] = None) -> str:
    """The engine to run: ``engine`` when given, else ``$KAFKALOG_ENGINE``, else ``compiled``.

    :param engine: ``"reference"``, ``"compiled"`` or None (take the environment).
    :raises UnknownEngineError: for any other value, naming where it came from and the valid names.
    """
    if engine is None:
        value = os.environ.get(ENV, "")
        if value == "":
            return DEFAULT
        return _check(value, f"environment variable {ENV}")
    return _check(engine, "engine=")


def _check(value: object, origin: str) -> str:
    if isinstance(value, str) and value in ENGINES:
        return value
    hint = f" (did you mean {RENAMED[value]!r}?)" if isinstance(value, str) and value in RENAMED else ""
    raise UnknownEngineError(f"unknown engine {value!r} in {origin}{hint}: "
                             f"the engines are {' and '.join(repr(e) for e in ENGINES)}")


def is_reference(engine: Optional[str] = None) -> bool:
    """Whether ``resolve(engine)`` is the reference engine (for the ``if``s that pick a path)."""
    return resolve(engine) == REFERENCE


__all__ = ["COMPILED", "DEFAULT", "ENGINES", "ENV", "REFERENCE", "UnknownEngineError", "is_reference", "resolve"]
