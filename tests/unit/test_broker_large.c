/* The broker keeps answering while a large message passes through it: the
 * real zflow-broker and zflow-scheduler on 127.0.0.1 ephemeral ports, one
 * client sending a CreateSession of about 115 MB (1.8 million nodes) and
 * another pinging the broker meanwhile. The pings must be answered while
 * the big session is on its way, before its CreateSessionReply comes back,
 * and none may wait for the broker to take the big message apart. A large
 * request that is malformed past its header still gets its answer, from
 * the scheduler that decodes it. A large SubmitJob, which the broker
 * records in a durable job store and hands to a scheduler itself, is not
 * taken apart either: pings are answered while it is recorded and while
 * its job runs (on a real executor) to its result, and one whose graph
 * is malformed is refused at once, its bytes checked off the loop. */
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
#include "common/pbtxt.h"
#include "service_test_util.h"
#include "test_util.h"

#define WAIT_MS  60000
#define NODES    1800000
#define PING_MS  20
#define NAME_FMT "n%07d"

/* Appends field `field`, length-delimited, of `len` bytes at `data` (or
 * only the key and length when data is NULL). */
static size_t s_field(uint8_t *p, uint32_t field, const void *data, size_t len)
{
    size_t n = zf_proto_put_varint(p, (uint64_t)field << 3 | 2);
    n += zf_proto_put_varint(p + n, len);
    if (data) memcpy(p + n, data, len);
    return n + (data ? len : 0);
}

/* A packed Envelope{version 1, request_id, CreateSession{graph of NODES
 * NoOp nodes}}, built from one packed node renamed NODES times; *len_out
 * its size. */
static uint8_t *s_big_create(uint64_t request_id, size_t *len_out)
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
    size_t cap = graph_len + 64;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    size_t n = 0;
    buf[n++] = 0x08; /* version */
    buf[n++] = 0x01;
    buf[n++] = 0x10; /* request_id */
    n += zf_proto_put_varint(buf + n, request_id);
    size_t create_len =
        zf_proto_put_varint(hdr, 1 << 3 | 2) + zf_proto_put_varint(hdr, graph_len) + graph_len;
    n += s_field(buf + n, ZFLOW__ENVELOPE__BODY_CREATE_SESSION, NULL, create_len);
    n += s_field(buf + n, 1, NULL, graph_len); /* CreateSession.graph */
    for (int k = 0; k < NODES; k++) {
        n += s_field(buf + n, 1, one, node_len); /* GraphDef.node */
        char digits[16];
        snprintf(digits, sizeof digits, NAME_FMT, k);
        memcpy(buf + n - node_len + name_off, digits, strlen(digits));
    }
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

/* A client pinging the broker every PING_MS, each ping once the last was
 * answered: how many were answered, and the longest wait for one (ms). */
typedef struct {
    zf_socket_t *s;
    uint64_t next_id, waiting;
    int64_t sent_at, longest;
    int answered;
} s_pinger_t;

/* Pings on p until an envelope comes on other (returned; caller frees) or
 * WAIT_MS pass (NULL). Every ping must be answered OK, in order. */
static Zflow__Envelope *s_ping_while(s_pinger_t *p, zf_socket_t *other)
{
    int64_t t0 = zf_test_now_ms();
    while (zf_test_now_ms() - t0 < WAIT_MS) {
        int64_t now = zf_test_now_ms();
        if (!p->waiting && now - p->sent_at >= PING_MS) {
            p->waiting = 100 + p->next_id++;
            p->sent_at = now;
            s_ping(p->s, p->waiting);
        }
        zmq_pollitem_t items[2] = {{zf_socket_handle(p->s), 0, ZMQ_POLLIN, 0},
                                   {zf_socket_handle(other), 0, ZMQ_POLLIN, 0}};
        assert_true(zmq_poll(items, 2, PING_MS) >= 0);
        if (items[0].revents & ZMQ_POLLIN) {
            Zflow__Envelope *rep = zf_test_recv(p->s, 0, NULL);
            assert_non_null(rep);
            assert_int_equal(rep->request_id, p->waiting);
            assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
            assert_true(!rep->status_reply->status || rep->status_reply->status->code == ZF_OK);
            int64_t waited = zf_test_now_ms() - p->sent_at;
            if (waited > p->longest) p->longest = waited;
            p->answered++;
            p->waiting = 0;
            zflow__envelope__free_unpacked(rep, NULL);
        }
        if (items[1].revents & ZMQ_POLLIN) return zf_test_recv(other, 0, NULL);
    }
    return NULL;
}

static void test_broker_answers_pings_while_a_large_create_session_passes(void **state)
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
    uint8_t *msg = s_big_create(7, &len);
    assert_true(len > (size_t)100 << 20);
    int64_t t0 = zf_test_now_ms();
    assert_int_equal(zmq_send(zf_socket_handle(big), msg, len, 0), (int)len);
    free(msg);

    s_pinger_t p = {pinger, 0, 0, 0, 0, 0};
    Zflow__Envelope *ack = s_ping_while(&p, big);
    int64_t acked_at = zf_test_now_ms();
    assert_non_null(ack);
    /* the scheduler got it whole and measured it */
    assert_int_equal(ack->body_case, ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY);
    assert_int_equal(ack->request_id, 7);
    zf_status_t st = zf_status_from_proto(ack->create_session_reply->status);
    zf_test_expect_error(st, ZF_RESOURCE_EXHAUSTED,
                         "the graph has 1800000 nodes; this scheduler takes at most 1000 "
                         "(zflow-scheduler --max-graph-nodes)");
    zflow__envelope__free_unpacked(ack, NULL);
    print_message("pings answered before the %zu-byte CreateSession's reply (%" PRId64
                  " ms): %d, the longest %" PRId64 " ms\n",
                  len, acked_at - t0, p.answered, p.longest);
    assert_true(p.answered >= 1);
    /* generous: a broker that decodes and re-encodes the message on its
     * loop keeps a ping waiting for seconds */
    assert_true(p.longest < 1000);
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

/* ---- a large SubmitJob, recorded in a durable job store ---------------------- */

#define BIG_INTS (29 << 20) /* int32s in the big job's constant: 116 MiB */

/* The big job's graph: m = Max(big, 0) over a constant of BIG_INTS int32s. */
static const char s_max_graph[] =
    "node { name: 'big' op: 'Const'"
    "  attr { key: 'dtype' value { type: DT_INT32 } }"
    "  attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 30408704 } "
    "} } } } }"
    "node { name: 'axis' op: 'Const'"
    "  attr { key: 'dtype' value { type: DT_INT32 } }"
    "  attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } }"
    "node { name: 'm' op: 'Max' input: 'big' input: 'axis'"
    "  attr { key: 'T' value { type: DT_INT32 } }"
    "  attr { key: 'Tidx' value { type: DT_INT32 } } }";

/* A packed Envelope{version 1, request_id, SubmitJob{s_max_graph, fetch
 * m:0, 2 steps}} with the constant's values made up, and in *expect
 * their maximum, found by a plain loop; *len_out its size. */
static uint8_t *s_big_submit(uint64_t request_id, int32_t *expect, size_t *len_out)
{
    assert_int_equal(BIG_INTS, 30408704);
    ProtobufCMessage *m = NULL;
    ASSERT_OK(zf_pbtxt_parse(&tensorflow__graph_def__descriptor, s_max_graph,
                             sizeof s_max_graph - 1, &m));
    Tensorflow__GraphDef *gd = (Tensorflow__GraphDef *)m;
    Tensorflow__TensorProto *t = NULL;
    for (size_t k = 0; k < gd->node[0]->n_attr; k++)
        if (!strcmp(gd->node[0]->attr[k]->key, "value")) t = gd->node[0]->attr[k]->value->tensor;
    assert_non_null(t);
    int32_t *v = malloc((size_t)BIG_INTS * sizeof *v);
    assert_non_null(v);
    *expect = INT32_MIN;
    for (uint32_t i = 0; i < BIG_INTS; i++) {
        v[i] = (int32_t)(i * 2654435761u % 1000003u) - 500000;
        if (v[i] > *expect) *expect = v[i];
    }
    t->tensor_content.data = (uint8_t *)v;
    t->tensor_content.len = (size_t)BIG_INTS * sizeof *v;
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = gd;
    char *fetches[] = {"m:0"};
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    rs.n_fetches = 1;
    rs.fetches = fetches;
    Zflow__SubmitJob sj = ZFLOW__SUBMIT_JOB__INIT;
    sj.session = &cs;
    sj.step = &rs;
    sj.steps = 2;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = request_id;
    env.body_case = ZFLOW__ENVELOPE__BODY_SUBMIT_JOB;
    env.submit_job = &sj;
    *len_out = zflow__envelope__get_packed_size(&env);
    uint8_t *buf = malloc(*len_out);
    assert_non_null(buf);
    assert_int_equal(zflow__envelope__pack(&env, buf), *len_out);
    protobuf_c_message_free_unpacked(m, NULL); /* frees v too */
    return buf;
}

/* The SubmitJobReply to request_id on s (the job's id; caller frees). */
static char *s_job_id(Zflow__Envelope *rep, uint64_t request_id)
{
    assert_non_null(rep);
    assert_int_equal(rep->request_id, request_id);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY);
    zf_status_t st = zf_status_from_proto(rep->submit_job_reply->status);
    ASSERT_OK(st);
    char *id = strdup(rep->submit_job_reply->job_id);
    assert_non_null(id);
    zflow__envelope__free_unpacked(rep, NULL);
    return id;
}

/* Waits for job id's result on c (WaitJobs of 1 s, repeated while it is
 * unfinished), pinging with p meanwhile; returns it (caller frees). */
static Zflow__RunStepReply *s_result(zf_socket_t *c, s_pinger_t *p, const char *id)
{
    for (uint64_t request_id = 1000;; request_id++) {
        Zflow__WaitJob wj = ZFLOW__WAIT_JOB__INIT;
        wj.job_id = (char *)id;
        wj.timeout_ms = 1000;
        zf_test_send_body(c, request_id, ZFLOW__ENVELOPE__BODY_WAIT_JOB, &wj);
        Zflow__Envelope *rep = s_ping_while(p, c);
        assert_non_null(rep);
        assert_int_equal(rep->request_id, request_id);
        assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
        Zflow__RunStepReply *r = rep->run_step_reply;
        bool unfinished = r->unfinished;
        rep->run_step_reply = NULL;
        rep->body_case = ZFLOW__ENVELOPE__BODY__NOT_SET;
        zflow__envelope__free_unpacked(rep, NULL);
        if (!unfinished) return r;
        zflow__run_step_reply__free_unpacked(r, NULL);
        assert_true(request_id < 1000 + WAIT_MS / 1000);
    }
}

static void test_broker_answers_pings_while_a_large_submit_job_is_recorded_and_run(void **state)
{
    (void)state;
    char dir[64];
    zf_test_state_dir(dir, sizeof dir);
    const char *args[] = {"--state", dir, NULL};
    zf_test_service_t svc;
    zf_test_service_start(&svc, args, 1, 10000);
    zf_zctx_t *ctx = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    zf_socket_t *big = zf_test_dealer(ctx, svc.broker.endpoint),
                *pinger = zf_test_dealer(ctx, svc.broker.endpoint);
    s_ping(pinger, 1); /* both connected before the clock starts */
    zf_test_expect_status(pinger, 1, ZF_OK, NULL);
    s_ping(big, 2);
    zf_test_expect_status(big, 2, ZF_OK, NULL);

    int32_t expect = 0;
    size_t len = 0;
    uint8_t *msg = s_big_submit(7, &expect, &len);
    assert_true(len > (size_t)100 << 20);
    int64_t t0 = zf_test_now_ms();
    assert_int_equal(zmq_send(zf_socket_handle(big), msg, len, 0), (int)len);
    free(msg);
    s_pinger_t p = {pinger, 0, 0, 0, 0, 0};
    char *id = s_job_id(s_ping_while(&p, big), 7); /* acknowledged: stored */
    int64_t acked_at = zf_test_now_ms();
    int acked_answered = p.answered;
    print_message("pings answered before the %zu-byte SubmitJob's reply (%" PRId64
                  " ms): %d, the longest %" PRId64 " ms\n",
                  len, acked_at - t0, p.answered, p.longest);
    assert_true(p.answered >= 1);

    Zflow__RunStepReply *r = s_result(big, &p, id);
    print_message("pings answered until its result (%" PRId64 " ms): %d, the longest %" PRId64
                  " ms\n",
                  zf_test_now_ms() - t0, p.answered, p.longest);
    assert_true(p.answered > acked_answered);
    ASSERT_OK(zf_status_from_proto(r->status));
    assert_int_equal(r->attempts, 1);
    assert_int_equal(r->n_fetches, 1);
    assert_string_equal(r->fetches[0]->name, "m:0");
    const Tensorflow__TensorProto *t = r->fetches[0]->tensor;
    assert_int_equal(t->dtype, TENSORFLOW__DATA_TYPE__DT_INT32);
    int32_t got = 0;
    if (t->n_int_val == 1)
        got = t->int_val[0];
    else if (t->tensor_content.len == sizeof got)
        memcpy(&got, t->tensor_content.data, sizeof got);
    else
        fail_msg("m:0 has %zu int_val and %zu bytes", t->n_int_val, t->tensor_content.len);
    assert_int_equal(got, expect);
    zflow__run_step_reply__free_unpacked(r, NULL);
    free(id);
    zf_socket_destroy(&big);
    zf_socket_destroy(&pinger);
    zf_zctx_destroy(&ctx);
    assert_int_equal(zf_test_service_stop(&svc, 10000), 0);
    zf_test_state_dir_remove(dir);
}

/* (With the job store in memory: its large requests are held there.) */
static void test_a_large_malformed_submit_job_is_refused_before_it_is_kept(void **state)
{
    (void)state;
    zf_test_service_t svc;
    zf_test_service_start(&svc, NULL, 0, 10000);
    zf_zctx_t *ctx = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    zf_socket_t *c = zf_test_dealer(ctx, svc.broker.endpoint);
    /* Envelope{version 1, request_id 9, SubmitJob{session{graph: 2 MiB that
     * are no GraphDef}, step{}, steps 3}}: what the broker reads of it on
     * its loop is well-formed, the graph is not */
    size_t junk = (size_t)2 << 20, cap = junk + 64, n = 0;
    uint8_t *msg = malloc(cap), hdr[16];
    assert_non_null(msg);
    size_t session_len = s_field(hdr, 1, NULL, junk) + junk;
    size_t submit_len = s_field(hdr, 1, NULL, session_len) + session_len + 2 + 2;
    /* the graph's first byte within the SubmitJob */
    size_t graph_at = s_field(hdr, 1, NULL, session_len) + s_field(hdr, 1, NULL, junk);
    msg[n++] = 0x08;
    msg[n++] = 0x01;
    msg[n++] = 0x10;
    msg[n++] = 9;
    n += s_field(msg + n, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, NULL, submit_len);
    n += s_field(msg + n, 1, NULL, session_len);
    n += s_field(msg + n, 1, NULL, junk);
    memset(msg + n, 0xff, junk); /* a varint that never ends */
    n += junk;
    n += s_field(msg + n, 2, "", 0);
    msg[n++] = 3 << 3; /* steps */
    msg[n++] = 3;
    assert_int_equal(zmq_send(zf_socket_handle(c), msg, n, 0), (int)n);
    free(msg);
    zf_socket_t *pinger = zf_test_dealer(ctx, svc.broker.endpoint);
    s_pinger_t p = {pinger, 0, 0, 0, 0, 0};
    Zflow__Envelope *rep = s_ping_while(&p, c);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, 9);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY);
    assert_string_equal(rep->submit_job_reply->job_id, ""); /* no job was made */
    char want[256];
    snprintf(want, sizeof want,
             "SubmitJob refused: malformed zflow.SubmitJob (%zu bytes; byte offsets count from "
             "its start): truncated field tag at byte %zu",
             submit_len, graph_at);
    zf_test_expect_error(zf_status_from_proto(rep->submit_job_reply->status), ZF_INVALID_ARGUMENT,
                         want);
    zflow__envelope__free_unpacked(rep, NULL);
    s_ping(c, 10); /* and the broker goes on */
    zf_test_expect_status(c, 10, ZF_OK, NULL);
    zf_socket_destroy(&c);
    zf_socket_destroy(&pinger);
    zf_zctx_destroy(&ctx);
    assert_int_equal(zf_test_service_stop(&svc, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broker_answers_pings_while_a_large_create_session_passes),
        cmocka_unit_test(test_a_large_malformed_request_passed_on_is_answered_by_the_scheduler),
        cmocka_unit_test(test_broker_answers_pings_while_a_large_submit_job_is_recorded_and_run),
        cmocka_unit_test(test_a_large_malformed_submit_job_is_refused_before_it_is_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
