/* Tests for the GPU kernels of comparisons, logic and selection
 * (gpu_kernels_compare.c, compare.cu) and the host-memory INT32 and Range
 * variants: hand-computed values, broadcasting against the CPU kernels,
 * error texts, and where outputs live. Every test needs a visible GPU and
 * is skipped, saying why, when there is none; the program then exits 77
 * so CTest reports it skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"
#include "gpu_test_util.h"

/* Runs op (attr T = t unless t is ZF_INVALID) on the GPU; takes in. */
static zf_tensor_t *s_gpu(zf_device_t *dev, const char *op, zf_dtype_t t, zf_tensor_t **in, int n)
{
    Tensorflow__NodeDef *node = kt_node_new("g", op, n);
    if (t != ZF_INVALID) kt_attr_type(node, "T", t);
    zf_tensor_t *out = NULL;
    ASSERT_OK(gt_run(dev, node, in, n, &out, 1));
    kt_node_free(&node);
    kt_unref_all(in, n);
    return out;
}

static zf_tensor_t *s_halves(zf_shape_t shape, const float *v, int n)
{
    uint16_t h[8];
    for (int i = 0; i < n; i++) h[i] = zf_float_to_half(v[i]);
    return kt_tensor(ZF_HALF, shape, h, (size_t)n);
}

static void test_gpu_comparisons_compute_hand_checked_values(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    static const char *const ops[6] = {"Less",         "LessEqual", "Greater",
                                       "GreaterEqual", "Equal",     "NotEqual"};
    /* x = {1, 2, 3, -4}, y = {2, 2, 1, -5} */
    static const int64_t want[6][4] = {
        {1, 0, 0, 0}, {1, 1, 0, 0}, {0, 0, 1, 1}, {0, 1, 1, 1}, {0, 1, 0, 0}, {1, 0, 1, 1},
    };
    static const float xf[4] = {1, 2, 3, -4}, yf[4] = {2, 2, 1, -5};
    for (int k = 0; k < 6; k++) {
        zf_tensor_t *in[4][2] = {
            {KT_F32(ZF_SHAPE(4), 1, 2, 3, -4), KT_F32(ZF_SHAPE(4), 2, 2, 1, -5)},
            {KT_F64(ZF_SHAPE(4), 1, 2, 3, -4), KT_F64(ZF_SHAPE(4), 2, 2, 1, -5)},
            {KT_I64(ZF_SHAPE(4), 1, 2, 3, -4), KT_I64(ZF_SHAPE(4), 2, 2, 1, -5)},
            {s_halves(ZF_SHAPE(4), xf, 4), s_halves(ZF_SHAPE(4), yf, 4)},
        };
        for (int i = 0; i < 4; i++) {
            zf_tensor_t *z = s_gpu(dev, ops[k], zf_tensor_dtype(in[i][0]), in[i], 2);
            assert_int_equal(zf_tensor_dtype(z), ZF_BOOL);
            kt_expect_ints(z, ZF_SHAPE(4), want[k]);
            zf_tensor_unref(&z);
        }
    }
    /* NaN is unequal to itself; [[1],[5]] < [2, 4, 6] broadcasts */
    zf_tensor_t *in[2] = {KT_F32(ZF_SHAPE(2), NAN, 1), KT_F32(ZF_SHAPE(2), NAN, 1)};
    zf_tensor_t *z = s_gpu(dev, "NotEqual", ZF_FLOAT, in, 2);
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 1, 0);
    zf_tensor_unref(&z);
    in[0] = KT_I64(ZF_SHAPE(2, 1), 1, 5);
    in[1] = KT_I64(ZF_SHAPE(3), 2, 4, 6);
    z = s_gpu(dev, "Less", ZF_INT64, in, 2);
    KT_EXPECT_INTS(z, ZF_SHAPE(2, 3), 1, 1, 1, 0, 0, 1);
    zf_tensor_unref(&z);
    zf_device_destroy(&dev);
}

/* GreaterEqual over a rank-3 broadcast, element for element the CPU's. */
static void test_gpu_comparison_broadcasts_like_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *in[2] = {kt_random_f32(ZF_SHAPE(64, 1, 33), 3), kt_random_f32(ZF_SHAPE(7, 33), 4)};
    Tensorflow__NodeDef *n = kt_node_new("g", "GreaterEqual", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    zf_tensor_t *cpu = NULL, *gpu = NULL;
    ASSERT_OK(kt_run(n, in, 2, &cpu, 1));
    ASSERT_OK(gt_run(dev, n, in, 2, &gpu, 1));
    kt_expect_shape(gpu, ZF_SHAPE(64, 7, 33));
    assert_memory_equal(zf_tensor_data(gpu), zf_tensor_data(cpu), 64 * 7 * 33);
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], cpu, gpu}, 4);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static void test_gpu_equality_and_logic_on_bools(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *in[2] = {KT_BOOL(ZF_SHAPE(4), true, true, false, false),
                          KT_BOOL(ZF_SHAPE(4), true, false, true, false)};
    zf_tensor_t *z = s_gpu(dev, "Equal", ZF_BOOL, in, 2);
    KT_EXPECT_INTS(z, ZF_SHAPE(4), 1, 0, 0, 1);
    zf_tensor_unref(&z);
    in[0] = KT_BOOL(ZF_SHAPE(2, 1), true, false);
    in[1] = KT_BOOL(ZF_SHAPE(2), true, false);
    z = s_gpu(dev, "LogicalAnd", ZF_INVALID, in, 2);
    KT_EXPECT_INTS(z, ZF_SHAPE(2, 2), 1, 0, 0, 0);
    zf_tensor_unref(&z);
    in[0] = KT_BOOL(ZF_SHAPE(2, 1), true, false);
    in[1] = KT_BOOL(ZF_SHAPE(2), true, false);
    z = s_gpu(dev, "LogicalOr", ZF_INVALID, in, 2);
    KT_EXPECT_INTS(z, ZF_SHAPE(2, 2), 1, 1, 1, 0);
    zf_tensor_unref(&z);
    in[0] = KT_BOOL(ZF_SHAPE(3), true, false, true);
    z = s_gpu(dev, "LogicalNot", ZF_INVALID, in, 1);
    KT_EXPECT_INTS(z, ZF_SHAPE(3), 0, 1, 0);
    zf_tensor_unref(&z);
    zf_device_destroy(&dev);
}

static void test_gpu_incompatible_shapes(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    for (int k = 0; k < 2; k++) {
        Tensorflow__NodeDef *n = kt_node_new("eq", k ? "NotEqual" : "Equal", 2);
        kt_attr_type(n, "T", ZF_FLOAT);
        zf_tensor_t *in[2] = {KT_F32(ZF_SHAPE(2), 1, 2), KT_F32(ZF_SHAPE(3), 1, 2, 3)}, *z = NULL;
        zf_test_expect_error(gt_run(dev, n, in, 2, &z, 1), ZF_INVALID_ARGUMENT,
                             k ? "eq (NotEqual): Incompatible shapes: [2] vs. [3]"
                               : "eq (Equal): Incompatible shapes: [2] vs. [3]");
        kt_attr_bool(n, "incompatible_shape_error", false);
        ASSERT_OK(gt_run(dev, n, in, 2, &z, 1));
        KT_EXPECT_INTS(z, zf_shape_scalar(), k);
        zf_tensor_unref(&z);
        kt_unref_all(in, 2);
        kt_node_free(&n);
    }
    zf_device_destroy(&dev);
}

static void test_gpu_select_and_select_v2(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *in[3] = {KT_BOOL(ZF_SHAPE(3), true, false, true),
                          KT_I64(ZF_SHAPE(3, 2), 1, 2, 3, 4, 5, 6),
                          KT_I64(ZF_SHAPE(3, 2), 10, 20, 30, 40, 50, 60)};
    zf_tensor_t *z = s_gpu(dev, "Select", ZF_INT64, in, 3);
    KT_EXPECT_INTS(z, ZF_SHAPE(3, 2), 1, 2, 30, 40, 5, 6);
    zf_tensor_unref(&z);
    in[0] = KT_BOOL(zf_shape_scalar(), false);
    in[1] = KT_F32(ZF_SHAPE(2), 1, 2);
    in[2] = KT_F32(ZF_SHAPE(2), 7, 8);
    z = s_gpu(dev, "Select", ZF_FLOAT, in, 3);
    KT_EXPECT_NEAR(z, ZF_SHAPE(2), 0, 7, 8);
    zf_tensor_unref(&z);
    in[0] = KT_BOOL(ZF_SHAPE(4), true, false, false, true);
    in[1] = KT_F64(ZF_SHAPE(4), 1, 2, 3, 4);
    in[2] = KT_F64(ZF_SHAPE(4), -1, -2, -3, -4);
    z = s_gpu(dev, "Select", ZF_DOUBLE, in, 3);
    KT_EXPECT_NEAR(z, ZF_SHAPE(4), 0, 1, -2, -3, 4);
    zf_tensor_unref(&z);
    /* cond [3], then [2,1], else [2,3] */
    in[0] = KT_BOOL(ZF_SHAPE(3), true, false, true);
    in[1] = KT_F32(ZF_SHAPE(2, 1), 1, 2);
    in[2] = KT_F32(ZF_SHAPE(2, 3), 10, 20, 30, 40, 50, 60);
    z = s_gpu(dev, "SelectV2", ZF_FLOAT, in, 3);
    KT_EXPECT_NEAR(z, ZF_SHAPE(2, 3), 0, 1, 20, 1, 2, 50, 2);
    zf_tensor_unref(&z);
    in[0] = KT_BOOL(ZF_SHAPE(2, 1), true, false);
    in[1] = KT_BOOL(ZF_SHAPE(1, 2), true, false);
    in[2] = KT_BOOL(zf_shape_scalar(), true);
    z = s_gpu(dev, "SelectV2", ZF_BOOL, in, 3);
    KT_EXPECT_INTS(z, ZF_SHAPE(2, 2), 1, 0, 1, 1);
    zf_tensor_unref(&z);
    Tensorflow__NodeDef *n = kt_node_new("sel", "Select", 3);
    kt_attr_type(n, "T", ZF_FLOAT);
    zf_tensor_t *bad[3] = {KT_BOOL(ZF_SHAPE(2), true, false), kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 2)),
                           kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 2))};
    zf_test_expect_error(
        gt_run(dev, n, bad, 3, &z, 1), ZF_INVALID_ARGUMENT,
        "sel (Select): Number of batches of 'then' must match size of 'cond', but saw: 3 vs. 2");
    kt_unref_all(bad, 3);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static void test_gpu_int32_and_range_run_on_the_host(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *in[3] = {KT_I32(ZF_SHAPE(3), 1, 5, 3), KT_I32(zf_shape_scalar(), 3)};
    zf_tensor_t *z = s_gpu(dev, "Less", ZF_INT32, in, 2);
    assert_int_not_equal(zf_tensor_memory_kind(z), ZF_MEMORY_DEVICE);
    KT_EXPECT_INTS(z, ZF_SHAPE(3), 1, 0, 0);
    zf_tensor_unref(&z);
    in[0] = KT_I32(ZF_SHAPE(2), -7, 7);
    in[1] = KT_I32(zf_shape_scalar(), 2);
    z = s_gpu(dev, "FloorMod", ZF_INT32, in, 2);
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 1, 1);
    zf_tensor_unref(&z);
    in[0] = KT_BOOL(ZF_SHAPE(2), true, false);
    in[1] = KT_I32(ZF_SHAPE(2), 1, 2);
    in[2] = KT_I32(ZF_SHAPE(2), 3, 4);
    z = s_gpu(dev, "SelectV2", ZF_INT32, in, 3);
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 1, 4);
    zf_tensor_unref(&z);
    Tensorflow__NodeDef *n = kt_node_new("r", "Range", 3);
    kt_attr_type(n, "Tidx", ZF_INT64);
    zf_tensor_t *r[3] = {KT_I64(zf_shape_scalar(), 10), KT_I64(zf_shape_scalar(), 0),
                         KT_I64(zf_shape_scalar(), -4)};
    ASSERT_OK(gt_run(dev, n, r, 3, &z, 1));
    assert_int_not_equal(zf_tensor_memory_kind(z), ZF_MEMORY_DEVICE);
    KT_EXPECT_INTS(z, ZF_SHAPE(3), 10, 6, 2);
    zf_tensor_unref(&z);
    kt_unref_all(r, 3);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_comparisons_compute_hand_checked_values),
        cmocka_unit_test(test_gpu_comparison_broadcasts_like_the_cpu),
        cmocka_unit_test(test_gpu_equality_and_logic_on_bools),
        cmocka_unit_test(test_gpu_incompatible_shapes),
        cmocka_unit_test(test_gpu_select_and_select_v2),
        cmocka_unit_test(test_gpu_int32_and_range_run_on_the_host),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return gt_exit_code(failed, (int)(sizeof tests / sizeof tests[0]));
}
