/* Tensor bundles: the table layer (blocks, handles, footer), the bundle
 * layer (header and entries, tensor bytes) and the files. The index is
 * small (metadata only): it is read whole into memory and every entry is
 * decoded once, so a lookup is a binary search. */
#include "common/tensor_bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/byte_order.h"
#include "common/crc32c.h"
#include "common/random.h"
#include "proto/tensor_bundle.pb-c.h"

#define S_MAGIC            0xdb4775248b80fb57ull
#define S_FOOTER_LEN       48
#define S_HANDLE_MAX_LEN   20
#define S_TRAILER_LEN      5
#define S_BLOCK_SIZE       262144
#define S_RESTART_INTERVAL 16
#define S_VERSION          1 /* kTensorBundleVersion */

/* ---- little-endian and varint coding --------------------------------------- */

/* Decodes a varint of at most max_bits from [*p, end); false when it runs
 * past end, is longer than such a varint may be, or is too large. */
static bool s_varint(const uint8_t **p, const uint8_t *end, int max_bits, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7fu) << shift;
        if (!(b & 0x80u)) {
            if (max_bits < 64 && (v >> max_bits) != 0) return false;
            *out = v;
            return true;
        }
    }
    return false;
}

typedef struct {
    uint8_t *data;
    size_t len, cap;
    bool oom;
} s_buf_t;

static void s_put(s_buf_t *b, const void *bytes, size_t n)
{
    if (b->oom || n == 0) return;
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *grown = realloc(b->data, cap);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
}

static void s_put_varint(s_buf_t *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80u) {
        tmp[n++] = (uint8_t)(v | 0x80u);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    s_put(b, tmp, n);
}

static void s_put_le32(s_buf_t *b, uint32_t v)
{
    uint8_t tmp[4];
    zf_put_le32(tmp, v);
    s_put(b, tmp, 4);
}

static void s_buf_free(s_buf_t *b)
{
    free(b->data);
    *b = (s_buf_t){0};
}

/* Bytewise order, a prefix before its extensions. */
static int s_key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

/* ---- files ------------------------------------------------------------------- */

static zf_status_t s_file_error(const char *what, const char *path)
{
    int e = errno;
    zf_code_t code = e == ENOENT    ? ZF_NOT_FOUND
                     : e == EACCES  ? ZF_PERMISSION_DENIED
                     : e == ENOSPC  ? ZF_RESOURCE_EXHAUSTED
                     : e == ENOTDIR ? ZF_FAILED_PRECONDITION
                                    : ZF_UNKNOWN;
    return zf_status_new(code, "%s %s: %s", what, path, strerror(e));
}

static zf_status_t s_pread_all(int fd, void *buf, size_t n, uint64_t off, const char *path)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return s_file_error("cannot read", path);
        if (got == 0) return zf_status_new(ZF_DATA_LOSS, "%s: unexpected end of file", path);
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return ZF_STATUS_OK;
}

static char *s_strcat(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

bool zf_bundle_data_filename(const char *prefix, int32_t shard, int32_t num_shards, char *buf,
                             size_t cap)
{
    int n = snprintf(buf, cap, "%s.data-%05" PRId32 "-of-%05" PRId32, prefix, shard, num_shards);
    return n >= 0 && (size_t)n < cap;
}

static char *s_data_filename(const char *prefix, int32_t shard, int32_t num_shards)
{
    size_t cap = strlen(prefix) + 64;
    char *s = malloc(cap);
    if (s && !zf_bundle_data_filename(prefix, shard, num_shards, s, cap)) {
        free(s);
        s = NULL;
    }
    return s;
}

/* ---- reading the table ----------------------------------------------------------- */

typedef struct {
    char *key; /* NUL-terminated copy */
    size_t key_len;
    const uint8_t *value; /* into the reader's copy of the index */
    size_t value_len;
} s_kv_t;

struct zf_bundle_reader {
    char *prefix;
    char *index_name;
    uint8_t *file;
    size_t file_len;
    s_kv_t *kvs; /* every key, the header's ("") first */
    size_t n, cap;
    size_t key_bytes; /* decoded key bytes, bounded against expansion */
    int32_t num_shards;
};

static zf_status_t s_corrupt(const zf_bundle_reader_t *r, const char *what)
{
    return zf_status_new(ZF_DATA_LOSS, "checkpoint index %s is corrupt: %s", r->index_name, what);
}

typedef struct {
    uint64_t offset, size;
} s_handle_t;

static bool s_handle_decode(const uint8_t **p, const uint8_t *end, s_handle_t *h)
{
    return s_varint(p, end, 64, &h->offset) && s_varint(p, end, 64, &h->size);
}

/* The contents of the block h points at, after checking its trailer. */
static zf_status_t s_read_block(const zf_bundle_reader_t *r, s_handle_t h, const uint8_t **out,
                                size_t *len)
{
    size_t body = r->file_len - S_FOOTER_LEN;
    if (h.offset > body || h.size > body - h.offset || body - h.offset - h.size < S_TRAILER_LEN)
        return s_corrupt(r, "bad block handle (truncated block read)");
    const uint8_t *b = r->file + h.offset;
    size_t n = (size_t)h.size;
    uint32_t stored = zf_crc32c_unmask(zf_le32(b + n + 1));
    if (zf_crc32c(b, n + 1) != stored) return s_corrupt(r, "block checksum mismatch");
    if (b[n] == 1)
        return zf_status_new(ZF_UNIMPLEMENTED,
                             "checkpoint index %s has Snappy-compressed blocks, which are not "
                             "supported",
                             r->index_name);
    if (b[n] != 0) return s_corrupt(r, "bad block type");
    *out = b;
    *len = n;
    return ZF_STATUS_OK;
}

typedef zf_status_t (*s_entry_fn)(zf_bundle_reader_t *r, const uint8_t *key, size_t key_len,
                                  const uint8_t *value, size_t value_len, void *arg);

/* Walks every entry of a block, rebuilding the prefix-compressed keys. */
static zf_status_t s_block_entries(zf_bundle_reader_t *r, const uint8_t *b, size_t n, s_entry_fn fn,
                                   void *arg)
{
    if (n < 4) return s_corrupt(r, "bad block contents (too short)");
    uint32_t num_restarts = zf_le32(b + n - 4);
    if (num_restarts == 0 || num_restarts > (n - 4) / 4)
        return s_corrupt(r, "bad block contents (restart count)");
    size_t limit = n - 4 - (size_t)num_restarts * 4;
    for (uint32_t i = 0; i < num_restarts; i++)
        if (zf_le32(b + limit + (size_t)i * 4) > limit)
            return s_corrupt(r, "bad block contents (restart offset)");
    s_buf_t key = {0};
    const uint8_t *p = b, *end = b + limit;
    zf_status_t s = ZF_STATUS_OK;
    while (p < end && zf_ok(s)) {
        uint64_t shared, non_shared, value_len;
        if (!s_varint(&p, end, 32, &shared) || !s_varint(&p, end, 32, &non_shared) ||
            !s_varint(&p, end, 32, &value_len) || shared > key.len ||
            non_shared > (size_t)(end - p) || value_len > (size_t)(end - p) - non_shared) {
            s = s_corrupt(r, "bad entry in block");
            break;
        }
        key.len = (size_t)shared;
        s_put(&key, p, (size_t)non_shared);
        if (key.oom) {
            s = zf_out_of_memory("checkpoint index key");
            break;
        }
        p += non_shared;
        s = fn(r, key.len ? key.data : (const uint8_t *)"", key.len, p, (size_t)value_len, arg);
        p += value_len;
    }
    s_buf_free(&key);
    return s;
}

static zf_status_t s_add_kv(zf_bundle_reader_t *r, const uint8_t *key, size_t key_len,
                            const uint8_t *value, size_t value_len, void *arg)
{
    (void)arg;
    if (r->n > 0) {
        const s_kv_t *last = &r->kvs[r->n - 1];
        if (s_key_cmp((const uint8_t *)last->key, last->key_len, key, key_len) >= 0)
            return s_corrupt(r, "keys out of order");
    }
    /* Prefix compression lets a few bytes stand for long keys: bound what
     * they may expand to. */
    size_t budget = r->file_len > SIZE_MAX / 64 ? SIZE_MAX : r->file_len * 64 + (1u << 20);
    if (key_len > budget - r->key_bytes) return s_corrupt(r, "keys expand beyond any real index");
    r->key_bytes += key_len;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        s_kv_t *grown = realloc(r->kvs, cap * sizeof *grown);
        if (!grown) return zf_out_of_memory("checkpoint index");
        r->kvs = grown;
        r->cap = cap;
    }
    char *copy = malloc(key_len + 1);
    if (!copy) return zf_out_of_memory("checkpoint index key");
    if (key_len) memcpy(copy, key, key_len);
    copy[key_len] = '\0';
    r->kvs[r->n++] = (s_kv_t){copy, key_len, value, value_len};
    return ZF_STATUS_OK;
}

/* An index block entry: the handle of a data block, whose entries go in. */
static zf_status_t s_index_entry(zf_bundle_reader_t *r, const uint8_t *key, size_t key_len,
                                 const uint8_t *value, size_t value_len, void *arg)
{
    (void)key;
    (void)key_len;
    (void)arg;
    s_handle_t h;
    const uint8_t *p = value;
    if (!s_handle_decode(&p, value + value_len, &h)) return s_corrupt(r, "bad block handle");
    const uint8_t *block;
    size_t len;
    ZF_TRY(s_read_block(r, h, &block, &len));
    return s_block_entries(r, block, len, s_add_kv, NULL);
}

static zf_status_t s_parse_table(zf_bundle_reader_t *r)
{
    if (r->file_len < S_FOOTER_LEN) return s_corrupt(r, "file is too short to be an sstable");
    const uint8_t *footer = r->file + r->file_len - S_FOOTER_LEN;
    uint64_t magic = (uint64_t)zf_le32(footer + 40) | (uint64_t)zf_le32(footer + 44) << 32;
    if (magic != S_MAGIC) return s_corrupt(r, "not an sstable (bad magic number)");
    s_handle_t meta, index;
    const uint8_t *p = footer;
    if (!s_handle_decode(&p, footer + 40, &meta) || !s_handle_decode(&p, footer + 40, &index))
        return s_corrupt(r, "bad block handle in footer");
    const uint8_t *block;
    size_t len;
    /* TensorFlow's metaindex is empty and unused: only its checksum counts. */
    ZF_TRY(s_read_block(r, meta, &block, &len));
    ZF_TRY(s_read_block(r, index, &block, &len));
    return s_block_entries(r, block, len, s_index_entry, NULL);
}

static zf_status_t s_parse_header(zf_bundle_reader_t *r)
{
    if (r->n == 0 || r->kvs[0].key_len != 0) return s_corrupt(r, "failed to seek to header entry");
    Tensorflow__BundleHeaderProto *h =
        tensorflow__bundle_header_proto__unpack(NULL, r->kvs[0].value_len, r->kvs[0].value);
    if (!h) return s_corrupt(r, "unable to parse header");
    zf_status_t s = ZF_STATUS_OK;
    int32_t min_consumer = h->version ? h->version->min_consumer : 0;
    if (h->num_shards <= 0 || h->num_shards > 99999) {
        s = s_corrupt(r, "bad shard count in header");
    } else if (h->endianness != TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__LITTLE) {
        s = zf_status_new(ZF_UNIMPLEMENTED, "checkpoint %s is big-endian, which is not supported",
                          r->prefix);
    } else if (min_consumer > S_VERSION) {
        s = zf_status_new(ZF_INVALID_ARGUMENT,
                          "Checkpoint min consumer version %d above current version %d for "
                          "checkpoint %s",
                          (int)min_consumer, S_VERSION, r->prefix);
    } else {
        for (size_t i = 0; h->version && i < h->version->n_bad_consumers; i++)
            if (h->version->bad_consumers[i] == S_VERSION)
                s = zf_status_new(ZF_INVALID_ARGUMENT,
                                  "Checkpoint disallows consumer version %d for checkpoint %s",
                                  S_VERSION, r->prefix);
    }
    r->num_shards = h->num_shards;
    tensorflow__bundle_header_proto__free_unpacked(h, NULL);
    return s;
}

zf_status_t zf_bundle_reader_open_index(const char *prefix, const void *index, size_t len,
                                        zf_bundle_reader_t **out)
{
    *out = NULL;
    if (len > ZF_BUNDLE_MAX_INDEX_BYTES)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED,
                             "checkpoint index %s.index holds %zu bytes, more than the %zu a "
                             "reader takes",
                             prefix, len, ZF_BUNDLE_MAX_INDEX_BYTES);
    zf_bundle_reader_t *r = calloc(1, sizeof *r);
    if (!r) return zf_out_of_memory("checkpoint reader");
    r->prefix = strdup(prefix);
    r->index_name = s_strcat(prefix, ".index");
    r->file = malloc(len ? len : 1);
    zf_status_t s = ZF_STATUS_OK;
    if (!r->prefix || !r->index_name || !r->file) {
        s = zf_out_of_memory("checkpoint reader");
    } else {
        if (len) memcpy(r->file, index, len);
        r->file_len = len;
        s = s_parse_table(r);
        if (zf_ok(s)) s = s_parse_header(r);
    }
    if (!zf_ok(s)) {
        zf_bundle_reader_destroy(&r);
        return s;
    }
    *out = r;
    return ZF_STATUS_OK;
}

zf_status_t zf_bundle_reader_open(const char *prefix, zf_bundle_reader_t **out)
{
    *out = NULL;
    char *path = s_strcat(prefix, ".index");
    if (!path) return zf_out_of_memory("checkpoint path");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        zf_status_t s = s_file_error("cannot open checkpoint index", path);
        free(path);
        return s;
    }
    struct stat st;
    zf_status_t s = ZF_STATUS_OK;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) != 0) {
        s = s_file_error("cannot stat", path);
    } else if ((uint64_t)st.st_size > ZF_BUNDLE_MAX_INDEX_BYTES) {
        s = zf_status_new(ZF_RESOURCE_EXHAUSTED,
                          "checkpoint index %s holds %lld bytes, more than the %zu a reader takes",
                          path, (long long)st.st_size, ZF_BUNDLE_MAX_INDEX_BYTES);
    } else {
        buf = malloc(st.st_size ? (size_t)st.st_size : 1);
        if (!buf) s = zf_out_of_memory("checkpoint index");
        if (zf_ok(s)) s = s_pread_all(fd, buf, (size_t)st.st_size, 0, path);
    }
    close(fd);
    free(path);
    if (zf_ok(s)) s = zf_bundle_reader_open_index(prefix, buf, (size_t)st.st_size, out);
    free(buf);
    return s;
}

void zf_bundle_reader_destroy(zf_bundle_reader_t **r_p)
{
    if (!r_p || !*r_p) return;
    zf_bundle_reader_t *r = *r_p;
    for (size_t i = 0; i < r->n; i++) free(r->kvs[i].key);
    free(r->kvs);
    free(r->file);
    free(r->index_name);
    free(r->prefix);
    free(r);
    *r_p = NULL;
}

int32_t zf_bundle_reader_num_shards(const zf_bundle_reader_t *r)
{
    return r->num_shards;
}

size_t zf_bundle_reader_num_keys(const zf_bundle_reader_t *r)
{
    return r->n - 1;
}

const char *zf_bundle_reader_key(const zf_bundle_reader_t *r, size_t i, size_t *len)
{
    if (i + 1 >= r->n) return NULL;
    if (len) *len = r->kvs[i + 1].key_len;
    return r->kvs[i + 1].key;
}

/* ---- entries ------------------------------------------------------------------------ */

static const s_kv_t *s_find(const zf_bundle_reader_t *r, const char *key, size_t key_len)
{
    size_t lo = 1, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = s_key_cmp((const uint8_t *)r->kvs[mid].key, r->kvs[mid].key_len,
                          (const uint8_t *)key, key_len);
        if (c == 0) return &r->kvs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static zf_status_t s_entry_from_proto(const Tensorflow__BundleEntryProto *p, const char *key,
                                      const char *where, zf_bundle_entry_t *e)
{
    zf_status_t s = zf_shape_from_proto(p->shape, &e->shape);
    int64_t n = 0;
    if (!zf_ok(s) || !zf_shape_is_fully_defined(&e->shape) ||
        !zf_ok(s = zf_shape_num_elements(&e->shape, &n))) {
        zf_status_clear(&s);
        return zf_status_new(ZF_DATA_LOSS, "%s: Invalid tensor shape: %s", where, key);
    }
    if (!zf_dtype_valid((int)p->dtype) || zf_dtype_base((int)p->dtype) != (zf_dtype_t)p->dtype)
        return zf_status_new(ZF_DATA_LOSS, "%s: invalid dtype %d for key %s", where, (int)p->dtype,
                             key);
    if (p->shard_id < 0 || p->offset < 0 || p->size < 0)
        return zf_status_new(ZF_DATA_LOSS, "%s: negative shard, offset or size for key %s", where,
                             key);
    e->dtype = (zf_dtype_t)p->dtype;
    e->shard_id = p->shard_id;
    e->offset = p->offset;
    e->size = p->size;
    e->masked_crc32c = p->crc32c;
    e->sliced = p->n_slices > 0;
    return ZF_STATUS_OK;
}

zf_status_t zf_bundle_reader_entry(const zf_bundle_reader_t *r, const char *key, size_t key_len,
                                   zf_bundle_entry_t *out)
{
    const s_kv_t *kv = key_len ? s_find(r, key, key_len) : NULL;
    if (!kv)
        return zf_status_new(ZF_NOT_FOUND, "Key %.*s not found in checkpoint", (int)key_len, key);
    Tensorflow__BundleEntryProto *p =
        tensorflow__bundle_entry_proto__unpack(NULL, kv->value_len, kv->value);
    if (!p)
        return zf_status_new(ZF_DATA_LOSS, "%s: Entry for key %s not parseable.", r->index_name,
                             kv->key);
    zf_bundle_entry_t e = {0};
    zf_status_t s = s_entry_from_proto(p, kv->key, r->index_name, &e);
    tensorflow__bundle_entry_proto__free_unpacked(p, NULL);
    if (zf_ok(s) && e.shard_id >= r->num_shards)
        s = zf_status_new(ZF_DATA_LOSS, "%s: key %s is in shard %d of %d", r->index_name, kv->key,
                          (int)e.shard_id, (int)r->num_shards);
    if (zf_ok(s)) *out = e;
    return s;
}

/* ---- tensor bytes -------------------------------------------------------------------- */

static bool s_storable(zf_dtype_t dtype)
{
    return dtype == ZF_STRING ||
           (zf_dtype_size(dtype) > 0 && dtype != ZF_RESOURCE && dtype != ZF_VARIANT);
}

static zf_status_t s_decode_strings(const zf_bundle_entry_t *e, const uint8_t *b, size_t len,
                                    const char *where, zf_tensor_t *t)
{
    int64_t n = zf_tensor_num_elements(t);
    if (len == 0) n = 0; /* TensorFlow reads nothing for size 0 */
    /* Every length takes at least one byte: n is bounded by len. */
    if ((uint64_t)n > len)
        return zf_status_new(ZF_DATA_LOSS, "%s: %" PRId64 " strings cannot fit in %zu bytes", where,
                             n, len);
    uint64_t *lens = malloc((size_t)(n ? n : 1) * sizeof *lens);
    if (!lens) return zf_out_of_memory("checkpoint string lengths");
    const uint8_t *p = b, *end = b + len;
    uint32_t crc = 0;
    zf_status_t s = ZF_STATUS_OK;
    for (int64_t i = 0; i < n && zf_ok(s); i++) {
        if (!s_varint(&p, end, 64, &lens[i])) {
            s = zf_status_new(ZF_DATA_LOSS, "%s: bad string length", where);
            break;
        }
        uint8_t le[8];
        size_t w = lens[i] <= UINT32_MAX ? 4 : 8;
        for (size_t k = 0; k < w; k++) le[k] = (uint8_t)(lens[i] >> (8 * k));
        crc = zf_crc32c_extend(crc, le, w);
    }
    if (zf_ok(s) && len > 0 && (size_t)(end - p) < 4)
        s = zf_status_new(ZF_DATA_LOSS, "%s: string lengths longer than the entry's %zu bytes",
                          where, len);
    if (zf_ok(s) && len > 0) {
        uint32_t stored = zf_crc32c_unmask(zf_le32(p));
        if (stored != crc)
            s = zf_status_new(ZF_DATA_LOSS,
                              "%s: The length checksum does not match: expected %08" PRIu32
                              " but actual is %08" PRIu32,
                              where, stored, crc);
        crc = zf_crc32c_extend(crc, p, 4);
        p += 4;
    }
    for (int64_t i = 0; i < n && zf_ok(s); i++) {
        if (lens[i] > (uint64_t)(end - p)) {
            s = zf_status_new(ZF_DATA_LOSS, "%s: string %" PRId64 " runs past the entry's bytes",
                              where, i);
            break;
        }
        crc = zf_crc32c_extend(crc, p, (size_t)lens[i]);
        s = zf_tensor_set_string(t, i, p, (size_t)lens[i]);
        p += lens[i];
    }
    free(lens);
    if (zf_ok(s) && zf_crc32c_unmask(e->masked_crc32c) != crc)
        s = zf_status_new(ZF_DATA_LOSS,
                          "%s (%zu bytes): Checksum does not match: stored %08" PRIu32
                          " vs. calculated on the restored bytes %" PRIu32,
                          where, len, zf_crc32c_unmask(e->masked_crc32c), crc);
    return s;
}

zf_status_t zf_bundle_decode_tensor(const zf_bundle_entry_t *e, const void *bytes, size_t len,
                                    const char *where, zf_tensor_t **out)
{
    *out = NULL;
    if (e->sliced)
        return zf_status_new(ZF_UNIMPLEMENTED,
                             "%s: the entry is a partitioned (sliced) tensor, which is not "
                             "supported",
                             where);
    if (!s_storable(e->dtype))
        return zf_status_new(ZF_UNIMPLEMENTED, "%s: tensors of dtype %s cannot be restored", where,
                             zf_dtype_name((int)e->dtype));
    if ((uint64_t)e->size != len)
        return zf_status_new(ZF_DATA_LOSS, "%s: entry of %" PRId64 " bytes given %zu", where,
                             e->size, len);
    int64_t n = 0;
    ZF_TRY(zf_shape_num_elements(&e->shape, &n));
    if (e->dtype != ZF_STRING) {
        size_t es = zf_dtype_size(e->dtype);
        if (n > 0 && (uint64_t)n > (uint64_t)INT64_MAX / es)
            return zf_status_new(ZF_DATA_LOSS, "%s: Invalid size in bundle entry", where);
        if ((uint64_t)n * es != len)
            return zf_status_new(ZF_DATA_LOSS,
                                 "%s: Invalid size in bundle entry: stored size %zu; expected "
                                 "size %" PRIu64,
                                 where, len, (uint64_t)n * es);
        uint32_t crc = zf_crc32c(bytes, len);
        if (zf_crc32c_unmask(e->masked_crc32c) != crc)
            return zf_status_new(ZF_DATA_LOSS,
                                 "%s (%zu bytes): Checksum does not match: stored %08" PRIu32
                                 " vs. calculated on the restored bytes %" PRIu32,
                                 where, len, zf_crc32c_unmask(e->masked_crc32c), crc);
        return zf_tensor_new_from_bytes(e->dtype, &e->shape, bytes, len, out);
    }
    if ((uint64_t)n > len && len > 0)
        return zf_status_new(ZF_DATA_LOSS,
                             "%s: Invalid size in bundle entry: stored size %zu; expected size "
                             "is at least %" PRId64,
                             where, len, n);
    if (len == 0 && n > 0)
        return zf_status_new(ZF_DATA_LOSS, "%s: no bytes for %" PRId64 " strings", where, n);
    zf_tensor_t *t = NULL;
    ZF_TRY(zf_tensor_new(ZF_STRING, &e->shape, &t));
    zf_status_t s = s_decode_strings(e, bytes, len, where, t);
    if (!zf_ok(s)) {
        zf_tensor_unref(&t);
        return s;
    }
    *out = t;
    return ZF_STATUS_OK;
}

zf_status_t zf_bundle_reader_lookup(const zf_bundle_reader_t *r, const char *key, size_t key_len,
                                    zf_tensor_t **out)
{
    *out = NULL;
    zf_bundle_entry_t e;
    ZF_TRY(zf_bundle_reader_entry(r, key, key_len, &e));
    char *path = s_data_filename(r->prefix, e.shard_id, r->num_shards);
    if (!path) return zf_out_of_memory("checkpoint path");
    char where[64];
    snprintf(where, sizeof where, "key %.40s", key);
    zf_status_t s = ZF_STATUS_OK;
    uint8_t *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        s = s_file_error("cannot open checkpoint data", path);
    } else if (fstat(fd, &st) != 0) {
        s = s_file_error("cannot stat", path);
    } else if ((uint64_t)e.offset > (uint64_t)st.st_size ||
               (uint64_t)e.size > (uint64_t)st.st_size - (uint64_t)e.offset) {
        s = zf_status_new(ZF_DATA_LOSS,
                          "%s: key %s needs bytes [%" PRId64 ", %" PRId64 ") of a %lld-byte file",
                          path, key, e.offset, e.offset + e.size, (long long)st.st_size);
    } else if ((uint64_t)e.size > SIZE_MAX || (size_t)e.size > zf_buffer_alloc_limit()) {
        s = zf_status_new(ZF_RESOURCE_EXHAUSTED, "%s: key %s holds %" PRId64 " bytes", path, key,
                          e.size);
    } else {
        buf = malloc(e.size ? (size_t)e.size : 1);
        if (!buf) s = zf_out_of_memory("checkpoint tensor");
        if (zf_ok(s)) s = s_pread_all(fd, buf, (size_t)e.size, (uint64_t)e.offset, path);
        if (zf_ok(s)) s = zf_bundle_decode_tensor(&e, buf, (size_t)e.size, where, out);
        if (!zf_ok(s) && s.code == ZF_DATA_LOSS)
            s = zf_status_prefix(s, "TensorBundle at %s shard %d", r->prefix, (int)e.shard_id);
    }
    if (fd >= 0) close(fd);
    free(buf);
    free(path);
    return s;
}

/* ---- writing the table ---------------------------------------------------------------- */

typedef struct {
    s_buf_t buf;
    s_buf_t last_key;
    uint32_t *restarts;
    size_t n_restarts, cap_restarts;
    int counter, interval;
    bool oom;
} s_block_t;

static void s_block_init(s_block_t *b, int interval)
{
    *b = (s_block_t){.interval = interval};
    b->restarts = malloc(16 * sizeof *b->restarts);
    b->cap_restarts = 16;
    if (!b->restarts) b->oom = true;
    b->n_restarts = 1;
    if (b->restarts) b->restarts[0] = 0;
}

static void s_block_reset(s_block_t *b)
{
    b->buf.len = 0;
    b->last_key.len = 0;
    b->n_restarts = 1;
    b->counter = 0;
}

static void s_block_free(s_block_t *b)
{
    s_buf_free(&b->buf);
    s_buf_free(&b->last_key);
    free(b->restarts);
}

static size_t s_block_estimate(const s_block_t *b)
{
    return b->buf.len + b->n_restarts * 4 + 4;
}

static void s_block_add(s_block_t *b, const uint8_t *key, size_t klen, const uint8_t *val,
                        size_t vlen)
{
    if (b->oom) return;
    size_t shared = 0;
    if (b->counter < b->interval) {
        size_t min = klen < b->last_key.len ? klen : b->last_key.len;
        while (shared < min && b->last_key.data[shared] == key[shared]) shared++;
    } else {
        if (b->n_restarts == b->cap_restarts) {
            uint32_t *grown = realloc(b->restarts, b->cap_restarts * 2 * sizeof *grown);
            if (!grown) {
                b->oom = true;
                return;
            }
            b->restarts = grown;
            b->cap_restarts *= 2;
        }
        b->restarts[b->n_restarts++] = (uint32_t)b->buf.len;
        b->counter = 0;
    }
    s_put_varint(&b->buf, shared);
    s_put_varint(&b->buf, klen - shared);
    s_put_varint(&b->buf, vlen);
    s_put(&b->buf, key + shared, klen - shared);
    s_put(&b->buf, val, vlen);
    b->last_key.len = shared;
    s_put(&b->last_key, key + shared, klen - shared);
    b->counter++;
}

static void s_block_finish(s_block_t *b)
{
    for (size_t i = 0; i < b->n_restarts; i++) s_put_le32(&b->buf, b->restarts[i]);
    s_put_le32(&b->buf, (uint32_t)b->n_restarts);
}

typedef struct {
    s_buf_t out;
    s_block_t data, index;
    s_buf_t last_key;
    int64_t num_entries;
    bool pending;
    s_handle_t pending_handle;
} s_table_t;

static void s_table_init(s_table_t *t)
{
    *t = (s_table_t){0};
    s_block_init(&t->data, S_RESTART_INTERVAL);
    s_block_init(&t->index, 1);
}

static void s_table_free(s_table_t *t)
{
    s_buf_free(&t->out);
    s_block_free(&t->data);
    s_block_free(&t->index);
    s_buf_free(&t->last_key);
}

static void s_write_block(s_table_t *t, s_block_t *b, s_handle_t *h)
{
    s_block_finish(b);
    h->offset = t->out.len;
    h->size = b->buf.len;
    s_put(&t->out, b->buf.data, b->buf.len);
    uint8_t type = 0;
    uint32_t crc = zf_crc32c_extend(zf_crc32c(b->buf.data, b->buf.len), &type, 1);
    s_put(&t->out, &type, 1);
    s_put_le32(&t->out, zf_crc32c_mask(crc));
    if (b->buf.oom) t->out.oom = true;
    s_block_reset(b);
}

static void s_table_flush(s_table_t *t)
{
    if (t->data.buf.len == 0) return;
    s_write_block(t, &t->data, &t->pending_handle);
    t->pending = true;
}

static void s_add_index_entry(s_table_t *t)
{
    s_buf_t enc = {0};
    s_put_varint(&enc, t->pending_handle.offset);
    s_put_varint(&enc, t->pending_handle.size);
    if (enc.oom) t->out.oom = true;
    s_block_add(&t->index, t->last_key.data ? t->last_key.data : (const uint8_t *)"",
                t->last_key.len, enc.data, enc.len);
    s_buf_free(&enc);
    t->pending = false;
}

/* LevelDB's bytewise separator: the shortest key >= last_key and < next. */
static void s_shortest_separator(s_buf_t *last, const uint8_t *next, size_t next_len)
{
    size_t min = last->len < next_len ? last->len : next_len, i = 0;
    while (i < min && last->data[i] == next[i]) i++;
    if (i >= min) return; /* one is a prefix of the other */
    uint8_t d = last->data[i];
    if (d < 0xffu && d + 1 < next[i]) {
        last->data[i]++;
        last->len = i + 1;
    }
}

static void s_short_successor(s_buf_t *key)
{
    for (size_t i = 0; i < key->len; i++) {
        if (key->data[i] != 0xffu) {
            key->data[i]++;
            key->len = i + 1;
            return;
        }
    }
}

static void s_table_add(s_table_t *t, const uint8_t *key, size_t klen, const uint8_t *val,
                        size_t vlen)
{
    if (t->num_entries > 0 && klen + vlen >= 2 * (size_t)S_BLOCK_SIZE) s_table_flush(t);
    if (t->pending) {
        s_shortest_separator(&t->last_key, key, klen);
        s_add_index_entry(t);
    }
    t->last_key.len = 0;
    s_put(&t->last_key, key, klen);
    t->num_entries++;
    s_block_add(&t->data, key, klen, val, vlen);
    if (s_block_estimate(&t->data) >= S_BLOCK_SIZE) s_table_flush(t);
}

static zf_status_t s_table_finish(s_table_t *t)
{
    s_table_flush(t);
    s_block_t meta;
    s_block_init(&meta, S_RESTART_INTERVAL);
    s_handle_t meta_handle, index_handle;
    s_write_block(t, &meta, &meta_handle);
    bool oom = meta.oom;
    s_block_free(&meta);
    if (t->pending) {
        s_short_successor(&t->last_key);
        s_add_index_entry(t);
    }
    s_write_block(t, &t->index, &index_handle);
    s_buf_t footer = {0};
    s_put_varint(&footer, meta_handle.offset);
    s_put_varint(&footer, meta_handle.size);
    s_put_varint(&footer, index_handle.offset);
    s_put_varint(&footer, index_handle.size);
    uint8_t zeros[2 * S_HANDLE_MAX_LEN] = {0};
    if (!footer.oom) s_put(&footer, zeros, sizeof zeros - footer.len);
    s_put_le32(&footer, (uint32_t)(S_MAGIC & 0xffffffffu));
    s_put_le32(&footer, (uint32_t)(S_MAGIC >> 32));
    s_put(&t->out, footer.data, footer.len);
    oom = oom || footer.oom || t->out.oom || t->data.oom || t->index.oom || t->last_key.oom;
    s_buf_free(&footer);
    return oom ? zf_out_of_memory("checkpoint index") : ZF_STATUS_OK;
}

/* ---- writing bundles ------------------------------------------------------------------ */

static zf_status_t s_pack_header(int32_t num_shards, s_buf_t *out)
{
    Tensorflow__VersionDef version = TENSORFLOW__VERSION_DEF__INIT;
    version.producer = S_VERSION;
    Tensorflow__BundleHeaderProto h = TENSORFLOW__BUNDLE_HEADER_PROTO__INIT;
    h.num_shards = num_shards;
    h.endianness = TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__LITTLE;
    h.version = &version;
    size_t n = tensorflow__bundle_header_proto__get_packed_size(&h);
    uint8_t *bytes = malloc(n ? n : 1);
    if (!bytes) return zf_out_of_memory("checkpoint header");
    tensorflow__bundle_header_proto__pack(&h, bytes);
    s_put(out, bytes, n);
    free(bytes);
    return out->oom ? zf_out_of_memory("checkpoint header") : ZF_STATUS_OK;
}

typedef struct {
    const uint8_t *key;
    size_t key_len;
    s_buf_t value; /* the packed BundleEntryProto */
} s_out_entry_t;

static int s_out_entry_cmp(const void *a, const void *b)
{
    const s_out_entry_t *x = a, *y = b;
    return s_key_cmp(x->key, x->key_len, y->key, y->key_len);
}

/* Builds the index of sorted entries into *out. */
static zf_status_t s_build_index(const s_buf_t *header, const s_out_entry_t *entries, size_t n,
                                 s_buf_t *out)
{
    s_table_t t;
    s_table_init(&t);
    s_table_add(&t, (const uint8_t *)"", 0, header->data, header->len);
    for (size_t i = 0; i < n; i++)
        s_table_add(&t, entries[i].key, entries[i].key_len, entries[i].value.data,
                    entries[i].value.len);
    zf_status_t s = s_table_finish(&t);
    if (zf_ok(s)) {
        *out = t.out;
        t.out = (s_buf_t){0};
    }
    s_table_free(&t);
    return s;
}

static zf_status_t s_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return s_file_error("cannot create", path);
    bool ok = (len == 0 || fwrite(data, 1, len, f) == len);
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        zf_status_t s = s_file_error("cannot write", path);
        unlink(path);
        return s;
    }
    return ZF_STATUS_OK;
}

static char *s_temp_name(const char *path)
{
    char suffix[48];
    snprintf(suffix, sizeof suffix, ".tempstate%" PRIu64, zf_random_id());
    return s_strcat(path, suffix);
}

/* Writes data under a temporary name, then renames it to path. */
static zf_status_t s_write_atomic(const char *path, const void *data, size_t len)
{
    char *tmp = s_temp_name(path);
    if (!tmp) return zf_out_of_memory("checkpoint path");
    zf_status_t s = s_write_file(tmp, data, len);
    if (zf_ok(s) && rename(tmp, path) != 0) {
        s = s_file_error("cannot rename into", path);
        unlink(tmp);
    }
    free(tmp);
    return s;
}

/* Creates the parent directory of prefix when missing. */
static zf_status_t s_make_parent(const char *prefix)
{
    const char *slash = strrchr(prefix, '/');
    if (!slash || slash == prefix) return ZF_STATUS_OK;
    char *dir = strndup(prefix, (size_t)(slash - prefix));
    if (!dir) return zf_out_of_memory("checkpoint path");
    zf_status_t s = ZF_STATUS_OK;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) s = s_file_error("cannot create directory", dir);
    free(dir);
    return s;
}

/* Appends t's bytes as TensorFlow lays them out, setting the entry's size
 * and masked checksum. */
static zf_status_t s_encode_tensor(const zf_tensor_t *t, s_buf_t *data,
                                   Tensorflow__BundleEntryProto *e)
{
    size_t start = data->len;
    uint32_t crc = 0;
    if (zf_tensor_dtype(t) != ZF_STRING) {
        size_t n = zf_tensor_nbytes(t);
        s_put(data, zf_tensor_data(t), n);
        crc = zf_crc32c(zf_tensor_data(t), n);
    } else {
        int64_t n = zf_tensor_num_elements(t);
        const zf_tstring_t *str = zf_tensor_data(t);
        for (int64_t i = 0; i < n; i++) {
            uint64_t len = str[i].len;
            s_put_varint(data, len);
            uint8_t le[8];
            size_t w = len <= UINT32_MAX ? 4 : 8;
            for (size_t k = 0; k < w; k++) le[k] = (uint8_t)(len >> (8 * k));
            crc = zf_crc32c_extend(crc, le, w);
        }
        uint32_t masked = zf_crc32c_mask(crc);
        uint8_t m[4] = {(uint8_t)masked, (uint8_t)(masked >> 8), (uint8_t)(masked >> 16),
                        (uint8_t)(masked >> 24)};
        s_put(data, m, 4);
        crc = zf_crc32c_extend(crc, m, 4);
        for (int64_t i = 0; i < n; i++) {
            s_put(data, str[i].data, str[i].len);
            crc = zf_crc32c_extend(crc, str[i].data, str[i].len);
        }
    }
    if (data->oom) return zf_out_of_memory("checkpoint data");
    e->size = (int64_t)(data->len - start);
    e->crc32c = zf_crc32c_mask(crc);
    return ZF_STATUS_OK;
}

static zf_status_t s_pack_entry(Tensorflow__BundleEntryProto *e, s_buf_t *out)
{
    size_t n = tensorflow__bundle_entry_proto__get_packed_size(e);
    uint8_t *bytes = malloc(n ? n : 1);
    if (!bytes) return zf_out_of_memory("checkpoint entry");
    tensorflow__bundle_entry_proto__pack(e, bytes);
    s_put(out, bytes, n);
    free(bytes);
    return out->oom ? zf_out_of_memory("checkpoint entry") : ZF_STATUS_OK;
}

static void s_free_entries(s_out_entry_t *entries, size_t n)
{
    for (size_t i = 0; entries && i < n; i++) s_buf_free(&entries[i].value);
    free(entries);
}

zf_status_t zf_bundle_write(const char *prefix, const zf_tstring_t *keys,
                            const zf_tensor_t *const *tensors, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        zf_dtype_t dt = zf_tensor_dtype(tensors[i]);
        if (keys[i].len == 0)
            return zf_status_new(ZF_INVALID_ARGUMENT, "checkpoint keys may not be empty");
        if (!s_storable(dt))
            return zf_status_new(ZF_UNIMPLEMENTED, "tensor %.*s: dtype %s cannot be saved",
                                 (int)keys[i].len, keys[i].data, zf_dtype_name((int)dt));
        if (zf_tensor_memory_kind(tensors[i]) == ZF_MEMORY_DEVICE)
            return zf_status_new(ZF_FAILED_PRECONDITION, "tensor %.*s is not in host memory",
                                 (int)keys[i].len, keys[i].data);
    }
    s_out_entry_t *entries = calloc(n ? n : 1, sizeof *entries);
    if (!entries) return zf_out_of_memory("checkpoint entries");
    s_buf_t data = {0}, header = {0}, index = {0};
    zf_status_t s = ZF_STATUS_OK;
    for (size_t i = 0; i < n && zf_ok(s); i++) {
        const zf_tensor_t *t = tensors[i];
        Tensorflow__BundleEntryProto e = TENSORFLOW__BUNDLE_ENTRY_PROTO__INIT;
        e.dtype = (Tensorflow__DataType)zf_tensor_dtype(t);
        e.offset = (int64_t)data.len;
        s = zf_shape_to_proto(zf_tensor_shape(t), &e.shape);
        if (zf_ok(s)) s = s_encode_tensor(t, &data, &e);
        if (zf_ok(s)) s = s_pack_entry(&e, &entries[i].value);
        if (e.shape) protobuf_c_message_free_unpacked(&e.shape->base, NULL);
        entries[i].key = (const uint8_t *)keys[i].data;
        entries[i].key_len = keys[i].len;
    }
    if (zf_ok(s)) {
        qsort(entries, n, sizeof *entries, s_out_entry_cmp);
        for (size_t i = 1; i < n && zf_ok(s); i++)
            if (s_out_entry_cmp(&entries[i - 1], &entries[i]) == 0)
                s = zf_status_new(ZF_INVALID_ARGUMENT, "Adding duplicate key: %.*s",
                                  (int)entries[i].key_len, (const char *)entries[i].key);
    }
    if (zf_ok(s)) s = s_pack_header(1, &header);
    if (zf_ok(s)) s = s_build_index(&header, entries, n, &index);
    char *data_path = zf_ok(s) ? s_data_filename(prefix, 0, 1) : NULL;
    char *index_path = zf_ok(s) ? s_strcat(prefix, ".index") : NULL;
    if (zf_ok(s) && (!data_path || !index_path)) s = zf_out_of_memory("checkpoint path");
    if (zf_ok(s)) s = s_make_parent(prefix);
    if (zf_ok(s)) s = s_write_atomic(data_path, data.data, data.len);
    if (zf_ok(s)) {
        s = s_write_atomic(index_path, index.data, index.len);
        if (!zf_ok(s)) unlink(data_path);
    }
    free(data_path);
    free(index_path);
    s_buf_free(&data);
    s_buf_free(&header);
    s_buf_free(&index);
    s_free_entries(entries, n);
    return s;
}

/* ---- merging --------------------------------------------------------------------------- */

typedef struct {
    char *from; /* a source data file */
    int32_t new_id;
} s_shard_t;

zf_status_t zf_bundle_merge(const char *const *prefixes, size_t n, const char *dest,
                            bool allow_missing)
{
    zf_bundle_reader_t **readers = calloc(n ? n : 1, sizeof *readers);
    s_out_entry_t *entries = NULL;
    s_shard_t *shards = NULL;
    size_t n_entries = 0, n_shards = 0, total = 0;
    s_buf_t header = {0}, index = {0};
    if (!readers) return zf_out_of_memory("checkpoint merge");
    zf_status_t s = ZF_STATUS_OK;
    size_t opened = 0;
    for (size_t i = 0; i < n && zf_ok(s); i++) {
        s = zf_bundle_reader_open(prefixes[i], &readers[i]);
        if (!zf_ok(s) && s.code == ZF_NOT_FOUND && allow_missing) {
            zf_status_clear(&s);
            continue;
        }
        if (!zf_ok(s)) break;
        opened++;
        total += readers[i]->n - 1;
    }
    if (zf_ok(s) && opened == 0)
        s = zf_status_new(ZF_NOT_FOUND, "none of the %zu checkpoint prefixes to merge exist", n);
    if (zf_ok(s)) {
        entries = calloc(total ? total : 1, sizeof *entries);
        shards = calloc(total ? total : 1, sizeof *shards);
        if (!entries || !shards) s = zf_out_of_memory("checkpoint merge");
    }
    for (size_t i = 0; i < n && zf_ok(s); i++) {
        zf_bundle_reader_t *r = readers[i];
        for (size_t k = 1; r && k < r->n && zf_ok(s); k++) {
            Tensorflow__BundleEntryProto *p =
                tensorflow__bundle_entry_proto__unpack(NULL, r->kvs[k].value_len, r->kvs[k].value);
            if (!p) {
                s = zf_status_new(ZF_DATA_LOSS, "%s: Entry for key %s not parseable.",
                                  r->index_name, r->kvs[k].key);
                break;
            }
            char *from = NULL;
            if (p->shard_id < 0 || p->shard_id >= r->num_shards)
                s = zf_status_new(ZF_DATA_LOSS, "%s: key %s is in shard %d of %d", r->index_name,
                                  r->kvs[k].key, (int)p->shard_id, (int)r->num_shards);
            else if (!(from = s_data_filename(r->prefix, p->shard_id, r->num_shards)))
                s = zf_out_of_memory("checkpoint path");
            size_t j = 0;
            while (zf_ok(s) && j < n_shards && strcmp(shards[j].from, from) != 0) j++;
            if (zf_ok(s) && j == n_shards) {
                shards[n_shards++] = (s_shard_t){from, (int32_t)j};
                from = NULL;
            }
            free(from);
            if (zf_ok(s)) {
                p->shard_id = shards[j].new_id;
                entries[n_entries].key = (const uint8_t *)r->kvs[k].key;
                entries[n_entries].key_len = r->kvs[k].key_len;
                s = s_pack_entry(p, &entries[n_entries].value);
                n_entries++;
            }
            tensorflow__bundle_entry_proto__free_unpacked(p, NULL);
        }
        if (!zf_ok(s)) break;
        /* A key that an earlier bundle holds too. */
        qsort(entries, n_entries, sizeof *entries, s_out_entry_cmp);
        for (size_t k = 1; k < n_entries && zf_ok(s); k++)
            if (s_out_entry_cmp(&entries[k - 1], &entries[k]) == 0)
                s = zf_status_new(ZF_INVALID_ARGUMENT,
                                  "Duplicate tensor keyed by %.*s encountered, when merging "
                                  "prefix: %s",
                                  (int)entries[k].key_len, (const char *)entries[k].key,
                                  prefixes[i]);
    }
    if (zf_ok(s) && n_shards > 99999)
        s = zf_status_new(ZF_INVALID_ARGUMENT, "merged checkpoint has %zu shards, above 99999",
                          n_shards);
    if (zf_ok(s)) s = s_make_parent(dest);
    for (size_t j = 0; j < n_shards && zf_ok(s); j++) {
        char *to = s_data_filename(dest, shards[j].new_id, (int32_t)n_shards);
        if (!to)
            s = zf_out_of_memory("checkpoint path");
        else if (strcmp(to, shards[j].from) != 0 && rename(shards[j].from, to) != 0)
            s = s_file_error("cannot rename checkpoint data", shards[j].from);
        free(to);
    }
    /* The shards are the data files the entries use. (TensorFlow's header
     * adds up the sources' counts, which differs when a source has an
     * unused shard, and then names files the merged bundle lacks.) */
    if (zf_ok(s)) s = s_pack_header(n_shards ? (int32_t)n_shards : 1, &header);
    if (zf_ok(s)) s = s_build_index(&header, entries, n_entries, &index);
    char *index_path = zf_ok(s) ? s_strcat(dest, ".index") : NULL;
    if (zf_ok(s) && !index_path) s = zf_out_of_memory("checkpoint path");
    if (zf_ok(s)) s = s_write_atomic(index_path, index.data, index.len);
    for (size_t i = 0; i < n && zf_ok(s); i++) {
        if (!readers[i] || strcmp(readers[i]->index_name, index_path) == 0) continue;
        unlink(readers[i]->index_name); /* best effort, as TensorFlow */
    }
    free(index_path);
    s_buf_free(&header);
    s_buf_free(&index);
    s_free_entries(entries, n_entries);
    for (size_t j = 0; j < n_shards; j++) free(shards[j].from);
    free(shards);
    for (size_t i = 0; i < n; i++) zf_bundle_reader_destroy(&readers[i]);
    free(readers);
    return s;
}
