"""Every CUDA source in ``benchmarks/kernels`` compiles, so a syntax error is caught without a GPU.

Each ``.cu`` file is compiled with ``nvcc`` to PTX for sm_90 (Hopper) with the options CuPy's ``RawModule``
is given (``benchmarks.cuda.COMPILE_OPTIONS``), and every non-template ``__global__`` kernel must appear in
the PTX under its plain name: ``RawModule.get_function`` finds kernels by that name, so they must be
``extern "C"`` (a template kernel needs CuPy's ``name_expressions`` instead and is left out of that check).
The same sources, and the probe's kernel (``benchmarks.cuda.PROBE_SOURCE``), are also compiled by NVRTC
itself, through CuPy's binding, as ``RawModule`` compiles them on a GPU machine (no device is needed to
compile to PTX). Where ``nvcc``, or CuPy's NVRTC, is missing, that check is skipped with the reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks import kernels
from benchmarks.cuda import COMPILE_OPTIONS, PROBE_SOURCE
from benchmarks.cuda_timing import LADDER_ARGS, ladder_kernel_name

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(
    NVCC is None, reason="nvcc is not on PATH (the CUDA toolkit compiles kernels)"
)

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_KERNEL = re.compile(
    r"(template\s*<[^>]*>\s*)?(?:extern\s+\"C\"\s+)?__global__\s+void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\("
)
_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(")


def _kernels(source: str) -> set[str]:
    """Names of the non-template ``__global__`` functions in ``source`` (template kernels are left out).

    Raises ``AssertionError`` when some ``__global__`` is not parsed, so a declaration form this check does
    not know is reported instead of silently skipped.
    """
    code = _COMMENT.sub("", source)
    found = _KERNEL.findall(code)
    assert len(found) == code.count("__global__"), "a __global__ declaration this test cannot parse"
    return {name for template, name in found if not template}


def test_the_launch_suite_kernels_are_there() -> None:
    ladder = {ladder_kernel_name(n_args) for n_args in LADDER_ARGS}
    assert _kernels(kernels.source("launch")) == ladder | {
        "spin_kernel",
        "clock_calibration_kernel",
        "timer_advances_kernel",
        "count_kernel",
        "pdl_kernel",
    }


def test_an_unknown_kernel_module_is_named_in_the_error() -> None:
    with pytest.raises(
        FileNotFoundError, match=r"no_such_module\.cu: no such kernel module \(known: .*launch"
    ):
        kernels.source("no_such_module")


@needs_nvcc
@pytest.mark.parametrize("path", kernels.source_paths(), ids=lambda path: path.name)
def test_kernel_source_compiles_for_sm90_without_spills(path: Path, tmp_path: Path) -> None:
    """One nvcc run per source, through PTX (kept) to sm_90 machine code: every kernel is in the PTX under
    its plain name, and ptxas reports no stack frame and no spills for any of them. A spill turns the
    matrix-vector kernels' batches of loads in flight into round trips through local memory; it would show
    only as a slow step on a GPU, so it is caught here."""
    command = [NVCC, "--cubin", "-arch=sm_90", "-Xptxas", "-v", *COMPILE_OPTIONS]
    command += ["--keep", "--keep-dir", str(tmp_path), "-o", str(tmp_path / f"{path.stem}.cubin"), str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{path}: nvcc failed:\n{done.stderr}"
    declared = _kernels(path.read_text(encoding="utf-8"))
    exported = set(_ENTRY.findall((tmp_path / f"{path.stem}.ptx").read_text(encoding="utf-8")))
    missing = sorted(declared - exported)
    assert not missing, (
        f'{path}: kernels not exported under their plain names (declare them extern "C"): {missing}'
    )
    reports = dict(
        re.findall(
            r"Compiling entry function '(\w+)' for 'sm_90'\n(?:.*Function properties for .*\n)?\s*(.*)\n",
            done.stderr,
        )
    )
    assert set(reports) == declared, done.stderr
    for name, line in reports.items():
        assert line.strip() == "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads", (
            f"{path}: {name}: {line.strip()}"
        )


def _nvrtc_reason() -> str | None:
    """Why NVRTC cannot compile here (CuPy or its NVRTC missing), or None."""
    try:
        from cupy.cuda import nvrtc

        nvrtc.getVersion()
    except Exception as error:  # ImportError without CuPy; DynamicLibNotFoundError without libnvrtc
        return f"NVRTC through CuPy is not usable here: {type(error).__name__}: {error}"
    return None


_NVRTC_REASON = _nvrtc_reason()


@pytest.mark.skipif(_NVRTC_REASON is not None, reason=_NVRTC_REASON or "")
@pytest.mark.parametrize(
    "name", [path.stem for path in kernels.source_paths()] + ["probe"], ids=lambda name: f"{name}.cu"
)
def test_kernel_source_compiles_with_nvrtc(name: str) -> None:
    from cupy.cuda import nvrtc

    source = PROBE_SOURCE if name == "probe" else kernels.source(name)
    program = nvrtc.createProgram(source, f"{name}.cu", [], [])
    try:
        nvrtc.compileProgram(program, ["-arch=compute_90", *COMPILE_OPTIONS])
    except nvrtc.NVRTCError as error:
        pytest.fail(f"{name}.cu: NVRTC failed: {error}\n{nvrtc.getProgramLog(program)}")
    ptx = nvrtc.getPTX(program).decode()
    nvrtc.destroyProgram(program)
    assert set(_ENTRY.findall(ptx)) == _kernels(source)
