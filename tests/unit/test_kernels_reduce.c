/* Tests for executor/kernels/kernels_reduce: Sum, Mean, Max, Min, Prod over axis
 * inputs with keep_dims, ArgMax and ArgMin, edge shapes and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

/* Runs op(x, axes) (both taken) with keep_dims, optionally on dev. */
static zf_status_t s_reduce_on(const char *op, zf_tensor_t *x, zf_tensor_t *axes, bool keep,
                               zf_device_t *dev, zf_tensor_t **out)
{
    Tensorflow__NodeDef *n = kt_node_new("r", op, 2);
    kt_attr_type(n, "T", zf_tensor_dtype(x));
    kt_attr_bool(n, "keep_dims", keep);
    zf_tensor_t *in[2] = {x, axes};
    zf_status_t s = kt_run_on(n, in, 2, out, 1, NULL, dev);
    kt_unref_all(in, 2);
    kt_node_free(&n);
    return s;
}

static zf_tensor_t *s_reduce(const char *op, zf_tensor_t *x, zf_tensor_t *axes, bool keep)
{
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_reduce_on(op, x, axes, keep, NULL, &out));
    return out;
}

#define S_M23() KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6)

static void test_sum_over_each_axis_of_a_matrix(void **state)
{
    (void)state;
    zf_tensor_t *y = s_reduce("Sum", S_M23(), KT_I32(zf_shape_scalar(), 1), false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 0, 6, 15);
    zf_tensor_unref(&y);
    y = s_reduce("Sum", S_M23(), KT_I64(ZF_SHAPE(1), 0), false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 0, 5, 7, 9);
    zf_tensor_unref(&y);
    y = s_reduce("Sum", S_M23(), KT_I32(ZF_SHAPE(1), -1), true);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2, 1), 0, 6, 15);
    zf_tensor_unref(&y);
    y = s_reduce("Sum", S_M23(), KT_I32(ZF_SHAPE(2), 1, 0), false);
    KT_EXPECT_NEAR(y, zf_shape_scalar(), 0, 21);
    zf_tensor_unref(&y);
    y = s_reduce("Sum", S_M23(), KT_I32(ZF_SHAPE(2), 0, 1), true);
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 1), 0, 21);
    zf_tensor_unref(&y);
    y = s_reduce("Sum", S_M23(), kt_zeros(ZF_INT32, ZF_SHAPE(0)), false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2, 3), 0, 1, 2, 3, 4, 5, 6);
    zf_tensor_unref(&y);
}

static void test_mean_max_min_prod_compute_hand_checked_values(void **state)
{
    (void)state;
    zf_tensor_t *y = s_reduce("Mean", S_M23(), KT_I32(zf_shape_scalar(), 1), false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 1e-6, 2, 5);
    zf_tensor_unref(&y);
    y = s_reduce("Mean", KT_I32(ZF_SHAPE(3), 1, 2, 4), KT_I32(zf_shape_scalar(), 0), false);
    KT_EXPECT_INTS(y, zf_shape_scalar(), 2); /* integer division, as TensorFlow */
    zf_tensor_unref(&y);
    y = s_reduce("Max", KT_F64(ZF_SHAPE(2, 2), -1, -5, 3, 2), KT_I32(zf_shape_scalar(), 1), false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 0, -1, 3);
    zf_tensor_unref(&y);
    y = s_reduce("Min", KT_I64(ZF_SHAPE(2, 2), -1, -5, 3, 2), KT_I32(zf_shape_scalar(), 0), true);
    KT_EXPECT_INTS(y, ZF_SHAPE(1, 2), -1, -5);
    zf_tensor_unref(&y);
    y = s_reduce("Prod", KT_I32(ZF_SHAPE(3), 2, -3, 4), KT_I32(zf_shape_scalar(), 0), false);
    KT_EXPECT_INTS(y, zf_shape_scalar(), -24);
    zf_tensor_unref(&y);
    y = s_reduce("Prod", KT_I32(ZF_SHAPE(3), 65536, 65536, 3), KT_I32(zf_shape_scalar(), 0), false);
    KT_EXPECT_INTS(y, zf_shape_scalar(), 0); /* wraps modulo 2^32 */
    zf_tensor_unref(&y);
}

/* Reference: each input element folded into its output by index. */
static void s_check_rank4(const char *op, const int32_t *axes, int n_axes, bool keep,
                          zf_device_t *dev)
{
    zf_shape_t s = ZF_SHAPE(3, 4, 5, 6);
    zf_tensor_t *x = kt_random_f32(s, 5), *y = NULL;
    bool red[4] = {false};
    for (int i = 0; i < n_axes; i++) red[axes[i] < 0 ? axes[i] + 4 : axes[i]] = true;
    ASSERT_OK(s_reduce_on(op, zf_tensor_ref(x),
                          kt_tensor(ZF_INT32, ZF_SHAPE(n_axes), axes, (size_t)n_axes), keep, dev,
                          &y));
    double want[360];
    bool is_max = strcmp(op, "Max") == 0;
    for (int i = 0; i < 360; i++) want[i] = is_max ? -INFINITY : 0;
    int64_t idx[4] = {0}, n_out = 1;
    const float *px = zf_tensor_data(x);
    for (int64_t i = 0; i < 360; i++) {
        int64_t o = 0;
        for (int k = 0; k < 4; k++)
            if (!red[k]) o = o * s.dims[k] + idx[k];
        want[o] = is_max ? fmax(want[o], px[i]) : want[o] + px[i];
        for (int k = 3; k >= 0 && ++idx[k] == s.dims[k]; k--) idx[k] = 0;
    }
    zf_shape_t ws = {.rank = 0};
    for (int k = 0; k < 4; k++) {
        if (!red[k]) n_out *= s.dims[k];
        if (!red[k] || keep) ws.dims[ws.rank++] = red[k] ? 1 : s.dims[k];
    }
    kt_expect_near(y, ws, want, 1e-5);
    assert_int_equal(zf_tensor_num_elements(y), n_out);
    zf_tensor_unref(&x);
    zf_tensor_unref(&y);
}

static void test_rank4_reductions_match_index_arithmetic(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    const int32_t a13[] = {1, 3}, a02[] = {0, 2}, a3[] = {-1}, a0[] = {0}, a123[] = {1, 2, 3};
    for (int d = 0; d < 2; d++) {
        zf_device_t *on = d ? dev : NULL;
        s_check_rank4("Sum", a13, 2, false, on);
        s_check_rank4("Sum", a02, 2, true, on);
        s_check_rank4("Max", a3, 1, false, on);
        s_check_rank4("Max", a0, 1, true, on);
        s_check_rank4("Sum", a123, 3, false, on);
    }
    zf_device_destroy(&dev);
}

static void test_large_reductions_split_over_the_pool(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 3, &dev));
    zf_tensor_t *x = kt_zeros(ZF_INT64, ZF_SHAPE(2000, 300)), *y = NULL;
    int64_t *p = zf_tensor_data(x);
    for (int64_t i = 0; i < 600000; i++) p[i] = i % 300; /* row sums: 44850 */
    ASSERT_OK(s_reduce_on("Sum", zf_tensor_ref(x), KT_I32(zf_shape_scalar(), 1), false, dev, &y));
    for (int64_t r = 0; r < 2000; r++) assert_int_equal(((int64_t *)zf_tensor_data(y))[r], 44850);
    zf_tensor_unref(&y);
    ASSERT_OK(s_reduce_on("Max", x, KT_I32(zf_shape_scalar(), 0), false, dev, &y));
    for (int64_t c = 0; c < 300; c++) assert_int_equal(((int64_t *)zf_tensor_data(y))[c], c);
    zf_tensor_unref(&y);
    zf_device_destroy(&dev);
}

static void test_empty_reductions_give_identities(void **state)
{
    (void)state;
    zf_tensor_t *y =
        s_reduce("Sum", kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), KT_I32(ZF_SHAPE(1), 0), false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 0, 0, 0, 0);
    zf_tensor_unref(&y);
    y = s_reduce("Max", kt_zeros(ZF_FLOAT, ZF_SHAPE(0)), KT_I32(ZF_SHAPE(1), 0), false);
    KT_EXPECT_NEAR(y, zf_shape_scalar(), 0, -INFINITY);
    zf_tensor_unref(&y);
    y = s_reduce("Mean", kt_zeros(ZF_DOUBLE, ZF_SHAPE(2, 0)), KT_I32(ZF_SHAPE(1), 1), false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 0, NAN, NAN);
    zf_tensor_unref(&y);
    y = s_reduce("Mean", kt_zeros(ZF_INT32, ZF_SHAPE(0)), KT_I32(ZF_SHAPE(1), 0), false);
    KT_EXPECT_INTS(y, zf_shape_scalar(), 0);
    zf_tensor_unref(&y);
    y = s_reduce("Sum", kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), KT_I32(ZF_SHAPE(1), 1), false);
    kt_expect_shape(y, ZF_SHAPE(0));
    zf_tensor_unref(&y);
    y = s_reduce("Sum", KT_F32(zf_shape_scalar(), 4), kt_zeros(ZF_INT32, ZF_SHAPE(0)), false);
    KT_EXPECT_NEAR(y, zf_shape_scalar(), 0, 4);
    zf_tensor_unref(&y);
}

static void test_reductions_reject_bad_axes(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    zf_test_expect_error(s_reduce_on("Sum", S_M23(), KT_I32(ZF_SHAPE(1), 2), false, NULL, &y),
                         ZF_INVALID_ARGUMENT,
                         "r (Sum): Invalid reduction dimension (2 for input with 2 dimension(s)");
    zf_test_expect_error(s_reduce_on("Sum", S_M23(), KT_I32(ZF_SHAPE(2), 1, -1), false, NULL, &y),
                         ZF_INVALID_ARGUMENT, "Axes contains duplicate dimension: 1");
    zf_test_expect_error(s_reduce_on("Max", S_M23(), KT_F32(ZF_SHAPE(1), 1), false, NULL, &y),
                         ZF_INVALID_ARGUMENT,
                         "reduction_indices must be int32 or int64, got float");
    zf_test_expect_error(
        s_reduce_on("Mean", KT_F32(zf_shape_scalar(), 1), KT_I32(ZF_SHAPE(1), 0), false, NULL, &y),
        ZF_INVALID_ARGUMENT, "Invalid reduction dimension (0 for input with 0");
    assert_null(y);
}

/* ---- ArgMax, ArgMin -------------------------------------------------------------------------- */

static zf_status_t s_arg(const char *op, zf_tensor_t *x, int64_t dim, zf_dtype_t out_type,
                         zf_tensor_t **out)
{
    Tensorflow__NodeDef *n = kt_node_new("am", op, 2);
    kt_attr_type(n, "T", zf_tensor_dtype(x));
    if (out_type != ZF_INVALID) kt_attr_type(n, "output_type", out_type);
    zf_tensor_t *in[2] = {x, KT_I64(zf_shape_scalar(), dim)};
    zf_status_t s = kt_run(n, in, 2, out, 1);
    kt_unref_all(in, 2);
    kt_node_free(&n);
    return s;
}

static void test_argmax_and_argmin_pick_the_first_extreme(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_arg("ArgMax", KT_F32(ZF_SHAPE(2, 3), 1, 5, 3, 7, 2, 7), 1, ZF_INVALID, &y));
    assert_int_equal(zf_tensor_dtype(y), ZF_INT64);
    KT_EXPECT_INTS(y, ZF_SHAPE(2), 1, 0);
    zf_tensor_unref(&y);
    ASSERT_OK(s_arg("ArgMax", KT_I32(ZF_SHAPE(2, 3), 1, 5, 3, 7, 2, 7), -2, ZF_INT32, &y));
    assert_int_equal(zf_tensor_dtype(y), ZF_INT32);
    KT_EXPECT_INTS(y, ZF_SHAPE(3), 1, 0, 1);
    zf_tensor_unref(&y);
    ASSERT_OK(
        s_arg("ArgMin", KT_F64(ZF_SHAPE(2, 2, 2), 4, 3, 2, 1, 0, 9, 9, 0), 1, ZF_INVALID, &y));
    KT_EXPECT_INTS(y, ZF_SHAPE(2, 2), 1, 1, 0, 1);
    zf_tensor_unref(&y);
}

static void test_argmax_rejects_empty_and_out_of_range_axes(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    zf_test_expect_error(s_arg("ArgMax", kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 0)), 1, ZF_INVALID, &y),
                         ZF_INVALID_ARGUMENT,
                         "am (ArgMax): Reduction axis 1 is empty in shape [2,0]");
    zf_test_expect_error(s_arg("ArgMax", kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), 2, ZF_INVALID, &y),
                         ZF_INVALID_ARGUMENT, "Expected dimension in the range [-2, 2), but got 2");
    zf_test_expect_error(s_arg("ArgMax", kt_zeros(ZF_FLOAT, ZF_SHAPE(2)), 0, ZF_FLOAT, &y),
                         ZF_INVALID_ARGUMENT, "output_type must be int32 or int64, got float");
}

/* ---- All, Any ------------------------------------------------------------------------------ */

#define S_B23() KT_BOOL(ZF_SHAPE(2, 3), true, false, true, true, true, true)

static void test_all_and_any_over_axes(void **state)
{
    (void)state;
    zf_tensor_t *y = s_reduce("All", S_B23(), KT_I32(zf_shape_scalar(), 1), false);
    KT_EXPECT_INTS(y, ZF_SHAPE(2), 0, 1);
    zf_tensor_unref(&y);
    y = s_reduce("Any", S_B23(), KT_I64(ZF_SHAPE(1), -2), true);
    KT_EXPECT_INTS(y, ZF_SHAPE(1, 3), 1, 1, 1);
    zf_tensor_unref(&y);
    y = s_reduce("All", S_B23(), KT_I64(ZF_SHAPE(1), 0), false);
    KT_EXPECT_INTS(y, ZF_SHAPE(3), 1, 0, 1);
    zf_tensor_unref(&y);
    y = s_reduce("All", S_B23(), KT_I32(ZF_SHAPE(2), -1, 0), false);
    KT_EXPECT_INTS(y, zf_shape_scalar(), 0);
    zf_tensor_unref(&y);
    y = s_reduce("Any", KT_BOOL(ZF_SHAPE(2, 2), false, false, false, true),
                 KT_I32(ZF_SHAPE(2), 0, 1), true);
    KT_EXPECT_INTS(y, ZF_SHAPE(1, 1), 1);
    zf_tensor_unref(&y);
    y = s_reduce("Any", KT_BOOL(zf_shape_scalar(), false), kt_zeros(ZF_INT32, ZF_SHAPE(0)), false);
    KT_EXPECT_INTS(y, zf_shape_scalar(), 0);
    zf_tensor_unref(&y);
}

static void test_empty_all_is_true_and_empty_any_is_false(void **state)
{
    (void)state;
    zf_tensor_t *y =
        s_reduce("All", kt_zeros(ZF_BOOL, ZF_SHAPE(2, 0)), KT_I32(ZF_SHAPE(1), 1), false);
    KT_EXPECT_INTS(y, ZF_SHAPE(2), 1, 1);
    zf_tensor_unref(&y);
    y = s_reduce("Any", kt_zeros(ZF_BOOL, ZF_SHAPE(2, 0)), KT_I32(ZF_SHAPE(1), 1), false);
    KT_EXPECT_INTS(y, ZF_SHAPE(2), 0, 0);
    zf_tensor_unref(&y);
}

static void test_all_and_any_reject_bad_inputs(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    zf_test_expect_error(
        s_reduce_on("Any", S_B23(), KT_I32(zf_shape_scalar(), -3), false, NULL, &y),
        ZF_INVALID_ARGUMENT,
        "r (Any): Invalid reduction dimension (-3 for input with 2 dimension(s)");
    zf_test_expect_error(s_reduce_on("All", S_M23(), KT_I32(zf_shape_scalar(), 0), false, NULL, &y),
                         ZF_INVALID_ARGUMENT, "r (All): no CPU kernel for float inputs");
    zf_test_expect_error(s_reduce_on("Sum", S_B23(), KT_I32(zf_shape_scalar(), 0), false, NULL, &y),
                         ZF_NOT_FOUND, "No OpKernel was registered to support Op 'Sum'");
    assert_null(y);
}

/* ---- the other integer types ------------------------------------------------------------ */

#define S_TYPED(dtype, T, shape, ...)                                                              \
    kt_tensor((dtype), (shape), (const T[]){__VA_ARGS__}, KT_COUNT(T, __VA_ARGS__))

/* Element i of an integer tensor of any width, as int64 (uint64 bits kept). */
static int64_t s_int_at(const zf_tensor_t *t, int64_t i)
{
    const void *d = zf_tensor_data(t);
    switch (zf_tensor_dtype(t)) {
    case ZF_INT8: return ((const int8_t *)d)[i];
    case ZF_INT16: return ((const int16_t *)d)[i];
    case ZF_UINT8: return ((const uint8_t *)d)[i];
    case ZF_UINT16: return ((const uint16_t *)d)[i];
    case ZF_UINT32: return ((const uint32_t *)d)[i];
    default: return (int64_t)((const uint64_t *)d)[i];
    }
}

static void s_expect_typed(zf_tensor_t *y, zf_dtype_t dtype, zf_shape_t shape, const int64_t *want)
{
    assert_int_equal(zf_tensor_dtype(y), dtype);
    kt_expect_shape(y, shape);
    for (int64_t i = 0; i < zf_tensor_num_elements(y); i++)
        assert_int_equal(s_int_at(y, i), want[i]);
    zf_tensor_unref(&y);
}
#define S_EXPECT_TYPED(y, dtype, shape, ...)                                                       \
    s_expect_typed((y), (dtype), (shape), (const int64_t[]){__VA_ARGS__})

static void test_reductions_of_narrow_and_unsigned_integers(void **state)
{
    (void)state;
    /* sums and products wrap in their own width */
    S_EXPECT_TYPED(s_reduce("Sum", S_TYPED(ZF_INT8, int8_t, ZF_SHAPE(3), 100, 100, -50),
                            KT_I32(zf_shape_scalar(), 0), false),
                   ZF_INT8, zf_shape_scalar(), -106);
    S_EXPECT_TYPED(s_reduce("Sum", S_TYPED(ZF_UINT8, uint8_t, ZF_SHAPE(2, 2), 200, 1, 100, 2),
                            KT_I64(ZF_SHAPE(1), 0), false),
                   ZF_UINT8, ZF_SHAPE(2), 44, 3);
    S_EXPECT_TYPED(s_reduce("Prod", S_TYPED(ZF_UINT16, uint16_t, ZF_SHAPE(2), 65535, 65535),
                            KT_I32(zf_shape_scalar(), -1), true),
                   ZF_UINT16, ZF_SHAPE(1), 1);
    S_EXPECT_TYPED(s_reduce("Prod", S_TYPED(ZF_INT16, int16_t, ZF_SHAPE(3), -3, 7, 2),
                            KT_I32(zf_shape_scalar(), 0), false),
                   ZF_INT16, zf_shape_scalar(), -42);
    S_EXPECT_TYPED(s_reduce("Max", S_TYPED(ZF_UINT32, uint32_t, ZF_SHAPE(3), 0, 4000000000u, 5),
                            KT_I32(zf_shape_scalar(), 0), false),
                   ZF_UINT32, zf_shape_scalar(), 4000000000LL);
    S_EXPECT_TYPED(s_reduce("Min", S_TYPED(ZF_UINT64, uint64_t, ZF_SHAPE(2), UINT64_MAX, 9),
                            KT_I32(zf_shape_scalar(), 0), false),
                   ZF_UINT64, zf_shape_scalar(), 9);
    /* integer means truncate */
    S_EXPECT_TYPED(s_reduce("Mean", S_TYPED(ZF_INT16, int16_t, ZF_SHAPE(2, 2), 1, 2, 3, 4),
                            KT_I32(zf_shape_scalar(), 1), true),
                   ZF_INT16, ZF_SHAPE(2, 1), 1, 3);
    S_EXPECT_TYPED(s_reduce("Mean", S_TYPED(ZF_INT8, int8_t, ZF_SHAPE(3), -7, 0, 1),
                            KT_I32(zf_shape_scalar(), 0), false),
                   ZF_INT8, zf_shape_scalar(), -2);
    /* identities of empty reductions */
    S_EXPECT_TYPED(
        s_reduce("Min", kt_zeros(ZF_UINT64, ZF_SHAPE(2, 0)), KT_I32(zf_shape_scalar(), 1), false),
        ZF_UINT64, ZF_SHAPE(2), (int64_t)UINT64_MAX, (int64_t)UINT64_MAX);
    S_EXPECT_TYPED(
        s_reduce("Max", kt_zeros(ZF_INT8, ZF_SHAPE(1, 0)), KT_I32(zf_shape_scalar(), 1), false),
        ZF_INT8, ZF_SHAPE(1), INT8_MIN);
    S_EXPECT_TYPED(
        s_reduce("Prod", kt_zeros(ZF_UINT8, ZF_SHAPE(0)), KT_I32(zf_shape_scalar(), 0), false),
        ZF_UINT8, zf_shape_scalar(), 1);
    S_EXPECT_TYPED(
        s_reduce("Mean", kt_zeros(ZF_INT16, ZF_SHAPE(0)), KT_I32(zf_shape_scalar(), 0), false),
        ZF_INT16, zf_shape_scalar(), 0);
}

static void test_argmax_of_narrow_and_unsigned_integers(void **state)
{
    (void)state;
    zf_tensor_t *y =
        s_reduce("ArgMax", S_TYPED(ZF_UINT8, uint8_t, ZF_SHAPE(2, 3), 1, 250, 250, 9, 3, 0),
                 KT_I32(zf_shape_scalar(), 1), false);
    KT_EXPECT_INTS(y, ZF_SHAPE(2), 1, 0);
    zf_tensor_unref(&y);
    y = s_reduce("ArgMin", S_TYPED(ZF_INT16, int16_t, ZF_SHAPE(2, 2), 5, -300, -301, 7),
                 KT_I32(zf_shape_scalar(), 0), false);
    KT_EXPECT_INTS(y, ZF_SHAPE(2), 1, 0);
    zf_tensor_unref(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_over_each_axis_of_a_matrix),
        cmocka_unit_test(test_mean_max_min_prod_compute_hand_checked_values),
        cmocka_unit_test(test_rank4_reductions_match_index_arithmetic),
        cmocka_unit_test(test_large_reductions_split_over_the_pool),
        cmocka_unit_test(test_empty_reductions_give_identities),
        cmocka_unit_test(test_reductions_reject_bad_axes),
        cmocka_unit_test(test_argmax_and_argmin_pick_the_first_extreme),
        cmocka_unit_test(test_argmax_rejects_empty_and_out_of_range_axes),
        cmocka_unit_test(test_all_and_any_over_axes),
        cmocka_unit_test(test_empty_all_is_true_and_empty_any_is_false),
        cmocka_unit_test(test_all_and_any_reject_bad_inputs),
        cmocka_unit_test(test_reductions_of_narrow_and_unsigned_integers),
        cmocka_unit_test(test_argmax_of_narrow_and_unsigned_integers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
