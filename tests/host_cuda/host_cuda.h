// The CUDA a kernel source needs, on the host: force-included (g++ -include) before a .cu file compiled as
// C++17, so the real kernel bodies run on the CPU (tests/host_cuda/__init__.py is the driver).
//
// A launch runs its blocks one after another; the threads of a block are cooperative fibers (ucontext), one
// OS thread, each CUDA thread on its own stack. A fiber runs until it reaches __syncthreads, a warp shuffle
// or its end; then the scheduler releases what may go on:
//   - a shuffle, once every lane named in its mask waits at that same shuffle with that mask (lanes deposit
//     their values first, then each reads its partner's: two phases, so no value is overwritten early);
//   - a barrier, once every thread of the block waits at that same __syncthreads.
// Anything else with nothing left to run is a deadlock on a GPU, or undefined behaviour: the launch stops
// with an error that names the kernel, the block, the threads and the source lines (a divergent barrier,
// threads at different barriers, a lane of a shuffle's mask that has returned or waits elsewhere).
// The order in which fibers are resumed and blocks are run is forward or reverse, chosen per launch: a
// kernel that reads shared memory another thread writes without a barrier between, or whose result depends
// on which block finishes last, gives different results under the two orders.
// __shared__ variables are block-shared statics in one ELF section, filled with 0xFF bytes (NaN as float
// or half) before every block, so a read of shared memory no thread of the block wrote shows up as NaN.

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include <string>
#include <type_traits>
#include <utility>

// ------------------------------------------------------------------------------------------------------------
// Vector types and keywords
// ------------------------------------------------------------------------------------------------------------

struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct alignas(16) uint4 {  // CUDA's built-in vector types are aligned to their size
    unsigned int x, y, z, w;
};

struct alignas(16) float4 {
    float x, y, z, w;
};

#define __global__
#define __device__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
// Statics in one section, so the driver can poison all of them at once between blocks (the linker defines
// __start_/__stop_ symbols for a section whose name is a C identifier).
#define __shared__ static __attribute__((section("hostcuda_shared")))

extern "C" {
extern char __start_hostcuda_shared[] __attribute__((weak, visibility("hidden")));
extern char __stop_hostcuda_shared[] __attribute__((weak, visibility("hidden")));
}

namespace hostcuda {

// ------------------------------------------------------------------------------------------------------------
// Conversions and time
// ------------------------------------------------------------------------------------------------------------

// IEEE binary16 bits -> float, exact. A NaN becomes the canonical 0x7fffffff, as the host path of CUDA's
// cuda_fp16.hpp (__internal_half2float) makes it.
inline float half_to_float(unsigned short h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    uint32_t bits;
    if (exponent == 0x1fu) {
        bits = mantissa ? 0x7fffffffu : sign | 0x7f800000u;
    } else if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in float
        float magnitude = (float)mantissa * 0x1p-24f;
        memcpy(&bits, &magnitude, sizeof bits);
        bits |= sign;
    } else {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);  // rebias 15 -> 127
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

// float -> IEEE binary16 bits, rounded to nearest, ties to even (PTX cvt.rn.f16.f32). Overflow gives ±inf;
// a NaN becomes the canonical 0x7fff, as cuda_fp16.hpp's host path (__internal_float2half) makes it.
inline unsigned short float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u, magnitude = x & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return 0x7fffu;
    if (magnitude >= 0x47800000u) return (unsigned short)(sign | 0x7c00u);  // >= 2^16 (and inf): inf
    uint32_t half, rest, tie;
    if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half (or zero), in units of 2^-24
        const uint32_t exponent = magnitude >> 23;
        if (exponent < 102u) return (unsigned short)sign;  // below 2^-25: rounds to zero
        const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u, shift = 126u - exponent;
        half = significand >> shift;
        rest = significand & ((1u << shift) - 1u);
        tie = 1u << (shift - 1u);
    } else {  // normal: rebias the exponent, keep 10 of 23 mantissa bits
        half = (magnitude >> 13) - (112u << 10);
        rest = magnitude & 0x1fffu;
        tie = 0x1000u;
    }
    if (rest > tie || (rest == tie && (half & 1u))) ++half;  // a carry may reach the exponent, or inf: right
    return (unsigned short)(sign | half);
}

// CUDA's reciprocal square root (a macro below: C23's libm may declare an rsqrtf of its own).
inline float rsqrt(float x) { return 1.0f / sqrtf(x); }

inline unsigned long long monotonic_ns() {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec;
}

// ------------------------------------------------------------------------------------------------------------
// Fibers and the scheduler
// ------------------------------------------------------------------------------------------------------------

constexpr unsigned kMaxThreads = 1024;           // per block, as on every CUDA GPU
constexpr size_t kStackBytes = 256 * 1024;       // per fiber; untouched pages cost no memory
constexpr size_t kGuardBytes = 64 * 1024;        // below each stack, no access: an overflow faults at once

enum class Wait { running, barrier, shuffle, done };
enum class ShuffleMode { idx, up, down, bfly };

struct Fiber {
    ucontext_t context;
    char* stack = nullptr;
    uint3 thread_idx;
    unsigned linear;
    Wait wait;
    // Where it waits: the call's return address tells apart the inlined copies of one source line.
    const void* site;
    int line;
    const char* what;  // "__syncthreads", "__shfl_xor_sync", ...
    // A shuffle's operands, the value this lane deposits and the one it receives.
    unsigned mask;
    ShuffleMode mode;
    int operand, width;
    unsigned long long value, result;
};

struct State {
    const char* kernel;
    dim3 grid, block;
    uint3 block_idx;
    unsigned n_threads;
    bool reverse;
    Fiber* current;
    ucontext_t scheduler;
    void (*body)(void*);
    void* closure;
    std::string error;
};

inline State g;  // the launch in progress (the driver runs one at a time)
inline Fiber fibers[kMaxThreads];

inline std::string thread_name(const Fiber& f) {
    char text[96];
    snprintf(text, sizeof text, "thread (%u, %u, %u) (warp %u lane %u)", f.thread_idx.x, f.thread_idx.y,
             f.thread_idx.z, f.linear / 32, f.linear % 32);
    return text;
}

inline std::string where(const Fiber& f) {
    char text[128];
    if (f.wait == Wait::done) return "has returned";
    if (f.wait == Wait::barrier) snprintf(text, sizeof text, "waits at __syncthreads (line %d)", f.line);
    else snprintf(text, sizeof text, "waits at %s (line %d) with mask 0x%08x", f.what, f.line, f.mask);
    return text;
}

// Record the first error of the launch, prefixed with the kernel and block.
inline void fail(const std::string& message) {
    if (!g.error.empty()) return;
    char prefix[160];
    snprintf(prefix, sizeof prefix, "kernel %s, block (%u, %u, %u): ", g.kernel, g.block_idx.x, g.block_idx.y,
             g.block_idx.z);
    g.error = prefix + message;
}

// Each fiber loops over the blocks of its launch: it runs the kernel once per block, then reports done.
inline void fiber_main() {
    for (;;) {
        g.body(g.closure);
        Fiber* self = g.current;
        self->wait = Wait::done;
        swapcontext(&self->context, &g.scheduler);
    }
}

inline void suspend(Fiber* self) { swapcontext(&self->context, &g.scheduler); }

__attribute__((noinline)) inline void syncthreads(int line) {
    Fiber* self = g.current;
    self->wait = Wait::barrier;
    self->site = __builtin_return_address(0);
    self->line = line;
    self->what = "__syncthreads";
    suspend(self);
}

__attribute__((noinline)) inline unsigned long long exchange(int line, const char* what, ShuffleMode mode,
                                                            unsigned mask, unsigned long long value,
                                                            int operand, int width) {
    Fiber* self = g.current;
    if (width < 1 || width > 32 || (width & (width - 1))) {
        char text[128];
        snprintf(text, sizeof text, "%s (line %d): width %d is not a power of 2 in [1, 32]", what, line, width);
        fail(thread_name(*self) + " at " + text);
        suspend(self);  // the scheduler sees the error and never resumes this fiber
    }
    self->wait = Wait::shuffle;
    self->site = __builtin_return_address(0);
    self->line = line;
    self->what = what;
    self->mask = mask;
    self->mode = mode;
    self->operand = operand;
    self->width = width;
    self->value = value;
    suspend(self);
    return self->result;
}

template <class T>
__attribute__((always_inline)) inline T shuffle(int line, const char* what, ShuffleMode mode, unsigned mask,
                                                T var, int operand, int width = 32) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(unsigned long long),
                  "a warp shuffle moves a value of at most 8 bytes");
    unsigned long long bits = 0;
    memcpy(&bits, &var, sizeof var);
    bits = exchange(line, what, mode, mask, bits, operand, width);
    T out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

// The lane a lane reads, by PTX shfl's rules: within its segment of `width` lanes; up, down and bfly read
// their own value when the source falls past the segment.
inline unsigned source_lane(const Fiber& f) {
    const int lane = (int)(f.linear % 32), first = lane & ~(f.width - 1), last = first + f.width - 1;
    int source = lane;
    switch (f.mode) {
        case ShuffleMode::idx: source = first + (f.operand & (f.width - 1)); break;
        case ShuffleMode::up: source = lane - f.operand >= first ? lane - f.operand : lane; break;
        case ShuffleMode::down: source = lane + f.operand <= last ? lane + f.operand : lane; break;
        case ShuffleMode::bfly: source = (lane ^ f.operand) <= last ? lane ^ f.operand : lane; break;
    }
    return (unsigned)source;
}

inline bool same_shuffle(const Fiber& a, const Fiber& b) {
    return b.wait == Wait::shuffle && a.site == b.site && a.line == b.line && a.mask == b.mask;
}

// The lane of f's mask that keeps its shuffle from completing, or -1 if every named lane is there.
inline int missing_lane(const Fiber& f) {
    const unsigned warp_first = f.linear & ~31u;
    if (!(f.mask >> (f.linear % 32) & 1u)) return (int)(f.linear % 32);  // a lane must name itself
    for (unsigned lane = 0; lane < 32; ++lane) {
        if (!(f.mask >> lane & 1u)) continue;
        if (warp_first + lane >= g.n_threads || !same_shuffle(f, fibers[warp_first + lane])) return (int)lane;
    }
    return -1;
}

// Complete the shuffle of the first lane, in schedule order, whose named lanes have all arrived: results
// first, then release. One warp at a time, so the first warp in schedule order runs ahead of the others to
// its next barrier (a race between warps shows, not only one between barriers). Returns whether one
// completed.
inline bool complete_a_shuffle() {
    for (unsigned k = 0; k < g.n_threads; ++k) {
        Fiber& f = fibers[g.reverse ? g.n_threads - 1 - k : k];
        if (f.wait != Wait::shuffle || missing_lane(f) >= 0) continue;
        const unsigned warp_first = f.linear & ~31u;
        for (unsigned lane = 0; lane < 32; ++lane) {
            if (!(f.mask >> lane & 1u)) continue;
            Fiber& reader = fibers[warp_first + lane];
            const unsigned source = source_lane(reader);
            if (!(f.mask >> source & 1u)) {
                char text[160];
                snprintf(text, sizeof text, "%s (line %d) reads lane %u, which is not in mask 0x%08x", f.what,
                         f.line, source, f.mask);
                fail(thread_name(reader) + " at " + text);
                return false;
            }
            reader.result = fibers[warp_first + source].value;
        }
        for (unsigned lane = 0; lane < 32; ++lane)
            if (f.mask >> lane & 1u) fibers[warp_first + lane].wait = Wait::running;
        return true;
    }
    return false;
}

// Nothing can run and no shuffle can complete: release the barrier if the whole block waits at one,
// otherwise record why the block is stuck. Returns whether the barrier was released.
inline bool release_barrier() {
    const Fiber *first_barrier = nullptr, *first_done = nullptr;
    unsigned at_barrier = 0, done = 0;
    for (unsigned i = 0; i < g.n_threads; ++i) {
        const Fiber& f = fibers[i];
        if (f.wait == Wait::shuffle) {
            const int lane = missing_lane(f);
            const unsigned named = (f.linear & ~31u) + (unsigned)lane;
            const std::string but = ", but lane " + std::to_string(lane) + " named in the mask ";
            if (named == f.linear) fail(thread_name(f) + " " + where(f) + ", but its own lane is not in the mask");
            else if (named >= g.n_threads)
                fail(thread_name(f) + " " + where(f) + but + "does not exist (the block has " +
                     std::to_string(g.n_threads) + " threads)");
            else fail(thread_name(f) + " " + where(f) + but + where(fibers[named]));
            return false;
        }
        if (f.wait == Wait::done) {
            ++done;
            if (!first_done) first_done = &f;
        } else {
            ++at_barrier;
            if (!first_barrier) first_barrier = &f;
        }
    }
    if (done) {
        fail("divergent __syncthreads: " + std::to_string(done) + " threads have returned (first: " +
             thread_name(*first_done) + ") while " + std::to_string(at_barrier) + " wait at __syncthreads (line " +
             std::to_string(first_barrier->line) + ", first: " + thread_name(*first_barrier) + ")");
        return false;
    }
    for (unsigned i = 0; i < g.n_threads; ++i) {
        const Fiber& f = fibers[i];
        if (f.site != first_barrier->site || f.line != first_barrier->line) {
            fail("divergent __syncthreads: " + thread_name(*first_barrier) + " waits at line " +
                 std::to_string(first_barrier->line) + ", " + thread_name(f) + " at line " +
                 std::to_string(f.line) + " (or another inlined copy of it)");
            return false;
        }
    }
    for (unsigned i = 0; i < g.n_threads; ++i) fibers[i].wait = Wait::running;
    return true;
}

inline bool run_block() {
    const unsigned n = g.n_threads;
    for (unsigned i = 0; i < n; ++i) fibers[i].wait = Wait::running;
    const size_t shared_bytes = (uintptr_t)__stop_hostcuda_shared - (uintptr_t)__start_hostcuda_shared;
    if (shared_bytes) memset(__start_hostcuda_shared, 0xff, shared_bytes);
    for (;;) {
        bool all_done = true;
        for (unsigned k = 0; k < n; ++k) {
            Fiber& f = fibers[g.reverse ? n - 1 - k : k];
            if (f.wait == Wait::running) {
                g.current = &f;
                swapcontext(&g.scheduler, &f.context);
                if (!g.error.empty()) return false;
            }
            all_done = all_done && f.wait == Wait::done;
        }
        if (all_done) return true;
        if (complete_a_shuffle()) continue;
        if (!g.error.empty() || !release_barrier()) return false;
    }
}

inline bool prepare_fibers() {
    for (unsigned i = 0; i < g.n_threads; ++i) {
        Fiber& f = fibers[i];
        if (!f.stack) {
            void* memory = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (memory == MAP_FAILED || mprotect(memory, kGuardBytes, PROT_NONE) != 0) {
                g.error = "cannot map a fiber stack";
                return false;
            }
            f.stack = static_cast<char*>(memory) + kGuardBytes;
        }
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = f.stack;
        f.context.uc_stack.ss_size = kStackBytes;
        f.context.uc_link = nullptr;
        makecontext(&f.context, fiber_main, 0);
        f.linear = i;
        f.thread_idx = {i % g.block.x, i / g.block.x % g.block.y, i / (g.block.x * g.block.y)};
    }
    return true;
}

// Run body(closure) as kernel `kernel` on grid geometry[0..2] of blocks geometry[3..5]. Returns 0, or 1
// with the reason in error.
inline int run(const char* kernel, const unsigned* geometry, void (*body)(void*), void* closure, int reverse,
               char* error, size_t error_size) {
    g.kernel = kernel;
    g.grid = dim3(geometry[0], geometry[1], geometry[2]);
    g.block = dim3(geometry[3], geometry[4], geometry[5]);
    g.block_idx = {0, 0, 0};
    g.n_threads = g.block.x * g.block.y * g.block.z;
    g.reverse = reverse != 0;
    g.body = body;
    g.closure = closure;
    g.error.clear();
    const unsigned long long n_blocks = (unsigned long long)g.grid.x * g.grid.y * g.grid.z;
    if (!n_blocks || !g.n_threads || g.block.x > 1024 || g.block.y > 1024 || g.block.z > 64 ||
        (unsigned long long)g.block.x * g.block.y * g.block.z > kMaxThreads || g.grid.y > 65535 ||
        g.grid.z > 65535) {
        char text[160];
        snprintf(text, sizeof text, "kernel %s: invalid configuration: grid (%u, %u, %u), block (%u, %u, %u)",
                 kernel, g.grid.x, g.grid.y, g.grid.z, g.block.x, g.block.y, g.block.z);
        g.error = text;
    } else if (prepare_fibers()) {
        for (unsigned long long k = 0; k < n_blocks; ++k) {
            const unsigned long long b = g.reverse ? n_blocks - 1 - k : k;
            g.block_idx = {(unsigned)(b % g.grid.x), (unsigned)(b / g.grid.x % g.grid.y),
                           (unsigned)(b / ((unsigned long long)g.grid.x * g.grid.y))};
            if (!run_block()) break;
        }
    }
    snprintf(error, error_size, "%s", g.error.c_str());
    return g.error.empty() ? 0 : 1;
}

// ------------------------------------------------------------------------------------------------------------
// The launch ABI the driver calls (cudaLaunchKernel's: args[i] points to the value of parameter i)
// ------------------------------------------------------------------------------------------------------------

template <class... A, size_t... I>
void call(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<A*>(args[I])...);
}

template <class... A>
int launch(const char* name, void (*kernel)(A...), const unsigned* geometry, void** args, int reverse,
           char* error, size_t error_size) {
    struct Closure {
        void (*kernel)(A...);
        void** args;
    } closure{kernel, args};
    auto body = [](void* c) {
        Closure* k = static_cast<Closure*>(c);
        call(k->kernel, k->args, std::index_sequence_for<A...>{});
    };
    return run(name, geometry, body, &closure, reverse, error, error_size);
}

// -1 for a parameter passed by value, else the size of what the pointer points to (0: void).
template <class T>
constexpr long long pointee_size() {
    if constexpr (!std::is_pointer_v<T>) return -1;
    else if constexpr (std::is_void_v<std::remove_pointer_t<T>>) return 0;
    else return (long long)sizeof(std::remove_pointer_t<T>);
}

// Writes the first `capacity` parameters' sizes and pointee sizes; returns the parameter count.
template <class... A>
int parameters(void (*)(A...), long long* sizes, long long* pointees, int capacity) {
    const long long size[] = {(long long)sizeof(A)..., 0}, pointee[] = {pointee_size<A>()..., 0};
    const int count = (int)sizeof...(A);
    for (int i = 0; i < count && i < capacity; ++i) {
        sizes[i] = size[i];
        pointees[i] = pointee[i];
    }
    return count;
}

}  // namespace hostcuda

// ------------------------------------------------------------------------------------------------------------
// What kernels call
// ------------------------------------------------------------------------------------------------------------

#define threadIdx (static_cast<const uint3&>(::hostcuda::g.current->thread_idx))
#define blockIdx (static_cast<const uint3&>(::hostcuda::g.block_idx))
#define blockDim (static_cast<const dim3&>(::hostcuda::g.block))
#define gridDim (static_cast<const dim3&>(::hostcuda::g.grid))

#define __syncthreads() ::hostcuda::syncthreads(__LINE__)
#define __shfl_sync(mask, ...) \
    ::hostcuda::shuffle(__LINE__, "__shfl_sync", ::hostcuda::ShuffleMode::idx, mask, __VA_ARGS__)
#define __shfl_up_sync(mask, ...) \
    ::hostcuda::shuffle(__LINE__, "__shfl_up_sync", ::hostcuda::ShuffleMode::up, mask, __VA_ARGS__)
#define __shfl_down_sync(mask, ...) \
    ::hostcuda::shuffle(__LINE__, "__shfl_down_sync", ::hostcuda::ShuffleMode::down, mask, __VA_ARGS__)
#define __shfl_xor_sync(mask, ...) \
    ::hostcuda::shuffle(__LINE__, "__shfl_xor_sync", ::hostcuda::ShuffleMode::bfly, mask, __VA_ARGS__)

// Blocks run one at a time and fibers switch only at barriers and shuffles: every access is already
// ordered, so a fence is a compiler barrier and an atomic a plain read-modify-write.
inline void __threadfence() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

inline int atomicAdd(int* address, int value) {
    const int old = *address;
    *address = old + value;
    return old;
}
inline unsigned int atomicAdd(unsigned int* address, unsigned int value) {
    const unsigned int old = *address;
    *address = old + value;
    return old;
}
inline unsigned long long atomicAdd(unsigned long long* address, unsigned long long value) {
    const unsigned long long old = *address;
    *address = old + value;
    return old;
}
inline float atomicAdd(float* address, float value) {
    const float old = *address;
    *address = old + value;
    return old;
}

#define rsqrtf(x) ::hostcuda::rsqrt(x)

inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

inline int __float_as_int(float f) {
    int i;
    memcpy(&i, &f, sizeof i);
    return i;
}
