"""Human-readable units for printing: the project's one formatter module.

Everything inside launchbench is SI (seconds, bytes, FLOPs, counts); these pure functions turn such values
into text with a unit chosen by magnitude, only at the edge (CLI output, reports, plot labels).
"""

from __future__ import annotations

import codecs
import math
from collections.abc import Callable
from typing import TextIO

# (symbol, scale) pairs, largest first: a value is shown in the largest unit that is not bigger than it.
_TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
_DECIMAL_PREFIXES = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0))
_BINARY_PREFIXES = (
    ("Pi", 2.0**50),
    ("Ti", 2.0**40),
    ("Gi", 2.0**30),
    ("Mi", 2.0**20),
    ("Ki", 2.0**10),
    ("", 1.0),
)
_SIGNIFICANT_DIGITS = 3


def _significant(value: float, digits: int) -> str:
    """Format ``value`` with ``digits`` significant digits in fixed-point notation (never an exponent)."""
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    rounded = round(value, decimals)  # 0.99996 rounds up to 1.00: one decimal fewer keeps 3 digits
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(rounded))))
    return f"{value:.{decimals}f}"


def _scaled(value: float, units: tuple[tuple[str, float], ...], digits: int) -> tuple[str, str]:
    """Return (number text, unit symbol) for ``value`` in the largest unit not bigger than it.

    If rounding carries the number to 1000 (999.7 µs → "1000 µs") the next larger unit is used instead.
    """
    magnitude = abs(value)
    index = next((i for i, (_, scale) in enumerate(units) if magnitude >= scale), len(units) - 1)
    text = _significant(value / units[index][1], digits)
    if index > 0 and abs(float(text)) >= 1000:
        index -= 1
        text = _significant(value / units[index][1], digits)
    return text, units[index][0]


def fmt_si(value: float, unit: str, digits: int = _SIGNIFICANT_DIGITS) -> str:
    """Format an SI ``value`` with a decimal prefix (k, M, G, T, P) before ``unit``:
    ``fmt_si(3.35e12, "B/s")`` gives "3.35 TB/s". Values below 1 are shown without a prefix."""
    if not math.isfinite(value):
        return f"{value} {unit}"
    text, prefix = _scaled(value, _DECIMAL_PREFIXES, digits)
    return f"{text} {prefix}{unit}"


def fmt_time(seconds: float, digits: int = _SIGNIFICANT_DIGITS) -> str:
    """Format a duration in seconds as ns, µs, ms or s chosen by magnitude:
    4.52e-3 → "4.52 ms", 7.4e-7 → "740 ns"."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    text, symbol = _scaled(seconds, _TIME_UNITS, digits)
    return f"{text} {symbol}"


def fmt_bytes(n_bytes: float, digits: int = _SIGNIFICANT_DIGITS) -> str:
    """Format a byte count with decimal prefixes (1 GB = 1e9 B, as datasheets count): 1.5e10 → "15.0 GB"."""
    return fmt_si(n_bytes, "B", digits)


def fmt_binary_bytes(n_bytes: float, digits: int = _SIGNIFICANT_DIGITS) -> str:
    """Format a byte count with binary prefixes (1 GiB = 2**30 B), as DRAM capacities are built:
    80 * 2**30 → "80.0 GiB"."""
    if not math.isfinite(n_bytes):
        return f"{n_bytes} B"
    text, prefix = _scaled(n_bytes, _BINARY_PREFIXES, digits)
    return f"{text} {prefix}B"


def fmt_rate(bytes_per_s: float, digits: int = _SIGNIFICANT_DIGITS) -> str:
    """Format a bandwidth in bytes per second with decimal prefixes: 3.35e12 → "3.35 TB/s"."""
    return fmt_si(bytes_per_s, "B/s", digits)


def fmt_flop_rate(flops_per_s: float, digits: int = _SIGNIFICANT_DIGITS) -> str:
    """Format a compute rate in FLOP per second with decimal prefixes: 9.894e14 → "989 TFLOP/s"."""
    return fmt_si(flops_per_s, "FLOP/s", digits)


def fmt_count(count: float) -> str:
    """Format a count (kernels, parameters, elements) rounded to a whole number with thousands separators:
    8030261248 → "8,030,261,248"."""
    if not math.isfinite(count):
        return str(count)
    return f"{count:,.0f}"


def fmt_percent(fraction: float, decimals: int | None = 0) -> str:
    """Format a fraction (0–1) as a percentage: 0.406 → "41%"; with ``decimals=None`` as many digits as the
    value needs (up to 6 significant): 0.0001 → "0.01%"."""
    if decimals is None:
        return f"{fraction * 100:g}%"
    return f"{fraction * 100:.{decimals}f}%"


def fmt_signed_percent(fraction: float, decimals: int = 0) -> str:
    """Format a relative error (a fraction) as a signed percentage: 0.12 → "+12%", -0.07 → "-7%"; a value
    that rounds to zero has no sign ("0%", "0.0%")."""
    text = fmt_percent(fraction, decimals)
    if text.lstrip("-") == fmt_percent(0.0, decimals):
        return fmt_percent(0.0, decimals)
    return "+" + text if fraction > 0 else text


def fmt_interval(low: float, high: float, fmt: Callable[[float], str]) -> str:
    """Format the bounds of a confidence interval with ``fmt`` (e.g. ``fmt_time``): "4.00 µs – 4.03 µs";
    "n/a" when a bound is NaN (no interval could be computed)."""
    if math.isnan(low) or math.isnan(high):
        return "n/a"
    return f"{fmt(low)} – {fmt(high)}"


# ASCII spellings of the non-ASCII characters launchbench prints, for a stream that cannot encode them
# (PYTHONIOENCODING=ascii, a C locale without UTF-8 mode, a latin-1 terminal).
_ASCII_SPELLINGS = {
    "\u00b5": "u",  # µ, micro sign
    "\u03bc": "u",  # μ, Greek mu
    "\u00d7": "x",  # ×
    "\u00bd": "1/2",  # ½
    "\u221e": "inf",  # ∞
    "\u2013": "-",  # – en dash
    "\u2014": "-",  # — em dash
    "\u2212": "-",  # − minus sign
    "\u2192": "->",  # →
    "\u2248": "~",  # ≈
    "\u2264": "<=",  # ≤
    "\u2265": ">=",  # ≥
    "\u00b7": "*",  # ·
    "\u2026": "...",  # …
    "\u00b1": "+/-",  # ±
}


def text_for_encoding(text: str, encoding: str | None) -> str:
    """Return ``text`` as it can be written in ``encoding``: unchanged when every character encodes; otherwise
    each character that does not encode is replaced by its ASCII spelling (µ → u, × → x, ½ → 1/2, ∞ → inf,
    – → -, → → ->) or, lacking one, by a backslash escape ("\\u0124").

    ``encoding=None`` (a stream that takes any str, such as io.StringIO) leaves the text unchanged; an
    encoding name Python does not know counts as ASCII. The one place where launchbench's CLIs adapt their
    output to the terminal: every line they print passes through here (``text_for_stream``)."""
    if encoding is None:
        return text
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "ascii"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return "".join(_encodable(char, encoding) for char in text)
    return text


def _encodable(char: str, encoding: str) -> str:
    try:
        char.encode(encoding)
    except UnicodeEncodeError:
        spelling = _ASCII_SPELLINGS.get(char)
        if spelling is not None:
            return spelling
        return char.encode("ascii", "backslashreplace").decode("ascii")
    return char


def text_for_stream(text: str, stream: TextIO) -> str:
    """Return ``text`` as ``stream`` can write it, by the stream's own encoding (``text_for_encoding``)."""
    return text_for_encoding(text, getattr(stream, "encoding", None))
