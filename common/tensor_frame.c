/* Tensor frames, wire half: owns the payload encodings and the zero-copy
 * send and receive of two-frame tensor messages over ZeroMQ. */
#include "common/tensor_frame.h"

#include "common/byte_order.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* ---- payloads ------------------------------------------------------------------------ */

static zf_status_t s_decode_strings(const zf_tensor_frame_header_t *h, const uint8_t *p, size_t len,
                                    zf_tensor_t **out)
{
    zf_tensor_t *t = NULL;
    ZF_TRY(zf_tensor_new(h->dtype, &h->shape, &t));
    int64_t n = zf_tensor_num_elements(t);
    size_t at = 0;
    zf_status_t s = ZF_STATUS_OK;
    for (int64_t i = 0; i < n && zf_ok(s); i++) {
        if (len - at < 8) {
            s = zf_invalid_argument("string %" PRId64 " of %" PRId64 " has no length: the payload "
                                    "ends at byte %zu",
                                    i, n, len);
            break;
        }
        uint64_t slen = zf_le64(p + at);
        at += 8;
        if (slen > len - at)
            s = zf_invalid_argument("string %" PRId64 " declares %" PRIu64
                                    " bytes but only %zu remain",
                                    i, slen, len - at);
        else
            s = zf_tensor_set_string(t, i, p + at, (size_t)slen);
        if (zf_ok(s)) at += (size_t)slen;
    }
    if (zf_ok(s) && at != len)
        s = zf_invalid_argument("%zu bytes follow the last of %" PRId64 " strings", len - at, n);
    if (!zf_ok(s)) {
        zf_tensor_unref(&t);
        return s;
    }
    *out = t;
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_frame_decode_payload(const zf_tensor_frame_header_t *h, const void *bytes,
                                           size_t len, zf_tensor_t **out)
{
    *out = NULL;
    if (len != h->len)
        return zf_invalid_argument(
            "field 'len' declares %" PRIu64 " bytes but the payload frame has %zu", h->len, len);
    if (h->is_dead) return ZF_STATUS_OK;
    if (h->has_ipc)
        return zf_invalid_argument("an IPC offer has no payload: its bytes stay in the sender's "
                                   "GPU memory");
    if (h->has_shm)
        return zf_invalid_argument("a shared-memory offer has no payload: its bytes stay in the "
                                   "sender's segment");
    if (zf__tensor_frame_holds_strings(h->dtype)) return s_decode_strings(h, bytes, len, out);
    return zf_tensor_new_from_bytes(h->dtype, &h->shape, bytes, len, out);
}

void zf__tensor_frame_write_strings(const zf_tensor_t *t, uint8_t *out)
{
    const zf_tstring_t *strs = zf_tensor_data(t);
    int64_t n = zf_tensor_num_elements(t);
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        zf_put_le64(out + at, strs[i].len);
        at += 8;
        if (strs[i].len) memcpy(out + at, strs[i].data, strs[i].len);
        at += strs[i].len;
    }
}

/* ---- sending ---------------------------------------------------------------------------- */

/* ZeroMQ calls these from whichever thread drops the message last (its
 * I/O thread for tcp and ipc, the receiver for inproc): both are safe
 * there, as tensor references are atomic. */
static void s_release_tensor(void *data, void *hint)
{
    (void)data;
    zf_tensor_t *t = hint;
    zf_tensor_unref(&t);
}

static void s_free_bytes(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Frame 2 for t: the tensor's own bytes, the string encoding, or nothing. */
static zf_status_t s_payload_msg(const zf_tensor_frame_header_t *h, zf_tensor_t *t, zmq_msg_t *msg)
{
    if (h->is_dead || h->len == 0) {
        zmq_msg_init(msg);
        return ZF_STATUS_OK;
    }
    if (zf__tensor_frame_holds_strings(h->dtype)) {
        uint8_t *buf = h->len <= SIZE_MAX ? malloc(h->len ? (size_t)h->len : 1) : NULL;
        if (!buf) return zf_out_of_memory("a string payload");
        zf__tensor_frame_write_strings(t, buf);
        if (zmq_msg_init_data(msg, buf, (size_t)h->len, s_free_bytes, NULL) == 0)
            return ZF_STATUS_OK;
        free(buf);
        return zf_out_of_memory("a payload frame");
    }
    zf_tensor_t *ref = zf_tensor_ref(t);
    if (zmq_msg_init_data(msg, zf_tensor_data(t), (size_t)h->len, s_release_tensor, ref) == 0)
        return ZF_STATUS_OK;
    zf_tensor_unref(&ref);
    return zf_out_of_memory("a payload frame");
}

static zf_status_t s_send_error(const zf_tensor_frame_header_t *h, int err)
{
    char what[64 + ZF_TENSOR_FRAME_MAX_KEY];
    snprintf(what, sizeof what, "sending tensor '%s' (step %" PRId64 ")", h->key, h->step_id);
    return zf__zmq_error(err, what);
}

/* The chunk at which the next chunked send's preparation fails as if out
 * of memory (1-based; 0: none), for tests (zf__tensor_frame_fail_chunk). */
static atomic_int s_fail_chunk;

void zf__tensor_frame_fail_chunk(int at)
{
    atomic_store(&s_fail_chunk, at);
}

/* Makes the n chunk frames of h's payload (t's own bytes, h->chunk bytes
 * each but the last), each holding its own tensor reference. On error
 * none is left. */
static zf_status_t s_chunk_msgs(const zf_tensor_frame_header_t *h, zf_tensor_t *t, zmq_msg_t *msgs,
                                size_t n)
{
    const uint8_t *data = zf_tensor_data(t);
    int fail = atomic_load(&s_fail_chunk) ? atomic_exchange(&s_fail_chunk, 0) : 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t at = (uint64_t)i * h->chunk;
        uint64_t size = h->len - at < h->chunk ? h->len - at : h->chunk;
        zf_tensor_t *ref = zf_tensor_ref(t);
        if ((size_t)fail == i + 1 || zmq_msg_init_data(&msgs[i], (void *)(data + at), (size_t)size,
                                                       s_release_tensor, ref) != 0) {
            zf_tensor_unref(&ref);
            for (size_t j = 0; j < i; j++) zmq_msg_close(&msgs[j]);
            return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                                 "sending tensor '%s' (step %" PRId64
                                 "): out of memory making chunk %zu of %zu; nothing was sent",
                                 h->key, h->step_id, i + 1, n);
        }
    }
    return ZF_STATUS_OK;
}

/* Sends h (encoded: head, head_len bytes) and its payload (t's own bytes)
 * in chunks of h->chunk bytes as one message. Every frame is made before
 * the first is sent, so the message leaves whole or not at all. */
static zf_status_t s_send_chunked(void *sock, const zf_tensor_frame_header_t *h,
                                  const uint8_t *head, size_t head_len, zf_tensor_t *t)
{
    size_t n = (size_t)((h->len + h->chunk - 1) / h->chunk);
    zmq_msg_t *msgs = malloc(n * sizeof *msgs);
    if (!msgs)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "sending tensor '%s' (step %" PRId64
                             "): out of memory for its %zu chunks; nothing was sent",
                             h->key, h->step_id, n);
    zf_status_t st = s_chunk_msgs(h, t, msgs, n);
    if (!zf_ok(st)) {
        free(msgs);
        return st;
    }
    /* As for one frame, only the first can wait for room; a later one
     * fails only when the context is terminating. */
    size_t sent = 0;
    if (zmq_send(sock, head, head_len, ZMQ_SNDMORE) < 0) st = s_send_error(h, errno);
    while (zf_ok(st) && sent < n) {
        if (zmq_msg_send(&msgs[sent], sock, sent + 1 < n ? ZMQ_SNDMORE : 0) < 0)
            st = s_send_error(h, errno);
        else
            sent++;
    }
    for (size_t i = sent; i < n; i++) zmq_msg_close(&msgs[i]);
    free(msgs);
    return st;
}

zf_status_t zf_tensor_frame_send(zf_socket_t *s, const char *key, int64_t step_id, zf_tensor_t *t,
                                 bool is_dead)
{
    zf_tensor_frame_header_t h;
    uint8_t head[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t head_len = 0;
    ZF_TRY(zf_tensor_frame_header_from_tensor(key, step_id, t, is_dead, &h));
    if (!is_dead && h.len > ZF_TENSOR_FRAME_CURVE_CHUNK &&
        !zf__tensor_frame_holds_strings(h.dtype) && zf_socket_encrypts(s))
        h.chunk = ZF_TENSOR_FRAME_CURVE_CHUNK;
    ZF_TRY(zf_tensor_frame_encode_header(&h, head, sizeof head, &head_len));
    if (h.chunk) return s_send_chunked(zf_socket_handle(s), &h, head, head_len, t);
    zmq_msg_t payload;
    ZF_TRY(s_payload_msg(&h, t, &payload));
    void *sock = zf_socket_handle(s);
    /* Only the first frame can wait for room (ZeroMQ checks the high-water
     * mark per message), so a failure after it means the context is
     * terminating and the socket is unusable anyway. */
    if (zmq_send(sock, head, head_len, ZMQ_SNDMORE) < 0 || zmq_msg_send(&payload, sock, 0) < 0) {
        zf_status_t st = s_send_error(&h, errno);
        zmq_msg_close(&payload);
        return st;
    }
    return ZF_STATUS_OK;
}

/* Sends a header frame of len bytes and an empty payload frame. */
static zf_status_t s_send_header_only(zf_socket_t *s, const uint8_t *head, size_t len,
                                      const char *what)
{
    void *sock = zf_socket_handle(s);
    if (zmq_send(sock, head, len, ZMQ_SNDMORE) < 0 || zmq_send(sock, "", 0, 0) < 0)
        return zf__zmq_error(errno, what);
    return ZF_STATUS_OK;
}

/* Sends an offer's header and an empty payload frame; how says how it is
 * offered, for errors. */
static zf_status_t s_send_offer(zf_socket_t *s, const zf_tensor_frame_header_t *h, const char *how)
{
    uint8_t head[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t head_len = 0;
    ZF_TRY(zf_tensor_frame_encode_header(h, head, sizeof head, &head_len));
    char what[80 + ZF_TENSOR_FRAME_MAX_KEY];
    snprintf(what, sizeof what, "offering tensor '%s' (step %" PRId64 ") %s", h->key, h->step_id,
             how);
    return s_send_header_only(s, head, head_len, what);
}

zf_status_t zf_tensor_frame_send_ipc(zf_socket_t *s, const zf_tensor_frame_header_t *h)
{
    if (!h->has_ipc) return zf_invalid_argument("tensor '%s' is not an IPC offer", h->key);
    return s_send_offer(s, h, "over CUDA IPC");
}

zf_status_t zf_tensor_frame_send_shm(zf_socket_t *s, const zf_tensor_frame_header_t *h)
{
    if (!h->has_shm) return zf_invalid_argument("tensor '%s' is not a shared-memory offer", h->key);
    return s_send_offer(s, h, "in shared memory");
}

zf_status_t zf_tensor_frame_send_reply(zf_socket_t *s, const zf_tensor_frame_reply_t *r)
{
    uint8_t head[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t head_len = 0;
    ZF_TRY(zf_tensor_frame_encode_reply(r, head, sizeof head, &head_len));
    char what[64];
    snprintf(what, sizeof what, "replying to IPC offer %" PRIu64, r->id);
    return s_send_header_only(s, head, head_len, what);
}

/* ---- batches ---------------------------------------------------------------------------- */

zf_status_t zf_tensor_frame_batch_out_send(zf_socket_t *s, zf_tensor_frame_batch_out_t *b)
{
    if (b->n == 0) {
        zf_tensor_frame_batch_out_clear(b);
        return zf_invalid_argument("an empty batch of tensors");
    }
    uint32_t n = b->n;
    uint8_t *bytes = NULL;
    size_t len = 0;
    ZF_TRY(zf__tensor_frame_batch_out_seal(b, &bytes, &len));
    zmq_msg_t msg;
    if (zmq_msg_init_data(&msg, bytes, len, s_free_bytes, NULL) != 0) {
        free(bytes);
        return zf_out_of_memory("a batch frame");
    }
    if (zmq_msg_send(&msg, zf_socket_handle(s), 0) < 0) {
        char what[64];
        snprintf(what, sizeof what, "sending a batch of %" PRIu32 " tensors", n);
        zf_status_t st = zf__zmq_error(errno, what);
        zmq_msg_close(&msg);
        return st;
    }
    return ZF_STATUS_OK;
}

/* ---- receiving ------------------------------------------------------------------------- */

void zf_tensor_frame_clear(zf_tensor_frame_t *f)
{
    if (!f) return;
    free(f->key);
    free(f->offer);
    free(f->reply);
    if (f->batch) {
        zf_tensor_frame_batch_clear(f->batch);
        free(f->batch);
    }
    zf_tensor_unref(&f->tensor);
    memset(f, 0, sizeof *f);
}

static void s_close_msg(void *data, void *hint)
{
    (void)data;
    zmq_msg_t *msg = hint;
    zmq_msg_close(msg);
    free(msg);
}

static size_t s_alignment(zf_dtype_t dtype)
{
    size_t size = zf_dtype_size(dtype);
    return dtype == ZF_COMPLEX64 || dtype == ZF_COMPLEX128 ? size / 2 : size;
}

/* The tensor over the received payload: the message itself backs the
 * buffer when its bytes are aligned for the dtype; otherwise a copy.
 * Takes ownership of *msg_p (heap-allocated) in every case. */
static zf_status_t s_payload_tensor(const zf_tensor_frame_header_t *h, zmq_msg_t **msg_p,
                                    zf_tensor_frame_t *frame)
{
    zmq_msg_t *msg = *msg_p;
    *msg_p = NULL;
    void *data = zmq_msg_data(msg);
    size_t size = zmq_msg_size(msg);
    zf_status_t s = ZF_STATUS_OK;
    if (h->is_dead || size == 0 || zf__tensor_frame_holds_strings(h->dtype) ||
        (uintptr_t)data % s_alignment(h->dtype) != 0 || size != h->len) {
        s = zf_tensor_frame_decode_payload(h, data, size, &frame->tensor);
        s_close_msg(data, msg);
        return s;
    }
    zf_buffer_t *buf = NULL;
    s = zf_buffer_wrap(data, size, s_close_msg, msg, &buf);
    if (!zf_ok(s)) {
        s_close_msg(data, msg);
        return s;
    }
    s = zf_tensor_from_buffer(h->dtype, &h->shape, buf, 0, &frame->tensor);
    zf_buffer_unref(&buf); /* the tensor holds its own; on error this frees msg */
    frame->zero_copy = zf_ok(s);
    return s;
}

/* Receives the rest of a message whose first frame is in head: the
 * payload into *payload (heap), counting frames; extra frames are drained. */
static zf_status_t s_recv_payload(zf_socket_t *s, zmq_msg_t *head, zmq_msg_t **payload)
{
    *payload = NULL;
    if (!zmq_msg_more(head))
        return zf_invalid_argument("tensor message has 1 frame; expected 2 (header and payload)");
    zmq_msg_t *msg = malloc(sizeof *msg);
    if (!msg) {
        zf_socket_drain(s);
        return zf_out_of_memory("a payload frame");
    }
    zmq_msg_init(msg);
    if (zmq_msg_recv(msg, zf_socket_handle(s), ZMQ_DONTWAIT) < 0) {
        zf_status_t st = zf__zmq_error(errno, "receiving a tensor payload");
        s_close_msg(NULL, msg);
        return st;
    }
    if (zmq_msg_more(msg)) {
        int extra = zf_socket_drain(s);
        s_close_msg(NULL, msg);
        return zf_invalid_argument("tensor message has %d frames; expected 2 (header and payload)",
                                   2 + extra);
    }
    *payload = msg;
    return ZF_STATUS_OK;
}

/* An IPC or shared-memory offer (h) or a reply (r, when is_reply): described by its
 * header; the payload frame must be empty. */
static zf_status_t s_header_only(const zf_tensor_frame_header_t *h,
                                 const zf_tensor_frame_reply_t *r, bool is_reply,
                                 zmq_msg_t *payload, zf_tensor_frame_t *frame)
{
    size_t size = zmq_msg_size(payload);
    s_close_msg(NULL, payload);
    if (size != 0)
        return zf_invalid_argument("%s carries a payload of %zu bytes; it must be empty",
                                   is_reply     ? "a reply"
                                   : h->has_shm ? "a shared-memory offer"
                                                : "an IPC offer",
                                   size);
    if (is_reply) {
        if (!(frame->reply = malloc(sizeof *frame->reply))) return zf_out_of_memory("a reply");
        *frame->reply = *r;
        return ZF_STATUS_OK;
    }
    if (!(frame->offer = malloc(sizeof *frame->offer))) return zf_out_of_memory("an IPC offer");
    *frame->offer = (zf_tensor_frame_offer_t){h->dtype, h->shape, h->ipc, h->has_shm, h->shm};
    return ZF_STATUS_OK;
}

/* A batch message (its one frame, msg, taken) into frame->batch: its
 * tensors view the received frame, not copied again. */
static zf_status_t s_batch(zmq_msg_t *msg, zf_tensor_frame_t *frame)
{
    zmq_msg_t *m = malloc(sizeof *m);
    if (!m) return zf_out_of_memory("a tensor frame batch");
    zmq_msg_init(m);
    zmq_msg_move(m, msg);
    const uint8_t *bytes = zmq_msg_data(m);
    size_t len = zmq_msg_size(m), entries = 0, at = 0;
    zf_buffer_t *buf = NULL; /* the payloads, in m: freed with the last view */
    zf_status_t st = zf_tensor_frame_batch_split(bytes, len, &entries, &at);
    if (zf_ok(st) && at < len)
        st = zf_buffer_wrap((void *)(bytes + at), len - at, s_close_msg, m, &buf);
    zf_tensor_frame_batch_t *b = zf_ok(st) ? calloc(1, sizeof *b) : NULL;
    if (zf_ok(st) && !b) st = zf_out_of_memory("a tensor frame batch");
    if (zf_ok(st)) st = zf_tensor_frame_decode_batch(bytes, entries, buf, b);
    if (buf)
        zf_buffer_unref(&buf); /* the tensors hold their own; m goes with the last */
    else
        s_close_msg(NULL, m);
    if (!zf_ok(st)) {
        free(b);
        return st;
    }
    frame->batch = b;
    return ZF_STATUS_OK;
}

/* The payload of a tensor sent in chunks (h->chunk): every frame after
 * head, each checked against its expected size and counted before the
 * tensor is allocated, then copied into it in order (CurveZMQ has given
 * each decrypted frame a buffer of its own, so this is the one copy). */
static zf_status_t s_recv_chunks(zf_socket_t *s, const zmq_msg_t *head,
                                 const zf_tensor_frame_header_t *h, zf_tensor_frame_t *frame)
{
    uint64_t n = (h->len + h->chunk - 1) / h->chunk; /* >= 2: checked with the header */
    zmq_msg_t *chunks = NULL;
    size_t cap = 0, kept = 0;
    uint64_t frames = 0;
    zf_status_t st = ZF_STATUS_OK;
    bool more = zmq_msg_more(head);
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, zf_socket_handle(s), ZMQ_DONTWAIT) < 0) {
            zf_status_clear(&st);
            st = zf__zmq_error(errno, "receiving a tensor payload chunk");
            zmq_msg_close(&m);
            zf_socket_drain(s);
            break;
        }
        more = zmq_msg_more(&m);
        uint64_t want = ++frames < n ? h->chunk : h->len - (n - 1) * h->chunk;
        if (zf_ok(st) && frames <= n && zmq_msg_size(&m) != want)
            st = zf_invalid_argument("chunk %" PRIu64 " of %" PRIu64 " has %zu bytes; expected "
                                     "%" PRIu64,
                                     frames, n, zmq_msg_size(&m), want);
        if (zf_ok(st) && frames <= n && kept == cap) {
            size_t grown = cap ? 2 * cap : (n < 64 ? (size_t)n : 64);
            zmq_msg_t *c = realloc(chunks, grown * sizeof *c);
            if (c) {
                chunks = c;
                cap = grown;
            } else {
                st = zf_out_of_memory("the chunks of a tensor payload");
            }
        }
        if (zf_ok(st) && frames <= n) {
            zmq_msg_init(&chunks[kept]);
            zmq_msg_move(&chunks[kept++], &m);
        }
        zmq_msg_close(&m); /* the rest of a refused message is drained */
    }
    if (zf_ok(st) && frames != n)
        st = zf_invalid_argument("the payload comes in %" PRIu64 " chunks but %" PRIu64
                                 " bytes in chunks of %" PRIu64 " make %" PRIu64,
                                 frames, h->len, h->chunk, n);
    /* the chunks, counted and sized above, cover every byte */
    if (zf_ok(st)) st = zf_tensor_new_uninit(h->dtype, &h->shape, &frame->tensor);
    uint8_t *dst = zf_ok(st) ? zf_tensor_data(frame->tensor) : NULL;
    for (size_t i = 0; i < kept; i++) {
        if (dst) memcpy(dst + i * h->chunk, zmq_msg_data(&chunks[i]), zmq_msg_size(&chunks[i]));
        zmq_msg_close(&chunks[i]);
    }
    free(chunks);
    return st;
}

static zf_status_t s_recv(zf_socket_t *s, int timeout_ms, zmq_msg_t *head,
                          zf_tensor_frame_header_t *h, zf_tensor_frame_t *frame)
{
    ZF_TRY(zf__socket_recv_first(s, timeout_ms, head));
    zmq_msg_t *payload = NULL;
    if (zf_tensor_frame_is_batch(zmq_msg_data(head), zmq_msg_size(head))) {
        if (!zmq_msg_more(head)) return s_batch(head, frame);
        int extra = zf_socket_drain(s);
        zf_status_t st = zf_tensor_frame_batch_split(zmq_msg_data(head), zmq_msg_size(head),
                                                     &(size_t){0}, &(size_t){0});
        if (!zf_ok(st)) return st; /* an earlier layout, by name */
        return zf_invalid_argument("tensor frame batch: %d frames; a batch is one", 1 + extra);
    }
    if (!zmq_msg_more(head)) return s_recv_payload(s, head, &payload); /* refuses it */
    /* the header first: it says whether the payload comes in chunks */
    zf_tensor_frame_reply_t reply;
    bool is_reply = false;
    zf_status_t st =
        zf_tensor_frame_decode_any(zmq_msg_data(head), zmq_msg_size(head), h, &reply, &is_reply);
    if (!zf_ok(st)) {
        zf_socket_drain(s);
        return st;
    }
    if (!is_reply && h->chunk) {
        st = s_recv_chunks(s, head, h, frame);
    } else {
        ZF_TRY(s_recv_payload(s, head, &payload));
        if (is_reply) return s_header_only(h, &reply, true, payload, frame);
        st = h->has_ipc || h->has_shm ? s_header_only(h, NULL, false, payload, frame)
                                      : s_payload_tensor(h, &payload, frame);
    }
    if (!zf_ok(st))
        return zf_status_prefix(st, "tensor '%s' (step %" PRId64 ")", h->key, h->step_id);
    frame->key = strdup(h->key);
    if (!frame->key) return zf_out_of_memory("a tensor key");
    frame->step_id = h->step_id;
    frame->is_dead = h->is_dead;
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_frame_recv(zf_socket_t *s, int timeout_ms, zf_tensor_frame_t *frame)
{
    memset(frame, 0, sizeof *frame);
    zf_tensor_frame_header_t h;
    zmq_msg_t head;
    zmq_msg_init(&head);
    zf_status_t st = s_recv(s, timeout_ms, &head, &h, frame);
    zmq_msg_close(&head);
    if (!zf_ok(st)) zf_tensor_frame_clear(frame);
    return st;
}
