/* The per-process step -> rendezvous table (executor/rendezvous/rendezvous.h): owns
 * each step's entry and reference, and the bounds on the steps that only
 * arriving tensors created (count, age and bytes). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "executor/rendezvous/remote.h"
#include "executor/rendezvous/rendezvous.h"
#include "executor/rendezvous/step_set.h"

#define S_DEFAULT_MAX_UNCLAIMED 1024
#define S_DEFAULT_TTL_MS        60000
#define S_DEFAULT_MAX_BYTES     ((size_t)1 << 30)

/* What removed an unclaimed step: its age, the cap on steps, the cap on
 * bytes. */
typedef enum { S_BY_TTL, S_BY_COUNT, S_BY_BYTES } s_removal_t;

/* One step of the table. Unclaimed steps are also on a FIFO in creation
 * order, so that expiry and the caps only ever look at its head. */
typedef struct s_step {
    int64_t step_id;
    zf_rendezvous_t *r;
    bool claimed;
    bool refused;               /* a tensor over the byte cap was refused: r is aborted */
    bool removed;               /* taken out by the limits, to be aborted by s_drop_all() */
    s_removal_t why;            /* once removed */
    int64_t limit;              /* once removed: the ttl or cap that removed it */
    int64_t created;            /* monotonic ns */
    size_t bytes;               /* delivered while unclaimed: counted against the byte cap */
    struct s_step *prev, *next; /* the FIFO; next also chains removed steps */
} s_step_t;

struct zf_rendezvous_mgr {
    pthread_mutex_t mu;
    s_step_t **slots; /* open addressing with linear probing; a power of two */
    size_t n_slots, n;
    s_step_t *oldest, *newest; /* unclaimed steps, oldest first */
    size_t unclaimed, max_unclaimed;
    size_t unclaimed_bytes, max_bytes;
    int64_t ttl_ms;
    uint64_t added, cleaned, expired, evicted, refused;
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

/* Takes st off the FIFO: it is no longer unclaimed, and its bytes stop
 * counting (st->bytes keeps the figure for the log). */
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
    mgr->unclaimed_bytes -= st->bytes;
}

/* Takes the oldest unclaimed step out of the table onto *dropped, to be
 * aborted by s_drop_all() once the lock is released. */
static void s_take_oldest_locked(zf_rendezvous_mgr_t *mgr, s_removal_t why, s_step_t **dropped)
{
    s_step_t *st = mgr->oldest;
    s_unslot_locked(mgr, s_slot_locked(mgr, st->step_id));
    s_fifo_unlink_locked(mgr, st);
    st->removed = true;
    st->why = why;
    st->limit = why == S_BY_TTL     ? mgr->ttl_ms
                : why == S_BY_COUNT ? (int64_t)mgr->max_unclaimed
                                    : (int64_t)mgr->max_bytes;
    if (why == S_BY_TTL)
        mgr->expired++;
    else
        mgr->evicted++;
    zf_step_set_add(mgr->dropped, st->step_id);
    st->next = *dropped;
    *dropped = st;
}

/* Removes the unclaimed steps past the ttl, then the oldest ones while
 * `room` more steps, or `room_bytes` more bytes, would pass a cap. */
static void s_sweep_locked(zf_rendezvous_mgr_t *mgr, int64_t now, size_t room, size_t room_bytes,
                           s_step_t **dropped)
{
    while (mgr->oldest && (now - mgr->oldest->created) / 1000000 >= mgr->ttl_ms)
        s_take_oldest_locked(mgr, S_BY_TTL, dropped);
    while (mgr->oldest && mgr->unclaimed + room > mgr->max_unclaimed)
        s_take_oldest_locked(mgr, S_BY_COUNT, dropped);
    while (mgr->oldest && mgr->unclaimed_bytes + room_bytes > mgr->max_bytes)
        s_take_oldest_locked(mgr, S_BY_BYTES, dropped);
}

/* Why removed step st lost its tensors: what its rendezvous is aborted with. */
static zf_status_t s_removal_status(const s_step_t *st)
{
    long long id = (long long)st->step_id, limit = (long long)st->limit;
    switch (st->why) {
    case S_BY_COUNT:
        return zf_status_new(ZF_ABORTED,
                             "step %lld never started on this executor: its tensors were dropped "
                             "because more than %lld steps waited to start",
                             id, limit);
    case S_BY_BYTES:
        return zf_status_new(ZF_ABORTED,
                             "step %lld never started on this executor: its tensors were dropped "
                             "because the steps waiting to start held more than %lld bytes",
                             id, limit);
    default:
        return zf_status_new(ZF_ABORTED,
                             "step %lld never started on this executor: its tensors were dropped "
                             "after %lld ms",
                             id, limit);
    }
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
        zf_status_t why = s_removal_status(st);
        zf_log_warn("rendezvous", "%s (%zu values, %zu bytes were queued)", zf_status_msg(&why),
                    values, st->bytes);
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
    mgr->max_bytes = S_DEFAULT_MAX_BYTES;
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

void zf_rendezvous_mgr_set_max_bytes(zf_rendezvous_mgr_t *mgr, size_t max_bytes)
{
    pthread_mutex_lock(&mgr->mu);
    mgr->max_bytes = max_bytes > 0 ? max_bytes : S_DEFAULT_MAX_BYTES;
    pthread_mutex_unlock(&mgr->mu);
}

zf_rendezvous_mgr_stats_t zf_rendezvous_mgr_stats(zf_rendezvous_mgr_t *mgr)
{
    pthread_mutex_lock(&mgr->mu);
    zf_rendezvous_mgr_stats_t st = {.steps = mgr->n,
                                    .unclaimed = mgr->unclaimed,
                                    .unclaimed_bytes = mgr->unclaimed_bytes,
                                    .added = mgr->added,
                                    .cleaned = mgr->cleaned,
                                    .expired = mgr->expired,
                                    .evicted = mgr->evicted,
                                    .refused = mgr->refused};
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
    if (!claim) s_sweep_locked(mgr, now, 1, 0, dropped);
    st->step_id = step_id;
    st->claimed = claim;
    st->created = now;
    mgr->slots[s_slot_locked(mgr, step_id)] = st; /* after the sweep: it moves entries */
    mgr->n++;
    mgr->added++;
    if (!claim) s_fifo_push_locked(mgr, st);
    *out = st;
    return ZF_STATUS_OK;
}

/* The entry of step_id, made when missing (see zf_rendezvous_mgr_find());
 * removed steps go onto *dropped. Caller holds the lock. */
static zf_status_t s_get_locked(zf_rendezvous_mgr_t *mgr, int64_t step_id, bool claim,
                                s_step_t **dropped, s_step_t **out)
{
    int64_t now = s_now_ns(); /* under the lock, so the FIFO stays in time order */
    s_sweep_locked(mgr, now, 0, 0, dropped);
    s_step_t *st = mgr->slots[s_slot_locked(mgr, step_id)];
    *out = st;
    if (!st && zf_step_set_has(mgr->dropped, step_id))
        return zf_status_new(ZF_ABORTED,
                             "step %lld never started on this executor in time: the tensors that "
                             "came for it were dropped",
                             (long long)step_id);
    if (!st) return s_add_locked(mgr, step_id, claim, now, dropped, out);
    if (claim && !st->claimed) {
        s_fifo_unlink_locked(mgr, st);
        st->bytes = 0;
        st->claimed = true;
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_mgr_get(zf_rendezvous_mgr_t *mgr, int64_t step_id, bool claim,
                             zf_rendezvous_t **out)
{
    *out = NULL;
    s_step_t *dropped = NULL, *st = NULL;
    pthread_mutex_lock(&mgr->mu);
    zf_status_t s = s_get_locked(mgr, step_id, claim, &dropped, &st);
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

bool zf_rendezvous_mgr_find_claimed(zf_rendezvous_mgr_t *mgr, int64_t step_id,
                                    zf_rendezvous_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&mgr->mu);
    s_step_t *st = mgr->slots[s_slot_locked(mgr, step_id)];
    if (st && st->claimed) *out = zf_rendezvous_ref(st->r);
    pthread_mutex_unlock(&mgr->mu);
    return *out != NULL;
}

/* The memory a value holds: its buffer's bytes, and for a STRING tensor in
 * host memory the bytes of its elements too. */
static size_t s_value_bytes(const zf_tensor_t *t)
{
    if (!t) return 0;
    const zf_buffer_t *buf = zf_tensor_buffer(t);
    if (buf && zf_buffer_device_id(buf) == ZF_REMOTE_IPC_DEVICE_ID)
        return 0; /* an IPC offer's placeholder: the bytes stay on the sender's device */
    size_t n = zf_tensor_nbytes(t);
    if (zf_tensor_dtype(t) != ZF_STRING || zf_tensor_memory_kind(t) != ZF_MEMORY_HOST) return n;
    for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) n += zf_tensor_string(t, i)->len;
    return n;
}

/* What a value of `bytes` delivered to unclaimed step st does to the byte
 * cap: refused (false) when it alone is over the cap; otherwise the oldest
 * unclaimed steps are removed while it would not fit, and it is counted,
 * unless st itself was the oldest and went too (st->removed: the value is
 * dropped with it). *counted tells whether it counts. */
static bool s_count_locked(zf_rendezvous_mgr_t *mgr, s_step_t *st, size_t bytes, s_step_t **dropped,
                           bool *counted)
{
    *counted = false;
    if (bytes > mgr->max_bytes) {
        st->refused = true;
        mgr->refused++;
        mgr->unclaimed_bytes -= st->bytes; /* the abort frees them */
        st->bytes = 0;
        return false;
    }
    while (mgr->oldest && mgr->unclaimed_bytes + bytes > mgr->max_bytes) {
        bool itself = mgr->oldest == st;
        s_take_oldest_locked(mgr, S_BY_BYTES, dropped);
        if (itself) return true; /* the value goes with it: nothing more to free */
    }
    st->bytes += bytes;
    mgr->unclaimed_bytes += bytes;
    *counted = true;
    return true;
}

/* Takes back bytes counted for step_id's rendezvous r, whose send failed,
 * if the step still counts them. */
static void s_uncount(zf_rendezvous_mgr_t *mgr, int64_t step_id, const zf_rendezvous_t *r,
                      size_t bytes)
{
    pthread_mutex_lock(&mgr->mu);
    s_step_t *st = mgr->slots[s_slot_locked(mgr, step_id)];
    if (st && st->r == r && !st->claimed && st->bytes >= bytes) {
        st->bytes -= bytes;
        mgr->unclaimed_bytes -= bytes;
    }
    pthread_mutex_unlock(&mgr->mu);
}

/* Refuses a value over the byte cap: the step's rendezvous is aborted with
 * the reason, which is also returned. */
static zf_status_t s_refuse(zf_rendezvous_t *r, int64_t step_id, const char *key, size_t bytes,
                            size_t limit)
{
    zf_status_t s =
        zf_status_new(ZF_RESOURCE_EXHAUSTED,
                      "step %lld has not started on this executor and cannot hold '%s': "
                      "its %zu bytes are more than the %zu bytes allowed for the "
                      "tensors of steps waiting to start",
                      (long long)step_id, key, bytes, limit);
    zf_log_warn("rendezvous", "%s", zf_status_msg(&s));
    zf_rendezvous_start_abort(r, &s);
    return s;
}

/* Whether t views only part of a larger host buffer (a batch entry views
 * the batch's payload frame): kept as it is, it would keep more bytes
 * alive than are counted for it. */
static bool s_pins_more(const zf_tensor_t *t)
{
    const zf_buffer_t *buf = t ? zf_tensor_buffer(t) : NULL;
    return buf && zf_tensor_memory_kind(t) == ZF_MEMORY_HOST && zf_tensor_dtype(t) != ZF_STRING &&
           zf_buffer_size(buf) > zf_tensor_nbytes(t);
}

zf_status_t zf_rendezvous_mgr_deliver(zf_rendezvous_mgr_t *mgr, int64_t step_id, const char *key,
                                      zf_tensor_t *tensor, bool is_dead)
{
    size_t bytes = s_value_bytes(tensor), limit = 0;
    s_step_t *dropped = NULL, *st = NULL;
    zf_rendezvous_t *r = NULL;
    zf_tensor_t *own = NULL; /* tensor's bytes in a buffer of their own */
    bool counted = false, refused = false, copied = false;
    zf_status_t s;
    for (;;) {
        pthread_mutex_lock(&mgr->mu);
        s = s_get_locked(mgr, step_id, false, &dropped, &st);
        if (!zf_ok(s) || st->claimed || st->refused || bytes > mgr->max_bytes || copied ||
            !s_pins_more(tensor))
            break;
        /* An unclaimed step keeps only the bytes counted for it: copy
         * outside the lock, then look at the step again. Without memory
         * for the copy the view is kept (its bytes are still counted), so
         * the value is not lost. */
        pthread_mutex_unlock(&mgr->mu);
        s_drop_all(dropped);
        dropped = NULL;
        copied = true;
        zf_status_t c = zf_tensor_copy(tensor, &own);
        if (zf_ok(c))
            tensor = own;
        else
            zf_log_debug("rendezvous", "step %lld: '%s' kept as a view of its frame: %s",
                         (long long)step_id, key, zf_status_msg(&c));
        zf_status_clear(&c);
    }
    if (zf_ok(s) && !st->claimed && !st->refused) {
        limit = mgr->max_bytes;
        refused = !s_count_locked(mgr, st, bytes, &dropped, &counted);
        if (st->removed) s = s_removal_status(st);
    }
    if (zf_ok(s)) r = zf_rendezvous_ref(st->r);
    pthread_mutex_unlock(&mgr->mu);
    s_drop_all(dropped);
    if (zf_ok(s))
        s = refused ? s_refuse(r, step_id, key, bytes, limit)
                    : zf_rendezvous_put(r, key, tensor, is_dead);
    if (!zf_ok(s) && counted) s_uncount(mgr, step_id, r, bytes);
    zf_rendezvous_unref(&r);
    zf_tensor_unref(&own);
    return s;
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
        mgr->cleaned++;
    }
    pthread_mutex_unlock(&mgr->mu);
    if (!st) return;
    if (status && !zf_ok(*status)) zf_rendezvous_start_abort(st->r, status);
    zf_rendezvous_unref(&st->r);
    free(st);
}
