/* The broker: one ROUTER socket that keeps the executor registry, tells
 * schedulers about joins and deaths, and passes client requests to a
 * scheduler and the replies back (docs/service.md).
 *
 * Design notes
 * - Peers talk to the broker with DEALER sockets. A message from a peer is
 *   [peer][envelope] as the ROUTER sees it. Executors send
 *   RegisterExecutor and Heartbeat; schedulers RegisterScheduler; anyone
 *   ListExecutors.
 * - Session requests (CreateSession, RunStep, CloseSession) go to the
 *   scheduler that holds the session, or for a new one the registered
 *   scheduler with the fewest outstanding requests, as [client][envelope]
 *   on its DEALER; the scheduler answers with [client][envelope], which the
 *   broker passes back to the client unchanged. Request ids are the
 *   client's own, so a scheduler tells requests apart by (client, request
 *   id).
 * - Jobs (SubmitJob, WaitJob, PollJob) are the broker's own
 *   (broker_jobs.c): recorded in a job store (broker/job_store.h) before
 *   SubmitJob is answered, handed to schedulers as the broker's own
 *   requests, handed on when their scheduler goes, and kept, with their
 *   results, across a restart on the same state directory.
 * - A scheduler is dropped when its connection closes (the broker watches
 *   its socket's disconnect events and knows each scheduler's connection),
 *   when ZeroMQ's connection heartbeat (the executor heartbeat period and
 *   miss count) finds it unresponsive and closes it, or when a send to it
 *   fails (the ROUTER is in mandatory mode). Each of its outstanding client
 *   requests is then answered UNAVAILABLE; a late reply for a request
 *   already answered is dropped.
 * - One client may have at most max_client_requests requests in flight
 *   (passed to a scheduler and not answered yet); one past that is answered
 *   RESOURCE_EXHAUSTED at once and goes nowhere, so a client cannot grow
 *   the broker's table without bound. The count is kept per client routing
 *   id. A client whose connection closes has its requests forgotten (a
 *   late reply to them is dropped), as have the clients of a scheduler that
 *   is dropped (they are answered UNAVAILABLE).
 * - Since many connections could together still queue unbounded work, all
 *   clients together may have at most max_requests in flight; a request
 *   past that broker-wide limit is answered RESOURCE_EXHAUSTED the same way.
 *   A reply finds its request by a hash lookup (broker/pending.h), so a
 *   full table costs no more per reply than an empty one.
 * - Every message is checked by the envelope codec and then by field; a
 *   bad one is answered with INVALID_ARGUMENT (or FAILED_PRECONDITION for
 *   another protocol version) when its sender is known, logged, and
 *   dropped. The loop never stops on a peer's input.
 *
 * Thread-safety: one thread runs a broker; zf_broker_stop() alone may be
 * called from any thread or a signal handler. */
#ifndef ZF_BROKER_BROKER_H
#define ZF_BROKER_BROKER_H

#include <stdint.h>

#include "common/status.h"

typedef struct zf_broker zf_broker_t;

typedef struct zf_broker_config {
    const char *listen;      /* e.g. "tcp://127.0.0.1:5555"; port 0 or a star picks one */
    int heartbeat_ms;        /* executor heartbeat period, > 0 */
    int heartbeat_misses;    /* dead after this many missed heartbeats, > 0 */
    int max_client_requests; /* a client's requests in flight at most; 0: the default */
    int max_requests;        /* all clients' requests in flight at most; 0: the default */
    const char *keys;        /* key directory (CURVE, docs/service.md "Security"); NULL: plain */
    const char *state; /* directory of the job store (jobs.db); NULL or ":memory:": not durable */
    int max_attempts;  /* times a job is handed to a scheduler at most; 0: the default */
    int job_results;   /* uncollected job results kept at most; 0: the default */
    int job_ttl_ms;    /* ... each for at most this long after its job ended; 0: the default */
    int64_t max_job_steps; /* steps a job may ask for at most; 0: the default */
} zf_broker_config_t;

/* Times a job whose scheduler is lost is handed to a scheduler by default. */
#define ZF_BROKER_MAX_ATTEMPTS 3
/* Uncollected job results kept by default, and for how long. */
#define ZF_BROKER_JOB_RESULTS 1024
#define ZF_BROKER_JOB_TTL_MS  600000
/* Steps one job may ask for by default (as a scheduler runs by default). */
#define ZF_BROKER_JOB_STEPS_MAX 1000000

/* Requests one client may have in flight through the broker by default. */
#define ZF_BROKER_MAX_CLIENT_REQUESTS 4096
/* Requests all clients together may have in flight by default. */
#define ZF_BROKER_MAX_REQUESTS 65536

/* A broker bound at config->listen. Caller owns *out.
 * Errors: INVALID_ARGUMENT for a bad endpoint or settings (a negative
 * max_client_requests or max_requests among them), UNAVAILABLE
 * when the address cannot be bound, RESOURCE_EXHAUSTED; FAILED_PRECONDITION
 * or DATA_LOSS naming the file for a job store that cannot be opened
 * (broker/job_store.h). */
zf_status_t zf_broker_new(const zf_broker_config_t *config, zf_broker_t **out);

/* Closes the socket and frees everything; NULL-safe; sets *b_p to NULL.
 * Outstanding client requests are not answered. */
void zf_broker_destroy(zf_broker_t **b_p);

/* An endpoint peers can connect to: the bound one, with 127.0.0.1 for a
 * wildcard address ("tcp://127.0.0.1:40123"). Borrowed. */
const char *zf_broker_endpoint(const zf_broker_t *b);

/* Serves one round: waits up to timeout_ms (< 0: until the next expiry)
 * for messages, handles every message that is ready, and expires silent
 * executors. Errors only for the broker's own failures (CANCELLED when the
 * context terminates); a peer's bad input is answered and logged. */
zf_status_t zf_broker_poll(zf_broker_t *b, int timeout_ms);

/* Serves until zf_broker_stop(). Returns OK after a stop, or the error
 * that stopped it. */
zf_status_t zf_broker_run(zf_broker_t *b);

/* Asks zf_broker_run to return within about 100 ms. Async-signal-safe. */
void zf_broker_stop(zf_broker_t *b);

/* Counts, for tests and logs. */
int zf_broker_num_schedulers(const zf_broker_t *b);
int zf_broker_num_outstanding(const zf_broker_t *b);
/* Clients with at least one request in flight. */
int zf_broker_num_clients(const zf_broker_t *b);

#endif
