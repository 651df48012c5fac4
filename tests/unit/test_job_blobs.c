/* Tests for the job store's large requests (broker/job_blobs.h) on their
 * own: a body kept in a state directory or in memory comes back as an
 * envelope that decodes to it under the request id asked for, is gone once
 * deleted, and what a bad id, a missing body or a sweep does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "broker/job_blobs.h"
#include "broker_test_util.h"
#include "test_util.h"

typedef struct {
    char dir[64];
    zf_zctx_t *ctx;
} fixture_t;

static int s_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    zf_test_state_dir(f->dir, sizeof f->dir);
    ASSERT_OK(zf_zctx_new(&f->ctx));
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    zf_zctx_destroy(&f->ctx);
    zf_test_state_dir_remove(f->dir);
    free(f);
    return 0;
}

/* Hands t over and waits for it to come back done (caller frees). */
static zf_job_blob_task_t *s_do(zf_job_blobs_t *bl, zf_job_blob_task_t *t)
{
    ASSERT_OK(zf_job_blobs_submit(bl, &t));
    assert_null(t);
    zmq_pollitem_t item = {zf_job_blobs_socket(bl), 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&item, 1, 10000), 1);
    zf_job_blob_task_t *done = zf_job_blobs_next(bl);
    assert_non_null(done);
    return done;
}

/* A SubmitJob with steps and one init target name of pad bytes, packed
 * between `before` and `after` junk bytes in a frame; *off and *len say
 * where it lies. */
static void s_frame(zmq_msg_t *frame, int64_t steps, size_t pad, size_t *off, size_t *len)
{
    char *target = malloc(pad + 1);
    assert_non_null(target);
    for (size_t i = 0; i < pad; i++) target[i] = (char)('a' + i % 26);
    target[pad] = '\0';
    Zflow__SubmitJob sj = ZFLOW__SUBMIT_JOB__INIT;
    sj.steps = steps;
    sj.n_init_targets = 1;
    sj.init_targets = &target;
    *off = 5;
    *len = zflow__submit_job__get_packed_size(&sj);
    assert_int_equal(zmq_msg_init_size(frame, *off + *len + 3), 0);
    uint8_t *p = zmq_msg_data(frame);
    memset(p, 0xee, zmq_msg_size(frame));
    assert_int_equal(zflow__submit_job__pack(&sj, p + *off), *len);
    free(target);
}

/* Load id as request_id: the envelope must decode to that id and a
 * SubmitJob of steps whose one init target has pad bytes. */
static void s_expect_load(zf_job_blobs_t *bl, const char *id, uint64_t request_id, int64_t steps,
                          size_t pad)
{
    zf_job_blob_task_t *t = zf_job_blob_task_new(ZF_JOB_BLOB_LOAD, id);
    assert_non_null(t);
    t->request_id = request_id;
    t = s_do(bl, t);
    ASSERT_OK(t->status);
    Zflow__Envelope *env = NULL;
    uint64_t got_id = 0;
    ASSERT_OK(zf_envelope_decode(zmq_msg_data(&t->bytes), zmq_msg_size(&t->bytes), &env, &got_id));
    assert_true(got_id == request_id);
    assert_int_equal(env->body_case, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB);
    assert_int_equal(env->submit_job->steps, steps);
    assert_int_equal(env->submit_job->n_init_targets, 1);
    const char *target = env->submit_job->init_targets[0];
    assert_int_equal(strlen(target), pad);
    for (size_t i = 0; i < pad; i++) assert_int_equal(target[i], 'a' + i % 26);
    zflow__envelope__free_unpacked(env, NULL);
    zf_job_blob_task_free(&t);
}

static void s_expect_load_error(zf_job_blobs_t *bl, const char *id, int code, const char *text)
{
    zf_job_blob_task_t *t = s_do(bl, zf_job_blob_task_new(ZF_JOB_BLOB_LOAD, id));
    zf_test_expect_error(t->status, (zf_code_t)code, text);
    t->status = ZF_STATUS_OK;
    zf_job_blob_task_free(&t);
}

static void s_put(zf_job_blobs_t *bl, const char *id, int64_t steps, size_t pad)
{
    zf_job_blob_task_t *t = zf_job_blob_task_new(ZF_JOB_BLOB_PUT, id);
    assert_non_null(t);
    s_frame(&t->bytes, steps, pad, &t->off, &t->len);
    t = s_do(bl, t);
    ASSERT_OK(t->status);
    assert_int_equal(zmq_msg_size(&t->bytes), 0); /* the frame is let go */
    zf_job_blob_task_free(&t);
}

static void s_delete(zf_job_blobs_t *bl, const char *id)
{
    zf_job_blob_task_t *t = s_do(bl, zf_job_blob_task_new(ZF_JOB_BLOB_DELETE, id));
    ASSERT_OK(t->status);
    zf_job_blob_task_free(&t);
}

/* Puts, loads (twice, under two request ids: the body is kept), deletes. */
static void s_round_trip(zf_job_blobs_t *bl)
{
    size_t pad = (size_t)3 << 20; /* a length of 3 bytes as a varint */
    s_put(bl, "job-1-0000abcd", 7, pad);
    s_put(bl, "job-2-0000abcd", -2, 1);
    s_expect_load(bl, "job-1-0000abcd", 1, 7, pad);
    s_expect_load(bl, "job-1-0000abcd", UINT64_MAX, 7, pad); /* a 10-byte request id */
    s_expect_load(bl, "job-2-0000abcd", 300, -2, 1);
    s_delete(bl, "job-1-0000abcd");
    s_expect_load_error(bl, "job-1-0000abcd", ZF_NOT_FOUND, "job-1-0000abcd");
    s_delete(bl, "job-1-0000abcd"); /* gone already: not an error */
    s_expect_load(bl, "job-2-0000abcd", 3, -2, 1);
    s_expect_load_error(bl, "../jobs.db", ZF_INVALID_ARGUMENT,
                        "'../jobs.db' cannot name a request");
}

static void test_job_blobs_keep_load_and_delete_bodies_in_a_state_directory(void **state)
{
    fixture_t *f = *state;
    zf_job_blobs_t *bl = NULL;
    ASSERT_OK(zf_job_blobs_new(f->ctx, f->dir, &bl));
    s_round_trip(bl);
    char path[128];
    snprintf(path, sizeof path, "%s/requests/job-2-0000abcd", f->dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0); /* a file of its SubmitJob's bytes */
    zf_job_blobs_destroy(&bl);
    assert_null(bl);
}

static void test_job_blobs_keep_load_and_delete_bodies_in_memory(void **state)
{
    fixture_t *f = *state;
    zf_job_blobs_t *bl = NULL;
    ASSERT_OK(zf_job_blobs_new(f->ctx, NULL, &bl));
    s_round_trip(bl);
    zf_job_blobs_destroy(&bl); /* frees the body left */
}

/* With a plain file at `file`, zf_job_blobs_new on dir is refused
 * FAILED_PRECONDITION saying want; the file is removed again. */
static void s_expect_new_error(fixture_t *f, const char *dir, const char *file, const char *want)
{
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    zf_job_blobs_t *bl = NULL;
    zf_test_expect_error(zf_job_blobs_new(f->ctx, dir, &bl), ZF_FAILED_PRECONDITION, want);
    assert_null(bl);
    assert_int_equal(unlink(file), 0);
}

/* The state directory is made as the job store makes it (its missing
 * parents too), and one that cannot be is refused naming the path. */
static void test_job_blobs_make_their_directory_as_the_store_does(void **state)
{
    fixture_t *f = *state;
    char deep[128], path[160], want[400];
    snprintf(deep, sizeof deep, "%s/a/b", f->dir); /* neither a nor b is there */
    zf_job_blobs_t *bl = NULL;
    ASSERT_OK(zf_job_blobs_new(f->ctx, deep, &bl));
    zf_job_blobs_destroy(&bl);
    snprintf(path, sizeof path, "%s/requests", deep);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(rmdir(path), 0);
    /* requests/ a file: no directory */
    snprintf(want, sizeof want, "state directory %s is not a directory", path);
    s_expect_new_error(f, deep, path, want);
    /* its parent a file: it cannot be made */
    assert_int_equal(rmdir(deep), 0);
    snprintf(want, sizeof want, "cannot make state directory %s/requests: Not a directory", deep);
    s_expect_new_error(f, deep, deep, want);
    snprintf(path, sizeof path, "%s/a", f->dir);
    assert_int_equal(rmdir(path), 0);
}

static bool s_keep_job_1(void *arg, const char *id)
{
    (*(int *)arg)++;
    return strcmp(id, "job-1") == 0;
}

static void test_job_blobs_sweep_removes_bodies_of_no_job_and_unfinished_writes(void **state)
{
    fixture_t *f = *state;
    zf_job_blobs_t *bl = NULL;
    ASSERT_OK(zf_job_blobs_new(f->ctx, f->dir, &bl)); /* makes requests/ */
    zf_job_blobs_destroy(&bl);
    const char *names[] = {"job-1", "job-2", "job-3.tmp", "not a job", "job-1.tmp"};
    for (size_t i = 0; i < 5; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/requests/%s", f->dir, names[i]);
        FILE *fp = fopen(path, "w");
        assert_non_null(fp);
        fclose(fp);
    }
    int asked = 0;
    assert_int_equal(zf_job_blobs_sweep(f->dir, s_keep_job_1, &asked), 3);
    assert_int_equal(asked, 2); /* job-1 and job-2; writes that did not finish go unasked */
    const bool left[] = {true, false, false, true, false}; /* a name no job has is not ours */
    for (size_t i = 0; i < 5; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/requests/%s", f->dir, names[i]);
        struct stat sb;
        assert_int_equal(stat(path, &sb) == 0, left[i]);
        if (left[i]) unlink(path);
    }
    assert_int_equal(zf_job_blobs_sweep("/nonexistent/zflow", s_keep_job_1, &asked), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, s_setup, s_teardown)
        T(test_job_blobs_keep_load_and_delete_bodies_in_a_state_directory),
        T(test_job_blobs_keep_load_and_delete_bodies_in_memory),
        T(test_job_blobs_make_their_directory_as_the_store_does),
        T(test_job_blobs_sweep_removes_bodies_of_no_job_and_unfinished_writes),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
