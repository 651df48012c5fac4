/* Tests of a secure service: a broker, two executors and a scheduler run as
 * real processes with CurveZMQ keys (ZFLOW_KEYS) on 127.0.0.1, and the test
 * plays attackers holding the wrong keys, or none: each must be refused at
 * the handshake (UNAUTHENTICATED) or per message (PERMISSION_DENIED), while
 * a client with keys runs steps as on a plain cluster. */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>
#include <cmocka.h>

#include "client/zflow_client.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/keys.h"
#include "common/transport.h"
#include "scheduler/graph/partition.h"
#include "service_test_util.h"
#include "test_util.h"

#define CPU(k)  ZF_TEST_CPU(k)
#define WAIT_MS 10000

typedef struct {
    char keys[64];
    zf_test_service_t svc;
    zf_zctx_t *ctx;         /* plain: the attackers set their keys themselves */
    zf_socket_t *socks[16]; /* the attackers' sockets, closed by the teardown */
    int n_socks;
    char control[2][128], rendezvous[2][128];
} fixture_t;

static void s_rm(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* The control and rendezvous endpoints an executor printed. */
static void s_endpoints(const char *line, char *control, char *rendezvous)
{
    const char *c = strstr(line, " control ");
    assert_non_null(c);
    assert_int_equal(sscanf(c, " control %127s rendezvous %127s", control, rendezvous), 2);
}

static int s_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    *state = f;
    snprintf(f->keys, sizeof f->keys, "/tmp/zflow-sec-test-XXXXXX");
    assert_non_null(mkdtemp(f->keys));
    ASSERT_OK(zf_keygen_cluster(f->keys));
    char sub[96];
    snprintf(sub, sizeof sub, "%s/schedulers", f->keys);
    ASSERT_OK(zf_keygen(sub, "other")); /* a second trusted scheduler */
    /* every process reads its keys from the environment */
    setenv("ZFLOW_KEYS", f->keys, 1);
    const char *bargs[] = {"--heartbeat-ms", "200", "--heartbeat-misses", "10", NULL};
    zf_test_service_start(&f->svc, bargs, 2, WAIT_MS);
    unsetenv("ZFLOW_KEYS");
    for (int k = 0; k < 2; k++)
        s_endpoints(f->svc.executors[k].line, f->control[k], f->rendezvous[k]);
    ASSERT_OK(zf_zctx_new(&f->ctx));
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    if (!f) return 0;
    for (int i = 0; i < f->n_socks; i++) zf_socket_destroy(&f->socks[i]);
    zf_zctx_destroy(&f->ctx);
    int rc = zf_test_service_stop(&f->svc, WAIT_MS);
    s_rm(f->keys);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* A socket presenting the keypair DIR/<key>.key (NULL: no CURVE at all) to
 * a server whose public key is DIR/<server>.pub, connected to endpoint,
 * its handshakes watched. */
static zf_socket_t *s_sock(fixture_t *f, zf_socket_type_t type, const char *key, const char *server,
                           const char *endpoint)
{
    zf_socket_t *s = NULL;
    ASSERT_OK(zf_socket_new(f->ctx, type, &s));
    int zero = 0;
    zmq_setsockopt(zf_socket_handle(s), ZMQ_LINGER, &zero, sizeof zero);
    if (key) {
        char path[160], sec[ZF_KEY_Z85_LEN + 1], pub[ZF_KEY_Z85_LEN + 1], srv[ZF_KEY_Z85_LEN + 1];
        snprintf(path, sizeof path, "%s/%s.key", f->keys, key);
        ASSERT_OK(zf_key_read(path, sec));
        assert_int_equal(zmq_curve_public(pub, sec), 0);
        snprintf(path, sizeof path, "%s/%s.pub", f->keys, server);
        ASSERT_OK(zf_key_read(path, srv));
        void *h = zf_socket_handle(s);
        assert_int_equal(zmq_setsockopt(h, ZMQ_CURVE_SERVERKEY, srv, ZF_KEY_Z85_LEN + 1), 0);
        assert_int_equal(zmq_setsockopt(h, ZMQ_CURVE_PUBLICKEY, pub, ZF_KEY_Z85_LEN + 1), 0);
        assert_int_equal(zmq_setsockopt(h, ZMQ_CURVE_SECRETKEY, sec, ZF_KEY_Z85_LEN + 1), 0);
    }
    ASSERT_OK(zf_socket_watch_handshakes(s));
    ASSERT_OK(zf_socket_connect(s, endpoint));
    assert_true(f->n_socks < 16);
    f->socks[f->n_socks++] = s;
    return s;
}

/* The handshake failure of s within 5 s; fails the test without one. */
static zf_status_t s_handshake_failure(zf_socket_t *s)
{
    int64_t deadline = zf_test_now_ms() + 5000;
    for (;;) {
        zf_status_t st = zf_socket_handshake_failure(s);
        if (!zf_ok(st)) return st;
        if (zf_test_now_ms() > deadline) fail_msg("no handshake failure within 5 s");
        usleep(20000);
    }
}

static void s_expect_reply_status(zf_socket_t *s, uint64_t id, Zflow__Envelope__BodyCase body,
                                  void *msg, int code, const char *text)
{
    zf_test_send_body(s, id, body, msg);
    zf_test_expect_status(s, id, code, text);
}

/* ---- clients --------------------------------------------------------------- */

static void test_a_client_with_keys_runs_steps_across_executors(void **state)
{
    fixture_t *f = *state;
    zf_client_t *c = NULL;
    ASSERT_OK(zf_client_connect_keys(f->svc.broker.endpoint, f->keys, &c));
    const char *devices[2] = {CPU(0), CPU(1)};
    Tensorflow__GraphDef *gd = zf_test_neg_chain(devices, 2);
    char *session = NULL;
    ASSERT_OK(zf_client_session_create(c, gd, NULL, &session));
    zf_shape_t shape = zf_shape_scalar();
    zf_tensor_t *x = NULL;
    ASSERT_OK(zf_tensor_new(ZF_FLOAT, &shape, &x));
    const char *feed_names[1] = {"x"}, *fetches[1] = {"y"};
    zf_client_step_t step = {feed_names, &x, 1, fetches, 1, NULL, 0};
    for (int r = 0; r < 3; r++) {
        *(float *)zf_tensor_data(x) = (float)r + 0.5f;
        zf_tensor_t *got[1] = {NULL};
        ASSERT_OK(zf_client_session_run(c, session, &step, WAIT_MS, got));
        assert_true(*(const float *)zf_tensor_data(got[0]) == -((float)r + 0.5f));
        zf_tensor_unref(&got[0]);
    }
    ASSERT_OK(zf_client_session_close(c, session));
    free(session);
    zf_tensor_unref(&x);
    zf_graphdef_free(&gd);
    zf_client_destroy(&c);
}

static void test_a_client_without_keys_is_unauthenticated_at_once(void **state)
{
    fixture_t *f = *state;
    zf_client_t *c = NULL;
    ASSERT_OK(zf_client_connect(f->svc.broker.endpoint, &c));
    const char *devices[2] = {CPU(0), CPU(1)};
    Tensorflow__GraphDef *gd = zf_test_neg_chain(devices, 2);
    char *session = NULL;
    int64_t start = zf_test_now_ms();
    zf_status_t s = zf_client_session_create(c, gd, NULL, &session);
    int64_t took = zf_test_now_ms() - start;
    assert_null(session);
    zf_test_expect_error(s, ZF_UNAUTHENTICATED,
                         "a secure service needs keys: --keys DIR or ZFLOW_KEYS=DIR");
    assert_true(took < 2500); /* before the 3 s silence limit: the handshake said why */
    zf_graphdef_free(&gd);
    zf_client_destroy(&c);
}

static void test_a_client_with_an_untrusted_key_is_refused_by_zap(void **state)
{
    fixture_t *f = *state;
    /* its own client key, and the service's real public keys */
    char dir[96], cmd[512];
    snprintf(dir, sizeof dir, "%s-mallory", f->keys);
    ASSERT_OK(zf_keygen(dir, "client"));
    snprintf(cmd, sizeof cmd, "cp %s/broker.pub %s/scheduler.pub %s/", f->keys, f->keys, dir);
    assert_int_equal(system(cmd), 0);
    zf_client_t *c = NULL;
    ASSERT_OK(zf_client_connect_keys(f->svc.broker.endpoint, dir, &c));
    const char *devices[2] = {CPU(0), CPU(1)};
    Tensorflow__GraphDef *gd = zf_test_neg_chain(devices, 2);
    char *session = NULL;
    zf_status_t s = zf_client_session_create(c, gd, NULL, &session);
    zf_test_expect_error(s, ZF_UNAUTHENTICATED,
                         "refused this process's CURVE key (ZAP status 400)");
    char pub[ZF_KEY_Z85_LEN + 1], path[160], want[256];
    snprintf(path, sizeof path, "%s/client.pub", dir);
    ASSERT_OK(zf_key_read(path, pub));
    snprintf(want, sizeof want, "refused CURVE key %s from 127.0.0.1: not a trusted key in %s", pub,
             f->keys);
    assert_true(zf_test_broker_log_contains(&f->svc.broker, want));
    zf_graphdef_free(&gd);
    zf_client_destroy(&c);
    s_rm(dir);
}

static void test_cli_commands_need_keys_on_a_secure_cluster(void **state)
{
    fixture_t *f = *state;
    char args[512], out[8192];
    snprintf(args, sizeof args, "executors --broker %s", f->svc.broker.endpoint);
    assert_int_equal(zf_test_run_program(ZF_BIN_DIR "/zflow", args, out, sizeof out), 1);
    assert_non_null(strstr(out, "zflow executors: UNAUTHENTICATED: "));
    assert_non_null(strstr(out, "a secure service needs keys: --keys DIR or ZFLOW_KEYS=DIR"));
    snprintf(args, sizeof args, "executors --broker %s --keys %s", f->svc.broker.endpoint, f->keys);
    assert_int_equal(zf_test_run_program(ZF_BIN_DIR "/zflow", args, out, sizeof out), 0);
    /* a client sees names and loads, not where executors listen */
    assert_non_null(strstr(out, CPU(0) " CPU load="));
    assert_non_null(strstr(out, " control=- rendezvous=-\n"));
    snprintf(args, sizeof args, "run %s/neg.pbtxt --broker %s --feed x=2 --fetch y", f->keys,
             f->svc.broker.endpoint);
    char graph[256];
    snprintf(graph, sizeof graph, "%s/neg.pbtxt", f->keys);
    FILE *g = fopen(graph, "w");
    assert_non_null(g);
    fprintf(g,
            "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"
            "node { name: 'y' op: 'Neg' input: 'x' attr { key: 'T' value { type: DT_FLOAT } } }");
    fclose(g);
    assert_int_equal(zf_test_run_program(ZF_BIN_DIR "/zflow", args, out, sizeof out), 1);
    assert_non_null(strstr(out, "zflow run: UNAUTHENTICATED: "));
    setenv("ZFLOW_KEYS", f->keys, 1);
    int rc = zf_test_run_program(ZF_BIN_DIR "/zflow", args, out, sizeof out);
    unsetenv("ZFLOW_KEYS");
    assert_int_equal(rc, 0);
    assert_string_equal(out, "y =\n-2.0\n");
}

/* ---- the broker's registrations ---------------------------------------------- */

static void test_only_scheduler_keys_register_schedulers(void **state)
{
    fixture_t *f = *state;
    Zflow__RegisterScheduler rs = ZFLOW__REGISTER_SCHEDULER__INIT;
    rs.scheduler_id = "evil0001";
    rs.client_endpoint = "tcp://127.0.0.1:1";
    zf_socket_t *as_client =
        s_sock(f, ZF_SOCKET_DEALER, "client", "broker", f->svc.broker.endpoint);
    s_expect_reply_status(as_client, 1, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER, &rs,
                          ZF_PERMISSION_DENIED,
                          "RegisterScheduler is not allowed for client:client (only scheduler "
                          "keys may send it)");
    zf_socket_t *as_exec =
        s_sock(f, ZF_SOCKET_DEALER, "executor", "broker", f->svc.broker.endpoint);
    s_expect_reply_status(as_exec, 2, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER, &rs,
                          ZF_PERMISSION_DENIED,
                          "RegisterScheduler is not allowed for executor:executor (only scheduler "
                          "keys may send it)");
    assert_true(zf_test_broker_log_contains(
        &f->svc.broker, "refused RegisterScheduler from client:client: only scheduler keys"));
    /* without keys the handshake never completes: no reply, ever */
    zf_socket_t *plain = s_sock(f, ZF_SOCKET_DEALER, NULL, NULL, f->svc.broker.endpoint);
    zf_test_send_body(plain, 3, ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER, &rs);
    zf_test_expect_error(s_handshake_failure(plain), ZF_UNAUTHENTICATED,
                         "a secure service needs keys");
    assert_null(zf_test_recv(plain, 500, NULL));
    /* a client's forged "scheduler reply" to another client goes nowhere */
    Zflow__Ping ping = ZFLOW__PING__INIT;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = 4;
    env.body_case = ZFLOW__ENVELOPE__BODY_PING;
    env.ping = &ping;
    zf_test_send(as_client, "victim", 6, &env);
    zf_test_expect_status(as_client, 4, ZF_PERMISSION_DENIED,
                          "a scheduler's reply is not allowed for client:client (only scheduler "
                          "keys may send it)");
}

static void test_only_executor_keys_register_executors_and_heartbeat(void **state)
{
    fixture_t *f = *state;
    zf_socket_t *as_client =
        s_sock(f, ZF_SOCKET_DEALER, "client", "broker", f->svc.broker.endpoint);
    Tensorflow__DeviceAttributes dev = TENSORFLOW__DEVICE_ATTRIBUTES__INIT;
    dev.name = CPU(7);
    dev.device_type = "CPU";
    dev.incarnation = 77;
    Zflow__ExecutorInfo info = ZFLOW__EXECUTOR_INFO__INIT;
    info.device = &dev;
    info.control_endpoint = "tcp://127.0.0.1:1";
    info.rendezvous_endpoint = "tcp://127.0.0.1:2";
    Zflow__RegisterExecutor re = ZFLOW__REGISTER_EXECUTOR__INIT;
    re.info = &info;
    s_expect_reply_status(as_client, 1, ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR, &re,
                          ZF_PERMISSION_DENIED,
                          "RegisterExecutor is not allowed for client:client (only executor keys "
                          "may send it)");
    Zflow__Heartbeat hb = ZFLOW__HEARTBEAT__INIT;
    hb.device_name = CPU(0);
    s_expect_reply_status(as_client, 2, ZFLOW__ENVELOPE__BODY_HEARTBEAT, &hb, ZF_PERMISSION_DENIED,
                          "Heartbeat is not allowed for client:client (only executor keys may "
                          "send it)");
    zf_socket_t *as_sched =
        s_sock(f, ZF_SOCKET_DEALER, "scheduler", "broker", f->svc.broker.endpoint);
    s_expect_reply_status(as_sched, 3, ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR, &re,
                          ZF_PERMISSION_DENIED,
                          "RegisterExecutor is not allowed for scheduler:scheduler (only executor "
                          "keys may send it)");
}

/* The broker's listing as the holder of key sees it. Caller frees. */
static Zflow__Envelope *s_list(fixture_t *f, const char *key)
{
    zf_socket_t *s = s_sock(f, ZF_SOCKET_DEALER, key, "broker", f->svc.broker.endpoint);
    Zflow__ListExecutors le = ZFLOW__LIST_EXECUTORS__INIT;
    zf_test_send_body(s, 9, ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS, &le);
    Zflow__Envelope *rep = zf_test_recv(s, 5000, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS_REPLY);
    assert_int_equal(rep->list_executors_reply->n_executors, 2);
    return rep;
}

static const Zflow__ExecutorInfo *s_listed(const Zflow__Envelope *rep, const char *name)
{
    for (size_t i = 0; i < rep->list_executors_reply->n_executors; i++) {
        const Zflow__ExecutorInfo *e = rep->list_executors_reply->executors[i];
        if (strcmp(e->device->name, name) == 0) return e;
    }
    fail_msg("%s is not listed", name);
    return NULL;
}

static void test_clients_list_executors_without_endpoints_or_incarnations(void **state)
{
    fixture_t *f = *state;
    Zflow__Envelope *rep = s_list(f, "client");
    for (int k = 0; k < 2; k++) {
        const Zflow__ExecutorInfo *e = s_listed(rep, k ? CPU(1) : CPU(0));
        assert_string_equal(e->device->device_type, "CPU");
        assert_int_equal(e->device->incarnation, 0);
        assert_string_equal(e->control_endpoint, "");
        assert_string_equal(e->rendezvous_endpoint, "");
        assert_string_equal(e->host_id, "");
    }
    zflow__envelope__free_unpacked(rep, NULL);
    rep = s_list(f, "executor"); /* peers need them */
    const Zflow__ExecutorInfo *e = s_listed(rep, CPU(0));
    assert_string_equal(e->control_endpoint, f->control[0]);
    assert_string_equal(e->rendezvous_endpoint, f->rendezvous[0]);
    assert_int_not_equal(e->device->incarnation, 0);
    zflow__envelope__free_unpacked(rep, NULL);
}

static void test_a_live_executor_cannot_be_evicted_by_registering_its_name(void **state)
{
    fixture_t *f = *state;
    Zflow__Envelope *before = s_list(f, "scheduler");
    uint64_t inc = s_listed(before, CPU(0))->device->incarnation;
    zf_socket_t *as_exec =
        s_sock(f, ZF_SOCKET_DEALER, "executor", "broker", f->svc.broker.endpoint);
    char want[512];
    snprintf(want, sizeof want,
             "RegisterExecutor: device '" CPU(
                 0) "' is held by a live executor (incarnation "
                    "0x%016" PRIx64 "); it can be registered again once that one has missed 10 "
                    "heartbeats",
             inc);
    /* the full name, and a partial one the broker completes to it */
    const char *forms[] = {CPU(0), "/job:localhost/task:0/device:CPU:0"};
    for (int i = 0; i < 2; i++) {
        Zflow__Envelope *rep =
            zf_test_register_executor(as_exec, 1 + (uint64_t)i, forms[i], "CPU", inc ^ 0x5a5a,
                                      "tcp://127.0.0.1:1", "tcp://127.0.0.1:2");
        zf_status_t s = zf_status_from_proto(rep->register_executor_reply->status);
        assert_int_equal(s.code, ZF_ALREADY_EXISTS);
        assert_string_equal(zf_status_msg(&s), want);
        zf_status_clear(&s);
        zflow__envelope__free_unpacked(rep, NULL);
    }
    Zflow__Envelope *after = s_list(f, "scheduler");
    const Zflow__ExecutorInfo *e = s_listed(after, CPU(0));
    assert_int_equal(e->device->incarnation, inc);
    assert_string_equal(e->control_endpoint, f->control[0]);
    zflow__envelope__free_unpacked(after, NULL);
    zflow__envelope__free_unpacked(before, NULL);
}

static void test_a_restarted_executor_takes_its_name_back_once_the_old_one_is_dead(void **state)
{
    fixture_t *f = *state;
    Zflow__Envelope *before = s_list(f, "scheduler");
    uint64_t old = s_listed(before, CPU(0))->device->incarnation;
    zflow__envelope__free_unpacked(before, NULL);
    zf_test_child_stop(&f->svc.executors[0], SIGKILL, WAIT_MS);
    /* the new run asks until the broker has missed 10 heartbeats of 200 ms */
    int64_t start = zf_test_now_ms();
    setenv("ZFLOW_KEYS", f->keys, 1);
    zf_test_executor_start(&f->svc.executors[0], f->svc.broker.endpoint, 0, WAIT_MS);
    unsetenv("ZFLOW_KEYS");
    assert_true(zf_test_now_ms() - start < WAIT_MS);
    s_endpoints(f->svc.executors[0].line, f->control[0], f->rendezvous[0]);
    Zflow__Envelope *after = s_list(f, "scheduler");
    const Zflow__ExecutorInfo *e = s_listed(after, CPU(0));
    assert_int_not_equal(e->device->incarnation, old);
    assert_string_equal(e->control_endpoint, f->control[0]);
    zflow__envelope__free_unpacked(after, NULL);
    test_a_client_with_keys_runs_steps_across_executors(state);
}

/* ---- executors: the data plane and the control endpoint -------------------------- */

static void test_only_executor_keys_push_tensors_to_a_rendezvous(void **state)
{
    fixture_t *f = *state;
    static const char *const keys[] = {"client", "scheduler"};
    for (int i = 0; i < 2; i++) {
        zf_socket_t *push = s_sock(f, ZF_SOCKET_PUSH, keys[i], "executor", f->rendezvous[0]);
        zf_test_expect_error(s_handshake_failure(push), ZF_UNAUTHENTICATED,
                             "refused this process's CURVE key (ZAP status 400)");
    }
    zf_socket_t *plain = s_sock(f, ZF_SOCKET_PUSH, NULL, NULL, f->rendezvous[1]);
    zf_test_expect_error(s_handshake_failure(plain), ZF_UNAUTHENTICATED,
                         "a secure service needs keys");
    /* the executors still run steps together */
    test_a_client_with_keys_runs_steps_across_executors(state);
}

static void test_control_messages_need_a_scheduler_key(void **state)
{
    fixture_t *f = *state;
    static const char *const keys[] = {"client", "executor"};
    for (int i = 0; i < 2; i++) {
        zf_socket_t *d = s_sock(f, ZF_SOCKET_DEALER, keys[i], "executor", f->control[0]);
        char want[160];
        Zflow__AbortStep ab = ZFLOW__ABORT_STEP__INIT;
        ab.step_id = 12;
        snprintf(want, sizeof want,
                 "AbortStep is not allowed for %s:%s (only scheduler keys may send it)", keys[i],
                 keys[i]);
        s_expect_reply_status(d, 1, ZFLOW__ENVELOPE__BODY_ABORT_STEP, &ab, ZF_PERMISSION_DENIED,
                              want);
        Zflow__DeregisterGraph dg = ZFLOW__DEREGISTER_GRAPH__INIT;
        dg.graph_handle = "0000000000000001/1";
        snprintf(want, sizeof want,
                 "DeregisterGraph is not allowed for %s:%s (only scheduler keys may send it)",
                 keys[i], keys[i]);
        s_expect_reply_status(d, 2, ZFLOW__ENVELOPE__BODY_DEREGISTER_GRAPH, &dg,
                              ZF_PERMISSION_DENIED, want);
        Zflow__CleanupGraph cg = ZFLOW__CLEANUP_GRAPH__INIT;
        snprintf(want, sizeof want,
                 "CleanupGraph is not allowed for %s:%s (only scheduler keys may send it)", keys[i],
                 keys[i]);
        s_expect_reply_status(d, 3, ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH, &cg, ZF_PERMISSION_DENIED,
                              want);
        Zflow__RegisterGraph rg = ZFLOW__REGISTER_GRAPH__INIT;
        snprintf(want, sizeof want,
                 "RegisterGraph is not allowed for %s:%s (only scheduler keys may send it)",
                 keys[i], keys[i]);
        s_expect_reply_status(d, 4, ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH, &rg, ZF_PERMISSION_DENIED,
                              want);
    }
    zf_socket_t *plain = s_sock(f, ZF_SOCKET_DEALER, NULL, NULL, f->control[0]);
    zf_test_expect_error(s_handshake_failure(plain), ZF_UNAUTHENTICATED,
                         "a secure service needs keys");
}

/* y = x * x registered on CPU:0 by the scheduler key ("owner"), and a
 * second socket there with another scheduler's key ("other"). */
typedef struct {
    uint64_t incarnation;
    zf_partition_set_t *set;
    zf_socket_t *owner, *other;
    char handle[64];
} s_graph_t;

static void s_register_square(fixture_t *f, s_graph_t *g)
{
    Zflow__Envelope *listing = s_list(f, "scheduler");
    g->incarnation = s_listed(listing, CPU(0))->device->incarnation;
    zflow__envelope__free_unpacked(listing, NULL);
    g->set = zf_test_square_partition(CPU(0), g->incarnation);
    g->owner = s_sock(f, ZF_SOCKET_DEALER, "scheduler", "executor", f->control[0]);
    g->other = s_sock(f, ZF_SOCKET_DEALER, "schedulers/other", "executor", f->control[0]);
    Zflow__RegisterGraph rg = ZFLOW__REGISTER_GRAPH__INIT;
    rg.graph = g->set->parts[0].graph;
    rg.incarnation = g->incarnation;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH;
    env.register_graph = &rg;
    Zflow__Envelope *rep = zf_test_call(g->owner, &env, 1, WAIT_MS);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->register_graph_reply->status));
    snprintf(g->handle, sizeof g->handle, "%s", rep->register_graph_reply->graph_handle);
    zflow__envelope__free_unpacked(rep, NULL);
}

static void test_a_graph_answers_only_the_scheduler_that_registered_it(void **state)
{
    fixture_t *f = *state;
    s_graph_t g;
    s_register_square(f, &g);
    /* <incarnation>/<random>: 16 hex digits each, nothing to count on */
    char prefix[24];
    snprintf(prefix, sizeof prefix, "%016" PRIx64 "/", g.incarnation);
    assert_int_equal(strlen(g.handle), 33);
    assert_memory_equal(g.handle, prefix, 17);

    char want[256];
    Zflow__RunGraph run = ZFLOW__RUN_GRAPH__INIT;
    run.graph_handle = g.handle;
    run.incarnation = g.incarnation;
    run.step_id = 5;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_GRAPH;
    env.run_graph = &run;
    Zflow__Envelope *rep = zf_test_call(g.other, &env, 2, WAIT_MS);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY);
    zf_status_t s = zf_status_from_proto(rep->run_graph_reply->status);
    snprintf(want, sizeof want,
             "RunGraph for %s refused: it belongs to scheduler:scheduler, not scheduler:other",
             g.handle);
    assert_int_equal(s.code, ZF_PERMISSION_DENIED);
    assert_string_equal(zf_status_msg(&s), want);
    zf_status_clear(&s);
    zflow__envelope__free_unpacked(rep, NULL);

    Zflow__DeregisterGraph dg = ZFLOW__DEREGISTER_GRAPH__INIT;
    dg.graph_handle = g.handle;
    snprintf(want, sizeof want,
             "DeregisterGraph for %s refused: it belongs to scheduler:scheduler, not "
             "scheduler:other",
             g.handle);
    s_expect_reply_status(g.other, 3, ZFLOW__ENVELOPE__BODY_DEREGISTER_GRAPH, &dg,
                          ZF_PERMISSION_DENIED, want);
    /* still registered: its owner removes it */
    s_expect_reply_status(g.owner, 4, ZFLOW__ENVELOPE__BODY_DEREGISTER_GRAPH, &dg, ZF_OK, NULL);
    snprintf(want, sizeof want, "graph handle '%s' is not registered", g.handle);
    s_expect_reply_status(g.owner, 5, ZFLOW__ENVELOPE__BODY_DEREGISTER_GRAPH, &dg, ZF_NOT_FOUND,
                          want);
    zf_partition_set_destroy(&g.set);
}

static void test_a_running_step_is_aborted_only_by_its_scheduler(void **state)
{
    fixture_t *f = *state;
    s_graph_t g;
    s_register_square(f, &g);
    /* a step that waits for its feed, which never comes */
    char *fetch = g.set->parts[0].fetches[0].key;
    Zflow__RunGraph run = ZFLOW__RUN_GRAPH__INIT;
    run.graph_handle = g.handle;
    run.incarnation = g.incarnation;
    run.step_id = 0x1234567;
    run.n_fetch_keys = 1;
    run.fetch_keys = &fetch;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = 2;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_GRAPH;
    env.run_graph = &run;
    zf_test_send(g.owner, NULL, 0, &env);
    assert_null(zf_test_recv(g.owner, 300, NULL)); /* it runs */
    Zflow__AbortStep ab = ZFLOW__ABORT_STEP__INIT;
    ab.step_id = run.step_id;
    s_expect_reply_status(g.other, 3, ZFLOW__ENVELOPE__BODY_ABORT_STEP, &ab, ZF_PERMISSION_DENIED,
                          "AbortStep for step 19088743 refused: it belongs to scheduler:scheduler, "
                          "not scheduler:other");
    Zflow__CleanupGraph cg = ZFLOW__CLEANUP_GRAPH__INIT;
    cg.step_id = run.step_id;
    s_expect_reply_status(g.other, 4, ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH, &cg,
                          ZF_PERMISSION_DENIED,
                          "CleanupGraph for step 19088743 refused: it belongs to "
                          "scheduler:scheduler, not scheduler:other");
    assert_null(zf_test_recv(g.owner, 200, NULL)); /* still running */
    /* its own scheduler aborts it: the step ends with that status */
    zf_test_send_body(g.owner, 5, ZFLOW__ENVELOPE__BODY_ABORT_STEP, &ab);
    bool aborted = false, answered = false;
    for (int i = 0; i < 2; i++) {
        Zflow__Envelope *rep = zf_test_recv(g.owner, 5000, NULL);
        assert_non_null(rep);
        if (rep->request_id == 5) {
            assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
            ASSERT_OK(zf_status_from_proto(rep->status_reply->status));
            answered = true;
        } else {
            assert_int_equal(rep->request_id, 2);
            assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY);
            zf_status_t s = zf_status_from_proto(rep->run_graph_reply->status);
            aborted = s.code == ZF_ABORTED;
            zf_status_clear(&s);
        }
        zflow__envelope__free_unpacked(rep, NULL);
    }
    assert_true(answered && aborted);
    zf_partition_set_destroy(&g.set);
}

static void test_session_requests_need_a_client_key(void **state)
{
    fixture_t *f = *state;
    const char *devices[2] = {CPU(0), CPU(1)};
    Tensorflow__GraphDef *gd = zf_test_neg_chain(devices, 2);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = gd;
    zf_socket_t *as_exec =
        s_sock(f, ZF_SOCKET_DEALER, "executor", "broker", f->svc.broker.endpoint);
    s_expect_reply_status(as_exec, 1, ZFLOW__ENVELOPE__BODY_CREATE_SESSION, &cs,
                          ZF_PERMISSION_DENIED,
                          "CreateSession is not allowed for executor:executor (only client keys "
                          "may send it)");
    Zflow__SubmitJob sj = ZFLOW__SUBMIT_JOB__INIT;
    s_expect_reply_status(as_exec, 2, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &sj, ZF_PERMISSION_DENIED,
                          "SubmitJob is not allowed for executor:executor (only client keys may "
                          "send it)");
    /* a client makes a session; the scheduler's own endpoint checks roles too */
    zf_socket_t *as_client =
        s_sock(f, ZF_SOCKET_DEALER, "client", "broker", f->svc.broker.endpoint);
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION;
    env.create_session = &cs;
    Zflow__Envelope *rep = zf_test_call(as_client, &env, 3, WAIT_MS);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->create_session_reply->status));
    char session[128], endpoint[128];
    snprintf(session, sizeof session, "%s", rep->create_session_reply->session);
    snprintf(endpoint, sizeof endpoint, "%s", rep->create_session_reply->scheduler_endpoint);
    zflow__envelope__free_unpacked(rep, NULL);
    zf_socket_t *direct = s_sock(f, ZF_SOCKET_DEALER, "executor", "scheduler", endpoint);
    Zflow__CloseSession close = ZFLOW__CLOSE_SESSION__INIT;
    close.session = session;
    s_expect_reply_status(direct, 4, ZFLOW__ENVELOPE__BODY_CLOSE_SESSION, &close,
                          ZF_PERMISSION_DENIED,
                          "CloseSession is not allowed for executor:executor (only client keys "
                          "may send it)");
    Zflow__Ping ping = ZFLOW__PING__INIT;
    s_expect_reply_status(direct, 5, ZFLOW__ENVELOPE__BODY_PING, &ping, ZF_OK, NULL);
    zf_socket_t *mine = s_sock(f, ZF_SOCKET_DEALER, "client", "scheduler", endpoint);
    s_expect_reply_status(mine, 6, ZFLOW__ENVELOPE__BODY_CLOSE_SESSION, &close, ZF_OK, NULL);
    zf_graphdef_free(&gd);
}

/* ---- zflow up --secure, and plain mode's warning ------------------------------------ */

static void test_zflow_up_secure_makes_keys_that_clients_need(void **state)
{
    (void)state;
    const char *argv[] = {ZF_BIN_DIR "/zflow", "up", "--secure", "--port", "0", NULL};
    int out = -1;
    pid_t pid = zf_test_spawn_piped(argv, &out, NULL);
    char line[512], keys[256] = "", endpoint[256] = "";
    assert_true(zf_test_read_line(out, line, sizeof line, 30000));
    assert_int_equal(sscanf(line, "zflow cluster listening on %255s", endpoint), 1);
    assert_true(zf_test_read_line(out, line, sizeof line, 5000));
    assert_int_equal(sscanf(line, "keys: %255s", keys), 1);
    char path[320];
    snprintf(path, sizeof path, "%s/client.key", keys);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char args[600], text[4096];
    snprintf(args, sizeof args, "executors --broker %s", endpoint);
    assert_int_equal(zf_test_run_program(ZF_BIN_DIR "/zflow", args, text, sizeof text), 1);
    assert_non_null(strstr(text, "UNAUTHENTICATED"));
    setenv("ZFLOW_KEYS", keys, 1);
    int rc = zf_test_run_program(ZF_BIN_DIR "/zflow", args, text, sizeof text);
    unsetenv("ZFLOW_KEYS");
    assert_int_equal(rc, 0);
    assert_non_null(strstr(text, "/job:localhost/replica:0/task:0/device:CPU:0 CPU load="));
    kill(pid, SIGTERM);
    assert_int_equal(zf_test_reap(pid, zf_test_now_ms() + 20000), 0);
    close(out);
    assert_int_not_equal(stat(keys, &st), 0); /* removed with the cluster */
}

static void test_a_plain_broker_beyond_loopback_warns(void **state)
{
    (void)state;
    zf_test_broker_t b;
    const char *args[] = {"--listen", "tcp://0.0.0.0:0", NULL};
    zf_test_broker_start(&b, args);
    bool warned = zf_test_broker_log_contains(
        &b, "listening on tcp://0.0.0.0:0 without keys: any host that reaches it may use it (run "
            "with --keys DIR or ZFLOW_KEYS=DIR for CURVE security)");
    assert_int_equal(zf_test_broker_stop(&b, SIGTERM), 0);
    assert_true(warned);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, s_setup, s_teardown)
    const struct CMUnitTest tests[] = {
        T(test_a_client_with_keys_runs_steps_across_executors),
        T(test_a_client_without_keys_is_unauthenticated_at_once),
        T(test_a_client_with_an_untrusted_key_is_refused_by_zap),
        T(test_cli_commands_need_keys_on_a_secure_cluster),
        T(test_only_scheduler_keys_register_schedulers),
        T(test_only_executor_keys_register_executors_and_heartbeat),
        T(test_clients_list_executors_without_endpoints_or_incarnations),
        T(test_a_live_executor_cannot_be_evicted_by_registering_its_name),
        T(test_a_restarted_executor_takes_its_name_back_once_the_old_one_is_dead),
        T(test_only_executor_keys_push_tensors_to_a_rendezvous),
        T(test_control_messages_need_a_scheduler_key),
        T(test_a_graph_answers_only_the_scheduler_that_registered_it),
        T(test_a_running_step_is_aborted_only_by_its_scheduler),
        T(test_session_requests_need_a_client_key),
        cmocka_unit_test(test_zflow_up_secure_makes_keys_that_clients_need),
        cmocka_unit_test(test_a_plain_broker_beyond_loopback_warns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
