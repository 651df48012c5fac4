/* The executor service: an executor process's control endpoint, which holds
 * the partitions schedulers register and runs their steps (docs/service.md,
 * "the step protocol").
 *
 * Design note. One control thread, the executor's event loop, owns a
 * ROUTER socket bound on an ephemeral port and answers RegisterGraph,
 * RunGraph, CleanupGraph, AbortStep and DeregisterGraph; it also polls the
 * data plane (the service's zf_remote_t, executor/rendezvous/remote.h,
 * which has no receiver thread of its own here), so tensors from peers are
 * delivered on it. RunGraph does not block it: the request's feeds go into
 * the step's rendezvous (by rendezvous key), then the step starts. A light
 * partition (zf_engine_is_light(), executor/engine/engine.h) with small
 * feeds whose peers are all known starts inline on the event loop and
 * continues there as its tensors arrive, which saves thread hand-offs;
 * every other step starts on the device's thread pool. When a step ends
 * the fetches are read from the rendezvous and the reply is queued for the
 * control thread, which a pipe wakes up (a step that ended on the control
 * thread needs no wakeup: the thread flushes the queue after each turn). Any number of steps may be
 * in flight. A step starts once the peers its partition sends to are known at the incarnations
 * RegisterGraph.peers names, so a peer that restarted under the same name is reached at its new
 * endpoint, never at the old one (see zf_exec_service_take_peers_wanted()).
 *
 * Graph handles read "<incarnation as 16 hex digits>/<n>", so a handle of an
 * earlier start of the executor is recognised: RunGraph with such a handle,
 * or with another incarnation than the device's, is ABORTED "graph handle
 * not found; the executor restarted". Each session (RegisterGraph.session)
 * has its own resource store (variables), freed with its last graph.
 *
 * Replies: RegisterGraph gets a RegisterGraphReply and RunGraph a
 * RunGraphReply, each carrying the outcome in its status (a RunGraph that
 * could not start is answered at once; otherwise when the step ends, with
 * the fetches only when it succeeded); CleanupGraph, AbortStep and
 * DeregisterGraph get a StatusReply. Every request is checked before use; a
 * message that is not an envelope, or a body an executor does not serve,
 * gets a StatusReply of INVALID_ARGUMENT; a request with bad fields gets
 * its reply with INVALID_ARGUMENT naming what is wrong; the loop goes on.
 * CleanupGraph aborts a step still running with CANCELLED; AbortStep with
 * an OK status aborts with ABORTED "step N was aborted".
 *
 * Thread-safety: the functions below may be called from any thread;
 * zf_exec_service_destroy() must not race with them. */
#ifndef ZF_EXEC_SERVICE_H
#define ZF_EXEC_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/transport.h"
#include "executor/devices/device.h"
#include "executor/rendezvous/rendezvous.h"

typedef struct zf_exec_service zf_exec_service_t;

typedef struct zf_exec_service_options {
    const char *control_bind;    /* NULL: "tcp://127.0.0.1:*" */
    const char *rendezvous_bind; /* NULL: "tcp://127.0.0.1:*" */
    int peer_wait_ms;            /* how long a step waits for an unknown peer; 0: 5000 */
    int shm_mib; /* the same-host shared-memory arena in MiB (executor/rendezvous/remote.h);
                  * 0: ZF_REMOTE_SHM_MIB; < 0: none, tensors go as bytes */
} zf_exec_service_options_t;

/* Starts the service for device (borrowed; it outlives the service) in ctx
 * (borrowed): binds the control and rendezvous sockets and starts their
 * threads. Registers the built-in kernels if needed. opts may be NULL.
 * Errors: UNAVAILABLE when an address cannot be bound, RESOURCE_EXHAUSTED.
 * Caller owns *out. */
zf_status_t zf_exec_service_new(zf_zctx_t *ctx, zf_device_t *device,
                                const zf_exec_service_options_t *opts, zf_exec_service_t **out);

/* Stops the control thread, aborts the steps still running (CANCELLED) and
 * waits for them, then frees every graph, session and socket. NULL-safe,
 * sets *svc_p to NULL. */
void zf_exec_service_destroy(zf_exec_service_t **svc_p);

/* The bound endpoints, with their real ports. Borrowed. */
const char *zf_exec_service_control_endpoint(const zf_exec_service_t *svc);
const char *zf_exec_service_rendezvous_endpoint(const zf_exec_service_t *svc);

/* The device's incarnation, which graph handles carry. */
uint64_t zf_exec_service_incarnation(const zf_exec_service_t *svc);

/* Records where device's rendezvous endpoint is, for tensors this
 * executor's partitions send there. Errors as zf_remote_set_peer(). */
zf_status_t zf_exec_service_set_peer(zf_exec_service_t *svc, const char *device,
                                     const char *endpoint);

/* The same with the peer's incarnation (0: unknown): a peer that moved or
 * restarted is reconnected (zf_remote_update_peer()). *changed (may be
 * NULL) tells whether anything changed. */
/* Records the host id of device's peer (after zf_exec_service_update_peer()):
 * same-host peers get large host tensors through shared memory, the others
 * bytes (zf_remote_set_peer_host()). */
void zf_exec_service_set_peer_host(zf_exec_service_t *svc, const char *device, const char *host_id);

zf_status_t zf_exec_service_update_peer(zf_exec_service_t *svc, const char *device,
                                        const char *endpoint, uint64_t incarnation, bool *changed);

/* True when device's rendezvous endpoint is known (tests, logs). */
bool zf_exec_service_has_peer(zf_exec_service_t *svc, const char *device);

/* The incarnation recorded for device's peer; 0 when unknown (tests, logs). */
uint64_t zf_exec_service_peer_incarnation(zf_exec_service_t *svc, const char *device);

/* Sets the most bytes that tensors arriving for steps not yet started here
 * may hold (zf_rendezvous_mgr_set_max_bytes(); 0: the default, 1 GiB): past
 * it the oldest such steps are dropped, and a tensor larger on its own is
 * refused, failing its step with RESOURCE_EXHAUSTED naming the step, the
 * size and the limit. */
void zf_exec_service_set_max_unclaimed_bytes(zf_exec_service_t *svc, size_t max_bytes);

/* Default and setter (each <= 0: its default) of the graphs registered at
 * once and the serialized bytes of their GraphDefs together: a
 * RegisterGraph past either is refused with RESOURCE_EXHAUSTED naming the
 * limit and its zflow-executor flag (--max-graphs, --max-graph-bytes),
 * and the graphs already registered run on. */
#define ZF_EXEC_MAX_GRAPHS      16384
#define ZF_EXEC_MAX_GRAPH_BYTES ((int64_t)4 << 30)
void zf_exec_service_set_graph_limits(zf_exec_service_t *svc, int max_graphs, int64_t max_bytes);

/* Gives the host memory cache (common/host_memory.h: freed tensor blocks
 * kept mapped for the next step) back to the system once the executor has
 * been idle for idle_ms: no step running, and no request, tensor or step
 * end for that long. The control thread trims (zf_host_memory_trim()), at
 * most once per idle spell, only while no step runs (steps start on that
 * thread, so none starts during the trim), and logs the bytes given back
 * at info level. <= 0 (the default): never. zflow-executor sets it from
 * --host-cache-idle-s (default ZF_EXEC_HOST_CACHE_IDLE_S seconds). */
#define ZF_EXEC_HOST_CACHE_IDLE_S 60
void zf_exec_service_set_host_cache_idle_ms(zf_exec_service_t *svc, int64_t idle_ms);

/* The idle trim's decision, on its own for tests: when the executor was
 * last busy and whether it has trimmed since. */
typedef struct zf_exec_idle {
    int64_t busy_ms; /* the monotonic time it was last busy (or started) */
    bool trimmed;    /* trimmed since busy_ms */
} zf_exec_idle_t;

/* Records that the executor is busy at now_ms: a new idle spell starts. */
void zf_exec_idle_busy(zf_exec_idle_t *idle, int64_t now_ms);

/* True when the cache should be trimmed at now_ms: idle_ms > 0, at least
 * idle_ms have passed since busy_ms, and it has not been trimmed since
 * (it then counts as trimmed). */
bool zf_exec_idle_trim_due(zf_exec_idle_t *idle, int64_t idle_ms, int64_t now_ms);

/* The counters of the service's step table (tests, logs). */
zf_rendezvous_mgr_stats_t zf_exec_service_rendezvous_stats(zf_exec_service_t *svc);

/* Registered graphs and steps in flight (tests, logs). */
int zf_exec_service_num_graphs(zf_exec_service_t *svc);
int zf_exec_service_steps_in_flight(zf_exec_service_t *svc);

/* The nodes of the registered graphs: the load the heartbeat reports. */
int64_t zf_exec_service_load(zf_exec_service_t *svc);

/* True once after a step found no endpoint for a device its partition
 * sends to, or only one of another incarnation than RegisterGraph.peers
 * names (the peer restarted): the caller should look the peers up
 * (ListExecutors) and zf_exec_service_update_peer() them. Such a step asks
 * again every ZF_EXEC_SERVICE_PEER_ASK_MS and waits up to peer_wait_ms in
 * all, then fails with UNAVAILABLE naming the device. (The scheduler does
 * not know the rendezvous endpoints, so they come from the broker's
 * listing; RegisterGraph.peers says which incarnations to wait for.) */
#define ZF_EXEC_SERVICE_PEER_ASK_MS 250

bool zf_exec_service_take_peers_wanted(zf_exec_service_t *svc);

/* Gives the device the name the broker chose (a full name of the device's
 * type). Call it before any graph is registered: keys already built keep
 * the old name. Errors: INVALID_ARGUMENT for a malformed or partial name,
 * or one of another device type. */
zf_status_t zf_exec_service_rename(zf_exec_service_t *svc, const char *name);

#endif
