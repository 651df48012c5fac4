/* Failure tests of the distributed service through libzflow-client: real
 * zflow-broker, two zflow-executor and one zflow-scheduler processes on
 * 127.0.0.1 ephemeral ports; executors killed or stopped, a kernel
 * failing in one partition, and a client leaving mid-step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "service_test_util.h"
#include "busy_test_util.h"
#include "test_util.h"

#define CPU0    ZF_TEST_CPU(0)
#define CPU1    ZF_TEST_CPU(1)
#define WAIT_MS 10000

typedef struct {
    zf_test_service_t svc; /* two executors */
    zf_client_t *client;
} fixture_t;

/* The broker declares an executor dead after heartbeat_ms * misses. */
static int s_setup_cluster(void **state, const char *heartbeat_ms, const char *misses,
                           const char *job_results, const char *job_ttl_ms)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (!f) return -1;
    *state = f;
    const char *bargs[] = {"--heartbeat-ms", heartbeat_ms,    "--heartbeat-misses",
                           misses,           "--job-results", job_results,
                           "--job-ttl-ms",   job_ttl_ms,      NULL};
    zf_test_service_start(&f->svc, bargs, 2, WAIT_MS);
    ASSERT_OK(zf_client_connect(f->svc.broker.endpoint, &f->client));
    zf_client_set_timeout(f->client, WAIT_MS);
    return 0;
}

/* Dead after 2 s without a heartbeat: soon, but not so soon that a loaded
 * machine makes a live executor miss it. */
static int s_setup_fast(void **state)
{
    return s_setup_cluster(state, "200", "10", "1024", "600000");
}

/* Dead only after 30 s: a stopped executor stays a member. */
static int s_setup_slow(void **state)
{
    return s_setup_cluster(state, "1000", "30", "1024", "600000");
}

/* As slow, with room for one job result, kept 1.5 s. */
static int s_setup_retention(void **state)
{
    return s_setup_cluster(state, "1000", "30", "1", "1500");
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    if (!f) return 0;
    zf_client_destroy(&f->client);
    int rc = zf_test_service_stop(&f->svc, WAIT_MS);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* x on CPU:0, y = x * x on CPU:1, z = -y on CPU:0: every step crosses twice. */
static Tensorflow__GraphDef *s_chain_graph(void)
{
    const char *const devices[3] = {CPU0, CPU1, CPU0};
    return zf_test_neg_chain(devices, 3);
}

static zf_tensor_t *s_floats(float scale)
{
    float v[8] = {1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, -0.75f};
    for (int i = 0; i < 8; i++) v[i] *= scale;
    zf_shape_t shape = {.rank = 1, .dims = {8}};
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, sizeof v, &t));
    return t;
}

static const char *const s_feed_x[1] = {"x"};
static const char *const s_fetch_z[1] = {"z"};

static zf_client_step_t s_chain_step(zf_tensor_t **x)
{
    return (zf_client_step_t){s_feed_x, x, 1, s_fetch_z, 1, NULL, 0};
}

/* Runs one chain step of session on c and checks z == -(x * x). */
static void s_expect_chain_runs(zf_client_t *c, const char *session, float scale)
{
    zf_tensor_t *x = s_floats(scale);
    zf_client_step_t step = s_chain_step(&x);
    zf_tensor_t *z = NULL;
    ASSERT_OK(zf_client_session_run(c, session, &step, WAIT_MS, &z));
    assert_non_null(z);
    assert_int_equal(zf_tensor_nbytes(z), zf_tensor_nbytes(x));
    const float *xv = zf_tensor_data(x), *zv = zf_tensor_data(z);
    for (int i = 0; i < 8; i++) assert_true(zv[i] == -(xv[i] * xv[i]));
    zf_tensor_unref(&z);
    zf_tensor_unref(&x);
}

static char *s_create(zf_client_t *c, Tensorflow__GraphDef *gd, bool soft)
{
    zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    o.allow_soft_placement = soft;
    char *session = NULL;
    ASSERT_OK(zf_client_session_create(c, gd, &o, &session));
    return session;
}

static void test_service_reports_an_executor_killed_mid_step_and_replaces(void **state)
{
    fixture_t *f = *state;
    Tensorflow__GraphDef *gd = zf_test_slow_chain_graph(CPU0, CPU1);
    char *session = s_create(f->client, gd, true);
    s_expect_chain_runs(f->client, session, 1.0f);

    /* Killed once it is computing the step, that is once it has the step's
     * RunGraph: killed before, the broker could declare it dead before the
     * scheduler sees the step, which would then run on CPU:0 alone. */
    pid_t busy = f->svc.executors[1].pid;
    long ticks = zf_test_cpu_ticks(busy);
    assert_true(ticks >= 0);
    zf_tensor_t *x = s_floats(2.0f);
    zf_client_step_t step = s_chain_step(&x);
    uint64_t request = 0;
    ASSERT_OK(zf_client_session_run_start(f->client, session, &step, WAIT_MS, &request));
    zf_test_wait_cpu(busy, ticks, sysconf(_SC_CLK_TCK) / 10, WAIT_MS); /* 100 ms of products */
    assert_int_equal(zf_test_child_stop(&f->svc.executors[1], SIGKILL, WAIT_MS), 128 + SIGKILL);
    zf_tensor_t *z = NULL;
    zf_test_expect_error(zf_client_session_run_finish(f->client, request, 1, WAIT_MS, &z),
                         ZF_UNAVAILABLE, CPU1);
    assert_null(z);
    s_expect_chain_runs(f->client, session, 3.0f); /* re-placed on CPU:0 alone */
    ASSERT_OK(zf_client_session_close(f->client, session));
    zf_tensor_unref(&x);
    free(session);
    zf_graphdef_free(&gd);
}

static void test_service_fails_a_step_past_its_timeout_and_runs_the_next(void **state)
{
    fixture_t *f = *state;
    Tensorflow__GraphDef *gd = s_chain_graph();
    char *session = s_create(f->client, gd, false);
    s_expect_chain_runs(f->client, session, 1.0f);

    /* a stopped executor is still a member (30 s heartbeat timeout), so only
     * the step's own 300 ms timeout can end the step. kill() only queues
     * the signal: wait until the process has stopped before the step. */
    kill(f->svc.executors[1].pid, SIGSTOP);
    int wst = 0;
    assert_int_equal(waitpid(f->svc.executors[1].pid, &wst, WUNTRACED), f->svc.executors[1].pid);
    assert_true(WIFSTOPPED(wst));
    zf_tensor_t *x = s_floats(2.0f);
    zf_client_step_t step = s_chain_step(&x);
    uint64_t request = 0;
    ASSERT_OK(zf_client_session_run_start(f->client, session, &step, 300, &request));
    zf_tensor_t *z = NULL;
    zf_test_expect_error(zf_client_session_run_finish(f->client, request, 1, WAIT_MS, &z),
                         ZF_DEADLINE_EXCEEDED, "did not finish within 300 ms");
    assert_null(z);
    kill(f->svc.executors[1].pid, SIGCONT);
    s_expect_chain_runs(f->client, session, 3.0f);
    s_expect_chain_runs(f->client, session, -1.0f);
    ASSERT_OK(zf_client_session_close(f->client, session));
    zf_tensor_unref(&x);
    free(session);
    zf_graphdef_free(&gd);
}

static void test_service_reports_a_kernel_error_with_the_partitions_device(void **state)
{
    fixture_t *f = *state;
    const char *text = "node { name: 'x' op: 'Placeholder' device: '" CPU0 "'"
                       "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
                       "node { name: 'shape' op: 'Const' device: '" CPU1 "'"
                       "  attr { key: 'dtype' value { type: DT_INT32 } }"
                       "  attr { key: 'value' value { tensor { dtype: DT_INT32"
                       "    tensor_shape { dim { size: 1 } } int_val: 3 } } } }"
                       "node { name: 'r' op: 'Reshape' input: 'x' input: 'shape' device: '" CPU1 "'"
                       "  attr { key: 'T' value { type: DT_FLOAT } }"
                       "  attr { key: 'Tshape' value { type: DT_INT32 } } }"
                       "node { name: 'z' op: 'Neg' input: 'r' device: '" CPU0 "'"
                       "  attr { key: 'T' value { type: DT_FLOAT } } }";
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    char *session = s_create(f->client, gd, false);
    zf_tensor_t *x = s_floats(1.0f);
    zf_client_step_t step = s_chain_step(&x);
    zf_tensor_t *z = NULL;
    zf_status_t s = zf_client_session_run(f->client, session, &step, WAIT_MS, &z);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(s.msg, CPU1));
    assert_non_null(strstr(s.msg, "Input to reshape is a tensor with 8 values"));
    zf_status_clear(&s);
    assert_null(z);
    ASSERT_OK(zf_client_session_close(f->client, session));
    free(session);
    zf_graphdef_free(&gd);

    /* the executors are not left waiting on the aborted step */
    gd = s_chain_graph();
    session = s_create(f->client, gd, false);
    s_expect_chain_runs(f->client, session, -1.0f);
    ASSERT_OK(zf_client_session_close(f->client, session));
    free(session);
    zf_tensor_unref(&x);
    zf_graphdef_free(&gd);
}

/* a = m x m of ones, b = a.a on CPU:0, c = b.b on CPU:1: a step long enough
 * to be running when its client goes. */
static Tensorflow__GraphDef *s_matmul_graph(void)
{
    const char *text = "node { name: 'a' op: 'Placeholder' device: '" CPU0 "'"
                       "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
                       "node { name: 'b' op: 'MatMul' input: 'a' input: 'a' device: '" CPU0 "'"
                       "  attr { key: 'T' value { type: DT_FLOAT } } }"
                       "node { name: 'c' op: 'MatMul' input: 'b' input: 'b' device: '" CPU1 "'"
                       "  attr { key: 'T' value { type: DT_FLOAT } } }";
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    return gd;
}

static void test_service_keeps_serving_a_client_when_another_leaves_mid_step(void **state)
{
    fixture_t *f = *state;
    enum { M = 384 };
    Tensorflow__GraphDef *mm = s_matmul_graph();
    zf_shape_t shape = {.rank = 2, .dims = {M, M}};
    zf_tensor_t *a = NULL;
    ASSERT_OK(zf_tensor_new(ZF_FLOAT, &shape, &a));
    float *av = zf_tensor_data(a);
    for (int i = 0; i < M * M; i++) av[i] = 1.0f;
    zf_client_t *leaver = NULL;
    ASSERT_OK(zf_client_connect(f->svc.broker.endpoint, &leaver));
    char *big = s_create(leaver, mm, false);
    const char *feed_a[1] = {"a"}, *fetch_c[1] = {"c"};
    zf_client_step_t step = {feed_a, &a, 1, fetch_c, 1, NULL, 0};
    uint64_t requests[4];
    for (int k = 0; k < 4; k++)
        ASSERT_OK(zf_client_session_run_start(leaver, big, &step, WAIT_MS, &requests[k]));
    zf_client_destroy(&leaver); /* its steps are still queued or running */

    Tensorflow__GraphDef *gd = s_chain_graph();
    char *session = s_create(f->client, gd, false);
    for (int k = 0; k < 20; k++) s_expect_chain_runs(f->client, session, (float)(k + 1));
    ASSERT_OK(zf_client_session_close(f->client, session));
    free(session);

    /* the abandoned session still computes for a client that comes back */
    ASSERT_OK(zf_client_connect(f->svc.broker.endpoint, &leaver));
    zf_tensor_t *c = NULL;
    ASSERT_OK(zf_client_session_run(leaver, big, &step, WAIT_MS, &c));
    assert_int_equal(zf_tensor_nbytes(c), (size_t)M * M * sizeof(float));
    const float *cv = zf_tensor_data(c);
    assert_true(cv[0] == (float)M * M * M && cv[M * M - 1] == (float)M * M * M);
    zf_tensor_unref(&c);
    ASSERT_OK(zf_client_session_close(leaver, big));
    zf_client_destroy(&leaver);
    assert_int_equal(waitpid(f->svc.scheduler.pid, NULL, WNOHANG), 0); /* still running */
    free(big);
    zf_tensor_unref(&a);
    zf_graphdef_free(&gd);
    zf_graphdef_free(&mm);
}

/* Submits a chain job (x = v) on c and waits until it is done; its id. */
static char *s_submit_done(zf_client_t *c, Tensorflow__GraphDef *gd, float v)
{
    zf_tensor_t *x = s_floats(v);
    zf_client_step_t step = s_chain_step(&x);
    char *id = NULL;
    ASSERT_OK(zf_client_submit(c, gd, NULL, &step, &id));
    zf_client_job_progress_t p = {0};
    for (int64_t end = zf_test_now_ms() + WAIT_MS; zf_test_now_ms() < end; usleep(10000)) {
        ASSERT_OK(zf_client_poll(c, id, &p));
        if (p.state == ZF_CLIENT_JOB_DONE) break;
    }
    assert_int_equal(p.state, ZF_CLIENT_JOB_DONE);
    zf_tensor_unref(&x);
    return id;
}

static void test_service_keeps_job_results_within_the_brokers_limits(void **state)
{
    fixture_t *f = *state;
    Tensorflow__GraphDef *gd = s_chain_graph();
    zf_tensor_t *z = NULL;

    /* room for one result: the second job's pushes out the first's */
    char *first = s_submit_done(f->client, gd, 1.0f), *second = s_submit_done(f->client, gd, 2.0f);
    zf_test_expect_error(zf_client_wait(f->client, first, 1, WAIT_MS, &z), ZF_NOT_FOUND,
                         "at most 1 of them");
    ASSERT_OK(zf_client_wait(f->client, second, 1, WAIT_MS, &z));
    const float *zv = zf_tensor_data(z); /* -(x * x) for x = 2 * s_floats(1) */
    assert_true(zv[0] == -4.0f && zv[1] == -16.0f && zv[2] == -1.0f && zv[7] == -2.25f);
    zf_tensor_unref(&z);

    /* kept 1.5 s: gone 2.5 s later */
    char *third = s_submit_done(f->client, gd, 3.0f);
    usleep(2500000);
    zf_test_expect_error(zf_client_wait(f->client, third, 1, WAIT_MS, &z), ZF_NOT_FOUND,
                         "or it expired");
    assert_null(z);
    free(first);
    free(second);
    free(third);
    zf_graphdef_free(&gd);
}

int main(void)
{
    /* One BLAS thread per executor: threads spinning in matrix products
     * would crowd the executors' heartbeats off a small machine. */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_service_keeps_job_results_within_the_brokers_limits,
                                        s_setup_retention, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_service_reports_an_executor_killed_mid_step_and_replaces, s_setup_fast,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_service_reports_a_kernel_error_with_the_partitions_device, s_setup_slow,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_service_fails_a_step_past_its_timeout_and_runs_the_next, s_setup_slow, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_service_keeps_serving_a_client_when_another_leaves_mid_step, s_setup_fast,
            s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
