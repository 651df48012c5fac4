/* Fuzz target for the broker's reading of envelopes it passes on or keeps
 * without decoding them (broker/broker_peek.c): any bytes given to
 * zf__broker_peek must be read within their bounds or refused, and an
 * envelope that decodes must be read as its decoding says: its header and,
 * for a SubmitJob, its steps, whether it names a session graph and a step,
 * and where its bytes lie. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "common/graphdef_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void s_check(bool cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_broker_peek: %s\n", what);
        abort();
    }
}

/* Whether the envelope's top level holds one submit_job field (protobuf
 * merges several; the broker keeps the last one's bytes). */
static bool s_one_submit(const uint8_t *p, size_t size)
{
    const uint8_t *end = p + size;
    int n = 0;
    zf_proto_field_t f;
    while (p < end && zf_proto_next_field(&p, end, &f))
        n += f.number == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB;
    return n == 1;
}

/* The SubmitJob peeked in m agrees with the decoded one. */
static void s_check_submit(const uint8_t *data, const zf__broker_msg_t *m,
                           const Zflow__SubmitJob *sj)
{
    s_check(m->submit.steps == sj->steps, "steps read wrong");
    s_check(m->submit.step == (sj->step != NULL), "the step's presence read wrong");
    s_check(m->submit.graph == (sj->session && sj->session->graph),
            "the session graph's presence read wrong");
    Zflow__SubmitJob *again = zflow__submit_job__unpack(NULL, m->submit.len, data + m->submit.off);
    s_check(again && again->steps == sj->steps, "the SubmitJob's bytes are not where it says");
    zflow__submit_job__free_unpacked(again, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zf__broker_msg_t m;
    uint64_t version = 0;
    if (!zf__broker_peek(data, size, &m, &version)) return 0;
    s_check(m.env == NULL, "a peeked message claims to be decoded");
    if (m.body == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB)
        s_check(m.submit.off <= size && m.submit.len <= size - m.submit.off,
                "the SubmitJob's bytes lie outside the frame");
    if (m.owned) s_check(strlen(m.owned) < sizeof m.owned_buf, "an owned id past its buffer");
    Zflow__Envelope *env = NULL;
    zf_status_t s = zf_envelope_decode(data, size, &env, NULL);
    if (!zf_ok(s)) {
        zf_status_clear(&s);
        return 0;
    }
    s_check(env->request_id == m.request_id && env->version == version && env->body_case == m.body,
            "the header read wrong");
    if (env->body_case == ZFLOW__ENVELOPE__BODY_SUBMIT_JOB && s_one_submit(data, size))
        s_check_submit(data, &m, env->submit_job);
    zflow__envelope__free_unpacked(env, NULL);
    return 0;
}
