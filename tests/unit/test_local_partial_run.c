/* Partial runs in the in-process session (zf_local_session_partial_run*),
 * on two CPU devices: tests/data/partial_run.pbtxt has r1 = a + b on
 * CPU:0 and r2 = r1 * c on CPU:1 (r1 crosses between them), and y =
 * Reshape(x, s) on CPU:1. Values are checked against arithmetic done here;
 * errors against TensorFlow's texts and codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "partial_run_test_util.h"
#include "session/local_session.h"
#include "test_util.h"

#define GRAPH ZF_TEST_DATA_DIR "/partial_run.pbtxt"

static Tensorflow__GraphDef *s_gd;
static zf_local_session_t *s_sess;

static int s_setup(void **state)
{
    (void)state;
    zf_status_t st = zf_graphdef_read_file(GRAPH, ZF_FORMAT_AUTO, &s_gd);
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.devices = "cpu:2";
    opts.timeout_ms = 60000;
    if (zf_ok(st)) st = zf_local_session_new(s_gd, &opts, &s_sess);
    if (zf_ok(st)) return 0;
    zf_status_clear(&st);
    return -1;
}

static int s_teardown(void **state)
{
    (void)state;
    zf_local_session_destroy(&s_sess);
    zf_graphdef_free(&s_gd);
    return 0;
}

static zf_status_t s_try_setup(const char *const *feeds, int nf, const char *const *fetches, int nt,
                               char **h)
{
    return zf_local_session_partial_run_setup(s_sess, feeds, nf, fetches, nt, NULL, 0, h);
}

static char *s_setup_run(const char *const *feeds, int nf, const char *const *fetches, int nt)
{
    char *h = NULL;
    ASSERT_OK(s_try_setup(feeds, nf, fetches, nt, &h));
    assert_non_null(h);
    return h;
}

/* One call; the feed values are dropped. */
static zf_status_t s_call(const char *h, const char *const *feeds, zf_tensor_t **values, int nf,
                          const char *const *fetches, int nt, zf_tensor_t **out)
{
    zf_tensor_t *unused[4] = {NULL};
    zf_status_t st =
        zf_local_session_partial_run(s_sess, h, feeds, values, nf, fetches, nt, out ? out : unused);
    for (int i = 0; i < nf; i++) zf_tensor_unref(&values[i]);
    return st;
}

static const char *const s_abc[3] = {"a", "b", "c"};
static const char *const s_r12[2] = {"r1", "r2"};
static const zf_test_prun_api_t s_api = {s_setup_run, s_try_setup, s_call};

/* TensorFlow's own partial-run test: r1 from a and b, then r2 from r1 and
 * c, in two calls; the handle is done after them. */
static void test_two_calls_compute_r1_then_r2(void **state)
{
    (void)state;
    char *h = s_setup_run(s_abc, 3, s_r12, 2);
    const char *ab[2] = {"a", "b"}, *c[1] = {"c:0"};
    zf_tensor_t *v[2] = {zf_test_prun_scalar(1.0f), zf_test_prun_scalar(2.0f)},
                *out[2] = {NULL, NULL};
    ASSERT_OK(s_call(h, ab, v, 2, &s_r12[0], 1, out));
    assert_true(zf_test_prun_take(&out[0]) == 3.0f);
    v[0] = zf_test_prun_scalar(17.0f);
    ASSERT_OK(s_call(h, c, v, 1, &s_r12[1], 1, out));
    assert_true(zf_test_prun_take(&out[0]) == 51.0f);
    v[0] = zf_test_prun_scalar(1.0f);
    zf_test_expect_error(s_call(h, ab, v, 1, NULL, 0, NULL), ZF_FAILED_PRECONDITION,
                         "has completed: every feed and fetch of it was given");
    free(h);
    zf_test_expect_error(
        s_call("prun-none", ab, (zf_tensor_t *[]){zf_test_prun_scalar(1.0f)}, 1, NULL, 0, NULL),
        ZF_INVALID_ARGUMENT,
        "Must run PartialRunSetup before performing partial runs (handle "
        "'prun-none' is not known in this session)");
}

/* Several partial runs of one signature open at once, called in turns. */
static void test_interleaved_handles(void **state)
{
    (void)state;
    zf_test_prun_interleaved(&s_api);
}

/* The checks of a call against its setup, in TensorFlow's words. */
static void test_call_checks(void **state)
{
    (void)state;
    zf_test_prun_checks(&s_api);
}

/* What a fed tensor's computation needs is not needed (see the util). */
static void test_fed_tensors_cut_the_check(void **state)
{
    (void)state;
    zf_test_prun_fed_cuts(&s_api);
}

/* ZF_LOCAL_SESSION_PRUNS_MAX open at once in a session (a new one: none
 * open before), one more refused. */
static void test_open_partial_runs_are_limited(void **state)
{
    (void)state;
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.devices = "cpu:2";
    opts.timeout_ms = 60000;
    zf_local_session_t *keep = s_sess;
    ASSERT_OK(zf_local_session_new(s_gd, &opts, &s_sess));
    char full[160];
    snprintf(full, sizeof full,
             "the session has %d partial runs open already (the most it keeps): finish or "
             "abandon one first",
             ZF_LOCAL_SESSION_PRUNS_MAX);
    zf_test_prun_limit(&s_api, ZF_LOCAL_SESSION_PRUNS_MAX, full);
    zf_local_session_destroy(&s_sess);
    s_sess = keep;
}

/* A kernel that fails at run time fails its call and ends the partial run:
 * a later call says why; the session runs the next step as before. */
static void test_a_failing_kernel_ends_the_partial_run(void **state)
{
    (void)state;
    const char *feeds[2] = {"x", "s"}, *y[1] = {"y"};
    char *h = s_setup_run(feeds, 2, y, 1);
    zf_tensor_t *x = NULL, *shape = NULL;
    float xs[3] = {1, 2, 3};
    int32_t bad = 2;
    zf_shape_t s3 = ZF_SHAPE(3), s1 = ZF_SHAPE(1);
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &s3, xs, sizeof xs, &x));
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_INT32, &s1, &bad, sizeof bad, &shape));
    zf_tensor_t *v[2] = {x, shape};
    zf_test_expect_error(s_call(h, feeds, v, 2, y, 1, NULL), ZF_INVALID_ARGUMENT,
                         "Input to reshape is a tensor with 3 values, but the requested shape "
                         "has 2");
    v[0] = zf_test_prun_scalar(1.0f);
    zf_test_expect_error(s_call(h, feeds, v, 1, NULL, 0, NULL), ZF_FAILED_PRECONDITION, "failed: ");
    free(h);
    /* the same graph runs a whole step afterwards */
    zf_tensor_t *a = zf_test_prun_scalar(2.0f), *b = zf_test_prun_scalar(3.0f),
                *c = zf_test_prun_scalar(4.0f);
    zf_tensor_t *vals[3] = {a, b, c}, *out[1] = {NULL};
    ASSERT_OK(zf_local_session_run(s_sess, s_abc, vals, 3, &s_r12[1], 1, NULL, 0, out));
    assert_true(zf_test_prun_take(&out[0]) == 20.0f);
    for (int i = 0; i < 3; i++) zf_tensor_unref(&vals[i]);
}

/* Open partial runs, one half fed, end with the session: nothing leaks or
 * hangs (ASan and the test's own exit show it). */
static void test_a_session_destroyed_with_partial_runs_open(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(GRAPH, ZF_FORMAT_AUTO, &gd));
    zf_local_session_options_t opts = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    opts.devices = "cpu:2";
    zf_local_session_t *s = NULL;
    ASSERT_OK(zf_local_session_new(gd, &opts, &s));
    char *h1 = NULL, *h2 = NULL;
    ASSERT_OK(zf_local_session_partial_run_setup(s, s_abc, 3, s_r12, 2, NULL, 0, &h1));
    ASSERT_OK(zf_local_session_partial_run_setup(s, s_abc, 3, s_r12, 2, NULL, 0, &h2));
    const char *ab[2] = {"a", "b"};
    zf_tensor_t *v[2] = {zf_test_prun_scalar(1.0f), zf_test_prun_scalar(2.0f)}, *out[1] = {NULL};
    ASSERT_OK(zf_local_session_partial_run(s, h1, ab, v, 2, &s_r12[0], 1, out));
    assert_true(zf_test_prun_take(&out[0]) == 3.0f);
    zf_tensor_unref(&v[0]);
    zf_tensor_unref(&v[1]);
    zf_local_session_destroy(&s);
    assert_null(s);
    free(h1);
    free(h2);
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_calls_compute_r1_then_r2),
        cmocka_unit_test(test_interleaved_handles),
        cmocka_unit_test(test_call_checks),
        cmocka_unit_test(test_fed_tensors_cut_the_check),
        cmocka_unit_test(test_open_partial_runs_are_limited),
        cmocka_unit_test(test_a_failing_kernel_ends_the_partial_run),
        cmocka_unit_test(test_a_session_destroyed_with_partial_runs_open),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
