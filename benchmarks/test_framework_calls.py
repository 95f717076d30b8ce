"""The fixed cost of one call, and the decode step built of such calls, in numpy, PyTorch and JAX on a CPU.

``framework_call``: the same add as ``ufunc_size`` (``test_numpy_calls.py``: float32, the same sizes, the
same calls per timed call, the same byte and FLOP counts), issued by

- numpy: ``np.add(a, a, out=o)``;
- PyTorch eager: ``torch.add(a, a, out=o)``, once with one intra-op thread (``threads`` = 1) and once with
  PyTorch's default (its thread count at import, recorded);
- JAX: ``jax.jit(lambda x: x + x)(a).block_until_ready()``: a compiled add, so what is timed is JAX's
  dispatch of an executable and the wait for its result (JAX returns before the work is done; without the
  wait a loop would time dispatch into a queue). It allocates its output, as every JAX call does.

Each loop is written as a user writes it, with the framework's module as a local name, so the three differ
only in the call. ``analysis/frameworks.py`` fits the same law t(n) = t0 + n/r∞ to each.

``framework_step``: ``decode_frameworks.decode_logits`` (one Llama-shaped decode step, written once) on the
CPU decode case's model and weights (``decode_numpy.cpu_decode_config``, ``random_weights``,
``random_kv_cache``, ctx and token of ``test_decode_step.py``: the very arrays its cases step, made once per
session by ``benchmarks/conftest.py``), in numpy, PyTorch eager, ``torch.compile``, JAX op by op and
``jax.jit`` of the whole step: the compiled step is the CPU's fusion, calls measured against calls removed.
Each is checked against the float64 reference (``reference_logits``) with the cache position it writes
poisoned with NaN first, the error saved as a fact of the run, before it is timed; compilation and one
warm-up call (``--quick``: the compiling call alone) happen before the timing.

A framework that is not installed skips its cases with the reason (``benchmarks/frameworks.py``); frameworks
are imported inside the cases, never at collection, so no framework's import slows another's cases.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from benchmarks import frameworks
from benchmarks.budget import timing_mark
from benchmarks.decode_frameworks import (
    ArrayOps,
    decode_logits,
    jax_ops,
    numpy_ops,
    step_arrays,
    step_bytes,
    torch_ops,
)
from benchmarks.decode_numpy import REFERENCE_TOLERANCE, DecodeWeights, KVCache, reference_error
from benchmarks.records import record
from benchmarks.run_notes import record_fact
from benchmarks.test_decode_step import FP32_PLAN_TOLERANCE, TOKEN, CpuDecodeInputs
from benchmarks.test_numpy_calls import BYTES_PER_ELEMENT, calls_per_round, require_doubled, ufunc_sizes

#: The callers of ``framework_call``: (framework, threads setting); "default" keeps the framework's own.
CALLERS = (("numpy", None), ("torch", 1), ("torch", "default"), ("jax", None))
#: Seconds of rounds per ``framework_call`` case, full and ``--quick``: 100 rounds of ≥ 2 ms, less than
#: ``ufunc_size``'s 0.5 s, so the four callers together take about 1.6 × ``ufunc_size``'s time (≈ 11 s);
#: under ``--quick``, pytest-benchmark's minimum of 5 rounds (``ufunc_size``'s quick budget).
MAX_TIME_S, QUICK_MAX_TIME_S = 0.2, 0.01
#: Under ``--quick`` the callers add at ``ufunc_size``'s quick sizes up to this one only: the sizes within
#: the core cache, on which each caller's t0 and per-element cost are fitted. The larger ones (1 Mi, 16 Mi
#: elements and the size past 2 × the LLC) give the callers' DRAM cost, a full run's figure: on a machine
#: that reports a 480 MB LLC they took two thirds of a quick run's framework cases (page faults of
#: 0.5 GB arrays, JAX's new output per call).
QUICK_MAX_N = 262_144
#: The steps of ``framework_step``: (framework, compiler), None = eager, op by op.
STEPS = (("numpy", None), ("torch", None), ("torch", "torch.compile"), ("jax", None), ("jax", "jax.jit"))
#: Timed rounds of each step, full and ``--quick`` (a step takes tens of ms; compiling happens before).
STEP_ROUNDS, QUICK_STEP_ROUNDS = 20, 3
#: Untimed calls before the timing, full and ``--quick``: the first compiles (``torch.compile``, ``jax.jit``,
#: JAX's op-by-op executables) and reads every weight once; the full run's second warms caches further.
WARMUP_CALLS, QUICK_WARMUP_CALLS = 2, 1


def _caller_id(framework: str, threads: object) -> str:
    return framework if threads is None else f"{framework}-threads{threads}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise ``framework_call`` by caller and size (``ufunc_size``'s sizes; under ``--quick`` its quick
    sizes up to ``QUICK_MAX_N``), and ``framework_step`` by framework and compiler."""
    config = metafunc.config
    quick = config.getoption("quick")
    if metafunc.definition.name == "test_framework_call":
        sizes = [n for n in ufunc_sizes(quick) if not quick or n <= QUICK_MAX_N]
        params = []
        for framework, threads in CALLERS:
            group = f"framework_call {_caller_id(framework, threads)}: add float32; id n<elements>-x<calls>"
            mark = timing_mark(config, group, QUICK_MAX_TIME_S if quick else MAX_TIME_S)
            params += [
                pytest.param(
                    framework,
                    threads,
                    n,
                    id=f"{_caller_id(framework, threads)}-n{n}-x{calls_per_round(n)}",
                    marks=mark,
                )
                for n in sizes
            ]
        metafunc.parametrize(("framework", "threads", "n"), params)
    elif metafunc.definition.name == "test_framework_step":
        params = [
            pytest.param(framework, compiler, id=f"{framework}-{compiler or 'eager'}")
            for framework, compiler in STEPS
        ]
        metafunc.parametrize(("framework", "compiler"), params)


def _framework(name: str) -> Any:
    """The framework module ``name`` (numpy, or a lazily imported one); skips the case with the reason."""
    if name == "numpy":
        return np
    reason = frameworks.unavailable_reason(name)
    if reason is not None:
        pytest.skip(reason)
    return frameworks.module(name)


@contextlib.contextmanager
def intra_op_threads(torch: Any, threads: object) -> Iterator[int]:
    """PyTorch with ``threads`` intra-op threads (an int), or its own setting ("default"), for the ``with``
    block; yields the count in force, and restores the previous count after."""
    previous = torch.get_num_threads()
    if threads != "default":
        torch.set_num_threads(int(threads))
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)


# ------------------------------------------------------------------------------------------------------------
# The fixed cost of one call
# ------------------------------------------------------------------------------------------------------------


def add_out_repeatedly(xp: Any, a: Any, o: Any, calls: int) -> None:
    """``calls`` times ``xp.add(a, a, out=o)`` (numpy and PyTorch spell it alike)."""
    for _ in range(calls):
        xp.add(a, a, out=o)


def jit_repeatedly(add: Callable[[Any], Any], a: Any, calls: int) -> None:
    """``calls`` times ``add(a).block_until_ready()``: a compiled JAX call and the wait for its result."""
    for _ in range(calls):
        add(a).block_until_ready()


@dataclass(frozen=True)
class CallCase:
    """One caller's timed call at one size: ``run()`` makes ``calls`` calls; ``result()`` is the last call's
    output as numpy (for the check); ``op`` names the call as ``extra_info["op"]`` records it."""

    run: Callable[[], None]
    result: Callable[[], np.ndarray]
    op: str
    compiler: str | None = None


def call_case(framework: str, module: Any, a: np.ndarray, calls: int) -> CallCase:
    """The timed call of ``framework`` (its ``module``) adding ``a`` to itself ``calls`` times."""
    if framework == "numpy":
        o = np.full_like(a, np.nan)
        return CallCase(functools.partial(add_out_repeatedly, module, a, o, calls), lambda: o, "np.add")
    if framework == "torch":
        at = module.from_numpy(a)
        ot = module.full_like(at, math.nan)
        return CallCase(
            functools.partial(add_out_repeatedly, module, at, ot, calls),
            lambda: frameworks.to_numpy(ot),
            "torch.add",
        )
    if framework == "jax":
        add = module.jit(lambda x: x + x)
        aj = module.device_put(
            a, module.devices("cpu")[0]
        )  # committed: the call runs there, even beside a GPU
        outputs: list[Any] = []

        def run() -> None:
            jit_repeatedly(add, aj, calls)

        def result() -> np.ndarray:
            outputs.append(add(aj))
            return frameworks.to_numpy(outputs[-1])

        return CallCase(run, result, "jax.jit(x + x)", compiler="jax.jit")
    raise ValueError(f"unknown framework {framework!r}; known: numpy, torch, jax")


def test_framework_call(
    benchmark: Any, add_input: Callable[[int], np.ndarray], framework: str, threads: object, n: int
) -> None:
    """One add of ``n`` float32 elements by ``framework``: fixed cost plus ``n`` times the element cost; its
    input is ``ufunc_size``'s (``add_input``, shared by every caller)."""
    module = _framework(framework)
    a = add_input(n)
    calls = calls_per_round(n)
    what = f"{_caller_id(framework, threads)} add, n={n}"
    with (
        intra_op_threads(module, threads) if framework == "torch" else contextlib.nullcontext(None)
    ) as in_force:
        case = call_case(framework, module, a, calls)
        case.run()  # compiles JAX's add; numpy's and torch's output, NaN until now, must then be 2·a
        require_doubled(case.result(), a, what)
        record(
            benchmark,
            case="framework_call",
            device="cpu",
            op=case.op,
            framework=framework,
            threads=in_force,
            compiler=case.compiler,
            dtype="float32",
            n=n,
            n_calls=calls,
            bytes=calls * n * BYTES_PER_ELEMENT,
            flops=calls * n,
        )
        benchmark(case.run)


# ------------------------------------------------------------------------------------------------------------
# The decode step, per framework
# ------------------------------------------------------------------------------------------------------------


def framework_ops(framework: str, module: Any) -> ArrayOps:
    """The ``ArrayOps`` of ``framework`` (its imported ``module``)."""
    makers = {"numpy": lambda _: numpy_ops(), "torch": torch_ops, "jax": jax_ops}
    if framework not in makers:
        raise ValueError(f"unknown framework {framework!r}; known: {', '.join(makers)}")
    return makers[framework](module)


def step_call(
    framework: str, compiler: str | None, module: Any, weights: DecodeWeights, cache: KVCache, token: int
) -> Callable[[], Any]:
    """A call that runs one step of ``framework`` (compiled by ``compiler``, or eager) decoding ``token`` to
    completion and returns its logits. The arrays are made here, from ``weights`` and ``cache`` as they are
    now; PyTorch's share the numpy cache's memory (its writes land there), JAX's are copies."""
    ops = framework_ops(framework, module)
    # JAX's default device is a GPU where there is one: the CPU cases commit their arrays to the CPU.
    device = module.devices("cpu")[0] if framework == "jax" else None
    arrays = step_arrays(ops, weights, cache, device=device)
    step = functools.partial(decode_logits, ops, weights.cfg, token=token, pos=cache.ctx - 1)
    if compiler == "torch.compile":
        step = module.compile(step)
    elif compiler == "jax.jit":
        step = module.jit(step)
    elif compiler is not None:
        raise ValueError(f"unknown compiler {compiler!r} for {framework}")
    if framework == "jax":
        return lambda: step(arrays).block_until_ready()
    if framework == "torch":

        def run() -> Any:
            with module.no_grad():
                return step(arrays)

        return run
    return lambda: step(arrays)


def poison_position(cache: KVCache) -> None:
    """Set the position the step writes (``ctx - 1``) to NaN in every layer's keys and values, so a step
    that does not write it reads NaN and fails its check."""
    pos = cache.ctx - 1
    for keys, values in zip(cache.keys, cache.values, strict=True):
        keys[:, pos] = np.nan
        values[:, pos] = np.nan


def test_framework_step(
    benchmark: Any,
    cpu_decode_inputs: CpuDecodeInputs,
    request: pytest.FixtureRequest,
    framework: str,
    compiler: str | None,
) -> None:
    """One decode step of ``framework`` (eager or compiled) on the CPU decode case's model
    (``cpu_decode_inputs``, shared with ``test_decode_step.py``), checked against the float64 reference,
    then timed; the last timed round's logits must be those checked."""
    inputs = cpu_decode_inputs
    module = _framework(framework)
    what = f"{framework} step ({compiler or 'eager'}) of {inputs.weights.cfg.name}"
    poison_position(inputs.cache)
    call = step_call(framework, compiler, module, inputs.weights, inputs.cache, TOKEN)
    quick = request.config.getoption("quick")
    for _ in range(QUICK_WARMUP_CALLS if quick else WARMUP_CALLS):
        logits = frameworks.to_numpy(call())
    error = reference_error(logits, inputs.reference)
    record_fact(
        request.config, f"cpu.framework_step.reference_error.{framework}.{compiler or 'eager'}", error
    )
    assert error <= REFERENCE_TOLERANCE, (
        f"{what}: logits differ from the float64 reference by {error:.3g} × its RMS "
        f"(tolerance {REFERENCE_TOLERANCE:g}); not timed"
    )
    rounds = QUICK_STEP_ROUNDS if quick else STEP_ROUNDS
    last = benchmark.pedantic(call, rounds=rounds, iterations=1)  # the last timed round's logits
    after = reference_error(frameworks.to_numpy(last), logits.astype(np.float64))
    assert after <= FP32_PLAN_TOLERANCE, f"{what}: logits changed by {after:.3g} × RMS over the timing"
    record(
        benchmark,
        case="framework_step",
        device="cpu",
        op="decode_step",
        framework=framework,
        compiler=compiler,
        threads=module.get_num_threads() if framework == "torch" else None,
        dtype="float32",
        config=inputs.weights.cfg.name,
        batch=1,
        ctx=inputs.cache.ctx,
        bytes=step_bytes(inputs.weights, inputs.cache, item_bytes=4),
    )
