/* The broker's durable record of accepted jobs (docs/service.md, "Jobs:
 * submit, poll, wait"): each job's request, its state, the scheduler it was
 * handed to, its attempts and, once it ended, its result until that is
 * collected or expires.
 *
 * Design notes
 * - One SQLite database, jobs.db, in the state directory, in WAL mode. A
 *   commit that records an accepted job (zf_job_store_put) is synchronous
 *   (synchronous=FULL): once it returns, the job survives the broker's
 *   death and the machine's. Commits that only move jobs along (dispatched,
 *   queued again, finished, deleted) are synchronous=NORMAL: they survive
 *   the broker's death, and a power loss can only take back the last of
 *   them (a job runs again, a collected result comes back until it
 *   expires). The database is opened with an exclusive lock, so a second
 *   broker on the same directory is refused at its start rather than both
 *   running the same jobs.
 * - Writes between zf_job_store_begin() and zf_job_store_commit() are one
 *   transaction, so that a broker round with many submits pays one commit;
 *   outside of them each write commits on its own.
 * - Requests and results are stored as opaque bytes (the SubmitJob
 *   envelope as decoded and packed again, the RunStepReply); this layer
 *   never decodes them, and its callers check them as any peer's input. A
 *   large SubmitJob's request is not in its row: its bytes, as they came,
 *   are kept apart by broker/job_blobs.h, written on a thread of their own.
 * - The interface names no SQLite type, so another database can serve it.
 *
 * Thread-safety: none; one thread (the broker's) uses a store. */
#ifndef ZF_BROKER_JOB_STORE_H
#define ZF_BROKER_JOB_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

typedef struct zf_job_store zf_job_store_t;

typedef enum zf_job_store_state {
    ZF_JOB_STORE_QUEUED = 1,     /* accepted, not handed to a scheduler */
    ZF_JOB_STORE_DISPATCHED = 2, /* handed to a scheduler (record.scheduler) */
    ZF_JOB_STORE_DONE = 3,       /* ended; its result waits to be collected */
} zf_job_store_state_t;

/* The bounds of a stored job's numbers: a row past one is no job the
 * broker wrote (zf_job_store_list skips it). A seq far past any count of
 * jobs, so that the next is seq + 1 without overflow; the most steps a
 * broker may accept (zflow-broker --max-job-steps); attempts far past
 * any --max-attempts, so that one more cannot overflow; an end at most a
 * day ahead of this machine's clock. */
#define ZF_JOB_STORE_MAX_SEQ      (INT64_C(1) << 53)
#define ZF_JOB_STORE_MAX_STEPS    INT64_C(1000000000000)
#define ZF_JOB_STORE_MAX_ATTEMPTS 100000000
#define ZF_JOB_STORE_MAX_AHEAD_MS (INT64_C(24) * 3600 * 1000)

/* A job as listed: everything but the request and result bytes. */
typedef struct zf_job_store_record {
    char id[64];
    int64_t seq; /* order of acceptance, from 1 */
    zf_job_store_state_t state;
    char scheduler[32]; /* the scheduler id it went to; "" when none */
    int attempts;       /* times it was handed to a scheduler */
    int64_t steps;      /* runs of its step (informational; 0: not recorded) */
    int64_t ended_ms;   /* wall clock (ms since the epoch) once done; else 0 */
    bool request_apart; /* not done, and stored without its request (job_blobs.h) */
} zf_job_store_record_t;

/* The file a store keeps in its directory. */
#define ZF_JOB_STORE_FILE "jobs.db"
/* The directory that zf_job_store_open takes for a store in memory only. */
#define ZF_JOB_STORE_MEMORY ":memory:"

/* Opens (making it and the directory when missing) dir/jobs.db, or a store
 * in memory for ZF_JOB_STORE_MEMORY. Caller owns *out. Errors:
 * FAILED_PRECONDITION for a directory that cannot be made or written, a
 * file that is not a job database (or of another layout), or one another
 * broker holds; DATA_LOSS for a corrupt one; each names the path. */
zf_status_t zf_job_store_open(const char *dir, zf_job_store_t **out);

/* Makes directory dir and its missing parents (mode 0700), for the store
 * and what is kept beside it (job_blobs.h), and checks that it is a
 * directory this process can write. FAILED_PRECONDITION naming the path
 * when it cannot be made, is no directory or is not writable;
 * INVALID_ARGUMENT for a path too long. */
zf_status_t zf_job_store_make_dir(const char *dir);

/* Closes; NULL-safe; sets *s_p to NULL. An open transaction is rolled back. */
void zf_job_store_close(zf_job_store_t **s_p);

/* The database's path ("dir/jobs.db", or ":memory:"). Borrowed. */
const char *zf_job_store_path(const zf_job_store_t *s);

/* Starts a transaction (a no-op when one is open) and commits it. A failed
 * commit rolls back and is returned: nothing written since begin is kept. */
zf_status_t zf_job_store_begin(zf_job_store_t *s);
zf_status_t zf_job_store_commit(zf_job_store_t *s);

/* Records an accepted job, QUEUED, with its request bytes, or without them
 * (request NULL) when its request is kept apart (broker/job_blobs.h).
 * ALREADY_EXISTS for an id already stored. */
zf_status_t zf_job_store_put(zf_job_store_t *s, const char *id, int64_t seq, int64_t steps,
                             const void *request, size_t len);

/* The job was handed to scheduler, its attempts-th time. */
zf_status_t zf_job_store_dispatched(zf_job_store_t *s, const char *id, const char *scheduler,
                                    int attempts);

/* The job is QUEUED again (its scheduler is gone or refused it for now),
 * with attempts so far. */
zf_status_t zf_job_store_requeued(zf_job_store_t *s, const char *id, int attempts);

/* The job ended at ended_ms (wall clock) with result bytes. */
zf_status_t zf_job_store_finished(zf_job_store_t *s, const char *id, const void *result, size_t len,
                                  int64_t ended_ms, int attempts);

/* Every stored job, oldest first, into *out (n of them; caller frees *out).
 * A row that cannot be read as a job is skipped, counted in *bad (may be
 * NULL) and logged (warn) saying which row and why: an id that is not 1
 * to 63 characters without a NUL, a state none of the three, a seq not
 * from 1 to ZF_JOB_STORE_MAX_SEQ, steps not from 0 to
 * ZF_JOB_STORE_MAX_STEPS, attempts not from 0 to
 * ZF_JOB_STORE_MAX_ATTEMPTS, a scheduler id too long, or (done) an end
 * before the epoch or more than ZF_JOB_STORE_MAX_AHEAD_MS ahead. */
zf_status_t zf_job_store_list(zf_job_store_t *s, zf_job_store_record_t **out, size_t *n,
                              size_t *bad);

/* The job's request or result bytes into *out (caller frees), *len.
 * NOT_FOUND for an unknown job or one without a result. */
zf_status_t zf_job_store_request(zf_job_store_t *s, const char *id, void **out, size_t *len);
zf_status_t zf_job_store_result(zf_job_store_t *s, const char *id, void **out, size_t *len);

/* Forgets a job (collected or expired); unknown ids are not an error. */
zf_status_t zf_job_store_delete(zf_job_store_t *s, const char *id);

#endif
