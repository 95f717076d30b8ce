"""Without CuPy, a driver or a device, every CUDA case skips with one clear reason and the rest still runs.

The probe in ``benchmarks/cuda.py`` is exercised in-process with CuPy hidden or faked; the whole benchmark
folder is then run in a subprocess with CuPy hidden, as on a machine where it is not installed.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import cuda, kernels

ROOT = Path(__file__).resolve().parents[1]
CUDA_MODULE = "benchmarks.test_cuda_launch"
NOT_INSTALLED = "CuPy is not installed"


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """Forget the cached probe before and after the test, so a faked CuPy never leaks into other tests."""
    cuda._probe.cache_clear()
    yield
    cuda._probe.cache_clear()


def _fake_cupy(get_device_count: object, nvrtc_version: object = lambda: (13, 0)) -> SimpleNamespace:
    return SimpleNamespace(
        cuda=SimpleNamespace(
            runtime=SimpleNamespace(getDeviceCount=get_device_count),
            nvrtc=SimpleNamespace(getVersion=nvrtc_version),
        )
    )


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


def test_a_usable_fake_device_passes_the_probe(monkeypatch: pytest.MonkeyPatch, fresh_probe: None) -> None:
    fake = _fake_cupy(lambda: 1)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert cuda.unavailable_reason() is None
    assert cuda.cupy_module() is fake


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
