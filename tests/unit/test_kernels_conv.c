/* Tests for executor/kernels/kernels_conv (float on oneDNN, double on the
 * portable loops): Conv2D and DepthwiseConv2dNative against a naive direct
 * convolution in double (SAME/VALID/EXPLICIT, strides, dilations, NHWC and
 * NCHW, channel multipliers), MaxPool/AvgPool against direct window scans;
 * primitives and reordered filters reused across steps and refreshed when
 * the filter changes; attrs and shape errors. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static Tensorflow__NodeDef *s_node(const char *op, zf_dtype_t t, int64_t sh, int64_t sw,
                                   const char *padding)
{
    Tensorflow__NodeDef *n = kt_node_new("conv", op, strcmp(op, "Conv2D") == 0 ? 2 : 1);
    kt_attr_type(n, "T", t);
    KT_ATTR_INTS(n, "strides", 1, sh, sw, 1);
    kt_attr_string(n, "padding", padding);
    return n;
}

/* TensorFlow's output size and leading pad, computed independently. */
static void s_dim(bool same, int64_t in, int64_t k, int64_t s, int64_t *out, int64_t *pad)
{
    if (same) {
        *out = (in + s - 1) / s;
        int64_t total = (*out - 1) * s + k - in;
        *pad = total > 0 ? total / 2 : 0;
    } else {
        *out = (in - k) / s + 1;
        *pad = 0;
    }
}

static double s_get(const zf_tensor_t *t, int64_t i)
{
    return zf_tensor_dtype(t) == ZF_FLOAT ? ((const float *)zf_tensor_data(t))[i]
                                          : ((const double *)zf_tensor_data(t))[i];
}

/* ---- Conv2D ----------------------------------------------------------------------------- */

/* One convolution case; shapes are given as N, H, W, C whatever the layout. */
typedef struct {
    const char *op; /* Conv2D or DepthwiseConv2dNative */
    zf_dtype_t t;
    bool nchw;
    int64_t n, h, w, c;
    int64_t kh, kw, oc; /* oc: output channels, or the depthwise multiplier */
    int64_t sh, sw, dh, dw;
    const char *padding;
    int64_t pads[4]; /* EXPLICIT: top, bottom, left, right */
} s_case_t;

/* Flat index of (b, y, x, c) in an NHWC or NCHW tensor of dims N, H, W, C. */
static int64_t s_at(bool nchw, int64_t H, int64_t W, int64_t C, int64_t b, int64_t y, int64_t x,
                    int64_t c)
{
    return nchw ? ((b * C + c) * H + y) * W + x : ((b * H + y) * W + x) * C + c;
}

/* TensorFlow's output size and padding before, with a dilated window. */
static void s_dim_case(const s_case_t *k, int64_t in, int64_t kk, int64_t s, int64_t d, int64_t pb,
                       int64_t pa, int64_t *out, int64_t *before)
{
    int64_t eff = (kk - 1) * d + 1;
    if (strcmp(k->padding, "EXPLICIT") == 0) {
        *out = (in + pb + pa - eff) / s + 1;
        *before = pb;
    } else {
        s_dim(strcmp(k->padding, "SAME") == 0, in, eff, s, out, before);
    }
}

static zf_tensor_t *s_as(zf_dtype_t t, zf_tensor_t *f32)
{
    if (t == ZF_FLOAT) return f32;
    zf_tensor_t *d = kt_zeros(ZF_DOUBLE, *zf_tensor_shape(f32));
    for (int64_t i = 0; i < zf_tensor_num_elements(f32); i++)
        ((double *)zf_tensor_data(d))[i] = s_get(f32, i);
    zf_tensor_unref(&f32);
    return d;
}

static Tensorflow__NodeDef *s_case_node(const s_case_t *k)
{
    Tensorflow__NodeDef *n = kt_node_new("conv", k->op, 2);
    kt_attr_type(n, "T", k->t);
    if (k->nchw) {
        KT_ATTR_INTS(n, "strides", 1, 1, k->sh, k->sw);
        KT_ATTR_INTS(n, "dilations", 1, 1, k->dh, k->dw);
        kt_attr_string(n, "data_format", "NCHW");
        if (strcmp(k->padding, "EXPLICIT") == 0)
            KT_ATTR_INTS(n, "explicit_paddings", 0, 0, 0, 0, k->pads[0], k->pads[1], k->pads[2],
                         k->pads[3]);
    } else {
        KT_ATTR_INTS(n, "strides", 1, k->sh, k->sw, 1);
        KT_ATTR_INTS(n, "dilations", 1, k->dh, k->dw, 1);
        if (strcmp(k->padding, "EXPLICIT") == 0)
            KT_ATTR_INTS(n, "explicit_paddings", 0, 0, k->pads[0], k->pads[1], k->pads[2],
                         k->pads[3], 0, 0);
    }
    kt_attr_string(n, "padding", k->padding);
    return n;
}

/* Checks y = the case's convolution of x by f, computed here directly. */
static void s_expect_conv(const s_case_t *k, const zf_tensor_t *x, const zf_tensor_t *f,
                          const zf_tensor_t *y)
{
    bool dw = strcmp(k->op, "DepthwiseConv2dNative") == 0;
    int64_t OC = dw ? k->c * k->oc : k->oc, OH, OW, pt, pl;
    s_dim_case(k, k->h, k->kh, k->sh, k->dh, k->pads[0], k->pads[1], &OH, &pt);
    s_dim_case(k, k->w, k->kw, k->sw, k->dw, k->pads[2], k->pads[3], &OW, &pl);
    kt_expect_shape(y, k->nchw ? ZF_SHAPE(k->n, OC, OH, OW) : ZF_SHAPE(k->n, OH, OW, OC));
    for (int64_t b = 0; b < k->n; b++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t oc = 0; oc < OC; oc++) {
                    double want = 0;
                    for (int64_t ky = 0; ky < k->kh; ky++)
                        for (int64_t kx = 0; kx < k->kw; kx++) {
                            int64_t iy = oy * k->sh - pt + ky * k->dh;
                            int64_t ix = ox * k->sw - pl + kx * k->dw;
                            if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
                            for (int64_t c = 0; c < k->c; c++) {
                                if (dw && c != oc / k->oc) continue;
                                int64_t fi =
                                    dw ? ((ky * k->kw + kx) * k->c + c) * k->oc + oc % k->oc
                                       : ((ky * k->kw + kx) * k->c + c) * k->oc + oc;
                                want += s_get(x, s_at(k->nchw, k->h, k->w, k->c, b, iy, ix, c)) *
                                        s_get(f, fi);
                            }
                        }
                    double got = s_get(y, s_at(k->nchw, OH, OW, OC, b, oy, ox, oc));
                    double tol = k->t == ZF_FLOAT ? 1e-4 : 1e-12;
                    if (fabs(got - want) > tol * (1 + fabs(want)))
                        fail_msg("%s [%lld,%lld,%lld,%lld]: %.9g vs %.9g", k->op, (long long)b,
                                 (long long)oy, (long long)ox, (long long)oc, got, want);
                }
}

static void s_check_case(const s_case_t *k, zf_device_t *dev)
{
    zf_shape_t xs = k->nchw ? ZF_SHAPE(k->n, k->c, k->h, k->w) : ZF_SHAPE(k->n, k->h, k->w, k->c);
    zf_tensor_t *x = s_as(k->t, kt_random_f32(xs, 11));
    zf_tensor_t *f = s_as(k->t, kt_random_f32(ZF_SHAPE(k->kh, k->kw, k->c, k->oc), 12));
    Tensorflow__NodeDef *n = s_case_node(k);
    zf_tensor_t *in[2] = {x, f}, *y = NULL;
    ASSERT_OK(kt_run_on(n, in, 2, &y, 1, NULL, dev));
    s_expect_conv(k, x, f, y);
    kt_unref_all((zf_tensor_t *[]){x, f, y}, 3);
    kt_node_free(&n);
}

static void s_check_conv(zf_dtype_t t, zf_shape_t xs, zf_shape_t fs, int64_t sh, int64_t sw,
                         bool same, zf_device_t *dev)
{
    s_case_t k = {.op = "Conv2D",
                  .t = t,
                  .n = xs.dims[0],
                  .h = xs.dims[1],
                  .w = xs.dims[2],
                  .c = xs.dims[3],
                  .kh = fs.dims[0],
                  .kw = fs.dims[1],
                  .oc = fs.dims[3],
                  .sh = sh,
                  .sw = sw,
                  .dh = 1,
                  .dw = 1,
                  .padding = same ? "SAME" : "VALID"};
    s_check_case(&k, dev);
}

static void test_conv2d_matches_a_naive_loop(void **state)
{
    (void)state;
    for (int same = 0; same < 2; same++) {
        s_check_conv(ZF_FLOAT, ZF_SHAPE(2, 7, 6, 3), ZF_SHAPE(3, 2, 3, 4), 1, 1, same, NULL);
        s_check_conv(ZF_FLOAT, ZF_SHAPE(1, 8, 9, 2), ZF_SHAPE(3, 3, 2, 5), 2, 3, same, NULL);
        s_check_conv(ZF_FLOAT, ZF_SHAPE(1, 5, 5, 4), ZF_SHAPE(1, 1, 4, 3), 1, 1, same, NULL);
        s_check_conv(ZF_FLOAT, ZF_SHAPE(3, 4, 4, 2), ZF_SHAPE(1, 1, 2, 2), 2, 2, same, NULL);
        s_check_conv(ZF_DOUBLE, ZF_SHAPE(1, 6, 5, 2), ZF_SHAPE(4, 3, 2, 3), 2, 1, same, NULL);
        s_check_conv(ZF_FLOAT, ZF_SHAPE(1, 4, 4, 1), ZF_SHAPE(5, 5, 1, 1), 1, 1, same, NULL);
    }
}

static void test_conv2d_paddings_dilations_and_layouts(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    const s_case_t cases[] = {
        {"Conv2D", ZF_FLOAT, false, 2, 9, 8, 3, 3, 3, 5, 1, 1, 2, 2, "SAME", {0}},
        {"Conv2D", ZF_FLOAT, true, 2, 9, 8, 3, 3, 3, 5, 1, 1, 2, 2, "SAME", {0}},
        {"Conv2D", ZF_FLOAT, true, 1, 10, 7, 4, 3, 2, 6, 2, 3, 1, 1, "VALID", {0}},
        {"Conv2D", ZF_FLOAT, false, 1, 10, 7, 4, 2, 3, 3, 2, 1, 3, 2, "VALID", {0}},
        {"Conv2D", ZF_FLOAT, false, 2, 6, 7, 2, 3, 3, 4, 1, 2, 1, 1, "EXPLICIT", {1, 2, 0, 3}},
        {"Conv2D", ZF_FLOAT, true, 2, 6, 7, 2, 3, 3, 4, 2, 1, 2, 1, "EXPLICIT", {2, 0, 1, 1}},
        {"Conv2D", ZF_FLOAT, false, 1, 12, 12, 16, 3, 3, 32, 1, 1, 1, 1, "SAME", {0}},
        {"Conv2D", ZF_FLOAT, true, 1, 12, 12, 16, 1, 1, 8, 1, 1, 1, 1, "VALID", {0}},
        {"Conv2D", ZF_DOUBLE, false, 1, 9, 8, 3, 3, 2, 4, 2, 1, 2, 3, "SAME", {0}},
        {"Conv2D", ZF_FLOAT, false, 1, 4, 4, 2, 3, 3, 2, 1, 1, 1 << 30, 1 << 30, "SAME", {0}},
        {"Conv2D", ZF_DOUBLE, false, 2, 6, 7, 2, 3, 3, 4, 1, 2, 1, 1, "EXPLICIT", {1, 2, 0, 3}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        s_check_case(&cases[i], i % 2 ? dev : NULL);
    zf_device_destroy(&dev);
}

static void test_depthwise_matches_a_naive_loop(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    const char *dw = "DepthwiseConv2dNative";
    const s_case_t cases[] = {
        {dw, ZF_FLOAT, false, 2, 7, 6, 3, 3, 3, 1, 1, 1, 1, 1, "SAME", {0}},
        {dw, ZF_FLOAT, false, 1, 8, 9, 4, 3, 2, 3, 2, 1, 1, 1, "VALID", {0}},
        {dw, ZF_FLOAT, true, 2, 8, 9, 4, 3, 3, 2, 1, 2, 1, 1, "SAME", {0}},
        {dw, ZF_FLOAT, false, 1, 9, 9, 8, 3, 3, 2, 1, 1, 2, 2, "SAME", {0}},
        {dw, ZF_FLOAT, true, 1, 6, 5, 3, 2, 2, 3, 1, 1, 1, 1, "EXPLICIT", {1, 0, 2, 1}},
        {dw, ZF_DOUBLE, false, 2, 7, 6, 3, 3, 2, 2, 2, 1, 1, 2, "SAME", {0}},
        {dw, ZF_DOUBLE, false, 1, 6, 5, 3, 2, 2, 3, 1, 1, 1, 1, "EXPLICIT", {1, 0, 2, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        s_check_case(&cases[i], i % 2 ? dev : NULL);
    zf_device_destroy(&dev);
}

/* One node over several steps: its primitive and reordered filter are
 * reused, and a filter changed in place (a variable update, which
 * advances the buffer's version), a new filter or a new input shape give
 * fresh results. */
static void test_conv2d_reuses_primitives_and_filters_across_steps(void **state)
{
    (void)state;
    zf_kernels_register_builtin(false);
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    s_case_t k = {"Conv2D", ZF_FLOAT, false, 1, 10, 9, 8, 3, 3, 16, 1, 1, 1, 1, "SAME", {0}};
    Tensorflow__NodeDef *n = s_case_node(&k);
    const zf_kernel_t *def = NULL;
    ASSERT_OK(zf_kernel_find("CPU", n, &def));
    void *st = NULL;
    ASSERT_OK(def->create(n, &st));
    zf_tensor_t *x = kt_random_f32(ZF_SHAPE(1, 10, 9, 8), 31);
    zf_tensor_t *f = kt_random_f32(ZF_SHAPE(3, 3, 8, 16), 32);
    zf_tensor_t *f2 = kt_random_f32(ZF_SHAPE(3, 3, 8, 16), 33);
    zf_tensor_t *x2 = kt_random_f32(ZF_SHAPE(2, 5, 6, 8), 34);
    for (int step = 0; step < 6; step++) {
        if (step == 2) { /* in place, as a variable update */
            float *p = zf_tensor_data(f);
            for (int64_t i = 0; i < zf_tensor_num_elements(f); i++) p[i] = -p[i] * 0.5f;
            zf_buffer_bump_version(zf_tensor_buffer(f));
        }
        zf_tensor_t *xs = step == 4 ? x2 : x, *fs = step == 3 ? f2 : f, *y = NULL;
        zf_tensor_t *in[2] = {xs, fs};
        zf_kernel_ctx_t ctx = {.node = n,
                               .state = st,
                               .device = step % 2 ? dev : NULL,
                               .inputs = in,
                               .num_inputs = 2,
                               .outputs = &y,
                               .num_outputs = 1};
        ASSERT_OK(def->compute(&ctx));
        k.n = xs == x2 ? 2 : 1;
        k.h = xs == x2 ? 5 : 10;
        k.w = xs == x2 ? 6 : 9;
        s_expect_conv(&k, xs, fs, y);
        zf_tensor_unref(&y);
    }
    def->destroy(st);
    kt_unref_all((zf_tensor_t *[]){x, f, f2, x2}, 4);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static void test_conv2d_builds_large_patch_matrices_in_tiles(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    /* 300x300 pixels of 3*3*11 floats: many 4 MiB tiles of patches. */
    s_check_conv(ZF_FLOAT, ZF_SHAPE(1, 300, 300, 11), ZF_SHAPE(3, 3, 11, 2), 1, 1, true, dev);
    zf_device_destroy(&dev);
}

static void test_conv2d_of_a_hand_checked_image(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_node("Conv2D", ZF_FLOAT, 1, 1, "VALID");
    zf_tensor_t *in[2] = {KT_F32(ZF_SHAPE(1, 3, 3, 1), 1, 2, 3, 4, 5, 6, 7, 8, 9),
                          KT_F32(ZF_SHAPE(2, 2, 1, 1), 1, 1, 1, 1)};
    zf_tensor_t *y = NULL;
    ASSERT_OK(kt_run(n, in, 2, &y, 1));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 2, 2, 1), 0, 12, 16, 24, 28);
    zf_tensor_unref(&y);
    kt_node_free(&n);
    n = s_node("Conv2D", ZF_FLOAT, 1, 1, "SAME"); /* pads bottom and right */
    ASSERT_OK(kt_run(n, in, 2, &y, 1));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 3, 3, 1), 0, 12, 16, 9, 24, 28, 15, 15, 17, 9);
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], y}, 3);
    kt_node_free(&n);
}

static void test_conv2d_handles_empty_shapes(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_node("Conv2D", ZF_FLOAT, 1, 1, "VALID");
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3, 3, 2)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 2, 2, 4))};
    zf_tensor_t *y = NULL;
    ASSERT_OK(kt_run(n, in, 2, &y, 1));
    kt_expect_shape(y, ZF_SHAPE(0, 2, 2, 4));
    zf_tensor_unref(&y);
    zf_tensor_unref(&in[0]);
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 1, 3, 2)); /* filter taller than the image */
    ASSERT_OK(kt_run(n, in, 2, &y, 1));
    kt_expect_shape(y, ZF_SHAPE(1, 0, 2, 4));
    kt_unref_all((zf_tensor_t *[]){in[0], y}, 2);
    kt_node_free(&n);
    /* an empty image padded into a non-empty output: every window is
     * padding, so every output is zero, on oneDNN and on the loops */
    for (int t = 0; t < 2; t++) {
        zf_dtype_t dt = t ? ZF_DOUBLE : ZF_FLOAT;
        s_case_t k = {"Conv2D", dt, false, 1, 0, 3, 2,          2,
                      2,        4,  1,     1, 1, 1, "EXPLICIT", {2, 1, 0, 0}};
        n = s_case_node(&k);
        in[0] = kt_zeros(dt, ZF_SHAPE(1, 0, 3, 2));
        zf_tensor_t *f = s_as(dt, kt_random_f32(ZF_SHAPE(2, 2, 2, 4), 5)), *yy = NULL;
        zf_tensor_t *args[2] = {in[0], f};
        ASSERT_OK(kt_run(n, args, 2, &yy, 1));
        kt_expect_shape(yy, ZF_SHAPE(1, 2, 2, 4));
        for (int64_t e = 0; e < zf_tensor_num_elements(yy); e++) assert_true(s_get(yy, e) == 0);
        kt_unref_all((zf_tensor_t *[]){in[0], f, yy}, 3);
        kt_node_free(&n);
    }
    zf_tensor_unref(&in[1]);
}

static void test_conv2d_reports_bad_inputs(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_node("Conv2D", ZF_FLOAT, 1, 1, "VALID");
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 1, 2, 2))};
    zf_tensor_t *y = NULL;
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "conv (Conv2D): input must be 4-dimensional[2,3]");
    zf_tensor_unref(&in[0]);
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 4, 4, 3));
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "input and filter must have the same depth: 3 vs 2");
    zf_tensor_unref(&in[1]);
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 3));
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "filter must be 4-dimensional: [3,3]");
    zf_tensor_unref(&in[1]);
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(6, 1, 3, 1));
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "Computed output size would be negative: -1 [input_size: 4, "
                         "effective_filter_size: 6, stride: 1]");
    kt_unref_all(in, 2);
    kt_node_free(&n);
}

static void test_conv2d_rejects_unsupported_attrs(void **state)
{
    (void)state;
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 4, 4, 1)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 1, 1, 1))};
    zf_tensor_t *y = NULL;
    Tensorflow__NodeDef *n = s_node("Conv2D", ZF_FLOAT, 1, 1, "VALID");
    KT_ATTR_INTS(n, "dilations", 2, 1, 1, 1);
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_UNIMPLEMENTED,
                         "conv (Conv2D): dilations in the batch and depth dimensions must be 1, "
                         "got [2,1,1,1]");
    kt_node_free(&n);
    n = s_node("Conv2D", ZF_FLOAT, 1, 1, "VALID");
    KT_ATTR_INTS(n, "dilations", 1, 0, 1, 1);
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "conv (Conv2D): dilations must be in [1, 2^31), got [1,0,1,1]");
    kt_node_free(&n);
    n = s_node("Conv2D", ZF_FLOAT, 1, 1, "VALID");
    kt_attr_string(n, "data_format", "NWHC");
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "conv (Conv2D): Invalid data format 'NWHC'");
    kt_node_free(&n);
    /* padding and explicit_paddings, as TensorFlow's CheckValidPadding */
    static const struct {
        const char *padding;
        size_t n;
        int64_t pads[8];
        const char *message;
    } bad[] = {
        {"EXPLICIT",
         0,
         {0},
         "conv (Conv2D): explicit_paddings attribute must contain 8 values, "
         "but got: 0"},
        {"EXPLICIT",
         8,
         {0, 0, 1, -1, 0, 0, 0, 0},
         "conv (Conv2D): All elements of explicit_paddings must be nonnegative"},
        {"EXPLICIT",
         8,
         {0, 0, 1, 1, 1, 1, 0, 1},
         "conv (Conv2D): Nonzero explicit padding in the batch or depth dimensions is not "
         "supported"},
        {"EXPLICIT",
         8,
         {0, 0, (int64_t)1 << 40, 0, 0, 0, 0, 0},
         "conv (Conv2D): explicit_paddings must be below 2^31, got 1099511627776"},
        {"SAME",
         8,
         {0, 0, 1, 1, 1, 1, 0, 0},
         "conv (Conv2D): explicit_paddings attribute must be empty if the padding attribute is "
         "not EXPLICIT"},
        {"FULL", 0, {0}, "conv (Conv2D): padding must be SAME, VALID or EXPLICIT, got 'FULL'"},
    };
    n = s_node("Conv2D", ZF_FLOAT, 1, 1, "EXPLICIT"); /* valid, but an output too large */
    KT_ATTR_INTS(n, "explicit_paddings", 0, 0, 2000000000, 2000000000, 0, 2000000000, 0, 0);
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "conv (Conv2D): float32 tensor of shape [1,4000000004,2000000004,1] is "
                         "too large to address");
    kt_node_free(&n);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = s_node("Conv2D", ZF_FLOAT, 1, 1, bad[i].padding);
        if (bad[i].n) kt_attr_list_int(n, "explicit_paddings", bad[i].pads, bad[i].n);
        zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT, bad[i].message);
        kt_node_free(&n);
    }
    n = kt_node_new("conv", "Conv2D", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    KT_ATTR_INTS(n, "strides", 2, 1, 1, 1);
    kt_attr_string(n, "padding", "SAME");
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_UNIMPLEMENTED,
                         "strides in the batch and depth dimensions must be 1");
    kt_node_free(&n);
    n = s_node("Conv2D", ZF_FLOAT, (int64_t)1 << 40, 1, "SAME");
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "strides must be in [1, 2^31), got [1,1099511627776,1,1]");
    kt_node_free(&n);
    n = kt_node_new("conv", "Conv2D", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    KT_ATTR_INTS(n, "strides", 1, 1);
    kt_attr_string(n, "padding", "SAME");
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "strides must specify 4 dimensions, got 2");
    kt_node_free(&n);
    kt_unref_all(in, 2);
}

/* Steps of one node at once, alternating two filters: they share its
 * primitives and replace its cached filter under each other. */
typedef struct {
    const zf_kernel_t *def;
    const Tensorflow__NodeDef *node;
    void *state;
    zf_device_t *dev;
    zf_tensor_t *x, *f[2], *want[2];
    int seed;
    bool ok;
} s_concurrent_t;

static void *s_concurrent_steps(void *arg)
{
    s_concurrent_t *c = arg;
    c->ok = true;
    for (int step = 0; step < 8; step++) {
        int which = (step + c->seed) % 2;
        zf_tensor_t *in[2] = {c->x, c->f[which]}, *y = NULL;
        zf_kernel_ctx_t ctx = {.node = c->node,
                               .state = c->state,
                               .device = c->dev,
                               .inputs = in,
                               .num_inputs = 2,
                               .outputs = &y,
                               .num_outputs = 1};
        zf_status_t s = c->def->compute(&ctx);
        if (!zf_ok(s)) {
            zf_status_clear(&s);
            c->ok = false;
            continue;
        }
        const float *got = zf_tensor_data(y), *want = zf_tensor_data(c->want[which]);
        for (int64_t i = 0; i < zf_tensor_num_elements(y); i++)
            if (fabsf(got[i] - want[i]) > 1e-4f * (1 + fabsf(want[i]))) c->ok = false;
        zf_tensor_unref(&y);
    }
    return NULL;
}

static void test_conv2d_steps_of_one_node_run_concurrently(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    s_case_t k = {"Conv2D", ZF_FLOAT, false, 2, 12, 11, 8, 3, 3, 16, 1, 1, 1, 1, "SAME", {0}};
    Tensorflow__NodeDef *n = s_case_node(&k);
    s_concurrent_t c = {.node = n, .dev = dev, .x = kt_random_f32(ZF_SHAPE(2, 12, 11, 8), 41)};
    ASSERT_OK(zf_kernel_find("CPU", n, &c.def));
    ASSERT_OK(c.def->create(n, &c.state));
    for (int i = 0; i < 2; i++) {
        c.f[i] = kt_random_f32(ZF_SHAPE(3, 3, 8, 16), 42 + (uint32_t)i);
        zf_tensor_t *in[2] = {c.x, c.f[i]};
        ASSERT_OK(kt_run_on(n, in, 2, &c.want[i], 1, NULL, dev));
        s_expect_conv(&k, c.x, c.f[i], c.want[i]);
    }
    s_concurrent_t runs[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        runs[i] = c;
        runs[i].seed = i;
        assert_int_equal(pthread_create(&threads[i], NULL, s_concurrent_steps, &runs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        assert_true(runs[i].ok);
    }
    c.def->destroy(c.state);
    kt_unref_all((zf_tensor_t *[]){c.x, c.f[0], c.f[1], c.want[0], c.want[1]}, 5);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static void test_conv_reports_bad_depthwise_and_dtype_inputs(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = kt_node_new("dw", "DepthwiseConv2dNative", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    KT_ATTR_INTS(n, "strides", 1, 1, 1, 1);
    kt_attr_string(n, "padding", "SAME");
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 4, 4, 3)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 2, 2, 2))};
    zf_tensor_t *y = NULL;
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "dw (DepthwiseConv2dNative): input and filter must have the same depth: "
                         "3 vs 2 (input [1,4,4,3], filter [2,2,2,2])");
    zf_tensor_unref(&in[1]);
    in[1] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(2, 2, 3, 2));
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "dw (DepthwiseConv2dNative): input 1 must be float, got double");
    zf_tensor_unref(&in[1]);
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 2, 3));
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "dw (DepthwiseConv2dNative): filter must be 4-dimensional: [2,2,3]");
    zf_test_expect_error(kt_run(n, in, 1, &y, 1), ZF_INVALID_ARGUMENT,
                         "dw (DepthwiseConv2dNative): expects 2 inputs, got 1");
    kt_unref_all(in, 2);
    kt_node_free(&n);
    n = s_node("Conv2D", ZF_DOUBLE, 1, 1, "SAME");
    kt_attr_string(n, "data_format", "NCHW");
    in[0] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(1, 2, 4, 4));
    in[1] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(1, 1, 2, 2));
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_UNIMPLEMENTED,
                         "conv (Conv2D): data_format NCHW is only supported for float on CPU, got "
                         "double");
    kt_unref_all(in, 2);
    kt_node_free(&n);
    n = s_node("Conv2D", ZF_FLOAT, 1, 1, "SAME");
    in[0] = kt_zeros(ZF_INT32, ZF_SHAPE(1, 4, 4, 2));
    in[1] = kt_zeros(ZF_INT32, ZF_SHAPE(1, 1, 2, 2));
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "conv (Conv2D): no CPU kernel for int32 inputs");
    kt_unref_all(in, 2);
    kt_node_free(&n);
}

/* ---- pools ---------------------------------------------------------------------------------- */

static Tensorflow__NodeDef *s_pool_node(const char *op, int64_t k, int64_t s, const char *pad)
{
    Tensorflow__NodeDef *n = s_node(op, ZF_FLOAT, s, s, pad);
    KT_ATTR_INTS(n, "ksize", 1, k, k, 1);
    return n;
}

static void test_pools_of_hand_checked_images(void **state)
{
    (void)state;
    zf_tensor_t *x = KT_F32(ZF_SHAPE(1, 4, 4, 1), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                            16),
                *y = NULL;
    Tensorflow__NodeDef *n = s_pool_node("MaxPool", 2, 2, "VALID");
    ASSERT_OK(kt_run(n, &x, 1, &y, 1));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 2, 2, 1), 0, 6, 8, 14, 16);
    zf_tensor_unref(&y);
    kt_node_free(&n);
    zf_tensor_unref(&x);
    x = KT_F32(ZF_SHAPE(1, 3, 3, 1), 1, 2, 3, 4, 5, 6, 7, 8, 9);
    n = s_pool_node("AvgPool", 2, 2, "SAME"); /* windows clipped at the bottom and right */
    ASSERT_OK(kt_run(n, &x, 1, &y, 1));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 2, 2, 1), 1e-6, 3, 4.5, 7.5, 9);
    zf_tensor_unref(&y);
    kt_node_free(&n);
    n = s_pool_node("MaxPool", 3, 1, "SAME");
    ASSERT_OK(kt_run(n, &x, 1, &y, 1));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 3, 3, 1), 0, 5, 6, 6, 8, 9, 9, 8, 9, 9);
    kt_unref_all((zf_tensor_t *[]){x, y}, 2);
    kt_node_free(&n);
}

static void s_check_pool(bool max, int64_t k, int64_t s, bool same, bool nchw, zf_dtype_t t,
                         zf_device_t *dev)
{
    const int64_t N = 2, H = 9, W = 11, C = 5;
    zf_tensor_t *x = s_as(t, kt_random_f32(nchw ? ZF_SHAPE(N, C, H, W) : ZF_SHAPE(N, H, W, C), 21));
    zf_tensor_t *y = NULL;
    Tensorflow__NodeDef *n = kt_node_new("conv", max ? "MaxPool" : "AvgPool", 1);
    kt_attr_type(n, "T", t);
    if (nchw) {
        KT_ATTR_INTS(n, "strides", 1, 1, s, s);
        KT_ATTR_INTS(n, "ksize", 1, 1, k, k);
        kt_attr_string(n, "data_format", "NCHW");
    } else {
        KT_ATTR_INTS(n, "strides", 1, s, s, 1);
        KT_ATTR_INTS(n, "ksize", 1, k, k, 1);
    }
    kt_attr_string(n, "padding", same ? "SAME" : "VALID");
    ASSERT_OK(kt_run_on(n, &x, 1, &y, 1, NULL, dev));
    int64_t OH, OW, pt, pl;
    s_dim(same, H, k, s, &OH, &pt);
    s_dim(same, W, k, s, &OW, &pl);
    kt_expect_shape(y, nchw ? ZF_SHAPE(N, C, OH, OW) : ZF_SHAPE(N, OH, OW, C));
    for (int64_t b = 0; b < N; b++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t c = 0; c < C; c++) {
                    double acc = max ? -INFINITY : 0;
                    int count = 0;
                    for (int64_t ky = 0; ky < k; ky++)
                        for (int64_t kx = 0; kx < k; kx++) {
                            int64_t iy = oy * s - pt + ky, ix = ox * s - pl + kx;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            double v = s_get(x, s_at(nchw, H, W, C, b, iy, ix, c));
                            acc = max ? fmax(acc, v) : acc + v;
                            count++;
                        }
                    double want = max ? acc : acc / count;
                    double got = s_get(y, s_at(nchw, OH, OW, C, b, oy, ox, c));
                    if (fabs(got - want) > 1e-5) fail_msg("pool mismatch: %g vs %g", got, want);
                }
    kt_unref_all((zf_tensor_t *[]){x, y}, 2);
    kt_node_free(&n);
}

static void test_pools_match_direct_window_scans(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    for (int max = 0; max < 2; max++)
        for (int same = 0; same < 2; same++) {
            s_check_pool(max, 3, 2, same, false, ZF_FLOAT, NULL);
            s_check_pool(max, 2, 1, same, false, ZF_FLOAT, dev);
            s_check_pool(max, 4, 3, same, false, ZF_FLOAT, dev);
            s_check_pool(max, 3, 2, same, true, ZF_FLOAT, dev);
            s_check_pool(max, 2, 3, same, true, ZF_FLOAT, NULL);
            s_check_pool(max, 3, 2, same, false, ZF_DOUBLE, dev);
        }
    zf_device_destroy(&dev);
}

static void test_pools_reject_bad_windows(void **state)
{
    (void)state;
    zf_tensor_t *x = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 4, 4, 2)), *y = NULL;
    Tensorflow__NodeDef *n = s_node("MaxPool", ZF_FLOAT, 1, 1, "VALID");
    KT_ATTR_INTS(n, "ksize", 1, 2, 2, 2);
    zf_test_expect_error(kt_run(n, &x, 1, &y, 1), ZF_UNIMPLEMENTED,
                         "ksize in the batch and depth dimensions must be 1");
    kt_node_free(&n);
    n = s_node("AvgPool", ZF_FLOAT, 1, 1, "VALID");
    KT_ATTR_INTS(n, "ksize", 1, 0, 2, 1);
    zf_test_expect_error(kt_run(n, &x, 1, &y, 1), ZF_INVALID_ARGUMENT,
                         "ksize must be in [1, 2^31), got [1,0,2,1]");
    kt_node_free(&n);
    n = s_pool_node("AvgPool", 2, 1, "VALID");
    zf_tensor_unref(&x);
    x = kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 4, 2));
    zf_test_expect_error(kt_run(n, &x, 1, &y, 1), ZF_INVALID_ARGUMENT,
                         "input must be 4-dimensional[4,4,2]");
    kt_node_free(&n);
    zf_tensor_unref(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_matches_a_naive_loop),
        cmocka_unit_test(test_conv2d_paddings_dilations_and_layouts),
        cmocka_unit_test(test_depthwise_matches_a_naive_loop),
        cmocka_unit_test(test_conv2d_reuses_primitives_and_filters_across_steps),
        cmocka_unit_test(test_conv2d_steps_of_one_node_run_concurrently),
        cmocka_unit_test(test_conv_reports_bad_depthwise_and_dtype_inputs),
        cmocka_unit_test(test_conv2d_builds_large_patch_matrices_in_tiles),
        cmocka_unit_test(test_conv2d_of_a_hand_checked_image),
        cmocka_unit_test(test_conv2d_handles_empty_shapes),
        cmocka_unit_test(test_conv2d_reports_bad_inputs),
        cmocka_unit_test(test_conv2d_rejects_unsupported_attrs),
        cmocka_unit_test(test_pools_of_hand_checked_images),
        cmocka_unit_test(test_pools_match_direct_window_scans),
        cmocka_unit_test(test_pools_reject_bad_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
