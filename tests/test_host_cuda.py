"""The host CUDA harness itself (``tests/host_cuda``): what it computes, and that each of its checks fails
when it should.

FP16 conversion is compared with numpy over every half and millions of floats (ties, subnormals, overflow,
NaN); small kernels written here exercise shared memory (per block, also with blocks interleaved), barriers
and every warp shuffle, and kernels with deliberate faults (a missing barrier, the first block to arrive
combining the others' partials, divergent barriers, a shuffle with an absent lane, out-of-bounds accesses,
a wrong-size scalar, an asm helper left unreplaced) must each be caught.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import kernels
from tests.host_cuda import (
    GUARD_BYTES,
    MODULE_HELPERS,
    SCHEDULES,
    HostCudaError,
    HostModule,
    guarded_array,
    guarded_empty,
    launch_each_schedule,
    prepare_source,
    unavailable_reason,
)

_REASON = unavailable_reason()
needs_host_cuda = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")

# ------------------------------------------------------------------------------------------------------------
# FP16 conversion (decode.cu's helpers with their host bodies)
# ------------------------------------------------------------------------------------------------------------

_CONVERT = r"""
extern "C" __global__ void halves_to_floats(const half_t* h, float* f, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) f[i] = half_to_float(h[i]);
}
extern "C" __global__ void floats_to_halves(const float* f, half_t* h, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) h[i] = float_to_half(f[i]);
}
"""


@pytest.fixture(scope="module")
def convert() -> HostModule:
    """decode.cu with two conversion kernels appended: its own helpers, with the bodies the driver gives
    them, convert."""
    return HostModule(kernels.source("decode") + _CONVERT, MODULE_HELPERS["decode"], name="decode.cu")


@needs_host_cuda
def test_every_half_converts_to_float_exactly(convert: HostModule) -> None:
    bits = np.arange(2**16, dtype=np.uint16)
    floats = guarded_empty(bits.size, np.float32)
    convert.get_function("halves_to_floats")((1,), (64,), (guarded_array(bits), floats, np.int32(bits.size)))
    expected = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(expected)
    assert nan.sum() == 2 * 1023  # every NaN half: either sign, any non-zero mantissa
    np.testing.assert_array_equal(floats.view(np.uint32)[~nan], expected.view(np.uint32)[~nan])
    assert (floats.view(np.uint32)[nan] == 0x7FFFFFFF).all(), "a NaN half becomes the canonical NaN"


def _float_samples() -> np.ndarray:
    """Floats where rounding to half is hard: every half, the midpoint of every two neighbouring halves (a
    tie, subnormal halves and the overflow to inf included) and the floats just either side of it, the
    boundaries of half's range, float subnormals, ±0, ±inf, NaN, and a million random bit patterns."""
    halves = np.arange(2**16, dtype=np.uint16).view(np.float16)
    finite = np.sort(halves[np.isfinite(halves) & (halves >= 0)].astype(np.float64))
    finite = np.append(finite, 65536.0)  # the overflow boundary: 65520 is the tie between 65504 and inf
    midpoints = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)  # exact: 12 significant bits
    positive = np.concatenate(
        [
            halves[np.isfinite(halves)].astype(np.float32),
            midpoints,
            np.nextafter(midpoints, np.float32(np.inf)),
            np.nextafter(midpoints, np.float32(0)),
            np.array([2.0**-25, 2.0**-26, 2.0**-24 * 1.5, 65504, 65519.996, 65520, 65536, 1e30], np.float32),
            np.arange(1, 2**12, dtype=np.uint32).view(np.float32),  # float subnormals
        ]
    )
    specials = np.array([np.inf, np.nan, 0.0], np.float32)
    random = np.random.default_rng(0).integers(0, 2**32, 1_000_000, dtype=np.uint32).view(np.float32)
    return np.concatenate([positive, -positive, specials, -specials, random])


@needs_host_cuda
def test_floats_convert_to_half_rounding_to_nearest_even(convert: HostModule) -> None:
    floats = _float_samples()
    halves = guarded_empty(floats.size, np.uint16)
    args = (guarded_array(floats), halves, np.int32(floats.size))
    convert.get_function("floats_to_halves")((1,), (64,), args)
    with np.errstate(over="ignore"):
        expected = floats.astype(np.float16)
    nan = np.isnan(floats)
    assert nan.sum() > 1000 and np.isinf(expected).sum() > 1000 and (expected == 0).sum() > 1000
    np.testing.assert_array_equal(halves[~nan], expected.view(np.uint16)[~nan])
    assert (halves[nan] == 0x7FFF).all(), "a NaN float becomes the canonical half NaN"


# ------------------------------------------------------------------------------------------------------------
# Kernels written here: shared memory, barriers, shuffles, and faults the harness must catch
# ------------------------------------------------------------------------------------------------------------

_KERNELS = r"""
#define THREADS 128

// The sum of v over the block, in thread 0 (warp shuffles, then shared memory across warps).
__device__ float block_sum(float v, float* warp_sums) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
    __syncthreads();
    float total = 0.0f;
    if (threadIdx.x == 0)
        for (int w = 0; w < THREADS / 32; ++w) total += warp_sums[w];
    return total;
}

// Sum of x[0 .. n) into total[0]: per-block sums into partial, and the block that arrives last at counter
// adds the partials (its threads read them in parallel) and resets the counter. With first_combines, the
// block that arrives FIRST combines (sum_first_combines, a deliberate fault): on a GPU a race, as the other
// blocks' partials may not be written yet.
__device__ void sum_blocks(const float* x, int n, float* partial, unsigned int* counter, float* total,
                           bool first_combines) {
    __shared__ float warp_sums[THREADS / 32];
    __shared__ bool is_last;
    float v = 0.0f;
    for (int i = blockIdx.x * THREADS + threadIdx.x; i < n; i += gridDim.x * THREADS) v += x[i];
    v = block_sum(v, warp_sums);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = v;
        __threadfence();
        is_last = atomicAdd(counter, 1u) == (first_combines ? 0u : gridDim.x - 1);
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    v = 0.0f;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += THREADS) v += partial[b];
    __syncthreads();  // warp_sums is reused
    v = block_sum(v, warp_sums);
    if (threadIdx.x == 0) {
        total[0] = v;
        counter[0] = 0u;
    }
}

extern "C" __global__ void sum(const float* x, int n, float* partial, unsigned int* counter, float* total) {
    sum_blocks(x, n, partial, counter, total, false);
}

extern "C" __global__ void sum_first_combines(const float* x, int n, float* partial, unsigned int* counter,
                                              float* total) {
    sum_blocks(x, n, partial, counter, total, true);
}

// The block sum without the barrier between writing warp_sums and reading them: a race.
extern "C" __global__ void racy_sum(const float* x, float* out) {
    __shared__ float warp_sums[THREADS / 32];
    float v = x[threadIdx.x];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
    if (threadIdx.x == 0) out[0] = warp_sums[0] + warp_sums[1] + warp_sums[2] + warp_sums[3];
}

// Each shuffle of each lane: out[kind * blockDim.x + thread] = the value read (lane values are 100 + lane).
extern "C" __global__ void shuffles(int* out, int width) {
    const int lane = threadIdx.x & 31, n = blockDim.x;
    const int v = 100 + lane;
    out[0 * n + threadIdx.x] = __shfl_sync(0xffffffffu, v, (lane * 7 + 3) % 32, width);
    out[1 * n + threadIdx.x] = __shfl_up_sync(0xffffffffu, v, 3, width);
    out[2 * n + threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 3, width);
    out[3 * n + threadIdx.x] = __shfl_xor_sync(0xffffffffu, v, 5, width);
}

extern "C" __global__ void barrier_in_a_branch(float* x) {
    if (threadIdx.x < 16) __syncthreads();
    x[threadIdx.x] = 1.0f;
}

extern "C" __global__ void different_barriers(float* x) {
    if (threadIdx.x & 1) {
        __syncthreads();  // odd threads
    } else {
        __syncthreads();  // even threads
    }
    x[threadIdx.x] = 1.0f;
}

extern "C" __global__ void shuffle_after_some_returned(float* x) {
    if (threadIdx.x >= 8) return;
    x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, x[threadIdx.x], 1);
}

extern "C" __global__ void shuffle_masked(float* x, unsigned int mask, int lane_mask) {
    x[threadIdx.x] = __shfl_xor_sync(mask, x[threadIdx.x], lane_mask);
}

// x[i + shift] = i for i < n: with shift -1 or 1, one element falls out of bounds.
extern "C" __global__ void write_shifted(float* x, int n, int shift) {
    if (threadIdx.x < n) x[(int)threadIdx.x + shift] = (float)threadIdx.x;
}

extern "C" __global__ void read_shifted(const float* x, float* y, int n, int shift) {
    if (threadIdx.x < n) y[threadIdx.x] = x[(int)threadIdx.x + shift];
}

extern "C" __global__ void read_shared_unwritten(float* y) {
    __shared__ float never_written[THREADS];
    y[threadIdx.x] = never_written[threadIdx.x];
}

// Even blocks write shared memory and read a neighbour's element; odd blocks read without writing.
extern "C" __global__ void shared_per_block(float* y) {
    __shared__ float s[THREADS];
    if (blockIdx.x % 2 == 0) s[threadIdx.x] = (float)(blockIdx.x * THREADS + threadIdx.x);
    __syncthreads();
    y[blockIdx.x * THREADS + threadIdx.x] = s[(threadIdx.x + 1) % THREADS];
}
"""


@pytest.fixture(scope="module")
def module() -> HostModule:
    """The kernels above, compiled once for the module's tests."""
    return HostModule(_KERNELS, name="test_kernels.cu")


def _line(marker: str) -> int:
    """The line of ``_KERNELS`` that holds ``marker`` (as errors cite it)."""
    return next(n for n, text in enumerate(_KERNELS.splitlines(), 1) if marker in text)


def _sum_args(n: int, blocks: int) -> tuple[np.ndarray, tuple[object, ...]]:
    """x (integers: exact float sums in any order) and the arguments of ``sum`` over ``blocks`` blocks."""
    x = np.random.default_rng(n).integers(-1000, 1000, n).astype(np.float32)
    args = (
        x,
        np.int32(n),
        guarded_empty(blocks, np.float32),
        np.zeros(1, np.uint32),
        np.zeros(1, np.float32),
    )
    return x, args


@needs_host_cuda
@pytest.mark.parametrize(("n", "blocks"), [(1, 1), (1000, 3), (20_000, 7), (20_000, 40)])
def test_block_reduction_is_right_under_every_schedule(module: HostModule, n: int, blocks: int) -> None:
    x, args = _sum_args(n, blocks)
    _, _, partial, counter, total = launch_each_schedule(module.get_function("sum"), (blocks,), (128,), args)
    assert total[0] == x.sum(dtype=np.float64)
    assert counter[0] == 0, "the last block resets the counter"
    assert np.isfinite(partial).all()


@needs_host_cuda
@pytest.mark.parametrize("blocks", [2, 3, 7, 40])
def test_the_first_block_combining_partials_is_caught_interleaved(module: HostModule, blocks: int) -> None:
    """One after another, each block finds the counter at 0 (the block before reset it) and combines, the
    last one with every partial written: the right sum. Interleaved, the first block to arrive reads
    partials other blocks have not written (NaN) while they arrive before it resets the counter."""
    x, args = _sum_args(20_000, blocks)
    first_combines = module.get_function("sum_first_combines")
    for schedule in SCHEDULES:
        copies = tuple(guarded_array(arg) if isinstance(arg, np.ndarray) else arg for arg in args)
        first_combines((blocks,), (128,), copies, schedule=schedule)
        total, counter = copies[4][0], copies[3][0]
        if schedule == "interleaved":
            assert np.isnan(total), "the first block read partials not written yet"
        else:
            assert total == x.sum(dtype=np.float64) and counter == 0
    with pytest.raises(
        HostCudaError, match=r"sum_first_combines argument 4: the forward and interleaved schedules disagree"
    ):
        launch_each_schedule(first_combines, (blocks,), (128,), args)


@needs_host_cuda
def test_shared_memory_is_per_block_and_poisoned_when_a_block_starts(module: HostModule) -> None:
    """Interleaved, blocks switch between the writes and the reads; 70 blocks of 128 threads are more than
    are resident at once (8192 threads), so blocks also start where others ended."""
    blocks = 70
    (y,) = launch_each_schedule(
        module.get_function("shared_per_block"), (blocks,), (128,), (guarded_empty(blocks * 128, np.float32),)
    )
    block, thread = np.divmod(np.arange(blocks * 128), 128)
    even = block % 2 == 0
    np.testing.assert_array_equal(y[even], (block * 128 + (thread + 1) % 128)[even].astype(np.float32))
    assert np.isnan(y[~even]).all(), "odd blocks read shared memory no thread of theirs wrote"


@needs_host_cuda
def test_a_missing_barrier_makes_the_schedules_disagree(module: HostModule) -> None:
    x = np.ones(128, np.float32)
    racy = module.get_function("racy_sum")
    with pytest.raises(
        HostCudaError, match=r"racy_sum argument 1: the forward and reverse schedules disagree"
    ):
        launch_each_schedule(racy, (1,), (128,), (x, guarded_empty(1, np.float32)))
    forward = guarded_empty(1, np.float32)
    racy((1,), (128,), (x, forward))
    assert np.isnan(forward[0]), "thread 0 runs first and reads shared memory no thread wrote yet: NaN"


def _expected_shuffles(n_threads: int, width: int) -> np.ndarray:
    """PTX shfl's rules: a lane reads within its segment of ``width`` lanes; up, down and xor read their
    own value when the source falls past the segment."""
    thread = np.arange(n_threads)
    lane = thread % 32
    first = lane & ~(width - 1)
    last = first + width - 1
    idx = first + ((lane * 7 + 3) % 32 & (width - 1))
    up = np.where(lane - 3 >= first, lane - 3, lane)
    down = np.where(lane + 3 <= last, lane + 3, lane)
    xor = np.where((lane ^ 5) <= last, lane ^ 5, lane)
    return 100 + np.concatenate([idx, up, down, xor])


@needs_host_cuda
@pytest.mark.parametrize("width", [32, 8, 1])
def test_shuffles_read_their_partner_lane(module: HostModule, width: int) -> None:
    out = guarded_empty(4 * 64, np.int32)
    (out, _) = launch_each_schedule(module.get_function("shuffles"), (2,), (64,), (out, np.int32(width)))
    np.testing.assert_array_equal(out, _expected_shuffles(64, width))


@needs_host_cuda
def test_a_shuffle_width_that_is_not_a_power_of_two_is_refused(module: HostModule) -> None:
    with pytest.raises(
        HostCudaError, match=r"kernel shuffles, block \(0, 0, 0\): .* width 12 is not a power"
    ):
        module.get_function("shuffles")((1,), (32,), (guarded_empty(128, np.int32), np.int32(12)))


@needs_host_cuda
def test_a_barrier_some_threads_skip_is_refused(module: HostModule) -> None:
    with pytest.raises(
        HostCudaError,
        match=r"kernel barrier_in_a_branch, block \(1, 0, 0\): divergent __syncthreads: 16 threads have "
        rf"returned .* while 16 wait at __syncthreads \(line {_line('< 16) __syncthreads')},",
    ):
        module.get_function("barrier_in_a_branch")(
            (2,), (32,), (guarded_empty(32, np.float32),), schedule="reverse"
        )


@needs_host_cuda
def test_threads_at_different_barriers_are_refused(module: HostModule) -> None:
    odd, even = _line("// odd threads"), _line("// even threads")
    with pytest.raises(
        HostCudaError, match=rf"divergent __syncthreads: .* waits at line {even}, .* at line {odd}"
    ):
        module.get_function("different_barriers")((1,), (32,), (guarded_empty(32, np.float32),))


@needs_host_cuda
def test_a_shuffle_needs_every_lane_of_its_mask(module: HostModule) -> None:
    kernel = module.get_function("shuffle_after_some_returned")
    line = _line("x[threadIdx.x] = __shfl_xor_sync")
    with pytest.raises(
        HostCudaError, match=rf"waits at __shfl_xor_sync \(line {line}\) .* lane 8 named in the mask has"
    ):
        kernel((1,), (32,), (guarded_empty(32, np.float32),))
    with pytest.raises(
        HostCudaError, match=r"lane 8 named in the mask does not exist \(the block has 8 threads\)"
    ):
        kernel((1,), (8,), (guarded_empty(32, np.float32),))


@needs_host_cuda
@pytest.mark.parametrize(
    ("mask", "lane_mask", "message"),
    [
        (
            0xFFFFFFFE,
            1,
            r"thread \(1, 0, 0\) \(warp 0 lane 1\) at __shfl_xor_sync .* reads lane 0, which is not in",
        ),
        (
            0x0000FFFE,
            0,
            r"thread \(0, 0, 0\) \(warp 0 lane 0\) waits at .* but its own lane is not in the mask",
        ),
    ],
    ids=["reads-outside-mask", "caller-outside-mask"],
)
def test_a_shuffle_mask_must_name_the_lanes_involved(
    module: HostModule, mask: int, lane_mask: int, message: str
) -> None:
    args = (guarded_empty(32, np.float32), np.uint32(mask), np.int32(lane_mask))
    with pytest.raises(HostCudaError, match=message):
        module.get_function("shuffle_masked")((1,), (32,), args)


@needs_host_cuda
@pytest.mark.parametrize(("shift", "side"), [(1, "after"), (-1, "before")])
def test_an_out_of_bounds_write_is_caught(module: HostModule, shift: int, side: str) -> None:
    x = guarded_empty(64, np.float32)
    with pytest.raises(
        HostCudaError, match=rf"kernel write_shifted argument 0: 4 guard bytes {side} the array were written"
    ):
        module.get_function("write_shifted")((1,), (64,), (x, np.int32(64), np.int32(shift)))


@needs_host_cuda
def test_an_out_of_bounds_read_reads_nan(module: HostModule) -> None:
    x, y = guarded_array(np.arange(64, dtype=np.float32)), guarded_empty(64, np.float32)
    module.get_function("read_shifted")((1,), (64,), (x, y, np.int32(64), np.int32(1)))
    np.testing.assert_array_equal(y[:-1], x[1:])
    assert np.isnan(y[-1])


@needs_host_cuda
def test_unwritten_shared_memory_reads_nan(module: HostModule) -> None:
    y = guarded_array(np.zeros(128, np.float32))
    module.get_function("read_shared_unwritten")((2,), (128,), (y,))
    assert np.isnan(y).all()


# ------------------------------------------------------------------------------------------------------------
# Refused arguments and sources
# ------------------------------------------------------------------------------------------------------------


@needs_host_cuda
@pytest.mark.parametrize("n", [64, np.int64(64), np.uint16(64)], ids=["python-int", "int64", "uint16"])
def test_a_scalar_of_the_wrong_size_is_refused(module: HostModule, n: object) -> None:
    size = np.asarray(n).itemsize if isinstance(n, np.generic) else 8  # CuPy: a Python int is a long long
    with pytest.raises(
        HostCudaError,
        match=rf"kernel write_shifted argument 1: a \w+ scalar is {size} bytes, the parameter 4",
    ):
        module.get_function("write_shifted")((1,), (64,), (guarded_empty(64, np.float32), n, np.int32(0)))


@needs_host_cuda
def test_arrays_and_argument_counts_are_checked(module: HostModule) -> None:
    kernel = module.get_function("read_shifted")
    y = guarded_empty(64, np.float32)
    with pytest.raises(
        HostCudaError, match=r"argument 0: a float16 array \(2-byte elements\) for a pointer to 4"
    ):
        kernel((1,), (64,), (np.zeros(64, np.float16), y, np.int32(64), np.int32(0)))
    with pytest.raises(HostCudaError, match=r"argument 0: the array is not C-contiguous"):
        kernel((1,), (64,), (np.zeros(128, np.float32)[::2], y, np.int32(64), np.int32(0)))
    with pytest.raises(
        HostCudaError, match=r"argument 2: an array for a parameter passed by value \(4 bytes\)"
    ):
        kernel((1,), (64,), (y, y, y, np.int32(0)))
    with pytest.raises(HostCudaError, match=r"kernel read_shifted takes 4 arguments, 3 given"):
        kernel((1,), (64,), (y, y, np.int32(64)))
    with pytest.raises(HostCudaError, match=r"invalid configuration: grid \(1, 1, 1\), block \(2048, 1, 1\)"):
        kernel((1,), (2048,), (y, y, np.int32(64), np.int32(0)))
    with pytest.raises(HostCudaError, match=r"no extern \"C\" __global__ kernel 'nope'"):
        module.get_function("nope")


def test_an_asm_helper_left_without_a_host_body_is_refused() -> None:
    decode = kernels.source("decode")
    helpers = tuple(helper for helper in MODULE_HELPERS["decode"] if helper != "load_cg")
    line = next(n for n, text in enumerate(decode.splitlines(), 1) if "ld.global.cg.f32" in text)
    with pytest.raises(
        HostCudaError, match=rf"inline asm remains at line {line} \(asm volatile\(\"ld\.global\.cg"
    ):
        prepare_source(decode, helpers)
    with pytest.raises(HostCudaError, match=r"helper globaltimer_ns: no definition in the source"):
        prepare_source(decode, (*MODULE_HELPERS["decode"], "globaltimer_ns"))
    with pytest.raises(HostCudaError, match=r"no host body for helpers \['warp_sum'\]"):
        prepare_source(decode, ("warp_sum",))


def test_replacing_helpers_keeps_every_line_number() -> None:
    """g++'s messages and the harness's (barrier and shuffle lines) cite the .cu file's own lines."""
    for name, helpers in MODULE_HELPERS.items():
        source = kernels.source(name).splitlines()
        prepared = prepare_source(kernels.source(name), helpers).splitlines()
        assert len(prepared) == len(source)
        for number, (before, after) in enumerate(zip(source, prepared, strict=True), 1):
            if any(word in before for word in ("__global__", "__syncthreads", "__shfl")):
                assert after == before, f"{name}.cu line {number} moved or changed"


@needs_host_cuda
def test_a_compile_error_carries_gxx_message() -> None:
    with pytest.raises(HostCudaError, match=r"(?s)g\+\+ could not compile broken\.cu.*broken\.cu:2:"):
        HostModule('extern "C" __global__ void k(int* x) {\n    x[0] = undeclared;\n}\n', name="broken.cu")


def test_guarded_arrays_are_aligned_copies_within_poison() -> None:
    values = np.arange(10, dtype=np.float32)
    x = guarded_array(values)
    np.testing.assert_array_equal(x, values)
    assert x.ctypes.data % 256 == 0, "cudaMalloc's alignment: 16-byte vector loads stay aligned"
    raw = x.base
    while raw.base is not None:
        raw = raw.base
    start = x.ctypes.data - raw.ctypes.data
    assert start >= GUARD_BYTES and raw.size - start - x.nbytes >= GUARD_BYTES
    assert (raw[:start] == 0xFF).all() and (raw[start + x.nbytes :] == 0xFF).all()
    assert np.isnan(guarded_empty((3, 5), np.float16)).all(), "fresh guarded arrays read as NaN"


def _shadow_stack_on() -> bool:
    """Whether the kernel keeps a shadow stack for this process (Linux 6.6+ lists it in /proc)."""
    status = Path("/proc/self/status")
    text = status.read_text(encoding="utf-8") if status.exists() else ""
    features = next((line for line in text.splitlines() if line.startswith("x86_Thread_features:")), "")
    return "shstk" in features.split()


@needs_host_cuda
def test_fibers_switch_stacks_by_hand_only_on_x86_64_without_a_shadow_stack(module: HostModule) -> None:
    by_hand = platform.machine() == "x86_64" and not _shadow_stack_on()
    asked = os.environ.get("HOSTCUDA_FIBERS") == "ucontext"
    assert module.fibers == ("stack switch" if by_hand and not asked else "ucontext")


@needs_host_cuda
@pytest.mark.skipif(platform.machine() != "x86_64", reason="fibers switch by ucontext alone off x86-64")
@pytest.mark.skipif(os.environ.get("HOSTCUDA_FIBERS") == "ucontext", reason="this is the run by ucontext")
def test_this_module_passes_with_fibers_switched_by_ucontext() -> None:
    """Where a shadow stack is on, fibers switch by ucontext on x86-64 too: every test above, run again in
    a fresh process that asks for it (the test of the way fibers switch checks it took)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "--benchmark-disable"],
        cwd=Path(__file__).parent.parent,
        env={**os.environ, "HOSTCUDA_FIBERS": "ucontext"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.fullmatch(r"\d+ passed, 1 skipped in .*", done.stdout.splitlines()[-1]), done.stdout[-500:]
