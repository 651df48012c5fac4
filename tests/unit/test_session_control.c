/* The session's controls through real processes (`zflow up --cpu 2` on
 * 127.0.0.1): ExtendSession, cancelling a running step or job (from the C
 * client, `zflow cancel`, and Ctrl-C on `zflow run`), CloseSession of a
 * session with a step running, Reset, the plans' cost model, and jobs'
 * checkpoints (a scheduler killed mid-job, the job resuming on its
 * successor). The long step is a while loop
 * over both executors (tests/data/sum_loop.pbtxt) fed a bound it would
 * need hours for; after each cancel the same executors run the loop again
 * to the value n (n + 1) / 2. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "common/tensor_bundle.h"
#include "proto/service.pb-c.h"
#include "process_test_util.h"
#include "test_util.h"

#define ZFLOW    ZF_BIN_DIR "/zflow"
#define SUM_LOOP ZF_TEST_DATA_DIR "/sum_loop.pbtxt"
#define COUNTER  ZF_TEST_DATA_DIR "/counter.pbtxt"
#define WAIT_MS  60000
#define FOREVER  1000000000000LL /* iterations: hours of the loop */
#define CPU1     "/job:localhost/replica:0/task:0/device:CPU:1"

static char s_endpoint[256];
static pid_t s_up = -1;
static zf_client_t *s_client;

static int s_setup(void **state)
{
    (void)state;
    s_up = zf_test_up_start(ZFLOW, 2, s_endpoint, sizeof s_endpoint, WAIT_MS);
    if (s_up < 0) return -1;
    return zf_test_up_client(s_endpoint, WAIT_MS, &s_client);
}

static int s_teardown(void **state)
{
    (void)state;
    return zf_test_up_stop(s_up, &s_client, WAIT_MS);
}

static Tensorflow__GraphDef *s_read(const char *path)
{
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(path, ZF_FORMAT_AUTO, &gd));
    return gd;
}

static char *s_session(Tensorflow__GraphDef *gd)
{
    char *id = NULL;
    ASSERT_OK(zf_client_session_create(s_client, gd, NULL, &id));
    return id;
}

/* ---- the sum loop ------------------------------------------------------------ */

typedef struct {
    zf_tensor_t *n;
    const char *feed;
    const char *fetch;
    zf_client_step_t step;
} s_loop_step_t;

static void s_loop_step(s_loop_step_t *ls, int64_t n)
{
    zf_shape_t scalar = zf_shape_scalar();
    ASSERT_OK(zf_tensor_new(ZF_INT64, &scalar, &ls->n));
    *(int64_t *)zf_tensor_data(ls->n) = n;
    ls->feed = "n";
    ls->fetch = "w/s_exit";
    ls->step = (zf_client_step_t){&ls->feed, &ls->n, 1, &ls->fetch, 1, NULL, 0};
}

/* Runs the loop to n on session and checks s = n (n + 1) / 2. */
static void s_expect_sum(const char *session, int64_t n)
{
    s_loop_step_t ls;
    s_loop_step(&ls, n);
    zf_tensor_t *out = NULL;
    ASSERT_OK(zf_client_session_run(s_client, session, &ls.step, WAIT_MS, &out));
    assert_int_equal(*(const int64_t *)zf_tensor_data(out), n * (n + 1) / 2);
    zf_tensor_unref(&out);
    zf_tensor_unref(&ls.n);
}

/* Starts the endless loop on session: its request id. The first iteration
 * has run once this returns (a poll would show it; a short wait does). */
static uint64_t s_start_forever(const char *session, s_loop_step_t *ls)
{
    s_loop_step(ls, FOREVER);
    uint64_t req = 0;
    ASSERT_OK(zf_client_session_run_start(s_client, session, &ls->step, WAIT_MS, &req));
    usleep(300000);
    return req;
}

/* ---- ExtendSession ---------------------------------------------------------- */

static float s_fetch_float(const char *session, const char *fetch, const char *target)
{
    zf_client_step_t step = {NULL, NULL, 0, &fetch, fetch ? 1 : 0, &target, target ? 1 : 0};
    zf_tensor_t *out = NULL;
    ASSERT_OK(zf_client_session_run(s_client, session, &step, WAIT_MS, fetch ? &out : NULL));
    float v = out ? *(const float *)zf_tensor_data(out) : 0.0f;
    zf_tensor_unref(&out);
    return v;
}

static void test_extend_adds_nodes_next_to_the_state_and_refuses_clashes(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_read(COUNTER);
    char *sess = s_session(gd);
    s_fetch_float(sess, NULL, "init");
    assert_true(s_fetch_float(sess, "count", NULL) == 1.0f);

    /* twice the counter: reads the variable where the session placed it */
    Tensorflow__GraphDef *ext = zf_test_graphdef(
        "node { name: 'two' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
        " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 2 } } } }"
        "node { name: 'double' op: 'Mul' input: 'counter' input: 'two'"
        " attr { key: 'T' value { type: DT_FLOAT } } }");
    int64_t version = -1;
    ASSERT_OK(zf_client_session_extend(s_client, sess, ext, 0, &version));
    assert_int_equal(version, 1);
    assert_true(s_fetch_float(sess, "double", NULL) == 2.0f);
    assert_true(s_fetch_float(sess, "count", NULL) == 2.0f); /* the old plan still runs */

    /* a stale version, a clash, a bad input: refused, the graph unchanged */
    zf_test_expect_error(zf_client_session_extend(s_client, sess, ext, 0, &version), ZF_ABORTED,
                         "Current version is 1 but caller expected 0.");
    zf_test_expect_error(zf_client_session_extend(s_client, sess, ext, 1, &version),
                         ZF_INVALID_ARGUMENT,
                         "GraphDef argument to Extend includes node 'two', which was created by "
                         "a previous call to Create or Extend in this session.");
    Tensorflow__GraphDef *bad = zf_test_graphdef(
        "node { name: 'lost' op: 'Neg' input: 'nowhere' attr { key: 'T' value { type: DT_FLOAT } } }");
    zf_test_expect_error(zf_client_session_extend(s_client, sess, bad, 1, &version),
                         ZF_INVALID_ARGUMENT, "ExtendSession");
    zf_test_expect_error(zf_client_session_extend(s_client, "no-such-session", ext, 0, &version),
                         ZF_NOT_FOUND, "no-such-session");

    /* on the other executor: -(2 * counter) with the counter at 2 */
    Tensorflow__GraphDef *far = zf_test_graphdef(
        "node { name: 'neg' op: 'Neg' input: 'double' device: '" CPU1 "'"
        " attr { key: 'T' value { type: DT_FLOAT } } }");
    ASSERT_OK(zf_client_session_extend(s_client, sess, far, 1, &version));
    assert_int_equal(version, 2);
    assert_true(s_fetch_float(sess, "neg", NULL) == -4.0f);
    assert_true(s_fetch_float(sess, "count", NULL) == 3.0f);

    ASSERT_OK(zf_client_session_close(s_client, sess));
    free(sess);
    zf_graphdef_free(&far);
    zf_graphdef_free(&bad);
    zf_graphdef_free(&ext);
    zf_graphdef_free(&gd);
}

/* Scale(x) = (x + 1) * 3 and Negate(x) = -x, float. */
#define FLOAT_ATTR(key) " attr { key: '" key "' value { type: DT_FLOAT } }"
#define CONST_F(name, v)                                                                           \
    " node_def { name: '" name "' op: 'Const'" FLOAT_ATTR("dtype")                                \
    "   attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: " v       \
    " } } } }"
#define FN_LIB                                                                                     \
    "library { function { signature { name: 'Scale' input_arg { name: 'x' type: DT_FLOAT }"        \
    " output_arg { name: 'y' type: DT_FLOAT } }" CONST_F("one", "1") CONST_F("three", "3")         \
    " node_def { name: 'add' op: 'AddV2' input: 'x' input: 'one:output:0'" FLOAT_ATTR("T") " }"    \
    " node_def { name: 'mul' op: 'Mul' input: 'add:z:0' input: 'three:output:0'" FLOAT_ATTR("T")  \
    " } ret { key: 'y' value: 'mul:z:0' } }"                                                       \
    " function { signature { name: 'Negate' input_arg { name: 'x' type: DT_FLOAT }"                \
    " output_arg { name: 'y' type: DT_FLOAT } }"                                                   \
    " node_def { name: 'n' op: 'Neg' input: 'x'" FLOAT_ATTR("T") " }"                              \
    " ret { key: 'y' value: 'n:y:0' } } }"
#define FLOAT_LIST(key) " attr { key: '" key "' value { list { type: DT_FLOAT } } }"
#define CALL_SCALE(name, op, input)                                                                \
    "node { name: '" name "' op: '" op "' input: '" input "'" FLOAT_LIST("Tin")                    \
    FLOAT_LIST("Tout") " attr { key: 'f' value { func { name: 'Scale' } } } }"

static float s_scale(float x)
{
    return (x + 1.0f) * 3.0f;
}

/* Fetches the two floats of `fetch` on session into got. */
static void s_fetch_two(const char *session, const char *fetch, float *got)
{
    zf_client_step_t step = {NULL, NULL, 0, &fetch, 1, NULL, 0};
    zf_tensor_t *out = NULL;
    ASSERT_OK(zf_client_session_run(s_client, session, &step, WAIT_MS, &out));
    assert_int_equal(zf_tensor_num_elements(out), 2);
    memcpy(got, zf_tensor_data(out), 2 * sizeof *got);
    zf_tensor_unref(&out);
}

static void test_extend_calls_functions_of_the_library_given_at_creation(void **state)
{
    (void)state;
    const float a[2] = {1.5f, -4.0f};
    Tensorflow__GraphDef *gd = zf_test_graphdef(
        "node { name: 'a' op: 'Const'" FLOAT_ATTR("dtype")
        " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } }"
        " float_val: 1.5 float_val: -4 } } } }" CALL_SCALE("first", "StatefulPartitionedCall",
                                                           "a") FN_LIB);
    char *sess = s_session(gd);
    float got[2];
    s_fetch_two(sess, "first", got);
    for (int i = 0; i < 2; i++) assert_true(got[i] == s_scale(a[i]));

    /* a node whose op names a library function, by itself */
    Tensorflow__GraphDef *by_name =
        zf_test_graphdef("node { name: 'by_name' op: 'Scale' input: 'a' }");
    int64_t version = -1;
    ASSERT_OK(zf_client_session_extend(s_client, sess, by_name, 0, &version));
    assert_int_equal(version, 1);
    s_fetch_two(sess, "by_name", got);
    for (int i = 0; i < 2; i++) assert_true(got[i] == s_scale(a[i]));

    /* a PartitionedCall and an If whose functions only the library has */
    Tensorflow__GraphDef *calls = zf_test_graphdef(
        CALL_SCALE("twice", "PartitionedCall", "by_name")
        "node { name: 'yes' op: 'Const' attr { key: 'dtype' value { type: DT_BOOL } }"
        " attr { key: 'value' value { tensor { dtype: DT_BOOL tensor_shape {} bool_val: true } } } }"
        "node { name: 'pick' op: 'If' input: 'yes' input: 'twice'"
        " attr { key: 'Tcond' value { type: DT_BOOL } }" FLOAT_LIST("Tin") FLOAT_LIST("Tout")
        " attr { key: 'then_branch' value { func { name: 'Negate' } } }"
        " attr { key: 'else_branch' value { func { name: 'Scale' } } } }");
    ASSERT_OK(zf_client_session_extend(s_client, sess, calls, 1, &version));
    assert_int_equal(version, 2);
    s_fetch_two(sess, "twice", got);
    for (int i = 0; i < 2; i++) assert_true(got[i] == s_scale(s_scale(a[i])));
    s_fetch_two(sess, "pick", got);
    for (int i = 0; i < 2; i++) assert_true(got[i] == -s_scale(s_scale(a[i])));
    s_fetch_two(sess, "by_name", got); /* the earlier nodes still run */
    for (int i = 0; i < 2; i++) assert_true(got[i] == s_scale(a[i]));

    /* the library is the session's: Negate, which no node called before
     * this extend, cannot be given another body */
    Tensorflow__GraphDef *other = zf_test_graphdef(
        "node { name: 'sq' op: 'Negate' input: 'a' }"
        "library { function { signature { name: 'Negate' input_arg { name: 'x' type: DT_FLOAT }"
        " output_arg { name: 'y' type: DT_FLOAT } }"
        " node_def { name: 'n' op: 'Square' input: 'x'" FLOAT_ATTR("T") " }"
        " ret { key: 'y' value: 'n:y:0' } } }");
    zf_test_expect_error(zf_client_session_extend(s_client, sess, other, 2, &version),
                         ZF_INVALID_ARGUMENT,
                         "Cannot add function 'Negate' because a different function with the "
                         "same name already exists.");
    zf_graphdef_free(&other);

    ASSERT_OK(zf_client_session_close(s_client, sess));
    free(sess);
    zf_graphdef_free(&calls);
    zf_graphdef_free(&by_name);
    zf_graphdef_free(&gd);
}

/* ---- cancelling steps and closing sessions ------------------------------------ */

static void test_cancel_ends_a_running_step_everywhere_and_the_session_runs_on(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_read(SUM_LOOP);
    char *sess = s_session(gd);
    s_expect_sum(sess, 10); /* its plan is cached: the long step runs without a worker */

    s_loop_step_t ls;
    uint64_t req = s_start_forever(sess, &ls);
    ASSERT_OK(zf_client_session_cancel(s_client, sess));
    zf_tensor_t *out = NULL;
    zf_test_expect_error(zf_client_session_run_finish(s_client, req, 1, WAIT_MS, &out),
                         ZF_CANCELLED, "cancelled: its client cancelled it");
    assert_null(out);
    zf_tensor_unref(&ls.n);

    /* both executors are free: the loop runs again, and again after that */
    s_expect_sum(sess, 1000);
    s_expect_sum(sess, 3);
    ASSERT_OK(zf_client_session_cancel(s_client, sess)); /* nothing running: OK */
    zf_test_expect_error(zf_client_session_cancel(s_client, "no-such-session"), ZF_NOT_FOUND,
                         "no-such-session");
    ASSERT_OK(zf_client_session_close(s_client, sess));
    free(sess);
    zf_graphdef_free(&gd);
}

static void test_close_cancels_the_step_the_session_runs(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_read(SUM_LOOP);
    char *sess = s_session(gd);
    s_loop_step_t ls;
    uint64_t req = s_start_forever(sess, &ls); /* its first plan: run by a worker thread */
    ASSERT_OK(zf_client_session_close(s_client, sess));
    zf_tensor_t *out = NULL;
    zf_test_expect_error(zf_client_session_run_finish(s_client, req, 1, WAIT_MS, &out),
                         ZF_CANCELLED, "its session was closed");
    zf_tensor_unref(&ls.n);
    free(sess);

    char *again = s_session(gd); /* the executors serve a new session at once */
    s_expect_sum(again, 100);
    ASSERT_OK(zf_client_reset(s_client));
    zf_graphdef_free(&gd);
    free(again);
}

static void test_reset_closes_every_session_of_the_client(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_read(SUM_LOOP);
    char *a = s_session(gd), *b = s_session(gd);
    s_expect_sum(a, 4);
    s_loop_step_t ls;
    uint64_t req = s_start_forever(b, &ls);
    ASSERT_OK(zf_client_reset(s_client));
    zf_tensor_t *out = NULL;
    zf_test_expect_error(zf_client_session_run_finish(s_client, req, 1, WAIT_MS, &out),
                         ZF_CANCELLED, "its session was closed");
    zf_tensor_unref(&ls.n);
    s_loop_step(&ls, 2);
    zf_test_expect_error(zf_client_session_run(s_client, a, &ls.step, WAIT_MS, &out),
                         ZF_NOT_FOUND, a);
    zf_test_expect_error(zf_client_session_run(s_client, b, &ls.step, WAIT_MS, &out),
                         ZF_NOT_FOUND, b);
    ASSERT_OK(zf_client_reset(s_client)); /* none left: nothing to do */
    zf_tensor_unref(&ls.n);
    free(a);
    free(b);
    zf_graphdef_free(&gd);
}

/* ---- cancelling jobs ------------------------------------------------------------- */

static char *s_submit_loop(Tensorflow__GraphDef *gd, int64_t n)
{
    s_loop_step_t ls;
    s_loop_step(&ls, n);
    char *id = NULL;
    ASSERT_OK(zf_client_submit(s_client, gd, NULL, &ls.step, &id));
    zf_tensor_unref(&ls.n);
    return id;
}

static void s_wait_state(const char *job, zf_client_job_state_t want)
{
    zf_client_job_progress_t p = {0};
    for (int64_t end = zf_test_now_ms() + WAIT_MS; zf_test_now_ms() < end; usleep(20000)) {
        ASSERT_OK(zf_client_poll(s_client, job, &p));
        if (p.state == want) break;
    }
    assert_int_equal(p.state, want);
}

static void test_cancel_job_stops_it_and_its_result_says_so(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_read(SUM_LOOP);
    char *job = s_submit_loop(gd, FOREVER);
    s_wait_state(job, ZF_CLIENT_JOB_RUNNING);
    ASSERT_OK(zf_client_cancel_job(s_client, job));
    zf_tensor_t *out = NULL;
    char want[160];
    snprintf(want, sizeof want, "job %s cancelled: its client cancelled it", job);
    zf_test_expect_error(zf_client_wait(s_client, job, 1, WAIT_MS, &out), ZF_CANCELLED, want);
    zf_test_expect_error(zf_client_cancel_job(s_client, job), ZF_NOT_FOUND, job); /* collected */

    /* a finished job: its result stays, whole */
    char *done = s_submit_loop(gd, 20);
    s_wait_state(done, ZF_CLIENT_JOB_DONE);
    zf_test_expect_error(zf_client_cancel_job(s_client, done), ZF_FAILED_PRECONDITION,
                         "has finished already");
    ASSERT_OK(zf_client_wait(s_client, done, 1, WAIT_MS, &out));
    assert_int_equal(*(const int64_t *)zf_tensor_data(out), 20 * 21 / 2);
    zf_tensor_unref(&out);
    free(done);
    free(job);
    zf_graphdef_free(&gd);
}

/* ---- the cost model ------------------------------------------------------------- */

static const Zflow__CostNode *s_cost_of(const zf_client_job_result_t *res, const char *node)
{
    for (size_t k = 0; k < res->n_cost; k++)
        if (strcmp(res->cost[k]->node, node) == 0) return res->cost[k];
    fail_msg("no cost for node %s", node);
    return NULL;
}

static void test_a_jobs_cost_graph_averages_its_steps(void **state)
{
    (void)state;
    enum { N = 30, STEPS = 4 };
    Tensorflow__GraphDef *gd = s_read(SUM_LOOP);
    s_loop_step_t ls;
    s_loop_step(&ls, N);
    zf_client_session_options_t opts = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    opts.build_cost_model = STEPS; /* the last step's reply carries it */
    zf_client_job_options_t jo = ZF_CLIENT_JOB_OPTIONS_DEFAULT;
    jo.steps = STEPS;
    char *job = NULL;
    ASSERT_OK(zf_client_submit_job(s_client, gd, &opts, &ls.step, &jo, &job));
    zf_client_job_result_t *res = NULL;
    ASSERT_OK(zf_client_wait_result(s_client, job, WAIT_MS, NULL, NULL, &res));
    assert_int_equal(*(const int64_t *)zf_tensor_data(res->tensors[0]), N * (N + 1) / 2);
    assert_int_equal(res->n_runs, 0); /* traced for the cost model only */
    /* the body adds once per iteration on CPU:1, the condition tests N + 1
     * times on CPU:0; every step alike, each output one int64 */
    const Zflow__CostNode *body = s_cost_of(res, "w/i_body"), *less = s_cost_of(res, "w/less");
    assert_string_equal(body->device, CPU1);
    assert_int_equal(body->steps, STEPS);
    assert_int_equal(body->runs_per_step, N);
    assert_int_equal(body->output_bytes, N * 8);
    assert_string_equal(less->device, "/job:localhost/replica:0/task:0/device:CPU:0");
    assert_int_equal(less->runs_per_step, N + 1);
    assert_int_equal(less->output_bytes, (N + 1) * 1); /* a bool each */
    /* compute_us is not checked: these kernels run in well under the
     * microsecond the trace's clock counts, so 0 is a right answer too */
    zf_client_job_result_free(&res);
    zf_tensor_unref(&ls.n);
    free(job);
    zf_graphdef_free(&gd);
}

/* ---- jobs' checkpoints ---------------------------------------------------------- */

/* Submits the counter job: init, then `count` steps times, checkpointed
 * every `every` steps into dir. */
static char *s_submit_counter(Tensorflow__GraphDef *gd, int64_t steps, int64_t every,
                              const char *dir)
{
    const char *fetch = "count", *init = "init";
    zf_client_step_t step = {NULL, NULL, 0, &fetch, 1, NULL, 0};
    zf_client_job_options_t jo = ZF_CLIENT_JOB_OPTIONS_DEFAULT;
    jo.steps = steps;
    jo.init_targets = &init;
    jo.n_init_targets = 1;
    jo.checkpoint_every = every;
    jo.checkpoint_dir = dir;
    char *job = NULL;
    ASSERT_OK(zf_client_submit_job(s_client, gd, NULL, &step, &jo, &job));
    return job;
}

static zf_client_job_result_t *s_result_of(const char *job)
{
    zf_client_job_result_t *res = NULL;
    ASSERT_OK(zf_client_wait_result(s_client, job, 2 * WAIT_MS, NULL, NULL, &res));
    assert_int_equal(res->n_fetches, 1);
    return res;
}

/* The float of key in the checkpoint at prefix. */
static double s_ckpt_value(const char *prefix, const char *key)
{
    zf_bundle_reader_t *r = NULL;
    ASSERT_OK(zf_bundle_reader_open(prefix, &r));
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_bundle_reader_lookup(r, key, strlen(key), &t));
    double v = zf_tensor_dtype(t) == ZF_INT64 ? (double)*(const int64_t *)zf_tensor_data(t)
                                                : (double)*(const float *)zf_tensor_data(t);
    zf_tensor_unref(&t);
    zf_bundle_reader_destroy(&r);
    return v;
}

/* Runs the counter job to 10, checkpointed every 3 steps into dir, and
 * checks its value and the step it resumed from. */
static void s_count_to_ten(Tensorflow__GraphDef *gd, const char *dir, int64_t resumed)
{
    char *job = s_submit_counter(gd, 10, 3, dir);
    zf_client_job_result_t *res = s_result_of(job);
    assert_true(*(const float *)zf_tensor_data(res->tensors[0]) == 10.0f);
    assert_int_equal(res->resumed_from_step, resumed);
    zf_client_job_result_free(&res);
    free(job);
}

/* The counter graph with a double variable instead of a float one. */
static Tensorflow__GraphDef *s_double_counter(void)
{
    FILE *f = fopen(COUNTER, "rb");
    assert_non_null(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char out[9000];
    size_t o = 0;
    for (size_t i = 0; i < n && o + 16 < sizeof out;) {
        if (strncmp(text + i, "DT_FLOAT", 8) == 0) {
            o += (size_t)snprintf(out + o, sizeof out - o, "DT_DOUBLE");
            i += 8;
        } else if (strncmp(text + i, "float_val", 9) == 0) {
            o += (size_t)snprintf(out + o, sizeof out - o, "double_val");
            i += 9;
        } else {
            out[o++] = text[i++];
        }
    }
    out[o] = '\0';
    return zf_test_graphdef(out);
}

/* Flips a byte of key's data in the checkpoint at prefix (one shard), so
 * its checksum no longer matches. */
static void s_spoil(const char *prefix, const char *key)
{
    zf_bundle_reader_t *r = NULL;
    ASSERT_OK(zf_bundle_reader_open(prefix, &r));
    zf_bundle_entry_t e;
    ASSERT_OK(zf_bundle_reader_entry(r, key, strlen(key), &e));
    zf_bundle_reader_destroy(&r);
    char path[128];
    snprintf(path, sizeof path, "%s.data-00000-of-00001", prefix);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, (long)e.offset, SEEK_SET), 0);
    int c = fgetc(f);
    assert_true(c != EOF);
    assert_int_equal(fseek(f, (long)e.offset, SEEK_SET), 0);
    assert_true(fputc(c ^ 0x5a, f) != EOF);
    assert_int_equal(fclose(f), 0);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_bundle_reader_open(prefix, &r));
    zf_status_t st = zf_bundle_reader_lookup(r, key, strlen(key), &t);
    zf_bundle_reader_destroy(&r);
    assert_int_equal(st.code, ZF_DATA_LOSS);
    zf_status_clear(&st);
}

static void test_a_job_saves_checkpoints_and_one_started_on_them_resumes(void **state)
{
    (void)state;
    char dir[] = "/tmp/zflow-ckpt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    Tensorflow__GraphDef *gd = s_read(COUNTER);
    s_count_to_ten(gd, dir, 0);
    /* steps 3 and 9 went to ckpt-b, 6 to ckpt-a; none after the last */
    char a[64], b[64];
    snprintf(a, sizeof a, "%s/ckpt-a", dir);
    snprintf(b, sizeof b, "%s/ckpt-b", dir);
    assert_true(s_ckpt_value(a, "_zflow_job_step") == 6.0 && s_ckpt_value(a, "counter") == 6.0);
    assert_true(s_ckpt_value(b, "_zflow_job_step") == 9.0 && s_ckpt_value(b, "counter") == 9.0);

    /* the same job again: init, then the counter of step 9, and one step */
    s_count_to_ten(gd, dir, 9);

    /* the counter's bytes in ckpt-b spoilt: its step still reads, its
     * variables do not, and the job resumes from ckpt-a's step 6 */
    s_spoil(b, "counter");
    s_count_to_ten(gd, dir, 6);
    /* that job saved step 9 into ckpt-b again; with both spoilt, none is
     * used and the job starts afresh */
    assert_true(s_ckpt_value(b, "_zflow_job_step") == 9.0 && s_ckpt_value(b, "counter") == 9.0);
    s_spoil(a, "counter");
    s_spoil(b, "counter");
    s_count_to_ten(gd, dir, 0);
    /* the job saved 3, 6 and 9 again. A model whose counter is a double
     * now does not match them: the job fails and the checkpoints stay, for
     * the model they were saved from */
    Tensorflow__GraphDef *dbl = s_double_counter();
    char *djob = s_submit_counter(dbl, 10, 3, dir);
    zf_tensor_t *dout = NULL;
    zf_test_expect_error(zf_client_wait(s_client, djob, 1, WAIT_MS, &dout), ZF_INVALID_ARGUMENT,
                         "restoring checkpoint");
    free(djob);
    zf_graphdef_free(&dbl);
    assert_true(s_ckpt_value(a, "_zflow_job_step") == 6.0 && s_ckpt_value(a, "counter") == 6.0);
    assert_true(s_ckpt_value(b, "_zflow_job_step") == 9.0 && s_ckpt_value(b, "counter") == 9.0);

    /* a graph without variables has nothing to checkpoint */
    char *job = NULL;
    Tensorflow__GraphDef *loop = s_read(SUM_LOOP);
    s_loop_step_t ls;
    s_loop_step(&ls, 3);
    zf_client_job_options_t jo = ZF_CLIENT_JOB_OPTIONS_DEFAULT;
    jo.steps = 2;
    jo.checkpoint_every = 1;
    jo.checkpoint_dir = dir;
    ASSERT_OK(zf_client_submit_job(s_client, loop, NULL, &ls.step, &jo, &job));
    zf_tensor_t *out = NULL;
    zf_test_expect_error(zf_client_wait(s_client, job, 1, WAIT_MS, &out), ZF_INVALID_ARGUMENT,
                         "checkpoint_every needs variables to save");
    free(job);
    jo.checkpoint_dir = NULL; /* every without a directory */
    ASSERT_OK(zf_client_submit_job(s_client, loop, NULL, &ls.step, &jo, &job));
    zf_test_expect_error(zf_client_wait(s_client, job, 1, WAIT_MS, &out), ZF_INVALID_ARGUMENT,
                         "needs a checkpoint_dir");
    free(job);
    zf_tensor_unref(&ls.n);
    zf_graphdef_free(&loop);
    zf_graphdef_free(&gd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* The pid of s_up's child running prog (after the first `skip` of them),
 * or -1. */
static pid_t s_child_of_up(const char *prog, int skip)
{
    for (pid_t pid = 2; pid < 4194304; pid++) {
        char path[64], line[256];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        bool got = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        char comm[64];
        int ppid = 0;
        if (got && sscanf(line, "%*d (%63[^)]) %*c %d", comm, &ppid) == 2 && ppid == s_up &&
            strcmp(comm, prog) == 0 && skip-- == 0)
            return pid;
    }
    return -1;
}

/* Polls job until it has done at least `steps` steps; its progress then. */
static zf_client_job_progress_t s_wait_steps(const char *job, int64_t steps)
{
    zf_client_job_progress_t p = {0};
    for (int64_t end = zf_test_now_ms() + 2 * WAIT_MS; zf_test_now_ms() < end; usleep(5000)) {
        ASSERT_OK(zf_client_poll(s_client, job, &p));
        if (p.steps_done >= steps || p.state == ZF_CLIENT_JOB_DONE) break;
    }
    assert_true(p.steps_done >= steps && p.state == ZF_CLIENT_JOB_RUNNING);
    return p;
}

/* Runs the counter job, picks a process with pick() once it runs, SIGKILLs
 * it once KILL_AFTER steps are done (`zflow up` starts it again), and
 * checks the job ends on its second attempt, resumed from a checkpoint at
 * or after the last one before the kill, every step counted once. The job
 * is long enough to be running still when the kill lands. */
static void s_kill_mid_job(pid_t (*pick)(void))
{
    enum { STEPS = 20000, EVERY = 100, KILL_AFTER = 400 };
    char dir[] = "/tmp/zflow-ckpt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    Tensorflow__GraphDef *gd = s_read(COUNTER);
    char *job = s_submit_counter(gd, STEPS, EVERY, dir);
    s_wait_steps(job, 1);
    pid_t victim = pick();
    assert_true(victim > 0);
    zf_client_job_progress_t p = s_wait_steps(job, KILL_AFTER);
    assert_int_equal(kill(victim, SIGKILL), 0);

    zf_client_job_result_t *res = s_result_of(job);
    /* every step counted once: the counter ends at STEPS exactly */
    assert_true(*(const float *)zf_tensor_data(res->tensors[0]) == (float)STEPS);
    assert_int_equal(res->attempts, 2);
    assert_true(res->resumed_from_step >= p.steps_done / EVERY * EVERY &&
                res->resumed_from_step < STEPS);
    assert_int_equal(res->resumed_from_step % EVERY, 0);
    zf_client_job_result_free(&res);
    free(job);
    zf_graphdef_free(&gd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static pid_t s_scheduler(void)
{
    return s_child_of_up("zflow-scheduler", 0);
}

static void test_a_job_whose_scheduler_is_killed_resumes_from_its_checkpoint(void **state)
{
    (void)state;
    s_kill_mid_job(s_scheduler);
}

/* Runs argv to its end: exit code, stderr into err. */
static int s_run(const char *const *argv, char *err, size_t size, int sigint_after_ms)
{
    int ofd = -1, efd = -1;
    pid_t pid = zf_test_spawn_piped(argv, &ofd, &efd);
    if (sigint_after_ms > 0) {
        usleep((useconds_t)sigint_after_ms * 1000);
        kill(pid, SIGINT);
    }
    int64_t deadline = zf_test_now_ms() + WAIT_MS;
    char out[4096];
    zf_test_drain(ofd, out, sizeof out, deadline);
    zf_test_drain(efd, err, size, deadline);
    close(ofd);
    close(efd);
    return zf_test_reap(pid, deadline);
}

static void test_ctrl_c_on_zflow_run_cancels_its_job(void **state)
{
    (void)state;
    char err[4096];
    const char *run[] = {ZFLOW,    "run",     SUM_LOOP,     "--broker", s_endpoint,
                         "--feed", "n=1000000000000", "--fetch", "w/s_exit", "--quiet", NULL};
    assert_int_equal(s_run(run, err, sizeof err, 1500), 130);
    assert_non_null(strstr(err, "CANCELLED"));
    assert_non_null(strstr(err, "cancelled: its client cancelled it"));

    const char *cancel[] = {ZFLOW, "cancel", "job-0-nosuchjob", "--broker", s_endpoint, NULL};
    assert_int_equal(s_run(cancel, err, sizeof err, 0), 1);
    assert_non_null(strstr(err, "NOT_FOUND"));
    const char *usage[] = {ZFLOW, "cancel", "--broker", s_endpoint, NULL};
    assert_int_equal(s_run(usage, err, sizeof err, 0), 2);
    assert_non_null(strstr(err, "need a JOB id"));
    const char *local[] = {ZFLOW,    "run",     SUM_LOOP,   "--inprocess", "--feed",
                           "n=3",    "--fetch", "w/s_exit", "--cost-graph", "/dev/null", NULL};
    assert_int_equal(s_run(local, err, sizeof err, 0), 2);
    assert_non_null(strstr(err, "--cost-graph needs the service"));

    /* the cluster runs the loop to its end afterwards */
    Tensorflow__GraphDef *gd = s_read(SUM_LOOP);
    char *sess = s_session(gd);
    s_expect_sum(sess, 50);
    ASSERT_OK(zf_client_reset(s_client));
    free(sess);
    zf_graphdef_free(&gd);
}

int main(void)
{
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extend_adds_nodes_next_to_the_state_and_refuses_clashes),
        cmocka_unit_test(test_extend_calls_functions_of_the_library_given_at_creation),
        cmocka_unit_test(test_cancel_ends_a_running_step_everywhere_and_the_session_runs_on),
        cmocka_unit_test(test_close_cancels_the_step_the_session_runs),
        cmocka_unit_test(test_reset_closes_every_session_of_the_client),
        cmocka_unit_test(test_cancel_job_stops_it_and_its_result_says_so),
        cmocka_unit_test(test_a_jobs_cost_graph_averages_its_steps),
        cmocka_unit_test(test_a_job_saves_checkpoints_and_one_started_on_them_resumes),
        cmocka_unit_test(test_a_job_whose_scheduler_is_killed_resumes_from_its_checkpoint),
        cmocka_unit_test(test_ctrl_c_on_zflow_run_cancels_its_job),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
