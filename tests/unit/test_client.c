/* Tests of libzflow-client against a real local cluster (zflow-broker, two
 * executors, zflow-scheduler on 127.0.0.1 ephemeral ports) started with
 * client/cluster.h, checked against the in-process local session. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "client/cluster.h"
#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "session/local_session.h"
#include "test_util.h"

#define EXAMPLES ZF_TEST_DATA_DIR "/../../examples"

typedef struct {
    zf_cluster_t *cluster;
    zf_client_t *client;
    Tensorflow__GraphDef *mlp;
    zf_local_session_t *local;
} fixture_t;

static int s_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (!f) return -1;
    *state = f;
    zf_cluster_options_t o = ZF_CLUSTER_OPTIONS_DEFAULT;
    o.devices = "cpu:2";
    o.bin_dir = ZF_BIN_DIR;
    o.quiet = true;
    zf_status_t s = zf_cluster_start(&o, &f->cluster);
    if (zf_ok(s)) s = zf_client_connect(zf_cluster_endpoint(f->cluster), &f->client);
    if (zf_ok(s)) s = zf_graphdef_read_file(EXAMPLES "/mlp.pbtxt", ZF_FORMAT_AUTO, &f->mlp);
    zf_local_session_options_t lo = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    lo.devices = "cpu:1";
    if (zf_ok(s)) s = zf_local_session_new(f->mlp, &lo, &f->local);
    if (!zf_ok(s)) {
        fprintf(stderr, "setup: %s\n", s.msg ? s.msg : "");
        zf_status_clear(&s);
        return -1;
    }
    zf_client_set_timeout(f->client, 20000);
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    zf_local_session_destroy(&f->local);
    zf_graphdef_free(&f->mlp);
    zf_client_destroy(&f->client);
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

static const char *const s_fetches[2] = {"probs", "layer1/relu:0"};

static void s_step(zf_client_step_t *step, const char *const *names, zf_tensor_t **x)
{
    *step = (zf_client_step_t){names, x, 1, s_fetches, 2, NULL, 0};
}

/* Checks got[0..2) against the local session's result for x. */
static void s_expect_local(fixture_t *f, zf_tensor_t *x, zf_tensor_t **got)
{
    const char *names[1] = {"x"};
    zf_tensor_t *want[2] = {NULL, NULL};
    ASSERT_OK(zf_local_session_run(f->local, names, &x, 1, s_fetches, 2, NULL, 0, want));
    for (int j = 0; j < 2; j++) {
        assert_non_null(got[j]);
        assert_int_equal(zf_tensor_dtype(got[j]), zf_tensor_dtype(want[j]));
        assert_int_equal(zf_tensor_nbytes(got[j]), zf_tensor_nbytes(want[j]));
        assert_memory_equal(zf_tensor_data(got[j]), zf_tensor_data(want[j]),
                            zf_tensor_nbytes(want[j]));
        zf_tensor_unref(&want[j]);
        zf_tensor_unref(&got[j]);
    }
}

static void test_client_session_runs_the_mlp_like_the_local_session(void **state)
{
    fixture_t *f = *state;
    char *session = NULL;
    zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    ASSERT_OK(zf_client_session_create(f->client, f->mlp, &o, &session));
    assert_non_null(strstr(session, "session"));
    const char *names[1] = {"x:0"};
    for (int r = 0; r < 2; r++) {
        zf_tensor_t *x = s_input(r ? -2.0f : 1.0f);
        zf_client_step_t step;
        s_step(&step, names, &x);
        zf_tensor_t *got[2] = {NULL, NULL};
        ASSERT_OK(zf_client_session_run(f->client, session, &step, 10000, got));
        s_expect_local(f, x, got);
        zf_tensor_unref(&x);
    }
    ASSERT_OK(zf_client_session_close(f->client, session));
    zf_tensor_t *x = s_input(1.0f);
    zf_client_step_t step;
    s_step(&step, names, &x);
    zf_tensor_t *got[2] = {NULL, NULL};
    zf_status_t s = zf_client_session_run(f->client, session, &step, 10000, got);
    assert_int_not_equal(s.code, ZF_OK);
    assert_non_null(strstr(s.msg, session));
    assert_null(got[0]);
    zf_status_clear(&s);
    zf_tensor_unref(&x);
    free(session);
}

static void test_client_job_submitted_and_waited_matches_the_local_session(void **state)
{
    fixture_t *f = *state;
    zf_tensor_t *x = s_input(0.5f);
    const char *names[1] = {"x"};
    zf_client_step_t step;
    s_step(&step, names, &x);
    char *job = NULL;
    ASSERT_OK(zf_client_submit(f->client, f->mlp, NULL, &step, &job));
    assert_non_null(strstr(job, "job-"));
    zf_tensor_t *got[2] = {NULL, NULL};
    ASSERT_OK(zf_client_wait(f->client, job, 2, 10000, got));
    s_expect_local(f, x, got);
    zf_test_expect_error(zf_client_wait(f->client, job, 2, 10000, got), ZF_NOT_FOUND,
                         "already collected");
    /* A result with more tensors than the caller has room for is refused
     * before anything is written. */
    char *job2 = NULL;
    ASSERT_OK(zf_client_submit(f->client, f->mlp, NULL, &step, &job2));
    zf_tensor_t *one[1] = {NULL};
    zf_test_expect_error(zf_client_wait(f->client, job2, 1, 10000, one), ZF_INTERNAL,
                         "the service returned 2 tensors for 1 fetches");
    assert_null(one[0]);
    free(job2);
    ASSERT_OK(zf_client_run_job(f->client, f->mlp, NULL, &step, 10000, got));
    s_expect_local(f, x, got);
    free(job);
    zf_tensor_unref(&x);
}

/* Two steps sent before either reply is read: each reply reaches its own
 * request, whichever is asked for first. */
static void test_client_matches_replies_of_two_requests_in_flight(void **state)
{
    fixture_t *f = *state;
    char *session = NULL;
    ASSERT_OK(zf_client_session_create(f->client, f->mlp, NULL, &session));
    const char *names[1] = {"x"};
    zf_tensor_t *xa = s_input(1.0f), *xb = s_input(-3.0f);
    zf_client_step_t sa, sb;
    s_step(&sa, names, &xa);
    s_step(&sb, names, &xb);
    uint64_t ra = 0, rb = 0;
    ASSERT_OK(zf_client_session_run_start(f->client, session, &sa, 10000, &ra));
    ASSERT_OK(zf_client_session_run_start(f->client, session, &sb, 10000, &rb));
    assert_int_not_equal(ra, rb);
    zf_tensor_t *gb[2] = {NULL, NULL}, *ga[2] = {NULL, NULL};
    ASSERT_OK(zf_client_session_run_finish(f->client, rb, 2, 10000, gb));
    ASSERT_OK(zf_client_session_run_finish(f->client, ra, 2, 10000, ga));
    s_expect_local(f, xb, gb);
    s_expect_local(f, xa, ga);
    ASSERT_OK(zf_client_session_close(f->client, session));
    zf_tensor_unref(&xa);
    zf_tensor_unref(&xb);
    free(session);
}

static void test_client_reports_a_bad_graph_with_the_services_error_text(void **state)
{
    fixture_t *f = *state;
    const char text[] = "node { name: \"bad\" op: \"NoSuchOp\" }\n";
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, sizeof text - 1, ZF_FORMAT_PBTXT, &gd));
    const char *fetch[1] = {"bad"};
    zf_client_step_t step = {NULL, NULL, 0, fetch, 1, NULL, 0};
    zf_tensor_t *got[1] = {NULL};
    /* the service builds a session's graph at its first step */
    char *session = NULL;
    zf_status_t s = zf_client_session_create(f->client, gd, NULL, &session);
    if (zf_ok(s)) {
        s = zf_client_session_run(f->client, session, &step, 10000, got);
        ASSERT_OK(zf_client_session_close(f->client, session));
        free(session);
    }
    zf_test_expect_error(s, ZF_INVALID_ARGUMENT, "Op 'NoSuchOp' used by node bad");
    assert_null(got[0]);
    zf_test_expect_error(zf_client_run_job(f->client, gd, NULL, &step, 10000, got),
                         ZF_INVALID_ARGUMENT, "NoSuchOp");
    assert_null(got[0]);
    zf_graphdef_free(&gd);
}

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_client_without_a_broker_fails_unavailable_within_its_timeout(void **state)
{
    fixture_t *f = *state;
    zf_client_t *c = NULL;
    /* the cluster's port after stopping it would be racy; port 1 is never
     * a zflow broker and needs root to listen on */
    ASSERT_OK(zf_client_connect("tcp://127.0.0.1:1", &c));
    zf_client_set_timeout(c, 300);
    char *session = NULL;
    int64_t t0 = s_now_ms();
    zf_test_expect_error(zf_client_session_create(c, f->mlp, NULL, &session), ZF_UNAVAILABLE,
                         "no reply to CreateSession within 300 ms: the broker at "
                         "tcp://127.0.0.1:1 does not answer");
    int64_t took = s_now_ms() - t0;
    assert_true(took >= 250 && took < 5000);
    assert_null(session);
    zf_client_destroy(&c);
    zf_client_destroy(&c); /* NULL-safe */
    zf_test_expect_error(zf_client_connect("", &c), ZF_INVALID_ARGUMENT, "empty broker endpoint");
    assert_null(c);
}

static void test_cluster_start_fails_cleanly_for_a_bad_device_list_or_program(void **state)
{
    (void)state;
    zf_cluster_t *c = NULL;
    zf_cluster_options_t o = ZF_CLUSTER_OPTIONS_DEFAULT;
    o.bin_dir = ZF_BIN_DIR;
    o.devices = "cpu:0";
    zf_test_expect_error(zf_cluster_start(&o, &c), ZF_INVALID_ARGUMENT, "cluster devices");
    assert_null(c);
    o.devices = "cpu:1";
    o.bin_dir = "/nonexistent-zflow-bin";
    zf_test_expect_error(zf_cluster_start(&o, &c), ZF_NOT_FOUND,
                         "/nonexistent-zflow-bin/zflow-broker");
    assert_null(c);
    o.bin_dir = ZF_BIN_DIR;
    o.port = 70000;
    zf_test_expect_error(zf_cluster_start(&o, &c), ZF_INVALID_ARGUMENT, "port 70000");
    ASSERT_OK(zf_cluster_stop(&c, 100)); /* NULL-safe */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_session_runs_the_mlp_like_the_local_session),
        cmocka_unit_test(test_client_job_submitted_and_waited_matches_the_local_session),
        cmocka_unit_test(test_client_matches_replies_of_two_requests_in_flight),
        cmocka_unit_test(test_client_reports_a_bad_graph_with_the_services_error_text),
        cmocka_unit_test(test_client_without_a_broker_fails_unavailable_within_its_timeout),
        cmocka_unit_test(test_cluster_start_fails_cleanly_for_a_bad_device_list_or_program),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
