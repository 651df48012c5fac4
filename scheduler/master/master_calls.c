/* The master's link to its executors: the device table's lookup, the calls
 * in flight (each a request whose reply zf_master_deliver() hands back),
 * one-way sends, and deadlines. The lowest part of the master: everything
 * else in scheduler/master/ builds on it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/transport.h"
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

/* ---- devices ----------------------------------------------------------------- */

zf__master_device_t *zf__master_find_device(zf_master_t *m, const char *name)
{
    for (int i = 0; i < m->n_devices; i++)
        if (strcmp(m->devices[i]->name, name) == 0) return m->devices[i];
    return NULL;
}

/* Fails the calls in flight to device with UNAVAILABLE. Under m->mu. */
void zf__master_fail_calls(zf_master_t *m, const char *device, const char *reason)
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

/* The status a reply carries: the call's own failure, a StatusReply's, or
 * the expected body's status field. */
zf_status_t zf__master_reply_status(const zf__master_call_t *c, Zflow__Envelope__BodyCase want)
{
    if (!c->reply)
        return zf_status_new(c->status.code ? c->status.code : ZF_INTERNAL, "%s",
                             zf_status_msg(&c->status));
    const Zflow__Envelope *r = c->reply;
    if (r->body_case == ZFLOW__ENVELOPE__BODY_STATUS_REPLY)
        return zf_status_from_proto(r->status_reply->status);
    if (r->body_case != want)
        return zf_internal("executor %s answered with message body %d instead of %d", c->device,
                           (int)r->body_case, (int)want);
    if (want == ZFLOW__ENVELOPE__BODY_REGISTER_GRAPH_REPLY)
        return zf_status_from_proto(r->register_graph_reply->status);
    return zf_status_from_proto(r->run_graph_reply->status);
}

/* Prefixes an executor's error with its device unless it names it. */
zf_status_t zf__master_with_device(zf_status_t st, const char *device)
{
    if (zf_ok(st) || strstr(zf_status_msg(&st), device)) return st;
    return zf_status_prefix(st, "%s", device);
}

/* ---- envelopes ------------------------------------------------------------------ */

Zflow__Status *zf__master_status_proto(const zf_status_t *st)
{
    Zflow__Status *p = NULL;
    zf_status_t e = zf_status_to_proto(st, &p);
    zf_status_clear(&e);
    return p;
}
