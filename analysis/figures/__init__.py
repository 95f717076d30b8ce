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

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from analysis.figures import cpu, decode, gpu, ladder, machines
from analysis.figures.style import save
from analysis.fits import Fits
from analysis.output import FIGURE_FORMATS as FORMATS
from analysis.output import Published, publish

#: The folder of ``OUT`` the figures are written into, by ``report`` and ``plot`` alike.
FIGURES_DIR = "figures"
#: The owner of the figure files in the output folder's manifest (``analysis.output``): ``report`` and
#: ``plot`` draw the same files into the same place, so either may replace what the other wrote.
FIGURES_OWNER = "figures"


def build_figures(frame: pd.DataFrame, fits: Fits, table: pd.DataFrame) -> dict[str, Figure]:
    """Every figure the data allow, by file stem, in reading order; ``fits`` is ``fit_all(frame)`` and
    ``table`` ``analysis.compare.figure_table`` of the same frame."""
    builders = {
        "time_vs_size": lambda: cpu.time_vs_size(frame, fits.host),
        "many_vs_one": lambda: cpu.many_vs_one(fits.many_vs_one),
        "op_costs": lambda: cpu.op_costs(frame, fits.host),
        "launch_vs_graph": lambda: gpu.launch_vs_graph(frame, fits.launch),
        "launch_ladder": lambda: gpu.launch_ladder(frame, fits.launch),
        "knee": lambda: gpu.knee(fits.spin, fits.launch),
        "decode_step": lambda: gpu.decode_demo(fits.decode_demo),
        "decode_bands": lambda: decode.decode_bands(fits.decode_steps),
        "machines": lambda: machines.machines(table),
        "ladder": lambda: ladder.ladder(frame),
    }
    built = {stem: build() for stem, build in builders.items()}
    return {stem: figure for stem, figure in built.items() if figure is not None}


def write_figures(
    frame: pd.DataFrame, fits: Fits, table: pd.DataFrame, out_dir: Path, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """Draw ``build_figures`` into ``out_dir/FIGURES_DIR``, each in every one of ``formats``; return the
    paths written."""
    paths = []
    for stem, figure in build_figures(frame, fits, table).items():
        paths += save(figure, out_dir / FIGURES_DIR, stem, formats)
    return paths


def write_case_figures(
    ratios: pd.DataFrame, baseline: str, out_dir: Path, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """Draw another suite's cases against the baseline group (``machines.cases`` of
    ``analysis.compare.case_ratios``) into ``out_dir/FIGURES_DIR`` as ``cases``; return the paths written
    (none when no case has a ratio)."""
    figure = machines.cases(ratios, baseline, ("median", "min"))
    return save(figure, out_dir / FIGURES_DIR, "cases", formats) if figure is not None else []


def publish_figures(stage: Path, out: Path, force: bool) -> Published:
    """Move the figures drawn under ``stage/FIGURES_DIR`` into ``out/FIGURES_DIR`` as ``FIGURES_OWNER``'s
    files (``analysis.output.publish``): stale figures of an earlier report or plot are removed, a file
    either did not write is refused unless ``force``."""
    return publish(stage, out, FIGURES_OWNER, force, part=FIGURES_DIR)
