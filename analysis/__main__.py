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
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from analysis.load import LoadResult, Samples, load_runs
from analysis.runs import Selection, select_runs, selection_lines

if TYPE_CHECKING:
    import pandas as pd

    from analysis.compare import Groups

_PROG = "python -m analysis"
#: ``compare``'s output formats (``analysis.render``): for people, then for scripts.
FORMATS = ("text", "markdown", "csv", "json")


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
        "compare",
        help="groups of runs side by side: machines, runs or a fact's values (ratios to a baseline, "
        "significance); any pytest-benchmark suite case by case",
        description=_compare.__doc__,
    )
    _add_paths(compare)
    _add_compare_options(compare)
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


def _add_compare_options(parser: argparse.ArgumentParser) -> None:
    from analysis.facts import ALIASES

    parser.add_argument(
        "--by",
        default="machine",
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
        "unique part of it); default: the first machine loaded, the earliest run or value",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text or markdown for people; csv or json (SI units, p-values) for scripts (default: text)",
    )
    parser.add_argument(
        "--top",
        type=_positive_int,
        default=None,
        metavar="N",
        help="show the first N case rows only (significant differences first, then by ratio)",
    )
    parser.add_argument(
        "--points",
        action="store_true",
        help="launchbench runs: compare every measured point (median per timed call) instead of the fitted "
        "figures",
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def _add_baseline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline",
        metavar="MACHINE",
        default=None,
        help="machine id (or a unique part of it) the others are compared with (default: the first loaded)",
    )


def _load(args: argparse.Namespace, *modules: str) -> Selection:
    """Load ``args.paths`` (importing ``modules`` meanwhile, ``_importer``) and keep the runs that may be
    pooled (``_selected``); raise ``CLIError`` when ``args.baseline`` names no machine of the runs used."""
    loaded = load_runs(args.paths, samples=_samples(args, points=False), meanwhile=_importer(*modules))
    selection = _selected(args, loaded)
    from analysis.compare import choose_baseline

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
    _check_out(args.out, args.paths)
    selection = _load(args, "analysis.report")
    from analysis.report import write_report

    written = write_report(selection, out_dir=args.out, baseline=args.baseline)
    used, left_out = len(selection.result.runs), len(selection.left_out)
    print(
        f"wrote {written.path} ({len(written.figures)} figure files; {used} run(s) used, {left_out} left out)"
    )
    return 0


def _compare(args: argparse.Namespace) -> int:
    """Set groups of runs side by side — machines (default), single runs in time order, or the values of a
    fact such as the numpy, BLAS, CuPy or driver version — with each fitted figure's ratio to the baseline
    group and whether the difference is significant (Mann-Whitney U on the raw samples; 'not judged' where
    none were saved). Runs of any other pytest-benchmark suite are compared case by case (matched by
    fullname, min and median). Runs saved twice count once per group; quick and partial runs are left out
    unless included, and with --by run each is its own column, never pooled."""
    from analysis.facts import BY_MACHINE, BY_RUN
    from analysis.load import fact_column

    fact = None if args.by in (BY_MACHINE, BY_RUN) else args.by
    column = fact_column(fact) if fact else None
    samples = _samples(args, points=args.points)
    meanwhile = _importer("analysis.compare", "analysis.render")
    loaded = load_runs(args.paths, samples=samples, facts=(fact,) if fact else (), meanwhile=meanwhile)
    if loaded.frame.empty:  # no launchbench case: any other suite's, case by case
        return _compare_cases(args, fact)
    from analysis.compare import figure_table, group_notes, point_columns, point_table
    from analysis.fits import fit_all

    selection = _selected(args, loaded, apart=column)
    groups = _groups(selection.result.runs, args, column)
    frame = groups.relabel(selection.result.frame)
    head = [*selection_lines(selection), *group_notes(groups)]
    if args.points:
        table = point_table(frame, groups.baseline.label)
        return _print_cases(args, head, table, groups, point_columns(frame), ("median",))
    table = figure_table(frame, fit_all(frame), groups.baseline.label)
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
    for problem in loaded.problems:
        print(f"{_PROG}: warning: {problem}", file=sys.stderr)
    if loaded.frame.empty:
        raise CLIError(f"no usable launchbench run in {', '.join(map(str, args.paths))}")
    selection = select_runs(
        loaded, include_quick=args.include_quick, include_partial=args.include_partial, apart=apart
    )
    if selection.result.frame.empty:
        for line in selection.left_out:
            print(f"{_PROG}: {line}", file=sys.stderr)
        raise CLIError(
            f"every run was left out ({len(selection.left_out)}, each named above); --include-quick and "
            "--include-partial pool quick and partial runs"
        )
    return selection


def _groups(runs: pd.DataFrame, args: argparse.Namespace, column: str | None) -> Groups:
    """``analysis.compare.group_runs`` of the runs used; ``CLIError`` for a fact no run records or a
    ``--baseline`` that names no group."""
    from analysis.compare import group_runs
    from analysis.facts import fact_path

    if column is not None and runs[column].isna().all():
        path = ".".join(fact_path(args.by))
        raise CLIError(f"--by {args.by}: no run used records {path}")
    try:
        return group_runs(runs, args.by, args.baseline, column)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc


def _compare_cases(args: argparse.Namespace, fact: str | None) -> int:
    """``compare`` of runs that hold no launchbench case: every suite's cases, matched by fullname."""
    from analysis.compare import case_table, group_notes
    from analysis.foreign import load_cases
    from analysis.load import fact_column
    from analysis.runs import without_duplicates

    column = fact_column(fact) if fact else None
    cases = load_cases(args.paths, samples=not args.no_samples, facts=(fact,) if fact else ())
    for problem in cases.problems:
        print(f"{_PROG}: warning: {problem}", file=sys.stderr)
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
    table = case_table(groups.relabel(frame), ["fullname"], groups.baseline.label, ("min", "median"))
    return _print_cases(args, head, table, groups, ["fullname"], ("min", "median"))


def _print_figures(args: argparse.Namespace, head: list[str], table: pd.DataFrame, groups: Groups) -> int:
    from analysis.render import figure_lines, with_codes

    if args.format in ("csv", "json"):
        return _print_for_scripts(args, head, with_codes(table, groups.groups), groups, "figures")
    lines = figure_lines(table, groups.groups, groups.by, markdown=args.format == "markdown")
    print("\n".join([*head, "", *lines]))
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
    lines = case_lines(table, groups.groups, groups.by, keys, statistics, markdown, args.top)
    print("\n".join([*head, "", *lines]))
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
            print(f"{_PROG}: {line}", file=sys.stderr)
        print(csv_text(table), end="")
        return 0
    document = {
        "by": groups.by,
        "baseline": groups.baseline.label,
        "groups": [
            {"code": g.code, "label": g.label, "runs": list(g.runs), "machines": list(g.machines)}
            for g in groups.groups
        ],
        "notes": head,
        name: table,
    }
    print(json_text(document))
    return 0


def _plot(args: argparse.Namespace) -> int:
    """Write the figures (PNG and SVG) into DIR: time vs size with the fitted law, measured vs predicted,
    machines side by side, and the GPU/decode figures when those cases are present."""
    _check_out(args.out, args.paths)
    selection = _load(args, "analysis.compare", "analysis.plots")
    from analysis.compare import figure_table
    from analysis.fits import fit_all
    from analysis.plots import plot_all

    for line in selection_lines(selection):
        print(f"{_PROG}: {line}", file=sys.stderr)
    frame = selection.result.frame
    fits = fit_all(frame)
    paths = plot_all(frame, fits, figure_table(frame, fits, args.baseline), out_dir=args.out)
    for path in paths:
        print(path)
    return 0


def _leave(code: int) -> NoReturn:
    """End the process with ``code`` once everything written is flushed, without the interpreter's teardown:
    freeing SciPy's and pandas' modules and the loaded runs object by object takes 0.2–0.4 s that the
    operating system does at once (mypy leaves the same way). Only for the command line: ``main`` returns."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: nothing more can be said
        code = code or 1
    os._exit(code)


if __name__ == "__main__":
    _leave(main())
