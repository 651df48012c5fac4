/* Test helpers for process tests of the whole service: zflow-executor and
 * zflow-scheduler children beside a broker (broker_test_util.h), a
 * broker + scheduler + executors fixture, and the small pinned graphs the
 * tests run on it. Include after cmocka.h. */
#ifndef ZF_SERVICE_TEST_UTIL_H
#define ZF_SERVICE_TEST_UTIL_H

#include <stdio.h>
#include <string.h>

#include "broker_test_util.h"
#include "common/graphdef_io.h"
#include "test_util.h"

#define ZF_TEST_CPU(k)    "/job:localhost/replica:0/task:0/device:CPU:" #k
#define ZF_TEST_SCHEDULER ZF_BIN_DIR "/zflow-scheduler"
#define ZF_TEST_EXECUTOR  ZF_BIN_DIR "/zflow-executor"

/* Starts a zflow-executor of the broker at endpoint for device CPU:k,
 * named ZF_TEST_CPU(k), with one thread; fails the test unless its first
 * line (kept in c->line) names it within wait_ms. k is 0 to 9. */
static inline void zf_test_executor_start(zf_test_child_t *c, const char *endpoint, int k,
                                          int wait_ms)
{
    char device[8], name[64];
    snprintf(device, sizeof device, "CPU:%d", k);
    snprintf(name, sizeof name, "/job:localhost/replica:0/task:0/device:CPU:%d", k);
    const char *argv[] = {ZF_TEST_EXECUTOR, "--broker", endpoint,    "--device", device,
                          "--name",         name,       "--threads", "1",        NULL};
    zf_test_spawn(c, argv, wait_ms);
    assert_non_null(strstr(c->line, name));
}

/* Starts a zflow-scheduler of the broker at endpoint with extra arguments
 * args (NULL-terminated; may be NULL); fails the test unless it says it
 * connected within wait_ms. */
static inline void zf_test_scheduler_start(zf_test_child_t *c, const char *endpoint,
                                           const char *const *args, int wait_ms)
{
    const char *argv[16] = {ZF_TEST_SCHEDULER, "--broker", endpoint};
    int argc = 3;
    for (int i = 0; args && args[i] && argc < 15; i++) argv[argc++] = args[i];
    zf_test_spawn(c, argv, wait_ms);
    assert_non_null(strstr(c->line, "zflow-scheduler connected to"));
}

#define ZF_TEST_MAX_EXECUTORS 4

/* A broker, executors for CPU:0 .. CPU:n_executors-1 and one scheduler. */
typedef struct zf_test_service {
    zf_test_broker_t broker;
    zf_test_child_t executors[ZF_TEST_MAX_EXECUTORS];
    int n_executors;
    zf_test_child_t scheduler;
} zf_test_service_t;

/* Starts the broker with broker_args (as zf_test_broker_start), then the
 * executors, then the scheduler; each must start within wait_ms. */
static inline void zf_test_service_start(zf_test_service_t *svc, const char *const *broker_args,
                                         int n_executors, int wait_ms)
{
    assert_true(n_executors >= 0 && n_executors <= ZF_TEST_MAX_EXECUTORS);
    memset(svc, 0, sizeof *svc);
    zf_test_broker_start(&svc->broker, broker_args);
    svc->n_executors = n_executors;
    for (int k = 0; k < n_executors; k++)
        zf_test_executor_start(&svc->executors[k], svc->broker.endpoint, k, wait_ms);
    zf_test_scheduler_start(&svc->scheduler, svc->broker.endpoint, NULL, wait_ms);
}

/* SIGTERMs the scheduler, the executors (SIGKILL after wait_ms each) and
 * the broker; any of them may have stopped already. Returns the
 * scheduler's exit code, 0 when it was not running. */
static inline int zf_test_service_stop(zf_test_service_t *svc, int wait_ms)
{
    int rc = svc->scheduler.pid > 0 ? zf_test_child_stop(&svc->scheduler, SIGTERM, wait_ms) : 0;
    for (int k = 0; k < svc->n_executors; k++)
        if (svc->executors[k].pid > 0) zf_test_child_stop(&svc->executors[k], SIGTERM, wait_ms);
    zf_test_broker_stop(&svc->broker, SIGTERM);
    return rc;
}

/* A float chain of n nodes: with n = 2, Placeholder x on devices[0] and
 * y = -x on devices[1]; with n = 3, y = Square(x) on devices[1] and
 * z = -y = -(x * x) on devices[2], so neither partition can pass its input
 * through unnoticed. Caller frees (zf_graphdef_free). */
static inline Tensorflow__GraphDef *zf_test_neg_chain(const char *const *devices, int n)
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

/* Waits until /proc says process pid is stopped (state T), so that what
 * a test sends next finds it stopped; fails the test after wait_ms. */
static inline void zf_test_wait_stopped(pid_t pid, int wait_ms)
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

/* A RunStep envelope of session with one feed (name = tp) and one fetch,
 * built in m (the caller's storage, which must outlive its use; tp stays
 * the caller's). */
typedef struct {
    Zflow__NamedTensor feed;
    Zflow__NamedTensor *feeds[1];
    char *fetches[1];
    Zflow__RunStep rs;
    Zflow__Envelope env;
} zf_test_step_msg_t;

static inline Zflow__Envelope *zf_test_step_msg(zf_test_step_msg_t *m, const char *session,
                                                const char *name, Tensorflow__TensorProto *tp,
                                                const char *fetch, int timeout_ms)
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

#endif
