/* Tests for the broker's job store (broker/job_store.h) on its own: every
 * operation, what survives a reopen, and what a bad database does (a clear
 * error naming it, never a crash). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <unistd.h>

#include "broker/job_store.h"
#include "broker_test_util.h"
#include "test_util.h"

typedef struct {
    char dir[64];
    char db[96];
} fixture_t;

static int s_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    zf_test_state_dir(f->dir, sizeof f->dir);
    snprintf(f->db, sizeof f->db, "%s/%s", f->dir, ZF_JOB_STORE_FILE);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    fixture_t *f = *state;
    zf_test_state_dir_remove(f->dir);
    free(f);
    return 0;
}

/* The store lists n jobs. */
static void s_expect_count(zf_job_store_t *s, size_t n)
{
    zf_job_store_record_t *r = NULL;
    size_t got = 99;
    ASSERT_OK(zf_job_store_list(s, &r, &got, NULL));
    assert_int_equal(got, n);
    free(r);
}

/* The request (or result) of job id is want. */
static void s_expect_blob(zf_job_store_t *s, bool result, const char *id, const char *want)
{
    void *got = NULL;
    size_t len = 0;
    ASSERT_OK(result ? zf_job_store_result(s, id, &got, &len)
                     : zf_job_store_request(s, id, &got, &len));
    assert_int_equal(len, strlen(want));
    assert_memory_equal(got, want, len);
    free(got);
}

static void test_job_store_keeps_jobs_through_every_state_and_a_reopen(void **state)
{
    fixture_t *f = *state;
    zf_job_store_t *s = NULL;
    ASSERT_OK(zf_job_store_open(f->dir, &s));
    assert_string_equal(zf_job_store_path(s), f->db);
    ASSERT_OK(zf_job_store_put(s, "job-1", 1, 5, "req-1", 5));
    ASSERT_OK(zf_job_store_begin(s)); /* three writes, one commit */
    ASSERT_OK(zf_job_store_put(s, "job-2", 2, 1, "req-2", 5));
    ASSERT_OK(zf_job_store_put(s, "job-3", 3, 1, "", 0));
    ASSERT_OK(zf_job_store_dispatched(s, "job-2", "aaaa0001", 1));
    ASSERT_OK(zf_job_store_commit(s));
    zf_status_t st = zf_job_store_put(s, "job-1", 4, 1, "x", 1);
    assert_int_equal(st.code, ZF_ALREADY_EXISTS);
    zf_status_clear(&st);
    ASSERT_OK(zf_job_store_finished(s, "job-1", "result-1", 8, 1234, 2));
    ASSERT_OK(zf_job_store_dispatched(s, "job-3", "bbbb0002", 1));
    ASSERT_OK(zf_job_store_requeued(s, "job-3", 1));
    zf_job_store_close(&s);
    assert_null(s);

    ASSERT_OK(zf_job_store_open(f->dir, &s));
    zf_job_store_record_t *r = NULL;
    size_t n = 0, bad = 0;
    ASSERT_OK(zf_job_store_list(s, &r, &n, &bad));
    assert_int_equal(n, 3);
    assert_int_equal(bad, 0);
    assert_string_equal(r[0].id, "job-1");
    assert_int_equal(r[0].state, ZF_JOB_STORE_DONE);
    assert_int_equal(r[0].attempts, 2);
    assert_int_equal(r[0].steps, 5);
    assert_int_equal(r[0].ended_ms, 1234);
    assert_string_equal(r[1].id, "job-2");
    assert_int_equal(r[1].state, ZF_JOB_STORE_DISPATCHED);
    assert_string_equal(r[1].scheduler, "aaaa0001");
    assert_int_equal(r[1].attempts, 1);
    assert_int_equal(r[2].state, ZF_JOB_STORE_QUEUED);
    assert_string_equal(r[2].scheduler, "");
    assert_int_equal(r[2].seq, 3);
    free(r);
    void *blob = NULL;
    size_t len = 0;
    s_expect_blob(s, true, "job-1", "result-1");
    s_expect_blob(s, false, "job-2", "req-2");
    s_expect_blob(s, false, "job-3", "");
    st = zf_job_store_result(s, "job-2", &blob, &len); /* not done */
    assert_int_equal(st.code, ZF_NOT_FOUND);
    zf_status_clear(&st);
    st = zf_job_store_request(s, "job-1", &blob, &len); /* dropped once done */
    assert_int_equal(st.code, ZF_NOT_FOUND);
    zf_status_clear(&st);
    ASSERT_OK(zf_job_store_delete(s, "job-1"));
    ASSERT_OK(zf_job_store_delete(s, "job-unknown"));
    s_expect_count(s, 2);
    zf_job_store_close(&s);
}

static void test_job_store_rolls_back_an_uncommitted_transaction_at_close(void **state)
{
    fixture_t *f = *state;
    zf_job_store_t *s = NULL;
    ASSERT_OK(zf_job_store_open(f->dir, &s));
    ASSERT_OK(zf_job_store_begin(s));
    ASSERT_OK(zf_job_store_put(s, "job-1", 1, 1, "r", 1));
    zf_job_store_close(&s);
    ASSERT_OK(zf_job_store_open(f->dir, &s));
    s_expect_count(s, 0);
    zf_job_store_close(&s);
}

/* A transaction that moves a job along and then records one (its commit
 * becomes a synchronous one midway) keeps both. */
static void test_job_store_keeps_moves_and_puts_of_one_transaction(void **state)
{
    fixture_t *f = *state;
    zf_job_store_t *s = NULL;
    ASSERT_OK(zf_job_store_open(f->dir, &s));
    ASSERT_OK(zf_job_store_put(s, "job-1", 1, 1, "r", 1));
    ASSERT_OK(zf_job_store_begin(s));
    ASSERT_OK(zf_job_store_dispatched(s, "job-1", "aaaa0001", 1));
    ASSERT_OK(zf_job_store_put(s, "job-2", 2, 1, "r", 1));
    ASSERT_OK(zf_job_store_finished(s, "job-1", "done", 4, 5, 1));
    ASSERT_OK(zf_job_store_commit(s));
    ASSERT_OK(zf_job_store_begin(s)); /* moves only */
    ASSERT_OK(zf_job_store_dispatched(s, "job-2", "aaaa0001", 1));
    ASSERT_OK(zf_job_store_commit(s));
    zf_job_store_close(&s);
    ASSERT_OK(zf_job_store_open(f->dir, &s));
    zf_job_store_record_t *r = NULL;
    size_t n = 0;
    ASSERT_OK(zf_job_store_list(s, &r, &n, NULL));
    assert_int_equal(n, 2);
    assert_int_equal(r[0].state, ZF_JOB_STORE_DONE);
    assert_int_equal(r[1].state, ZF_JOB_STORE_DISPATCHED);
    free(r);
    s_expect_blob(s, true, "job-1", "done");
    zf_job_store_close(&s);
}

/* Adds rows (SQL) to f's closed store, opens it into *s and lists it. */
static void s_list_with(fixture_t *f, const char *rows, zf_job_store_t **s,
                        zf_job_store_record_t **r, size_t *n, size_t *bad)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, rows, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    ASSERT_OK(zf_job_store_open(f->dir, s));
    ASSERT_OK(zf_job_store_list(*s, r, n, bad));
}

static void test_job_store_skips_and_counts_rows_that_are_no_job(void **state)
{
    fixture_t *f = *state;
    zf_job_store_t *s = NULL;
    ASSERT_OK(zf_job_store_open(f->dir, &s));
    ASSERT_OK(zf_job_store_put(s, "job-1", 1, 1, "r", 1));
    zf_job_store_close(&s);
    const char *rows =
        "INSERT INTO jobs(id, seq, state) VALUES('bad-state', 2, 7);"
        "INSERT INTO jobs(id, seq, state, attempts) VALUES('bad-attempts', 3, 1, -4);"
        "INSERT INTO jobs(id, seq, state) VALUES(x'6a6f62006a6f62', 4, 1);" /* a NUL inside */
        "INSERT INTO jobs(id, seq, state) VALUES('bad-seq', 0, 1);"
        "INSERT INTO jobs(id, seq, state, request) VALUES('job-5', 5, 1, 'text, not a blob');";
    zf_job_store_record_t *r = NULL;
    size_t n = 0, bad = 0;
    s_list_with(f, rows, &s, &r, &n, &bad);
    assert_int_equal(n, 2);
    assert_int_equal(bad, 4);
    assert_string_equal(r[0].id, "job-1");
    assert_string_equal(r[1].id, "job-5");
    free(r);
    void *blob = NULL;
    size_t len = 0;
    zf_status_t st = zf_job_store_request(s, "job-5", &blob, &len); /* a request of another type */
    assert_int_equal(st.code, ZF_NOT_FOUND);
    zf_status_clear(&st);
    zf_job_store_close(&s);
}

/* Numbers past what the broker writes (a seq whose next would overflow,
 * negative or absurd steps and attempts, a state that only truncation
 * would make valid, an end before the epoch or days ahead) make a row no
 * job; the bounds themselves, and steps 0 (the column's default: not
 * recorded), are taken. */
static void test_job_store_skips_rows_with_absurd_numbers(void **state)
{
    fixture_t *f = *state;
    zf_job_store_t *s = NULL;
    ASSERT_OK(zf_job_store_open(f->dir, &s));
    zf_job_store_close(&s);
    const char *rows =
        "INSERT INTO jobs(id, seq, state, steps) VALUES('seq-max', 9007199254740992, 1, 1);"
        "INSERT INTO jobs(id, seq, state, steps) VALUES('seq-over', 9007199254740993, 1, 1);"
        "INSERT INTO jobs(id, seq, state, steps) VALUES('seq-top', 9223372036854775807, 1, 1);"
        "INSERT INTO jobs(id, seq, state, steps) VALUES('steps-neg', 10, 1, -1);"
        "INSERT INTO jobs(id, seq, state, steps) VALUES('steps-zero', 11, 1, 0);"
        "INSERT INTO jobs(id, seq, state, steps) VALUES('steps-max', 12, 1, 1000000000000);"
        "INSERT INTO jobs(id, seq, state, steps) VALUES('steps-over', 13, 1, 1000000000001);"
        "INSERT INTO jobs(id, seq, state, steps, attempts) VALUES('att-over', 14, 1, 1, "
        "100000001);"
        "INSERT INTO jobs(id, seq, state, steps) VALUES('state-wide', 15, 4294967297, 1);"
        "INSERT INTO jobs(id, seq, state, steps, ended_ms) VALUES('ended-neg', 16, 3, 1, -1);"
        "INSERT INTO jobs(id, seq, state, steps, ended_ms) VALUES('ended-ahead', 17, 3, 1, "
        "CAST(strftime('%s', 'now') AS INTEGER) * 1000 + 2 * 86400000);"
        "INSERT INTO jobs(id, seq, state, steps, ended_ms) VALUES('ended-soon', 18, 3, 1, "
        "CAST(strftime('%s', 'now') AS INTEGER) * 1000 + 3600000);"
        "INSERT INTO jobs(id, seq, state, steps, scheduler) VALUES('sched-long', 19, 2, 1, "
        "'0123456789012345678901234567890123456789');";
    zf_job_store_record_t *r = NULL;
    size_t n = 0, bad = 0;
    s_list_with(f, rows, &s, &r, &n, &bad);
    assert_int_equal(bad, 9);
    assert_int_equal(n, 4);
    const char *ids[4] = {"steps-zero", "steps-max", "ended-soon", "seq-max"};
    const int64_t seqs[4] = {11, 12, 18, INT64_C(9007199254740992)};
    const int64_t steps[4] = {0, INT64_C(1000000000000), 1, 1};
    for (size_t k = 0; k < 4; k++) {
        assert_string_equal(r[k].id, ids[k]);
        assert_int_equal(r[k].seq, seqs[k]);
        assert_int_equal(r[k].steps, steps[k]);
    }
    assert_int_equal(r[2].state, ZF_JOB_STORE_DONE);
    free(r);
    zf_job_store_close(&s);
}

/* Opening dir fails with code and a message naming what, or text. */
static void s_expect_open_error(const char *dir, int code, const char *text)
{
    zf_job_store_t *s = NULL;
    zf_status_t st = zf_job_store_open(dir, &s);
    assert_null(s);
    assert_int_equal(st.code, code);
    if (!strstr(zf_status_msg(&st), text))
        fail_msg("'%s' does not say '%s'", zf_status_msg(&st), text);
    zf_status_clear(&st);
}

static void test_job_store_refuses_a_bad_database_with_a_clear_error(void **state)
{
    fixture_t *f = *state;
    FILE *fp = fopen(f->db, "w"); /* not a database */
    assert_non_null(fp);
    for (int i = 0; i < 512; i++) fputs("garbage garbage ", fp);
    fclose(fp);
    s_expect_open_error(f->dir, ZF_DATA_LOSS, f->db);
    unlink(f->db);
    /* a database of another program: a table of that name, another layout */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=42", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    s_expect_open_error(f->dir, ZF_FAILED_PRECONDITION, "has layout version 42");
    unlink(f->db);
    /* a directory that cannot be made, a state "directory" that is a file */
    char path[128];
    snprintf(path, sizeof path, "%s/file", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
    s_expect_open_error(path, ZF_FAILED_PRECONDITION, "is not a directory");
    char below[160];
    snprintf(below, sizeof below, "%s/below", path);
    s_expect_open_error(below, ZF_FAILED_PRECONDITION, "cannot make state directory");
    unlink(path);
    /* a second opener of a store in use */
    zf_job_store_t *s = NULL;
    ASSERT_OK(zf_job_store_open(f->dir, &s));
    s_expect_open_error(f->dir, ZF_FAILED_PRECONDITION, "in use by another broker");
    zf_job_store_close(&s);
    ASSERT_OK(zf_job_store_open(f->dir, &s)); /* free again once closed */
    zf_job_store_close(&s);
}

static void test_job_store_lists_which_jobs_keep_their_request_apart(void **state)
{
    fixture_t *f = *state;
    zf_job_store_t *s = NULL;
    ASSERT_OK(zf_job_store_open(f->dir, &s));
    ASSERT_OK(zf_job_store_put(s, "job-1", 1, 1, NULL, 0)); /* kept apart */
    ASSERT_OK(zf_job_store_put(s, "job-2", 2, 1, "", 0));   /* an empty one is still a request */
    ASSERT_OK(zf_job_store_put(s, "job-3", 3, 1, NULL, 0));
    ASSERT_OK(zf_job_store_dispatched(s, "job-3", "aaaa0001", 1));
    zf_job_store_close(&s);
    ASSERT_OK(zf_job_store_open(f->dir, &s));
    zf_job_store_record_t *r = NULL;
    size_t n = 0;
    ASSERT_OK(zf_job_store_list(s, &r, &n, NULL));
    assert_int_equal(n, 3);
    assert_true(r[0].request_apart);
    assert_false(r[1].request_apart);
    assert_true(r[2].request_apart); /* dispatched, still apart */
    free(r);
    void *blob = NULL;
    size_t len = 0;
    zf_status_t st = zf_job_store_request(s, "job-1", &blob, &len);
    zf_test_expect_error(st, ZF_NOT_FOUND, "job 'job-1' has no stored request");
    s_expect_blob(s, false, "job-2", "");
    ASSERT_OK(zf_job_store_finished(s, "job-1", "r", 1, 5, 1)); /* done: nothing to keep */
    ASSERT_OK(zf_job_store_list(s, &r, &n, NULL));
    assert_false(r[0].request_apart);
    free(r);
    zf_job_store_close(&s);
}

static void test_job_store_in_memory_keeps_nothing(void **state)
{
    (void)state;
    zf_job_store_t *s = NULL;
    ASSERT_OK(zf_job_store_open(ZF_JOB_STORE_MEMORY, &s));
    ASSERT_OK(zf_job_store_put(s, "job-1", 1, 1, "r", 1));
    zf_job_store_close(&s);
    ASSERT_OK(zf_job_store_open(ZF_JOB_STORE_MEMORY, &s));
    s_expect_count(s, 0);
    zf_job_store_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, s_setup, s_teardown)
        T(test_job_store_keeps_jobs_through_every_state_and_a_reopen),
        T(test_job_store_rolls_back_an_uncommitted_transaction_at_close),
        T(test_job_store_keeps_moves_and_puts_of_one_transaction),
        T(test_job_store_skips_and_counts_rows_that_are_no_job),
        T(test_job_store_skips_rows_with_absurd_numbers),
        T(test_job_store_refuses_a_bad_database_with_a_clear_error),
        T(test_job_store_lists_which_jobs_keep_their_request_apart),
        T(test_job_store_in_memory_keeps_nothing),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
