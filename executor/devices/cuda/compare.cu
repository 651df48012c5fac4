/* CUDA kernels for comparisons and logic (bool results, NumPy
 * broadcasting) and for Select/SelectV2 (three-way broadcasting, by
 * element size). Half compares in float. C entry points in gpu_compare.h. */
#include <cuda_fp16.h>

#include "executor/devices/cuda/gpu_compare.h"
#include "executor/devices/cuda/gpu_math.cuh"

namespace zf_gpu
{
namespace
{

/* The value a comparison sees: half as float, the rest as they are. */
template <typename T> __device__ __forceinline__ T cmp_value(T x)
{
    return x;
}
__device__ __forceinline__ float cmp_value(__half x)
{
    return __half2float(x);
}

struct OpLess {
    template <typename A> __device__ bool operator()(A x, A y) const { return x < y; }
};
struct OpLessEqual {
    template <typename A> __device__ bool operator()(A x, A y) const { return x <= y; }
};
struct OpGreater {
    template <typename A> __device__ bool operator()(A x, A y) const { return x > y; }
};
struct OpGreaterEqual {
    template <typename A> __device__ bool operator()(A x, A y) const { return x >= y; }
};
struct OpEqual {
    template <typename A> __device__ bool operator()(A x, A y) const { return x == y; }
};
struct OpNotEqual {
    template <typename A> __device__ bool operator()(A x, A y) const { return x != y; }
};
struct OpAnd {
    template <typename A> __device__ bool operator()(A x, A y) const { return x && y; }
};
struct OpOr {
    template <typename A> __device__ bool operator()(A x, A y) const { return x || y; }
};

/* Each element's input offsets from its index, dim by dim (I is 32-bit
 * when the output is small enough: cheaper divisions). */
template <typename T, typename F, typename I>
__global__ void k_compare(const T *__restrict__ a, const T *__restrict__ b, bool *__restrict__ out,
                          I n, zf__gpu_bcast_t bc, F f)
{
    I stride = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        I rest = i, oa = 0, ob = 0;
        for (int k = bc.rank - 1; k >= 0; k--) {
            I d = (I)bc.dims[k];
            I idx = rest % d;
            rest /= d;
            oa += idx * (I)bc.sa[k];
            ob += idx * (I)bc.sb[k];
        }
        out[i] = f(cmp_value(a[oa]), cmp_value(b[ob]));
    }
}

template <typename T, typename F>
cudaError_t compare(cudaStream_t s, const void *a, const void *b, void *out, int64_t n,
                    const zf__gpu_bcast_t *bc, F f)
{
    if (n <= 0) return cudaSuccess;
    if (n <= INT32_MAX)
        k_compare<T, F, uint32_t><<<blocks_for(n), kThreads, 0, s>>>(
            (const T *)a, (const T *)b, (bool *)out, (uint32_t)n, *bc, f);
    else
        k_compare<T, F, int64_t>
            <<<blocks_for(n), kThreads, 0, s>>>((const T *)a, (const T *)b, (bool *)out, n, *bc, f);
    return cudaGetLastError();
}

template <typename F>
cudaError_t compare_typed(cudaStream_t s, zf_dtype_t dtype, bool with_bool, const void *a,
                          const void *b, void *out, int64_t n, const zf__gpu_bcast_t *bc, F f)
{
    switch (dtype) {
    case ZF_HALF: return compare<__half>(s, a, b, out, n, bc, f);
    case ZF_FLOAT: return compare<float>(s, a, b, out, n, bc, f);
    case ZF_DOUBLE: return compare<double>(s, a, b, out, n, bc, f);
    case ZF_INT8: return compare<int8_t>(s, a, b, out, n, bc, f);
    case ZF_INT16: return compare<int16_t>(s, a, b, out, n, bc, f);
    case ZF_INT64: return compare<int64_t>(s, a, b, out, n, bc, f);
    case ZF_UINT8: return compare<uint8_t>(s, a, b, out, n, bc, f);
    case ZF_BOOL:
        if (with_bool) return compare<bool>(s, a, b, out, n, bc, f);
        return cudaErrorInvalidValue;
    default: return cudaErrorInvalidValue;
    }
}

__global__ void k_logical_not(const bool *__restrict__ in, bool *__restrict__ out, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = !in[i];
}

template <typename T, typename I>
__global__ void k_select(const bool *__restrict__ c, const T *__restrict__ t,
                         const T *__restrict__ e, T *__restrict__ out, I n, zf__gpu_bcast3_t bc)
{
    I stride = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        I rest = i, oc = 0, ot = 0, oe = 0;
        for (int k = bc.rank - 1; k >= 0; k--) {
            I d = (I)bc.dims[k];
            I idx = rest % d;
            rest /= d;
            oc += idx * (I)bc.st[0][k];
            ot += idx * (I)bc.st[1][k];
            oe += idx * (I)bc.st[2][k];
        }
        out[i] = c[oc] ? t[ot] : e[oe];
    }
}

template <typename T>
cudaError_t select_bytes(cudaStream_t s, const void *c, const void *t, const void *e, void *out,
                         int64_t n, const zf__gpu_bcast3_t *bc)
{
    if (n <= 0) return cudaSuccess;
    if (n <= INT32_MAX)
        k_select<T, uint32_t><<<blocks_for(n), kThreads, 0, s>>>(
            (const bool *)c, (const T *)t, (const T *)e, (T *)out, (uint32_t)n, *bc);
    else
        k_select<T, int64_t><<<blocks_for(n), kThreads, 0, s>>>((const bool *)c, (const T *)t,
                                                                (const T *)e, (T *)out, n, *bc);
    return cudaGetLastError();
}

} // namespace
} // namespace zf_gpu

using namespace zf_gpu;

extern "C" cudaError_t zf__gpu_launch_compare(cudaStream_t stream, zf__gpu_compare_t op,
                                              zf_dtype_t dtype, const void *a, const void *b,
                                              void *out, int64_t n, const zf__gpu_bcast_t *bc)
{
    switch (op) {
    case ZF__GPU_LESS: return compare_typed(stream, dtype, false, a, b, out, n, bc, OpLess());
    case ZF__GPU_LESS_EQUAL:
        return compare_typed(stream, dtype, false, a, b, out, n, bc, OpLessEqual());
    case ZF__GPU_GREATER: return compare_typed(stream, dtype, false, a, b, out, n, bc, OpGreater());
    case ZF__GPU_GREATER_EQUAL:
        return compare_typed(stream, dtype, false, a, b, out, n, bc, OpGreaterEqual());
    case ZF__GPU_EQUAL: return compare_typed(stream, dtype, true, a, b, out, n, bc, OpEqual());
    case ZF__GPU_NOT_EQUAL:
        return compare_typed(stream, dtype, true, a, b, out, n, bc, OpNotEqual());
    case ZF__GPU_LOGICAL_AND:
        if (dtype != ZF_BOOL) return cudaErrorInvalidValue;
        return compare<bool>(stream, a, b, out, n, bc, OpAnd());
    case ZF__GPU_LOGICAL_OR:
        if (dtype != ZF_BOOL) return cudaErrorInvalidValue;
        return compare<bool>(stream, a, b, out, n, bc, OpOr());
    }
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t zf__gpu_launch_logical_not(cudaStream_t stream, const void *in, void *out,
                                                  int64_t n)
{
    if (n <= 0) return cudaSuccess;
    k_logical_not<<<blocks_for(n), kThreads, 0, stream>>>((const bool *)in, (bool *)out, n);
    return cudaGetLastError();
}

extern "C" cudaError_t zf__gpu_launch_select(cudaStream_t stream, size_t elem, const void *cond,
                                             const void *t, const void *e, void *out, int64_t n,
                                             const zf__gpu_bcast3_t *bc)
{
    switch (elem) {
    case 1: return select_bytes<uint8_t>(stream, cond, t, e, out, n, bc);
    case 2: return select_bytes<uint16_t>(stream, cond, t, e, out, n, bc);
    case 4: return select_bytes<uint32_t>(stream, cond, t, e, out, n, bc);
    case 8: return select_bytes<uint64_t>(stream, cond, t, e, out, n, bc);
    case 16: return select_bytes<Bytes16>(stream, cond, t, e, out, n, bc);
    default: return cudaErrorInvalidValue;
    }
}
