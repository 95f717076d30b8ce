"""model.laws: Amdahl, Gustafson and the fixed-overhead law."""

import math

import numpy as np
import pytest

from model.laws import (
    amdahl,
    amdahl_limit,
    fixed_overhead_time,
    gustafson,
    gustafson_limit,
    half_performance_length,
)

SERIAL_FRACTIONS = [0.0001, 0.001, 0.01, 0.1, 0.5]
PROCESSORS = [1, 8, 132, 16_896, 135_168]


def test_seed_figure_944() -> None:
    assert round(amdahl(0.001, 16_896)) == 944


@pytest.mark.parametrize("s", SERIAL_FRACTIONS)
def test_amdahl_bounded_by_one_over_s_and_rising_in_n(s: float) -> None:
    speedups = [amdahl(s, n) for n in PROCESSORS]
    assert all(speedup <= 1 / s for speedup in speedups)
    assert speedups == sorted(speedups)
    assert speedups[0] == pytest.approx(1.0)


@pytest.mark.parametrize("s", SERIAL_FRACTIONS)
@pytest.mark.parametrize("n", PROCESSORS)
def test_gustafson_at_least_amdahl(s: float, n: int) -> None:
    assert gustafson(s, n) >= amdahl(s, n) - 1e-12


@pytest.mark.parametrize(
    ("s", "amdahl_at_infinity", "gustafson_at_infinity"),
    [(0.0, math.inf, math.inf), (0.001, 1000.0, math.inf), (0.5, 2.0, math.inf), (1.0, 1.0, 1.0)],
)
def test_limits_as_n_grows(s: float, amdahl_at_infinity: float, gustafson_at_infinity: float) -> None:
    assert amdahl_limit(s) == pytest.approx(amdahl_at_infinity)
    assert gustafson_limit(s) == gustafson_at_infinity
    # The limits are what the laws approach: at s = 1 both stay at 1 for every n.
    assert amdahl(s, 1e12) == pytest.approx(min(amdahl_at_infinity, 1e12), rel=1e-3)
    if s == 1:
        assert gustafson(s, 1e12) == 1


@pytest.mark.parametrize(("s", "n"), [(-0.1, 8), (1.5, 8), (float("nan"), 8)])
def test_bad_serial_fraction_names_s(s: float, n: int) -> None:
    for law in (amdahl, gustafson):
        with pytest.raises(ValueError, match="s "):
            law(s, n)
    for limit in (amdahl_limit, gustafson_limit):
        with pytest.raises(ValueError, match="s "):
            limit(s)


@pytest.mark.parametrize("n", [0, 0.5, -3])
def test_bad_processor_count_names_n(n: float) -> None:
    for law in (amdahl, gustafson):
        with pytest.raises(ValueError, match="n "):
            law(0.01, n)


def test_fixed_overhead_law_vectorised_and_half_performance_length() -> None:
    t0_s, r_inf_per_s = 1e-6, 4e9
    n = np.array([0, 1000, 4000])
    np.testing.assert_allclose(fixed_overhead_time(n, t0_s, r_inf_per_s), [1e-6, 1.25e-6, 2e-6])
    n_half = half_performance_length(t0_s, r_inf_per_s)
    assert n_half == pytest.approx(4000)
    # At n½ the achieved rate is half the asymptotic one.
    assert n_half / fixed_overhead_time(n_half, t0_s, r_inf_per_s) == pytest.approx(r_inf_per_s / 2)


@pytest.mark.parametrize(("t0_s", "r_inf_per_s", "field"), [(-1.0, 1e9, "t0_s"), (1e-6, 0.0, "r_inf_per_s")])
def test_fixed_overhead_law_rejects_bad_parameters(t0_s: float, r_inf_per_s: float, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        fixed_overhead_time(10, t0_s, r_inf_per_s)
    with pytest.raises(ValueError, match=field):
        half_performance_length(t0_s, r_inf_per_s)
