/* The broker keeps answering while a large message passes through it: the
 * real zflow-broker and zflow-scheduler on 127.0.0.1 ephemeral ports, one
 * client sending a SubmitJob of about 115 MB (1.8 million nodes) and another
 * pinging the broker meanwhile. The pings must be answered while the big
 * job is on its way, before its SubmitJobReply comes back, and none may
 * wait for the broker to take the big message apart. A large request that
 * is malformed past its header still gets its answer, from the scheduler
 * that decodes it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>
#include <cmocka.h>

#include "broker_test_util.h"
#include "service_test_util.h"
#include "test_util.h"

#define WAIT_MS  60000
#define NODES    1800000
#define PING_MS  20
#define NAME_FMT "n%07d"

/* Appends varint v at p; returns the bytes written. */
static size_t s_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p[n++] = b | (v ? 0x80 : 0);
    } while (v);
    return n;
}

/* Appends field `field`, length-delimited, of `len` bytes at `data` (or
 * only the key and length when data is NULL). */
static size_t s_field(uint8_t *p, uint32_t field, const void *data, size_t len)
{
    size_t n = s_varint(p, (uint64_t)field << 3 | 2);
    n += s_varint(p + n, len);
    if (data) memcpy(p + n, data, len);
    return n + (data ? len : 0);
}

/* A packed Envelope{version 1, request_id, SubmitJob{CreateSession{graph
 * of NODES Const nodes}, RunStep{fetch n0000000}}}, built from one packed
 * node renamed NODES times; *len_out its size. */
static uint8_t *s_big_submit(uint64_t request_id, size_t *len_out)
{
    Tensorflow__NodeDef node = TENSORFLOW__NODE_DEF__INIT;
    char name[16];
    snprintf(name, sizeof name, NAME_FMT, 0);
    node.name = name;
    node.op = "NoOp";
    node.device = "/job:localhost/replica:0/task:0/device:CPU:0";
    size_t node_len = tensorflow__node_def__get_packed_size(&node);
    uint8_t *one = malloc(node_len);
    assert_non_null(one);
    tensorflow__node_def__pack(&node, one);
    size_t name_off = 0;
    while (name_off + strlen(name) <= node_len && memcmp(one + name_off, name, strlen(name)) != 0)
        name_off++;
    assert_true(name_off + strlen(name) <= node_len);

    uint8_t hdr[16];
    size_t node_field = s_field(hdr, 1, NULL, node_len) + node_len;
    size_t graph_len = node_field * NODES;
    Zflow__RunStep step = ZFLOW__RUN_STEP__INIT;
    char *fetches[1] = {name};
    step.n_fetches = 1;
    step.fetches = fetches;
    size_t step_len = zflow__run_step__get_packed_size(&step);
    size_t cap = graph_len + step_len + 64;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    size_t n = 0;
    buf[n++] = 0x08; /* version */
    buf[n++] = 0x01;
    buf[n++] = 0x10; /* request_id */
    n += s_varint(buf + n, request_id);
    size_t create_len = s_varint(hdr, 1 << 3 | 2) + s_varint(hdr, graph_len) + graph_len;
    size_t submit_len = s_varint(hdr, 1 << 3 | 2) + s_varint(hdr, create_len) + create_len +
                        s_varint(hdr, 2 << 3 | 2) + s_varint(hdr, step_len) + step_len;
    n += s_field(buf + n, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, NULL, submit_len);
    n += s_field(buf + n, 1, NULL, create_len); /* SubmitJob.session */
    n += s_field(buf + n, 1, NULL, graph_len);  /* CreateSession.graph */
    for (int k = 0; k < NODES; k++) {
        n += s_field(buf + n, 1, one, node_len); /* GraphDef.node */
        char digits[16];
        snprintf(digits, sizeof digits, NAME_FMT, k);
        memcpy(buf + n - node_len + name_off, digits, strlen(digits));
    }
    n += s_field(buf + n, 2, NULL, step_len); /* SubmitJob.step */
    n += zflow__run_step__pack(&step, buf + n);
    assert_true(n <= cap);
    free(one);
    *len_out = n;
    return buf;
}

static void s_ping(zf_socket_t *s, uint64_t id)
{
    Zflow__Ping ping = ZFLOW__PING__INIT;
    zf_test_send_body(s, id, ZFLOW__ENVELOPE__BODY_PING, &ping);
}

static void test_broker_answers_pings_while_a_large_submit_job_passes(void **state)
{
    (void)state;
    zf_test_broker_t tb;
    zf_test_broker_start(&tb, NULL);
    zf_test_child_t sched;
    const char *args[] = {"--max-graph-nodes", "1000", NULL};
    zf_test_scheduler_start(&sched, tb.endpoint, args, 10000);
    zf_zctx_t *ctx = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    zf_socket_t *big = zf_test_dealer(ctx, tb.endpoint), *pinger = zf_test_dealer(ctx, tb.endpoint);
    s_ping(pinger, 1); /* both connected before the clock starts */
    zf_test_expect_status(pinger, 1, ZF_OK, NULL);
    s_ping(big, 2);
    zf_test_expect_status(big, 2, ZF_OK, NULL);

    size_t len = 0;
    uint8_t *msg = s_big_submit(7, &len);
    assert_true(len > (size_t)100 << 20);
    int64_t t0 = zf_test_now_ms();
    assert_int_equal(zmq_send(zf_socket_handle(big), msg, len, 0), (int)len);
    free(msg);

    /* ping every PING_MS until the job's answer; the longest wait for a
     * ping's answer meanwhile, and how many were answered before it */
    uint64_t next_id = 100, waiting = 0;
    int64_t sent_at = 0, longest = 0, acked_at = -1;
    int answered = 0;
    Zflow__Envelope *ack = NULL;
    while (!ack && zf_test_now_ms() - t0 < WAIT_MS) {
        int64_t now = zf_test_now_ms();
        if (!waiting && now - sent_at >= PING_MS) {
            waiting = next_id++;
            sent_at = now;
            s_ping(pinger, waiting);
        }
        zmq_pollitem_t items[2] = {{zf_socket_handle(pinger), 0, ZMQ_POLLIN, 0},
                                   {zf_socket_handle(big), 0, ZMQ_POLLIN, 0}};
        assert_true(zmq_poll(items, 2, PING_MS) >= 0);
        if (items[0].revents & ZMQ_POLLIN) {
            Zflow__Envelope *rep = zf_test_recv(pinger, 0, NULL);
            assert_non_null(rep);
            assert_int_equal(rep->request_id, waiting);
            int64_t waited = zf_test_now_ms() - sent_at;
            if (waited > longest) longest = waited;
            answered++;
            waiting = 0;
            zflow__envelope__free_unpacked(rep, NULL);
        }
        if (items[1].revents & ZMQ_POLLIN) {
            ack = zf_test_recv(big, 0, NULL);
            acked_at = zf_test_now_ms();
        }
    }
    assert_non_null(ack);
    /* the scheduler got it whole and measured it */
    assert_int_equal(ack->body_case, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY);
    assert_int_equal(ack->request_id, 7);
    zf_status_t st = zf_status_from_proto(ack->submit_job_reply->status);
    zf_test_expect_error(st, ZF_RESOURCE_EXHAUSTED,
                         "the graph has 1800000 nodes; this scheduler takes at most 1000 "
                         "(zflow-scheduler --max-graph-nodes)");
    zflow__envelope__free_unpacked(ack, NULL);
    print_message("pings answered before the %zu-byte SubmitJob's reply (%" PRId64
                  " ms): %d, the longest %" PRId64 " ms\n",
                  len, acked_at - t0, answered, longest);
    assert_true(answered >= 1);
    /* generous: a broker that decodes and re-encodes the message on its
     * loop keeps a ping waiting for seconds */
    assert_true(longest < 1000);
    zf_socket_destroy(&big);
    zf_socket_destroy(&pinger);
    zf_zctx_destroy(&ctx);
    assert_int_equal(zf_test_child_stop(&sched, SIGTERM, 10000), 0);
    assert_int_equal(zf_test_broker_stop(&tb, SIGTERM), 0);
}

static void test_a_large_malformed_request_passed_on_is_answered_by_the_scheduler(void **state)
{
    (void)state;
    zf_test_broker_t tb;
    zf_test_broker_start(&tb, NULL);
    zf_test_child_t sched;
    zf_test_scheduler_start(&sched, tb.endpoint, NULL, 10000);
    zf_zctx_t *ctx = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    zf_socket_t *c = zf_test_dealer(ctx, tb.endpoint);
    /* Envelope{version 1, request_id 9, RunStep{session "s", a feed of 2
     * MiB that is no NamedTensor}}: its header reads, the rest does not */
    size_t junk = (size_t)2 << 20, cap = junk + 64, n = 0;
    uint8_t *msg = malloc(cap), hdr[16];
    assert_non_null(msg);
    size_t run_len = s_field(hdr, 1, "s", 1) + s_field(hdr, 2, NULL, junk) + junk;
    msg[n++] = 0x08;
    msg[n++] = 0x01;
    msg[n++] = 0x10;
    msg[n++] = 9;
    n += s_field(msg + n, ZFLOW__ENVELOPE__BODY_RUN_STEP, NULL, run_len);
    n += s_field(msg + n, 1, "s", 1);
    n += s_field(msg + n, 2, NULL, junk);
    memset(msg + n, 0xff, junk); /* a varint that never ends */
    n += junk;
    assert_int_equal(zmq_send(zf_socket_handle(c), msg, n, 0), (int)n);
    free(msg);
    /* the broker passed it on; the scheduler could not read it and said
     * so to the request id its top level names */
    zf_test_expect_status(c, 9, ZF_INVALID_ARGUMENT, "malformed envelope");
    zf_socket_destroy(&c);
    zf_zctx_destroy(&ctx);
    assert_int_equal(zf_test_child_stop(&sched, SIGTERM, 10000), 0);
    assert_int_equal(zf_test_broker_stop(&tb, SIGTERM), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broker_answers_pings_while_a_large_submit_job_passes),
        cmocka_unit_test(test_a_large_malformed_request_passed_on_is_answered_by_the_scheduler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
