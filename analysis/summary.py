"""The terminal summary printed below pytest-benchmark's table: each family's section, from one frame.

The same functions serve ``pytest benchmarks`` (the in-memory run) and ``python -m analysis`` (saved runs),
so the summary and the report of a saved run agree.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from analysis import decode, host, launch

#: The families' section functions, each ``(frame) -> lines`` and empty when its cases are absent.
SECTIONS: tuple[Callable[[pd.DataFrame], list[str]], ...] = (
    host.summary_section,
    launch.summary_section,
    decode.summary_section,
)


def summary_lines(frame: pd.DataFrame) -> list[str]:
    """Return the summary lines of every family measured in ``frame``; none when nothing was measured."""
    if frame.empty:
        return []
    return [line for section in SECTIONS for line in section(frame)]
