"""The launch-cost ladder's empty kernels in Triton: 0, 1, 4, 8 and 13 parameters, as ``kernels/launch.cu``'s.

``launch.cu``'s ``empty_kernel`` and ``empty_args_<n>`` take a pointer at even positions and an ``int`` at odd
ones and do nothing; these are the same in Triton, so the Triton rung of the ladder launches what CuPy's
does, through Triton's own launcher. Triton compiles a kernel per distinct signature and specialises an
integer argument equal to 1 into a constant (it then stops being a parameter), so ``ladder_args`` gives
odd positions the values 3, 5, 7, … (none is 1), and pointers are one-element tensors.

The kernels are made by ``ladder_kernels(triton)`` so that importing this module imports no Triton: the
decorator runs on the first GPU case that needs them. Triton reads each kernel's source with ``inspect``,
which is why they are written out here rather than generated.
"""

from __future__ import annotations

import functools
from typing import Any

#: Argument counts of the ladder (``benchmarks.cuda_timing.LADDER_ARGS``, kept equal by a test).
TRITON_LADDER_ARGS = (0, 1, 4, 8, 13)


@functools.cache
def ladder_kernels(triton: Any) -> dict[int, Any]:
    """The empty Triton kernels by parameter count (``TRITON_LADDER_ARGS``), jitted (once per ``triton``
    module: the readiness check's first launch compiles one that the ladder then reuses)."""
    jit = triton.jit

    @jit
    def empty_kernel():
        pass

    @jit
    def empty_args_1(p0):
        pass

    @jit
    def empty_args_4(p0, i1, p2, i3):
        pass

    @jit
    def empty_args_8(p0, i1, p2, i3, p4, i5, p6, i7):
        pass

    @jit
    def empty_args_13(p0, i1, p2, i3, p4, i5, p6, i7, p8, i9, p10, i11, p12):
        pass

    return {0: empty_kernel, 1: empty_args_1, 4: empty_args_4, 8: empty_args_8, 13: empty_args_13}


def ladder_args(n_args: int, pointer: Any) -> tuple[Any, ...]:
    """The ``n_args`` arguments of the ladder kernel: ``pointer`` (a device tensor) at even positions, the
    Python ints 3, 5, 7, … at odd ones (never 1: see the module docstring)."""
    if n_args not in TRITON_LADDER_ARGS:
        raise ValueError(f"no Triton ladder kernel takes {n_args} arguments (known: {TRITON_LADDER_ARGS})")
    return tuple(pointer if index % 2 == 0 else index + 2 for index in range(n_args))
