/* Partial runs on the executor (RunGraph.is_partial): one step of a
 * partition whose feeds and fetches come and go over several RunGraph
 * calls, as TensorFlow's partial runs do. The first call of a step starts
 * the partition's engine; every call sends its feeds into the step's
 * rendezvous and is answered once its fetches have been produced there;
 * the last one is answered once the engine has ended too, and the step is
 * then cleaned up here. A failed engine fails the calls waiting and is
 * forgotten; CleanupGraph and AbortStep forget a step's partial runs. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/thread_pool.h"
#include "executor/worker/service_internal.h"

/* ---- the partial runs' list ------------------------------------------------------ */

void zf__svc_partial_unref_locked(zf_exec_service_t *svc, zf__svc_partial_t **p_p)
{
    zf__svc_partial_t *p = *p_p;
    *p_p = NULL;
    if (!p || --p->refs > 0) return;
    zf_status_clear(&p->engine_status);
    zf_rendezvous_unref(&p->r);
    zf__svc_graph_unref_locked(svc, &p->graph);
    free(p);
}

/* Takes p off the list; the list's reference goes (the caller holds
 * another one). Caller holds svc->mu. */
static void s_unlist_locked(zf_exec_service_t *svc, zf__svc_partial_t *p)
{
    if (!p->listed) return;
    for (zf__svc_partial_t **pp = &svc->partials; *pp; pp = &(*pp)->next) {
        if (*pp != p) continue;
        *pp = p->next;
        break;
    }
    p->next = NULL;
    p->listed = false;
    svc->n_partials--;
    p->refs--;
}

void zf__svc_partials_forget(zf_exec_service_t *svc, int64_t step_id)
{
    pthread_mutex_lock(&svc->mu);
    for (zf__svc_partial_t *p = svc->partials, *next = NULL; p; p = next) {
        next = p->next;
        if (p->step_id != step_id) continue;
        zf__svc_partial_t *hold = p;
        p->refs++;
        s_unlist_locked(svc, p);
        zf__svc_partial_unref_locked(svc, &hold);
    }
    pthread_mutex_unlock(&svc->mu);
}

int zf__svc_partials_running_locked(zf_exec_service_t *svc, zf_rendezvous_t **rs, int cap)
{
    int n = 0;
    for (zf__svc_partial_t *p = svc->partials; p && n < cap; p = p->next)
        if (!p->engine_done) rs[n++] = zf_rendezvous_ref(p->r);
    return n;
}

void zf__svc_partials_free(zf_exec_service_t *svc)
{
    pthread_mutex_lock(&svc->mu);
    while (svc->partials) {
        zf__svc_partial_t *p = svc->partials;
        p->refs++;
        s_unlist_locked(svc, p);
        zf__svc_partial_unref_locked(svc, &p);
    }
    pthread_mutex_unlock(&svc->mu);
}

/* ---- calls ------------------------------------------------------------------------- */

/* Answers the call st with status (owned): its fetches on OK. The last call
 * takes its partial run off the list, and a step that ended well is cleaned
 * up here (nothing more can come for it). */
static void s_call_end(zf__svc_step_t *st, zf_status_t status)
{
    zf_exec_service_t *svc = st->svc;
    bool finished = st->last && zf_ok(status);
    zf__svc_build_reply(st, status);
    if (st->last) {
        pthread_mutex_lock(&svc->mu);
        s_unlist_locked(svc, st->partial);
        pthread_mutex_unlock(&svc->mu);
    }
    if (finished) zf_remote_finish_step(svc->remote, st->step_id);
    zf__svc_step_finish(st);
}

/* Every fetch of st has completed: the first failed recv fails the call;
 * the last call waits for the engine unless it has ended already. */
static void s_call_ready(zf__svc_step_t *st)
{
    zf_status_t status = ZF_STATUS_OK;
    for (size_t i = 0; i < st->n_fetch_keys; i++) {
        if (zf_ok(st->slots[i].status)) continue;
        status = st->slots[i].status;
        st->slots[i].status = ZF_STATUS_OK;
        break;
    }
    if (zf_ok(status) && st->last) {
        zf_exec_service_t *svc = st->svc;
        zf__svc_partial_t *p = st->partial;
        pthread_mutex_lock(&svc->mu);
        if (!p->engine_done && !p->waiting) {
            p->waiting = st; /* answered by s_engine_done */
            pthread_mutex_unlock(&svc->mu);
            return;
        }
        status = p->engine_done ? zf_status_copy(&p->engine_status)
                                : zf_status_new(ZF_FAILED_PRECONDITION,
                                                "step %" PRId64 " has a last partial-run call "
                                                "waiting already",
                                                st->step_id);
        pthread_mutex_unlock(&svc->mu);
    }
    s_call_end(st, status);
}

static void s_recv_done(zf_status_t status, zf_tensor_t *tensor, bool is_dead, void *arg)
{
    zf__svc_fetch_slot_t *slot = arg;
    zf__svc_step_t *st = slot->st;
    slot->value = tensor;
    slot->dead = is_dead;
    slot->status = status;
    if (atomic_fetch_sub(&st->pending, 1) == 1) s_call_ready(st);
}

/* Asks for every fetch of st; the last recv to complete answers the call
 * (possibly on this thread). */
static void s_call_recv(zf__svc_step_t *st)
{
    atomic_store(&st->pending, (int)st->n_fetch_keys + 1); /* +1 until every recv is asked */
    for (size_t i = 0; i < st->n_fetch_keys; i++) {
        zf__svc_fetch_slot_t *slot = &st->slots[i];
        slot->st = st;
        zf_status_t s = zf_rendezvous_recv_async(st->r, st->fetch_keys[i], s_recv_done, slot, NULL);
        if (!zf_ok(s)) s_recv_done(s, NULL, false, slot);
    }
    if (atomic_fetch_sub(&st->pending, 1) == 1) s_call_ready(st);
}

/* ---- the engine --------------------------------------------------------------------- */

static void s_engine_done(zf_status_t status, void *arg)
{
    zf__svc_partial_t *p = arg;
    zf_exec_service_t *svc = p->svc;
    /* the calls waiting for fetches fail with the engine's error */
    if (!zf_ok(status)) zf_rendezvous_start_abort(p->r, &status);
    pthread_mutex_lock(&svc->mu);
    p->engine_done = true;
    p->engine_status = status;
    zf__svc_step_t *waiting = p->waiting;
    p->waiting = NULL;
    if (!zf_ok(status)) s_unlist_locked(svc, p);
    zf_status_t copy = waiting ? zf_status_copy(&p->engine_status) : ZF_STATUS_OK;
    pthread_mutex_unlock(&svc->mu);
    if (waiting) s_call_end(waiting, copy);
    pthread_mutex_lock(&svc->mu);
    zf__svc_partial_unref_locked(svc, &p); /* the engine's reference */
    if (--svc->n_running == 0) pthread_cond_broadcast(&svc->idle);
    pthread_mutex_unlock(&svc->mu);
}

static void s_engine_start(void *arg)
{
    zf__svc_partial_t *p = arg;
    zf_engine_args_t args = {p->step_id, p->r, NULL};
    zf__svc_engine_start(p->svc, p->graph, &args, s_engine_done, p);
}

/* A new partial run of st's graph and step, listed, its engine counted as
 * running (started by the caller). Caller holds svc->mu. */
static zf_status_t s_partial_new_locked(zf_exec_service_t *svc, zf__svc_step_t *st,
                                        zf_rendezvous_t *r, zf__svc_partial_t **out)
{
    *out = NULL;
    if (svc->n_partials >= ZF__SVC_PARTIALS_MAX)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "this executor has %d partial runs live already (the most it keeps)",
                             svc->n_partials);
    zf__svc_partial_t *p = calloc(1, sizeof *p);
    if (!p) return zf_out_of_memory("partial run");
    p->svc = svc;
    p->graph = st->graph;
    p->graph->refs++;
    p->r = zf_rendezvous_ref(r);
    p->step_id = st->step_id;
    p->refs = 3; /* the list, the engine, the call */
    p->listed = true;
    p->next = svc->partials;
    svc->partials = p;
    svc->n_partials++;
    svc->n_running++; /* the engine */
    *out = p;
    return ZF_STATUS_OK;
}

/* Finds st's partial run (a reference into st->partial), or makes one:
 * *fresh then says its engine is to be started. */
static zf_status_t s_attach(zf_exec_service_t *svc, zf__svc_step_t *st, bool *fresh)
{
    *fresh = false;
    pthread_mutex_lock(&svc->mu);
    for (zf__svc_partial_t *p = svc->partials; p; p = p->next) {
        if (p->step_id != st->step_id || p->graph != st->graph) continue;
        p->refs++;
        st->partial = p;
        break;
    }
    pthread_mutex_unlock(&svc->mu);
    if (!st->partial) {
        zf_rendezvous_t *r = NULL;
        ZF_TRY(zf_remote_claim_step(svc->remote, st->step_id, &r));
        if (!r)
            return zf_status_new(ZF_FAILED_PRECONDITION,
                                 "step %" PRId64 " has already been cleaned up on this executor",
                                 st->step_id);
        zf_status_t s = zf_rendezvous_status(r);
        pthread_mutex_lock(&svc->mu);
        if (zf_ok(s)) s = s_partial_new_locked(svc, st, r, &st->partial);
        pthread_mutex_unlock(&svc->mu);
        zf_rendezvous_unref(&r);
        ZF_TRY(s);
        *fresh = true;
    }
    st->r = zf_rendezvous_ref(st->partial->r);
    return ZF_STATUS_OK;
}

zf_status_t zf__svc_run_partial(zf_exec_service_t *svc, const zf_route_t *route,
                                uint64_t request_id, const Zflow__RunGraph *req)
{
    if (req->trace)
        return zf_unimplemented("RunGraph of step %" PRId64 ": a partial run is not traced",
                                req->step_id);
    zf__svc_step_t *st = calloc(1, sizeof *st);
    if (!st) return zf_out_of_memory("RunGraph");
    st->svc = svc;
    st->step_id = req->step_id;
    st->route = *route;
    st->request_id = request_id;
    st->last = req->is_last_partial_run;
    bool fresh = false;
    zf_status_t s = zf__svc_find_graph(svc, req, &st->graph);
    if (zf_ok(s))
        s = zf__svc_check_owner(st->graph->owner, &st->route, "RunGraph", st->graph->handle);
    if (zf_ok(s)) s = zf__svc_copy_fetch_keys(st, req);
    if (zf_ok(s) && !(st->slots = calloc(st->n_fetch_keys + 1, sizeof *st->slots)))
        s = zf_out_of_memory("RunGraph");
    if (zf_ok(s)) s = s_attach(svc, st, &fresh);
    if (fresh) { /* the engine waits for feeds this or a later call sends */
        zf_status_t ps = svc->device->pool
                             ? zf_thread_pool_submit(svc->device->pool, s_engine_start, st->partial)
                             : zf_internal("no pool");
        if (!zf_ok(ps)) s_engine_start(st->partial);
        zf_status_clear(&ps);
    }
    size_t bytes = 0;
    if (zf_ok(s)) s = zf_rendezvous_status(st->r);
    if (zf_ok(s)) s = zf__svc_send_feeds(st->r, req, &bytes);
    if (!zf_ok(s)) {
        pthread_mutex_lock(&svc->mu);
        zf__svc_step_free_locked(svc, st);
        pthread_mutex_unlock(&svc->mu);
        return s;
    }
    pthread_mutex_lock(&svc->mu);
    st->next = svc->running;
    svc->running = st;
    svc->n_running++;
    pthread_mutex_unlock(&svc->mu);
    s_call_recv(st);
    return ZF_STATUS_OK;
}
