/* Tests for the zflow-executor program: real child processes on 127.0.0.1
 * ephemeral ports, registering with a scripted broker
 * (tests/support/fake_broker_util.h) or running unregistered; the test plays
 * the scheduler on the printed control endpoint, restarts an executor, and
 * stops them with SIGTERM. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/tensor_proto.h"
#include "common/transport.h"
#include "session/local_session.h"
#include "fake_broker_util.h"
#include "service_test_util.h"
#include "scheduler/graph/partition.h"
#include "test_util.h"

#define EXECUTOR ZF_BIN_DIR "/zflow-executor"
#define CPU0     "/job:localhost/replica:0/task:0/device:CPU:0"
#define WAIT_MS  10000

typedef struct {
    pid_t pid;
    FILE *out;
    char line[512];
    char control[128];
} s_child_t;

/* Starts the executor with args (NULL-terminated after argv[0]) and reads
 * its first stdout line; fails when none comes within WAIT_MS. */
static void s_spawn(s_child_t *c, const char *const *args)
{
    if (access(EXECUTOR, X_OK) != 0) fail_msg("%s is not built", EXECUTOR);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a test that failed */
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(EXECUTOR, (char *const *)args);
        _exit(127);
    }
    close(fds[1]);
    c->out = fdopen(fds[0], "r");
    struct pollfd p = {fds[0], POLLIN, 0};
    assert_int_equal(poll(&p, 1, WAIT_MS), 1);
    c->line[0] = '\0';
    assert_non_null(fgets(c->line, sizeof c->line, c->out));
    char *ctl = strstr(c->line, " control ");
    assert_non_null(ctl);
    assert_int_equal(sscanf(ctl, " control %127s", c->control), 1);
}

/* Sends sig and waits for the exit; returns the exit status (-1: killed). */
static int s_stop(s_child_t *c, int sig)
{
    kill(c->pid, sig);
    int status = 0;
    for (int i = 0; i < WAIT_MS / 10; i++) {
        if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
            fclose(c->out);
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    kill(c->pid, SIGKILL);
    waitpid(c->pid, &status, 0);
    fclose(c->out);
    fail_msg("zflow-executor did not stop within %d ms", WAIT_MS);
    return -1;
}

/* Runs the program to completion and returns its exit status; with err,
 * what it wrote to stderr (up to cap - 1 bytes) goes there. */
static int s_exit_code_err(const char *const *args, char *err, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(EXECUTOR, (char *const *)args);
        _exit(127);
    }
    close(fds[1]);
    size_t n = 0;
    char sink[256];
    for (;;) {
        char *to = err && n + 1 < cap ? err + n : sink;
        size_t room = err && n + 1 < cap ? cap - 1 - n : sizeof sink;
        ssize_t got = read(fds[0], to, room);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (to != sink) n += (size_t)got;
    }
    close(fds[0]);
    if (err) err[n] = '\0';
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int s_exit_code(const char *const *args)
{
    return s_exit_code_err(args, NULL, 0);
}

/* ---- the scheduler's side ------------------------------------------------- */

static Zflow__Envelope *s_call(zf_socket_t *d, Zflow__Envelope *env)
{
    ASSERT_OK(zf_envelope_send(d, NULL, env));
    zf_route_t route;
    Zflow__Envelope *reply = NULL;
    ASSERT_OK(zf_envelope_recv(d, WAIT_MS, &route, &reply));
    assert_int_equal(reply->request_id, env->request_id);
    return reply;
}

/* RegisterGraph of p's graph; the reply's status. */
static zf_status_t s_register_status(zf_socket_t *d, const zf_partition_t *p, uint64_t incarnation,
                                     char **handle)
{
    Zflow__RegisterGraph rg;
    zflow__register_graph__init(&rg);
    rg.graph = p->graph;
    rg.incarnation = incarnation;
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = 1;
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH;
    env.register_graph = &rg;
    Zflow__Envelope *reply = s_call(d, &env);
    assert_int_equal(reply->body_case, ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY);
    zf_status_t st = zf_status_from_proto(reply->register_graph_reply->status);
    *handle = zf_ok(st) ? strdup(reply->register_graph_reply->graph_handle) : NULL;
    zflow__envelope__free_unpacked(reply, NULL);
    return st;
}

static char *s_register(zf_socket_t *d, const zf_partition_t *p, uint64_t incarnation)
{
    char *handle = NULL;
    ASSERT_OK(s_register_status(d, p, incarnation, &handle));
    return handle;
}

/* Runs step 1 feeding {v, 2, 3}; returns the reply (caller frees). */
static Zflow__Envelope *s_run(zf_socket_t *d, const zf_partition_t *p, const char *handle,
                              uint64_t incarnation, float v)
{
    float values[3] = {v, 2, 3};
    zf_shape_t shape = ZF_SHAPE(3);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, values, sizeof values, &t));
    Zflow__NamedTensor feed, *feeds[1] = {&feed};
    zflow__named_tensor__init(&feed);
    feed.name = p->feeds[0].key;
    ASSERT_OK(zf_tensor_to_proto(t, &feed.tensor, true));
    char *fetches[1] = {p->n_fetches > 0 ? p->fetches[0].key : NULL};
    Zflow__RunGraph rg;
    zflow__run_graph__init(&rg);
    rg.graph_handle = (char *)handle;
    rg.incarnation = incarnation;
    rg.step_id = 1;
    rg.n_feeds = 1;
    rg.feeds = feeds;
    rg.n_fetch_keys = p->n_fetches > 0 ? 1 : 0;
    rg.fetch_keys = fetches;
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = 2;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_GRAPH;
    env.run_graph = &rg;
    Zflow__Envelope *reply = s_call(d, &env);
    assert_int_equal(reply->body_case, ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY);
    protobuf_c_message_free_unpacked(&feed.tensor->base, NULL);
    zf_tensor_unref(&t);
    return reply;
}

static uint64_t s_incarnation(fake_broker_t *b)
{
    pthread_mutex_lock(&b->mu);
    uint64_t inc = b->incarnation;
    pthread_mutex_unlock(&b->mu);
    return inc;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_executor_process_registers_prints_its_endpoints_and_serves_a_step(void **state)
{
    (void)state;
    fake_broker_t b = {0};
    fake_broker_start(&b);
    const char *args[] = {EXECUTOR, "--broker", b.endpoint,  "--device", "CPU:0",
                          "--name", CPU0,       "--threads", "2",        NULL};
    s_child_t c;
    s_spawn(&c, args);
    assert_non_null(strstr(c.line, "zflow-executor " CPU0 " control tcp://127.0.0.1:"));
    assert_non_null(strstr(c.line, " rendezvous tcp://127.0.0.1:"));
    pthread_mutex_lock(&b.mu);
    assert_string_equal(b.control, c.control);
    assert_string_equal(b.requested_name, CPU0);
    pthread_mutex_unlock(&b.mu);
    uint64_t inc = s_incarnation(&b);
    zf_partition_set_t *set = zf_test_square_partition(CPU0, inc);
    zf_zctx_t *ctx = NULL;
    zf_socket_t *d = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_DEALER, &d));
    ASSERT_OK(zf_socket_connect(d, c.control));
    char *handle = s_register(d, &set->parts[0], inc);
    Zflow__Envelope *reply = s_run(d, &set->parts[0], handle, inc, -4);
    ASSERT_OK(zf_status_from_proto(reply->run_graph_reply->status));
    assert_int_equal(reply->run_graph_reply->n_fetches, 1);
    zf_tensor_t *y = NULL;
    ASSERT_OK(zf_tensor_from_proto(reply->run_graph_reply->fetches[0]->tensor, &y));
    const float *v = zf_tensor_data(y);
    assert_true(v[0] == 16 && v[1] == 4 && v[2] == 9);
    zf_tensor_unref(&y);
    zflow__envelope__free_unpacked(reply, NULL);
    /* It heartbeats with the graph's nodes as its load. */
    for (int i = 0; i < 500 && atomic_load(&b.heartbeats) < 3; i++) {
        zf_status_t w = zf_socket_wait_readable(d, 10);
        zf_status_clear(&w);
    }
    assert_true(atomic_load(&b.heartbeats) >= 3);
    pthread_mutex_lock(&b.mu);
    assert_int_equal(b.last_load, 3); /* x, y and the fetch's _Send */
    pthread_mutex_unlock(&b.mu);
    assert_int_equal(s_stop(&c, SIGTERM), 0);
    free(handle);
    zf_socket_destroy(&d);
    zf_zctx_destroy(&ctx);
    zf_partition_set_destroy(&set);
    fake_broker_stop(&b);
}

static void test_a_restarted_executor_refuses_the_old_handle_with_aborted(void **state)
{
    (void)state;
    fake_broker_t b = {0};
    fake_broker_start(&b);
    const char *args[] = {EXECUTOR, "--broker", b.endpoint, "--device",
                          "CPU:0",  "--name",   CPU0,       NULL};
    s_child_t first, second;
    s_spawn(&first, args);
    uint64_t inc1 = s_incarnation(&b);
    zf_partition_set_t *set = zf_test_square_partition(CPU0, inc1);
    zf_zctx_t *ctx = NULL;
    zf_socket_t *d1 = NULL, *d2 = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_DEALER, &d1));
    ASSERT_OK(zf_socket_connect(d1, first.control));
    char *handle = s_register(d1, &set->parts[0], inc1);
    assert_int_equal(s_stop(&first, SIGINT), 0);
    s_spawn(&second, args); /* same name, new start */
    uint64_t inc2 = s_incarnation(&b);
    assert_int_not_equal(inc1, inc2);
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_DEALER, &d2));
    ASSERT_OK(zf_socket_connect(d2, second.control));
    Zflow__Envelope *reply = s_run(d2, &set->parts[0], handle, inc1, 1);
    zf_status_t s = zf_status_from_proto(reply->run_graph_reply->status);
    assert_int_equal(s.code, ZF_ABORTED);
    assert_string_equal(zf_status_msg(&s), "graph handle not found; the executor restarted");
    zf_status_clear(&s);
    zflow__envelope__free_unpacked(reply, NULL);
    assert_int_equal(s_stop(&second, SIGTERM), 0);
    free(handle);
    zf_socket_destroy(&d1);
    zf_socket_destroy(&d2);
    zf_zctx_destroy(&ctx);
    zf_partition_set_destroy(&set);
    fake_broker_stop(&b);
}

static void s_deregister(zf_socket_t *d, const char *handle)
{
    Zflow__DeregisterGraph dg;
    zflow__deregister_graph__init(&dg);
    dg.graph_handle = (char *)handle;
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = 4;
    env.body_case = ZFLOW__ENVELOPE__BODY_DEREGISTER_GRAPH;
    env.deregister_graph = &dg;
    Zflow__Envelope *reply = s_call(d, &env);
    assert_int_equal(reply->body_case, ZFLOW__ENVELOPE__BODY_STATUS_REPLY);
    ASSERT_OK(zf_status_from_proto(reply->status_reply->status));
    zflow__envelope__free_unpacked(reply, NULL);
}

static void test_executor_process_refuses_graphs_past_its_limits(void **state)
{
    (void)state;
    fake_broker_t b = {0};
    fake_broker_start(&b);
    zf_partition_set_t *probe = zf_test_square_partition(CPU0, 1);
    size_t one = protobuf_c_message_get_packed_size(&probe->parts[0].graph->base);
    zf_partition_set_destroy(&probe);
    /* room for three graphs by bytes, two by count */
    char bytes[32];
    snprintf(bytes, sizeof bytes, "%zu", 3 * one);
    const char *args[] = {EXECUTOR, "--broker", b.endpoint,     "--device", "CPU:0",
                          "--name", CPU0,       "--max-graphs", "2",        "--max-graph-bytes",
                          bytes,    NULL};
    s_child_t c;
    s_spawn(&c, args);
    uint64_t inc = s_incarnation(&b);
    zf_partition_set_t *set = zf_test_square_partition(CPU0, inc);
    zf_zctx_t *ctx = NULL;
    zf_socket_t *d = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_DEALER, &d));
    ASSERT_OK(zf_socket_connect(d, c.control));
    char *h1 = NULL, *h2 = NULL, *h3 = NULL;
    ASSERT_OK(s_register_status(d, &set->parts[0], inc, &h1));
    ASSERT_OK(s_register_status(d, &set->parts[0], inc, &h2));
    zf_test_expect_error(s_register_status(d, &set->parts[0], inc, &h3), ZF_RESOURCE_EXHAUSTED,
                         "holds 2 graphs, the most it registers at once (zflow-executor "
                         "--max-graphs 2)");
    assert_null(h3);
    /* those registered still run, and one deregistered makes room */
    Zflow__Envelope *reply = s_run(d, &set->parts[0], h1, inc, 5);
    ASSERT_OK(zf_status_from_proto(reply->run_graph_reply->status));
    zflow__envelope__free_unpacked(reply, NULL);
    s_deregister(d, h1);
    ASSERT_OK(s_register_status(d, &set->parts[0], inc, &h3));
    assert_int_equal(s_stop(&c, SIGTERM), 0);
    free(h1);
    free(h2);
    free(h3);

    /* by bytes: one graph and a half */
    snprintf(bytes, sizeof bytes, "%zu", one + one / 2);
    const char *args_bytes[] = {EXECUTOR, "--broker", b.endpoint,          "--device", "CPU:0",
                                "--name", CPU0,       "--max-graph-bytes", bytes,      NULL};
    s_spawn(&c, args_bytes);
    inc = s_incarnation(&b);
    zf_partition_set_destroy(&set);
    set = zf_test_square_partition(CPU0, inc);
    zf_socket_destroy(&d);
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_DEALER, &d));
    ASSERT_OK(zf_socket_connect(d, c.control));
    ASSERT_OK(s_register_status(d, &set->parts[0], inc, &h1));
    zf_test_expect_error(s_register_status(d, &set->parts[0], inc, &h2), ZF_RESOURCE_EXHAUSTED,
                         "(zflow-executor --max-graph-bytes)");
    assert_null(h2);
    assert_int_equal(s_stop(&c, SIGTERM), 0);
    free(h1);
    zf_socket_destroy(&d);
    zf_zctx_destroy(&ctx);
    zf_partition_set_destroy(&set);
    fake_broker_stop(&b);
}

static void test_executor_process_runs_unregistered_and_rejects_bad_flags(void **state)
{
    (void)state;
    const char *args[] = {EXECUTOR, "--device", "cpu:0", NULL};
    s_child_t c;
    unsetenv("ZFLOW_BROKER");
    s_spawn(&c, args);
    assert_non_null(strstr(c.line, "zflow-executor " CPU0 " control tcp://127.0.0.1:"));
    assert_int_equal(s_stop(&c, SIGTERM), 0);
    const char *bad_device[] = {EXECUTOR, "--device", "TPU:0", NULL};
    assert_int_equal(s_exit_code(bad_device), 2);
    const char *no_device[] = {EXECUTOR, NULL};
    assert_int_equal(s_exit_code(no_device), 2);
    const char *unknown[] = {EXECUTOR, "--device", "CPU:0", "--bogus", NULL};
    assert_int_equal(s_exit_code(unknown), 2);
    const char *bad_name[] = {EXECUTOR, "--device", "CPU:0", "--name", "/device:CPU:x", NULL};
    assert_int_equal(s_exit_code(bad_name), 1);
    const char *help[] = {EXECUTOR, "--help", NULL};
    assert_int_equal(s_exit_code(help), 0);
}

/* --host-cache-idle-s takes whole seconds, 0 (never trim) included;
 * anything else is refused with exit code 2 and says what it got. */
static void test_executor_process_takes_the_host_cache_idle_seconds(void **state)
{
    (void)state;
    unsetenv("ZFLOW_BROKER");
    const char *never[] = {EXECUTOR, "--device", "cpu:0", "--host-cache-idle-s", "0", NULL};
    s_child_t c;
    s_spawn(&c, never);
    assert_non_null(strstr(c.line, "zflow-executor " CPU0 " control tcp://127.0.0.1:"));
    assert_int_equal(s_stop(&c, SIGTERM), 0);
    const char *soon[] = {EXECUTOR, "--device", "cpu:0", "--host-cache-idle-s", "5", NULL};
    s_spawn(&c, soon);
    assert_int_equal(s_stop(&c, SIGTERM), 0);
    struct {
        const char *value, *says;
    } bad[] = {
        {"-1", "zflow-executor: --host-cache-idle-s takes a number of seconds >= 0, not -1\n"},
        {"1.5", "zflow-executor: --host-cache-idle-s takes a number of seconds >= 0, not 1.5\n"},
        {"soon", "zflow-executor: --host-cache-idle-s takes a number of seconds >= 0, not soon\n"},
        {"", "zflow-executor: --host-cache-idle-s takes a number of seconds >= 0, not \n"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {EXECUTOR,     "--device", "cpu:0", "--host-cache-idle-s",
                              bad[i].value, NULL};
        assert_int_equal(s_exit_code_err(args, err, sizeof err), 2);
        char want[512];
        snprintf(want, sizeof want, "%srun 'zflow-executor --help' for usage\n", bad[i].says);
        assert_string_equal(err, want);
    }
    const char *missing[] = {EXECUTOR, "--device", "cpu:0", "--host-cache-idle-s", NULL};
    assert_int_equal(s_exit_code_err(missing, err, sizeof err), 2);
    assert_string_equal(err, "zflow-executor: a value is missing after --host-cache-idle-s\n"
                             "run 'zflow-executor --help' for usage\n");
}

/* ---- two processes ------------------------------------------------------------ */

#define CPU1 "/job:localhost/replica:0/task:0/device:CPU:1"

/* x (fed) -> y = x * x on CPU:0; z = y + c on CPU:1. */
static const char s_split_graph[] =
    "node { name: 'x' op: 'Placeholder' device: '" CPU0 "'"
    "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
    "node { name: 'y' op: 'Mul' input: 'x' input: 'x' device: '" CPU0 "'"
    "  attr { key: 'T' value { type: DT_FLOAT } } }"
    "node { name: 'c' op: 'Const' device: '" CPU1 "'"
    "  attr { key: 'dtype' value { type: DT_FLOAT } }"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } }"
    "    float_val: 10 float_val: 20 float_val: 30 } } } }"
    "node { name: 'z' op: 'Add' input: 'y' input: 'c' device: '" CPU1 "'"
    "  attr { key: 'T' value { type: DT_FLOAT } } }";

/* Partitions s_split_graph by its nodes' devices, with the incarnations. */
static zf_partition_set_t *s_partition_split(Tensorflow__GraphDef *gd, uint64_t inc0, uint64_t inc1)
{
    zf_graph_t *g = NULL;
    ASSERT_OK(zf_graph_new_from_graphdef(gd, &g));
    zf_partition_device_t devs[2] = {{.incarnation = inc0}, {.incarnation = inc1}};
    ASSERT_OK(zf_device_name_parse(CPU0, &devs[0].name));
    ASSERT_OK(zf_device_name_parse(CPU1, &devs[1].name));
    int assignment[4];
    for (int i = 0; i < 4; i++) assignment[i] = strcmp(zf_graph_node_def(g, i)->device, CPU1) == 0;
    const char *feed = "x", *fetch = "z";
    zf_partition_options_t opts = {.feeds = &feed, .n_feeds = 1, .fetches = &fetch, .n_fetches = 1};
    zf_partition_set_t *set = NULL;
    ASSERT_OK(zf_partition_graph(g, devs, 2, assignment, &opts, &set));
    assert_int_equal(set->n_parts, 2);
    assert_string_equal(set->parts[0].device, CPU0); /* sorted by device name */
    zf_graph_destroy(&g);
    return set;
}

static void test_two_executor_processes_run_a_split_graph_like_the_local_session(void **state)
{
    (void)state;
    fake_broker_t b = {0};
    fake_broker_start(&b);
    const char *args0[] = {EXECUTOR, "--broker", b.endpoint,  "--device", "CPU:0",
                           "--name", CPU0,       "--threads", "2",        NULL};
    const char *args1[] = {EXECUTOR, "--broker", b.endpoint,  "--device", "CPU:1",
                           "--name", CPU1,       "--threads", "2",        NULL};
    s_child_t c0, c1;
    s_spawn(&c0, args0);
    s_spawn(&c1, args1);
    uint64_t inc0 = fake_broker_incarnation_of(&b, CPU0),
             inc1 = fake_broker_incarnation_of(&b, CPU1);
    assert_true(inc0 != 0 && inc1 != 0);
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(s_split_graph, strlen(s_split_graph), ZF_FORMAT_PBTXT, &gd));
    zf_partition_set_t *set = s_partition_split(gd, inc0, inc1);
    zf_zctx_t *ctx = NULL;
    zf_socket_t *d0 = NULL, *d1 = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_DEALER, &d0));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_DEALER, &d1));
    ASSERT_OK(zf_socket_connect(d0, c0.control));
    ASSERT_OK(zf_socket_connect(d1, c1.control));
    char *h0 = s_register(d0, &set->parts[0], inc0);
    char *h1 = s_register(d1, &set->parts[1], inc1);
    /* CPU:1 waits for y; CPU:0 computes it and pushes it over the network. */
    char *fetches[1] = {set->parts[1].fetches[0].key};
    Zflow__RunGraph rg;
    zflow__run_graph__init(&rg);
    rg.graph_handle = h1;
    rg.incarnation = inc1;
    rg.step_id = 1;
    rg.n_fetch_keys = 1;
    rg.fetch_keys = fetches;
    Zflow__Envelope env;
    zflow__envelope__init(&env);
    env.request_id = 9;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_GRAPH;
    env.run_graph = &rg;
    ASSERT_OK(zf_envelope_send(d1, NULL, &env));
    Zflow__Envelope *r0 = s_run(d0, &set->parts[0], h0, inc0, -4);
    ASSERT_OK(zf_status_from_proto(r0->run_graph_reply->status));
    zflow__envelope__free_unpacked(r0, NULL);
    zf_route_t route;
    Zflow__Envelope *r1 = NULL;
    ASSERT_OK(zf_envelope_recv(d1, WAIT_MS, &route, &r1));
    assert_int_equal(r1->body_case, ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY);
    ASSERT_OK(zf_status_from_proto(r1->run_graph_reply->status));
    zf_tensor_t *got = NULL, *want = NULL, *x = NULL;
    ASSERT_OK(zf_tensor_from_proto(r1->run_graph_reply->fetches[0]->tensor, &got));
    /* The in-process session over the same two devices. */
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.devices = "cpu:2";
    zf_local_session_t *ls = NULL;
    ASSERT_OK(zf_local_session_new(gd, &opts, &ls));
    float xv[3] = {-4, 2, 3};
    zf_shape_t shape = ZF_SHAPE(3);
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, xv, sizeof xv, &x));
    const char *feed = "x", *fetch = "z";
    ASSERT_OK(zf_local_session_run(ls, &feed, &x, 1, &fetch, 1, NULL, 0, &want));
    assert_true(zf_tensor_equal(got, want));
    const float *v = zf_tensor_data(got);
    assert_true(v[0] == 26 && v[1] == 24 && v[2] == 39);
    zf_tensor_unref(&got);
    zf_tensor_unref(&want);
    zf_tensor_unref(&x);
    zf_local_session_destroy(&ls);
    zflow__envelope__free_unpacked(r1, NULL);
    assert_int_equal(s_stop(&c0, SIGTERM), 0);
    assert_int_equal(s_stop(&c1, SIGTERM), 0);
    free(h0);
    free(h1);
    zf_socket_destroy(&d0);
    zf_socket_destroy(&d1);
    zf_zctx_destroy(&ctx);
    zf_partition_set_destroy(&set);
    zf_graphdef_free(&gd);
    fake_broker_stop(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_executor_process_registers_prints_its_endpoints_and_serves_a_step),
        cmocka_unit_test(test_a_restarted_executor_refuses_the_old_handle_with_aborted),
        cmocka_unit_test(test_executor_process_refuses_graphs_past_its_limits),
        cmocka_unit_test(test_executor_process_runs_unregistered_and_rejects_bad_flags),
        cmocka_unit_test(test_executor_process_takes_the_host_cache_idle_seconds),
        cmocka_unit_test(test_two_executor_processes_run_a_split_graph_like_the_local_session),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
