/* The executor's network data plane: owns the PULL socket and its receiver
 * thread, the per-peer PUSH sockets and the set of recently closed steps. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/strmap.h"
#include "common/tensor_frame.h"
#include "executor/remote.h"

#define S_POLL_MS 100 /* how often the receiver looks at its stop flag */

/* A peer: one incarnation of a device at one endpoint and, once used, the
 * PUSH socket connected to it. The table holds a reference and so does
 * each send in progress; the last one closes the socket. */
typedef struct {
    pthread_mutex_t mu;   /* serialises the socket */
    int refs;             /* guarded by the transport's mu */
    char *endpoint;       /* fixed for the peer's life */
    uint64_t incarnation; /* 0: unknown; guarded by the transport's mu */
    zf_socket_t *push;
} s_peer_t;

struct zf_remote {
    zf_zctx_t *ctx;
    zf_rendezvous_mgr_t *mgr;
    zf_socket_t *pull;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu; /* guards peers, their refs and incarnations, and closed */
    pthread_cond_t peers_changed;
    zf_strmap_t *peers; /* device -> s_peer_t *, keys copied */
    int64_t closed[ZF_REMOTE_CLOSED_STEPS];
    size_t n_closed, next_closed;
    atomic_uint_fast64_t delivered, dropped, malformed;
};

/* ---- receiving ---------------------------------------------------------- */

static bool s_closed_locked(const zf_remote_t *r, int64_t step_id)
{
    for (size_t i = 0; i < r->n_closed; i++)
        if (r->closed[i] == step_id) return true;
    return false;
}

zf_status_t zf_remote_step_rendezvous(zf_remote_t *r, int64_t step_id, zf_rendezvous_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    zf_status_t s = ZF_STATUS_OK;
    if (!s_closed_locked(r, step_id)) s = zf_rendezvous_mgr_find(r->mgr, step_id, out);
    pthread_mutex_unlock(&r->mu);
    return s;
}

static void s_deliver(zf_remote_t *r, zf_tensor_frame_t *f)
{
    zf_rendezvous_t *rv = NULL;
    zf_status_t s = zf_remote_step_rendezvous(r, f->step_id, &rv);
    if (zf_ok(s) && rv) s = zf_rendezvous_send(rv, f->key, f->tensor, f->is_dead);
    if (zf_ok(s) && rv) {
        atomic_fetch_add(&r->delivered, 1);
    } else {
        atomic_fetch_add(&r->dropped, 1);
        zf_log_debug("remote", "dropped '%s' of step %lld: %s", f->key, (long long)f->step_id,
                     rv || !zf_ok(s) ? zf_status_msg(&s) : "the step has ended here");
    }
    zf_status_clear(&s);
    zf_rendezvous_unref(&rv);
}

static void *s_receiver(void *arg)
{
    zf_remote_t *r = arg;
    while (!atomic_load(&r->stop)) {
        zf_tensor_frame_t f = {0};
        zf_status_t s = zf_tensor_frame_recv(r->pull, S_POLL_MS, &f);
        if (zf_ok(s)) {
            s_deliver(r, &f);
        } else if (s.code == ZF_CANCELLED) {
            zf_status_clear(&s);
            break;
        } else if (s.code != ZF_DEADLINE_EXCEEDED) {
            atomic_fetch_add(&r->malformed, 1);
            zf_log_warn("remote", "dropped a message on %s: %s", zf_socket_endpoint(r->pull),
                        zf_status_msg(&s));
        }
        zf_status_clear(&s);
        zf_tensor_frame_clear(&f);
    }
    return NULL;
}

/* ---- peers ---------------------------------------------------------------- */

/* A new peer with one reference, or NULL when out of memory. */
static s_peer_t *s_peer_new(const char *endpoint, uint64_t incarnation)
{
    s_peer_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    if (!(p->endpoint = strdup(endpoint))) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    p->refs = 1;
    p->incarnation = incarnation;
    return p;
}

/* Drops a reference (caller holds the transport's mu, or is its only
 * user); the last one closes the socket, dropping what is still queued. */
static void s_peer_unref_locked(s_peer_t **p_p)
{
    s_peer_t *p = *p_p;
    *p_p = NULL;
    if (!p || --p->refs > 0) return;
    zf_socket_destroy(&p->push);
    pthread_mutex_destroy(&p->mu);
    free(p->endpoint);
    free(p);
}

/* The peer for device with a new reference, or NULL. */
static s_peer_t *s_peer_find(zf_remote_t *r, const char *device)
{
    pthread_mutex_lock(&r->mu);
    uintptr_t v = 0;
    s_peer_t *p = zf_strmap_get(r->peers, device, &v) ? (s_peer_t *)v : NULL;
    if (p) p->refs++;
    pthread_mutex_unlock(&r->mu);
    return p;
}

static void s_peer_release(zf_remote_t *r, s_peer_t **p_p)
{
    pthread_mutex_lock(&r->mu);
    s_peer_unref_locked(p_p);
    pthread_mutex_unlock(&r->mu);
}

/* ---- lifecycle ----------------------------------------------------------- */

zf_status_t zf_remote_new(zf_zctx_t *ctx, zf_rendezvous_mgr_t *mgr, const char *bind_endpoint,
                          zf_remote_t **out)
{
    *out = NULL;
    zf_remote_t *r = calloc(1, sizeof *r);
    if (!r) return zf_out_of_memory("remote transport");
    r->ctx = ctx;
    r->mgr = mgr;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->peers_changed, NULL);
    zf_status_t s = (r->peers = zf_strmap_new(8, ZF_STRMAP_COPY_KEYS))
                        ? ZF_STATUS_OK
                        : zf_out_of_memory("remote transport");
    if (zf_ok(s)) s = zf_socket_new(ctx, ZF_SOCKET_PULL, &r->pull);
    /* A tensor payload can be no larger than a tensor this process may
     * allocate; refusing bigger frames keeps a peer from making libzmq
     * allocate without bound. */
    if (zf_ok(s)) s = zf_socket_set_max_frame_size(r->pull, (int64_t)zf_buffer_alloc_limit());
    if (zf_ok(s))
        s = zf_socket_bind(r->pull, bind_endpoint ? bind_endpoint : "tcp://127.0.0.1:*", NULL);
    if (zf_ok(s) && pthread_create(&r->thread, NULL, s_receiver, r) != 0)
        s = zf_status_new(ZF_RESOURCE_EXHAUSTED, "cannot start the rendezvous receiver thread");
    if (!zf_ok(s)) {
        zf_remote_destroy(&r);
        return s;
    }
    r->started = true;
    *out = r;
    return ZF_STATUS_OK;
}

void zf_remote_destroy(zf_remote_t **r_p)
{
    if (!r_p || !*r_p) return;
    zf_remote_t *r = *r_p;
    *r_p = NULL;
    atomic_store(&r->stop, true);
    if (r->started) pthread_join(r->thread, NULL);
    zf_socket_destroy(&r->pull);
    size_t iter = 0;
    uintptr_t v = 0;
    while (r->peers && zf_strmap_next(r->peers, &iter, NULL, NULL, &v)) {
        s_peer_t *p = (s_peer_t *)v;
        s_peer_unref_locked(&p); /* no send runs any more */
    }
    zf_strmap_destroy(&r->peers);
    pthread_cond_destroy(&r->peers_changed);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

const char *zf_remote_endpoint(const zf_remote_t *r)
{
    return zf_socket_endpoint(r->pull);
}

/* ---- sending -------------------------------------------------------------- */

static zf_status_t s_peer_send(zf_remote_t *r, s_peer_t *p, const char *device, const char *key,
                               int64_t step_id, zf_tensor_t *tensor, bool is_dead);

/* The rendezvous hook: devices without a known peer stay local. */
static zf_status_t s_hook(void *arg, int64_t step_id, const char *key, const char *dst_device,
                          zf_tensor_t *tensor, bool is_dead, bool *sent)
{
    zf_remote_t *r = arg;
    s_peer_t *p = s_peer_find(r, dst_device);
    *sent = p != NULL;
    if (!p) return ZF_STATUS_OK;
    zf_status_t s = s_peer_send(r, p, dst_device, key, step_id, tensor, is_dead);
    s_peer_release(r, &p);
    return s;
}

zf_status_t zf_remote_attach(zf_remote_t *r, const char *local_device)
{
    return zf_rendezvous_mgr_set_remote(r->mgr, local_device, s_hook, r);
}

/* Whether the peer recorded as p can stay for (endpoint, incarnation): same
 * endpoint, and no two different known incarnations. */
static bool s_peer_same(const s_peer_t *p, const char *endpoint, uint64_t incarnation)
{
    return strcmp(p->endpoint, endpoint) == 0 &&
           (!incarnation || !p->incarnation || p->incarnation == incarnation);
}

zf_status_t zf_remote_update_peer(zf_remote_t *r, const char *device, const char *endpoint,
                                  uint64_t incarnation, bool *changed)
{
    if (changed) *changed = false;
    if (!device || !*device || !endpoint || !*endpoint)
        return zf_invalid_argument("a peer needs a device name and a rendezvous endpoint");
    s_peer_t *fresh = s_peer_new(endpoint, incarnation);
    if (!fresh) return zf_out_of_memory("remote peer");
    pthread_mutex_lock(&r->mu);
    uintptr_t v = 0;
    s_peer_t *old = zf_strmap_get(r->peers, device, &v) ? (s_peer_t *)v : NULL;
    bool moved = !old || !s_peer_same(old, endpoint, incarnation);
    bool learnt = !moved && incarnation && old->incarnation != incarnation;
    int rc = moved ? zf_strmap_put(r->peers, device, (uintptr_t)fresh) : 0;
    if (moved && rc == 0) {
        s_peer_unref_locked(&old); /* closed once no send uses it */
        fresh = NULL;
    }
    if (learnt) old->incarnation = incarnation;
    if ((moved && rc == 0) || learnt) pthread_cond_broadcast(&r->peers_changed);
    pthread_mutex_unlock(&r->mu);
    s_peer_unref_locked(&fresh); /* not used: nobody else has seen it */
    if (rc != 0) return zf_out_of_memory("remote peer");
    if (changed) *changed = moved || learnt;
    return ZF_STATUS_OK;
}

zf_status_t zf_remote_set_peer(zf_remote_t *r, const char *device, const char *endpoint)
{
    return zf_remote_update_peer(r, device, endpoint, 0, NULL);
}

/* Whether a peer of incarnation (0: any) is known for device. Caller holds
 * r->mu. */
static bool s_peer_ready_locked(zf_remote_t *r, const char *device, uint64_t incarnation)
{
    uintptr_t v = 0;
    if (!zf_strmap_get(r->peers, device, &v)) return false;
    return !incarnation || ((s_peer_t *)v)->incarnation == incarnation;
}

bool zf_remote_wait_peer_incarnation(zf_remote_t *r, const char *device, uint64_t incarnation,
                                     int timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    bool found = s_peer_ready_locked(r, device, incarnation);
    int rc = 0;
    while (!found && timeout_ms > 0 && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&r->peers_changed, &r->mu, &deadline);
        found = s_peer_ready_locked(r, device, incarnation);
    }
    pthread_mutex_unlock(&r->mu);
    return found;
}

bool zf_remote_wait_peer(zf_remote_t *r, const char *device, int timeout_ms)
{
    return zf_remote_wait_peer_incarnation(r, device, 0, timeout_ms);
}

uint64_t zf_remote_peer_incarnation(zf_remote_t *r, const char *device)
{
    pthread_mutex_lock(&r->mu);
    uintptr_t v = 0;
    uint64_t inc = zf_strmap_get(r->peers, device, &v) ? ((s_peer_t *)v)->incarnation : 0;
    pthread_mutex_unlock(&r->mu);
    return inc;
}

/* The peer's PUSH socket, connected on first use. Caller holds p->mu. */
static zf_status_t s_peer_socket_locked(zf_remote_t *r, s_peer_t *p)
{
    if (p->push) return ZF_STATUS_OK;
    zf_socket_t *s = NULL;
    ZF_TRY(zf_socket_new(r->ctx, ZF_SOCKET_PUSH, &s));
    zf_status_t st = zf_socket_set_send_timeout(s, ZF_REMOTE_SEND_TIMEOUT_MS);
    if (zf_ok(st)) st = zf_socket_connect(s, p->endpoint);
    if (!zf_ok(st)) {
        zf_socket_destroy(&s);
        return st;
    }
    p->push = s;
    return ZF_STATUS_OK;
}

static zf_status_t s_peer_send(zf_remote_t *r, s_peer_t *p, const char *device, const char *key,
                               int64_t step_id, zf_tensor_t *tensor, bool is_dead)
{
    pthread_mutex_lock(&p->mu);
    zf_status_t s = s_peer_socket_locked(r, p);
    if (zf_ok(s)) s = zf_tensor_frame_send(p->push, key, step_id, tensor, is_dead);
    pthread_mutex_unlock(&p->mu);
    return zf_status_prefix(s, "sending '%s' to %s", key, device);
}

zf_status_t zf_remote_send(zf_remote_t *r, const char *device, const char *key, int64_t step_id,
                           zf_tensor_t *tensor, bool is_dead)
{
    s_peer_t *p = s_peer_find(r, device);
    if (!p)
        return zf_status_new(ZF_UNAVAILABLE, "no rendezvous endpoint is known for device %s",
                             device);
    zf_status_t s = s_peer_send(r, p, device, key, step_id, tensor, is_dead);
    s_peer_release(r, &p);
    return s;
}

/* ---- steps ------------------------------------------------------------------ */

void zf_remote_cleanup_step(zf_remote_t *r, int64_t step_id, const zf_status_t *status)
{
    pthread_mutex_lock(&r->mu);
    if (!s_closed_locked(r, step_id)) {
        r->closed[r->next_closed] = step_id;
        r->next_closed = (r->next_closed + 1) % ZF_REMOTE_CLOSED_STEPS;
        if (r->n_closed < ZF_REMOTE_CLOSED_STEPS) r->n_closed++;
    }
    pthread_mutex_unlock(&r->mu);
    /* The receiver looks the step up under the lock, so from here on it can
     * no longer recreate it; the abort's callbacks run without the lock. */
    zf_rendezvous_mgr_cleanup(r->mgr, step_id, status);
}

zf_remote_stats_t zf_remote_stats(zf_remote_t *r)
{
    return (zf_remote_stats_t){atomic_load(&r->delivered), atomic_load(&r->dropped),
                               atomic_load(&r->malformed)};
}
