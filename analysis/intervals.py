"""How the confidence interval of a quantity that must be positive (a time, a rate, a count) is printed.

A bootstrap or t interval can reach below zero when the points cannot pin a quantity down (a per-element
cost drowned in the fixed cost of small calls). A negative time is impossible, so such a bound is never
printed as a number: the interval says what it is, a fit that cannot bound the quantity from below.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from model.units import fmt_interval

#: What replaces a lower bound ≤ 0 of a positive quantity.
NO_LOWER_BOUND = "the fit cannot bound it from below"
NO_UPPER_BOUND = "the fit cannot bound it from above"


def positive_interval(low: float, high: float, fmt: Callable[[float], str]) -> str:
    """The interval [low, high] of a positive quantity, bounds formatted with ``fmt``: "a – b"; "≤ b (the fit
    cannot bound it from below)" when ``low`` ≤ 0; "≥ a (... from above)" when ``high`` is infinite; "n/a"
    when a bound is NaN, or when neither bound is a positive finite number."""
    if math.isnan(low) or math.isnan(high):
        return "n/a"
    bounded_below = low > 0
    bounded_above = 0 < high < math.inf
    if bounded_below and bounded_above:
        return fmt_interval(low, high, fmt)
    if bounded_above:
        return f"≤ {fmt(high)} ({NO_LOWER_BOUND})"
    if bounded_below and high == math.inf:
        return f"≥ {fmt(low)} ({NO_UPPER_BOUND})"
    return "n/a (the fit cannot bound it)"
