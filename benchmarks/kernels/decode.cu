// Kernels of the GPU decode step (benchmarks/decode_cuda.py): one Llama-shaped forward pass for one token,
// batch 1, FP16 weights and KV cache, FP32 arithmetic. Every op of the seed's two kernel plans is one kernel
// here, so the plans' kernel counts are the launches the step really makes:
//   unfused, per layer: rmsnorm (embed_rmsnorm at layer 0), matvec (QKV), rope, kv_write, attention,
//     matvec (output projection), residual_add, rmsnorm, matvec (gate/up), silu_mul, matvec (down),
//     residual_add;
//   fused, per layer: add_rmsnorm (embed_rmsnorm at layer 0), matvec (QKV), rope_kv_write, attention,
//     matvec (output projection), add_rmsnorm, matvec_gateup_silu, matvec (down);
//   tail: rmsnorm (unfused) or add_rmsnorm (fused), matvec (output layer), argmax.
//
// The step is captured into a CUDA graph, so nothing here may allocate, synchronise with the host, or call a
// library (CuPy refuses cuBLAS during a capture): the matrix-vector products are written out below.
// Multi-block reductions (attention over the context, argmax over the vocabulary) finish inside the same
// kernel: the last block to arrive (atomic counter) combines the partials and resets the counter, so the
// next launch, or the next replay of the graph, starts from zero.
//
// FP16 values are handled as raw 16-bit words and converted with PTX cvt instructions, so the file needs no
// header: NVRTC (through CuPy's RawModule) and nvcc compile the same source with no include paths.
// Layouts: matrices are row-major (out, in), as PyTorch's nn.Linear stores them; vectors are contiguous.
// Scalars are int and float; the Python side passes numpy.int32 / numpy.float32.

typedef unsigned short half_t;
// Element offsets into multi-gigabyte arrays; spelled out so no header (for size_t) is needed.
typedef unsigned long long offset_t;

#define NEG_INF __int_as_float(0xff800000)  // -infinity without <cmath>

// ----------------------------------------------------------------------------------------------------------
// Conversions and loads
// ----------------------------------------------------------------------------------------------------------

__device__ __forceinline__ float half_to_float(half_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ half_t float_to_half(float f) {
    half_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Dot product of 8 FP16 weights and 8 FP16 activations, both packed in 16 bytes, accumulated in FP32.
__device__ __forceinline__ float dot8(uint4 w, uint4 x, float acc) {
    const unsigned int ws[4] = {w.x, w.y, w.z, w.w};
    const unsigned int xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        acc = fmaf(half_to_float((half_t)(ws[i] & 0xffffu)), half_to_float((half_t)(xs[i] & 0xffffu)), acc);
        acc = fmaf(half_to_float((half_t)(ws[i] >> 16)), half_to_float((half_t)(xs[i] >> 16)), acc);
    }
    return acc;
}

// A 16-byte weight load that streams past L1 (weights are read once per step; L1 keeps the activations).
__device__ __forceinline__ uint4 load_weights16(const uint4* p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// A 16-byte activation load through the read-only path (every warp of the block reads the same vector).
__device__ __forceinline__ uint4 load_activations16(const uint4* p) {
    uint4 v;
    asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// Loads that bypass L1 (L2 is coherent across blocks): the last block of a reduction reads other blocks'
// partials with these, after their __threadfence(). volatile keeps them after the fence; callers issue a
// batch of them before using any, so their latencies overlap.
__device__ __forceinline__ float load_cg(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ int load_cg_int(const int* p) {
    int v;
    asm volatile("ld.global.cg.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float silu_mul(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// ----------------------------------------------------------------------------------------------------------
// Matrix-vector products: y = W x, W [rows, cols] FP16, x [cols] FP16, FP32 accumulation.
// A warp owns MV_ROWS rows; each lane reads 16 bytes (8 weights) per load, MV_UNROLL loads per row issued
// back to back before any is used, so MV_ROWS × MV_UNROLL × 16 bytes per lane are in flight: enough
// outstanding requests per SM to keep HBM busy. cols must be a multiple of 8 (the Python side checks).
// ----------------------------------------------------------------------------------------------------------

#define MV_WARPS 4       // warps per block (128 threads)
#define MV_ROWS 2        // rows per warp
#define MV_UNROLL 8      // 16-byte loads per lane per row in flight
#define MV_MIN_BLOCKS 4  // resident blocks per SM promised to ptxas: it may then keep every load of a batch
                         // in registers at once (≈ 124 registers); without the promise it interleaves
                         // loads with arithmetic to save registers, and only ~4 loads per lane are in flight

// Dot products of rows row_a and row_b of w with x; the full sums end up in every lane. Full batches of
// MV_UNROLL chunks per lane are loaded without predicates (so every load is issued before the first use);
// a remainder loop takes the last chunks one at a time.
__device__ __forceinline__ void warp_two_rows(const half_t* __restrict__ w, const half_t* __restrict__ x,
                                              int cols, int row_a, int row_b, float* sum_a, float* sum_b) {
    const int lane = threadIdx.x & 31;
    const int chunks = cols >> 3;  // 16-byte chunks per row
    const uint4* wa = reinterpret_cast<const uint4*>(w + (offset_t)row_a * cols);
    const uint4* wb = reinterpret_cast<const uint4*>(w + (offset_t)row_b * cols);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    float acc_a = 0.0f, acc_b = 0.0f;
    int c = lane;
    for (; c + 32 * (MV_UNROLL - 1) < chunks; c += 32 * MV_UNROLL) {
        uint4 ra[MV_UNROLL], rb[MV_UNROLL], rx[MV_UNROLL];
#pragma unroll
        for (int u = 0; u < MV_UNROLL; ++u) {
            ra[u] = load_weights16(wa + c + u * 32);
            rb[u] = load_weights16(wb + c + u * 32);
            rx[u] = load_activations16(xv + c + u * 32);
        }
#pragma unroll
        for (int u = 0; u < MV_UNROLL; ++u) {
            acc_a = dot8(ra[u], rx[u], acc_a);
            acc_b = dot8(rb[u], rx[u], acc_b);
        }
    }
    for (; c < chunks; c += 32) {
        const uint4 xc = load_activations16(xv + c);
        acc_a = dot8(load_weights16(wa + c), xc, acc_a);
        acc_b = dot8(load_weights16(wb + c), xc, acc_b);
    }
    *sum_a = warp_sum(acc_a);
    *sum_b = warp_sum(acc_b);
}

// y[r] = sum_c w[r, c] x[c] for every row r, FP32 out. Grid: ceil(rows / (MV_WARPS * MV_ROWS)) blocks of
// MV_WARPS * 32 threads.
extern "C" __global__ void __launch_bounds__(MV_WARPS * 32, MV_MIN_BLOCKS)
    matvec(const half_t* __restrict__ w, const half_t* __restrict__ x, float* __restrict__ y, int rows,
           int cols) {
    const int warp = blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
    const int row_a = warp * MV_ROWS;
    if (row_a >= rows) return;
    const bool has_b = row_a + 1 < rows;  // an odd last row: its warp reads row_a twice, writes it once
    float sum_a, sum_b;
    warp_two_rows(w, x, cols, row_a, has_b ? row_a + 1 : row_a, &sum_a, &sum_b);
    if ((threadIdx.x & 31) == 0) {
        y[row_a] = sum_a;
        if (has_b) y[row_a + 1] = sum_b;
    }
}

// The fused gate/up projection: w = [gate rows; up rows] ([2·d_ff, cols]); a warp owns gate row i and up row
// i and writes act[i] = silu(gate_i · x) · (up_i · x) in FP16, so gate and up never reach memory.
// Grid: ceil(d_ff / MV_WARPS) blocks of MV_WARPS * 32 threads.
extern "C" __global__ void __launch_bounds__(MV_WARPS * 32, MV_MIN_BLOCKS)
    matvec_gateup_silu(const half_t* __restrict__ w, const half_t* __restrict__ x, half_t* __restrict__ act,
                       int d_ff, int cols) {
    const int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
    if (row >= d_ff) return;
    float gate, up;
    warp_two_rows(w, x, cols, row, row + d_ff, &gate, &up);
    if ((threadIdx.x & 31) == 0) act[row] = float_to_half(silu_mul(gate, up));
}

// ----------------------------------------------------------------------------------------------------------
// RMSNorm and the residual stream (h, FP32). One block of NORM_THREADS threads: a vector of d_model values
// is a few kilobytes, so one block reads it faster than several blocks could agree on its norm.
// ----------------------------------------------------------------------------------------------------------

#define NORM_THREADS 256

// Block-wide sum; every thread gets the result. scratch holds NORM_THREADS / 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < NORM_THREADS / 32; ++i) total += scratch[i];
    return total;
}

// y = h / sqrt(mean(h²) + eps) · weight, in FP16; h has already been written by this thread.
__device__ __forceinline__ void norm_out(const float* h, const half_t* __restrict__ weight,
                                         half_t* __restrict__ y, int d, float eps, float sum_sq) {
    const float inv_rms = rsqrtf(sum_sq / (float)d + eps);
#pragma unroll 8  // d / NORM_THREADS elements per thread: loads issued together
    for (int i = threadIdx.x; i < d; i += NORM_THREADS)
        y[i] = float_to_half(h[i] * inv_rms * half_to_float(weight[i]));
}

// Layer 0's first op (both plans): h = embedding[token] (the token's row, read in place: no gather kernel),
// y = RMSNorm(h). The token is read from device memory, so a captured graph stays valid for any token.
extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    embed_rmsnorm(const half_t* __restrict__ embedding, const int* __restrict__ token, float* __restrict__ h,
                  const half_t* __restrict__ weight, half_t* __restrict__ y, int d, float eps) {
    __shared__ float scratch[NORM_THREADS / 32];
    const half_t* row = embedding + (offset_t)token[0] * d;
    float sum_sq = 0.0f;
#pragma unroll 8  // d / NORM_THREADS elements per thread: loads issued together
    for (int i = threadIdx.x; i < d; i += NORM_THREADS) {
        const float v = half_to_float(row[i]);
        h[i] = v;
        sum_sq += v * v;
    }
    norm_out(h, weight, y, d, eps, block_sum(sum_sq, scratch));
}

// y = RMSNorm(h) (unfused plan).
extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    rmsnorm(const float* __restrict__ h, const half_t* __restrict__ weight, half_t* __restrict__ y, int d,
            float eps) {
    __shared__ float scratch[NORM_THREADS / 32];
    float sum_sq = 0.0f;
#pragma unroll 8  // d / NORM_THREADS elements per thread: loads issued together
    for (int i = threadIdx.x; i < d; i += NORM_THREADS) sum_sq += h[i] * h[i];
    norm_out(h, weight, y, d, eps, block_sum(sum_sq, scratch));
}

// h += o; y = RMSNorm(h) (fused plan: the residual add folded into the norm).
extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    add_rmsnorm(float* __restrict__ h, const float* __restrict__ o, const half_t* __restrict__ weight,
                half_t* __restrict__ y, int d, float eps) {
    __shared__ float scratch[NORM_THREADS / 32];
    float sum_sq = 0.0f;
#pragma unroll 8  // d / NORM_THREADS elements per thread: loads issued together
    for (int i = threadIdx.x; i < d; i += NORM_THREADS) {
        const float v = h[i] + o[i];
        h[i] = v;
        sum_sq += v * v;
    }
    norm_out(h, weight, y, d, eps, block_sum(sum_sq, scratch));
}

// h += o (unfused plan). Any grid covering n.
extern "C" __global__ void residual_add(float* __restrict__ h, const float* __restrict__ o, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) h[i] += o[i];
}

// act = silu(gate) · up in FP16, gate_up = [gate; up] ([2·d_ff], FP32) (unfused plan). Any grid covering
// d_ff.
extern "C" __global__ void silu_mul_kernel(const float* __restrict__ gate_up, half_t* __restrict__ act,
                                           int d_ff) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < d_ff) act[i] = float_to_half(silu_mul(gate_up[i], gate_up[d_ff + i]));
}

// ----------------------------------------------------------------------------------------------------------
// RoPE and the KV cache. qkv ([n_heads + 2·n_kv] heads of d_head, FP32) is the QKV projection's output;
// the cache of one layer is [n_kv, ctx, d_head] FP16 and the step writes position pos.
// RoPE rotates head halves: (x1, x2) -> (x1·cos − x2·sin, x2·cos + x1·sin), cos/sin: [d_head / 2] FP32.
// ----------------------------------------------------------------------------------------------------------

__device__ __forceinline__ void rotate_pair(float* head, int i, int half, float c, float s, float* x1_out,
                                            float* x2_out) {
    const float x1 = head[i], x2 = head[i + half];
    *x1_out = x1 * c - x2 * s;
    *x2_out = x2 * c + x1 * s;
}

// Rotate the q and k heads of qkv in place (unfused plan). One thread per (head, i < d_head / 2);
// any grid covering (n_heads + n_kv) · d_head / 2 threads.
extern "C" __global__ void rope(float* __restrict__ qkv, const float* __restrict__ cos_t,
                                const float* __restrict__ sin_t, int n_rot_heads, int d_head) {
    const int half = d_head >> 1;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rot_heads * half) return;
    const int head = t / half, i = t % half;
    float* x = qkv + (offset_t)head * d_head;
    float a, b;
    rotate_pair(x, i, half, cos_t[i], sin_t[i], &a, &b);
    x[i] = a;
    x[i + half] = b;
}

// Write the (already rotated) k heads and the v heads of qkv into the cache at pos, FP16 (unfused plan).
// One thread per (kv head, dim); any grid covering n_kv · d_head threads.
extern "C" __global__ void kv_write(const float* __restrict__ qkv, half_t* __restrict__ k_cache,
                                    half_t* __restrict__ v_cache, int n_heads, int n_kv, int d_head, int ctx,
                                    int pos) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_kv * d_head) return;
    const int kv_head = t / d_head, dim = t % d_head;
    const offset_t slot = ((offset_t)kv_head * ctx + pos) * d_head + dim;
    k_cache[slot] = float_to_half(qkv[(offset_t)(n_heads + kv_head) * d_head + dim]);
    v_cache[slot] = float_to_half(qkv[(offset_t)(n_heads + n_kv + kv_head) * d_head + dim]);
}

// Fused plan: rotate q in place, and write rotated k and plain v into the cache at pos. Threads
// [0, (n_heads + n_kv) · d_head / 2) rotate pairs, the next n_kv · d_head threads copy v.
extern "C" __global__ void rope_kv_write(float* __restrict__ qkv, const float* __restrict__ cos_t,
                                         const float* __restrict__ sin_t, half_t* __restrict__ k_cache,
                                         half_t* __restrict__ v_cache, int n_heads, int n_kv, int d_head,
                                         int ctx, int pos) {
    const int half = d_head >> 1;
    const int n_pairs = (n_heads + n_kv) * half;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n_pairs) {
        const int head = t / half, i = t % half;
        float* x = qkv + (offset_t)head * d_head;
        float a, b;
        rotate_pair(x, i, half, cos_t[i], sin_t[i], &a, &b);
        if (head < n_heads) {
            x[i] = a;
            x[i + half] = b;
        } else {
            half_t* slot = k_cache + ((offset_t)(head - n_heads) * ctx + pos) * d_head;
            slot[i] = float_to_half(a);
            slot[i + half] = float_to_half(b);
        }
    } else if (t < n_pairs + n_kv * d_head) {
        const int kv_head = (t - n_pairs) / d_head, dim = (t - n_pairs) % d_head;
        v_cache[((offset_t)kv_head * ctx + pos) * d_head + dim] =
            float_to_half(qkv[(offset_t)(n_heads + n_kv + kv_head) * d_head + dim]);
    }
}

// ----------------------------------------------------------------------------------------------------------
// Attention of one query per head over ctx cached keys (grouped-query: query head h reads KV head
// h / group). Grid (n_splits, n_kv): block (s, g) takes keys [s·ATT_KEYS, (s+1)·ATT_KEYS) of KV head g for
// all `group` query heads that read it (each key and value is loaded once for the group), and writes its
// partial softmax (max, sum of exponentials, weighted values) to scratch; the last block of KV head g to
// finish combines the n_splits partials (the split-K / flash-decoding scheme) and writes out [n_heads ·
// d_head] FP16. counters[g] must be 0 at launch; the combining block sets it back to 0.
// The block's keys and values are first staged in shared memory with 16-byte loads all issued before any
// is used, so the block waits for memory once, not once per key.
// ----------------------------------------------------------------------------------------------------------

#define ATT_THREADS 128
#define ATT_KEYS 64        // keys per block
#define ATT_MAX_GROUP 8    // query heads per KV head
#define ATT_MAX_DHEAD 128  // d_head must be a multiple of 8 and at most this
#define ATT_STAGE 8        // ATT_KEYS * ATT_MAX_DHEAD / 8 / ATT_THREADS: 16-byte loads per thread and tensor
#define ATT_COMBINE 16     // partials loaded together by the combining block

extern "C" __global__ void __launch_bounds__(ATT_THREADS)
    attention(const float* __restrict__ qkv, const half_t* __restrict__ k_cache,
              const half_t* __restrict__ v_cache, float* __restrict__ part_acc, float* __restrict__ part_max,
              float* __restrict__ part_sum, unsigned int* __restrict__ counters, half_t* __restrict__ out,
              int n_heads, int n_kv, int d_head, int ctx, float scale) {
    __shared__ uint4 k_s[ATT_KEYS * ATT_MAX_DHEAD / 8];
    __shared__ uint4 v_s[ATT_KEYS * ATT_MAX_DHEAD / 8];
    __shared__ float4 q_s[ATT_MAX_GROUP][ATT_MAX_DHEAD / 4];
    __shared__ float p_s[ATT_MAX_GROUP][ATT_KEYS];
    __shared__ bool is_last;
    const int split = blockIdx.x, n_splits = gridDim.x, kv_head = blockIdx.y;
    const int group = n_heads / n_kv;
    const int chunks = d_head >> 3;  // 16-byte chunks per key (or value) row
    const int key0 = split * ATT_KEYS;
    const int n_keys = ctx - key0 < ATT_KEYS ? ctx - key0 : ATT_KEYS;
    const int n_chunks = n_keys * chunks;
    const uint4* keys = reinterpret_cast<const uint4*>(k_cache + ((offset_t)kv_head * ctx + key0) * d_head);
    const uint4* values = reinterpret_cast<const uint4*>(v_cache + ((offset_t)kv_head * ctx + key0) * d_head);

    // Stage keys and values (contiguous rows key0 .. key0 + n_keys − 1 of this KV head).
    uint4 k_r[ATT_STAGE], v_r[ATT_STAGE];
#pragma unroll
    for (int u = 0; u < ATT_STAGE; ++u) {
        const int i = threadIdx.x + u * ATT_THREADS;
        if (i < n_chunks) {
            k_r[u] = keys[i];
            v_r[u] = values[i];
        }
    }
    // The group's queries, pre-scaled by 1/sqrt(d_head).
    float* q_flat = reinterpret_cast<float*>(q_s);
    for (int t = threadIdx.x; t < group * d_head; t += ATT_THREADS)
        q_flat[(t / d_head) * ATT_MAX_DHEAD + t % d_head] = qkv[(offset_t)kv_head * group * d_head + t] * scale;
#pragma unroll
    for (int u = 0; u < ATT_STAGE; ++u) {
        const int i = threadIdx.x + u * ATT_THREADS;
        if (i < n_chunks) {
            k_s[i] = k_r[u];
            v_s[i] = v_r[u];
        }
    }
    __syncthreads();

    // Scores: a thread per (query head, key). Thread j starts at chunk j mod chunks, so the 8 threads that
    // share a 16-byte shared-memory access phase read 8 different bank groups.
    for (int t = threadIdx.x; t < group * n_keys; t += ATT_THREADS) {
        const int g = t / n_keys, j = t % n_keys;
        float dot = 0.0f;
        for (int step = 0; step < chunks; ++step) {
            const int c = (step + j) % chunks;
            const uint4 k8 = k_s[j * chunks + c];
            const float4 qa = q_s[g][2 * c], qb = q_s[g][2 * c + 1];
            dot = fmaf(qa.x, half_to_float((half_t)(k8.x & 0xffffu)), dot);
            dot = fmaf(qa.y, half_to_float((half_t)(k8.x >> 16)), dot);
            dot = fmaf(qa.z, half_to_float((half_t)(k8.y & 0xffffu)), dot);
            dot = fmaf(qa.w, half_to_float((half_t)(k8.y >> 16)), dot);
            dot = fmaf(qb.x, half_to_float((half_t)(k8.z & 0xffffu)), dot);
            dot = fmaf(qb.y, half_to_float((half_t)(k8.z >> 16)), dot);
            dot = fmaf(qb.z, half_to_float((half_t)(k8.w & 0xffffu)), dot);
            dot = fmaf(qb.w, half_to_float((half_t)(k8.w >> 16)), dot);
        }
        p_s[g][j] = dot;
    }
    __syncthreads();

    // Softmax numerators of this block's keys: a warp per query head.
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int g = warp; g < group; g += ATT_THREADS / 32) {
        float m = NEG_INF;
        for (int j = lane; j < n_keys; j += 32) m = fmaxf(m, p_s[g][j]);
        m = warp_max(m);
        float l = 0.0f;
        for (int j = lane; j < n_keys; j += 32) {
            const float p = expf(p_s[g][j] - m);
            p_s[g][j] = p;
            l += p;
        }
        l = warp_sum(l);
        if (lane == 0) {
            const offset_t slot = ((offset_t)kv_head * n_splits + split) * group + g;
            part_max[slot] = m;
            part_sum[slot] = l;
        }
    }
    __syncthreads();

    // Weighted values: a thread per (query head, pair of dims), FP32, then this block's partial to scratch.
    const unsigned int* v_words = reinterpret_cast<const unsigned int*>(v_s);
    const int half_dh = d_head >> 1;
    for (int t = threadIdx.x; t < group * half_dh; t += ATT_THREADS) {
        const int g = t / half_dh, pair = t % half_dh;
        float acc0 = 0.0f, acc1 = 0.0f;
        for (int j = 0; j < n_keys; ++j) {
            const unsigned int v2 = v_words[j * half_dh + pair];
            const float p = p_s[g][j];
            acc0 = fmaf(p, half_to_float((half_t)(v2 & 0xffffu)), acc0);
            acc1 = fmaf(p, half_to_float((half_t)(v2 >> 16)), acc1);
        }
        float* dst = part_acc + (((offset_t)kv_head * n_splits + split) * group + g) * d_head + 2 * pair;
        dst[0] = acc0;
        dst[1] = acc1;
    }

    // The last block of this KV head combines the partials.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&counters[kv_head], 1u) == (unsigned int)(n_splits - 1);
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    for (int t = threadIdx.x; t < group * d_head; t += ATT_THREADS) {
        const int g = t / d_head, dim = t % d_head;
        const offset_t first = (offset_t)kv_head * n_splits * group + g;  // slot of split 0 for this head
        // Online combination, ATT_COMBINE partials per batch, their loads issued together.
        float m = NEG_INF, l = 0.0f, acc = 0.0f;
        for (int s0 = 0; s0 < n_splits; s0 += ATT_COMBINE) {
            float pm[ATT_COMBINE], ps[ATT_COMBINE], pa[ATT_COMBINE];
#pragma unroll
            for (int u = 0; u < ATT_COMBINE; ++u) {
                const bool in = s0 + u < n_splits;
                const offset_t slot = first + (offset_t)(s0 + u) * group;
                pm[u] = in ? load_cg(part_max + slot) : NEG_INF;
                ps[u] = in ? load_cg(part_sum + slot) : 0.0f;
                pa[u] = in ? load_cg(part_acc + slot * d_head + dim) : 0.0f;
            }
            float m_new = m;
#pragma unroll
            for (int u = 0; u < ATT_COMBINE; ++u) m_new = fmaxf(m_new, pm[u]);
            const float rescale = expf(m - m_new);  // 0 on the first batch (m = −inf)
            l *= rescale;
            acc *= rescale;
#pragma unroll
            for (int u = 0; u < ATT_COMBINE; ++u) {
                const float weight = expf(pm[u] - m_new);
                l = fmaf(ps[u], weight, l);
                acc = fmaf(pa[u], weight, acc);
            }
            m = m_new;
        }
        out[(offset_t)(kv_head * group + g) * d_head + dim] = float_to_half(acc / l);
    }
    if (threadIdx.x == 0) counters[kv_head] = 0u;
}

// ----------------------------------------------------------------------------------------------------------
// Sampling: greedy (argmax of the logits, lowest index on ties). Blocks reduce slices, the last block
// reduces the partials and writes token[0]. counter[0] must be 0 at launch; the last block resets it.
// ----------------------------------------------------------------------------------------------------------

#define ARGMAX_THREADS 256

__device__ __forceinline__ void better(float* best, int* best_index, float v, int index) {
    if (v > *best || (v == *best && index < *best_index)) {
        *best = v;
        *best_index = index;
    }
}

// (best, best_index) over the block; valid in thread 0. scratch holds ARGMAX_THREADS / 32 pairs.
__device__ __forceinline__ void block_argmax(float* best, int* best_index, float* scratch_v, int* scratch_i) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, *best, offset);
        const int index = __shfl_xor_sync(0xffffffffu, *best_index, offset);
        better(best, best_index, v, index);
    }
    if (lane == 0) {
        scratch_v[warp] = *best;
        scratch_i[warp] = *best_index;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < ARGMAX_THREADS / 32; ++w) better(best, best_index, scratch_v[w], scratch_i[w]);
    }
}

extern "C" __global__ void __launch_bounds__(ARGMAX_THREADS)
    argmax(const float* __restrict__ logits, int n, float* __restrict__ part_value,
           int* __restrict__ part_index, unsigned int* __restrict__ counter, int* __restrict__ token) {
    __shared__ float scratch_v[ARGMAX_THREADS / 32];
    __shared__ int scratch_i[ARGMAX_THREADS / 32];
    __shared__ bool is_last;
    float best = NEG_INF;
    int best_index = 0x7fffffff;
#pragma unroll 4  // independent loads, issued together
    for (int i = blockIdx.x * ARGMAX_THREADS + threadIdx.x; i < n; i += gridDim.x * ARGMAX_THREADS)
        better(&best, &best_index, logits[i], i);
    block_argmax(&best, &best_index, scratch_v, scratch_i);
    if (threadIdx.x == 0) {
        part_value[blockIdx.x] = best;
        part_index[blockIdx.x] = best_index;
        __threadfence();
        is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    best = NEG_INF;
    best_index = 0x7fffffff;
    for (int b = threadIdx.x; b < gridDim.x; b += ARGMAX_THREADS)
        better(&best, &best_index, load_cg(part_value + b), load_cg_int(part_index + b));
    __syncthreads();  // scratch is reused
    block_argmax(&best, &best_index, scratch_v, scratch_i);
    if (threadIdx.x == 0) {
        token[0] = best_index;
        counter[0] = 0u;
    }
}
