"""Fitting primitives every family reuses: weighted least squares, the fixed-overhead law, bootstrap CIs.

The law itself, t(n) = t0 + n/r∞ and n½ = t0·r∞, lives in ``model.laws``; this module only estimates its
parameters from measured points. Timings spread over five or more decades of n, so the fits weight each
point by 1/t² (a relative-error fit): a 400 ns call counts as much as a 100 ms one, and t0 is set by the
small sizes, where it is visible, not drowned by the absolute scatter of the large ones.

Confidence intervals come from a seeded (deterministic) bootstrap. Where the points come from two or more
runs, it resamples the runs (a cluster bootstrap: the run, one process, is the unit of evidence, and rounds
inside a run are not independent; Kalibera & Jones, ISMM 2013), else the points. A point's median is also
redrawn from its raw rounds when the run saved them; a point's *fastest* round never is: the bootstrap of a
sample minimum is inconsistent (Bickel & Freedman, Ann. Statist. 9, 1981, §6) — a resample's minimum is
never below the sample's, so such intervals start at their own estimate and, pooled over runs, leave it. The
uncertainty of a fastest-round figure comes from the runs, or, in one run, from the scatter of its points
about the law. All results are frozen dataclasses in SI units.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from model.laws import half_performance_length

DEFAULT_LEVEL = 0.95
DEFAULT_N_BOOT = 1000
DEFAULT_SEED = 0

CI_SAMPLES = "bootstrap over points and their raw samples"
CI_RUNS = "bootstrap over runs"
CI_RUNS_SAMPLES = "bootstrap over runs and their raw samples"

#: The per-point statistics ``t`` may hold; only a median is redrawn from raw samples (module docstring).
STATISTICS = ("median", "min")
CI_POINTS = "bootstrap over points"
CI_NONE = "none (one point, no raw samples)"
#: The method of a fit asked for its estimate alone (``intervals=False``): its intervals are NaN.
CI_NOT_ASKED = "none (estimate only)"


@dataclass(frozen=True)
class Interval:
    """A confidence interval [low, high] at ``level`` (a fraction, 0.95 for 95 %), in the estimate's unit."""

    low: float
    high: float
    level: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in [low, high]."""
        return self.low <= value <= self.high


@dataclass(frozen=True)
class LinearFit:
    """Weighted least-squares fit of y ≈ X·coef.

    ``stderr`` is scaled by the residual variance (the weights give relative, not absolute, precision), and
    ``ci`` (at ``level``) uses Student's t with ``dof`` = points − coefficients degrees of freedom.
    """

    coef: tuple[float, ...]
    stderr: tuple[float, ...]
    dof: int
    n_points: int
    weighted_rss: float
    level: float

    @functools.cached_property
    def ci(self) -> tuple[Interval, ...]:
        """Each coefficient's interval, coef ± t·stderr. Computed when first read: the fixed-overhead law's
        intervals are bootstrapped, so most fits never read these, and Student's t (``scipy.special``)
        costs 0.3–0.7 s to import, a twentieth of a quick benchmark session."""
        import scipy.special  # the inverse of Student's t as ``scipy.stats.t.ppf`` computes it (the same
        # function), without scipy.stats' 0.8 s import

        q = float(scipy.special.stdtrit(self.dof, 0.5 + self.level / 2))
        return tuple(
            Interval(c - q * s, c + q * s, self.level) for c, s in zip(self.coef, self.stderr, strict=True)
        )


@dataclass(frozen=True)
class OverheadFit:
    """The fixed-overhead law t(n) = t0 + n/r∞ fitted to per-call times.

    ``t0_s``: fixed cost per call, s. ``s_per_element``: 1/r∞, s per element. ``r_inf_per_s``: elements per
    second as n → ∞. ``n_half``: elements at which half of a call is fixed cost (``model.laws``).
    Intervals at ``level`` by ``ci_method``; ``n_outside_law`` counts bootstrap replicates with t0 < 0 or
    r∞ ≤ 0, left out of the n½ interval only. ``sizes``: the distinct n the fit used.
    """

    t0_s: float
    s_per_element: float
    r_inf_per_s: float
    n_half: float
    t0_ci: Interval
    s_per_element_ci: Interval
    r_inf_ci: Interval
    n_half_ci: Interval
    sizes: tuple[int, ...]
    n_points: int
    ci_method: str
    n_boot: int
    n_outside_law: int
    linear: LinearFit


@dataclass(frozen=True)
class PerElementFit:
    """The per-element cost s of t(n) = t0 + s·n with t0 known (from a fit at small sizes), s per element.

    Used where the fixed cost is a negligible share of each call (arrays served from DRAM). ``ci`` at
    ``level`` by ``ci_method`` (NaN bounds when one point without raw samples leaves nothing to resample);
    t0's own uncertainty is not propagated.
    """

    s_per_element: float
    ci: Interval
    t0_s: float
    sizes: tuple[int, ...]
    n_points: int
    ci_method: str


def weighted_least_squares(
    design: npt.ArrayLike, y: npt.ArrayLike, weights: npt.ArrayLike, level: float = DEFAULT_LEVEL
) -> LinearFit:
    """Fit y ≈ design·coef minimising Σ wᵢ (yᵢ − (design·coef)ᵢ)²; return coefficients with t-based CIs.

    ``design``: (points, coefficients); ``y``, ``weights`` (> 0): (points,). Needs more points than
    coefficients and a design of full rank; raises ``ValueError`` saying what is wrong otherwise.
    """
    x = np.asarray(design, dtype=float)
    y = np.asarray(y, dtype=float)
    w = np.asarray(weights, dtype=float)
    if x.ndim != 2 or y.shape != (x.shape[0],) or w.shape != y.shape:
        raise ValueError(
            f"design must be (points, coefficients) and y, weights (points,); got {x.shape}, "
            f"{y.shape}, {w.shape}"
        )
    n_points, n_coef = x.shape
    if n_points <= n_coef:
        raise ValueError(
            f"need more points than coefficients for a fit with errors; got {n_points} ≤ {n_coef}"
        )
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(np.isfinite(w)) and np.all(w > 0)):
        raise ValueError("design and y must be finite and weights finite and > 0")
    _check_level(level)
    root_w = np.sqrt(w)
    a = x * root_w[:, None]
    scale = np.linalg.norm(
        a, axis=0
    )  # column scaling keeps n ~ 1e8 beside a constant column well conditioned
    if np.any(scale == 0):
        raise ValueError("design has an all-zero column")
    a_scaled = a / scale
    if np.linalg.matrix_rank(a_scaled) < n_coef:
        raise ValueError("design is rank deficient (e.g. every point has the same size)")
    coef_scaled, *_ = np.linalg.lstsq(a_scaled, y * root_w, rcond=None)
    coef = coef_scaled / scale
    residual = y * root_w - a @ coef
    rss = float(residual @ residual)
    dof = n_points - n_coef
    cov = np.linalg.inv(a_scaled.T @ a_scaled) / np.outer(scale, scale) * (rss / dof)
    stderr = np.sqrt(np.diag(cov))
    return LinearFit(
        coef=tuple(float(c) for c in coef),
        stderr=tuple(float(s) for s in stderr),
        dof=dof,
        n_points=n_points,
        weighted_rss=rss,
        level=level,
    )


def fit_fixed_overhead(
    n: npt.ArrayLike,
    t: npt.ArrayLike,
    samples: Sequence[npt.ArrayLike] | None = None,
    *,
    statistic: str = "median",
    runs: npt.ArrayLike | None = None,
    level: float = DEFAULT_LEVEL,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    intervals: bool = True,
) -> OverheadFit:
    """Fit t(n) = t0 + n/r∞ to per-call seconds ``t`` at ``n`` elements, weighting by 1/t² (relative error).

    ``samples``: each point's raw per-call samples in seconds, of which ``t`` holds the ``statistic``
    ("median" or "min"); when given, the CIs redraw a median from them (never a minimum: module docstring).
    ``runs``: the run each point came from (any labels); with two or more, the CIs resample runs, not
    points. Needs ≥ 3 points over
    ≥ 2 sizes; raises ``ValueError`` when the fitted t0 < 0 or r∞ ≤ 0 (the sizes cannot separate fixed from
    per-element cost). ``intervals``: False gives the same estimates with NaN intervals (``CI_NOT_ASKED``,
    no replicate drawn): for a caller that reads the estimates only (a verdict's per-run figures, one fit
    per run of a fleet, where the bootstrap was a fifth of the fits' time).
    """
    sizes, seconds = _points(n, t, samples)
    if np.unique(sizes).size < 2:
        raise ValueError("the fixed-overhead law needs at least two different sizes")
    design = np.column_stack([np.ones_like(sizes), sizes])
    linear = weighted_least_squares(design, seconds, 1 / seconds**2, level)
    t0_s, s_per_element = linear.coef
    if t0_s < 0 or s_per_element <= 0:
        raise ValueError(
            f"fit gives t0 = {t0_s:.3g} s and {s_per_element:.3g} s/element: the sizes do not separate the "
            "fixed cost from the per-element cost (need small sizes and sizes well past n½)"
        )
    if not intervals:
        replicates, method, n_boot = np.empty((0, 2)), CI_NOT_ASKED, 0
    else:
        replicates, method = bootstrap(
            sizes,
            seconds,
            samples,
            statistic,
            _overhead_coefficients,
            n_boot,
            seed,
            min_sizes=2,
            runs=runs,
            sums=_overhead_sums,
        )
    t0_b, slope_b = replicates[:, 0], replicates[:, 1]
    t0_ci = _percentile_interval(t0_b, level)
    slope_ci = _percentile_interval(slope_b, level)
    inside = (t0_b >= 0) & (slope_b > 0)
    n_half_b = _half_performance_lengths(t0_b[inside], slope_b[inside])
    r_inf_per_s = 1 / s_per_element
    return OverheadFit(
        t0_s=float(t0_s),
        s_per_element=float(s_per_element),
        r_inf_per_s=float(r_inf_per_s),
        n_half=half_performance_length(float(t0_s), float(r_inf_per_s)),
        t0_ci=t0_ci,
        s_per_element_ci=slope_ci,
        r_inf_ci=Interval(1 / slope_ci.high, 1 / slope_ci.low if slope_ci.low > 0 else math.inf, level)
        if intervals
        else slope_ci,
        n_half_ci=_percentile_interval(n_half_b, level),
        sizes=tuple(int(s) for s in np.unique(sizes)),
        n_points=int(sizes.size),
        ci_method=method,
        n_boot=n_boot,
        n_outside_law=int(np.count_nonzero(~inside)),
        linear=linear,
    )


def fit_per_element(
    n: npt.ArrayLike,
    t: npt.ArrayLike,
    t0_s: float,
    samples: Sequence[npt.ArrayLike] | None = None,
    *,
    statistic: str = "median",
    runs: npt.ArrayLike | None = None,
    level: float = DEFAULT_LEVEL,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    intervals: bool = True,
) -> PerElementFit:
    """Fit s in t(n) = t0 + s·n with ``t0_s`` fixed, weighting by 1/t²: s = Σ w n (t − t0) / Σ w n².

    ``n``: elements per call; ``t``: seconds per call (the ``statistic`` of ``samples`` when given);
    ``runs`` as ``fit_fixed_overhead``'s. One point is enough for the estimate; its CI then needs a median's
    raw samples or two runs; ``intervals`` as ``fit_fixed_overhead``'s.
    """
    sizes, seconds = _points(n, t, samples)
    _check_level(level)
    if not (math.isfinite(t0_s) and t0_s >= 0):
        raise ValueError(f"t0_s must be finite and >= 0, got {t0_s!r}")

    def slope(x: np.ndarray, y: np.ndarray, count: np.ndarray | None = None) -> np.ndarray:
        w = 1 / y**2 if count is None else count / y**2
        return (np.sum(w * x * (y - t0_s), axis=1) / np.sum(w * x**2, axis=1))[:, None]

    def slope_sums(x: np.ndarray, y: np.ndarray) -> PointSums:
        w = 1 / y**2
        return PointSums(
            np.column_stack([w * x * (y - t0_s), w * x**2]), lambda sums: sums[:, :1] / sums[:, 1:]
        )

    estimate = float(slope(sizes[None, :], seconds[None, :])[0, 0])
    redrawable = samples is not None and statistic == "median"
    if not intervals:
        ci, method = Interval(math.nan, math.nan, level), CI_NOT_ASKED
    elif sizes.size < 2 and not redrawable:
        ci, method = Interval(math.nan, math.nan, level), CI_NONE
    else:
        replicates, method = bootstrap(
            sizes, seconds, samples, statistic, slope, n_boot, seed, min_sizes=1, runs=runs, sums=slope_sums
        )
        ci = _percentile_interval(replicates[:, 0], level)
    return PerElementFit(
        s_per_element=estimate,
        ci=ci,
        t0_s=float(t0_s),
        sizes=tuple(int(s) for s in np.unique(sizes)),
        n_points=int(sizes.size),
        ci_method=method,
    )


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be a fraction in (0, 1), got {level!r}")


def _half_performance_lengths(t0_s: np.ndarray, s_per_element: np.ndarray) -> np.ndarray:
    """``model.laws.half_performance_length`` of each replicate (t0, s per element), t0 · (1 / s), the same
    numbers computed as one array (a fleet's fits draw 10⁴-10⁵ replicates); one by one where a value is
    not finite, so that the law's own check says what is wrong."""
    r_inf_per_s = 1 / s_per_element
    if np.isfinite(t0_s).all() and np.isfinite(r_inf_per_s).all():
        return t0_s * r_inf_per_s
    return np.array([half_performance_length(t0, r) for t0, r in zip(t0_s, r_inf_per_s, strict=True)])


def _points(
    n: npt.ArrayLike, t: npt.ArrayLike, samples: Sequence[npt.ArrayLike] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Validate and return (sizes, seconds) as float arrays of one point each."""
    sizes = np.asarray(n, dtype=float)
    seconds = np.asarray(t, dtype=float)
    if sizes.ndim != 1 or sizes.shape != seconds.shape or sizes.size == 0:
        raise ValueError(f"n and t must be 1-D and of one length; got {sizes.shape} and {seconds.shape}")
    if not (np.all(np.isfinite(sizes)) and np.all(sizes > 0)):
        raise ValueError("n (elements per call) must be finite and > 0")
    if not (np.all(np.isfinite(seconds)) and np.all(seconds > 0)):
        raise ValueError("t (seconds per call) must be finite and > 0")
    if samples is not None:
        if len(samples) != sizes.size:
            raise ValueError(
                f"samples must hold one array per point; got {len(samples)} for {sizes.size} points"
            )
        arrays = [np.asarray(point_samples, dtype=float) for point_samples in samples]
        if (
            not all(values.ndim == 1 and values.size for values in arrays)
            or not np.isfinite(np.concatenate(arrays)).all()
        ):  # the points' samples checked at once (a fleet's fit has 10⁴ points); the first wrong named
            for index, values in enumerate(arrays):
                if values.ndim != 1 or values.size == 0 or not np.all(np.isfinite(values)):
                    raise ValueError(f"samples[{index}] must be a non-empty 1-D array of finite seconds")
    return sizes, seconds


def _overhead_coefficients(x: np.ndarray, y: np.ndarray, count: np.ndarray | None = None) -> np.ndarray:
    """(t0, s per element) of the 1/y²-weighted fit of y = t0 + s·x, for each row of x, y: (B, m) → (B, 2);
    ``count`` (B, m), where given, multiplies each point's weight (how often a resample of runs drew it).

    The 2×2 normal equations, solved for every replicate at once on scaled x and y (n up to ~1e9, t down to
    ~1e-7 s), which keeps them well conditioned.
    """
    x_scale = np.max(x, axis=1, keepdims=True)
    y_scale = np.max(y, axis=1, keepdims=True)
    xs = x / x_scale
    inverse = y_scale / y  # 1/ys, so w = 1/ys² and w·ys = 1/ys: five sums, no other (B, m) temporaries
    if count is None:
        w = inverse * inverse
    else:  # then x, and y unless its statistic was redrawn, are one row (1, m) for every replicate
        xs, w, inverse = np.broadcast_to(xs, count.shape), count * inverse * inverse, count * inverse
    wx = w * xs
    s0, s1, s2 = w.sum(axis=1), wx.sum(axis=1), np.einsum("ij,ij->i", wx, xs)
    r0, r1 = inverse.sum(axis=1), np.einsum("ij,ij->i", xs, inverse)
    return _overhead_solution(np.column_stack([s0, s1, s2, r0, r1]), x_scale[:, 0], y_scale[:, 0])


def _overhead_sums(x: np.ndarray, y: np.ndarray) -> PointSums:
    """``_overhead_coefficients`` of the points (x, y) (one row each) as ``PointSums``: the five sums' terms
    of each point, scaled as there."""
    x_scale, y_scale = np.max(x), np.max(y)
    xs, inverse = x / x_scale, y_scale / y
    w = inverse * inverse
    terms = np.column_stack([w, w * xs, w * xs * xs, inverse, xs * inverse])
    return PointSums(terms, lambda sums: _overhead_solution(sums, x_scale, y_scale))


def _overhead_solution(sums: np.ndarray, x_scale: npt.ArrayLike, y_scale: npt.ArrayLike) -> np.ndarray:
    """(t0, s per element) from the normal equations' five sums (B, 5) on scaled x and y: Σw, Σw·x, Σw·x²,
    Σw·y, Σw·x·y, with w = 1/y² (so w·y = 1/y)."""
    s0, s1, s2, r0, r1 = sums.T
    det = s0 * s2 - s1**2
    t0 = (s2 * r0 - s1 * r1) / det
    slope = (s0 * r1 - s1 * r0) / det
    return np.column_stack([t0 * y_scale, slope * y_scale / x_scale])


def bootstrap(
    sizes: np.ndarray,
    seconds: np.ndarray,
    samples: Sequence[npt.ArrayLike] | None,
    statistic: str,
    estimator: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_boot: int,
    seed: int,
    min_sizes: int,
    runs: npt.ArrayLike | None = None,
    sums: Callable[[np.ndarray, np.ndarray], PointSums] | None = None,
) -> tuple[np.ndarray, str]:
    """Return ``estimator`` over bootstrap replicates, (replicates, parameters), and the method used.

    Each replicate resamples the runs where ``runs`` (each point's run) names two or more
    (``_bootstrap_runs``), else the points (so a law that misses some sizes widens the interval; a resample
    with fewer than ``min_sizes`` distinct sizes cannot be fitted and does not count). With ``samples`` of
    a median, each drawn point's time is also redrawn: the median of a resample of its raw samples (so
    measurement noise widens it too); a minimum never is (module docstring). Points alone are resampled as
    ``scipy.stats.bootstrap`` does (``_bootstrap_points``). ``sums``: the estimator as sums of its points'
    terms (``PointSums``), for a resample of runs that only reweights the points (the same numbers).
    """
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100 for a percentile interval, got {n_boot!r}")
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}; got {statistic!r}")
    if np.unique(sizes).size < min_sizes:
        raise ValueError(f"the bootstrap needs at least {min_sizes} different sizes")
    redrawn_samples = samples if statistic == "median" else None
    if runs is not None:
        labels = np.unique(np.asarray(runs), return_inverse=True)[1].reshape(-1)
        if labels.size != sizes.size:
            raise ValueError(f"runs must name one run per point; got {labels.size} for {sizes.size} points")
        if labels.max() > 0:
            replicates = _bootstrap_runs(
                sizes, seconds, redrawn_samples, labels, estimator, n_boot, seed, min_sizes, sums
            )
            return replicates, CI_RUNS if redrawn_samples is None else CI_RUNS_SAMPLES
    if redrawn_samples is None:
        return _bootstrap_points(sizes, seconds, estimator, n_boot, seed, min_sizes), CI_POINTS
    # Hand-written, because scipy.stats.bootstrap resamples its samples independently or in pairs, at one
    # level: it cannot redraw each drawn point's time from that point's own raw samples inside a resample
    # of the points, nor redraw a resample of the points that leaves too few sizes for the law. Drawing
    # the per-point median by order statistics (``_redrawn_medians``) also costs O(N log N + n_boot)
    # per point where resampling its N raw samples n_boot times would cost O(N · n_boot).
    rng = np.random.default_rng(seed)
    index = rng.integers(0, sizes.size, size=(n_boot, sizes.size))
    too_few = ~_enough_sizes(index, sizes, min_sizes)
    while np.any(too_few):
        index[too_few] = rng.integers(0, sizes.size, size=(int(too_few.sum()), sizes.size))
        too_few = ~_enough_sizes(index, sizes, min_sizes)
    redrawn = _redrawn_medians(redrawn_samples, n_boot, rng)
    # The estimator in slices of replicates: the same numbers, in temporaries a fraction of the size (the
    # allocator reuses them instead of mapping fresh pages for each of a pooled fleet's 10⁶-point arrays).
    rows = max(1, _POINTS_PER_BATCH // sizes.size)
    parts = [
        estimator(
            sizes[index[start : start + rows]],
            np.take_along_axis(redrawn[start : start + rows], index[start : start + rows], axis=1),
        )
        for start in range(0, n_boot, rows)
    ]
    return np.concatenate(parts), CI_SAMPLES


#: Resampled points (replicates × points) evaluated at once by ``_bootstrap_points``: bounds the memory of
#: a fit pooled over thousands of runs.
_POINTS_PER_BATCH = 250_000


def _bootstrap_runs(
    sizes: np.ndarray,
    seconds: np.ndarray,
    samples: Sequence[npt.ArrayLike] | None,
    labels: np.ndarray,
    estimator: Callable[..., np.ndarray],
    n_boot: int,
    seed: int,
    min_sizes: int,
    sums: Callable[[np.ndarray, np.ndarray], PointSums] | None = None,
) -> np.ndarray:
    """``estimator`` over resamples of the runs (``labels``: each point's run, 0 … k − 1), as (replicates,
    parameters): the cluster bootstrap (Davison & Hinkley 1997, §3.8), each run drawn with replacement k
    times and every point of a run weighted by how often its run was drawn. With ``samples`` (of a median),
    each point's median is redrawn from its raw samples as well: runs, then rounds (hierarchical). A
    resample with fewer than ``min_sizes`` distinct sizes is left out, as in ``_bootstrap_points``. Without
    ``samples``, ``sums`` (where given) computes the same replicates from each run's sums of the terms."""
    rng = np.random.default_rng(seed)
    runs = int(labels.max()) + 1
    redrawn = None if samples is None else _redrawn_medians(samples, n_boot, rng)
    codes = np.unique(sizes, return_inverse=True)[1]
    if redrawn is None and sums is not None:
        return _bootstrap_run_sums(sums(sizes, seconds), labels, codes, n_boot, rng, min_sizes)
    size_of_point = np.zeros((sizes.size, int(codes.max()) + 1))
    size_of_point[np.arange(sizes.size), codes] = 1
    batch = max(1, _POINTS_PER_BATCH // sizes.size)
    parts = []
    for start in range(0, n_boot, batch):
        drawn = rng.multinomial(runs, np.full(runs, 1 / runs), size=min(batch, n_boot - start))
        count = drawn[:, labels].astype(float)
        y = seconds[None, :] if redrawn is None else redrawn[start : start + count.shape[0]]
        with np.errstate(divide="ignore", invalid="ignore"):  # a resample of too few sizes, set to NaN below
            values = np.array(estimator(sizes[None, :], y, count), dtype=float)
        values[np.count_nonzero((count > 0) @ size_of_point, axis=1) < min_sizes] = math.nan
        parts.append(values)
    replicates = np.concatenate(parts)
    return replicates[~np.isnan(replicates).any(axis=1)]


@dataclass(frozen=True)
class PointSums:
    """An estimator that depends on the points only through weighted sums of per-point ``terms`` (points,
    k): ``solve`` turns (replicates, k) sums into (replicates, parameters). A resample of runs that only
    reweights the points then sums each run's terms once and weights the runs, (B, runs) @ (runs, k),
    instead of weighting every point of every replicate, (B, points): a fleet's machine holds 100 runs of
    20 points, and the fits' bootstraps were a third of a first report's fitting."""

    terms: np.ndarray
    solve: Callable[[np.ndarray], np.ndarray]


def _bootstrap_run_sums(
    point_sums: PointSums,
    labels: np.ndarray,
    codes: np.ndarray,
    n_boot: int,
    rng: np.random.Generator,
    min_sizes: int,
) -> np.ndarray:
    """``_bootstrap_runs``' replicates of a ``PointSums`` estimator, from the same draws."""
    runs = int(labels.max()) + 1
    per_run = np.stack(
        [np.bincount(labels, weights=column, minlength=runs) for column in point_sums.terms.T], axis=1
    )
    has_size = np.zeros((runs, int(codes.max()) + 1))
    has_size[labels, codes] = 1
    batch = max(1, _POINTS_PER_BATCH // runs)
    parts = []
    for start in range(0, n_boot, batch):
        drawn = rng.multinomial(runs, np.full(runs, 1 / runs), size=min(batch, n_boot - start)).astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):  # a resample of too few sizes, set to NaN below
            values = np.array(point_sums.solve(drawn @ per_run), dtype=float)
        values[np.count_nonzero(drawn @ has_size, axis=1) < min_sizes] = math.nan
        parts.append(values)
    replicates = np.concatenate(parts)
    return replicates[~np.isnan(replicates).any(axis=1)]


def _bootstrap_points(
    sizes: np.ndarray,
    seconds: np.ndarray,
    estimator: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_boot: int,
    seed: int,
    min_sizes: int,
) -> np.ndarray:
    """``estimator`` over resamples of the points (pairs of size and time), as (replicates, parameters). A
    resample with fewer than ``min_sizes`` distinct sizes gives NaN there and is left out: the replicates
    kept are drawn from the same distribution as a redraw gives, that of the resamples the law can be
    fitted to.

    The resamples are those ``scipy.stats.bootstrap((np.arange(points),), …, n_resamples=n_boot,
    batch=_POINTS_PER_BATCH // points, vectorized=True, rng=np.random.default_rng(seed))`` draws, drawn
    here the same way (``Generator.integers`` of one batch of rows at a time), so the replicates are its
    replicates bit for bit (``tests/test_fleet_scale.py``) without its copy of each resample: a fleet of
    runs pools 10⁴ points a machine, and scipy's copies took a quarter of the fits' time."""
    rng = np.random.default_rng(seed)
    batch = max(1, _POINTS_PER_BATCH // sizes.size)
    parts = []
    for start in range(0, n_boot, batch):
        rows = rng.integers(0, sizes.size, size=(min(batch, n_boot - start), sizes.size), dtype="int64")
        drawn = sizes[rows]
        with np.errstate(divide="ignore", invalid="ignore"):  # a one-size resample, set to NaN below
            values = np.array(estimator(drawn, seconds[rows]), dtype=float)
        values[~_enough_drawn(drawn, sizes, min_sizes)] = math.nan
        parts.append(values)
    replicates = np.concatenate(parts)
    return replicates[~np.isnan(replicates).any(axis=1)]


def _enough_drawn(drawn: np.ndarray, sizes: np.ndarray, at_least: int) -> np.ndarray:
    """``_enough_sizes`` of resamples given by their drawn sizes (rows of ``drawn``, values of ``sizes``):
    two sizes ask only that a row's values are not all its first, read off the sizes already drawn."""
    if at_least <= 1:
        return np.ones(drawn.shape[0], dtype=bool)
    if at_least == 2:
        return (drawn != drawn[:, :1]).any(axis=1)
    return _enough_sizes(np.searchsorted(np.unique(sizes), drawn), np.unique(sizes), at_least)


def _enough_sizes(index: np.ndarray, sizes: np.ndarray, at_least: int) -> np.ndarray:
    """Whether each resample, a row of ``index`` (point numbers into ``sizes``), holds ``at_least`` distinct
    sizes: from the points' size codes, without sorting the resamples (10³ rows of up to 10⁴ points when a
    fleet of runs is pooled); two sizes only ask that a row's codes are not all its first."""
    _, codes = np.unique(sizes, return_inverse=True)
    drawn = codes[index]
    if at_least <= 1:
        return np.ones(index.shape[0], dtype=bool)
    if at_least == 2:
        return (drawn != drawn[:, :1]).any(axis=1)
    present = np.zeros((index.shape[0], int(codes.max()) + 1), dtype=bool)
    present[np.arange(index.shape[0])[:, None], drawn] = True
    return np.count_nonzero(present, axis=1) >= at_least


def _redrawn_medians(samples: Sequence[npt.ArrayLike], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, points): for each point, ``n_boot`` medians of resamples of its raw samples
    (``_bootstrap_median``), drawn in the same order from ``rng`` as point by point would, so the intervals
    do not depend on how the points are batched: consecutive points of an odd count (one order statistic
    each) in one call, a point of an even count on its own."""
    ordered = [np.sort(np.asarray(values, dtype=float)) for values in samples]
    counts = np.array([values.size for values in ordered])
    single = counts % 2 == 1
    order_k = (counts + 1) // 2
    redrawn = np.empty((n_boot, counts.size))
    start = 0
    while start < counts.size:
        if not single[start]:
            redrawn[:, start] = _bootstrap_median(ordered[start], n_boot, rng)
            start += 1
            continue
        stop = start + 1
        while stop < counts.size and single[stop]:
            stop += 1
        count = counts[start:stop, None]
        k = order_k[start:stop, None]
        u_k = rng.beta(k, count - k + 1, size=(stop - start, n_boot))
        flat = np.concatenate(ordered[start:stop])
        offsets = (np.cumsum(counts[start:stop]) - counts[start:stop])[:, None]
        position = np.clip(np.ceil(count * u_k).astype(int) - 1, 0, count - 1)
        redrawn[:, start:stop] = flat[offsets + position].T
        start = stop
    return redrawn


def _bootstrap_median(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``n_boot`` medians of resamples (with replacement, same size) of ``values``, exactly but cheaply.

    A resample is Q(U₁) … Q(U_N) with Q the empirical quantile function and Uᵢ uniform, so its k-th order
    statistic is Q(U₍ₖ₎) with U₍ₖ₎ ~ Beta(k, N − k + 1); the next one, U₍ₖ₊₁₎, is the smallest of N − k
    uniforms above U₍ₖ₎. That costs O(N log N + n_boot) instead of O(N · n_boot) for 10⁵ samples a point.
    """
    ordered = np.sort(values)
    count = ordered.size
    k = (count + 1) // 2
    u_k = rng.beta(k, count - k + 1, size=n_boot)
    lower = ordered[np.clip(np.ceil(count * u_k).astype(int) - 1, 0, count - 1)]
    if count % 2:
        return lower
    u_next = u_k + (1 - u_k) * (1 - rng.random(n_boot) ** (1 / (count - k)))
    upper = ordered[np.clip(np.ceil(count * u_next).astype(int) - 1, 0, count - 1)]
    return (lower + upper) / 2


def _percentile_interval(values: np.ndarray, level: float) -> Interval:
    """The percentile interval of bootstrap ``values`` at ``level``; NaN bounds when there are none."""
    if values.size == 0:
        return Interval(math.nan, math.nan, level)
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(low), float(high), level)
