/* Helpers shared by the CPU kernels: dtype names and attrs, index inputs,
 * broadcasting, axes and the parallel and unary loop drivers. */
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"
#include "common/thread_pool.h"

zf_status_t zf__kernels_register_defs(const zf_kernel_t *defs, int n)
{
    for (int i = 0; i < n; i++) ZF_TRY(zf_kernel_register(&defs[i]));
    return ZF_STATUS_OK;
}

/* ---- dtypes and attrs --------------------------------------------------- */

static const char *const s_tf_names[] = {
    [ZF_FLOAT] = "float",     [ZF_DOUBLE] = "double",       [ZF_INT32] = "int32",
    [ZF_UINT8] = "uint8",     [ZF_INT16] = "int16",         [ZF_INT8] = "int8",
    [ZF_STRING] = "string",   [ZF_COMPLEX64] = "complex64", [ZF_INT64] = "int64",
    [ZF_BOOL] = "bool",       [ZF_QINT8] = "qint8",         [ZF_QUINT8] = "quint8",
    [ZF_QINT32] = "qint32",   [ZF_BFLOAT16] = "bfloat16",   [ZF_QINT16] = "qint16",
    [ZF_QUINT16] = "quint16", [ZF_UINT16] = "uint16",       [ZF_COMPLEX128] = "complex128",
    [ZF_HALF] = "half",       [ZF_RESOURCE] = "resource",   [ZF_VARIANT] = "variant",
    [ZF_UINT32] = "uint32",   [ZF_UINT64] = "uint64",
};

const char *zf_kernels_dtype_name(int dtype)
{
    int base = (int)zf_dtype_base(dtype);
    if (base <= 0 || base > ZF_DTYPE_MAX || !s_tf_names[base]) return "invalid";
    return s_tf_names[base];
}

zf_status_t zf_kernels_attr_dtype(const Tensorflow__NodeDef *node, const char *key,
                                  uint64_t allowed, zf_dtype_t *out)
{
    zf_dtype_t t = ZF_INVALID;
    ZF_TRY(zf_node_attr_type(node, key, &t));
    t = zf_dtype_base((int)t);
    if (allowed && !(allowed & ZF_TYPE_BIT(t)))
        return zf_unimplemented("%s (%s): no CPU kernel for %s=%s", node->name, node->op, key,
                                zf_kernels_dtype_name((int)t));
    *out = t;
    return ZF_STATUS_OK;
}

zf_status_t zf_kernels_attr_padding(const Tensorflow__NodeDef *node, bool *same)
{
    const uint8_t *p = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string(node, "padding", &p, &len));
    if (len == 4 && memcmp(p, "SAME", 4) == 0) {
        *same = true;
    } else if (len == 5 && memcmp(p, "VALID", 5) == 0) {
        *same = false;
    } else if (len == 8 && memcmp(p, "EXPLICIT", 8) == 0) {
        return zf_unimplemented("%s (%s): EXPLICIT padding is not supported", node->name, node->op);
    } else {
        return zf_invalid_argument("%s (%s): padding must be SAME or VALID, got '%.*s'", node->name,
                                   node->op, (int)(len > 32 ? 32 : len), (const char *)p);
    }
    return ZF_STATUS_OK;
}

zf_status_t zf_kernels_check_inputs(const zf_kernel_ctx_t *ctx, int n)
{
    if (ctx->num_inputs >= n) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "expects %d inputs, got %d", n,
                           ctx->num_inputs);
}

zf_status_t zf_kernels_check_dtype(const zf_kernel_ctx_t *ctx, int i, zf_dtype_t want)
{
    zf_dtype_t got = zf_tensor_dtype(ctx->inputs[i]);
    if (got == want) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "input %d must be %s, got %s", i,
                           zf_kernels_dtype_name((int)want), zf_kernels_dtype_name((int)got));
}

/* Index inputs are INT32 or INT64 scalars or vectors. */
static zf_status_t s_check_index_input(const zf_kernel_ctx_t *ctx, int i, const char *what)
{
    const zf_tensor_t *t = ctx->inputs[i];
    zf_dtype_t dt = zf_tensor_dtype(t);
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (dt != ZF_INT32 && dt != ZF_INT64)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be int32 or int64, got %s", what,
                               zf_kernels_dtype_name((int)dt));
    if (zf_tensor_shape(t)->rank > 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be a scalar or a vector, got %s",
                               what, zf_kernels_shape_str(t, sbuf));
    return ZF_STATUS_OK;
}

static int64_t s_index_at(const zf_tensor_t *t, int64_t k)
{
    const void *data = zf_tensor_data(t);
    return zf_tensor_dtype(t) == ZF_INT32 ? ((const int32_t *)data)[k] : ((const int64_t *)data)[k];
}

zf_status_t zf_kernels_input_ints(const zf_kernel_ctx_t *ctx, int i, const char *what,
                                  int64_t *vals, int max, int *n)
{
    *n = 0;
    ZF_TRY(s_check_index_input(ctx, i, what));
    const zf_tensor_t *t = ctx->inputs[i];
    int64_t count = zf_tensor_num_elements(t);
    if (count > max)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s has %lld values; at most %d allowed",
                               what, (long long)count, max);
    for (int64_t k = 0; k < count; k++) vals[k] = s_index_at(t, k);
    *n = (int)count;
    return ZF_STATUS_OK;
}

zf_status_t zf_kernels_input_int(const zf_kernel_ctx_t *ctx, int i, const char *what, int64_t *val)
{
    *val = 0;
    ZF_TRY(s_check_index_input(ctx, i, what));
    const zf_tensor_t *t = ctx->inputs[i];
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_num_elements(t) != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be a scalar, got shape %s", what,
                               zf_kernels_shape_str(t, sbuf));
    *val = s_index_at(t, 0);
    return ZF_STATUS_OK;
}

/* ---- shapes -------------------------------------------------------------- */

bool zf_kernels_broadcast_shape(const zf_shape_t *a, const zf_shape_t *b, zf_shape_t *out)
{
    int rank = a->rank > b->rank ? a->rank : b->rank;
    zf_shape_t r = {.rank = rank};
    for (int k = 0; k < rank; k++) {
        int ia = a->rank - rank + k, ib = b->rank - rank + k;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        r.dims[k] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

bool zf_kernels_axis(int64_t axis, int rank, int *out)
{
    if (axis < -(int64_t)rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

const char *zf_kernels_shape_str(const zf_tensor_t *t, char *buf)
{
    return zf_shape_to_string(zf_tensor_shape(t), buf, ZF_SHAPE_STRING_MAX);
}

/* ---- loops --------------------------------------------------------------- */

void zf_kernels_parallel_for(const zf_kernel_ctx_t *ctx, int64_t n, int64_t min_chunk,
                             void (*fn)(void *arg, int64_t begin, int64_t end), void *arg)
{
    zf_thread_pool_t *pool = ctx->device ? ctx->device->pool : NULL;
    if (!pool || n <= min_chunk) {
        if (n > 0) fn(arg, 0, n);
        return;
    }
    zf_thread_pool_parallel_for(pool, n, min_chunk, fn, arg);
}

typedef struct {
    zf_kernels_unary_fn fn;
    const char *in;
    char *out;
    size_t elem;
} s_unary_job_t;

static void s_unary_chunk(void *arg, int64_t begin, int64_t end)
{
    const s_unary_job_t *job = arg;
    job->fn(job->in + (size_t)begin * job->elem, job->out + (size_t)begin * job->elem, end - begin);
}

zf_status_t zf_kernels_run_unary(zf_kernel_ctx_t *ctx, zf_kernels_unary_fn fn)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *in = ctx->inputs[0];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(in), zf_tensor_shape(in), &out));
    s_unary_job_t job = {fn, zf_tensor_data(in), zf_tensor_data(out),
                         zf_dtype_size(zf_tensor_dtype(in))};
    zf_kernels_parallel_for(ctx, zf_tensor_num_elements(in), ZF_KERNELS_PARALLEL_MIN, s_unary_chunk,
                            &job);
    return ZF_STATUS_OK;
}
