/* Tests for the master's steps without a thread (zf_master_start_step,
 * zf_master_poll; scheduler/master/master.h) over fake executors
 * (master_test_util.h): only a cached plan starts, the reply comes through
 * the callback from a poll, and a timeout and an executor's death end the
 * step with the blocking path's errors. */
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
#include "executor/rendezvous/rendezvous.h"
#include "executor/kernels/resource.h"
#include "scheduler/master/master.h"
#include "test_util.h"
#include "master_test_util.h"

#define CPU(k) "/job:localhost/replica:0/task:0/device:CPU:" #k

typedef struct {
    cluster_t *c;
    Tensorflow__GraphDef *gd;
    char *session;
    Tensorflow__TensorProto *x; /* [1, -2, 3] */
} fixture_t;

/* What a callback received. */
typedef struct {
    int calls;
    Zflow__Envelope *reply;
} s_got_t;

static void s_done(void *arg, Zflow__Envelope *reply)
{
    s_got_t *g = arg;
    g->calls++;
    g->reply = reply;
}

/* A RunStep envelope (owned by the caller) feeding x and fetching fetch. */
static Zflow__Envelope *s_request(fixture_t *f, const char *session, const char *fetch,
                                  int64_t timeout_ms, uint64_t id)
{
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    Zflow__RunStep rs = ZFLOW__RUN_STEP__INIT;
    Zflow__NamedTensor nt = ZFLOW__NAMED_TENSOR__INIT;
    Zflow__NamedTensor *feeds[1] = {&nt};
    char *fetches[1] = {(char *)fetch};
    nt.name = "x";
    nt.tensor = f->x;
    rs.session = (char *)session;
    rs.n_feeds = 1;
    rs.feeds = feeds;
    rs.n_fetches = 1;
    rs.fetches = fetches;
    rs.timeout_ms = timeout_ms;
    env.request_id = id;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP;
    env.run_step = &rs;
    size_t len = zflow__envelope__get_packed_size(&env);
    uint8_t *buf = malloc(len + 1);
    assert_non_null(buf);
    zflow__envelope__pack(&env, buf);
    Zflow__Envelope *copy = zflow__envelope__unpack(NULL, len, buf);
    free(buf);
    assert_non_null(copy);
    return copy;
}

/* Polls until the callback has fired (the fakes answer from their thread). */
static void s_poll_until_done(fixture_t *f, s_got_t *g)
{
    for (int i = 0; g->calls == 0 && i < 5000; i++) {
        zf_master_poll(f->c->m);
        if (g->calls == 0) usleep(1000);
    }
    assert_int_equal(g->calls, 1);
}

/* One blocking step caches the plan for (x -> z). */
static int s_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ASSERT_OK(zf_graphdef_read_mem(mt_hop_graph, strlen(mt_hop_graph), ZF_FORMAT_PBTXT, &f->gd));
    f->c = mt_cluster(2, 100);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = f->gd;
    ASSERT_OK(zf_master_create_session(f->c->m, &cs, &f->session));
    float v[3] = {1.0f, -2.0f, 3.0f};
    zf_tensor_t *x = NULL;
    zf_shape_t shape = ZF_SHAPE(3);
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, sizeof v, &x));
    ASSERT_OK(zf_tensor_to_proto(x, &f->x, true));
    zf_tensor_unref(&x);
    Zflow__Envelope *req = s_request(f, f->session, "z", 0, 1);
    Zflow__RunStepReply *rep = NULL;
    ASSERT_OK(zf_master_run_step(f->c->m, req->run_step, &rep));
    zflow__run_step_reply__free_unpacked(rep, NULL);
    zflow__envelope__free_unpacked(req, NULL);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    mt_cluster_destroy(f->c);
    tensorflow__tensor_proto__free_unpacked(f->x, NULL);
    zf_graphdef_free(&f->gd);
    free(f->session);
    free(f);
    return 0;
}

static void test_master_async_step_with_a_cached_plan_answers_through_its_callback(void **state)
{
    fixture_t *f = *state;
    /* an absurd timeout from the wire is no deadline, not an overflow */
    Zflow__Envelope *req = s_request(f, f->session, "z:0", INT64_MAX, 77);
    s_got_t got = {0};
    bool started = false;
    zf_master_start_step(f->c->m, &req, s_done, &got, &started);
    assert_true(started);
    assert_null(req); /* taken over */
    s_poll_until_done(f, &got);
    Zflow__Envelope *rep = got.reply;
    assert_non_null(rep);
    assert_int_equal(rep->request_id, 77);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->run_step_reply->status));
    assert_int_equal(rep->run_step_reply->n_fetches, 1);
    assert_string_equal(rep->run_step_reply->fetches[0]->name, "z:0");
    zf_tensor_t *z = NULL;
    ASSERT_OK(zf_tensor_from_proto(rep->run_step_reply->fetches[0]->tensor, &z));
    const float want[3] = {-1.0f, -4.0f, -9.0f}; /* z = -x^2 */
    assert_memory_equal(zf_tensor_data(z), want, sizeof want);
    zf_tensor_unref(&z);
    zflow__envelope__free_unpacked(rep, NULL);
    mt_quiesce(f->c);
    /* both steps ran on both executors (the setup's and this one) ... */
    assert_int_equal(mt_count(f->c, &f->c->fakes[0].n_run), 2);
    assert_int_equal(mt_count(f->c, &f->c->fakes[1].n_run), 2);
    /* ... and succeeded everywhere: the executors cleaned up themselves,
     * so no CleanupGraph was sent */
    assert_int_equal(mt_count(f->c, &f->c->fakes[0].n_cleanup), 0);
    assert_int_equal(mt_count(f->c, &f->c->fakes[1].n_cleanup), 0);
    assert_int_equal(zf_master_poll(f->c->m), -1); /* nothing left to look at */
}

static void test_master_async_start_leaves_what_it_cannot_start_to_the_caller(void **state)
{
    fixture_t *f = *state;
    const char *sessions[3] = {f->session, "nope/session-1", f->session};
    const char *fetches[3] = {"y", "z", "no such node"}; /* no plan, no session, bad name */
    for (int i = 0; i < 3; i++) {
        Zflow__Envelope *req = s_request(f, sessions[i], fetches[i], 0, 5);
        Zflow__Envelope *kept = req;
        s_got_t got = {0};
        bool started = true;
        zf_master_start_step(f->c->m, &req, s_done, &got, &started);
        assert_false(started);
        assert_ptr_equal(req, kept);
        zf_master_poll(f->c->m);
        assert_int_equal(got.calls, 0);
        zflow__envelope__free_unpacked(req, NULL);
    }
    assert_int_equal(mt_count(f->c, &f->c->fakes[0].n_run), 1); /* the setup's step only */
}

static void s_expect_failed(s_got_t *g, zf_code_t code, const char *text)
{
    assert_non_null(g->reply);
    assert_int_equal(g->reply->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    zf_test_expect_error(zf_status_from_proto(g->reply->run_step_reply->status), code, text);
    assert_int_equal(g->reply->run_step_reply->n_fetches, 0);
    zflow__envelope__free_unpacked(g->reply, NULL);
    g->reply = NULL;
}

static void test_master_async_step_times_out_and_aborts_everywhere(void **state)
{
    fixture_t *f = *state;
    atomic_store(&f->c->fakes[1].hang, true);
    Zflow__Envelope *req = s_request(f, f->session, "z", 200, 9);
    s_got_t got = {0};
    bool started = false;
    zf_master_start_step(f->c->m, &req, s_done, &got, &started);
    assert_true(started);
    int64_t wake = zf_master_poll(f->c->m);
    assert_true(wake > 0 && wake <= 200); /* the step's deadline */
    s_poll_until_done(f, &got);
    s_expect_failed(&got, ZF_DEADLINE_EXCEEDED, "did not finish within 200 ms");
    mt_quiesce(f->c);
    assert_int_equal(mt_count(f->c, &f->c->fakes[0].n_abort), 1);
    assert_int_equal(mt_count(f->c, &f->c->fakes[1].n_abort), 1);
    /* a failed step is cleaned up everywhere */
    assert_int_equal(mt_count(f->c, &f->c->fakes[0].n_cleanup), 1);
    assert_int_equal(mt_count(f->c, &f->c->fakes[1].n_cleanup), 1);
    atomic_store(&f->c->fakes[1].hang, false);
}

static void test_master_async_step_fails_unavailable_when_its_executor_dies(void **state)
{
    fixture_t *f = *state;
    atomic_store(&f->c->fakes[1].hang, true);
    Zflow__Envelope *req = s_request(f, f->session, "z", 0, 10);
    s_got_t got = {0};
    bool started = false;
    zf_master_start_step(f->c->m, &req, s_done, &got, &started);
    assert_true(started);
    zf_master_poll(f->c->m);
    assert_int_equal(got.calls, 0);
    zf_master_device_died(f->c->m, CPU(1), "killed");
    s_poll_until_done(f, &got);
    s_expect_failed(&got, ZF_UNAVAILABLE, "executor " CPU(1) " died: killed");
    assert_int_equal(zf_master_num_plans(f->c->m, f->session), 0); /* its plan is dropped */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_master_async_step_with_a_cached_plan_answers_through_its_callback, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_master_async_start_leaves_what_it_cannot_start_to_the_caller, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_master_async_step_times_out_and_aborts_everywhere,
                                        s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(
            test_master_async_step_fails_unavailable_when_its_executor_dies, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
