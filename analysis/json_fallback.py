"""The part of orjson's interface ``analysis.load`` uses, on the standard library's ``json``: what reads saved
runs where orjson is not installed (the GPU machine's image has no orjson and no package registry).

Why a stand-in rather than a second code path in ``analysis.load``: every place that parses or digests a
run stays as it is, and its error handling too. ``loads`` refuses what orjson refuses in the ways that
matter here (text that is not strict UTF-8, a byte-order mark, anything ``json`` cannot parse) by raising
``JSONDecodeError``, so ``analysis.load`` goes on to its ``json`` reading, which words every problem: the
same messages with orjson or without. Integers are read as orjson reads them: one outside 64 bits (signed
or unsigned) as a float, one too large even for a float refused. What orjson refuses and ``analysis.load``'s
``json`` reading then accepts (NaN, a float literal that overflows to infinity) is accepted here at once:
the same document either way. ``dumps`` writes the text
``analysis.load`` writes itself where orjson refuses to encode (its digests are compared within one process,
never across machines, so orjson's and ``json``'s texts need not agree). Only slower: about 6× for parsing
(README, "Dependencies").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: orjson's option flag for sorted object keys (the one option ``analysis.load`` passes).
OPT_SORT_KEYS = 1 << 5
#: The integers orjson reads as integers: a signed or unsigned 64-bit one (beyond, a float).
INT_RANGE = (-(2**63), 2**64 - 1)


class JSONDecodeError(ValueError):
    """What ``loads`` raises for text it will not parse (orjson's is a ``ValueError`` too)."""


class JSONEncodeError(TypeError):
    """orjson's encoding error (a ``TypeError``); ``dumps`` raises ``json``'s own errors instead."""


def loads(text: bytes | bytearray | memoryview | str) -> Any:
    """``text`` (strict UTF-8 bytes, or str) parsed by ``json``; ``JSONDecodeError`` where it cannot be."""
    try:
        if not isinstance(text, str):
            text = bytes(text).decode("utf-8")
        return json.loads(text, parse_int=_integer)
    except ValueError as error:  # JSON errors, UTF-8 errors, a number of more digits than Python converts
        raise JSONDecodeError(str(error)) from error


def _integer(text: str) -> int | float:
    """An integer literal as orjson reads it: an int within ``INT_RANGE``, else a float; ``ValueError`` where
    that float overflows (orjson refuses those)."""
    value = int(text)
    if INT_RANGE[0] <= value <= INT_RANGE[1]:
        return value
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"number is infinity when parsed as double: {text[:40]}") from None


def dumps(obj: Any, default: Callable[[Any], Any] | None = None, option: int = 0) -> bytes:
    """``obj`` as JSON bytes (keys sorted with ``OPT_SORT_KEYS``), as ``analysis.load`` writes it with
    ``json``."""
    text = json.dumps(obj, default=default, sort_keys=bool(option & OPT_SORT_KEYS), allow_nan=True)
    return text.encode("utf-8", "surrogatepass")
