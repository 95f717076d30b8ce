// The CUDA a kernel source needs, on the host: force-included (g++ -include) before a .cu file compiled as
// C++17, so the real kernel bodies run on the CPU (tests/host_cuda/__init__.py is the driver).
//
// The threads of a block are cooperative fibers (switch_context: a few instructions on x86-64 without a
// shadow stack, ucontext elsewhere), one OS thread, each CUDA thread on its own stack. A fiber runs until it
// reaches __syncthreads, a warp shuffle or its end (or, in the interleaved schedule, an atomic); then the
// scheduler releases what may go on:
//   - a shuffle, once every lane named in its mask waits at that same shuffle with that mask (lanes deposit
//     their values first, then each reads its partner's: two phases, so no value is overwritten early);
//   - a barrier, once every thread of the block waits at that same __syncthreads.
// Anything else with nothing left to run is a deadlock on a GPU, or undefined behaviour: the launch stops
// with an error that names the kernel, the block, the threads and the source lines (a divergent barrier,
// threads at different barriers, a lane of a shuffle's mask that has returned or waits elsewhere).
// Three schedules, chosen per launch:
//   - forward and reverse: the blocks run one after another, in that order, and each block resumes its
//     fibers in that order. A kernel that reads shared memory another thread writes without a barrier
//     between gives different results under the two.
//   - interleaved: the blocks run at the same time. Blocks of up to kMaxResidentThreads threads in all are
//     resident (later blocks start as earlier ones end, as on a full GPU); a new block starts every
//     kStaggerTurns rounds, so earlier blocks are ahead. Each round gives every resident block one turn,
//     in block order: a pass over its runnable fibers (forward order), or the release of one shuffle or
//     barrier. An atomic returns to the scheduler once done and ends its block's turn; from the block's
//     next release on, its turns resume one fiber each, and a fiber that has performed an atomic is
//     resumed after the block's other runnable fibers. So other blocks run between a block's atomic and
//     its use of the result, and between its threads' reads of what other blocks wrote and its thread's
//     reset of the counter: a kernel in which the first block to reach a counter combines partials the
//     others have not written yet gives a different result (NaN or a wrong value) here, deterministically.
//     It cannot show when one thread's uninterrupted code both reads the partials and resets the counter.
// __shared__ variables are block-shared statics in one ELF section, filled with 0xFF bytes (NaN as float
// or half) when a block starts, so a read of shared memory no thread of the block wrote shows up as NaN.
// Interleaved, each resident block has its own copy of the section, swapped in when the block's turn
// comes.

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#if defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <string>
#include <vector>
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
// Statics in one section, so the shim can poison, save and restore all of them at once (the linker defines
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
// Interleaved: the threads of all resident blocks together, so at most this many fibers (and 2 mappings
// each, of vm.max_map_count's 65530) ever exist; each touches a page or two of its stack.
constexpr unsigned kMaxResidentThreads = 8192;
constexpr unsigned kStaggerTurns = 6;            // interleaved: rounds between the starts of two blocks

enum Schedule { kForward = 0, kReverse = 1, kInterleaved = 2 };

// A fiber's saved registers, switch_context(save, next) and start_context(context, stack, entry). On x86-64
// a switch is the few instructions of hostcuda_switch_stack: glibc's swapcontext also saves and restores
// the signal mask, a system call at every switch, which took most of a launch's time (no fiber changes the
// mask). Elsewhere, and on x86-64 where the kernel keeps a shadow stack for the process (Intel CET, AMD's
// shadow stacks; Linux 6.6+: a hand-switched stack's `ret` would not match it, while glibc gives each
// makecontext stack a shadow stack of its own), ucontext.
struct Context {
    ucontext_t uc;
#if defined(__x86_64__)
    void* sp = nullptr;  // where hostcuda_switch_stack pushed the registers when the fiber was switched out
#endif
};

#if defined(__x86_64__)
extern "C" __attribute__((visibility("hidden"))) void hostcuda_switch_stack(void** save, void* next);
// Pushes what the System V ABI has a callee keep (rbp, rbx, r12-r15, the SSE and x87 control words) on the
// current stack, stores the stack pointer in *save, loads `next` and pops the same from there.
__asm__(
    ".pushsection .text\n"
    ".p2align 4\n"
    ".globl hostcuda_switch_stack\n"
    ".hidden hostcuda_switch_stack\n"
    ".type hostcuda_switch_stack, @function\n"
    "hostcuda_switch_stack:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size hostcuda_switch_stack, .-hostcuda_switch_stack\n"
    ".popsection\n");

// Whether this process's fibers switch through ucontext all the same: a shadow stack is on
// (arch_prctl ARCH_SHSTK_STATUS, 0x5005, reports ARCH_SHSTK_SHSTK, bit 0; kernels without shadow stacks
// refuse the call), or HOSTCUDA_FIBERS=ucontext asks (the tests run both ways). Decided once, before the
// first fiber starts: a fiber is switched the way it was started.
inline bool switch_by_ucontext() {
    static const bool chosen = [] {
        const char* asked = getenv("HOSTCUDA_FIBERS");
        if (asked != nullptr && strcmp(asked, "ucontext") == 0) return true;
        unsigned long long features = 0;
        return syscall(SYS_arch_prctl, 0x5005, &features) == 0 && (features & 1) != 0;
    }();
    return chosen;
}

// `stack` (`bytes`, a multiple of 16, 16-aligned) laid out as hostcuda_switch_stack leaves a stack: the
// control words in force now, six zeroed registers and `entry` as the return address, placed so that
// `entry` starts with the stack aligned as after a call. `entry` never returns.
inline void start_switched_stack(Context& context, char* stack, size_t bytes, void (*entry)()) {
    void** sp = reinterpret_cast<void**>(stack + bytes) - 9;
    uint32_t words[2] = {0, 0};
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(words[0]), "=m"(words[1]));
    memcpy(&sp[0], words, sizeof words);
    for (int slot = 1; slot <= 6; ++slot) sp[slot] = nullptr;
    sp[7] = reinterpret_cast<void*>(entry);
    sp[8] = nullptr;
    context.sp = sp;
}
#else
inline bool switch_by_ucontext() { return true; }  // off x86-64, fibers switch through ucontext alone
#endif

inline void switch_context(Context& save, const Context& next) {
#if defined(__x86_64__)
    if (!switch_by_ucontext()) {
        hostcuda_switch_stack(&save.sp, next.sp);
        return;
    }
#endif
    swapcontext(&save.uc, &next.uc);
}

inline void start_context(Context& context, char* stack, size_t bytes, void (*entry)()) {
#if defined(__x86_64__)
    if (!switch_by_ucontext()) {
        start_switched_stack(context, stack, bytes, entry);
        return;
    }
#endif
    getcontext(&context.uc);
    context.uc.uc_stack.ss_sp = stack;
    context.uc.uc_stack.ss_size = bytes;
    context.uc.uc_link = nullptr;
    makecontext(&context.uc, entry, 0);
}

// How this module's fibers switch (HostModule.fibers): 1 through ucontext, 0 by hostcuda_switch_stack.
extern "C" __attribute__((visibility("default"))) int hostcuda_fibers_by_ucontext() {
    return switch_by_ucontext() ? 1 : 0;
}

enum class Wait { running, barrier, shuffle, done };
enum class ShuffleMode { idx, up, down, bfly };

struct Fiber {
    Context context;
    char* stack = nullptr;
    uint3 thread_idx;
    unsigned linear;
    Wait wait;
    bool atomic;  // interleaved: it has performed an atomic (it is then resumed after the others)
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

// Interleaved: a resident block.
struct Slot {
    bool active;
    bool after_atomic;  // one of its fibers has performed an atomic
    bool one_by_one;    // and a shuffle or barrier has been released since: one fiber per turn
    uint3 block_idx;
    Fiber* fibers;      // its n_threads fibers
    char* shared;       // its copy of the shared section, while another block's is in place
};

struct State {
    const char* kernel;
    dim3 grid, block;
    uint3 block_idx;
    unsigned n_threads;
    int schedule;
    bool reverse;
    Fiber* fibers;  // the current block's fibers
    Fiber* current;
    Slot* slot;          // interleaved: the current block
    Slot* shared_owner;  // interleaved: the block whose shared memory is in the section
    Context scheduler;
    void (*body)(void*);
    void* closure;
    std::string error;
};

inline State g;  // the launch in progress (the driver runs one at a time)
inline Fiber fibers[kMaxResidentThreads];  // all fibers; a block's are consecutive

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
        switch_context(self->context, g.scheduler);
    }
}

inline void suspend(Fiber* self) { switch_context(self->context, g.scheduler); }

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
        if (warp_first + lane >= g.n_threads || !same_shuffle(f, g.fibers[warp_first + lane]))
            return (int)lane;
    }
    return -1;
}

// Complete the shuffle of the first lane, in schedule order, whose named lanes have all arrived: results
// first, then release. One warp at a time, so the first warp in schedule order runs ahead of the others to
// its next barrier (a race between warps shows, not only one between barriers). Returns whether one
// completed.
inline bool complete_a_shuffle() {
    for (unsigned k = 0; k < g.n_threads; ++k) {
        Fiber& f = g.fibers[g.reverse ? g.n_threads - 1 - k : k];
        if (f.wait != Wait::shuffle || missing_lane(f) >= 0) continue;
        const unsigned warp_first = f.linear & ~31u;
        for (unsigned lane = 0; lane < 32; ++lane) {
            if (!(f.mask >> lane & 1u)) continue;
            Fiber& reader = g.fibers[warp_first + lane];
            const unsigned source = source_lane(reader);
            if (!(f.mask >> source & 1u)) {
                char text[160];
                snprintf(text, sizeof text, "%s (line %d) reads lane %u, which is not in mask 0x%08x", f.what,
                         f.line, source, f.mask);
                fail(thread_name(reader) + " at " + text);
                return false;
            }
            reader.result = g.fibers[warp_first + source].value;
        }
        for (unsigned lane = 0; lane < 32; ++lane)
            if (f.mask >> lane & 1u) g.fibers[warp_first + lane].wait = Wait::running;
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
        const Fiber& f = g.fibers[i];
        if (f.wait == Wait::shuffle) {
            const int lane = missing_lane(f);
            const unsigned named = (f.linear & ~31u) + (unsigned)lane;
            const std::string but = ", but lane " + std::to_string(lane) + " named in the mask ";
            if (named == f.linear) fail(thread_name(f) + " " + where(f) + ", but its own lane is not in the mask");
            else if (named >= g.n_threads)
                fail(thread_name(f) + " " + where(f) + but + "does not exist (the block has " +
                     std::to_string(g.n_threads) + " threads)");
            else fail(thread_name(f) + " " + where(f) + but + where(g.fibers[named]));
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
        const Fiber& f = g.fibers[i];
        if (f.site != first_barrier->site || f.line != first_barrier->line) {
            fail("divergent __syncthreads: " + thread_name(*first_barrier) + " waits at line " +
                 std::to_string(first_barrier->line) + ", " + thread_name(f) + " at line " +
                 std::to_string(f.line) + " (or another inlined copy of it)");
            return false;
        }
    }
    for (unsigned i = 0; i < g.n_threads; ++i) g.fibers[i].wait = Wait::running;
    return true;
}

inline size_t shared_bytes() {
    return (uintptr_t)__stop_hostcuda_shared - (uintptr_t)__start_hostcuda_shared;
}

inline bool run_block() {
    const unsigned n = g.n_threads;
    for (unsigned i = 0; i < n; ++i) g.fibers[i].wait = Wait::running;
    if (shared_bytes()) memset(__start_hostcuda_shared, 0xff, shared_bytes());
    for (;;) {
        bool all_done = true;
        for (unsigned k = 0; k < n; ++k) {
            Fiber& f = g.fibers[g.reverse ? n - 1 - k : k];
            if (f.wait == Wait::running) {
                g.current = &f;
                switch_context(g.scheduler, f.context);
                if (!g.error.empty()) return false;
            }
            all_done = all_done && f.wait == Wait::done;
        }
        if (all_done) return true;
        if (complete_a_shuffle()) continue;
        if (!g.error.empty() || !release_barrier()) return false;
    }
}

// Give fibers[first .. first + count) stacks (mapped once, kept for later launches) and fresh contexts
// that start the kernel, as threads 0 .. count - 1 of a block.
inline bool prepare_fibers(unsigned first, unsigned count) {
    for (unsigned i = 0; i < count; ++i) {
        Fiber& f = fibers[first + i];
        if (!f.stack) {
            void* memory = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (memory == MAP_FAILED || mprotect(memory, kGuardBytes, PROT_NONE) != 0) {
                if (memory != MAP_FAILED) munmap(memory, kGuardBytes + kStackBytes);
                g.error = "cannot map a fiber stack (fiber " + std::to_string(first + i) + ")";
                return false;
            }
            f.stack = static_cast<char*>(memory) + kGuardBytes;
        }
        start_context(f.context, f.stack, kStackBytes, fiber_main);
        f.linear = i;
        f.thread_idx = {i % g.block.x, i / g.block.x % g.block.y, i / (g.block.x * g.block.y)};
        f.wait = Wait::running;
        f.atomic = false;
    }
    return true;
}

inline uint3 block_index(unsigned long long b) {
    return {(unsigned)(b % g.grid.x), (unsigned)(b / g.grid.x % g.grid.y),
            (unsigned)(b / ((unsigned long long)g.grid.x * g.grid.y))};
}

// Interleaved: make `slot` the current block, its shared memory in the section (the previous owner's
// saved first).
inline void switch_to(Slot& slot) {
    if (g.shared_owner != &slot) {
        const size_t bytes = shared_bytes();
        if (bytes && g.shared_owner) memcpy(g.shared_owner->shared, __start_hostcuda_shared, bytes);
        if (bytes) memcpy(__start_hostcuda_shared, slot.shared, bytes);
        g.shared_owner = &slot;
    }
    g.slot = &slot;
    g.fibers = slot.fibers;
    g.block_idx = slot.block_idx;
}

// Interleaved: one turn of `slot`'s block. Resumes each runnable fiber once (forward order; fibers that
// have performed an atomic last), stopping after a fiber's first atomic, or after the first fiber once the
// block is one_by_one; when none is runnable, releases one shuffle or barrier (one_by_one from then on if
// the block has performed an atomic), or marks the block inactive once all its fibers have returned.
// Returns false on an error.
inline bool turn(Slot& slot) {
    switch_to(slot);
    const unsigned n = g.n_threads;
    bool ran = false;
    for (int deferred = 0; deferred < 2; ++deferred) {
        for (unsigned i = 0; i < n; ++i) {
            Fiber& f = slot.fibers[i];
            if (f.wait != Wait::running || f.atomic != (deferred == 1)) continue;
            const bool atomic_before = f.atomic;
            g.current = &f;
            switch_context(g.scheduler, f.context);
            if (!g.error.empty()) return false;
            ran = true;
            if (f.atomic && !atomic_before) {  // the turn ends at an atomic
                slot.after_atomic = true;
                return true;
            }
            if (slot.one_by_one) return true;
        }
    }
    if (ran) return true;
    bool all_done = true;
    for (unsigned i = 0; i < n && all_done; ++i) all_done = slot.fibers[i].wait == Wait::done;
    if (all_done) {
        slot.active = false;
        return true;
    }
    if (!complete_a_shuffle() && (!g.error.empty() || !release_barrier())) return false;
    slot.one_by_one = slot.after_atomic;
    return true;
}

inline std::vector<char> shared_copies;  // interleaved: each resident block's copy of the shared section
inline std::vector<Slot> slots;           // interleaved: the resident blocks

// Interleaved: all blocks of the launch, kMaxResidentThreads threads' worth at a time (see the opening
// comment). Returns false on an error.
inline bool run_interleaved(unsigned long long n_blocks) {
    const unsigned width =
        (unsigned)std::min<unsigned long long>(n_blocks, kMaxResidentThreads / g.n_threads);
    const size_t bytes = shared_bytes();
    if (shared_copies.size() < width * bytes) shared_copies.resize(width * bytes);
    slots.resize(width);
    for (unsigned s = 0; s < width; ++s)
        slots[s] = {false, false, false, {0, 0, 0}, fibers + (size_t)s * g.n_threads,
                    shared_copies.data() + s * bytes};
    g.shared_owner = nullptr;
    unsigned long long next = 0;
    unsigned resident = 0;
    for (unsigned long long round = 0; next < n_blocks || resident; ++round) {
        if (next < n_blocks && resident < width && (round % kStaggerTurns == 0 || !resident)) {
            Slot& slot = *std::find_if(slots.begin(), slots.end(), [](const Slot& s) { return !s.active; });
            if (!prepare_fibers((unsigned)(slot.fibers - fibers), g.n_threads)) return false;
            slot.active = true;
            slot.after_atomic = slot.one_by_one = false;
            slot.block_idx = block_index(next++);
            if (bytes) memset(slot.shared, 0xff, bytes);
            if (g.shared_owner == &slot) g.shared_owner = nullptr;  // the section holds an ended block's
            ++resident;
        }
        for (unsigned s = 0; s < width; ++s) {
            if (!slots[s].active) continue;
            if (!turn(slots[s])) return false;
            if (!slots[s].active) --resident;
        }
    }
    return true;
}

// Run body(closure) as kernel `kernel` on grid geometry[0..2] of blocks geometry[3..5] under `schedule`.
// Returns 0, or 1 with the reason in error.
inline int run(const char* kernel, const unsigned* geometry, void (*body)(void*), void* closure, int schedule,
               char* error, size_t error_size) {
    g.kernel = kernel;
    g.grid = dim3(geometry[0], geometry[1], geometry[2]);
    g.block = dim3(geometry[3], geometry[4], geometry[5]);
    g.block_idx = {0, 0, 0};
    g.n_threads = g.block.x * g.block.y * g.block.z;
    g.schedule = schedule;
    g.reverse = schedule == kReverse;
    g.fibers = fibers;
    g.slot = nullptr;
    g.shared_owner = nullptr;
    g.body = body;
    g.closure = closure;
    g.error.clear();
    const unsigned long long n_blocks = (unsigned long long)g.grid.x * g.grid.y * g.grid.z;
    if (!n_blocks || !g.n_threads || g.block.x > 1024 || g.block.y > 1024 || g.block.z > 64 ||
        (unsigned long long)g.block.x * g.block.y * g.block.z > kMaxThreads || g.grid.y > 65535 ||
        g.grid.z > 65535 || schedule < kForward || schedule > kInterleaved) {
        char text[192];
        snprintf(text, sizeof text,
                 "kernel %s: invalid configuration: grid (%u, %u, %u), block (%u, %u, %u), schedule %d",
                 kernel, g.grid.x, g.grid.y, g.grid.z, g.block.x, g.block.y, g.block.z, schedule);
        g.error = text;
    } else if (schedule == kInterleaved) {
        run_interleaved(n_blocks);
    } else if (prepare_fibers(0, g.n_threads)) {
        for (unsigned long long k = 0; k < n_blocks; ++k) {
            g.block_idx = block_index(g.reverse ? n_blocks - 1 - k : k);
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
int launch(const char* name, void (*kernel)(A...), const unsigned* geometry, void** args, int schedule,
           char* error, size_t error_size) {
    struct Closure {
        void (*kernel)(A...);
        void** args;
    } closure{kernel, args};
    auto body = [](void* c) {
        Closure* k = static_cast<Closure*>(c);
        call(k->kernel, k->args, std::index_sequence_for<A...>{});
    };
    return run(name, geometry, body, &closure, schedule, error, error_size);
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

namespace hostcuda {
// Interleaved: after an atomic, back to the scheduler (other blocks run before this thread goes on).
inline void after_atomic() {
    if (g.schedule != kInterleaved) return;
    Fiber* self = g.current;
    self->atomic = true;
    suspend(self);  // still running: resumed in a later turn of its block
}

template <class T>
inline T atomic_add(T* address, T value) {
    const T old = *address;
    *address = old + value;
    after_atomic();
    return old;
}
}  // namespace hostcuda

// One OS thread, and fibers switch only at barriers, shuffles and (interleaved) right after an atomic:
// every access is already ordered, so a fence is a compiler barrier and an atomic a plain read-modify-write.
inline void __threadfence() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

inline int atomicAdd(int* address, int value) { return ::hostcuda::atomic_add(address, value); }
inline unsigned int atomicAdd(unsigned int* address, unsigned int value) {
    return ::hostcuda::atomic_add(address, value);
}
inline unsigned long long atomicAdd(unsigned long long* address, unsigned long long value) {
    return ::hostcuda::atomic_add(address, value);
}
inline float atomicAdd(float* address, float value) { return ::hostcuda::atomic_add(address, value); }

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

// The SM cycle counter. On the host it counts CLOCK_MONOTONIC's nanoseconds (one "cycle" per ns), the clock
// %globaltimer counts too, so the calibration of one against the other finds 1 cycle per ns here.
inline long long clock64() { return (long long)::hostcuda::monotonic_ns(); }
