// Kernels of the GPU launch suite (benchmarks/test_cuda_launch.py): what they do is as little as possible,
// so that what is measured is the cost of launching, synchronising and replaying them.
//
// extern "C" keeps the names unmangled: CuPy's RawModule.get_function looks them up by these exact names.
// Scalars arrive as the C types below; the Python side passes them as numpy scalars of the same width
// (CuPy would turn a plain Python int into a 64-bit long long).

// Does nothing: the pure cost of a launch.
extern "C" __global__ void empty_kernel() {}

// Nanoseconds from the GPU's global timer. %globaltimer counts wall-clock ns independently of the SM clock,
// so a spin measured with it lasts the same time whatever clock the SMs run at (clock64 counts SM cycles).
__device__ __forceinline__ unsigned long long globaltimer_ns() {
    unsigned long long now_ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now_ns));
    return now_ns;
}

// Runs for at least duration_ns nanoseconds, then returns: a kernel of known duration.
// Launch one thread: one warp spinning is enough to keep the kernel (and the stream) busy.
extern "C" __global__ void spin_kernel(unsigned long long duration_ns) {
    const unsigned long long start_ns = globaltimer_ns();
    while (globaltimer_ns() - start_ns < duration_ns) {
    }
}

// Writes to *step_ns the smallest advance of %globaltimer seen over 64 advances: the resolution of the
// ruler spin_kernel uses (a spin can be off by up to one step). Launch one thread.
extern "C" __global__ void timer_step_kernel(unsigned long long* step_ns) {
    unsigned long long smallest = ~0ULL, last = globaltimer_ns();
    for (int advances = 0; advances < 64;) {
        const unsigned long long now = globaltimer_ns();
        if (now != last) {
            smallest = now - last < smallest ? now - last : smallest;
            last = now;
            ++advances;
        }
    }
    *step_ns = smallest;
}

// Adds 1 to *counter: a kernel with a visible effect, so every submission mode can prove how many of its
// kernels really ran. Launch one thread.
extern "C" __global__ void count_kernel(unsigned long long* counter) {
    atomicAdd(counter, 1ULL);
}
