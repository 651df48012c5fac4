/* The broker's side of schedulers and executors: the registered schedulers
 * (registration, picking one, dropping one that is gone) and the executor
 * registry's traffic (registration, heartbeats, listings, device events). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "common/device_name.h"
#include "common/log.h"

/* ---- schedulers and their outstanding requests ---------------------------- */

int zf__broker_sched_find(const zf_broker_t *b, const zf__broker_ident_t *id)
{
    for (int i = 0; i < b->n_scheds; i++)
        if (zf__broker_ident_equal(&b->scheds[i].id, id)) return i;
    return -1;
}

/* Drops scheduler i; each request it held is answered UNAVAILABLE. */
void zf__broker_sched_drop(zf_broker_t *b, int i, const char *why)
{
    zf__broker_sched_t gone = b->scheds[i];
    char hex[40];
    zf_log_warn(ZF__BROKER_LOG, "scheduler %s dropped (%s); failing its %d outstanding requests",
                zf__broker_ident_str(&gone.id, hex, sizeof hex), why, gone.outstanding);
    memmove(&b->scheds[i], &b->scheds[i + 1], (size_t)(b->n_scheds - i - 1) * sizeof *b->scheds);
    b->n_scheds--;
    for (int k = 0; k < zf_pending_size(b->pending);) {
        zf_pending_req_t p = *zf_pending_at(b->pending, k);
        if (p.sched != gone.serial) {
            k++;
            continue;
        }
        zf_pending_remove_at(b->pending, k);
        zf__broker_client_t *c = (zf__broker_client_t *)p.client;
        zf_status_t st = zf_status_new(ZF_UNAVAILABLE,
                                       "the scheduler serving this request is gone "
                                       "(%s)",
                                       why);
        zf__broker_send_status(b, &c->id, p.request_id, &st);
        zf__broker_client_done(b, c); /* after the send: this may let c's record go */
    }
    zf__broker_jobs_sched_gone(b, gone.serial, gone.sid, why);
}

/* The scheduler with the fewest outstanding requests, or -1; ties go round
 * robin, so that new sessions and jobs spread over idle schedulers. */
int zf__broker_sched_pick(zf_broker_t *b)
{
    int best = -1;
    for (int k = 1; k <= b->n_scheds; k++) {
        int i = (b->last_pick + k) % b->n_scheds;
        if (best < 0 || b->scheds[i].outstanding < b->scheds[best].outstanding) best = i;
    }
    if (best >= 0) b->last_pick = best;
    return best;
}

/* ---- device events ---------------------------------------------------------- */

void zf__broker_on_registry_event(void *arg, zf_registry_event_t event,
                                  const Zflow__ExecutorInfo *info, const char *reason)
{
    zf_broker_t *b = arg;
    const char *name = info->device->name;
    if (event == ZF_REGISTRY_JOINED)
        zf_log_info(ZF__BROKER_LOG, "executor %s joined (control %s)", name,
                    info->control_endpoint);
    else
        zf_log_warn(ZF__BROKER_LOG, "executor %s died: %s", name, reason);
    Zflow__DeviceEvent ev = ZFLOW__DEVICE_EVENT__INIT;
    ev.kind = event == ZF_REGISTRY_JOINED ? ZFLOW__DEVICE_EVENT__KIND__JOINED
                                          : ZFLOW__DEVICE_EVENT__KIND__DIED;
    ev.executor = (Zflow__ExecutorInfo *)info; /* only read while packing */
    ev.reason = (char *)reason;
    Zflow__Envelope env = zf__broker_envelope(0);
    env.body_case = ZFLOW__ENVELOPE__BODY_DEVICE_EVENT;
    env.device_event = &ev;
    for (int i = 0; i < b->n_scheds;) {
        zf_status_t s = zf__broker_send(b, &b->scheds[i].id, &env);
        bool gone = s.code == ZF_UNAVAILABLE;
        zf_status_clear(&s);
        if (gone)
            zf__broker_sched_drop(b, i, "disconnected");
        else
            i++;
    }
}

/* ---- requests the broker serves itself ----------------------------------------- */

void zf__broker_on_register_executor(zf_broker_t *b, const zf__broker_ident_t *from,
                                     const Zflow__Envelope *req)
{
    char name[ZF_DEVICE_NAME_MAX] = "";
    zf_status_t st = zf_registry_register(b->reg, req->register_executor->info, name, sizeof name);
    if (zf_ok(st)) zf_registry_set_conn(b->reg, name, b->msg_fd);
    if (!zf_ok(st)) {
        zf_log_warn(ZF__BROKER_LOG, "RegisterExecutor refused: %s", zf_status_msg(&st));
        st = zf_status_prefix(st, "RegisterExecutor");
    }
    Zflow__RegisterExecutorReply reply = ZFLOW__REGISTER_EXECUTOR_REPLY__INIT;
    zf_status_t s = zf_status_to_proto(&st, &reply.status);
    zf_status_clear(&st);
    if (!zf_ok(s)) {
        zf__broker_send_status(b, from, req->request_id, &s);
        return;
    }
    reply.device_name = name;
    reply.heartbeat_ms = (uint32_t)b->heartbeat_ms;
    reply.heartbeat_misses = (uint32_t)b->heartbeat_misses;
    Zflow__Envelope env = zf__broker_envelope(req->request_id);
    env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_EXECUTOR_REPLY;
    env.register_executor_reply = &reply;
    zf_status_t sent = zf__broker_send(b, from, &env);
    zf_status_clear(&sent);
    zflow__status__free_unpacked(reply.status, NULL);
}

void zf__broker_on_deregister_executor(zf_broker_t *b, const zf__broker_ident_t *from,
                                       const Zflow__Envelope *req)
{
    const Zflow__DeregisterExecutor *d = req->deregister_executor;
    zf_status_t st = zf_registry_deregister(b->reg, d->device_name, d->incarnation, b->msg_fd);
    zf__broker_send_status(b, from, req->request_id, &st);
    zf_status_clear(&st);
}

void zf__broker_on_heartbeat(zf_broker_t *b, const zf__broker_ident_t *from,
                             const Zflow__Envelope *req)
{
    const Zflow__Heartbeat *hb = req->heartbeat;
    zf_status_t st = zf_registry_heartbeat(b->reg, hb->device_name, hb->incarnation, hb->load);
    if (zf_ok(st)) zf_registry_set_conn(b->reg, hb->device_name, b->msg_fd);
    Zflow__HeartbeatReply reply = ZFLOW__HEARTBEAT_REPLY__INIT;
    zf_status_t s = zf_status_to_proto(&st, &reply.status);
    zf_status_clear(&st);
    if (!zf_ok(s)) {
        zf__broker_send_status(b, from, req->request_id, &s);
        return;
    }
    Zflow__Envelope env = zf__broker_envelope(req->request_id);
    env.body_case = ZFLOW__ENVELOPE__BODY_HEARTBEAT_REPLY;
    env.heartbeat_reply = &reply;
    zf_status_t sent = zf__broker_send(b, from, &env);
    zf_status_clear(&sent);
    zflow__status__free_unpacked(reply.status, NULL);
}

/* Replies to a RegisterScheduler or a ListExecutors with the live executors. */
/* Empties what a client has no use for: where executors listen and which
 * incarnation runs (the list owns its strings). */
static void s_redact(Zflow__ExecutorInfo **list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Zflow__ExecutorInfo *e = list[i];
        char **fields[] = {&e->host_id, &e->control_endpoint, &e->rendezvous_endpoint};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            if (*fields[f] != protobuf_c_empty_string) free(*fields[f]);
            *fields[f] = (char *)protobuf_c_empty_string;
        }
        if (e->device) e->device->incarnation = 0;
    }
}

void zf__broker_send_listing(zf_broker_t *b, const zf__broker_ident_t *from, uint64_t request_id,
                             bool for_scheduler, bool redacted)
{
    Zflow__ExecutorInfo **list = NULL;
    size_t n = 0;
    zf_status_t s = zf_registry_list(b->reg, &list, &n);
    if (!zf_ok(s)) {
        zf__broker_send_status(b, from, request_id, &s);
        return;
    }
    if (redacted) s_redact(list, n);
    Zflow__Envelope env = zf__broker_envelope(request_id);
    Zflow__RegisterSchedulerReply sched = ZFLOW__REGISTER_SCHEDULER_REPLY__INIT;
    Zflow__ListExecutorsReply listing = ZFLOW__LIST_EXECUTORS_REPLY__INIT;
    if (for_scheduler) {
        sched.executors = list;
        sched.n_executors = n;
        env.body_case = ZFLOW__ENVELOPE__BODY_REGISTER_SCHEDULER_REPLY;
        env.register_scheduler_reply = &sched;
    } else {
        listing.executors = list;
        listing.n_executors = n;
        env.body_case = ZFLOW__ENVELOPE__BODY_LIST_EXECUTORS_REPLY;
        env.list_executors_reply = &listing;
    }
    s = zf__broker_send(b, from, &env);
    zf_status_clear(&s);
    zf_registry_list_free(list, n);
}

/* The registered scheduler whose id is sid, or -1. */
int zf__broker_sched_find_sid(const zf_broker_t *b, const char *sid)
{
    for (int i = 0; sid[0] && i < b->n_scheds; i++)
        if (strcmp(b->scheds[i].sid, sid) == 0) return i;
    return -1;
}

/* A scheduler id is short and names nothing else: it is routed on. */
static zf_status_t s_check_sid(const zf_broker_t *b, const zf__broker_ident_t *from,
                               const char *sid)
{
    if (strlen(sid) >= sizeof b->scheds[0].sid || strchr(sid, '/'))
        return zf_invalid_argument("RegisterScheduler: scheduler id '%.40s' is longer than %zu "
                                   "bytes or holds a '/'",
                                   sid, sizeof b->scheds[0].sid - 1);
    int other = zf__broker_sched_find_sid(b, sid);
    if (other >= 0 && !zf__broker_ident_equal(&b->scheds[other].id, from))
        return zf_status_new(ZF_ALREADY_EXISTS, "RegisterScheduler: another scheduler has id '%s'",
                             sid);
    return ZF_STATUS_OK;
}

/* Registering again is harmless (a scheduler may repeat it as a keepalive)
 * and refreshes the connection a fixed routing id now arrives on. */
void zf__broker_on_register_scheduler(zf_broker_t *b, const zf__broker_ident_t *from,
                                      const Zflow__Envelope *req)
{
    const Zflow__RegisterScheduler *rs = req->register_scheduler;
    const char *sid = rs && rs->scheduler_id ? rs->scheduler_id : "";
    zf_status_t s = s_check_sid(b, from, sid);
    int known = zf__broker_sched_find(b, from);
    if (zf_ok(s) && known < 0)
        s = zf__broker_grow((void **)&b->scheds, &b->cap_scheds, b->n_scheds, sizeof *b->scheds);
    if (!zf_ok(s)) {
        zf__broker_send_status(b, from, req->request_id, &s);
        return;
    }
    if (known < 0) {
        known = b->n_scheds++;
        b->scheds[known] = (zf__broker_sched_t){*from, 0, b->msg_fd, "", ++b->sched_serial, 0};
        char hex[40];
        zf_log_info(ZF__BROKER_LOG, "scheduler %s (id '%s', clients at %s) registered (%d in all)",
                    zf__broker_ident_str(from, hex, sizeof hex), sid,
                    rs && rs->client_endpoint ? rs->client_endpoint : "-", b->n_scheds);
    }
    b->scheds[known].fd = b->msg_fd;
    snprintf(b->scheds[known].sid, sizeof b->scheds[known].sid, "%s", sid);
    zf__broker_send_listing(b, from, req->request_id, true, false);
}
