/* The master's plans (placement, partitioning, graph registration, cached
 * per signature) and steps (RunGraph everywhere, first error wins, abort,
 * timeout, cleanup); see scheduler/master/master.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dtype.h"
#include "common/log.h"
#include "common/proto_util.h"
#include "common/transport.h"
#include "scheduler/master/master_internal.h"
#include "scheduler/graph/placer.h"

#define S_LOG "master"

struct zf__master_plan {
    char **feeds; /* canonical "node:port", sorted, unique */
    int n_feeds;
    char **fetches; /* canonical, sorted, unique */
    int n_fetches;
    zf_partition_set_t *set;
    uint64_t *incarnation;  /* per partition: its executor's, when placed */
    char **handle;          /* per partition: graph handle */
    int64_t *nodes;         /* per partition: node count, its share of the load */
    const char **fetch_key; /* per fetch: rendezvous key (borrowed from set) */
    int refs;               /* under m->mu; the session's cache holds one */
    bool dropped;
};

/* ---- plans ------------------------------------------------------------------- */

static void s_plan_free(zf__master_plan_t *p)
{
    if (!p) return;
    for (int i = 0; p->handle && p->set && i < p->set->n_parts; i++) free(p->handle[i]);
    free(p->handle);
    free(p->incarnation);
    free(p->nodes);
    free(p->fetch_key);
    zf_partition_set_destroy(&p->set);
    zf__master_free_strv(p->feeds, p->n_feeds);
    zf__master_free_strv(p->fetches, p->n_fetches);
    free(p);
}

void zf__master_plan_ref(zf__master_plan_t *p)
{
    p->refs++;
}

void zf__master_plan_unref(zf__master_plan_t **p_p)
{
    zf__master_plan_t *p = *p_p;
    *p_p = NULL;
    if (p && --p->refs == 0) s_plan_free(p);
}

static bool s_plan_uses(const zf__master_plan_t *p, const char *device)
{
    for (int i = 0; i < p->set->n_parts; i++)
        if (strcmp(p->set->parts[i].device, device) == 0) return true;
    return false;
}

/* Tells the executors still alive to forget the plan's graphs. */
static void s_plan_deregister(zf_master_t *m, const zf__master_plan_t *p)
{
    for (int i = 0; i < p->set->n_parts; i++) {
        zf__master_device_t *d = zf__master_find_device(m, p->set->parts[i].device);
        if (!d || d->incarnation != p->incarnation[i] || !p->handle[i]) continue;
        Zflow__DeregisterGraph dg = ZFLOW__DEREGISTER_GRAPH__INIT;
        dg.graph_handle = p->handle[i];
        Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
        env.body_case = ZFLOW__ENVELOPE__BODY_DEREGISTER_GRAPH;
        env.deregister_graph = &dg;
        zf__master_send_oneway(m, d->name, &env);
    }
}

/* Adds (sign 1) or removes (-1) the plan's nodes to its devices' loads. */
static void s_plan_load(zf_master_t *m, const zf__master_plan_t *p, int sign)
{
    for (int i = 0; i < p->set->n_parts; i++) {
        zf__master_device_t *d = zf__master_find_device(m, p->set->parts[i].device);
        if (d && d->incarnation == p->incarnation[i]) d->placed += sign * p->nodes[i];
    }
}

void zf__master_plan_drop(zf_master_t *m, zf__master_session_t *s, const char *sig,
                          zf__master_plan_t *p)
{
    if (p->dropped) return;
    uintptr_t v = 0;
    if (sig && zf_strmap_get(s->plans, sig, &v) && v == (uintptr_t)p)
        zf_strmap_remove(s->plans, sig, NULL);
    p->dropped = true;
    s_plan_load(m, p, -1);
    s_plan_deregister(m, p);
    zf__master_plan_unref(&p);
}

void zf__master_drop_plans(zf_master_t *m, zf__master_session_t *s, const char *device)
{
    size_t n = zf_strmap_size(s->plans), k = 0, iter = 0;
    if (n == 0) return;
    char **sigs = calloc(n, sizeof *sigs);
    zf__master_plan_t **plans = calloc(n, sizeof *plans);
    const char *key = NULL;
    size_t len = 0;
    uintptr_t v = 0;
    while (sigs && plans && zf_strmap_next(s->plans, &iter, &key, &len, &v)) {
        zf__master_plan_t *p = (zf__master_plan_t *)v;
        if (device && !s_plan_uses(p, device)) continue;
        sigs[k] = strndup(key, len);
        plans[k++] = p;
    }
    for (size_t i = 0; i < k; i++) {
        zf__master_plan_drop(m, s, sigs[i], plans[i]);
        free(sigs[i]);
    }
    free(sigs);
    free(plans);
}

void zf__master_placement_free(zf__master_session_t *s)
{
    for (int k = 0; k < s->n_placed_names; k++) free(s->placed_names[k]);
    free(s->placed_names);
    free(s->placed_on);
    s->placed_names = NULL;
    s->placed_on = NULL;
    s->n_placed_names = 0;
}

/* Fills assignment from s's placement when every device it uses is in the
 * snapshot qdev[0..nd); false (and the placement forgotten) otherwise. */
static bool s_placement_reuse(zf__master_session_t *s, const zf_partition_device_t *qdev, int nd,
                              int *assignment)
{
    if (!s->placed_on) return false;
    int *index = calloc((size_t)s->n_placed_names + 1, sizeof *index);
    bool all = index != NULL;
    for (int k = 0; all && k < s->n_placed_names; k++) {
        index[k] = -1;
        for (int i = 0; i < nd && index[k] < 0; i++) {
            char name[ZF_DEVICE_NAME_MAX];
            zf_device_name_format(&qdev[i].name, name, sizeof name);
            if (strcmp(name, s->placed_names[k]) == 0) index[k] = i;
        }
        all = index[k] >= 0;
    }
    int n_nodes = zf_graph_num_nodes(s->graph);
    for (int n = 0; all && n < n_nodes; n++)
        assignment[n] = s->placed_on[n] < 0 ? -1 : index[s->placed_on[n]];
    free(index);
    if (!all) zf__master_placement_free(s);
    return all;
}

/* Keeps assignment (over qdev) as s's placement; out of memory only costs
 * the reuse. */
static void s_placement_keep(zf__master_session_t *s, const zf_partition_device_t *qdev, int nd,
                             const int *assignment)
{
    zf__master_placement_free(s);
    int n_nodes = zf_graph_num_nodes(s->graph);
    int *slot = malloc(((size_t)nd + 1) * sizeof *slot);
    s->placed_on = malloc(((size_t)n_nodes + 1) * sizeof *s->placed_on);
    s->placed_names = calloc((size_t)nd + 1, sizeof *s->placed_names);
    bool ok = slot && s->placed_on && s->placed_names;
    for (int i = 0; ok && i < nd; i++) slot[i] = -1;
    for (int n = 0; ok && n < n_nodes; n++) {
        int d = assignment[n];
        if (d < 0 || d >= nd) {
            s->placed_on[n] = -1;
            continue;
        }
        if (slot[d] < 0) {
            char name[ZF_DEVICE_NAME_MAX];
            zf_device_name_format(&qdev[d].name, name, sizeof name);
            s->placed_names[s->n_placed_names] = strdup(name);
            ok = s->placed_names[s->n_placed_names] != NULL;
            slot[d] = s->n_placed_names++;
        }
        s->placed_on[n] = slot[d];
    }
    free(slot);
    if (!ok) zf__master_placement_free(s);
}

/* Places the session's graph on a snapshot of the live devices — or reuses
 * the session's placement while its devices live — and partitions it for
 * the names' signature. Under s->build. */
static zf_status_t s_plan_partition(zf_master_t *m, zf__master_session_t *s,
                                    const zf__master_names_t *nm, zf__master_plan_t *p)
{
    pthread_mutex_lock(&m->mu);
    int nd = m->n_devices;
    zf_placer_device_t *pdev = calloc((size_t)nd + 1, sizeof *pdev);
    zf_partition_device_t *qdev = calloc((size_t)nd + 1, sizeof *qdev);
    for (int i = 0; pdev && qdev && i < nd; i++) {
        const zf__master_device_t *d = m->devices[i];
        pdev[i] = (zf_placer_device_t){d->parsed, d->load + d->placed};
        qdev[i] = (zf_partition_device_t){d->parsed, d->incarnation};
    }
    pthread_mutex_unlock(&m->mu);
    int n_nodes = zf_graph_num_nodes(s->graph);
    int *assignment = calloc((size_t)n_nodes + 1, sizeof *assignment);
    zf_status_t st = pdev && qdev && assignment ? ZF_STATUS_OK : zf_out_of_memory("master");
    zf_placer_options_t popts = ZF_PLACER_OPTIONS_DEFAULT;
    popts.allow_soft_placement = s->soft;
    popts.mode = s->place_first ? ZF_PLACE_FIRST : ZF_PLACE_BALANCED;
    if (zf_ok(st) && !s_placement_reuse(s, qdev, nd, assignment)) {
        st = zf_placer_run(s->graph, pdev, nd, &popts, assignment);
        if (zf_ok(st)) s_placement_keep(s, qdev, nd, assignment);
    }
    zf_partition_options_t qopts = {
        .feeds = (const char *const *)nm->s_feeds,
        .n_feeds = nm->ns_feeds,
        .fetches = (const char *const *)nm->s_fetches,
        .n_fetches = nm->ns_fetches,
        .targets = (const char *const *)nm->s_targets,
        .n_targets = nm->ns_targets,
        .by = ZF_PARTITION_BY_DEVICE,
    };
    if (zf_ok(st)) st = zf_partition_graph(s->graph, qdev, nd, assignment, &qopts, &p->set);
    if (zf_ok(st) && !(p->incarnation = calloc((size_t)p->set->n_parts + 1, sizeof(uint64_t))))
        st = zf_out_of_memory("master");
    for (int i = 0; zf_ok(st) && i < p->set->n_parts; i++)
        p->incarnation[i] = qdev[p->set->parts[i].device_index].incarnation;
    free(assignment);
    free(pdev);
    free(qdev);
    return st;
}

/* The status a reply carries: the call's own failure, a StatusReply's, or
 * the expected body's status field. */
static zf_status_t s_reply_status(const zf__master_call_t *c, Zflow__Envelope__BodyCase want)
{
    if (!c->reply)
        return zf_status_new(c->status.code ? c->status.code : ZF_INTERNAL, "%s",
                             zf_status_msg(&c->status));
    const Zflow__Envelope *r = c->reply;
    if (r->body_case == ZFLOW__ENVELOPE__BODY_STATUS_REPLY)
        return zf_status_from_proto(r->status_reply->status);
    if (r->body_case != want)
        return zf_internal("executor %s answered with message body %d instead of %d", c->device,
                           (int)r->body_case, (int)want);
    if (want == ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY)
        return zf_status_from_proto(r->register_graph_reply->status);
    return zf_status_from_proto(r->run_graph_reply->status);
}

/* Prefixes an executor's error with its device unless it names it. */
static zf_status_t s_with_device(zf_status_t st, const char *device)
{
    if (zf_ok(st) || strstr(zf_status_msg(&st), device)) return st;
    return zf_status_prefix(st, "%s", device);
}

/* Waits (under m->mu) until every call is done or the deadline passes. */
static bool s_wait_all(zf_master_t *m, zf__master_call_t *calls, int n, const struct timespec *dl)
{
    for (;;) {
        int i = 0;
        while (i < n && calls[i].done) i++;
        if (i == n) return true;
        if (pthread_cond_timedwait(&m->cv, &m->mu, dl) == ETIMEDOUT) return false;
    }
}

/* The plan's executors as RegisterGraph.peers entries (borrowing names and
 * endpoints; under m->mu): each partition's RegisterGraph names the others'
 * incarnations and rendezvous endpoints, so its executor sends to a
 * restarted peer's new endpoint, never to the old one. Caller frees *infos
 * and *attrs. */
static zf_status_t s_plan_peer_infos(zf_master_t *m, const zf__master_plan_t *p,
                                     Zflow__ExecutorInfo **infos,
                                     Tensorflow__DeviceAttributes **attrs)
{
    int n = p->set->n_parts;
    *infos = calloc((size_t)n + 1, sizeof **infos);
    *attrs = calloc((size_t)n + 1, sizeof **attrs);
    if (!*infos || !*attrs) return zf_out_of_memory("master");
    for (int j = 0; j < n; j++) {
        tensorflow__device_attributes__init(&(*attrs)[j]);
        (*attrs)[j].name = (char *)p->set->parts[j].device;
        (*attrs)[j].incarnation = p->incarnation[j];
        zflow__executor_info__init(&(*infos)[j]);
        (*infos)[j].device = &(*attrs)[j];
        /* its endpoint too, so that a peer that restarted is reachable from
         * the first step on, without waiting for the broker's listing */
        const zf__master_device_t *d = zf__master_find_device(m, p->set->parts[j].device);
        if (d && d->incarnation == p->incarnation[j] && d->rendezvous[0])
            (*infos)[j].rendezvous_endpoint = d->rendezvous;
    }
    return ZF_STATUS_OK;
}

/* Registers every partition with its executor. Under m->mu. */
static zf_status_t s_plan_register(zf_master_t *m, zf__master_session_t *s, zf__master_plan_t *p)
{
    int n = p->set->n_parts;
    zf__master_call_t *calls = calloc((size_t)n + 1, sizeof *calls);
    Zflow__ExecutorInfo *infos = NULL, **peers = calloc((size_t)n + 1, sizeof *peers);
    Tensorflow__DeviceAttributes *attrs = NULL;
    zf_status_t pst =
        calls && peers ? s_plan_peer_infos(m, p, &infos, &attrs) : zf_out_of_memory("master");
    if (!zf_ok(pst)) {
        free(calls);
        free(peers);
        free(infos);
        free(attrs);
        return pst;
    }
    for (int i = 0; i < n; i++) {
        Zflow__RegisterGraph rg = ZFLOW__REGISTER_GRAPH__INIT;
        rg.session = s->id;
        rg.graph = p->set->parts[i].graph;
        rg.incarnation = p->incarnation[i];
        for (int j = 0; j < n; j++)
            if (j != i) peers[rg.n_peers++] = &infos[j];
        rg.peers = peers;
        Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
        env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH;
        env.register_graph = &rg;
        zf__master_call_start(m, &calls[i], p->set->parts[i].device, p->incarnation[i], &env);
    }
    free(peers); /* packed and sent */
    free(infos);
    free(attrs);
    struct timespec dl;
    zf__master_deadline(&dl, m->register_timeout_ms);
    (void)s_wait_all(m, calls, n, &dl); /* stragglers count as timed out below */
    zf_status_t st = ZF_STATUS_OK;
    for (int i = 0; i < n; i++) {
        const char *dev = p->set->parts[i].device;
        zf_status_t e = calls[i].done
                            ? s_reply_status(&calls[i], ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY)
                            : zf_status_new(ZF_DEADLINE_EXCEEDED,
                                            "no answer to RegisterGraph within %" PRId64 " ms",
                                            m->register_timeout_ms);
        const char *h = zf_ok(e) ? calls[i].reply->register_graph_reply->graph_handle : NULL;
        if (zf_ok(e) && (!h || !h[0])) e = zf_internal("RegisterGraph returned no graph handle");
        if (zf_ok(e) && !(p->handle[i] = strdup(h))) e = zf_out_of_memory("master");
        if (zf_ok(st) && !zf_ok(e))
            st = zf_status_prefix(s_with_device(e, dev), "registering a partition");
        else
            zf_status_clear(&e);
        zf__master_call_finish(m, &calls[i]);
    }
    free(calls);
    return st;
}

/* Where each fetch comes from. */
static zf_status_t s_plan_fetch_keys(zf__master_plan_t *p)
{
    p->fetch_key = calloc((size_t)p->n_fetches + 1, sizeof *p->fetch_key);
    if (!p->fetch_key) return zf_out_of_memory("master");
    for (int i = 0; i < p->set->n_parts; i++) {
        const zf_partition_t *part = &p->set->parts[i];
        for (int k = 0; k < part->n_fetches; k++)
            for (int f = 0; f < p->n_fetches; f++)
                if (strcmp(p->fetches[f], part->fetches[k].tensor_name) == 0)
                    p->fetch_key[f] = part->fetches[k].key;
    }
    for (int f = 0; f < p->n_fetches; f++)
        if (!p->fetch_key[f]) return zf_internal("no partition sends fetch '%s'", p->fetches[f]);
    return ZF_STATUS_OK;
}

/* Builds, registers and caches the plan for nm's signature. Holds
 * s->build, not m->mu. */
static zf_status_t s_plan_build(zf_master_t *m, zf__master_session_t *s, zf__master_names_t *nm,
                                zf__master_plan_t **out)
{
    zf__master_plan_t *p = calloc(1, sizeof *p);
    if (!p) return zf_out_of_memory("master");
    p->refs = 1;
    zf_status_t st =
        zf__master_sorted("feed", nm->s_feeds, nm->ns_feeds, true, &p->feeds, &p->n_feeds);
    if (zf_ok(st))
        st = zf__master_sorted("fetch", nm->s_fetches, nm->ns_fetches, false, &p->fetches,
                               &p->n_fetches);
    if (zf_ok(st)) st = s_plan_partition(m, s, nm, p);
    if (zf_ok(st)) st = s_plan_fetch_keys(p);
    int n = zf_ok(st) ? p->set->n_parts : 0;
    p->handle = calloc((size_t)n + 1, sizeof *p->handle);
    p->nodes = calloc((size_t)n + 1, sizeof *p->nodes);
    if (zf_ok(st) && (!p->handle || !p->nodes)) st = zf_out_of_memory("master");
    for (int i = 0; zf_ok(st) && i < n; i++) p->nodes[i] = (int64_t)p->set->parts[i].graph->n_node;
    pthread_mutex_lock(&m->mu);
    if (zf_ok(st)) st = s_plan_register(m, s, p);
    for (int i = 0; zf_ok(st) && i < n; i++) {
        zf__master_device_t *d = zf__master_find_device(m, p->set->parts[i].device);
        if (!d || d->incarnation != p->incarnation[i])
            st = zf_status_new(ZF_UNAVAILABLE, "executor %s died while the plan was being built",
                               p->set->parts[i].device);
    }
    if (zf_ok(st) && s->closed) st = zf_not_found("session '%s' was closed", s->id);
    if (zf_ok(st) && zf_strmap_insert(s->plans, nm->sig, (uintptr_t)p, NULL) != 0)
        st = zf_out_of_memory("master");
    if (zf_ok(st)) {
        s_plan_load(m, p, 1);
        p->refs++; /* the caller's */
        *out = p;
    } else if (p->set && p->handle && p->incarnation) {
        s_plan_deregister(m, p);
    }
    pthread_mutex_unlock(&m->mu);
    if (!zf_ok(st)) s_plan_free(p);
    return st;
}

/* The cached plan for nm's signature (built on first use); the caller owns
 * a reference. */
static zf_status_t s_plan_get(zf_master_t *m, zf__master_session_t *s, zf__master_names_t *nm,
                              zf__master_plan_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&s->build);
    pthread_mutex_lock(&m->mu);
    uintptr_t v = 0;
    if (zf_strmap_get(s->plans, nm->sig, &v)) {
        *out = (zf__master_plan_t *)v;
        (*out)->refs++;
    }
    pthread_mutex_unlock(&m->mu);
    zf_status_t st = *out ? ZF_STATUS_OK : s_plan_build(m, s, nm, out);
    pthread_mutex_unlock(&s->build);
    return st;
}

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
    for (int k = 0; k < part->n_feeds; k++) {
        int j = 0;
        while (j < nm->n_feeds && strcmp(nm->feeds[j], part->feeds[k].tensor_name) != 0) j++;
        zflow__named_tensor__init(&feeds[k]);
        feeds[k].name = part->feeds[k].key;
        feeds[k].tensor = j < nm->n_feeds ? req->feeds[j]->tensor : NULL;
        fp[k] = &feeds[k];
    }
    for (int k = 0; k < part->n_fetches; k++) fetch_keys[k] = part->fetches[k].key;
    Zflow__RunGraph rg = ZFLOW__RUN_GRAPH__INIT;
    rg.graph_handle = st->p->handle[i];
    rg.incarnation = st->p->incarnation[i];
    rg.step_id = st->step_id;
    rg.n_feeds = (size_t)part->n_feeds;
    rg.feeds = fp;
    rg.n_fetch_keys = (size_t)part->n_fetches;
    rg.fetch_keys = fetch_keys;
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
        zf_status_t e = s_reply_status(&st->calls[i], ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY);
        if (e.code == ZF_ABORTED) st->restarted = true;
        if (!zf_ok(e) && zf_ok(st->first)) {
            st->first = s_with_device(e, st->p->set->parts[i].device);
            st->failed = i;
        } else {
            zf_status_clear(&e);
        }
    }
    return all;
}

/* Waits for the partitions: the first error aborts the others; the
 * deadline aborts them all; stragglers are given abort_grace_ms. Under
 * m->mu. */
static void s_wait_step(zf__master_step_t *st)
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
        st->first = zf_status_new(ZF_DEADLINE_EXCEEDED,
                                  "step %" PRId64 " did not finish within %" PRId64 " ms",
                                  st->step_id, st->timeout_ms);
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

/* Gives st a step id and sends RunGraph to every partition of plan p.
 * Under m->mu. */
zf_status_t zf__master_step_begin(zf__master_step_t *st, zf__master_session_t *s,
                                  zf__master_plan_t *p, const Zflow__RunStep *req,
                                  const zf__master_names_t *nm, Zflow__RunStepReply *out)
{
    int n = p->set->n_parts;
    zf_master_t *m = st->m;
    *st = (zf__master_step_t){.m = m, .p = p, .failed = -1};
    st->step_id = atomic_fetch_add(&st->m->next_step, 1);
    st->timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : s->timeout_ms;
    st->calls = calloc((size_t)n + 1, sizeof *st->calls);
    st->seen = calloc((size_t)n + 1, sizeof *st->seen);
    if (!st->calls || !st->seen) {
        free(st->calls);
        free(st->seen);
        return zf_out_of_memory("master");
    }
    out->step_id = st->step_id;
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
    if (cleanup && !zf_ok(st->first)) zf__master_step_cleanup(st);
    zf_status_t res = st->first;
    if (zf_ok(res)) res = s_collect(st, req, nm, out);
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
        s_wait_step(&st);
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

zf_status_t zf_master_run_step(zf_master_t *m, const Zflow__RunStep *req, Zflow__RunStepReply **out)
{
    *out = NULL;
    if (!req) return zf_invalid_argument("RunStep is empty");
    pthread_mutex_lock(&m->mu);
    uintptr_t v = 0;
    zf__master_session_t *s = NULL;
    if (req->session && zf_strmap_get(m->sessions, req->session, &v)) {
        s = (zf__master_session_t *)v;
        s->refs++;
    }
    pthread_mutex_unlock(&m->mu);
    if (!s) return zf_not_found("session '%s' not found", req->session ? req->session : "");
    zf__master_names_t nm = {0};
    zf__master_plan_t *p = NULL;
    zf_status_t st = zf__master_names(req, &nm);
    for (int i = 0; zf_ok(st) && i < nm.n_feeds; i++)
        st = zf__master_check_feed(s->graph, nm.feeds[i], req->feeds[i]->tensor);
    if (zf_ok(st)) st = s_plan_get(m, s, &nm, &p);
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
