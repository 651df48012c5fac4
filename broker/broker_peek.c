/* The header of an envelope read from its wire bytes, so that a large
 * message the broker only passes on is never decoded on its loop thread
 * (broker/broker_internal.h, "messages passed on undecoded"). */
#include <stdio.h>
#include <string.h>

#include "broker/broker_internal.h"

/* Protobuf wire types. */
enum { S_VARINT = 0, S_I64 = 1, S_LEN = 2, S_I32 = 5 };

/* Reads a varint at *p (before end) into *v; false when malformed. */
static bool s_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t byte = *(*p)++;
        *v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) return true;
    }
    return false;
}

/* One field at *p: its number, wire type and, for a length-delimited one,
 * its bytes; *p moves past it. False when malformed. */
static bool s_field(const uint8_t **p, const uint8_t *end, uint32_t *number, uint64_t *value,
                    const uint8_t **data, size_t *len)
{
    uint64_t key = 0;
    if (!s_varint(p, end, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX) return false;
    *number = (uint32_t)(key >> 3);
    *data = NULL;
    *len = 0;
    switch (key & 7) {
    case S_VARINT: return s_varint(p, end, value);
    case S_I64:
    case S_I32: {
        size_t n = (key & 7) == S_I64 ? 8 : 4;
        if ((size_t)(end - *p) < n) return false;
        *p += n;
        return true;
    }
    case S_LEN:
        if (!s_varint(p, end, value) || *value > (uint64_t)(end - *p)) return false;
        *data = *p;
        *len = (size_t)*value;
        *p += *len;
        return true;
    default: return false;
    }
}

/* Whether the body names a session or job in its field 1. */
static bool s_names_owner(Zflow__Envelope__BodyCase body)
{
    return body == ZFLOW__ENVELOPE__BODY_RUN_STEP || body == ZFLOW__ENVELOPE__BODY_CLOSE_SESSION ||
           body == ZFLOW__ENVELOPE__BODY_WAIT_JOB || body == ZFLOW__ENVELOPE__BODY_POLL_JOB;
}

/* The last field 1 string of a body's bytes into m->owned_buf (cut to
 * fit); false when the body is malformed at its first level. */
static bool s_peek_owner(const uint8_t *p, size_t n, zf__broker_msg_t *m)
{
    const uint8_t *end = p + n;
    while (p < end) {
        uint32_t number = 0;
        uint64_t value = 0;
        const uint8_t *data = NULL;
        size_t len = 0;
        if (!s_field(&p, end, &number, &value, &data, &len)) return false;
        if (number != 1 || !data) continue;
        size_t keep = len < sizeof m->owned_buf ? len : sizeof m->owned_buf - 1;
        memcpy(m->owned_buf, data, keep);
        m->owned_buf[keep] = '\0';
        m->owned = m->owned_buf;
    }
    return true;
}

bool zf__broker_peek(const uint8_t *data, size_t len, zf__broker_msg_t *m, uint64_t *version)
{
    m->env = NULL;
    m->request_id = 0;
    m->body = ZFLOW__ENVELOPE__BODY__NOT_SET;
    m->owned = NULL;
    *version = 0;
    const uint8_t *p = data, *end = data + len, *body = NULL;
    size_t body_len = 0;
    while (p < end) {
        uint32_t number = 0;
        uint64_t value = 0;
        const uint8_t *field = NULL;
        size_t n = 0;
        if (!s_field(&p, end, &number, &value, &field, &n)) return false;
        if (number == 1 && !field) {
            *version = value;
        } else if (number == 2 && !field) {
            m->request_id = value;
        } else if (number > 2 && field &&
                   protobuf_c_message_descriptor_get_field(&zflow__envelope__descriptor, number)) {
            m->body = (Zflow__Envelope__BodyCase)number; /* the last one of a oneof wins */
            body = field;
            body_len = n;
        }
    }
    if (body && s_names_owner(m->body)) return s_peek_owner(body, body_len, m);
    return true;
}

void zf__broker_msg_of(const Zflow__Envelope *env, zf__broker_msg_t *m)
{
    m->env = env;
    m->raw = NULL;
    m->request_id = env->request_id;
    m->body = env->body_case;
    m->owned = NULL;
    switch (env->body_case) {
    case ZFLOW__ENVELOPE__BODY_RUN_STEP: m->owned = env->run_step->session; break;
    case ZFLOW__ENVELOPE__BODY_CLOSE_SESSION: m->owned = env->close_session->session; break;
    case ZFLOW__ENVELOPE__BODY_WAIT_JOB: m->owned = env->wait_job->job_id; break;
    case ZFLOW__ENVELOPE__BODY_POLL_JOB: m->owned = env->poll_job->job_id; break;
    default: break;
    }
}
