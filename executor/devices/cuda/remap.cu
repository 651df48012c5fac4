/* The CUDA kernels that move elements: through an index map (Slice,
 * StridedSlice, Tile, Pad, PadV2, MirrorPad, ReverseV2, BroadcastTo,
 * Transpose, GatherV2), and a convolution's windows into a patch matrix
 * (Conv2D's im2col); one thread per output element, by element size. C
 * entry points declared in gpu_launch.h. */
#include "executor/devices/cuda/gpu_launch.h"
#include "executor/devices/cuda/gpu_math.cuh"

namespace zf_gpu
{
namespace
{

/* I is 32-bit when the output is small enough: cheaper divisions. */
template <typename T, typename I>
__global__ void k_remap(const T *__restrict__ src, T *__restrict__ out, I n,
                        zf__gpu_remap_plan_t p, const int64_t *__restrict__ idx,
                        const T *__restrict__ fill)
{
    I stride = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        I rest = i;
        int64_t off = 0;
        bool filled = false;
        for (int k = p.rank - 1; k >= 0; k--) {
            I d = (I)p.dims[k];
            I c = rest % d;
            rest /= d;
            int64_t m = idx ? idx[p.offs[k] + (int64_t)c] : (int64_t)c;
            if (m < 0)
                filled = true;
            else
                off += m * p.strides[k];
        }
        out[i] = filled ? (fill ? *fill : T()) : src[off];
    }
}

template <typename T>
cudaError_t remap(cudaStream_t s, const zf__gpu_remap_plan_t *p, const int64_t *idx,
                  const void *src, void *out, int64_t n, const void *fill)
{
    if (n <= INT32_MAX)
        k_remap<T, uint32_t><<<blocks_for(n), kThreads, 0, s>>>(
            (const T *)src, (T *)out, (uint32_t)n, *p, idx, (const T *)fill);
    else
        k_remap<T, int64_t><<<blocks_for(n), kThreads, 0, s>>>((const T *)src, (T *)out, n, *p,
                                                               idx, (const T *)fill);
    return cudaGetLastError();
}

template <typename T>
__global__ void k_im2col(const T *__restrict__ in, zf__gpu_conv_t g, int64_t row0, int64_t n,
                         T *__restrict__ patches)
{
    int64_t k = g.kh * g.kw * g.c, pixels = g.oh * g.ow;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int64_t row = row0 + i / k, q = i % k;
        int64_t ci = q % g.c, kx = (q / g.c) % g.kw, ky = q / (g.c * g.kw);
        int64_t b = row / pixels, p = row % pixels;
        int64_t iy = (p / g.ow) * g.sh - g.pt + ky * g.dh;
        int64_t ix = (p % g.ow) * g.sw - g.pl + kx * g.dw;
        bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
        patches[i] = inside ? in[((b * g.h + iy) * g.w + ix) * g.c + ci] : T();
    }
}

template <typename T>
cudaError_t im2col(cudaStream_t s, const zf__gpu_conv_t *g, const void *in, int64_t row0,
                   int64_t rows, void *patches)
{
    int64_t n = rows * g->kh * g->kw * g->c;
    if (n <= 0) return cudaSuccess;
    k_im2col<T><<<blocks_for(n), kThreads, 0, s>>>((const T *)in, *g, row0, n, (T *)patches);
    return cudaGetLastError();
}

} // namespace
} // namespace zf_gpu

using namespace zf_gpu;

extern "C" cudaError_t zf__gpu_launch_remap(cudaStream_t stream, size_t elem,
                                            const zf__gpu_remap_plan_t *plan, const int64_t *idx,
                                            const void *src, void *out, int64_t n,
                                            const void *fill)
{
    if (n <= 0) return cudaSuccess;
    if (plan->rank < 1 || plan->rank > ZF__GPU_MAX_RANK) return cudaErrorInvalidValue;
    switch (elem) {
    case 1: return remap<uint8_t>(stream, plan, idx, src, out, n, fill);
    case 2: return remap<uint16_t>(stream, plan, idx, src, out, n, fill);
    case 4: return remap<uint32_t>(stream, plan, idx, src, out, n, fill);
    case 8: return remap<uint64_t>(stream, plan, idx, src, out, n, fill);
    case 16: return remap<Bytes16>(stream, plan, idx, src, out, n, fill);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t zf__gpu_launch_im2col(cudaStream_t stream, size_t elem,
                                             const zf__gpu_conv_t *g, const void *in, int64_t row0,
                                             int64_t rows, void *patches)
{
    if (g->c <= 0 || g->kw <= 0 || g->oh <= 0 || g->ow <= 0) return cudaSuccess;
    switch (elem) {
    case 4: return im2col<uint32_t>(stream, g, in, row0, rows, patches);
    case 8: return im2col<uint64_t>(stream, g, in, row0, rows, patches);
    default: return cudaErrorInvalidValue;
    }
}
