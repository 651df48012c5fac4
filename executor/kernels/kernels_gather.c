/* CPU kernels that index into tensors with index tensors: Gather, GatherV2
 * (axis and batch_dims), GatherNd, ScatterNd, UnsortedSegmentSum and
 * OneHot. Every index is checked against its bound before any element
 * moves; a bad one is INVALID_ARGUMENT naming it and its position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"
#include "executor/kernels/remap.h"

/* ---- Gather, GatherV2 -------------------------------------------------------------------- */

/* params as [batch, outer, n, inner], indices as [batch, m]: output
 * [batch, outer, m, inner]. */
typedef struct {
    const char *params;
    const zf_tensor_t *indices;
    char *out;
    int64_t outer, n, m, row; /* row: bytes per inner slice */
} s_gather_t;

static void s_gather_rows(void *arg, int64_t begin, int64_t end)
{
    const s_gather_t *g = arg;
    for (int64_t r = begin; r < end; r++) { /* r = (b * outer + o) * m + j */
        int64_t j = r % g->m, bo = r / g->m, b = bo / g->outer;
        int64_t idx = zf_remap_index_at(g->indices, b * g->m + j);
        memcpy(g->out + (size_t)(r * g->row), g->params + (size_t)((bo * g->n + idx) * g->row),
               (size_t)g->row);
    }
}

/* The first index outside [0, limit), or -1. */
static int64_t s_first_bad_index(const zf_tensor_t *indices, int64_t limit)
{
    int64_t count = zf_tensor_num_elements(indices);
    for (int64_t k = 0; k < count; k++) {
        int64_t v = zf_remap_index_at(indices, k);
        if (v < 0 || v >= limit) return k;
    }
    return -1;
}

static zf_status_t s_bad_index(const zf_kernel_ctx_t *ctx, const zf_tensor_t *indices, int64_t k,
                               int64_t limit)
{
    char ibuf[ZF_SHAPE_STRING_MAX];
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "indices%s = %lld is not in [0, %lld)",
                           zf_remap_index_str(zf_tensor_shape(indices), k, ibuf),
                           (long long)zf_remap_index_at(indices, k), (long long)limit);
}

/* On a device with its own gather: each batch's [outer, m, inner] output
 * gathered from its [outer, n, inner] params through an index map whose
 * middle dim is that batch's indices (read in host memory). */
static zf_status_t s_gather_on_device(zf_kernel_ctx_t *ctx, const s_gather_t *g, int64_t batch,
                                      size_t elem)
{
    int64_t inner = g->row / (int64_t)elem;
    zf_shape_t dense = {.rank = 3, .dims = {g->outer, g->m, inner}};
    int64_t src_dims[3] = {g->outer, g->n, inner};
    zf_remap_t r;
    ZF_TRY(zf_remap_init(&r, &dense));
    zf_status_t s = ZF_STATUS_OK;
    for (int64_t b = 0; b < batch && zf_ok(s); b++) {
        for (int64_t o = 0; o < g->outer; o++) r.idx[0][o] = o;
        for (int64_t j = 0; j < g->m; j++)
            r.idx[1][j] = zf_remap_index_at(g->indices, b * g->m + j);
        for (int64_t i = 0; i < inner; i++) r.idx[2][i] = i;
        s = zf_remap_gather(ctx, &r, src_dims, g->params + (size_t)(b * g->outer * g->n * g->row),
                            g->out + (size_t)(b * g->outer * g->m * g->row), elem, NULL);
    }
    zf_remap_free(&r);
    return s;
}

static zf_status_t s_gather(zf_kernel_ctx_t *ctx, int axis, int batch_dims)
{
    const zf_tensor_t *p = ctx->inputs[0], *ix = ctx->inputs[1];
    const zf_shape_t *ps = zf_tensor_shape(p), *is = zf_tensor_shape(ix);
    char pbuf[ZF_SHAPE_STRING_MAX], ibuf[ZF_SHAPE_STRING_MAX];
    if (ps->rank - 1 + is->rank - batch_dims > ZF_MAX_RANK)
        return zf_kernel_error(
            ctx, ZF_INVALID_ARGUMENT, "the output's rank would exceed %d: params %s, indices %s",
            ZF_MAX_RANK, zf_kernels_shape_str(p, pbuf), zf_kernels_shape_str(ix, ibuf));
    zf_shape_t shape = {.rank = 0};
    for (int k = 0; k < axis; k++) shape.dims[shape.rank++] = ps->dims[k];
    for (int k = batch_dims; k < is->rank; k++) shape.dims[shape.rank++] = is->dims[k];
    for (int k = axis + 1; k < ps->rank; k++) shape.dims[shape.rank++] = ps->dims[k];
    int64_t limit = ps->dims[axis], bad = s_first_bad_index(ix, limit);
    if (bad >= 0) return s_bad_index(ctx, ix, bad, limit);
    zf_tensor_t *out = NULL; /* every row is written below: the indices are checked */
    ZF_TRY(zf_kernel_alloc_output_uninit(ctx, 0, zf_tensor_dtype(p), &shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    int64_t batch = zf_remap_prod(ps->dims, 0, batch_dims);
    s_gather_t g = {
        .params = zf_tensor_data(p),
        .indices = ix,
        .out = zf_tensor_data(out),
        .outer = zf_remap_prod(ps->dims, batch_dims, axis),
        .n = limit,
        .m = zf_remap_prod(is->dims, batch_dims, is->rank),
        .row = zf_remap_prod(ps->dims, axis + 1, ps->rank) *
               (int64_t)zf_dtype_size(zf_tensor_dtype(p)),
    };
    if (zf_remap_on_device(ctx))
        return s_gather_on_device(ctx, &g, batch, zf_dtype_size(zf_tensor_dtype(p)));
    int64_t rows = batch * g.outer * g.m; /* the output holds rows * row bytes */
    zf_kernels_parallel_for(ctx, rows, ZF_KERNELS_PARALLEL_MIN * 4 / g.row + 1, s_gather_rows, &g);
    return ZF_STATUS_OK;
}

/* The gather axis a of params of rank dims, in [-rank, rank). */
static zf_status_t s_gather_axis(const zf_kernel_ctx_t *ctx, int64_t a, int rank, int *axis)
{
    if (zf_kernels_axis(a, rank, axis)) return ZF_STATUS_OK;
    /* the rank params would need: -a for a negative axis, else a + 1 */
    uint64_t need = a < 0 ? 0 - (uint64_t)a : (uint64_t)a + 1;
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                           "Shape must be at least rank %llu but is rank %d",
                           (unsigned long long)need, rank);
}

static zf_status_t s_gather_create(const Tensorflow__NodeDef *node, void **state)
{
    return zf_remap_int_attr_state(node, "batch_dims", 0, state);
}

static zf_status_t s_gather_v2_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    const zf_shape_t *ps = zf_tensor_shape(ctx->inputs[0]), *is = zf_tensor_shape(ctx->inputs[1]);
    ZF_TRY(zf_remap_check_index_dtype(ctx, 1, "indices"));
    int64_t a = 0, bd = *(const int64_t *)ctx->state;
    ZF_TRY(zf_kernels_input_int(ctx, 2, "axis", &a));
    int axis = 0;
    ZF_TRY(s_gather_axis(ctx, a, ps->rank, &axis));
    if (bd < -is->rank || bd > is->rank)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Expected batch_dims in the range [%d, %d], but got %lld", -is->rank,
                               is->rank, (long long)bd);
    if (bd < 0) bd += is->rank;
    if (bd >= ps->rank && bd > 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "batch_dims (%lld) must be less than rank(params) (%d).",
                               (long long)bd, ps->rank);
    if (axis < bd)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "batch_dims (%lld) must be less than or equal to axis (%d).",
                               (long long)bd, axis);
    for (int i = 0; i < bd; i++)
        if (ps->dims[i] != is->dims[i])
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "params.shape[%d]: %lld should be equal to indices.shape[%d]: "
                                   "%lld",
                                   i, (long long)ps->dims[i], i, (long long)is->dims[i]);
    return s_gather(ctx, axis, (int)bd);
}

static zf_status_t s_gather_v1_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    ZF_TRY(zf_remap_check_index_dtype(ctx, 1, "indices"));
    int axis = 0;
    ZF_TRY(s_gather_axis(ctx, 0, zf_tensor_shape(ctx->inputs[0])->rank, &axis));
    return s_gather(ctx, axis, 0);
}

/* ---- GatherNd, ScatterNd ----------------------------------------------------------------- */

/* The element offsets of the slices that the index rows of indices (its
 * last dim long) select in a tensor of shape s; bad rows fail unless
 * ignore_bad, which marks them -1. offs holds one entry per row. */
static zf_status_t s_nd_offsets(const zf_kernel_ctx_t *ctx, const zf_tensor_t *indices,
                                const zf_shape_t *s, const char *what, bool ignore_bad,
                                int64_t *offs)
{
    const zf_shape_t *is = zf_tensor_shape(indices);
    int k = (int)is->dims[is->rank - 1];
    int64_t rows = zf_remap_prod(is->dims, 0, is->rank - 1);
    int64_t inner = zf_remap_prod(s->dims, k, s->rank);
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0;
        bool ok = true;
        for (int j = 0; j < k; j++) {
            int64_t v = zf_remap_index_at(indices, r * k + j);
            ok = ok && v >= 0 && v < s->dims[j];
            off = off * s->dims[j] + (ok ? v : 0);
        }
        if (!ok && ignore_bad) {
            offs[r] = -1;
            continue;
        }
        if (!ok) {
            zf_shape_t batch = *is;
            batch.rank--;
            char rbuf[ZF_SHAPE_STRING_MAX], sbuf[ZF_SHAPE_STRING_MAX], vbuf[ZF_MAX_RANK * 22 + 4];
            size_t len = 0;
            for (int j = 0; j < k; j++)
                len += (size_t)snprintf(vbuf + len, sizeof vbuf - len, "%s%lld", j ? ", " : "",
                                        (long long)zf_remap_index_at(indices, r * k + j));
            vbuf[len] = '\0';
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "indices%s = [%s] does not index into %s %s",
                                   zf_remap_index_str(&batch, r, rbuf), vbuf, what,
                                   zf_shape_to_string(s, sbuf, sizeof sbuf));
        }
        offs[r] = off * inner;
    }
    return ZF_STATUS_OK;
}

typedef struct {
    bool ignore_bad;
} s_nd_attrs_t;

static zf_status_t s_nd_create(const Tensorflow__NodeDef *node, void **state)
{
    const uint8_t *p = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string_or(node, "bad_indices_policy", "", &p, &len));
    bool ignore = len == 6 && memcmp(p, "IGNORE", 6) == 0;
    if (!ignore && len && !(len == 5 && memcmp(p, "ERROR", 5) == 0) &&
        !(len == 7 && memcmp(p, "DEFAULT", 7) == 0))
        return zf_invalid_argument("%s (%s): bad_indices_policy must be DEFAULT, ERROR or IGNORE, "
                                   "got '%.*s'",
                                   node->name, node->op, (int)(len > 32 ? 32 : len),
                                   (const char *)p);
    s_nd_attrs_t *st = malloc(sizeof *st);
    if (!st) return zf_out_of_memory(node->op);
    st->ignore_bad = ignore;
    *state = st;
    return ZF_STATUS_OK;
}

static zf_status_t s_gather_nd_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tensor_t *p = ctx->inputs[0], *ix = ctx->inputs[1];
    const zf_shape_t *ps = zf_tensor_shape(p), *is = zf_tensor_shape(ix);
    ZF_TRY(zf_remap_check_index_dtype(ctx, 1, "indices"));
    if (ps->rank < 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "params must be at least a vector");
    if (is->rank < 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "indices must be at least a vector");
    int64_t k = is->dims[is->rank - 1];
    if (k > ps->rank)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "index innermost dimension length must be <= params rank; saw: "
                               "%lld vs. %d",
                               (long long)k, ps->rank);
    zf_shape_t shape = {.rank = 0};
    if (is->rank - 1 + ps->rank - k > ZF_MAX_RANK)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "the output's rank would exceed %d",
                               ZF_MAX_RANK);
    for (int i = 0; i < is->rank - 1; i++) shape.dims[shape.rank++] = is->dims[i];
    for (int i = (int)k; i < ps->rank; i++) shape.dims[shape.rank++] = ps->dims[i];
    int64_t rows = zf_remap_prod(is->dims, 0, is->rank - 1);
    int64_t *offs = calloc((size_t)(rows > 0 ? rows : 1), sizeof *offs);
    if (!offs) return zf_out_of_memory("GatherNd");
    const s_nd_attrs_t *st = ctx->state;
    zf_status_t s = s_nd_offsets(ctx, ix, ps, "param shape", st->ignore_bad, offs);
    zf_tensor_t *out = NULL;
    if (zf_ok(s)) s = zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(p), &shape, &out);
    if (zf_ok(s) && zf_tensor_num_elements(out) > 0) {
        size_t elem = zf_dtype_size(zf_tensor_dtype(p));
        size_t slice = (size_t)zf_remap_prod(ps->dims, (int)k, ps->rank) * elem;
        const char *src = zf_tensor_data(p);
        char *dst = zf_tensor_data(out);
        for (int64_t r = 0; slice && r < rows; r++) {
            if (offs[r] < 0)
                memset(dst + (size_t)r * slice, 0, slice);
            else
                memcpy(dst + (size_t)r * slice, src + (size_t)offs[r] * elem, slice);
        }
    }
    free(offs);
    return s;
}

static zf_status_t s_scatter_nd_check(const zf_kernel_ctx_t *ctx, const zf_shape_t *shape)
{
    const zf_tensor_t *ix = ctx->inputs[0], *up = ctx->inputs[1];
    const zf_shape_t *is = zf_tensor_shape(ix), *us = zf_tensor_shape(up);
    char ib[ZF_SHAPE_STRING_MAX], ub[ZF_SHAPE_STRING_MAX], sb[ZF_SHAPE_STRING_MAX];
    if (shape->rank < 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Output must be at least 1-D, got shape: %s",
                               zf_shape_to_string(shape, sb, sizeof sb));
    if (is->rank < 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Indices shape must have rank at least one. Found:%s",
                               zf_kernels_shape_str(ix, ib));
    int outer = is->rank - 1;
    int64_t k = is->dims[outer];
    if (k > shape->rank)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Index innermost dimension length must be <= output rank; saw: "
                               "%lld vs. output rank of %d",
                               (long long)k, shape->rank);
    bool ok = us->rank >= outer;
    for (int i = 0; ok && i < outer; i++) ok = us->dims[i] == is->dims[i];
    if (!ok)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Dimensions [0,%d) of indices[shape=%s] must match dimensions "
                               "[0,%d) of updates[shape=%s]",
                               outer, zf_kernels_shape_str(ix, ib), outer,
                               zf_kernels_shape_str(up, ub));
    ok = us->rank - outer == shape->rank - k;
    for (int i = 0; ok && i < us->rank - outer; i++) ok = us->dims[outer + i] == shape->dims[k + i];
    if (!ok)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Dimensions [%lld,%d) of input[shape=%s] must match dimensions "
                               "[%d,%d) of updates[shape=%s]",
                               (long long)k, shape->rank, zf_shape_to_string(shape, sb, sizeof sb),
                               outer, us->rank, zf_kernels_shape_str(up, ub));
    return ZF_STATUS_OK;
}

static zf_status_t s_scatter_nd_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    const zf_tensor_t *ix = ctx->inputs[0], *up = ctx->inputs[1];
    ZF_TRY(zf_remap_check_index_dtype(ctx, 0, "indices"));
    ZF_TRY(zf_kernels_check_dtype(ctx, 2, zf_tensor_dtype(ix)));
    zf_shape_t shape;
    ZF_TRY(zf_remap_input_shape(ctx, 2, "shape", &shape));
    ZF_TRY(s_scatter_nd_check(ctx, &shape));
    const zf_shape_t *is = zf_tensor_shape(ix);
    int64_t rows = zf_remap_prod(is->dims, 0, is->rank - 1);
    int64_t *offs = calloc((size_t)(rows > 0 ? rows : 1), sizeof *offs);
    if (!offs) return zf_out_of_memory("ScatterNd");
    zf_status_t s = s_nd_offsets(ctx, ix, &shape, "shape", false, offs);
    zf_tensor_t *out = NULL;
    if (zf_ok(s)) s = zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(up), &shape, &out);
    if (zf_ok(s) && zf_tensor_num_elements(up) > 0) {
        zf_dtype_t dt = zf_tensor_dtype(up);
        size_t elem = zf_dtype_size(dt);
        int64_t slice = zf_remap_prod(shape.dims, (int)is->dims[is->rank - 1], shape.rank);
        const char *src = zf_tensor_data(up);
        char *dst = zf_tensor_data(out);
        for (int64_t r = 0; slice && r < rows; r++)
            zf_remap_add(dt, dst + (size_t)offs[r] * elem, src + (size_t)(r * slice) * elem, slice);
    }
    free(offs);
    return s;
}

/* ---- UnsortedSegmentSum ------------------------------------------------------------------ */

static zf_status_t s_segment_sum_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    const zf_tensor_t *data = ctx->inputs[0], *ids = ctx->inputs[1];
    const zf_shape_t *ds = zf_tensor_shape(data), *is = zf_tensor_shape(ids);
    char dbuf[ZF_SHAPE_STRING_MAX], ibuf[ZF_SHAPE_STRING_MAX];
    ZF_TRY(zf_remap_check_index_dtype(ctx, 1, "segment_ids"));
    if (zf_tensor_shape(ctx->inputs[2])->rank != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "num_segments should be a scalar, not shape %s",
                               zf_kernels_shape_str(ctx->inputs[2], dbuf));
    int64_t num = 0;
    ZF_TRY(zf_kernels_input_int(ctx, 2, "num_segments", &num));
    if (num < 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Input num_segments == %lld must not be negative.", (long long)num);
    bool prefix = is->rank <= ds->rank;
    for (int i = 0; prefix && i < is->rank; i++) prefix = is->dims[i] == ds->dims[i];
    if (!prefix)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "data.shape = %s does not start with segment_ids.shape = %s",
                               zf_kernels_shape_str(data, dbuf), zf_kernels_shape_str(ids, ibuf));
    if (ds->rank - is->rank + 1 > ZF_MAX_RANK)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "the output's rank would exceed %d",
                               ZF_MAX_RANK);
    int64_t n = zf_tensor_num_elements(ids);
    for (int64_t k = 0; k < n; k++) {
        int64_t v = zf_remap_index_at(ids, k);
        if (v >= num)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "segment_ids%s = %lld is out of range [0, %lld)",
                                   zf_remap_index_str(is, k, ibuf), (long long)v, (long long)num);
    }
    zf_shape_t shape = {.rank = 1, .dims = {num}};
    for (int i = is->rank; i < ds->rank; i++) shape.dims[shape.rank++] = ds->dims[i];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(data), &shape, &out));
    zf_dtype_t dt = zf_tensor_dtype(data);
    size_t elem = zf_dtype_size(dt);
    int64_t inner = zf_remap_prod(ds->dims, is->rank, ds->rank);
    const char *src = zf_tensor_data(data);
    char *dst = zf_tensor_data(out);
    for (int64_t k = 0; inner && k < n; k++) {
        int64_t v = zf_remap_index_at(ids, k);
        if (v < 0) continue; /* negative ids are dropped */
        zf_remap_add(dt, dst + (size_t)(v * inner) * elem, src + (size_t)(k * inner) * elem, inner);
    }
    return ZF_STATUS_OK;
}

/* ---- OneHot ------------------------------------------------------------------------------ */

static zf_status_t s_one_hot_create(const Tensorflow__NodeDef *node, void **state)
{
    return zf_remap_int_attr_state(node, "axis", -1, state);
}

/* Element k of OneHot's indices (uint8, int8, int32 or int64). */
static int64_t s_one_hot_index(const zf_tensor_t *t, int64_t k)
{
    const void *d = zf_tensor_data(t);
    switch (zf_tensor_dtype(t)) {
    case ZF_UINT8: return ((const uint8_t *)d)[k];
    case ZF_INT8: return ((const int8_t *)d)[k];
    default: return zf_remap_index_at(t, k);
    }
}

static zf_status_t s_one_hot_check(const zf_kernel_ctx_t *ctx, int64_t *depth)
{
    char sbuf[ZF_SHAPE_STRING_MAX];
    zf_dtype_t ti = zf_tensor_dtype(ctx->inputs[0]);
    if (ti != ZF_UINT8 && ti != ZF_INT8 && ti != ZF_INT32 && ti != ZF_INT64)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "indices must be uint8, int8, int32 or int64, got %s",
                               zf_kernels_dtype_name((int)ti));
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, ZF_INT32));
    if (zf_tensor_shape(ctx->inputs[1])->rank != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "depth must be a scalar, but got: %s",
                               zf_kernels_shape_str(ctx->inputs[1], sbuf));
    const char *names[] = {"on_value", "off_value"};
    for (int i = 2; i < 4; i++) {
        if (zf_tensor_shape(ctx->inputs[i])->rank != 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must be a scalar, but got: %s",
                                   names[i - 2], zf_kernels_shape_str(ctx->inputs[i], sbuf));
    }
    ZF_TRY(zf_kernels_check_dtype(ctx, 3, zf_tensor_dtype(ctx->inputs[2])));
    *depth = *(const int32_t *)zf_tensor_data(ctx->inputs[1]);
    if (*depth < 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "depth must be non-negative, got: %lld",
                               (long long)*depth);
    return ZF_STATUS_OK;
}

static zf_status_t s_one_hot_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 4));
    int64_t axis_attr = *(const int64_t *)ctx->state;
    const zf_tensor_t *ix = ctx->inputs[0];
    const zf_shape_t *is = zf_tensor_shape(ix);
    if (axis_attr != -1 && (axis_attr < 0 || axis_attr > is->rank))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Expected axis to be -1 or between [0, %d).  But received: %lld",
                               is->rank + 1, (long long)axis_attr);
    if (is->rank == ZF_MAX_RANK)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "the output's rank would exceed %d",
                               ZF_MAX_RANK);
    int64_t depth = 0;
    ZF_TRY(s_one_hot_check(ctx, &depth));
    int64_t total = 0;
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (__builtin_mul_overflow(zf_tensor_num_elements(ix), depth, &total))
        return zf_kernel_error(
            ctx, ZF_INVALID_ARGUMENT,
            "OneHot result would have shape %s + [%lld], which exceeds 2**63 - 1 "
            "elements",
            zf_kernels_shape_str(ix, sbuf), (long long)depth);
    int axis = axis_attr == -1 ? is->rank : (int)axis_attr;
    zf_shape_t shape = {.rank = is->rank + 1};
    for (int i = 0, j = 0; i < shape.rank; i++) shape.dims[i] = i == axis ? depth : is->dims[j++];
    zf_tensor_t *out = NULL;
    const zf_tensor_t *on = ctx->inputs[2];
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(on), &shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    size_t elem = zf_dtype_size(zf_tensor_dtype(on));
    const void *on_v = zf_tensor_data(on), *off_v = zf_tensor_data(ctx->inputs[3]);
    int64_t prefix = zf_remap_prod(is->dims, 0, axis),
            suffix = zf_remap_prod(is->dims, axis, is->rank);
    char *dst = zf_tensor_data(out);
    for (int64_t p = 0; p < prefix; p++)
        for (int64_t d = 0; d < depth; d++)
            for (int64_t s = 0; s < suffix; s++) {
                bool hot = s_one_hot_index(ix, p * suffix + s) == d;
                memcpy(dst + (size_t)((p * depth + d) * suffix + s) * elem, hot ? on_v : off_v,
                       elem);
            }
    return ZF_STATUS_OK;
}

/* ---- registration ------------------------------------------------------------------------ */

static const zf_kernel_t s_defs[] = {
    {.op = "GatherV2",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_POD,
     .create = s_gather_create,
     .destroy = free,
     .compute = s_gather_v2_compute},
    ZF_CPU_KERNEL("Gather", ZF_TYPES_POD, s_gather_v1_compute),
    {.op = "GatherNd",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_POD,
     .create = s_nd_create,
     .destroy = free,
     .compute = s_gather_nd_compute},
    {.op = "ScatterNd",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_NUMBER,
     .flags = ZF_KERNEL_SIZED_BY_VALUE,
     .compute = s_scatter_nd_compute},
    {.op = "UnsortedSegmentSum",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_NUMBER,
     .flags = ZF_KERNEL_SIZED_BY_VALUE,
     .compute = s_segment_sum_compute},
    {.op = "OneHot",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_POD,
     .flags = ZF_KERNEL_SIZED_BY_VALUE,
     .create = s_one_hot_create,
     .destroy = free,
     .compute = s_one_hot_compute},
};

zf_status_t zf__kernels_register_gather(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
