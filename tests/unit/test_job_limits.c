/* Tests for the limit on the steps one job may ask for: the master's check
 * at submit time (scheduler/master/master.h) over the fake executors of
 * master_test_util.h, and zflow-scheduler's --max-job-steps as a real
 * process behind a real broker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "scheduler/master/master.h"
#include "test_util.h"
#include "broker_test_util.h"
#include "master_test_util.h"

#define SCHEDULER ZF_BIN_DIR "/zflow-scheduler"
#define WAIT_MS   10000

/* Expects zf_master_job_new to refuse cj's steps with INVALID_ARGUMENT and
 * exactly the message want. */
static void s_expect_refused(zf_master_t *m, zf_test_counter_job_t *cj, int64_t steps,
                             const char *want)
{
    cj->job.steps = steps;
    char *id = NULL;
    zf_status_t st = zf_master_job_new(m, &cj->job, &id);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&st), want);
    zf_status_clear(&st);
    assert_null(id);
}

static void test_master_runs_a_job_at_its_step_limit_and_refuses_one_past_it(void **state)
{
    (void)state;
    cluster_t *c = mt_cluster(1, 2000);
    zf_master_set_job_steps_max(c->m, 3);
    zf_test_counter_job_t cj;
    zf_test_counter_job(&cj, 3, "init");
    char *id = NULL;
    ASSERT_OK(zf_master_job_new(c->m, &cj.job, &id));
    zf_master_job_run(c->m, id, &cj.job);
    zf_test_job_result_t r = {0};
    ASSERT_OK(zf_master_job_wait(c->m, id, zf_test_on_job_result, &r));
    assert_int_equal(r.calls, 1);
    ASSERT_OK(zf_status_from_proto(r.reply->status));
    assert_int_equal(r.reply->n_fetches, 1);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_proto(r.reply->fetches[0]->tensor, &t));
    assert_true(*(const float *)zf_tensor_data(t) == 3.0f); /* all three ran */
    zf_tensor_unref(&t);
    zflow__run_step_reply__free_unpacked(r.reply, NULL);
    free(id);

    s_expect_refused(c->m, &cj, 4,
                     "SubmitJob asks for 4 steps; this scheduler runs at most 3 per job "
                     "(--max-job-steps)");
    s_expect_refused(c->m, &cj, -1,
                     "SubmitJob: steps must be 0 or more, not -1 (0 runs the step once; this "
                     "scheduler runs at most 3 per job (--max-job-steps))");
    zf_graphdef_free(&cj.gd);
    mt_cluster_destroy(c);
}

static void test_master_limits_a_job_to_a_million_steps_by_default(void **state)
{
    (void)state;
    cluster_t *c = mt_cluster(1, 2000);
    zf_test_counter_job_t cj;
    zf_test_counter_job(&cj, ZF_MASTER_JOB_STEPS_MAX, "init");
    assert_int_equal(ZF_MASTER_JOB_STEPS_MAX, 1000000);
    char *id = NULL;
    ASSERT_OK(zf_master_job_new(c->m, &cj.job, &id)); /* queued, never run */
    zf_master_job_progress_t p;
    ASSERT_OK(zf_master_job_poll(c->m, id, &p));
    assert_int_equal(p.state, ZF_MASTER_JOB_QUEUED);
    assert_int_equal(p.steps_total, 1000000);
    free(id);
    s_expect_refused(c->m, &cj, 1000001,
                     "SubmitJob asks for 1000001 steps; this scheduler runs at most 1000000 per "
                     "job (--max-job-steps)");
    s_expect_refused(c->m, &cj, (int64_t)1 << 62,
                     "SubmitJob asks for 4611686018427387904 steps; this scheduler runs at most "
                     "1000000 per job (--max-job-steps)");
    s_expect_refused(c->m, &cj, INT64_MIN,
                     "SubmitJob: steps must be 0 or more, not -9223372036854775808 (0 runs the "
                     "step once; this scheduler runs at most 1000000 per job (--max-job-steps))");
    zf_master_set_job_steps_max(c->m, 5);
    s_expect_refused(c->m, &cj, 6,
                     "SubmitJob asks for 6 steps; this scheduler runs at most 5 per job "
                     "(--max-job-steps)");
    zf_master_set_job_steps_max(c->m, 0); /* back to the default */
    s_expect_refused(c->m, &cj, 1000001,
                     "SubmitJob asks for 1000001 steps; this scheduler runs at most 1000000 per "
                     "job (--max-job-steps)");
    zf_graphdef_free(&cj.gd);
    mt_cluster_destroy(c);
}

/* ---- zflow-scheduler --max-job-steps ------------------------------------------- */

/* SubmitJob of cj with steps through client (a DEALER on the broker) as
 * request id; the reply's status into *code and msg, the job id into
 * job_id (may be empty). */
static void s_submit(zf_socket_t *client, zf_test_counter_job_t *cj, int64_t steps, uint64_t id,
                     int *code, char *msg, size_t size)
{
    cj->job.steps = steps;
    zf_test_send_body(client, id, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, &cj->job);
    Zflow__Envelope *rep = zf_test_recv(client, WAIT_MS, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, id);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY);
    const Zflow__Status *st = rep->submit_job_reply->status;
    *code = st ? st->code : 0;
    snprintf(msg, size, "%s", *code ? st->message : rep->submit_job_reply->job_id);
    zflow__envelope__free_unpacked(rep, NULL);
}

typedef struct {
    zf_test_broker_t tb;
    zf_test_child_t sched;
    zf_zctx_t *ctx;
    zf_socket_t *client;
    zf_test_counter_job_t cj;
} process_t;

/* The processes run from setup to teardown, so that a test failing
 * half-way leaves none of them running. */
static int s_setup_process(void **state)
{
    process_t *p = calloc(1, sizeof *p);
    assert_non_null(p);
    *state = p;
    zf_test_broker_start(&p->tb, NULL);
    const char *argv[] = {SCHEDULER, "--broker", p->tb.endpoint, "--max-job-steps", "5", NULL};
    zf_test_spawn(&p->sched, argv, WAIT_MS);
    ASSERT_OK(zf_zctx_new(&p->ctx));
    p->client = zf_test_dealer(p->ctx, p->tb.endpoint);
    return 0;
}

static int s_teardown_process(void **state)
{
    process_t *p = *state;
    zf_graphdef_free(&p->cj.gd);
    zf_socket_destroy(&p->client);
    zf_zctx_destroy(&p->ctx);
    int rc = zf_test_child_stop(&p->sched, SIGTERM, WAIT_MS); /* a clean exit checks its leaks */
    if (zf_test_broker_stop(&p->tb, SIGTERM) != 0) rc = -1;
    free(p);
    return rc == 0 ? 0 : -1;
}

/* WaitJob for job_id through client; the result's status into *code and msg. */
static void s_wait(zf_socket_t *client, const char *job_id, uint64_t id, int *code, char *msg,
                   size_t size)
{
    Zflow__WaitJob wj = ZFLOW__WAIT_JOB__INIT;
    wj.job_id = (char *)job_id;
    zf_test_send_body(client, id, ZFLOW__ENVELOPE__BODY_WAIT_JOB, &wj);
    Zflow__Envelope *rep = zf_test_recv(client, WAIT_MS, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->request_id, id);
    assert_int_equal(rep->body_case, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY);
    const Zflow__Status *st = rep->run_step_reply->status;
    *code = st ? st->code : 0;
    snprintf(msg, size, "%s", st ? st->message : "");
    zflow__envelope__free_unpacked(rep, NULL);
}

static void test_scheduler_process_refuses_a_job_past_max_job_steps_and_keeps_serving(void **state)
{
    process_t *p = *state;
    assert_non_null(strstr(p->sched.line, "zflow-scheduler connected to"));
    zf_socket_t *client = p->client;
    zf_test_counter_job_t *cj = &p->cj;
    zf_test_counter_job(cj, 0, "init");
    int code = -1;
    char msg[512], job[128];
    /* the broker takes it (its own limit is 1000000); the scheduler's
     * refusal is the job's result */
    s_submit(client, cj, 6, 1, &code, job, sizeof job);
    assert_int_equal(code, ZF_OK);
    s_wait(client, job, 2, &code, msg, sizeof msg);
    assert_int_equal(code, ZF_INVALID_ARGUMENT);
    assert_string_equal(msg, "SubmitJob asks for 6 steps; this scheduler runs at most 5 per job "
                             "(--max-job-steps)");
    /* past the broker's limit, or negative: refused at submit time */
    s_submit(client, cj, (int64_t)1 << 62, 3, &code, msg, sizeof msg);
    assert_int_equal(code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "asks for 4611686018427387904 steps; this broker accepts at most "
                                "1000000 per job (--max-job-steps)"));
    s_submit(client, cj, -7, 4, &code, msg, sizeof msg);
    assert_int_equal(code, ZF_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "steps must be 0 or more, not -7"));
    /* the limit itself is accepted: a job id comes back (no executor is
     * there to run it, which its result would tell) */
    s_submit(client, cj, 5, 5, &code, msg, sizeof msg);
    assert_int_equal(code, ZF_OK);
    assert_memory_equal(msg, "job-", 4);
}

/* Runs the scheduler with args, stderr folded in; its exit code. */
static int s_scheduler_cmd(const char *args, char *out, size_t size)
{
    return zf_test_run_program(SCHEDULER, args, out, size);
}

static void test_scheduler_refuses_a_bad_max_job_steps_and_lists_the_flag_in_help(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(s_scheduler_cmd("--max-job-steps 0", out, sizeof out), 2);
    assert_non_null(
        strstr(out, "zflow-scheduler: --max-job-steps must be from 1 to 1000000000000, not '0'"));
    assert_int_equal(s_scheduler_cmd("--max-job-steps -5", out, sizeof out), 2);
    assert_non_null(strstr(out, "--max-job-steps must be from 1 to 1000000000000, not '-5'"));
    assert_int_equal(s_scheduler_cmd("--max-job-steps 1000000000001", out, sizeof out), 2);
    assert_non_null(strstr(out, "not '1000000000001'"));
    assert_int_equal(s_scheduler_cmd("--help", out, sizeof out), 0);
    assert_non_null(strstr(out, "[--max-job-steps N]"));
    assert_non_null(strstr(out, "--max-job-steps N   steps one job may ask for, at most (default "
                                "1000000)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_runs_a_job_at_its_step_limit_and_refuses_one_past_it),
        cmocka_unit_test(test_master_limits_a_job_to_a_million_steps_by_default),
        cmocka_unit_test_setup_teardown(
            test_scheduler_process_refuses_a_job_past_max_job_steps_and_keeps_serving,
            s_setup_process, s_teardown_process),
        cmocka_unit_test(test_scheduler_refuses_a_bad_max_job_steps_and_lists_the_flag_in_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
