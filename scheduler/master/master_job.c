/* The master's one-shot jobs (SubmitJob, PollJob, WaitJob): a session
 * created, its step run one or more times and the session closed; owns each
 * job's progress and its result until a waiter collects it or it expires
 * (scheduler/master/master.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/proto_util.h"
#include "common/transport.h"
#include "common/random.h"
#include "scheduler/master/master_internal.h"

#define S_LOG     "master"
#define S_TICK_MS 50

typedef struct s_waiter {
    zf_master_job_fn done;
    void *arg;
    int64_t timeout_ms, deadline_ms; /* deadline: monotonic; 0 for none */
    Zflow__RunStepReply *late;       /* its DEADLINE_EXCEEDED reply, once past it */
    struct s_waiter *next;
} s_waiter_t;

typedef struct zf__master_job {
    char *id;
    zf_master_job_state_t state;
    int64_t steps_done, steps_total;
    int parts_total;
    char *session;                /* while it runs */
    int64_t started_ms, ended_ms; /* monotonic; 0 until then */
    Zflow__RunStepReply *result;  /* owned once done */
    s_waiter_t *waiters;
    bool cancelled;                       /* CancelJob: no further step runs */
    bool listed;                          /* on the done list: its result waits */
    struct zf__master_job *older, *newer; /* that list's neighbours */
} zf__master_job_t;

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A RunStepReply carrying only st. NULL when out of memory. */
static Zflow__RunStepReply *s_status_reply(const zf_status_t *st)
{
    Zflow__RunStepReply *r = malloc(sizeof *r);
    if (!r) return NULL;
    zflow__run_step_reply__init(r);
    zf_status_t e = zf_status_to_proto(st, &r->status);
    zf_status_clear(&e);
    return r;
}

/* A deep copy of r, allocated as unpack does; NULL when out of memory. */
static Zflow__RunStepReply *s_copy(const Zflow__RunStepReply *r)
{
    return (Zflow__RunStepReply *)zf_proto_copy(&r->base);
}

/* ---- the table and its retention (under m->mu) ------------------------------------ */

static int s_keep_max(const zf_master_t *m)
{
    return m->jobs_keep_max > 0 ? m->jobs_keep_max : ZF_MASTER_JOB_RESULTS_MAX;
}

static int64_t s_keep_ms(const zf_master_t *m)
{
    return m->jobs_keep_ms > 0 ? m->jobs_keep_ms : ZF_MASTER_JOB_RESULT_AGE_MS;
}

static zf__master_job_t *s_find(zf_master_t *m, const char *id)
{
    uintptr_t v = 0;
    return id && zf_strmap_get(m->jobs, id, &v) ? (zf__master_job_t *)v : NULL;
}

static zf_status_t s_not_found(const zf_master_t *m, const char *id)
{
    return zf_not_found("job '%s' not found: it is unknown here, its result was already "
                        "collected, or it expired (results are kept %" PRId64
                        " s, at most %d of them)",
                        id ? id : "", s_keep_ms(m) / 1000, s_keep_max(m));
}

static void s_job_free(zf__master_job_t *j)
{
    if (!j) return;
    if (j->result) zflow__run_step_reply__free_unpacked(j->result, NULL);
    free(j->session);
    free(j->id);
    free(j);
}

/* Appends a finished job, without waiters, to the done list. */
static void s_done_push(zf_master_t *m, zf__master_job_t *j)
{
    j->older = m->jobs_done_tail;
    j->newer = NULL;
    if (m->jobs_done_tail)
        m->jobs_done_tail->newer = j;
    else
        m->jobs_done_head = j;
    m->jobs_done_tail = j;
    m->n_jobs_done++;
    j->listed = true;
}

/* Removes j from the table (and from the done list when there) and frees
 * it. */
static void s_forget(zf_master_t *m, zf__master_job_t *j)
{
    if (j->listed) {
        if (j->older)
            j->older->newer = j->newer;
        else
            m->jobs_done_head = j->newer;
        if (j->newer)
            j->newer->older = j->older;
        else
            m->jobs_done_tail = j->older;
        m->n_jobs_done--;
    }
    zf_strmap_remove(m->jobs, j->id, NULL);
    s_job_free(j);
}

/* Drops the results over the count or past their age, oldest first. */
static void s_expire(zf_master_t *m, int64_t now)
{
    while (m->jobs_done_head) {
        zf__master_job_t *j = m->jobs_done_head;
        bool over = m->n_jobs_done > s_keep_max(m), old = now - j->ended_ms >= s_keep_ms(m);
        if (!over && !old) return;
        zf_log_info(S_LOG, "dropped the uncollected result of job %s (%s)", j->id,
                    old ? "too old" : "too many results waiting");
        s_forget(m, j);
    }
}

void zf_master_set_job_retention(zf_master_t *m, int max_results, int64_t max_age_ms)
{
    pthread_mutex_lock(&m->mu);
    m->jobs_keep_max = max_results > 0 ? max_results : 0;
    m->jobs_keep_ms = max_age_ms > 0 ? max_age_ms : 0;
    pthread_mutex_unlock(&m->mu);
}

void zf_master_set_job_steps_max(zf_master_t *m, int64_t max_steps)
{
    pthread_mutex_lock(&m->mu);
    m->jobs_steps_max = max_steps > 0 ? max_steps : 0;
    pthread_mutex_unlock(&m->mu);
}

/* ---- submit and run -------------------------------------------------------------- */

/* A job's step count is 0 (one run) up to the scheduler's limit. */
static zf_status_t s_check_steps(zf_master_t *m, int64_t steps)
{
    pthread_mutex_lock(&m->mu);
    int64_t max = m->jobs_steps_max > 0 ? m->jobs_steps_max : ZF_MASTER_JOB_STEPS_MAX;
    pthread_mutex_unlock(&m->mu);
    if (steps < 0)
        return zf_invalid_argument("SubmitJob: steps must be 0 or more, not %" PRId64
                                   " (0 runs the step once; this scheduler runs at most %" PRId64
                                   " per job (--max-job-steps))",
                                   steps, max);
    if (steps > max)
        return zf_invalid_argument("SubmitJob asks for %" PRId64 " steps; this scheduler runs at "
                                   "most %" PRId64 " per job (--max-job-steps)",
                                   steps, max);
    return ZF_STATUS_OK;
}

zf_status_t zf_master_job_new(zf_master_t *m, const Zflow__SubmitJob *req, char **job_id)
{
    *job_id = NULL;
    if (!req || !req->session || !req->session->graph)
        return zf_invalid_argument("SubmitJob without a session graph");
    if (!req->step) return zf_invalid_argument("SubmitJob without a step");
    if (req->step->partial_run_setup || (req->step->partial_run_handle && *req->step->partial_run_handle))
        return zf_invalid_argument("SubmitJob: a job's step cannot be a partial run (partial runs "
                                   "belong to a session's RunStep calls)");
    ZF_TRY(s_check_steps(m, req->steps));
    if (req->checkpoint_every < 0)
        return zf_invalid_argument("SubmitJob: checkpoint_every must be 0 or more, not %" PRId64,
                                   req->checkpoint_every);
    if (req->checkpoint_every > 0 && (!req->checkpoint_dir || !req->checkpoint_dir[0]))
        return zf_invalid_argument("SubmitJob: checkpoint_every %" PRId64
                                   " needs a checkpoint_dir to save into",
                                   req->checkpoint_every);
    if (req->checkpoint_dir && strlen(req->checkpoint_dir) > 4000)
        return zf_invalid_argument("SubmitJob: checkpoint_dir is %zu bytes long; at most 4000",
                                   strlen(req->checkpoint_dir));
    ZF_TRY(zf_master_check_graph(m, req->session->graph, "SubmitJob"));
    zf__master_job_t *j = calloc(1, sizeof *j);
    if (!j) return zf_out_of_memory("master");
    j->state = ZF_MASTER_JOB_QUEUED;
    j->steps_total = req->steps > 0 ? req->steps : 1;
    char id[96];
    pthread_mutex_lock(&m->mu);
    s_expire(m, s_now_ms());
    snprintf(id, sizeof id, "%sjob-%" PRIu64 "-%08" PRIx64, m->id_prefix, ++m->next_job,
             zf_random_id() & 0xffffffffu);
    zf_status_t st = ZF_STATUS_OK;
    if (!(j->id = strdup(id)) || !(*job_id = strdup(id)) ||
        zf_strmap_insert(m->jobs, id, (uintptr_t)j, NULL) != 0) {
        free(*job_id);
        *job_id = NULL;
        s_job_free(j);
        st = zf_out_of_memory("master");
    }
    pthread_mutex_unlock(&m->mu);
    return st;
}

/* Records that j finished `done` steps; the partition count comes from
 * its session while that lives. */
static void s_note_step(zf_master_t *m, zf__master_job_t *j, int64_t done)
{
    pthread_mutex_lock(&m->mu);
    j->steps_done = done;
    uintptr_t v = 0;
    if (j->session && zf_strmap_get(m->sessions, j->session, &v))
        j->parts_total = ((zf__master_session_t *)v)->step_parts;
    pthread_mutex_unlock(&m->mu);
}

static zf_status_t s_cancelled(const zf__master_job_t *j)
{
    return zf_status_new(ZF_CANCELLED, "job %s cancelled: its client cancelled it", j->id);
}

static bool s_is_cancelled(zf_master_t *m, const zf__master_job_t *j)
{
    pthread_mutex_lock(&m->mu);
    bool c = j->cancelled;
    pthread_mutex_unlock(&m->mu);
    return c;
}

/* CANCELLED once CancelJob came for j. */
static zf_status_t s_check_cancelled(zf_master_t *m, const zf__master_job_t *j)
{
    return s_is_cancelled(m, j) ? s_cancelled(j) : ZF_STATUS_OK;
}

zf_status_t zf_master_job_cancel(zf_master_t *m, const char *job_id)
{
    pthread_mutex_lock(&m->mu);
    s_expire(m, s_now_ms());
    zf__master_job_t *j = s_find(m, job_id);
    zf_status_t st = ZF_STATUS_OK;
    uintptr_t v = 0;
    if (!j) {
        st = s_not_found(m, job_id);
    } else if (j->state == ZF_MASTER_JOB_DONE) {
        st = zf_status_new(ZF_FAILED_PRECONDITION,
                           "job %s has finished already; its result waits to be collected",
                           j->id);
    } else {
        j->cancelled = true;
        if (j->session && zf_strmap_get(m->sessions, j->session, &v)) {
            zf__master_session_t *s = (zf__master_session_t *)v;
            s->cancel_why = "its job was cancelled"; /* a step starting now too */
            zf__master_cancel_running(m, s, s->cancel_why);
        }
    }
    pthread_mutex_unlock(&m->mu);
    if (zf_ok(st)) zf_log_info(S_LOG, "cancelling job %s", job_id);
    return st;
}

/* Runs j's steps on session; the last reply, or the first failure. */
static zf_status_t s_run_steps(zf_master_t *m, zf__master_job_t *j, const Zflow__SubmitJob *req,
                               char *session, Zflow__RunStepReply **out, int64_t *resumed)
{
    ZF_TRY(s_check_cancelled(m, j));
    if (req->n_init_targets > 0) { /* once, before the steps: initializers */
        Zflow__RunStep init = ZFLOW__RUN_STEP__INIT;
        init.session = session;
        init.n_targets = req->n_init_targets;
        init.targets = req->init_targets;
        init.timeout_ms = req->step->timeout_ms;
        ZF_TRY(zf_status_prefix(zf_master_run_step(m, &init, out), "init targets"));
        zflow__run_step_reply__free_unpacked(*out, NULL);
        *out = NULL;
    }
    Zflow__RunStep step = *req->step;
    step.session = session;
    zf__master_ckpt_t ck = {req->checkpoint_dir, req->checkpoint_every, 0};
    int64_t first = 1;
    if (ck.every > 0) {
        ZF_TRY(zf__master_ckpt_prepare(m, session, &ck));
        ZF_TRY(zf__master_ckpt_restore(m, session, &ck, resumed));
        /* a checkpoint of a longer job in the same directory still
         * leaves the last step to run, for the fetches */
        if (*resumed >= j->steps_total) *resumed = j->steps_total - 1;
        first = *resumed + 1;
        s_note_step(m, j, *resumed);
    }
    for (int64_t k = first; k <= j->steps_total; k++) {
        if (*out) zflow__run_step_reply__free_unpacked(*out, NULL);
        *out = NULL;
        ZF_TRY(s_check_cancelled(m, j));
        zf_status_t st = zf_master_run_step(m, &step, out);
        /* never after the last step: a restore always leaves one to run */
        if (zf_ok(st) && ck.every > 0 && k % ck.every == 0 && k < j->steps_total)
            st = zf__master_ckpt_save(m, session, &ck, k);
        if (!zf_ok(st))
            return j->steps_total > 1
                       ? zf_status_prefix(st, "step %" PRId64 " of %" PRId64, k, j->steps_total)
                       : st;
        s_note_step(m, j, k);
    }
    return ZF_STATUS_OK;
}

/* Runs the job's session and steps; the reply always carries the status. */
static Zflow__RunStepReply *s_run(zf_master_t *m, zf__master_job_t *j, const Zflow__SubmitJob *req)
{
    char *session = NULL;
    Zflow__RunStepReply *r = NULL;
    int64_t resumed = 0;
    zf_status_t st = zf__master_create_job_session(m, req->session, &session);
    if (zf_ok(st)) {
        char *copy = strdup(session);
        pthread_mutex_lock(&m->mu);
        j->session = copy; /* a poll without it only lacks the partition counts */
        pthread_mutex_unlock(&m->mu);
        st = s_run_steps(m, j, req, session, &r, &resumed);
        zf_status_t c = zf_master_close_session(m, session);
        zf_status_clear(&c);
    }
    free(session);
    if (st.code == ZF_CANCELLED && s_is_cancelled(m, j)) { /* whichever step it stopped in */
        zf_status_clear(&st);
        st = s_cancelled(j);
    }
    if (!zf_ok(st)) {
        if (r) zflow__run_step_reply__free_unpacked(r, NULL);
        r = s_status_reply(&st);
    }
    if (r) r->resumed_from_step = resumed;
    zf_status_clear(&st);
    return r;
}

/* Hands r to each waiter: a copy each, the original to the last. */
static void s_fire(s_waiter_t *w, Zflow__RunStepReply *r)
{
    while (w) {
        s_waiter_t *next = w->next;
        Zflow__RunStepReply *mine = next && r ? s_copy(r) : r;
        if (!next) r = NULL;
        w->done(w->arg, mine);
        free(w);
        w = next;
    }
    if (r) zflow__run_step_reply__free_unpacked(r, NULL);
}

void zf_master_job_run(zf_master_t *m, const char *job_id, const Zflow__SubmitJob *req)
{
    pthread_mutex_lock(&m->mu);
    zf__master_job_t *j = s_find(m, job_id);
    bool ok = j && j->state == ZF_MASTER_JOB_QUEUED;
    if (ok) {
        j->state = ZF_MASTER_JOB_RUNNING;
        j->started_ms = s_now_ms();
    }
    pthread_mutex_unlock(&m->mu);
    if (!ok) {
        zf_log_warn(S_LOG, "job '%s' is not a queued job: not run", job_id ? job_id : "");
        return;
    }
    Zflow__RunStepReply *r = s_run(m, j, req); /* j stays: only done jobs are removed */
    pthread_mutex_lock(&m->mu);
    s_waiter_t *w = j->waiters;
    free(j->session);
    j->session = NULL;
    j->state = ZF_MASTER_JOB_DONE;
    j->ended_ms = s_now_ms();
    if (w) { /* collected now */
        j->waiters = NULL;
        s_forget(m, j);
    } else {
        j->result = r;
        r = NULL;
        s_done_push(m, j);
        s_expire(m, j->ended_ms);
    }
    pthread_mutex_unlock(&m->mu);
    s_fire(w, r);
}

/* ---- poll and wait --------------------------------------------------------------- */

zf_status_t zf_master_job_poll(zf_master_t *m, const char *job_id, zf_master_job_progress_t *out)
{
    memset(out, 0, sizeof *out);
    int64_t now = s_now_ms();
    pthread_mutex_lock(&m->mu);
    s_expire(m, now);
    zf__master_job_t *j = s_find(m, job_id);
    uintptr_t v = 0;
    if (j) {
        out->state = j->state;
        out->steps_done = j->steps_done;
        out->steps_total = j->steps_total;
        out->partitions_total = j->parts_total;
        if (j->started_ms) out->elapsed_ms = (j->ended_ms ? j->ended_ms : now) - j->started_ms;
    }
    if (j && j->session && zf_strmap_get(m->sessions, j->session, &v)) {
        const zf__master_session_t *s = (const zf__master_session_t *)v;
        if (s->step_parts > 0) out->partitions_total = s->step_parts;
        for (int i = 0; s->step_calls && i < s->step_parts; i++)
            out->partitions_running += !s->step_calls[i].done;
    }
    zf_status_t st = j ? ZF_STATUS_OK : s_not_found(m, job_id);
    pthread_mutex_unlock(&m->mu);
    return st;
}

zf_status_t zf_master_job_wait_for(zf_master_t *m, const char *job_id, int64_t timeout_ms,
                                   zf_master_job_fn done, void *arg)
{
    s_waiter_t *w = calloc(1, sizeof *w);
    if (!w) return zf_out_of_memory("master");
    int64_t now = s_now_ms();
    *w =
        (s_waiter_t){done, arg, timeout_ms, zf__master_deadline_after(now, timeout_ms), NULL, NULL};
    pthread_mutex_lock(&m->mu);
    s_expire(m, now);
    zf__master_job_t *j = s_find(m, job_id);
    Zflow__RunStepReply *ready = NULL;
    bool was_done = j && j->state == ZF_MASTER_JOB_DONE;
    if (was_done) {
        ready = j->result;
        j->result = NULL;
        s_forget(m, j);
    } else if (j) {
        w->next = j->waiters;
        j->waiters = w;
        w = NULL;
    }
    zf_status_t st = j ? ZF_STATUS_OK : s_not_found(m, job_id);
    pthread_mutex_unlock(&m->mu);
    free(w);
    if (was_done) done(arg, ready);
    return st;
}

zf_status_t zf_master_job_wait(zf_master_t *m, const char *job_id, zf_master_job_fn done, void *arg)
{
    return zf_master_job_wait_for(m, job_id, 0, done, arg);
}

/* Moves j's waiters past their deadline to *expired, each with a reply
 * saying how far the job got. Under m->mu. */
static void s_take_late(zf__master_job_t *j, int64_t now, s_waiter_t **expired)
{
    for (s_waiter_t **p = &j->waiters; *p;) {
        s_waiter_t *w = *p;
        if (!w->deadline_ms || w->deadline_ms > now) {
            p = &w->next;
            continue;
        }
        *p = w->next;
        zf_status_t st =
            zf_status_new(ZF_DEADLINE_EXCEEDED,
                          "job %s has not finished within %" PRId64 " ms (%" PRId64 " of %" PRId64
                          " steps done); it goes on, and a later wait can collect its result",
                          j->id, w->timeout_ms, j->steps_done, j->steps_total);
        if ((w->late = s_status_reply(&st))) w->late->unfinished = true;
        w->next = *expired;
        *expired = w;
        zf_status_clear(&st);
    }
}

void zf_master_jobs_tick(zf_master_t *m)
{
    int64_t now = s_now_ms();
    s_waiter_t *late = NULL;
    pthread_mutex_lock(&m->mu);
    if (now - m->jobs_last_tick_ms >= S_TICK_MS) {
        m->jobs_last_tick_ms = now;
        s_expire(m, now);
        size_t iter = 0;
        uintptr_t v = 0;
        while (zf_strmap_next(m->jobs, &iter, NULL, NULL, &v))
            if (((zf__master_job_t *)v)->waiters) s_take_late((zf__master_job_t *)v, now, &late);
    }
    pthread_mutex_unlock(&m->mu);
    while (late) {
        s_waiter_t *next = late->next;
        late->done(late->arg, late->late);
        free(late);
        late = next;
    }
}

void zf__master_jobs_free(zf_master_t *m)
{
    size_t iter = 0;
    uintptr_t v = 0;
    zf_status_t st = zf_status_new(ZF_CANCELLED, "the scheduler is stopping");
    while (m->jobs && zf_strmap_next(m->jobs, &iter, NULL, NULL, &v)) {
        zf__master_job_t *j = (zf__master_job_t *)v;
        for (s_waiter_t *w = j->waiters, *next = NULL; w; w = next) {
            next = w->next;
            w->done(w->arg, s_status_reply(&st));
            free(w);
        }
        s_job_free(j);
    }
    m->jobs_done_head = m->jobs_done_tail = NULL;
    m->n_jobs_done = 0;
    zf_status_clear(&st);
    zf_strmap_destroy(&m->jobs);
}
