/* Device-side helpers the CUDA kernel files share: launch geometry, loads
 * and stores that compute half in float, math overloads per precision,
 * type conversions, and warp and block reductions. Included only by
 * the .cu files in executor/cuda. */
#ifndef ZF_GPU_MATH_CUH
#define ZF_GPU_MATH_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace zf_gpu
{

/* Threads per block, and a cap on blocks: kernels loop with a grid stride,
 * so larger tensors need no larger grid. */
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 32768;

inline unsigned blocks_for(int64_t n)
{
    int64_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 1 ? 1 : (b < kMaxBlocks ? b : kMaxBlocks));
}

/* An element of 16 bytes (complex128), for kernels that only move
 * elements. */
struct alignas(16) Bytes16 {
    uint64_t lo, hi;
};

/* The type arithmetic runs in: half computes in float, bool (All, Any)
 * in int. */
template <typename T> struct Acc {
    typedef T type;
};
template <> struct Acc<__half> {
    typedef float type;
};
template <> struct Acc<bool> {
    typedef int type;
};

__device__ __forceinline__ float load(__half x)
{
    return __half2float(x);
}
__device__ __forceinline__ float load(float x)
{
    return x;
}
__device__ __forceinline__ double load(double x)
{
    return x;
}
__device__ __forceinline__ int load(bool x)
{
    return x;
}

__device__ __forceinline__ void put(__half *p, float v)
{
    *p = __float2half(v);
}
__device__ __forceinline__ void put(float *p, float v)
{
    *p = v;
}
__device__ __forceinline__ void put(double *p, double v)
{
    *p = v;
}
__device__ __forceinline__ void put(bool *p, int v)
{
    *p = v != 0;
}

/* Math in the argument's precision; the float forms match what the CPU
 * kernels call (1/sqrt rather than the approximate rsqrtf). */
__device__ __forceinline__ float m_sqrt(float x)
{
    return sqrtf(x);
}
__device__ __forceinline__ double m_sqrt(double x)
{
    return sqrt(x);
}
__device__ __forceinline__ float m_exp(float x)
{
    return expf(x);
}
__device__ __forceinline__ double m_exp(double x)
{
    return exp(x);
}
__device__ __forceinline__ float m_log(float x)
{
    return logf(x);
}
__device__ __forceinline__ double m_log(double x)
{
    return log(x);
}
__device__ __forceinline__ float m_tanh(float x)
{
    return tanhf(x);
}
__device__ __forceinline__ double m_tanh(double x)
{
    return tanh(x);
}

__device__ __forceinline__ float m_expm1(float x)
{
    return expm1f(x);
}
__device__ __forceinline__ double m_expm1(double x)
{
    return expm1(x);
}
__device__ __forceinline__ float m_log1p(float x)
{
    return log1pf(x);
}
__device__ __forceinline__ double m_log1p(double x)
{
    return log1p(x);
}
__device__ __forceinline__ float m_erf(float x)
{
    return erff(x);
}
__device__ __forceinline__ double m_erf(double x)
{
    return erf(x);
}
__device__ __forceinline__ float m_erfc(float x)
{
    return erfcf(x);
}
__device__ __forceinline__ double m_erfc(double x)
{
    return erfc(x);
}
__device__ __forceinline__ float m_floor(float x)
{
    return floorf(x);
}
__device__ __forceinline__ double m_floor(double x)
{
    return floor(x);
}
__device__ __forceinline__ float m_ceil(float x)
{
    return ceilf(x);
}
__device__ __forceinline__ double m_ceil(double x)
{
    return ceil(x);
}
/* To the nearest integer, halves to even (the GPU always rounds so). */
__device__ __forceinline__ float m_rint(float x)
{
    return rintf(x);
}
__device__ __forceinline__ double m_rint(double x)
{
    return rint(x);
}
__device__ __forceinline__ float m_pow(float x, float y)
{
    return powf(x, y);
}
__device__ __forceinline__ double m_pow(double x, double y)
{
    return pow(x, y);
}

/* Conversions between the types Cast handles, as C conversions (bool is
 * x != 0); half goes through float, double to half rounds once. */
template <typename D, typename S> struct Cvt {
    __device__ static D run(S v) { return static_cast<D>(v); }
};
template <typename S> struct Cvt<bool, S> {
    __device__ static bool run(S v) { return v != static_cast<S>(0); }
};
template <typename D> struct Cvt<D, __half> {
    __device__ static D run(__half v) { return Cvt<D, float>::run(__half2float(v)); }
};
template <typename S> struct Cvt<__half, S> {
    __device__ static __half run(S v) { return __float2half(static_cast<float>(v)); }
};
template <> struct Cvt<__half, double> {
    __device__ static __half run(double v) { return __double2half(v); }
};
template <> struct Cvt<__half, __half> {
    __device__ static __half run(__half v) { return v; }
};
template <> struct Cvt<bool, __half> {
    __device__ static bool run(__half v) { return __half2float(v) != 0.0f; }
};

/* ---- reductions --------------------------------------------------------- */

template <typename A> struct SumOp {
    __device__ A operator()(A a, A b) const { return a + b; }
    __device__ A identity() const { return static_cast<A>(0); }
};

/* NaN wins, so a NaN anywhere in the input reaches the result. */
template <typename A> struct MaxOp {
    __device__ A operator()(A a, A b) const { return (a > b || a != a) ? a : b; }
    __device__ A identity() const { return -static_cast<A>(INFINITY); }
};

template <typename A> struct MinOp {
    __device__ A operator()(A a, A b) const { return (a < b || a != a) ? a : b; }
    __device__ A identity() const { return static_cast<A>(INFINITY); }
};

template <typename A> struct ProdOp {
    __device__ A operator()(A a, A b) const { return a * b; }
    __device__ A identity() const { return static_cast<A>(1); }
};

/* All and Any, on bools held as int. */
struct AndOp {
    __device__ int operator()(int a, int b) const { return a && b; }
    __device__ int identity() const { return 1; }
};
struct OrOp {
    __device__ int operator()(int a, int b) const { return a || b; }
    __device__ int identity() const { return 0; }
};

/* Every lane of the warp gets the reduction of the 32 lanes' values. */
template <typename A, typename Op> __device__ __forceinline__ A warp_allreduce(A v, Op op)
{
    for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* Every thread of the block gets the reduction of the block's values.
 * blockDim.x must be a multiple of 32 and every thread must call it; a
 * second call in the same kernel needs a __syncthreads() before it. */
template <typename A, typename Op> __device__ A block_allreduce(A v, Op op)
{
    __shared__ A part[32];
    v = warp_allreduce(v, op);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = lane < warps ? part[lane] : op.identity();
    return warp_allreduce(v, op);
}

} // namespace zf_gpu

#endif
