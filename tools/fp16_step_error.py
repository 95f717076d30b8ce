"""The torch FP16 decode step's error at the real size, seed by seed: the figures behind its GPU tolerance.

``benchmarks.fp16_emulation.fp16_step_errors`` for Llama-3.2-1B at the GPU case's context and token, for
seeds 0 … N−1: the emulated step (PyTorch's FP16 arithmetic on CUDA), its pessimistic split-K variant and the
step that skips its KV write, each × the reference logits' RMS, then each column's range and the margins of
``test_framework_gpu.FRAMEWORK_STEP_TOLERANCE``; where JAX is installed, JAX's own FP16 step on the CPU in a
column of its own. ``python tools/fp16_step_error.py --seeds 16`` (about 10 s a
seed on a quiet 2-core VM); ``tests/test_framework_step_fp16.py`` checks three seeds in CI.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from benchmarks import frameworks
from benchmarks.decode_frameworks import jax_ops
from benchmarks.fp16_emulation import FrameworkStep, fp16_step_errors
from benchmarks.test_decode_step import CTX, TOKEN
from benchmarks.test_framework_gpu import FRAMEWORK_STEP_TOLERANCE
from model.llm import LLAMA32_1B


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=16, help="how many seeds, from 0 (default 16)")
    options = parser.parse_args(argv)
    if options.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {options.seeds}")
    others: dict[str, FrameworkStep] = {}
    if frameworks.unavailable_reason("jax") is None:  # JAX's own FP16 step on the CPU, beside the emulation
        jax = frameworks.module("jax")
        others["jax"] = (jax_ops(jax), jax.devices("cpu")[0])
    print(f"{LLAMA32_1B.name}, ctx {CTX}, token {TOKEN}: error × RMS of the reference logits")
    print(
        f"{'seed':>4} {'correct':>8} {'split-K':>8} {'no KV write':>12}" + "".join(f" {n:>8}" for n in others)
    )
    rows = []
    for seed in range(options.seeds):
        row = fp16_step_errors(LLAMA32_1B, CTX, TOKEN, seed, others)
        rows.append(row)
        extra = "".join(f" {row.frameworks[name]:>8.4f}" for name in others)
        print(
            f"{seed:>4} {row.correct:>8.4f} {row.split_k:>8.4f} {row.stale_cache:>12.3f}{extra}", flush=True
        )
    worst = max(max(row.correct, row.split_k, *row.frameworks.values()) for row in rows)
    defect = min(row.stale_cache for row in rows)
    columns = {name: [getattr(row, name) for row in rows] for name in ("correct", "split_k", "stale_cache")}
    columns |= {name: [row.frameworks[name] for row in rows] for name in others}
    for name, values in columns.items():
        print(f"{name}: {min(values):.4f} to {max(values):.4f}, mean {sum(values) / len(values):.4f}")
    tolerance = FRAMEWORK_STEP_TOLERANCE
    print(
        f"tolerance {tolerance:g}: {tolerance / worst:.2f} × the largest correct error ({worst:.4f}), "
        f"{defect / tolerance:.1f} × below the smallest error without the KV write ({defect:.3f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
