/* Helpers shared by the message-handler fuzz targets (fuzz_broker_handler.c,
 * fuzz_sched_handler.c, fuzz_exec_handler.c, fuzz_remote_handler.c): they
 * split an input into the frames of one multipart message and send it on a
 * ZeroMQ socket.
 *
 * Input format. Byte 0: the low 4 bits are the number of frames (0 to 15;
 * 0 sends no message at all), the high bit is left to the target (the
 * scheduler target uses it to pick the socket). Then each frame but the
 * last is a 2-byte little-endian length and that many bytes (cut short by
 * the end of the input); the last frame is the rest of the input. So
 * "01 80" is one frame holding 0x80, and "02 LL HH <header> <payload>" is
 * a two-frame message, the layout of the fuzz_tensor_frame corpus. */
#ifndef ZF_FUZZ_MULTIPART_H
#define ZF_FUZZ_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zmq.h>

#include "common/transport.h"

#define ZF_FUZZ_MAX_FRAMES 15

typedef struct zf_fuzz_msg {
    int n;
    const uint8_t *data[ZF_FUZZ_MAX_FRAMES];
    size_t len[ZF_FUZZ_MAX_FRAMES];
    bool high_bit; /* byte 0's high bit */
} zf_fuzz_msg_t;

static inline void zf_fuzz_check(bool cond, const char *target, const char *what)
{
    if (!cond) {
        fprintf(stderr, "%s: %s\n", target, what);
        abort();
    }
}

/* Splits data as the input format says. An empty input is no message. */
static inline zf_fuzz_msg_t zf_fuzz_split(const uint8_t *data, size_t size)
{
    zf_fuzz_msg_t m = {0};
    if (size == 0) return m;
    m.n = data[0] & 0x0f;
    m.high_bit = (data[0] & 0x80) != 0;
    size_t at = 1;
    for (int i = 0; i < m.n; i++) {
        size_t len = size - at;
        if (i + 1 < m.n) {
            size_t want = 0;
            if (at < size) want = data[at++];
            if (at < size) want |= (size_t)data[at++] << 8;
            len = size - at < want ? size - at : want;
        }
        m.data[i] = data + at;
        m.len[i] = len;
        at += len;
    }
    return m;
}

/* Sends the frames of m on sock (a raw ZeroMQ socket), after the prefix
 * frames (e.g. a ROUTER's routing id), as one message. Aborts when ZeroMQ
 * refuses a frame: the harness's sockets have room for every input. */
static inline void zf_fuzz_send(void *sock, const void *const *prefix, const size_t *prefix_len,
                                int n_prefix, const zf_fuzz_msg_t *m, const char *target)
{
    int total = n_prefix + m->n;
    for (int i = 0; i < total; i++) {
        const void *p = i < n_prefix ? prefix[i] : m->data[i - n_prefix];
        size_t len = i < n_prefix ? prefix_len[i] : m->len[i - n_prefix];
        int rc = zmq_send(sock, p, len, i + 1 < total ? ZMQ_SNDMORE : 0);
        zf_fuzz_check(rc == (int)len, target, "zmq_send refused a frame");
    }
}

/* Packs a Ping envelope with request_id into buf (64 bytes); its length. */
static inline size_t zf_fuzz_packed_ping(uint64_t request_id, uint8_t *buf)
{
    Zflow__Ping ping = ZFLOW__PING__INIT;
    Zflow__Envelope env = ZFLOW__ENVELOPE__INIT;
    env.version = ZFLOW__PROTOCOL_VERSION__PROTOCOL_VERSION_1;
    env.request_id = request_id;
    env.body_case = ZFLOW__ENVELOPE__BODY_PING;
    env.ping = &ping;
    return zflow__envelope__pack(&env, buf);
}

/* Receives messages on sock (a raw ZeroMQ socket), skipping n_route
 * leading frames, until a StatusReply to request_id comes or timeout_ms
 * passes, calling pump (may be NULL) between tries; other messages (the
 * answers to the fuzz input) are dropped. Returns the reply's status code,
 * or -1 when none came. */
static inline int64_t zf_fuzz_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int zf_fuzz_await_status(void *sock, int n_route, uint64_t request_id, int timeout_ms,
                                       void (*pump)(void *), void *pump_arg)
{
    int64_t deadline = zf_fuzz_now_ms() + timeout_ms;
    while (zf_fuzz_now_ms() <= deadline) {
        if (pump) pump(pump_arg);
        zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, pump ? 0 : 10) <= 0) continue;
        zmq_msg_t frame;
        zmq_msg_init(&frame);
        int code = -2;
        for (int i = 0;; i++) {
            if (zmq_msg_recv(&frame, sock, 0) < 0) break;
            bool more = zmq_msg_more(&frame);
            if (!more && i == n_route) {
                Zflow__Envelope *env = NULL;
                uint64_t id = 0;
                zf_status_t s =
                    zf_envelope_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), &env, &id);
                if (zf_ok(s) && id == request_id &&
                    env->body_case == ZFLOW__ENVELOPE__BODY_STATUS_REPLY) {
                    zf_status_t got = zf_status_from_proto(env->status_reply->status);
                    code = (int)got.code;
                    zf_status_clear(&got);
                }
                if (env) zflow__envelope__free_unpacked(env, NULL);
                zf_status_clear(&s);
            }
            if (!more) break;
        }
        zmq_msg_close(&frame);
        if (code != -2) return code;
    }
    return -1;
}

#endif
