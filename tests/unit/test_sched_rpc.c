/* Tests for the scheduler's executor connections (scheduler/server/rpc.h): a
 * ROUTER on a 127.0.0.1 ephemeral port (or on many inproc endpoints) stands
 * in for executors' control endpoints; and the master's forget hook that
 * drives zf_sched_rpc_forget() (scheduler/master/master.h). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <zmq.h>

#include "scheduler/master/master.h"
#include "scheduler/server/rpc.h"
#include "test_util.h"

#define INBOX 8

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    Zflow__Envelope *replies[INBOX];
    int n;
} inbox_t;

static void s_on_reply(void *arg, Zflow__Envelope **reply)
{
    inbox_t *in = arg;
    pthread_mutex_lock(&in->mu);
    if (in->n < INBOX) {
        in->replies[in->n++] = *reply;
        *reply = NULL;
    }
    pthread_cond_broadcast(&in->cv);
    pthread_mutex_unlock(&in->mu);
}

static void s_inbox_init(inbox_t *in)
{
    memset(in, 0, sizeof *in);
    pthread_mutex_init(&in->mu, NULL);
    pthread_cond_init(&in->cv, NULL);
}

static void s_inbox_fini(inbox_t *in)
{
    for (int i = 0; i < in->n; i++) zflow__envelope__free_unpacked(in->replies[i], NULL);
    pthread_cond_destroy(&in->cv);
    pthread_mutex_destroy(&in->mu);
}

/* Waits up to 5 s for the inbox to hold n replies. */
static void s_wait_replies(inbox_t *in, int n)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 5;
    pthread_mutex_lock(&in->mu);
    while (in->n < n && pthread_cond_timedwait(&in->cv, &in->mu, &dl) == 0) {
    }
    int got = in->n;
    pthread_mutex_unlock(&in->mu);
    assert_int_equal(got, n);
}

/* Waits up to 5 s for a reply and takes the oldest (caller frees). */
static Zflow__Envelope *s_pop(inbox_t *in)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 5;
    pthread_mutex_lock(&in->mu);
    while (in->n == 0 && pthread_cond_timedwait(&in->cv, &in->mu, &dl) == 0) {
    }
    if (in->n == 0) {
        pthread_mutex_unlock(&in->mu);
        fail_msg("no reply within 5 s");
    }
    Zflow__Envelope *env = in->replies[0];
    memmove(in->replies, in->replies + 1, (size_t)(in->n - 1) * sizeof *in->replies);
    in->n--;
    pthread_mutex_unlock(&in->mu);
    return env;
}

/* Expects env (freed here) to be a StatusReply to request id with code and,
 * when text is not NULL, a message containing text. */
static void s_expect_reply(Zflow__Envelope *env, uint64_t id, zf_code_t code, const char *text)
{
    assert_int_equal(env->request_id, id);
    assert_int_equal(env->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    zf_status_t st = zf_status_from_proto(env->status_reply->status);
    if (code == ZF_OK)
        ASSERT_OK(st);
    else
        zf_test_expect_error(st, code, text);
    zflow__envelope__free_unpacked(env, NULL);
}

static Zflow__Envelope s_cleanup_env(uint64_t id, Zflow__CleanupGraph *body)
{
    zflow__cleanup_graph__init(body);
    body->step_id = 42;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = id;
    env.body_case = ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH;
    env.cleanup_graph = body;
    return env;
}

static void test_rpc_delivers_requests_and_hands_back_valid_replies_only(void **state)
{
    (void)state;
    inbox_t in;
    s_inbox_init(&in);
    zf_zctx_t *ctx = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    zf_socket_t *router = NULL;
    const char *endpoint = NULL;
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_ROUTER, &router));
    ASSERT_OK(zf_socket_bind(router, "tcp://127.0.0.1:*", &endpoint));
    char ep[128];
    snprintf(ep, sizeof ep, "%s", endpoint);
    zf_sched_rpc_t *rpc = NULL;
    ASSERT_OK(zf_sched_rpc_new(ctx, s_on_reply, &in, &rpc));
    zf_master_transport_t t = zf_sched_rpc_transport(rpc);

    Zflow__CleanupGraph body;
    Zflow__Envelope env = s_cleanup_env(7, &body);
    ASSERT_OK(t.send(t.arg, "/job:a/replica:0/task:0/device:CPU:0", ep, &env));
    zf_route_t route;
    Zflow__Envelope *got = NULL;
    ASSERT_OK(zf_envelope_recv(router, 5000, &route, &got));
    assert_int_equal(route.n, 1); /* the DEALER's identity */
    assert_int_equal(got->request_id, 7);
    assert_int_equal(got->body_case, ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH);
    assert_int_equal(got->cleanup_graph->step_id, 42);
    zflow__envelope__free_unpacked(got, NULL);

    /* garbage first: dropped; the valid reply after it still arrives */
    zmq_send(zf_socket_handle(router), route.frame[0], route.len[0], ZMQ_SNDMORE);
    zmq_send(zf_socket_handle(router), "\xff\xff\xff", 3, 0);
    zf_status_t st = zf_status_new(ZF_NOT_FOUND, "no such step");
    ASSERT_OK(zf_envelope_send_status(router, &route, 7, &st));
    zf_status_clear(&st);
    s_wait_replies(&in, 1);
    assert_int_equal(in.replies[0]->request_id, 7);
    assert_int_equal(in.replies[0]->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    zf_test_expect_error(zf_status_from_proto(in.replies[0]->status_reply->status), ZF_NOT_FOUND,
                         "no such step");

    /* an endpoint that cannot be connected to: answered UNAVAILABLE at once */
    Zflow__Envelope bad = s_cleanup_env(8, &body);
    ASSERT_OK(t.send(t.arg, "/job:a/replica:0/task:0/device:CPU:1", "bogus://x", &bad));
    s_wait_replies(&in, 2);
    assert_int_equal(in.replies[1]->request_id, 8);
    zf_test_expect_error(zf_status_from_proto(in.replies[1]->status_reply->status), ZF_UNAVAILABLE,
                         "cannot send to bogus://x");

    zf_sched_rpc_destroy(&rpc);
    assert_null(rpc);
    zf_sched_rpc_destroy(&rpc); /* NULL-safe */
    s_inbox_fini(&in);
    zf_route_clear(&route);
    zf_socket_destroy(&router);
    zf_zctx_destroy(&ctx);
}

/* ---- forgetting ------------------------------------------------------------------ */

/* Receives the next request on router within 5 s: its id, its sender in
 * *route. */
static uint64_t s_router_recv(zf_socket_t *router, zf_route_t *route)
{
    Zflow__Envelope *got = NULL;
    zf_route_clear(route);
    ASSERT_OK(zf_envelope_recv(router, 5000, route, &got));
    assert_int_equal(route->n, 1);
    uint64_t id = got->request_id;
    zflow__envelope__free_unpacked(got, NULL);
    return id;
}

static void s_router_answer_ok(zf_socket_t *router, const zf_route_t *route, uint64_t id)
{
    zf_status_t ok = ZF_STATUS_OK;
    ASSERT_OK(zf_envelope_send_status(router, route, id, &ok));
}

static void test_rpc_serves_more_endpoints_than_its_limit_when_each_is_forgotten(void **state)
{
    (void)state;
    inbox_t in;
    s_inbox_init(&in);
    zf_zctx_t *ctx = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    zf_socket_t *router = NULL; /* every executor at once, one endpoint each */
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_ROUTER, &router));
    zf_sched_rpc_t *rpc = NULL;
    ASSERT_OK(zf_sched_rpc_new(ctx, s_on_reply, &in, &rpc));
    zf_master_transport_t t = zf_sched_rpc_transport(rpc);
    Zflow__CleanupGraph body;
    /* more than the limit, and more than the sockets a context holds by
     * default (1023): only closed sockets make room */
    const int n = ZF_SCHED_RPC_MAX_PEERS + 100;
    for (int i = 0; i < n; i++) {
        char ep[64];
        snprintf(ep, sizeof ep, "inproc://sched-rpc-forget-%d", i);
        const char *bound = NULL;
        ASSERT_OK(zf_socket_bind(router, ep, &bound));
        Zflow__Envelope env = s_cleanup_env(1000 + (uint64_t)i, &body);
        ASSERT_OK(t.send(t.arg, "/job:a/replica:0/task:0/device:CPU:0", ep, &env));
        zf_route_t route;
        assert_int_equal(s_router_recv(router, &route), 1000 + (uint64_t)i);
        s_router_answer_ok(router, &route, 1000 + (uint64_t)i);
        s_expect_reply(s_pop(&in), 1000 + (uint64_t)i, ZF_OK, NULL); /* not RESOURCE_EXHAUSTED */
        ASSERT_OK(zf_sched_rpc_forget(rpc, ep));
    }
    ASSERT_OK(zf_sched_rpc_forget(rpc, "inproc://never-connected")); /* a no-op */
    zf_test_expect_error(zf_sched_rpc_forget(rpc, NULL), ZF_INVALID_ARGUMENT, "endpoint");
    zf_sched_rpc_destroy(&rpc);
    s_inbox_fini(&in);
    zf_socket_destroy(&router);
    zf_zctx_destroy(&ctx);
}

/* An rpc (polled or not) and one executor's ROUTER it talks to. */
typedef struct {
    inbox_t in;
    zf_zctx_t *ctx;
    zf_socket_t *router;
    char ep[128];
    zf_sched_rpc_t *rpc;
    zf_master_transport_t t;
} s_one_t;

static void s_one_open(s_one_t *o, bool polled)
{
    memset(o, 0, sizeof *o);
    s_inbox_init(&o->in);
    ASSERT_OK(zf_zctx_new(&o->ctx));
    const char *bound = NULL;
    ASSERT_OK(zf_socket_new(o->ctx, ZF_SOCKET_ROUTER, &o->router));
    ASSERT_OK(zf_socket_bind(o->router, "tcp://127.0.0.1:*", &bound));
    snprintf(o->ep, sizeof o->ep, "%s", bound);
    ASSERT_OK(polled ? zf_sched_rpc_new_polled(o->ctx, s_on_reply, &o->in, &o->rpc)
                     : zf_sched_rpc_new(o->ctx, s_on_reply, &o->in, &o->rpc));
    o->t = zf_sched_rpc_transport(o->rpc);
}

static void s_one_close(s_one_t *o)
{
    zf_sched_rpc_destroy(&o->rpc);
    s_inbox_fini(&o->in);
    zf_socket_destroy(&o->router);
    zf_zctx_destroy(&o->ctx);
}

static void test_rpc_answers_a_forgotten_endpoints_requests_and_connects_to_it_afresh(void **state)
{
    (void)state;
    s_one_t o;
    s_one_open(&o, false);
    const char *dev = "/job:a/replica:0/task:0/device:CPU:0";

    /* two requests reach the executor, which answers neither */
    Zflow__CleanupGraph body;
    Zflow__Envelope env = s_cleanup_env(7, &body);
    ASSERT_OK(o.t.send(o.t.arg, dev, o.ep, &env));
    env = s_cleanup_env(8, &body);
    ASSERT_OK(o.t.send(o.t.arg, dev, o.ep, &env));
    zf_route_t old, fresh;
    assert_int_equal(s_router_recv(o.router, &old), 7);
    assert_int_equal(s_router_recv(o.router, &old), 8);
    ASSERT_OK(zf_sched_rpc_forget(o.rpc, o.ep));
    char want[200];
    snprintf(want, sizeof want, "no reply from %s to request ", o.ep);
    s_wait_replies(&o.in, 2);
    Zflow__Envelope *a = s_pop(&o.in), *b = s_pop(&o.in);
    if (a->request_id == 8) { /* either order */
        Zflow__Envelope *x = a;
        a = b;
        b = x;
    }
    s_expect_reply(a, 7, ZF_UNAVAILABLE, want);
    s_expect_reply(b, 8, ZF_UNAVAILABLE, "the scheduler forgot that executor");

    /* the same endpoint again: a new connection, which works */
    env = s_cleanup_env(9, &body);
    ASSERT_OK(o.t.send(o.t.arg, dev, o.ep, &env));
    assert_int_equal(s_router_recv(o.router, &fresh), 9);
    assert_false(zf_route_equal(&old, &fresh));
    s_router_answer_ok(o.router, &fresh, 9);
    s_expect_reply(s_pop(&o.in), 9, ZF_OK, NULL);

    s_one_close(&o);
}

/* Polls a polled rpc on this thread until the inbox holds n replies (5 s
 * at most); returns the number of items it polled last. */
static int s_serve_until(zf_sched_rpc_t *rpc, inbox_t *in, int n)
{
    zmq_pollitem_t items[8];
    int k = 0;
    for (int round = 0; round < 50 && in->n < n; round++) {
        k = zf_sched_rpc_items(rpc, items, 8);
        if (zmq_poll(items, k, 100) > 0) zf_sched_rpc_serve(rpc, items, k);
    }
    assert_int_equal(in->n, n);
    return zf_sched_rpc_items(rpc, items, 8);
}

/* Polls until the rpc has `peers` connections (5 s at most). */
static void s_serve_until_peers(zf_sched_rpc_t *rpc, int peers)
{
    zmq_pollitem_t items[8];
    int k = zf_sched_rpc_items(rpc, items, 8);
    for (int round = 0; round < 50 && k != peers + 1; round++) {
        if (zmq_poll(items, k, 100) > 0) zf_sched_rpc_serve(rpc, items, k);
        k = zf_sched_rpc_items(rpc, items, 8);
    }
    assert_int_equal(k, peers + 1);
}

static void test_polled_rpc_forgets_in_order_with_the_owners_own_sends(void **state)
{
    (void)state;
    s_one_t o;
    s_one_open(&o, true);
    const char *dev = "/job:a/replica:0/task:0/device:CPU:0";
    zmq_pollitem_t items[8];
    assert_int_equal(zf_sched_rpc_items(o.rpc, items, 8), 1); /* this thread owns it: the pipe */

    Zflow__CleanupGraph body;
    Zflow__Envelope env = s_cleanup_env(1, &body);
    ASSERT_OK(o.t.send(o.t.arg, dev, o.ep, &env)); /* sent at once */
    assert_int_equal(zf_sched_rpc_items(o.rpc, items, 8), 2);
    zf_route_t old, fresh;
    assert_int_equal(s_router_recv(o.router, &old), 1);
    /* the forget waits for the owner's next serve; a send after it waits
     * behind it, so it goes out on a new connection rather than the one
     * being closed */
    ASSERT_OK(zf_sched_rpc_forget(o.rpc, o.ep));
    env = s_cleanup_env(2, &body);
    ASSERT_OK(o.t.send(o.t.arg, dev, o.ep, &env));
    assert_int_equal(o.in.n, 0);                         /* nothing answered inside those calls */
    assert_int_equal(s_serve_until(o.rpc, &o.in, 1), 2); /* one connection to the endpoint */
    char want[200];
    snprintf(want, sizeof want, "no reply from %s to request 1", o.ep);
    s_expect_reply(s_pop(&o.in), 1, ZF_UNAVAILABLE, want);
    assert_int_equal(s_router_recv(o.router, &fresh), 2);
    assert_false(zf_route_equal(&old, &fresh));
    s_router_answer_ok(o.router, &fresh, 2);
    assert_int_equal(s_serve_until(o.rpc, &o.in, 1), 2);
    s_expect_reply(s_pop(&o.in), 2, ZF_OK, NULL);
    ASSERT_OK(zf_sched_rpc_forget(o.rpc, o.ep));
    s_serve_until_peers(o.rpc, 0);
    assert_int_equal(o.in.n, 0); /* nothing was waiting */

    s_one_close(&o);
}

/* ---- the master's forget hook ------------------------------------------------------- */

typedef struct {
    char forgotten[8][64];
    int n;
} forgets_t;

static zf_status_t s_send_nothing(void *arg, const char *device, const char *endpoint,
                                  const Zflow__Envelope *env)
{
    (void)arg, (void)device, (void)endpoint, (void)env;
    return ZF_STATUS_OK;
}

static void s_forget(void *arg, const char *endpoint)
{
    forgets_t *f = arg;
    assert_true(f->n < 8);
    snprintf(f->forgotten[f->n++], sizeof f->forgotten[0], "%s", endpoint);
}

static void s_join(zf_master_t *m, int k, uint64_t incarnation, const char *endpoint)
{
    char name[64];
    snprintf(name, sizeof name, "/job:a/replica:0/task:0/device:CPU:%d", k);
    Tensorflow__DeviceAttributes a = TENSORFLOW__DEVICE_ATTRIBUTES__INIT;
    a.name = name;
    a.device_type = "CPU";
    a.incarnation = incarnation;
    Zflow__ExecutorInfo info = ZFLOW__EXECUTOR_INFO__INIT;
    info.device = &a;
    info.control_endpoint = (char *)endpoint;
    ASSERT_OK(zf_master_device_joined(m, &info));
}

static void test_master_forgets_an_endpoint_once_no_live_device_uses_it(void **state)
{
    (void)state;
    forgets_t f = {.n = 0};
    zf_master_transport_t t = {s_send_nothing, &f};
    zf_master_options_t o = {.forget = s_forget};
    zf_master_t *m = NULL;
    ASSERT_OK(zf_master_new(&t, &o, &m));
    s_join(m, 0, 1, "tcp://h:1");
    s_join(m, 1, 1, "tcp://h:2");
    s_join(m, 2, 1, "tcp://h:2"); /* two devices behind one endpoint */
    zf_master_device_died(m, "/job:a/replica:0/task:0/device:CPU:0", "test");
    assert_int_equal(f.n, 1);
    assert_string_equal(f.forgotten[0], "tcp://h:1");
    zf_master_device_died(m, "/job:a/replica:0/task:0/device:CPU:1", "test");
    assert_int_equal(f.n, 1);     /* CPU:2 still uses tcp://h:2 */
    s_join(m, 2, 1, "tcp://h:3"); /* the same incarnation moved */
    assert_int_equal(f.n, 2);
    assert_string_equal(f.forgotten[1], "tcp://h:2");
    s_join(m, 2, 2, "tcp://h:3"); /* restarted at the same endpoint: a fresh connection */
    assert_int_equal(f.n, 3);
    assert_string_equal(f.forgotten[2], "tcp://h:3");
    zf_master_device_died(m, "/job:a/replica:0/task:0/device:CPU:9", "test"); /* unknown */
    zf_master_drop_devices(m, "stopping");
    assert_int_equal(f.n, 4);
    assert_string_equal(f.forgotten[3], "tcp://h:3");
    assert_int_equal(zf_master_num_devices(m), 0);
    zf_master_destroy(&m);

    zf_master_options_t none = {.forget = NULL}; /* no hook: nothing to call */
    ASSERT_OK(zf_master_new(&t, &none, &m));
    s_join(m, 0, 1, "tcp://h:1");
    zf_master_device_died(m, "/job:a/replica:0/task:0/device:CPU:0", "test");
    assert_int_equal(zf_master_num_devices(m), 0);
    zf_master_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_delivers_requests_and_hands_back_valid_replies_only),
        cmocka_unit_test(test_rpc_serves_more_endpoints_than_its_limit_when_each_is_forgotten),
        cmocka_unit_test(test_rpc_answers_a_forgotten_endpoints_requests_and_connects_to_it_afresh),
        cmocka_unit_test(test_polled_rpc_forgets_in_order_with_the_owners_own_sends),
        cmocka_unit_test(test_master_forgets_an_endpoint_once_no_live_device_uses_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
