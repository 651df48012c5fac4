/* Tests for the window gradients of executor/kernels/kernels_conv (float
 * on oneDNN, double on loops): Conv2DBackpropInput, Conv2DBackpropFilter, MaxPoolGrad and
 * AvgPoolGrad against naive loops written here and against central finite
 * differences of the forward kernels (Conv2D, MaxPool, AvgPool; in double
 * for NHWC, where the forward kernels run double), over SAME/VALID/
 * EXPLICIT padding, strides, dilations, NHWC and NCHW; MaxPoolV2 against
 * MaxPool; empty shapes and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

/* One window op: shapes given as N, H, W, C whatever the layout. */
typedef struct {
    bool nchw;
    int64_t n, h, w, c;
    int64_t kh, kw, oc; /* filter or window; oc: output channels (convolutions) */
    int64_t sh, sw, dh, dw;
    const char *padding;
    int64_t pads[4]; /* EXPLICIT: top, bottom, left, right */
} s_case_t;

static double s_get(const zf_tensor_t *t, int64_t i)
{
    return zf_tensor_dtype(t) == ZF_FLOAT ? ((const float *)zf_tensor_data(t))[i]
                                          : ((const double *)zf_tensor_data(t))[i];
}

static void s_set(zf_tensor_t *t, int64_t i, double v)
{
    if (zf_tensor_dtype(t) == ZF_FLOAT)
        ((float *)zf_tensor_data(t))[i] = (float)v;
    else
        ((double *)zf_tensor_data(t))[i] = v;
}

static zf_tensor_t *s_as(zf_dtype_t t, const zf_tensor_t *src)
{
    zf_tensor_t *d = kt_zeros(t, *zf_tensor_shape(src));
    for (int64_t i = 0; i < zf_tensor_num_elements(src); i++) s_set(d, i, s_get(src, i));
    return d;
}

static int64_t s_at(bool nchw, int64_t H, int64_t W, int64_t C, int64_t b, int64_t y, int64_t x,
                    int64_t c)
{
    return nchw ? ((b * C + c) * H + y) * W + x : ((b * H + y) * W + x) * C + c;
}

static zf_shape_t s_shape(bool nchw, int64_t n, int64_t h, int64_t w, int64_t c)
{
    return nchw ? ZF_SHAPE(n, c, h, w) : ZF_SHAPE(n, h, w, c);
}

/* Output size and padding before along one dim, computed independently. */
static void s_dim(const s_case_t *k, int64_t in, int64_t kk, int64_t s, int64_t d, int64_t pb,
                  int64_t pa, int64_t *out, int64_t *before)
{
    int64_t eff = (kk - 1) * d + 1;
    if (strcmp(k->padding, "EXPLICIT") == 0) {
        *out = (in + pb + pa - eff) / s + 1;
        *before = pb;
    } else if (strcmp(k->padding, "SAME") == 0) {
        *out = (in + s - 1) / s;
        int64_t total = (*out - 1) * s + eff - in;
        *before = total > 0 ? total / 2 : 0;
    } else {
        *out = (in - eff) / s + 1;
        *before = 0;
    }
}

typedef struct {
    int64_t oh, ow, pt, pl;
} s_out_t;

static s_out_t s_out(const s_case_t *k)
{
    s_out_t o;
    s_dim(k, k->h, k->kh, k->sh, k->dh, k->pads[0], k->pads[1], &o.oh, &o.pt);
    s_dim(k, k->w, k->kw, k->sw, k->dw, k->pads[2], k->pads[3], &o.ow, &o.pl);
    return o;
}

/* A node of op with the case's attrs (ksize for pools). */
static Tensorflow__NodeDef *s_node(const char *op, const s_case_t *k, zf_dtype_t t, int inputs)
{
    Tensorflow__NodeDef *n = kt_node_new("g", op, inputs);
    kt_attr_type(n, "T", t);
    bool pool = strstr(op, "Pool") != NULL;
    if (k->nchw) {
        KT_ATTR_INTS(n, "strides", 1, 1, k->sh, k->sw);
        if (pool)
            KT_ATTR_INTS(n, "ksize", 1, 1, k->kh, k->kw);
        else
            KT_ATTR_INTS(n, "dilations", 1, 1, k->dh, k->dw);
        kt_attr_string(n, "data_format", "NCHW");
        if (strcmp(k->padding, "EXPLICIT") == 0)
            KT_ATTR_INTS(n, "explicit_paddings", 0, 0, 0, 0, k->pads[0], k->pads[1], k->pads[2],
                         k->pads[3]);
    } else {
        KT_ATTR_INTS(n, "strides", 1, k->sh, k->sw, 1);
        if (pool)
            KT_ATTR_INTS(n, "ksize", 1, k->kh, k->kw, 1);
        else
            KT_ATTR_INTS(n, "dilations", 1, k->dh, k->dw, 1);
        if (strcmp(k->padding, "EXPLICIT") == 0)
            KT_ATTR_INTS(n, "explicit_paddings", 0, 0, k->pads[0], k->pads[1], k->pads[2],
                         k->pads[3], 0, 0);
    }
    kt_attr_string(n, "padding", k->padding);
    return n;
}

static zf_tensor_t *s_sizes(zf_shape_t s)
{
    return KT_I32(ZF_SHAPE(4), (int32_t)s.dims[0], (int32_t)s.dims[1], (int32_t)s.dims[2],
                  (int32_t)s.dims[3]);
}

static void s_expect_close(const char *what, const zf_tensor_t *got, const double *want, double tol)
{
    for (int64_t i = 0; i < zf_tensor_num_elements(got); i++)
        if (fabs(s_get(got, i) - want[i]) > tol * (1 + fabs(want[i])))
            fail_msg("%s [%lld]: %.9g vs %.9g", what, (long long)i, s_get(got, i), want[i]);
}

/* ---- finite differences ------------------------------------------------------------------ */

/* sum(fwd(in) * w): a scalar whose gradient in the forward op's output is w. */
static double s_loss(const Tensorflow__NodeDef *fwd, zf_tensor_t **in, int n_in,
                     const zf_tensor_t *w)
{
    zf_tensor_t *y = NULL;
    ASSERT_OK(kt_run(fwd, in, n_in, &y, 1));
    assert_int_equal(zf_tensor_num_elements(y), zf_tensor_num_elements(w));
    double l = 0;
    for (int64_t i = 0; i < zf_tensor_num_elements(y); i++) l += s_get(y, i) * s_get(w, i);
    zf_tensor_unref(&y);
    return l;
}

/* Central differences of s_loss in every element of in[k]. */
static double *s_fd(const Tensorflow__NodeDef *fwd, zf_tensor_t **in, int n_in, int k,
                    const zf_tensor_t *w, double h)
{
    int64_t n = zf_tensor_num_elements(in[k]);
    double *d = calloc((size_t)n + 1, sizeof *d);
    assert_non_null(d);
    for (int64_t i = 0; i < n; i++) {
        double v = s_get(in[k], i);
        s_set(in[k], i, v + h);
        double lp = s_loss(fwd, in, n_in, w);
        s_set(in[k], i, v - h);
        double lm = s_loss(fwd, in, n_in, w);
        s_set(in[k], i, v);
        d[i] = (lp - lm) / (2 * h);
    }
    return d;
}

/* ---- convolutions ------------------------------------------------------------------------- */

/* The naive gradients of the case's convolution of x by f with output
 * gradient dy: dx[n*h*w*c] and df[kh*kw*c*oc] (HWIO). */
static void s_conv_grads(const s_case_t *k, const zf_tensor_t *x, const zf_tensor_t *f,
                         const zf_tensor_t *dy, double *dx, double *df)
{
    s_out_t o = s_out(k);
    for (int64_t b = 0; b < k->n; b++)
        for (int64_t oy = 0; oy < o.oh; oy++)
            for (int64_t ox = 0; ox < o.ow; ox++)
                for (int64_t oc = 0; oc < k->oc; oc++) {
                    double g = s_get(dy, s_at(k->nchw, o.oh, o.ow, k->oc, b, oy, ox, oc));
                    for (int64_t ky = 0; ky < k->kh; ky++)
                        for (int64_t kx = 0; kx < k->kw; kx++) {
                            int64_t iy = oy * k->sh - o.pt + ky * k->dh;
                            int64_t ix = ox * k->sw - o.pl + kx * k->dw;
                            if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
                            for (int64_t c = 0; c < k->c; c++) {
                                int64_t xi = s_at(k->nchw, k->h, k->w, k->c, b, iy, ix, c);
                                int64_t fi = ((ky * k->kw + kx) * k->c + c) * k->oc + oc;
                                dx[xi] += s_get(f, fi) * g;
                                df[fi] += s_get(x, xi) * g;
                            }
                        }
                }
}

/* Random values in [-1, 1) of dtype t. */
static zf_tensor_t *s_random(zf_dtype_t t, zf_shape_t s, uint32_t seed)
{
    zf_tensor_t *f = kt_random_f32(s, seed), *d = s_as(t, f);
    zf_tensor_unref(&f);
    return d;
}

/* Both gradients of one case in dtype gt (float on oneDNN, double on the
 * loops): against the loops here and finite differences of Conv2D (double
 * for NHWC; Conv2D is linear in each input, so float differences with a
 * large step are exact up to rounding for NCHW). */
static void s_check_conv_case(const s_case_t *k, zf_dtype_t gt, zf_device_t *dev)
{
    s_out_t o = s_out(k);
    zf_shape_t xs = s_shape(k->nchw, k->n, k->h, k->w, k->c);
    zf_shape_t fs = ZF_SHAPE(k->kh, k->kw, k->c, k->oc);
    zf_shape_t ys = s_shape(k->nchw, k->n, o.oh, o.ow, k->oc);
    zf_tensor_t *x = s_random(gt, xs, 41), *f = s_random(gt, fs, 42);
    zf_tensor_t *dy = s_random(gt, ys, 43);
    double tol = gt == ZF_FLOAT ? 1e-4 : 1e-10;
    int64_t nx = zf_tensor_num_elements(x), nf = zf_tensor_num_elements(f);
    double *dx = calloc((size_t)nx + 1, sizeof *dx), *df = calloc((size_t)nf + 1, sizeof *df);
    s_conv_grads(k, x, f, dy, dx, df);

    Tensorflow__NodeDef *bi = s_node("Conv2DBackpropInput", k, gt, 3);
    Tensorflow__NodeDef *bf = s_node("Conv2DBackpropFilter", k, gt, 3);
    /* NCHW cases give input_sizes as the height and width alone */
    zf_tensor_t *isz = k->nchw ? KT_I32(ZF_SHAPE(2), (int32_t)k->h, (int32_t)k->w) : s_sizes(xs);
    zf_tensor_t *in_i[3] = {isz, f, dy}, *in_f[3] = {x, s_sizes(fs), dy};
    zf_tensor_t *gx = NULL, *gf = NULL;
    ASSERT_OK(kt_run_on(bi, in_i, 3, &gx, 1, NULL, dev));
    ASSERT_OK(kt_run_on(bf, in_f, 3, &gf, 1, NULL, dev));
    kt_expect_shape(gx, xs);
    kt_expect_shape(gf, fs);
    s_expect_close("Conv2DBackpropInput vs loops", gx, dx, tol);
    s_expect_close("Conv2DBackpropFilter vs loops", gf, df, tol);

    zf_dtype_t t = k->nchw ? ZF_FLOAT : ZF_DOUBLE;
    Tensorflow__NodeDef *fwd = s_node("Conv2D", k, t, 2);
    zf_tensor_t *in[2] = {s_as(t, x), s_as(t, f)};
    double *fdx = s_fd(fwd, in, 2, 0, dy, 0.5), *fdf = s_fd(fwd, in, 2, 1, dy, 0.5);
    s_expect_close("Conv2DBackpropInput vs differences", gx, fdx, gt == t ? tol : 1e-4);
    s_expect_close("Conv2DBackpropFilter vs differences", gf, fdf, gt == t ? tol : 1e-4);

    free(dx);
    free(df);
    free(fdx);
    free(fdf);
    kt_unref_all((zf_tensor_t *[]){x, f, dy, in_i[0], in_f[1], gx, gf, in[0], in[1]}, 9);
    kt_node_free(&bi);
    kt_node_free(&bf);
    kt_node_free(&fwd);
}

static const s_case_t s_conv_cases[] = {
    {false, 2, 5, 6, 3, 3, 3, 4, 1, 1, 1, 1, "SAME", {0}},
    {true, 2, 5, 6, 3, 3, 3, 4, 1, 1, 1, 1, "SAME", {0}},
    {false, 1, 7, 6, 2, 3, 2, 3, 2, 2, 1, 1, "VALID", {0}},
    {true, 1, 7, 8, 2, 2, 3, 3, 2, 3, 1, 1, "SAME", {0}},
    {false, 1, 7, 7, 2, 3, 3, 2, 1, 1, 2, 2, "SAME", {0}},
    {true, 1, 8, 7, 2, 2, 3, 2, 1, 2, 2, 1, "VALID", {0}},
    {false, 2, 5, 6, 2, 3, 3, 3, 1, 2, 1, 1, "EXPLICIT", {1, 2, 0, 3}},
    {true, 1, 6, 5, 3, 3, 2, 2, 2, 1, 1, 2, "EXPLICIT", {2, 0, 1, 1}},
    {false, 2, 4, 4, 5, 1, 1, 3, 1, 1, 1, 1, "VALID", {0}},
};

static void test_conv_backprop_matches_loops_and_finite_differences(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    for (size_t i = 0; i < sizeof s_conv_cases / sizeof s_conv_cases[0]; i++) {
        s_check_conv_case(&s_conv_cases[i], ZF_FLOAT, i % 2 ? dev : NULL);
        if (!s_conv_cases[i].nchw)
            s_check_conv_case(&s_conv_cases[i], ZF_DOUBLE, i % 2 ? NULL : dev);
    }
    zf_device_destroy(&dev);
}

static void test_conv_backprop_of_a_hand_checked_image(void **state)
{
    (void)state;
    /* 3x3 image, 2x2 filter of ones, VALID: each input pixel collects the
     * output gradients of the windows covering it */
    s_case_t k = {false, 1, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, "VALID", {0}};
    Tensorflow__NodeDef *n = s_node("Conv2DBackpropInput", &k, ZF_FLOAT, 3);
    zf_tensor_t *in[3] = {KT_I32(ZF_SHAPE(4), 1, 3, 3, 1), KT_F32(ZF_SHAPE(2, 2, 1, 1), 1, 1, 1, 1),
                          KT_F32(ZF_SHAPE(1, 2, 2, 1), 1, 2, 3, 4)};
    zf_tensor_t *y = NULL;
    ASSERT_OK(kt_run(n, in, 3, &y, 1));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 3, 3, 1), 1e-6, 1, 3, 2, 4, 10, 6, 3, 7, 4);
    zf_tensor_unref(&y);
    zf_tensor_unref(&in[0]); /* the height and width alone */
    in[0] = KT_I32(ZF_SHAPE(2), 3, 3);
    ASSERT_OK(kt_run(n, in, 3, &y, 1));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 3, 3, 1), 1e-6, 1, 3, 2, 4, 10, 6, 3, 7, 4);
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], in[2], y}, 4);
    kt_node_free(&n);
}

static void test_conv_backprop_handles_empty_shapes(void **state)
{
    (void)state;
    s_case_t k = {false, 1, 3, 3, 2, 2, 2, 0, 1, 1, 1, 1, "VALID", {0}};
    Tensorflow__NodeDef *bi = s_node("Conv2DBackpropInput", &k, ZF_FLOAT, 3);
    Tensorflow__NodeDef *bf = s_node("Conv2DBackpropFilter", &k, ZF_FLOAT, 3);
    /* no output channels: every gradient is an empty sum */
    zf_tensor_t *x = kt_random_f32(ZF_SHAPE(1, 3, 3, 2), 5);
    zf_tensor_t *f = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 2, 2, 0));
    zf_tensor_t *dy = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 2, 2, 0));
    zf_tensor_t *in_i[3] = {KT_I32(ZF_SHAPE(4), 1, 3, 3, 2), f, dy}, *gx = NULL;
    ASSERT_OK(kt_run(bi, in_i, 3, &gx, 1));
    KT_EXPECT_NEAR(gx, ZF_SHAPE(1, 3, 3, 2), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                   0);
    zf_tensor_t *in_f[3] = {x, KT_I32(ZF_SHAPE(4), 2, 2, 2, 0), dy}, *gf = NULL;
    ASSERT_OK(kt_run(bf, in_f, 3, &gf, 1));
    kt_expect_shape(gf, ZF_SHAPE(2, 2, 2, 0));
    /* an empty batch: the filter's gradient is zero */
    zf_tensor_t *x0 = kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3, 3, 2));
    zf_tensor_t *dy0 = kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 2, 2, 1));
    zf_tensor_t *in0[3] = {x0, KT_I32(ZF_SHAPE(4), 2, 2, 2, 1), dy0}, *gf0 = NULL;
    ASSERT_OK(kt_run(bf, in0, 3, &gf0, 1));
    KT_EXPECT_NEAR(gf0, ZF_SHAPE(2, 2, 2, 1), 0, 0, 0, 0, 0, 0, 0, 0, 0);
    kt_unref_all((zf_tensor_t *[]){x, f, dy, in_i[0], gx, in_f[1], gf, x0, dy0, in0[1], gf0}, 11);
    kt_node_free(&bi);
    kt_node_free(&bf);
}

static void test_conv_backprop_reports_bad_shapes(void **state)
{
    (void)state;
    s_case_t k = {false, 1, 5, 5, 3, 3, 3, 2, 1, 1, 1, 1, "VALID", {0}};
    Tensorflow__NodeDef *bi = s_node("Conv2DBackpropInput", &k, ZF_FLOAT, 3);
    Tensorflow__NodeDef *bf = s_node("Conv2DBackpropFilter", &k, ZF_FLOAT, 3);
    zf_tensor_t *f = kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 3, 3, 2));
    zf_tensor_t *dy = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 4, 4, 2)); /* VALID gives 3x3 */
    zf_tensor_t *sizes = KT_I32(ZF_SHAPE(4), 1, 5, 5, 3), *out = NULL;
    zf_tensor_t *in[3] = {sizes, f, dy};
    zf_test_expect_error(kt_run(bi, in, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "g (Conv2DBackpropInput): out_backprop must have shape [1,3,3,2] for "
                         "input [1,5,5,3], got [1,4,4,2]");
    zf_tensor_t *bad = KT_I32(ZF_SHAPE(3), 1, 5, 5);
    in[0] = bad;
    zf_test_expect_error(kt_run(bi, in, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "input_sizes must have 4 elements (or 2, the height and width), got 3");
    zf_tensor_t *deep = KT_I32(ZF_SHAPE(4), 1, 5, 5, 4);
    in[0] = deep;
    zf_test_expect_error(kt_run(bi, in, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "input and filter must have the same depth: 4 vs 3 (input [1,5,5,4], "
                         "filter [3,3,3,2])");
    zf_tensor_t *x = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 5, 5, 3)),
                *fsz = KT_I32(ZF_SHAPE(4), 3, 3, 3, 2);
    zf_tensor_t *in_f[3] = {x, fsz, dy};
    zf_test_expect_error(kt_run(bf, in_f, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "g (Conv2DBackpropFilter): out_backprop must have shape [1,3,3,2] for "
                         "input [1,5,5,3], got [1,4,4,2]");
    zf_tensor_t *xd = kt_zeros(ZF_DOUBLE, ZF_SHAPE(1, 5, 5, 3));
    in_f[0] = xd;
    zf_test_expect_error(kt_run(bf, in_f, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "input 0 must be float, got double");
    assert_null(out);
    kt_unref_all((zf_tensor_t *[]){f, dy, sizes, bad, deep, x, fsz, xd}, 8);
    kt_node_free(&bi);
    kt_node_free(&bf);
}

/* ---- pools -------------------------------------------------------------------------------- */

/* Distinct values 0.1 apart, shuffled: no ties within a window, and no
 * argmax change under a 0.01 step. */
static zf_tensor_t *s_distinct(zf_shape_t s, uint32_t seed)
{
    zf_tensor_t *t = kt_zeros(ZF_FLOAT, s);
    int64_t n = zf_tensor_num_elements(t);
    float *p = zf_tensor_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(0.1 * (double)i - 0.05 * (double)n);
    uint32_t r = seed;
    for (int64_t i = n - 1; i > 0; i--) {
        r = r * 1664525u + 1013904223u;
        int64_t j = (int64_t)(r % (uint32_t)(i + 1));
        float v = p[i];
        p[i] = p[j];
        p[j] = v;
    }
    return t;
}

/* The naive pool gradient: each output's gradient to its window's first
 * maximum, or shared by the window's in-bounds pixels. */
static void s_pool_grad(const s_case_t *k, bool max, const zf_tensor_t *x, const zf_tensor_t *dy,
                        double *dx)
{
    s_out_t o = s_out(k);
    for (int64_t b = 0; b < k->n; b++)
        for (int64_t c = 0; c < k->c; c++)
            for (int64_t oy = 0; oy < o.oh; oy++)
                for (int64_t ox = 0; ox < o.ow; ox++) {
                    double g = s_get(dy, s_at(k->nchw, o.oh, o.ow, k->c, b, oy, ox, c));
                    int64_t best = -1, count = 0;
                    for (int pass = 0; pass < 2; pass++)
                        for (int64_t ky = 0; ky < k->kh; ky++)
                            for (int64_t kx = 0; kx < k->kw; kx++) {
                                int64_t iy = oy * k->sh - o.pt + ky, ix = ox * k->sw - o.pl + kx;
                                if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
                                int64_t i = s_at(k->nchw, k->h, k->w, k->c, b, iy, ix, c);
                                if (pass == 0 && (best < 0 || s_get(x, i) > s_get(x, best)))
                                    best = i;
                                if (pass == 0) count++;
                                if (pass == 1 && !max) dx[i] += g / (double)count;
                            }
                    if (max && best >= 0) dx[best] += g;
                }
}

/* One pool gradient in dtype gt (float on oneDNN, double on the loops). */
static void s_check_pool_case(const s_case_t *k, bool max, zf_dtype_t gt, zf_device_t *dev)
{
    s_out_t o = s_out(k);
    zf_shape_t xs = s_shape(k->nchw, k->n, k->h, k->w, k->c);
    zf_shape_t ys = s_shape(k->nchw, k->n, o.oh, o.ow, k->c);
    zf_tensor_t *x32 = s_distinct(xs, 7), *x = s_as(gt, x32), *dy = s_random(gt, ys, 8);
    zf_tensor_t *y = NULL, *gx = NULL;
    Tensorflow__NodeDef *fwd_gt = s_node(max ? "MaxPool" : "AvgPool", k, gt, 1);
    ASSERT_OK(kt_run(fwd_gt, &x, 1, &y, 1));
    Tensorflow__NodeDef *g = s_node(max ? "MaxPoolGrad" : "AvgPoolGrad", k, gt, max ? 3 : 2);
    zf_tensor_t *sizes = s_sizes(xs);
    zf_tensor_t *in_max[3] = {x, y, dy}, *in_avg[2] = {sizes, dy};
    ASSERT_OK(kt_run_on(g, max ? in_max : in_avg, max ? 3 : 2, &gx, 1, NULL, dev));
    kt_expect_shape(gx, xs);
    int64_t nx = zf_tensor_num_elements(x);
    double *want = calloc((size_t)nx + 1, sizeof *want);
    s_pool_grad(k, max, x, dy, want);
    double tol = gt == ZF_FLOAT ? 1e-5 : 1e-12;
    s_expect_close(max ? "MaxPoolGrad vs loops" : "AvgPoolGrad vs loops", gx, want, tol);
    zf_dtype_t t = k->nchw ? ZF_FLOAT : ZF_DOUBLE;
    Tensorflow__NodeDef *fwd = s_node(max ? "MaxPool" : "AvgPool", k, t, 1);
    zf_tensor_t *xt = s_as(t, x);
    double *fd = s_fd(fwd, &xt, 1, 0, dy, 0.01);
    s_expect_close(max ? "MaxPoolGrad vs differences" : "AvgPoolGrad vs differences", gx, fd,
                   k->nchw          ? 2e-3
                   : gt == ZF_FLOAT ? 1e-5
                                    : 1e-9);
    free(want);
    free(fd);
    kt_unref_all((zf_tensor_t *[]){x32, x, dy, y, gx, sizes, xt}, 7);
    kt_node_free(&fwd_gt);
    kt_node_free(&g);
    kt_node_free(&fwd);
}

static const s_case_t s_pool_cases[] = {
    {false, 2, 5, 6, 3, 2, 2, 0, 2, 2, 1, 1, "VALID", {0}},
    {true, 2, 5, 6, 3, 2, 2, 0, 2, 2, 1, 1, "VALID", {0}},
    {false, 1, 7, 5, 2, 3, 3, 0, 2, 1, 1, 1, "SAME", {0}},
    {true, 1, 7, 5, 2, 3, 2, 0, 1, 2, 1, 1, "SAME", {0}},
    {false, 1, 6, 6, 2, 3, 3, 0, 1, 1, 1, 1, "SAME", {0}}, /* overlapping windows */
};

/* Every pool case, every other one on a device's pool; NHWC in double too. */
static void s_check_pool_cases(bool max)
{
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    for (size_t i = 0; i < sizeof s_pool_cases / sizeof s_pool_cases[0]; i++) {
        s_check_pool_case(&s_pool_cases[i], max, ZF_FLOAT, i % 2 ? dev : NULL);
        if (!s_pool_cases[i].nchw)
            s_check_pool_case(&s_pool_cases[i], max, ZF_DOUBLE, i % 2 ? NULL : dev);
    }
    zf_device_destroy(&dev);
}

static void test_max_pool_grad_matches_loops_and_finite_differences(void **state)
{
    (void)state;
    s_check_pool_cases(true);
}

static void test_avg_pool_grad_matches_loops_and_finite_differences(void **state)
{
    (void)state;
    s_check_pool_cases(false);
}

static void test_pool_grads_report_bad_shapes(void **state)
{
    (void)state;
    s_case_t k = {false, 1, 4, 4, 1, 2, 2, 0, 2, 2, 1, 1, "VALID", {0}};
    Tensorflow__NodeDef *mg = s_node("MaxPoolGrad", &k, ZF_FLOAT, 3);
    Tensorflow__NodeDef *ag = s_node("AvgPoolGrad", &k, ZF_FLOAT, 2);
    zf_tensor_t *x = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 4, 4, 1));
    zf_tensor_t *y = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 2, 2, 1));
    zf_tensor_t *dy = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 3, 2, 1)), *out = NULL;
    zf_tensor_t *in[3] = {x, y, dy};
    zf_test_expect_error(kt_run(mg, in, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "g (MaxPoolGrad): grad must have shape [1,2,2,1] for input [1,4,4,1], "
                         "got [1,3,2,1]");
    in[1] = dy;
    zf_test_expect_error(kt_run(mg, in, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "orig_output must have shape [1,2,2,1] for input [1,4,4,1], got "
                         "[1,3,2,1]");
    zf_tensor_t *x3 = kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 4, 1));
    in[0] = x3;
    zf_test_expect_error(kt_run(mg, in, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "input must be 4-dimensional[4,4,1]");
    zf_tensor_t *sizes = KT_I32(ZF_SHAPE(4), 1, 4, -4, 1);
    zf_tensor_t *in_a[2] = {sizes, y};
    zf_test_expect_error(kt_run(ag, in_a, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "g (AvgPoolGrad): orig_input_shape must be in [0, 2^31), got "
                         "[1,4,-4,1]");
    zf_tensor_t *fsizes = KT_F32(ZF_SHAPE(4), 1, 4, 4, 1);
    in_a[0] = fsizes;
    zf_test_expect_error(kt_run(ag, in_a, 2, &out, 1), ZF_INVALID_ARGUMENT, "orig_input_shape");
    s_case_t kc = k;
    kc.nchw = true; /* double runs on the loops, which are NHWC only */
    Tensorflow__NodeDef *agc = s_node("AvgPoolGrad", &kc, ZF_DOUBLE, 2);
    zf_tensor_t *good = KT_I32(ZF_SHAPE(4), 1, 1, 4, 4),
                *dyd = kt_zeros(ZF_DOUBLE, ZF_SHAPE(1, 1, 2, 2));
    zf_tensor_t *in_c[2] = {good, dyd};
    zf_test_expect_error(kt_run(agc, in_c, 2, &out, 1), ZF_UNIMPLEMENTED,
                         "g (AvgPoolGrad): data_format NCHW is only supported for float on CPU, "
                         "got double");
    assert_null(out);
    kt_unref_all((zf_tensor_t *[]){x, y, dy, x3, sizes, fsizes, good, dyd}, 8);
    kt_node_free(&mg);
    kt_node_free(&ag);
    kt_node_free(&agc);
}

/* ---- MaxPoolV2 ------------------------------------------------------------------------------ */

static void test_max_pool_v2_takes_its_window_from_inputs(void **state)
{
    (void)state;
    const s_case_t cases[] = {
        {false, 2, 7, 6, 3, 3, 2, 0, 2, 1, 1, 1, "SAME", {0}},
        {true, 1, 6, 7, 2, 2, 3, 0, 1, 2, 1, 1, "VALID", {0}},
    };
    for (size_t i = 0; i < 2; i++) {
        const s_case_t *k = &cases[i];
        for (int t = 0; t < 2 - (int)k->nchw; t++) { /* float; double on NHWC */
            zf_dtype_t dt = t ? ZF_DOUBLE : ZF_FLOAT;
            Tensorflow__NodeDef *v1 = s_node("MaxPool", k, dt, 1);
            Tensorflow__NodeDef *v2 = kt_node_new("g", "MaxPoolV2", 3);
            kt_attr_type(v2, "T", dt);
            kt_attr_string(v2, "padding", k->padding);
            if (k->nchw) kt_attr_string(v2, "data_format", "NCHW");
            zf_tensor_t *x32 = kt_random_f32(s_shape(k->nchw, k->n, k->h, k->w, k->c), 3);
            zf_tensor_t *x = s_as(dt, x32);
            zf_tensor_t *ks = k->nchw ? KT_I32(ZF_SHAPE(4), 1, 1, (int32_t)k->kh, (int32_t)k->kw)
                                      : KT_I32(ZF_SHAPE(4), 1, (int32_t)k->kh, (int32_t)k->kw, 1);
            zf_tensor_t *ss = k->nchw ? KT_I32(ZF_SHAPE(4), 1, 1, (int32_t)k->sh, (int32_t)k->sw)
                                      : KT_I32(ZF_SHAPE(4), 1, (int32_t)k->sh, (int32_t)k->sw, 1);
            zf_tensor_t *in[3] = {x, ks, ss}, *y1 = NULL, *y2 = NULL;
            ASSERT_OK(kt_run(v1, in, 1, &y1, 1));
            ASSERT_OK(kt_run(v2, in, 3, &y2, 1));
            kt_expect_shape(y2, *zf_tensor_shape(y1));
            for (int64_t j = 0; j < zf_tensor_num_elements(y1); j++)
                assert_true(s_get(y1, j) == s_get(y2, j));
            kt_unref_all((zf_tensor_t *[]){x32, x, ks, ss, y1, y2}, 6);
            kt_node_free(&v1);
            kt_node_free(&v2);
        }
    }
}

static void test_max_pool_v2_reports_a_bad_window(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = kt_node_new("p", "MaxPoolV2", 3);
    kt_attr_type(n, "T", ZF_FLOAT);
    kt_attr_string(n, "padding", "VALID");
    zf_tensor_t *x = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 4, 4, 1));
    zf_tensor_t *ks = KT_I32(ZF_SHAPE(3), 1, 2, 2), *ss = KT_I32(ZF_SHAPE(4), 1, 1, 1, 1);
    zf_tensor_t *in[3] = {x, ks, ss}, *y = NULL;
    zf_test_expect_error(kt_run(n, in, 3, &y, 1), ZF_INVALID_ARGUMENT,
                         "p (MaxPoolV2): ksize must specify 4 dimensions, got 3");
    zf_tensor_t *ks2 = KT_I32(ZF_SHAPE(4), 2, 2, 2, 1);
    in[1] = ks2;
    zf_test_expect_error(kt_run(n, in, 3, &y, 1), ZF_UNIMPLEMENTED,
                         "ksize in the batch and depth dimensions must be 1");
    assert_null(y);
    kt_unref_all((zf_tensor_t *[]){x, ks, ss, ks2}, 4);
    kt_node_free(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_backprop_matches_loops_and_finite_differences),
        cmocka_unit_test(test_conv_backprop_of_a_hand_checked_image),
        cmocka_unit_test(test_conv_backprop_handles_empty_shapes),
        cmocka_unit_test(test_conv_backprop_reports_bad_shapes),
        cmocka_unit_test(test_max_pool_grad_matches_loops_and_finite_differences),
        cmocka_unit_test(test_avg_pool_grad_matches_loops_and_finite_differences),
        cmocka_unit_test(test_pool_grads_report_bad_shapes),
        cmocka_unit_test(test_max_pool_v2_takes_its_window_from_inputs),
        cmocka_unit_test(test_max_pool_v2_reports_a_bad_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
