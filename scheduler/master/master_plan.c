/* The master's plans: per session and run signature, the placement
 * (reused while its devices live), the partitions, the graphs registered
 * with their executors (each told its peers' rendezvous endpoints) and the
 * fetches' rendezvous keys; dropped when a device they use goes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/proto_util.h"
#include "common/transport.h"
#include "scheduler/graph/placer.h"
#include "scheduler/master/master_internal.h"

#define S_LOG "master"

/* ---- plans ------------------------------------------------------------------- */

static void s_plan_free(zf__master_plan_t *p)
{
    if (!p) return;
    for (int i = 0; p->handle && p->set && i < p->set->n_parts; i++) free(p->handle[i]);
    free(p->handle);
    free(p->incarnation);
    free(p->nodes);
    free(p->fetch_key);
    zf__master_cost_free(&p->cost);
    zf_partial_run_free(&p->prun);
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

/* Whether a reused placement leaves nodes unplaced (an ExtendSession's). */
static bool s_placement_partial(const int *assignment, int n_nodes)
{
    for (int n = 0; n < n_nodes; n++)
        if (assignment[n] < 0) return true;
    return false;
}

/* Places the unplaced nodes of assignment, every placed node keeping its
 * device (the placer's assigned devices). */
static zf_status_t s_place_around(zf__master_session_t *s, const zf_placer_device_t *pdev,
                                  const zf_partition_device_t *qdev, int nd,
                                  zf_placer_options_t *popts, int *assignment)
{
    int n_nodes = zf_graph_num_nodes(s->graph);
    char(*names)[ZF_DEVICE_NAME_MAX] = calloc((size_t)nd + 1, sizeof *names);
    const char **assigned = calloc((size_t)n_nodes + 1, sizeof *assigned);
    zf_status_t st = names && assigned ? ZF_STATUS_OK : zf_out_of_memory("master");
    for (int i = 0; zf_ok(st) && i < nd; i++)
        zf_device_name_format(&qdev[i].name, names[i], sizeof names[i]);
    for (int n = 0; zf_ok(st) && n < n_nodes; n++)
        assigned[n] = assignment[n] >= 0 ? names[assignment[n]] : NULL;
    popts->assigned = assigned;
    if (zf_ok(st)) st = zf_placer_run(s->graph, pdev, nd, popts, assignment);
    popts->assigned = NULL;
    free(assigned);
    free(names);
    return st;
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
    if (zf_ok(st) && s->place_pruned) { /* only what this run needs */
        if (!s_placement_reuse(s, qdev, nd, assignment))
            for (int i = 0; i < n_nodes; i++) assignment[i] = -1;
        zf_placer_prune_t pr = {(const char *const *)nm->s_feeds,   nm->ns_feeds,
                                (const char *const *)nm->s_fetches, nm->ns_fetches,
                                (const char *const *)nm->s_targets, nm->ns_targets};
        st = zf_placer_run_pruned(s->graph, pdev, nd, &popts, &pr, assignment);
        if (zf_ok(st)) s_placement_keep(s, qdev, nd, assignment);
    } else if (zf_ok(st) && !s_placement_reuse(s, qdev, nd, assignment)) {
        st = zf_placer_run(s->graph, pdev, nd, &popts, assignment);
        if (zf_ok(st)) s_placement_keep(s, qdev, nd, assignment);
    } else if (zf_ok(st) && s_placement_partial(assignment, n_nodes)) {
        st = s_place_around(s, pdev, qdev, nd, &popts, assignment);
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
        .bfloat16_sendrecv = s->bfloat16_sendrecv,
        .recv_scheduling = s->recv_scheduling,
    };
    zf_status_t (*partition)(const zf_graph_t *, const zf_partition_device_t *, int, const int *,
                             const zf_partition_options_t *, zf_partition_set_t **) =
        s->by_task ? zf_partition_graph_two_pass : zf_partition_graph;
    if (zf_ok(st)) st = partition(s->graph, qdev, nd, assignment, &qopts, &p->set);
    if (zf_ok(st) && !(p->incarnation = calloc((size_t)p->set->n_parts + 1, sizeof(uint64_t))))
        st = zf_out_of_memory("master");
    for (int i = 0; zf_ok(st) && i < p->set->n_parts; i++)
        p->incarnation[i] = qdev[p->set->parts[i].device_index].incarnation;
    free(assignment);
    free(pdev);
    free(qdev);
    return st;
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
        rg.opt_level = s->opt_level;
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
        zf_status_t e =
            calls[i].done
                ? zf__master_reply_status(&calls[i], ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY)
                : zf_status_new(ZF_DEADLINE_EXCEEDED,
                                "no answer to RegisterGraph within %" PRId64 " ms",
                                m->register_timeout_ms);
        const char *h = zf_ok(e) ? calls[i].reply->register_graph_reply->graph_handle : NULL;
        if (zf_ok(e) && (!h || !h[0])) e = zf_internal("RegisterGraph returned no graph handle");
        if (zf_ok(e) && !(p->handle[i] = strdup(h))) e = zf_out_of_memory("master");
        if (zf_ok(st) && !zf_ok(e))
            st = zf_status_prefix(zf__master_with_device(e, dev), "registering a partition");
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
zf_status_t zf__master_plan_get(zf_master_t *m, zf__master_session_t *s, zf__master_names_t *nm,
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
