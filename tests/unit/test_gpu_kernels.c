/* Tests for the GPU kernels: each against the CPU kernel on the same inputs
 * (or hand-computed values), broadcasting, every reduction strategy,
 * cuBLAS MatMul with transposes, the data-moving kernels and where their
 * outputs live, and Send/Recv between host and GPU memory. Every test
 * needs a visible GPU and is skipped, saying why, when there is none; the
 * program then exits 77 so CTest reports it skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "executor/rendezvous/rendezvous.h"
#include "kernel_test_util.h"
#include "gpu_test_util.h"
#include "common/rendezvous_key.h"

#define S_GPU0 "/job:localhost/replica:0/task:0/device:GPU:0"
#define S_CPU0 "/job:localhost/replica:0/task:0/device:CPU:0"

/* ---- helpers ------------------------------------------------------------------- */

static double s_get(const zf_tensor_t *t, int64_t i)
{
    const void *p = zf_tensor_data(t);
    switch (zf_tensor_dtype(t)) {
    case ZF_FLOAT: return ((const float *)p)[i];
    case ZF_DOUBLE: return ((const double *)p)[i];
    case ZF_HALF: return zf_half_to_float(((const uint16_t *)p)[i]);
    case ZF_INT32: return ((const int32_t *)p)[i];
    case ZF_INT64: return (double)((const int64_t *)p)[i];
    case ZF_BOOL: return ((const bool *)p)[i];
    default: fail_msg("no reader for %s", zf_dtype_name(zf_tensor_dtype(t)));
    }
    return 0;
}

/* Same dtype and shape, elements within tol (relative above 1). */
static void s_expect_close(const zf_tensor_t *got, const zf_tensor_t *want, double tol,
                           const char *what)
{
    assert_int_equal(zf_tensor_dtype(got), zf_tensor_dtype(want));
    kt_expect_shape(got, *zf_tensor_shape(want));
    for (int64_t i = 0; i < zf_tensor_num_elements(want); i++) {
        double g = s_get(got, i), w = s_get(want, i);
        bool both_nan = isnan(g) && isnan(w), same_inf = isinf(g) && isinf(w) && (g > 0) == (w > 0);
        if (!both_nan && !same_inf && !(fabs(g - w) <= tol * (fabs(w) > 1 ? fabs(w) : 1)))
            fail_msg("%s: element %lld is %.9g on the GPU, %.9g on the CPU", what, (long long)i, g,
                     w);
    }
}

/* The node's GPU result equals its CPU result. */
static void s_same_as_cpu(zf_device_t *dev, const Tensorflow__NodeDef *node, zf_tensor_t *const *in,
                          int n, double tol)
{
    zf_tensor_t *cpu = NULL, *gpu = NULL;
    ASSERT_OK(kt_run(node, in, n, &cpu, 1));
    ASSERT_OK(gt_run(dev, node, in, n, &gpu, 1));
    char what[128];
    snprintf(what, sizeof what, "%s (%s)", node->op, zf_dtype_name(zf_tensor_dtype(cpu)));
    s_expect_close(gpu, cpu, tol, what);
    kt_unref_all((zf_tensor_t *[]){cpu, gpu}, 2);
}

static Tensorflow__NodeDef *s_node(const char *op, int inputs, zf_dtype_t t)
{
    Tensorflow__NodeDef *n = kt_node_new("k", op, inputs);
    kt_attr_type(n, "T", t);
    return n;
}

/* Deterministic values in [lo, lo + 2) of dtype (FLOAT or DOUBLE). */
static zf_tensor_t *s_random(zf_dtype_t dtype, zf_shape_t shape, uint32_t seed, double lo)
{
    zf_tensor_t *f = kt_random_f32(shape, seed), *t = kt_zeros(dtype, shape);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) {
        double v = ((const float *)zf_tensor_data(f))[i] + 1.0 + lo;
        if (dtype == ZF_FLOAT)
            ((float *)zf_tensor_data(t))[i] = (float)v;
        else
            ((double *)zf_tensor_data(t))[i] = v;
    }
    zf_tensor_unref(&f);
    return t;
}

static double s_tol(zf_dtype_t t)
{
    return t == ZF_FLOAT ? 2e-6 : 1e-13;
}

static const zf_dtype_t s_types[] = {ZF_FLOAT, ZF_DOUBLE};

/* ---- element-wise --------------------------------------------------------------------- */

static void test_gpu_unary_kernels_match_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    static const char *const ops[] = {"Neg", "Abs",  "Square", "Sqrt",    "Rsqrt", "Exp",
                                      "Log", "Relu", "Relu6",  "Sigmoid", "Tanh",  "Reciprocal"};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
            bool positive = !strcmp(ops[i], "Sqrt") || !strcmp(ops[i], "Rsqrt") ||
                            !strcmp(ops[i], "Log") || !strcmp(ops[i], "Reciprocal");
            bool relu6 = !strcmp(ops[i], "Relu6");
            zf_tensor_t *x =
                s_random(s_types[k], ZF_SHAPE(3, 333), (uint32_t)i, positive ? 0.05 : -1.0);
            /* Relu6 also needs values above 6. */
            for (int64_t j = 0; relu6 && j < 999; j += 7) {
                if (s_types[k] == ZF_FLOAT)
                    ((float *)zf_tensor_data(x))[j] *= 8.0f;
                else
                    ((double *)zf_tensor_data(x))[j] *= 8.0;
            }
            Tensorflow__NodeDef *n = s_node(ops[i], 1, s_types[k]);
            s_same_as_cpu(dev, n, &x, 1, 4 * s_tol(s_types[k]));
            kt_node_free(&n);
            zf_tensor_unref(&x);
        }
    zf_device_destroy(&dev);
}

static void test_gpu_binary_kernels_broadcast_like_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    static const char *const ops[] = {"Add",     "AddV2",   "Sub",     "Mul",
                                      "RealDiv", "Maximum", "Minimum", "SquaredDifference"};
    const zf_shape_t pairs[][2] = {
        {ZF_SHAPE(2, 3, 4), ZF_SHAPE(2, 3, 4)},
        {ZF_SHAPE(2, 3, 4), ZF_SHAPE(4)},
        {ZF_SHAPE(3, 1), ZF_SHAPE(1, 4)},
        {ZF_SHAPE(5), ZF_SHAPE(2, 1, 1)},
        {zf_shape_scalar(), ZF_SHAPE(5)},
        {ZF_SHAPE(5), zf_shape_scalar()},
        {ZF_SHAPE(2, 1, 3, 1, 5), ZF_SHAPE(3, 4, 1)},
        {ZF_SHAPE(0, 3), ZF_SHAPE(3)},
        {ZF_SHAPE(1000, 64), ZF_SHAPE(1000, 1)},
    };
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
            for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
                zf_tensor_t *in[2] = {s_random(s_types[k], pairs[p][0], (uint32_t)(p + 1), -1.0),
                                      s_random(s_types[k], pairs[p][1], (uint32_t)(p + 7), 0.5)};
                Tensorflow__NodeDef *n = s_node(ops[i], 2, s_types[k]);
                s_same_as_cpu(dev, n, in, 2, s_tol(s_types[k]));
                kt_node_free(&n);
                kt_unref_all(in, 2);
            }
    zf_device_destroy(&dev);
}

static zf_tensor_t *s_half(zf_shape_t shape, const float *vals)
{
    zf_tensor_t *t = kt_zeros(ZF_HALF, shape);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++)
        ((uint16_t *)zf_tensor_data(t))[i] = zf_float_to_half(vals[i]);
    return t;
}

static void test_gpu_kernels_compute_half_in_float(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *a = s_half(ZF_SHAPE(2, 2), (const float[]){1.5f, -2.0f, 0.25f, 4.0f});
    zf_tensor_t *b = s_half(ZF_SHAPE(2), (const float[]){2.25f, 0.5f});
    zf_tensor_t *in[2] = {a, b}, *out = NULL;
    Tensorflow__NodeDef *n = s_node("Add", 2, ZF_HALF);
    ASSERT_OK(gt_run(dev, n, in, 2, &out, 1));
    zf_tensor_t *want = s_half(ZF_SHAPE(2, 2), (const float[]){3.75f, -1.5f, 2.5f, 4.5f});
    s_expect_close(out, want, 0, "Add (half)");
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = s_node("MatMul", 2, ZF_HALF);
    ASSERT_OK(gt_run(dev, n, (zf_tensor_t *[]){a, a}, 2, &out, 1));
    zf_tensor_t *mm = s_half(ZF_SHAPE(2, 2), (const float[]){1.75f, -11.0f, 1.375f, 15.5f});
    s_expect_close(out, mm, 0, "MatMul (half)");
    kt_unref_all((zf_tensor_t *[]){a, b, out, want, mm}, 5);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static void test_gpu_binary_kernel_rejects_incompatible_shapes(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), kt_zeros(ZF_FLOAT, ZF_SHAPE(4))};
    zf_tensor_t *out = NULL;
    Tensorflow__NodeDef *n = s_node("Mul", 2, ZF_FLOAT);
    zf_test_expect_error(gt_run(dev, n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "k (Mul): Incompatible shapes: [2,3] vs. [4]");
    assert_null(out);
    kt_node_free(&n);
    kt_unref_all(in, 2);
    zf_device_destroy(&dev);
}

static void s_attr_alpha(Tensorflow__NodeDef *n, float alpha)
{
    Tensorflow__AttrValue *v = kt_attr_add(n, "alpha");
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F;
    v->f = alpha;
}

static void s_set(zf_tensor_t *t, int64_t i, double v)
{
    if (zf_tensor_dtype(t) == ZF_FLOAT)
        ((float *)zf_tensor_data(t))[i] = (float)v;
    else
        ((double *)zf_tensor_data(t))[i] = v;
}

/* Values in [-4, 4) with the cases the formulas treat apart: zeros of
 * both signs, halves (Round), beyond Softplus's thresholds, NaN. */
static zf_tensor_t *s_activation_input(zf_dtype_t t, zf_shape_t shape, uint32_t seed)
{
    zf_tensor_t *x = s_random(t, shape, seed, -1.0);
    static const double special[] = {0.0, -0.0, 0.5, 1.5, 2.5, -2.5, -0.5, 6.0,
                                     30.0, -30.0, 60.0, -60.0, 800.0, -800.0, NAN};
    int64_t n = zf_tensor_num_elements(x);
    for (int64_t i = 0; i < n; i++) s_set(x, i, 4 * s_get(x, i));
    for (size_t i = 0; i < sizeof special / sizeof special[0] && (int64_t)i < n; i++)
        s_set(x, (int64_t)(i * 7 % (size_t)n), special[i]);
    return x;
}

static void test_gpu_activations_and_rounding_match_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    static const char *const ops[] = {"Elu",  "Selu", "Softplus", "Softsign", "LeakyRelu", "Erf",
                                      "Erfc", "Floor", "Ceil",    "Round",    "Sign"};
    const zf_shape_t shapes[] = {ZF_SHAPE(4, 250), zf_shape_scalar(), ZF_SHAPE(0, 3)};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
                zf_tensor_t *x = s_activation_input(s_types[k], shapes[sh], (uint32_t)(i + 3));
                Tensorflow__NodeDef *n = s_node(ops[i], 1, s_types[k]);
                s_same_as_cpu(dev, n, &x, 1, 4 * s_tol(s_types[k]));
                kt_node_free(&n);
                zf_tensor_unref(&x);
            }
    /* The predicates, on NaN, both infinities and numbers. */
    static const char *const preds[] = {"IsNan", "IsInf", "IsFinite"};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < 3; i++) {
            zf_tensor_t *x = s_activation_input(s_types[k], ZF_SHAPE(3, 7), 1);
            s_set(x, 4, INFINITY);
            s_set(x, 5, -INFINITY);
            Tensorflow__NodeDef *n = s_node(preds[i], 1, s_types[k]);
            s_same_as_cpu(dev, n, &x, 1, 0);
            kt_node_free(&n);
            zf_tensor_unref(&x);
        }
    /* LeakyRelu's alpha attr reaches the GPU kernel. */
    zf_tensor_t *x = KT_F32(ZF_SHAPE(3), -2.0f, 0.0f, 3.0f), *out = NULL;
    Tensorflow__NodeDef *n = s_node("LeakyRelu", 1, ZF_FLOAT);
    s_attr_alpha(n, 0.5f);
    ASSERT_OK(gt_run(dev, n, &x, 1, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, -1.0, 0.0, 3.0);
    kt_unref_all((zf_tensor_t *[]){x, out}, 2);
    kt_node_free(&n);
    /* Round: halves to even; Sign keeps a NaN. */
    x = KT_F32(ZF_SHAPE(5), 0.5f, 1.5f, 2.5f, -2.5f, -3.5f);
    n = s_node("Round", 1, ZF_FLOAT);
    ASSERT_OK(gt_run(dev, n, &x, 1, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(5), 0, 0.0, 2.0, 2.0, -2.0, -4.0);
    kt_unref_all((zf_tensor_t *[]){x, out}, 2);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static void test_gpu_activation_gradients_match_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    /* Ops taking (y, dy) with y positive (divided by), and the rest. */
    static const char *const ops[] = {"ReluGrad",    "Relu6Grad",    "LeakyReluGrad", "EluGrad",
                                      "SeluGrad",    "SigmoidGrad",  "TanhGrad",      "SoftplusGrad",
                                      "SoftsignGrad", "SqrtGrad",    "RsqrtGrad",     "ReciprocalGrad"};
    const zf_shape_t shapes[] = {ZF_SHAPE(3, 333), zf_shape_scalar(), ZF_SHAPE(2, 0)};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
                bool y_first = strstr("SigmoidGrad TanhGrad SqrtGrad RsqrtGrad ReciprocalGrad",
                                      ops[i]) != NULL;
                zf_tensor_t *in[2] = {
                    s_random(s_types[k], shapes[sh], (uint32_t)(2 * i + 1), y_first ? 0.05 : -1.0),
                    s_random(s_types[k], shapes[sh], (uint32_t)(2 * i + 2), -1.0)};
                /* features on both sides of 0 and of 6 */
                for (int64_t j = 0; !y_first && j < zf_tensor_num_elements(in[1]); j++)
                    s_set(in[1], j, 5 * s_get(in[1], j) + 2);
                Tensorflow__NodeDef *n = s_node(ops[i], 2, s_types[k]);
                if (!strcmp(ops[i], "LeakyReluGrad")) s_attr_alpha(n, 0.25f);
                s_same_as_cpu(dev, n, in, 2, 4 * s_tol(s_types[k]));
                kt_node_free(&n);
                kt_unref_all(in, 2);
            }
    zf_tensor_t *bad[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2)), kt_zeros(ZF_FLOAT, ZF_SHAPE(1, 2))};
    zf_tensor_t *out = NULL;
    Tensorflow__NodeDef *n = s_node("TanhGrad", 2, ZF_FLOAT);
    zf_test_expect_error(gt_run(dev, n, bad, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "k (TanhGrad): y and dy must have the same shape: [2] vs. [1,2]");
    assert_null(out);
    kt_node_free(&n);
    kt_unref_all(bad, 2);
    zf_device_destroy(&dev);
}

static void test_gpu_pow_broadcasts_like_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    const zf_shape_t pairs[][2] = {
        {ZF_SHAPE(2, 3, 4), ZF_SHAPE(2, 3, 4)}, {ZF_SHAPE(3, 1), ZF_SHAPE(1, 4)},
        {zf_shape_scalar(), ZF_SHAPE(5)},        {ZF_SHAPE(5), zf_shape_scalar()},
        {ZF_SHAPE(0, 3), ZF_SHAPE(3)},           {zf_shape_scalar(), zf_shape_scalar()},
    };
    for (size_t k = 0; k < 2; k++)
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            zf_tensor_t *in[2] = {s_random(s_types[k], pairs[p][0], (uint32_t)(p + 1), 0.05),
                                  s_random(s_types[k], pairs[p][1], (uint32_t)(p + 9), -2.0)};
            Tensorflow__NodeDef *n = s_node("Pow", 2, s_types[k]);
            s_same_as_cpu(dev, n, in, 2, 4 * s_tol(s_types[k]));
            kt_node_free(&n);
            kt_unref_all(in, 2);
        }
    zf_device_destroy(&dev);
}

static void test_gpu_bias_add_matches_the_cpu_in_both_layouts(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    for (size_t k = 0; k < 2; k++) {
        zf_tensor_t *in[2] = {s_random(s_types[k], ZF_SHAPE(2, 3, 4), 1, -1),
                              s_random(s_types[k], ZF_SHAPE(4), 2, -1)};
        Tensorflow__NodeDef *n = s_node("BiasAdd", 2, s_types[k]);
        s_same_as_cpu(dev, n, in, 2, s_tol(s_types[k]));
        kt_node_free(&n);
        kt_unref_all(in, 2);
        zf_tensor_t *nchw[2] = {s_random(s_types[k], ZF_SHAPE(2, 3, 2, 2), 3, -1),
                                s_random(s_types[k], ZF_SHAPE(3), 4, -1)};
        n = s_node("BiasAdd", 2, s_types[k]);
        kt_attr_string(n, "data_format", "NCHW");
        s_same_as_cpu(dev, n, nchw, 2, s_tol(s_types[k]));
        kt_node_free(&n);
        kt_unref_all(nchw, 2);
    }
    zf_tensor_t *bad[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 4)), kt_zeros(ZF_FLOAT, ZF_SHAPE(3))};
    zf_tensor_t *out = NULL;
    Tensorflow__NodeDef *n = s_node("BiasAdd", 2, ZF_FLOAT);
    zf_test_expect_error(
        gt_run(dev, n, bad, 2, &out, 1), ZF_INVALID_ARGUMENT,
        "Must provide as many biases as the last dimension of the input tensor: [3] "
        "vs. [2,4]");
    kt_node_free(&n);
    kt_unref_all(bad, 2);
    zf_device_destroy(&dev);
}

/* ---- reductions and softmax --------------------------------------------------------- */

/* BiasAddGrad in both layouts against the CPU kernel and against sums
 * taken here in double: [n, ..., c] sums over all but the last dim, NCHW
 * over all but dim 1. */
static void test_gpu_bias_add_grad_matches_the_cpu_in_both_layouts(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    const zf_shape_t shapes[] = {ZF_SHAPE(3, 7, 9, 16), ZF_SHAPE(300, 5), ZF_SHAPE(1, 6),
                                 ZF_SHAPE(2, 0, 3)};
    for (size_t k = 0; k < 2; k++)
        for (int nchw = 0; nchw < 2; nchw++)
            for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
                zf_dtype_t t = s_types[k];
                zf_tensor_t *x = s_random(t, shapes[c], 30 + (uint32_t)c, -1), *got = NULL;
                const zf_shape_t *xs = zf_tensor_shape(x);
                int cdim = nchw ? 1 : xs->rank - 1;
                int64_t channels = xs->dims[cdim], inner = 1;
                for (int d = cdim + 1; d < xs->rank; d++) inner *= xs->dims[d];
                zf_tensor_t *want = kt_zeros(t, ZF_SHAPE(channels));
                for (int64_t ch = 0; ch < channels; ch++) {
                    double sum = 0;
                    for (int64_t i = 0; i < zf_tensor_num_elements(x); i++)
                        if ((i / inner) % channels == ch) sum += s_get(x, i);
                    s_set(want, ch, sum);
                }
                Tensorflow__NodeDef *n = s_node("BiasAddGrad", 1, t);
                kt_attr_string(n, "data_format", nchw ? "NCHW" : "NHWC");
                s_same_as_cpu(dev, n, &x, 1, t == ZF_FLOAT ? 1e-4 : 1e-12);
                ASSERT_OK(gt_run(dev, n, &x, 1, &got, 1));
                s_expect_close(got, want, t == ZF_FLOAT ? 1e-4 : 1e-12, "BiasAddGrad");
                kt_unref_all((zf_tensor_t *[]){x, want, got}, 3);
                kt_node_free(&n);
            }
    /* half sums in float */
    zf_tensor_t *h = s_half(ZF_SHAPE(2, 3), (const float[]){1, 2, 3, 0.5f, 0.25f, -3}), *out = NULL;
    Tensorflow__NodeDef *n = s_node("BiasAddGrad", 1, ZF_HALF);
    ASSERT_OK(gt_run(dev, n, &h, 1, &out, 1));
    kt_expect_shape(out, ZF_SHAPE(3));
    assert_true(s_get(out, 0) == 1.5 && s_get(out, 1) == 2.25 && s_get(out, 2) == 0.0);
    zf_tensor_unref(&out);
    zf_tensor_unref(&h);
    kt_node_free(&n);
    /* a vector: the CPU kernel's error */
    zf_tensor_t *v = kt_zeros(ZF_FLOAT, ZF_SHAPE(4));
    n = s_node("BiasAddGrad", 1, ZF_FLOAT);
    zf_test_expect_error(gt_run(dev, n, &v, 1, &out, 1), ZF_INVALID_ARGUMENT,
                         "k (BiasAddGrad): Input tensor must be at least 2D: [4]");
    assert_null(out);
    zf_tensor_unref(&v);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static Tensorflow__NodeDef *s_reduce_node(const char *op, zf_dtype_t t, bool keep_dims)
{
    Tensorflow__NodeDef *n = s_node(op, 2, t);
    kt_attr_type(n, "Tidx", ZF_INT32);
    kt_attr_bool(n, "keep_dims", keep_dims);
    return n;
}

typedef struct {
    zf_shape_t shape;
    int naxes;
    int32_t axes[3];
} s_reduce_case_t;

static void test_gpu_reductions_match_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    static const char *const ops[] = {"Sum", "Mean", "Max", "Min", "Prod"};
    /* Rows (short, long, split over blocks), middle, general, nothing to
     * combine, and no axes at all. */
    const s_reduce_case_t cases[] = {
        {ZF_SHAPE(1000), 1, {0}},          {ZF_SHAPE(2, 100000), 1, {1}},
        {ZF_SHAPE(300, 50), 1, {1}},       {ZF_SHAPE(30, 7), 1, {-1}},
        {ZF_SHAPE(50, 7), 1, {0}},         {ZF_SHAPE(4, 5, 6), 1, {1}},
        {ZF_SHAPE(4, 5, 6), 2, {0, 2}},    {ZF_SHAPE(2, 3, 4, 5), 2, {3, 1}},
        {ZF_SHAPE(3, 1), 1, {1}},          {ZF_SHAPE(2, 3), 0, {0}},
        {ZF_SHAPE(4, 5, 6), 3, {0, 1, 2}},
    };
    for (size_t k = 0; k < 2; k++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
                for (int keep = 0; keep < 2; keep++) {
                    const s_reduce_case_t *rc = &cases[c];
                    zf_tensor_t *in[2] = {
                        s_random(s_types[k], rc->shape, (uint32_t)c, -1.0),
                        kt_tensor(ZF_INT32, ZF_SHAPE(rc->naxes), rc->axes, (size_t)rc->naxes)};
                    Tensorflow__NodeDef *n = s_reduce_node(ops[o], s_types[k], keep);
                    /* Sums of many floats differ in rounding order. */
                    s_same_as_cpu(dev, n, in, 2, s_types[k] == ZF_FLOAT ? 1e-4 : 1e-12);
                    kt_node_free(&n);
                    kt_unref_all(in, 2);
                }
    zf_device_destroy(&dev);
}

static void test_gpu_reductions_of_nothing_give_the_identity(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3)), KT_I32(ZF_SHAPE(1), 0)};
    zf_tensor_t *out = NULL;
    Tensorflow__NodeDef *n = s_reduce_node("Sum", ZF_FLOAT, false);
    ASSERT_OK(gt_run(dev, n, in, 2, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, 0, 0, 0);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = s_reduce_node("Max", ZF_FLOAT, true);
    ASSERT_OK(gt_run(dev, n, in, 2, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(1, 3), 0, -INFINITY, -INFINITY, -INFINITY);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = s_reduce_node("Mean", ZF_FLOAT, false);
    ASSERT_OK(gt_run(dev, n, in, 2, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, NAN, NAN, NAN);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = s_reduce_node("Min", ZF_FLOAT, false);
    ASSERT_OK(gt_run(dev, n, in, 2, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, INFINITY, INFINITY, INFINITY);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = s_reduce_node("Prod", ZF_FLOAT, false);
    ASSERT_OK(gt_run(dev, n, in, 2, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, 1, 1, 1);
    zf_tensor_unref(&out);
    zf_tensor_t *none[2] = {kt_zeros(ZF_BOOL, ZF_SHAPE(2, 0)), KT_I32(ZF_SHAPE(1), 1)};
    const char *logic[] = {"All", "Any"};
    for (int i = 0; i < 2; i++) {
        Tensorflow__NodeDef *ln = kt_node_new("k", logic[i], 2);
        kt_attr_type(ln, "Tidx", ZF_INT32);
        ASSERT_OK(gt_run(dev, ln, none, 2, &out, 1));
        KT_EXPECT_INTS(out, ZF_SHAPE(2), i == 0, i == 0);
        zf_tensor_unref(&out);
        kt_node_free(&ln);
    }
    kt_unref_all(none, 2);
    zf_tensor_unref(&in[1]);
    in[1] = KT_I32(ZF_SHAPE(2), 1, -1);
    zf_test_expect_error(gt_run(dev, n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "Axes contains duplicate dimension: 1");
    zf_tensor_unref(&in[1]);
    in[1] = KT_I32(ZF_SHAPE(1), 2);
    zf_test_expect_error(gt_run(dev, n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "Invalid reduction dimension (2 for input with 2 dimension(s)");
    kt_node_free(&n);
    kt_unref_all(in, 2);
    zf_device_destroy(&dev);
}

/* Bools true but where (i * 7919 + seed) % period == 0. */
static zf_tensor_t *s_bools(zf_shape_t shape, uint32_t seed, int64_t period)
{
    zf_tensor_t *t = kt_zeros(ZF_BOOL, shape);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++)
        ((bool *)zf_tensor_data(t))[i] = (i * 7919 + seed) % period != 0;
    return t;
}

static void test_gpu_all_and_any_match_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    const s_reduce_case_t cases[] = {
        {ZF_SHAPE(1000), 1, {0}},       {ZF_SHAPE(2, 100000), 1, {1}}, {ZF_SHAPE(300, 50), 1, {1}},
        {ZF_SHAPE(50, 7), 1, {0}},      {ZF_SHAPE(4, 5, 6), 2, {0, 2}}, {ZF_SHAPE(3, 1), 1, {1}},
        {ZF_SHAPE(2, 3), 0, {0}},       {zf_shape_scalar(), 0, {0}},
    };
    const char *ops[] = {"All", "Any"};
    /* mostly true (All varies), and mostly false (Any varies) */
    const int64_t periods[] = {40, 2};
    for (size_t o = 0; o < 2; o++)
        for (size_t p = 0; p < 2; p++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
                for (int keep = 0; keep < 2; keep++) {
                    const s_reduce_case_t *rc = &cases[c];
                    zf_tensor_t *in[2] = {
                        s_bools(rc->shape, (uint32_t)c, periods[p]),
                        kt_tensor(ZF_INT32, ZF_SHAPE(rc->naxes), rc->axes, (size_t)rc->naxes)};
                    if (p == 1) /* mostly false: flip */
                        for (int64_t i = 0; i < zf_tensor_num_elements(in[0]); i++)
                            ((bool *)zf_tensor_data(in[0]))[i] ^= (i % 53) != 0;
                    Tensorflow__NodeDef *n = kt_node_new("k", ops[o], 2);
                    kt_attr_type(n, "Tidx", ZF_INT32);
                    kt_attr_bool(n, "keep_dims", keep);
                    s_same_as_cpu(dev, n, in, 2, 0);
                    kt_node_free(&n);
                    kt_unref_all(in, 2);
                }
    zf_device_destroy(&dev);
}

static void test_gpu_argmax_and_argmin_match_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    const struct {
        zf_shape_t shape;
        int32_t axis;
    } cases[] = {
        {ZF_SHAPE(1000), 0},    {ZF_SHAPE(7, 300), 1},   {ZF_SHAPE(7, 300), 0},
        {ZF_SHAPE(4, 5, 6), 1}, {ZF_SHAPE(4, 5, 6), -1}, {ZF_SHAPE(0, 3), 1},
        {ZF_SHAPE(3, 1), 1},
    };
    const char *ops[] = {"ArgMax", "ArgMin"};
    const zf_dtype_t out_types[] = {ZF_INT64, ZF_INT32};
    for (size_t k = 0; k < 2; k++)
        for (size_t o = 0; o < 2; o++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                zf_tensor_t *in[2] = {s_random(s_types[k], cases[c].shape, (uint32_t)c, -1.0),
                                      KT_I32(zf_shape_scalar(), cases[c].axis)};
                /* ties: the first index wins */
                if (zf_tensor_num_elements(in[0]) > 10) {
                    s_set(in[0], 3, 5.0);
                    s_set(in[0], 9, 5.0);
                }
                Tensorflow__NodeDef *n = s_node(ops[o], 2, s_types[k]);
                kt_attr_type(n, "Tidx", ZF_INT32);
                kt_attr_type(n, "output_type", out_types[(c + o) % 2]);
                s_same_as_cpu(dev, n, in, 2, 0);
                kt_node_free(&n);
                kt_unref_all(in, 2);
            }
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 0)), KT_I32(zf_shape_scalar(), 1)};
    zf_tensor_t *out = NULL;
    Tensorflow__NodeDef *n = s_node("ArgMax", 2, ZF_FLOAT);
    zf_test_expect_error(gt_run(dev, n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "k (ArgMax): Reduction axis 1 is empty in shape [3,0]");
    kt_node_free(&n);
    kt_unref_all(in, 2);
    zf_device_destroy(&dev);
}

static void test_gpu_softmax_matches_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    const zf_shape_t shapes[] = {ZF_SHAPE(3, 5), ZF_SHAPE(2, 1000), ZF_SHAPE(7), ZF_SHAPE(4, 3, 33),
                                 ZF_SHAPE(0, 4)};
    const char *ops[] = {"Softmax", "LogSoftmax"};
    for (size_t k = 0; k < 2; k++)
        for (size_t o = 0; o < 2; o++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                zf_tensor_t *x = s_random(s_types[k], shapes[s], (uint32_t)s, -1.0);
                Tensorflow__NodeDef *n = s_node(ops[o], 1, s_types[k]);
                s_same_as_cpu(dev, n, &x, 1, 10 * s_tol(s_types[k]));
                kt_node_free(&n);
                zf_tensor_unref(&x);
            }
    zf_tensor_t *scalar = KT_F32(zf_shape_scalar(), 1.0f), *out = NULL;
    Tensorflow__NodeDef *n = s_node("Softmax", 1, ZF_FLOAT);
    zf_test_expect_error(gt_run(dev, n, &scalar, 1, &out, 1), ZF_INVALID_ARGUMENT,
                         "logits must have >= 1 dimension, got []");
    kt_node_free(&n);
    zf_tensor_unref(&scalar);
    zf_device_destroy(&dev);
}

/* ---- AddN ------------------------------------------------------------------------------ */

static void test_gpu_add_n_matches_the_cpu_and_a_running_sum(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    const int counts[] = {1, 3, 8, 11}; /* 11: a second launch adds to the first's sums */
    for (size_t k = 0; k < 2; k++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            zf_dtype_t t = s_types[k];
            int n = counts[c];
            zf_tensor_t *in[11], *want = kt_zeros(t, ZF_SHAPE(5, 7)), *got = NULL;
            for (int i = 0; i < n; i++) in[i] = s_random(t, ZF_SHAPE(5, 7), 20 + (uint32_t)i, -1);
            for (int64_t e = 0; e < 35; e++) { /* added one by one, in the dtype */
                if (t == ZF_FLOAT) {
                    float s = ((const float *)zf_tensor_data(in[0]))[e];
                    for (int i = 1; i < n; i++) s += ((const float *)zf_tensor_data(in[i]))[e];
                    ((float *)zf_tensor_data(want))[e] = s;
                } else {
                    double s = ((const double *)zf_tensor_data(in[0]))[e];
                    for (int i = 1; i < n; i++) s += ((const double *)zf_tensor_data(in[i]))[e];
                    ((double *)zf_tensor_data(want))[e] = s;
                }
            }
            Tensorflow__NodeDef *node = s_node("AddN", n, t);
            kt_attr_int(node, "N", n);
            s_same_as_cpu(dev, node, in, n, 0);
            ASSERT_OK(gt_run(dev, node, in, n, &got, 1));
            s_expect_close(got, want, 0, "AddN");
            kt_unref_all(in, n);
            kt_unref_all((zf_tensor_t *[]){want, got}, 2);
            kt_node_free(&node);
        }
    /* half (which the CPU kernel does not take) rounds after every
     * addition: 2048 + 1 is 2048 again */
    zf_tensor_t *h[3] = {s_half(ZF_SHAPE(2), (const float[]){2048, 0.5f}),
                         s_half(ZF_SHAPE(2), (const float[]){1, 0.25f}),
                         s_half(ZF_SHAPE(2), (const float[]){1, 0.25f})},
                *out = NULL;
    Tensorflow__NodeDef *node = s_node("AddN", 3, ZF_HALF);
    kt_attr_int(node, "N", 3);
    ASSERT_OK(gt_run(dev, node, h, 3, &out, 1));
    assert_true(s_get(out, 0) == 2048.0 && s_get(out, 1) == 1.0);
    zf_tensor_unref(&out);
    kt_unref_all(h, 3);
    /* inputs of different shapes: the CPU kernel's error */
    zf_tensor_t *bad[3] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2)), kt_zeros(ZF_FLOAT, ZF_SHAPE(2)),
                           kt_zeros(ZF_FLOAT, ZF_SHAPE(3))};
    kt_node_free(&node);
    node = s_node("AddN", 3, ZF_FLOAT);
    zf_test_expect_error(gt_run(dev, node, bad, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "k (AddN): Inputs to operation k of type AddN must have the same size "
                         "and shape.  Input 0: [2] != input 2: [3]");
    assert_null(out);
    kt_unref_all(bad, 3);
    kt_node_free(&node);
    zf_device_destroy(&dev);
}

/* ---- moving elements ------------------------------------------------------------------- */

/* node on the GPU and on the CPU, inputs taken. */
static void s_moved_like_cpu(zf_device_t *dev, Tensorflow__NodeDef *n, zf_tensor_t **in, int nin)
{
    s_same_as_cpu(dev, n, in, nin, 0);
    kt_unref_all(in, nin);
    kt_node_free(&n);
}

static void test_gpu_slicing_padding_and_transposing_match_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    for (size_t k = 0; k < 2; k++) {
        zf_dtype_t t = s_types[k];
        s_moved_like_cpu(dev, s_node("Slice", 3, t),
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(3, 4, 5), 1, -1),
                                           KT_I32(ZF_SHAPE(3), 1, 0, 2),
                                           KT_I32(ZF_SHAPE(3), 2, -1, 2)},
                         3);
        s_moved_like_cpu(dev, s_node("Slice", 3, t),
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(3, 4), 1, -1),
                                           KT_I32(ZF_SHAPE(2), 3, 0), KT_I32(ZF_SHAPE(2), 0, 4)},
                         3);
        s_moved_like_cpu(dev, s_node("StridedSlice", 4, t),
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(4, 6), 2, -1),
                                           KT_I32(ZF_SHAPE(2), 3, -1), KT_I32(ZF_SHAPE(2), 0, 0),
                                           KT_I32(ZF_SHAPE(2), -1, -2)},
                         4);
        Tensorflow__NodeDef *n = s_node("StridedSlice", 4, t);
        kt_attr_int(n, "shrink_axis_mask", 1);
        kt_attr_int(n, "new_axis_mask", 4);
        kt_attr_int(n, "end_mask", 2);
        s_moved_like_cpu(dev, n,
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(4, 6, 2), 3, -1),
                                           KT_I32(ZF_SHAPE(3), 2, 1, 0), KT_I32(ZF_SHAPE(3), 3, 0, 0),
                                           KT_I32(ZF_SHAPE(3), 1, 2, 1)},
                         4);
        s_moved_like_cpu(dev, s_node("Tile", 2, t),
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(2, 3), 4, -1),
                                           KT_I32(ZF_SHAPE(2), 200, 3)},
                         2);
        s_moved_like_cpu(dev, s_node("Pad", 2, t),
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(2, 3), 5, -1),
                                           KT_I32(ZF_SHAPE(2, 2), 1, 0, 2, 1)},
                         2);
        zf_tensor_t *c = s_random(t, zf_shape_scalar(), 6, 5);
        s_moved_like_cpu(dev, s_node("PadV2", 3, t),
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(2, 3), 7, -1),
                                           KT_I32(ZF_SHAPE(2, 2), 0, 2, 1, 1), c},
                         3);
        n = s_node("MirrorPad", 2, t);
        kt_attr_string(n, "mode", k ? "SYMMETRIC" : "REFLECT");
        s_moved_like_cpu(dev, n,
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(3, 3), 8, -1),
                                           KT_I32(ZF_SHAPE(2, 2), 1, 2, 2, 1)},
                         2);
        s_moved_like_cpu(dev, s_node("ReverseV2", 2, t),
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(2, 3, 4), 9, -1),
                                           KT_I32(ZF_SHAPE(2), 0, -1)},
                         2);
        s_moved_like_cpu(dev, s_node("BroadcastTo", 2, t),
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(3, 1), 10, -1),
                                           KT_I32(ZF_SHAPE(3), 2, 3, 4)},
                         2);
        s_moved_like_cpu(dev, s_node("Transpose", 2, t),
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(20, 30, 4), 11, -1),
                                           KT_I32(ZF_SHAPE(3), 2, 0, 1)},
                         2);
        s_moved_like_cpu(dev, s_node("Transpose", 2, t),
                         (zf_tensor_t *[]){s_random(t, zf_shape_scalar(), 12, -1),
                                           kt_zeros(ZF_INT32, ZF_SHAPE(0))},
                         2);
        s_moved_like_cpu(dev, s_node("Transpose", 2, t),
                         (zf_tensor_t *[]){s_random(t, ZF_SHAPE(0, 3), 13, -1),
                                           KT_I32(ZF_SHAPE(2), 1, 0)},
                         2);
    }
    for (size_t k = 0; k < 2; k++)
        for (int bd = 0; bd < 2; bd++) {
            Tensorflow__NodeDef *n = kt_node_new("k", "GatherV2", 3);
            kt_attr_type(n, "Tparams", s_types[k]);
            kt_attr_int(n, "batch_dims", bd);
            s_moved_like_cpu(dev, n,
                             (zf_tensor_t *[]){s_random(s_types[k], ZF_SHAPE(2, 50, 3), 14, -1),
                                               KT_I32(ZF_SHAPE(2, 3), 49, 0, 4, 1, 2, 3),
                                               KT_I32(zf_shape_scalar(), 1)},
                             3);
        }
    zf_tensor_t *in[3] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3)), KT_I32(ZF_SHAPE(2), 1, 0),
                          KT_I32(ZF_SHAPE(2), 2, 1)}, *out = NULL;
    Tensorflow__NodeDef *n = s_node("Slice", 3, ZF_FLOAT);
    zf_test_expect_error(gt_run(dev, n, in, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "k (Slice): Expected size[0] in [0, 1], but got 2");
    assert_null(out);
    kt_node_free(&n);
    kt_unref_all(in, 3);
    /* indices are checked on the host, with the CPU kernel's error */
    zf_tensor_t *g[3] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 2)), KT_I32(ZF_SHAPE(2), 1, 4),
                         KT_I32(zf_shape_scalar(), 0)};
    n = kt_node_new("k", "GatherV2", 3);
    kt_attr_type(n, "Tparams", ZF_FLOAT);
    zf_test_expect_error(gt_run(dev, n, g, 3, &out, 1), ZF_INVALID_ARGUMENT,
                         "k (GatherV2): indices[1] = 4 is not in [0, 4)");
    kt_node_free(&n);
    kt_unref_all(g, 3);
    zf_device_destroy(&dev);
}

/* The node's nout GPU outputs equal its CPU outputs and the values of
 * want (float, nout tensors); inputs and want taken. */
static void s_outputs_like_cpu(zf_device_t *dev, Tensorflow__NodeDef *n, zf_tensor_t **in, int nin,
                               zf_tensor_t **want, int nout)
{
    zf_tensor_t *cpu[4] = {NULL}, *gpu[4] = {NULL};
    assert_true(nout <= 4);
    ASSERT_OK(kt_run(n, in, nin, cpu, nout));
    ASSERT_OK(gt_run(dev, n, in, nin, gpu, nout));
    for (int i = 0; i < nout; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s output %d", n->op, i);
        s_expect_close(gpu[i], cpu[i], 0, what);
        s_expect_close(gpu[i], want[i], 0, what);
    }
    kt_unref_all(cpu, nout);
    kt_unref_all(gpu, nout);
    kt_unref_all(want, nout);
    kt_unref_all(in, nin);
    kt_node_free(&n);
}

/* x[i] = i, float. */
static zf_tensor_t *s_iota(zf_shape_t shape)
{
    zf_tensor_t *t = kt_zeros(ZF_FLOAT, shape);
    float *p = zf_tensor_data(t);
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) p[i] = (float)i;
    return t;
}

static void test_gpu_split_unpack_and_gather_match_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    /* Split [2,6] along dim 1 into 3: piece k holds columns 2k and 2k+1 */
    Tensorflow__NodeDef *n = s_node("Split", 2, ZF_FLOAT);
    kt_attr_int(n, "num_split", 3);
    s_outputs_like_cpu(dev, n,
                       (zf_tensor_t *[]){KT_I32(zf_shape_scalar(), -1), s_iota(ZF_SHAPE(2, 6))}, 2,
                       (zf_tensor_t *[]){KT_F32(ZF_SHAPE(2, 2), 0, 1, 6, 7),
                                         KT_F32(ZF_SHAPE(2, 2), 2, 3, 8, 9),
                                         KT_F32(ZF_SHAPE(2, 2), 4, 5, 10, 11)},
                       3);
    /* SplitV [3,2] along dim 0 as 1, the rest (-1) and 0 */
    n = s_node("SplitV", 3, ZF_FLOAT);
    kt_attr_int(n, "num_split", 3);
    s_outputs_like_cpu(dev, n,
                       (zf_tensor_t *[]){s_iota(ZF_SHAPE(3, 2)), KT_I32(ZF_SHAPE(3), 1, -1, 0),
                                         KT_I32(zf_shape_scalar(), 0)},
                       3,
                       (zf_tensor_t *[]){KT_F32(ZF_SHAPE(1, 2), 0, 1),
                                         KT_F32(ZF_SHAPE(2, 2), 2, 3, 4, 5),
                                         kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 2))},
                       3);
    /* Unpack [2,3] along dim 1: the columns */
    n = s_node("Unpack", 1, ZF_FLOAT);
    kt_attr_int(n, "num", 3);
    kt_attr_int(n, "axis", 1);
    s_outputs_like_cpu(dev, n, (zf_tensor_t *[]){s_iota(ZF_SHAPE(2, 3))}, 1,
                       (zf_tensor_t *[]){KT_F32(ZF_SHAPE(2), 0, 3), KT_F32(ZF_SHAPE(2), 1, 4),
                                         KT_F32(ZF_SHAPE(2), 2, 5)},
                       3);
    /* Gather rows 2, 0, 2 of [3,2] */
    n = kt_node_new("k", "Gather", 2);
    kt_attr_type(n, "Tparams", ZF_FLOAT);
    s_outputs_like_cpu(dev, n,
                       (zf_tensor_t *[]){s_iota(ZF_SHAPE(3, 2)), KT_I32(ZF_SHAPE(3), 2, 0, 2)}, 2,
                       (zf_tensor_t *[]){KT_F32(ZF_SHAPE(3, 2), 4, 5, 0, 1, 4, 5)}, 1);
    /* double and half move their bytes as the CPU kernels do */
    for (size_t k = 0; k < 2; k++) {
        n = s_node("Split", 2, s_types[k]);
        kt_attr_int(n, "num_split", 2);
        zf_tensor_t *in[2] = {KT_I32(zf_shape_scalar(), 1),
                              s_random(s_types[k], ZF_SHAPE(3, 4, 5), 15, -1)};
        zf_tensor_t *cpu[2] = {NULL}, *gpu[2] = {NULL};
        ASSERT_OK(kt_run(n, in, 2, cpu, 2));
        ASSERT_OK(gt_run(dev, n, in, 2, gpu, 2));
        for (int i = 0; i < 2; i++) s_expect_close(gpu[i], cpu[i], 0, "Split");
        kt_unref_all(cpu, 2);
        kt_unref_all(gpu, 2);
        kt_unref_all(in, 2);
        kt_node_free(&n);
    }
    /* errors are the CPU kernels', found on the host */
    zf_tensor_t *out[3] = {NULL};
    n = s_node("Split", 2, ZF_FLOAT);
    kt_attr_int(n, "num_split", 3);
    zf_tensor_t *in[3] = {KT_I32(zf_shape_scalar(), 2), kt_zeros(ZF_FLOAT, ZF_SHAPE(3, 3)), NULL};
    zf_test_expect_error(gt_run(dev, n, in, 2, out, 3), ZF_INVALID_ARGUMENT,
                         "k (Split): -input rank(-2) <= split_dim < input rank (2), but got 2");
    kt_node_free(&n);
    n = s_node("Unpack", 1, ZF_FLOAT);
    kt_attr_int(n, "num", 2);
    zf_test_expect_error(gt_run(dev, n, &in[1], 1, out, 2), ZF_INVALID_ARGUMENT,
                         "k (Unpack): Input shape axis 0 must equal 2, got shape [3,3]");
    kt_node_free(&n);
    n = kt_node_new("k", "Gather", 2);
    kt_attr_type(n, "Tparams", ZF_FLOAT);
    in[2] = KT_I32(ZF_SHAPE(1), 3);
    zf_test_expect_error(gt_run(dev, n, &in[1], 2, out, 1), ZF_INVALID_ARGUMENT,
                         "k (Gather): indices[0] = 3 is not in [0, 3)");
    for (int i = 0; i < 3; i++) assert_null(out[i]);
    kt_node_free(&n);
    kt_unref_all(in, 3);
    zf_device_destroy(&dev);
}

/* ---- Conv2D --------------------------------------------------------------------------------- */

typedef struct {
    zf_shape_t x, f;
    int64_t sh, sw, dh, dw;
    const char *padding;
} s_conv_case_t;

static void test_gpu_conv2d_matches_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    const s_conv_case_t cases[] = {
        {ZF_SHAPE(2, 7, 9, 3), ZF_SHAPE(3, 3, 3, 5), 1, 1, 1, 1, "SAME"},
        {ZF_SHAPE(2, 7, 9, 3), ZF_SHAPE(3, 3, 3, 5), 1, 1, 1, 1, "VALID"},
        {ZF_SHAPE(1, 10, 11, 4), ZF_SHAPE(3, 2, 4, 6), 2, 3, 1, 1, "SAME"},
        {ZF_SHAPE(1, 10, 11, 4), ZF_SHAPE(3, 3, 4, 2), 1, 1, 2, 3, "SAME"},
        {ZF_SHAPE(3, 12, 12, 2), ZF_SHAPE(2, 2, 2, 3), 2, 2, 2, 1, "VALID"},
        {ZF_SHAPE(2, 5, 6, 8), ZF_SHAPE(1, 1, 8, 16), 1, 1, 1, 1, "VALID"}, /* a plain GEMM */
        {ZF_SHAPE(2, 64, 64, 16), ZF_SHAPE(5, 5, 16, 32), 1, 1, 1, 1, "SAME"},
        {ZF_SHAPE(0, 5, 5, 2), ZF_SHAPE(3, 3, 2, 4), 1, 1, 1, 1, "SAME"},
        {ZF_SHAPE(1, 4, 4, 0), ZF_SHAPE(3, 3, 0, 4), 1, 1, 1, 1, "SAME"},
    };
    for (size_t k = 0; k < 2; k++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const s_conv_case_t *cc = &cases[c];
            zf_tensor_t *in[2] = {s_random(s_types[k], cc->x, (uint32_t)c, -1),
                                  s_random(s_types[k], cc->f, (uint32_t)c + 50, -1)};
            Tensorflow__NodeDef *n = s_node("Conv2D", 2, s_types[k]);
            KT_ATTR_INTS(n, "strides", 1, cc->sh, cc->sw, 1);
            KT_ATTR_INTS(n, "dilations", 1, cc->dh, cc->dw, 1);
            kt_attr_string(n, "padding", cc->padding);
            /* sums of up to 400 products differ in rounding order */
            s_same_as_cpu(dev, n, in, 2, s_types[k] == ZF_FLOAT ? 1e-4 : 1e-12);
            kt_node_free(&n);
            kt_unref_all(in, 2);
        }
    zf_device_destroy(&dev);
}

/* ---- MatMul ---------------------------------------------------------------------------- */

static double s_at(const zf_tensor_t *t, bool trans, int64_t i, int64_t j)
{
    int64_t cols = zf_tensor_shape(t)->dims[1];
    return s_get(t, trans ? j * cols + i : i * cols + j);
}

static void s_check_matmul(zf_device_t *dev, zf_dtype_t t, int64_t m, int64_t k, int64_t n, bool ta,
                           bool tb)
{
    zf_tensor_t *a = ta ? s_random(t, ZF_SHAPE(k, m), 3, -1) : s_random(t, ZF_SHAPE(m, k), 3, -1);
    zf_tensor_t *b = tb ? s_random(t, ZF_SHAPE(n, k), 4, -1) : s_random(t, ZF_SHAPE(k, n), 4, -1);
    Tensorflow__NodeDef *node = s_node("MatMul", 2, t);
    kt_attr_bool(node, "transpose_a", ta);
    kt_attr_bool(node, "transpose_b", tb);
    zf_tensor_t *c = NULL;
    ASSERT_OK(gt_run(dev, node, (zf_tensor_t *[]){a, b}, 2, &c, 1));
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

static void test_gpu_matmul_matches_a_naive_loop_for_every_transpose(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    for (size_t k = 0; k < 2; k++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                s_check_matmul(dev, s_types[k], 3, 4, 5, ta, tb);
                s_check_matmul(dev, s_types[k], 65, 33, 17, ta, tb);
                s_check_matmul(dev, s_types[k], 1, 300, 1, ta, tb);
            }
    zf_device_destroy(&dev);
}

static void test_gpu_matmul_handles_empty_dims_and_bad_shapes(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    Tensorflow__NodeDef *n = s_node("MatMul", 2, ZF_FLOAT);
    zf_tensor_t *in[2] = {kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 0)), kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 3))};
    zf_tensor_t *out = NULL;
    ASSERT_OK(gt_run(dev, n, in, 2, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 3), 0, 0, 0, 0, 0, 0, 0);
    zf_tensor_unref(&out);
    kt_unref_all(in, 2);
    in[0] = kt_zeros(ZF_FLOAT, ZF_SHAPE(2, 3));
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 5));
    zf_test_expect_error(gt_run(dev, n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "k (MatMul): Matrix size-incompatible: In[0]: [2,3], In[1]: [4,5]");
    zf_tensor_unref(&in[1]);
    in[1] = kt_zeros(ZF_FLOAT, ZF_SHAPE(3));
    zf_test_expect_error(gt_run(dev, n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "In[1] is not a matrix. Instead it has shape [3]");
    kt_unref_all(in, 2);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

/* ---- Cast, Fill, ZerosLike, OnesLike --------------------------------------------------- */

static void test_gpu_cast_matches_the_cpu(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    const zf_dtype_t pairs[][2] = {{ZF_FLOAT, ZF_DOUBLE}, {ZF_DOUBLE, ZF_FLOAT},
                                   {ZF_FLOAT, ZF_INT64},  {ZF_DOUBLE, ZF_BOOL},
                                   {ZF_BOOL, ZF_FLOAT},   {ZF_INT64, ZF_DOUBLE}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        zf_tensor_t *x = NULL;
        if (pairs[i][0] == ZF_BOOL)
            x = KT_BOOL(ZF_SHAPE(4), true, false, false, true);
        else if (pairs[i][0] == ZF_INT64)
            x = KT_I64(ZF_SHAPE(3), -5, 0, 1LL << 40);
        else
            x = s_random(pairs[i][0], ZF_SHAPE(50), (uint32_t)i, -4.0);
        Tensorflow__NodeDef *n = kt_node_new("c", "Cast", 1);
        kt_attr_type(n, "SrcT", pairs[i][0]);
        kt_attr_type(n, "DstT", pairs[i][1]);
        s_same_as_cpu(dev, n, &x, 1, 0);
        kt_node_free(&n);
        zf_tensor_unref(&x);
    }
    zf_tensor_t *f = KT_F32(ZF_SHAPE(3), 1.5f, -0.0f, 65504.0f), *h = NULL;
    Tensorflow__NodeDef *n = kt_node_new("c", "Cast", 1);
    kt_attr_type(n, "SrcT", ZF_FLOAT);
    kt_attr_type(n, "DstT", ZF_HALF);
    ASSERT_OK(gt_run(dev, n, &f, 1, &h, 1));
    zf_tensor_t *want = s_half(ZF_SHAPE(3), (const float[]){1.5f, -0.0f, 65504.0f});
    s_expect_close(h, want, 0, "Cast to half");
    kt_unref_all((zf_tensor_t *[]){f, h, want}, 3);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static void test_gpu_fill_zeros_like_and_ones_like(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    Tensorflow__NodeDef *n = s_node("Fill", 2, ZF_FLOAT);
    kt_attr_type(n, "index_type", ZF_INT32);
    zf_tensor_t *in[2] = {KT_I32(ZF_SHAPE(2), 2, 3), KT_F32(zf_shape_scalar(), 2.5f)};
    zf_tensor_t *out = NULL;
    ASSERT_OK(gt_run(dev, n, in, 2, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(2, 3), 0, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5);
    zf_tensor_unref(&out);
    zf_tensor_unref(&in[0]);
    in[0] = KT_I32(ZF_SHAPE(2), 2, -3);
    zf_test_expect_error(gt_run(dev, n, in, 2, &out, 1), ZF_INVALID_ARGUMENT,
                         "dims[1] = -3 must be non-negative");
    kt_unref_all(in, 2);
    kt_node_free(&n);
    zf_tensor_t *x = KT_F64(ZF_SHAPE(3), 7, 8, 9);
    n = s_node("ZerosLike", 1, ZF_DOUBLE);
    ASSERT_OK(gt_run(dev, n, &x, 1, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, 0, 0, 0);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = s_node("OnesLike", 1, ZF_DOUBLE);
    ASSERT_OK(gt_run(dev, n, &x, 1, &out, 1));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 0, 1, 1, 1);
    kt_unref_all((zf_tensor_t *[]){x, out}, 2);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

/* ---- data-moving kernels ------------------------------------------------------------ */

/* Runs def on dev once with device-side inputs in, outputs into out. */
static zf_status_t s_compute(zf_device_t *dev, const Tensorflow__NodeDef *node, void *state,
                             zf_tensor_t **in, int n_in, zf_tensor_t **out, int n_out)
{
    const zf_kernel_t *def = NULL;
    ZF_TRY(zf_kernel_find("GPU", node, &def));
    zf_kernel_ctx_t ctx = {.node = node,
                           .state = state,
                           .device = dev,
                           .inputs = in,
                           .num_inputs = n_in,
                           .outputs = out,
                           .num_outputs = n_out};
    return def->compute(&ctx);
}

static void test_gpu_const_is_copied_to_the_gpu_once(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_kernels_register_builtin(true);
    zf_tensor_t *value = KT_F32(ZF_SHAPE(2), 3.5f, -1.0f), *o1 = NULL, *o2 = NULL, *back = NULL;
    Tensorflow__NodeDef *n = kt_node_new("c", "Const", 0);
    kt_attr_type(n, "dtype", ZF_FLOAT);
    kt_attr_tensor(n, "value", value);
    const zf_kernel_t *def = NULL;
    ASSERT_OK(zf_kernel_find("GPU", n, &def));
    void *st = NULL;
    ASSERT_OK(def->create(n, &st));
    ASSERT_OK(s_compute(dev, n, st, NULL, 0, &o1, 1));
    ASSERT_OK(s_compute(dev, n, st, NULL, 0, &o2, 1));
    assert_int_equal(zf_tensor_memory_kind(o1), ZF_MEMORY_DEVICE);
    assert_ptr_equal(zf_tensor_data(o1), zf_tensor_data(o2));
    ASSERT_OK(zf_gpu_tensor_to_host(dev, o1, &back));
    assert_true(zf_tensor_equal(back, value));
    def->destroy(st);
    kt_unref_all((zf_tensor_t *[]){value, o1, o2, back}, 4);
    kt_node_free(&n);
    /* INT32 constants stay in host memory. */
    value = KT_I32(ZF_SHAPE(2), 4, 5);
    n = kt_node_new("c", "Const", 0);
    kt_attr_type(n, "dtype", ZF_INT32);
    kt_attr_tensor(n, "value", value);
    ASSERT_OK(gt_run(dev, n, NULL, 0, &o1, 1));
    KT_EXPECT_INTS(o1, ZF_SHAPE(2), 4, 5);
    kt_unref_all((zf_tensor_t *[]){value, o1}, 2);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

/* Reshape, ExpandDims and Squeeze are views of the input's GPU memory. */
static void test_gpu_shape_kernels_view_the_same_gpu_memory(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_kernels_register_builtin(true);
    zf_tensor_t *host = KT_F32(ZF_SHAPE(2, 3), 1, 2, 3, 4, 5, 6), *d = NULL, *out = NULL;
    ASSERT_OK(zf_gpu_tensor_to_device(dev, host, &d));
    Tensorflow__NodeDef *n = s_node("Reshape", 2, ZF_FLOAT);
    zf_tensor_t *shape = KT_I32(ZF_SHAPE(2), 3, -1);
    ASSERT_OK(s_compute(dev, n, NULL, (zf_tensor_t *[]){d, shape}, 2, &out, 1));
    kt_expect_shape(out, ZF_SHAPE(3, 2));
    assert_ptr_equal(zf_tensor_data(out), zf_tensor_data(d));
    zf_tensor_unref(&out);
    zf_tensor_unref(&shape);
    shape = KT_I32(ZF_SHAPE(1), 4);
    zf_test_expect_error(
        s_compute(dev, n, NULL, (zf_tensor_t *[]){d, shape}, 2, &out, 1), ZF_INVALID_ARGUMENT,
        "Input to reshape is a tensor with 6 values, but the requested shape has 4");
    zf_tensor_unref(&shape);
    kt_node_free(&n);
    n = s_node("ExpandDims", 2, ZF_FLOAT);
    zf_tensor_t *dim = KT_I32(zf_shape_scalar(), -1);
    ASSERT_OK(s_compute(dev, n, NULL, (zf_tensor_t *[]){d, dim}, 2, &out, 1));
    kt_expect_shape(out, ZF_SHAPE(2, 3, 1));
    zf_tensor_t *expanded = out;
    out = NULL;
    kt_node_free(&n);
    n = s_node("Squeeze", 1, ZF_FLOAT);
    ASSERT_OK(s_compute(dev, n, NULL, &expanded, 1, &out, 1));
    kt_expect_shape(out, ZF_SHAPE(2, 3));
    assert_ptr_equal(zf_tensor_data(out), zf_tensor_data(d));
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = s_node("Squeeze", 1, ZF_FLOAT);
    KT_ATTR_INTS(n, "squeeze_dims", 0);
    zf_test_expect_error(s_compute(dev, n, NULL, &expanded, 1, &out, 1), ZF_INVALID_ARGUMENT,
                         "Can not squeeze dim[0], expected a dimension of 1, got 2");
    kt_unref_all((zf_tensor_t *[]){host, d, dim, expanded}, 4);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static void test_gpu_shape_size_and_rank_answer_in_host_memory(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *x = kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 0, 3)), *out = NULL;
    Tensorflow__NodeDef *n = s_node("Shape", 1, ZF_FLOAT);
    ASSERT_OK(gt_run(dev, n, &x, 1, &out, 1));
    KT_EXPECT_INTS(out, ZF_SHAPE(3), 4, 0, 3);
    zf_tensor_unref(&out);
    kt_attr_type(n, "out_type", ZF_INT64);
    ASSERT_OK(gt_run(dev, n, &x, 1, &out, 1));
    assert_int_equal(zf_tensor_dtype(out), ZF_INT64);
    KT_EXPECT_INTS(out, ZF_SHAPE(3), 4, 0, 3);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    zf_tensor_unref(&x);
    x = kt_zeros(ZF_FLOAT, ZF_SHAPE(4, 5));
    n = s_node("Size", 1, ZF_FLOAT);
    ASSERT_OK(gt_run(dev, n, &x, 1, &out, 1));
    KT_EXPECT_INTS(out, zf_shape_scalar(), 20);
    zf_tensor_unref(&out);
    kt_node_free(&n);
    n = s_node("Rank", 1, ZF_FLOAT);
    ASSERT_OK(gt_run(dev, n, &x, 1, &out, 1));
    KT_EXPECT_INTS(out, zf_shape_scalar(), 2);
    kt_unref_all((zf_tensor_t *[]){x, out}, 2);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

static void test_gpu_identities_forward_their_inputs(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_kernels_register_builtin(true);
    zf_tensor_t *host = KT_F32(ZF_SHAPE(2), 1, 2), *d = NULL, *out[2] = {NULL, NULL};
    ASSERT_OK(zf_gpu_tensor_to_device(dev, host, &d));
    const char *ops[] = {"Identity", "StopGradient"};
    for (int i = 0; i < 2; i++) {
        Tensorflow__NodeDef *n = s_node(ops[i], 1, ZF_FLOAT);
        ASSERT_OK(s_compute(dev, n, NULL, &d, 1, out, 1));
        assert_ptr_equal(out[0], d);
        zf_tensor_unref(&out[0]);
        kt_node_free(&n);
    }
    Tensorflow__NodeDef *n = kt_node_new("k", "IdentityN", 2);
    ASSERT_OK(s_compute(dev, n, NULL, (zf_tensor_t *[]){d, host}, 2, out, 2));
    assert_ptr_equal(out[0], d);
    assert_ptr_equal(out[1], host);
    kt_unref_all(out, 2);
    kt_node_free(&n);
    n = kt_node_new("k", "NoOp", 0);
    ASSERT_OK(s_compute(dev, n, NULL, NULL, 0, NULL, 0));
    kt_node_free(&n);
    kt_unref_all((zf_tensor_t *[]){host, d}, 2);
    zf_device_destroy(&dev);
}

static void test_gpu_int32_arithmetic_runs_on_the_host(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_tensor_t *in[2] = {KT_I32(ZF_SHAPE(2), 3, 4), KT_I32(ZF_SHAPE(1), 10)}, *out = NULL;
    Tensorflow__NodeDef *n = s_node("Mul", 2, ZF_INT32);
    ASSERT_OK(gt_run(dev, n, in, 2, &out, 1));
    assert_int_not_equal(zf_tensor_memory_kind(out), ZF_MEMORY_DEVICE);
    KT_EXPECT_INTS(out, ZF_SHAPE(2), 30, 40);
    kt_unref_all((zf_tensor_t *[]){in[0], in[1], out}, 3);
    kt_node_free(&n);
    zf_device_destroy(&dev);
}

/* ---- Send / Recv ------------------------------------------------------------------------ */

static Tensorflow__NodeDef *s_sendrecv_node(const char *op, const char *from, const char *to)
{
    bool recv = strstr(op, "Recv") != NULL;
    Tensorflow__NodeDef *n = kt_node_new("sr", op, recv ? 0 : 1);
    kt_attr_type(n, recv ? "tensor_type" : "T", ZF_FLOAT);
    kt_attr_string(n, "tensor_name", "edge_1_x");
    kt_attr_string(n, "send_device", from);
    kt_attr_int(n, "send_device_incarnation", 7);
    kt_attr_string(n, "recv_device", to);
    kt_attr_bool(n, "client_terminated", false);
    return n;
}

/* Runs a GPU _Send or _Recv node through create, compute and destroy. */
static void s_run_sendrecv(zf_device_t *dev, const Tensorflow__NodeDef *n, zf_rendezvous_t *r,
                           zf_tensor_t *in, zf_tensor_t **out)
{
    const zf_kernel_t *def = NULL;
    ASSERT_OK(zf_kernel_find("GPU", n, &def));
    void *st = NULL;
    ASSERT_OK(def->create(n, &st));
    zf_kernel_ctx_t ctx = {.node = n,
                           .state = st,
                           .device = dev,
                           .inputs = &in,
                           .num_inputs = in ? 1 : 0,
                           .outputs = out,
                           .num_outputs = out ? 1 : 0,
                           .rendezvous = r};
    if (def->compute) {
        ASSERT_OK(def->compute(&ctx));
    } else {
        kt_done_t done = {false, ZF_STATUS_OK};
        def->compute_async(&ctx, kt_on_done, &done);
        assert_true(done.fired); /* the value was already there */
        ASSERT_OK(done.status);
    }
    def->destroy(st);
}

static void test_gpu_send_hands_a_cpu_receiver_host_memory(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_kernels_register_builtin(true);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_new(1, &r));
    zf_tensor_t *host = KT_F32(ZF_SHAPE(3), 1, 2, 3), *d = NULL, *got = NULL;
    ASSERT_OK(zf_gpu_tensor_to_device(dev, host, &d));
    Tensorflow__NodeDef *n = s_sendrecv_node("_Send", S_GPU0, S_CPU0);
    s_run_sendrecv(dev, n, r, d, NULL);
    char *key = zf_rendezvous_key(S_GPU0, 7, S_CPU0, "edge_1_x");
    ASSERT_OK(zf_rendezvous_recv(r, key, 1000, &got, NULL));
    assert_int_not_equal(zf_tensor_memory_kind(got), ZF_MEMORY_DEVICE);
    assert_true(zf_tensor_equal(got, host));
    free(key);
    kt_unref_all((zf_tensor_t *[]){host, d, got}, 3);
    kt_node_free(&n);
    zf_rendezvous_unref(&r);
    zf_device_destroy(&dev);
}

static void test_gpu_recv_brings_host_values_into_gpu_memory(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_kernels_register_builtin(true);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_new(2, &r));
    zf_tensor_t *host = KT_F32(ZF_SHAPE(2), 5, 6), *out = NULL, *back = NULL;
    char *key = zf_rendezvous_key(S_CPU0, 7, S_GPU0, "edge_1_x");
    ASSERT_OK(zf_rendezvous_send(r, key, host, false));
    Tensorflow__NodeDef *n = s_sendrecv_node("_Recv", S_CPU0, S_GPU0);
    s_run_sendrecv(dev, n, r, NULL, &out);
    assert_int_equal(zf_tensor_memory_kind(out), ZF_MEMORY_DEVICE);
    ASSERT_OK(zf_gpu_tensor_to_host(dev, out, &back));
    assert_true(zf_tensor_equal(back, host));
    zf_tensor_unref(&out);
    kt_node_free(&n);
    /* _HostRecv keeps it in host memory. */
    ASSERT_OK(zf_rendezvous_send(r, key, host, false));
    n = s_sendrecv_node("_HostRecv", S_CPU0, S_GPU0);
    s_run_sendrecv(dev, n, r, NULL, &out);
    assert_ptr_equal(out, host);
    free(key);
    kt_unref_all((zf_tensor_t *[]){host, out, back}, 3);
    kt_node_free(&n);
    zf_rendezvous_unref(&r);
    zf_device_destroy(&dev);
}

/* Between GPUs the tensor stays in GPU memory all the way. */
static void test_gpu_send_to_a_gpu_keeps_the_tensor_in_gpu_memory(void **state)
{
    (void)state;
    zf_device_t *dev = gt_gpu_or_skip();
    zf_kernels_register_builtin(true);
    zf_rendezvous_t *r = NULL;
    ASSERT_OK(zf_rendezvous_new(3, &r));
    zf_tensor_t *host = KT_F32(ZF_SHAPE(2), 8, 9), *d = NULL, *out = NULL;
    ASSERT_OK(zf_gpu_tensor_to_device(dev, host, &d));
    Tensorflow__NodeDef *send = s_sendrecv_node("_Send", S_GPU0, S_GPU0);
    Tensorflow__NodeDef *recv = s_sendrecv_node("_Recv", S_GPU0, S_GPU0);
    s_run_sendrecv(dev, send, r, d, NULL);
    s_run_sendrecv(dev, recv, r, NULL, &out);
    assert_ptr_equal(out, d);
    kt_unref_all((zf_tensor_t *[]){host, d, out}, 3);
    kt_node_free(&send);
    kt_node_free(&recv);
    zf_rendezvous_unref(&r);
    zf_device_destroy(&dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_unary_kernels_match_the_cpu),
        cmocka_unit_test(test_gpu_binary_kernels_broadcast_like_the_cpu),
        cmocka_unit_test(test_gpu_kernels_compute_half_in_float),
        cmocka_unit_test(test_gpu_binary_kernel_rejects_incompatible_shapes),
        cmocka_unit_test(test_gpu_activations_and_rounding_match_the_cpu),
        cmocka_unit_test(test_gpu_activation_gradients_match_the_cpu),
        cmocka_unit_test(test_gpu_pow_broadcasts_like_the_cpu),
        cmocka_unit_test(test_gpu_bias_add_matches_the_cpu_in_both_layouts),
        cmocka_unit_test(test_gpu_reductions_match_the_cpu),
        cmocka_unit_test(test_gpu_bias_add_grad_matches_the_cpu_in_both_layouts),
        cmocka_unit_test(test_gpu_reductions_of_nothing_give_the_identity),
        cmocka_unit_test(test_gpu_all_and_any_match_the_cpu),
        cmocka_unit_test(test_gpu_argmax_and_argmin_match_the_cpu),
        cmocka_unit_test(test_gpu_softmax_matches_the_cpu),
        cmocka_unit_test(test_gpu_add_n_matches_the_cpu_and_a_running_sum),
        cmocka_unit_test(test_gpu_slicing_padding_and_transposing_match_the_cpu),
        cmocka_unit_test(test_gpu_split_unpack_and_gather_match_the_cpu),
        cmocka_unit_test(test_gpu_conv2d_matches_the_cpu),
        cmocka_unit_test(test_gpu_matmul_matches_a_naive_loop_for_every_transpose),
        cmocka_unit_test(test_gpu_matmul_handles_empty_dims_and_bad_shapes),
        cmocka_unit_test(test_gpu_cast_matches_the_cpu),
        cmocka_unit_test(test_gpu_fill_zeros_like_and_ones_like),
        cmocka_unit_test(test_gpu_const_is_copied_to_the_gpu_once),
        cmocka_unit_test(test_gpu_shape_kernels_view_the_same_gpu_memory),
        cmocka_unit_test(test_gpu_shape_size_and_rank_answer_in_host_memory),
        cmocka_unit_test(test_gpu_identities_forward_their_inputs),
        cmocka_unit_test(test_gpu_int32_arithmetic_runs_on_the_host),
        cmocka_unit_test(test_gpu_send_hands_a_cpu_receiver_host_memory),
        cmocka_unit_test(test_gpu_recv_brings_host_values_into_gpu_memory),
        cmocka_unit_test(test_gpu_send_to_a_gpu_keeps_the_tensor_in_gpu_memory),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return gt_exit_code(failed, (int)(sizeof tests / sizeof tests[0]));
}
