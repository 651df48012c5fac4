/* The executor service's steps: RunGraph's checks, feeds, the asynchronous
 * run (inline on the event loop for a light partition, on the device's pool
 * otherwise), and the reply with the fetches. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/graph.h"
#include "common/log.h"
#include "common/tensor_proto.h"
#include "executor/worker/service_internal.h"
#include "common/thread_pool.h"

const char zf__svc_restarted[] = "graph handle not found; the executor restarted";

Zflow__Envelope *zf__svc_envelope_new(uint64_t request_id)
{
    Zflow__Envelope *env = malloc(sizeof *env);
    if (!env) return NULL;
    zflow__envelope__init(env);
    env->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env->request_id = request_id;
    return env;
}

/* ---- the reply ------------------------------------------------------------ */

static zf_status_t s_named_tensor(const char *key, const zf_tensor_t *t, Zflow__NamedTensor **out)
{
    *out = malloc(sizeof **out);
    if (!*out) return zf_out_of_memory("RunGraph reply");
    zflow__named_tensor__init(*out);
    if (!((*out)->name = strdup(key))) return zf_out_of_memory("RunGraph reply");
    return zf_tensor_to_proto(t, &(*out)->tensor, true);
}

/* Takes every fetch out of the step's rendezvous into reply. */
static zf_status_t s_collect_fetches(zf__svc_step_t *st, Zflow__RunGraphReply *reply)
{
    if (st->n_fetch_keys == 0) return ZF_STATUS_OK;
    reply->fetches = calloc(st->n_fetch_keys, sizeof *reply->fetches);
    if (!reply->fetches) return zf_out_of_memory("RunGraph reply");
    for (size_t i = 0; i < st->n_fetch_keys; i++) {
        const char *key = st->fetch_keys[i];
        zf_tensor_t *t = NULL;
        bool dead = false;
        zf_status_t s = ZF_STATUS_OK;
        if (st->slots) { /* a partial run's call: its recvs have completed */
            t = st->slots[i].value;
            st->slots[i].value = NULL;
            dead = st->slots[i].dead;
        } else {
            s = zf_rendezvous_recv(st->r, key, 0, &t, &dead);
        }
        if (!zf_ok(s))
            return zf_status_prefix(s, "fetch key '%s' was not produced by the step", key);
        if (dead || !t) {
            zf_tensor_unref(&t);
            return zf_invalid_argument("fetched tensor '%s' is dead (not computed on the path "
                                       "control flow took)",
                                       key);
        }
        s = s_named_tensor(key, t, &reply->fetches[reply->n_fetches++]);
        zf_tensor_unref(&t);
        ZF_TRY(s);
    }
    return ZF_STATUS_OK;
}

/* Builds the RunGraphReply for a step that ended with status (owned). */
void zf__svc_build_reply(zf__svc_step_t *st, zf_status_t status)
{
    Zflow__Envelope *env = zf__svc_envelope_new(st->request_id);
    Zflow__RunGraphReply *body = malloc(sizeof *body);
    if (!env || !body) {
        free(env);
        free(body);
        zf_status_clear(&status);
        st->status = zf_out_of_memory("RunGraph reply");
        return;
    }
    zflow__run_graph_reply__init(body);
    env->body_case = ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY;
    env->run_graph_reply = body;
    if (zf_ok(status)) status = s_collect_fetches(st, body);
    if (zf_ok(status) && st->traced)
        status = zf_step_trace_to_protos(&st->trace, &body->node_runs, &body->n_node_runs);
    if (!zf_ok(status)) { /* no partial fetches next to an error */
        for (size_t i = 0; i < body->n_fetches; i++)
            zflow__named_tensor__free_unpacked(body->fetches[i], NULL);
        body->n_fetches = 0;
    }
    zf_status_t s = zf_status_to_proto(&status, &body->status);
    if (zf_ok(s)) {
        st->reply = env;
        zf_status_clear(&status);
    } else {
        zflow__envelope__free_unpacked(env, NULL);
        st->status = status; /* sent as a bare status reply */
        zf_status_clear(&s);
    }
}

/* ---- steps ------------------------------------------------------------------ */

/* Moves st from the running list to the reply queue and wakes the control
 * thread. */
void zf__svc_step_finish(zf__svc_step_t *st)
{
    zf_exec_service_t *svc = st->svc;
    pthread_mutex_lock(&svc->mu);
    for (zf__svc_step_t **p = &svc->running; *p; p = &(*p)->next) {
        if (*p != st) continue;
        *p = st->next;
        break;
    }
    st->next = NULL;
    if (svc->done_tail)
        svc->done_tail->next = st;
    else
        svc->done_head = st;
    svc->done_tail = st;
    char byte = 1; /* the control thread itself flushes after each turn */
    if (zf__svc_loop != svc && write(svc->wake[1], &byte, 1) < 0) {
        /* full: a wakeup is pending anyway */
    }
    if (--svc->n_running == 0) pthread_cond_broadcast(&svc->idle);
    pthread_mutex_unlock(&svc->mu);
}

static void s_step_done(zf_status_t status, void *arg)
{
    zf__svc_step_t *st = arg;
    /* The partitions on other executors learn of the failure through the
     * scheduler's AbortStep; here the rendezvous keeps the root cause. */
    bool ok = zf_ok(status);
    if (!ok) zf_rendezvous_start_abort(st->r, &status);
    zf__svc_build_reply(st, status);
    /* Every _Recv of this partition has had its value, so nothing more can
     * come for the step here: it is cleaned up now, and the scheduler sends
     * CleanupGraph only for steps that failed (zf__master_step_cleanup). */
    if (ok) zf_remote_finish_step(st->svc->remote, st->step_id);
    zf__svc_step_finish(st);
}

/* Adds the remote device the _Send node nd pushes to, unless known. */
static zf_status_t s_graph_add_peer(zf_exec_service_t *svc, zf__svc_graph_t *g,
                                    const Tensorflow__NodeDef *nd)
{
    bool client = false;
    const uint8_t *dev = NULL;
    size_t len = 0;
    zf_status_t s = zf_node_attr_bool_or(nd, "client_terminated", false, &client);
    if (zf_ok(s)) s = zf_node_attr_string(nd, "recv_device", &dev, &len);
    zf_status_clear(&s); /* the kernel reports a bad attr when the node is built */
    if (client || !dev || len == 0 ||
        (strlen(svc->device->name_str) == len && memcmp(dev, svc->device->name_str, len) == 0))
        return ZF_STATUS_OK;
    for (int k = 0; k < g->n_peers; k++)
        if (strlen(g->peers[k]) == len && memcmp(g->peers[k], dev, len) == 0) return ZF_STATUS_OK;
    if (!(g->peers[g->n_peers] = strndup((const char *)dev, len)))
        return zf_out_of_memory("RegisterGraph");
    g->n_peers++;
    return ZF_STATUS_OK;
}

zf_status_t zf__svc_check_peers(const Zflow__RegisterGraph *req)
{
    for (size_t i = 0; i < req->n_peers; i++) {
        const Zflow__ExecutorInfo *e = req->peers[i];
        if (!e || !e->device || !e->device->name || !*e->device->name)
            return zf_invalid_argument("RegisterGraph peer %zu has no device name", i);
    }
    return ZF_STATUS_OK;
}

/* Takes each peer's incarnation from req->peers, and its endpoint when the
 * scheduler sent one. */
static zf_status_t s_graph_peer_incarnations(zf_exec_service_t *svc, zf__svc_graph_t *g,
                                             const Zflow__RegisterGraph *req)
{
    g->peer_incarnation = calloc((size_t)g->n_peers + 1, sizeof *g->peer_incarnation);
    if (!g->peer_incarnation) return zf_out_of_memory("RegisterGraph");
    for (size_t i = 0; i < req->n_peers; i++) {
        const Zflow__ExecutorInfo *e = req->peers[i];
        for (int k = 0; k < g->n_peers; k++)
            if (strcmp(g->peers[k], e->device->name) == 0)
                g->peer_incarnation[k] = e->device->incarnation;
        if (e->rendezvous_endpoint && *e->rendezvous_endpoint &&
            strcmp(e->device->name, svc->device->name_str) != 0) {
            ZF_TRY(zf_remote_update_peer(svc->remote, e->device->name, e->rendezvous_endpoint,
                                         e->device->incarnation, NULL));
            zf_remote_set_peer_host(svc->remote, e->device->name, e->host_id);
        }
    }
    return ZF_STATUS_OK;
}

zf_status_t zf__svc_graph_peers(zf_exec_service_t *svc, zf__svc_graph_t *g,
                                const Zflow__RegisterGraph *req)
{
    const Tensorflow__GraphDef *gd = req->graph;
    g->peers = calloc(gd->n_node + 1, sizeof *g->peers);
    if (!g->peers) return zf_out_of_memory("RegisterGraph");
    for (size_t i = 0; i < gd->n_node; i++) {
        const Tensorflow__NodeDef *nd = gd->node[i];
        if (strcmp(nd->op, "_Send") == 0 || strcmp(nd->op, "_HostSend") == 0)
            ZF_TRY(s_graph_add_peer(svc, g, nd));
    }
    return s_graph_peer_incarnations(svc, g, req);
}

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until device's endpoint is known, of incarnation when that is not
 * 0, asking the process (through peers_wanted) to look it up again every
 * ZF_EXEC_SERVICE_PEER_ASK_MS: a listing may come from before the peer
 * restarted. Gives up early when the step (rendezvous r) is aborted. */
static zf_status_t s_wait_peer(zf_exec_service_t *svc, zf_rendezvous_t *r, const char *device,
                               uint64_t incarnation)
{
    if (zf_remote_wait_peer_incarnation(svc->remote, device, incarnation, 0)) return ZF_STATUS_OK;
    for (int64_t end = s_now_ms() + svc->peer_wait_ms;;) {
        atomic_store(&svc->peers_wanted, true);
        ZF_TRY(zf_rendezvous_status(r));
        int64_t left = end - s_now_ms();
        if (left <= 0) break;
        int slice = left < ZF_EXEC_SERVICE_PEER_ASK_MS ? (int)left : ZF_EXEC_SERVICE_PEER_ASK_MS;
        if (zf_remote_wait_peer_incarnation(svc->remote, device, incarnation, slice))
            return ZF_STATUS_OK;
    }
    uint64_t have = zf_remote_peer_incarnation(svc->remote, device);
    if (incarnation && zf_remote_wait_peer(svc->remote, device, 0))
        return zf_status_new(ZF_UNAVAILABLE,
                             "device %s, which this partition sends to, was placed as incarnation "
                             "%016" PRIx64 ", but after %d ms the rendezvous endpoint known here "
                             "is still that of incarnation %016" PRIx64,
                             device, incarnation, svc->peer_wait_ms, have);
    return zf_status_new(ZF_UNAVAILABLE,
                         "no rendezvous endpoint is known for device %s, which this partition "
                         "sends to",
                         device);
}

/* Waits for the endpoints of the devices the graph sends to, of the
 * incarnations it was placed for. */
static zf_status_t s_wait_peers(zf_exec_service_t *svc, zf_rendezvous_t *r,
                                const zf__svc_graph_t *g)
{
    for (int k = 0; k < g->n_peers; k++)
        ZF_TRY(s_wait_peer(svc, r, g->peers[k], g->peer_incarnation[k]));
    return ZF_STATUS_OK;
}

void zf__svc_engine_start(zf_exec_service_t *svc, const zf__svc_graph_t *g,
                          const zf_engine_args_t *args, zf_engine_done_fn done, void *arg)
{
    zf_status_t s = s_wait_peers(svc, args->rendezvous, g);
    if (!zf_ok(s)) {
        done(s, arg);
        return;
    }
    zf_engine_run_async(g->ex, args, done, arg);
}

static void s_step_start(void *arg)
{
    zf__svc_step_t *st = arg;
    zf_engine_args_t args = {st->step_id, st->r, st->traced ? &st->trace : NULL};
    zf__svc_engine_start(st->svc, st->graph, &args, s_step_done, st);
}

/* True when a step of g may start on the control thread: a light
 * partition with small feeds whose peers are all known already, so nothing
 * on the way can wait. */
static bool s_starts_here(zf_exec_service_t *svc, const zf__svc_graph_t *g, size_t feed_bytes)
{
    if (!zf_engine_is_light(g->ex) || feed_bytes > ZF_ENGINE_INLINE_BYTES) return false;
    for (int k = 0; k < g->n_peers; k++)
        if (!zf_remote_wait_peer_incarnation(svc->remote, g->peers[k], g->peer_incarnation[k], 0))
            return false;
    return true;
}

void zf__svc_step_free_locked(zf_exec_service_t *svc, zf__svc_step_t *st)
{
    if (!st) return;
    if (st->reply) zflow__envelope__free_unpacked(st->reply, NULL);
    for (size_t i = 0; i < st->n_fetch_keys; i++) free(st->fetch_keys[i]);
    free(st->fetch_keys);
    zf_status_clear(&st->status);
    if (st->traced) zf_step_trace_destroy(&st->trace);
    for (size_t i = 0; st->slots && i < st->n_fetch_keys; i++) {
        zf_tensor_unref(&st->slots[i].value);
        zf_status_clear(&st->slots[i].status);
    }
    free(st->slots);
    zf__svc_partial_unref_locked(svc, &st->partial);
    zf_rendezvous_unref(&st->r);
    zf__svc_graph_unref_locked(svc, &st->graph);
    free(st);
}

zf_status_t zf__svc_find_graph(zf_exec_service_t *svc, const Zflow__RunGraph *req,
                               zf__svc_graph_t **out)
{
    *out = NULL;
    const char *handle = req->graph_handle ? req->graph_handle : "";
    if (!*handle) return zf_invalid_argument("RunGraph without a graph handle");
    char mine[24];
    snprintf(mine, sizeof mine, "%016" PRIx64 "/", svc->device->incarnation);
    if (req->incarnation != svc->device->incarnation || strncmp(handle, mine, 17) != 0)
        return zf_status_new(ZF_ABORTED, "%s", zf__svc_restarted);
    pthread_mutex_lock(&svc->mu);
    uintptr_t v = 0;
    if (zf_strmap_get(svc->graphs, handle, &v)) {
        *out = (zf__svc_graph_t *)v;
        (*out)->refs++;
    }
    pthread_mutex_unlock(&svc->mu);
    if (!*out) return zf_not_found("graph handle '%s' is not registered", handle);
    return ZF_STATUS_OK;
}

zf_status_t zf__svc_send_feeds(zf_rendezvous_t *r, const Zflow__RunGraph *req, size_t *bytes)
{
    for (size_t i = 0; i < req->n_feeds; i++) {
        const Zflow__NamedTensor *f = req->feeds[i];
        const char *key = f && f->name ? f->name : "";
        if (!*key) return zf_invalid_argument("RunGraph feed %zu has no rendezvous key", i);
        if (!f->tensor) return zf_invalid_argument("RunGraph feed '%s' has no tensor", key);
        zf_tensor_t *t = NULL;
        zf_status_t s = zf_tensor_from_proto(f->tensor, &t);
        if (!zf_ok(s)) return zf_status_prefix(s, "RunGraph feed '%s'", key);
        *bytes += zf_tensor_nbytes(t);
        s = zf_rendezvous_send(r, key, t, false);
        zf_tensor_unref(&t);
        ZF_TRY(s);
    }
    return ZF_STATUS_OK;
}

zf_status_t zf__svc_copy_fetch_keys(zf__svc_step_t *st, const Zflow__RunGraph *req)
{
    st->fetch_keys = calloc(req->n_fetch_keys + 1, sizeof *st->fetch_keys);
    if (!st->fetch_keys) return zf_out_of_memory("RunGraph");
    for (size_t i = 0; i < req->n_fetch_keys; i++) {
        const char *key = req->fetch_keys[i] ? req->fetch_keys[i] : "";
        if (!*key) return zf_invalid_argument("RunGraph fetch key %zu is empty", i);
        if (!(st->fetch_keys[i] = strdup(key))) return zf_out_of_memory("RunGraph");
        st->n_fetch_keys++;
    }
    return ZF_STATUS_OK;
}

/* Fills st for req: graph, fetch keys, the step's rendezvous with the
 * feeds (*feed_bytes of them). */
static zf_status_t s_step_prepare(zf_exec_service_t *svc, zf__svc_step_t *st,
                                  const Zflow__RunGraph *req, size_t *feed_bytes)
{
    ZF_TRY(zf__svc_find_graph(svc, req, &st->graph));
    ZF_TRY(zf__svc_check_owner(st->graph->owner, &st->route, "RunGraph", st->graph->handle));
    ZF_TRY(zf__svc_copy_fetch_keys(st, req));
    ZF_TRY(zf_remote_claim_step(svc->remote, req->step_id, &st->r));
    if (!st->r)
        return zf_status_new(ZF_FAILED_PRECONDITION,
                             "step %" PRId64 " has already been cleaned up on this executor",
                             req->step_id);
    ZF_TRY(zf_rendezvous_status(st->r)); /* aborted before it started */
    return zf__svc_send_feeds(st->r, req, feed_bytes);
}

zf_status_t zf__svc_run_graph(zf_exec_service_t *svc, const zf_route_t *route, uint64_t request_id,
                              const Zflow__RunGraph *req)
{
    if (req->is_partial) return zf__svc_run_partial(svc, route, request_id, req);
    zf__svc_step_t *st = calloc(1, sizeof *st);
    if (!st) return zf_out_of_memory("RunGraph");
    st->svc = svc;
    st->step_id = req->step_id;
    st->traced = req->trace;
    if (st->traced) zf_step_trace_init(&st->trace);
    st->route = *route;
    st->request_id = request_id;
    size_t feed_bytes = 0;
    zf_status_t s = s_step_prepare(svc, st, req, &feed_bytes);
    if (!zf_ok(s)) {
        pthread_mutex_lock(&svc->mu);
        zf__svc_step_free_locked(svc, st);
        pthread_mutex_unlock(&svc->mu);
        return s;
    }
    pthread_mutex_lock(&svc->mu);
    for (zf__svc_step_t *o = svc->running; o && zf_ok(s); o = o->next)
        if (o->step_id == st->step_id && o->graph == st->graph)
            s = zf_invalid_argument("step %" PRId64 " of graph %s is already running", st->step_id,
                                    st->graph->handle);
    if (!zf_ok(s)) {
        zf__svc_step_free_locked(svc, st);
        pthread_mutex_unlock(&svc->mu);
        return s;
    }
    st->next = svc->running;
    svc->running = st;
    svc->n_running++;
    pthread_mutex_unlock(&svc->mu);
    if (s_starts_here(svc, st->graph, feed_bytes)) {
        s_step_start(st);
        return ZF_STATUS_OK;
    }
    /* Off the control thread: the first nodes run on whoever starts the step. */
    zf_status_t ps = svc->device->pool ? zf_thread_pool_submit(svc->device->pool, s_step_start, st)
                                       : zf_internal("no pool");
    if (!zf_ok(ps)) s_step_start(st);
    zf_status_clear(&ps);
    return ZF_STATUS_OK;
}
