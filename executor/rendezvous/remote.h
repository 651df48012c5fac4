/* The network data plane of an executor process (docs/service.md, "Data
 * plane"): one PULL socket that receives tensors pushed by peers and hands
 * them to the step's rendezvous, and one PUSH socket per peer for the
 * tensors this process sends.
 *
 * Design note. A receiver thread waits on the PULL socket; each tensor frame
 * (common/tensor_frame.h) goes to zf_rendezvous_mgr_deliver(step), so a
 * tensor that arrives before its step starts here waits in the step's
 * rendezvous until the _Recv asks for it. Steps ended with
 * zf_remote_cleanup_step() are remembered (the most recent
 * ZF_REMOTE_CLOSED_STEPS of them), and tensors still arriving for them are
 * dropped and counted instead of creating a rendezvous nobody will free;
 * steps that tensors created but no RunGraph ever claimed are bounded by
 * the table's own limits on their number, age and bytes
 * (executor/rendezvous/rendezvous.h). A tensor the table refuses (one larger than the
 * byte limit on its own) aborts its step there with RESOURCE_EXHAUSTED
 * naming the step, the size and the limit, so the step's RunGraph fails
 * with that error and the scheduler reports it; the tensor is dropped and
 * counted like any other the step cannot take.
 * A malformed frame is logged, counted and dropped; the next one is read
 * normally. The executor service polls the PULL socket from its own event
 * loop instead (zf_remote_new_polled()), saving a thread hand-off.
 *
 * Sending: zf_remote_attach() installs the remote-send hook
 * (executor/rendezvous/rendezvous.h) on the rendezvous table, so a _Send whose key names
 * another device pushes the tensor to the rendezvous endpoint of the peer
 * that owns that device (zf_remote_set_peer()). A peer's PUSH socket is made
 * on first use and cached; a mutex per peer serialises the threads that
 * share it, because ZeroMQ sockets are not thread-safe.
 *
 * Restarted peers. A peer is an (endpoint, incarnation) pair. When a device
 * moves to another endpoint or incarnation (zf_remote_update_peer()), a new
 * peer replaces the old one in the table; the old one, with its socket and
 * the tensors still queued on it for the dead process, is closed when the
 * last send that was using it returns, so no send ever waits on the table
 * lock behind a blocked peer. Tensors queued for the old incarnation belong
 * to steps that cannot finish anyway; dropping them releases their
 * references. A step placed for a given incarnation waits for it with
 * zf_remote_wait_peer_incarnation() before its first send.
 *
 * Same-host GPU to GPU (CUDA IPC). A live tensor in GPU memory sent to a
 * GPU device whose peer has not refused IPC is offered instead of copied:
 * the transport exports a handle (zf_gpu_ipc_export()), pushes a
 * header-only frame with it (common/tensor_frame.h, "ipc") and holds the
 * tensor until the receiver's reply, until zf_remote_cleanup_step() of its
 * step, or at most the hold limit (ZF_REMOTE_IPC_HOLD_MS; see
 * zf_remote_expire()), so a receiver that dies never pins it longer. The
 * receiver refuses an offer from another host (host ids differ:
 * hostname:boot id) or when built without CUDA; the sender then pushes the
 * bytes and sends that peer bytes from then on (a refused offer's bytes
 * may follow a later value on another key: order is kept per key only
 * while all its values go one way). An accepted offer reaches the step's rendezvous as a
 * placeholder tensor (zf_remote_ipc_offer()): the GPU _Recv opens the
 * handle, copies device to device into its own memory and drops the
 * placeholder, and that release — or any other, such as the step's abort
 * — answers the sender, which then drops its reference. Every other
 * device tensor (a CPU receiver, an export that fails) is copied to the
 * host and sent as bytes; host tensors take the byte path unchanged,
 * except for the shared-memory path below.
 *
 * Same-host host memory (shared memory). A live host tensor of a
 * fixed-size dtype, of at least the shared-memory threshold
 * (zf_remote_set_shm(); ZF_REMOTE_SHM_MIN_BYTES), sent to a peer not known
 * to be on another host (zf_remote_set_peer_host()) and that has not
 * refused one, is copied once into this process's arena: one POSIX shared
 * memory segment of a bounded size (ZF_REMOTE_SHM_MIB, the executor's
 * --shm-mib), created on first use as "/zflow-<pid>-<64 random bits in
 * hex>", its pages reserved as they are first used (so a full /dev/shm is
 * a failed allocation, never a SIGBUS). The header-only frame
 * (common/tensor_frame.h, "shm") names the segment, the block's offset and
 * size, an offer id and the host id; the receiver checks the host id, the
 * name (the prefix, then only digits, '-' and hex), the range against the
 * segment's size and the alignment, maps the whole segment once (a few
 * senders' segments stay mapped, ZF__REMOTE_SHM_MAPS) and hands the step a
 * tensor over the mapped bytes: no copy on the receiving side. When the
 * last reference to that tensor goes, the receiver stores the offer's id
 * into the block's release word (a 64-bit word after the tensor's bytes,
 * on a cache line of its own, whose offset the offer names: "rel"), with
 * no message at all, and the sender frees the block the next time it
 * looks: before each shared-memory send, in zf_remote_expire() and in
 * zf_remote_shm_stats() (zf__remote_shm_reap()). An offer without a
 * release word (a sender before it) is answered with the IPC reply
 * message instead, as is a refusal. Freed blocks are reused most recent
 * first when the size matches (the arena keeps the last few apart), so a
 * steady stream of transfers cycles through as few blocks as are in
 * flight, whose lines are still in the caches; the pages are reserved in
 * steps of a few MiB and mapped in at once (MADV_POPULATE_WRITE) rather
 * than faulted in page by page by the first copies. The block is held
 * like an IPC offer (same list, same hold limit,
 * zf_remote_set_ipc_hold_ms()), with one difference: the receiver reads it
 * in place for as long as it keeps the tensor (past its step; a variable
 * may keep it for good), so neither zf_remote_cleanup_step() nor the hold
 * limit alone frees it. At the hold limit an unanswered block is freed
 * once no receiver maps the arena (another transport of this process, or
 * another process: /proc/<pid>/maps; none left means the receivers that
 * could read it have died), else it is kept for another hold limit
 * (logged). A refusal
 * (another host, a segment it cannot map) sends the bytes from the block
 * and that peer gets bytes from then on. A full arena, a segment that
 * cannot be made, a dead or string tensor, or a smaller one take the byte
 * path (fallbacks count the first). The segment's name is unlinked when
 * the transport is destroyed; a process that dies leaves its segment
 * behind until the next transport starts on the host, which removes every
 * /dev/shm/zflow-<pid>-* whose pid is not running
 * (zf_remote_shm_sweep()). Mappings a receiver holds stay valid after the
 * sender unlinks or dies; the memory goes with the last one.
 *
 * Batches. Small tensors a thread sends one after another to the same
 * peer travel together when the thread has opened a send batch
 * (zf_rendezvous_batch_begin(); the engine does so around _Sends that are
 * ready together): a host tensor whose payload is at most
 * zf_remote_set_batch()'s limit (ZF_REMOTE_BATCH_MAX_BYTES), strings and
 * dead values included, that does not go through the arena, is encoded
 * into the thread's outbox for that peer instead of being pushed, and the
 * outbox leaves as one batch message (common/tensor_frame.h, "Batches")
 * when the batch ends, or as soon as it holds 256 tensors (the first
 * pieces of a long batch 32, 64 and 128, so that the receiver starts on
 * them early) or 256 KiB of payloads (a tensor that would take it past
 * ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD leaves alone). Larger tensors, device tensors and arena offers
 * leave at once, batch or not (a tensor's order is kept per key only). Without an open batch
 * nothing is held back, so a lone tensor never waits. A batch that cannot be pushed aborts the
 * steps of its tensors here with the reason. The receiver hands each entry to its step as if it had
 * come alone; its fixed-size tensors view the received frame (no copy; a tensor kept for
 * long keeps the frame's at most 256 KiB of payloads, and the batch's block of views, alive). An
 * entry that fails its checks is counted (malformed, batch_refused), logged, and its step, when its
 * step id could be read, is aborted here with INVALID_ARGUMENT "step N: tensor '<key>' arrived
 * malformed in a batch on <endpoint>: entry I of M: <reason>", so the _Recv waiting for it fails at
 * once rather than at the step's timeout; the other entries are delivered. A batch whose framing is
 * unsound (its payloads do not add up to the payload frame, an entry or the payload frame is over
 * its limit) is dropped whole, logged with the reason and counted as one malformed message, like
 * any other.
 *
 * Thread-safety: every function may be called from any thread, except that
 * zf_remote_destroy() must not race with other calls, nor come while a
 * thread's send batch still holds tensors for the transport (end it
 * first). */
#ifndef ZF_REMOTE_H
#define ZF_REMOTE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"
#include "common/transport.h"
#include "executor/devices/gpu.h"
#include "executor/rendezvous/rendezvous.h"

#define ZF_REMOTE_CLOSED_STEPS 4096
/* How long a send may wait on a peer's full queue before it fails. */
#define ZF_REMOTE_SEND_TIMEOUT_MS 30000
/* How long an IPC offer is held at most by default (zf_remote_expire()). */
#define ZF_REMOTE_IPC_HOLD_MS 60000
/* The shared-memory arena's default size, and the smallest tensor that
 * goes through it by default. */
#define ZF_REMOTE_SHM_MIB       256
#define ZF_REMOTE_SHM_MIN_BYTES (64 * 1024)
/* The largest tensor payload a send batch holds back by default. */
#define ZF_REMOTE_BATCH_MAX_BYTES (64 * 1024)
/* The name prefix of every arena segment (in /dev/shm without the '/'). */
#define ZF_REMOTE_SHM_PREFIX "/zflow-"

typedef struct zf_remote zf_remote_t;

/* Binds the PULL socket at bind_endpoint (NULL: "tcp://127.0.0.1:*") and
 * starts the receiver thread, which delivers into mgr. ctx and mgr are
 * borrowed and must outlive the transport. Caller owns *out.
 * Errors: those of zf_socket_new and zf_socket_bind (UNAVAILABLE when the
 * address cannot be bound), RESOURCE_EXHAUSTED. */
zf_status_t zf_remote_new(zf_zctx_t *ctx, zf_rendezvous_mgr_t *mgr, const char *bind_endpoint,
                          zf_remote_t **out);

/* As zf_remote_new(), but with no receiver thread: the caller's own event
 * loop polls zf_remote_poll_handle() (a ZeroMQ socket, for zmq_poll) and
 * calls zf_remote_pump() when it is readable. Tensors are then delivered,
 * and the _Recv callbacks they complete run, on that loop's thread, which
 * saves a thread hand-off per tensor. zf_remote_pump() must only be called
 * from one thread at a time. */
zf_status_t zf_remote_new_polled(zf_zctx_t *ctx, zf_rendezvous_mgr_t *mgr,
                                 const char *bind_endpoint, zf_remote_t **out);

/* The PULL socket's ZeroMQ handle, to poll for ZMQ_POLLIN. */
void *zf_remote_poll_handle(const zf_remote_t *r);

/* Handles the messages waiting on a polled transport's PULL socket, at
 * most max of them, without blocking; returns how many it handled. The
 * loop that pumps also calls zf_remote_expire() now and then. */
int zf_remote_pump(zf_remote_t *r, int max);

/* Stops the receiver thread, closes every socket (queued outgoing tensors
 * are dropped and their references released) and frees the transport.
 * NULL-safe, sets *r_p to NULL. */
void zf_remote_destroy(zf_remote_t **r_p);

/* The endpoint the PULL socket is bound to, with the real port. Borrowed. */
const char *zf_remote_endpoint(const zf_remote_t *r);

/* Makes the transport the remote-send hook of every rendezvous mgr creates
 * from now on, for a process whose device is local_device (a full name).
 * Sends to devices without a known peer stay in the local rendezvous (the
 * client-terminated keys of feeds and fetches). Errors: RESOURCE_EXHAUSTED. */
zf_status_t zf_remote_attach(zf_remote_t *r, const char *local_device);

/* Records (or replaces) the rendezvous endpoint of the peer that owns device
 * (a full device name), its incarnation unknown: zf_remote_update_peer()
 * with incarnation 0. */
zf_status_t zf_remote_set_peer(zf_remote_t *r, const char *device, const char *endpoint);

/* Records the peer that owns device: its rendezvous endpoint and
 * incarnation (0: unknown). A peer whose endpoint or known incarnation
 * changes is replaced: its socket is closed and what was queued on it is
 * dropped (see the design note). *changed (may be NULL) tells whether the
 * table changed. Errors: INVALID_ARGUMENT for an empty device or endpoint,
 * RESOURCE_EXHAUSTED. */
zf_status_t zf_remote_update_peer(zf_remote_t *r, const char *device, const char *endpoint,
                                  uint64_t incarnation, bool *changed);

/* Waits up to timeout_ms (0: just look) until a peer is known for device;
 * true when it is. */
bool zf_remote_wait_peer(zf_remote_t *r, const char *device, int timeout_ms);

/* Waits up to timeout_ms (0: just look) until the peer known for device is
 * of incarnation (0: any); true when it is. */
bool zf_remote_wait_peer_incarnation(zf_remote_t *r, const char *device, uint64_t incarnation,
                                     int timeout_ms);

/* The incarnation recorded for device's peer; 0 when unknown or no peer. */
uint64_t zf_remote_peer_incarnation(zf_remote_t *r, const char *device);

/* Pushes one tensor (borrowed; a reference is kept until ZeroMQ has written
 * it) to the peer owning device. A tensor in GPU memory, whose producing
 * work must be finished, is offered over CUDA IPC (and held until the
 * reply) or copied to the host first (see the design note). May block up
 * to ZF_REMOTE_SEND_TIMEOUT_MS on a full queue. Errors: UNAVAILABLE "no
 * rendezvous endpoint is known for device <d>", CANCELLED for an IPC offer
 * in a step already cleaned up here, the errors of zf_tensor_frame_send,
 * zf_socket_connect and zf_gpu_tensor_download. */
zf_status_t zf_remote_send(zf_remote_t *r, const char *device, const char *key, int64_t step_id,
                           zf_tensor_t *tensor, bool is_dead);

/* The rendezvous of step_id (created on first use, as the receiver does),
 * or *out NULL when the step was already cleaned up here. *out is a new
 * reference. Errors: RESOURCE_EXHAUSTED; ABORTED "step N never started on
 * this executor in time" for a step the table dropped unclaimed (its TTL,
 * count or byte limit), which is never made again. */
zf_status_t zf_remote_step_rendezvous(zf_remote_t *r, int64_t step_id, zf_rendezvous_t **out);

/* As zf_remote_step_rendezvous(), for the RunGraph that starts step_id
 * here: the step is claimed (zf_rendezvous_mgr_claim()), so it is no
 * longer subject to the limits on steps that only tensors created. */
zf_status_t zf_remote_claim_step(zf_remote_t *r, int64_t step_id, zf_rendezvous_t **out);

/* Ends step_id here: removes its rendezvous from mgr (aborting it with
 * *status when that is an error) and drops tensors that arrive for it
 * later. */
void zf_remote_cleanup_step(zf_remote_t *r, int64_t step_id, const zf_status_t *status);

/* Ends step_id here after its partition ran to the end without an error:
 * as zf_remote_cleanup_step() with no error, except that device tensors
 * this process offered over IPC stay held until their receiver answers
 * (it may still be copying), a later zf_remote_cleanup_step(), or the hold
 * limit (zf_remote_expire()). */
void zf_remote_finish_step(zf_remote_t *r, int64_t step_id);

/* The milliseconds of a monotonic clock, which held offers are stamped
 * with and zf_remote_expire() compares against. */
int64_t zf_remote_now_ms(void);

/* Sets how long an IPC offer is held at most (<= 0: ZF_REMOTE_IPC_HOLD_MS);
 * it applies to the offers already held too. */
void zf_remote_set_ipc_hold_ms(zf_remote_t *r, int64_t hold_ms);

/* Releases the IPC offers held for the hold limit or longer at now_ms
 * (zf_remote_now_ms(); tests pass their own), whose receiver never
 * answered (it died, or its answer was lost), counts them (ipc_expired)
 * and logs one warning for the lot; returns how many. A receiver that
 * answers later is ignored. An offer released this way may still be
 * opened by a receiver that is only slow, which then copies memory the
 * sender may have reused: the limit must be far longer than any receiver
 * takes to copy. Cheap when nothing is due (a lock and a comparison): the
 * receiver thread calls it after each wait, and so should the loop that
 * calls zf_remote_pump(). */
int zf_remote_expire(zf_remote_t *r, int64_t now_ms);

/* Counters (tests, diagnostics): tensors handed to a rendezvous, tensors
 * dropped because their step was closed, aborted or refused them,
 * malformed messages (and refused batch entries); send batches pushed and
 * the tensors in them, batches received and their entries, entries
 * refused; IPC offers sent, released by their receiver, refused
 * by it, offers received, offers released by the hold limit
 * (zf_remote_expire()), and offers sent still held. */
typedef struct zf_remote_stats {
    uint64_t delivered;
    uint64_t dropped;
    uint64_t malformed;
    uint64_t batches_sent;           /* batch messages pushed */
    uint64_t batch_tensors_sent;     /* tensors in them */
    uint64_t batches_received;       /* batch messages received whole */
    uint64_t batch_tensors_received; /* entries in them, refused ones included */
    uint64_t batch_refused;          /* entries refused alone (also in malformed) */
    uint64_t ipc_offered;
    uint64_t ipc_released;
    uint64_t ipc_refused;
    uint64_t ipc_received;
    uint64_t ipc_expired;
    uint64_t ipc_held;
} zf_remote_stats_t;

zf_remote_stats_t zf_remote_stats(zf_remote_t *r);

/* Sets the largest tensor payload a send batch holds back (0: none, every
 * tensor leaves at once); ZF_REMOTE_BATCH_MAX_BYTES by default. Call it
 * before any tensor moves. */
void zf_remote_set_batch(zf_remote_t *r, size_t max_bytes);

/* ---- shared memory ------------------------------------------------------------- */

/* Sets the arena's size (0: no shared-memory path) and the smallest tensor
 * that takes it (0: ZF_REMOTE_SHM_MIN_BYTES). Call it before any tensor
 * moves; a transport starts with ZF_REMOTE_SHM_MIB and the default. */
void zf_remote_set_shm(zf_remote_t *r, size_t arena_bytes, size_t min_bytes);

/* Records the host id of device's peer (zf_remote_update_peer() first; a
 * replaced peer forgets it): a peer on another host gets bytes without an
 * offer, an unknown one (NULL or "") is offered and may refuse. */
void zf_remote_set_peer_host(zf_remote_t *r, const char *device, const char *host_id);

/* Removes the arena segments of processes that are no longer running
 * (/dev/shm/zflow-<pid>-*, pid not this process's); returns how many.
 * Every new transport calls it. */
int zf_remote_shm_sweep(void);

/* The arena's name ("" before its first use). Borrowed while r lives. */
const char *zf_remote_shm_name(zf_remote_t *r);

/* Shared-memory counters (tests, diagnostics): host tensors sent to peers
 * as bytes, offers sent, answered by release, refused, received and
 * mapped here, received and refused here (a bad or foreign segment),
 * released by the hold limit, tensors that qualified but found the arena
 * full (or unusable) and went as bytes; arena bytes in blocks now and the
 * segments this transport has live (0 or 1). */
typedef struct zf_remote_shm_stats {
    uint64_t bytes_sent;
    uint64_t shm_offered;
    uint64_t shm_released;
    uint64_t shm_refused;
    uint64_t shm_received;
    uint64_t shm_rejected;
    uint64_t shm_expired;
    uint64_t shm_fallbacks;
    uint64_t shm_bytes_in_use;
    uint64_t shm_segments;
} zf_remote_shm_stats_t;

zf_remote_shm_stats_t zf_remote_shm_stats(zf_remote_t *r);

/* ---- CUDA IPC ---------------------------------------------------------------- */

/* The device id of a placeholder's buffer: no real device has it. */
#define ZF_REMOTE_IPC_DEVICE_ID (-2)

/* Whether t is the placeholder of an accepted IPC offer; if so *h (may be
 * NULL) gets its handle and *src_device (may be NULL) the sending device,
 * borrowed while t lives. Its buffer is not memory: pass h to
 * zf_gpu_ipc_copy(), then drop t, which tells the sender it may let go. */
bool zf_remote_ipc_offer(const zf_tensor_t *t, zf_gpu_ipc_handle_t *h, const char **src_device);

/* This host's id, "hostname:boot id": equal for processes that can share
 * memory and GPUs (what executors report to the broker as host_id). */
void zf_remote_default_host_id(char *buf, size_t n);

/* The host id offers carry and are checked against: "hostname:boot id".
 * Borrowed. zf_remote_set_host_id() replaces it (tests: a second host);
 * call it before any tensor moves. */
const char *zf_remote_host_id(const zf_remote_t *r);
void zf_remote_set_host_id(zf_remote_t *r, const char *host_id);

#endif
