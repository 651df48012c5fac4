/* The executor's network data plane: owns the PULL socket and its receiver
 * thread, the per-peer PUSH sockets and the set of recently closed steps.
 * CUDA IPC offers, sent and received, are in remote_ipc.c. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "common/log.h"
#include "common/strmap.h"
#include "common/tensor_frame.h"
#include "executor/rendezvous/remote.h"
#include "executor/rendezvous/remote_internal.h"
#include "executor/rendezvous/step_set.h"

#define S_POLL_MS 100 /* how often the receiver looks at its stop flag */

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

bool zf__remote_closed_locked(const zf_remote_t *r, int64_t step_id)
{
    return zf_step_set_has(r->closed, step_id);
}

static zf_status_t s_step_rendezvous(zf_remote_t *r, int64_t step_id, bool claim,
                                     zf_rendezvous_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    bool closed = zf__remote_closed_locked(r, step_id);
    pthread_mutex_unlock(&r->mu);
    if (closed) return ZF_STATUS_OK;
    /* Not under r->mu: the table may drop expired steps here, and freeing
     * an IPC offer they held answers its sender through r->mu. */
    zf_status_t s = claim ? zf_rendezvous_mgr_claim(r->mgr, step_id, out)
                          : zf_rendezvous_mgr_find(r->mgr, step_id, out);
    pthread_mutex_lock(&r->mu);
    closed = zf_ok(s) && zf__remote_closed_locked(r, step_id);
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

/* Whether step_id has ended here. */
static bool s_closed(zf_remote_t *r, int64_t step_id)
{
    pthread_mutex_lock(&r->mu);
    bool closed = zf__remote_closed_locked(r, step_id);
    pthread_mutex_unlock(&r->mu);
    return closed;
}

/* Hands f to its step through the table, which the caller found open
 * (closed false) or ended (true) just before; recheck: look again
 * afterwards (a step closed meanwhile loses what was (re)made here, the
 * value with it). Returns whether the step was found ended. */
static bool s_deliver(zf_remote_t *r, zf_tensor_frame_t *f, bool closed, bool recheck)
{
    zf_status_t s =
        closed ? ZF_STATUS_OK
               : zf_rendezvous_mgr_deliver(r->mgr, f->step_id, f->key, f->tensor, f->is_dead);
    if (!closed && zf_ok(s) && recheck) {
        closed = s_closed(r, f->step_id);
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
    return closed;
}

void zf__remote_deliver(zf_remote_t *r, zf_tensor_frame_t *f)
{
    s_deliver(r, f, s_closed(r, f->step_id), true);
}

/* A batch entry that failed its checks: counted and logged; its step, when
 * it could be read, is aborted here with the reason, naming the key, so
 * that the _Recv waiting for it fails at once instead of at the step's
 * timeout. */
static void s_refuse_entry(zf_remote_t *r, const zf_tensor_frame_entry_t *e)
{
    atomic_fetch_add(&r->malformed, 1);
    atomic_fetch_add(&r->batch_refused, 1);
    zf_status_t s =
        zf_status_new(ZF_INVALID_ARGUMENT, "tensor '%s' arrived malformed in a batch on %s: %s",
                      e->key ? e->key : "(its key is unreadable)", zf_socket_endpoint(r->pull),
                      zf_status_msg(&e->error));
    if (e->has_step) s = zf_status_prefix(s, "step %lld", (long long)e->step_id);
    zf_log_warn("remote", "%s", zf_status_msg(&s));
    zf_rendezvous_t *rv = NULL;
    zf_status_t fs = e->has_step ? zf_remote_step_rendezvous(r, e->step_id, &rv) : ZF_STATUS_OK;
    if (rv) zf_rendezvous_start_abort(rv, &s);
    zf_rendezvous_unref(&rv);
    zf_status_clear(&fs);
    zf_status_clear(&s);
}

/* A run of n entries of one step, sound, into a claimed rendezvous rv:
 * put together (their references moved in), a chunk at a time. Returns
 * how many were put; the first refusal is logged. */
static size_t s_put_run(zf_rendezvous_t *rv, zf_tensor_frame_entry_t *e, size_t n)
{
    zf_rendezvous_value_t v[ZF_RENDEZVOUS_PUT_CHUNK]; /* a chunk put_all takes at once */
    size_t put = 0;
    zf_status_t s = ZF_STATUS_OK;
    while (put < n && zf_ok(s)) {
        size_t chunk = n - put < ZF_RENDEZVOUS_PUT_CHUNK ? n - put : ZF_RENDEZVOUS_PUT_CHUNK;
        for (size_t k = 0; k < chunk; k++) {
            zf_tensor_frame_entry_t *x = &e[put + k];
            v[k] = (zf_rendezvous_value_t){x->key, x->key_len, x->tensor, x->is_dead};
        }
        size_t done = zf_rendezvous_put_all(rv, v, chunk, &s);
        for (size_t k = 0; k < chunk; k++) e[put + k].tensor = v[k].tensor; /* NULL when taken */
        put += done;
    }
    if (!zf_ok(s))
        zf_log_debug("remote", "dropped %zu tensors of step %lld from '%s' on: %s", n - put,
                     (long long)e[0].step_id, e[put].key, zf_status_msg(&s));
    zf_status_clear(&s);
    return put;
}

/* A run of n sound entries of one step, handed over as if each had come
 * alone. Whether the step has ended is looked up before the first and
 * after the last: a step closed during the run drops everything (re)made
 * here for it then, as after a single tensor. A claimed step's
 * rendezvous is looked up once and takes the run in one go. */
static void s_deliver_run(zf_remote_t *r, zf_tensor_frame_entry_t *e, size_t n)
{
    int64_t step = e[0].step_id;
    bool closed = s_closed(r, step);
    zf_rendezvous_t *rv = NULL;
    if (closed || !zf_rendezvous_mgr_find_claimed(r->mgr, step, &rv)) {
        for (size_t k = 0; k < n; k++) {
            /* borrowed from the entry: the rendezvous takes its own reference */
            zf_tensor_frame_t f = {
                .key = e[k].key, .step_id = step, .is_dead = e[k].is_dead, .tensor = e[k].tensor};
            closed = s_deliver(r, &f, closed, k + 1 == n);
        }
        return;
    }
    size_t put = s_put_run(rv, e, n);
    zf_rendezvous_unref(&rv);
    if (put && s_closed(r, step)) {
        zf_rendezvous_mgr_cleanup(r->mgr, step, NULL);
        zf_log_debug("remote", "dropped %zu tensors of step %lld: the step has ended here", put,
                     (long long)step);
        put = 0;
    }
    atomic_fetch_add(&r->delivered, (uint_fast64_t)put);
    atomic_fetch_add(&r->dropped, (uint_fast64_t)(n - put));
}

/* A batch: every entry goes to its step as if it had come alone, a run of
 * entries of one step at a time; a refused entry alone aborts its step. */
static void s_on_batch(zf_remote_t *r, zf_tensor_frame_batch_t *b)
{
    atomic_fetch_add(&r->batches_received, 1);
    atomic_fetch_add(&r->batch_tensors_received, (uint_fast64_t)b->n);
    size_t i = 0;
    while (i < b->n) {
        zf_tensor_frame_entry_t *e = &b->entries[i];
        if (!zf_ok(e->error)) {
            s_refuse_entry(r, e);
            i++;
            continue;
        }
        size_t end = i + 1;
        while (end < b->n && zf_ok(b->entries[end].error) && b->entries[end].step_id == e->step_id)
            end++;
        s_deliver_run(r, e, end - i);
        i = end;
    }
}

/* Receives and handles one message, waiting up to timeout_ms; false when
 * none came (or the socket's context is closing). */
static bool s_receive_one(zf_remote_t *r, int timeout_ms)
{
    zf_tensor_frame_t f = {0};
    zf_status_t s = zf_tensor_frame_recv(r->pull, timeout_ms, &f);
    bool got = zf_ok(s) || (s.code != ZF_CANCELLED && s.code != ZF_DEADLINE_EXCEEDED);
    if (zf_ok(s) && f.batch) {
        s_on_batch(r, f.batch);
    } else if (zf_ok(s) && f.reply) {
        zf__remote_on_reply(r, f.reply);
    } else if (zf_ok(s) && f.offer && f.offer->is_shm) {
        zf__remote_shm_on_offer(r, &f);
    } else if (zf_ok(s) && f.offer) {
        zf__remote_on_offer(r, &f);
    } else if (zf_ok(s)) {
        zf__remote_deliver(r, &f);
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
    (void)pthread_setname_np(pthread_self(), "zf-rendezvous"); /* as ps and perf show it */
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
static zf__remote_peer_t *s_peer_new(const char *endpoint, uint64_t incarnation)
{
    zf__remote_peer_t *p = calloc(1, sizeof *p);
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
static void s_peer_unref_locked(zf__remote_peer_t **p_p)
{
    zf__remote_peer_t *p = *p_p;
    *p_p = NULL;
    if (!p || --p->refs > 0) return;
    zf_socket_destroy(&p->push);
    pthread_mutex_destroy(&p->mu);
    free(p->endpoint);
    free(p);
}

zf__remote_peer_t *zf__remote_peer_find(zf_remote_t *r, const char *device)
{
    pthread_mutex_lock(&r->mu);
    uintptr_t v = 0;
    zf__remote_peer_t *p = zf_strmap_get(r->peers, device, &v) ? (zf__remote_peer_t *)v : NULL;
    if (p) p->refs++;
    pthread_mutex_unlock(&r->mu);
    return p;
}

void zf__remote_peer_release(zf_remote_t *r, zf__remote_peer_t **p_p)
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
    zf__remote_shm_init(r);
    r->ctx = ctx;
    r->mgr = mgr;
    r->ipc_hold_ms = ZF_REMOTE_IPC_HOLD_MS;
    r->batch_max_bytes = ZF_REMOTE_BATCH_MAX_BYTES;
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
    /* only executors push tensors: other keys never finish the handshake */
    if (zf_ok(s)) s = zf_socket_secure_server(r->pull, ZF_ROLE_EXECUTOR);
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
        zf__remote_acker_unref(&r->acker);
    }
    zf__remote_held_free_all(&r->held);
    zf__remote_shm_destroy(r);
    zf_socket_destroy(&r->pull);
    size_t iter = 0;
    uintptr_t v = 0;
    while (r->peers && zf_strmap_next(r->peers, &iter, NULL, NULL, &v)) {
        zf__remote_peer_t *p = (zf__remote_peer_t *)v;
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

static zf__remote_peer_t *s_outbox_peer(zf_remote_t *r, const char *device);

/* The rendezvous hook: devices without a known peer stay local. During a
 * send batch, a device this thread already holds tensors for is sent to
 * through the same peer, without looking it up again. */
static zf_status_t s_hook(void *arg, int64_t step_id, const char *key, const char *dst_device,
                          zf_tensor_t *tensor, bool is_dead, bool *sent)
{
    zf_remote_t *r = arg;
    zf__remote_peer_t *held = s_outbox_peer(r, dst_device);
    if (held) {
        *sent = true;
        return zf__remote_peer_send(r, held, dst_device, key, step_id, tensor, is_dead);
    }
    zf__remote_peer_t *p = zf__remote_peer_find(r, dst_device);
    *sent = p != NULL;
    if (!p) return ZF_STATUS_OK;
    zf_status_t s = zf__remote_peer_send(r, p, dst_device, key, step_id, tensor, is_dead);
    zf__remote_peer_release(r, &p);
    return s;
}

zf_status_t zf_remote_attach(zf_remote_t *r, const char *local_device)
{
    return zf_rendezvous_mgr_set_remote(r->mgr, local_device, s_hook, r);
}

/* Whether the peer recorded as p can stay for (endpoint, incarnation): same
 * endpoint, and no two different known incarnations. */
static bool s_peer_same(const zf__remote_peer_t *p, const char *endpoint, uint64_t incarnation)
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
    zf__remote_peer_t *fresh = s_peer_new(endpoint, incarnation);
    if (!fresh) return zf_out_of_memory("remote peer");
    pthread_mutex_lock(&r->mu);
    uintptr_t v = 0;
    zf__remote_peer_t *old = zf_strmap_get(r->peers, device, &v) ? (zf__remote_peer_t *)v : NULL;
    bool moved = !old || !s_peer_same(old, endpoint, incarnation);
    bool learnt = !moved && incarnation && old->incarnation != incarnation;
    int rc = moved ? zf_strmap_put(r->peers, device, (uintptr_t)fresh) : 0;
    if (moved && rc == 0) {
        if (old) atomic_store(&old->replaced, true); /* for sends that hold it: look again */
        s_peer_unref_locked(&old);                   /* closed once no send uses it */
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
    return !incarnation || ((zf__remote_peer_t *)v)->incarnation == incarnation;
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
    uint64_t inc = zf_strmap_get(r->peers, device, &v) ? ((zf__remote_peer_t *)v)->incarnation : 0;
    pthread_mutex_unlock(&r->mu);
    return inc;
}

zf_status_t zf__remote_peer_socket_locked(zf_remote_t *r, zf__remote_peer_t *p)
{
    if (p->push) return ZF_STATUS_OK;
    zf_socket_t *s = NULL;
    ZF_TRY(zf_socket_new(r->ctx, ZF_SOCKET_PUSH, &s));
    zf_status_t st = zf_socket_set_send_timeout(s, ZF_REMOTE_SEND_TIMEOUT_MS);
    if (zf_ok(st)) st = zf_socket_secure_client(s, ZF_ROLE_EXECUTOR);
    if (zf_ok(st)) st = zf_socket_connect(s, p->endpoint);
    if (!zf_ok(st)) {
        zf_socket_destroy(&s);
        return st;
    }
    p->push = s;
    return ZF_STATUS_OK;
}

/* ---- batches ------------------------------------------------------------------ */

/* Small tensors held back during this thread's send batch
 * (zf_rendezvous_batch_begin()) for one peer, pushed as one message when
 * the batch ends or fills. */
typedef struct s_outbox {
    struct s_outbox *next;
    zf_remote_t *r;
    zf__remote_peer_t *p; /* a reference */
    char *device;
    char *first_key; /* for errors */
    int64_t *steps;  /* the distinct steps of the entries (usually one) */
    uint32_t sent;   /* pieces sent during this batch */
    size_t n_steps, cap_steps;
    zf_tensor_frame_batch_out_t b;
} s_outbox_t;

static _Thread_local s_outbox_t *s_outboxes;

static void s_outbox_free(s_outbox_t *o)
{
    zf__remote_peer_release(o->r, &o->p);
    zf_tensor_frame_batch_out_clear(&o->b);
    free(o->device);
    free(o->first_key);
    free(o->steps);
    free(o);
}

/* Pushes o's entries to its peer; a failure aborts their steps here with
 * the reason (their _Sends returned already). Empties o. */
static void s_outbox_send(s_outbox_t *o)
{
    zf_remote_t *r = o->r;
    uint32_t n = o->b.n;
    if (n == 0) return;
    pthread_mutex_lock(&o->p->mu);
    zf_status_t s = zf__remote_peer_socket_locked(r, o->p);
    if (zf_ok(s)) s = zf_tensor_frame_batch_out_send(o->p->push, &o->b);
    pthread_mutex_unlock(&o->p->mu);
    zf_tensor_frame_batch_out_clear(&o->b); /* when not sent */
    if (zf_ok(s)) {
        atomic_fetch_add(&r->batches_sent, 1);
        atomic_fetch_add(&r->batch_tensors_sent, n);
        atomic_fetch_add(&r->bytes_sent, n);
    } else {
        s = zf_status_prefix(s, "sending %u tensors to %s in one batch ('%s' first)", n, o->device,
                             o->first_key ? o->first_key : "?");
        zf_log_warn("remote", "%s", zf_status_msg(&s));
        for (size_t i = 0; i < o->n_steps; i++) {
            zf_rendezvous_t *rv = NULL;
            zf_status_t fs = zf_remote_step_rendezvous(r, o->steps[i], &rv);
            if (rv) zf_rendezvous_start_abort(rv, &s);
            zf_rendezvous_unref(&rv);
            zf_status_clear(&fs);
        }
    }
    zf_status_clear(&s);
    o->sent++;
    o->n_steps = 0;
    free(o->first_key);
    o->first_key = NULL;
}

/* Runs when this thread's batch ends: everything held back leaves. */
static void s_outboxes_flush(void *arg)
{
    (void)arg;
    while (s_outboxes) {
        s_outbox_t *o = s_outboxes;
        s_outboxes = o->next;
        s_outbox_send(o);
        s_outbox_free(o);
    }
}

/* The peer of this thread's outbox for r and device (it holds a
 * reference) while the device has not moved on to another, else NULL. */
static zf__remote_peer_t *s_outbox_peer(zf_remote_t *r, const char *device)
{
    for (s_outbox_t *o = s_outboxes; o; o = o->next)
        if (o->r == r && strcmp(o->device, device) == 0 && !atomic_load(&o->p->replaced))
            return o->p;
    return NULL;
}

/* This thread's outbox for (r, p), made when missing; NULL when out of
 * memory. */
static s_outbox_t *s_outbox_for(zf_remote_t *r, zf__remote_peer_t *p, const char *device)
{
    for (s_outbox_t *o = s_outboxes; o; o = o->next)
        if (o->r == r && o->p == p) return o;
    s_outbox_t *o = calloc(1, sizeof *o);
    if (!o || !(o->device = strdup(device))) {
        free(o);
        return NULL;
    }
    pthread_mutex_lock(&r->mu);
    p->refs++;
    pthread_mutex_unlock(&r->mu);
    o->r = r;
    o->p = p;
    o->next = s_outboxes;
    s_outboxes = o;
    return o;
}

/* Records step_id among o's steps. */
static bool s_outbox_step(s_outbox_t *o, int64_t step_id)
{
    for (size_t i = 0; i < o->n_steps; i++)
        if (o->steps[i] == step_id) return true;
    if (o->n_steps == o->cap_steps) {
        size_t cap = o->cap_steps ? 2 * o->cap_steps : 4;
        int64_t *steps = realloc(o->steps, cap * sizeof *steps);
        if (!steps) return false;
        o->steps = steps;
        o->cap_steps = cap;
    }
    o->steps[o->n_steps++] = step_id;
    return true;
}

/* A batch leaves once it holds this many tensors, or this many bytes of
 * payloads or of headers: well within what a receiver takes
 * (ZF_TENSOR_FRAME_MAX_BATCH, ZF_TENSOR_FRAME_MAX_BATCH_HEADER), and the
 * received tensors view the batch's frame, so one kept for long keeps at
 * most this much (plus its block of views) alive. A long run of sends leaves in
 * pieces, so the receiver unpacks and delivers one while the sender
 * writes the next: the first pieces small (32 tensors, then 64, 128),
 * so that the receiver starts early, then 256 each. */
#define S_BATCH_FIRST_TENSORS 32
#define S_BATCH_MAX_TENSORS   256
#define S_BATCH_MAX_BYTES     ((size_t)256 << 10)

/* How many tensors o's next piece holds. */
static uint32_t s_piece_tensors(const s_outbox_t *o)
{
    return o->sent < 3 ? (uint32_t)S_BATCH_FIRST_TENSORS << o->sent : S_BATCH_MAX_TENSORS;
}

/* Holds a small host tensor (or a dead one) back for this thread's open
 * batch; *held false: send it now (no batch open, too big, bound for the
 * arena, or out of memory). */
static zf_status_t s_hold_back(zf_remote_t *r, zf__remote_peer_t *p, const char *device,
                               const char *key, int64_t step_id, zf_tensor_t *tensor, bool is_dead,
                               bool *held)
{
    *held = false;
    if (!r->batch_max_bytes || !zf_rendezvous_batch_is_open()) return ZF_STATUS_OK;
    if (tensor && !is_dead &&
        (zf_tensor_memory_kind(tensor) == ZF_MEMORY_DEVICE ||
         (zf_tensor_dtype(tensor) != ZF_STRING && zf_tensor_nbytes(tensor) > r->batch_max_bytes) ||
         zf__remote_shm_qualifies(r, p, tensor)))
        return ZF_STATUS_OK;
    if (!zf_rendezvous_batch_defer(s_outboxes_flush, NULL)) return ZF_STATUS_OK;
    s_outbox_t *o = s_outbox_for(r, p, device);
    if (!o) return ZF_STATUS_OK;
    zf_status_t s = zf_tensor_frame_batch_out_add(&o->b, key, step_id, tensor, is_dead,
                                                  r->batch_max_bytes, held);
    /* for a failure's report only: out of memory here just makes it vaguer */
    if (*held) (void)s_outbox_step(o, step_id);
    if (*held && !o->first_key) o->first_key = strdup(key);
    if (*held && (o->b.n >= s_piece_tensors(o) || o->b.payload_len >= S_BATCH_MAX_BYTES ||
                  o->b.head_len >= 4 * S_BATCH_MAX_BYTES))
        s_outbox_send(o);
    return s;
}

zf_status_t zf__remote_peer_send(zf_remote_t *r, zf__remote_peer_t *p, const char *device,
                                 const char *key, int64_t step_id, zf_tensor_t *tensor,
                                 bool is_dead)
{
    if (tensor && !is_dead && zf_tensor_memory_kind(tensor) == ZF_MEMORY_DEVICE)
        return zf__remote_send_device_tensor(r, p, device, key, step_id, tensor);
    bool held = false;
    zf_status_t s = s_hold_back(r, p, device, key, step_id, tensor, is_dead, &held);
    if (!zf_ok(s)) return zf_status_prefix(s, "sending '%s' to %s", key, device);
    if (held) return s;
    if (tensor && !is_dead) {
        bool sent = false;
        s = zf__remote_shm_send(r, p, device, key, step_id, tensor, &sent);
        if (!zf_ok(s) || sent) return zf_status_prefix(s, "sending '%s' to %s", key, device);
    }
    pthread_mutex_lock(&p->mu);
    s = zf__remote_peer_socket_locked(r, p);
    if (zf_ok(s)) s = zf_tensor_frame_send(p->push, key, step_id, tensor, is_dead);
    pthread_mutex_unlock(&p->mu);
    if (zf_ok(s)) atomic_fetch_add(&r->bytes_sent, 1);
    return zf_status_prefix(s, "sending '%s' to %s", key, device);
}

zf_status_t zf_remote_send(zf_remote_t *r, const char *device, const char *key, int64_t step_id,
                           zf_tensor_t *tensor, bool is_dead)
{
    zf__remote_peer_t *p = zf__remote_peer_find(r, device);
    if (!p)
        return zf_status_new(ZF_UNAVAILABLE, "no rendezvous endpoint is known for device %s",
                             device);
    zf_status_t s = zf__remote_peer_send(r, p, device, key, step_id, tensor, is_dead);
    zf__remote_peer_release(r, &p);
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
    zf__remote_held_t *held = release_held ? zf__remote_held_take_locked(r, 0, step_id) : NULL;
    pthread_mutex_unlock(&r->mu);
    zf__remote_held_free_all(&held); /* offers the receiver never answered */
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

void zf_remote_set_batch(zf_remote_t *r, size_t max_bytes)
{
    r->batch_max_bytes = max_bytes;
}

zf_remote_stats_t zf_remote_stats(zf_remote_t *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t held = r->n_held;
    pthread_mutex_unlock(&r->mu);
    return (zf_remote_stats_t){.delivered = atomic_load(&r->delivered),
                               .dropped = atomic_load(&r->dropped),
                               .malformed = atomic_load(&r->malformed),
                               .batches_sent = atomic_load(&r->batches_sent),
                               .batch_tensors_sent = atomic_load(&r->batch_tensors_sent),
                               .batches_received = atomic_load(&r->batches_received),
                               .batch_tensors_received = atomic_load(&r->batch_tensors_received),
                               .batch_refused = atomic_load(&r->batch_refused),
                               .ipc_offered = atomic_load(&r->ipc_offered),
                               .ipc_released = atomic_load(&r->ipc_released),
                               .ipc_refused = atomic_load(&r->ipc_refused),
                               .ipc_received = atomic_load(&r->ipc_received),
                               .ipc_expired = atomic_load(&r->ipc_expired),
                               .ipc_held = held};
}
