/* Tests for zflow-broker: starts the real program on an ephemeral loopback
 * port and plays executors, schedulers and clients over DEALER sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <zmq.h>

#include "common/device_name.h"
#include "broker_test_util.h"

#define S_SOCKETS 16

typedef struct s_fixture {
    zf_test_broker_t tb;
    zf_zctx_t *ctx;
    zf_socket_t *socks[S_SOCKETS];
    int n_socks;
    pid_t child; /* a scheduler in another process, when a test makes one */
} s_fixture_t;

static const char *const s_fast_heartbeats[] = {"--heartbeat-ms", "100", "--heartbeat-misses", "3",
                                                NULL};

static int s_setup(void **state)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    *state = f;
    zf_test_broker_start(&f->tb, s_fast_heartbeats);
    assert_int_equal(zf_zctx_new(&f->ctx).code, ZF_OK);
    return 0;
}

/* Also runs after a failed assertion: no socket, context or process is
 * left behind. */
/* Settings from the environment, with one overridden by a flag. */
static int s_setup_env(void **state)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    *state = f;
    setenv("ZFLOW_HEARTBEAT_MS", "250", 1);
    setenv("ZFLOW_HEARTBEAT_MISSES", "5", 1);
    const char *const args[] = {"--heartbeat-misses", "4", NULL};
    zf_test_broker_start(&f->tb, args);
    unsetenv("ZFLOW_HEARTBEAT_MS");
    unsetenv("ZFLOW_HEARTBEAT_MISSES");
    assert_int_equal(zf_zctx_new(&f->ctx).code, ZF_OK);
    return 0;
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    if (f->child > 0) {
        kill(f->child, SIGKILL);
        waitpid(f->child, NULL, 0);
    }
    for (int i = 0; i < f->n_socks; i++) zf_socket_destroy(&f->socks[i]);
    zf_zctx_destroy(&f->ctx);
    /* SIGTERM: a clean exit, which also runs the leak check in the broker. */
    int rc = zf_test_broker_stop(&f->tb, SIGTERM);
    free(f);
    assert_true(rc == 0 || rc == -1);
    return 0;
}

static zf_socket_t *s_peer(s_fixture_t *f)
{
    assert_true(f->n_socks < S_SOCKETS);
    zf_socket_t *s = zf_test_dealer(f->ctx, f->tb.endpoint);
    f->socks[f->n_socks++] = s;
    return s;
}

/* Closes a peer's socket now (a disconnect). */
static void s_close_peer(s_fixture_t *f, zf_socket_t *s)
{
    for (int i = 0; i < f->n_socks; i++)
        if (f->socks[i] == s) zf_socket_destroy(&f->socks[i]);
}

/* Registers s as a scheduler and returns how many executors it was told. */
static size_t s_register_scheduler(zf_socket_t *s)
{
    Zflow__RegisterScheduler req = ZFLOW__REGISTER_SCHEDULER__INIT;
    zf_test_send_body(s, 1, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER, &req);
    Zflow__Envelope *reply = zf_test_recv(s, 5000, NULL);
    assert_non_null(reply);
    assert_int_equal(reply->body_case, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER_REPLY);
    size_t n = reply->register_scheduler_reply->n_executors;
    zflow__envelope__free_unpacked(reply, NULL);
    return n;
}

static Zflow__Envelope *s_list(zf_socket_t *s, uint64_t request_id)
{
    Zflow__ListExecutors req = ZFLOW__LIST_EXECUTORS__INIT;
    zf_test_send_body(s, request_id, ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS, &req);
    Zflow__Envelope *reply = zf_test_recv(s, 5000, NULL);
    assert_non_null(reply);
    assert_int_equal(reply->request_id, request_id);
    assert_int_equal(reply->body_case, ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS_REPLY);
    return reply;
}

static void s_expect_event(zf_socket_t *s, int kind, const char *name, uint64_t incarnation,
                           const char *reason)
{
    Zflow__Envelope *ev = zf_test_recv(s, 3000, NULL);
    assert_non_null(ev);
    assert_int_equal(ev->body_case, ZFLOW__ENVELOPE__BODY_DEVICE_EVENT);
    assert_int_equal(ev->request_id, 0);
    assert_int_equal(ev->device_event->kind, kind);
    assert_string_equal(ev->device_event->executor->device->name, name);
    assert_int_equal(ev->device_event->executor->device->incarnation, incarnation);
    if (!strstr(ev->device_event->reason, reason))
        fail_msg("reason '%s' does not contain '%s'", ev->device_event->reason, reason);
    zflow__envelope__free_unpacked(ev, NULL);
}

static void test_broker_prints_a_loopback_endpoint_and_stops_cleanly_on_sigterm(void **state)
{
    s_fixture_t *f = *state;
    const char *prefix = "tcp://127.0.0.1:";
    assert_memory_equal(f->tb.endpoint, prefix, strlen(prefix));
    assert_true(atoi(f->tb.endpoint + strlen(prefix)) > 0);
    assert_int_equal(zf_test_broker_stop(&f->tb, SIGTERM), 0);
}

static void test_broker_names_unnamed_executors_and_keeps_given_names(void **state)
{
    s_fixture_t *f = *state;
    zf_socket_t *a = s_peer(f), *b = s_peer(f), *c = s_peer(f);
    Zflow__Envelope *r = zf_test_register_executor(a, 7, "", "CPU", 0x11, "tcp://127.0.0.1:7001",
                                                   "tcp://127.0.0.1:7002");
    assert_int_equal(r->register_executor_reply->status->code, ZF_OK);
    assert_string_equal(r->register_executor_reply->device_name,
                        "/job:worker/replica:0/task:0/device:CPU:0");
    assert_int_equal(r->register_executor_reply->heartbeat_ms, 100);
    assert_int_equal(r->register_executor_reply->heartbeat_misses, 3);
    zflow__envelope__free_unpacked(r, NULL);
    const char *named = "/job:localhost/replica:0/task:0/device:CPU:0";
    r = zf_test_register_executor(b, 8, named, "CPU", 0x22, "tcp://127.0.0.1:7003",
                                  "tcp://127.0.0.1:7004");
    assert_string_equal(r->register_executor_reply->device_name, named);
    zflow__envelope__free_unpacked(r, NULL);
    r = zf_test_register_executor(c, 9, named, "CPU", 0x22, "tcp://127.0.0.1:7005",
                                  "tcp://127.0.0.1:7006");
    assert_int_equal(r->register_executor_reply->status->code, ZF_ALREADY_EXISTS);
    assert_non_null(strstr(r->register_executor_reply->status->message, "is already registered"));
    assert_string_equal(r->register_executor_reply->device_name, "");
    zflow__envelope__free_unpacked(r, NULL);

    Zflow__Envelope *list = s_list(c, 10);
    const Zflow__ListExecutorsReply *l = list->list_executors_reply;
    assert_int_equal(l->n_executors, 2);
    assert_string_equal(l->executors[0]->device->name, "/job:worker/replica:0/task:0/device:CPU:0");
    assert_string_equal(l->executors[0]->control_endpoint, "tcp://127.0.0.1:7001");
    assert_string_equal(l->executors[1]->device->name, named);
    assert_string_equal(l->executors[1]->rendezvous_endpoint, "tcp://127.0.0.1:7004");
    assert_string_equal(l->executors[1]->host_id, "test-host");
    assert_true(l->executors[1]->ms_since_heartbeat >= 0 &&
                l->executors[1]->ms_since_heartbeat < 300);
    zflow__envelope__free_unpacked(list, NULL);
}

static void test_broker_tells_a_scheduler_about_joins_restarts_and_deaths(void **state)
{
    s_fixture_t *f = *state;
    zf_socket_t *sched = s_peer(f), *ex = s_peer(f);
    assert_int_equal(s_register_scheduler(sched), 0);
    Zflow__Envelope *r = zf_test_register_executor(ex, 1, "", "GPU", 5, "tcp://127.0.0.1:7001",
                                                   "tcp://127.0.0.1:7002");
    char name[ZF_DEVICE_NAME_MAX];
    snprintf(name, sizeof name, "%s", r->register_executor_reply->device_name);
    zflow__envelope__free_unpacked(r, NULL);
    assert_string_equal(name, "/job:worker/replica:0/task:0/device:GPU:0");
    s_expect_event(sched, ZFLOW__DEVICE_EVENT__KIND__JOINED, name, 5, "");

    /* A second claim of the name while its holder lives: refused, naming it. */
    zf_socket_t *ex2 = s_peer(f);
    r = zf_test_register_executor(ex2, 2, name, "GPU", 6, "tcp://127.0.0.1:7003",
                                  "tcp://127.0.0.1:7004");
    assert_int_equal(r->register_executor_reply->status->code, ZF_ALREADY_EXISTS);
    assert_non_null(strstr(r->register_executor_reply->status->message,
                           "device '/job:worker/replica:0/task:0/device:GPU:0' is held by a live "
                           "executor"));
    zflow__envelope__free_unpacked(r, NULL);
    /* Its holder's connection closes (its process died): it dies at once, and
     * the restart takes the name with its new incarnation. */
    s_close_peer(f, ex);
    s_expect_event(sched, ZFLOW__DEVICE_EVENT__KIND__DIED, name, 5,
                   "connection to the broker closed");
    ex = ex2;
    r = zf_test_register_executor(ex, 3, name, "GPU", 6, "tcp://127.0.0.1:7003",
                                  "tcp://127.0.0.1:7004");
    assert_int_equal(r->register_executor_reply->status->code, ZF_OK);
    zflow__envelope__free_unpacked(r, NULL);
    s_expect_event(sched, ZFLOW__DEVICE_EVENT__KIND__JOINED, name, 6, "");

    /* Heartbeats keep it alive well past 3 periods. */
    for (int i = 0; i < 8; i++) {
        assert_int_equal(zf_test_heartbeat(ex, 10 + (uint64_t)i, name, 6, i), ZF_OK);
        usleep(50000);
    }
    assert_int_equal(zf_test_heartbeat(ex, 30, name, 5, 0), ZF_NOT_FOUND);
    assert_null(zf_test_recv(sched, 0, NULL));
    /* Silence: DIED within a few periods. */
    s_expect_event(sched, ZFLOW__DEVICE_EVENT__KIND__DIED, name, 6, "no heartbeat for");
    assert_int_equal(zf_test_heartbeat(ex, 31, name, 6, 0), ZF_NOT_FOUND);
    assert_true(zf_test_broker_log_contains(&f->tb, "died: no heartbeat for"));
}

/* DeregisterExecutor: the executor leaves at once (DIED "stopped") and its
 * name is free; a wrong incarnation is NOT_FOUND and changes nothing. */
static int s_deregister(zf_socket_t *ex, uint64_t id, const char *name, uint64_t incarnation)
{
    Zflow__DeregisterExecutor d = ZFLOW__DEREGISTER_EXECUTOR__INIT;
    d.device_name = (char *)name;
    d.incarnation = incarnation;
    zf_test_send_body(ex, id, ZFLOW__ENVELOPE__BODY_DEREGISTER_EXECUTOR, &d);
    Zflow__Envelope *r = zf_test_recv(ex, 5000, NULL);
    assert_non_null(r);
    assert_int_equal(r->request_id, id);
    assert_int_equal(r->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    int code = r->status_reply->status ? r->status_reply->status->code : 0;
    zflow__envelope__free_unpacked(r, NULL);
    return code;
}

static void test_broker_lets_a_stopping_executor_leave_at_once(void **state)
{
    s_fixture_t *f = *state;
    zf_socket_t *sched = s_peer(f), *ex = s_peer(f);
    assert_int_equal(s_register_scheduler(sched), 0);
    const char *name = "/job:worker/replica:0/task:3/device:CPU:0";
    Zflow__Envelope *r = zf_test_register_executor(ex, 1, name, "CPU", 7, "tcp://127.0.0.1:7001",
                                                   "tcp://127.0.0.1:7002");
    assert_int_equal(r->register_executor_reply->status->code, ZF_OK);
    zflow__envelope__free_unpacked(r, NULL);
    s_expect_event(sched, ZFLOW__DEVICE_EVENT__KIND__JOINED, name, 7, "");
    assert_int_equal(s_deregister(ex, 2, name, 8), ZF_NOT_FOUND);
    /* only over its own connection: another peer that knows the name and
     * incarnation cannot take it out */
    zf_socket_t *other = s_peer(f);
    assert_int_equal(s_deregister(other, 9, name, 7), ZF_PERMISSION_DENIED);
    assert_int_equal(s_deregister(ex, 3, "/job:worker/replica:0/task:9/device:CPU:0", 7),
                     ZF_NOT_FOUND);
    assert_null(zf_test_recv(sched, 0, NULL));
    assert_int_equal(s_deregister(ex, 4, name, 7), ZF_OK);
    s_expect_event(sched, ZFLOW__DEVICE_EVENT__KIND__DIED, name, 7, "stopped");
    assert_int_equal(zf_test_heartbeat(ex, 5, name, 7, 0), ZF_NOT_FOUND);
    /* the restart takes the name back at once */
    r = zf_test_register_executor(ex, 6, name, "CPU", 9, "tcp://127.0.0.1:7001",
                                  "tcp://127.0.0.1:7002");
    assert_int_equal(r->register_executor_reply->status->code, ZF_OK);
    assert_string_equal(r->register_executor_reply->device_name, name);
    zflow__envelope__free_unpacked(r, NULL);
    s_expect_event(sched, ZFLOW__DEVICE_EVENT__KIND__JOINED, name, 9, "");
}

static void test_broker_passes_client_requests_to_a_scheduler_and_back(void **state)
{
    s_fixture_t *f = *state;
    zf_socket_t *sched = s_peer(f), *c1 = s_peer(f), *c2 = s_peer(f);
    s_register_scheduler(sched);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    Zflow__CloseSession cl = ZFLOW__CLOSE_SESSION__INIT;
    cl.session = "session-1";
    zf_test_send_body(c1, 42, ZFLOW__ENVELOPE__BODY_CREATE_SESSION, &cs);
    zf_test_send_body(c2, 42, ZFLOW__ENVELOPE__BODY_CLOSE_SESSION, &cl);
    /* The scheduler gets [client][envelope], request ids untouched. */
    zf_route_t from[2];
    for (int i = 0; i < 2; i++) {
        Zflow__Envelope *req = zf_test_recv(sched, 5000, &from[i]);
        assert_non_null(req);
        assert_int_equal(from[i].n, 1);
        assert_int_equal(req->request_id, 42);
        if (req->body_case == ZFLOW__ENVELOPE__BODY_CLOSE_SESSION)
            assert_string_equal(req->close_session->session, "session-1");
        else
            assert_int_equal(req->body_case, ZFLOW__ENVELOPE__BODY_CREATE_SESSION);
        /* Answer each client with its own session name. */
        Zflow__CreateSessionReply rep = ZFLOW__CREATE_SESSION_REPLY__INIT;
        rep.session = req->body_case == ZFLOW__ENVELOPE__BODY_CLOSE_SESSION ? "for-c2" : "for-c1";
        Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
        env.request_id = 42;
        env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY;
        env.create_session_reply = &rep;
        zf_test_send(sched, from[i].frame[0], from[i].len[0], &env);
        zflow__envelope__free_unpacked(req, NULL);
    }
    assert_false(zf_route_equal(&from[0], &from[1]));
    zf_socket_t *clients[2] = {c1, c2};
    const char *want[2] = {"for-c1", "for-c2"};
    for (int i = 0; i < 2; i++) {
        zf_route_t r;
        Zflow__Envelope *rep = zf_test_recv(clients[i], 5000, &r);
        assert_non_null(rep);
        assert_int_equal(r.n, 0);
        assert_int_equal(rep->request_id, 42);
        assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY);
        assert_string_equal(rep->create_session_reply->session, want[i]);
        zflow__envelope__free_unpacked(rep, NULL);
    }
    /* A second reply to an answered request is dropped. */
    Zflow__StatusReply sr = ZFLOW__STATUS_REPLY__INIT;
    Zflow__Envelope late = ZFLOW__ENVELOPE__INIT;
    late.request_id = 42;
    late.body_case = ZFLOW__ENVELOPE__BODY_STATUS_REPLY;
    late.status_reply = &sr;
    zf_test_send(sched, from[0].frame[0], from[0].len[0], &late);
    assert_null(zf_test_recv(c1, 300, NULL));
    assert_null(zf_test_recv(c2, 0, NULL));
}

static void test_broker_spreads_requests_over_schedulers_by_outstanding_count(void **state)
{
    s_fixture_t *f = *state;
    zf_socket_t *s1 = s_peer(f), *s2 = s_peer(f), *c = s_peer(f);
    s_register_scheduler(s1);
    s_register_scheduler(s2);
    s_register_scheduler(s1); /* again, as a keepalive: still one entry */
    Zflow__CloseSession close = ZFLOW__CLOSE_SESSION__INIT;
    for (uint64_t id = 1; id <= 3; id++)
        zf_test_send_body(c, id, ZFLOW__ENVELOPE__BODY_CLOSE_SESSION, &close);
    Zflow__Envelope *a = zf_test_recv(s1, 5000, NULL), *b = zf_test_recv(s2, 5000, NULL);
    Zflow__Envelope *a2 = zf_test_recv(s1, 5000, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(a2);
    assert_int_equal(a->request_id, 1);
    assert_int_equal(b->request_id, 2);
    assert_int_equal(a2->request_id, 3);
    Zflow__Envelope *extra = zf_test_recv(s2, 200, NULL);
    if (extra)
        fail_msg("the second scheduler got another message: body %d, request %llu",
                 (int)extra->body_case, (unsigned long long)extra->request_id);
    zflow__envelope__free_unpacked(a, NULL);
    zflow__envelope__free_unpacked(b, NULL);
    zflow__envelope__free_unpacked(a2, NULL);
}

static void test_broker_answers_unavailable_when_no_scheduler_is_registered(void **state)
{
    s_fixture_t *f = *state;
    zf_socket_t *c = s_peer(f);
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    zf_test_send_body(c, 77, ZFLOW__ENVELOPE__BODY_RUN_STEP, &rs);
    zf_test_expect_status(c, 77, ZF_UNAVAILABLE, "no scheduler is registered");
}

static void test_broker_fails_the_requests_of_a_scheduler_that_disconnects(void **state)
{
    s_fixture_t *f = *state;
    zf_socket_t *sched = s_peer(f), *c = s_peer(f);
    s_register_scheduler(sched);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    zf_test_send_body(c, 5, ZFLOW__ENVELOPE__BODY_CREATE_SESSION, &cs);
    Zflow__Envelope *req = zf_test_recv(sched, 5000, NULL);
    assert_non_null(req);
    zflow__envelope__free_unpacked(req, NULL);
    s_close_peer(f, sched);
    zf_test_expect_status(c, 5, ZF_UNAVAILABLE, "the scheduler serving this request is gone");
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    zf_test_send_body(c, 6, ZFLOW__ENVELOPE__BODY_RUN_STEP, &rs);
    zf_test_expect_status(c, 6, ZF_UNAVAILABLE, "no scheduler is registered");
}

static void test_broker_answers_bad_messages_and_keeps_serving(void **state)
{
    s_fixture_t *f = *state;
    zf_socket_t *p = s_peer(f);
    void *h = zf_socket_handle(p);
    assert_int_equal(zmq_send(h, "garbage!", 8, 0), 8);
    zf_test_expect_status(p, 0, ZF_INVALID_ARGUMENT, "malformed envelope");

    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    Zflow__ListExecutors le = ZFLOW__LIST_EXECUTORS__INIT;
    env.version = 2;
    env.request_id = 3;
    env.body_case = ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS;
    env.list_executors = &le;
    assert_int_equal(zf_envelope_send(p, NULL, &env).code, ZF_OK);
    zf_test_expect_status(p, 3, ZF_FAILED_PRECONDITION, "protocol version 2 is not supported");

    Zflow__RunGraph rg = ZFLOW__RUN_GRAPH__INIT;
    zf_test_send_body(p, 4, ZFLOW__ENVELOPE__BODY_RUN_GRAPH, &rg);
    zf_test_expect_status(p, 4, ZF_INVALID_ARGUMENT, "the broker does not serve run_graph");

    Zflow__RegisterExecutor empty = ZFLOW__REGISTER_EXECUTOR__INIT;
    zf_test_send_body(p, 5, ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR, &empty);
    Zflow__Envelope *r = zf_test_recv(p, 5000, NULL);
    assert_non_null(r);
    assert_int_equal(r->register_executor_reply->status->code, ZF_INVALID_ARGUMENT);
    assert_string_equal(r->register_executor_reply->status->message,
                        "RegisterExecutor: executor info has no device");
    zflow__envelope__free_unpacked(r, NULL);

    /* A client frame from a peer that is not a scheduler. */
    Zflow__StatusReply sr = ZFLOW__STATUS_REPLY__INIT;
    env = (Zflow__Envelope)ZFLOW__ENVELOPE__INIT;
    env.request_id = 6;
    env.body_case = ZFLOW__ENVELOPE__BODY_STATUS_REPLY;
    env.status_reply = &sr;
    zf_test_send(p, "someone", 7, &env);
    zf_test_expect_status(p, 6, ZF_INVALID_ARGUMENT, "not a registered scheduler");

    /* Too many routing frames. */
    for (int i = 0; i < 9; i++) assert_int_equal(zmq_send(h, "x", 1, ZMQ_SNDMORE), 1);
    assert_int_equal(zmq_send(h, "y", 1, 0), 1);
    zf_test_expect_status(p, 0, ZF_INVALID_ARGUMENT, "at most");

    Zflow__Envelope *list = s_list(p, 8);
    assert_int_equal(list->list_executors_reply->n_executors, 0);
    zflow__envelope__free_unpacked(list, NULL);
    assert_true(zf_test_broker_log_contains(&f->tb, "bad message"));
    assert_int_equal(zf_test_broker_stop(&f->tb, SIGTERM), 0);
}

static void test_broker_takes_settings_from_the_environment_and_flags(void **state)
{
    s_fixture_t *f = *state;
    Zflow__Envelope *r = zf_test_register_executor(s_peer(f), 1, "", "CPU", 9,
                                                   "tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002");
    assert_int_equal(r->register_executor_reply->heartbeat_ms, 250);
    assert_int_equal(r->register_executor_reply->heartbeat_misses, 4);
    zflow__envelope__free_unpacked(r, NULL);
}

/* Runs zflow-broker with args, stderr folded in; returns its exit code. */
static int s_broker_cmd(const char *args, char *out, size_t size)
{
    return zf_test_run_program(ZF_BIN_DIR "/zflow-broker", args, out, size);
}

static void test_broker_refuses_bad_flags_and_a_busy_address(void **state)
{
    s_fixture_t *f = *state;
    char out[4096], args[512];
    assert_int_equal(s_broker_cmd("--heartbeat-ms 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "--heartbeat-ms must be a whole number from 1 to"));
    assert_int_equal(s_broker_cmd("--bogus 1", out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown option '--bogus'"));
    assert_int_equal(s_broker_cmd("--listen tcp://127.0.0.1:port", out, sizeof out), 1);
    assert_non_null(strstr(out, "zflow-broker: INVALID_ARGUMENT: cannot bind"));
    snprintf(args, sizeof args, "--listen %s", f->tb.endpoint);
    assert_int_equal(s_broker_cmd(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "zflow-broker: UNAVAILABLE: cannot bind"));
}

/* The child process: registers a scheduler, says so on ready_fd, then
 * reads and never answers. Plain code: no cmocka in the child. */
static void s_child_scheduler(const char *endpoint, int ready_fd)
{
    zf_zctx_t *ctx = NULL;
    zf_socket_t *s = NULL;
    if (!zf_ok(zf_zctx_new(&ctx)) || !zf_ok(zf_socket_new(ctx, ZF_SOCKET_DEALER, &s)) ||
        !zf_ok(zf_socket_connect(s, endpoint)))
        _exit(1);
    Zflow__RegisterScheduler req = ZFLOW__REGISTER_SCHEDULER__INIT;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = 1;
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER;
    env.register_scheduler = &req;
    zf_route_t r;
    Zflow__Envelope *reply = NULL;
    if (!zf_ok(zf_envelope_send(s, NULL, &env)) || !zf_ok(zf_envelope_recv(s, 5000, &r, &reply)))
        _exit(1);
    zflow__envelope__free_unpacked(reply, NULL);
    if (write(ready_fd, "r", 1) != 1) _exit(1);
    for (;;) {
        zf_status_t st = zf_envelope_recv(s, 1000, &r, &reply);
        zf_status_clear(&st);
        if (reply) zflow__envelope__free_unpacked(reply, NULL);
        reply = NULL;
    }
}

static void test_broker_drops_a_scheduler_that_stops_answering(void **state)
{
    s_fixture_t *f = *state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    f->child = fork();
    assert_true(f->child >= 0);
    if (f->child == 0) {
        close(ready[0]);
        s_child_scheduler(f->tb.endpoint, ready[1]);
    }
    close(ready[1]);
    struct pollfd p = {ready[0], POLLIN, 0};
    char byte = 0;
    bool got = poll(&p, 1, 10000) == 1 && read(ready[0], &byte, 1) == 1;
    close(ready[0]);
    assert_true(got && byte == 'r');
    zf_socket_t *c = s_peer(f);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    zf_test_send_body(c, 9, ZFLOW__ENVELOPE__BODY_CREATE_SESSION, &cs);
    usleep(100000);
    /* A stopped process answers nothing, not even ZeroMQ's pings. */
    kill(f->child, SIGSTOP);
    zf_test_expect_status(c, 9, ZF_UNAVAILABLE, "the scheduler serving this request is gone");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, s_setup, s_teardown)
        T(test_broker_prints_a_loopback_endpoint_and_stops_cleanly_on_sigterm),
        T(test_broker_names_unnamed_executors_and_keeps_given_names),
        T(test_broker_tells_a_scheduler_about_joins_restarts_and_deaths),
        T(test_broker_lets_a_stopping_executor_leave_at_once),
        T(test_broker_passes_client_requests_to_a_scheduler_and_back),
        T(test_broker_spreads_requests_over_schedulers_by_outstanding_count),
        T(test_broker_answers_unavailable_when_no_scheduler_is_registered),
        T(test_broker_fails_the_requests_of_a_scheduler_that_disconnects),
        T(test_broker_answers_bad_messages_and_keeps_serving),
        T(test_broker_refuses_bad_flags_and_a_busy_address),
        T(test_broker_drops_a_scheduler_that_stops_answering),
        cmocka_unit_test_setup_teardown(test_broker_takes_settings_from_the_environment_and_flags,
                                        s_setup_env, s_teardown),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
