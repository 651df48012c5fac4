/* CPU kernels that grow, repeat or reorder a tensor's elements: Tile, Pad,
 * PadV2, MirrorPad (REFLECT and SYMMETRIC), ReverseV2 and BroadcastTo,
 * all through an index map (remap.h) over bytes of any fixed-size dtype;
 * and BroadcastGradientArgs, which computes on shapes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"
#include "executor/kernels/remap.h"

/* An element of zeros for every fixed-size dtype (complex128 is 16 bytes). */
static const char s_zero[16];

/* Allocates output 0 of shape with input 0's dtype and, unless it is
 * empty, an index map over it; *done says there is nothing to map. */
static zf_status_t s_output_and_map(zf_kernel_ctx_t *ctx, const zf_shape_t *shape,
                                    zf_tensor_t **out, zf_remap_t *r, bool *done)
{
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(ctx->inputs[0]), shape, out));
    *done = zf_tensor_num_elements(*out) == 0;
    if (*done) return ZF_STATUS_OK;
    return zf_remap_init(r, shape);
}

/* Gathers output 0 from input 0 through r (fill where it maps to
 * ZF_REMAP_FILL) and frees r. */
static zf_status_t s_finish(zf_kernel_ctx_t *ctx, zf_tensor_t *out, zf_remap_t *r, const void *fill)
{
    const zf_tensor_t *x = ctx->inputs[0];
    zf_remap_gather(ctx, r, zf_tensor_shape(x)->dims, zf_tensor_data(x), zf_tensor_data(out),
                    zf_dtype_size(zf_tensor_dtype(x)), fill);
    zf_remap_free(r);
    return ZF_STATUS_OK;
}

/* An output dim a + b (+ c), or INVALID_ARGUMENT when it overflows. */
static zf_status_t s_dim_sum(const zf_kernel_ctx_t *ctx, int64_t a, int64_t b, int64_t c,
                             int64_t *out)
{
    if (__builtin_add_overflow(a, b, out) || __builtin_add_overflow(*out, c, out))
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "output dimension is too large");
    return ZF_STATUS_OK;
}

/* ---- Tile ------------------------------------------------------------------------ */

static zf_status_t s_tile_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_shape_t *in = zf_tensor_shape(ctx->inputs[0]);
    const zf_tensor_t *mt = ctx->inputs[1];
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(mt)->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Expected multiples argument to be a vector, got shape %s",
                               zf_kernels_shape_str(mt, sbuf));
    if (zf_tensor_num_elements(mt) != in->rank)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Expected multiples argument to be a vector of length %d but got "
                               "length %lld",
                               in->rank, (long long)zf_tensor_num_elements(mt));
    int64_t mult[ZF_MAX_RANK];
    int n = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, 1, "multiples", mult, ZF_MAX_RANK, &n));
    zf_shape_t shape = {.rank = in->rank};
    for (int i = 0; i < in->rank; i++) {
        if (mult[i] < 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Expected multiples[%d] >= 0, but got %lld", i,
                                   (long long)mult[i]);
        if (__builtin_mul_overflow(in->dims[i], mult[i], &shape.dims[i]))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "output dimension is too large");
    }
    zf_tensor_t *out = NULL;
    zf_remap_t r;
    bool done = false;
    ZF_TRY(s_output_and_map(ctx, &shape, &out, &r, &done));
    if (done) return ZF_STATUS_OK;
    for (int k = 0; k < in->rank; k++)
        for (int64_t j = 0; j < shape.dims[k]; j++) r.idx[k][j] = j % in->dims[k];
    return s_finish(ctx, out, &r, NULL);
}

/* ---- Pad, PadV2, MirrorPad ----------------------------------------------------------- */

/* Reads input 1, paddings: an int32 or int64 [rank, 2] matrix. */
static zf_status_t s_read_paddings(const zf_kernel_ctx_t *ctx, int64_t *before, int64_t *after)
{
    const zf_tensor_t *x = ctx->inputs[0], *p = ctx->inputs[1];
    const zf_shape_t *ps = zf_tensor_shape(p);
    char pbuf[ZF_SHAPE_STRING_MAX], xbuf[ZF_SHAPE_STRING_MAX];
    ZF_TRY(zf_remap_check_index_dtype(ctx, 1, "paddings"));
    if (ps->rank != 2 || ps->dims[1] != 2)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "paddings must be a matrix with 2 columns: %s",
                               zf_kernels_shape_str(p, pbuf));
    int rank = zf_tensor_shape(x)->rank;
    if (ps->dims[0] != rank)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "The first dimension of paddings must be the rank of inputs %s, %s",
                               zf_kernels_shape_str(p, pbuf), zf_kernels_shape_str(x, xbuf));
    for (int i = 0; i < rank; i++) {
        before[i] = zf_remap_index_at(p, 2 * i);
        after[i] = zf_remap_index_at(p, 2 * i + 1);
        if (before[i] < 0 || after[i] < 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Paddings must be non-negative: %lld %lld", (long long)before[i],
                                   (long long)after[i]);
    }
    return ZF_STATUS_OK;
}

/* Pad and PadV2: constant padding with the element at fill. */
static zf_status_t s_pad_constant(zf_kernel_ctx_t *ctx, const void *fill)
{
    const zf_shape_t *in = zf_tensor_shape(ctx->inputs[0]);
    int64_t before[ZF_MAX_RANK], after[ZF_MAX_RANK];
    ZF_TRY(s_read_paddings(ctx, before, after));
    zf_shape_t shape = {.rank = in->rank};
    for (int i = 0; i < in->rank; i++)
        ZF_TRY(s_dim_sum(ctx, before[i], in->dims[i], after[i], &shape.dims[i]));
    zf_tensor_t *out = NULL;
    zf_remap_t r;
    bool done = false;
    ZF_TRY(s_output_and_map(ctx, &shape, &out, &r, &done));
    if (done) return ZF_STATUS_OK;
    for (int k = 0; k < in->rank; k++)
        for (int64_t j = 0; j < shape.dims[k]; j++) {
            int64_t p = j - before[k];
            r.idx[k][j] = p >= 0 && p < in->dims[k] ? p : ZF_REMAP_FILL;
        }
    return s_finish(ctx, out, &r, fill);
}

static zf_status_t s_pad_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    return s_pad_constant(ctx, s_zero);
}

static zf_status_t s_pad_v2_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    const zf_tensor_t *c = ctx->inputs[2];
    char sbuf[ZF_SHAPE_STRING_MAX];
    ZF_TRY(zf_kernels_check_dtype(ctx, 2, zf_tensor_dtype(ctx->inputs[0])));
    if (zf_tensor_shape(c)->rank != 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "constant_values must be a scalar. Got: %s",
                               zf_kernels_shape_str(c, sbuf));
    return s_pad_constant(ctx, zf_tensor_data(c));
}

/* MirrorPad's state: the mode's offset, 1 for REFLECT (the edge is not
 * repeated) and 0 for SYMMETRIC. */
typedef struct {
    int offset;
} s_mirror_t;

static zf_status_t s_mirror_create(const Tensorflow__NodeDef *node, void **state)
{
    const uint8_t *mode = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string(node, "mode", &mode, &len));
    int offset = -1;
    if (len == 7 && memcmp(mode, "REFLECT", 7) == 0) offset = 1;
    if (len == 9 && memcmp(mode, "SYMMETRIC", 9) == 0) offset = 0;
    if (offset < 0)
        return zf_invalid_argument("%s (%s): mode must be either REFLECT or SYMMETRIC, got '%.*s'",
                                   node->name, node->op, (int)(len > 32 ? 32 : len),
                                   (const char *)mode);
    s_mirror_t *st = malloc(sizeof *st);
    if (!st) return zf_out_of_memory("MirrorPad kernel");
    st->offset = offset;
    *state = st;
    return ZF_STATUS_OK;
}

static zf_status_t s_mirror_pad_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const s_mirror_t *st = ctx->state;
    const zf_shape_t *in = zf_tensor_shape(ctx->inputs[0]);
    int64_t before[ZF_MAX_RANK], after[ZF_MAX_RANK];
    ZF_TRY(s_read_paddings(ctx, before, after));
    zf_shape_t shape = {.rank = in->rank};
    for (int i = 0; i < in->rank; i++) {
        int64_t d = in->dims[i];
        if (st->offset == 0 && (before[i] > d || after[i] > d))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "paddings must be no greater than the dimension size: %lld, "
                                   "%lld greater than %lld",
                                   (long long)before[i], (long long)after[i], (long long)d);
        if (st->offset == 1 && (before[i] >= d || after[i] >= d))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "paddings must be less than the dimension size: %lld, %lld not "
                                   "less than %lld",
                                   (long long)before[i], (long long)after[i], (long long)d);
        shape.dims[i] = before[i] + d + after[i]; /* at most 3 * d */
    }
    zf_tensor_t *out = NULL;
    zf_remap_t r;
    bool done = false;
    ZF_TRY(s_output_and_map(ctx, &shape, &out, &r, &done));
    if (done) return ZF_STATUS_OK;
    for (int k = 0; k < in->rank; k++) {
        int64_t d = in->dims[k];
        for (int64_t j = 0; j < shape.dims[k]; j++) {
            int64_t p = j - before[k];
            if (p < 0) p = -p - 1 + st->offset;
            if (p >= d) p = 2 * d - 1 - st->offset - p;
            r.idx[k][j] = p;
        }
    }
    return s_finish(ctx, out, &r, NULL);
}

/* ---- ReverseV2 ------------------------------------------------------------------------ */

static zf_status_t s_reverse_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *in = zf_tensor_shape(x);
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (zf_tensor_shape(ctx->inputs[1])->rank != 1)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "'dims' must be 1-dimension, not %d",
                               zf_tensor_shape(ctx->inputs[1])->rank);
    int64_t axes[ZF_MAX_RANK];
    int n = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, 1, "axis", axes, ZF_MAX_RANK, &n));
    bool flip[ZF_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int a = 0;
        if (!zf_kernels_axis(axes[i], in->rank, &a))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "'axis'[%d] = %lld is out of valid range [%d, %d] for input %s",
                                   i, (long long)axes[i], -in->rank, in->rank - 1,
                                   zf_kernels_shape_str(x, sbuf));
        if (flip[a])
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "axis %d specified more than once.",
                                   a);
        flip[a] = true;
    }
    zf_tensor_t *out = NULL;
    zf_remap_t r;
    bool done = false;
    ZF_TRY(s_output_and_map(ctx, in, &out, &r, &done));
    if (done) return ZF_STATUS_OK;
    for (int k = 0; k < in->rank; k++)
        for (int64_t j = 0; j < in->dims[k]; j++) r.idx[k][j] = flip[k] ? in->dims[k] - 1 - j : j;
    return s_finish(ctx, out, &r, NULL);
}

/* ---- BroadcastTo ------------------------------------------------------------------------- */

static zf_status_t s_broadcast_to_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *in = zf_tensor_shape(x);
    char xbuf[ZF_SHAPE_STRING_MAX], sbuf[ZF_SHAPE_STRING_MAX];
    zf_shape_t shape;
    ZF_TRY(zf_remap_input_shape(ctx, 1, "shape", &shape));
    int rank = shape.rank;
    /* the input's dims aligned to the output's from the right, 1 before */
    int64_t src[ZF_MAX_RANK];
    bool ok = in->rank <= rank;
    for (int k = 0; ok && k < rank; k++) {
        int i = k - (rank - in->rank);
        src[k] = i >= 0 ? in->dims[i] : 1;
        ok = src[k] == shape.dims[k] || src[k] == 1;
    }
    if (!ok)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Unable to broadcast tensor of shape %s to tensor of shape %s",
                               zf_kernels_shape_str(x, xbuf),
                               zf_shape_to_string(&shape, sbuf, sizeof sbuf));
    zf_tensor_t *out = NULL;
    zf_remap_t r;
    bool done = false;
    ZF_TRY(s_output_and_map(ctx, &shape, &out, &r, &done));
    if (done) return ZF_STATUS_OK;
    for (int k = 0; k < rank; k++)
        for (int64_t j = 0; j < shape.dims[k]; j++) r.idx[k][j] = src[k] == 1 ? 0 : j;
    zf_remap_gather(ctx, &r, src, zf_tensor_data(x), zf_tensor_data(out),
                    zf_dtype_size(zf_tensor_dtype(x)), NULL);
    zf_remap_free(&r);
    return ZF_STATUS_OK;
}

/* ---- BroadcastGradientArgs ------------------------------------------------------------------ */

/* Shapes given as values may be longer than a tensor's rank. */
#define S_MAX_SHAPE_LEN 64

static const char *s_dims_str(const int64_t *d, int n, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)d[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

static zf_status_t s_bcast_args_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    int64_t s[2][S_MAX_SHAPE_LEN], red[2][S_MAX_SHAPE_LEN];
    int n[2] = {0, 0}, nred[2] = {0, 0};
    char sbuf[ZF_SHAPE_STRING_MAX];
    for (int i = 0; i < 2; i++) {
        if (zf_tensor_shape(ctx->inputs[i])->rank != 1)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "In[%d] must be a vector.%s", i,
                                   zf_kernels_shape_str(ctx->inputs[i], sbuf));
        ZF_TRY(zf_kernels_input_ints(ctx, i, i ? "s1" : "s0", s[i], S_MAX_SHAPE_LEN, &n[i]));
    }
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, zf_tensor_dtype(ctx->inputs[0])));
    int rank = n[0] > n[1] ? n[0] : n[1];
    for (int k = 0; k < rank; k++) {
        int64_t d[2];
        for (int i = 0; i < 2; i++) d[i] = k - (rank - n[i]) >= 0 ? s[i][k - (rank - n[i])] : 1;
        if (d[0] != d[1] && d[0] != 1 && d[1] != 1) {
            char b0[S_MAX_SHAPE_LEN * 21 + 3], b1[S_MAX_SHAPE_LEN * 21 + 3];
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "Incompatible shapes: %s vs. %s",
                                   s_dims_str(s[0], n[0], b0, sizeof b0),
                                   s_dims_str(s[1], n[1], b1, sizeof b1));
        }
        for (int i = 0; i < 2; i++)
            if (d[i] == 1) red[i][nred[i]++] = k;
    }
    zf_dtype_t dt = zf_tensor_dtype(ctx->inputs[0]);
    for (int i = 0; i < 2; i++) {
        zf_shape_t shape = {.rank = 1, .dims = {nred[i]}};
        zf_tensor_t *out = NULL;
        ZF_TRY(zf_kernel_alloc_output(ctx, i, dt, &shape, &out));
        for (int j = 0; j < nred[i]; j++) {
            if (dt == ZF_INT32)
                ((int32_t *)zf_tensor_data(out))[j] = (int32_t)red[i][j];
            else
                ((int64_t *)zf_tensor_data(out))[j] = red[i][j];
        }
    }
    return ZF_STATUS_OK;
}

/* ---- registration ---------------------------------------------------------------------------- */

/* A kernel whose output's size comes from its inputs' values. */
#define S_SIZED(op_, compute_)                                                                     \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = ZF_TYPES_POD,                          \
        .flags = ZF_KERNEL_SIZED_BY_VALUE, .compute = (compute_)                                   \
    }

static const zf_kernel_t s_defs[] = {
    S_SIZED("Tile", s_tile_compute),
    S_SIZED("Pad", s_pad_compute),
    S_SIZED("PadV2", s_pad_v2_compute),
    {.op = "MirrorPad",
     .device_type = "CPU",
     .allowed_types = ZF_TYPES_POD,
     .flags = ZF_KERNEL_SIZED_BY_VALUE,
     .create = s_mirror_create,
     .destroy = free,
     .compute = s_mirror_pad_compute},
    ZF_CPU_KERNEL("ReverseV2", ZF_TYPES_POD, s_reverse_compute),
    S_SIZED("BroadcastTo", s_broadcast_to_compute),
    ZF_CPU_KERNEL("BroadcastGradientArgs", ZF_TYPES_INDEX, s_bcast_args_compute),
};

zf_status_t zf__kernels_register_pad(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
