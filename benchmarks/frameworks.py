"""The one place that decides whether PyTorch, Triton and JAX cases can run, and says why not.

Each framework is an optional extra (``pip install 'launchbench[torch]'``, ``'[jax]'``) and is imported
lazily, on the first case that needs it and never at collection: importing torch takes seconds and JAX a few
too, so a run that selects numpy's cases (or a machine without either) pays for neither, and a framework's
import never lands inside another framework's timing. Each probe runs once per process and returns the
module or the reason it cannot be used; every case of that framework then skips with the reason. A GPU
probe (``gpu_reason``) also runs one trivial launch per framework and checks it: what fails only at the
first kernel (Triton builds its launcher with a C compiler, Python's headers and libcuda then:
``benchmarks/triton_build.py`` looks for them first) skips the framework's cases instead of failing them.

JAX would take 75 % of the GPU's memory at its first GPU call (its default preallocation), leaving CuPy's
and PyTorch's cases of the same process without room for Llama-3.2-1B: ``jax_module`` sets
``XLA_PYTHON_CLIENT_PREALLOCATE=false`` before the import (``setdefault``: a value set by the caller wins).

JAX compiles every op its eager step calls, and each size of its jitted add, at its first call: about 3 s of
a quick run on a 2-core VM, all before the timing. A timed session keeps those executables in JAX's
persistent compilation cache (``jax_cache_environment``, set by ``conftest.py``), so the next session on the
machine loads them instead: the same executables, none of it timed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks import triton_build
from benchmarks.triton_kernels import ladder_kernels

#: The frameworks of the cross-framework cases, as ``extra_info["framework"]`` names them.
NUMPY, TORCH, JAX, TRITON, CUPY = "numpy", "torch", "jax", "triton", "cupy"
_EXTRA_HINT = {TORCH: "pip install 'launchbench[torch]'", JAX: "pip install 'launchbench[jax]'"}


def _error(error: BaseException) -> str:
    """``Type: message`` on one line (a compiler's or an assertion's message can span several)."""
    return " ".join(f"{type(error).__name__}: {error}".split())


@functools.cache
def _import(name: str) -> tuple[ModuleType | None, str | None]:
    """Import ``name`` once: (module, None), or (None, why not)."""
    if name == JAX:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        module = __import__(name)
    except ImportError as error:
        hint = _EXTRA_HINT.get(name, f"pip install {name}")
        return None, f"{name} is not installed ({hint}): {_error(error)}"
    except Exception as error:  # a broken install fails inside the import with various errors
        return None, f"{name} failed to import: {_error(error)}"
    return module, None


#: JAX's variable naming its persistent compilation cache's folder: where the caller set it, it is left alone.
JAX_CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"


def jax_cache_environment(cache_root: Path | None, cpu: Mapping[str, Any]) -> dict[str, str]:
    """The environment variables that make JAX (imported after they are set) keep every executable it
    compiles, however small or quick to compile, under ``cache_root``/jax/<CPU key>; empty without a
    ``cache_root`` or where ``JAX_COMPILATION_CACHE_DIR`` is set already.

    ``cpu`` is py-cpuinfo's ``machine_info["cpu"]``: its architecture, model and instruction-set flags key
    the folder, so machines that share a home folder never load each other's machine code."""
    if cache_root is None or os.environ.get(JAX_CACHE_VARIABLE):
        return {}
    identity = [cpu.get("arch"), cpu.get("brand_raw"), sorted(map(str, cpu.get("flags") or ()))]
    key = hashlib.sha256(json.dumps(identity, default=str).encode()).hexdigest()[:16]
    return {
        JAX_CACHE_VARIABLE: str(Path(cache_root) / "jax" / key),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


def unavailable_reason(name: str) -> str | None:
    """Why framework ``name`` ("torch", "jax", "triton") cannot run CPU cases here; None when it can."""
    return _import(name)[1]


def module(name: str) -> ModuleType:
    """The imported framework ``name``; raises ``RuntimeError`` with the reason when it is unusable."""
    imported, reason = _import(name)
    if imported is None:
        raise RuntimeError(reason)
    return imported


def version(name: str) -> str | None:
    """The version of framework ``name`` when it imports, else None (for a case's skip line and facts)."""
    imported, _ = _import(name)
    return None if imported is None else str(getattr(imported, "__version__", "unknown"))


@functools.cache
def gpu_reason(name: str) -> str | None:
    """Why framework ``name`` cannot run GPU cases here; None when it can.

    Each framework must import, see a device and run one trivial launch whose result is checked
    (``_first_launch``): a driver, a compiler or a library that fails only at the first kernel (Triton builds
    its launcher with a C compiler then) skips every case of the framework with the reason, never fails
    them. torch needs ``torch.cuda.is_available()``; Triton needs torch's GPU (it launches on PyTorch's
    stream, with PyTorch's tensors) and what its launcher is built from (``benchmarks.triton_build``); JAX
    needs a device of its "gpu" backend (``jax.devices("gpu")``; JAX's CPU build has none).
    """
    if name == TRITON:
        reason = gpu_reason(TORCH)
        if reason is not None:
            return reason
    reason = unavailable_reason(name)
    if reason is not None:
        return reason
    if name == TRITON:
        reason = triton_build.missing_reason(triton_build.find_build_tools())
        if reason is not None:
            return reason
    imported = module(name)
    if name == JAX:
        try:
            devices = imported.devices("gpu")
        except Exception as error:  # RuntimeError "Unknown backend gpu" on the CPU build
            return f"jax {version(JAX)} has no GPU backend: {_error(error)}"
        if not devices:
            return f"jax {version(JAX)} lists no GPU device"
    elif name == TORCH:
        try:
            available = bool(imported.cuda.is_available())
        except Exception as error:  # a driver/runtime mismatch raises here on some builds
            return f"torch {version(TORCH)} sees no usable CUDA device: {_error(error)}"
        if not available:
            return f"torch {version(TORCH)} sees no CUDA device (torch.cuda.is_available())"
    try:
        _first_launch(name, imported)
    except Exception as error:  # a compiler's, a driver's or an assertion's error, whatever the framework
        return f"{name} {version(name)} failed its first launch: {_error(error)}"
    return None


def _first_launch(name: str, imported: ModuleType) -> None:
    """One trivial kernel of framework ``name`` on the GPU, waited for; raises where it fails or computes
    a wrong result. torch adds 1 to a one-element tensor; Triton launches the ladder's one-argument kernel
    (building its launcher); JAX runs a jitted add of 1."""
    if name == TORCH:
        result = imported.ones(1, device="cuda") + 1
        imported.cuda.synchronize()
        value = float(result.item())
    elif name == TRITON:
        torch = module(TORCH)
        kernel = ladder_kernels(imported)[1]
        kernel[(1,)](torch.zeros(1, device="cuda"))
        torch.cuda.synchronize()
        return  # the kernel writes nothing: that it built, launched and finished is the check
    else:
        import numpy as np

        ones = imported.device_put(np.ones(1, dtype=np.float32), imported.devices("gpu")[0])
        value = float(np.asarray(imported.jit(lambda x: x + 1)(ones).block_until_ready())[0])
    if value != 2.0:
        raise RuntimeError(f"1 + 1 computed as {value}")


def to_numpy(array: Any) -> Any:
    """A numpy copy of a torch tensor or JAX array (any device): where results are checked, never timed."""
    import numpy as np

    if hasattr(array, "detach"):  # torch.Tensor
        return array.detach().float().cpu().numpy()
    return np.asarray(array)
