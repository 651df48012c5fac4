/* Fuzz target for the data-plane parser (common/tensor_frame): the input is
 * a 2-byte little-endian header length, that many header bytes, then the
 * payload. A header that decodes must satisfy every documented limit and
 * survive encode -> decode unchanged; the payload must then build a tensor
 * that matches the header, or fail cleanly. A reply message (to a CUDA IPC
 * or shared-memory offer) must likewise survive encode -> decode, and so
 * must the entries of a batch that decode (the others refused with a
 * reason). A batch is one frame: everything after the length, read once
 * as it is and once with its prefix saying its entries end where the
 * length does (so that a mutation reaches the entries without first
 * guessing their end). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tensor_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void s_check(bool cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_tensor_frame: %s\n", what);
        abort();
    }
}

static void s_check_header(const zf_tensor_frame_header_t *h)
{
    size_t key_len = strnlen(h->key, sizeof h->key);
    s_check(key_len > 0 && key_len <= ZF_TENSOR_FRAME_MAX_KEY, "key length out of range");
    s_check(h->shape.rank >= 0 && h->shape.rank <= ZF_MAX_RANK, "rank out of range");
    for (int i = 0; i < h->shape.rank; i++) s_check(h->shape.dims[i] >= 0, "negative dim");
    s_check(h->len <= INT64_MAX, "len out of range");
    if (h->has_ipc)
        s_check(h->len == 0 && !h->is_dead && h->ipc.nbytes > 0 && h->ipc.id > 0 &&
                    h->ipc.device >= 0 && h->ipc.host[0] != '\0',
                "an IPC offer out of its limits");
    if (h->has_shm)
        s_check(!h->has_ipc && h->len == 0 && !h->is_dead && h->shm.nbytes > 0 && h->shm.id > 0 &&
                    h->shm.name[0] != '\0' && h->shm.host[0] != '\0',
                "a shared-memory offer out of its limits");
    zf_status_t s = zf_tensor_frame_check_header(h);
    s_check(zf_ok(s), "a decoded header fails its own check");

    static uint8_t buf[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t len = 0;
    s = zf_tensor_frame_encode_header(h, buf, sizeof buf, &len);
    s_check(zf_ok(s), "a decoded header fails to encode");
    static zf_tensor_frame_header_t back;
    s = zf_tensor_frame_decode_header(buf, len, &back);
    s_check(zf_ok(s), "an encoded header fails to decode");
    s_check(memcmp(h, &back, sizeof back) == 0, "header changed in a round trip");
}

static void s_check_reply(const zf_tensor_frame_reply_t *r)
{
    s_check(r->id > 0 && strnlen(r->why, sizeof r->why) <= ZF_TENSOR_FRAME_MAX_WHY,
            "reply out of its limits");
    static uint8_t buf[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t len = 0;
    zf_status_t s = zf_tensor_frame_encode_reply(r, buf, sizeof buf, &len);
    s_check(zf_ok(s), "a decoded reply fails to encode");
    zf_tensor_frame_reply_t back;
    s = zf_tensor_frame_decode_reply(buf, len, &back);
    s_check(zf_ok(s), "an encoded reply fails to decode");
    s_check(memcmp(r, &back, sizeof back) == 0, "reply changed in a round trip");
}

static void s_check_payload(const zf_tensor_frame_header_t *h, const uint8_t *p, size_t len)
{
    zf_tensor_t *t = NULL;
    zf_status_t s = zf_tensor_frame_decode_payload(h, p, len, &t);
    if (!zf_ok(s)) {
        s_check(t == NULL && zf_status_msg(&s)[0] != '\0', "a payload error without a message");
        bool must_fit = len == h->len && zf_dtype_size(h->dtype) > 0 && !h->has_ipc && !h->has_shm;
        s_check(!must_fit || s.code == ZF_RESOURCE_EXHAUSTED, "a well-sized payload refused");
        zf_status_clear(&s);
        return;
    }
    s_check(len == h->len, "a payload of the wrong size accepted");
    s_check(!h->has_ipc || h->is_dead, "an IPC offer decoded as bytes");
    s_check(!h->has_shm || h->is_dead, "a shared-memory offer decoded as bytes");
    if (h->is_dead) {
        s_check(t == NULL, "a dead tensor came with a value");
        return;
    }
    s_check(t != NULL && zf_tensor_dtype(t) == h->dtype, "tensor dtype differs");
    s_check(zf_shape_equal(zf_tensor_shape(t), &h->shape), "tensor shape differs");
    if (zf_dtype_size(h->dtype) > 0)
        s_check(memcmp(zf_tensor_data(t), p, len) == 0, "tensor bytes differ");
    zf_tensor_unref(&t);
}

/* A batch: every entry decoded or refused with a reason; the decoded ones
 * survive a re-encode as a batch of their own unchanged. */
/* A batch frame split and decoded as a receiver does (its payloads a
 * buffer of their own). */
static zf_status_t s_decode_frame(const uint8_t *frame, size_t len, zf_tensor_frame_batch_t *b)
{
    memset(b, 0, sizeof *b);
    size_t entries = 0, at = 0;
    ZF_TRY(zf_tensor_frame_batch_split(frame, len, &entries, &at));
    s_check(entries >= ZF_TENSOR_FRAME_BATCH_PREFIX && entries <= at && at <= len &&
                at - entries < ZF_TENSOR_FRAME_BATCH_ALIGN,
            "a split outside the frame");
    zf_buffer_t *payload = NULL;
    if (at < len && !zf_ok(zf_buffer_new(len - at, &payload)))
        return zf_out_of_memory("a fuzzed payload");
    if (payload) memcpy(zf_buffer_data(payload), frame + at, len - at);
    zf_status_t s = zf_tensor_frame_decode_batch(frame, entries, payload, b);
    zf_buffer_unref(&payload);
    return s;
}

static void s_check_batch(const uint8_t *frame, size_t len)
{
    zf_tensor_frame_batch_t b;
    zf_status_t s = s_decode_frame(frame, len, &b);
    if (!zf_ok(s)) {
        s_check(s.code == ZF_INVALID_ARGUMENT || s.code == ZF_RESOURCE_EXHAUSTED,
                "unexpected batch error code");
        s_check(b.n == 0 && b.entries == NULL && zf_status_msg(&s)[0] != '\0', "a bad batch error");
        zf_status_clear(&s);
        return;
    }
    s_check(b.n >= 1 && b.n <= ZF_TENSOR_FRAME_MAX_BATCH, "batch count out of range");
    zf_tensor_frame_batch_out_t out = {0};
    for (size_t i = 0; i < b.n; i++) {
        const zf_tensor_frame_entry_t *e = &b.entries[i];
        if (!zf_ok(e->error)) {
            s_check(e->tensor == NULL && zf_status_msg(&e->error)[0] != '\0',
                    "a refused entry with a value or no reason");
            continue;
        }
        s_check(e->key && e->has_step && (e->is_dead || e->tensor), "a decoded entry incomplete");
        bool added = false;
        s = zf_tensor_frame_batch_out_add(&out, e->key, e->step_id, e->tensor, e->is_dead,
                                          UINT64_MAX, &added);
        s_check(zf_ok(s), "a decoded entry fails to encode");
        /* entries that shared prefixes better than this encoder does
         * may not fit again: compare what did */
        if (!added) break;
    }
    uint8_t *again = NULL;
    size_t again_len = 0;
    size_t n_out = out.n;
    if (n_out && zf_ok(zf__tensor_frame_batch_out_seal(&out, &again, &again_len))) {
        zf_tensor_frame_batch_t back;
        s = s_decode_frame(again, again_len, &back);
        s_check(zf_ok(s) && back.n == n_out, "a re-encoded batch fails to decode");
        for (size_t i = 0, j = 0; i < b.n && j < back.n; i++) {
            const zf_tensor_frame_entry_t *e = &b.entries[i];
            if (!zf_ok(e->error)) continue;
            const zf_tensor_frame_entry_t *f = &back.entries[j++];
            s_check(zf_ok(f->error) && strcmp(e->key, f->key) == 0 && e->step_id == f->step_id &&
                        e->is_dead == f->is_dead && (!e->tensor) == (!f->tensor),
                    "an entry changed in a round trip");
            if (e->tensor && zf_dtype_size(zf_tensor_dtype(e->tensor)) > 0)
                s_check(zf_tensor_nbytes(e->tensor) == zf_tensor_nbytes(f->tensor) &&
                            memcmp(zf_tensor_data(e->tensor), zf_tensor_data(f->tensor),
                                   zf_tensor_nbytes(e->tensor)) == 0,
                        "entry bytes changed in a round trip");
        }
        zf_tensor_frame_batch_clear(&back);
        zf_status_clear(&s);
    }
    free(again);
    zf_tensor_frame_batch_out_clear(&out);
    zf_tensor_frame_batch_clear(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zf_buffer_set_alloc_limit((size_t)64 << 20);
    if (size < 2) return 0;
    size_t hlen = (size_t)data[0] | (size_t)data[1] << 8;
    if (hlen > size - 2) hlen = size - 2;
    if (zf_tensor_frame_is_batch(data + 2, size - 2)) {
        s_check_batch(data + 2, size - 2);
        if (hlen >= ZF_TENSOR_FRAME_BATCH_PREFIX) {
            uint8_t *copy = malloc(size - 2);
            if (!copy) return 0;
            memcpy(copy, data + 2, size - 2);
            for (int i = 0; i < 4; i++) copy[8 + i] = (uint8_t)(hlen >> (8 * i));
            s_check_batch(copy, size - 2);
            free(copy);
        }
        return 0;
    }
    static zf_tensor_frame_header_t h;
    static zf_tensor_frame_reply_t reply;
    bool is_reply = false;
    zf_status_t s = zf_tensor_frame_decode_any(data + 2, hlen, &h, &reply, &is_reply);
    if (zf_ok(s) && is_reply) {
        s_check(h.key[0] == '\0', "a reply filled the tensor header");
        s_check_reply(&reply);
        return 0;
    }
    if (!zf_ok(s)) {
        s_check(s.code == ZF_INVALID_ARGUMENT || s.code == ZF_RESOURCE_EXHAUSTED,
                "unexpected error code");
        s_check(zf_status_msg(&s)[0] != '\0' && h.key[0] == '\0', "a bad error");
        zf_status_clear(&s);
        return 0;
    }
    s_check_header(&h);
    s_check_payload(&h, data + 2 + hlen, size - 2 - hlen);
    return 0;
}
