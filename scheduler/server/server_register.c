/* The scheduler's registration with the broker: its id, a fresh one when
 * the broker says another scheduler has it before the first success (the
 * same one, later, after it), the broker's listing of executors, and
 * registering again with a broker that restarted
 * (scheduler/server/server_internal.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/random.h"
#include "scheduler/server/server_internal.h"

#define S_LOG ZF__SCHED_SRV_LOG

void zf__sched_srv_pick_id(zf_sched_server_t *srv)
{
    char id[sizeof srv->sched_id];
    do {
        snprintf(id, sizeof id, "%08" PRIx64, zf_random_id() & 0xffffffffu);
    } while (strcmp(id, srv->sched_id) == 0);
    memcpy(srv->sched_id, id, sizeof id);
    if (!srv->master) return;
    char prefix[sizeof id + 1];
    snprintf(prefix, sizeof prefix, "%s/", id);
    zf_master_set_id_prefix(srv->master, prefix);
}

zf_status_t zf__sched_srv_send_register(zf_sched_server_t *srv)
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

static int64_t s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Schedules the next RegisterScheduler with the same id, each wait twice
 * the last, up to ZF_SCHED_REREGISTER_MAX_MS; returns the wait. */
static int s_schedule_reregister(zf_sched_server_t *srv)
{
    int wait = srv->reregister_wait_ms > 0 ? srv->reregister_wait_ms : ZF_SCHED_REREGISTER_MIN_MS;
    srv->reregister_wait_ms =
        wait < ZF_SCHED_REREGISTER_MAX_MS / 2 ? wait * 2 : ZF_SCHED_REREGISTER_MAX_MS;
    srv->reregister_at_ms = s_now_ms() + wait;
    return wait;
}

/* The registered id refused (st, taken over), most likely because the
 * broker has not yet seen our old connection close: the sessions and jobs
 * made carry the id, so it is kept and registered again later. */
static void s_refused_again(zf_sched_server_t *srv, zf_status_t st)
{
    int wait = s_schedule_reregister(srv);
    if (srv->refusals++ % ZF_SCHED_REREGISTER_LOG_EVERY == 0)
        zf_log_warn(S_LOG,
                    "the broker at %s refused scheduler id '%s' again (%s; %d refusals so far); "
                    "registering again with the same id in %d ms",
                    srv->broker_endpoint, srv->sched_id, zf_status_msg(&st), srv->refusals, wait);
    zf_status_clear(&st);
}

/* Sends the registration again; a failure to send is retried after the
 * growing pause. */
static void s_register_again(zf_sched_server_t *srv)
{
    zf_status_t st = zf__sched_srv_send_register(srv);
    if (!zf_ok(st)) {
        int wait = s_schedule_reregister(srv);
        zf_log_warn(S_LOG, "cannot register again: %s; trying again in %d ms", zf_status_msg(&st),
                    wait);
    }
    zf_status_clear(&st);
}

void zf__sched_srv_register_tick(zf_sched_server_t *srv)
{
    if (srv->reregister_at_ms == 0 || s_now_ms() < srv->reregister_at_ms) return;
    srv->reregister_at_ms = 0;
    s_register_again(srv);
}

/* Before the first success, an id another live scheduler has is replaced
 * by a fresh one and registered again, up to ZF_SCHED_ID_TRIES ids; after
 * it, the same id is registered again later. Any other refusal, or the
 * last, is kept in register_status. */
void zf__sched_srv_on_register_refused(zf_sched_server_t *srv, zf_status_t st)
{
    if (st.code == ZF_ALREADY_EXISTS && srv->registered) {
        s_refused_again(srv, st);
        return;
    }
    if (st.code == ZF_ALREADY_EXISTS && srv->id_tries < ZF_SCHED_ID_TRIES) {
        char taken[sizeof srv->sched_id];
        memcpy(taken, srv->sched_id, sizeof taken);
        zf__sched_srv_pick_id(srv);
        srv->id_tries++;
        zf_log_warn(S_LOG, "scheduler id '%s' is taken (%s); registering as '%s'", taken,
                    zf_status_msg(&st), srv->sched_id);
        zf_status_clear(&st);
        st = zf__sched_srv_send_register(srv);
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

void zf__sched_srv_on_register_reply(zf_sched_server_t *srv, const Zflow__RegisterSchedulerReply *r)
{
    zf_status_t st = zf_status_from_proto(r->status);
    if (!zf_ok(st)) {
        zf__sched_srv_on_register_refused(srv, st);
        return;
    }
    if (srv->registered) { /* a new broker: its listing replaces what we knew */
        zf_master_retain_devices(srv->master, r->executors, r->n_executors,
                                 "the broker no longer lists it");
        zf_log_info(S_LOG, "registered again with the broker at %s as '%s' (%zu executors)",
                    srv->broker_endpoint, srv->sched_id, r->n_executors);
        if (srv->refusals > 0)
            zf_log_info(S_LOG, "scheduler id '%s' accepted after %d refusals", srv->sched_id,
                        srv->refusals);
    }
    srv->reregister_at_ms = 0;
    srv->reregister_wait_ms = 0;
    srv->refusals = 0;
    for (size_t i = 0; i < r->n_executors; i++) {
        zf_status_t e = zf_master_device_joined(srv->master, r->executors[i]);
        if (!zf_ok(e)) zf_log_warn(S_LOG, "ignored an executor: %s", zf_status_msg(&e));
        zf_status_clear(&e);
    }
    srv->registered = true;
}

/* A connect event: a connection after the first one reaches a broker that
 * may have restarted and forgotten us, so we register again. */
void zf__sched_srv_serve_monitor(zf_sched_server_t *srv)
{
    uint8_t ev[8] = {0};
    int n = zmq_recv(zf_socket_handle(srv->monitor), ev, sizeof ev, ZMQ_DONTWAIT);
    if (n < 0) return;
    zf_socket_drain(srv->monitor);
    uint16_t event = 0; /* libzmq writes the event number in host order */
    memcpy(&event, ev, sizeof event);
    if (event != ZMQ_EVENT_CONNECTED || ++srv->connects == 1 || !srv->registered) return;
    srv->id_tries = 1;
    srv->reregister_at_ms = 0; /* the new connection registers now; the wait keeps growing */
    s_register_again(srv);
}
