/* The broker loop: owns the ROUTER socket, its monitor and the executor
 * registry; receives each message and dispatches it to the schedulers'
 * side (broker_peers.c) or the client requests' (broker_requests.c). */
#include "broker/broker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "broker/broker_internal.h"
#include "broker/job_blobs.h"
#include "common/log.h"

#define S_STOP_CHECK_MS 100         /* how often zf_broker_run looks at the stop flag */
#define S_BATCH         1024        /* messages handled per round before expiry runs */

/* ---- dispatch ------------------------------------------------------------------ */

/* A field check the codec cannot make: sub-messages proto3 lets be absent. */
static bool s_body_present(const Zflow__Envelope *env)
{
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR: return env->register_executor != NULL;
    case ZFLOW__ENVELOPE__BODY_HEARTBEAT: return env->heartbeat != NULL;
    case ZFLOW__ENVELOPE__BODY_DEREGISTER_EXECUTOR: return env->deregister_executor != NULL;
    default: return true;
    }
}

/* The roles whose keys may send env to the broker (a reply passed back
 * from a scheduler carries two routing frames). */
static unsigned s_allowed_roles(const zf_route_t *route, Zflow__Envelope__BodyCase body)
{
    if (route->n == 2) return ZF_ROLE_SCHEDULER;
    switch (body) {
    case ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR:
    case ZFLOW__ENVELOPE__BODY_DEREGISTER_EXECUTOR:
    case ZFLOW__ENVELOPE__BODY_HEARTBEAT: return ZF_ROLE_EXECUTOR;
    case ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER: return ZF_ROLE_SCHEDULER;
    case ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS:
    case ZFLOW__ENVELOPE__BODY_PING: return ZF_ROLE_ALL;
    default: return ZF_ROLE_CLIENT;
    }
}

static void s_dispatch(zf_broker_t *b, const zf_route_t *route, const Zflow__Envelope *env)
{
    zf__broker_ident_t from = zf__broker_ident_at(route, 0);
    zf_status_t st =
        zf_route_authorize(route, s_allowed_roles(route, env->body_case),
                           route->n == 2 ? "a scheduler's reply" : zf_envelope_body_name(env));
    if (!zf_ok(st)) {
        if (route->n >= 1) zf__broker_send_status(b, &from, env->request_id, &st);
        zf_status_clear(&st);
        return;
    }
    zf__broker_msg_t m;
    zf__broker_msg_of(env, &m);
    if (route->n == 2) {
        zf__broker_on_scheduler_reply(b, route, &m);
        return;
    }
    if (route->n != 1)
        st = zf_invalid_argument("a message with %d routing frames; the broker takes 0 or 1 "
                                 "before the envelope",
                                 route->n - 1);
    else if (!s_body_present(env))
        st = zf_invalid_argument("%s has no contents", zf__broker_body_name(env));
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR)
        zf__broker_on_register_executor(b, &from, env);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_HEARTBEAT)
        zf__broker_on_heartbeat(b, &from, env);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_DEREGISTER_EXECUTOR)
        zf__broker_on_deregister_executor(b, &from, env);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER)
        zf__broker_on_register_scheduler(b, &from, env);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS)
        zf__broker_send_listing(b, &from, env->request_id, false,
                                route->secure &&
                                    zf_role_of_identity(route->peer) == ZF_ROLE_CLIENT);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_PING)
        zf__broker_send_status(b, &from, env->request_id, &st); /* OK: the broker is alive */
    else if (zf__broker_jobs_serves(env->body_case))
        zf__broker_jobs_on_request(b, &from, env);
    else if (zf__broker_is_client_request(env->body_case))
        zf__broker_forward_request(b, &from, &m);
    else
        st = zf_invalid_argument("the broker does not serve %s", zf__broker_body_name(env));
    if (!zf_ok(st)) {
        zf_log_warn(ZF__BROKER_LOG, "bad message (request %" PRIu64 "): %s", env->request_id,
                    zf_status_msg(&st));
        zf__broker_send_status(b, &from, env->request_id, &st);
    }
}

/* A large message passed on as it came (m->raw): a client's request for a
 * scheduler or a scheduler's reply for a client, checked as s_dispatch
 * checks a decoded one; the scheduler decodes it. */
static void s_dispatch_raw(zf_broker_t *b, const zf_route_t *route, const zf__broker_msg_t *m)
{
    zf__broker_ident_t from = zf__broker_ident_at(route, 0);
    zf_status_t st =
        zf_route_authorize(route, s_allowed_roles(route, m->body),
                           route->n == 2 ? "a scheduler's reply" : zf__broker_case_name(m->body));
    if (!zf_ok(st)) {
        zf__broker_send_status(b, &from, m->request_id, &st);
        return;
    }
    if (route->n == 2)
        zf__broker_on_scheduler_reply(b, route, m);
    else if (m->body == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB)
        zf__broker_jobs_on_large_submit(b, &from, m);
    else
        zf__broker_forward_request(b, &from, m);
}

/* ---- the loop ------------------------------------------------------------------- */

static zf_status_t s_recv_error(int err)
{
    if (err == EAGAIN) return zf_status_new(ZF_DEADLINE_EXCEEDED, "no message is ready");
    if (err == ETERM) return zf_status_new(ZF_CANCELLED, "the ZeroMQ context is terminating");
    return zf_status_new(ZF_UNAVAILABLE, "receiving a message: %s", zmq_strerror(err));
}

/* Whether frame, received with route, is one the broker passes on without
 * decoding it: large, a well-formed header of the protocol's version, and
 * a client request (one routing frame) or a scheduler's reply (two); or a
 * large SubmitJob, which the broker keeps as it came. Fills m when it is. */
static bool s_pass_raw(zmq_msg_t *frame, const zf_route_t *route, zf__broker_msg_t *m)
{
    uint64_t version = 0;
    if (zmq_msg_size(frame) < ZF__BROKER_PASS_RAW_BYTES ||
        !zf__broker_peek(zmq_msg_data(frame), zmq_msg_size(frame), m, &version) ||
        version != ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1)
        return false;
    if (route->n == 2) { /* a reply to the broker's own job requests is read here */
        zf__broker_ident_t to = zf__broker_ident_at(route, 1);
        return m->body != ZFLOW__ENVELOPE__BODY__NOT_SET && !zf__broker_jobs_is_self(&to);
    }
    return route->n == 1 && zf__broker_is_client_request(m->body) &&
           (!zf__broker_jobs_serves(m->body) || /* jobs are the broker's own */
            m->body == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB);
}

/* zf_envelope_recv's checks on the next ready message, also telling which
 * connection it came from (ZMQ_SRCFD) so that a disconnect event can be
 * matched to a scheduler. DEADLINE_EXCEEDED when none is ready. A large
 * message to pass on is not decoded: *env stays NULL, and raw (an
 * initialized zmq_msg_t) takes its envelope frame, whose header is in
 * *m. */
static zf_status_t s_recv(zf_broker_t *b, zf_route_t *route, Zflow__Envelope **env, zmq_msg_t *raw,
                          zf__broker_msg_t *m)
{
    *env = NULL;
    b->msg_fd = -1;
    zf_route_clear(route);
    void *h = zf_socket_handle(b->sock);
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    zf_status_t fault = ZF_STATUS_OK;
    if (zmq_msg_recv(&frame, h, ZMQ_DONTWAIT) < 0) fault = s_recv_error(zmq_errno());
    while (zf_ok(fault) && zmq_msg_more(&frame)) {
        fault = zf_route_push(route, zmq_msg_data(&frame), zmq_msg_size(&frame));
        if (!zf_ok(fault)) {
            zf_socket_drain(b->sock);
            break;
        }
        if (zmq_msg_recv(&frame, h, ZMQ_DONTWAIT) < 0) fault = s_recv_error(zmq_errno());
    }
    if (zf_ok(fault)) {
        b->msg_fd = zmq_msg_get(&frame, ZMQ_SRCFD);
        route->secure = zf_socket_is_secure_server(b->sock);
        const char *user = route->secure ? zmq_msg_gets(&frame, "User-Id") : NULL;
        snprintf(route->peer, sizeof route->peer, "%s", user ? user : "");
        if (s_pass_raw(&frame, route, m)) {
            route->request_id = m->request_id;
            m->raw = raw;
            zmq_msg_move(raw, &frame);
        } else {
            fault = zf_envelope_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), env,
                                       &route->request_id);
        }
    }
    zmq_msg_close(&frame);
    return fault;
}

/* Receives and handles one message. DEADLINE_EXCEEDED when none is ready. */
static zf_status_t s_serve_one(zf_broker_t *b)
{
    zf_route_t route;
    Zflow__Envelope *env = NULL;
    zmq_msg_t raw;
    zmq_msg_init(&raw);
    zf__broker_msg_t m = {0};
    zf_status_t st = s_recv(b, &route, &env, &raw, &m);
    if (zf_ok(st) && !env) {
        s_dispatch_raw(b, &route, &m);
        zmq_msg_close(&raw);
        return ZF_STATUS_OK;
    }
    zmq_msg_close(&raw);
    if (st.code == ZF_DEADLINE_EXCEEDED || st.code == ZF_CANCELLED) return st;
    if (!zf_ok(st)) {
        zf_log_warn(ZF__BROKER_LOG, "bad message (request %" PRIu64 "): %s", route.request_id,
                    zf_status_msg(&st));
        if (route.n > 0) {
            zf__broker_ident_t from = zf__broker_ident_at(&route, 0);
            zf__broker_send_status(b, &from, route.request_id, &st);
        }
        zf_status_clear(&st);
        return ZF_STATUS_OK;
    }
    s_dispatch(b, &route, env);
    zflow__envelope__free_unpacked(env, NULL);
    return ZF_STATUS_OK;
}

/* Drops the schedulers and executors and forgets the clients whose
 * connections closed. A
 * monitor event is two frames: [u16 event, u32 value (the fd)][endpoint]. */
void zf__broker_serve_monitor(zf_broker_t *b)
{
    void *h = zf_socket_handle(b->monitor);
    zmq_msg_t m;
    zmq_msg_init(&m);
    while (zmq_msg_recv(&m, h, ZMQ_DONTWAIT) >= 0) {
        uint16_t event = 0;
        uint32_t fd = 0;
        if (zmq_msg_size(&m) >= 6) {
            memcpy(&event, zmq_msg_data(&m), sizeof event);
            memcpy(&fd, (uint8_t *)zmq_msg_data(&m) + 2, sizeof fd);
        }
        zf_socket_drain(b->monitor);
        if (event != ZMQ_EVENT_DISCONNECTED) continue;
        for (int i = 0; i < b->n_scheds;) {
            if (b->scheds[i].fd == (int)fd)
                zf__broker_sched_drop(b, i, "disconnected");
            else
                i++;
        }
        zf_registry_drop_conn(b->reg, (int)fd);
        zf__broker_clients_disconnected(b, (int)fd);
    }
    zmq_msg_close(&m);
}

static zf_status_t s_wait(zf_broker_t *b, int wait_ms)
{
    zmq_pollitem_t items[3] = {{zf_socket_handle(b->monitor), 0, ZMQ_POLLIN, 0},
                               {zf_socket_handle(b->sock), 0, ZMQ_POLLIN, 0},
                               {zf__broker_jobs_socket(b), 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(items, items[2].socket ? 3 : 2, wait_ms) >= 0 || zmq_errno() == EINTR)
        return ZF_STATUS_OK;
    return s_recv_error(zmq_errno());
}

zf_status_t zf_broker_poll(zf_broker_t *b, int timeout_ms)
{
    int64_t expiry = zf_registry_next_expiry_ms(b->reg);
    int wait = timeout_ms;
    if (expiry >= 0 && (wait < 0 || expiry < wait)) wait = (int)expiry;
    ZF_TRY(s_wait(b, wait));
    /* Disconnects first: a request must not go to a scheduler known gone. */
    zf__broker_serve_monitor(b);
    for (int i = 0; i < S_BATCH; i++) {
        zf_status_t st = s_serve_one(b);
        if (st.code == ZF_DEADLINE_EXCEEDED) {
            zf_status_clear(&st);
            break;
        }
        ZF_TRY(st);
    }
    zf__broker_jobs_round(b);
    zf_registry_expire(b->reg);
    return ZF_STATUS_OK;
}

zf_status_t zf_broker_run(zf_broker_t *b)
{
    while (!b->stop) ZF_TRY(zf_broker_poll(b, S_STOP_CHECK_MS));
    return ZF_STATUS_OK;
}

void zf_broker_stop(zf_broker_t *b)
{
    b->stop = 1;
}

/* ---- setup ------------------------------------------------------------------------ */

/* ZeroMQ-level heartbeats close connections to peers that stopped
 * answering, so a hung scheduler's next send fails and it is dropped. */
static zf_status_t s_configure_socket(zf_broker_t *b)
{
    ZF_TRY(zf_socket_set_router_mandatory(b->sock, true));
    ZF_TRY(zf_socket_set_send_timeout(b->sock, 0));
    ZF_TRY(zf_socket_set_max_frame_size(b->sock, (int64_t)ZF_BROKER_MAX_FRAME));
    int ivl = b->heartbeat_ms, timeout = b->heartbeat_ms * b->heartbeat_misses;
    void *h = zf_socket_handle(b->sock);
    if (zmq_setsockopt(h, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl) != 0 ||
        zmq_setsockopt(h, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout) != 0)
        return zf_internal("cannot set ZeroMQ heartbeats: %s", zmq_strerror(zmq_errno()));
    return ZF_STATUS_OK;
}

/* The bound endpoint with a wildcard host replaced by loopback. */
static void s_set_endpoint(zf_broker_t *b, const char *bound)
{
    const char *wild = "tcp://0.0.0.0:";
    if (strncmp(bound, wild, strlen(wild)) == 0)
        snprintf(b->endpoint, sizeof b->endpoint, "tcp://127.0.0.1:%s", bound + strlen(wild));
    else
        snprintf(b->endpoint, sizeof b->endpoint, "%s", bound);
}

static zf_status_t s_open(zf_broker_t *b, const zf_broker_config_t *config)
{
    zf_registry_config_t rc = {config->heartbeat_ms, config->heartbeat_misses, NULL, NULL, true};
    ZF_TRY(zf_registry_new(&rc, &b->reg));
    zf_registry_set_listener(b->reg, zf__broker_on_registry_event, b);
    ZF_TRY(zf_zctx_new(&b->ctx));
    if (config->keys) ZF_TRY(zf_zctx_set_keys(b->ctx, config->keys, ZF_ROLE_BROKER));
    ZF_TRY(zf_socket_new(b->ctx, ZF_SOCKET_ROUTER, &b->sock));
    ZF_TRY(zf_socket_secure_server(b->sock, ZF_ROLE_ALL));
    ZF_TRY(s_configure_socket(b));
    char addr[64];
    snprintf(addr, sizeof addr, "inproc://zflow-broker-monitor-%p", (void *)b);
    if (zmq_socket_monitor(zf_socket_handle(b->sock), addr, ZMQ_EVENT_DISCONNECTED) != 0)
        return zf_internal("cannot monitor the broker socket: %s", zmq_strerror(zmq_errno()));
    ZF_TRY(zf_socket_new(b->ctx, ZF_SOCKET_PAIR, &b->monitor));
    ZF_TRY(zf_socket_connect(b->monitor, addr));
    const char *bound = NULL;
    ZF_TRY(zf_socket_bind(b->sock, config->listen, &bound));
    s_set_endpoint(b, bound);
    return ZF_STATUS_OK;
}

zf_status_t zf_broker_new(const zf_broker_config_t *config, zf_broker_t **out)
{
    *out = NULL;
    if (!config->listen || !config->listen[0])
        return zf_invalid_argument("the broker needs an endpoint to listen on");
    if (config->heartbeat_ms < 1 || config->heartbeat_misses < 1 ||
        config->heartbeat_ms > INT32_MAX / config->heartbeat_misses)
        return zf_invalid_argument("heartbeat period %d ms and %d misses are out of range",
                                   config->heartbeat_ms, config->heartbeat_misses);
    if (config->max_client_requests < 0)
        return zf_invalid_argument("a client's requests in flight must be limited to 1 or more "
                                   "(0: the default, %d), not %d",
                                   ZF_BROKER_MAX_CLIENT_REQUESTS, config->max_client_requests);
    if (config->max_job_steps < 0)
        return zf_invalid_argument("a job's steps must be limited to 1 or more (0: the default, "
                                   "%d), not %" PRId64,
                                   ZF_BROKER_JOB_STEPS_MAX, config->max_job_steps);
    if (config->job_results < 0 || config->job_ttl_ms < 0)
        return zf_invalid_argument("job results must be kept 1 or more at a time (not %d) for "
                                   "1 ms or more (not %d), or 0 for the defaults",
                                   config->job_results, config->job_ttl_ms);
    if (config->max_attempts < 0)
        return zf_invalid_argument("a job's attempts must be limited to 1 or more (0: the "
                                   "default, %d), not %d",
                                   ZF_BROKER_MAX_ATTEMPTS, config->max_attempts);
    if (config->max_requests < 0 || config->max_requests > ZF_PENDING_MAX)
        return zf_invalid_argument("the broker's requests in flight from all clients must be "
                                   "limited to 1 to %d (0: the default, %d), not %d",
                                   ZF_PENDING_MAX, ZF_BROKER_MAX_REQUESTS, config->max_requests);
    zf_broker_t *b = calloc(1, sizeof *b);
    if (!b) return zf_out_of_memory("a broker");
    b->heartbeat_ms = config->heartbeat_ms;
    b->heartbeat_misses = config->heartbeat_misses;
    b->last_pick = -1; /* the first pick is the first scheduler */
    b->max_client_requests = config->max_client_requests > 0 ? config->max_client_requests
                                                             : ZF_BROKER_MAX_CLIENT_REQUESTS;
    b->max_requests = config->max_requests > 0 ? config->max_requests : ZF_BROKER_MAX_REQUESTS;
    zf_status_t s = zf__broker_requests_init(b);
    if (zf_ok(s)) s = s_open(b, config);
    if (zf_ok(s)) s = zf__broker_jobs_open(b, config);
    if (!zf_ok(s)) {
        zf_broker_destroy(&b);
        return s;
    }
    *out = b;
    return ZF_STATUS_OK;
}

/* Gives the socket ~50 ms to process pending connection teardown before it
 * closes: with replies queued to peers that had just disconnected, libzmq
 * 4.3 was seen to hang context termination otherwise (about 1 run in 300
 * under load); polling makes the socket handle those commands itself. */
static void s_settle(zf_broker_t *b)
{
    for (int i = 0; i < 5; i++) {
        zmq_pollitem_t item = {zf_socket_handle(b->sock), 0, ZMQ_POLLIN, 0};
        zmq_poll(&item, 1, 10);
    }
}

void zf_broker_destroy(zf_broker_t **b_p)
{
    if (!b_p || !*b_p) return;
    zf_broker_t *b = *b_p;
    *b_p = NULL;
    if (b->sock) {
        s_settle(b);
        zmq_socket_monitor(zf_socket_handle(b->sock), NULL, 0);
    }
    zf__broker_jobs_close(b); /* its thread's sockets before the context */
    zf_socket_destroy(&b->monitor);
    zf_socket_destroy(&b->sock);
    zf_zctx_destroy(&b->ctx);
    zf_registry_destroy(&b->reg);
    zf__broker_requests_free(b);
    free(b->scheds);
    free(b);
}

const char *zf_broker_endpoint(const zf_broker_t *b)
{
    return b->endpoint;
}

int zf_broker_num_schedulers(const zf_broker_t *b)
{
    return b->n_scheds;
}

int zf_broker_num_outstanding(const zf_broker_t *b)
{
    return zf_pending_size(b->pending);
}

int zf_broker_num_clients(const zf_broker_t *b)
{
    return (int)zf_strmap_size(b->clients);
}
