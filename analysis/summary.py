"""The terminal summary printed below pytest-benchmark's table: each family's section, from one frame.

The same functions serve ``pytest benchmarks`` (the in-memory run) and ``python -m analysis`` (saved runs),
so the summary and the report of a saved run agree.
"""

from __future__ import annotations

import pandas as pd

from analysis import decode, host, launch


def summary_lines(frame: pd.DataFrame) -> list[str]:
    """Return the summary lines of every family measured in ``frame``; none when nothing was measured."""
    if frame.empty:
        return []
    lines: list[str] = []
    for section in _sections():
        lines.extend(section(frame))
    return lines


def _sections():
    """The families' section functions, each ``(frame) -> list[str]`` and empty when its cases are absent."""
    return (host.summary_section, launch.summary_section, decode.summary_section)
