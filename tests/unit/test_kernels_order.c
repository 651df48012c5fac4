/* Tests for executor/kernels/kernels_order: Where, TopKV2 and Cumsum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

/* Runs op on the inputs (taking them), T from input 0, bool attrs a and b
 * when named. */
static zf_status_t s_run(const char *op, zf_tensor_t **in, int n, zf_tensor_t **out, int n_out,
                         const char *a, const char *b)
{
    Tensorflow__NodeDef *node = kt_node_new("o", op, n);
    kt_attr_type(node, "T", zf_tensor_dtype(in[0]));
    if (a) kt_attr_bool(node, a, true);
    if (b) kt_attr_bool(node, b, true);
    zf_status_t s = kt_run(node, in, n, out, n_out);
    kt_unref_all(in, n);
    kt_node_free(&node);
    return s;
}

/* ---- Where ------------------------------------------------------------------------------- */

static void test_where_lists_coordinates_of_true_elements(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[1] = {KT_BOOL(ZF_SHAPE(2, 3), true, false, true, false, false, true)};
    ASSERT_OK(s_run("Where", in, 1, &out, 1, NULL, NULL));
    assert_int_equal(zf_tensor_dtype(out), ZF_INT64);
    KT_EXPECT_INTS(out, ZF_SHAPE(3, 2), 0, 0, 0, 2, 1, 2);
    zf_tensor_unref(&out);
    in[0] = KT_F32(ZF_SHAPE(4), 0.0f, -0.0f, NAN, 2.0f);
    ASSERT_OK(s_run("Where", in, 1, &out, 1, NULL, NULL));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 1), 2, 3);
    zf_tensor_unref(&out);
    in[0] = KT_I32(zf_shape_scalar(), 3);
    ASSERT_OK(s_run("Where", in, 1, &out, 1, NULL, NULL));
    kt_expect_shape(out, ZF_SHAPE(1, 0));
    zf_tensor_unref(&out);
    in[0] = KT_I64(zf_shape_scalar(), 0);
    ASSERT_OK(s_run("Where", in, 1, &out, 1, NULL, NULL));
    kt_expect_shape(out, ZF_SHAPE(0, 0));
    zf_tensor_unref(&out);
    in[0] = kt_zeros(ZF_DOUBLE, ZF_SHAPE(3, 0, 2));
    ASSERT_OK(s_run("Where", in, 1, &out, 1, NULL, NULL));
    kt_expect_shape(out, ZF_SHAPE(0, 3));
    zf_tensor_unref(&out);
    uint16_t half[3] = {0x8000, 0x3c00, 0}; /* -0, 1, 0 */
    in[0] = kt_tensor(ZF_HALF, ZF_SHAPE(3), half, 3);
    ASSERT_OK(s_run("Where", in, 1, &out, 1, NULL, NULL));
    KT_EXPECT_INTS(out, ZF_SHAPE(1, 1), 1);
    zf_tensor_unref(&out);
}

/* ---- TopKV2 ------------------------------------------------------------------------------ */

static zf_status_t s_topk(zf_tensor_t *x, zf_tensor_t *k, zf_dtype_t index_type, zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("tk", "TopKV2", 2);
    kt_attr_type(node, "T", zf_tensor_dtype(x));
    if (index_type != ZF_INT32) kt_attr_type(node, "index_type", index_type);
    zf_tensor_t *in[2] = {x, k};
    zf_status_t s = kt_run(node, in, 2, out, 2);
    kt_unref_all(in, 2);
    kt_node_free(&node);
    return s;
}

static void test_topk_takes_the_largest_with_ties_by_index(void **state)
{
    (void)state;
    zf_tensor_t *out[2] = {NULL, NULL};
    ASSERT_OK(s_topk(KT_F32(ZF_SHAPE(2, 4), 1, 3, 2, 3, 5, 5, 5, 1), KT_I32(zf_shape_scalar(), 2),
                     ZF_INT32, out));
    KT_EXPECT_NEAR(out[0], ZF_SHAPE(2, 2), 0, 3, 3, 5, 5);
    assert_int_equal(zf_tensor_dtype(out[1]), ZF_INT32);
    KT_EXPECT_INTS(out[1], ZF_SHAPE(2, 2), 1, 3, 0, 1);
    kt_unref_all(out, 2);
    /* int64 extremes and an int64 index type */
    ASSERT_OK(s_topk(KT_I64(ZF_SHAPE(4), INT64_MIN, INT64_MAX, -1, INT64_MAX - 1),
                     KT_I64(zf_shape_scalar(), 3), ZF_INT64, out));
    KT_EXPECT_INTS(out[0], ZF_SHAPE(3), INT64_MAX, INT64_MAX - 1, -1);
    assert_int_equal(zf_tensor_dtype(out[1]), ZF_INT64);
    KT_EXPECT_INTS(out[1], ZF_SHAPE(3), 1, 3, 2);
    kt_unref_all(out, 2);
    uint64_t u[3] = {1, UINT64_MAX, (uint64_t)1 << 63};
    ASSERT_OK(s_topk(kt_tensor(ZF_UINT64, ZF_SHAPE(3), u, 3), KT_I32(zf_shape_scalar(), 3),
                     ZF_INT32, out));
    KT_EXPECT_INTS(out[1], ZF_SHAPE(3), 1, 2, 0);
    kt_unref_all(out, 2);
    ASSERT_OK(s_topk(KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6), KT_I32(zf_shape_scalar(), 0),
                     ZF_INT32, out));
    kt_expect_shape(out[0], ZF_SHAPE(2, 0));
    kt_expect_shape(out[1], ZF_SHAPE(2, 0));
    kt_unref_all(out, 2);
}

/* Against selection by repeated first-maximum (ties to the lower index),
 * for k small against the row (kept in a heap) and not (sorted). */
static void test_topk_matches_repeated_selection(void **state)
{
    (void)state;
    enum { ROWS = 6, COLS = 40 };
    int32_t x[ROWS * COLS];
    uint32_t r = 99u;
    for (int i = 0; i < ROWS * COLS; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (int32_t)(r >> 24) % 7 - 3; /* many ties */
    }
    const int ks[] = {1, 3, 9, 10, 25, COLS};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        int k = ks[t];
        zf_tensor_t *out[2] = {NULL, NULL};
        ASSERT_OK(s_topk(kt_tensor(ZF_INT32, ZF_SHAPE(ROWS, COLS), x, ROWS * COLS),
                         KT_I32(zf_shape_scalar(), k), ZF_INT32, out));
        const int32_t *v = zf_tensor_data(out[0]), *ix = zf_tensor_data(out[1]);
        for (int row = 0; row < ROWS; row++) {
            bool taken[COLS] = {false};
            for (int j = 0; j < k; j++) {
                int best = -1;
                for (int c = 0; c < COLS; c++)
                    if (!taken[c] && (best < 0 || x[row * COLS + c] > x[row * COLS + best]))
                        best = c;
                taken[best] = true;
                if (ix[row * k + j] != best || v[row * k + j] != x[row * COLS + best])
                    fail_msg("k %d row %d rank %d: got index %d, want %d", k, row, j,
                             ix[row * k + j], best);
            }
        }
        kt_unref_all(out, 2);
    }
}

static void test_topk_reports_bad_k(void **state)
{
    (void)state;
    zf_tensor_t *out[2] = {NULL, NULL};
    zf_test_expect_error(
        s_topk(KT_F32(ZF_SHAPE(4), 1, 2, 3, 4), KT_I32(zf_shape_scalar(), 5), ZF_INT32, out),
        ZF_INVALID_ARGUMENT, "tk (TopKV2): input must have at least k columns. Had 4, needed 5");
    zf_test_expect_error(
        s_topk(KT_F32(ZF_SHAPE(4), 1, 2, 3, 4), KT_I32(zf_shape_scalar(), -1), ZF_INT32, out),
        ZF_INVALID_ARGUMENT, "k must be non-negative, got -1");
    zf_test_expect_error(
        s_topk(KT_F32(zf_shape_scalar(), 1), KT_I32(zf_shape_scalar(), 1), ZF_INT32, out),
        ZF_INVALID_ARGUMENT, "input must be >= 1-D, got shape []");
    zf_test_expect_error(
        s_topk(KT_F32(ZF_SHAPE(4), 1, 2, 3, 4), KT_I32(ZF_SHAPE(1), 1), ZF_INT32, out),
        ZF_INVALID_ARGUMENT, "k must be scalar, got shape [1]");
    assert_null(out[0]);
}

/* ---- Cumsum ------------------------------------------------------------------------------ */

static zf_status_t s_cumsum(zf_tensor_t *x, int64_t axis, const char *a, const char *b,
                            zf_tensor_t **out)
{
    zf_tensor_t *in[2] = {x, KT_I32(zf_shape_scalar(), (int32_t)axis)};
    return s_run("Cumsum", in, 2, out, 1, a, b);
}

static void test_cumsum_exclusive_and_reverse(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_cumsum(KT_F32(ZF_SHAPE(4), 1, 2, 3, 4), 0, NULL, NULL, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(4), 0, 1, 3, 6, 10);
    zf_tensor_unref(&out);
    ASSERT_OK(s_cumsum(KT_F32(ZF_SHAPE(4), 1, 2, 3, 4), 0, "exclusive", NULL, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(4), 0, 0, 1, 3, 6);
    zf_tensor_unref(&out);
    ASSERT_OK(s_cumsum(KT_F32(ZF_SHAPE(4), 1, 2, 3, 4), -1, "reverse", NULL, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(4), 0, 10, 9, 7, 4);
    zf_tensor_unref(&out);
    ASSERT_OK(s_cumsum(KT_F32(ZF_SHAPE(4), 1, 2, 3, 4), 0, "exclusive", "reverse", &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(4), 0, 9, 7, 4, 0);
    zf_tensor_unref(&out);
    ASSERT_OK(s_cumsum(KT_I64(ZF_SHAPE(2, 2), 1, 2, 3, 4), 0, NULL, NULL, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2), 1, 2, 4, 6);
    zf_tensor_unref(&out);
    ASSERT_OK(s_cumsum(KT_I32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6), 1, "reverse", NULL, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 3), 6, 5, 3, 15, 11, 6);
    zf_tensor_unref(&out);
    /* integers wrap as in TensorFlow */
    ASSERT_OK(s_cumsum(KT_I32(ZF_SHAPE(2), INT32_MAX, 1), 0, NULL, NULL, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2), INT32_MAX, INT32_MIN);
    zf_tensor_unref(&out);
    uint16_t h[3] = {0x3c00, 0x4000, 0x3800}; /* half 1, 2, 0.5 */
    ASSERT_OK(s_cumsum(kt_tensor(ZF_HALF, ZF_SHAPE(3), h, 3), 0, NULL, NULL, &out));
    const uint16_t *ph = zf_tensor_data(out);
    assert_true(ph[0] == 0x3c00 && ph[1] == 0x4200 && ph[2] == 0x4300); /* 1, 3, 3.5 */
    zf_tensor_unref(&out);
    float c[4] = {1, 2, 3, -4}; /* complex64 1+2i, 3-4i */
    ASSERT_OK(s_cumsum(kt_tensor(ZF_COMPLEX64, ZF_SHAPE(2), c, 2), 0, "reverse", NULL, &out));
    const float *pc = zf_tensor_data(out);
    assert_true(pc[0] == 4 && pc[1] == -2 && pc[2] == 3 && pc[3] == -4);
    zf_tensor_unref(&out);
    ASSERT_OK(s_cumsum(kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), 1, NULL, NULL, &out));
    kt_expect_shape(out, ZF_SHAPE(0, 3));
    zf_tensor_unref(&out);
    zf_test_expect_error(s_cumsum(KT_F32(ZF_SHAPE(2), 1, 2), 1, NULL, NULL, &out),
                         ZF_INVALID_ARGUMENT,
                         "o (Cumsum): ScanOp: Expected scan axis in the range [-1, 1), but got 1");
    zf_test_expect_error(s_cumsum(KT_F32(ZF_SHAPE(2), 1, 2), -3, NULL, NULL, &out),
                         ZF_INVALID_ARGUMENT, "in the range [-1, 1), but got -2");
    zf_test_expect_error(s_cumsum(KT_F32(zf_shape_scalar(), 1), 0, NULL, NULL, &out),
                         ZF_INVALID_ARGUMENT, "Expected scan axis in the range [0, 0), but got 0");
    zf_tensor_t *in[2] = {KT_F32(ZF_SHAPE(2), 1, 2), KT_I32(ZF_SHAPE(1), 0)};
    zf_test_expect_error(s_run("Cumsum", in, 2, &out, 1, NULL, NULL), ZF_INVALID_ARGUMENT,
                         "ScanOp: axis must be a scalar, not [1]");
}

/* Empty tensors whose other dims multiply past int64: nothing to do, and
 * no product of dims overflows on the way. */
static void test_order_kernels_on_empty_tensors_with_huge_dims(void **state)
{
    (void)state;
    zf_tensor_t *out[2] = {NULL, NULL};
    ASSERT_OK(s_cumsum(kt_zeros(ZF_FLOAT, ZF_SHAPE((1LL << 62), 0, 4)), 1, NULL, NULL, &out[0]));
    kt_expect_shape(out[0], ZF_SHAPE((1LL << 62), 0, 4));
    zf_tensor_unref(&out[0]);
    ASSERT_OK(s_topk(kt_zeros(ZF_FLOAT, ZF_SHAPE((1LL << 62), 0, 3)), KT_I32(zf_shape_scalar(), 2),
                     ZF_INT32, out));
    kt_expect_shape(out[1], ZF_SHAPE((1LL << 62), 0, 2));
    kt_unref_all(out, 2);
    zf_tensor_t *in[1] = {kt_zeros(ZF_INT32, ZF_SHAPE((1LL << 62), 0, 4))};
    ASSERT_OK(s_run("Where", in, 1, out, 1, NULL, NULL));
    kt_expect_shape(out[0], ZF_SHAPE(0, 3));
    zf_tensor_unref(&out[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_where_lists_coordinates_of_true_elements),
        cmocka_unit_test(test_topk_takes_the_largest_with_ties_by_index),
        cmocka_unit_test(test_topk_matches_repeated_selection),
        cmocka_unit_test(test_topk_reports_bad_k),
        cmocka_unit_test(test_cumsum_exclusive_and_reverse),
        cmocka_unit_test(test_order_kernels_on_empty_tensors_with_huge_dims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
