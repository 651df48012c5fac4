/* Tests for executor/kernels/kernels_optimizers: Momentum (and Nesterov),
 * KerasMomentum, Adam (and Nesterov), RMSProp and Adagrad in their
 * reference (Apply*) and resource (ResourceApply*) forms, over three steps
 * sharing one resource manager, against the update rules worked out here
 * step by step in double; first steps checked by hand; shape, dtype and
 * uninitialised-variable errors. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_test_util.h"

#define S_N     3 /* elements per variable */
#define S_STEPS 3

typedef enum { S_MOMENTUM, S_KERAS, S_ADAM, S_RMSPROP, S_ADAGRAD } s_kind_t;

/* One optimizer: its op, slot names, and the inputs after the slots in
 * the op's order, grad marked by NAN. */
typedef struct {
    s_kind_t kind;
    const char *op;
    bool resource, nesterov;
    int slots;
    int hypers;
    double hyper[7];
} s_case_t;

static double s_get(const zf_tensor_t *t, int64_t i)
{
    return zf_tensor_dtype(t) == ZF_FLOAT ? ((const float *)zf_tensor_data(t))[i]
                                          : ((const double *)zf_tensor_data(t))[i];
}

static zf_tensor_t *s_tensor(zf_dtype_t t, zf_shape_t s, const double *v)
{
    zf_tensor_t *x = kt_zeros(t, s);
    for (int64_t i = 0; i < zf_tensor_num_elements(x); i++) {
        if (t == ZF_FLOAT)
            ((float *)zf_tensor_data(x))[i] = (float)v[i];
        else
            ((double *)zf_tensor_data(x))[i] = v[i];
    }
    return x;
}

/* ---- variables ------------------------------------------------------------------------------ */

/* A variable called name holding value: its ref (VariableV2 + Assign) or
 * its handle (VarHandleOp + AssignVariableOp), returned. */
static zf_tensor_t *s_variable(zf_resource_mgr_t *mgr, const char *name, bool resource,
                               zf_tensor_t *value)
{
    zf_dtype_t t = zf_tensor_dtype(value);
    Tensorflow__NodeDef *v = kt_node_new(name, resource ? "VarHandleOp" : "VariableV2", 0);
    kt_attr_type(v, "dtype", t);
    kt_attr_shape(v, "shape", zf_tensor_shape(value));
    Tensorflow__NodeDef *a = kt_node_new("assign", resource ? "AssignVariableOp" : "Assign", 2);
    kt_attr_type(a, resource ? "dtype" : "T", t);
    if (!resource) kt_attr_bool(a, "validate_shape", false);
    zf_tensor_t *h = NULL, *out = NULL;
    ASSERT_OK(kt_run_on(v, NULL, 0, &h, 1, mgr, NULL));
    ASSERT_OK(kt_run_on(a, (zf_tensor_t *[]){h, value}, 2, &out, resource ? 0 : 1, mgr, NULL));
    zf_tensor_unref(&out);
    if (!resource) { /* the ref after the assignment */
        zf_tensor_unref(&h);
        ASSERT_OK(kt_run_on(v, NULL, 0, &h, 1, mgr, NULL));
    }
    kt_node_free(&v);
    kt_node_free(&a);
    return h;
}

static void s_expect_var(zf_resource_mgr_t *mgr, const char *name, const double *want, double tol,
                         const char *what, int step)
{
    zf_tensor_t *v = NULL;
    ASSERT_OK(zf_resource_get_var(mgr, name, &v));
    for (int i = 0; i < S_N; i++)
        if (fabs(s_get(v, i) - want[i]) > tol * (1 + fabs(want[i])))
            fail_msg("%s: %s[%d] after step %d: %.9g vs %.9g", what, name, i, step + 1, s_get(v, i),
                     want[i]);
    zf_tensor_unref(&v);
}

/* ---- the update rules, worked out in double ------------------------------------------------ */

/* One step on s[0] = var and the slots s[1], s[2] with grad g. */
static void s_reference(const s_case_t *k, double s[3][S_N], const double *g)
{
    const double *h = k->hyper;
    for (int i = 0; i < S_N; i++) {
        double *var = &s[0][i], *a = &s[1][i], *b = &s[2][i];
        switch (k->kind) {
        case S_MOMENTUM: { /* lr, grad, momentum */
            double lr = h[0], mu = h[2];
            *a = *a * mu + g[i];
            *var -= k->nesterov ? g[i] * lr + *a * mu * lr : lr * *a;
            break;
        }
        case S_KERAS: {
            double lr = h[0], mu = h[2];
            *a = *a * mu - lr * g[i];
            *var += k->nesterov ? mu * *a - lr * g[i] : *a;
            break;
        }
        case S_ADAM: { /* beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad */
            double lr_t = h[2] * sqrt(1 - h[1]) / (1 - h[0]);
            *a = *a + (g[i] - *a) * (1 - h[3]);
            *b = *b + (g[i] * g[i] - *b) * (1 - h[4]);
            double num = k->nesterov ? g[i] * (1 - h[3]) + h[3] * *a : *a;
            *var -= lr_t * num / (sqrt(*b) + h[5]);
            break;
        }
        case S_RMSPROP: { /* lr, rho, momentum, epsilon, grad */
            *a = *a + (g[i] * g[i] - *a) * (1 - h[1]);
            *b = *b * h[2] + h[0] * g[i] / sqrt(*a + h[3]);
            *var -= *b;
            break;
        }
        case S_ADAGRAD: /* lr, grad */
            *a += g[i] * g[i];
            *var -= h[0] * g[i] / sqrt(*a);
            break;
        }
    }
}

/* ---- running ----------------------------------------------------------------------------------
 */

static const char *const s_var_names[3] = {"w", "slot1", "slot2"};

/* Three steps of k in dtype t from fixed starting values, each checked. */
static void s_check_case(const s_case_t *k, zf_dtype_t t)
{
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    double s[3][S_N] = {{1.0, -2.0, 0.5}, {0.1, 0.2, 0.3}, {0.05, 0.4, 0.01}};
    zf_tensor_t *in[10] = {NULL};
    for (int j = 0; j < k->slots; j++) {
        zf_tensor_t *init = s_tensor(t, ZF_SHAPE(S_N), s[j]);
        in[j] = s_variable(mgr, s_var_names[j], k->resource, init);
        zf_tensor_unref(&init);
    }
    Tensorflow__NodeDef *n = kt_node_new("opt", k->op, k->slots + k->hypers);
    kt_attr_type(n, "T", t);
    kt_attr_bool(n, "use_nesterov", k->nesterov);
    const double grads[S_STEPS][S_N] = {{0.5, -1.0, 2.0}, {-0.25, 0.75, 0.1}, {1.5, 0.0, -0.3}};
    for (int step = 0; step < S_STEPS; step++) {
        for (int j = 0; j < k->hypers; j++) {
            double v = k->hyper[j];
            in[k->slots + j] = isnan(v) ? s_tensor(t, ZF_SHAPE(S_N), grads[step])
                                        : s_tensor(t, zf_shape_scalar(), &v);
        }
        zf_tensor_t *out = NULL;
        ASSERT_OK(kt_run_on(n, in, k->slots + k->hypers, &out, k->resource ? 0 : 1, mgr, NULL));
        kt_unref_all(in + k->slots, k->hypers);
        s_reference(k, s, grads[step]);
        double tol = t == ZF_FLOAT ? 2e-6 : 1e-13;
        if (!k->resource) { /* the reference form outputs var */
            kt_expect_near(out, ZF_SHAPE(S_N), s[0], tol);
            zf_tensor_unref(&out);
        }
        for (int j = 0; j < k->slots; j++)
            s_expect_var(mgr, s_var_names[j], s[j], tol, k->op, step);
    }
    kt_unref_all(in, k->slots);
    kt_node_free(&n);
    zf_resource_mgr_destroy(&mgr);
}

#define S_GRAD NAN

static const s_case_t s_cases[] = {
    {S_MOMENTUM, "ApplyMomentum", false, false, 2, 3, {0.1, S_GRAD, 0.9}},
    {S_MOMENTUM, "ApplyMomentum", false, true, 2, 3, {0.1, S_GRAD, 0.9}},
    {S_MOMENTUM, "ResourceApplyMomentum", true, false, 2, 3, {0.05, S_GRAD, 0.8}},
    {S_MOMENTUM, "ResourceApplyMomentum", true, true, 2, 3, {0.05, S_GRAD, 0.8}},
    {S_KERAS, "ResourceApplyKerasMomentum", true, false, 2, 3, {0.1, S_GRAD, 0.9}},
    {S_KERAS, "ResourceApplyKerasMomentum", true, true, 2, 3, {0.1, S_GRAD, 0.9}},
    {S_ADAM, "ApplyAdam", false, false, 3, 7, {0.9, 0.999, 0.01, 0.9, 0.999, 1e-7, S_GRAD}},
    {S_ADAM, "ApplyAdam", false, true, 3, 7, {0.81, 0.998, 0.01, 0.9, 0.999, 1e-7, S_GRAD}},
    {S_ADAM, "ResourceApplyAdam", true, false, 3, 7, {0.5, 0.25, 0.1, 0.5, 0.75, 0.01, S_GRAD}},
    {S_ADAM, "ResourceApplyAdam", true, true, 3, 7, {0.5, 0.25, 0.1, 0.5, 0.75, 0.01, S_GRAD}},
    {S_RMSPROP, "ApplyRMSProp", false, false, 3, 5, {0.01, 0.9, 0.5, 1e-6, S_GRAD}},
    {S_RMSPROP, "ResourceApplyRMSProp", true, false, 3, 5, {0.1, 0.8, 0.0, 1e-3, S_GRAD}},
    {S_ADAGRAD, "ApplyAdagrad", false, false, 2, 2, {0.1, S_GRAD}},
    {S_ADAGRAD, "ResourceApplyAdagrad", true, false, 2, 2, {0.5, S_GRAD}},
};

static void test_updates_follow_the_rules_over_three_steps(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof s_cases / sizeof s_cases[0]; i++) {
        s_check_case(&s_cases[i], ZF_FLOAT);
        s_check_case(&s_cases[i], ZF_DOUBLE);
    }
}

/* Runs op once on fresh variables (values per slot, hypers in order),
 * returning the variables afterwards in got[slot][i]. */
static void s_one_step(const char *op, bool resource, int slots, const double init[][S_N],
                       int hypers, const double *hyper, const double *grad, double got[][S_N])
{
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *in[10] = {NULL}, *out = NULL;
    for (int j = 0; j < slots; j++) {
        zf_tensor_t *v = s_tensor(ZF_DOUBLE, ZF_SHAPE(S_N), init[j]);
        in[j] = s_variable(mgr, s_var_names[j], resource, v);
        zf_tensor_unref(&v);
    }
    for (int j = 0; j < hypers; j++)
        in[slots + j] = isnan(hyper[j]) ? s_tensor(ZF_DOUBLE, ZF_SHAPE(S_N), grad)
                                        : s_tensor(ZF_DOUBLE, zf_shape_scalar(), &hyper[j]);
    Tensorflow__NodeDef *n = kt_node_new("opt", op, slots + hypers);
    kt_attr_type(n, "T", ZF_DOUBLE);
    ASSERT_OK(kt_run_on(n, in, slots + hypers, &out, resource ? 0 : 1, mgr, NULL));
    zf_tensor_unref(&out);
    for (int j = 0; j < slots; j++) {
        zf_tensor_t *v = NULL;
        ASSERT_OK(zf_resource_get_var(mgr, s_var_names[j], &v));
        for (int i = 0; i < S_N; i++) got[j][i] = s_get(v, i);
        zf_tensor_unref(&v);
    }
    kt_unref_all(in, slots + hypers);
    kt_node_free(&n);
    zf_resource_mgr_destroy(&mgr);
}

static void test_first_steps_by_hand(void **state)
{
    (void)state;
    double got[3][S_N];
    /* Momentum: accum 0 -> grad; var 1 - 0.1 * grad */
    s_one_step("ApplyMomentum", false, 2, (const double[][S_N]){{1, 1, 1}, {0, 0, 0}}, 3,
               (const double[]){0.1, S_GRAD, 0.9}, (const double[]){1, 2, -1}, got);
    assert_true(fabs(got[0][0] - 0.9) < 1e-15 && fabs(got[0][1] - 0.8) < 1e-15 &&
                fabs(got[0][2] - 1.1) < 1e-15);
    assert_true(got[1][0] == 1 && got[1][1] == 2 && got[1][2] == -1);
    /* Adam's first step (powers = betas) moves each weight by about lr */
    s_one_step("ResourceApplyAdam", true, 3, (const double[][S_N]){{1, 1, 1}, {0}, {0}}, 7,
               (const double[]){0.9, 0.999, 0.001, 0.9, 0.999, 1e-8, S_GRAD},
               (const double[]){1, -3, 0.5}, got);
    assert_true(fabs(got[0][0] - 0.999) < 1e-9 && fabs(got[0][1] - 1.001) < 1e-9 &&
                fabs(got[0][2] - 0.999) < 1e-9);
    assert_true(fabs(got[1][1] - -0.3) < 1e-15 && fabs(got[2][1] - 0.009) < 1e-15);
    /* Adagrad: accum 3 + 1 = 4; var 2 - 0.5 * 1 / 2 */
    s_one_step("ApplyAdagrad", false, 2, (const double[][S_N]){{2, 2, 2}, {3, 3, 3}}, 2,
               (const double[]){0.5, S_GRAD}, (const double[]){1, 1, 1}, got);
    assert_true(got[0][0] == 1.75 && got[1][0] == 4);
    /* RMSProp with rho 0: ms = grad^2; mom = lr * grad / |grad| */
    s_one_step("ApplyRMSProp", false, 3, (const double[][S_N]){{1, 1, 1}, {0}, {0}}, 5,
               (const double[]){0.5, 0.0, 0.0, 0.0, S_GRAD}, (const double[]){2, -4, 1}, got);
    assert_true(got[0][0] == 0.5 && got[0][1] == 1.5 && got[0][2] == 0.5);
    /* Keras momentum: accum = -lr * grad, var += accum */
    s_one_step("ResourceApplyKerasMomentum", true, 2, (const double[][S_N]){{1, 1, 1}, {0}}, 3,
               (const double[]){0.25, S_GRAD, 0.9}, (const double[]){4, -4, 0}, got);
    assert_true(got[0][0] == 0 && got[0][1] == 2 && got[0][2] == 1);
}

static void test_adagrad_can_leave_its_accumulator(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *v0 = KT_F32(ZF_SHAPE(1), 2), *a0 = KT_F32(ZF_SHAPE(1), 4);
    zf_tensor_t *in[4] = {s_variable(mgr, "w", true, v0), s_variable(mgr, "slot1", true, a0),
                          KT_F32(zf_shape_scalar(), 1), KT_F32(ZF_SHAPE(1), 1)};
    Tensorflow__NodeDef *n = kt_node_new("opt", "ResourceApplyAdagrad", 4);
    kt_attr_type(n, "T", ZF_FLOAT);
    kt_attr_bool(n, "update_slots", false);
    for (int step = 0; step < 2; step++) ASSERT_OK(kt_run_on(n, in, 4, NULL, 0, mgr, NULL));
    double w[S_N] = {1}, a[S_N] = {4}; /* 2 - 2 * 1 / sqrt(4); the accumulator stays */
    zf_tensor_t *v = NULL;
    ASSERT_OK(zf_resource_get_var(mgr, "w", &v));
    assert_true(s_get(v, 0) == w[0]);
    zf_tensor_unref(&v);
    ASSERT_OK(zf_resource_get_var(mgr, "slot1", &v));
    assert_true(s_get(v, 0) == a[0]);
    kt_unref_all((zf_tensor_t *[]){v, v0, a0, in[0], in[1], in[2], in[3]}, 7);
    kt_node_free(&n);
    zf_resource_mgr_destroy(&mgr);
}

/* A variable large enough to be split over a device's pool: every element
 * takes its own step (Nesterov momentum, two steps). */
static void test_large_updates_split_over_the_pool(void **state)
{
    (void)state;
    enum { N = 100003 };
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new("/job:localhost/replica:0/task:0/device:CPU:0", 3, &dev));
    double *w = calloc(N, sizeof *w), *acc = calloc(N, sizeof *acc), *g = calloc(N, sizeof *g);
    assert_true(w && acc && g);
    for (int i = 0; i < N; i++) {
        w[i] = 0.001 * (i % 1000);
        g[i] = (double)(i % 7) - 3;
    }
    zf_tensor_t *w0 = s_tensor(ZF_DOUBLE, ZF_SHAPE(N), w), *a0 = kt_zeros(ZF_DOUBLE, ZF_SHAPE(N));
    zf_tensor_t *in[5] = {s_variable(mgr, "w", true, w0), s_variable(mgr, "slot1", true, a0),
                          KT_F64(zf_shape_scalar(), 0.5), s_tensor(ZF_DOUBLE, ZF_SHAPE(N), g),
                          KT_F64(zf_shape_scalar(), 0.25)};
    Tensorflow__NodeDef *n = kt_node_new("opt", "ResourceApplyMomentum", 5);
    kt_attr_type(n, "T", ZF_DOUBLE);
    kt_attr_bool(n, "use_nesterov", true);
    for (int step = 0; step < 2; step++) {
        ASSERT_OK(kt_run_on(n, in, 5, NULL, 0, mgr, dev));
        for (int i = 0; i < N; i++) {
            acc[i] = acc[i] * 0.25 + g[i];
            w[i] -= g[i] * 0.5 + acc[i] * 0.25 * 0.5;
        }
    }
    zf_tensor_t *v = NULL;
    ASSERT_OK(zf_resource_get_var(mgr, "w", &v));
    for (int i = 0; i < N; i++)
        if (fabs(s_get(v, i) - w[i]) > 1e-12)
            fail_msg("w[%d]: %.17g vs %.17g", i, s_get(v, i), w[i]);
    kt_unref_all((zf_tensor_t *[]){v, w0, a0, in[0], in[1], in[2], in[3], in[4]}, 8);
    free(w);
    free(acc);
    free(g);
    kt_node_free(&n);
    zf_device_destroy(&dev);
    zf_resource_mgr_destroy(&mgr);
}

/* Two threads updating the same pair of variables with the slots swapped
 * (one's var is the other's accum): each update locks both in the order
 * of their names, so neither waits on the other forever. */
typedef struct {
    zf_resource_mgr_t *mgr;
    zf_tensor_t *in[5];
    Tensorflow__NodeDef *node;
    zf_status_t status;
} s_racer_t;

static void *s_race(void *arg)
{
    s_racer_t *r = arg;
    for (int i = 0; i < 2000 && zf_ok(r->status); i++)
        r->status = kt_run_on(r->node, r->in, 5, NULL, 0, r->mgr, NULL);
    return NULL;
}

static void test_updates_sharing_variables_do_not_deadlock(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    /* large enough that the locks are held a while */
    zf_tensor_t *zero = kt_zeros(ZF_FLOAT, ZF_SHAPE(4096));
    zf_tensor_t *a = s_variable(mgr, "a", true, zero), *b = s_variable(mgr, "b", true, zero);
    zf_tensor_t *lr = KT_F32(zf_shape_scalar(), 0.001f), *g = kt_zeros(ZF_FLOAT, ZF_SHAPE(4096));
    zf_tensor_t *mu = KT_F32(zf_shape_scalar(), 0.5f);
    s_racer_t r[2] = {{mgr, {a, b, lr, g, mu}, NULL, ZF_STATUS_OK},
                      {mgr, {b, a, lr, g, mu}, NULL, ZF_STATUS_OK}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        r[i].node = kt_node_new("opt", "ResourceApplyMomentum", 5);
        kt_attr_type(r[i].node, "T", ZF_FLOAT);
        assert_int_equal(pthread_create(&t[i], NULL, s_race, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        ASSERT_OK(r[i].status);
        kt_node_free(&r[i].node);
    }
    kt_unref_all((zf_tensor_t *[]){zero, a, b, lr, g, mu}, 6);
    zf_resource_mgr_destroy(&mgr);
}

static void test_updates_report_bad_inputs(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *v3 = KT_F32(ZF_SHAPE(3), 1, 2, 3), *v2 = KT_F32(ZF_SHAPE(2), 1, 2);
    zf_tensor_t *in[5] = {s_variable(mgr, "w", false, v3), s_variable(mgr, "slot1", false, v2),
                          KT_F32(zf_shape_scalar(), 0.1f), KT_F32(ZF_SHAPE(3), 1, 1, 1),
                          KT_F32(zf_shape_scalar(), 0.9f)};
    Tensorflow__NodeDef *n = kt_node_new("opt", "ApplyMomentum", 5);
    kt_attr_type(n, "T", ZF_FLOAT);
    zf_tensor_t *out = NULL;
    zf_test_expect_error(kt_run_on(n, in, 5, &out, 1, mgr, NULL), ZF_INVALID_ARGUMENT,
                         "opt (ApplyMomentum): var and accum do not have the same shape[3] [2]");
    zf_tensor_t *lr = in[2], *lr1 = KT_F32(ZF_SHAPE(1), 0.1f);
    in[2] = lr1;
    zf_test_expect_error(kt_run_on(n, in, 5, &out, 1, mgr, NULL), ZF_INVALID_ARGUMENT,
                         "opt (ApplyMomentum): lr is not a scalar: [1]");
    zf_tensor_t *lrd = KT_F64(zf_shape_scalar(), 0.1);
    in[2] = lrd;
    zf_test_expect_error(kt_run_on(n, in, 5, &out, 1, mgr, NULL), ZF_INVALID_ARGUMENT,
                         "lr must be float like grad, got double");
    in[2] = lr;
    zf_tensor_t *acc = in[1];
    in[1] = in[0]; /* var twice */
    zf_test_expect_error(kt_run_on(n, in, 5, &out, 1, mgr, NULL), ZF_INVALID_ARGUMENT,
                         "var and accum are the same variable w");
    zf_tensor_t *plain = KT_F32(ZF_SHAPE(3), 0, 0, 0);
    in[1] = plain;
    zf_test_expect_error(kt_run_on(n, in, 5, &out, 1, mgr, NULL), ZF_INVALID_ARGUMENT,
                         "input 1 is not a variable reference");
    zf_tensor_t *g2 = in[3], *g4 = KT_F32(ZF_SHAPE(2), 1, 1);
    zf_tensor_t *fix = s_variable(mgr, "slot1", false, v3); /* accum now [3] */
    in[1] = fix;
    in[3] = g4;
    zf_test_expect_error(kt_run_on(n, in, 5, &out, 1, mgr, NULL), ZF_INVALID_ARGUMENT,
                         "var and grad do not have the same shape[3] [2]");
    in[3] = g2;
    /* nothing was written by the failures: one good step from the start */
    ASSERT_OK(kt_run_on(n, in, 5, &out, 1, mgr, NULL));
    KT_EXPECT_NEAR(out, ZF_SHAPE(3), 1e-6, 1 - 0.1 * 1.9, 2 - 0.1 * 2.8, 3 - 0.1 * 3.7);
    zf_tensor_unref(&out);

    /* resource form: a handle never assigned */
    Tensorflow__NodeDef *h = kt_node_new("ghost", "VarHandleOp", 0);
    kt_attr_type(h, "dtype", ZF_FLOAT);
    kt_attr_shape(h, "shape", &(zf_shape_t){.rank = 1, .dims = {3}});
    zf_tensor_t *gh = NULL;
    ASSERT_OK(kt_run_on(h, NULL, 0, &gh, 1, mgr, NULL));
    zf_tensor_t *vh = s_variable(mgr, "rw", true, v3);
    Tensorflow__NodeDef *r = kt_node_new("ropt", "ResourceApplyMomentum", 5);
    kt_attr_type(r, "T", ZF_FLOAT);
    zf_tensor_t *rin[5] = {vh, gh, in[2], in[3], in[4]};
    zf_test_expect_error(kt_run_on(r, rin, 5, NULL, 0, mgr, NULL), ZF_FAILED_PRECONDITION,
                         "ropt (ResourceApplyMomentum): Could not find variable ghost");
    zf_tensor_t *nh = KT_F32(ZF_SHAPE(3), 0, 0, 0);
    rin[1] = nh;
    zf_test_expect_error(kt_run_on(r, rin, 5, NULL, 0, mgr, NULL), ZF_INVALID_ARGUMENT,
                         "input 1 is not a resource handle");
    kt_unref_all((zf_tensor_t *[]){v3, v2, in[0], acc, lr, in[3], in[4], lr1, lrd, plain, g4, fix,
                                   gh, vh, nh},
                 15);
    kt_node_free(&n);
    kt_node_free(&h);
    kt_node_free(&r);
    zf_resource_mgr_destroy(&mgr);
}

static void test_ref_form_reports_an_uninitialised_slot(void **state)
{
    (void)state;
    zf_resource_mgr_t *mgr = NULL;
    ASSERT_OK(zf_resource_mgr_new(&mgr));
    zf_tensor_t *v3 = KT_F32(ZF_SHAPE(3), 1, 2, 3);
    Tensorflow__NodeDef *acc = kt_node_new("acc", "VariableV2", 0);
    kt_attr_type(acc, "dtype", ZF_FLOAT);
    zf_tensor_t *marker = NULL;
    ASSERT_OK(kt_run_on(acc, NULL, 0, &marker, 1, mgr, NULL));
    zf_tensor_t *in[4] = {s_variable(mgr, "w", false, v3), marker, KT_F32(zf_shape_scalar(), 1),
                          KT_F32(ZF_SHAPE(3), 1, 1, 1)};
    Tensorflow__NodeDef *n = kt_node_new("opt", "ApplyAdagrad", 4);
    kt_attr_type(n, "T", ZF_FLOAT);
    zf_tensor_t *out = NULL;
    zf_test_expect_error(kt_run_on(n, in, 4, &out, 1, mgr, NULL), ZF_FAILED_PRECONDITION,
                         "opt (ApplyAdagrad): Attempting to use uninitialized value acc");
    assert_null(out);
    kt_unref_all((zf_tensor_t *[]){v3, in[0], in[1], in[2], in[3]}, 5);
    kt_node_free(&acc);
    kt_node_free(&n);
    zf_resource_mgr_destroy(&mgr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_updates_follow_the_rules_over_three_steps),
        cmocka_unit_test(test_first_steps_by_hand),
        cmocka_unit_test(test_adagrad_can_leave_its_accumulator),
        cmocka_unit_test(test_large_updates_split_over_the_pool),
        cmocka_unit_test(test_updates_sharing_variables_do_not_deadlock),
        cmocka_unit_test(test_updates_report_bad_inputs),
        cmocka_unit_test(test_ref_form_reports_an_uninitialised_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
