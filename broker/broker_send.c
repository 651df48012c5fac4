/* The broker's peers as routing identities, and the replies it sends them
 * on its ROUTER socket. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "common/log.h"

zf__broker_ident_t zf__broker_ident_at(const zf_route_t *route, int i)
{
    zf__broker_ident_t id = {route->len[i], {0}};
    memcpy(id.id, route->frame[i], id.len);
    return id;
}

bool zf__broker_ident_equal(const zf__broker_ident_t *a, const zf__broker_ident_t *b)
{
    return a->len == b->len && memcmp(a->id, b->id, a->len) == 0;
}

zf_route_t zf__broker_route_to(const zf__broker_ident_t *id)
{
    zf_route_t r;
    zf_route_clear(&r);
    zf_status_t s = zf_route_push(&r, id->id, id->len); /* cannot fail: one short frame */
    zf_status_clear(&s);
    return r;
}

const char *zf__broker_ident_str(const zf__broker_ident_t *id, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < id->len && i < 16 && used + 3 <= size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%02x", id->id[i]);
    return buf;
}

const char *zf__broker_case_name(Zflow__Envelope__BodyCase body)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&zflow__envelope__descriptor, (unsigned)body);
    return f ? f->name : "no body";
}

const char *zf__broker_body_name(const Zflow__Envelope *env)
{
    return zf__broker_case_name(env->body_case);
}

zf_status_t zf__broker_send_msg(zf_broker_t *b, const zf_route_t *route, const zf__broker_msg_t *m)
{
    return m->env ? zf_envelope_send(b->sock, route, m->env)
                  : zf_envelope_send_packed(b->sock, route, m->raw);
}

zf_status_t zf__broker_send(zf_broker_t *b, const zf__broker_ident_t *id,
                            const Zflow__Envelope *env)
{
    zf_route_t r = zf__broker_route_to(id);
    zf_status_t s = zf_envelope_send(b->sock, &r, env);
    if (!zf_ok(s)) {
        char hex[40];
        zf_log_info(ZF__BROKER_LOG, "cannot send %s to peer %s: %s", zf__broker_body_name(env),
                    zf__broker_ident_str(id, hex, sizeof hex), zf_status_msg(&s));
    }
    return s;
}

void zf__broker_send_status(zf_broker_t *b, const zf__broker_ident_t *id, uint64_t request_id,
                            zf_status_t *st)
{
    zf_route_t r = zf__broker_route_to(id);
    zf_status_t s = zf_envelope_send_status(b->sock, &r, request_id, st);
    if (!zf_ok(s)) {
        char hex[40];
        zf_log_info(ZF__BROKER_LOG, "cannot answer peer %s: %s",
                    zf__broker_ident_str(id, hex, sizeof hex), zf_status_msg(&s));
    }
    zf_status_clear(&s);
    zf_status_clear(st);
}

Zflow__Envelope zf__broker_envelope(uint64_t request_id)
{
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = request_id;
    return env;
}

zf_status_t zf__broker_grow(void **arr, int *cap, int n, size_t elem)
{
    if (n < *cap) return ZF_STATUS_OK;
    int ncap = *cap ? 2 * *cap : 8;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p) return zf_out_of_memory("broker bookkeeping");
    *arr = p;
    *cap = ncap;
    return ZF_STATUS_OK;
}
