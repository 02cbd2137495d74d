"""Report rows as typed dataclasses, and their Arrow schema derived from the type: one place says
what a column is (its field's annotation), instead of a list of names plus side tables of which
names are strings, which are int32 and which are floats.

A field's Arrow type, from its annotation (``Optional[X]`` is X, nullable; every column is nullable):

    int -> int64     float -> float64     bool -> bool     str -> string
    List[X] -> list<X's type>     Annotated[X, <pyarrow.DataType>] -> that type (``Int32``,
    ``TimestampMs``)

A row type lists its fields in column order; ``row_fields`` gives the names, ``arrow_schema`` the
schema, ``as_row`` the plain dict a JSON report or ``RecordBatch.from_pylist`` takes.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Annotated, Any, Dict, List, Tuple, Union

import pyarrow as pa

Int32 = Annotated[int, pa.int32()]          # a column Kafka keeps as an int32 (a partition number, a count)
TimestampMs = Annotated[int, pa.timestamp("ms", tz="UTC")]     # epoch milliseconds, shown as a UTC time

_SCALARS = {int: pa.int64(), float: pa.float64(), bool: pa.bool_(), str: pa.string()}


def arrow_type(hint: Any) -> pa.DataType:
    """The Arrow type of one field annotation (see the module docstring); TypeError for one it does
    not map, naming it.

    :param hint: a resolved annotation (``typing.get_type_hints(..., include_extras=True)``).
    """
    origin = typing.get_origin(hint)
    if origin is Annotated:
        for extra in hint.__metadata__:
            if isinstance(extra, pa.DataType):
                return extra
        return arrow_type(typing.get_args(hint)[0])
    if origin is Union:
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) == 1:
            return arrow_type(rest[0])
    if origin in (list, List):
        return pa.list_(arrow_type(typing.get_args(hint)[0]))
    if hint in _SCALARS:
        return _SCALARS[hint]
    raise TypeError(f"no Arrow type for the annotation {hint!r}")


def _hints(row_type: type) -> Dict[str, Any]:
    return typing.get_type_hints(row_type, include_extras=True)


def row_fields(row_type: type) -> Tuple[str, ...]:
    """The column names of a row dataclass, in order.

    :param row_type: a dataclass.
    """
    return tuple(f.name for f in dataclasses.fields(row_type))


def arrow_schema(row_type: type) -> pa.Schema:
    """The Arrow schema of a row dataclass: one nullable column per field, in order.

    :param row_type: a dataclass whose annotations ``arrow_type`` maps.
    """
    hints = _hints(row_type)
    return pa.schema([pa.field(f.name, arrow_type(hints[f.name])) for f in dataclasses.fields(row_type)])


def as_row(row: Any) -> Dict[str, Any]:
    """The plain dict of a row (field name -> value, in column order): what a JSON report and
    ``pa.RecordBatch.from_pylist`` take. Shallow: list values are copied, nothing else converted.

    :param row: a row dataclass instance.
    """
    return {f.name: (list(v) if isinstance(v := getattr(row, f.name), list) else v) for f in dataclasses.fields(row)}


__all__ = ["Int32", "TimestampMs", "arrow_schema", "arrow_type", "as_row", "row_fields"]
