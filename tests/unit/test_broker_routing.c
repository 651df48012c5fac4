/* Tests for zflow-broker's routing by scheduler id: starts the real program
 * on an ephemeral loopback port and plays schedulers and clients over
 * DEALER sockets. A request naming a session or job goes to the scheduler
 * whose id prefixes it; a gone owner is UNAVAILABLE naming it; bad ids are
 * refused; Ping is answered by the broker itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "broker_test_util.h"
#include "test_util.h"

#define S_SOCKETS 8

typedef struct {
    zf_test_broker_t tb;
    zf_zctx_t *ctx;
    zf_socket_t *socks[S_SOCKETS];
    int n_socks;
} fixture_t;

static int s_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    *state = f;
    zf_test_broker_start(&f->tb, NULL);
    ASSERT_OK(zf_zctx_new(&f->ctx));
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < f->n_socks; i++) zf_socket_destroy(&f->socks[i]);
    zf_zctx_destroy(&f->ctx);
    int rc = zf_test_broker_stop(&f->tb, SIGTERM); /* a clean exit checks its leaks */
    free(f);
    return rc == 0 ? 0 : -1;
}

static zf_socket_t *s_peer(fixture_t *f)
{
    assert_true(f->n_socks < S_SOCKETS);
    zf_socket_t *s = zf_test_dealer(f->ctx, f->tb.endpoint);
    f->socks[f->n_socks++] = s;
    return s;
}

/* RegisterScheduler with sid; returns the reply's status code, and its
 * message in msg. */
static int s_register(zf_socket_t *s, const char *sid, char *msg, size_t size)
{
    Zflow__RegisterScheduler req = ZFLOW__REGISTER_SCHEDULER__INIT;
    req.scheduler_id = (char *)sid;
    req.client_endpoint = "tcp://127.0.0.1:1";
    zf_test_send_body(s, 1, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER, &req);
    Zflow__Envelope *rep = zf_test_recv(s, 5000, NULL);
    assert_non_null(rep);
    int code = 0;
    msg[0] = '\0';
    if (rep->body_case == ZFLOW__ENVELOPE__BODY_STATUS_REPLY) {
        code = rep->status_reply->status->code;
        snprintf(msg, size, "%s", rep->status_reply->status->message);
    } else {
        assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER_REPLY);
    }
    zflow__envelope__free_unpacked(rep, NULL);
    return code;
}

static void s_register_ok(zf_socket_t *s, const char *sid)
{
    char msg[256];
    assert_int_equal(s_register(s, sid, msg, sizeof msg), ZF_OK);
}

static void s_run_step(zf_socket_t *client, uint64_t id, const char *session)
{
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    rs.session = (char *)session;
    zf_test_send_body(client, id, ZFLOW__ENVELOPE__BODY_RUN_STEP, &rs);
}

/* The next request a scheduler gets: its id and the id it names. */
static void s_expect_forwarded(zf_socket_t *sched, uint64_t id, Zflow__Envelope__BodyCase body)
{
    zf_route_t route;
    Zflow__Envelope *req = zf_test_recv(sched, 5000, &route);
    assert_non_null(req);
    assert_int_equal(route.n, 1); /* the client's identity */
    assert_int_equal(req->request_id, id);
    assert_int_equal(req->body_case, body);
    zflow__envelope__free_unpacked(req, NULL);
}

static void test_broker_answers_a_ping_itself(void **state)
{
    fixture_t *f = *state;
    zf_socket_t *c = s_peer(f);
    Zflow__Ping ping = ZFLOW__PING__INIT;
    zf_test_send_body(c, 42, ZFLOW__ENVELOPE__BODY_PING, &ping);
    zf_test_expect_status(c, 42, ZF_OK, NULL);
}

static void test_broker_routes_requests_to_the_scheduler_their_id_names(void **state)
{
    fixture_t *f = *state;
    zf_socket_t *s1 = s_peer(f), *s2 = s_peer(f), *c = s_peer(f);
    s_register_ok(s1, "aaaa0001");
    s_register_ok(s2, "bbbb0002");
    /* s1 is as idle as s2, and first: only the ids send these to s2 */
    for (uint64_t id = 10; id < 13; id++) s_run_step(c, id, "bbbb0002/session-1-00000001");
    for (uint64_t id = 10; id < 13; id++)
        s_expect_forwarded(s2, id, ZFLOW__ENVELOPE__BODY_RUN_STEP);
    Zflow__WaitJob wj = ZFLOW__WAIT_JOB__INIT;
    wj.job_id = "aaaa0001/job-7-00000002";
    zf_test_send_body(c, 20, ZFLOW__ENVELOPE__BODY_WAIT_JOB, &wj);
    s_expect_forwarded(s1, 20, ZFLOW__ENVELOPE__BODY_WAIT_JOB);
    Zflow__CloseSession cs = ZFLOW__CLOSE_SESSION__INIT;
    cs.session = "bbbb0002/session-1-00000001";
    zf_test_send_body(c, 21, ZFLOW__ENVELOPE__BODY_CLOSE_SESSION, &cs);
    s_expect_forwarded(s2, 21, ZFLOW__ENVELOPE__BODY_CLOSE_SESSION);
    assert_null(zf_test_recv(s1, 200, NULL)); /* nothing else went to s1 */
}

/* A RunStep for session feeding x a tensor of n floats (each its index),
 * so large that the broker passes it on without decoding it. */
static void s_big_run_step(zf_socket_t *client, uint64_t id, const char *session, size_t n)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) v[i] = (float)i;
    Tensorflow__TensorShapeProto__Dim dim = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT, *dims[1];
    dim.size = (int64_t)n;
    dims[0] = &dim;
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 1;
    shape.dim = dims;
    Tensorflow__TensorProto t = TENSORFLOW__TENSOR_PROTO__INIT;
    t.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    t.tensor_shape = &shape;
    t.tensor_content = (ProtobufCBinaryData){n * sizeof *v, (uint8_t *)v};
    Zflow__NamedTensor feed = ZFLOW__NAMED_TENSOR__INIT, *feeds[1] = {&feed};
    feed.name = "x";
    feed.tensor = &t;
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    rs.session = (char *)session;
    rs.n_feeds = 1;
    rs.feeds = feeds;
    zf_test_send_body(client, id, ZFLOW__ENVELOPE__BODY_RUN_STEP, &rs);
    free(v);
}

static void test_broker_passes_large_messages_whole_both_ways(void **state)
{
    fixture_t *f = *state;
    zf_socket_t *s1 = s_peer(f), *s2 = s_peer(f), *c = s_peer(f);
    s_register_ok(s1, "aaaa0001");
    s_register_ok(s2, "bbbb0002");
    const size_t n = 1 << 20; /* 4 MiB of floats */
    s_big_run_step(c, 30, "bbbb0002/session-1-00000001", n);
    /* routed by the session its bytes name, and arrived whole */
    zf_route_t route;
    Zflow__Envelope *req = zf_test_recv(s2, 5000, &route);
    assert_non_null(req);
    assert_int_equal(route.n, 1);
    assert_int_equal(req->request_id, 30);
    assert_int_equal(req->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP);
    assert_string_equal(req->run_step->session, "bbbb0002/session-1-00000001");
    assert_int_equal(req->run_step->n_feeds, 1);
    const ProtobufCBinaryData *bytes = &req->run_step->feeds[0]->tensor->tensor_content;
    assert_int_equal(bytes->len, n * sizeof(float));
    assert_true(((const float *)bytes->data)[n - 1] == (float)(n - 1));
    assert_null(zf_test_recv(s1, 100, NULL));

    /* the reply, as large, goes back whole to the client that asked */
    Zflow__RunStepReply r = ZFLOW__RUN_STEP_REPLY__INIT;
    r.n_fetches = req->run_step->n_feeds;
    r.fetches = req->run_step->feeds;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = 30;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY;
    env.run_step_reply = &r;
    zf_test_send(s2, route.frame[0], route.len[0], &env);
    zflow__envelope__free_unpacked(req, NULL);
    Zflow__Envelope *rep = zf_test_recv(c, 5000, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, 30);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    assert_int_equal(rep->run_step_reply->n_fetches, 1);
    assert_int_equal(rep->run_step_reply->fetches[0]->tensor->tensor_content.len,
                     n * sizeof(float));
    zflow__envelope__free_unpacked(rep, NULL);

    /* one naming a gone scheduler is answered by the broker, as a small one */
    s_big_run_step(c, 31, "cccc0003/session-1-00000001", n);
    zf_test_expect_status(c, 31, ZF_UNAVAILABLE, "held by scheduler 'cccc0003', which is gone");
    /* and the broker's own answers kept coming meanwhile */
    Zflow__Ping ping = ZFLOW__PING__INIT;
    zf_test_send_body(c, 32, ZFLOW__ENVELOPE__BODY_PING, &ping);
    zf_test_expect_status(c, 32, ZF_OK, NULL);
}

static void test_broker_names_the_gone_scheduler_of_a_session_or_job(void **state)
{
    fixture_t *f = *state;
    zf_socket_t *s1 = s_peer(f), *c = s_peer(f);
    s_register_ok(s1, "aaaa0001");
    s_run_step(c, 5, "cccc0003/session-4-0000000a");
    zf_test_expect_status(c, 5, ZF_UNAVAILABLE,
                          "session 'cccc0003/session-4-0000000a' is held by scheduler 'cccc0003', "
                          "which is gone (not registered with the broker)");
    Zflow__WaitJob wj = ZFLOW__WAIT_JOB__INIT;
    wj.job_id = "cccc0003/job-1-0000000b";
    zf_test_send_body(c, 6, ZFLOW__ENVELOPE__BODY_WAIT_JOB, &wj);
    zf_test_expect_status(
        c, 6, ZF_UNAVAILABLE,
        "job 'cccc0003/job-1-0000000b' is held by scheduler 'cccc0003', which is gone");
    /* an id without a prefix goes to any scheduler, which says whether it
     * knows it */
    s_run_step(c, 7, "session-1");
    s_expect_forwarded(s1, 7, ZFLOW__ENVELOPE__BODY_RUN_STEP);
}

static void test_broker_refuses_a_bad_or_taken_scheduler_id(void **state)
{
    fixture_t *f = *state;
    zf_socket_t *s1 = s_peer(f), *s2 = s_peer(f);
    char msg[256];
    assert_int_equal(s_register(s1, "a/b", msg, sizeof msg), ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "scheduler id 'a/b' is longer than 23 bytes or holds a '/'"));
    assert_int_equal(s_register(s1, "0123456789abcdef0123456789", msg, sizeof msg),
                     ZF_INVALID_ARGUMENT);
    s_register_ok(s1, "aaaa0001");
    s_register_ok(s1, "aaaa0001"); /* again, as a keepalive */
    assert_int_equal(s_register(s2, "aaaa0001", msg, sizeof msg), ZF_ALREADY_EXISTS);
    assert_non_null(strstr(msg, "another scheduler has id 'aaaa0001'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_broker_answers_a_ping_itself, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_broker_routes_requests_to_the_scheduler_their_id_names,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_broker_passes_large_messages_whole_both_ways, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_broker_names_the_gone_scheduler_of_a_session_or_job,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_broker_refuses_a_bad_or_taken_scheduler_id, s_setup,
                                        s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
