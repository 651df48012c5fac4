/* The scheduler service loop: the sockets, reading and dispatching the
 * broker's and clients' messages, and the server's lifecycle
 * (scheduler/server/server.h; its parts in scheduler/server/server_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/random.h"
#include "scheduler/server/server_internal.h"

#define S_LOG     ZF__SCHED_SRV_LOG
#define S_POLL_MS 100
#define S_LISTEN  "tcp://127.0.0.1:*" /* the client ROUTER's default */

static void s_on_executor_reply(void *arg, Zflow__Envelope **reply)
{
    zf_sched_server_t *srv = arg;
    zf_master_deliver(srv->master, reply);
}

static void s_answer(zf_sched_server_t *srv, const zf_route_t *route, uint64_t request_id,
                     zf_status_t st)
{
    zf__sched_srv_answer_on(srv->broker, route, request_id, st);
}

/* ---- broker messages -------------------------------------------------------------- */

/* CancelStep or CancelJob, served on the loop thread: it only marks the
 * steps, and the loop's next zf_master_poll() aborts them. */
static zf_status_t s_cancel(zf_sched_server_t *srv, const Zflow__Envelope *env)
{
    if (env->body_case == ZFLOW__ENVELOPE__BODY_CANCEL_STEP)
        return zf_master_cancel_steps(srv->master, env->cancel_step->session, NULL);
    return zf_master_job_cancel(srv->master, env->cancel_job->job_id);
}

static void s_on_message(zf_sched_server_t *srv, const zf_route_t *route, Zflow__Envelope **env_p)
{
    Zflow__Envelope *env = *env_p;
    zf_status_t st = ZF_STATUS_OK;
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER_REPLY:
        zf__sched_srv_on_register_reply(srv, env->register_scheduler_reply);
        break;
    case ZFLOW__ENVELOPE__BODY_DEVICE_EVENT:
        st = zf_master_device_event(srv->master, env->device_event);
        if (!zf_ok(st)) zf_log_warn(S_LOG, "ignored a device event: %s", zf_status_msg(&st));
        zf_status_clear(&st);
        break;
    case ZFLOW__ENVELOPE__BODY_CANCEL_STEP:
    case ZFLOW__ENVELOPE__BODY_CANCEL_JOB:
        if (route->n == 1) s_answer(srv, route, env->request_id, s_cancel(srv, env));
        break;
    case ZFLOW__ENVELOPE__BODY_CREATE_SESSION:
    case ZFLOW__ENVELOPE__BODY_RUN_STEP:
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION:
    case ZFLOW__ENVELOPE__BODY_EXTEND_SESSION:
    case ZFLOW__ENVELOPE__BODY_SUBMIT_JOB:
        if (route->n != 1)
            zf_log_warn(S_LOG, "dropped a client request without a client frame");
        else if (env->body_case == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB)
            zf__sched_srv_submit_job(srv, route, env_p);
        else
            zf__sched_srv_submit(srv, false, route, env_p);
        break;
    case ZFLOW__ENVELOPE__BODY_WAIT_JOB:
        if (route->n == 1) zf__sched_srv_wait_job(srv, route, env);
        break;
    case ZFLOW__ENVELOPE__BODY_POLL_JOB:
        if (route->n == 1) zf__sched_srv_poll_job(srv, route, env);
        break;
    case ZFLOW__ENVELOPE__BODY_STATUS_REPLY: /* the broker refuses a registration this way */
        st = zf_status_from_proto(env->status_reply->status);
        if (!zf_ok(st) && env->request_id == srv->register_id) {
            zf__sched_srv_on_register_refused(srv, st);
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
            if (route.n == 1)
                s_answer(srv, &route, route.request_id, st); /* takes st */
            else
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
    case ZFLOW__ENVELOPE__BODY_CANCEL_STEP:
        st = zf_route_authorize(route, ZF_ROLE_CLIENT, "CancelStep");
        if (zf_ok(st)) st = s_cancel(srv, env);
        zf__sched_srv_answer_on(srv->clients, route, env->request_id, st);
        break;
    case ZFLOW__ENVELOPE__BODY_CREATE_SESSION:
    case ZFLOW__ENVELOPE__BODY_RUN_STEP:
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION:
    case ZFLOW__ENVELOPE__BODY_EXTEND_SESSION:
        st = zf__sched_srv_client_add(srv, route, env);
        if (zf_ok(st))
            zf__sched_srv_submit(srv, true, route, env_p);
        else
            zf__sched_srv_answer_on(srv->clients, route, env->request_id, st);
        break;
    case ZFLOW__ENVELOPE__BODY_PING:
        zf__sched_srv_answer_on(srv->clients, route, env->request_id, ZF_STATUS_OK);
        break;
    default:
        zf__sched_srv_answer_on(
            srv->clients, route, env->request_id,
            zf_unimplemented("the scheduler's client endpoint serves CreateSession, "
                             "ExtendSession, RunStep, CancelStep, CloseSession and Ping; "
                             "message body %d goes through the broker",
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
            if (route.n >= 1)
                zf__sched_srv_answer_on(srv->clients, &route, route.request_id, st); /* takes st */
            else
                zf_status_clear(&st);
        } else {
            s_on_direct(srv, &route, &env);
        }
        if (env) zflow__envelope__free_unpacked(env, NULL);
    }
}

/* ---- the loop -------------------------------------------------------------------- */

/* One round: waits up to timeout_ms, then handles what is ready. */
static zf_status_t s_poll(zf_sched_server_t *srv, int timeout_ms)
{
    zmq_pollitem_t *items = srv->items;
    items[0] = (zmq_pollitem_t){zf_socket_handle(srv->broker), 0, ZMQ_POLLIN, 0};
    items[1] = (zmq_pollitem_t){NULL, srv->wake[0], ZMQ_POLLIN, 0};
    items[2] = (zmq_pollitem_t){zf_socket_handle(srv->monitor), 0, ZMQ_POLLIN, 0};
    items[3] = (zmq_pollitem_t){zf_socket_handle(srv->clients), 0, ZMQ_POLLIN, 0};
    int n_rpc = zf_sched_rpc_items(srv->rpc, items + 4, ZF__SCHED_SRV_MAX_ITEMS - 4);
    if (srv->step_wake_ms >= 0 && (timeout_ms < 0 || srv->step_wake_ms < timeout_ms))
        timeout_ms = (int)srv->step_wake_ms;
    int rc = zmq_poll(items, 4 + n_rpc, timeout_ms);
    if (rc < 0 && errno == ETERM) return zf_status_new(ZF_CANCELLED, "context terminated");
    zf_status_t st = ZF_STATUS_OK;
    if (rc > 0) {
        /* executor replies first: the steps they end answer at once */
        zf_sched_rpc_serve(srv->rpc, items + 4, n_rpc);
        zf_master_poll(srv->master);
        if (items[2].revents & ZMQ_POLLIN) zf__sched_srv_serve_monitor(srv);
        if (items[3].revents & ZMQ_POLLIN) st = s_read_clients(srv);
        if (zf_ok(st) && (items[0].revents & ZMQ_POLLIN)) st = s_read_broker(srv);
    }
    srv->step_wake_ms = zf_master_poll(srv->master); /* timeouts, and steps started above */
    if (rc > 0 && (items[1].revents & ZMQ_POLLIN)) zf__sched_srv_flush_replies(srv);
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
        zf__sched_srv_pick_id(srv);
    ZF_TRY(zf_socket_new(srv->ctx, ZF_SOCKET_ROUTER, &srv->clients));
    ZF_TRY(zf_socket_secure_server(srv->clients, ZF_ROLE_ALL));
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

/* Room for a socket per executor (the rpc's) besides our own and
 * libzmq's monitor sockets: libzmq's default limit, 1023, is below
 * ZF_SCHED_RPC_MAX_PEERS. Before any socket is made. */
static zf_status_t s_size_context(zf_zctx_t *ctx)
{
    int n = ZF_SCHED_RPC_MAX_PEERS + 64;
    if (zmq_ctx_set(zf_zctx_handle(ctx), ZMQ_MAX_SOCKETS, n) != 0)
        return zf_internal("scheduler: cannot let the ZeroMQ context have %d sockets: %s", n,
                           zmq_strerror(zmq_errno()));
    return ZF_STATUS_OK;
}

static zf_status_t s_start(zf_sched_server_t *srv, const zf_sched_server_config_t *cfg)
{
    if (pipe(srv->wake) != 0) return zf_internal("scheduler: pipe: %s", strerror(errno));
    for (int i = 0; i < 2; i++)
        if (fcntl(srv->wake[i], F_SETFL, O_NONBLOCK) != 0)
            return zf_internal("scheduler: fcntl: %s", strerror(errno));
    ZF_TRY(zf_zctx_new(&srv->ctx));
    ZF_TRY(s_size_context(srv->ctx));
    if (cfg->keys) ZF_TRY(zf_zctx_set_keys(srv->ctx, cfg->keys, ZF_ROLE_SCHEDULER));
    ZF_TRY(zf_socket_new(srv->ctx, ZF_SOCKET_DEALER, &srv->broker));
    ZF_TRY(zf_socket_secure_client(srv->broker, ZF_ROLE_BROKER));
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
    zf_master_set_limits(srv->master, &cfg->limits);
    ZF_TRY(zf_thread_pool_new(cfg->workers > 0 ? cfg->workers : ZF_SCHED_WORKERS, &srv->pool));
    srv->job_workers = cfg->job_workers > 0 ? cfg->job_workers : ZF_SCHED_JOB_WORKERS;
    return zf_thread_pool_new(srv->job_workers, &srv->job_pool);
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
    if (config->max_queued_jobs < 0)
        return zf_invalid_argument("scheduler: max_queued_jobs must be 0 (the default, %d) or "
                                   "more, not %d",
                                   ZF_SCHED_MAX_QUEUED_JOBS, config->max_queued_jobs);
    if (config->job_workers < 0 || config->job_workers > ZF_SCHED_WORKERS_MAX)
        return zf_invalid_argument("scheduler: job_workers must be 0 (the default, %d) to %d, "
                                   "not %d",
                                   ZF_SCHED_JOB_WORKERS, ZF_SCHED_WORKERS_MAX, config->job_workers);
    if (config->id &&
        (!config->id[0] || strlen(config->id) >= ZF__SCHED_SRV_ID_SIZE || strchr(config->id, '/')))
        return zf_invalid_argument("scheduler: id '%.40s' must be 1 to %d bytes without a '/'",
                                   config->id, ZF__SCHED_SRV_ID_SIZE - 1);
    zf_sched_server_t *srv = calloc(1, sizeof *srv);
    if (!srv) return zf_out_of_memory("scheduler");
    srv->wake[0] = srv->wake[1] = -1;
    srv->step_wake_ms = -1;
    srv->max_client_requests = config->max_client_requests > 0 ? config->max_client_requests
                                                               : ZF_SCHED_MAX_CLIENT_REQUESTS;
    srv->max_queued_jobs =
        config->max_queued_jobs > 0 ? config->max_queued_jobs : ZF_SCHED_MAX_QUEUED_JOBS;
    /* from a random start, so that no client's request id, which the
     * broker may echo in a StatusReply on this socket, passes for one */
    srv->register_id = zf_random_id() >> 1;
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
    /* Steps in flight fail at once, so the workers finish and answer; the
     * jobs still queued see the stop and never run. */
    atomic_store(&srv->stop, true);
    if (srv->master) zf_master_drop_devices(srv->master, "the scheduler is stopping");
    if (srv->master) zf_master_poll(srv->master); /* ends the steps run without a worker */
    zf_thread_pool_destroy(&srv->pool);
    zf_thread_pool_destroy(&srv->job_pool);
    zf__sched_srv_drop_jobs(srv);    /* never handed to the job pool */
    zf_sched_rpc_destroy(&srv->rpc); /* no reply reaches the master after this */
    /* every job not done now never ran: the waiters the master fires as it
     * goes are told that the scheduler is stopping */
    atomic_store(&srv->jobs_stopped, true);
    zf_master_destroy(&srv->master);
    int unrun = atomic_load(&srv->jobs_unrun);
    if (unrun > 0)
        zf_log_info(S_LOG, "%d queued jobs ended without running: the scheduler is stopping",
                    unrun);
    if (srv->broker) zf__sched_srv_flush_replies(srv);
    if (srv->broker && srv->monitor) zmq_socket_monitor(zf_socket_handle(srv->broker), NULL, 0);
    zf_socket_destroy(&srv->monitor);
    zf_socket_destroy(&srv->clients);
    zf_socket_destroy(&srv->broker);
    zf_zctx_destroy(&srv->ctx);
    zf__sched_srv_drop_replies(srv); /* replies that could not be sent */
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
    ZF_TRY(zf__sched_srv_send_register(srv));
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
        zf_master_jobs_tick(srv->master);     /* late waiters, expired results */
        zf_master_sessions_tick(srv->master); /* sessions idle too long */
        zf__sched_srv_start_jobs(srv);        /* jobs the job pool could not take before */
        zf__sched_srv_register_tick(srv);     /* our id refused a while ago: try it again */
        if (!zf_ok(srv->register_status))     /* a restarted broker refused us */
            return zf_status_new(srv->register_status.code, "%s",
                                 zf_status_msg(&srv->register_status));
    }
    return ZF_STATUS_OK;
}

void zf_sched_server_stop(zf_sched_server_t *srv)
{
    atomic_store(&srv->stop, true);
}

const char *zf_sched_server_id(const zf_sched_server_t *srv)
{
    return srv->sched_id;
}
