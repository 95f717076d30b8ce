"""``python -m analysis``: saved runs -> comparison tables, figures, Markdown report.

The only module of ``analysis`` that prints or exits. Every expected failure is a ``CLIError`` (or an
``analysis.output.OutputError`` about the output folder), raised where the input is checked (paths,
``--out``, ``--baseline``) and turned into one line on stderr and exit code 1 in ``main``; a bad command
line is one line and exit code 2. Problems with single input files are warnings (one line each) and the
rest is used; the exit code is non-zero only when no usable launchbench case is left (``compare``: no usable
case of any pytest-benchmark suite, whose runs it compares case by case).

``--out`` is checked before anything is loaded (``analysis.output.check_out``): a folder that can be
created and written, outside every input's run storage; ``report`` and ``plot`` replace only their own
files in it, and ``plot`` refuses a folder that holds a report (its report.md links the figures there, which
must stay drawn from the report's own runs).

Ctrl-C, SIGTERM and SIGHUP end a command with one line and exit code 128 + the signal's number, after the
loader's worker processes have ended; a folder ``--out`` created for a command that wrote nothing is removed
again. The commands import pandas and the rest of ``analysis`` when they run, so
that ``--help`` is quick and a Ctrl-C while they load is handled too. Every line goes through
``model.units.text_for_stream``, so a terminal that cannot encode µ or × gets "us" and "x".

Unlike runs are never pooled (``analysis.runs``): by default every command uses the complete full runs
(a machine that has quick runs only: those, its id marked "(quick)"), counts a run saved twice once, and
names each run it leaves out (quick, partial) with the flag that includes it. The baseline of a comparison
is the group of the earliest run, whatever the order of the paths, unless ``--baseline`` names one.
``compare`` prints which runs it used above its table, ``report`` writes it into the report,
``plot`` prints it on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, NoReturn, TextIO

from analysis.cache import CACHE_ENV, default_folder, wait_for_stores
from analysis.output import (
    DEFAULT_FIGURE_FORMATS,
    OutputError,
    check_out,
    check_replaceable,
    remove_created,
    staging,
)
from analysis.output import FIGURE_FORMATS as FORMATS
from analysis.signals import WorkerLost
from model.units import text_for_stream

if TYPE_CHECKING:
    import pandas as pd

    from analysis.compare import Groups
    from analysis.load import LoadResult, Samples
    from analysis.memo import Memo
    from analysis.runs import Selection

_PROG = "python -m analysis"
#: ``compare``'s output formats (``analysis.render``): for people, then for scripts.
COMPARE_FORMATS = ("text", "markdown", "csv", "json")


class CLIError(Exception):
    """An error the user can fix from the command line; its message is one line."""


class _UsageError(Exception):
    """A bad command line: argparse's message, as one line."""


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread so that the command stops as on Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _say(text: str, stream: TextIO | None = None) -> None:
    """Print one line (or several) to ``stream`` (stdout), in spellings the stream can encode; a stream
    that cannot be written (closed, a full disk, ``/dev/full``, a file-size limit) is ``CLIError``'s one
    line, said on stderr."""
    to_stderr = stream is sys.stderr
    stream = sys.stderr if to_stderr else stream or sys.stdout
    name = "standard error" if to_stderr else "standard output"
    if stream is None:  # started with the stream closed (``>&-``)
        raise CLIError(f"{name} is closed: nothing can be printed")
    try:
        stream.write(text_for_stream(text, stream) + "\n")
        stream.flush()
    except (OSError, ValueError) as exc:  # ValueError: a stream closed meanwhile
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise CLIError(f"writing to {name} failed ({reason})") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; return the process exit code (0 ok, 1 nothing usable or bad input, 2 usage,
    128 + N when stopped by signal N)."""
    import pandas as pd

    from analysis.load import frozen_heap

    with _stop_signals():
        try:
            args = _parser().parse_args(argv)
            # Text as Python strings wherever pandas makes it (``astype(str)``, new columns), as the loader
            # keeps the runs' (``analysis.load._frame``): pyarrow's storage, pandas' default where pyarrow is
            # installed, converted each such column and then read it back one element at a time, a fifth of
            # the comparison table's work.
            with frozen_heap(), pd.option_context("mode.string_storage", "python"):
                code = args.command(args)
            wait_for_stores()  # the parsed runs written into the cache behind the command's work
            return code
        except _UsageError as exc:
            with contextlib.suppress(CLIError):
                _say(str(exc), sys.stderr)
            return 2
        except (CLIError, OutputError, WorkerLost) as exc:
            with contextlib.suppress(CLIError):  # stderr itself cannot be written: the exit code says it
                _say(f"{_PROG}: error: {exc}", sys.stderr)
            wait_for_stores()  # what was parsed is kept for the next command
            return 1
        except KeyboardInterrupt as exc:
            signum = getattr(exc, "signum", signal.SIGINT)
            with contextlib.suppress(CLIError):
                _say(f"{_PROG}: stopped by {signal.Signals(signum).name} before it finished", sys.stderr)
            return 128 + signum


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP stop the command as Ctrl-C does (an exception in the main thread, so that the
    loader's workers are ended and the output is left whole) instead of killing it outright; the handlers
    before are restored after. Only in the main thread, the one Python delivers signals to."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]

    def stop(signum: int, _frame: object) -> NoReturn:
        raise _Terminated(signum)

    old = {signum: signal.signal(signum, stop) for signum in wanted}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and help in the terminal's spellings."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: error: {message}")

    def print_help(self, file: IO[str] | None = None) -> None:
        file = file or sys.stdout
        file.write(text_for_stream(self.format_help(), file))

    def print_usage(self, file: IO[str] | None = None) -> None:
        file = file or sys.stdout
        file.write(text_for_stream(self.format_usage(), file))


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=_PROG,
        description="Read saved launchbench runs (pytest-benchmark JSON), fit them, compare machines, "
        "and hold them against the model.",
    )
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")

    report = commands.add_parser(
        "report", help="write DIR/report.md with tables and figures", description=_report.__doc__
    )
    _add_paths(report)
    _add_baseline(report)
    _add_out(report, "report.md and figures/")
    _add_formats(report)
    report.set_defaults(command=_report)

    compare = commands.add_parser(
        "compare",
        help="groups of runs side by side: machines, runs or a fact's values (ratios to a baseline, "
        "verdicts run against run); any pytest-benchmark suite case by case",
        description=_compare.__doc__,
    )
    _add_paths(compare)
    _add_compare_options(compare)
    compare.set_defaults(command=_compare)

    plot = commands.add_parser(
        "plot",
        help="write the report's figures into DIR/figures/ (PNG; SVG too with --formats)",
        description=_plot.__doc__,
    )
    _add_paths(plot)
    _add_grouping(plot)
    _add_out(plot, "the figures")
    _add_formats(plot)
    plot.set_defaults(command=_plot)

    summary = commands.add_parser(
        "summary",
        help="print the terminal summary of saved runs, as pytest prints it after the run",
        description=_summary.__doc__,
    )
    summary.add_argument("paths", nargs="+", metavar="PATHS", help="saved runs: JSON files, folders or globs")
    summary.set_defaults(command=_summary)
    return parser


def _add_paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        default=[".benchmarks"],
        metavar="PATHS",
        help="saved runs: pytest-benchmark storage folders (searched recursively), JSON files or globs "
        "(default: .benchmarks)",
    )
    parser.add_argument(
        "--no-samples",
        action="store_true",
        help="skip the raw per-round samples: loads a fleet of runs several times faster; confidence "
        "intervals then come from the points alone and differences between machines are not judged",
    )
    parser.add_argument(
        "--include-quick",
        action="store_true",
        help="pool --quick runs with the full ones (left out by default: fewer sizes and rounds)",
    )
    parser.add_argument(
        "--pool",
        action="store_true",
        help="pool runs of one machine that differ in a recorded setting (BLAS threads, a thread variable, "
        "numpy or Python version, governor; kept apart by default), naming what differs",
    )
    parser.add_argument(
        "--cache",
        default=None,
        metavar="DIR",
        help="the cache of parsed runs, so that each saved file is parsed once (Parquet; needs pyarrow, "
        "else every file is parsed), and of the fits, tables and figures computed from them, kept by the "
        f"digest of their rows: default ${CACHE_ENV} if set, else {default_folder() or 'none'}",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="parse every file and compute every result; neither read nor write the cache",
    )
    parser.add_argument(
        "--include-partial",
        action="store_true",
        help="pool the finished cases of partial runs (interrupted, or with cases that did not finish; left "
        "out by default); their unfinished cases stay out",
    )


def _add_compare_options(parser: argparse.ArgumentParser) -> None:
    _add_grouping(parser)
    parser.add_argument(
        "--normalize",
        action="store_true",
        help="divide each run's times by its speed ratio to its machine's usual (the run's speed sentinel "
        "against the median of the machine's runs; said above the table): a slower VM told apart from "
        "slower code; runs saved before the sentinel are left as measured and named",
    )
    parser.add_argument(
        "--format",
        choices=COMPARE_FORMATS,
        default="text",
        help="text or markdown for people; csv or json (SI units, p-values) for scripts (default: text)",
    )
    parser.add_argument(
        "--top",
        type=_positive_int,
        default=None,
        metavar="N",
        help="show the first N case rows only (changes first, then by ratio)",
    )
    parser.add_argument(
        "--points",
        action="store_true",
        help="launchbench runs: compare every measured point (median per timed call) instead of the fitted "
        "figures",
    )


def _add_grouping(parser: argparse.ArgumentParser) -> None:
    """``--by``, ``--baseline`` and ``--threshold``, alike for ``compare`` and ``plot``."""
    from analysis.facts import ALIASES
    from analysis.verdicts import THRESHOLD

    parser.add_argument(
        "--threshold",
        type=_fraction,
        default=THRESHOLD,
        metavar="FRACTION",
        help=f"the equivalence band: a change is reported only when its ratio's interval lies wholly "
        f"outside ±FRACTION (default {THRESHOLD:g}, i.e. {THRESHOLD * 100:g} %%)",
    )

    parser.add_argument(
        "--by",
        default="machine",
        type=_fact_name,
        metavar="machine|run|FACT",
        help="what the groups (columns) are: 'machine' (default), 'run' (one per saved run, in time order) "
        "or a fact of the runs: a dotted path into machine_info, the run record (launchbench_run) or "
        f"commit_info, or one of {', '.join(ALIASES)}",
    )
    parser.add_argument(
        "--baseline",
        metavar="GROUP",
        default=None,
        help="the group the others are compared with: a machine id, a run's file or a fact's value (or a "
        "unique part of it); default: the group of the earliest run, whatever the order of PATHS",
    )


def _fact_name(text: str) -> str:
    """``--by``: a grouping or a fact name that names a path into a run (not ".", "" or "...")."""
    from analysis.facts import fact_path

    try:
        fact_path(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def _fraction(text: str) -> float:
    """A number in [0, 1) (``--threshold``), else argparse's error naming the value."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in [0, 1) (e.g. 0.03 for ±3 %)")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def _add_out(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--out",
        default="report",
        metavar="DIR",
        help=f"output folder for {what}, created if missing; never inside an input's run storage "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help=f"replace {what} in DIR even where a file there was not written by this command or was "
        "changed since (a hand-edited report.md); other files are never touched",
    )


def _add_formats(parser: argparse.ArgumentParser) -> None:
    """``--formats``, alike for ``report`` and ``plot``."""
    parser.add_argument(
        "--formats",
        type=_formats,
        default=DEFAULT_FIGURE_FORMATS,
        metavar="FORMATS",
        help=f"comma-separated figure file formats to write, of {', '.join(FORMATS)} (default: "
        f"{','.join(DEFAULT_FIGURE_FORMATS)}; png,svg adds a zoomable copy of each figure)",
    )


def _add_baseline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline",
        metavar="MACHINE",
        default=None,
        help="machine id (or a unique part of it) the others are compared with (default: the machine of "
        "the earliest run, whatever the order of PATHS)",
    )


def _load(args: argparse.Namespace, *modules: str) -> Selection:
    """Load ``args.paths`` (importing ``modules`` meanwhile, ``_importer``) and keep the runs that may be
    pooled (``_selected``); raise ``CLIError`` when ``args.baseline`` names no machine of the runs used."""
    return _with_baseline(args, _selected(args, _loaded(args, *modules)))


def _loaded(args: argparse.Namespace, *modules: str, facts: Sequence[str] = ()) -> LoadResult:
    """``args.paths`` loaded (``analysis.load.load_runs``, with the run facts ``facts``), ``modules``
    imported meanwhile (``_importer``)."""
    from analysis.load import freeze_more, load_runs

    loaded = load_runs(
        args.paths,
        samples=_samples(args, points=False),
        facts=tuple(facts),
        meanwhile=_importer(*modules),
        cache=_cache(args),
        store_behind=True,  # main waits for it before the command ends
    )
    freeze_more()  # the runs live until the command ends: its full collections no longer walk them
    return loaded


def _cache(args: argparse.Namespace) -> Path | None:
    """The folder of the cache of parsed runs (``analysis.cache``), None with --no-cache or when it must not
    be used (``analysis.output.cache_folder``: a ``--cache`` that names none or lies in a run storage is
    ``CLIError``; the default or ``$LAUNCHBENCH_CACHE``, one warning line)."""
    from analysis.output import cache_folder

    if args.no_cache:
        return None
    if not hasattr(args, "cache_folder"):
        args.cache_folder, problem = cache_folder(args.cache, args.paths)
        if problem and args.cache is not None:
            raise CLIError(problem)
        if problem:
            _say(f"{_PROG}: warning: {problem}", sys.stderr)
    return args.cache_folder


def _memo(args: argparse.Namespace) -> Memo | None:
    """Where the fits, tables and figures computed from runs are kept (``analysis.memo``): beside the parsed
    runs; None with --no-cache."""
    from analysis.memo import open_memo

    return open_memo(_cache(args))


def _with_baseline(args: argparse.Namespace, selection: Selection) -> Selection:
    """``selection``, once ``args.baseline`` is known to name one of its machines (else ``CLIError``)."""
    from analysis.compare import choose_baseline

    try:
        choose_baseline(list(selection.result.frame["machine_id"].unique()), args.baseline)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    return selection


@contextlib.contextmanager
def _out_folder(args: argparse.Namespace) -> Iterator[Path]:
    """``args.out``, checked before any work (``analysis.output.check_out``) and created when missing; a
    folder created here that is still empty when the command ends (it failed, or was stopped) is removed."""
    created = check_out(args.out, args.paths)
    try:
        yield Path(args.out)
    finally:
        remove_created(created)


def _summary(args: argparse.Namespace) -> int:
    """Print the launchbench summary of the saved runs in PATHS: the lines ``pytest benchmarks`` printed
    below pytest-benchmark's table when it measured them (``analysis.summary.summary_lines``), every run
    given used as it is (no run is left out here, unlike report and compare)."""
    from analysis.load import load_runs
    from analysis.summary import summary_lines

    result = load_runs(args.paths, samples=True)
    if result.frame.empty:
        for problem in result.problems:
            _say(problem, sys.stderr)
        raise CLIError(f"no launchbench case in {', '.join(map(str, args.paths))}")
    _say("\n".join(summary_lines(result.frame, result.runs, result.problems)))
    return 0


def _report(args: argparse.Namespace) -> int:
    """Write DIR/report.md: inputs, machines, fitted figures with confidence intervals, measured vs
    predicted with errors, the machine comparison, and the figures it links (PNG; SVG too with
    --formats png,svg)."""
    from analysis.load import FIGURE_MODULES
    from analysis.output import REPORT_NAME, REPORT_OWNER

    with _out_folder(args) as out:
        check_replaceable(out, REPORT_OWNER, [REPORT_NAME], args.force)
        memo = _memo(args)  # before the runs load: the code version is taken at the command's start
        # Imported while the files load: the report's code, the verdicts' correction (scipy.stats) and the
        # figures' modules (matplotlib); a report whose every file is in the cache imports them only where
        # it draws.
        selection = _load(args, "analysis.report", "scipy.stats", *FIGURE_MODULES)
        from analysis.report import write_report

        written = write_report(
            selection, out_dir=out, baseline=args.baseline, force=args.force, formats=args.formats, memo=memo
        )
    for line in written.kept:
        _say(f"{_PROG}: warning: {line}", sys.stderr)
    used, left_out = len(selection.result.runs), len(selection.left_out)
    stale = f"; {len(written.removed)} file(s) of the earlier report removed" if written.removed else ""
    _say(
        f"wrote {written.path} ({len(written.figures)} figure files; {used} run(s) used, {left_out} left out"
        f"{stale})"
    )
    return 0


def _compare(args: argparse.Namespace) -> int:
    """Set groups of runs side by side — machines (default), single runs in time order, or the values of a
    fact such as the numpy, BLAS, CuPy or driver version — with each fitted figure's ratio to the baseline
    group and whether it changed, judged run against run: each run's own figure is one value, a change is
    reported when the ratio's interval lies outside ±--threshold after a Benjamini–Hochberg correction.
    Runs of any other pytest-benchmark suite are compared case by case (matched by
    fullname, min and median). Runs saved twice count once per group; quick and partial runs are left out
    unless included, and with --by run each is its own column, never pooled."""
    from analysis.compare import UNREAD_COLUMNS
    from analysis.facts import BY_MACHINE, BY_RUN, CASE_GROUPINGS
    from analysis.load import fact_column, load_runs
    from analysis.runs import selection_lines
    from analysis.steady import warm_up_line

    fact = None if args.by in (BY_MACHINE, BY_RUN, *CASE_GROUPINGS) else args.by
    column = fact_column(fact) if fact else None
    samples = _samples(args, points=args.points)
    # Imported while the files load: the tables, and the verdicts' correction (scipy.stats).
    meanwhile = _importer("analysis.render", "scipy.stats")
    memo = _memo(args)  # before the runs load: the code version is taken at the command's start
    loaded = load_runs(
        args.paths,
        samples=samples,
        facts=(fact,) if fact else (),
        meanwhile=meanwhile,
        cache=_cache(args),
        # Text columns as categories, and the columns no comparison reads left out (a fleet's frame in a
        # fraction of the memory).
        categorical=True,
        unread=UNREAD_COLUMNS,
        store_behind=True,  # main waits for it before the command ends
    )
    if loaded.frame.empty:  # no launchbench case: any other suite's, case by case
        if args.by in CASE_GROUPINGS:  # launchbench's framework cases: another suite's runs have none
            for problem in loaded.problems:
                _say(f"{_PROG}: warning: {problem}", sys.stderr)
            paths = ", ".join(map(str, args.paths))
            raise CLIError(f"--by {args.by}: no launchbench run with {args.by} cases in {paths}")
        return _compare_cases(args, fact)
    from analysis.compare import compared_table, fitted_and_started, group_notes, point_columns, point_table
    from analysis.verdicts import with_run_kinds

    selection = _selected(args, loaded, apart=column)
    if args.by in CASE_GROUPINGS:
        groups, frame = _case_groups(selection.result.frame, args)
    else:
        groups = _groups(selection.result.runs, args, column)
        frame = groups.relabel(selection.result.frame)
    head = [*selection_lines(selection), *group_notes(groups)]
    warm_up = warm_up_line(selection.result.frame)  # a warm-up's rounds were left out at loading
    if warm_up:
        head.append(warm_up)
    if args.normalize:
        from analysis.sentinel import normalized

        frame, lines = normalized(frame, selection.result.runs)
        head += lines
    frame = with_run_kinds(frame, selection.result.runs)
    if args.points:
        table = point_table(frame, groups.baseline.label, args.threshold)
        return _print_cases(args, head, table, groups, point_columns(frame), ("median",))
    # The table's measured figures are judged by a fitting worker, beside the machines' fits.
    fits, start = fitted_and_started(frame, groups.baseline.label, memo, args.threshold)
    table = compared_table(frame, fits, groups.baseline.label, memo, args.threshold, start)
    return _print_figures(args, head, table, groups)


def _importer(*modules: str) -> Callable[[], None]:
    """A function that imports ``modules``: what a command needs after loading (SciPy's statistics, half a
    second; matplotlib), imported while the loader's workers parse the files (``load_runs``' ``meanwhile``)
    instead of before them. The command's own imports then find them done."""

    def load_modules() -> None:
        for module in modules:
            importlib.import_module(module)

    return load_modules


def _samples(args: argparse.Namespace, points: bool) -> Samples:
    """Which raw samples to parse: none with --no-samples; every case's to compare every point; else only
    those a fit or a compared figure reads (``analysis.fits.uses_samples``: most of a run's samples are
    of cases no figure judges, and parsing them is most of the loading time)."""
    from analysis.fits import uses_samples

    if args.no_samples:
        return False
    return True if points else uses_samples


def _selected(args: argparse.Namespace, loaded: LoadResult, apart: str | None = None) -> Selection:
    """The runs of ``loaded`` that may be pooled (``analysis.runs.select_runs``; ``apart``: a column whose
    values are kept apart); one warning per load problem; ``CLIError`` when nothing usable is left."""
    from analysis.runs import select_runs

    for problem in loaded.problems:
        _say(f"{_PROG}: warning: {problem}", sys.stderr)
    if loaded.frame.empty:
        raise CLIError(f"no usable launchbench run in {', '.join(map(str, args.paths))}")
    selection = select_runs(
        loaded,
        include_quick=args.include_quick,
        include_partial=args.include_partial,
        apart=apart,
        pool=args.pool,
    )
    if selection.result.frame.empty:
        for line in selection.left_out:
            _say(f"{_PROG}: {line}", sys.stderr)
        raise CLIError(
            f"every run was left out ({len(selection.left_out)}, each named above); --include-quick and "
            "--include-partial pool quick and partial runs"
        )
    return selection


def _groups(runs: pd.DataFrame, args: argparse.Namespace, column: str | None) -> Groups:
    """``analysis.compare.group_runs`` of the runs used; ``CLIError`` for a fact no run records or a
    ``--baseline`` that names no group."""
    from analysis.compare import group_runs
    from analysis.facts import BY_MACHINE, fact_path

    by = getattr(args, "by", BY_MACHINE)  # plot groups by machine
    if column is not None and runs[column].isna().all():
        raise CLIError(f"--by {by}: no run used records {'.'.join(fact_path(by))}")
    try:
        return group_runs(runs, by, args.baseline, column)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc


def _case_groups(frame: pd.DataFrame, args: argparse.Namespace) -> tuple[Groups, pd.DataFrame]:
    """``analysis.case_groups.group_cases`` of the rows used (``--by framework``); ``CLIError`` when no run
    holds a framework case or ``--baseline`` names no rung."""
    from analysis.case_groups import group_cases

    try:
        return group_cases(frame, args.by, args.baseline)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc


def _compare_cases(args: argparse.Namespace, fact: str | None) -> int:
    """``compare`` of runs that hold no launchbench case: every suite's cases, matched by fullname."""
    head, table, groups = _case_comparison(args, fact)
    return _print_cases(args, head, table, groups, ["fullname"], CASE_STATISTICS)


#: The statistics another suite's cases are compared by: pytest-benchmark's own (its compare sorts by min).
CASE_STATISTICS = ("min", "median")


def _case_comparison(args: argparse.Namespace, fact: str | None) -> tuple[list[str], pd.DataFrame, Groups]:
    """The runs of ``args.paths`` of any suite, case by case (``analysis.compare.case_table`` by fullname):
    the lines about the runs, the table and the groups (by ``fact``, else machine or run as ``args.by``)."""
    from analysis.compare import case_table, group_notes
    from analysis.foreign import load_cases
    from analysis.load import fact_column
    from analysis.runs import without_duplicates

    column = fact_column(fact) if fact else None
    cases = load_cases(args.paths, samples=not args.no_samples, facts=(fact,) if fact else ())
    for problem in cases.problems:
        _say(f"{_PROG}: warning: {problem}", sys.stderr)
    if cases.frame.empty:
        raise CLIError(f"no usable pytest-benchmark run in {', '.join(map(str, args.paths))}")
    left_out: list[str] = []
    runs = without_duplicates(cases.runs, left_out, column)
    frame = cases.frame[cases.frame["source"].isin(set(runs["source"]))]
    groups = _groups(runs, args, column)
    machines = runs["machine_id"].nunique()
    head = [
        f"Runs used: {len(runs)} of another suite than launchbench ({machines} machine"
        f"{'s' if machines != 1 else ''}), compared case by case (matched by fullname)",
        *left_out,
        *group_notes(groups),
    ]
    table = case_table(groups.relabel(frame), ["fullname"], groups.baseline.label, CASE_STATISTICS)
    return head, table, groups


def _print_figures(args: argparse.Namespace, head: list[str], table: pd.DataFrame, groups: Groups) -> int:
    from analysis.render import figure_lines, with_codes

    if args.format in ("csv", "json"):
        return _print_for_scripts(args, head, with_codes(table, groups.groups), groups, "figures")
    lines = figure_lines(
        table, groups.groups, groups.by, markdown=args.format == "markdown", rule=groups.rule
    )
    _say("\n".join([*head, "", *lines]))
    return 0


def _print_cases(
    args: argparse.Namespace,
    head: list[str],
    table: pd.DataFrame,
    groups: Groups,
    keys: Sequence[str],
    statistics: Sequence[str],
) -> int:
    from analysis.render import case_lines, with_codes

    if args.format in ("csv", "json"):
        return _print_for_scripts(args, head, with_codes(table, groups.groups), groups, "cases")
    markdown = args.format == "markdown"
    lines = case_lines(table, groups.groups, groups.by, keys, statistics, markdown, args.top, groups.rule)
    _say("\n".join([*head, "", *lines]))
    return 0


def _print_for_scripts(
    args: argparse.Namespace, head: list[str], table: pd.DataFrame, groups: Groups, name: str
) -> int:
    """CSV (the table alone on stdout; the lines about the runs on stderr) or JSON (everything)."""
    import pandas as pd

    from analysis.compare import ranked
    from analysis.render import csv_text, json_text

    if name == "cases":
        table = pd.concat([table[table["mark"] == "baseline"], ranked(table)])
        if args.top is not None:
            table = table.head(args.top + int((table["mark"] == "baseline").sum()))
    if args.format == "csv":
        for line in head:
            _say(f"{_PROG}: {line}", sys.stderr)
        _say(csv_text(table).rstrip("\n"))
        return 0
    document = {
        "by": groups.by,
        "baseline": groups.baseline.label,
        "baseline_rule": groups.rule,
        "groups": [
            {"code": g.code, "label": g.label, "runs": list(g.runs), "machines": list(g.machines)}
            for g in groups.groups
        ],
        "notes": head,
        name: table,
    }
    _say(json_text(document))
    return 0


def _plot(args: argparse.Namespace) -> int:
    """Write the figures of the report into DIR/figures/, the same files ``report`` writes there (without
    report.md): time per numpy call vs size with the fitted law, many small calls vs one big, the decode
    steps against their predicted bands, the groups side by side (machines, or runs or a fact's values with
    --by, as compare groups them), and the GPU launch figures and the per-op costs where those cases are
    present. Runs of another pytest-benchmark suite: their cases against the baseline group (cases), as
    ``compare`` sets them side by side. A folder that holds a report is refused: its report.md links the
    figures there, which must stay the report's own."""
    from analysis.facts import BY_MACHINE, BY_RUN, CASE_GROUPINGS

    if args.by in CASE_GROUPINGS:
        raise CLIError(
            f"--by {args.by}: plot groups runs; its ladder figure already sets every {args.by} side by side, "
            f"and compare --by {args.by} sets their figures against one another"
        )
    with _out_folder(args) as out:
        _refuse_a_report(out)
        fact = None if args.by in (BY_MACHINE, BY_RUN) else args.by
        memo = _memo(args)  # before the runs load: the code version is taken at the command's start
        loaded = _loaded(args, "analysis.compare", "analysis.figures", facts=(fact,) if fact else ())
        from analysis.figures import publish_figures

        with staging(out) as stage:
            if loaded.frame.empty:  # no launchbench case: any other suite's, case by case
                staged = _case_figures(args, stage, fact)
            else:
                staged = _launchbench_figures(args, loaded, stage, fact, memo)
            published = publish_figures(stage, out, args.force)
            paths = [out / path.relative_to(stage) for path in staged]
    for line in published.kept:
        _say(f"{_PROG}: warning: {line}", sys.stderr)
    for path in paths:
        _say(str(path))
    return 0


def _refuse_a_report(out: Path) -> None:
    """``CLIError`` when ``out`` holds a report: its report.md links the figures in ``out/figures``, and
    figures of other runs (or other groups) there would contradict it. Checked before anything is loaded."""
    from analysis.output import REPORT_NAME

    if (out / REPORT_NAME).exists():
        raise CLIError(
            f"--out {out} holds a report ({out / REPORT_NAME}) whose figures plot would replace; plot into "
            "another folder, or rerun report to redraw them"
        )


def _launchbench_figures(
    args: argparse.Namespace, loaded: LoadResult, stage: Path, fact: str | None, memo: Memo | None
) -> list[Path]:
    """``plot``'s figures of launchbench runs, grouped as ``compare`` groups them (``--by``), written under
    ``stage`` (``memo``: where results computed before are kept); the lines about the runs and the groups on
    stderr."""
    from analysis.compare import compared_table, fitted_and_started, group_notes
    from analysis.figures import write_figures
    from analysis.load import fact_column
    from analysis.runs import selection_lines
    from analysis.verdicts import with_run_kinds

    column = fact_column(fact) if fact else None
    selection = _selected(args, loaded, apart=column)
    groups = _groups(selection.result.runs, args, column)
    for line in [*selection_lines(selection), *group_notes(groups)]:
        _say(f"{_PROG}: {line}", sys.stderr)
    _say(f"{_PROG}: baseline (by {groups.by}): {groups.baseline.label}, {groups.rule}", sys.stderr)
    frame = with_run_kinds(groups.relabel(selection.result.frame), selection.result.runs)
    fits, start = fitted_and_started(frame, groups.baseline.label, memo, args.threshold, predictions=True)
    table = compared_table(frame, fits, groups.baseline.label, memo, args.threshold, start)
    return write_figures(frame, fits, table, out_dir=stage, formats=args.formats, memo=memo)


def _case_figures(args: argparse.Namespace, stage: Path, fact: str | None) -> list[Path]:
    """``plot``'s figure of another suite's runs (their cases by group), written under ``stage``."""
    from analysis.compare import case_ratios
    from analysis.figures import write_case_figures

    head, table, groups = _case_comparison(args, fact)
    for line in head:
        _say(f"{_PROG}: {line}", sys.stderr)
    ratios = case_ratios(table, ["fullname"], CASE_STATISTICS)
    return write_case_figures(ratios, groups.baseline.label, out_dir=stage, formats=args.formats)


def _formats(text: str) -> tuple[str, ...]:
    """``--formats``: a comma-separated subset of ``FORMATS``."""
    formats = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    unknown = [fmt for fmt in formats if fmt not in FORMATS]
    if unknown or not formats:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give one or more of {', '.join(FORMATS)}, comma-separated"
        )
    return formats


def _leave(code: int) -> NoReturn:
    """End the process with ``code`` once everything written is flushed, without the interpreter's teardown:
    freeing SciPy's and pandas' modules and the loaded runs object by object takes 0.2–0.4 s that the
    operating system does at once (mypy leaves the same way). Only for the command line: ``main`` returns."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe, a full disk: nothing more can be said
            code = code or 1
    os._exit(code)


if __name__ == "__main__":
    _leave(main())
