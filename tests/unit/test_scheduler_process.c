/* End-to-end tests of zflow-scheduler: real broker, executor and scheduler
 * processes on 127.0.0.1 ephemeral ports, and a client DEALER speaking the
 * control protocol to the broker. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "common/tensor_proto.h"
#include "session/local_session.h"
#include "service_test_util.h"
#include "busy_test_util.h"
#include "test_util.h"

#define EXAMPLES  ZF_TEST_DATA_DIR "/../../examples"
#define CPU(k)    ZF_TEST_CPU(k)
#define SCHEDULER ZF_TEST_SCHEDULER
#define WAIT_MS   10000

typedef struct {
    zf_test_service_t svc; /* two executors */
    zf_zctx_t *ctx;
    zf_socket_t *client;
    uint64_t next_id;
} cluster_t;

static void s_cluster_start(cluster_t *c)
{
    memset(c, 0, sizeof *c);
    /* Dead after 2 s without a heartbeat: a loaded machine can hold a live
     * executor's heartbeat back for more than half a second, and a live
     * executor declared dead changes where steps run. */
    const char *bargs[] = {"--heartbeat-ms", "200", "--heartbeat-misses", "10", NULL};
    zf_test_service_start(&c->svc, bargs, 2, WAIT_MS);
    char want[400];
    snprintf(want, sizeof want, "zflow-scheduler connected to %s", c->svc.broker.endpoint);
    assert_string_equal(c->svc.scheduler.line, want);
    ASSERT_OK(zf_zctx_new(&c->ctx));
    c->client = zf_test_dealer(c->ctx, c->svc.broker.endpoint);
    c->next_id = 100;
}

/* The processes are started by the setup and stopped by the teardown, so a
 * test that fails half-way leaves none of them running. */
static int s_setup_cluster(void **state)
{
    cluster_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    *state = c;
    s_cluster_start(c);
    return 0;
}

static int s_setup_nothing(void **state)
{
    cluster_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    *state = c;
    return 0;
}

/* Stops what is still running; fails when the scheduler does not stop
 * cleanly. */
static int s_teardown(void **state)
{
    cluster_t *c = *state;
    if (!c) return 0;
    zf_socket_destroy(&c->client);
    zf_zctx_destroy(&c->ctx);
    int rc = zf_test_service_stop(&c->svc, WAIT_MS);
    free(c);
    return rc == 0 ? 0 : -1;
}

/* Sends env and returns the reply to it (checked to echo its id). */
static Zflow__Envelope *s_call(cluster_t *c, Zflow__Envelope *env, int timeout_ms)
{
    return zf_test_call(c->client, env, c->next_id++, timeout_ms);
}

static char *s_create(cluster_t *c, Tensorflow__GraphDef *gd, bool soft)
{
    Zflow__SessionOptions o = ZFLOW__SESSION_OPTIONS__INIT;
    o.allow_soft_placement = soft;
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = gd;
    cs.options = &o;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION;
    env.create_session = &cs;
    Zflow__Envelope *rep = s_call(c, &env, WAIT_MS);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY);
    zf_status_t st = zf_status_from_proto(rep->create_session_reply->status);
    ASSERT_OK(st);
    char *id = strdup(rep->create_session_reply->session);
    zflow__envelope__free_unpacked(rep, NULL);
    return id;
}

/* Sends one step (feed x, fetch `fetch`) without waiting; returns its
 * request id. */
static uint64_t s_run_start(cluster_t *c, const char *sid, zf_tensor_t *x, const char *fetch)
{
    Tensorflow__TensorProto *tp = NULL;
    ASSERT_OK(zf_tensor_to_proto(x, &tp, true));
    Zflow__NamedTensor nt = ZFLOW__NAMED_TENSOR__INIT;
    nt.name = "x:0";
    nt.tensor = tp;
    Zflow__NamedTensor *feeds[1] = {&nt};
    char *fetches[1] = {(char *)fetch};
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    rs.session = (char *)sid;
    rs.n_feeds = 1;
    rs.feeds = feeds;
    rs.n_fetches = 1;
    rs.fetches = fetches;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP;
    env.run_step = &rs;
    env.request_id = c->next_id++;
    zf_test_send(c->client, NULL, 0, &env);
    tensorflow__tensor_proto__free_unpacked(tp, NULL);
    return env.request_id;
}

/* The reply to step `request`: its status, and the value on success. */
static zf_status_t s_run_finish(cluster_t *c, uint64_t request, const char *fetch,
                                zf_tensor_t **out)
{
    Zflow__Envelope *rep = zf_test_recv(c->client, WAIT_MS, NULL);
    if (!rep) fail_msg("no reply within %d ms", WAIT_MS);
    assert_int_equal(rep->request_id, request);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    zf_status_t st = zf_status_from_proto(rep->run_step_reply->status);
    if (out) *out = NULL;
    if (zf_ok(st) && out) {
        assert_int_equal(rep->run_step_reply->n_fetches, 1);
        assert_string_equal(rep->run_step_reply->fetches[0]->name, fetch);
        ASSERT_OK(zf_tensor_from_proto(rep->run_step_reply->fetches[0]->tensor, out));
    }
    zflow__envelope__free_unpacked(rep, NULL);
    return st;
}

/* One step: feed x, fetch `fetch`; the status, and the value on success. */
static zf_status_t s_run(cluster_t *c, const char *sid, zf_tensor_t *x, const char *fetch,
                         zf_tensor_t **out)
{
    return s_run_finish(c, s_run_start(c, sid, x, fetch), fetch, out);
}

static void s_expect_same(const zf_tensor_t *a, const zf_tensor_t *b)
{
    assert_int_equal(zf_tensor_dtype(a), zf_tensor_dtype(b));
    assert_int_equal(zf_tensor_nbytes(a), zf_tensor_nbytes(b));
    assert_memory_equal(zf_tensor_data(a), zf_tensor_data(b), zf_tensor_nbytes(a));
}

static const float s_x[8] = {1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, -0.75f};

static zf_tensor_t *s_floats(zf_shape_t shape)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, s_x, sizeof s_x, &t));
    return t;
}

/* A one-shot job over the wire: SubmitJob answers a job id, WaitJob the
 * step's reply; a second WaitJob finds nothing. */
static void s_submit_and_wait(cluster_t *c, Tensorflow__GraphDef *gd, zf_tensor_t *x,
                              const zf_tensor_t *want)
{
    Tensorflow__TensorProto *tp = NULL;
    ASSERT_OK(zf_tensor_to_proto(x, &tp, true));
    Zflow__NamedTensor nt = ZFLOW__NAMED_TENSOR__INIT;
    nt.name = "x";
    nt.tensor = tp;
    Zflow__NamedTensor *feeds[1] = {&nt};
    char *fetches[1] = {"probs"};
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    rs.n_feeds = 1;
    rs.feeds = feeds;
    rs.n_fetches = 1;
    rs.fetches = fetches;
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = gd;
    Zflow__SubmitJob sj = ZFLOW__SUBMIT_JOB__INIT;
    sj.session = &cs;
    sj.step = &rs;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_SUBMIT_JOB;
    env.submit_job = &sj;
    Zflow__Envelope *rep = s_call(c, &env, WAIT_MS);
    tensorflow__tensor_proto__free_unpacked(tp, NULL);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->submit_job_reply->status));
    char *job = strdup(rep->submit_job_reply->job_id);
    zflow__envelope__free_unpacked(rep, NULL);

    Zflow__WaitJob wj = ZFLOW__WAIT_JOB__INIT;
    wj.job_id = job;
    Zflow__Envelope wenv = ZFLOW__ENVELOPE__INIT;
    wenv.body_case = ZFLOW__ENVELOPE__BODY_WAIT_JOB;
    wenv.wait_job = &wj;
    rep = s_call(c, &wenv, WAIT_MS);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->run_step_reply->status));
    assert_int_equal(rep->run_step_reply->n_fetches, 1);
    zf_tensor_t *got = NULL;
    ASSERT_OK(zf_tensor_from_proto(rep->run_step_reply->fetches[0]->tensor, &got));
    s_expect_same(got, want);
    zf_tensor_unref(&got);
    zflow__envelope__free_unpacked(rep, NULL);

    rep = s_call(c, &wenv, WAIT_MS);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    zf_test_expect_error(zf_status_from_proto(rep->status_reply->status), ZF_NOT_FOUND,
                         "already collected");
    zflow__envelope__free_unpacked(rep, NULL);
    free(job);
}

static void
test_scheduler_process_runs_the_mlp_and_a_job_over_two_executors_like_local_session(void **state)
{
    cluster_t *c = *state;
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(EXAMPLES "/mlp.pbtxt", ZF_FORMAT_AUTO, &gd));
    for (size_t i = 0; i < gd->n_node; i++) { /* alternate nodes between the two CPUs */
        if (gd->node[i]->device != protobuf_c_empty_string) free(gd->node[i]->device);
        gd->node[i]->device = strdup(i % 2 ? CPU(1) : CPU(0));
    }
    zf_tensor_t *x = s_floats(ZF_SHAPE(2, 4));
    zf_local_session_options_t lo = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    lo.devices = "cpu:2";
    zf_local_session_t *local = NULL;
    ASSERT_OK(zf_local_session_new(gd, &lo, &local));
    const char *feed = "x", *fetch = "probs";
    zf_tensor_t *want = NULL;
    ASSERT_OK(zf_local_session_run(local, &feed, &x, 1, &fetch, 1, NULL, 0, &want));

    char *sid = s_create(c, gd, false);
    for (int k = 0; k < 3; k++) {
        zf_tensor_t *got = NULL;
        ASSERT_OK(s_run(c, sid, x, "probs", &got));
        s_expect_same(got, want);
        zf_tensor_unref(&got);
    }
    Zflow__CloseSession cl = ZFLOW__CLOSE_SESSION__INIT;
    cl.session = sid;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CLOSE_SESSION;
    env.close_session = &cl;
    Zflow__Envelope *rep = s_call(c, &env, WAIT_MS);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->status_reply->status));
    zflow__envelope__free_unpacked(rep, NULL);
    zf_test_expect_error(s_run(c, sid, x, "probs", NULL), ZF_NOT_FOUND, "not found");
    s_submit_and_wait(c, gd, x, want);

    free(sid);
    zf_tensor_unref(&want);
    zf_tensor_unref(&x);
    zf_local_session_destroy(&local);
    zf_graphdef_free(&gd);
}

static void test_scheduler_process_fails_a_step_on_a_hung_executor_and_replaces(void **state)
{
    cluster_t *c = *state;
    Tensorflow__GraphDef *gd = zf_test_slow_chain_graph(CPU(0), CPU(1));
    zf_tensor_t *x = s_floats(ZF_SHAPE(8));
    float sq[8];
    for (int i = 0; i < 8; i++) sq[i] = -(s_x[i] * s_x[i]);
    zf_tensor_t *want = NULL; /* z = -Square(x) */
    zf_shape_t shape = ZF_SHAPE(8);
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, sq, sizeof sq, &want));
    char *sid = s_create(c, gd, true);
    zf_tensor_t *z = NULL;
    ASSERT_OK(s_run(c, sid, x, "z", &z));
    s_expect_same(z, want);
    zf_tensor_unref(&z);

    /* A stopped process keeps its sockets but stops heartbeating: the step
     * waits on it until the broker declares it dead. It is stopped once it
     * is computing the step, that is once it has the step's RunGraph: were
     * it stopped before, the broker could declare it dead before the
     * scheduler sees the step, which would then run on CPU:0 alone. */
    pid_t busy = c->svc.executors[1].pid;
    long ticks = zf_test_cpu_ticks(busy);
    assert_true(ticks >= 0);
    uint64_t request = s_run_start(c, sid, x, "z");
    zf_test_wait_cpu(busy, ticks, sysconf(_SC_CLK_TCK) / 10, WAIT_MS); /* 100 ms of its products */
    kill(busy, SIGSTOP);
    zf_test_expect_error(s_run_finish(c, request, "z", NULL), ZF_UNAVAILABLE, "executor " CPU(1));
    ASSERT_OK(s_run(c, sid, x, "z", &z)); /* re-placed on CPU:0 alone */
    s_expect_same(z, want);
    zf_tensor_unref(&z);
    zf_test_child_stop(&c->svc.executors[1], SIGKILL, WAIT_MS);

    free(sid);
    zf_tensor_unref(&want);
    zf_tensor_unref(&x);
    zf_graphdef_free(&gd);
}

static void test_scheduler_process_registers_again_with_a_restarted_broker(void **state)
{
    cluster_t *c = *state;
    zf_test_broker_start(&c->svc.broker, NULL);
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", c->svc.broker.endpoint);
    const char *sargv[] = {SCHEDULER, "--broker", endpoint, NULL};
    zf_test_spawn(&c->svc.scheduler, sargv, WAIT_MS);
    assert_non_null(strstr(c->svc.scheduler.line, "connected"));
    zf_test_broker_stop(&c->svc.broker, SIGKILL);
    const char *again[] = {"--listen", endpoint, NULL};
    zf_test_broker_start(&c->svc.broker, again);
    assert_string_equal(c->svc.broker.endpoint, endpoint);

    ASSERT_OK(zf_zctx_new(&c->ctx));
    c->client = zf_test_dealer(c->ctx, endpoint);
    Tensorflow__GraphDef *gd = NULL;
    const char *text = "node { name: 'x' op: 'Placeholder' "
                       "attr { key: 'dtype' value { type: DT_FLOAT } } }";
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = gd;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION;
    env.create_session = &cs;
    bool served = false; /* until it registers again the broker has no scheduler */
    for (int64_t end = zf_test_now_ms() + WAIT_MS; !served && zf_test_now_ms() < end;) {
        Zflow__Envelope *rep = s_call(c, &env, WAIT_MS);
        served = rep->body_case == ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY;
        if (served) ASSERT_OK(zf_status_from_proto(rep->create_session_reply->status));
        zflow__envelope__free_unpacked(rep, NULL);
        if (!served) usleep(50000);
    }
    assert_true(served);
    zf_graphdef_free(&gd);
    assert_int_equal(zf_test_child_stop(&c->svc.scheduler, SIGINT, WAIT_MS), 0);
}

/* Runs the scheduler with args (after argv[0]) to completion; its exit code. */
static int s_exit_code(const char *const *argv)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_scheduler_process_answers_help_and_rejects_bad_flags(void **state)
{
    (void)state;
    const char *help[] = {SCHEDULER, "--help", NULL};
    const char *bogus[] = {SCHEDULER, "--bogus", "1", NULL};
    const char *workers[] = {SCHEDULER, "--workers", "0", NULL};
    const char *results[] = {SCHEDULER, "--job-results", "0", NULL};
    const char *ttl[] = {SCHEDULER, "--job-ttl-ms", "soon", NULL};
    const char *bad_endpoint[] = {SCHEDULER, "--broker", "nonsense", NULL};
    assert_int_equal(s_exit_code(help), 0);
    assert_int_equal(s_exit_code(bogus), 2);
    assert_int_equal(s_exit_code(workers), 2);
    assert_int_equal(s_exit_code(results), 2);
    assert_int_equal(s_exit_code(ttl), 2);
    assert_int_equal(s_exit_code(bad_endpoint), 1);
}

int main(void)
{
    /* One BLAS thread per executor: threads spinning in matrix products
     * would crowd the executors' heartbeats off a small machine. */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_scheduler_process_runs_the_mlp_and_a_job_over_two_executors_like_local_session,
            s_setup_cluster, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_scheduler_process_fails_a_step_on_a_hung_executor_and_replaces, s_setup_cluster,
            s_teardown),
        cmocka_unit_test(test_scheduler_process_answers_help_and_rejects_bad_flags),
        cmocka_unit_test_setup_teardown(
            test_scheduler_process_registers_again_with_a_restarted_broker, s_setup_nothing,
            s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
