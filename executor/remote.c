/* The executor's network data plane: owns the PULL socket and its receiver
 * thread, the per-peer PUSH sockets and the set of recently closed steps. */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "common/device_name.h"
#include "common/log.h"
#include "common/strmap.h"
#include "common/tensor_frame.h"
#include "executor/remote.h"
#include "executor/remote_internal.h"
#include "executor/step_set.h"

#define S_POLL_MS     100 /* how often the receiver looks at its stop flag */
#define S_OFFER_MAGIC 0x7a665063u

/* A peer: one incarnation of a device at one endpoint and, once used, the
 * PUSH socket connected to it. The table holds a reference and so does
 * each send in progress; the last one closes the socket. */
typedef struct {
    pthread_mutex_t mu;   /* serialises the socket */
    int refs;             /* guarded by the transport's mu */
    char *endpoint;       /* fixed for the peer's life */
    uint64_t incarnation; /* 0: unknown; guarded by the transport's mu */
    zf_socket_t *push;
    atomic_bool ipc_refused; /* it refused an IPC offer: send it bytes */
} s_peer_t;

/* A device tensor offered over IPC, kept alive until the receiver's reply,
 * the step's cleanup or the hold limit (zf_remote_expire()). */
typedef struct s_held {
    struct s_held *next;
    uint64_t id;
    int64_t step_id;
    int64_t held_at_ms; /* zf_remote_now_ms() when offered */
    char *device, *key;
    zf_tensor_t *tensor;
} s_held_t;

/* What the release of a received offer answers through: the transport
 * while it lives. Offers may be released after it is gone (the rendezvous
 * table outlives it), so they hold this, not the transport. */
typedef struct {
    pthread_mutex_t mu;
    atomic_int refs;
    zf_remote_t *r; /* NULL once the transport is destroyed */
} s_acker_t;

/* The buffer data of a received offer (see zf_remote_ipc_offer()). */
typedef struct {
    uint32_t magic;
    zf_gpu_ipc_handle_t handle;
    uint64_t id;
    int64_t step_id;
    s_acker_t *acker;
    bool answered; /* refused already: the release says nothing */
    char src[ZF_DEVICE_NAME_MAX + 1];
} s_offer_t;

struct zf_remote {
    zf_zctx_t *ctx;
    zf_rendezvous_mgr_t *mgr;
    zf_socket_t *pull;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu; /* guards peers, their refs and incarnations, closed and held */
    pthread_cond_t peers_changed;
    zf_strmap_t *peers;    /* device -> s_peer_t *, keys copied */
    zf_step_set_t *closed; /* the most recent ZF_REMOTE_CLOSED_STEPS closed steps */
    s_held_t *held;        /* guarded by mu, newest first */
    uint64_t n_held;
    int64_t ipc_hold_ms; /* guarded by mu: how long an offer is held at most */
    int64_t held_min_ms; /* guarded by mu: no held offer is older (INT64_MAX: none) */
    atomic_uint_fast64_t next_offer;
    s_acker_t *acker;
    char host_id[ZF_TENSOR_FRAME_MAX_HOST + 1];
    atomic_uint_fast64_t delivered, dropped, malformed;
    atomic_uint_fast64_t ipc_offered, ipc_released, ipc_refused, ipc_received, ipc_expired;
};

static void s_acker_unref(s_acker_t **a_p);
static s_held_t *s_held_take_locked(zf_remote_t *r, uint64_t id, int64_t step_id);
static void s_held_free_all(s_held_t **list);

void zf_remote_default_host_id(char *buf, size_t n)
{
    char host[256] = "unknown-host", boot[64] = "";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown-host");
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "\r\n")] = '\0';
    snprintf(buf, n, "%s:%s", host, boot);
}

/* ---- receiving ---------------------------------------------------------- */

static bool s_closed_locked(const zf_remote_t *r, int64_t step_id)
{
    return zf_step_set_has(r->closed, step_id);
}

static zf_status_t s_step_rendezvous(zf_remote_t *r, int64_t step_id, bool claim,
                                     zf_rendezvous_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    bool closed = s_closed_locked(r, step_id);
    pthread_mutex_unlock(&r->mu);
    if (closed) return ZF_STATUS_OK;
    /* Not under r->mu: the table may drop expired steps here, and freeing
     * an IPC offer they held answers its sender through r->mu. */
    zf_status_t s = claim ? zf_rendezvous_mgr_claim(r->mgr, step_id, out)
                          : zf_rendezvous_mgr_find(r->mgr, step_id, out);
    pthread_mutex_lock(&r->mu);
    closed = zf_ok(s) && s_closed_locked(r, step_id);
    pthread_mutex_unlock(&r->mu);
    if (closed) { /* closed meanwhile: what was (re)made here goes too */
        zf_rendezvous_unref(out);
        zf_rendezvous_mgr_cleanup(r->mgr, step_id, NULL);
    }
    return s;
}

zf_status_t zf_remote_step_rendezvous(zf_remote_t *r, int64_t step_id, zf_rendezvous_t **out)
{
    return s_step_rendezvous(r, step_id, false, out);
}

zf_status_t zf_remote_claim_step(zf_remote_t *r, int64_t step_id, zf_rendezvous_t **out)
{
    return s_step_rendezvous(r, step_id, true, out);
}

/* Hands a received value to its step (mgr counts it against the limits
 * on steps not started here) unless the step has ended here; a value the
 * step cannot take is dropped and counted. */
static void s_deliver(zf_remote_t *r, zf_tensor_frame_t *f)
{
    pthread_mutex_lock(&r->mu);
    bool closed = s_closed_locked(r, f->step_id);
    pthread_mutex_unlock(&r->mu);
    zf_status_t s =
        closed ? ZF_STATUS_OK
               : zf_rendezvous_mgr_deliver(r->mgr, f->step_id, f->key, f->tensor, f->is_dead);
    if (!closed && zf_ok(s)) {
        pthread_mutex_lock(&r->mu);
        closed = s_closed_locked(r, f->step_id);
        pthread_mutex_unlock(&r->mu);
        /* closed meanwhile: what was (re)made here goes too, with the value */
        if (closed) zf_rendezvous_mgr_cleanup(r->mgr, f->step_id, NULL);
    }
    if (!closed && zf_ok(s)) {
        atomic_fetch_add(&r->delivered, 1);
    } else {
        atomic_fetch_add(&r->dropped, 1);
        zf_log_debug("remote", "dropped '%s' of step %lld: %s", f->key, (long long)f->step_id,
                     zf_ok(s) ? "the step has ended here" : zf_status_msg(&s));
    }
    zf_status_clear(&s);
}

static void s_on_offer(zf_remote_t *r, zf_tensor_frame_t *f);
static void s_on_reply(zf_remote_t *r, const zf_tensor_frame_reply_t *reply);

/* Receives and handles one message, waiting up to timeout_ms; false when
 * none came (or the socket's context is closing). */
static bool s_receive_one(zf_remote_t *r, int timeout_ms)
{
    zf_tensor_frame_t f = {0};
    zf_status_t s = zf_tensor_frame_recv(r->pull, timeout_ms, &f);
    bool got = zf_ok(s) || (s.code != ZF_CANCELLED && s.code != ZF_DEADLINE_EXCEEDED);
    if (zf_ok(s) && f.reply) {
        s_on_reply(r, f.reply);
    } else if (zf_ok(s) && f.offer) {
        s_on_offer(r, &f);
    } else if (zf_ok(s)) {
        s_deliver(r, &f);
    } else if (s.code == ZF_CANCELLED) {
        atomic_store(&r->stop, true);
    } else if (s.code != ZF_DEADLINE_EXCEEDED) {
        atomic_fetch_add(&r->malformed, 1);
        zf_log_warn("remote", "dropped a message on %s: %s", zf_socket_endpoint(r->pull),
                    zf_status_msg(&s));
    }
    zf_status_clear(&s);
    zf_tensor_frame_clear(&f);
    return got;
}

static void *s_receiver(void *arg)
{
    zf_remote_t *r = arg;
    while (!atomic_load(&r->stop)) {
        s_receive_one(r, S_POLL_MS);
        zf_remote_expire(r, zf_remote_now_ms());
    }
    return NULL;
}

int zf_remote_pump(zf_remote_t *r, int max)
{
    int n = 0;
    while (n < max && !atomic_load(&r->stop) && s_receive_one(r, 0)) n++;
    return n;
}

void *zf_remote_poll_handle(const zf_remote_t *r)
{
    return zf_socket_handle(r->pull);
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

static zf_status_t s_new(zf_zctx_t *ctx, zf_rendezvous_mgr_t *mgr, const char *bind_endpoint,
                         bool thread, zf_remote_t **out)
{
    *out = NULL;
    zf_remote_t *r = calloc(1, sizeof *r);
    if (!r) return zf_out_of_memory("remote transport");
    r->ctx = ctx;
    r->mgr = mgr;
    r->ipc_hold_ms = ZF_REMOTE_IPC_HOLD_MS;
    r->held_min_ms = INT64_MAX;
    zf_remote_default_host_id(r->host_id, sizeof r->host_id);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->peers_changed, NULL);
    r->acker = calloc(1, sizeof *r->acker);
    if (r->acker) {
        pthread_mutex_init(&r->acker->mu, NULL);
        atomic_init(&r->acker->refs, 1);
        r->acker->r = r;
    }
    zf_status_t s = (r->peers = zf_strmap_new(8, ZF_STRMAP_OWN_KEYS)) && r->acker
                        ? ZF_STATUS_OK
                        : zf_out_of_memory("remote transport");
    if (zf_ok(s)) s = zf_step_set_new(ZF_REMOTE_CLOSED_STEPS, &r->closed);
    if (zf_ok(s)) s = zf_socket_new(ctx, ZF_SOCKET_PULL, &r->pull);
    /* A tensor payload can be no larger than a tensor this process may
     * allocate; refusing bigger frames keeps a peer from making libzmq
     * allocate without bound. */
    if (zf_ok(s)) s = zf_socket_set_max_frame_size(r->pull, (int64_t)zf_buffer_alloc_limit());
    if (zf_ok(s))
        s = zf_socket_bind(r->pull, bind_endpoint ? bind_endpoint : "tcp://127.0.0.1:*", NULL);
    if (zf_ok(s) && thread && pthread_create(&r->thread, NULL, s_receiver, r) != 0)
        s = zf_status_new(ZF_RESOURCE_EXHAUSTED, "cannot start the rendezvous receiver thread");
    if (!zf_ok(s)) {
        zf_remote_destroy(&r);
        return s;
    }
    r->started = thread;
    *out = r;
    return ZF_STATUS_OK;
}

zf_status_t zf_remote_new(zf_zctx_t *ctx, zf_rendezvous_mgr_t *mgr, const char *bind_endpoint,
                          zf_remote_t **out)
{
    return s_new(ctx, mgr, bind_endpoint, true, out);
}

zf_status_t zf_remote_new_polled(zf_zctx_t *ctx, zf_rendezvous_mgr_t *mgr,
                                 const char *bind_endpoint, zf_remote_t **out)
{
    return s_new(ctx, mgr, bind_endpoint, false, out);
}

void zf_remote_destroy(zf_remote_t **r_p)
{
    if (!r_p || !*r_p) return;
    zf_remote_t *r = *r_p;
    *r_p = NULL;
    atomic_store(&r->stop, true);
    if (r->started) pthread_join(r->thread, NULL);
    if (r->acker) { /* offers released from now on answer nobody */
        pthread_mutex_lock(&r->acker->mu);
        r->acker->r = NULL;
        pthread_mutex_unlock(&r->acker->mu);
        s_acker_unref(&r->acker);
    }
    s_held_free_all(&r->held);
    zf_socket_destroy(&r->pull);
    size_t iter = 0;
    uintptr_t v = 0;
    while (r->peers && zf_strmap_next(r->peers, &iter, NULL, NULL, &v)) {
        s_peer_t *p = (s_peer_t *)v;
        s_peer_unref_locked(&p); /* no send runs any more */
    }
    zf_strmap_destroy(&r->peers);
    zf_step_set_destroy(&r->closed);
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

static zf_status_t s_send_device_tensor(zf_remote_t *r, s_peer_t *p, const char *device,
                                        const char *key, int64_t step_id, zf_tensor_t *tensor);

static zf_status_t s_peer_send(zf_remote_t *r, s_peer_t *p, const char *device, const char *key,
                               int64_t step_id, zf_tensor_t *tensor, bool is_dead)
{
    if (tensor && !is_dead && zf_tensor_memory_kind(tensor) == ZF_MEMORY_DEVICE)
        return s_send_device_tensor(r, p, device, key, step_id, tensor);
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

/* Closes step_id here; the IPC offers it still holds are released only
 * when release_held. */
static void s_close_step(zf_remote_t *r, int64_t step_id, const zf_status_t *status,
                         bool release_held)
{
    pthread_mutex_lock(&r->mu);
    zf_step_set_add(r->closed, step_id);
    s_held_t *held = release_held ? s_held_take_locked(r, 0, step_id) : NULL;
    pthread_mutex_unlock(&r->mu);
    s_held_free_all(&held); /* offers the receiver never answered */
    /* A lookup that raced with this and recreated the step sees it closed
     * afterwards and removes it again; the abort's callbacks run without
     * the lock. */
    zf_rendezvous_mgr_cleanup(r->mgr, step_id, status);
}

void zf_remote_cleanup_step(zf_remote_t *r, int64_t step_id, const zf_status_t *status)
{
    s_close_step(r, step_id, status, true);
}

void zf_remote_finish_step(zf_remote_t *r, int64_t step_id)
{
    s_close_step(r, step_id, NULL, false);
}

zf_remote_stats_t zf_remote_stats(zf_remote_t *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t held = r->n_held;
    pthread_mutex_unlock(&r->mu);
    return (zf_remote_stats_t){.delivered = atomic_load(&r->delivered),
                               .dropped = atomic_load(&r->dropped),
                               .malformed = atomic_load(&r->malformed),
                               .ipc_offered = atomic_load(&r->ipc_offered),
                               .ipc_released = atomic_load(&r->ipc_released),
                               .ipc_refused = atomic_load(&r->ipc_refused),
                               .ipc_received = atomic_load(&r->ipc_received),
                               .ipc_expired = atomic_load(&r->ipc_expired),
                               .ipc_held = held};
}

/* ---- CUDA IPC: offers held by the sender --------------------------------------- */

/* Unlinks the held offer with id (id != 0), or every offer of step_id
 * (id == 0), and returns them as a list. Caller holds r->mu. */
static s_held_t *s_held_take_locked(zf_remote_t *r, uint64_t id, int64_t step_id)
{
    s_held_t *taken = NULL, **at = &r->held;
    while (*at) {
        s_held_t *h = *at;
        if (id ? h->id != id : h->step_id != step_id) {
            at = &h->next;
            continue;
        }
        *at = h->next;
        h->next = taken;
        taken = h;
        r->n_held--;
    }
    return taken;
}

static void s_held_free_all(s_held_t **list)
{
    while (*list) {
        s_held_t *h = *list;
        *list = h->next;
        zf_tensor_unref(&h->tensor);
        free(h->device);
        free(h->key);
        free(h);
    }
}

static zf_status_t s_held_add(zf_remote_t *r, uint64_t id, const char *device, const char *key,
                              int64_t step_id, zf_tensor_t *tensor, int64_t held_at_ms)
{
    s_held_t *h = calloc(1, sizeof *h);
    if (!h || !(h->device = strdup(device)) || !(h->key = strdup(key))) {
        s_held_free_all(&h);
        return zf_out_of_memory("an IPC offer");
    }
    h->id = id;
    h->step_id = step_id;
    h->held_at_ms = held_at_ms;
    h->tensor = zf_tensor_ref(tensor);
    pthread_mutex_lock(&r->mu);
    /* A step already cleaned up here would never let go of it. */
    bool closed = s_closed_locked(r, step_id);
    if (!closed) {
        h->next = r->held;
        r->held = h;
        r->n_held++;
        if (held_at_ms < r->held_min_ms) r->held_min_ms = held_at_ms;
    }
    pthread_mutex_unlock(&r->mu);
    if (!closed) return ZF_STATUS_OK;
    s_held_free_all(&h);
    return zf_status_new(ZF_CANCELLED, "step %lld has ended here", (long long)step_id);
}

/* ---- CUDA IPC: the hold limit ---------------------------------------------------- */

int64_t zf_remote_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void zf_remote_set_ipc_hold_ms(zf_remote_t *r, int64_t hold_ms)
{
    pthread_mutex_lock(&r->mu);
    r->ipc_hold_ms = hold_ms > 0 ? hold_ms : ZF_REMOTE_IPC_HOLD_MS;
    pthread_mutex_unlock(&r->mu);
}

/* Unlinks the offers held for the hold limit or longer at now_ms and
 * returns them, oldest first; the age bound is recomputed from the rest.
 * Caller holds r->mu. */
static s_held_t *s_held_take_expired_locked(zf_remote_t *r, int64_t now_ms)
{
    s_held_t *taken = NULL, **at = &r->held;
    int64_t min = INT64_MAX;
    while (*at) {
        s_held_t *h = *at;
        if (now_ms - h->held_at_ms < r->ipc_hold_ms) {
            if (h->held_at_ms < min) min = h->held_at_ms;
            at = &h->next;
            continue;
        }
        *at = h->next;
        h->next = taken; /* the list is newest first, so this reverses it */
        taken = h;
        r->n_held--;
    }
    r->held_min_ms = min;
    return taken;
}

int zf_remote_expire(zf_remote_t *r, int64_t now_ms)
{
    pthread_mutex_lock(&r->mu);
    int64_t hold_ms = r->ipc_hold_ms;
    bool due = r->held && now_ms - r->held_min_ms >= hold_ms;
    s_held_t *expired = due ? s_held_take_expired_locked(r, now_ms) : NULL;
    pthread_mutex_unlock(&r->mu);
    if (!expired) return 0;
    int n = 0;
    for (const s_held_t *h = expired; h; h = h->next) n++;
    zf_log_warn("remote",
                "released %d CUDA IPC offer%s whose receiver did not answer within %lld ms "
                "(the oldest: '%s' of step %lld, offered to %s)",
                n, n == 1 ? "" : "s", (long long)hold_ms, expired->key, (long long)expired->step_id,
                expired->device);
    atomic_fetch_add(&r->ipc_expired, (uint_fast64_t)n);
    s_held_free_all(&expired);
    return n;
}

zf_status_t zf__remote_hold_offer(zf_remote_t *r, const char *device, const char *key,
                                  int64_t step_id, zf_tensor_t *tensor, int64_t held_at_ms,
                                  uint64_t *id)
{
    *id = atomic_fetch_add(&r->next_offer, 1) + 1;
    return s_held_add(r, *id, device, key, step_id, tensor, held_at_ms);
}

/* ---- CUDA IPC: sending ------------------------------------------------------------ */

static bool s_is_gpu(const char *device)
{
    zf_device_name_t dn;
    zf_status_t s = zf_device_name_parse(device, &dn);
    bool gpu = zf_ok(s) && dn.has_type && strcmp(dn.type, ZF_DEVICE_TYPE_GPU) == 0;
    zf_status_clear(&s);
    return gpu;
}

/* Offers tensor by IPC handle, holding it until the reply or the step's
 * end. *sent false: it could not be exported, send the bytes. */
static zf_status_t s_offer(zf_remote_t *r, s_peer_t *p, const char *device, const char *key,
                           int64_t step_id, zf_tensor_t *tensor, bool *sent)
{
    *sent = false;
    zf_gpu_ipc_handle_t gh;
    zf_status_t s = zf_gpu_ipc_export(tensor, &gh);
    if (!zf_ok(s)) {
        zf_log_debug("remote", "'%s' goes as bytes: %s", key, zf_status_msg(&s));
        zf_status_clear(&s);
        return ZF_STATUS_OK;
    }
    zf_tensor_frame_ipc_t ipc = {.offset = gh.offset, .nbytes = gh.nbytes, .device = gh.device_id};
    memcpy(ipc.handle, gh.handle, sizeof ipc.handle);
    ipc.id = atomic_fetch_add(&r->next_offer, 1) + 1;
    memcpy(ipc.host, r->host_id, sizeof ipc.host);
    zf_tensor_frame_header_t h;
    ZF_TRY(zf_tensor_frame_header_for_ipc(key, step_id, zf_tensor_dtype(tensor),
                                          zf_tensor_shape(tensor), &ipc, &h));
    /* Held before it leaves: the reply may come back at once. */
    ZF_TRY(s_held_add(r, ipc.id, device, key, step_id, tensor, zf_remote_now_ms()));
    pthread_mutex_lock(&p->mu);
    s = s_peer_socket_locked(r, p);
    if (zf_ok(s)) s = zf_tensor_frame_send_ipc(p->push, &h);
    pthread_mutex_unlock(&p->mu);
    if (!zf_ok(s)) {
        pthread_mutex_lock(&r->mu);
        s_held_t *back = s_held_take_locked(r, ipc.id, 0);
        pthread_mutex_unlock(&r->mu);
        s_held_free_all(&back);
        return s;
    }
    atomic_fetch_add(&r->ipc_offered, 1);
    *sent = true;
    return ZF_STATUS_OK;
}

/* The byte path for a device tensor: a host copy, pushed like any other. */
static zf_status_t s_send_host_copy(zf_remote_t *r, s_peer_t *p, const char *device,
                                    const char *key, int64_t step_id, zf_tensor_t *tensor)
{
    zf_tensor_t *host = NULL;
    zf_status_t s = zf_gpu_tensor_download(tensor, &host);
    if (!zf_ok(s)) return zf_status_prefix(s, "sending '%s' to %s", key, device);
    s = s_peer_send(r, p, device, key, step_id, host, false);
    zf_tensor_unref(&host);
    return s;
}

/* A GPU receiver that has not refused IPC gets an offer; everything else,
 * or a tensor that cannot be exported, goes as bytes. */
static zf_status_t s_send_device_tensor(zf_remote_t *r, s_peer_t *p, const char *device,
                                        const char *key, int64_t step_id, zf_tensor_t *tensor)
{
    bool sent = false;
    if (!atomic_load(&p->ipc_refused) && zf_tensor_nbytes(tensor) > 0 && s_is_gpu(device)) {
        zf_status_t s = s_offer(r, p, device, key, step_id, tensor, &sent);
        if (!zf_ok(s)) return zf_status_prefix(s, "sending '%s' to %s", key, device);
    }
    return sent ? ZF_STATUS_OK : s_send_host_copy(r, p, device, key, step_id, tensor);
}

/* A refusal: the receiver gets the bytes instead, and no more offers. */
static void s_resend_refused(zf_remote_t *r, s_held_t *h, const zf_tensor_frame_reply_t *reply)
{
    s_peer_t *p = s_peer_find(r, h->device);
    zf_log_info("remote", "%s refused CUDA IPC (%s); sending it bytes", h->device, reply->why);
    zf_status_t s = p ? ZF_STATUS_OK
                      : zf_status_new(ZF_UNAVAILABLE,
                                      "no rendezvous endpoint is known for device %s", h->device);
    if (p) {
        atomic_store(&p->ipc_refused, true);
        s = s_send_host_copy(r, p, h->device, h->key, h->step_id, h->tensor);
        s_peer_release(r, &p);
    }
    if (!zf_ok(s)) zf_log_warn("remote", "step %lld: %s", (long long)h->step_id, zf_status_msg(&s));
    zf_status_clear(&s);
}

static void s_on_reply(zf_remote_t *r, const zf_tensor_frame_reply_t *reply)
{
    pthread_mutex_lock(&r->mu);
    s_held_t *h = s_held_take_locked(r, reply->id, 0);
    pthread_mutex_unlock(&r->mu);
    if (!h) { /* its step ended here first */
        zf_log_debug("remote", "reply to IPC offer %llu, no longer held",
                     (unsigned long long)reply->id);
        return;
    }
    atomic_fetch_add(reply->accepted ? &r->ipc_released : &r->ipc_refused, 1);
    if (!reply->accepted) s_resend_refused(r, h, reply);
    s_held_free_all(&h);
}

/* ---- CUDA IPC: receiving ----------------------------------------------------------- */

/* The sending device: the key's first field. */
static bool s_key_src(const char *key, char *out, size_t cap)
{
    size_t n = strcspn(key, ";");
    if (key[n] != ';' || n == 0 || n >= cap) return false;
    memcpy(out, key, n);
    out[n] = '\0';
    return true;
}

/* Answers offer id of step_id on the push socket of src's peer. */
static void s_reply(zf_remote_t *r, const char *src, uint64_t id, int64_t step_id, bool accepted,
                    const char *why)
{
    zf_tensor_frame_reply_t reply = {.id = id, .step_id = step_id, .accepted = accepted};
    snprintf(reply.why, sizeof reply.why, "%s", why);
    s_peer_t *p = s_peer_find(r, src);
    zf_status_t s =
        p ? ZF_STATUS_OK
          : zf_status_new(ZF_UNAVAILABLE, "no rendezvous endpoint is known for %s", src);
    if (p) {
        pthread_mutex_lock(&p->mu);
        s = s_peer_socket_locked(r, p);
        if (zf_ok(s)) s = zf_tensor_frame_send_reply(p->push, &reply);
        pthread_mutex_unlock(&p->mu);
        s_peer_release(r, &p);
    }
    if (!zf_ok(s)) /* the sender lets the memory go at the step's end */
        zf_log_warn("remote", "cannot answer IPC offer %llu of step %lld: %s",
                    (unsigned long long)id, (long long)step_id, zf_status_msg(&s));
    zf_status_clear(&s);
}

static void s_acker_unref(s_acker_t **a_p)
{
    s_acker_t *a = *a_p;
    *a_p = NULL;
    if (!a || atomic_fetch_sub(&a->refs, 1) > 1) return;
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* The last reference to a received offer: the receiver is done with the
 * sender's memory (copied it, or never will), so the sender may drop it. */
static void s_offer_release(void *data, void *hint)
{
    (void)data;
    s_offer_t *o = hint;
    pthread_mutex_lock(&o->acker->mu);
    if (o->acker->r && !o->answered) s_reply(o->acker->r, o->src, o->id, o->step_id, true, "");
    pthread_mutex_unlock(&o->acker->mu);
    s_acker_unref(&o->acker);
    free(o);
}

/* Why this process cannot take an offer from host, or NULL. */
static const char *s_refusal(const zf_remote_t *r, const char *host, char *buf, size_t cap)
{
    if (strcmp(host, r->host_id) != 0) {
        snprintf(buf, cap, "the sender's host '%s' is not this host '%s'", host, r->host_id);
        return buf;
    }
    if (!zf_gpu_built_with_cuda()) return "this executor was built without CUDA";
    return NULL;
}

/* The rendezvous value for a received offer: a tensor of the offered
 * dtype and shape whose buffer, tagged with ZF_REMOTE_IPC_DEVICE_ID, holds
 * the handle; its release answers the sender. */
static zf_status_t s_offer_tensor(zf_remote_t *r, const zf_tensor_frame_t *f, const char *src,
                                  zf_tensor_t **out)
{
    s_offer_t *o = calloc(1, sizeof *o);
    if (!o) return zf_out_of_memory("an IPC offer");
    const zf_tensor_frame_ipc_t *ipc = &f->offer->ipc;
    *o = (s_offer_t){.magic = S_OFFER_MAGIC, .id = ipc->id, .step_id = f->step_id};
    memcpy(o->handle.handle, ipc->handle, sizeof o->handle.handle);
    o->handle.offset = ipc->offset;
    o->handle.nbytes = ipc->nbytes;
    o->handle.device_id = ipc->device;
    snprintf(o->src, sizeof o->src, "%s", src);
    atomic_fetch_add(&r->acker->refs, 1);
    o->acker = r->acker;
    zf_buffer_t *buf = NULL;
    zf_status_t s = zf_buffer_wrap_memory(o, (size_t)ipc->nbytes, ZF_MEMORY_DEVICE,
                                          ZF_REMOTE_IPC_DEVICE_ID, s_offer_release, o, &buf);
    if (!zf_ok(s)) {
        s_acker_unref(&o->acker);
        free(o);
        return s;
    }
    s = zf_tensor_from_buffer(f->offer->dtype, &f->offer->shape, buf, 0, out);
    if (!zf_ok(s)) o->answered = true; /* the caller refuses it */
    zf_buffer_unref(&buf);
    return s;
}

static void s_on_offer(zf_remote_t *r, zf_tensor_frame_t *f)
{
    char src[ZF_DEVICE_NAME_MAX + 1], why[2 * ZF_TENSOR_FRAME_MAX_HOST + 64];
    atomic_fetch_add(&r->ipc_received, 1);
    if (!s_key_src(f->key, src, sizeof src)) {
        atomic_fetch_add(&r->malformed, 1);
        zf_log_warn("remote", "IPC offer '%s' names no sending device; nobody to answer", f->key);
        return;
    }
    const char *refusal = s_refusal(r, f->offer->ipc.host, why, sizeof why);
    if (refusal) {
        s_reply(r, src, f->offer->ipc.id, f->step_id, false, refusal);
        return;
    }
    zf_status_t s = s_offer_tensor(r, f, src, &f->tensor);
    if (zf_ok(s)) {
        s_deliver(r, f); /* the rendezvous holds it; f's reference goes with f */
        return;
    }
    zf_log_warn("remote", "IPC offer '%s': %s", f->key, zf_status_msg(&s));
    s_reply(r, src, f->offer->ipc.id, f->step_id, false, zf_status_msg(&s));
    zf_status_clear(&s);
}

bool zf_remote_ipc_offer(const zf_tensor_t *t, zf_gpu_ipc_handle_t *h, const char **src_device)
{
    const zf_buffer_t *buf = t ? zf_tensor_buffer(t) : NULL;
    if (!buf || zf_buffer_memory_kind(buf) != ZF_MEMORY_DEVICE ||
        zf_buffer_device_id(buf) != ZF_REMOTE_IPC_DEVICE_ID)
        return false;
    const s_offer_t *o = zf_buffer_data(buf);
    if (!o || o->magic != S_OFFER_MAGIC) return false;
    if (h) *h = o->handle;
    if (src_device) *src_device = o->src;
    return true;
}

const char *zf_remote_host_id(const zf_remote_t *r)
{
    return r->host_id;
}

void zf_remote_set_host_id(zf_remote_t *r, const char *host_id)
{
    snprintf(r->host_id, sizeof r->host_id, "%s", host_id);
}
