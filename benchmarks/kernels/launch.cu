// Kernels of the GPU launch suite (benchmarks/test_cuda_launch.py): what they do is as little as possible,
// so that what is measured is the cost of launching, synchronising and replaying them.
//
// extern "C" keeps the names unmangled: CuPy's RawModule.get_function looks them up by these exact names.
// Scalars arrive as the C types below; the Python side passes them as numpy scalars of the same width
// (CuPy would turn a plain Python int into a 64-bit long long). A pointer passed as None arrives as null.

// Does nothing: the pure cost of a launch.
extern "C" __global__ void empty_kernel() {}

// The launch-cost ladder: the same empty kernel with 1, 4, 8 and 13 parameters, pointers and 32-bit integers
// alternating, as the decode step's kernels mix them (its attention kernel takes 13). Launch cost grows with
// the argument count on the host (CuPy packs each argument in Python) and in the driver (it copies them).
extern "C" __global__ void empty_args_1(const void* a0) {}
extern "C" __global__ void empty_args_4(const void* a0, int a1, const void* a2, int a3) {}
extern "C" __global__ void empty_args_8(const void* a0, int a1, const void* a2, int a3, const void* a4, int a5,
                                        const void* a6, int a7) {}
extern "C" __global__ void empty_args_13(const void* a0, int a1, const void* a2, int a3, const void* a4, int a5,
                                         const void* a6, int a7, const void* a8, int a9, const void* a10,
                                         int a11, const void* a12) {}

// Nanoseconds from the GPU's global timer. PTX documents %globaltimer as a nanosecond timer meant for NVIDIA
// tools, without promising how often it is updated: on several GPUs it advances in steps of about 1 µs. It
// is the wall-clock ruler the SM cycle counter is calibrated against, over milliseconds, never the ruler of
// a microsecond spin itself.
__device__ __forceinline__ unsigned long long globaltimer_ns() {
    unsigned long long now_ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now_ns));
    return now_ns;
}

// A loop that waits for %globaltimer to advance gives up after this many SM cycles (about 5 s at 2 GHz): a
// timer that never advances then ends the kernel with what it saw, which the host refuses, naming it
// (benchmarks/spin_clock.py), instead of hanging the GPU.
#define TIMER_GIVE_UP_CYCLES 10000000000LL

// Spins for at least `cycles` SM clock cycles (clock64: one tick per cycle, resolution of one cycle), then
// returns: a kernel of known duration once the host has turned nanoseconds into cycles with the calibration
// below. Where `elapsed` is not null it receives what this launch achieved: elapsed[0] the cycles spun,
// elapsed[1] the %globaltimer nanoseconds around them (whole timer steps: exact only on average over many
// launches). Launch one thread: one warp spinning keeps the kernel, and the stream, busy.
extern "C" __global__ void spin_kernel(unsigned long long cycles, unsigned long long* elapsed) {
    const unsigned long long start_ns = globaltimer_ns();
    const long long start = clock64();
    long long now = start;
    while (static_cast<unsigned long long>(now - start) < cycles) {
        now = clock64();
    }
    const unsigned long long end_ns = globaltimer_ns();
    if (elapsed != nullptr) {
        elapsed[0] = static_cast<unsigned long long>(now - start);
        elapsed[1] = end_ns - start_ns;
    }
}

// The calibration of clock64 against %globaltimer: counts SM cycles over at least `min_ns` of timer time,
// both ends taken right after the timer advances (the loops poll it, so the first read of a new value is
// within a read of its step), so a coarse timer step does not enter the ratio. Writes out[0] = cycles,
// out[1] = nanoseconds. Launch one thread.
extern "C" __global__ void clock_calibration_kernel(unsigned long long min_ns, unsigned long long* out) {
    const long long begin = clock64();
    const unsigned long long first_ns = globaltimer_ns();
    unsigned long long start_ns = first_ns;
    while (start_ns == first_ns && clock64() - begin < TIMER_GIVE_UP_CYCLES) {
        start_ns = globaltimer_ns();
    }
    const long long start = clock64();
    unsigned long long end_ns = start_ns;
    while (end_ns - start_ns < min_ns && clock64() - start < TIMER_GIVE_UP_CYCLES) {
        end_ns = globaltimer_ns();
    }
    const long long end = clock64();
    out[0] = static_cast<unsigned long long>(end - start);
    out[1] = end_ns - start_ns;
}

// Writes to advances[0 .. n) the first n advances of %globaltimer seen by a thread polling it: the timer's
// step (its median is the tick the run records); those not seen before giving up are left as they were.
// Launch one thread.
extern "C" __global__ void timer_advances_kernel(unsigned long long* advances, int n) {
    const long long begin = clock64();
    unsigned long long last = globaltimer_ns();
    for (int seen = 0; seen < n && clock64() - begin < TIMER_GIVE_UP_CYCLES;) {
        const unsigned long long now = globaltimer_ns();
        if (now != last) {
            advances[seen++] = now - last;
            last = now;
        }
    }
}

// Adds 1 to *counter: a kernel with a visible effect, so every submission mode can prove how many of its
// kernels really ran. Launch one thread.
extern "C" __global__ void count_kernel(unsigned long long* counter) {
    atomicAdd(counter, 1ULL);
}

// Programmatic dependent launch (compute capability >= 9.0: CUDA C++ Programming Guide, "Programmatic Dependent
// Launch and Synchronization"; PTX ISA, "griddepcontrol", sm_90 and later). launch_dependents lets the next
// kernel of the stream, if launched with the programmatic stream serialization attribute, be scheduled once
// every block of this one has called it or exited; wait blocks until every grid this one depends on has
// completed and its memory is visible. They are what cudaTriggerProgrammaticLaunchCompletion() and
// cudaGridDependencySynchronize() compile to, written as PTX so that the module needs no CUDA header (NVRTC
// compiles it as it is). In a kernel launched without the attribute both do nothing; below sm_90 they are
// left out (the case skips there).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The kernel of the launch_pdl case (benchmarks/launch_ex.py launches it, with and without the attribute):
// lets its successor be scheduled at once, waits for its predecessor, then adds 1 to *counter with a plain
// read, add and write, no atomic: if the wait did not hold a successor back until its predecessor's write was
// visible, two increments would race and the count would come out short. With a null counter it does nothing
// after the wait: its GPU time per kernel is the gap alone. Launch one thread.
extern "C" __global__ void pdl_kernel(unsigned long long* counter) {
    pdl_launch_dependents();
    pdl_wait();
    if (counter != nullptr) {
        *counter += 1;
    }
}
