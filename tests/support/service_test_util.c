/* Definitions of service_test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "service_test_util.h"

void zf_test_executor_start(zf_test_child_t *c, const char *endpoint, int k, int wait_ms)
{
    char device[16], name[64];
    snprintf(device, sizeof device, "CPU:%d", k);
    snprintf(name, sizeof name, "/job:localhost/replica:0/task:0/device:CPU:%d", k);
    const char *argv[] = {ZF_TEST_EXECUTOR, "--broker", endpoint,    "--device", device,
                          "--name",         name,       "--threads", "1",        NULL};
    zf_test_spawn(c, argv, wait_ms);
    assert_non_null(strstr(c->line, name));
}

void zf_test_scheduler_start(zf_test_child_t *c, const char *endpoint, const char *const *args,
                             int wait_ms)
{
    const char *argv[16] = {ZF_TEST_SCHEDULER, "--broker", endpoint};
    int argc = 3;
    for (int i = 0; args && args[i] && argc < 15; i++) argv[argc++] = args[i];
    zf_test_spawn(c, argv, wait_ms);
    assert_non_null(strstr(c->line, "zflow-scheduler connected to"));
}

void zf_test_service_start(zf_test_service_t *svc, const char *const *broker_args, int n_executors,
                           int wait_ms)
{
    assert_true(n_executors >= 0 && n_executors <= ZF_TEST_MAX_EXECUTORS);
    memset(svc, 0, sizeof *svc);
    zf_test_broker_start(&svc->broker, broker_args);
    svc->n_executors = n_executors;
    for (int k = 0; k < n_executors; k++)
        zf_test_executor_start(&svc->executors[k], svc->broker.endpoint, k, wait_ms);
    zf_test_scheduler_start(&svc->scheduler, svc->broker.endpoint, NULL, wait_ms);
}

int zf_test_service_stop(zf_test_service_t *svc, int wait_ms)
{
    int rc = svc->scheduler.pid > 0 ? zf_test_child_stop(&svc->scheduler, SIGTERM, wait_ms) : 0;
    for (int k = 0; k < svc->n_executors; k++)
        if (svc->executors[k].pid > 0) zf_test_child_stop(&svc->executors[k], SIGTERM, wait_ms);
    zf_test_broker_stop(&svc->broker, SIGTERM);
    return rc;
}

int zf_test_service_setup(zf_test_service_t *svc, int n_executors, zf_client_t **client,
                          int wait_ms)
{
    zf_test_service_start(svc, NULL, n_executors, wait_ms);
    zf_status_t s = zf_client_connect(svc->broker.endpoint, client);
    if (!zf_ok(s)) {
        zf_status_clear(&s);
        return -1;
    }
    zf_client_set_timeout(*client, wait_ms);
    return 0;
}

int zf_test_service_teardown(zf_test_service_t *svc, zf_client_t **client, int wait_ms)
{
    zf_client_destroy(client);
    return zf_test_service_stop(svc, wait_ms) == 0 ? 0 : -1;
}

Tensorflow__GraphDef *zf_test_neg_chain(const char *const *devices, int n)
{
    static const char *const names[3] = {"x", "y", "z"};
    assert_true(n >= 2 && n <= 3);
    char text[1024];
    int len = snprintf(text, sizeof text,
                       "node { name: 'x' op: 'Placeholder' device: '%s'"
                       "  attr { key: 'dtype' value { type: DT_FLOAT } } }",
                       devices[0]);
    for (int k = 1; k < n; k++)
        len += snprintf(text + len, sizeof text - (size_t)len,
                        "node { name: '%s' op: '%s' input: '%s' device: '%s'"
                        "  attr { key: 'T' value { type: DT_FLOAT } } }",
                        names[k], k == 1 && n == 3 ? "Square" : "Neg", names[k - 1], devices[k]);
    assert_true(len > 0 && (size_t)len < sizeof text);
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, (size_t)len, ZF_FORMAT_PBTXT, &gd));
    return gd;
}

void zf_test_wait_stopped(pid_t pid, int wait_ms)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    for (int64_t end = zf_test_now_ms() + wait_ms; zf_test_now_ms() < end; usleep(1000)) {
        FILE *f = fopen(path, "r");
        if (!f) fail_msg("cannot read %s", path);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *paren = strrchr(buf, ')'); /* the name before it may hold anything */
        if (paren && paren[1] == ' ' && paren[2] == 'T') return;
    }
    fail_msg("process %d did not stop within %d ms", (int)pid, wait_ms);
}

Zflow__Envelope *zf_test_step_msg(zf_test_step_msg_t *m, const char *session, const char *name,
                                  Tensorflow__TensorProto *tp, const char *fetch, int timeout_ms)
{
    zflow__named_tensor__init(&m->feed);
    m->feed.name = (char *)name;
    m->feed.tensor = tp;
    m->feeds[0] = &m->feed;
    m->fetches[0] = (char *)fetch;
    zflow__run_step__init(&m->rs);
    m->rs.session = (char *)session;
    m->rs.n_feeds = 1;
    m->rs.feeds = m->feeds;
    m->rs.n_fetches = 1;
    m->rs.fetches = m->fetches;
    m->rs.timeout_ms = timeout_ms;
    zflow__envelope__init(&m->env);
    m->env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP;
    m->env.run_step = &m->rs;
    return &m->env;
}

zf_partition_set_t *zf_test_square_partition(const char *device, uint64_t incarnation)
{
    static const char text[] =
        "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"
        "node { name: 'y' op: 'Mul' input: 'x' input: 'x' attr { key: 'T' value { type: DT_FLOAT "
        "} } }";
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    zf_graph_t *g = NULL;
    ASSERT_OK(zf_graph_new_from_graphdef(gd, &g));
    zf_partition_device_t dev = {.incarnation = incarnation};
    ASSERT_OK(zf_device_name_parse(device, &dev.name));
    int assignment[2] = {0, 0};
    const char *feed = "x", *fetch = "y";
    zf_partition_options_t opts = {.feeds = &feed, .n_feeds = 1, .fetches = &fetch, .n_fetches = 1};
    zf_partition_set_t *set = NULL;
    ASSERT_OK(zf_partition_graph(g, &dev, 1, assignment, &opts, &set));
    zf_graph_destroy(&g);
    zf_graphdef_free(&gd);
    return set;
}
