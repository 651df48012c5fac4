/* The local rendezvous: per-key FIFOs of values or waiting recvs and a
 * sticky abort status. Owns queued values until a recv takes them. (The
 * per-process step -> rendezvous table is in rendezvous_mgr.c.) */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rendezvous_key.h"
#include "common/strmap.h"
#include "executor/rendezvous/rendezvous.h"

/* A queued value (done == NULL) or a waiting recv. A key's queue holds one
 * kind at a time: values wait only while no recv does, and vice versa. */
typedef struct s_item {
    struct s_item *next;
    zf_tensor_t *tensor;
    bool is_dead;
    bool spare; /* its queue's own (not allocated alone) */
    zf_rendezvous_recv_fn done;
    void *arg;
    uint64_t token;
} s_item_t;

/* A key's queue; the table's key is the queue's own copy. Most keys hold
 * one item at a time (a loop makes a key per iteration), so the queue
 * carries room for one: a key's first item costs no allocation. A queue
 * emptied is kept for a later key that fits its room (cap bytes of key),
 * up to S_KEPT_QUEUES of them and S_KEPT_BYTES of keys' room, until the
 * rendezvous goes: so the thread that delivers a step's values frees
 * nothing, and a loop reuses one iteration's queues for the next. */
typedef struct s_queue {
    s_item_t *head, *tail; /* kept: head links the kept queues */
    s_item_t spare;
    bool spare_used;
    size_t len, cap;
    uint64_t hash; /* zf_strmap_hash(key, len) */
    char key[];
} s_queue_t;

#define S_KEPT_QUEUES 4096
#define S_KEPT_BYTES  ((size_t)1 << 20)

/* A new zeroed item for q: its spare when free. NULL when out of memory. */
static s_item_t *s_item_new(s_queue_t *q)
{
    if (q->spare_used) return calloc(1, sizeof(s_item_t));
    q->spare_used = true;
    q->spare = (s_item_t){.spare = true};
    return &q->spare;
}

/* Frees it, taken off q (which is still there). */
static void s_item_free(s_queue_t *q, s_item_t *it)
{
    if (it->spare)
        q->spare_used = false;
    else
        free(it);
}

/* Frees it, detached from a drained queue (which goes only with the
 * rendezvous). */
static void s_item_free_detached(s_item_t *it)
{
    if (!it->spare) free(it);
}

/* Longer device names are no device's: keys naming one stay local. */
#define S_DEVICE_MAX 512

/* A remote-send hook as set; a later one replaces it but it stays until
 * the rendezvous goes, so that a send reads it without the lock. */
typedef struct s_hook {
    struct s_hook *prev;
    zf_rendezvous_remote_fn fn; /* NULL: none */
    void *arg;
    size_t len;
    char local_device[]; /* len bytes */
} s_hook_t;

struct zf_rendezvous {
    atomic_int refs;
    int64_t step_id;
    pthread_mutex_t mu;
    zf_strmap_t *queues; /* key -> s_queue_t *, while it holds values or recvs */
    zf_status_t abort;   /* sticky; OK until aborted, then never changed again */
    atomic_bool aborted; /* abort is set (released after it is written) */
    uint64_t next_token;
    size_t values, recvs;
    _Atomic(s_hook_t *) hook; /* NULL when none was set */
    s_queue_t *kept;          /* emptied queues for reuse, linked by head */
    size_t n_kept, kept_bytes;
};

zf_status_t zf_rendezvous_new(int64_t step_id, zf_rendezvous_t **out)
{
    *out = NULL;
    zf_rendezvous_t *r = calloc(1, sizeof *r);
    if (!r || !(r->queues = zf_strmap_new(16, 0))) {
        free(r);
        return zf_out_of_memory("rendezvous");
    }
    atomic_init(&r->refs, 1);
    atomic_init(&r->aborted, false);
    atomic_init(&r->hook, NULL);
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

/* Fires and frees a chain of waiters (linked by next) with copies of *s. */
static void s_fire_waiters(s_item_t *w, const zf_status_t *s)
{
    while (w) {
        s_item_t *next = w->next;
        w->done(zf_status_copy(s), NULL, false, w->arg);
        s_item_free_detached(w);
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
        s_item_free_detached(it);
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
    for (s_queue_t *q = r->kept, *next; q; q = next) {
        next = (s_queue_t *)(void *)q->head;
        free(q);
    }
    zf_status_clear(&r->abort);
    for (s_hook_t *h = atomic_load(&r->hook), *prev; h; h = prev) {
        prev = h->prev;
        free(h);
    }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* The key's queue (len bytes, hashed as hash), created on first use.
 * Caller holds the lock. */
static s_queue_t *s_queue_locked(zf_rendezvous_t *r, const char *key, size_t len, uint64_t hash)
{
    uintptr_t v;
    if (zf_strmap_get_hashed(r->queues, key, len, hash, &v)) return (s_queue_t *)v;
    s_queue_t *q = r->kept;
    size_t cap = (len + 32) & ~(size_t)31; /* room for the NUL, rounded */
    if (q && q->cap > len) {
        r->kept = (s_queue_t *)(void *)q->head;
        r->n_kept--;
        r->kept_bytes -= q->cap;
        cap = q->cap;
    } else if (!(q = malloc(sizeof *q + cap))) {
        return NULL;
    }
    *q = (s_queue_t){.len = len, .cap = cap, .hash = hash, .spare_used = false};
    memcpy(q->key, key, len);
    q->key[len] = '\0';
    if (zf_strmap_insert_hashed(r->queues, q->key, len, hash, (uintptr_t)q, NULL) != 0) {
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

/* Forgets a key's queue once it holds nothing: a loop makes a key per
 * iteration, and a step's table must not keep them all. Caller holds the
 * lock. */
static void s_drop_if_empty(zf_rendezvous_t *r, s_queue_t *q)
{
    if (q->head) return;
    zf_strmap_remove_hashed(r->queues, q->key, q->len, q->hash, NULL);
    if (r->n_kept == S_KEPT_QUEUES || q->cap > S_KEPT_BYTES - r->kept_bytes) {
        free(q);
        return;
    }
    q->head = (s_item_t *)(void *)r->kept;
    r->kept = q;
    r->n_kept++;
    r->kept_bytes += q->cap;
}

static s_item_t *s_pop(s_queue_t *q)
{
    s_item_t *it = q->head;
    q->head = it->next;
    if (!q->head) q->tail = NULL;
    return it;
}

/* What a queued item holds, taken off its queue: a recv to call, or a
 * value and its reference. */
typedef struct {
    zf_rendezvous_recv_fn done;
    void *arg;
    zf_tensor_t *tensor;
    bool is_dead;
} s_taken_t;

/* Takes q's first item (q is dropped when that empties it). Caller holds
 * the lock. */
static s_taken_t s_take_locked(zf_rendezvous_t *r, s_queue_t *q)
{
    s_item_t *it = s_pop(q);
    s_taken_t t = {it->done, it->arg, it->tensor, it->is_dead};
    if (it->done)
        r->recvs--;
    else
        r->values--;
    s_item_free(q, it);
    s_drop_if_empty(r, q);
    return t;
}

zf_status_t zf_rendezvous_set_remote(zf_rendezvous_t *r, const char *local_device,
                                     zf_rendezvous_remote_fn fn, void *arg)
{
    size_t len = fn && local_device ? strlen(local_device) : 0;
    s_hook_t *h = malloc(sizeof *h + len + 1);
    if (!h) return zf_out_of_memory("rendezvous remote hook");
    h->fn = fn;
    h->arg = arg;
    h->len = len;
    memcpy(h->local_device, fn && local_device ? local_device : "", len + 1);
    pthread_mutex_lock(&r->mu);
    h->prev = atomic_load(&r->hook);
    atomic_store_explicit(&r->hook, h, memory_order_release);
    pthread_mutex_unlock(&r->mu);
    return ZF_STATUS_OK;
}

/* The abort status (a copy), or OK; without the lock until aborted. */
static zf_status_t s_abort_status(zf_rendezvous_t *r)
{
    if (!atomic_load_explicit(&r->aborted, memory_order_acquire)) return ZF_STATUS_OK;
    return zf_status_copy(&r->abort); /* never changes once set */
}

/* The destination device of the last key this thread sent that had one:
 * a partition's sends to one device share their keys' start
 * ("src;incarnation;dst;"), and a key that starts the same is not parsed
 * again. */
typedef struct {
    size_t start_len; /* the start's bytes, through the ';' after dst; 0: none */
    size_t dst_len;
    char start[S_DEVICE_MAX + 64]; /* the incarnation and separators take the rest */
    char device[S_DEVICE_MAX];     /* dst, NUL-terminated */
} s_last_dst_t;

static _Thread_local s_last_dst_t s_last_dst;

/* Key's destination device (NUL-terminated, valid until this thread's
 * next call) and its length; NULL when key names none or one longer than
 * any device name. */
static const char *s_dst_device(const char *key, size_t *len)
{
    s_last_dst_t *c = &s_last_dst;
    if (c->start_len && strncmp(key, c->start, c->start_len) == 0) {
        *len = c->dst_len;
        return c->device;
    }
    const char *dst = NULL;
    if (!zf_rendezvous_key_dst_device(key, &dst, len) || *len >= S_DEVICE_MAX) return NULL;
    size_t start = (size_t)(dst - key) + *len + 1; /* through the ';' after dst, if any */
    bool keep = dst[*len] == ';' && start <= sizeof c->start;
    c->start_len = keep ? start : 0;
    if (keep) memcpy(c->start, key, start);
    c->dst_len = *len;
    memcpy(c->device, dst, *len);
    c->device[*len] = '\0';
    return c->device;
}

/* Sends through the remote hook when key's destination is another device
 * that the hook knows; *handled says whether it did. Takes no lock. */
static zf_status_t s_send_remote(zf_rendezvous_t *r, const char *key, zf_tensor_t *tensor,
                                 bool is_dead, bool *handled)
{
    *handled = false;
    const s_hook_t *h = atomic_load_explicit(&r->hook, memory_order_acquire);
    if (!h || !h->fn) return ZF_STATUS_OK;
    size_t len = 0;
    const char *dst = s_dst_device(key, &len);
    if (!dst) return ZF_STATUS_OK; /* no such device: stays local */
    if (h->len == len && memcmp(dst, h->local_device, len) == 0) return ZF_STATUS_OK;
    zf_status_t s = s_abort_status(r);
    if (!zf_ok(s)) {
        *handled = true;
        return s;
    }
    char device[S_DEVICE_MAX]; /* the hook may send again, from a callback */
    memcpy(device, dst, len + 1);
    return h->fn(h->arg, r->step_id, key, device, tensor, is_dead, handled);
}

/* ---- send batches ---------------------------------------------------------- */

enum { S_MAX_DEFERRED = 8 };

typedef struct {
    bool open;
    int n;
    struct {
        zf_rendezvous_flush_fn fn;
        void *arg;
    } deferred[S_MAX_DEFERRED];
} s_batch_t;

static _Thread_local s_batch_t s_batch;

bool zf_rendezvous_batch_begin(void)
{
    if (s_batch.open) return false;
    s_batch.open = true;
    s_batch.n = 0;
    return true;
}

void zf_rendezvous_batch_end(void)
{
    if (!s_batch.open) return;
    s_batch_t b = s_batch; /* a flush may send, and must not defer into this one */
    s_batch.open = false;
    s_batch.n = 0;
    for (int i = 0; i < b.n; i++) b.deferred[i].fn(b.deferred[i].arg);
}

bool zf_rendezvous_batch_is_open(void)
{
    return s_batch.open;
}

bool zf_rendezvous_batch_defer(zf_rendezvous_flush_fn fn, void *arg)
{
    if (!s_batch.open) return false;
    for (int i = 0; i < s_batch.n; i++)
        if (s_batch.deferred[i].fn == fn && s_batch.deferred[i].arg == arg) return true;
    if (s_batch.n == S_MAX_DEFERRED) return false;
    s_batch.deferred[s_batch.n].fn = fn;
    s_batch.deferred[s_batch.n].arg = arg;
    s_batch.n++;
    return true;
}

static zf_status_t s_put(zf_rendezvous_t *r, const char *key, zf_tensor_t *tensor, bool is_dead);

zf_status_t zf_rendezvous_send(zf_rendezvous_t *r, const char *key, zf_tensor_t *tensor,
                               bool is_dead)
{
    if (!tensor && !is_dead)
        return zf_invalid_argument("rendezvous send of '%s' without a tensor", key);
    bool remote = false;
    zf_status_t rs = s_send_remote(r, key, tensor, is_dead, &remote);
    if (remote || !zf_ok(rs)) return rs;
    return s_put(r, key, tensor, is_dead);
}

zf_status_t zf_rendezvous_put(zf_rendezvous_t *r, const char *key, zf_tensor_t *tensor,
                              bool is_dead)
{
    if (!tensor && !is_dead)
        return zf_invalid_argument("rendezvous send of '%s' without a tensor", key);
    return s_put(r, key, tensor, is_dead);
}

/* The local half of a send (its tensor checked). */
static zf_status_t s_put(zf_rendezvous_t *r, const char *key, zf_tensor_t *tensor, bool is_dead)
{
    size_t len = strlen(key);
    uint64_t hash = zf_strmap_hash(key, len);
    pthread_mutex_lock(&r->mu);
    if (!zf_ok(r->abort)) {
        zf_status_t s = zf_status_copy(&r->abort);
        pthread_mutex_unlock(&r->mu);
        return s;
    }
    s_queue_t *q = s_queue_locked(r, key, len, hash);
    s_item_t *it = NULL;
    if (q && q->head && q->head->done) { /* a recv is waiting: hand it over */
        s_taken_t w = s_take_locked(r, q);
        pthread_mutex_unlock(&r->mu);
        w.done(ZF_STATUS_OK, tensor ? zf_tensor_ref(tensor) : NULL, is_dead, w.arg);
        return ZF_STATUS_OK;
    }
    if (q) it = s_item_new(q);
    if (!it) {
        if (q) s_drop_if_empty(r, q);
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

/* How many keys ahead a chunk's walk asks for the queue a slot points at. */
#define S_PREFETCH_AHEAD 4

/* Puts v[0..n) (n <= ZF_RENDEZVOUS_PUT_CHUNK, hashed as hashes) under the lock; the
 * recvs they satisfy go to fire[*n_fire...], in order. Returns how many
 * were put (all, unless aborted or out of memory: *status). */
static size_t s_put_chunk_locked(zf_rendezvous_t *r, zf_rendezvous_value_t *v, size_t n,
                                 const uint64_t *hashes, s_taken_t *fire, size_t *n_fire,
                                 zf_status_t *status)
{
    if (!zf_ok(r->abort)) {
        *status = zf_status_copy(&r->abort);
        return 0;
    }
    /* the slots, then the queues they point at, asked for ahead: their
     * cache lines come in together rather than one miss after another */
    for (size_t i = 0; i < n; i++) zf_strmap_prefetch(r->queues, hashes[i]);
    for (size_t i = 0; i < n; i++) {
        if (i + S_PREFETCH_AHEAD < n)
            zf_strmap_prefetch_key(r->queues, hashes[i + S_PREFETCH_AHEAD]);
        s_queue_t *q = s_queue_locked(r, v[i].key, v[i].key_len, hashes[i]);
        s_item_t *it = NULL;
        if (q && q->head && q->head->done) { /* a recv is waiting: it gets the value */
            s_taken_t *w = &fire[(*n_fire)++];
            *w = s_take_locked(r, q);
            w->tensor = v[i].tensor;
            w->is_dead = v[i].is_dead;
        } else if (q && (it = s_item_new(q))) {
            it->tensor = v[i].tensor;
            it->is_dead = v[i].is_dead;
            s_push(q, it);
            r->values++;
        } else {
            if (q) s_drop_if_empty(r, q);
            *status = zf_out_of_memory("rendezvous send");
            return i;
        }
        v[i].tensor = NULL;
    }
    return n;
}

size_t zf_rendezvous_put_all(zf_rendezvous_t *r, zf_rendezvous_value_t *v, size_t n,
                             zf_status_t *status)
{
    *status = ZF_STATUS_OK;
    size_t put = 0;
    while (put < n && zf_ok(*status)) {
        /* a chunk at a time: its keys hashed outside the lock, and the
         * recvs it satisfies called before the next is taken */
        size_t chunk = n - put < ZF_RENDEZVOUS_PUT_CHUNK ? n - put : ZF_RENDEZVOUS_PUT_CHUNK;
        uint64_t hashes[ZF_RENDEZVOUS_PUT_CHUNK];
        for (size_t i = 0; i < chunk; i++)
            hashes[i] = zf_strmap_hash(v[put + i].key, v[put + i].key_len);
        s_taken_t fire[ZF_RENDEZVOUS_PUT_CHUNK];
        size_t n_fire = 0;
        pthread_mutex_lock(&r->mu);
        put += s_put_chunk_locked(r, v + put, chunk, hashes, fire, &n_fire, status);
        pthread_mutex_unlock(&r->mu);
        for (size_t i = 0; i < n_fire; i++)
            fire[i].done(ZF_STATUS_OK, fire[i].tensor, fire[i].is_dead, fire[i].arg);
    }
    return put;
}

zf_status_t zf_rendezvous_recv_async(zf_rendezvous_t *r, const char *key,
                                     zf_rendezvous_recv_fn done, void *arg, uint64_t *token)
{
    if (token) *token = 0;
    size_t len = strlen(key);
    uint64_t hash = zf_strmap_hash(key, len);
    pthread_mutex_lock(&r->mu);
    if (!zf_ok(r->abort)) {
        zf_status_t s = zf_status_copy(&r->abort);
        pthread_mutex_unlock(&r->mu);
        return s;
    }
    s_queue_t *q = s_queue_locked(r, key, len, hash);
    s_item_t *it = NULL;
    uint64_t tok = r->next_token++;
    if (token) *token = tok;
    if (q && q->head && !q->head->done) { /* a value is waiting: take it */
        s_taken_t got = s_take_locked(r, q);
        pthread_mutex_unlock(&r->mu);
        done(ZF_STATUS_OK, got.tensor, got.is_dead, arg);
        return ZF_STATUS_OK;
    }
    if (q) it = s_item_new(q);
    if (!it) {
        if (q) s_drop_if_empty(r, q);
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
    s_taken_t found = {NULL, NULL, NULL, false};
    if (zf_strmap_get(r->queues, key, &v)) {
        s_queue_t *q = (s_queue_t *)v;
        for (s_item_t *prev = NULL, *it = q->head; it; prev = it, it = it->next) {
            if (!it->done || it->token != token) continue;
            if (prev)
                prev->next = it->next;
            else
                q->head = it->next;
            if (q->tail == it) q->tail = prev;
            found = (s_taken_t){it->done, it->arg, NULL, false};
            r->recvs--;
            s_item_free(q, it);
            s_drop_if_empty(r, q);
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (!found.done) return false;
    found.done(zf_status_new(ZF_CANCELLED, "RecvAsync is cancelled."), NULL, false, found.arg);
    return true;
}

void zf_rendezvous_start_abort(zf_rendezvous_t *r, const zf_status_t *status)
{
    zf_status_t s = zf_ok(*status) ? zf_internal("rendezvous aborted with an OK status")
                                   : zf_status_copy(status);
    pthread_mutex_lock(&r->mu);
    if (!zf_ok(r->abort)) {
        pthread_mutex_unlock(&r->mu);
        zf_status_clear(&s);
        return;
    }
    r->abort = s;
    atomic_store_explicit(&r->aborted, true, memory_order_release);
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
    zf_status_t s = zf_status_copy(&r->abort);
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

size_t zf_rendezvous_num_keys(zf_rendezvous_t *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = zf_strmap_size(r->queues);
    pthread_mutex_unlock(&r->mu);
    return n;
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
