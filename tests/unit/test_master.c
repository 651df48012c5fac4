/* Tests for the scheduler's master (scheduler/master/master.h) over fake executors
 * (master_test_util.h) that run each partition with the real engine: the
 * step protocol end to end without sockets. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "common/tensor_proto.h"
#include "common/transport.h"
#include "executor/devices/device.h"
#include "executor/engine/engine.h"
#include "session/local_session.h"
#include "executor/rendezvous/rendezvous.h"
#include "executor/kernels/resource.h"
#include "scheduler/master/master.h"
#include "scheduler/master/master_internal.h"
#include "test_util.h"
#include "master_test_util.h"

#define EXAMPLES ZF_TEST_DATA_DIR "/../../examples"
#define CPU(k)   "/job:localhost/replica:0/task:0/device:CPU:" #k

/* ---- helpers ------------------------------------------------------------------- */

static Tensorflow__GraphDef *s_parse(const char *text)
{
    Tensorflow__GraphDef *gd = NULL;
    zf_status_t s = zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd);
    if (!zf_ok(s)) fail_msg("%s\n%s", zf_status_msg(&s), text);
    return gd;
}

static char *s_create(cluster_t *c, const Tensorflow__GraphDef *gd, bool soft)
{
    Zflow__CreateSession req = ZFLOW__CREATE_SESSION__INIT;
    Zflow__SessionOptions o = ZFLOW__SESSION_OPTIONS__INIT;
    o.allow_soft_placement = soft;
    req.graph = (Tensorflow__GraphDef *)gd;
    req.options = &o;
    char *id = NULL;
    ASSERT_OK(zf_master_create_session(c->m, &req, &id));
    return id;
}

static zf_tensor_t *s_floats(const float *v, zf_shape_t shape)
{
    zf_tensor_t *t = NULL;
    int64_t n = 1;
    for (int d = 0; d < shape.rank; d++) n *= shape.dims[d];
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, (size_t)n * sizeof(float), &t));
    return t;
}

/* Runs one step feeding x (borrowed) to feed, fetching fetch; returns the
 * status, and the fetched tensor in *out on success. */
static zf_status_t s_run(cluster_t *c, const char *session, const char *feed, zf_tensor_t *x,
                         const char *fetch, int64_t timeout_ms, zf_tensor_t **out)
{
    Tensorflow__TensorProto *tp = NULL;
    ASSERT_OK(zf_tensor_to_proto(x, &tp, true));
    Zflow__NamedTensor nt = ZFLOW__NAMED_TENSOR__INIT;
    nt.name = (char *)feed;
    nt.tensor = tp;
    Zflow__NamedTensor *feeds[1] = {&nt};
    char *fetches[1] = {(char *)fetch};
    Zflow__RunStep req = ZFLOW__RUN_STEP__INIT;
    req.session = (char *)session;
    req.n_feeds = 1;
    req.feeds = feeds;
    req.n_fetches = 1;
    req.fetches = fetches;
    req.timeout_ms = timeout_ms;
    Zflow__RunStepReply *rep = NULL;
    zf_status_t st = zf_master_run_step(c->m, &req, &rep);
    tensorflow__tensor_proto__free_unpacked(tp, NULL);
    if (out) *out = NULL;
    if (zf_ok(st)) {
        assert_non_null(rep);
        assert_int_equal(rep->n_fetches, 1);
        assert_string_equal(rep->fetches[0]->name, fetch);
        if (out) ASSERT_OK(zf_tensor_from_proto(rep->fetches[0]->tensor, out));
        zflow__run_step_reply__free_unpacked(rep, NULL);
    } else {
        assert_null(rep);
    }
    return st;
}

/* What mt_hop_graph gives for v: -(v * v), elementwise. */
static zf_tensor_t *s_hop_result(const float *v, zf_shape_t shape)
{
    float want[8];
    int64_t n = 1;
    for (int d = 0; d < shape.rank; d++) n *= shape.dims[d];
    assert_true(n <= 8);
    for (int64_t i = 0; i < n; i++) want[i] = -(v[i] * v[i]);
    return s_floats(want, shape);
}

static void s_expect_same(const zf_tensor_t *a, const zf_tensor_t *b)
{
    assert_int_equal(zf_tensor_dtype(a), zf_tensor_dtype(b));
    assert_int_equal(zf_tensor_nbytes(a), zf_tensor_nbytes(b));
    assert_memory_equal(zf_tensor_data(a), zf_tensor_data(b), zf_tensor_nbytes(a));
}

/* Pins node i of gd to CPU:(i % 2). */
static void s_pin_alternately(Tensorflow__GraphDef *gd)
{
    for (size_t i = 0; i < gd->n_node; i++) {
        if (gd->node[i]->device != protobuf_c_empty_string) free(gd->node[i]->device);
        gd->node[i]->device = strdup(i % 2 ? CPU(1) : CPU(0));
    }
}

static const float s_x[8] = {1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 0.25f, 2.0f, -0.75f};

/* ---- tests --------------------------------------------------------------------- */

static void test_master_runs_mlp_across_two_executors_like_local_session(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_file(EXAMPLES "/mlp.pbtxt", ZF_FORMAT_AUTO, &gd));
    s_pin_alternately(gd);
    zf_tensor_t *x = s_floats(s_x, ZF_SHAPE(2, 4));

    zf_local_session_options_t lo = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    lo.devices = "cpu:2";
    zf_local_session_t *local = NULL;
    ASSERT_OK(zf_local_session_new(gd, &lo, &local));
    const char *feed = "x";
    const char *fetch = "probs";
    zf_tensor_t *want = NULL;
    ASSERT_OK(zf_local_session_run(local, &feed, &x, 1, &fetch, 1, NULL, 0, &want));

    cluster_t *c = mt_cluster(2, 2000);
    char *sid = s_create(c, gd, false);
    zf_tensor_t *got = NULL;
    ASSERT_OK(s_run(c, sid, "x", x, "probs", 0, &got));
    s_expect_same(got, want);
    assert_int_equal(mt_count(c, &c->fakes[0].n_register), 1);
    assert_int_equal(mt_count(c, &c->fakes[1].n_register), 1);
    mt_quiesce(c);
    /* Both partitions succeeded and so cleaned up themselves: no CleanupGraph. */
    assert_int_equal(mt_count(c, &c->fakes[0].n_cleanup), 0);
    assert_int_equal(mt_count(c, &c->fakes[1].n_cleanup), 0);

    zf_tensor_unref(&got);
    zf_tensor_unref(&want);
    zf_tensor_unref(&x);
    free(sid);
    mt_cluster_destroy(c);
    zf_local_session_destroy(&local);
    zf_graphdef_free(&gd);
}

static void test_master_caches_plans_and_registers_each_partition_once(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(mt_hop_graph);
    cluster_t *c = mt_cluster(2, 2000);
    char *sid = s_create(c, gd, false);
    zf_tensor_t *x = s_floats(s_x, ZF_SHAPE(8)), *want = s_hop_result(s_x, ZF_SHAPE(8));
    for (int k = 0; k < 3; k++) {
        zf_tensor_t *z = NULL;
        ASSERT_OK(s_run(c, sid, "x:0", x, "z", 0, &z));
        s_expect_same(z, want);
        zf_tensor_unref(&z);
    }
    assert_int_equal(zf_master_num_plans(c->m, sid), 1);
    assert_int_equal(mt_count(c, &c->fakes[0].n_register), 1);
    assert_int_equal(mt_count(c, &c->fakes[1].n_register), 1);
    assert_int_equal(mt_count(c, &c->fakes[0].n_run), 3);
    assert_int_equal(mt_count(c, &c->fakes[1].n_run), 3);

    ASSERT_OK(zf_master_close_session(c->m, sid));
    mt_quiesce(c);
    assert_int_equal(mt_count(c, &c->fakes[0].n_deregister), 1);
    assert_int_equal(mt_count(c, &c->fakes[1].n_deregister), 1);
    assert_int_equal(zf_master_num_plans(c->m, sid), -1);
    zf_test_expect_error(s_run(c, sid, "x", x, "z", 0, NULL), ZF_NOT_FOUND, "not found");

    zf_tensor_unref(&want);
    zf_tensor_unref(&x);
    free(sid);
    mt_cluster_destroy(c);
    zf_graphdef_free(&gd);
}

static void test_master_reports_a_kernel_error_with_its_device_and_aborts_the_others(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse("node { name: 'x' op: 'Placeholder' device: '" CPU(
        0) "'"
           "  attr { key: 'dtype' value { type: DT_FLOAT } } }"
           "node { name: 'shape' op: 'Const' device: '" CPU(
               1) "'"
                  "  attr { key: 'dtype' value { type: DT_INT32 } }"
                  "  attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { "
                  "size: 1 } }"
                  "    int_val: 3 } } } }"
                  "node { name: 'r' op: 'Reshape' input: 'x' input: 'shape' device: '" CPU(
                      1) "'"
                         "  attr { key: 'T' value { type: DT_FLOAT } }"
                         "  attr { key: 'Tshape' value { type: DT_INT32 } } }"
                         "node { name: 'z' op: 'Neg' input: 'r' device: '" CPU(
                             0) "'"
                                "  attr { key: 'T' value { type: DT_FLOAT } } }");
    cluster_t *c = mt_cluster(2, 2000);
    char *sid = s_create(c, gd, false);
    zf_tensor_t *x = s_floats(s_x, ZF_SHAPE(8));
    zf_status_t st = s_run(c, sid, "x", x, "z", 0, NULL);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(zf_status_msg(&st), CPU(1)));
    assert_non_null(strstr(zf_status_msg(&st), "reshape"));
    assert_null(strstr(zf_status_msg(&st), CPU(0)));
    zf_status_clear(&st);
    mt_quiesce(c);
    assert_int_equal(mt_count(c, &c->fakes[0].n_abort), 1);
    assert_int_equal(mt_count(c, &c->fakes[1].n_abort), 0);
    assert_int_equal(mt_count(c, &c->fakes[0].n_cleanup), 1);
    assert_int_equal(mt_count(c, &c->fakes[1].n_cleanup), 1);
    assert_int_equal(zf_master_num_plans(c->m, sid), 1); /* the plan itself is fine */

    zf_tensor_unref(&x);
    free(sid);
    mt_cluster_destroy(c);
    zf_graphdef_free(&gd);
}

typedef struct {
    cluster_t *c;
    const char *device;
} killer_t;

static void *s_kill_later(void *arg)
{
    killer_t *k = arg;
    usleep(100 * 1000);
    zf_master_device_died(k->c->m, k->device, "heartbeats stopped");
    return NULL;
}

static void test_master_fails_a_step_whose_executor_dies_and_replaces_the_next_run(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(mt_hop_graph);
    cluster_t *c = mt_cluster(2, 2000);
    char *sid = s_create(c, gd, true);
    zf_tensor_t *x = s_floats(s_x, ZF_SHAPE(8));
    atomic_store(&c->fakes[1].hang, true);
    killer_t k = {c, CPU(1)};
    pthread_t killer;
    assert_int_equal(pthread_create(&killer, NULL, s_kill_later, &k), 0);
    zf_status_t st = s_run(c, sid, "x", x, "z", 0, NULL);
    pthread_join(killer, NULL);
    atomic_store(&c->fakes[1].dead, true);
    zf_test_expect_error(st, ZF_UNAVAILABLE, "executor " CPU(1) " died: heartbeats stopped");
    assert_int_equal(zf_master_num_plans(c->m, sid), 0);
    assert_int_equal(zf_master_num_devices(c->m), 1);
    mt_quiesce(c);
    assert_int_equal(mt_count(c, &c->fakes[0].n_abort), 1);

    zf_tensor_t *z = NULL, *want = s_hop_result(s_x, ZF_SHAPE(8));
    ASSERT_OK(s_run(c, sid, "x", x, "z", 0, &z));
    s_expect_same(z, want); /* the whole graph ran on CPU:0 */
    assert_int_equal(zf_master_num_plans(c->m, sid), 1);
    assert_int_equal(mt_count(c, &c->fakes[0].n_register), 2);
    assert_int_equal(mt_count(c, &c->fakes[1].n_register), 1);

    zf_tensor_unref(&want);
    zf_tensor_unref(&z);
    zf_tensor_unref(&x);
    free(sid);
    mt_cluster_destroy(c);
    zf_graphdef_free(&gd);
}

static void test_master_times_out_a_step_and_aborts_it_everywhere(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(mt_hop_graph);
    cluster_t *c = mt_cluster(2, 100);
    char *sid = s_create(c, gd, false);
    zf_tensor_t *x = s_floats(s_x, ZF_SHAPE(8));
    atomic_store(&c->fakes[1].hang, true);
    zf_status_t st = s_run(c, sid, "x", x, "z", 200, NULL);
    zf_test_expect_error(st, ZF_DEADLINE_EXCEEDED, "did not finish within 200 ms");
    mt_quiesce(c);
    assert_int_equal(mt_count(c, &c->fakes[0].n_abort), 1);
    assert_int_equal(mt_count(c, &c->fakes[1].n_abort), 1);
    assert_int_equal(mt_count(c, &c->fakes[0].n_cleanup), 1);
    assert_int_equal(mt_count(c, &c->fakes[1].n_cleanup), 1);

    atomic_store(&c->fakes[1].hang, false); /* the next step runs normally */
    zf_tensor_t *z = NULL, *want = s_hop_result(s_x, ZF_SHAPE(8));
    ASSERT_OK(s_run(c, sid, "x", x, "z", 2000, &z));
    s_expect_same(z, want);

    zf_tensor_unref(&want);
    zf_tensor_unref(&z);
    zf_tensor_unref(&x);
    free(sid);
    mt_cluster_destroy(c);
    zf_graphdef_free(&gd);
}

/* The load the master balances by on device: what the executor reported
 * plus the nodes of this master's live plans on it; -1 when unknown. */
static int64_t s_load(cluster_t *c, const char *device)
{
    pthread_mutex_lock(&c->m->mu);
    const zf__master_device_t *d = zf__master_find_device(c->m, device);
    int64_t load = d ? d->load + d->placed : -1;
    pthread_mutex_unlock(&c->m->mu);
    return load;
}

static void s_expect_loads(cluster_t *c, int64_t cpu0, int64_t cpu1)
{
    assert_int_equal(s_load(c, CPU(0)), cpu0);
    assert_int_equal(s_load(c, CPU(1)), cpu1);
}

/* Runs one step of session (its first places it) and returns the fake it
 * ran on, checking that it ran on exactly one. */
static int s_run_where(cluster_t *c, const char *session, zf_tensor_t *x)
{
    int before[2] = {mt_count(c, &c->fakes[0].n_run), mt_count(c, &c->fakes[1].n_run)};
    ASSERT_OK(s_run(c, session, "x", x, "z", 0, NULL));
    mt_quiesce(c);
    int ran[2] = {mt_count(c, &c->fakes[0].n_run) - before[0],
                  mt_count(c, &c->fakes[1].n_run) - before[1]};
    assert_int_equal(ran[0] + ran[1], 1);
    return ran[0] ? 0 : 1;
}

static void test_master_places_a_new_session_on_the_least_loaded_executor(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(/* nothing pinned */
                                       "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' "
                                       "value { type: DT_FLOAT } } }"
                                       "node { name: 'z' op: 'Neg' input: 'x' attr { key: 'T' "
                                       "value { type: DT_FLOAT } } }");
    cluster_t *c = mt_cluster(2, 2000);
    zf_tensor_t *x = s_floats(s_x, ZF_SHAPE(8));
    s_expect_loads(c, 0, 0);
    char *a = s_create(c, gd, false), *b = s_create(c, gd, false), *d = s_create(c, gd, false);
    /* nothing is placed before a run needs a plan */
    s_expect_loads(c, 0, 0);
    assert_int_equal(s_run_where(c, a, x), 0); /* a tie goes by name */
    const int64_t n = s_load(c, CPU(0));       /* one session's partition */
    assert_true(n >= 2);                       /* at least x and z */
    s_expect_loads(c, n, 0);
    assert_int_equal(s_run_where(c, b, x), 1); /* CPU:0 carries a's nodes */
    s_expect_loads(c, n, n);
    assert_int_equal(s_run_where(c, d, x), 0); /* a tie again */
    s_expect_loads(c, 2 * n, n);
    assert_int_equal(s_run_where(c, a, x), 0); /* a's next step: no new load */
    s_expect_loads(c, 2 * n, n);

    /* Each close takes away exactly its session's load, and the next
     * placement sees it: had the closed session's load stayed, the new
     * session would go to the other executor. */
    ASSERT_OK(zf_master_close_session(c->m, a));
    s_expect_loads(c, n, n);
    char *e = s_create(c, gd, false);
    assert_int_equal(s_run_where(c, e, x), 0); /* a tie; with a's load, CPU:1 */
    s_expect_loads(c, 2 * n, n);
    ASSERT_OK(zf_master_close_session(c->m, d));
    s_expect_loads(c, n, n);
    char *g = s_create(c, gd, false);
    assert_int_equal(s_run_where(c, g, x), 0); /* a tie; with d's load, CPU:1 */
    s_expect_loads(c, 2 * n, n);
    ASSERT_OK(zf_master_close_session(c->m, e));
    s_expect_loads(c, n, n);
    ASSERT_OK(zf_master_close_session(c->m, b));
    s_expect_loads(c, n, 0);
    char *h = s_create(c, gd, false);
    assert_int_equal(s_run_where(c, h, x), 1); /* with b's load, a tie: CPU:0 */
    s_expect_loads(c, n, n);
    ASSERT_OK(zf_master_close_session(c->m, g));
    s_expect_loads(c, 0, n);
    ASSERT_OK(zf_master_close_session(c->m, h));
    s_expect_loads(c, 0, 0);
    /* closing twice is NOT_FOUND and takes nothing more away */
    zf_test_expect_error(zf_master_close_session(c->m, h), ZF_NOT_FOUND, h);
    s_expect_loads(c, 0, 0);
    assert_int_equal(mt_count(c, &c->fakes[0].n_register), 4); /* a, d, e, g */
    assert_int_equal(mt_count(c, &c->fakes[1].n_register), 2); /* b, h */
    mt_quiesce(c);
    assert_int_equal(mt_count(c, &c->fakes[0].n_deregister), 4);
    assert_int_equal(mt_count(c, &c->fakes[1].n_deregister), 2);

    zf_tensor_unref(&x);
    free(a);
    free(b);
    free(d);
    free(e);
    free(g);
    free(h);
    mt_cluster_destroy(c);
    zf_graphdef_free(&gd);
}

static void test_master_keeps_a_sessions_placement_across_its_plans(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(/* nothing pinned */
                                       "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' "
                                       "value { type: DT_FLOAT } } }"
                                       "node { name: 'z' op: 'Neg' input: 'x' attr { key: 'T' "
                                       "value { type: DT_FLOAT } } }"
                                       "node { name: 'w' op: 'Neg' input: 'z' attr { key: 'T' "
                                       "value { type: DT_FLOAT } } }");
    cluster_t *c = mt_cluster(2, 2000);
    char *a = s_create(c, gd, false), *b = s_create(c, gd, false), *d = s_create(c, gd, false);
    zf_tensor_t *x = s_floats(s_x, ZF_SHAPE(8)), *w = NULL;
    ASSERT_OK(s_run(c, a, "x", x, "z", 0, NULL)); /* CPU:0 (a tie goes by name) */
    ASSERT_OK(s_run(c, b, "x", x, "z", 0, NULL)); /* CPU:1, the less loaded */
    ASSERT_OK(s_run(c, d, "x", x, "z", 0, NULL)); /* CPU:0 again */
    assert_int_equal(mt_count(c, &c->fakes[0].n_register), 2);
    assert_int_equal(mt_count(c, &c->fakes[1].n_register), 1);
    /* a new signature of a is a new plan: balanced alone would put it on
     * CPU:1 now, but a's nodes stay where a was placed */
    ASSERT_OK(s_run(c, a, "x", x, "w", 0, &w));
    s_expect_same(w, x);
    assert_int_equal(mt_count(c, &c->fakes[0].n_register), 3);
    assert_int_equal(mt_count(c, &c->fakes[1].n_register), 1);

    zf_tensor_unref(&w);
    zf_tensor_unref(&x);
    free(a);
    free(b);
    free(d);
    mt_cluster_destroy(c);
    zf_graphdef_free(&gd);
}

typedef struct {
    cluster_t *c;
    const char *session;
    int index, failures;
} client_t;

/* Runs 50 steps feeding values unique to this client; counts wrong results
 * (each must be -(v * v) of its own feed). */
static void *s_client(void *arg)
{
    client_t *cl = arg;
    for (int k = 0; k < 50; k++) {
        float v[8], want[8];
        for (int i = 0; i < 8; i++) {
            v[i] = (float)(cl->index * 1000 + k * 10 + i + 1);
            want[i] = -(v[i] * v[i]);
        }
        zf_tensor_t *x = s_floats(v, ZF_SHAPE(8)), *z = NULL;
        zf_status_t st = s_run(cl->c, cl->session, "x", x, "z", 0, &z);
        if (!zf_ok(st) || zf_tensor_nbytes(z) != sizeof want ||
            memcmp(zf_tensor_data(z), want, sizeof want) != 0)
            cl->failures++;
        zf_status_clear(&st);
        zf_tensor_unref(&z);
        zf_tensor_unref(&x);
    }
    return NULL;
}

static void test_master_serves_concurrent_runs_each_with_its_own_values(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(mt_hop_graph);
    cluster_t *c = mt_cluster(2, 2000);
    char *sid = s_create(c, gd, false);
    client_t clients[8];
    pthread_t threads[8];
    for (int i = 0; i < 8; i++) {
        clients[i] = (client_t){c, sid, i, 0};
        assert_int_equal(pthread_create(&threads[i], NULL, s_client, &clients[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(clients[i].failures, 0);
    }
    assert_int_equal(zf_master_num_plans(c->m, sid), 1);
    assert_int_equal(mt_count(c, &c->fakes[0].n_register), 1);
    assert_int_equal(mt_count(c, &c->fakes[1].n_run), 400);
    free(sid);
    mt_cluster_destroy(c);
    zf_graphdef_free(&gd);
}

typedef struct {
    int calls;
    Zflow__RunStepReply *reply;
} job_result_t;

static void s_on_job(void *arg, Zflow__RunStepReply *reply)
{
    job_result_t *r = arg;
    r->calls++;
    r->reply = reply;
}

static void test_master_runs_a_one_shot_job_and_hands_its_result_to_each_waiter_once(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(mt_hop_graph);
    cluster_t *c = mt_cluster(2, 2000);
    zf_tensor_t *x = s_floats(s_x, ZF_SHAPE(8));
    Tensorflow__TensorProto *tp = NULL;
    ASSERT_OK(zf_tensor_to_proto(x, &tp, true));
    Zflow__NamedTensor nt = ZFLOW__NAMED_TENSOR__INIT;
    nt.name = "x";
    nt.tensor = tp;
    Zflow__NamedTensor *feeds[1] = {&nt};
    char *fetches[1] = {"z:0"};
    Zflow__RunStep step = ZFLOW__RUN_STEP__INIT;
    step.n_feeds = 1;
    step.feeds = feeds;
    step.n_fetches = 1;
    step.fetches = fetches;
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = gd;
    Zflow__SubmitJob job = ZFLOW__SUBMIT_JOB__INIT;
    job.session = &cs;
    job.step = &step;

    char *id = NULL;
    ASSERT_OK(zf_master_job_new(c->m, &job, &id));
    job_result_t early = {0}, late = {0};
    ASSERT_OK(zf_master_job_wait(c->m, id, s_on_job, &early)); /* before it ends */
    zf_master_job_run(c->m, id, &job);
    assert_int_equal(early.calls, 1);
    assert_non_null(early.reply);
    ASSERT_OK(zf_status_from_proto(early.reply->status));
    assert_int_equal(early.reply->n_fetches, 1);
    assert_string_equal(early.reply->fetches[0]->name, "z:0");
    zf_tensor_t *z = NULL, *want = s_hop_result(s_x, ZF_SHAPE(8));
    ASSERT_OK(zf_tensor_from_proto(early.reply->fetches[0]->tensor, &z));
    s_expect_same(z, want);
    zf_tensor_unref(&want);
    zf_test_expect_error(zf_master_job_wait(c->m, id, s_on_job, &late), ZF_NOT_FOUND,
                         "already collected");
    assert_int_equal(late.calls, 0);

    char *id2 = NULL; /* a failing job: its waiter gets the error */
    fetches[0] = "nope";
    ASSERT_OK(zf_master_job_new(c->m, &job, &id2));
    zf_master_job_run(c->m, id2, &job);
    ASSERT_OK(zf_master_job_wait(c->m, id2, s_on_job, &late));
    assert_int_equal(late.calls, 1);
    zf_test_expect_error(zf_status_from_proto(late.reply->status), ZF_INVALID_ARGUMENT, "nope");
    Zflow__SubmitJob empty = ZFLOW__SUBMIT_JOB__INIT;
    char *id3 = NULL;
    zf_test_expect_error(zf_master_job_new(c->m, &empty, &id3), ZF_INVALID_ARGUMENT,
                         "without a session graph");
    assert_null(id3);

    zflow__run_step_reply__free_unpacked(early.reply, NULL);
    zflow__run_step_reply__free_unpacked(late.reply, NULL);
    zf_tensor_unref(&z);
    free(id);
    free(id2);
    tensorflow__tensor_proto__free_unpacked(tp, NULL);
    zf_tensor_unref(&x);
    mt_cluster_destroy(c);
    zf_graphdef_free(&gd);
}

static void test_master_rejects_unknown_sessions_feeds_and_bad_executors(void **state)
{
    (void)state;
    Tensorflow__GraphDef *gd = s_parse(mt_hop_graph);
    cluster_t *c = mt_cluster(2, 2000);
    char *sid = s_create(c, gd, false);
    zf_tensor_t *x = s_floats(s_x, ZF_SHAPE(8));
    zf_test_expect_error(s_run(c, "session-nope", "x", x, "z", 0, NULL), ZF_NOT_FOUND,
                         "session 'session-nope' not found");
    zf_test_expect_error(s_run(c, sid, "nope", x, "z", 0, NULL), ZF_INVALID_ARGUMENT, "nope");
    zf_test_expect_error(s_run(c, sid, "x:", x, "z", 0, NULL), ZF_INVALID_ARGUMENT, "feed 'x:'");
    zf_tensor_t *i = NULL;
    ASSERT_OK(zf_tensor_new_scalar_int32(3, &i));
    zf_test_expect_error(s_run(c, sid, "x", i, "z", 0, NULL), ZF_INVALID_ARGUMENT,
                         "Cannot feed value of dtype int32 for Tensor 'x:0', which has dtype "
                         "float");
    zf_tensor_unref(&i);

    Tensorflow__DeviceAttributes attrs;
    Zflow__ExecutorInfo *info = mt_info(&c->fakes[0], &attrs);
    attrs.name = "/device:CPU:7";
    zf_test_expect_error(zf_master_device_joined(c->m, info), ZF_INVALID_ARGUMENT,
                         "not a full device name");
    attrs.name = (char *)c->fakes[0].device->name_str;
    attrs.incarnation = 0;
    zf_test_expect_error(zf_master_device_joined(c->m, info), ZF_INVALID_ARGUMENT, "incarnation 0");
    assert_int_equal(zf_master_num_devices(c->m), 2);

    Zflow__CreateSession bad = ZFLOW__CREATE_SESSION__INIT;
    char *id = NULL;
    zf_test_expect_error(zf_master_create_session(c->m, &bad, &id), ZF_INVALID_ARGUMENT,
                         "without a graph");
    assert_null(id);

    zf_master_drop_devices(c->m, "gone");
    assert_int_equal(zf_master_num_devices(c->m), 0);
    zf_test_expect_error(s_run(c, sid, "x", x, "z", 0, NULL), ZF_FAILED_PRECONDITION,
                         "No devices are registered");

    zf_tensor_unref(&x);
    free(sid);
    mt_cluster_destroy(c);
    zf_graphdef_free(&gd);
}

/* A function call on CPU:0 whose product is pinned to CPU:1: the master
 * inlines the body before placement, so the call spans both executors.
 * Scale(x) = (x + 1) * 3, then negated: -(3x + 3). */
static void test_master_runs_a_function_whose_body_spans_two_executors(void **state)
{
    (void)state;
    static const char *const text =
        "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"
        "node { name: 'call' op: 'Scale' input: 'x' device: '" CPU(
            0) "' }"
               "node { name: 'z' op: 'Neg' input: 'call' attr { key: 'T' value { type: DT_FLOAT } "
               "} }"
               "library { function { signature { name: 'Scale' input_arg { name: 'x' type: "
               "DT_FLOAT }"
               " output_arg { name: 'y' type: DT_FLOAT } }"
               " node_def { name: 'one' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
               "   attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: "
               "1 } } } }"
               " node_def { name: 'three' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } "
               "}"
               "   attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: "
               "3 } } } }"
               " node_def { name: 'add' op: 'AddV2' input: 'x' input: 'one:output:0'"
               "   attr { key: 'T' value { type: DT_FLOAT } } }"
               " node_def { name: 'mul' op: 'Mul' input: 'add:z:0' input: 'three:output:0'"
               "   device: '" CPU(1) "' attr { key: 'T' value { type: DT_FLOAT } } }"
                                     " ret { key: 'y' value: 'mul:z:0' } } }";
    Tensorflow__GraphDef *gd = NULL;
    ASSERT_OK(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd));
    cluster_t *c = mt_cluster(2, 2000);
    char *sid = s_create(c, gd, false);
    const float v[3] = {0, 2, -1.5f}, want_v[3] = {-3, -9, 1.5f};
    zf_tensor_t *x = s_floats(v, ZF_SHAPE(3)), *want = s_floats(want_v, ZF_SHAPE(3)), *got = NULL;
    ASSERT_OK(s_run(c, sid, "x", x, "z", 0, &got));
    s_expect_same(got, want);
    assert_int_equal(mt_count(c, &c->fakes[0].n_register), 1);
    assert_int_equal(mt_count(c, &c->fakes[1].n_register), 1);
    mt_quiesce(c);
    zf_tensor_unref(&got);
    zf_tensor_unref(&want);
    zf_tensor_unref(&x);
    free(sid);
    mt_cluster_destroy(c);
    zf_graphdef_free(&gd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_runs_mlp_across_two_executors_like_local_session),
        cmocka_unit_test(test_master_caches_plans_and_registers_each_partition_once),
        cmocka_unit_test(test_master_reports_a_kernel_error_with_its_device_and_aborts_the_others),
        cmocka_unit_test(test_master_fails_a_step_whose_executor_dies_and_replaces_the_next_run),
        cmocka_unit_test(test_master_times_out_a_step_and_aborts_it_everywhere),
        cmocka_unit_test(test_master_runs_a_one_shot_job_and_hands_its_result_to_each_waiter_once),
        cmocka_unit_test(test_master_rejects_unknown_sessions_feeds_and_bad_executors),
        cmocka_unit_test(test_master_serves_concurrent_runs_each_with_its_own_values),
        cmocka_unit_test(test_master_places_a_new_session_on_the_least_loaded_executor),
        cmocka_unit_test(test_master_keeps_a_sessions_placement_across_its_plans),
        cmocka_unit_test(test_master_runs_a_function_whose_body_spans_two_executors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
