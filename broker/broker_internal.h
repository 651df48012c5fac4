/* Private to broker/broker*.c: the layout of zf_broker_t and the helpers its
 * files share (broker.c: setup and the loop; broker_send.c: identities and
 * replies; broker_peers.c: schedulers and executors; broker_requests.c:
 * client requests in flight). Nothing else includes this header but the
 * fuzz target of its peek (tests/fuzz/fuzz_broker_peek.c). */
#ifndef ZF_BROKER_INTERNAL_H
#define ZF_BROKER_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/broker.h"
#include "broker/pending.h"
#include "broker/registry.h"
#include "common/strmap.h"
#include "common/transport.h"

#define ZF__BROKER_LOG "broker"

/* A peer's routing identity as the ROUTER prepends it. */
typedef struct zf__broker_ident {
    size_t len;
    uint8_t id[ZF_ROUTE_MAX_FRAME_BYTES];
} zf__broker_ident_t;

typedef struct zf__broker_sched {
    zf__broker_ident_t id;
    int outstanding;
    int fd;          /* its connection, to match disconnect events */
    char sid[24];    /* its own id, the prefix of its session and job ids */
    uint64_t serial; /* names it in the pending table; never reused */
    int jobs;        /* jobs the broker handed it (broker_jobs.c) */
} zf__broker_sched_t;

typedef struct zf__broker_jobs zf__broker_jobs_t;

/* A client with requests in flight; the clients map's key points into id,
 * and the pending table names it by this record's address. */
typedef struct zf__broker_client {
    zf__broker_ident_t id;
    int in_flight;
    int fd;                         /* its connection, to forget it when that closes */
    struct zf__broker_client *next; /* in the spare records */
} zf__broker_client_t;

struct zf_broker {
    zf_zctx_t *ctx;
    zf_socket_t *sock;
    zf_socket_t *monitor; /* PAIR receiving the ROUTER's disconnect events */
    int msg_fd;           /* connection of the message being handled */
    zf_registry_t *reg;
    int heartbeat_ms;
    int heartbeat_misses;
    char endpoint[256];
    zf__broker_sched_t *scheds;
    int n_scheds, cap_scheds;
    int last_pick;         /* the scheduler picked last, where the round robin goes on */
    uint64_t sched_serial; /* the last serial given to a scheduler */
    zf_pending_t *pending; /* client requests passed to a scheduler, not answered yet */
    zf_strmap_t *clients; /* routing id -> zf__broker_client_t *, while it has requests in flight */
    zf__broker_client_t *spare_clients; /* records kept for reuse, n_spare_clients of them */
    int n_spare_clients;
    int max_client_requests;
    int max_requests;        /* across all clients */
    zf__broker_jobs_t *jobs; /* accepted jobs and their store (broker_jobs.c) */
    volatile sig_atomic_t stop;
};

/* ---- messages passed on undecoded (broker_peek.c) -------------------------------- */

/* An envelope frame at least this large that the broker only passes on (a
 * client request for a scheduler, a scheduler's reply for a client) is
 * not decoded: its header is read from the wire bytes and the frame goes
 * on as it came, so that no large message holds up the loop thread. Nor
 * is a SubmitJob this large, whose bytes the job store keeps as they came
 * (broker_jobs.c). */
#define ZF__BROKER_PASS_RAW_BYTES (1 << 20)

/* A message the broker passes on: decoded (env), or the packed frame
 * (raw) of which only the header was read. */
typedef struct zf__broker_msg {
    const Zflow__Envelope *env; /* NULL for a raw one */
    struct zmq_msg_t *raw;      /* the envelope frame, for a raw one */
    uint64_t request_id;
    Zflow__Envelope__BodyCase body;
    /* the session or job id a RunStep, CloseSession, WaitJob or PollJob
     * names (NULL: none; then any scheduler may take it) */
    const char *owned;
    char owned_buf[ZF_ROUTE_MAX_FRAME_BYTES]; /* a raw one's, NUL-terminated */
    /* a raw SubmitJob's: what the broker checks of it, and where its
     * SubmitJob bytes lie in the frame (broker_jobs.c keeps them as they are) */
    struct {
        bool graph, step; /* session.graph and step are present */
        int64_t steps;
        size_t off, len;
    } submit;
} zf__broker_msg_t;

/* Reads an envelope's version, request id, body case, (for the requests
 * that name one) owned id and (for a SubmitJob) m->submit from its wire
 * bytes into m without decoding the body (m->env NULL, m->raw untouched);
 * *version receives the version. Every field is found by its key and
 * skipped by its length, nothing is copied but the owned id, and no read
 * goes past data + len. False when the top level, or the body's own
 * fields that are read, are malformed (a SubmitJob's session, step and
 * steps of another wire type than theirs among them). */
bool zf__broker_peek(const uint8_t *data, size_t len, zf__broker_msg_t *m, uint64_t *version);

/* m for a decoded envelope (borrowed by m). */
void zf__broker_msg_of(const Zflow__Envelope *env, zf__broker_msg_t *m);

/* The name of a body case, for logs and messages. */
const char *zf__broker_case_name(Zflow__Envelope__BodyCase body);

/* ---- identities and replies (broker_send.c) ----------------------------------- */

zf__broker_ident_t zf__broker_ident_at(const zf_route_t *route, int i);
bool zf__broker_ident_equal(const zf__broker_ident_t *a, const zf__broker_ident_t *b);
/* A route of the one frame id. */
zf_route_t zf__broker_route_to(const zf__broker_ident_t *id);
/* Hex of the first bytes of an identity, for logs; returns buf. */
const char *zf__broker_ident_str(const zf__broker_ident_t *id, char *buf, size_t size);
/* The name of env's body, for logs and messages. */
const char *zf__broker_body_name(const Zflow__Envelope *env);
/* Sends m (its envelope, or its frame as it came) to route. */
zf_status_t zf__broker_send_msg(zf_broker_t *b, const zf_route_t *route, const zf__broker_msg_t *m);

/* Sends env to id; a failure is logged and returned. */
zf_status_t zf__broker_send(zf_broker_t *b, const zf__broker_ident_t *id,
                            const Zflow__Envelope *env);
/* Answers id with a StatusReply carrying st; st is cleared. */
void zf__broker_send_status(zf_broker_t *b, const zf__broker_ident_t *id, uint64_t request_id,
                            zf_status_t *st);
/* A version-1 envelope with request_id and no body. */
Zflow__Envelope zf__broker_envelope(uint64_t request_id);
/* Makes room in *arr (of *cap elements of elem bytes) for element n. */
zf_status_t zf__broker_grow(void **arr, int *cap, int n, size_t elem);

/* ---- schedulers and executors (broker_peers.c) ------------------------------- */

/* The registered scheduler with routing id `id`, or -1. */
int zf__broker_sched_find(const zf_broker_t *b, const zf__broker_ident_t *id);
/* The registered scheduler whose own id is sid, or -1. */
int zf__broker_sched_find_sid(const zf_broker_t *b, const char *sid);
/* Drops scheduler i; each request it held is answered UNAVAILABLE. */
void zf__broker_sched_drop(zf_broker_t *b, int i, const char *why);
/* The scheduler with the fewest outstanding requests, or -1. */
int zf__broker_sched_pick(zf_broker_t *b);
/* Tells the schedulers that an executor joined or died (the registry's listener). */
void zf__broker_on_registry_event(void *arg, zf_registry_event_t event,
                                  const Zflow__ExecutorInfo *info, const char *reason);
void zf__broker_on_register_executor(zf_broker_t *b, const zf__broker_ident_t *from,
                                     const Zflow__Envelope *req);
void zf__broker_on_deregister_executor(zf_broker_t *b, const zf__broker_ident_t *from,
                                       const Zflow__Envelope *req);
void zf__broker_on_heartbeat(zf_broker_t *b, const zf__broker_ident_t *from,
                             const Zflow__Envelope *req);
void zf__broker_on_register_scheduler(zf_broker_t *b, const zf__broker_ident_t *from,
                                      const Zflow__Envelope *req);
/* Replies to a RegisterScheduler or a ListExecutors with the live executors;
 * redacted: names, types, loads and heartbeats only (no incarnations, host
 * ids or endpoints), as a secure broker answers clients. */
void zf__broker_send_listing(zf_broker_t *b, const zf__broker_ident_t *from, uint64_t request_id,
                             bool for_scheduler, bool redacted);

/* ---- client requests (broker_requests.c) ------------------------------------- */

/* Makes the client table and the pending table; RESOURCE_EXHAUSTED. */
zf_status_t zf__broker_requests_init(zf_broker_t *b);
/* Frees them and the client records; safe after a failed init. */
void zf__broker_requests_free(zf_broker_t *b);
/* True for the requests the broker passes to a scheduler. */
bool zf__broker_is_client_request(Zflow__Envelope__BodyCase body);
/* Hands m from client to a scheduler, or answers the client at once. */
void zf__broker_forward_request(zf_broker_t *b, const zf__broker_ident_t *client,
                                const zf__broker_msg_t *m);
/* [scheduler][client][envelope]: a reply for a client. */
void zf__broker_on_scheduler_reply(zf_broker_t *b, const zf_route_t *route,
                                   const zf__broker_msg_t *m);
/* One request of client c answered (or failed); the last one forgets c,
 * whose record may then be reused. */
void zf__broker_client_done(zf_broker_t *b, zf__broker_client_t *c);
/* Forgets the clients whose connection fd closed. */
void zf__broker_clients_disconnected(zf_broker_t *b, int fd);

/* ---- durable jobs (broker_jobs.c) --------------------------------------------- */

/* Opens the job store in config->state (NULL: in memory only) and takes up
 * the jobs it holds. Errors as zf_job_store_open. */
zf_status_t zf__broker_jobs_open(zf_broker_t *b, const zf_broker_config_t *config);
/* Frees the jobs and closes the store; safe after a failed open. */
void zf__broker_jobs_close(zf_broker_t *b);
/* The store's database path, for logs. */
const char *zf__broker_jobs_store_path(const zf_broker_t *b);
/* True for SubmitJob, WaitJob and PollJob, which the broker serves itself
 * (and so decodes, whatever their size, but a large SubmitJob). */
bool zf__broker_jobs_serves(Zflow__Envelope__BodyCase body);
void zf__broker_jobs_on_request(zf_broker_t *b, const zf__broker_ident_t *client,
                                const Zflow__Envelope *env);
/* A large SubmitJob, m->raw as it came and m->submit peeked: checked as a
 * decoded one is, its SubmitJob bytes kept apart as they are (job_blobs.h);
 * the client hears its id once they and its record are durable. */
void zf__broker_jobs_on_large_submit(zf_broker_t *b, const zf__broker_ident_t *client,
                                     const zf__broker_msg_t *m);
/* The socket the loop polls for the job store's thread (NULL when none). */
void *zf__broker_jobs_socket(const zf_broker_t *b);
/* True for the client frame of the broker's own requests to schedulers. */
bool zf__broker_jobs_is_self(const zf__broker_ident_t *id);
/* A reply of scheduler i to one of them; env is the caller's, but a
 * result may be taken out of it. */
void zf__broker_jobs_on_reply(zf_broker_t *b, int i, Zflow__Envelope *env);
/* The scheduler of this serial and id is gone: its jobs are handed on. */
void zf__broker_jobs_sched_gone(zf_broker_t *b, uint64_t serial, const char *sid, const char *why);
/* At the end of each round: commits its writes, answers the SubmitJobs
 * they hold, hands queued jobs to schedulers, expires waits and results. */
void zf__broker_jobs_round(zf_broker_t *b);

/* ---- the loop (broker.c) ------------------------------------------------------ */

/* Drops the schedulers and forgets the clients whose connections closed. */
void zf__broker_serve_monitor(zf_broker_t *b);

#endif
