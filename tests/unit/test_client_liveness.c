/* Liveness tests of libzflow-client against real processes on 127.0.0.1
 * ephemeral ports: a broker (or a session's scheduler) that stops answering
 * is UNAVAILABLE within about 3 s whatever the request's timeout; a step
 * slower than its timeout while they answer is DEADLINE_EXCEEDED. */
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
#include "test_util.h"

#define CPU0    ZF_TEST_CPU(0)
#define CPU1    ZF_TEST_CPU(1)
#define WAIT_MS 10000
#define LONG_MS 20000 /* a request timeout far beyond the 3 s of silence */

typedef struct {
    zf_test_service_t svc; /* only its broker, or two executors too */
    zf_client_t *client;
    Tensorflow__GraphDef *gd;
} fixture_t;

/* x on CPU:0, y = -x on CPU:1: each step waits for both executors. */
static Tensorflow__GraphDef *s_graph(void)
{
    const char *const devices[2] = {CPU0, CPU1};
    return zf_test_neg_chain(devices, 2);
}

/* Stops pid and waits until it has stopped: kill() only queues SIGSTOP. */
static void s_stop(pid_t pid)
{
    assert_int_equal(kill(pid, SIGSTOP), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
    assert_true(WIFSTOPPED(status));
}

static int s_setup_broker(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (!f) return -1;
    *state = f;
    zf_test_broker_start(&f->svc.broker, NULL);
    ASSERT_OK(zf_client_connect(f->svc.broker.endpoint, &f->client));
    zf_client_set_timeout(f->client, LONG_MS);
    f->gd = s_graph();
    return 0;
}

/* The broker declares an executor dead only after 30 s: a stopped one
 * stays a member, so only time can end its steps. */
static int s_setup_cluster(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (!f) return -1;
    *state = f;
    const char *bargs[] = {"--heartbeat-ms", "1000", "--heartbeat-misses", "30", NULL};
    zf_test_service_start(&f->svc, bargs, 2, WAIT_MS);
    ASSERT_OK(zf_client_connect(f->svc.broker.endpoint, &f->client));
    zf_client_set_timeout(f->client, LONG_MS);
    f->gd = s_graph();
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    if (!f) return 0;
    zf_client_destroy(&f->client);
    int rc = zf_test_service_stop(&f->svc, WAIT_MS);
    zf_graphdef_free(&f->gd);
    free(f);
    return rc == 0 ? 0 : -1;
}

static void test_client_reports_a_killed_broker_as_unavailable_within_3_s(void **state)
{
    fixture_t *f = *state;
    char *session = NULL;
    /* alive: the broker itself answers at once */
    zf_test_expect_error(zf_client_session_create(f->client, f->gd, NULL, &session), ZF_UNAVAILABLE,
                         "no scheduler is registered");
    assert_int_equal(zf_test_broker_stop(&f->svc.broker, SIGKILL), 128 + SIGKILL);
    int64_t t0 = zf_test_now_ms();
    char want[400];
    snprintf(want, sizeof want, "no reply to CreateSession: the broker at %s does not answer",
             f->svc.broker.endpoint);
    zf_test_expect_error(zf_client_session_create(f->client, f->gd, NULL, &session), ZF_UNAVAILABLE,
                         want);
    int64_t took = zf_test_now_ms() - t0;
    assert_true(took >= 2900 && took < 8000);
    assert_null(session);
}

static void test_client_reports_a_never_started_broker_as_unavailable_within_3_s(void **state)
{
    fixture_t *f = *state;
    zf_client_t *c = NULL;
    /* port 1 is never a zflow broker and needs root to listen on */
    ASSERT_OK(zf_client_connect("tcp://127.0.0.1:1", &c));
    zf_client_set_timeout(c, LONG_MS);
    char *job = NULL;
    zf_client_step_t step = {NULL, NULL, 0, NULL, 0, NULL, 0};
    int64_t t0 = zf_test_now_ms();
    zf_test_expect_error(zf_client_submit(c, f->gd, NULL, &step, &job), ZF_UNAVAILABLE,
                         "no reply to SubmitJob: the broker at tcp://127.0.0.1:1 does not answer");
    int64_t took = zf_test_now_ms() - t0;
    assert_true(took >= 2900 && took < 8000);
    assert_null(job);
    zf_client_destroy(&c);
}

static const char *const s_feed_x[1] = {"x"};
static const char *const s_fetch_y[1] = {"y"};

/* Starts a step of session without a step timeout of its own. */
static uint64_t s_start(fixture_t *f, const char *session, zf_tensor_t **x)
{
    zf_client_step_t step = {s_feed_x, x, 1, s_fetch_y, 1, NULL, 0};
    uint64_t request = 0;
    ASSERT_OK(zf_client_session_run_start(f->client, session, &step, 0, &request));
    return request;
}

/* A step that waits for a stopped executor, given 1500 ms. */
static void s_expect_slow_step(fixture_t *f, bool direct, const char *answers)
{
    zf_client_set_direct(f->client, direct);
    char *session = NULL;
    ASSERT_OK(zf_client_session_create(f->client, f->gd, NULL, &session));
    zf_tensor_t *x = NULL, *y = NULL;
    ASSERT_OK(zf_tensor_new_scalar_float(2.0f, &x));
    ASSERT_OK(zf_client_session_run_finish(f->client, s_start(f, session, &x), 1, WAIT_MS, &y));
    assert_true(*(float *)zf_tensor_data(y) == -2.0f);
    zf_tensor_unref(&y);

    s_stop(f->svc.executors[1].pid);
    uint64_t request = s_start(f, session, &x);
    int64_t t0 = zf_test_now_ms();
    char want[200];
    snprintf(want, sizeof want, "no reply to RunStep within 1500 ms; the %s answers", answers);
    zf_test_expect_error(zf_client_session_run_finish(f->client, request, 1, 1500, &y),
                         ZF_DEADLINE_EXCEEDED, want);
    int64_t took = zf_test_now_ms() - t0;
    assert_true(took >= 1450 && took < 5000);
    assert_null(y);
    kill(f->svc.executors[1].pid, SIGCONT);
    /* the late reply is kept for its request, which can still collect it */
    ASSERT_OK(zf_client_session_run_finish(f->client, request, 1, WAIT_MS, &y));
    assert_true(*(float *)zf_tensor_data(y) == -2.0f);
    zf_tensor_unref(&y);
    zf_tensor_unref(&x);
    ASSERT_OK(zf_client_session_close(f->client, session));
    free(session);
}

static void test_client_reports_a_slow_step_through_the_broker_as_deadline_exceeded(void **state)
{
    s_expect_slow_step(*state, false, "broker");
}

static void test_client_reports_a_slow_direct_step_as_deadline_exceeded(void **state)
{
    s_expect_slow_step(*state, true, "scheduler");
}

static void test_client_reports_a_stopped_scheduler_of_a_session_as_unavailable(void **state)
{
    fixture_t *f = *state;
    char *session = NULL;
    ASSERT_OK(zf_client_session_create(f->client, f->gd, NULL, &session));
    s_stop(f->svc.scheduler.pid);
    zf_tensor_t *x = NULL, *y = NULL;
    ASSERT_OK(zf_tensor_new_scalar_float(2.0f, &x));
    uint64_t request = s_start(f, session, &x);
    int64_t t0 = zf_test_now_ms();
    zf_test_expect_error(zf_client_session_run_finish(f->client, request, 1, LONG_MS, &y),
                         ZF_UNAVAILABLE, "no reply to RunStep: the scheduler at tcp://127.0.0.1:");
    int64_t took = zf_test_now_ms() - t0;
    assert_true(took >= 2900 && took < 8000);
    assert_null(y);
    kill(f->svc.scheduler.pid, SIGCONT);
    zf_tensor_unref(&x);
    free(session);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_client_reports_a_killed_broker_as_unavailable_within_3_s, s_setup_broker,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_client_reports_a_never_started_broker_as_unavailable_within_3_s, s_setup_broker,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_client_reports_a_slow_step_through_the_broker_as_deadline_exceeded,
            s_setup_cluster, s_teardown),
        cmocka_unit_test_setup_teardown(test_client_reports_a_slow_direct_step_as_deadline_exceeded,
                                        s_setup_cluster, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_client_reports_a_stopped_scheduler_of_a_session_as_unavailable, s_setup_cluster,
            s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
