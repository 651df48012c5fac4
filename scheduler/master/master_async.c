/* The master's steps without a thread of their own: started by the caller,
 * advanced by zf_master_poll() as the executors' replies come in, answered
 * through a callback (scheduler/master/master.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/transport.h"
#include "scheduler/master/master_internal.h"

/* A step zf_master_start_step() started; in m->asteps until it ends. */
typedef struct zf__master_async {
    zf__master_step_t st;
    zf__master_session_t *s; /* a reference */
    zf__master_names_t nm;
    Zflow__Envelope *req; /* owned */
    Zflow__RunStepReply *r;
    zf_status_t res;
    zf_master_step_fn done;
    void *arg;
    int64_t deadline, grace; /* CLOCK_MONOTONIC ms; deadline 0: none */
    bool cleanup;            /* RunGraph went out: CleanupGraph is due */
    struct zf__master_async *next;
} s_async_t;

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void s_async_free(s_async_t *a)
{
    zf__master_names_free(&a->nm);
    if (a->req) zflow__envelope__free_unpacked(a->req, NULL);
    if (a->r) zflow__run_step_reply__free_unpacked(a->r, NULL);
    zf_status_clear(&a->res);
    free(a);
}

/* The session and the cached plan for a's request, with references; false
 * when either is missing (the blocking path then serves the request). */
static bool s_async_prepare(zf_master_t *m, s_async_t *a)
{
    const Zflow__RunStep *req = a->req->run_step;
    int64_t now = s_now_ms();
    pthread_mutex_lock(&m->mu);
    uintptr_t v = 0;
    if (req->session && zf_strmap_get(m->sessions, req->session, &v) &&
        !((zf__master_session_t *)v)->closed) {
        a->s = (zf__master_session_t *)v;
        a->s->refs++;
        a->s->used_ms = now;
    }
    pthread_mutex_unlock(&m->mu);
    if (!a->s) return false;
    zf_status_t st = zf__master_names(req, &a->nm);
    pthread_mutex_lock(&m->mu); /* an ExtendSession replaces the graph under it */
    for (int i = 0; zf_ok(st) && i < a->nm.n_feeds; i++)
        st = zf__master_check_feed(a->s->graph, a->nm.feeds[i], req->feeds[i]->tensor);
    pthread_mutex_unlock(&m->mu);
    if (zf_ok(st)) st = zf__master_reply_new(&a->r);
    bool ok = zf_ok(st);
    zf_status_clear(&st);
    pthread_mutex_lock(&m->mu);
    if (ok && zf_strmap_get(a->s->plans, a->nm.sig, &v)) {
        a->st.p = (zf__master_plan_t *)v;
        zf__master_plan_ref(a->st.p);
    }
    if (!a->st.p) zf__master_session_unref(m, &a->s);
    pthread_mutex_unlock(&m->mu);
    return a->st.p != NULL;
}

void zf_master_start_step(zf_master_t *m, Zflow__Envelope **request, zf_master_step_fn done,
                          void *arg, bool *started)
{
    *started = false;
    if (!*request || (*request)->body_case != ZFLOW__ENVELOPE__BODY_RUN_STEP) return;
    const Zflow__RunStep *rs = (*request)->run_step;
    if (rs->partial_run_setup || (rs->partial_run_handle && *rs->partial_run_handle))
        return; /* partial runs are served on the blocking path */
    s_async_t *a = calloc(1, sizeof *a);
    if (!a) return;
    a->req = *request;
    a->st.m = m;
    if (!s_async_prepare(m, a)) {
        a->req = NULL; /* still the caller's */
        s_async_free(a);
        return;
    }
    *request = NULL;
    a->done = done;
    a->arg = arg;
    pthread_mutex_lock(&m->mu);
    zf__master_plan_t *p = a->st.p;
    zf_status_t st = zf__master_step_begin(&a->st, a->s, p, a->req->run_step, &a->nm, a->r);
    if (!zf_ok(st)) /* no calls: it ends at the next poll */
        a->st = (zf__master_step_t){.m = m, .p = p, .failed = -1, .first = st, .aborted = true};
    if (a->st.timeout_ms > 0) a->deadline = zf__master_deadline_after(s_now_ms(), a->st.timeout_ms);
    a->next = m->asteps;
    m->asteps = a;
    pthread_mutex_unlock(&m->mu);
    *started = true;
}

/* True when a's step has ended, as s_wait_step decides for a blocking
 * one: every reply in, or the first error's stragglers past their grace.
 * Under m->mu. */
static bool s_async_advance(s_async_t *a, int64_t now)
{
    zf__master_step_t *st = &a->st;
    for (;;) {
        if (!st->calls || zf__master_step_scan(st)) return true;
        if (!zf_ok(st->first) && !st->aborted) {
            zf__master_step_abort_others(st);
            a->grace = now + st->m->abort_grace_ms;
        }
        if (st->aborted) return now >= a->grace;
        if (!a->deadline || now < a->deadline) return false;
        st->first = zf__master_step_deadline(st);
        st->failed = -1;
    }
}

/* Ends a (taken out of m->asteps): its result. CleanupGraph, when the step
 * failed, is left for s_async_release, after the client's reply has left.
 * Under m->mu. */
static void s_async_end(s_async_t *a)
{
    a->cleanup = a->st.calls != NULL && !zf_ok(a->st.first); /* see zf__master_step_cleanup */
    if (a->st.calls)
        a->res = zf__master_step_end(&a->st, a->s, a->req->run_step, &a->nm, a->r, false);
    else
        a->res = a->st.first;
    a->st.first = ZF_STATUS_OK; /* moved to res */
}

/* CleanupGraph everywhere for an ended step, and its references dropped.
 * Under m->mu. */
static void s_async_release(zf_master_t *m, s_async_t *a)
{
    if (a->cleanup) zf__master_step_cleanup(&a->st);
    zf__master_plan_unref(&a->st.p);
    zf__master_session_unref(m, &a->s);
}

/* The reply envelope for an ended step, for its callback. */
static Zflow__Envelope *s_async_reply(s_async_t *a)
{
    Zflow__Envelope *rep = malloc(sizeof *rep);
    if (!rep) return NULL;
    zflow__envelope__init(rep);
    rep->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    rep->request_id = a->req->request_id;
    zf_status_t ok = ZF_STATUS_OK;
    zf_status_t st = zf_ok(a->res) ? zf_status_to_proto(&ok, &a->r->status) : a->res;
    a->res = ZF_STATUS_OK;
    zf_status_t e = zf__master_run_reply(a->r, st, rep);
    a->r = NULL; /* rep's now */
    if (!zf_ok(e)) {
        zflow__envelope__free_unpacked(rep, NULL);
        rep = NULL;
    }
    zf_status_clear(&e);
    return rep;
}

int64_t zf_master_poll(zf_master_t *m)
{
    int64_t now = s_now_ms(), wake = -1;
    s_async_t *ended = NULL;
    pthread_mutex_lock(&m->mu);
    for (s_async_t **pp = &m->asteps; *pp;) {
        s_async_t *a = *pp;
        if (s_async_advance(a, now)) {
            *pp = a->next;
            s_async_end(a);
            a->next = ended;
            ended = a;
            continue;
        }
        int64_t at = a->st.aborted ? a->grace : a->deadline;
        if (at > 0 && (wake < 0 || at - now < wake)) wake = at > now ? at - now : 0;
        pp = &a->next;
    }
    pthread_mutex_unlock(&m->mu);
    for (s_async_t *a = ended; a; a = a->next) a->done(a->arg, s_async_reply(a));
    if (ended) pthread_mutex_lock(&m->mu);
    for (s_async_t *a = ended; a; a = a->next) s_async_release(m, a);
    if (ended) pthread_mutex_unlock(&m->mu);
    while (ended) {
        s_async_t *a = ended;
        ended = a->next;
        s_async_free(a);
    }
    return wake;
}

void zf__master_asteps_cancel(zf_master_t *m)
{
    pthread_mutex_lock(&m->mu);
    for (s_async_t *a = m->asteps; a; a = a->next) {
        if (zf_ok(a->st.first)) {
            a->st.first = zf_status_new(ZF_CANCELLED, "the scheduler is stopping");
            a->st.failed = -1;
        }
        a->st.aborted = true; /* with grace 0: it ends at once */
        a->grace = 0;
    }
    pthread_mutex_unlock(&m->mu);
    zf_master_poll(m);
}
