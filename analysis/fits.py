"""Every family's fits and predictions for one frame, computed once.

The report, the figures, the machine table and the terminal summary all read one ``Fits``: fitting is the
slow part of analysis (bootstrap intervals over thousands of points when runs are pooled), and figures
fitted twice could disagree with the table beside them. ``fit_all`` is the only caller of the families'
fitting functions outside their own modules.

Each machine (or compared group) is fitted on its own rows with its own seeded generator, so the machines
are fitted side by side, one worker per usable CPU, and the results are those of fitting them one after
another: in forked processes, which inherit the frame (``_fit_inherited``), where the command may fork; else
in threads (the bootstrap's array work and random draws run outside Python's global interpreter lock, but
pandas' selections do not: threads kept a second CPU a third busy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from analysis.decode import decode_table
from analysis.frameworks import CALL_COLUMNS, fit_calls
from analysis.host import HOST_COLUMNS, fit_host, predict_many_vs_one
from analysis.launch import CUDA_CASES, FIT_COLUMNS, decode_with_measured, fit_launch, predict_spin
from analysis.load import forks, frozen_heap, pool_context, run_workers, usable_cpus
from analysis.memo import Memo
from analysis.signals import lost_line

#: The cases whose raw samples a fit or a compared figure reads: the numpy call sizes (the CPU law's
#: intervals and differences), the host bandwidths, every GPU launch case, the cases of the measured
#: headline figures ``analysis.compare`` judges (many vs one, the decode step and its floor, per-op costs),
#: and the framework cases ``compare --by framework`` judges (``analysis.case_groups``).
SAMPLED_CASES = frozenset(
    {
        "ufunc_size",
        "host_bandwidth",
        "many_vs_one",
        "numpy_op",
        "decode_floor",
        "decode_step",
        "framework_call",
        "framework_step",
        "framework_launch",
        *CUDA_CASES,
    }
)


def uses_samples(bench: Mapping) -> bool:
    """Whether a saved benchmark's raw samples feed a fit or a compared figure (``SAMPLED_CASES``): the
    predicate that lets ``analysis.load.load_runs`` parse only those."""
    extra = bench.get("extra_info")
    return isinstance(extra, Mapping) and extra.get("case") in SAMPLED_CASES


@dataclass(frozen=True)
class Fits:
    """Every family's fitted and predicted tables for one frame (each empty when its cases are absent).

    ``host``: ``analysis.host.fit_host``; ``many_vs_one``: ``analysis.host.predict_many_vs_one``;
    ``launch``: ``analysis.launch.fit_launch``; ``spin``: ``analysis.launch.predict_spin``;
    ``decode_demo``: ``analysis.launch.decode_with_measured`` (the seed's demo 2 with measured launch costs);
    ``decode_steps``: ``analysis.decode.decode_table`` (measured decode steps against their bounds);
    ``calls``: ``analysis.frameworks.fit_calls`` (the dispatch ladder's law per caller, read by its figure,
    the report's table and the summary alike).
    """

    host: pd.DataFrame
    many_vs_one: pd.DataFrame
    launch: pd.DataFrame
    spin: pd.DataFrame
    decode_demo: pd.DataFrame
    decode_steps: pd.DataFrame
    calls: pd.DataFrame = field(default_factory=pd.DataFrame)


def has_cases(frame: pd.DataFrame, cases: tuple[str, ...], device: str | None = None) -> bool:
    """Whether ``frame`` holds any of ``cases`` (measured on ``device``, when given)."""
    if frame.empty or "case" not in frame or "device" not in frame:
        return False
    rows = frame["case"].isin(cases)
    if device is not None:
        rows &= frame["device"] == device
    return bool(rows.any())


def fit_all(
    frame: pd.DataFrame, predictions: bool = True, memo: Memo | None = None, beside: Beside | None = None
) -> Fits:
    """Fit every family present in ``frame`` once, so the table, the figures, the report and the summary
    agree; the decode steps are predicted from these same host and launch fits. ``predictions``: False
    leaves the predicted tables (many vs one, spin, the decode steps and demo) empty, for a caller that
    shows the fitted figures only (``python -m analysis compare``), or that predicts later
    (``with_predictions``: a report draws the fitted laws' figures meanwhile). ``memo``: where fits computed
    before from the same rows are kept (``analysis.memo``): the whole frame's, else each machine's.
    ``beside``: work of the caller's that needs no fit (``Beside``), made by one of the forked workers that
    fit."""
    if memo is None:
        fitted = _fit_all(frame, None, beside)
    else:
        fitted = memo.cached(memo.key("fit_all", frame), lambda: _fit_all(frame, memo, beside))
    return with_predictions(frame, fitted, memo) if predictions else fitted


def with_predictions(frame: pd.DataFrame, fits: Fits, memo: Memo | None = None) -> Fits:
    """``fits`` (``fit_all(frame, predictions=False)``) with the tables predicted from its laws: many vs one
    and the decode steps from the host fit, the spin kernels and the lecture's demo from the launch fit;
    kept in ``memo`` as ``fit_all``'s are."""
    if memo is None:
        return _predicted(frame, fits)
    return memo.cached(predictions_key(memo, frame, fits), lambda: _predicted(frame, fits))


def predictions_key(memo: Memo, frame: pd.DataFrame, fits: Fits) -> str:
    """The key under which ``memo`` keeps ``with_predictions(frame, fits)``: a caller that hands the
    predictions to another process asks whether they are kept first (``Memo.get``)."""
    return memo.key("predictions", frame, fits)


@dataclass
class Beside:
    """A call (a function and its arguments) that ``fit_all`` has one of its forked fitting workers make
    beside the fits, the worker inheriting both (nothing is sent; ``analysis.compare.table_part``, which
    took the command a second while the workers fit in less); its result in ``result`` once the fits are
    made, nothing where no worker was forked (every fit kept, one CPU, threads where workers are not
    forked): the caller then makes the call itself."""

    call: tuple[Callable[..., object], tuple[object, ...]]
    result: list[object] = field(default_factory=list)


def _fit_all(frame: pd.DataFrame, memo: Memo | None, beside: Beside | None = None) -> Fits:
    empty = pd.DataFrame()
    families = [_Family(fit_host, HOST_COLUMNS, "host"), _Family(fit_calls, CALL_COLUMNS, "calls")]
    if has_cases(frame, CUDA_CASES, "cuda"):
        families.append(_Family(fit_launch, FIT_COLUMNS, "launch"))
    fitted = _per_machine(families, frame, memo, beside)
    launch = fitted.get("launch", pd.DataFrame(columns=list(FIT_COLUMNS)))
    return Fits(fitted["host"], empty, launch, empty, empty, empty, fitted["calls"])


@dataclass(frozen=True)
class _Family:
    """One family's fit, its table's columns, and the name its machines' fits are kept under
    (``analysis.memo``)."""

    fit: Callable[[pd.DataFrame], pd.DataFrame]
    columns: tuple[str, ...]
    name: str


def _per_machine(
    families: list[_Family],
    frame: pd.DataFrame,
    memo: Memo | None = None,
    beside: Beside | None = None,
) -> dict[str, pd.DataFrame]:
    """Each family's ``fit(frame)``, by name, fitted machine by machine side by side (see the module
    docstring): the same rows, in the same order (by machine id), as one call. With ``memo``, a machine
    whose rows were fitted before (by the fit of that family) is read back, and only the others are fitted;
    every family's machines share one set of workers; ``beside`` as ``fit_all``'s."""
    if frame.empty or "machine_id" not in frame:
        return {family.name: family.fit(frame) for family in families}
    where = frame.groupby("machine_id", sort=True, observed=True).indices
    machines = [where[machine] for machine in sorted(where)]  # each machine's row positions
    jobs = [(family, index) for family in families for index in range(len(machines))]
    keys: dict[tuple[str, int], str] = {}
    done: dict[tuple[str, int], pd.DataFrame] = {}
    if memo is not None:
        for family, index in jobs:
            key = keys[family.name, index] = memo.rows_key(f"fit-{family.name}", frame, machines[index])
            found, value = memo.get(key)
            if found:
                done[family.name, index] = value
    todo = [(family, index) for family, index in jobs if (family.name, index) not in done]
    workers = min(len(todo), usable_cpus())
    if memo is None and workers < 2:
        return {family.name: family.fit(frame) for family in families}

    def fit_one(job: tuple[_Family, int]) -> pd.DataFrame:
        # A machine's rows are taken when its fit starts: taking them all first copied the whole frame.
        family, index = job
        return family.fit(frame.iloc[machines[index]])

    if workers < 2:
        fitted = [fit_one(job) for job in todo]
    elif forks(pool_context()):  # forked workers, which inherit the frame
        jobs_todo = [(family.fit, machines[index]) for family, index in todo]
        fitted = _forked_fits(frame, jobs_todo, workers, beside)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            fitted = list(pool.map(fit_one, todo))
    for (family, index), part in zip(todo, fitted, strict=True):
        if memo is not None:
            memo.put(keys[family.name, index], part)
        done[family.name, index] = part
    tables = {}
    for family in families:
        parts = [done[family.name, index] for index in range(len(machines))]
        parts = [part for part in parts if not part.empty]
        tables[family.name] = (
            pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(family.columns))
        )
    return tables


def _forked_fits(
    frame: pd.DataFrame,
    jobs: list[tuple[Callable[[pd.DataFrame], pd.DataFrame], np.ndarray]],
    workers: int,
    beside: Beside | None = None,
) -> list[pd.DataFrame]:
    """Each job's fit of ``frame``'s rows at its positions, in ``workers`` forked processes that inherit the
    frame and the jobs (copied only where written: ``frozen_heap`` keeps the collector from writing into
    every object) and send back the fitted rows: the loaders' pool (``analysis.load.start_workers``), so a
    worker killed is one line (``WorkerLost``) and the workers end with the command. ``beside``'s call is
    made first, by the first worker free, into its ``result``."""
    _FITTING[:] = [(frame, jobs, beside.call if beside is not None else None)]
    try:
        with frozen_heap():
            calls = [(_fit_inherited, (index,)) for index in range(len(jobs))]
            if beside is None:
                return run_workers(workers, None, calls, _lost_line)
            made, *fitted = run_workers(workers, None, [(_beside_inherited, ()), *calls], _lost_line)
            beside.result.append(made)
            return fitted
    finally:
        _FITTING.clear()


#: The line of a fitting worker lost (``WorkerLost``).
_lost_line = lost_line("a fitting worker process", "its machines were fitted", "run the command again")


#: The frame, jobs and call beside them of the ``_forked_fits`` under way, inherited by its forked workers
#: (never sent).
_FITTING: list[
    tuple[
        pd.DataFrame,
        list[tuple[Callable[[pd.DataFrame], pd.DataFrame], np.ndarray]],
        tuple[Callable[..., object], tuple[object, ...]] | None,
    ]
] = []


def _beside_inherited() -> object:
    """In a forked worker: the inherited call beside the fits (``Beside``)."""
    function, args = _FITTING[0][2]
    return function(*args)


def _fit_inherited(index: int) -> pd.DataFrame:
    """In a forked worker: the fit of inherited job ``index``, of the inherited frame's rows."""
    frame, jobs, _ = _FITTING[0]
    fit, positions = jobs[index]
    return fit(frame.iloc[positions])


def _predicted(frame: pd.DataFrame, fits: Fits) -> Fits:
    empty = pd.DataFrame()
    host, launch = fits.host, fits.launch
    return replace(
        fits,
        many_vs_one=predict_many_vs_one(frame, host) if not host.empty else empty,
        spin=predict_spin(frame, launch) if not launch.empty else empty,
        decode_demo=decode_with_measured(launch) if not launch.empty else empty,
        decode_steps=decode_table(frame, host, launch),
    )
