"""Fixtures the benchmark modules share.

``cpu_decode_inputs``: the CPU decode model's random weights, KV cache and float64 reference logits, made
once per session for both modules that step it (``test_decode_step.py``'s plans and
``test_framework_calls.py``'s frameworks): they step the same model on the same weights, and drawing
≥ 2 × the last-level cache of weights and computing their reference took about a second per module.

``add_input``: the add cases' seeded input at each size, made once per session for the cases that add it
(``ufunc_size``, ``many_vs_one``, each caller of ``framework_call``): drawing its 2^24 elements took
0.2–0.4 s, three times over in a quick run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import numpy as np

    from benchmarks.test_decode_step import CpuDecodeInputs


@pytest.fixture(scope="session")
def cpu_decode_inputs() -> CpuDecodeInputs:
    """The CPU decode case's weights, cache and reference (``test_decode_step.make_cpu_decode_inputs``),
    imported only when a case asks for them, so a run of other modules does not load that module."""
    from benchmarks.test_decode_step import make_cpu_decode_inputs

    return make_cpu_decode_inputs()


@pytest.fixture(scope="session")
def add_input() -> Callable[[int], np.ndarray]:
    """``n`` → the add cases' input of ``n`` elements (``test_numpy_calls.make_add_input``), each size made
    at its first case and kept for the session's other cases of that size."""
    from benchmarks.test_numpy_calls import make_add_input

    return functools.cache(make_add_input)
