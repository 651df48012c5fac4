/* The master's device set, its requests in flight to executors, its
 * sessions, and the envelope-level entry point (scheduler/master/master.h). Plans
 * and steps are in master_step.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/proto_util.h"
#include "common/transport.h"
#include "common/random.h"
#include "common/kernel_def.h"
#include "scheduler/master/master_internal.h"

#define S_LOG "master"

/* ---- time -------------------------------------------------------------------- */

void zf__master_deadline(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* ---- the master ---------------------------------------------------------------- */

zf_status_t zf_master_new(const zf_master_transport_t *transport, const zf_master_options_t *opts,
                          zf_master_t **out)
{
    *out = NULL;
    if (!transport || !transport->send) return zf_invalid_argument("master: no transport");
    zf_kernel_defs_register_builtin();
    zf_master_t *m = calloc(1, sizeof *m);
    if (!m) return zf_out_of_memory("master");
    m->transport = *transport;
    m->register_timeout_ms =
        opts && opts->register_timeout_ms > 0 ? opts->register_timeout_ms : 30000;
    m->abort_grace_ms = opts && opts->abort_grace_ms > 0 ? opts->abort_grace_ms : 2000;
    if (opts && opts->id_prefix) snprintf(m->id_prefix, sizeof m->id_prefix, "%s", opts->id_prefix);
    m->forget = opts ? opts->forget : NULL;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->next_request = 1;
    /* Step ids differ between starts of the scheduler, so an executor that
     * outlives one never mixes its steps with the next one's. */
    atomic_init(&m->next_step, (int_fast64_t)((zf_random_id() >> 24) | 1));
    m->sessions = zf_strmap_new(8, ZF_STRMAP_OWN_KEYS);
    m->jobs = zf_strmap_new(8, ZF_STRMAP_OWN_KEYS);
    if (!m->sessions || !m->jobs) {
        zf_master_destroy(&m);
        return zf_out_of_memory("master");
    }
    *out = m;
    return ZF_STATUS_OK;
}

void zf_master_set_id_prefix(zf_master_t *m, const char *prefix)
{
    pthread_mutex_lock(&m->mu);
    snprintf(m->id_prefix, sizeof m->id_prefix, "%s", prefix ? prefix : "");
    pthread_mutex_unlock(&m->mu);
}

static void s_device_free(zf__master_device_t *d)
{
    if (!d) return;
    free(d->name);
    free(d->endpoint);
    free(d->rendezvous);
    free(d);
}

static void s_session_free(zf_master_t *m, zf__master_session_t *s)
{
    zf__master_drop_plans(m, s, NULL);
    zf__master_placement_free(s);
    zf_strmap_destroy(&s->plans);
    zf_graph_destroy(&s->graph);
    pthread_mutex_destroy(&s->build);
    free(s->id);
    free(s);
}

void zf_master_destroy(zf_master_t **m_p)
{
    if (!m_p || !*m_p) return;
    zf_master_t *m = *m_p;
    *m_p = NULL;
    zf__master_asteps_cancel(m);
    zf__master_jobs_free(m);
    pthread_mutex_lock(&m->mu);
    /* Devices first: with none left, dropping the plans tells no executor. */
    for (int i = 0; i < m->n_devices; i++) s_device_free(m->devices[i]);
    free(m->devices);
    m->devices = NULL;
    m->n_devices = 0;
    size_t iter = 0;
    uintptr_t v = 0;
    while (m->sessions && zf_strmap_next(m->sessions, &iter, NULL, NULL, &v))
        s_session_free(m, (zf__master_session_t *)v);
    zf_strmap_destroy(&m->sessions);
    pthread_mutex_unlock(&m->mu);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* ---- devices ----------------------------------------------------------------- */

zf__master_device_t *zf__master_find_device(zf_master_t *m, const char *name)
{
    for (int i = 0; i < m->n_devices; i++)
        if (strcmp(m->devices[i]->name, name) == 0) return m->devices[i];
    return NULL;
}

static zf_status_t s_device_from_info(const Zflow__ExecutorInfo *info, zf__master_device_t **out)
{
    *out = NULL;
    const Tensorflow__DeviceAttributes *a = info ? info->device : NULL;
    if (!a || !a->name || !a->name[0])
        return zf_invalid_argument("executor info without a device name");
    zf_device_name_t parsed;
    zf_status_t st = zf_device_name_parse(a->name, &parsed);
    if (!zf_ok(st)) return zf_status_prefix(st, "executor device '%s'", a->name);
    if (!zf_device_name_is_full(&parsed))
        return zf_invalid_argument("executor device '%s' is not a full device name", a->name);
    if (a->incarnation == 0) return zf_invalid_argument("executor %s has incarnation 0", a->name);
    if (!info->control_endpoint || !info->control_endpoint[0])
        return zf_invalid_argument("executor %s has no control endpoint", a->name);
    zf__master_device_t *d = calloc(1, sizeof *d);
    char full[ZF_DEVICE_NAME_MAX];
    zf_device_name_format(&parsed, full, sizeof full);
    if (d) {
        d->name = strdup(full);
        d->endpoint = strdup(info->control_endpoint);
        d->rendezvous = strdup(info->rendezvous_endpoint ? info->rendezvous_endpoint : "");
    }
    if (!d || !d->name || !d->endpoint || !d->rendezvous) {
        s_device_free(d);
        return zf_out_of_memory("master");
    }
    d->parsed = parsed;
    d->incarnation = a->incarnation;
    d->load = info->load > 0 ? info->load : 0;
    *out = d;
    return ZF_STATUS_OK;
}

/* Fails the calls in flight to device with UNAVAILABLE. Under m->mu. */
static void s_fail_calls(zf_master_t *m, const char *device, const char *reason)
{
    for (zf__master_call_t **pp = &m->pending; *pp;) {
        zf__master_call_t *c = *pp;
        if (strcmp(c->device, device) != 0) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        c->next = NULL;
        c->done = true;
        c->status = zf_status_new(ZF_UNAVAILABLE, "executor %s died: %s", device,
                                  reason && reason[0] ? reason : "no reason given");
    }
    pthread_cond_broadcast(&m->cv);
}

/* Drops the plans of every session that use device. Under m->mu. */
static void s_drop_device_plans(zf_master_t *m, const char *device)
{
    size_t iter = 0;
    uintptr_t v = 0;
    while (zf_strmap_next(m->sessions, &iter, NULL, NULL, &v))
        zf__master_drop_plans(m, (zf__master_session_t *)v, device);
}

/* Hands endpoint to the transport's forget hook unless a live device
 * still uses it. Under m->mu. */
static void s_forget_endpoint(zf_master_t *m, const char *endpoint)
{
    if (!m->forget) return;
    for (int i = 0; i < m->n_devices; i++)
        if (strcmp(m->devices[i]->endpoint, endpoint) == 0) return;
    m->forget(m->transport.arg, endpoint);
}

/* Removes device i from the set, failing its calls, dropping its plans and
 * forgetting its endpoint. */
static void s_remove_device(zf_master_t *m, int i, const char *reason)
{
    zf__master_device_t *d = m->devices[i];
    m->devices[i] = m->devices[--m->n_devices];
    s_fail_calls(m, d->name, reason);
    s_drop_device_plans(m, d->name);
    s_forget_endpoint(m, d->endpoint);
    s_device_free(d);
}

zf_status_t zf_master_device_joined(zf_master_t *m, const Zflow__ExecutorInfo *info)
{
    zf__master_device_t *d = NULL;
    ZF_TRY(s_device_from_info(info, &d));
    pthread_mutex_lock(&m->mu);
    zf_status_t st = ZF_STATUS_OK;
    for (int i = 0; i < m->n_devices; i++) {
        if (strcmp(m->devices[i]->name, d->name) != 0) continue;
        if (m->devices[i]->incarnation == d->incarnation) { /* a repeat: refresh */
            char *old = m->devices[i]->endpoint;
            m->devices[i]->endpoint = d->endpoint;
            d->endpoint = NULL;
            if (strcmp(old, m->devices[i]->endpoint) != 0) s_forget_endpoint(m, old);
            free(old);
            s_device_free(d);
            pthread_mutex_unlock(&m->mu);
            return ZF_STATUS_OK;
        }
        s_remove_device(m, i, "it restarted with a new incarnation");
        break;
    }
    if (m->n_devices == m->cap_devices) {
        int cap = m->cap_devices ? 2 * m->cap_devices : 8;
        zf__master_device_t **v = realloc(m->devices, (size_t)cap * sizeof *v);
        if (v) {
            m->devices = v;
            m->cap_devices = cap;
        } else {
            st = zf_out_of_memory("master");
        }
    }
    if (zf_ok(st)) {
        m->devices[m->n_devices++] = d;
        zf_log_info(S_LOG, "executor %s joined (%s)", d->name, d->endpoint);
    } else {
        s_device_free(d);
    }
    pthread_mutex_unlock(&m->mu);
    return st;
}

void zf_master_device_died(zf_master_t *m, const char *name, const char *reason)
{
    if (!name) return;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_devices; i++) {
        if (strcmp(m->devices[i]->name, name) != 0) continue;
        zf_log_warn(S_LOG, "executor %s died: %s", name, reason && reason[0] ? reason : "?");
        s_remove_device(m, i, reason);
        break;
    }
    pthread_mutex_unlock(&m->mu);
}

void zf_master_drop_devices(zf_master_t *m, const char *reason)
{
    pthread_mutex_lock(&m->mu);
    while (m->n_devices > 0) s_remove_device(m, m->n_devices - 1, reason);
    pthread_mutex_unlock(&m->mu);
}

/* True when keep names device (in the form the broker sent). */
static bool s_listed(Zflow__ExecutorInfo *const *keep, size_t n, const char *device)
{
    for (size_t k = 0; k < n; k++) {
        const Tensorflow__DeviceAttributes *a = keep[k] ? keep[k]->device : NULL;
        zf_device_name_t parsed;
        char full[ZF_DEVICE_NAME_MAX];
        if (!a || !a->name) continue;
        zf_status_t st = zf_device_name_parse(a->name, &parsed);
        bool same =
            zf_ok(st) && strcmp(zf_device_name_format(&parsed, full, sizeof full), device) == 0;
        zf_status_clear(&st);
        if (same) return true;
    }
    return false;
}

void zf_master_retain_devices(zf_master_t *m, Zflow__ExecutorInfo *const *keep, size_t n,
                              const char *reason)
{
    pthread_mutex_lock(&m->mu);
    for (int i = m->n_devices - 1; i >= 0; i--)
        if (!s_listed(keep, n, m->devices[i]->name)) s_remove_device(m, i, reason);
    pthread_mutex_unlock(&m->mu);
}

zf_status_t zf_master_device_event(zf_master_t *m, const Zflow__DeviceEvent *ev)
{
    if (!ev || !ev->executor || !ev->executor->device || !ev->executor->device->name)
        return zf_invalid_argument("device event without an executor");
    switch (ev->kind) {
    case ZFLOW__DEVICE_EVENT__KIND__JOINED: return zf_master_device_joined(m, ev->executor);
    case ZFLOW__DEVICE_EVENT__KIND__DIED:
        zf_master_device_died(m, ev->executor->device->name, ev->reason);
        return ZF_STATUS_OK;
    default: return zf_invalid_argument("device event of unknown kind %d", (int)ev->kind);
    }
}

int zf_master_num_devices(zf_master_t *m)
{
    pthread_mutex_lock(&m->mu);
    int n = m->n_devices;
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* ---- calls ------------------------------------------------------------------- */

static zf_status_t s_send(zf_master_t *m, const zf__master_device_t *d, Zflow__Envelope *env)
{
    env->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env->request_id = m->next_request++;
    return m->transport.send(m->transport.arg, d->name, d->endpoint, env);
}

void zf__master_call_start(zf_master_t *m, zf__master_call_t *call, const char *device,
                           uint64_t incarnation, Zflow__Envelope *env)
{
    *call = (zf__master_call_t){0};
    snprintf(call->device, sizeof call->device, "%s", device);
    zf__master_device_t *d = zf__master_find_device(m, device);
    if (!d || (incarnation && d->incarnation != incarnation)) {
        call->done = true;
        call->status =
            zf_status_new(ZF_UNAVAILABLE, "executor %s died: %s", device,
                          d ? "it restarted with a new incarnation" : "it is no longer registered");
        return;
    }
    zf_status_t st = s_send(m, d, env);
    call->id = env->request_id;
    if (!zf_ok(st)) {
        call->done = true;
        call->status = zf_status_prefix(st, "sending to executor %s", device);
        return;
    }
    call->next = m->pending;
    m->pending = call;
}

void zf__master_call_finish(zf_master_t *m, zf__master_call_t *call)
{
    for (zf__master_call_t **pp = &m->pending; !call->done && *pp; pp = &(*pp)->next) {
        if (*pp == call) {
            *pp = call->next;
            break;
        }
    }
    call->next = NULL;
    call->done = true;
    zf_status_clear(&call->status);
    if (call->reply) zflow__envelope__free_unpacked(call->reply, NULL);
    call->reply = NULL;
}

void zf__master_send_oneway(zf_master_t *m, const char *device, Zflow__Envelope *env)
{
    zf__master_device_t *d = zf__master_find_device(m, device);
    if (!d) return; /* gone: nothing to tell it */
    zf_status_t st = s_send(m, d, env);
    if (!zf_ok(st))
        zf_log_warn(S_LOG, "cannot send to executor %s: %s", device, zf_status_msg(&st));
    zf_status_clear(&st);
}

void zf_master_deliver(zf_master_t *m, Zflow__Envelope **reply_p)
{
    if (!reply_p || !*reply_p) return;
    Zflow__Envelope *env = *reply_p;
    *reply_p = NULL;
    pthread_mutex_lock(&m->mu);
    for (zf__master_call_t **pp = &m->pending; *pp; pp = &(*pp)->next) {
        zf__master_call_t *c = *pp;
        if (c->id != env->request_id) continue;
        *pp = c->next;
        c->next = NULL;
        c->done = true;
        c->reply = env;
        env = NULL;
        pthread_cond_broadcast(&m->cv);
        break;
    }
    pthread_mutex_unlock(&m->mu);
    if (env) {
        zf_log_debug(S_LOG, "dropped a reply to request %" PRIu64 " nobody waits for",
                     env->request_id);
        zflow__envelope__free_unpacked(env, NULL);
    }
}

/* ---- sessions ------------------------------------------------------------------ */

void zf__master_session_unref(zf_master_t *m, zf__master_session_t **s_p)
{
    zf__master_session_t *s = *s_p;
    *s_p = NULL;
    if (s && --s->refs == 0) s_session_free(m, s);
}

/* A private copy of gd, allocated as protobuf-c's unpack does. */
static zf_status_t s_copy_graphdef(const Tensorflow__GraphDef *gd, Tensorflow__GraphDef **out)
{
    ProtobufCMessage *c = NULL;
    zf_status_t st = zf_proto_clone(&gd->base, "master: graph copy", &c);
    *out = (Tensorflow__GraphDef *)c;
    return st;
}

static zf_status_t s_session_new(const Zflow__CreateSession *req, zf__master_session_t **out)
{
    *out = NULL;
    if (!req || !req->graph) return zf_invalid_argument("CreateSession without a graph");
    zf__master_session_t *s = calloc(1, sizeof *s);
    if (!s) return zf_out_of_memory("master");
    pthread_mutex_init(&s->build, NULL);
    s->refs = 1;
    if (req->options) {
        s->soft = req->options->allow_soft_placement;
        s->place_first = req->options->place_first;
        s->timeout_ms = req->options->step_timeout_ms > 0 ? req->options->step_timeout_ms : 0;
    }
    s->plans = zf_strmap_new(4, ZF_STRMAP_OWN_KEYS);
    zf_status_t st = s->plans ? s_copy_graphdef(req->graph, &s->gd) : zf_out_of_memory("master");
    if (zf_ok(st)) st = zf_graph_new_from_graphdef(s->gd, &s->graph);
    if (zf_ok(st)) {
        zf_graph_adopt_graphdef(s->graph, &s->gd);
    } else if (s->gd) {
        tensorflow__graph_def__free_unpacked(s->gd, NULL);
    }
    if (!zf_ok(st)) {
        zf_strmap_destroy(&s->plans);
        pthread_mutex_destroy(&s->build);
        free(s);
        return zf_status_prefix(st, "CreateSession");
    }
    *out = s;
    return ZF_STATUS_OK;
}

zf_status_t zf_master_create_session(zf_master_t *m, const Zflow__CreateSession *req,
                                     char **session)
{
    *session = NULL;
    zf__master_session_t *s = NULL;
    ZF_TRY(s_session_new(req, &s));
    char id[96];
    pthread_mutex_lock(&m->mu);
    snprintf(id, sizeof id, "%ssession-%" PRIu64 "-%08" PRIx64, m->id_prefix, ++m->next_session,
             zf_random_id() & 0xffffffffu);
    s->id = strdup(id);
    *session = strdup(id);
    zf_status_t st = ZF_STATUS_OK;
    if (!s->id || !*session || zf_strmap_insert(m->sessions, id, (uintptr_t)s, NULL) != 0) {
        st = zf_out_of_memory("master");
        free(*session);
        *session = NULL;
        zf__master_session_unref(m, &s);
    }
    pthread_mutex_unlock(&m->mu);
    if (zf_ok(st)) zf_log_info(S_LOG, "created %s", id);
    return st;
}

zf_status_t zf_master_close_session(zf_master_t *m, const char *session)
{
    pthread_mutex_lock(&m->mu);
    uintptr_t v = 0;
    if (!session || !zf_strmap_remove(m->sessions, session, &v)) {
        pthread_mutex_unlock(&m->mu);
        return zf_not_found("session '%s' not found", session ? session : "");
    }
    zf__master_session_t *s = (zf__master_session_t *)v;
    s->closed = true;
    zf__master_drop_plans(m, s, NULL);
    zf__master_session_unref(m, &s);
    pthread_mutex_unlock(&m->mu);
    zf_log_info(S_LOG, "closed %s", session);
    return ZF_STATUS_OK;
}

/* ---- envelopes ------------------------------------------------------------------ */

static Zflow__Status *s_status_proto(const zf_status_t *st)
{
    Zflow__Status *p = NULL;
    zf_status_t e = zf_status_to_proto(st, &p);
    zf_status_clear(&e);
    return p;
}

static zf_status_t s_handle_create(zf_master_t *m, const Zflow__Envelope *req, Zflow__Envelope *rep)
{
    Zflow__CreateSessionReply *r = malloc(sizeof *r);
    if (!r) return zf_out_of_memory("master");
    zflow__create_session_reply__init(r);
    rep->body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY;
    rep->create_session_reply = r;
    char *id = NULL;
    zf_status_t st = zf_master_create_session(m, req->create_session, &id);
    if (id) r->session = id;
    r->status = s_status_proto(&st);
    zf_status_clear(&st);
    return r->status ? ZF_STATUS_OK : zf_out_of_memory("master");
}

static zf_status_t s_handle_run(zf_master_t *m, const Zflow__Envelope *req, Zflow__Envelope *rep)
{
    Zflow__RunStepReply *r = NULL;
    zf_status_t st = zf_master_run_step(m, req->run_step, &r);
    return zf__master_run_reply(r, st, rep);
}

zf_status_t zf__master_run_reply(Zflow__RunStepReply *r, zf_status_t st, Zflow__Envelope *rep)
{
    if (!r) {
        r = malloc(sizeof *r);
        if (!r) {
            zf_status_clear(&st);
            return zf_out_of_memory("master");
        }
        zflow__run_step_reply__init(r);
    }
    rep->body_case = ZFLOW__ENVELOPE__BODY_RUN_STEP_REPLY;
    rep->run_step_reply = r;
    if (!zf_ok(st)) {
        if (r->status) zflow__status__free_unpacked(r->status, NULL);
        r->status = s_status_proto(&st);
        if (!r->status) {
            zf_status_clear(&st);
            return zf_out_of_memory("master");
        }
    }
    zf_status_clear(&st);
    return ZF_STATUS_OK;
}

static zf_status_t s_handle_status(const zf_status_t *st, Zflow__Envelope *rep)
{
    Zflow__StatusReply *r = malloc(sizeof *r);
    if (!r) return zf_out_of_memory("master");
    zflow__status_reply__init(r);
    rep->body_case = ZFLOW__ENVELOPE__BODY_STATUS_REPLY;
    rep->status_reply = r;
    r->status = s_status_proto(st);
    return r->status ? ZF_STATUS_OK : zf_out_of_memory("master");
}

zf_status_t zf_master_handle(zf_master_t *m, const Zflow__Envelope *request,
                             Zflow__Envelope **reply)
{
    *reply = NULL;
    Zflow__Envelope *rep = malloc(sizeof *rep);
    if (!rep) return zf_out_of_memory("master");
    zflow__envelope__init(rep);
    rep->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    rep->request_id = request->request_id;
    zf_status_t st = ZF_STATUS_OK, res = ZF_STATUS_OK;
    switch (request->body_case) {
    case ZFLOW__ENVELOPE__BODY_CREATE_SESSION: st = s_handle_create(m, request, rep); break;
    case ZFLOW__ENVELOPE__BODY_RUN_STEP: st = s_handle_run(m, request, rep); break;
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION:
        res = zf_master_close_session(m, request->close_session->session);
        st = s_handle_status(&res, rep);
        break;
    default:
        res = zf_unimplemented("the scheduler does not serve message body %d",
                               (int)request->body_case);
        st = s_handle_status(&res, rep);
        break;
    }
    zf_status_clear(&res);
    if (!zf_ok(st)) {
        zflow__envelope__free_unpacked(rep, NULL);
        return st;
    }
    *reply = rep;
    return ZF_STATUS_OK;
}
