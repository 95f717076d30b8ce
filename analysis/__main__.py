"""``python -m analysis``: saved runs -> machine table, figures, Markdown report.

The only module of ``analysis`` that prints or exits. Every expected failure is a ``CLIError``, raised where
the input is checked (paths, ``--out``, ``--baseline``) and turned into one line on stderr and exit code 1 in
``main``. Problems with single input files are warnings (one line each) and the rest is used; the exit
code is non-zero only when no usable launchbench case is left.

Unlike runs are never pooled (``analysis.runs``): by default every command uses the complete full runs,
counts a run saved twice once, and names each run it leaves out (quick, partial) with the flag that
includes it. ``compare`` prints which runs it used above its table, ``report`` writes it into the report,
``plot`` prints it on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis.compare import choose_baseline
from analysis.load import load_runs
from analysis.runs import Selection, select_runs, selection_lines

_PROG = "python -m analysis"


class CLIError(Exception):
    """An error the user can fix from the command line; its message is one line."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; return the process exit code (0 ok, 1 nothing usable or bad input, 2 usage)."""
    args = _parser().parse_args(argv)
    try:
        return args.command(args)
    except CLIError as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    report.add_argument(
        "--out", type=Path, default=Path("report"), help="output folder (default: %(default)s)"
    )
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

    plot = commands.add_parser("plot", help="write the figures (PNG and SVG)", description=_plot.__doc__)
    _add_paths(plot)
    _add_baseline(plot)
    plot.add_argument("--out", type=Path, default=Path("report"), help="output folder (default: %(default)s)")
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
    loaded = load_runs(args.paths, samples=not args.no_samples)
    for problem in loaded.problems:
        print(f"{_PROG}: warning: {problem}", file=sys.stderr)
    if loaded.frame.empty:
        raise CLIError(f"no usable launchbench run in {', '.join(map(str, args.paths))}")
    selection = select_runs(loaded, include_quick=args.include_quick, include_partial=args.include_partial)
    if selection.result.frame.empty:
        for line in selection.left_out:
            print(f"{_PROG}: {line}", file=sys.stderr)
        raise CLIError(
            f"every run was left out ({len(selection.left_out)}, each named above); --include-quick and "
            "--include-partial pool quick and partial runs"
        )
    try:
        choose_baseline(list(dict.fromkeys(selection.result.frame["machine_id"])), args.baseline)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    return selection


def _check_out(out: Path, paths: Sequence[str]) -> None:
    """Refuse an output folder inside an input folder: saved-run storage is only ever read."""
    target = out.resolve()
    for raw in paths:
        source = Path(raw)
        if source.is_dir() and target.is_relative_to(source.resolve()):
            raise CLIError(f"--out {out} lies inside the input folder {source}; storage is only read")


def _report(args: argparse.Namespace) -> int:
    """Write DIR/report.md: inputs, machines, fitted figures with confidence intervals, measured vs
    predicted with errors, the machine comparison, and the figures (PNG and SVG) it links."""
    from analysis.report import write_report

    _check_out(args.out, args.paths)
    selection = _load(args)
    written = write_report(selection, out_dir=args.out, baseline=args.baseline)
    used, left_out = len(selection.result.runs), len(selection.left_out)
    print(
        f"wrote {written.path} ({len(written.figures)} figure files; {used} run(s) used, {left_out} left out)"
    )
    return 0


def _compare(args: argparse.Namespace) -> int:
    """Print one table of the fitted figures per machine with ratios to the baseline machine and whether each
    difference is significant (Mann-Whitney U on the raw samples; 'not judged' where none were saved)."""
    from analysis.report import comparison_markdown

    selection = _load(args)
    lines = comparison_markdown(selection.result.frame, baseline=args.baseline, points=args.points)
    print("\n".join([*selection_lines(selection), "", *lines]))
    return 0


def _plot(args: argparse.Namespace) -> int:
    """Write the figures (PNG and SVG) into DIR: time vs size with the fitted law, measured vs predicted,
    machines side by side, and the GPU/decode figures when those cases are present."""
    from analysis.compare import figure_table
    from analysis.fits import fit_all
    from analysis.plots import plot_all

    _check_out(args.out, args.paths)
    selection = _load(args)
    for line in selection_lines(selection):
        print(f"{_PROG}: {line}", file=sys.stderr)
    frame = selection.result.frame
    fits = fit_all(frame)
    paths = plot_all(frame, fits, figure_table(frame, fits, args.baseline), out_dir=args.out)
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
