"""Scaling laws of the serial part: Amdahl (fixed problem), Gustafson (problem grows with n) and the
fixed-overhead (Hockney) law of one call, t(n) = t0 + n / r∞.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def _check_serial_fraction(s: float) -> None:
    if not (math.isfinite(s) and 0 <= s <= 1):
        raise ValueError(f"s (serial fraction) must be in [0, 1], got {s!r}")


def _check_processors(n: float) -> None:
    if not (math.isfinite(n) and n >= 1):
        raise ValueError(f"n (processor count) must be >= 1, got {n!r}")


def _check_overhead_law(t0_s: float, r_inf_per_s: float) -> None:
    if not (math.isfinite(t0_s) and t0_s >= 0):
        raise ValueError(f"t0_s must be a finite number >= 0, got {t0_s!r}")
    if not (math.isfinite(r_inf_per_s) and r_inf_per_s > 0):
        raise ValueError(f"r_inf_per_s must be a finite number > 0, got {r_inf_per_s!r}")


def amdahl(s: float, n: float) -> float:
    """Speedup on ``n`` processors of a fixed problem whose fraction ``s`` is serial: 1 / (s + (1 − s)/n).

    It never exceeds 1/s however large n grows.
    """
    _check_serial_fraction(s)
    _check_processors(n)
    parallel_time = (1 - s) / n
    return 1 / (s + parallel_time)


def gustafson(s: float, n: float) -> float:
    """Scaled speedup on ``n`` processors when the parallel part grows with n and the serial time stays put:
    s + (1 − s)·n, where ``s`` is the serial fraction of the run on n processors."""
    _check_serial_fraction(s)
    _check_processors(n)
    return s + (1 - s) * n


def amdahl_limit(s: float) -> float:
    """Amdahl's speedup as n → ∞: 1/s, and ``math.inf`` at s = 0 (no serial part, no limit). 1/s overflows to
    inf for a subnormal s (below about 2.2e-308); callers that print it should keep s normal."""
    _check_serial_fraction(s)
    return math.inf if s == 0 else 1 / s


def gustafson_limit(s: float) -> float:
    """Gustafson's scaled speedup as n → ∞: unbounded (``math.inf``) for s < 1; at s = 1 every n gives 1, so
    the limit is 1."""
    _check_serial_fraction(s)
    return 1.0 if s == 1 else math.inf


def fixed_overhead_time(n: npt.ArrayLike, t0_s: float, r_inf_per_s: float) -> float | np.ndarray:
    """Seconds one call takes on ``n`` elements (scalar or array, same shape out): t0 + n / r∞.

    ``t0_s`` is the fixed per-call overhead in seconds, ``r_inf_per_s`` the asymptotic rate in elements per
    second.
    """
    _check_overhead_law(t0_s, r_inf_per_s)
    elements = np.asarray(n, dtype=float)
    if np.any(elements < 0):
        raise ValueError("n (elements) must be >= 0")
    return t0_s + elements / r_inf_per_s


def half_performance_length(t0_s: float, r_inf_per_s: float) -> float:
    """n½ = t0 · r∞: the elements per call at which half the time is fixed overhead (rate r∞/2)."""
    _check_overhead_law(t0_s, r_inf_per_s)
    return t0_s * r_inf_per_s
