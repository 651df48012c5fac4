/* A local zflow cluster as child processes: one zflow-broker on a loopback
 * port, one executor per device of a device list, one zflow-scheduler; and
 * stopping all of them (SIGTERM, then SIGKILL after a grace period). */
#ifndef ZF_CLUSTER_H
#define ZF_CLUSTER_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/status.h"

typedef struct zf_cluster zf_cluster_t;

typedef struct zf_cluster_options {
    const char *devices;  /* zf_device_list_parse list; NULL: "cpu:1" */
    int port;             /* broker port on 127.0.0.1; 0: an ephemeral one */
    const char *bin_dir;  /* where zflow-broker & co. live; NULL: $ZFLOW_BIN_DIR,
                             else the directory of this program */
    int start_timeout_ms; /* per process, for its startup line; 0: 10000 */
    bool quiet;           /* children's stderr to /dev/null (else inherited) */
    const char *keys;     /* key directory every process gets as --keys; NULL: plain */
    bool secure;          /* without keys: make a fresh key directory (zf_cluster_keys) */
    const char *state;    /* the broker's job store directory (--state); NULL: in memory */
} zf_cluster_options_t;

#define ZF_CLUSTER_OPTIONS_DEFAULT                                                                 \
    ((zf_cluster_options_t){NULL, 0, NULL, 0, false, NULL, false, NULL})

/* Starts the broker, then the executors (named
 * /job:localhost/replica:0/task:0/device:<TYPE>:<i>, like the in-process
 * devices), then the scheduler, each waited for by its startup line. On any
 * failure every process started so far is stopped and reaped before
 * returning: INVALID_ARGUMENT for a bad device list, NOT_FOUND for a missing
 * program, UNAVAILABLE for a process that exits or says nothing in time.
 * Caller owns *out. Blocks. */
zf_status_t zf_cluster_start(const zf_cluster_options_t *opts, zf_cluster_t **out);

/* The broker's endpoint ("tcp://127.0.0.1:PORT"). Borrowed. */
const char *zf_cluster_endpoint(const zf_cluster_t *c);

/* The key directory the processes use (options.keys, or the fresh one a
 * secure cluster made: $TMPDIR/zflow-keys-XXXXXX with every role's keypair,
 * removed by zf_cluster_stop); NULL for a plain cluster. Borrowed. */
const char *zf_cluster_keys(const zf_cluster_t *c);

/* How many processes the cluster runs (broker + executors + scheduler). */
int zf_cluster_process_count(const zf_cluster_t *c);

/* The first child that has exited on its own since start (reaped), or 0.
 * *what gets its program name (borrowed). Non-blocking. */
pid_t zf_cluster_poll_exited(zf_cluster_t *c, const char **what);

/* Supervision (what `zflow up` does): a process that dies is started
 * again with the same arguments — an executor under the same device name,
 * with a new incarnation; the broker on the same address — after a
 * backoff of 100 ms doubling up to ZF_CLUSTER_MAX_BACKOFF_MS. A process
 * that died ZF_CLUSTER_MAX_RESTARTS times within
 * ZF_CLUSTER_RESTART_WINDOW_MS and dies again is given up on. */
#define ZF_CLUSTER_MAX_RESTARTS      5
#define ZF_CLUSTER_RESTART_WINDOW_MS 60000
#define ZF_CLUSTER_MAX_BACKOFF_MS    5000

/* Receives one line saying what supervision did (a death, a restart). */
typedef void (*zf_cluster_log_fn)(const char *line, void *arg);

/* One round of supervision: reaps the children that died and schedules
 * their restarts (logging each), and starts again those whose backoff
 * has passed (blocking while one starts). Call it often (every 50 ms).
 * UNAVAILABLE "<process> keeps dying: ..." when one is given up on; the
 * caller then stops the cluster. Not with zf_cluster_poll_exited. */
zf_status_t zf_cluster_supervise(zf_cluster_t *c, zf_cluster_log_fn log, void *arg);

/* Stops every process (scheduler, executors, broker, in that order):
 * SIGTERM, up to grace_ms for all to exit, then SIGKILL; reaps them all.
 * Returns OK when each exited 0 (or had already been reaped), else
 * UNKNOWN naming the first that did not. Frees the cluster and sets *c_p
 * to NULL; NULL-safe. */
zf_status_t zf_cluster_stop(zf_cluster_t **c_p, int grace_ms);

/* zf_cluster_stop with a 5 s grace, ignoring how they exited. */
void zf_cluster_destroy(zf_cluster_t **c_p);

#endif
