/* CUDA element-wise kernels: unary math and activations, the predicates
 * IsNan, IsInf and IsFinite, binary math
 * with NumPy broadcasting, the activation gradients (two inputs of one
 * shape, as binary ops), AddN, BiasAdd, Cast and Fill, for half, float and
 * double (half computes in float). The formulas are the CPU kernels'
 * (kernels_cwise.c, kernels_nn.c, kernels_activation.c). C entry points
 * declared in gpu_launch.h. */
#include "executor/devices/cuda/gpu_launch.h"
#include "executor/devices/cuda/gpu_math.cuh"

namespace zf_gpu
{
namespace
{

/* ---- unary ---------------------------------------------------------------- */

struct OpNeg {
    template <typename A> __device__ A operator()(A x) const { return -x; }
};
struct OpAbs {
    template <typename A> __device__ A operator()(A x) const
    {
        return x < static_cast<A>(0) ? -x : x;
    }
};
struct OpSquare {
    template <typename A> __device__ A operator()(A x) const { return x * x; }
};
struct OpSqrt {
    template <typename A> __device__ A operator()(A x) const { return m_sqrt(x); }
};
struct OpRsqrt {
    template <typename A> __device__ A operator()(A x) const
    {
        return static_cast<A>(1) / m_sqrt(x);
    }
};
struct OpExp {
    template <typename A> __device__ A operator()(A x) const { return m_exp(x); }
};
struct OpLog {
    template <typename A> __device__ A operator()(A x) const { return m_log(x); }
};
struct OpReciprocal {
    template <typename A> __device__ A operator()(A x) const { return static_cast<A>(1) / x; }
};
/* Comparisons written so that NaN passes through, as on the CPU. */
struct OpRelu {
    template <typename A> __device__ A operator()(A x) const
    {
        return x < static_cast<A>(0) ? static_cast<A>(0) : x;
    }
};
struct OpRelu6 {
    template <typename A> __device__ A operator()(A x) const
    {
        return x < static_cast<A>(0) ? static_cast<A>(0)
                                     : (x > static_cast<A>(6) ? static_cast<A>(6) : x);
    }
};
struct OpSigmoid {
    template <typename A> __device__ A operator()(A x) const
    {
        return static_cast<A>(1) / (static_cast<A>(1) + m_exp(-x));
    }
};
struct OpTanh {
    template <typename A> __device__ A operator()(A x) const { return m_tanh(x); }
};
struct OpElu {
    template <typename A> __device__ A operator()(A x) const
    {
        return x > static_cast<A>(0) ? x : m_expm1(x);
    }
};
/* Selu's scale, and scale * alpha. */
constexpr double kSeluScale = 1.0507009873554804934193349852946;
constexpr double kSeluScaleAlpha = 1.7580993408473768599402175208123;
struct OpSelu {
    template <typename A> __device__ A operator()(A x) const
    {
        return x < static_cast<A>(0) ? static_cast<A>(kSeluScaleAlpha) * m_expm1(x)
                                     : static_cast<A>(kSeluScale) * x;
    }
};
/* log(eps) + 2 of the type Softplus computes in: beyond it either way
 * log1p(exp(x)) rounds to x or to exp(x). */
template <typename A> struct SoftplusThreshold;
template <> struct SoftplusThreshold<float> {
    __device__ static float get() { return (float)(2.0 - 23.0 * 0.69314718055994530942); }
};
template <> struct SoftplusThreshold<double> {
    __device__ static double get() { return 2.0 - 52.0 * 0.69314718055994530942; }
};
struct OpSoftplus {
    template <typename A> __device__ A operator()(A x) const
    {
        A th = SoftplusThreshold<A>::get();
        return x > -th ? x : x < th ? m_exp(x) : m_log1p(m_exp(x));
    }
};
struct OpSoftsign {
    template <typename A> __device__ A operator()(A x) const
    {
        return x / (static_cast<A>(1) + (x < static_cast<A>(0) ? -x : x));
    }
};
struct OpLeakyRelu {
    double alpha;
    template <typename A> __device__ A operator()(A x) const
    {
        return x > static_cast<A>(0) ? x : x * static_cast<A>(alpha);
    }
};
struct OpErf {
    template <typename A> __device__ A operator()(A x) const { return m_erf(x); }
};
struct OpErfc {
    template <typename A> __device__ A operator()(A x) const { return m_erfc(x); }
};
struct OpFloor {
    template <typename A> __device__ A operator()(A x) const { return m_floor(x); }
};
struct OpCeil {
    template <typename A> __device__ A operator()(A x) const { return m_ceil(x); }
};
struct OpRound {
    template <typename A> __device__ A operator()(A x) const { return m_rint(x); }
};
/* NaN and signed zeros pass through. */
struct OpSign {
    template <typename A> __device__ A operator()(A x) const
    {
        return x > static_cast<A>(0)   ? static_cast<A>(1)
               : x < static_cast<A>(0) ? static_cast<A>(-1)
                                       : x;
    }
};

/* The output type of a map of T: T itself, or bool for the predicates. */
template <typename T> struct SameOut {
    typedef T type;
};
template <typename T> struct BoolOut {
    typedef bool type;
};

template <typename T, typename O, typename F>
__global__ void k_unary(const T *__restrict__ in, O *__restrict__ out, int64_t n, F f)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        put(out + i, f(load(in[i])));
}

template <typename T, typename O, typename F>
cudaError_t unary(cudaStream_t s, const void *in, void *out, int64_t n, F f)
{
    k_unary<T, O, F><<<blocks_for(n), kThreads, 0, s>>>((const T *)in, (O *)out, n, f);
    return cudaGetLastError();
}

template <template <typename> class Out = SameOut, typename F>
cudaError_t unary_typed(cudaStream_t s, zf_dtype_t dtype, const void *in, void *out, int64_t n, F f)
{
    switch (dtype) {
    case ZF_HALF: return unary<__half, typename Out<__half>::type>(s, in, out, n, f);
    case ZF_FLOAT: return unary<float, typename Out<float>::type>(s, in, out, n, f);
    case ZF_DOUBLE: return unary<double, typename Out<double>::type>(s, in, out, n, f);
    default: return cudaErrorInvalidValue;
    }
}

/* ---- predicates ------------------------------------------------------------ */

struct OpIsNan {
    template <typename A> __device__ bool operator()(A x) const { return isnan(x); }
};
struct OpIsInf {
    template <typename A> __device__ bool operator()(A x) const { return isinf(x); }
};
struct OpIsFinite {
    template <typename A> __device__ bool operator()(A x) const { return isfinite(x); }
};

/* ---- binary --------------------------------------------------------------- */

struct OpAdd {
    template <typename A> __device__ A operator()(A x, A y) const { return x + y; }
};
struct OpSub {
    template <typename A> __device__ A operator()(A x, A y) const { return x - y; }
};
struct OpMul {
    template <typename A> __device__ A operator()(A x, A y) const { return x * y; }
};
struct OpDiv {
    template <typename A> __device__ A operator()(A x, A y) const { return x / y; }
};
struct OpMaximum {
    template <typename A> __device__ A operator()(A x, A y) const { return x > y ? x : y; }
};
struct OpMinimum {
    template <typename A> __device__ A operator()(A x, A y) const { return x < y ? x : y; }
};
struct OpSquaredDifference {
    template <typename A> __device__ A operator()(A x, A y) const { return (x - y) * (x - y); }
};
struct OpPow {
    template <typename A> __device__ A operator()(A x, A y) const { return m_pow(x, y); }
};

/* Gradients from (gradients g, features x). */
struct OpReluGrad {
    template <typename A> __device__ A operator()(A g, A x) const
    {
        return x > static_cast<A>(0) ? g : static_cast<A>(0);
    }
};
struct OpRelu6Grad {
    template <typename A> __device__ A operator()(A g, A x) const
    {
        return x > static_cast<A>(0) && x < static_cast<A>(6) ? g : static_cast<A>(0);
    }
};
struct OpLeakyReluGrad {
    double alpha;
    template <typename A> __device__ A operator()(A g, A x) const
    {
        return x > static_cast<A>(0) ? g : g * static_cast<A>(alpha);
    }
};
struct OpSoftplusGrad {
    template <typename A> __device__ A operator()(A g, A x) const
    {
        return g / (static_cast<A>(1) + m_exp(-x));
    }
};
struct OpSoftsignGrad {
    template <typename A> __device__ A operator()(A g, A x) const
    {
        A d = static_cast<A>(1) + (x < static_cast<A>(0) ? -x : x);
        return g / (d * d);
    }
};
/* From (gradients g, forward outputs y). */
struct OpEluGrad {
    template <typename A> __device__ A operator()(A g, A y) const
    {
        return y < static_cast<A>(0) ? g * (y + static_cast<A>(1)) : g;
    }
};
struct OpSeluGrad {
    template <typename A> __device__ A operator()(A g, A y) const
    {
        return y < static_cast<A>(0) ? g * (y + static_cast<A>(kSeluScaleAlpha))
                                     : g * static_cast<A>(kSeluScale);
    }
};
/* From (forward output y, gradient dy). */
struct OpSigmoidGrad {
    template <typename A> __device__ A operator()(A y, A dy) const
    {
        return dy * y * (static_cast<A>(1) - y);
    }
};
struct OpTanhGrad {
    template <typename A> __device__ A operator()(A y, A dy) const
    {
        return dy * (static_cast<A>(1) - y * y);
    }
};
struct OpSqrtGrad {
    template <typename A> __device__ A operator()(A y, A dy) const
    {
        return dy * static_cast<A>(0.5) / y;
    }
};
struct OpRsqrtGrad {
    template <typename A> __device__ A operator()(A y, A dy) const
    {
        return dy * static_cast<A>(-0.5) * y * y * y;
    }
};
struct OpReciprocalGrad {
    template <typename A> __device__ A operator()(A y, A dy) const { return -dy * y * y; }
};

/* Rank 0 or 1: strides 0 (broadcast) or 1. */
template <typename T, typename F>
__global__ void k_binary_flat(const T *__restrict__ a, int64_t sa, const T *__restrict__ b,
                              int64_t sb, T *__restrict__ out, int64_t n, F f)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        put(out + i, f(load(a[i * sa]), load(b[i * sb])));
}

/* Any rank: each element's input offsets from its index, dim by dim. I is
 * 32-bit when the output is small enough, which makes the divisions much
 * cheaper. */
template <typename T, typename F, typename I>
__global__ void k_binary_bcast(const T *__restrict__ a, const T *__restrict__ b,
                               T *__restrict__ out, I n, zf__gpu_bcast_t bc, F f)
{
    I stride = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        I rest = i, oa = 0, ob = 0;
        for (int k = bc.rank - 1; k > 0; k--) {
            I d = (I)bc.dims[k];
            I idx = rest % d;
            rest /= d;
            oa += idx * (I)bc.sa[k];
            ob += idx * (I)bc.sb[k];
        }
        oa += rest * (I)bc.sa[0];
        ob += rest * (I)bc.sb[0];
        put(out + i, f(load(a[oa]), load(b[ob])));
    }
}

template <typename T, typename F>
cudaError_t binary(cudaStream_t s, const void *va, const void *vb, void *vout, int64_t n,
                   const zf__gpu_bcast_t *bc, F f)
{
    const T *a = (const T *)va, *b = (const T *)vb;
    T *out = (T *)vout;
    unsigned blocks = blocks_for(n);
    if (bc->rank <= 1) {
        int64_t sa = bc->rank ? bc->sa[0] : 0, sb = bc->rank ? bc->sb[0] : 0;
        k_binary_flat<T, F><<<blocks, kThreads, 0, s>>>(a, sa, b, sb, out, n, f);
    } else if (n <= INT32_MAX) {
        k_binary_bcast<T, F, uint32_t><<<blocks, kThreads, 0, s>>>(a, b, out, (uint32_t)n, *bc, f);
    } else {
        k_binary_bcast<T, F, int64_t><<<blocks, kThreads, 0, s>>>(a, b, out, n, *bc, f);
    }
    return cudaGetLastError();
}

template <typename F>
cudaError_t binary_typed(cudaStream_t s, zf_dtype_t dtype, const void *a, const void *b, void *out,
                         int64_t n, const zf__gpu_bcast_t *bc, F f)
{
    switch (dtype) {
    case ZF_HALF: return binary<__half>(s, a, b, out, n, bc, f);
    case ZF_FLOAT: return binary<float>(s, a, b, out, n, bc, f);
    case ZF_DOUBLE: return binary<double>(s, a, b, out, n, bc, f);
    default: return cudaErrorInvalidValue;
    }
}

/* ---- BiasAdd ------------------------------------------------------------ */

template <typename T>
__global__ void k_bias_add(const T *__restrict__ x, const T *__restrict__ bias, T *__restrict__ out,
                           int64_t n, int64_t channels, int64_t inner)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        put(out + i, load(x[i]) + load(bias[(i / inner) % channels]));
}

template <typename T>
cudaError_t bias_add(cudaStream_t s, const void *x, const void *bias, void *out, int64_t n,
                     int64_t channels, int64_t inner)
{
    k_bias_add<T><<<blocks_for(n), kThreads, 0, s>>>((const T *)x, (const T *)bias, (T *)out, n,
                                                     channels, inner);
    return cudaGetLastError();
}

/* ---- AddN ------------------------------------------------------------------- */

struct AddNInputs {
    const void *p[ZF__GPU_ADD_N_MAX];
};

/* Each partial sum is stored as T (put rounds a half): float and double
 * sums are the CPU kernel's, which adds the inputs one by one. */
template <typename T>
__global__ void k_add_n(AddNInputs in, int k, bool acc, T *__restrict__ out, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        T s = acc ? out[i] : ((const T *)in.p[0])[i];
        for (int j = acc ? 0 : 1; j < k; j++) put(&s, load(s) + load(((const T *)in.p[j])[i]));
        out[i] = s;
    }
}

template <typename T>
cudaError_t add_n(cudaStream_t s, const AddNInputs &in, int k, bool acc, void *out, int64_t n)
{
    k_add_n<T><<<blocks_for(n), kThreads, 0, s>>>(in, k, acc, (T *)out, n);
    return cudaGetLastError();
}

/* ---- Cast and Fill ---------------------------------------------------------- */

template <typename S, typename D>
__global__ void k_cast(const S *__restrict__ in, D *__restrict__ out, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = Cvt<D, S>::run(in[i]);
}

template <typename S, typename D>
cudaError_t cast(cudaStream_t s, const void *in, void *out, int64_t n)
{
    k_cast<S, D><<<blocks_for(n), kThreads, 0, s>>>((const S *)in, (D *)out, n);
    return cudaGetLastError();
}

template <typename S>
cudaError_t cast_from(cudaStream_t s, const void *in, zf_dtype_t dst, void *out, int64_t n)
{
    switch (dst) {
    case ZF_HALF: return cast<S, __half>(s, in, out, n);
    case ZF_FLOAT: return cast<S, float>(s, in, out, n);
    case ZF_DOUBLE: return cast<S, double>(s, in, out, n);
    case ZF_INT64: return cast<S, int64_t>(s, in, out, n);
    case ZF_BOOL: return cast<S, bool>(s, in, out, n);
    default: return cudaErrorInvalidValue;
    }
}

bool cast_type(zf_dtype_t t)
{
    return t == ZF_HALF || t == ZF_FLOAT || t == ZF_DOUBLE || t == ZF_INT64 || t == ZF_BOOL;
}

template <typename T>
__global__ void k_fill(const T *__restrict__ value, T *__restrict__ out, int64_t n)
{
    T v = *value;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = v;
}

template <typename T> __global__ void k_fill_scalar(double value, T *__restrict__ out, int64_t n)
{
    T v = Cvt<T, double>::run(value);
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = v;
}

} // namespace
} // namespace zf_gpu

using namespace zf_gpu;

extern "C" cudaError_t zf__gpu_launch_unary(cudaStream_t stream, zf__gpu_unary_t op,
                                            zf_dtype_t dtype, const void *in, void *out, int64_t n,
                                            double param)
{
    if (n <= 0) return cudaSuccess;
    switch (op) {
    case ZF__GPU_NEG: return unary_typed(stream, dtype, in, out, n, OpNeg());
    case ZF__GPU_ABS: return unary_typed(stream, dtype, in, out, n, OpAbs());
    case ZF__GPU_SQUARE: return unary_typed(stream, dtype, in, out, n, OpSquare());
    case ZF__GPU_SQRT: return unary_typed(stream, dtype, in, out, n, OpSqrt());
    case ZF__GPU_RSQRT: return unary_typed(stream, dtype, in, out, n, OpRsqrt());
    case ZF__GPU_EXP: return unary_typed(stream, dtype, in, out, n, OpExp());
    case ZF__GPU_LOG: return unary_typed(stream, dtype, in, out, n, OpLog());
    case ZF__GPU_RECIPROCAL: return unary_typed(stream, dtype, in, out, n, OpReciprocal());
    case ZF__GPU_RELU: return unary_typed(stream, dtype, in, out, n, OpRelu());
    case ZF__GPU_RELU6: return unary_typed(stream, dtype, in, out, n, OpRelu6());
    case ZF__GPU_SIGMOID: return unary_typed(stream, dtype, in, out, n, OpSigmoid());
    case ZF__GPU_TANH: return unary_typed(stream, dtype, in, out, n, OpTanh());
    case ZF__GPU_ELU: return unary_typed(stream, dtype, in, out, n, OpElu());
    case ZF__GPU_SELU: return unary_typed(stream, dtype, in, out, n, OpSelu());
    case ZF__GPU_SOFTPLUS: return unary_typed(stream, dtype, in, out, n, OpSoftplus());
    case ZF__GPU_SOFTSIGN: return unary_typed(stream, dtype, in, out, n, OpSoftsign());
    case ZF__GPU_LEAKY_RELU: return unary_typed(stream, dtype, in, out, n, OpLeakyRelu{param});
    case ZF__GPU_ERF: return unary_typed(stream, dtype, in, out, n, OpErf());
    case ZF__GPU_ERFC: return unary_typed(stream, dtype, in, out, n, OpErfc());
    case ZF__GPU_FLOOR: return unary_typed(stream, dtype, in, out, n, OpFloor());
    case ZF__GPU_CEIL: return unary_typed(stream, dtype, in, out, n, OpCeil());
    case ZF__GPU_ROUND: return unary_typed(stream, dtype, in, out, n, OpRound());
    case ZF__GPU_SIGN: return unary_typed(stream, dtype, in, out, n, OpSign());
    }
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t zf__gpu_launch_predicate(cudaStream_t stream, zf__gpu_predicate_t op,
                                                zf_dtype_t dtype, const void *in, void *out,
                                                int64_t n)
{
    if (n <= 0) return cudaSuccess;
    switch (op) {
    case ZF__GPU_IS_NAN: return unary_typed<BoolOut>(stream, dtype, in, out, n, OpIsNan());
    case ZF__GPU_IS_INF: return unary_typed<BoolOut>(stream, dtype, in, out, n, OpIsInf());
    case ZF__GPU_IS_FINITE: return unary_typed<BoolOut>(stream, dtype, in, out, n, OpIsFinite());
    }
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t zf__gpu_launch_binary(cudaStream_t stream, zf__gpu_binary_t op,
                                             zf_dtype_t dtype, const void *a, const void *b,
                                             void *out, int64_t n, const zf__gpu_bcast_t *bc,
                                             double param)
{
    if (n <= 0) return cudaSuccess;
    if (bc->rank < 0 || bc->rank > ZF__GPU_MAX_RANK) return cudaErrorInvalidValue;
    switch (op) {
    case ZF__GPU_ADD: return binary_typed(stream, dtype, a, b, out, n, bc, OpAdd());
    case ZF__GPU_SUB: return binary_typed(stream, dtype, a, b, out, n, bc, OpSub());
    case ZF__GPU_MUL: return binary_typed(stream, dtype, a, b, out, n, bc, OpMul());
    case ZF__GPU_DIV: return binary_typed(stream, dtype, a, b, out, n, bc, OpDiv());
    case ZF__GPU_MAXIMUM: return binary_typed(stream, dtype, a, b, out, n, bc, OpMaximum());
    case ZF__GPU_MINIMUM: return binary_typed(stream, dtype, a, b, out, n, bc, OpMinimum());
    case ZF__GPU_SQUARED_DIFFERENCE:
        return binary_typed(stream, dtype, a, b, out, n, bc, OpSquaredDifference());
    case ZF__GPU_POW: return binary_typed(stream, dtype, a, b, out, n, bc, OpPow());
    case ZF__GPU_RELU_GRAD: return binary_typed(stream, dtype, a, b, out, n, bc, OpReluGrad());
    case ZF__GPU_RELU6_GRAD: return binary_typed(stream, dtype, a, b, out, n, bc, OpRelu6Grad());
    case ZF__GPU_LEAKY_RELU_GRAD:
        return binary_typed(stream, dtype, a, b, out, n, bc, OpLeakyReluGrad{param});
    case ZF__GPU_ELU_GRAD: return binary_typed(stream, dtype, a, b, out, n, bc, OpEluGrad());
    case ZF__GPU_SELU_GRAD: return binary_typed(stream, dtype, a, b, out, n, bc, OpSeluGrad());
    case ZF__GPU_SIGMOID_GRAD:
        return binary_typed(stream, dtype, a, b, out, n, bc, OpSigmoidGrad());
    case ZF__GPU_TANH_GRAD: return binary_typed(stream, dtype, a, b, out, n, bc, OpTanhGrad());
    case ZF__GPU_SOFTPLUS_GRAD:
        return binary_typed(stream, dtype, a, b, out, n, bc, OpSoftplusGrad());
    case ZF__GPU_SOFTSIGN_GRAD:
        return binary_typed(stream, dtype, a, b, out, n, bc, OpSoftsignGrad());
    case ZF__GPU_SQRT_GRAD: return binary_typed(stream, dtype, a, b, out, n, bc, OpSqrtGrad());
    case ZF__GPU_RSQRT_GRAD: return binary_typed(stream, dtype, a, b, out, n, bc, OpRsqrtGrad());
    case ZF__GPU_RECIPROCAL_GRAD:
        return binary_typed(stream, dtype, a, b, out, n, bc, OpReciprocalGrad());
    }
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t zf__gpu_launch_bias_add(cudaStream_t stream, zf_dtype_t dtype, const void *x,
                                               const void *bias, void *out, int64_t n,
                                               int64_t channels, int64_t inner)
{
    if (n <= 0) return cudaSuccess;
    if (channels <= 0 || inner <= 0) return cudaErrorInvalidValue;
    switch (dtype) {
    case ZF_HALF: return bias_add<__half>(stream, x, bias, out, n, channels, inner);
    case ZF_FLOAT: return bias_add<float>(stream, x, bias, out, n, channels, inner);
    case ZF_DOUBLE: return bias_add<double>(stream, x, bias, out, n, channels, inner);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t zf__gpu_launch_add_n(cudaStream_t stream, zf_dtype_t dtype,
                                            const void *const *in, int k, bool accumulate,
                                            void *out, int64_t n)
{
    if (n <= 0) return cudaSuccess;
    if (k < 1 || k > ZF__GPU_ADD_N_MAX) return cudaErrorInvalidValue;
    AddNInputs p = {};
    for (int j = 0; j < k; j++) p.p[j] = in[j];
    switch (dtype) {
    case ZF_HALF: return add_n<__half>(stream, p, k, accumulate, out, n);
    case ZF_FLOAT: return add_n<float>(stream, p, k, accumulate, out, n);
    case ZF_DOUBLE: return add_n<double>(stream, p, k, accumulate, out, n);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" bool zf__gpu_cast_supported(zf_dtype_t src_type, zf_dtype_t dst_type)
{
    return cast_type(src_type) && cast_type(dst_type);
}

extern "C" cudaError_t zf__gpu_launch_cast(cudaStream_t stream, zf_dtype_t src_type, const void *in,
                                           zf_dtype_t dst_type, void *out, int64_t n)
{
    if (n <= 0) return cudaSuccess;
    switch (src_type) {
    case ZF_HALF: return cast_from<__half>(stream, in, dst_type, out, n);
    case ZF_FLOAT: return cast_from<float>(stream, in, dst_type, out, n);
    case ZF_DOUBLE: return cast_from<double>(stream, in, dst_type, out, n);
    case ZF_INT64: return cast_from<int64_t>(stream, in, dst_type, out, n);
    case ZF_BOOL: return cast_from<bool>(stream, in, dst_type, out, n);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t zf__gpu_launch_fill(cudaStream_t stream, zf_dtype_t dtype, const void *value,
                                           void *out, int64_t n)
{
    if (n <= 0) return cudaSuccess;
    unsigned blocks = blocks_for(n);
    switch (dtype) {
    case ZF_HALF:
        k_fill<__half><<<blocks, kThreads, 0, stream>>>((const __half *)value, (__half *)out, n);
        break;
    case ZF_FLOAT:
        k_fill<float><<<blocks, kThreads, 0, stream>>>((const float *)value, (float *)out, n);
        break;
    case ZF_DOUBLE:
        k_fill<double><<<blocks, kThreads, 0, stream>>>((const double *)value, (double *)out, n);
        break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

extern "C" cudaError_t zf__gpu_launch_fill_scalar(cudaStream_t stream, zf_dtype_t dtype,
                                                  double value, void *out, int64_t n)
{
    if (n <= 0) return cudaSuccess;
    unsigned blocks = blocks_for(n);
    switch (dtype) {
    case ZF_HALF:
        k_fill_scalar<__half><<<blocks, kThreads, 0, stream>>>(value, (__half *)out, n);
        break;
    case ZF_FLOAT:
        k_fill_scalar<float><<<blocks, kThreads, 0, stream>>>(value, (float *)out, n);
        break;
    case ZF_DOUBLE:
        k_fill_scalar<double><<<blocks, kThreads, 0, stream>>>(value, (double *)out, n);
        break;
    case ZF_BOOL: k_fill_scalar<bool><<<blocks, kThreads, 0, stream>>>(value, (bool *)out, n); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
