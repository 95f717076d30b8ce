"""The CUDA kernel sources of the GPU cases (``benchmarks/kernels/*.cu``) and the one place compiling them.

Each ``NAME.cu`` file is one module, compiled by CuPy's ``RawModule`` (NVRTC) once per process and kept, so
compilation never happens inside a timed region. Kernels are ``extern "C"`` so they are found by their plain
names. CuPy is imported lazily, through ``benchmarks.cuda``, only when a kernel is asked for.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from benchmarks.cuda import COMPILE_OPTIONS, cupy_module

KERNEL_DIR = Path(__file__).resolve().parent


def source_paths() -> list[Path]:
    """Return every kernel source file, sorted by name."""
    return sorted(KERNEL_DIR.glob("*.cu"))


def source(module_name: str) -> str:
    """Return the CUDA source of ``benchmarks/kernels/<module_name>.cu``."""
    path = KERNEL_DIR / f"{module_name}.cu"
    if not path.is_file():
        known = ", ".join(p.stem for p in source_paths()) or "none"
        raise FileNotFoundError(f"{path}: no such kernel module (known: {known})")
    return path.read_text(encoding="utf-8")


@functools.cache
def module(module_name: str) -> Any:
    """Return ``benchmarks/kernels/<module_name>.cu`` compiled as a ``cupy.RawModule``, once per process.

    Needs a usable CUDA device (``benchmarks.cuda.cupy_module`` raises with the reason otherwise).
    """
    cupy = cupy_module()
    compiled = cupy.RawModule(code=source(module_name), options=COMPILE_OPTIONS)
    compiled.compile()  # now, not at the first launch, which may be inside a timed region
    return compiled


def kernel(module_name: str, kernel_name: str) -> Any:
    """Return the ``cupy.RawKernel`` ``kernel_name`` of module ``module_name`` (compiled once: ``module``)."""
    return module(module_name).get_function(kernel_name)
