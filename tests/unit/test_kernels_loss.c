/* Tests for executor/kernels/kernels_loss: SoftmaxCrossEntropyWithLogits
 * (with broadcasting), SparseSoftmaxCrossEntropyWithLogits and L2Loss —
 * values against a reference computed here in double, backprops against
 * central finite differences of the loss, stability for large logits,
 * edge shapes and error texts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

/* Runs op(logits, labels) (taken) into loss and backprop. */
static zf_status_t s_xent(const char *op, zf_tensor_t *logits, zf_tensor_t *labels,
                          zf_tensor_t **loss, zf_tensor_t **backprop)
{
    Tensorflow__NodeDef *n = kt_node_new("xent", op, 2);
    kt_attr_type(n, "T", zf_tensor_dtype(logits));
    kt_attr_type(n, "Tlabels", zf_tensor_dtype(labels));
    zf_tensor_t *in[2] = {logits, labels}, *out[2] = {NULL, NULL};
    zf_status_t s = kt_run(n, in, 2, out, 2);
    kt_unref_all(in, 2);
    kt_node_free(&n);
    *loss = out[0];
    *backprop = out[1];
    return s;
}

/* The loss of one row and its backprop, straight from the definitions:
 * -sum(p * log(softmax(x))) and softmax(x) - p. */
static double s_ref_row(const double *x, const double *p, int c, double *bp)
{
    double z = 0;
    for (int k = 0; k < c; k++) z += exp(x[k]);
    double loss = 0;
    for (int k = 0; k < c; k++) {
        loss -= p[k] * log(exp(x[k]) / z);
        if (bp) bp[k] = exp(x[k]) / z - p[k];
    }
    return loss;
}

static const double *s_d(const zf_tensor_t *t)
{
    return zf_tensor_data(t);
}

/* Runs op and checks loss [rows] and backprop [rows, 3] within tol. */
static void s_expect_xent(const char *op, zf_tensor_t *logits, zf_tensor_t *labels, int64_t rows,
                          const double *want_loss, const double *want_bp, double tol)
{
    zf_tensor_t *loss = NULL, *bp = NULL;
    ASSERT_OK(s_xent(op, logits, labels, &loss, &bp));
    kt_expect_near(loss, ZF_SHAPE(rows), want_loss, tol);
    kt_expect_near(bp, ZF_SHAPE(rows, 3), want_bp, tol);
    zf_tensor_unref(&loss);
    zf_tensor_unref(&bp);
}

/* ---- SoftmaxCrossEntropyWithLogits ------------------------------------------------------ */

static void test_xent_matches_the_definition(void **state)
{
    (void)state;
    const double x[6] = {1, 2, 3, -1, 0.5, 0}, p[6] = {0, 0, 1, 0.25, 0.25, 0.5};
    double want_loss[2], want_bp[6];
    for (int r = 0; r < 2; r++) want_loss[r] = s_ref_row(x + 3 * r, p + 3 * r, 3, want_bp + 3 * r);
    s_expect_xent("SoftmaxCrossEntropyWithLogits", kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), x, 6),
                  kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), p, 6), 2, want_loss, want_bp, 1e-12);
    float xf[6], pf[6];
    for (int i = 0; i < 6; i++) {
        xf[i] = (float)x[i];
        pf[i] = (float)p[i];
    }
    s_expect_xent("SoftmaxCrossEntropyWithLogits", kt_tensor(ZF_FLOAT, ZF_SHAPE(2, 3), xf, 6),
                  kt_tensor(ZF_FLOAT, ZF_SHAPE(2, 3), pf, 6), 2, want_loss, want_bp, 1e-6);
}

static void test_xent_broadcasts_labels_and_logits(void **state)
{
    (void)state;
    /* one label row for two logit rows */
    const double x[6] = {1, 2, 3, 0, 0, 4}, p[3] = {0.5, 0, 0.5};
    double want_loss[2], want_bp[6];
    for (int r = 0; r < 2; r++) want_loss[r] = s_ref_row(x + 3 * r, p, 3, want_bp + 3 * r);
    s_expect_xent("SoftmaxCrossEntropyWithLogits", kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), x, 6),
                  kt_tensor(ZF_DOUBLE, ZF_SHAPE(1, 3), p, 3), 2, want_loss, want_bp, 1e-12);
    /* a logits vector against two label rows */
    const double q[6] = {1, 0, 0, 0, 0, 1};
    for (int r = 0; r < 2; r++) want_loss[r] = s_ref_row(x, q + 3 * r, 3, want_bp + 3 * r);
    s_expect_xent("SoftmaxCrossEntropyWithLogits", kt_tensor(ZF_DOUBLE, ZF_SHAPE(3), x, 3),
                  kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), q, 6), 2, want_loss, want_bp, 1e-12);
}

static void test_xent_is_stable_for_large_logits(void **state)
{
    (void)state;
    zf_tensor_t *loss = NULL, *bp = NULL;
    ASSERT_OK(s_xent("SoftmaxCrossEntropyWithLogits", KT_F32(ZF_SHAPE(1, 2), 1000, 1000),
                     KT_F32(ZF_SHAPE(1, 2), 1, 0), &loss, &bp));
    KT_EXPECT_NEAR(loss, ZF_SHAPE(1), 1e-6, log(2));
    KT_EXPECT_NEAR(bp, ZF_SHAPE(1, 2), 1e-6, -0.5, 0.5);
    zf_tensor_unref(&loss);
    zf_tensor_unref(&bp);
    ASSERT_OK(s_xent("SparseSoftmaxCrossEntropyWithLogits", KT_F64(ZF_SHAPE(1, 2), -1000, 0),
                     KT_I32(ZF_SHAPE(1), 0), &loss, &bp));
    KT_EXPECT_NEAR(loss, ZF_SHAPE(1), 1e-9, 1000);
    KT_EXPECT_NEAR(bp, ZF_SHAPE(1, 2), 1e-12, -1, 1);
    zf_tensor_unref(&loss);
    zf_tensor_unref(&bp);
}

/* d loss / d logits by central differences, for the dense and sparse forms. */
static void test_backprop_matches_finite_differences(void **state)
{
    (void)state;
    const double x[6] = {0.3, -1.2, 2.0, 0.7, 0.1, -0.4}, p[6] = {0.2, 0.3, 0.5, 1, 0, 0};
    const int64_t idx[2] = {2, 0};
    const double h = 1e-6;
    for (int sparse = 0; sparse < 2; sparse++) {
        const char *op =
            sparse ? "SparseSoftmaxCrossEntropyWithLogits" : "SoftmaxCrossEntropyWithLogits";
        zf_tensor_t *loss = NULL, *bp = NULL;
        zf_tensor_t *labels = sparse ? kt_tensor(ZF_INT64, ZF_SHAPE(2), idx, 2)
                                     : kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), p, 6);
        ASSERT_OK(s_xent(op, kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), x, 6), labels, &loss, &bp));
        for (int i = 0; i < 6; i++) {
            double xp[6], xm[6];
            memcpy(xp, x, sizeof xp);
            memcpy(xm, x, sizeof xm);
            xp[i] += h;
            xm[i] -= h;
            zf_tensor_t *lp = NULL, *lm = NULL, *b1 = NULL, *b2 = NULL;
            ASSERT_OK(s_xent(op, kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), xp, 6),
                             sparse ? kt_tensor(ZF_INT64, ZF_SHAPE(2), idx, 2)
                                    : kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), p, 6),
                             &lp, &b1));
            ASSERT_OK(s_xent(op, kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), xm, 6),
                             sparse ? kt_tensor(ZF_INT64, ZF_SHAPE(2), idx, 2)
                                    : kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), p, 6),
                             &lm, &b2));
            double fd = (s_d(lp)[i / 3] - s_d(lm)[i / 3]) / (2 * h);
            if (fabs(fd - s_d(bp)[i]) > 1e-6)
                fail_msg("%s: backprop[%d] %.10g, finite differences %.10g", op, i, s_d(bp)[i], fd);
            zf_tensor_t *tmp[4] = {lp, lm, b1, b2};
            kt_unref_all(tmp, 4);
        }
        zf_tensor_unref(&loss);
        zf_tensor_unref(&bp);
    }
}

static void test_xent_edge_shapes_and_errors(void **state)
{
    (void)state;
    zf_tensor_t *loss = NULL, *bp = NULL;
    ASSERT_OK(s_xent("SoftmaxCrossEntropyWithLogits", kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 4)),
                     kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 4)), &loss, &bp));
    kt_expect_shape(loss, ZF_SHAPE(0));
    kt_expect_shape(bp, ZF_SHAPE(0, 4));
    zf_tensor_unref(&loss);
    zf_tensor_unref(&bp);
    zf_test_expect_error(s_xent("SoftmaxCrossEntropyWithLogits", kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)),
                                kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 3)), &loss, &bp),
                         ZF_INVALID_ARGUMENT,
                         "xent (SoftmaxCrossEntropyWithLogits): logits and labels must be "
                         "broadcastable: logits_size=[2,3] labels_size=[4,3]");
    zf_test_expect_error(s_xent("SoftmaxCrossEntropyWithLogits", kt_zeros(ZF_FLOAT, ZF_SHAPE(3)),
                                kt_zeros(ZF_FLOAT, ZF_SHAPE(3)), &loss, &bp),
                         ZF_INVALID_ARGUMENT,
                         "logits and labels must be either 2-dimensional, or broadcasted to be "
                         "2-dimensional: logits_size=[3] labels_size=[3]");
    zf_test_expect_error(s_xent("SoftmaxCrossEntropyWithLogits",
                                kt_zeros(ZF_DOUBLE, ZF_SHAPE(1, 2, 3)),
                                kt_zeros(ZF_DOUBLE, ZF_SHAPE(1, 2, 3)), &loss, &bp),
                         ZF_INVALID_ARGUMENT, "or broadcasted to be 2-dimensional");
    zf_test_expect_error(s_xent("SoftmaxCrossEntropyWithLogits", kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)),
                                kt_zeros(ZF_DOUBLE, ZF_SHAPE(2, 3)), &loss, &bp),
                         ZF_INVALID_ARGUMENT, "input 1 must be float, got double");
    assert_null(loss);
    assert_null(bp);
}

/* ---- SparseSoftmaxCrossEntropyWithLogits -------------------------------------------------- */

static void test_sparse_xent_matches_the_definition(void **state)
{
    (void)state;
    const double x[6] = {1, 2, 3, -1, 0.5, 0};
    const double onehot[6] = {0, 1, 0, 0, 0, 1};
    double want_loss[2], want_bp[6];
    for (int r = 0; r < 2; r++)
        want_loss[r] = s_ref_row(x + 3 * r, onehot + 3 * r, 3, want_bp + 3 * r);
    for (int i64 = 0; i64 < 2; i64++) {
        zf_tensor_t *labels = i64 ? KT_I64(ZF_SHAPE(2), 1, 2) : KT_I32(ZF_SHAPE(2), 1, 2);
        s_expect_xent("SparseSoftmaxCrossEntropyWithLogits",
                      kt_tensor(ZF_DOUBLE, ZF_SHAPE(2, 3), x, 6), labels, 2, want_loss, want_bp,
                      1e-12);
    }
}

static void test_sparse_xent_refuses_labels_out_of_range(void **state)
{
    (void)state;
    zf_tensor_t *loss = NULL, *bp = NULL;
    zf_test_expect_error(s_xent("SparseSoftmaxCrossEntropyWithLogits",
                                kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 4)), KT_I32(ZF_SHAPE(3), 0, 4, 1),
                                &loss, &bp),
                         ZF_INVALID_ARGUMENT,
                         "xent (SparseSoftmaxCrossEntropyWithLogits): Received a label value of 4 "
                         "which is outside the valid range of [0, 4).  Label values: 0 4 1");
    zf_test_expect_error(s_xent("SparseSoftmaxCrossEntropyWithLogits",
                                kt_zeros(ZF_DOUBLE, ZF_SHAPE(2, 5)), KT_I64(ZF_SHAPE(2), -1, 2),
                                &loss, &bp),
                         ZF_INVALID_ARGUMENT,
                         "Received a label value of -1 which is outside the valid range of [0, 5)");
    assert_null(loss);
    assert_null(bp);
}

static void test_sparse_xent_checks_shapes(void **state)
{
    (void)state;
    zf_tensor_t *loss = NULL, *bp = NULL;
    const char *op = "SparseSoftmaxCrossEntropyWithLogits";
    zf_test_expect_error(
        s_xent(op, kt_zeros(ZF_FLOAT, ZF_SHAPE(3)), KT_I32(ZF_SHAPE(3), 0, 0, 0), &loss, &bp),
        ZF_INVALID_ARGUMENT, "logits must be 2-D, but got shape [3]");
    zf_test_expect_error(
        s_xent(op, kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 3)), KT_I32(ZF_SHAPE(1, 1), 0), &loss, &bp),
        ZF_INVALID_ARGUMENT, "labels must be 1-D, but got shape [1,1]");
    zf_test_expect_error(
        s_xent(op, kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), KT_I32(ZF_SHAPE(3), 0, 0, 0), &loss, &bp),
        ZF_INVALID_ARGUMENT,
        "logits and labels must have the same first dimension, got logits shape "
        "[2,3] and labels shape [3]");
    zf_test_expect_error(
        s_xent(op, kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 0)), KT_I32(ZF_SHAPE(1), 0), &loss, &bp),
        ZF_INVALID_ARGUMENT, "Must have at least one class, but got logits shape [1,0]");
    assert_null(loss);
    ASSERT_OK(s_xent(op, kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), kt_zeros(ZF_INT64, ZF_SHAPE(0)), &loss,
                     &bp));
    kt_expect_shape(loss, ZF_SHAPE(0));
    kt_expect_shape(bp, ZF_SHAPE(0, 3));
    zf_tensor_unref(&loss);
    zf_tensor_unref(&bp);
}

/* ---- L2Loss --------------------------------------------------------------------------- */

static zf_status_t s_l2(zf_tensor_t *x, zf_tensor_t **out)
{
    Tensorflow__NodeDef *n = kt_node_new("l2", "L2Loss", 1);
    kt_attr_type(n, "T", zf_tensor_dtype(x));
    zf_status_t s = kt_run(n, &x, 1, out, 1);
    zf_tensor_unref(&x);
    kt_node_free(&n);
    return s;
}

static void test_l2_loss_is_half_the_sum_of_squares(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_l2(KT_F32(ZF_SHAPE(2, 2), 1, -2, 3, 0.5f), &y));
    KT_EXPECT_NEAR(y, zf_shape_scalar(), 1e-7, (1 + 4 + 9 + 0.25) / 2);
    zf_tensor_unref(&y);
    ASSERT_OK(s_l2(KT_F64(zf_shape_scalar(), -3), &y));
    KT_EXPECT_NEAR(y, zf_shape_scalar(), 0, 4.5);
    zf_tensor_unref(&y);
    ASSERT_OK(s_l2(kt_zeros(ZF_DOUBLE, ZF_SHAPE(0, 7)), &y));
    KT_EXPECT_NEAR(y, zf_shape_scalar(), 0, 0);
    zf_tensor_unref(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xent_matches_the_definition),
        cmocka_unit_test(test_xent_broadcasts_labels_and_logits),
        cmocka_unit_test(test_xent_is_stable_for_large_logits),
        cmocka_unit_test(test_backprop_matches_finite_differences),
        cmocka_unit_test(test_xent_edge_shapes_and_errors),
        cmocka_unit_test(test_sparse_xent_matches_the_definition),
        cmocka_unit_test(test_sparse_xent_refuses_labels_out_of_range),
        cmocka_unit_test(test_sparse_xent_checks_shapes),
        cmocka_unit_test(test_l2_loss_is_half_the_sum_of_squares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
