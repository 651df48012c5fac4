/* CPU kernels that locate, rank or accumulate elements in order: Where
 * (coordinates of the true elements), TopKV2 (largest k per row, ties
 * broken by the lower index) and Cumsum (exclusive, reverse). */
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"
#include "executor/kernels/remap.h"

/* ---- Where ------------------------------------------------------------------------------- */

/* Element k of t is not zero (nor -0.0; NaN counts as true). */
static bool s_truthy(zf_dtype_t dt, const void *data, int64_t k)
{
    switch (dt) {
    case ZF_FLOAT: return ((const float *)data)[k] != 0;
    case ZF_DOUBLE: return ((const double *)data)[k] != 0;
    case ZF_COMPLEX64:
        return ((const float *)data)[2 * k] != 0 || ((const float *)data)[2 * k + 1] != 0;
    case ZF_COMPLEX128:
        return ((const double *)data)[2 * k] != 0 || ((const double *)data)[2 * k + 1] != 0;
    case ZF_HALF:
    case ZF_BFLOAT16: return (((const uint16_t *)data)[k] & 0x7fff) != 0;
    default: break;
    }
    size_t elem = zf_dtype_size(dt);
    const unsigned char *p = (const unsigned char *)data + (size_t)k * elem;
    for (size_t i = 0; i < elem; i++)
        if (p[i]) return true;
    return false;
}

static zf_status_t s_where_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *xs = zf_tensor_shape(x);
    zf_dtype_t dt = zf_tensor_dtype(x);
    const void *data = zf_tensor_data(x);
    int64_t n = zf_tensor_num_elements(x), count = 0;
    for (int64_t k = 0; k < n; k++) count += s_truthy(dt, data, k);
    zf_shape_t shape = {.rank = 2, .dims = {count, xs->rank}};
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, ZF_INT64, &shape, &out));
    int64_t *o = zf_tensor_data(out), idx[ZF_MAX_RANK] = {0};
    for (int64_t k = 0; k < n; k++) {
        if (s_truthy(dt, data, k)) {
            memcpy(o, idx, (size_t)xs->rank * sizeof *idx);
            o += xs->rank;
        }
        for (int d = xs->rank - 1; d >= 0; d--) {
            if (++idx[d] < xs->dims[d]) break;
            idx[d] = 0;
        }
    }
    return ZF_STATUS_OK;
}

/* ---- TopKV2 ------------------------------------------------------------------------------ */

typedef struct {
    union {
        double f;
        int64_t i;
        uint64_t u;
    } v;
    int64_t idx;
} s_entry_t;

typedef int (*s_cmp_fn)(const void *, const void *);

/* Larger values first (NaN above every number), then lower indices. */
static int s_by_index(const s_entry_t *a, const s_entry_t *b)
{
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static int s_cmp_f(const void *pa, const void *pb)
{
    const s_entry_t *a = pa, *b = pb;
    bool na = a->v.f != a->v.f, nb = b->v.f != b->v.f;
    if (na != nb) return na ? -1 : 1;
    if (!na && a->v.f != b->v.f) return a->v.f > b->v.f ? -1 : 1;
    return s_by_index(a, b);
}

static int s_cmp_i(const void *pa, const void *pb)
{
    const s_entry_t *a = pa, *b = pb;
    if (a->v.i != b->v.i) return a->v.i > b->v.i ? -1 : 1;
    return s_by_index(a, b);
}

static int s_cmp_u(const void *pa, const void *pb)
{
    const s_entry_t *a = pa, *b = pb;
    if (a->v.u != b->v.u) return a->v.u > b->v.u ? -1 : 1;
    return s_by_index(a, b);
}

/* Element k as a sort key; returns the comparison for dt. */
static void s_key(zf_dtype_t dt, const void *d, int64_t k, s_entry_t *e)
{
    switch (dt) {
    case ZF_FLOAT: e->v.f = ((const float *)d)[k]; break;
    case ZF_DOUBLE: e->v.f = ((const double *)d)[k]; break;
    case ZF_HALF: e->v.f = zf_half_to_float(((const uint16_t *)d)[k]); break;
    case ZF_BFLOAT16: e->v.f = zf_bfloat16_to_float(((const uint16_t *)d)[k]); break;
    case ZF_INT8: e->v.i = ((const int8_t *)d)[k]; break;
    case ZF_INT16: e->v.i = ((const int16_t *)d)[k]; break;
    case ZF_INT32: e->v.i = ((const int32_t *)d)[k]; break;
    case ZF_INT64: e->v.i = ((const int64_t *)d)[k]; break;
    case ZF_UINT8: e->v.u = ((const uint8_t *)d)[k]; break;
    case ZF_UINT16: e->v.u = ((const uint16_t *)d)[k]; break;
    case ZF_UINT32: e->v.u = ((const uint32_t *)d)[k]; break;
    default: e->v.u = ((const uint64_t *)d)[k]; break;
    }
    e->idx = k;
}

static s_cmp_fn s_cmp_for(zf_dtype_t dt)
{
    switch (dt) {
    case ZF_FLOAT:
    case ZF_DOUBLE:
    case ZF_HALF:
    case ZF_BFLOAT16: return s_cmp_f;
    case ZF_INT8:
    case ZF_INT16:
    case ZF_INT32:
    case ZF_INT64: return s_cmp_i;
    default: return s_cmp_u;
    }
}

/* Restores the heap below i: each entry sorts no earlier than its children
 * (the root is the one that sorts last). */
static void s_sift_down(s_entry_t *h, int64_t n, int64_t i, s_cmp_fn cmp)
{
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && cmp(&h[c + 1], &h[c]) > 0) c++;
        if (cmp(&h[c], &h[i]) <= 0) return;
        s_entry_t t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

/* Leaves the k entries of e[0..n) that sort first in e[0..k), in order:
 * a heap of the best k so far when k is small against n, else a sort. */
static void s_top_k(s_entry_t *e, int64_t n, int64_t k, s_cmp_fn cmp)
{
    if (k * 4 < n) {
        for (int64_t i = k / 2 - 1; i >= 0; i--) s_sift_down(e, k, i, cmp);
        for (int64_t c = k; c < n; c++) {
            if (cmp(&e[c], &e[0]) >= 0) continue;
            e[0] = e[c];
            s_sift_down(e, k, 0, cmp);
        }
        n = k;
    }
    qsort(e, (size_t)n, sizeof *e, cmp);
}

typedef struct {
    zf_dtype_t index_type;
} s_topk_t;

static zf_status_t s_topk_create(const Tensorflow__NodeDef *node, void **state)
{
    zf_dtype_t t = ZF_INT32;
    ZF_TRY(zf_node_attr_type_or(node, "index_type", ZF_INT32, &t));
    if (t != ZF_INT32 && t != ZF_INT64)
        return zf_invalid_argument("%s (%s): index_type must be int32 or int64, got %s", node->name,
                                   node->op, zf_kernels_dtype_name((int)t));
    s_topk_t *st = malloc(sizeof *st);
    if (!st) return zf_out_of_memory("TopKV2 kernel");
    st->index_type = t;
    *state = st;
    return ZF_STATUS_OK;
}

static zf_status_t s_topk_check(const zf_kernel_ctx_t *ctx, int64_t *k)
{
    const zf_tensor_t *x = ctx->inputs[0], *kt = ctx->inputs[1];
    const zf_shape_t *xs = zf_tensor_shape(x);
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(kt)->rank != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "k must be scalar, got shape %s",
                               zf_kernels_shape_str(kt, sbuf));
    ZF_TRY(zf_kernels_input_int(ctx, 1, "k", k));
    if (*k < 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "k must be non-negative, got %lld",
                               (long long)*k);
    if (xs->rank < 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "input must be >= 1-D, got shape %s",
                               zf_kernels_shape_str(x, sbuf));
    if (xs->dims[xs->rank - 1] < *k)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "input must have at least k columns. Had %lld, needed %lld",
                               (long long)xs->dims[xs->rank - 1], (long long)*k);
    return ZF_STATUS_OK;
}

static zf_status_t s_topk_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const s_topk_t *st = ctx->state;
    const zf_tensor_t *x = ctx->inputs[0];
    int64_t k = 0;
    ZF_TRY(s_topk_check(ctx, &k));
    const zf_shape_t *xs = zf_tensor_shape(x);
    zf_dtype_t dt = zf_tensor_dtype(x);
    zf_shape_t shape = *xs;
    shape.dims[shape.rank - 1] = k;
    zf_tensor_t *values = NULL, *indices = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, dt, &shape, &values));
    ZF_TRY(zf_kernel_alloc_output(ctx, 1, st->index_type, &shape, &indices));
    if (zf_tensor_num_elements(values) == 0) return ZF_STATUS_OK;
    int64_t cols = xs->dims[xs->rank - 1], rows = zf_remap_prod(xs->dims, 0, xs->rank - 1);
    if (st->index_type == ZF_INT32 && cols > INT32_MAX)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%lld columns do not fit index_type int32",
                               (long long)cols);
    s_entry_t *e = malloc((size_t)cols * sizeof *e);
    if (!e) return zf_out_of_memory("TopKV2");
    size_t elem = zf_dtype_size(dt);
    const char *src = zf_tensor_data(x);
    char *vals = zf_tensor_data(values);
    void *idx = zf_tensor_data(indices);
    s_cmp_fn cmp = s_cmp_for(dt);
    for (int64_t r = 0; r < rows; r++) {
        const char *row = src + (size_t)(r * cols) * elem;
        for (int64_t c = 0; c < cols; c++) s_key(dt, row, c, &e[c]);
        s_top_k(e, cols, k, cmp);
        for (int64_t j = 0; j < k; j++) {
            memcpy(vals + (size_t)(r * k + j) * elem, row + (size_t)e[j].idx * elem, elem);
            if (st->index_type == ZF_INT32)
                ((int32_t *)idx)[r * k + j] = (int32_t)e[j].idx;
            else
                ((int64_t *)idx)[r * k + j] = e[j].idx;
        }
    }
    free(e);
    return ZF_STATUS_OK;
}

/* ---- Cumsum ------------------------------------------------------------------------------ */

typedef struct {
    bool exclusive, reverse;
} s_cumsum_t;

static zf_status_t s_cumsum_create(const Tensorflow__NodeDef *node, void **state)
{
    s_cumsum_t *st = malloc(sizeof *st);
    if (!st) return zf_out_of_memory("Cumsum kernel");
    zf_status_t s = zf_node_attr_bool_or(node, "exclusive", false, &st->exclusive);
    if (zf_ok(s)) s = zf_node_attr_bool_or(node, "reverse", false, &st->reverse);
    if (!zf_ok(s)) {
        free(st);
        return s;
    }
    *state = st;
    return ZF_STATUS_OK;
}

static zf_status_t s_cumsum_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const s_cumsum_t *st = ctx->state;
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *xs = zf_tensor_shape(x);
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(ctx->inputs[1])->rank != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "ScanOp: axis must be a scalar, not %s",
                               zf_kernels_shape_str(ctx->inputs[1], sbuf));
    int64_t a = 0;
    int axis = 0;
    ZF_TRY(zf_kernels_input_int(ctx, 1, "axis", &a));
    if (!zf_kernels_axis(a, xs->rank, &axis))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "ScanOp: Expected scan axis in the range [%d, %d), but got %lld",
                               -xs->rank, xs->rank, (long long)(a < 0 ? a + xs->rank : a));
    zf_dtype_t dt = zf_tensor_dtype(x);
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, dt, xs, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    size_t elem = zf_dtype_size(dt);
    int64_t outer = zf_remap_prod(xs->dims, 0, axis), dim = xs->dims[axis];
    int64_t inner = zf_remap_prod(xs->dims, axis + 1, xs->rank);
    size_t row = (size_t)inner * elem;
    const char *src = zf_tensor_data(x);
    char *dst = zf_tensor_data(out); /* zero-filled */
    for (int64_t o = 0; row && o < outer; o++) {
        int64_t prev = -1;
        for (int64_t t = 0; t < dim; t++) {
            int64_t d = st->reverse ? dim - 1 - t : t;
            char *out_row = dst + (size_t)(o * dim + d) * row;
            if (prev >= 0) memcpy(out_row, dst + (size_t)(o * dim + prev) * row, row);
            /* exclusive: the previous input joins the previous sum */
            if (st->exclusive && prev >= 0)
                zf_remap_add(dt, out_row, src + (size_t)(o * dim + prev) * row, inner);
            if (!st->exclusive) zf_remap_add(dt, out_row, src + (size_t)(o * dim + d) * row, inner);
            prev = d;
        }
    }
    return ZF_STATUS_OK;
}

/* ---- registration ------------------------------------------------------------------------ */

static const zf_kernel_t s_defs[] = {
    ZF_CPU_KERNEL("Where", ZF_TYPES_NUMBER | ZF_TYPE_BIT(ZF_BOOL), s_where_compute),
    {.op = "TopKV2",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_ORDERED,
     .create = s_topk_create,
     .destroy = free,
     .compute = s_topk_compute},
    {.op = "Cumsum",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_NUMBER,
     .create = s_cumsum_create,
     .destroy = free,
     .compute = s_cumsum_compute},
};

zf_status_t zf__kernels_register_order(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
