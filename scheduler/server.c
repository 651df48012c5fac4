/* The scheduler service loop: the broker socket, the worker pool that runs
 * client requests on the master, and the reply queue (scheduler/server.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "common/log.h"
#include "common/strmap.h"
#include "common/transport.h"
#include "executor/device.h"
#include "executor/thread_pool.h"
#include "scheduler/master.h"
#include "scheduler/rpc.h"
#include "scheduler/server.h"

#define S_LOG       "scheduler"
#define S_POLL_MS   100
#define S_LISTEN    "tcp://127.0.0.1:*" /* the client ROUTER's default */
#define S_ID_SIZE   12                  /* a scheduler id and its NUL */
/* own sockets and pipe, the rpc's pipe and executors */
#define S_MAX_ITEMS (4 + 1 + ZF_SCHED_RPC_MAX_PEERS)

/* A reply waiting for the broker socket's thread. */
typedef struct s_reply {
    bool direct; /* to a client's direct request: leaves by the client ROUTER */
    zf_route_t route;
    Zflow__Envelope *env; /* NULL: none could be made (a direct request still ends) */
    struct s_reply *next;
} s_reply_t;

struct zf_sched_server {
    char *broker_endpoint;
    zf_zctx_t *ctx;
    zf_socket_t *broker;
    zf_socket_t *monitor;     /* PAIR receiving the broker socket's connect events */
    zf_socket_t *clients;     /* ROUTER for clients' direct requests */
    char *client_endpoint;    /* where clients reach it, advertised */
    char sched_id[S_ID_SIZE]; /* prefixes its session and job ids */
    int id_tries;             /* ids tried in the current registration */
    int connects;             /* connections made to the broker so far */
    uint64_t register_id;     /* the last RegisterScheduler's request id */
    zf_sched_rpc_t *rpc;
    zf_master_t *master;
    zf_thread_pool_t *pool;
    int wake[2];
    atomic_bool stop;
    bool registered;
    zf_status_t register_status; /* the broker's refusal */
    pthread_mutex_t mu;          /* guards the reply queue */
    s_reply_t *head, *tail;
    int64_t step_wake_ms; /* when the master's steps need a look next; -1: on replies */
    /* direct clients' routing ids -> requests accepted and not answered
     * (only clients with some); loop thread only */
    zf_strmap_t *in_flight;
    int max_client_requests;
    zmq_pollitem_t items[S_MAX_ITEMS];
};

/* A client request on its way to a worker. */
typedef struct {
    zf_sched_server_t *srv;
    bool direct;
    zf_route_t route;
    Zflow__Envelope *env;
    uint64_t request_id; /* for a step run without a worker */
    s_reply_t *slot;     /* a direct request's reply, made before it was accepted */
} s_job_t;

static void s_on_executor_reply(void *arg, Zflow__Envelope **reply)
{
    zf_sched_server_t *srv = arg;
    zf_master_deliver(srv->master, reply);
}

/* ---- replies ----------------------------------------------------------------- */

/* Queues r (taken over) for the loop thread. */
static void s_queue(zf_sched_server_t *srv, s_reply_t *r)
{
    pthread_mutex_lock(&srv->mu);
    if (srv->tail)
        srv->tail->next = r;
    else
        srv->head = r;
    srv->tail = r;
    pthread_mutex_unlock(&srv->mu);
    if (write(srv->wake[1], "", 1) < 0 && errno != EAGAIN)
        zf_log_warn(S_LOG, "cannot wake the broker thread: %s", strerror(errno));
}

/* Queues env (taken over) for the client at route, through the broker or,
 * when direct, through the client ROUTER. */
static void s_queue_reply_to(zf_sched_server_t *srv, bool direct, const zf_route_t *route,
                             Zflow__Envelope *env)
{
    s_reply_t *r = calloc(1, sizeof *r);
    if (!r) {
        zf_log_error(S_LOG, "out of memory: dropped the reply to request %llu",
                     (unsigned long long)env->request_id);
        zflow__envelope__free_unpacked(env, NULL);
        return;
    }
    r->direct = direct;
    r->route = *route;
    r->env = env;
    s_queue(srv, r);
}

static void s_queue_reply(zf_sched_server_t *srv, const zf_route_t *route, Zflow__Envelope *env)
{
    s_queue_reply_to(srv, false, route, env);
}

/* ---- direct clients' requests in flight ------------------------------------------ */

static const char *s_body_name(const Zflow__Envelope *env)
{
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_CREATE_SESSION: return "CreateSession";
    case ZFLOW__ENVELOPE__BODY_RUN_STEP: return "RunStep";
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION: return "CloseSession";
    default: return "a request";
    }
}

/* Counts one more request (env) in flight for the direct client at route,
 * or refuses it with RESOURCE_EXHAUSTED when the client is at its limit. */
static zf_status_t s_client_add(zf_sched_server_t *srv, const zf_route_t *route,
                                const Zflow__Envelope *env)
{
    const char *id = (const char *)route->frame[0];
    uintptr_t n = 0;
    zf_strmap_get_n(srv->in_flight, id, route->len[0], &n);
    if (n >= (uintptr_t)srv->max_client_requests)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "%s refused: this client already has %d requests in flight at the "
                             "scheduler's client endpoint, the most one client may have "
                             "(zflow-scheduler --max-client-requests %d); send more once replies "
                             "come back",
                             s_body_name(env), (int)n, srv->max_client_requests);
    if (zf_strmap_put_n(srv->in_flight, id, route->len[0], n + 1) != 0)
        return zf_out_of_memory("scheduler: a client's requests in flight");
    return ZF_STATUS_OK;
}

/* One of the direct client's requests at route has been answered (or could
 * not be); a client with none left is forgotten. */
static void s_client_done(zf_sched_server_t *srv, const zf_route_t *route)
{
    const char *id = (const char *)route->frame[0];
    uintptr_t n = 0;
    if (!zf_strmap_get_n(srv->in_flight, id, route->len[0], &n)) return;
    if (n > 1)
        zf_strmap_put_n(srv->in_flight, id, route->len[0], n - 1); /* a replace: no allocation */
    else
        zf_strmap_remove_n(srv->in_flight, id, route->len[0], NULL);
}

/* Sends the queued replies to the broker. */
static void s_flush_replies(zf_sched_server_t *srv)
{
    char drain[64];
    while (read(srv->wake[0], drain, sizeof drain) > 0) {
    }
    pthread_mutex_lock(&srv->mu);
    s_reply_t *r = srv->head;
    srv->head = srv->tail = NULL;
    pthread_mutex_unlock(&srv->mu);
    while (r) {
        s_reply_t *next = r->next;
        zf_socket_t *sock = r->direct ? srv->clients : srv->broker;
        if (r->direct) s_client_done(srv, &r->route);
        zf_status_t st = !r->env ? ZF_STATUS_OK
                         : sock  ? zf_envelope_send(sock, &r->route, r->env)
                                 : zf_internal("the socket is closed");
        if (!zf_ok(st))
            zf_log_warn(S_LOG, "cannot send a reply to %s: %s",
                        r->direct ? "a client" : "the broker", zf_status_msg(&st));
        zf_status_clear(&st);
        if (r->env) zflow__envelope__free_unpacked(r->env, NULL);
        free(r);
        r = next;
    }
}

/* ---- client requests ----------------------------------------------------------- */

static Zflow__Envelope *s_envelope(uint64_t request_id)
{
    Zflow__Envelope *e = malloc(sizeof *e);
    if (!e) return NULL;
    zflow__envelope__init(e);
    e->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    e->request_id = request_id;
    return e;
}

/* SubmitJob: answers with the job id at once, then runs the job here. */
static void s_submit_job(zf_sched_server_t *srv, const zf_route_t *route,
                         const Zflow__Envelope *req)
{
    char *id = NULL;
    zf_status_t st = zf_master_job_new(srv->master, req->submit_job, &id);
    Zflow__Envelope *rep = s_envelope(req->request_id);
    Zflow__SubmitJobReply *r = rep ? malloc(sizeof *r) : NULL;
    if (r) {
        zflow__submit_job_reply__init(r);
        rep->body_case = ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY;
        rep->submit_job_reply = r;
        zf_status_t e = zf_status_to_proto(&st, &r->status);
        zf_status_clear(&e);
        r->job_id = id ? strdup(id) : NULL;
        s_queue_reply(srv, route, rep);
    } else if (rep) {
        zflow__envelope__free_unpacked(rep, NULL);
    }
    if (zf_ok(st)) zf_master_job_run(srv->master, id, req->submit_job);
    zf_status_clear(&st);
    free(id);
}

/* A WaitJob waiting for its job. */
typedef struct {
    zf_sched_server_t *srv;
    zf_route_t route;
    uint64_t request_id;
} s_waiter_t;

static void s_on_job_done(void *arg, Zflow__RunStepReply *reply)
{
    s_waiter_t *w = arg;
    Zflow__Envelope *rep = s_envelope(w->request_id);
    if (rep && reply) {
        rep->body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY;
        rep->run_step_reply = reply;
        s_queue_reply(w->srv, &w->route, rep);
    } else {
        zf_status_t st = zf_out_of_memory("scheduler: job result");
        if (rep) zflow__envelope__free_unpacked(rep, NULL);
        if (reply) zflow__run_step_reply__free_unpacked(reply, NULL);
        rep = NULL;
        zf_status_t e = zf_envelope_status_reply(w->request_id, &st, &rep);
        if (rep) s_queue_reply(w->srv, &w->route, rep);
        zf_status_clear(&e);
        zf_status_clear(&st);
    }
    free(w);
}

/* A new session's reply names this scheduler's client endpoint, so that
 * the client sends the session's steps straight here. */
static void s_advertise(zf_sched_server_t *srv, Zflow__Envelope *rep)
{
    if (rep->body_case != ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY || !srv->client_endpoint)
        return;
    Zflow__CreateSessionReply *r = rep->create_session_reply;
    if (r->scheduler_endpoint && r->scheduler_endpoint != protobuf_c_empty_string)
        free(r->scheduler_endpoint);
    r->scheduler_endpoint = strdup(srv->client_endpoint); /* NULL: the client uses the broker */
}

static void s_work(void *arg)
{
    s_job_t *job = arg;
    if (job->env->body_case == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB) {
        s_submit_job(job->srv, &job->route, job->env);
        zflow__envelope__free_unpacked(job->env, NULL);
        free(job);
        return;
    }
    Zflow__Envelope *rep = NULL;
    zf_status_t st = zf_master_handle(job->srv->master, job->env, &rep);
    if (!zf_ok(st)) {
        zf_status_t e = zf_envelope_status_reply(job->env->request_id, &st, &rep);
        zf_status_clear(&e);
    }
    zf_status_clear(&st);
    if (rep) s_advertise(job->srv, rep);
    if (job->slot) { /* direct: queued even without a reply, so that its count ends */
        job->slot->env = rep;
        s_queue(job->srv, job->slot);
    } else if (rep) {
        s_queue_reply_to(job->srv, job->direct, &job->route, rep);
    }
    zflow__envelope__free_unpacked(job->env, NULL);
    free(job);
}

static void s_answer_on(zf_socket_t *sock, const zf_route_t *route, uint64_t request_id,
                        zf_status_t st)
{
    zf_status_t e = zf_envelope_send_status(sock, route, request_id, &st);
    if (!zf_ok(e)) zf_log_warn(S_LOG, "cannot answer a request: %s", zf_status_msg(&e));
    zf_status_clear(&e);
    zf_status_clear(&st);
}

static void s_answer(zf_sched_server_t *srv, const zf_route_t *route, uint64_t request_id,
                     zf_status_t st)
{
    s_answer_on(srv->broker, route, request_id, st);
}

/* An asynchronous step ended, on this thread, which owns the sockets: its
 * reply leaves at once. */
static void s_on_step_done(void *arg, Zflow__Envelope *reply)
{
    s_job_t *job = arg;
    zf_sched_server_t *srv = job->srv;
    if (!reply) {
        zf_status_t st = zf_out_of_memory("scheduler: step reply");
        zf_status_t e = zf_envelope_status_reply(job->request_id, &st, &reply);
        zf_status_clear(&e);
        zf_status_clear(&st);
    }
    zf_socket_t *sock = job->direct ? srv->clients : srv->broker;
    zf_status_t st = reply ? zf_envelope_send(sock, &job->route, reply) : ZF_STATUS_OK;
    if (!zf_ok(st))
        zf_log_warn(S_LOG, "cannot send a step's reply to %s: %s",
                    job->direct ? "a client" : "the broker", zf_status_msg(&st));
    zf_status_clear(&st);
    if (reply) zflow__envelope__free_unpacked(reply, NULL);
    if (job->direct) s_client_done(srv, &job->route);
    free(job);
}

/* Hands a client request (taken over) to a worker; its reply leaves by the
 * socket it came in on. A RunStep whose plan is cached runs here instead,
 * without a worker: the master sends its RunGraphs at once and its reply
 * leaves when the executors' replies are in (zf_master_poll). A direct
 * request has been counted (s_client_add); each way it ends uncounts it. */
static void s_submit_from(zf_sched_server_t *srv, bool direct, const zf_route_t *route,
                          Zflow__Envelope **env_p)
{
    if ((*env_p)->body_case == ZFLOW__ENVELOPE__BODY_RUN_STEP) {
        s_job_t *step = malloc(sizeof *step);
        bool started = false;
        if (step) {
            *step = (s_job_t){srv, direct, *route, NULL, (*env_p)->request_id, NULL};
            zf_master_start_step(srv->master, env_p, s_on_step_done, step, &started);
        }
        if (started) return;
        free(step);
    }
    s_job_t *job = calloc(1, sizeof *job);
    s_reply_t *slot = direct ? calloc(1, sizeof *slot) : NULL;
    zf_status_t st = job && (slot || !direct) ? ZF_STATUS_OK : zf_out_of_memory("scheduler");
    if (zf_ok(st)) {
        *job = (s_job_t){srv, direct, *route, *env_p, 0, slot};
        if (slot) *slot = (s_reply_t){true, *route, NULL, NULL};
        st = zf_thread_pool_submit(srv->pool, s_work, job);
    }
    if (zf_ok(st)) {
        *env_p = NULL;
        return;
    }
    free(slot);
    free(job);
    if (direct) s_client_done(srv, route);
    s_answer_on(direct ? srv->clients : srv->broker, route, (*env_p)->request_id, st);
}

static void s_submit(zf_sched_server_t *srv, const zf_route_t *route, Zflow__Envelope **env_p)
{
    s_submit_from(srv, false, route, env_p);
}

/* WaitJob: answered from the job's completion, without a worker. */
static void s_wait_job(zf_sched_server_t *srv, const zf_route_t *route, const Zflow__Envelope *req)
{
    s_waiter_t *w = malloc(sizeof *w);
    zf_status_t st = w ? ZF_STATUS_OK : zf_out_of_memory("scheduler");
    if (w) {
        *w = (s_waiter_t){srv, *route, req->request_id};
        st = zf_master_job_wait_for(srv->master, req->wait_job->job_id, req->wait_job->timeout_ms,
                                    s_on_job_done, w);
    }
    if (zf_ok(st)) return;
    free(w);
    s_answer(srv, route, req->request_id, st);
}

/* PollJob: answered at once, from this thread. */
static void s_poll_job(zf_sched_server_t *srv, const zf_route_t *route, const Zflow__Envelope *req)
{
    zf_master_job_progress_t p;
    zf_status_t st = zf_master_job_poll(srv->master, req->poll_job->job_id, &p);
    Zflow__PollJobReply r = ZFLOW__POLL_JOB_REPLY__INIT;
    zf_status_t e = zf_status_to_proto(&st, &r.status);
    r.state = (Zflow__JobState)p.state;
    r.steps_done = p.steps_done;
    r.steps_total = p.steps_total;
    r.partitions_running = p.partitions_running;
    r.partitions_total = p.partitions_total;
    r.elapsed_ms = p.elapsed_ms;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = req->request_id;
    env.body_case = ZFLOW__ENVELOPE__BODY_POLL_JOB_REPLY;
    env.poll_job_reply = &r;
    if (zf_ok(e)) e = zf_envelope_send(srv->broker, route, &env);
    if (!zf_ok(e)) zf_log_warn(S_LOG, "cannot answer a PollJob: %s", zf_status_msg(&e));
    if (r.status) zflow__status__free_unpacked(r.status, NULL);
    zf_status_clear(&e);
    zf_status_clear(&st);
}

/* ---- registration ------------------------------------------------------------------ */

/* Draws a random scheduler id other than the current one and gives the
 * master (once there is one) its prefix. */
static void s_pick_id(zf_sched_server_t *srv)
{
    char id[sizeof srv->sched_id];
    do {
        snprintf(id, sizeof id, "%08" PRIx64, zf_device_new_incarnation() & 0xffffffffu);
    } while (strcmp(id, srv->sched_id) == 0);
    memcpy(srv->sched_id, id, sizeof id);
    if (!srv->master) return;
    char prefix[sizeof id + 1];
    snprintf(prefix, sizeof prefix, "%s/", id);
    zf_master_set_id_prefix(srv->master, prefix);
}

static zf_status_t s_send_register(zf_sched_server_t *srv)
{
    Zflow__RegisterScheduler body = ZFLOW__REGISTER_SCHEDULER__INIT;
    body.client_endpoint = srv->client_endpoint;
    body.scheduler_id = srv->sched_id;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.request_id = ++srv->register_id;
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER;
    env.register_scheduler = &body;
    return zf_envelope_send(srv->broker, NULL, &env);
}

/* The broker refused the registration with st (taken over). An id another
 * live scheduler has is replaced by a fresh one and registered again, up
 * to ZF_SCHED_ID_TRIES ids; any other refusal, or the last, is kept in
 * register_status. */
static void s_on_register_refused(zf_sched_server_t *srv, zf_status_t st)
{
    if (st.code == ZF_ALREADY_EXISTS && srv->id_tries < ZF_SCHED_ID_TRIES) {
        char taken[sizeof srv->sched_id];
        memcpy(taken, srv->sched_id, sizeof taken);
        s_pick_id(srv);
        srv->id_tries++;
        zf_log_warn(S_LOG, "scheduler id '%s' is taken (%s); registering as '%s'", taken,
                    zf_status_msg(&st), srv->sched_id);
        zf_status_clear(&st);
        st = s_send_register(srv);
        if (zf_ok(st)) return;
        st = zf_status_prefix(st, "cannot register again as '%s'", srv->sched_id);
    }
    zf_status_clear(&srv->register_status);
    if (st.code == ZF_ALREADY_EXISTS) {
        srv->register_status = zf_status_new(
            ZF_ALREADY_EXISTS,
            "the broker refused the registration: each of the %d scheduler ids tried was taken "
            "by another scheduler (the last refusal: %s)",
            srv->id_tries, zf_status_msg(&st));
        zf_status_clear(&st);
    } else {
        srv->register_status = zf_status_prefix(st, "the broker refused the registration");
    }
}

/* ---- broker messages -------------------------------------------------------------- */

static void s_on_register_reply(zf_sched_server_t *srv, const Zflow__RegisterSchedulerReply *r)
{
    zf_status_t st = zf_status_from_proto(r->status);
    if (!zf_ok(st)) {
        s_on_register_refused(srv, st);
        return;
    }
    if (srv->registered) { /* a new broker: its listing replaces what we knew */
        zf_master_retain_devices(srv->master, r->executors, r->n_executors,
                                 "the broker no longer lists it");
        zf_log_info(S_LOG, "registered again with the broker at %s (%zu executors)",
                    srv->broker_endpoint, r->n_executors);
    }
    for (size_t i = 0; i < r->n_executors; i++) {
        zf_status_t e = zf_master_device_joined(srv->master, r->executors[i]);
        if (!zf_ok(e)) zf_log_warn(S_LOG, "ignored an executor: %s", zf_status_msg(&e));
        zf_status_clear(&e);
    }
    srv->registered = true;
}

static void s_on_message(zf_sched_server_t *srv, const zf_route_t *route, Zflow__Envelope **env_p)
{
    Zflow__Envelope *env = *env_p;
    zf_status_t st = ZF_STATUS_OK;
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER_REPLY:
        s_on_register_reply(srv, env->register_scheduler_reply);
        break;
    case ZFLOW__ENVELOPE__BODY_DEVICE_EVENT:
        st = zf_master_device_event(srv->master, env->device_event);
        if (!zf_ok(st)) zf_log_warn(S_LOG, "ignored a device event: %s", zf_status_msg(&st));
        zf_status_clear(&st);
        break;
    case ZFLOW__ENVELOPE__BODY_CREATE_SESSION:
    case ZFLOW__ENVELOPE__BODY_RUN_STEP:
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION:
    case ZFLOW__ENVELOPE__BODY_SUBMIT_JOB:
        if (route->n == 1)
            s_submit(srv, route, env_p);
        else
            zf_log_warn(S_LOG, "dropped a client request without a client frame");
        break;
    case ZFLOW__ENVELOPE__BODY_WAIT_JOB:
        if (route->n == 1) s_wait_job(srv, route, env);
        break;
    case ZFLOW__ENVELOPE__BODY_POLL_JOB:
        if (route->n == 1) s_poll_job(srv, route, env);
        break;
    case ZFLOW__ENVELOPE__BODY_STATUS_REPLY: /* the broker refuses a registration this way */
        st = zf_status_from_proto(env->status_reply->status);
        if (!zf_ok(st) && env->request_id == srv->register_id) {
            s_on_register_refused(srv, st);
            break;
        }
        if (!zf_ok(st)) zf_log_warn(S_LOG, "the broker says: %s", zf_status_msg(&st));
        zf_status_clear(&st);
        break;
    default:
        if (route->n == 1)
            s_answer(srv, route, env->request_id,
                     zf_unimplemented("the scheduler does not serve message body %d",
                                      (int)env->body_case));
        break;
    }
}

/* Reads every message waiting on the broker socket. */
static zf_status_t s_read_broker(zf_sched_server_t *srv)
{
    for (;;) {
        zf_route_t route;
        zf_route_clear(&route);
        Zflow__Envelope *env = NULL;
        zf_status_t st = zf_envelope_recv(srv->broker, 0, &route, &env);
        if (st.code == ZF_DEADLINE_EXCEEDED) {
            zf_status_clear(&st);
            return ZF_STATUS_OK;
        }
        if (st.code == ZF_CANCELLED) return st;
        if (!zf_ok(st)) {
            zf_log_warn(S_LOG, "malformed message from the broker: %s", zf_status_msg(&st));
            if (route.n == 1) s_answer(srv, &route, route.request_id, st);
            zf_status_clear(&st);
            continue;
        }
        s_on_message(srv, &route, &env);
        if (env) zflow__envelope__free_unpacked(env, NULL);
    }
}

/* ---- clients' direct requests ------------------------------------------------------ */

/* A request that came straight from a client: the session traffic is served,
 * a Ping is answered at once, anything else belongs to the broker. */
static void s_on_direct(zf_sched_server_t *srv, const zf_route_t *route, Zflow__Envelope **env_p)
{
    Zflow__Envelope *env = *env_p;
    zf_status_t st = ZF_STATUS_OK;
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_CREATE_SESSION:
    case ZFLOW__ENVELOPE__BODY_RUN_STEP:
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION:
        st = s_client_add(srv, route, env);
        if (zf_ok(st))
            s_submit_from(srv, true, route, env_p);
        else
            s_answer_on(srv->clients, route, env->request_id, st);
        break;
    case ZFLOW__ENVELOPE__BODY_PING:
        s_answer_on(srv->clients, route, env->request_id, ZF_STATUS_OK);
        break;
    default:
        s_answer_on(srv->clients, route, env->request_id,
                    zf_unimplemented("the scheduler's client endpoint serves CreateSession, "
                                     "RunStep, CloseSession and Ping; message body %d goes "
                                     "through the broker",
                                     (int)env->body_case));
        break;
    }
}

/* Reads every message waiting on the client ROUTER: [client][envelope]. */
static zf_status_t s_read_clients(zf_sched_server_t *srv)
{
    for (;;) {
        zf_route_t route;
        zf_route_clear(&route);
        Zflow__Envelope *env = NULL;
        zf_status_t st = zf_envelope_recv(srv->clients, 0, &route, &env);
        if (st.code == ZF_DEADLINE_EXCEEDED) {
            zf_status_clear(&st);
            return ZF_STATUS_OK;
        }
        if (st.code == ZF_CANCELLED) return st;
        if (!zf_ok(st) || route.n != 1) {
            if (zf_ok(st))
                st = zf_invalid_argument("a direct request with %d routing frames", route.n);
            zf_log_warn(S_LOG, "bad direct request: %s", zf_status_msg(&st));
            if (route.n >= 1) s_answer_on(srv->clients, &route, route.request_id, st);
            zf_status_clear(&st);
        } else {
            s_on_direct(srv, &route, &env);
        }
        if (env) zflow__envelope__free_unpacked(env, NULL);
    }
}

/* A connect event: a connection after the first one reaches a broker that
 * may have restarted and forgotten us, so we register again. */
static void s_serve_monitor(zf_sched_server_t *srv)
{
    uint8_t ev[8] = {0};
    int n = zmq_recv(zf_socket_handle(srv->monitor), ev, sizeof ev, ZMQ_DONTWAIT);
    if (n < 0) return;
    zf_socket_drain(srv->monitor);
    uint16_t event = 0; /* libzmq writes the event number in host order */
    memcpy(&event, ev, sizeof event);
    if (event != ZMQ_EVENT_CONNECTED || ++srv->connects == 1 || !srv->registered) return;
    srv->id_tries = 1;
    zf_status_t st = s_send_register(srv);
    if (!zf_ok(st)) zf_log_warn(S_LOG, "cannot register again: %s", zf_status_msg(&st));
    zf_status_clear(&st);
}

/* One round: waits up to timeout_ms, then handles what is ready. */
static zf_status_t s_poll(zf_sched_server_t *srv, int timeout_ms)
{
    zmq_pollitem_t *items = srv->items;
    items[0] = (zmq_pollitem_t){zf_socket_handle(srv->broker), 0, ZMQ_POLLIN, 0};
    items[1] = (zmq_pollitem_t){NULL, srv->wake[0], ZMQ_POLLIN, 0};
    items[2] = (zmq_pollitem_t){zf_socket_handle(srv->monitor), 0, ZMQ_POLLIN, 0};
    items[3] = (zmq_pollitem_t){zf_socket_handle(srv->clients), 0, ZMQ_POLLIN, 0};
    int n_rpc = zf_sched_rpc_items(srv->rpc, items + 4, S_MAX_ITEMS - 4);
    if (srv->step_wake_ms >= 0 && (timeout_ms < 0 || srv->step_wake_ms < timeout_ms))
        timeout_ms = (int)srv->step_wake_ms;
    int rc = zmq_poll(items, 4 + n_rpc, timeout_ms);
    if (rc < 0 && errno == ETERM) return zf_status_new(ZF_CANCELLED, "context terminated");
    zf_status_t st = ZF_STATUS_OK;
    if (rc > 0) {
        /* executor replies first: the steps they end answer at once */
        zf_sched_rpc_serve(srv->rpc, items + 4, n_rpc);
        zf_master_poll(srv->master);
        if (items[2].revents & ZMQ_POLLIN) s_serve_monitor(srv);
        if (items[3].revents & ZMQ_POLLIN) st = s_read_clients(srv);
        if (zf_ok(st) && (items[0].revents & ZMQ_POLLIN)) st = s_read_broker(srv);
    }
    srv->step_wake_ms = zf_master_poll(srv->master); /* timeouts, and steps started above */
    if (rc > 0 && (items[1].revents & ZMQ_POLLIN)) s_flush_replies(srv);
    return st;
}

/* ---- lifecycle ------------------------------------------------------------------- */

/* Binds the client ROUTER and picks the scheduler's id; the advertised
 * endpoint is cfg->advertise, or else the bound one with a wildcard host
 * replaced by loopback. */
static zf_status_t s_open_clients(zf_sched_server_t *srv, const zf_sched_server_config_t *cfg)
{
    if (cfg->id)
        snprintf(srv->sched_id, sizeof srv->sched_id, "%s", cfg->id);
    else
        s_pick_id(srv);
    ZF_TRY(zf_socket_new(srv->ctx, ZF_SOCKET_ROUTER, &srv->clients));
    /* the broker's cap on what a client may send, so no client makes
     * libzmq allocate without bound here either */
    ZF_TRY(zf_socket_set_max_frame_size(srv->clients, (int64_t)256 << 20));
    const char *bound = NULL;
    ZF_TRY(zf_socket_bind(srv->clients, cfg->listen ? cfg->listen : S_LISTEN, &bound));
    if (cfg->advertise) {
        srv->client_endpoint = strdup(cfg->advertise);
        return srv->client_endpoint ? ZF_STATUS_OK : zf_out_of_memory("scheduler");
    }
    const char *wild = "tcp://0.0.0.0:";
    size_t n = strlen(bound) + 16;
    if (!(srv->client_endpoint = malloc(n))) return zf_out_of_memory("scheduler");
    if (strncmp(bound, wild, strlen(wild)) == 0)
        snprintf(srv->client_endpoint, n, "tcp://127.0.0.1:%s", bound + strlen(wild));
    else
        snprintf(srv->client_endpoint, n, "%s", bound);
    return ZF_STATUS_OK;
}

static zf_status_t s_start(zf_sched_server_t *srv, const zf_sched_server_config_t *cfg)
{
    if (pipe(srv->wake) != 0) return zf_internal("scheduler: pipe: %s", strerror(errno));
    for (int i = 0; i < 2; i++)
        if (fcntl(srv->wake[i], F_SETFL, O_NONBLOCK) != 0)
            return zf_internal("scheduler: fcntl: %s", strerror(errno));
    ZF_TRY(zf_zctx_new(&srv->ctx));
    ZF_TRY(zf_socket_new(srv->ctx, ZF_SOCKET_DEALER, &srv->broker));
    ZF_TRY(zf_socket_set_max_frame_size(srv->broker, (int64_t)1 << 31));
    ZF_TRY(zf_socket_set_hwm(srv->broker, 0, 0));
    char addr[64];
    snprintf(addr, sizeof addr, "inproc://zflow-scheduler-monitor-%p", (void *)srv);
    if (zmq_socket_monitor(zf_socket_handle(srv->broker), addr, ZMQ_EVENT_CONNECTED) != 0)
        return zf_internal("cannot monitor the broker socket: %s", zmq_strerror(zmq_errno()));
    ZF_TRY(zf_socket_new(srv->ctx, ZF_SOCKET_PAIR, &srv->monitor));
    ZF_TRY(zf_socket_connect(srv->monitor, addr));
    ZF_TRY(zf_socket_connect(srv->broker, cfg->broker));
    ZF_TRY(s_open_clients(srv, cfg));
    ZF_TRY(zf_sched_rpc_new_polled(srv->ctx, s_on_executor_reply, srv, &srv->rpc));
    zf_master_transport_t t = zf_sched_rpc_transport(srv->rpc);
    char prefix[sizeof srv->sched_id + 1];
    snprintf(prefix, sizeof prefix, "%s/", srv->sched_id);
    zf_master_options_t mo = {.id_prefix = prefix, .forget = zf_sched_rpc_forget_hook};
    ZF_TRY(zf_master_new(&t, &mo, &srv->master));
    zf_master_set_job_retention(srv->master, cfg->job_results, cfg->job_ttl_ms);
    zf_master_set_job_steps_max(srv->master, cfg->max_steps);
    return zf_thread_pool_new(cfg->workers > 0 ? cfg->workers : 16, &srv->pool);
}

zf_status_t zf_sched_server_new(const zf_sched_server_config_t *config, zf_sched_server_t **out)
{
    *out = NULL;
    if (!config || !config->broker || !config->broker[0])
        return zf_invalid_argument("scheduler: no broker endpoint");
    if (config->max_client_requests < 0)
        return zf_invalid_argument("scheduler: max_client_requests must be 0 (the default, %d) "
                                   "or more, not %d",
                                   ZF_SCHED_MAX_CLIENT_REQUESTS, config->max_client_requests);
    if (config->id &&
        (!config->id[0] || strlen(config->id) >= S_ID_SIZE || strchr(config->id, '/')))
        return zf_invalid_argument("scheduler: id '%.40s' must be 1 to %d bytes without a '/'",
                                   config->id, S_ID_SIZE - 1);
    zf_sched_server_t *srv = calloc(1, sizeof *srv);
    if (!srv) return zf_out_of_memory("scheduler");
    srv->wake[0] = srv->wake[1] = -1;
    srv->step_wake_ms = -1;
    srv->max_client_requests = config->max_client_requests > 0 ? config->max_client_requests
                                                               : ZF_SCHED_MAX_CLIENT_REQUESTS;
    /* from a random start, so that no client's request id, which the
     * broker may echo in a StatusReply on this socket, passes for one */
    srv->register_id = zf_device_new_incarnation() >> 1;
    pthread_mutex_init(&srv->mu, NULL);
    srv->broker_endpoint = strdup(config->broker);
    srv->in_flight = zf_strmap_new(16, ZF_STRMAP_OWN_KEYS);
    zf_status_t st = srv->broker_endpoint && srv->in_flight ? s_start(srv, config)
                                                             : zf_out_of_memory("scheduler");
    if (!zf_ok(st)) {
        zf_sched_server_destroy(&srv);
        return st;
    }
    *out = srv;
    return ZF_STATUS_OK;
}

void zf_sched_server_destroy(zf_sched_server_t **srv_p)
{
    if (!srv_p || !*srv_p) return;
    zf_sched_server_t *srv = *srv_p;
    *srv_p = NULL;
    /* Steps in flight fail at once, so the workers finish and answer. */
    if (srv->master) zf_master_drop_devices(srv->master, "the scheduler is stopping");
    if (srv->master) zf_master_poll(srv->master); /* ends the steps run without a worker */
    zf_thread_pool_destroy(&srv->pool);
    if (srv->broker) s_flush_replies(srv);
    zf_sched_rpc_destroy(&srv->rpc); /* no reply reaches the master after this */
    zf_master_destroy(&srv->master);
    if (srv->broker && srv->monitor) zmq_socket_monitor(zf_socket_handle(srv->broker), NULL, 0);
    zf_socket_destroy(&srv->monitor);
    zf_socket_destroy(&srv->clients);
    zf_socket_destroy(&srv->broker);
    zf_zctx_destroy(&srv->ctx);
    while (srv->head) { /* replies that could not be sent */
        s_reply_t *next = srv->head->next;
        if (srv->head->env) zflow__envelope__free_unpacked(srv->head->env, NULL);
        free(srv->head);
        srv->head = next;
    }
    zf_strmap_destroy(&srv->in_flight);
    for (int i = 0; i < 2; i++)
        if (srv->wake[i] >= 0) close(srv->wake[i]);
    zf_status_clear(&srv->register_status);
    pthread_mutex_destroy(&srv->mu);
    free(srv->broker_endpoint);
    free(srv->client_endpoint);
    free(srv);
}

zf_status_t zf_sched_server_register(zf_sched_server_t *srv, int timeout_ms)
{
    zf_status_clear(&srv->register_status);
    srv->id_tries = 1;
    ZF_TRY(s_send_register(srv));
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!srv->registered && zf_ok(srv->register_status)) {
        if (atomic_load(&srv->stop)) return zf_status_new(ZF_CANCELLED, "stopped");
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t waited =
            (int64_t)(now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (timeout_ms >= 0 && waited >= timeout_ms)
            return zf_status_new(ZF_DEADLINE_EXCEEDED,
                                 "the broker at %s did not answer within %d ms",
                                 srv->broker_endpoint, timeout_ms);
        ZF_TRY(s_poll(srv, S_POLL_MS));
    }
    if (!zf_ok(srv->register_status))
        return zf_status_new(srv->register_status.code, "%s", zf_status_msg(&srv->register_status));
    zf_log_info(S_LOG, "registered with the broker at %s (%d executors)", srv->broker_endpoint,
                zf_master_num_devices(srv->master));
    return ZF_STATUS_OK;
}

zf_status_t zf_sched_server_run(zf_sched_server_t *srv)
{
    while (!atomic_load(&srv->stop)) {
        ZF_TRY(s_poll(srv, S_POLL_MS));
        zf_master_jobs_tick(srv->master); /* late waiters, expired results */
        if (!zf_ok(srv->register_status)) /* a restarted broker refused us */
            return zf_status_new(srv->register_status.code, "%s",
                                 zf_status_msg(&srv->register_status));
    }
    return ZF_STATUS_OK;
}

void zf_sched_server_stop(zf_sched_server_t *srv)
{
    atomic_store(&srv->stop, true);
}

int zf_sched_server_num_devices(zf_sched_server_t *srv)
{
    return zf_master_num_devices(srv->master);
}

const char *zf_sched_server_id(const zf_sched_server_t *srv)
{
    return srv->sched_id;
}
