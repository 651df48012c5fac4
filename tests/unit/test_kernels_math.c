/* Tests for the math kernels of executor/kernels/kernels_cwise: Floor,
 * Ceil, Round, Sign, Erf, Erfc, IsNan, IsInf, IsFinite, Pow, Mod (and
 * FloorMod on floats, from kernels_compare) and AddN — values against
 * libm, broadcasting, integer cases, edge shapes and error texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

/* Runs op on n inputs (taken) with attr T from the first input. */
static zf_status_t s_run(const char *op, zf_tensor_t **in, int n, zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("m", op, n);
    kt_attr_type(node, "T", zf_tensor_dtype(in[0]));
    kt_attr_int(node, "N", n);
    zf_status_t s = kt_run(node, in, n, out, 1);
    kt_unref_all(in, n);
    kt_node_free(&node);
    return s;
}

static zf_tensor_t *s_unary(const char *op, zf_tensor_t *x)
{
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_run(op, &x, 1, &y));
    return y;
}

static zf_tensor_t *s_binary(const char *op, zf_tensor_t *a, zf_tensor_t *b)
{
    zf_tensor_t *in[2] = {a, b}, *y = NULL;
    ASSERT_OK(s_run(op, in, 2, &y));
    return y;
}

/* ---- unary ------------------------------------------------------------------------------- */

static void test_floor_ceil_round(void **state)
{
    (void)state;
    zf_tensor_t *y = s_unary("Floor", KT_F32(ZF_SHAPE(4), -1.5f, -0.2f, 0.7f, 3));
    KT_EXPECT_NEAR(y, ZF_SHAPE(4), 0, -2, -1, 0, 3);
    zf_tensor_unref(&y);
    y = s_unary("Ceil", KT_F64(ZF_SHAPE(2, 2), -1.5, -0.2, 0.7, 3));
    KT_EXPECT_NEAR(y, ZF_SHAPE(2, 2), 0, -1, 0, 1, 3);
    zf_tensor_unref(&y);
    /* halves go to the even neighbour */
    y = s_unary("Round",
                KT_F32(ZF_SHAPE(9), -2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.6f, -0.4f, 1e8f));
    KT_EXPECT_NEAR(y, ZF_SHAPE(9), 0, -2, -2, 0, 0, 2, 2, 3, 0, 1e8);
    zf_tensor_unref(&y);
    y = s_unary("Round", KT_F64(ZF_SHAPE(3), 3.5, 4.5, -3.49999));
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 0, 4, 4, -3);
    zf_tensor_unref(&y);
    y = s_unary("Round", KT_I64(ZF_SHAPE(2), -7, INT64_MAX));
    KT_EXPECT_INTS(y, ZF_SHAPE(2), -7, INT64_MAX);
    zf_tensor_unref(&y);
}

static void test_sign(void **state)
{
    (void)state;
    zf_tensor_t *y = s_unary("Sign", KT_F32(ZF_SHAPE(4), -3.5f, 0, 2, -0.0f));
    KT_EXPECT_NEAR(y, ZF_SHAPE(4), 0, -1, 0, 1, 0);
    zf_tensor_unref(&y);
    y = s_unary("Sign", KT_I32(ZF_SHAPE(4), INT32_MIN, -1, 0, 9));
    KT_EXPECT_INTS(y, ZF_SHAPE(4), -1, -1, 0, 1);
    zf_tensor_unref(&y);
    y = s_unary("Sign", KT_F64(ZF_SHAPE(1), NAN));
    assert_true(isnan(((const double *)zf_tensor_data(y))[0]));
    zf_tensor_unref(&y);
}

static void test_erf_and_erfc_match_libm(void **state)
{
    (void)state;
    const double xs[] = {-3, -0.5, 0, 0.25, 1, 4};
    double we[6], wc[6];
    for (int i = 0; i < 6; i++) {
        we[i] = erf(xs[i]);
        wc[i] = erfc(xs[i]);
    }
    zf_tensor_t *y = s_unary("Erf", kt_tensor(ZF_DOUBLE, ZF_SHAPE(6), xs, 6));
    kt_expect_near(y, ZF_SHAPE(6), we, 1e-15);
    zf_tensor_unref(&y);
    y = s_unary("Erfc", kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), xs, 6));
    kt_expect_near(y, ZF_SHAPE(2, 3), wc, 1e-15);
    zf_tensor_unref(&y);
    /* erfc keeps its precision where 1 - erf would lose it */
    y = s_unary("Erfc", KT_F32(ZF_SHAPE(1), 5));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1), 1e-12, erfc(5.0));
    assert_true(((const float *)zf_tensor_data(y))[0] > 0);
    zf_tensor_unref(&y);
}

static void test_is_nan_is_inf_is_finite(void **state)
{
    (void)state;
    const char *ops[] = {"IsNan", "IsInf", "IsFinite"};
    const int64_t want[3][5] = {{1, 0, 0, 0, 0}, {0, 1, 1, 0, 0}, {0, 0, 0, 1, 1}};
    for (int k = 0; k < 3; k++) {
        zf_tensor_t *y = s_unary(ops[k], KT_F32(ZF_SHAPE(5), NAN, INFINITY, -INFINITY, 0, -1e30f));
        assert_int_equal(zf_tensor_dtype(y), ZF_BOOL);
        kt_expect_ints(y, ZF_SHAPE(5), want[k]);
        zf_tensor_unref(&y);
        y = s_unary(ops[k], KT_F64(zf_shape_scalar(), HUGE_VAL));
        KT_EXPECT_INTS(y, zf_shape_scalar(), k == 1);
        zf_tensor_unref(&y);
    }
}

/* ---- Pow, Mod, FloorMod -----------------------------------------------------------------------
 */

static void test_pow_broadcasts_and_matches_libm(void **state)
{
    (void)state;
    zf_tensor_t *y =
        s_binary("Pow", KT_F64(ZF_SHAPE(2, 1), 2, 0.5), KT_F64(ZF_SHAPE(3), -1, 0.5, 3));
    KT_EXPECT_NEAR(y, ZF_SHAPE(2, 3), 1e-15, pow(2, -1), pow(2, 0.5), 8, 2, pow(0.5, 0.5), 0.125);
    zf_tensor_unref(&y);
    y = s_binary("Pow", KT_F32(ZF_SHAPE(2), -8, 4), KT_F32(zf_shape_scalar(), 1.0f / 3));
    const float *v = zf_tensor_data(y);
    assert_true(isnan(v[0])); /* a negative base to a fractional power */
    assert_true(fabs(v[1] - pow(4, 1.0 / 3)) < 1e-6);
    zf_tensor_unref(&y);
}

static void test_integer_pow(void **state)
{
    (void)state;
    zf_tensor_t *y =
        s_binary("Pow", KT_I32(ZF_SHAPE(5), 2, -3, 7, 0, 2), KT_I32(ZF_SHAPE(5), 10, 3, 0, 0, 32));
    KT_EXPECT_INTS(y, ZF_SHAPE(5), 1024, -27, 1, 1, 0); /* 2^32 wraps to 0 */
    zf_tensor_unref(&y);
    y = s_binary("Pow", KT_I64(ZF_SHAPE(2), 3, -2), KT_I64(zf_shape_scalar(), 39));
    KT_EXPECT_INTS(y, ZF_SHAPE(2), 4052555153018976267LL, -549755813888LL);
    zf_tensor_unref(&y);
    zf_tensor_t *in[2] = {KT_I32(ZF_SHAPE(2), 2, 2), KT_I32(ZF_SHAPE(2), 1, -1)};
    zf_test_expect_error(s_run("Pow", in, 2, &y), ZF_INVALID_ARGUMENT,
                         "m (Pow): Integers to negative integer powers are not allowed");
    assert_null(y);
}

static void test_mod_truncates_and_floor_mod_floors(void **state)
{
    (void)state;
    zf_tensor_t *y =
        s_binary("Mod", KT_F32(ZF_SHAPE(4), -7, 7, 7.5f, -7), KT_F32(ZF_SHAPE(4), 3, -3, 2, -3));
    KT_EXPECT_NEAR(y, ZF_SHAPE(4), 0, fmod(-7, 3), fmod(7, -3), 1.5, -1);
    zf_tensor_unref(&y);
    y = s_binary("Mod", KT_I32(ZF_SHAPE(4), -7, 7, INT32_MIN, 9),
                 KT_I32(ZF_SHAPE(4), 3, -3, -1, 4));
    KT_EXPECT_INTS(y, ZF_SHAPE(4), -1, 1, 0, 1);
    zf_tensor_unref(&y);
    y = s_binary("Mod", KT_I64(ZF_SHAPE(2, 2), 10, 11, 12, 13), KT_I64(ZF_SHAPE(2), 3, 5));
    KT_EXPECT_INTS(y, ZF_SHAPE(2, 2), 1, 1, 0, 3);
    zf_tensor_unref(&y);
    y = s_binary("FloorMod", KT_F64(ZF_SHAPE(3), -7, 7, -7.5), KT_F64(ZF_SHAPE(3), 3, -3, 2));
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 0, 2, -2, 0.5);
    zf_tensor_unref(&y);
    zf_tensor_t *in[2] = {KT_I64(ZF_SHAPE(2), 1, 2), KT_I64(ZF_SHAPE(2), 1, 0)};
    zf_test_expect_error(s_run("Mod", in, 2, &y), ZF_INVALID_ARGUMENT,
                         "m (Mod): Integer division by zero");
    zf_tensor_t *in3[2] = {KT_F32(ZF_SHAPE(2), 1, 2), KT_I32(ZF_SHAPE(2), 1, 0)};
    zf_test_expect_error(s_run("Mod", in3, 2, &y), ZF_INVALID_ARGUMENT,
                         "m (Mod): both inputs must have the same dtype, got float and int32");
    zf_tensor_t *in2[2] = {KT_F32(ZF_SHAPE(2), 1, 2), KT_F32(ZF_SHAPE(3), 1, 2, 3)};
    zf_test_expect_error(s_run("Pow", in2, 2, &y), ZF_INVALID_ARGUMENT,
                         "m (Pow): Incompatible shapes: [2] vs. [3]");
    assert_null(y);
}

/* ---- AddN --------------------------------------------------------------------------------- */

static void test_add_n_sums_its_inputs(void **state)
{
    (void)state;
    zf_tensor_t *in[3] = {KT_F32(ZF_SHAPE(2, 2), 1, 2, 3, 4),
                          KT_F32(ZF_SHAPE(2, 2), 10, 20, 30, 40),
                          KT_F32(ZF_SHAPE(2, 2), 0.5f, 0.25f, -3, -4)};
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_run("AddN", in, 3, &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(2, 2), 0, 11.5, 22.25, 30, 40);
    zf_tensor_unref(&y);
    zf_tensor_t *one = KT_I32(ZF_SHAPE(3), 4, 5, 6);
    ASSERT_OK(s_run("AddN", &one, 1, &y));
    KT_EXPECT_INTS(y, ZF_SHAPE(3), 4, 5, 6);
    zf_tensor_unref(&y);
    zf_tensor_t *ints[2] = {KT_I32(zf_shape_scalar(), INT32_MAX), KT_I32(zf_shape_scalar(), 2)};
    ASSERT_OK(s_run("AddN", ints, 2, &y));
    KT_EXPECT_INTS(y, zf_shape_scalar(), INT32_MIN + 1);
    zf_tensor_unref(&y);
    zf_tensor_t *empty[2] = {kt_zeros(ZF_DOUBLE, ZF_SHAPE(0, 3)),
                             kt_zeros(ZF_DOUBLE, ZF_SHAPE(0, 3))};
    ASSERT_OK(s_run("AddN", empty, 2, &y));
    kt_expect_shape(y, ZF_SHAPE(0, 3));
    zf_tensor_unref(&y);
}

static void test_add_n_refuses_mismatched_inputs(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    zf_tensor_t *in[3] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(3))};
    zf_test_expect_error(s_run("AddN", in, 3, &y), ZF_INVALID_ARGUMENT,
                         "m (AddN): Inputs to operation m of type AddN must have the same size and "
                         "shape.  Input 0: [2,3] != input 2: [3]");
    zf_tensor_t *in2[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2)), kt_zeros(ZF_INT32, ZF_SHAPE(2))};
    zf_test_expect_error(s_run("AddN", in2, 2, &y), ZF_INVALID_ARGUMENT,
                         "m (AddN): input 1 must be float, got int32");
    assert_null(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_floor_ceil_round),
        cmocka_unit_test(test_sign),
        cmocka_unit_test(test_erf_and_erfc_match_libm),
        cmocka_unit_test(test_is_nan_is_inf_is_finite),
        cmocka_unit_test(test_pow_broadcasts_and_matches_libm),
        cmocka_unit_test(test_integer_pow),
        cmocka_unit_test(test_mod_truncates_and_floor_mod_floors),
        cmocka_unit_test(test_add_n_sums_its_inputs),
        cmocka_unit_test(test_add_n_refuses_mismatched_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
