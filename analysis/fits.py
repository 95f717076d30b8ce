"""Every family's fits and predictions for one frame, computed once.

The report, the figures, the machine table and the terminal summary all read one ``Fits``: fitting is the
slow part of analysis (bootstrap intervals over thousands of points when runs are pooled), and figures
fitted twice could disagree with the table beside them. ``fit_all`` is the only caller of the families'
fitting functions outside their own modules.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analysis.decode import decode_table
from analysis.host import fit_host, predict_many_vs_one
from analysis.launch import CUDA_CASES, FIT_COLUMNS, decode_with_measured, fit_launch, predict_spin


@dataclass(frozen=True)
class Fits:
    """Every family's fitted and predicted tables for one frame (each empty when its cases are absent).

    ``host``: ``analysis.host.fit_host``; ``many_vs_one``: ``analysis.host.predict_many_vs_one``;
    ``launch``: ``analysis.launch.fit_launch``; ``spin``: ``analysis.launch.predict_spin``;
    ``decode_demo``: ``analysis.launch.decode_with_measured`` (the seed's demo 2 with measured launch costs);
    ``decode_steps``: ``analysis.decode.decode_table`` (measured decode steps against their bounds).
    """

    host: pd.DataFrame
    many_vs_one: pd.DataFrame
    launch: pd.DataFrame
    spin: pd.DataFrame
    decode_demo: pd.DataFrame
    decode_steps: pd.DataFrame


def has_cases(frame: pd.DataFrame, cases: tuple[str, ...], device: str | None = None) -> bool:
    """Whether ``frame`` holds any of ``cases`` (measured on ``device``, when given)."""
    if frame.empty or "case" not in frame or "device" not in frame:
        return False
    rows = frame["case"].isin(cases)
    if device is not None:
        rows &= frame["device"] == device
    return bool(rows.any())


def fit_all(frame: pd.DataFrame) -> Fits:
    """Fit every family present in ``frame`` once, so the table, the figures, the report and the summary
    agree; the decode steps are predicted from these same host and launch fits."""
    empty = pd.DataFrame()
    host = fit_host(frame)
    launch = fit_launch(frame) if has_cases(frame, CUDA_CASES, "cuda") else pd.DataFrame(columns=FIT_COLUMNS)
    return Fits(
        host=host,
        many_vs_one=predict_many_vs_one(frame, host) if not host.empty else empty,
        launch=launch,
        spin=predict_spin(frame, launch) if not launch.empty else empty,
        decode_demo=decode_with_measured(launch) if not launch.empty else empty,
        decode_steps=decode_table(frame, host, launch),
    )
