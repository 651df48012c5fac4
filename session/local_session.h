/* The in-process session (TensorFlow's DirectSession): one graph, a set of
 * local devices, and any number of runs, each placed, partitioned and
 * executed inside this process.
 *
 * Design note. The whole graph is placed once, when the session is created
 * (so a node without a kernel fails then, naming its op). A run's signature
 * — its sorted feeds, fetches and targets — selects a cached callable: the
 * pruned, partitioned graph (scheduler/graph/partition.h) and one engine per
 * partition, built on the first run with that signature. Every run gets a
 * new step id and ONE local rendezvous shared by all its partitions: the
 * client's feed tensors are sent into it under the partitions' feed keys,
 * the partitions start concurrently (each on its device's pool), and the
 * fetches are received from it under the fetch keys. Variables and other
 * resources persist across runs in the session's resource store.
 *
 * Errors of a run: the first failing kernel's error, prefixed with its
 * device (the error every other partition saw was caused by the abort and
 * is not reported); DEADLINE_EXCEEDED when the run outlives the timeout.
 *
 * Thread-safety: runs may be issued from several threads at once; callables
 * are built under the session's lock, steps run without it. */
#ifndef ZF_LOCAL_SESSION_H
#define ZF_LOCAL_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/status.h"
#include "executor/engine/engine.h"
#include "common/tensor.h"
#include "proto/graph.pb-c.h"

typedef struct zf_local_session zf_local_session_t;

typedef struct zf_local_session_options {
    const char *devices;    /* a device list as `zflow place --devices` takes ("cpu:2");
                               NULL: "cpu:1" */
    int threads_per_device; /* each device's pool; 0: one thread per core */
    bool allow_soft_placement;
    bool balanced_placement; /* spread nodes over equally valid devices; default: the
                                first valid one, as TensorFlow does */
    bool log_placement;
    int64_t timeout_ms; /* per run; 0: no limit */
    int opt_level; /* ZF_OPT_L1 (0, the default): optimize every partition; ZF_OPT_L0 (-1): not */
    bool bfloat16_sendrecv; /* FLOAT tensors cross between devices as BFLOAT16 */
    bool recv_scheduling;   /* recvs wait for their ASAP start (TensorFlow's
                               enable_recv_scheduling; docs/design.md) */
} zf_local_session_options_t;

#define ZF_LOCAL_SESSION_OPTIONS_DEFAULT                                                           \
    ((zf_local_session_options_t){NULL, 0, false, false, false, 0, 0, false, false})

/* Creates the session's devices and resource store, builds the graph of gd
 * (BORROWED: it must outlive the session) and places it. opts may be NULL.
 * Registers the built-in kernels if that has not happened yet. Errors:
 * INVALID_ARGUMENT for a bad device list or graph, the placer's errors
 * (naming the node, e.g. "No OpKernel was registered to support Op
 * '<op>' used by node <name>"), UNIMPLEMENTED for device types this build
 * cannot create, RESOURCE_EXHAUSTED. Caller owns *out. */
zf_status_t zf_local_session_new(Tensorflow__GraphDef *gd, const zf_local_session_options_t *opts,
                                 zf_local_session_t **out);

/* Waits for nothing: no run may be in progress (open partial runs are
 * aborted and ended). NULL-safe, sets *s_p NULL. */
void zf_local_session_destroy(zf_local_session_t **s_p);

/* Runs one step. feed_names[i] ("x" or "x:0") is given the value
 * feed_values[i] (borrowed; the caller may change its bytes between runs,
 * not during one); fetches are tensor names, targets node names
 * run for their effects. On success fetch_out[j] (caller-allocated,
 * n_fetches entries) holds an owned reference to fetch j's value; on error
 * every entry is NULL. Blocks until the step has ended everywhere.
 * Errors: INVALID_ARGUMENT for malformed or unknown names, a tensor fed
 * twice, a feed whose dtype or shape does not match the graph ("Cannot
 * feed value of shape [2] for Tensor 'x:0', which has shape [?,4]"); a
 * kernel's error; DEADLINE_EXCEEDED. */
zf_status_t zf_local_session_run(zf_local_session_t *s, const char *const *feed_names,
                                 zf_tensor_t *const *feed_values, int n_feeds,
                                 const char *const *fetches, int n_fetches,
                                 const char *const *targets, int n_targets,
                                 zf_tensor_t **fetch_out);

/* The same, recording every kernel run of every partition into trace
 * (zf_step_trace_init()ed by the caller; NULL: not traced). */
zf_status_t zf_local_session_run_traced(zf_local_session_t *s, const char *const *feed_names,
                                        zf_tensor_t *const *feed_values, int n_feeds,
                                        const char *const *fetches, int n_fetches,
                                        const char *const *targets, int n_targets,
                                        zf_tensor_t **fetch_out, zf_step_trace_t *trace);

/* Partial runs a session keeps open at most, and ended handles it
 * remembers (to say why a call naming one is refused). */
#define ZF_LOCAL_SESSION_PRUNS_MAX 64
#define ZF_LOCAL_SESSION_PRUN_GONE 16

/* TensorFlow's PartialRunSetup: declares one step's feeds (names only),
 * fetches and targets, and starts its partitions, their _Recv nodes
 * waiting for the feeds to come; *handle (the caller frees it) names the
 * step in zf_local_session_partial_run(). Errors as
 * zf_local_session_run's for the names, RESOURCE_EXHAUSTED past
 * ZF_LOCAL_SESSION_PRUNS_MAX open partial runs. */
zf_status_t zf_local_session_partial_run_setup(zf_local_session_t *s, const char *const *feeds,
                                               int n_feeds, const char *const *fetches,
                                               int n_fetches, const char *const *targets,
                                               int n_targets, char **handle);

/* TensorFlow's PartialRun: gives some of the step's declared feeds and
 * fetches some of its declared fetches (fetch_out as in
 * zf_local_session_run), waiting until they are computed; the call that
 * gives the last declared feed and fetch waits for the step to end
 * everywhere. A call refused by TensorFlow's checks (INVALID_ARGUMENT "The
 * feed x:0 was not specified in partial_run_setup.", "... has already been
 * fed.", the same for fetches, "Fetch y:0 can't be computed from the feeds
 * that have been fed so far: it needs feed x:0"; a feed's dtype or shape)
 * leaves the partial run as it was. A call that fails once sent (a
 * kernel's error, DEADLINE_EXCEEDED past the session's timeout) aborts the
 * step and ends it. A handle that ended is FAILED_PRECONDITION "partial
 * run 'H' has completed: ..." or "partial run 'H' failed: <why>"; an
 * unknown one INVALID_ARGUMENT "Must run PartialRunSetup before performing
 * partial runs". Calls of one handle run one at a time (FAILED_PRECONDITION
 * for a second at once). Destroying the session aborts the open ones. */
zf_status_t zf_local_session_partial_run(zf_local_session_t *s, const char *handle,
                                         const char *const *feed_names,
                                         zf_tensor_t *const *feed_values, int n_feeds,
                                         const char *const *fetches, int n_fetches,
                                         zf_tensor_t **fetch_out);

/* The session's devices, in the order of the device list. */
int zf_local_session_num_devices(const zf_local_session_t *s);

/* The device list a session uses when none is given: "cpu:1", plus
 * "gpu:N" when N GPUs are visible. Writes into buf and returns it. */
const char *zf_local_session_default_devices(char *buf, size_t n);
const char *zf_local_session_device_name(const zf_local_session_t *s, int i);

/* The base dtype of tensor name ("x" or "x:0") in the graph. Errors:
 * INVALID_ARGUMENT for a malformed name or a port out of range, NOT_FOUND
 * "no node named '<node>' in the graph". */
zf_status_t zf_local_session_tensor_dtype(const zf_local_session_t *s, const char *name,
                                          zf_dtype_t *out);

/* The device the placer gave node name ("" when there is no such node). */
const char *zf_local_session_node_device(const zf_local_session_t *s, const char *name);

/* How many partitions the most recent successful run executed, and how
 * many callables are cached (one per distinct signature). */
int zf_local_session_last_num_partitions(zf_local_session_t *s);

/* The partitions the most recent successful run executed, as its engines
 * run them (after the graph optimizer); NULL before any. Borrowed: valid
 * until the session is destroyed (callables are never dropped). */
struct zf_partition_set;
const struct zf_partition_set *zf_local_session_last_partitions(zf_local_session_t *s);
int zf_local_session_num_callables(zf_local_session_t *s);

#endif
