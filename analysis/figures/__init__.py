"""Figures of saved runs: one set, drawn by ``build_figures`` and written by ``write_figures`` into
``OUT/figures/`` for both ``python -m analysis report`` (which links them from ``OUT/report.md``) and
``python -m analysis plot`` (the same files without the Markdown, grouped by machine, run or fact as
``compare`` groups; plot refuses a folder that holds a report, whose report.md links its own figures).

- ``cpu``: time per numpy call against size with the fitted law; many small calls against one big; the fixed
  cost of each numpy op of the decode step beside t0.
- ``gpu``: eager launches against graph replay; the launch-cost ladder; spin kernels and the knee; the
  lecture's decode step with assumed and measured launch costs.
- ``decode``: every measured decode step against its predicted band (on the GPU also the calibrated
  roofline's).
- ``machines``: each machine's fitted figures against the baseline's.
- ``ladder``: the dispatch ladder across frameworks (``analysis.frameworks``): t0 per caller on the CPU, the
  cost per launch per framework layer on the GPU.

``style`` holds what they share (palette, markers, panels, ticks, titles and captions; its docstring says
why). A figure whose cases are absent is not drawn.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from analysis.fits import Fits
from analysis.load import (
    await_workers,
    forks,
    frozen_heap,
    pool_context,
    start_workers,
    stop_workers,
    usable_cpus,
    worker_processes,
)
from analysis.memo import Memo
from analysis.output import DEFAULT_FIGURE_FORMATS as FORMATS
from analysis.output import Published, publish
from analysis.signals import WorkerLost, lost_line

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The folder of ``OUT`` the figures are written into, by ``report`` and ``plot`` alike.
FIGURES_DIR = "figures"
#: The owner of the figure files in the output folder's manifest (``analysis.output``): ``report`` and
#: ``plot`` draw the same files into the same place, so either may replace what the other wrote.
FIGURES_OWNER = "figures"

#: A figure to draw: the function that builds it (None when its cases are absent), as "module.function" of
#: this package (imported when the figure is drawn: a report whose figures are all kept, ``analysis.memo``,
#: never imports matplotlib), and its arguments.
Job = tuple[str, tuple[object, ...]]


def figure_jobs(frame: pd.DataFrame, fits: Fits, table: pd.DataFrame) -> dict[str, Job]:
    """Every figure ``build_figures`` may draw, by file stem, in reading order, as a function and its
    arguments (names and tables: a worker process can be sent them)."""
    return {
        "time_vs_size": ("cpu.time_vs_size", (frame, fits.host)),
        "many_vs_one": ("cpu.many_vs_one", (fits.many_vs_one,)),
        "op_costs": ("cpu.op_costs", (frame, fits.host)),
        "launch_vs_graph": ("gpu.launch_vs_graph", (frame, fits.launch)),
        "launch_ladder": ("gpu.launch_ladder", (frame, fits.launch)),
        "knee": ("gpu.knee", (fits.spin, fits.launch)),
        "decode_step": ("gpu.decode_demo", (fits.decode_demo,)),
        "decode_bands": ("decode.decode_bands", (fits.decode_steps,)),
        "machines": ("machines.machines", (table,)),
        "ladder": ("ladder.ladder", (frame, fits.calls)),
    }


def _built(job: Job) -> Figure | None:
    """The figure ``job`` builds (None when its cases are absent)."""
    name, args = job
    module, function = name.rsplit(".", 1)
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)(*args)


def build_figures(frame: pd.DataFrame, fits: Fits, table: pd.DataFrame) -> dict[str, Figure]:
    """Every figure the data allow, by file stem, in reading order; ``fits`` is ``fit_all(frame)`` and
    ``table`` ``analysis.compare.figure_table`` of the same frame."""
    built = {stem: _built(job) for stem, job in figure_jobs(frame, fits, table).items()}
    return {stem: figure for stem, figure in built.items() if figure is not None}


#: The figures drawn from the comparison table: ``start_figures`` draws every other one while the command
#: computes the table.
TABLE_FIGURES = ("machines",)
#: The figures drawn from the predictions made with the fitted laws (``analysis.fits.with_predictions``): a
#: report starts the others once the laws are fitted, and adds these (``Drawing.add``) once predicted.
PREDICTION_FIGURES = ("many_vs_one", "knee", "decode_step", "decode_bands")


def write_figures(
    frame: pd.DataFrame,
    fits: Fits,
    table: pd.DataFrame,
    out_dir: Path,
    formats: Sequence[str] = FORMATS,
    workers: int | None = None,
    memo: Memo | None = None,
) -> list[Path]:
    """Draw ``build_figures`` into ``out_dir/FIGURES_DIR``, each in every one of ``formats``; return the
    paths written, in reading order (``start_figures``, then ``Drawing.finish`` with ``table``)."""
    with start_figures(frame, fits, out_dir, formats, workers, memo) as drawing:
        return drawing.finish(table)


#: Work of the command's own that the drawing workers take while they draw (``start_figures``' ``beside``):
#: a module-level function and its arguments.
Call = tuple[Callable[..., object], tuple[object, ...]]


def start_figures(
    frame: pd.DataFrame,
    fits: Fits,
    out_dir: Path,
    formats: Sequence[str] = FORMATS,
    workers: int | None = None,
    memo: Memo | None = None,
    later: Sequence[str] = (),
    beside: Call | None = None,
) -> Drawing:
    """Start drawing, into ``out_dir/FIGURES_DIR``, every figure of ``build_figures`` but those of the
    comparison table (``TABLE_FIGURES``) and those of ``later`` (added with ``Drawing.add`` once ``fits``
    holds what they show), in every one of ``formats``: side by side in ``workers``
    processes (default: one per CPU this process may run on, ``drawing_workers``), which draw while the
    command goes on (a report computes its table meanwhile: the figures cost it no wall time where a CPU is
    free); ``Drawing.finish`` adds the table's figures and waits. Each figure depends on its own data
    alone, so the files are those drawn one after another here (``workers=1``), byte for byte. With
    ``memo``, a figure drawn before from the same data (``analysis.memo``: its arguments' rows, the
    formats, the code) is written from the bytes kept, and only the others are drawn. ``beside``: a call
    whose result the command needs later (``Drawing.beside_result``), made by a forked worker before it
    draws, which inherits its arguments (a report's predictions: the worker is otherwise idle while the
    table is computed); made here, when asked for, where no worker is forked. Use it as a context
    manager: leaving it ends the workers, whatever happened meanwhile."""
    return Drawing(frame, fits, out_dir / FIGURES_DIR, tuple(formats), workers, memo, tuple(later), beside)


class Drawing:
    """Figures being drawn (``start_figures``)."""

    def __init__(
        self,
        frame: pd.DataFrame,
        fits: Fits,
        folder: Path,
        formats: tuple[str, ...],
        workers: int | None,
        memo: Memo | None,
        later: tuple[str, ...] = (),
        beside: Call | None = None,
    ) -> None:
        self.folder = folder
        self.formats = formats
        self.memo = memo
        self._frame, self._fits = frame, fits
        self.keys: dict[str, str] = {}
        self.written: dict[str, list[Path]] = {}
        self.jobs = figure_jobs(frame, fits, pd.DataFrame())  # the table's figures: ``finish``
        self._settings = _matplotlib_settings() if memo is not None else ()
        waiting = (*later, *TABLE_FIGURES)
        early = {stem: job for stem, job in self.jobs.items() if stem not in waiting}
        todo = self._not_kept(early)
        count = drawing_workers(len(todo) + len(waiting)) if workers is None else workers
        self._workers = max(1, min(count, len(todo) + len(waiting)))
        self._pool: ProcessPoolExecutor | None = None
        self._started: list[BaseProcess] = []
        self._pending: dict[str, Future] = {}
        self._forked = False
        self._frozen = contextlib.ExitStack()  # ``frozen_heap`` while forked workers draw
        self._beside, self._beside_future = beside, None
        self._later = set(later)  # the stems ``add`` has yet to start
        self._held: list[str] = []  # inherited stems started after ``add``'s (``_start``)
        self._drawn: dict[str, list[Path]] = {}
        if self._workers < 2:
            self._draw_here(todo)
        else:
            self._import(todo)
            self._start(todo)

    def __enter__(self) -> Drawing:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def beside_result(self) -> object:
        """The result of ``start_figures``' ``beside`` call: the worker's (``WorkerLost`` where it was
        lost), or made here now where none took it."""
        if self._beside is None:
            raise ValueError("no call was given to make beside the drawing")
        if self._beside_future is None:
            function, args = self._beside
            return function(*args)
        try:
            await_workers(self._pool, [self._beside_future])
            return self._beside_future.result()
        except (BrokenProcessPool, WorkerLost) as exc:
            self._stop()
            raise WorkerLost(_lost_line(self._started)) from exc

    def add(self, stems: Sequence[str], fits: Fits) -> None:
        """Start drawing ``stems`` too (left for later by ``start_figures``), from ``fits``, which now holds
        what they show (``analysis.fits.with_predictions`` of the fits the drawing started with)."""
        self._fits = fits
        self.jobs = figure_jobs(self._frame, fits, pd.DataFrame())
        self._later.difference_update(stems)
        self._submit({stem: self.jobs[stem] for stem in stems})
        self._submit_held()

    def finish(self, table: pd.DataFrame) -> list[Path]:
        """Draw the table's figures (``TABLE_FIGURES``) of ``table`` (``analysis.compare.figure_table`` of the
        same frame) here, as the command would only wait for the workers meanwhile; wait for every figure,
        keep the ones drawn (``memo``); the paths written, in reading order. ``ValueError`` where a figure
        left for later (``start_figures``' ``later``) was never added."""
        if self._later:
            raise ValueError(f"figures left for later were never added: {', '.join(sorted(self._later))}")
        self._submit_held()
        self.jobs = figure_jobs(self._frame, self._fits, table)
        self._draw_here(self._not_kept({stem: self.jobs[stem] for stem in TABLE_FIGURES}))
        try:
            if self._pool is not None:
                await_workers(self._pool, list(self._pending.values()))
                self._drawn.update((stem, future.result()) for stem, future in self._pending.items())
        except (
            BrokenProcessPool,
            WorkerLost,
        ) as exc:  # a worker killed: ``await_workers`` or the pool noticed
            raise WorkerLost(_lost_line(self._started)) from exc
        finally:
            self._stop()
        for stem, paths in self._drawn.items():
            if self.memo is not None:
                self.memo.put(self.keys[stem], [(path.name, path.read_bytes()) for path in paths])
        self.written.update(self._drawn)
        return [path for stem in self.jobs for path in self.written[stem]]

    def _submit(self, jobs: dict[str, Job]) -> None:
        """Draw those of ``jobs`` that ``memo`` does not keep: here where there is no pool, else by its
        workers, which are sent the jobs' data (they started before it existed); a worker lost meanwhile is
        ``WorkerLost``, the pool ended."""
        todo = self._not_kept(jobs)
        if self._pool is None:
            self._draw_here(todo)
            return
        self._import(todo)
        self._send({stem: (_draw, (stem, job, self.folder, self.formats)) for stem, job in todo.items()})

    def _submit_held(self) -> None:
        """Start the figures ``_start`` held back, which the workers inherited."""
        held, self._held = self._held, []
        if held and self._pool is not None:
            self._send({stem: (_draw_inherited, (stem, self.folder, self.formats)) for stem in held})

    def _send(self, calls: dict[str, tuple[Callable[..., list[Path]], tuple[object, ...]]]) -> None:
        """Submit each stem's call to the pool; a worker lost meanwhile is ``WorkerLost``, the pool ended."""
        try:
            self._pending.update(
                (stem, self._pool.submit(function, *args)) for stem, (function, args) in calls.items()
            )
        except BrokenProcessPool as exc:
            self._stop()
            raise WorkerLost(_lost_line(self._started)) from exc

    def _draw_here(self, jobs: dict[str, Job]) -> None:
        """Draw ``jobs`` in this process, one after another."""
        self._drawn.update((stem, _draw(stem, job, self.folder, self.formats)) for stem, job in jobs.items())

    def _not_kept(self, jobs: dict[str, Job]) -> dict[str, Job]:
        """The ``jobs`` whose files ``memo`` does not keep; the kept ones are written from its bytes."""
        if self.memo is None:
            return jobs
        todo = {}
        for stem, (_, args) in jobs.items():
            self.keys[stem] = self.memo.key(f"figure-{stem}", args, self.formats, self._settings)
            found, files = self.memo.get(self.keys[stem])
            if found:
                self.written[stem] = _written(self.folder, files)
            else:
                todo[stem] = jobs[stem]
        return todo

    @staticmethod
    def _import(jobs: dict[str, Job]) -> None:
        for module in sorted({name.rsplit(".", 1)[0] for name, _ in jobs.values()}):
            importlib.import_module(f"{__name__}.{module}")  # once here, not in each forked worker

    def _start(self, jobs: dict[str, Job]) -> None:
        """``_draw`` of every one of ``jobs`` in a pool of processes started as ``analysis.load``'s loading
        workers are (``pool_context``: forked, or from a fork server once JAX or PyTorch is loaded, whose
        threads a fork may deadlock); the workers end with the command (``start_workers``).

        A forked worker inherits the frame and fits, copied only where it writes (``frozen_heap`` keeps the
        collector from writing into every object); a worker from a fork server is sent the job's own data."""
        context = pool_context()
        self._forked = forks(context)
        beside = self._forked and self._beside is not None  # an unforked worker would be sent its data
        if self._forked:
            _INHERITED.update(jobs)
            _BESIDE[:] = [self._beside] if beside else []
            self._frozen.enter_context(frozen_heap())
        stems = list(jobs)
        if beside and self._later:
            # The figures of the predictions (``add``) are the longest: while a worker predicts, the others
            # take one figure each, and the rest wait behind ``add``'s, not ahead of them (the longest
            # figure, drawn last, was the command's last second).
            stems, self._held = stems[: self._workers - 1], stems[self._workers - 1 :]
        calls = [
            (_draw_inherited, (stem, self.folder, self.formats))
            if self._forked
            else (_draw, (stem, jobs[stem], self.folder, self.formats))
            for stem in stems
        ]
        try:  # the call beside first: a worker takes it at once
            self._pool, futures = start_workers(
                self._workers, context, ([(_beside_inherited, ())] if beside else []) + calls
            )
        except BaseException:
            self._stop()
            raise
        self._started = worker_processes(self._pool)  # kept: a broken pool forgets its processes
        if beside:
            self._beside_future = futures.pop(0)
        self._pending = dict(zip(stems, futures, strict=True))

    def _stop(self) -> None:
        """End the workers (``stop_workers``) and forget what they inherited; idempotent."""
        if self._pool is not None:
            stop_workers(self._pool)
            self._pool = None
        if self._forked:
            _INHERITED.clear()
            _BESIDE.clear()
            self._frozen.close()
            self._forked = False


def _matplotlib_settings() -> tuple[object, ...]:
    """What may change how matplotlib draws besides a figure's data and code, for a kept figure's key: the
    variables that move its settings and the size and time of each settings file it may read
    (``$MATPLOTLIBRC``, or the ``matplotlibrc`` in it when it names a folder, ``./matplotlibrc``, the one in
    its configuration folder), found without importing it."""
    names = ("MATPLOTLIBRC", "MPLCONFIGDIR", "XDG_CONFIG_HOME")
    config = os.environ.get("MPLCONFIGDIR") or os.path.join(  # noqa: PTH118
        os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"),  # noqa: PTH111
        "matplotlib",
    )
    chosen = os.environ.get("MATPLOTLIBRC", "")
    candidates = [
        chosen,
        chosen and os.path.join(chosen, "matplotlibrc"),  # noqa: PTH118 (editing it leaves the folder's time)
        "matplotlibrc",
        os.path.join(config, "matplotlibrc"),  # noqa: PTH118
    ]
    stamps = []
    for candidate in filter(None, candidates):
        with contextlib.suppress(OSError):
            info = os.stat(candidate)  # noqa: PTH116
            stamps.append((os.path.abspath(candidate), info.st_size, info.st_mtime_ns))  # noqa: PTH100
    return (*(os.environ.get(name) for name in names), tuple(stamps))


def _written(folder: Path, files: list[tuple[str, bytes]]) -> list[Path]:
    """The figure files ``files`` (name, bytes) written into ``folder``; their paths."""
    if files:  # a figure whose cases are absent has none, and leaves no folder
        folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in files:
        path = folder / name
        path.write_bytes(data)
        paths.append(path)
    return paths


def drawing_workers(figures: int) -> int:
    """The processes that draw ``figures`` figures: one per CPU this process may run on (its affinity
    mask, where the OS has one), no more than there are figures."""
    return max(1, min(usable_cpus(), figures))


def _draw(stem: str, job: Job, folder: Path, formats: Sequence[str]) -> list[Path]:
    """Build one figure and write it in each of ``formats``; no file when its cases are absent."""
    figure = _built(job)
    if figure is None:
        return []
    from analysis.figures.style import save

    return save(figure, folder, stem, formats)


#: The jobs of the ``write_figures`` call under way, read by forked workers (inherited, never sent).
_INHERITED: dict[str, Job] = {}
#: The call beside the drawing under way (``start_figures``' ``beside``), inherited as the jobs are.
_BESIDE: list[Call] = []


def _beside_inherited() -> object:
    """``start_figures``' ``beside`` call, made in a forked worker, of the call it inherited."""
    function, args = _BESIDE[0]
    return function(*args)


def _draw_inherited(stem: str, folder: Path, formats: Sequence[str]) -> list[Path]:
    """``_draw`` in a forked worker, of the job it inherited from the command."""
    return _draw(stem, _INHERITED[stem], folder, formats)


#: The line of a drawing worker lost (``WorkerLost``).
_lost_line = lost_line(
    "a process drawing the figures", "they were written", "nothing was written; run the command again"
)


def write_case_figures(
    ratios: pd.DataFrame, baseline: str, out_dir: Path, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """Draw another suite's cases against the baseline group (``machines.cases`` of
    ``analysis.compare.case_ratios``) into ``out_dir/FIGURES_DIR`` as ``cases``; return the paths written
    (none when no case has a ratio)."""
    from analysis.figures import machines
    from analysis.figures.style import save

    figure = machines.cases(ratios, baseline, ("median", "min"))
    return save(figure, out_dir / FIGURES_DIR, "cases", formats) if figure is not None else []


def publish_figures(stage: Path, out: Path, force: bool) -> Published:
    """Move the figures drawn under ``stage/FIGURES_DIR`` into ``out/FIGURES_DIR`` as ``FIGURES_OWNER``'s
    files (``analysis.output.publish``): stale figures of an earlier report or plot are removed, a file
    either did not write is refused unless ``force``."""
    return publish(stage, out, FIGURES_OWNER, force, part=FIGURES_DIR)
