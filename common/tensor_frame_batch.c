/* Tensor frames, batch half: the compact binary codec of batch messages
 * (common/tensor_frame.h, "Batches"). Written and read field by field,
 * without msgpack: a batch carries many small tensors, and what each one
 * costs to encode and decode is what bounds their rate. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/byte_order.h"
#include "common/tensor_frame.h"

/* The magic a batch's first frame starts with: 0xc1 is a byte msgpack
 * never uses, so no single tensor's header can start so. */
static const uint8_t s_magic[4] = {0xc1, 'Z', 'B', ZF_TENSOR_FRAME_BATCH_VERSION};

enum {
    S_DEAD = 1u << 0,       /* a dead tensor */
    S_NEW_PREFIX = 1u << 1, /* the key's first "plen" bytes become the next prefix */
    S_FLAGS = S_DEAD | S_NEW_PREFIX,
};

/* An entry's fixed part: flags, dtype, rank, prefix (u8 each), klen,
 * plen (u16), step, len (u64); then rank dims (i64) and klen key bytes. */
#define S_ENTRY_FIXED 24

/* How batches of the layouts no longer read started: layout 1 with the
 * msgpack map {"v": 1, "batch": array32}, layout 2 (two frames, entries
 * then payloads) with c1 'Z' 'B' 02. */
static const uint8_t s_layout1[11] = {0x82, 0xa1, 'v', 0x01, 0xa5, 'b', 'a', 't', 'c', 'h', 0xdd};
static const uint8_t s_layout2[4] = {0xc1, 'Z', 'B', 0x02};

/* The old layout len bytes at bytes start, or 0. */
static int s_old_layout(const void *bytes, size_t len)
{
    if (len >= sizeof s_layout1 && memcmp(bytes, s_layout1, sizeof s_layout1) == 0) return 1;
    if (len >= sizeof s_layout2 && memcmp(bytes, s_layout2, sizeof s_layout2) == 0) return 2;
    return 0;
}

bool zf_tensor_frame_is_batch(const void *bytes, size_t len)
{
    return (len >= sizeof s_magic && memcmp(bytes, s_magic, sizeof s_magic) == 0) ||
           s_old_layout(bytes, len) != 0;
}

void zf_tensor_frame_batch_prefix(uint32_t n, uint32_t entries_len, uint8_t *out)
{
    memcpy(out, s_magic, sizeof s_magic);
    zf_put_le32(out + 4, n);
    zf_put_le32(out + 8, entries_len);
    zf_put_le32(out + 12, 0);
}

/* Refuses a batch of a layout no longer read, by name. */
static zf_status_t s_check_layout(const void *bytes, size_t len)
{
    int old = s_old_layout(bytes, len);
    if (old)
        return zf_invalid_argument("layout %d (%s, from a sender of an older release) is no "
                                   "longer read; this receiver reads layout %d",
                                   old, old == 1 ? "msgpack headers" : "two frames",
                                   ZF_TENSOR_FRAME_BATCH_VERSION);
    if (len < ZF_TENSOR_FRAME_BATCH_PREFIX || memcmp(bytes, s_magic, sizeof s_magic) != 0)
        return zf_invalid_argument("the frame does not start as a batch");
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_frame_batch_split(const void *frame, size_t len, size_t *entries_len,
                                        size_t *payload_at)
{
    *entries_len = *payload_at = 0;
    ZF_TRY(zf_status_prefix(s_check_layout(frame, len), "tensor frame batch"));
    const uint8_t *p = frame;
    size_t end = zf_le32(p + 8);
    if (end < ZF_TENSOR_FRAME_BATCH_PREFIX || end > len)
        return zf_invalid_argument("tensor frame batch: its entries end at byte %zu of a "
                                   "%zu-byte frame",
                                   end, len);
    /* no payloads: the frame ends with the entries; else they start at
     * the next multiple of the alignment, zero bytes between */
    size_t at = end == len ? len : zf_tensor_frame_batch_offset(end);
    if (at > len)
        return zf_invalid_argument("tensor frame batch: the %zu-byte frame ends between its "
                                   "entries (to byte %zu) and its payloads (from byte %zu)",
                                   len, end, at);
    for (size_t i = end; i < at; i++)
        if (p[i] != 0)
            return zf_invalid_argument("tensor frame batch: byte %zu between the entries and "
                                       "the payloads is not zero",
                                       i);
    *entries_len = end;
    *payload_at = at;
    return ZF_STATUS_OK;
}

size_t zf_tensor_frame_batch_offset(size_t end)
{
    return (end + ZF_TENSOR_FRAME_BATCH_ALIGN - 1) / ZF_TENSOR_FRAME_BATCH_ALIGN *
           ZF_TENSOR_FRAME_BATCH_ALIGN;
}

/* ---- encoding ----------------------------------------------------------------------- */

/* Makes room for more bytes after *len in *buf (capacity *cap). */
static bool s_reserve(uint8_t **buf, size_t *cap, size_t len, size_t more)
{
    if (*cap >= len && more <= *cap - len) return true;
    size_t want = *cap ? *cap : 16384;
    while (want < len || want - len < more) {
        if (want > SIZE_MAX / 2) return false;
        want *= 2;
    }
    uint8_t *grown = realloc(*buf, want);
    if (!grown) return false;
    *buf = grown;
    *cap = want;
    return true;
}

/* Where key's prefix ends for sharing: after its third ';' (rendezvous
 * keys start "src;incarnation;dst;"), 0 when it has none or nothing
 * follows it. */
static size_t s_prefix_cut(const char *key, size_t len)
{
    int seen = 0;
    for (size_t i = 0; i < len; i++)
        if (key[i] == ';' && ++seen == 3) return i + 1 < len ? i + 1 : 0;
    return 0;
}

/* Writes entry h's fixed part and key at p (room checked): the key shares
 * b's last prefix when it starts with it, else defines a new one when it
 * has one and the batch has room for it. Returns the bytes written. */
static size_t s_put_entry(zf_tensor_frame_batch_out_t *b, const zf_tensor_frame_header_t *h,
                          const char *key, size_t key_len, uint8_t *p)
{
    uint8_t flags = h->is_dead ? S_DEAD : 0, prefix = 0;
    size_t skip = 0, plen = 0;
    if (b->prefixes && key_len > b->prefix_len &&
        memcmp(key, b->head + b->prefix_at, b->prefix_len) == 0) {
        prefix = (uint8_t)b->prefixes;
        skip = b->prefix_len;
    } else if (b->prefixes < ZF_TENSOR_FRAME_BATCH_PREFIXES &&
               (plen = s_prefix_cut(key, key_len)) != 0) {
        flags |= S_NEW_PREFIX;
    }
    p[0] = flags;
    p[1] = (uint8_t)h->dtype;
    p[2] = (uint8_t)h->shape.rank;
    p[3] = prefix;
    zf_put_le16(p + 4, (uint16_t)(key_len - skip));
    zf_put_le16(p + 6, (uint16_t)plen);
    zf_put_le64(p + 8, (uint64_t)h->step_id);
    zf_put_le64(p + 16, h->len);
    size_t at = S_ENTRY_FIXED;
    for (int d = 0; d < h->shape.rank; d++, at += 8)
        zf_put_le64(p + at, (uint64_t)h->shape.dims[d]);
    memcpy(p + at, key + skip, key_len - skip);
    if (flags & S_NEW_PREFIX) {
        b->prefixes++;
        b->prefix_at = (size_t)(p + at - b->head);
        b->prefix_len = plen;
    }
    return at + key_len - skip;
}

zf_status_t zf__tensor_frame_batch_out_seal(zf_tensor_frame_batch_out_t *b, uint8_t **frame,
                                            size_t *len)
{
    *frame = NULL;
    *len = 0;
    size_t at = b->payload_len ? zf_tensor_frame_batch_offset(b->head_len) : b->head_len;
    if (!s_reserve(&b->head, &b->head_cap, b->head_len, at - b->head_len + b->payload_len)) {
        zf_tensor_frame_batch_out_clear(b);
        return zf_out_of_memory("a batch frame");
    }
    zf_tensor_frame_batch_prefix(b->n, (uint32_t)b->head_len, b->head);
    memset(b->head + b->head_len, 0, at - b->head_len);
    if (b->payload_len) memcpy(b->head + at, b->payload, b->payload_len);
    *frame = b->head;
    *len = at + b->payload_len;
    b->head = NULL;
    zf_tensor_frame_batch_out_clear(b);
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_frame_batch_out_add(zf_tensor_frame_batch_out_t *b, const char *key,
                                          int64_t step_id, const zf_tensor_t *t, bool is_dead,
                                          uint64_t max_payload, bool *added)
{
    *added = false;
    size_t key_len = 0;
    ZF_TRY(zf__tensor_frame_key_len(key, &key_len));
    zf_tensor_frame_header_t h; /* filled in part: clearing it all would cost more than the rest */
    ZF_TRY(zf__tensor_frame_fill_fields(key, step_id, t, is_dead, &h));
    if (h.len > max_payload) return ZF_STATUS_OK;
    if (b->n >= ZF_TENSOR_FRAME_MAX_BATCH)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED, "a batch holds at most %d tensors",
                             ZF_TENSOR_FRAME_MAX_BATCH);
    if (!b->head_len) b->head_len = ZF_TENSOR_FRAME_BATCH_PREFIX; /* written when sent */
    size_t at = b->n ? zf_tensor_frame_batch_offset(b->payload_len) : 0;
    if (at + h.len > ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD) return ZF_STATUS_OK; /* a receiver's cap */
    size_t entry_max = S_ENTRY_FIXED + 8 * (size_t)h.shape.rank + key_len;
    /* within what a receiver takes: the entries, and the keys once their
     * prefixes are put back */
    if (b->head_len + entry_max > ZF_TENSOR_FRAME_MAX_BATCH_HEADER ||
        b->keys_len + key_len + 1 > ZF_TENSOR_FRAME_MAX_BATCH_HEADER)
        return ZF_STATUS_OK;
    if (!s_reserve(&b->head, &b->head_cap, b->head_len, entry_max) ||
        !s_reserve(&b->payload, &b->payload_cap, b->payload_len, at - b->payload_len + h.len))
        return zf_out_of_memory("a batch of tensors");
    if (h.len && !is_dead && zf__tensor_frame_holds_strings(h.dtype)) {
        zf__tensor_frame_write_strings(t, b->payload + at);
    } else if (h.len && !is_dead) {
        memcpy(b->payload + at, zf_tensor_data(t), (size_t)h.len);
    }
    if (at > b->payload_len) memset(b->payload + b->payload_len, 0, at - b->payload_len);
    b->head_len += s_put_entry(b, &h, key, key_len, b->head + b->head_len);
    b->payload_len = at + (size_t)h.len;
    b->keys_len += key_len + 1;
    b->n++;
    *added = true;
    return ZF_STATUS_OK;
}

void zf_tensor_frame_batch_out_clear(zf_tensor_frame_batch_out_t *b)
{
    free(b->head);
    free(b->payload);
    memset(b, 0, sizeof *b);
}

/* ---- decoding ----------------------------------------------------------------------- */

void zf_tensor_frame_batch_clear(zf_tensor_frame_batch_t *b)
{
    if (!b) return;
    for (size_t i = 0; i < b->n && b->entries; i++) {
        zf_tensor_frame_entry_t *e = &b->entries[i];
        /* most were handed on: nothing to drop, and no call to learn that */
        if (e->tensor) zf_tensor_unref(&e->tensor);
        if (!zf_ok(e->error)) zf_status_clear(&e->error);
    }
    free(b->entries);
    free(b->keys);
    memset(b, 0, sizeof *b);
}

/* One entry as laid out among the entries (located, not yet checked). */
typedef struct {
    const uint8_t *fixed; /* S_ENTRY_FIXED bytes */
    const uint8_t *dims;  /* rank of them */
    const char *own;      /* klen key bytes */
    size_t klen, plen;
    unsigned rank;
} s_raw_t;

/* The key prefixes defined so far: where each lies among the entries. */
typedef struct {
    const char *at[ZF_TENSOR_FRAME_BATCH_PREFIXES];
    size_t len[ZF_TENSOR_FRAME_BATCH_PREFIXES];
    unsigned n;
} s_prefixes_t;

/* Locates the entry at head[*at] into *e and moves *at past it; false
 * when it runs past the end of the entries (head_len). */
static bool s_locate(const uint8_t *head, size_t head_len, size_t *at, s_raw_t *e)
{
    if (head_len - *at < S_ENTRY_FIXED) return false;
    const uint8_t *p = head + *at;
    e->fixed = p;
    e->rank = p[2];
    e->klen = zf_le16(p + 4);
    e->plen = zf_le16(p + 6);
    size_t size = S_ENTRY_FIXED + 8 * (size_t)e->rank + e->klen;
    if (head_len - *at < size) return false;
    e->dims = p + S_ENTRY_FIXED;
    e->own = (const char *)e->dims + 8 * (size_t)e->rank;
    *at += size;
    return true;
}

/* Entry e's key prefix (*pre, *pre_len; none: 0 bytes), and a new prefix
 * it defines recorded in *px. Errors name what is wrong. */
static zf_status_t s_prefix(const s_raw_t *e, s_prefixes_t *px, const char **pre, size_t *pre_len)
{
    unsigned ref = e->fixed[3];
    *pre = NULL;
    *pre_len = 0;
    if (e->fixed[0] & S_NEW_PREFIX) {
        if (ref != 0) return zf_invalid_argument("a key prefix is both used and defined");
        if (e->plen == 0 || e->plen > e->klen)
            return zf_invalid_argument("a key prefix of %zu bytes in a %zu-byte key", e->plen,
                                       e->klen);
        if (px->n == ZF_TENSOR_FRAME_BATCH_PREFIXES)
            return zf_invalid_argument("more than %d key prefixes", ZF_TENSOR_FRAME_BATCH_PREFIXES);
        if (memchr(e->own, '\0', e->plen))
            return zf_invalid_argument("a key prefix contains a zero byte");
        px->at[px->n] = e->own;
        px->len[px->n++] = e->plen;
        return ZF_STATUS_OK;
    }
    if (e->plen != 0)
        return zf_invalid_argument("a prefix length of %zu without a new prefix", e->plen);
    if (ref > px->n)
        return zf_invalid_argument("key prefix %u is used before it is defined (%u so far)", ref,
                                   px->n);
    if (ref) {
        *pre = px->at[ref - 1];
        *pre_len = px->len[ref - 1];
    }
    return ZF_STATUS_OK;
}

/* A walk over a batch's entries, as both decoding passes make it. */
typedef struct {
    size_t at;  /* the next entry's byte */
    size_t end; /* where the payloads so far end */
    size_t i;   /* the next entry's number */
    s_prefixes_t px;
} s_walk_t;

/* One step of the walk: the next entry into *e, its key's prefix (*pre,
 * *pre_len; or *ps saying why it has none; owned by the caller) and its
 * payload's offset *off; false when it runs past the entries' end. */
static bool s_next(const uint8_t *head, size_t head_len, s_walk_t *w, s_raw_t *e, const char **pre,
                   size_t *pre_len, zf_status_t *ps, size_t *off)
{
    if (!s_locate(head, head_len, &w->at, e)) return false;
    *ps = s_prefix(e, &w->px, pre, pre_len);
    *off = w->i++ ? zf_tensor_frame_batch_offset(w->end) : 0;
    w->end = *off + (size_t)zf_le64(e->fixed + 16); /* checked by the measuring pass */
    return true;
}

/* Entry e's fields into h (all that the checks read but the key), checked
 * as a single header's. */
static zf_status_t s_fields(const s_raw_t *e, zf_tensor_frame_header_t *h)
{
    uint8_t flags = e->fixed[0];
    if (flags & ~(unsigned)S_FLAGS)
        return zf_invalid_argument("flags 0x%02x are unknown", flags & ~(unsigned)S_FLAGS);
    if (e->rank > ZF_MAX_RANK)
        return zf_invalid_argument("field 'shape' has rank %u; at most %d is allowed", e->rank,
                                   ZF_MAX_RANK);
    h->is_dead = flags & S_DEAD;
    h->dtype = (zf_dtype_t)e->fixed[1];
    memset(&h->shape, 0, sizeof h->shape); /* the dims past the rank are 0 */
    h->shape.rank = (int)e->rank;
    for (unsigned d = 0; d < e->rank; d++) h->shape.dims[d] = (int64_t)zf_le64(e->dims + 8 * d);
    h->step_id = (int64_t)zf_le64(e->fixed + 8);
    h->len = zf_le64(e->fixed + 16);
    h->chunk = 0;
    h->has_ipc = h->has_shm = false;
    return zf__tensor_frame_check_fields(h);
}

/* The last view a batch's decoding made and the entry it was made for. */
typedef struct {
    s_raw_t raw;
    const zf_tensor_t *view; /* NULL: none yet */
} s_like_t;

/* Whether entry e has the fields of entry like (a live tensor of the same
 * dtype and shape, as many bytes) and no unknown flags: the checks like
 * passed hold for it too. */
static bool s_same_fields(const s_raw_t *e, const s_raw_t *like)
{
    return (e->fixed[0] & ~(unsigned)S_NEW_PREFIX) == 0 && (like->fixed[0] & S_DEAD) == 0 &&
           e->fixed[1] == like->fixed[1] && e->rank == like->rank &&
           memcmp(e->fixed + 16, like->fixed + 16, 8) == 0 &&
           memcmp(e->dims, like->dims, 8 * (size_t)e->rank) == 0;
}

/* Entry i of n (e; its key's prefix pre, or pre_s saying why it has
 * none): payload len bytes at offset off of payload (which fixed-size
 * tensors view; NULL when the frame is empty), within the frame already;
 * decoded into *out, or refused with the reason. A readable key goes to
 * b->keys + *used. h is scratch. like: the last view made, whose checks e
 * skips when it has the same fields; a view made here becomes it. */
static void s_entry(const s_raw_t *e, const char *pre, size_t pre_len, zf_status_t pre_s, size_t i,
                    size_t n, zf_buffer_t *payload, size_t off, zf_tensor_frame_header_t *h,
                    zf_tensor_views_t *views, s_like_t *like, zf_tensor_frame_batch_t *b,
                    size_t *used, zf_tensor_frame_entry_t *out)
{
    zf_status_t s = pre_s;
    size_t key_len = pre_len + e->klen;
    char *k = b->keys + *used;
    if (zf_ok(s) && key_len <= ZF_TENSOR_FRAME_MAX_KEY) {
        if (pre_len) memcpy(k, pre, pre_len);
        memcpy(k + pre_len, e->own, e->klen);
        k[key_len] = '\0';
    }
    /* the length (the bytes not read when too long), then the entry's own
     * bytes: its prefix's were checked when the prefix was defined */
    if (zf_ok(s)) s = zf__tensor_frame_check_key_len(key_len);
    if (zf_ok(s) && memchr(e->own, '\0', e->klen))
        s = zf_invalid_argument("field 'key' contains a zero byte");
    bool made = false;
    if (zf_ok(s)) {
        out->key = k;
        out->key_len = key_len;
        *used += key_len + 1;
        made = like->view && s_same_fields(e, &like->raw);
        if (made) {
            s = zf_tensor_views_add_like(views, like->view, off, &out->tensor);
        } else {
            s = s_fields(e, h);
        }
    }
    if (!zf_ok(s) || made) {
        /* refused, or made like the last view */
    } else if (h->is_dead) {
        /* no bytes */
    } else if (zf__tensor_frame_holds_strings(h->dtype) || !payload || h->len == 0) {
        static const uint8_t none[1];
        const uint8_t *bytes = payload ? (const uint8_t *)zf_buffer_data(payload) + off : none;
        s = zf_tensor_frame_decode_payload(h, bytes, (size_t)h->len, &out->tensor);
    } else { /* a view of the received payloads: no copy */
        s = zf_tensor_views_add(views, h->dtype, &h->shape, payload, off, &out->tensor);
        if (zf_ok(s)) *like = (s_like_t){*e, out->tensor};
    }
    out->step_id = (int64_t)zf_le64(e->fixed + 8);
    out->has_step = true;
    out->is_dead = e->fixed[0] & S_DEAD;
    if (zf_ok(s)) return;
    zf_tensor_unref(&out->tensor);
    out->error = zf_status_prefix(s, "entry %zu of %zu", i, n);
}

/* Walks the n entries (head, head_len bytes): every one located, the
 * payloads so laid out ending exactly where the payload_len bytes of
 * them do, and the keys' total bytes (each key NUL-terminated) into
 * *keys. */
static zf_status_t s_measure(const uint8_t *head, size_t head_len, size_t n, size_t payload_len,
                             size_t *keys)
{
    s_walk_t w = {.at = ZF_TENSOR_FRAME_BATCH_PREFIX};
    *keys = 0;
    for (size_t i = 0; i < n; i++) {
        s_raw_t e = {0};
        const char *pre = NULL;
        size_t pre_len = 0, off = 0;
        zf_status_t ps = ZF_STATUS_OK;
        if (!s_next(head, head_len, &w, &e, &pre, &pre_len, &ps, &off))
            return zf_invalid_argument("entry %zu of %zu runs past the end of the entries "
                                       "(%zu bytes)",
                                       i, n, head_len);
        zf_status_clear(&ps); /* a bad prefix is its entry's alone */
        if (pre_len + e.klen <= ZF_TENSOR_FRAME_MAX_KEY) *keys += pre_len + e.klen + 1;
        uint64_t len = zf_le64(e.fixed + 16);
        if (off > payload_len || len > payload_len - off)
            return zf_invalid_argument("entry %zu of %zu: its %" PRIu64 " bytes at offset %zu are "
                                       "past the end of the payloads (%zu bytes)",
                                       i, n, len, off, payload_len);
    }
    if (w.at != head_len)
        return zf_invalid_argument("%zu bytes follow the last of %zu entries", head_len - w.at, n);
    if (w.end != payload_len)
        return zf_invalid_argument("the payloads end at byte %zu of %zu", w.end, payload_len);
    if (*keys > ZF_TENSOR_FRAME_MAX_BATCH_HEADER)
        return zf_invalid_argument("the keys take %zu bytes; a batch's may take at most %d", *keys,
                                   ZF_TENSOR_FRAME_MAX_BATCH_HEADER);
    return ZF_STATUS_OK;
}

/* Decodes the n entries (measured) into out. */
static zf_status_t s_read(const uint8_t *head, size_t head_len, size_t n, zf_buffer_t *payload,
                          size_t keys, zf_tensor_frame_batch_t *out)
{
    zf_tensor_frame_header_t *h = malloc(sizeof *h);
    zf_tensor_views_t *views = NULL;
    zf_status_t vs = payload ? zf_tensor_views_new(n, &views) : ZF_STATUS_OK;
    if (!h || !zf_ok(vs) || !(out->entries = calloc(n, sizeof *out->entries)) ||
        !(out->keys = malloc(keys ? keys : 1))) {
        free(h);
        zf_tensor_views_release(&views);
        zf_status_clear(&vs);
        return zf_out_of_memory("a tensor frame batch");
    }
    out->n = n;
    s_walk_t w = {.at = ZF_TENSOR_FRAME_BATCH_PREFIX};
    size_t used = 0;
    s_like_t like = {.view = NULL};
    for (size_t i = 0; i < n; i++) {
        s_raw_t e = {0};
        const char *pre = NULL;
        size_t pre_len = 0, off = 0;
        zf_status_t ps = ZF_STATUS_OK;
        (void)s_next(head, head_len, &w, &e, &pre, &pre_len, &ps, &off); /* measured */
        s_entry(&e, pre, pre_len, ps, i, n, payload, off, h, views, &like, out, &used,
                &out->entries[i]);
    }
    zf_tensor_views_release(&views); /* what is left of it goes with the views made */
    free(h);
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_frame_decode_batch(const void *head, size_t head_len, zf_buffer_t *payload,
                                         zf_tensor_frame_batch_t *out)
{
    memset(out, 0, sizeof *out);
    size_t payload_len = payload ? zf_buffer_size(payload) : 0;
    zf_buffer_t *copy = NULL;
    zf_status_t s = ZF_STATUS_OK;
    size_t n = 0, keys = 0;
    if (head_len > ZF_TENSOR_FRAME_MAX_BATCH_HEADER)
        s = zf_invalid_argument("%zu bytes exceed the limit of %d", head_len,
                                ZF_TENSOR_FRAME_MAX_BATCH_HEADER);
    else if (payload_len > ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD)
        s = zf_invalid_argument("the payloads take %zu bytes; a batch carries at most %d",
                                payload_len, ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD);
    else if (!zf_ok(s = s_check_layout(head, head_len)))
        ;
    else if ((n = zf_le32((const uint8_t *)head + 4)) == 0 || n > ZF_TENSOR_FRAME_MAX_BATCH)
        s = zf_invalid_argument("%zu entries; 1 to %d are allowed", n, ZF_TENSOR_FRAME_MAX_BATCH);
    else if (zf_le32((const uint8_t *)head + 8) != head_len || zf_le32((const uint8_t *)head + 12))
        s = zf_invalid_argument("the prefix says the entries end at byte %" PRIu32
                                " (reserved word %" PRIu32 "); they end at byte %zu",
                                zf_le32((const uint8_t *)head + 8),
                                zf_le32((const uint8_t *)head + 12), head_len);
    if (zf_ok(s)) s = s_measure(head, head_len, n, payload_len, &keys);
    if (zf_ok(s) && payload &&
        (uintptr_t)zf_buffer_data(payload) % ZF_TENSOR_FRAME_BATCH_ALIGN != 0) {
        /* the entries view it: it must be aligned as they are */
        s = zf_buffer_new_uninit(payload_len, &copy);
        if (zf_ok(s)) memcpy(zf_buffer_data(copy), zf_buffer_data(payload), payload_len);
        payload = copy;
    }
    if (zf_ok(s)) s = s_read(head, head_len, n, payload, keys, out);
    zf_buffer_unref(&copy); /* the entries hold their own references */
    if (zf_ok(s)) return s;
    zf_tensor_frame_batch_clear(out);
    return zf_status_prefix(s, "tensor frame batch");
}
