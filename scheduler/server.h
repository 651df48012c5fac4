/* The scheduler service: the master (scheduler/master.h) behind a DEALER
 * connected to the broker and a ROUTER for clients' direct requests, with
 * its executor connections (scheduler/rpc.h).
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
 * CloseSession go to a pool of worker threads (a RunStep blocks its worker
 * until the step ends), whose replies come back through a queue and a pipe
 * and leave by the socket the request came in on, as [client][envelope]
 * with the request id preserved. A CreateSessionReply names the client
 * endpoint. SubmitJob is answered
 * with a job id at once and then run by its worker; WaitJob is answered
 * when its job ends, without holding a worker. Other requests are answered
 * UNIMPLEMENTED; malformed ones INVALID_ARGUMENT. When the broker socket
 * connects again (a restarted broker), the scheduler registers again and
 * the new broker's listing replaces its device set. Stopping
 * fails the steps in flight (UNAVAILABLE), answers them, and returns.
 *
 * Thread-safety: one thread runs a server; zf_sched_server_stop() may be
 * called from any thread or a signal handler. */
#ifndef ZF_SCHED_SERVER_H
#define ZF_SCHED_SERVER_H

#include "common/status.h"

typedef struct zf_sched_server zf_sched_server_t;

typedef struct zf_sched_server_config {
    const char *broker; /* the broker's endpoint */
    int workers;        /* concurrent requests; 0: 16 */
    const char *listen; /* the client ROUTER's bind; NULL: "tcp://127.0.0.1:*" */
    /* what clients are told to connect to (e.g. tcp://HOST:PORT behind NAT
     * or a bridge network); NULL: the bound endpoint, a wildcard host read
     * as 127.0.0.1 */
    const char *advertise;
    int job_results;    /* one-shot job results kept uncollected; 0: the master's default */
    int64_t job_ttl_ms; /* how long such a result is kept; 0: the master's default */
    int64_t max_steps;  /* steps one job may ask for; 0: the master's default */
} zf_sched_server_config_t;

/* Connects to the broker (in the background) and starts the executor I/O
 * thread. Caller owns *out. Errors: INVALID_ARGUMENT for a malformed
 * endpoint, RESOURCE_EXHAUSTED. */
zf_status_t zf_sched_server_new(const zf_sched_server_config_t *config, zf_sched_server_t **out);

/* Stops what is still running and frees everything. NULL-safe, sets
 * *srv_p to NULL. */
void zf_sched_server_destroy(zf_sched_server_t **srv_p);

/* Registers with the broker, waiting up to timeout_ms (< 0: until
 * registered or stopped) for its reply. Errors: DEADLINE_EXCEEDED when the
 * broker did not answer, CANCELLED when stopped, the broker's refusal. */
zf_status_t zf_sched_server_register(zf_sched_server_t *srv, int timeout_ms);

/* Serves until zf_sched_server_stop(). Returns OK after a stop, or the
 * error that stopped it. */
zf_status_t zf_sched_server_run(zf_sched_server_t *srv);

/* Asks zf_sched_server_run() (or a waiting register) to return within
 * about 100 ms. Async-signal-safe. */
void zf_sched_server_stop(zf_sched_server_t *srv);

/* Devices the master knows now (tests, logs). */
int zf_sched_server_num_devices(zf_sched_server_t *srv);

#endif
