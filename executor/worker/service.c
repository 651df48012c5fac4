/* The executor service: owns the control ROUTER socket and its thread, the
 * graph and session tables, the rendezvous table and the data plane. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "common/graphdef_io.h"
#include "common/host_memory.h"
#include "common/log.h"
#include "executor/engine/graph_optimizer.h"
#include "common/random.h"
#include "executor/kernels/kernel.h"
#include "executor/kernels/kernels_sendrecv.h"
#include "executor/worker/service_internal.h"

#define S_POLL_MS 100 /* how often the control thread looks at its stop flag */
#define S_BATCH   64  /* requests served before queued replies are sent */
#define S_DEFAULT "tcp://127.0.0.1:*"

_Thread_local const zf_exec_service_t *zf__svc_loop;

/* ---- sessions and graphs ---------------------------------------------------- */

/* The session's store, created on first use, with a new reference. Caller
 * holds svc->mu. */
static zf_status_t s_session_get_locked(zf_exec_service_t *svc, const char *name,
                                        zf__svc_session_t **out)
{
    uintptr_t v = 0;
    if (zf_strmap_get(svc->sessions, name, &v)) {
        *out = (zf__svc_session_t *)v;
        (*out)->refs++;
        return ZF_STATUS_OK;
    }
    zf__svc_session_t *ss = calloc(1, sizeof *ss);
    zf_status_t s = ss && (ss->name = strdup(name)) ? ZF_STATUS_OK : zf_out_of_memory("session");
    if (zf_ok(s)) s = zf_resource_mgr_new(&ss->resources);
    if (zf_ok(s) && zf_strmap_insert(svc->sessions, name, (uintptr_t)ss, NULL) != 0)
        s = zf_out_of_memory("session");
    if (!zf_ok(s)) {
        if (ss) zf_resource_mgr_destroy(&ss->resources);
        if (ss) free(ss->name);
        free(ss);
        return s;
    }
    ss->refs = 1;
    *out = ss;
    return ZF_STATUS_OK;
}

static void s_session_unref_locked(zf_exec_service_t *svc, zf__svc_session_t *ss)
{
    if (!ss || --ss->refs > 0) return;
    zf_strmap_remove(svc->sessions, ss->name, NULL);
    zf_resource_mgr_destroy(&ss->resources);
    free(ss->name);
    free(ss);
}

void zf__svc_graph_unref_locked(zf_exec_service_t *svc, zf__svc_graph_t **g_p)
{
    zf__svc_graph_t *g = *g_p;
    *g_p = NULL;
    if (!g || --g->refs > 0) return;
    zf_engine_destroy(&g->ex);
    for (int k = 0; k < g->n_peers; k++) free(g->peers[k]);
    free(g->peers);
    free(g->peer_incarnation);
    s_session_unref_locked(svc, g->session);
    free(g->handle);
    free(g);
}

/* Builds the executor for the request's graph, which it takes over. */
static zf_status_t s_graph_new(zf_exec_service_t *svc, Zflow__RegisterGraph *req,
                               zf__svc_graph_t **out)
{
    *out = NULL;
    zf__svc_graph_t *g = calloc(1, sizeof *g);
    if (!g) return zf_out_of_memory("RegisterGraph");
    g->refs = 1;
    pthread_mutex_lock(&svc->mu);
    zf_status_t s = s_session_get_locked(svc, req->session ? req->session : "", &g->session);
    pthread_mutex_unlock(&svc->mu);
    /* random, so that no peer can guess another's handles */
    char handle[48];
    snprintf(handle, sizeof handle, "%016" PRIx64 "/%016" PRIx64, svc->device->incarnation,
             zf_random_id());
    if (zf_ok(s) && !(g->handle = strdup(handle))) s = zf_out_of_memory("RegisterGraph");
    zf_engine_params_t params = {svc->device, g->session ? g->session->resources : NULL};
    if (zf_ok(s)) s = zf__svc_graph_peers(svc, g, req);
    zf_optimizer_options_t oo = {req->opt_level, 0};
    if (zf_ok(s)) s = zf_optimize_graph(req->graph, &oo, NULL);
    if (zf_ok(s)) s = zf_engine_new(req->graph, &params, &g->ex);
    if (zf_ok(s)) zf_engine_adopt_graphdef(g->ex, &req->graph); /* the envelope lets go */
    if (!zf_ok(s)) {
        pthread_mutex_lock(&svc->mu);
        zf__svc_graph_unref_locked(svc, &g);
        pthread_mutex_unlock(&svc->mu);
        return s;
    }
    *out = g;
    return ZF_STATUS_OK;
}

zf_status_t zf__svc_check_owner(const char *owner, const zf_route_t *route, const char *what,
                                const char *object)
{
    if (!route->secure || strcmp(owner, route->peer) == 0) return ZF_STATUS_OK;
    zf_log_warn("security", "refused %s for %s from %s: it belongs to %s", what, object,
                route->peer, owner);
    return zf_status_new(ZF_PERMISSION_DENIED, "%s for %s refused: it belongs to %s, not %s", what,
                         object, owner, route->peer);
}

/* OK when one more graph of `bytes` fits the graph limits. */
static zf_status_t s_check_room(zf_exec_service_t *svc, int64_t bytes)
{
    pthread_mutex_lock(&svc->mu);
    int n = (int)zf_strmap_size(svc->graphs), max = svc->max_graphs;
    int64_t held = svc->graph_bytes, max_bytes = svc->max_graph_bytes;
    pthread_mutex_unlock(&svc->mu);
    if (n >= max)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "RegisterGraph refused: %s holds %d graphs, the most it registers "
                             "at once (zflow-executor --max-graphs %d)",
                             svc->device->name_str, n, max);
    if (bytes > max_bytes - held)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "RegisterGraph refused: a graph of %" PRId64 " bytes on %s, which "
                             "holds %" PRId64 " bytes of graphs, would pass its limit of %" PRId64
                             " (zflow-executor --max-graph-bytes)",
                             bytes, svc->device->name_str, held, max_bytes);
    return ZF_STATUS_OK;
}

void zf_exec_service_set_graph_limits(zf_exec_service_t *svc, int max_graphs, int64_t max_bytes)
{
    pthread_mutex_lock(&svc->mu);
    svc->max_graphs = max_graphs > 0 ? max_graphs : ZF_EXEC_MAX_GRAPHS;
    svc->max_graph_bytes = max_bytes > 0 ? max_bytes : ZF_EXEC_MAX_GRAPH_BYTES;
    pthread_mutex_unlock(&svc->mu);
}

static zf_status_t s_register_graph(zf_exec_service_t *svc, const zf_route_t *route,
                                    Zflow__RegisterGraph *req, char **handle)
{
    *handle = NULL;
    if (!req->graph) return zf_invalid_argument("RegisterGraph without a graph");
    if (req->incarnation != svc->device->incarnation)
        return zf_status_new(ZF_ABORTED,
                             "RegisterGraph is for incarnation %016" PRIx64 " of %s, which is "
                             "now incarnation %016" PRIx64 " (the executor restarted)",
                             req->incarnation, svc->device->name_str, svc->device->incarnation);
    ZF_TRY(zf__svc_check_peers(req));
    int64_t bytes = (int64_t)protobuf_c_message_get_packed_size(&req->graph->base);
    ZF_TRY(s_check_room(svc, bytes));
    zf__svc_graph_t *g = NULL;
    ZF_TRY(s_graph_new(svc, req, &g));
    g->bytes = bytes;
    snprintf(g->owner, sizeof g->owner, "%s", route->secure ? route->peer : "");
    pthread_mutex_lock(&svc->mu);
    zf_status_t s = zf_strmap_insert(svc->graphs, g->handle, (uintptr_t)g, NULL) == 0
                        ? ZF_STATUS_OK
                        : zf_out_of_memory("RegisterGraph");
    if (zf_ok(s) && !(*handle = strdup(g->handle))) s = zf_out_of_memory("RegisterGraph");
    if (zf_ok(s)) {
        g->n_nodes = zf_engine_num_nodes(g->ex);
        svc->load += g->n_nodes;
        svc->graph_bytes += g->bytes;
    } else {
        zf_strmap_remove(svc->graphs, g->handle, NULL);
        zf__svc_graph_unref_locked(svc, &g);
    }
    pthread_mutex_unlock(&svc->mu);
    if (zf_ok(s))
        zf_log_info("executor", "registered graph %s of session '%s' (%d nodes)", *handle,
                    req->session ? req->session : "", g->n_nodes);
    return s;
}

static zf_status_t s_deregister_graph(zf_exec_service_t *svc, const zf_route_t *route,
                                      const Zflow__DeregisterGraph *req)
{
    const char *handle = req->graph_handle ? req->graph_handle : "";
    if (!*handle) return zf_invalid_argument("DeregisterGraph without a graph handle");
    pthread_mutex_lock(&svc->mu);
    uintptr_t v = 0;
    bool found = zf_strmap_get(svc->graphs, handle, &v);
    zf__svc_graph_t *g = (zf__svc_graph_t *)v;
    zf_status_t s =
        found ? zf__svc_check_owner(g->owner, route, "DeregisterGraph", g->handle) : ZF_STATUS_OK;
    if (!zf_ok(s)) {
        pthread_mutex_unlock(&svc->mu);
        return s;
    }
    if (found) zf_strmap_remove(svc->graphs, handle, NULL);
    if (found) svc->load -= g->n_nodes;
    if (found) svc->graph_bytes -= g->bytes;
    if (found) zf__svc_graph_unref_locked(svc, &g); /* running steps keep it alive */
    pthread_mutex_unlock(&svc->mu);
    return found ? ZF_STATUS_OK : zf_not_found("graph handle '%s' is not registered", handle);
}

/* ---- steps: cleanup and abort ------------------------------------------------ */

/* OK unless a step with id runs here for a graph another secure peer
 * registered. */
static zf_status_t s_check_step_owner(zf_exec_service_t *svc, const zf_route_t *route, int64_t id,
                                      const char *what)
{
    if (!route->secure) return ZF_STATUS_OK;
    zf_status_t s = ZF_STATUS_OK;
    pthread_mutex_lock(&svc->mu);
    for (zf__svc_step_t *st = svc->running; st && zf_ok(s); st = st->next) {
        if (st->step_id != id) continue;
        char object[48];
        snprintf(object, sizeof object, "step %" PRId64, id);
        s = zf__svc_check_owner(st->graph->owner, route, what, object);
    }
    for (zf__svc_partial_t *p = svc->partials; p && zf_ok(s); p = p->next) {
        if (p->step_id != id) continue; /* a partial run between its calls */
        char object[48];
        snprintf(object, sizeof object, "step %" PRId64, id);
        s = zf__svc_check_owner(p->graph->owner, route, what, object);
    }
    pthread_mutex_unlock(&svc->mu);
    return s;
}

static zf_status_t s_cleanup_graph(zf_exec_service_t *svc, const zf_route_t *route,
                                   const Zflow__CleanupGraph *req)
{
    ZF_TRY(s_check_step_owner(svc, route, req->step_id, "CleanupGraph"));
    zf_status_t why = zf_status_new(ZF_CANCELLED, "step %" PRId64 " was cleaned up", req->step_id);
    zf_remote_cleanup_step(svc->remote, req->step_id, &why);
    zf_status_clear(&why);
    zf__svc_partials_forget(svc, req->step_id);
    return ZF_STATUS_OK;
}

static zf_status_t s_abort_step(zf_exec_service_t *svc, const zf_route_t *route,
                                const Zflow__AbortStep *req)
{
    ZF_TRY(s_check_step_owner(svc, route, req->step_id, "AbortStep"));
    zf_status_t why = zf_status_from_proto(req->status);
    if (zf_ok(why)) why = zf_status_new(ZF_ABORTED, "step %" PRId64 " was aborted", req->step_id);
    zf_rendezvous_t *r = NULL;
    zf_status_t s = zf_remote_step_rendezvous(svc->remote, req->step_id, &r);
    if (s.code == ZF_ABORTED) zf_status_clear(&s); /* a dropped step: nothing left to abort */
    if (zf_ok(s) && r) zf_rendezvous_start_abort(r, &why); /* a cleaned-up step: nothing to do */
    zf_rendezvous_unref(&r);
    zf_status_clear(&why);
    zf__svc_partials_forget(svc, req->step_id);
    return s;
}

/* ---- replies --------------------------------------------------------------- */

static void s_send(zf_exec_service_t *svc, const zf_route_t *route, const Zflow__Envelope *env)
{
    zf_status_t s = zf_envelope_send(svc->router, route, env);
    if (!zf_ok(s))
        zf_log_warn("executor", "reply %" PRIu64 " not sent: %s", env->request_id,
                    zf_status_msg(&s));
    zf_status_clear(&s);
}

static void s_send_status(zf_exec_service_t *svc, const zf_route_t *route, uint64_t request_id,
                          const zf_status_t *status)
{
    zf_status_t s = zf_envelope_send_status(svc->router, route, request_id, status);
    if (!zf_ok(s))
        zf_log_warn("executor", "reply %" PRIu64 " not sent: %s", request_id, zf_status_msg(&s));
    zf_status_clear(&s);
}

/* Sets env's body to a RegisterGraphReply or RunGraphReply carrying st and
 * handle (both taken on success). */
static zf_status_t s_typed_body(Zflow__Envelope *env, Zflow__Envelope__BodyCase kind,
                                Zflow__Status **st, char **handle)
{
    if (kind == ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY) {
        Zflow__RegisterGraphReply *b = malloc(sizeof *b);
        if (!b) return zf_out_of_memory("reply");
        zflow__register_graph_reply__init(b);
        b->status = *st;
        if (*handle) b->graph_handle = *handle;
        env->register_graph_reply = b;
    } else {
        Zflow__RunGraphReply *b = malloc(sizeof *b);
        if (!b) return zf_out_of_memory("reply");
        zflow__run_graph_reply__init(b);
        b->status = *st;
        env->run_graph_reply = b;
    }
    env->body_case = kind;
    *st = NULL;
    *handle = NULL;
    return ZF_STATUS_OK;
}

/* Answers with a RegisterGraphReply or RunGraphReply carrying status (and
 * handle, which it takes). */
static void s_send_typed(zf_exec_service_t *svc, const zf_route_t *route, uint64_t request_id,
                         Zflow__Envelope__BodyCase kind, const zf_status_t *status, char *handle)
{
    Zflow__Envelope *env = zf__svc_envelope_new(request_id);
    Zflow__Status *st = NULL;
    zf_status_t s = env ? zf_status_to_proto(status, &st) : zf_out_of_memory("reply");
    if (zf_ok(s)) s = s_typed_body(env, kind, &st, &handle);
    if (zf_ok(s))
        s_send(svc, route, env);
    else
        s_send_status(svc, route, request_id, &s);
    if (st) zflow__status__free_unpacked(st, NULL);
    if (env) zflow__envelope__free_unpacked(env, NULL);
    free(handle);
    zf_status_clear(&s);
}

/* Sends the replies of the steps that ended, then frees them. */
static void s_flush_replies(zf_exec_service_t *svc)
{
    pthread_mutex_lock(&svc->mu);
    zf__svc_step_t *st = svc->done_head;
    svc->done_head = svc->done_tail = NULL;
    pthread_mutex_unlock(&svc->mu);
    while (st) {
        zf__svc_step_t *next = st->next;
        if (st->reply)
            s_send(svc, &st->route, st->reply);
        else
            s_send_status(svc, &st->route, st->request_id, &st->status);
        pthread_mutex_lock(&svc->mu);
        zf__svc_step_free_locked(svc, st);
        pthread_mutex_unlock(&svc->mu);
        st = next;
    }
}

/* ---- the control loop --------------------------------------------------------- */

static void s_serve(zf_exec_service_t *svc, const zf_route_t *route, Zflow__Envelope *env)
{
    uint64_t id = env->request_id;
    zf_status_t s = ZF_STATUS_OK;
    char *handle = NULL;
    s = zf_route_authorize(route, ZF_ROLE_SCHEDULER, zf_envelope_body_name(env));
    if (!zf_ok(s)) {
        s_send_status(svc, route, id, &s);
        zf_status_clear(&s);
        return;
    }
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH:
        s = s_register_graph(svc, route, env->register_graph, &handle);
        s_send_typed(svc, route, id, ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY, &s, handle);
        break;
    case ZFLOW__ENVELOPE__BODY_RUN_GRAPH:
        s = zf__svc_run_graph(svc, route, id, env->run_graph);
        if (!zf_ok(s)) /* otherwise the reply comes when the step ends */
            s_send_typed(svc, route, id, ZFLOW__ENVELOPE__BODY_RUN_GRAPH_REPLY, &s, NULL);
        break;
    case ZFLOW__ENVELOPE__BODY_CLEANUP_GRAPH:
        s = s_cleanup_graph(svc, route, env->cleanup_graph);
        s_send_status(svc, route, id, &s);
        break;
    case ZFLOW__ENVELOPE__BODY_ABORT_STEP:
        s = s_abort_step(svc, route, env->abort_step);
        s_send_status(svc, route, id, &s);
        break;
    case ZFLOW__ENVELOPE__BODY_DEREGISTER_GRAPH:
        s = s_deregister_graph(svc, route, env->deregister_graph);
        s_send_status(svc, route, id, &s);
        break;
    default:
        s = zf_invalid_argument("an executor's control endpoint does not serve message body %d",
                                (int)env->body_case);
        s_send_status(svc, route, id, &s);
        break;
    }
    if (!zf_ok(s)) zf_log_debug("executor", "request %" PRIu64 ": %s", id, zf_status_msg(&s));
    zf_status_clear(&s);
}

/* Serves the requests waiting on the ROUTER, at most S_BATCH of them. */
static void s_serve_requests(zf_exec_service_t *svc)
{
    for (int i = 0; i < S_BATCH; i++) {
        zf_route_t route;
        zf_route_clear(&route);
        Zflow__Envelope *env = NULL;
        zf_status_t s = zf_envelope_recv(svc->router, 0, &route, &env);
        if (zf_ok(s)) {
            s_serve(svc, &route, env);
            zflow__envelope__free_unpacked(env, NULL);
        } else if (s.code != ZF_DEADLINE_EXCEEDED && s.code != ZF_CANCELLED && route.n > 0) {
            zf_log_warn("executor", "rejected a request: %s", zf_status_msg(&s));
            s_send_status(svc, &route, route.request_id, &s);
        }
        bool more = zf_ok(s) || (s.code != ZF_DEADLINE_EXCEEDED && s.code != ZF_CANCELLED);
        zf_status_clear(&s);
        zf_route_clear(&route);
        if (!more) return;
    }
}

/* ---- the idle trim ------------------------------------------------------------ */

void zf_exec_idle_busy(zf_exec_idle_t *idle, int64_t now_ms)
{
    idle->busy_ms = now_ms;
    idle->trimmed = false;
}

bool zf_exec_idle_trim_due(zf_exec_idle_t *idle, int64_t idle_ms, int64_t now_ms)
{
    if (idle_ms <= 0 || idle->trimmed || now_ms - idle->busy_ms < idle_ms) return false;
    idle->trimmed = true;
    return true;
}

void zf_exec_service_set_host_cache_idle_ms(zf_exec_service_t *svc, int64_t idle_ms)
{
    atomic_store(&svc->host_cache_idle_ms, idle_ms > 0 ? idle_ms : 0);
}

/* A turn of the control loop at now_ms, on which something arrived (a
 * request, a tensor, a step's end) or not: trims the host memory cache
 * when the executor has been idle long enough. A step still running keeps
 * it busy; none can start meanwhile, as steps start on this thread. */
static void s_idle_turn(zf_exec_service_t *svc, zf_exec_idle_t *idle, bool arrived, int64_t now_ms)
{
    if (arrived) zf_exec_idle_busy(idle, now_ms);
    int64_t idle_ms = atomic_load(&svc->host_cache_idle_ms);
    if (!zf_exec_idle_trim_due(idle, idle_ms, now_ms)) return;
    if (zf_exec_service_steps_in_flight(svc) > 0) {
        zf_exec_idle_busy(idle, now_ms);
        return;
    }
    size_t bytes = zf_host_memory_trim();
    if (bytes > 0)
        zf_log_info("executor",
                    "%s idle for %" PRId64 " ms: gave %zu bytes of cached host memory back",
                    svc->device->name_str, now_ms - idle->busy_ms, bytes);
}

/* The event loop: control requests, tensors from peers (the transport is
 * polled here, not by a thread of its own, so the IPC offers it holds past
 * their limit are released here too) and the replies of steps that ended
 * elsewhere. Light steps start and continue on this thread (see
 * zf__svc_run_graph), so a small step's RunGraph, its tensors and its reply
 * cost no thread hand-off. */
static void *s_control_thread(void *arg)
{
    zf_exec_service_t *svc = arg;
    zf_engine_set_inline_thread(true);
    zf__svc_loop = svc;
    zf_exec_idle_t idle = {0};
    zf_exec_idle_busy(&idle, zf_remote_now_ms());
    while (!atomic_load(&svc->stop)) {
        zmq_pollitem_t items[3] = {
            {zf_socket_handle(svc->router), 0, ZMQ_POLLIN, 0},
            {NULL, svc->wake[0], ZMQ_POLLIN, 0},
            {zf_remote_poll_handle(svc->remote), 0, ZMQ_POLLIN, 0},
        };
        int rc = zmq_poll(items, 3, S_POLL_MS);
        if (rc < 0 && zmq_errno() == ETERM) break;
        char buf[64];
        if (items[1].revents)
            while (read(svc->wake[0], buf, sizeof buf) > 0) {
            }
        if (items[2].revents) zf_remote_pump(svc->remote, S_BATCH);
        if (items[0].revents) s_serve_requests(svc);
        s_flush_replies(svc);
        int64_t now_ms = zf_remote_now_ms();
        zf_remote_expire(svc->remote, now_ms);
        s_idle_turn(svc, &idle, rc > 0, now_ms);
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------ */

static zf_status_t s_open(zf_exec_service_t *svc, const zf_exec_service_options_t *o)
{
    if (pipe(svc->wake) != 0)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED, "pipe: %s", strerror(errno));
    for (int i = 0; i < 2; i++) {
        fcntl(svc->wake[i], F_SETFL, O_NONBLOCK);
        fcntl(svc->wake[i], F_SETFD, FD_CLOEXEC);
    }
    svc->max_graphs = ZF_EXEC_MAX_GRAPHS;
    svc->max_graph_bytes = ZF_EXEC_MAX_GRAPH_BYTES;
    svc->graphs = zf_strmap_new(8, ZF_STRMAP_OWN_KEYS);
    svc->sessions = zf_strmap_new(8, ZF_STRMAP_OWN_KEYS);
    if (!svc->graphs || !svc->sessions) return zf_out_of_memory("executor service");
    ZF_TRY(zf_rendezvous_mgr_new(&svc->mgr));
    ZF_TRY(zf_remote_new_polled(svc->ctx, svc->mgr, o->rendezvous_bind, &svc->remote));
    ZF_TRY(zf_remote_attach(svc->remote, svc->device->name_str));
    if (o->shm_mib != 0)
        zf_remote_set_shm(svc->remote, o->shm_mib < 0 ? 0 : (size_t)o->shm_mib << 20, 0);
    ZF_TRY(zf_socket_new(svc->ctx, ZF_SOCKET_ROUTER, &svc->router));
    ZF_TRY(zf_socket_secure_server(svc->router, ZF_ROLE_ALL));
    /* A control message is one protobuf: never larger than protobuf's limit.
     * Set before binding so no peer can make libzmq allocate more. */
    ZF_TRY(zf_socket_set_max_frame_size(svc->router, (int64_t)ZF_GRAPHDEF_MAX_BYTES));
    ZF_TRY(zf_socket_bind(svc->router, o->control_bind ? o->control_bind : S_DEFAULT, NULL));
    if (pthread_create(&svc->thread, NULL, s_control_thread, svc) != 0)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED, "cannot start the control thread");
    svc->started = true;
    return ZF_STATUS_OK;
}

zf_status_t zf_exec_service_new(zf_zctx_t *ctx, zf_device_t *device,
                                const zf_exec_service_options_t *opts, zf_exec_service_t **out)
{
    *out = NULL;
    zf_kernels_register_builtin(true);
    zf_kernels_register_sendrecv();
    zf_exec_service_t *svc = calloc(1, sizeof *svc);
    if (!svc) return zf_out_of_memory("executor service");
    svc->ctx = ctx;
    svc->device = device;
    svc->wake[0] = svc->wake[1] = -1;
    pthread_mutex_init(&svc->mu, NULL);
    pthread_cond_init(&svc->idle, NULL);
    zf_exec_service_options_t o = opts ? *opts : (zf_exec_service_options_t){NULL, NULL, 0, 0};
    svc->peer_wait_ms = o.peer_wait_ms > 0 ? o.peer_wait_ms : ZF__SVC_PEER_WAIT_MS;
    zf_status_t s = s_open(svc, &o);
    if (!zf_ok(s)) {
        zf_exec_service_destroy(&svc);
        return s;
    }
    *out = svc;
    return ZF_STATUS_OK;
}

/* Aborts the steps in flight and waits until every one has ended. */
static void s_drain_steps(zf_exec_service_t *svc)
{
    zf_status_t why = zf_status_new(ZF_CANCELLED, "the executor is shutting down");
    pthread_mutex_lock(&svc->mu);
    int n = svc->n_partials;
    for (zf__svc_step_t *st = svc->running; st; st = st->next) n++;
    zf_rendezvous_t **rs = calloc((size_t)n + 1, sizeof *rs);
    int k = 0;
    for (zf__svc_step_t *st = svc->running; st && rs; st = st->next)
        rs[k++] = zf_rendezvous_ref(st->r);
    if (rs) k += zf__svc_partials_running_locked(svc, rs + k, n - k);
    pthread_mutex_unlock(&svc->mu);
    /* Outside the lock: an abort may finish a step on this thread. */
    for (int i = 0; i < k; i++) {
        zf_rendezvous_start_abort(rs[i], &why);
        zf_rendezvous_unref(&rs[i]);
    }
    free(rs);
    pthread_mutex_lock(&svc->mu);
    while (svc->n_running > 0) pthread_cond_wait(&svc->idle, &svc->mu);
    zf__svc_step_t *st = svc->done_head;
    svc->done_head = svc->done_tail = NULL;
    while (st) {
        zf__svc_step_t *next = st->next;
        zf__svc_step_free_locked(svc, st);
        st = next;
    }
    pthread_mutex_unlock(&svc->mu);
    zf_status_clear(&why);
}

void zf_exec_service_destroy(zf_exec_service_t **svc_p)
{
    if (!svc_p || !*svc_p) return;
    zf_exec_service_t *svc = *svc_p;
    *svc_p = NULL;
    atomic_store(&svc->stop, true);
    if (svc->started) pthread_join(svc->thread, NULL);
    s_drain_steps(svc);
    zf__svc_partials_free(svc);
    size_t iter = 0;
    uintptr_t v = 0;
    pthread_mutex_lock(&svc->mu);
    while (svc->graphs && zf_strmap_next(svc->graphs, &iter, NULL, NULL, &v)) {
        zf__svc_graph_t *g = (zf__svc_graph_t *)v;
        zf__svc_graph_unref_locked(svc, &g);
    }
    pthread_mutex_unlock(&svc->mu);
    zf_strmap_destroy(&svc->graphs);
    zf_strmap_destroy(&svc->sessions);
    zf_socket_destroy(&svc->router);
    zf_remote_destroy(&svc->remote);
    zf_rendezvous_mgr_destroy(&svc->mgr);
    for (int i = 0; i < 2; i++)
        if (svc->wake[i] >= 0) close(svc->wake[i]);
    pthread_cond_destroy(&svc->idle);
    pthread_mutex_destroy(&svc->mu);
    free(svc);
}

const char *zf_exec_service_control_endpoint(const zf_exec_service_t *svc)
{
    return zf_socket_endpoint(svc->router);
}

const char *zf_exec_service_rendezvous_endpoint(const zf_exec_service_t *svc)
{
    return zf_remote_endpoint(svc->remote);
}

uint64_t zf_exec_service_incarnation(const zf_exec_service_t *svc)
{
    return svc->device->incarnation;
}

zf_status_t zf_exec_service_set_peer(zf_exec_service_t *svc, const char *device,
                                     const char *endpoint)
{
    return zf_remote_set_peer(svc->remote, device, endpoint);
}

void zf_exec_service_set_max_unclaimed_bytes(zf_exec_service_t *svc, size_t max_bytes)
{
    zf_rendezvous_mgr_set_max_bytes(svc->mgr, max_bytes);
}

zf_rendezvous_mgr_stats_t zf_exec_service_rendezvous_stats(zf_exec_service_t *svc)
{
    return zf_rendezvous_mgr_stats(svc->mgr);
}

int zf_exec_service_num_graphs(zf_exec_service_t *svc)
{
    pthread_mutex_lock(&svc->mu);
    int n = (int)zf_strmap_size(svc->graphs);
    pthread_mutex_unlock(&svc->mu);
    return n;
}

int zf_exec_service_steps_in_flight(zf_exec_service_t *svc)
{
    pthread_mutex_lock(&svc->mu);
    int n = svc->n_running;
    pthread_mutex_unlock(&svc->mu);
    return n;
}

int64_t zf_exec_service_load(zf_exec_service_t *svc)
{
    pthread_mutex_lock(&svc->mu);
    int64_t n = svc->load;
    pthread_mutex_unlock(&svc->mu);
    return n;
}

bool zf_exec_service_take_peers_wanted(zf_exec_service_t *svc)
{
    return atomic_exchange(&svc->peers_wanted, false);
}

zf_status_t zf_exec_service_rename(zf_exec_service_t *svc, const char *name)
{
    zf_device_name_t parsed;
    ZF_TRY(zf_device_name_parse(name, &parsed));
    if (!zf_device_name_is_full(&parsed))
        return zf_invalid_argument("device name '%s' is not a full device name", name);
    if (strcmp(parsed.type, svc->device->type) != 0)
        return zf_invalid_argument("device name '%s' is not of this executor's type %s", name,
                                   svc->device->type);
    svc->device->name = parsed;
    zf_device_name_format(&parsed, svc->device->name_str, sizeof svc->device->name_str);
    return zf_remote_attach(svc->remote, svc->device->name_str);
}

bool zf_exec_service_has_peer(zf_exec_service_t *svc, const char *device)
{
    return zf_remote_wait_peer(svc->remote, device, 0);
}

void zf_exec_service_set_peer_host(zf_exec_service_t *svc, const char *device, const char *host_id)
{
    zf_remote_set_peer_host(svc->remote, device, host_id);
}

zf_status_t zf_exec_service_update_peer(zf_exec_service_t *svc, const char *device,
                                        const char *endpoint, uint64_t incarnation, bool *changed)
{
    return zf_remote_update_peer(svc->remote, device, endpoint, incarnation, changed);
}

uint64_t zf_exec_service_peer_incarnation(zf_exec_service_t *svc, const char *device)
{
    return zf_remote_peer_incarnation(svc->remote, device);
}
