"""Groups of cases, not of runs: ``compare --by framework`` sets numpy, PyTorch and JAX side by side.

A fact (``analysis.facts``) belongs to a run, so grouping by it relabels whole runs. The framework belongs
to a case: one run holds numpy's, PyTorch's and JAX's calls side by side. ``group_cases`` therefore labels
each row by its own framework — its *rung* of the dispatch ladder — and rewrites the framework cases into
the families whose figures already compare across groups, so the comparison is the one every grouping gets
(fitted law, measured figures, verdicts run against run, one baseline):

- ``framework_call`` rows become ``ufunc_size`` rows: they are the same add at the same sizes
  (``analysis.frameworks.fit_calls`` fits them the same way), so each rung gets t0, r∞ and n½ with their
  intervals, judged on the samples of the smallest size as numpy's are. The rung is the caller: the
  framework and, for PyTorch, its intra-op threads ("torch (1 thread)").
- ``framework_step`` rows become ``decode_step`` rows whose plan says ``eager`` or ``compiled``
  (``jax.jit``, ``torch.compile``), so "decode step, CPU eager" compares numpy's, PyTorch's and JAX's steps,
  and "decode step, CPU compiled" the compilers with each other.
- ``framework_launch`` rows (GPU) keep their case; the rung is the layer (``torch``, ``torch_graph``,
  ``triton``, ``jax``: a CUDA graph replay is a rung of its own), and ``n_calls`` is set to the launches of a
  timed call, so ``analysis.compare.measured_figures`` gives each argument count's cost per launch.

The coordinates that name the rung (framework, threads, compiler, layer, and the call: ``np.add`` or
``jax.jit(x + x)``) are cleared, so the same point of
two rungs matches by ``analysis.compare.POINT_KEYS``; rows of other cases are left out. The default baseline
is numpy, the reference caller, where it was measured.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.compare import Group, Groups, choose_baseline, group_code, in_time_order
from analysis.facts import CASE_GROUPINGS
from analysis.frameworks import CALL_CASE, LAUNCH_CASE, NUMPY, STEP_CASE, caller

#: A step's plan, as ``group_cases`` names it, by whether a compiler made it.
EAGER, COMPILED = "eager", "compiled"


def rung(case: str, framework: object, threads: object, layer: object) -> str:
    """The rung of the ladder a framework case measures: its layer on the GPU, else its caller."""
    if case == LAUNCH_CASE and isinstance(layer, str):
        return layer
    return caller(framework, threads)


def group_cases(frame: pd.DataFrame, by: str, baseline: str | None) -> tuple[Groups, pd.DataFrame]:
    """The groups (one per rung, ``"framework=<rung>"``) of the framework cases of ``frame`` and those rows
    rewritten as the module docstring says (``machine_id`` the group, ``machine`` the machine). Raises
    ``ValueError`` when ``frame`` holds no framework case or ``baseline`` names no group."""
    if by not in CASE_GROUPINGS:
        raise ValueError(f"--by {by} is not a case coordinate: {', '.join(CASE_GROUPINGS)}")
    if "framework" not in frame or frame.empty:
        raise ValueError(f"--by {by}: no run used holds a framework case ({CALL_CASE}, {STEP_CASE}, …)")
    rows = frame[frame["case"].isin((CALL_CASE, STEP_CASE, LAUNCH_CASE)) & frame["framework"].notna()]
    if rows.empty:
        raise ValueError(f"--by {by}: no run used holds a framework case ({CALL_CASE}, {STEP_CASE}, …)")
    # A copy whose text columns are plain objects: the rewrite below writes new texts into them, which a
    # fleet's categorical frame (``analysis.load``'s ``categorical``) would refuse as unknown categories.
    texts = {column: object for column in rows.columns if isinstance(rows[column].dtype, pd.CategoricalDtype)}
    rows = rows.astype(texts) if texts else rows.copy()
    for column in ("threads", "compiler", "layer", "plan", "op", "n_calls", "n_kernels"):
        if column not in rows:
            rows[column] = math.nan if column in ("threads", "n_calls", "n_kernels") else None
    labels = [
        f"{by}={rung(case, framework, threads, layer)}"
        for case, framework, threads, layer in zip(
            rows["case"], rows["framework"], rows["threads"], rows["layer"], strict=True
        )
    ]
    step = rows["case"] == STEP_CASE
    compiled = rows["compiler"].notna() & (rows["compiler"].astype(str) != EAGER)
    launch = rows["case"] == LAUNCH_CASE
    rows.loc[step, "plan"] = [COMPILED if flag else EAGER for flag in compiled[step]]
    rows["op"] = [("decode_step" if flag else None) for flag in step]
    rows.loc[step, "case"] = "decode_step"
    rows.loc[rows["case"] == CALL_CASE, "case"] = "ufunc_size"
    rows.loc[launch, "n_calls"] = rows.loc[launch, "n_kernels"]
    rows = rows.assign(machine=rows["machine_id"], machine_id=labels, framework=None, threads=math.nan)
    rows = rows.assign(compiler=None, layer=None)
    order = (
        in_time_order(labels, list(rows["run_datetime"])) if "run_datetime" in rows else sorted(set(labels))
    )
    # Every rung of one run starts at the same time: numpy, the reference caller, leads where measured.
    numpy_label = f"{by}={NUMPY}"
    if baseline is None and numpy_label in order:
        chosen, rule = numpy_label, "numpy, the reference caller"
    else:
        chosen = choose_baseline(order, baseline, f"{by} value")
        rule = f"named by --baseline {baseline}" if baseline is not None else f"the {by} of the earliest run"
    order = [chosen, *(label for label in order if label != chosen)]
    groups = tuple(
        Group(
            code=group_code(index),
            label=label,
            runs=tuple(dict.fromkeys(rows.loc[rows["machine_id"] == label, "source"].astype(str))),
            machines=tuple(dict.fromkeys(rows.loc[rows["machine_id"] == label, "machine"].astype(str))),
        )
        for index, label in enumerate(order)
    )
    return Groups(by=by, groups=groups, of_source={}, rule=rule), rows.reset_index(drop=True)
