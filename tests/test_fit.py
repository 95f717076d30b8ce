"""analysis.fit recovers known parameters from synthetic data, and its intervals cover them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.fit import (
    CI_NONE,
    CI_POINTS,
    CI_RUNS,
    CI_RUNS_SAMPLES,
    CI_SAMPLES,
    Interval,
    _bootstrap_median,
    _redrawn_medians,
    bootstrap,
    fit_fixed_overhead,
    fit_per_element,
    weighted_least_squares,
)
from model.laws import fixed_overhead_time, half_performance_length

T0_S = 4.5e-7  # a numpy call's fixed cost, s
S_PER_ELEMENT = 2.5e-10  # in-cache cost per float32 element, s
SIZES = np.array([4.0**k for k in range(10)])  # 1 … 262,144 elements


def _law(n: np.ndarray) -> np.ndarray:
    return np.asarray(fixed_overhead_time(n, T0_S, 1 / S_PER_ELEMENT))


def _noisy_points(seed: int, sigma: float = 0.05) -> np.ndarray:
    """Per-call seconds of the law with multiplicative (relative) noise, as timings have."""
    return _law(SIZES) * np.exp(np.random.default_rng(seed).normal(0, sigma, SIZES.size))


def _noisy_samples(seed: int, count: int = 101, sigma: float = 0.05) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [t * np.exp(rng.normal(0, sigma, count)) for t in _law(SIZES)]


@pytest.mark.parametrize(
    ("n_points", "level", "t_quantile"),
    [(3, 0.95, 12.7062047), (4, 0.95, 4.30265273), (12, 0.95, 2.22813885), (7, 0.90, 2.01504837),
     (1002, 0.95, 1.96233908)],
)  # fmt: skip
def test_weighted_least_squares_intervals_use_student_t_from_tables(
    n_points: int, level: float, t_quantile: float
) -> None:
    """Half-width = t quantile (printed tables, dof = points − 2) × standard error: the quantile the
    hand-written incomplete beta gave before scipy.stats.t, to 1e-7."""
    x = np.arange(1.0, n_points + 1)
    y = 2.0 + 0.5 * x + np.where(np.arange(n_points) % 2, 0.1, -0.1)
    fit = weighted_least_squares(np.column_stack([np.ones_like(x), x]), y, np.ones_like(x), level)
    for interval, coef, stderr in zip(fit.ci, fit.coef, fit.stderr, strict=True):
        assert (interval.high - coef) / stderr == pytest.approx(t_quantile, rel=1e-7)
        assert (coef - interval.low) / stderr == pytest.approx(t_quantile, rel=1e-7)


def test_weighted_least_squares_recovers_an_exact_line() -> None:
    x = np.array([1.0, 2.0, 3.0, 5.0, 8.0])
    fit = weighted_least_squares(np.column_stack([np.ones_like(x), x]), 2.0 + 0.5 * x, np.ones_like(x))
    assert fit.coef == pytest.approx((2.0, 0.5), rel=1e-12)
    assert fit.dof == 3
    assert fit.n_points == 5
    assert fit.weighted_rss == pytest.approx(0, abs=1e-20)


def test_weighted_least_squares_weights_change_the_fit() -> None:
    """Three collinear points and one outlier: a tiny weight on the outlier lets the line through the rest."""
    x = np.array([0.0, 1.0, 2.0, 3.0])
    y = np.array([1.0, 2.0, 3.0, 10.0])
    design = np.column_stack([np.ones_like(x), x])
    even = weighted_least_squares(design, y, np.ones_like(x))
    down = weighted_least_squares(design, y, np.array([1.0, 1.0, 1.0, 1e-12]))
    assert down.coef == pytest.approx((1.0, 1.0), rel=1e-6)
    assert even.coef[1] > 2


def test_weighted_least_squares_intervals_cover_the_truth() -> None:
    """95 % t-intervals cover the true coefficients in about 95 % of noisy data sets."""
    x = np.linspace(0, 10, 8)
    design = np.column_stack([np.ones_like(x), x])
    covered = np.zeros(2)
    trials = 400
    for seed in range(trials):
        y = 1.0 + 0.3 * x + np.random.default_rng(seed).normal(0, 0.2, x.size)
        fit = weighted_least_squares(design, y, np.ones_like(x))
        covered += [fit.ci[0].contains(1.0), fit.ci[1].contains(0.3)]
    assert np.all((covered / trials >= 0.92) & (covered / trials <= 0.98))


@pytest.mark.parametrize(
    ("design", "y", "weights", "message"),
    [
        ([[1, 1], [1, 2]], [1, 2], [1, 1], "more points than coefficients"),
        ([[1, 1], [1, 1], [1, 1]], [1, 2, 3], [1, 1, 1], "rank deficient"),
        ([[1, 1], [1, 2], [1, 3]], [1, 2, 3], [1, 0, 1], "weights finite and > 0"),
        ([1, 2, 3], [1, 2, 3], [1, 1, 1], "design must be"),
    ],
)
def test_weighted_least_squares_rejects_bad_input(design, y, weights, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        weighted_least_squares(design, y, weights)


def test_fixed_overhead_fit_recovers_t0_and_rate_from_noisy_points() -> None:
    fit = fit_fixed_overhead(SIZES, _noisy_points(seed=1))
    assert fit.t0_s == pytest.approx(T0_S, rel=0.05)
    assert fit.s_per_element == pytest.approx(S_PER_ELEMENT, rel=0.05)
    assert fit.r_inf_per_s == pytest.approx(1 / fit.s_per_element)
    assert fit.n_half == pytest.approx(half_performance_length(fit.t0_s, fit.r_inf_per_s))
    assert fit.t0_ci.contains(T0_S)
    assert fit.s_per_element_ci.contains(S_PER_ELEMENT)
    assert fit.r_inf_ci.contains(1 / S_PER_ELEMENT)
    assert fit.n_half_ci.contains(T0_S / S_PER_ELEMENT)
    assert fit.ci_method == CI_POINTS
    assert fit.sizes == tuple(int(n) for n in SIZES)
    assert fit.n_points == SIZES.size


def test_fixed_overhead_fit_is_exact_without_noise() -> None:
    fit = fit_fixed_overhead(SIZES, _law(SIZES))
    assert fit.t0_s == pytest.approx(T0_S, rel=1e-9)
    assert fit.s_per_element == pytest.approx(S_PER_ELEMENT, rel=1e-9)


def test_fixed_overhead_fit_uses_raw_samples_when_given() -> None:
    samples = _noisy_samples(seed=2)
    medians = np.array([np.median(s) for s in samples])
    fit = fit_fixed_overhead(SIZES, medians, samples)
    assert fit.ci_method == CI_SAMPLES
    assert fit.t0_ci.contains(T0_S)
    assert fit.s_per_element_ci.contains(S_PER_ELEMENT)
    assert fit.t0_ci.high - fit.t0_ci.low < 0.1 * T0_S  # 101 samples a point pin t0 to a few %


@pytest.mark.parametrize("with_samples", [False, True])
def test_fixed_overhead_intervals_cover_the_truth(with_samples: bool) -> None:
    """Over many synthetic runs the 95 % bootstrap intervals hold t0 and the per-element cost mostly.

    Resampling ten points under-covers a little (about 0.87 here); adding the raw samples is conservative.
    """
    trials = 120
    covered = np.zeros(2)
    for seed in range(trials):
        if with_samples:
            samples = _noisy_samples(seed)
            fit = fit_fixed_overhead(SIZES, [np.median(s) for s in samples], samples, n_boot=400, seed=seed)
        else:
            fit = fit_fixed_overhead(SIZES, _noisy_points(seed), n_boot=400, seed=seed)
        covered += [fit.t0_ci.contains(T0_S), fit.s_per_element_ci.contains(S_PER_ELEMENT)]
    assert np.all(covered / trials >= (0.95 if with_samples else 0.8))


def test_fixed_overhead_fit_is_deterministic() -> None:
    points = _noisy_points(seed=3)
    assert fit_fixed_overhead(SIZES, points, seed=7) == fit_fixed_overhead(SIZES, points, seed=7)


@pytest.mark.parametrize(
    ("n", "t", "message"),
    [
        ([16, 16, 16], [1e-6, 1.1e-6, 0.9e-6], "two different sizes"),
        ([1, 10, 100], [1e-6, -1e-6, 1e-6], "t .seconds per call. must be finite and > 0"),
        ([1, 10], [1e-6, 2e-6, 3e-6], "of one length"),
        ([1, 1000, 100_000], [5e-5, 2e-5, 1e-6], "do not separate the fixed cost"),
    ],
)
def test_fixed_overhead_fit_rejects_bad_input(n, t, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_fixed_overhead(n, t)


def test_fixed_overhead_fit_rejects_samples_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match="one array per point"):
        fit_fixed_overhead(SIZES, _law(SIZES), [np.ones(3)])


def test_fixed_overhead_fit_rejects_an_unknown_statistic() -> None:
    with pytest.raises(ValueError, match="statistic must be one of median, min"):
        fit_fixed_overhead(SIZES, _law(SIZES), statistic="mean")


def test_fixed_overhead_fit_on_minima() -> None:
    """Timings disturbed only upwards (other work on the machine): the minima keep the law."""
    rng = np.random.default_rng(8)
    samples = [t * (1 + rng.exponential(0.02, 301) + 0.8 * (rng.random(301) < 0.4)) for t in _law(SIZES)]
    minima = [s.min() for s in samples]
    fit = fit_fixed_overhead(SIZES, minima, samples, statistic="min")
    assert fit.ci_method == CI_POINTS  # a fastest round is never redrawn from its rounds
    assert fit.t0_s == pytest.approx(T0_S, rel=0.02)
    assert fit.s_per_element == pytest.approx(S_PER_ELEMENT, rel=0.02)


def _pooled_runs(count: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], np.ndarray]:
    """``count`` runs of the law at ``SIZES``, each slower by its own factor (a run's machine state: the
    spread between runs is what a fastest round cannot see), 11 rounds a point disturbed upwards only:
    (sizes, each point's fastest round, its rounds, its run)."""
    rng = np.random.default_rng(seed)
    factors = np.exp(rng.normal(0, 0.03, count))
    sizes = np.tile(SIZES, count)
    runs = np.repeat(np.arange(count), SIZES.size)
    samples = [
        _law(size) * factors[run] * (1 + rng.exponential(0.05, 11))
        for size, run in zip(sizes, runs, strict=True)
    ]
    return sizes, np.array([s.min() for s in samples]), samples, runs


@pytest.mark.parametrize("count", [1, 3, 10, 100, 1000])
def test_intervals_of_fastest_rounds_hold_their_estimate_at_any_number_of_pooled_runs(count: int) -> None:
    """Issue 29: redrawing each point's fastest round from its rounds put the interval above the estimate
    once ≈ 50 runs were pooled (a resample's minimum is never below the sample's). The runs are resampled
    instead, and every interval holds its estimate, at 1 to 1,000 runs."""
    sizes, minima, samples, runs = _pooled_runs(count, seed=count)
    law = fit_fixed_overhead(sizes, minima, samples, statistic="min", runs=runs, n_boot=400)
    assert law.ci_method == (CI_RUNS if count > 1 else CI_POINTS)
    assert law.t0_ci.contains(law.t0_s)
    assert law.s_per_element_ci.contains(law.s_per_element)
    assert law.n_half_ci.contains(law.n_half)
    dram = fit_per_element(sizes, minima, law.t0_s, samples, statistic="min", runs=runs, n_boot=400)
    assert dram.ci.contains(dram.s_per_element)


def test_bootstrap_over_runs_is_as_wide_as_the_spread_between_runs() -> None:
    """Ten runs 3 % apart (log-normal): t0's interval over runs is about ±2 × 3 %/√10 ≈ ±1.9 % — not the
    ±0.1 % the scatter of the points about the law alone would give, nor shifted off the estimate."""
    sizes, minima, samples, runs = _pooled_runs(10, seed=3)
    by_runs = fit_fixed_overhead(sizes, minima, samples, statistic="min", runs=runs)
    half_width = (by_runs.t0_ci.high - by_runs.t0_ci.low) / 2 / by_runs.t0_s
    assert 0.008 < half_width < 0.04
    by_points = fit_fixed_overhead(sizes, minima, samples, statistic="min")
    assert (by_points.t0_ci.high - by_points.t0_ci.low) < (by_runs.t0_ci.high - by_runs.t0_ci.low)


def test_bootstrap_over_runs_redraws_medians_from_their_rounds() -> None:
    sizes, _, samples, runs = _pooled_runs(3, seed=5)
    medians = [np.median(s) for s in samples]
    fit = fit_fixed_overhead(sizes, medians, samples, statistic="median", runs=runs, n_boot=300)
    assert fit.ci_method == CI_RUNS_SAMPLES
    assert fit.t0_ci.contains(fit.t0_s)


def test_runs_must_name_one_run_a_point() -> None:
    with pytest.raises(ValueError, match="one run per point"):
        fit_fixed_overhead(SIZES, _law(SIZES), runs=[0, 1])


def test_per_element_fit_with_known_t0() -> None:
    n = np.array([2.0**24, 2.0**26])
    rng = np.random.default_rng(4)
    samples = [T0_S + 9e-10 * size * np.exp(rng.normal(0, 0.03, 21)) for size in n]
    fit = fit_per_element(n, [np.median(s) for s in samples], T0_S, samples)
    assert fit.s_per_element == pytest.approx(9e-10, rel=0.03)
    assert fit.ci.contains(9e-10)
    assert fit.ci_method == CI_SAMPLES
    assert fit.sizes == (2**24, 2**26)


def test_per_element_fit_of_one_point_without_samples_has_no_interval() -> None:
    fit = fit_per_element([2**26], [T0_S + 9e-10 * 2**26], T0_S)
    assert fit.s_per_element == pytest.approx(9e-10)
    assert fit.ci_method == CI_NONE
    assert math.isnan(fit.ci.low)
    assert math.isnan(fit.ci.high)


@pytest.mark.parametrize("count", [11, 10])
def test_bootstrap_median_follows_the_brute_force_bootstrap(count: int) -> None:
    """The order-statistic shortcut draws from the distribution of resampling and taking the statistic."""
    values = np.random.default_rng(5).lognormal(0, 1, count)
    rng = np.random.default_rng(6)
    draws = 40_000
    resamples = values[rng.integers(0, count, size=(draws, count))]
    brute = np.median(resamples, axis=1)
    quick = _bootstrap_median(values, draws, np.random.default_rng(7))
    # Kolmogorov–Smirnov distance of the two samples: ~0.01 by chance at 40,000 draws each; a wrong order
    # statistic (e.g. the lower middle value for even counts) moves it far past 0.1.
    grid = np.union1d(brute, quick)
    distance = np.abs(
        np.searchsorted(np.sort(brute), grid, "right") - np.searchsorted(np.sort(quick), grid, "right")
    )
    assert distance.max() / draws < 0.02


def test_interval_contains_its_bounds() -> None:
    interval = Interval(1.0, 2.0, 0.95)
    assert interval.contains(1.0)
    assert interval.contains(2.0)
    assert not interval.contains(2.0001)


def test_redrawn_medians_batch_points_without_changing_the_draws() -> None:
    """Batching the points draws the same numbers from the generator as drawing them point by point, so the
    saved runs' intervals are those of the point-by-point code (odd and even counts mixed)."""
    rng = np.random.default_rng(11)
    samples = [rng.lognormal(0, 0.1, count) for count in (7, 8, 9, 9, 10, 31, 4, 5)]
    batched = _redrawn_medians(samples, 500, np.random.default_rng(3))
    one_by_one = np.random.default_rng(3)
    expected = np.column_stack([_bootstrap_median(s, 500, one_by_one) for s in samples])
    assert np.array_equal(batched, expected)


def test_bootstrap_over_points_leaves_out_resamples_the_law_cannot_fit() -> None:
    """Three points over two sizes: about (1/3)³ + (2/3)³ = 1/3 of the resamples hold one size only. They
    are left out (scipy.stats.bootstrap cannot redraw them), never NaN in the replicates."""
    sizes = np.array([1.0, 1000.0, 1000.0])
    seconds = np.array([1e-6, 2e-6, 2.2e-6])

    def coefficients(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        slope = (y.max(axis=1) - y.min(axis=1)) / (x.max(axis=1) - x.min(axis=1))
        return slope[:, None]

    replicates, method = bootstrap(sizes, seconds, None, "median", coefficients, 3000, 0, min_sizes=2)
    assert method == CI_POINTS
    assert replicates.shape[1] == 1
    assert np.isfinite(replicates).all()
    assert replicates.shape[0] == pytest.approx(3000 * 2 / 3, rel=0.05)
