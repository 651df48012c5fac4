/* Load tests of the distributed service through libzflow-client: many
 * concurrent clients against one local cluster (client/cluster.h), and an
 * executor that joins while jobs run. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "broker_test_util.h"
#include "client/cluster.h"
#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "session/local_session.h"
#include "test_util.h"

#define EXAMPLES  ZF_TEST_DATA_DIR "/../../examples"
#define EXECUTOR  ZF_BIN_DIR "/zflow-executor"
#define CPU1      "/job:localhost/replica:0/task:0/device:CPU:1"
#define WAIT_MS   20000
#define N_CLIENTS 8
#define N_RUNS    200

typedef struct {
    zf_cluster_t *cluster;
    Tensorflow__GraphDef *mlp;
    pid_t extra; /* an executor started by the test, or 0 */
    zf_client_t *client;
    pthread_t looper;
    bool looping;
    atomic_bool stop;
} fixture_t;

static int s_setup_cluster(void **state, const char *devices)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (!f) return -1;
    *state = f;
    atomic_init(&f->stop, false);
    zf_cluster_options_t o = ZF_CLUSTER_OPTIONS_DEFAULT;
    o.devices = devices;
    o.bin_dir = ZF_BIN_DIR;
    o.quiet = true;
    zf_status_t s = zf_cluster_start(&o, &f->cluster);
    if (zf_ok(s)) s = zf_graphdef_read_file(EXAMPLES "/mlp.pbtxt", ZF_FORMAT_AUTO, &f->mlp);
    if (!zf_ok(s)) {
        fprintf(stderr, "setup: %s\n", s.msg ? s.msg : "");
        zf_status_clear(&s);
        return -1;
    }
    return 0;
}

static int s_setup_two(void **state)
{
    return s_setup_cluster(state, "cpu:2");
}

static int s_setup_one(void **state)
{
    return s_setup_cluster(state, "cpu:1");
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    if (!f) return 0;
    atomic_store(&f->stop, true);
    if (f->looping) pthread_join(f->looper, NULL);
    zf_client_destroy(&f->client);
    if (f->extra > 0) {
        kill(f->extra, SIGKILL);
        waitpid(f->extra, NULL, 0);
    }
    zf_graphdef_free(&f->mlp);
    zf_status_t s = zf_cluster_stop(&f->cluster, 5000);
    int rc = zf_ok(s) ? 0 : -1;
    if (!zf_ok(s)) fprintf(stderr, "teardown: %s\n", s.msg ? s.msg : "");
    zf_status_clear(&s);
    free(f);
    return rc;
}

static zf_tensor_t *s_input(float scale)
{
    float x[8] = {1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, -0.75f};
    for (int i = 0; i < 8; i++) x[i] *= scale;
    zf_shape_t shape = {.rank = 2, .dims = {2, 4}};
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, x, sizeof x, &t));
    return t;
}

static const char *const s_feeds[1] = {"x"};
static const char *const s_fetches[2] = {"probs", "layer1/relu:0"};

static bool s_same(const zf_tensor_t *a, const zf_tensor_t *b)
{
    return a && b && zf_tensor_dtype(a) == zf_tensor_dtype(b) &&
           zf_tensor_nbytes(a) == zf_tensor_nbytes(b) &&
           memcmp(zf_tensor_data(a), zf_tensor_data(b), zf_tensor_nbytes(a)) == 0;
}

/* One client thread: its own connection and session, N_RUNS steps that
 * alternate between two feeds of its own; no cmocka asserts off the main
 * thread, so it counts and keeps the first error. */
typedef struct {
    const char *endpoint;
    const Tensorflow__GraphDef *gd;
    bool jobs; /* one-shot jobs instead of one session's steps */
    zf_tensor_t *x[2];
    zf_tensor_t *want[2][2];
    int ok;
    char error[512];
} worker_t;

static void s_worker_fail(worker_t *w, const char *what, zf_status_t *s)
{
    if (!w->error[0])
        snprintf(w->error, sizeof w->error, "%s: %s", what, s && s->msg ? s->msg : "");
    if (s) zf_status_clear(s);
}

static void *s_worker(void *arg)
{
    worker_t *w = arg;
    zf_client_t *c = NULL;
    char *session = NULL;
    zf_status_t s = zf_client_connect(w->endpoint, &c);
    if (zf_ok(s)) zf_client_set_timeout(c, WAIT_MS);
    if (zf_ok(s) && !w->jobs) s = zf_client_session_create(c, w->gd, NULL, &session);
    if (!zf_ok(s)) s_worker_fail(w, "create", &s);
    for (int r = 0; (session || (w->jobs && c)) && r < N_RUNS; r++) {
        zf_client_step_t step = {s_feeds, &w->x[r % 2], 1, s_fetches, 2, NULL, 0};
        zf_tensor_t *got[2] = {NULL, NULL};
        s = w->jobs ? zf_client_run_job(c, w->gd, NULL, &step, WAIT_MS, got)
                    : zf_client_session_run(c, session, &step, WAIT_MS, got);
        if (!zf_ok(s))
            s_worker_fail(w, "run", &s);
        else if (s_same(got[0], w->want[r % 2][0]) && s_same(got[1], w->want[r % 2][1]))
            w->ok++;
        else
            s_worker_fail(w, "wrong values", NULL);
        zf_tensor_unref(&got[0]);
        zf_tensor_unref(&got[1]);
    }
    if (session && !zf_ok(s = zf_client_session_close(c, session))) s_worker_fail(w, "close", &s);
    free(session);
    zf_client_destroy(&c);
    return NULL;
}

/* N_CLIENTS threads, N_RUNS requests each, every reply checked against the
 * local session's result for that client's own feeds. */
static void s_expect_concurrent_clients_served(fixture_t *f, bool jobs)
{
    zf_local_session_options_t lo = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    lo.devices = "cpu:1";
    zf_local_session_t *local = NULL;
    ASSERT_OK(zf_local_session_new(f->mlp, &lo, &local));
    worker_t w[N_CLIENTS];
    memset(w, 0, sizeof w);
    for (int i = 0; i < N_CLIENTS; i++) {
        w[i].endpoint = zf_cluster_endpoint(f->cluster);
        w[i].gd = f->mlp;
        w[i].jobs = jobs;
        for (int k = 0; k < 2; k++) {
            w[i].x[k] = s_input((float)(i + 1) * (k ? -0.5f : 1.0f));
            ASSERT_OK(zf_local_session_run(local, (const char **)s_feeds, &w[i].x[k], 1,
                                           (const char **)s_fetches, 2, NULL, 0, w[i].want[k]));
        }
    }
    pthread_t threads[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, s_worker, &w[i]), 0);
    for (int i = 0; i < N_CLIENTS; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < N_CLIENTS; i++) {
        if (w[i].error[0]) fail_msg("client %d: %s", i, w[i].error);
        assert_int_equal(w[i].ok, N_RUNS);
        for (int k = 0; k < 2; k++) {
            zf_tensor_unref(&w[i].x[k]);
            zf_tensor_unref(&w[i].want[k][0]);
            zf_tensor_unref(&w[i].want[k][1]);
        }
    }
    zf_local_session_destroy(&local);
}

static void test_service_answers_eight_concurrent_session_clients_with_their_values(void **state)
{
    s_expect_concurrent_clients_served(*state, false);
}

static void test_service_answers_eight_concurrent_job_clients_with_their_values(void **state)
{
    s_expect_concurrent_clients_served(*state, true);
}

/* ---- an executor joining while jobs run ---------------------------------------------- */

typedef struct {
    fixture_t *f;
    zf_tensor_t *x, *want; /* the feed and its probs from the local session */
    atomic_int ok, failed;
    char error[512]; /* the first failure; read after the join */
} looper_t;

/* One-shot MLP jobs on a client of its own until f->stop. */
static void *s_looper(void *arg)
{
    looper_t *l = arg;
    zf_client_t *c = NULL;
    zf_status_t s = zf_client_connect(zf_cluster_endpoint(l->f->cluster), &c);
    if (zf_ok(s)) zf_client_set_timeout(c, WAIT_MS);
    while (zf_ok(s) && !atomic_load(&l->f->stop)) {
        zf_client_step_t step = {s_feeds, &l->x, 1, s_fetches, 1, NULL, 0};
        zf_tensor_t *got = NULL;
        zf_status_t r = zf_client_run_job(c, l->f->mlp, NULL, &step, WAIT_MS, &got);
        if (zf_ok(r) && s_same(got, l->want)) {
            atomic_fetch_add(&l->ok, 1);
        } else {
            if (!l->error[0])
                snprintf(l->error, sizeof l->error, "%s", r.msg ? r.msg : "wrong values");
            atomic_fetch_add(&l->failed, 1);
        }
        zf_status_clear(&r);
        zf_tensor_unref(&got);
    }
    if (!zf_ok(s)) {
        snprintf(l->error, sizeof l->error, "%s", s.msg ? s.msg : "");
        zf_status_clear(&s);
        atomic_fetch_add(&l->failed, 1);
    }
    zf_client_destroy(&c);
    return NULL;
}

/* Waits (up to WAIT_MS) until l has done n jobs well; fails on a failed one. */
static void s_wait_for_jobs(looper_t *l, int n)
{
    int64_t end = zf_test_now_ms() + WAIT_MS;
    while (atomic_load(&l->ok) < n && !atomic_load(&l->failed) && zf_test_now_ms() < end)
        usleep(10000);
    if (atomic_load(&l->ok) < n) fail_msg("%d jobs done well of %d wanted", atomic_load(&l->ok), n);
}

/* Starts zflow-executor for CPU:1 against the cluster's broker and waits
 * for its startup line. */
static pid_t s_start_executor(const char *broker)
{
    if (access(EXECUTOR, X_OK) != 0) fail_msg("%s is not built", EXECUTOR);
    const char *argv[] = {EXECUTOR, "--broker", broker, "--device", "CPU:1", "--name", CPU1, NULL};
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        if (!freopen("/dev/null", "w", stderr)) _exit(126);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    char line[512];
    bool got = zf_test_read_line(fds[0], line, sizeof line, 10000);
    close(fds[0]);
    if (!got || !strstr(line, CPU1)) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("%s did not start: '%s'", EXECUTOR, got ? line : "");
    }
    return pid;
}

/* A session whose only nodes are pinned to CPU:1 (no soft placement): one
 * step of it, x -> -x. */
static zf_status_t s_run_on_cpu1(zf_client_t *c)
{
    const char *text = "node { name: 'x' op: 'Placeholder' device: '" CPU1 "'"
                       "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
                       "node { name: 'y' op: 'Neg' input: 'x' device: '" CPU1 "'"
                       "  attr { key: 'T' value { type: DT_FLOAT } } }";
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    float v[2] = {1.5f, -4.0f};
    zf_shape_t shape = {.rank = 1, .dims = {2}};
    zf_tensor_t *x = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, sizeof v, &x));
    const char *fetch[1] = {"y"};
    zf_client_step_t step = {s_feeds, &x, 1, fetch, 1, NULL, 0};
    char *session = NULL;
    zf_tensor_t *y = NULL;
    zf_status_t s = zf_client_session_create(c, gd, NULL, &session);
    if (zf_ok(s)) s = zf_client_session_run(c, session, &step, WAIT_MS, &y);
    if (zf_ok(s)) {
        const float *yv = zf_tensor_data(y);
        assert_true(yv[0] == -1.5f && yv[1] == 4.0f);
    }
    if (session) ASSERT_OK(zf_client_session_close(c, session));
    free(session);
    zf_tensor_unref(&y);
    zf_tensor_unref(&x);
    zf_graphdef_free(&gd);
    return s;
}

static void test_service_places_new_sessions_on_an_executor_that_joins_while_jobs_run(void **state)
{
    fixture_t *f = *state;
    ASSERT_OK(zf_client_connect(zf_cluster_endpoint(f->cluster), &f->client));
    zf_client_t *c = f->client;
    zf_client_set_timeout(c, WAIT_MS);
    zf_test_expect_error(s_run_on_cpu1(c), ZF_INVALID_ARGUMENT,
                         "y was explicitly assigned to " CPU1 " but available devices are [ "
                         "/job:localhost/replica:0/task:0/device:CPU:0 ]");

    static looper_t l; /* outlives a failed assertion: teardown joins the thread */
    memset(&l, 0, sizeof l);
    l.f = f;
    l.x = s_input(0.75f);
    zf_local_session_options_t lo = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    zf_local_session_t *local = NULL;
    ASSERT_OK(zf_local_session_new(f->mlp, &lo, &local));
    ASSERT_OK(zf_local_session_run(local, (const char **)s_feeds, &l.x, 1, (const char **)s_fetches,
                                   1, NULL, 0, &l.want));
    zf_local_session_destroy(&local);
    atomic_init(&l.ok, 0);
    atomic_init(&l.failed, 0);
    assert_int_equal(pthread_create(&f->looper, NULL, s_looper, &l), 0);
    f->looping = true;
    s_wait_for_jobs(&l, 3); /* jobs are running */
    f->extra = s_start_executor(zf_cluster_endpoint(f->cluster));
    /* the scheduler hears of the join from the broker a moment after the
     * executor registers */
    zf_status_t s = s_run_on_cpu1(c);
    for (int64_t end = zf_test_now_ms() + 10000; !zf_ok(s) && zf_test_now_ms() < end;) {
        zf_status_clear(&s);
        usleep(50000);
        s = s_run_on_cpu1(c);
    }
    ASSERT_OK(s);
    s_wait_for_jobs(&l, atomic_load(&l.ok) + 3); /* and keep running */
    atomic_store(&f->stop, true);
    pthread_join(f->looper, NULL);
    f->looping = false;
    zf_tensor_unref(&l.x);
    zf_tensor_unref(&l.want);
    int ok = atomic_load(&l.ok), failed = atomic_load(&l.failed);
    if (failed) fail_msg("%d of %d jobs failed: %s", failed, ok + failed, l.error);
    assert_true(ok >= 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_service_answers_eight_concurrent_session_clients_with_their_values, s_setup_two,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_service_answers_eight_concurrent_job_clients_with_their_values, s_setup_two,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_service_places_new_sessions_on_an_executor_that_joins_while_jobs_run, s_setup_one,
            s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
