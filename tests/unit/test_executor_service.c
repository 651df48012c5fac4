/* Tests for executor/service: two executor services in this process, each
 * with its own CPU device, control ROUTER and rendezvous PULL socket on
 * 127.0.0.1 ephemeral ports; the test plays the scheduler over DEALER
 * sockets, with partitions made by zf_partition_graph. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <zmq.h>

#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/host_memory.h"
#include "common/log.h"
#include "common/tensor_proto.h"
#include "common/transport.h"
#include "executor/devices/device.h"
#include "session/local_session.h"
#include "executor/worker/service.h"
#include "scheduler/graph/partition.h"
#include "scheduler/graph/placer.h"
#include "test_util.h"

#define WAIT_MS 10000
#define CPU(k)  "/job:localhost/replica:0/task:0/device:CPU:" #k

/* x (fed) -> y = x * x on CPU:0; z = y + c on CPU:1. */
static const char s_graph[] = "node { name: 'x' op: 'Placeholder' device: '" CPU(
    0) "'"
       "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
       "node { name: 'y' op: 'Mul' input: 'x' input: 'x' device: '" CPU(
           0) "'"
              "  attr { key: 'T' value { type: DT_FLOAT } } }"
              "node { name: 'c' op: 'Const' device: '" CPU(
                  1) "'"
                     "  attr { key: 'dtype' value { type: DT_FLOAT } }"
                     "  attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { "
                     "size: 3 } }"
                     "    float_val: 10 float_val: 20 float_val: 30 } } } }"
                     "node { name: 'z' op: 'Add' input: 'y' input: 'c' device: '" CPU(
                         1) "'"
                            "  attr { key: 'T' value { type: DT_FLOAT } } }";

typedef struct {
    zf_zctx_t *ctx;
    zf_device_t *dev[2];
    zf_exec_service_t *svc[2];
    zf_socket_t *dealer[2];
} s_fixture_t;

static int s_setup(void **state)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    ASSERT_OK(zf_zctx_new(&f->ctx));
    ASSERT_OK(zf_device_cpu_new(CPU(0), 2, &f->dev[0]));
    ASSERT_OK(zf_device_cpu_new(CPU(1), 2, &f->dev[1]));
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(zf_exec_service_new(f->ctx, f->dev[i], NULL, &f->svc[i]));
        ASSERT_OK(zf_socket_new(f->ctx, ZF_SOCKET_DEALER, &f->dealer[i]));
        ASSERT_OK(zf_socket_connect(f->dealer[i], zf_exec_service_control_endpoint(f->svc[i])));
    }
    for (int i = 0; i < 2; i++)
        ASSERT_OK(zf_exec_service_set_peer(f->svc[i], f->dev[1 - i]->name_str,
                                           zf_exec_service_rendezvous_endpoint(f->svc[1 - i])));
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    for (int i = 0; i < 2; i++) {
        zf_socket_destroy(&f->dealer[i]);
        zf_exec_service_destroy(&f->svc[i]);
        assert_null(f->svc[i]);
        zf_device_destroy(&f->dev[i]);
    }
    zf_zctx_destroy(&f->ctx);
    free(f);
    return 0;
}

/* ---- the scheduler's side ------------------------------------------------- */

/* Partitions s_graph over both devices (with their incarnations). */
static zf_partition_set_t *s_partition(s_fixture_t *f, const char *text, const char *feed,
                                       const char *fetch)
{
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    zf_graph_t *g = NULL;
    ASSERT_OK(zf_graph_new_from_graphdef(gd, &g));
    zf_placer_device_t pdevs[2] = {{f->dev[0]->name, 0}, {f->dev[1]->name, 0}};
    zf_partition_device_t devs[2] = {{f->dev[0]->name, f->dev[0]->incarnation},
                                     {f->dev[1]->name, f->dev[1]->incarnation}};
    int *assignment = calloc((size_t)zf_graph_num_nodes(g), sizeof *assignment);
    zf_placer_options_t popts = ZF_PLACER_OPTIONS_DEFAULT;
    ASSERT_OK(zf_placer_run(g, pdevs, 2, &popts, assignment));
    zf_partition_options_t opts = {
        .feeds = &feed, .n_feeds = feed ? 1 : 0, .fetches = &fetch, .n_fetches = 1};
    zf_partition_set_t *set = NULL;
    ASSERT_OK(zf_partition_graph(g, devs, 2, assignment, &opts, &set));
    free(assignment);
    zf_graph_destroy(&g);
    zf_graphdef_free(&gd);
    return set;
}

static const zf_partition_t *s_part(const zf_partition_set_t *set, const zf_device_t *dev)
{
    for (int i = 0; i < set->n_parts; i++)
        if (strcmp(set->parts[i].device, dev->name_str) == 0) return &set->parts[i];
    fail_msg("no partition for %s", dev->name_str);
    return NULL;
}

static Zflow__Envelope *s_reply(zf_socket_t *dealer)
{
    zf_route_t route;
    Zflow__Envelope *env = NULL;
    ASSERT_OK(zf_envelope_recv(dealer, WAIT_MS, &route, &env));
    zf_route_clear(&route);
    return env;
}

/* Registers gd for incarnation on dealer's executor; returns the reply. */
static Zflow__Envelope *s_register(zf_socket_t *dealer, Tensorflow__GraphDef *gd,
                                   uint64_t incarnation, uint64_t id)
{
    Zflow__RegisterGraph rg;
    zflow__register_graph__init(&rg);
    rg.session = "session-1";
    rg.graph = gd;
    rg.incarnation = incarnation;
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = id;
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH;
    env.register_graph = &rg;
    ASSERT_OK(zf_envelope_send(dealer, NULL, &env));
    Zflow__Envelope *reply = s_reply(dealer);
    assert_int_equal(reply->request_id, id);
    assert_int_equal(reply->body_case, ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY);
    return reply;
}

/* Registers gd and returns its handle (caller frees). */
static char *s_register_ok(zf_socket_t *dealer, Tensorflow__GraphDef *gd, uint64_t incarnation)
{
    Zflow__Envelope *reply = s_register(dealer, gd, incarnation, 1);
    ASSERT_OK(zf_status_from_proto(reply->register_graph_reply->status));
    char *handle = strdup(reply->register_graph_reply->graph_handle);
    zflow__envelope__free_unpacked(reply, NULL);
    return handle;
}

/* Sends a RunGraph with at most one feed (value borrowed) and one fetch. */
static void s_run(zf_socket_t *dealer, uint64_t id, const char *handle, uint64_t incarnation,
                  int64_t step, const char *feed_key, const zf_tensor_t *value,
                  const char *fetch_key)
{
    Zflow__RunGraph rg;
    zflow__run_graph__init(&rg);
    rg.graph_handle = (char *)handle;
    rg.incarnation = incarnation;
    rg.step_id = step;
    Zflow__NamedTensor feed, *feeds[1] = {&feed};
    zflow__named_tensor__init(&feed);
    if (feed_key) {
        feed.name = (char *)feed_key;
        ASSERT_OK(zf_tensor_to_proto(value, &feed.tensor, true));
        rg.n_feeds = 1;
        rg.feeds = feeds;
    }
    char *fetches[1] = {(char *)fetch_key};
    if (fetch_key) {
        rg.n_fetch_keys = 1;
        rg.fetch_keys = fetches;
    }
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = id;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_GRAPH;
    env.run_graph = &rg;
    ASSERT_OK(zf_envelope_send(dealer, NULL, &env));
    if (feed.tensor) protobuf_c_message_free_unpacked(&feed.tensor->base, NULL);
}

/* Receives a RunGraphReply; *status gets its status. Caller frees. */
static Zflow__Envelope *s_run_reply(zf_socket_t *dealer, zf_status_t *status)
{
    Zflow__Envelope *reply = s_reply(dealer);
    assert_int_equal(reply->body_case, ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY);
    *status = zf_status_from_proto(reply->run_graph_reply->status);
    return reply;
}

static zf_tensor_t *s_floats3(float a, float b, float c)
{
    zf_tensor_t *t = NULL;
    float v[3] = {a, b, c};
    zf_shape_t shape = ZF_SHAPE(3);
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, sizeof v, &t));
    return t;
}

static void s_expect_floats(const Tensorflow__TensorProto *proto, float a, float b, float c)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_proto(proto, &t));
    zf_tensor_t *want = s_floats3(a, b, c);
    assert_true(zf_tensor_equal(t, want));
    zf_tensor_unref(&t);
    zf_tensor_unref(&want);
}

/* ---- one executor ------------------------------------------------------------ */

static const char s_local_graph[] = "node { name: 'x' op: 'Placeholder' device: '" CPU(
    0) "'"
       "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
       "node { name: 'y' op: 'Mul' input: 'x' input: 'x' device: '" CPU(
           0) "'"
              "  attr { key: 'T' value { type: DT_FLOAT } } }";

static void test_service_runs_a_registered_partition_with_feeds_and_fetches_by_key(void **state)
{
    s_fixture_t *f = *state;
    zf_partition_set_t *set = s_partition(f, s_local_graph, "x", "y");
    const zf_partition_t *p = s_part(set, f->dev[0]);
    uint64_t inc = zf_exec_service_incarnation(f->svc[0]);
    assert_int_equal(inc, f->dev[0]->incarnation);
    char *handle = s_register_ok(f->dealer[0], p->graph, inc);
    assert_int_equal(zf_exec_service_num_graphs(f->svc[0]), 1);
    zf_tensor_t *x = s_floats3(1, -2, 3);
    s_run(f->dealer[0], 77, handle, inc, 1, p->feeds[0].key, x, p->fetches[0].key);
    zf_status_t s = ZF_STATUS_OK;
    Zflow__Envelope *reply = s_run_reply(f->dealer[0], &s);
    ASSERT_OK(s);
    assert_int_equal(reply->request_id, 77);
    assert_int_equal(reply->run_graph_reply->n_fetches, 1);
    assert_string_equal(reply->run_graph_reply->fetches[0]->name, p->fetches[0].key);
    s_expect_floats(reply->run_graph_reply->fetches[0]->tensor, 1, 4, 9);
    zflow__envelope__free_unpacked(reply, NULL);
    /* The step succeeded, so the executor cleaned it up without waiting
     * for a CleanupGraph: it cannot run again. */
    s_run(f->dealer[0], 78, handle, inc, 1, p->feeds[0].key, x, p->fetches[0].key);
    reply = s_run_reply(f->dealer[0], &s);
    assert_int_equal(reply->request_id, 78);
    zf_test_expect_error(s, ZF_FAILED_PRECONDITION, "step 1 has already been cleaned up");
    zflow__envelope__free_unpacked(reply, NULL);
    zf_tensor_unref(&x);
    free(handle);
    zf_partition_set_destroy(&set);
}

static void test_service_refuses_handles_of_an_earlier_incarnation_with_aborted(void **state)
{
    s_fixture_t *f = *state;
    zf_partition_set_t *set = s_partition(f, s_local_graph, "x", "y");
    const zf_partition_t *p = s_part(set, f->dev[0]);
    uint64_t inc = zf_exec_service_incarnation(f->svc[0]);
    char *handle = s_register_ok(f->dealer[0], p->graph, inc);
    zf_tensor_t *x = s_floats3(1, 2, 3);
    /* The scheduler still knows the previous incarnation. */
    s_run(f->dealer[0], 5, handle, inc ^ 0x5a5a, 1, p->feeds[0].key, x, p->fetches[0].key);
    zf_status_t s = ZF_STATUS_OK;
    Zflow__Envelope *reply = s_run_reply(f->dealer[0], &s);
    assert_int_equal(s.code, ZF_ABORTED);
    assert_string_equal(zf_status_msg(&s), "graph handle not found; the executor restarted");
    zf_status_clear(&s);
    zflow__envelope__free_unpacked(reply, NULL);
    /* A handle minted by another incarnation, even with the current one. */
    s_run(f->dealer[0], 6, "0000000000000001/1", inc, 1, NULL, NULL, NULL);
    reply = s_run_reply(f->dealer[0], &s);
    zf_test_expect_error(s, ZF_ABORTED, "graph handle not found; the executor restarted");
    zflow__envelope__free_unpacked(reply, NULL);
    /* Registering for an old incarnation is refused too. */
    reply = s_register(f->dealer[0], p->graph, inc + 1, 7);
    zf_test_expect_error(zf_status_from_proto(reply->register_graph_reply->status), ZF_ABORTED,
                         "the executor restarted");
    zflow__envelope__free_unpacked(reply, NULL);
    zf_tensor_unref(&x);
    free(handle);
    zf_partition_set_destroy(&set);
}

static void s_send_simple(zf_socket_t *dealer, uint64_t id, Zflow__Envelope__BodyCase kind,
                          void *body)
{
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = id;
    env.body_case = kind;
    env.cleanup_graph = body; /* the oneof shares one pointer */
    ASSERT_OK(zf_envelope_send(dealer, NULL, &env));
}

/* Expects a StatusReply to request id with code and substring. */
static void s_expect_status(zf_socket_t *dealer, uint64_t id, zf_code_t code, const char *sub)
{
    Zflow__Envelope *reply = s_reply(dealer);
    assert_int_equal(reply->request_id, id);
    assert_int_equal(reply->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    zf_status_t s = zf_status_from_proto(reply->status_reply->status);
    if (code == ZF_OK)
        ASSERT_OK(s);
    else
        zf_test_expect_error(s, code, sub);
    zflow__envelope__free_unpacked(reply, NULL);
}

static void test_service_abort_step_ends_a_waiting_step_with_the_given_status(void **state)
{
    s_fixture_t *f = *state;
    zf_partition_set_t *set = s_partition(f, s_graph, "x", "z");
    const zf_partition_t *p1 = s_part(set, f->dev[1]); /* waits for y from CPU:0 */
    uint64_t inc = zf_exec_service_incarnation(f->svc[1]);
    char *handle = s_register_ok(f->dealer[1], p1->graph, inc);
    for (int64_t step = 40; step < 43; step++)
        s_run(f->dealer[1], (uint64_t)step, handle, inc, step, NULL, NULL, p1->fetches[0].key);
    /* The same step of the same graph twice is refused; the first goes on. */
    s_run(f->dealer[1], 99, handle, inc, 41, NULL, NULL, p1->fetches[0].key);
    zf_status_t dup = ZF_STATUS_OK;
    Zflow__Envelope *dup_reply = s_run_reply(f->dealer[1], &dup);
    assert_int_equal(dup_reply->request_id, 99);
    zf_test_expect_error(dup, ZF_INVALID_ARGUMENT, "step 41 of graph ");
    zflow__envelope__free_unpacked(dup_reply, NULL);
    assert_int_equal(zf_exec_service_steps_in_flight(f->svc[1]), 3);
    Zflow__Status why;
    zflow__status__init(&why);
    why.code = ZF_INTERNAL;
    why.message = "CPU:0 failed: injected";
    Zflow__AbortStep ab;
    for (int64_t step = 42; step >= 40; step--) {
        zflow__abort_step__init(&ab);
        ab.step_id = step;
        ab.status = &why;
        s_send_simple(f->dealer[1], 100 + (uint64_t)step, ZFLOW__ENVELOPE__BODY_ABORT_STEP, &ab);
        s_expect_status(f->dealer[1], 100 + (uint64_t)step, ZF_OK, NULL);
        zf_status_t s = ZF_STATUS_OK;
        Zflow__Envelope *reply = s_run_reply(f->dealer[1], &s);
        assert_int_equal(reply->request_id, step);
        zf_test_expect_error(s, ZF_INTERNAL, "CPU:0 failed: injected");
        assert_int_equal(reply->run_graph_reply->n_fetches, 0);
        zflow__envelope__free_unpacked(reply, NULL);
        Zflow__CleanupGraph cg;
        zflow__cleanup_graph__init(&cg);
        cg.step_id = step;
        s_send_simple(f->dealer[1], 200, ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH, &cg);
        s_expect_status(f->dealer[1], 200, ZF_OK, NULL);
    }
    assert_int_equal(zf_exec_service_steps_in_flight(f->svc[1]), 0);
    /* A cleaned-up step cannot be run again. */
    s_run(f->dealer[1], 9, handle, inc, 40, NULL, NULL, p1->fetches[0].key);
    zf_status_t s = ZF_STATUS_OK;
    Zflow__Envelope *reply = s_run_reply(f->dealer[1], &s);
    zf_test_expect_error(s, ZF_FAILED_PRECONDITION, "step 40 has already been cleaned up");
    zflow__envelope__free_unpacked(reply, NULL);
    free(handle);
    zf_partition_set_destroy(&set);
}

static void
test_service_answers_malformed_requests_with_invalid_argument_and_keeps_serving(void **state)
{
    s_fixture_t *f = *state;
    zf_socket_t *d = f->dealer[0];
    /* Not an envelope at all. */
    assert_int_equal(zmq_send(zf_socket_handle(d), "\xff\xff\xff", 3, 0), 3);
    s_expect_status(d, 0, ZF_INVALID_ARGUMENT, NULL);
    /* A body the executor does not serve. */
    Zflow__Heartbeat hb;
    zflow__heartbeat__init(&hb);
    s_send_simple(d, 11, ZFLOW__ENVELOPE__BODY_HEARTBEAT, &hb);
    s_expect_status(d, 11, ZF_INVALID_ARGUMENT, "does not serve message body 12");
    /* RegisterGraph without a graph; RunGraph without a handle. */
    Zflow__Envelope *reply = s_register(d, NULL, 0, 12);
    zf_test_expect_error(zf_status_from_proto(reply->register_graph_reply->status),
                         ZF_INVALID_ARGUMENT, "RegisterGraph without a graph");
    zflow__envelope__free_unpacked(reply, NULL);
    uint64_t inc = zf_exec_service_incarnation(f->svc[0]);
    s_run(d, 13, "", inc, 1, NULL, NULL, NULL);
    zf_status_t s = ZF_STATUS_OK;
    reply = s_run_reply(d, &s);
    zf_test_expect_error(s, ZF_INVALID_ARGUMENT, "RunGraph without a graph handle");
    zflow__envelope__free_unpacked(reply, NULL);
    /* A graph with an op nobody has a kernel for. */
    Tensorflow__GraphDef *bad = NULL;
    const char *text = "node { name: 'n' op: 'NoSuchOp' }";
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &bad));
    reply = s_register(d, bad, inc, 14);
    s = zf_status_from_proto(reply->register_graph_reply->status);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    assert_non_null(strstr(zf_status_msg(&s), "NoSuchOp"));
    zf_status_clear(&s);
    zflow__envelope__free_unpacked(reply, NULL);
    zf_graphdef_free(&bad);
    /* A feed whose tensor is malformed, then a good run on the same graph. */
    zf_partition_set_t *set = s_partition(f, s_local_graph, "x", "y");
    const zf_partition_t *p = s_part(set, f->dev[0]);
    char *handle = s_register_ok(d, p->graph, inc);
    zf_tensor_t *x = s_floats3(2, 2, 2);
    Tensorflow__TensorProto *proto = NULL;
    ASSERT_OK(zf_tensor_to_proto(x, &proto, true));
    proto->tensor_content.len -= 4; /* 8 bytes for 3 floats */
    Zflow__NamedTensor feed, *feeds[1] = {&feed};
    zflow__named_tensor__init(&feed);
    feed.name = p->feeds[0].key;
    feed.tensor = proto;
    Zflow__RunGraph rg;
    zflow__run_graph__init(&rg);
    rg.graph_handle = handle;
    rg.incarnation = inc;
    rg.step_id = 3;
    rg.n_feeds = 1;
    rg.feeds = feeds;
    s_send_simple(d, 15, ZFLOW__ENVELOPE__BODY_RUN_GRAPH, &rg);
    reply = s_run_reply(d, &s);
    zf_test_expect_error(s, ZF_INVALID_ARGUMENT, "RunGraph feed '");
    zflow__envelope__free_unpacked(reply, NULL);
    protobuf_c_message_free_unpacked(&proto->base, NULL);
    s_run(d, 16, handle, inc, 4, p->feeds[0].key, x, p->fetches[0].key);
    reply = s_run_reply(d, &s);
    ASSERT_OK(s);
    s_expect_floats(reply->run_graph_reply->fetches[0]->tensor, 4, 4, 4);
    zflow__envelope__free_unpacked(reply, NULL);
    /* Deregistered: the handle is gone. */
    Zflow__DeregisterGraph dg;
    zflow__deregister_graph__init(&dg);
    dg.graph_handle = handle;
    s_send_simple(d, 17, ZFLOW__ENVELOPE__BODY_DEREGISTER_GRAPH, &dg);
    s_expect_status(d, 17, ZF_OK, NULL);
    s_send_simple(d, 18, ZFLOW__ENVELOPE__BODY_DEREGISTER_GRAPH, &dg);
    s_expect_status(d, 18, ZF_NOT_FOUND, "is not registered");
    s_run(d, 19, handle, inc, 5, p->feeds[0].key, x, p->fetches[0].key);
    reply = s_run_reply(d, &s);
    zf_test_expect_error(s, ZF_NOT_FOUND, "is not registered");
    zflow__envelope__free_unpacked(reply, NULL);
    assert_int_equal(zf_exec_service_num_graphs(f->svc[0]), 0);
    zf_tensor_unref(&x);
    free(handle);
    zf_partition_set_destroy(&set);
}

/* ---- two executors ------------------------------------------------------------- */

#define N_STEPS 8

static void test_two_services_run_a_split_graph_like_the_local_session(void **state)
{
    s_fixture_t *f = *state;
    zf_partition_set_t *set = s_partition(f, s_graph, "x", "z");
    assert_int_equal(set->n_parts, 2);
    const zf_partition_t *p0 = s_part(set, f->dev[0]), *p1 = s_part(set, f->dev[1]);
    assert_int_equal(p0->n_feeds, 1);
    assert_int_equal(p1->n_fetches, 1);
    uint64_t inc0 = zf_exec_service_incarnation(f->svc[0]);
    uint64_t inc1 = zf_exec_service_incarnation(f->svc[1]);
    char *h0 = s_register_ok(f->dealer[0], p0->graph, inc0);
    char *h1 = s_register_ok(f->dealer[1], p1->graph, inc1);
    /* Every step in flight at once; the fetching side starts first. */
    zf_tensor_t *x[N_STEPS];
    for (int k = 0; k < N_STEPS; k++) {
        x[k] = s_floats3((float)k, 1, -(float)k);
        s_run(f->dealer[1], 1000 + (uint64_t)k, h1, inc1, 500 + k, NULL, NULL, p1->fetches[0].key);
    }
    for (int k = 0; k < N_STEPS; k++)
        s_run(f->dealer[0], 2000 + (uint64_t)k, h0, inc0, 500 + k, p0->feeds[0].key, x[k], NULL);
    /* The reference: the in-process session over the same two devices. */
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(s_graph, strlen(s_graph), ZF_FORMAT_PBTXT, &gd));
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.devices = "cpu:2";
    zf_local_session_t *ls = NULL;
    ASSERT_OK(zf_local_session_new(gd, &opts, &ls));
    bool seen[N_STEPS] = {false};
    for (int k = 0; k < N_STEPS; k++) {
        zf_status_t s = ZF_STATUS_OK;
        Zflow__Envelope *r0 = s_run_reply(f->dealer[0], &s);
        ASSERT_OK(s);
        assert_int_equal(r0->run_graph_reply->n_fetches, 0);
        zflow__envelope__free_unpacked(r0, NULL);
        Zflow__Envelope *r1 = s_run_reply(f->dealer[1], &s);
        ASSERT_OK(s);
        uint64_t step = r1->request_id - 1000;
        assert_true(step < N_STEPS && !seen[step]);
        seen[step] = true;
        assert_int_equal(r1->run_graph_reply->n_fetches, 1);
        zf_tensor_t *got = NULL, *want = NULL;
        ASSERT_OK(zf_tensor_from_proto(r1->run_graph_reply->fetches[0]->tensor, &got));
        const char *feed = "x", *fetch = "z";
        ASSERT_OK(zf_local_session_run(ls, &feed, &x[step], 1, &fetch, 1, NULL, 0, &want));
        assert_true(zf_tensor_equal(got, want));
        const float *v = zf_tensor_data(got);
        assert_true(v[0] == (float)(step * step) + 10 && v[1] == 21 && v[2] == v[0] + 20);
        zf_tensor_unref(&got);
        zf_tensor_unref(&want);
        zflow__envelope__free_unpacked(r1, NULL);
    }
    /* Every step succeeded on both sides, so both cleaned it up already. */
    for (int i = 0; i < 2; i++) {
        s_run(f->dealer[i], 2500, i ? h1 : h0, i ? inc1 : inc0, 500, NULL, NULL, NULL);
        zf_status_t s = ZF_STATUS_OK;
        Zflow__Envelope *again = s_run_reply(f->dealer[i], &s);
        zf_test_expect_error(s, ZF_FAILED_PRECONDITION, "step 500 has already been cleaned up");
        zflow__envelope__free_unpacked(again, NULL);
    }
    for (int i = 0; i < 2; i++) { /* a CleanupGraph after that is harmless */
        for (int k = 0; k < N_STEPS; k++) {
            Zflow__CleanupGraph cg;
            zflow__cleanup_graph__init(&cg);
            cg.step_id = 500 + k;
            s_send_simple(f->dealer[i], 3000, ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH, &cg);
            s_expect_status(f->dealer[i], 3000, ZF_OK, NULL);
        }
        assert_int_equal(zf_exec_service_steps_in_flight(f->svc[i]), 0);
    }
    for (int k = 0; k < N_STEPS; k++) zf_tensor_unref(&x[k]);
    zf_local_session_destroy(&ls);
    zf_graphdef_free(&gd);
    free(h0);
    free(h1);
    zf_partition_set_destroy(&set);
}

static void test_service_shuts_down_with_steps_still_waiting(void **state)
{
    s_fixture_t *f = *state;
    zf_partition_set_t *set = s_partition(f, s_graph, "x", "z");
    const zf_partition_t *p1 = s_part(set, f->dev[1]);
    uint64_t inc = zf_exec_service_incarnation(f->svc[1]);
    char *handle = s_register_ok(f->dealer[1], p1->graph, inc);
    s_run(f->dealer[1], 1, handle, inc, 9, NULL, NULL, p1->fetches[0].key);
    for (int i = 0; i < 200 && zf_exec_service_steps_in_flight(f->svc[1]) == 0; i++) {
        zf_status_t s = zf_socket_wait_readable(f->dealer[1], 10);
        zf_status_clear(&s);
    }
    assert_int_equal(zf_exec_service_steps_in_flight(f->svc[1]), 1);
    zf_exec_service_destroy(&f->svc[1]); /* aborts and waits for the step; no leak */
    free(handle);
    zf_partition_set_destroy(&set);
}

static void test_a_step_waits_for_the_endpoint_of_a_peer_it_sends_to(void **state)
{
    s_fixture_t *f = *state;
    /* A third executor for CPU:1's name that nobody has told CPU:0 about. */
    zf_exec_service_options_t opts = {NULL, NULL, 300, 0};
    zf_exec_service_t *lonely = NULL;
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new(CPU(0), 1, &dev));
    ASSERT_OK(zf_exec_service_new(f->ctx, dev, &opts, &lonely));
    zf_socket_t *d = NULL;
    ASSERT_OK(zf_socket_new(f->ctx, ZF_SOCKET_DEALER, &d));
    ASSERT_OK(zf_socket_connect(d, zf_exec_service_control_endpoint(lonely)));
    zf_device_t *saved = f->dev[0];
    f->dev[0] = dev; /* partition for the lonely executor's incarnation */
    zf_partition_set_t *set = s_partition(f, s_graph, "x", "z");
    f->dev[0] = saved;
    const zf_partition_t *p0 = s_part(set, dev), *p1 = s_part(set, f->dev[1]);
    uint64_t inc = zf_exec_service_incarnation(lonely);
    uint64_t inc1 = zf_exec_service_incarnation(f->svc[1]);
    char *h0 = s_register_ok(d, p0->graph, inc);
    char *h1 = s_register_ok(f->dealer[1], p1->graph, inc1);
    zf_tensor_t *x = s_floats3(1, 2, 3);
    /* Nobody answers the request for peers: UNAVAILABLE naming the device. */
    assert_false(zf_exec_service_take_peers_wanted(lonely));
    s_run(d, 1, h0, inc, 70, p0->feeds[0].key, x, NULL);
    zf_status_t s = ZF_STATUS_OK;
    Zflow__Envelope *reply = s_run_reply(d, &s);
    zf_test_expect_error(
        s, ZF_UNAVAILABLE,
        "no rendezvous endpoint is known for device " CPU(1) ", which this partition sends to");
    zflow__envelope__free_unpacked(reply, NULL);
    assert_true(zf_exec_service_take_peers_wanted(lonely));
    assert_false(zf_exec_service_take_peers_wanted(lonely));
    /* Told while the next step waits: it runs. */
    s_run(f->dealer[1], 2, h1, inc1, 71, NULL, NULL, p1->fetches[0].key);
    s_run(d, 3, h0, inc, 71, p0->feeds[0].key, x, NULL);
    while (!zf_exec_service_take_peers_wanted(lonely)) {
        zf_status_t w = zf_socket_wait_readable(d, 5);
        zf_status_clear(&w);
    }
    ASSERT_OK(
        zf_exec_service_set_peer(lonely, CPU(1), zf_exec_service_rendezvous_endpoint(f->svc[1])));
    reply = s_run_reply(d, &s);
    ASSERT_OK(s);
    zflow__envelope__free_unpacked(reply, NULL);
    reply = s_run_reply(f->dealer[1], &s);
    ASSERT_OK(s);
    s_expect_floats(reply->run_graph_reply->fetches[0]->tensor, 11, 24, 39);
    zflow__envelope__free_unpacked(reply, NULL);
    zf_tensor_unref(&x);
    free(h0);
    free(h1);
    zf_partition_set_destroy(&set);
    zf_socket_destroy(&d);
    zf_exec_service_destroy(&lonely);
    zf_device_destroy(&dev);
}

/* Waits (a bounded while) until the step table of svc satisfies ok. */
static zf_rendezvous_mgr_stats_t s_wait_table(s_fixture_t *f, zf_exec_service_t *svc,
                                              bool (*ok)(const zf_rendezvous_mgr_stats_t *))
{
    zf_rendezvous_mgr_stats_t st = zf_exec_service_rendezvous_stats(svc);
    for (int i = 0; i < WAIT_MS / 5 && !ok(&st); i++) {
        zf_status_t w = zf_socket_wait_readable(f->dealer[0], 5);
        zf_status_clear(&w);
        st = zf_exec_service_rendezvous_stats(svc);
    }
    if (!ok(&st)) fail_msg("the step table never got there");
    return st;
}

static bool s_one_refused(const zf_rendezvous_mgr_stats_t *st)
{
    return st->refused == 1;
}

static bool s_twelve_bytes_wait(const zf_rendezvous_mgr_stats_t *st)
{
    return st->unclaimed_bytes == 12;
}

/* CPU:0 runs first and pushes y (3 floats, 12 bytes) to CPU:1, whose step
 * has not started: over CPU:1's limit the tensor is refused and the step
 * fails there with the reason; at the limit it waits and the step runs. */
static void test_service_fails_a_step_whose_early_tensor_is_over_the_unclaimed_limit(void **state)
{
    s_fixture_t *f = *state;
    zf_partition_set_t *set = s_partition(f, s_graph, "x", "z");
    const zf_partition_t *p0 = s_part(set, f->dev[0]), *p1 = s_part(set, f->dev[1]);
    uint64_t inc0 = zf_exec_service_incarnation(f->svc[0]);
    uint64_t inc1 = zf_exec_service_incarnation(f->svc[1]);
    char *h0 = s_register_ok(f->dealer[0], p0->graph, inc0);
    char *h1 = s_register_ok(f->dealer[1], p1->graph, inc1);
    zf_tensor_t *x = s_floats3(1, 2, 3);
    zf_log_level_t level = zf_log_get_level();
    zf_log_set_level(ZF_LOG_ERROR); /* the refusal is logged */
    zf_exec_service_set_max_unclaimed_bytes(f->svc[1], 11);
    s_run(f->dealer[0], 1, h0, inc0, 600, p0->feeds[0].key, x, NULL);
    zf_status_t s = ZF_STATUS_OK;
    Zflow__Envelope *reply = s_run_reply(f->dealer[0], &s);
    ASSERT_OK(s); /* the sending side does not know yet */
    zflow__envelope__free_unpacked(reply, NULL);
    zf_rendezvous_mgr_stats_t st = s_wait_table(f, f->svc[1], s_one_refused);
    assert_int_equal(st.unclaimed_bytes, 0);
    assert_int_equal(st.evicted, 0);
    s_run(f->dealer[1], 2, h1, inc1, 600, NULL, NULL, p1->fetches[0].key);
    reply = s_run_reply(f->dealer[1], &s);
    assert_int_equal(reply->request_id, 2);
    assert_int_equal(s.code, ZF_RESOURCE_EXHAUSTED);
    const char *msg = zf_status_msg(&s);
    if (!strstr(msg, "step 600 has not started on this executor and cannot hold '") ||
        !strstr(msg, "': its 12 bytes are more than the 11 bytes allowed for the tensors of "
                     "steps waiting to start"))
        fail_msg("message '%s' does not name the step, the size and the limit", msg);
    zf_status_clear(&s);
    zflow__envelope__free_unpacked(reply, NULL);
    zf_log_set_level(level);
    Zflow__CleanupGraph cg;
    zflow__cleanup_graph__init(&cg);
    cg.step_id = 600;
    s_send_simple(f->dealer[1], 3, ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH, &cg);
    s_expect_status(f->dealer[1], 3, ZF_OK, NULL);
    /* Exactly at the limit the tensor waits, counted, until the step starts. */
    zf_exec_service_set_max_unclaimed_bytes(f->svc[1], 12);
    s_run(f->dealer[0], 4, h0, inc0, 601, p0->feeds[0].key, x, NULL);
    reply = s_run_reply(f->dealer[0], &s);
    ASSERT_OK(s);
    zflow__envelope__free_unpacked(reply, NULL);
    st = s_wait_table(f, f->svc[1], s_twelve_bytes_wait);
    assert_int_equal(st.unclaimed, 1);
    s_run(f->dealer[1], 5, h1, inc1, 601, NULL, NULL, p1->fetches[0].key);
    reply = s_run_reply(f->dealer[1], &s);
    ASSERT_OK(s);
    s_expect_floats(reply->run_graph_reply->fetches[0]->tensor, 11, 24, 39);
    zflow__envelope__free_unpacked(reply, NULL);
    st = zf_exec_service_rendezvous_stats(f->svc[1]);
    assert_int_equal(st.unclaimed_bytes, 0);
    assert_int_equal(st.unclaimed, 0);
    assert_int_equal(st.steps, 0); /* the good step was cleaned up when it ended */
    assert_int_equal(st.refused, 1);
    zf_tensor_unref(&x);
    free(h0);
    free(h1);
    zf_partition_set_destroy(&set);
}

static bool s_one_evicted(const zf_rendezvous_mgr_stats_t *st)
{
    return st->evicted == 1 && st->unclaimed == 1;
}

/* A step the table dropped unclaimed (evicted for a newer one under the
 * byte limit) has nothing left to abort: AbortStep answers OK, and a
 * RunGraph that comes for it later is refused with ABORTED. */
static void test_service_abort_of_a_dropped_step_is_a_no_op(void **state)
{
    s_fixture_t *f = *state;
    zf_partition_set_t *set = s_partition(f, s_graph, "x", "z");
    const zf_partition_t *p0 = s_part(set, f->dev[0]), *p1 = s_part(set, f->dev[1]);
    uint64_t inc0 = zf_exec_service_incarnation(f->svc[0]);
    uint64_t inc1 = zf_exec_service_incarnation(f->svc[1]);
    char *h0 = s_register_ok(f->dealer[0], p0->graph, inc0);
    char *h1 = s_register_ok(f->dealer[1], p1->graph, inc1);
    zf_tensor_t *x = s_floats3(1, 2, 3);
    zf_exec_service_set_max_unclaimed_bytes(f->svc[1], 12); /* one step's y */
    zf_status_t s = ZF_STATUS_OK;
    for (int64_t step = 700; step <= 701; step++) {
        s_run(f->dealer[0], (uint64_t)step, h0, inc0, step, p0->feeds[0].key, x, NULL);
        Zflow__Envelope *reply = s_run_reply(f->dealer[0], &s);
        ASSERT_OK(s);
        zflow__envelope__free_unpacked(reply, NULL);
    }
    zf_rendezvous_mgr_stats_t st = s_wait_table(f, f->svc[1], s_one_evicted);
    assert_int_equal(st.evicted, 1); /* step 700 went for 701 */
    Zflow__AbortStep ab;
    zflow__abort_step__init(&ab);
    ab.step_id = 700;
    s_send_simple(f->dealer[1], 7, ZFLOW__ENVELOPE__BODY_ABORT_STEP, &ab);
    s_expect_status(f->dealer[1], 7, ZF_OK, NULL);
    s_run(f->dealer[1], 8, h1, inc1, 700, NULL, NULL, p1->fetches[0].key);
    Zflow__Envelope *reply = s_run_reply(f->dealer[1], &s);
    assert_int_equal(reply->request_id, 8);
    zf_test_expect_error(s, ZF_ABORTED, "step 700 never started on this executor in time");
    zflow__envelope__free_unpacked(reply, NULL);
    s_run(f->dealer[1], 9, h1, inc1, 701, NULL, NULL, p1->fetches[0].key); /* the kept one runs */
    reply = s_run_reply(f->dealer[1], &s);
    ASSERT_OK(s);
    s_expect_floats(reply->run_graph_reply->fetches[0]->tensor, 11, 24, 39);
    zflow__envelope__free_unpacked(reply, NULL);
    zf_tensor_unref(&x);
    free(h0);
    free(h1);
    zf_partition_set_destroy(&set);
}

/* ---- the idle trim of the host memory cache ------------------------------------ */

/* The decision alone: due once idle_ms have passed since the executor was
 * last busy, once per idle spell, never with idle_ms <= 0. */
static void test_the_idle_trim_is_due_once_per_idle_spell(void **state)
{
    (void)state;
    zf_exec_idle_t idle = {0};
    zf_exec_idle_busy(&idle, 1000);
    assert_false(zf_exec_idle_trim_due(&idle, 0, 1000 + 1000000)); /* 0: never */
    assert_false(zf_exec_idle_trim_due(&idle, -5, 1000 + 1000000));
    assert_false(zf_exec_idle_trim_due(&idle, 60000, 1000));
    assert_false(zf_exec_idle_trim_due(&idle, 60000, 1000 + 59999));
    assert_true(zf_exec_idle_trim_due(&idle, 60000, 1000 + 60000));
    /* once per spell, however long it lasts */
    assert_false(zf_exec_idle_trim_due(&idle, 60000, 1000 + 60001));
    assert_false(zf_exec_idle_trim_due(&idle, 60000, 1000 + 10 * 60000));
    /* busy again: a new spell from then */
    zf_exec_idle_busy(&idle, 700000);
    assert_false(zf_exec_idle_trim_due(&idle, 60000, 700000 + 59999));
    assert_true(zf_exec_idle_trim_due(&idle, 60000, 700000 + 60000));
    /* a setting changed within a spell applies to it */
    zf_exec_idle_busy(&idle, 800000);
    assert_false(zf_exec_idle_trim_due(&idle, 0, 800000 + 5000));
    assert_true(zf_exec_idle_trim_due(&idle, 5000, 800000 + 5000));
    zf_exec_idle_busy(&idle, 900000);
    assert_false(zf_exec_idle_trim_due(&idle, 1, 900000));
    assert_true(zf_exec_idle_trim_due(&idle, 1, 900000 + 1));
}

static zf_host_memory_stats_t s_host_stats(void)
{
    zf_host_memory_stats_t st;
    zf_host_memory_stats(&st);
    return st;
}

/* Waits until the host memory cache holds nothing; fails after WAIT_MS. */
static void s_wait_cache_empty(void)
{
    for (int i = 0; i < WAIT_MS / 5 && s_host_stats().cached_bytes > 0; i++) {
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (s_host_stats().cached_bytes > 0) fail_msg("the idle executor never trimmed the cache");
}

/* Caches a freed block of bytes (a class size) and checks that it was. */
static void s_cache_a_block(size_t bytes)
{
    size_t cached = s_host_stats().cached_bytes;
    void *hint = NULL;
    assert_non_null(zf_host_memory_alloc(bytes, 64, true, &hint));
    zf_host_memory_free(hint);
    assert_int_equal(s_host_stats().cached_bytes, cached + bytes);
}

/* A service told to trim after 1 ms of idleness gives the cached blocks
 * back, then keeps what is freed later until it has been busy again: a
 * step restarts the idle spell, and the next spell trims again. */
static void test_an_idle_service_gives_the_host_cache_back_once_per_spell(void **state)
{
    s_fixture_t *f = *state;
    zf_host_memory_trim();
    zf_host_memory_stats_t start = s_host_stats();
    s_cache_a_block(1 << 20);
    zf_exec_service_set_host_cache_idle_ms(f->svc[0], 1);
    s_wait_cache_empty();
    zf_host_memory_stats_t st = s_host_stats();
    assert_int_equal(st.mapped_bytes, start.mapped_bytes);
    assert_int_equal(st.evictions, start.evictions); /* a trim, not an eviction */
    /* trimmed in this spell, the service trims no more until it has been
     * busy: a block freed now is cached, and a step's end starts the spell
     * that gives it back */
    s_cache_a_block(512 << 10);
    zf_partition_set_t *set = s_partition(f, s_local_graph, "x", "y");
    const zf_partition_t *p = s_part(set, f->dev[0]);
    uint64_t inc = zf_exec_service_incarnation(f->svc[0]);
    char *handle = s_register_ok(f->dealer[0], p->graph, inc);
    zf_tensor_t *x = s_floats3(1, -2, 3);
    s_run(f->dealer[0], 5, handle, inc, 5, p->feeds[0].key, x, p->fetches[0].key);
    zf_status_t s = ZF_STATUS_OK;
    Zflow__Envelope *reply = s_run_reply(f->dealer[0], &s);
    ASSERT_OK(s);
    s_expect_floats(reply->run_graph_reply->fetches[0]->tensor, 1, 4, 9);
    zflow__envelope__free_unpacked(reply, NULL);
    s_wait_cache_empty();
    st = s_host_stats();
    assert_int_equal(st.mapped_bytes, start.mapped_bytes);
    assert_int_equal(st.evictions, start.evictions);
    zf_tensor_unref(&x);
    free(handle);
    zf_partition_set_destroy(&set);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(t) cmocka_unit_test_setup_teardown(t, s_setup, s_teardown)
        T(test_service_runs_a_registered_partition_with_feeds_and_fetches_by_key),
        T(test_service_refuses_handles_of_an_earlier_incarnation_with_aborted),
        T(test_service_abort_step_ends_a_waiting_step_with_the_given_status),
        T(test_service_answers_malformed_requests_with_invalid_argument_and_keeps_serving),
        T(test_two_services_run_a_split_graph_like_the_local_session),
        T(test_service_shuts_down_with_steps_still_waiting),
        T(test_a_step_waits_for_the_endpoint_of_a_peer_it_sends_to),
        T(test_service_fails_a_step_whose_early_tensor_is_over_the_unclaimed_limit),
        T(test_service_abort_of_a_dropped_step_is_a_no_op),
        cmocka_unit_test(test_the_idle_trim_is_due_once_per_idle_spell),
        T(test_an_idle_service_gives_the_host_cache_back_once_per_spell),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
