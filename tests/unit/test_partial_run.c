/* Partial runs through real processes (`zflow up --cpu 2` on 127.0.0.1):
 * one step fed and fetched in pieces over several calls, its partitions on
 * two executors staying live between the calls (tests/data/partial_run.pbtxt:
 * r1 = a + b on CPU:0, r2 = r1 * c on CPU:1; y = Reshape(x, s) on CPU:1).
 * Also the session option place_pruned_graph on the same cluster. Values
 * are checked against arithmetic done here; errors against TensorFlow's
 * texts and codes. First, without the cluster, the table of a session's
 * open partial runs that both sessions keep (zf_partial_run_table_t). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "scheduler/graph/partial_run.h"
#include "scheduler/master/master_internal.h"
#include "partial_run_test_util.h"
#include "process_test_util.h"
#include "test_util.h"

#define ZFLOW   ZF_BIN_DIR "/zflow"
#define GRAPH   ZF_TEST_DATA_DIR "/partial_run.pbtxt"
#define WAIT_MS 60000

static char s_endpoint[256];
static pid_t s_up = -1;
static zf_client_t *s_client;
static char *s_sess;

static int s_setup(void **state)
{
    (void)state;
    s_up = zf_test_up_start(ZFLOW, 2, s_endpoint, sizeof s_endpoint, WAIT_MS);
    if (s_up < 0) return -1;
    zf_status_t s = zf_client_connect(s_endpoint, &s_client);
    if (zf_ok(s)) zf_client_set_timeout(s_client, WAIT_MS);
    Tensorflow__GraphDef *gd = NULL;
    if (zf_ok(s)) s = zf_graphdef_read_file(GRAPH, ZF_FORMAT_AUTO, &gd);
    if (zf_ok(s)) s = zf_client_session_create(s_client, gd, NULL, &s_sess);
    zf_graphdef_free(&gd);
    if (!zf_ok(s)) {
        fprintf(stderr, "setup: %s\n", zf_status_msg(&s));
        zf_status_clear(&s);
        return -1;
    }
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    if (s_client && s_sess) {
        zf_status_t s = zf_client_session_close(s_client, s_sess);
        zf_status_clear(&s);
    }
    free(s_sess);
    zf_client_destroy(&s_client);
    if (s_up <= 0) return 0;
    kill(s_up, SIGTERM);
    return zf_test_reap(s_up, zf_test_now_ms() + WAIT_MS) == 0 ? 0 : -1;
}

/* ---- helpers ------------------------------------------------------------------ */

static zf_tensor_t *s_vector(zf_dtype_t dtype, int n, const void *values)
{
    int64_t dims[1] = {n};
    zf_shape_t shape;
    ASSERT_OK(zf_shape_make(1, dims, &shape));
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new(dtype, &shape, &t));
    memcpy(zf_tensor_data(t), values, zf_tensor_nbytes(t));
    return t;
}

/* A handle for fetches and feeds (names) on the session, no targets. */
static char *s_setup_run(const char **fetches, int n_fetches, const char **feeds, int n_feeds)
{
    zf_client_step_t step = {feeds, NULL, n_feeds, fetches, n_fetches, NULL, 0};
    char *h = NULL;
    ASSERT_OK(zf_client_partial_run_setup(s_client, s_sess, &step, &h));
    assert_non_null(h);
    return h;
}

/* One call: feeds (names and values, unreferenced here), fetches into out. */
static zf_status_t s_call(const char *h, const char **feeds, zf_tensor_t **values, int n_feeds,
                          const char **fetches, int n_fetches, zf_tensor_t **out)
{
    zf_client_step_t step = {feeds, values, n_feeds, fetches, n_fetches, NULL, 0};
    zf_status_t s = zf_client_partial_run(s_client, s_sess, h, &step, WAIT_MS, out);
    for (int i = 0; i < n_feeds; i++) zf_tensor_unref(&values[i]);
    return s;
}

static const char *s_r12[2] = {"r1", "r2"};
static const char *s_abc[3] = {"a", "b", "c"};

static char *s_api_setup(const char *const *feeds, int nf, const char *const *fetches, int nt)
{
    return s_setup_run((const char **)fetches, nt, (const char **)feeds, nf);
}

static zf_status_t s_api_call(const char *h, const char *const *feeds, zf_tensor_t **values, int nf,
                              const char *const *fetches, int nt, zf_tensor_t **out)
{
    return s_call(h, (const char **)feeds, values, nf, (const char **)fetches, nt, out);
}

static zf_status_t s_api_try_setup(const char *const *feeds, int nf, const char *const *fetches,
                                   int nt, char **h)
{
    zf_client_step_t step = {(const char **)feeds, NULL, nf, (const char **)fetches, nt, NULL, 0};
    return zf_client_partial_run_setup(s_client, s_sess, &step, h);
}

static const zf_test_prun_api_t s_api = {s_api_setup, s_api_try_setup, s_api_call};

/* A new session over GRAPH (its id returned) in s_sess's place; the one it
 * replaces into *keep. */
static char *s_swap_in_session(char **keep)
{
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(GRAPH, ZF_FORMAT_AUTO, &gd));
    char *other = NULL;
    ASSERT_OK(zf_client_session_create(s_client, gd, NULL, &other));
    zf_graphdef_free(&gd);
    *keep = s_sess;
    s_sess = other;
    return other;
}

/* ---- the table of open partial runs ------------------------------------------- */

/* Checks s has code and exactly msg; clears s. */
static void s_expect(zf_status_t s, zf_code_t code, const char *msg)
{
    assert_int_equal(s.code, code);
    assert_string_equal(zf_status_msg(&s), msg);
    zf_status_clear(&s);
}

static const char s_unknown_a[] = "Must run PartialRunSetup before performing partial runs "
                                  "(handle 'a' is not known in this session)";

static zf_partial_run_table_t *s_table(int max_open, int n_ended)
{
    zf_partial_run_table_t *t = NULL;
    ASSERT_OK(zf_partial_run_table_new(max_open, n_ended, "session s-1", &t));
    assert_non_null(t);
    assert_int_equal(zf_partial_run_table_count(t), 0);
    return t;
}

static void test_table_bad_arguments(void **state)
{
    (void)state;
    zf_partial_run_table_t *t = NULL;
    s_expect(zf_partial_run_table_new(-1, 2, "the session", &t), ZF_INVALID_ARGUMENT,
             "partial run table: max_open -1 and n_ended 2 must not be negative, and an owner "
             "must be named");
    assert_null(t);
    s_expect(zf_partial_run_table_new(2, -3, "the session", &t), ZF_INVALID_ARGUMENT,
             "partial run table: max_open 2 and n_ended -3 must not be negative, and an owner "
             "must be named");
    s_expect(zf_partial_run_table_new(2, 3, NULL, &t), ZF_INVALID_ARGUMENT,
             "partial run table: max_open 2 and n_ended 3 must not be negative, and an owner "
             "must be named");
    assert_null(t);
    zf_partial_run_table_free(&t); /* nothing */
}

/* Past its limit a table refuses a setup in the session's words, before
 * (room) and when it is added; an ended one makes room again. */
static void test_table_limit(void **state)
{
    (void)state;
    int a = 1, b = 2, c = 3;
    zf_partial_run_table_t *t = s_table(2, 4);
    ASSERT_OK(zf_partial_run_table_room(t));
    ASSERT_OK(zf_partial_run_table_add(t, "a", &a, false));
    s_expect(zf_partial_run_table_add(t, "a", &c, false), ZF_ALREADY_EXISTS,
             "partial run 'a' is open already");
    ASSERT_OK(zf_partial_run_table_add(t, "b", &b, false));
    assert_int_equal(zf_partial_run_table_count(t), 2);
    const char *full = "session s-1 has 2 partial runs open already (the most it keeps): "
                       "finish or abandon one first";
    s_expect(zf_partial_run_table_room(t), ZF_RESOURCE_EXHAUSTED, full);
    s_expect(zf_partial_run_table_add(t, "c", &c, false), ZF_RESOURCE_EXHAUSTED, full);
    assert_int_equal(zf_partial_run_table_count(t), 2);
    void *item = NULL;
    s_expect(zf_partial_run_table_take(t, "c", &item), ZF_INVALID_ARGUMENT,
             "Must run PartialRunSetup before performing partial runs (handle 'c' is not known "
             "in this session)");
    assert_null(item);
    zf_partial_run_table_remove(t, &a, "has completed: every feed and fetch of it was given");
    assert_int_equal(zf_partial_run_table_count(t), 1);
    ASSERT_OK(zf_partial_run_table_room(t));
    ASSERT_OK(zf_partial_run_table_add(t, "c", &c, false));
    ASSERT_OK(zf_partial_run_table_take(t, "c", &item));
    assert_ptr_equal(item, &c);
    zf_partial_run_table_free(&t); /* items are the caller's: nothing of theirs is freed */
    assert_null(t);
    zf_partial_run_table_t *none = s_table(0, 0);
    s_expect(zf_partial_run_table_add(none, "a", &a, false), ZF_RESOURCE_EXHAUSTED,
             "session s-1 has 0 partial runs open already (the most it keeps): finish or "
             "abandon one first");
    zf_partial_run_table_free(&none);
}

/* A take marks the partial run busy until released: a second take is
 * refused; one added busy is refused until released. */
static void test_table_take_and_release(void **state)
{
    (void)state;
    int a = 1, b = 2, other = 3;
    zf_partial_run_table_t *t = s_table(4, 4);
    void *item = &other;
    s_expect(zf_partial_run_table_take(t, "a", &item), ZF_INVALID_ARGUMENT, s_unknown_a);
    assert_null(item);
    ASSERT_OK(zf_partial_run_table_add(t, "a", &a, false));
    ASSERT_OK(zf_partial_run_table_add(t, "b", &b, true));
    ASSERT_OK(zf_partial_run_table_take(t, "a", &item));
    assert_ptr_equal(item, &a);
    s_expect(zf_partial_run_table_take(t, "a", &item), ZF_FAILED_PRECONDITION,
             "partial run 'a' has a call running: its calls run one at a time");
    assert_null(item);
    s_expect(zf_partial_run_table_take(t, "b", &item), ZF_FAILED_PRECONDITION,
             "partial run 'b' has a call running: its calls run one at a time");
    zf_partial_run_table_release(t, &a);
    zf_partial_run_table_release(t, &b);
    zf_partial_run_table_release(t, &other); /* not in the table: nothing */
    ASSERT_OK(zf_partial_run_table_take(t, "a", &item));
    assert_ptr_equal(item, &a);
    ASSERT_OK(zf_partial_run_table_take(t, "b", &item));
    assert_ptr_equal(item, &b);
    assert_int_equal(zf_partial_run_table_count(t), 2);
    zf_partial_run_table_free(&t);
}

/* An ended handle is refused with why it ended, busy or not when it
 * ended; the latest n_ended are remembered, the oldest then forgotten. */
static void test_table_remove_and_ring(void **state)
{
    (void)state;
    int a = 1, b = 2, c = 3;
    zf_partial_run_table_t *t = s_table(8, 2);
    ASSERT_OK(zf_partial_run_table_add(t, "a", &a, false));
    ASSERT_OK(zf_partial_run_table_add(t, "b", &b, false));
    ASSERT_OK(zf_partial_run_table_add(t, "c", &c, false));
    void *item = NULL;
    ASSERT_OK(zf_partial_run_table_take(t, "a", &item));
    zf_partial_run_table_remove(t, &a, "has completed: every feed and fetch of it was given");
    zf_partial_run_table_remove(t, &a, "failed: twice"); /* no longer in it: nothing */
    assert_int_equal(zf_partial_run_table_count(t), 2);
    s_expect(zf_partial_run_table_take(t, "a", &item), ZF_FAILED_PRECONDITION,
             "partial run 'a' has completed: every feed and fetch of it was given");
    assert_null(item);
    zf_partial_run_table_remove(t, &b, "failed: Fetch r2:0 can't be computed");
    s_expect(zf_partial_run_table_take(t, "b", &item), ZF_FAILED_PRECONDITION,
             "partial run 'b' failed: Fetch r2:0 can't be computed");
    s_expect(zf_partial_run_table_take(t, "a", &item), ZF_FAILED_PRECONDITION,
             "partial run 'a' has completed: every feed and fetch of it was given");
    /* a third to end takes the oldest's place: a is unknown again */
    zf_partial_run_table_remove(t, &c, "failed: out of memory in its setup");
    assert_int_equal(zf_partial_run_table_count(t), 0);
    s_expect(zf_partial_run_table_take(t, "a", &item), ZF_INVALID_ARGUMENT, s_unknown_a);
    s_expect(zf_partial_run_table_take(t, "b", &item), ZF_FAILED_PRECONDITION,
             "partial run 'b' failed: Fetch r2:0 can't be computed");
    s_expect(zf_partial_run_table_take(t, "c", &item), ZF_FAILED_PRECONDITION,
             "partial run 'c' failed: out of memory in its setup");
    /* the ring goes round again: b is forgotten next, then c */
    ASSERT_OK(zf_partial_run_table_add(t, "a", &a, false));
    zf_partial_run_table_remove(t, &a, "failed: again");
    s_expect(zf_partial_run_table_take(t, "b", &item), ZF_INVALID_ARGUMENT,
             "Must run PartialRunSetup before performing partial runs (handle 'b' is not known "
             "in this session)");
    s_expect(zf_partial_run_table_take(t, "a", &item), ZF_FAILED_PRECONDITION,
             "partial run 'a' failed: again");
    zf_partial_run_table_remove(t, &a, NULL); /* not in it: nothing */
    s_expect(zf_partial_run_table_take(t, "c", &item), ZF_FAILED_PRECONDITION,
             "partial run 'c' failed: out of memory in its setup");
    zf_partial_run_table_free(&t);
    /* remembering none, an ended handle is unknown at once */
    t = s_table(8, 0);
    ASSERT_OK(zf_partial_run_table_add(t, "a", &a, false));
    zf_partial_run_table_remove(t, &a, "has completed: every feed and fetch of it was given");
    s_expect(zf_partial_run_table_take(t, "a", &item), ZF_INVALID_ARGUMENT, s_unknown_a);
    zf_partial_run_table_free(&t);
}

/* A close drains the idle partial runs, the latest opened first, each
 * remembered as abandoned; then the busy ones too, remembered or not. */
static void test_table_drain(void **state)
{
    (void)state;
    int a = 1, b = 2, c = 3;
    zf_partial_run_table_t *t = s_table(8, 8);
    assert_null(zf_partial_run_table_drain(t, true, NULL));
    ASSERT_OK(zf_partial_run_table_add(t, "a", &a, false));
    ASSERT_OK(zf_partial_run_table_add(t, "b", &b, false));
    ASSERT_OK(zf_partial_run_table_add(t, "c", &c, false));
    void *item = NULL;
    ASSERT_OK(zf_partial_run_table_take(t, "b", &item)); /* b's call runs */
    const char *why = "was abandoned: its session was closed";
    assert_ptr_equal(zf_partial_run_table_drain(t, false, why), &c);
    assert_ptr_equal(zf_partial_run_table_drain(t, false, why), &a);
    assert_null(zf_partial_run_table_drain(t, false, why));
    assert_int_equal(zf_partial_run_table_count(t), 1);
    s_expect(zf_partial_run_table_take(t, "a", &item), ZF_FAILED_PRECONDITION,
             "partial run 'a' was abandoned: its session was closed");
    s_expect(zf_partial_run_table_take(t, "c", &item), ZF_FAILED_PRECONDITION,
             "partial run 'c' was abandoned: its session was closed");
    s_expect(zf_partial_run_table_take(t, "b", &item), ZF_FAILED_PRECONDITION,
             "partial run 'b' has a call running: its calls run one at a time");
    assert_ptr_equal(zf_partial_run_table_drain(t, true, NULL), &b);
    assert_null(zf_partial_run_table_drain(t, true, NULL));
    assert_int_equal(zf_partial_run_table_count(t), 0);
    s_expect(zf_partial_run_table_take(t, "b", &item), ZF_INVALID_ARGUMENT,
             "Must run PartialRunSetup before performing partial runs (handle 'b' is not known "
             "in this session)");
    ASSERT_OK(zf_partial_run_table_add(t, "d", &a, true));
    zf_partial_run_table_free(&t); /* an entry still open goes with the table */
}

/* ---- tests ------------------------------------------------------------------- */

/* A copy of a partial run (for a later setup of its signature) has its
 * needs and none of its progress, and the two go on apart; a session's
 * cache keeps its first copy, and a setup that finds it does not walk. */
static void test_a_partial_run_copy_shares_needs_not_progress(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(GRAPH, ZF_FORMAT_AUTO, &gd));
    zf_graph_t *g = NULL;
    ASSERT_OK(zf_graph_new_from_graphdef(gd, &g));
    const char *feeds[3] = {"a:0", "b:0", "c:0"}, *fetches[2] = {"r1:0", "r2:0"};
    zf_partial_run_t *pr = NULL, *copy = NULL, *cache = NULL, *again = NULL;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    ASSERT_OK(zf_partial_run_for(&cache, &mu, NULL, g, feeds, 3, fetches, 2, &pr));
    assert_non_null(cache);
    assert_ptr_not_equal(cache, pr);
    const zf_partial_run_t *first = cache;
    /* kept: the next setup copies it, handed no graph to walk */
    ASSERT_OK(zf_partial_run_for(&cache, &mu, NULL, NULL, feeds, 3, fetches, 2, &again));
    assert_ptr_equal(cache, first);
    assert_ptr_not_equal(again, cache);
    zf_test_expect_error(zf_partial_run_check(again, NULL, 0, fetches, 1), ZF_INVALID_ARGUMENT,
                         "it needs feed a:0");
    zf_partial_run_free(&again);
    /* a and b given to the original only */
    const char *ab[2] = {"a:0", "b:0"}, *r1[1] = {"r1:0"}, *r2[1] = {"r2:0"};
    ASSERT_OK(zf_partial_run_check(pr, ab, 2, r1, 1));
    assert_false(zf_partial_run_mark(pr, ab, 2, r1, 1));
    ASSERT_OK(zf_partial_run_clone(cache, &copy));
    /* the copy needs a and b for r1, as the original did */
    zf_test_expect_error(zf_partial_run_check(copy, NULL, 0, r1, 1), ZF_INVALID_ARGUMENT,
                         "Fetch r1:0 can't be computed from the feeds that have been fed so far: "
                         "it needs feed a:0");
    ASSERT_OK(zf_partial_run_check(copy, ab, 2, r1, 1));
    /* the original has them, and r1 taken; r2 needs c in both */
    zf_test_expect_error(zf_partial_run_check(pr, ab, 1, NULL, 0), ZF_INVALID_ARGUMENT,
                         "The feed a:0 has already been fed.");
    zf_test_expect_error(zf_partial_run_check(pr, NULL, 0, r2, 1), ZF_INVALID_ARGUMENT,
                         "it needs feed c:0");
    zf_test_expect_error(zf_partial_run_check(copy, ab, 2, r2, 1), ZF_INVALID_ARGUMENT,
                         "it needs feed c:0");
    /* the copy completes on its own; the cache still needs everything */
    const char *abc[3] = {"a:0", "b:0", "c:0"};
    const char *both[2] = {"r1:0", "r2:0"};
    ASSERT_OK(zf_partial_run_check(copy, abc, 3, both, 2));
    assert_true(zf_partial_run_mark(copy, abc, 3, both, 2));
    zf_test_expect_error(zf_partial_run_check(cache, NULL, 0, r1, 1), ZF_INVALID_ARGUMENT,
                         "it needs feed a:0");
    zf_partial_run_free(&copy);
    zf_partial_run_free(&cache);
    zf_partial_run_free(&pr);
    zf_graph_destroy(&g);
    tensorflow__graph_def__free_unpacked(gd, NULL);
}

/* TensorFlow's testPartialRun: r1 from a and b in the first call; the
 * client computes c from it and the second call gives r2 = r1 * c, the
 * partition on CPU:1 having waited for c. Twice, so the first step's
 * cleanup leaves nothing in the way. */
static void test_two_calls_across_executors(void **state)
{
    (void)state;
    for (int round = 0; round < 2; round++) {
        char *h = s_setup_run(s_r12, 2, s_abc, 3);
        const char *f1[2] = {"a", "b"};
        zf_tensor_t *v1[2] = {zf_test_prun_scalar(1.0f + (float)round), zf_test_prun_scalar(2.0f)};
        zf_tensor_t *out = NULL;
        ASSERT_OK(s_call(h, f1, v1, 2, &s_r12[0], 1, &out));
        float r1 = zf_test_prun_take(&out);
        assert_true(r1 == 3.0f + (float)round);
        const char *f2[1] = {"c"};
        zf_tensor_t *v2[1] = {zf_test_prun_scalar(r1 * 17.0f)};
        ASSERT_OK(s_call(h, f2, v2, 1, &s_r12[1], 1, &out));
        assert_true(zf_test_prun_take(&out) == r1 * r1 * 17.0f);
        /* the step has completed: its handle is gone */
        zf_tensor_t *v3[1] = {zf_test_prun_scalar(1.0f)};
        zf_test_expect_error(s_call(h, f2, v3, 1, NULL, 0, NULL), ZF_FAILED_PRECONDITION,
                             "has completed");
        free(h);
    }
}

/* Several partial runs of one session interleave, each its own step. */
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
    /* targets belong to the setup */
    const char *ab[2] = {"a", "b"};
    char *h = s_setup_run(&s_r12[0], 1, ab, 2);
    zf_client_step_t tstep = {NULL, NULL, 0, NULL, 0, &s_r12[0], 1};
    zf_test_expect_error(zf_client_partial_run(s_client, s_sess, h, &tstep, WAIT_MS, NULL),
                         ZF_INVALID_ARGUMENT, "names no targets");
    free(h);
}

/* What a fed tensor's computation needs is not needed (see the util). */
static void test_fed_tensors_cut_the_check(void **state)
{
    (void)state;
    zf_test_prun_fed_cuts(&s_api);
}

/* ZF__MASTER_PRUNS_MAX open at once in a session (a new one: none open
 * before), one more refused in the session's name. */
static void test_open_partial_runs_are_limited(void **state)
{
    (void)state;
    char *keep = NULL, *other = s_swap_in_session(&keep);
    char full[256];
    snprintf(full, sizeof full,
             "session %s has %d partial runs open already (the most it keeps): finish or "
             "abandon one first",
             other, ZF__MASTER_PRUNS_MAX);
    zf_test_prun_limit(&s_api, ZF__MASTER_PRUNS_MAX, full);
    s_sess = keep;
    ASSERT_OK(zf_client_session_close(s_client, other));
    free(other);
}

static void test_unknown_handle_and_bad_setup(void **state)
{
    (void)state;
    const char *fa[1] = {"a"};
    zf_tensor_t *v[1] = {zf_test_prun_scalar(1.0f)};
    zf_test_expect_error(s_call("prun-0000000000000001", fa, v, 1, NULL, 0, NULL),
                         ZF_INVALID_ARGUMENT,
                         "Must run PartialRunSetup before performing partial runs");
    /* an unknown node, in the planner's words */
    const char *nope[1] = {"nope"};
    zf_client_step_t step = {fa, NULL, 1, nope, 1, NULL, 0};
    char *h = NULL;
    zf_test_expect_error(zf_client_partial_run_setup(s_client, s_sess, &step, &h),
                         ZF_INVALID_ARGUMENT, "nope");
    assert_null(h);
}

/* A call whose partition fails at run time (a Reshape to a shape that does
 * not fit) ends the partial run with the error; its handle then says so,
 * and the next partial run of the session works. */
static void test_failure_ends_the_run(void **state)
{
    (void)state;
    const char *y[1] = {"y"}, *xs[2] = {"x", "s"}, *fx[1] = {"x"}, *fs[1] = {"s"};
    float xv[3] = {1, 2, 3};
    for (int round = 0; round < 2; round++) {
        char *h = s_setup_run(y, 1, xs, 2);
        zf_tensor_t *v[1] = {s_vector(ZF_FLOAT, 3, xv)};
        ASSERT_OK(s_call(h, fx, v, 1, NULL, 0, NULL));
        int32_t shape = round == 0 ? 2 : 3;
        v[0] = s_vector(ZF_INT32, 1, &shape);
        zf_tensor_t *out = NULL;
        zf_status_t s = s_call(h, fs, v, 1, y, 1, &out);
        if (round == 0) {
            zf_test_expect_error(s, ZF_INVALID_ARGUMENT, "Reshape");
            assert_null(out);
            v[0] = s_vector(ZF_INT32, 1, &shape);
            zf_test_expect_error(s_call(h, fs, v, 1, NULL, 0, NULL), ZF_FAILED_PRECONDITION,
                                 "failed:");
        } else {
            ASSERT_OK(s);
            assert_int_equal(zf_tensor_num_elements(out), 3);
            assert_memory_equal(zf_tensor_data(out), xv, sizeof xv);
            zf_tensor_unref(&out);
        }
        free(h);
    }
}

/* A partial run left half done when its session closes is abandoned on
 * both executors (its partition waiting for c is aborted); the cluster
 * goes on serving a new session's partial runs. */
static void test_close_abandons_open_runs(void **state)
{
    (void)state;
    char *keep = NULL, *other = s_swap_in_session(&keep);
    char *h = s_setup_run(s_r12, 2, s_abc, 3);
    const char *f1[2] = {"a", "b"};
    zf_tensor_t *v1[2] = {zf_test_prun_scalar(1.0f), zf_test_prun_scalar(2.0f)};
    zf_tensor_t *out = NULL;
    ASSERT_OK(s_call(h, f1, v1, 2, &s_r12[0], 1, &out));
    assert_true(zf_test_prun_take(&out) == 3.0f);
    ASSERT_OK(zf_client_session_close(s_client, other));
    zf_test_expect_error(s_call(h, (const char *[]){"c"},
                                (zf_tensor_t *[]){zf_test_prun_scalar(1.0f)}, 1, NULL, 0, NULL),
                         ZF_NOT_FOUND, NULL);
    free(h);
    free(other);
    s_sess = keep;
    test_two_calls_across_executors(state);
}

/* place_pruned_graph: a node no run needs, pinned to a GPU the cluster
 * lacks, fails every step of a session placing its whole graph, and only
 * the steps that need it when each step places what it needs. */
static void test_place_pruned_graph(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd =
        zf_test_graphdef("node { name: 'x' op: 'Placeholder' device: '/device:CPU:1' "
                         "  attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
                         "node { name: 'y' op: 'Mul' input: 'x' input: 'x' "
                         "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
                         "node { name: 'bad' op: 'Identity' input: 'x' device: '/device:GPU:7' "
                         "  attr { key: 'T' value { type: DT_FLOAT } } }\n");
    const char *fx[1] = {"x"}, *fy[1] = {"y"}, *fbad[1] = {"bad"};
    for (int pruned = 0; pruned < 2; pruned++) {
        zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
        o.place_pruned_graph = pruned;
        char *sess = NULL;
        ASSERT_OK(zf_client_session_create(s_client, gd, &o, &sess));
        zf_tensor_t *v = zf_test_prun_scalar(3.0f), *out = NULL;
        zf_client_step_t step = {fx, &v, 1, fy, 1, NULL, 0};
        zf_status_t s = zf_client_session_run(s_client, sess, &step, WAIT_MS, &out);
        if (!pruned) {
            zf_test_expect_error(s, ZF_INVALID_ARGUMENT,
                                 "Cannot assign a device for operation bad");
        } else {
            ASSERT_OK(s);
            assert_true(zf_test_prun_take(&out) == 9.0f);
            step.fetches = fbad;
            zf_test_expect_error(zf_client_session_run(s_client, sess, &step, WAIT_MS, &out),
                                 ZF_INVALID_ARGUMENT, "Cannot assign a device for operation bad");
            /* the session's placement stands: y runs again */
            step.fetches = fy;
            ASSERT_OK(zf_client_session_run(s_client, sess, &step, WAIT_MS, &out));
            assert_true(zf_test_prun_take(&out) == 9.0f);
        }
        zf_tensor_unref(&v);
        ASSERT_OK(zf_client_session_close(s_client, sess));
        free(sess);
    }
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest table_tests[] = {
        cmocka_unit_test(test_table_bad_arguments),
        cmocka_unit_test(test_table_limit),
        cmocka_unit_test(test_table_take_and_release),
        cmocka_unit_test(test_table_remove_and_ring),
        cmocka_unit_test(test_table_drain),
        cmocka_unit_test(test_a_partial_run_copy_shares_needs_not_progress),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_calls_across_executors),
        cmocka_unit_test(test_interleaved_handles),
        cmocka_unit_test(test_call_checks),
        cmocka_unit_test(test_fed_tensors_cut_the_check),
        cmocka_unit_test(test_open_partial_runs_are_limited),
        cmocka_unit_test(test_unknown_handle_and_bad_setup),
        cmocka_unit_test(test_failure_ends_the_run),
        cmocka_unit_test(test_close_abandons_open_runs),
        cmocka_unit_test(test_place_pruned_graph),
    };
    int failed = cmocka_run_group_tests(table_tests, NULL, NULL);
    return failed + cmocka_run_group_tests(tests, s_setup, s_teardown);
}
