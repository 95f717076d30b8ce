"""Without CuPy, a driver or a device, every CUDA case skips with one clear reason and the rest still runs.

The probe in ``benchmarks/cuda.py`` is exercised in-process with CuPy hidden or faked; the whole benchmark
folder is then run in a subprocess with CuPy hidden, as on a machine where it is not installed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import cuda, kernels
from tests.fake_gpu import FAKE_GPU_PATH, run_in_root

ROOT = Path(__file__).resolve().parents[1]
CUDA_MODULE = "benchmarks.test_cuda_launch"
NOT_INSTALLED = "CuPy is not installed"


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """Forget the cached probe before and after the test, so a faked CuPy never leaks into other tests."""
    cuda._probe.cache_clear()
    yield
    cuda._probe.cache_clear()


class _FakeArray:
    def __init__(self) -> None:
        self.value = np.zeros(1, dtype=np.int32)

    def get(self) -> np.ndarray:
        return self.value


def _fake_cupy(
    get_device_count: object,
    nvrtc_version: object = lambda: (13, 0),
    *,
    compile_error: Exception | None = None,
    written: int = 42,
    synchronize: object = lambda: None,
    cublas_handle: object = lambda: 1,
) -> SimpleNamespace:
    """A CuPy stand-in that answers each step of the probe as told (by default: a usable device)."""

    class RawModule:
        def __init__(self, code: str, options: tuple[str, ...]) -> None:
            if compile_error is not None:
                raise compile_error
            assert "launchbench_probe" in code and options == cuda.COMPILE_OPTIONS

        def get_function(self, name: str) -> object:
            def launch(grid: tuple[int, ...], block: tuple[int, ...], args: tuple[_FakeArray, ...]) -> None:
                args[0].value[0] = written

            return launch

    return SimpleNamespace(
        RawModule=RawModule,
        zeros=lambda shape, dtype: _FakeArray(),
        int32=np.int32,
        cuda=SimpleNamespace(
            runtime=SimpleNamespace(getDeviceCount=get_device_count, deviceSynchronize=synchronize),
            nvrtc=SimpleNamespace(getVersion=nvrtc_version),
            device=SimpleNamespace(get_cublas_handle=cublas_handle),
        ),
    )


def _raises(error: Exception) -> object:
    def call(*args: object) -> None:
        raise error

    return call


def _no_nvrtc() -> tuple[int, int]:
    raise OSError("libnvrtc.so.13 or libnvrtc.so.12: not found")  # stands in for DynamicLibNotFoundError


def _no_driver() -> int:
    raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")


def test_without_cupy_everything_says_why(monkeypatch: pytest.MonkeyPatch, fresh_probe: None) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes ``import cupy`` raise ImportError
    reason = cuda.unavailable_reason()
    assert reason is not None
    assert reason.startswith(NOT_INSTALLED)
    assert cuda.gpu_info() is None
    with pytest.raises(RuntimeError, match=NOT_INSTALLED):
        cuda.cupy_module()
    with pytest.raises(RuntimeError, match=NOT_INSTALLED):
        kernels.module("launch")


@pytest.mark.parametrize(
    ("get_device_count", "expected"),
    [
        (_no_driver, "no CUDA driver or device: RuntimeError: cudaErrorInsufficientDriver"),
        (lambda: 0, "count is 0"),
    ],
    ids=["no-driver", "no-device"],
)
def test_without_a_device_everything_says_why(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None, get_device_count: object, expected: str
) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(get_device_count))
    reason = cuda.unavailable_reason()
    assert reason is not None
    assert expected in reason
    assert cuda.gpu_info() is None
    with pytest.raises(RuntimeError, match="device"):
        cuda.cupy_module()


def test_without_nvrtc_everything_says_why(monkeypatch: pytest.MonkeyPatch, fresh_probe: None) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(lambda: 1, _no_nvrtc))
    reason = cuda.unavailable_reason()
    assert reason is not None
    assert "cannot load NVRTC" in reason and "OSError: libnvrtc.so.13" in reason
    assert cuda.gpu_info() is None
    with pytest.raises(RuntimeError, match="NVRTC"):
        kernels.module("launch")


class CompileException(Exception):  # the name CuPy's compiler error has
    pass


class CUDARuntimeError(RuntimeError):  # the name CuPy's runtime error has
    pass


@pytest.mark.parametrize(
    ("fake", "expected"),
    [
        (
            {"compile_error": CompileException("Failed to find CUDA headers")},
            "failed to compile, load and run a trivial kernel: CompileException: Failed to find CUDA headers",
        ),
        (
            {"synchronize": _raises(CUDARuntimeError("cudaErrorLaunchFailure: unspecified launch failure"))},
            "failed to compile, load and run a trivial kernel: CUDARuntimeError: cudaErrorLaunchFailure",
        ),
        ({"written": 0}, "run a trivial kernel: RuntimeError: the probe kernel wrote 0, not 42"),
        (
            {"cublas_handle": _raises(OSError("libcublas.so.13: cannot open shared object file"))},
            "cannot create a cuBLAS handle: OSError: libcublas.so.13",
        ),
    ],
    ids=["no-cuda-headers", "device-fails-after-count", "kernel-did-not-run", "no-cublas"],
)
def test_each_step_of_the_probe_says_why(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None, fake: dict[str, object], expected: str
) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(lambda: 1, **fake))
    reason = cuda.unavailable_reason()
    assert reason is not None and reason.startswith("CuPy sees a CUDA device but ")
    assert expected in reason
    assert cuda.gpu_info() is None
    with pytest.raises(RuntimeError, match=re.escape(expected)):
        cuda.cupy_module()


def test_a_usable_fake_device_passes_the_probe(monkeypatch: pytest.MonkeyPatch, fresh_probe: None) -> None:
    fake = _fake_cupy(lambda: 1)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert cuda.unavailable_reason() is None
    assert cuda.cupy_module() is fake


def _with_runtime(fake: SimpleNamespace, **calls: object) -> SimpleNamespace:
    attributes = {"cudaDevAttrClockRate": 13, "cudaDevAttrMemoryClockRate": 36}
    attributes |= {"cudaDevAttrGlobalMemoryBusWidth": 37, "cudaDevAttrL2CacheSize": 38}
    fake.cuda.runtime = SimpleNamespace(**vars(fake.cuda.runtime), **attributes, **calls)
    fake.__version__ = "14.2.0"
    return fake


def test_gpu_info_holds_the_stable_facts_in_si_units(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    attribute = {13: 1_980_000, 36: 2_619_000, 37: 6144, 38: 62_914_560}  # kHz, kHz, bits, bytes (an H200)
    props = {"name": b"NVIDIA H200", "major": 9, "minor": 0, "multiProcessorCount": 132}
    props |= {"totalGlobalMem": 150_754_820_096}
    fake = _with_runtime(
        _fake_cupy(lambda: 1),
        getDeviceProperties=lambda device: props,
        deviceGetAttribute=lambda number, device: attribute[number],
        driverGetVersion=lambda: 13000,
        runtimeGetVersion=lambda: 12090,
    )
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert cuda.gpu_info() == {
        "name": "NVIDIA H200",
        "compute_capability": "9.0",
        "sm_count": 132,
        "memory_bytes": 150_754_820_096,
        "sm_clock_rate_hz": 1.98e9,
        "memory_clock_hz": 2.619e9,
        "memory_bus_width_bits": 6144,
        "l2_cache_bytes": 62_914_560,
        "driver_version": "13.0",
        "runtime_version": "12.9",
        "cupy_version": "14.2.0",
    }


def test_gpu_info_never_raises_on_a_gpu_that_fails_after_the_probe(
    monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    failure = CUDARuntimeError("cudaErrorLaunchFailure: unspecified launch failure")
    fake = _with_runtime(
        _fake_cupy(lambda: 1),
        getDeviceProperties=_raises(failure),
        deviceGetAttribute=lambda number, device: 2_619_000 if number == 36 else _raises(failure)(),
        driverGetVersion=lambda: 13000,
        runtimeGetVersion=_raises(failure),
    )
    monkeypatch.setitem(sys.modules, "cupy", fake)
    info = cuda.gpu_info()
    assert info is not None
    assert info["name"] is None and info["sm_count"] is None and info["runtime_version"] is None
    assert info["memory_clock_hz"] == 2.619e9 and info["driver_version"] == "13.0"  # what answered is kept
    message = "CUDARuntimeError: cudaErrorLaunchFailure: unspecified launch failure"
    assert info["query_errors"] == dict.fromkeys(
        ["properties", "sm_clock_rate_hz", "memory_bus_width_bits", "l2_cache_bytes", "runtime_version"],
        message,
    )


def test_device_failures_become_faults_of_the_run_and_still_raise() -> None:
    record = SimpleNamespace(faults=[])
    config = SimpleNamespace(_launchbench_run=record)
    with pytest.raises(CUDARuntimeError), cuda.device_failures(config, "setting up"):
        raise CUDARuntimeError("cudaErrorLaunchFailure")
    assert record.faults == ["GPU: setting up: CUDARuntimeError: cudaErrorLaunchFailure"]
    with cuda.device_failures(config, "nothing wrong"):
        pass
    assert len(record.faults) == 1


def _run_benchmarks_without_cupy(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], ET.Element]:
    """Run ``pytest benchmarks`` in a fresh interpreter in which ``import cupy`` fails; return it and its
    JUnit XML report."""
    report = tmp_path / "report.xml"
    argv = [
        "benchmarks",
        "--benchmark-disable",
        "--quick",
        "-p",
        "no:cacheprovider",
        f"--junitxml={report}",
    ]
    script = f"import sys; sys.modules['cupy'] = None; import pytest; sys.exit(pytest.main({argv!r}))"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert report.is_file(), f"pytest wrote no report:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done, ET.parse(report).getroot()


def test_benchmarks_without_cupy_skip_cuda_cases_and_run_the_rest(tmp_path: Path) -> None:
    done, root = _run_benchmarks_without_cupy(tmp_path)
    assert done.returncode == 0, f"pytest benchmarks failed without CuPy:\n{done.stdout[-3000:]}"
    cases = list(root.iter("testcase"))
    ours = [case for case in cases if case.get("classname", "").startswith(CUDA_MODULE)]
    assert ours, f"no case of {CUDA_MODULE} was collected"
    for case in ours:
        skipped = case.find("skipped")
        assert skipped is not None, f"{case.get('name')} was not skipped without CuPy"
        assert NOT_INSTALLED in (skipped.get("message") or ""), (
            f"{case.get('name')}: {skipped.get('message')}"
        )
    ran = [case for case in cases if not list(case)]  # no skipped/failure/error child: it ran and passed
    assert ran, "no benchmark case ran without CuPy"


def test_a_gpu_failing_after_the_probe_fails_its_cases_and_the_cpu_results_are_saved(tmp_path: Path) -> None:
    """``tests/fake_gpu``'s CuPy passes the probe, then fails every call: the CUDA cases fail with its error,
    the run record holds the error as a fault, ``machine_info`` the failed queries, and the CPU case that ran
    beside them is saved."""
    from tests.fake_gpu.cupy import FAILURE

    saved = tmp_path / "run.json"
    argv = [
        "benchmarks/test_cuda_launch.py",
        "benchmarks/test_host_bandwidth.py",
        "-k",
        "test_sync or test_copy",
    ]
    argv += ["--benchmark-only", "--quick", "-p", "no:cacheprovider", f"--benchmark-json={saved}"]
    done = run_in_root(
        [sys.executable, "-m", "pytest", *argv], PYTHONPATH=os.pathsep.join([str(FAKE_GPU_PATH), str(ROOT)])
    )
    assert done.returncode == 1, f"expected failed CUDA cases:\n{done.stdout[-3000:]}"
    assert "Traceback" not in done.stderr
    assert f"CUDARuntimeError: {FAILURE}" in done.stdout
    run = json.loads(saved.read_text(encoding="utf-8"))
    names = [case["name"] for case in run["benchmarks"]]
    assert names == ["test_copy"], "the CPU case is saved, no CUDA case is"
    record = run["launchbench_run"]
    assert record["faults"] == [f"GPU: setting up the launch suite: CUDARuntimeError: {FAILURE}"]
    assert record["cases"]["failed"] == 1 and record["cases"]["measured"] == 1
    assert record["conditions"]["start"]["gpu"]["nvml_error"] == f"CUDARuntimeError: {FAILURE}"
    gpu = run["machine_info"]["launchbench"]["gpu"]
    assert gpu["name"] is None and gpu["query_errors"]["properties"] == f"CUDARuntimeError: {FAILURE}"
