/* CPU Conv2D, DepthwiseConv2dNative, MaxPool (and MaxPoolV2, its window
 * from inputs) and AvgPool with TensorFlow's attrs (strides, dilations,
 * SAME/VALID/EXPLICIT padding, NHWC or NCHW), and the gradients
 * Conv2DBackpropInput, Conv2DBackpropFilter, MaxPoolGrad and AvgPoolGrad.
 * Float runs on oneDNN (kernels_dnnl.c); double, which oneDNN lacks, on the
 * loops here, NHWC only: Conv2D by im2col + GEMM through OpenBLAS (patch
 * matrix built in tiles of output rows with the device pool; a 1x1 filter
 * with stride 1 skips it), depthwise, pools and the gradients by direct
 * window scans. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "executor/kernels/kernels_conv.h"
#include "executor/kernels/kernels_util.h"

/* Bytes of patch matrix built at a time: small enough to stay in cache
 * between building a tile and multiplying it. */
#define S_SCRATCH_BYTES ((size_t)4 << 20)

/* ---- windows --------------------------------------------------------------------- */

enum { S_SAME, S_VALID, S_EXPLICIT };

typedef struct {
    zf__win_kind_t kind;
    bool nchw;
    int64_t kh, kw;  /* window (pools only; convolutions read the filter) */
    int64_t sh, sw;  /* strides */
    int64_t dh, dw;  /* dilations */
    int padding;     /* S_SAME, S_VALID, S_EXPLICIT */
    int64_t pads[4]; /* EXPLICIT: top, bottom, left, right */
    zf__dnnl_cache_t *dnnl;
} s_window_t;

/* Checks a 4-entry window list (strides, ksize, dilations) in the node's
 * layout, whose batch and depth entries must be 1; stores the H and W
 * entries. */
static zf_status_t s_hw_values(const Tensorflow__NodeDef *node, const char *key, const int64_t *v,
                               size_t n, bool nchw, int64_t *h, int64_t *w)
{
    if (n != 4)
        return zf_invalid_argument("%s (%s): %s must specify 4 dimensions, got %zu", node->name,
                                   node->op, key, n);
    int ih = nchw ? 2 : 1, iw = nchw ? 3 : 2, ic = nchw ? 1 : 3;
    if (v[0] != 1 || v[ic] != 1)
        return zf_unimplemented("%s (%s): %s in the batch and depth dimensions must be 1, got "
                                "[%lld,%lld,%lld,%lld]",
                                node->name, node->op, key, (long long)v[0], (long long)v[1],
                                (long long)v[2], (long long)v[3]);
    if (v[ih] < 1 || v[iw] < 1 || v[ih] > INT32_MAX || v[iw] > INT32_MAX)
        return zf_invalid_argument("%s (%s): %s must be in [1, 2^31), got [%lld,%lld,%lld,%lld]",
                                   node->name, node->op, key, (long long)v[0], (long long)v[1],
                                   (long long)v[2], (long long)v[3]);
    *h = v[ih];
    *w = v[iw];
    return ZF_STATUS_OK;
}

/* The same for a list attr. */
static zf_status_t s_attr_hw(const Tensorflow__NodeDef *node, const char *key, bool nchw,
                             int64_t *h, int64_t *w)
{
    const int64_t *v = NULL;
    size_t n = 0;
    ZF_TRY(zf_node_attr_list_int(node, key, &v, &n));
    return s_hw_values(node, key, v, n, nchw, h, w);
}

static zf_status_t s_attr_format(const Tensorflow__NodeDef *node, bool *nchw)
{
    const uint8_t *fmt = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string_or(node, "data_format", "NHWC", &fmt, &len));
    *nchw = len == 4 && memcmp(fmt, "NCHW", 4) == 0;
    if (*nchw || (len == 4 && memcmp(fmt, "NHWC", 4) == 0)) return ZF_STATUS_OK;
    return zf_invalid_argument("%s (%s): Invalid data format '%.*s'", node->name, node->op,
                               (int)(len > 16 ? 16 : len), (const char *)fmt);
}

/* padding and explicit_paddings, checked as TensorFlow's CheckValidPadding. */
static zf_status_t s_attr_conv_padding(const Tensorflow__NodeDef *node, s_window_t *w)
{
    const uint8_t *p = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string(node, "padding", &p, &len));
    if (len == 4 && memcmp(p, "SAME", 4) == 0)
        w->padding = S_SAME;
    else if (len == 5 && memcmp(p, "VALID", 5) == 0)
        w->padding = S_VALID;
    else if (len == 8 && memcmp(p, "EXPLICIT", 8) == 0)
        w->padding = S_EXPLICIT;
    else
        return zf_invalid_argument("%s (%s): padding must be SAME, VALID or EXPLICIT, got '%.*s'",
                                   node->name, node->op, (int)(len > 32 ? 32 : len),
                                   (const char *)p);
    const int64_t *v = NULL;
    size_t n = 0;
    if (zf_node_attr(node, "explicit_paddings"))
        ZF_TRY(zf_node_attr_list_int(node, "explicit_paddings", &v, &n));
    if (w->padding != S_EXPLICIT) {
        if (n == 0) return ZF_STATUS_OK;
        return zf_invalid_argument("%s (%s): explicit_paddings attribute must be empty if the "
                                   "padding attribute is not EXPLICIT",
                                   node->name, node->op);
    }
    if (n != 8)
        return zf_invalid_argument(
            "%s (%s): explicit_paddings attribute must contain 8 values, but got: %zu", node->name,
            node->op, n);
    for (size_t i = 0; i < n; i++) {
        if (v[i] < 0)
            return zf_invalid_argument(
                "%s (%s): All elements of explicit_paddings must be nonnegative", node->name,
                node->op);
        if (v[i] > INT32_MAX)
            return zf_invalid_argument("%s (%s): explicit_paddings must be below 2^31, got %lld",
                                       node->name, node->op, (long long)v[i]);
    }
    int b = 0, c = w->nchw ? 1 : 3, h = w->nchw ? 2 : 1, x = w->nchw ? 3 : 2;
    if (v[2 * b] || v[2 * b + 1] || v[2 * c] || v[2 * c + 1])
        return zf_invalid_argument("%s (%s): Nonzero explicit padding in the batch or depth "
                                   "dimensions is not supported",
                                   node->name, node->op);
    w->pads[0] = v[2 * h];
    w->pads[1] = v[2 * h + 1];
    w->pads[2] = v[2 * x];
    w->pads[3] = v[2 * x + 1];
    return ZF_STATUS_OK;
}

static void s_window_destroy(void *state)
{
    s_window_t *w = state;
    if (!w) return;
    zf__dnnl_cache_destroy(&w->dnnl);
    free(w);
}

static zf_status_t s_window_create(const Tensorflow__NodeDef *node, zf__win_kind_t kind,
                                   void **state)
{
    s_window_t w = {.kind = kind, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1};
    bool pool = kind == ZF__WIN_MAXPOOL || kind == ZF__WIN_AVGPOOL || kind == ZF__WIN_MAXPOOL_BWD ||
                kind == ZF__WIN_AVGPOOL_BWD;
    bool v2 = strcmp(node->op, "MaxPoolV2") == 0; /* ksize and strides are inputs */
    ZF_TRY(s_attr_format(node, &w.nchw));
    if (!v2) ZF_TRY(s_attr_hw(node, "strides", w.nchw, &w.sh, &w.sw));
    if (pool) {
        bool same = false;
        ZF_TRY(zf_kernels_attr_padding(node, &same));
        w.padding = same ? S_SAME : S_VALID;
        if (!v2) ZF_TRY(s_attr_hw(node, "ksize", w.nchw, &w.kh, &w.kw));
    } else {
        ZF_TRY(s_attr_conv_padding(node, &w));
        if (zf_node_attr(node, "dilations"))
            ZF_TRY(s_attr_hw(node, "dilations", w.nchw, &w.dh, &w.dw));
    }
    s_window_t *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("window kernel");
    *p = w;
    zf_status_t s = zf__dnnl_cache_new(&p->dnnl);
    if (!zf_ok(s)) {
        free(p);
        return s;
    }
    *state = p;
    return ZF_STATUS_OK;
}

/* TensorFlow's windowed output size and padding along one dim
 * (GetWindowedOutputSizeVerbose), the window dilated to (k - 1) * d + 1. */
static zf_status_t s_out_size(const zf_kernel_ctx_t *ctx, const s_window_t *win, int64_t in,
                              int64_t k, int64_t s, int64_t d, const int64_t *pads, int64_t *out,
                              int64_t *before, int64_t *after)
{
    int64_t eff = (k - 1) * d + 1;
    *before = *after = 0;
    if (win->padding == S_SAME) {
        *out = (in + s - 1) / s;
        int64_t total = (*out - 1) * s + eff - in;
        if (total > 0) {
            *before = total / 2;
            *after = total - *before;
        }
    } else if (win->padding == S_VALID) {
        *out = (in - eff + s) / s;
    } else {
        *before = pads[0];
        *after = pads[1];
        *out = (in + *before + *after - eff + s) / s;
    }
    if (*out < 0)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "Computed output size would be negative: %lld [input_size: %lld, "
                               "effective_filter_size: %lld, stride: %lld]",
                               (long long)*out, (long long)in, (long long)eff, (long long)s);
    return ZF_STATUS_OK;
}

/* The geometry of one window op on an input of shape s, with a kh x kw
 * window. */
static zf_status_t s_geometry_of(const zf_kernel_ctx_t *ctx, const s_window_t *win,
                                 const zf_shape_t *s, int64_t kh, int64_t kw, zf__win_geom_t *g)
{
    char sbuf[ZF_SHAPE_STRING_MAX];
    if (s->rank != 4)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "input must be 4-dimensional%s",
                               zf_shape_to_string(s, sbuf, sizeof sbuf));
    *g = (zf__win_geom_t){.kind = win->kind,
                          .nchw = win->nchw,
                          .n = s->dims[0],
                          .h = s->dims[win->nchw ? 2 : 1],
                          .w = s->dims[win->nchw ? 3 : 2],
                          .c = s->dims[win->nchw ? 1 : 3],
                          .kh = kh,
                          .kw = kw,
                          .sh = win->sh,
                          .sw = win->sw,
                          .dh = win->dh,
                          .dw = win->dw};
    g->oc = g->c;
    ZF_TRY(s_out_size(ctx, win, g->h, kh, g->sh, g->dh, &win->pads[0], &g->oh, &g->pt, &g->pb));
    return s_out_size(ctx, win, g->w, kw, g->sw, g->dw, &win->pads[2], &g->ow, &g->pl, &g->pr);
}

/* The same on input 0. */
static zf_status_t s_geometry(const zf_kernel_ctx_t *ctx, const s_window_t *win, int64_t kh,
                              int64_t kw, zf__win_geom_t *g)
{
    return s_geometry_of(ctx, win, zf_tensor_shape(ctx->inputs[0]), kh, kw, g);
}

static zf_shape_t s_out_shape(const zf__win_geom_t *g)
{
    if (g->nchw) return (zf_shape_t){.rank = 4, .dims = {g->n, g->oc, g->oh, g->ow}};
    return (zf_shape_t){.rank = 4, .dims = {g->n, g->oh, g->ow, g->oc}};
}

/* The portable loops cover NHWC only. */
static zf_status_t s_check_portable(const zf_kernel_ctx_t *ctx, const zf__win_geom_t *g)
{
    if (!g->nchw) return ZF_STATUS_OK;
    return zf_kernel_error(ctx, ZF_UNIMPLEMENTED,
                           "data_format NCHW is only supported for float on CPU, got %s",
                           zf_kernels_dtype_name((int)zf_tensor_dtype(ctx->inputs[0])));
}

/* ---- Conv2D by im2col (double, and the benchmarks' reference) ------------------------- */

typedef struct {
    const zf__win_geom_t *g;
    const char *in; /* batch b's input */
    char *patches;  /* [rows, kh*kw*c] */
    int64_t row0;   /* first output pixel (oy*ow + ox) of the tile */
    size_t elem;
} s_im2col_t;

/* One window row of a patch: kw pixels (dw apart) of c channels from input
 * row y starting at column x0; padding is zero. An undilated in-bounds row
 * is one contiguous copy. */
static void s_window_row(const s_im2col_t *j, int64_t y, int64_t x0, char *dst)
{
    const zf__win_geom_t *g = j->g;
    size_t run = (size_t)g->c * j->elem;
    if (y < 0 || y >= g->h) {
        memset(dst, 0, run * (size_t)g->kw);
        return;
    }
    const char *src = j->in + (size_t)(y * g->w * g->c) * j->elem;
    if (g->dw == 1 && x0 >= 0 && x0 + g->kw <= g->w) {
        memcpy(dst, src + (size_t)(x0 * g->c) * j->elem, run * (size_t)g->kw);
        return;
    }
    for (int64_t kx = 0; kx < g->kw; kx++, dst += run) {
        int64_t x = x0 + kx * g->dw;
        if (x < 0 || x >= g->w)
            memset(dst, 0, run);
        else
            memcpy(dst, src + (size_t)(x * g->c) * j->elem, run);
    }
}

/* Fills patch rows [begin, end) of the tile: each is one output pixel's
 * window. */
static void s_im2col_rows(void *arg, int64_t begin, int64_t end)
{
    const s_im2col_t *j = arg;
    const zf__win_geom_t *g = j->g;
    size_t wrow = (size_t)(g->kw * g->c) * j->elem;
    for (int64_t r = begin; r < end; r++) {
        int64_t p = j->row0 + r, oy = p / g->ow, ox = p % g->ow;
        char *dst = j->patches + (size_t)r * wrow * (size_t)g->kh;
        for (int64_t ky = 0; ky < g->kh; ky++, dst += wrow)
            s_window_row(j, oy * g->sh - g->pt + ky * g->dh, ox * g->sw - g->pl, dst);
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

/* Runs the convolution of every batch, tile by tile. */
static zf_status_t s_im2col_run(zf_kernel_ctx_t *ctx, const zf__win_geom_t *g, zf_tensor_t *out)
{
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[0]);
    size_t elem = zf_dtype_size(t);
    int64_t k = g->kh * g->kw * g->c, pixels = g->oh * g->ow;
    if (k > INT32_MAX || g->oc > INT32_MAX || pixels > INT32_MAX)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED, "convolution too large for one BLAS call");
    const char *in = zf_tensor_data(ctx->inputs[0]);
    const void *filter = zf_tensor_data(ctx->inputs[1]);
    char *o = zf_tensor_data(out);
    bool direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 &&
                  g->pl == 0 && g->oh == g->h && g->ow == g->w;
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

/* ---- DepthwiseConv2dNative (double) ------------------------------------------------------ */

typedef struct {
    const zf__win_geom_t *g;
    const double *in, *filter;
    double *out;
} s_depthwise_job_t;

/* Output rows r = (b, oy) in [begin, end): out[b,oy,ox,c*M+m] sums
 * in[b, iy, ix, c] * filter[ky, kx, c, m] over the in-bounds window. */
static void s_depthwise_rows(void *arg, int64_t begin, int64_t end)
{
    const s_depthwise_job_t *j = arg;
    const zf__win_geom_t *g = j->g;
    int64_t m_count = g->oc / g->c;
    for (int64_t r = begin; r < end; r++) {
        int64_t b = r / g->oh, oy = r % g->oh;
        double *o = j->out + (b * g->oh + oy) * g->ow * g->oc;
        for (int64_t ox = 0; ox < g->ow; ox++, o += g->oc) {
            for (int64_t i = 0; i < g->oc; i++) o[i] = 0;
            for (int64_t ky = 0; ky < g->kh; ky++) {
                int64_t iy = oy * g->sh - g->pt + ky * g->dh;
                if (iy < 0 || iy >= g->h) continue;
                for (int64_t kx = 0; kx < g->kw; kx++) {
                    int64_t ix = ox * g->sw - g->pl + kx * g->dw;
                    if (ix < 0 || ix >= g->w) continue;
                    const double *p = j->in + ((b * g->h + iy) * g->w + ix) * g->c;
                    const double *f = j->filter + (ky * g->kw + kx) * g->oc;
                    for (int64_t c = 0; c < g->c; c++)
                        for (int64_t m = 0; m < m_count; m++)
                            o[c * m_count + m] += p[c] * f[c * m_count + m];
                }
            }
        }
    }
}

/* ---- Conv2D, DepthwiseConv2dNative ----------------------------------------------------- */

/* Checks a convolution's inputs and fills its geometry. */
static zf_status_t s_conv_check(const zf_kernel_ctx_t *ctx, const s_window_t *win,
                                zf__win_geom_t *g)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 2));
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
    for (int i = 0; i < 4; i++)
        if (fs->dims[i] > INT32_MAX)
            return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "filter too large");
    ZF_TRY(s_geometry(ctx, win, fs->dims[0], fs->dims[1], g));
    if (fs->dims[2] != g->c)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "input and filter must have the same depth: %lld vs %lld (input "
                               "%s, filter %s)",
                               (long long)g->c, (long long)fs->dims[2], zf_kernels_shape_str(x, s1),
                               zf_kernels_shape_str(f, s2));
    g->oc = win->kind == ZF__WIN_DEPTHWISE ? g->c * fs->dims[3] : fs->dims[3];
    return ZF_STATUS_OK;
}

/* Computes a convolution node; im2col forces the portable Conv2D. */
static zf_status_t s_conv(zf_kernel_ctx_t *ctx, bool im2col)
{
    const s_window_t *win = ctx->state;
    zf__win_geom_t g;
    ZF_TRY(s_conv_check(ctx, win, &g));
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[0]);
    bool portable = im2col || t != ZF_FLOAT;
    if (portable) ZF_TRY(s_check_portable(ctx, &g));
    zf_shape_t shape = s_out_shape(&g);
    zf_tensor_t *out = NULL;
    /* oneDNN writes the whole output; the portable loops get zeros */
    ZF_TRY(portable ? zf_kernel_alloc_output(ctx, 0, t, &shape, &out)
                    : zf_kernel_alloc_output_uninit(ctx, 0, t, &shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    if (g.kh * g.kw * g.c == 0 || g.h * g.w == 0) { /* empty or all-padding windows: zero */
        memset(zf_tensor_data(out), 0, zf_tensor_nbytes(out));
        return ZF_STATUS_OK;
    }
    if (!portable) return zf__dnnl_run(ctx, win->dnnl, &g, ctx->inputs[0], ctx->inputs[1], out);
    if (win->kind == ZF__WIN_CONV) return s_im2col_run(ctx, &g, out);
    s_depthwise_job_t job = {&g, zf_tensor_data(ctx->inputs[0]), zf_tensor_data(ctx->inputs[1]),
                             zf_tensor_data(out)};
    int64_t per_row = g.ow * g.oc * g.kh * g.kw;
    zf_kernels_parallel_for(ctx, g.n * g.oh, ZF_KERNELS_PARALLEL_MIN / per_row + 1,
                            s_depthwise_rows, &job);
    return ZF_STATUS_OK;
}

static zf_status_t s_conv_create(const Tensorflow__NodeDef *node, void **state)
{
    return s_window_create(node, ZF__WIN_CONV, state);
}

static zf_status_t s_depthwise_create(const Tensorflow__NodeDef *node, void **state)
{
    return s_window_create(node, ZF__WIN_DEPTHWISE, state);
}

static zf_status_t s_conv_compute(zf_kernel_ctx_t *ctx)
{
    return s_conv(ctx, false);
}

zf_status_t zf__kernels_conv2d_create(const Tensorflow__NodeDef *node, void **state)
{
    return s_conv_create(node, state);
}

void zf__kernels_window_destroy(void *state)
{
    s_window_destroy(state);
}

zf_status_t zf__kernels_conv2d_geometry(const zf_kernel_ctx_t *ctx, zf__win_geom_t *g,
                                        zf_shape_t *out_shape)
{
    ZF_TRY(s_conv_check(ctx, ctx->state, g));
    *out_shape = s_out_shape(g);
    return ZF_STATUS_OK;
}

zf_status_t zf__kernels_conv2d_im2col(zf_kernel_ctx_t *ctx)
{
    const s_window_t *win = ctx->state;
    if (win->kind != ZF__WIN_CONV)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "im2col runs Conv2D only");
    return s_conv(ctx, true);
}

/* ---- MaxPool, AvgPool ------------------------------------------------------------------------ */

typedef struct {
    const zf__win_geom_t *g;
    bool max;
    const double *in;
    double *out;
} s_pool_job_t;

/* Output rows r = (b, oy) in [begin, end); the window is clipped to the
 * input, so padding never contributes (AvgPool divides by what is left). */
static void s_pool_rows(void *arg, int64_t begin, int64_t end)
{
    const s_pool_job_t *j = arg;
    const zf__win_geom_t *g = j->g;
    for (int64_t r = begin; r < end; r++) {
        int64_t b = r / g->oh, oy = r % g->oh;
        int64_t y0 = oy * g->sh - g->pt, y1 = y0 + g->kh;
        y0 = y0 < 0 ? 0 : y0;
        y1 = y1 > g->h ? g->h : y1;
        const double *in = j->in + b * g->h * g->w * g->c;
        double *o = j->out + ((b * g->oh + oy) * g->ow) * g->c;
        for (int64_t ox = 0; ox < g->ow; ox++, o += g->c) {
            int64_t x0 = ox * g->sw - g->pl, x1 = x0 + g->kw;
            x0 = x0 < 0 ? 0 : x0;
            x1 = x1 > g->w ? g->w : x1;
            int64_t count = (y1 - y0) * (x1 - x0);
            for (int64_t c = 0; c < g->c; c++) o[c] = j->max ? -INFINITY : 0;
            for (int64_t y = y0; y < y1; y++)
                for (int64_t x = x0; x < x1; x++) {
                    const double *p = in + (y * g->w + x) * g->c;
                    if (j->max)
                        for (int64_t c = 0; c < g->c; c++) o[c] = p[c] > o[c] ? p[c] : o[c];
                    else
                        for (int64_t c = 0; c < g->c; c++) o[c] += p[c];
                }
            if (!j->max && count > 0)
                for (int64_t c = 0; c < g->c; c++) o[c] /= (double)count;
        }
    }
}

static zf_status_t s_max_pool_create(const Tensorflow__NodeDef *node, void **state)
{
    return s_window_create(node, ZF__WIN_MAXPOOL, state);
}

static zf_status_t s_avg_pool_create(const Tensorflow__NodeDef *node, void **state)
{
    return s_window_create(node, ZF__WIN_AVGPOOL, state);
}

/* MaxPoolV2's window from its ksize and strides inputs. */
static zf_status_t s_window_from_inputs(const zf_kernel_ctx_t *ctx, s_window_t *w)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    int64_t v[4];
    int n = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, 1, "ksize", v, 4, &n));
    ZF_TRY(s_hw_values(ctx->node, "ksize", v, (size_t)n, w->nchw, &w->kh, &w->kw));
    ZF_TRY(zf_kernels_input_ints(ctx, 2, "strides", v, 4, &n));
    return s_hw_values(ctx->node, "strides", v, (size_t)n, w->nchw, &w->sh, &w->sw);
}

static zf_status_t s_pool_compute(zf_kernel_ctx_t *ctx)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 1));
    const s_window_t *win = ctx->state;
    s_window_t v2;
    if (strcmp(ctx->node->op, "MaxPoolV2") == 0) {
        v2 = *win;
        ZF_TRY(s_window_from_inputs(ctx, &v2));
        win = &v2;
    }
    zf_dtype_t t = zf_tensor_dtype(ctx->inputs[0]);
    if (t != ZF_FLOAT && t != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)t));
    zf__win_geom_t g;
    ZF_TRY(s_geometry(ctx, win, win->kh, win->kw, &g));
    if (t != ZF_FLOAT) ZF_TRY(s_check_portable(ctx, &g));
    zf_shape_t shape = s_out_shape(&g);
    zf_tensor_t *out = NULL;
    ZF_TRY(t == ZF_FLOAT ? zf_kernel_alloc_output_uninit(ctx, 0, t, &shape, &out)
                         : zf_kernel_alloc_output(ctx, 0, t, &shape, &out));
    if (zf_tensor_num_elements(out) == 0) return ZF_STATUS_OK;
    if (t == ZF_FLOAT) return zf__dnnl_run(ctx, win->dnnl, &g, ctx->inputs[0], NULL, out);
    s_pool_job_t job = {&g, win->kind == ZF__WIN_MAXPOOL, zf_tensor_data(ctx->inputs[0]),
                        zf_tensor_data(out)};
    int64_t per_row = g.ow * g.c * win->kh * win->kw;
    zf_kernels_parallel_for(ctx, g.n * g.oh, ZF_KERNELS_PARALLEL_MIN / per_row + 1, s_pool_rows,
                            &job);
    return ZF_STATUS_OK;
}

/* ---- gradients: Conv2DBackpropInput/Filter, MaxPoolGrad, AvgPoolGrad ------------------- */

/* The double gradients, NHWC, on loops. */
typedef struct {
    const zf__win_geom_t *g;
    const double *x, *f, *dy; /* the forward input and filter, where used */
    double *out;
} s_grad_job_t;

/* Conv2DBackpropInput: input rows r = (b, iy) in [begin, end) gather the
 * gradients of the outputs whose windows cover them. */
static void s_conv_grad_input_rows(void *arg, int64_t begin, int64_t end)
{
    const s_grad_job_t *j = arg;
    const zf__win_geom_t *g = j->g;
    for (int64_t r = begin; r < end; r++) {
        int64_t b = r / g->h, iy = r % g->h;
        double *dx = j->out + r * g->w * g->c;
        memset(dx, 0, sizeof(double) * (size_t)(g->w * g->c));
        for (int64_t ky = 0; ky < g->kh; ky++) {
            int64_t ty = iy + g->pt - ky * g->dh;
            if (ty < 0 || ty % g->sh || ty / g->sh >= g->oh) continue;
            for (int64_t ix = 0; ix < g->w; ix++)
                for (int64_t kx = 0; kx < g->kw; kx++) {
                    int64_t tx = ix + g->pl - kx * g->dw;
                    if (tx < 0 || tx % g->sw || tx / g->sw >= g->ow) continue;
                    const double *d =
                        j->dy + ((b * g->oh + ty / g->sh) * g->ow + tx / g->sw) * g->oc;
                    const double *f = j->f + (ky * g->kw + kx) * g->c * g->oc;
                    for (int64_t c = 0; c < g->c; c++) {
                        double sum = 0;
                        for (int64_t o = 0; o < g->oc; o++) sum += f[c * g->oc + o] * d[o];
                        dx[ix * g->c + c] += sum;
                    }
                }
        }
    }
}

/* Conv2DBackpropFilter: filter taps t = (ky, kx) in [begin, end) sum over
 * every output pixel. */
static void s_conv_grad_filter_taps(void *arg, int64_t begin, int64_t end)
{
    const s_grad_job_t *j = arg;
    const zf__win_geom_t *g = j->g;
    for (int64_t t = begin; t < end; t++) {
        int64_t ky = t / g->kw, kx = t % g->kw;
        double *df = j->out + t * g->c * g->oc;
        memset(df, 0, sizeof(double) * (size_t)(g->c * g->oc));
        for (int64_t b = 0; b < g->n; b++)
            for (int64_t oy = 0; oy < g->oh; oy++) {
                int64_t iy = oy * g->sh - g->pt + ky * g->dh;
                if (iy < 0 || iy >= g->h) continue;
                for (int64_t ox = 0; ox < g->ow; ox++) {
                    int64_t ix = ox * g->sw - g->pl + kx * g->dw;
                    if (ix < 0 || ix >= g->w) continue;
                    const double *x = j->x + ((b * g->h + iy) * g->w + ix) * g->c;
                    const double *d = j->dy + ((b * g->oh + oy) * g->ow + ox) * g->oc;
                    for (int64_t c = 0; c < g->c; c++)
                        for (int64_t o = 0; o < g->oc; o++) df[c * g->oc + o] += x[c] * d[o];
                }
            }
    }
}

/* MaxPoolGrad (each output's gradient to its window's first maximum) and
 * AvgPoolGrad (shared by the window's in-bounds pixels), batches in
 * [begin, end). */
static void s_pool_grad_batches(void *arg, int64_t begin, int64_t end)
{
    const s_grad_job_t *j = arg;
    const zf__win_geom_t *g = j->g;
    bool max = g->kind == ZF__WIN_MAXPOOL_BWD;
    for (int64_t b = begin; b < end; b++) {
        double *dx = j->out + b * g->h * g->w * g->c;
        const double *x = max ? j->x + b * g->h * g->w * g->c : NULL;
        memset(dx, 0, sizeof(double) * (size_t)(g->h * g->w * g->c));
        for (int64_t oy = 0; oy < g->oh; oy++) {
            int64_t y0 = oy * g->sh - g->pt, y1 = y0 + g->kh;
            y0 = y0 < 0 ? 0 : y0;
            y1 = y1 > g->h ? g->h : y1;
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t x0 = ox * g->sw - g->pl, x1 = x0 + g->kw;
                x0 = x0 < 0 ? 0 : x0;
                x1 = x1 > g->w ? g->w : x1;
                double count = (double)((y1 - y0) * (x1 - x0));
                const double *d = j->dy + ((b * g->oh + oy) * g->ow + ox) * g->c;
                for (int64_t c = 0; c < g->c && count > 0; c++) {
                    int64_t best = -1;
                    for (int64_t y = y0; y < y1; y++)
                        for (int64_t xx = x0; xx < x1; xx++) {
                            int64_t i = (y * g->w + xx) * g->c + c;
                            if (!max)
                                dx[i] += d[c] / count;
                            else if (best < 0 || x[i] > x[best])
                                best = i;
                        }
                    if (max) dx[best] += d[c];
                }
            }
        }
    }
}

/* A 4-D shape from input i, an int32 vector (input_sizes, filter_sizes,
 * orig_input_shape). With spatial (Conv2DBackpropInput), two values are
 * the height and width: batch and depth come from spatial[0] and
 * spatial[1] and the layout from nchw. */
static zf_status_t s_shape_input(const zf_kernel_ctx_t *ctx, int i, const char *what,
                                 const int64_t *spatial, bool nchw, zf_shape_t *out)
{
    int64_t v[4];
    int n = 0;
    ZF_TRY(zf_kernels_input_ints(ctx, i, what, v, 4, &n));
    if (n == 2 && spatial) {
        int64_t h = v[0], w = v[1];
        v[0] = spatial[0];
        v[nchw ? 1 : 3] = spatial[1];
        v[nchw ? 2 : 1] = h;
        v[nchw ? 3 : 2] = w;
        n = 4;
    }
    if (n != 4)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must have 4 elements%s, got %d", what,
                               spatial ? " (or 2, the height and width)" : "", n);
    for (int k = 0; k < 4; k++)
        if (v[k] < 0 || v[k] > INT32_MAX)
            return zf_kernel_error(
                ctx, ZF_INVALID_ARGUMENT, "%s must be in [0, 2^31), got [%lld,%lld,%lld,%lld]",
                what, (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3]);
    *out = (zf_shape_t){.rank = 4, .dims = {v[0], v[1], v[2], v[3]}};
    return ZF_STATUS_OK;
}

/* INVALID_ARGUMENT unless input i (named what) has shape want, the output
 * shape of the forward op on an input of shape in. */
static zf_status_t s_expect_shape(const zf_kernel_ctx_t *ctx, int i, const char *what,
                                  const zf_shape_t *want, const zf_shape_t *in)
{
    const zf_shape_t *got = zf_tensor_shape(ctx->inputs[i]);
    if (zf_shape_equal(got, want)) return ZF_STATUS_OK;
    char a[ZF_SHAPE_STRING_MAX], b[ZF_SHAPE_STRING_MAX], c[ZF_SHAPE_STRING_MAX];
    return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "%s must have shape %s for input %s, got %s",
                           what, zf_shape_to_string(want, a, sizeof a),
                           zf_shape_to_string(in, b, sizeof b),
                           zf_shape_to_string(got, c, sizeof c));
}

/* The gradients' dtype, that of input i (float or double), which input j
 * (or none, -1) must share. */
static zf_status_t s_grad_dtype(const zf_kernel_ctx_t *ctx, int i, int j, zf_dtype_t *t)
{
    *t = zf_tensor_dtype(ctx->inputs[i]);
    if (*t != ZF_FLOAT && *t != ZF_DOUBLE)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "no CPU kernel for %s inputs",
                               zf_kernels_dtype_name((int)*t));
    return j < 0 ? ZF_STATUS_OK : zf_kernels_check_dtype(ctx, j, *t);
}

/* Allocates output 0 of shape and dtype t and runs g: float on oneDNN,
 * double on the loops (NHWC); zeros when a sum is empty. */
static zf_status_t s_grad_run(zf_kernel_ctx_t *ctx, const zf__win_geom_t *g,
                              const zf_shape_t *shape, zf_dtype_t t, zf__dnnl_args_t *a)
{
    const s_window_t *win = ctx->state;
    if (t != ZF_FLOAT && g->nchw)
        return zf_kernel_error(ctx, ZF_UNIMPLEMENTED,
                               "data_format NCHW is only supported for float on CPU, got %s",
                               zf_kernels_dtype_name((int)t));
    ZF_TRY(t == ZF_FLOAT ? zf_kernel_alloc_output_uninit(ctx, 0, t, shape, &a->out)
                         : zf_kernel_alloc_output(ctx, 0, t, shape, &a->out));
    if (zf_tensor_num_elements(a->out) == 0) return ZF_STATUS_OK;
    if (zf_tensor_num_elements(a->diff_dst) == 0 || g->kh * g->kw == 0) {
        memset(zf_tensor_data(a->out), 0, zf_tensor_nbytes(a->out));
        return ZF_STATUS_OK;
    }
    if (t == ZF_FLOAT) return zf__dnnl_exec(ctx, win->dnnl, g, a);
    s_grad_job_t j = {g, a->src ? zf_tensor_data(a->src) : NULL,
                      a->weights ? zf_tensor_data(a->weights) : NULL, zf_tensor_data(a->diff_dst),
                      zf_tensor_data(a->out)};
    int64_t taps = g->kh * g->kw, pixel = g->c * g->oc;
    if (g->kind == ZF__WIN_CONV_BWD_INPUT)
        zf_kernels_parallel_for(ctx, g->n * g->h,
                                ZF_KERNELS_PARALLEL_MIN / (g->w * taps * pixel) + 1,
                                s_conv_grad_input_rows, &j);
    else if (g->kind == ZF__WIN_CONV_BWD_FILTER)
        zf_kernels_parallel_for(ctx, taps,
                                ZF_KERNELS_PARALLEL_MIN / (g->n * g->oh * g->ow * pixel) + 1,
                                s_conv_grad_filter_taps, &j);
    else
        zf_kernels_parallel_for(ctx, g->n,
                                ZF_KERNELS_PARALLEL_MIN / (g->oh * g->ow * g->c * taps) + 1,
                                s_pool_grad_batches, &j);
    return ZF_STATUS_OK;
}

/* Conv2DBackpropInput (input_sizes, filter, out_backprop) and
 * Conv2DBackpropFilter (input, filter_sizes, out_backprop). */
static zf_status_t s_conv_grad(zf_kernel_ctx_t *ctx, bool filter_grad)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, 3));
    const s_window_t *win = ctx->state;
    zf_dtype_t t;
    ZF_TRY(s_grad_dtype(ctx, 2, filter_grad ? 0 : 1, &t));
    zf_shape_t sizes;
    const zf_shape_t *dys = zf_tensor_shape(ctx->inputs[2]), *fis = zf_tensor_shape(ctx->inputs[1]);
    int64_t spatial[2] = {dys->rank > 0 ? dys->dims[0] : 0, fis->rank == 4 ? fis->dims[2] : 0};
    ZF_TRY(s_shape_input(ctx, filter_grad ? 1 : 0, filter_grad ? "filter_sizes" : "input_sizes",
                         filter_grad ? NULL : spatial, win->nchw, &sizes));
    const zf_shape_t *xs = filter_grad ? zf_tensor_shape(ctx->inputs[0]) : &sizes;
    const zf_shape_t *fs = filter_grad ? &sizes : zf_tensor_shape(ctx->inputs[1]);
    char s1[ZF_SHAPE_STRING_MAX], s2[ZF_SHAPE_STRING_MAX];
    if (fs->rank != 4)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "filter must be 4-dimensional: %s",
                               zf_shape_to_string(fs, s1, sizeof s1));
    zf__win_geom_t g;
    ZF_TRY(s_geometry_of(ctx, win, xs, fs->dims[0], fs->dims[1], &g));
    if (fs->dims[2] != g.c)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT,
                               "input and filter must have the same depth: %lld vs %lld (input "
                               "%s, filter %s)",
                               (long long)g.c, (long long)fs->dims[2],
                               zf_shape_to_string(xs, s1, sizeof s1),
                               zf_shape_to_string(fs, s2, sizeof s2));
    g.oc = fs->dims[3];
    g.kind = filter_grad ? ZF__WIN_CONV_BWD_FILTER : ZF__WIN_CONV_BWD_INPUT;
    zf_shape_t ys = s_out_shape(&g);
    ZF_TRY(s_expect_shape(ctx, 2, "out_backprop", &ys, xs));
    zf__dnnl_args_t a = {.src = filter_grad ? ctx->inputs[0] : NULL,
                         .weights = filter_grad ? NULL : ctx->inputs[1],
                         .diff_dst = ctx->inputs[2]};
    return s_grad_run(ctx, &g, filter_grad ? fs : xs, t, &a);
}

static zf_status_t s_conv_grad_input_compute(zf_kernel_ctx_t *ctx)
{
    return s_conv_grad(ctx, false);
}

static zf_status_t s_conv_grad_filter_compute(zf_kernel_ctx_t *ctx)
{
    return s_conv_grad(ctx, true);
}

static zf_status_t s_conv_grad_create(const Tensorflow__NodeDef *node, void **state)
{
    return s_window_create(node, ZF__WIN_CONV_BWD_INPUT, state);
}

/* MaxPoolGrad (orig_input, orig_output, grad) and AvgPoolGrad
 * (orig_input_shape, grad). */
static zf_status_t s_pool_grad(zf_kernel_ctx_t *ctx, bool max)
{
    ZF_TRY(zf_kernels_check_inputs(ctx, max ? 3 : 2));
    const s_window_t *win = ctx->state;
    int gi = max ? 2 : 1;
    zf_dtype_t t;
    ZF_TRY(s_grad_dtype(ctx, gi, max ? 0 : -1, &t));
    zf_shape_t xs;
    if (max) {
        ZF_TRY(zf_kernels_check_dtype(ctx, 1, t));
        xs = *zf_tensor_shape(ctx->inputs[0]);
    } else {
        ZF_TRY(s_shape_input(ctx, 0, "orig_input_shape", NULL, false, &xs));
    }
    zf__win_geom_t g;
    ZF_TRY(s_geometry_of(ctx, win, &xs, win->kh, win->kw, &g));
    g.kind = max ? ZF__WIN_MAXPOOL_BWD : ZF__WIN_AVGPOOL_BWD;
    zf_shape_t ys = s_out_shape(&g);
    if (max) ZF_TRY(s_expect_shape(ctx, 1, "orig_output", &ys, &xs));
    ZF_TRY(s_expect_shape(ctx, gi, "grad", &ys, &xs));
    zf__dnnl_args_t a = {.src = max ? ctx->inputs[0] : NULL, .diff_dst = ctx->inputs[gi]};
    return s_grad_run(ctx, &g, &xs, t, &a);
}

static zf_status_t s_max_pool_grad_compute(zf_kernel_ctx_t *ctx)
{
    return s_pool_grad(ctx, true);
}

static zf_status_t s_avg_pool_grad_compute(zf_kernel_ctx_t *ctx)
{
    return s_pool_grad(ctx, false);
}

static zf_status_t s_max_pool_grad_create(const Tensorflow__NodeDef *node, void **state)
{
    return s_window_create(node, ZF__WIN_MAXPOOL_BWD, state);
}

static zf_status_t s_avg_pool_grad_create(const Tensorflow__NodeDef *node, void **state)
{
    return s_window_create(node, ZF__WIN_AVGPOOL_BWD, state);
}

/* ---- registration ------------------------------------------------------------------------ */

#define S_KERNEL(op_, create_, compute_)                                                           \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = ZF_TYPES_FLOAT,                        \
        .flags = ZF_KERNEL_EXPENSIVE, .create = (create_), .destroy = s_window_destroy,            \
        .compute = (compute_)                                                                      \
    }

static const zf_kernel_t s_defs[] = {
    S_KERNEL("Conv2D", s_conv_create, s_conv_compute),
    S_KERNEL("MaxPool", s_max_pool_create, s_pool_compute),
    S_KERNEL("AvgPool", s_avg_pool_create, s_pool_compute),
    S_KERNEL("DepthwiseConv2dNative", s_depthwise_create, s_conv_compute),
    S_KERNEL("MaxPoolV2", s_max_pool_create, s_pool_compute),
    S_KERNEL("Conv2DBackpropInput", s_conv_grad_create, s_conv_grad_input_compute),
    S_KERNEL("Conv2DBackpropFilter", s_conv_grad_create, s_conv_grad_filter_compute),
    S_KERNEL("MaxPoolGrad", s_max_pool_grad_create, s_max_pool_grad_compute),
    S_KERNEL("AvgPoolGrad", s_avg_pool_grad_create, s_avg_pool_grad_compute),
};

zf_status_t zf__kernels_register_conv(void)
{
    return zf__kernels_register_defs(s_defs, (int)(sizeof s_defs / sizeof s_defs[0]));
}
