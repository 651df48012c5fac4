/* Tests for common/transport: socket wrappers over real ZeroMQ sockets on
 * 127.0.0.1 ephemeral ports and inproc://, the envelope codec with routes,
 * request ids and status replies, and the rejection of malformed
 * messages, after each of which the socket keeps working. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zmq.h>

#include "common/transport.h"
#include "test_util.h"

#define WAIT_MS 5000 /* for messages that must arrive */
#define IDLE_MS 200  /* for messages that must not */

typedef struct {
    zf_zctx_t *ctx;
    zf_socket_t *router, *dealer;
} s_pair_t;

/* A ROUTER on an ephemeral TCP port and a DEALER named "dealer-1". */
static void s_pair_open(s_pair_t *p)
{
    ASSERT_OK(zf_zctx_new(&p->ctx));
    ASSERT_OK(zf_socket_new(p->ctx, ZF_SOCKET_ROUTER, &p->router));
    ASSERT_OK(zf_socket_new(p->ctx, ZF_SOCKET_DEALER, &p->dealer));
    const char *ep = NULL;
    ASSERT_OK(zf_socket_bind(p->router, "tcp://127.0.0.1:*", &ep));
    ASSERT_OK(zf_socket_set_routing_id(p->dealer, "dealer-1", 8));
    ASSERT_OK(zf_socket_connect(p->dealer, ep));
}

static void s_pair_close(s_pair_t *p)
{
    zf_socket_destroy(&p->dealer);
    zf_socket_destroy(&p->router);
    zf_zctx_destroy(&p->ctx);
    assert_null(p->ctx);
}

/* A heartbeat envelope on the stack (the strings are literals). */
typedef struct {
    Zflow__Envelope env;
    Zflow__Heartbeat hb;
} s_heartbeat_t;

static Zflow__Envelope *s_heartbeat(s_heartbeat_t *m, uint64_t request_id, int64_t load)
{
    zflow__heartbeat__init(&m->hb);
    m->hb.device_name = "/job:worker/replica:0/task:0/device:CPU:0";
    m->hb.incarnation = 0x1234567890abcdefULL;
    m->hb.load = load;
    zflow__envelope__init(&m->env);
    m->env.request_id = request_id;
    m->env.body_case = ZFLOW__ENVELOPE__BODY_HEARTBEAT;
    m->env.heartbeat = &m->hb;
    return &m->env;
}

/* Packs a heartbeat with an explicit version into buf; returns its size. */
static size_t s_pack_heartbeat(uint8_t *buf, size_t cap, uint64_t request_id, int version)
{
    s_heartbeat_t m;
    Zflow__Envelope *env = s_heartbeat(&m, request_id, 1);
    env->version = (Zflow__ProtocolVersion)version;
    size_t len = zflow__envelope__get_packed_size(env);
    assert_true(len <= cap);
    return zflow__envelope__pack(env, buf);
}

/* Sends frames as one multipart message straight through libzmq. */
static void s_send_raw(zf_socket_t *s, const void *const *frames, const size_t *lens, int n)
{
    for (int i = 0; i < n; i++)
        assert_true(
            zmq_send(zf_socket_handle(s), frames[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
}

static void s_expect_heartbeat(zf_socket_t *router, uint64_t request_id)
{
    zf_route_t route;
    Zflow__Envelope *env = NULL;
    ASSERT_OK(zf_envelope_recv(router, WAIT_MS, &route, &env));
    assert_int_equal(route.n, 1);
    assert_int_equal(route.len[0], 8);
    assert_memory_equal(route.frame[0], "dealer-1", 8);
    assert_int_equal(env->request_id, request_id);
    assert_int_equal(env->body_case, ZFLOW__ENVELOPE__BODY_HEARTBEAT);
    zflow__envelope__free_unpacked(env, NULL);
    zf_route_clear(&route);
}

/* Receives on the router and expects code with msg; the route must still
 * name the dealer. Then proves the socket still works. */
static void s_expect_rejection(s_pair_t *p, zf_code_t code, const char *msg, int route_frames)
{
    zf_route_t route;
    Zflow__Envelope *env = (Zflow__Envelope *)&route; /* must be reset to NULL */
    zf_test_expect_error(zf_envelope_recv(p->router, WAIT_MS, &route, &env), code, msg);
    assert_null(env);
    assert_int_equal(route.n, route_frames);
    if (route_frames > 0) assert_memory_equal(route.frame[0], "dealer-1", 8);
    s_heartbeat_t m;
    ASSERT_OK(zf_envelope_send(p->dealer, NULL, s_heartbeat(&m, 99, 0)));
    s_expect_heartbeat(p->router, 99);
}

/* ---- sockets ---------------------------------------------------------------- */

static void test_bind_reports_the_ephemeral_tcp_port(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    const char *ep = zf_socket_endpoint(p.router);
    assert_non_null(strstr(ep, "tcp://127.0.0.1:"));
    int port = atoi(ep + strlen("tcp://127.0.0.1:"));
    assert_true(port > 0 && port < 65536);
    assert_string_equal(zf_socket_endpoint(p.dealer), "");
    s_pair_close(&p);
}

static void test_bind_and_connect_reject_bad_endpoints(void **state)
{
    (void)state;
    zf_zctx_t *ctx = NULL;
    zf_socket_t *s = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_PULL, &s));
    const char *bound = "unchanged";
    zf_test_expect_error(zf_socket_bind(s, "bogus://here", &bound), ZF_INVALID_ARGUMENT,
                         "cannot bind 'bogus://here'");
    assert_null(bound);
    zf_test_expect_error(zf_socket_bind(s, "tcp://127.0.0.1", NULL), ZF_INVALID_ARGUMENT,
                         "cannot bind 'tcp://127.0.0.1'");
    zf_test_expect_error(zf_socket_connect(s, "nowhere"), ZF_INVALID_ARGUMENT,
                         "cannot connect to 'nowhere'");
    zf_socket_destroy(&s);
    assert_null(s);
    zf_socket_destroy(&s);
    zf_zctx_destroy(&ctx);
    zf_zctx_destroy(&ctx);
}

static void test_bind_to_a_port_in_use_is_unavailable(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    zf_socket_t *other = NULL;
    ASSERT_OK(zf_socket_new(p.ctx, ZF_SOCKET_ROUTER, &other));
    zf_test_expect_error(zf_socket_bind(other, zf_socket_endpoint(p.router), NULL), ZF_UNAVAILABLE,
                         "cannot bind 'tcp://127.0.0.1:");
    zf_socket_destroy(&other);
    s_pair_close(&p);
}

static void test_socket_options_are_checked(void **state)
{
    (void)state;
    zf_zctx_t *ctx = NULL;
    zf_socket_t *s = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    zf_test_expect_error(zf_socket_new(ctx, (zf_socket_type_t)42, &s), ZF_INVALID_ARGUMENT,
                         "unknown socket type 42");
    assert_null(s);
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_DEALER, &s));
    zf_test_expect_error(zf_socket_set_routing_id(s, "", 0), ZF_INVALID_ARGUMENT, "1 to 255 bytes");
    zf_test_expect_error(zf_socket_set_routing_id(s, "\0abc", 4), ZF_INVALID_ARGUMENT,
                         "not start with a zero byte");
    char big[256];
    memset(big, 'x', sizeof big);
    zf_test_expect_error(zf_socket_set_routing_id(s, big, sizeof big), ZF_INVALID_ARGUMENT,
                         "got 256 bytes");
    ASSERT_OK(zf_socket_set_max_frame_size(s, 1 << 20));
    ASSERT_OK(zf_socket_set_hwm(s, 10, 20));
    ASSERT_OK(zf_socket_set_send_timeout(s, 50));
    zf_test_expect_error(zf_socket_set_router_mandatory(s, true), ZF_INVALID_ARGUMENT,
                         "cannot set ZMQ_ROUTER_MANDATORY");
    int hwm = 0;
    size_t len = sizeof hwm;
    assert_int_equal(zmq_getsockopt(zf_socket_handle(s), ZMQ_RCVHWM, &hwm, &len), 0);
    assert_int_equal(hwm, 20);
    zf_socket_destroy(&s);
    zf_zctx_destroy(&ctx);
}

/* ---- envelopes ------------------------------------------------------------------ */

static void test_request_and_status_reply_round_trip_with_route_and_request_id(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    s_heartbeat_t m;
    ASSERT_OK(zf_envelope_send(p.dealer, NULL, s_heartbeat(&m, 42, 7)));
    assert_int_equal(m.env.version, 0); /* the caller's envelope is left alone */

    zf_route_t route;
    Zflow__Envelope *env = NULL;
    ASSERT_OK(zf_envelope_recv(p.router, WAIT_MS, &route, &env));
    assert_int_equal(route.n, 1);
    assert_memory_equal(route.frame[0], "dealer-1", 8);
    assert_int_equal(route.request_id, 42);
    assert_int_equal(env->version, ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1);
    assert_int_equal(env->request_id, 42);
    assert_int_equal(env->body_case, ZFLOW__ENVELOPE__BODY_HEARTBEAT);
    assert_string_equal(env->heartbeat->device_name, "/job:worker/replica:0/task:0/device:CPU:0");
    assert_true(env->heartbeat->incarnation == 0x1234567890abcdefULL);
    assert_int_equal(env->heartbeat->load, 7);

    zf_status_t err = zf_status_new(ZF_NOT_FOUND, "executor %s unknown", "x");
    ASSERT_OK(zf_envelope_send_status(p.router, &route, env->request_id, &err));
    zf_status_clear(&err);
    zflow__envelope__free_unpacked(env, NULL);
    zf_route_clear(&route);

    ASSERT_OK(zf_envelope_recv(p.dealer, WAIT_MS, &route, &env));
    assert_int_equal(route.n, 0);
    assert_int_equal(env->request_id, 42);
    assert_int_equal(env->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    zf_status_t back = zf_status_from_proto(env->status_reply->status);
    zf_test_expect_error(back, ZF_NOT_FOUND, "executor x unknown");
    zflow__envelope__free_unpacked(env, NULL);
    s_pair_close(&p);
}

static void test_replies_match_requests_in_flight_by_request_id(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    enum { N = 5 };
    for (uint64_t id = 1; id <= N; id++) {
        s_heartbeat_t m;
        ASSERT_OK(zf_envelope_send(p.dealer, NULL, s_heartbeat(&m, id * 100, (int64_t)id)));
    }
    zf_route_t routes[N];
    uint64_t ids[N];
    for (int i = 0; i < N; i++) {
        Zflow__Envelope *env = NULL;
        ASSERT_OK(zf_envelope_recv(p.router, WAIT_MS, &routes[i], &env));
        ids[i] = env->request_id;
        assert_int_equal(env->heartbeat->load, i + 1);
        zflow__envelope__free_unpacked(env, NULL);
    }
    for (int i = N - 1; i >= 0; i--) { /* answered out of order */
        zf_status_t st = ZF_STATUS_OK;
        ASSERT_OK(zf_envelope_send_status(p.router, &routes[i], ids[i], &st));
    }
    for (int i = N - 1; i >= 0; i--) {
        zf_route_t route;
        Zflow__Envelope *env = NULL;
        ASSERT_OK(zf_envelope_recv(p.dealer, WAIT_MS, &route, &env));
        assert_int_equal(env->request_id, (uint64_t)(i + 1) * 100);
        zf_status_t st = zf_status_from_proto(env->status_reply->status);
        assert_true(zf_ok(st));
        zflow__envelope__free_unpacked(env, NULL);
    }
    s_pair_close(&p);
}

static void test_inproc_pair_carries_envelopes(void **state)
{
    (void)state;
    zf_zctx_t *ctx = NULL;
    zf_socket_t *a = NULL, *b = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_PAIR, &a));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_PAIR, &b));
    const char *ep = NULL;
    ASSERT_OK(zf_socket_bind(a, "inproc://test-transport-pair", &ep));
    assert_string_equal(ep, "inproc://test-transport-pair");
    ASSERT_OK(zf_socket_connect(b, ep));
    zf_status_t st = zf_status_new(ZF_ABORTED, "graph handle not found; the executor restarted");
    ASSERT_OK(zf_envelope_send_status(b, NULL, 7, &st));
    zf_status_clear(&st);
    zf_route_t route;
    Zflow__Envelope *env = NULL;
    ASSERT_OK(zf_envelope_recv(a, WAIT_MS, &route, &env));
    assert_int_equal(route.n, 0);
    assert_int_equal(env->request_id, 7);
    zf_test_expect_error(zf_status_from_proto(env->status_reply->status), ZF_ABORTED,
                         "graph handle not found; the executor restarted");
    zflow__envelope__free_unpacked(env, NULL);
    zf_socket_destroy(&a);
    zf_socket_destroy(&b);
    zf_zctx_destroy(&ctx);
}

static void test_recv_times_out_with_deadline_exceeded(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    zf_route_t route;
    Zflow__Envelope *env = NULL;
    zf_test_expect_error(zf_envelope_recv(p.router, IDLE_MS, &route, &env), ZF_DEADLINE_EXCEEDED,
                         "no message within 200 ms");
    assert_null(env);
    assert_int_equal(route.n, 0);
    zf_test_expect_error(zf_envelope_recv(p.router, 0, &route, &env), ZF_DEADLINE_EXCEEDED,
                         "no message within 0 ms");
    s_pair_close(&p);
}

static void test_send_refuses_an_envelope_without_body(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = 5;
    zf_test_expect_error(zf_envelope_send(p.dealer, NULL, &env), ZF_INVALID_ARGUMENT,
                         "envelope (request 5) has no body");
    s_pair_close(&p);
}

static void test_router_mandatory_reports_an_unknown_peer(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    ASSERT_OK(zf_socket_set_router_mandatory(p.router, true));
    zf_route_t route;
    zf_route_clear(&route);
    ASSERT_OK(zf_route_push(&route, "nobody", 6));
    zf_status_t st = ZF_STATUS_OK;
    zf_test_expect_error(zf_envelope_send_status(p.router, &route, 1, &st), ZF_UNAVAILABLE,
                         "no connected peer has that routing id");
    s_pair_close(&p);
}

static void test_routes_hold_at_most_8_frames_of_256_bytes(void **state)
{
    (void)state;
    zf_route_t a, b;
    zf_route_clear(&a);
    zf_route_clear(&b);
    uint8_t big[257] = {0};
    zf_test_expect_error(zf_route_push(&a, big, 257), ZF_INVALID_ARGUMENT,
                         "routing frame 1 is 257 bytes; at most 256 are allowed");
    for (int i = 0; i < ZF_ROUTE_MAX_FRAMES; i++) ASSERT_OK(zf_route_push(&a, big, (size_t)i));
    zf_test_expect_error(zf_route_push(&a, "x", 1), ZF_INVALID_ARGUMENT,
                         "a route holds at most 8 frames");
    assert_false(zf_route_equal(&a, &b));
    b = a;
    assert_true(zf_route_equal(&a, &b));
    b.len[3] = 2;
    assert_false(zf_route_equal(&a, &b));
    zf_route_clear(&a);
    assert_int_equal(a.n, 0);
    zf_route_clear(NULL);
}

static void test_status_converts_to_and_from_proto(void **state)
{
    (void)state;
    Zflow__Status *proto = NULL;
    zf_status_t ok = ZF_STATUS_OK;
    ASSERT_OK(zf_status_to_proto(&ok, &proto));
    assert_int_equal(proto->code, 0);
    assert_string_equal(proto->message, "");
    zf_status_t back = zf_status_from_proto(proto);
    assert_true(zf_ok(back));
    zflow__status__free_unpacked(proto, NULL);

    zf_status_t err = zf_status_new(ZF_DEADLINE_EXCEEDED, "step 3 took too long");
    ASSERT_OK(zf_status_to_proto(&err, &proto));
    assert_int_equal(proto->code, 4);
    assert_string_equal(proto->message, "step 3 took too long");
    zf_test_expect_error(zf_status_from_proto(proto), ZF_DEADLINE_EXCEEDED, "step 3 took too long");
    zflow__status__free_unpacked(proto, NULL);
    zf_status_clear(&err);

    Zflow__Status odd;
    zflow__status__init(&odd);
    odd.code = 99;
    odd.message = "from the future";
    zf_test_expect_error(zf_status_from_proto(&odd), ZF_UNKNOWN,
                         "status code 99 out of range: from the future");
    odd.code = 0;
    assert_true(zf_ok(zf_status_from_proto(&odd)));
    assert_true(zf_ok(zf_status_from_proto(NULL)));
}

/* ---- malformed messages ------------------------------------------------------------ */

static void test_random_bytes_are_rejected_and_the_socket_keeps_working(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    uint8_t junk[64];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (uint8_t)(x >> 16);
    }
    const void *frames[1] = {junk};
    size_t lens[1] = {sizeof junk};
    s_send_raw(p.dealer, frames, lens, 1);
    s_expect_rejection(&p, ZF_INVALID_ARGUMENT, "malformed envelope: ", 1);

    /* field 2 (request_id, a varint) sent length-delimited */
    static const uint8_t wrong_type[] = {0x08, 0x01, 0x12, 0x01, 0x00};
    frames[0] = wrong_type;
    lens[0] = sizeof wrong_type;
    s_send_raw(p.dealer, frames, lens, 1);
    s_expect_rejection(&p, ZF_INVALID_ARGUMENT,
                       "malformed envelope: field 'request_id' (2) of zflow.Envelope at byte 2 "
                       "has wire type length-delimited, expected varint",
                       1);
    s_pair_close(&p);
}

static void test_truncated_envelope_is_rejected(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    uint8_t buf[512];
    size_t len = s_pack_heartbeat(buf, sizeof buf, 3, 1);
    const void *frames[1] = {buf};
    size_t lens[1] = {len - 5};
    s_send_raw(p.dealer, frames, lens, 1);
    s_expect_rejection(&p, ZF_INVALID_ARGUMENT, "malformed envelope: field 12 at byte", 1);
    lens[0] = 0;
    s_send_raw(p.dealer, frames, lens, 1);
    s_expect_rejection(&p, ZF_INVALID_ARGUMENT, "malformed envelope: the frame is empty", 1);
    s_pair_close(&p);
}

static void test_wrong_version_is_refused_with_the_request_id_kept(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    uint8_t buf[512];
    const void *frames[1] = {buf};
    size_t lens[1] = {s_pack_heartbeat(buf, sizeof buf, 31, 2)};
    s_send_raw(p.dealer, frames, lens, 1);
    zf_route_t route;
    Zflow__Envelope *env = NULL;
    zf_test_expect_error(zf_envelope_recv(p.router, WAIT_MS, &route, &env), ZF_FAILED_PRECONDITION,
                         "protocol version 2 is not supported (this side speaks 1)");
    assert_null(env);
    assert_int_equal(route.n, 1);
    assert_int_equal(route.request_id, 31);

    /* the sender can be answered, and the answer names the fault */
    zf_status_t why = zf_status_new(ZF_FAILED_PRECONDITION, "protocol version 2 is not supported");
    ASSERT_OK(zf_envelope_send_status(p.router, &route, route.request_id, &why));
    zf_status_clear(&why);
    ASSERT_OK(zf_envelope_recv(p.dealer, WAIT_MS, &route, &env));
    assert_int_equal(env->request_id, 31);
    zf_test_expect_error(zf_status_from_proto(env->status_reply->status), ZF_FAILED_PRECONDITION,
                         "protocol version 2");
    zflow__envelope__free_unpacked(env, NULL);

    lens[0] = s_pack_heartbeat(buf, sizeof buf, 32, 0); /* unset counts as unsupported */
    s_send_raw(p.dealer, frames, lens, 1);
    s_expect_rejection(&p, ZF_FAILED_PRECONDITION, "protocol version 0 is not supported", 1);
    s_pair_close(&p);
}

static void test_envelope_without_body_is_rejected(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = 77;
    uint8_t buf[64];
    const void *frames[1] = {buf};
    size_t lens[1] = {zflow__envelope__pack(&env, buf)};
    s_send_raw(p.dealer, frames, lens, 1);
    s_expect_rejection(&p, ZF_INVALID_ARGUMENT,
                       "envelope (request 77) has no body, or one this side does not know", 1);
    s_pair_close(&p);
}

static void test_too_many_routing_frames_are_rejected_and_drained(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    uint8_t buf[512];
    const void *frames[10];
    size_t lens[10];
    for (int i = 0; i < 9; i++) {
        frames[i] = "hop";
        lens[i] = 3;
    }
    frames[9] = buf;
    lens[9] = s_pack_heartbeat(buf, sizeof buf, 8, 1);
    s_send_raw(p.dealer, frames, lens, 10);
    /* the ROUTER prepends the dealer's identity: 10 routing frames */
    s_expect_rejection(&p, ZF_INVALID_ARGUMENT,
                       "message has 10 routing frames; at most 8 may precede the envelope", 8);

    /* 8 routing frames in all is still fine */
    s_send_raw(p.dealer, frames + 3, lens + 3, 7);
    zf_route_t route;
    Zflow__Envelope *env = NULL;
    ASSERT_OK(zf_envelope_recv(p.router, WAIT_MS, &route, &env));
    assert_int_equal(route.n, 7);
    assert_memory_equal(route.frame[6], "hop", 3);
    zflow__envelope__free_unpacked(env, NULL);
    s_pair_close(&p);
}

static void test_oversized_routing_frame_is_rejected(void **state)
{
    (void)state;
    s_pair_t p;
    s_pair_open(&p);
    uint8_t big[300], buf[512];
    memset(big, 'r', sizeof big);
    const void *frames[2] = {big, buf};
    size_t lens[2] = {sizeof big, s_pack_heartbeat(buf, sizeof buf, 8, 1)};
    s_send_raw(p.dealer, frames, lens, 2);
    s_expect_rejection(&p, ZF_INVALID_ARGUMENT,
                       "routing frame 2 is 300 bytes; at most 256 are allowed", 1);
    s_pair_close(&p);
}

static void test_frames_over_the_size_limit_never_arrive(void **state)
{
    (void)state;
    zf_zctx_t *ctx = NULL;
    zf_socket_t *router = NULL, *dealer = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_ROUTER, &router));
    ASSERT_OK(zf_socket_set_max_frame_size(router, 1024));
    const char *ep = NULL;
    ASSERT_OK(zf_socket_bind(router, "tcp://127.0.0.1:*", &ep));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_DEALER, &dealer));
    ASSERT_OK(zf_socket_connect(dealer, ep));

    char name[4096];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    s_heartbeat_t m;
    Zflow__Envelope *big = s_heartbeat(&m, 1, 0);
    m.hb.device_name = name;
    ASSERT_OK(zf_envelope_send(dealer, NULL, big));
    zf_route_t route;
    Zflow__Envelope *env = NULL;
    zf_test_expect_error(zf_envelope_recv(router, IDLE_MS, &route, &env), ZF_DEADLINE_EXCEEDED,
                         "no message");
    /* the dealer reconnects by itself; a small message then gets through */
    ASSERT_OK(zf_envelope_send(dealer, NULL, s_heartbeat(&m, 2, 0)));
    ASSERT_OK(zf_envelope_recv(router, WAIT_MS, &route, &env));
    assert_int_equal(env->request_id, 2);
    zflow__envelope__free_unpacked(env, NULL);
    zf_socket_destroy(&dealer);
    zf_socket_destroy(&router);
    zf_zctx_destroy(&ctx);
}

static void test_decode_checks_raw_bytes_without_a_socket(void **state)
{
    (void)state;
    uint8_t buf[512];
    size_t len = s_pack_heartbeat(buf, sizeof buf, 12, 1);
    Zflow__Envelope *env = NULL;
    uint64_t id = 0;
    ASSERT_OK(zf_envelope_decode(buf, len, &env, &id));
    assert_int_equal(id, 12);
    assert_int_equal(env->heartbeat->load, 1);
    zflow__envelope__free_unpacked(env, NULL);
    zf_test_expect_error(zf_envelope_decode(buf, len - 1, &env, NULL), ZF_INVALID_ARGUMENT,
                         "malformed envelope");
    assert_null(env);
    len = s_pack_heartbeat(buf, sizeof buf, 13, 9);
    zf_test_expect_error(zf_envelope_decode(buf, len, &env, &id), ZF_FAILED_PRECONDITION,
                         "protocol version 9 is not supported (this side speaks 1)");
    assert_int_equal(id, 13);
}

/* A body packed apart goes out behind zf_envelope_frame's header as the
 * envelope packed whole would: it decodes to the same request id and body,
 * and its bytes are those of the whole envelope packed by protobuf-c (but
 * for a request id of 0, which protobuf-c leaves out). */
static void test_a_frame_around_a_packed_body_is_the_envelope_packed_whole(void **state)
{
    (void)state;
    char *targets[] = {"init", "more"};
    Zflow__SubmitJob sj = ZFLOW__SUBMIT_JOB__INIT;
    sj.steps = 300;
    sj.n_init_targets = 2;
    sj.init_targets = targets;
    Zflow__Envelope whole = ZFLOW__ENVELOPE__INIT;
    whole.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    whole.body_case = ZFLOW__ENVELOPE__BODY_SUBMIT_JOB;
    whole.submit_job = &sj;
    size_t len = zflow__submit_job__get_packed_size(&sj);
    uint8_t *body = malloc(len), *packed = NULL;
    assert_non_null(body);
    zflow__submit_job__pack(&sj, body);
    const uint64_t ids[3] = {0, 7, (UINT64_C(1) << 63) + 5};
    for (int k = 0; k < 3; k++) {
        whole.request_id = ids[k];
        size_t n = zflow__envelope__get_packed_size(&whole);
        assert_non_null(packed = realloc(packed, n));
        zflow__envelope__pack(&whole, packed);
        zmq_msg_t frame;
        zmq_msg_init(&frame);
        ASSERT_OK(zf_envelope_frame(&frame, ids[k], ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, body, len));
        if (ids[k]) {
            assert_int_equal(zmq_msg_size(&frame), n);
            assert_memory_equal(zmq_msg_data(&frame), packed, n);
        } else { /* protobuf-c leaves a 0 out; the header says it (0x10 0x00) */
            assert_int_equal(zmq_msg_size(&frame), n + 2);
            assert_memory_equal((uint8_t *)zmq_msg_data(&frame) + 2, "\x10\x00", 2);
        }
        n = zmq_msg_size(&frame);
        assert_true(n - len <= ZF_ENVELOPE_HEAD_MAX);
        Zflow__Envelope *env = NULL;
        ASSERT_OK(zf_envelope_decode(zmq_msg_data(&frame), n, &env, NULL));
        assert_true(env->request_id == ids[k]);
        assert_int_equal(env->submit_job->steps, 300);
        assert_string_equal(env->submit_job->init_targets[1], "more");
        zflow__envelope__free_unpacked(env, NULL);
        zmq_msg_close(&frame);
    }
    assert_string_equal(zf_envelope_case_name(ZFLOW__ENVELOPE__BODY_SUBMIT_JOB), "SubmitJob");
    assert_string_equal(zf_envelope_case_name(ZFLOW__ENVELOPE__BODY__NOT_SET),
                        "a message without a body");
    assert_string_equal(zf_envelope_case_name((Zflow__Envelope__BodyCase)1),
                        "a message without a body"); /* version, no body */
    free(packed);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bind_reports_the_ephemeral_tcp_port),
        cmocka_unit_test(test_bind_and_connect_reject_bad_endpoints),
        cmocka_unit_test(test_bind_to_a_port_in_use_is_unavailable),
        cmocka_unit_test(test_socket_options_are_checked),
        cmocka_unit_test(test_request_and_status_reply_round_trip_with_route_and_request_id),
        cmocka_unit_test(test_replies_match_requests_in_flight_by_request_id),
        cmocka_unit_test(test_inproc_pair_carries_envelopes),
        cmocka_unit_test(test_recv_times_out_with_deadline_exceeded),
        cmocka_unit_test(test_send_refuses_an_envelope_without_body),
        cmocka_unit_test(test_router_mandatory_reports_an_unknown_peer),
        cmocka_unit_test(test_routes_hold_at_most_8_frames_of_256_bytes),
        cmocka_unit_test(test_status_converts_to_and_from_proto),
        cmocka_unit_test(test_random_bytes_are_rejected_and_the_socket_keeps_working),
        cmocka_unit_test(test_truncated_envelope_is_rejected),
        cmocka_unit_test(test_wrong_version_is_refused_with_the_request_id_kept),
        cmocka_unit_test(test_envelope_without_body_is_rejected),
        cmocka_unit_test(test_too_many_routing_frames_are_rejected_and_drained),
        cmocka_unit_test(test_oversized_routing_frame_is_rejected),
        cmocka_unit_test(test_frames_over_the_size_limit_never_arrive),
        cmocka_unit_test(test_decode_checks_raw_bytes_without_a_socket),
        cmocka_unit_test(test_a_frame_around_a_packed_body_is_the_envelope_packed_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
