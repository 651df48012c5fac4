/* CPU MatMul (FLOAT and DOUBLE, transpose_a/transpose_b) through OpenBLAS.
 *
 * OpenBLAS runs its own worker threads inside one GEMM call, so MatMul
 * does not split work over the device pool: doing both would oversubscribe
 * the cores. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

typedef struct {
    bool transpose_a, transpose_b;
} s_matmul_t;

static zf_status_t s_matmul_create(const Tensorflow__NodeDef *node, void **state)
{
    s_matmul_t st = {false, false};
    ZF_TRY(zf_node_attr_bool_or(node, "transpose_a", false, &st.transpose_a));
    ZF_TRY(zf_node_attr_bool_or(node, "transpose_b", false, &st.transpose_b));
    s_matmul_t *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("MatMul kernel");
    *p = st;
    *state = p;
    return ZF_STATUS_OK;
}

static zf_status_t s_check_matrix(const zf_kernel_ctx_t *ctx, int i)
{
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(ctx->inputs[i])->rank == 2) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                           "In[%d] is not a matrix. Instead it has shape %s", i,
                           zf_kernels_shape_str(ctx->inputs[i], sbuf));
}

/* C[m,n] = op(A) op(B) with row-major A, B and C. */
static void s_gemm(zf_dtype_t dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   const void *a, int64_t lda, const void *b, int64_t ldb, void *c)
{
    enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
    if (dtype == ZF_FLOAT)
        cblas_sgemm(CblasRowMajor, opa, opb, (blasint)m, (blasint)n, (blasint)k, 1.0f, a,
                    (blasint)lda, b, (blasint)ldb, 0.0f, c, (blasint)n);
    else
        cblas_dgemm(CblasRowMajor, opa, opb, (blasint)m, (blasint)n, (blasint)k, 1.0, a,
                    (blasint)lda, b, (blasint)ldb, 0.0, c, (blasint)n);
}

static zf_status_t s_matmul_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const s_matmul_t *st = ctx->state;
    const zf_tensor_t *a = ctx->inputs[0], *b = ctx->inputs[1];
    zf_dtype_t dtype = zf_tensor_dtype(a);
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, dtype));
    if (dtype != ZF_FLOAT && dtype != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)dtype));
    ZF_TRY(s_check_matrix(ctx, 0));
    ZF_TRY(s_check_matrix(ctx, 1));
    const int64_t *da = zf_tensor_shape(a)->dims, *db = zf_tensor_shape(b)->dims;
    int64_t m = da[st->transpose_a ? 1 : 0], k = da[st->transpose_a ? 0 : 1];
    int64_t kb = db[st->transpose_b ? 1 : 0], n = db[st->transpose_b ? 0 : 1];
    char sa[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
    if (k != kb)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Matrix size-incompatible: In[0]: %s, In[1]: %s",
                               zf_kernels_shape_str(a, sa), zf_kernels_shape_str(b, sb));
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || da[1] > INT32_MAX || db[1] > INT32_MAX)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED,
                               "matrices %s and %s are too large for one BLAS call",
                               zf_kernels_shape_str(a, sa), zf_kernels_shape_str(b, sb));
    zf_shape_t shape = {.rank = 2, .dims = {m, n}};
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, dtype, &shape, &out));
    if (m == 0 || n == 0) return ZF_STATUS_OK;
    if (k == 0) { /* an empty sum: zeros (BLAS wants leading dims >= 1) */
        memset(zf_tensor_data(out), 0, zf_tensor_nbytes(out));
        return ZF_STATUS_OK;
    }
    s_gemm(dtype, st->transpose_a, st->transpose_b, m, n, k, zf_tensor_data(a), da[1],
           zf_tensor_data(b), db[1], zf_tensor_data(out));
    return ZF_STATUS_OK;
}

static const zf_kernel_t s_defs[] = {
    {.op = "MatMul",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_FLOAT,
     .flags = ZF_KERNEL_EXPENSIVE,
     .create = s_matmul_create,
     .destroy = free,
     .compute = s_matmul_compute},
};

zf_status_t zf__kernels_register_matmul(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
