/* Tensor frames, header half: owns the msgpack codec for frame 1 (a walk
 * that bounds msgpack-c's allocations, the field checks, encode, decode). */
#include <inttypes.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "common/tensor_frame.h"

/* ---- msgpack pre-scan ------------------------------------------------------ */

/* msgpack-c allocates a container's elements as soon as it reads the
 * declared count, so a 5-byte "array of 4 billion" would ask for 100 GB.
 * This walk runs first and refuses any count larger than the bytes left
 * (every element takes at least one), any truncation, and deep nesting. */
#define S_MP_MAX_DEPTH 16

static uint64_t s_be(const uint8_t *p, int width)
{
    uint64_t v = 0;
    for (int i = 0; i < width; i++) v = v << 8 | p[i];
    return v;
}

enum { S_MP_INVALID, S_MP_SCALAR, S_MP_BLOB, S_MP_ARRAY, S_MP_MAP };

/* Type bytes 0xc0..0xdf: the kind, the width of the length or count field
 * that follows, and the fixed body size (scalars) or extra bytes (ext). */
typedef struct {
    uint8_t kind, width, fixed;
} s_mp_spec_t;

static const s_mp_spec_t s_mp_specs[32] = {
    {S_MP_SCALAR, 0, 0},  /* c0 nil */
    {S_MP_INVALID, 0, 0}, /* c1 never used */
    {S_MP_SCALAR, 0, 0},  /* c2 false */
    {S_MP_SCALAR, 0, 0},  /* c3 true */
    {S_MP_BLOB, 1, 0},    /* c4 bin 8 */
    {S_MP_BLOB, 2, 0},    /* c5 bin 16 */
    {S_MP_BLOB, 4, 0},    /* c6 bin 32 */
    {S_MP_BLOB, 1, 1},    /* c7 ext 8 (+ type byte) */
    {S_MP_BLOB, 2, 1},    /* c8 ext 16 */
    {S_MP_BLOB, 4, 1},    /* c9 ext 32 */
    {S_MP_SCALAR, 0, 4},  /* ca float 32 */
    {S_MP_SCALAR, 0, 8},  /* cb float 64 */
    {S_MP_SCALAR, 0, 1},  /* cc uint 8 */
    {S_MP_SCALAR, 0, 2},  /* cd uint 16 */
    {S_MP_SCALAR, 0, 4},  /* ce uint 32 */
    {S_MP_SCALAR, 0, 8},  /* cf uint 64 */
    {S_MP_SCALAR, 0, 1},  /* d0 int 8 */
    {S_MP_SCALAR, 0, 2},  /* d1 int 16 */
    {S_MP_SCALAR, 0, 4},  /* d2 int 32 */
    {S_MP_SCALAR, 0, 8},  /* d3 int 64 */
    {S_MP_SCALAR, 0, 2},  /* d4 fixext 1 */
    {S_MP_SCALAR, 0, 3},  /* d5 fixext 2 */
    {S_MP_SCALAR, 0, 5},  /* d6 fixext 4 */
    {S_MP_SCALAR, 0, 9},  /* d7 fixext 8 */
    {S_MP_SCALAR, 0, 17}, /* d8 fixext 16 */
    {S_MP_BLOB, 1, 0},    /* d9 str 8 */
    {S_MP_BLOB, 2, 0},    /* da str 16 */
    {S_MP_BLOB, 4, 0},    /* db str 32 */
    {S_MP_ARRAY, 2, 0},   /* dc array 16 */
    {S_MP_ARRAY, 4, 0},   /* dd array 32 */
    {S_MP_MAP, 2, 0},     /* de map 16 */
    {S_MP_MAP, 4, 0},     /* df map 32 */
};

/* The spec of any type byte; fix-sized types carry their size in it. */
static s_mp_spec_t s_mp_spec(uint8_t b, uint64_t *n)
{
    *n = 0;
    if (b <= 0x7f || b >= 0xe0) return (s_mp_spec_t){S_MP_SCALAR, 0, 0}; /* fixint */
    if (b >= 0xc0) return s_mp_specs[b - 0xc0];
    *n = b & (b <= 0x9f ? 0x0f : 0x1f);
    return (s_mp_spec_t){b <= 0x8f ? S_MP_MAP : b <= 0x9f ? S_MP_ARRAY : S_MP_BLOB, 0, 0};
}

/* Reads one item's header at p[*at]: advances *at past the header and any
 * body, and sets *items to the elements it contains (0 for non-containers). */
static zf_status_t s_mp_item(const uint8_t *p, size_t len, size_t *at, uint64_t *items)
{
    size_t start = *at;
    uint8_t b = p[(*at)++];
    uint64_t n = 0;
    s_mp_spec_t spec = s_mp_spec(b, &n);
    int kind = spec.kind, width = spec.width;
    uint64_t body = spec.fixed;
    if (kind == S_MP_INVALID)
        return zf_invalid_argument("not msgpack: byte 0x%02x at offset %zu is never used", b,
                                   start);
    if ((size_t)width > len - *at)
        return zf_invalid_argument("not msgpack: truncated at offset %zu", start);
    if (width) n = s_be(p + *at, width);
    *at += (size_t)width;
    if (kind == S_MP_BLOB) body += n;
    if (body > len - *at) return zf_invalid_argument("not msgpack: truncated at offset %zu", start);
    *at += (size_t)body;
    *items = kind == S_MP_MAP ? 2 * n : kind == S_MP_ARRAY ? n : 0;
    if (*items > len - *at)
        return zf_invalid_argument("not msgpack: the container at offset %zu declares %" PRIu64
                                   " items but only %zu bytes follow",
                                   start, *items, len - *at);
    return ZF_STATUS_OK;
}

/* Checks that len bytes hold exactly one well-formed msgpack item. */
static zf_status_t s_mp_scan(const uint8_t *p, size_t len)
{
    uint64_t pending[S_MP_MAX_DEPTH + 1];
    int top = 0;
    size_t at = 0;
    pending[0] = 1;
    while (top >= 0) {
        if (pending[top] == 0) {
            top--;
            continue;
        }
        pending[top]--;
        if (at >= len) return zf_invalid_argument("not msgpack: truncated at offset %zu", at);
        uint64_t items = 0;
        ZF_TRY(s_mp_item(p, len, &at, &items));
        if (items == 0) continue;
        if (top == S_MP_MAX_DEPTH)
            return zf_invalid_argument("containers nest deeper than %d", S_MP_MAX_DEPTH);
        pending[++top] = items;
    }
    if (at != len) return zf_invalid_argument("%zu trailing bytes after the header map", len - at);
    return ZF_STATUS_OK;
}

/* ---- header checks ----------------------------------------------------------- */

bool zf__tensor_frame_holds_strings(zf_dtype_t dtype)
{
    return dtype == ZF_STRING || dtype == ZF_RESOURCE;
}

zf_status_t zf__tensor_frame_check_key_len(size_t len)
{
    if (len == 0) return zf_invalid_argument("field 'key' is empty");
    if (len > ZF_TENSOR_FRAME_MAX_KEY)
        return zf_invalid_argument("field 'key' is %zu bytes; at most %d are allowed", len,
                                   ZF_TENSOR_FRAME_MAX_KEY);
    return ZF_STATUS_OK;
}

zf_status_t zf__tensor_frame_check_key(const char *key, size_t len)
{
    ZF_TRY(zf__tensor_frame_check_key_len(len));
    if (memchr(key, '\0', len)) return zf_invalid_argument("field 'key' contains a zero byte");
    return ZF_STATUS_OK;
}

zf_status_t zf__tensor_frame_key_len(const char *key, size_t *len)
{
    *len = 0;
    if (!key) return zf_invalid_argument("field 'key' is missing");
    *len = strnlen(key, ZF_TENSOR_FRAME_MAX_KEY + 1);
    return zf__tensor_frame_check_key_len(*len);
}

static zf_status_t s_check_dtype(const zf_tensor_frame_header_t *h)
{
    int d = (int)h->dtype;
    if (d == ZF_INVALID && h->is_dead) return ZF_STATUS_OK;
    if (zf_dtype_is_ref(d) && zf_dtype_valid(zf_dtype_base(d)))
        return zf_invalid_argument("field 'dtype': %s is a reference type", zf_dtype_enum_name(d));
    if (!zf_dtype_valid(d)) return zf_invalid_argument("field 'dtype': %d is not a data type", d);
    if (zf_dtype_size(h->dtype) == 0 && !zf__tensor_frame_holds_strings(h->dtype))
        return zf_invalid_argument("field 'dtype': %s tensors have no wire encoding",
                                   zf_dtype_enum_name(d));
    return ZF_STATUS_OK;
}

static zf_status_t s_check_text(const char *field, const char *text, size_t cap, bool empty_ok)
{
    size_t len = strnlen(text, cap + 1);
    if (len > cap) return zf_invalid_argument("field '%s' is longer than %zu bytes", field, cap);
    if (len == 0 && !empty_ok) return zf_invalid_argument("field '%s' is empty", field);
    return ZF_STATUS_OK;
}

/* An IPC offer: a live fixed-size tensor, no payload, and a handle that
 * covers exactly the tensor's need bytes. */
static zf_status_t s_check_ipc(const zf_tensor_frame_header_t *h, uint64_t need)
{
    const zf_tensor_frame_ipc_t *ipc = &h->ipc;
    if (h->is_dead) return zf_invalid_argument("field 'ipc': a dead tensor cannot be offered");
    if (zf__tensor_frame_holds_strings(h->dtype))
        return zf_invalid_argument("field 'ipc': %s tensors cannot be offered",
                                   zf_dtype_name(h->dtype));
    if (h->len != 0)
        return zf_invalid_argument("field 'len': an IPC offer carries no bytes (len %" PRIu64 ")",
                                   h->len);
    if (ipc->nbytes != need || need == 0)
        return zf_invalid_argument("field 'ipc': nbytes %" PRIu64 " but the tensor needs %" PRIu64,
                                   ipc->nbytes, need);
    if (ipc->offset > INT64_MAX - ipc->nbytes)
        return zf_invalid_argument("field 'ipc': offset %" PRIu64 " is out of range", ipc->offset);
    if (ipc->device < 0)
        return zf_invalid_argument("field 'ipc': device %" PRId32 " is negative", ipc->device);
    if (ipc->id == 0 || ipc->id > INT64_MAX)
        return zf_invalid_argument("field 'ipc': id %" PRIu64 " is out of range", ipc->id);
    return s_check_text("host", ipc->host, ZF_TENSOR_FRAME_MAX_HOST, false);
}

/* A shared-memory offer: as an IPC offer, a live fixed-size tensor, no
 * payload, and a range of exactly the tensor's need bytes. */
static zf_status_t s_check_shm(const zf_tensor_frame_header_t *h, uint64_t need)
{
    const zf_tensor_frame_shm_t *shm = &h->shm;
    if (h->has_ipc) return zf_invalid_argument("fields 'ipc' and 'shm' exclude each other");
    if (h->is_dead) return zf_invalid_argument("field 'shm': a dead tensor cannot be offered");
    if (zf__tensor_frame_holds_strings(h->dtype))
        return zf_invalid_argument("field 'shm': %s tensors cannot be offered",
                                   zf_dtype_name(h->dtype));
    if (h->len != 0)
        return zf_invalid_argument(
            "field 'len': a shared-memory offer carries no bytes (len %" PRIu64 ")", h->len);
    if (shm->nbytes != need || need == 0)
        return zf_invalid_argument("field 'shm': nbytes %" PRIu64 " but the tensor needs %" PRIu64,
                                   shm->nbytes, need);
    if (shm->offset > INT64_MAX - shm->nbytes)
        return zf_invalid_argument("field 'shm': offset %" PRIu64 " is out of range", shm->offset);
    if (shm->id == 0 || shm->id > INT64_MAX)
        return zf_invalid_argument("field 'shm': id %" PRIu64 " is out of range", shm->id);
    if (shm->rel > INT64_MAX || shm->rel % 8 != 0)
        return zf_invalid_argument("field 'shm': rel %" PRIu64 " is not an 8-byte aligned offset",
                                   shm->rel);
    ZF_TRY(s_check_text("name", shm->name, ZF_TENSOR_FRAME_MAX_SHM_NAME, false));
    return s_check_text("host", shm->host, ZF_TENSOR_FRAME_MAX_HOST, false);
}

/* "len" against dtype and shape: exact for fixed-size types; for strings
 * at least the 8-byte length of each element, which also bounds the
 * element count by the bytes that actually arrive. */
static zf_status_t s_check_len(const zf_tensor_frame_header_t *h)
{
    char sbuf[ZF_SHAPE_STRING_MAX];
    int64_t n = 0;
    zf_status_t s = zf_shape_num_elements(&h->shape, &n);
    if (!zf_ok(s)) return zf_status_prefix(s, "field 'shape'");
    if (h->is_dead || h->dtype == ZF_INVALID) {
        if (h->has_ipc) return zf_invalid_argument("field 'ipc': a dead tensor cannot be offered");
        if (h->has_shm) return zf_invalid_argument("field 'shm': a dead tensor cannot be offered");
        if (h->len != 0)
            return zf_invalid_argument(
                "field 'len': a dead tensor carries no bytes (len %" PRIu64 ")", h->len);
        return ZF_STATUS_OK;
    }
    uint64_t elem = zf__tensor_frame_holds_strings(h->dtype) ? 8 : zf_dtype_size(h->dtype);
    if ((uint64_t)n > INT64_MAX / elem)
        return zf_invalid_argument("field 'shape': %s %s is too large to address",
                                   zf_dtype_name(h->dtype),
                                   zf_shape_to_string(&h->shape, sbuf, sizeof sbuf));
    uint64_t need = (uint64_t)n * elem;
    if (h->has_shm) return s_check_shm(h, need);
    if (h->has_ipc) return s_check_ipc(h, need);
    if (zf__tensor_frame_holds_strings(h->dtype) && h->len < need)
        return zf_invalid_argument("field 'len': %" PRIu64 " bytes cannot hold %" PRId64
                                   " strings (each needs an 8-byte length)",
                                   h->len, n);
    if (!zf__tensor_frame_holds_strings(h->dtype) && h->len != need)
        return zf_invalid_argument(
            "field 'len': %" PRIu64 " bytes declared but %s %s needs %" PRIu64, h->len,
            zf_dtype_name(h->dtype), zf_shape_to_string(&h->shape, sbuf, sizeof sbuf), need);
    return ZF_STATUS_OK;
}

/* "chunk": only for a live fixed-size tensor's own bytes, at least
 * ZF_TENSOR_FRAME_MIN_CHUNK and fewer than "len" (two chunks or more). */
static zf_status_t s_check_chunk(const zf_tensor_frame_header_t *h)
{
    if (h->is_dead || h->has_ipc || h->has_shm || zf__tensor_frame_holds_strings(h->dtype))
        return zf_invalid_argument("field 'chunk': only the bytes of a live tensor of a fixed-size "
                                   "dtype are sent in chunks");
    if (h->chunk < ZF_TENSOR_FRAME_MIN_CHUNK)
        return zf_invalid_argument("field 'chunk': %" PRIu64 " bytes; a chunk has at least %d",
                                   h->chunk, ZF_TENSOR_FRAME_MIN_CHUNK);
    if (h->chunk >= h->len)
        return zf_invalid_argument("field 'chunk': %" PRIu64 " bytes hold the whole %" PRIu64
                                   "-byte payload; a chunked one needs two chunks or more",
                                   h->chunk, h->len);
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_frame_check_header(const zf_tensor_frame_header_t *h)
{
    size_t key_len = strnlen(h->key, sizeof h->key);
    if (key_len == sizeof h->key)
        return zf_invalid_argument("field 'key' is longer than %d bytes", ZF_TENSOR_FRAME_MAX_KEY);
    ZF_TRY(zf__tensor_frame_check_key_len(key_len)); /* a C string: no zero byte within */
    return zf__tensor_frame_check_fields(h);
}

zf_status_t zf__tensor_frame_check_fields(const zf_tensor_frame_header_t *h)
{
    ZF_TRY(s_check_dtype(h));
    if (h->shape.rank < 0 || h->shape.rank > ZF_MAX_RANK)
        return zf_invalid_argument("field 'shape' has rank %d; at most %d is allowed",
                                   h->shape.rank, ZF_MAX_RANK);
    for (int i = 0; i < h->shape.rank; i++)
        if (h->shape.dims[i] < 0)
            return zf_invalid_argument("field 'shape': dim %d is %" PRId64
                                       "; dims must be non-negative",
                                       i, h->shape.dims[i]);
    if (h->len > INT64_MAX)
        return zf_invalid_argument("field 'len' %" PRIu64 " is out of range", h->len);
    ZF_TRY(s_check_len(h));
    return h->chunk ? s_check_chunk(h) : ZF_STATUS_OK;
}

/* ---- header encoding ------------------------------------------------------------ */

typedef struct {
    uint8_t *buf;
    size_t cap, len;
} s_sink_t;

static int s_sink_write(void *data, const char *buf, size_t len)
{
    s_sink_t *sink = data;
    if (len > sink->cap - sink->len) return -1;
    memcpy(sink->buf + sink->len, buf, len);
    sink->len += len;
    return 0;
}

static int s_pack_name(msgpack_packer *pk, const char *name)
{
    return msgpack_pack_str_with_body(pk, name, strlen(name));
}

static int s_pack_ipc(msgpack_packer *pk, const zf_tensor_frame_ipc_t *ipc)
{
    int rc = s_pack_name(pk, "ipc");
    rc |= msgpack_pack_map(pk, 6);
    rc |= s_pack_name(pk, "handle");
    rc |= msgpack_pack_bin_with_body(pk, ipc->handle, sizeof ipc->handle);
    rc |= s_pack_name(pk, "offset");
    rc |= msgpack_pack_uint64(pk, ipc->offset);
    rc |= s_pack_name(pk, "nbytes");
    rc |= msgpack_pack_uint64(pk, ipc->nbytes);
    rc |= s_pack_name(pk, "device");
    rc |= msgpack_pack_int32(pk, ipc->device);
    rc |= s_pack_name(pk, "id");
    rc |= msgpack_pack_uint64(pk, ipc->id);
    rc |= s_pack_name(pk, "host");
    rc |= s_pack_name(pk, ipc->host);
    return rc;
}

static int s_pack_shm(msgpack_packer *pk, const zf_tensor_frame_shm_t *shm)
{
    int rc = s_pack_name(pk, "shm");
    rc |= msgpack_pack_map(pk, shm->rel ? 6 : 5);
    rc |= s_pack_name(pk, "name");
    rc |= s_pack_name(pk, shm->name);
    rc |= s_pack_name(pk, "offset");
    rc |= msgpack_pack_uint64(pk, shm->offset);
    rc |= s_pack_name(pk, "nbytes");
    rc |= msgpack_pack_uint64(pk, shm->nbytes);
    rc |= s_pack_name(pk, "id");
    rc |= msgpack_pack_uint64(pk, shm->id);
    rc |= s_pack_name(pk, "host");
    rc |= s_pack_name(pk, shm->host);
    if (shm->rel) {
        rc |= s_pack_name(pk, "rel");
        rc |= msgpack_pack_uint64(pk, shm->rel);
    }
    return rc;
}

/* Packs h into sink; -1 when the sink is too small. */
static int s_pack_header(const zf_tensor_frame_header_t *h, s_sink_t *sink)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sink, s_sink_write);
    /* One statement per item: the packing order is the wire order. */
    int rc = msgpack_pack_map(&pk, 7 + (h->has_ipc || h->has_shm) + (h->chunk != 0));
    rc |= s_pack_name(&pk, "v");
    rc |= msgpack_pack_int(&pk, ZF_TENSOR_FRAME_VERSION);
    rc |= s_pack_name(&pk, "key");
    rc |= msgpack_pack_str_with_body(&pk, h->key, strlen(h->key));
    rc |= s_pack_name(&pk, "step");
    rc |= msgpack_pack_int64(&pk, h->step_id);
    rc |= s_pack_name(&pk, "dtype");
    rc |= msgpack_pack_int(&pk, (int)h->dtype);
    rc |= s_pack_name(&pk, "shape");
    rc |= msgpack_pack_array(&pk, (size_t)h->shape.rank);
    for (int i = 0; i < h->shape.rank; i++) rc |= msgpack_pack_int64(&pk, h->shape.dims[i]);
    rc |= s_pack_name(&pk, "dead");
    rc |= h->is_dead ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    rc |= s_pack_name(&pk, "len");
    rc |= msgpack_pack_uint64(&pk, h->len);
    if (h->chunk) {
        rc |= s_pack_name(&pk, "chunk");
        rc |= msgpack_pack_uint64(&pk, h->chunk);
    }
    if (h->has_ipc) rc |= s_pack_ipc(&pk, &h->ipc);
    if (h->has_shm) rc |= s_pack_shm(&pk, &h->shm);
    return rc ? -1 : 0;
}

zf_status_t zf_tensor_frame_encode_header(const zf_tensor_frame_header_t *h, uint8_t *buf,
                                          size_t cap, size_t *len)
{
    *len = 0;
    ZF_TRY(zf_tensor_frame_check_header(h));
    s_sink_t sink = {buf, cap, 0};
    if (s_pack_header(h, &sink) != 0)
        return zf_invalid_argument("tensor frame header does not fit in %zu bytes", cap);
    *len = sink.len;
    return ZF_STATUS_OK;
}

static zf_status_t s_check_reply(const zf_tensor_frame_reply_t *r)
{
    if (r->id == 0 || r->id > INT64_MAX)
        return zf_invalid_argument("field 'reply': id %" PRIu64 " is out of range", r->id);
    return s_check_text("why", r->why, ZF_TENSOR_FRAME_MAX_WHY, true);
}

zf_status_t zf_tensor_frame_encode_reply(const zf_tensor_frame_reply_t *r, uint8_t *buf, size_t cap,
                                         size_t *len)
{
    *len = 0;
    ZF_TRY(s_check_reply(r));
    s_sink_t sink = {buf, cap, 0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sink, s_sink_write);
    int rc = msgpack_pack_map(&pk, 5);
    rc |= s_pack_name(&pk, "v");
    rc |= msgpack_pack_int(&pk, ZF_TENSOR_FRAME_VERSION);
    rc |= s_pack_name(&pk, "reply");
    rc |= msgpack_pack_uint64(&pk, r->id);
    rc |= s_pack_name(&pk, "step");
    rc |= msgpack_pack_int64(&pk, r->step_id);
    rc |= s_pack_name(&pk, "accepted");
    rc |= r->accepted ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    rc |= s_pack_name(&pk, "why");
    rc |= s_pack_name(&pk, r->why);
    if (rc) return zf_invalid_argument("tensor frame reply does not fit in %zu bytes", cap);
    *len = sink.len;
    return ZF_STATUS_OK;
}

/* Clears *out and sets its key (checked) and step id. */
static zf_status_t s_header_start(const char *key, int64_t step_id, zf_tensor_frame_header_t *out)
{
    memset(out, 0, sizeof *out);
    size_t key_len = 0;
    ZF_TRY(zf__tensor_frame_key_len(key, &key_len));
    memcpy(out->key, key, key_len + 1);
    out->step_id = step_id;
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_frame_header_for_ipc(const char *key, int64_t step_id, zf_dtype_t dtype,
                                           const zf_shape_t *shape,
                                           const zf_tensor_frame_ipc_t *ipc,
                                           zf_tensor_frame_header_t *out)
{
    ZF_TRY(s_header_start(key, step_id, out));
    out->dtype = dtype;
    out->shape = *shape;
    out->has_ipc = true;
    out->ipc = *ipc;
    zf_status_t s = zf_tensor_frame_check_header(out);
    if (!zf_ok(s)) memset(out, 0, sizeof *out);
    return s;
}

zf_status_t zf_tensor_frame_header_for_shm(const char *key, int64_t step_id, zf_dtype_t dtype,
                                           const zf_shape_t *shape,
                                           const zf_tensor_frame_shm_t *shm,
                                           zf_tensor_frame_header_t *out)
{
    ZF_TRY(s_header_start(key, step_id, out));
    out->dtype = dtype;
    out->shape = *shape;
    out->has_shm = true;
    out->shm = *shm;
    zf_status_t s = zf_tensor_frame_check_header(out);
    if (!zf_ok(s)) memset(out, 0, sizeof *out);
    return s;
}

/* Bytes of the string payload encoding of t; false on overflow. */
static bool s_strings_size(const zf_tensor_t *t, uint64_t *out)
{
    const zf_tstring_t *strs = zf_tensor_data(t);
    int64_t n = zf_tensor_num_elements(t);
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (strs[i].len > INT64_MAX - 8 || total > INT64_MAX - 8 - strs[i].len) return false;
        total += 8 + strs[i].len;
    }
    *out = total;
    return true;
}

zf_status_t zf_tensor_frame_header_from_tensor(const char *key, int64_t step_id,
                                               const zf_tensor_t *t, bool is_dead,
                                               zf_tensor_frame_header_t *out)
{
    memset(out, 0, sizeof *out);
    return zf__tensor_frame_header_fill(key, step_id, t, is_dead, out);
}

zf_status_t zf__tensor_frame_header_fill(const char *key, int64_t step_id, const zf_tensor_t *t,
                                         bool is_dead, zf_tensor_frame_header_t *out)
{
    /* What encoding and the checks read, and nothing more: the key's tail,
     * "ipc" and "shm" stay as they were. */
    size_t key_len = 0;
    ZF_TRY(zf__tensor_frame_key_len(key, &key_len));
    memcpy(out->key, key, key_len + 1);
    return zf__tensor_frame_fill_fields(key, step_id, t, is_dead, out);
}

zf_status_t zf__tensor_frame_fill_fields(const char *key, int64_t step_id, const zf_tensor_t *t,
                                         bool is_dead, zf_tensor_frame_header_t *out)
{
    out->step_id = step_id;
    out->dtype = ZF_INVALID;
    out->len = 0;
    out->chunk = 0;
    out->has_ipc = out->has_shm = false;
    out->is_dead = is_dead;
    if (!t) {
        memset(&out->shape, 0, sizeof out->shape);
        if (!is_dead) return zf_invalid_argument("tensor '%s': a live tensor is required", key);
        return ZF_STATUS_OK; /* dtype INVALID, shape [] */
    }
    out->dtype = zf_tensor_dtype(t);
    out->shape = *zf_tensor_shape(t);
    if (out->dtype == ZF_VARIANT)
        return zf_unimplemented("tensor '%s': variant tensors cannot be sent", key);
    if (is_dead) return ZF_STATUS_OK; /* no bytes: where they live does not matter */
    if (zf_tensor_memory_kind(t) == ZF_MEMORY_DEVICE)
        return zf_status_new(ZF_FAILED_PRECONDITION,
                             "tensor '%s' is in device memory; copy it to the host to send it",
                             key);
    if (zf__tensor_frame_holds_strings(out->dtype)) {
        if (!s_strings_size(t, &out->len))
            return zf_invalid_argument("tensor '%s': strings too large to send", key);
    } else {
        out->len = zf_tensor_nbytes(t);
    }
    return ZF_STATUS_OK;
}

/* ---- header decoding -------------------------------------------------------------- */

/* Every top-level name of both message kinds: a tensor header has v..len
 * and may have ipc or shm; a reply has v, reply, step, accepted and why. */
enum {
    F_V,
    F_KEY,
    F_STEP,
    F_DTYPE,
    F_SHAPE,
    F_DEAD,
    F_LEN,
    F_CHUNK,
    F_IPC,
    F_SHM,
    F_REPLY,
    F_ACCEPTED,
    F_WHY,
    F_COUNT
};
static const char *const s_field_names[F_COUNT] = {"v",     "key",      "step",  "dtype", "shape",
                                                   "dead",  "len",      "chunk", "ipc",   "shm",
                                                   "reply", "accepted", "why"};

enum { I_HANDLE, I_OFFSET, I_NBYTES, I_DEVICE, I_ID, I_HOST, I_COUNT };
static const char *const s_ipc_names[I_COUNT] = {"handle", "offset", "nbytes",
                                                 "device", "id",     "host"};

/* "rel" is optional (senders before it answer releases by message only). */
enum { M_NAME, M_OFFSET, M_NBYTES, M_ID, M_HOST, M_REL, M_COUNT };
static const char *const s_shm_names[M_COUNT] = {"name", "offset", "nbytes", "id", "host", "rel"};

static const char *s_mp_type_name(msgpack_object_type type)
{
    switch (type) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "a bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "an integer";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "a float";
    case MSGPACK_OBJECT_STR: return "a string";
    case MSGPACK_OBJECT_ARRAY: return "an array";
    case MSGPACK_OBJECT_MAP: return "a map";
    case MSGPACK_OBJECT_BIN: return "binary";
    default: return "an extension";
    }
}

/* Finds the named fields among the map's entries (where is the map's
 * name in errors: "" or "field 'ipc': "); other string keys are left for
 * later versions. */
static zf_status_t s_find_fields(const msgpack_object_map *map, const char *const names[], int n,
                                 const char *where, const msgpack_object *found[])
{
    for (uint32_t i = 0; i < map->size; i++) {
        const msgpack_object *k = &map->ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR)
            return zf_invalid_argument("%smap key %u is %s, not a string", where, i,
                                       s_mp_type_name(k->type));
        /* The first byte rules out all but one or two names cheaply: this
         * runs for every field of every tensor. */
        const char *kp = k->via.str.ptr;
        size_t ks = k->via.str.size;
        for (int f = 0; f < n && ks > 0; f++) {
            if (names[f][0] != kp[0] || strlen(names[f]) != ks || memcmp(names[f], kp, ks) != 0)
                continue;
            if (found[f]) return zf_invalid_argument("%sfield '%s' appears twice", where, names[f]);
            found[f] = &map->ptr[i].val;
            break;
        }
    }
    return ZF_STATUS_OK;
}

/* Fields first..last (inclusive) must all be present. */
static zf_status_t s_require(const msgpack_object *found[], const char *const names[], int first,
                             int last, const char *where)
{
    for (int f = first; f <= last; f++)
        if (!found[f]) return zf_invalid_argument("%sfield '%s' is missing", where, names[f]);
    return ZF_STATUS_OK;
}

static zf_status_t s_get_int(const msgpack_object *o, const char *name, int64_t *out)
{
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
    } else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 > INT64_MAX)
            return zf_invalid_argument("field '%s' %" PRIu64 " is out of range", name, o->via.u64);
        *out = (int64_t)o->via.u64;
    } else {
        return zf_invalid_argument("field '%s' must be an integer, not %s", name,
                                   s_mp_type_name(o->type));
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_get_shape(const msgpack_object *o, zf_shape_t *out)
{
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return zf_invalid_argument("field 'shape' must be an array, not %s",
                                   s_mp_type_name(o->type));
    if (o->via.array.size > ZF_MAX_RANK)
        return zf_invalid_argument("field 'shape' has rank %u; at most %d is allowed",
                                   o->via.array.size, ZF_MAX_RANK);
    memset(out, 0, sizeof *out);
    out->rank = (int)o->via.array.size;
    for (int i = 0; i < out->rank; i++) {
        const msgpack_object *d = &o->via.array.ptr[i];
        if (d->type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
            d->type != MSGPACK_OBJECT_NEGATIVE_INTEGER)
            return zf_invalid_argument("field 'shape': dim %d must be an integer, not %s", i,
                                       s_mp_type_name(d->type));
        ZF_TRY(s_get_int(d, "shape", &out->dims[i]));
        if (out->dims[i] < 0)
            return zf_invalid_argument(
                "field 'shape': dim %d is %" PRId64 "; dims must be non-negative", i, out->dims[i]);
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_get_key(const msgpack_object *o, char *out)
{
    if (o->type != MSGPACK_OBJECT_STR)
        return zf_invalid_argument("field 'key' must be a string, not %s", s_mp_type_name(o->type));
    ZF_TRY(zf__tensor_frame_check_key(o->via.str.ptr, o->via.str.size));
    memcpy(out, o->via.str.ptr, o->via.str.size);
    out[o->via.str.size] = '\0';
    return ZF_STATUS_OK;
}

static zf_status_t s_get_text(const msgpack_object *o, const char *name, char *out, size_t cap)
{
    if (o->type != MSGPACK_OBJECT_STR)
        return zf_invalid_argument("field '%s' must be a string, not %s", name,
                                   s_mp_type_name(o->type));
    if (o->via.str.size > cap)
        return zf_invalid_argument("field '%s' is %u bytes; at most %zu are allowed", name,
                                   o->via.str.size, cap);
    if (memchr(o->via.str.ptr, '\0', o->via.str.size))
        return zf_invalid_argument("field '%s' contains a zero byte", name);
    memcpy(out, o->via.str.ptr, o->via.str.size);
    out[o->via.str.size] = '\0';
    return ZF_STATUS_OK;
}

static zf_status_t s_get_uint(const msgpack_object *o, const char *name, uint64_t *out)
{
    int64_t v = 0;
    ZF_TRY(s_get_int(o, name, &v));
    if (v < 0) return zf_invalid_argument("field '%s' is negative (%" PRId64 ")", name, v);
    *out = (uint64_t)v;
    return ZF_STATUS_OK;
}

static zf_status_t s_read_ipc_fields(const msgpack_object *f[], zf_tensor_frame_ipc_t *ipc)
{
    const msgpack_object *hd = f[I_HANDLE];
    if (hd->type != MSGPACK_OBJECT_BIN)
        return zf_invalid_argument("field 'handle' must be binary, not %s",
                                   s_mp_type_name(hd->type));
    if (hd->via.bin.size != sizeof ipc->handle)
        return zf_invalid_argument("field 'handle' is %u bytes; a CUDA IPC handle has %zu",
                                   hd->via.bin.size, sizeof ipc->handle);
    memcpy(ipc->handle, hd->via.bin.ptr, sizeof ipc->handle);
    int64_t device = 0;
    ZF_TRY(s_get_uint(f[I_OFFSET], "offset", &ipc->offset));
    ZF_TRY(s_get_uint(f[I_NBYTES], "nbytes", &ipc->nbytes));
    ZF_TRY(s_get_int(f[I_DEVICE], "device", &device));
    if (device < 0 || device > INT32_MAX)
        return zf_invalid_argument("field 'device' %" PRId64 " is not a CUDA ordinal", device);
    ipc->device = (int32_t)device;
    ZF_TRY(s_get_uint(f[I_ID], "id", &ipc->id));
    return s_get_text(f[I_HOST], "host", ipc->host, ZF_TENSOR_FRAME_MAX_HOST);
}

static zf_status_t s_read_ipc(const msgpack_object *o, zf_tensor_frame_ipc_t *ipc)
{
    if (o->type != MSGPACK_OBJECT_MAP)
        return zf_invalid_argument("field 'ipc' must be a map, not %s", s_mp_type_name(o->type));
    const msgpack_object *f[I_COUNT] = {NULL};
    ZF_TRY(s_find_fields(&o->via.map, s_ipc_names, I_COUNT, "field 'ipc': ", f));
    ZF_TRY(s_require(f, s_ipc_names, 0, I_COUNT - 1, "field 'ipc': "));
    zf_status_t s = s_read_ipc_fields(f, ipc);
    return zf_ok(s) ? s : zf_status_prefix(s, "field 'ipc'");
}

static zf_status_t s_read_shm_fields(const msgpack_object *f[], zf_tensor_frame_shm_t *shm)
{
    ZF_TRY(s_get_text(f[M_NAME], "name", shm->name, ZF_TENSOR_FRAME_MAX_SHM_NAME));
    ZF_TRY(s_get_uint(f[M_OFFSET], "offset", &shm->offset));
    ZF_TRY(s_get_uint(f[M_NBYTES], "nbytes", &shm->nbytes));
    ZF_TRY(s_get_uint(f[M_ID], "id", &shm->id));
    if (f[M_REL]) ZF_TRY(s_get_uint(f[M_REL], "rel", &shm->rel));
    return s_get_text(f[M_HOST], "host", shm->host, ZF_TENSOR_FRAME_MAX_HOST);
}

static zf_status_t s_read_shm(const msgpack_object *o, zf_tensor_frame_shm_t *shm)
{
    if (o->type != MSGPACK_OBJECT_MAP)
        return zf_invalid_argument("field 'shm' must be a map, not %s", s_mp_type_name(o->type));
    const msgpack_object *f[M_COUNT] = {NULL};
    ZF_TRY(s_find_fields(&o->via.map, s_shm_names, M_COUNT, "field 'shm': ", f));
    ZF_TRY(s_require(f, s_shm_names, 0, M_HOST, "field 'shm': "));
    zf_status_t s = s_read_shm_fields(f, shm);
    return zf_ok(s) ? s : zf_status_prefix(s, "field 'shm'");
}

static zf_status_t s_read_version(const msgpack_object *o)
{
    int64_t v = 0;
    ZF_TRY(s_get_int(o, "v", &v));
    if (v != ZF_TENSOR_FRAME_VERSION)
        return zf_invalid_argument("version %" PRId64 " is not supported (this side speaks %d)", v,
                                   ZF_TENSOR_FRAME_VERSION);
    return ZF_STATUS_OK;
}

static zf_status_t s_read_reply(const msgpack_object *f[], zf_tensor_frame_reply_t *r)
{
    ZF_TRY(s_require(f, s_field_names, F_REPLY, F_WHY, ""));
    ZF_TRY(s_require(f, s_field_names, F_STEP, F_STEP, ""));
    ZF_TRY(s_read_version(f[F_V]));
    ZF_TRY(s_get_uint(f[F_REPLY], "reply", &r->id));
    ZF_TRY(s_get_int(f[F_STEP], "step", &r->step_id));
    if (f[F_ACCEPTED]->type != MSGPACK_OBJECT_BOOLEAN)
        return zf_invalid_argument("field 'accepted' must be a bool, not %s",
                                   s_mp_type_name(f[F_ACCEPTED]->type));
    r->accepted = f[F_ACCEPTED]->via.boolean;
    ZF_TRY(s_get_text(f[F_WHY], "why", r->why, ZF_TENSOR_FRAME_MAX_WHY));
    return s_check_reply(r);
}

/* The version first: a later version may change any other field. */
static zf_status_t s_read_fields(const msgpack_object *f[], zf_tensor_frame_header_t *h)
{
    int64_t dtype = 0, len = 0;
    ZF_TRY(s_require(f, s_field_names, F_KEY, F_LEN, ""));
    ZF_TRY(s_read_version(f[F_V]));
    ZF_TRY(s_get_key(f[F_KEY], h->key));
    ZF_TRY(s_get_int(f[F_STEP], "step", &h->step_id));
    ZF_TRY(s_get_int(f[F_DTYPE], "dtype", &dtype));
    if (dtype < 0 || dtype > INT32_MAX)
        return zf_invalid_argument("field 'dtype': %" PRId64 " is not a data type", dtype);
    h->dtype = (zf_dtype_t)dtype;
    ZF_TRY(s_get_shape(f[F_SHAPE], &h->shape));
    if (f[F_DEAD]->type != MSGPACK_OBJECT_BOOLEAN)
        return zf_invalid_argument("field 'dead' must be a bool, not %s",
                                   s_mp_type_name(f[F_DEAD]->type));
    h->is_dead = f[F_DEAD]->via.boolean;
    ZF_TRY(s_get_int(f[F_LEN], "len", &len));
    if (len < 0) return zf_invalid_argument("field 'len' is negative (%" PRId64 ")", len);
    h->len = (uint64_t)len;
    h->chunk = 0;
    if (f[F_CHUNK]) ZF_TRY(s_get_uint(f[F_CHUNK], "chunk", &h->chunk));
    h->has_ipc = f[F_IPC] != NULL;
    if (h->has_ipc) ZF_TRY(s_read_ipc(f[F_IPC], &h->ipc));
    h->has_shm = f[F_SHM] != NULL;
    if (h->has_shm) ZF_TRY(s_read_shm(f[F_SHM], &h->shm));
    return zf_tensor_frame_check_header(h);
}

/* Either message kind from the top-level map; a "reply" field makes it a
 * reply. */
static zf_status_t s_read_message(const msgpack_object_map *map, zf_tensor_frame_header_t *h,
                                  zf_tensor_frame_reply_t *r, bool *is_reply)
{
    const msgpack_object *fields[F_COUNT] = {NULL};
    ZF_TRY(s_find_fields(map, s_field_names, F_COUNT, "", fields));
    ZF_TRY(s_require(fields, s_field_names, F_V, F_V, ""));
    *is_reply = fields[F_REPLY] != NULL;
    if (!*is_reply) return s_read_fields(fields, h);
    memset(r, 0, sizeof *r);
    return s_read_reply(fields, r);
}

static zf_status_t s_decode(const void *bytes, size_t len, zf_tensor_frame_header_t *out,
                            zf_tensor_frame_reply_t *reply, bool *is_reply)
{
    if (len > ZF_TENSOR_FRAME_MAX_HEADER)
        return zf_invalid_argument("%zu bytes exceed the limit of %d", len,
                                   ZF_TENSOR_FRAME_MAX_HEADER);
    if (len == 0) return zf_invalid_argument("the frame is empty");
    ZF_TRY(s_mp_scan(bytes, len));
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    msgpack_unpack_return rc = msgpack_unpack_next(&u, bytes, len, &off);
    zf_status_t s = ZF_STATUS_OK;
    if (rc != MSGPACK_UNPACK_SUCCESS) {
        s = rc == MSGPACK_UNPACK_NOMEM_ERROR ? zf_out_of_memory("a tensor frame header")
                                             : zf_invalid_argument("not msgpack (code %d)", rc);
    } else if (u.data.type != MSGPACK_OBJECT_MAP) {
        s = zf_invalid_argument("%s, not a map", s_mp_type_name(u.data.type));
    } else {
        s = s_read_message(&u.data.via.map, out, reply, is_reply);
    }
    msgpack_unpacked_destroy(&u);
    return s;
}

zf_status_t zf_tensor_frame_decode_any(const void *bytes, size_t len, zf_tensor_frame_header_t *h,
                                       zf_tensor_frame_reply_t *r, bool *is_reply)
{
    /* r is only written for a reply: tensors, the common case, skip it. */
    memset(h, 0, sizeof *h);
    *is_reply = false;
    zf_status_t s = s_decode(bytes, len, h, r, is_reply);
    if (zf_ok(s)) {
        if (*is_reply) memset(h, 0, sizeof *h);
        return s;
    }
    memset(h, 0, sizeof *h);
    memset(r, 0, sizeof *r);
    return zf_status_prefix(s, *is_reply ? "tensor frame reply" : "tensor frame header");
}

zf_status_t zf_tensor_frame_decode_header(const void *bytes, size_t len,
                                          zf_tensor_frame_header_t *out)
{
    zf_tensor_frame_reply_t r;
    bool is_reply = false;
    ZF_TRY(zf_tensor_frame_decode_any(bytes, len, out, &r, &is_reply));
    if (is_reply) return zf_invalid_argument("tensor frame header: a reply, not a tensor");
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_frame_decode_reply(const void *bytes, size_t len,
                                         zf_tensor_frame_reply_t *out)
{
    zf_tensor_frame_header_t h;
    bool is_reply = false;
    ZF_TRY(zf_tensor_frame_decode_any(bytes, len, &h, out, &is_reply));
    if (!is_reply) {
        memset(out, 0, sizeof *out);
        return zf_invalid_argument("tensor frame reply: a tensor, not a reply");
    }
    return ZF_STATUS_OK;
}
