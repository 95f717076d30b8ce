"""The time budget of the small-call CPU cases (``test_numpy_calls.py``, ``test_numpy_ops.py``).

Cases whose one call takes nanoseconds to microseconds let pytest-benchmark calibrate how many calls a round
times, within the seconds the suite gives each case. While ``--benchmark-max-time`` / ``--benchmark-min-time``
keep pytest-benchmark's defaults, the case's own budget applies instead, so an explicit value on the command
line still wins.

Under ``--quick`` pytest-benchmark also calibrates finer (``QUICK_CALIBRATION_PRECISION``). Its default
search multiplies the calls per round by 10 until a round passes half of ``ROUND_MIN_TIME_S`` and keeps a
round that passes it whole, so quick rounds came out at 2–10 ms (the median case's fastest round 3.4 to
3.7 ms) where 2 ms suffice. Finer, it scales the calls per round to ``ROUND_MIN_TIME_S`` as soon as a round
passes a twentieth of it: the same rule (rounds calibrated to at least 2 ms, the same minimum of 5 rounds),
rounds near 2 ms, and a quick run's small-call cases take about half the time. The full run keeps
pytest-benchmark's calibration.
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
#: pytest-benchmark's default --benchmark-calibration-precision, and the one a quick run calibrates with:
#: pytest-benchmark estimates the calls per round from the first round longer than 5 / precision × the
#: round's minimum time (1 ms by default, 0.1 ms quick).
PB_DEFAULT_CALIBRATION_PRECISION = 10
QUICK_CALIBRATION_PRECISION = 100


def timing_mark(config: pytest.Config, group: str, max_time_s: float) -> pytest.MarkDecorator:
    """Return the ``benchmark`` mark of one case: its table group, ``max_time_s`` seconds of rounds and
    rounds of at least ``ROUND_MIN_TIME_S``, calibrated finely under ``--quick``, except where the command
    line set ``--benchmark-max-time`` / ``--benchmark-min-time`` / ``--benchmark-calibration-precision``
    itself."""
    options: dict[str, object] = {"group": group}
    if float(config.getoption("benchmark_max_time")) == PB_DEFAULT_MAX_TIME_S:
        options["max_time"] = max_time_s
    if float(config.getoption("benchmark_min_time")) == PB_DEFAULT_MIN_TIME_S:
        options["min_time"] = ROUND_MIN_TIME_S
    if (
        config.getoption("quick")
        and config.getoption("benchmark_calibration_precision") == PB_DEFAULT_CALIBRATION_PRECISION
    ):
        options["calibration_precision"] = QUICK_CALIBRATION_PRECISION
    return pytest.mark.benchmark(**options)
