/* The header of an envelope read from its wire bytes, so that a large
 * message the broker only passes on is never decoded on its loop thread
 * (broker/broker_internal.h, "messages passed on undecoded"). */
#include <stdio.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "common/graphdef_io.h"

/* Whether the body names a session or job in its field 1. */
static bool s_names_owner(Zflow__Envelope__BodyCase body)
{
    return body == ZFLOW__ENVELOPE__BODY_RUN_STEP || body == ZFLOW__ENVELOPE__BODY_CLOSE_SESSION ||
           body == ZFLOW__ENVELOPE__BODY_EXTEND_SESSION ||
           body == ZFLOW__ENVELOPE__BODY_CANCEL_STEP || body == ZFLOW__ENVELOPE__BODY_WAIT_JOB ||
           body == ZFLOW__ENVELOPE__BODY_POLL_JOB || body == ZFLOW__ENVELOPE__BODY_CANCEL_JOB;
}

/* The last field 1 string of a body's bytes into m->owned_buf; false when
 * the body is malformed at its first level or the id does not fit (the
 * message is then decoded whole, and routed by the id as it is). */
static bool s_peek_owner(const uint8_t *p, size_t n, zf__broker_msg_t *m)
{
    const uint8_t *end = p + n;
    while (p < end) {
        zf_proto_field_t f;
        if (!zf_proto_next_field(&p, end, &f)) return false;
        if (f.number != 1 || !f.data) continue;
        if (f.value >= sizeof m->owned_buf) return false;
        memcpy(m->owned_buf, f.data, (size_t)f.value);
        m->owned_buf[f.value] = '\0';
        m->owned = m->owned_buf;
    }
    return true;
}

/* Whether a CreateSession's bytes name a graph at their first level. */
static bool s_peek_graph(const uint8_t *p, size_t n, bool *graph)
{
    const uint8_t *end = p + n;
    while (p < end) {
        zf_proto_field_t f;
        if (!zf_proto_next_field(&p, end, &f)) return false;
        if (f.number == 1 && f.wire != 2) return false;
        if (f.number == 1) *graph = true;
    }
    return true;
}

/* A SubmitJob's first level into m->submit: its session (and whether that
 * names a graph), step and steps; the graph and everything else are only
 * skipped. Sub-messages that come more than once merge, as protobuf's do;
 * of repeated steps the last wins. */
static bool s_peek_submit(const uint8_t *p, size_t n, zf__broker_msg_t *m)
{
    const uint8_t *end = p + n;
    while (p < end) {
        zf_proto_field_t f;
        if (!zf_proto_next_field(&p, end, &f)) return false;
        if ((f.number == 1 || f.number == 2 || f.number == 4) && f.wire != 2) return false;
        if (f.number == 3 && f.wire != 0) return false;
        if (f.number == 1 && !s_peek_graph(f.data, (size_t)f.value, &m->submit.graph)) return false;
        if (f.number == 2) m->submit.step = true;
        if (f.number == 3) m->submit.steps = (int64_t)f.value;
    }
    return true;
}

bool zf__broker_peek(const uint8_t *data, size_t len, zf__broker_msg_t *m, uint64_t *version)
{
    m->env = NULL;
    m->request_id = 0;
    m->body = ZFLOW__ENVELOPE__BODY__NOT_SET;
    m->owned = NULL;
    memset(&m->submit, 0, sizeof m->submit);
    *version = 0;
    const uint8_t *p = data, *end = data + len, *body = NULL;
    size_t body_len = 0;
    while (p < end) {
        zf_proto_field_t f;
        if (!zf_proto_next_field(&p, end, &f)) return false;
        if (f.number == 1 && f.wire == 0) {
            *version = f.value;
        } else if (f.number == 2 && f.wire == 0) {
            m->request_id = f.value;
        } else if (f.number > 2 && f.data &&
                   protobuf_c_message_descriptor_get_field(&zflow__envelope__descriptor,
                                                           f.number)) {
            m->body = (Zflow__Envelope__BodyCase)f.number; /* the last one of a oneof wins */
            body = f.data;
            body_len = (size_t)f.value;
        }
    }
    if (body && s_names_owner(m->body)) return s_peek_owner(body, body_len, m);
    if (body && m->body == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB) {
        m->submit.off = (size_t)(body - data);
        m->submit.len = body_len;
        return s_peek_submit(body, body_len, m);
    }
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
    case ZFLOW__ENVELOPE__BODY_EXTEND_SESSION: m->owned = env->extend_session->session; break;
    case ZFLOW__ENVELOPE__BODY_CANCEL_STEP: m->owned = env->cancel_step->session; break;
    case ZFLOW__ENVELOPE__BODY_CANCEL_JOB: m->owned = env->cancel_job->job_id; break;
    case ZFLOW__ENVELOPE__BODY_WAIT_JOB: m->owned = env->wait_job->job_id; break;
    case ZFLOW__ENVELOPE__BODY_POLL_JOB: m->owned = env->poll_job->job_id; break;
    default: break;
    }
}
