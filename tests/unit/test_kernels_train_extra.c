/* Tests for executor/kernels/kernels_train_extra: BiasAddGrad's sums over
 * NHWC and NCHW layouts, against BiasAdd's own layout, and its errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static zf_status_t s_bias_grad(zf_tensor_t *g, const char *fmt, zf_tensor_t **out)
{
    Tensorflow__NodeDef *n = kt_node_new("bias_grad", "BiasAddGrad", 1);
    kt_attr_type(n, "T", zf_tensor_dtype(g));
    if (fmt) kt_attr_string(n, "data_format", fmt);
    zf_status_t s = kt_run(n, &g, 1, out, 1);
    zf_tensor_unref(&g);
    kt_node_free(&n);
    return s;
}

static void test_bias_add_grad_sums_all_but_the_last_dim(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_bias_grad(KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6), NULL, &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 0, 5, 7, 9);
    zf_tensor_unref(&y);
    /* [1, 2, 2, 2] NHWC: channel 0 holds 1, 3, 5, 7 */
    ASSERT_OK(s_bias_grad(KT_F64(ZF_SHAPE(1, 2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8), "NHWC", &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 0, 16, 20);
    zf_tensor_unref(&y);
}

static void test_bias_add_grad_nchw_sums_all_but_dim_1(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    /* [1, 2, 2, 2] NCHW: channel 0 holds 1, 2, 3, 4 */
    ASSERT_OK(s_bias_grad(KT_F32(ZF_SHAPE(1, 2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8), "NCHW", &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 0, 10, 26);
    zf_tensor_unref(&y);
    /* [2, 3] NCHW: dim 1 is the channel */
    ASSERT_OK(s_bias_grad(KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6), "NCHW", &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 0, 5, 7, 9);
    zf_tensor_unref(&y);
}

/* Summed in double: a million 0.1f add up to 100000 within float's
 * rounding of the result, where a float accumulator drifts by about 1%. */
static void test_bias_add_grad_sums_accurately(void **state)
{
    (void)state;
    enum { N = 1000000 };
    zf_tensor_t *g = kt_zeros(ZF_FLOAT, ZF_SHAPE(N, 1));
    float *p = zf_tensor_data(g);
    for (int i = 0; i < N; i++) p[i] = 0.1f;
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_bias_grad(g, NULL, &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(1), 1e-6, N * (double)0.1f);
    zf_tensor_unref(&y);
}

static void test_bias_add_grad_edge_shapes_and_errors(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_bias_grad(kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), NULL, &y));
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 0, 0, 0, 0);
    zf_tensor_unref(&y);
    ASSERT_OK(s_bias_grad(kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 0)), NULL, &y));
    kt_expect_shape(y, ZF_SHAPE(0));
    zf_tensor_unref(&y);
    zf_test_expect_error(s_bias_grad(kt_zeros(ZF_FLOAT, ZF_SHAPE(3)), NULL, &y),
                         ZF_INVALID_ARGUMENT,
                         "bias_grad (BiasAddGrad): Input tensor must be at least 2D: [3]");
    assert_null(y);
    zf_test_expect_error(s_bias_grad(kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), "HWCN", &y),
                         ZF_INVALID_ARGUMENT, "data_format must be NHWC or NCHW, got 'HWCN'");
    zf_test_expect_error(s_bias_grad(kt_zeros(ZF_INT32, ZF_SHAPE(2, 3)), NULL, &y), ZF_NOT_FOUND,
                         "[T=DT_INT32]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bias_add_grad_sums_all_but_the_last_dim),
        cmocka_unit_test(test_bias_add_grad_nchw_sums_all_but_dim_1),
        cmocka_unit_test(test_bias_add_grad_sums_accurately),
        cmocka_unit_test(test_bias_add_grad_edge_shapes_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
