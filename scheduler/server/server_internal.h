/* Private to scheduler/server/server*.c: the layout of zf_sched_server_t and the
 * helpers its files share (server.c: setup, the loop and dispatch;
 * server_replies.c: the reply queue and direct clients' requests in flight;
 * server_register.c: the scheduler id and registration with the broker;
 * server_requests.c: client requests on the worker pools, and jobs).
 * Nothing else includes this header. */
#ifndef ZF_SCHED_SERVER_INTERNAL_H
#define ZF_SCHED_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

#include "common/strmap.h"
#include "common/transport.h"
#include "common/thread_pool.h"
#include "scheduler/master/master.h"
#include "scheduler/server/rpc.h"
#include "scheduler/server/server.h"

#define ZF__SCHED_SRV_LOG     "scheduler"
#define ZF__SCHED_SRV_ID_SIZE 12 /* a scheduler id and its NUL */
/* own sockets and pipe, the rpc's pipe and executors */
#define ZF__SCHED_SRV_MAX_ITEMS (4 + 1 + ZF_SCHED_RPC_MAX_PEERS)

/* A reply waiting for the broker socket's thread. */
typedef struct zf__sched_srv_reply {
    bool direct; /* to a client's direct request: leaves by the client ROUTER */
    zf_route_t route;
    Zflow__Envelope *env; /* NULL: none could be made (a direct request still ends) */
    struct zf__sched_srv_reply *next;
} zf__sched_srv_reply_t;

/* A job made and answered, on its way to a job worker. */
typedef struct zf__sched_srv_job zf__sched_srv_job_t;

struct zf_sched_server {
    char *broker_endpoint;
    zf_zctx_t *ctx;
    zf_socket_t *broker;
    zf_socket_t *monitor;                 /* PAIR receiving the broker socket's connect events */
    zf_socket_t *clients;                 /* ROUTER for clients' direct requests */
    char *client_endpoint;                /* where clients reach it, advertised */
    char sched_id[ZF__SCHED_SRV_ID_SIZE]; /* prefixes its session and job ids */
    int id_tries;                         /* ids tried in the current registration */
    int connects;                         /* connections made to the broker so far */
    uint64_t register_id;                 /* the last RegisterScheduler's request id */
    /* once registered, a refused id is registered again later: when (a
     * monotonic ms; 0: not due), the wait after the next refusal (0: the
     * shortest), and the refusals since the last success */
    int64_t reregister_at_ms;
    int reregister_wait_ms;
    int refusals;
    zf_sched_rpc_t *rpc;
    zf_master_t *master;
    zf_thread_pool_t *pool;     /* sessions' requests */
    zf_thread_pool_t *job_pool; /* jobs' runs, so that no request waits behind a job */
    int job_workers;
    atomic_int jobs_queued; /* made and not started: at most max_queued_jobs */
    int max_queued_jobs;
    /* jobs the job pool could not take yet (out of memory), oldest first;
     * handed over again each round; loop thread only */
    zf__sched_srv_job_t *jobs_head, *jobs_tail;
    int wake[2];
    atomic_bool stop;      /* also read by job workers: a queued job that sees it never runs */
    atomic_int jobs_unrun; /* queued jobs the stop ended before they started */
    /* set as the master goes away: the waiters it fires then are for jobs
     * that never ran, and are told the scheduler is stopping */
    atomic_bool jobs_stopped;
    bool registered;
    zf_status_t register_status; /* the broker's refusal */
    pthread_mutex_t mu;          /* guards the reply queue */
    zf__sched_srv_reply_t *head, *tail;
    int64_t step_wake_ms; /* when the master's steps need a look next; -1: on replies */
    /* direct clients' routing ids -> requests accepted and not answered
     * (only clients with some); loop thread only */
    zf_strmap_t *in_flight;
    int max_client_requests;
    zmq_pollitem_t items[ZF__SCHED_SRV_MAX_ITEMS];
};

/* ---- replies and direct clients' requests (server_replies.c) ----------------------- */

/* Queues r (taken over) for the loop thread and wakes it. Any thread. */
void zf__sched_srv_queue(zf_sched_server_t *srv, zf__sched_srv_reply_t *r);

/* Queues env (taken over) for the client at route, through the broker or,
 * when direct, through the client ROUTER. Any thread. */
void zf__sched_srv_queue_reply(zf_sched_server_t *srv, bool direct, const zf_route_t *route,
                               Zflow__Envelope *env);

/* Sends the queued replies. Loop thread. */
void zf__sched_srv_flush_replies(zf_sched_server_t *srv);

/* Frees the replies still queued (the sockets are closed). */
void zf__sched_srv_drop_replies(zf_sched_server_t *srv);

/* Counts one more request (env) in flight for the direct client at route,
 * or refuses it with RESOURCE_EXHAUSTED when the client is at its limit, or
 * with PERMISSION_DENIED when a secure peer that is not a client sent it.
 * Loop thread. */
zf_status_t zf__sched_srv_client_add(zf_sched_server_t *srv, const zf_route_t *route,
                                     const Zflow__Envelope *env);

/* One of the direct client's requests at route has been answered (or could
 * not be); a client with none left is forgotten. Loop thread. */
void zf__sched_srv_client_done(zf_sched_server_t *srv, const zf_route_t *route);

/* Answers request_id at route on sock with a StatusReply of st (cleared);
 * a send failure is logged. Loop thread. */
void zf__sched_srv_answer_on(zf_socket_t *sock, const zf_route_t *route, uint64_t request_id,
                             zf_status_t st);

/* ---- the scheduler id and registration (server_register.c) ------------------------- */

/* Draws a random scheduler id other than the current one and gives the
 * master (once there is one) its prefix. */
void zf__sched_srv_pick_id(zf_sched_server_t *srv);

/* Sends RegisterScheduler with the current id and client endpoint. */
zf_status_t zf__sched_srv_send_register(zf_sched_server_t *srv);

/* The broker's RegisterSchedulerReply (r borrowed). */
void zf__sched_srv_on_register_reply(zf_sched_server_t *srv,
                                     const Zflow__RegisterSchedulerReply *r);

/* The broker refused the registration with st (taken over). */
void zf__sched_srv_on_register_refused(zf_sched_server_t *srv, zf_status_t st);

/* Handles the broker socket's connect events waiting on the monitor. */
void zf__sched_srv_serve_monitor(zf_sched_server_t *srv);

/* Registers again once the wait after a refusal of the registered id is
 * over. Loop thread, each round. */
void zf__sched_srv_register_tick(zf_sched_server_t *srv);

/* ---- requests on the worker pools, and jobs (server_requests.c) --------------------- */

/* Serves a CreateSession, RunStep or CloseSession (*env_p, taken over
 * unless it is still there on return, when it has been answered) from the
 * client at route: on a worker, or a RunStep with a cached plan on this
 * thread. A direct request has been counted (zf__sched_srv_client_add);
 * each way it ends uncounts it. Loop thread. */
void zf__sched_srv_submit(zf_sched_server_t *srv, bool direct, const zf_route_t *route,
                          Zflow__Envelope **env_p);

/* SubmitJob (*env_p, taken over when the job was made): answered at once
 * with the job id, or refused (a full queue, a malformed job); the job
 * then runs on the job pool. Loop thread. */
void zf__sched_srv_submit_job(zf_sched_server_t *srv, const zf_route_t *route,
                              Zflow__Envelope **env_p);

/* Hands the job pool the jobs it could not take before. Loop thread. */
void zf__sched_srv_start_jobs(zf_sched_server_t *srv);

/* Frees the jobs never handed to the job pool (they stay queued in the
 * master, which is going away: their waiters hear that the scheduler is
 * stopping). */
void zf__sched_srv_drop_jobs(zf_sched_server_t *srv);

/* WaitJob: answered when the job ends, without a worker. Loop thread. */
void zf__sched_srv_wait_job(zf_sched_server_t *srv, const zf_route_t *route,
                            const Zflow__Envelope *req);

/* PollJob: answered at once. Loop thread. */
void zf__sched_srv_poll_job(zf_sched_server_t *srv, const zf_route_t *route,
                            const Zflow__Envelope *req);

#endif
