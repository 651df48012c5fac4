/* One step of a plan: RunGraph to every partition, the first error wins
 * and aborts the others, timeouts, CleanupGraph after a failure, the
 * fetches collected; zf_master_run_step() runs one on the caller's thread
 * (scheduler/master/master.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dtype.h"
#include "common/log.h"
#include "common/proto_util.h"
#include "common/random.h"
#include "common/transport.h"
#include "scheduler/master/master_internal.h"
#include "scheduler/graph/placer.h"

#define S_LOG "master"

/* ---- steps ------------------------------------------------------------------- */

/* RunGraph to partition i with the feeds it receives. Under m->mu. */
static zf_status_t s_start_part(zf__master_step_t *st, int i, const Zflow__RunStep *req,
                                const zf__master_names_t *nm)
{
    const zf_partition_t *part = &st->p->set->parts[i];
    Zflow__NamedTensor *feeds = calloc((size_t)part->n_feeds + 1, sizeof *feeds);
    Zflow__NamedTensor **fp = calloc((size_t)part->n_feeds + 1, sizeof *fp);
    char **fetch_keys = calloc((size_t)part->n_fetches + 1, sizeof *fetch_keys);
    if (!feeds || !fp || !fetch_keys) {
        free(feeds);
        free(fp);
        free(fetch_keys);
        return zf_out_of_memory("master");
    }
    /* a partial run's call feeds and fetches only what it names */
    bool partial = st->prun_step_id != 0;
    size_t n_feeds = 0, n_fetches = 0;
    for (int k = 0; k < part->n_feeds; k++) {
        int j = 0;
        while (j < nm->n_feeds && strcmp(nm->feeds[j], part->feeds[k].tensor_name) != 0) j++;
        if (j == nm->n_feeds) continue;
        zflow__named_tensor__init(&feeds[n_feeds]);
        feeds[n_feeds].name = part->feeds[k].key;
        feeds[n_feeds].tensor = req->feeds[j]->tensor;
        fp[n_feeds] = &feeds[n_feeds];
        n_feeds++;
    }
    for (int k = 0; k < part->n_fetches; k++) {
        int j = 0;
        while (partial && j < nm->n_fetches &&
               strcmp(nm->fetches[j], part->fetches[k].tensor_name) != 0)
            j++;
        if (!partial || j < nm->n_fetches) fetch_keys[n_fetches++] = part->fetches[k].key;
    }
    Zflow__RunGraph rg = ZFLOW__RUN_GRAPH__INIT;
    rg.graph_handle = st->p->handle[i];
    rg.incarnation = st->p->incarnation[i];
    rg.step_id = st->step_id;
    rg.n_feeds = n_feeds;
    rg.feeds = fp;
    rg.n_fetch_keys = n_fetches;
    rg.fetch_keys = fetch_keys;
    rg.trace = !partial && (req->trace_level > 0 || st->s->cost_every > 0);
    rg.is_partial = partial;
    rg.is_last_partial_run = partial && st->prun_last;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_GRAPH;
    env.run_graph = &rg;
    zf__master_call_start(st->m, &st->calls[i], part->device, rg.incarnation, &env);
    free(feeds);
    free(fp);
    free(fetch_keys);
    return ZF_STATUS_OK;
}

/* AbortStep with the step's error to every partition but the failed one. */
void zf__master_step_abort_others(zf__master_step_t *st)
{
    Zflow__Status *cause = NULL;
    zf_status_t e = zf_status_to_proto(&st->first, &cause);
    zf_status_clear(&e);
    for (int i = 0; i < st->p->set->n_parts; i++) {
        if (i == st->failed) continue;
        Zflow__AbortStep ab = ZFLOW__ABORT_STEP__INIT;
        ab.step_id = st->step_id;
        ab.status = cause;
        Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
        env.body_case = ZFLOW__ENVELOPE__BODY_ABORT_STEP;
        env.abort_step = &ab;
        zf__master_send_oneway(st->m, st->p->set->parts[i].device, &env);
    }
    if (cause) zflow__status__free_unpacked(cause, NULL);
    st->aborted = true;
}

/* Looks at the replies that arrived since the last look. Under m->mu.
 * Returns true when every partition has answered. */
bool zf__master_step_scan(zf__master_step_t *st)
{
    bool all = true;
    for (int i = 0; i < st->p->set->n_parts; i++) {
        if (!st->calls[i].done) {
            all = false;
            continue;
        }
        if (st->seen[i]) continue;
        st->seen[i] = true;
        zf_status_t e =
            zf__master_reply_status(&st->calls[i], ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY);
        if (e.code == ZF_ABORTED) st->restarted = true;
        if (!zf_ok(e) && zf_ok(st->first)) {
            st->first = zf__master_with_device(e, st->p->set->parts[i].device);
            st->failed = i;
        } else {
            zf_status_clear(&e);
        }
    }
    return all;
}

int zf__master_cancel_running(zf_master_t *m, zf__master_session_t *s, const char *why)
{
    int n = 0;
    for (zf__master_step_t *st = s->running; st; st = st->next_running) {
        if (!zf_ok(st->first)) continue; /* failing already: its error stands */
        st->first = zf_status_new(ZF_CANCELLED, "step %" PRId64 " cancelled: %s", st->step_id, why);
        st->failed = -1; /* every partition is told to abort */
        n++;
    }
    if (n) pthread_cond_broadcast(&m->cv);
    return n;
}

zf_status_t zf__master_step_deadline(const zf__master_step_t *st)
{
    return zf_status_new(ZF_DEADLINE_EXCEEDED,
                         "step %" PRId64 " did not finish within %" PRId64 " ms%s", st->step_id,
                         st->timeout_ms,
                         st->default_timeout ? " (the scheduler's default step timeout, "
                                               "zflow-scheduler --step-timeout-ms)"
                                             : "");
}

/* Waits for the partitions: the first error aborts the others; the
 * deadline aborts them all; stragglers are given abort_grace_ms. Under
 * m->mu. */
void zf__master_step_wait(zf__master_step_t *st)
{
    struct timespec deadline, grace;
    if (st->timeout_ms > 0) zf__master_deadline(&deadline, st->timeout_ms);
    while (!zf__master_step_scan(st)) {
        if (!zf_ok(st->first) && !st->aborted) {
            zf__master_step_abort_others(st);
            zf__master_deadline(&grace, st->m->abort_grace_ms);
        }
        int rc = 0;
        if (st->aborted)
            rc = pthread_cond_timedwait(&st->m->cv, &st->m->mu, &grace);
        else if (st->timeout_ms > 0)
            rc = pthread_cond_timedwait(&st->m->cv, &st->m->mu, &deadline);
        else
            rc = pthread_cond_wait(&st->m->cv, &st->m->mu);
        if (rc != ETIMEDOUT) continue;
        if (st->aborted) break; /* the stragglers are given up on */
        st->first = zf__master_step_deadline(st);
        st->failed = -1;
    }
}

/* CleanupGraph for the step on every partition's executor. Under m->mu. */
void zf__master_step_cleanup(zf__master_step_t *st)
{
    for (int i = 0; i < st->p->set->n_parts; i++) {
        Zflow__CleanupGraph cg = ZFLOW__CLEANUP_GRAPH__INIT;
        cg.step_id = st->step_id;
        Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
        env.body_case = ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH;
        env.cleanup_graph = &cg;
        zf__master_send_oneway(st->m, st->p->set->parts[i].device, &env);
    }
}

static zf_status_t s_copy_tensor(const Tensorflow__TensorProto *t, Tensorflow__TensorProto **out)
{
    ProtobufCMessage *c = NULL;
    zf_status_t st = zf_proto_clone(&t->base, "master: fetch copy", &c);
    *out = (Tensorflow__TensorProto *)c;
    return st;
}

/* The tensor some partition returned under key, or NULL. */
static const Tensorflow__TensorProto *s_find_fetch(const zf__master_step_t *st, const char *key)
{
    for (int i = 0; i < st->p->set->n_parts; i++) {
        const Zflow__Envelope *env = st->calls[i].reply;
        if (!env || env->body_case != ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY) continue;
        const Zflow__RunGraphReply *r = env->run_graph_reply;
        for (size_t k = 0; k < r->n_fetches; k++)
            if (r->fetches[k] && r->fetches[k]->name && strcmp(r->fetches[k]->name, key) == 0)
                return r->fetches[k]->tensor;
    }
    return NULL;
}

/* The reply's fetches, in the request's order and names. */
static zf_status_t s_collect(const zf__master_step_t *st, const Zflow__RunStep *req,
                             const zf__master_names_t *nm, Zflow__RunStepReply *out)
{
    out->fetches = calloc((size_t)nm->n_fetches + 1, sizeof *out->fetches);
    if (!out->fetches) return zf_out_of_memory("master");
    for (int j = 0; j < nm->n_fetches; j++) {
        char **hit = bsearch(&nm->fetches[j], st->p->fetches, (size_t)st->p->n_fetches,
                             sizeof(char *), zf__master_cmp_str);
        const char *key = hit ? st->p->fetch_key[hit - st->p->fetches] : "";
        const Tensorflow__TensorProto *t = s_find_fetch(st, key);
        if (!t) return zf_internal("no executor returned fetch '%s' (key %s)", nm->fetches[j], key);
        Zflow__NamedTensor *nt = malloc(sizeof *nt);
        if (!nt) return zf_out_of_memory("master");
        zflow__named_tensor__init(nt);
        out->fetches[out->n_fetches++] = nt;
        if (!(nt->name = strdup(req->fetches[j]))) return zf_out_of_memory("master");
        ZF_TRY(s_copy_tensor(t, &nt->tensor));
    }
    return ZF_STATUS_OK;
}

/* A traced step's kernel runs: every partition's, moved into out, and
 * folded into the plan's cost model. */
static zf_status_t s_collect_runs(const zf__master_step_t *st, Zflow__RunStepReply *out)
{
    size_t total = 0;
    for (int i = 0; i < st->p->set->n_parts; i++) {
        const Zflow__Envelope *env = st->calls[i].reply;
        if (env && env->body_case == ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY)
            total += env->run_graph_reply->n_node_runs;
    }
    out->step_stats = calloc(total + 1, sizeof *out->step_stats);
    if (!out->step_stats) return zf_out_of_memory("master");
    for (int i = 0; i < st->p->set->n_parts; i++) {
        Zflow__Envelope *env = st->calls[i].reply;
        if (!env || env->body_case != ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY) continue;
        Zflow__RunGraphReply *r = env->run_graph_reply;
        for (size_t k = 0; k < r->n_node_runs; k++)
            out->step_stats[out->n_step_stats++] = r->node_runs[k];
        r->n_node_runs = 0;
    }
    zf__master_cost_add(st->p, out->step_stats, out->n_step_stats);
    return ZF_STATUS_OK;
}

/* What a successful step's reply carries of its trace: its kernel runs
 * when the client asked for them, the plan's cost graph then and every
 * build_cost_model-th step of the plan. The runs of a step traced only for the cost
 * model are dropped once counted. Under m->mu. */
static zf_status_t s_collect_trace(zf__master_step_t *st, zf__master_session_t *s,
                                   const Zflow__RunStep *req, Zflow__RunStepReply *out)
{
    bool asked = req->trace_level > 0;
    if (!asked && s->cost_every <= 0) return ZF_STATUS_OK;
    ZF_TRY(s_collect_runs(st, out));
    bool cost = asked || ++st->p->cost_steps % s->cost_every == 0;
    if (!asked) {
        for (size_t k = 0; k < out->n_step_stats; k++)
            zflow__node_run__free_unpacked(out->step_stats[k], NULL);
        free(out->step_stats);
        out->step_stats = NULL;
        out->n_step_stats = 0;
    }
    return cost ? zf__master_cost_graph(st->p, out) : ZF_STATUS_OK;
}

/* The plan's partitions, copied into out (RunOptions.output_partition_graphs). */
static zf_status_t s_collect_graphs(const zf__master_step_t *st, Zflow__RunStepReply *out)
{
    int n = st->p->set->n_parts;
    out->partition_graphs = calloc((size_t)n + 1, sizeof *out->partition_graphs);
    if (!out->partition_graphs) return zf_out_of_memory("master");
    for (int i = 0; i < n; i++) {
        ProtobufCMessage *copy = NULL;
        ZF_TRY(zf_proto_clone(&st->p->set->parts[i].graph->base, "master: partition graph", &copy));
        out->partition_graphs[out->n_partition_graphs++] = (Tensorflow__GraphDef *)copy;
    }
    return ZF_STATUS_OK;
}

/* Gives st a step id and sends RunGraph to every partition of plan p.
 * Under m->mu. */
zf_status_t zf__master_step_begin(zf__master_step_t *st, zf__master_session_t *s,
                                  zf__master_plan_t *p, const Zflow__RunStep *req,
                                  const zf__master_names_t *nm, Zflow__RunStepReply *out)
{
    int n = p->set->n_parts;
    zf_master_t *m = st->m;
    int64_t prun_step_id = st->prun_step_id;
    bool prun_last = st->prun_last;
    *st = (zf__master_step_t){
        .m = m, .p = p, .failed = -1, .prun_step_id = prun_step_id, .prun_last = prun_last};
    /* random and positive: no executor's peer can guess the next one */
    st->step_id = prun_step_id ? prun_step_id : (int64_t)((zf_random_id() >> 1) | 1);
    st->timeout_ms = zf__master_step_timeout(m, s, req->timeout_ms);
    st->default_timeout = req->timeout_ms <= 0 && s->timeout_ms <= 0 && st->timeout_ms > 0;
    st->calls = calloc((size_t)n + 1, sizeof *st->calls);
    st->seen = calloc((size_t)n + 1, sizeof *st->seen);
    if (!st->calls || !st->seen) {
        free(st->calls);
        free(st->seen);
        return zf_out_of_memory("master");
    }
    out->step_id = st->step_id;
    st->s = s;
    st->next_running = s->running;
    s->running = st;
    if (s->cancel_why) zf__master_cancel_running(m, s, s->cancel_why);
    for (int i = 0; i < n; i++) {
        zf_status_t e = s_start_part(st, i, req, nm);
        if (!zf_ok(e)) { /* out of memory: fail this partition, abort the rest */
            st->calls[i] = (zf__master_call_t){.done = true, .status = e};
            snprintf(st->calls[i].device, sizeof st->calls[i].device, "%s",
                     p->set->parts[i].device);
        }
    }
    return ZF_STATUS_OK;
}

/* Ends a step whose partitions have answered (or were given up on):
 * cleanup everywhere, the fetches into out, the plan dropped when an
 * executor failed or restarted. Returns the step's status. Under m->mu. */
zf_status_t zf__master_step_end(zf__master_step_t *st, zf__master_session_t *s,
                                const Zflow__RunStep *req, const zf__master_names_t *nm,
                                Zflow__RunStepReply *out, bool cleanup)
{
    for (zf__master_step_t **pp = &s->running; *pp; pp = &(*pp)->next_running) {
        if (*pp != st) continue;
        *pp = st->next_running;
        break;
    }
    st->s = NULL;
    if (cleanup && !zf_ok(st->first)) zf__master_step_cleanup(st);
    zf_status_t res = st->first;
    if (zf_ok(res)) res = s_collect(st, req, nm, out);
    if (zf_ok(res) && !st->prun_step_id) res = s_collect_trace(st, s, req, out);
    if (zf_ok(res) && req->output_partition_graphs) res = s_collect_graphs(st, out);
    if (st->restarted || res.code == ZF_UNAVAILABLE) zf__master_plan_drop(st->m, s, nm->sig, st->p);
    for (int i = 0; i < st->p->set->n_parts; i++) zf__master_call_finish(st->m, &st->calls[i]);
    free(st->calls);
    free(st->seen);
    st->calls = NULL;
    st->seen = NULL;
    return res;
}

/* Runs one step of plan p; on success fills out's fetches. */
static zf_status_t s_step(zf_master_t *m, zf__master_session_t *s, zf__master_plan_t *p,
                          const Zflow__RunStep *req, const zf__master_names_t *nm,
                          Zflow__RunStepReply *out)
{
    zf__master_step_t st = {.m = m};
    pthread_mutex_lock(&m->mu);
    zf_status_t res = zf__master_step_begin(&st, s, p, req, nm, out);
    if (zf_ok(res)) {
        s->step_calls = st.calls; /* progress for zf_master_job_poll() */
        s->step_parts = p->set->n_parts;
        zf__master_step_wait(&st);
        if (s->step_calls == st.calls) s->step_calls = NULL;
        res = zf__master_step_end(&st, s, req, nm, out, true);
    }
    pthread_mutex_unlock(&m->mu);
    return res;
}

zf_status_t zf__master_reply_new(Zflow__RunStepReply **out)
{
    *out = malloc(sizeof **out);
    if (!*out) return zf_out_of_memory("master");
    zflow__run_step_reply__init(*out);
    return ZF_STATUS_OK;
}

zf_status_t zf__master_run_reply(Zflow__RunStepReply *r, zf_status_t st, Zflow__Envelope *rep)
{
    if (!r) {
        r = malloc(sizeof *r);
        if (!r) {
            zf_status_clear(&st);
            return zf_out_of_memory("master");
        }
        zflow__run_step_reply__init(r);
    }
    rep->body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY;
    rep->run_step_reply = r;
    if (!zf_ok(st)) {
        if (r->status) zflow__status__free_unpacked(r->status, NULL);
        r->status = zf__master_status_proto(&st);
        if (!r->status) {
            zf_status_clear(&st);
            return zf_out_of_memory("master");
        }
    }
    zf_status_clear(&st);
    return ZF_STATUS_OK;
}

zf_status_t zf_master_run_step(zf_master_t *m, const Zflow__RunStep *req, Zflow__RunStepReply **out)
{
    *out = NULL;
    if (!req) return zf_invalid_argument("RunStep is empty");
    pthread_mutex_lock(&m->mu);
    zf_status_t missing = ZF_STATUS_OK;
    zf__master_session_t *s = zf__master_session_find(m, req->session, &missing);
    pthread_mutex_unlock(&m->mu);
    if (!s) return missing;
    if (req->partial_run_setup || (req->partial_run_handle && *req->partial_run_handle)) {
        Zflow__RunStepReply *r = NULL;
        zf_status_t st = zf__master_reply_new(&r);
        if (zf_ok(st)) st = zf__master_partial(m, s, req, r);
        if (zf_ok(st)) {
            zf_status_t ok = ZF_STATUS_OK;
            st = zf_status_to_proto(&ok, &r->status);
        }
        if (!zf_ok(st) && r) zflow__run_step_reply__free_unpacked(r, NULL);
        *out = zf_ok(st) ? r : NULL;
        pthread_mutex_lock(&m->mu);
        zf__master_session_unref(m, &s);
        pthread_mutex_unlock(&m->mu);
        return st;
    }
    zf__master_names_t nm = {0};
    zf__master_plan_t *p = NULL;
    zf_status_t st = zf__master_names(req, &nm);
    pthread_mutex_lock(&m->mu); /* an ExtendSession replaces the graph under it */
    for (int i = 0; zf_ok(st) && i < nm.n_feeds; i++)
        st = zf__master_check_feed(s->graph, nm.feeds[i], req->feeds[i]->tensor);
    pthread_mutex_unlock(&m->mu);
    if (zf_ok(st)) st = zf__master_plan_get(m, s, &nm, &p);
    Zflow__RunStepReply *r = NULL;
    if (zf_ok(st)) st = zf__master_reply_new(&r);
    if (zf_ok(st)) st = s_step(m, s, p, req, &nm, r);
    if (zf_ok(st)) {
        zf_status_t ok = ZF_STATUS_OK;
        st = zf_status_to_proto(&ok, &r->status);
    }
    if (!zf_ok(st) && r) {
        zflow__run_step_reply__free_unpacked(r, NULL);
        r = NULL;
    }
    *out = r;
    zf__master_names_free(&nm);
    pthread_mutex_lock(&m->mu);
    zf__master_plan_unref(&p);
    zf__master_session_unref(m, &s);
    pthread_mutex_unlock(&m->mu);
    return st;
}

int zf_master_num_plans(zf_master_t *m, const char *session)
{
    pthread_mutex_lock(&m->mu);
    uintptr_t v = 0;
    int n = -1;
    if (session && zf_strmap_get(m->sessions, session, &v))
        n = (int)zf_strmap_size(((zf__master_session_t *)v)->plans);
    pthread_mutex_unlock(&m->mu);
    return n;
}
