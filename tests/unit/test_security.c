/* Tests of a secure service: a broker, two executors and a scheduler run as
 * real processes with CurveZMQ keys (ZFLOW_KEYS) on 127.0.0.1, and the test
 * plays attackers holding the wrong keys, or none: each must be refused at
 * the handshake (UNAUTHENTICATED), while a client with keys runs steps as on
 * a plain cluster. */
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
    assert_non_null(strstr(out, CPU(0) " CPU load="));
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
        T(test_only_executor_keys_push_tensors_to_a_rendezvous),
        cmocka_unit_test(test_zflow_up_secure_makes_keys_that_clients_need),
        cmocka_unit_test(test_a_plain_broker_beyond_loopback_warns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
