"""The cross-framework cases' logic without their frameworks: detection and skip reasons
(``benchmarks/frameworks.py``), the per-call loops and their check (``test_framework_calls.py``), and the GPU
module's timing, capture and kernels (``test_framework_gpu.py``, ``triton_kernels.py``) on stand-ins, as
``tests/test_cuda_*.py`` check the CuPy cases."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

from benchmarks import frameworks, triton_build
from benchmarks.cuda_timing import LADDER_ARGS
from benchmarks.records import coordinates
from benchmarks.test_framework_calls import (
    CALLERS,
    call_case,
    framework_ops,
    intra_op_threads,
)
from benchmarks.test_framework_gpu import (
    capture_torch_graph,
    jax_sum,
    repeat,
    then_sync,
    torch_cuda_ops,
    torch_event_median_s,
)
from benchmarks.test_numpy_calls import require_doubled
from benchmarks.triton_kernels import TRITON_LADDER_ARGS, ladder_args, ladder_kernels


@pytest.fixture
def fresh_probes() -> Iterator[None]:
    """Forget the cached imports before and after, so a hidden or faked framework never leaks."""
    frameworks._import.cache_clear()
    frameworks.gpu_reason.cache_clear()
    yield
    frameworks._import.cache_clear()
    frameworks.gpu_reason.cache_clear()


def test_a_missing_framework_gives_one_reason_naming_its_extra(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    reason = frameworks.unavailable_reason("torch")
    assert reason is not None and reason.startswith("torch is not installed")
    assert "launchbench[torch]" in reason
    assert frameworks.gpu_reason("triton") == reason, "Triton's cases need torch first"
    with pytest.raises(RuntimeError, match="torch is not installed"):
        frameworks.module("torch")


class _Tensor:
    """A one-element stand-in tensor: ``+`` adds on the host, ``item`` reads it."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __add__(self, other: float) -> _Tensor:
        return _Tensor(self.value + other)

    def item(self) -> float:
        return self.value


def _fake_torch(monkeypatch: pytest.MonkeyPatch, launch: object = None) -> list[str]:
    """A torch that sees a device; ``launch`` (an exception) makes its first kernel fail. Returns its log."""
    log: list[str] = []
    fake = ModuleType("torch")
    fake.__version__ = "9.9"

    def ones(n: int, device: str) -> _Tensor:
        log.append(f"ones {device}")
        if launch is not None:
            raise launch
        return _Tensor(1.0)

    fake.ones = ones
    fake.zeros = lambda n, device: log.append(f"zeros {device}") or _Tensor(0.0)
    fake.cuda = SimpleNamespace(is_available=lambda: True, synchronize=lambda: log.append("synchronize"))
    monkeypatch.setitem(sys.modules, "torch", fake)
    return log


def test_torch_is_ready_only_after_a_first_launch_that_computes_right(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _fake_torch(monkeypatch)
    assert frameworks.gpu_reason("torch") is None
    assert log == ["ones cuda", "synchronize"], "one kernel, waited for"


def test_torch_whose_first_launch_fails_skips_with_the_error_on_one_line(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_torch(monkeypatch, RuntimeError("CUDA error: no kernel image is available\nfor execution"))
    assert frameworks.gpu_reason("torch") == (
        "torch 9.9 failed its first launch: RuntimeError: CUDA error: no kernel image is available for "
        "execution"
    )
    assert frameworks.gpu_reason("triton") == frameworks.gpu_reason("torch"), "Triton launches through torch"


def _fake_triton(monkeypatch: pytest.MonkeyPatch, launch: object = None) -> list[tuple]:
    """A triton whose jitted kernels record their launches (``launch``: an exception they raise)."""
    launches: list[tuple] = []
    fake = ModuleType("triton")
    fake.__version__ = "3.6.0"

    class Jitted:
        def __init__(self, function: object) -> None:
            self.function = function

        def __getitem__(self, grid: tuple) -> object:
            def run(*args: object) -> None:
                launches.append((self.function.__name__, grid, len(args)))
                if launch is not None:
                    raise launch

            return run

    fake.jit = Jitted
    monkeypatch.setitem(sys.modules, "triton", fake)
    return launches


FOUND = triton_build.BuildTools(
    "/usr/bin/gcc", "gcc on PATH", Path("/inc/Python.h"), "/inc", Path("/lib/x"), "x"
)


def test_triton_is_ready_after_building_and_launching_one_kernel(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_torch(monkeypatch)
    launches = _fake_triton(monkeypatch)
    monkeypatch.setattr(triton_build, "find_build_tools", lambda: FOUND)
    assert frameworks.gpu_reason("triton") is None
    assert launches == [("empty_args_1", (1,), 1)]


def test_triton_without_a_c_compiler_headers_or_libcuda_skips_naming_each(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_torch(monkeypatch)
    launches = _fake_triton(monkeypatch)
    nothing = triton_build.BuildTools(
        None, "CC unset, no gcc or clang on PATH", None, "/inc", None, "nowhere"
    )
    monkeypatch.setattr(triton_build, "find_build_tools", lambda: nothing)
    assert frameworks.gpu_reason("triton") == (
        "Triton cannot build its CUDA launcher: no C compiler (CC unset, no gcc or clang on PATH); "
        "no Python.h in /inc (Python's development headers); no libcuda.so.1 found (nowhere)"
    )
    assert launches == [], "nothing launched"


def test_triton_whose_first_launch_fails_skips_with_the_reason(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_torch(monkeypatch)
    _fake_triton(monkeypatch, AssertionError("libcuda.so cannot found!\nPlease make sure GPU is set up"))
    monkeypatch.setattr(triton_build, "find_build_tools", lambda: FOUND)
    assert frameworks.gpu_reason("triton") == (
        "triton 3.6.0 failed its first launch: AssertionError: libcuda.so cannot found! Please make sure GPU "
        "is set up"
    )


def _fake_jax(monkeypatch: pytest.MonkeyPatch, add: float) -> None:
    fake = ModuleType("jax")
    fake.__version__ = "0.0"
    fake.devices = lambda backend: ["gpu:0"]
    fake.device_put = lambda array, device: array
    ready = SimpleNamespace(block_until_ready=lambda: np.ones(1) + add)
    fake.jit = lambda function: lambda x: ready
    monkeypatch.setitem(sys.modules, "jax", fake)


def test_jax_is_ready_after_a_jitted_add_on_its_gpu(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_jax(monkeypatch, add=1.0)
    assert frameworks.gpu_reason("jax") is None


def test_jax_whose_first_result_is_wrong_skips_saying_so(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_jax(monkeypatch, add=0.0)
    assert (
        frameworks.gpu_reason("jax") == "jax 0.0 failed its first launch: RuntimeError: 1 + 1 computed as 1.0"
    )


def test_torch_without_a_device_skips_its_gpu_cases(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = ModuleType("torch")
    fake.__version__ = "9.9"
    fake.cuda = SimpleNamespace(is_available=lambda: False)
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert frameworks.unavailable_reason("torch") is None
    assert frameworks.gpu_reason("torch") == "torch 9.9 sees no CUDA device (torch.cuda.is_available())"


def test_jax_is_imported_without_preallocating_the_gpu_and_its_cpu_build_has_no_gpu(
    fresh_probes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "")  # so that undoing restores what was there
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE")
    fake = ModuleType("jax")
    fake.__version__ = "0.0"

    def devices(backend: str) -> list[object]:
        raise RuntimeError(f"Unknown backend: '{backend}' requested")

    fake.devices = devices
    monkeypatch.setitem(sys.modules, "jax", fake)
    reason = frameworks.gpu_reason("jax")
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert reason == "jax 0.0 has no GPU backend: RuntimeError: Unknown backend: 'gpu' requested"


def test_a_timed_session_keeps_jax_executables_per_cpu_unless_the_caller_chose_a_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(frameworks.JAX_CACHE_VARIABLE, raising=False)
    cpu = {"arch": "X86_64", "brand_raw": "AMD EPYC 7B13", "flags": ["avx2", "fma"]}
    env = frameworks.jax_cache_environment(tmp_path, cpu)
    assert Path(env[frameworks.JAX_CACHE_VARIABLE]).parent == tmp_path / "jax"
    assert env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    assert env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] == "0"
    assert frameworks.jax_cache_environment(tmp_path, dict(cpu)) == env, "one CPU, one folder"
    other = frameworks.jax_cache_environment(tmp_path, {**cpu, "flags": ["avx2"]})
    assert other[frameworks.JAX_CACHE_VARIABLE] != env[frameworks.JAX_CACHE_VARIABLE], "another CPU's code"
    assert frameworks.jax_cache_environment(None, cpu) == {}, "no cache folder: no JAX cache"
    monkeypatch.setenv(frameworks.JAX_CACHE_VARIABLE, str(tmp_path / "chosen"))
    assert frameworks.jax_cache_environment(tmp_path, cpu) == {}, "the caller's JAX cache wins"


def test_every_case_coordinate_is_in_the_contract() -> None:
    extra = coordinates("framework_call", "cpu", framework="torch", threads=1, compiler="jax.jit")
    assert extra["framework"] == "torch" and extra["threads"] == 1


@pytest.mark.parametrize("n", [1, 5, 4096])
def test_the_numpy_call_adds_and_the_check_catches_a_wrong_sum(n: int) -> None:
    a = np.random.default_rng(n).random(n, dtype=np.float32)
    case = call_case("numpy", np, a, calls=3)
    case.run()
    require_doubled(case.result(), a, "numpy")
    wrong = case.result().copy()
    wrong[-1] += 1
    with pytest.raises(
        AssertionError, match=r"numpy add: result is not 2·a \(1 of [0-9,]+ elements wrong, first at"
    ):
        require_doubled(wrong, a, "numpy add")


def test_the_torch_call_is_torch_add_with_out_on_a_stand_in() -> None:
    calls: list[tuple] = []

    def add(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        calls.append((x, y))
        np.add(x, y, out=out)

    fake = SimpleNamespace(from_numpy=lambda array: array, full_like=np.full_like, add=add)
    a = np.arange(8, dtype=np.float32)
    case = call_case("torch", fake, a, calls=4)
    case.run()
    assert len(calls) == 4 and case.op == "torch.add" and case.compiler is None
    require_doubled(case.result(), a, "torch stand-in")


def test_the_jax_call_waits_for_each_result() -> None:
    waited: list[int] = []

    class Result:
        def __init__(self, value: np.ndarray) -> None:
            self.value = value

        def block_until_ready(self) -> Result:
            waited.append(1)
            return self

        def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
            return self.value

    fake = SimpleNamespace(
        jit=lambda function: lambda x: Result(function(x)),
        device_put=lambda array, device: array,
        devices=lambda backend: [backend],
    )
    a = np.ones(4, dtype=np.float32)
    case = call_case("jax", fake, a, calls=5)
    case.run()
    assert waited == [1] * 5 and case.compiler == "jax.jit"
    require_doubled(case.result(), a, "jax stand-in")


def test_unknown_frameworks_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown framework 'mxnet'"):
        call_case("mxnet", None, np.ones(1, dtype=np.float32), 1)
    with pytest.raises(ValueError, match="unknown framework 'mxnet'"):
        framework_ops("mxnet", None)


def test_intra_op_threads_sets_one_and_restores_the_default() -> None:
    state = {"threads": 8}
    fake = SimpleNamespace(
        get_num_threads=lambda: state["threads"], set_num_threads=lambda n: state.update(threads=n)
    )
    with intra_op_threads(fake, 1) as in_force:
        assert in_force == 1
    assert state["threads"] == 8
    with intra_op_threads(fake, "default") as in_force:
        assert in_force == 8
    assert {framework for framework, _ in CALLERS} == {"numpy", "torch", "jax"}


# --- the GPU module, on stand-ins ---------------------------------------------------------------------------


class _FakeCuda:
    """What the GPU module calls of ``torch.cuda``, recording the order of events."""

    def __init__(self) -> None:
        self.log: list[str] = []
        cuda = self

        class Event:
            def __init__(self, enable_timing: bool) -> None:
                assert enable_timing

            def record(self) -> None:
                cuda.log.append("event")

            def synchronize(self) -> None:
                cuda.log.append("event sync")

            def elapsed_time(self, end: object) -> float:
                return 2.0  # ms

        class Stream:
            def wait_stream(self, other: object) -> None:
                cuda.log.append("wait")

        class Graph:
            def replay(self) -> None:
                cuda.log.append("replay")

        class Context:
            def __init__(self, what: str) -> None:
                self.what = what

            def __enter__(self) -> None:
                cuda.log.append(f"enter {self.what}")

            def __exit__(self, *exc: object) -> None:
                cuda.log.append(f"exit {self.what}")

        self.Event, self.Stream, self.CUDAGraph = Event, Stream, Graph
        self.current_stream = Stream
        self.stream = lambda stream: Context("side stream")
        self.graph = lambda graph: Context("capture")
        self.synchronize = lambda: cuda.log.append("sync")


def test_events_time_each_round_and_convert_ms_to_seconds() -> None:
    cuda = _FakeCuda()
    submitted: list[int] = []
    median = torch_event_median_s(SimpleNamespace(cuda=cuda), lambda: submitted.append(1), rounds=3)
    assert median == pytest.approx(2e-3)
    assert len(submitted) == 3
    assert cuda.log[:3] == ["event", "event", "event sync"]


def test_a_torch_graph_is_warmed_up_on_a_side_stream_then_captured_once() -> None:
    cuda = _FakeCuda()
    ran: list[str] = []
    graph = capture_torch_graph(SimpleNamespace(cuda=cuda), lambda: ran.append(cuda.log[-1]))
    assert ran == ["enter side stream"] * 3 + ["enter capture"]
    assert cuda.log[-2:] == ["exit capture", "sync"]
    graph.replay()
    assert cuda.log[-1] == "replay"


def test_repeat_then_sync_launches_n_times_then_waits() -> None:
    log: list[str] = []
    call = then_sync(repeat(lambda: log.append("launch"), 3), lambda: log.append("sync"))
    call()
    assert log == ["launch"] * 3 + ["sync"]


def test_the_jax_ladder_function_reads_every_argument() -> None:
    xs = [np.full(1, index + 1, dtype=np.float32) for index in range(13)]
    assert float(jax_sum(np, *xs)[0]) == 1 + 13 * 14 / 2
    assert float(jax_sum(np)[0]) == 1


def test_gpu_arrays_come_through_dlpack_and_numpy_ones_by_copy() -> None:
    moved: list[tuple] = []

    class Tensor:
        def to(self, device: object, dtype: object) -> str:
            moved.append((device, dtype))
            return "copied"

    fake = SimpleNamespace(
        from_numpy=lambda array: Tensor(),
        from_dlpack=lambda array: "shared",
        cat=None,
        exp=None,
        sqrt=None,
        softmax=None,
        float32=None,
    )
    ops = torch_cuda_ops(fake)
    assert ops.asarray(np.ones(2), "cuda", "half") == "copied" and moved == [("cuda", "half")]
    assert ops.asarray(object(), "cuda", "half") == "shared"


def test_the_triton_ladder_has_cupys_argument_counts_and_never_passes_a_1() -> None:
    assert TRITON_LADDER_ARGS == LADDER_ARGS
    fake_triton = ModuleType("triton")
    fake_triton.jit = lambda function: function
    kernels = ladder_kernels(fake_triton)
    assert ladder_kernels(fake_triton) is kernels, "made once per module: the probe's compile is reused"
    for n_args, kernel in kernels.items():
        assert len(inspect.signature(kernel).parameters) == n_args
        args = ladder_args(n_args, "pointer")
        assert args[::2] == ("pointer",) * len(args[::2])
        assert all(isinstance(value, int) and value != 1 for value in args[1::2])
    with pytest.raises(ValueError, match="no Triton ladder kernel takes 2 arguments"):
        ladder_args(2, "pointer")
