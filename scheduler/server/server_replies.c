/* The scheduler's reply queue, which brings workers' replies to the thread
 * that owns the sockets, and the count of each direct client's requests in
 * flight with its cap (scheduler/server/server_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "scheduler/server/server_internal.h"

#define S_LOG ZF__SCHED_SRV_LOG

/* ---- replies ----------------------------------------------------------------- */

void zf__sched_srv_queue(zf_sched_server_t *srv, zf__sched_srv_reply_t *r)
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

void zf__sched_srv_queue_reply(zf_sched_server_t *srv, bool direct, const zf_route_t *route,
                               Zflow__Envelope *env)
{
    zf__sched_srv_reply_t *r = calloc(1, sizeof *r);
    if (!r) {
        zf_log_error(S_LOG, "out of memory: dropped the reply to request %llu",
                     (unsigned long long)env->request_id);
        zflow__envelope__free_unpacked(env, NULL);
        return;
    }
    r->direct = direct;
    r->route = *route;
    r->env = env;
    zf__sched_srv_queue(srv, r);
}

void zf__sched_srv_flush_replies(zf_sched_server_t *srv)
{
    char drain[64];
    while (read(srv->wake[0], drain, sizeof drain) > 0) {
    }
    pthread_mutex_lock(&srv->mu);
    zf__sched_srv_reply_t *r = srv->head;
    srv->head = srv->tail = NULL;
    pthread_mutex_unlock(&srv->mu);
    while (r) {
        zf__sched_srv_reply_t *next = r->next;
        zf_socket_t *sock = r->direct ? srv->clients : srv->broker;
        if (r->direct) zf__sched_srv_client_done(srv, &r->route);
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

void zf__sched_srv_drop_replies(zf_sched_server_t *srv)
{
    while (srv->head) {
        zf__sched_srv_reply_t *next = srv->head->next;
        if (srv->head->env) zflow__envelope__free_unpacked(srv->head->env, NULL);
        free(srv->head);
        srv->head = next;
    }
    srv->tail = NULL;
}

void zf__sched_srv_answer_on(zf_socket_t *sock, const zf_route_t *route, uint64_t request_id,
                             zf_status_t st)
{
    zf_status_t e = zf_envelope_send_status(sock, route, request_id, &st);
    if (!zf_ok(e)) zf_log_warn(S_LOG, "cannot answer a request: %s", zf_status_msg(&e));
    zf_status_clear(&e);
    zf_status_clear(&st);
}

/* ---- direct clients' requests in flight ------------------------------------------ */

static const char *s_body_name(const Zflow__Envelope *env)
{
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_CREATE_SESSION: return "CreateSession";
    case ZFLOW__ENVELOPE__BODY_RUN_STEP: return "RunStep";
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION: return "CloseSession";
    case ZFLOW__ENVELOPE__BODY_EXTEND_SESSION: return "ExtendSession";
    default: return "a request";
    }
}

zf_status_t zf__sched_srv_client_add(zf_sched_server_t *srv, const zf_route_t *route,
                                     const Zflow__Envelope *env)
{
    ZF_TRY(zf_route_authorize(route, ZF_ROLE_CLIENT, s_body_name(env)));
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

void zf__sched_srv_client_done(zf_sched_server_t *srv, const zf_route_t *route)
{
    const char *id = (const char *)route->frame[0];
    uintptr_t n = 0;
    if (!zf_strmap_get_n(srv->in_flight, id, route->len[0], &n)) return;
    if (n > 1)
        zf_strmap_put_n(srv->in_flight, id, route->len[0], n - 1); /* a replace: no allocation */
    else
        zf_strmap_remove_n(srv->in_flight, id, route->len[0], NULL);
}
