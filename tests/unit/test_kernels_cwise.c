/* Tests for executor/kernels/kernels_cwise: element-wise unary and binary math with
 * NumPy broadcasting, dtypes, edge shapes and error texts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "executor/kernels/broadcast.h"
#include "executor/kernels/kernels_util.h"
#include "kernel_test_util.h"

static zf_tensor_t *s_binary(const char *op, zf_tensor_t *a, zf_tensor_t *b, zf_dtype_t t)
{
    Tensorflow__NodeDef *n = kt_node_new("op", op, 2);
    kt_attr_type(n, "T", t);
    zf_tensor_t *in[2] = {a, b}, *out = NULL;
    ASSERT_OK(kt_run(n, in, 2, &out, 1));
    kt_node_free(&n);
    zf_tensor_unref(&a);
    zf_tensor_unref(&b);
    return out;
}

static zf_tensor_t *s_unary(const char *op, zf_tensor_t *x)
{
    Tensorflow__NodeDef *n = kt_node_new("op", op, 1);
    kt_attr_type(n, "T", zf_tensor_dtype(x));
    zf_tensor_t *out = NULL;
    ASSERT_OK(kt_run(n, &x, 1, &out, 1));
    kt_node_free(&n);
    zf_tensor_unref(&x);
    return out;
}

/* ---- binary values ------------------------------------------------------------ */

static void test_add_of_same_shapes_adds_elementwise(void **state)
{
    (void)state;
    zf_tensor_t *z = s_binary("Add", KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6),
                              KT_F32(ZF_SHAPE(2, 3), 10, 20, 30, 40, 50, 60), ZF_FLOAT);
    KT_EXPECT_NEAR(z, ZF_SHAPE(2, 3), 0, 11, 22, 33, 44, 55, 66);
    zf_tensor_unref(&z);
}

static void test_binary_ops_compute_hand_checked_values(void **state)
{
    (void)state;
    zf_tensor_t *z =
        s_binary("Sub", KT_F64(ZF_SHAPE(3), 1, 2, 3), KT_F64(ZF_SHAPE(3), 4, 4, 4), ZF_DOUBLE);
    KT_EXPECT_NEAR(z, ZF_SHAPE(3), 0, -3, -2, -1);
    zf_tensor_unref(&z);
    z = s_binary("Mul", KT_F32(ZF_SHAPE(3), 1.5f, -2, 3), KT_F32(ZF_SHAPE(3), 2, 3, -4), ZF_FLOAT);
    KT_EXPECT_NEAR(z, ZF_SHAPE(3), 0, 3, -6, -12);
    zf_tensor_unref(&z);
    z = s_binary("RealDiv", KT_F32(ZF_SHAPE(3), 1, -3, 1), KT_F32(ZF_SHAPE(3), 4, 2, 0), ZF_FLOAT);
    KT_EXPECT_NEAR(z, ZF_SHAPE(3), 0, 0.25, -1.5, INFINITY);
    zf_tensor_unref(&z);
    z = s_binary("Maximum", KT_I32(ZF_SHAPE(3), 1, -5, 7), KT_I32(ZF_SHAPE(3), 2, -6, 7), ZF_INT32);
    KT_EXPECT_INTS(z, ZF_SHAPE(3), 2, -5, 7);
    zf_tensor_unref(&z);
    z = s_binary("Minimum", KT_I64(ZF_SHAPE(3), 1, -5, 7), KT_I64(ZF_SHAPE(3), 2, -6, 7), ZF_INT64);
    KT_EXPECT_INTS(z, ZF_SHAPE(3), 1, -6, 7);
    zf_tensor_unref(&z);
    z = s_binary("SquaredDifference", KT_F32(ZF_SHAPE(2), 1, 5), KT_F32(ZF_SHAPE(2), 4, 2),
                 ZF_FLOAT);
    KT_EXPECT_NEAR(z, ZF_SHAPE(2), 0, 9, 9);
    zf_tensor_unref(&z);
}

static void test_integer_arithmetic_wraps_around(void **state)
{
    (void)state;
    zf_tensor_t *z =
        s_binary("AddV2", KT_I32(ZF_SHAPE(2), INT32_MAX, -7), KT_I32(ZF_SHAPE(2), 1, 3), ZF_INT32);
    KT_EXPECT_INTS(z, ZF_SHAPE(2), INT32_MIN, -4);
    zf_tensor_unref(&z);
    z = s_binary("Mul", KT_I64(ZF_SHAPE(2), INT64_MAX, 3), KT_I64(ZF_SHAPE(2), 2, -4), ZF_INT64);
    KT_EXPECT_INTS(z, ZF_SHAPE(2), -2, -12);
    zf_tensor_unref(&z);
    z = s_unary("Neg", KT_I32(ZF_SHAPE(3), INT32_MIN, 5, 0));
    KT_EXPECT_INTS(z, ZF_SHAPE(3), INT32_MIN, -5, 0);
    zf_tensor_unref(&z);
}

/* ---- broadcasting ------------------------------------------------------------------ */

static void test_add_broadcasts_a_row_vector_over_a_matrix(void **state)
{
    (void)state;
    zf_tensor_t *z = s_binary("AddV2", KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6),
                              KT_F32(ZF_SHAPE(3), 10, 20, 30), ZF_FLOAT);
    KT_EXPECT_NEAR(z, ZF_SHAPE(2, 3), 0, 11, 22, 33, 14, 25, 36);
    zf_tensor_unref(&z);
}

static void test_sub_broadcasts_a_column_against_a_row(void **state)
{
    (void)state;
    zf_tensor_t *z =
        s_binary("Sub", KT_F32(ZF_SHAPE(2, 1), 10, 20), KT_F32(ZF_SHAPE(1, 3), 1, 2, 3), ZF_FLOAT);
    KT_EXPECT_NEAR(z, ZF_SHAPE(2, 3), 0, 9, 8, 7, 19, 18, 17);
    zf_tensor_unref(&z);
}

static void test_scalars_broadcast_both_ways(void **state)
{
    (void)state;
    zf_tensor_t *z =
        s_binary("Mul", KT_F32(zf_shape_scalar(), 3), KT_F32(ZF_SHAPE(2, 2), 1, 2, 3, 4), ZF_FLOAT);
    KT_EXPECT_NEAR(z, ZF_SHAPE(2, 2), 0, 3, 6, 9, 12);
    zf_tensor_unref(&z);
    z = s_binary("RealDiv", KT_F64(ZF_SHAPE(2), 1, 2), KT_F64(zf_shape_scalar(), 4), ZF_DOUBLE);
    KT_EXPECT_NEAR(z, ZF_SHAPE(2), 0, 0.25, 0.5);
    zf_tensor_unref(&z);
    z = s_binary("Add", KT_F32(zf_shape_scalar(), 3), KT_F32(zf_shape_scalar(), 4), ZF_FLOAT);
    KT_EXPECT_NEAR(z, zf_shape_scalar(), 0, 7);
    zf_tensor_unref(&z);
}

/* The reference: index arithmetic over the padded shapes, one element at a
 * time, independent of the kernel's collapsing of dims. */
static float s_ref_at(const zf_tensor_t *t, const zf_shape_t *out, const int64_t *idx)
{
    const zf_shape_t *s = zf_tensor_shape(t);
    int64_t off = 0;
    for (int k = 0; k < s->rank; k++) {
        int64_t i = idx[out->rank - s->rank + k];
        off = off * s->dims[k] + (s->dims[k] == 1 ? 0 : i);
    }
    return ((const float *)zf_tensor_data(t))[off];
}

static void s_check_broadcast_add(zf_shape_t sa, zf_shape_t sb, zf_shape_t so, zf_device_t *dev)
{
    zf_tensor_t *a = kt_random_f32(sa, 1), *b = kt_random_f32(sb, 2);
    Tensorflow__NodeDef *n = kt_node_new("add", "AddV2", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    zf_tensor_t *in[2] = {a, b}, *z = NULL;
    ASSERT_OK(kt_run_on(n, in, 2, &z, 1, NULL, dev));
    kt_expect_shape(z, so);
    int64_t idx[ZF_MAX_RANK] = {0};
    const float *got = zf_tensor_data(z);
    for (int64_t i = 0; i < zf_tensor_num_elements(z); i++) {
        float want = s_ref_at(a, &so, idx) + s_ref_at(b, &so, idx);
        if (got[i] != want) fail_msg("element %lld: %g vs %g", (long long)i, got[i], want);
        for (int k = so.rank - 1; k >= 0 && ++idx[k] == so.dims[k]; k--) idx[k] = 0;
    }
    zf_tensor_unref(&z);
    zf_tensor_unref(&a);
    zf_tensor_unref(&b);
    kt_node_free(&n);
}

static void test_rank4_broadcasts_match_index_arithmetic(void **state)
{
    (void)state;
    s_check_broadcast_add(ZF_SHAPE(2, 1, 3, 1), ZF_SHAPE(1, 4, 1, 2), ZF_SHAPE(2, 4, 3, 2), NULL);
    s_check_broadcast_add(ZF_SHAPE(3, 1, 5), ZF_SHAPE(2, 3, 4, 5), ZF_SHAPE(2, 3, 4, 5), NULL);
    s_check_broadcast_add(ZF_SHAPE(1, 1, 1, 7), ZF_SHAPE(6, 1, 1, 1), ZF_SHAPE(6, 1, 1, 7), NULL);
}

static void test_large_broadcasts_split_over_the_pool_match(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 3, &dev));
    s_check_broadcast_add(ZF_SHAPE(300, 257), ZF_SHAPE(257), ZF_SHAPE(300, 257), dev);
    s_check_broadcast_add(ZF_SHAPE(300, 1), ZF_SHAPE(1, 257), ZF_SHAPE(300, 257), dev);
    s_check_broadcast_add(ZF_SHAPE(100000), ZF_SHAPE(100000), ZF_SHAPE(100000), dev);
    s_check_broadcast_add(ZF_SHAPE(40, 3, 1000), ZF_SHAPE(40, 1, 1000), ZF_SHAPE(40, 3, 1000), dev);
    zf_device_destroy(&dev);
    assert_null(dev);
}

static void test_empty_tensors_broadcast_to_empty_results(void **state)
{
    (void)state;
    zf_tensor_t *z =
        s_binary("Add", kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), KT_F32(ZF_SHAPE(3), 1, 2, 3), ZF_FLOAT);
    kt_expect_shape(z, ZF_SHAPE(0, 3));
    zf_tensor_unref(&z);
    z = s_binary("Mul", kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 0)), KT_F32(ZF_SHAPE(2, 1), 1, 2), ZF_FLOAT);
    kt_expect_shape(z, ZF_SHAPE(2, 0));
    zf_tensor_unref(&z);
    z = s_unary("Exp", kt_zeros(ZF_FLOAT, ZF_SHAPE(0)));
    kt_expect_shape(z, ZF_SHAPE(0));
    zf_tensor_unref(&z);
}

/* ---- errors ----------------------------------------------------------------------------- */

static void test_incompatible_shapes_name_the_node_and_both_shapes(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = kt_node_new("add", "AddV2", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(4))};
    zf_tensor_t *out = NULL;
    zf_test_expect_error(kt_run(n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "add (AddV2): Incompatible shapes: [2,3] vs. [4]");
    assert_null(out);
    kt_unref_all(in, 2);
    kt_node_free(&n);
}

static void test_mismatched_dtypes_are_rejected(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = kt_node_new("mul", "Mul", 2);
    kt_attr_type(n, "T", ZF_FLOAT);
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2)), kt_zeros(ZF_DOUBLE, ZF_SHAPE(2))};
    zf_tensor_t *out = NULL;
    zf_test_expect_error(kt_run(n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "mul (Mul): both inputs must have the same dtype, got float and double");
    kt_unref_all(in, 2);
    kt_node_free(&n);
}

static void test_kernel_lookup_rejects_unsupported_dtypes(void **state)
{
    (void)state;
    zf_kernels_register_builtin(false);
    Tensorflow__NodeDef *n = kt_node_new("s", "Sqrt", 1);
    kt_attr_type(n, "T", ZF_INT32);
    const zf_kernel_t *def = NULL;
    zf_test_expect_error(zf_kernel_find("CPU", n, &def), ZF_NOT_FOUND,
                         "No OpKernel was registered to support Op 'Sqrt' used by node s");
    assert_null(def);
    kt_node_free(&n);
    n = kt_node_new("d", "RealDiv", 2);
    kt_attr_type(n, "T", ZF_BOOL);
    zf_test_expect_error(zf_kernel_find("CPU", n, &def), ZF_NOT_FOUND, "T=DT_BOOL");
    kt_node_free(&n);
}

/* ---- unary ---------------------------------------------------------------------------------- */

static void test_unary_ops_compute_hand_checked_values(void **state)
{
    (void)state;
    zf_tensor_t *z = s_unary("Neg", KT_F32(ZF_SHAPE(2), 1.5f, -2));
    KT_EXPECT_NEAR(z, ZF_SHAPE(2), 0, -1.5, 2);
    zf_tensor_unref(&z);
    z = s_unary("Square", KT_I64(ZF_SHAPE(2), -3, 4));
    KT_EXPECT_INTS(z, ZF_SHAPE(2), 9, 16);
    zf_tensor_unref(&z);
    z = s_unary("Abs", KT_F64(ZF_SHAPE(2), -2.5, 3));
    KT_EXPECT_NEAR(z, ZF_SHAPE(2), 0, 2.5, 3);
    zf_tensor_unref(&z);
    z = s_unary("Sqrt", KT_F32(ZF_SHAPE(3), 4, 2.25f, -1));
    KT_EXPECT_NEAR(z, ZF_SHAPE(3), 0, 2, 1.5, NAN);
    zf_tensor_unref(&z);
    z = s_unary("Rsqrt", KT_F64(ZF_SHAPE(2), 4, 0.25));
    KT_EXPECT_NEAR(z, ZF_SHAPE(2), 1e-15, 0.5, 2);
    zf_tensor_unref(&z);
    z = s_unary("Exp", KT_F32(ZF_SHAPE(3), 0, 1, -1));
    KT_EXPECT_NEAR(z, ZF_SHAPE(3), 1e-6, 1, 2.718281828, 0.3678794412);
    zf_tensor_unref(&z);
    z = s_unary("Log", KT_F64(ZF_SHAPE(3), 1, 2.718281828459045, 0));
    KT_EXPECT_NEAR(z, ZF_SHAPE(3), 1e-15, 0, 1, -INFINITY);
    zf_tensor_unref(&z);
    z = s_unary("Reciprocal", KT_F32(zf_shape_scalar(), 8));
    KT_EXPECT_NEAR(z, zf_shape_scalar(), 0, 0.125);
    zf_tensor_unref(&z);
}

/* Neg flips the sign of a zero and Abs clears it, as TensorFlow's do. */
static void test_neg_and_abs_keep_the_sign_of_zero_right(void **state)
{
    (void)state;
    zf_tensor_t *z = s_unary("Neg", KT_F32(ZF_SHAPE(2), 0.0f, -0.0f));
    const float *f = zf_tensor_data(z);
    assert_true(f[0] == 0 && signbit(f[0]));
    assert_true(f[1] == 0 && !signbit(f[1]));
    zf_tensor_unref(&z);
    z = s_unary("Abs", KT_F64(ZF_SHAPE(2), -0.0, -NAN));
    const double *d = zf_tensor_data(z);
    assert_true(d[0] == 0 && !signbit(d[0]));
    assert_true(isnan(d[1]) && !signbit(d[1]));
    zf_tensor_unref(&z);
}

static void test_unary_ops_keep_rank4_shapes(void **state)
{
    (void)state;
    zf_tensor_t *x = kt_random_f32(ZF_SHAPE(2, 3, 4, 5), 7);
    zf_tensor_t *z = s_unary("Square", zf_tensor_ref(x));
    kt_expect_shape(z, ZF_SHAPE(2, 3, 4, 5));
    const float *px = zf_tensor_data(x), *pz = zf_tensor_data(z);
    for (int i = 0; i < 120; i++) assert_true(pz[i] == px[i] * px[i]);
    zf_tensor_unref(&z);
    zf_tensor_unref(&x);
}

static void s_expect_bcast(zf_shape_t a, zf_shape_t b, int rank, const int64_t *dims,
                           const int64_t *sa, const int64_t *sb)
{
    zf_shape_t out;
    assert_true(zf_kernels_broadcast_shape(&a, &b, &out));
    zf_broadcast_t bc;
    zf_broadcast_plan(&a, &b, &out, &bc);
    assert_int_equal(bc.rank, rank);
    for (int k = 0; k < rank; k++) {
        assert_int_equal(bc.dims[k], dims[k]);
        assert_int_equal(bc.sa[k], sa[k]);
        assert_int_equal(bc.sb[k], sb[k]);
    }
}

static void test_broadcast_plan_merges_dims_that_broadcast_alike(void **state)
{
    (void)state;
    /* [2,3,4] + [4]: a spans everything, b only the last dim. */
    s_expect_bcast(ZF_SHAPE(2, 3, 4), ZF_SHAPE(4), 2, (int64_t[]){6, 4}, (int64_t[]){4, 1},
                   (int64_t[]){0, 1});
    /* [3,1] + [1,4]: an outer product. */
    s_expect_bcast(ZF_SHAPE(3, 1), ZF_SHAPE(1, 4), 2, (int64_t[]){3, 4}, (int64_t[]){1, 0},
                   (int64_t[]){0, 1});
    /* A scalar against a vector, and equal shapes, are flat. */
    s_expect_bcast(zf_shape_scalar(), ZF_SHAPE(5), 1, (int64_t[]){5}, (int64_t[]){0},
                   (int64_t[]){1});
    s_expect_bcast(ZF_SHAPE(2, 1, 3), ZF_SHAPE(2, 1, 3), 1, (int64_t[]){6}, (int64_t[]){1},
                   (int64_t[]){1});
    /* [2,1,3,1,5] + [3,4,1]: dims of 1 vanish, neighbours merge. */
    s_expect_bcast(ZF_SHAPE(2, 1, 3, 1, 5), ZF_SHAPE(3, 4, 1), 4, (int64_t[]){2, 3, 4, 5},
                   (int64_t[]){15, 5, 0, 1}, (int64_t[]){0, 4, 1, 0});
    s_expect_bcast(ZF_SHAPE(1, 1), ZF_SHAPE(1), 0, NULL, NULL, NULL);
    /* [4,1] + [3]: b broadcast along the rows, a along the columns. */
    s_expect_bcast(ZF_SHAPE(4, 1), ZF_SHAPE(3), 2, (int64_t[]){4, 3}, (int64_t[]){1, 0},
                   (int64_t[]){0, 1});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_of_same_shapes_adds_elementwise),
        cmocka_unit_test(test_broadcast_plan_merges_dims_that_broadcast_alike),
        cmocka_unit_test(test_binary_ops_compute_hand_checked_values),
        cmocka_unit_test(test_integer_arithmetic_wraps_around),
        cmocka_unit_test(test_add_broadcasts_a_row_vector_over_a_matrix),
        cmocka_unit_test(test_sub_broadcasts_a_column_against_a_row),
        cmocka_unit_test(test_scalars_broadcast_both_ways),
        cmocka_unit_test(test_rank4_broadcasts_match_index_arithmetic),
        cmocka_unit_test(test_large_broadcasts_split_over_the_pool_match),
        cmocka_unit_test(test_empty_tensors_broadcast_to_empty_results),
        cmocka_unit_test(test_incompatible_shapes_name_the_node_and_both_shapes),
        cmocka_unit_test(test_mismatched_dtypes_are_rejected),
        cmocka_unit_test(test_kernel_lookup_rejects_unsupported_dtypes),
        cmocka_unit_test(test_unary_ops_compute_hand_checked_values),
        cmocka_unit_test(test_neg_and_abs_keep_the_sign_of_zero_right),
        cmocka_unit_test(test_unary_ops_keep_rank4_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
