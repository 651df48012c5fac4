/* The broker's durable jobs (docs/service.md, "Jobs: submit, poll, wait"):
 * SubmitJob is recorded in the job store (broker/job_store.h) and answered
 * with the broker's job id once committed; each job is then handed to a
 * scheduler as the broker's own SubmitJob and WaitJob, and its result is
 * stored until a client's WaitJob collects it. A job whose scheduler goes
 * away is handed to another one (or the same once it is back), up to
 * max_attempts times; a broker started on the same store picks up every
 * job not yet collected. A SubmitJob of ZF__BROKER_PASS_RAW_BYTES or more
 * is never decoded here: its bytes are kept as they came by the store's
 * own thread (broker/job_blobs.h), and handed to a scheduler behind a new
 * header built there. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker/broker_internal.h"
#include "broker/job_blobs.h"
#include "broker/job_store.h"
#include "common/graphdef_io.h"
#include "common/log.h"
#include "common/random.h"

#define S_TICK_MS     50    /* how often waiters' deadlines are checked */
#define S_EXPIRE_MS   1000  /* how often old results are looked for */
#define S_RETRY_MS    200   /* a job a scheduler refused for now waits this long */
#define S_WINDOW      1024  /* jobs one scheduler holds at most */
#define S_MAX_JOBS    65536 /* jobs the broker keeps (queued, running, results) */
#define S_MAX_WAITERS 65536 /* WaitJobs waiting, all jobs together */
#define S_LOADS       2     /* large requests read for sending at once (each held whole) */

/* The routing identity the broker's own requests to schedulers carry as
 * their client frame. ZeroMQ's generated identities are 5 bytes and a
 * peer's own may not start with a zero byte, so no client has this one. */
static const char s_self[] = "\0zflow-broker-jobs";
#define S_SELF_LEN (sizeof s_self - 1)

typedef struct s_waiter {
    zf__broker_ident_t client;
    uint64_t request_id;
    int64_t timeout_ms, deadline_ms; /* monotonic deadline; 0: none */
    struct s_waiter *next;
} s_waiter_t;

typedef struct s_job {
    char id[64];
    int64_t seq, steps;
    zf_job_store_state_t state;
    int attempts;
    uint64_t sched;      /* the serial of its scheduler while dispatched */
    char sid[32];        /* that scheduler's id */
    char sched_job[128]; /* the scheduler's id for it, once known */
    uint64_t call;       /* the broker's request about it in flight, 0 when none */
    int64_t started_ms;  /* wall clock, when a scheduler accepted it last */
    int64_t ended_ms;    /* wall clock, once done */
    bool ok;             /* done with an OK status */
    int64_t steps_done;  /* progress last heard from its scheduler */
    int parts_total;
    int64_t retry_at_ms; /* monotonic: not dispatched before */
    bool cancelled;      /* CancelJob came while a scheduler had it */
    char *retried;       /* why it was last run again ("attempt N failed: ..."), or NULL */
    s_waiter_t *waiters;
    struct s_job *next_queued;
    struct s_job *done_prev, *done_next; /* in the results, oldest ended first */
    bool apart;   /* its request is kept apart (job_blobs.h), not in its row */
    bool loading; /* taken off the queue while that request is read to be sent */
} s_job_t;

/* A client's PollJob passed on to the job's scheduler. */
typedef struct s_poll {
    zf__broker_ident_t client;
    uint64_t request_id, call, sched;
    char job[64];
} s_poll_t;

/* A SubmitJob committed at the end of the round, then answered. */
typedef struct s_ack {
    zf__broker_ident_t client;
    uint64_t request_id;
    s_job_t *job;
} s_ack_t;

struct zf__broker_jobs {
    zf_job_store_t *store;
    zf_job_blobs_t *blobs; /* large requests, on a thread of their own */
    int n_storing;         /* large SubmitJobs being written there */
    int n_loading;         /* large requests being read from there */
    zf_strmap_t *by_id;    /* job id -> s_job_t * */
    zf_strmap_t *calls;    /* 8-byte call id -> s_job_t * */
    zf_strmap_t *polls;    /* 8-byte call id -> s_poll_t * */
    s_job_t *q_head, *q_tail;
    s_job_t *done_head, *done_tail; /* the jobs DONE, by ended_ms, the oldest first */
    int64_t next_seq;
    uint64_t next_call;
    int max_attempts;
    int64_t max_steps;
    int keep_results; /* uncollected results kept at most ... */
    int64_t keep_ms;  /* ... and for at most this long after their job ended */
    s_ack_t *acks;
    int n_acks, cap_acks;
    int n_done, n_waiters, n_timed;
    int64_t last_tick_ms, last_expire_ms;
    int64_t hold_until_ms; /* monotonic: nothing is dispatched before (after a restart) */
    int rr;                /* where the next pick starts */
};

static int64_t s_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t s_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool zf__broker_jobs_is_self(const zf__broker_ident_t *id)
{
    return id->len == S_SELF_LEN && memcmp(id->id, s_self, S_SELF_LEN) == 0;
}

bool zf__broker_jobs_serves(Zflow__Envelope__BodyCase body)
{
    return body == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB || body == ZFLOW__ENVELOPE__BODY_WAIT_JOB ||
           body == ZFLOW__ENVELOPE__BODY_POLL_JOB || body == ZFLOW__ENVELOPE__BODY_CANCEL_JOB;
}

/* Opens the round's transaction when none is: the writes of a round are
 * committed together at its end (zf__broker_jobs_round). A failure leaves
 * each write to commit on its own. */
static void s_begin(zf__broker_jobs_t *J)
{
    zf_status_t s = zf_job_store_begin(J->store);
    if (!zf_ok(s)) zf_log_warn(ZF__BROKER_LOG, "%s", zf_status_msg(&s));
    zf_status_clear(&s);
}

/* ---- the in-memory table ----------------------------------------------------------- */

static s_job_t *s_find(zf__broker_jobs_t *J, const char *id)
{
    uintptr_t v = 0;
    return id && zf_strmap_get(J->by_id, id, &v) ? (s_job_t *)v : NULL;
}

static void s_queue_push(zf__broker_jobs_t *J, s_job_t *j, bool front)
{
    j->state = ZF_JOB_STORE_QUEUED;
    j->next_queued = NULL;
    if (!J->q_head) {
        J->q_head = J->q_tail = j;
    } else if (front) {
        j->next_queued = J->q_head;
        J->q_head = j;
    } else {
        J->q_tail->next_queued = j;
        J->q_tail = j;
    }
}

static void s_queue_remove(zf__broker_jobs_t *J, s_job_t *j)
{
    s_job_t *prev = NULL;
    for (s_job_t *q = J->q_head; q; prev = q, q = q->next_queued) {
        if (q != j) continue;
        if (prev)
            prev->next_queued = q->next_queued;
        else
            J->q_head = q->next_queued;
        if (J->q_tail == q) J->q_tail = prev;
        return;
    }
}

/* j, just DONE, joins the results in the order of ended_ms: after those
 * that ended at or before it (at the tail, but for a clock set back or a
 * result taken up from the store out of that order). */
static void s_done_add(zf__broker_jobs_t *J, s_job_t *j)
{
    s_job_t *prev = J->done_tail;
    while (prev && prev->ended_ms > j->ended_ms) prev = prev->done_prev;
    j->done_prev = prev;
    j->done_next = prev ? prev->done_next : J->done_head;
    if (j->done_next)
        j->done_next->done_prev = j;
    else
        J->done_tail = j;
    if (prev)
        prev->done_next = j;
    else
        J->done_head = j;
    J->n_done++;
}

static void s_done_remove(zf__broker_jobs_t *J, s_job_t *j)
{
    if (j->done_prev)
        j->done_prev->done_next = j->done_next;
    else
        J->done_head = j->done_next;
    if (j->done_next)
        j->done_next->done_prev = j->done_prev;
    else
        J->done_tail = j->done_prev;
    j->done_prev = j->done_next = NULL;
    J->n_done--;
}

static void s_call_forget(zf__broker_jobs_t *J, s_job_t *j)
{
    if (j->call) zf_strmap_remove_n(J->calls, (const char *)&j->call, sizeof j->call, NULL);
    j->call = 0;
}

/* A fresh call id for j (its previous one forgotten); 0 when out of memory. */
static uint64_t s_call_new(zf__broker_jobs_t *J, s_job_t *j)
{
    s_call_forget(J, j);
    j->call = ++J->next_call; /* the map's key points at it */
    if (zf_strmap_insert_n(J->calls, (const char *)&j->call, sizeof j->call, (uintptr_t)j, NULL) !=
        0) {
        j->call = 0;
        return 0;
    }
    return j->call;
}

/* Forgets j's request kept apart, when it has one (a file left behind is
 * removed at the next start). */
static void s_blob_drop(zf__broker_jobs_t *J, s_job_t *j)
{
    if (!j->apart) return;
    j->apart = false;
    zf_job_blob_task_t *t = zf_job_blob_task_new(ZF_JOB_BLOB_DELETE, j->id);
    zf_status_t s =
        t ? zf_job_blobs_submit(J->blobs, &t) : zf_out_of_memory("broker: a job store task");
    if (!zf_ok(s))
        zf_log_warn(ZF__BROKER_LOG,
                    "the request of job %s stays in the job store until the broker starts "
                    "again: %s",
                    j->id, zf_status_msg(&s));
    zf_status_clear(&s);
    zf_job_blob_task_free(&t);
}

/* Removes j from memory (not from the store) and frees it; its waiters
 * must have been answered. */
static void s_job_free(zf__broker_jobs_t *J, s_job_t *j)
{
    s_blob_drop(J, j);
    s_call_forget(J, j);
    if (j->state == ZF_JOB_STORE_QUEUED) s_queue_remove(J, j);
    if (j->state == ZF_JOB_STORE_DONE) s_done_remove(J, j);
    for (s_waiter_t *w = j->waiters, *next; w; w = next) {
        next = w->next;
        J->n_waiters--;
        if (w->deadline_ms) J->n_timed--;
        free(w);
    }
    zf_strmap_remove(J->by_id, j->id, NULL);
    free(j->retried);
    free(j);
}

/* Forgets j in the store and in memory; a store error is logged (the
 * record then comes back after a restart, as an uncollected result). */
static void s_job_drop(zf_broker_t *b, s_job_t *j)
{
    zf_status_t s = zf_job_store_delete(b->jobs->store, j->id);
    if (!zf_ok(s)) zf_log_warn(ZF__BROKER_LOG, "%s", zf_status_msg(&s));
    zf_status_clear(&s);
    s_job_free(b->jobs, j);
}

/* The scheduler with this serial, or -1. */
static int s_sched_index(const zf_broker_t *b, uint64_t serial)
{
    for (int i = 0; serial && i < b->n_scheds; i++)
        if (b->scheds[i].serial == serial) return i;
    return -1;
}

/* j leaves its scheduler (done or queued again). */
static void s_leave_sched(zf_broker_t *b, s_job_t *j)
{
    int i = s_sched_index(b, j->sched);
    if (i >= 0) {
        b->scheds[i].outstanding--;
        b->scheds[i].jobs--;
    }
    j->sched = 0;
    j->sched_job[0] = '\0';
    s_call_forget(b->jobs, j);
}

/* ---- replies to clients -------------------------------------------------------------- */

static zf_status_t s_send_result(zf_broker_t *b, const zf__broker_ident_t *to, uint64_t request_id,
                                 Zflow__RunStepReply *r)
{
    Zflow__Envelope env = zf__broker_envelope(request_id);
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY;
    env.run_step_reply = r;
    return zf__broker_send(b, to, &env);
}

static void s_send_submit_reply(zf_broker_t *b, const zf__broker_ident_t *to, uint64_t request_id,
                                zf_status_t *st, const char *id)
{
    Zflow__SubmitJobReply r = ZFLOW__SUBMIT_JOB_REPLY__INIT;
    zf_status_t e = zf_status_to_proto(st, &r.status);
    zf_status_clear(st);
    if (!zf_ok(e)) {
        zf__broker_send_status(b, to, request_id, &e);
        return;
    }
    r.job_id = (char *)(id ? id : "");
    Zflow__Envelope env = zf__broker_envelope(request_id);
    env.body_case = ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY;
    env.submit_job_reply = &r;
    e = zf__broker_send(b, to, &env);
    zf_status_clear(&e);
    if (r.status) zflow__status__free_unpacked(r.status, NULL);
}

/* A RunStepReply carrying st (cleared), allocated as unpack does; NULL
 * when out of memory. */
static Zflow__RunStepReply *s_status_result(zf_status_t *st)
{
    Zflow__RunStepReply *r = malloc(sizeof *r);
    if (r) {
        zflow__run_step_reply__init(r);
        zf_status_t e = zf_status_to_proto(st, &r->status);
        if (!zf_ok(e)) {
            zf_status_clear(&e);
            free(r);
            r = NULL;
        }
    }
    zf_status_clear(st);
    return r;
}

/* The stored result of j (a packed RunStepReply, checked as a peer's
 * message would be) into *bytes and *len (caller frees). */
static zf_status_t s_load_result(zf_broker_t *b, s_job_t *j, void **bytes, size_t *len)
{
    ZF_TRY(zf_job_store_result(b->jobs->store, j->id, bytes, len));
    zf_status_t st = zf_proto_check_wire(&zflow__run_step_reply__descriptor, *bytes, *len);
    if (zf_ok(st)) return st;
    free(*bytes);
    *bytes = NULL;
    zf_status_t e =
        zf_status_new(ZF_DATA_LOSS,
                      "the stored result of job '%s' cannot be read (%zu bytes in "
                      "%s): %s",
                      j->id, *len, zf_job_store_path(b->jobs->store), zf_status_msg(&st));
    zf_status_clear(&st);
    return e;
}

/* Sends a stored result (bytes, a packed RunStepReply) as it is, behind
 * an envelope header of its own. */
static zf_status_t s_send_stored_result(zf_broker_t *b, const zf__broker_ident_t *to,
                                        uint64_t request_id, const void *bytes, size_t len)
{
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    zf_status_t s =
        zf_envelope_frame(&frame, request_id, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY, bytes, len);
    zf_route_t r = zf__broker_route_to(to);
    if (zf_ok(s)) s = zf_envelope_send_packed(b->sock, &r, &frame);
    zmq_msg_close(&frame);
    return s;
}

/* Answers j's waiters with its stored result, sent as it was stored (not
 * unpacked and packed again), or with why it cannot be read; one that got
 * it collects the job. */
static void s_deliver(zf_broker_t *b, s_job_t *j)
{
    if (!j->waiters) return;
    void *bytes = NULL;
    size_t len = 0;
    zf_status_t st = s_load_result(b, j, &bytes, &len);
    Zflow__RunStepReply *r = zf_ok(st) ? NULL : s_status_result(&st);
    bool collected = false;
    for (s_waiter_t *w = j->waiters, *next; w; w = next) {
        next = w->next;
        zf_status_t s = bytes ? s_send_stored_result(b, &w->client, w->request_id, bytes, len)
                        : r   ? s_send_result(b, &w->client, w->request_id, r)
                              : zf_out_of_memory("broker: a job's result");
        collected = collected || zf_ok(s);
        zf_status_clear(&s);
        b->jobs->n_waiters--;
        if (w->deadline_ms) b->jobs->n_timed--;
        free(w);
    }
    j->waiters = NULL;
    free(bytes);
    if (r) zflow__run_step_reply__free_unpacked(r, NULL);
    if (collected) s_job_drop(b, j);
}

/* Drops the uncollected results past their age, and the oldest past the
 * count: each from the head of the results, which are in the order they
 * ended. */
static void s_expire(zf_broker_t *b)
{
    zf__broker_jobs_t *J = b->jobs;
    int64_t wall = s_wall_ms();
    for (s_job_t *oldest; (oldest = J->done_head);) {
        bool old = wall - oldest->ended_ms >= J->keep_ms;
        if (!old && J->n_done <= J->keep_results) break;
        zf_log_info(ZF__BROKER_LOG, "dropped the uncollected result of job %s (%s)", oldest->id,
                    old ? "too old" : "too many results waiting");
        s_job_drop(b, oldest);
    }
}

/* ---- a job's end ----------------------------------------------------------------------- */

/* j ended with r (taken; NULL: out of memory): stored, then given to its
 * waiters. */
static void s_finish(zf_broker_t *b, s_job_t *j, Zflow__RunStepReply *r)
{
    zf__broker_jobs_t *J = b->jobs;
    if (j->state == ZF_JOB_STORE_DISPATCHED) s_leave_sched(b, j);
    if (j->state == ZF_JOB_STORE_QUEUED) s_queue_remove(J, j);
    if (j->loading) { /* its request being read to be sent: the read finds it gone */
        j->loading = false;
        s_call_forget(J, j);
    }
    zf_status_t st = ZF_STATUS_OK;
    if (!r) {
        st = zf_out_of_memory("broker: a job's result");
        r = s_status_result(&st);
    }
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (r) {
        r->attempts = j->attempts;
        j->ok = !r->status || r->status->code == ZF_OK;
        len = zflow__run_step_reply__get_packed_size(r);
        if ((bytes = malloc(len ? len : 1))) zflow__run_step_reply__pack(r, bytes);
        zflow__run_step_reply__free_unpacked(r, NULL);
    }
    j->state = ZF_JOB_STORE_DONE;
    j->ended_ms = s_wall_ms();
    if (j->ok) j->steps_done = j->steps;
    s_done_add(J, j);
    st = bytes ? zf_job_store_finished(J->store, j->id, bytes, len, j->ended_ms, j->attempts)
               : zf_out_of_memory("broker: a job's result");
    free(bytes);
    if (!zf_ok(st)) {
        zf_log_error(ZF__BROKER_LOG, "job %s ended, but its result cannot be stored: %s", j->id,
                     zf_status_msg(&st));
        zf_status_clear(&st);
    }
    /* durable before a reply tells of it (the result to a waiter, DONE to a
     * poll): a broker killed right after must still have it */
    zf_status_t c = zf_job_store_commit(J->store);
    if (zf_ok(c))
        s_blob_drop(J, j); /* its request is no longer needed once its end is recorded */
    else
        j->apart = false; /* kept: after a restart its record may still need it */
    if (!zf_ok(c)) zf_log_error(ZF__BROKER_LOG, "%s", zf_status_msg(&c));
    zf_status_clear(&c);
    s_begin(J);
    zf_log_info(ZF__BROKER_LOG, "job %s done after %d attempt(s)", j->id, j->attempts);
    s_deliver(b, j);
    if (J->n_done > J->keep_results) s_expire(b);
}

static void s_finish_status(zf_broker_t *b, s_job_t *j, zf_status_t st)
{
    s_finish(b, j, s_status_result(&st));
}

static zf_status_t s_cancelled(const s_job_t *j)
{
    return zf_status_new(ZF_CANCELLED, "job %s cancelled: its client cancelled it", j->id);
}

/* j's attempt failed in a way another attempt may not (its scheduler went
 * away, or said UNAVAILABLE): queued again, or ended with why once it has
 * had max_attempts. */
static void s_retry(zf_broker_t *b, s_job_t *j, zf_status_t why)
{
    zf__broker_jobs_t *J = b->jobs;
    if (j->cancelled) { /* its scheduler went away: nothing to run again */
        zf_status_clear(&why);
        s_finish_status(b, j, s_cancelled(j));
        return;
    }
    if (j->attempts >= J->max_attempts) {
        s_finish_status(b, j,
                        zf_status_prefix(why,
                                         "job '%s' failed %d times (--max-attempts %d); the "
                                         "last time",
                                         j->id, j->attempts, J->max_attempts));
        return;
    }
    zf_log_warn(ZF__BROKER_LOG, "job %s: attempt %d failed (%s); it will start again", j->id,
                j->attempts, zf_status_msg(&why));
    size_t n = strlen(zf_status_msg(&why)) + 48;
    free(j->retried);
    if ((j->retried = malloc(n)))
        snprintf(j->retried, n, "attempt %d failed: %s", j->attempts, zf_status_msg(&why));
    zf_status_clear(&why);
    if (j->state == ZF_JOB_STORE_DISPATCHED) s_leave_sched(b, j);
    zf_status_t s = zf_job_store_requeued(J->store, j->id, j->attempts);
    if (!zf_ok(s)) zf_log_warn(ZF__BROKER_LOG, "%s", zf_status_msg(&s));
    zf_status_clear(&s);
    s_queue_push(J, j, false);
}

/* ---- handing jobs to schedulers ------------------------------------------------------- */

/* Sends to scheduler i, as the broker's own client, env or (env NULL)
 * frame, an envelope already packed. */
static zf_status_t s_send_self(zf_broker_t *b, int i, const Zflow__Envelope *env, zmq_msg_t *frame)
{
    zf_route_t r = zf__broker_route_to(&b->scheds[i].id);
    zf_status_t s = zf_route_push(&r, s_self, S_SELF_LEN);
    if (zf_ok(s))
        s = env ? zf_envelope_send(b->sock, &r, env) : zf_envelope_send_packed(b->sock, &r, frame);
    return s;
}

/* Sends env about j to scheduler i as a fresh call; or, env NULL, body
 * (len bytes already packed as an envelope body of that type) behind a
 * header of the call's own. */
static zf_status_t s_call(zf_broker_t *b, int i, s_job_t *j, Zflow__Envelope *env,
                          Zflow__Envelope__BodyCase body, const void *bytes, size_t len)
{
    uint64_t c = s_call_new(b->jobs, j);
    if (!c) return zf_out_of_memory("broker: the job calls");
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    zf_status_t s = ZF_STATUS_OK;
    if (env)
        env->request_id = c;
    else
        s = zf_envelope_frame(&frame, c, body, bytes, len);
    if (zf_ok(s)) s = s_send_self(b, i, env, &frame);
    zmq_msg_close(&frame);
    if (!zf_ok(s)) s_call_forget(b->jobs, j);
    return s;
}

/* The scheduler for the next job: the one holding fewest jobs, under the
 * window, ties round robin; -1 when none can take one. */
static int s_pick(zf_broker_t *b)
{
    int best = -1;
    for (int k = 0; k < b->n_scheds; k++) {
        int i = (b->jobs->rr + k) % b->n_scheds;
        if (b->scheds[i].jobs >= S_WINDOW) continue;
        if (best < 0 || b->scheds[i].jobs < b->scheds[best].jobs) best = i;
    }
    if (best >= 0) b->jobs->rr = best + 1;
    return best;
}

/* j's stored request cannot be read (why): it ends with DATA_LOSS. */
static void s_unreadable(zf_broker_t *b, s_job_t *j, const zf_status_t *why)
{
    s_finish_status(b, j,
                    zf_status_new(ZF_DATA_LOSS, "the stored request of job '%s' cannot be read: %s",
                                  j->id, zf_status_msg(why)));
}

/* j's request went to scheduler i (st: how its sending went). False when i
 * is gone (it was dropped; j is back at the queue's head). */
static bool s_sent(zf_broker_t *b, int i, s_job_t *j, zf_status_t st)
{
    zf__broker_jobs_t *J = b->jobs;
    if (st.code == ZF_UNAVAILABLE) {
        zf_status_clear(&st);
        s_queue_push(J, j, true);
        zf__broker_sched_drop(b, i, "disconnected");
        return false;
    }
    if (!zf_ok(st)) { /* not the scheduler's fault: later */
        zf_log_warn(ZF__BROKER_LOG, "cannot hand job %s to a scheduler: %s", j->id,
                    zf_status_msg(&st));
        zf_status_clear(&st);
        j->retry_at_ms = s_mono_ms() + S_RETRY_MS;
        s_queue_push(J, j, false);
        return true;
    }
    j->state = ZF_JOB_STORE_DISPATCHED;
    j->attempts++;
    j->sched = b->scheds[i].serial;
    snprintf(j->sid, sizeof j->sid, "%s", b->scheds[i].sid);
    b->scheds[i].outstanding++;
    b->scheds[i].jobs++;
    st = zf_job_store_dispatched(J->store, j->id, j->sid, j->attempts);
    if (!zf_ok(st)) zf_log_warn(ZF__BROKER_LOG, "%s", zf_status_msg(&st));
    zf_status_clear(&st);
    return true;
}

/* The SubmitJob of a stored request (an envelope the broker packed,
 * checked as a peer's message would be) into *body and *len, within it. */
static zf_status_t s_stored_submit(const uint8_t *p, size_t n, const uint8_t **body, size_t *len)
{
    ZF_TRY(zf_proto_check_wire(&zflow__envelope__descriptor, p, n));
    const uint8_t *end = p + n;
    uint64_t version = 0;
    int bodies = 0;
    Zflow__Envelope__BodyCase last = ZFLOW__ENVELOPE__BODY__NOT_SET;
    for (zf_proto_field_t f; p < end && zf_proto_next_field(&p, end, &f);) {
        if (f.number == 1 && f.wire == 0) version = f.value;
        if (f.number <= 2 || !f.data ||
            !protobuf_c_message_descriptor_get_field(&zflow__envelope__descriptor, f.number))
            continue;
        bodies++;
        last = (Zflow__Envelope__BodyCase)f.number;
        *body = f.data;
        *len = (size_t)f.value;
    }
    if (version != ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1)
        return zf_status_new(ZF_FAILED_PRECONDITION,
                             "protocol version %" PRIu64 " is not supported (this side speaks %d)",
                             version, ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1);
    if (!bodies) return zf_invalid_argument("it has no body");
    if (bodies > 1) return zf_invalid_argument("it has %d bodies", bodies);
    if (last != ZFLOW__ENVELOPE__BODY_SUBMIT_JOB)
        return zf_invalid_argument("it holds a %s", zf_envelope_case_name(last));
    return ZF_STATUS_OK;
}

/* Hands j, just taken off the queue, to scheduler i: the SubmitJob of its
 * stored envelope, checked, sent as it is behind a header with the
 * broker's request id. False when i is gone (as s_sent). */
static bool s_dispatch(zf_broker_t *b, int i, s_job_t *j)
{
    void *bytes = NULL;
    size_t len = 0, body_len = 0;
    const uint8_t *body = NULL;
    zf_status_t st = zf_job_store_request(b->jobs->store, j->id, &bytes, &len);
    if (zf_ok(st)) st = s_stored_submit(bytes, len, &body, &body_len);
    if (!zf_ok(st)) {
        free(bytes);
        s_unreadable(b, j, &st);
        zf_status_clear(&st);
        return true;
    }
    st = s_call(b, i, j, NULL, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB, body, body_len);
    free(bytes);
    return s_sent(b, i, j, st);
}

/* Starts reading j's request kept apart, just taken off the queue, into
 * the envelope to send (s_on_loaded); j waits for its retry time in the
 * queue when the store's thread cannot take it. */
static void s_load(zf_broker_t *b, s_job_t *j)
{
    zf__broker_jobs_t *J = b->jobs;
    uint64_t c = s_call_new(J, j); /* the envelope's request id */
    zf_job_blob_task_t *t = c ? zf_job_blob_task_new(ZF_JOB_BLOB_LOAD, j->id) : NULL;
    if (t) t->request_id = c;
    zf_status_t st =
        t ? zf_job_blobs_submit(J->blobs, &t) : zf_out_of_memory("broker: a job store task");
    if (!zf_ok(st)) {
        zf_log_warn(ZF__BROKER_LOG, "cannot hand job %s to a scheduler: %s", j->id,
                    zf_status_msg(&st));
        zf_status_clear(&st);
        zf_job_blob_task_free(&t);
        s_call_forget(J, j);
        j->retry_at_ms = s_mono_ms() + S_RETRY_MS;
        s_queue_push(J, j, false);
        return;
    }
    j->loading = true;
    J->n_loading++;
}

/* j's request kept apart is read into an envelope (t done): sent, as it
 * is, to the scheduler with room now, or j goes back to the queue's head
 * when none has. */
static void s_on_loaded(zf_broker_t *b, zf_job_blob_task_t *t)
{
    zf__broker_jobs_t *J = b->jobs;
    J->n_loading--;
    s_job_t *j = s_find(J, t->id);
    if (!j || !j->loading || j->call != t->request_id) return; /* it went meanwhile */
    j->loading = false;
    if (!zf_ok(t->status)) {
        s_call_forget(J, j);
        s_unreadable(b, j, &t->status);
        return;
    }
    int i = s_pick(b);
    if (i < 0) {
        s_call_forget(J, j);
        s_queue_push(J, j, true);
        return;
    }
    zf_status_t st = s_send_self(b, i, NULL, &t->bytes);
    if (!zf_ok(st)) s_call_forget(J, j);
    s_sent(b, i, j, st);
}

/* Hands queued jobs, oldest first, to schedulers with room. */
static void s_dispatch_queued(zf_broker_t *b)
{
    zf__broker_jobs_t *J = b->jobs;
    int64_t now = s_mono_ms();
    if (now < J->hold_until_ms) return;
    s_job_t *later = NULL, *later_tail = NULL; /* waiting for their retry time */
    for (int i; J->q_head && (i = s_pick(b)) >= 0;) {
        s_job_t *j = J->q_head;
        J->q_head = j->next_queued;
        if (!J->q_head) J->q_tail = NULL;
        j->next_queued = NULL;
        if (j->retry_at_ms > now) {
            if (later_tail)
                later_tail->next_queued = j;
            else
                later = j;
            later_tail = j;
            continue;
        }
        j->retry_at_ms = 0;
        if (!j->apart) {
            s_dispatch(b, i, j);
        } else if (J->n_loading < S_LOADS) {
            s_load(b, j);
        } else { /* its turn comes once a request being read is sent */
            s_queue_push(J, j, true);
            break;
        }
    }
    if (later) { /* back in front, in their order */
        later_tail->next_queued = J->q_head;
        if (!J->q_head) J->q_tail = later_tail;
        J->q_head = later;
    }
}

/* ---- client requests ---------------------------------------------------------------- */

/* The job a client asks about: a result past its age is gone even when
 * the periodic sweep (s_expire) has not come round to it yet. */
static s_job_t *s_find_live(zf_broker_t *b, const char *id)
{
    zf__broker_jobs_t *J = b->jobs;
    s_job_t *j = s_find(J, id);
    if (j && j->state == ZF_JOB_STORE_DONE && s_wall_ms() - j->ended_ms >= J->keep_ms) {
        zf_log_info(ZF__BROKER_LOG, "dropped the uncollected result of job %s (too old)", j->id);
        s_job_drop(b, j);
        j = NULL;
    }
    return j;
}

static zf_status_t s_not_found(const zf__broker_jobs_t *J, const char *id)
{
    return zf_not_found("job '%s' not found: it is unknown here, its result was already "
                        "collected, or it expired (results are kept %" PRId64
                        " s, at most %d of them)",
                        id ? id : "", J->keep_ms / 1000, J->keep_results);
}

/* A SubmitJob's checks, from its decoded fields or its peeked ones:
 * whether it names a session graph and a step, and its steps. */
static zf_status_t s_check_submit(const zf__broker_jobs_t *J, bool graph, bool step, int64_t steps)
{
    if (!graph) return zf_invalid_argument("SubmitJob without a session graph");
    if (!step) return zf_invalid_argument("SubmitJob without a step");
    if (steps < 0)
        return zf_invalid_argument("SubmitJob: steps must be 0 or more, not %" PRId64
                                   " (0 runs the step once; this broker accepts at most %" PRId64
                                   " per job (--max-job-steps))",
                                   steps, J->max_steps);
    if (steps > J->max_steps)
        return zf_invalid_argument("SubmitJob asks for %" PRId64 " steps; this broker accepts at "
                                   "most %" PRId64 " per job (--max-job-steps)",
                                   steps, J->max_steps);
    if (zf_strmap_size(J->by_id) + (size_t)J->n_storing >= S_MAX_JOBS)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "SubmitJob refused: the broker already keeps %d jobs (queued, "
                             "running or with results to collect); submit again once some are "
                             "collected",
                             S_MAX_JOBS);
    return ZF_STATUS_OK;
}

/* A new job of steps runs (0: one) with the next id; NULL when out of memory. */
static s_job_t *s_job_new(zf__broker_jobs_t *J, int64_t steps)
{
    s_job_t *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->seq = J->next_seq++;
    j->steps = steps > 0 ? steps : 1;
    snprintf(j->id, sizeof j->id, "job-%" PRId64 "-%08" PRIx64, j->seq,
             zf_random_id() & 0xffffffffu);
    return j;
}

/* Records j with its request bytes (NULL: kept apart) in the store's open
 * transaction and in memory; the client hears its id once the round's
 * commit is done. On failure the client is answered and j freed. */
static void s_record(zf_broker_t *b, const zf__broker_ident_t *client, uint64_t request_id,
                     s_job_t *j, const void *bytes, size_t len)
{
    zf__broker_jobs_t *J = b->jobs;
    zf_status_t st = zf__broker_grow((void **)&J->acks, &J->cap_acks, J->n_acks, sizeof *J->acks);
    if (zf_ok(st)) st = zf_job_store_begin(J->store);
    if (zf_ok(st)) st = zf_job_store_put(J->store, j->id, j->seq, j->steps, bytes, len);
    if (zf_ok(st) && zf_strmap_insert(J->by_id, j->id, (uintptr_t)j, NULL) != 0) {
        zf_status_t d = zf_job_store_delete(J->store, j->id);
        zf_status_clear(&d);
        st = zf_out_of_memory("broker: the job table");
    }
    if (!zf_ok(st)) {
        s_blob_drop(J, j);
        free(j);
        zf_log_warn(ZF__BROKER_LOG, "SubmitJob refused: %s", zf_status_msg(&st));
        s_send_submit_reply(b, client, request_id, &st, NULL);
        return;
    }
    s_queue_push(J, j, false);
    J->acks[J->n_acks++] = (s_ack_t){*client, request_id, j};
}

/* Records env's job, its envelope packed again as the request. */
static void s_on_submit(zf_broker_t *b, const zf__broker_ident_t *client,
                        const Zflow__Envelope *env)
{
    zf__broker_jobs_t *J = b->jobs;
    const Zflow__SubmitJob *req = env->submit_job;
    zf_status_t st = s_check_submit(J, req && req->session && req->session->graph, req && req->step,
                                    req ? req->steps : 0);
    s_job_t *j = NULL;
    uint8_t *bytes = NULL;
    size_t len = zflow__envelope__get_packed_size(env);
    if (zf_ok(st) && (!(j = s_job_new(J, req->steps)) || !(bytes = malloc(len ? len : 1))))
        st = zf_out_of_memory("broker: a job");
    if (!zf_ok(st)) {
        free(j);
        zf_log_warn(ZF__BROKER_LOG, "SubmitJob refused: %s", zf_status_msg(&st));
        s_send_submit_reply(b, client, env->request_id, &st, NULL);
        return;
    }
    zflow__envelope__pack(env, bytes);
    s_record(b, client, env->request_id, j, bytes, len);
    free(bytes);
}

void zf__broker_jobs_on_large_submit(zf_broker_t *b, const zf__broker_ident_t *client,
                                     const zf__broker_msg_t *m)
{
    zf__broker_jobs_t *J = b->jobs;
    zf_status_t st = s_check_submit(J, m->submit.graph, m->submit.step, m->submit.steps);
    s_ack_t *a = zf_ok(st) ? calloc(1, sizeof *a) : NULL;
    zf_job_blob_task_t *t = NULL;
    if (zf_ok(st) && (!a || !(a->job = s_job_new(J, m->submit.steps)) ||
                      !(t = zf_job_blob_task_new(ZF_JOB_BLOB_PUT, a->job->id)) ||
                      zmq_msg_copy(&t->bytes, m->raw) != 0))
        st = zf_out_of_memory("broker: a job");
    if (zf_ok(st)) {
        a->client = *client;
        a->request_id = m->request_id;
        t->off = m->submit.off;
        t->len = m->submit.len;
        t->check = &zflow__submit_job__descriptor; /* on the store's thread, not here */
        t->tag = a;
        st = zf_job_blobs_submit(J->blobs, &t);
    }
    if (!zf_ok(st)) {
        zf_job_blob_task_free(&t);
        if (a) free(a->job);
        free(a);
        zf_log_warn(ZF__BROKER_LOG, "SubmitJob refused: %s", zf_status_msg(&st));
        s_send_submit_reply(b, client, m->request_id, &st, NULL);
        return;
    }
    J->n_storing++;
}

/* A large SubmitJob's bytes are durable (t done): its job is recorded. */
static void s_on_stored(zf_broker_t *b, zf_job_blob_task_t *t)
{
    s_ack_t *a = t->tag;
    b->jobs->n_storing--;
    if (zf_ok(t->status)) {
        a->job->apart = true;
        s_record(b, &a->client, a->request_id, a->job, NULL, 0);
    } else if (t->status.code == ZF_INVALID_ARGUMENT) { /* malformed: nothing was kept */
        zf_status_t st =
            zf_status_new(ZF_INVALID_ARGUMENT, "SubmitJob refused: %s", zf_status_msg(&t->status));
        zf_log_warn(ZF__BROKER_LOG, "%s", zf_status_msg(&st));
        s_send_submit_reply(b, &a->client, a->request_id, &st, NULL);
        free(a->job);
    } else {
        zf_status_t st = zf_status_new(ZF_UNAVAILABLE,
                                       "SubmitJob refused: the broker cannot record it in its "
                                       "job store: %s",
                                       zf_status_msg(&t->status));
        zf_log_warn(ZF__BROKER_LOG, "%s", zf_status_msg(&st));
        s_send_submit_reply(b, &a->client, a->request_id, &st, NULL);
        free(a->job);
    }
    free(a);
}

static void s_on_wait(zf_broker_t *b, const zf__broker_ident_t *client, const Zflow__Envelope *env)
{
    zf__broker_jobs_t *J = b->jobs;
    const Zflow__WaitJob *w = env->wait_job;
    s_job_t *j = s_find_live(b, w ? w->job_id : NULL);
    zf_status_t st = j ? ZF_STATUS_OK : s_not_found(J, w ? w->job_id : NULL);
    if (zf_ok(st) && J->n_waiters >= S_MAX_WAITERS)
        st = zf_status_new(ZF_RESOURCE_EXHAUSTED,
                           "WaitJob refused: %d waits are waiting at the broker already; wait "
                           "again later",
                           J->n_waiters);
    s_waiter_t *wt = zf_ok(st) ? calloc(1, sizeof *wt) : NULL;
    if (zf_ok(st) && !wt) st = zf_out_of_memory("broker: a WaitJob");
    if (!zf_ok(st)) {
        zf__broker_send_status(b, client, env->request_id, &st);
        return;
    }
    int64_t timeout = w->timeout_ms > 0 ? w->timeout_ms : 0;
    *wt = (s_waiter_t){*client, env->request_id, timeout, timeout ? s_mono_ms() + timeout : 0,
                       j->waiters};
    j->waiters = wt;
    J->n_waiters++;
    if (timeout) J->n_timed++;
    if (j->state == ZF_JOB_STORE_DONE) s_deliver(b, j);
}

static void s_send_poll(zf_broker_t *b, const zf__broker_ident_t *to, uint64_t request_id,
                        Zflow__PollJobReply *r)
{
    Zflow__Envelope env = zf__broker_envelope(request_id);
    env.body_case = ZFLOW__ENVELOPE__BODY_POLL_JOB_REPLY;
    env.poll_job_reply = r;
    zf_status_t s = zf__broker_send(b, to, &env);
    zf_status_clear(&s);
}

/* Answers a PollJob from the broker's own record of the job. */
static void s_poll_here(zf_broker_t *b, const zf__broker_ident_t *to, uint64_t request_id,
                        const char *id)
{
    s_job_t *j = s_find_live(b, id);
    if (!j) {
        zf_status_t st = s_not_found(b->jobs, id);
        zf__broker_send_status(b, to, request_id, &st);
        return;
    }
    Zflow__PollJobReply r = ZFLOW__POLL_JOB_REPLY__INIT;
    r.state = j->state == ZF_JOB_STORE_DONE ? ZFLOW__JOB_STATE__JOB_STATE_DONE
              : j->state == ZF_JOB_STORE_DISPATCHED && j->sched_job[0]
                  ? ZFLOW__JOB_STATE__JOB_STATE_RUNNING
                  : ZFLOW__JOB_STATE__JOB_STATE_QUEUED;
    r.steps_total = j->steps;
    r.attempts = j->attempts;
    /* the progress last heard: a job its scheduler no longer reports (it
     * ended there, its result on the way) goes no backwards */
    r.steps_done = j->steps_done;
    if (j->state == ZF_JOB_STORE_DONE) {
        r.partitions_total = j->parts_total;
        if (j->started_ms && j->ended_ms > j->started_ms)
            r.elapsed_ms = j->ended_ms - j->started_ms;
    }
    s_send_poll(b, to, request_id, &r);
}

static void s_on_poll(zf_broker_t *b, const zf__broker_ident_t *client, const Zflow__Envelope *env)
{
    zf__broker_jobs_t *J = b->jobs;
    const char *id = env->poll_job ? env->poll_job->job_id : NULL;
    s_job_t *j = s_find_live(b, id);
    int i = j && j->state == ZF_JOB_STORE_DISPATCHED && j->sched_job[0] ? s_sched_index(b, j->sched)
                                                                        : -1;
    s_poll_t *p = i >= 0 ? calloc(1, sizeof *p) : NULL;
    uint64_t c = p ? ++J->next_call : 0;
    if (p) {
        *p = (s_poll_t){*client, env->request_id, c, j->sched, ""};
        snprintf(p->job, sizeof p->job, "%s", j->id);
    }
    if (!p ||
        zf_strmap_insert_n(J->polls, (const char *)&p->call, sizeof p->call, (uintptr_t)p, NULL)) {
        free(p);
        s_poll_here(b, client, env->request_id, id);
        return;
    }
    Zflow__PollJob pj = ZFLOW__POLL_JOB__INIT;
    pj.job_id = j->sched_job;
    Zflow__Envelope e = zf__broker_envelope(c);
    e.body_case = ZFLOW__ENVELOPE__BODY_POLL_JOB;
    e.poll_job = &pj;
    zf_status_t s = s_send_self(b, i, &e, NULL);
    if (zf_ok(s)) return;
    zf_status_clear(&s);
    zf_strmap_remove_n(J->polls, (const char *)&c, sizeof c, NULL);
    free(p);
    s_poll_here(b, client, env->request_id, id);
}

static void s_send_cancel(zf_broker_t *b, int i, s_job_t *j);

/* CancelJob: a queued job ends at once; one a scheduler has is cancelled
 * there (once it has accepted it), its CANCELLED result coming back as
 * any result does. */
static void s_on_cancel(zf_broker_t *b, const zf__broker_ident_t *client,
                        const Zflow__Envelope *env)
{
    const char *id = env->cancel_job->job_id;
    s_job_t *j = s_find_live(b, id);
    zf_status_t st = j ? ZF_STATUS_OK : s_not_found(b->jobs, id);
    if (j && j->state == ZF_JOB_STORE_DONE) {
        st = zf_status_new(ZF_FAILED_PRECONDITION,
                           "job %s has finished already; its result waits to be collected", j->id);
    } else if (j && j->state == ZF_JOB_STORE_QUEUED) {
        s_finish_status(b, j, s_cancelled(j));
    } else if (j && !j->cancelled) {
        j->cancelled = true;
        int i = j->sched_job[0] ? s_sched_index(b, j->sched) : -1;
        if (i >= 0) s_send_cancel(b, i, j);
    }
    if (j && zf_ok(st)) zf_log_info(ZF__BROKER_LOG, "job %s: cancel asked", id);
    zf__broker_send_status(b, client, env->request_id, &st);
}

void zf__broker_jobs_on_request(zf_broker_t *b, const zf__broker_ident_t *client,
                                const Zflow__Envelope *env)
{
    s_begin(b->jobs);
    if (env->body_case == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB)
        s_on_submit(b, client, env);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_CANCEL_JOB)
        s_on_cancel(b, client, env);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_WAIT_JOB)
        s_on_wait(b, client, env);
    else
        s_on_poll(b, client, env);
}

/* ---- schedulers' replies ---------------------------------------------------------------- */

/* The scheduler's answer to a poll, with the attempts, to the client; an
 * error (the scheduler no longer knows it) is answered from the record. */
static void s_on_poll_reply(zf_broker_t *b, s_poll_t *p, const Zflow__Envelope *env)
{
    Zflow__PollJobReply *r =
        env->body_case == ZFLOW__ENVELOPE__BODY_POLL_JOB_REPLY ? env->poll_job_reply : NULL;
    s_job_t *j = s_find(b->jobs, p->job);
    if (r && (!r->status || r->status->code == ZF_OK) && j && j->state == ZF_JOB_STORE_DISPATCHED) {
        r->attempts = j->attempts;
        j->steps_done = r->steps_done;
        if (r->partitions_total > 0) j->parts_total = r->partitions_total;
        s_send_poll(b, &p->client, p->request_id, r);
    } else {
        s_poll_here(b, &p->client, p->request_id, p->job);
    }
    free(p);
}

static zf_status_t s_reply_status(const Zflow__Envelope *env)
{
    const Zflow__Status *s = NULL;
    if (env->body_case == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY && env->submit_job_reply)
        s = env->submit_job_reply->status;
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_STATUS_REPLY && env->status_reply)
        s = env->status_reply->status;
    else if (env->body_case != ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY)
        return zf_invalid_argument("the scheduler answered a %s", zf_envelope_body_name(env));
    return zf_status_from_proto(s);
}

/* Tells scheduler i to cancel j (accepted there): a message of its own,
 * whose StatusReply, matching no call, is dropped; j's result comes as
 * the answer to the WaitJob in flight. */
static void s_send_cancel(zf_broker_t *b, int i, s_job_t *j)
{
    Zflow__CancelJob cj = ZFLOW__CANCEL_JOB__INIT;
    cj.job_id = j->sched_job;
    Zflow__Envelope e = zf__broker_envelope(0);
    e.body_case = ZFLOW__ENVELOPE__BODY_CANCEL_JOB;
    e.cancel_job = &cj;
    zf_status_t s = s_send_self(b, i, &e, NULL);
    if (!zf_ok(s))
        zf_log_warn(ZF__BROKER_LOG, "cannot pass the cancel of job %s on: %s", j->id,
                    zf_status_msg(&s));
    zf_status_clear(&s);
}

/* The scheduler accepted j (SubmitJobReply): its result is asked for. */
static void s_on_accepted(zf_broker_t *b, int i, s_job_t *j, const char *sched_job)
{
    if (!sched_job || !sched_job[0] || strlen(sched_job) >= sizeof j->sched_job) {
        s_retry(b, j, zf_internal("the scheduler answered SubmitJob with a bad job id"));
        return;
    }
    snprintf(j->sched_job, sizeof j->sched_job, "%s", sched_job);
    if (j->cancelled) s_send_cancel(b, i, j);
    j->started_ms = s_wall_ms();
    j->steps_done = 0;
    Zflow__WaitJob wj = ZFLOW__WAIT_JOB__INIT;
    wj.job_id = j->sched_job;
    Zflow__Envelope e = zf__broker_envelope(0);
    e.body_case = ZFLOW__ENVELOPE__BODY_WAIT_JOB;
    e.wait_job = &wj;
    zf_status_t s = s_call(b, i, j, &e, ZFLOW__ENVELOPE__BODY__NOT_SET, NULL, 0);
    if (s.code == ZF_UNAVAILABLE) {
        zf_status_clear(&s);
        zf__broker_sched_drop(b, i, "disconnected"); /* j goes back to the queue */
    } else if (!zf_ok(s)) {
        s_retry(b, j, s);
    }
}

/* An error that ends j after it was run again says why it was: the
 * attempt before may have failed for a reason (an executor that died) of
 * which this error (its device no longer there) is only the consequence. */
static void s_note_retried(const s_job_t *j, Zflow__RunStepReply *r)
{
    Zflow__Status *st = r->status;
    if (!j->retried || !st || st->code == ZF_OK) return;
    size_t n = strlen(st->message) + strlen(j->retried) + 32;
    char *msg = malloc(n);
    if (!msg) return; /* the error alone, then */
    snprintf(msg, n, "%s (run again after %s)", st->message, j->retried);
    if (st->message != protobuf_c_empty_string) free(st->message);
    st->message = msg;
}

/* A reply to the broker's own SubmitJob or WaitJob for j. */
static void s_on_job_reply(zf_broker_t *b, int i, s_job_t *j, Zflow__Envelope *env)
{
    if (env->body_case == ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY && env->run_step_reply) {
        Zflow__RunStepReply *r = env->run_step_reply;
        zf_status_t st = zf_status_from_proto(r->status);
        if (st.code == ZF_UNAVAILABLE) {
            s_retry(b, j, st);
            return;
        }
        if (st.code == ZF_CANCELLED && j->cancelled) { /* said in the broker's words, its id */
            zf_status_clear(&st);
            s_finish_status(b, j, s_cancelled(j));
            return;
        }
        zf_status_clear(&st);
        env->run_step_reply = NULL;
        env->body_case = ZFLOW__ENVELOPE__BODY__NOT_SET;
        s_note_retried(j, r);
        s_finish(b, j, r);
        return;
    }
    zf_status_t st = s_reply_status(env);
    if (zf_ok(st) && env->body_case == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY) {
        s_on_accepted(b, i, j, env->submit_job_reply->job_id);
        return;
    }
    if (zf_ok(st)) st = zf_internal("the scheduler answered %s", zf_envelope_body_name(env));
    /* A full queue or too many requests in flight pass: try later. A graph
     * past the scheduler's size limits (its --max-graph-nodes or
     * --max-graph-bytes) does not: the job ends with the refusal. */
    bool too_big =
        st.code == ZF_RESOURCE_EXHAUSTED && (strstr(zf_status_msg(&st), "--max-graph-nodes") ||
                                             strstr(zf_status_msg(&st), "--max-graph-bytes"));
    if (st.code == ZF_RESOURCE_EXHAUSTED && !too_big && !j->sched_job[0]) {
        zf_status_clear(&st);
        s_leave_sched(b, j);
        j->attempts--;
        j->retry_at_ms = s_mono_ms() + S_RETRY_MS;
        zf_status_t s = zf_job_store_requeued(b->jobs->store, j->id, j->attempts);
        zf_status_clear(&s);
        s_queue_push(b->jobs, j, false);
    } else if (st.code == ZF_UNAVAILABLE || j->sched_job[0]) {
        s_retry(b, j, st); /* a scheduler that lost it, or is stopping */
    } else {
        s_finish_status(b, j, st); /* the scheduler refused the job itself */
    }
}

void zf__broker_jobs_on_reply(zf_broker_t *b, int i, Zflow__Envelope *env)
{
    zf__broker_jobs_t *J = b->jobs;
    uint64_t c = env->request_id;
    uintptr_t v = 0;
    s_begin(J);
    if (zf_strmap_remove_n(J->polls, (const char *)&c, sizeof c, &v)) {
        s_on_poll_reply(b, (s_poll_t *)v, env);
        return;
    }
    s_job_t *j = zf_strmap_get_n(J->calls, (const char *)&c, sizeof c, &v) ? (s_job_t *)v : NULL;
    if (!j || j->sched != b->scheds[i].serial) {
        zf_log_info(ZF__BROKER_LOG, "dropping a %s for a job call %" PRIu64 " that is over",
                    zf__broker_body_name(env), c);
        return;
    }
    s_call_forget(J, j);
    s_on_job_reply(b, i, j, env);
}

void zf__broker_jobs_sched_gone(zf_broker_t *b, uint64_t serial, const char *sid, const char *why)
{
    zf__broker_jobs_t *J = b->jobs;
    if (!J) return;
    s_begin(J);
    size_t iter = 0, n = 0, cap = 0;
    uintptr_t v = 0;
    s_poll_t **polls = NULL;
    while (zf_strmap_next(J->polls, &iter, NULL, NULL, &v)) {
        if (((s_poll_t *)v)->sched != serial) continue;
        if (n == cap) {
            s_poll_t **g = realloc(polls, (cap = cap ? cap * 2 : 16) * sizeof *g);
            if (!g) break;
            polls = g;
        }
        polls[n++] = (s_poll_t *)v;
    }
    for (size_t k = 0; k < n; k++) {
        zf_strmap_remove_n(J->polls, (const char *)&polls[k]->call, sizeof polls[k]->call, NULL);
        s_poll_here(b, &polls[k]->client, polls[k]->request_id, polls[k]->job);
        free(polls[k]);
    }
    free(polls);
    s_job_t **lost = NULL;
    iter = n = cap = 0;
    while (zf_strmap_next(J->by_id, &iter, NULL, NULL, &v)) {
        s_job_t *j = (s_job_t *)v;
        if (j->state != ZF_JOB_STORE_DISPATCHED || j->sched != serial) continue;
        if (n == cap) {
            s_job_t **g = realloc(lost, (cap = cap ? cap * 2 : 16) * sizeof *g);
            if (!g) break;
            lost = g;
        }
        lost[n++] = j;
    }
    if (n)
        zf_log_warn(ZF__BROKER_LOG, "scheduler '%s' is gone with %zu job(s); handing them on", sid,
                    n);
    for (size_t k = 0; k < n; k++) {
        lost[k]->sched = 0; /* its record is gone already */
        s_call_forget(J, lost[k]);
        s_retry(b, lost[k],
                zf_status_new(ZF_UNAVAILABLE, "scheduler '%s' running it is gone (%s)", sid, why));
    }
    free(lost);
}

/* ---- the round's end: commit, answer, hand on, expire ---------------------------------- */

/* Answers waiters whose deadline passed; drops results too old or too many. */
static void s_tick(zf_broker_t *b, int64_t now)
{
    zf__broker_jobs_t *J = b->jobs;
    size_t iter = 0;
    uintptr_t v = 0;
    while (J->n_timed > 0 && zf_strmap_next(J->by_id, &iter, NULL, NULL, &v)) {
        s_job_t *j = (s_job_t *)v;
        for (s_waiter_t **p = &j->waiters; *p;) {
            s_waiter_t *w = *p;
            if (!w->deadline_ms || w->deadline_ms > now) {
                p = &w->next;
                continue;
            }
            *p = w->next;
            zf_status_t st = zf_status_new(ZF_DEADLINE_EXCEEDED,
                                           "job %s has not finished within %" PRId64
                                           " ms (attempt %d); it goes on, and a later wait can "
                                           "collect its result",
                                           j->id, w->timeout_ms, j->attempts);
            Zflow__RunStepReply *r = s_status_result(&st);
            if (r) {
                r->unfinished = true;
                r->attempts = j->attempts;
                zf_status_t s = s_send_result(b, &w->client, w->request_id, r);
                zf_status_clear(&s);
                zflow__run_step_reply__free_unpacked(r, NULL);
            }
            J->n_waiters--;
            J->n_timed--;
            free(w);
        }
    }
    if (now - J->last_expire_ms < S_EXPIRE_MS) return;
    J->last_expire_ms = now;
    s_expire(b);
}

/* Commits the round's writes; true when they are durable. */
static bool s_commit(zf_broker_t *b)
{
    zf_status_t st = zf_job_store_commit(b->jobs->store);
    if (zf_ok(st)) return true;
    zf_log_error(ZF__BROKER_LOG, "%s", zf_status_msg(&st));
    zf_status_clear(&st);
    return false;
}

/* Takes back the store thread's tasks done. */
static void s_blobs_done(zf_broker_t *b)
{
    for (zf_job_blob_task_t *t; (t = zf_job_blobs_next(b->jobs->blobs));) {
        if (t->op == ZF_JOB_BLOB_PUT)
            s_on_stored(b, t);
        else if (t->op == ZF_JOB_BLOB_LOAD)
            s_on_loaded(b, t);
        else if (!zf_ok(t->status))
            zf_log_warn(ZF__BROKER_LOG, "%s", zf_status_msg(&t->status));
        zf_job_blob_task_free(&t);
    }
}

void *zf__broker_jobs_socket(const zf_broker_t *b)
{
    return b->jobs && b->jobs->blobs ? zf_job_blobs_socket(b->jobs->blobs) : NULL;
}

void zf__broker_jobs_round(zf_broker_t *b)
{
    zf__broker_jobs_t *J = b->jobs;
    s_blobs_done(b);
    bool durable = s_commit(b);
    for (int k = 0; k < J->n_acks; k++) {
        s_ack_t *a = &J->acks[k];
        zf_status_t st = ZF_STATUS_OK;
        if (durable) {
            s_send_submit_reply(b, &a->client, a->request_id, &st, a->job->id);
            continue;
        }
        st = zf_status_new(ZF_UNAVAILABLE, "SubmitJob refused: the broker cannot record it in "
                                           "its job store (see its log)");
        s_send_submit_reply(b, &a->client, a->request_id, &st, NULL);
        s_job_free(J, a->job); /* not stored: nobody knows its id */
    }
    J->n_acks = 0;
    s_begin(J);
    s_dispatch_queued(b);
    int64_t now = s_mono_ms();
    if (now - J->last_tick_ms >= S_TICK_MS) {
        J->last_tick_ms = now;
        s_tick(b, now);
    }
    s_commit(b);
}

/* ---- open and close ----------------------------------------------------------------------- */

/* Orders results by the time they ended, then by acceptance. */
static int s_by_end(const void *a, const void *b)
{
    const s_job_t *x = *(s_job_t *const *)a, *y = *(s_job_t *const *)b;
    if (x->ended_ms != y->ended_ms) return x->ended_ms < y->ended_ms ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Takes up the stored jobs: queued and dispatched ones wait to be handed
 * to a scheduler (a dispatched one starts again), results to be collected
 * (listed by acceptance, they join the results in the order they ended). */
static zf_status_t s_recover(zf_broker_t *b)
{
    zf__broker_jobs_t *J = b->jobs;
    zf_job_store_record_t *recs = NULL;
    size_t n = 0, bad = 0, queued = 0, done = 0;
    ZF_TRY(zf_job_store_list(J->store, &recs, &n, &bad));
    s_job_t **ended = n ? calloc(n, sizeof *ended) : NULL;
    zf_status_t st = n && !ended ? zf_out_of_memory("broker: the job table") : ZF_STATUS_OK;
    if (zf_ok(st)) st = zf_job_store_begin(J->store);
    J->next_seq = 1;
    for (size_t k = 0; k < n && zf_ok(st); k++) {
        s_job_t *j = calloc(1, sizeof *j);
        if (j) snprintf(j->id, sizeof j->id, "%s", recs[k].id);
        if (!j || zf_strmap_insert(J->by_id, j->id, (uintptr_t)j, NULL) != 0) {
            free(j);
            st = zf_out_of_memory("broker: the job table");
            break;
        }
        j->seq = recs[k].seq;
        j->steps = recs[k].steps > 0 ? recs[k].steps : 1; /* 0: not recorded */
        j->apart = recs[k].request_apart;
        j->attempts = recs[k].attempts;
        j->ended_ms = recs[k].ended_ms;
        if (j->seq >= J->next_seq) J->next_seq = j->seq + 1;
        if (recs[k].state == ZF_JOB_STORE_DONE) {
            j->state = ZF_JOB_STORE_DONE;
            ended[done++] = j;
            continue;
        }
        queued++;
        if (recs[k].state == ZF_JOB_STORE_QUEUED) {
            s_queue_push(J, j, false);
            continue;
        }
        j->state = ZF_JOB_STORE_DISPATCHED; /* to no scheduler this broker knows */
        s_retry(b, j,
                zf_status_new(ZF_UNAVAILABLE, "the broker restarted while scheduler '%s' ran it",
                              recs[k].scheduler));
    }
    free(recs);
    if (done) qsort(ended, done, sizeof *ended, s_by_end);
    for (size_t k = 0; k < done; k++) s_done_add(J, ended[k]);
    free(ended);
    if (n || bad)
        zf_log_info(ZF__BROKER_LOG, "job store %s: %zu job(s) to run, %zu result(s) to collect%s",
                    zf_job_store_path(J->store), queued, done,
                    bad ? " (unreadable rows skipped)" : "");
    if (queued) { /* the executors register again first, or the jobs would find none */
        J->hold_until_ms = s_mono_ms() + 2 * (int64_t)b->heartbeat_ms;
        zf_log_info(ZF__BROKER_LOG,
                    "jobs are handed to schedulers in %d ms, once the executors "
                    "are back",
                    2 * b->heartbeat_ms);
    }
    if (bad)
        zf_log_warn(ZF__BROKER_LOG, "job store %s: skipped %zu unreadable row(s)",
                    zf_job_store_path(J->store), bad);
    ZF_TRY(st);
    return zf_job_store_commit(J->store);
}

/* Whether the job store keeps id's request apart (for zf_job_blobs_sweep). */
static bool s_keeps_apart(void *arg, const char *id)
{
    const s_job_t *j = s_find(arg, id);
    return j && j->apart;
}

zf_status_t zf__broker_jobs_open(zf_broker_t *b, const zf_broker_config_t *config)
{
    zf__broker_jobs_t *J = calloc(1, sizeof *J);
    if (!J) return zf_out_of_memory("broker: jobs");
    b->jobs = J;
    J->max_attempts = config->max_attempts > 0 ? config->max_attempts : ZF_BROKER_MAX_ATTEMPTS;
    J->max_steps = config->max_job_steps > 0 ? config->max_job_steps : ZF_BROKER_JOB_STEPS_MAX;
    J->keep_results = config->job_results > 0 ? config->job_results : ZF_BROKER_JOB_RESULTS;
    J->keep_ms = config->job_ttl_ms > 0 ? config->job_ttl_ms : ZF_BROKER_JOB_TTL_MS;
    J->next_call = zf_random_id() << 16; /* a restarted broker takes no old reply for its own */
    J->by_id = zf_strmap_new(0, 0);
    J->calls = zf_strmap_new(0, 0);
    J->polls = zf_strmap_new(0, 0);
    if (!J->by_id || !J->calls || !J->polls) return zf_out_of_memory("broker: jobs");
    const char *dir =
        config->state && strcmp(config->state, ZF_JOB_STORE_MEMORY) != 0 ? config->state : NULL;
    ZF_TRY(zf_job_store_open(dir ? dir : ZF_JOB_STORE_MEMORY, &J->store));
    ZF_TRY(zf_job_blobs_new(b->ctx, dir, &J->blobs));
    ZF_TRY(s_recover(b));
    size_t gone = dir ? zf_job_blobs_sweep(dir, s_keeps_apart, J) : 0;
    if (gone)
        zf_log_info(ZF__BROKER_LOG, "job store %s: removed %zu request(s) of no job", dir, gone);
    return ZF_STATUS_OK;
}

void zf__broker_jobs_close(zf_broker_t *b)
{
    zf__broker_jobs_t *J = b->jobs;
    if (!J) return;
    if (J->blobs) zf_job_blobs_stop(J->blobs); /* what it was given is done */
    for (zf_job_blob_task_t *t; J->blobs && (t = zf_job_blobs_next(J->blobs));) {
        s_ack_t *a = t->op == ZF_JOB_BLOB_PUT ? t->tag : NULL;
        if (a) free(a->job);
        free(a);
        zf_job_blob_task_free(&t);
    }
    zf_job_blobs_destroy(&J->blobs);
    b->jobs = NULL;
    size_t iter = 0;
    uintptr_t v = 0;
    while (J->polls && zf_strmap_next(J->polls, &iter, NULL, NULL, &v)) free((void *)v);
    iter = 0;
    while (J->by_id && zf_strmap_next(J->by_id, &iter, NULL, NULL, &v)) {
        s_job_t *j = (s_job_t *)v;
        for (s_waiter_t *w = j->waiters, *next; w; w = next) {
            next = w->next;
            free(w);
        }
        free(j->retried);
        free(j);
    }
    zf_strmap_destroy(&J->by_id);
    zf_strmap_destroy(&J->calls);
    zf_strmap_destroy(&J->polls);
    zf_job_store_close(&J->store);
    free(J->acks);
    free(J);
}

const char *zf__broker_jobs_store_path(const zf_broker_t *b)
{
    return b->jobs && b->jobs->store ? zf_job_store_path(b->jobs->store) : "";
}
