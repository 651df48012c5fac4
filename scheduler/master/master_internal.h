/* The master's internals, shared by its files and by the master's unit
 * tests; not part of the public API. The files, each using only those
 * before it:
 *   master_calls.c    devices' lookup, calls in flight, deadlines
 *   master_names.c    a step's names, canonical and sorted
 *   master_plan.c     plans: placement, partitions, graph registration
 *   master_session.c  sessions and their references
 *   master_step.c     one step: RunGraph everywhere, first error wins
 *   master_async.c    steps run without a thread of their own
 *   master_job.c      jobs: submitted step sequences and their results
 *   master.c          the master's lifecycle, device events, envelopes */
#ifndef ZF_MASTER_INTERNAL_H
#define ZF_MASTER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/device_name.h"
#include "common/graph.h"
#include "common/strmap.h"
#include "scheduler/master/master.h"
#include "scheduler/graph/partial_run.h"
#include "scheduler/graph/partition.h"

/* Ids of sessions closed for idleness remembered, so that a late request
 * for one says why it is gone. */
#define ZF__MASTER_IDLE_IDS 256

/* One live executor. */
typedef struct zf__master_device {
    char *name; /* full device name */
    zf_device_name_t parsed;
    uint64_t incarnation;
    char *endpoint;   /* control endpoint */
    char *rendezvous; /* rendezvous endpoint; "" when it gave none */
    int64_t load;     /* as reported when it joined */
    int64_t placed;   /* nodes of this master's live plans on it */
} zf__master_device_t;

/* One request in flight: registered under the master's lock until its reply
 * (or its failure) arrives; owned by the caller that waits for it. */
typedef struct zf__master_call {
    uint64_t id;
    char device[ZF_DEVICE_NAME_MAX];
    bool done;
    zf_status_t status;     /* a failure without a reply (death, send error) */
    Zflow__Envelope *reply; /* owned once done */
    struct zf__master_call *next;
} zf__master_call_t;

/* A cached plan: see master_plan.c. */
typedef struct zf__master_plan zf__master_plan_t;

/* A plan's cost model: see master_cost.c. */
typedef struct zf__master_cost zf__master_cost_t;

struct zf__master_step;

/* A partial run: see master_partial.c. */
typedef struct zf__master_prun zf__master_prun_t;

/* Partial runs a session keeps open at most, and finished handles it
 * remembers (to say why a call naming one is refused). */
#define ZF__MASTER_PRUNS_MAX 64
#define ZF__MASTER_PRUN_GONE 16

typedef struct zf__master_session {
    char *id;
    Tensorflow__GraphDef *gd; /* owned by graph */
    zf_graph_t *graph;
    bool soft, place_first;
    int opt_level;          /* SessionOptions.opt_level, for RegisterGraph */
    bool bfloat16_sendrecv; /* SessionOptions' */
    int64_t cost_every;     /* SessionOptions.build_cost_model: 0, or trace every step */
    bool recv_scheduling;   /* SessionOptions.enable_recv_scheduling */
    bool place_pruned;      /* SessionOptions.place_pruned_graph */
    bool by_task;           /* SessionOptions.partition_by "task": two-pass plans */
    int64_t timeout_ms;
    zf_strmap_t *plans;    /* signature -> zf__master_plan_t *, under m->mu */
    pthread_mutex_t build; /* one plan built at a time per session */
    int refs;              /* under m->mu */
    bool closed;
    /* the client that made it ("": unknown), whether it counts against the
     * session limits (a job's does not), and when a step last ended or
     * started (monotonic ms; under m->mu) */
    char *client;
    bool counted;
    int64_t used_ms;
    /* the serialized bytes of the GraphDefs CreateSession and each
     * ExtendSession since brought, bounded by --max-graph-bytes; under build */
    int64_t graph_bytes;
    /* every function CreateSession and ExtendSession brought (NULL: none),
     * which the lowered graph no longer holds, so that an extension can
     * call them; under build */
    Tensorflow__FunctionDefLibrary *library;
    int64_t nodes;                        /* the graph's, after lowering */
    struct zf__master_session *gone_next; /* closed ones freed after the lock */
    /* the latest step's calls while it runs, and its partition count (for
     * job progress; master_step.c sets them), under m->mu */
    const zf__master_call_t *step_calls;
    int step_parts;
    /* The session's placement, made by its first plan and reused by every
     * later one while its devices live (TensorFlow places a session's graph
     * once, so a variable and every step that uses it agree on its device):
     * node i is on placed_names[placed_on[i]]. NULL until placed; under build. */
    char **placed_names;
    int n_placed_names;
    int *placed_on;
    /* the steps running now (under m->mu), for CancelStep and a close;
     * and the graph's version: 0, then one more per ExtendSession (under
     * build) */
    struct zf__master_step *running;
    int64_t graph_version;
    const char *cancel_why; /* set (a literal): every step is cancelled as it starts */
    /* its partial runs open (zf__master_prun_t), and the latest finished
     * handles with why; under m->mu (NULL until zf__master_pruns_new) */
    zf_partial_run_table_t *pruns;
} zf__master_session_t;

struct zf_master {
    zf_master_transport_t transport;
    void (*forget)(void *arg, const char *endpoint); /* the transport's, or NULL */
    int64_t register_timeout_ms, abort_grace_ms;
    pthread_mutex_t mu; /* devices, calls, sessions, plans, refs */
    pthread_cond_t cv;  /* a call completed */
    zf__master_device_t **devices;
    int n_devices, cap_devices;
    zf__master_call_t *pending;
    uint64_t next_request;
    zf_strmap_t *sessions; /* id -> zf__master_session_t * */
    uint64_t next_session;
    zf_strmap_t *jobs; /* id -> zf__master_job_t *, under mu */
    uint64_t next_job;
    /* master_job.c, under mu: finished jobs whose results wait, oldest
     * first, and their retention (0: the defaults) */
    struct zf__master_job *jobs_done_head, *jobs_done_tail;
    int n_jobs_done, jobs_keep_max;
    int64_t jobs_keep_ms, jobs_last_tick_ms, jobs_steps_max;
    char id_prefix[24];              /* before every session and job id */
    struct zf__master_async *asteps; /* master_async.c: steps run without a thread, under mu */
    /* master_session.c, under mu: the limits, the counted sessions in all
     * and per client (client -> count, only clients with some), the ids
     * of the latest sessions closed for idleness (a ring) */
    zf_master_limits_t limits;
    int n_counted;
    zf_strmap_t *per_client;
    char *idle_closed[ZF__MASTER_IDLE_IDS];
    int idle_next;
    int64_t sessions_tick_ms;
};

/* ---- master_calls.c ------------------------------------------------------ */

/* The live device named name, or NULL. Under m->mu. */
zf__master_device_t *zf__master_find_device(zf_master_t *m, const char *name);

/* Sends env to device and registers call to receive the reply. When the
 * device is not alive with incarnation (0: any) or the send fails, the call
 * is done at once with the error. Under m->mu. */
void zf__master_call_start(zf_master_t *m, zf__master_call_t *call, const char *device,
                           uint64_t incarnation, Zflow__Envelope *env);

/* Removes a call still pending and frees its reply and status. Under
 * m->mu. */
void zf__master_call_finish(zf_master_t *m, zf__master_call_t *call);

/* Fails the calls in flight to device with UNAVAILABLE. Under m->mu. */
void zf__master_fail_calls(zf_master_t *m, const char *device, const char *reason);

/* Sends env to device without waiting for a reply (one that comes is
 * dropped). Errors are logged. Under m->mu. */
void zf__master_send_oneway(zf_master_t *m, const char *device, Zflow__Envelope *env);

/* The status a finished call's reply carries: its own error, or
 * INTERNAL when the reply's body is not `want`. */
zf_status_t zf__master_reply_status(const zf__master_call_t *c, Zflow__Envelope__BodyCase want);

/* st prefixed with the device it came from (OK passes through). */
zf_status_t zf__master_with_device(zf_status_t st, const char *device);

/* st as a Status message (OK: code 0), or NULL when out of memory. */
Zflow__Status *zf__master_status_proto(const zf_status_t *st);

/* Absolute CLOCK_REALTIME deadline ms from now. */
void zf__master_deadline(struct timespec *ts, int64_t ms);

/* ---- master_session.c ---------------------------------------------------- */

/* Drops a reference to a session (under m->mu); the last one frees it.
 * *s_p is then NULL; a NULL session is a no-op. */
void zf__master_session_unref(zf_master_t *m, zf__master_session_t **s_p);

/* Frees a session with no references left: its plans, placement, graph. */
void zf__master_session_free(zf_master_t *m, zf__master_session_t *s);

/* A job's session: as zf_master_create_session(), counted in no limit. */
zf_status_t zf__master_create_job_session(zf_master_t *m, const Zflow__CreateSession *req,
                                          char **session);

/* zf_master_extend_session for the scheduler's own extension of a session
 * (a job's checkpoint graph): not counted against the bounds on a client's
 * graphs (--max-graph-nodes, --max-graph-bytes). */
zf_status_t zf__master_extend_own(zf_master_t *m, const Zflow__ExtendSession *req,
                                  int64_t *new_version);

/* zf_master_check_graph(), also giving gd's serialized size in *bytes. */
zf_status_t zf__master_check_graph(zf_master_t *m, const Tensorflow__GraphDef *gd, const char *what,
                                   int64_t *bytes);

/* A monotonic clock in ms. */
int64_t zf__master_now_ms(void);

/* The session named id with a reference taken (under m->mu), or NULL with
 * *st set to NOT_FOUND, saying so when it was closed for idleness. */
zf__master_session_t *zf__master_session_find(zf_master_t *m, const char *id, zf_status_t *st);

/* The step timeout for a step asking for req_ms (<= 0: none) of session s:
 * the request's, else the session's, else the scheduler's default (0:
 * none). */
int64_t zf__master_step_timeout(const zf_master_t *m, const zf__master_session_t *s,
                                int64_t req_ms);

/* ---- master_names.c ------------------------------------------------------ */

/* A RunStep's names: canonical ("x" -> "x:0") in the request's order, sorted
 * unique copies, and the plan signature they make. */
typedef struct zf__master_names {
    char **feeds, **fetches; /* request order, canonical */
    char **s_feeds, **s_fetches, **s_targets;
    int n_feeds, n_fetches, ns_feeds, ns_fetches, ns_targets;
    char *sig; /* "feeds\x1f" "fetches\x1f" "targets\x1f", each name followed by '\x1e' */
} zf__master_names_t;

/* Fills nm (zeroed by the caller; free with zf__master_names_free even on
 * error) from req. INVALID_ARGUMENT naming the malformed, empty or repeated
 * name, a feed without a tensor, or a step with nothing to fetch or run. */
zf_status_t zf__master_names(const Zflow__RunStep *req, zf__master_names_t *nm);
void zf__master_names_free(zf__master_names_t *nm);

/* A sorted copy of v[0..n) without repeats (*out freed with
 * zf__master_free_strv(*out, *n_out)); a repeat is INVALID_ARGUMENT naming
 * it when unique. */
zf_status_t zf__master_sorted(const char *what, char **v, int n, bool unique, char ***out,
                              int *n_out);

/* TensorFlow's feed check: the fed tensor has the graph's dtype. */
zf_status_t zf__master_check_feed(const zf_graph_t *g, const char *name,
                                  const Tensorflow__TensorProto *t);

/* Frees v[0..n) and v; qsort/bsearch comparison of two char *. */
void zf__master_free_strv(char **v, int n);
int zf__master_cmp_str(const void *a, const void *b);

/* ---- master_plan.c ------------------------------------------------------- */

/* A plan: one run signature's partitions, registered with their executors. */
struct zf__master_plan {
    char **feeds; /* canonical "node:port", sorted, unique */
    int n_feeds;
    char **fetches; /* canonical, sorted, unique */
    int n_fetches;
    zf_partition_set_t *set;
    uint64_t *incarnation;  /* per partition: its executor's, when placed */
    char **handle;          /* per partition: graph handle */
    int64_t *nodes;         /* per partition: node count, its share of the load */
    const char **fetch_key; /* per fetch: rendezvous key (borrowed from set) */
    int refs;               /* under m->mu; the session's cache holds one */
    bool dropped;
    zf__master_cost_t *cost; /* its traced steps' costs (NULL: none yet); under m->mu */
    int64_t cost_steps;      /* its steps traced for the session's cost_every; under m->mu */
    zf_partial_run_t
        *prun; /* a partial run's needs, nothing given (NULL: no setup yet); under m->mu */
};

/* The session's plan for nm's signature, built (placed, partitioned,
 * registered) on first use; *out holds a reference. Errors of placement,
 * partitioning and registration, naming the device. */
zf_status_t zf__master_plan_get(zf_master_t *m, zf__master_session_t *s, zf__master_names_t *nm,
                                zf__master_plan_t **out);

/* Takes and drops a reference to a plan (under m->mu); the unref sets *p_p
 * to NULL, and a NULL plan is a no-op. */
void zf__master_plan_ref(zf__master_plan_t *p);
void zf__master_plan_unref(zf__master_plan_t **p_p);

/* Removes plan from its session (under m->mu): subtracts its loads and
 * deregisters its graphs on the devices still alive; freed with its last
 * reference. */
void zf__master_plan_drop(zf_master_t *m, zf__master_session_t *s, const char *sig,
                          zf__master_plan_t *p);

/* Drops every plan of s, or only those that use device (when not NULL).
 * Under m->mu. */
void zf__master_drop_plans(zf_master_t *m, zf__master_session_t *s, const char *device);

/* Forgets s's placement (freed with the session, or when one of its devices
 * is gone). */
void zf__master_placement_free(zf__master_session_t *s);

/* ---- master_cost.c ------------------------------------------------------- */

/* Folds a traced step's kernel runs into p's cost model. Under m->mu. */
void zf__master_cost_add(zf__master_plan_t *p, Zflow__NodeRun *const *runs, size_t n_runs);

/* p's cost model as out's cost_graph (nothing when it has none). Under
 * m->mu. RESOURCE_EXHAUSTED. */
zf_status_t zf__master_cost_graph(const zf__master_plan_t *p, Zflow__RunStepReply *out);

void zf__master_cost_free(zf__master_cost_t **c_p);

/* ---- master_checkpoint.c: jobs' checkpoints ------------------------------- */

typedef struct zf__master_ckpt {
    const char *dir; /* SubmitJob.checkpoint_dir, borrowed */
    int64_t every;   /* SubmitJob.checkpoint_every, > 0 */
    int n_vars;      /* set by zf__master_ckpt_prepare */
} zf__master_ckpt_t;

/* Extends the job's session with the save and restore sub-graphs over its
 * variables. INVALID_ARGUMENT for a graph without variables; the errors of
 * ExtendSession; each prefixed "checkpoint". */
zf_status_t zf__master_ckpt_prepare(zf_master_t *m, const char *session, zf__master_ckpt_t *ck);

/* Restores the newest checkpoint of ck->dir that reads back whole; *step
 * is its step (0: none there, nothing restored). */
zf_status_t zf__master_ckpt_restore(zf_master_t *m, const char *session, zf__master_ckpt_t *ck,
                                    int64_t *step);

/* Saves the variables and step into ck->dir. */
zf_status_t zf__master_ckpt_save(zf_master_t *m, const char *session, zf__master_ckpt_t *ck,
                                 int64_t step);

/* ---- master_step.c: one step ------------------------------------------------ */

/* A step in progress: its plan (a reference), id, one call per partition. */
typedef struct zf__master_step {
    zf_master_t *m;
    zf__master_session_t *s; /* on its running list while it runs */
    struct zf__master_step *next_running;
    zf__master_plan_t *p;
    int64_t step_id;
    int64_t timeout_ms;
    zf__master_call_t *calls;
    bool *seen;
    zf_status_t first; /* the step's error: the first one seen */
    int failed;        /* the partition that failed first; -1 for none */
    bool aborted, restarted;
    bool default_timeout; /* timeout_ms is the scheduler's --step-timeout-ms */
    /* a call of a partial run (master_partial.c): its step's id, and whether
     * it is the last call; set before zf__master_step_begin, 0 otherwise */
    int64_t prun_step_id;
    bool prun_last;
} zf__master_step_t;

/* Gives st (st->m set) a step id and sends RunGraph to every partition of
 * plan p. RESOURCE_EXHAUSTED leaves st without calls. Under m->mu. */
zf_status_t zf__master_step_begin(zf__master_step_t *st, zf__master_session_t *s,
                                  zf__master_plan_t *p, const Zflow__RunStep *req,
                                  const zf__master_names_t *nm, Zflow__RunStepReply *out);

/* Waits for the partitions: the first error aborts the others, the
 * deadline aborts them all, stragglers get abort_grace_ms. Under m->mu. */
void zf__master_step_wait(zf__master_step_t *st);

/* Ends every step running in s with CANCELLED "step N cancelled: <why>"
 * (their partitions are aborted as after any error); the steps cancelled.
 * Under m->mu. */
int zf__master_cancel_running(zf_master_t *m, zf__master_session_t *s, const char *why);

/* DEADLINE_EXCEEDED "step N did not finish within M ms", naming the
 * scheduler's flag when its default timeout applied. */
zf_status_t zf__master_step_deadline(const zf__master_step_t *st);

/* Looks at the replies that arrived since the last look; true when every
 * partition has answered. The first error becomes st->first. Under m->mu. */
bool zf__master_step_scan(zf__master_step_t *st);

/* AbortStep with st->first to every partition but the failed one. Under
 * m->mu. */
void zf__master_step_abort_others(zf__master_step_t *st);

/* CleanupGraph for the step on every partition's executor. Under m->mu.
 * Only a step that failed somewhere needs it: an executor whose partition
 * ran to the end without an error cleans the step up itself (no tensor can
 * still come for it), so a step that succeeded everywhere costs no
 * CleanupGraph messages. */
void zf__master_step_cleanup(zf__master_step_t *st);

/* Ends a step whose partitions have answered (or were given up on):
 * CleanupGraph when cleanup and the step failed, the fetches into out, the plan dropped when an
 * executor failed or restarted, the calls freed. Returns the step's status.
 * Under m->mu. */
zf_status_t zf__master_step_end(zf__master_step_t *st, zf__master_session_t *s,
                                const Zflow__RunStep *req, const zf__master_names_t *nm,
                                Zflow__RunStepReply *out, bool cleanup);

/* Makes rep (request_id set) the RunStepReply envelope for r (taken over
 * by rep; NULL: a new one) with st (cleared) as its status when not OK.
 * Errors: RESOURCE_EXHAUSTED (rep still owns what it holds). */
zf_status_t zf__master_run_reply(Zflow__RunStepReply *r, zf_status_t st, Zflow__Envelope *rep);

/* A new empty RunStepReply. RESOURCE_EXHAUSTED. */
zf_status_t zf__master_reply_new(Zflow__RunStepReply **out);

/* ---- master_partial.c: partial runs ------------------------------------------ */

/* A RunStep with partial_run_setup (a new handle into out) or with
 * partial_run_handle (a call: its fetches into out), in TensorFlow's words
 * for its errors. */
zf_status_t zf__master_partial(zf_master_t *m, zf__master_session_t *s, const Zflow__RunStep *req,
                               Zflow__RunStepReply *out);

/* Makes s's table of partial runs, its errors naming s->id (set). */
zf_status_t zf__master_pruns_new(zf__master_session_t *s);

/* Aborts and cleans up s's partial runs (those with a call running end
 * with its cancellation) and forgets them. Under m->mu. */
void zf__master_pruns_drop(zf_master_t *m, zf__master_session_t *s, const char *why);

/* Frees what s remembers of finished partial runs. */
void zf__master_pruns_free(zf__master_session_t *s);

/* ---- master_job.c -------------------------------------------------------- */

/* Fires every pending waiter with CANCELLED and frees every job; for
 * zf_master_destroy(), with m->mu not held. */
void zf__master_jobs_free(zf_master_t *m);

/* ---- master_async.c ------------------------------------------------------ */

/* Ends every step zf_master_start_step() started with CANCELLED (their
 * callbacks fire); for zf_master_destroy(), with m->mu not held. */
void zf__master_asteps_cancel(zf_master_t *m);

/* The monotonic deadline timeout_ms after now_ms (both from the wire or a
 * clock): 0 (none) when timeout_ms <= 0, and no overflow for absurd ones. */
static inline int64_t zf__master_deadline_after(int64_t now_ms, int64_t timeout_ms)
{
    if (timeout_ms <= 0) return 0;
    return timeout_ms > INT64_MAX - now_ms ? INT64_MAX : now_ms + timeout_ms;
}

#endif
