/* libzflow-client: a DEALER to the broker and one to each scheduler that
 * serves a session of ours directly, request ids, replies matched to
 * requests (with a small stash for replies to other requests), liveness
 * pings while a reply is outstanding, and tensor conversion for sessions
 * and jobs. */
#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "common/log.h"
#include "common/proto_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "common/tensor_proto.h"
#include "common/transport.h"
#include "proto/graph.pb-c.h"

#define S_STASH_MAX      64
#define S_PROGRESS_MS    250  /* progress polls while a job is waited for */
#define S_WAIT_MARGIN_MS 3000 /* a WaitJob's own timeout answers before ours */
/* The longest one WaitJob of zf_client_wait_result asks the service for:
 * a waiter its client gave up on (the broker fell silent, the process was
 * killed) leaves the scheduler within it, so that it cannot take a result
 * that a later wait was told it could collect. */
#define S_WAIT_SLICE_MS 1000
#define S_PEERS_MAX     9 /* the broker and up to 8 schedulers */
#define S_PING_MS       1000
#define S_SILENCE_MS    3000
#define S_PING_BIT      ((uint64_t)1 << 63) /* marks the request ids of pings */
#define S_SENT_MAX      256                 /* requests remembered for s_await */
#define S_REACH_MS      1000                /* how long a new scheduler endpoint has to answer */
#define S_INTERRUPT_MS  50                  /* how often a wait looks at the interrupt flag */

/* A socket requests go out on: peer 0 is the broker, the others are
 * schedulers reached directly. heard_ms: when it last sent us anything. */
typedef struct s_peer {
    zf_socket_t *sock;
    char *endpoint;
    int64_t heard_ms, pinged_ms;
    bool unreachable; /* a scheduler that did not answer its first ping */
} s_peer_t;

/* A request sent: where to, its body (zero: unknown), and for a RunStep
 * or WaitJob the session or job it is about (what an interrupt cancels). */
typedef struct s_sent {
    uint64_t id;
    int peer;
    int body;
    char owner[128];
} s_sent_t;

/* A session this client created, and the peer its steps go to. */
typedef struct s_session {
    char *id;
    int peer;
} s_session_t;

struct zf_client {
    zf_zctx_t *ctx;
    s_peer_t peers[S_PEERS_MAX];
    int n_peers;
    s_session_t *sessions;
    int n_sessions, cap_sessions;
    bool direct; /* send a session's steps straight to its scheduler */
    char *endpoint;
    int timeout_ms;
    uint64_t next_id;
    Zflow__Envelope *stash[S_STASH_MAX]; /* replies nobody asked for yet */
    int n_stash;
    s_sent_t sent[S_SENT_MAX]; /* by request id modulo S_SENT_MAX */
    const volatile sig_atomic_t *interrupt; /* zf_client_set_interrupt's flag, or NULL */
};

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A new peer: a DEALER connected (in the background) to endpoint. */
static zf_status_t s_peer_open(zf_client_t *c, const char *endpoint, int *index)
{
    if (c->n_peers == S_PEERS_MAX)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED, "more than %d schedulers", S_PEERS_MAX - 1);
    s_peer_t *p = &c->peers[c->n_peers];
    *p = (s_peer_t){0};
    zf_status_t s = (p->endpoint = strdup(endpoint)) ? ZF_STATUS_OK : zf_out_of_memory("client");
    if (zf_ok(s)) s = zf_socket_new(c->ctx, ZF_SOCKET_DEALER, &p->sock);
    if (zf_ok(s)) s = zf_socket_set_max_frame_size(p->sock, (int64_t)ZF_GRAPHDEF_MAX_BYTES);
    zf_role_t role = c->n_peers == 0 ? ZF_ROLE_BROKER : ZF_ROLE_SCHEDULER;
    if (zf_ok(s)) s = zf_socket_secure_client(p->sock, role);
    if (zf_ok(s)) s = zf_socket_watch_handshakes(p->sock);
    if (zf_ok(s)) s = zf_socket_connect(p->sock, endpoint);
    if (!zf_ok(s)) {
        zf_socket_destroy(&p->sock);
        free(p->endpoint);
        p->endpoint = NULL;
        return s;
    }
    *index = c->n_peers++;
    return ZF_STATUS_OK;
}

zf_status_t zf_client_connect(const char *endpoint, zf_client_t **out)
{
    return zf_client_connect_keys(endpoint, NULL, out);
}

zf_status_t zf_client_connect_keys(const char *endpoint, const char *keys_dir, zf_client_t **out)
{
    *out = NULL;
    if (!endpoint || !endpoint[0]) return zf_invalid_argument("client: empty broker endpoint");
    zf_client_t *c = calloc(1, sizeof *c);
    if (!c) return zf_out_of_memory("client");
    c->timeout_ms = ZF_CLIENT_DEFAULT_TIMEOUT_MS;
    c->next_id = 1;
    c->direct = true;
    c->endpoint = strdup(endpoint);
    int broker = 0;
    zf_status_t s = c->endpoint ? zf_zctx_new(&c->ctx) : zf_out_of_memory("client");
    if (zf_ok(s) && keys_dir) s = zf_zctx_set_keys(c->ctx, keys_dir, ZF_ROLE_CLIENT);
    if (zf_ok(s)) s = s_peer_open(c, endpoint, &broker);
    if (!zf_ok(s)) {
        zf_client_destroy(&c);
        return zf_status_prefix(s, "connecting to the broker at %s", endpoint);
    }
    *out = c;
    return ZF_STATUS_OK;
}

void zf_client_destroy(zf_client_t **c_p)
{
    if (!c_p || !*c_p) return;
    zf_client_t *c = *c_p;
    for (int i = 0; i < c->n_stash; i++) zflow__envelope__free_unpacked(c->stash[i], NULL);
    for (int i = 0; i < c->n_sessions; i++) free(c->sessions[i].id);
    free(c->sessions);
    for (int i = 0; i < c->n_peers; i++) {
        zf_socket_destroy(&c->peers[i].sock);
        free(c->peers[i].endpoint);
    }
    zf_zctx_destroy(&c->ctx);
    free(c->endpoint);
    free(c);
    *c_p = NULL;
}

void zf_client_set_direct(zf_client_t *c, bool direct)
{
    if (c) c->direct = direct;
}

void zf_client_set_timeout(zf_client_t *c, int timeout_ms)
{
    if (c && timeout_ms > 0) c->timeout_ms = timeout_ms;
}

/* Keeps a reply to another request; the oldest goes when the stash is full
 * (it belongs to a request that gave up waiting). */
static void s_stash(zf_client_t *c, Zflow__Envelope *env)
{
    if (c->n_stash == S_STASH_MAX) {
        zflow__envelope__free_unpacked(c->stash[0], NULL);
        memmove(c->stash, c->stash + 1, (S_STASH_MAX - 1) * sizeof c->stash[0]);
        c->n_stash--;
    }
    c->stash[c->n_stash++] = env;
}

static Zflow__Envelope *s_unstash(zf_client_t *c, uint64_t id)
{
    for (int i = 0; i < c->n_stash; i++) {
        if (c->stash[i]->request_id != id) continue;
        Zflow__Envelope *env = c->stash[i];
        memmove(c->stash + i, c->stash + i + 1, (size_t)(c->n_stash - i - 1) * sizeof env);
        c->n_stash--;
        return env;
    }
    return NULL;
}

/* ---- outstanding requests ------------------------------------------------- */

/* Which peer request id went to, and what it was, for s_await's messages. */
static void s_note(zf_client_t *c, uint64_t id, int peer, const Zflow__Envelope *env)
{
    s_sent_t *n = &c->sent[id % S_SENT_MAX];
    *n = (s_sent_t){id, peer, (int)env->body_case, ""};
    const char *owner = env->body_case == ZFLOW__ENVELOPE__BODY_RUN_STEP   ? env->run_step->session
                        : env->body_case == ZFLOW__ENVELOPE__BODY_WAIT_JOB ? env->wait_job->job_id
                        : env->body_case == ZFLOW__ENVELOPE__BODY_POLL_JOB ? env->poll_job->job_id
                                                                            : NULL;
    if (owner && strlen(owner) < sizeof n->owner) snprintf(n->owner, sizeof n->owner, "%s", owner);
}

static s_sent_t s_noted(const zf_client_t *c, uint64_t id)
{
    s_sent_t n = c->sent[id % S_SENT_MAX];
    return n.id == id ? n : (s_sent_t){id, 0, 0, ""};
}

/* "RunStep" for a RunStep body: the body's message name. */
static const char *s_body_name(int body)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&zflow__envelope__descriptor, (unsigned)body);
    if (!f || !f->descriptor) return "the request";
    return ((const ProtobufCMessageDescriptor *)f->descriptor)->short_name;
}

static const char *s_peer_kind(int peer)
{
    return peer == 0 ? "broker" : "scheduler";
}

/* Sends env to peer with a fresh request id; *id gets it. */
static zf_status_t s_send_to(zf_client_t *c, int peer, Zflow__Envelope *env, int timeout_ms,
                             uint64_t *id)
{
    s_peer_t *p = &c->peers[peer];
    env->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env->request_id = *id = c->next_id++;
    ZF_TRY(zf_socket_set_send_timeout(p->sock, timeout_ms));
    zf_status_t s = zf_envelope_send(p->sock, NULL, env);
    if (s.code == ZF_DEADLINE_EXCEEDED) {
        zf_status_clear(&s);
        return zf_status_new(ZF_UNAVAILABLE, "cannot reach the %s at %s within %d ms",
                             s_peer_kind(peer), p->endpoint, timeout_ms);
    }
    if (zf_ok(s)) s_note(c, *id, peer, env);
    return zf_status_prefix(s, "sending to the %s at %s", s_peer_kind(peer), p->endpoint);
}

/* Asks peer whether it is there; its answer (any message) counts as life. */
static void s_ping(zf_client_t *c, int peer, int64_t now)
{
    s_peer_t *p = &c->peers[peer];
    p->pinged_ms = now;
    Zflow__Ping ping = ZFLOW__PING__INIT;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = S_PING_BIT | c->next_id++;
    env.body_case = ZFLOW__ENVELOPE__BODY_PING;
    env.ping = &ping;
    zf_status_t s = zf_socket_set_send_timeout(p->sock, 0);
    if (zf_ok(s)) s = zf_envelope_send(p->sock, NULL, &env);
    zf_status_clear(&s); /* a full queue means no answer: silence decides */
}

/* The interrupt came while req waited: CancelStep for its session (to the
 * peer the step went to) or CancelJob for its job (to the broker), sent
 * once, its reply dropped as a ping's is. The request's own reply then
 * says CANCELLED. */
static void s_send_cancel(zf_client_t *c, const s_sent_t *req)
{
    if (!req->owner[0]) return;
    Zflow__CancelStep cs = ZFLOW__CANCEL_STEP__INIT;
    Zflow__CancelJob cj = ZFLOW__CANCEL_JOB__INIT;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = S_PING_BIT | c->next_id++;
    int peer = req->peer;
    if (req->body == ZFLOW__ENVELOPE__BODY_RUN_STEP) {
        cs.session = (char *)req->owner;
        env.body_case = ZFLOW__ENVELOPE__BODY_CANCEL_STEP;
        env.cancel_step = &cs;
    } else if (req->body == ZFLOW__ENVELOPE__BODY_WAIT_JOB ||
               req->body == ZFLOW__ENVELOPE__BODY_POLL_JOB) {
        cj.job_id = (char *)req->owner;
        env.body_case = ZFLOW__ENVELOPE__BODY_CANCEL_JOB;
        env.cancel_job = &cj;
        peer = 0;
    } else {
        return;
    }
    zf_status_t s = zf_socket_set_send_timeout(c->peers[peer].sock, S_PING_MS);
    if (zf_ok(s)) s = zf_envelope_send(c->peers[peer].sock, NULL, &env);
    zf_status_clear(&s);
}

/* Receives what is ready on every peer; a reply to id ends the wait. */
static zf_status_t s_receive(zf_client_t *c, uint64_t id, int wait_ms, Zflow__Envelope **reply)
{
    zmq_pollitem_t items[S_PEERS_MAX];
    for (int i = 0; i < c->n_peers; i++)
        items[i] = (zmq_pollitem_t){zf_socket_handle(c->peers[i].sock), 0, ZMQ_POLLIN, 0};
    if (zmq_poll(items, c->n_peers, wait_ms) < 0 && zmq_errno() != EINTR)
        return zf_status_new(ZF_UNAVAILABLE, "waiting for a reply: %s", zmq_strerror(zmq_errno()));
    for (int i = 0; i < c->n_peers; i++) {
        for (bool more = items[i].revents & ZMQ_POLLIN; more;) {
            zf_route_t route;
            Zflow__Envelope *env = NULL;
            zf_status_t s = zf_envelope_recv(c->peers[i].sock, 0, &route, &env);
            more = s.code != ZF_DEADLINE_EXCEEDED;
            if (s.code != ZF_DEADLINE_EXCEEDED) c->peers[i].heard_ms = s_now_ms();
            if (!zf_ok(s)) { /* a malformed reply proves life; it answers nothing */
                zf_status_clear(&s);
                continue;
            }
            if (env->request_id == id && !*reply)
                *reply = env;
            else if (env->request_id & S_PING_BIT)
                zflow__envelope__free_unpacked(env, NULL);
            else
                s_stash(c, env);
        }
    }
    return ZF_STATUS_OK;
}

/* Waits for the reply to id; replies to other requests are stashed. While
 * it waits, the peer the request went to is pinged after each second of
 * silence: S_SILENCE_MS without a word from it is UNAVAILABLE, a timeout
 * while it answers DEADLINE_EXCEEDED. */
static zf_status_t s_await(zf_client_t *c, uint64_t id, int timeout_ms, Zflow__Envelope **reply)
{
    *reply = s_unstash(c, id);
    if (*reply) return ZF_STATUS_OK;
    s_sent_t req = s_noted(c, id);
    s_peer_t *p = &c->peers[req.peer];
    int64_t start = s_now_ms(), deadline = start + timeout_ms;
    int ping_ms = timeout_ms / 2 < S_PING_MS ? timeout_ms / 2 : S_PING_MS;
    bool cancelled = false;
    for (;;) {
        if (!cancelled && c->interrupt && *c->interrupt) {
            cancelled = true;
            s_send_cancel(c, &req);
        }
        int64_t now = s_now_ms();
        int64_t quiet = p->heard_ms > start ? p->heard_ms : start;
        bool heard = p->heard_ms > start;
        if (now - quiet >= S_SILENCE_MS)
            return zf_status_new(ZF_UNAVAILABLE,
                                 "no reply to %s: the %s at %s does not answer (silent for "
                                 "%d ms)",
                                 s_body_name(req.body), s_peer_kind(req.peer), p->endpoint,
                                 (int)(now - quiet));
        if (now >= deadline && heard)
            return zf_status_new(ZF_DEADLINE_EXCEEDED,
                                 "no reply to %s within %d ms; the %s answers",
                                 s_body_name(req.body), timeout_ms, s_peer_kind(req.peer));
        if (now >= deadline)
            return zf_status_new(
                ZF_UNAVAILABLE, "no reply to %s within %d ms: the %s at %s does not answer",
                s_body_name(req.body), timeout_ms, s_peer_kind(req.peer), p->endpoint);
        if (now - quiet >= ping_ms && now - p->pinged_ms >= ping_ms) s_ping(c, req.peer, now);
        int64_t wait = deadline - now;
        int64_t next = (p->pinged_ms > quiet ? p->pinged_ms : quiet) + ping_ms - now;
        if (next > 0 && next < wait) wait = next;
        if (c->interrupt && !cancelled && wait > S_INTERRUPT_MS) wait = S_INTERRUPT_MS;
        if (wait < 1) wait = 1;
        ZF_TRY(s_receive(c, id, (int)wait, reply));
        if (*reply) return ZF_STATUS_OK;
        zf_status_t hs = zf_socket_handshake_failure(p->sock);
        if (!zf_ok(hs))
            return zf_status_prefix(hs, "no reply to %s from the %s", s_body_name(req.body),
                                    s_peer_kind(req.peer));
    }
}

/* The reply to request id, checked to be of kind want (a StatusReply
 * carries an error instead). Caller owns *reply on OK. */
static zf_status_t s_finish(zf_client_t *c, uint64_t id, int timeout_ms,
                            Zflow__Envelope__BodyCase want, Zflow__Envelope **reply)
{
    ZF_TRY(s_await(c, id, timeout_ms, reply));
    zf_status_t s = ZF_STATUS_OK;
    if ((*reply)->body_case == ZFLOW__ENVELOPE__BODY_STATUS_REPLY) {
        s = zf_status_from_proto((*reply)->status_reply->status);
        if (zf_ok(s) && want != ZFLOW__ENVELOPE__BODY_STATUS_REPLY)
            s = zf_internal("the service answered with an OK status but no result");
    } else if ((*reply)->body_case != want) {
        s = zf_internal("the service answered with a message of the wrong kind (%d)",
                        (int)(*reply)->body_case);
    }
    if (!zf_ok(s)) {
        zflow__envelope__free_unpacked(*reply, NULL);
        *reply = NULL;
    }
    return s;
}

/* Sends env to peer and waits for its reply, as s_finish. */
static zf_status_t s_call_to(zf_client_t *c, int peer, Zflow__Envelope *env, int timeout_ms,
                             Zflow__Envelope__BodyCase want, Zflow__Envelope **reply)
{
    *reply = NULL;
    if (timeout_ms <= 0) timeout_ms = c->timeout_ms;
    uint64_t id = 0;
    ZF_TRY(s_send_to(c, peer, env, timeout_ms, &id));
    return s_finish(c, id, timeout_ms, want, reply);
}

/* Sends env through the broker and waits for its reply, as s_finish. */
static zf_status_t s_call(zf_client_t *c, Zflow__Envelope *env, int timeout_ms,
                          Zflow__Envelope__BodyCase want, Zflow__Envelope **reply)
{
    return s_call_to(c, 0, env, timeout_ms, want, reply);
}

/* ---- sessions and the schedulers that serve them directly ----------------- */

/* True when the scheduler behind a new peer answers a ping within
 * S_REACH_MS: the endpoint it advertises may not be reachable from here (a
 * loopback address seen from another host), and then its sessions' steps
 * go through the broker instead. */
static bool s_peer_reachable(zf_client_t *c, int peer)
{
    int64_t t0 = s_now_ms();
    s_ping(c, peer, t0);
    for (int64_t left = S_REACH_MS; c->peers[peer].heard_ms == 0 && left > 0;
         left = t0 + S_REACH_MS - s_now_ms()) {
        Zflow__Envelope *none = NULL; /* request id 0 is never ours */
        zf_status_t s = s_receive(c, 0, (int)left, &none);
        zf_status_clear(&s);
        if (none) zflow__envelope__free_unpacked(none, NULL);
    }
    return c->peers[peer].heard_ms != 0;
}

/* The peer for the scheduler at endpoint, opened (and checked) on first
 * use; 0 (the broker) when it cannot be opened or does not answer. */
static int s_scheduler_peer(zf_client_t *c, const char *endpoint)
{
    for (int i = 1; i < c->n_peers; i++)
        if (strcmp(c->peers[i].endpoint, endpoint) == 0) return c->peers[i].unreachable ? 0 : i;
    int peer = 0;
    zf_status_t s = s_peer_open(c, endpoint, &peer);
    zf_status_clear(&s); /* the broker still reaches the session */
    if (peer > 0 && !s_peer_reachable(c, peer)) {
        c->peers[peer].unreachable = true;
        peer = 0;
    }
    return peer;
}

/* Remembers a session this client created (for zf_client_reset) and the
 * peer its steps go to: the scheduler at endpoint when given and direct
 * requests are on, else the broker. Out of memory: it is not remembered,
 * and its steps go through the broker, which reaches the same scheduler. */
static void s_session_add(zf_client_t *c, const char *session, const char *endpoint)
{
    if (c->n_sessions == c->cap_sessions) {
        int cap = c->cap_sessions ? 2 * c->cap_sessions : 8;
        s_session_t *n = realloc(c->sessions, (size_t)cap * sizeof *n);
        if (!n) return;
        c->sessions = n;
        c->cap_sessions = cap;
    }
    char *id = strdup(session);
    if (!id) return;
    int peer = c->direct && endpoint && endpoint[0] ? s_scheduler_peer(c, endpoint) : 0;
    c->sessions[c->n_sessions++] = (s_session_t){id, peer};
}

/* The peer session's requests go to: its scheduler, or the broker. */
static int s_session_peer(const zf_client_t *c, const char *session)
{
    for (int i = 0; session && i < c->n_sessions; i++)
        if (strcmp(c->sessions[i].id, session) == 0) return c->sessions[i].peer;
    return 0;
}

static void s_session_forget(zf_client_t *c, const char *session)
{
    for (int i = 0; session && i < c->n_sessions; i++) {
        if (strcmp(c->sessions[i].id, session) != 0) continue;
        free(c->sessions[i].id);
        c->sessions[i] = c->sessions[--c->n_sessions];
        return;
    }
}

static Zflow__SessionOptions s_options(const zf_client_session_options_t *opts)
{
    Zflow__SessionOptions o = ZFLOW__SESSION_OPTIONS__INIT;
    if (opts) {
        o.allow_soft_placement = opts->allow_soft_placement;
        o.place_first = opts->place_first;
        o.step_timeout_ms = opts->step_timeout_ms;
        o.opt_level = opts->opt_level;
        o.bfloat16_sendrecv = opts->bfloat16_sendrecv;
        o.build_cost_model = opts->build_cost_model;
        o.enable_recv_scheduling = opts->recv_scheduling;
        o.place_pruned_graph = opts->place_pruned_graph;
        if (opts->partition_by) o.partition_by = (char *)opts->partition_by;
    }
    return o;
}

zf_status_t zf_client_session_create(zf_client_t *c, const struct Tensorflow__GraphDef *gd,
                                     const zf_client_session_options_t *opts, char **session_id)
{
    *session_id = NULL;
    if (!gd) return zf_invalid_argument("session create: no graph");
    Zflow__SessionOptions o = s_options(opts);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = (Tensorflow__GraphDef *)gd;
    cs.options = &o;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION;
    env.create_session = &cs;
    Zflow__Envelope *rep = NULL;
    ZF_TRY(s_call(c, &env, 0, ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY, &rep));
    const Zflow__CreateSessionReply *r = rep->create_session_reply;
    zf_status_t s = zf_status_from_proto(r->status);
    if (zf_ok(s) && !(*session_id = strdup(r->session ? r->session : "")))
        s = zf_out_of_memory("session id");
    if (zf_ok(s)) s_session_add(c, *session_id, r->scheduler_endpoint);
    zflow__envelope__free_unpacked(rep, NULL);
    return s;
}

/* The RunStep message for step; its feeds hold new TensorProtos
 * (s_step_free releases them). */
static zf_status_t s_step_build(const zf_client_step_t *step, Zflow__RunStep *rs)
{
    zflow__run_step__init(rs);
    if (step->n_feeds < 0 || step->n_fetches < 0 || step->n_targets < 0)
        return zf_invalid_argument("run: negative feed, fetch or target count");
    rs->n_feeds = (size_t)step->n_feeds;
    rs->feeds = calloc(rs->n_feeds + 1, sizeof *rs->feeds);
    if (!rs->feeds) return zf_out_of_memory("run feeds");
    for (size_t i = 0; i < rs->n_feeds; i++) {
        Zflow__NamedTensor *nt = calloc(1, sizeof *nt);
        if (!nt) return zf_out_of_memory("run feeds");
        zflow__named_tensor__init(nt);
        rs->feeds[i] = nt;
        nt->name = (char *)step->feed_names[i];
        if (!step->feed_values) continue; /* a PartialRunSetup's: names only */
        ZF_TRY(zf_status_prefix(zf_tensor_to_proto(step->feed_values[i], &nt->tensor, true),
                                "feed '%s'", step->feed_names[i]));
    }
    rs->n_fetches = (size_t)step->n_fetches;
    rs->fetches = (char **)step->fetches;
    rs->n_targets = (size_t)step->n_targets;
    rs->targets = (char **)step->targets;
    return ZF_STATUS_OK;
}

static void s_step_free(Zflow__RunStep *rs)
{
    for (size_t i = 0; rs->feeds && i < rs->n_feeds; i++) {
        if (!rs->feeds[i]) continue;
        if (rs->feeds[i]->tensor)
            tensorflow__tensor_proto__free_unpacked(rs->feeds[i]->tensor, NULL);
        free(rs->feeds[i]);
    }
    free(rs->feeds);
    rs->feeds = NULL;
}

/* The fetched tensors of r, in the order of the step's n_fetches fetches. */
static zf_status_t s_outputs(const Zflow__RunStepReply *r, int n_fetches, zf_tensor_t **outputs)
{
    ZF_TRY(zf_status_from_proto(r->status));
    if (r->n_fetches != (size_t)n_fetches)
        return zf_internal("the service returned %zu tensors for %d fetches", r->n_fetches,
                           n_fetches);
    for (int j = 0; j < n_fetches; j++) {
        const Zflow__NamedTensor *nt = r->fetches[j];
        zf_status_t s = nt->tensor ? zf_tensor_from_proto(nt->tensor, &outputs[j])
                                   : zf_internal("the service returned no value");
        if (!zf_ok(s)) {
            for (int k = 0; k < j; k++) zf_tensor_unref(&outputs[k]);
            return zf_status_prefix(s, "fetch '%s'", nt->name ? nt->name : "");
        }
    }
    return ZF_STATUS_OK;
}

/* Sends a RunStep of step (a partial run's call when handle is not NULL);
 * its request id into *request. */
static zf_status_t s_run_start(zf_client_t *c, const char *session, const char *handle,
                               const zf_client_step_t *step, int timeout_ms, uint64_t *request)
{
    *request = 0;
    Zflow__RunStep rs;
    zf_status_t s = s_step_build(step, &rs);
    rs.session = (char *)session;
    rs.partial_run_handle = (char *)handle;
    rs.timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP;
    env.run_step = &rs;
    if (zf_ok(s))
        s = s_send_to(c, s_session_peer(c, session), &env,
                      timeout_ms > 0 ? timeout_ms : c->timeout_ms, request);
    s_step_free(&rs);
    return s;
}

zf_status_t zf_client_session_run_start(zf_client_t *c, const char *session,
                                        const zf_client_step_t *step, int timeout_ms,
                                        uint64_t *request)
{
    return s_run_start(c, session, NULL, step, timeout_ms, request);
}

zf_status_t zf_client_session_run_finish(zf_client_t *c, uint64_t request, int n_fetches,
                                         int timeout_ms, zf_tensor_t **outputs)
{
    for (int j = 0; outputs && j < n_fetches; j++) outputs[j] = NULL;
    Zflow__Envelope *rep = NULL;
    ZF_TRY(s_finish(c, request, timeout_ms > 0 ? timeout_ms : c->timeout_ms,
                    ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY, &rep));
    zf_status_t s = s_outputs(rep->run_step_reply, n_fetches, outputs);
    zflow__envelope__free_unpacked(rep, NULL);
    return s;
}

zf_status_t zf_client_session_run(zf_client_t *c, const char *session, const zf_client_step_t *step,
                                  int timeout_ms, zf_tensor_t **outputs)
{
    for (int j = 0; outputs && j < step->n_fetches; j++) outputs[j] = NULL;
    uint64_t id = 0;
    ZF_TRY(zf_client_session_run_start(c, session, step, timeout_ms, &id));
    return zf_client_session_run_finish(c, id, step->n_fetches, timeout_ms, outputs);
}

zf_status_t zf_client_partial_run_setup(zf_client_t *c, const char *session,
                                        const zf_client_step_t *step, char **handle)
{
    *handle = NULL;
    zf_client_step_t names = *step;
    names.feed_values = NULL;
    Zflow__RunStep rs;
    zf_status_t s = s_step_build(&names, &rs);
    rs.session = (char *)session;
    rs.partial_run_setup = true;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP;
    env.run_step = &rs;
    Zflow__Envelope *rep = NULL;
    if (zf_ok(s))
        s = s_call_to(c, s_session_peer(c, session), &env, 0, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY,
                      &rep);
    s_step_free(&rs);
    if (zf_ok(s)) s = zf_status_from_proto(rep->run_step_reply->status);
    const char *h = zf_ok(s) ? rep->run_step_reply->partial_run_handle : NULL;
    if (zf_ok(s) && (!h || !*h)) s = zf_internal("the service returned no partial run handle");
    if (zf_ok(s) && !(*handle = strdup(h))) s = zf_out_of_memory("partial run handle");
    if (rep) zflow__envelope__free_unpacked(rep, NULL);
    return s;
}

zf_status_t zf_client_partial_run(zf_client_t *c, const char *session, const char *handle,
                                  const zf_client_step_t *step, int timeout_ms,
                                  zf_tensor_t **outputs)
{
    for (int j = 0; outputs && j < step->n_fetches; j++) outputs[j] = NULL;
    uint64_t id = 0;
    ZF_TRY(s_run_start(c, session, handle, step, timeout_ms, &id));
    return zf_client_session_run_finish(c, id, step->n_fetches, timeout_ms, outputs);
}

/* Sends a request answered by a StatusReply to peer: its status. */
static zf_status_t s_status_call(zf_client_t *c, int peer, Zflow__Envelope *env)
{
    Zflow__Envelope *rep = NULL;
    zf_status_t s = s_call_to(c, peer, env, 0, ZFLOW__ENVELOPE__BODY_STATUS_REPLY, &rep);
    if (rep) zflow__envelope__free_unpacked(rep, NULL);
    return s;
}

zf_status_t zf_client_session_close(zf_client_t *c, const char *session)
{
    Zflow__CloseSession cs = ZFLOW__CLOSE_SESSION__INIT;
    cs.session = (char *)session;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CLOSE_SESSION;
    env.close_session = &cs;
    zf_status_t s = s_status_call(c, s_session_peer(c, session), &env);
    if (zf_ok(s) || s.code == ZF_NOT_FOUND) s_session_forget(c, session);
    return s;
}

zf_status_t zf_client_session_extend(zf_client_t *c, const char *session,
                                     const struct Tensorflow__GraphDef *gd, int64_t version,
                                     int64_t *new_version)
{
    if (new_version) *new_version = 0;
    Zflow__ExtendSession es = ZFLOW__EXTEND_SESSION__INIT;
    es.session = (char *)session;
    es.graph = (Tensorflow__GraphDef *)gd;
    es.current_graph_version = version;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_EXTEND_SESSION;
    env.extend_session = &es;
    Zflow__Envelope *rep = NULL;
    ZF_TRY(s_call_to(c, s_session_peer(c, session), &env, 0,
                     ZFLOW__ENVELOPE__BODY_EXTEND_SESSION_REPLY, &rep));
    zf_status_t s = zf_status_from_proto(rep->extend_session_reply->status);
    if (zf_ok(s) && new_version) *new_version = rep->extend_session_reply->new_graph_version;
    zflow__envelope__free_unpacked(rep, NULL);
    return s;
}

zf_status_t zf_client_session_cancel(zf_client_t *c, const char *session)
{
    Zflow__CancelStep cs = ZFLOW__CANCEL_STEP__INIT;
    cs.session = (char *)session;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CANCEL_STEP;
    env.cancel_step = &cs;
    return s_status_call(c, s_session_peer(c, session), &env);
}

zf_status_t zf_client_cancel_job(zf_client_t *c, const char *job_id)
{
    Zflow__CancelJob cj = ZFLOW__CANCEL_JOB__INIT;
    cj.job_id = (char *)job_id;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_CANCEL_JOB;
    env.cancel_job = &cj;
    return s_status_call(c, 0, &env);
}

zf_status_t zf_client_reset(zf_client_t *c)
{
    zf_status_t first = ZF_STATUS_OK;
    while (c->n_sessions > 0) {
        char *id = strdup(c->sessions[c->n_sessions - 1].id);
        if (!id) {
            zf_status_clear(&first);
            return zf_out_of_memory("client");
        }
        zf_status_t s = zf_client_session_close(c, id);
        if (!zf_ok(s) && s.code != ZF_NOT_FOUND) s_session_forget(c, id); /* tried */
        free(id);
        if (zf_ok(first))
            first = s;
        else
            zf_status_clear(&s);
    }
    return first;
}

void zf_client_set_interrupt(zf_client_t *c, const volatile sig_atomic_t *flag)
{
    c->interrupt = flag;
}

zf_status_t zf_client_submit(zf_client_t *c, const struct Tensorflow__GraphDef *gd,
                             const zf_client_session_options_t *opts, const zf_client_step_t *step,
                             char **job_id)
{
    return zf_client_submit_job(c, gd, opts, step, NULL, job_id);
}

zf_status_t zf_client_submit_job(zf_client_t *c, const struct Tensorflow__GraphDef *gd,
                                 const zf_client_session_options_t *opts,
                                 const zf_client_step_t *step, const zf_client_job_options_t *job,
                                 char **job_id)
{
    *job_id = NULL;
    zf_client_job_options_t jo = job ? *job : ZF_CLIENT_JOB_OPTIONS_DEFAULT;
    if (!gd) return zf_invalid_argument("submit: no graph");
    if (jo.steps < 0 || jo.n_init_targets < 0)
        return zf_invalid_argument("submit: negative steps or init target count");
    Zflow__SessionOptions o = s_options(opts);
    Zflow__CreateSession cs = ZFLOW__CREATE_SESSION__INIT;
    cs.graph = (Tensorflow__GraphDef *)gd;
    cs.options = &o;
    Zflow__RunStep rs;
    zf_status_t s = s_step_build(step, &rs);
    Zflow__SubmitJob sj = ZFLOW__SUBMIT_JOB__INIT;
    sj.session = &cs;
    sj.step = &rs;
    sj.steps = jo.steps;
    rs.trace_level = jo.trace_level;
    rs.output_partition_graphs = jo.partition_graphs;
    sj.checkpoint_every = jo.checkpoint_every;
    sj.checkpoint_dir = (char *)jo.checkpoint_dir;
    sj.n_init_targets = (size_t)jo.n_init_targets;
    sj.init_targets = (char **)jo.init_targets;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_SUBMIT_JOB;
    env.submit_job = &sj;
    Zflow__Envelope *rep = NULL;
    if (zf_ok(s)) s = s_call(c, &env, 0, ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY, &rep);
    s_step_free(&rs);
    if (zf_ok(s)) s = zf_status_from_proto(rep->submit_job_reply->status);
    if (zf_ok(s) &&
        !(*job_id = strdup(rep->submit_job_reply->job_id ? rep->submit_job_reply->job_id : "")))
        s = zf_out_of_memory("job id");
    if (zf_ok(s)) zf_log_debug("client", "submitted job %s", *job_id);
    if (rep) zflow__envelope__free_unpacked(rep, NULL);
    return s;
}

/* One WaitJob that the service itself ends after wait_ms (a reply marked
 * unfinished), so that a wait given up on never takes the result with it;
 * we wait a margin longer for that reply. */
static zf_status_t s_wait_once(zf_client_t *c, const char *job_id, int wait_ms,
                               Zflow__Envelope **rep)
{
    Zflow__WaitJob wj = ZFLOW__WAIT_JOB__INIT;
    wj.job_id = (char *)(job_id ? job_id : "");
    wj.timeout_ms = wait_ms;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_WAIT_JOB;
    env.wait_job = &wj;
    int ours = wait_ms > INT32_MAX - S_WAIT_MARGIN_MS ? INT32_MAX : wait_ms + S_WAIT_MARGIN_MS;
    return s_call(c, &env, ours, ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY, rep);
}

zf_status_t zf_client_wait(zf_client_t *c, const char *job_id, int n_fetches, int timeout_ms,
                           zf_tensor_t **outputs)
{
    Zflow__Envelope *rep = NULL;
    ZF_TRY(s_wait_once(c, job_id, timeout_ms > 0 ? timeout_ms : c->timeout_ms, &rep));
    /* The count comes from the caller, never from the reply: a reply with
     * more tensors than outputs has room for is refused, not written. */
    zf_status_t s = s_outputs(rep->run_step_reply, n_fetches, outputs);
    zflow__envelope__free_unpacked(rep, NULL);
    return zf_status_prefix(s, "job %s", job_id);
}

zf_status_t zf_client_run_job(zf_client_t *c, const struct Tensorflow__GraphDef *gd,
                              const zf_client_session_options_t *opts, const zf_client_step_t *step,
                              int timeout_ms, zf_tensor_t **outputs)
{
    char *id = NULL;
    ZF_TRY(zf_client_submit(c, gd, opts, step, &id));
    zf_status_t s = zf_client_wait(c, id, step->n_fetches, timeout_ms, outputs);
    free(id);
    return s;
}

/* ---- asynchronous jobs ------------------------------------------------------- */

zf_status_t zf_client_poll(zf_client_t *c, const char *job_id, zf_client_job_progress_t *out)
{
    memset(out, 0, sizeof *out);
    if (!job_id || !job_id[0]) return zf_invalid_argument("poll: no job id");
    Zflow__PollJob pj = ZFLOW__POLL_JOB__INIT;
    pj.job_id = (char *)job_id;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.body_case = ZFLOW__ENVELOPE__BODY_POLL_JOB;
    env.poll_job = &pj;
    Zflow__Envelope *rep = NULL;
    ZF_TRY(s_call(c, &env, 0, ZFLOW__ENVELOPE__BODY_POLL_JOB_REPLY, &rep));
    const Zflow__PollJobReply *r = rep->poll_job_reply;
    zf_status_t s = zf_status_from_proto(r->status);
    if (zf_ok(s) && (r->state < ZFLOW__JOB_STATE__JOB_STATE_QUEUED ||
                     r->state > ZFLOW__JOB_STATE__JOB_STATE_DONE))
        s = zf_internal("the service answered PollJob with job state %d", (int)r->state);
    if (zf_ok(s))
        *out = (zf_client_job_progress_t){(zf_client_job_state_t)r->state,
                                          r->steps_done,
                                          r->steps_total,
                                          r->partitions_running,
                                          r->partitions_total,
                                          r->elapsed_ms,
                                          r->attempts};
    zflow__envelope__free_unpacked(rep, NULL);
    return s;
}

void zf_client_job_result_free(zf_client_job_result_t **r_p)
{
    if (!r_p || !*r_p) return;
    zf_client_job_result_t *r = *r_p;
    for (int j = 0; j < r->n_fetches; j++) {
        if (r->names) free(r->names[j]);
        if (r->tensors) zf_tensor_unref(&r->tensors[j]);
    }
    for (size_t k = 0; k < r->n_runs; k++) zflow__node_run__free_unpacked(r->runs[k], NULL);
    free(r->runs);
    for (size_t k = 0; k < r->n_graphs; k++)
        protobuf_c_message_free_unpacked(&r->graphs[k]->base, NULL);
    free(r->graphs);
    for (size_t k = 0; k < r->n_cost; k++) zflow__cost_node__free_unpacked(r->cost[k], NULL);
    free(r->cost);
    free(r->names);
    free(r->tensors);
    free(r);
    *r_p = NULL;
}

/* Copies of src[0..n) into a new array *dst of *n_dst (NULL, 0 when n is
 * 0; on failure the copies made so far are in it, for the caller to free). */
static zf_status_t s_clone_all(ProtobufCMessage *const *src, size_t n, ProtobufCMessage ***dst,
                               size_t *n_dst)
{
    if (n == 0) return ZF_STATUS_OK;
    if (!(*dst = calloc(n, sizeof **dst))) return zf_out_of_memory("job result");
    for (size_t k = 0; k < n; k++) {
        ZF_TRY(zf_proto_clone(src[k], "job result", &(*dst)[k]));
        (*n_dst)++;
    }
    return ZF_STATUS_OK;
}

/* The fetches of a finished job's reply, by name. */
static zf_status_t s_result(const Zflow__RunStepReply *r, zf_client_job_result_t **out)
{
    zf_client_job_result_t *res = calloc(1, sizeof *res);
    if (res) {
        res->names = calloc(r->n_fetches + 1, sizeof *res->names);
        res->tensors = calloc(r->n_fetches + 1, sizeof *res->tensors);
        res->n_fetches = (int)r->n_fetches;
    }
    zf_status_t s =
        res && res->names && res->tensors ? ZF_STATUS_OK : zf_out_of_memory("job result");
    for (size_t j = 0; zf_ok(s) && j < r->n_fetches; j++) {
        const Zflow__NamedTensor *nt = r->fetches[j];
        const char *name = nt && nt->name ? nt->name : "";
        if (!(res->names[j] = strdup(name))) s = zf_out_of_memory("job result");
        if (zf_ok(s))
            s = nt && nt->tensor ? zf_tensor_from_proto(nt->tensor, &res->tensors[j])
                                 : zf_internal("the service returned no value");
        if (!zf_ok(s)) s = zf_status_prefix(s, "fetch '%s'", name);
    }
    if (zf_ok(s)) res->attempts = r->attempts;
    if (zf_ok(s)) res->resumed_from_step = r->resumed_from_step;
    if (zf_ok(s))
        s = s_clone_all((ProtobufCMessage *const *)r->step_stats, r->n_step_stats,
                        (ProtobufCMessage ***)&res->runs, &res->n_runs);
    if (zf_ok(s))
        s = s_clone_all((ProtobufCMessage *const *)r->partition_graphs, r->n_partition_graphs,
                        (ProtobufCMessage ***)&res->graphs, &res->n_graphs);
    if (zf_ok(s))
        s = s_clone_all((ProtobufCMessage *const *)r->cost_graph, r->n_cost_graph,
                        (ProtobufCMessage ***)&res->cost, &res->n_cost);
    if (!zf_ok(s)) zf_client_job_result_free(&res);
    *out = res;
    return s;
}

/* A wait for job_id that got no result (the service did not answer, or
 * answered with an error of its own): named, and, unless the job is gone,
 * said to be collectable later, for the job goes on without its waiter. */
static zf_status_t s_wait_failed(zf_status_t s, const char *job_id)
{
    if (s.code == ZF_NOT_FOUND) return s; /* names the job, and why it is gone */
    return zf_status_prefix(s,
                            "no result for job %s (it goes on, and a later wait for %s can "
                            "still collect its result)",
                            job_id, job_id);
}

zf_status_t zf_client_wait_result(zf_client_t *c, const char *job_id, int timeout_ms,
                                  zf_client_progress_fn progress, void *arg,
                                  zf_client_job_result_t **out)
{
    *out = NULL;
    if (!job_id || !job_id[0]) return zf_invalid_argument("wait: no job id");
    if (timeout_ms <= 0) timeout_ms = c->timeout_ms;
    int64_t deadline = s_now_ms() + timeout_ms;
    for (;;) {
        if (progress) {
            zf_client_job_progress_t p;
            zf_status_t s = zf_client_poll(c, job_id, &p);
            if (!zf_ok(s)) return s_wait_failed(s, job_id);
            progress(arg, job_id, &p);
        }
        int64_t left = deadline - s_now_ms();
        int slice = left < 1 ? 1 : left > INT32_MAX ? INT32_MAX : (int)left;
        if (progress && slice > S_PROGRESS_MS) slice = S_PROGRESS_MS;
        if (slice > S_WAIT_SLICE_MS) slice = S_WAIT_SLICE_MS;
        Zflow__Envelope *rep = NULL;
        zf_status_t s = s_wait_once(c, job_id, slice, &rep);
        if (!zf_ok(s)) return s_wait_failed(s, job_id);
        const Zflow__RunStepReply *r = rep->run_step_reply;
        bool unfinished = r->unfinished;
        s = unfinished ? ZF_STATUS_OK : zf_status_from_proto(r->status);
        if (!zf_ok(s)) s = zf_status_prefix(s, "job %s", job_id); /* the job's own failure */
        if (!unfinished && zf_ok(s)) s = s_result(r, out);
        zflow__envelope__free_unpacked(rep, NULL);
        if (!unfinished) return s;
        if (s_now_ms() >= deadline)
            return zf_status_new(ZF_DEADLINE_EXCEEDED,
                                 "job %s has not finished within %d ms; it goes on, and a later "
                                 "wait can collect its result",
                                 job_id, timeout_ms);
    }
}
