/* Tests for executor/kernels/kernels_matmul: MatMul against a naive triple loop for
 * every transpose combination, empty dims and error texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

static Tensorflow__NodeDef *s_matmul_node(zf_dtype_t t, bool ta, bool tb)
{
    Tensorflow__NodeDef *n = kt_node_new("mm", "MatMul", 2);
    kt_attr_type(n, "T", t);
    kt_attr_bool(n, "transpose_a", ta);
    kt_attr_bool(n, "transpose_b", tb);
    return n;
}

/* Element (i, j) of a row-major rows x cols matrix, read transposed or not. */
static double s_at(const zf_tensor_t *t, bool trans, int64_t i, int64_t j)
{
    int64_t cols = zf_tensor_shape(t)->dims[1];
    int64_t off = trans ? j * cols + i : i * cols + j;
    return zf_tensor_dtype(t) == ZF_FLOAT ? ((const float *)zf_tensor_data(t))[off]
                                          : ((const double *)zf_tensor_data(t))[off];
}

static zf_tensor_t *s_random(zf_dtype_t t, int64_t rows, int64_t cols, uint32_t seed)
{
    zf_tensor_t *f = kt_random_f32(ZF_SHAPE(rows, cols), seed);
    if (t == ZF_FLOAT) return f;
    zf_tensor_t *d = kt_zeros(ZF_DOUBLE, ZF_SHAPE(rows, cols));
    for (int64_t i = 0; i < rows * cols; i++)
        ((double *)zf_tensor_data(d))[i] = ((const float *)zf_tensor_data(f))[i];
    zf_tensor_unref(&f);
    return d;
}

static void s_check(zf_dtype_t t, int64_t m, int64_t k, int64_t n, bool ta, bool tb)
{
    zf_tensor_t *a = ta ? s_random(t, k, m, 3) : s_random(t, m, k, 3);
    zf_tensor_t *b = tb ? s_random(t, n, k, 4) : s_random(t, k, n, 4);
    Tensorflow__NodeDef *node = s_matmul_node(t, ta, tb);
    zf_tensor_t *in[2] = {a, b}, *c = NULL;
    ASSERT_OK(kt_run(node, in, 2, &c, 1));
    kt_expect_shape(c, ZF_SHAPE(m, n));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double want = 0;
            for (int64_t p = 0; p < k; p++) want += s_at(a, ta, i, p) * s_at(b, tb, p, j);
            double got = s_at(c, false, i, j), tol = t == ZF_FLOAT ? 1e-4 : 1e-12;
            if (fabs(got - want) > tol * (1 + fabs(want)))
                fail_msg("[%lld,%lld] (ta=%d tb=%d): %.9g vs %.9g", (long long)i, (long long)j, ta,
                         tb, got, want);
        }
    kt_unref_all((zf_tensor_t *[]){a, b, c}, 3);
    kt_node_free(&node);
}

static void test_matmul_matches_a_naive_loop_for_every_transpose(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            s_check(ZF_FLOAT, 7, 5, 3, ta, tb);
            s_check(ZF_FLOAT, 64, 33, 17, ta, tb);
            s_check(ZF_DOUBLE, 9, 11, 13, ta, tb);
        }
}

static void test_matmul_of_hand_checked_matrices(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_matmul_node(ZF_FLOAT, false, false);
    zf_tensor_t *in[2] = {KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6),
                          KT_F32(ZF_SHAPE(3, 2), 7, 8, 9, 10, 11, 12)};
    zf_tensor_t *c = NULL;
    ASSERT_OK(kt_run(n, in, 2, &c, 1));
    KT_EXPECT_NEAR(c, ZF_SHAPE(2, 2), 0, 58, 64, 139, 154);
    kt_unref_all(in, 2);
    zf_tensor_unref(&c);
    kt_node_free(&n);
    n = s_matmul_node(ZF_DOUBLE, true, true);
    in[0] = KT_F64(ZF_SHAPE(1, 1), 3);
    in[1] = KT_F64(ZF_SHAPE(1, 1), -2);
    ASSERT_OK(kt_run(n, in, 2, &c, 1));
    KT_EXPECT_NEAR(c, ZF_SHAPE(1, 1), 0, -6);
    kt_unref_all(in, 2);
    zf_tensor_unref(&c);
    kt_node_free(&n);
}

static void test_matmul_handles_empty_dims(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_matmul_node(ZF_FLOAT, false, false);
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 0)), kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3))};
    zf_tensor_t *c = NULL;
    ASSERT_OK(kt_run(n, in, 2, &c, 1)); /* k = 0: zeros */
    KT_EXPECT_NEAR(c, ZF_SHAPE(2, 3), 0, 0, 0, 0, 0, 0, 0);
    kt_unref_all(in, 2);
    zf_tensor_unref(&c);
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 4));
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 5));
    ASSERT_OK(kt_run(n, in, 2, &c, 1));
    kt_expect_shape(c, ZF_SHAPE(0, 5));
    kt_unref_all(in, 2);
    zf_tensor_unref(&c);
    kt_node_free(&n);
}

static void test_matmul_rejects_bad_shapes_and_dtypes(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = s_matmul_node(ZF_FLOAT, false, false);
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 5))};
    zf_tensor_t *c = NULL;
    zf_test_expect_error(kt_run(n, in, 2, &c, 1), ZF_INVALID_ARGUMENT,
                         "mm (MatMul): Matrix size-incompatible: In[0]: [2,3], In[1]: [4,5]");
    zf_tensor_unref(&in[1]);
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(3));
    zf_test_expect_error(kt_run(n, in, 2, &c, 1), ZF_INVALID_ARGUMENT,
                         "In[1] is not a matrix. Instead it has shape [3]");
    zf_tensor_unref(&in[1]);
    in[1] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(3, 2));
    zf_test_expect_error(kt_run(n, in, 2, &c, 1), ZF_INVALID_ARGUMENT,
                         "input 1 must be float, got double");
    kt_unref_all(in, 2);
    kt_node_free(&n);
    n = s_matmul_node(ZF_INT32, false, false);
    const zf_kernel_t *def = NULL;
    zf_test_expect_error(zf_kernel_find("CPU", n, &def), ZF_NOT_FOUND, "'MatMul'");
    kt_node_free(&n);
}

static void test_matmul_runs_on_a_cpu_device(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    Tensorflow__NodeDef *n = s_matmul_node(ZF_FLOAT, false, true);
    zf_tensor_t *in[2] = {KT_F32(ZF_SHAPE(1, 2), 1, 2), KT_F32(ZF_SHAPE(3, 2), 1, 0, 0, 1, 1, 1)};
    zf_tensor_t *c = NULL;
    ASSERT_OK(kt_run_on(n, in, 2, &c, 1, NULL, dev));
    KT_EXPECT_NEAR(c, ZF_SHAPE(1, 3), 0, 1, 2, 3);
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], c}, 3);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_matches_a_naive_loop_for_every_transpose),
        cmocka_unit_test(test_matmul_of_hand_checked_matrices),
        cmocka_unit_test(test_matmul_handles_empty_dims),
        cmocka_unit_test(test_matmul_rejects_bad_shapes_and_dtypes),
        cmocka_unit_test(test_matmul_runs_on_a_cpu_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
