"""model.units: the one human-unit formatter."""

import io
import math

import pytest

from model.units import (
    fmt_binary_bytes,
    fmt_bytes,
    fmt_count,
    fmt_flop_rate,
    fmt_interval,
    fmt_percent,
    fmt_rate,
    fmt_si,
    fmt_signed_percent,
    fmt_time,
    text_for_encoding,
    text_for_stream,
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (4.5206e-3, "4.52 ms"),
        (7.4e-7, "740 ns"),
        (7.478e-4, "748 µs"),
        (1.048e-3, "1.05 ms"),
        (2e-6, "2.00 µs"),
        (3.5, "3.50 s"),
        (0.0, "0 ns"),
        (9.9996e-4, "1.00 ms"),  # rounding carries into the next unit
        (5e-10, "0.500 ns"),
    ],
)
def test_fmt_time_picks_unit_by_magnitude(seconds: float, text: str) -> None:
    assert fmt_time(seconds) == text


@pytest.mark.parametrize(
    ("formatted", "text"),
    [
        (fmt_bytes(1.5009849e10), "15.0 GB"),
        (fmt_bytes(512), "512 B"),
        (fmt_bytes(52_428_800), "52.4 MB"),
        (fmt_binary_bytes(80 * 2**30), "80.0 GiB"),
        (fmt_binary_bytes(50 * 2**20), "50.0 MiB"),
        (fmt_binary_bytes(141 * 2**30), "141 GiB"),
        (fmt_binary_bytes(512), "512 B"),
        (fmt_rate(3.35e12), "3.35 TB/s"),
        (fmt_rate(864e9), "864 GB/s"),
        (fmt_flop_rate(989.4e12), "989 TFLOP/s"),
        (fmt_si(2.25e15, "FLOP/s"), "2.25 PFLOP/s"),
        (fmt_count(8_030_261_248), "8,030,261,248"),
        (fmt_count(943.7), "944"),
        (fmt_percent(0.406), "41%"),
        (fmt_percent(0.0108, 1), "1.1%"),
        (fmt_percent(0.0001, None), "0.01%"),
        (fmt_signed_percent(0.12), "+12%"),
        (fmt_signed_percent(-0.07), "-7%"),
        (fmt_signed_percent(0.0), "0%"),
        (fmt_signed_percent(0.004), "0%"),  # rounds to zero: no sign
        (fmt_signed_percent(-0.004), "0%"),
        (fmt_signed_percent(0.0123, 1), "+1.2%"),
        (fmt_signed_percent(-0.0004, 1), "0.0%"),
        (fmt_interval(4.0e-6, 4.03e-6, fmt_time), "4.00 µs – 4.03 µs"),
        (fmt_interval(100, 2500, fmt_count), "100 – 2,500"),
        (fmt_interval(math.nan, 1e-6, fmt_time), "n/a"),
        (fmt_interval(1e-6, math.nan, fmt_time), "n/a"),
    ],
)
def test_formatters(formatted: str, text: str) -> None:
    assert formatted == text


def test_non_finite_values_do_not_raise() -> None:
    assert fmt_time(math.inf) == "inf s"
    assert fmt_count(math.inf) == "inf"


SAMPLE = "748 µs × 2, ½ of it; n → ∞ – done"


@pytest.mark.parametrize(
    ("encoding", "text"),
    [
        ("utf-8", SAMPLE),
        (None, SAMPLE),  # a stream without an encoding (io.StringIO) takes any str
        ("ascii", "748 us x 2, 1/2 of it; n -> inf - done"),
        ("ANSI_X3.4-1968", "748 us x 2, 1/2 of it; n -> inf - done"),  # what a C locale reports
        ("latin-1", "748 µs × 2, ½ of it; n -> inf - done"),  # only what latin-1 cannot encode changes
        ("no-such-codec", "748 us x 2, 1/2 of it; n -> inf - done"),
    ],
)
def test_text_for_encoding(encoding: str | None, text: str) -> None:
    assert text_for_encoding(SAMPLE, encoding) == text


def test_characters_without_a_spelling_are_escaped() -> None:
    assert text_for_encoding("GPU \u0124 \udcff", "ascii") == "GPU \\u0124 \\udcff"
    assert text_for_encoding("\udcff", "utf-8") == "\\udcff"  # a lone surrogate from an undecodable argv


def test_text_for_stream_uses_the_streams_encoding() -> None:
    ascii_stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    ascii_stream.write(text_for_stream(SAMPLE, ascii_stream))  # would raise UnicodeEncodeError otherwise
    ascii_stream.flush()
    assert ascii_stream.buffer.getvalue() == b"748 us x 2, 1/2 of it; n -> inf - done"  # type: ignore[attr-defined]
    assert text_for_stream(SAMPLE, io.StringIO()) == SAMPLE
