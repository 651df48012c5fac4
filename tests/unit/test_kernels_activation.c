/* Tests for executor/kernels/kernels_activation: LeakyRelu, Selu, Softplus,
 * Softsign and the activation gradients — values against libm formulas,
 * gradients against central finite differences of their forward kernels,
 * integer gradients, edge shapes and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

#define S_N 9
/* Points away from every kink (0 and 6) and positive where Sqrt needs it. */
static const double s_xs[S_N] = {-7, -2.5, -1, -0.3, 0.2, 0.9, 2, 4.5, 8};
static const double s_pos[S_N] = {0.05, 0.3, 0.7, 1, 1.6, 2.5, 4, 9, 30};
static const double s_dy[S_N] = {0.5, -1.25, 2, 0.75, -0.5, 1, 3, -2, 0.25};

/* Runs op on n inputs (taken) with attr T, and alpha when alpha >= 0. */
static zf_status_t s_run(const char *op, zf_tensor_t **in, int n, double alpha, zf_tensor_t **out)
{
    Tensorflow__NodeDef *node = kt_node_new("act", op, n);
    kt_attr_type(node, "T", zf_tensor_dtype(in[0]));
    if (alpha >= 0) {
        Tensorflow__AttrValue *v = kt_attr_add(node, "alpha");
        v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
        v->f = (float)alpha;
    }
    zf_status_t s = kt_run(node, in, n, out, 1);
    kt_unref_all(in, n);
    kt_node_free(&node);
    return s;
}

static zf_tensor_t *s_run1(const char *op, zf_tensor_t *x, double alpha)
{
    zf_tensor_t *y = NULL;
    ASSERT_OK(s_run(op, &x, 1, alpha, &y));
    return y;
}

static zf_tensor_t *s_run2(const char *op, zf_tensor_t *a, zf_tensor_t *b, double alpha)
{
    zf_tensor_t *in[2] = {a, b}, *y = NULL;
    ASSERT_OK(s_run(op, in, 2, alpha, &y));
    return y;
}

static zf_tensor_t *s_f64(const double *v)
{
    return kt_tensor(ZF_DOUBLE, ZF_SHAPE(S_N), v, S_N);
}

static const double *s_data(const zf_tensor_t *t)
{
    return zf_tensor_data(t);
}

/* ---- references ---------------------------------------------------------------------------- */

#define S_SCALE       1.0507009873554804934193349852946
#define S_SCALE_ALPHA (1.6732632423543772848170429916717 * S_SCALE)

static double s_ref(const char *op, double x, double alpha)
{
    if (!strcmp(op, "LeakyRelu")) return x > 0 ? x : alpha * x;
    if (!strcmp(op, "Selu")) return x > 0 ? S_SCALE * x : S_SCALE_ALPHA * (exp(x) - 1);
    if (!strcmp(op, "Softplus")) return log(1 + exp(x));
    if (!strcmp(op, "Softsign")) return x / (1 + fabs(x));
    fail_msg("no reference for %s", op);
    return 0;
}

/* ---- forward ----------------------------------------------------------------------------- */

static void test_forward_activations_match_libm(void **state)
{
    (void)state;
    const char *ops[] = {"LeakyRelu", "Selu", "Softplus", "Softsign"};
    for (int k = 0; k < 4; k++) {
        double want[S_N];
        /* LeakyRelu's default alpha, a float attr */
        for (int i = 0; i < S_N; i++) want[i] = s_ref(ops[k], s_xs[i], (double)0.2f);
        zf_tensor_t *y = s_run1(ops[k], s_f64(s_xs), -1);
        kt_expect_near(y, ZF_SHAPE(S_N), want, 1e-12);
        zf_tensor_unref(&y);
        float xf[S_N];
        for (int i = 0; i < S_N; i++) xf[i] = (float)s_xs[i];
        y = s_run1(ops[k], kt_tensor(ZF_FLOAT, ZF_SHAPE(3, 3), xf, S_N), -1);
        kt_expect_near(y, ZF_SHAPE(3, 3), want, 1e-6);
        zf_tensor_unref(&y);
    }
}

static void test_leaky_relu_takes_its_alpha(void **state)
{
    (void)state;
    zf_tensor_t *y = s_run1("LeakyRelu", KT_F32(ZF_SHAPE(4), -10, -1, 0, 3), 0.01);
    KT_EXPECT_NEAR(y, ZF_SHAPE(4), 1e-7, -0.1, -0.01, 0, 3);
    zf_tensor_unref(&y);
    y = s_run2("LeakyReluGrad", KT_F64(ZF_SHAPE(3), 2, 2, 2), KT_F64(ZF_SHAPE(3), -1, 0, 1), 0.3);
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 1e-7, 0.6, 0.6, 2);
    zf_tensor_unref(&y);
}

static void test_softplus_is_stable_at_the_extremes(void **state)
{
    (void)state;
    zf_tensor_t *y = s_run1("Softplus", KT_F32(ZF_SHAPE(4), -100, -20, 20, 100), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(4), 1e-6, exp(-100), exp(-20), 20 + log1p(exp(-20)), 100);
    zf_tensor_unref(&y);
    y = s_run1("Softplus", KT_F64(ZF_SHAPE(3), -800, 0, 800), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 1e-12, 0, log(2), 800);
    zf_tensor_unref(&y);
}

/* ---- gradients --------------------------------------------------------------------------- */

static void test_gradients_compute_hand_checked_values(void **state)
{
    (void)state;
    zf_tensor_t *y = s_run2("ReluGrad", KT_F32(ZF_SHAPE(4), 1, 2, 3, 4),
                            KT_F32(ZF_SHAPE(4), -1, 0, 0.5f, 7), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(4), 0, 0, 0, 3, 4);
    zf_tensor_unref(&y);
    y = s_run2("Relu6Grad", KT_F32(ZF_SHAPE(5), 1, 2, 3, 4, 5),
               KT_F32(ZF_SHAPE(5), -1, 0, 0.5f, 6, 5.9f), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(5), 0, 0, 0, 3, 0, 5);
    zf_tensor_unref(&y);
    /* EluGrad reads outputs: g * (y + 1) below 0 */
    y = s_run2("EluGrad", KT_F64(ZF_SHAPE(3), 2, 2, 2), KT_F64(ZF_SHAPE(3), -0.5, 0, 3), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(3), 1e-12, 1, 2, 2);
    zf_tensor_unref(&y);
    y = s_run2("SigmoidGrad", KT_F64(ZF_SHAPE(2), 0.25, 0.5), KT_F64(ZF_SHAPE(2), 4, 2), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 1e-12, 0.75, 0.5);
    zf_tensor_unref(&y);
    y = s_run2("TanhGrad", KT_F64(ZF_SHAPE(2), 0.5, -1), KT_F64(ZF_SHAPE(2), 2, 3), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 1e-12, 1.5, 0);
    zf_tensor_unref(&y);
    y = s_run2("SqrtGrad", KT_F32(ZF_SHAPE(1), 2), KT_F32(ZF_SHAPE(1), 3), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(1), 1e-7, 0.75);
    zf_tensor_unref(&y);
    y = s_run2("RsqrtGrad", KT_F32(ZF_SHAPE(1), 0.5f), KT_F32(ZF_SHAPE(1), 4), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(1), 1e-7, -0.25);
    zf_tensor_unref(&y);
    y = s_run2("ReciprocalGrad", KT_F32(ZF_SHAPE(1), 0.5f), KT_F32(ZF_SHAPE(1), 4), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(1), 1e-7, -1);
    zf_tensor_unref(&y);
    y = s_run2("SoftsignGrad", KT_F32(ZF_SHAPE(2), 9, 9), KT_F32(ZF_SHAPE(2), -2, 0), -1);
    KT_EXPECT_NEAR(y, ZF_SHAPE(2), 1e-7, 1, 9);
    zf_tensor_unref(&y);
}

static void test_integer_relu_and_its_gradients(void **state)
{
    (void)state;
    zf_tensor_t *r = s_run1("Relu", KT_I32(ZF_SHAPE(4), INT32_MIN, -1, 0, 9), -1);
    KT_EXPECT_INTS(r, ZF_SHAPE(4), 0, 0, 0, 9);
    zf_tensor_unref(&r);
    r = s_run1("Relu6", KT_I64(ZF_SHAPE(2, 2), -4, 3, 6, INT64_MAX), -1);
    KT_EXPECT_INTS(r, ZF_SHAPE(2, 2), 0, 3, 6, 6);
    zf_tensor_unref(&r);
    zf_tensor_t *y =
        s_run2("ReluGrad", KT_I32(ZF_SHAPE(3), 5, 6, 7), KT_I32(ZF_SHAPE(3), -1, 0, 2), -1);
    KT_EXPECT_INTS(y, ZF_SHAPE(3), 0, 0, 7);
    zf_tensor_unref(&y);
    y = s_run2("Relu6Grad", KT_I64(ZF_SHAPE(4), 5, 6, 7, 8), KT_I64(ZF_SHAPE(4), -1, 3, 6, 9), -1);
    KT_EXPECT_INTS(y, ZF_SHAPE(4), 0, 6, 0, 0);
    zf_tensor_unref(&y);
}

/* How a gradient op reads the forward pass. */
typedef enum {
    S_FEATURES, /* (gradients, features) */
    S_OUTPUTS,  /* (gradients, outputs) */
    S_Y_DY,     /* (y, dy) */
} s_grad_kind_t;

typedef struct {
    const char *grad, *forward;
    s_grad_kind_t kind;
    bool positive; /* needs x > 0 */
    double alpha;  /* -1: none */
} s_grad_case_t;

/* grad(dy, x) against dy * (f(x + h) - f(x - h)) / 2h, f the forward kernel. */
static void s_check_finite_differences(const s_grad_case_t *c)
{
    const double *xs = c->positive ? s_pos : s_xs;
    const double h = 1e-6;
    double xp[S_N], xm[S_N];
    for (int i = 0; i < S_N; i++) {
        xp[i] = xs[i] + h;
        xm[i] = xs[i] - h;
    }
    zf_tensor_t *yp = s_run1(c->forward, s_f64(xp), c->alpha);
    zf_tensor_t *ym = s_run1(c->forward, s_f64(xm), c->alpha);
    double want[S_N];
    for (int i = 0; i < S_N; i++) want[i] = s_dy[i] * (s_data(yp)[i] - s_data(ym)[i]) / (2 * h);
    zf_tensor_t *g = NULL;
    if (c->kind == S_FEATURES) {
        g = s_run2(c->grad, s_f64(s_dy), s_f64(xs), c->alpha);
    } else {
        zf_tensor_t *y = s_run1(c->forward, s_f64(xs), c->alpha);
        g = c->kind == S_OUTPUTS ? s_run2(c->grad, s_f64(s_dy), y, c->alpha)
                                 : s_run2(c->grad, y, s_f64(s_dy), c->alpha);
    }
    for (int i = 0; i < S_N; i++)
        if (fabs(s_data(g)[i] - want[i]) > 1e-6 * (1 + fabs(want[i])))
            fail_msg("%s at x=%g: %.10g, finite differences %.10g", c->grad, xs[i], s_data(g)[i],
                     want[i]);
    zf_tensor_unref(&g);
    zf_tensor_unref(&yp);
    zf_tensor_unref(&ym);
}

static void test_gradients_match_finite_differences(void **state)
{
    (void)state;
    const s_grad_case_t cases[] = {
        {"ReluGrad", "Relu", S_FEATURES, false, -1},
        {"Relu6Grad", "Relu6", S_FEATURES, false, -1},
        {"LeakyReluGrad", "LeakyRelu", S_FEATURES, false, 0.15},
        {"EluGrad", "Elu", S_OUTPUTS, false, -1},
        {"SeluGrad", "Selu", S_OUTPUTS, false, -1},
        {"SigmoidGrad", "Sigmoid", S_Y_DY, false, -1},
        {"TanhGrad", "Tanh", S_Y_DY, false, -1},
        {"SoftplusGrad", "Softplus", S_FEATURES, false, -1},
        {"SoftsignGrad", "Softsign", S_FEATURES, false, -1},
        {"SqrtGrad", "Sqrt", S_Y_DY, true, -1},
        {"RsqrtGrad", "Rsqrt", S_Y_DY, true, -1},
        {"ReciprocalGrad", "Reciprocal", S_Y_DY, false, -1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        s_check_finite_differences(&cases[k]);
}

/* ---- edge shapes and errors ---------------------------------------------------------------- */

static void test_edge_shapes(void **state)
{
    (void)state;
    zf_tensor_t *y = s_run1("Selu", kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 0)), -1);
    kt_expect_shape(y, ZF_SHAPE(2, 0));
    zf_tensor_unref(&y);
    y = s_run1("Softsign", KT_F64(zf_shape_scalar(), -3), -1);
    KT_EXPECT_NEAR(y, zf_shape_scalar(), 1e-12, -0.75);
    zf_tensor_unref(&y);
    y = s_run2("TanhGrad", KT_F32(zf_shape_scalar(), 0.5f), KT_F32(zf_shape_scalar(), 2), -1);
    KT_EXPECT_NEAR(y, zf_shape_scalar(), 1e-7, 1.5);
    zf_tensor_unref(&y);
    y = s_run2("SoftplusGrad", kt_zeros(ZF_DOUBLE, ZF_SHAPE(0)), kt_zeros(ZF_DOUBLE, ZF_SHAPE(0)),
               -1);
    kt_expect_shape(y, ZF_SHAPE(0));
    zf_tensor_unref(&y);
}

static void test_errors_name_the_node_and_both_shapes(void **state)
{
    (void)state;
    zf_tensor_t *y = NULL;
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(3))};
    zf_test_expect_error(s_run("ReluGrad", in, 2, -1, &y), ZF_INVALID_ARGUMENT,
                         "act (ReluGrad): gradients and features must have the same shape: "
                         "[2,3] vs. [3]");
    zf_tensor_t *in2[2] = {kt_zeros(ZF_DOUBLE, ZF_SHAPE(2)), kt_zeros(ZF_DOUBLE, ZF_SHAPE(1, 2))};
    zf_test_expect_error(s_run("SigmoidGrad", in2, 2, -1, &y), ZF_INVALID_ARGUMENT,
                         "act (SigmoidGrad): y and dy must have the same shape: [2] vs. [1,2]");
    zf_tensor_t *in3[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2)), kt_zeros(ZF_FLOAT, ZF_SHAPE(3))};
    zf_test_expect_error(s_run("EluGrad", in3, 2, -1, &y), ZF_INVALID_ARGUMENT,
                         "gradients and outputs must have the same shape: [2] vs. [3]");
    zf_tensor_t *in4[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2)), kt_zeros(ZF_DOUBLE, ZF_SHAPE(2))};
    zf_test_expect_error(s_run("SoftsignGrad", in4, 2, -1, &y), ZF_INVALID_ARGUMENT,
                         "act (SoftsignGrad): input 1 must be float, got double");
    zf_tensor_t *in5[1] = {kt_zeros(ZF_INT32, ZF_SHAPE(2))};
    zf_tensor_t *in6[1] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2))};
    zf_status_t s = s_run("Softplus", in5, 1, -1, &y);
    assert_false(zf_ok(s));
    zf_status_clear(&s);
    zf_test_expect_error(s_run("SeluGrad", in6, 1, -1, &y), ZF_INVALID_ARGUMENT,
                         "act (SeluGrad): expects 2 inputs, got 1");
    assert_null(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_activations_match_libm),
        cmocka_unit_test(test_leaky_relu_takes_its_alpha),
        cmocka_unit_test(test_softplus_is_stable_at_the_extremes),
        cmocka_unit_test(test_gradients_compute_hand_checked_values),
        cmocka_unit_test(test_integer_relu_and_its_gradients),
        cmocka_unit_test(test_gradients_match_finite_differences),
        cmocka_unit_test(test_edge_shapes),
        cmocka_unit_test(test_errors_name_the_node_and_both_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
