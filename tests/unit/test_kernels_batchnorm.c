/* Tests for executor/kernels/kernels_batchnorm (oneDNN, float):
 * FusedBatchNorm, V2 and V3 in training (batch statistics, Bessel-corrected
 * running variance, exponential_avg_factor) and inference, NHWC and NCHW,
 * 4-D and 5-D, against loops in double written here; FusedBatchNormGrad,
 * V2 and V3 (training and frozen forms) against TensorFlow's gradient
 * formulas and against central finite differences of the forward kernel;
 * empty inputs and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

#define S_EPS 0.001

typedef struct {
    bool nchw;
    zf_shape_t xs; /* x's shape */
} s_layout_t;

static int s_channel_dim(const s_layout_t *l)
{
    return l->nchw ? 1 : l->xs.rank - 1;
}

static int64_t s_channels(const s_layout_t *l)
{
    return l->xs.dims[s_channel_dim(l)];
}

/* The channel of flat element i of x. */
static int64_t s_channel_of(const s_layout_t *l, int64_t i)
{
    int64_t inner = 1;
    for (int d = l->xs.rank - 1; d > s_channel_dim(l); d--) inner *= l->xs.dims[d];
    return (i / inner) % s_channels(l);
}

static double s_get(const zf_tensor_t *t, int64_t i)
{
    return ((const float *)zf_tensor_data(t))[i];
}

static void s_set(zf_tensor_t *t, int64_t i, double v)
{
    ((float *)zf_tensor_data(t))[i] = (float)v;
}

static void s_attr_float(Tensorflow__NodeDef *n, const char *key, double v)
{
    Tensorflow__AttrValue *a = kt_attr_add(n, key);
    a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
    a->f = (float)v;
}

static Tensorflow__NodeDef *s_node(const char *op, const s_layout_t *l, bool training,
                                   double factor)
{
    bool grad = strstr(op, "Grad") != NULL;
    Tensorflow__NodeDef *n = kt_node_new("bn", op, grad ? 6 : 5);
    kt_attr_type(n, "T", ZF_FLOAT);
    if (strcmp(op, "FusedBatchNorm") != 0 && strcmp(op, "FusedBatchNormGrad") != 0)
        kt_attr_type(n, "U", ZF_FLOAT);
    s_attr_float(n, "epsilon", S_EPS);
    if (!grad) s_attr_float(n, "exponential_avg_factor", factor);
    kt_attr_bool(n, "is_training", training);
    if (l->nchw) kt_attr_string(n, "data_format", l->xs.rank == 5 ? "NCDHW" : "NCHW");
    return n;
}

/* Per-channel mean and biased variance of x, in double. */
static void s_moments(const s_layout_t *l, const zf_tensor_t *x, double *mean, double *var)
{
    int64_t c = s_channels(l), n = zf_tensor_num_elements(x), per = n / c;
    for (int64_t k = 0; k < c; k++) mean[k] = var[k] = 0;
    for (int64_t i = 0; i < n; i++) mean[s_channel_of(l, i)] += s_get(x, i) / (double)per;
    for (int64_t i = 0; i < n; i++) {
        double d = s_get(x, i) - mean[s_channel_of(l, i)];
        var[s_channel_of(l, i)] += d * d / (double)per;
    }
}

static void s_expect(const char *what, const zf_tensor_t *t, const double *want, int64_t n,
                     double tol)
{
    assert_int_equal(zf_tensor_num_elements(t), n);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(s_get(t, i) - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s [%lld]: %.9g vs %.9g", what, (long long)i, s_get(t, i), want[i]);
}

/* ---- forward ------------------------------------------------------------------------------ */

/* Runs op (5 or 6 outputs) and checks every output against loops. */
static void s_check_forward(const char *op, const s_layout_t *l, bool training, double factor,
                            zf_device_t *dev)
{
    int64_t c = s_channels(l);
    int outs = strcmp(op, "FusedBatchNormV3") == 0 ? 6 : 5;
    zf_tensor_t *x = kt_random_f32(l->xs, 21), *scale = kt_random_f32(ZF_SHAPE(c), 22);
    zf_tensor_t *offset = kt_random_f32(ZF_SHAPE(c), 23);
    bool running = !training || factor != 1.0;
    zf_tensor_t *mean = running ? kt_random_f32(ZF_SHAPE(c), 24) : kt_zeros(ZF_FLOAT, ZF_SHAPE(0));
    zf_tensor_t *var = running ? kt_random_f32(ZF_SHAPE(c), 25) : kt_zeros(ZF_FLOAT, ZF_SHAPE(0));
    for (int64_t k = 0; running && k < c; k++) s_set(var, k, fabs(s_get(var, k)) + 0.1);
    Tensorflow__NodeDef *n = s_node(op, l, training, factor);
    zf_tensor_t *in[5] = {x, scale, offset, mean, var}, *out[6] = {NULL};
    ASSERT_OK(kt_run_on(n, in, 5, out, outs, NULL, dev));

    double bm[16], bv[16], m[16], v[16], y[4096] = {0};
    int64_t nx = zf_tensor_num_elements(x), per = nx / c;
    assert_true(c <= 16 && nx <= 4096);
    s_moments(l, x, bm, bv);
    for (int64_t k = 0; k < c; k++) {
        m[k] = training ? bm[k] : s_get(mean, k);
        v[k] = training ? bv[k] : s_get(var, k);
    }
    for (int64_t i = 0; i < nx; i++) {
        int64_t k = s_channel_of(l, i);
        y[i] = (s_get(x, i) - m[k]) / sqrt(v[k] + S_EPS) * s_get(scale, k) + s_get(offset, k);
    }
    kt_expect_shape(out[0], l->xs);
    s_expect("y", out[0], y, nx, 1e-4);
    double want_mean[16], want_var[16];
    for (int64_t k = 0; k < c; k++) {
        double corrected = bv[k] * (double)per / (double)(per > 1 ? per - 1 : 1);
        want_mean[k] = !training       ? s_get(mean, k)
                       : factor == 1.0 ? bm[k]
                                       : (1 - factor) * s_get(mean, k) + factor * bm[k];
        want_var[k] = !training       ? s_get(var, k)
                      : factor == 1.0 ? corrected
                                      : (1 - factor) * s_get(var, k) + factor * corrected;
    }
    s_expect("batch_mean", out[1], want_mean, c, 1e-5);
    s_expect("batch_variance", out[2], want_var, c, 1e-5);
    s_expect("reserve_space_1", out[3], m, c, 1e-5);
    s_expect("reserve_space_2", out[4], v, c, 1e-5);
    if (outs == 6) KT_EXPECT_NEAR(out[5], zf_shape_scalar(), 0, 0); /* reserve_space_3 */
    kt_unref_all(in, 5);
    kt_unref_all(out, outs);
    kt_node_free(&n);
}

static void test_training_uses_batch_statistics(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    const s_layout_t layouts[] = {
        {false, ZF_SHAPE(2, 3, 4, 3)},    {true, ZF_SHAPE(2, 3, 4, 3)},
        {false, ZF_SHAPE(2, 2, 3, 2, 4)}, {true, ZF_SHAPE(1, 5, 2, 3, 2)},
        {false, ZF_SHAPE(1, 1, 1, 2)}, /* one value per channel: variance 0, no correction */
    };
    const char *ops[] = {"FusedBatchNormV3", "FusedBatchNorm", "FusedBatchNormV2"};
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        s_check_forward(ops[i % 3], &layouts[i], true, 1.0, i % 2 ? dev : NULL);
    zf_device_destroy(&dev);
}

static void test_exponential_avg_factor_blends_running_statistics(void **state)
{
    (void)state;
    s_layout_t nhwc = {false, ZF_SHAPE(2, 3, 3, 4)}, nchw = {true, ZF_SHAPE(3, 2, 2, 5)};
    s_check_forward("FusedBatchNormV3", &nhwc, true, 0.25, NULL);
    s_check_forward("FusedBatchNormV3", &nchw, true, 0.5, NULL);
    s_check_forward("FusedBatchNormV2", &nhwc, true, 0.0, NULL);
}

static void test_inference_uses_the_given_statistics(void **state)
{
    (void)state;
    s_layout_t nhwc = {false, ZF_SHAPE(2, 3, 3, 4)}, nchw = {true, ZF_SHAPE(3, 2, 2, 5)};
    s_check_forward("FusedBatchNormV3", &nhwc, false, 1.0, NULL);
    s_check_forward("FusedBatchNormV3", &nchw, false, 1.0, NULL);
    s_check_forward("FusedBatchNorm", &nhwc, false, 1.0, NULL);
}

static void test_a_hand_checked_batch(void **state)
{
    (void)state;
    s_layout_t l = {false, ZF_SHAPE(4, 1, 1, 1)};
    Tensorflow__NodeDef *n = s_node("FusedBatchNormV3", &l, true, 1.0);
    /* x = 1, 2, 3, 4: mean 2.5, variance 1.25, corrected 5/3 */
    zf_tensor_t *in[5] = {KT_F32(ZF_SHAPE(4, 1, 1, 1), 1, 2, 3, 4), KT_F32(ZF_SHAPE(1), 2),
                          KT_F32(ZF_SHAPE(1), 1), kt_zeros(ZF_FLOAT, ZF_SHAPE(0)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(0))};
    zf_tensor_t *out[6] = {NULL};
    ASSERT_OK(kt_run(n, in, 5, out, 6));
    double s = 2 / sqrt(1.25 + S_EPS);
    KT_EXPECT_NEAR(out[0], ZF_SHAPE(4, 1, 1, 1), 1e-5, 1 - 1.5 * s, 1 - 0.5 * s, 1 + 0.5 * s,
                   1 + 1.5 * s);
    KT_EXPECT_NEAR(out[1], ZF_SHAPE(1), 1e-6, 2.5);
    KT_EXPECT_NEAR(out[2], ZF_SHAPE(1), 1e-6, 5.0 / 3.0);
    KT_EXPECT_NEAR(out[4], ZF_SHAPE(1), 1e-6, 1.25);
    kt_unref_all(in, 5);
    kt_unref_all(out, 6);
    kt_node_free(&n);
}

static void test_an_empty_batch_gives_nan_statistics(void **state)
{
    (void)state;
    s_layout_t l = {false, ZF_SHAPE(0, 2, 2, 3)};
    Tensorflow__NodeDef *n = s_node("FusedBatchNormV3", &l, true, 1.0);
    zf_tensor_t *in[5] = {kt_zeros(ZF_FLOAT, l.xs), KT_F32(ZF_SHAPE(3), 1, 1, 1),
                          KT_F32(ZF_SHAPE(3), 0, 0, 0), kt_zeros(ZF_FLOAT, ZF_SHAPE(0)),
                          kt_zeros(ZF_FLOAT, ZF_SHAPE(0))};
    zf_tensor_t *out[6] = {NULL};
    ASSERT_OK(kt_run(n, in, 5, out, 6));
    kt_expect_shape(out[0], l.xs);
    for (int k = 0; k < 3; k++) {
        assert_true(isnan(s_get(out[1], k)));
        assert_true(isnan(s_get(out[2], k)));
    }
    kt_unref_all(in, 5);
    kt_unref_all(out, 6);
    kt_node_free(&n);
}

static void test_forward_reports_bad_inputs(void **state)
{
    (void)state;
    s_layout_t l = {false, ZF_SHAPE(1, 2, 2, 3)};
    Tensorflow__NodeDef *train = s_node("FusedBatchNormV3", &l, true, 1.0);
    Tensorflow__NodeDef *infer = s_node("FusedBatchNormV3", &l, false, 1.0);
    zf_tensor_t *x = kt_zeros(ZF_FLOAT, l.xs), *x3 = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3, 3));
    zf_tensor_t *c3 = KT_F32(ZF_SHAPE(3), 1, 1, 1), *c2 = KT_F32(ZF_SHAPE(2), 1, 1);
    zf_tensor_t *empty = kt_zeros(ZF_FLOAT, ZF_SHAPE(0)), *out[6] = {NULL};
    zf_tensor_t *in[5] = {x3, c3, c3, empty, empty};
    zf_test_expect_error(kt_run(train, in, 5, out, 6), ZF_INVALID_ARGUMENT,
                         "bn (FusedBatchNormV3): input must be 4 or 5-dimensional[2,3,3]");
    in[0] = x;
    in[1] = c2;
    zf_test_expect_error(kt_run(train, in, 5, out, 6), ZF_INVALID_ARGUMENT,
                         "scale must have the same number of elements as the channels of x, got "
                         "2 and 3");
    in[1] = c3;
    zf_test_expect_error(kt_run(infer, in, 5, out, 6), ZF_INVALID_ARGUMENT,
                         "When is_training=false, mean must have the same number of elements as "
                         "the channels of x, got 0 and 3");
    zf_tensor_t *d3 = kt_zeros(ZF_DOUBLE, ZF_SHAPE(3));
    in[2] = d3;
    zf_test_expect_error(kt_run(train, in, 5, out, 6), ZF_INVALID_ARGUMENT,
                         "input 2 must be float, got double");
    for (int i = 0; i < 6; i++) assert_null(out[i]);
    in[2] = c3;
    zf_test_expect_error(kt_run(train, in, 5, out, 3), ZF_INVALID_ARGUMENT,
                         "bn (FusedBatchNormV3): expects 5 outputs, got 3");
    Tensorflow__NodeDef *bad = s_node("FusedBatchNorm", &l, true, 1.0);
    kt_attr_string(bad, "data_format", "HWNC");
    in[2] = c3;
    zf_test_expect_error(kt_run(bad, in, 5, out, 5), ZF_INVALID_ARGUMENT,
                         "bn (FusedBatchNorm): Invalid data format 'HWNC'");
    kt_unref_all((zf_tensor_t *[]){x, x3, c3, c2, empty, d3}, 6);
    kt_node_free(&train);
    kt_node_free(&infer);
    kt_node_free(&bad);
}

/* ---- FusedBatchNormGradV3 ------------------------------------------------------------------- */

/* sum(w * y) for the forward op on in. */
static double s_loss(const Tensorflow__NodeDef *fwd, zf_tensor_t **in, const zf_tensor_t *w)
{
    zf_tensor_t *out[6] = {NULL};
    int nout = strcmp(fwd->op, "FusedBatchNormV3") == 0 ? 6 : 5;
    ASSERT_OK(kt_run(fwd, in, 5, out, nout));
    double l = 0;
    for (int64_t i = 0; i < zf_tensor_num_elements(w); i++) l += s_get(out[0], i) * s_get(w, i);
    kt_unref_all(out, nout);
    return l;
}

/* Central differences of s_loss in input k, in float with step h. */
static void s_fd(const Tensorflow__NodeDef *fwd, zf_tensor_t **in, int k, const zf_tensor_t *w,
                 double h, double *d)
{
    for (int64_t i = 0; i < zf_tensor_num_elements(in[k]); i++) {
        double v = s_get(in[k], i);
        s_set(in[k], i, v + h);
        double lp = s_loss(fwd, in, w);
        s_set(in[k], i, v - h);
        double lm = s_loss(fwd, in, w);
        s_set(in[k], i, v);
        d[i] = (lp - lm) / (2 * h);
    }
}

/* The gradient of version ver (1: FusedBatchNormGrad, 2, 3) against its
 * forward op. */
static void s_check_grad(const s_layout_t *l, int ver, bool training, zf_device_t *dev)
{
    static const char *const fwd_ops[] = {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"};
    static const char *const grad_ops[] = {"FusedBatchNormGrad", "FusedBatchNormGradV2",
                                           "FusedBatchNormGradV3"};
    int nf = ver == 3 ? 6 : 5; /* the forward's outputs, the gradient's inputs */
    int64_t c = s_channels(l);
    zf_tensor_t *x = kt_random_f32(l->xs, 31), *dy = kt_random_f32(l->xs, 32);
    zf_tensor_t *scale = kt_random_f32(ZF_SHAPE(c), 33), *offset = kt_random_f32(ZF_SHAPE(c), 34);
    zf_tensor_t *pmean = kt_random_f32(ZF_SHAPE(c), 35), *pvar = kt_random_f32(ZF_SHAPE(c), 36);
    for (int64_t k = 0; k < c; k++) s_set(pvar, k, fabs(s_get(pvar, k)) + 0.2);
    /* the forward op gives the reserve spaces the gradient takes */
    Tensorflow__NodeDef *fwd = s_node(fwd_ops[ver - 1], l, training, 1.0);
    zf_tensor_t *empty = kt_zeros(ZF_FLOAT, ZF_SHAPE(0));
    zf_tensor_t *fin[5] = {x, scale, offset, training ? empty : pmean, training ? empty : pvar};
    zf_tensor_t *fout[6] = {NULL};
    ASSERT_OK(kt_run(fwd, fin, 5, fout, nf));
    Tensorflow__NodeDef *g = s_node(grad_ops[ver - 1], l, training, 1.0);
    zf_tensor_t *gin[6] = {dy, x, scale, fout[3], fout[4], fout[5]}, *gout[5] = {NULL};
    ASSERT_OK(kt_run_on(g, gin, nf, gout, 5, NULL, dev));
    kt_expect_shape(gout[0], l->xs);
    kt_expect_shape(gout[3], ZF_SHAPE(0));
    kt_expect_shape(gout[4], ZF_SHAPE(0));

    /* TensorFlow's formulas, in double */
    int64_t nx = zf_tensor_num_elements(x), per = nx / c;
    double m[16], v[16], dscale[16] = {0}, doffset[16] = {0}, dyx[16] = {0}, dx[4096] = {0};
    assert_true(c <= 16 && nx <= 4096);
    s_moments(l, x, m, v);
    for (int64_t k = 0; !training && k < c; k++) {
        m[k] = s_get(pmean, k);
        v[k] = s_get(pvar, k);
    }
    for (int64_t i = 0; i < nx; i++) {
        int64_t k = s_channel_of(l, i);
        double xc = s_get(x, i) - m[k];
        dscale[k] += s_get(dy, i) * xc / sqrt(v[k] + S_EPS);
        doffset[k] += s_get(dy, i);
        dyx[k] += s_get(dy, i) * xc / (double)per;
    }
    for (int64_t i = 0; i < nx; i++) {
        int64_t k = s_channel_of(l, i);
        double inv = 1 / sqrt(v[k] + S_EPS), xc = s_get(x, i) - m[k];
        dx[i] = training ? s_get(scale, k) * inv *
                               (s_get(dy, i) - doffset[k] / (double)per - xc * dyx[k] * inv * inv)
                         : s_get(scale, k) * inv * s_get(dy, i);
    }
    s_expect("x_backprop vs formula", gout[0], dx, nx, 1e-4);
    s_expect("scale_backprop vs formula", gout[1], dscale, c, 1e-4);
    s_expect("offset_backprop vs formula", gout[2], doffset, c, 1e-4);

    /* finite differences of the forward kernel (float: nonlinear in x
     * when training, so a small step and a looser bound) */
    double fd[4096];
    s_fd(fwd, fin, 0, dy, training ? 1e-2 : 0.5, fd);
    s_expect("x_backprop vs differences", gout[0], fd, nx, training ? 1e-2 : 1e-3);
    s_fd(fwd, fin, 1, dy, 0.5, fd);
    s_expect("scale_backprop vs differences", gout[1], fd, c, 1e-3);
    s_fd(fwd, fin, 2, dy, 0.5, fd);
    s_expect("offset_backprop vs differences", gout[2], fd, c, 1e-3);

    kt_unref_all((zf_tensor_t *[]){x, dy, scale, offset, pmean, pvar, empty}, 7);
    kt_unref_all(fout, nf);
    kt_unref_all(gout, 5);
    kt_node_free(&fwd);
    kt_node_free(&g);
}

static void test_grad_matches_formulas_and_finite_differences(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 2, &dev));
    const s_layout_t layouts[] = {
        {false, ZF_SHAPE(2, 3, 2, 3)},
        {true, ZF_SHAPE(2, 3, 3, 2)},
        {false, ZF_SHAPE(1, 2, 2, 2, 3)},
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        s_check_grad(&layouts[i], 3 - (int)i, true, i % 2 ? dev : NULL); /* V3, V2, V1 */
        s_check_grad(&layouts[i], 3 - (int)i, false, i % 2 ? NULL : dev);
    }
    zf_device_destroy(&dev);
}

static void test_grad_reports_bad_inputs_and_handles_empty_ones(void **state)
{
    (void)state;
    s_layout_t l = {false, ZF_SHAPE(1, 2, 2, 3)};
    Tensorflow__NodeDef *g = s_node("FusedBatchNormGradV3", &l, true, 1.0);
    zf_tensor_t *x = kt_zeros(ZF_FLOAT, l.xs), *dy = kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 2, 3, 3));
    zf_tensor_t *c3 = KT_F32(ZF_SHAPE(3), 1, 1, 1), *c2 = KT_F32(ZF_SHAPE(2), 1, 1);
    zf_tensor_t *empty = kt_zeros(ZF_FLOAT, ZF_SHAPE(0)), *out[5] = {NULL};
    zf_tensor_t *in[6] = {dy, x, c3, c3, c3, empty};
    zf_test_expect_error(kt_run(g, in, 6, out, 5), ZF_INVALID_ARGUMENT,
                         "bn (FusedBatchNormGradV3): x and y_backprop must have same shape, but x "
                         "has shape [1,2,2,3] and y_backprop has shape [1,2,3,3]");
    in[0] = x;
    in[4] = c2;
    zf_test_expect_error(kt_run(g, in, 6, out, 5), ZF_INVALID_ARGUMENT,
                         "reserve_space_2 must have the same number of elements as the channels "
                         "of x, got 2 and 3");
    for (int i = 0; i < 5; i++) assert_null(out[i]);
    zf_tensor_t *x0 = kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 2, 2, 3));
    zf_tensor_t *in0[6] = {x0, x0, c3, c3, c3, empty};
    ASSERT_OK(kt_run(g, in0, 6, out, 5));
    kt_expect_shape(out[0], ZF_SHAPE(0, 2, 2, 3));
    KT_EXPECT_NEAR(out[1], ZF_SHAPE(3), 0, 0, 0, 0);
    KT_EXPECT_NEAR(out[2], ZF_SHAPE(3), 0, 0, 0, 0);
    kt_unref_all(out, 5);
    kt_unref_all((zf_tensor_t *[]){x, dy, c3, c2, empty, x0}, 6);
    kt_node_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_training_uses_batch_statistics),
        cmocka_unit_test(test_exponential_avg_factor_blends_running_statistics),
        cmocka_unit_test(test_inference_uses_the_given_statistics),
        cmocka_unit_test(test_a_hand_checked_batch),
        cmocka_unit_test(test_an_empty_batch_gives_nan_statistics),
        cmocka_unit_test(test_forward_reports_bad_inputs),
        cmocka_unit_test(test_grad_matches_formulas_and_finite_differences),
        cmocka_unit_test(test_grad_reports_bad_inputs_and_handles_empty_ones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
