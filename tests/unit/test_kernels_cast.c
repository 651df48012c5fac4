/* Tests for executor/kernels/kernels_cast: Cast between floating, integer, bool and
 * 16-bit float dtypes, with saturation, wrapping and bfloat16 truncation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static Tensorflow__NodeDef *s_cast_node(zf_dtype_t src, zf_dtype_t dst, bool truncate)
{
    Tensorflow__NodeDef *n = kt_node_new("cast", "Cast", 1);
    kt_attr_type(n, "SrcT", src);
    kt_attr_type(n, "DstT", dst);
    if (truncate) kt_attr_bool(n, "Truncate", true);
    return n;
}

/* Casts x (taken) to dst. */
static zf_tensor_t *s_cast(zf_tensor_t *x, zf_dtype_t dst, bool truncate)
{
    Tensorflow__NodeDef *n = s_cast_node(zf_tensor_dtype(x), dst, truncate);
    zf_tensor_t *out = NULL;
    ASSERT_OK(kt_run(n, &x, 1, &out, 1));
    assert_int_equal(zf_tensor_dtype(out), dst);
    zf_tensor_unref(&x);
    kt_node_free(&n);
    return out;
}

static void test_float_to_int_truncates_and_saturates(void **state)
{
    (void)state;
    zf_tensor_t *y =
        s_cast(KT_F32(ZF_SHAPE(6), 1.7f, -1.7f, NAN, 3e9f, -3e9f, INFINITY), ZF_INT32, false);
    KT_EXPECT_INTS(y, ZF_SHAPE(6), 1, -1, 0, INT32_MAX, INT32_MIN, INT32_MAX);
    zf_tensor_unref(&y);
    y = s_cast(KT_F64(ZF_SHAPE(3), 1e300, -1e300, -0.5), ZF_INT64, false);
    KT_EXPECT_INTS(y, ZF_SHAPE(3), INT64_MAX, INT64_MIN, 0);
    zf_tensor_unref(&y);
    y = s_cast(KT_F32(ZF_SHAPE(3), 300, -5, 254.9f), ZF_UINT8, false);
    const uint8_t *u8 = zf_tensor_data(y);
    assert_int_equal(u8[0], 255);
    assert_int_equal(u8[1], 0);
    assert_int_equal(u8[2], 254);
    zf_tensor_unref(&y);
}

static void test_integer_narrowing_wraps(void **state)
{
    (void)state;
    zf_tensor_t *y = s_cast(KT_I64(ZF_SHAPE(3), 4294967297LL, -1, 2147483648LL), ZF_INT32, false);
    KT_EXPECT_INTS(y, ZF_SHAPE(3), 1, -1, INT32_MIN);
    zf_tensor_unref(&y);
    y = s_cast(KT_I32(ZF_SHAPE(2), -1, 7), ZF_INT64, false);
    KT_EXPECT_INTS(y, ZF_SHAPE(2), -1, 7);
    zf_tensor_unref(&y);
    y = s_cast(KT_I64(ZF_SHAPE(2), INT64_MAX, INT64_MIN), ZF_INT64, false);
    KT_EXPECT_INTS(y, ZF_SHAPE(2), INT64_MAX, INT64_MIN);
    zf_tensor_unref(&y);
}

static void test_integers_and_floats_convert_exactly_where_representable(void **state)
{
    (void)state;
    zf_tensor_t *y = s_cast(KT_I32(ZF_SHAPE(3), -7, 16777216, 0), ZF_FLOAT, false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 0, -7, 16777216, 0);
    zf_tensor_unref(&y);
    y = s_cast(KT_F32(ZF_SHAPE(2), 0.1f, -2.5f), ZF_DOUBLE, false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 0, (double)0.1f, -2.5);
    zf_tensor_unref(&y);
    y = s_cast(KT_F64(ZF_SHAPE(2), 0.1, 1e40), ZF_FLOAT, false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 0, (double)0.1f, INFINITY);
    zf_tensor_unref(&y);
}

static void test_bool_casts_both_ways(void **state)
{
    (void)state;
    zf_tensor_t *y = s_cast(KT_F32(ZF_SHAPE(4), 0, -0.0f, 2, NAN), ZF_BOOL, false);
    KT_EXPECT_INTS(y, ZF_SHAPE(4), 0, 0, 1, 1);
    zf_tensor_unref(&y);
    y = s_cast(KT_I32(ZF_SHAPE(3), 0, -3, 1), ZF_BOOL, false);
    KT_EXPECT_INTS(y, ZF_SHAPE(3), 0, 1, 1);
    zf_tensor_unref(&y);
    y = s_cast(KT_BOOL(ZF_SHAPE(2), true, false), ZF_DOUBLE, false);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 0, 1, 0);
    zf_tensor_unref(&y);
}

static float s_float_of_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void test_bfloat16_rounds_or_truncates_and_half_round_trips(void **state)
{
    (void)state;
    float f = s_float_of_bits(0x3F808001u); /* just above halfway between two bfloat16s */
    zf_tensor_t *y = s_cast(KT_F32(ZF_SHAPE(1), f), ZF_BFLOAT16, false);
    assert_int_equal(((const uint16_t *)zf_tensor_data(y))[0], 0x3F81);
    zf_tensor_unref(&y);
    y = s_cast(KT_F32(ZF_SHAPE(1), f), ZF_BFLOAT16, true);
    assert_int_equal(((const uint16_t *)zf_tensor_data(y))[0], 0x3F80);
    zf_tensor_t *back = s_cast(y, ZF_FLOAT, false);
    KT_EXPECT_NEAR(back, ZF_SHAPE(1), 0, 1.0);
    zf_tensor_unref(&back);
    y = s_cast(KT_F32(ZF_SHAPE(2), 1.5f, -2), ZF_HALF, false);
    assert_int_equal(((const uint16_t *)zf_tensor_data(y))[0], 0x3E00);
    assert_int_equal(((const uint16_t *)zf_tensor_data(y))[1], 0xC000);
    back = s_cast(y, ZF_INT32, false);
    KT_EXPECT_INTS(back, ZF_SHAPE(2), 1, -2);
    zf_tensor_unref(&back);
}

static void test_cast_to_the_same_dtype_shares_the_input(void **state)
{
    (void)state;
    zf_tensor_t *x = KT_F32(ZF_SHAPE(2), 1, 2);
    zf_tensor_t *y = s_cast(zf_tensor_ref(x), ZF_FLOAT, false);
    assert_ptr_equal(y, x);
    kt_unref_all((zf_tensor_t *[]){x, y}, 2);
}

static void test_large_casts_split_over_the_pool(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 3, &dev));
    zf_tensor_t *x = kt_random_f32(ZF_SHAPE(100003), 9), *y = NULL;
    float *px = zf_tensor_data(x);
    for (int64_t i = 0; i < 100003; i++) px[i] *= 1000.0f;
    Tensorflow__NodeDef *n = s_cast_node(ZF_FLOAT, ZF_INT32, false);
    ASSERT_OK(kt_run_on(n, &x, 1, &y, 1, NULL, dev));
    const int32_t *py = zf_tensor_data(y);
    for (int64_t i = 0; i < 100003; i++)
        if (py[i] != (int32_t)px[i]) fail_msg("element %lld", (long long)i);
    kt_unref_all((zf_tensor_t *[]){x, y}, 2);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static void test_cast_rejects_unsupported_dtypes(void **state)
{
    (void)state;
    zf_kernels_register_builtin(false);
    Tensorflow__NodeDef *n = s_cast_node(ZF_STRING, ZF_FLOAT, false);
    const zf_kernel_t *def = NULL;
    zf_test_expect_error(zf_kernel_find("CPU", n, &def), ZF_NOT_FOUND, "SrcT=DT_STRING");
    kt_node_free(&n);
    n = s_cast_node(ZF_FLOAT, ZF_STRING, false);
    zf_tensor_t *x = KT_F32(ZF_SHAPE(1), 1), *y = NULL;
    zf_test_expect_error(kt_run(n, &x, 1, &y, 1), ZF_UNIMPLEMENTED,
                         "cast (Cast): no CPU kernel for DstT=string");
    zf_tensor_unref(&x);
    kt_node_free(&n);
    n = s_cast_node(ZF_INT32, ZF_FLOAT, false);
    x = KT_F32(ZF_SHAPE(1), 1);
    zf_test_expect_error(kt_run(n, &x, 1, &y, 1), ZF_INVALID_ARGUMENT,
                         "input 0 must be int32, got float");
    zf_tensor_unref(&x);
    kt_node_free(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_to_int_truncates_and_saturates),
        cmocka_unit_test(test_integer_narrowing_wraps),
        cmocka_unit_test(test_integers_and_floats_convert_exactly_where_representable),
        cmocka_unit_test(test_bool_casts_both_ways),
        cmocka_unit_test(test_bfloat16_rounds_or_truncates_and_half_round_trips),
        cmocka_unit_test(test_cast_to_the_same_dtype_shares_the_input),
        cmocka_unit_test(test_large_casts_split_over_the_pool),
        cmocka_unit_test(test_cast_rejects_unsupported_dtypes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
