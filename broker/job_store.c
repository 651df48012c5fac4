/* The job store on SQLite (broker/job_store.h). */
#include "broker/job_store.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define S_LAYOUT   1 /* user_version of the layout below */
#define S_BUSY_MS  0 /* another broker's lock is an error at once, not a wait */
#define S_MAX_BLOB (INT_MAX - 1)
#define S_LOG      "broker"

enum {
    S_PUT,
    S_DISPATCHED,
    S_REQUEUED,
    S_FINISHED,
    S_LIST,
    S_REQUEST,
    S_RESULT,
    S_DELETE,
    S_N_STMTS,
};

static const char *const s_sql[S_N_STMTS] = {
    [S_PUT] = "INSERT INTO jobs(id, seq, state, steps, request, attempts) VALUES(?1, ?2, 1, ?3, "
              "?4, 0)",
    [S_DISPATCHED] = "UPDATE jobs SET state = 2, scheduler = ?2, attempts = ?3 WHERE id = ?1",
    [S_REQUEUED] = "UPDATE jobs SET state = 1, scheduler = NULL, attempts = ?2 WHERE id = ?1",
    [S_FINISHED] = "UPDATE jobs SET state = 3, result = ?2, ended_ms = ?3, attempts = ?4, "
                   "request = NULL WHERE id = ?1",
    [S_LIST] = "SELECT id, seq, state, scheduler, attempts, steps, ended_ms, request IS NULL, "
               "rowid FROM jobs ORDER BY seq",
    [S_REQUEST] = "SELECT request FROM jobs WHERE id = ?1",
    [S_RESULT] = "SELECT result FROM jobs WHERE id = ?1 AND state = 3",
    [S_DELETE] = "DELETE FROM jobs WHERE id = ?1",
};

static const char s_schema[] = "CREATE TABLE IF NOT EXISTS jobs("
                               " id TEXT PRIMARY KEY NOT NULL,"
                               " seq INTEGER NOT NULL,"
                               " state INTEGER NOT NULL,"
                               " steps INTEGER NOT NULL DEFAULT 0,"
                               " request BLOB,"
                               " scheduler TEXT,"
                               " attempts INTEGER NOT NULL DEFAULT 0,"
                               " result BLOB,"
                               " ended_ms INTEGER NOT NULL DEFAULT 0);"
                               "CREATE INDEX IF NOT EXISTS jobs_seq ON jobs(seq);";

struct zf_job_store {
    sqlite3 *db;
    sqlite3_stmt *stmts[S_N_STMTS];
    bool in_tx;
    bool file; /* on disk (not :memory:) */
    bool full; /* synchronous=FULL is set */
    char path[PATH_MAX];
};

/* An error of the database at s->path, with SQLite's words. */
static zf_status_t s_error(const zf_job_store_t *s, int rc, const char *doing)
{
    const char *why = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    int prim = rc & 0xff;
    zf_code_t code = prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB ? ZF_DATA_LOSS
                     : prim == SQLITE_NOMEM                          ? ZF_RESOURCE_EXHAUSTED
                     : prim == SQLITE_FULL                           ? ZF_RESOURCE_EXHAUSTED
                                                                     : ZF_FAILED_PRECONDITION;
    if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
        return zf_status_new(code,
                             "job store %s: %s: the database is in use by another broker "
                             "(one broker per state directory)",
                             s->path, doing);
    return zf_status_new(code, "job store %s: %s: %s", s->path, doing, why ? why : "?");
}

static zf_status_t s_exec(zf_job_store_t *s, const char *sql, const char *doing)
{
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? ZF_STATUS_OK : s_error(s, rc, doing);
}

zf_status_t zf_job_store_make_dir(const char *dir)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return zf_invalid_argument("state directory '%.64s...' is too long", dir);
    for (char *p = buf + 1;; p++) { /* mkdir -p: each parent, then dir */
        if (*p && *p != '/') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return zf_status_new(ZF_FAILED_PRECONDITION, "cannot make state directory %s: %s", buf,
                                 strerror(errno));
        if (!c) break;
        *p = c;
    }
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return zf_status_new(ZF_FAILED_PRECONDITION, "state directory %s is not a directory", buf);
    if (access(buf, W_OK | X_OK) != 0)
        return zf_status_new(ZF_FAILED_PRECONDITION, "state directory %s is not writable: %s", buf,
                             strerror(errno));
    return ZF_STATUS_OK;
}

/* The layout: made in a fresh file, checked in an old one. */
static zf_status_t s_setup(zf_job_store_t *s, bool memory)
{
    sqlite3_busy_timeout(s->db, S_BUSY_MS);
    sqlite3_extended_result_codes(s->db, 1);
    if (!memory) {
        /* Exclusive: the lock is taken by the first write below and held
         * until close. WAL with FULL sync: a commit is on disk. */
        ZF_TRY(s_exec(s, "PRAGMA locking_mode=EXCLUSIVE", "setting the locking mode"));
        ZF_TRY(s_exec(s, "PRAGMA journal_mode=WAL", "setting WAL mode"));
        ZF_TRY(s_exec(s, "PRAGMA synchronous=NORMAL", "setting synchronous writes"));
        s->file = true;
    }
    ZF_TRY(s_exec(s, "BEGIN IMMEDIATE", "locking the database"));
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
    int version = -1;
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        version = sqlite3_column_int(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    zf_status_t e = rc == SQLITE_OK ? ZF_STATUS_OK : s_error(s, rc, "reading its layout version");
    if (zf_ok(e) && version != 0 && version != S_LAYOUT)
        e = zf_status_new(ZF_FAILED_PRECONDITION,
                          "job store %s has layout version %d; this broker knows %d", s->path,
                          version, S_LAYOUT);
    if (zf_ok(e)) e = s_exec(s, s_schema, "making its tables");
    if (zf_ok(e) && version == 0) e = s_exec(s, "PRAGMA user_version=1", "setting its version");
    if (zf_ok(e)) e = s_exec(s, "COMMIT", "committing its layout");
    if (!zf_ok(e)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    ZF_TRY(e);
    for (int i = 0; i < S_N_STMTS; i++) {
        rc = sqlite3_prepare_v3(s->db, s_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[i], NULL);
        if (rc != SQLITE_OK) return s_error(s, rc, "preparing its statements");
    }
    return ZF_STATUS_OK;
}

zf_status_t zf_job_store_open(const char *dir, zf_job_store_t **out)
{
    *out = NULL;
    if (!dir || !dir[0]) return zf_invalid_argument("the job store needs a state directory");
    bool memory = strcmp(dir, ZF_JOB_STORE_MEMORY) == 0;
    if (!memory) ZF_TRY(zf_job_store_make_dir(dir));
    zf_job_store_t *s = calloc(1, sizeof *s);
    if (!s) return zf_out_of_memory("the job store");
    if ((memory ? snprintf(s->path, sizeof s->path, "%s", dir)
                : snprintf(s->path, sizeof s->path, "%s/%s", dir, ZF_JOB_STORE_FILE)) >=
        (int)sizeof s->path) {
        free(s);
        return zf_invalid_argument("state directory '%.64s...' is too long", dir);
    }
    int rc = sqlite3_open_v2(
        s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    zf_status_t e = rc == SQLITE_OK ? s_setup(s, memory) : s_error(s, rc, "opening");
    if (!zf_ok(e)) {
        zf_job_store_close(&s);
        return e;
    }
    *out = s;
    return ZF_STATUS_OK;
}

void zf_job_store_close(zf_job_store_t **s_p)
{
    if (!s_p || !*s_p) return;
    zf_job_store_t *s = *s_p;
    *s_p = NULL;
    if (s->in_tx) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    for (int i = 0; i < S_N_STMTS; i++) sqlite3_finalize(s->stmts[i]);
    sqlite3_close(s->db);
    free(s);
}

const char *zf_job_store_path(const zf_job_store_t *s)
{
    return s->path;
}

zf_status_t zf_job_store_begin(zf_job_store_t *s)
{
    if (s->in_tx) return ZF_STATUS_OK;
    ZF_TRY(s_exec(s, "BEGIN IMMEDIATE", "starting a transaction"));
    s->in_tx = true;
    return ZF_STATUS_OK;
}

/* A commit that records accepted jobs is on disk before it returns
 * (synchronous=FULL: the WAL is synced); the others, which only move jobs
 * along, are NORMAL: they survive the process, and a power loss can only
 * take back their last moves (a job runs again, a collected result comes
 * back until it expires). SQLite sets this between transactions only. */
static zf_status_t s_set_sync(zf_job_store_t *s, bool full)
{
    if (!s->file || s->full == full) return ZF_STATUS_OK;
    ZF_TRY(s_exec(s, full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                  "setting the commit's sync"));
    s->full = full;
    return ZF_STATUS_OK;
}

zf_status_t zf_job_store_commit(zf_job_store_t *s)
{
    if (!s->in_tx) return ZF_STATUS_OK;
    s->in_tx = false;
    zf_status_t e = s_exec(s, "COMMIT", "committing");
    if (!zf_ok(e)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    if (zf_ok(e)) e = s_set_sync(s, false);
    return e;
}

/* Readies s for a put: its transaction, if one is open, becomes a
 * synchronous one (what it holds so far is committed first), and a put
 * outside of one commits synchronously on its own. */
static zf_status_t s_ready_put(zf_job_store_t *s)
{
    if (!s->file || s->full) return ZF_STATUS_OK;
    bool tx = s->in_tx;
    if (tx) ZF_TRY(zf_job_store_commit(s));
    ZF_TRY(s_set_sync(s, true));
    return tx ? zf_job_store_begin(s) : ZF_STATUS_OK;
}

/* Runs statement i with its bindings made, to completion; the number of
 * rows it changed into *changed (may be NULL). */
static zf_status_t s_run(zf_job_store_t *s, int i, const char *doing, int *changed)
{
    sqlite3_stmt *st = s->stmts[i];
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE) {
        if ((rc & 0xff) == SQLITE_CONSTRAINT)
            return zf_status_new(ZF_ALREADY_EXISTS, "job store %s: %s: the job is stored already",
                                 s->path, doing);
        return s_error(s, rc, doing);
    }
    if (changed) *changed = sqlite3_changes(s->db);
    return ZF_STATUS_OK;
}

static int s_bind_blob(sqlite3_stmt *st, int k, const void *p, size_t len)
{
    if (!p) return sqlite3_bind_null(st, k);
    if (len > S_MAX_BLOB) return SQLITE_TOOBIG;
    return sqlite3_bind_blob(st, k, len ? p : "", (int)len, SQLITE_TRANSIENT);
}

static zf_status_t s_bound(zf_job_store_t *s, int i, int rc, const char *doing)
{
    if (rc == SQLITE_OK) return ZF_STATUS_OK;
    sqlite3_reset(s->stmts[i]);
    sqlite3_clear_bindings(s->stmts[i]);
    return s_error(s, rc, doing);
}

zf_status_t zf_job_store_put(zf_job_store_t *s, const char *id, int64_t seq, int64_t steps,
                             const void *request, size_t len)
{
    sqlite3_stmt *st = s->stmts[S_PUT];
    int rc = sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 2, seq);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 3, steps);
    if (rc == SQLITE_OK) rc = s_bind_blob(st, 4, request, len);
    ZF_TRY(s_bound(s, S_PUT, rc, "storing a job"));
    zf_status_t e = s_ready_put(s);
    if (!zf_ok(e)) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return e;
    }
    return s_run(s, S_PUT, "storing a job", NULL);
}

zf_status_t zf_job_store_dispatched(zf_job_store_t *s, const char *id, const char *scheduler,
                                    int attempts)
{
    sqlite3_stmt *st = s->stmts[S_DISPATCHED];
    int rc = sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 2, scheduler, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 3, attempts);
    ZF_TRY(s_bound(s, S_DISPATCHED, rc, "marking a job dispatched"));
    return s_run(s, S_DISPATCHED, "marking a job dispatched", NULL);
}

zf_status_t zf_job_store_requeued(zf_job_store_t *s, const char *id, int attempts)
{
    sqlite3_stmt *st = s->stmts[S_REQUEUED];
    int rc = sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 2, attempts);
    ZF_TRY(s_bound(s, S_REQUEUED, rc, "queueing a job again"));
    return s_run(s, S_REQUEUED, "queueing a job again", NULL);
}

zf_status_t zf_job_store_finished(zf_job_store_t *s, const char *id, const void *result, size_t len,
                                  int64_t ended_ms, int attempts)
{
    sqlite3_stmt *st = s->stmts[S_FINISHED];
    int rc = sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = s_bind_blob(st, 2, result, len);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 3, ended_ms);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 4, attempts);
    ZF_TRY(s_bound(s, S_FINISHED, rc, "storing a job's result"));
    return s_run(s, S_FINISHED, "storing a job's result", NULL);
}

/* Reads the listing's current row into r; false for a row that is no job,
 * with why it is not in why. now_ms: the wall clock. */
static bool s_read_row(sqlite3_stmt *st, int64_t now_ms, zf_job_store_record_t *r, char *why,
                       size_t size)
{
    memset(r, 0, sizeof *r);
    const unsigned char *id = sqlite3_column_text(st, 0);
    int id_len = sqlite3_column_bytes(st, 0);
    int64_t seq = sqlite3_column_int64(st, 1), state = sqlite3_column_int64(st, 2);
    const unsigned char *sched = sqlite3_column_text(st, 3);
    int sched_len = sched ? sqlite3_column_bytes(st, 3) : 0;
    int64_t attempts = sqlite3_column_int64(st, 4), steps = sqlite3_column_int64(st, 5);
    int64_t ended_ms = sqlite3_column_int64(st, 6);
    if (!id || id_len < 1 || id_len >= (int)sizeof r->id || (int)strlen((const char *)id) != id_len)
        snprintf(why, size, "its id is not 1 to %zu characters without a NUL", sizeof r->id - 1);
    else if (state < ZF_JOB_STORE_QUEUED || state > ZF_JOB_STORE_DONE)
        snprintf(why, size, "state %" PRId64 " is none of 1 (queued), 2 (dispatched), 3 (done)",
                 state);
    else if (seq < 1 || seq > ZF_JOB_STORE_MAX_SEQ)
        snprintf(why, size, "seq %" PRId64 " is not from 1 to %" PRId64, seq, ZF_JOB_STORE_MAX_SEQ);
    else if (steps < 0 || steps > ZF_JOB_STORE_MAX_STEPS)
        snprintf(why, size, "steps %" PRId64 " is not from 0 to %" PRId64, steps,
                 ZF_JOB_STORE_MAX_STEPS);
    else if (attempts < 0 || attempts > ZF_JOB_STORE_MAX_ATTEMPTS)
        snprintf(why, size, "attempts %" PRId64 " is not from 0 to %d", attempts,
                 ZF_JOB_STORE_MAX_ATTEMPTS);
    else if (sched_len >= (int)sizeof r->scheduler)
        snprintf(why, size, "its scheduler id is %d bytes, more than %zu", sched_len,
                 sizeof r->scheduler - 1);
    else if (state == ZF_JOB_STORE_DONE &&
             (ended_ms < 0 || ended_ms > now_ms + ZF_JOB_STORE_MAX_AHEAD_MS))
        snprintf(why, size,
                 "ended_ms %" PRId64 " is not from 0 to %" PRId64 " (a day past this clock)",
                 ended_ms, now_ms + ZF_JOB_STORE_MAX_AHEAD_MS);
    else
        why[0] = '\0';
    if (why[0]) return false;
    memcpy(r->id, id, (size_t)id_len);
    if (sched) memcpy(r->scheduler, sched, (size_t)sched_len);
    r->seq = seq;
    r->state = (zf_job_store_state_t)state;
    r->attempts = (int)attempts;
    r->steps = steps;
    r->ended_ms = ended_ms;
    r->request_apart = r->state != ZF_JOB_STORE_DONE && sqlite3_column_int(st, 7);
    return true;
}

/* Rows skipped that are logged one by one; the rest are only counted. */
#define S_LOG_BAD 16

zf_status_t zf_job_store_list(zf_job_store_t *s, zf_job_store_record_t **out, size_t *n,
                              size_t *bad)
{
    *out = NULL;
    *n = 0;
    if (bad) *bad = 0;
    sqlite3_stmt *st = s->stmts[S_LIST];
    size_t cap = 0, skipped = 0;
    int rc;
    zf_status_t e = ZF_STATUS_OK;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            size_t c = cap ? cap * 2 : 64;
            zf_job_store_record_t *grown = realloc(*out, c * sizeof *grown);
            if (!grown) {
                e = zf_out_of_memory("the job store's listing");
                break;
            }
            *out = grown;
            cap = c;
        }
        char why[160];
        if (s_read_row(st, now_ms, &(*out)[*n], why, sizeof why)) {
            (*n)++;
            continue;
        }
        if (skipped++ < S_LOG_BAD)
            zf_log_warn(S_LOG, "job store %s: row %" PRId64 " (id '%.63s') is no job: %s; skipped",
                        s->path, (int64_t)sqlite3_column_int64(st, 8),
                        sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "",
                        why);
    }
    if (skipped > S_LOG_BAD)
        zf_log_warn(S_LOG, "job store %s: %zu more rows that are no job skipped", s->path,
                    skipped - S_LOG_BAD);
    if (bad) *bad = skipped;
    if (zf_ok(e) && rc != SQLITE_ROW && rc != SQLITE_DONE) e = s_error(s, rc, "listing jobs");
    sqlite3_reset(st);
    if (!zf_ok(e)) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return e;
}

/* The one blob column of statement i for id. */
static zf_status_t s_blob(zf_job_store_t *s, int i, const char *id, const char *what, void **out,
                          size_t *len)
{
    *out = NULL;
    *len = 0;
    sqlite3_stmt *st = s->stmts[i];
    ZF_TRY(s_bound(s, i, sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT), "reading a job"));
    int rc = sqlite3_step(st);
    zf_status_t e = ZF_STATUS_OK;
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_BLOB) {
        const void *p = sqlite3_column_blob(st, 0); /* before its size, as SQLite asks */
        int n = sqlite3_column_bytes(st, 0);
        *out = malloc(n > 0 ? (size_t)n : 1);
        if (!*out)
            e = zf_out_of_memory("the job store");
        else if (n > 0)
            memcpy(*out, p, (size_t)n);
        *len = (size_t)n;
    } else if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        e = zf_not_found("job store %s: job '%s' has no %s", s->path, id, what);
    } else {
        e = s_error(s, rc, "reading a job");
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return e;
}

zf_status_t zf_job_store_request(zf_job_store_t *s, const char *id, void **out, size_t *len)
{
    return s_blob(s, S_REQUEST, id, "stored request", out, len);
}

zf_status_t zf_job_store_result(zf_job_store_t *s, const char *id, void **out, size_t *len)
{
    return s_blob(s, S_RESULT, id, "result", out, len);
}

zf_status_t zf_job_store_delete(zf_job_store_t *s, const char *id)
{
    ZF_TRY(s_bound(s, S_DELETE, sqlite3_bind_text(s->stmts[S_DELETE], 1, id, -1, SQLITE_TRANSIENT),
                   "forgetting a job"));
    return s_run(s, S_DELETE, "forgetting a job", NULL);
}
