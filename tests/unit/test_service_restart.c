/* An executor restarted under the same name (docs/service.md, "Membership
 * and failures"): real zflow-broker, zflow-scheduler and two zflow-executor
 * processes on 127.0.0.1 ephemeral ports, the MLP split over both; one
 * executor is killed and started again with its --name. Also, in one
 * process, the data plane and an executor service facing a peer that comes
 * back with a new incarnation. */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "common/tensor_proto.h"
#include "executor/devices/device.h"
#include "session/local_session.h"
#include "executor/rendezvous/remote.h"
#include "executor/worker/service.h"
#include "service_test_util.h"
#include "test_util.h"

#define EXAMPLES ZF_TEST_DATA_DIR "/../../examples"
#define CPU0     ZF_TEST_CPU(0)
#define CPU1     ZF_TEST_CPU(1)
#define WAIT_MS  10000
/* Each step's own timeout: far longer than a step takes, so a step that
 * ends with DEADLINE_EXCEEDED waited for a tensor that was lost. */
#define STEP_TIMEOUT_MS 20000
/* The cluster's heartbeat: every minute, an executor dead after two missed
 * (two minutes), both far past STEP_TIMEOUT_MS. Executors also fetch the
 * broker's listing only with a heartbeat, after registering and when a
 * step needs a peer. So within a step's time the old incarnation of a
 * restarted executor is never found dead by its silence, and no periodic
 * listing tells the others of the new one: only the new registration can. */
#define HEARTBEAT_MS     "60000"
#define HEARTBEAT_MISSES "2"

typedef struct {
    zf_test_service_t svc; /* two executors */
    zf_zctx_t *ctx;
    zf_socket_t *client; /* a DEALER to the broker */
    uint64_t next_id;
    Tensorflow__GraphDef *mlp; /* split over both executors */
    zf_tensor_t *x, *want;     /* a feed and the in-process result */
} fixture_t;

/* ---- the cluster --------------------------------------------------------- */

/* The control endpoint executor i printed when it registered. */
static void s_control_endpoint(const fixture_t *f, int i, char *buf, size_t size)
{
    const char *at = strstr(f->svc.executors[i].line, " control ");
    assert_non_null(at);
    at += strlen(" control ");
    size_t n = strcspn(at, " ");
    assert_true(n > 0 && n < size);
    memcpy(buf, at, n);
    buf[n] = '\0';
}

/* x:(2,4) through the MLP, its nodes alternating between the executors, so
 * tensors cross in both directions; the result it must give is computed in
 * this process. */
static void s_mlp_prepare(fixture_t *f)
{
    ASSERT_OK(zf_graphdef_read_file(EXAMPLES "/mlp.pbtxt", ZF_FORMAT_AUTO, &f->mlp));
    for (size_t i = 0; i < f->mlp->n_node; i++) {
        Tensorflow__NodeDef *nd = f->mlp->node[i];
        if (nd->device != protobuf_c_empty_string) free(nd->device);
        nd->device = strdup(i % 2 ? CPU1 : CPU0);
    }
    static const float v[8] = {1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, -0.75f};
    zf_shape_t shape = ZF_SHAPE(2, 4);
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, sizeof v, &f->x));
    zf_local_session_options_t lo = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    lo.devices = "cpu:2";
    zf_local_session_t *local = NULL;
    ASSERT_OK(zf_local_session_new(f->mlp, &lo, &local));
    const char *feed = "x", *fetch = "probs";
    ASSERT_OK(zf_local_session_run(local, &feed, &f->x, 1, &fetch, 1, NULL, 0, &f->want));
    zf_local_session_destroy(&local);
}

/* The service with the slow heartbeat above. */
static int s_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    *state = f;
    s_mlp_prepare(f);
    const char *broker_args[] = {"--heartbeat-ms", HEARTBEAT_MS, "--heartbeat-misses",
                                 HEARTBEAT_MISSES, NULL};
    zf_test_service_start(&f->svc, broker_args, 2, WAIT_MS);
    ASSERT_OK(zf_zctx_new(&f->ctx));
    f->client = zf_test_dealer(f->ctx, f->svc.broker.endpoint);
    f->next_id = 1;
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    if (!f) return 0;
    zf_socket_destroy(&f->client);
    zf_zctx_destroy(&f->ctx);
    int rc = zf_test_service_stop(&f->svc, WAIT_MS);
    zf_graphdef_free(&f->mlp);
    zf_tensor_unref(&f->x);
    zf_tensor_unref(&f->want);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* ---- requests ------------------------------------------------------------ */

/* Sends env on s and returns the reply to it (checked to echo its id). */
static Zflow__Envelope *s_call(fixture_t *f, zf_socket_t *s, Zflow__Envelope *env)
{
    return zf_test_call(s, env, f->next_id++, STEP_TIMEOUT_MS + WAIT_MS);
}

/* Sends env straight to a control endpoint; the reply, checked to be a
 * body one. */
static Zflow__Envelope *s_control_call(fixture_t *f, const char *control, Zflow__Envelope *env,
                                       Zflow__Envelope__BodyCase body)
{
    zf_socket_t *s = zf_test_dealer(f->ctx, control);
    Zflow__Envelope *rep = s_call(f, s, env);
    zf_socket_destroy(&s);
    assert_int_equal(rep->body_case, body);
    return rep;
}

/* The status of RegisterGraphReply rep, and its handle on success (caller
 * frees; handle may be NULL); frees rep. */
static zf_status_t s_registered(Zflow__Envelope *rep, char **handle)
{
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY);
    zf_status_t st = zf_status_from_proto(rep->register_graph_reply->status);
    if (handle) *handle = zf_ok(st) ? strdup(rep->register_graph_reply->graph_handle) : NULL;
    zflow__envelope__free_unpacked(rep, NULL);
    return st;
}

static char *s_session_create(fixture_t *f)
{
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = f->mlp;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION;
    env.create_session = &cs;
    Zflow__Envelope *rep = s_call(f, f->client, &env);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->create_session_reply->status));
    char *id = strdup(rep->create_session_reply->session);
    zflow__envelope__free_unpacked(rep, NULL);
    return id;
}

/* One MLP step with STEP_TIMEOUT_MS: OK and exactly the in-process result. */
static void s_expect_mlp_runs(fixture_t *f, const char *session)
{
    Tensorflow__TensorProto *tp = NULL;
    ASSERT_OK(zf_tensor_to_proto(f->x, &tp, true));
    zf_test_step_msg_t m;
    Zflow__Envelope *rep =
        s_call(f, f->client, zf_test_step_msg(&m, session, "x:0", tp, "probs", STEP_TIMEOUT_MS));
    tensorflow__tensor_proto__free_unpacked(tp, NULL);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->run_step_reply->status));
    assert_int_equal(rep->run_step_reply->n_fetches, 1);
    zf_tensor_t *got = NULL;
    ASSERT_OK(zf_tensor_from_proto(rep->run_step_reply->fetches[0]->tensor, &got));
    assert_int_equal(zf_tensor_nbytes(got), zf_tensor_nbytes(f->want));
    assert_memory_equal(zf_tensor_data(got), zf_tensor_data(f->want), zf_tensor_nbytes(got));
    zf_tensor_unref(&got);
    zflow__envelope__free_unpacked(rep, NULL);
}

/* The incarnation the broker lists for device; 0 when it is not listed. */
static uint64_t s_listed_incarnation(fixture_t *f, const char *device)
{
    Zflow__ListExecutors le = ZFLOW__LIST_EXECUTORS__INIT;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS;
    env.list_executors = &le;
    Zflow__Envelope *rep = s_call(f, f->client, &env);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS_REPLY);
    uint64_t inc = 0;
    const Zflow__ListExecutorsReply *r = rep->list_executors_reply;
    for (size_t i = 0; i < r->n_executors; i++)
        if (strcmp(r->executors[i]->device->name, device) == 0)
            inc = r->executors[i]->device->incarnation;
    zflow__envelope__free_unpacked(rep, NULL);
    return inc;
}

/* RegisterGraph of a one-Const graph straight to a control endpoint; the
 * reply's status, and the handle on success (caller frees). */
static zf_status_t s_register_const(fixture_t *f, const char *control, uint64_t incarnation,
                                    char **handle)
{
    const char *text = "node { name: 'c' op: 'Const' device: '" CPU1 "'"
                       "  attr { key: 'dtype' value { type: DT_FLOAT } }"
                       "  attr { key: 'value' value { tensor { dtype: DT_FLOAT "
                       "float_val: 1 } } } }";
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    Zflow__RegisterGraph rg = ZFLOW__REGISTER_GRAPH__INIT;
    rg.session = "restart-test";
    rg.graph = gd;
    rg.incarnation = incarnation;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH;
    env.register_graph = &rg;
    Zflow__Envelope *rep =
        s_control_call(f, control, &env, ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY);
    zf_graphdef_free(&gd);
    return s_registered(rep, handle);
}

/* RunGraph of handle (as of incarnation) straight to a control endpoint;
 * the reply's status. */
static zf_status_t s_run_graph(fixture_t *f, const char *control, const char *handle,
                               uint64_t incarnation)
{
    Zflow__RunGraph rg = ZFLOW__RUN_GRAPH__INIT;
    rg.graph_handle = (char *)handle;
    rg.incarnation = incarnation;
    rg.step_id = 424242;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_GRAPH;
    env.run_graph = &rg;
    Zflow__Envelope *rep = s_control_call(f, control, &env, ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY);
    zf_status_t st = zf_status_from_proto(rep->run_graph_reply->status);
    zflow__envelope__free_unpacked(rep, NULL);
    return st;
}

/* SIGKILL executor 1 and start it again under the same name: it registers
 * with a new incarnation (printing its line once the broker accepted it). */
static void s_restart_executor_1(fixture_t *f)
{
    assert_int_equal(zf_test_child_stop(&f->svc.executors[1], SIGKILL, WAIT_MS), 128 + SIGKILL);
    zf_test_executor_start(&f->svc.executors[1], f->svc.broker.endpoint, 1, WAIT_MS);
}

/* Checks in the broker's log that CPU:1's previous incarnation was taken
 * for dead when its connection closed (not for missed heartbeats), and that
 * incarnation inc holds the name now. */
static void s_expect_replaced(fixture_t *f, uint64_t inc)
{
    char want[256];
    snprintf(want, sizeof want, "executor " CPU1 " died: its connection to the broker closed");
    if (!zf_test_broker_log_contains(&f->svc.broker, want))
        fail_msg("the broker's log lacks '%s'", want);
    assert_true(s_listed_incarnation(f, CPU1) == inc);
}

/* ---- tests -----------------------------------------------------------------
 */

static void test_service_runs_the_next_steps_at_once_after_an_executor_restarts(void **state)
{
    fixture_t *f = *state;
    char *session = s_session_create(f);
    for (int k = 0; k < 2; k++) s_expect_mlp_runs(f, session);
    uint64_t before = s_listed_incarnation(f, CPU1);
    assert_true(before != 0);

    s_restart_executor_1(f);
    uint64_t after = s_listed_incarnation(f, CPU1);
    assert_true(after != 0 && after != before);
    s_expect_replaced(f, after);
    /* At once: the old CPU:1 is not found dead by missed heartbeats within
     * a step's timeout (see HEARTBEAT_MS), and a RunGraph or a tensor sent
     * to it would leave the step waiting for that timeout: each step passes
     * only because the broker dropped the old incarnation when its
     * connection closed and the new registration took its name. */
    for (int k = 0; k < 5; k++) s_expect_mlp_runs(f, session);

    s_restart_executor_1(f); /* again, to the same effect */
    uint64_t again = s_listed_incarnation(f, CPU1);
    assert_true(again != 0 && again != after && again != before);
    s_expect_replaced(f, again);
    for (int k = 0; k < 3; k++) s_expect_mlp_runs(f, session);
    /* the broker ran with the slow heartbeat, and took no executor for dead
     * for its silence */
    assert_true(zf_test_broker_log_contains(
        &f->svc.broker, "heartbeat " HEARTBEAT_MS " ms, dead after " HEARTBEAT_MISSES " misses"));
    assert_false(zf_test_broker_log_contains(&f->svc.broker, "no heartbeat for"));
    free(session);
}

static void test_service_refuses_an_old_graph_handle_after_an_executor_restarts(void **state)
{
    fixture_t *f = *state;
    char control[256];
    s_control_endpoint(f, 1, control, sizeof control);
    uint64_t old_inc = s_listed_incarnation(f, CPU1);
    char *handle = NULL;
    ASSERT_OK(s_register_const(f, control, old_inc, &handle));
    ASSERT_OK(s_run_graph(f, control, handle, old_inc));

    s_restart_executor_1(f);
    s_control_endpoint(f, 1, control, sizeof control);
    uint64_t new_inc = s_listed_incarnation(f, CPU1);
    assert_true(new_inc != 0 && new_inc != old_inc);
    zf_status_t st = s_run_graph(f, control, handle, old_inc);
    assert_int_equal(st.code, ZF_ABORTED);
    assert_string_equal(st.msg, "graph handle not found; the executor restarted");
    zf_status_clear(&st);
    /* the handle is refused even when the request names the new incarnation */
    st = s_run_graph(f, control, handle, new_inc);
    assert_int_equal(st.code, ZF_ABORTED);
    assert_string_equal(st.msg, "graph handle not found; the executor restarted");
    zf_status_clear(&st);
    zf_test_expect_error(s_register_const(f, control, old_inc, NULL), ZF_ABORTED,
                         "(the executor restarted)");

    /* the service goes on: sessions use the new incarnation */
    char *session = s_session_create(f);
    for (int k = 0; k < 3; k++) s_expect_mlp_runs(f, session);
    free(session);
    free(handle);
}

/* ---- the data plane in one process ------------------------------------------
 */

#define DEV_A  CPU0
#define DEV_B  CPU1
#define DEV_C  "/job:localhost/replica:0/task:0/device:CPU:2"
#define KEY_AB DEV_A ";0000000000000001;" DEV_B ";t:0;0:0"

typedef struct {
    zf_zctx_t *ctx;
    zf_rendezvous_mgr_t *mgr[3];
    zf_remote_t *r[3]; /* A, then two incarnations of B */
} s_remotes_t;

static zf_tensor_t *s_scalar(float v)
{
    zf_tensor_t *t = NULL;
    zf_shape_t shape = ZF_SHAPE(1);
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, &v, sizeof v, &t));
    return t;
}

/* Sends v from A to B for step through A's remote-send hook. */
static void s_send_ab(s_remotes_t *p, int64_t step, float v)
{
    zf_rendezvous_t *rv = NULL;
    ASSERT_OK(zf_remote_step_rendezvous(p->r[0], step, &rv));
    zf_tensor_t *t = s_scalar(v);
    ASSERT_OK(zf_rendezvous_send(rv, KEY_AB, t, false));
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&rv);
}

/* The value remote i received for step, waiting up to timeout_ms; NAN when
 * none came. */
static float s_recv_b(s_remotes_t *p, int i, int64_t step, int timeout_ms)
{
    zf_rendezvous_t *rv = NULL;
    ASSERT_OK(zf_remote_step_rendezvous(p->r[i], step, &rv));
    zf_tensor_t *t = NULL;
    bool dead = false;
    zf_status_t s = zf_rendezvous_recv(rv, KEY_AB, timeout_ms, &t, &dead);
    float v = zf_ok(s) && t ? *(const float *)zf_tensor_data(t) : (float)NAN;
    zf_status_clear(&s);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&rv);
    zf_remote_cleanup_step(p->r[i], step, NULL);
    return v;
}

static void test_remote_reconnects_a_peer_that_comes_back_with_a_new_incarnation(void **state)
{
    (void)state;
    s_remotes_t p = {0};
    ASSERT_OK(zf_zctx_new(&p.ctx));
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(zf_rendezvous_mgr_new(&p.mgr[i]));
        ASSERT_OK(zf_remote_new(p.ctx, p.mgr[i], NULL, &p.r[i]));
        ASSERT_OK(zf_remote_attach(p.r[i], i == 0 ? DEV_A : DEV_B));
    }
    char b1[256], b2[256];
    snprintf(b1, sizeof b1, "%s", zf_remote_endpoint(p.r[1]));
    snprintf(b2, sizeof b2, "%s", zf_remote_endpoint(p.r[2]));
    bool changed = false;
    ASSERT_OK(zf_remote_update_peer(p.r[0], DEV_B, b1, 0x11, &changed));
    assert_true(changed);
    assert_true(zf_remote_wait_peer_incarnation(p.r[0], DEV_B, 0x11, 0));
    s_send_ab(&p, 1, 1.0f);
    assert_true(s_recv_b(&p, 1, 1, WAIT_MS) == 1.0f);

    /* B's first incarnation dies; a tensor sent meanwhile waits in A's queue
     * for an endpoint nobody will bind again */
    zf_remote_destroy(&p.r[1]);
    s_send_ab(&p, 2, 2.0f);
    assert_false(zf_remote_wait_peer_incarnation(p.r[0], DEV_B, 0x22, 0));
    assert_false(zf_remote_wait_peer_incarnation(p.r[0], DEV_B, 0x22, 50));
    ASSERT_OK(zf_remote_update_peer(p.r[0], DEV_B, b1, 0x11, &changed)); /* a repeat */
    assert_false(changed);
    ASSERT_OK(zf_remote_update_peer(p.r[0], DEV_B, b2, 0x22, &changed));
    assert_true(changed);
    assert_int_equal(zf_remote_peer_incarnation(p.r[0], DEV_B), 0x22);
    assert_true(zf_remote_wait_peer_incarnation(p.r[0], DEV_B, 0x22, 0));
    s_send_ab(&p, 3, 3.0f);
    assert_true(s_recv_b(&p, 2, 3, WAIT_MS) == 3.0f);
    /* the tensor queued for the dead incarnation was dropped with its
     * socket, not delivered to the new one */
    assert_true(isnan(s_recv_b(&p, 2, 2, 200)));
    /* the receiver counts a value just after handing it over: wait for it.
     * A value whose step closes while it is handed over (the receive above
     * cleans its step up at once) counts as dropped, so the new incarnation
     * must have seen exactly one value, whichever way it was counted. */
    zf_remote_stats_t rs = zf_remote_stats(p.r[2]);
    for (int i = 0; i < WAIT_MS / 5 && rs.delivered + rs.dropped < 1; i++) {
        usleep(5000);
        rs = zf_remote_stats(p.r[2]);
    }
    usleep(50000); /* a second value, were one coming, has had time to arrive */
    rs = zf_remote_stats(p.r[2]);
    assert_int_equal(rs.delivered + rs.dropped, 1);
    assert_int_equal(rs.malformed, 0);

    /* an incarnation learnt for the same endpoint keeps the socket */
    ASSERT_OK(zf_remote_set_peer(p.r[0], DEV_C, b2));
    assert_int_equal(zf_remote_peer_incarnation(p.r[0], DEV_C), 0);
    ASSERT_OK(zf_remote_update_peer(p.r[0], DEV_C, b2, 0x33, &changed));
    assert_true(changed);
    assert_int_equal(zf_remote_peer_incarnation(p.r[0], DEV_C), 0x33);
    zf_test_expect_error(zf_remote_update_peer(p.r[0], DEV_B, "", 0x44, NULL), ZF_INVALID_ARGUMENT,
                         "a peer needs a device name and a rendezvous endpoint");
    assert_int_equal(
        zf_remote_peer_incarnation(p.r[0], "/job:nobody/replica:0/task:0/device:CPU:0"), 0);

    for (int i = 0; i < 3; i++) zf_remote_destroy(&p.r[i]);
    for (int i = 0; i < 3; i++) zf_rendezvous_mgr_destroy(&p.mgr[i]);
    zf_zctx_destroy(&p.ctx);
}

/* ---- an executor service in one process ------------------------------------ */

/* c = [5] on CPU:0, pushed to CPU:1 by a _Send (key KEY_SVC). */
#define KEY_SVC DEV_A ";0000000000000007;" DEV_B ";edge_1_c;0:0"
static const char s_send_graph[] =
    "node { name: 'c' op: 'Const' device: '" DEV_A "'"
    "  attr { key: 'dtype' value { type: DT_FLOAT } }"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 1 } }"
    "    float_val: 5 } } } }"
    "node { name: 's' op: '_Send' input: 'c' device: '" DEV_A "'"
    "  attr { key: 'T' value { type: DT_FLOAT } }"
    "  attr { key: 'tensor_name' value { s: 'edge_1_c' } }"
    "  attr { key: 'send_device' value { s: '" DEV_A "' } }"
    "  attr { key: 'send_device_incarnation' value { i: 7 } }"
    "  attr { key: 'recv_device' value { s: '" DEV_B "' } }"
    "  attr { key: 'client_terminated' value { b: false } } }";

/* RegisterGraph of s_send_graph naming CPU:1 (and, when bad, a peer without
 * a name) as placed for peer_inc; the status, and the handle on success. */
static zf_status_t s_register_send(zf_socket_t *dealer, uint64_t inc, uint64_t peer_inc, bool bad,
                                   char **handle)
{
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(s_send_graph, strlen(s_send_graph), ZF_FORMAT_PBTXT, &gd));
    Tensorflow__DeviceAttributes attrs[2] = {TENSORFLOW__DEVICE_ATTRIBUTES__INIT,
                                             TENSORFLOW__DEVICE_ATTRIBUTES__INIT};
    attrs[0].name = DEV_B;
    attrs[0].incarnation = peer_inc;
    Zflow__ExecutorInfo infos[2] = {ZFLOW__EXECUTOR_INFO__INIT, ZFLOW__EXECUTOR_INFO__INIT};
    infos[0].device = &attrs[0];
    infos[1].device = &attrs[1];
    Zflow__ExecutorInfo *peers[2] = {bad ? &infos[1] : &infos[0], &infos[0]};
    Zflow__RegisterGraph rg = ZFLOW__REGISTER_GRAPH__INIT;
    rg.session = "s";
    rg.graph = gd;
    rg.incarnation = inc;
    rg.n_peers = bad ? 2 : 1;
    rg.peers = peers;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH;
    env.register_graph = &rg;
    Zflow__Envelope *rep = zf_test_call(dealer, &env, 1, WAIT_MS);
    zf_graphdef_free(&gd);
    return s_registered(rep, handle);
}

/* Starts step of handle without waiting for its reply. */
static void s_run_start(zf_socket_t *dealer, const char *handle, uint64_t inc, int64_t step)
{
    Zflow__RunGraph rg = ZFLOW__RUN_GRAPH__INIT;
    rg.graph_handle = (char *)handle;
    rg.incarnation = inc;
    rg.step_id = step;
    zf_test_send_body(dealer, (uint64_t)step, ZFLOW__ENVELOPE__BODY_RUN_GRAPH, &rg);
}

static zf_status_t s_run_finish(zf_socket_t *dealer, int64_t step)
{
    Zflow__Envelope *rep = zf_test_recv(dealer, WAIT_MS, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, (uint64_t)step);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY);
    zf_status_t st = zf_status_from_proto(rep->run_graph_reply->status);
    zflow__envelope__free_unpacked(rep, NULL);
    return st;
}

static void test_service_step_waits_for_the_incarnation_of_a_peer_it_was_placed_for(void **state)
{
    (void)state;
    zf_zctx_t *ctx = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    zf_device_t *dev = NULL;
    ASSERT_OK(zf_device_cpu_new(DEV_A, 1, &dev));
    zf_exec_service_options_t opts = {NULL, NULL, 300, 0};
    zf_exec_service_t *svc = NULL;
    ASSERT_OK(zf_exec_service_new(ctx, dev, &opts, &svc));
    s_remotes_t p = {0}; /* two incarnations of CPU:1's data plane */
    for (int i = 1; i < 3; i++) {
        ASSERT_OK(zf_rendezvous_mgr_new(&p.mgr[i]));
        ASSERT_OK(zf_remote_new(ctx, p.mgr[i], NULL, &p.r[i]));
        ASSERT_OK(zf_remote_attach(p.r[i], DEV_B));
    }
    zf_socket_t *dealer = zf_test_dealer(ctx, zf_exec_service_control_endpoint(svc));
    uint64_t inc = zf_exec_service_incarnation(svc);
    zf_test_expect_error(s_register_send(dealer, inc, 0x22, true, NULL), ZF_INVALID_ARGUMENT,
                         "RegisterGraph peer 0 has no device name");
    assert_int_equal(zf_exec_service_num_graphs(svc), 0);

    /* the scheduler placed the graph for CPU:1's incarnation 0x22, but this
     * executor knows only 0x11: the step waits for 0x22, then fails */
    ASSERT_OK(zf_exec_service_update_peer(svc, DEV_B, zf_remote_endpoint(p.r[1]), 0x11, NULL));
    char *handle = NULL;
    ASSERT_OK(s_register_send(dealer, inc, 0x22, false, &handle));
    s_run_start(dealer, handle, inc, 1);
    zf_test_expect_error(s_run_finish(dealer, 1), ZF_UNAVAILABLE,
                         "device " DEV_B ", which this partition sends to, was placed as "
                         "incarnation 0000000000000022, but after 300 ms the rendezvous endpoint "
                         "known here is still that of incarnation 0000000000000011");
    assert_true(zf_exec_service_take_peers_wanted(svc));
    assert_int_equal(zf_remote_stats(p.r[1]).delivered, 0);

    /* told while the next step waits: it sends to the new incarnation only */
    s_run_start(dealer, handle, inc, 2);
    while (!zf_exec_service_take_peers_wanted(svc)) usleep(1000);
    bool changed = false;
    ASSERT_OK(zf_exec_service_update_peer(svc, DEV_B, zf_remote_endpoint(p.r[2]), 0x22, &changed));
    assert_true(changed);
    assert_int_equal(zf_exec_service_peer_incarnation(svc, DEV_B), 0x22);
    ASSERT_OK(s_run_finish(dealer, 2));
    zf_rendezvous_t *rv = NULL;
    ASSERT_OK(zf_remote_step_rendezvous(p.r[2], 2, &rv));
    zf_tensor_t *t = NULL;
    bool dead = true;
    ASSERT_OK(zf_rendezvous_recv(rv, KEY_SVC, WAIT_MS, &t, &dead));
    assert_false(dead);
    assert_true(*(const float *)zf_tensor_data(t) == 5.0f);
    zf_tensor_unref(&t);
    zf_rendezvous_unref(&rv);
    zf_remote_cleanup_step(p.r[2], 2, NULL);
    assert_int_equal(zf_remote_stats(p.r[1]).delivered, 0);

    free(handle);
    zf_socket_destroy(&dealer);
    zf_exec_service_destroy(&svc);
    zf_device_destroy(&dev);
    for (int i = 1; i < 3; i++) zf_remote_destroy(&p.r[i]);
    for (int i = 1; i < 3; i++) zf_rendezvous_mgr_destroy(&p.mgr[i]);
    zf_zctx_destroy(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remote_reconnects_a_peer_that_comes_back_with_a_new_incarnation),
        cmocka_unit_test(test_service_step_waits_for_the_incarnation_of_a_peer_it_was_placed_for),
        cmocka_unit_test_setup_teardown(
            test_service_runs_the_next_steps_at_once_after_an_executor_restarts, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_service_refuses_an_old_graph_handle_after_an_executor_restarts, s_setup,
            s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
