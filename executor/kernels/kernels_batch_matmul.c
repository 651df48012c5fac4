/* CPU BatchMatMul, BatchMatMulV2 and BatchMatMulV3 (FLOAT and DOUBLE,
 * adj_x/adj_y) through OpenBLAS: one GEMM per output matrix.
 *
 * BatchMatMul needs equal batch dimensions; V2 and V3 broadcast them as
 * NumPy does (a missing or size-1 dimension repeats). V3 names its types
 * Ta, Tb and Tout, which must agree here (no mixed-type products). As with
 * MatMul, OpenBLAS threads each GEMM itself, so the batch is not split over
 * the device pool. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

typedef struct {
    bool adj_x, adj_y;
    bool broadcast; /* V2, V3 */
} s_bmm_t;

static zf_status_t s_bmm_create(const Tensorflow__NodeDef *node, void **state)
{
    s_bmm_t st = {false, false, strcmp(node->op, "BatchMatMul") != 0};
    ZF_TRY(zf_node_attr_bool_or(node, "adj_x", false, &st.adj_x));
    ZF_TRY(zf_node_attr_bool_or(node, "adj_y", false, &st.adj_y));
    if (strcmp(node->op, "BatchMatMulV3") == 0) {
        zf_dtype_t ta, tb, tout;
        ZF_TRY(zf_node_attr_type(node, "Ta", &ta));
        ZF_TRY(zf_node_attr_type(node, "Tb", &tb));
        ZF_TRY(zf_node_attr_type(node, "Tout", &tout));
        if (ta != tb || ta != tout)
            return zf_unimplemented("%s (%s): Ta, Tb and Tout must be the same type on CPU, got "
                                    "%s, %s and %s",
                                    node->name, node->op, zf_kernels_dtype_name((int)ta),
                                    zf_kernels_dtype_name((int)tb),
                                    zf_kernels_dtype_name((int)tout));
    }
    s_bmm_t *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("BatchMatMul kernel");
    *p = st;
    *state = p;
    return ZF_STATUS_OK;
}

/* The batch part (all but the last two dims) of s. */
static zf_shape_t s_batch_dims(const zf_shape_t *s)
{
    zf_shape_t b = {.rank = s->rank - 2};
    for (int i = 0; i < b.rank; i++) b.dims[i] = s->dims[i];
    return b;
}

/* The offset, in matrices, of output batch index b within an operand of
 * batch shape in broadcast to out (dims aligned from the right). */
static int64_t s_operand_batch(const zf_shape_t *in, const zf_shape_t *out, int64_t b)
{
    int64_t index = 0, stride = 1;
    for (int i = out->rank - 1, j = in->rank - 1; i >= 0; i--, j--) {
        int64_t coord = b % out->dims[i];
        b /= out->dims[i];
        if (j < 0) continue;
        if (in->dims[j] != 1) index += coord * stride;
        stride *= in->dims[j];
    }
    return index;
}

static zf_status_t s_bmm_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const s_bmm_t *st = ctx->state;
    const zf_tensor_t *x = ctx->inputs[0], *y = ctx->inputs[1];
    zf_dtype_t dtype = zf_tensor_dtype(x);
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, dtype));
    if (dtype != ZF_FLOAT && dtype != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)dtype));
    const zf_shape_t *xs = zf_tensor_shape(x), *ys = zf_tensor_shape(y);
    char sa[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
    zf_kernels_shape_str(x, sa);
    zf_kernels_shape_str(y, sb);
    if (xs->rank < 2 || ys->rank < 2)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "In[0] and In[1] must have rank at least 2: %s vs. %s", sa, sb);
    zf_shape_t xb = s_batch_dims(xs), yb = s_batch_dims(ys), ob;
    bool same = zf_shape_equal(&xb, &yb);
    if (!st->broadcast && !same)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "In[0] and In[1] must have the same batch dimensions: %s vs. %s", sa,
                               sb);
    if (!zf_kernels_broadcast_shape(&xb, &yb, &ob))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "In[0] and In[1] must have compatible batch dimensions: %s vs. %s",
                               sa, sb);
    int64_t xr = xs->dims[xs->rank - 2], xc = xs->dims[xs->rank - 1];
    int64_t yr = ys->dims[ys->rank - 2], yc = ys->dims[ys->rank - 1];
    int64_t m = st->adj_x ? xc : xr, k = st->adj_x ? xr : xc;
    int64_t ky = st->adj_y ? yc : yr, n = st->adj_y ? yr : yc;
    if (k != ky)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Matrix size-incompatible: In[0]: %s, In[1]: %s", sa, sb);
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || xc > INT32_MAX || yc > INT32_MAX)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED,
                               "matrices %s and %s are too large for one BLAS call", sa, sb);
    zf_shape_t os = ob;
    os.rank = ob.rank + 2;
    os.dims[ob.rank] = m;
    os.dims[ob.rank + 1] = n;
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, dtype, &os, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    if (k == 0) { /* empty sums: zeros */
        memset(zf_tensor_data(out), 0, zf_tensor_nbytes(out));
        return ZF_STATUS_OK;
    }
    int64_t batches = zf_tensor_num_elements(out) / (m * n);
    size_t elem = zf_dtype_size(dtype);
    const char *xd = zf_tensor_data(x), *yd = zf_tensor_data(y);
    char *od = zf_tensor_data(out);
    enum CBLAS_TRANSPOSE ta = st->adj_x ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = st->adj_y ? CblasTrans : CblasNoTrans;
    for (int64_t b = 0; b < batches; b++) {
        int64_t bx = same ? b : s_operand_batch(&xb, &ob, b);
        int64_t by = same ? b : s_operand_batch(&yb, &ob, b);
        const void *a = xd + (size_t)(bx * xr * xc) * elem;
        const void *bm = yd + (size_t)(by * yr * yc) * elem;
        void *c = od + (size_t)(b * m * n) * elem;
        if (dtype == ZF_FLOAT)
            cblas_sgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, 1.0f, a,
                        (blasint)xc, bm, (blasint)yc, 0.0f, c, (blasint)n);
        else
            cblas_dgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, 1.0, a,
                        (blasint)xc, bm, (blasint)yc, 0.0, c, (blasint)n);
    }
    return ZF_STATUS_OK;
}

#define S_KERNEL(op_)                                                                              \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = ZF_TYPES_FLOAT,                        \
        .flags = ZF_KERNEL_EXPENSIVE, .create = s_bmm_create, .destroy = free,                     \
        .compute = s_bmm_compute                                                                   \
    }

static const zf_kernel_t s_defs[] = {
    S_KERNEL("BatchMatMul"),
    S_KERNEL("BatchMatMulV2"),
    S_KERNEL("BatchMatMulV3"),
};

zf_status_t zf__kernels_register_batch_matmul(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
