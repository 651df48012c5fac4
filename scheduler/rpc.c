/* The scheduler's DEALER sockets to executors and the I/O thread that owns
 * them; the master's transport (scheduler/rpc.h). */
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
#include "scheduler/rpc.h"

#define S_LOG       "rpc"
#define S_POLL_MS   100 /* how often the thread looks at its stop flag */
#define S_MAX_PEERS 1024
#define S_MAX_FRAME ((int64_t)1 << 31)

/* A packed envelope waiting for the I/O thread. */
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
    /* owned by the I/O thread */
    zf_strmap_t *index; /* endpoint -> 1 + index into socks */
    zf_socket_t *socks[S_MAX_PEERS];
    int n_socks;
};

static void s_out_free(s_out_t *o)
{
    if (!o) return;
    free(o->endpoint);
    free(o->bytes);
    free(o);
}

/* Answers request_id locally with UNAVAILABLE: the message never left. */
static void s_fail(zf_sched_rpc_t *rpc, uint64_t request_id, const char *endpoint, const char *why)
{
    zf_status_t st = zf_status_new(ZF_UNAVAILABLE, "cannot send to %s: %s", endpoint, why);
    Zflow__Envelope *env = NULL;
    zf_status_t e = zf_envelope_status_reply(request_id, &st, &env);
    if (zf_ok(e)) rpc->on_reply(rpc->arg, &env);
    if (env) zflow__envelope__free_unpacked(env, NULL);
    zf_status_clear(&e);
    zf_status_clear(&st);
}

/* The DEALER for endpoint, connected on first use; NULL on failure. */
static zf_socket_t *s_socket(zf_sched_rpc_t *rpc, const char *endpoint, zf_status_t *st)
{
    uintptr_t v = 0;
    if (zf_strmap_get(rpc->index, endpoint, &v)) return rpc->socks[v - 1];
    if (rpc->n_socks == S_MAX_PEERS) {
        *st = zf_status_new(ZF_RESOURCE_EXHAUSTED, "more than %d executors", S_MAX_PEERS);
        return NULL;
    }
    zf_socket_t *s = NULL;
    *st = zf_socket_new(rpc->ctx, ZF_SOCKET_DEALER, &s);
    if (zf_ok(*st)) *st = zf_socket_set_max_frame_size(s, S_MAX_FRAME);
    if (zf_ok(*st)) *st = zf_socket_set_hwm(s, 0, 0);
    if (zf_ok(*st)) *st = zf_socket_connect(s, endpoint);
    if (zf_ok(*st) && zf_strmap_insert(rpc->index, endpoint, (uintptr_t)rpc->n_socks + 1, NULL))
        *st = zf_out_of_memory("rpc");
    if (!zf_ok(*st)) {
        zf_socket_destroy(&s);
        return NULL;
    }
    rpc->socks[rpc->n_socks++] = s;
    return s;
}

/* Sends what send() queued. */
static void s_flush(zf_sched_rpc_t *rpc)
{
    char drain[64];
    while (read(rpc->wake[0], drain, sizeof drain) > 0) {
    }
    pthread_mutex_lock(&rpc->mu);
    s_out_t *o = rpc->head;
    rpc->head = rpc->tail = NULL;
    pthread_mutex_unlock(&rpc->mu);
    while (o) {
        s_out_t *next = o->next;
        zf_status_t st = ZF_STATUS_OK;
        zf_socket_t *s = s_socket(rpc, o->endpoint, &st);
        if (s && zmq_send(zf_socket_handle(s), o->bytes, o->len, ZMQ_DONTWAIT) < 0)
            st = zf_status_new(ZF_UNAVAILABLE, "%s", zmq_strerror(errno));
        if (!zf_ok(st)) s_fail(rpc, o->request_id, o->endpoint, zf_status_msg(&st));
        zf_status_clear(&st);
        s_out_free(o);
        o = next;
    }
}

/* Reads every reply waiting on socket s. */
static void s_read(zf_sched_rpc_t *rpc, zf_socket_t *s)
{
    for (;;) {
        zf_route_t route;
        zf_route_clear(&route);
        Zflow__Envelope *env = NULL;
        zf_status_t st = zf_envelope_recv(s, 0, &route, &env);
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
        rpc->on_reply(rpc->arg, &env);
        if (env) zflow__envelope__free_unpacked(env, NULL);
    }
}

static void *s_loop(void *arg)
{
    zf_sched_rpc_t *rpc = arg;
    zmq_pollitem_t items[S_MAX_PEERS + 1];
    while (!atomic_load(&rpc->stop)) {
        int n = rpc->n_socks;
        items[0] = (zmq_pollitem_t){NULL, rpc->wake[0], ZMQ_POLLIN, 0};
        for (int i = 0; i < n; i++)
            items[i + 1] = (zmq_pollitem_t){zf_socket_handle(rpc->socks[i]), 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(items, n + 1, S_POLL_MS);
        if (rc < 0 && errno == ETERM) break;
        if (rc <= 0) continue;
        for (int i = 0; i < n; i++)
            if (items[i + 1].revents & ZMQ_POLLIN) s_read(rpc, rpc->socks[i]);
        if (items[0].revents & ZMQ_POLLIN) s_flush(rpc);
    }
    return NULL;
}

/* Sends env at once: the caller owns the sockets. An error means nothing
 * left (no reply will come). */
static zf_status_t s_send_now(zf_sched_rpc_t *rpc, const char *endpoint, const Zflow__Envelope *env)
{
    zf_status_t st = ZF_STATUS_OK;
    zf_socket_t *s = s_socket(rpc, endpoint, &st);
    if (!s) return zf_status_prefix(st, "cannot send to %s", endpoint);
    st = zf_envelope_send(s, NULL, env);
    if (st.code == ZF_DEADLINE_EXCEEDED) { /* its queue is full */
        zf_status_clear(&st);
        st = zf_status_new(ZF_UNAVAILABLE, "cannot send to %s: its queue is full", endpoint);
    }
    return st;
}

static zf_status_t s_transport_send(void *arg, const char *device, const char *endpoint,
                                    const Zflow__Envelope *env)
{
    (void)device;
    zf_sched_rpc_t *rpc = arg;
    if (rpc->polled && atomic_load(&rpc->owned) && pthread_equal(pthread_self(), rpc->owner)) {
        Zflow__Envelope head = *env;
        if (head.version == ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_UNSPECIFIED)
            head.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
        return s_send_now(rpc, endpoint, &head);
    }
    s_out_t *o = calloc(1, sizeof *o);
    if (!o) return zf_out_of_memory("rpc");
    Zflow__Envelope head = *env; /* a shallow copy: a version left at 0 goes out as 1 */
    if (head.version == ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_UNSPECIFIED)
        head.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    o->len = zflow__envelope__get_packed_size(&head);
    o->bytes = malloc(o->len + 1);
    o->endpoint = strdup(endpoint);
    o->request_id = env->request_id;
    if (!o->bytes || !o->endpoint) {
        s_out_free(o);
        return zf_out_of_memory("rpc");
    }
    zflow__envelope__pack(&head, o->bytes);
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
    return ZF_STATUS_OK;
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
    zf_status_t st = (rpc->index = zf_strmap_new(16, ZF_STRMAP_OWN_KEYS))
                         ? ZF_STATUS_OK
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
    int n = 0;
    if (n < max) items[n++] = (zmq_pollitem_t){NULL, rpc->wake[0], ZMQ_POLLIN, 0};
    for (int i = 0; i < rpc->n_socks && n < max; i++)
        items[n++] = (zmq_pollitem_t){zf_socket_handle(rpc->socks[i]), 0, ZMQ_POLLIN, 0};
    return n;
}

void zf_sched_rpc_serve(zf_sched_rpc_t *rpc, const zmq_pollitem_t *items, int n)
{
    for (int i = 1; i < n && i - 1 < rpc->n_socks; i++)
        if (items[i].revents & ZMQ_POLLIN) s_read(rpc, rpc->socks[i - 1]);
    if (n > 0 && (items[0].revents & ZMQ_POLLIN)) s_flush(rpc);
}

void zf_sched_rpc_destroy(zf_sched_rpc_t **rpc_p)
{
    if (!rpc_p || !*rpc_p) return;
    zf_sched_rpc_t *rpc = *rpc_p;
    *rpc_p = NULL;
    atomic_store(&rpc->stop, true);
    if (rpc->started) pthread_join(rpc->thread, NULL);
    for (int i = 0; i < rpc->n_socks; i++) zf_socket_destroy(&rpc->socks[i]);
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
