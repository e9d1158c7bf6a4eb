"""The frontend messages of PostgreSQL's extended query protocol that the pipeline sends, encoded,
and each statement's text and bound values in the order those messages carry them.

Parse, Bind, Describe and Close, byte for byte as the protocol documents them, so that
``pipeline.py`` can put several statements and one Sync in one write. A statement's Parse never
changes, so it is encoded once per text (and name).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final

import pg8000.native  # type: ignore[import-untyped]
from pg8000.core import BIND, NULL_BYTE, PARSE  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

_UNNAMED: Final = b"\x00"
_CLOSE: Final = b"C"
_DESCRIBE: Final = b"D"
_STATEMENT: Final = b"S"
_PORTAL: Final = b"P"
#: No format codes: every parameter (in Bind's first list) and every result column (its last) is text.
_NO_FORMAT_CODES: Final = (0).to_bytes(2, "big")
_NULL_LENGTH: Final = (-1).to_bytes(4, "big", signed=True)


def message(code: bytes, data: bytes | bytearray) -> bytes:
    return code + (len(data) + 4).to_bytes(4, "big") + bytes(data)


def parse(statement: str, encoding: str, parameter_types: Sequence[int] = (), name: bytes = b"") -> bytes:
    types = b"".join(oid.to_bytes(4, "big") for oid in parameter_types)
    data = name + _UNNAMED + statement.encode(encoding) + NULL_BYTE + len(parameter_types).to_bytes(2, "big") + types
    return message(PARSE, data)


@lru_cache(maxsize=512)
def parse_and_describe(statement: str, encoding: str) -> bytes:
    """A statement's Parse and Describe never change: encoded once, not on every call."""
    text, parameter_types = typed_parameters(statement)
    return parse(text, encoding, parameter_types) + message(_DESCRIBE, _STATEMENT + _UNNAMED)


@lru_cache(maxsize=512)
def parse_named(statement: str, encoding: str, name: bytes) -> bytes:
    """A statement's Parse under ``name``, with the same parameter types as the unnamed one."""
    text, parameter_types = typed_parameters(statement)
    return parse(text, encoding, parameter_types, name)


#: The types a statement's ``CAST($n AS type)`` may give in Parse, by name: their OIDs are fixed.
_TYPE_OIDS: Final = {
    "text": 25,
    "bigint": 20,
    "integer": 23,
    "boolean": 16,
    "timestamptz": 1184,
    "text[]": 1009,
    "bigint[]": 1016,
}
_CAST_PARAMETER: Final = re.compile(r"CAST\(\$(\d+) AS (text|bigint|integer|boolean|timestamptz)(\[\])?\)")
_PARAMETER: Final = re.compile(r"\$(\d+)(?!\d)")


def typed_parameters(statement: str) -> tuple[str, list[int]]:
    """``statement`` without the casts that only type a parameter, and the types to send in Parse instead.

    The SQL spells each parameter's type as ``CAST(:name AS type)`` (pg8000 sends none), so the
    server infers it and evaluates the cast on every call; given the type in Parse, it does
    neither: about 15 µs less for an append's statement. A parameter is typed only when every
    use of it is such a cast to one type; any other stays as written (type 0: inferred).
    """
    casts: dict[int, set[str]] = {}
    cast_uses: Counter[int] = Counter()
    for match in _CAST_PARAMETER.finditer(statement):
        number = int(match[1])
        casts.setdefault(number, set()).add(match[2] + (match[3] or ""))
        cast_uses[number] += 1
    uses = Counter(int(match[1]) for match in _PARAMETER.finditer(statement))
    types = {
        number: kinds.pop() for number, kinds in casts.items() if len(kinds) == 1 and cast_uses[number] == uses[number]
    }
    if not types:
        return statement, []
    stripped = _CAST_PARAMETER.sub(lambda match: f"${match[1]}" if int(match[1]) in types else match[0], statement)
    return stripped, [_TYPE_OIDS[types[number]] if number in types else 0 for number in range(1, max(uses) + 1)]


def bind(values: Sequence[bytes | None], statement_name: bytes = b"") -> bytes:
    """Bind the unnamed portal to ``statement_name`` with ``values`` in text format, results in text."""
    parts = [_UNNAMED, statement_name, _UNNAMED, _NO_FORMAT_CODES, len(values).to_bytes(2, "big")]
    append = parts.append
    for value in values:
        if value is None:
            append(_NULL_LENGTH)
        else:
            append(len(value).to_bytes(4, "big"))
            append(value)
    append(_NO_FORMAT_CODES)
    data = b"".join(parts)
    code: bytes = BIND
    return code + (len(data) + 4).to_bytes(4, "big") + data


def close_statement(name: bytes) -> bytes:
    """A Close of the named statement: harmless if it does not exist, needed if a failed round trip made it."""
    return message(_CLOSE, _STATEMENT + name + _UNNAMED)


def describe_portal() -> bytes:
    """Describe of the unnamed portal: its RowDescription (or NoData), which a named statement's call needs."""
    return _DESCRIBE_PORTAL


_DESCRIBE_PORTAL: Final = message(_DESCRIBE, _PORTAL + _UNNAMED)


@lru_cache(maxsize=512)
def compiled(sql: str) -> tuple[str, Callable[[Mapping[str, Any]], tuple[Any, ...]]]:
    """pg8000's translation of ``:name`` placeholders to ``$n``, cached per statement text.

    Connection.run redoes it character by character on every call, which costs more than
    a local round trip for our longer statements.
    """
    statement, make_values = pg8000.native.to_statement(sql)
    names = _placeholder_names(make_values)
    if names is None:
        return statement, make_values
    pick = itemgetter(*names)
    single = len(names) == 1

    def values_by_name(params: Mapping[str, Any]) -> tuple[Any, ...]:
        """The bound values in ``$n`` order, picked in one C call; pg8000's loop says which name is missing."""
        try:
            picked = pick(params)
        except KeyError:
            pass  # pg8000's function raises its own error, outside this handler
        else:
            return (picked,) if single else picked
        return make_values(params)  # type: ignore[no-any-return]

    return statement, values_by_name


class _Recorder(dict[str, Any]):
    """A mapping that notes which names are read from it, in order (and answers None for each)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[object] = []

    def __getitem__(self, name: object) -> None:
        self.names.append(name)


def _placeholder_names(make_values: Callable[[Mapping[str, Any]], tuple[Any, ...]]) -> list[str] | None:
    """The names pg8000's values function reads, in ``$n`` order; None if it reads any other way."""
    recorder = _Recorder()
    try:
        make_values(recorder)
    except Exception:  # anything unexpected: keep pg8000's function
        return None
    names = recorder.names
    if not names or not all(isinstance(name, str) for name in names):
        return None
    return names  # type: ignore[return-value]
