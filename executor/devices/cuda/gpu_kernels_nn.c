/* GPU kernels for MatMul and Conv2D (im2col, then cuBLAS on the device's
 * stream), the reductions Sum, Mean, Max, Min, Prod, All and Any over any
 * axes, BiasAddGrad (a Sum over all but the channel dim), ArgMax and
 * ArgMin over one, and Softmax / LogSoftmax over the last axis. Shapes
 * and axes are worked out here, before the GPU is needed; reduce.cu and
 * remap.cu compute. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/devices/cuda/gpu_internal.h"
#include "executor/kernels/kernels_conv.h"
#include "executor/kernels/kernels_util.h"

/* ---- MatMul ---------------------------------------------------------------------- */

typedef struct {
    int m, n, k;
    bool ta, tb;
} s_gemm_t;

static zf_status_t s_matmul_dims(zf_kernel_ctx_t *ctx, s_gemm_t *mm)
{
    const zf_tensor_t *a = ctx->inputs[0], *b = ctx->inputs[1];
    const zf_shape_t *as = zf_tensor_shape(a), *bs = zf_tensor_shape(b);
    char x[ZF_SHAPE_STRING_MAX], y[ZF_SHAPE_STRING_MAX];
    for (int i = 0; i < 2; i++)
        if (zf_tensor_shape(ctx->inputs[i])->rank != 2)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "In[%d] is not a matrix. Instead it has shape %s", i,
                                   zf_kernels_shape_str(ctx->inputs[i], x));
    ZF_TRY(zf_node_attr_bool_or(ctx->node, "transpose_a", false, &mm->ta));
    ZF_TRY(zf_node_attr_bool_or(ctx->node, "transpose_b", false, &mm->tb));
    int64_t m = as->dims[mm->ta ? 1 : 0], k = as->dims[mm->ta ? 0 : 1];
    int64_t kb = bs->dims[mm->tb ? 1 : 0], n = bs->dims[mm->tb ? 0 : 1];
    if (k != kb)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Matrix size-incompatible: In[0]: %s, In[1]: %s",
                               zf_kernels_shape_str(a, x), zf_kernels_shape_str(b, y));
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED,
                               "matrices %s and %s are too large for one cuBLAS call",
                               zf_kernels_shape_str(a, x), zf_kernels_shape_str(b, y));
    mm->m = (int)m;
    mm->n = (int)n;
    mm->k = (int)k;
    return ZF_STATUS_OK;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
 * row-major buffer read column-major is the transpose: so B goes first,
 * each operand keeps its own transpose flag, and the leading dimensions
 * are the row-major row lengths. */
static cublasStatus_t s_gemm(cublasHandle_t h, zf_dtype_t dtype, const s_gemm_t *mm, const void *a,
                             const void *b, void *c)
{
    cublasOperation_t opa = mm->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = mm->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lda = mm->ta ? mm->m : mm->k, ldb = mm->tb ? mm->k : mm->n;
    if (dtype == ZF_FLOAT) {
        const float one = 1.0f, zero = 0.0f;
        return cublasSgemm(h, opb, opa, mm->n, mm->m, mm->k, &one, b, ldb, a, lda, &zero, c, mm->n);
    }
    if (dtype == ZF_DOUBLE) {
        const double one = 1.0, zero = 0.0;
        return cublasDgemm(h, opb, opa, mm->n, mm->m, mm->k, &one, b, ldb, a, lda, &zero, c, mm->n);
    }
    const float one = 1.0f, zero = 0.0f; /* half: accumulate in float */
    return cublasGemmEx(h, opb, opa, mm->n, mm->m, mm->k, &one, b, CUDA_R_16F, ldb, a, CUDA_R_16F,
                        lda, &zero, c, CUDA_R_16F, mm->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static zf_status_t s_matmul(zf_kernel_ctx_t *ctx)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    const zf_tensor_t *a = ctx->inputs[0], *b = ctx->inputs[1];
    zf_dtype_t dtype = zf_tensor_dtype(a);
    if (dtype != zf_tensor_dtype(b) || !(ZF_TYPES_GPU_FLOAT & ZF_TYPE_BIT(dtype)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel multiplies %s by %s",
                               zf_kernels_dtype_name((int)dtype),
                               zf_kernels_dtype_name((int)zf_tensor_dtype(b)));
    s_gemm_t mm;
    ZF_TRY(s_matmul_dims(ctx, &mm));
    zf_shape_t shape = ZF_SHAPE(mm.m, mm.n);
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, dtype, &shape, &out));
    if (mm.m == 0 || mm.n == 0) return ZF_STATUS_OK;
    if (mm.k == 0) /* an empty sum: zeros */
        return zf__gpu_kernel_launched(
            ctx, cudaMemsetAsync(zf_tensor_data(out), 0, zf_tensor_nbytes(out), g->stream));
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    ZF_TRY(zf__gpu_check_device_input(ctx, 1));
    pthread_mutex_lock(&g->blas_lock);
    cublasStatus_t st =
        s_gemm(g->blas, dtype, &mm, zf_tensor_data(a), zf_tensor_data(b), zf_tensor_data(out));
    pthread_mutex_unlock(&g->blas_lock);
    if (st == CUBLAS_STATUS_SUCCESS) return ZF_STATUS_OK;
    return zf_status_prefix(zf__gpu_blas_error(st, "cuBLAS gemm"), "%s (%s)", ctx->node->name,
                            ctx->node->op);
}

/* ---- Conv2D ---------------------------------------------------------------------- */

/* Bytes of patch matrix built at a time: the rows of a tile. */
#define S_PATCH_BYTES ((size_t)64 << 20)

/* out[rows, oc] = patches[rows, k] x filter[k, oc], cuBLAS on the stream. */
static zf_status_t s_conv_gemm(zf_kernel_ctx_t *ctx, zf__gpu_t *g, zf_dtype_t t, int64_t rows,
                               int64_t k, int64_t oc, const void *patches, const void *filter,
                               void *out)
{
    s_gemm_t mm = {.m = (int)rows, .n = (int)oc, .k = (int)k};
    pthread_mutex_lock(&g->blas_lock);
    cublasStatus_t st = s_gemm(g->blas, t, &mm, patches, filter, out);
    pthread_mutex_unlock(&g->blas_lock);
    if (st == CUBLAS_STATUS_SUCCESS) return ZF_STATUS_OK;
    return zf_status_prefix(zf__gpu_blas_error(st, "cuBLAS gemm"), "%s (%s)", ctx->node->name,
                            ctx->node->op);
}

/* The output pixels of all images are one row space (the output is
 * [n * oh * ow, oc] row-major): its patch matrix is built and multiplied
 * tile by tile. A 1x1 window of stride 1 without padding multiplies the
 * input itself. */
static zf_status_t s_conv_run(zf_kernel_ctx_t *ctx, zf__gpu_t *g, const zf__win_geom_t *w,
                              zf_tensor_t *out)
{
    const zf_tensor_t *x = ctx->inputs[0], *f = ctx->inputs[1];
    zf_dtype_t t = zf_tensor_dtype(x);
    size_t elem = zf_dtype_size(t);
    int64_t k = w->kh * w->kw * w->c, total = w->n * w->oh * w->ow;
    char *o = zf_tensor_data(out);
    if (w->kh == 1 && w->kw == 1 && w->sh == 1 && w->sw == 1 && w->pt == 0 && w->pl == 0 &&
        w->oh == w->h && w->ow == w->w && total <= INT_MAX)
        return s_conv_gemm(ctx, g, t, total, k, w->oc, zf_tensor_data(x), zf_tensor_data(f), o);
    int64_t tile = (int64_t)(S_PATCH_BYTES / ((size_t)k * elem));
    if (tile < 1) tile = 1;
    if (tile > total) tile = total;
    if (tile > INT_MAX) tile = INT_MAX;
    zf_buffer_t *patches = NULL;
    ZF_TRY(zf__gpu_kernel_scratch(ctx, g, (size_t)(tile * k) * elem, &patches));
    zf__gpu_conv_t c = {.n = w->n,   .h = w->h,   .w = w->w,   .c = w->c,   .kh = w->kh,
                        .kw = w->kw, .sh = w->sh, .sw = w->sw, .dh = w->dh, .dw = w->dw,
                        .pt = w->pt, .pl = w->pl, .oh = w->oh, .ow = w->ow};
    zf_status_t s = ZF_STATUS_OK;
    for (int64_t row0 = 0; row0 < total && zf_ok(s); row0 += tile) {
        int64_t rows = total - row0 < tile ? total - row0 : tile;
        s = zf__gpu_kernel_launched(ctx, zf__gpu_launch_im2col(g->stream, elem, &c,
                                                               zf_tensor_data(x), row0, rows,
                                                               zf_buffer_data(patches)));
        if (zf_ok(s))
            s = s_conv_gemm(ctx, g, t, rows, k, w->oc, zf_buffer_data(patches), zf_tensor_data(f),
                            o + (size_t)(row0 * w->oc) * elem);
    }
    /* The block may be reused at once: later users queue behind this
     * work on the same stream. */
    zf_buffer_unref(&patches);
    return s;
}

static zf_status_t s_conv2d(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[0]);
    if (t != ZF_FLOAT && t != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    zf__win_geom_t w;
    zf_shape_t shape;
    ZF_TRY(zf__kernels_conv2d_geometry(ctx, &w, &shape));
    if (w.nchw)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED,
                               "the GPU Conv2D takes data_format NHWC only, got NCHW");
    if (w.kh * w.kw * w.c > INT_MAX || w.oc > INT_MAX)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED,
                               "a filter of %lld x %lld x %lld x %lld is too large for one cuBLAS "
                               "call",
                               (long long)w.kh, (long long)w.kw, (long long)w.c, (long long)w.oc);
    zf__gpu_t *g = NULL;
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, t, &shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    if (w.kh * w.kw * w.c == 0 || w.h * w.w == 0) /* empty or all-padding windows: zero */
        return zf__gpu_kernel_launched(
            ctx, cudaMemsetAsync(zf_tensor_data(out), 0, zf_tensor_nbytes(out), g->stream));
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    ZF_TRY(zf__gpu_check_device_input(ctx, 1));
    return s_conv_run(ctx, g, &w, out);
}

/* ---- reductions ------------------------------------------------------------------ */

static void s_plan(zf__gpu_reduce_plan_t *p, zf__gpu_reduce_kind_t kind, int64_t outer,
                   int64_t reduce, int64_t inner)
{
    p->kind = kind;
    p->outer = outer;
    p->reduce = reduce;
    p->inner = inner;
}

/* Any set of runs: each output's kept index and each reduced index walk
 * their runs with the runs' strides in the input. */
static void s_plan_general(zf__gpu_reduce_plan_t *p, const int64_t *dims, const bool *red, int g)
{
    int64_t strides[ZF_MAX_RANK], stride = 1;
    for (int k = g - 1; k >= 0; k--) {
        strides[k] = stride;
        stride *= dims[k];
    }
    p->kind = ZF__GPU_REDUCE_GENERAL;
    for (int k = 0; k < g; k++) {
        if (red[k]) {
            p->rdims[p->nr] = dims[k];
            p->rstrides[p->nr++] = strides[k];
        } else {
            p->kdims[p->nk] = dims[k];
            p->kstrides[p->nk++] = strides[k];
        }
    }
}

void zf__gpu_reduce_plan(const zf_shape_t *shape, const bool *reduced, zf__gpu_reduce_plan_t *plan,
                         int64_t *count)
{
    /* Dims of 1 drop out and neighbours of the same kind merge, leaving
     * alternating runs of kept and reduced dims. */
    int64_t dims[ZF_MAX_RANK];
    bool red[ZF_MAX_RANK];
    int g = 0;
    *count = 1;
    memset(plan, 0, sizeof *plan);
    for (int k = 0; k < shape->rank; k++) {
        int64_t d = shape->dims[k];
        if (reduced[k]) *count *= d;
        if (d == 1) continue;
        if (g > 0 && red[g - 1] == reduced[k]) {
            dims[g - 1] *= d;
            continue;
        }
        dims[g] = d;
        red[g++] = reduced[k];
    }
    if (g == 1 && red[0])
        s_plan(plan, ZF__GPU_REDUCE_ROWS, 1, dims[0], 1);
    else if (g == 2 && red[1])
        s_plan(plan, ZF__GPU_REDUCE_ROWS, dims[0], dims[1], 1);
    else if (g == 2 && red[0])
        s_plan(plan, ZF__GPU_REDUCE_MIDDLE, 1, dims[0], dims[1]);
    else if (g == 3 && red[1])
        s_plan(plan, ZF__GPU_REDUCE_MIDDLE, dims[0], dims[1], dims[2]);
    else
        s_plan_general(plan, dims, red, g);
}

/* The reduced axes of input 0 from input 1 (host memory; negative values
 * count from the end, duplicates are an error as in TensorFlow). */
static zf_status_t s_reduce_axes(zf_kernel_ctx_t *ctx, bool *reduced)
{
    int rank = zf_tensor_shape(ctx->inputs[0])->rank;
    if (zf_tensor_memory_kind(ctx->inputs[1]) == ZF_MEMORY_DEVICE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "reduction_indices must be in host memory");
    int64_t axes[4 * ZF_MAX_RANK];
    int n = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, 1, "reduction_indices", axes, 4 * ZF_MAX_RANK, &n));
    memset(reduced, 0, ZF_MAX_RANK * sizeof *reduced);
    for (int i = 0; i < n; i++) {
        int k = 0;
        if (!zf_kernels_axis(axes[i], rank, &k))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Invalid reduction dimension (%lld for input with %d "
                                   "dimension(s)",
                                   (long long)axes[i], rank);
        if (reduced[k])
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Invalid reduction arguments: Axes contains duplicate "
                                   "dimension: %d",
                                   k);
        reduced[k] = true;
    }
    return ZF_STATUS_OK;
}

static zf_shape_t s_reduced_shape(const zf_shape_t *in, const bool *reduced, bool keep_dims)
{
    zf_shape_t out = {.rank = 0};
    for (int k = 0; k < in->rank; k++) {
        if (!reduced[k])
            out.dims[out.rank++] = in->dims[k];
        else if (keep_dims)
            out.dims[out.rank++] = 1;
    }
    return out;
}

/* What an empty reduction gives. */
static double s_identity(zf__gpu_reduce_op_t op)
{
    switch (op) {
    case ZF__GPU_REDUCE_SUM: return 0.0;
    case ZF__GPU_REDUCE_MEAN: return NAN; /* 0 / 0 */
    case ZF__GPU_REDUCE_MAX: return -INFINITY;
    case ZF__GPU_REDUCE_MIN: return INFINITY;
    case ZF__GPU_REDUCE_PROD: return 1.0;
    case ZF__GPU_REDUCE_ALL: return 1.0;
    case ZF__GPU_REDUCE_ANY: return 0.0;
    }
    return 0.0;
}

static zf_status_t s_reduce_launch(zf_kernel_ctx_t *ctx, zf__gpu_t *g, zf__gpu_reduce_op_t op,
                                   const bool *reduced, zf_tensor_t *out)
{
    const zf_tensor_t *in = ctx->inputs[0];
    zf_dtype_t dtype = zf_tensor_dtype(in);
    zf__gpu_reduce_plan_t plan;
    int64_t count = 0;
    zf__gpu_reduce_plan(zf_tensor_shape(in), reduced, &plan, &count);
    if (count == 0)
        return zf__gpu_kernel_launched(
            ctx, zf__gpu_launch_fill_scalar(g->stream, dtype, s_identity(op), zf_tensor_data(out),
                                            zf_tensor_num_elements(out)));
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    if (count == 1) /* nothing to combine: the values themselves */
        return zf__gpu_kernel_launched(ctx, cudaMemcpyAsync(zf_tensor_data(out), zf_tensor_data(in),
                                                            zf_tensor_nbytes(out),
                                                            cudaMemcpyDeviceToDevice, g->stream));
    zf_buffer_t *scratch = NULL;
    ZF_TRY(zf__gpu_kernel_scratch(ctx, g, zf__gpu_reduce_scratch_bytes(&plan, dtype), &scratch));
    cudaError_t err =
        zf__gpu_launch_reduce(g->stream, op, dtype, zf_tensor_data(in), zf_tensor_data(out), &plan,
                              count, scratch ? zf_buffer_data(scratch) : NULL);
    /* The scratch block may be reused at once: later users queue behind
     * this kernel on the same stream. */
    zf_buffer_unref(&scratch);
    return zf__gpu_kernel_launched(ctx, err);
}

/* Output 0, of shape, reduces input 0 over the dims with reduced[k] set. */
static zf_status_t s_reduce_into(zf_kernel_ctx_t *ctx, zf__gpu_reduce_op_t op, const bool *reduced,
                                 const zf_shape_t *shape)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(ctx->inputs[0]), shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    return s_reduce_launch(ctx, g, op, reduced, out);
}

static zf_status_t s_reduce(zf_kernel_ctx_t *ctx, zf__gpu_reduce_op_t op)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tensor_t *in = ctx->inputs[0];
    zf_dtype_t dtype = zf_tensor_dtype(in);
    bool logic = op == ZF__GPU_REDUCE_ALL || op == ZF__GPU_REDUCE_ANY;
    if (logic ? dtype != ZF_BOOL : !(ZF_TYPES_GPU_FLOAT & ZF_TYPE_BIT(dtype)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)dtype));
    bool reduced[ZF_MAX_RANK], keep_dims = false;
    ZF_TRY(s_reduce_axes(ctx, reduced));
    ZF_TRY(zf_node_attr_bool_or(ctx->node, "keep_dims", false, &keep_dims));
    zf_shape_t shape = s_reduced_shape(zf_tensor_shape(in), reduced, keep_dims);
    return s_reduce_into(ctx, op, reduced, &shape);
}

static zf_status_t s_sum(zf_kernel_ctx_t *ctx)
{
    return s_reduce(ctx, ZF__GPU_REDUCE_SUM);
}

static zf_status_t s_mean(zf_kernel_ctx_t *ctx)
{
    return s_reduce(ctx, ZF__GPU_REDUCE_MEAN);
}

static zf_status_t s_max(zf_kernel_ctx_t *ctx)
{
    return s_reduce(ctx, ZF__GPU_REDUCE_MAX);
}

static zf_status_t s_min(zf_kernel_ctx_t *ctx)
{
    return s_reduce(ctx, ZF__GPU_REDUCE_MIN);
}

static zf_status_t s_prod(zf_kernel_ctx_t *ctx)
{
    return s_reduce(ctx, ZF__GPU_REDUCE_PROD);
}

static zf_status_t s_all(zf_kernel_ctx_t *ctx)
{
    return s_reduce(ctx, ZF__GPU_REDUCE_ALL);
}

static zf_status_t s_any(zf_kernel_ctx_t *ctx)
{
    return s_reduce(ctx, ZF__GPU_REDUCE_ANY);
}

/* BiasAddGrad: a Sum over every dim but the channel one (the CPU kernel's
 * layout and checks). */
static zf_status_t s_bias_add_grad(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *in = ctx->inputs[0];
    zf_dtype_t dtype = zf_tensor_dtype(in);
    if (!(ZF_TYPES_GPU_FLOAT & ZF_TYPE_BIT(dtype)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)dtype));
    int cdim = 0;
    ZF_TRY(zf__kernels_bias_grad_channel_dim(ctx, &cdim));
    const zf_shape_t *s = zf_tensor_shape(in);
    bool reduced[ZF_MAX_RANK];
    for (int k = 0; k < s->rank; k++) reduced[k] = k != cdim;
    zf_shape_t shape = ZF_SHAPE(s->dims[cdim]);
    return s_reduce_into(ctx, ZF__GPU_REDUCE_SUM, reduced, &shape);
}

/* ---- ArgMax, ArgMin --------------------------------------------------------------- */

/* The output type (attr output_type, int32 or int64), checked when the
 * partition is built, kept in the state pointer. */
static zf_status_t s_arg_create(const Tensorflow__NodeDef *node, void **state)
{
    zf_dtype_t out_type = ZF_INT64;
    ZF_TRY(zf_node_attr_type_or(node, "output_type", ZF_INT64, &out_type));
    if (out_type != ZF_INT32 && out_type != ZF_INT64)
        return zf_invalid_argument("%s (%s): output_type must be int32 or int64, got %s",
                                   node->name, node->op, zf_kernels_dtype_name((int)out_type));
    *state = (void *)(uintptr_t)out_type;
    return ZF_STATUS_OK;
}

static zf_status_t s_arg(zf_kernel_ctx_t *ctx, bool is_min)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *in = zf_tensor_shape(x);
    zf_dtype_t dtype = zf_tensor_dtype(x), out_type = (zf_dtype_t)(uintptr_t)ctx->state;
    if (!(ZF_TYPES_GPU_FLOAT & ZF_TYPE_BIT(dtype)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)dtype));
    if (zf_tensor_memory_kind(ctx->inputs[1]) == ZF_MEMORY_DEVICE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "dimension must be in host memory");
    int axis = 0;
    zf_shape_t shape;
    int64_t outer = 1, inner = 1;
    ZF_TRY(zf_kernels_arg_axis(ctx, &axis, &shape, &outer, &inner));
    zf__gpu_t *g = NULL;
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, out_type, &shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    return zf__gpu_kernel_launched(ctx, zf__gpu_launch_arg(g->stream, dtype, zf_tensor_data(x),
                                                           outer, in->dims[axis], inner, out_type,
                                                           zf_tensor_data(out), is_min));
}

static zf_status_t s_arg_max(zf_kernel_ctx_t *ctx)
{
    return s_arg(ctx, false);
}

static zf_status_t s_arg_min(zf_kernel_ctx_t *ctx)
{
    return s_arg(ctx, true);
}

/* ---- Softmax ------------------------------------------------------------------------ */

static zf_status_t s_softmax_run(zf_kernel_ctx_t *ctx, bool log_softmax)
{
    zf__gpu_t *g = NULL;
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    ZF_TRY(zf__gpu_kernel_gpu(ctx, &g));
    const zf_tensor_t *in = ctx->inputs[0];
    zf_dtype_t dtype = zf_tensor_dtype(in);
    const zf_shape_t *shape = zf_tensor_shape(in);
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (!(ZF_TYPES_GPU_FLOAT & ZF_TYPE_BIT(dtype)))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no GPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)dtype));
    if (shape->rank < 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "logits must have >= 1 dimension, got %s",
                               zf_kernels_shape_str(in, sbuf));
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, dtype, shape, &out));
    int64_t n = zf_tensor_num_elements(in), cols = shape->dims[shape->rank - 1];
    if (n == 0) return ZF_STATUS_OK;
    ZF_TRY(zf__gpu_check_device_input(ctx, 0));
    return zf__gpu_kernel_launched(ctx, zf__gpu_launch_softmax(g->stream, dtype, zf_tensor_data(in),
                                                               zf_tensor_data(out), n / cols, cols,
                                                               log_softmax));
}

static zf_status_t s_softmax(zf_kernel_ctx_t *ctx)
{
    return s_softmax_run(ctx, false);
}

static zf_status_t s_log_softmax(zf_kernel_ctx_t *ctx)
{
    return s_softmax_run(ctx, true);
}

/* ---- registration ---------------------------------------------------------------------- */

#define S_REDUCE(op_, compute_)                                                                    \
    {                                                                                              \
        .op = (op_), .device_type = "GPU", .allowed_types = ZF_TYPES_GPU_FLOAT,                    \
        .compute = (compute_)                                                                      \
    }

static const zf_kernel_t s_defs[] = {
    ZF__GPU_KERNEL("MatMul", ZF_TYPES_GPU_FLOAT, s_matmul),
    {.op = "Conv2D",
     .device_type = "GPU",
     .allowed_types = ZF_TYPES_FLOAT,
     .create = zf__kernels_conv2d_create,
     .destroy = zf__kernels_window_destroy,
     .compute = s_conv2d},
    S_REDUCE("Sum", s_sum),
    {.op = "BiasAddGrad",
     .device_type = "GPU",
     .allowed_types = ZF_TYPES_GPU_FLOAT,
     .create = zf__kernels_bias_create,
     .destroy = free,
     .compute = s_bias_add_grad},
    S_REDUCE("Mean", s_mean),
    S_REDUCE("Max", s_max),
    S_REDUCE("Min", s_min),
    S_REDUCE("Prod", s_prod),
    ZF__GPU_KERNEL("All", 0, s_all),
    ZF__GPU_KERNEL("Any", 0, s_any),
    {.op = "ArgMax",
     .device_type = "GPU",
     .allowed_types = ZF_TYPES_GPU_FLOAT,
     .create = s_arg_create,
     .compute = s_arg_max},
    {.op = "ArgMin",
     .device_type = "GPU",
     .allowed_types = ZF_TYPES_GPU_FLOAT,
     .create = s_arg_create,
     .compute = s_arg_min},
    ZF__GPU_KERNEL("Softmax", ZF_TYPES_GPU_FLOAT, s_softmax),
    ZF__GPU_KERNEL("LogSoftmax", ZF_TYPES_GPU_FLOAT, s_log_softmax),
};

zf_status_t zf__gpu_register_nn(void)
{
    return zf__gpu_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
