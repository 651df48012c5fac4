/* Tests for the scheduler's job pool (scheduler/server/server.h): jobs run on
 * workers of their own (zflow-scheduler --job-workers), so that a job that
 * cannot finish holds up neither sessions' requests nor the answer to
 * another SubmitJob, and the jobs waiting for them are bounded
 * (--max-queued-jobs). Real broker, executor and zflow-scheduler processes on
 * 127.0.0.1 ephemeral ports. */
#include <inttypes.h>
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

#include "common/tensor_proto.h"
#include "scheduler/server/server.h"
#include "service_test_util.h"
#include "test_util.h"

#define CPU0      ZF_TEST_CPU(0)
#define CPU1      ZF_TEST_CPU(1)
#define SCHEDULER ZF_TEST_SCHEDULER
#define WAIT_MS   60000

static const float s_x[4] = {1.0f, -2.0f, 0.5f, 3.0f};

typedef struct {
    zf_test_broker_t broker;
    zf_test_child_t executors[2]; /* CPU:0 and CPU:1 */
    zf_test_child_t scheduler;
    zf_zctx_t *ctx;
    zf_socket_t *jobs;    /* the client submitting jobs, on the broker */
    zf_socket_t *session; /* another client, on the broker */
    zf_socket_t *direct;  /* that client on the scheduler's client endpoint */
    char state[64];       /* the broker's --state directory, when it has one */
} cluster_t;

/* Broker, executors CPU:0 and CPU:1, and a scheduler with one request
 * worker, one job worker and room for one job waiting for it. The broker declares an executor dead
 * only after 60 s without a heartbeat, so one stopped for a while stays. */
static int s_setup(void **state)
{
    cluster_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    *state = c;
    const char *bargs[] = {"--heartbeat-ms", "1000", "--heartbeat-misses", "60", NULL};
    zf_test_broker_start(&c->broker, bargs);
    for (int k = 0; k < 2; k++)
        zf_test_executor_start(&c->executors[k], c->broker.endpoint, k, WAIT_MS);
    const char *sargs[] = {"--workers", "1", "--job-workers", "1", "--max-queued-jobs", "1", NULL};
    zf_test_scheduler_start(&c->scheduler, c->broker.endpoint, sargs, WAIT_MS);
    ASSERT_OK(zf_zctx_new(&c->ctx));
    c->jobs = zf_test_dealer(c->ctx, c->broker.endpoint);
    c->session = zf_test_dealer(c->ctx, c->broker.endpoint);
    return 0;
}

/* The scheduler of the durable tests: one job worker, so that of the jobs
 * it holds one runs and the others wait in its queue. */
static const char *const s_durable_sched_args[] = {"--job-workers", "1", NULL};

/* The broker of the durable tests on the state directory c->state, listening
 * at listen (NULL: an ephemeral port). */
static void s_start_durable_broker(cluster_t *c, const char *listen)
{
    const char *bargs[] = {"--heartbeat-ms",
                           "1000",
                           "--heartbeat-misses",
                           "60",
                           "--state",
                           c->state,
                           listen ? "--listen" : NULL,
                           listen,
                           NULL};
    zf_test_broker_start(&c->broker, bargs);
}

/* A broker keeping its jobs in a fresh state directory, executors CPU:0 and
 * CPU:1, and the durable tests' scheduler. */
static int s_setup_durable(void **state)
{
    cluster_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    *state = c;
    zf_test_state_dir(c->state, sizeof c->state);
    s_start_durable_broker(c, NULL);
    for (int k = 0; k < 2; k++)
        zf_test_executor_start(&c->executors[k], c->broker.endpoint, k, WAIT_MS);
    zf_test_scheduler_start(&c->scheduler, c->broker.endpoint, s_durable_sched_args, WAIT_MS);
    ASSERT_OK(zf_zctx_new(&c->ctx));
    c->jobs = zf_test_dealer(c->ctx, c->broker.endpoint);
    return 0;
}

static int s_teardown(void **state)
{
    cluster_t *c = *state;
    zf_socket_destroy(&c->direct);
    zf_socket_destroy(&c->session);
    zf_socket_destroy(&c->jobs);
    zf_zctx_destroy(&c->ctx);
    int rc = zf_test_child_stop(&c->scheduler, SIGTERM, WAIT_MS); /* a clean exit checks leaks */
    for (int k = 0; k < 2; k++) {
        if (c->executors[k].pid > 0) kill(c->executors[k].pid, SIGCONT); /* a failed test's */
        zf_test_child_stop(&c->executors[k], SIGTERM, WAIT_MS);
    }
    zf_test_broker_stop(&c->broker, SIGTERM);
    if (c->state[0]) zf_test_state_dir_remove(c->state);
    free(c);
    return rc == 0 ? 0 : -1;
}

/* ---- messages --------------------------------------------------------------------- */

/* A RunStep feeding x (s_x) and fetching `fetch`; free with s_step_free. */
static Zflow__RunStep *s_step(const char *session, const char *fetch)
{
    zf_shape_t shape = ZF_SHAPE(4);
    zf_tensor_t *x = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, s_x, sizeof s_x, &x));
    Zflow__NamedTensor *nt = calloc(1, sizeof *nt);
    Zflow__RunStep *rs = calloc(1, sizeof *rs);
    assert_true(nt && rs);
    zflow__named_tensor__init(nt);
    nt->name = "x";
    ASSERT_OK(zf_tensor_to_proto(x, &nt->tensor, true));
    zf_tensor_unref(&x);
    zflow__run_step__init(rs);
    rs->session = (char *)session;
    rs->n_feeds = 1;
    rs->feeds = calloc(1, sizeof *rs->feeds);
    rs->fetches = calloc(1, sizeof *rs->fetches);
    assert_true(rs->feeds && rs->fetches);
    rs->feeds[0] = nt;
    rs->n_fetches = 1;
    rs->fetches[0] = (char *)fetch;
    return rs;
}

static void s_step_free(Zflow__RunStep *rs)
{
    tensorflow__tensor_proto__free_unpacked(rs->feeds[0]->tensor, NULL);
    free(rs->feeds[0]);
    free(rs->feeds);
    free(rs->fetches);
    free(rs);
}

/* Checks r is a successful reply whose one fetch is x * x for 'y' or
 * -(x * x) for 'z', whichever `fetch` says. */
static void s_expect_value(const Zflow__RunStepReply *r, char fetch)
{
    ASSERT_OK(zf_status_from_proto(r->status));
    assert_int_equal(r->n_fetches, 1);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_proto(r->fetches[0]->tensor, &t));
    assert_int_equal(zf_tensor_nbytes(t), sizeof s_x);
    const float *v = zf_tensor_data(t);
    for (int i = 0; i < 4; i++) {
        float sq = s_x[i] * s_x[i];
        assert_true(v[i] == (fetch == 'y' ? sq : -sq));
    }
    zf_tensor_unref(&t);
}

/* Sends a RunStep of session (fetch `fetch`) on s and checks its value. */
static void s_run_step(zf_socket_t *s, uint64_t id, const char *session, char fetch)
{
    char name[2] = {fetch, '\0'};
    Zflow__RunStep *rs = s_step(session, name);
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP;
    env.run_step = rs;
    Zflow__Envelope *rep = zf_test_call(s, &env, id, WAIT_MS);
    s_step_free(rs);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    s_expect_value(rep->run_step_reply, fetch);
    zflow__envelope__free_unpacked(rep, NULL);
}

/* Submits a job of the graph x -> y = x * x -> z = -y, all on device, that
 * feeds x and fetches `fetch`, steps times; its SubmitJobReply (caller
 * frees), which must come back within WAIT_MS. */
static Zflow__Envelope *s_submit_reply(cluster_t *c, uint64_t id, const char *device, char fetch,
                                       int64_t steps)
{
    const char *devices[3] = {device, device, device};
    Tensorflow__GraphDef *gd = zf_test_neg_chain(devices, 3);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = gd;
    char name[2] = {fetch, '\0'};
    Zflow__RunStep *rs = s_step(NULL, name);
    Zflow__SubmitJob sj = ZFLOW__SUBMIT_JOB__INIT;
    sj.session = &cs;
    sj.step = rs;
    sj.steps = steps;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_SUBMIT_JOB;
    env.submit_job = &sj;
    Zflow__Envelope *rep = zf_test_call(c->jobs, &env, id, WAIT_MS);
    s_step_free(rs);
    zf_graphdef_free(&gd);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY);
    return rep;
}

/* s_submit_reply for a job that must be accepted: its id (caller frees). */
static char *s_submit(cluster_t *c, uint64_t id, const char *device, char fetch, int64_t steps)
{
    Zflow__Envelope *rep = s_submit_reply(c, id, device, fetch, steps);
    ASSERT_OK(zf_status_from_proto(rep->submit_job_reply->status));
    const char *job = rep->submit_job_reply->job_id;
    assert_non_null(job);
    assert_memory_equal(job, "job-", 4); /* the broker's id */
    char *out = strdup(job);
    zflow__envelope__free_unpacked(rep, NULL);
    return out;
}

/* The state of job `job`; its steps done into *steps_done. */
static Zflow__JobState s_poll(cluster_t *c, uint64_t id, const char *job, int64_t *steps_done)
{
    Zflow__PollJob pj = ZFLOW__POLL_JOB__INIT;
    pj.job_id = (char *)job;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_POLL_JOB;
    env.poll_job = &pj;
    Zflow__Envelope *rep = zf_test_call(c->jobs, &env, id, WAIT_MS);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_POLL_JOB_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->poll_job_reply->status));
    Zflow__JobState state = rep->poll_job_reply->state;
    *steps_done = rep->poll_job_reply->steps_done;
    zflow__envelope__free_unpacked(rep, NULL);
    return state;
}

/* Waits for job `job` and checks its value as s_expect_value, and that it
 * was handed to a scheduler `attempts` times. */
static void s_expect_job(cluster_t *c, uint64_t id, const char *job, char fetch, int attempts)
{
    Zflow__WaitJob wj = ZFLOW__WAIT_JOB__INIT;
    wj.job_id = (char *)job;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_WAIT_JOB;
    env.wait_job = &wj;
    Zflow__Envelope *rep = zf_test_call(c->jobs, &env, id, WAIT_MS);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    s_expect_value(rep->run_step_reply, fetch);
    assert_int_equal(rep->run_step_reply->attempts, attempts);
    zflow__envelope__free_unpacked(rep, NULL);
}

/* A second WaitJob for `job` finds nothing: its result went once. */
static void s_expect_collected(cluster_t *c, uint64_t id, const char *job)
{
    Zflow__WaitJob wj = ZFLOW__WAIT_JOB__INIT;
    wj.job_id = (char *)job;
    zf_test_send_body(c->jobs, id, ZFLOW__ENVELOPE__BODY_WAIT_JOB, &wj);
    zf_test_expect_status(c->jobs, id, ZF_NOT_FOUND, "not found");
}

/* Opens a session of the graph on CPU:0 through the broker; connects
 * c->direct to the scheduler endpoint its reply names. Its id (caller
 * frees). */
static char *s_open_session(cluster_t *c, uint64_t id)
{
    const char *devices[3] = {CPU0, CPU0, CPU0};
    Tensorflow__GraphDef *gd = zf_test_neg_chain(devices, 3);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = gd;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION;
    env.create_session = &cs;
    Zflow__Envelope *rep = zf_test_call(c->session, &env, id, WAIT_MS);
    zf_graphdef_free(&gd);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY);
    ASSERT_OK(zf_status_from_proto(rep->create_session_reply->status));
    char *session = strdup(rep->create_session_reply->session);
    const char *ep = rep->create_session_reply->scheduler_endpoint;
    assert_non_null(ep);
    c->direct = zf_test_dealer(c->ctx, ep);
    zflow__envelope__free_unpacked(rep, NULL);
    return session;
}

/* ---- tests -------------------------------------------------------------------------- */

static void test_a_job_that_cannot_finish_holds_up_no_session_and_no_other_submit(void **state)
{
    cluster_t *c = *state;
    /* Job A runs on CPU:1, stopped: its plan's RegisterGraph goes
     * unanswered, so A holds the one job worker until CPU:1 goes on. */
    kill(c->executors[1].pid, SIGSTOP);
    zf_test_wait_stopped(c->executors[1].pid, WAIT_MS);
    char *a = s_submit(c, 1, CPU1, 'z', 1);
    int64_t done = -1;
    uint64_t id = 100;
    Zflow__JobState st = ZFLOW__JOB_STATE__JOB_STATE_QUEUED;
    for (int64_t end = zf_test_now_ms() + WAIT_MS;
         st == ZFLOW__JOB_STATE__JOB_STATE_QUEUED && zf_test_now_ms() < end; usleep(10000))
        st = s_poll(c, id++, a, &done);
    assert_int_equal(st, ZFLOW__JOB_STATE__JOB_STATE_RUNNING);
    assert_int_equal(done, 0);

    /* Job B, on CPU:0, is answered at once and waits for the job worker. */
    char *b = s_submit(c, 2, CPU0, 'y', 3);
    assert_int_equal(s_poll(c, id++, b, &done), ZFLOW__JOB_STATE__JOB_STATE_QUEUED);
    assert_int_equal(done, 0);

    /* One more job finds the scheduler's queue full: the broker keeps it
     * queued and hands it on once there is room. */
    char *e = s_submit(c, 3, CPU0, 'z', 1);
    assert_int_equal(s_poll(c, id++, e, &done), ZFLOW__JOB_STATE__JOB_STATE_QUEUED);

    /* Another client's session is served by the one request worker: its
     * CreateSession, and RunSteps whose plans are built on that worker,
     * by the broker and straight to the scheduler. */
    char *session = s_open_session(c, 10);
    s_run_step(c->direct, 11, session, 'z');
    s_run_step(c->session, 12, session, 'y');
    s_run_step(c->direct, 13, session, 'z'); /* a cached plan: on the loop thread */
    Zflow__CloseSession cl = ZFLOW__CLOSE_SESSION__INIT;
    cl.session = session;
    zf_test_send_body(c->direct, 14, ZFLOW__ENVELOPE__BODY_CLOSE_SESSION, &cl);
    zf_test_expect_status(c->direct, 14, ZF_OK, NULL);
    free(session);

    /* A is still where it was, and B still waits behind it. */
    assert_int_equal(s_poll(c, id++, a, &done), ZFLOW__JOB_STATE__JOB_STATE_RUNNING);
    assert_int_equal(done, 0);
    assert_int_equal(s_poll(c, id++, b, &done), ZFLOW__JOB_STATE__JOB_STATE_QUEUED);

    /* CPU:1 goes on: A ends with its value, then B runs all its steps. */
    kill(c->executors[1].pid, SIGCONT);
    s_expect_job(c, id++, a, 'z', 1);
    s_expect_job(c, id++, b, 'y', 1);
    s_expect_job(c, id++, e, 'z', 1);
    free(a);
    free(b);
    free(e);
    char *d = s_submit(c, 4, CPU0, 'z', 2); /* the queue has room again */
    s_expect_job(c, id++, d, 'z', 1);
    free(d);
}

/* Polls job until it is in state `want` with at least min_done steps done,
 * failing the test after WAIT_MS. */
static void s_poll_until(cluster_t *c, uint64_t *id, const char *job, Zflow__JobState want,
                         int64_t min_done)
{
    int64_t done = -1, end = zf_test_now_ms() + WAIT_MS;
    for (Zflow__JobState st; (st = s_poll(c, (*id)++, job, &done)) != want || done < min_done;
         usleep(5000))
        assert_true(zf_test_now_ms() < end);
}

static void test_the_jobs_of_a_killed_scheduler_run_once_more_on_the_next(void **state)
{
    cluster_t *c = *state;
    /* a runs long enough to be killed midway; b, d and e wait behind it */
    const char fetch[4] = {'z', 'y', 'z', 'y'};
    const int64_t steps[4] = {2000, 2, 1, 3};
    char *jobs[4];
    for (int k = 0; k < 4; k++) jobs[k] = s_submit(c, 1 + (uint64_t)k, CPU0, fetch[k], steps[k]);
    uint64_t id = 100;
    s_poll_until(c, &id, jobs[0], ZFLOW__JOB_STATE__JOB_STATE_RUNNING, 1);
    int64_t done = 0;
    assert_int_equal(s_poll(c, id++, jobs[2], &done), ZFLOW__JOB_STATE__JOB_STATE_QUEUED);
    int64_t t0 = zf_test_now_ms();
    assert_int_equal(zf_test_child_stop(&c->scheduler, SIGKILL, WAIT_MS), 128 + SIGKILL);
    zf_test_scheduler_start(&c->scheduler, c->broker.endpoint, s_durable_sched_args, WAIT_MS);
    int64_t t1 = zf_test_now_ms();
    s_poll_until(c, &id, jobs[0], ZFLOW__JOB_STATE__JOB_STATE_RUNNING, 0); /* on the new one */
    print_message("the new scheduler ran the lost job %" PRId64 " ms after the kill (%" PRId64
                  " ms to start it)\n",
                  zf_test_now_ms() - t0, t1 - t0);
    for (int k = 0; k < 4; k++) {
        s_expect_job(c, id++, jobs[k], fetch[k], 2); /* once more, from its start */
        s_expect_collected(c, id++, jobs[k]);        /* and its result once */
        free(jobs[k]);
    }
}

static void test_a_restarted_broker_returns_every_accepted_job_by_its_id(void **state)
{
    cluster_t *c = *state;
    uint64_t id = 100;
    char *a = s_submit(c, 1, CPU0, 'z', 1); /* done, its result not collected */
    s_poll_until(c, &id, a, ZFLOW__JOB_STATE__JOB_STATE_DONE, 1);
    char *b = s_submit(c, 2, CPU0, 'y', 4000); /* running when the broker dies */
    char *d = s_submit(c, 3, CPU0, 'z', 2);   /* waiting behind it */
    s_poll_until(c, &id, b, ZFLOW__JOB_STATE__JOB_STATE_RUNNING, 1);
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", c->broker.endpoint);
    assert_int_equal(zf_test_broker_stop(&c->broker, SIGKILL), 128 + SIGKILL);
    s_start_durable_broker(c, endpoint); /* where the others reconnect */
    s_expect_job(c, id++, a, 'z', 1);
    s_expect_job(c, id++, b, 'y', 2); /* its run was lost with the broker: once more */
    s_expect_job(c, id++, d, 'z', 2);
    free(a);
    free(b);
    free(d);
}

static void
test_scheduler_checks_job_workers_and_max_queued_jobs_and_lists_them_in_help(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(zf_test_run_program(SCHEDULER, "--job-workers 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "zflow-scheduler: --job-workers must be from 1 to 1024, not '0'"));
    assert_int_equal(zf_test_run_program(SCHEDULER, "--job-workers 1025", out, sizeof out), 2);
    assert_non_null(strstr(out, "not '1025'"));
    assert_int_equal(zf_test_run_program(SCHEDULER, "--job-workers some", out, sizeof out), 2);
    assert_non_null(strstr(out, "not 'some'"));
    assert_int_equal(zf_test_run_program(SCHEDULER, "--help", out, sizeof out), 0);
    assert_non_null(strstr(out, "[--job-workers N]"));
    assert_non_null(strstr(out, "--job-workers N     jobs (zflow submit) run at once (default 4)"));
    assert_non_null(strstr(out, "[--max-queued-jobs N]"));
    assert_non_null(strstr(out, "--max-queued-jobs N  jobs waiting for a job worker, at most"));
    assert_int_equal(zf_test_run_program(SCHEDULER, "--max-queued-jobs 0", out, sizeof out), 2);
    assert_non_null(
        strstr(out, "zflow-scheduler: --max-queued-jobs must be from 1 to 1000000, not '0'"));

    zf_sched_server_t *srv = NULL;
    zf_sched_server_config_t cfg = {.broker = "tcp://127.0.0.1:9", .job_workers = -1};
    zf_status_t st = zf_sched_server_new(&cfg, &srv);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&st),
                        "scheduler: job_workers must be 0 (the default, 4) to 1024, not -1");
    zf_status_clear(&st);
    cfg.job_workers = 1025;
    zf_test_expect_error(zf_sched_server_new(&cfg, &srv), ZF_INVALID_ARGUMENT, "not 1025");
    assert_null(srv);
    cfg.job_workers = 0;
    cfg.max_queued_jobs = -1;
    zf_test_expect_error(
        zf_sched_server_new(&cfg, &srv), ZF_INVALID_ARGUMENT,
        "scheduler: max_queued_jobs must be 0 (the default, 4096) or more, not -1");
    assert_null(srv);
    cfg.max_queued_jobs = 0;
    cfg.job_workers = 2;
    ASSERT_OK(zf_sched_server_new(&cfg, &srv));
    zf_sched_server_destroy(&srv);
    assert_null(srv);
}

int main(void)
{
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_a_job_that_cannot_finish_holds_up_no_session_and_no_other_submit, s_setup,
            s_teardown),
        cmocka_unit_test(
            test_scheduler_checks_job_workers_and_max_queued_jobs_and_lists_them_in_help),
        cmocka_unit_test_setup_teardown(
            test_the_jobs_of_a_killed_scheduler_run_once_more_on_the_next, s_setup_durable,
            s_teardown),
        cmocka_unit_test_setup_teardown(
            test_a_restarted_broker_returns_every_accepted_job_by_its_id, s_setup_durable,
            s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
