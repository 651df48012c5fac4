/* The scheduler service: the master (scheduler/master/master.h) behind a DEALER
 * connected to the broker and a ROUTER for clients' direct requests, with
 * its executor connections (scheduler/server/rpc.h).
 *
 * Design note. One thread (the caller of zf_sched_server_run()) owns the
 * broker socket, the client ROUTER and the executor sockets (a polled rpc).
 * It registers with RegisterScheduler (its client endpoint and its id, the
 * prefix of its session and job ids), seeds the master's device set from
 * the reply and applies every DeviceEvent. Client requests arrive as
 * [client][envelope] from the broker or on the client ROUTER (RunStep,
 * CloseSession, CreateSession and Ping only; a Ping is answered at once).
 * A RunStep whose plan is cached runs on this thread without blocking
 * (zf_master_start_step, zf_master_poll); CreateSession, other RunSteps and
 * CloseSession go to a pool of request workers (a RunStep blocks its worker
 * until the step ends), whose replies come back through a queue and a pipe
 * and leave by the socket the request came in on, as [client][envelope]
 * with the request id preserved. A CreateSessionReply names the client
 * endpoint. SubmitJob is answered with a job id at once, from this thread;
 * the job (all its steps) then runs on a pool of its own, job_workers
 * threads, and waits QUEUED (PollJob) while they are all busy: a long job
 * holds a job worker, never a request worker, so sessions' requests never
 * wait behind jobs. WaitJob is answered when its job ends, PollJob at once,
 * neither holding a worker. A SubmitJob beyond max_queued_jobs waiting
 * jobs is refused at once with RESOURCE_EXHAUSTED naming the limit and its
 * flag. Other requests are answered UNIMPLEMENTED;
 * malformed ones INVALID_ARGUMENT. When the broker socket connects again
 * (a restarted broker), the scheduler registers again and the new broker's
 * listing replaces its device set. Stopping fails the steps in flight
 * (UNAVAILABLE), answers them, ends the jobs not yet started without
 * running them (their waiters get UNAVAILABLE "the scheduler is
 * stopping"), and returns.
 *
 * Limits. A client connected to the client ROUTER (one routing id) may have
 * at most max_client_requests requests accepted and not yet answered, as
 * the broker allows through itself; one more is answered at once with
 * RESOURCE_EXHAUSTED naming the limit and its flag, so that no client can
 * queue unbounded work on the workers or the loop thread.
 *
 * Scheduler ids. The id is 8 random hex digits. Until its first
 * registration succeeds, when the broker refuses the id because another
 * live scheduler has it (ALREADY_EXISTS), the scheduler draws another,
 * gives its master the new prefix and registers again, up to
 * ZF_SCHED_ID_TRIES ids in all, then reports the refusal. Once registered,
 * its sessions and jobs carry the id, so it never changes: registering
 * again (a new broker connection) that is refused with ALREADY_EXISTS, as
 * when the broker has not yet seen the old connection close, is retried
 * with the same id after ZF_SCHED_REREGISTER_MIN_MS, the wait doubling up
 * to ZF_SCHED_REREGISTER_MAX_MS, for as long as the server runs; the first
 * refusal and every ZF_SCHED_REREGISTER_LOG_EVERY-th after it are logged.
 *
 * Thread-safety: one thread runs a server; zf_sched_server_stop() may be
 * called from any thread or a signal handler. */
#ifndef ZF_SCHED_SERVER_H
#define ZF_SCHED_SERVER_H

#include "common/status.h"
#include "scheduler/master/master.h"

typedef struct zf_sched_server zf_sched_server_t;

/* Defaults of workers and job_workers, and the most either may be. */
#define ZF_SCHED_WORKERS     16
#define ZF_SCHED_JOB_WORKERS 4
#define ZF_SCHED_WORKERS_MAX 1024

/* Default of max_queued_jobs. */
#define ZF_SCHED_MAX_QUEUED_JOBS 4096

/* Default of max_client_requests (the broker's default too). */
#define ZF_SCHED_MAX_CLIENT_REQUESTS 4096

/* Scheduler ids tried at most, one after another, when the broker says
 * each is taken. */
#define ZF_SCHED_ID_TRIES 8

/* Registering again with the same id after the broker refused it: the
 * first wait, the most a wait grows to, and how often refusals are logged
 * (see Scheduler ids). */
#define ZF_SCHED_REREGISTER_MIN_MS    200
#define ZF_SCHED_REREGISTER_MAX_MS    2000
#define ZF_SCHED_REREGISTER_LOG_EVERY 10

typedef struct zf_sched_server_config {
    const char *broker; /* the broker's endpoint */
    int workers;        /* concurrent requests other than jobs; 0: ZF_SCHED_WORKERS */
    int job_workers;    /* concurrent jobs (0 to 1024); 0: ZF_SCHED_JOB_WORKERS */
    /* jobs accepted and waiting for a job worker, at most; 0: the default */
    int max_queued_jobs;
    const char *listen; /* the client ROUTER's bind; NULL: "tcp://127.0.0.1:*" */
    /* what clients are told to connect to (e.g. tcp://HOST:PORT behind NAT
     * or a bridge network); NULL: the bound endpoint, a wildcard host read
     * as 127.0.0.1 */
    const char *advertise;
    int job_results;    /* one-shot job results kept uncollected; 0: the master's default */
    int64_t job_ttl_ms; /* how long such a result is kept; 0: the master's default */
    int64_t max_steps;  /* steps one job may ask for; 0: the master's default */
    /* requests one direct client may have in flight; 0: the default */
    int max_client_requests;
    /* The first scheduler id to register with (1 to 11 bytes, no '/');
     * NULL: a random one. Later ids after a refusal are random. Tests use
     * it to make two schedulers collide. */
    const char *id;
    /* The key directory (CURVE, docs/service.md "Security"); NULL: plain. */
    const char *keys;
    /* sessions, graph sizes, the default step timeout (each 0: the
     * master's default; scheduler/master/master.h) */
    zf_master_limits_t limits;
} zf_sched_server_config_t;

/* Connects to the broker (in the background) and starts the executor I/O
 * thread and the worker pools. Caller owns *out. Errors: INVALID_ARGUMENT
 * for a malformed endpoint, a negative max_client_requests or
 * max_queued_jobs, job_workers outside 0..1024 or a malformed id,
 * RESOURCE_EXHAUSTED. */
zf_status_t zf_sched_server_new(const zf_sched_server_config_t *config, zf_sched_server_t **out);

/* Stops what is still running and frees everything. NULL-safe, sets
 * *srv_p to NULL. */
void zf_sched_server_destroy(zf_sched_server_t **srv_p);

/* Registers with the broker, waiting up to timeout_ms (< 0: until
 * registered or stopped) for its reply; an id the broker says is taken is
 * replaced before the first success (see Scheduler ids). Errors:
 * DEADLINE_EXCEEDED when the broker did not answer, CANCELLED when
 * stopped, the broker's refusal prefixed "the broker refused the
 * registration" (ALREADY_EXISTS when ZF_SCHED_ID_TRIES ids were all
 * taken). */
zf_status_t zf_sched_server_register(zf_sched_server_t *srv, int timeout_ms);

/* Serves until zf_sched_server_stop(). Returns OK after a stop, or the
 * error that stopped it (a restarted broker refusing the registration
 * again other than with ALREADY_EXISTS, which is retried, prefixed as
 * zf_sched_server_register() prefixes it). */
zf_status_t zf_sched_server_run(zf_sched_server_t *srv);

/* Asks zf_sched_server_run() (or a waiting register) to return within
 * about 100 ms. Async-signal-safe. */
void zf_sched_server_stop(zf_sched_server_t *srv);

/* The scheduler id it registers with now (tests, logs); valid until the
 * next register call (run never changes it). Not thread-safe with
 * register. */
const char *zf_sched_server_id(const zf_sched_server_t *srv);

#endif
