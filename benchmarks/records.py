"""The data contract between the benchmarks and ``analysis``: the keys every case writes into ``extra_info``.

Saved runs outlive the code, so keys are only ever added here, never renamed or given new meanings.
Values are SI base units (seconds, bytes, FLOPs, counts). A key that does not apply is left out, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping

SUITE = "launchbench"

#: key -> meaning; README.md's "Data contract" table is this mapping.
CONTRACT: Mapping[str, str] = {
    "suite": 'always "launchbench": tells our cases from other suites\' in mixed storage',
    "case": "the family: ufunc_size, many_vs_one, host_bandwidth, numpy_op, launch_batch, launch_sync_each, "
    "graph_replay, spin, enqueue, sync, launch_args, decode_step, decode_floor, framework_call, "
    "framework_launch, framework_step",
    "device": 'where the work runs: "cpu" or "cuda"',
    "op": 'the operation timed, e.g. "np.add", "copy", "triad", "empty_kernel", "decode_step", "attention", '
    '"probe"; '
    "a numpy_op case: the op identity of benchmarks.decode_numpy.op_identity, "
    '"np.<function>(<argument classes>)", e.g. "np.max(3d, axis, keepdims, out=3d)"',
    "dtype": 'element type, e.g. "float32"',
    "n": "elements per call",
    "pieces": "calls per timed round (many small vs one big)",
    "variant": 'how the pieces are made: "views" (made once, outside the timing) or "slices" (inside)',
    "bytes": "bytes moved per timed call",
    "flops": "floating-point operations per timed call",
    "mode": 'GPU submission: "eager" or "graph"',
    "n_kernels": "GPU kernels per timed call",
    "n_calls": "numpy calls per timed call (the CPU analogue of n_kernels)",
    "kernel_ns": "requested kernel duration, ns",
    "gpu_time_s": "CUDA-event time per timed call, median over rounds, s",
    "plan": 'decode step kernel plan: "unfused", "fused"',
    "config": 'model shape of a decode step, e.g. "Llama-3.2-1B"',
    "batch": "sequences per decode step",
    "ctx": "context length (tokens in the KV cache) of a decode step",
    "spec_bytes_per_s": "datasheet memory bandwidth of the device the case ran on, B/s",
    "rows": "matrix rows (outputs) of a matrix-vector case (decode_step, op matvec)",
    "cols": "matrix columns (inputs) of a matrix-vector case (decode_step, op matvec)",
    "layer": 'what issues a launch-cost ladder launch (launch_args): "cupy" (RawKernel.__call__), "driver" '
    '(cuLaunchKernel through cupy.cuda.driver.launchKernel, arguments packed once), "graph" (graph replay); '
    'framework_launch: "torch" (an eager tiny op), "torch_graph" (those ops replayed from a '
    'torch.cuda.CUDAGraph), "triton" (a @triton.jit kernel), "jax" (a jax.jit call)',
    "n_args": "kernel arguments per launch (launch_args)",
    "n_args_total": "kernel arguments summed over the launches of one timed call (GPU decode step)",
    "achieved_ns": "spin kernels: median over the kernels of the last timed submission of the SM cycles each "
    "spun, as ns by the run's clock calibration (run record fact gpu.spin_clock)",
    "achieved_timer_ns": "spin kernels: mean over the same kernels of the %globaltimer ns around each spin "
    "(each reading is whole timer steps; the mean resolves less than one)",
    "op_counts": "numpy calls per timed call by op (a mapping op identity -> count, as numpy_op's op); "
    "its counts sum to n_calls",
    "pdl": "launch_pdl: whether the kernels were launched with programmatic dependent launch "
    "(cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1): true or false (the "
    "same call without the attribute)",
    "probe_bytes": "CPU decode step: bytes its bandwidth probe reads per round (every weight matrix once, by "
    "the step's own matrix-vector products alone)",
    "probe_s": "CPU decode step: the bandwidth probe's time of each round, s, a list with one entry per "
    "timed round of the step (probe round i ran just before step round i)",
    "probe_op_counts": "CPU decode step: the bandwidth probe's numpy calls by op (as op_counts)",
    "framework": "the library whose calls are timed (framework_call, framework_launch, framework_step): "
    '"numpy", "torch", "jax", "triton"',
    "threads": "intra-op threads the framework was set to use (PyTorch's torch.get_num_threads() during the "
    "case); absent where the case does not set them",
    "compiler": 'what compiled the timed call ahead of timing: "jax.jit", "torch.compile", "triton"; absent: '
    "eager, op by op",
}


def coordinates(case: str, device: str, **fields: object) -> dict[str, object]:
    """Return the ``extra_info`` of one case: the suite tag, its family and device, and ``fields``.

    ``None`` values are dropped (absent means "not applicable"); a key outside ``CONTRACT`` raises
    ``KeyError``, so a typo cannot silently create a column analysis never reads.
    """
    unknown = sorted(set(fields) - set(CONTRACT))
    if unknown:
        raise KeyError(f"extra_info keys outside the launchbench contract: {', '.join(unknown)}")
    present = {key: value for key, value in fields.items() if value is not None}
    return {"suite": SUITE, "case": case, "device": device, **present}


def record(benchmark: object, case: str, device: str, **fields: object) -> None:
    """Write a case's coordinates into ``benchmark.extra_info`` (pytest-benchmark saves them with the run)."""
    benchmark.extra_info.update(coordinates(case, device, **fields))
