/* Tests for control flow in the engine (executor/engine/engine.h), run
 * in-process through the local session: while loops (frames, iterations,
 * loop invariants, parallel_iterations, nesting, a cond inside a loop),
 * Switch/Merge deadness, errors inside loops, malformed loops, and a loop of
 * a million iterations in bounded memory. Every expected value is computed
 * here independently of zflow. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "executor/engine/engine.h"
#include "executor/kernels/kernel.h"
#include "session/local_session.h"

#define CPU0 "/job:localhost/replica:0/task:0/device:CPU:0"

/* ---- test kernels on CPU ------------------------------------------------------ */

/* A probe (op CheckNumerics) on int64 scalars: forwards its input, counts
 * how many of its runs overlap, sleeps s_probe_sleep_us, and fails on the
 * value s_probe_fail_at. */
static pthread_mutex_t s_probe_mu = PTHREAD_MUTEX_INITIALIZER;
static int s_probe_now, s_probe_max, s_probe_runs;
static int s_probe_sleep_us;
static int64_t s_probe_fail_at = -1;

static void s_probe_reset(int sleep_us, int64_t fail_at)
{
    pthread_mutex_lock(&s_probe_mu);
    s_probe_now = s_probe_max = s_probe_runs = 0;
    s_probe_sleep_us = sleep_us;
    s_probe_fail_at = fail_at;
    pthread_mutex_unlock(&s_probe_mu);
}

static zf_status_t s_probe_compute(zf_kernel_ctx_t *ctx)
{
    int64_t v = *(const int64_t *)zf_tensor_data(ctx->inputs[0]);
    pthread_mutex_lock(&s_probe_mu);
    s_probe_runs++;
    if (++s_probe_now > s_probe_max) s_probe_max = s_probe_now;
    int sleep_us = s_probe_sleep_us;
    pthread_mutex_unlock(&s_probe_mu);
    if (sleep_us > 0) usleep((useconds_t)sleep_us);
    pthread_mutex_lock(&s_probe_mu);
    s_probe_now--;
    pthread_mutex_unlock(&s_probe_mu);
    if (v == s_probe_fail_at)
        return zf_kernel_error(ctx, ZF_INVALID_ARGUMENT, "the probe refuses %lld", (long long)v);
    zf_kernel_set_output(ctx, 0, ctx->inputs[0]);
    return ZF_STATUS_OK;
}

static const zf_kernel_t s_probe_kernel = {.op = "CheckNumerics",
                                           .device_type = "CPU",
                                           .flags = ZF_KERNEL_EXPENSIVE,
                                           .compute = s_probe_compute};
static const zf_kernel_def_t s_probe_def = {.op = "CheckNumerics", .device_type = "CPU"};

static int s_setup(void **state)
{
    (void)state;
    zf_kernels_register_builtin(false);
    if (!zf_ok(zf_kernel_register_with_def(&s_probe_def, &s_probe_kernel))) return -1;
    return 0;
}

/* ---- graphs as text ---------------------------------------------------------------- */

/* Graph text, written through a memory stream opened on first use. */
typedef struct {
    FILE *f;
    char *text;
    size_t len;
} s_buf_t;

static void s_add(s_buf_t *b, const char *fmt, ...) ZF_PRINTF(2, 3);
static void s_add(s_buf_t *b, const char *fmt, ...)
{
    if (!b->f) b->f = open_memstream(&b->text, &b->len);
    assert_non_null(b->f);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(b->f, fmt, ap);
    va_end(ap);
}

static void s_buf_free(s_buf_t *b)
{
    if (b->f) fclose(b->f);
    free(b->text);
    *b = (s_buf_t){0};
}

#define T_INT64 "attr { key: 'T' value { type: DT_INT64 } }"
#define N2      "attr { key: 'N' value { i: 2 } }"

static void s_const(s_buf_t *b, const char *name, int64_t v, const char *control)
{
    s_add(b,
          "node { name: '%s' op: 'Const' %s%s%s attr { key: 'dtype' value { type: DT_INT64 } } "
          "attr { key: 'value' value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: %lld "
          "} } } }\n",
          name, control ? "input: '^" : "", control ? control : "", control ? "'" : "",
          (long long)v);
}

/* A node with T = int64 and one or two inputs. */
static void s_op(s_buf_t *b, const char *name, const char *op, const char *in0, const char *in1)
{
    s_add(b, "node { name: '%s' op: '%s' input: '%s' ", name, op, in0);
    if (in1) s_add(b, "input: '%s' ", in1);
    s_add(b, "%s }\n", T_INT64);
}

static void s_enter(s_buf_t *b, const char *name, const char *in, const char *frame, bool constant,
                    int parallel)
{
    s_add(b,
          "node { name: '%s' op: 'Enter' input: '%s' %s attr { key: 'frame_name' value { s: "
          "'%s' } } attr { key: 'is_constant' value { b: %s } } attr { key: "
          "'parallel_iterations' value { i: %d } } }\n",
          name, in, T_INT64, frame, constant ? "true" : "false", parallel);
}

/* Appends to the value i1 (this iteration's counter, 1..N) what the loop
 * adds to its sum; returns the name of that value. */
typedef const char *(*s_body_fn)(s_buf_t *b, const char *p, const char *i1);

/* Appends a while loop named p:
 *     i = i0; acc = acc0; while (i < bound) { i += one; acc += body(i); }
 * bound and one come in as constant Enters. Its results are p/exit_i and
 * p/exit_acc. */
static void s_loop(s_buf_t *b, const char *p, const char *i0, const char *acc0, const char *bound,
                   const char *one, int parallel, s_body_fn body)
{
    char n[16][96];
    const char *names[] = {"enter_i", "enter_acc", "enter_n", "enter_one", "merge_i", "merge_acc",
                           "less",    "cond",      "sw_i",    "sw_acc",    "id_i",    "id_acc",
                           "i1",      "acc1",      "next_i",  "next_acc"};
    for (int k = 0; k < 16; k++) snprintf(n[k], sizeof n[k], "%s/%s", p, names[k]);
    s_enter(b, n[0], i0, p, false, parallel);
    s_enter(b, n[1], acc0, p, false, parallel);
    s_enter(b, n[2], bound, p, true, parallel);
    s_enter(b, n[3], one, p, true, parallel);
    s_add(b, "node { name: '%s' op: 'Merge' input: '%s' input: '%s' %s %s }\n", n[4], n[0], n[14],
          T_INT64, N2);
    s_add(b, "node { name: '%s' op: 'Merge' input: '%s' input: '%s' %s %s }\n", n[5], n[1], n[15],
          T_INT64, N2);
    s_op(b, n[6], "Less", n[4], n[2]);
    s_add(b, "node { name: '%s' op: 'LoopCond' input: '%s' }\n", n[7], n[6]);
    s_add(b, "node { name: '%s' op: 'Switch' input: '%s' input: '%s' %s }\n", n[8], n[4], n[7],
          T_INT64);
    s_add(b, "node { name: '%s' op: 'Switch' input: '%s' input: '%s' %s }\n", n[9], n[5], n[7],
          T_INT64);
    char exit_i[96], exit_acc[96], sw1[100];
    snprintf(exit_i, sizeof exit_i, "%s/exit_i", p);
    snprintf(exit_acc, sizeof exit_acc, "%s/exit_acc", p);
    s_op(b, exit_i, "Exit", n[8], NULL);
    s_op(b, exit_acc, "Exit", n[9], NULL);
    snprintf(sw1, sizeof sw1, "%s:1", n[8]);
    s_op(b, n[10], "Identity", sw1, NULL);
    snprintf(sw1, sizeof sw1, "%s:1", n[9]);
    s_op(b, n[11], "Identity", sw1, NULL);
    s_op(b, n[12], "AddV2", n[10], n[3]);
    const char *add = body ? body(b, p, n[12]) : n[12];
    s_op(b, n[13], "AddV2", n[11], add);
    s_op(b, n[14], "NextIteration", n[12], NULL);
    s_op(b, n[15], "NextIteration", n[13], NULL);
}

static Tensorflow__GraphDef *s_parse(s_buf_t *b)
{
    Tensorflow__GraphDef *gd = NULL;
    assert_int_equal(fflush(b->f), 0);
    zf_status_t s = zf_graphdef_read_mem(b->text, b->len, ZF_FORMAT_PBTXT, &gd);
    if (!zf_ok(s)) fail_msg("%s\n%s", zf_status_msg(&s), b->text);
    return gd;
}

/* The session borrows its graph: the last one built, freed with the next. */
static Tensorflow__GraphDef *s_last_gd;

static zf_local_session_t *s_session(s_buf_t *b, int threads)
{
    zf_graphdef_free(&s_last_gd);
    Tensorflow__GraphDef *gd = s_last_gd = s_parse(b);
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.threads_per_device = threads;
    zf_local_session_t *s = NULL;
    zf_status_t st = zf_local_session_new(gd, &opts, &s);
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
    return s;
}

static int64_t s_int64(const zf_tensor_t *t)
{
    assert_int_equal(zf_tensor_dtype(t), ZF_INT64);
    assert_int_equal(zf_tensor_num_elements(t), 1);
    return *(const int64_t *)zf_tensor_data(t);
}

/* Runs the fetches; fails the test on error. */
static void s_run(zf_local_session_t *s, const char **fetches, int n, int64_t *out)
{
    zf_tensor_t *got[4] = {0};
    zf_status_t st = zf_local_session_run(s, NULL, NULL, 0, fetches, n, NULL, 0, got);
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
    for (int k = 0; k < n; k++) {
        out[k] = s_int64(got[k]);
        zf_tensor_unref(&got[k]);
    }
}

/* The sum loop over 1..N with its inputs outside. */
static void s_sum_graph(s_buf_t *b, int64_t N, int parallel, s_body_fn body)
{
    s_const(b, "zero", 0, NULL);
    s_const(b, "bound", N, NULL);
    s_const(b, "one", 1, NULL);
    s_loop(b, "loop", "zero", "zero", "bound", "one", parallel, body);
}

static void s_assert_no_frames(void)
{
    zf_engine_cf_stats_t cs;
    zf_engine_cf_stats(&cs);
    assert_int_equal(cs.live_iterations, 0);
    assert_int_equal(cs.live_frames, 0);
}

/* ---- while loops ------------------------------------------------------------------ */

static void s_check_sum(int64_t N, int parallel)
{
    s_buf_t b = {0};
    s_sum_graph(&b, N, parallel, NULL);
    zf_local_session_t *s = s_session(&b, 2);
    const char *fetches[] = {"loop/exit_acc", "loop/exit_i"};
    int64_t got[2];
    s_run(s, fetches, 2, got);
    int64_t want = 0;
    for (int64_t k = 1; k <= N; k++) want += k;
    assert_int_equal(got[0], want);
    assert_int_equal(got[1], N);
    s_assert_no_frames();
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

static void test_while_loop_sums_one_to_n(void **state)
{
    (void)state;
    s_check_sum(10, 10);
    s_check_sum(1000, 10);
    s_check_sum(100000, 32);
    s_check_sum(0, 10); /* the body never runs */
}

static void test_while_loop_runs_again_in_the_same_session(void **state)
{
    (void)state;
    s_buf_t b = {0};
    s_sum_graph(&b, 50, 4, NULL);
    zf_local_session_t *s = s_session(&b, 2);
    const char *fetches[] = {"loop/exit_acc"};
    for (int run = 0; run < 5; run++) {
        int64_t got = 0;
        s_run(s, fetches, 1, &got);
        assert_int_equal(got, 50 * 51 / 2);
    }
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

/* The inner loop sums 1..i+1 (its bound the outer counter, a constant
 * Enter of the outer frame's value); the outer one sums those. */
static const char *s_inner_body(s_buf_t *b, const char *p, const char *i1)
{
    char zero[96], one[96];
    snprintf(zero, sizeof zero, "%s/inner_zero", p);
    snprintf(one, sizeof one, "%s/enter_one", p);
    s_const(b, zero, 0, i1);
    char inner[96];
    snprintf(inner, sizeof inner, "%s/inner", p);
    s_loop(b, inner, zero, zero, i1, one, 3, NULL);
    static char out[128];
    snprintf(out, sizeof out, "%s/inner/exit_acc", p);
    return out;
}

static void test_nested_while_loops(void **state)
{
    (void)state;
    s_buf_t b = {0};
    const int64_t A = 30;
    s_sum_graph(&b, A, 5, s_inner_body);
    zf_local_session_t *s = s_session(&b, 2);
    const char *fetches[] = {"loop/exit_acc", "loop/exit_i"};
    int64_t got[2];
    zf_engine_cf_stats_reset_peak();
    s_run(s, fetches, 2, got);
    int64_t want = 0;
    for (int64_t i = 1; i <= A; i++)
        for (int64_t j = 1; j <= i; j++) want += j;
    assert_int_equal(got[0], want);
    assert_int_equal(got[1], A);
    zf_engine_cf_stats_t cs;
    zf_engine_cf_stats(&cs);
    assert_true(cs.peak_iterations <= 5 + 5 * 3); /* each outer iteration's inner frame: <= 3 */
    s_assert_no_frames();
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

/* A cond inside the body: k < H ? k : k + k. */
static const char *s_cond_body(s_buf_t *b, const char *p, const char *i1)
{
    char n[6][96];
    const char *names[] = {"half", "pred", "sw", "small", "big", "merge"};
    for (int k = 0; k < 6; k++) snprintf(n[k], sizeof n[k], "%s/c_%s", p, names[k]);
    s_const(b, n[0], 7, i1);
    s_op(b, n[1], "Less", i1, n[0]);
    s_add(b, "node { name: '%s' op: 'Switch' input: '%s' input: '%s' %s }\n", n[2], i1, n[1],
          T_INT64);
    char t[100], f[100];
    snprintf(t, sizeof t, "%s:1", n[2]);
    snprintf(f, sizeof f, "%s:0", n[2]);
    s_op(b, n[3], "Identity", t, NULL);
    s_op(b, n[4], "AddV2", f, f);
    s_add(b, "node { name: '%s' op: 'Merge' input: '%s' input: '%s' %s %s }\n", n[5], n[3], n[4],
          T_INT64, N2);
    static char out[100];
    snprintf(out, sizeof out, "%s", n[5]);
    return out;
}

static void test_cond_inside_a_while_loop(void **state)
{
    (void)state;
    s_buf_t b = {0};
    s_sum_graph(&b, 20, 4, s_cond_body);
    zf_local_session_t *s = s_session(&b, 2);
    const char *fetches[] = {"loop/exit_acc"};
    int64_t got = 0;
    s_run(s, fetches, 1, &got);
    int64_t want = 0;
    for (int64_t k = 1; k <= 20; k++) want += k < 7 ? k : 2 * k;
    assert_int_equal(got, want);
    s_assert_no_frames();
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

/* ---- parallel iterations ---------------------------------------------------------- */

static const char *s_probe_body(s_buf_t *b, const char *p, const char *i1)
{
    static char out[96];
    snprintf(out, sizeof out, "%s/probe", p);
    s_op(b, out, "CheckNumerics", i1, NULL);
    return out;
}

static void s_check_parallel(int parallel, int64_t N)
{
    s_buf_t b = {0};
    s_sum_graph(&b, N, parallel, s_probe_body);
    zf_local_session_t *s = s_session(&b, 8);
    const char *fetches[] = {"loop/exit_acc"};
    int64_t got = 0;
    s_probe_reset(2000, -1);
    zf_engine_cf_stats_reset_peak();
    s_run(s, fetches, 1, &got);
    assert_int_equal(got, N * (N + 1) / 2);
    assert_int_equal(s_probe_runs, N);
    assert_true(s_probe_max >= 1);
    assert_true(s_probe_max <= parallel);
    zf_engine_cf_stats_t cs;
    zf_engine_cf_stats(&cs);
    assert_true(cs.peak_iterations >= 1);
    assert_true(cs.peak_iterations <= parallel);
    s_assert_no_frames();
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

static void test_parallel_iterations_bound_the_iterations_in_flight(void **state)
{
    (void)state;
    s_check_parallel(1, 20);
    s_check_parallel(3, 30);
}

/* ---- memory --------------------------------------------------------------------- */

static long s_rss_pages(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2) rss = 0;
        fclose(f);
    }
    return rss;
}

/* The smallest loop: i = 0; while (i < N) i = i + 1 (8 nodes an iteration). */
static void s_count_graph(s_buf_t *b, int64_t N, int parallel)
{
    s_const(b, "zero", 0, NULL);
    s_const(b, "bound", N, NULL);
    s_const(b, "one", 1, NULL);
    s_enter(b, "enter", "zero", "count", false, parallel);
    s_enter(b, "enter_n", "bound", "count", true, parallel);
    s_enter(b, "enter_one", "one", "count", true, parallel);
    s_add(b, "node { name: 'merge' op: 'Merge' input: 'enter' input: 'next' %s %s }\n", T_INT64,
          N2);
    s_op(b, "less", "Less", "merge", "enter_n");
    s_add(b, "node { name: 'cond' op: 'LoopCond' input: 'less' }\n");
    s_add(b, "node { name: 'sw' op: 'Switch' input: 'merge' input: 'cond' %s }\n", T_INT64);
    s_op(b, "exit", "Exit", "sw", NULL);
    s_op(b, "body", "Identity", "sw:1", NULL);
    s_op(b, "add", "AddV2", "body", "enter_one");
    s_op(b, "next", "NextIteration", "add", NULL);
}

static void test_a_million_iterations_run_in_bounded_memory(void **state)
{
    (void)state;
    const int64_t N = 1000000;
    s_buf_t b = {0};
    s_count_graph(&b, N, 10);
    zf_local_session_t *s = s_session(&b, 2);
    const char *fetches[] = {"exit"};
    int64_t got = 0;
    zf_engine_cf_stats_reset_peak();
    long before = s_rss_pages();
    s_run(s, fetches, 1, &got);
    long after = s_rss_pages();
    assert_int_equal(got, N);
    zf_engine_cf_stats_t cs;
    zf_engine_cf_stats(&cs);
    assert_true(cs.peak_iterations >= 1);
    assert_true(cs.peak_iterations <= 10);
    s_assert_no_frames();
    /* A state kept per iteration would be far above this (ASan keeps freed
     * memory in quarantine, hence the generous bound). */
    long page = sysconf(_SC_PAGESIZE);
    assert_true((after - before) * page < 512L * 1024 * 1024);
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

/* The process's peak virtual memory in kB (VmPeak), 0 when unknown. */
static long s_vm_peak_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmPeak: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

static void test_a_huge_parallel_iterations_reserves_no_memory_for_it(void **state)
{
    (void)state;
    s_buf_t b = {0};
    s_count_graph(&b, 100, INT32_MAX / 2); /* the most the graph may ask for */
    zf_local_session_t *s = s_session(&b, 2);
    const char *fetches[] = {"exit"};
    int64_t got = 0;
    long before = s_vm_peak_kb();
    s_run(s, fetches, 1, &got);
    long after = s_vm_peak_kb();
    assert_int_equal(got, 100);
    s_assert_no_frames();
    /* a slot per allowed iteration would be gigabytes */
    assert_true(after - before < 1024L * 1024);
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

/* ---- conds and deadness --------------------------------------------------------- */

/* y = pred ? x * x : -x, through Switch and Merge; value_index says which. */
static const char *s_cond_text =
    "node { name: 'x' op: 'Const' attr { key: 'dtype' value { type: DT_INT64 } } attr { key: "
    "'value' value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: 6 } } } }\n"
    "node { name: 'pred' op: 'Placeholder' attr { key: 'dtype' value { type: DT_BOOL } } }\n"
    "node { name: 'sw' op: 'Switch' input: 'x' input: 'pred' " T_INT64 " }\n"
    "node { name: 'sq' op: 'Mul' input: 'sw:1' input: 'sw:1' " T_INT64 " }\n"
    "node { name: 'neg' op: 'Neg' input: 'sw:0' " T_INT64 " }\n"
    "node { name: 'after_neg' op: 'Identity' input: 'neg' " T_INT64 " }\n"
    "node { name: 'y' op: 'Merge' input: 'sq' input: 'after_neg' " T_INT64
    " attr { key: 'N' value { i: 2 } } }\n"
    "node { name: 'trigger' op: 'ControlTrigger' input: '^sq' input: '^neg' }\n"
    "node { name: 'after' op: 'Identity' input: 'x' input: '^trigger' " T_INT64 " }\n";

static zf_status_t s_run_cond(zf_local_session_t *s, bool pred, const char *fetch,
                              zf_tensor_t **out)
{
    zf_tensor_t *p = NULL;
    assert_int_equal(zf_tensor_new_scalar_bool(pred, &p).code, ZF_OK);
    const char *feed = "pred";
    zf_status_t st = zf_local_session_run(s, &feed, &p, 1, &fetch, 1, NULL, 0, out);
    zf_tensor_unref(&p);
    return st;
}

static void test_cond_takes_the_branch_its_predicate_names(void **state)
{
    (void)state;
    s_buf_t b = {0};
    s_add(&b, "%s", s_cond_text);
    zf_local_session_t *s = s_session(&b, 2);
    for (int pred = 0; pred <= 1; pred++) {
        zf_tensor_t *y = NULL, *index = NULL, *after = NULL;
        zf_status_t st = s_run_cond(s, pred, "y", &y);
        assert_int_equal(st.code, ZF_OK);
        assert_int_equal(s_int64(y), pred ? 36 : -6);
        st = s_run_cond(s, pred, "y:1", &index);
        assert_int_equal(st.code, ZF_OK);
        assert_int_equal(zf_tensor_dtype(index), ZF_INT32);
        assert_int_equal(*(const int32_t *)zf_tensor_data(index), pred ? 0 : 1);
        /* A ControlTrigger runs even though one of its inputs is dead. */
        st = s_run_cond(s, pred, "after", &after);
        assert_int_equal(st.code, ZF_OK);
        assert_int_equal(s_int64(after), 6);
        zf_tensor_unref(&y);
        zf_tensor_unref(&index);
        zf_tensor_unref(&after);
    }
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

static void test_the_untaken_branch_is_dead(void **state)
{
    (void)state;
    s_buf_t b = {0};
    s_add(&b, "%s", s_cond_text);
    zf_local_session_t *s = s_session(&b, 2);
    zf_tensor_t *out = NULL;
    zf_status_t st = s_run_cond(s, true, "after_neg", &out);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&st), "fetched tensor 'after_neg:0' is dead (not computed on "
                                            "the path control flow took)");
    assert_null(out);
    zf_status_clear(&st);
    st = s_run_cond(s, false, "after_neg", &out);
    assert_int_equal(st.code, ZF_OK);
    assert_int_equal(s_int64(out), -6);
    zf_tensor_unref(&out);
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

/* _SwitchN sends its input to output output_index, the last when out of
 * range; the others are dead, and Merge takes the live one. */
static void test_switch_n_selects_one_output(void **state)
{
    (void)state;
    for (int32_t index = -1; index <= 3; index++) {
        s_buf_t b = {0};
        s_add(&b,
              "node { name: 'x' op: 'Const' attr { key: 'dtype' value { type: DT_INT64 } } attr "
              "{ key: 'value' value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: 5 } } "
              "} }\n"
              "node { name: 'k' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } } attr "
              "{ key: 'value' value { tensor { dtype: DT_INT32 tensor_shape {} int_val: %d } } "
              "} }\n"
              "node { name: 'sw' op: '_SwitchN' input: 'x' input: 'k' " T_INT64
              " attr { key: 'num_outs' value { i: 3 } } }\n"
              "node { name: 'a' op: 'Neg' input: 'sw:0' " T_INT64 " }\n"
              "node { name: 'b' op: 'Mul' input: 'sw:1' input: 'sw:1' " T_INT64 " }\n"
              "node { name: 'c' op: 'AddV2' input: 'sw:2' input: 'sw:2' " T_INT64 " }\n"
              "node { name: 'm' op: 'Merge' input: 'a' input: 'b' input: 'c' " T_INT64
              " attr { key: 'N' value { i: 3 } } }\n",
              (int)index);
        zf_local_session_t *s = s_session(&b, 1);
        const char *fetches[] = {"m"};
        int64_t got = 0;
        s_run(s, fetches, 1, &got);
        int want_index = index < 0 || index > 2 ? 2 : index;
        int64_t want[] = {-5, 25, 10};
        assert_int_equal(got, want[want_index]);
        zf_local_session_destroy(&s);
        s_buf_free(&b);
    }
}

/* A loop on the untaken side of a cond: everything in it is dead, and so
 * are its Exits once the frame is done. */
static void test_a_loop_on_the_untaken_branch_is_dead(void **state)
{
    (void)state;
    s_buf_t b = {0};
    s_add(&b, "node { name: 'pred' op: 'Placeholder' attr { key: 'dtype' value { type: DT_BOOL } } "
              "}\n");
    s_const(&b, "zero", 0, NULL);
    s_const(&b, "bound", 4, NULL);
    s_const(&b, "one", 1, NULL);
    s_add(&b, "node { name: 'sw' op: 'Switch' input: 'zero' input: 'pred' " T_INT64 " }\n");
    s_loop(&b, "loop", "sw:1", "sw:1", "bound", "one", 2, NULL);
    s_op(&b, "other", "Neg", "sw:0", NULL);
    s_add(&b, "node { name: 'm' op: 'Merge' input: 'loop/exit_acc' input: 'other' " T_INT64 " " N2
              " }\n");
    zf_local_session_t *s = s_session(&b, 2);
    for (int pred = 0; pred <= 1; pred++) {
        zf_tensor_t *out = NULL;
        zf_status_t st = s_run_cond(s, pred, "m", &out);
        assert_int_equal(st.code, ZF_OK);
        assert_int_equal(s_int64(out), pred ? 10 : 0);
        zf_tensor_unref(&out);
        st = s_run_cond(s, pred, "m:1", &out);
        assert_int_equal(st.code, ZF_OK);
        assert_int_equal(*(const int32_t *)zf_tensor_data(out), pred ? 0 : 1);
        zf_tensor_unref(&out);
    }
    s_assert_no_frames();
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

/* ---- errors ---------------------------------------------------------------------- */

static void test_an_error_inside_a_loop_aborts_the_step(void **state)
{
    (void)state;
    s_buf_t b = {0};
    s_sum_graph(&b, 100, 4, s_probe_body);
    zf_local_session_t *s = s_session(&b, 4);
    const char *fetch = "loop/exit_acc";
    zf_tensor_t *out = NULL;
    s_probe_reset(0, 37);
    zf_status_t st = zf_local_session_run(s, NULL, NULL, 0, &fetch, 1, NULL, 0, &out);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&st), CPU0 ": loop/probe (CheckNumerics): the probe "
                                                 "refuses 37");
    assert_null(out);
    zf_status_clear(&st);
    /* Values 1..33 ran before the iteration of 37 could start (4 in flight). */
    assert_true(s_probe_runs >= 34 && s_probe_runs <= 40);
    s_assert_no_frames();
    /* The session runs again. */
    s_probe_reset(0, -1);
    int64_t got = 0;
    s_run(s, &fetch, 1, &got);
    assert_int_equal(got, 100 * 101 / 2);
    zf_local_session_destroy(&s);
    s_buf_free(&b);
}

static void s_expect_invalid(s_buf_t *b, const char *message)
{
    Tensorflow__GraphDef *gd = s_parse(b);
    zf_local_session_t *s = NULL;
    zf_status_t st = zf_local_session_new(gd, NULL, &s);
    if (zf_ok(st)) {
        const char *fetch = "out";
        zf_tensor_t *out = NULL;
        st = zf_local_session_run(s, NULL, NULL, 0, &fetch, 1, NULL, 0, &out);
        zf_tensor_unref(&out);
    }
    if (st.code != ZF_INVALID_ARGUMENT || !strstr(zf_status_msg(&st), message))
        fail_msg("'%s' not in '%s'", message, zf_status_msg(&st));
    zf_status_clear(&st);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static void test_malformed_loops_are_refused(void **state)
{
    (void)state;
    s_buf_t b = {0};
    /* An Exit in no frame. */
    s_const(&b, "x", 1, NULL);
    s_op(&b, "out", "Exit", "x", NULL);
    s_expect_invalid(&b, "node 'out' (Exit) is not inside a while-loop frame");
    /* A NextIteration in no frame. */
    s_buf_free(&b);
    s_const(&b, "x", 1, NULL);
    s_op(&b, "next", "NextIteration", "x", NULL);
    s_op(&b, "out", "Identity", "next", NULL);
    s_expect_invalid(&b, "node 'next' (NextIteration) is not inside a while-loop frame");
    /* A node fed from inside and from outside a loop. */
    s_buf_free(&b);
    s_const(&b, "x", 1, NULL);
    s_enter(&b, "e", "x", "f", false, 10);
    s_op(&b, "out", "AddV2", "e", "x");
    s_expect_invalid(&b, "node 'out' (AddV2) has inputs from different frames: input 'x' is in "
                         "the root frame, input 'e' is in frame 'f'");
    /* Two frames of one name. */
    s_buf_free(&b);
    s_const(&b, "x", 1, NULL);
    s_enter(&b, "e1", "x", "outer", false, 10);
    s_enter(&b, "e2", "e1", "inner", false, 10);
    s_enter(&b, "e3", "x", "inner", false, 10);
    s_op(&b, "out", "Identity", "e2", "^e3");
    s_expect_invalid(&b, "frame 'inner' is entered from two frames");
    /* An Enter without a frame name. */
    s_buf_free(&b);
    s_const(&b, "x", 1, NULL);
    s_op(&b, "out", "Enter", "x", NULL);
    s_expect_invalid(&b, "'out' (Enter): missing attr 'frame_name'");
    /* parallel_iterations out of range, either way. */
    s_buf_free(&b);
    s_const(&b, "x", 1, NULL);
    s_enter(&b, "out", "x", "f", false, 0);
    s_expect_invalid(&b, "'out' (Enter): parallel_iterations must be between 1 and 1073741823, "
                         "got 0");
    s_buf_free(&b);
    s_const(&b, "x", 1, NULL);
    s_enter(&b, "out", "x", "f", false, INT32_MAX);
    s_expect_invalid(&b, "got 2147483647");
    /* A loop nothing enters. */
    s_buf_free(&b);
    s_const(&b, "x", 1, NULL);
    s_add(&b, "node { name: 'm' op: 'Merge' input: 'n' input: 'n' %s %s }\n", T_INT64, N2);
    s_op(&b, "n", "NextIteration", "m", NULL);
    s_op(&b, "out", "AddV2", "x", "m");
    s_expect_invalid(&b, "node 'm' (Merge) can never run: every path to it comes around a loop "
                         "through a NextIteration node");
    s_buf_free(&b);
}

/* ---- TensorFlow's own graph ---------------------------------------------------- */

static void test_tensorflow_while_loop_graph(void **state)
{
    (void)state;
    /* tests/data/tensorflow/graph-while-loop.pbtxt counts an int32 from 0
     * while it is below 10. */
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t st =
        zf_graphdef_read_file(ZF_TF_DATA_DIR "/graph-while-loop.pbtxt", ZF_FORMAT_AUTO, &gd);
    assert_int_equal(st.code, ZF_OK);
    zf_local_session_t *s = NULL;
    st = zf_local_session_new(gd, NULL, &s);
    assert_int_equal(st.code, ZF_OK);
    const char *fetch = "while/Exit";
    zf_tensor_t *out = NULL;
    st = zf_local_session_run(s, NULL, NULL, 0, &fetch, 1, NULL, 0, &out);
    if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
    assert_int_equal(zf_tensor_dtype(out), ZF_INT32);
    assert_int_equal(zf_tensor_num_elements(out), 1);
    assert_int_equal(*(const int32_t *)zf_tensor_data(out), 10);
    zf_tensor_unref(&out);
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
}

static int s_teardown(void **state)
{
    (void)state;
    zf_graphdef_free(&s_last_gd);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_while_loop_sums_one_to_n),
        cmocka_unit_test(test_while_loop_runs_again_in_the_same_session),
        cmocka_unit_test(test_nested_while_loops),
        cmocka_unit_test(test_cond_inside_a_while_loop),
        cmocka_unit_test(test_parallel_iterations_bound_the_iterations_in_flight),
        cmocka_unit_test(test_a_million_iterations_run_in_bounded_memory),
        cmocka_unit_test(test_a_huge_parallel_iterations_reserves_no_memory_for_it),
        cmocka_unit_test(test_cond_takes_the_branch_its_predicate_names),
        cmocka_unit_test(test_the_untaken_branch_is_dead),
        cmocka_unit_test(test_switch_n_selects_one_output),
        cmocka_unit_test(test_a_loop_on_the_untaken_branch_is_dead),
        cmocka_unit_test(test_an_error_inside_a_loop_aborts_the_step),
        cmocka_unit_test(test_malformed_loops_are_refused),
        cmocka_unit_test(test_tensorflow_while_loop_graph),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
