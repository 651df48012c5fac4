/* Tests for the master's one-shot jobs (scheduler/master/master.h): several steps
 * on one session, init targets, progress, and the bounded retention of
 * results, over the fake executors of master_test_util.h. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "common/tensor_proto.h"
#include "scheduler/master/master.h"
#include "test_util.h"
#include "master_test_util.h"

/* Submits and runs cj; the job's id (caller frees). */
static char *s_submit_and_run(cluster_t *c, zf_test_counter_job_t *cj)
{
    char *id = NULL;
    ASSERT_OK(zf_master_job_new(c->m, &cj->job, &id));
    zf_master_job_run(c->m, id, &cj->job);
    return id;
}

/* Collects job id's result, which must hold count == want. */
static void s_expect_count(cluster_t *c, const char *id, float want)
{
    zf_test_job_result_t r = {0};
    ASSERT_OK(zf_master_job_wait(c->m, id, zf_test_on_job_result, &r));
    assert_int_equal(r.calls, 1);
    ASSERT_OK(zf_status_from_proto(r.reply->status));
    assert_int_equal(r.reply->n_fetches, 1);
    assert_string_equal(r.reply->fetches[0]->name, "count");
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_proto(r.reply->fetches[0]->tensor, &t));
    assert_true(*(const float *)zf_tensor_data(t) == want);
    zf_tensor_unref(&t);
    zflow__run_step_reply__free_unpacked(r.reply, NULL);
}

static void test_master_job_runs_its_step_n_times_after_its_init_targets(void **state)
{
    (void)state;
    cluster_t *c = mt_cluster(2, 2000);
    zf_test_counter_job_t cj;
    zf_test_counter_job(&cj, 5, "init");
    char *id = NULL;
    ASSERT_OK(zf_master_job_new(c->m, &cj.job, &id));
    zf_master_job_progress_t p;
    ASSERT_OK(zf_master_job_poll(c->m, id, &p));
    assert_int_equal(p.state, ZF_MASTER_JOB_QUEUED);
    assert_int_equal(p.steps_done, 0);
    assert_int_equal(p.steps_total, 5);
    assert_int_equal(p.partitions_total, 0);
    assert_int_equal(p.elapsed_ms, 0);
    zf_master_job_run(c->m, id, &cj.job);
    ASSERT_OK(zf_master_job_poll(c->m, id, &p)); /* polling does not collect */
    ASSERT_OK(zf_master_job_poll(c->m, id, &p));
    assert_int_equal(p.state, ZF_MASTER_JOB_DONE);
    assert_int_equal(p.steps_done, 5);
    assert_int_equal(p.steps_total, 5);
    assert_true(p.partitions_total >= 1);
    assert_int_equal(p.partitions_running, 0);
    assert_true(p.elapsed_ms >= 0);
    s_expect_count(c, id, 5.0f);
    zf_test_expect_error(zf_master_job_poll(c->m, id, &p), ZF_NOT_FOUND, "already collected");
    free(id);
    zf_graphdef_free(&cj.gd);
    mt_cluster_destroy(c);
}

static void test_master_job_failure_names_the_step_or_the_init_targets(void **state)
{
    (void)state;
    cluster_t *c = mt_cluster(1, 2000);
    zf_test_counter_job_t cj;
    zf_test_counter_job(&cj, 3, NULL); /* counting an uninitialized variable */
    char *id = s_submit_and_run(c, &cj);
    zf_test_job_result_t r = {0};
    ASSERT_OK(zf_master_job_wait(c->m, id, zf_test_on_job_result, &r));
    zf_status_t st = zf_status_from_proto(r.reply->status);
    assert_int_equal(st.code, ZF_FAILED_PRECONDITION);
    assert_non_null(strstr(zf_status_msg(&st), "step 1 of 3: "));
    assert_non_null(strstr(zf_status_msg(&st), "uninitialized value counter"));
    zf_status_clear(&st);
    free(id);
    zf_graphdef_free(&cj.gd);

    zf_test_counter_job(&cj, 2, "no_such_node");
    id = s_submit_and_run(c, &cj);
    ASSERT_OK(zf_master_job_wait(c->m, id, zf_test_on_job_result, &r));
    st = zf_status_from_proto(r.reply->status);
    assert_int_equal(st.code, ZF_INVALID_ARGUMENT);
    assert_true(strncmp(zf_status_msg(&st), "init targets: ", 14) == 0);
    assert_non_null(strstr(zf_status_msg(&st), "no_such_node"));
    zf_status_clear(&st);
    zflow__run_step_reply__free_unpacked(r.reply, NULL);
    free(id);

    cj.job.steps = -1;
    char *bad = NULL;
    zf_test_expect_error(zf_master_job_new(c->m, &cj.job, &bad), ZF_INVALID_ARGUMENT,
                         "steps must be 0 or more, not -1");
    assert_null(bad);
    cj.job.steps = 1;
    cj.job.step->partial_run_setup = true; /* a job's step is a whole step */
    zf_test_expect_error(zf_master_job_new(c->m, &cj.job, &bad), ZF_INVALID_ARGUMENT,
                         "a job's step cannot be a partial run");
    cj.job.step->partial_run_setup = false;
    cj.job.step->partial_run_handle = "prun-0000000000000001";
    zf_test_expect_error(zf_master_job_new(c->m, &cj.job, &bad), ZF_INVALID_ARGUMENT,
                         "a job's step cannot be a partial run");
    cj.job.step->partial_run_handle = NULL;
    assert_null(bad);
    zf_graphdef_free(&cj.gd);
    mt_cluster_destroy(c);
}

static void test_master_job_keeps_at_most_max_results_dropping_the_oldest(void **state)
{
    (void)state;
    cluster_t *c = mt_cluster(1, 2000);
    zf_master_set_job_retention(c->m, 2, 0);
    zf_test_counter_job_t cj;
    zf_test_counter_job(&cj, 1, "init");
    char *ids[3];
    for (int i = 0; i < 3; i++) ids[i] = s_submit_and_run(c, &cj);
    zf_test_job_result_t r = {0};
    zf_status_t st = zf_master_job_wait(c->m, ids[0], zf_test_on_job_result, &r);
    assert_int_equal(st.code, ZF_NOT_FOUND);
    assert_non_null(strstr(zf_status_msg(&st), ids[0]));
    assert_non_null(strstr(zf_status_msg(&st), "expired"));
    assert_non_null(strstr(zf_status_msg(&st), "at most 2 of them"));
    zf_status_clear(&st);
    assert_int_equal(r.calls, 0);
    s_expect_count(c, ids[1], 1.0f);
    s_expect_count(c, ids[2], 1.0f);
    for (int i = 0; i < 3; i++) free(ids[i]);
    zf_graphdef_free(&cj.gd);
    mt_cluster_destroy(c);
}

static void test_master_job_results_expire_after_their_age(void **state)
{
    (void)state;
    cluster_t *c = mt_cluster(1, 2000);
    zf_master_set_job_retention(c->m, 0, 300);
    zf_test_counter_job_t cj;
    zf_test_counter_job(&cj, 1, "init");
    char *id = s_submit_and_run(c, &cj);
    zf_master_job_progress_t p;
    ASSERT_OK(zf_master_job_poll(c->m, id, &p)); /* kept at first */
    assert_int_equal(p.state, ZF_MASTER_JOB_DONE);
    usleep(600 * 1000);
    zf_test_expect_error(zf_master_job_poll(c->m, id, &p), ZF_NOT_FOUND, "expired");
    assert_int_equal(p.state, 0);
    free(id);
    zf_graphdef_free(&cj.gd);
    mt_cluster_destroy(c);
}

/* A waiter past its timeout is answered DEADLINE_EXCEEDED (unfinished) at
 * a tick; the job goes on and a later waiter collects its result. */
static void test_master_job_waiter_times_out_and_the_result_stays(void **state)
{
    (void)state;
    cluster_t *c = mt_cluster(1, 2000);
    zf_test_counter_job_t cj;
    zf_test_counter_job(&cj, 2, "init");
    char *id = NULL;
    ASSERT_OK(zf_master_job_new(c->m, &cj.job, &id));
    zf_test_job_result_t late = {0};
    ASSERT_OK(zf_master_job_wait_for(c->m, id, 30, zf_test_on_job_result, &late));
    zf_master_jobs_tick(c->m);
    assert_int_equal(late.calls, 0);
    usleep(120 * 1000);
    zf_master_jobs_tick(c->m);
    assert_int_equal(late.calls, 1);
    assert_true(late.reply->unfinished);
    zf_status_t st = zf_status_from_proto(late.reply->status);
    assert_int_equal(st.code, ZF_DEADLINE_EXCEEDED);
    assert_non_null(strstr(zf_status_msg(&st), "has not finished within 30 ms (0 of 2 steps"));
    zf_status_clear(&st);
    zflow__run_step_reply__free_unpacked(late.reply, NULL);
    zf_master_job_run(c->m, id, &cj.job);
    s_expect_count(c, id, 2.0f);
    zf_master_job_progress_t p;
    zf_test_expect_error(zf_master_job_poll(c->m, "job-0-nope", &p), ZF_NOT_FOUND,
                         "job 'job-0-nope' not found");
    free(id);
    zf_graphdef_free(&cj.gd);
    mt_cluster_destroy(c);
}

/* A wait's timeout comes from the wire: an absurd one is no deadline at
 * all, not an overflow. */
static void test_master_job_waiter_with_an_absurd_timeout_just_waits(void **state)
{
    (void)state;
    cluster_t *c = mt_cluster(1, 2000);
    zf_test_counter_job_t cj;
    zf_test_counter_job(&cj, 3, "init");
    char *id = NULL;
    ASSERT_OK(zf_master_job_new(c->m, &cj.job, &id));
    zf_test_job_result_t r = {0};
    ASSERT_OK(zf_master_job_wait_for(c->m, id, INT64_MAX, zf_test_on_job_result, &r));
    zf_master_jobs_tick(c->m);
    assert_int_equal(r.calls, 0);
    zf_master_job_run(c->m, id, &cj.job);
    assert_int_equal(r.calls, 1);
    ASSERT_OK(zf_status_from_proto(r.reply->status));
    assert_false(r.reply->unfinished);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_proto(r.reply->fetches[0]->tensor, &t));
    assert_true(*(const float *)zf_tensor_data(t) == 3.0f);
    zf_tensor_unref(&t);
    zflow__run_step_reply__free_unpacked(r.reply, NULL);
    free(id);
    zf_graphdef_free(&cj.gd);
    mt_cluster_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_job_runs_its_step_n_times_after_its_init_targets),
        cmocka_unit_test(test_master_job_failure_names_the_step_or_the_init_targets),
        cmocka_unit_test(test_master_job_keeps_at_most_max_results_dropping_the_oldest),
        cmocka_unit_test(test_master_job_results_expire_after_their_age),
        cmocka_unit_test(test_master_job_waiter_times_out_and_the_result_stays),
        cmocka_unit_test(test_master_job_waiter_with_an_absurd_timeout_just_waits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
