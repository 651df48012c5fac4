/* Tests for executor/kernels/kernels_pad: Tile, Pad, PadV2, MirrorPad,
 * ReverseV2, BroadcastTo and BroadcastGradientArgs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

/* x[i] = i as int32, of shape s. */
static zf_tensor_t *s_iota(zf_shape_t s)
{
    zf_tensor_t *t = kt_zeros(ZF_INT32, s);
    int32_t *p = zf_tensor_data(t);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) p[i] = (int32_t)i;
    return t;
}

/* Runs op on the inputs (taking them), T from input 0, and optionally a
 * string attr. */
static zf_status_t s_run_attr(const char *op, zf_tensor_t **in, int n, zf_tensor_t **out, int n_out,
                              const char *key, const char *val)
{
    Tensorflow__NodeDef *node = kt_node_new("p", op, n);
    kt_attr_type(node, "T", zf_tensor_dtype(in[0]));
    if (key) kt_attr_string(node, key, val);
    zf_status_t s = kt_run(node, in, n, out, n_out);
    kt_unref_all(in, n);
    kt_node_free(&node);
    return s;
}

static zf_status_t s_run(const char *op, zf_tensor_t **in, int n, zf_tensor_t **out)
{
    return s_run_attr(op, in, n, out, 1, NULL, NULL);
}

/* ---- Tile -------------------------------------------------------------------------------- */

static void test_tile_repeats_along_each_dim(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[2] = {s_iota(ZF_SHAPE(2, 3)), KT_I32(ZF_SHAPE(2), 2, 1)};
    ASSERT_OK(s_run("Tile", in, 2, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(4, 3), 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5);
    zf_tensor_unref(&out);
    in[0] = s_iota(ZF_SHAPE(2, 3));
    in[1] = KT_I64(ZF_SHAPE(2), 1, 2);
    ASSERT_OK(s_run("Tile", in, 2, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 6), 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5);
    zf_tensor_unref(&out);
    in[0] = s_iota(ZF_SHAPE(2, 3));
    in[1] = KT_I32(ZF_SHAPE(2), 0, 3);
    ASSERT_OK(s_run("Tile", in, 2, &out));
    kt_expect_shape(out, ZF_SHAPE(0, 9));
    zf_tensor_unref(&out);
    in[0] = KT_F64(zf_shape_scalar(), 1.5);
    in[1] = kt_zeros(ZF_INT32, ZF_SHAPE(0));
    ASSERT_OK(s_run("Tile", in, 2, &out));
    KT_EXPECT_NEAR(out, zf_shape_scalar(), 0, 1.5);
    zf_tensor_unref(&out);
}

/* Elements of 1 and 16 bytes move whole. */
static void test_tile_and_reverse_move_any_element_size(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    double c[4] = {1, 2, 3, 4}; /* two complex128 */
    zf_tensor_t *in[2] = {kt_tensor(ZF_COMPLEX128, ZF_SHAPE(2), c, 2), KT_I32(ZF_SHAPE(1), 2)};
    ASSERT_OK(s_run("Tile", in, 2, &out));
    const double *p = zf_tensor_data(out);
    const double want[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    for (int i = 0; i < 8; i++) assert_true(p[i] == want[i]);
    zf_tensor_unref(&out);
    in[0] = kt_tensor(ZF_COMPLEX128, ZF_SHAPE(2), c, 2);
    in[1] = KT_I32(ZF_SHAPE(1), 0);
    ASSERT_OK(s_run("ReverseV2", in, 2, &out));
    p = zf_tensor_data(out);
    assert_true(p[0] == 3 && p[1] == 4 && p[2] == 1 && p[3] == 2);
    zf_tensor_unref(&out);
    in[0] = KT_BOOL(ZF_SHAPE(1, 2), true, false);
    in[1] = KT_I32(ZF_SHAPE(2), 2, 1);
    ASSERT_OK(s_run("Tile", in, 2, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2), 1, 0, 1, 0);
    zf_tensor_unref(&out);
}

static void test_tile_rejects_bad_multiples(void **state)
{
    (void)state;
    struct {
        zf_tensor_t *mult;
        zf_code_t code;
        const char *msg;
    } cases[] = {
        {KT_I32(ZF_SHAPE(1), 2), ZF_INVALID_ARGUMENT,
         "p (Tile): Expected multiples argument to be a vector of length 2 but got length 1"},
        {KT_I32(ZF_SHAPE(2), 1, -1), ZF_INVALID_ARGUMENT, "Expected multiples[1] >= 0, but got -1"},
        {KT_I64(ZF_SHAPE(2), 1, INT64_MAX), ZF_INVALID_ARGUMENT, "output dimension is too large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zf_tensor_t *in[2] = {s_iota(ZF_SHAPE(2, 3)), cases[i].mult}, *out = NULL;
        zf_test_expect_error(s_run("Tile", in, 2, &out), cases[i].code, cases[i].msg);
        assert_null(out);
    }
    /* representable but absurd: refused by the allocator, not a crash */
    zf_tensor_t *in[2] = {s_iota(ZF_SHAPE(2, 3)), KT_I64(ZF_SHAPE(2), 1LL << 40, 1LL << 20)};
    zf_tensor_t *out = NULL;
    zf_status_t s = s_run("Tile", in, 2, &out);
    assert_false(zf_ok(s));
    zf_status_clear(&s);
    assert_null(out);
}

/* Empty tensors whose other dims multiply past int64. */
static void test_maps_of_empty_tensors_with_huge_dims(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE((1LL << 62), 0)), KT_I64(ZF_SHAPE(2), 1, 5)};
    ASSERT_OK(s_run("Tile", in, 2, &out));
    kt_expect_shape(out, ZF_SHAPE((1LL << 62), 0));
    zf_tensor_unref(&out);
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE((1LL << 62), 0));
    in[1] = KT_I32(ZF_SHAPE(2), 0, 1);
    ASSERT_OK(s_run("ReverseV2", in, 2, &out));
    kt_expect_shape(out, ZF_SHAPE((1LL << 62), 0));
    zf_tensor_unref(&out);
}

/* ---- Pad, PadV2, MirrorPad --------------------------------------------------------------- */

static void test_pad_and_pad_v2_fill_around_the_input(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[3] = {s_iota(ZF_SHAPE(2, 2)), KT_I32(ZF_SHAPE(2, 2), 1, 0, 0, 2)};
    ASSERT_OK(s_run("Pad", in, 2, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(3, 4), 0, 0, 0, 0, 0, 1, 0, 0, 2, 3, 0, 0);
    zf_tensor_unref(&out);
    in[0] = s_iota(ZF_SHAPE(2, 2));
    in[1] = KT_I64(ZF_SHAPE(2, 2), 1, 0, 0, 2);
    in[2] = KT_I32(zf_shape_scalar(), 9);
    ASSERT_OK(s_run("PadV2", in, 3, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(3, 4), 9, 9, 9, 9, 0, 1, 9, 9, 2, 3, 9, 9);
    zf_tensor_unref(&out);
    /* an empty input padded: all fill */
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 2));
    in[1] = KT_I32(ZF_SHAPE(2, 2), 1, 1, 0, 1);
    in[2] = KT_F32(zf_shape_scalar(), -1);
    ASSERT_OK(s_run("PadV2", in, 3, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 3), 0, -1, -1, -1, -1, -1, -1);
    zf_tensor_unref(&out);
    /* a scalar with no paddings */
    in[0] = KT_F32(zf_shape_scalar(), 3);
    in[1] = kt_zeros(ZF_INT32, ZF_SHAPE(0, 2));
    ASSERT_OK(s_run("Pad", in, 2, &out));
    KT_EXPECT_NEAR(out, zf_shape_scalar(), 0, 3);
    zf_tensor_unref(&out);
}

static void test_pad_rejects_bad_paddings(void **state)
{
    (void)state;
    struct {
        zf_tensor_t *pad;
        const char *msg;
    } cases[] = {
        {KT_I32(ZF_SHAPE(2, 2), -1, 0, 0, 0), "p (Pad): Paddings must be non-negative: -1 0"},
        {KT_I32(ZF_SHAPE(2, 3), 0, 0, 0, 0, 0, 0),
         "paddings must be a matrix with 2 columns: [2,3]"},
        {KT_I32(ZF_SHAPE(1, 2), 0, 0),
         "The first dimension of paddings must be the rank of inputs [1,2], [2,2]"},
        {KT_F32(ZF_SHAPE(2, 2), 0, 0, 0, 0), "paddings must be int32 or int64, got float"},
        {KT_I64(ZF_SHAPE(2, 2), INT64_MAX, 1, 0, 0), "output dimension is too large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zf_tensor_t *in[2] = {s_iota(ZF_SHAPE(2, 2)), cases[i].pad}, *out = NULL;
        zf_test_expect_error(s_run("Pad", in, 2, &out), ZF_INVALID_ARGUMENT, cases[i].msg);
    }
    zf_tensor_t *in[3] = {s_iota(ZF_SHAPE(2, 2)), kt_zeros(ZF_INT32, ZF_SHAPE(2, 2)),
                          KT_I32(ZF_SHAPE(1), 0)};
    zf_tensor_t *out = NULL;
    zf_test_expect_error(s_run("PadV2", in, 3, &out), ZF_INVALID_ARGUMENT,
                         "constant_values must be a scalar. Got: [1]");
}

static void test_mirror_pad_reflects_and_mirrors(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[2] = {KT_I32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6),
                          KT_I32(ZF_SHAPE(2, 2), 1, 1, 2, 2)};
    ASSERT_OK(s_run_attr("MirrorPad", in, 2, &out, 1, "mode", "REFLECT"));
    KT_EXPECT_INTS(out, ZF_SHAPE(4, 7), 6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5,
                   4, 3, 2, 1, 2, 3, 2, 1);
    zf_tensor_unref(&out);
    in[0] = KT_I32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
    in[1] = KT_I32(ZF_SHAPE(2, 2), 1, 1, 2, 2);
    ASSERT_OK(s_run_attr("MirrorPad", in, 2, &out, 1, "mode", "SYMMETRIC"));
    KT_EXPECT_INTS(out, ZF_SHAPE(4, 7), 2, 1, 1, 2, 3, 3, 2, 2, 1, 1, 2, 3, 3, 2, 5, 4, 4, 5, 6, 6,
                   5, 5, 4, 4, 5, 6, 6, 5);
    zf_tensor_unref(&out);
    struct {
        const char *mode;
        zf_tensor_t *pad;
        const char *msg;
    } cases[] = {
        {"REFLECT", KT_I32(ZF_SHAPE(2, 2), 2, 0, 0, 0),
         "paddings must be less than the dimension size: 2, 0 not less than 2"},
        {"SYMMETRIC", KT_I32(ZF_SHAPE(2, 2), 0, 0, 1, 4),
         "paddings must be no greater than the dimension size: 1, 4 greater than 3"},
        {"SYMMETRIC", KT_I32(ZF_SHAPE(2, 2), 0, -2, 0, 0), "Paddings must be non-negative: 0 -2"},
        {"EDGE", KT_I32(ZF_SHAPE(2, 2), 0, 0, 0, 0),
         "mode must be either REFLECT or SYMMETRIC, got 'EDGE'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        in[0] = s_iota(ZF_SHAPE(2, 3));
        in[1] = cases[i].pad;
        zf_test_expect_error(s_run_attr("MirrorPad", in, 2, &out, 1, "mode", cases[i].mode),
                             ZF_INVALID_ARGUMENT, cases[i].msg);
        assert_null(out);
    }
}

/* ---- ReverseV2 --------------------------------------------------------------------------- */

static void test_reverse_flips_the_named_axes(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[2] = {s_iota(ZF_SHAPE(2, 3)), KT_I32(ZF_SHAPE(1), 1)};
    ASSERT_OK(s_run("ReverseV2", in, 2, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 3), 2, 1, 0, 5, 4, 3);
    zf_tensor_unref(&out);
    in[0] = s_iota(ZF_SHAPE(2, 3));
    in[1] = KT_I64(ZF_SHAPE(2), -2, 1);
    ASSERT_OK(s_run("ReverseV2", in, 2, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 3), 5, 4, 3, 2, 1, 0);
    zf_tensor_unref(&out);
    in[0] = s_iota(ZF_SHAPE(2, 3));
    in[1] = kt_zeros(ZF_INT32, ZF_SHAPE(0));
    ASSERT_OK(s_run("ReverseV2", in, 2, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 3), 0, 1, 2, 3, 4, 5);
    zf_tensor_unref(&out);
    in[0] = s_iota(ZF_SHAPE(2, 3));
    in[1] = KT_I32(ZF_SHAPE(2), 0, -2);
    zf_test_expect_error(s_run("ReverseV2", in, 2, &out), ZF_INVALID_ARGUMENT,
                         "p (ReverseV2): axis 0 specified more than once.");
    in[0] = s_iota(ZF_SHAPE(2, 3));
    in[1] = KT_I32(ZF_SHAPE(1), 2);
    zf_test_expect_error(s_run("ReverseV2", in, 2, &out), ZF_INVALID_ARGUMENT,
                         "'axis'[0] = 2 is out of valid range [-2, 1]");
}

/* Large tensors split over a device's pool give what index loops give. */
static void test_large_maps_on_a_pool_match_index_loops(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    const int64_t h = 300, w = 257;
    zf_tensor_t *x = kt_random_f32(ZF_SHAPE(300, 257), 7u), *out = NULL;
    const float *px = zf_tensor_data(x);
    /* Tile by [2, 3] */
    Tensorflow__NodeDef *n = kt_node_new("t", "Tile", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    zf_tensor_t *in[2] = {x, KT_I32(ZF_SHAPE(2), 2, 3)};
    ASSERT_OK(kt_run_on(n, in, 2, &out, 1, NULL, dev));
    kt_expect_shape(out, ZF_SHAPE(600, 771));
    const float *po = zf_tensor_data(out);
    for (int64_t i = 0; i < 2 * h; i++)
        for (int64_t j = 0; j < 3 * w; j++)
            if (po[i * 3 * w + j] != px[(i % h) * w + j % w])
                fail_msg("Tile differs at %lld,%lld", (long long)i, (long long)j);
    zf_tensor_unref(&out);
    zf_tensor_unref(&in[1]);
    kt_node_free(&n);
    /* ReverseV2 of both axes */
    n = kt_node_new("r", "ReverseV2", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    in[1] = KT_I32(ZF_SHAPE(2), 0, 1);
    ASSERT_OK(kt_run_on(n, in, 2, &out, 1, NULL, dev));
    po = zf_tensor_data(out);
    for (int64_t i = 0; i < h; i++)
        for (int64_t j = 0; j < w; j++)
            if (po[i * w + j] != px[(h - 1 - i) * w + (w - 1 - j)]) fail_msg("ReverseV2 differs");
    zf_tensor_unref(&out);
    zf_tensor_unref(&in[1]);
    kt_node_free(&n);
    /* MirrorPad SYMMETRIC by [[5, 7], [0, 256]] */
    n = kt_node_new("m", "MirrorPad", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    kt_attr_string(n, "mode", "SYMMETRIC");
    in[1] = KT_I32(ZF_SHAPE(2, 2), 5, 7, 0, 256);
    ASSERT_OK(kt_run_on(n, in, 2, &out, 1, NULL, dev));
    kt_expect_shape(out, ZF_SHAPE(312, 513));
    po = zf_tensor_data(out);
    for (int64_t i = 0; i < h + 12; i++)
        for (int64_t j = 0; j < w + 256; j++) {
            int64_t si = i < 5 ? 4 - i : i - 5 >= h ? 2 * h - 1 - (i - 5) : i - 5;
            int64_t sj = j >= w ? 2 * w - 1 - j : j;
            if (po[i * (w + 256) + j] != px[si * w + sj]) fail_msg("MirrorPad differs");
        }
    zf_tensor_unref(&out);
    zf_tensor_unref(&in[1]);
    kt_node_free(&n);
    zf_tensor_unref(&x);
    zf_device_destroy(&dev);
}

/* ---- BroadcastTo ------------------------------------------------------------------------- */

static void test_broadcast_to_repeats_dims_of_one(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[2] = {KT_I32(ZF_SHAPE(3), 1, 2, 3), KT_I32(ZF_SHAPE(2), 2, 3)};
    ASSERT_OK(s_run("BroadcastTo", in, 2, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 3), 1, 2, 3, 1, 2, 3);
    zf_tensor_unref(&out);
    in[0] = KT_I32(ZF_SHAPE(2, 1), 7, 8);
    in[1] = KT_I64(ZF_SHAPE(3), 2, 2, 3);
    ASSERT_OK(s_run("BroadcastTo", in, 2, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2, 3), 7, 7, 7, 8, 8, 8, 7, 7, 7, 8, 8, 8);
    zf_tensor_unref(&out);
    in[0] = KT_F32(zf_shape_scalar(), 4);
    in[1] = KT_I32(ZF_SHAPE(2), 2, 0);
    ASSERT_OK(s_run("BroadcastTo", in, 2, &out));
    kt_expect_shape(out, ZF_SHAPE(2, 0));
    zf_tensor_unref(&out);
    struct {
        zf_tensor_t *x, *shape;
        const char *msg;
    } cases[] = {
        {KT_I32(ZF_SHAPE(3), 1, 2, 3), KT_I32(ZF_SHAPE(2), 2, 2),
         "p (BroadcastTo): Unable to broadcast tensor of shape [3] to tensor of shape [2,2]"},
        {KT_I32(ZF_SHAPE(1, 3), 1, 2, 3), KT_I32(ZF_SHAPE(1), 3),
         "Unable to broadcast tensor of shape [1,3] to tensor of shape [3]"},
        {KT_I32(ZF_SHAPE(1), 1), KT_I32(ZF_SHAPE(2), 2, -2), "shape[1] = -2 must be non-negative"},
        {KT_I32(ZF_SHAPE(1), 1), KT_I32(zf_shape_scalar(), 2),
         "shape must be a vector, got shape []"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zf_tensor_t *bad[2] = {cases[i].x, cases[i].shape};
        zf_test_expect_error(s_run("BroadcastTo", bad, 2, &out), ZF_INVALID_ARGUMENT, cases[i].msg);
    }
}

/* ---- BroadcastGradientArgs --------------------------------------------------------------- */

static void test_broadcast_gradient_args_lists_the_broadcast_dims(void **state)
{
    (void)state;
    zf_tensor_t *out[2] = {NULL, NULL};
    zf_tensor_t *in[2] = {KT_I32(ZF_SHAPE(3), 2, 3, 5), KT_I32(ZF_SHAPE(2), 3, 1)};
    ASSERT_OK(s_run_attr("BroadcastGradientArgs", in, 2, out, 2, NULL, NULL));
    KT_EXPECT_INTS(out[0], ZF_SHAPE(0), 0);
    KT_EXPECT_INTS(out[1], ZF_SHAPE(2), 0, 2);
    kt_unref_all(out, 2);
    in[0] = KT_I64(ZF_SHAPE(3), 2, 1, 3);
    in[1] = KT_I64(ZF_SHAPE(1), 3);
    ASSERT_OK(s_run_attr("BroadcastGradientArgs", in, 2, out, 2, NULL, NULL));
    assert_int_equal(zf_tensor_dtype(out[0]), ZF_INT64);
    KT_EXPECT_INTS(out[0], ZF_SHAPE(1), 1);
    KT_EXPECT_INTS(out[1], ZF_SHAPE(2), 0, 1);
    kt_unref_all(out, 2);
    /* dims of 1 on both sides reduce on both; a scalar against a vector */
    in[0] = KT_I32(ZF_SHAPE(1), 1);
    in[1] = KT_I32(ZF_SHAPE(1), 1);
    ASSERT_OK(s_run_attr("BroadcastGradientArgs", in, 2, out, 2, NULL, NULL));
    KT_EXPECT_INTS(out[0], ZF_SHAPE(1), 0);
    KT_EXPECT_INTS(out[1], ZF_SHAPE(1), 0);
    kt_unref_all(out, 2);
    in[0] = kt_zeros(ZF_INT32, ZF_SHAPE(0));
    in[1] = KT_I32(ZF_SHAPE(1), 4);
    ASSERT_OK(s_run_attr("BroadcastGradientArgs", in, 2, out, 2, NULL, NULL));
    KT_EXPECT_INTS(out[0], ZF_SHAPE(1), 0);
    KT_EXPECT_INTS(out[1], ZF_SHAPE(0), 0);
    kt_unref_all(out, 2);
    in[0] = KT_I32(ZF_SHAPE(2), 2, 3);
    in[1] = KT_I32(ZF_SHAPE(1), 4);
    zf_test_expect_error(s_run_attr("BroadcastGradientArgs", in, 2, out, 2, NULL, NULL),
                         ZF_INVALID_ARGUMENT, "Incompatible shapes: [2,3] vs. [4]");
    in[0] = KT_I32(ZF_SHAPE(1, 2), 2, 3);
    in[1] = KT_I32(ZF_SHAPE(1), 4);
    zf_test_expect_error(s_run_attr("BroadcastGradientArgs", in, 2, out, 2, NULL, NULL),
                         ZF_INVALID_ARGUMENT, "In[0] must be a vector.[1,2]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile_repeats_along_each_dim),
        cmocka_unit_test(test_tile_and_reverse_move_any_element_size),
        cmocka_unit_test(test_tile_rejects_bad_multiples),
        cmocka_unit_test(test_maps_of_empty_tensors_with_huge_dims),
        cmocka_unit_test(test_pad_and_pad_v2_fill_around_the_input),
        cmocka_unit_test(test_pad_rejects_bad_paddings),
        cmocka_unit_test(test_mirror_pad_reflects_and_mirrors),
        cmocka_unit_test(test_reverse_flips_the_named_axes),
        cmocka_unit_test(test_large_maps_on_a_pool_match_index_loops),
        cmocka_unit_test(test_broadcast_to_repeats_dims_of_one),
        cmocka_unit_test(test_broadcast_gradient_args_lists_the_broadcast_dims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
