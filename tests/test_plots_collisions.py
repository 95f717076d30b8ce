"""Every figure, drawn from the committed real runs (all together, and each file of tests/data alone, whatever
files are there), from fan-out fleets of 1, 2, 4 and 10 machines, and from a SYNTHETIC run with the GPU and
per-op cases (built here, never saved as data), keeps its texts apart: no two text artists (titles, captions,
axis labels, tick labels, legend texts, direct labels) overlap, and none leaves the canvas; and no data marker
is cut by the edge of its panel. The texts checked are those the renderer actually draws (tick labels of ticks
outside the view, hidden and empty texts are not drawn); their boxes are ``get_window_extent`` after the draw
(a rotated text's box is the upright box around it).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from analysis.compare import figure_table
from analysis.figures import build_figures
from analysis.figures.style import new_figure
from analysis.fits import fit_all
from analysis.load import SUITE, load_runs
from analysis.runs import select_runs
from benchmarks.test_numpy_ops import FLOOR, FLOOR_CTX, floor_step
from model.launch import PLANS
from model.llm import LLAMA32_1B
from tests.test_report import synthetic_gpu_run

ROOT = Path(__file__).parent.parent
DATA = ROOT / "tests" / "data"
#: Every committed run, whatever its name (the committed runs are replaced as the suite grows): today's code's
#: runs under tests/data/runs, the older layouts the tests still need beside them.
REAL_RUNS = sorted(DATA.rglob("*.json"))
#: Today's runs: what README's figures (docs/figures) are drawn from.
TODAY = DATA / "runs"


def _cases(path: Path) -> int:
    return len(json.loads(path.read_text(encoding="utf-8"))["benchmarks"])


#: The committed run with the most cases (a full run of the whole CPU suite): the base of the fleets and of
#: the SYNTHETIC run.
REAL_RUN = max(REAL_RUNS, key=lambda path: (_cases(path), path.name))
FLEETS = (1, 2, 4, 10)
#: Pixels two boxes may share (anti-aliasing) before they count as overlapping.
TOLERANCE_PX = 0.5
#: A GPU whose datasheet ``model.hardware`` knows, so that the synthetic decode steps get a prediction.
SYNTHETIC_GPU_NAME = "NVIDIA H100 80GB HBM3"


# --- the checker --------------------------------------------------------------------------------------------


def drawn_texts(figure: Figure) -> list[tuple[Text, Bbox]]:
    """The texts the renderer draws in ``figure`` (visible, not blank), each with its box in pixels."""
    drawn: dict[int, Text] = {}
    draw = Text.draw

    def recording(self: Text, renderer: object) -> None:
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn[id(self)] = self

    with mock.patch.object(Text, "draw", recording):
        figure.draw_without_rendering()  # the full draw and layout, without rasterising
    renderer = figure.canvas.get_renderer()
    return [(text, text.get_window_extent(renderer)) for text in drawn.values()]


def cut_markers(figure: Figure) -> list[str]:
    """One line per data marker that the edge of its panel cuts: its disc (marker size) not wholly inside the
    panel, where its centre is inside (a point at the axis edge, half drawn).

    ``figure`` must have been drawn since it last changed (``figure_problems`` checks it right after
    ``text_problems`` drew it): its panels are then where a draw puts them. A second draw moved no panel of
    any figure here (measured), so it only cost the draw's time."""
    problems = []
    for ax in figure.axes:
        box = ax.bbox
        for line in ax.get_lines():
            if not line.get_visible() or line.get_marker() in (None, "", " ", "None", "none"):
                continue
            radius = line.get_markersize() / 2 * figure.dpi / 72
            xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
            for x, y in ax.transData.transform(xy[np.isfinite(xy).all(axis=1)]):
                inside = box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1
                whole = (
                    box.x0 - TOLERANCE_PX <= x - radius
                    and x + radius <= box.x1 + TOLERANCE_PX
                    and box.y0 - TOLERANCE_PX <= y - radius
                    and y + radius <= box.y1 + TOLERANCE_PX
                )
                if inside and not whole:
                    problems.append(
                        f"marker cut by the panel's edge at ({x:.0f}, {y:.0f}) px in {ax.get_title()!r}"
                    )
    return problems


def text_problems(figure: Figure) -> list[str]:
    """One line per pair of drawn texts whose boxes overlap and per text that leaves the canvas."""
    texts = drawn_texts(figure)
    canvas = figure.bbox
    problems = []
    for text, box in texts:
        if (
            box.x0 < canvas.x0 - TOLERANCE_PX
            or box.y0 < canvas.y0 - TOLERANCE_PX
            or box.x1 > canvas.x1 + TOLERANCE_PX
            or box.y1 > canvas.y1 + TOLERANCE_PX
        ):
            problems.append(f"leaves the canvas: {text.get_text()!r} at {box.bounds}")
    for index, (first, a) in enumerate(texts):
        for second, b in texts[index + 1 :]:
            if (
                min(a.x1, b.x1) - max(a.x0, b.x0) > TOLERANCE_PX
                and min(a.y1, b.y1) - max(a.y0, b.y0) > TOLERANCE_PX
            ):
                problems.append(f"overlap: {first.get_text()!r} and {second.get_text()!r}")
    return problems


# --- the data -----------------------------------------------------------------------------------------------


def _fanout(source: Path, out: Path, machines: int, copies: int) -> Path:
    """``tools/fanout_runs.py``: ``copies`` perturbed copies of ``source`` over ``machines`` machine ids."""
    spec = importlib.util.spec_from_file_location("fanout_runs", ROOT / "tools" / "fanout_runs.py")
    fanout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fanout)
    args = [str(source), str(out), "--copies", str(copies), "--machines", str(machines), "--no-data"]
    assert fanout.main(args) == 0
    return out


def _bench(rng: np.random.Generator, name: str, per_call_s: float, **extra: object) -> dict:
    """A pytest-benchmark entry of SYNTHETIC timings: ``per_call_s`` with 1 % log-normal noise, 20 rounds."""
    data = np.sort(per_call_s * rng.lognormal(0.0, 0.01, 20))
    q1, median, q3 = np.quantile(data, [0.25, 0.5, 0.75])
    stats = {
        "min": float(data[0]),
        "max": float(data[-1]),
        "mean": float(data.mean()),
        "stddev": float(data.std(ddof=1)),
        "median": float(median),
        "q1": float(q1),
        "q3": float(q3),
        "iqr": float(q3 - q1),
        "rounds": int(data.size),
        "iterations": 1,
        "ops": float(1 / data.mean()),
    }
    return {
        "name": name,
        "fullname": f"synthetic::{name}",
        "group": None,
        "extra_info": {"suite": SUITE, **extra},
        "stats": stats,
    }


def synthetic_everything_run() -> dict:
    """SYNTHETIC (made up here, never saved): the real CPU run's cases on a machine called SYNTHETIC-box with
    an H100, plus made-up timings of every case the real runs lack: the GPU launch suite (tests/test_report's
    synthetic GPU run, plus synchronise-each, enqueue, graph spins and the launch-cost ladder), GPU decode
    steps and matrix-vector products, and numpy_op / decode_floor cases over the floor step's real call
    list."""
    rng = np.random.default_rng(7)
    doc = json.loads(REAL_RUN.read_text(encoding="utf-8"))
    ours = doc["machine_info"][SUITE]
    ours["host"] = doc["machine_info"]["node"] = "SYNTHETIC-box"
    ours["gpu"] = {"name": SYNTHETIC_GPU_NAME}
    gpu = [bench for bench in synthetic_gpu_run()["benchmarks"] if bench["extra_info"]["case"] != "sync"]
    cases = doc["benchmarks"] + gpu
    cases.append(_bench(rng, "sync", 4e-6, case="sync", device="cuda", op="synchronize"))
    for n in (1, 4, 16, 64, 256):
        cases.append(
            _bench(
                rng,
                f"sync_each[{n}]",
                n * 12e-6,
                case="launch_sync_each",
                device="cuda",
                op="empty_kernel",
                gpu_time_s=n * 10e-6,
                mode="eager",
                n_kernels=n,
            )
        )
        for mode, seconds in (("eager", 0.2e-6 + n * 2e-6), ("graph", 3e-6)):
            cases.append(
                _bench(
                    rng,
                    f"enqueue[{mode}-{n}]",
                    seconds,
                    case="enqueue",
                    device="cuda",
                    op="empty_kernel",
                    mode=mode,
                    n_kernels=n,
                    gpu_time_s=2e-6 + n * 0.9e-6,
                )
            )
    for d_ns in (0, 1000, 2000, 4000, 8000, 16000, 32000):
        graph_s = 8e-6 + 3e-6 + 256 * (d_ns * 1e-9 + 1e-6)
        cases.append(
            _bench(
                rng,
                f"spin_graph[{d_ns}]",
                graph_s,
                case="spin",
                device="cuda",
                op="spin_kernel",
                mode="graph",
                n_kernels=256,
                kernel_ns=d_ns,
                gpu_time_s=graph_s - 8e-6,
            )
        )
    for layer, base, per_arg in (
        ("cupy", 3e-6, 0.15e-6),
        ("driver", 1.5e-6, 0.02e-6),
        ("graph", 0.8e-6, 0.05e-6),
    ):
        for n_args in (0, 1, 4, 8, 13):
            per_launch = base + n_args * per_arg
            extra = {
                "case": "launch_args",
                "device": "cuda",
                "op": "empty_kernel" if n_args == 0 else f"empty_args_{n_args}",
                "layer": layer,
                "n_args": n_args,
                "n_kernels": 256,
            }
            if layer == "graph":
                cases.append(
                    _bench(
                        rng,
                        f"ladder[{layer}-{n_args}]",
                        20e-6 + 256 * per_launch,
                        mode="graph",
                        gpu_time_s=256 * per_launch,
                        **extra,
                    )
                )
            else:
                cases.append(
                    _bench(
                        rng,
                        f"ladder[{layer}-{n_args}]",
                        256 * per_launch,
                        mode="eager",
                        gpu_time_s=1e-3,
                        **extra,
                    )
                )
    n_args_total = {"unfused": 1058, "fused": 898}
    for plan in ("unfused", "fused"):
        n_kernels = PLANS[plan].n_kernels(LLAMA32_1B)
        for mode, seconds in (("eager", 0.9e-3 + n_kernels * 3.5e-6), ("graph", 0.9e-3 + n_kernels * 1.2e-6)):
            cases.append(
                _bench(
                    rng,
                    f"decode[{plan}-{mode}]",
                    seconds,
                    case="decode_step",
                    device="cuda",
                    op="decode_step",
                    dtype="float16",
                    plan=plan,
                    mode=mode,
                    n_kernels=n_kernels,
                    bytes=2.6e9,
                    spec_bytes_per_s=3.35e12,
                    gpu_time_s=0.9 * seconds,
                    config=LLAMA32_1B.name,
                    batch=1,
                    ctx=1024,
                    n_args_total=n_args_total[plan],
                )
            )
    for rows, cols in ((3072, 2048), (128_256, 2048)):
        matrix_bytes = rows * cols * 2
        cases.append(
            _bench(
                rng,
                f"matvec[{rows}x{cols}]",
                32 * matrix_bytes / 2.6e12,
                case="decode_step",
                device="cuda",
                op="matvec",
                dtype="float16",
                mode="eager",
                n_kernels=32,
                rows=rows,
                cols=cols,
                bytes=32 * matrix_bytes,
                spec_bytes_per_s=3.35e12,
                gpu_time_s=32 * matrix_bytes / 2.6e12,
                config=LLAMA32_1B.name,
            )
        )
    plans = {plan: dict(floor_step(plan)[0].count_calls().op_counts) for plan in ("unfused", "fused")}
    for index, op in enumerate(sorted(set(plans["unfused"]) | set(plans["fused"]))):
        cost = 0.3e-6 * 1.2**index  # a spread of fixed costs, 0.3 µs up
        cases.append(
            _bench(
                rng,
                f"numpy_op[{op}]",
                64 * cost,
                case="numpy_op",
                device="cpu",
                op=op,
                dtype="float32",
                n_calls=64,
                config=FLOOR.name,
                ctx=FLOOR_CTX,
            )
        )
    for plan, counts in plans.items():
        cases.append(
            _bench(
                rng,
                f"decode_floor[{plan}]",
                1.3 * sum(counts.values()) * 1e-6,
                case="decode_floor",
                device="cpu",
                op="decode_step",
                dtype="float32",
                plan=plan,
                n_calls=sum(counts.values()),
                op_counts=counts,
                bytes=1_000_000,
                config=FLOOR.name,
                batch=1,
                ctx=FLOOR_CTX,
            )
        )
    doc["benchmarks"] = cases
    return doc


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """Name -> the paths ``python -m analysis`` would be given."""
    root = tmp_path_factory.mktemp("figure-data")
    sets = {"committed real runs": [DATA]}
    for machines in FLEETS:
        fleet = _fanout(REAL_RUN, root / f"fleet-{machines}", machines, copies=max(2, machines))
        sets[f"fleet of {machines}"] = [fleet]
    synthetic = root / "synthetic-everything.json"
    synthetic.write_text(json.dumps(synthetic_everything_run()), encoding="utf-8")
    sets["SYNTHETIC GPU and per-op run"] = [synthetic]
    sets["SYNTHETIC GPU and per-op run, 4 machines"] = [_fanout(synthetic, root / "synthetic-4", 4, copies=4)]
    return sets


def figure_problems(figures: dict[str, Figure]) -> list[str]:
    """Every figure's overlapping texts, texts off the canvas and cut markers, from one draw of each."""
    problems = []
    for stem, figure in figures.items():
        problems += [f"{stem}: {line}" for line in text_problems(figure)]
        problems += [f"{stem}: {line}" for line in cut_markers(figure)]
    return problems


#: The ``time_vs_size`` figure of the committed run with the most cases drawn alone, kept by
#: ``test_every_committed_run_alone_draws_clean_figures`` for the planted-overlap test, which takes it (it
#: changes it): the same figures are not built twice.
_REAL_RUN_ALONE: dict[str, Figure] = {}


def figures_of(paths: list[Path]) -> dict[str, Figure]:
    """The figures ``python -m analysis plot PATHS`` draws (raw samples loaded, as it loads them; a machine
    with quick runs only is drawn from them, as plot draws it)."""
    selection = select_runs(load_runs(paths, samples=True))
    frame = selection.result.frame
    fits = fit_all(frame)
    return build_figures(frame, fits, figure_table(frame, fits, None))


CPU_FIGURES = {"time_vs_size", "many_vs_one"}
GPU_FIGURES = {"launch_vs_graph", "launch_ladder", "knee", "decode_step"}
#: Figures a real run draws where it holds their cases (the per-op costs; decode steps that have a bound:
#: runs older than the bound's probe have none).
REAL_OPTIONAL = {"decode_bands", "op_costs", "ladder"}


@pytest.mark.parametrize(
    ("name", "expected", "optional"),
    [
        ("committed real runs", CPU_FIGURES | {"machines"}, REAL_OPTIONAL),
        ("fleet of 1", CPU_FIGURES, REAL_OPTIONAL),
        ("fleet of 2", CPU_FIGURES | {"machines"}, REAL_OPTIONAL),
        ("fleet of 4", CPU_FIGURES | {"machines"}, REAL_OPTIONAL),
        ("fleet of 10", CPU_FIGURES | {"machines"}, REAL_OPTIONAL),
        (
            "SYNTHETIC GPU and per-op run",
            CPU_FIGURES | GPU_FIGURES | {"op_costs", "decode_bands"},
            {"ladder"},
        ),
        (
            "SYNTHETIC GPU and per-op run, 4 machines",
            CPU_FIGURES | GPU_FIGURES | {"op_costs", "decode_bands", "machines"},
            {"ladder"},
        ),
    ],
)
def test_no_two_texts_collide_and_none_leaves_the_canvas(
    datasets: dict[str, list[Path]], name: str, expected: set[str], optional: set[str]
) -> None:
    figures = figures_of(datasets[name])
    assert expected <= set(figures) <= expected | optional
    assert figure_problems(figures) == []


@pytest.mark.parametrize("path", REAL_RUNS, ids=[path.name for path in REAL_RUNS])
def test_every_committed_run_alone_draws_clean_figures(path: Path) -> None:
    """Each committed run as ``plot`` draws it alone, today's freshly committed runs included: its texts
    apart and inside the canvas, no marker cut by a panel's edge."""
    figures = figures_of([path])
    assert set(figures) >= CPU_FIGURES
    assert figure_problems(figures) == []
    if path == REAL_RUN:
        _REAL_RUN_ALONE["time_vs_size"] = figures["time_vs_size"]


# --- the checker can fail -----------------------------------------------------------------------------------


def test_the_check_catches_a_planted_overlap_and_a_text_off_the_canvas() -> None:
    figure = _REAL_RUN_ALONE.pop("time_vs_size", None) or figures_of([REAL_RUN])["time_vs_size"]
    assert text_problems(figure) == []
    ax = figure.axes[0]
    tick = next(label for label in ax.get_yticklabels() if label.get_text())
    ax.annotate(
        "planted",
        tick.get_position(),
        xycoords=("axes fraction", "data"),
        xytext=(-20, 0),
        textcoords="offset points",
        annotation_clip=False,
    )
    figure.text(0.999, 0.5, "off the edge")
    problems = text_problems(figure)
    assert any("'planted'" in line and "overlap" in line for line in problems), problems
    assert any("off the edge" in line and "leaves the canvas" in line for line in problems), problems


def test_the_check_sees_rotated_labels_and_skips_hidden_and_empty_ones() -> None:
    figure = new_figure(3)
    ax = figure.add_subplot()
    ax.set_ylabel("a rotated axis label")
    hidden = ax.text(0.5, 0.5, "hidden")
    ax.text(0.5, 0.5, "   ")
    ax.text(0.5, 0.5, "shown")
    hidden.set_visible(False)
    assert text_problems(figure) == []
    ax.text(-0.09, 0.5, "on the axis label", transform=ax.transAxes, rotation=90, va="center")
    assert any("a rotated axis label" in line for line in text_problems(figure))


def test_every_figure_of_the_readme_is_committed_and_regenerated_by_the_named_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python -m analysis plot tests/data/runs --out docs --formats png" in readme
    committed = {path.stem for path in (ROOT / "docs" / "figures").glob("*.png")}
    assert committed == set(figures_of([TODAY]))
    for stem in committed:
        assert f"](docs/figures/{stem}.png)" in readme, stem
    total = sum(path.stat().st_size for path in (ROOT / "docs" / "figures").glob("*.png"))
    assert total < 600_000, f"the committed figures take {total} bytes"
