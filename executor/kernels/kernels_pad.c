/* CPU kernels that grow, repeat or reorder a tensor's elements: Tile, Pad,
 * PadV2, MirrorPad (REFLECT and SYMMETRIC), ReverseV2 and BroadcastTo,
 * all through an index map (remap.h) over bytes of any fixed-size dtype;
 * and BroadcastGradientArgs, which computes on shapes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"
#include "executor/kernels/remap.h"

/* How each output dim maps to the input's: what the kernels below set. */
typedef struct {
    int64_t src[ZF_MAX_RANK];    /* the input's dims (BroadcastTo: aligned to the output) */
    int64_t before[ZF_MAX_RANK]; /* padding before each dim */
    bool flip[ZF_MAX_RANK];      /* ReverseV2 */
    int offset;                  /* MirrorPad: 1 REFLECT, 0 SYMMETRIC */
} s_map_t;

/* Fills idx[0..n), the input index of each position of output dim k. */
typedef void (*s_dim_fn)(const s_map_t *m, int k, int64_t *idx, int64_t n);

/* Allocates output 0 of shape with input 0's dtype and gathers it from
 * input 0 through fn's map; fill (NULL: zeros) where the map says
 * ZF_REMAP_FILL. */
static zf_status_t s_map_output(zf_kernel_ctx_t *ctx, const zf_shape_t *shape, const s_map_t *m,
                                s_dim_fn fn, const void *fill)
{
    const zf_tensor_t *x = ctx->inputs[0];
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(x), shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    zf_remap_t r;
    ZF_TRY(zf_remap_init(&r, shape));
    for (int k = 0; k < shape->rank; k++) fn(m, k, r.idx[k], shape->dims[k]);
    zf_status_t s = zf_remap_gather(ctx, &r, m->src, zf_tensor_data(x), zf_tensor_data(out),
                                    zf_dtype_size(zf_tensor_dtype(x)), fill);
    zf_remap_free(&r);
    return s;
}

/* A map whose source is input 0 as it is. */
static void s_map_input(const zf_kernel_ctx_t *ctx, s_map_t *m)
{
    memset(m, 0, sizeof *m);
    const zf_shape_t *in = zf_tensor_shape(ctx->inputs[0]);
    memcpy(m->src, in->dims, sizeof m->src);
}

/* ---- Tile -------------------------------------------------------------------------------- */

static void s_tile_dim(const s_map_t *m, int k, int64_t *idx, int64_t n)
{
    for (int64_t j = 0; j < n; j++) idx[j] = j % m->src[k];
}

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
    s_map_t m;
    s_map_input(ctx, &m);
    return s_map_output(ctx, &shape, &m, s_tile_dim, NULL);
}

/* ---- Pad, PadV2, MirrorPad --------------------------------------------------------------- */

/* Reads input 1, paddings: an int32 or int64 [rank, 2] matrix, into
 * m->before and after, and the padded shape into *shape. */
static zf_status_t s_read_paddings(const zf_kernel_ctx_t *ctx, s_map_t *m, int64_t *after,
                                   zf_shape_t *shape)
{
    const zf_tensor_t *x = ctx->inputs[0], *p = ctx->inputs[1];
    const zf_shape_t *ps = zf_tensor_shape(p), *in = zf_tensor_shape(x);
    char pbuf[ZF_SHAPE_STRING_MAX], xbuf[ZF_SHAPE_STRING_MAX];
    ZF_TRY(zf_remap_check_index_dtype(ctx, 1, "paddings"));
    if (ps->rank != 2 || ps->dims[1] != 2)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "paddings must be a matrix with 2 columns: %s",
                               zf_kernels_shape_str(p, pbuf));
    if (ps->dims[0] != in->rank)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "The first dimension of paddings must be the rank of inputs %s, %s",
                               zf_kernels_shape_str(p, pbuf), zf_kernels_shape_str(x, xbuf));
    s_map_input(ctx, m);
    shape->rank = in->rank;
    for (int i = 0; i < in->rank; i++) {
        int64_t b = zf_remap_index_at(p, 2 * i), a = zf_remap_index_at(p, 2 * i + 1);
        if (b < 0 || a < 0)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "Paddings must be non-negative: %lld %lld", (long long)b,
                                   (long long)a);
        if (__builtin_add_overflow(b, in->dims[i], &shape->dims[i]) ||
            __builtin_add_overflow(shape->dims[i], a, &shape->dims[i]))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "output dimension is too large");
        m->before[i] = b;
        after[i] = a;
    }
    return ZF_STATUS_OK;
}

static void s_pad_dim(const s_map_t *m, int k, int64_t *idx, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        int64_t p = j - m->before[k];
        idx[j] = p >= 0 && p < m->src[k] ? p : ZF_REMAP_FILL;
    }
}

/* Pad and PadV2: constant padding with the element at fill. */
static zf_status_t s_pad_constant(zf_kernel_ctx_t *ctx, const void *fill)
{
    s_map_t m;
    int64_t after[ZF_MAX_RANK];
    zf_shape_t shape;
    ZF_TRY(s_read_paddings(ctx, &m, after, &shape));
    return s_map_output(ctx, &shape, &m, s_pad_dim, fill);
}

static zf_status_t s_pad_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    return s_pad_constant(ctx, NULL);
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

/* MirrorPad's state is the mode's offset plus one (never NULL): the offset
 * is 1 for REFLECT (the edge is not repeated), 0 for SYMMETRIC. */
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
    *state = (void *)(uintptr_t)(offset + 1);
    return ZF_STATUS_OK;
}

static void s_mirror_dim(const s_map_t *m, int k, int64_t *idx, int64_t n)
{
    int64_t d = m->src[k];
    for (int64_t j = 0; j < n; j++) {
        int64_t p = j - m->before[k];
        if (p < 0) p = -p - 1 + m->offset;
        if (p >= d) p = 2 * d - 1 - m->offset - p;
        idx[j] = p;
    }
}

static zf_status_t s_mirror_pad_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    s_map_t m;
    int64_t after[ZF_MAX_RANK];
    zf_shape_t shape;
    ZF_TRY(s_read_paddings(ctx, &m, after, &shape));
    m.offset = (int)((uintptr_t)ctx->state - 1);
    for (int i = 0; i < shape.rank; i++) {
        int64_t d = m.src[i], b = m.before[i], a = after[i];
        if (m.offset == 0 && (b > d || a > d))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "paddings must be no greater than the dimension size: %lld, "
                                   "%lld greater than %lld",
                                   (long long)b, (long long)a, (long long)d);
        if (m.offset == 1 && (b >= d || a >= d))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "paddings must be less than the dimension size: %lld, %lld not "
                                   "less than %lld",
                                   (long long)b, (long long)a, (long long)d);
    }
    return s_map_output(ctx, &shape, &m, s_mirror_dim, NULL);
}

/* ---- ReverseV2 --------------------------------------------------------------------------- */

static void s_reverse_dim(const s_map_t *m, int k, int64_t *idx, int64_t n)
{
    for (int64_t j = 0; j < n; j++) idx[j] = m->flip[k] ? n - 1 - j : j;
}

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
    s_map_t m;
    s_map_input(ctx, &m);
    for (int i = 0; i < n; i++) {
        int a = 0;
        if (!zf_kernels_axis(axes[i], in->rank, &a))
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                                   "'axis'[%d] = %lld is out of valid range [%d, %d] for input %s",
                                   i, (long long)axes[i], -in->rank, in->rank - 1,
                                   zf_kernels_shape_str(x, sbuf));
        if (m.flip[a])
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "axis %d specified more than once.",
                                   a);
        m.flip[a] = true;
    }
    return s_map_output(ctx, in, &m, s_reverse_dim, NULL);
}

/* ---- BroadcastTo ------------------------------------------------------------------------- */

static void s_broadcast_dim(const s_map_t *m, int k, int64_t *idx, int64_t n)
{
    for (int64_t j = 0; j < n; j++) idx[j] = m->src[k] == 1 ? 0 : j;
}

static zf_status_t s_broadcast_to_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *in = zf_tensor_shape(x);
    char xbuf[ZF_SHAPE_STRING_MAX], sbuf[ZF_SHAPE_STRING_MAX];
    zf_shape_t shape;
    ZF_TRY(zf_remap_input_shape(ctx, 1, "shape", &shape));
    /* the input's dims aligned to the output's from the right, 1 before */
    s_map_t m;
    memset(&m, 0, sizeof m);
    bool ok = in->rank <= shape.rank;
    for (int k = 0; ok && k < shape.rank; k++) {
        int i = k - (shape.rank - in->rank);
        m.src[k] = i >= 0 ? in->dims[i] : 1;
        ok = m.src[k] == shape.dims[k] || m.src[k] == 1;
    }
    if (!ok)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Unable to broadcast tensor of shape %s to tensor of shape %s",
                               zf_kernels_shape_str(x, xbuf),
                               zf_shape_to_string(&shape, sbuf, sizeof sbuf));
    return s_map_output(ctx, &shape, &m, s_broadcast_dim, NULL);
}

/* ---- BroadcastGradientArgs --------------------------------------------------------------- */

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

/* ---- registration ------------------------------------------------------------------------ */

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
     .compute = s_mirror_pad_compute},
    ZF_CPU_KERNEL("ReverseV2", ZF_TYPES_POD, s_reverse_compute),
    S_SIZED("BroadcastTo", s_broadcast_to_compute),
    ZF_CPU_KERNEL("BroadcastGradientArgs", ZF_TYPES_INDEX, s_bcast_args_compute),
};

zf_status_t zf__kernels_register_pad(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
