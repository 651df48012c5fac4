/* The C entry points of zflow's CUDA kernels (the .cu files beside this
 * header), called by the GPU kernel definitions in the .c files here.
 *
 * Every launcher enqueues its work on stream and returns at once: the
 * launch's error (cudaSuccess once queued; errors during execution show up
 * at the next synchronisation). None blocks or allocates. Pointers are
 * device memory unless said otherwise; element types are zf_dtype_t
 * values, and each launcher accepts ZF_HALF, ZF_FLOAT and ZF_DOUBLE
 * (cudaErrorInvalidValue for others). Counts of 0 launch nothing. */
#ifndef ZF_GPU_LAUNCH_H
#define ZF_GPU_LAUNCH_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/dtype.h"
#include "executor/kernels/broadcast.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZF__GPU_MAX_RANK 16

/* ---- element-wise (cwise.cu) ---------------------------------------------- */

typedef enum zf__gpu_unary {
    ZF__GPU_NEG,
    ZF__GPU_ABS,
    ZF__GPU_SQUARE,
    ZF__GPU_SQRT,
    ZF__GPU_RSQRT,
    ZF__GPU_EXP,
    ZF__GPU_LOG,
    ZF__GPU_RECIPROCAL,
    ZF__GPU_RELU,
    ZF__GPU_RELU6,
    ZF__GPU_SIGMOID,
    ZF__GPU_TANH,
    ZF__GPU_ELU,
    ZF__GPU_SELU,
    ZF__GPU_SOFTPLUS,
    ZF__GPU_SOFTSIGN,
    ZF__GPU_LEAKY_RELU, /* param: alpha */
    ZF__GPU_ERF,
    ZF__GPU_ERFC,
    ZF__GPU_FLOOR,
    ZF__GPU_CEIL,
    ZF__GPU_ROUND, /* halves to even */
    ZF__GPU_SIGN,
} zf__gpu_unary_t;

typedef enum zf__gpu_binary {
    ZF__GPU_ADD,
    ZF__GPU_SUB,
    ZF__GPU_MUL,
    ZF__GPU_DIV,
    ZF__GPU_MAXIMUM,
    ZF__GPU_MINIMUM,
    ZF__GPU_SQUARED_DIFFERENCE,
    ZF__GPU_POW,
    /* Activation gradients, a = gradients and b = features ... */
    ZF__GPU_RELU_GRAD,
    ZF__GPU_RELU6_GRAD,
    ZF__GPU_LEAKY_RELU_GRAD, /* param: alpha */
    ZF__GPU_SOFTPLUS_GRAD,
    ZF__GPU_SOFTSIGN_GRAD,
    /* ... b = the forward outputs ... */
    ZF__GPU_ELU_GRAD,
    ZF__GPU_SELU_GRAD,
    /* ... or a = the forward output y and b = its gradient dy. */
    ZF__GPU_SIGMOID_GRAD,
    ZF__GPU_TANH_GRAD,
    ZF__GPU_SQRT_GRAD,
    ZF__GPU_RSQRT_GRAD,
    ZF__GPU_RECIPROCAL_GRAD,
} zf__gpu_binary_t;

/* The plans of binary ops are executor/kernels/broadcast.h's. */
typedef zf_broadcast_t zf__gpu_bcast_t;

/* out[i] = op(in[i]) for i in [0, n); param is the op's parameter
 * where it has one (LeakyRelu's alpha), ignored otherwise. */
cudaError_t zf__gpu_launch_unary(cudaStream_t stream, zf__gpu_unary_t op, zf_dtype_t dtype,
                                 const void *in, void *out, int64_t n, double param);

typedef enum zf__gpu_predicate {
    ZF__GPU_IS_NAN,
    ZF__GPU_IS_INF,
    ZF__GPU_IS_FINITE,
} zf__gpu_predicate_t;

/* out[i] (bool) = op(in[i]) for i in [0, n). */
cudaError_t zf__gpu_launch_predicate(cudaStream_t stream, zf__gpu_predicate_t op, zf_dtype_t dtype,
                                     const void *in, void *out, int64_t n);

/* out = op(a, b) over bc, n = the product of bc->dims; param as for
 * zf__gpu_launch_unary(). */
cudaError_t zf__gpu_launch_binary(cudaStream_t stream, zf__gpu_binary_t op, zf_dtype_t dtype,
                                  const void *a, const void *b, void *out, int64_t n,
                                  const zf__gpu_bcast_t *bc, double param);

/* out[i] = x[i] + bias[(i / inner) % channels], n elements. */
cudaError_t zf__gpu_launch_bias_add(cudaStream_t stream, zf_dtype_t dtype, const void *x,
                                    const void *bias, void *out, int64_t n, int64_t channels,
                                    int64_t inner);

/* AddN: out[i] = in[0][i] + in[1][i] + ... + in[k-1][i], added left to
 * right in dtype (half rounds after every addition, as a chain of Adds
 * would), or out[i] + in[0][i] + ... when accumulate. k is 1 to
 * ZF__GPU_ADD_N_MAX; in is a host array of k device pointers. */
#define ZF__GPU_ADD_N_MAX 8
cudaError_t zf__gpu_launch_add_n(cudaStream_t stream, zf_dtype_t dtype, const void *const *in,
                                 int k, bool accumulate, void *out, int64_t n);

/* out[i] = (dst_type)in[i]. Besides the floating types, casts accept
 * ZF_INT64 and ZF_BOOL on either side (C conversions, bool is x != 0). */
cudaError_t zf__gpu_launch_cast(cudaStream_t stream, zf_dtype_t src_type, const void *in,
                                zf_dtype_t dst_type, void *out, int64_t n);

/* True when zf__gpu_launch_cast() handles the pair. */
bool zf__gpu_cast_supported(zf_dtype_t src_type, zf_dtype_t dst_type);

/* out[0..n) = *value, value one element in device memory. */
cudaError_t zf__gpu_launch_fill(cudaStream_t stream, zf_dtype_t dtype, const void *value, void *out,
                                int64_t n);

/* out[0..n) = value (converted to dtype; ZF_BOOL too, as value != 0). */
cudaError_t zf__gpu_launch_fill_scalar(cudaStream_t stream, zf_dtype_t dtype, double value,
                                       void *out, int64_t n);

/* ---- moving elements (remap.cu) ---------------------------------------------- */

/* An index mapping from a dense output space to a source tensor. */
typedef struct zf__gpu_remap_plan {
    int rank;                          /* 1 to ZF__GPU_MAX_RANK */
    int64_t dims[ZF__GPU_MAX_RANK];    /* the output's dims */
    int64_t strides[ZF__GPU_MAX_RANK]; /* the source's element stride along each */
    int64_t offs[ZF__GPU_MAX_RANK];    /* where dim k's map starts in idx */
} zf__gpu_remap_plan_t;

/* out[i] for i in [0, n), n the product of plan->dims: with i_k the
 * position of i along dim k and m_k = idx[offs[k] + i_k] (i_k itself when
 * idx is NULL), src[sum of m_k * strides[k]], or *fill (NULL: zeros)
 * where some m_k is negative. Elements of elem bytes (1, 2, 4, 8 or 16;
 * cudaErrorInvalidValue otherwise); idx and fill in device memory. */
cudaError_t zf__gpu_launch_remap(cudaStream_t stream, size_t elem,
                                 const zf__gpu_remap_plan_t *plan, const int64_t *idx,
                                 const void *src, void *out, int64_t n, const void *fill);

/* An NHWC convolution's geometry: input [n, h, w, c], window kh x kw with
 * strides sh, sw, dilations dh, dw and padding pt (top), pl (left);
 * output oh x ow pixels per image. */
typedef struct zf__gpu_conv {
    int64_t n, h, w, c, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow;
} zf__gpu_conv_t;

/* Patch rows [row0, row0 + rows) of the convolution's patch matrix into
 * patches ([rows, kh * kw * c], row-major): row r is output pixel r of the
 * batch's n * oh * ow, each entry its window's input element, 0 in the
 * padding. Elements of elem bytes (4 or 8; cudaErrorInvalidValue
 * otherwise). */
cudaError_t zf__gpu_launch_im2col(cudaStream_t stream, size_t elem, const zf__gpu_conv_t *g,
                                  const void *in, int64_t row0, int64_t rows, void *patches);

/* ---- reductions and softmax (reduce.cu) --------------------------------------- */

typedef enum zf__gpu_reduce_op {
    ZF__GPU_REDUCE_SUM,
    ZF__GPU_REDUCE_MEAN,
    ZF__GPU_REDUCE_MAX,
    ZF__GPU_REDUCE_MIN,
    ZF__GPU_REDUCE_PROD,
    ZF__GPU_REDUCE_ALL, /* ZF_BOOL only, as is ANY */
    ZF__GPU_REDUCE_ANY,
} zf__gpu_reduce_op_t;

typedef enum zf__gpu_reduce_kind {
    ZF__GPU_REDUCE_ROWS,    /* in is [outer, reduce]: reduce each row */
    ZF__GPU_REDUCE_MIDDLE,  /* in is [outer, reduce, inner]: reduce the middle dim */
    ZF__GPU_REDUCE_GENERAL, /* any other set of axes */
} zf__gpu_reduce_kind_t;

/* How to reduce: built on the host from the input's shape and the axes.
 * The output holds outer * inner elements (ROWS, MIDDLE) or the product
 * of kdims (GENERAL), in row-major order of the kept dims. */
typedef struct zf__gpu_reduce_plan {
    zf__gpu_reduce_kind_t kind;
    int64_t outer, reduce, inner;
    /* GENERAL: kept dims and their input strides, reduced dims and theirs. */
    int nk, nr;
    int64_t kdims[ZF__GPU_MAX_RANK], kstrides[ZF__GPU_MAX_RANK];
    int64_t rdims[ZF__GPU_MAX_RANK], rstrides[ZF__GPU_MAX_RANK];
} zf__gpu_reduce_plan_t;

/* Bytes of device scratch memory zf__gpu_launch_reduce() needs for plan
 * (0 when none). */
size_t zf__gpu_reduce_scratch_bytes(const zf__gpu_reduce_plan_t *plan, zf_dtype_t dtype);

/* Reduces in into out by plan; count is the number of input elements
 * that reduce into each output (MEAN divides by it). scratch holds
 * zf__gpu_reduce_scratch_bytes() bytes. Empty reductions are not
 * launched: the caller fills the identity. */
cudaError_t zf__gpu_launch_reduce(cudaStream_t stream, zf__gpu_reduce_op_t op, zf_dtype_t dtype,
                                  const void *in, void *out, const zf__gpu_reduce_plan_t *plan,
                                  int64_t count, void *scratch);

/* ArgMin (is_min) or ArgMax of in, [outer, len, inner] (len >= 1), along
 * len: the first index of the extreme, out_type ZF_INT32 or ZF_INT64,
 * outer * inner of them. */
cudaError_t zf__gpu_launch_arg(cudaStream_t stream, zf_dtype_t dtype, const void *in,
                               int64_t outer, int64_t len, int64_t inner, zf_dtype_t out_type,
                               void *out, bool is_min);

/* Softmax (or log-softmax) of each of rows rows of cols elements. */
cudaError_t zf__gpu_launch_softmax(cudaStream_t stream, zf_dtype_t dtype, const void *in, void *out,
                                   int64_t rows, int64_t cols, bool log_softmax);

#ifdef __cplusplus
}
#endif

#endif
