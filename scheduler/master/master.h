/* The master: the scheduler's sessions over a live set of executors — the
 * plan cache, placement, partitioning, graph registration and the step
 * protocol (docs/service.md; docs/design.md, "Steps and failures").
 * Independent of sockets: it talks to executors through a
 * zf_master_transport_t.
 *
 * Design note.
 * - Devices. Each executor is known by its ExecutorInfo (full device name,
 *   incarnation, control endpoint, load). zf_master_device_joined() adds or
 *   replaces one (a new incarnation drops the plans made for the old one);
 *   zf_master_device_died() removes it, fails every request in flight to it
 *   with UNAVAILABLE naming the device (so the steps using it fail at once)
 *   and drops every cached plan that used it. An endpoint no live device
 *   uses any more goes to the transport's forget hook, so that connections
 *   do not pile up as executors come and go.
 * - Sessions. CreateSession parses and validates the GraphDef; nothing is
 *   placed until a run needs a plan, so executors that join later are used.
 * - Placement. A session's graph is placed once, by its first plan, on the
 *   devices alive at that moment (ZF_PLACE_BALANCED with each device's
 *   reported load plus the nodes this master has placed there, or
 *   ZF_PLACE_FIRST when the session asks); every later plan reuses that
 *   placement while all its devices live, so a variable and every step
 *   that uses it agree on its device. When one of them is gone, the next
 *   plan places the graph again on the devices left.
 * - Plans. Per session, one plan per signature (sorted feeds, fetches and
 *   targets): the placed graph pruned and partitioned by device, each
 *   partition registered with its executor once (RegisterGraph -> graph
 *   handle).
 * - Steps. Each run gets a new step id; RunGraph goes to every partition at
 *   once, carrying the client's feeds under the partitions' rendezvous keys
 *   and the fetch keys. The first error wins, prefixed with its device when
 *   it does not name one; the other partitions get AbortStep. A step that
 *   outlives its timeout fails with DEADLINE_EXCEEDED and is aborted
 *   everywhere. A step that failed somewhere (an error, an abort or a
 *   timeout) ends with CleanupGraph to every partition, so that no
 *   executor keeps its state; a step that succeeded everywhere sends none,
 *   since each executor frees a step's state itself once its partition has
 *   run to the end without an error.
 *   A reply of ABORTED (an executor restarted) drops the plan too.
 *
 * Thread-safety: every function may be called from any thread; runs of one
 * or many sessions may proceed concurrently. zf_master_run_step() blocks
 * until its step has ended; replies reach it through zf_master_deliver(),
 * which must therefore be called from another thread. */
#ifndef ZF_MASTER_H
#define ZF_MASTER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/status.h"
#include "proto/service.pb-c.h"

typedef struct zf_master zf_master_t;

/* How the master reaches executors. send() delivers env (borrowed; its
 * request_id is already set, unique per master) to the executor `device`
 * whose control endpoint is `endpoint`, and returns without waiting for the
 * reply; the reply, whenever it comes, is handed to zf_master_deliver().
 * An error from send() means no reply will come. send() is called with
 * the master's lock held: it must not call back into the master (queue the
 * message and deliver replies from another thread) and must not block for
 * long. */
typedef struct zf_master_transport {
    zf_status_t (*send)(void *arg, const char *device, const char *endpoint,
                        const Zflow__Envelope *env);
    void *arg;
} zf_master_transport_t;

typedef struct zf_master_options {
    /* How long plan building waits for RegisterGraph replies; 0: 30000. */
    int64_t register_timeout_ms;
    /* After a step failed or timed out and the others were told to abort,
     * how long it waits for their replies before it ends anyway; 0: 2000. */
    int64_t abort_grace_ms;
    /* Put before every session and job id (at most 23 bytes; NULL: none),
     * so that a broker can tell which scheduler holds them. */
    const char *id_prefix;
    /* The transport's forget hook (NULL: none): called with the
     * transport's arg, under the rules of its send(), when no live device
     * uses executor control endpoint `endpoint` any more (its device died,
     * restarted or moved), after the calls in flight to that device have
     * failed, so that the transport can close the connection. */
    void (*forget)(void *arg, const char *endpoint);
} zf_master_options_t;

/* A master with no devices and no sessions. transport is copied; its arg
 * must outlive the master. opts may be NULL. Registers the built-in
 * kernels' availability (the placer needs it). Caller owns *out.
 * Errors: RESOURCE_EXHAUSTED. */
zf_status_t zf_master_new(const zf_master_transport_t *transport, const zf_master_options_t *opts,
                          zf_master_t **out);

/* Replaces the prefix of the session and job ids made from now on (see
 * zf_master_options_t.id_prefix; NULL: none); ids already made keep theirs.
 * A scheduler whose id was taken at its broker picks another. */
void zf_master_set_id_prefix(zf_master_t *m, const char *prefix);

/* Frees every session and plan without telling executors. No call may be
 * in progress; steps zf_master_start_step() started and still running end
 * with CANCELLED, their callbacks firing here. NULL-safe, sets *m_p to
 * NULL. */
void zf_master_destroy(zf_master_t **m_p);

/* ---- devices ------------------------------------------------------------- */

/* Adds the executor info describes (borrowed), or replaces the one of the
 * same name. Errors: INVALID_ARGUMENT naming what is wrong for a missing
 * or partial device name, a zero incarnation or an empty control endpoint;
 * RESOURCE_EXHAUSTED. */
zf_status_t zf_master_device_joined(zf_master_t *m, const Zflow__ExecutorInfo *info);

/* Removes device `name` (a no-op when unknown): requests in flight to it
 * fail with UNAVAILABLE "executor <name> died: <reason>", and plans that
 * used it are dropped (their graphs on the other executors are
 * deregistered). reason may be NULL. */
void zf_master_device_died(zf_master_t *m, const char *name, const char *reason);

/* Removes every device as zf_master_device_died() does (a scheduler that
 * stops uses it so that steps in flight end at once). */
void zf_master_drop_devices(zf_master_t *m, const char *reason);

/* Removes, as zf_master_device_died() does, every device not named by
 * keep[0..n) (a broker's fresh listing, borrowed). */
void zf_master_retain_devices(zf_master_t *m, Zflow__ExecutorInfo *const *keep, size_t n,
                              const char *reason);

/* Applies a DeviceEvent (borrowed): JOINED or DIED. Errors as
 * zf_master_device_joined(); INVALID_ARGUMENT for an event without an
 * executor or of an unknown kind. */
zf_status_t zf_master_device_event(zf_master_t *m, const Zflow__DeviceEvent *ev);

/* Number of devices alive now. */
int zf_master_num_devices(zf_master_t *m);

/* ---- replies ------------------------------------------------------------- */

/* Hands an executor's reply to the request it answers (matched by
 * request_id) and takes ownership of *reply_p (sets it to NULL). A reply
 * nobody waits for (a one-way message's, or one that came too late) is
 * freed. */
void zf_master_deliver(zf_master_t *m, Zflow__Envelope **reply_p);

/* ---- sessions ------------------------------------------------------------ */

/* Creates a session for req (borrowed; the graph is copied). On success
 * *session is the new session id (caller frees). Errors: INVALID_ARGUMENT
 * for a missing or invalid graph (zf_graph's messages); RESOURCE_EXHAUSTED. */
zf_status_t zf_master_create_session(zf_master_t *m, const Zflow__CreateSession *req,
                                     char **session);

/* zf_master_create_session() for the client `client` (its identity as the
 * service knows it: a CURVE identity or a routing id; borrowed; "" or NULL:
 * counted only in the total). Errors besides those of
 * zf_master_create_session(): RESOURCE_EXHAUSTED naming the limit and its
 * flag when the scheduler holds max_sessions sessions
 * (--max-sessions) or this client max_sessions_per_client
 * (--max-sessions-per-client), and a graph past the size limits
 * (zf_master_check_graph()). */
zf_status_t zf_master_create_session_for(zf_master_t *m, const Zflow__CreateSession *req,
                                         const char *client, char **session);

/* Runs one step of req (borrowed). On success *out (caller frees with
 * zflow__run_step_reply__free_unpacked(out, NULL)) holds OK, the step id and
 * one NamedTensor per requested fetch, in the request's order and named as
 * the request names them. Blocks until the step has ended everywhere (or
 * its stragglers were given up on). Errors: NOT_FOUND for an unknown
 * session; INVALID_ARGUMENT for malformed or unknown names, a tensor fed
 * twice, a feed without a tensor or of the wrong dtype; the placer's and
 * partitioner's errors; an executor's error, prefixed with its device;
 * UNAVAILABLE "executor <device> died: ..." when an executor of the step
 * died; DEADLINE_EXCEEDED "step <id> did not finish within <ms> ms". */
zf_status_t zf_master_run_step(zf_master_t *m, const Zflow__RunStep *req,
                               Zflow__RunStepReply **out);

/* Closes session `session`: its plans are dropped and their graphs
 * deregistered at once (a step still running may then fail; its reply is
 * still delivered). Errors: NOT_FOUND. */
zf_status_t zf_master_close_session(zf_master_t *m, const char *session);

/* Cancels every step of session running now (CancelStep): each ends with
 * CANCELLED "step N cancelled: its client cancelled it", its partitions
 * aborted on every executor. *n (may be NULL) is the number cancelled; a
 * session with none running is OK. Errors: NOT_FOUND. Closing a session
 * cancels its running steps the same way. */
zf_status_t zf_master_cancel_steps(zf_master_t *m, const char *session, int *n);

/* Adds req->graph's nodes and functions (borrowed) to req->session's graph
 * (ExtendSession); *new_version is the session's graph version after it.
 * The new nodes may call every function the session was given (at
 * CreateSession or by an earlier extend); they are inlined and lowered as
 * CreateSession's are.
 * Existing nodes and their devices never change, so cached plans stay;
 * the new nodes are placed by the first plan that needs them, next to
 * the placement made so far. Errors: NOT_FOUND for the session; ABORTED
 * "Current version is N but caller expected M." when another extend came
 * first; INVALID_ARGUMENT "GraphDef argument to Extend includes node 'x',
 * which was created by a previous call to Create or Extend in this
 * session." for a clash, or a function of the same name defined
 * differently, and the graph checks of CreateSession (prefixed
 * "ExtendSession"); RESOURCE_EXHAUSTED when the graph would pass
 * --max-graph-nodes, or when the GraphDefs the session was sent
 * (CreateSession's and every extension's, serialized) would together pass
 * --max-graph-bytes: "ExtendSession: the session's graph is N bytes
 * serialized and the extension M more; this scheduler takes at most L
 * (zflow-scheduler --max-graph-bytes)". A refused extension changes
 * nothing. */
zf_status_t zf_master_extend_session(zf_master_t *m, const Zflow__ExtendSession *req,
                                     int64_t *new_version);

/* ---- bounds ---------------------------------------------------------------- */

/* Design note. A scheduler serves whoever reaches it, so what clients can
 * make it hold is bounded: sessions in all and per client, a session
 * nobody uses for long is closed (TensorFlow's session_gc), a graph's size
 * at CreateSession and SubmitJob, and every step has a deadline even when
 * its client gives none, so no step holds a worker for good. Each refusal
 * names the limit and the zflow-scheduler flag that sets it. Jobs' own
 * sessions count in neither session limit (--job-workers and
 * --max-queued-jobs bound them) nor are they closed for idleness. */
#define ZF_MASTER_SESSIONS_MAX            4096
#define ZF_MASTER_SESSIONS_PER_CLIENT_MAX 256
#define ZF_MASTER_SESSION_IDLE_MS         3600000              /* an hour */
#define ZF_MASTER_GRAPH_NODES_MAX         4000000              /* ZF_GRAPHDEF's own bound */
#define ZF_MASTER_GRAPH_BYTES_MAX         ((int64_t)256 << 20) /* the broker's frame limit */
#define ZF_MASTER_STEP_TIMEOUT_MS         3600000

/* Each field 0: its default above; session_idle_ms and step_timeout_ms
 * < 0: none. */
typedef struct zf_master_limits {
    int max_sessions;            /* --max-sessions */
    int max_sessions_per_client; /* --max-sessions-per-client */
    int64_t session_idle_ms;     /* --session-idle-timeout-ms */
    int64_t max_graph_nodes;     /* --max-graph-nodes */
    int64_t max_graph_bytes;     /* --max-graph-bytes (serialized GraphDef) */
    int64_t step_timeout_ms;     /* --step-timeout-ms: a step whose request and
                                  * session give no timeout */
} zf_master_limits_t;

/* Sets the limits (NULL: every default). Sessions already open stay. */
void zf_master_set_limits(zf_master_t *m, const zf_master_limits_t *limits);

/* The graph size check of CreateSession and SubmitJob (what names the
 * request): RESOURCE_EXHAUSTED "<what>: the graph has N nodes; this
 * scheduler takes at most M (--max-graph-nodes)" or "... is N bytes ...
 * (--max-graph-bytes)". */
zf_status_t zf_master_check_graph(zf_master_t *m, const Tensorflow__GraphDef *gd, const char *what);

/* Closes the sessions idle past the idle timeout (no step running, none
 * started for that long); their later requests are NOT_FOUND saying so.
 * At most once per 100 ms however often it is called; a service calls it
 * from its loop. Returns the sessions closed. */
int zf_master_sessions_tick(zf_master_t *m);

/* A graph of at least this many nodes is large: once the scheduler frees
 * one (a session closed, or the request that carried it), it gives the
 * freed heap back to the system, zf_master_release_memory(). */
#define ZF_MASTER_TRIM_NODES 10000

/* Returns the heap's free pages to the system (malloc_trim): a large
 * graph's memory, freed by one of many worker threads into that thread's
 * arena, would otherwise stay with the process, every arena holding the
 * largest graph it ever saw. Takes a few ms for a heap of hundreds of MB. */
void zf_master_release_memory(void);

/* Sessions open now (jobs' included); tests, logs. */
int zf_master_num_sessions(zf_master_t *m);

/* Answers a client request (CreateSession, RunStep, CloseSession; any other
 * body gets UNIMPLEMENTED) with a reply envelope echoing its request id.
 * Blocks as the request does. Caller owns *reply
 * (zflow__envelope__free_unpacked(reply, NULL)). Errors only
 * RESOURCE_EXHAUSTED (no reply could be built); a request's failure is
 * carried in the reply. */
zf_status_t zf_master_handle(zf_master_t *m, const Zflow__Envelope *request,
                             Zflow__Envelope **reply);

/* zf_master_handle() for the client `client` (see
 * zf_master_create_session_for()). */
zf_status_t zf_master_handle_from(zf_master_t *m, const Zflow__Envelope *request,
                                  const char *client, Zflow__Envelope **reply);

/* ---- one-shot jobs -------------------------------------------------------- */

/* Design note. A job is a session created for it, its step run `steps`
 * times on that session (variables persist from run to run, as in a
 * training loop), and the session closed; its fetches are the last run's.
 * Its state goes QUEUED (zf_master_job_new) -> RUNNING (zf_master_job_run)
 * -> DONE, and pollers see its progress. A DONE job's result waits for a
 * waiter, within bounds, so that abandoned jobs cannot grow memory: at most
 * `max_results` results wait (the oldest go first) and none longer than
 * `max_age_ms` after its job ended; an id so dropped is NOT_FOUND, as an
 * unknown one is. */

/* Job states; the values are zflow.JobState's. */
typedef enum zf_master_job_state {
    ZF_MASTER_JOB_QUEUED = 1,
    ZF_MASTER_JOB_RUNNING = 2,
    ZF_MASTER_JOB_DONE = 3,
} zf_master_job_state_t;

typedef struct zf_master_job_progress {
    zf_master_job_state_t state;
    int64_t steps_done, steps_total;
    int partitions_running; /* RunGraph calls of the current step not answered yet */
    int partitions_total;   /* partitions of the job's plan; 0 before its first step */
    int64_t elapsed_ms;     /* since it started running (0 while queued); frozen when done */
} zf_master_job_progress_t;

/* Default retention of results nobody collected. */
#define ZF_MASTER_JOB_RESULTS_MAX   1024
#define ZF_MASTER_JOB_RESULT_AGE_MS 600000

/* Sets the retention of uncollected results (<= 0: the default). Results
 * already over the new bounds go at the next job call or tick. */
void zf_master_set_job_retention(zf_master_t *m, int max_results, int64_t max_age_ms);

/* Default and setter (<= 0: the default) of the most steps one job may ask
 * for, so that no job can hold a scheduler for practically ever. */
#define ZF_MASTER_JOB_STEPS_MAX 1000000
void zf_master_set_job_steps_max(zf_master_t *m, int64_t max_steps);

/* Creates job for req (borrowed; checked only): CreateSession, a RunStep
 * of its init_targets when it has some, `steps` RunSteps and CloseSession
 * in one. *job_id (caller frees) names it for
 * zf_master_job_poll() and zf_master_job_wait(). Errors: INVALID_ARGUMENT
 * for a job without a session or a step, or with negative steps or more
 * than the limit ("SubmitJob asks for N steps; this scheduler runs at
 * most M per job (--max-job-steps)");
 * RESOURCE_EXHAUSTED. */
zf_status_t zf_master_job_new(zf_master_t *m, const Zflow__SubmitJob *req, char **job_id);

/* Runs job job_id of req (borrowed, the one given to zf_master_job_new):
 * creates its session, runs its init_targets (once, without feeds or
 * fetches; a failure is prefixed "init targets"), then its step req->steps
 * times (at least once; the step's session field is ignored; the first
 * failure ends the job, prefixed "step K of N" when N > 1), closes the
 * session, and keeps the result for a waiter. Blocks as
 * zf_master_run_step() does, once per step. An id that is not a queued job
 * is logged and ignored. */
void zf_master_job_run(zf_master_t *m, const char *job_id, const Zflow__SubmitJob *req);

/* Cancels job job_id (CancelJob): queued, it never runs; running, its
 * current step is cancelled on every executor and no further step runs.
 * Its result is CANCELLED "job <id> cancelled: its client cancelled it",
 * collected as any result. Errors: NOT_FOUND as zf_master_job_wait();
 * FAILED_PRECONDITION for a job that has finished already. */
zf_status_t zf_master_job_cancel(zf_master_t *m, const char *job_id);

/* The progress of job job_id into *out (zeroed on error). Does not collect
 * the result. Errors: NOT_FOUND as zf_master_job_wait(). */
zf_status_t zf_master_job_poll(zf_master_t *m, const char *job_id, zf_master_job_progress_t *out);

/* Receives a job's RunStepReply (owned by the callback; its status carries
 * the job's error; NULL when no reply could be allocated). */
typedef void (*zf_master_job_fn)(void *arg, Zflow__RunStepReply *reply);

/* Calls done with the job's result once it has finished — at once when it
 * has. Every waiter registered before the job finishes gets a copy; the
 * job is then forgotten. With timeout_ms > 0, a waiter whose job has not
 * finished that long after the call gets, at the next
 * zf_master_jobs_tick(), a reply with DEADLINE_EXCEEDED, and the job's
 * result stays for a later waiter. Destroying the master fires waiters
 * still pending with CANCELLED. Errors (done never fires): NOT_FOUND "job
 * '<id>' not found: ..." for ids unknown, already collected or expired;
 * RESOURCE_EXHAUSTED. */
zf_status_t zf_master_job_wait_for(zf_master_t *m, const char *job_id, int64_t timeout_ms,
                                   zf_master_job_fn done, void *arg);

/* zf_master_job_wait_for() without a timeout. */
zf_status_t zf_master_job_wait(zf_master_t *m, const char *job_id, zf_master_job_fn done,
                               void *arg);

/* Housekeeping, at most once per 50 ms however often it is called: answers
 * waiters past their timeout and drops results past their age. A service
 * calls it from its loop; the callbacks run on the calling thread, without
 * the master's lock. */
void zf_master_jobs_tick(zf_master_t *m);

/* ---- steps without a thread --------------------------------------------- */

/* Receives an asynchronous step's reply envelope (owned by the callback;
 * NULL when none could be allocated). */
typedef void (*zf_master_step_fn)(void *arg, Zflow__Envelope *reply);

/* Starts the RunStep *request without blocking when its session has the
 * plan for its signature cached (the common case of a session's steps
 * after its first): RunGraph goes to every partition and *started is true;
 * *request is taken over (set to NULL) and done(arg, reply) fires from a
 * later zf_master_poll(). Otherwise nothing happens and *started is false
 * (the caller runs the request with zf_master_handle(), which builds the
 * plan or reports the error). Never blocks on executors. */
void zf_master_start_step(zf_master_t *m, Zflow__Envelope **request, zf_master_step_fn done,
                          void *arg, bool *started);

/* Advances the steps zf_master_start_step() started: those that have ended
 * (every reply in, or first error plus abort grace, or timeout) are
 * finished and their callbacks fire, on the calling thread without the
 * master's lock. Returns the ms until the next step deadline (-1: none).
 * Call after delivering replies and at least when that time is up. */
int64_t zf_master_poll(zf_master_t *m);

/* Number of cached plans of session (-1 when unknown); tests, logs. */
int zf_master_num_plans(zf_master_t *m, const char *session);

#endif
