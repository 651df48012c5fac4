/* Tests for executor/kernels/kernels_shape: Reshape, Shape, Size, Rank, ExpandDims,
 * Squeeze, Transpose, ConcatV2, Pack, Fill, ZerosLike and OnesLike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

/* Runs op on the inputs (taking them), T attr from input 0. */
static zf_status_t s_run(const char *op, zf_tensor_t **in, int n, zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("n", op, n);
    kt_attr_type(node, "T", zf_tensor_dtype(in[0]));
    zf_status_t s = kt_run(node, in, n, out, 1);
    kt_unref_all(in, n);
    kt_node_free(&node);
    return s;
}

/* ---- Reshape ------------------------------------------------------------------------ */

static void test_reshape_infers_minus_one_and_shares_the_buffer(void **state)
{
    (void)state;
    zf_tensor_t *x = KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6), *out = NULL;
    zf_tensor_t *in[2] = {zf_tensor_ref(x), KT_I32(ZF_SHAPE(2), -1, 2)};
    ASSERT_OK(s_run("Reshape", in, 2, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3, 2), 0, 1, 2, 3, 4, 5, 6);
    assert_ptr_equal(zf_tensor_data(out), zf_tensor_data(x));
    zf_tensor_unref(&out);
    in[0] = zf_tensor_ref(x);
    in[1] = KT_I64(ZF_SHAPE(4), 1, 1, 6, 1);
    ASSERT_OK(s_run("Reshape", in, 2, &out));
    kt_expect_shape(out, ZF_SHAPE(1, 1, 6, 1));
    zf_tensor_unref(&out);
    zf_tensor_t *one = KT_F32(ZF_SHAPE(1, 1), 5);
    in[0] = one;
    in[1] = kt_zeros(ZF_INT32, ZF_SHAPE(0));
    ASSERT_OK(s_run("Reshape", in, 2, &out)); /* to a scalar */
    KT_EXPECT_NEAR(out, zf_shape_scalar(), 0, 5);
    zf_tensor_unref(&out);
    zf_tensor_unref(&x);
}

static void test_reshape_reports_impossible_shapes(void **state)
{
    (void)state;
    struct {
        zf_tensor_t *shape;
        const char *msg;
    } cases[] = {
        {KT_I32(ZF_SHAPE(2), 4, 2),
         "n (Reshape): Input to reshape is a tensor with 6 values, but the requested shape has 8"},
        {KT_I32(ZF_SHAPE(2), -1, 4),
         "Input to reshape is a tensor with 6 values, but the requested shape requires a "
         "multiple of 4"},
        {KT_I32(ZF_SHAPE(2), -1, -1), "Only one input size may be -1, not both 0 and 1"},
        {KT_I32(ZF_SHAPE(2), 3, -2), "Size 1 must be non-negative, not -2"},
        {KT_I32(zf_shape_scalar(), 6), "shape must be a vector, got []"},
        {KT_F32(ZF_SHAPE(1), 6), "shape must be int32 or int64, got float"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), cases[i].shape}, *out = NULL;
        zf_test_expect_error(s_run("Reshape", in, 2, &out), ZF_INVALID_ARGUMENT, cases[i].msg);
        assert_null(out);
    }
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), KT_I32(ZF_SHAPE(2), -1, 0)};
    zf_tensor_t *out = NULL;
    zf_test_expect_error(s_run("Reshape", in, 2, &out), ZF_INVALID_ARGUMENT,
                         "Reshape cannot infer the missing input size for an empty tensor");
}

/* ---- Shape, Size, Rank ---------------------------------------------------------------------- */

static void test_shape_size_and_rank_describe_the_input(void **state)
{
    (void)state;
    zf_tensor_t *x = kt_zeros(ZF_DOUBLE, ZF_SHAPE(2, 3, 4, 5)), *out = NULL;
    Tensorflow__NodeDef *n = kt_node_new("s", "Shape", 1);
    kt_attr_type(n, "T", ZF_DOUBLE);
    ASSERT_OK(kt_run(n, &x, 1, &out, 1));
    assert_int_equal(zf_tensor_dtype(out), ZF_INT32);
    KT_EXPECT_INTS(out, ZF_SHAPE(4), 2, 3, 4, 5);
    zf_tensor_unref(&out);
    kt_attr_type(n, "out_type", ZF_INT64);
    ASSERT_OK(kt_run(n, &x, 1, &out, 1));
    assert_int_equal(zf_tensor_dtype(out), ZF_INT64);
    KT_EXPECT_INTS(out, ZF_SHAPE(4), 2, 3, 4, 5);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = kt_node_new("z", "Size", 1);
    ASSERT_OK(kt_run(n, &x, 1, &out, 1));
    KT_EXPECT_INTS(out, zf_shape_scalar(), 120);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = kt_node_new("r", "Rank", 1);
    ASSERT_OK(kt_run(n, &x, 1, &out, 1));
    KT_EXPECT_INTS(out, zf_shape_scalar(), 4);
    zf_tensor_unref(&out);
    zf_tensor_unref(&x);
    x = KT_F32(zf_shape_scalar(), 1); /* a scalar: empty shape, size 1, rank 0 */
    ASSERT_OK(kt_run(n, &x, 1, &out, 1));
    KT_EXPECT_INTS(out, zf_shape_scalar(), 0);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = kt_node_new("s", "Shape", 1);
    ASSERT_OK(kt_run(n, &x, 1, &out, 1));
    kt_expect_shape(out, ZF_SHAPE(0));
    zf_tensor_unref(&out);
    kt_node_free(&n);
    zf_tensor_unref(&x);
}

/* ---- ExpandDims, Squeeze -----------------------------------------------------------------------
 */

static void test_expand_dims_inserts_a_dim_anywhere(void **state)
{
    (void)state;
    int32_t dims[] = {0, 2, -1, -3};
    zf_shape_t want[] = {ZF_SHAPE(1, 2, 3), ZF_SHAPE(2, 3, 1), ZF_SHAPE(2, 3, 1),
                         ZF_SHAPE(1, 2, 3)};
    for (int i = 0; i < 4; i++) {
        zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)),
                              KT_I32(zf_shape_scalar(), dims[i])};
        zf_tensor_t *out = NULL;
        ASSERT_OK(s_run("ExpandDims", in, 2, &out));
        kt_expect_shape(out, want[i]);
        zf_tensor_unref(&out);
    }
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2)), KT_I32(zf_shape_scalar(), 3)};
    zf_tensor_t *out = NULL;
    zf_test_expect_error(s_run("ExpandDims", in, 2, &out), ZF_INVALID_ARGUMENT,
                         "Tried to expand dim index 3 for tensor with 1 dimensions.");
}

static void test_squeeze_removes_ones_or_the_named_dims(void **state)
{
    (void)state;
    Tensorflow__NodeDef *n = kt_node_new("sq", "Squeeze", 1);
    kt_attr_type(n, "T", ZF_FLOAT);
    zf_tensor_t *x = KT_F32(ZF_SHAPE(1, 2, 1, 1), 7, 8), *out = NULL;
    ASSERT_OK(kt_run(n, &x, 1, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2), 0, 7, 8);
    zf_tensor_unref(&out);
    KT_ATTR_INTS(n, "squeeze_dims", 0, -1);
    ASSERT_OK(kt_run(n, &x, 1, &out, 1));
    kt_expect_shape(out, ZF_SHAPE(2, 1));
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = kt_node_new("sq", "Squeeze", 1);
    kt_attr_type(n, "T", ZF_FLOAT);
    KT_ATTR_INTS(n, "squeeze_dims", 1);
    zf_test_expect_error(kt_run(n, &x, 1, &out, 1), ZF_INVALID_ARGUMENT,
                         "Can not squeeze dim[1], expected a dimension of 1, got 2");
    kt_node_free(&n);
    n = kt_node_new("sq", "Squeeze", 1);
    kt_attr_type(n, "T", ZF_FLOAT);
    KT_ATTR_INTS(n, "squeeze_dims", 4);
    zf_test_expect_error(kt_run(n, &x, 1, &out, 1), ZF_INVALID_ARGUMENT,
                         "Tried to squeeze dim index 4 for tensor with 4 dimensions.");
    kt_node_free(&n);
    zf_tensor_unref(&x);
}

/* ---- Transpose
 * ------------------------------------------------------------------------------------ */

static void test_transpose_of_a_matrix(void **state)
{
    (void)state;
    zf_tensor_t *in[2] = {KT_I64(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6), KT_I32(ZF_SHAPE(2), 1, 0)};
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_run("Transpose", in, 2, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(3, 2), 1, 4, 2, 5, 3, 6);
    zf_tensor_unref(&out);
}

static void test_rank4_transposes_match_index_arithmetic(void **state)
{
    (void)state;
    const int32_t perms[][4] = {
        {0, 3, 1, 2}, {3, 2, 1, 0}, {0, 1, 3, 2}, {0, 1, 2, 3}, {2, 0, 3, 1}};
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    for (int p = 0; p < 5; p++) {
        zf_shape_t s = ZF_SHAPE(3, 40, 50, 7);
        zf_tensor_t *x = kt_random_f32(s, (uint32_t)p);
        zf_tensor_t *in[2] = {x, kt_tensor(ZF_INT32, ZF_SHAPE(4), perms[p], 4)}, *out = NULL;
        Tensorflow__NodeDef *n = kt_node_new("t", "Transpose", 2);
        kt_attr_type(n, "T", ZF_FLOAT);
        ASSERT_OK(kt_run_on(n, in, 2, &out, 1, NULL, dev));
        const zf_shape_t *os = zf_tensor_shape(out);
        const float *px = zf_tensor_data(x), *po = zf_tensor_data(out);
        int64_t idx[4] = {0}; /* output index */
        for (int64_t i = 0; i < zf_tensor_num_elements(out); i++) {
            int64_t src[4];
            for (int k = 0; k < 4; k++) src[perms[p][k]] = idx[k];
            int64_t off = ((src[0] * s.dims[1] + src[1]) * s.dims[2] + src[2]) * s.dims[3] + src[3];
            if (po[i] != px[off]) fail_msg("perm %d element %lld differs", p, (long long)i);
            for (int k = 3; k >= 0 && ++idx[k] == os->dims[k]; k--) idx[k] = 0;
        }
        kt_unref_all((zf_tensor_t *[]){in[0], in[1], out}, 3);
        kt_node_free(&n);
    }
    zf_device_destroy(&dev);
}

static void test_transpose_rejects_bad_permutations(void **state)
{
    (void)state;
    struct {
        zf_tensor_t *perm;
        const char *msg;
    } cases[] = {
        {KT_I32(ZF_SHAPE(3), 0, 1, 2), "transpose expects a vector of size 2"},
        {KT_I32(ZF_SHAPE(2), 1, 1), "perm[1] = 1 is duplicated"},
        {KT_I32(ZF_SHAPE(2), 0, 2), "perm[1] = 2 is out of range [0, 2)"},
    };
    for (int i = 0; i < 3; i++) {
        zf_tensor_t *in[2] = {kt_zeros(ZF_BOOL, ZF_SHAPE(2, 2)), cases[i].perm}, *out = NULL;
        zf_test_expect_error(s_run("Transpose", in, 2, &out), ZF_INVALID_ARGUMENT, cases[i].msg);
    }
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), KT_I32(ZF_SHAPE(2), 1, 0)};
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_run("Transpose", in, 2, &out));
    kt_expect_shape(out, ZF_SHAPE(3, 0));
    zf_tensor_unref(&out);
}

/* ---- ConcatV2, Pack
 * -------------------------------------------------------------------------------- */

static zf_status_t s_concat(zf_tensor_t **in, int n, zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("cat", "ConcatV2", n);
    kt_attr_type(node, "T", zf_tensor_dtype(in[0]));
    kt_attr_int(node, "N", n - 1);
    zf_status_t s = kt_run(node, in, n, out, 1);
    kt_unref_all(in, n);
    kt_node_free(&node);
    return s;
}

static void test_concat_joins_along_any_axis(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[4] = {KT_F32(ZF_SHAPE(2, 2), 1, 2, 3, 4), KT_F32(ZF_SHAPE(2, 1), 5, 6),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 0)), KT_I32(zf_shape_scalar(), -1)};
    ASSERT_OK(s_concat(in, 4, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 3), 0, 1, 2, 5, 3, 4, 6);
    zf_tensor_unref(&out);
    in[0] = KT_I32(ZF_SHAPE(1, 2), 1, 2);
    in[1] = KT_I32(ZF_SHAPE(2, 2), 3, 4, 5, 6);
    in[2] = KT_I64(zf_shape_scalar(), 0);
    ASSERT_OK(s_concat(in, 3, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
    zf_tensor_unref(&out);
}

static void test_concat_reports_mismatched_inputs(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[3] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 4)),
                          KT_I32(zf_shape_scalar(), 1)};
    zf_test_expect_error(s_concat(in, 3, &out), ZF_INVALID_ARGUMENT,
                         "cat (ConcatV2): ConcatOp : Dimensions of inputs should match: shape[0] = "
                         "[2,3] vs. shape[1] = [3,4]");
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3));
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3));
    in[2] = KT_I32(zf_shape_scalar(), 2);
    zf_test_expect_error(
        s_concat(in, 3, &out), ZF_INVALID_ARGUMENT,
        "ConcatOp : Expected concatenating dimensions in the range [-2, 2), but got 2");
    in[0] = KT_F32(zf_shape_scalar(), 1);
    in[1] = KT_F32(zf_shape_scalar(), 2);
    in[2] = KT_I32(zf_shape_scalar(), 0);
    zf_test_expect_error(s_concat(in, 3, &out), ZF_INVALID_ARGUMENT, "Can't concatenate scalars");
    in[0] = KT_F32(ZF_SHAPE(1), 1);
    in[1] = KT_F64(ZF_SHAPE(1), 2);
    in[2] = KT_I32(zf_shape_scalar(), 0);
    zf_test_expect_error(s_concat(in, 3, &out), ZF_INVALID_ARGUMENT,
                         "input 1 must be float, got double");
}

static zf_status_t s_pack(zf_tensor_t **in, int n, int64_t axis, zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("pack", "Pack", n);
    kt_attr_type(node, "T", zf_tensor_dtype(in[0]));
    kt_attr_int(node, "N", n);
    kt_attr_int(node, "axis", axis);
    zf_status_t s = kt_run(node, in, n, out, 1);
    kt_unref_all(in, n);
    kt_node_free(&node);
    return s;
}

static void test_pack_stacks_along_a_new_axis(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[3] = {KT_F32(ZF_SHAPE(2), 1, 2), KT_F32(ZF_SHAPE(2), 3, 4),
                          KT_F32(ZF_SHAPE(2), 5, 6)};
    ASSERT_OK(s_pack(in, 3, 0, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3, 2), 0, 1, 2, 3, 4, 5, 6);
    zf_tensor_unref(&out);
    in[0] = KT_F32(ZF_SHAPE(2), 1, 2);
    in[1] = KT_F32(ZF_SHAPE(2), 3, 4);
    ASSERT_OK(s_pack(in, 2, -1, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 2), 0, 1, 3, 2, 4);
    zf_tensor_unref(&out);
    in[0] = KT_I32(zf_shape_scalar(), 7);
    in[1] = KT_I32(zf_shape_scalar(), 8);
    ASSERT_OK(s_pack(in, 2, 0, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2), 7, 8);
    zf_tensor_unref(&out);
    in[0] = KT_F32(ZF_SHAPE(2), 1, 2);
    in[1] = KT_F32(ZF_SHAPE(3), 3, 4, 5);
    zf_test_expect_error(
        s_pack(in, 2, 0, &out), ZF_INVALID_ARGUMENT,
        "Shapes of all inputs must match: values[0].shape = [2] != values[1].shape "
        "= [3]");
    in[0] = KT_F32(ZF_SHAPE(2), 1, 2);
    zf_test_expect_error(s_pack(in, 1, 2, &out), ZF_INVALID_ARGUMENT, "axis = 2 not in [-2, 2)");
}

/* ---- Fill, ZerosLike, OnesLike
 * ------------------------------------------------------------------------ */

static void test_fill_repeats_a_scalar(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[2] = {KT_I32(ZF_SHAPE(2), 2, 3), KT_F64(zf_shape_scalar(), 2.5)};
    Tensorflow__NodeDef *n = kt_node_new("fill", "Fill", 2);
    kt_attr_type(n, "T", ZF_DOUBLE);
    ASSERT_OK(kt_run(n, in, 2, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 3), 0, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5);
    zf_tensor_unref(&out);
    zf_tensor_unref(&in[0]);
    in[0] = KT_I64(ZF_SHAPE(2), 0, 3);
    ASSERT_OK(kt_run(n, in, 2, &out, 1));
    kt_expect_shape(out, ZF_SHAPE(0, 3));
    zf_tensor_unref(&out);
    zf_tensor_unref(&in[0]);
    in[0] = KT_I32(ZF_SHAPE(1), -1);
    zf_test_expect_error(kt_run(n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "dims[0] = -1 must be non-negative");
    zf_tensor_unref(&in[1]);
    in[1] = KT_F64(ZF_SHAPE(1), 1);
    zf_test_expect_error(kt_run(n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "value must be a scalar, got shape [1]");
    kt_unref_all(in, 2);
    kt_node_free(&n);
}

static void test_zeros_like_and_ones_like_keep_shape_and_dtype(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL, *in[1] = {KT_I32(ZF_SHAPE(1, 3), 5, 6, 7)};
    ASSERT_OK(s_run("ZerosLike", in, 1, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(1, 3), 0, 0, 0);
    zf_tensor_unref(&out);
    in[0] = KT_BOOL(ZF_SHAPE(2), false, false);
    ASSERT_OK(s_run("OnesLike", in, 1, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2), 1, 1);
    zf_tensor_unref(&out);
    in[0] = KT_F64(ZF_SHAPE(2, 1, 1, 1), -3, 4);
    ASSERT_OK(s_run("OnesLike", in, 1, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 1, 1, 1), 0, 1, 1);
    zf_tensor_unref(&out);
    in[0] = kt_zeros(ZF_HALF, ZF_SHAPE(1));
    ASSERT_OK(s_run("OnesLike", in, 1, &out));
    assert_int_equal(((const uint16_t *)zf_tensor_data(out))[0], 0x3C00);
    zf_tensor_unref(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape_infers_minus_one_and_shares_the_buffer),
        cmocka_unit_test(test_reshape_reports_impossible_shapes),
        cmocka_unit_test(test_shape_size_and_rank_describe_the_input),
        cmocka_unit_test(test_expand_dims_inserts_a_dim_anywhere),
        cmocka_unit_test(test_squeeze_removes_ones_or_the_named_dims),
        cmocka_unit_test(test_transpose_of_a_matrix),
        cmocka_unit_test(test_rank4_transposes_match_index_arithmetic),
        cmocka_unit_test(test_transpose_rejects_bad_permutations),
        cmocka_unit_test(test_concat_joins_along_any_axis),
        cmocka_unit_test(test_concat_reports_mismatched_inputs),
        cmocka_unit_test(test_pack_stacks_along_a_new_axis),
        cmocka_unit_test(test_fill_repeats_a_scalar),
        cmocka_unit_test(test_zeros_like_and_ones_like_keep_shape_and_dtype),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
