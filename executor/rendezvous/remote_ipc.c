/* CUDA IPC for the executor's data plane (executor/rendezvous/remote.c): the device
 * tensors this process offers and holds until their receiver answers, its
 * step ends or the hold limit passes; the offers it receives, whose
 * placeholders answer their sender when released; and the host id offers
 * carry. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/device_name.h"
#include "common/log.h"
#include "common/rendezvous_key.h"
#include "common/tensor_frame.h"
#include "executor/rendezvous/remote.h"
#include "executor/rendezvous/remote_internal.h"

#define S_OFFER_MAGIC 0x7a665063u

/* The buffer data of a received offer (see zf_remote_ipc_offer()). */
typedef struct {
    uint32_t magic;
    zf_gpu_ipc_handle_t handle;
    uint64_t id;
    int64_t step_id;
    zf__remote_acker_t *acker;
    bool answered; /* refused already: the release says nothing */
    char src[ZF_DEVICE_NAME_MAX + 1];
} s_offer_t;

/* ---- CUDA IPC: offers held by the sender --------------------------------------- */

void zf__remote_held_unlink_locked(zf_remote_t *r, zf__remote_held_t **at)
{
    zf__remote_held_t *h = *at;
    *at = h->next;
    h->next = NULL;
    r->n_held--;
    if (h->rel) r->n_held_rel--;
}

zf__remote_held_t *zf__remote_held_take_locked(zf_remote_t *r, uint64_t id, int64_t step_id)
{
    zf__remote_held_t *taken = NULL, **at = &r->held;
    while (*at) {
        zf__remote_held_t *h = *at;
        if (id ? h->id != id : h->step_id != step_id || h->shm) {
            at = &h->next;
            continue;
        }
        zf__remote_held_unlink_locked(r, at);
        h->next = taken;
        taken = h;
    }
    return taken;
}

void zf__remote_held_free_all(zf__remote_held_t **list)
{
    while (*list) {
        zf__remote_held_t *h = *list;
        *list = h->next;
        zf_tensor_unref(&h->tensor);
        free(h->device);
        free(h->key);
        free(h);
    }
}

zf_status_t zf__remote_held_add(zf_remote_t *r, uint64_t id, bool shm, _Atomic uint64_t *rel,
                                const char *device, const char *key, int64_t step_id,
                                zf_tensor_t *tensor, int64_t held_at_ms)
{
    zf__remote_held_t *h = calloc(1, sizeof *h);
    if (!h || !(h->device = strdup(device)) || !(h->key = strdup(key))) {
        zf__remote_held_free_all(&h);
        return zf_out_of_memory(shm ? "a shared-memory offer" : "an IPC offer");
    }
    h->id = id;
    h->shm = shm;
    h->rel = rel;
    h->step_id = step_id;
    h->held_at_ms = held_at_ms;
    h->tensor = zf_tensor_ref(tensor);
    pthread_mutex_lock(&r->mu);
    /* A step already cleaned up here would never let go of it. */
    bool closed = zf__remote_closed_locked(r, step_id);
    if (!closed) {
        h->next = r->held;
        r->held = h;
        r->n_held++;
        if (rel) r->n_held_rel++;
        if (held_at_ms < r->held_min_ms) r->held_min_ms = held_at_ms;
    }
    pthread_mutex_unlock(&r->mu);
    if (!closed) return ZF_STATUS_OK;
    zf__remote_held_free_all(&h);
    return zf_status_new(ZF_CANCELLED, "step %lld has ended here", (long long)step_id);
}

zf_status_t zf__remote_send_held_offer(zf_remote_t *r, zf__remote_peer_t *p,
                                       const zf_tensor_frame_header_t *h, uint64_t id)
{
    pthread_mutex_lock(&p->mu);
    zf_status_t s = zf__remote_peer_socket_locked(r, p);
    if (zf_ok(s))
        s = h->has_shm ? zf_tensor_frame_send_shm(p->push, h)
                       : zf_tensor_frame_send_ipc(p->push, h);
    pthread_mutex_unlock(&p->mu);
    if (zf_ok(s)) return s;
    pthread_mutex_lock(&r->mu);
    zf__remote_held_t *back = zf__remote_held_take_locked(r, id, 0);
    pthread_mutex_unlock(&r->mu);
    zf__remote_held_free_all(&back);
    return s;
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
static zf__remote_held_t *s_held_take_expired_locked(zf_remote_t *r, int64_t now_ms)
{
    zf__remote_held_t *taken = NULL, **at = &r->held;
    int64_t min = INT64_MAX;
    while (*at) {
        zf__remote_held_t *h = *at;
        if (now_ms - h->held_at_ms < r->ipc_hold_ms) {
            if (h->held_at_ms < min) min = h->held_at_ms;
            at = &h->next;
            continue;
        }
        zf__remote_held_unlink_locked(r, at);
        h->next = taken; /* the list is newest first, so this reverses it */
        taken = h;
    }
    r->held_min_ms = min;
    return taken;
}

/* Shared-memory blocks may be read in place for as long as the receiver
 * keeps its tensor (a variable may even keep it for good), so an
 * unanswered one is only freed once no other process maps the arena: the
 * receivers are gone. Otherwise the blocks among *expired go back to the
 * held list, stamped now_ms, to be looked at again a hold limit later. */
static void s_keep_mapped_blocks(zf_remote_t *r, zf__remote_held_t **expired, int64_t now_ms)
{
    bool any = false;
    for (const zf__remote_held_t *h = *expired; h && !any; h = h->next) any = h->shm;
    long pid = 0;
    if (!any || !zf__remote_shm_mapped_elsewhere(r, &pid)) return;
    zf__remote_held_t *kept = NULL, **at = expired;
    int n = 0;
    while (*at) {
        zf__remote_held_t *h = *at;
        if (!h->shm) {
            at = &h->next;
            continue;
        }
        *at = h->next;
        h->next = kept;
        h->held_at_ms = now_ms;
        kept = h;
        n++;
    }
    zf_log_warn("remote",
                "%d shared-memory block%s unanswered for the hold limit stay%s held: process %ld "
                "still maps the arena (the oldest: '%s' of step %lld, offered to %s)",
                n, n == 1 ? "" : "s", n == 1 ? "s" : "", pid, kept->key, (long long)kept->step_id,
                kept->device);
    pthread_mutex_lock(&r->mu);
    while (kept) {
        zf__remote_held_t *h = kept;
        kept = h->next;
        h->next = r->held;
        r->held = h;
        r->n_held++;
        if (h->rel) r->n_held_rel++;
    }
    if (now_ms < r->held_min_ms) r->held_min_ms = now_ms;
    pthread_mutex_unlock(&r->mu);
}

int zf_remote_expire(zf_remote_t *r, int64_t now_ms)
{
    zf__remote_shm_reap(r); /* blocks let go of since the last send */
    pthread_mutex_lock(&r->mu);
    int64_t hold_ms = r->ipc_hold_ms;
    bool due = r->held && now_ms - r->held_min_ms >= hold_ms;
    zf__remote_held_t *expired = due ? s_held_take_expired_locked(r, now_ms) : NULL;
    pthread_mutex_unlock(&r->mu);
    s_keep_mapped_blocks(r, &expired, now_ms);
    if (!expired) return 0;
    int n = 0, n_shm = 0;
    for (const zf__remote_held_t *h = expired; h; h = h->next) {
        n++;
        n_shm += h->shm;
    }
    zf_log_warn("remote",
                "released %d offer%s (%d CUDA IPC, %d shared memory) whose receiver did not answer "
                "within %lld ms (the oldest: '%s' of step %lld, offered to %s)",
                n, n == 1 ? "" : "s", n - n_shm, n_shm, (long long)hold_ms, expired->key,
                (long long)expired->step_id, expired->device);
    atomic_fetch_add(&r->ipc_expired, (uint_fast64_t)(n - n_shm));
    atomic_fetch_add(&r->shm_expired, (uint_fast64_t)n_shm);
    zf__remote_held_free_all(&expired);
    return n;
}

zf_status_t zf__remote_hold_offer(zf_remote_t *r, const char *device, const char *key,
                                  int64_t step_id, zf_tensor_t *tensor, int64_t held_at_ms,
                                  uint64_t *id)
{
    *id = atomic_fetch_add(&r->next_offer, 1) + 1;
    return zf__remote_held_add(r, *id, false, NULL, device, key, step_id, tensor, held_at_ms);
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
static zf_status_t s_offer(zf_remote_t *r, zf__remote_peer_t *p, const char *device,
                           const char *key, int64_t step_id, zf_tensor_t *tensor, bool *sent)
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
    ZF_TRY(zf__remote_held_add(r, ipc.id, false, NULL, device, key, step_id, tensor,
                               zf_remote_now_ms()));
    ZF_TRY(zf__remote_send_held_offer(r, p, &h, ipc.id));
    atomic_fetch_add(&r->ipc_offered, 1);
    *sent = true;
    return ZF_STATUS_OK;
}

/* The byte path for a device tensor: a host copy, pushed like any other. */
static zf_status_t s_send_host_copy(zf_remote_t *r, zf__remote_peer_t *p, const char *device,
                                    const char *key, int64_t step_id, zf_tensor_t *tensor)
{
    zf_tensor_t *host = NULL;
    zf_status_t s = zf_gpu_tensor_download(tensor, &host);
    if (!zf_ok(s)) return zf_status_prefix(s, "sending '%s' to %s", key, device);
    s = zf__remote_peer_send(r, p, device, key, step_id, host, false);
    zf_tensor_unref(&host);
    return s;
}

zf_status_t zf__remote_send_device_tensor(zf_remote_t *r, zf__remote_peer_t *p, const char *device,
                                          const char *key, int64_t step_id, zf_tensor_t *tensor)
{
    bool sent = false;
    if (!atomic_load(&p->ipc_refused) && zf_tensor_nbytes(tensor) > 0 && s_is_gpu(device)) {
        zf_status_t s = s_offer(r, p, device, key, step_id, tensor, &sent);
        if (!zf_ok(s)) return zf_status_prefix(s, "sending '%s' to %s", key, device);
    }
    return sent ? ZF_STATUS_OK : s_send_host_copy(r, p, device, key, step_id, tensor);
}

/* A refusal: the receiver gets the bytes instead (of a device tensor, a
 * host copy; of a shared-memory offer, those of its arena block), and no
 * more offers of that kind. */
static void s_resend_refused(zf_remote_t *r, zf__remote_held_t *h,
                             const zf_tensor_frame_reply_t *reply)
{
    zf__remote_peer_t *p = zf__remote_peer_find(r, h->device);
    zf_log_info("remote", "%s refused %s (%s); sending it bytes", h->device,
                h->shm ? "shared memory" : "CUDA IPC", reply->why);
    zf_status_t s = p ? ZF_STATUS_OK
                      : zf_status_new(ZF_UNAVAILABLE,
                                      "no rendezvous endpoint is known for device %s", h->device);
    if (p) {
        atomic_store(h->shm ? &p->shm_refused : &p->ipc_refused, true);
        s = h->shm ? zf__remote_peer_send(r, p, h->device, h->key, h->step_id, h->tensor, false)
                   : s_send_host_copy(r, p, h->device, h->key, h->step_id, h->tensor);
        zf__remote_peer_release(r, &p);
    }
    if (!zf_ok(s)) zf_log_warn("remote", "step %lld: %s", (long long)h->step_id, zf_status_msg(&s));
    zf_status_clear(&s);
}

void zf__remote_on_reply(zf_remote_t *r, const zf_tensor_frame_reply_t *reply)
{
    pthread_mutex_lock(&r->mu);
    zf__remote_held_t *h = zf__remote_held_take_locked(r, reply->id, 0);
    pthread_mutex_unlock(&r->mu);
    if (!h) { /* its step ended here first */
        zf_log_debug("remote", "reply to IPC offer %llu, no longer held",
                     (unsigned long long)reply->id);
        return;
    }
    if (h->shm)
        atomic_fetch_add(reply->accepted ? &r->shm_released : &r->shm_refused, 1);
    else
        atomic_fetch_add(reply->accepted ? &r->ipc_released : &r->ipc_refused, 1);
    if (!reply->accepted) s_resend_refused(r, h, reply);
    zf__remote_held_free_all(&h);
}

/* ---- CUDA IPC: receiving ----------------------------------------------------------- */

bool zf__remote_key_src(const char *key, char *out, size_t cap)
{
    const char *src = NULL;
    size_t n = 0;
    if (!zf_rendezvous_key_src_device(key, &src, &n) || n >= cap) return false;
    memcpy(out, src, n);
    out[n] = '\0';
    return true;
}

void zf__remote_reply(zf_remote_t *r, const char *src, uint64_t id, int64_t step_id, bool accepted,
                      const char *why)
{
    zf_tensor_frame_reply_t reply = {.id = id, .step_id = step_id, .accepted = accepted};
    snprintf(reply.why, sizeof reply.why, "%s", why);
    zf__remote_peer_t *p = zf__remote_peer_find(r, src);
    zf_status_t s =
        p ? ZF_STATUS_OK
          : zf_status_new(ZF_UNAVAILABLE, "no rendezvous endpoint is known for %s", src);
    if (p) {
        pthread_mutex_lock(&p->mu);
        s = zf__remote_peer_socket_locked(r, p);
        if (zf_ok(s)) s = zf_tensor_frame_send_reply(p->push, &reply);
        pthread_mutex_unlock(&p->mu);
        zf__remote_peer_release(r, &p);
    }
    if (!zf_ok(s)) /* the sender lets the memory go at the step's end */
        zf_log_warn("remote", "cannot answer offer %llu of step %lld: %s", (unsigned long long)id,
                    (long long)step_id, zf_status_msg(&s));
    zf_status_clear(&s);
}

void zf__remote_acker_unref(zf__remote_acker_t **a_p)
{
    zf__remote_acker_t *a = *a_p;
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
    if (o->acker->r && !o->answered)
        zf__remote_reply(o->acker->r, o->src, o->id, o->step_id, true, "");
    pthread_mutex_unlock(&o->acker->mu);
    zf__remote_acker_unref(&o->acker);
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
        zf__remote_acker_unref(&o->acker);
        free(o);
        return s;
    }
    s = zf_tensor_from_buffer(f->offer->dtype, &f->offer->shape, buf, 0, out);
    if (!zf_ok(s)) o->answered = true; /* the caller refuses it */
    zf_buffer_unref(&buf);
    return s;
}

void zf__remote_on_offer(zf_remote_t *r, zf_tensor_frame_t *f)
{
    char src[ZF_DEVICE_NAME_MAX + 1], why[2 * ZF_TENSOR_FRAME_MAX_HOST + 64];
    atomic_fetch_add(&r->ipc_received, 1);
    if (!zf__remote_key_src(f->key, src, sizeof src)) {
        atomic_fetch_add(&r->malformed, 1);
        zf_log_warn("remote", "IPC offer '%s' names no sending device; nobody to answer", f->key);
        return;
    }
    const char *refusal = s_refusal(r, f->offer->ipc.host, why, sizeof why);
    if (refusal) {
        zf__remote_reply(r, src, f->offer->ipc.id, f->step_id, false, refusal);
        return;
    }
    zf_status_t s = s_offer_tensor(r, f, src, &f->tensor);
    if (zf_ok(s)) {
        zf__remote_deliver(r, f); /* the rendezvous holds it; f's reference goes with f */
        return;
    }
    zf_log_warn("remote", "IPC offer '%s': %s", f->key, zf_status_msg(&s));
    zf__remote_reply(r, src, f->offer->ipc.id, f->step_id, false, zf_status_msg(&s));
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
