/* CPU Conv2D (NHWC input, HWIO filter, SAME/VALID padding, strides,
 * dilations of 1) by im2col + GEMM through OpenBLAS, and MaxPool and
 * AvgPool (NHWC), for FLOAT and DOUBLE.
 *
 * Conv2D builds the patch matrix in tiles of output rows (bounded scratch)
 * with the device pool, then multiplies each tile by the filter viewed as a
 * [KH*KW*C, OC] matrix; OpenBLAS threads the GEMM itself. A 1x1 filter with
 * stride 1 skips the patch matrix. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_util.h"

/* Bytes of patch matrix built at a time: small enough to stay in cache
 * between building a tile and multiplying it. */
#define S_SCRATCH_BYTES ((size_t)4 << 20)

/* ---- windows --------------------------------------------------------------------- */

typedef struct {
    int64_t kh, kw; /* window (pools only; Conv2D reads the filter) */
    int64_t sh, sw; /* strides */
    bool same;      /* SAME padding, else VALID */
} s_window_t;

/* Reads a 4-entry NHWC list attr (strides, ksize) whose batch and depth
 * entries must be 1; stores the H and W entries. */
static zf_status_t s_attr_hw(const Tensorflow__NodeDef *node, const char *key, int64_t *h,
                             int64_t *w)
{
    const int64_t *v = NULL;
    size_t n = 0;
    ZF_TRY(zf_node_attr_list_int(node, key, &v, &n));
    if (n != 4)
        return zf_invalid_argument("%s (%s): %s must specify 4 dimensions, got %zu", node->name,
                                   node->op, key, n);
    if (v[0] != 1 || v[3] != 1)
        return zf_unimplemented("%s (%s): %s in the batch and depth dimensions must be 1, got "
                                "[%lld,%lld,%lld,%lld]",
                                node->name, node->op, key, (long long)v[0], (long long)v[1],
                                (long long)v[2], (long long)v[3]);
    if (v[1] < 1 || v[2] < 1 || v[1] > INT32_MAX || v[2] > INT32_MAX)
        return zf_invalid_argument("%s (%s): %s must be in [1, 2^31), got [1,%lld,%lld,1]",
                                   node->name, node->op, key, (long long)v[1], (long long)v[2]);
    *h = v[1];
    *w = v[2];
    return ZF_STATUS_OK;
}

static zf_status_t s_check_nhwc(const Tensorflow__NodeDef *node)
{
    const uint8_t *fmt = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string_or(node, "data_format", "NHWC", &fmt, &len));
    if (len == 4 && memcmp(fmt, "NHWC", 4) == 0) return ZF_STATUS_OK;
    return zf_unimplemented("%s (%s): only data_format NHWC is supported on CPU, got '%.*s'",
                            node->name, node->op, (int)(len > 16 ? 16 : len), (const char *)fmt);
}

static zf_status_t s_window_create(const Tensorflow__NodeDef *node, bool pool, void **state)
{
    s_window_t w = {1, 1, 1, 1, false};
    ZF_TRY(s_check_nhwc(node));
    ZF_TRY(s_attr_hw(node, "strides", &w.sh, &w.sw));
    ZF_TRY(zf_kernels_attr_padding(node, &w.same));
    if (pool) ZF_TRY(s_attr_hw(node, "ksize", &w.kh, &w.kw));
    if (!pool && zf_node_attr(node, "dilations")) {
        int64_t dh = 1, dw = 1;
        ZF_TRY(s_attr_hw(node, "dilations", &dh, &dw));
        if (dh != 1 || dw != 1)
            return zf_unimplemented("%s (%s): dilations other than 1 are not supported, got "
                                    "[1,%lld,%lld,1]",
                                    node->name, node->op, (long long)dh, (long long)dw);
    }
    s_window_t *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("window kernel");
    *p = w;
    *state = p;
    return ZF_STATUS_OK;
}

/* TensorFlow's windowed output size and leading padding along one dim. */
static zf_status_t s_out_size(const zf_kernel_ctx_t *ctx, bool same, int64_t in, int64_t k,
                              int64_t s, int64_t *out, int64_t *pad)
{
    *pad = 0;
    if (same) {
        *out = (in + s - 1) / s;
        int64_t total = (*out - 1) * s + k - in;
        *pad = total > 0 ? total / 2 : 0;
        return ZF_STATUS_OK;
    }
    *out = (in - k + s) / s;
    if (in - k + s < 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Computed output size would be negative: %lld [input_size: %lld, "
                               "effective_filter_size: %lld, stride: %lld]",
                               (long long)*out, (long long)in, (long long)k, (long long)s);
    return ZF_STATUS_OK;
}

/* Input, window and output geometry of one NHWC window op. */
typedef struct {
    int64_t n, h, w, c;     /* input */
    int64_t kh, kw;         /* window */
    int64_t sh, sw, pt, pl; /* strides, top and left padding */
    int64_t oh, ow, oc;     /* output (oc = channels out) */
} s_geom_t;

static zf_status_t s_geometry(const zf_kernel_ctx_t *ctx, const s_window_t *win, int64_t kh,
                              int64_t kw, s_geom_t *g)
{
    const zf_tensor_t *x = ctx->inputs[0];
    const zf_shape_t *s = zf_tensor_shape(x);
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (s->rank != 4)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "input must be 4-dimensional%s",
                               zf_kernels_shape_str(x, sbuf));
    *g = (s_geom_t){.n = s->dims[0],
                    .h = s->dims[1],
                    .w = s->dims[2],
                    .c = s->dims[3],
                    .kh = kh,
                    .kw = kw,
                    .sh = win->sh,
                    .sw = win->sw,
                    .oc = s->dims[3]};
    ZF_TRY(s_out_size(ctx, win->same, g->h, kh, g->sh, &g->oh, &g->pt));
    return s_out_size(ctx, win->same, g->w, kw, g->sw, &g->ow, &g->pl);
}

/* ---- Conv2D ----------------------------------------------------------------------------- */

typedef struct {
    const s_geom_t *g;
    const char *in; /* batch b's input */
    char *patches;  /* [rows, kh*kw*c] */
    int64_t row0;   /* first output pixel (oy*ow + ox) of the tile */
    size_t elem;
} s_im2col_t;

/* One window row of a patch: kw pixels of c channels from input row y
 * starting at column x0; in-bounds rows are one contiguous copy. */
static void s_window_row(const s_im2col_t *j, int64_t y, int64_t x0, char *dst)
{
    const s_geom_t *g = j->g;
    size_t run = (size_t)g->c * j->elem;
    if (y < 0 || y >= g->h) {
        memset(dst, 0, run * (size_t)g->kw);
        return;
    }
    const char *src = j->in + (size_t)(y * g->w * g->c) * j->elem;
    if (x0 >= 0 && x0 + g->kw <= g->w) {
        memcpy(dst, src + (size_t)(x0 * g->c) * j->elem, run * (size_t)g->kw);
        return;
    }
    for (int64_t x = x0; x < x0 + g->kw; x++, dst += run) {
        if (x < 0 || x >= g->w)
            memset(dst, 0, run);
        else
            memcpy(dst, src + (size_t)(x * g->c) * j->elem, run);
    }
}

/* Fills patch rows [begin, end) of the tile: each is one output pixel's
 * window, padding zero. */
static void s_im2col_rows(void *arg, int64_t begin, int64_t end)
{
    const s_im2col_t *j = arg;
    const s_geom_t *g = j->g;
    size_t wrow = (size_t)(g->kw * g->c) * j->elem;
    for (int64_t r = begin; r < end; r++) {
        int64_t p = j->row0 + r, oy = p / g->ow, ox = p % g->ow;
        char *dst = j->patches + (size_t)r * wrow * (size_t)g->kh;
        for (int64_t ky = 0; ky < g->kh; ky++, dst += wrow)
            s_window_row(j, oy * g->sh - g->pt + ky, ox * g->sw - g->pl, dst);
    }
}

/* out[m, oc] = a[m, k] * f[k, oc], all row-major. */
static void s_gemm(zf_dtype_t t, int64_t m, int64_t k, int64_t oc, const void *a, const void *f,
                   void *out)
{
    if (t == ZF_FLOAT)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)oc, (blasint)k,
                    1.0f, a, (blasint)k, f, (blasint)oc, 0.0f, out, (blasint)oc);
    else
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)oc, (blasint)k,
                    1.0, a, (blasint)k, f, (blasint)oc, 0.0, out, (blasint)oc);
}

static zf_status_t s_conv_check(const zf_kernel_ctx_t *ctx, const s_window_t *win, s_geom_t *g)
{
    const zf_tensor_t *x = ctx->inputs[0], *f = ctx->inputs[1];
    const zf_shape_t *fs = zf_tensor_shape(f);
    char s1[ZF_SHAPE_STRING_MAX], s2[ZF_SHAPE_STRING_MAX];
    zf_dtype_t t = zf_tensor_dtype(x);
    if (t != ZF_FLOAT && t != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    ZF_TRY(zf_kernels_check_dtype(ctx, 1, t));
    if (fs->rank != 4)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "filter must be 4-dimensional: %s",
                               zf_kernels_shape_str(f, s1));
    ZF_TRY(s_geometry(ctx, win, fs->dims[0], fs->dims[1], g));
    if (fs->dims[2] != g->c)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "input and filter must have the same depth: %lld vs %lld (input "
                               "%s, filter %s)",
                               (long long)g->c, (long long)fs->dims[2], zf_kernels_shape_str(x, s1),
                               zf_kernels_shape_str(f, s2));
    g->oc = fs->dims[3];
    int64_t k = g->kh * g->kw * g->c;
    if (k > INT32_MAX || g->oc > INT32_MAX || g->oh * g->ow > INT32_MAX)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED, "convolution too large for one BLAS call");
    return ZF_STATUS_OK;
}

/* Runs the convolution of every batch, tile by tile. */
static zf_status_t s_conv_run(zf_kernel_ctx_t *ctx, const s_geom_t *g, zf_tensor_t *out)
{
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[0]);
    size_t elem = zf_dtype_size(t);
    int64_t k = g->kh * g->kw * g->c, pixels = g->oh * g->ow;
    const char *in = zf_tensor_data(ctx->inputs[0]);
    const void *filter = zf_tensor_data(ctx->inputs[1]);
    char *o = zf_tensor_data(out);
    bool direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1;
    if (direct) { /* the input already is the patch matrix */
        for (int64_t b = 0; b < g->n; b++)
            s_gemm(t, pixels, k, g->oc, in + (size_t)(b * pixels * k) * elem, filter,
                   o + (size_t)(b * pixels * g->oc) * elem);
        return ZF_STATUS_OK;
    }
    int64_t tile = (int64_t)(S_SCRATCH_BYTES / ((size_t)k * elem));
    if (tile < 1) tile = 1;
    if (tile > pixels) tile = pixels;
    char *patches = aligned_alloc(64, ((size_t)(tile * k) * elem + 63) / 64 * 64);
    if (!patches) return zf_kernel_error(ctx, ZF_RESOURCE_EXHAUSTED, "no memory for patches");
    for (int64_t b = 0; b < g->n; b++) {
        s_im2col_t job = {g, in + (size_t)(b * g->h * g->w * g->c) * elem, patches, 0, elem};
        for (int64_t row0 = 0; row0 < pixels; row0 += tile) {
            int64_t rows = pixels - row0 < tile ? pixels - row0 : tile;
            job.row0 = row0;
            zf_kernels_parallel_for(ctx, rows, ZF_KERNELS_PARALLEL_MIN / k + 1, s_im2col_rows,
                                    &job);
            s_gemm(t, rows, k, g->oc, patches, filter,
                   o + (size_t)((b * pixels + row0) * g->oc) * elem);
        }
    }
    free(patches);
    return ZF_STATUS_OK;
}

static zf_status_t s_conv_create(const Tensorflow__NodeDef *node, void **state)
{
    return s_window_create(node, false, state);
}

static zf_status_t s_conv_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
    s_geom_t g;
    ZF_TRY(s_conv_check(ctx, ctx->state, &g));
    zf_shape_t shape = {.rank = 4, .dims = {g.n, g.oh, g.ow, g.oc}};
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, zf_tensor_dtype(ctx->inputs[0]), &shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    if (g.kh * g.kw * g.c == 0) { /* empty windows sum to zero */
        memset(zf_tensor_data(out), 0, zf_tensor_nbytes(out));
        return ZF_STATUS_OK;
    }
    return s_conv_run(ctx, &g, out);
}

/* ---- MaxPool, AvgPool ------------------------------------------------------------------------ */

typedef struct {
    const s_geom_t *g;
    bool max;
    zf_dtype_t dtype;
    const void *in;
    void *out;
} s_pool_job_t;

/* One output row (b, oy) of pooled pixels; the window is clipped to the
 * input, so padding never contributes (AvgPool divides by what is left). */
#define S_POOL_ROW(T)                                                                              \
    do {                                                                                           \
        const T *in = (const T *)j->in + b * g->h * g->w * g->c;                                   \
        T *o = (T *)j->out + ((b * g->oh + oy) * g->ow) * g->c;                                    \
        for (int64_t ox = 0; ox < g->ow; ox++, o += g->c) {                                        \
            int64_t x0 = ox * g->sw - g->pl, x1 = x0 + g->kw;                                      \
            x0 = x0 < 0 ? 0 : x0;                                                                  \
            x1 = x1 > g->w ? g->w : x1;                                                            \
            int64_t count = (y1 - y0) * (x1 - x0);                                                 \
            for (int64_t c = 0; c < g->c; c++) o[c] = j->max ? -(T)INFINITY : 0;                   \
            for (int64_t y = y0; y < y1; y++)                                                      \
                for (int64_t x = x0; x < x1; x++) {                                                \
                    const T *p = in + (y * g->w + x) * g->c;                                       \
                    if (j->max)                                                                    \
                        for (int64_t c = 0; c < g->c; c++) o[c] = p[c] > o[c] ? p[c] : o[c];       \
                    else                                                                           \
                        for (int64_t c = 0; c < g->c; c++) o[c] += p[c];                           \
                }                                                                                  \
            if (!j->max && count > 0)                                                              \
                for (int64_t c = 0; c < g->c; c++) o[c] /= (T)count;                               \
        }                                                                                          \
    } while (0)

static void s_pool_rows(void *arg, int64_t begin, int64_t end)
{
    const s_pool_job_t *j = arg;
    const s_geom_t *g = j->g;
    for (int64_t r = begin; r < end; r++) {
        int64_t b = r / g->oh, oy = r % g->oh;
        int64_t y0 = oy * g->sh - g->pt, y1 = y0 + g->kh;
        y0 = y0 < 0 ? 0 : y0;
        y1 = y1 > g->h ? g->h : y1;
        if (j->dtype == ZF_FLOAT)
            S_POOL_ROW(float);
        else
            S_POOL_ROW(double);
    }
}

static zf_status_t s_pool_create(const Tensorflow__NodeDef *node, void **state)
{
    return s_window_create(node, true, state);
}

static zf_status_t s_pool(zf_kernel_ctx_t *ctx, bool max)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const s_window_t *win = ctx->state;
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[0]);
    if (t != ZF_FLOAT && t != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    s_geom_t g;
    ZF_TRY(s_geometry(ctx, win, win->kh, win->kw, &g));
    zf_shape_t shape = {.rank = 4, .dims = {g.n, g.oh, g.ow, g.c}};
    zf_tensor_t *out = NULL;
    ZF_TRY(zf_kernel_alloc_output(ctx, 0, t, &shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    s_pool_job_t job = {&g, max, t, zf_tensor_data(ctx->inputs[0]), zf_tensor_data(out)};
    int64_t per_row = g.ow * g.c * win->kh * win->kw;
    zf_kernels_parallel_for(ctx, g.n * g.oh, ZF_KERNELS_PARALLEL_MIN / per_row + 1, s_pool_rows,
                            &job);
    return ZF_STATUS_OK;
}

static zf_status_t s_max_pool_compute(zf_kernel_ctx_t *ctx)
{
    return s_pool(ctx, true);
}

static zf_status_t s_avg_pool_compute(zf_kernel_ctx_t *ctx)
{
    return s_pool(ctx, false);
}

/* ---- registration
 * -------------------------------------------------------------------------------- */

#define S_KERNEL(op_, create_, compute_)                                                           \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = ZF_TYPES_FLOAT,                        \
        .flags = ZF_KERNEL_EXPENSIVE, .create = (create_), .destroy = free, .compute = (compute_)  \
    }

static const zf_kernel_t s_defs[] = {
    S_KERNEL("Conv2D", s_conv_create, s_conv_compute),
    S_KERNEL("MaxPool", s_pool_create, s_max_pool_compute),
    S_KERNEL("AvgPool", s_pool_create, s_avg_pool_compute),
};

zf_status_t zf__kernels_register_conv(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
