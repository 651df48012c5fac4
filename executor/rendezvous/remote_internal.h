/* Private to executor/rendezvous/remote*.c: the layout of zf_remote_t and what its
 * files share (remote.c: the sockets, peers, receiving, sending and steps;
 * remote_ipc.c: CUDA IPC offers, sent and received, and their hold limit;
 * remote_shm.c: the shared-memory arena, its offers and the mappings),
 * and a test hook. Not a public interface. */
#ifndef ZF_REMOTE_INTERNAL_H
#define ZF_REMOTE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/status.h"
#include "common/strmap.h"
#include "common/tensor.h"
#include "common/tensor_frame.h"
#include "common/transport.h"
#include "executor/rendezvous/remote.h"
#include "executor/rendezvous/step_set.h"

/* A peer: one incarnation of a device at one endpoint and, once used, the
 * PUSH socket connected to it. The table holds a reference and so does
 * each send in progress; the last one closes the socket. */
typedef struct zf__remote_peer {
    pthread_mutex_t mu;   /* serialises the socket */
    int refs;             /* guarded by the transport's mu */
    char *endpoint;       /* fixed for the peer's life */
    uint64_t incarnation; /* 0: unknown; guarded by the transport's mu */
    zf_socket_t *push;
    atomic_bool ipc_refused; /* it refused an IPC offer: send it bytes */
    atomic_bool shm_refused; /* it refused a shared-memory offer: send it bytes */
    atomic_int host;         /* ZF__REMOTE_HOST_*: whether it shares this host */
    atomic_bool replaced;    /* the device has moved on to another peer */
} zf__remote_peer_t;

/* What is known of a peer's host (zf_remote_set_peer_host()). */
enum { ZF__REMOTE_HOST_UNKNOWN, ZF__REMOTE_HOST_SAME, ZF__REMOTE_HOST_OTHER };

/* A device tensor offered over IPC, kept alive until the receiver's reply,
 * the step's cleanup or the hold limit (zf_remote_expire()); or the arena
 * block of a host tensor offered in shared memory (shm; the tensor wraps
 * the block, whose last reference frees it), kept until the reply, or the
 * hold limit once no receiver maps the arena. */
typedef struct zf__remote_held {
    struct zf__remote_held *next;
    uint64_t id;
    bool shm;
    /* a shared-memory block's release word, in the arena: the receiver
     * stores id there when done (remote_shm.c); NULL for IPC offers */
    _Atomic uint64_t *rel;
    int64_t step_id;
    int64_t held_at_ms; /* zf_remote_now_ms() when offered */
    char *device, *key;
    zf_tensor_t *tensor;
} zf__remote_held_t;

/* What the release of a received offer answers through: the transport
 * while it lives. Offers may be released after it is gone (the rendezvous
 * table outlives it), so they hold this, not the transport. */
typedef struct zf__remote_acker {
    pthread_mutex_t mu;
    atomic_int refs;
    zf_remote_t *r; /* NULL once the transport is destroyed */
} zf__remote_acker_t;

typedef struct zf__remote_arena zf__remote_arena_t;
typedef struct zf__remote_shm_map zf__remote_shm_map_t;

/* How many senders' segments a receiver keeps mapped. */
#define ZF__REMOTE_SHM_MAPS 16

struct zf_remote {
    zf_zctx_t *ctx;
    zf_rendezvous_mgr_t *mgr;
    zf_socket_t *pull;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu; /* guards peers, their refs and incarnations, closed and held */
    pthread_cond_t peers_changed;
    zf_strmap_t *peers;      /* device -> zf__remote_peer_t *, keys copied */
    zf_step_set_t *closed;   /* the most recent ZF_REMOTE_CLOSED_STEPS closed steps */
    zf__remote_held_t *held; /* guarded by mu, newest first */
    uint64_t n_held;
    uint64_t n_held_rel; /* guarded by mu: held blocks with a release word */
    int64_t ipc_hold_ms; /* guarded by mu: how long an offer is held at most */
    int64_t held_min_ms; /* guarded by mu: no held offer is older (INT64_MAX: none) */
    atomic_uint_fast64_t next_offer;
    zf__remote_acker_t *acker;
    char host_id[ZF_TENSOR_FRAME_MAX_HOST + 1];
    atomic_uint_fast64_t delivered, dropped, malformed;
    size_t batch_max_bytes; /* larger tensors are never held back for a batch; 0: no batches */
    atomic_uint_fast64_t batches_sent, batch_tensors_sent, batches_received, batch_tensors_received,
        batch_refused;
    atomic_uint_fast64_t ipc_offered, ipc_released, ipc_refused, ipc_received, ipc_expired;
    /* shared memory (remote_shm.c) */
    pthread_mutex_t shm_mu;      /* guards arena creation and maps */
    size_t shm_arena_bytes;      /* 0: no shared-memory path */
    atomic_size_t shm_min_bytes; /* smaller tensors go as bytes; read without shm_mu */
    bool shm_broken;             /* guarded by shm_mu: the arena could not be made */
    zf__remote_arena_t *arena;   /* made on first use; guarded by shm_mu */
    zf__remote_shm_map_t *maps[ZF__REMOTE_SHM_MAPS]; /* senders' segments mapped here */
    unsigned next_map;                               /* the slot the next mapping evicts */
    atomic_uint_fast64_t bytes_sent, shm_offered, shm_released, shm_refused, shm_received,
        shm_rejected, shm_expired, shm_fallbacks;
};

/* ---- remote.c ------------------------------------------------------------- */

/* Whether step_id has ended here. Caller holds r->mu. */
bool zf__remote_closed_locked(const zf_remote_t *r, int64_t step_id);

/* Hands a received value to its step (mgr counts it against the limits
 * on steps not started here) unless the step has ended here; a value the
 * step cannot take is dropped and counted. */
void zf__remote_deliver(zf_remote_t *r, zf_tensor_frame_t *f);

/* The peer for device with a new reference, or NULL. */
zf__remote_peer_t *zf__remote_peer_find(zf_remote_t *r, const char *device);

/* Drops a reference from zf__remote_peer_find(); sets *p_p to NULL. */
void zf__remote_peer_release(zf_remote_t *r, zf__remote_peer_t **p_p);

/* The peer's PUSH socket, connected on first use. Caller holds p->mu. */
zf_status_t zf__remote_peer_socket_locked(zf_remote_t *r, zf__remote_peer_t *p);

/* Sends tensor (borrowed) to p, the peer owning device: a live device
 * tensor through zf__remote_send_device_tensor(), anything else as bytes.
 * Errors name the key and the device. */
zf_status_t zf__remote_peer_send(zf_remote_t *r, zf__remote_peer_t *p, const char *device,
                                 const char *key, int64_t step_id, zf_tensor_t *tensor,
                                 bool is_dead);

/* ---- remote_ipc.c --------------------------------------------------------- */

/* Holds tensor (a new reference) as offer id (shm: a shared-memory offer,
 * whose block's release word is rel, or NULL) to device under key for
 * step_id, stamped held_at_ms. Errors: CANCELLED when step_id has ended
 * here (nothing is held), RESOURCE_EXHAUSTED. */
zf_status_t zf__remote_held_add(zf_remote_t *r, uint64_t id, bool shm, _Atomic uint64_t *rel,
                                const char *device, const char *key, int64_t step_id,
                                zf_tensor_t *tensor, int64_t held_at_ms);

/* Unlinks held offer h, which the caller found in r->held through *at
 * (the link that points to it). Caller holds r->mu. */
void zf__remote_held_unlink_locked(zf_remote_t *r, zf__remote_held_t **at);

/* Sends offer h (IPC or shared memory), held already as id, to p; on
 * failure the held offer is let go. */
zf_status_t zf__remote_send_held_offer(zf_remote_t *r, zf__remote_peer_t *p,
                                       const zf_tensor_frame_header_t *h, uint64_t id);

/* The sending device of key (its first field), copied into out. */
bool zf__remote_key_src(const char *key, char *out, size_t cap);

/* Answers offer id of step_id on the push socket of src's peer; failures
 * are logged (the sender lets go at the step's end or the hold limit). */
void zf__remote_reply(zf_remote_t *r, const char *src, uint64_t id, int64_t step_id, bool accepted,
                      const char *why);

/* Unlinks the held offer with id (id != 0), or every IPC offer of step_id
 * (id == 0: shared-memory blocks stay, as the receiver may read them in
 * place after its step), and returns them as a list. Caller holds r->mu. */
zf__remote_held_t *zf__remote_held_take_locked(zf_remote_t *r, uint64_t id, int64_t step_id);

/* Frees a list of held offers (unlinked from r->held) and their tensor
 * references; sets *list to NULL. */
void zf__remote_held_free_all(zf__remote_held_t **list);

/* Drops a reference to a; the last one frees it. Sets *a_p to NULL. */
void zf__remote_acker_unref(zf__remote_acker_t **a_p);

/* A GPU receiver that has not refused IPC gets an offer; everything else,
 * or a tensor that cannot be exported, goes as bytes. */
zf_status_t zf__remote_send_device_tensor(zf_remote_t *r, zf__remote_peer_t *p, const char *device,
                                          const char *key, int64_t step_id, zf_tensor_t *tensor);

/* A receiver's answer to an offer sent from here: the held tensor is
 * released, and on a refusal its bytes are sent instead. */
void zf__remote_on_reply(zf_remote_t *r, const zf_tensor_frame_reply_t *reply);

/* An offer received: its placeholder goes to the step (f->tensor, which
 * then goes with f), or the sender is told why it is refused. */
void zf__remote_on_offer(zf_remote_t *r, zf_tensor_frame_t *f);

/* ---- remote_shm.c --------------------------------------------------------- */

/* Sets the shared-memory defaults of a new transport and removes the
 * segments of dead processes. */
void zf__remote_shm_init(zf_remote_t *r);

/* Drops the arena (its name is unlinked; the memory goes with the last
 * block) and the mappings of other senders' segments. */
void zf__remote_shm_destroy(zf_remote_t *r);

/* Sends a host tensor to p through the arena when it qualifies (size,
 * dtype, the peer's host, room in the arena); *sent false: send the bytes.
 * Errors: those of sending the offer. */
zf_status_t zf__remote_shm_send(zf_remote_t *r, zf__remote_peer_t *p, const char *device,
                                const char *key, int64_t step_id, zf_tensor_t *tensor, bool *sent);

/* Frees the blocks whose receivers have stored their offer's id into the
 * release word (counted as released); returns how many. Cheap when no
 * held block has a release word (a lock and a comparison). */
int zf__remote_shm_reap(zf_remote_t *r);

/* Whether tensor would be offered to p through the arena (size, dtype, the
 * peer, the path on), arena room aside. */
bool zf__remote_shm_qualifies(zf_remote_t *r, zf__remote_peer_t *p, const zf_tensor_t *tensor);

/* Whether a receiver may still read the arena: a transport of this
 * process maps it, or another process does (/proc/<pid>/maps); *pid gets
 * the first found. False when there is no arena. */
bool zf__remote_shm_mapped_elsewhere(zf_remote_t *r, long *pid);

/* A shared-memory offer received: the mapped tensor goes to the step, or
 * the sender is told why it is refused. */
void zf__remote_shm_on_offer(zf_remote_t *r, zf_tensor_frame_t *f);

/* ---- test hooks ------------------------------------------------------------ */

/* They reach the bookkeeping of held CUDA IPC offers in builds and on
 * machines where no tensor can be exported. */

/* Holds tensor (a new reference) as if it had just been offered over IPC
 * to device under key for step_id at held_at_ms (zf_remote_now_ms()'s
 * clock), without sending anything; *id gets the offer's id, which a
 * reply frame may name. It is then released like a real offer: by a reply,
 * zf_remote_cleanup_step() or zf_remote_expire(). Errors: CANCELLED when
 * step_id has ended here (nothing is held), RESOURCE_EXHAUSTED. */
zf_status_t zf__remote_hold_offer(zf_remote_t *r, const char *device, const char *key,
                                  int64_t step_id, zf_tensor_t *tensor, int64_t held_at_ms,
                                  uint64_t *id);

#endif
