/* Client requests through the broker: routing each to a scheduler, the
 * table of those not answered yet, each client's count of them, and the
 * replies passed back. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "common/log.h"

/* Client records kept for reuse, so that a client with one request at a
 * time does not cost an allocation per request. */
#define S_SPARE_CLIENTS 1024

/* ---- clients and their requests in flight ----------------------------------- */

zf_status_t zf__broker_requests_init(zf_broker_t *b)
{
    b->clients = zf_strmap_new(0, 0);
    if (!b->clients) return zf_out_of_memory("broker: the client table");
    return zf_pending_new(&b->pending);
}

void zf__broker_requests_free(zf_broker_t *b)
{
    size_t iter = 0;
    uintptr_t v = 0;
    while (b->clients && zf_strmap_next(b->clients, &iter, NULL, NULL, &v)) free((void *)v);
    zf_strmap_destroy(&b->clients);
    for (zf__broker_client_t *c; (c = b->spare_clients);) {
        b->spare_clients = c->next;
        free(c);
    }
    b->n_spare_clients = 0;
    zf_pending_destroy(&b->pending);
}

static zf__broker_client_t *s_client_find(const zf_broker_t *b, const zf__broker_ident_t *id)
{
    uintptr_t v = 0;
    return zf_strmap_get_n(b->clients, (const char *)id->id, id->len, &v) ? (zf__broker_client_t *)v
                                                                          : NULL;
}

/* A record for client id, a spare one when there is one, in the client
 * table with nothing in flight; NULL when out of memory. */
static zf__broker_client_t *s_client_new(zf_broker_t *b, const zf__broker_ident_t *id)
{
    zf__broker_client_t *c = b->spare_clients;
    if (c) {
        b->spare_clients = c->next;
        b->n_spare_clients--;
    } else if (!(c = malloc(sizeof *c))) {
        return NULL;
    }
    c->id = *id;
    c->in_flight = 0;
    c->fd = -1;
    c->next = NULL;
    if (zf_strmap_insert_n(b->clients, (const char *)c->id.id, c->id.len, (uintptr_t)c, NULL)) {
        free(c);
        return NULL;
    }
    return c;
}

/* Takes c out of the client table and keeps or frees its record. */
static void s_client_release(zf_broker_t *b, zf__broker_client_t *c)
{
    zf_strmap_remove_n(b->clients, (const char *)c->id.id, c->id.len, NULL);
    if (b->n_spare_clients >= S_SPARE_CLIENTS) {
        free(c);
        return;
    }
    c->next = b->spare_clients;
    b->spare_clients = c;
    b->n_spare_clients++;
}

/* RESOURCE_EXHAUSTED for a `what` past the broker-wide limit, or OK. */
static zf_status_t s_check_broker_limit(const zf_broker_t *b, const char *what)
{
    int n = zf_pending_size(b->pending);
    if (n < b->max_requests) return ZF_STATUS_OK;
    return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                         "%s refused: the broker already has %d requests in flight from all its "
                         "clients together, its broker-wide limit (--max-requests %d); send more "
                         "once replies come back",
                         what, n, b->max_requests);
}

/* Counts one more request (a `what`) in flight for client id, whose
 * message came on b->msg_fd, into *out. RESOURCE_EXHAUSTED when the client
 * or the broker is at its limit. */
static zf_status_t s_client_add(zf_broker_t *b, const zf__broker_ident_t *id, const char *what,
                                zf__broker_client_t **out)
{
    zf__broker_client_t *c = s_client_find(b, id);
    if (c && c->in_flight >= b->max_client_requests)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "%s refused: this client already has %d requests in flight through "
                             "the broker, the most one client may have (--max-client-requests "
                             "%d); send more once replies come back",
                             what, c->in_flight, b->max_client_requests);
    if (!c || c->fd != b->msg_fd || zf_pending_size(b->pending) >= b->max_requests) {
        /* Disconnects that happened before this message apply first, so
         * that a closed connection's fd, now this one's, forgets nobody,
         * and requests nobody can receive do not hold the broker's room. */
        zf__broker_serve_monitor(b);
        c = s_client_find(b, id);
    }
    ZF_TRY(s_check_broker_limit(b, what));
    if (!c && !(c = s_client_new(b, id))) return zf_out_of_memory("broker: the client table");
    c->fd = b->msg_fd;
    c->in_flight++;
    *out = c;
    return ZF_STATUS_OK;
}

void zf__broker_client_done(zf_broker_t *b, zf__broker_client_t *c)
{
    if (--c->in_flight > 0) return;
    s_client_release(b, c);
}

/* The registered scheduler with this serial, or -1. */
static int s_sched_by_serial(const zf_broker_t *b, uint64_t serial)
{
    for (int i = 0; i < b->n_scheds; i++)
        if (b->scheds[i].serial == serial) return i;
    return -1;
}

/* Forgets client c and its requests in flight, which nobody can receive
 * any more: a late reply to one is dropped. */
static void s_client_forget(zf_broker_t *b, zf__broker_client_t *c)
{
    int n = 0;
    for (int k = 0; k < zf_pending_size(b->pending);) {
        const zf_pending_req_t *p = zf_pending_at(b->pending, k);
        if (p->client != (uintptr_t)c) {
            k++;
            continue;
        }
        int i = s_sched_by_serial(b, p->sched);
        if (i >= 0) b->scheds[i].outstanding--;
        zf_pending_remove_at(b->pending, k);
        n++;
    }
    char hex[40];
    zf_log_info(ZF__BROKER_LOG, "client %s disconnected; forgot its %d requests in flight",
                zf__broker_ident_str(&c->id, hex, sizeof hex), n);
    s_client_release(b, c);
}

/* Forgets the clients whose connection fd closed. */
void zf__broker_clients_disconnected(zf_broker_t *b, int fd)
{
    size_t iter = 0;
    uintptr_t v = 0;
    while (zf_strmap_next(b->clients, &iter, NULL, NULL, &v)) {
        if (((zf__broker_client_t *)v)->fd != fd) continue;
        s_client_forget(b, (zf__broker_client_t *)v);
        iter = 0; /* the map changed under the iteration */
    }
}

/* ---- client requests and scheduler replies ------------------------------------- */

/* The scheduler a request must go to: the one whose id prefixes the
 * session or job id it names ("<scheduler id>/..."), or the least busy one
 * for a new session or job and for ids without a prefix. -1 with *st set
 * when the owner is not registered. */
static int s_route_request(zf_broker_t *b, const zf__broker_msg_t *m, zf_status_t *st)
{
    const char *id = m->owned, *slash = id ? strchr(id, '/') : NULL;
    const char *what =
        m->body == ZFLOW__ENVELOPE__BODY_WAIT_JOB || m->body == ZFLOW__ENVELOPE__BODY_POLL_JOB
            ? "job"
            : "session";
    if (!slash) return zf__broker_sched_pick(b);
    char sid[sizeof b->scheds[0].sid];
    size_t n = (size_t)(slash - id);
    snprintf(sid, sizeof sid, "%.*s", (int)(n < sizeof sid ? n : sizeof sid - 1), id);
    int i = n < sizeof sid ? zf__broker_sched_find_sid(b, sid) : -1;
    if (i < 0)
        *st = zf_status_new(ZF_UNAVAILABLE,
                            "%s '%s' is held by scheduler '%s', which is gone (not registered "
                            "with the broker)",
                            what, id, sid);
    return i;
}

/* Hands m from client to the scheduler that holds what it names, or the
 * least busy one; schedulers found gone on the way are dropped (and the
 * next one is tried when any may serve). A client at its limit of requests
 * in flight, or one past the broker-wide limit, is answered at once. */
void zf__broker_forward_request(zf_broker_t *b, const zf__broker_ident_t *client,
                                const zf__broker_msg_t *m)
{
    const char *name = zf__broker_case_name(m->body);
    zf__broker_client_t *c = NULL;
    /* Room first: once the request is sent, recording it must not fail. */
    zf_status_t s = zf_pending_reserve(b->pending, zf_pending_size(b->pending) + 1);
    if (zf_ok(s)) s = s_client_add(b, client, name, &c);
    if (!zf_ok(s)) {
        char hex[40];
        zf_log_info(ZF__BROKER_LOG, "client %s: %s", zf__broker_ident_str(client, hex, sizeof hex),
                    zf_status_msg(&s));
        zf__broker_send_status(b, client, m->request_id, &s);
        return;
    }
    for (int i; (i = s_route_request(b, m, &s)) >= 0;) {
        zf_route_t r = zf__broker_route_to(&b->scheds[i].id);
        s = zf_route_push(&r, client->id, client->len);
        if (zf_ok(s)) s = zf__broker_send_msg(b, &r, m);
        if (zf_ok(s)) {
            zf_pending_req_t p = {(uintptr_t)c, b->scheds[i].serial, m->request_id};
            zf_pending_add(b->pending, &p);
            b->scheds[i].outstanding++;
            return;
        }
        if (s.code != ZF_UNAVAILABLE) {
            s = zf_status_prefix(s, "cannot pass %s to a scheduler", name);
            break;
        }
        zf_status_clear(&s);
        zf__broker_sched_drop(b, i, "disconnected"); /* c stays: this request still counts */
    }
    if (zf_ok(s)) s = zf_status_new(ZF_UNAVAILABLE, "no scheduler is registered");
    zf__broker_client_done(b, c);
    zf__broker_send_status(b, client, m->request_id, &s);
}

/* [scheduler][client][envelope]: a reply for a client. */
void zf__broker_on_scheduler_reply(zf_broker_t *b, const zf_route_t *route,
                                   const zf__broker_msg_t *m)
{
    zf__broker_ident_t sched = zf__broker_ident_at(route, 0),
                       client = zf__broker_ident_at(route, 1);
    int i = zf__broker_sched_find(b, &sched);
    if (i < 0) {
        zf_status_t st = zf_invalid_argument("a message with a client routing frame from a peer "
                                             "that is not a registered scheduler");
        zf__broker_send_status(b, &sched, m->request_id, &st);
        return;
    }
    if (zf__broker_jobs_is_self(&client)) { /* the broker's own job traffic, always decoded */
        if (m->env) zf__broker_jobs_on_reply(b, i, (Zflow__Envelope *)m->env); /* s_serve_one's */
        return;
    }
    zf__broker_client_t *c = s_client_find(b, &client);
    zf_pending_req_t key = {(uintptr_t)c, b->scheds[i].serial, m->request_id};
    int k = c ? zf_pending_find(b->pending, &key) : -1;
    if (k < 0) {
        zf_log_info(ZF__BROKER_LOG, "dropping a %s for request %" PRIu64 " that nobody waits for",
                    zf__broker_case_name(m->body), m->request_id);
        return;
    }
    zf_pending_remove_at(b->pending, k);
    b->scheds[i].outstanding--;
    zf__broker_client_done(b, c);
    zf_route_t to = zf__broker_route_to(&client);
    zf_status_t s = zf__broker_send_msg(b, &to, m);
    if (!zf_ok(s)) {
        char hex[40];
        zf_log_info(ZF__BROKER_LOG, "cannot send %s to peer %s: %s", zf__broker_case_name(m->body),
                    zf__broker_ident_str(&client, hex, sizeof hex), zf_status_msg(&s));
    }
    zf_status_clear(&s); /* a client that left does not disturb anyone */
}

bool zf__broker_is_client_request(Zflow__Envelope__BodyCase body)
{
    switch (body) {
    case ZFLOW__ENVELOPE__BODY_CREATE_SESSION:
    case ZFLOW__ENVELOPE__BODY_RUN_STEP:
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION:
    case ZFLOW__ENVELOPE__BODY_EXTEND_SESSION:
    case ZFLOW__ENVELOPE__BODY_CANCEL_STEP:
    case ZFLOW__ENVELOPE__BODY_CANCEL_JOB:
    case ZFLOW__ENVELOPE__BODY_SUBMIT_JOB:
    case ZFLOW__ENVELOPE__BODY_POLL_JOB:
    case ZFLOW__ENVELOPE__BODY_WAIT_JOB: return true;
    default: return false;
    }
}
