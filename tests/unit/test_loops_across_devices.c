/* While loops and conditionals whose nodes are pinned to two devices, run
 * in one process (two partitions of the in-process session) and on a
 * service of two executor processes: the loop's condition on CPU:0, its
 * body on CPU:1. Every value is checked against the same computation done
 * here in plain C. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/zflow_client.h"
#include "session/local_session.h"
#include "service_test_util.h"
#include "test_util.h"

#define WAIT_MS 60000

/* The most iterations a loop runs on the service in this build: a
 * sanitizer build's executors are several times slower, so there the
 * longest loop (100000 iterations, ~3 messages each) runs in process only,
 * where it is still checked. */
#if defined(__SANITIZE_ADDRESS__)
#define S_SERVICE_MAX_ITERATIONS 1000
#else
#define S_SERVICE_MAX_ITERATIONS 100000
#endif
static bool s_in_process_only;
#define D0 ZF_TEST_CPU(0)
#define D1 ZF_TEST_CPU(1)

/* ---- graph text ------------------------------------------------------------ */

typedef struct {
    char *text;
    size_t len, cap;
} s_buf_t;

static void s_add(s_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->text = realloc(b->text, b->cap);
        assert_non_null(b->text);
    }
    va_start(ap, fmt);
    vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

#define T_ATTR(t) " attr { key: 'T' value { type: " t " } }"

/* A node: name, op, device, up to three inputs (NULL: none), extra attrs. */
static void s_node(s_buf_t *b, const char *name, const char *op, const char *dev, const char *in1,
                   const char *in2, const char *in3, const char *attrs)
{
    s_add(b, "node { name: '%s' op: '%s' device: '%s'", name, op, dev);
    const char *ins[3] = {in1, in2, in3};
    for (int i = 0; i < 3; i++)
        if (ins[i]) s_add(b, " input: '%s'", ins[i]);
    s_add(b, "%s }\n", attrs ? attrs : "");
}

static void s_const_i64(s_buf_t *b, const char *name, const char *dev, const char *ctrl, long v)
{
    char attrs[256];
    snprintf(attrs, sizeof attrs,
             " attr { key: 'dtype' value { type: DT_INT64 } }"
             " attr { key: 'value' value { tensor { dtype: DT_INT64 tensor_shape {}"
             " int64_val: %ld } } }",
             v);
    s_node(b, name, "Const", dev, ctrl, NULL, NULL, attrs);
}

static void s_placeholder(s_buf_t *b, const char *name, const char *dtype)
{
    char attrs[128];
    snprintf(attrs, sizeof attrs, " attr { key: 'dtype' value { type: %s } }", dtype);
    s_node(b, name, "Placeholder", D0, NULL, NULL, NULL, attrs);
}

static void s_enter(s_buf_t *b, const char *name, const char *dev, const char *in,
                    const char *frame, const char *dtype, bool constant)
{
    char attrs[384];
    snprintf(attrs, sizeof attrs,
             T_ATTR("%s") " attr { key: 'frame_name' value { s: '%s' } }"
                          " attr { key: 'is_constant' value { b: %s } }",
             dtype, frame, constant ? "true" : "false");
    s_node(b, name, "Enter", dev, in, NULL, NULL, attrs);
}

/* The loop variable P/v of frame P: Enter from init, Merge, Switch on
 * P/cond, Exit P/v_exit; its body value P/v_body goes to NextIteration. The
 * Switch's true output is P/v_sw:1. Everything on CPU:0. */
static void s_loop_var(s_buf_t *b, const char *p, const char *v, const char *init,
                       const char *dtype)
{
    char n[6][96], t[64];
    snprintf(n[0], sizeof n[0], "%s/%s_enter", p, v);
    snprintf(n[1], sizeof n[1], "%s/%s_merge", p, v);
    snprintf(n[2], sizeof n[2], "%s/%s_next", p, v);
    snprintf(n[3], sizeof n[3], "%s/%s_sw", p, v);
    snprintf(n[4], sizeof n[4], "%s/cond", p);
    snprintf(n[5], sizeof n[5], "%s/%s_body", p, v);
    snprintf(t, sizeof t, T_ATTR("%s"), dtype);
    s_enter(b, n[0], D0, init, p, dtype, false);
    char attrs[128];
    snprintf(attrs, sizeof attrs, "%s attr { key: 'N' value { i: 2 } }", t);
    s_node(b, n[1], "Merge", D0, n[0], n[2], NULL, attrs);
    s_node(b, n[2], "NextIteration", D0, n[5], NULL, NULL, t);
    s_node(b, n[3], "Switch", D0, n[1], n[4], NULL, t);
    char exit_name[100];
    snprintf(exit_name, sizeof exit_name, "%s/%s_exit", p, v);
    s_node(b, exit_name, "Exit", D0, n[3], NULL, NULL, t);
}

/* P/cond = LoopCond(Less(P/i_merge, limit)), on CPU:0. */
static void s_loop_cond(s_buf_t *b, const char *p, const char *limit)
{
    char less[96], cond[96], merge[96];
    snprintf(less, sizeof less, "%s/less", p);
    snprintf(cond, sizeof cond, "%s/cond", p);
    snprintf(merge, sizeof merge, "%s/i_merge", p);
    s_node(b, less, "Less", D0, merge, limit, NULL, T_ATTR("DT_INT64"));
    s_node(b, cond, "LoopCond", D0, less, NULL, NULL, NULL);
}

static Tensorflow__GraphDef *s_graph(s_buf_t *b)
{
    Tensorflow__GraphDef *gd = zf_test_graphdef(b->text);
    free(b->text);
    return gd;
}

/* Frame w counting i from 0 while i < n (a fed int64), with a sum s from 0
 * and the constant one entered on CPU:1; the body is the caller's. */
static void s_counting_loop(s_buf_t *b)
{
    s_placeholder(b, "n", "DT_INT64");
    s_const_i64(b, "zero", D0, NULL, 0);
    s_const_i64(b, "one", D0, NULL, 1);
    s_loop_var(b, "w", "i", "zero", "DT_INT64");
    s_loop_var(b, "w", "s", "zero", "DT_INT64");
    s_enter(b, "w/n", D0, "n", "w", "DT_INT64", true);
    s_enter(b, "w/one", D1, "one", "w", "DT_INT64", true);
    s_loop_cond(b, "w", "w/n");
}

/* for (i = 0, s = 0; i < n; ) { i += 1; s += i; }: s = n (n + 1) / 2, the
 * two additions on CPU:1. */
static Tensorflow__GraphDef *s_sum_graph(void)
{
    s_buf_t b = {0};
    s_counting_loop(&b);
    s_node(&b, "w/i_body", "AddV2", D1, "w/i_sw:1", "w/one", NULL, T_ATTR("DT_INT64"));
    s_node(&b, "w/s_body", "AddV2", D1, "w/s_sw:1", "w/i_body", NULL, T_ATTR("DT_INT64"));
    return s_graph(&b);
}

/* for (i = 0; i < a; i++) for (j = 0; j < bb; j++) t += i: t = bb a (a - 1) / 2.
 * The inner loop runs in the outer one's body; both bodies add on CPU:1. */
static Tensorflow__GraphDef *s_nested_graph(void)
{
    s_buf_t b = {0};
    s_placeholder(&b, "a", "DT_INT64");
    s_placeholder(&b, "bb", "DT_INT64");
    s_const_i64(&b, "zero", D0, NULL, 0);
    s_const_i64(&b, "one", D0, NULL, 1);
    s_loop_var(&b, "o", "i", "zero", "DT_INT64");
    s_loop_var(&b, "o", "t", "zero", "DT_INT64");
    s_enter(&b, "o/a", D0, "a", "o", "DT_INT64", true);
    s_enter(&b, "o/bb", D0, "bb", "o", "DT_INT64", true);
    s_enter(&b, "o/one", D1, "one", "o", "DT_INT64", true);
    s_loop_cond(&b, "o", "o/a");
    s_node(&b, "o/i", "Identity", D0, "o/i_sw:1", NULL, NULL, T_ATTR("DT_INT64"));
    s_node(&b, "o/t", "Identity", D0, "o/t_sw:1", NULL, NULL, T_ATTR("DT_INT64"));
    s_const_i64(&b, "o/zero", D0, "^o/i", 0);
    /* the inner loop, in the outer frame's iteration */
    s_loop_var(&b, "in", "i", "o/zero", "DT_INT64"); /* j, named i for s_loop_cond */
    s_loop_var(&b, "in", "t", "o/t", "DT_INT64");
    s_enter(&b, "in/bb", D0, "o/bb", "in", "DT_INT64", true);
    s_enter(&b, "in/outer_i", D0, "o/i", "in", "DT_INT64", true);
    s_enter(&b, "in/one", D1, "o/one", "in", "DT_INT64", true);
    s_loop_cond(&b, "in", "in/bb");
    s_node(&b, "in/i_body", "AddV2", D1, "in/i_sw:1", "in/one", NULL, T_ATTR("DT_INT64"));
    s_node(&b, "in/t_body", "AddV2", D1, "in/t_sw:1", "in/outer_i", NULL, T_ATTR("DT_INT64"));
    /* back in the outer body */
    s_node(&b, "o/i_body", "AddV2", D1, "o/i", "o/one", NULL, T_ATTR("DT_INT64"));
    s_node(&b, "o/t_body", "Identity", D0, "in/t_exit", NULL, NULL, T_ATTR("DT_INT64"));
    return s_graph(&b);
}

/* for (i = 0, s = 0; i < n; i++) s += i % 2 == 0 ? i : -i, the conditional
 * a Switch/Merge inside the loop with its true branch on CPU:1. */
static Tensorflow__GraphDef *s_cond_in_loop_graph(void)
{
    s_buf_t b = {0};
    s_counting_loop(&b);
    s_node(&b, "w/i", "Identity", D0, "w/i_sw:1", NULL, NULL, T_ATTR("DT_INT64"));
    s_const_i64(&b, "w/two", D0, "^w/i", 2);
    s_const_i64(&b, "w/zero", D0, "^w/i", 0);
    s_node(&b, "w/mod", "FloorMod", D0, "w/i", "w/two", NULL, T_ATTR("DT_INT64"));
    s_node(&b, "w/even", "Equal", D0, "w/mod", "w/zero", NULL, T_ATTR("DT_INT64"));
    s_node(&b, "c/sw", "Switch", D0, "w/i", "w/even", NULL, T_ATTR("DT_INT64"));
    s_node(&b, "c/then", "Identity", D1, "c/sw:1", NULL, NULL, T_ATTR("DT_INT64"));
    s_node(&b, "c/else", "Neg", D0, "c/sw:0", NULL, NULL, T_ATTR("DT_INT64"));
    s_node(&b, "c/merge", "Merge", D0, "c/else", "c/then", NULL,
           T_ATTR("DT_INT64") " attr { key: 'N' value { i: 2 } }");
    s_node(&b, "w/s_body", "AddV2", D1, "w/s_sw:1", "c/merge", NULL, T_ATTR("DT_INT64"));
    s_node(&b, "w/i_body", "AddV2", D1, "w/i", "w/one", NULL, T_ATTR("DT_INT64"));
    return s_graph(&b);
}

/* h = tanh(h W) n times (an unrolled recurrent layer): MatMul on CPU:1,
 * Tanh on CPU:0. */
static const float s_w[4] = {0.5f, -1.25f, 0.75f, 0.3f};

static Tensorflow__GraphDef *s_rnn_graph(void)
{
    s_buf_t b = {0};
    s_placeholder(&b, "n", "DT_INT64");
    s_placeholder(&b, "h0", "DT_FLOAT");
    char attrs[512];
    snprintf(attrs, sizeof attrs,
             " attr { key: 'dtype' value { type: DT_FLOAT } }"
             " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 }"
             " dim { size: 2 } } float_val: %.9g float_val: %.9g float_val: %.9g"
             " float_val: %.9g } } }",
             (double)s_w[0], (double)s_w[1], (double)s_w[2], (double)s_w[3]);
    s_node(&b, "W", "Const", D0, NULL, NULL, NULL, attrs);
    s_const_i64(&b, "zero", D0, NULL, 0);
    s_const_i64(&b, "one", D0, NULL, 1);
    s_loop_var(&b, "r", "i", "zero", "DT_INT64");
    s_loop_var(&b, "r", "h", "h0", "DT_FLOAT");
    s_enter(&b, "r/n", D0, "n", "r", "DT_INT64", true);
    s_enter(&b, "r/W", D1, "W", "r", "DT_FLOAT", true);
    s_enter(&b, "r/one", D0, "one", "r", "DT_INT64", true);
    s_loop_cond(&b, "r", "r/n");
    s_node(&b, "r/mm", "MatMul", D1, "r/h_sw:1", "r/W", NULL,
           T_ATTR("DT_FLOAT") " attr { key: 'transpose_a' value { b: false } }"
                              " attr { key: 'transpose_b' value { b: false } }");
    s_node(&b, "r/h_body", "Tanh", D0, "r/mm", NULL, NULL, T_ATTR("DT_FLOAT"));
    s_node(&b, "r/i_body", "AddV2", D0, "r/i_sw:1", "r/one", NULL, T_ATTR("DT_INT64"));
    return s_graph(&b);
}

/* tf.cond's graph: p ? x * x (on CPU:1) : -x (on CPU:0). */
static Tensorflow__GraphDef *s_cond_graph(void)
{
    s_buf_t b = {0};
    s_placeholder(&b, "p", "DT_BOOL");
    s_placeholder(&b, "x", "DT_FLOAT");
    s_node(&b, "c/sw", "Switch", D0, "x", "p", NULL, T_ATTR("DT_FLOAT"));
    s_node(&b, "c/then", "Square", D1, "c/sw:1", NULL, NULL, T_ATTR("DT_FLOAT"));
    s_node(&b, "c/else", "Neg", D0, "c/sw:0", NULL, NULL, T_ATTR("DT_FLOAT"));
    s_node(&b, "c/merge", "Merge", D0, "c/else", "c/then", NULL,
           T_ATTR("DT_FLOAT") " attr { key: 'N' value { i: 2 } }");
    return s_graph(&b);
}

/* ---- running ---------------------------------------------------------------- */

/* The service of two executors, started once for the file. */
static zf_test_service_t s_svc;
static zf_client_t *s_client;
static bool s_recv_scheduling; /* s_runner's sessions schedule their recvs */

static int s_setup(void **state)
{
    (void)state;
    return zf_test_service_setup(&s_svc, 2, &s_client, WAIT_MS);
}

static int s_teardown(void **state)
{
    (void)state;
    return zf_test_service_teardown(&s_svc, &s_client, WAIT_MS);
}

/* A graph run both ways: an in-process session over two CPUs and a
 * session on the service. */
typedef struct {
    Tensorflow__GraphDef *gd;
    zf_local_session_t *local;
    char *remote;
} s_runner_t;

static s_runner_t s_runner(Tensorflow__GraphDef *gd)
{
    s_runner_t r = {gd, zf_test_local_session_sched(gd, "cpu:2", s_recv_scheduling), NULL};
    zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    o.recv_scheduling = s_recv_scheduling;
    ASSERT_OK(zf_client_session_create(s_client, gd, &o, &r.remote));
    return r;
}

static void s_runner_free(s_runner_t *r)
{
    zf_local_session_destroy(&r->local);
    ASSERT_OK(zf_client_session_close(s_client, r->remote));
    free(r->remote);
    zf_graphdef_free(&r->gd);
}

/* Runs feeds -> fetch on both; out[0] in-process, out[1] on the service. */
static void s_run(s_runner_t *r, const char *const *names, zf_tensor_t *const *values, int n,
                  const char *fetch, zf_tensor_t *out[2])
{
    ASSERT_OK(zf_local_session_run(r->local, names, values, n, &fetch, 1, NULL, 0, &out[0]));
    assert_int_equal(zf_local_session_last_num_partitions(r->local), 2);
    if (s_in_process_only) {
        out[1] = zf_tensor_ref(out[0]);
        return;
    }
    zf_client_step_t step = {names, values, n, &fetch, 1, NULL, 0};
    ASSERT_OK(zf_client_session_run(s_client, r->remote, &step, WAIT_MS, &out[1]));
}

static zf_tensor_t *s_i64(int64_t v)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_scalar(ZF_INT64, &v, &t));
    return t;
}

/* Runs with int64 feeds and expects an int64 scalar both ways. */
static void s_expect_i64(s_runner_t *r, const char *const *names, const int64_t *feeds, int n,
                         const char *fetch, int64_t want)
{
    zf_tensor_t *values[2] = {NULL, NULL}, *out[2] = {NULL, NULL};
    for (int i = 0; i < n; i++) values[i] = s_i64(feeds[i]);
    s_run(r, names, values, n, fetch, out);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(zf_tensor_dtype(out[k]), ZF_INT64);
        int64_t got = *(const int64_t *)zf_tensor_data(out[k]);
        if (got != want)
            fail_msg("%s (%s) = %lld, want %lld", fetch, k ? "service" : "in-process",
                     (long long)got, (long long)want);
        zf_tensor_unref(&out[k]);
    }
    for (int i = 0; i < n; i++) zf_tensor_unref(&values[i]);
}

/* The sum loop for n = ns[0..count-1], and i's exit for the last n. */
static void s_expect_sums(const int64_t *ns, size_t count)
{
    s_runner_t r = s_runner(s_sum_graph());
    const char *names[] = {"n"};
    for (size_t k = 0; k < count; k++) {
        s_in_process_only = ns[k] > S_SERVICE_MAX_ITERATIONS;
        s_expect_i64(&r, names, &ns[k], 1, "w/s_exit", ns[k] * (ns[k] + 1) / 2);
    }
    s_in_process_only = false;
    s_expect_i64(&r, names, &ns[count - 1], 1, "w/i_exit", ns[count - 1]);
    s_runner_free(&r);
}

static void test_loop_sums_with_its_body_on_another_device(void **state)
{
    (void)state;
    const int64_t ns[] = {0, 1, 10, 100000, 1000};
    s_expect_sums(ns, sizeof ns / sizeof ns[0]);
}

static void test_nested_loops_span_two_devices(void **state)
{
    (void)state;
    s_runner_t r = s_runner(s_nested_graph());
    const char *names[] = {"a", "bb"};
    const int64_t cases[][2] = {{0, 3}, {1, 5}, {4, 0}, {5, 3}, {30, 20}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t a = cases[k][0], bb = cases[k][1], want = 0;
        for (int64_t i = 0; i < a; i++)
            for (int64_t j = 0; j < bb; j++) want += i;
        s_expect_i64(&r, names, cases[k], 2, "o/t_exit", want);
    }
    s_runner_free(&r);
}

static void test_conditional_inside_a_loop_spans_two_devices(void **state)
{
    (void)state;
    s_runner_t r = s_runner(s_cond_in_loop_graph());
    const char *names[] = {"n"};
    const int64_t ns[] = {0, 1, 2, 7, 50};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int64_t want = 0;
        for (int64_t i = 0; i < ns[k]; i++) want += i % 2 == 0 ? i : -i;
        s_expect_i64(&r, names, &ns[k], 1, "w/s_exit", want);
    }
    s_runner_free(&r);
}

static void test_matmul_tanh_loop_spans_two_devices(void **state)
{
    (void)state;
    s_runner_t r = s_runner(s_rnn_graph());
    const char *names[] = {"n", "h0"};
    const float h0v[2] = {0.9f, -0.4f};
    zf_shape_t shape = {.rank = 2, .dims = {1, 2}};
    for (int64_t n = 0; n <= 12; n += 4) {
        float h[2] = {h0v[0], h0v[1]};
        for (int64_t k = 0; k < n; k++) {
            float a = h[0] * s_w[0] + h[1] * s_w[2], b2 = h[0] * s_w[1] + h[1] * s_w[3];
            h[0] = tanhf(a);
            h[1] = tanhf(b2);
        }
        zf_tensor_t *values[2] = {s_i64(n), NULL}, *out[2] = {NULL, NULL};
        ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, h0v, sizeof h0v, &values[1]));
        s_run(&r, names, values, 2, "r/h_exit", out);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(zf_tensor_num_elements(out[k]), 2);
            const float *got = zf_tensor_data(out[k]);
            for (int i = 0; i < 2; i++)
                if (fabsf(got[i] - h[i]) > 1e-5f)
                    fail_msg("n=%lld h[%d] = %.7g, want %.7g", (long long)n, i, (double)got[i],
                             (double)h[i]);
            zf_tensor_unref(&out[k]);
        }
        zf_tensor_unref(&values[0]);
        zf_tensor_unref(&values[1]);
    }
    s_runner_free(&r);
}

static void test_cond_branches_on_two_devices(void **state)
{
    (void)state;
    s_runner_t r = s_runner(s_cond_graph());
    const char *names[] = {"p", "x"};
    for (int p = 0; p < 2; p++) {
        zf_tensor_t *values[2] = {NULL, NULL}, *out[2] = {NULL, NULL};
        ASSERT_OK(zf_tensor_new_scalar_bool(p != 0, &values[0]));
        ASSERT_OK(zf_tensor_new_scalar_float(-3.5f, &values[1]));
        s_run(&r, names, values, 2, "c/merge", out);
        for (int k = 0; k < 2; k++) {
            float got = *(const float *)zf_tensor_data(out[k]);
            assert_true(got == (p ? 12.25f : 3.5f));
            zf_tensor_unref(&out[k]);
        }
        zf_tensor_unref(&values[0]);
        zf_tensor_unref(&values[1]);
    }
    s_runner_free(&r);
}

/* The functional forms: While (TensorFlow's functional-while-ops.pbtxt, its
 * body's addition moved to CPU:1), If and Case with a branch on CPU:1. */
static void s_pin_in_function(Tensorflow__GraphDef *gd, const char *fn, const char *node)
{
    for (size_t i = 0; i < gd->library->n_function; i++) {
        Tensorflow__FunctionDef *f = gd->library->function[i];
        if (strcmp(f->signature->name, fn) != 0) continue;
        for (size_t k = 0; k < f->n_node_def; k++) {
            if (strcmp(f->node_def[k]->name, node) != 0) continue;
            if (f->node_def[k]->device != protobuf_c_empty_string) free(f->node_def[k]->device);
            f->node_def[k]->device = strdup(D1);
            return;
        }
    }
    fail_msg("no node %s in function %s", node, fn);
}

static void s_expect_f32(s_runner_t *r, const char *const *names, zf_tensor_t *const *values, int n,
                         const char *fetch, float want)
{
    zf_tensor_t *out[2] = {NULL, NULL};
    s_run(r, names, values, n, fetch, out);
    for (int k = 0; k < 2; k++) {
        float got = *(const float *)zf_tensor_data(out[k]);
        if (got != want)
            fail_msg("%s (%s) = %g, want %g", fetch, k ? "service" : "in-process", (double)got,
                     (double)want);
        zf_tensor_unref(&out[k]);
    }
}

#define FN1(name, op, dev)                                                                         \
    "function { signature { name: '" name "' input_arg { name: 'x' type: DT_FLOAT }"               \
    " output_arg { name: 'y' type: DT_FLOAT } }"                                                   \
    " node_def { name: 'n' op: '" op "' input: 'x' device: '" dev "'"                              \
    " attr { key: 'T' value { type: DT_FLOAT } } }"                                                \
    " ret { key: 'y' value: 'n:y:0' } }"

static void test_functional_while_if_and_case_span_two_devices(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = zf_test_tf_graphdef("functional-while-ops.pbtxt");
    s_pin_in_function(gd, "body", "tf.Add");
    s_runner_t r = s_runner(gd);
    const char *names[] = {"iter", "val"};
    for (int n = 0; n <= 4; n++) { /* while iter > 0 { iter -= 1; val += val } */
        zf_tensor_t *values[2] = {NULL, NULL};
        int32_t it = n;
        ASSERT_OK(zf_tensor_new_scalar(ZF_INT32, &it, &values[0]));
        ASSERT_OK(zf_tensor_new_scalar_float(1.5f, &values[1]));
        s_expect_f32(&r, names, values, 2, "main", 1.5f * (float)(1 << n));
        zf_tensor_unref(&values[0]);
        zf_tensor_unref(&values[1]);
    }
    s_runner_free(&r);

    gd = zf_test_graphdef(
        "node { name: 'p' op: 'Placeholder' device: '" D0 "'"
        " attr { key: 'dtype' value { type: DT_BOOL } } }"
        "node { name: 'i' op: 'Placeholder' device: '" D0 "'"
        " attr { key: 'dtype' value { type: DT_INT32 } } }"
        "node { name: 'a' op: 'Placeholder' device: '" D0 "'"
        " attr { key: 'dtype' value { type: DT_FLOAT } } }"
        "node { name: 'if' op: 'If' input: 'p' input: 'a' device: '" D0 "'"
        " attr { key: 'Tcond' value { type: DT_BOOL } }"
        " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
        " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
        " attr { key: 'then_branch' value { func { name: 'Sq' } } }"
        " attr { key: 'else_branch' value { func { name: 'Ng' } } } }"
        "node { name: 'case' op: 'Case' input: 'i' input: 'a' device: '" D0 "'"
        " attr { key: 'Tin' value { list { type: DT_FLOAT } } }"
        " attr { key: 'Tout' value { list { type: DT_FLOAT } } }"
        " attr { key: 'branches' value { list { func { name: 'Ng' } func { name: 'Sq' }"
        " func { name: 'Ab' } } } } }"
        "library { " FN1("Sq", "Square", D1) " " FN1("Ng", "Neg", D0) " " FN1("Ab", "Abs",
                                                                              D1) " }");
    r = s_runner(gd);
    const char *if_names[] = {"p", "a"}, *case_names[] = {"i", "a"};
    for (int p = 0; p < 2; p++) {
        zf_tensor_t *values[2] = {NULL, NULL};
        ASSERT_OK(zf_tensor_new_scalar_bool(p != 0, &values[0]));
        ASSERT_OK(zf_tensor_new_scalar_float(-5.0f, &values[1]));
        s_expect_f32(&r, if_names, values, 2, "if", p ? 25.0f : 5.0f);
        zf_tensor_unref(&values[0]);
        zf_tensor_unref(&values[1]);
    }
    const struct {
        int32_t index;
        float want;
    } cases[] = {{0, 5.0f}, {1, 25.0f}, {2, 5.0f}, {9, 5.0f}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        zf_tensor_t *values[2] = {NULL, NULL};
        ASSERT_OK(zf_tensor_new_scalar(ZF_INT32, &cases[k].index, &values[0]));
        ASSERT_OK(zf_tensor_new_scalar_float(-5.0f, &values[1]));
        s_expect_f32(&r, case_names, values, 2, "case", cases[k].want);
        zf_tensor_unref(&values[0]);
        zf_tensor_unref(&values[1]);
    }
    s_runner_free(&r);
}

/* Recv scheduling (SessionOptions.enable_recv_scheduling) changes no value:
 * the loops and conditionals above again (the sum loop up to 1000
 * iterations), with it on in process and on the service. */
static void test_recv_scheduling_keeps_every_value(void **state)
{
    s_recv_scheduling = true;
    const int64_t ns[] = {0, 1, 10, 1000};
    s_expect_sums(ns, sizeof ns / sizeof ns[0]);
    test_nested_loops_span_two_devices(state);
    test_conditional_inside_a_loop_spans_two_devices(state);
    test_matmul_tanh_loop_spans_two_devices(state);
    test_cond_branches_on_two_devices(state);
    s_recv_scheduling = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_sums_with_its_body_on_another_device),
        cmocka_unit_test(test_nested_loops_span_two_devices),
        cmocka_unit_test(test_conditional_inside_a_loop_spans_two_devices),
        cmocka_unit_test(test_matmul_tanh_loop_spans_two_devices),
        cmocka_unit_test(test_cond_branches_on_two_devices),
        cmocka_unit_test(test_functional_while_if_and_case_span_two_devices),
        cmocka_unit_test(test_recv_scheduling_keeps_every_value),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
