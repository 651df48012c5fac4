/* The broker loop: owns the ROUTER socket, the executor registry, the
 * registered schedulers, the client requests they have not answered and
 * each client's count of them. */
#include "broker/broker.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "broker/registry.h"
#include "common/device_name.h"
#include "common/log.h"
#include "common/strmap.h"
#include "common/transport.h"

#define S_LOG           "broker"
#define S_MAX_FRAME     (256 << 20) /* largest frame a peer may send */
#define S_STOP_CHECK_MS 100         /* how often zf_broker_run looks at the stop flag */
#define S_BATCH         1024        /* messages handled per round before expiry runs */

/* A peer's routing identity as the ROUTER prepends it. */
typedef struct s_ident {
    size_t len;
    uint8_t id[ZF_ROUTE_MAX_FRAME_BYTES];
} s_ident_t;

typedef struct s_sched {
    s_ident_t id;
    int outstanding;
    int fd;       /* its connection, to match disconnect events */
    char sid[24]; /* its own id, the prefix of its session and job ids */
} s_sched_t;

/* A client request handed to a scheduler and not answered yet. */
typedef struct s_pending {
    s_ident_t client;
    s_ident_t sched;
    uint64_t request_id;
} s_pending_t;

/* A client with requests in flight; the clients map's key points into id. */
typedef struct s_client {
    s_ident_t id;
    int in_flight;
    int fd; /* its connection, to forget it when that closes */
} s_client_t;

struct zf_broker {
    zf_zctx_t *ctx;
    zf_socket_t *sock;
    zf_socket_t *monitor; /* PAIR receiving the ROUTER's disconnect events */
    int msg_fd;           /* connection of the message being handled */
    zf_registry_t *reg;
    int heartbeat_ms;
    int heartbeat_misses;
    char endpoint[256];
    s_sched_t *scheds;
    int n_scheds, cap_scheds;
    int last_pick; /* the scheduler picked last, where the round robin goes on */
    s_pending_t *pending;
    int n_pending, cap_pending;
    zf_strmap_t *clients; /* routing id -> s_client_t *, while it has requests in flight */
    int max_client_requests;
    volatile sig_atomic_t stop;
};

/* ---- identities and replies ------------------------------------------- */

static s_ident_t s_ident_at(const zf_route_t *route, int i)
{
    s_ident_t id = {route->len[i], {0}};
    memcpy(id.id, route->frame[i], id.len);
    return id;
}

static bool s_ident_equal(const s_ident_t *a, const s_ident_t *b)
{
    return a->len == b->len && memcmp(a->id, b->id, a->len) == 0;
}

static zf_route_t s_route_to(const s_ident_t *id)
{
    zf_route_t r;
    zf_route_clear(&r);
    zf_status_t s = zf_route_push(&r, id->id, id->len); /* cannot fail: one short frame */
    zf_status_clear(&s);
    return r;
}

/* Hex of the first bytes of an identity, for logs. */
static const char *s_ident_str(const s_ident_t *id, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < id->len && i < 16 && used + 3 <= size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%02x", id->id[i]);
    return buf;
}

static const char *s_body_name(const Zflow__Envelope *env)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(
        &zflow__envelope__descriptor, (unsigned)env->body_case);
    return f ? f->name : "no body";
}

/* Sends env to id; a failure is logged and returned. */
static zf_status_t s_send(zf_broker_t *b, const s_ident_t *id, const Zflow__Envelope *env)
{
    zf_route_t r = s_route_to(id);
    zf_status_t s = zf_envelope_send(b->sock, &r, env);
    if (!zf_ok(s)) {
        char hex[40];
        zf_log_info(S_LOG, "cannot send %s to peer %s: %s", s_body_name(env),
                    s_ident_str(id, hex, sizeof hex), zf_status_msg(&s));
    }
    return s;
}

/* Answers id with a StatusReply carrying st; st is cleared. */
static void s_send_status(zf_broker_t *b, const s_ident_t *id, uint64_t request_id, zf_status_t *st)
{
    zf_route_t r = s_route_to(id);
    zf_status_t s = zf_envelope_send_status(b->sock, &r, request_id, st);
    if (!zf_ok(s)) {
        char hex[40];
        zf_log_info(S_LOG, "cannot answer peer %s: %s", s_ident_str(id, hex, sizeof hex),
                    zf_status_msg(&s));
    }
    zf_status_clear(&s);
    zf_status_clear(st);
}

static Zflow__Envelope s_envelope(uint64_t request_id)
{
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = request_id;
    return env;
}

/* ---- schedulers and their outstanding requests ---------------------------- */

static int s_sched_find(const zf_broker_t *b, const s_ident_t *id)
{
    for (int i = 0; i < b->n_scheds; i++)
        if (s_ident_equal(&b->scheds[i].id, id)) return i;
    return -1;
}

static zf_status_t s_grow(void **arr, int *cap, int n, size_t elem)
{
    if (n < *cap) return ZF_STATUS_OK;
    int ncap = *cap ? 2 * *cap : 8;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p) return zf_out_of_memory("broker bookkeeping");
    *arr = p;
    *cap = ncap;
    return ZF_STATUS_OK;
}

static void s_serve_monitor(zf_broker_t *b);

/* ---- clients and their requests in flight ----------------------------------- */

static s_client_t *s_client_find(const zf_broker_t *b, const s_ident_t *id)
{
    uintptr_t v = 0;
    return zf_strmap_get_n(b->clients, (const char *)id->id, id->len, &v) ? (s_client_t *)v : NULL;
}

/* Counts one more request (a `what`) in flight for client id, whose
 * message came on b->msg_fd. RESOURCE_EXHAUSTED when it is at its limit. */
static zf_status_t s_client_add(zf_broker_t *b, const s_ident_t *id, const char *what)
{
    s_client_t *c = s_client_find(b, id);
    if (c && c->in_flight >= b->max_client_requests)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "%s refused: this client already has %d requests in flight through "
                             "the broker, the most one client may have (--max-client-requests "
                             "%d); send more once replies come back",
                             what, c->in_flight, b->max_client_requests);
    if (!c || c->fd != b->msg_fd) {
        /* Disconnects that happened before this message apply first, so
         * that a closed connection's fd, now this one's, forgets nobody. */
        s_serve_monitor(b);
        c = s_client_find(b, id);
    }
    if (!c) {
        if (!(c = calloc(1, sizeof *c))) return zf_out_of_memory("broker: a client's count");
        c->id = *id;
        if (zf_strmap_insert_n(b->clients, (const char *)c->id.id, c->id.len, (uintptr_t)c, NULL)) {
            free(c);
            return zf_out_of_memory("broker: the client table");
        }
    }
    c->fd = b->msg_fd;
    c->in_flight++;
    return ZF_STATUS_OK;
}

/* One request of client id answered (or failed); the last one forgets it. */
static void s_client_done(zf_broker_t *b, const s_ident_t *id)
{
    s_client_t *c = s_client_find(b, id);
    if (!c || --c->in_flight > 0) return;
    zf_strmap_remove_n(b->clients, (const char *)c->id.id, c->id.len, NULL);
    free(c);
}

/* Forgets client c and its requests in flight, which nobody can receive
 * any more: a late reply to one is dropped. */
static void s_client_forget(zf_broker_t *b, s_client_t *c)
{
    int n = 0;
    for (int k = 0; k < b->n_pending;) {
        if (!s_ident_equal(&b->pending[k].client, &c->id)) {
            k++;
            continue;
        }
        int i = s_sched_find(b, &b->pending[k].sched);
        if (i >= 0) b->scheds[i].outstanding--;
        b->pending[k] = b->pending[--b->n_pending];
        n++;
    }
    char hex[40];
    zf_log_info(S_LOG, "client %s disconnected; forgot its %d requests in flight",
                s_ident_str(&c->id, hex, sizeof hex), n);
    zf_strmap_remove_n(b->clients, (const char *)c->id.id, c->id.len, NULL);
    free(c);
}

/* Forgets the clients whose connection fd closed. */
static void s_clients_disconnected(zf_broker_t *b, int fd)
{
    size_t iter = 0;
    uintptr_t v = 0;
    while (zf_strmap_next(b->clients, &iter, NULL, NULL, &v)) {
        if (((s_client_t *)v)->fd != fd) continue;
        s_client_forget(b, (s_client_t *)v);
        iter = 0; /* the map changed under the iteration */
    }
}

/* Drops scheduler i; each request it held is answered UNAVAILABLE. */
static void s_sched_drop(zf_broker_t *b, int i, const char *why)
{
    s_ident_t id = b->scheds[i].id;
    char hex[40];
    zf_log_warn(S_LOG, "scheduler %s dropped (%s); failing its %d outstanding requests",
                s_ident_str(&id, hex, sizeof hex), why, b->scheds[i].outstanding);
    memmove(&b->scheds[i], &b->scheds[i + 1], (size_t)(b->n_scheds - i - 1) * sizeof *b->scheds);
    b->n_scheds--;
    for (int k = 0; k < b->n_pending;) {
        s_pending_t p = b->pending[k];
        if (!s_ident_equal(&p.sched, &id)) {
            k++;
            continue;
        }
        b->pending[k] = b->pending[--b->n_pending];
        s_client_done(b, &p.client);
        zf_status_t st = zf_status_new(ZF_UNAVAILABLE,
                                       "the scheduler serving this request is gone "
                                       "(%s)",
                                       why);
        s_send_status(b, &p.client, p.request_id, &st);
    }
}

/* The scheduler with the fewest outstanding requests, or -1; ties go round
 * robin, so that new sessions and jobs spread over idle schedulers. */
static int s_sched_pick(zf_broker_t *b)
{
    int best = -1;
    for (int k = 1; k <= b->n_scheds; k++) {
        int i = (b->last_pick + k) % b->n_scheds;
        if (best < 0 || b->scheds[i].outstanding < b->scheds[best].outstanding) best = i;
    }
    if (best >= 0) b->last_pick = best;
    return best;
}

/* ---- device events ---------------------------------------------------------- */

static void s_on_registry_event(void *arg, zf_registry_event_t event,
                                const Zflow__ExecutorInfo *info, const char *reason)
{
    zf_broker_t *b = arg;
    const char *name = info->device->name;
    if (event == ZF_REGISTRY_JOINED)
        zf_log_info(S_LOG, "executor %s joined (control %s)", name, info->control_endpoint);
    else
        zf_log_warn(S_LOG, "executor %s died: %s", name, reason);
    Zflow__DeviceEvent ev = ZFLOW__DEVICE_EVENT__INIT;
    ev.kind = event == ZF_REGISTRY_JOINED ? ZFLOW__DEVICE_EVENT__KIND__JOINED
                                          : ZFLOW__DEVICE_EVENT__KIND__DIED;
    ev.executor = (Zflow__ExecutorInfo *)info; /* only read while packing */
    ev.reason = (char *)reason;
    Zflow__Envelope env = s_envelope(0);
    env.body_case = ZFLOW__ENVELOPE__BODY_DEVICE_EVENT;
    env.device_event = &ev;
    for (int i = 0; i < b->n_scheds;) {
        zf_status_t s = s_send(b, &b->scheds[i].id, &env);
        bool gone = s.code == ZF_UNAVAILABLE;
        zf_status_clear(&s);
        if (gone)
            s_sched_drop(b, i, "disconnected");
        else
            i++;
    }
}

/* ---- requests the broker serves itself ----------------------------------------- */

static void s_on_register_executor(zf_broker_t *b, const s_ident_t *from,
                                   const Zflow__Envelope *req)
{
    char name[ZF_DEVICE_NAME_MAX] = "";
    zf_status_t st = zf_registry_register(b->reg, req->register_executor->info, name, sizeof name);
    if (!zf_ok(st)) {
        zf_log_warn(S_LOG, "RegisterExecutor refused: %s", zf_status_msg(&st));
        st = zf_status_prefix(st, "RegisterExecutor");
    }
    Zflow__RegisterExecutorReply reply = ZFLOW__REGISTER_EXECUTOR_REPLY__INIT;
    zf_status_t s = zf_status_to_proto(&st, &reply.status);
    zf_status_clear(&st);
    if (!zf_ok(s)) {
        s_send_status(b, from, req->request_id, &s);
        return;
    }
    reply.device_name = name;
    reply.heartbeat_ms = (uint32_t)b->heartbeat_ms;
    reply.heartbeat_misses = (uint32_t)b->heartbeat_misses;
    Zflow__Envelope env = s_envelope(req->request_id);
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR_REPLY;
    env.register_executor_reply = &reply;
    zf_status_t sent = s_send(b, from, &env);
    zf_status_clear(&sent);
    zflow__status__free_unpacked(reply.status, NULL);
}

static void s_on_heartbeat(zf_broker_t *b, const s_ident_t *from, const Zflow__Envelope *req)
{
    const Zflow__Heartbeat *hb = req->heartbeat;
    zf_status_t st = zf_registry_heartbeat(b->reg, hb->device_name, hb->incarnation, hb->load);
    Zflow__HeartbeatReply reply = ZFLOW__HEARTBEAT_REPLY__INIT;
    zf_status_t s = zf_status_to_proto(&st, &reply.status);
    zf_status_clear(&st);
    if (!zf_ok(s)) {
        s_send_status(b, from, req->request_id, &s);
        return;
    }
    Zflow__Envelope env = s_envelope(req->request_id);
    env.body_case = ZFLOW__ENVELOPE__BODY_HEARTBEAT_REPLY;
    env.heartbeat_reply = &reply;
    zf_status_t sent = s_send(b, from, &env);
    zf_status_clear(&sent);
    zflow__status__free_unpacked(reply.status, NULL);
}

/* Replies to a RegisterScheduler or a ListExecutors with the live executors. */
static void s_send_listing(zf_broker_t *b, const s_ident_t *from, uint64_t request_id,
                           bool for_scheduler)
{
    Zflow__ExecutorInfo **list = NULL;
    size_t n = 0;
    zf_status_t s = zf_registry_list(b->reg, &list, &n);
    if (!zf_ok(s)) {
        s_send_status(b, from, request_id, &s);
        return;
    }
    Zflow__Envelope env = s_envelope(request_id);
    Zflow__RegisterSchedulerReply sched = ZFLOW__REGISTER_SCHEDULER_REPLY__INIT;
    Zflow__ListExecutorsReply listing = ZFLOW__LIST_EXECUTORS_REPLY__INIT;
    if (for_scheduler) {
        sched.executors = list;
        sched.n_executors = n;
        env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER_REPLY;
        env.register_scheduler_reply = &sched;
    } else {
        listing.executors = list;
        listing.n_executors = n;
        env.body_case = ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS_REPLY;
        env.list_executors_reply = &listing;
    }
    s = s_send(b, from, &env);
    zf_status_clear(&s);
    zf_registry_list_free(list, n);
}

/* The registered scheduler whose id is sid, or -1. */
static int s_sched_find_sid(const zf_broker_t *b, const char *sid)
{
    for (int i = 0; sid[0] && i < b->n_scheds; i++)
        if (strcmp(b->scheds[i].sid, sid) == 0) return i;
    return -1;
}

/* A scheduler id is short and names nothing else: it is routed on. */
static zf_status_t s_check_sid(const zf_broker_t *b, const s_ident_t *from, const char *sid)
{
    if (strlen(sid) >= sizeof b->scheds[0].sid || strchr(sid, '/'))
        return zf_invalid_argument("RegisterScheduler: scheduler id '%.40s' is longer than %zu "
                                   "bytes or holds a '/'",
                                   sid, sizeof b->scheds[0].sid - 1);
    int other = s_sched_find_sid(b, sid);
    if (other >= 0 && !s_ident_equal(&b->scheds[other].id, from))
        return zf_status_new(ZF_ALREADY_EXISTS, "RegisterScheduler: another scheduler has id '%s'",
                             sid);
    return ZF_STATUS_OK;
}

/* Registering again is harmless (a scheduler may repeat it as a keepalive)
 * and refreshes the connection a fixed routing id now arrives on. */
static void s_on_register_scheduler(zf_broker_t *b, const s_ident_t *from,
                                    const Zflow__Envelope *req)
{
    const Zflow__RegisterScheduler *rs = req->register_scheduler;
    const char *sid = rs && rs->scheduler_id ? rs->scheduler_id : "";
    zf_status_t s = s_check_sid(b, from, sid);
    int known = s_sched_find(b, from);
    if (zf_ok(s) && known < 0)
        s = s_grow((void **)&b->scheds, &b->cap_scheds, b->n_scheds, sizeof *b->scheds);
    if (!zf_ok(s)) {
        s_send_status(b, from, req->request_id, &s);
        return;
    }
    if (known < 0) {
        known = b->n_scheds++;
        b->scheds[known] = (s_sched_t){*from, 0, b->msg_fd, ""};
        char hex[40];
        zf_log_info(S_LOG, "scheduler %s (id '%s', clients at %s) registered (%d in all)",
                    s_ident_str(from, hex, sizeof hex), sid,
                    rs && rs->client_endpoint ? rs->client_endpoint : "-", b->n_scheds);
    }
    b->scheds[known].fd = b->msg_fd;
    snprintf(b->scheds[known].sid, sizeof b->scheds[known].sid, "%s", sid);
    s_send_listing(b, from, req->request_id, true);
}

/* ---- client requests and scheduler replies ------------------------------------- */

/* The session or job id a request names, or NULL for one that any
 * scheduler may take (CreateSession, SubmitJob). */
static const char *s_owned_id(const Zflow__Envelope *env, const char **what)
{
    const char *id = NULL;
    *what = "session";
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_RUN_STEP: id = env->run_step->session; break;
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION: id = env->close_session->session; break;
    case ZFLOW__ENVELOPE__BODY_WAIT_JOB: id = env->wait_job->job_id; break;
    case ZFLOW__ENVELOPE__BODY_POLL_JOB: id = env->poll_job->job_id; break;
    default: return NULL;
    }
    if (env->body_case == ZFLOW__ENVELOPE__BODY_WAIT_JOB ||
        env->body_case == ZFLOW__ENVELOPE__BODY_POLL_JOB)
        *what = "job";
    return id;
}

/* The scheduler a request must go to: the one whose id prefixes the
 * session or job id it names ("<scheduler id>/..."), or the least busy one
 * for a new session or job and for ids without a prefix. -1 with *st set
 * when the owner is not registered. */
static int s_route_request(zf_broker_t *b, const Zflow__Envelope *env, zf_status_t *st)
{
    const char *what = NULL, *id = s_owned_id(env, &what);
    const char *slash = id ? strchr(id, '/') : NULL;
    if (!slash) return s_sched_pick(b);
    char sid[sizeof b->scheds[0].sid];
    size_t n = (size_t)(slash - id);
    snprintf(sid, sizeof sid, "%.*s", (int)(n < sizeof sid ? n : sizeof sid - 1), id);
    int i = n < sizeof sid ? s_sched_find_sid(b, sid) : -1;
    if (i < 0)
        *st = zf_status_new(ZF_UNAVAILABLE,
                            "%s '%s' is held by scheduler '%s', which is gone (not registered "
                            "with the broker)",
                            what, id, sid);
    return i;
}

/* Hands env from client to the scheduler that holds what it names, or the
 * least busy one; schedulers found gone on the way are dropped (and the
 * next one is tried when any may serve). A client at its limit of requests
 * in flight is answered at once. */
static void s_forward_request(zf_broker_t *b, const s_ident_t *client, const Zflow__Envelope *env)
{
    zf_status_t s = s_grow((void **)&b->pending, &b->cap_pending, b->n_pending, sizeof *b->pending);
    if (zf_ok(s)) s = s_client_add(b, client, s_body_name(env));
    if (!zf_ok(s)) {
        char hex[40];
        zf_log_info(S_LOG, "client %s: %s", s_ident_str(client, hex, sizeof hex),
                    zf_status_msg(&s));
        s_send_status(b, client, env->request_id, &s);
        return;
    }
    for (int i; (i = s_route_request(b, env, &s)) >= 0;) {
        zf_route_t r = s_route_to(&b->scheds[i].id);
        s = zf_route_push(&r, client->id, client->len);
        if (zf_ok(s)) s = zf_envelope_send(b->sock, &r, env);
        if (zf_ok(s)) {
            b->pending[b->n_pending++] = (s_pending_t){*client, b->scheds[i].id, env->request_id};
            b->scheds[i].outstanding++;
            return;
        }
        if (s.code != ZF_UNAVAILABLE) {
            s = zf_status_prefix(s, "cannot pass %s to a scheduler", s_body_name(env));
            break;
        }
        zf_status_clear(&s);
        s_sched_drop(b, i, "disconnected");
    }
    if (zf_ok(s)) s = zf_status_new(ZF_UNAVAILABLE, "no scheduler is registered");
    s_client_done(b, client);
    s_send_status(b, client, env->request_id, &s);
}

static int s_pending_find(const zf_broker_t *b, const s_ident_t *sched, const s_ident_t *client,
                          uint64_t request_id)
{
    for (int k = 0; k < b->n_pending; k++) {
        const s_pending_t *p = &b->pending[k];
        if (p->request_id == request_id && s_ident_equal(&p->client, client) &&
            s_ident_equal(&p->sched, sched))
            return k;
    }
    return -1;
}

/* [scheduler][client][envelope]: a reply for a client. */
static void s_on_scheduler_reply(zf_broker_t *b, const zf_route_t *route,
                                 const Zflow__Envelope *env)
{
    s_ident_t sched = s_ident_at(route, 0), client = s_ident_at(route, 1);
    int i = s_sched_find(b, &sched);
    if (i < 0) {
        zf_status_t st = zf_invalid_argument("a message with a client routing frame from a peer "
                                             "that is not a registered scheduler");
        s_send_status(b, &sched, env->request_id, &st);
        return;
    }
    int k = s_pending_find(b, &sched, &client, env->request_id);
    if (k < 0) {
        zf_log_info(S_LOG, "dropping a %s for request %" PRIu64 " that nobody waits for",
                    s_body_name(env), env->request_id);
        return;
    }
    b->pending[k] = b->pending[--b->n_pending];
    b->scheds[i].outstanding--;
    s_client_done(b, &client);
    zf_status_t s = s_send(b, &client, env);
    zf_status_clear(&s); /* a client that left does not disturb anyone */
}

static bool s_is_client_request(const Zflow__Envelope *env)
{
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_CREATE_SESSION:
    case ZFLOW__ENVELOPE__BODY_RUN_STEP:
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION:
    case ZFLOW__ENVELOPE__BODY_SUBMIT_JOB:
    case ZFLOW__ENVELOPE__BODY_POLL_JOB:
    case ZFLOW__ENVELOPE__BODY_WAIT_JOB: return true;
    default: return false;
    }
}

/* A field check the codec cannot make: sub-messages proto3 lets be absent. */
static bool s_body_present(const Zflow__Envelope *env)
{
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR: return env->register_executor != NULL;
    case ZFLOW__ENVELOPE__BODY_HEARTBEAT: return env->heartbeat != NULL;
    default: return true;
    }
}

static void s_dispatch(zf_broker_t *b, const zf_route_t *route, const Zflow__Envelope *env)
{
    s_ident_t from = s_ident_at(route, 0);
    if (route->n == 2) {
        s_on_scheduler_reply(b, route, env);
        return;
    }
    zf_status_t st = ZF_STATUS_OK;
    if (route->n != 1)
        st = zf_invalid_argument("a message with %d routing frames; the broker takes 0 or 1 "
                                 "before the envelope",
                                 route->n - 1);
    else if (!s_body_present(env))
        st = zf_invalid_argument("%s has no contents", s_body_name(env));
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR)
        s_on_register_executor(b, &from, env);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_HEARTBEAT)
        s_on_heartbeat(b, &from, env);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER)
        s_on_register_scheduler(b, &from, env);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS)
        s_send_listing(b, &from, env->request_id, false);
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_PING)
        s_send_status(b, &from, env->request_id, &st); /* OK: the broker is alive */
    else if (s_is_client_request(env))
        s_forward_request(b, &from, env);
    else
        st = zf_invalid_argument("the broker does not serve %s", s_body_name(env));
    if (!zf_ok(st)) {
        zf_log_warn(S_LOG, "bad message (request %" PRIu64 "): %s", env->request_id,
                    zf_status_msg(&st));
        s_send_status(b, &from, env->request_id, &st);
    }
}

/* ---- the loop ------------------------------------------------------------------- */

static zf_status_t s_recv_error(int err)
{
    if (err == EAGAIN) return zf_status_new(ZF_DEADLINE_EXCEEDED, "no message is ready");
    if (err == ETERM) return zf_status_new(ZF_CANCELLED, "the ZeroMQ context is terminating");
    return zf_status_new(ZF_UNAVAILABLE, "receiving a message: %s", zmq_strerror(err));
}

/* zf_envelope_recv's checks on the next ready message, also telling which
 * connection it came from (ZMQ_SRCFD) so that a disconnect event can be
 * matched to a scheduler. DEADLINE_EXCEEDED when none is ready. */
static zf_status_t s_recv(zf_broker_t *b, zf_route_t *route, Zflow__Envelope **env)
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
        fault =
            zf_envelope_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), env, &route->request_id);
    }
    zmq_msg_close(&frame);
    return fault;
}

/* Receives and handles one message. DEADLINE_EXCEEDED when none is ready. */
static zf_status_t s_serve_one(zf_broker_t *b)
{
    zf_route_t route;
    Zflow__Envelope *env = NULL;
    zf_status_t st = s_recv(b, &route, &env);
    if (st.code == ZF_DEADLINE_EXCEEDED || st.code == ZF_CANCELLED) return st;
    if (!zf_ok(st)) {
        zf_log_warn(S_LOG, "bad message (request %" PRIu64 "): %s", route.request_id,
                    zf_status_msg(&st));
        if (route.n > 0) {
            s_ident_t from = s_ident_at(&route, 0);
            s_send_status(b, &from, route.request_id, &st);
        }
        zf_status_clear(&st);
        return ZF_STATUS_OK;
    }
    s_dispatch(b, &route, env);
    zflow__envelope__free_unpacked(env, NULL);
    return ZF_STATUS_OK;
}

/* Drops the schedulers and forgets the clients whose connections closed. A
 * monitor event is two frames: [u16 event, u32 value (the fd)][endpoint]. */
static void s_serve_monitor(zf_broker_t *b)
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
                s_sched_drop(b, i, "disconnected");
            else
                i++;
        }
        s_clients_disconnected(b, (int)fd);
    }
    zmq_msg_close(&m);
}

static zf_status_t s_wait(zf_broker_t *b, int wait_ms)
{
    zmq_pollitem_t items[2] = {{zf_socket_handle(b->monitor), 0, ZMQ_POLLIN, 0},
                               {zf_socket_handle(b->sock), 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(items, 2, wait_ms) >= 0 || zmq_errno() == EINTR) return ZF_STATUS_OK;
    return s_recv_error(zmq_errno());
}

zf_status_t zf_broker_poll(zf_broker_t *b, int timeout_ms)
{
    int64_t expiry = zf_registry_next_expiry_ms(b->reg);
    int wait = timeout_ms;
    if (expiry >= 0 && (wait < 0 || expiry < wait)) wait = (int)expiry;
    ZF_TRY(s_wait(b, wait));
    /* Disconnects first: a request must not go to a scheduler known gone. */
    s_serve_monitor(b);
    for (int i = 0; i < S_BATCH; i++) {
        zf_status_t st = s_serve_one(b);
        if (st.code == ZF_DEADLINE_EXCEEDED) {
            zf_status_clear(&st);
            break;
        }
        ZF_TRY(st);
    }
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
    ZF_TRY(zf_socket_set_max_frame_size(b->sock, S_MAX_FRAME));
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
    zf_registry_config_t rc = {config->heartbeat_ms, config->heartbeat_misses, NULL, NULL};
    ZF_TRY(zf_registry_new(&rc, &b->reg));
    zf_registry_set_listener(b->reg, s_on_registry_event, b);
    ZF_TRY(zf_zctx_new(&b->ctx));
    ZF_TRY(zf_socket_new(b->ctx, ZF_SOCKET_ROUTER, &b->sock));
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
    zf_broker_t *b = calloc(1, sizeof *b);
    if (!b) return zf_out_of_memory("a broker");
    b->heartbeat_ms = config->heartbeat_ms;
    b->heartbeat_misses = config->heartbeat_misses;
    b->last_pick = -1; /* the first pick is the first scheduler */
    b->max_client_requests = config->max_client_requests > 0 ? config->max_client_requests
                                                             : ZF_BROKER_MAX_CLIENT_REQUESTS;
    b->clients = zf_strmap_new(0, 0);
    zf_status_t s = b->clients ? s_open(b, config) : zf_out_of_memory("broker: the client table");
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
    zf_socket_destroy(&b->monitor);
    zf_socket_destroy(&b->sock);
    zf_zctx_destroy(&b->ctx);
    zf_registry_destroy(&b->reg);
    size_t iter = 0;
    uintptr_t v = 0;
    while (b->clients && zf_strmap_next(b->clients, &iter, NULL, NULL, &v)) free((void *)v);
    zf_strmap_destroy(&b->clients);
    free(b->scheds);
    free(b->pending);
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
    return b->n_pending;
}

int zf_broker_num_clients(const zf_broker_t *b)
{
    return (int)zf_strmap_size(b->clients);
}
