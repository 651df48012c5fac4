/* Routing tests of the distributed service with two schedulers: real
 * zflow-broker, two zflow-scheduler and two zflow-executor processes on
 * 127.0.0.1 ephemeral ports. A session's steps reach the scheduler that
 * holds it, through the broker or straight to the scheduler, and jobs (the
 * broker's own) run on either; a session whose scheduler is gone is
 * UNAVAILABLE naming it; a client that cannot reach a scheduler's advertised endpoint
 * goes through the broker. The broker is SIGSTOPped to tell the routes
 * apart: steps sent straight to a scheduler go on without it, steps sent
 * through it wait for it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "common/tensor_proto.h"
#include "common/transport.h"
#include "service_test_util.h"
#include "test_util.h"

#define CPU0    ZF_TEST_CPU(0)
#define CPU1    ZF_TEST_CPU(1)
#define WAIT_MS 10000
#define N_SESS  6

typedef struct {
    zf_test_broker_t broker;
    zf_test_child_t executors[2];
    zf_test_child_t schedulers[2];
    zf_client_t *client;
    Tensorflow__GraphDef *gd;
    char prefix[2][32]; /* each scheduler's id prefix, "<id>/" */
} fixture_t;

/* x on CPU:0, y = x * x on CPU:1, z = -y on CPU:0. */
static Tensorflow__GraphDef *s_chain_graph(void)
{
    const char *const devices[3] = {CPU0, CPU1, CPU0};
    return zf_test_neg_chain(devices, 3);
}

static const char *const s_feed_x[1] = {"x"};
static const char *const s_fetch_z[1] = {"z"};

/* The chain's feed x = [v, 2v]. */
static zf_tensor_t *s_feed(float v)
{
    float in[2] = {v, 2 * v};
    zf_shape_t shape = {.rank = 1, .dims = {2}};
    zf_tensor_t *x = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, in, sizeof in, &x));
    return x;
}

/* Checks that z is the chain's result for s_feed(v): -(x * x). */
static void s_expect_result(const zf_tensor_t *z, float v)
{
    float want[2] = {-(v * v), -(4 * v * v)};
    assert_int_equal(zf_tensor_dtype(z), ZF_FLOAT);
    assert_int_equal(zf_tensor_nbytes(z), sizeof want);
    assert_memory_equal(zf_tensor_data(z), want, sizeof want);
}

/* One chain step of session with s_feed(v); checks its result on success. */
static zf_status_t s_run(zf_client_t *c, const char *session, float v)
{
    zf_tensor_t *x = s_feed(v), *z = NULL;
    zf_client_step_t step = {s_feed_x, &x, 1, s_fetch_z, 1, NULL, 0};
    zf_status_t s = zf_client_session_run(c, session, &step, WAIT_MS, &z);
    if (zf_ok(s)) s_expect_result(z, v);
    zf_tensor_unref(&z);
    zf_tensor_unref(&x);
    return s;
}

/* One chain step of session sent as a raw RunStep on dealer (request id
 * id), checked as s_run does; the reply's status. */
static zf_status_t s_run_raw(zf_socket_t *dealer, uint64_t id, const char *session, float v)
{
    zf_tensor_t *x = s_feed(v);
    Tensorflow__TensorProto *tp = NULL;
    ASSERT_OK(zf_tensor_to_proto(x, &tp, true));
    zf_tensor_unref(&x);
    zf_test_step_msg_t m;
    Zflow__Envelope *rep =
        zf_test_call(dealer, zf_test_step_msg(&m, session, "x", tp, "z", WAIT_MS), id, WAIT_MS);
    tensorflow__tensor_proto__free_unpacked(tp, NULL);
    zf_status_t s = ZF_STATUS_OK;
    if (rep->body_case == ZFLOW__ENVELOPE__BODY_STATUS_REPLY) {
        s = zf_status_from_proto(rep->status_reply->status);
        if (zf_ok(s)) s = zf_internal("a StatusReply with OK answered a RunStep");
    } else {
        assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
        s = zf_status_from_proto(rep->run_step_reply->status);
    }
    if (zf_ok(s)) {
        assert_int_equal(rep->run_step_reply->n_fetches, 1);
        zf_tensor_t *z = NULL;
        ASSERT_OK(zf_tensor_from_proto(rep->run_step_reply->fetches[0]->tensor, &z));
        s_expect_result(z, v);
        zf_tensor_unref(&z);
    }
    zflow__envelope__free_unpacked(rep, NULL);
    return s;
}

static char *s_create(zf_client_t *c, const Tensorflow__GraphDef *gd)
{
    char *session = NULL;
    ASSERT_OK(zf_client_session_create(c, gd, NULL, &session));
    return session;
}

/* Which of the two schedulers holds id (by its prefix); -1 for neither. */
static int s_owner(const fixture_t *f, const char *id)
{
    for (int i = 0; i < 2; i++)
        if (f->prefix[i][0] && strncmp(id, f->prefix[i], strlen(f->prefix[i])) == 0) return i;
    return -1;
}

static void s_prefix_of(const char *id, char *out, size_t size)
{
    size_t n = strcspn(id, "/");
    assert_int_equal(id[n], '/');
    snprintf(out, size, "%.*s", (int)(n + 1), id);
}

static void s_scheduler_start(fixture_t *f, int i)
{
    const char *args[] = {"--workers", "4", NULL};
    zf_test_scheduler_start(&f->schedulers[i], f->broker.endpoint, args, WAIT_MS);
}

/* Scheduler 0 starts alone, so the first session tells its prefix; then
 * scheduler 1, whose prefix is the first other one a new session gets
 * (ties between idle schedulers go round robin). The broker takes a peer
 * for dead only after a minute of silence, so that the few seconds it is
 * stopped in a test leave its registry as it was. */
static int s_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (!f) return -1;
    *state = f;
    const char *broker_args[] = {"--heartbeat-ms", "1000", "--heartbeat-misses", "60", NULL};
    zf_test_broker_start(&f->broker, broker_args);
    for (int i = 0; i < 2; i++)
        zf_test_executor_start(&f->executors[i], f->broker.endpoint, i, WAIT_MS);
    f->gd = s_chain_graph();
    s_scheduler_start(f, 0);
    ASSERT_OK(zf_client_connect(f->broker.endpoint, &f->client));
    zf_client_set_timeout(f->client, WAIT_MS);
    char *first = s_create(f->client, f->gd);
    s_prefix_of(first, f->prefix[0], sizeof f->prefix[0]);
    ASSERT_OK(zf_client_session_close(f->client, first));
    free(first);
    s_scheduler_start(f, 1);
    for (int tries = 0; !f->prefix[1][0] && tries < 20; tries++) {
        char *id = s_create(f->client, f->gd);
        if (s_owner(f, id) != 0) s_prefix_of(id, f->prefix[1], sizeof f->prefix[1]);
        ASSERT_OK(zf_client_session_close(f->client, id));
        free(id);
    }
    assert_true(f->prefix[1][0] != '\0');
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    if (!f) return 0;
    /* a test may have failed while the broker was stopped */
    if (f->broker.pid > 0) kill(f->broker.pid, SIGCONT);
    zf_client_destroy(&f->client);
    int rc = 0;
    for (int i = 0; i < 2; i++)
        if (f->schedulers[i].pid > 0 && zf_test_child_stop(&f->schedulers[i], SIGTERM, WAIT_MS))
            rc = -1;
    for (int i = 0; i < 2; i++) zf_test_child_stop(&f->executors[i], SIGTERM, WAIT_MS);
    zf_test_broker_stop(&f->broker, SIGTERM);
    zf_graphdef_free(&f->gd);
    free(f);
    return rc;
}

/* Creates N_SESS sessions, with steps sent straight to their scheduler or
 * through the broker as direct says, checks that both schedulers hold some
 * and runs one step of each. */
static void s_sessions_start(fixture_t *f, bool direct, char **ids)
{
    zf_client_set_direct(f->client, direct);
    int per[2] = {0, 0};
    for (int i = 0; i < N_SESS; i++) {
        ids[i] = s_create(f->client, f->gd);
        int owner = s_owner(f, ids[i]);
        assert_true(owner >= 0);
        per[owner]++;
    }
    assert_true(per[0] > 0 && per[1] > 0);
    for (int i = 0; i < N_SESS; i++) ASSERT_OK(s_run(f->client, ids[i], (float)(i + 1)));
}

/* Runs two more steps of each session, closes them and checks that they
 * are gone. */
static void s_sessions_finish(fixture_t *f, char **ids)
{
    for (int r = 1; r < 3; r++)
        for (int i = 0; i < N_SESS; i++) ASSERT_OK(s_run(f->client, ids[i], (float)(i + r + 1)));
    for (int i = 0; i < N_SESS; i++) {
        ASSERT_OK(zf_client_session_close(f->client, ids[i]));
        zf_test_expect_error(s_run(f->client, ids[i], 1.0f), ZF_NOT_FOUND, ids[i]);
        free(ids[i]);
    }
}

static void test_routing_sends_each_sessions_steps_to_its_scheduler_via_the_broker(void **state)
{
    fixture_t *f = *state;
    char *ids[N_SESS];
    s_sessions_start(f, false, ids);
    /* A DEALER connected to the broker alone reaches every session's
     * scheduler through it. */
    zf_zctx_t *ctx = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    zf_socket_t *dealer = zf_test_dealer(ctx, f->broker.endpoint);
    for (int i = 0; i < N_SESS; i++)
        ASSERT_OK(s_run_raw(dealer, 100 + (uint64_t)i, ids[i], (float)(i + 10)));
    zf_socket_destroy(&dealer);
    zf_zctx_destroy(&ctx);
    /* The client's steps go to the broker: stopped, it leaves them
     * unanswered, though both schedulers are up and the executors know each
     * other. */
    assert_int_equal(kill(f->broker.pid, SIGSTOP), 0);
    zf_status_t s = s_run(f->client, ids[0], 1.0f);
    assert_int_equal(kill(f->broker.pid, SIGCONT), 0);
    char want[512];
    snprintf(want, sizeof want, "no reply to RunStep: the broker at %s does not answer",
             f->broker.endpoint);
    zf_test_expect_error(s, ZF_UNAVAILABLE, want);
    s_sessions_finish(f, ids);
}

static void test_routing_sends_each_sessions_steps_straight_to_its_scheduler(void **state)
{
    fixture_t *f = *state;
    char *ids[N_SESS];
    s_sessions_start(f, true, ids);
    /* A stopped broker stops only what passes through it: every step goes
     * on (the executors learnt each other's endpoints from it on the first
     * step). */
    assert_int_equal(kill(f->broker.pid, SIGSTOP), 0);
    for (int i = 0; i < N_SESS; i++) ASSERT_OK(s_run(f->client, ids[i], (float)(i + 20)));
    assert_int_equal(kill(f->broker.pid, SIGCONT), 0);
    s_sessions_finish(f, ids);
}

static char *s_submit(fixture_t *f, float v)
{
    float in[2] = {v, 2 * v};
    zf_shape_t shape = {.rank = 1, .dims = {2}};
    zf_tensor_t *x = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, in, sizeof in, &x));
    zf_client_step_t step = {s_feed_x, &x, 1, s_fetch_z, 1, NULL, 0};
    char *job = NULL;
    ASSERT_OK(zf_client_submit(f->client, f->gd, NULL, &step, &job));
    zf_tensor_unref(&x);
    return job;
}

static void test_routing_runs_jobs_on_the_schedulers_and_returns_each_result(void **state)
{
    fixture_t *f = *state;
    char *jobs[N_SESS];
    for (int i = 0; i < N_SESS; i++) {
        jobs[i] = s_submit(f, (float)(i + 1));
        assert_int_equal(s_owner(f, jobs[i]), -1); /* the broker's id names no scheduler */
    }
    for (int i = 0; i < N_SESS; i++) {
        zf_tensor_t *z = NULL;
        ASSERT_OK(zf_client_wait(f->client, jobs[i], 1, WAIT_MS, &z));
        float want[2] = {-(float)((i + 1) * (i + 1)), -(float)(4 * (i + 1) * (i + 1))};
        assert_memory_equal(zf_tensor_data(z), want, sizeof want);
        zf_tensor_unref(&z);
        free(jobs[i]);
    }
}

/* Retries call until its error names the gone scheduler: the broker may
 * still be noticing the disconnect on the first tries. */
static void s_expect_gone(zf_status_t (*call)(fixture_t *, const char *), fixture_t *f,
                          const char *id, const char *what)
{
    char want[256];
    snprintf(want, sizeof want, "%s '%s' is held by scheduler '%.*s', which is gone", what, id,
             (int)strlen(f->prefix[0]) - 1, f->prefix[0]);
    zf_status_t s = ZF_STATUS_OK;
    for (int64_t t0 = zf_test_now_ms(); zf_test_now_ms() - t0 < WAIT_MS; usleep(50000)) {
        zf_status_clear(&s);
        s = call(f, id);
        if (!zf_ok(s) && strstr(zf_status_msg(&s), "which is gone")) break;
    }
    zf_test_expect_error(s, ZF_UNAVAILABLE, want);
}

static zf_status_t s_run_once(fixture_t *f, const char *session)
{
    return s_run(f->client, session, 1.0f);
}

static void test_routing_names_the_gone_scheduler_of_a_session(void **state)
{
    fixture_t *f = *state;
    zf_client_set_direct(f->client, false);
    char *mine[2] = {NULL, NULL};
    for (int tries = 0; tries < 20 && (!mine[0] || !mine[1]); tries++) {
        char *id = s_create(f->client, f->gd);
        int owner = s_owner(f, id);
        assert_true(owner == 0 || owner == 1);
        if (!mine[owner])
            mine[owner] = id;
        else
            free(id);
    }
    assert_non_null(mine[0]);
    assert_non_null(mine[1]);
    assert_int_equal(zf_test_child_stop(&f->schedulers[0], SIGKILL, WAIT_MS), 128 + SIGKILL);
    s_expect_gone(s_run_once, f, mine[0], "session");
    ASSERT_OK(s_run(f->client, mine[1], 4.0f)); /* the other scheduler's are untouched */
    ASSERT_OK(zf_client_session_close(f->client, mine[1]));
    free(mine[0]);
    free(mine[1]);
}

/* The CreateSessionReply's scheduler endpoint, asked of the broker with a
 * raw DEALER (the client library keeps it to itself). */
static char *s_advertised(fixture_t *f)
{
    zf_zctx_t *ctx = NULL;
    zf_socket_t *d = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_DEALER, &d));
    ASSERT_OK(zf_socket_connect(d, f->broker.endpoint));
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = f->gd;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = 41;
    env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION;
    env.create_session = &cs;
    ASSERT_OK(zf_envelope_send(d, NULL, &env));
    zf_route_t route;
    Zflow__Envelope *rep = NULL;
    ASSERT_OK(zf_envelope_recv(d, WAIT_MS, &route, &rep));
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY);
    char *ep = strdup(rep->create_session_reply->scheduler_endpoint);
    zflow__envelope__free_unpacked(rep, NULL);
    zf_socket_destroy(&d);
    zf_zctx_destroy(&ctx);
    return ep;
}

/* A scheduler behind NAT advertises an address this client cannot reach
 * (here port 9 on loopback, where nothing listens): the client finds that
 * out with one unanswered ping and sends the session's steps through the
 * broker, which reaches the same scheduler. */
static void
test_routing_falls_back_to_the_broker_when_the_advertised_endpoint_is_unreachable(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 2; i++)
        assert_int_equal(zf_test_child_stop(&f->schedulers[i], SIGTERM, WAIT_MS), 0);
    const char *args[] = {"--advertise", "tcp://127.0.0.1:9", NULL};
    zf_test_scheduler_start(&f->schedulers[0], f->broker.endpoint, args, WAIT_MS);
    char *ep = s_advertised(f);
    assert_string_equal(ep, "tcp://127.0.0.1:9");
    free(ep);
    char *session = s_create(f->client, f->gd);
    for (int k = 1; k <= 3; k++) ASSERT_OK(s_run(f->client, session, (float)k));
    ASSERT_OK(zf_client_session_close(f->client, session));
    free(session);
}

static void test_scheduler_refuses_an_advertised_endpoint_of_no_transport(void **state)
{
    (void)state;
    char out[1024];
    assert_int_equal(
        zf_test_run_program(ZF_TEST_SCHEDULER, "--advertise 127.0.0.1:7000", out, sizeof out), 2);
    assert_non_null(strstr(out, "zflow-scheduler: --advertise must be a tcp:// or ipc:// endpoint, "
                                "not '127.0.0.1:7000'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_routing_sends_each_sessions_steps_to_its_scheduler_via_the_broker, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_routing_sends_each_sessions_steps_straight_to_its_scheduler, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_routing_falls_back_to_the_broker_when_the_advertised_endpoint_is_unreachable,
            s_setup, s_teardown),
        cmocka_unit_test(test_scheduler_refuses_an_advertised_endpoint_of_no_transport),
        cmocka_unit_test_setup_teardown(
            test_routing_runs_jobs_on_the_schedulers_and_returns_each_result, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_routing_names_the_gone_scheduler_of_a_session, s_setup,
                                        s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
