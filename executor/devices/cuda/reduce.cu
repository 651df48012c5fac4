/* CUDA reductions (Sum, Mean, Max, Min, Prod over any set of axes, and
 * All, Any on bools), ArgMax / ArgMin over one axis, and Softmax /
 * LogSoftmax over the last axis, for half, float and double; half and
 * float accumulate in float, double in double. C entry points declared in
 * gpu_launch.h. */
#include "executor/devices/cuda/gpu_launch.h"
#include "executor/devices/cuda/gpu_math.cuh"

namespace zf_gpu
{
namespace
{

/* Rows shorter than this are reduced by one thread each, not one block. */
constexpr int64_t kShortRow = 32;
/* Elements one block reduces before a long row is split over blocks. */
constexpr int64_t kSplitChunk = 8192;
constexpr int64_t kMaxSplits = 1024;

/* How many blocks reduce each row: enough blocks to fill the GPU when
 * there are few long rows, one per row otherwise. */
int64_t row_splits(const zf__gpu_reduce_plan_t *p)
{
    if (p->kind != ZF__GPU_REDUCE_ROWS || p->reduce <= kShortRow || p->outer >= 256) return 1;
    int64_t by_len = (p->reduce + kSplitChunk - 1) / kSplitChunk;
    int64_t by_rows = (1024 + p->outer - 1) / p->outer;
    int64_t s = by_len < by_rows ? by_len : by_rows;
    if (s > kMaxSplits) s = kMaxSplits;
    return s < 1 ? 1 : s;
}

/* The output value of an accumulated result: MEAN divides by the count. */
template <typename A> __device__ __forceinline__ A finish(A v, bool mean, A count)
{
    return mean ? v / count : v;
}

/* Rows of len elements; block job j reduces a slice of row j / splits.
 * With one split the block writes the result, otherwise a partial. */
template <typename T, typename A, typename Op>
__global__ void k_reduce_rows(const T *__restrict__ in, int64_t rows, int64_t len, int64_t splits,
                              A *__restrict__ partial, T *__restrict__ out, Op op, bool mean,
                              A count)
{
    int64_t chunk = (len + splits - 1) / splits;
    for (int64_t job = blockIdx.x; job < rows * splits; job += gridDim.x) {
        int64_t row = job / splits, part = job % splits;
        int64_t begin = part * chunk, end = begin + chunk < len ? begin + chunk : len;
        const T *x = in + row * len;
        A acc = op.identity();
        for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc = op(acc, load(x[i]));
        acc = block_allreduce(acc, op);
        if (threadIdx.x == 0) {
            if (splits == 1)
                put(out + row, finish(acc, mean, count));
            else
                partial[job] = acc;
        }
        __syncthreads(); /* block_allreduce's shared memory is reused next round */
    }
}

/* Second pass of split rows: one block per row over its partials. */
template <typename T, typename A, typename Op>
__global__ void k_reduce_partials(const A *__restrict__ partial, int64_t rows, int64_t splits,
                                  T *__restrict__ out, Op op, bool mean, A count)
{
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        A acc = op.identity();
        for (int64_t i = threadIdx.x; i < splits; i += blockDim.x)
            acc = op(acc, partial[row * splits + i]);
        acc = block_allreduce(acc, op);
        if (threadIdx.x == 0) put(out + row, finish(acc, mean, count));
        __syncthreads();
    }
}

/* [outer, reduce, inner] -> [outer, inner], one thread per output: threads
 * next to each other read next to each other along inner. */
template <typename T, typename A, typename Op>
__global__ void k_reduce_middle(const T *__restrict__ in, int64_t outer, int64_t reduce,
                                int64_t inner, T *__restrict__ out, Op op, bool mean, A count)
{
    int64_t n = outer * inner, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += stride) {
        const T *x = in + (o / inner) * reduce * inner + o % inner;
        A acc = op.identity();
        for (int64_t r = 0; r < reduce; r++) acc = op(acc, load(x[r * inner]));
        put(out + o, finish(acc, mean, count));
    }
}

/* Any axes: one thread per output walks its kept index to a base offset,
 * then every reduced index. */
template <typename T, typename A, typename Op>
__global__ void k_reduce_general(const T *__restrict__ in, T *__restrict__ out, int64_t n,
                                 int64_t count, zf__gpu_reduce_plan_t p, Op op, bool mean)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += stride) {
        int64_t rest = o, base = 0;
        for (int k = p.nk - 1; k >= 0; k--) {
            base += (rest % p.kdims[k]) * p.kstrides[k];
            rest /= p.kdims[k];
        }
        A acc = op.identity();
        for (int64_t r = 0; r < count; r++) {
            int64_t rr = r, off = base;
            for (int k = p.nr - 1; k >= 0; k--) {
                off += (rr % p.rdims[k]) * p.rstrides[k];
                rr /= p.rdims[k];
            }
            acc = op(acc, load(in[off]));
        }
        put(out + o, finish(acc, mean, static_cast<A>(count)));
    }
}

template <typename T, typename Op>
cudaError_t reduce(cudaStream_t s, const void *vin, void *vout, const zf__gpu_reduce_plan_t *p,
                   int64_t count, void *scratch, Op op, bool mean)
{
    typedef typename Acc<T>::type A;
    const T *in = (const T *)vin;
    T *out = (T *)vout;
    A cnt = static_cast<A>(count);
    if (p->kind == ZF__GPU_REDUCE_GENERAL) {
        int64_t n = 1;
        for (int k = 0; k < p->nk; k++) n *= p->kdims[k];
        k_reduce_general<T, A, Op>
            <<<blocks_for(n), kThreads, 0, s>>>(in, out, n, count, *p, op, mean);
    } else if (p->kind == ZF__GPU_REDUCE_MIDDLE || p->reduce <= kShortRow) {
        int64_t inner = p->kind == ZF__GPU_REDUCE_MIDDLE ? p->inner : 1;
        k_reduce_middle<T, A, Op><<<blocks_for(p->outer * inner), kThreads, 0, s>>>(
            in, p->outer, p->reduce, inner, out, op, mean, cnt);
    } else {
        int64_t splits = row_splits(p), jobs = p->outer * splits;
        unsigned blocks = (unsigned)(jobs < kMaxBlocks ? jobs : kMaxBlocks);
        A *partial = (A *)scratch;
        k_reduce_rows<T, A, Op><<<blocks, kThreads, 0, s>>>(in, p->outer, p->reduce, splits,
                                                            partial, out, op, mean, cnt);
        if (splits > 1) {
            cudaError_t err = cudaGetLastError();
            if (err != cudaSuccess) return err;
            unsigned rb = (unsigned)(p->outer < kMaxBlocks ? p->outer : kMaxBlocks);
            k_reduce_partials<T, A, Op>
                <<<rb, kThreads, 0, s>>>(partial, p->outer, splits, out, op, mean, cnt);
        }
    }
    return cudaGetLastError();
}

template <typename T>
cudaError_t reduce_op(cudaStream_t s, zf__gpu_reduce_op_t op, const void *in, void *out,
                      const zf__gpu_reduce_plan_t *p, int64_t count, void *scratch)
{
    typedef typename Acc<T>::type A;
    switch (op) {
    case ZF__GPU_REDUCE_SUM: return reduce<T>(s, in, out, p, count, scratch, SumOp<A>(), false);
    case ZF__GPU_REDUCE_MEAN: return reduce<T>(s, in, out, p, count, scratch, SumOp<A>(), true);
    case ZF__GPU_REDUCE_MAX: return reduce<T>(s, in, out, p, count, scratch, MaxOp<A>(), false);
    case ZF__GPU_REDUCE_MIN: return reduce<T>(s, in, out, p, count, scratch, MinOp<A>(), false);
    case ZF__GPU_REDUCE_PROD: return reduce<T>(s, in, out, p, count, scratch, ProdOp<A>(), false);
    default: return cudaErrorInvalidValue; /* All and Any take bools */
    }
}

cudaError_t reduce_bool(cudaStream_t s, zf__gpu_reduce_op_t op, const void *in, void *out,
                        const zf__gpu_reduce_plan_t *p, int64_t count, void *scratch)
{
    switch (op) {
    case ZF__GPU_REDUCE_ALL: return reduce<bool>(s, in, out, p, count, scratch, AndOp(), false);
    case ZF__GPU_REDUCE_ANY: return reduce<bool>(s, in, out, p, count, scratch, OrOp(), false);
    default: return cudaErrorInvalidValue;
    }
}

/* ---- ArgMax, ArgMin ------------------------------------------------------- */

/* in is [outer, len, inner]; one thread per output finds the first index
 * of the extreme along len, comparing as the CPU kernel does (a NaN is
 * never taken over an earlier value). */
template <typename T, typename O>
__global__ void k_arg(const T *__restrict__ in, int64_t outer, int64_t len, int64_t inner,
                      O *__restrict__ out, bool is_min)
{
    typedef typename Acc<T>::type A;
    int64_t n = outer * inner, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += stride) {
        const T *x = in + (o / inner) * len * inner + o % inner;
        A best = load(x[0]);
        int64_t bi = 0;
        for (int64_t a = 1; a < len; a++) {
            A v = load(x[a * inner]);
            if (is_min ? v < best : v > best) {
                best = v;
                bi = a;
            }
        }
        out[o] = static_cast<O>(bi);
    }
}

template <typename T>
cudaError_t arg(cudaStream_t s, const void *in, int64_t outer, int64_t len, int64_t inner,
                zf_dtype_t out_type, void *out, bool is_min)
{
    unsigned blocks = blocks_for(outer * inner);
    if (out_type == ZF_INT64)
        k_arg<T, int64_t><<<blocks, kThreads, 0, s>>>((const T *)in, outer, len, inner,
                                                      (int64_t *)out, is_min);
    else if (out_type == ZF_INT32)
        k_arg<T, int32_t><<<blocks, kThreads, 0, s>>>((const T *)in, outer, len, inner,
                                                      (int32_t *)out, is_min);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

/* ---- softmax -------------------------------------------------------------- */

/* One warp per row: the row's max, the sum of exp(x - max), then the
 * outputs, each pass striding the row by 32. */
template <typename T>
__global__ void k_softmax(const T *__restrict__ in, T *__restrict__ out, int64_t rows, int64_t cols,
                          bool log_softmax)
{
    typedef typename Acc<T>::type A;
    int lane = threadIdx.x & 31;
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = warp; r < rows; r += warps) {
        const T *x = in + r * cols;
        T *y = out + r * cols;
        A mx = MaxOp<A>().identity();
        for (int64_t c = lane; c < cols; c += 32) mx = MaxOp<A>()(mx, load(x[c]));
        mx = warp_allreduce(mx, MaxOp<A>());
        A sum = 0;
        for (int64_t c = lane; c < cols; c += 32) sum += m_exp(load(x[c]) - mx);
        sum = warp_allreduce(sum, SumOp<A>());
        if (log_softmax) {
            A log_sum = m_log(sum);
            for (int64_t c = lane; c < cols; c += 32) put(y + c, (load(x[c]) - mx) - log_sum);
        } else {
            for (int64_t c = lane; c < cols; c += 32) put(y + c, m_exp(load(x[c]) - mx) / sum);
        }
    }
}

template <typename T>
cudaError_t softmax(cudaStream_t s, const void *in, void *out, int64_t rows, int64_t cols,
                    bool log_softmax)
{
    const int64_t rows_per_block = kThreads / 32;
    int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
    if (blocks > kMaxBlocks) blocks = kMaxBlocks;
    k_softmax<T>
        <<<(unsigned)blocks, kThreads, 0, s>>>((const T *)in, (T *)out, rows, cols, log_softmax);
    return cudaGetLastError();
}

} // namespace
} // namespace zf_gpu

using namespace zf_gpu;

static size_t s_acc_size(zf_dtype_t dtype)
{
    return dtype == ZF_DOUBLE ? sizeof(double) : dtype == ZF_BOOL ? sizeof(int) : sizeof(float);
}

extern "C" size_t zf__gpu_reduce_scratch_bytes(const zf__gpu_reduce_plan_t *plan, zf_dtype_t dtype)
{
    int64_t splits = row_splits(plan);
    return splits > 1 ? (size_t)(plan->outer * splits) * s_acc_size(dtype) : 0;
}

extern "C" cudaError_t zf__gpu_launch_reduce(cudaStream_t stream, zf__gpu_reduce_op_t op,
                                             zf_dtype_t dtype, const void *in, void *out,
                                             const zf__gpu_reduce_plan_t *plan, int64_t count,
                                             void *scratch)
{
    if (count <= 0) return cudaSuccess;
    if (plan->nk < 0 || plan->nk > ZF__GPU_MAX_RANK || plan->nr < 0 || plan->nr > ZF__GPU_MAX_RANK)
        return cudaErrorInvalidValue;
    if (zf__gpu_reduce_scratch_bytes(plan, dtype) && !scratch) return cudaErrorInvalidValue;
    switch (dtype) {
    case ZF_HALF: return reduce_op<__half>(stream, op, in, out, plan, count, scratch);
    case ZF_FLOAT: return reduce_op<float>(stream, op, in, out, plan, count, scratch);
    case ZF_DOUBLE: return reduce_op<double>(stream, op, in, out, plan, count, scratch);
    case ZF_BOOL: return reduce_bool(stream, op, in, out, plan, count, scratch);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t zf__gpu_launch_arg(cudaStream_t stream, zf_dtype_t dtype, const void *in,
                                          int64_t outer, int64_t len, int64_t inner,
                                          zf_dtype_t out_type, void *out, bool is_min)
{
    if (outer <= 0 || inner <= 0) return cudaSuccess;
    if (len <= 0) return cudaErrorInvalidValue;
    switch (dtype) {
    case ZF_HALF: return arg<__half>(stream, in, outer, len, inner, out_type, out, is_min);
    case ZF_FLOAT: return arg<float>(stream, in, outer, len, inner, out_type, out, is_min);
    case ZF_DOUBLE: return arg<double>(stream, in, outer, len, inner, out_type, out, is_min);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t zf__gpu_launch_softmax(cudaStream_t stream, zf_dtype_t dtype, const void *in,
                                              void *out, int64_t rows, int64_t cols,
                                              bool log_softmax)
{
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    switch (dtype) {
    case ZF_HALF: return softmax<__half>(stream, in, out, rows, cols, log_softmax);
    case ZF_FLOAT: return softmax<float>(stream, in, out, rows, cols, log_softmax);
    case ZF_DOUBLE: return softmax<double>(stream, in, out, rows, cols, log_softmax);
    default: return cudaErrorInvalidValue;
    }
}
