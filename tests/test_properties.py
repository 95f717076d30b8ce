"""The property-based tests (Hypothesis, of the dev extra): in a plain install (``pip install -e .``) this
module skips, with its reason, and every other test module runs. Each property sits beside the module whose
code it holds, by name."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("hypothesis", reason="needs hypothesis, of the dev extra: pip install -e '.[dev]'")
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.memo import Memo
from analysis.verdicts import MARK_CHANGED, MARK_INCONCLUSIVE, MARK_SAME, Side, correct, evidence
from benchmarks.decode_numpy import DRAM_LLC_FACTOR, TINY_LLAMA_4L, cpu_decode_config

# --- analysis.verdicts (tests/test_verdicts.py) ---


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(
        st.tuples(
            st.lists(st.floats(0.5, 2.0), min_size=1, max_size=8),
            st.lists(st.floats(0.5, 2.0), min_size=1, max_size=8),
        ),
        min_size=1,
        max_size=12,
    ),
    spread=st.floats(0.0, 0.2),
    threshold=st.floats(0.0, 0.2),
)
def test_every_verdict_interval_holds_its_estimate(runs, spread, threshold) -> None:
    items = [evidence(Side(np.array(new)), Side(np.array(base)), spread, "test") for new, base in runs]
    judged = correct(items, threshold)
    assert judged.judged == len(items)
    for item, low, high, mark in zip(items, judged.low, judged.high, judged.marks, strict=True):
        assert low <= item.ratio <= high
        band = math.log1p(threshold)
        if mark == MARK_CHANGED:  # wholly outside the band
            assert math.log(low) > band or math.log(high) < -band
        elif mark == MARK_SAME:
            assert -band <= math.log(low) and math.log(high) <= band
        else:
            assert mark == MARK_INCONCLUSIVE


# --- benchmarks.decode_numpy (tests/test_decode_numpy.py) ---


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=2**33))
def test_the_sized_model_streams_at_least_twice_any_llc(llc_bytes: int) -> None:
    cfg = cpu_decode_config(llc_bytes)

    def weight_bytes(n_layers: int) -> int:
        return 4 * (cfg.embedding_params + cfg.final_norm_params + n_layers * cfg.layer_params)

    assert weight_bytes(cfg.n_layers) >= DRAM_LLC_FACTOR * llc_bytes
    assert cfg.n_layers == TINY_LLAMA_4L.n_layers or weight_bytes(cfg.n_layers - 1) < 2 * llc_bytes
    assert cfg.name == f"tiny-llama-{cfg.n_layers}L-1024"


# --- analysis.memo (tests/test_memo.py) ---


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(allow_nan=False, width=64), min_size=1, max_size=8),
    st.integers(min_value=0, max_value=7),
    st.sampled_from(["float", "text", "category"]),
)
def test_the_key_follows_every_value_and_order_but_not_the_index(
    values: list[float], where: int, kind: str
) -> None:
    def frame(column: list[float]) -> pd.DataFrame:
        series = pd.Series(column)
        if kind != "float":
            series = series.map(repr)
        if kind == "category":
            series = series.astype("category")
        return pd.DataFrame({"value": series, "machine_id": "m"})

    store = Memo(Path("/nonexistent"))
    base = frame(values)
    where %= len(values)
    other = [*values]
    other[where] = other[where] + 1.0 if abs(other[where]) < 1e15 else -other[where] or 1.0
    assert store.key("k", base) != store.key("k", frame(other))
    assert store.key("k", base) == store.key("k", base.set_index(base.index + 17))
    if values != values[::-1]:
        assert store.key("k", base) != store.key("k", frame(values[::-1]))
