"""``python -m analysis``: saved runs -> machine table, figures, Markdown report.

The only module of ``analysis`` that prints or exits. Every expected failure is a ``CLIError`` (or an
``analysis.output.OutputError`` about the output folder), raised where the input is checked (paths,
``--out``, ``--baseline``) and turned into one line on stderr and exit code 1 in ``main``; a bad command
line is one line and exit code 2. Problems with single input files are warnings (one line each) and the
rest is used; the exit code is non-zero only when no usable launchbench case is left.

``--out`` is checked before anything is loaded (``analysis.output.check_out``): a folder that can be
created and written, outside every input's run storage; ``report`` and ``plot`` replace only their own
files in it. Ctrl-C, SIGTERM and SIGHUP end a command with one line and exit code 128 + the signal's
number, after the loader's worker processes have ended; a folder ``--out`` created for a command that
wrote nothing is removed again. The commands import pandas and the rest of ``analysis`` when they run, so
that ``--help`` is quick and a Ctrl-C while they load is handled too. Every line goes through
``model.units.text_for_stream``, so a terminal that cannot encode µ or × gets "us" and "x".

Unlike runs are never pooled (``analysis.runs``): by default every command uses the complete full runs,
counts a run saved twice once, and names each run it leaves out (quick, partial) with the flag that
includes it. ``compare`` prints which runs it used above its table, ``report`` writes it into the report,
``plot`` prints it on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, NoReturn, TextIO

from analysis.output import FIGURE_FORMATS as FORMATS
from analysis.output import OutputError, check_out, check_replaceable, remove_created, staging
from model.units import text_for_stream

if TYPE_CHECKING:
    from analysis.runs import Selection

_PROG = "python -m analysis"


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
    """Print one line (or several) to ``stream`` (stdout), in spellings the stream can encode."""
    stream = stream or sys.stdout
    stream.write(text_for_stream(text, stream) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; return the process exit code (0 ok, 1 nothing usable or bad input, 2 usage,
    128 + N when stopped by signal N)."""
    with _stop_signals():
        try:
            args = _parser().parse_args(argv)
            return args.command(args)
        except _UsageError as exc:
            _say(str(exc), sys.stderr)
            return 2
        except (CLIError, OutputError) as exc:
            _say(f"{_PROG}: error: {exc}", sys.stderr)
            return 1
        except KeyboardInterrupt as exc:
            signum = getattr(exc, "signum", signal.SIGINT)
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
    report.set_defaults(command=_report)

    compare = commands.add_parser(
        "compare", help="print the machine table (ratios to a baseline)", description=_compare.__doc__
    )
    _add_paths(compare)
    _add_baseline(compare)
    compare.add_argument(
        "--points", action="store_true", help="also print every measured point per machine, with its test"
    )
    compare.set_defaults(command=_compare)

    plot = commands.add_parser(
        "plot", help="write the report's figures into DIR/figures/ (PNG and SVG)", description=_plot.__doc__
    )
    _add_paths(plot)
    _add_baseline(plot)
    _add_out(plot, "the figures")
    plot.add_argument(
        "--formats",
        type=_formats,
        default=FORMATS,
        metavar="FORMATS",
        help=f"comma-separated file formats to write, of {', '.join(FORMATS)} (default: {','.join(FORMATS)})",
    )
    plot.set_defaults(command=_plot)
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
        "--include-partial",
        action="store_true",
        help="pool the finished cases of partial runs (interrupted, or with cases that did not finish; left "
        "out by default); their unfinished cases stay out",
    )


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


def _add_baseline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline",
        metavar="MACHINE",
        default=None,
        help="machine id (or a unique part of it) the others are compared with (default: the first loaded)",
    )


def _load(args: argparse.Namespace) -> Selection:
    """Load ``args.paths`` and keep the runs that may be pooled; print one warning per problem; raise
    ``CLIError`` when nothing usable is left or ``args.baseline`` names no machine of the runs used."""
    from analysis.compare import choose_baseline
    from analysis.load import load_runs
    from analysis.runs import select_runs

    loaded = load_runs(args.paths, samples=not args.no_samples)
    for problem in loaded.problems:
        _say(f"{_PROG}: warning: {problem}", sys.stderr)
    if loaded.frame.empty:
        raise CLIError(f"no usable launchbench run in {', '.join(map(str, args.paths))}")
    selection = select_runs(loaded, include_quick=args.include_quick, include_partial=args.include_partial)
    if selection.result.frame.empty:
        for line in selection.left_out:
            _say(f"{_PROG}: {line}", sys.stderr)
        raise CLIError(
            f"every run was left out ({len(selection.left_out)}, each named above); --include-quick and "
            "--include-partial pool quick and partial runs"
        )
    try:
        choose_baseline(list(dict.fromkeys(selection.result.frame["machine_id"])), args.baseline)
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


def _report(args: argparse.Namespace) -> int:
    """Write DIR/report.md: inputs, machines, fitted figures with confidence intervals, measured vs
    predicted with errors, the machine comparison, and the figures (PNG and SVG) it links."""
    from analysis.report import OWNER, REPORT_NAME, write_report

    with _out_folder(args) as out:
        check_replaceable(out, OWNER, [REPORT_NAME], args.force)
        selection = _load(args)
        written = write_report(selection, out_dir=out, baseline=args.baseline, force=args.force)
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
    """Print one table of the fitted figures per machine with ratios to the baseline machine and whether each
    difference is significant (Mann-Whitney U on the raw samples; 'not judged' where none were saved)."""
    from analysis.report import comparison_markdown
    from analysis.runs import selection_lines

    selection = _load(args)
    lines = comparison_markdown(selection.result.frame, baseline=args.baseline, points=args.points)
    _say("\n".join([*selection_lines(selection), "", *lines]))
    return 0


def _plot(args: argparse.Namespace) -> int:
    """Write the figures of the report into DIR/figures/, the same files ``report`` writes there (without
    report.md): time per numpy call vs size with the fitted law, many small calls vs one big, the decode
    steps against their predicted bands, the machines side by side, and the GPU launch figures and the
    per-op costs where those cases are present."""
    from analysis.compare import figure_table, fit_all
    from analysis.figures import publish_figures, write_figures
    from analysis.runs import selection_lines

    with _out_folder(args) as out:
        selection = _load(args)
        for line in selection_lines(selection):
            _say(f"{_PROG}: {line}", sys.stderr)
        frame = selection.result.frame
        fits = fit_all(frame)
        table = figure_table(frame, fits, args.baseline)
        with staging(out) as stage:
            staged = write_figures(frame, fits, table, out_dir=stage, formats=args.formats)
            published = publish_figures(stage, out, args.force)
            paths = [out / path.relative_to(stage) for path in staged]
    for line in published.kept:
        _say(f"{_PROG}: warning: {line}", sys.stderr)
    for path in paths:
        _say(str(path))
    return 0


def _formats(text: str) -> tuple[str, ...]:
    """``--formats``: a comma-separated subset of ``FORMATS``."""
    formats = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    unknown = [fmt for fmt in formats if fmt not in FORMATS]
    if unknown or not formats:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give one or more of {', '.join(FORMATS)}, comma-separated"
        )
    return formats


if __name__ == "__main__":
    raise SystemExit(main())
