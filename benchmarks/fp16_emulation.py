"""PyTorch's FP16 arithmetic on CUDA, emulated with numpy: what sets the torch GPU step's tolerance on a CPU.

The torch decode step of ``test_framework_gpu.py`` keeps every activation in FP16. PyTorch computes each
half-precision op in float32 and rounds its result to FP16 (the ``opmath`` type of its CUDA kernels, Python
scalars taken as float32 too); matrix products accumulate in float32 (cuBLAS's ``CUBLAS_COMPUTE_32F``) and
round their result once; ``mean`` accumulates in float32; ``softmax(x, dtype=float32)`` widens first. So the
step's error comes from rounding each op's result to FP16, and ``Fp16Array`` does exactly that: an FP16 numpy
array whose every ufunc (``+``, ``*``, ``/``, ``@``, ``exp``, ``sqrt``, …) computes on float32 copies of its
operands and rounds the result to FP16, and whose ``mean`` sums in float32. ``fp16_ops`` runs
``decode_frameworks.decode_logits`` itself, the function PyTorch runs on the GPU, on such arrays.

What it cannot copy: cuBLAS's summation order inside one product (any float32 order differs from another by
about 1e-7 relative, four orders below FP16's 2^-11) and, where PyTorch lets cuBLAS reduce split-K partial
sums in FP16 (``allow_fp16_reduced_precision_reduction``, on by default), those partials' rounding:
``fp16_ops(split_k=n)`` rounds each of ``n`` partial sums of every product to FP16 before adding them, the
pessimistic case that the tolerance must also hold.

No torch is needed (CI has none), and numpy's own float16 arithmetic is not used: it is slow, and its
matrix product does not round as cuBLAS does. A real framework's half-precision path checks the emulation
beside it: ``fp16_step_errors(others=...)`` runs the same step in JAX's own FP16 arithmetic on the CPU (where
JAX is installed), whose errors come out the same size.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks.decode_frameworks import ArrayOps, decode_logits, numpy_ops, step_arrays
from benchmarks.decode_numpy import (
    SEED,
    KVCache,
    draw_kv_cache,
    draw_weights,
    reference_error,
    reference_logits,
    uniform_draw,
)
from model.llm import ModelConfig

#: Bytes of float32 rows a large matrix-vector product widens at a time (the FP16 weights stay FP16: a
#: float32 copy of Llama-3.2-1B's would be 5 GB).
WIDEN_BLOCK_BYTES = 2**22


def _widen(value: Any) -> Any:
    """A float32 view or copy of an array operand (FP16 values are exact in float32); scalars unchanged."""
    return np.asarray(value, dtype=np.float32) if isinstance(value, np.ndarray) else value


def round_fp16(values: Any, array_type: type[Fp16Array]) -> Fp16Array:
    """``values`` (float32) rounded to the nearest FP16, as an ``array_type``."""
    return np.asarray(values).astype(np.float16).view(array_type)


def _partial_sums(a: np.ndarray, b: np.ndarray, split_k: int) -> np.ndarray:
    """``a @ b`` in float32 as ``split_k`` partial products over slices of the inner axis, each rounded to
    FP16, then added in float32 (cuBLAS's split-K with FP16 partials); one product when ``split_k`` is 1."""
    inner = a.shape[-1]
    if split_k <= 1 or inner < split_k:
        return np.matmul(a, b)
    bounds = [inner * part // split_k for part in range(split_k + 1)]
    total = None
    for lo, hi in itertools.pairwise(bounds):
        part = np.matmul(a[..., lo:hi], b[..., lo:hi, :] if b.ndim > 1 else b[lo:hi])
        part = part.astype(np.float16).astype(np.float32)
        total = part if total is None else total + part
    return total


def matmul_f32(a: np.ndarray, b: np.ndarray, split_k: int = 1) -> np.ndarray:
    """``a @ b`` of FP16 operands accumulated in float32 (float32 result). A 2-D FP16 matrix times a vector
    is widened a block of rows at a time (``WIDEN_BLOCK_BYTES``), never whole."""
    if a.ndim == 2 and b.ndim == 1 and a.dtype == np.float16:
        rows, cols = a.shape
        block = max(1, min(rows, WIDEN_BLOCK_BYTES // (4 * cols)))
        buffer = np.empty((block, cols), dtype=np.float32)
        x = np.asarray(b, dtype=np.float32)
        out = np.empty(rows, dtype=np.float32)
        for lo in range(0, rows, block):
            hi = min(rows, lo + block)
            widened = buffer[: hi - lo]
            widened[...] = a[lo:hi]
            out[lo:hi] = _partial_sums(widened, x, split_k)
        return out
    return _partial_sums(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32), split_k)


class Fp16Array(np.ndarray):
    """An FP16 numpy array that computes as PyTorch's CUDA half-precision ops do (module docstring): each
    ufunc on float32 copies, its result rounded to FP16; ``mean`` summed in float32. ``split_k`` (a class
    attribute set by ``fp16_ops``) splits each matrix product's sum into that many FP16-rounded parts."""

    split_k = 1

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or kwargs:
            raise TypeError(f"Fp16Array emulates plain ufunc calls only, not {ufunc.__name__}.{method}")
        if ufunc is np.matmul:
            a, b = inputs
            return round_fp16(matmul_f32(np.asarray(a), np.asarray(b), self.split_k), type(self))
        return round_fp16(ufunc(*(_widen(value) for value in inputs)), type(self))

    def mean(self, *args: Any, **kwargs: Any) -> Fp16Array:  # type: ignore[override]
        """The mean of every element, summed in float32 and rounded once (``torch.mean`` of a half tensor)."""
        if args or kwargs:
            raise TypeError("Fp16Array.mean takes the mean of every element only")
        return round_fp16(np.asarray(self, dtype=np.float32).mean(dtype=np.float32), type(self))


def fp16_ops(split_k: int = 1) -> ArrayOps:
    """``ArrayOps`` of the torch FP16 step on ``Fp16Array``s: softmax in float32 (``torch.softmax(x,
    dtype=float32)``) rounded to FP16 (``.to(x.dtype)``); ``asarray`` rounds to FP16 whatever dtype is asked
    (the step's arrays are FP16). ``split_k`` > 1: every matrix product rounds that many partial sums to FP16
    before adding them (the pessimistic cuBLAS reduction)."""
    array_type = type(f"Fp16ArraySplit{split_k}", (Fp16Array,), {"split_k": split_k})
    plain = numpy_ops()

    def asarray(array: Any, device: Any, dtype: Any) -> Fp16Array:
        return np.asarray(array, dtype=np.float16).view(array_type)

    def softmax(x: Any) -> Fp16Array:
        return round_fp16(plain.softmax(np.asarray(x, dtype=np.float32)), array_type)

    def concat(xs: Any) -> Fp16Array:
        return np.concatenate([np.asarray(x) for x in xs], axis=-1).view(array_type)  # exact: no rounding

    return dataclasses.replace(
        plain, framework="torch-fp16-emulated", concat=concat, softmax=softmax, asarray=asarray
    )


#: Partial sums per matrix product in the pessimistic emulation (``fp16_ops(split_k=…)``): cuBLAS splits a
#: long inner axis into a few parts when the output alone gives too few blocks; four is such a split.
PESSIMISTIC_SPLIT_K = 4


@dataclasses.dataclass(frozen=True)
class Fp16StepErrors:
    """One seed's emulated torch FP16 decode step against the float64 reference, each a fraction of the
    reference logits' RMS (``decode_numpy.reference_error``, the GPU case's metric)."""

    seed: int
    correct: float  # the step as PyTorch computes it (float32 accumulation, each result rounded once)
    split_k: float  # the same with every product's PESSIMISTIC_SPLIT_K partial sums rounded to FP16
    stale_cache: float  # the step without its KV write: the position keeps the cache's older entry
    #: The same step in other frameworks' own FP16 arithmetic, by name (e.g. JAX's on the CPU).
    frameworks: dict[str, float] = dataclasses.field(default_factory=dict)


#: Another framework's own FP16 step: its ``ArrayOps`` and the device its arrays go to (None: its default).
FrameworkStep = tuple[ArrayOps, Any]


def fp16_step_errors(
    cfg: ModelConfig, ctx: int, token: int, seed: int, others: Mapping[str, FrameworkStep] | None = None
) -> Fp16StepErrors:
    """Draw ``cfg``'s FP16 weights and KV cache as the GPU case does (``draw_weights``, ``draw_kv_cache``:
    uniform, the same scales; numpy's generator seeded ``SEED + 2·seed`` and ``SEED + 2·seed + 1``, so seed 0
    is the GPU case's seeds on another generator), and return the errors of the emulated step, its split-K
    variant, the step that skips its KV write and the step of each framework in ``others`` (in FP16 on its
    device), each on a freshly drawn cache (a step writes into it). BLAS runs on one thread: its products
    are matrix-vector blocks, which several threads only slowed (each step took 11-15 s instead of 1.6 s on
    a shared 2-core VM)."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _step_errors(cfg, ctx, token, seed, others or {})


def _step_errors(
    cfg: ModelConfig, ctx: int, token: int, seed: int, others: Mapping[str, FrameworkStep]
) -> Fp16StepErrors:
    weights = draw_weights(cfg, uniform_draw(np, SEED + 2 * seed, np.float16))

    def cache() -> KVCache:
        return draw_kv_cache(cfg, ctx, uniform_draw(np, SEED + 2 * seed + 1, np.float16))

    reference = reference_logits(weights, cache(), token)

    def error(ops: ArrayOps, device: Any = None) -> float:
        arrays = step_arrays(ops, weights, cache(), device=device, dtype=np.float16)
        return reference_error(np.asarray(decode_logits(ops, cfg, arrays, token, ctx - 1)), reference)

    skips_write = dataclasses.replace(fp16_ops(), put_position=lambda keys, pos, rows: keys)
    return Fp16StepErrors(
        seed=seed,
        correct=error(fp16_ops()),
        split_k=error(fp16_ops(PESSIMISTIC_SPLIT_K)),
        stale_cache=error(skips_write),
        frameworks={name: error(ops, device) for name, (ops, device) in others.items()},
    )
