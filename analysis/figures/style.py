"""The look every figure shares, so that a reader learns it once.

- Colour and marker together name a series (never colour alone): the Okabe–Ito palette (Okabe & Ito, "Color
  Universal Design", 2008), which readers with any common colour-vision deficiency tell apart, without its
  yellow (too light on white), and one marker per series.
- Up to ``MAX_SERIES`` machines share one panel; past that every machine gets its own panel (small
  multiples), so labels and legends never pile up.
- The title states what the data show, computed from them by the figure (never a claim the data may
  contradict); the caption below says how to read the figure, which statistic it draws and which machines.
- Legends sit right of the panels; a direct label inside a panel is kept only where it fits
  (``fit_labels``).
- Log axes get "nice" ticks (as dense as the panel holds: 1-1.2-1.4-…, 1-2-…-9, 1-2-5, 1-3 or decades) from
  one at or below the smallest value, and the value a panel is read for (t0, the cost per launch) gets a
  tick of its own, so it is read off the axis, not only off a legend.

Figures are ``matplotlib.figure.Figure`` objects on an Agg canvas (no pyplot): building one changes no global
matplotlib state and needs no display.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.text import Text
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from model.units import fmt_si, fmt_time

#: Okabe–Ito colours (blue, vermillion, bluish green, reddish purple, orange, sky blue, black).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
#: One marker per series, in the order series are drawn.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h", "<", ">")
#: Machines drawn together in one panel; more get one panel each.
MAX_SERIES = 3
#: Panels per row of small multiples.
PANEL_COLUMNS = 2
WIDTH_IN = 8.0
DPI = 100
TITLE_PT = 9.5
LABEL_PT = 8
TICK_PT = 7
SMALL_PT = 7
#: Light grey of context drawn behind a panel's own series (the other machines).
CONTEXT = "0.82"
#: The salt of the SVG files' element ids (``save``): fixed, so that a figure's SVG is the same every time.
SVG_SALT = "launchbench"
#: Machine labels longer than this are replaced by M1, M2, … with a key in the caption.
_LABEL_CHARS = 30


def series_style(index: int) -> tuple[str, str]:
    """(colour, marker) of the ``index``-th series: every pair distinct for 70 series."""
    return PALETTE[index % len(PALETTE)], MARKERS[index % len(MARKERS)]


@dataclass(frozen=True)
class Machines:
    """The machines a figure shows, in order, each with a short label and its series style.

    Machine ids are "host / OS / CPU / GPU"; the fields every machine shares are said once
    (``shared``, with "…" where they differ) and each label keeps only the fields that differ. Labels
    that would still be long become M1, M2, … with the full ids in ``caption``."""

    ids: tuple[str, ...]
    labels: dict[str, str]
    shared: str = ""
    keyed: bool = False
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, ids: Iterable[object]) -> Machines:
        """The machines of ``ids`` in order of first appearance (a column of a frame of runs: one per row)."""
        if isinstance(ids, pd.Series | pd.Index):
            ids = ids.unique()  # a fleet's column holds 10⁵ rows of a few machines: its distinct values first
        ordered = tuple(dict.fromkeys(str(machine) for machine in ids))
        parts = [machine.split(" / ") for machine in ordered]
        labels = {machine: machine for machine in ordered}
        shared = ""
        if len(ordered) > 1 and len({len(fields) for fields in parts}) == 1:
            varying = [k for k in range(len(parts[0])) if len({fields[k] for fields in parts}) > 1]
            labels = {m: " / ".join(f[k] for k in varying) for m, f in zip(ordered, parts, strict=True)}
            shared = " / ".join("…" if k in varying else parts[0][k] for k in range(len(parts[0])))
        keyed = len(ordered) > 1 and (
            len(set(labels.values())) < len(ordered)
            or max(len(label) for label in labels.values()) > _LABEL_CHARS
        )
        if keyed:
            labels = {machine: f"M{k + 1}" for k, machine in enumerate(ordered)}
            shared = ""
        return cls(ordered, labels, shared, keyed, {machine: k for k, machine in enumerate(ordered)})

    def __len__(self) -> int:
        return len(self.ids)

    def label(self, machine: object) -> str:
        return self.labels[str(machine)]

    def style(self, machine: object) -> tuple[str, str]:
        return series_style(self._index[str(machine)])

    def color(self, machine: object) -> str:
        return self.style(machine)[0]

    def marker(self, machine: object) -> str:
        return self.style(machine)[1]

    @property
    def panels(self) -> bool:
        """Whether this many machines get one panel each."""
        return len(self.ids) > MAX_SERIES

    def caption(self) -> str:
        """The sentence of a caption that names the machines."""
        if len(self.ids) == 1:
            return f"Machine: {self.ids[0]}."
        if self.keyed:
            return "Machines: " + "; ".join(f"{self.labels[m]} = {m}" for m in self.ids) + "."
        names = ", ".join(self.labels[m] for m in self.ids)
        return f"{len(self.ids)} machines: {names} (each {self.shared})."

    def values(self, value_of: Callable[[str], float], fmt: Callable[[float], str]) -> str:
        """One figure over the machines for a title: the value of one machine; for two, each with its
        label; for more, the range."""
        values = {m: value_of(m) for m in self.ids}
        values = {m: v for m, v in values.items() if math.isfinite(v)}
        if not values:
            return "n/a"
        if len(values) == 1:
            (machine, value), *_ = values.items()
            return fmt(value) if len(self.ids) == 1 else f"{fmt(value)} ({self.label(machine)})"
        if len(values) == 2:
            return " and ".join(f"{fmt(v)} ({self.label(m)})" for m, v in values.items())
        return f"{fmt(min(values.values()))} – {fmt(max(values.values()))}"

    def scope(self) -> str:
        """Return " (N machines)" for a title whose figures ``values`` gave as ranges, else ""."""
        return f" ({len(self.ids)} machines)" if len(self.ids) > 2 else ""


# --- figures, panels, text ----------------------------------------------------------------------------------


def new_figure(height_in: float) -> Figure:
    """An empty figure of the common width on an Agg canvas, laid out by constrained layout."""
    figure = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def panels(
    count: int,
    panel_height_in: float,
    *,
    columns: int = PANEL_COLUMNS,
    sharex: bool = True,
    sharey: bool = True,
) -> tuple[Figure, list[Axes]]:
    """A figure of ``count`` panels, ``columns`` per row (one when ``count`` is 1), with shared axes; inner
    tick labels hidden except where no panel lies below."""
    columns = 1 if count == 1 else min(columns, count)
    rows = math.ceil(count / columns)
    figure = new_figure(1.6 + rows * panel_height_in)
    grid = figure.subplots(rows, columns, squeeze=False, sharex=sharex, sharey=sharey)
    axes = list(grid.ravel())
    for ax in axes[count:]:
        figure.delaxes(ax)
    axes = axes[:count]
    for index, ax in enumerate(axes):
        if index + columns >= count:  # the lowest panel of its column: it carries the x tick labels
            ax.xaxis.set_tick_params(labelbottom=True)
        ax.tick_params(labelsize=TICK_PT)
    return figure, axes


def finish(figure: Figure, title: str, caption: str, labels: Sequence[DirectLabel] = ()) -> Figure:
    """Set the figure's title (what the data show) and caption (how to read it), each wrapped to the width;
    lay the figure out, once for good (``lay_out``); then place its direct ``labels`` where they fit in
    that layout (``fit_labels``)."""
    usable = figure.bbox.width * 0.97
    figure.suptitle(wrap(figure, title, TITLE_PT, usable), fontsize=TITLE_PT)
    figure.supxlabel(
        wrap(figure, caption, SMALL_PT, usable), fontsize=SMALL_PT, x=0.01, ha="left", multialignment="left"
    )
    lay_out(figure)
    if labels:
        fit_labels(figure, labels)
    return figure


def lay_out(figure: Figure) -> None:
    """Run the figure's constrained layout now, and keep the positions it sets for every later draw.

    Left to matplotlib, constrained layout measures every tick label, title and legend again at each draw,
    and ``savefig`` draws a figure with a layout engine twice (once only to lay it out): a figure was laid
    out two or three times and drawn four or five times for one PNG and one SVG, the layouts a third of
    the cost. Once a figure is finished its size and texts are final, so one layout serves every file
    format and every check of a test. Nothing happens to a figure already laid out, or that has no layout
    engine."""
    engine = figure.get_layout_engine()
    if engine is None:
        return
    if figure.axes:
        with contextlib.suppress(ValueError):  # as ``Figure.draw`` runs it: a figure too small is left as is
            engine.execute(figure)
    # No engine at all (not matplotlib's "none" placeholder, with which savefig would still draw twice); the
    # rc settings that would pick another engine in its place are set aside.
    with rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        figure.set_layout_engine(None)


def panel_title(ax: Axes, text: str) -> None:
    """A panel's title above it, at the panel's top edge. Its height is fixed here (matplotlib's default
    looks for tick labels above the panel at every draw and layout, a tenth of a ten-panel figure's cost;
    no panel of these figures has labels above it)."""
    ax.set_title(text, fontsize=SMALL_PT, y=1.0)


def wrap(figure: Figure, text: str, points: float, width_px: float) -> str:
    """``text`` with line breaks so that no line is wider than ``width_px`` at ``points`` in the figure's
    font. Words are measured once each and summed (matplotlib's own ``wrap=True`` measures every prefix
    of every line at every layout pass, which makes a figure several times slower to draw); a word that
    comes again ("the", a machine's name) is measured once."""
    renderer = figure.canvas.get_renderer()
    font = FontProperties(size=points)
    widths: dict[str, float] = {}

    def width(word: str) -> float:
        if word not in widths:
            widths[word] = renderer.get_text_width_height_descent(word, font, ismath=False)[0]
        return widths[word]

    space = width("a a") - width("aa")
    lines = []
    for paragraph in text.split("\n"):
        line, used = "", 0.0
        for word in paragraph.split(" "):
            needed = width(word)
            if line and used + space + needed > width_px:
                lines.append(line)
                line, used = word, needed
            else:
                line, used = (f"{line} {word}", used + space + needed) if line else (word, needed)
        lines.append(line)
    return "\n".join(lines)


def side_legend(figure: Figure, handles: Sequence[object], labels: Sequence[str]) -> None:
    """The figure's legend, right of its panels (and of any labels right of them)."""
    if handles:
        figure.legend(handles, labels, loc="outside right center", fontsize=SMALL_PT, frameon=False)


def outer_labels(axes: Sequence[Axes]) -> None:
    """Axis labels only on the outer panels of a grid: y labels on the first column, x labels on the lowest
    panel of each column (tick labels stay where ``panels`` put them)."""
    for ax in axes:
        spec = ax.get_subplotspec()
        if spec.colspan.start > 0:
            ax.set_ylabel("")
        below = [
            other
            for other in axes
            if other.get_subplotspec().colspan.start == spec.colspan.start
            and other.get_subplotspec().rowspan.start > spec.rowspan.start
        ]
        if below:
            ax.set_xlabel("")


@dataclass(frozen=True)
class DirectLabel:
    """A label drawn at a data point and the places it may take there, tried in order by ``fit_labels``:
    (x offset, y offset in points, horizontal alignment, vertical alignment)."""

    text: Text
    places: tuple[tuple[float, float, str, str], ...]


def direct_label(
    ax: Axes,
    text: str,
    xy: tuple[float, float],
    places: Sequence[tuple[float, float, str, str]],
    **kwargs: object,
) -> DirectLabel:
    """A label at data point ``xy`` in its first place, outside the layout (``fit_labels`` moves or hides
    it)."""
    dx, dy, ha, va = places[0]
    kwargs.setdefault("fontsize", SMALL_PT)
    label = ax.annotate(text, xy, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, **kwargs)
    label.set_in_layout(False)
    return DirectLabel(label, tuple(places))


def fit_labels(figure: Figure, labels: Sequence[DirectLabel]) -> list[Text]:
    """Give each direct label (in the order given: most important first) the first of its places where it
    lies wholly inside its panel, clear of the labels placed before it and of every data marker; hide the
    labels that fit nowhere. Returns the labels kept.

    Labels stay out of the layout (``direct_label``), so moving or hiding one moves nothing else; the
    figure is laid out first (``lay_out``, which ``finish`` has done), so the places tried are final."""
    lay_out(figure)
    renderer = figure.canvas.get_renderer()
    kept: list[Text] = []
    boxes = []
    for label in labels:
        text = label.text
        markers = _marker_points(text.axes)
        for dx, dy, ha, va in label.places:
            text.set_position((dx, dy))
            text.set_ha(ha)
            text.set_va(va)
            box = text.get_window_extent(renderer)
            inside = text.axes.bbox.contains(box.x0, box.y0) and text.axes.bbox.contains(box.x1, box.y1)
            clear = not any(box.overlaps(other) for other in boxes) and not any(
                box.x0 - r <= x <= box.x1 + r and box.y0 - r <= y <= box.y1 + r for x, y, r in markers
            )
            if inside and clear:
                kept.append(text)
                boxes.append(box)
                break
        else:
            text.set_visible(False)
    return kept


def _marker_points(ax: Axes) -> list[tuple[float, float, float]]:
    """(x, y, radius) in pixels of every data marker drawn in ``ax``."""
    points = []
    for line in ax.get_lines():
        if not line.get_visible() or line.get_marker() in (None, "", " ", "None", "none"):
            continue
        radius = line.get_markersize() / 2 * ax.figure.dpi / 72
        xy = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float))
        points += [(x, y, radius) for x, y in xy if np.isfinite(x) and np.isfinite(y)]
    return points


# --- axes and ticks -----------------------------------------------------------------------------------------


def trim(text: str) -> str:
    """'50.0 ms' -> '50 ms', '2.50 µs' -> '2.5 µs': tick labels without trailing zeros, so a column of
    ticks reads alike."""
    number, _, unit = text.partition(" ")
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    return f"{number} {unit}".strip()


def time_tick(seconds: float) -> str:
    """A tick label of seconds: "300 ns", "1 µs", "2.5 ms"."""
    return trim(fmt_time(seconds, 3)) if seconds > 0 else "0"


def count_tick(value: float) -> str:
    """1, 10, 100, 1 k, 4 M, … for ticks of counts."""
    return trim(fmt_si(value, "", 3)) if value >= 1000 else f"{value:g}"


def ratio_tick(value: float) -> str:
    """A tick label of a ratio: "0.9×", "1×", "20×"."""
    return f"{value:.3g}×"


def ratio_axis(ax: Axes, ratios: object, label: str) -> None:
    """The x axis of a figure of ratios to a reference (decode steps to their bound, groups to a baseline):
    logarithmic, with 1× among its ticks and a vertical grid line at each tick."""
    log_axis(ax, "x", ratios, ratio_tick, label, max_ticks(5.5, 1.8), include=[1.0])
    ax.tick_params(axis="x", labelsize=TICK_PT)
    ax.grid(True, axis="x", alpha=0.3)


def nice_log_ticks(low: float, high: float, max_ticks: int) -> list[float]:
    """Ticks of a log axis from the last "nice" value at or below ``low`` (so the smallest value is read off
    the axis) up to ``high``, and the next nice value above it where that lies within 1.3 × ``high``: the
    densest of 1-1.2-1.4-…-9, 1-2-…-9, 1-2-5, 1-3 and decades (or every k-th decade) that fits in
    ``max_ticks``, counted where the ticks lie closest: on a log axis 8 and 9 lie six times closer than 1
    and 2, and each label needs the room of one of ``max_ticks`` spread evenly along the axis."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    fine = (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
    for subs in (fine, tuple(float(m) for m in range(1, 10)), (1.0, 2.0, 5.0), (1.0, 3.0), (1.0,)):
        candidates = [m * 10.0**e for e in range(first - 1, last + 2) for m in subs]
        start = max(t for t in candidates if t <= low * (1 + 1e-9))
        above = min(t for t in candidates if t >= high * (1 - 1e-9))
        stop = above if above <= 1.3 * high else max(t for t in candidates if t <= high)
        ticks = [t for t in candidates if start <= t <= stop]
        shown = math.log10(max(stop, high) / min(start, low)) + 2 * _pad_decades(low, high)
        gaps = [math.log10(b / a) for a, b in itertools.pairwise(ticks)]
        if len(ticks) <= max_ticks and (not gaps or min(gaps) >= shown / max_ticks):
            return ticks
    step = math.ceil((last - first + 1) / max_ticks)
    return [10.0**e for e in range(first, last + step, step) if 10.0**e <= 2 * high]


def log_axis(
    ax: Axes,
    which: str,
    values: object,
    fmt: Callable[[float], str],
    label: str,
    max_ticks: int,
    *,
    include: Sequence[float] = (),
    marked: Sequence[float] = (),
    limits: tuple[float, float] | None = None,
) -> tuple[float, float]:
    """Make ``ax``'s ``which`` ("x" or "y") axis logarithmic over the finite positive ``values`` (and
    ``include``), with ``nice_log_ticks`` labelled by ``fmt``; the limits lie just outside the outer ticks,
    or are ``limits`` where given (panels that must agree). ``marked``: values that get a tick of their
    own (the figure a panel is read for), nice ticks too close to them dropped. Returns the limits."""
    data = np.concatenate([np.asarray(values, dtype=float).ravel(), np.asarray(include, dtype=float)])
    data = data[np.isfinite(data) & (data > 0)]
    low, high = (float(data.min()), float(data.max())) if data.size else (1.0, 10.0)
    if high / low < 1.1:  # (nearly) one value: room for a tick either side
        low, high = low / 1.1, high * 1.1
    ticks = nice_log_ticks(low, high, max_ticks)
    if limits is None:
        pad = 10 ** _pad_decades(min(ticks[0], low), max(ticks[-1], high))
        limits = (min(ticks[0], low) / pad, max(ticks[-1], high) * pad)
    # A tick label takes about 1/max_ticks of the axis: a marked value nearer an earlier one than that is
    # not marked (the title still gives it), and nice ticks nearer a marked one go.
    room = (math.log10(limits[1]) - math.log10(limits[0])) / max_ticks
    apart: list[float] = []
    for value in marked:
        inside = math.isfinite(value) and limits[0] < value < limits[1]
        if inside and all(abs(math.log10(value / other)) > room for other in apart):
            apart.append(value)
    ticks = [t for t in ticks if all(abs(math.log10(t / m)) > room for m in apart)]
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_locator(FixedLocator(sorted([*ticks, *apart])))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _: fmt(value)))
    (ax.set_xlim if which == "x" else ax.set_ylim)(*limits)
    axis.set_label_text(label, fontsize=LABEL_PT)
    return limits


def _pad_decades(low: float, high: float) -> float:
    """The room a log axis leaves beyond its outer ticks and values, decades: a factor 1.15, or 3 % of the
    span where that is more, so that a marker at the outermost value is drawn whole on a long axis too."""
    return max(math.log10(1.15), 0.03 * math.log10(high / low))


def max_ticks(length_in: float, per_inch: float = 3.0) -> int:
    """How many tick labels fit along an axis ``length_in`` inches long (at least 3)."""
    return max(3, int(length_in * per_inch))


def save(figure: Figure, out_dir: Path, stem: str, formats: Sequence[str]) -> list[Path]:
    """Write ``figure`` as ``out_dir/stem.<format>`` for each format ("png", "svg"); return the paths.

    The files depend on the figure alone: no date or software version in them, and the SVG's element ids
    are hashed with a fixed salt (matplotlib's default salt is random), so the same figure drawn twice — in
    one process or in a worker of ``analysis.figures.write_figures`` — gives the same bytes. The layout is
    computed once for all formats (``lay_out``; ``finish`` has done it for the project's figures)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lay_out(figure)
    paths = []
    for fmt in formats:
        path = out_dir / f"{stem}.{fmt}"
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        # PNG at zlib's level 1: a third of the encoding time of Pillow's default (6), files 1-5 % larger.
        options = {"pil_kwargs": {"compress_level": 1}} if fmt == "png" else {}
        with rc_context({"svg.hashsalt": SVG_SALT}):
            figure.savefig(path, format=fmt, metadata=metadata, **options)
        paths.append(path)
    return paths
