/* Index remapping: gather and scatter through per-dim index maps. */
#include "executor/kernels/remap.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

zf_status_t zf_remap_init(zf_remap_t *r, const zf_shape_t *dims)
{
    memset(r, 0, sizeof *r);
    r->rank = dims->rank > 0 ? dims->rank : 1;
    int64_t total = 0;
    for (int k = 0; k < r->rank; k++) {
        r->dims[k] = dims->rank > 0 ? dims->dims[k] : 1;
        total += r->dims[k];
    }
    r->block = calloc((size_t)total, sizeof *r->block);
    if (!r->block) return zf_out_of_memory("index map");
    int64_t *p = r->block;
    for (int k = 0; k < r->rank; k++) {
        r->idx[k] = p;
        p += r->dims[k];
    }
    return ZF_STATUS_OK;
}

void zf_remap_free(zf_remap_t *r)
{
    free(r->block);
    memset(r, 0, sizeof *r);
}

/* A run of the plan: idx arrays turned into byte offsets (or -1). */
typedef struct {
    const zf_remap_t *r;
    const char *src;
    char *dst;
    size_t elem;
    const void *fill;
    bool scatter;
    bool contiguous; /* the last dim maps to consecutive elements */
} s_run_t;

/* Converts indices to byte offsets in the tensor of dims, in place. */
static bool s_to_offsets(zf_remap_t *r, const int64_t *dims, size_t elem)
{
    int64_t stride = (int64_t)elem;
    for (int k = r->rank - 1; k >= 0; k--) {
        for (int64_t j = 0; j < r->dims[k]; j++)
            if (r->idx[k][j] != ZF_REMAP_FILL) r->idx[k][j] *= stride;
        stride *= dims[k];
    }
    int last = r->rank - 1;
    const int64_t *o = r->idx[last];
    for (int64_t j = 0; j < r->dims[last]; j++)
        if (o[j] == ZF_REMAP_FILL || o[j] != o[0] + j * (int64_t)elem) return false;
    return true;
}

static void s_copy_row(const s_run_t *run, int64_t base, char *dense)
{
    const zf_remap_t *r = run->r;
    int last = r->rank - 1;
    int64_t n = r->dims[last];
    const int64_t *o = r->idx[last];
    size_t elem = run->elem;
    if (base < 0) { /* some outer dim is filled */
        for (int64_t j = 0; j < n; j++) memcpy(dense + (size_t)j * elem, run->fill, elem);
        return;
    }
    if (run->contiguous) {
        if (run->scatter)
            memcpy(run->dst + base + o[0], dense, (size_t)n * elem);
        else
            memcpy(dense, run->src + base + o[0], (size_t)n * elem);
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        char *d = dense + (size_t)j * elem;
        if (o[j] == ZF_REMAP_FILL)
            memcpy(d, run->fill, elem);
        else if (run->scatter)
            memcpy(run->dst + base + o[j], d, elem);
        else
            memcpy(d, run->src + base + o[j], elem);
    }
}

static void s_rows(void *arg, int64_t begin, int64_t end)
{
    const s_run_t *run = arg;
    const zf_remap_t *r = run->r;
    int last = r->rank - 1;
    int64_t idx[ZF_MAX_RANK] = {0}, row = begin;
    for (int k = last - 1; k >= 0; k--) {
        idx[k] = row % r->dims[k];
        row /= r->dims[k];
    }
    size_t row_bytes = (size_t)r->dims[last] * run->elem;
    for (int64_t i = begin; i < end; i++) {
        int64_t base = 0;
        for (int k = 0; k < last && base >= 0; k++) {
            int64_t o = r->idx[k][idx[k]];
            base = o == ZF_REMAP_FILL ? -1 : base + o;
        }
        char *dense = (run->scatter ? (char *)run->src : run->dst) + (size_t)i * row_bytes;
        s_copy_row(run, base, dense);
        for (int k = last - 1; k >= 0; k--) {
            if (++idx[k] < r->dims[k]) break;
            idx[k] = 0;
        }
    }
}

static void s_run(const zf_kernel_ctx_t *ctx, zf_remap_t *r, const int64_t *dims, s_run_t *run)
{
    int64_t one = 1;
    run->contiguous = s_to_offsets(r, dims ? dims : &one, run->elem);
    int64_t inner = r->dims[r->rank - 1], rows = 1;
    for (int k = 0; k < r->rank - 1; k++) rows *= r->dims[k];
    if (inner == 0 || rows == 0) return;
    zf_kernels_parallel_for(ctx, rows, ZF_KERNELS_PARALLEL_MIN / inner + 1, s_rows, run);
}

bool zf_remap_on_device(const zf_kernel_ctx_t *ctx)
{
    return ctx->device && ctx->device->ops->remap_gather && ctx->device->ops->strided_gather;
}

zf_status_t zf_remap_gather(const zf_kernel_ctx_t *ctx, zf_remap_t *r, const int64_t *src_dims,
                            const void *src, void *dst, size_t elem, const void *fill)
{
    static const char zero[16];
    assert(elem <= sizeof zero);
    if (zf_remap_on_device(ctx)) {
        zf_status_t s =
            ctx->device->ops->remap_gather(ctx->device, r, src_dims, src, dst, elem, fill);
        return zf_ok(s) ? s : zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
    }
    s_run_t run = {.r = r, .src = src, .dst = dst, .elem = elem, .fill = fill ? fill : zero};
    s_run(ctx, r, src_dims, &run);
    return ZF_STATUS_OK;
}

zf_status_t zf_remap_strided_gather(const zf_kernel_ctx_t *ctx, int rank, const int64_t *dims,
                                    const int64_t *strides, const void *src, void *dst, size_t elem)
{
    zf_status_t s =
        ctx->device->ops->strided_gather(ctx->device, rank, dims, strides, src, dst, elem);
    return zf_ok(s) ? s : zf_status_prefix(s, "%s (%s)", ctx->node->name, ctx->node->op);
}

void zf_remap_scatter(const zf_kernel_ctx_t *ctx, zf_remap_t *r, const int64_t *dst_dims,
                      const void *src, void *dst, size_t elem)
{
    s_run_t run = {.r = r, .src = src, .dst = dst, .elem = elem, .scatter = true};
    s_run(ctx, r, dst_dims, &run);
}

int64_t zf_remap_index_at(const zf_tensor_t *t, int64_t k)
{
    const void *d = zf_tensor_data(t);
    return zf_tensor_dtype(t) == ZF_INT32 ? ((const int32_t *)d)[k] : ((const int64_t *)d)[k];
}

const char *zf_remap_index_str(const zf_shape_t *s, int64_t k, char *buf)
{
    int64_t idx[ZF_MAX_RANK];
    for (int d = s->rank - 1; d >= 0; d--) {
        idx[d] = s->dims[d] ? k % s->dims[d] : 0;
        k = s->dims[d] ? k / s->dims[d] : 0;
    }
    zf_shape_t as = {.rank = s->rank};
    memcpy(as.dims, idx, (size_t)s->rank * sizeof *idx);
    if (s->rank == 0) {
        buf[0] = '\0';
        return buf;
    }
    return zf_shape_to_string(&as, buf, ZF_SHAPE_STRING_MAX);
}

zf_status_t zf_remap_check_index_dtype(const zf_kernel_ctx_t *ctx, int i, const char *what)
{
    zf_dtype_t dt = zf_tensor_dtype(ctx->inputs[i]);
    if (dt == ZF_INT32 || dt == ZF_INT64) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be int32 or int64, got %s", what,
                           zf_kernels_dtype_name((int)dt));
}

int64_t zf_remap_prod(const int64_t *dims, int from, int to)
{
    for (int k = from; k < to; k++)
        if (dims[k] == 0) return 0;
    int64_t p = 1;
    for (int k = from; k < to; k++)
        if (__builtin_mul_overflow(p, dims[k], &p)) return INT64_MAX;
    return p;
}

#define S_ADD_LOOP(T)                                                                              \
    for (int64_t i = 0; i < n; i++) ((T *)dst)[i] += ((const T *)src)[i];                          \
    break
#define S_ADD_WRAP(T, U)                                                                           \
    for (int64_t i = 0; i < n; i++)                                                                \
        ((T *)dst)[i] = (T)((U)((T *)dst)[i] + (U)((const T *)src)[i]);                            \
    break

void zf_remap_add(zf_dtype_t dt, void *dst, const void *src, int64_t n)
{
    uint16_t *h = dst;
    const uint16_t *hs = src;
    switch (dt) {
    case ZF_FLOAT: S_ADD_LOOP(float);
    case ZF_DOUBLE: S_ADD_LOOP(double);
    case ZF_COMPLEX64: n *= 2; S_ADD_LOOP(float);
    case ZF_COMPLEX128: n *= 2; S_ADD_LOOP(double);
    case ZF_INT8: S_ADD_WRAP(int8_t, uint8_t);
    case ZF_INT16: S_ADD_WRAP(int16_t, uint16_t);
    case ZF_INT32: S_ADD_WRAP(int32_t, uint32_t);
    case ZF_INT64: S_ADD_WRAP(int64_t, uint64_t);
    case ZF_UINT8: S_ADD_WRAP(uint8_t, uint8_t);
    case ZF_UINT16: S_ADD_WRAP(uint16_t, uint16_t);
    case ZF_UINT32: S_ADD_WRAP(uint32_t, uint32_t);
    case ZF_UINT64: S_ADD_WRAP(uint64_t, uint64_t);
    case ZF_HALF:
        for (int64_t i = 0; i < n; i++)
            h[i] = zf_float_to_half(zf_half_to_float(h[i]) + zf_half_to_float(hs[i]));
        break;
    case ZF_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            h[i] = zf_float_to_bfloat16(zf_bfloat16_to_float(h[i]) + zf_bfloat16_to_float(hs[i]));
        break;
    default: assert(!"zf_remap_add: not a number type");
    }
}

zf_status_t zf_remap_input_shape(const zf_kernel_ctx_t *ctx, int i, const char *what,
                                 zf_shape_t *out)
{
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(ctx->inputs[i])->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be a vector, got shape %s", what,
                               zf_kernels_shape_str(ctx->inputs[i], sbuf));
    int64_t dims[ZF_MAX_RANK];
    int rank = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, i, what, dims, ZF_MAX_RANK, &rank));
    for (int k = 0; k < rank; k++)
        if (dims[k] < 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s[%d] = %lld must be non-negative",
                                   what, k, (long long)dims[k]);
    return zf_shape_make(rank, dims, out);
}

zf_status_t zf_remap_int_attr_state(const Tensorflow__NodeDef *node, const char *key, int64_t def,
                                    void **state)
{
    int64_t *v = malloc(sizeof *v);
    if (!v) return zf_out_of_memory(node->op);
    zf_status_t s = zf_node_attr_int_or(node, key, def, v);
    if (!zf_ok(s)) {
        free(v);
        return s;
    }
    *state = v;
    return ZF_STATUS_OK;
}
