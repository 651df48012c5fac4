/* Shared between the executor service's files (service.c: lifecycle, the
 * control loop and the graph table; service_step.c: RunGraph and the steps
 * in flight). Not a public interface. */
#ifndef ZF_EXEC_SERVICE_INTERNAL_H
#define ZF_EXEC_SERVICE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/strmap.h"
#include "common/transport.h"
#include "executor/devices/device.h"
#include "executor/engine/engine.h"
#include "executor/rendezvous/remote.h"
#include "executor/rendezvous/rendezvous.h"
#include "executor/kernels/resource.h"
#include "executor/worker/service.h"
#include "proto/service.pb-c.h"

/* A session's resource store, shared by its graphs. */
typedef struct zf__svc_session {
    char *name;
    zf_resource_mgr_t *resources;
    int refs; /* graphs; guarded by the service's mu */
} zf__svc_session_t;

/* OK when the sender at route may send what for a graph or step of owner:
 * a plain socket, or the same secure peer that registered it. Otherwise
 * PERMISSION_DENIED "<what> for <object> refused: it belongs to <owner>,
 * not <peer>", also logged. */
zf_status_t zf__svc_check_owner(const char *owner, const zf_route_t *route, const char *what,
                                const char *object);

/* A registered graph. The table holds one reference and every running
 * step one; the last one is dropped on the control thread or in destroy. */
typedef struct zf__svc_graph {
    char *handle;
    char owner[ZF_PEER_ID_MAX]; /* the secure peer that registered it; "" in plain mode */
    zf__svc_session_t *session;
    zf_engine_t *ex;
    int refs;                   /* guarded by the service's mu */
    int n_nodes;                /* the executor's, for the load */
    int64_t bytes;              /* its GraphDef's serialized size */
    char **peers;               /* devices its _Send nodes push to (not the client) */
    uint64_t *peer_incarnation; /* per peer: as placed (RegisterGraph.peers); 0: any */
    int n_peers;
} zf__svc_graph_t;

/* A partial run's partition on this executor (RunGraph.is_partial,
 * service_partial.c): its engine runs once for the step while RunGraph
 * calls feed and fetch it piece by piece. */
typedef struct zf__svc_partial {
    struct zf__svc_partial *next; /* on svc->partials while calls may come */
    struct zf_exec_service *svc;
    zf__svc_graph_t *graph; /* a reference */
    zf_rendezvous_t *r;     /* a reference */
    int64_t step_id;
    /* under svc->mu: references (the list, the running engine, each call in
     * flight), whether it is listed, whether its engine has ended and how,
     * and the last call, answered when the engine ends */
    int refs;
    bool listed, engine_done;
    zf_status_t engine_status;
    struct zf__svc_step *waiting;
} zf__svc_partial_t;

/* One fetch of a partial run's call: its recv's completion. */
typedef struct zf__svc_fetch_slot {
    struct zf__svc_step *st;
    zf_tensor_t *value;
    bool dead;
    zf_status_t status;
} zf__svc_fetch_slot_t;

/* A RunGraph in flight, then its reply waiting for the control thread. */
typedef struct zf__svc_step {
    struct zf__svc_step *next;
    zf_exec_service_t *svc;
    zf__svc_graph_t *graph;
    zf_rendezvous_t *r;
    int64_t step_id;
    zf_route_t route;
    uint64_t request_id;
    char **fetch_keys;
    size_t n_fetch_keys;
    Zflow__Envelope *reply; /* built when the step ends */
    zf_status_t status;     /* sent as a bare status when reply is NULL */
    bool traced;            /* RunGraph.trace: every kernel run goes into trace */
    zf_step_trace_t trace;
    /* A call of a partial run: its partition (a reference), its fetches'
     * recvs (one slot per fetch key) and how many have not completed,
     * and whether it is the step's last call. NULL/0 for a whole step. */
    zf__svc_partial_t *partial;
    zf__svc_fetch_slot_t *slots;
    atomic_int pending;
    bool last;
} zf__svc_step_t;

struct zf_exec_service {
    zf_zctx_t *ctx;
    zf_device_t *device;
    zf_socket_t *router;
    zf_rendezvous_mgr_t *mgr;
    zf_remote_t *remote;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    atomic_bool peers_wanted; /* a step waits for a peer's endpoint */
    int wake[2];              /* a byte in wake[1] wakes the control thread */
    pthread_mutex_t mu;
    pthread_cond_t idle;   /* signalled when running drops to 0 */
    zf_strmap_t *graphs;   /* handle -> zf__svc_graph_t * */
    zf_strmap_t *sessions; /* name -> zf__svc_session_t * */
    int64_t load;          /* nodes of the registered graphs */
    int64_t graph_bytes;   /* their GraphDefs' serialized bytes */
    int max_graphs;        /* zf_exec_service_set_graph_limits() */
    int64_t max_graph_bytes;
    int peer_wait_ms;        /* see zf_exec_service_options_t */
    zf__svc_step_t *running; /* steps in flight */
    int n_running;
    zf__svc_step_t *done_head, *done_tail; /* replies for the control thread */
    zf__svc_partial_t *partials;           /* partial runs calls may still come for */
    int n_partials;
    _Atomic int64_t host_cache_idle_ms; /* zf_exec_service_set_host_cache_idle_ms(); 0: never */
};

/* The service whose control thread this is; NULL on every other thread. */
extern _Thread_local const zf_exec_service_t *zf__svc_loop;

/* "graph handle not found; the executor restarted" */
extern const char zf__svc_restarted[];

/* Drops a graph reference (caller holds svc->mu); the last one destroys the
 * executor and releases the session. */
void zf__svc_graph_unref_locked(zf_exec_service_t *svc, zf__svc_graph_t **g_p);

/* Serves a RunGraph (on the control thread). Returns OK when the step
 * started and its reply will come later; otherwise the error to answer. */
zf_status_t zf__svc_run_graph(zf_exec_service_t *svc, const zf_route_t *route, uint64_t request_id,
                              const Zflow__RunGraph *req);

/* How long a step waits for an unknown peer's endpoint by default. */
#define ZF__SVC_PEER_WAIT_MS 5000

/* Fills g->peers from the remote devices its _Send nodes name, and their
 * incarnations from req->peers (whose endpoints, when given, go to the
 * peer table). */
zf_status_t zf__svc_graph_peers(zf_exec_service_t *svc, zf__svc_graph_t *g,
                                const Zflow__RegisterGraph *req);

/* INVALID_ARGUMENT naming the entry when RegisterGraph.peers has one
 * without a device name. */
zf_status_t zf__svc_check_peers(const Zflow__RegisterGraph *req);

/* ---- service_step.c, for partial runs -------------------------------------- */

/* The graph named by req, with a new reference; ABORTED for a handle of an
 * earlier incarnation, NOT_FOUND for an unknown one. */
zf_status_t zf__svc_find_graph(zf_exec_service_t *svc, const Zflow__RunGraph *req,
                               zf__svc_graph_t **out);

/* Copies req's fetch keys into st; INVALID_ARGUMENT for an empty one. */
zf_status_t zf__svc_copy_fetch_keys(zf__svc_step_t *st, const Zflow__RunGraph *req);

/* Sends req's feeds into r; adds their bytes to *bytes. */
zf_status_t zf__svc_send_feeds(zf_rendezvous_t *r, const Zflow__RunGraph *req, size_t *bytes);

/* Runs g's engine for args once the endpoints of the devices g sends to
 * are known; done(error, arg) when they do not come (or the step is
 * aborted meanwhile). */
void zf__svc_engine_start(zf_exec_service_t *svc, const zf__svc_graph_t *g,
                          const zf_engine_args_t *args, zf_engine_done_fn done, void *arg);

/* Builds st's reply for status (owned): the fetches on OK. */
void zf__svc_build_reply(zf__svc_step_t *st, zf_status_t status);

/* Moves st from the running list to the reply queue. */
void zf__svc_step_finish(zf__svc_step_t *st);

/* ---- service_partial.c ------------------------------------------------------- */

/* At most this many partial runs live on one executor. */
#define ZF__SVC_PARTIALS_MAX 1024

/* Serves a RunGraph with is_partial (on the control thread): as
 * zf__svc_run_graph. */
zf_status_t zf__svc_run_partial(zf_exec_service_t *svc, const zf_route_t *route,
                                uint64_t request_id, const Zflow__RunGraph *req);

/* Forgets the partial runs of step_id (CleanupGraph, AbortStep): no call
 * finds them any more. */
void zf__svc_partials_forget(zf_exec_service_t *svc, int64_t step_id);

/* The rendezvous of every partial run whose engine runs, referenced, for
 * the shutdown's aborts: up to cap into rs; returns how many. Caller holds
 * svc->mu. */
int zf__svc_partials_running_locked(zf_exec_service_t *svc, zf_rendezvous_t **rs, int cap);

/* Forgets every partial run (destroy, after the engines have ended). */
void zf__svc_partials_free(zf_exec_service_t *svc);

/* Drops a reference to a partial run (NULL-safe; sets *p_p NULL). Caller
 * holds svc->mu. */
void zf__svc_partial_unref_locked(zf_exec_service_t *svc, zf__svc_partial_t **p_p);

/* Frees a finished step's record (reply, fetch keys, graph reference).
 * Caller holds svc->mu. */
void zf__svc_step_free_locked(zf_exec_service_t *svc, zf__svc_step_t *st);

/* A new envelope (malloc'd, freeable with zflow__envelope__free_unpacked)
 * with no body. NULL when out of memory. */
Zflow__Envelope *zf__svc_envelope_new(uint64_t request_id);

#endif
