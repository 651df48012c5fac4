/* Client requests on the scheduler's worker pools: sessions' requests on the
 * request workers (or a cached plan's step on the loop thread), and jobs,
 * answered on the loop thread and run on their own pool so that no request
 * waits behind one (scheduler/server/server_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "scheduler/server/server_internal.h"

#define S_LOG ZF__SCHED_SRV_LOG

/* A session's request on its way to a worker, or a step run without one. */
typedef struct {
    zf_sched_server_t *srv;
    bool direct;
    zf_route_t route;
    Zflow__Envelope *env;
    uint64_t request_id;         /* for a step run without a worker */
    zf__sched_srv_reply_t *slot; /* a direct request's reply, made before it was accepted */
} s_request_t;

static Zflow__Envelope *s_envelope(uint64_t request_id)
{
    Zflow__Envelope *e = malloc(sizeof *e);
    if (!e) return NULL;
    zflow__envelope__init(e);
    e->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    e->request_id = request_id;
    return e;
}

/* Frees a request; one that carried a large graph gives the freed heap
 * back to the system (zf_master_release_memory). */
static void s_request_free(Zflow__Envelope *env)
{
    const Tensorflow__GraphDef *gd = NULL;
    if (env->body_case == ZFLOW__ENVELOPE__BODY_CREATE_SESSION && env->create_session)
        gd = env->create_session->graph;
    else if (env->body_case == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB && env->submit_job &&
             env->submit_job->session)
        gd = env->submit_job->session->graph;
    bool large = gd && gd->n_node >= ZF_MASTER_TRIM_NODES;
    zflow__envelope__free_unpacked(env, NULL);
    if (large) zf_master_release_memory();
}

/* ---- sessions' requests ---------------------------------------------------------- */

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

/* The client a request came from, as the session limits count it: its
 * CURVE identity when it came straight with one, else its routing id at
 * the socket it came by (the broker's for a forwarded request). */
static void s_client_name(bool direct, const zf_route_t *route, char *buf, size_t size)
{
    if (direct && route->peer[0]) {
        snprintf(buf, size, "%s", route->peer);
        return;
    }
    size_t n = (size_t)snprintf(buf, size, "%s", direct ? "direct:" : "broker:");
    for (size_t i = 0; route->n > 0 && i < route->len[0] && n + 3 <= size; i++, n += 2)
        snprintf(buf + n, size - n, "%02x", route->frame[0][i]);
}

static void s_work(void *arg)
{
    s_request_t *req = arg;
    Zflow__Envelope *rep = NULL;
    char client[2 * ZF_ROUTE_MAX_FRAME_BYTES + 16];
    s_client_name(req->direct, &req->route, client, sizeof client);
    zf_status_t st = zf_master_handle_from(req->srv->master, req->env, client, &rep);
    if (!zf_ok(st)) {
        zf_status_t e = zf_envelope_status_reply(req->env->request_id, &st, &rep);
        zf_status_clear(&e);
    }
    zf_status_clear(&st);
    if (rep) s_advertise(req->srv, rep);
    if (req->slot) { /* direct: queued even without a reply, so that its count ends */
        req->slot->env = rep;
        zf__sched_srv_queue(req->srv, req->slot);
    } else if (rep) {
        zf__sched_srv_queue_reply(req->srv, req->direct, &req->route, rep);
    }
    s_request_free(req->env);
    free(req);
}

/* An asynchronous step ended, on this thread, which owns the sockets: its
 * reply leaves at once. */
static void s_on_step_done(void *arg, Zflow__Envelope *reply)
{
    s_request_t *req = arg;
    zf_sched_server_t *srv = req->srv;
    if (!reply) {
        zf_status_t st = zf_out_of_memory("scheduler: step reply");
        zf_status_t e = zf_envelope_status_reply(req->request_id, &st, &reply);
        zf_status_clear(&e);
        zf_status_clear(&st);
    }
    zf_socket_t *sock = req->direct ? srv->clients : srv->broker;
    zf_status_t st = reply ? zf_envelope_send(sock, &req->route, reply) : ZF_STATUS_OK;
    if (!zf_ok(st))
        zf_log_warn(S_LOG, "cannot send a step's reply to %s: %s",
                    req->direct ? "a client" : "the broker", zf_status_msg(&st));
    zf_status_clear(&st);
    if (reply) zflow__envelope__free_unpacked(reply, NULL);
    if (req->direct) zf__sched_srv_client_done(srv, &req->route);
    free(req);
}

/* A RunStep whose plan is cached runs here, without a worker: the master
 * sends its RunGraphs at once and its reply leaves when the executors'
 * replies are in (zf_master_poll). */
void zf__sched_srv_submit(zf_sched_server_t *srv, bool direct, const zf_route_t *route,
                          Zflow__Envelope **env_p)
{
    if ((*env_p)->body_case == ZFLOW__ENVELOPE__BODY_RUN_STEP) {
        s_request_t *step = malloc(sizeof *step);
        bool started = false;
        if (step) {
            *step = (s_request_t){srv, direct, *route, NULL, (*env_p)->request_id, NULL};
            zf_master_start_step(srv->master, env_p, s_on_step_done, step, &started);
        }
        if (started) return;
        free(step);
    }
    s_request_t *req = calloc(1, sizeof *req);
    zf__sched_srv_reply_t *slot = direct ? calloc(1, sizeof *slot) : NULL;
    zf_status_t st = req && (slot || !direct) ? ZF_STATUS_OK : zf_out_of_memory("scheduler");
    if (zf_ok(st)) {
        *req = (s_request_t){srv, direct, *route, *env_p, 0, slot};
        if (slot) *slot = (zf__sched_srv_reply_t){true, *route, NULL, NULL};
        st = zf_thread_pool_submit(srv->pool, s_work, req);
    }
    if (zf_ok(st)) {
        *env_p = NULL;
        return;
    }
    free(slot);
    free(req);
    if (direct) zf__sched_srv_client_done(srv, route);
    zf__sched_srv_answer_on(direct ? srv->clients : srv->broker, route, (*env_p)->request_id, st);
}

/* ---- jobs -------------------------------------------------------------------------- */

struct zf__sched_srv_job {
    zf_sched_server_t *srv;
    char *id;
    Zflow__Envelope *env; /* its SubmitJob */
    struct zf__sched_srv_job *next;
};

static void s_job_free(zf__sched_srv_job_t *job)
{
    s_request_free(job->env);
    free(job->id);
    free(job);
}

/* On a job worker: all the job's steps, unless the scheduler is stopping,
 * when the job stays queued in the master, which is going away (its
 * waiters then hear why: s_on_job_done). */
static void s_run_job(void *arg)
{
    zf__sched_srv_job_t *job = arg;
    zf_sched_server_t *srv = job->srv;
    atomic_fetch_sub(&srv->jobs_queued, 1);
    if (atomic_load(&srv->stop))
        atomic_fetch_add(&srv->jobs_unrun, 1);
    else
        zf_master_job_run(srv->master, job->id, job->env->submit_job);
    s_job_free(job);
}

/* Answers a SubmitJob with st and, when it is OK, the job's id. */
static void s_answer_submit(zf_sched_server_t *srv, const zf_route_t *route, uint64_t request_id,
                            const zf_status_t *st, const char *id)
{
    Zflow__SubmitJobReply r = ZFLOW__SUBMIT_JOB_REPLY__INIT;
    zf_status_t e = zf_status_to_proto(st, &r.status);
    r.job_id = (char *)id;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = request_id;
    env.body_case = ZFLOW__ENVELOPE__BODY_SUBMIT_JOB_REPLY;
    env.submit_job_reply = &r;
    if (zf_ok(e)) e = zf_envelope_send(srv->broker, route, &env);
    if (!zf_ok(e)) zf_log_warn(S_LOG, "cannot answer a SubmitJob: %s", zf_status_msg(&e));
    if (r.status) zflow__status__free_unpacked(r.status, NULL);
    zf_status_clear(&e);
}

/* The jobs waiting for a job worker are bounded, now that their SubmitJob
 * is answered before they start. */
static zf_status_t s_check_queue(const zf_sched_server_t *srv)
{
    if (atomic_load(&srv->jobs_queued) < srv->max_queued_jobs) return ZF_STATUS_OK;
    return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                         "SubmitJob refused: the scheduler's queue of jobs waiting for a job "
                         "worker is full (zflow-scheduler --max-queued-jobs %d; %d run at once, "
                         "--job-workers); submit again once some have started",
                         srv->max_queued_jobs, srv->job_workers);
}

/* The job is made (QUEUED) here, which does not block, so that its id goes
 * back at once whatever the job workers are doing. */
void zf__sched_srv_submit_job(zf_sched_server_t *srv, const zf_route_t *route,
                              Zflow__Envelope **env_p)
{
    const Zflow__Envelope *req = *env_p;
    zf__sched_srv_job_t *job = NULL;
    char *id = NULL;
    zf_status_t st = s_check_queue(srv);
    if (zf_ok(st) && !(job = calloc(1, sizeof *job))) st = zf_out_of_memory("scheduler: a job");
    if (zf_ok(st)) st = zf_master_job_new(srv->master, req->submit_job, &id);
    s_answer_submit(srv, route, req->request_id, &st, id);
    if (!zf_ok(st)) {
        zf_status_clear(&st);
        free(job);
        return;
    }
    *job = (zf__sched_srv_job_t){srv, id, *env_p, NULL};
    *env_p = NULL;
    atomic_fetch_add(&srv->jobs_queued, 1);
    if (srv->jobs_tail)
        srv->jobs_tail->next = job;
    else
        srv->jobs_head = job;
    srv->jobs_tail = job;
    zf__sched_srv_start_jobs(srv);
}

void zf__sched_srv_start_jobs(zf_sched_server_t *srv)
{
    while (srv->jobs_head) {
        zf__sched_srv_job_t *job = srv->jobs_head, *next = job->next; /* job may end at once */
        zf_status_t st = zf_thread_pool_submit(srv->job_pool, s_run_job, job);
        if (!zf_ok(st)) {
            zf_log_warn(S_LOG, "job %s waits for the job pool, which cannot take it yet: %s",
                        job->id, zf_status_msg(&st));
            zf_status_clear(&st);
            return;
        }
        srv->jobs_head = next;
        if (!next) srv->jobs_tail = NULL;
    }
}

void zf__sched_srv_drop_jobs(zf_sched_server_t *srv)
{
    while (srv->jobs_head) {
        zf__sched_srv_job_t *next = srv->jobs_head->next;
        atomic_fetch_add(&srv->jobs_unrun, 1);
        s_job_free(srv->jobs_head);
        srv->jobs_head = next;
    }
    srv->jobs_tail = NULL;
}

/* A WaitJob waiting for its job. */
typedef struct {
    zf_sched_server_t *srv;
    zf_route_t route;
    uint64_t request_id;
} s_waiter_t;

/* A job result saying why the job never ran, or NULL without memory. */
static Zflow__RunStepReply *s_stopped_result(void)
{
    Zflow__RunStepReply *r = malloc(sizeof *r);
    if (!r) return NULL;
    zflow__run_step_reply__init(r);
    zf_status_t st = zf_status_new(ZF_UNAVAILABLE, "the scheduler is stopping");
    zf_status_t e = zf_status_to_proto(&st, &r->status);
    zf_status_clear(&st);
    if (zf_ok(e)) return r;
    zf_status_clear(&e);
    zflow__run_step_reply__free_unpacked(r, NULL);
    return NULL;
}

/* Answers a WaitJob with the job's result; a waiter the master fires as it
 * goes away (jobs_stopped) waits for a job the stop kept from running. */
static void s_on_job_done(void *arg, Zflow__RunStepReply *reply)
{
    s_waiter_t *w = arg;
    if (atomic_load(&w->srv->jobs_stopped)) {
        if (reply) zflow__run_step_reply__free_unpacked(reply, NULL);
        reply = s_stopped_result();
    }
    Zflow__Envelope *rep = s_envelope(w->request_id);
    if (rep && reply) {
        rep->body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY;
        rep->run_step_reply = reply;
        zf__sched_srv_queue_reply(w->srv, false, &w->route, rep);
    } else {
        zf_status_t st = zf_out_of_memory("scheduler: job result");
        if (rep) zflow__envelope__free_unpacked(rep, NULL);
        if (reply) zflow__run_step_reply__free_unpacked(reply, NULL);
        rep = NULL;
        zf_status_t e = zf_envelope_status_reply(w->request_id, &st, &rep);
        if (rep) zf__sched_srv_queue_reply(w->srv, false, &w->route, rep);
        zf_status_clear(&e);
        zf_status_clear(&st);
    }
    free(w);
}

void zf__sched_srv_wait_job(zf_sched_server_t *srv, const zf_route_t *route,
                            const Zflow__Envelope *req)
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
    zf__sched_srv_answer_on(srv->broker, route, req->request_id, st);
}

void zf__sched_srv_poll_job(zf_sched_server_t *srv, const zf_route_t *route,
                            const Zflow__Envelope *req)
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
