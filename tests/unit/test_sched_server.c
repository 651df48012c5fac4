/* Tests for the scheduler service (scheduler/server/server.h): the cap on one
 * client's requests in flight at the direct client endpoint (real broker,
 * executor and zflow-scheduler processes on 127.0.0.1 ephemeral ports), and
 * the scheduler id a broker refuses as taken, at the first registration
 * and on registering again (servers run in this process against a real
 * broker, or a scripted ROUTER standing in for one). */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "common/tensor_proto.h"
#include "scheduler/server/server.h"
#include "service_test_util.h"
#include "test_util.h"

#define CPU0      ZF_TEST_CPU(0)
#define SCHEDULER ZF_TEST_SCHEDULER
#define WAIT_MS   10000

static const float s_x[4] = {1.0f, -2.0f, 0.5f, 3.0f};

/* ---- the cap on a direct client's requests ---------------------------------------- */

typedef struct {
    zf_test_broker_t broker;
    zf_test_child_t executor, scheduler;
    zf_zctx_t *ctx;
    zf_socket_t *client; /* on the broker */
    zf_socket_t *a, *b;  /* two clients on the scheduler's client endpoint */
    Tensorflow__GraphDef *gd;
    char *session;
} cluster_t;

/* Broker, one executor, and a scheduler that lets a client have 3 requests
 * in flight. The broker declares an executor dead only after 30 s without a
 * heartbeat, so one stopped for a moment stays in the cluster. */
static int s_setup_cluster(void **state)
{
    cluster_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    *state = c;
    const char *bargs[] = {"--heartbeat-ms", "500", "--heartbeat-misses", "60", NULL};
    zf_test_broker_start(&c->broker, bargs);
    zf_test_executor_start(&c->executor, c->broker.endpoint, 0, WAIT_MS);
    const char *sargs[] = {"--max-client-requests", "3", NULL};
    zf_test_scheduler_start(&c->scheduler, c->broker.endpoint, sargs, WAIT_MS);
    ASSERT_OK(zf_zctx_new(&c->ctx));
    c->client = zf_test_dealer(c->ctx, c->broker.endpoint);
    return 0;
}

static int s_teardown_cluster(void **state)
{
    cluster_t *c = *state;
    zf_socket_destroy(&c->a);
    zf_socket_destroy(&c->b);
    zf_socket_destroy(&c->client);
    zf_zctx_destroy(&c->ctx);
    zf_graphdef_free(&c->gd);
    free(c->session);
    int rc = zf_test_child_stop(&c->scheduler, SIGTERM, WAIT_MS); /* a clean exit checks leaks */
    zf_test_child_stop(&c->executor, SIGTERM, WAIT_MS);
    zf_test_broker_stop(&c->broker, SIGTERM);
    free(c);
    return rc == 0 ? 0 : -1;
}

/* Creates the session x -> y = x * x -> z = -y on CPU:0 through the broker
 * and connects c->a and c->b to the scheduler endpoint its reply names. */
static void s_open_session(cluster_t *c)
{
    const char *devices[3] = {CPU0, CPU0, CPU0};
    c->gd = zf_test_neg_chain(devices, 3);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = c->gd;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION;
    env.create_session = &cs;
    Zflow__Envelope *rep = zf_test_call(c->client, &env, 1, WAIT_MS);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->create_session_reply->status));
    c->session = strdup(rep->create_session_reply->session);
    const char *ep = rep->create_session_reply->scheduler_endpoint;
    assert_non_null(ep);
    assert_true(strncmp(ep, "tcp://127.0.0.1:", 16) == 0);
    c->a = zf_test_dealer(c->ctx, ep);
    c->b = zf_test_dealer(c->ctx, ep);
    zflow__envelope__free_unpacked(rep, NULL);
}

/* Sends a RunStep of the session on s (feed x, fetch `fetch`) without
 * waiting for its reply. */
static void s_send_step(cluster_t *c, zf_socket_t *s, uint64_t id, const char *fetch)
{
    zf_shape_t shape = ZF_SHAPE(4);
    zf_tensor_t *x = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, s_x, sizeof s_x, &x));
    Tensorflow__TensorProto *tp = NULL;
    ASSERT_OK(zf_tensor_to_proto(x, &tp, true));
    Zflow__NamedTensor nt = ZFLOW__NAMED_TENSOR__INIT;
    nt.name = "x";
    nt.tensor = tp;
    Zflow__NamedTensor *feeds[1] = {&nt};
    char *fetches[1] = {(char *)fetch};
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    rs.session = c->session;
    rs.n_feeds = 1;
    rs.feeds = feeds;
    rs.n_fetches = 1;
    rs.fetches = fetches;
    zf_test_send_body(s, id, ZFLOW__ENVELOPE__BODY_RUN_STEP, &rs);
    tensorflow__tensor_proto__free_unpacked(tp, NULL);
    zf_tensor_unref(&x);
}

/* Checks env (freed here) is a successful RunStepReply whose one fetch is
 * x * x for y or -(x * x) for z, whichever `fetch` says. */
static void s_expect_value(Zflow__Envelope *env, char fetch)
{
    assert_int_equal(env->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    ASSERT_OK(zf_status_from_proto(env->run_step_reply->status));
    assert_int_equal(env->run_step_reply->n_fetches, 1);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_proto(env->run_step_reply->fetches[0]->tensor, &t));
    assert_int_equal(zf_tensor_nbytes(t), sizeof s_x);
    const float *v = zf_tensor_data(t);
    for (int i = 0; i < 4; i++) {
        float sq = s_x[i] * s_x[i];
        assert_true(v[i] == (fetch == 'y' ? sq : -sq));
    }
    zf_tensor_unref(&t);
    zflow__envelope__free_unpacked(env, NULL);
}

/* The next reply on s (within WAIT_MS), which must answer request id. */
static Zflow__Envelope *s_reply_to(zf_socket_t *s, uint64_t id)
{
    Zflow__Envelope *env = zf_test_recv(s, WAIT_MS, NULL);
    if (!env) fail_msg("no reply to request %llu within %d ms", (unsigned long long)id, WAIT_MS);
    assert_int_equal(env->request_id, id);
    return env;
}

static const char s_refusal[] =
    "RunStep refused: this client already has 3 requests in flight at the scheduler's client "
    "endpoint, the most one client may have (zflow-scheduler --max-client-requests 3); send more "
    "once replies come back";

static void
test_scheduler_refuses_a_clients_requests_past_its_cap_until_replies_go_back(void **state)
{
    cluster_t *c = *state;
    s_open_session(c);
    s_send_step(c, c->a, 10, "y"); /* caches the plan for y */
    s_expect_value(s_reply_to(c->a, 10), 'y');

    /* With the executor stopped nothing it must run is answered, so the
     * first three requests stay in flight: z's plan is built by a worker
     * (its RegisterGraph waits), y's step runs on the loop thread (its
     * RunGraph waits). The two after them are refused at once. */
    kill(c->executor.pid, SIGSTOP);
    zf_test_wait_stopped(c->executor.pid, WAIT_MS);
    s_send_step(c, c->a, 11, "z");
    s_send_step(c, c->a, 12, "y");
    s_send_step(c, c->a, 13, "z");
    s_send_step(c, c->a, 14, "y");
    s_send_step(c, c->a, 15, "z");
    s_send_step(c, c->b, 20, "y"); /* another client has its own count */
    for (uint64_t id = 14; id <= 15; id++) {
        Zflow__Envelope *rep = s_reply_to(c->a, id);
        assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
        zf_status_t st = zf_status_from_proto(rep->status_reply->status);
        assert_int_equal(st.code, ZF_RESOURCE_EXHAUSTED);
        assert_string_equal(zf_status_msg(&st), s_refusal);
        zf_status_clear(&st);
        zflow__envelope__free_unpacked(rep, NULL);
    }
    kill(c->executor.pid, SIGCONT);

    bool seen[3] = {false, false, false}; /* 11, 12, 13, in any order */
    for (int k = 0; k < 3; k++) {
        Zflow__Envelope *rep = zf_test_recv(c->a, WAIT_MS, NULL);
        if (!rep) fail_msg("only %d of the 3 accepted steps answered", k);
        uint64_t id = rep->request_id;
        assert_true(id >= 11 && id <= 13);
        size_t slot = (size_t)(id - 11) % 3;
        assert_false(seen[slot]);
        seen[slot] = true;
        s_expect_value(rep, id == 12 ? 'y' : 'z');
    }
    s_expect_value(s_reply_to(c->b, 20), 'y');

    /* every answer gave its place back: three in flight again are fine */
    s_send_step(c, c->a, 30, "y");
    s_send_step(c, c->a, 31, "z");
    s_send_step(c, c->a, 32, "y");
    for (int k = 0; k < 3; k++) {
        Zflow__Envelope *rep = zf_test_recv(c->a, WAIT_MS, NULL);
        if (!rep) fail_msg("only %d of 3 steps answered", k);
        uint64_t id = rep->request_id;
        assert_true(id >= 30 && id <= 32);
        s_expect_value(rep, id == 31 ? 'z' : 'y');
    }
}

/* Sends frames[0..n) as one multipart message on s. */
static void s_send_raw(zf_socket_t *s, const void *const *frames, const size_t *lens, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(
            zmq_send(zf_socket_handle(s), frames[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0),
            (int)lens[i]);
}

/* Packs a Ping envelope with request_id and protocol version into buf
 * (64 bytes) and returns its length. */
static size_t s_packed_ping(uint64_t request_id, int version, uint8_t *buf)
{
    Zflow__Ping ping = ZFLOW__PING__INIT;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = (Zflow__ProtocolVersion)version;
    env.request_id = request_id;
    env.body_case = ZFLOW__ENVELOPE__BODY_PING;
    env.ping = &ping;
    assert_true(zflow__envelope__get_packed_size(&env) <= 64);
    return zflow__envelope__pack(&env, buf);
}

/* Malformed messages at the direct client endpoint are answered and
 * dropped; the scheduler keeps serving, and exits cleanly (the teardown
 * checks its exit status: a sanitizer build aborts on a double free). */
static void test_scheduler_survives_malformed_direct_requests(void **state)
{
    cluster_t *c = *state;
    s_open_session(c);
    uint8_t ping[64], v2[64];
    size_t n_ping = s_packed_ping(41, 1, ping), n_v2 = s_packed_ping(42, 2, v2);
    static const uint8_t junk[1] = {0x80};

    /* one frame that is no protobuf */
    s_send_raw(c->a, (const void *[]){junk}, (size_t[]){1}, 1);
    zf_test_expect_status(c->a, 0, ZF_INVALID_ARGUMENT, "malformed envelope");
    /* a valid Ping behind an extra frame: two routing frames */
    s_send_raw(c->b, (const void *[]){ping, junk}, (size_t[]){n_ping, 1}, 2);
    zf_route_t route;
    Zflow__Envelope *rep = zf_test_recv(c->b, WAIT_MS, &route);
    assert_non_null(rep); /* answered behind the frame it came with, not served */
    assert_int_equal(route.n, 1);
    assert_int_equal(route.len[0], n_ping);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    assert_int_equal(rep->status_reply->status->code, ZF_INVALID_ARGUMENT);
    zflow__envelope__free_unpacked(rep, NULL);
    s_send_raw(c->a, (const void *[]){v2}, (size_t[]){n_v2}, 1);
    zf_test_expect_status(c->a, 42, ZF_FAILED_PRECONDITION, "protocol version 2 is not supported");

    /* still serving, with the right values */
    Zflow__Ping p = ZFLOW__PING__INIT;
    zf_test_send_body(c->a, 43, ZFLOW__ENVELOPE__BODY_PING, &p);
    zf_test_expect_status(c->a, 43, ZF_OK, NULL);
    s_send_step(c, c->a, 44, "z");
    s_expect_value(s_reply_to(c->a, 44), 'z');
}

static void test_scheduler_checks_max_client_requests_and_lists_it_in_help(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(zf_test_run_program(SCHEDULER, "--max-client-requests 0", out, sizeof out), 2);
    assert_non_null(
        strstr(out, "zflow-scheduler: --max-client-requests must be from 1 to 1000000, not '0'"));
    assert_int_equal(zf_test_run_program(SCHEDULER, "--max-client-requests lots", out, sizeof out),
                     2);
    assert_non_null(strstr(out, "not 'lots'"));
    assert_int_equal(zf_test_run_program(SCHEDULER, "--help", out, sizeof out), 0);
    assert_non_null(strstr(out, "[--max-client-requests N]"));
    assert_non_null(strstr(out, "--max-client-requests N  requests one client may have in flight"));
}

/* ---- scheduler ids ---------------------------------------------------------------- */

static zf_sched_server_t *s_server(const char *broker, const char *id)
{
    zf_sched_server_config_t cfg = {.broker = broker, .workers = 2, .id = id};
    zf_sched_server_t *srv = NULL;
    ASSERT_OK(zf_sched_server_new(&cfg, &srv));
    return srv;
}

static bool s_is_hex8(const char *id)
{
    return strlen(id) == 8 && strspn(id, "0123456789abcdef") == 8;
}

/* A server running on a thread of its own; what its run returned is
 * checked on the test's thread, after the join. */
typedef struct {
    zf_sched_server_t *srv;
    pthread_t thread;
    zf_status_t st;
} runner_t;

static void *s_run_server(void *arg)
{
    runner_t *r = arg;
    r->st = zf_sched_server_run(r->srv);
    return NULL;
}

static void s_runner_start(runner_t *r, zf_sched_server_t *srv)
{
    r->srv = srv;
    r->st = ZF_STATUS_OK;
    assert_int_equal(pthread_create(&r->thread, NULL, s_run_server, r), 0);
}

/* Stops the server and joins its thread; what its run returned. */
static zf_status_t s_runner_stop(runner_t *r)
{
    zf_sched_server_stop(r->srv);
    assert_int_equal(pthread_join(r->thread, NULL), 0);
    return r->st;
}

/* Creates a session through the broker at ep (retrying while the broker
 * has no live scheduler to give it to) and returns its id. */
static char *s_create_via_broker(zf_zctx_t *ctx, const char *ep)
{
    zf_socket_t *client = zf_test_dealer(ctx, ep);
    Tensorflow__GraphDef *gd = NULL;
    const char *text = "node { name: 'x' op: 'Placeholder' "
                       "attr { key: 'dtype' value { type: DT_FLOAT } } }";
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = gd;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION;
    env.create_session = &cs;
    char *session = NULL;
    uint64_t id = 1;
    for (int64_t end = zf_test_now_ms() + WAIT_MS; !session && zf_test_now_ms() < end; id++) {
        Zflow__Envelope *rep = zf_test_call(client, &env, id, WAIT_MS);
        if (rep->body_case == ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY) {
            ASSERT_OK(zf_status_from_proto(rep->create_session_reply->status));
            session = strdup(rep->create_session_reply->session);
        }
        zflow__envelope__free_unpacked(rep, NULL);
        if (!session) usleep(50000);
    }
    assert_non_null(session);
    zf_graphdef_free(&gd);
    zf_socket_destroy(&client);
    return session;
}

static void test_scheduler_registers_with_a_fresh_id_when_its_id_is_taken(void **state)
{
    (void)state;
    zf_test_broker_t tb;
    zf_test_broker_start(&tb, NULL);
    zf_sched_server_t *a = s_server(tb.endpoint, "c0111de");
    ASSERT_OK(zf_sched_server_register(a, WAIT_MS));
    assert_string_equal(zf_sched_server_id(a), "c0111de");
    zf_sched_server_t *b = s_server(tb.endpoint, "c0111de");
    ASSERT_OK(zf_sched_server_register(b, WAIT_MS)); /* refused once, then a fresh id */
    char id_b[16];
    snprintf(id_b, sizeof id_b, "%s", zf_sched_server_id(b));
    assert_true(s_is_hex8(id_b));
    assert_string_not_equal(id_b, "c0111de");

    /* b's sessions carry its new id, which the broker routes on */
    zf_sched_server_destroy(&a);
    runner_t runner;
    s_runner_start(&runner, b);
    zf_zctx_t *ctx = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    char *session = s_create_via_broker(ctx, tb.endpoint);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s/session-", id_b);
    if (strncmp(session, prefix, strlen(prefix)) != 0)
        fail_msg("session '%s' does not start with '%s'", session, prefix);
    free(session);
    ASSERT_OK(s_runner_stop(&runner));
    zf_sched_server_destroy(&b);
    zf_zctx_destroy(&ctx);
    assert_int_equal(zf_test_broker_stop(&tb, SIGTERM), 0);
}

/* A stand-in broker that answers the RegisterSchedulers it gets as its
 * script says, one letter each ('a': accepted, with no executors; 'r':
 * refused), and refuses all the others, each refusal a StatusReply of
 * `code`; it records the ids it was asked for. Told to (drop), it closes
 * its connections and listens again at the same endpoint, as a broker
 * that restarted would. Its thread asserts nothing: it keeps its first
 * failure in `error` for the test to check after s_refuser_stop. */
typedef struct {
    zf_zctx_t *ctx;
    zf_socket_t *router;
    char endpoint[128];
    pthread_t thread;
    atomic_bool stop, drop;
    int code;
    const char *script; /* NULL: refuse all */
    atomic_int n;
    char ids[16][24];
    char error[256]; /* "" while all went well */
} refuser_t;

static void s_refuser_check(refuser_t *r, zf_status_t st, const char *what)
{
    if (!zf_ok(st) && !r->error[0])
        snprintf(r->error, sizeof r->error, "%s: %s", what, zf_status_msg(&st));
    zf_status_clear(&st);
}

static void s_refuser_accept(refuser_t *r, const zf_route_t *route, uint64_t request_id)
{
    Zflow__RegisterSchedulerReply rep = ZFLOW__REGISTER_SCHEDULER_REPLY__INIT;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = request_id;
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER_REPLY;
    env.register_scheduler_reply = &rep;
    s_refuser_check(r, zf_envelope_send(r->router, route, &env), "accepting");
}

static void s_refuser_refuse(refuser_t *r, const zf_route_t *route, uint64_t request_id,
                             const char *sid)
{
    zf_status_t no = r->code == ZF_ALREADY_EXISTS
                         ? zf_status_new(ZF_ALREADY_EXISTS,
                                         "RegisterScheduler: another scheduler has id '%s'", sid)
                         : zf_status_new(r->code, "RegisterScheduler: not today");
    s_refuser_check(r, zf_envelope_send_status(r->router, route, request_id, &no), "refusing");
    zf_status_clear(&no);
}

/* Unbinding closes the connections accepted through the endpoint; the port
 * is free again once libzmq's I/O thread has closed the listener. */
static void s_refuser_rebind(refuser_t *r)
{
    if (zmq_unbind(zf_socket_handle(r->router), r->endpoint) != 0) {
        s_refuser_check(r, zf_internal("%s", zmq_strerror(zmq_errno())), "unbinding");
        return;
    }
    zf_status_t st = zf_status_new(ZF_UNAVAILABLE, "not tried");
    for (int64_t end = zf_test_now_ms() + WAIT_MS; !zf_ok(st) && zf_test_now_ms() < end;) {
        zf_status_clear(&st);
        st = zf_socket_bind(r->router, r->endpoint, NULL);
        if (!zf_ok(st)) usleep(10000);
    }
    s_refuser_check(r, st, "binding again");
}

static void *s_refuser_main(void *arg)
{
    refuser_t *r = arg;
    size_t script_len = r->script ? strlen(r->script) : 0;
    while (!atomic_load(&r->stop)) {
        if (atomic_exchange(&r->drop, false)) s_refuser_rebind(r);
        zf_route_t route;
        Zflow__Envelope *env = NULL;
        zf_status_t st = zf_envelope_recv(r->router, 20, &route, &env);
        if (zf_ok(st) && env->body_case == ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER) {
            const char *sid = env->register_scheduler->scheduler_id;
            int k = atomic_load(&r->n);
            if (k < 16) snprintf(r->ids[k], sizeof r->ids[k], "%s", sid);
            atomic_store(&r->n, k + 1);
            if ((size_t)k < script_len && r->script[k] == 'a')
                s_refuser_accept(r, &route, env->request_id);
            else
                s_refuser_refuse(r, &route, env->request_id, sid);
        }
        if (env) zflow__envelope__free_unpacked(env, NULL);
        zf_status_clear(&st);
        zf_route_clear(&route);
    }
    return NULL;
}

static void s_refuser_start(refuser_t *r, int code, const char *script)
{
    memset(r, 0, sizeof *r);
    r->code = code;
    r->script = script;
    ASSERT_OK(zf_zctx_new(&r->ctx));
    ASSERT_OK(zf_socket_new(r->ctx, ZF_SOCKET_ROUTER, &r->router));
    const char *ep = NULL;
    ASSERT_OK(zf_socket_bind(r->router, "tcp://127.0.0.1:*", &ep));
    snprintf(r->endpoint, sizeof r->endpoint, "%s", ep);
    assert_int_equal(pthread_create(&r->thread, NULL, s_refuser_main, r), 0);
}

static void s_refuser_stop(refuser_t *r)
{
    atomic_store(&r->stop, true);
    pthread_join(r->thread, NULL);
    zf_socket_destroy(&r->router);
    zf_zctx_destroy(&r->ctx);
}

static void test_scheduler_gives_up_after_eight_ids_that_are_all_taken(void **state)
{
    (void)state;
    refuser_t r;
    s_refuser_start(&r, ZF_ALREADY_EXISTS, NULL);
    zf_sched_server_t *srv = s_server(r.endpoint, "feed01");
    zf_status_t st = zf_sched_server_register(srv, WAIT_MS);
    zf_sched_server_destroy(&srv);
    s_refuser_stop(&r);
    assert_int_equal(atomic_load(&r.n), ZF_SCHED_ID_TRIES);
    assert_int_equal(ZF_SCHED_ID_TRIES, 8);
    assert_string_equal(r.ids[0], "feed01");
    for (int i = 1; i < ZF_SCHED_ID_TRIES; i++) {
        assert_true(s_is_hex8(r.ids[i]));
        for (int j = 0; j < i; j++) assert_string_not_equal(r.ids[i], r.ids[j]);
    }
    char want[256];
    snprintf(want, sizeof want,
             "the broker refused the registration: each of the 8 scheduler ids tried was taken "
             "by another scheduler (the last refusal: RegisterScheduler: another scheduler has "
             "id '%s')",
             r.ids[ZF_SCHED_ID_TRIES - 1]);
    assert_int_equal(st.code, ZF_ALREADY_EXISTS);
    assert_string_equal(zf_status_msg(&st), want);
    zf_status_clear(&st);
}

static void test_scheduler_reports_another_refusal_at_once(void **state)
{
    (void)state;
    refuser_t r;
    s_refuser_start(&r, ZF_PERMISSION_DENIED, NULL);
    zf_sched_server_t *srv = s_server(r.endpoint, NULL);
    zf_status_t st = zf_sched_server_register(srv, WAIT_MS);
    char id[16];
    snprintf(id, sizeof id, "%s", zf_sched_server_id(srv));
    zf_sched_server_destroy(&srv);
    s_refuser_stop(&r);
    assert_int_equal(atomic_load(&r.n), 1);
    assert_true(s_is_hex8(id));
    assert_string_equal(r.ids[0], id);
    assert_int_equal(st.code, ZF_PERMISSION_DENIED);
    assert_string_equal(zf_status_msg(&st),
                        "the broker refused the registration: RegisterScheduler: not today");
    zf_status_clear(&st);
}

static void test_scheduler_keeps_its_id_when_registering_again_is_refused(void **state)
{
    (void)state;
    refuser_t r;
    s_refuser_start(&r, ZF_ALREADY_EXISTS, "arra"); /* then refuses any more */
    zf_sched_server_t *srv = s_server(r.endpoint, "5ca1ab1e");
    ASSERT_OK(zf_sched_server_register(srv, WAIT_MS));
    assert_int_equal(atomic_load(&r.n), 1);
    runner_t runner;
    s_runner_start(&runner, srv);

    /* The connection drops; the scheduler, on a new one, is refused twice
     * (the broker still holds its id for the old connection) and keeps
     * registering its own id, later each time, until it is accepted. */
    atomic_store(&r.drop, true);
    for (int64_t end = zf_test_now_ms() + WAIT_MS; atomic_load(&r.n) < 4 && zf_test_now_ms() < end;)
        usleep(10000);
    zf_status_t st = s_runner_stop(&runner);
    char id[16];
    snprintf(id, sizeof id, "%s", zf_sched_server_id(srv));
    zf_sched_server_destroy(&srv);
    s_refuser_stop(&r);
    assert_string_equal(r.error, "");
    ASSERT_OK(st); /* the refusals did not stop it */
    assert_int_equal(atomic_load(&r.n), 4);
    for (int i = 0; i < 4; i++) assert_string_equal(r.ids[i], "5ca1ab1e");
    assert_string_equal(id, "5ca1ab1e");
}

static void test_scheduler_server_checks_its_id_and_cap(void **state)
{
    (void)state;
    zf_sched_server_t *srv = NULL;
    zf_sched_server_config_t cfg = {.broker = "tcp://127.0.0.1:9", .id = "a/b"};
    zf_status_t st = zf_sched_server_new(&cfg, &srv);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&st),
                        "scheduler: id 'a/b' must be 1 to 11 bytes without a '/'");
    zf_status_clear(&st);
    cfg.id = "";
    zf_test_expect_error(zf_sched_server_new(&cfg, &srv), ZF_INVALID_ARGUMENT, "id ''");
    cfg.id = "123456789012";
    zf_test_expect_error(zf_sched_server_new(&cfg, &srv), ZF_INVALID_ARGUMENT, "1 to 11 bytes");
    cfg.id = NULL;
    cfg.max_client_requests = -1;
    zf_test_expect_error(zf_sched_server_new(&cfg, &srv), ZF_INVALID_ARGUMENT,
                         "max_client_requests must be 0 (the default, 4096) or more, not -1");
    assert_null(srv);
}

int main(void)
{
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_scheduler_refuses_a_clients_requests_past_its_cap_until_replies_go_back,
            s_setup_cluster, s_teardown_cluster),
        cmocka_unit_test_setup_teardown(test_scheduler_survives_malformed_direct_requests,
                                        s_setup_cluster, s_teardown_cluster),
        cmocka_unit_test(test_scheduler_checks_max_client_requests_and_lists_it_in_help),
        cmocka_unit_test(test_scheduler_registers_with_a_fresh_id_when_its_id_is_taken),
        cmocka_unit_test(test_scheduler_gives_up_after_eight_ids_that_are_all_taken),
        cmocka_unit_test(test_scheduler_reports_another_refusal_at_once),
        cmocka_unit_test(test_scheduler_keeps_its_id_when_registering_again_is_refused),
        cmocka_unit_test(test_scheduler_server_checks_its_id_and_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
