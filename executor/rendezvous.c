/* The local rendezvous: per-key FIFOs of values or waiting recvs, a sticky
 * abort status, and the per-process step -> rendezvous table. Owns queued
 * values until a recv takes them. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/strmap.h"
#include "executor/rendezvous.h"
#include "executor/step_set.h"

/* A queued value (done == NULL) or a waiting recv. A key's queue holds one
 * kind at a time: values wait only while no recv does, and vice versa. */
typedef struct s_item {
    struct s_item *next;
    zf_tensor_t *tensor;
    bool is_dead;
    zf_rendezvous_recv_fn done;
    void *arg;
    uint64_t token;
} s_item_t;

typedef struct {
    s_item_t *head, *tail;
} s_queue_t;

struct zf_rendezvous {
    atomic_int refs;
    int64_t step_id;
    pthread_mutex_t mu;
    zf_strmap_t *queues; /* key -> s_queue_t *, keys copied */
    zf_status_t abort;   /* sticky; OK until aborted */
    uint64_t next_token;
    size_t values, recvs;
    char *local_device; /* remote-send hook; NULL when none */
    zf_rendezvous_remote_fn remote;
    void *remote_arg;
};

zf_status_t zf_rendezvous_new(int64_t step_id, zf_rendezvous_t **out)
{
    *out = NULL;
    zf_rendezvous_t *r = calloc(1, sizeof *r);
    if (!r || !(r->queues = zf_strmap_new(16, ZF_STRMAP_COPY_KEYS))) {
        free(r);
        return zf_out_of_memory("rendezvous");
    }
    atomic_init(&r->refs, 1);
    r->step_id = step_id;
    r->next_token = 1;
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return ZF_STATUS_OK;
}

zf_rendezvous_t *zf_rendezvous_ref(zf_rendezvous_t *r)
{
    atomic_fetch_add(&r->refs, 1);
    return r;
}

int64_t zf_rendezvous_step_id(const zf_rendezvous_t *r)
{
    return r->step_id;
}

static zf_status_t s_status_copy(const zf_status_t *s)
{
    if (zf_ok(*s)) return ZF_STATUS_OK;
    return zf_status_new(s->code, "%s", zf_status_msg(s));
}

/* Fires and frees a chain of waiters (linked by next) with copies of *s. */
static void s_fire_waiters(s_item_t *w, const zf_status_t *s)
{
    while (w) {
        s_item_t *next = w->next;
        w->done(s_status_copy(s), NULL, false, w->arg);
        free(w);
        w = next;
    }
}

/* Detaches every queue's items: values go to *values, waiters to *waiters
 * (both chains linked by next). Caller holds the lock. */
static void s_drain_locked(zf_rendezvous_t *r, s_item_t **values, s_item_t **waiters)
{
    size_t iter = 0;
    uintptr_t v;
    while (zf_strmap_next(r->queues, &iter, NULL, NULL, &v)) {
        s_queue_t *q = (s_queue_t *)v;
        for (s_item_t *it = q->head, *next; it; it = next) {
            next = it->next;
            s_item_t **chain = it->done ? waiters : values;
            it->next = *chain;
            *chain = it;
        }
        q->head = q->tail = NULL;
    }
    r->values = r->recvs = 0;
}

static void s_free_values(s_item_t *it)
{
    while (it) {
        s_item_t *next = it->next;
        zf_tensor_unref(&it->tensor);
        free(it);
        it = next;
    }
}

void zf_rendezvous_unref(zf_rendezvous_t **r_p)
{
    if (!r_p || !*r_p) return;
    zf_rendezvous_t *r = *r_p;
    *r_p = NULL;
    if (atomic_fetch_sub(&r->refs, 1) != 1) return;
    s_item_t *values = NULL, *waiters = NULL;
    s_drain_locked(r, &values, &waiters); /* last reference: nobody else can lock */
    s_free_values(values);
    zf_status_t cancelled = zf_status_new(ZF_CANCELLED,
                                          "rendezvous of step %lld freed while a "
                                          "recv was pending",
                                          (long long)r->step_id);
    s_fire_waiters(waiters, &cancelled);
    zf_status_clear(&cancelled);
    size_t iter = 0;
    uintptr_t v;
    while (zf_strmap_next(r->queues, &iter, NULL, NULL, &v)) free((void *)v);
    zf_strmap_destroy(&r->queues);
    zf_status_clear(&r->abort);
    free(r->local_device);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* The key's queue, created on first use. Caller holds the lock. */
static s_queue_t *s_queue_locked(zf_rendezvous_t *r, const char *key)
{
    uintptr_t v;
    size_t len = strlen(key);
    if (zf_strmap_get_n(r->queues, key, len, &v)) return (s_queue_t *)v;
    s_queue_t *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    if (zf_strmap_insert_n(r->queues, key, len, (uintptr_t)q, NULL) != 0) {
        free(q);
        return NULL;
    }
    return q;
}

static void s_push(s_queue_t *q, s_item_t *it)
{
    it->next = NULL;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
}

static s_item_t *s_pop(s_queue_t *q)
{
    s_item_t *it = q->head;
    q->head = it->next;
    if (!q->head) q->tail = NULL;
    return it;
}

bool zf_rendezvous_key_dst_device(const char *key, const char **dst, size_t *len)
{
    *dst = NULL;
    *len = 0;
    const char *a = strchr(key, ';');
    const char *b = a ? strchr(a + 1, ';') : NULL;
    if (!b) return false;
    const char *e = strchr(b + 1, ';');
    *dst = b + 1;
    *len = e ? (size_t)(e - *dst) : strlen(*dst);
    return true;
}

zf_status_t zf_rendezvous_set_remote(zf_rendezvous_t *r, const char *local_device,
                                     zf_rendezvous_remote_fn fn, void *arg)
{
    char *copy = fn ? strdup(local_device ? local_device : "") : NULL;
    if (fn && !copy) return zf_out_of_memory("rendezvous remote hook");
    pthread_mutex_lock(&r->mu);
    free(r->local_device);
    r->local_device = copy;
    r->remote = fn;
    r->remote_arg = arg;
    pthread_mutex_unlock(&r->mu);
    return ZF_STATUS_OK;
}

/* Sends through the remote hook when key's destination is another device
 * that the hook knows; *handled says whether it did. Takes the lock only to
 * read the hook and the abort status. */
static zf_status_t s_send_remote(zf_rendezvous_t *r, const char *key, zf_tensor_t *tensor,
                                 bool is_dead, bool *handled)
{
    *handled = false;
    const char *dst = NULL;
    size_t len = 0;
    if (!zf_rendezvous_key_dst_device(key, &dst, &len)) return ZF_STATUS_OK;
    char device[512];
    if (len >= sizeof device) return ZF_STATUS_OK; /* no such device: stays local */
    pthread_mutex_lock(&r->mu);
    zf_rendezvous_remote_fn fn = r->remote;
    void *arg = r->remote_arg;
    bool local = !fn || (strlen(r->local_device) == len && memcmp(dst, r->local_device, len) == 0);
    zf_status_t s = local ? ZF_STATUS_OK : s_status_copy(&r->abort);
    pthread_mutex_unlock(&r->mu);
    if (local) return ZF_STATUS_OK;
    if (!zf_ok(s)) {
        *handled = true;
        return s;
    }
    memcpy(device, dst, len);
    device[len] = '\0';
    return fn(arg, r->step_id, key, device, tensor, is_dead, handled);
}

zf_status_t zf_rendezvous_send(zf_rendezvous_t *r, const char *key, zf_tensor_t *tensor,
                               bool is_dead)
{
    if (!tensor && !is_dead)
        return zf_invalid_argument("rendezvous send of '%s' without a tensor", key);
    bool remote = false;
    zf_status_t rs = s_send_remote(r, key, tensor, is_dead, &remote);
    if (remote || !zf_ok(rs)) return rs;
    pthread_mutex_lock(&r->mu);
    if (!zf_ok(r->abort)) {
        zf_status_t s = s_status_copy(&r->abort);
        pthread_mutex_unlock(&r->mu);
        return s;
    }
    s_queue_t *q = s_queue_locked(r, key);
    s_item_t *it = NULL;
    if (q && q->head && q->head->done) { /* a recv is waiting: hand it over */
        it = s_pop(q);
        r->recvs--;
        pthread_mutex_unlock(&r->mu);
        it->done(ZF_STATUS_OK, tensor ? zf_tensor_ref(tensor) : NULL, is_dead, it->arg);
        free(it);
        return ZF_STATUS_OK;
    }
    if (q) it = calloc(1, sizeof *it);
    if (!it) {
        pthread_mutex_unlock(&r->mu);
        return zf_out_of_memory("rendezvous send");
    }
    it->tensor = tensor ? zf_tensor_ref(tensor) : NULL;
    it->is_dead = is_dead;
    s_push(q, it);
    r->values++;
    pthread_mutex_unlock(&r->mu);
    return ZF_STATUS_OK;
}

zf_status_t zf_rendezvous_recv_async(zf_rendezvous_t *r, const char *key,
                                     zf_rendezvous_recv_fn done, void *arg, uint64_t *token)
{
    if (token) *token = 0;
    pthread_mutex_lock(&r->mu);
    if (!zf_ok(r->abort)) {
        zf_status_t s = s_status_copy(&r->abort);
        pthread_mutex_unlock(&r->mu);
        return s;
    }
    s_queue_t *q = s_queue_locked(r, key);
    s_item_t *it = NULL;
    uint64_t tok = r->next_token++;
    if (token) *token = tok;
    if (q && q->head && !q->head->done) { /* a value is waiting: take it */
        it = s_pop(q);
        r->values--;
        pthread_mutex_unlock(&r->mu);
        done(ZF_STATUS_OK, it->tensor, it->is_dead, arg);
        free(it);
        return ZF_STATUS_OK;
    }
    if (q) it = calloc(1, sizeof *it);
    if (!it) {
        pthread_mutex_unlock(&r->mu);
        return zf_out_of_memory("rendezvous recv");
    }
    it->done = done;
    it->arg = arg;
    it->token = tok;
    s_push(q, it);
    r->recvs++;
    pthread_mutex_unlock(&r->mu);
    return ZF_STATUS_OK;
}

bool zf_rendezvous_cancel_recv(zf_rendezvous_t *r, const char *key, uint64_t token)
{
    pthread_mutex_lock(&r->mu);
    uintptr_t v;
    s_item_t *found = NULL;
    if (zf_strmap_get(r->queues, key, &v)) {
        s_queue_t *q = (s_queue_t *)v;
        for (s_item_t *prev = NULL, *it = q->head; it; prev = it, it = it->next) {
            if (!it->done || it->token != token) continue;
            if (prev)
                prev->next = it->next;
            else
                q->head = it->next;
            if (q->tail == it) q->tail = prev;
            found = it;
            r->recvs--;
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (!found) return false;
    found->done(zf_status_new(ZF_CANCELLED, "RecvAsync is cancelled."), NULL, false, found->arg);
    free(found);
    return true;
}

void zf_rendezvous_start_abort(zf_rendezvous_t *r, const zf_status_t *status)
{
    zf_status_t s = zf_ok(*status) ? zf_internal("rendezvous aborted with an OK status")
                                   : s_status_copy(status);
    pthread_mutex_lock(&r->mu);
    if (!zf_ok(r->abort)) {
        pthread_mutex_unlock(&r->mu);
        zf_status_clear(&s);
        return;
    }
    r->abort = s;
    s_item_t *values = NULL, *waiters = NULL;
    s_drain_locked(r, &values, &waiters);
    pthread_mutex_unlock(&r->mu);
    /* r->abort never changes again, so reading it unlocked is safe. */
    s_free_values(values);
    s_fire_waiters(waiters, &r->abort);
}

zf_status_t zf_rendezvous_status(zf_rendezvous_t *r)
{
    pthread_mutex_lock(&r->mu);
    zf_status_t s = s_status_copy(&r->abort);
    pthread_mutex_unlock(&r->mu);
    return s;
}

void zf_rendezvous_pending(zf_rendezvous_t *r, size_t *values, size_t *recvs)
{
    pthread_mutex_lock(&r->mu);
    if (values) *values = r->values;
    if (recvs) *recvs = r->recvs;
    pthread_mutex_unlock(&r->mu);
}

/* ---- blocking recv ------------------------------------------------------ */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool fired;
    zf_status_t status;
    zf_tensor_t *tensor;
    bool is_dead;
} s_waiter_t;

static void s_waiter_done(zf_status_t status, zf_tensor_t *tensor, bool is_dead, void *arg)
{
    s_waiter_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->status = status;
    w->tensor = tensor;
    w->is_dead = is_dead;
    w->fired = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Waits until w fires or the deadline passes; true when it fired. */
static bool s_waiter_wait(s_waiter_t *w, int64_t timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    if (timeout_ms >= 0) {
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (timeout_ms % 1000) * 1000000;
        if (deadline.tv_nsec >= 1000000000) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000;
        }
    }
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (!w->fired && rc != ETIMEDOUT)
        rc = timeout_ms < 0 ? pthread_cond_wait(&w->cv, &w->mu)
                            : pthread_cond_timedwait(&w->cv, &w->mu, &deadline);
    bool fired = w->fired;
    pthread_mutex_unlock(&w->mu);
    return fired;
}

zf_status_t zf_rendezvous_recv(zf_rendezvous_t *r, const char *key, int64_t timeout_ms,
                               zf_tensor_t **out, bool *is_dead)
{
    *out = NULL;
    if (is_dead) *is_dead = false;
    s_waiter_t w = {.fired = false, .status = ZF_STATUS_OK, .tensor = NULL, .is_dead = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    uint64_t token = 0;
    zf_status_t s = zf_rendezvous_recv_async(r, key, s_waiter_done, &w, &token);
    if (zf_ok(s) && !s_waiter_wait(&w, timeout_ms)) {
        if (zf_rendezvous_cancel_recv(r, key, token)) { /* fired with CANCELLED: replace it */
            zf_status_clear(&w.status);
            w.status = zf_status_new(ZF_DEADLINE_EXCEEDED, "timed out waiting for '%s'", key);
        } else {
            s_waiter_wait(&w, -1); /* completing on another thread right now */
        }
    }
    if (zf_ok(s)) s = w.status;
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (!zf_ok(s)) return s;
    *out = w.tensor;
    if (is_dead) *is_dead = w.is_dead;
    return ZF_STATUS_OK;
}

/* ---- step table --------------------------------------------------------- */

#define S_DEFAULT_MAX_UNCLAIMED 1024
#define S_DEFAULT_TTL_MS        60000

/* One step of the table. Unclaimed steps are also on a FIFO in creation
 * order, so that expiry and the cap only ever look at its head. */
typedef struct s_step {
    int64_t step_id;
    zf_rendezvous_t *r;
    bool claimed;
    bool evicted;               /* once removed: by the cap (true) or by the ttl */
    int64_t created;            /* monotonic ns */
    int64_t limit;              /* once removed: the cap or the ttl that removed it */
    struct s_step *prev, *next; /* the FIFO; next also chains removed steps */
} s_step_t;

struct zf_rendezvous_mgr {
    pthread_mutex_t mu;
    s_step_t **slots; /* open addressing with linear probing; a power of two */
    size_t n_slots, n;
    s_step_t *oldest, *newest; /* unclaimed steps, oldest first */
    size_t unclaimed, max_unclaimed;
    int64_t ttl_ms;
    uint64_t expired, evicted;
    zf_step_set_t *dropped; /* the ids most recently expired or evicted */
    char *local_device;     /* the hook new rendezvous get; NULL when none */
    zf_rendezvous_remote_fn remote;
    void *remote_arg;
};

static int64_t s_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Step ids are often consecutive: mix every bit into the low ones. */
static size_t s_hash(int64_t step_id)
{
    uint64_t x = (uint64_t)step_id;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return (size_t)x;
}

/* The slot holding step_id, or the empty one where it would go. The table
 * is never more than half full, so the probe ends. Caller holds the lock. */
static size_t s_slot_locked(const zf_rendezvous_mgr_t *mgr, int64_t step_id)
{
    size_t mask = mgr->n_slots - 1;
    size_t i = s_hash(step_id) & mask;
    while (mgr->slots[i] && mgr->slots[i]->step_id != step_id) i = (i + 1) & mask;
    return i;
}

static int s_grow_locked(zf_rendezvous_mgr_t *mgr)
{
    s_step_t **old = mgr->slots;
    size_t n_old = mgr->n_slots;
    s_step_t **slots = calloc(n_old * 2, sizeof *slots);
    if (!slots) return -1;
    mgr->slots = slots;
    mgr->n_slots = n_old * 2;
    for (size_t i = 0; i < n_old; i++)
        if (old[i]) mgr->slots[s_slot_locked(mgr, old[i]->step_id)] = old[i];
    free(old);
    return 0;
}

/* Empties slot i and shifts later entries of its probe run back into the
 * hole, so lookups need no tombstones. Caller holds the lock. */
static void s_unslot_locked(zf_rendezvous_mgr_t *mgr, size_t i)
{
    size_t mask = mgr->n_slots - 1;
    mgr->slots[i] = NULL;
    for (size_t j = (i + 1) & mask; mgr->slots[j]; j = (j + 1) & mask) {
        size_t home = s_hash(mgr->slots[j]->step_id) & mask;
        if (((j - home) & mask) < ((j - i) & mask)) continue; /* the hole is before its home */
        mgr->slots[i] = mgr->slots[j];
        mgr->slots[j] = NULL;
        i = j;
    }
    mgr->n--;
}

static void s_fifo_push_locked(zf_rendezvous_mgr_t *mgr, s_step_t *st)
{
    st->next = NULL;
    st->prev = mgr->newest;
    if (mgr->newest)
        mgr->newest->next = st;
    else
        mgr->oldest = st;
    mgr->newest = st;
    mgr->unclaimed++;
}

static void s_fifo_unlink_locked(zf_rendezvous_mgr_t *mgr, s_step_t *st)
{
    if (st->prev)
        st->prev->next = st->next;
    else
        mgr->oldest = st->next;
    if (st->next)
        st->next->prev = st->prev;
    else
        mgr->newest = st->prev;
    st->prev = st->next = NULL;
    mgr->unclaimed--;
}

/* Takes the oldest unclaimed step out of the table onto *dropped, to be
 * aborted by s_drop_all() once the lock is released. */
static void s_take_oldest_locked(zf_rendezvous_mgr_t *mgr, bool evicted, s_step_t **dropped)
{
    s_step_t *st = mgr->oldest;
    s_unslot_locked(mgr, s_slot_locked(mgr, st->step_id));
    s_fifo_unlink_locked(mgr, st);
    st->evicted = evicted;
    st->limit = evicted ? (int64_t)mgr->max_unclaimed : mgr->ttl_ms;
    if (evicted)
        mgr->evicted++;
    else
        mgr->expired++;
    zf_step_set_add(mgr->dropped, st->step_id);
    st->next = *dropped;
    *dropped = st;
}

/* Removes the unclaimed steps past the ttl, then the oldest ones while
 * `room` more would pass the cap. */
static void s_sweep_locked(zf_rendezvous_mgr_t *mgr, int64_t now, size_t room, s_step_t **dropped)
{
    while (mgr->oldest && (now - mgr->oldest->created) / 1000000 >= mgr->ttl_ms)
        s_take_oldest_locked(mgr, false, dropped);
    while (mgr->oldest && mgr->unclaimed + room > mgr->max_unclaimed)
        s_take_oldest_locked(mgr, true, dropped);
}

/* Aborts and frees removed steps, oldest first; runs without the table's
 * lock because the abort fires pending recvs' callbacks. */
static void s_drop_all(s_step_t *dropped)
{
    s_step_t *oldest_first = NULL;
    while (dropped) {
        s_step_t *next = dropped->next;
        dropped->next = oldest_first;
        oldest_first = dropped;
        dropped = next;
    }
    for (s_step_t *st = oldest_first, *next; st; st = next) {
        next = st->next;
        size_t values = 0;
        zf_rendezvous_pending(st->r, &values, NULL);
        zf_status_t why =
            st->evicted ? zf_status_new(ZF_ABORTED,
                                        "step %lld never started on this executor: its tensors "
                                        "were dropped because more than %lld steps waited to start",
                                        (long long)st->step_id, (long long)st->limit)
                        : zf_status_new(ZF_ABORTED,
                                        "step %lld never started on this executor: its tensors "
                                        "were dropped after %lld ms",
                                        (long long)st->step_id, (long long)st->limit);
        zf_log_warn("rendezvous", "%s (%zu values were queued)", zf_status_msg(&why), values);
        zf_rendezvous_start_abort(st->r, &why);
        zf_status_clear(&why);
        zf_rendezvous_unref(&st->r);
        free(st);
    }
}

zf_status_t zf_rendezvous_mgr_new(zf_rendezvous_mgr_t **out)
{
    zf_rendezvous_mgr_t *mgr = calloc(1, sizeof *mgr);
    if (mgr) mgr->slots = calloc(16, sizeof *mgr->slots);
    zf_status_t s = mgr && mgr->slots
                        ? zf_step_set_new(ZF_RENDEZVOUS_MGR_DROPPED_IDS, &mgr->dropped)
                        : ZF_STATUS_OK;
    zf_status_clear(&s);
    if (!mgr || !mgr->slots || !mgr->dropped) {
        if (mgr) free(mgr->slots);
        free(mgr);
        *out = NULL;
        return zf_out_of_memory("rendezvous table");
    }
    mgr->n_slots = 16;
    mgr->max_unclaimed = S_DEFAULT_MAX_UNCLAIMED;
    mgr->ttl_ms = S_DEFAULT_TTL_MS;
    pthread_mutex_init(&mgr->mu, NULL);
    *out = mgr;
    return ZF_STATUS_OK;
}

void zf_rendezvous_mgr_destroy(zf_rendezvous_mgr_t **mgr_p)
{
    if (!mgr_p || !*mgr_p) return;
    zf_rendezvous_mgr_t *mgr = *mgr_p;
    *mgr_p = NULL;
    zf_status_t s = zf_status_new(ZF_CANCELLED, "rendezvous table shut down");
    for (size_t i = 0; i < mgr->n_slots; i++) {
        s_step_t *st = mgr->slots[i];
        if (!st) continue;
        zf_rendezvous_start_abort(st->r, &s);
        zf_rendezvous_unref(&st->r);
        free(st);
    }
    zf_status_clear(&s);
    zf_step_set_destroy(&mgr->dropped);
    free(mgr->slots);
    free(mgr->local_device);
    pthread_mutex_destroy(&mgr->mu);
    free(mgr);
}

void zf_rendezvous_mgr_set_limits(zf_rendezvous_mgr_t *mgr, int max_unclaimed, int64_t ttl_ms)
{
    pthread_mutex_lock(&mgr->mu);
    mgr->max_unclaimed = max_unclaimed > 0 ? (size_t)max_unclaimed : S_DEFAULT_MAX_UNCLAIMED;
    mgr->ttl_ms = ttl_ms > 0 ? ttl_ms : S_DEFAULT_TTL_MS;
    pthread_mutex_unlock(&mgr->mu);
}

zf_rendezvous_mgr_stats_t zf_rendezvous_mgr_stats(zf_rendezvous_mgr_t *mgr)
{
    pthread_mutex_lock(&mgr->mu);
    zf_rendezvous_mgr_stats_t st = {.steps = mgr->n,
                                    .unclaimed = mgr->unclaimed,
                                    .expired = mgr->expired,
                                    .evicted = mgr->evicted};
    pthread_mutex_unlock(&mgr->mu);
    return st;
}

/* A new rendezvous with the table's remote-send hook. */
static zf_status_t s_rendezvous_for_locked(zf_rendezvous_mgr_t *mgr, int64_t step_id,
                                           zf_rendezvous_t **out)
{
    ZF_TRY(zf_rendezvous_new(step_id, out));
    if (!mgr->remote) return ZF_STATUS_OK;
    zf_status_t s = zf_rendezvous_set_remote(*out, mgr->local_device, mgr->remote, mgr->remote_arg);
    if (!zf_ok(s)) zf_rendezvous_unref(out);
    return s;
}

/* Adds step_id; an unclaimed one first makes room under the cap. */
static zf_status_t s_add_locked(zf_rendezvous_mgr_t *mgr, int64_t step_id, bool claim, int64_t now,
                                s_step_t **dropped, s_step_t **out)
{
    *out = NULL;
    if ((mgr->n + 1) * 2 > mgr->n_slots && s_grow_locked(mgr) != 0)
        return zf_out_of_memory("rendezvous table");
    s_step_t *st = calloc(1, sizeof *st);
    if (!st) return zf_out_of_memory("rendezvous table");
    zf_status_t s = s_rendezvous_for_locked(mgr, step_id, &st->r);
    if (!zf_ok(s)) {
        free(st);
        return s;
    }
    if (!claim) s_sweep_locked(mgr, now, 1, dropped);
    st->step_id = step_id;
    st->claimed = claim;
    st->created = now;
    mgr->slots[s_slot_locked(mgr, step_id)] = st; /* after the sweep: it moves entries */
    mgr->n++;
    if (!claim) s_fifo_push_locked(mgr, st);
    *out = st;
    return ZF_STATUS_OK;
}

static zf_status_t s_mgr_get(zf_rendezvous_mgr_t *mgr, int64_t step_id, bool claim,
                             zf_rendezvous_t **out)
{
    *out = NULL;
    s_step_t *dropped = NULL, *st = NULL;
    zf_status_t s = ZF_STATUS_OK;
    pthread_mutex_lock(&mgr->mu);
    int64_t now = s_now_ns(); /* under the lock, so the FIFO stays in time order */
    s_sweep_locked(mgr, now, 0, &dropped);
    st = mgr->slots[s_slot_locked(mgr, step_id)];
    if (!st && zf_step_set_has(mgr->dropped, step_id)) {
        s = zf_status_new(ZF_ABORTED,
                          "step %lld never started on this executor in time: the tensors that "
                          "came for it were dropped",
                          (long long)step_id);
    } else if (!st) {
        s = s_add_locked(mgr, step_id, claim, now, &dropped, &st);
    } else if (claim && !st->claimed) {
        s_fifo_unlink_locked(mgr, st);
        st->claimed = true;
    }
    if (zf_ok(s)) *out = zf_rendezvous_ref(st->r);
    pthread_mutex_unlock(&mgr->mu);
    s_drop_all(dropped);
    return s;
}

zf_status_t zf_rendezvous_mgr_find(zf_rendezvous_mgr_t *mgr, int64_t step_id, zf_rendezvous_t **out)
{
    return s_mgr_get(mgr, step_id, false, out);
}

zf_status_t zf_rendezvous_mgr_claim(zf_rendezvous_mgr_t *mgr, int64_t step_id,
                                    zf_rendezvous_t **out)
{
    return s_mgr_get(mgr, step_id, true, out);
}

zf_status_t zf_rendezvous_mgr_set_remote(zf_rendezvous_mgr_t *mgr, const char *local_device,
                                         zf_rendezvous_remote_fn fn, void *arg)
{
    char *copy = fn ? strdup(local_device ? local_device : "") : NULL;
    if (fn && !copy) return zf_out_of_memory("rendezvous remote hook");
    pthread_mutex_lock(&mgr->mu);
    free(mgr->local_device);
    mgr->local_device = copy;
    mgr->remote = fn;
    mgr->remote_arg = arg;
    pthread_mutex_unlock(&mgr->mu);
    return ZF_STATUS_OK;
}

void zf_rendezvous_mgr_cleanup(zf_rendezvous_mgr_t *mgr, int64_t step_id, const zf_status_t *status)
{
    pthread_mutex_lock(&mgr->mu);
    size_t i = s_slot_locked(mgr, step_id);
    s_step_t *st = mgr->slots[i];
    if (st) {
        s_unslot_locked(mgr, i);
        if (!st->claimed) s_fifo_unlink_locked(mgr, st);
    }
    pthread_mutex_unlock(&mgr->mu);
    if (!st) return;
    if (status && !zf_ok(*status)) zf_rendezvous_start_abort(st->r, status);
    zf_rendezvous_unref(&st->r);
    free(st);
}
