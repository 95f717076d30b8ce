"""The time budget of the small-call CPU cases (``test_numpy_calls.py``, ``test_numpy_ops.py``).

Cases whose one call takes nanoseconds to microseconds let pytest-benchmark calibrate how many calls a round
times, within the seconds the suite gives each case. While ``--benchmark-max-time`` / ``--benchmark-min-time``
keep pytest-benchmark's defaults, the case's own budget applies instead, so an explicit value on the command
line still wins.
"""

from __future__ import annotations

import pytest

#: pytest-benchmark's own defaults for --benchmark-max-time / --benchmark-min-time.
PB_DEFAULT_MAX_TIME_S = 1.0
PB_DEFAULT_MIN_TIME_S = 5e-6
#: Seconds per round at least: the timer's own cost and jitter stay out of the per-call figure, and the saved
#: raw samples (one per round) stay few: about 10,000 per full run, so 1,000 saved runs with raw samples
#: load, fit and report in seconds (README, "Scale").
ROUND_MIN_TIME_S = 2e-3


def timing_mark(config: pytest.Config, group: str, max_time_s: float) -> pytest.MarkDecorator:
    """Return the ``benchmark`` mark of one case: its table group, ``max_time_s`` seconds of rounds and
    rounds of at least ``ROUND_MIN_TIME_S``, except where the command line set ``--benchmark-max-time`` /
    ``--benchmark-min-time`` itself."""
    options: dict[str, object] = {"group": group}
    if float(config.getoption("benchmark_max_time")) == PB_DEFAULT_MAX_TIME_S:
        options["max_time"] = max_time_s
    if float(config.getoption("benchmark_min_time")) == PB_DEFAULT_MIN_TIME_S:
        options["min_time"] = ROUND_MIN_TIME_S
    return pytest.mark.benchmark(**options)
