/* Partial runs (TensorFlow's PartialRunSetup and PartialRun): one step fed
 * and fetched in pieces, over several RunStep calls.
 *
 * The setup (RunStep.partial_run_setup) names every feed, fetch and target
 * of the step; its plan is built (or found) then, as any step's, and the
 * step gets its id, but nothing runs. Each call (RunStep.partial_run_handle)
 * gives some of the declared feeds and asks for some of the declared
 * fetches: it is checked as TensorFlow's master checks it (a feed or fetch
 * not declared, given twice, or a fetch that needs a feed still to come),
 * then a RunGraph with is_partial goes to every partition of the plan with
 * the feeds and fetch keys that partition handles; the first call starts
 * the partitions on their executors, and they keep running between calls,
 * their _Recv nodes waiting for feeds to come. The call that gives the last
 * feed and fetch is the step's last: its RunGraph says so, and the
 * executors answer it once their partitions have ended. A call that fails
 * ends the partial run: its partitions are aborted and cleaned up, and the
 * handle answers no further call. Calls of one handle run one at a time.
 * Closing the session aborts its partial runs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/random.h"
#include "scheduler/graph/partial_run.h"
#include "scheduler/master/master_internal.h"

struct zf__master_prun {
    char handle[24];
    int64_t step_id;
    zf__master_plan_t *p;    /* a reference */
    zf__master_names_t nm;   /* the setup's names */
    zf_partial_run_t *given; /* what was given, and what each fetch needs */
    bool started;            /* a call has sent RunGraph */
};

/* ---- handles ------------------------------------------------------------------------ */

static void s_prun_free(zf__master_prun_t *pr)
{
    if (!pr) return;
    zf__master_plan_unref(&pr->p);
    zf__master_names_free(&pr->nm);
    zf_partial_run_free(&pr->given);
    free(pr);
}

zf_status_t zf__master_pruns_new(zf__master_session_t *s)
{
    char owner[160];
    snprintf(owner, sizeof owner, "session %s", s->id);
    return zf_partial_run_table_new(ZF__MASTER_PRUNS_MAX, ZF__MASTER_PRUN_GONE, owner, &s->pruns);
}

/* Aborts and cleans up pr's step on every partition (when it started).
 * Under m->mu. */
static void s_abandon(zf_master_t *m, zf__master_prun_t *pr, const char *why)
{
    if (!pr->started) return;
    zf__master_step_t st = {.m = m, .p = pr->p, .step_id = pr->step_id, .failed = -1};
    st.first = zf_status_new(ZF_CANCELLED, "partial run '%s' abandoned: %s", pr->handle, why);
    zf__master_step_abort_others(&st);
    zf__master_step_cleanup(&st);
    zf_status_clear(&st.first);
}

void zf__master_pruns_drop(zf_master_t *m, zf__master_session_t *s, const char *why)
{
    /* one with a call running is left: its call is cancelled with the
       session's steps and ends it */
    zf__master_prun_t *pr = NULL;
    while (s->pruns && (pr = zf_partial_run_table_drain(s->pruns, false,
                                                        "was abandoned: its session was closed"))) {
        s_abandon(m, pr, why);
        s_prun_free(pr);
    }
}

void zf__master_pruns_free(zf__master_session_t *s)
{
    zf_partial_run_table_free(&s->pruns);
}

/* ---- the setup ------------------------------------------------------------------------ */

static zf_status_t s_setup(zf_master_t *m, zf__master_session_t *s, const Zflow__RunStep *req,
                           Zflow__RunStepReply *out)
{
    for (size_t i = 0; i < req->n_feeds; i++)
        if (req->feeds[i] && req->feeds[i]->tensor)
            return zf_invalid_argument("PartialRunSetup feed '%s' carries a value: a partial "
                                       "run's values come with its calls",
                                       req->feeds[i]->name ? req->feeds[i]->name : "");
    zf__master_prun_t *pr = calloc(1, sizeof *pr);
    if (!pr) return zf_out_of_memory("master");
    zf_status_t st = zf__master_names(req, &pr->nm);
    if (zf_ok(st)) st = zf__master_plan_get(m, s, &pr->nm, &pr->p);
    if (zf_ok(st)) { /* refused before the walk when full; checked again below, as counted */
        pthread_mutex_lock(&m->mu);
        st = zf_partial_run_table_room(s->pruns);
        pthread_mutex_unlock(&m->mu);
    }
    /* the signature's needs, walked once (an extension changes none): the
     * walk under the session's build lock, which an extension holds to
     * change the graph, not the master's */
    if (zf_ok(st))
        st = zf_partial_run_for(
            &pr->p->prun, &m->mu, &s->build, s->graph, (const char *const *)pr->nm.s_feeds,
            pr->nm.ns_feeds, (const char *const *)pr->nm.s_fetches, pr->nm.ns_fetches, &pr->given);
    if (zf_ok(st)) {
        pthread_mutex_lock(&m->mu);
        if (s->closed) {
            st = zf_status_new(ZF_CANCELLED, "session %s was closed", s->id);
        } else {
            /* random and positive, as every step id */
            pr->step_id = (int64_t)((zf_random_id() >> 1) | 1);
            snprintf(pr->handle, sizeof pr->handle, "prun-%016" PRIx64, (uint64_t)pr->step_id);
            st = zf_partial_run_table_add(s->pruns, pr->handle, pr, false);
        }
        pthread_mutex_unlock(&m->mu);
    }
    if (zf_ok(st) && !(out->partial_run_handle = strdup(pr->handle))) {
        pthread_mutex_lock(&m->mu);
        zf_partial_run_table_remove(s->pruns, pr, "failed: out of memory in its setup");
        pthread_mutex_unlock(&m->mu);
        st = zf_out_of_memory("master");
    }
    if (!zf_ok(st)) {
        pthread_mutex_lock(&m->mu);
        s_prun_free(pr);
        pthread_mutex_unlock(&m->mu);
    }
    return st;
}

/* ---- calls ---------------------------------------------------------------------------- */

/* Runs the call as a step of pr's plan with pr's step id. Under m->mu. */
static zf_status_t s_run_call(zf_master_t *m, zf__master_session_t *s, zf__master_prun_t *pr,
                              bool last, const Zflow__RunStep *req, zf__master_names_t *nm,
                              Zflow__RunStepReply *out)
{
    zf__master_step_t st = {.m = m, .prun_step_id = pr->step_id, .prun_last = last};
    zf_status_t res = zf__master_step_begin(&st, s, pr->p, req, nm, out);
    if (!zf_ok(res)) return res;
    pr->started = true;
    zf__master_step_wait(&st);
    /* a plan dropped for a lost executor is the setup's signature's */
    char *call_sig = nm->sig;
    nm->sig = pr->nm.sig;
    res = zf__master_step_end(&st, s, req, nm, out, true);
    nm->sig = call_sig;
    return res;
}

static zf_status_t s_call(zf_master_t *m, zf__master_session_t *s, const Zflow__RunStep *req,
                          Zflow__RunStepReply *out)
{
    if (req->n_targets)
        return zf_invalid_argument("a partial run's call names no targets (target '%s'): "
                                   "targets are given to PartialRunSetup",
                                   req->targets[0] ? req->targets[0] : "");
    if (req->trace_level > 0 || req->output_partition_graphs)
        return zf_unimplemented("a partial run's call is not traced and returns no partition "
                                "graphs");
    zf__master_names_t nm = {0};
    zf_status_t st = zf__master_names(req, &nm);
    pthread_mutex_lock(&m->mu);
    void *taken = NULL; /* busy: its call runs */
    if (zf_ok(st)) st = zf_partial_run_table_take(s->pruns, req->partial_run_handle, &taken);
    zf__master_prun_t *pr = taken;
    const char *const *feeds = (const char *const *)nm.feeds;
    const char *const *fetches = (const char *const *)nm.fetches;
    if (zf_ok(st)) st = zf_partial_run_check(pr->given, feeds, nm.n_feeds, fetches, nm.n_fetches);
    for (int i = 0; zf_ok(st) && i < nm.n_feeds; i++)
        st = zf__master_check_feed(s->graph, nm.feeds[i], req->feeds[i]->tensor);
    if (zf_ok(st)) {
        bool last = zf_partial_run_mark(pr->given, feeds, nm.n_feeds, fetches, nm.n_fetches);
        st = s_run_call(m, s, pr, last, req, &nm, out);
        if (!zf_ok(st) || last) {
            char why[512];
            if (zf_ok(st))
                snprintf(why, sizeof why, "has completed: every feed and fetch of it was given");
            else
                snprintf(why, sizeof why, "failed: %s", zf_status_msg(&st));
            zf_partial_run_table_remove(s->pruns, pr, why);
            s_prun_free(pr);
        } else {
            zf_partial_run_table_release(s->pruns, pr);
        }
    } else if (pr) { /* a refused call leaves the partial run as it was */
        zf_partial_run_table_release(s->pruns, pr);
    }
    pthread_mutex_unlock(&m->mu);
    zf__master_names_free(&nm);
    return st;
}

zf_status_t zf__master_partial(zf_master_t *m, zf__master_session_t *s, const Zflow__RunStep *req,
                               Zflow__RunStepReply *out)
{
    if (req->partial_run_setup && req->partial_run_handle && *req->partial_run_handle)
        return zf_invalid_argument("RunStep is both a PartialRunSetup and a partial run call");
    return req->partial_run_setup ? s_setup(m, s, req, out) : s_call(m, s, req, out);
}
