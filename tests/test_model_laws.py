"""model.laws: Amdahl, Gustafson and the fixed-overhead law."""

import numpy as np
import pytest

from model.laws import amdahl, fixed_overhead_time, gustafson, half_performance_length

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


@pytest.mark.parametrize(("s", "n"), [(-0.1, 8), (1.5, 8), (float("nan"), 8)])
def test_bad_serial_fraction_names_s(s: float, n: int) -> None:
    for law in (amdahl, gustafson):
        with pytest.raises(ValueError, match="s "):
            law(s, n)


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
