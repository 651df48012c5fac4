/* The rendezvous: where a step's _Send and _Recv kernels (and the client's
 * feeds and fetches, and later the network transport) meet by key.
 *
 * Semantics (docs/design.md, "Steps and failures"; TensorFlow's LocalRendezvous):
 * - One rendezvous per step: keys are the strings of zf_rendezvous_key()
 *   and need no step id inside; everything still queued is freed with the
 *   rendezvous when the step's last holder drops it.
 * - Per key, a FIFO. Sends and recvs pair 1:1 in order: the k-th recv on a
 *   key gets the k-th value sent on it. A send never blocks (the value waits
 *   in the queue); a recv never blocks (its callback fires when the value
 *   arrives, at once if it is already there).
 * - Every value carries an is_dead flag (control flow's dead tensors); a
 *   dead value may have no tensor.
 * - zf_rendezvous_start_abort(status) is sticky: the first abort's status is
 *   kept, every pending recv fires with it, queued values are dropped, and
 *   every later send or recv fails at once with it.
 * - A pending recv can be cancelled; it then fires with CANCELLED.
 *
 * A network transport that receives a tensor for a step simply calls
 * zf_rendezvous_send() on that step's rendezvous (zf_rendezvous_mgr_find());
 * sends to other processes go out through the remote-send hook below.
 *
 * Thread-safety: every function may be called from any thread. Callbacks
 * run without the rendezvous' lock held, on the thread that completed the
 * pairing (the sender's, the receiver's, the aborter's or the canceller's),
 * so they may send and recv again; they should be short and must not block
 * on another send. */
#ifndef ZF_RENDEZVOUS_H
#define ZF_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"

typedef struct zf_rendezvous zf_rendezvous_t;

/* A recv's completion. The callback owns status (zf_status_clear() it) and
 * the reference in tensor (zf_tensor_unref() it; NULL on error and possibly
 * for a dead value). */
typedef void (*zf_rendezvous_recv_fn)(zf_status_t status, zf_tensor_t *tensor, bool is_dead,
                                      void *arg);

/* A new, empty rendezvous for step step_id, holding one reference that the
 * caller owns. Errors: RESOURCE_EXHAUSTED. */
zf_status_t zf_rendezvous_new(int64_t step_id, zf_rendezvous_t **out);

/* Takes another reference; returns r. */
zf_rendezvous_t *zf_rendezvous_ref(zf_rendezvous_t *r);

/* Drops a reference and sets *r_p to NULL; the last one frees queued values
 * and fires any recv still pending with CANCELLED (abort first if recvs may
 * be pending: their callbacks then see the step's real status). NULL-safe. */
void zf_rendezvous_unref(zf_rendezvous_t **r_p);

int64_t zf_rendezvous_step_id(const zf_rendezvous_t *r);

/* Delivers a value: to the oldest pending recv on key, or to the back of the
 * key's queue. Takes its own reference on tensor (the caller keeps its
 * own); tensor may be NULL only when is_dead. Errors: the abort status once
 * aborted; INVALID_ARGUMENT for a NULL live tensor; RESOURCE_EXHAUSTED. */
zf_status_t zf_rendezvous_send(zf_rendezvous_t *r, const char *key, zf_tensor_t *tensor,
                               bool is_dead);

/* As zf_rendezvous_send(), but always into this rendezvous' own table,
 * never through the remote-send hook below: for a value that arrived from
 * a peer, whose key names this process' device (a key naming another
 * device waits here unreceived; it is never sent on). */
zf_status_t zf_rendezvous_put(zf_rendezvous_t *r, const char *key, zf_tensor_t *tensor,
                              bool is_dead);

/* zf_rendezvous_put_all() takes the lock once for this many values. */
#define ZF_RENDEZVOUS_PUT_CHUNK 64

/* A value for zf_rendezvous_put_all(). */
typedef struct zf_rendezvous_value {
    const char *key; /* key_len bytes, NUL-terminated */
    size_t key_len;
    zf_tensor_t *tensor; /* a reference the put takes (NULL afterwards); NULL only when is_dead */
    bool is_dead;
} zf_rendezvous_value_t;

/* As zf_rendezvous_put() of v[0], ..., v[n-1] in turn, under one lock:
 * values already checked (a live one has a tensor), whose references are
 * taken rather than shared. The recvs they satisfy are called after the
 * lock is let go, in order. Returns how many were put: the first ones,
 * all n unless the rendezvous is aborted (*status its abort status) or
 * memory runs out (RESOURCE_EXHAUSTED); the rest keep their references. */
size_t zf_rendezvous_put_all(zf_rendezvous_t *r, zf_rendezvous_value_t *v, size_t n,
                             zf_status_t *status);

/* ---- remote sends -------------------------------------------------------
 * A rendezvous may carry a "remote send" hook: a send whose key names a
 * destination device (the key's third ';'-separated field) other than the
 * hook's local device goes through the hook instead of the local table, so
 * _Send reaches a peer process without knowing about the network. A key
 * without a third field is local. The hook runs without the rendezvous'
 * lock held, on the sender's thread, and only while the rendezvous is not
 * aborted; it may block (a full send queue). A hook that does not know
 * dst_device leaves the value to the local table (client-terminated keys
 * name a client device that no process owns). */

/* Pushes one value towards the process that owns dst_device and sets *sent;
 * with *sent false (an unknown device) the value is queued locally instead.
 * tensor is borrowed (take a reference to keep it); returns the send's
 * status. */
typedef zf_status_t (*zf_rendezvous_remote_fn)(void *arg, int64_t step_id, const char *key,
                                               const char *dst_device, zf_tensor_t *tensor,
                                               bool is_dead, bool *sent);

/* Installs (fn != NULL) or removes the hook. local_device (a full device
 * name) is copied; arg is borrowed and must outlive the rendezvous. Later
 * sends use the new hook. Errors: RESOURCE_EXHAUSTED. */
zf_status_t zf_rendezvous_set_remote(zf_rendezvous_t *r, const char *local_device,
                                     zf_rendezvous_remote_fn fn, void *arg);

/* ---- send batches -------------------------------------------------------
 * A thread about to make several sends in a row (the engine, running _Send
 * nodes that are ready together) may open a batch: until it ends it, a
 * remote-send hook may hold small values back and push them together when
 * the batch ends, one message per peer, instead of one message each. A
 * thread without an open batch holds nothing back, so a lone send leaves
 * at once. Batches are per thread and do not nest. A value held back has
 * been "sent" for its caller (the send returned OK); a hook that then
 * fails to push it aborts its step's rendezvous with the reason. */

/* What a hook that held values back runs when the batch ends. */
typedef void (*zf_rendezvous_flush_fn)(void *arg);

/* Opens a batch on this thread; false (and nothing changes) when one is
 * open already. */
bool zf_rendezvous_batch_begin(void);

/* Ends this thread's batch, if one is open: runs every flush deferred in
 * it, in the order they were deferred. */
void zf_rendezvous_batch_end(void);

/* Whether this thread has a batch open. */
bool zf_rendezvous_batch_is_open(void);

/* For hooks: has fn(arg) run when this thread's batch ends (once, however
 * often it is asked). False when no batch is open or too many flushes are
 * deferred already: then hold nothing back. */
bool zf_rendezvous_batch_defer(zf_rendezvous_flush_fn fn, void *arg);

/* Asks for the next value on key. done fires exactly once — possibly before
 * this returns — unless this returns an error (the abort status once
 * aborted; RESOURCE_EXHAUSTED), in which case it never fires. *token (when
 * token is non-NULL) identifies the recv for zf_rendezvous_cancel_recv(). */
zf_status_t zf_rendezvous_recv_async(zf_rendezvous_t *r, const char *key,
                                     zf_rendezvous_recv_fn done, void *arg, uint64_t *token);

/* Cancels a pending recv: true when it was still pending, in which case its
 * callback has fired with CANCELLED "RecvAsync is cancelled" before this
 * returns; false when it had already completed (or is completing). */
bool zf_rendezvous_cancel_recv(zf_rendezvous_t *r, const char *key, uint64_t token);

/* Blocking recv for callers outside the executor (the session collecting
 * fetches). Waits up to timeout_ms (< 0: no limit). On success *out is an
 * owned reference (NULL for a dead value without a tensor) and *is_dead the
 * flag (is_dead may be NULL). Errors: the abort status, DEADLINE_EXCEEDED
 * "timed out waiting for '<key>'". */
zf_status_t zf_rendezvous_recv(zf_rendezvous_t *r, const char *key, int64_t timeout_ms,
                               zf_tensor_t **out, bool *is_dead);

/* Aborts the rendezvous with a copy of *status (which must be an error).
 * Only the first abort counts; later ones are ignored. */
void zf_rendezvous_start_abort(zf_rendezvous_t *r, const zf_status_t *status);

/* A copy of the abort status (OK when not aborted); caller clears it. */
zf_status_t zf_rendezvous_status(zf_rendezvous_t *r);

/* Values queued without a recv, and recvs waiting for a value (tests,
 * diagnostics). */
void zf_rendezvous_pending(zf_rendezvous_t *r, size_t *values, size_t *recvs);

/* Keys the rendezvous holds something for (values or recvs): a key is
 * forgotten once its last value is taken, so a loop that makes a key per
 * iteration leaves none behind (tests, diagnostics). */
size_t zf_rendezvous_num_keys(zf_rendezvous_t *r);

/* ---- per-process table of step rendezvous ------------------------------
 * Maps step ids to rendezvous, so that tensors arriving from the network
 * before a step starts locally have somewhere to wait (executor/
 * rendezvous_mgr.c).
 *
 * A step is CLAIMED once a local RunGraph has asked for it
 * (zf_rendezvous_mgr_claim()), and UNCLAIMED while only arriving tensors
 * have (zf_rendezvous_mgr_find(), zf_rendezvous_mgr_deliver()). A peer may
 * send tensors for steps that never start here (a stray, a replay, a buggy
 * or hostile peer), so unclaimed steps are bounded: each lives at most
 * ttl_ms after its creation, at most max_unclaimed of them exist, and the
 * tensors delivered to them hold at most max_bytes (defaults 60000 ms, 1024
 * and 1 GiB). The limits are enforced on find, claim and deliver calls,
 * without a thread: expired steps go first, then the oldest unclaimed steps
 * whenever a new step or a new tensor would pass a cap. A removed step's
 * rendezvous is aborted with ABORTED "step <id> never started on this
 * executor: its tensors were dropped after <ttl> ms", "... dropped because
 * more than <cap> steps waited to start" or "... dropped because the steps
 * waiting to start held more than <max_bytes> bytes", its queued tensors
 * are freed, holders of references see that status, and one warning is
 * logged. Claimed steps are never removed that way: their owner ends them
 * with zf_rendezvous_mgr_cleanup().
 *
 * Bytes: a tensor delivered to an unclaimed step with
 * zf_rendezvous_mgr_deliver() counts its buffer's bytes (and a host STRING
 * tensor its elements' bytes) until the step is claimed or removed; values
 * sent straight into a found rendezvous (zf_rendezvous_send()) do not
 * count. A host tensor delivered to an unclaimed step that views only part
 * of its buffer (a batch entry views the batch's payload frame) is copied
 * into a buffer of its own first, so that the step holds no more than is
 * counted; a claimed step takes it as it is. A tensor larger than
 * max_bytes on its own is refused: see zf_rendezvous_mgr_deliver().
 *
 * Thread-safety: every function may be called from any thread. find, claim
 * and deliver are O(1) expected (a hash on the step id; expiry looks only
 * at the oldest unclaimed step). The abort of a removed step runs after the
 * table's lock is released but before the call returns, on the caller's
 * thread: recv callbacks pending on an unclaimed step fire there, so they
 * must not take a lock the caller of find, claim or deliver holds. */
typedef struct zf_rendezvous_mgr zf_rendezvous_mgr_t;

/* The counters: every step ever added is still in the table or was
 * removed by exactly one of cleanup, expiry or eviction, so
 * added == steps + cleaned + expired + evicted. */
typedef struct {
    size_t steps;           /* in the table now, claimed or not */
    size_t unclaimed;       /* of which not claimed */
    size_t unclaimed_bytes; /* counted for the unclaimed ones (see "Bytes" above) */
    uint64_t added;         /* steps ever added */
    uint64_t cleaned;       /* steps removed by zf_rendezvous_mgr_cleanup(), ever */
    uint64_t expired;       /* unclaimed steps removed for their age, ever */
    uint64_t evicted;       /* unclaimed steps removed by the step or byte cap, ever */
    uint64_t refused;       /* tensors refused for being over the byte cap alone, ever */
} zf_rendezvous_mgr_stats_t;

/* An empty table with the default limits; caller owns it. Errors:
 * RESOURCE_EXHAUSTED. */
zf_status_t zf_rendezvous_mgr_new(zf_rendezvous_mgr_t **out);

/* Aborts every rendezvous still registered with CANCELLED and frees the
 * table. NULL-safe, sets *mgr_p to NULL. */
void zf_rendezvous_mgr_destroy(zf_rendezvous_mgr_t **mgr_p);

/* The rendezvous for step_id, created UNCLAIMED when missing (finding an
 * existing step leaves its state alone); first removes unclaimed steps past
 * the limits. *out is a new reference the caller owns. A step the limits
 * removed (one of the last ZF_RENDEZVOUS_MGR_DROPPED_IDS) is not created
 * again: its tensors are gone, so a RunGraph for it could only wait.
 * Errors: ABORTED "step N never started on this executor in time: ..."
 * for such a step; RESOURCE_EXHAUSTED. */
#define ZF_RENDEZVOUS_MGR_DROPPED_IDS 4096
zf_status_t zf_rendezvous_mgr_find(zf_rendezvous_mgr_t *mgr, int64_t step_id,
                                   zf_rendezvous_t **out);

/* Like zf_rendezvous_mgr_find(), and marks the step CLAIMED: tensors
 * already queued for it stay (and stop counting against the byte cap), and
 * it lives until zf_rendezvous_mgr_cleanup(). Errors: as
 * zf_rendezvous_mgr_find(). */
zf_status_t zf_rendezvous_mgr_claim(zf_rendezvous_mgr_t *mgr, int64_t step_id,
                                    zf_rendezvous_t **out);

/* A reference to step_id's rendezvous in *out when the step is in the
 * table and claimed (else false, *out NULL), without making it or
 * enforcing the limits: values for a claimed step are not counted, so a
 * receiver with many for one step may look it up once and put them all
 * (zf_rendezvous_put(), zf_rendezvous_put_all()). */
bool zf_rendezvous_mgr_find_claimed(zf_rendezvous_mgr_t *mgr, int64_t step_id,
                                    zf_rendezvous_t **out);

/* Delivers a value that arrived for step_id (the network transport's
 * path): zf_rendezvous_mgr_find() then zf_rendezvous_send(), with the
 * value's bytes counted while the step is unclaimed. When they would pass
 * max_bytes, the oldest unclaimed steps are removed first (the step itself
 * too when it is the oldest; the value is then dropped with the step's
 * ABORTED status). A value over max_bytes on its own is refused: the step
 * is aborted with RESOURCE_EXHAUSTED "step N has not started on this
 * executor and cannot hold '<key>': its B bytes are more than the M bytes
 * allowed for the tensors of steps waiting to start", which is returned
 * and logged, and which its RunGraph then meets (the step stays unclaimed,
 * holding nothing, until its ttl). tensor is borrowed as by
 * zf_rendezvous_send() (or copied, see "Bytes" above). Errors: those of
 * zf_rendezvous_mgr_find() and zf_rendezvous_send() (the step's abort
 * status), RESOURCE_EXHAUSTED as above or when the copy cannot be made. */
zf_status_t zf_rendezvous_mgr_deliver(zf_rendezvous_mgr_t *mgr, int64_t step_id, const char *key,
                                      zf_tensor_t *tensor, bool is_dead);

/* Sets the bounds on unclaimed steps: at most max_unclaimed of them, each
 * for at most ttl_ms after its creation; a value <= 0 selects the default
 * (1024, 60000 ms). Steps past new limits go on the next find or claim. */
void zf_rendezvous_mgr_set_limits(zf_rendezvous_mgr_t *mgr, int max_unclaimed, int64_t ttl_ms);

/* Sets the most bytes the tensors of unclaimed steps may hold; 0 selects
 * the default (1 GiB). Steps past a new limit go on the next find, claim
 * or deliver. */
void zf_rendezvous_mgr_set_max_bytes(zf_rendezvous_mgr_t *mgr, size_t max_bytes);

/* A snapshot of the table's counters. */
zf_rendezvous_mgr_stats_t zf_rendezvous_mgr_stats(zf_rendezvous_mgr_t *mgr);

/* Every rendezvous the table creates from now on gets this remote-send
 * hook (see zf_rendezvous_set_remote()); ones created before keep theirs.
 * Errors: RESOURCE_EXHAUSTED. */
zf_status_t zf_rendezvous_mgr_set_remote(zf_rendezvous_mgr_t *mgr, const char *local_device,
                                         zf_rendezvous_remote_fn fn, void *arg);

/* Ends step_id, claimed or not: removes its rendezvous from the table,
 * aborting it with *status when that is an error (recvs still pending then
 * fail with it). Holders of references keep the object until they drop
 * them. An unknown step_id is ignored. */
void zf_rendezvous_mgr_cleanup(zf_rendezvous_mgr_t *mgr, int64_t step_id,
                               const zf_status_t *status);

#endif
