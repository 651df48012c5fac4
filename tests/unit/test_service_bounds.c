/* The scheduler's bounds as a real zflow-scheduler process behind a real
 * broker and two executors on 127.0.0.1 ephemeral ports, through
 * libzflow-client: sessions in all and per client (--max-sessions,
 * --max-sessions-per-client), a session closed after its idle timeout
 * (--session-idle-timeout-ms), graphs past the size limits refused at
 * CreateSession and SubmitJob (--max-graph-nodes, --max-graph-bytes) and
 * a session's graph grown past them by ExtendSessions, and
 * a step that hangs ended by the default step timeout (--step-timeout-ms)
 * while the next one runs; an executor's graph limit (zflow-executor
 * --max-graphs) as the step that met it sees it; and `zflow run` naming the job it submitted
 * when its wait fails, so that the result can still be collected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "service_test_util.h"
#include "test_util.h"

#define CPU0    ZF_TEST_CPU(0)
#define CPU1    ZF_TEST_CPU(1)
#define WAIT_MS 60000

typedef struct {
    zf_test_service_t svc; /* two executors */
    zf_client_t *client;
} fixture_t;

/* The cluster, its scheduler replaced by one started with args. */
static fixture_t *s_start(void **state, const char *const *args)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    *state = f;
    /* dead only after 30 s: a stopped executor stays a member */
    const char *bargs[] = {"--heartbeat-ms", "1000", "--heartbeat-misses", "30", NULL};
    zf_test_service_start(&f->svc, bargs, 2, WAIT_MS);
    assert_int_equal(zf_test_child_stop(&f->svc.scheduler, SIGTERM, WAIT_MS), 0);
    zf_test_scheduler_start(&f->svc.scheduler, f->svc.broker.endpoint, args, WAIT_MS);
    ASSERT_OK(zf_client_connect(f->svc.broker.endpoint, &f->client));
    zf_client_set_timeout(f->client, WAIT_MS);
    return f;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    if (!f) return 0;
    zf_client_destroy(&f->client);
    int rc = zf_test_service_stop(&f->svc, WAIT_MS);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* x on CPU:0, y = x * x on CPU:1, z = -y on CPU:0. */
static Tensorflow__GraphDef *s_chain_graph(void)
{
    const char *const devices[3] = {CPU0, CPU1, CPU0};
    return zf_test_neg_chain(devices, 3);
}

static zf_tensor_t *s_floats(float scale)
{
    float v[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    for (int i = 0; i < 4; i++) v[i] *= scale;
    zf_shape_t shape = {.rank = 1, .dims = {4}};
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, sizeof v, &t));
    return t;
}

static const char *const s_feed_x[1] = {"x"};
static const char *const s_fetch_z[1] = {"z"};

/* One chain step of session, started with the step's own timeout_ms (0:
 * none, so the scheduler's default applies); its status. */
static zf_status_t s_run(zf_client_t *c, const char *session, float scale, int timeout_ms)
{
    zf_tensor_t *x = s_floats(scale);
    zf_client_step_t step = {s_feed_x, &x, 1, s_fetch_z, 1, NULL, 0};
    uint64_t request = 0;
    zf_tensor_t *z = NULL;
    zf_status_t st = zf_client_session_run_start(c, session, &step, timeout_ms, &request);
    if (zf_ok(st)) st = zf_client_session_run_finish(c, request, 1, WAIT_MS, &z);
    if (zf_ok(st)) {
        const float *xv = zf_tensor_data(x), *zv = zf_tensor_data(z);
        for (int i = 0; i < 4; i++) assert_true(zv[i] == -(xv[i] * xv[i]));
    }
    zf_tensor_unref(&z);
    zf_tensor_unref(&x);
    return st;
}

static char *s_create(zf_client_t *c, Tensorflow__GraphDef *gd)
{
    zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    char *session = NULL;
    ASSERT_OK(zf_client_session_create(c, gd, &o, &session));
    return session;
}

static void s_expect_create_refused(zf_client_t *c, Tensorflow__GraphDef *gd, int code,
                                    const char *text)
{
    zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    char *session = NULL;
    zf_test_expect_error(zf_client_session_create(c, gd, &o, &session), code, text);
    assert_null(session);
}

/* ---- sessions ------------------------------------------------------------------- */

static int s_setup_sessions(void **state)
{
    const char *args[] = {"--max-sessions", "3", "--max-sessions-per-client", "2", NULL};
    s_start(state, args);
    return 0;
}

static void test_scheduler_refuses_sessions_past_its_limits_and_serves_the_rest(void **state)
{
    fixture_t *f = *state;
    Tensorflow__GraphDef *gd = s_chain_graph();
    zf_client_t *other = NULL;
    ASSERT_OK(zf_client_connect(f->svc.broker.endpoint, &other));
    zf_client_set_timeout(other, WAIT_MS);

    char *a1 = s_create(f->client, gd), *a2 = s_create(f->client, gd);
    s_expect_create_refused(f->client, gd, ZF_RESOURCE_EXHAUSTED,
                            "the most one client may (zflow-scheduler "
                            "--max-sessions-per-client 2)");
    /* another client still may, up to the scheduler's own limit */
    char *b1 = s_create(other, gd);
    s_expect_create_refused(other, gd, ZF_RESOURCE_EXHAUSTED,
                            "this scheduler holds 3 sessions, the most it keeps open "
                            "(zflow-scheduler --max-sessions 3)");
    /* the sessions held still run, and a closed one makes room */
    ASSERT_OK(s_run(f->client, a1, 1.0f, WAIT_MS));
    ASSERT_OK(s_run(other, b1, 2.0f, WAIT_MS));
    ASSERT_OK(zf_client_session_close(f->client, a1));
    char *b2 = s_create(other, gd);
    ASSERT_OK(s_run(other, b2, 3.0f, WAIT_MS));
    ASSERT_OK(zf_client_session_close(f->client, a2));
    ASSERT_OK(zf_client_session_close(other, b1));
    ASSERT_OK(zf_client_session_close(other, b2));
    free(a1);
    free(a2);
    free(b1);
    free(b2);
    zf_client_destroy(&other);
    zf_graphdef_free(&gd);
}

static int s_setup_idle(void **state)
{
    const char *args[] = {"--session-idle-timeout-ms", "400", NULL};
    s_start(state, args);
    return 0;
}

static void test_scheduler_closes_a_session_idle_past_its_timeout(void **state)
{
    fixture_t *f = *state;
    Tensorflow__GraphDef *gd = s_chain_graph();
    char *busy = s_create(f->client, gd), *idle = s_create(f->client, gd);
    /* steps every 100 ms for three timeouts keep a session open */
    int64_t until = zf_test_now_ms() + 1200;
    while (zf_test_now_ms() < until) {
        ASSERT_OK(s_run(f->client, busy, 1.0f, WAIT_MS));
        usleep(100000);
    }
    ASSERT_OK(s_run(f->client, busy, 1.0f, WAIT_MS));
    /* the other one, untouched since it was made, is gone */
    zf_test_expect_error(s_run(f->client, idle, 1.0f, WAIT_MS), ZF_NOT_FOUND,
                         "the scheduler closed it after 400 ms without a step "
                         "(zflow-scheduler --session-idle-timeout-ms)");
    zf_test_expect_error(zf_client_session_close(f->client, idle), ZF_NOT_FOUND,
                         "--session-idle-timeout-ms");
    ASSERT_OK(zf_client_session_close(f->client, busy));
    free(busy);
    free(idle);
    zf_graphdef_free(&gd);
}

/* ---- graph sizes ---------------------------------------------------------------- */

static int s_setup_graphs(void **state)
{
    const char *args[] = {"--max-graph-nodes", "4", "--max-graph-bytes", "1000", NULL};
    s_start(state, args);
    return 0;
}

/* Appends to text (len bytes of cap so far) a Const node c<k> of `floats`
 * floats 0.5, 1.5, ...; returns the new length. */
static int s_append_const(char *text, size_t cap, int len, int k, int floats)
{
    len += snprintf(text + len, cap - (size_t)len,
                    "node { name: 'c%d' op: 'Const' device: '" CPU0 "'"
                    "  attr { key: 'dtype' value { type: DT_FLOAT } }"
                    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT"
                    "    tensor_shape { dim { size: %d } }",
                    k, floats);
    for (int i = 0; i < floats; i++)
        len += snprintf(text + len, cap - (size_t)len, " float_val: %d.5", i);
    len += snprintf(text + len, cap - (size_t)len, " } } } }");
    assert_true(len < (int)cap - 64);
    return len;
}

/* The chain with `extra` more Const nodes of `floats` floats each. */
static Tensorflow__GraphDef *s_padded_graph(int extra, int floats)
{
    char text[16384];
    int len = snprintf(text, sizeof text,
                       "node { name: 'x' op: 'Placeholder' device: '" CPU0 "'"
                       "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
                       "node { name: 'z' op: 'Neg' input: 'x' device: '" CPU0 "'"
                       "  attr { key: 'T' value { type: DT_FLOAT } } }");
    for (int k = 0; k < extra; k++) len = s_append_const(text, sizeof text, len, k, floats);
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, (size_t)len, ZF_FORMAT_PBTXT, &gd));
    return gd;
}

/* An extension of one Const node c<k> of `floats` floats. */
static Tensorflow__GraphDef *s_const_graph(int k, int floats)
{
    char text[16384];
    int len = s_append_const(text, sizeof text, 0, k, floats);
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, (size_t)len, ZF_FORMAT_PBTXT, &gd));
    return gd;
}

static void test_scheduler_refuses_graphs_past_its_size_limits(void **state)
{
    fixture_t *f = *state;
    Tensorflow__GraphDef *small = s_padded_graph(2, 1), *many = s_padded_graph(3, 1),
                         *big = s_padded_graph(1, 400);
    char *ok = s_create(f->client, small); /* 4 nodes, well under 1000 bytes */
    s_expect_create_refused(f->client, many, ZF_RESOURCE_EXHAUSTED,
                            "CreateSession: the graph has 5 nodes; this scheduler takes at "
                            "most 4 (zflow-scheduler --max-graph-nodes)");
    s_expect_create_refused(f->client, big, ZF_RESOURCE_EXHAUSTED,
                            "this scheduler takes at most 1000 (zflow-scheduler "
                            "--max-graph-bytes)");
    /* a job's graph is checked when a scheduler takes it (the broker keeps
     * every accepted job): the job ends with the refusal */
    zf_tensor_t *x = s_floats(1.0f);
    zf_client_step_t step = {s_feed_x, &x, 1, s_fetch_z, 1, NULL, 0};
    zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    char *job = NULL;
    ASSERT_OK(zf_client_submit(f->client, many, &o, &step, &job));
    zf_tensor_t *z = NULL;
    zf_test_expect_error(zf_client_wait(f->client, job, 1, WAIT_MS, &z), ZF_RESOURCE_EXHAUSTED,
                         "SubmitJob: the graph has 5 nodes");
    assert_null(z);
    free(job);
    job = NULL;
    ASSERT_OK(zf_client_submit(f->client, small, &o, &step, &job));
    ASSERT_OK(zf_client_wait(f->client, job, 1, WAIT_MS, &z));
    assert_true(((const float *)zf_tensor_data(z))[1] == 2.0f);
    zf_tensor_unref(&z);
    ASSERT_OK(zf_client_session_close(f->client, ok));
    free(job);
    free(ok);
    zf_tensor_unref(&x);
    zf_graphdef_free(&small);
    zf_graphdef_free(&many);
    zf_graphdef_free(&big);
}

/* --max-graph-bytes bounds a session's graph, not each extension alone:
 * extensions each well under the limit are refused once the session's
 * GraphDefs together would pass it, and a refused one changes nothing. */
static void test_scheduler_bounds_the_bytes_of_a_session_extended_in_pieces(void **state)
{
    fixture_t *f = *state;
    Tensorflow__GraphDef *base = s_padded_graph(0, 1), *a = s_const_graph(0, 100),
                         *b = s_const_graph(1, 100), *tiny = s_const_graph(1, 1);
    size_t base_bytes = protobuf_c_message_get_packed_size(&base->base),
           a_bytes = protobuf_c_message_get_packed_size(&a->base),
           b_bytes = protobuf_c_message_get_packed_size(&b->base),
           tiny_bytes = protobuf_c_message_get_packed_size(&tiny->base);
    /* a and b each fit, both together do not; tiny fits after a */
    assert_true(base_bytes + a_bytes <= 1000 && b_bytes <= 1000);
    assert_true(base_bytes + a_bytes + b_bytes > 1000);
    assert_true(base_bytes + a_bytes + tiny_bytes <= 1000);
    char *session = s_create(f->client, base);
    int64_t version = -1;
    ASSERT_OK(zf_client_session_extend(f->client, session, a, 0, &version));
    assert_int_equal(version, 1);
    char want[256];
    snprintf(want, sizeof want,
             "ExtendSession: the session's graph is %zu bytes serialized and the extension %zu "
             "more; this scheduler takes at most 1000 (zflow-scheduler --max-graph-bytes)",
             base_bytes + a_bytes, b_bytes);
    zf_test_expect_error(zf_client_session_extend(f->client, session, b, 1, &version),
                         ZF_RESOURCE_EXHAUSTED, want);
    /* nothing of b was applied: the version is still 1 and c1 is free */
    ASSERT_OK(zf_client_session_extend(f->client, session, tiny, 1, &version));
    assert_int_equal(version, 2);
    const char *fetch[2] = {"c0", "c1"};
    zf_client_step_t step = {NULL, NULL, 0, fetch, 2, NULL, 0};
    zf_tensor_t *out[2] = {NULL, NULL};
    ASSERT_OK(zf_client_session_run(f->client, session, &step, WAIT_MS, out));
    assert_int_equal(zf_tensor_num_elements(out[0]), 100);
    assert_true(((const float *)zf_tensor_data(out[0]))[99] == 99.5f);
    assert_int_equal(zf_tensor_num_elements(out[1]), 1);
    assert_true(((const float *)zf_tensor_data(out[1]))[0] == 0.5f);
    ASSERT_OK(zf_client_session_close(f->client, session));
    zf_tensor_unref(&out[0]);
    zf_tensor_unref(&out[1]);
    free(session);
    zf_graphdef_free(&base);
    zf_graphdef_free(&a);
    zf_graphdef_free(&b);
    zf_graphdef_free(&tiny);
}

/* ---- the default step timeout ---------------------------------------------------- */

static int s_setup_step_timeout(void **state)
{
    const char *args[] = {"--step-timeout-ms", "500", NULL};
    s_start(state, args);
    return 0;
}

static void test_scheduler_ends_a_hung_step_at_its_default_timeout(void **state)
{
    fixture_t *f = *state;
    Tensorflow__GraphDef *gd = s_chain_graph();
    char *session = s_create(f->client, gd);
    ASSERT_OK(s_run(f->client, session, 1.0f, 0));

    /* CPU:1 stopped never answers: neither the client nor the session give
     * the step a timeout, so only the scheduler's default ends it. kill()
     * only queues the signal: wait until the process has stopped. */
    kill(f->svc.executors[1].pid, SIGSTOP);
    zf_test_wait_stopped(f->svc.executors[1].pid, WAIT_MS);
    zf_test_expect_error(s_run(f->client, session, 2.0f, 0), ZF_DEADLINE_EXCEEDED,
                         "did not finish within 500 ms (the scheduler's default step timeout, "
                         "zflow-scheduler --step-timeout-ms)");
    kill(f->svc.executors[1].pid, SIGCONT);
    /* the step was aborted everywhere and its worker freed: the next ones run */
    ASSERT_OK(s_run(f->client, session, 3.0f, 0));
    ASSERT_OK(s_run(f->client, session, -1.0f, 0));
    ASSERT_OK(zf_client_session_close(f->client, session));
    free(session);
    zf_graphdef_free(&gd);
}

/* ---- an executor's graph limit through the service -------------------------------- */

static int s_setup_one_graph_on_cpu1(void **state)
{
    fixture_t *f = s_start(state, NULL);
    /* CPU:1 again, holding one graph at most */
    zf_test_child_t *c = &f->svc.executors[1];
    assert_int_equal(zf_test_child_stop(c, SIGTERM, WAIT_MS), 0);
    const char *argv[] = {
        ZF_TEST_EXECUTOR, "--broker", f->svc.broker.endpoint, "--device", "CPU:1", "--name", CPU1,
        "--threads",      "1",        "--max-graphs",         "1",        NULL};
    zf_test_spawn(c, argv, WAIT_MS);
    assert_non_null(strstr(c->line, CPU1));
    return 0;
}

static void test_service_reports_an_executors_graph_limit_and_runs_once_there_is_room(void **state)
{
    fixture_t *f = *state;
    Tensorflow__GraphDef *gd = s_chain_graph();
    /* each session's plan registers one partition on CPU:1; the scheduler
     * may take a moment to see the restarted CPU:1 */
    char *first = s_create(f->client, gd);
    zf_status_t st = s_run(f->client, first, 1.0f, WAIT_MS);
    for (int i = 0; i < 50 && st.code == ZF_UNAVAILABLE; i++) {
        zf_status_clear(&st);
        usleep(100000);
        st = s_run(f->client, first, 1.0f, WAIT_MS);
    }
    ASSERT_OK(st);
    char *second = s_create(f->client, gd);
    zf_test_expect_error(s_run(f->client, second, 2.0f, WAIT_MS), ZF_RESOURCE_EXHAUSTED,
                         "RegisterGraph refused: " CPU1 " holds 1 graphs, the most it "
                         "registers at once (zflow-executor --max-graphs 1)");
    ASSERT_OK(s_run(f->client, first, 3.0f, WAIT_MS)); /* the graph there runs on */
    ASSERT_OK(zf_client_session_close(f->client, first));
    ASSERT_OK(s_run(f->client, second, 2.0f, WAIT_MS)); /* its graph went: room */
    ASSERT_OK(zf_client_session_close(f->client, second));
    free(first);
    free(second);
    zf_graphdef_free(&gd);
}

/* ---- a job's id in the CLI's errors ---------------------------------------------- */

static int s_setup_plain(void **state)
{
    s_start(state, NULL);
    return 0;
}

/* Starts `zflow run` of the chain (written to path) as a job at the broker
 * with timeout_ms; its stderr fd in *err_fd. */
static pid_t s_cli_run(const fixture_t *f, const char *path, const char *timeout_ms, int *out_fd,
                       int *err_fd)
{
    Tensorflow__GraphDef *gd = s_chain_graph();
    ASSERT_OK(zf_graphdef_write_file(gd, path, ZF_FORMAT_PBTXT));
    zf_graphdef_free(&gd);
    const char *argv[] = {ZF_BIN_DIR "/zflow",
                          "run",
                          path,
                          "--broker",
                          f->svc.broker.endpoint,
                          "--feed",
                          "x=[1,-2,0.5,3]",
                          "--fetch",
                          "z",
                          "--timeout-ms",
                          timeout_ms,
                          "--quiet",
                          NULL};
    return zf_test_spawn_piped(argv, out_fd, err_fd);
}

static void
test_cli_run_names_its_job_when_its_wait_fails_so_the_result_can_be_collected(void **state)
{
    fixture_t *f = *state;
    char path[] = "/tmp/zflow-bounds-XXXXXX.pbtxt";
    int tmp = mkstemps(path, 6);
    assert_true(tmp >= 0);
    close(tmp);
    /* the job's step hangs on a stopped CPU:1; then the broker falls
     * silent under `zflow run`, which gives up on it after 3 s */
    kill(f->svc.executors[1].pid, SIGSTOP);
    zf_test_wait_stopped(f->svc.executors[1].pid, WAIT_MS);
    int out_fd = -1, err_fd = -1;
    setenv("ZFLOW_LOG_LEVEL", "debug", 1); /* the client's log says when it submitted */
    pid_t cli = s_cli_run(f, path, "60000", &out_fd, &err_fd);
    unsetenv("ZFLOW_LOG_LEVEL");
    static char out[4096], err[4096], line[512];
    bool submitted = false;
    for (int64_t end = zf_test_now_ms() + WAIT_MS; !submitted && zf_test_now_ms() < end;)
        submitted = zf_test_read_line(err_fd, line, sizeof line, WAIT_MS) &&
                    strstr(line, "submitted job ") != NULL;
    assert_true(submitted); /* the job waits on CPU:1 now */
    kill(f->svc.broker.pid, SIGSTOP);
    zf_test_wait_stopped(f->svc.broker.pid, WAIT_MS);
    int64_t deadline = zf_test_now_ms() + WAIT_MS;
    zf_test_drain(out_fd, out, sizeof out, deadline);
    zf_test_drain(err_fd, err, sizeof err, deadline);
    close(out_fd);
    close(err_fd);
    assert_int_equal(zf_test_reap(cli, deadline), 1);
    /* the broker back first: the WaitJob it still held reaches the
     * scheduler, whose waiter ends within its 1 s slice, before the job
     * can end and hand it the result */
    kill(f->svc.broker.pid, SIGCONT);
    usleep(2000000);
    kill(f->svc.executors[1].pid, SIGCONT);
    /* "... no result for job <id> (it goes on, and a later wait for <id> can
     * still collect its result): UNAVAILABLE ..." */
    const char *at = strstr(err, "no result for job ");
    if (!at) fail_msg("zflow run's error does not name its job: %s", err);
    char id[128];
    assert_int_equal(sscanf(at + strlen("no result for job "), "%127s", id), 1);
    assert_int_equal(strncmp(id, "job-", 4), 0); /* the broker's job id */
    assert_non_null(strstr(err, "a later wait for"));
    assert_non_null(strstr(err, "can still collect its result"));
    assert_non_null(strstr(err, "UNAVAILABLE"));

    /* and so it can: the job ends once CPU:1 runs again */
    zf_tensor_t *z = NULL;
    ASSERT_OK(zf_client_wait(f->client, id, 1, WAIT_MS, &z));
    const float *zv = zf_tensor_data(z);
    assert_true(zv[0] == -1.0f && zv[1] == -4.0f && zv[2] == -0.25f && zv[3] == -9.0f);
    zf_tensor_unref(&z);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_scheduler_refuses_sessions_past_its_limits_and_serves_the_rest, s_setup_sessions,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_closes_a_session_idle_past_its_timeout,
                                        s_setup_idle, s_teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_refuses_graphs_past_its_size_limits,
                                        s_setup_graphs, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_scheduler_bounds_the_bytes_of_a_session_extended_in_pieces, s_setup_graphs,
            s_teardown),
        cmocka_unit_test_setup_teardown(test_scheduler_ends_a_hung_step_at_its_default_timeout,
                                        s_setup_step_timeout, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_service_reports_an_executors_graph_limit_and_runs_once_there_is_room,
            s_setup_one_graph_on_cpu1, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_cli_run_names_its_job_when_its_wait_fails_so_the_result_can_be_collected,
            s_setup_plain, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
