/* The scheduler's DEALER sockets to executors and the I/O thread that owns
 * them; the master's transport (scheduler/server/rpc.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "common/log.h"
#include "common/strmap.h"
#include "scheduler/server/rpc.h"

#define S_LOG       "rpc"
#define S_POLL_MS   100 /* how often the thread looks at its stop flag */
#define S_MAX_PEERS ZF_SCHED_RPC_MAX_PEERS
#define S_MAX_FRAME ((int64_t)1 << 31)

/* One executor endpoint: its DEALER and the requests sent on it that no
 * reply has answered yet (answered with an error if it is forgotten). */
typedef struct s_peer {
    char *endpoint;
    zf_socket_t *sock;
    int slot;          /* its index in rpc->peers */
    uint64_t *waiting; /* request ids */
    int n_waiting, cap_waiting;
    struct s_peer *next; /* on rpc->reap once forgotten */
} s_peer_t;

/* A packed envelope, or a forget (bytes NULL), waiting for the socket
 * owner. */
typedef struct s_out {
    char *endpoint;
    uint64_t request_id;
    uint8_t *bytes;
    size_t len;
    struct s_out *next;
} s_out_t;

struct zf_sched_rpc {
    zf_zctx_t *ctx;
    zf_sched_rpc_reply_fn on_reply;
    void *arg;
    int wake[2]; /* pipe: send() -> I/O thread */
    pthread_t thread;
    bool started;
    bool polled;     /* no thread: the caller of zf_sched_rpc_serve() owns the sockets */
    pthread_t owner; /* that caller, once it has polled */
    atomic_bool owned;
    atomic_bool stop;
    pthread_mutex_t mu; /* guards the queue */
    s_out_t *head, *tail;
    /* owned by the thread that owns the sockets */
    zf_strmap_t *index; /* endpoint -> s_peer_t * */
    s_peer_t *peers[S_MAX_PEERS];
    int n_peers;
    s_peer_t *reap; /* forgotten: closed and answered at the end of s_flush() */
    bool flushing;
};

static void s_out_free(s_out_t *o)
{
    if (!o) return;
    free(o->endpoint);
    free(o->bytes);
    free(o);
}

static void s_peer_free(s_peer_t *p)
{
    if (!p) return;
    zf_socket_destroy(&p->sock);
    free(p->endpoint);
    free(p->waiting);
    free(p);
}

/* Answers request_id locally with st (cleared), as if its executor had. */
static void s_answer(zf_sched_rpc_t *rpc, uint64_t request_id, zf_status_t st)
{
    Zflow__Envelope *env = NULL;
    zf_status_t e = zf_envelope_status_reply(request_id, &st, &env);
    if (zf_ok(e)) rpc->on_reply(rpc->arg, &env);
    if (env) zflow__envelope__free_unpacked(env, NULL);
    zf_status_clear(&e);
    zf_status_clear(&st);
}

/* Answers request_id locally with UNAVAILABLE: the message never left. */
static void s_fail(zf_sched_rpc_t *rpc, uint64_t request_id, const char *endpoint, const char *why)
{
    s_answer(rpc, request_id,
             zf_status_new(ZF_UNAVAILABLE, "cannot send to %s: %s", endpoint, why));
}

/* The peer for endpoint, its DEALER connected on first use; NULL on
 * failure. */
static s_peer_t *s_peer(zf_sched_rpc_t *rpc, const char *endpoint, zf_status_t *st)
{
    uintptr_t v = 0;
    if (zf_strmap_get(rpc->index, endpoint, &v)) return (s_peer_t *)v;
    if (rpc->n_peers == S_MAX_PEERS) {
        *st = zf_status_new(ZF_RESOURCE_EXHAUSTED, "more than %d executors connected at once",
                            S_MAX_PEERS);
        return NULL;
    }
    s_peer_t *p = calloc(1, sizeof *p);
    *st = p && (p->endpoint = strdup(endpoint)) ? ZF_STATUS_OK : zf_out_of_memory("rpc");
    if (zf_ok(*st)) *st = zf_socket_new(rpc->ctx, ZF_SOCKET_DEALER, &p->sock);
    if (zf_ok(*st)) *st = zf_socket_set_max_frame_size(p->sock, S_MAX_FRAME);
    if (zf_ok(*st)) *st = zf_socket_set_hwm(p->sock, 0, 0);
    if (zf_ok(*st)) *st = zf_socket_secure_client(p->sock, ZF_ROLE_EXECUTOR);
    if (zf_ok(*st)) *st = zf_socket_connect(p->sock, endpoint);
    if (zf_ok(*st) && zf_strmap_insert(rpc->index, endpoint, (uintptr_t)p, NULL))
        *st = zf_out_of_memory("rpc");
    if (!zf_ok(*st)) {
        s_peer_free(p);
        return NULL;
    }
    p->slot = rpc->n_peers;
    rpc->peers[rpc->n_peers++] = p;
    return p;
}

/* Room to note one more request waiting on p. */
static zf_status_t s_reserve(s_peer_t *p)
{
    if (p->n_waiting < p->cap_waiting) return ZF_STATUS_OK;
    int cap = p->cap_waiting ? 2 * p->cap_waiting : 16;
    uint64_t *v = realloc(p->waiting, (size_t)cap * sizeof *v);
    if (!v) return zf_out_of_memory("rpc: requests in flight");
    p->waiting = v;
    p->cap_waiting = cap;
    return ZF_STATUS_OK;
}

/* A reply to request_id came from p. */
static void s_answered(s_peer_t *p, uint64_t request_id)
{
    for (int i = 0; i < p->n_waiting; i++) {
        if (p->waiting[i] != request_id) continue;
        p->waiting[i] = p->waiting[--p->n_waiting];
        return;
    }
}

/* Takes endpoint's peer out of the table (no-op when there is none) and
 * puts it on the reap list: nothing more is sent on it or read from it. */
static void s_detach(zf_sched_rpc_t *rpc, const char *endpoint)
{
    uintptr_t v = 0;
    if (!zf_strmap_remove(rpc->index, endpoint, &v)) return;
    s_peer_t *p = (s_peer_t *)v;
    s_peer_t *last = rpc->peers[--rpc->n_peers];
    rpc->peers[p->slot] = last;
    last->slot = p->slot;
    rpc->peers[rpc->n_peers] = NULL;
    p->next = rpc->reap;
    rpc->reap = p;
}

/* Closes the forgotten peers' sockets and answers the requests they still
 * waited for with UNAVAILABLE. Never inside s_read(), which may be reading
 * one of them. */
static void s_reap(zf_sched_rpc_t *rpc)
{
    while (rpc->reap) {
        s_peer_t *p = rpc->reap;
        rpc->reap = p->next;
        zf_socket_destroy(&p->sock);
        for (int i = 0; i < p->n_waiting; i++)
            s_answer(rpc, p->waiting[i],
                     zf_status_new(ZF_UNAVAILABLE,
                                   "no reply from %s to request %" PRIu64
                                   ": the scheduler forgot that executor and closed its "
                                   "connection",
                                   p->endpoint, p->waiting[i]));
        s_peer_free(p);
    }
}

/* Sends one queued message; a failure is answered at once. */
static void s_send_queued(zf_sched_rpc_t *rpc, const s_out_t *o)
{
    zf_status_t st = ZF_STATUS_OK;
    s_peer_t *p = s_peer(rpc, o->endpoint, &st);
    if (p) st = s_reserve(p);
    if (zf_ok(st) && zmq_send(zf_socket_handle(p->sock), o->bytes, o->len, ZMQ_DONTWAIT) < 0)
        st = zf_status_new(ZF_UNAVAILABLE, "%s", zmq_strerror(errno));
    if (zf_ok(st))
        p->waiting[p->n_waiting++] = o->request_id;
    else
        s_fail(rpc, o->request_id, o->endpoint, zf_status_msg(&st));
    zf_status_clear(&st);
}

/* Sends and forgets what other threads queued, in their order, then reaps
 * the forgotten peers. */
static void s_flush(zf_sched_rpc_t *rpc)
{
    char drain[64];
    while (read(rpc->wake[0], drain, sizeof drain) > 0) {
    }
    pthread_mutex_lock(&rpc->mu);
    s_out_t *o = rpc->head;
    rpc->head = rpc->tail = NULL;
    pthread_mutex_unlock(&rpc->mu);
    rpc->flushing = true; /* a send from a reply callback queues behind these */
    while (o) {
        s_out_t *next = o->next;
        if (o->bytes)
            s_send_queued(rpc, o);
        else
            s_detach(rpc, o->endpoint);
        s_out_free(o);
        o = next;
    }
    s_reap(rpc);
    rpc->flushing = false;
}

/* Reads every reply waiting on p's socket. */
static void s_read(zf_sched_rpc_t *rpc, s_peer_t *p)
{
    for (;;) {
        zf_route_t route;
        zf_route_clear(&route);
        Zflow__Envelope *env = NULL;
        zf_status_t st = zf_envelope_recv(p->sock, 0, &route, &env);
        if (st.code == ZF_DEADLINE_EXCEEDED) {
            zf_status_clear(&st);
            return;
        }
        if (!zf_ok(st)) {
            zf_code_t code = st.code;
            if (code != ZF_CANCELLED)
                zf_log_warn(S_LOG, "dropped a malformed reply: %s", zf_status_msg(&st));
            zf_status_clear(&st);
            if (code == ZF_CANCELLED) return;
            continue;
        }
        s_answered(p, env->request_id);
        rpc->on_reply(rpc->arg, &env);
        if (env) zflow__envelope__free_unpacked(env, NULL);
    }
}

/* The pipe, then one item per peer. */
static int s_items(zf_sched_rpc_t *rpc, zmq_pollitem_t *items, int max)
{
    int n = 0;
    if (n < max) items[n++] = (zmq_pollitem_t){NULL, rpc->wake[0], ZMQ_POLLIN, 0};
    for (int i = 0; i < rpc->n_peers && n < max; i++)
        items[n++] = (zmq_pollitem_t){zf_socket_handle(rpc->peers[i]->sock), 0, ZMQ_POLLIN, 0};
    return n;
}

/* The live peer whose socket is handle (the one at slot unless the table
 * changed since the items were made), or NULL: it was forgotten since. */
static s_peer_t *s_peer_of(zf_sched_rpc_t *rpc, int slot, void *handle)
{
    if (slot < rpc->n_peers && zf_socket_handle(rpc->peers[slot]->sock) == handle)
        return rpc->peers[slot];
    for (int i = 0; i < rpc->n_peers; i++)
        if (zf_socket_handle(rpc->peers[i]->sock) == handle) return rpc->peers[i];
    return NULL;
}

/* Handles what s_items()' items found ready: replies first, then the
 * queue. Items are matched to peers by socket, not position, so that a
 * table changed since they were made is still read right. */
static void s_serve(zf_sched_rpc_t *rpc, const zmq_pollitem_t *items, int n)
{
    for (int i = 1; i < n; i++) {
        if (!(items[i].revents & ZMQ_POLLIN)) continue;
        s_peer_t *p = s_peer_of(rpc, i - 1, items[i].socket);
        if (p) s_read(rpc, p);
    }
    if (n > 0 && (items[0].revents & ZMQ_POLLIN)) s_flush(rpc);
}

static void *s_loop(void *arg)
{
    zf_sched_rpc_t *rpc = arg;
    zmq_pollitem_t items[S_MAX_PEERS + 1];
    while (!atomic_load(&rpc->stop)) {
        int n = s_items(rpc, items, S_MAX_PEERS + 1);
        int rc = zmq_poll(items, n, S_POLL_MS);
        if (rc < 0 && errno == ETERM) break;
        if (rc > 0) s_serve(rpc, items, n);
    }
    return NULL;
}

/* True when the calling thread may send at once: it owns the sockets of a
 * polled rpc, and nothing queued earlier waits (a forget among it must
 * come first). */
static bool s_send_at_once(zf_sched_rpc_t *rpc)
{
    if (!rpc->polled || !atomic_load(&rpc->owned) || !pthread_equal(pthread_self(), rpc->owner))
        return false;
    if (rpc->flushing) return false;
    pthread_mutex_lock(&rpc->mu);
    bool empty = rpc->head == NULL;
    pthread_mutex_unlock(&rpc->mu);
    return empty;
}

/* Sends env at once: the caller owns the sockets. An error means nothing
 * left (no reply will come). */
static zf_status_t s_send_now(zf_sched_rpc_t *rpc, const char *endpoint, const Zflow__Envelope *env)
{
    zf_status_t st = ZF_STATUS_OK;
    s_peer_t *p = s_peer(rpc, endpoint, &st);
    if (p) st = s_reserve(p);
    if (!zf_ok(st)) return zf_status_prefix(st, "cannot send to %s", endpoint);
    st = zf_envelope_send(p->sock, NULL, env);
    if (st.code == ZF_DEADLINE_EXCEEDED) { /* its queue is full */
        zf_status_clear(&st);
        st = zf_status_new(ZF_UNAVAILABLE, "cannot send to %s: its queue is full", endpoint);
    }
    if (zf_ok(st)) p->waiting[p->n_waiting++] = env->request_id;
    return st;
}

/* Queues o (taken over) for the socket owner and wakes it. */
static void s_enqueue(zf_sched_rpc_t *rpc, s_out_t *o)
{
    pthread_mutex_lock(&rpc->mu);
    if (rpc->tail)
        rpc->tail->next = o;
    else
        rpc->head = o;
    rpc->tail = o;
    pthread_mutex_unlock(&rpc->mu);
    /* A full pipe already holds a wake-up; nothing is lost. */
    if (write(rpc->wake[1], "", 1) < 0 && errno != EAGAIN)
        zf_log_warn(S_LOG, "cannot wake the I/O thread: %s", strerror(errno));
}

static zf_status_t s_transport_send(void *arg, const char *device, const char *endpoint,
                                    const Zflow__Envelope *env)
{
    (void)device;
    zf_sched_rpc_t *rpc = arg;
    Zflow__Envelope head = *env; /* a shallow copy: a version left at 0 goes out as 1 */
    if (head.version == ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_UNSPECIFIED)
        head.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    if (s_send_at_once(rpc)) return s_send_now(rpc, endpoint, &head);
    s_out_t *o = calloc(1, sizeof *o);
    if (!o) return zf_out_of_memory("rpc");
    o->len = zflow__envelope__get_packed_size(&head);
    o->bytes = malloc(o->len + 1);
    o->endpoint = strdup(endpoint);
    o->request_id = env->request_id;
    if (!o->bytes || !o->endpoint) {
        s_out_free(o);
        return zf_out_of_memory("rpc");
    }
    zflow__envelope__pack(&head, o->bytes);
    s_enqueue(rpc, o);
    return ZF_STATUS_OK;
}

zf_status_t zf_sched_rpc_forget(zf_sched_rpc_t *rpc, const char *endpoint)
{
    if (!endpoint) return zf_invalid_argument("rpc: forget without an endpoint");
    s_out_t *o = calloc(1, sizeof *o);
    if (o) o->endpoint = strdup(endpoint);
    if (!o || !o->endpoint) {
        s_out_free(o);
        return zf_out_of_memory("rpc: forget");
    }
    s_enqueue(rpc, o);
    return ZF_STATUS_OK;
}

void zf_sched_rpc_forget_hook(void *rpc, const char *endpoint)
{
    zf_status_t st = zf_sched_rpc_forget(rpc, endpoint);
    if (!zf_ok(st))
        zf_log_warn(S_LOG, "cannot forget executor endpoint %s: %s", endpoint, zf_status_msg(&st));
    zf_status_clear(&st);
}

static zf_status_t s_new(zf_zctx_t *ctx, zf_sched_rpc_reply_fn on_reply, void *arg, bool polled,
                         zf_sched_rpc_t **out)
{
    *out = NULL;
    zf_sched_rpc_t *rpc = calloc(1, sizeof *rpc);
    if (!rpc) return zf_out_of_memory("rpc");
    rpc->ctx = ctx;
    rpc->on_reply = on_reply;
    rpc->arg = arg;
    rpc->wake[0] = rpc->wake[1] = -1;
    pthread_mutex_init(&rpc->mu, NULL);
    zf_status_t st = (rpc->index = zf_strmap_new(16, ZF_STRMAP_OWN_KEYS)) ? ZF_STATUS_OK
                                                                          : zf_out_of_memory("rpc");
    if (zf_ok(st) && pipe(rpc->wake) != 0) st = zf_internal("rpc: pipe: %s", strerror(errno));
    for (int i = 0; zf_ok(st) && i < 2; i++)
        if (fcntl(rpc->wake[i], F_SETFL, O_NONBLOCK) != 0)
            st = zf_internal("rpc: fcntl: %s", strerror(errno));
    rpc->polled = polled;
    if (zf_ok(st) && !polled) {
        int rc = pthread_create(&rpc->thread, NULL, s_loop, rpc);
        rpc->started = rc == 0;
        if (rc != 0) st = zf_internal("rpc: cannot start its thread: %s", strerror(rc));
    }
    if (!zf_ok(st)) {
        zf_sched_rpc_destroy(&rpc);
        return st;
    }
    *out = rpc;
    return ZF_STATUS_OK;
}

zf_status_t zf_sched_rpc_new(zf_zctx_t *ctx, zf_sched_rpc_reply_fn on_reply, void *arg,
                             zf_sched_rpc_t **out)
{
    return s_new(ctx, on_reply, arg, false, out);
}

zf_status_t zf_sched_rpc_new_polled(zf_zctx_t *ctx, zf_sched_rpc_reply_fn on_reply, void *arg,
                                    zf_sched_rpc_t **out)
{
    return s_new(ctx, on_reply, arg, true, out);
}

int zf_sched_rpc_items(zf_sched_rpc_t *rpc, zmq_pollitem_t *items, int max)
{
    if (!atomic_load(&rpc->owned)) {
        rpc->owner = pthread_self();
        atomic_store(&rpc->owned, true);
    }
    return s_items(rpc, items, max);
}

void zf_sched_rpc_serve(zf_sched_rpc_t *rpc, const zmq_pollitem_t *items, int n)
{
    s_serve(rpc, items, n);
}

void zf_sched_rpc_destroy(zf_sched_rpc_t **rpc_p)
{
    if (!rpc_p || !*rpc_p) return;
    zf_sched_rpc_t *rpc = *rpc_p;
    *rpc_p = NULL;
    atomic_store(&rpc->stop, true);
    if (rpc->started) pthread_join(rpc->thread, NULL);
    for (int i = 0; i < rpc->n_peers; i++) s_peer_free(rpc->peers[i]);
    while (rpc->reap) {
        s_peer_t *next = rpc->reap->next;
        s_peer_free(rpc->reap);
        rpc->reap = next;
    }
    zf_strmap_destroy(&rpc->index);
    while (rpc->head) {
        s_out_t *next = rpc->head->next;
        s_out_free(rpc->head);
        rpc->head = next;
    }
    for (int i = 0; i < 2; i++)
        if (rpc->wake[i] >= 0) close(rpc->wake[i]);
    pthread_mutex_destroy(&rpc->mu);
    free(rpc);
}

zf_master_transport_t zf_sched_rpc_transport(zf_sched_rpc_t *rpc)
{
    return (zf_master_transport_t){s_transport_send, rpc};
}
