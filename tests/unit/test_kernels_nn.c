/* Tests for executor/kernels/kernels_nn: BiasAdd, activations, Softmax and
 * LogSoftmax — values, layouts, edge shapes and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static zf_status_t s_run1(const char *op, zf_tensor_t *x, zf_tensor_t **out)
{
    Tensorflow__NodeDef *n = kt_node_new("nn", op, 1);
    kt_attr_type(n, "T", zf_tensor_dtype(x));
    zf_status_t s = kt_run(n, &x, 1, out, 1);
    zf_tensor_unref(&x);
    kt_node_free(&n);
    return s;
}

static zf_status_t s_bias_add(zf_tensor_t *v, zf_tensor_t *b, const char *fmt, zf_tensor_t **out)
{
    Tensorflow__NodeDef *n = kt_node_new("bias", "BiasAdd", 2);
    kt_attr_type(n, "T", zf_tensor_dtype(v));
    if (fmt) kt_attr_string(n, "data_format", fmt);
    zf_tensor_t *in[2] = {v, b};
    zf_status_t s = kt_run(n, in, 2, out, 1);
    kt_unref_all(in, 2);
    kt_node_free(&n);
    return s;
}

/* ---- BiasAdd ---------------------------------------------------------------------------- */

static void test_bias_add_adds_along_the_last_dim(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_bias_add(KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6), KT_F32(ZF_SHAPE(3), 10, 20, 30),
                         NULL, &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(2, 3), 0, 11, 22, 33, 14, 25, 36);
    zf_tensor_unref(&y);
    ASSERT_OK(s_bias_add(KT_F64(ZF_SHAPE(1, 2, 1, 2), 1, 2, 3, 4), KT_F64(ZF_SHAPE(2), 0.5, -1),
                         "NHWC", &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 2, 1, 2), 0, 1.5, 1, 3.5, 3);
    zf_tensor_unref(&y);
}

static void test_bias_add_nchw_adds_along_the_channel_dim(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_bias_add(KT_F32(ZF_SHAPE(1, 2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8),
                         KT_F32(ZF_SHAPE(2), 100, 200), "NCHW", &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 2, 2, 2), 0, 101, 102, 103, 104, 205, 206, 207, 208);
    zf_tensor_unref(&y);
}

static void test_bias_add_reports_shape_errors(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    zf_test_expect_error(
        s_bias_add(kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(4)), NULL, &y),
        ZF_INVALID_ARGUMENT,
        "bias (BiasAdd): Must provide as many biases as the last dimension of the "
        "input tensor: [4] vs. [2,3]");
    zf_test_expect_error(
        s_bias_add(kt_zeros(ZF_FLOAT, ZF_SHAPE(3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(3)), NULL, &y),
        ZF_INVALID_ARGUMENT, "Input tensor must be at least 2D: [3]");
    zf_test_expect_error(s_bias_add(kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)),
                                    kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 3)), NULL, &y),
                         ZF_INVALID_ARGUMENT, "Biases must be 1D: [1,3]");
    zf_test_expect_error(
        s_bias_add(kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(3)), "HWCN", &y),
        ZF_INVALID_ARGUMENT, "data_format must be NHWC or NCHW, got 'HWCN'");
    assert_null(y);
    ASSERT_OK(
        s_bias_add(kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(3)), NULL, &y));
    kt_expect_shape(y, ZF_SHAPE(0, 3));
    zf_tensor_unref(&y);
}

/* ---- activations ---------------------------------------------------------------------------- */

static void test_activations_match_libm(void **state)
{
    (void)state;
    const double xs[] = {-7, -1.5, -0.25, 0, 0.5, 3, 6.5};
    zf_tensor_t *y = NULL;
    const char *ops[] = {"Relu", "Relu6", "Elu", "Sigmoid", "Tanh"};
    for (int op = 0; op < 5; op++) {
        zf_tensor_t *x = kt_tensor(ZF_DOUBLE, ZF_SHAPE(7), xs, 7);
        ASSERT_OK(s_run1(ops[op], x, &y));
        double want[7];
        for (int i = 0; i < 7; i++) {
            double v = xs[i];
            want[i] = op == 0   ? fmax(v, 0)
                      : op == 1 ? fmin(fmax(v, 0), 6)
                      : op == 2 ? (v > 0 ? v : exp(v) - 1)
                      : op == 3 ? 1 / (1 + exp(-v))
                                : tanh(v);
        }
        kt_expect_near(y, ZF_SHAPE(7), want, 1e-12);
        zf_tensor_unref(&y);
    }
    ASSERT_OK(s_run1("Sigmoid", KT_F32(ZF_SHAPE(1, 1, 1, 2), -100, 100), &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 1, 1, 2), 1e-7, 0, 1);
    zf_tensor_unref(&y);
    ASSERT_OK(s_run1("Relu", KT_F32(zf_shape_scalar(), -2), &y));
    KT_EXPECT_NEAR(y, zf_shape_scalar(), 0, 0);
    zf_tensor_unref(&y);
}

/* ---- Softmax, LogSoftmax ----------------------------------------------------------------------
 */

static void test_softmax_normalises_each_row(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_run1("Softmax", KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 0, 0, 0), &y));
    double e1 = exp(1), e2 = exp(2), e3 = exp(3), s = e1 + e2 + e3;
    KT_EXPECT_NEAR(y, ZF_SHAPE(2, 3), 1e-6, e1 / s, e2 / s, e3 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3);
    zf_tensor_unref(&y);
    ASSERT_OK(s_run1("LogSoftmax", KT_F64(ZF_SHAPE(3), 1, 2, 3), &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 1e-12, 1 - log(s), 2 - log(s), 3 - log(s));
    zf_tensor_unref(&y);
}

static void test_softmax_is_stable_for_large_logits(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_run1("Softmax", KT_F32(ZF_SHAPE(1, 2), 1000, 1000), &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1, 2), 1e-7, 0.5, 0.5);
    zf_tensor_unref(&y);
    ASSERT_OK(s_run1("LogSoftmax", KT_F32(ZF_SHAPE(2), -1000, 0), &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 1e-6, -1000, 0);
    zf_tensor_unref(&y);
}

static void test_softmax_edge_shapes_and_errors(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    zf_test_expect_error(s_run1("Softmax", KT_F32(zf_shape_scalar(), 1), &y), ZF_INVALID_ARGUMENT,
                         "nn (Softmax): logits must have >= 1 dimension, got []");
    ASSERT_OK(s_run1("Softmax", kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 0)), &y));
    kt_expect_shape(y, ZF_SHAPE(3, 0));
    zf_tensor_unref(&y);
    ASSERT_OK(s_run1("Softmax", KT_F32(ZF_SHAPE(2, 1, 1, 1), 5, -5), &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(2, 1, 1, 1), 0, 1, 1);
    zf_tensor_unref(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bias_add_adds_along_the_last_dim),
        cmocka_unit_test(test_bias_add_nchw_adds_along_the_channel_dim),
        cmocka_unit_test(test_bias_add_reports_shape_errors),
        cmocka_unit_test(test_activations_match_libm),
        cmocka_unit_test(test_softmax_normalises_each_row),
        cmocka_unit_test(test_softmax_is_stable_for_large_logits),
        cmocka_unit_test(test_softmax_edge_shapes_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
