/* libzflow-client: the public C API for talking to a zflow service through
 * its broker — sessions (create, run steps, close) and one-shot jobs. */
#ifndef ZFLOW_CLIENT_H
#define ZFLOW_CLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"

struct Tensorflow__GraphDef;

/* A connection to one broker: a ZeroMQ DEALER, plus one to each scheduler
 * that serves a session of this client directly (zf_client_set_direct).
 * Not thread-safe: use one client per thread. Every reply is matched to its request by request id,
 * so replies that arrive for another outstanding request are kept until
 * that request asks for them. */
typedef struct zf_client zf_client_t;

/* The default time a request waits for its reply, in ms. */
#define ZF_CLIENT_DEFAULT_TIMEOUT_MS 30000

typedef struct zf_client_session_options {
    bool allow_soft_placement;
    bool place_first;        /* the first valid device instead of balanced */
    int64_t step_timeout_ms; /* 0: none */
    int opt_level;           /* 0 (L1): the graph optimizer runs on every partition; -1 (L0): not */
    bool bfloat16_sendrecv;  /* FLOAT tensors cross between devices as BFLOAT16 */
    bool recv_scheduling;    /* recvs wait for their ASAP start (enable_recv_scheduling) */
    /* GraphOptions.build_cost_model: N > 0 traces every step, and every N-th
     * step of a plan returns its cost model (a job's result: cost) */
    int64_t build_cost_model;
    /* GraphOptions.place_pruned_graph: each run places only the nodes it
     * needs, around what earlier runs placed */
    bool place_pruned_graph;
    /* SessionOptions.partition_by: "device" (NULL: the default) cuts every
     * edge between devices; "task" cuts between tasks first, then within
     * each task, so that a tensor crosses between two tasks once; anything
     * else is refused by the service (INVALID_ARGUMENT) */
    const char *partition_by;
} zf_client_session_options_t;

#define ZF_CLIENT_SESSION_OPTIONS_DEFAULT                                                          \
    ((zf_client_session_options_t){false, false, 0, 0, false, false, 0, false, NULL})

/* One step: feeds (names "x" or "x:0" with borrowed tensors), fetches and
 * targets. outputs of the run functions get n_fetches new tensors, in the
 * order of fetches, owned by the caller (zf_tensor_unref each). */
typedef struct zf_client_step {
    const char *const *feed_names;
    zf_tensor_t *const *feed_values;
    int n_feeds;
    const char *const *fetches;
    int n_fetches;
    const char *const *targets;
    int n_targets;
} zf_client_step_t;

/* Connects to the broker at endpoint ("tcp://HOST:PORT"). ZeroMQ connects
 * in the background, so an absent broker shows at the first request, as
 * UNAVAILABLE within about 3 s (see zf_client_set_timeout). Caller owns
 * *out. */
zf_status_t zf_client_connect(const char *endpoint, zf_client_t **out);

/* As zf_client_connect, with CurveZMQ keys when keys_dir is not NULL: the
 * client's keypair DIR/client.key and the broker's and schedulers' public
 * keys DIR/broker.pub and DIR/scheduler.pub (docs/service.md, "Security").
 * A request to a service that refuses the handshake (it needs keys this
 * client lacks, does not trust its key, or runs without keys) ends within
 * about a second with UNAUTHENTICATED naming the endpoint and the keys.
 * Errors: zf_keys_load's for a bad key directory. */
zf_status_t zf_client_connect_keys(const char *endpoint, const char *keys_dir, zf_client_t **out);

/* Closes the connection (unsent requests are dropped); NULL-safe, sets *c_p
 * to NULL. */
void zf_client_destroy(zf_client_t **c_p);

/* Sets the reply timeout (ms, > 0; default ZF_CLIENT_DEFAULT_TIMEOUT_MS) of
 * the calls without a timeout_ms and of those given one <= 0.
 *
 * While a call waits, the client pings the process its request went to
 * (the broker, or a session's scheduler) after each second without a word
 * from it. Silence for 3 s ends the call with UNAVAILABLE "no reply to
 * <Request>: the broker at <endpoint> does not answer (...)"; a timeout
 * while it answers is DEADLINE_EXCEEDED "no reply to <Request> within N ms;
 * the broker answers" (or "the scheduler ..." for a session's requests). */
void zf_client_set_timeout(zf_client_t *c, int timeout_ms);

/* On by default: the steps and the close of a session this client created
 * go straight to the scheduler that holds it (the endpoint its
 * CreateSessionReply names), saving the broker's two hops per step; off:
 * everything goes through the broker. Affects sessions created after. */
void zf_client_set_direct(zf_client_t *c, bool direct);

/* Creates a session on the service for gd (borrowed). *session_id is a new
 * string owned by the caller (free()). Errors: the service's (e.g.
 * INVALID_ARGUMENT for a bad graph, with its text), UNAVAILABLE when the
 * broker does not answer within the timeout. Blocks. */
zf_status_t zf_client_session_create(zf_client_t *c, const struct Tensorflow__GraphDef *gd,
                                     const zf_client_session_options_t *opts, char **session_id);

/* Runs one step of session. timeout_ms bounds the wait for the reply (and
 * is sent as the step's timeout); <= 0 uses the client's timeout. On
 * success outputs[0..n_fetches) are set; on failure they are NULL. */
zf_status_t zf_client_session_run(zf_client_t *c, const char *session, const zf_client_step_t *step,
                                  int timeout_ms, zf_tensor_t **outputs);

/* The two halves of zf_client_session_run, for several steps in flight:
 * _start sends the step and returns its request id in *request; _finish
 * waits for that request's reply (replies to other requests that arrive
 * meanwhile are kept for them) and sets outputs[0..n_fetches). */
zf_status_t zf_client_session_run_start(zf_client_t *c, const char *session,
                                        const zf_client_step_t *step, int timeout_ms,
                                        uint64_t *request);
zf_status_t zf_client_session_run_finish(zf_client_t *c, uint64_t request, int n_fetches,
                                         int timeout_ms, zf_tensor_t **outputs);

/* TensorFlow's partial runs: one step fed and fetched in pieces.
 * _setup declares the step's feeds (by name: step->feed_values is not
 * read), fetches and targets, and sets *handle (free() it). Each
 * zf_client_partial_run then gives some of the declared feeds and asks for
 * some of the declared fetches (no targets), outputs as for
 * zf_client_session_run; the step's partitions stay live between calls,
 * and the call that gives the last feed and fetch ends the step. Errors
 * as TensorFlow's: INVALID_ARGUMENT "The feed x:0 was not specified in
 * partial_run_setup.", "... has already been fed.", the same for fetches,
 * "Fetch y:0 can't be computed from the feeds that have been fed so far";
 * FAILED_PRECONDITION for a handle whose step completed or failed. */
zf_status_t zf_client_partial_run_setup(zf_client_t *c, const char *session,
                                        const zf_client_step_t *step, char **handle);
zf_status_t zf_client_partial_run(zf_client_t *c, const char *session, const char *handle,
                                  const zf_client_step_t *step, int timeout_ms,
                                  zf_tensor_t **outputs);

/* Closes session on the service; steps of it still running end with
 * CANCELLED. */
zf_status_t zf_client_session_close(zf_client_t *c, const char *session);

/* Adds gd's nodes (and library functions; borrowed) to session's graph
 * (TensorFlow's Session.extend). version is the graph version the caller
 * knows: 0 after zf_client_session_create, then each extend's
 * *new_version (may be NULL). Steps may then fetch and run the new nodes;
 * the old ones keep their devices, and cached plans stay. Errors:
 * INVALID_ARGUMENT "GraphDef argument to Extend includes node 'x', which
 * was created by a previous call to Create or Extend in this session."
 * and the graph errors of CreateSession; ABORTED "Current version is N but
 * caller expected M." when another extend came first; NOT_FOUND. */
zf_status_t zf_client_session_extend(zf_client_t *c, const char *session,
                                     const struct Tensorflow__GraphDef *gd, int64_t version,
                                     int64_t *new_version);

/* Cancels every step of session running now: they end with CANCELLED
 * ("step N cancelled: its client cancelled it") and every executor drops
 * its part of them. OK when none runs. Errors: NOT_FOUND. */
zf_status_t zf_client_session_cancel(zf_client_t *c, const char *session);

/* Closes every session this client created and has not closed (TensorFlow's
 * Reset); steps still running in them end with CANCELLED. Returns the
 * first error; every session is tried. */
zf_status_t zf_client_reset(zf_client_t *c);

/* Once *flag (e.g. set by a SIGINT handler) is non-zero, a call waiting for
 * a RunStep's reply sends CancelStep for its session, and one waiting for a
 * job's result sends CancelJob for the job, once each; the call then
 * returns the CANCELLED reply. NULL turns it off. The flag is borrowed. */
void zf_client_set_interrupt(zf_client_t *c, const volatile sig_atomic_t *flag);

/* Submits a one-shot job (a session for gd, one step, closed after it) and
 * returns at once with its id (*job_id owned by the caller, free()). */
zf_status_t zf_client_submit(zf_client_t *c, const struct Tensorflow__GraphDef *gd,
                             const zf_client_session_options_t *opts, const zf_client_step_t *step,
                             char **job_id);

/* Waits up to timeout_ms (<= 0: the client's timeout) for job_id's result
 * and sets outputs[0..n_fetches), n_fetches being the number of fetches the
 * job was submitted with; a result with another count is INTERNAL and
 * nothing is written. A job's result can be collected once; NOT_FOUND
 * afterwards. A job not finished in time is DEADLINE_EXCEEDED and its
 * result stays for a later wait. */
zf_status_t zf_client_wait(zf_client_t *c, const char *job_id, int n_fetches, int timeout_ms,
                           zf_tensor_t **outputs);

/* zf_client_submit then zf_client_wait. */
zf_status_t zf_client_run_job(zf_client_t *c, const struct Tensorflow__GraphDef *gd,
                              const zf_client_session_options_t *opts, const zf_client_step_t *step,
                              int timeout_ms, zf_tensor_t **outputs);

/* ---- asynchronous jobs: several steps, progress, results by name ---------- */

/* What a job does besides its step. */
typedef struct zf_client_job_options {
    int64_t steps;                   /* runs of the step (0 or 1: one) */
    const char *const *init_targets; /* run once before the first step */
    int n_init_targets;
    int trace_level; /* RunOptions' trace level for the steps (0: none); the result's runs */
    bool partition_graphs; /* RunOptions.output_partition_graphs: the result's graphs */
    /* N > 0: the job's variables are saved into checkpoint_dir (the
     * executors' file system) every N steps, and a job starting where a
     * checkpoint is (another attempt of it, after a lost scheduler)
     * restores it and continues after its step; see the result's
     * resumed_from_step */
    int64_t checkpoint_every;
    const char *checkpoint_dir;
} zf_client_job_options_t;

#define ZF_CLIENT_JOB_OPTIONS_DEFAULT ((zf_client_job_options_t){1, NULL, 0, 0, false, 0, NULL})

/* zf_client_submit for a job that first runs job->init_targets once (no
 * feeds, e.g. variable initializers), then its step job->steps times on
 * its session, so variables carry over from run to run; the fetches are
 * the last run's. job may be NULL (one step). Errors: INVALID_ARGUMENT for
 * steps < 0; the service's. */
zf_status_t zf_client_submit_job(zf_client_t *c, const struct Tensorflow__GraphDef *gd,
                                 const zf_client_session_options_t *opts,
                                 const zf_client_step_t *step, const zf_client_job_options_t *job,
                                 char **job_id);

typedef enum zf_client_job_state {
    ZF_CLIENT_JOB_QUEUED = 1,
    ZF_CLIENT_JOB_RUNNING = 2,
    ZF_CLIENT_JOB_DONE = 3, /* finished or failed; the result waits for a wait */
} zf_client_job_state_t;

typedef struct zf_client_job_progress {
    zf_client_job_state_t state;
    int64_t steps_done, steps_total;
    int partitions_running; /* partitions of the current step still running */
    int partitions_total;   /* partitions of the job's plan; 0 before its first step */
    int64_t elapsed_ms;     /* since it started running; frozen once done */
    int attempts;           /* times the broker handed it to a scheduler so far */
} zf_client_job_progress_t;

/* Cancels job_id: a queued job never runs, a running one stops in its
 * current step, on every executor; its result, CANCELLED ("job <id>
 * cancelled: its client cancelled it"), is collected by a wait as any
 * result is. Errors: NOT_FOUND; FAILED_PRECONDITION for a job that has
 * finished already. */
zf_status_t zf_client_cancel_job(zf_client_t *c, const char *job_id);

/* The progress of job_id; does not collect its result. Errors: NOT_FOUND
 * for a job unknown to the service, collected, or expired (the service
 * keeps an uncollected result 10 minutes, 1024 results at most); the
 * transport's. */
zf_status_t zf_client_poll(zf_client_t *c, const char *job_id, zf_client_job_progress_t *out);

/* A finished job's fetches, named as the job named them. */
typedef struct zf_client_job_result {
    int n_fetches;
    char **names;
    zf_tensor_t **tensors;
    /* With trace_level > 0: every kernel run of the last step, on every
     * executor (proto/service.proto's NodeRun). */
    struct Zflow__NodeRun **runs;
    size_t n_runs;
    int attempts; /* times the broker handed the job to a scheduler (> 1: one was lost) */
    int64_t resumed_from_step; /* the step of the checkpoint it restored; 0: none */
    /* With partition_graphs: the last step's partitions. */
    struct Tensorflow__GraphDef **graphs;
    size_t n_graphs;
    /* The cost model of the last step's plan (proto/service.proto's
     * CostNode: per node, mean kernel time and output bytes per traced
     * step), with trace_level > 0 or the session option build_cost_model. */
    struct Zflow__CostNode **cost;
    size_t n_cost;
} zf_client_job_result_t;

/* Frees a result and its tensors; NULL-safe, sets *r_p to NULL. */
void zf_client_job_result_free(zf_client_job_result_t **r_p);

/* Called while zf_client_wait_result waits, about every 250 ms. */
typedef void (*zf_client_progress_fn)(void *arg, const char *job_id,
                                      const zf_client_job_progress_t *p);

/* Waits up to timeout_ms (<= 0: the client's timeout) for job_id's result,
 * for callers that do not know its fetches; *out (caller frees with
 * zf_client_job_result_free) gets them. When progress is not NULL, it is
 * called with the job's progress at once and about every 250 ms. A job not
 * finished in time is DEADLINE_EXCEEDED "job <id> has not finished within
 * N ms ...": it goes on, and its result waits for a later wait. A result
 * is collected once: NOT_FOUND afterwards. The job's own failure comes back
 * as its status, prefixed "job <id>"; a wait that got no result (the
 * service went silent or refused the wait) names the job and says that a
 * later wait can still collect its result. Each WaitJob it sends asks for
 * at most 1 s, so that a wait given up on leaves the scheduler within a
 * second and never takes the result with it. */
zf_status_t zf_client_wait_result(zf_client_t *c, const char *job_id, int timeout_ms,
                                  zf_client_progress_fn progress, void *arg,
                                  zf_client_job_result_t **out);

#endif
