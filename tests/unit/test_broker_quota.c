/* Tests for the broker's limits on requests in flight, one client's and all
 * clients' together: the real zflow-broker with --max-client-requests and
 * --max-requests, played against over DEALER sockets (a scheduler that
 * answers when told, and clients), and an in-process broker
 * (broker/broker.h) whose counts show that the requests of a client that
 * left, or of a scheduler that died, are let go. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "broker/broker.h"
#include "broker/pending.h"
#include "broker_test_util.h"
#include "test_util.h"

#define WAIT_MS 5000

/* The refusal of a client at its limit of `max` with `n` in flight. */
static void s_refusal(char *buf, size_t size, int n, int max)
{
    snprintf(buf, size,
             "run_step refused: this client already has %d requests in flight through the "
             "broker, the most one client may have (--max-client-requests %d); send more once "
             "replies come back",
             n, max);
}

/* The refusal of a request past the broker-wide limit `max` with `n` in
 * flight. */
static void s_broker_refusal(char *buf, size_t size, int n, int max)
{
    snprintf(buf, size,
             "run_step refused: the broker already has %d requests in flight from all its clients "
             "together, its broker-wide limit (--max-requests %d); send more once replies come "
             "back",
             n, max);
}

static void s_run_step(zf_socket_t *client, uint64_t id)
{
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    rs.session = "session-1";
    zf_test_send_body(client, id, ZFLOW__ENVELOPE__BODY_RUN_STEP, &rs);
}

static void s_register_scheduler(zf_socket_t *s, const char *sid)
{
    Zflow__RegisterScheduler req = ZFLOW__REGISTER_SCHEDULER__INIT;
    req.scheduler_id = (char *)sid;
    req.client_endpoint = "tcp://127.0.0.1:1";
    zf_test_send_body(s, 1, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER, &req);
}

/* Registers s as a scheduler and reads the broker's reply. */
static void s_register_with_reply(zf_socket_t *s)
{
    s_register_scheduler(s, "aaaa0001");
    Zflow__Envelope *rep = zf_test_recv(s, WAIT_MS, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER_REPLY);
    zflow__envelope__free_unpacked(rep, NULL);
}

/* A request the scheduler got: its request id, and its client's route. */
static uint64_t s_take(zf_socket_t *sched, zf_route_t *route)
{
    Zflow__Envelope *req = zf_test_recv(sched, WAIT_MS, route);
    assert_non_null(req);
    assert_int_equal(route->n, 1);
    assert_int_equal(req->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP);
    uint64_t id = req->request_id;
    zflow__envelope__free_unpacked(req, NULL);
    return id;
}

/* The scheduler answers request id of the client at route with OK. */
static void s_answer(zf_socket_t *sched, const zf_route_t *route, uint64_t id)
{
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = id;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY;
    Zflow__RunStepReply r = ZFLOW__RUN_STEP_REPLY__INIT;
    env.run_step_reply = &r;
    zf_test_send(sched, route->frame[0], route->len[0], &env);
}

static void s_expect_step_reply(zf_socket_t *client, uint64_t id)
{
    Zflow__Envelope *rep = zf_test_recv(client, WAIT_MS, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, id);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    zflow__envelope__free_unpacked(rep, NULL);
}

/* ---- the real program ----------------------------------------------------------- */

#define N_SOCKS 4

typedef struct {
    zf_test_broker_t tb;
    zf_zctx_t *ctx;
    zf_socket_t *socks[N_SOCKS]; /* a scheduler and three clients */
} process_t;

/* The broker runs from setup to teardown, so that a test failing half-way
 * leaves nothing running. */
static int s_start_process(void **state, const char *const *args)
{
    process_t *p = calloc(1, sizeof *p);
    assert_non_null(p);
    *state = p;
    zf_test_broker_start(&p->tb, args);
    ASSERT_OK(zf_zctx_new(&p->ctx));
    for (int i = 0; i < N_SOCKS; i++) p->socks[i] = zf_test_dealer(p->ctx, p->tb.endpoint);
    return 0;
}

static int s_setup_process(void **state)
{
    const char *args[] = {"--max-client-requests", "3", NULL};
    return s_start_process(state, args);
}

static int s_setup_process_broker_limit(void **state)
{
    const char *args[] = {"--max-client-requests", "2", "--max-requests", "3", NULL};
    return s_start_process(state, args);
}

static int s_teardown_process(void **state)
{
    process_t *p = *state;
    for (int i = 0; i < N_SOCKS; i++) zf_socket_destroy(&p->socks[i]);
    zf_zctx_destroy(&p->ctx);
    int rc = zf_test_broker_stop(&p->tb, SIGTERM); /* a clean exit checks its leaks */
    free(p);
    return rc == 0 ? 0 : -1;
}

static void test_broker_refuses_a_client_past_its_limit_and_serves_everyone_else(void **state)
{
    process_t *p = *state;
    zf_socket_t *sched = p->socks[0], *a = p->socks[1], *b = p->socks[2];
    s_register_with_reply(sched);

    zf_route_t ra[3], rb;
    for (uint64_t id = 1; id <= 3; id++) s_run_step(a, id); /* the limit itself passes */
    for (uint64_t id = 1; id <= 3; id++) assert_int_equal(s_take(sched, &ra[id - 1]), id);
    s_run_step(a, 4);
    char want[512];
    s_refusal(want, sizeof want, 3, 3);
    zf_test_expect_status(a, 4, ZF_RESOURCE_EXHAUSTED, want);
    assert_null(zf_test_recv(sched, 200, NULL)); /* the refused one went nowhere */

    s_run_step(b, 10); /* another client is not held back */
    assert_int_equal(s_take(sched, &rb), 10);
    s_answer(sched, &rb, 10);
    s_expect_step_reply(b, 10);

    s_answer(sched, &ra[1], 2); /* a's earlier requests are still answered */
    s_expect_step_reply(a, 2);
    s_run_step(a, 5); /* and with one answered, a may send one more */
    zf_route_t r5;
    assert_int_equal(s_take(sched, &r5), 5);
    s_run_step(a, 6);
    zf_test_expect_status(a, 6, ZF_RESOURCE_EXHAUSTED, want);
    s_answer(sched, &ra[0], 1);
    s_answer(sched, &ra[2], 3);
    s_answer(sched, &r5, 5);
    s_expect_step_reply(a, 1);
    s_expect_step_reply(a, 3);
    s_expect_step_reply(a, 5);
    for (uint64_t id = 7; id <= 9; id++) s_run_step(a, id); /* all answered: three again */
    for (uint64_t id = 7; id <= 9; id++) assert_int_equal(s_take(sched, &ra[id - 7]), id);
}

static void
test_broker_refuses_any_client_past_the_broker_wide_limit_until_replies_come(void **state)
{
    process_t *p = *state;
    zf_socket_t *sched = p->socks[0], *a = p->socks[1], *b = p->socks[2], *c = p->socks[3];
    s_register_with_reply(sched);

    zf_route_t ra[2], rb, rc;
    s_run_step(a, 1); /* a: 2, its own limit; b: 1; 3 in all, the broker's limit */
    s_run_step(a, 2);
    assert_int_equal(s_take(sched, &ra[0]), 1);
    assert_int_equal(s_take(sched, &ra[1]), 2);
    s_run_step(b, 10);
    assert_int_equal(s_take(sched, &rb), 10);

    char global[512], own[512];
    s_broker_refusal(global, sizeof global, 3, 3);
    s_refusal(own, sizeof own, 2, 2);
    s_run_step(c, 20); /* a client with nothing in flight */
    zf_test_expect_status(c, 20, ZF_RESOURCE_EXHAUSTED, global);
    s_run_step(b, 11); /* one under its own limit */
    zf_test_expect_status(b, 11, ZF_RESOURCE_EXHAUSTED, global);
    s_run_step(a, 3); /* at its own limit: that refusal names the client's */
    zf_test_expect_status(a, 3, ZF_RESOURCE_EXHAUSTED, own);
    assert_null(zf_test_recv(sched, 200, NULL)); /* the refused ones went nowhere */

    s_answer(sched, &rb, 10); /* one answered: room for one more, from anyone */
    s_expect_step_reply(b, 10);
    s_run_step(c, 21);
    assert_int_equal(s_take(sched, &rc), 21);
    s_run_step(b, 12);
    zf_test_expect_status(b, 12, ZF_RESOURCE_EXHAUSTED, global);

    s_answer(sched, &ra[0], 1); /* all answered: three again, from all three */
    s_answer(sched, &ra[1], 2);
    s_answer(sched, &rc, 21);
    s_expect_step_reply(a, 1);
    s_expect_step_reply(a, 2);
    s_expect_step_reply(c, 21);
    s_run_step(a, 4);
    s_run_step(b, 13);
    s_run_step(c, 22);
    uint64_t seen = 0;
    for (int k = 0; k < 3; k++) {
        zf_route_t r;
        uint64_t id = s_take(sched, &r);
        assert_true(id == 4 || id == 13 || id == 22);
        seen |= (uint64_t)1 << id;
    }
    assert_int_equal(seen, ((uint64_t)1 << 4) | ((uint64_t)1 << 13) | ((uint64_t)1 << 22));
}

/* Runs zflow-broker with args, stderr folded in; returns its exit code. */
static int s_broker_cmd(const char *args, char *out, size_t size)
{
    return zf_test_run_program(ZF_BIN_DIR "/zflow-broker", args, out, size);
}

static void test_broker_refuses_a_bad_max_client_requests_and_lists_it_in_help(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(s_broker_cmd("--max-client-requests 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "zflow-broker: --max-client-requests must be a whole number from "
                                "1 to 2147483, not '0'"));
    assert_int_equal(s_broker_cmd("--max-client-requests many", out, sizeof out), 2);
    assert_non_null(strstr(out, "not 'many'"));
    assert_int_equal(s_broker_cmd("--help", out, sizeof out), 0);
    assert_non_null(strstr(out, "[--max-client-requests N]"));
    assert_non_null(strstr(out, "--max-client-requests N requests one client may have in flight"));
    assert_non_null(strstr(out, "(default 4096)"));
}

static void test_broker_refuses_a_bad_max_requests_and_lists_it_in_help(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(s_broker_cmd("--max-requests 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "zflow-broker: --max-requests must be a whole number from 1 to "
                                "2147483, not '0'"));
    assert_int_equal(s_broker_cmd("--max-requests -5", out, sizeof out), 2);
    assert_non_null(strstr(out, "not '-5'"));
    assert_int_equal(s_broker_cmd("--help", out, sizeof out), 0);
    assert_non_null(strstr(out, "[--max-requests N]"));
    assert_non_null(strstr(out, "--max-requests N        requests all clients together may have"));
    assert_non_null(strstr(out, "(default 65536)"));
    assert_non_null(strstr(out, "broker-wide limit"));
}

/* ---- an in-process broker ------------------------------------------------------- */

typedef struct {
    zf_broker_t *broker;
    zf_zctx_t *ctx;
    zf_socket_t *sched, *a, *b;
} fixture_t;

/* Serves the broker until s has a message or WAIT_MS pass; that message
 * (NULL after the wait), with its route into *route when not NULL. */
static Zflow__Envelope *s_serve_until(fixture_t *f, zf_socket_t *s, zf_route_t *route)
{
    for (int64_t end = zf_test_now_ms() + WAIT_MS; zf_test_now_ms() < end;) {
        ASSERT_OK(zf_broker_poll(f->broker, 10));
        Zflow__Envelope *env = zf_test_recv(s, 0, route);
        if (env) return env;
    }
    return NULL;
}

/* Serves the broker for 200 ms; whatever s got meanwhile (NULL: nothing). */
static Zflow__Envelope *s_serve_until_quiet(fixture_t *f, zf_socket_t *s)
{
    for (int64_t end = zf_test_now_ms() + 200; zf_test_now_ms() < end;) {
        ASSERT_OK(zf_broker_poll(f->broker, 10));
        Zflow__Envelope *env = zf_test_recv(s, 0, NULL);
        if (env) return env;
    }
    return NULL;
}

/* Serves the broker until s gets a StatusReply, which must answer
 * request id with code and a message containing text. */
static void s_expect_served_status(fixture_t *f, zf_socket_t *s, uint64_t id, int code,
                                   const char *text)
{
    Zflow__Envelope *rep = s_serve_until(f, s, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, id);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    assert_int_equal(rep->status_reply->status->code, code);
    if (!strstr(rep->status_reply->status->message, text))
        fail_msg("'%s' does not contain '%s'", rep->status_reply->status->message, text);
    zflow__envelope__free_unpacked(rep, NULL);
}

/* Serves the broker until it has n clients with requests in flight. */
static void s_serve_until_clients(fixture_t *f, int n)
{
    for (int64_t end = zf_test_now_ms() + WAIT_MS;
         zf_broker_num_clients(f->broker) != n && zf_test_now_ms() < end;)
        ASSERT_OK(zf_broker_poll(f->broker, 10));
    assert_int_equal(zf_broker_num_clients(f->broker), n);
}

/* An in-process broker with these limits (0: the default), a scheduler
 * registered with it and clients a and b. */
static int s_start(void **state, int max_client_requests, int max_requests)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    *state = f;
    zf_broker_config_t cfg = {
        "tcp://127.0.0.1:0", 1000, 3, max_client_requests, max_requests, NULL, NULL, 0, 0, 0, 0};
    ASSERT_OK(zf_broker_new(&cfg, &f->broker));
    ASSERT_OK(zf_zctx_new(&f->ctx));
    const char *ep = zf_broker_endpoint(f->broker);
    f->sched = zf_test_dealer(f->ctx, ep);
    f->a = zf_test_dealer(f->ctx, ep);
    f->b = zf_test_dealer(f->ctx, ep);
    s_register_scheduler(f->sched, "aaaa0001");
    Zflow__Envelope *rep = s_serve_until(f, f->sched, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER_REPLY);
    zflow__envelope__free_unpacked(rep, NULL);
    return 0;
}

static int s_setup(void **state)
{
    return s_start(state, 2, 0);
}

static int s_setup_broker_limit(void **state)
{
    return s_start(state, 3, 4);
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    zf_socket_destroy(&f->sched);
    zf_socket_destroy(&f->a);
    zf_socket_destroy(&f->b);
    zf_zctx_destroy(&f->ctx);
    zf_broker_destroy(&f->broker);
    assert_null(f->broker);
    free(f);
    return 0;
}

/* a and b each send two RunSteps (ids 1, 2 and 11, 12), which reach the
 * scheduler; their routes into ra and rb. */
static void s_fill(fixture_t *f, zf_route_t ra[2], zf_route_t rb[2])
{
    for (uint64_t k = 0; k < 2; k++) {
        s_run_step(f->a, 1 + k);
        s_run_step(f->b, 11 + k);
    }
    for (int n = 0, na = 0, nb = 0; n < 4; n++) {
        zf_route_t r;
        Zflow__Envelope *req = s_serve_until(f, f->sched, &r);
        assert_non_null(req);
        if (req->request_id < 10)
            ra[na++] = r;
        else
            rb[nb++] = r;
        zflow__envelope__free_unpacked(req, NULL);
    }
    assert_int_equal(zf_broker_num_outstanding(f->broker), 4);
    assert_int_equal(zf_broker_num_clients(f->broker), 2);
}

static void test_broker_forgets_the_requests_of_a_client_that_disconnects(void **state)
{
    fixture_t *f = *state;
    zf_route_t ra[2], rb[2];
    s_fill(f, ra, rb);
    zf_socket_destroy(&f->a);
    s_serve_until_clients(f, 1);
    assert_int_equal(zf_broker_num_outstanding(f->broker), 2); /* b's */
    s_answer(f->sched, &ra[0], 1);                             /* late: dropped */
    s_answer(f->sched, &rb[0], 11);
    Zflow__Envelope *rep = s_serve_until(f, f->b, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, 11);
    zflow__envelope__free_unpacked(rep, NULL);
    assert_int_equal(zf_broker_num_outstanding(f->broker), 1);
    assert_int_equal(zf_broker_num_clients(f->broker), 1);
    s_run_step(f->b, 13); /* b had room for one more, and has none now */
    s_run_step(f->b, 14);
    char want[512];
    s_refusal(want, sizeof want, 2, 2);
    s_expect_served_status(f, f->b, 14, ZF_RESOURCE_EXHAUSTED, want);
    assert_int_equal(zf_broker_num_outstanding(f->broker), 2);
}

static void test_broker_lets_go_of_the_requests_of_a_scheduler_that_dies(void **state)
{
    fixture_t *f = *state;
    zf_route_t ra[2], rb[2];
    s_fill(f, ra, rb);
    zf_socket_destroy(&f->sched);
    s_serve_until_clients(f, 0);
    assert_int_equal(zf_broker_num_outstanding(f->broker), 0);
    assert_int_equal(zf_broker_num_schedulers(f->broker), 0);
    uint64_t seen = 0; /* each answered UNAVAILABLE, in some order */
    for (int k = 0; k < 2; k++) {
        Zflow__Envelope *rep = zf_test_recv(f->a, WAIT_MS, NULL);
        assert_non_null(rep);
        assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
        assert_int_equal(rep->status_reply->status->code, ZF_UNAVAILABLE);
        assert_non_null(strstr(rep->status_reply->status->message,
                               "the scheduler serving this request is gone"));
        seen |= (uint64_t)1 << rep->request_id;
        zflow__envelope__free_unpacked(rep, NULL);
    }
    assert_int_equal(seen, (1u << 1) | (1u << 2));
    s_run_step(f->a, 3); /* with no scheduler: answered at once, and not counted */
    s_expect_served_status(f, f->a, 3, ZF_UNAVAILABLE, "no scheduler is registered");
    assert_int_equal(zf_broker_num_clients(f->broker), 0);
}

/* Serves the broker until the scheduler has n more requests; their ids. */
static uint64_t s_serve_requests(fixture_t *f, int n)
{
    uint64_t seen = 0;
    for (int k = 0; k < n; k++) {
        Zflow__Envelope *req = s_serve_until(f, f->sched, NULL);
        assert_non_null(req);
        assert_true(req->request_id < 64);
        seen |= (uint64_t)1 << req->request_id;
        zflow__envelope__free_unpacked(req, NULL);
    }
    return seen;
}

static void test_broker_frees_broker_wide_room_when_a_client_disconnects(void **state)
{
    fixture_t *f = *state;
    for (uint64_t id = 1; id <= 3; id++) s_run_step(f->a, id);
    s_run_step(f->b, 11);
    assert_int_equal(s_serve_requests(f, 4), (1u << 1) | (1u << 2) | (1u << 3) | (1u << 11));
    assert_int_equal(zf_broker_num_outstanding(f->broker), 4);

    char want[512];
    s_broker_refusal(want, sizeof want, 4, 4);
    s_run_step(f->b, 12); /* b has one of its three: the broker's limit holds it back */
    s_expect_served_status(f, f->b, 12, ZF_RESOURCE_EXHAUSTED, want);
    assert_int_equal(zf_broker_num_outstanding(f->broker), 4);

    zf_socket_destroy(&f->a); /* a's three no longer count */
    s_serve_until_clients(f, 1);
    assert_int_equal(zf_broker_num_outstanding(f->broker), 1);
    s_run_step(f->b, 12);
    s_run_step(f->b, 13);
    assert_int_equal(s_serve_requests(f, 2), (1u << 12) | (1u << 13));
    assert_int_equal(zf_broker_num_outstanding(f->broker), 3);
    s_run_step(f->b, 14); /* now b's own limit is the one reached */
    s_refusal(want, sizeof want, 3, 3);
    s_expect_served_status(f, f->b, 14, ZF_RESOURCE_EXHAUSTED, want);
}

/* A client may reuse a request id while the first is in flight; each
 * reply goes back once, and then nothing is left in flight. */
static void test_broker_passes_back_each_reply_to_a_reused_request_id(void **state)
{
    fixture_t *f = *state;
    s_run_step(f->a, 7);
    s_run_step(f->a, 7);
    zf_route_t r[2];
    for (int k = 0; k < 2; k++) {
        Zflow__Envelope *req = s_serve_until(f, f->sched, &r[k]);
        assert_non_null(req);
        assert_int_equal(req->request_id, 7);
        zflow__envelope__free_unpacked(req, NULL);
    }
    assert_int_equal(zf_broker_num_outstanding(f->broker), 2);
    for (int k = 0; k < 2; k++) {
        s_answer(f->sched, &r[k], 7);
        Zflow__Envelope *rep = s_serve_until(f, f->a, NULL);
        assert_non_null(rep);
        assert_int_equal(rep->request_id, 7);
        assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
        zflow__envelope__free_unpacked(rep, NULL);
        assert_int_equal(zf_broker_num_outstanding(f->broker), 1 - k);
    }
    s_answer(f->sched, &r[0], 7); /* a third reply: nobody waits for it */
    assert_null(s_serve_until_quiet(f, f->a));
    assert_int_equal(zf_broker_num_clients(f->broker), 0);
}

static void test_broker_refuses_a_negative_client_limit(void **state)
{
    (void)state;
    zf_broker_config_t cfg = {"tcp://127.0.0.1:0", 1000, 3, -1, 0, NULL, NULL, 0, 0, 0, 0};
    zf_broker_t *b = NULL;
    zf_test_expect_error(zf_broker_new(&cfg, &b), ZF_INVALID_ARGUMENT,
                         "a client's requests in flight must be limited to 1 or more (0: the "
                         "default, 4096), not -1");
    assert_null(b);
}

static void test_broker_refuses_a_negative_or_too_large_broker_wide_limit(void **state)
{
    (void)state;
    int bad[2] = {-1, ZF_PENDING_MAX + 1};
    for (int i = 0; i < 2; i++) {
        zf_broker_config_t cfg = {"tcp://127.0.0.1:0", 1000, 3, 0, bad[i], NULL, NULL, 0, 0, 0, 0};
        zf_broker_t *b = NULL;
        char want[200];
        snprintf(want, sizeof want,
                 "the broker's requests in flight from all clients must be limited to 1 to %d "
                 "(0: the default, 65536), not %d",
                 ZF_PENDING_MAX, bad[i]);
        zf_test_expect_error(zf_broker_new(&cfg, &b), ZF_INVALID_ARGUMENT, want);
        assert_null(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_broker_refuses_a_client_past_its_limit_and_serves_everyone_else, s_setup_process,
            s_teardown_process),
        cmocka_unit_test(test_broker_refuses_a_bad_max_client_requests_and_lists_it_in_help),
        cmocka_unit_test_setup_teardown(
            test_broker_forgets_the_requests_of_a_client_that_disconnects, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_broker_lets_go_of_the_requests_of_a_scheduler_that_dies, s_setup, s_teardown),
        cmocka_unit_test(test_broker_refuses_a_negative_client_limit),
        cmocka_unit_test_setup_teardown(
            test_broker_refuses_any_client_past_the_broker_wide_limit_until_replies_come,
            s_setup_process_broker_limit, s_teardown_process),
        cmocka_unit_test(test_broker_refuses_a_bad_max_requests_and_lists_it_in_help),
        cmocka_unit_test_setup_teardown(
            test_broker_frees_broker_wide_room_when_a_client_disconnects, s_setup_broker_limit,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_broker_passes_back_each_reply_to_a_reused_request_id,
                                        s_setup, s_teardown),
        cmocka_unit_test(test_broker_refuses_a_negative_or_too_large_broker_wide_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
