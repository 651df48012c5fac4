/* Tests for executor/kernels/kernels_conv: Conv2D against a naive seven-deep loop
 * (SAME/VALID, strides, 1x1, tiled patch matrices) and MaxPool/AvgPool
 * against direct window scans; attrs and shape errors. */
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

static void s_check_conv(zf_dtype_t t, zf_shape_t xs, zf_shape_t fs, int64_t sh, int64_t sw,
                         bool same, zf_device_t *dev)
{
    zf_tensor_t *x = kt_random_f32(xs, 11), *f = kt_random_f32(fs, 12);
    if (t == ZF_DOUBLE) { /* same values, wider type */
        zf_tensor_t *xd = kt_zeros(ZF_DOUBLE, xs), *fd = kt_zeros(ZF_DOUBLE, fs);
        for (int64_t i = 0; i < zf_tensor_num_elements(x); i++)
            ((double *)zf_tensor_data(xd))[i] = s_get(x, i);
        for (int64_t i = 0; i < zf_tensor_num_elements(f); i++)
            ((double *)zf_tensor_data(fd))[i] = s_get(f, i);
        kt_unref_all((zf_tensor_t *[]){x, f}, 2);
        x = xd;
        f = fd;
    }
    Tensorflow__NodeDef *n = s_node("Conv2D", t, sh, sw, same ? "SAME" : "VALID");
    zf_tensor_t *in[2] = {x, f}, *y = NULL;
    ASSERT_OK(kt_run_on(n, in, 2, &y, 1, NULL, dev));
    int64_t N = xs.dims[0], H = xs.dims[1], W = xs.dims[2], C = xs.dims[3];
    int64_t KH = fs.dims[0], KW = fs.dims[1], OC = fs.dims[3], OH, OW, pt, pl;
    s_dim(same, H, KH, sh, &OH, &pt);
    s_dim(same, W, KW, sw, &OW, &pl);
    kt_expect_shape(y, ZF_SHAPE(N, OH, OW, OC));
    for (int64_t b = 0; b < N; b++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t oc = 0; oc < OC; oc++) {
                    double want = 0;
                    for (int64_t ky = 0; ky < KH; ky++)
                        for (int64_t kx = 0; kx < KW; kx++)
                            for (int64_t c = 0; c < C; c++) {
                                int64_t iy = oy * sh - pt + ky, ix = ox * sw - pl + kx;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                want += s_get(x, ((b * H + iy) * W + ix) * C + c) *
                                        s_get(f, ((ky * KW + kx) * C + c) * OC + oc);
                            }
                    double got = s_get(y, ((b * OH + oy) * OW + ox) * OC + oc);
                    double tol = t == ZF_FLOAT ? 1e-4 : 1e-12;
                    if (fabs(got - want) > tol * (1 + fabs(want)))
                        fail_msg("[%lld,%lld,%lld,%lld]: %.9g vs %.9g", (long long)b, (long long)oy,
                                 (long long)ox, (long long)oc, got, want);
                }
    kt_unref_all((zf_tensor_t *[]){x, f, y}, 3);
    kt_node_free(&n);
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
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], y}, 3);
    kt_node_free(&n);
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
    KT_ATTR_INTS(n, "dilations", 1, 2, 2, 1);
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_UNIMPLEMENTED, "dilations other than 1");
    kt_node_free(&n);
    n = s_node("Conv2D", ZF_FLOAT, 1, 1, "VALID");
    kt_attr_string(n, "data_format", "NCHW");
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_UNIMPLEMENTED, "only data_format NHWC");
    kt_node_free(&n);
    n = s_node("Conv2D", ZF_FLOAT, 1, 1, "EXPLICIT");
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_UNIMPLEMENTED, "EXPLICIT padding");
    kt_node_free(&n);
    n = s_node("Conv2D", ZF_FLOAT, 1, 1, "FULL");
    zf_test_expect_error(kt_run(n, in, 2, &y, 1), ZF_INVALID_ARGUMENT,
                         "padding must be SAME or VALID, got 'FULL'");
    kt_node_free(&n);
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

static void s_check_pool(bool max, int64_t k, int64_t s, bool same, zf_device_t *dev)
{
    zf_shape_t xs = ZF_SHAPE(2, 9, 11, 5);
    zf_tensor_t *x = kt_random_f32(xs, 21), *y = NULL;
    Tensorflow__NodeDef *n =
        s_pool_node(max ? "MaxPool" : "AvgPool", k, s, same ? "SAME" : "VALID");
    ASSERT_OK(kt_run_on(n, &x, 1, &y, 1, NULL, dev));
    int64_t OH, OW, pt, pl;
    s_dim(same, 9, k, s, &OH, &pt);
    s_dim(same, 11, k, s, &OW, &pl);
    kt_expect_shape(y, ZF_SHAPE(2, OH, OW, 5));
    for (int64_t b = 0; b < 2; b++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t c = 0; c < 5; c++) {
                    double acc = max ? -INFINITY : 0;
                    int count = 0;
                    for (int64_t ky = 0; ky < k; ky++)
                        for (int64_t kx = 0; kx < k; kx++) {
                            int64_t iy = oy * s - pt + ky, ix = ox * s - pl + kx;
                            if (iy < 0 || iy >= 9 || ix < 0 || ix >= 11) continue;
                            double v = s_get(x, ((b * 9 + iy) * 11 + ix) * 5 + c);
                            acc = max ? fmax(acc, v) : acc + v;
                            count++;
                        }
                    double want = max ? acc : acc / count;
                    double got = s_get(y, ((b * OH + oy) * OW + ox) * 5 + c);
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
            s_check_pool(max, 3, 2, same, NULL);
            s_check_pool(max, 2, 1, same, dev);
            s_check_pool(max, 4, 3, same, dev);
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
