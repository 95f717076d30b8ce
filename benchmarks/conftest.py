"""Fixtures the benchmark modules share.

``cpu_decode_inputs``: the CPU decode model's random weights, KV cache and float64 reference logits, made
once per session for both modules that step it (``test_decode_step.py``'s plans and
``test_framework_calls.py``'s frameworks): they step the same model on the same weights, and drawing
≥ 2 × the last-level cache of weights and computing their reference took about a second per module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from benchmarks.test_decode_step import CpuDecodeInputs


@pytest.fixture(scope="session")
def cpu_decode_inputs() -> CpuDecodeInputs:
    """The CPU decode case's weights, cache and reference (``test_decode_step.make_cpu_decode_inputs``),
    imported only when a case asks for them, so a run of other modules does not load that module."""
    from benchmarks.test_decode_step import make_cpu_decode_inputs

    return make_cpu_decode_inputs()
