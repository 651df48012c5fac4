/* The master's lifecycle, its device set (executors joining, dying,
 * restarting) and the envelope-level entry point (scheduler/master/master.h).
 * The other parts are listed in master_internal.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/proto_util.h"
#include "common/transport.h"
#include "common/kernel_def.h"
#include "scheduler/master/master_internal.h"

#define S_LOG "master"

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
    m->sessions = zf_strmap_new(8, ZF_STRMAP_OWN_KEYS);
    m->jobs = zf_strmap_new(8, ZF_STRMAP_OWN_KEYS);
    m->per_client = zf_strmap_new(8, ZF_STRMAP_OWN_KEYS);
    if (!m->sessions || !m->jobs || !m->per_client) {
        zf_master_destroy(&m);
        return zf_out_of_memory("master");
    }
    zf_master_set_limits(m, NULL);
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
        zf__master_session_free(m, (zf__master_session_t *)v);
    zf_strmap_destroy(&m->sessions);
    zf_strmap_destroy(&m->per_client);
    for (int i = 0; i < ZF__MASTER_IDLE_IDS; i++) free(m->idle_closed[i]);
    pthread_mutex_unlock(&m->mu);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
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
    zf__master_fail_calls(m, d->name, reason);
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

static zf_status_t s_handle_create(zf_master_t *m, const Zflow__Envelope *req, const char *client,
                                   Zflow__Envelope *rep)
{
    Zflow__CreateSessionReply *r = malloc(sizeof *r);
    if (!r) return zf_out_of_memory("master");
    zflow__create_session_reply__init(r);
    rep->body_case = ZFLOW__ENVELOPE__BODY_CREATE_SESSION_REPLY;
    rep->create_session_reply = r;
    char *id = NULL;
    zf_status_t st = zf_master_create_session_for(m, req->create_session, client, &id);
    if (id) r->session = id;
    r->status = zf__master_status_proto(&st);
    zf_status_clear(&st);
    return r->status ? ZF_STATUS_OK : zf_out_of_memory("master");
}

static zf_status_t s_handle_run(zf_master_t *m, const Zflow__Envelope *req, Zflow__Envelope *rep)
{
    Zflow__RunStepReply *r = NULL;
    zf_status_t st = zf_master_run_step(m, req->run_step, &r);
    return zf__master_run_reply(r, st, rep);
}

static zf_status_t s_handle_status(const zf_status_t *st, Zflow__Envelope *rep)
{
    Zflow__StatusReply *r = malloc(sizeof *r);
    if (!r) return zf_out_of_memory("master");
    zflow__status_reply__init(r);
    rep->body_case = ZFLOW__ENVELOPE__BODY_STATUS_REPLY;
    rep->status_reply = r;
    r->status = zf__master_status_proto(st);
    return r->status ? ZF_STATUS_OK : zf_out_of_memory("master");
}

static zf_status_t s_handle_extend(zf_master_t *m, const Zflow__Envelope *req, Zflow__Envelope *rep)
{
    Zflow__ExtendSessionReply *r = malloc(sizeof *r);
    if (!r) return zf_out_of_memory("master");
    zflow__extend_session_reply__init(r);
    rep->body_case = ZFLOW__ENVELOPE__BODY_EXTEND_SESSION_REPLY;
    rep->extend_session_reply = r;
    zf_status_t st = zf_master_extend_session(m, req->extend_session, &r->new_graph_version);
    r->status = zf__master_status_proto(&st);
    zf_status_clear(&st);
    return r->status ? ZF_STATUS_OK : zf_out_of_memory("master");
}

zf_status_t zf_master_handle(zf_master_t *m, const Zflow__Envelope *request,
                             Zflow__Envelope **reply)
{
    return zf_master_handle_from(m, request, "", reply);
}

zf_status_t zf_master_handle_from(zf_master_t *m, const Zflow__Envelope *request,
                                  const char *client, Zflow__Envelope **reply)
{
    *reply = NULL;
    Zflow__Envelope *rep = malloc(sizeof *rep);
    if (!rep) return zf_out_of_memory("master");
    zflow__envelope__init(rep);
    rep->version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    rep->request_id = request->request_id;
    zf_status_t st = ZF_STATUS_OK, res = ZF_STATUS_OK;
    switch (request->body_case) {
    case ZFLOW__ENVELOPE__BODY_CREATE_SESSION: st = s_handle_create(m, request, client, rep); break;
    case ZFLOW__ENVELOPE__BODY_RUN_STEP: st = s_handle_run(m, request, rep); break;
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION:
        res = zf_master_close_session(m, request->close_session->session);
        st = s_handle_status(&res, rep);
        break;
    case ZFLOW__ENVELOPE__BODY_EXTEND_SESSION: st = s_handle_extend(m, request, rep); break;
    case ZFLOW__ENVELOPE__BODY_CANCEL_STEP:
        res = zf_master_cancel_steps(m, request->cancel_step->session, NULL);
        st = s_handle_status(&res, rep);
        break;
    case ZFLOW__ENVELOPE__BODY_CANCEL_JOB:
        res = zf_master_job_cancel(m, request->cancel_job->job_id);
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
