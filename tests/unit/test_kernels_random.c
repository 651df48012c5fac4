/* Tests for executor/kernels/kernels_random: RandomUniform,
 * RandomStandardNormal, TruncatedNormal and RandomUniformInt — sample
 * statistics within bounds far wider than their sampling error (the seeds
 * are fixed, so they cannot flake), ranges, truncation, repeatability for
 * fixed seeds across kernels, runs and thread splits, fresh values for
 * zero seeds, shapes and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

/* One kernel instance, created once and run any number of times. */
typedef struct {
    Tensorflow__NodeDef *node;
    const zf_kernel_t *k;
    void *state;
} s_kernel_t;

static void s_open(s_kernel_t *kn, const char *op, zf_dtype_t dtype, int64_t seed, int64_t seed2)
{
    bool ints = !strcmp(op, "RandomUniformInt");
    kn->node = kt_node_new("rnd", op, ints ? 3 : 1);
    kt_attr_type(kn->node, ints ? "Tout" : "dtype", dtype);
    kt_attr_type(kn->node, "T", ZF_INT32);
    kt_attr_int(kn->node, "seed", seed);
    kt_attr_int(kn->node, "seed2", seed2);
    zf_kernels_register_builtin(false);
    ASSERT_OK(zf_kernel_find("CPU", kn->node, &kn->k));
    kn->state = NULL;
    ASSERT_OK(kn->k->create(kn->node, &kn->state));
}

static void s_close(s_kernel_t *kn)
{
    kn->k->destroy(kn->state);
    kt_node_free(&kn->node);
}

/* Runs the kernel on inputs (taken), on dev when not NULL. */
static zf_status_t s_next_on(s_kernel_t *kn, zf_tensor_t **in, int n, zf_device_t *dev,
                             zf_tensor_t **out)
{
    *out = NULL;
    zf_kernel_ctx_t ctx = {.node = kn->node,
                           .state = kn->state,
                           .device = dev,
                           .inputs = in,
                           .num_inputs = n,
                           .outputs = out,
                           .num_outputs = 1};
    zf_status_t s = kn->k->compute(&ctx);
    kt_unref_all(in, n);
    if (!zf_ok(s)) zf_tensor_unref(out);
    return s;
}

/* A run of shape [count] (int32 shape input). */
static zf_tensor_t *s_next(s_kernel_t *kn, int32_t count)
{
    zf_tensor_t *in = KT_I32(ZF_SHAPE(1), count), *out = NULL;
    ASSERT_OK(s_next_on(kn, &in, 1, NULL, &out));
    return out;
}

/* One run of a fresh kernel. */
static zf_tensor_t *s_sample(const char *op, zf_dtype_t dtype, int64_t seed, int64_t seed2,
                             int32_t count)
{
    s_kernel_t kn;
    s_open(&kn, op, dtype, seed, seed2);
    zf_tensor_t *t = s_next(&kn, count);
    s_close(&kn);
    return t;
}

static double s_at(const zf_tensor_t *t, int64_t i)
{
    switch (zf_tensor_dtype(t)) {
    case ZF_FLOAT: return ((const float *)zf_tensor_data(t))[i];
    case ZF_DOUBLE: return ((const double *)zf_tensor_data(t))[i];
    case ZF_INT32: return ((const int32_t *)zf_tensor_data(t))[i];
    default: return (double)((const int64_t *)zf_tensor_data(t))[i];
    }
}

/* Mean and standard deviation of t's elements. */
static void s_moments(const zf_tensor_t *t, double *mean, double *sd)
{
    int64_t n = zf_tensor_num_elements(t);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += s_at(t, i);
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (s_at(t, i) - *mean) * (s_at(t, i) - *mean);
    *sd = sqrt(s2 / (double)(n - 1));
}

static bool s_same(const zf_tensor_t *a, const zf_tensor_t *b)
{
    return zf_tensor_num_elements(a) == zf_tensor_num_elements(b) &&
           memcmp(zf_tensor_data(a), zf_tensor_data(b),
                  (size_t)zf_tensor_num_elements(a) * zf_dtype_size(zf_tensor_dtype(a))) == 0;
}

#define S_SAMPLES 100000

/* ---- distributions ---------------------------------------------------------------------- */

static void test_uniform_fills_the_unit_interval_evenly(void **state)
{
    (void)state;
    const zf_dtype_t types[2] = {ZF_FLOAT, ZF_DOUBLE};
    for (int k = 0; k < 2; k++) {
        zf_tensor_t *t = s_sample("RandomUniform", types[k], 11, 5, S_SAMPLES);
        kt_expect_shape(t, ZF_SHAPE(S_SAMPLES));
        int64_t buckets[10] = {0};
        for (int64_t i = 0; i < S_SAMPLES; i++) {
            double v = s_at(t, i);
            assert_true(v >= 0 && v < 1);
            buckets[(int)(v * 10)]++;
        }
        /* each tenth holds 10000 +- 100 (1 sigma); allow 10 sigma */
        for (int b = 0; b < 10; b++) assert_true(llabs(buckets[b] - S_SAMPLES / 10) < 1000);
        double mean = 0, sd = 0;
        s_moments(t, &mean, &sd);
        assert_true(fabs(mean - 0.5) < 0.01);
        assert_true(fabs(sd - sqrt(1.0 / 12)) < 0.01);
        zf_tensor_unref(&t);
    }
}

static void test_standard_normal_has_unit_moments(void **state)
{
    (void)state;
    const zf_dtype_t types[2] = {ZF_FLOAT, ZF_DOUBLE};
    for (int k = 0; k < 2; k++) {
        zf_tensor_t *t = s_sample("RandomStandardNormal", types[k], 3, 99, S_SAMPLES);
        double mean = 0, sd = 0;
        s_moments(t, &mean, &sd);
        assert_true(fabs(mean) < 0.02);
        assert_true(fabs(sd - 1) < 0.02);
        int64_t beyond = 0; /* P(|x| > 2) = erfc(sqrt 2) = 0.0455 */
        for (int64_t i = 0; i < S_SAMPLES; i++) beyond += fabs(s_at(t, i)) > 2;
        assert_true(fabs((double)beyond / S_SAMPLES - erfc(sqrt(2.0))) < 0.006);
        zf_tensor_unref(&t);
    }
}

static void test_truncated_normal_stays_within_two_stddevs(void **state)
{
    (void)state;
    /* the standard deviation of a unit normal cut at +-2 */
    double phi2 = exp(-2.0) / sqrt(2 * 3.14159265358979323846), mass = erf(sqrt(2.0));
    double want_sd = sqrt(1 - 4 * phi2 / mass);
    const zf_dtype_t types[2] = {ZF_FLOAT, ZF_DOUBLE};
    for (int k = 0; k < 2; k++) {
        zf_tensor_t *t = s_sample("TruncatedNormal", types[k], 8, 1, S_SAMPLES);
        int64_t beyond_1_5 = 0;
        for (int64_t i = 0; i < S_SAMPLES; i++) {
            assert_true(fabs(s_at(t, i)) <= 2.0);
            beyond_1_5 += fabs(s_at(t, i)) > 1.5;
        }
        double mean = 0, sd = 0;
        s_moments(t, &mean, &sd);
        assert_true(fabs(mean) < 0.02);
        assert_true(fabs(sd - want_sd) < 0.02);
        /* P(1.5 < |x| <= 2 | |x| <= 2) = (erf(sqrt 2) - erf(1.5 / sqrt 2)) / erf(sqrt 2) */
        double want = (mass - erf(1.5 / sqrt(2.0))) / mass;
        assert_true(fabs((double)beyond_1_5 / S_SAMPLES - want) < 0.006);
        zf_tensor_unref(&t);
    }
}

/* ---- RandomUniformInt ------------------------------------------------------------------------ */

static zf_status_t s_uniform_int(zf_dtype_t t, int64_t seed, zf_tensor_t *shape, int64_t lo,
                                 int64_t hi, zf_tensor_t **out)
{
    s_kernel_t kn;
    s_open(&kn, "RandomUniformInt", t, seed, 0);
    int32_t lo32 = (int32_t)lo, hi32 = (int32_t)hi;
    zf_tensor_t *in[3] = {shape,
                          kt_tensor(t, zf_shape_scalar(), t == ZF_INT32 ? (void *)&lo32 : &lo, 1),
                          kt_tensor(t, zf_shape_scalar(), t == ZF_INT32 ? (void *)&hi32 : &hi, 1)};
    zf_status_t s = s_next_on(&kn, in, 3, NULL, out);
    s_close(&kn);
    return s;
}

static void test_uniform_int_covers_its_range_evenly(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    ASSERT_OK(s_uniform_int(ZF_INT32, 21, KT_I32(ZF_SHAPE(2), 400, 200), -3, 5, &t));
    kt_expect_shape(t, ZF_SHAPE(400, 200));
    int64_t counts[8] = {0};
    for (int64_t i = 0; i < 80000; i++) {
        int32_t v = ((const int32_t *)zf_tensor_data(t))[i];
        assert_true(v >= -3 && v < 5);
        counts[v + 3]++;
    }
    /* 10000 each, 1 sigma about 94 */
    for (int b = 0; b < 8; b++) assert_true(llabs(counts[b] - 10000) < 1000);
    zf_tensor_unref(&t);
    ASSERT_OK(s_uniform_int(ZF_INT64, 4, KT_I64(ZF_SHAPE(1), 20000), INT64_MIN + 1, INT64_MAX, &t));
    int64_t negative = 0;
    for (int64_t i = 0; i < 20000; i++) {
        int64_t v = ((const int64_t *)zf_tensor_data(t))[i];
        assert_true(v > INT64_MIN);
        negative += v < 0;
    }
    assert_true(llabs(negative - 10000) < 1000);
    zf_tensor_unref(&t);
    ASSERT_OK(s_uniform_int(ZF_INT64, 4, KT_I32(ZF_SHAPE(1), 50), 7, 8, &t));
    for (int64_t i = 0; i < 50; i++) assert_int_equal(((const int64_t *)zf_tensor_data(t))[i], 7);
    zf_tensor_unref(&t);
}

static void test_uniform_int_refuses_bad_bounds(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    zf_test_expect_error(s_uniform_int(ZF_INT32, 1, KT_I32(ZF_SHAPE(1), 3), 5, 5, &t),
                         ZF_INVALID_ARGUMENT,
                         "rnd (RandomUniformInt): Need minval < maxval: 5 >= 5");
    zf_test_expect_error(s_uniform_int(ZF_INT64, 1, KT_I32(ZF_SHAPE(1), 3), 9, -2, &t),
                         ZF_INVALID_ARGUMENT, "Need minval < maxval: 9 >= -2");
    assert_null(t);
    /* an empty output needs no valid range */
    ASSERT_OK(s_uniform_int(ZF_INT32, 1, KT_I32(ZF_SHAPE(2), 0, 4), 5, 5, &t));
    kt_expect_shape(t, ZF_SHAPE(0, 4));
    zf_tensor_unref(&t);
    s_kernel_t kn;
    s_open(&kn, "RandomUniformInt", ZF_INT32, 1, 2);
    zf_tensor_t *in[3] = {KT_I32(ZF_SHAPE(1), 3), KT_I32(ZF_SHAPE(1), 0),
                          KT_I32(zf_shape_scalar(), 4)};
    zf_test_expect_error(s_next_on(&kn, in, 3, NULL, &t), ZF_INVALID_ARGUMENT,
                         "rnd (RandomUniformInt): minval must be 0-D, got shape [1]");
    zf_tensor_t *in2[3] = {KT_I32(ZF_SHAPE(1), 3), KT_I32(zf_shape_scalar(), 0),
                           KT_I64(zf_shape_scalar(), 4)};
    zf_test_expect_error(s_next_on(&kn, in2, 3, NULL, &t), ZF_INVALID_ARGUMENT,
                         "input 2 must be int32, got int64");
    s_close(&kn);
    assert_null(t);
}

/* The generator is Philox4x32-10: with seed 1 and seed2 0x9E3779B97F4A7C15
 * the key (seed * 0x9E3779B97F4A7C15 ^ seed2) is 0, and the first element
 * draws from counter 0, whose output is the published known answer
 * 6627e8d5 e169c58d bc57ac4c 9b00dbd8 (Random123's kat_vectors). Its first
 * 64 bits, below 2^63 - 1, are the first RandomUniformInt in [0, 2^63 - 1). */
static void test_generator_gives_philox_known_answer(void **state)
{
    (void)state;
    s_kernel_t kn;
    s_open(&kn, "RandomUniformInt", ZF_INT64, 1, (int64_t)0x9E3779B97F4A7C15ull);
    int64_t lo = 0, hi = INT64_MAX;
    zf_tensor_t *in[3] = {KT_I32(ZF_SHAPE(1), 1), kt_tensor(ZF_INT64, zf_shape_scalar(), &lo, 1),
                          kt_tensor(ZF_INT64, zf_shape_scalar(), &hi, 1)};
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_next_on(&kn, in, 3, NULL, &out));
    KT_EXPECT_INTS(out, ZF_SHAPE(1), 0x6627e8d5e169c58dLL);
    zf_tensor_unref(&out);
    s_close(&kn);
}

/* ---- seeds ---------------------------------------------------------------------------------- */

static void test_fixed_seeds_repeat_their_sequence(void **state)
{
    (void)state;
    const char *ops[3] = {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"};
    for (int k = 0; k < 3; k++) {
        s_kernel_t a, b;
        s_open(&a, ops[k], ZF_DOUBLE, 42, 7);
        s_open(&b, ops[k], ZF_DOUBLE, 42, 7);
        zf_tensor_t *a1 = s_next(&a, 1000), *a2 = s_next(&a, 1000);
        zf_tensor_t *b1 = s_next(&b, 1000), *b2 = s_next(&b, 1000);
        assert_true(s_same(a1, b1)); /* a new kernel (a new process) starts over */
        assert_true(s_same(a2, b2));
        assert_false(s_same(a1, a2)); /* a second run goes on with new values */
        zf_tensor_t *c = s_sample(ops[k], ZF_DOUBLE, 42, 8, 1000);
        assert_false(s_same(a1, c)); /* another seed2, another sequence */
        zf_tensor_t *d = s_sample(ops[k], ZF_DOUBLE, 43, 7, 1000);
        assert_false(s_same(a1, d));
        zf_tensor_t *all[5] = {a1, a2, b1, b2, c};
        kt_unref_all(all, 5);
        zf_tensor_unref(&d);
        s_close(&a);
        s_close(&b);
    }
}

static void test_values_do_not_depend_on_the_thread_split(void **state)
{
    (void)state;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 3, &dev));
    s_kernel_t a, b;
    s_open(&a, "TruncatedNormal", ZF_FLOAT, 5, 0);
    s_open(&b, "TruncatedNormal", ZF_FLOAT, 5, 0);
    zf_tensor_t *in = KT_I64(ZF_SHAPE(2), 300, 1000), *pooled = NULL;
    ASSERT_OK(s_next_on(&a, &in, 1, dev, &pooled));
    zf_tensor_t *inline_ = s_next(&b, 300000);
    assert_true(s_same(pooled, inline_));
    zf_tensor_unref(&pooled);
    zf_tensor_unref(&inline_);
    s_close(&a);
    s_close(&b);
    zf_device_destroy(&dev);
}

static void test_zero_seeds_draw_fresh_values(void **state)
{
    (void)state;
    zf_tensor_t *a = s_sample("RandomUniform", ZF_FLOAT, 0, 0, 64);
    zf_tensor_t *b = s_sample("RandomUniform", ZF_FLOAT, 0, 0, 64);
    assert_false(s_same(a, b));
    zf_tensor_unref(&a);
    zf_tensor_unref(&b);
    /* one non-zero seed is a fixed seed */
    a = s_sample("RandomStandardNormal", ZF_FLOAT, 0, 9, 64);
    b = s_sample("RandomStandardNormal", ZF_FLOAT, 0, 9, 64);
    assert_true(s_same(a, b));
    zf_tensor_unref(&a);
    zf_tensor_unref(&b);
}

/* ---- shapes and errors ---------------------------------------------------------------------- */

static void test_shapes_and_errors(void **state)
{
    (void)state;
    s_kernel_t kn;
    s_open(&kn, "RandomUniform", ZF_FLOAT, 1, 1);
    zf_tensor_t *out = NULL, *in = kt_zeros(ZF_INT32, ZF_SHAPE(0));
    ASSERT_OK(s_next_on(&kn, &in, 1, NULL, &out)); /* shape [] is a scalar */
    kt_expect_shape(out, zf_shape_scalar());
    zf_tensor_unref(&out);
    in = KT_I64(ZF_SHAPE(3), 2, 0, 5);
    ASSERT_OK(s_next_on(&kn, &in, 1, NULL, &out));
    kt_expect_shape(out, ZF_SHAPE(2, 0, 5));
    zf_tensor_unref(&out);
    in = KT_I32(ZF_SHAPE(2), 3, -1);
    zf_test_expect_error(s_next_on(&kn, &in, 1, NULL, &out), ZF_INVALID_ARGUMENT,
                         "rnd (RandomUniform): Dimension 1 of shape must be >= 0, got -1");
    in = KT_I32(zf_shape_scalar(), 3);
    zf_test_expect_error(s_next_on(&kn, &in, 1, NULL, &out), ZF_INVALID_ARGUMENT,
                         "shape must be a vector of {int32,int64}, got shape []");
    in = KT_F32(ZF_SHAPE(1), 3);
    zf_test_expect_error(s_next_on(&kn, &in, 1, NULL, &out), ZF_INVALID_ARGUMENT,
                         "shape must be int32 or int64, got float");
    assert_null(out);
    s_close(&kn);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_fills_the_unit_interval_evenly),
        cmocka_unit_test(test_standard_normal_has_unit_moments),
        cmocka_unit_test(test_truncated_normal_stays_within_two_stddevs),
        cmocka_unit_test(test_uniform_int_covers_its_range_evenly),
        cmocka_unit_test(test_uniform_int_refuses_bad_bounds),
        cmocka_unit_test(test_generator_gives_philox_known_answer),
        cmocka_unit_test(test_fixed_seeds_repeat_their_sequence),
        cmocka_unit_test(test_values_do_not_depend_on_the_thread_split),
        cmocka_unit_test(test_zero_seeds_draw_fresh_values),
        cmocka_unit_test(test_shapes_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
