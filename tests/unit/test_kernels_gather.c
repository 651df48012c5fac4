/* Tests for executor/kernels/kernels_gather: GatherV2 (axis, batch_dims),
 * Gather, GatherNd, ScatterNd, UnsortedSegmentSum and OneHot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

/* x[i] = i as int32, of shape s. */
static zf_tensor_t *s_iota(zf_shape_t s)
{
    zf_tensor_t *t = kt_zeros(ZF_INT32, s);
    int32_t *p = zf_tensor_data(t);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) p[i] = (int32_t)i;
    return t;
}

/* Runs op on the inputs (taking them) with type attr key set from input
 * ti; batch_dims when not 0. */
static zf_status_t s_run_bd(const char *op, const char *key, int ti, zf_tensor_t **in, int n,
                            int64_t batch_dims, zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("g", op, n);
    kt_attr_type(node, key, zf_tensor_dtype(in[ti]));
    if (batch_dims) kt_attr_int(node, "batch_dims", batch_dims);
    zf_status_t s = kt_run(node, in, n, out, 1);
    kt_unref_all(in, n);
    kt_node_free(&node);
    return s;
}

static zf_status_t s_gather_v2(zf_tensor_t *params, zf_tensor_t *indices, int64_t axis,
                               int64_t batch_dims, zf_tensor_t **out)
{
    zf_tensor_t *in[3] = {params, indices, KT_I64(zf_shape_scalar(), axis)};
    return s_run_bd("GatherV2", "Tparams", 0, in, 3, batch_dims, out);
}

/* ---- GatherV2, Gather -------------------------------------------------------------------- */

static void test_gather_v2_picks_slices_along_the_axis(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_gather_v2(s_iota(ZF_SHAPE(3, 2)), KT_I32(ZF_SHAPE(3), 2, 0, 2), 0, 0, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(3, 2), 4, 5, 0, 1, 4, 5);
    zf_tensor_unref(&out);
    ASSERT_OK(s_gather_v2(s_iota(ZF_SHAPE(2, 3)), KT_I64(ZF_SHAPE(2, 1), 1, 0), -1, 0, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2, 1), 1, 0, 4, 3);
    zf_tensor_unref(&out);
    /* a scalar index drops the axis; no indices give an empty axis */
    ASSERT_OK(s_gather_v2(s_iota(ZF_SHAPE(3, 2)), KT_I32(zf_shape_scalar(), 1), 0, 0, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2), 2, 3);
    zf_tensor_unref(&out);
    ASSERT_OK(s_gather_v2(s_iota(ZF_SHAPE(3, 2)), kt_zeros(ZF_INT32, ZF_SHAPE(0)), 0, 0, &out));
    kt_expect_shape(out, ZF_SHAPE(0, 2));
    zf_tensor_unref(&out);
    /* batch_dims: each batch row gathers from its own params */
    ASSERT_OK(
        s_gather_v2(s_iota(ZF_SHAPE(2, 3, 4)), KT_I32(ZF_SHAPE(2, 2), 2, 0, 1, 1), 1, 1, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2, 4), 8, 9, 10, 11, 0, 1, 2, 3, 16, 17, 18, 19, 16, 17, 18,
                   19);
    zf_tensor_unref(&out);
    ASSERT_OK(s_gather_v2(s_iota(ZF_SHAPE(2, 3, 4)), KT_I32(ZF_SHAPE(2, 1), 3, 0), 2, -1, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 3, 1), 3, 7, 11, 12, 16, 20);
    zf_tensor_unref(&out);
}

static void test_gather_v2_matches_index_loops(void **state)
{
    (void)state;
    const int64_t d[3] = {3, 4, 5};
    for (int axis = 0; axis < 3; axis++) {
        int32_t idx[6];
        for (int k = 0; k < 6; k++) idx[k] = (int32_t)((k * 7 + axis) % d[axis]);
        zf_tensor_t *p = kt_random_f32(ZF_SHAPE(3, 4, 5), (uint32_t)axis), *out = NULL;
        ASSERT_OK(s_gather_v2(zf_tensor_ref(p), kt_tensor(ZF_INT32, ZF_SHAPE(2, 3), idx, 6), axis,
                              0, &out));
        const float *pp = zf_tensor_data(p), *po = zf_tensor_data(out);
        /* out[a..., j, b...] with j the flat index into indices */
        int64_t pre = 1, post = 1;
        for (int k = 0; k < axis; k++) pre *= d[k];
        for (int k = axis + 1; k < 3; k++) post *= d[k];
        for (int64_t a = 0; a < pre; a++)
            for (int j = 0; j < 6; j++)
                for (int64_t b = 0; b < post; b++) {
                    float want = pp[(a * d[axis] + idx[j]) * post + b];
                    float got = po[(a * 6 + j) * post + b];
                    if (want != got) fail_msg("axis %d: element differs", axis);
                }
        zf_tensor_unref(&p);
        zf_tensor_unref(&out);
    }
}

static void test_gather_v2_reports_bad_indices_and_attrs(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_test_expect_error(
        s_gather_v2(s_iota(ZF_SHAPE(3, 2)), KT_I32(ZF_SHAPE(2, 1), 0, 5), 0, 0, &out),
        ZF_INVALID_ARGUMENT, "g (GatherV2): indices[1,0] = 5 is not in [0, 3)");
    zf_test_expect_error(s_gather_v2(s_iota(ZF_SHAPE(3, 2)), KT_I64(ZF_SHAPE(1), -1), 0, 0, &out),
                         ZF_INVALID_ARGUMENT, "indices[0] = -1 is not in [0, 3)");
    zf_test_expect_error(
        s_gather_v2(s_iota(ZF_SHAPE(3, 2)), KT_I64(zf_shape_scalar(), 7), 0, 0, &out),
        ZF_INVALID_ARGUMENT, "indices = 7 is not in [0, 3)");
    zf_test_expect_error(s_gather_v2(s_iota(ZF_SHAPE(3, 2)), KT_I32(ZF_SHAPE(1), 0), 2, 0, &out),
                         ZF_INVALID_ARGUMENT, "Shape must be at least rank 3 but is rank 2");
    zf_test_expect_error(s_gather_v2(s_iota(ZF_SHAPE(3, 2)), KT_I32(ZF_SHAPE(1), 0), -3, 0, &out),
                         ZF_INVALID_ARGUMENT, "Shape must be at least rank 3 but is rank 2");
    zf_test_expect_error(s_gather_v2(s_iota(ZF_SHAPE(2, 3)), KT_I32(ZF_SHAPE(2), 0, 0), 0, 1, &out),
                         ZF_INVALID_ARGUMENT,
                         "batch_dims (1) must be less than or equal to axis (0).");
    zf_test_expect_error(
        s_gather_v2(s_iota(ZF_SHAPE(2, 3)), KT_I32(ZF_SHAPE(3, 1), 0, 0, 0), 1, 1, &out),
        ZF_INVALID_ARGUMENT, "params.shape[0]: 2 should be equal to indices.shape[0]: 3");
    zf_test_expect_error(s_gather_v2(s_iota(ZF_SHAPE(2, 3)), KT_I32(ZF_SHAPE(2), 0, 0), 1, 2, &out),
                         ZF_INVALID_ARGUMENT,
                         "Expected batch_dims in the range [-1, 1], but got 2");
    zf_test_expect_error(
        s_gather_v2(KT_I32(zf_shape_scalar(), 1), KT_I32(ZF_SHAPE(1), 0), 0, 0, &out),
        ZF_INVALID_ARGUMENT, "Shape must be at least rank 1 but is rank 0");
    zf_test_expect_error(s_gather_v2(s_iota(ZF_SHAPE(2)), KT_F32(ZF_SHAPE(1), 0), 0, 0, &out),
                         ZF_INVALID_ARGUMENT, "indices must be int32 or int64, got float");
    assert_null(out);
}

static void test_gather_takes_rows(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    zf_tensor_t *in[2] = {KT_F64(ZF_SHAPE(3, 2), 1, 2, 3, 4, 5, 6),
                          KT_I64(ZF_SHAPE(2, 2), 2, 2, 0, 1)};
    ASSERT_OK(s_run_bd("Gather", "Tparams", 0, in, 2, 0, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 2, 2), 0, 5, 6, 5, 6, 1, 2, 3, 4);
    zf_tensor_unref(&out);
    in[0] = KT_F64(ZF_SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
    in[1] = KT_I64(ZF_SHAPE(1), 3);
    zf_test_expect_error(s_run_bd("Gather", "Tparams", 0, in, 2, 0, &out), ZF_INVALID_ARGUMENT,
                         "g (Gather): indices[0] = 3 is not in [0, 3)");
    in[0] = KT_F64(zf_shape_scalar(), 1);
    in[1] = KT_I64(ZF_SHAPE(1), 0);
    zf_test_expect_error(s_run_bd("Gather", "Tparams", 0, in, 2, 0, &out), ZF_INVALID_ARGUMENT,
                         "Shape must be at least rank 1 but is rank 0");
    assert_null(out);
}

/* ---- GatherNd ---------------------------------------------------------------------------- */

static zf_status_t s_gather_nd(zf_tensor_t *params, zf_tensor_t *indices, const char *policy,
                               zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("nd", "GatherNd", 2);
    kt_attr_type(node, "Tparams", zf_tensor_dtype(params));
    if (policy) kt_attr_string(node, "bad_indices_policy", policy);
    zf_tensor_t *in[2] = {params, indices};
    zf_status_t s = kt_run(node, in, 2, out, 1);
    kt_unref_all(in, 2);
    kt_node_free(&node);
    return s;
}

static void test_gather_nd_takes_elements_or_slices(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_gather_nd(s_iota(ZF_SHAPE(2, 2)), KT_I32(ZF_SHAPE(2, 2), 1, 0, 0, 1), NULL, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2), 2, 1);
    zf_tensor_unref(&out);
    ASSERT_OK(s_gather_nd(s_iota(ZF_SHAPE(2, 2)), KT_I64(ZF_SHAPE(2, 1), 1, 0), NULL, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2), 2, 3, 0, 1);
    zf_tensor_unref(&out);
    ASSERT_OK(
        s_gather_nd(s_iota(ZF_SHAPE(2, 3, 2)), KT_I32(ZF_SHAPE(2, 1, 2), 1, 2, 0, 1), NULL, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 1, 2), 10, 11, 2, 3);
    zf_tensor_unref(&out);
    /* an empty index selects the whole params */
    ASSERT_OK(s_gather_nd(s_iota(ZF_SHAPE(2)), kt_zeros(ZF_INT32, ZF_SHAPE(2, 0)), NULL, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2), 0, 1, 0, 1);
    zf_tensor_unref(&out);
    ASSERT_OK(
        s_gather_nd(s_iota(ZF_SHAPE(2, 2)), KT_I32(ZF_SHAPE(2, 2), 1, 1, 2, 0), "IGNORE", &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2), 3, 0);
    zf_tensor_unref(&out);
    zf_test_expect_error(
        s_gather_nd(s_iota(ZF_SHAPE(2, 2)), KT_I32(ZF_SHAPE(2, 2), 1, 1, 2, 0), NULL, &out),
        ZF_INVALID_ARGUMENT,
        "nd (GatherNd): indices[1] = [2, 0] does not index into param shape [2,2]");
    zf_test_expect_error(
        s_gather_nd(s_iota(ZF_SHAPE(2, 2)), KT_I32(ZF_SHAPE(1, 3), 0, 0, 0), NULL, &out),
        ZF_INVALID_ARGUMENT,
        "index innermost dimension length must be <= params rank; saw: 3 vs. 2");
    zf_test_expect_error(
        s_gather_nd(s_iota(ZF_SHAPE(2, 2)), KT_I32(zf_shape_scalar(), 0), NULL, &out),
        ZF_INVALID_ARGUMENT, "indices must be at least a vector");
    zf_test_expect_error(
        s_gather_nd(s_iota(ZF_SHAPE(2, 2)), KT_I32(ZF_SHAPE(1, 1), 0), "SKIP", &out),
        ZF_INVALID_ARGUMENT, "bad_indices_policy must be DEFAULT, ERROR or IGNORE");
}

/* ---- ScatterNd --------------------------------------------------------------------------- */

static zf_status_t s_scatter_nd(zf_tensor_t *indices, zf_tensor_t *updates, zf_tensor_t *shape,
                                zf_tensor_t **out)
{
    zf_tensor_t *in[3] = {indices, updates, shape};
    return s_run_bd("ScatterNd", "T", 1, in, 3, 0, out);
}

static void test_scatter_nd_adds_updates_into_zeros(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_scatter_nd(KT_I32(ZF_SHAPE(3, 1), 1, 3, 1), KT_F32(ZF_SHAPE(3), 10, 20, 30),
                           KT_I32(ZF_SHAPE(1), 5), &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(5), 0, 0, 40, 0, 20, 0);
    zf_tensor_unref(&out);
    ASSERT_OK(s_scatter_nd(KT_I64(ZF_SHAPE(2, 2), 0, 1, 1, 0), KT_I64(ZF_SHAPE(2), 1, 2),
                           KT_I64(ZF_SHAPE(2), 2, 2), &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2), 0, 1, 2, 0);
    zf_tensor_unref(&out);
    ASSERT_OK(s_scatter_nd(KT_I32(ZF_SHAPE(1, 1), 1), KT_I32(ZF_SHAPE(1, 3), 1, 2, 3),
                           KT_I32(ZF_SHAPE(2), 2, 3), &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 3), 0, 0, 0, 1, 2, 3);
    zf_tensor_unref(&out);
    zf_test_expect_error(s_scatter_nd(KT_I32(ZF_SHAPE(2, 1), 1, 5), KT_F32(ZF_SHAPE(2), 1, 2),
                                      KT_I32(ZF_SHAPE(1), 5), &out),
                         ZF_INVALID_ARGUMENT,
                         "g (ScatterNd): indices[1] = [5] does not index into shape [5]");
    zf_test_expect_error(s_scatter_nd(KT_I32(ZF_SHAPE(2, 1), 1, 2), KT_F32(ZF_SHAPE(3), 1, 2, 3),
                                      KT_I32(ZF_SHAPE(1), 5), &out),
                         ZF_INVALID_ARGUMENT,
                         "Dimensions [0,1) of indices[shape=[2,1]] must match dimensions [0,1) of "
                         "updates[shape=[3]]");
    zf_test_expect_error(s_scatter_nd(KT_I32(ZF_SHAPE(2, 1), 1, 2),
                                      KT_F32(ZF_SHAPE(2, 2), 1, 2, 3, 4), KT_I32(ZF_SHAPE(2), 5, 3),
                                      &out),
                         ZF_INVALID_ARGUMENT,
                         "Dimensions [1,2) of input[shape=[5,3]] must match dimensions [1,2) of "
                         "updates[shape=[2,2]]");
    zf_test_expect_error(s_scatter_nd(KT_I32(ZF_SHAPE(1, 1), 0), KT_F32(ZF_SHAPE(1), 1),
                                      KT_I32(ZF_SHAPE(1), -5), &out),
                         ZF_INVALID_ARGUMENT, "shape[0] = -5 must be non-negative");
}

/* The adds of the other number types: half rounds, uint8 wraps, complex
 * adds both parts. */
static void test_scatter_nd_adds_every_number_type(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    uint16_t h[3] = {0x3c00, 0x4000, 0x3800}; /* 1, 2, 0.5 */
    ASSERT_OK(s_scatter_nd(KT_I32(ZF_SHAPE(3, 1), 0, 0, 1), kt_tensor(ZF_HALF, ZF_SHAPE(3), h, 3),
                           KT_I32(ZF_SHAPE(1), 2), &out));
    const uint16_t *ph = zf_tensor_data(out);
    assert_int_equal(ph[0], 0x4200); /* 3 */
    assert_int_equal(ph[1], 0x3800);
    zf_tensor_unref(&out);
    uint8_t u[2] = {200, 100};
    ASSERT_OK(s_scatter_nd(KT_I32(ZF_SHAPE(2, 1), 0, 0), kt_tensor(ZF_UINT8, ZF_SHAPE(2), u, 2),
                           KT_I32(ZF_SHAPE(1), 1), &out));
    assert_int_equal(((const uint8_t *)zf_tensor_data(out))[0], 44);
    zf_tensor_unref(&out);
    double c[4] = {1, -2, 0.5, 4}; /* 1-2i, 0.5+4i */
    ASSERT_OK(s_scatter_nd(KT_I32(ZF_SHAPE(2, 1), 1, 1),
                           kt_tensor(ZF_COMPLEX128, ZF_SHAPE(2), c, 2), KT_I32(ZF_SHAPE(1), 2),
                           &out));
    const double *pc = zf_tensor_data(out);
    assert_true(pc[0] == 0 && pc[1] == 0 && pc[2] == 1.5 && pc[3] == 2);
    zf_tensor_unref(&out);
}

/* ---- UnsortedSegmentSum ------------------------------------------------------------------ */

static zf_status_t s_segment_sum(zf_tensor_t *data, zf_tensor_t *ids, zf_tensor_t *num,
                                 zf_tensor_t **out)
{
    zf_tensor_t *in[3] = {data, ids, num};
    return s_run_bd("UnsortedSegmentSum", "T", 0, in, 3, 0, out);
}

static void test_unsorted_segment_sum_adds_rows_by_id(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_segment_sum(KT_F32(ZF_SHAPE(5), 1, 2, 3, 4, 5), KT_I32(ZF_SHAPE(5), 0, 2, 0, -1, 2),
                            KT_I32(zf_shape_scalar(), 3), &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, 4, 0, 7);
    zf_tensor_unref(&out);
    ASSERT_OK(s_segment_sum(s_iota(ZF_SHAPE(3, 2)), KT_I64(ZF_SHAPE(3), 1, 1, 0),
                            KT_I64(zf_shape_scalar(), 2), &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2), 4, 5, 2, 4);
    zf_tensor_unref(&out);
    ASSERT_OK(s_segment_sum(s_iota(ZF_SHAPE(2, 2)), KT_I32(ZF_SHAPE(2, 2), 1, 0, 1, 1),
                            KT_I32(zf_shape_scalar(), 2), &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2), 1, 5);
    zf_tensor_unref(&out);
    zf_test_expect_error(s_segment_sum(s_iota(ZF_SHAPE(3)), KT_I32(ZF_SHAPE(3), 0, 3, 1),
                                       KT_I32(zf_shape_scalar(), 3), &out),
                         ZF_INVALID_ARGUMENT,
                         "g (UnsortedSegmentSum): segment_ids[1] = 3 is out of range [0, 3)");
    zf_test_expect_error(s_segment_sum(s_iota(ZF_SHAPE(3, 2)), KT_I32(ZF_SHAPE(2), 0, 1),
                                       KT_I32(zf_shape_scalar(), 3), &out),
                         ZF_INVALID_ARGUMENT,
                         "data.shape = [3,2] does not start with segment_ids.shape = [2]");
    zf_test_expect_error(s_segment_sum(s_iota(ZF_SHAPE(3)), KT_I32(ZF_SHAPE(3), 0, 0, 0),
                                       KT_I32(zf_shape_scalar(), -1), &out),
                         ZF_INVALID_ARGUMENT, "Input num_segments == -1 must not be negative.");
    zf_test_expect_error(s_segment_sum(s_iota(ZF_SHAPE(3)), KT_I32(ZF_SHAPE(3), 0, 0, 0),
                                       KT_I32(ZF_SHAPE(1), 1), &out),
                         ZF_INVALID_ARGUMENT, "num_segments should be a scalar, not shape [1]");
}

/* ---- OneHot
 * -------------------------------------------------------------------------------------- */

static zf_status_t s_one_hot(zf_tensor_t *indices, int32_t depth, float on, float off, int64_t axis,
                             zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("oh", "OneHot", 4);
    kt_attr_type(node, "T", ZF_FLOAT);
    kt_attr_type(node, "TI", zf_tensor_dtype(indices));
    kt_attr_int(node, "axis", axis);
    zf_tensor_t *in[4] = {indices, KT_I32(zf_shape_scalar(), depth), KT_F32(zf_shape_scalar(), on),
                          KT_F32(zf_shape_scalar(), off)};
    zf_status_t s = kt_run(node, in, 4, out, 1);
    kt_unref_all(in, 4);
    kt_node_free(&node);
    return s;
}

static void test_one_hot_places_on_values_along_the_axis(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_one_hot(KT_I64(ZF_SHAPE(4), 0, 2, -1, 1), 3, 5, 0, -1, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(4, 3), 0, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 5, 0);
    zf_tensor_unref(&out);
    ASSERT_OK(s_one_hot(KT_I32(ZF_SHAPE(4), 0, 2, 7, 1), 3, 1, -1, 0, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3, 4), 0, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1);
    zf_tensor_unref(&out);
    uint8_t u8[2] = {1, 0};
    ASSERT_OK(s_one_hot(kt_tensor(ZF_UINT8, ZF_SHAPE(2, 1), u8, 2), 2, 1, 0, 1, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 2, 1), 0, 0, 1, 1, 0);
    zf_tensor_unref(&out);
    ASSERT_OK(s_one_hot(KT_I32(zf_shape_scalar(), 1), 2, 1, 0, -1, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2), 0, 0, 1);
    zf_tensor_unref(&out);
    zf_test_expect_error(s_one_hot(KT_I32(ZF_SHAPE(2), 0, 1), 2, 1, 0, 2, &out),
                         ZF_INVALID_ARGUMENT,
                         "oh (OneHot): Expected axis to be -1 or between [0, 2).  But received: 2");
    zf_test_expect_error(s_one_hot(KT_I32(ZF_SHAPE(2), 0, 1), -1, 1, 0, -1, &out),
                         ZF_INVALID_ARGUMENT, "depth must be non-negative, got: -1");
    zf_test_expect_error(s_one_hot(KT_F32(ZF_SHAPE(2), 0, 1), 2, 1, 0, -1, &out),
                         ZF_INVALID_ARGUMENT,
                         "indices must be uint8, int8, int32 or int64, got float");
    assert_null(out);
}

/* Empty tensors whose other dims multiply past int64. */
static void test_gather_kernels_on_empty_tensors_with_huge_dims(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_gather_v2(kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 0, (1LL << 62))), KT_I32(ZF_SHAPE(1), 3),
                          0, 0, &out));
    kt_expect_shape(out, ZF_SHAPE(1, 0, (1LL << 62)));
    zf_tensor_unref(&out);
    ASSERT_OK(s_gather_nd(kt_zeros(ZF_FLOAT, ZF_SHAPE((1LL << 62), 0)), KT_I64(ZF_SHAPE(1, 1), 5),
                          NULL, &out));
    kt_expect_shape(out, ZF_SHAPE(1, 0));
    zf_tensor_unref(&out);
    ASSERT_OK(s_scatter_nd(KT_I64(ZF_SHAPE(1, 1), 1), kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 0)),
                           KT_I64(ZF_SHAPE(2), (1LL << 62), 0), &out));
    kt_expect_shape(out, ZF_SHAPE((1LL << 62), 0));
    zf_tensor_unref(&out);
    ASSERT_OK(s_segment_sum(kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 0, (1LL << 62))),
                            KT_I32(ZF_SHAPE(3), 0, 1, 1), KT_I32(zf_shape_scalar(), 2), &out));
    kt_expect_shape(out, ZF_SHAPE(2, 0, (1LL << 62)));
    zf_tensor_unref(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather_v2_picks_slices_along_the_axis),
        cmocka_unit_test(test_gather_v2_matches_index_loops),
        cmocka_unit_test(test_gather_v2_reports_bad_indices_and_attrs),
        cmocka_unit_test(test_gather_takes_rows),
        cmocka_unit_test(test_gather_nd_takes_elements_or_slices),
        cmocka_unit_test(test_scatter_nd_adds_updates_into_zeros),
        cmocka_unit_test(test_scatter_nd_adds_every_number_type),
        cmocka_unit_test(test_unsorted_segment_sum_adds_rows_by_id),
        cmocka_unit_test(test_one_hot_places_on_values_along_the_axis),
        cmocka_unit_test(test_gather_kernels_on_empty_tensors_with_huge_dims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
