/* Tests for executor/kernels/kernels_slice: StridedSlice (every mask,
 * negative strides, clamping), StridedSliceGrad (as StridedSlice's
 * adjoint), Slice, Split, SplitV and Unpack. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "kernel_test_util.h"
#include "session/local_session.h"

enum { M_BEGIN, M_END, M_ELLIPSIS, M_NEW_AXIS, M_SHRINK };

static const char *const s_mask_names[] = {"begin_mask", "end_mask", "ellipsis_mask",
                                           "new_axis_mask", "shrink_axis_mask"};

/* x[i] = i as int32, of shape s. */
static zf_tensor_t *s_iota(zf_shape_t s)
{
    zf_tensor_t *t = kt_zeros(ZF_INT32, s);
    int32_t *p = zf_tensor_data(t);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) p[i] = (int32_t)i;
    return t;
}

/* Pseudo-random doubles in [-1, 1). */
static zf_tensor_t *s_random_f64(zf_shape_t s, uint32_t seed)
{
    zf_tensor_t *t = kt_zeros(ZF_DOUBLE, s);
    double *p = zf_tensor_data(t);
    uint32_t x = seed * 2246822519u + 7u;
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (double)(x >> 8) / (double)(1u << 23) - 1.0;
    }
    return t;
}

static zf_tensor_t *s_vec64(const int64_t *v, int n)
{
    return kt_tensor(ZF_INT64, zf_shape_of(1, (const int64_t[]){n}), v, (size_t)n);
}

/* A slice spec: n entries and the five masks. */
typedef struct {
    int n;
    int64_t begin[8], end[8], strides[8];
    int64_t masks[5];
} spec_t;

static Tensorflow__NodeDef *s_spec_node(const char *op, const spec_t *sp, zf_dtype_t t, int n_in)
{
    Tensorflow__NodeDef *node = kt_node_new("ss", op, n_in);
    kt_attr_type(node, "T", t);
    kt_attr_type(node, "Index", ZF_INT64);
    for (int i = 0; i < 5; i++)
        if (sp->masks[i]) kt_attr_int(node, s_mask_names[i], sp->masks[i]);
    return node;
}

/* StridedSlice(x, spec); x is borrowed. */
static zf_status_t s_strided_slice(zf_tensor_t *x, const spec_t *sp, zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = s_spec_node("StridedSlice", sp, zf_tensor_dtype(x), 4);
    zf_tensor_t *in[4] = {x, s_vec64(sp->begin, sp->n), s_vec64(sp->end, sp->n),
                          s_vec64(sp->strides, sp->n)};
    zf_status_t s = kt_run(node, in, 4, out, 1);
    kt_unref_all(in + 1, 3);
    kt_node_free(&node);
    return s;
}

/* StridedSliceGrad(shape, spec, dy); dy is borrowed. */
static zf_status_t s_strided_slice_grad(zf_shape_t shape, const spec_t *sp, zf_tensor_t *dy,
                                        zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = s_spec_node("StridedSliceGrad", sp, zf_tensor_dtype(dy), 5);
    zf_tensor_t *in[5] = {s_vec64(shape.dims, shape.rank), s_vec64(sp->begin, sp->n),
                          s_vec64(sp->end, sp->n), s_vec64(sp->strides, sp->n), dy};
    zf_status_t s = kt_run(node, in, 5, out, 1);
    kt_unref_all(in, 4);
    kt_node_free(&node);
    return s;
}

/* ---- StridedSlice ------------------------------------------------------------------------ */

/* x[i, j, k] = 12 i + 4 j + k over [2, 3, 4]. */
static void test_strided_slice_with_masks_and_negative_strides(void **state)
{
    (void)state;
    zf_tensor_t *x = s_iota(ZF_SHAPE(2, 3, 4)), *out = NULL;
    /* x[1, -1:0:-1, ::2] */
    spec_t a = {3, {1, -1, 0}, {2, 0, 0}, {1, -1, 2}, {[M_END] = 4, [M_SHRINK] = 1}};
    ASSERT_OK(s_strided_slice(x, &a, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2), 20, 22, 16, 18);
    zf_tensor_unref(&out);
    /* x[..., newaxis, 1] */
    spec_t b = {
        3, {0, 0, 1}, {0, 0, 2}, {1, 1, 1}, {[M_ELLIPSIS] = 1, [M_NEW_AXIS] = 2, [M_SHRINK] = 4}};
    ASSERT_OK(s_strided_slice(x, &b, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 3, 1), 1, 5, 9, 13, 17, 21);
    zf_tensor_unref(&out);
    /* x[::-1, 1] with an ellipsis implied at the end, begin/end masked */
    spec_t c = {2, {7, 1}, {7, 2}, {-1, 1}, {[M_BEGIN] = 1, [M_END] = 1, [M_SHRINK] = 2}};
    ASSERT_OK(s_strided_slice(x, &c, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 4), 16, 17, 18, 19, 4, 5, 6, 7);
    zf_tensor_unref(&out);
    /* x[newaxis, 0, ..., -1]: new axis first, shrink before and after the ellipsis */
    spec_t d = {4,
                {0, 0, 0, -1},
                {1, 1, 0, 0},
                {1, 1, 1, 1},
                {[M_ELLIPSIS] = 4, [M_NEW_AXIS] = 1, [M_SHRINK] = 10}};
    ASSERT_OK(s_strided_slice(x, &d, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(1, 3), 3, 7, 11);
    zf_tensor_unref(&out);
    /* out-of-range begin and end clamp; int64 extremes do not overflow */
    spec_t e = {3, {INT64_MIN, -100, 3}, {INT64_MAX, 100, INT64_MIN}, {1, 2, -3}, {0}};
    ASSERT_OK(s_strided_slice(x, &e, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2, 2), 3, 0, 11, 8, 15, 12, 23, 20);
    zf_tensor_unref(&out);
    /* an empty range: x[1:1], and a step going the wrong way */
    spec_t f = {2, {1, 0}, {1, 3}, {1, -1}, {0}};
    ASSERT_OK(s_strided_slice(x, &f, &out));
    kt_expect_shape(out, ZF_SHAPE(0, 0, 4));
    zf_tensor_unref(&out);
    zf_tensor_unref(&x);
    /* a scalar with an empty spec is itself; with a new axis, a vector */
    x = KT_F32(zf_shape_scalar(), 2.5f);
    spec_t g = {0, {0}, {0}, {0}, {0}};
    ASSERT_OK(s_strided_slice(x, &g, &out));
    KT_EXPECT_NEAR(out, zf_shape_scalar(), 0, 2.5);
    zf_tensor_unref(&out);
    spec_t h = {1, {0}, {1}, {1}, {[M_NEW_AXIS] = 1}};
    ASSERT_OK(s_strided_slice(x, &h, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(1), 0, 2.5);
    zf_tensor_unref(&out);
    zf_tensor_unref(&x);
}

/* The positions Python's slice b:e:s visits in a dim of size dim, stepping
 * from the clamped start (bm, em: begin or end left out). */
static int s_python_slice(int64_t dim, int64_t b, int64_t e, int64_t s, bool bm, bool em,
                          int64_t *pos)
{
    int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? dim : dim - 1;
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    int64_t start = bm ? (s > 0 ? lo : hi) : b < lo ? lo : b > hi ? hi : b;
    int64_t stop = em ? (s > 0 ? hi : lo) : e < lo ? lo : e > hi ? hi : e;
    int n = 0;
    for (int64_t i = start; s > 0 ? i < stop : i > stop; i += s) pos[n++] = i;
    return n;
}

static void test_strided_slice_matches_python_slicing(void **state)
{
    (void)state;
    const int64_t dims[3] = {5, 4, 6};
    zf_tensor_t *x = s_iota(ZF_SHAPE(5, 4, 6));
    uint32_t r = 12345u;
    for (int trial = 0; trial < 300; trial++) {
        spec_t sp = {3, {0}, {0}, {0}, {0}};
        int64_t pos[3][8];
        int cnt[3];
        for (int k = 0; k < 3; k++) {
            r = r * 1664525u + 1013904223u;
            sp.begin[k] = (int64_t)(r >> 8) % 15 - 7;
            sp.end[k] = (int64_t)(r >> 12) % 15 - 7;
            sp.strides[k] = (int64_t)(r >> 16) % 7 - 3;
            if (sp.strides[k] == 0) sp.strides[k] = 1;
            if (r >> 20 & 1u) sp.masks[M_BEGIN] |= 1 << k;
            if (r >> 21 & 1u) sp.masks[M_END] |= 1 << k;
            cnt[k] = s_python_slice(dims[k], sp.begin[k], sp.end[k], sp.strides[k],
                                    sp.masks[M_BEGIN] >> k & 1, sp.masks[M_END] >> k & 1, pos[k]);
        }
        zf_tensor_t *out = NULL;
        ASSERT_OK(s_strided_slice(x, &sp, &out));
        kt_expect_shape(out, zf_shape_of(3, (const int64_t[]){cnt[0], cnt[1], cnt[2]}));
        const int32_t *o = zf_tensor_data(out);
        int64_t at = 0;
        for (int i = 0; i < cnt[0]; i++)
            for (int j = 0; j < cnt[1]; j++)
                for (int k = 0; k < cnt[2]; k++, at++)
                    if (o[at] != (pos[0][i] * 4 + pos[1][j]) * 6 + pos[2][k])
                        fail_msg("trial %d: element %lld is %d", trial, (long long)at, o[at]);
        zf_tensor_unref(&out);
    }
    zf_tensor_unref(&x);
}

static void test_strided_slice_reports_bad_specs(void **state)
{
    (void)state;
    zf_tensor_t *x = s_iota(ZF_SHAPE(2, 3, 4)), *out = NULL;
    struct {
        spec_t sp;
        const char *msg;
    } cases[] = {
        {{1, {0}, {1}, {0}, {0}}, "ss (StridedSlice): strides[0] must be non-zero"},
        {{2, {0, 0}, {1, 1}, {1, 1}, {[M_ELLIPSIS] = 3}},
         "Multiple ellipses in slice spec not allowed"},
        {{1, {5}, {6}, {1}, {[M_SHRINK] = 1}}, "slice index 5 of dimension 0 out of bounds."},
        {{1, {-3}, {-2}, {1}, {[M_SHRINK] = 1}}, "slice index -3 of dimension 0 out of bounds."},
        {{1, {0}, {1}, {-1}, {[M_SHRINK] = 1}}, "only stride 1 allowed on non-range indexing."},
        {{4, {0, 0, 0, 0}, {1, 1, 1, 1}, {1, 1, 1, 1}, {0}},
         "Index out of range using input dim 3; input has only 3 dims"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zf_test_expect_error(s_strided_slice(x, &cases[i].sp, &out), ZF_INVALID_ARGUMENT,
                             cases[i].msg);
        assert_null(out);
    }
    Tensorflow__NodeDef *node = kt_node_new("ss", "StridedSlice", 4);
    kt_attr_type(node, "T", ZF_INT32);
    zf_tensor_t *in[4] = {x, KT_I64(ZF_SHAPE(2), 0, 0), KT_I64(ZF_SHAPE(3), 1, 1, 1),
                          KT_I64(ZF_SHAPE(2), 1, 1)};
    zf_test_expect_error(kt_run(node, in, 4, &out, 1), ZF_INVALID_ARGUMENT,
                         "Expected begin, end, and strides to be 1D equal size tensors, but got "
                         "shapes [2], [3], and [2] instead.");
    kt_unref_all(in + 1, 3);
    kt_node_free(&node);
    zf_tensor_unref(&x);
}

/* ---- StridedSliceGrad -------------------------------------------------------------------- */

static double s_dot(const zf_tensor_t *a, const zf_tensor_t *b)
{
    const double *pa = zf_tensor_data(a), *pb = zf_tensor_data(b);
    double s = 0;
    for (int64_t i = 0; i < zf_tensor_num_elements(a); i++) s += pa[i] * pb[i];
    return s;
}

static void test_strided_slice_grad_is_the_adjoint(void **state)
{
    (void)state;
    zf_shape_t shape = ZF_SHAPE(4, 5, 6);
    const spec_t specs[] = {
        {3, {1, -1, 0}, {3, 0, 0}, {1, -2, 2}, {[M_END] = 4}},
        {2, {0, 1}, {0, 2}, {1, 1}, {[M_ELLIPSIS] = 1, [M_SHRINK] = 2}},
        {3, {3, 0, -1}, {0, 0, 0}, {-1, 1, -1}, {[M_BEGIN] = 2, [M_END] = 6, [M_NEW_AXIS] = 0}},
        {4,
         {0, 2, 0, 5},
         {0, 3, 0, 6},
         {1, 1, 1, 1},
         {[M_NEW_AXIS] = 1, [M_ELLIPSIS] = 4, [M_SHRINK] = 10}},
        {1, {-1}, {-5}, {-1}, {0}},
        {1, {2}, {1}, {1}, {0}}, /* empty */
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        zf_tensor_t *x = s_random_f64(shape, (uint32_t)i), *y = NULL, *z = NULL;
        ASSERT_OK(s_strided_slice(x, &specs[i], &y));
        zf_tensor_t *g = s_random_f64(*zf_tensor_shape(y), (uint32_t)(100 + i));
        ASSERT_OK(s_strided_slice_grad(shape, &specs[i], g, &z));
        kt_expect_shape(z, shape);
        double lhs = s_dot(y, g), rhs = s_dot(x, z);
        if (fabs(lhs - rhs) > 1e-9 * (1 + fabs(lhs))) fail_msg("spec %zu: %g != %g", i, lhs, rhs);
        /* and the gradient is zero outside the slice: x of ones gives its size */
        zf_tensor_t *ones = kt_zeros(ZF_DOUBLE, shape);
        double *po = zf_tensor_data(ones);
        for (int64_t k = 0; k < zf_tensor_num_elements(ones); k++) po[k] = 1;
        double sum = s_dot(ones, z), gsum = 0;
        const double *pg = zf_tensor_data(g);
        for (int64_t k = 0; k < zf_tensor_num_elements(g); k++) gsum += pg[k];
        if (fabs(sum - gsum) > 1e-9 * (1 + fabs(gsum)))
            fail_msg("spec %zu: mass %g != %g", i, sum, gsum);
        kt_unref_all((zf_tensor_t *[]){x, y, z, g, ones}, 5);
    }
}

static void test_strided_slice_grad_checks_dy(void **state)
{
    (void)state;
    spec_t sp = {1, {1}, {3}, {1}, {0}};
    zf_tensor_t *dy = kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 2)), *out = NULL;
    zf_test_expect_error(s_strided_slice_grad(ZF_SHAPE(4, 2), &sp, dy, &out), ZF_INVALID_ARGUMENT,
                         "ss (StridedSliceGrad): shape of dy was [3,2] instead of [2,2]");
    zf_tensor_unref(&dy);
    dy = KT_F32(ZF_SHAPE(2, 2), 1, 2, 3, 4);
    ASSERT_OK(s_strided_slice_grad(ZF_SHAPE(4, 2), &sp, dy, &out));
    KT_EXPECT_NEAR(out, ZF_SHAPE(4, 2), 0, 0, 0, 1, 2, 3, 4, 0, 0);
    zf_tensor_unref(&out);
    zf_test_expect_error(s_strided_slice_grad(ZF_SHAPE(-1, 2), &sp, dy, &out), ZF_INVALID_ARGUMENT,
                         "shape[0] = -1 must be non-negative");
    zf_tensor_unref(&dy);
}

/* ---- Slice ------------------------------------------------------------------------------- */

static zf_status_t s_slice(zf_tensor_t *x, zf_tensor_t *begin, zf_tensor_t *size, zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("sl", "Slice", 3);
    kt_attr_type(node, "T", zf_tensor_dtype(x));
    zf_tensor_t *in[3] = {x, begin, size};
    zf_status_t s = kt_run(node, in, 3, out, 1);
    kt_unref_all(in, 3);
    kt_node_free(&node);
    return s;
}

static void test_slice_takes_a_box_and_size_minus_one_runs_to_the_end(void **state)
{
    (void)state;
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_slice(s_iota(ZF_SHAPE(3, 4)), KT_I32(ZF_SHAPE(2), 1, 1), KT_I32(ZF_SHAPE(2), -1, 2),
                      &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(2, 2), 5, 6, 9, 10);
    zf_tensor_unref(&out);
    ASSERT_OK(s_slice(s_iota(ZF_SHAPE(3, 4)), KT_I64(ZF_SHAPE(2), 3, 0), KT_I64(ZF_SHAPE(2), 0, -1),
                      &out));
    kt_expect_shape(out, ZF_SHAPE(0, 4));
    zf_tensor_unref(&out);
    ASSERT_OK(s_slice(KT_F32(zf_shape_scalar(), 4), kt_zeros(ZF_INT32, ZF_SHAPE(0)),
                      kt_zeros(ZF_INT32, ZF_SHAPE(0)), &out));
    KT_EXPECT_NEAR(out, zf_shape_scalar(), 0, 4);
    zf_tensor_unref(&out);
    zf_test_expect_error(
        s_slice(s_iota(ZF_SHAPE(3, 4)), KT_I32(ZF_SHAPE(2), 1, 2), KT_I32(ZF_SHAPE(2), 1, 3), &out),
        ZF_INVALID_ARGUMENT, "sl (Slice): Expected size[1] in [0, 2], but got 3");
    zf_test_expect_error(s_slice(s_iota(ZF_SHAPE(3, 4)), KT_I32(ZF_SHAPE(2), -1, 0),
                                 KT_I32(ZF_SHAPE(2), 1, 1), &out),
                         ZF_INVALID_ARGUMENT, "Expected begin[0] in [0, 3], but got -1");
    zf_test_expect_error(
        s_slice(s_iota(ZF_SHAPE(3, 4)), KT_I32(ZF_SHAPE(1), 0), KT_I32(ZF_SHAPE(2), 1, 1), &out),
        ZF_INVALID_ARGUMENT,
        "Expected begin and size arguments to be 1-D tensors of size 2, but got "
        "shapes [1] and [2] instead.");
    assert_null(out);
}

/* ---- Split, SplitV, Unpack --------------------------------------------------------------- */

static zf_status_t s_run_n(const char *op, zf_tensor_t **in, int n_in, zf_dtype_t t,
                           zf_tensor_t **out, int n_out)
{
    Tensorflow__NodeDef *node = kt_node_new("sp", op, n_in);
    kt_attr_type(node, "T", t);
    kt_attr_int(node, strcmp(op, "Unpack") == 0 ? "num" : "num_split", n_out);
    zf_status_t s = kt_run(node, in, n_in, out, n_out);
    kt_unref_all(in, n_in);
    kt_node_free(&node);
    return s;
}

static void test_split_cuts_equal_pieces_along_any_axis(void **state)
{
    (void)state;
    zf_tensor_t *out[8] = {NULL};
    zf_tensor_t *in[2] = {KT_I32(zf_shape_scalar(), -1), s_iota(ZF_SHAPE(2, 6))};
    ASSERT_OK(s_run_n("Split", in, 2, ZF_INT32, out, 3));
    KT_EXPECT_INTS(out[0], ZF_SHAPE(2, 2), 0, 1, 6, 7);
    KT_EXPECT_INTS(out[1], ZF_SHAPE(2, 2), 2, 3, 8, 9);
    KT_EXPECT_INTS(out[2], ZF_SHAPE(2, 2), 4, 5, 10, 11);
    kt_unref_all(out, 3);
    in[0] = KT_I32(zf_shape_scalar(), 0);
    in[1] = s_iota(ZF_SHAPE(2, 6));
    ASSERT_OK(s_run_n("Split", in, 2, ZF_INT32, out, 2));
    KT_EXPECT_INTS(out[1], ZF_SHAPE(1, 6), 6, 7, 8, 9, 10, 11);
    kt_unref_all(out, 2);
    in[0] = KT_I32(zf_shape_scalar(), 1);
    in[1] = s_iota(ZF_SHAPE(2, 6));
    zf_test_expect_error(s_run_n("Split", in, 2, ZF_INT32, out, 4), ZF_INVALID_ARGUMENT,
                         "Number of ways to split should evenly divide the split dimension, but "
                         "got split_dim 1 (size = 6) and num_split 4");
    in[0] = KT_I32(zf_shape_scalar(), 2);
    in[1] = s_iota(ZF_SHAPE(2, 6));
    zf_test_expect_error(s_run_n("Split", in, 2, ZF_INT32, out, 2), ZF_INVALID_ARGUMENT,
                         "-input rank(-2) <= split_dim < input rank (2), but got 2");
    in[0] = KT_I32(zf_shape_scalar(), 0);
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3));
    ASSERT_OK(s_run_n("Split", in, 2, ZF_FLOAT, out, 2));
    kt_expect_shape(out[0], ZF_SHAPE(0, 3));
    kt_unref_all(out, 2);
}

static void test_splitv_takes_sizes_with_one_inferred(void **state)
{
    (void)state;
    zf_tensor_t *out[8] = {NULL};
    zf_tensor_t *in[3] = {s_iota(ZF_SHAPE(2, 6)), KT_I64(ZF_SHAPE(3), 1, -1, 2),
                          KT_I32(zf_shape_scalar(), 1)};
    ASSERT_OK(s_run_n("SplitV", in, 3, ZF_INT32, out, 3));
    KT_EXPECT_INTS(out[0], ZF_SHAPE(2, 1), 0, 6);
    KT_EXPECT_INTS(out[1], ZF_SHAPE(2, 3), 1, 2, 3, 7, 8, 9);
    KT_EXPECT_INTS(out[2], ZF_SHAPE(2, 2), 4, 5, 10, 11);
    kt_unref_all(out, 3);
    struct {
        zf_tensor_t *sizes;
        const char *msg;
    } cases[] = {
        {KT_I32(ZF_SHAPE(3), -1, -1, 2), "There can only be one -1 in the input."},
        {KT_I32(ZF_SHAPE(3), 1, 2, 2), "Determined shape must either match input shape along "
                                       "split_dim exactly if fully specified, or be less than the "
                                       "size of the input along split_dim if not fully specified."
                                       "  Got: 5"},
        {KT_I32(ZF_SHAPE(3), 1, -3, 2), "Split size at index 1 must be >= 0. Got: -3"},
        {KT_I32(ZF_SHAPE(2), 3, 3), "size of the split_tensor must be 1-D and have the same "
                                    "elements as outputs got 1 -D and 2 elements"},
        {KT_I64(ZF_SHAPE(3), INT64_MAX, INT64_MAX, -1), "Got: 7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zf_tensor_t *bad[3] = {s_iota(ZF_SHAPE(2, 6)), cases[i].sizes,
                               KT_I32(zf_shape_scalar(), 1)};
        zf_test_expect_error(s_run_n("SplitV", bad, 3, ZF_INT32, out, 3), ZF_INVALID_ARGUMENT,
                             cases[i].msg);
    }
}

static void test_unpack_drops_the_axis(void **state)
{
    (void)state;
    zf_tensor_t *out[8] = {NULL};
    Tensorflow__NodeDef *node = kt_node_new("up", "Unpack", 1);
    kt_attr_type(node, "T", ZF_INT32);
    kt_attr_int(node, "num", 3);
    kt_attr_int(node, "axis", -1);
    zf_tensor_t *x = s_iota(ZF_SHAPE(2, 3));
    ASSERT_OK(kt_run(node, &x, 1, out, 3));
    KT_EXPECT_INTS(out[0], ZF_SHAPE(2), 0, 3);
    KT_EXPECT_INTS(out[1], ZF_SHAPE(2), 1, 4);
    KT_EXPECT_INTS(out[2], ZF_SHAPE(2), 2, 5);
    kt_unref_all(out, 3);
    zf_test_expect_error(kt_run(node, &x, 1, out, 2), ZF_INVALID_ARGUMENT,
                         "up (Unpack): Input shape axis 1 must equal 2, got shape [2,3]");
    kt_node_free(&node);
    node = kt_node_new("up", "Unpack", 1);
    kt_attr_type(node, "T", ZF_INT32);
    kt_attr_int(node, "axis", 2);
    zf_test_expect_error(kt_run(node, &x, 1, out, 2), ZF_INVALID_ARGUMENT,
                         "axis = 2 not in [-2, 2)");
    kt_node_free(&node);
    zf_tensor_unref(&x);
}

/* Empty tensors whose other dims multiply past int64. */
static void test_slicing_empty_tensors_with_huge_dims(void **state)
{
    (void)state;
    zf_tensor_t *x = kt_zeros(ZF_FLOAT, ZF_SHAPE((1LL << 62), 8, 0)), *out[2] = {NULL, NULL};
    zf_tensor_t *in[2] = {KT_I32(zf_shape_scalar(), 1), zf_tensor_ref(x)};
    ASSERT_OK(s_run_n("Split", in, 2, ZF_FLOAT, out, 2));
    kt_expect_shape(out[1], ZF_SHAPE((1LL << 62), 4, 0));
    kt_unref_all(out, 2);
    spec_t sp = {2, {1, 0}, {-1, 8}, {1, 3}, {0}};
    ASSERT_OK(s_strided_slice(x, &sp, &out[0]));
    kt_expect_shape(out[0], ZF_SHAPE((1LL << 62) - 2, 3, 0));
    zf_tensor_unref(&out[0]);
    zf_tensor_unref(&x);
}

/* ---- in a session ------------------------------------------------------------------------ */

/* x[:, 1::2] split in three, x[:, [5]], and x unpacked by rows, as one graph. */
static const char s_graph[] =
    "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'b' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } } "
    "int_val: 0 int_val: 1 } } } }\n"
    "node { name: 'e' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } } "
    "int_val: 0 int_val: 0 } } } }\n"
    "node { name: 's' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } } "
    "int_val: 1 int_val: 2 } } } }\n"
    "node { name: 'one' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 1 } } } }\n"
    "node { name: 'idx' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    " attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } } "
    "int_val: 5 } } } }\n"
    "node { name: 'ss' op: 'StridedSlice' input: 'x' input: 'b' input: 'e' input: 's'"
    " attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'Index' value { type: DT_INT32 } }"
    " attr { key: 'begin_mask' value { i: 1 } } attr { key: 'end_mask' value { i: 3 } } }\n"
    "node { name: 'sp' op: 'Split' input: 'one' input: 'ss'"
    " attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'num_split' value { i: 3 } } }\n"
    "node { name: 'g' op: 'GatherV2' input: 'x' input: 'idx' input: 'one'"
    " attr { key: 'Tparams' value { type: DT_FLOAT } }"
    " attr { key: 'Tindices' value { type: DT_INT32 } }"
    " attr { key: 'Taxis' value { type: DT_INT32 } } }\n"
    "node { name: 'up' op: 'Unpack' input: 'x'"
    " attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'num' value { i: 2 } } }\n";

static void test_slicing_ops_run_in_a_session(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(s_graph, strlen(s_graph), ZF_FORMAT_PBTXT, &gd));
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    zf_local_session_t *sess = NULL;
    ASSERT_OK(zf_local_session_new(gd, &opts, &sess));
    zf_tensor_t *x = KT_F32(ZF_SHAPE(2, 6), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    const char *fetches[] = {"sp:1", "g", "up:1"};
    zf_tensor_t *out[3] = {NULL, NULL, NULL};
    ASSERT_OK(zf_local_session_run(sess, (const char *[]){"x"}, &x, 1, fetches, 3, NULL, 0, out));
    KT_EXPECT_NEAR(out[0], ZF_SHAPE(2, 1), 0, 3, 9);
    KT_EXPECT_NEAR(out[1], ZF_SHAPE(2, 1), 0, 5, 11);
    KT_EXPECT_NEAR(out[2], ZF_SHAPE(6), 0, 6, 7, 8, 9, 10, 11);
    kt_unref_all(out, 3);
    zf_tensor_unref(&x);
    zf_local_session_destroy(&sess);
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strided_slice_with_masks_and_negative_strides),
        cmocka_unit_test(test_strided_slice_matches_python_slicing),
        cmocka_unit_test(test_strided_slice_reports_bad_specs),
        cmocka_unit_test(test_strided_slice_grad_is_the_adjoint),
        cmocka_unit_test(test_strided_slice_grad_checks_dy),
        cmocka_unit_test(test_slice_takes_a_box_and_size_minus_one_runs_to_the_end),
        cmocka_unit_test(test_split_cuts_equal_pieces_along_any_axis),
        cmocka_unit_test(test_splitv_takes_sizes_with_one_inferred),
        cmocka_unit_test(test_unpack_drops_the_axis),
        cmocka_unit_test(test_slicing_empty_tensors_with_huge_dims),
        cmocka_unit_test(test_slicing_ops_run_in_a_session),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
