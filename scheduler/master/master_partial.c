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
#include "scheduler/master/master_internal.h"

struct zf__master_prun {
    struct zf__master_prun *next;
    char handle[24];
    int64_t step_id;
    zf__master_plan_t *p;  /* a reference */
    zf__master_names_t nm; /* the setup's names */
    bool *fed, *fetched;   /* per nm.s_feeds, nm.s_fetches */
    /* per fetch k of nm.s_fetches: the feeds it needs (indexes into
     * nm.s_feeds) are needs[needs_at[k] .. needs_at[k + 1]), and self[k]
     * is the feed it is itself, or -1 */
    int *needs, *needs_at, *self;
    int pending;  /* feeds and fetches not given yet */
    bool started; /* a call has sent RunGraph */
    bool busy;    /* a call runs now */
};

/* ---- handles ------------------------------------------------------------------------ */

static void s_prun_free(zf__master_prun_t *pr)
{
    if (!pr) return;
    zf__master_plan_unref(&pr->p);
    zf__master_names_free(&pr->nm);
    free(pr->fed);
    free(pr->fetched);
    free(pr->needs);
    free(pr->needs_at);
    free(pr->self);
    free(pr);
}

/* Takes pr off s's list and remembers why its handle is gone (for a later
 * call naming it). Under m->mu. */
static void s_unlink(zf__master_session_t *s, zf__master_prun_t *pr, const char *why)
{
    for (zf__master_prun_t **pp = &s->pruns; *pp; pp = &(*pp)->next) {
        if (*pp != pr) continue;
        *pp = pr->next;
        s->n_pruns--;
        break;
    }
    size_t hl = strlen(pr->handle), wl = strlen(why);
    char *gone = malloc(hl + wl + 2);
    if (!gone) return; /* the handle is then "unknown", still refused */
    memcpy(gone, pr->handle, hl + 1);
    memcpy(gone + hl + 1, why, wl + 1);
    int slot = s->prun_gone_next++ % ZF__MASTER_PRUN_GONE;
    free(s->prun_gone[slot]);
    s->prun_gone[slot] = gone;
}

/* The error for a handle not live in s: why it went, when it is one of the
 * latest to go. Under m->mu. */
static zf_status_t s_unknown(const zf__master_session_t *s, const char *handle)
{
    for (int i = 0; i < ZF__MASTER_PRUN_GONE; i++) {
        const char *g = s->prun_gone[i];
        if (g && strcmp(g, handle) == 0)
            return zf_status_new(ZF_FAILED_PRECONDITION, "partial run '%s' %s", handle,
                                 g + strlen(g) + 1);
    }
    return zf_invalid_argument("Must run PartialRunSetup before performing partial runs "
                               "(handle '%s' is not known in this session)",
                               handle);
}

static zf__master_prun_t *s_find(const zf__master_session_t *s, const char *handle)
{
    for (zf__master_prun_t *pr = s->pruns; pr; pr = pr->next)
        if (strcmp(pr->handle, handle) == 0) return pr;
    return NULL;
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
    for (zf__master_prun_t *pr = s->pruns, *next = NULL; pr; pr = next) {
        next = pr->next;
        if (pr->busy) continue; /* its call is cancelled with the session's steps and ends it */
        s_abandon(m, pr, why);
        s_unlink(s, pr, "was abandoned: its session was closed");
        s_prun_free(pr);
    }
}

void zf__master_pruns_free(zf__master_session_t *s)
{
    for (int i = 0; i < ZF__MASTER_PRUN_GONE; i++) free(s->prun_gone[i]);
}

/* ---- what each fetch needs ----------------------------------------------------------- */

/* Index of name in the sorted v[0..n), or -1. */
static int s_index(char **v, int n, const char *name)
{
    char **hit = bsearch(&name, v, (size_t)n, sizeof *v, zf__master_cmp_str);
    return hit ? (int)(hit - v) : -1;
}

/* The declared feed that is node:port, or -1 (feeds resolved to (node,
 * port) in fnode/fport, -1 for a name not in g). */
static int s_feed_at(const int *fnode, const int *fport, int nf, int node, int port)
{
    for (int i = 0; i < nf; i++)
        if (fnode[i] == node && fport[i] == port) return i;
    return -1;
}

/* For each declared fetch, the declared feeds it needs (TensorFlow's
 * CheckFetches, worked out once): the session's graph walked back from
 * the fetch, each walk stopping at a declared feed, which the fetch needs
 * (its producer does not run for the step); a fetch that is itself a feed
 * needs only that feed. The graph's existing nodes never change (an
 * extension only adds nodes), so this stays true for the partial run's
 * life. Under m->mu. */
static zf_status_t s_needs(const zf_graph_t *g, zf__master_prun_t *pr)
{
    int n = zf_graph_num_nodes(g), nf = pr->nm.ns_feeds, nx = pr->nm.ns_fetches;
    int *fnode = malloc(((size_t)nf + 1) * sizeof *fnode);
    int *fport = malloc(((size_t)nf + 1) * sizeof *fport);
    int *seen = calloc((size_t)n + 1, sizeof *seen); /* the fetch + 1 that saw the node */
    int *stack = malloc(((size_t)n + 1) * sizeof *stack);
    bool *hit = calloc((size_t)nf + 1, sizeof *hit);
    pr->needs_at = calloc((size_t)nx + 1, sizeof *pr->needs_at);
    pr->self = malloc(((size_t)nx + 1) * sizeof *pr->self);
    size_t cap = 16, used = 0;
    pr->needs = malloc(cap * sizeof *pr->needs);
    zf_status_t st = fnode && fport && seen && stack && hit && pr->needs_at && pr->self && pr->needs
                         ? ZF_STATUS_OK
                         : zf_out_of_memory("master");
    for (int k = 0; zf_ok(st) && k < nf; k++) {
        const char *node = NULL;
        size_t len = 0;
        zf_status_t e = zf_tensor_name_parse(pr->nm.s_feeds[k], &node, &len, &fport[k]);
        fnode[k] = zf_ok(e) ? zf_graph_find_node_n(g, node, len) : -1;
        zf_status_clear(&e);
    }
    for (int f = 0; zf_ok(st) && f < nx; f++) {
        pr->needs_at[f] = (int)used;
        const char *node = NULL;
        size_t len = 0;
        int port = 0;
        zf_status_t e = zf_tensor_name_parse(pr->nm.s_fetches[f], &node, &len, &port);
        int start = zf_ok(e) ? zf_graph_find_node_n(g, node, len) : -1;
        zf_status_clear(&e);
        pr->self[f] = start >= 0 ? s_feed_at(fnode, fport, nf, start, port) : -1;
        if (pr->self[f] >= 0 || start < 0) continue; /* the plan refused unknown names */
        memset(hit, 0, ((size_t)nf + 1) * sizeof *hit);
        int top = 0;
        stack[top++] = start;
        seen[start] = f + 1;
        while (top > 0 && zf_ok(st)) {
            const zf_edge_t *in = NULL;
            int v = stack[--top], ne = zf_graph_in_edges(g, v, &in);
            for (int i = 0; i < ne && zf_ok(st); i++) {
                int src = in[i].src;
                int k = zf_edge_is_control(&in[i])
                            ? -1
                            : s_feed_at(fnode, fport, nf, src, in[i].src_port);
                if (k < 0 && seen[src] != f + 1) {
                    seen[src] = f + 1;
                    stack[top++] = src;
                } else if (k >= 0 && !hit[k]) {
                    hit[k] = true;
                    if (used == cap) {
                        int *grown = realloc(pr->needs, 2 * cap * sizeof *grown);
                        if (!grown) {
                            st = zf_out_of_memory("master");
                            break;
                        }
                        pr->needs = grown;
                        cap *= 2;
                    }
                    pr->needs[used++] = k;
                }
            }
        }
    }
    if (zf_ok(st)) pr->needs_at[nx] = (int)used;
    free(fnode);
    free(fport);
    free(seen);
    free(stack);
    free(hit);
    return st;
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
    if (zf_ok(st)) {
        pr->fed = calloc((size_t)pr->nm.ns_feeds + 1, sizeof *pr->fed);
        pr->fetched = calloc((size_t)pr->nm.ns_fetches + 1, sizeof *pr->fetched);
        if (!pr->fed || !pr->fetched) st = zf_out_of_memory("master");
        pr->pending = pr->nm.ns_feeds + pr->nm.ns_fetches;
    }
    if (zf_ok(st)) st = zf__master_plan_get(m, s, &pr->nm, &pr->p);
    if (zf_ok(st)) {
        pthread_mutex_lock(&m->mu);
        if (s->closed)
            st = zf_status_new(ZF_CANCELLED, "session %s was closed", s->id);
        else if (s->n_pruns >= ZF__MASTER_PRUNS_MAX)
            st = zf_status_new(ZF_RESOURCE_EXHAUSTED,
                               "session %s has %d partial runs open already (the most it "
                               "keeps): finish or abandon one first",
                               s->id, s->n_pruns);
        if (zf_ok(st)) st = s_needs(s->graph, pr);
        if (zf_ok(st)) {
            /* random and positive, as every step id */
            pr->step_id = (int64_t)((zf_random_id() >> 1) | 1);
            snprintf(pr->handle, sizeof pr->handle, "prun-%016" PRIx64, (uint64_t)pr->step_id);
            pr->next = s->pruns;
            s->pruns = pr;
            s->n_pruns++;
        }
        pthread_mutex_unlock(&m->mu);
    }
    if (zf_ok(st) && !(out->partial_run_handle = strdup(pr->handle))) {
        pthread_mutex_lock(&m->mu);
        s_unlink(s, pr, "failed: out of memory in its setup");
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

/* TensorFlow's checks of a call's names against the setup: every feed and
 * fetch declared there and not given before. Under m->mu. */
static zf_status_t s_check_names(const zf__master_prun_t *pr, const zf__master_names_t *nm)
{
    for (int i = 0; i < nm->n_feeds; i++) {
        int k = s_index(pr->nm.s_feeds, pr->nm.ns_feeds, nm->feeds[i]);
        if (k < 0)
            return zf_invalid_argument("The feed %s was not specified in partial_run_setup.",
                                       nm->feeds[i]);
        if (pr->fed[k])
            return zf_invalid_argument("The feed %s has already been fed.", nm->feeds[i]);
    }
    for (int i = 0; i < nm->n_fetches; i++) {
        int k = s_index(pr->nm.s_fetches, pr->nm.ns_fetches, nm->fetches[i]);
        if (k < 0)
            return zf_invalid_argument("The fetch %s was not specified in partial_run_setup.",
                                       nm->fetches[i]);
        if (pr->fetched[k])
            return zf_invalid_argument("The fetch %s has already been fetched.", nm->fetches[i]);
    }
    return ZF_STATUS_OK;
}

/* Whether feed k of the setup is given by an earlier call or by this one. */
static bool s_given(const zf__master_prun_t *pr, const zf__master_names_t *nm, int k)
{
    return pr->fed[k] || s_index(nm->s_feeds, nm->ns_feeds, pr->nm.s_feeds[k]) >= 0;
}

/* TensorFlow's CheckFetches: no fetch of the call may need a feed that
 * has not been given yet (the call would wait for it forever). Under
 * m->mu. */
static zf_status_t s_check_computable(const zf__master_prun_t *pr, const zf__master_names_t *nm)
{
    for (int i = 0; i < nm->n_fetches; i++) {
        int f = s_index(pr->nm.s_fetches, pr->nm.ns_fetches, nm->fetches[i]);
        if (f < 0) continue; /* refused by s_check_names already */
        if (pr->self[f] >= 0 && !s_given(pr, nm, pr->self[f]))
            return zf_invalid_argument("Fetch %s can't be computed from the feeds that have been "
                                       "fed so far: it is itself a feed still to come",
                                       nm->fetches[i]);
        for (int j = pr->needs_at[f]; j < pr->needs_at[f + 1]; j++)
            if (!s_given(pr, nm, pr->needs[j]))
                return zf_invalid_argument("Fetch %s can't be computed from the feeds that have "
                                           "been fed so far: it needs feed %s",
                                           nm->fetches[i], pr->nm.s_feeds[pr->needs[j]]);
    }
    return ZF_STATUS_OK;
}

/* Marks the call's feeds and fetches given; true when none is left (the
 * call is the step's last). Under m->mu. */
static bool s_mark(zf__master_prun_t *pr, const zf__master_names_t *nm)
{
    for (int i = 0; i < nm->n_feeds; i++) {
        pr->fed[s_index(pr->nm.s_feeds, pr->nm.ns_feeds, nm->feeds[i])] = true;
        pr->pending--;
    }
    for (int i = 0; i < nm->ns_fetches; i++) { /* a fetch named twice counts once */
        pr->fetched[s_index(pr->nm.s_fetches, pr->nm.ns_fetches, nm->s_fetches[i])] = true;
        pr->pending--;
    }
    return pr->pending == 0;
}

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
    zf__master_prun_t *pr = zf_ok(st) ? s_find(s, req->partial_run_handle) : NULL;
    if (zf_ok(st) && !pr) st = s_unknown(s, req->partial_run_handle);
    if (zf_ok(st) && pr->busy)
        st = zf_status_new(ZF_FAILED_PRECONDITION,
                           "partial run '%s' has a call running: its calls run one at a time",
                           pr->handle);
    if (zf_ok(st)) st = s_check_names(pr, &nm);
    for (int i = 0; zf_ok(st) && i < nm.n_feeds; i++)
        st = zf__master_check_feed(s->graph, nm.feeds[i], req->feeds[i]->tensor);
    if (zf_ok(st)) st = s_check_computable(pr, &nm);
    if (zf_ok(st)) {
        bool last = s_mark(pr, &nm);
        pr->busy = true;
        st = s_run_call(m, s, pr, last, req, &nm, out);
        pr->busy = false;
        if (!zf_ok(st) || last) {
            char why[512];
            if (zf_ok(st))
                snprintf(why, sizeof why, "has completed: every feed and fetch of it was given");
            else
                snprintf(why, sizeof why, "failed: %s", zf_status_msg(&st));
            s_unlink(s, pr, why);
            s_prun_free(pr);
        }
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
