/* GraphDef I/O: binary and text formats, files and memory, with a wire-format
 * check that turns protobuf-c's bare "unpack failed" into a useful error. */
#include "common/graphdef_io.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/pbtxt.h"
#include "common/proto_map.h"

static int s_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

zf_graph_format_t zf_graph_format_from_path(const char *path)
{
    static const char *const text_ext[] = {".pbtxt", ".pbtext", ".txt", ".prototxt"};
    static const char *const bin_ext[] = {".pb", ".graphdef", ".bin"};
    for (size_t i = 0; i < sizeof text_ext / sizeof text_ext[0]; i++)
        if (s_ends_with(path, text_ext[i])) return ZF_FORMAT_PBTXT;
    for (size_t i = 0; i < sizeof bin_ext / sizeof bin_ext[0]; i++)
        if (s_ends_with(path, bin_ext[i])) return ZF_FORMAT_PB;
    return ZF_FORMAT_AUTO;
}

zf_status_t zf_graph_format_parse(const char *name, zf_graph_format_t *out)
{
    if (strcmp(name, "pb") == 0 || strcmp(name, "binary") == 0) {
        *out = ZF_FORMAT_PB;
    } else if (strcmp(name, "pbtxt") == 0 || strcmp(name, "text") == 0) {
        *out = ZF_FORMAT_PBTXT;
    } else {
        return zf_invalid_argument("unknown graph format '%s' (expected pb or pbtxt)", name);
    }
    return ZF_STATUS_OK;
}

zf_graph_format_t zf_graph_format_sniff(const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t n = len < 4096 ? len : 4096;
    if (n == 0) return ZF_FORMAT_PB; /* an empty binary message is a valid empty GraphDef */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c >= 0x80) continue; /* UTF-8 inside comments or strings */
        if (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v')
            return ZF_FORMAT_PB;
        if (c == 0x7f) return ZF_FORMAT_PB;
    }
    return ZF_FORMAT_PBTXT;
}

/* ---- wire-format check ------------------------------------------------ */

/* A map entry's key as it stands on the wire: the bytes of a string key,
 * or the value of an integer key ("" and 0 when the entry leaves it out). */
typedef struct {
    uint32_t field; /* the map field of the message holding the entry */
    const uint8_t *bytes;
    size_t len;
    uint64_t value;
} s_map_key_t;

/* Keys tracked per message; a longer map is left to the collapse. */
#define S_KEYS_PER_MESSAGE 64

typedef struct {
    const uint8_t *base;
    size_t len;
    /* Map keys, when tracked: those of the messages being checked, each
     * message's after its parent's. */
    bool track_keys;
    bool repeated_keys;                      /* a key came twice in one map, or tracking gave up */
    const ProtobufCMessageDescriptor *entry; /* the map entry type met last */
    s_map_key_t *keys;
    size_t n_keys, cap_keys;
} s_wire_t;

static int s_read_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t out = 0;
    for (int i = 0; i < 10; i++) {
        if (p + i >= end) return -1; /* truncated */
        out |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = out;
            return i + 1;
        }
    }
    return -2; /* more than 10 bytes */
}

size_t zf_proto_put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p[n++] = b | (v ? 0x80 : 0);
    } while (v);
    return n;
}

bool zf_proto_next_field(const uint8_t **p, const uint8_t *end, zf_proto_field_t *f)
{
    uint64_t key = 0;
    int n = s_read_varint(*p, end, &key);
    if (n < 0 || key >> 3 == 0 || key >> 3 > UINT32_MAX) return false;
    *p += n;
    *f = (zf_proto_field_t){(uint32_t)(key >> 3), (int)(key & 7), 0, NULL};
    switch (f->wire) {
    case 0:
        n = s_read_varint(*p, end, &f->value);
        if (n < 0) return false;
        *p += n;
        return true;
    case 1:
    case 5: {
        size_t size = f->wire == 1 ? 8 : 4;
        if ((size_t)(end - *p) < size) return false;
        *p += size;
        return true;
    }
    case 2:
        n = s_read_varint(*p, end, &f->value);
        if (n < 0 || f->value > (uint64_t)(end - *p - n)) return false;
        *p += n;
        f->data = *p;
        *p += f->value;
        return true;
    default: return false;
    }
}

static const ProtobufCFieldDescriptor *s_field(const ProtobufCMessageDescriptor *desc,
                                               uint32_t number)
{
    return desc ? protobuf_c_message_descriptor_get_field(desc, (unsigned)number) : NULL;
}

/* The wire type a field of this type is encoded with (2 also allowed for
 * packed repeated scalars). */
static unsigned s_expected_wire_type(ProtobufCType type)
{
    switch (type) {
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 1;
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return 5;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return 2;
    default: return 0;
    }
}

static const char *const s_wire_names[8] = {"varint",      "64-bit",     "length-delimited",
                                            "group start", "group end",  "32-bit",
                                            "invalid (6)", "invalid (7)"};

static zf_status_t s_check_wire_type(const ProtobufCMessageDescriptor *desc,
                                     const ProtobufCFieldDescriptor *f, unsigned wt, size_t at)
{
    unsigned want = s_expected_wire_type(f->type);
    if (wt == want) return ZF_STATUS_OK;
    if (wt == 2 && f->label == PROTOBUF_C_LABEL_REPEATED && want != 2) return ZF_STATUS_OK;
    return zf_invalid_argument("field '%s' (%u) of %s at byte %zu has wire type %s, expected %s",
                               f->name, f->id, desc->name, at, s_wire_names[wt & 7],
                               s_wire_names[want]);
}

static bool s_is_map_entry(s_wire_t *w, const ProtobufCMessageDescriptor *desc)
{
    if (desc == w->entry) return true;
    if (!zf_proto_is_map_entry(desc)) return false;
    w->entry = desc;
    return true;
}

static bool s_same_key(const s_map_key_t *a, const s_map_key_t *b)
{
    return a->field == b->field && a->value == b->value && a->len == b->len &&
           (a->len == 0 || memcmp(a->bytes, b->bytes, a->len) == 0);
}

/* Notes the key of an entry of the message whose keys start at first. */
static void s_note_key(s_wire_t *w, size_t first, const s_map_key_t *key)
{
    for (size_t i = first; i < w->n_keys && !w->repeated_keys; i++)
        w->repeated_keys = s_same_key(&w->keys[i], key);
    if (w->repeated_keys) return;
    if (w->n_keys - first >= S_KEYS_PER_MESSAGE) {
        w->repeated_keys = true;
        return;
    }
    if (w->n_keys == w->cap_keys) {
        size_t cap = w->cap_keys ? 2 * w->cap_keys : S_KEYS_PER_MESSAGE;
        s_map_key_t *grown = realloc(w->keys, cap * sizeof *grown);
        if (!grown) {
            w->repeated_keys = true;
            return;
        }
        w->keys = grown;
        w->cap_keys = cap;
    }
    w->keys[w->n_keys++] = *key;
}

/* A varint map key as unpack stores it: a 32-bit key keeps the low 32 bits
 * of the varint, a bool key is whether it is non-zero. */
static uint64_t s_varint_key(const ProtobufCFieldDescriptor *key, uint64_t v)
{
    switch (key->type) {
    case PROTOBUF_C_TYPE_BOOL: return v != 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64: return v;
    default: return v & UINT32_MAX;
    }
}

/* A non-repeated message field given twice is merged into one message on
 * unpack, maps included, where keys from both could meet: the collapse
 * then walks the message rather than trust the keys tracked apart. */
static void s_note_singular(s_wire_t *w, uint64_t *seen, size_t index)
{
    uint64_t bit = index < 64 ? UINT64_C(1) << index : 0;
    if (!bit || (*seen & bit)) w->repeated_keys = true;
    *seen |= bit;
}

/* Checks the packed values of repeated scalar field f (len bytes at p, the
 * field's key at byte at) as unpack reads them: whole fixed-width values,
 * or varints each complete. */
static zf_status_t s_check_packed(const ProtobufCMessageDescriptor *desc,
                                  const ProtobufCFieldDescriptor *f, const uint8_t *p, size_t len,
                                  size_t at)
{
    unsigned wt = s_expected_wire_type(f->type);
    size_t width = wt == 1 ? 8 : wt == 5 ? 4 : 0;
    if (width && len % width != 0)
        return zf_invalid_argument("packed field '%s' (%u) of %s at byte %zu holds %zu bytes, "
                                   "not a whole number of %zu-byte values",
                                   f->name, f->id, desc->name, at, len, width);
    for (const uint8_t *e = p + len; !width && p < e;) {
        uint64_t v;
        int n = s_read_varint(p, e, &v);
        if (n < 0)
            return zf_invalid_argument("packed field '%s' (%u) of %s at byte %zu holds a %s "
                                       "varint",
                                       f->name, f->id, desc->name, at,
                                       n == -1 ? "truncated" : "too long");
        p += n;
    }
    return ZF_STATUS_OK;
}

/* Checks the message of desc in bytes [start, end). When entry_key is not
 * NULL the message is a map entry, and *entry_key gets its key. */
static zf_status_t s_check(s_wire_t *w, const ProtobufCMessageDescriptor *desc, size_t start,
                           size_t end, int depth, s_map_key_t *entry_key)
{
    if (depth > ZF_GRAPHDEF_MAX_DEPTH)
        return zf_invalid_argument("message nesting deeper than %d at byte %zu",
                                   ZF_GRAPHDEF_MAX_DEPTH, start);
    const uint8_t *p = w->base + start, *e = w->base + end;
    size_t first_key = w->n_keys;
    uint64_t singular_seen = 0; /* non-repeated message fields met, by index */
    while (p < e) {
        size_t at = (size_t)(p - w->base);
        uint64_t key;
        int n = s_read_varint(p, e, &key);
        if (n < 0) return zf_invalid_argument("truncated field tag at byte %zu", at);
        p += n;
        uint32_t number = (uint32_t)(key >> 3);
        unsigned wt = (unsigned)(key & 7);
        if (number == 0 || key >> 3 > 0x1fffffff)
            return zf_invalid_argument("invalid field number %llu at byte %zu",
                                       (unsigned long long)(key >> 3), at);
        const ProtobufCFieldDescriptor *f = s_field(desc, number);
        if (f && wt <= 5 && wt != 3 && wt != 4) ZF_TRY(s_check_wire_type(desc, f, wt, at));
        s_map_key_t *mk = entry_key && number == 1 ? entry_key : NULL;
        uint64_t v;
        switch (wt) {
        case 0:
            n = s_read_varint(p, e, &v);
            if (n < 0)
                return zf_invalid_argument("truncated varint (field %u) at byte %zu", number, at);
            p += n;
            if (mk && f) *mk = (s_map_key_t){mk->field, NULL, 0, s_varint_key(f, v)};
            break;
        case 1:
        case 5: {
            size_t width = wt == 1 ? 8 : 4;
            if ((size_t)(e - p) < width)
                return zf_invalid_argument("truncated %zu-byte field %u at byte %zu", width, number,
                                           at);
            if (mk) {
                *mk = (s_map_key_t){mk->field, NULL, 0, 0};
                for (size_t b = width; b-- > 0;) mk->value = mk->value << 8 | p[b];
            }
            p += width;
            break;
        }
        case 2: {
            n = s_read_varint(p, e, &v);
            if (n < 0)
                return zf_invalid_argument("truncated length (field %u) at byte %zu", number, at);
            p += n;
            if (v > (uint64_t)(e - p))
                return zf_invalid_argument(
                    "field %u at byte %zu declares %llu bytes but only %zu remain", number, at,
                    (unsigned long long)v, (size_t)(e - p));
            if (mk) *mk = (s_map_key_t){mk->field, p, (size_t)v, 0};
            if (f && f->label == PROTOBUF_C_LABEL_REPEATED && s_expected_wire_type(f->type) != 2)
                ZF_TRY(s_check_packed(desc, f, p, (size_t)v, at));
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                size_t sub = (size_t)(p - w->base);
                bool entry = w->track_keys && !w->repeated_keys &&
                             f->label == PROTOBUF_C_LABEL_REPEATED &&
                             s_is_map_entry(w, f->descriptor);
                if (w->track_keys && f->label != PROTOBUF_C_LABEL_REPEATED)
                    s_note_singular(w, &singular_seen, (size_t)(f - desc->fields));
                s_map_key_t k = {number, NULL, 0, 0};
                ZF_TRY(
                    s_check(w, f->descriptor, sub, sub + (size_t)v, depth + 1, entry ? &k : NULL));
                if (entry) s_note_key(w, first_key, &k);
            }
            p += v;
            break;
        }
        default:
            return zf_invalid_argument("invalid wire type %u (field %u) at byte %zu", wt, number,
                                       at);
        }
    }
    w->n_keys = first_key;
    return ZF_STATUS_OK;
}

zf_status_t zf_proto_check_wire(const ProtobufCMessageDescriptor *desc, const void *data,
                                size_t len)
{
    s_wire_t w = {.base = data, .len = len};
    return s_check(&w, desc, 0, len, 0, NULL);
}

/* ---- reading ---------------------------------------------------------- */

/* The wire check notes whether a map key comes twice, so the unpacked
 * message is walked to collapse them only when one does. */
static zf_status_t s_read_pb(const void *data, size_t len, Tensorflow__GraphDef **out)
{
    s_wire_t w = {.base = data, .len = len, .track_keys = true};
    zf_status_t s = s_check(&w, &tensorflow__graph_def__descriptor, 0, len, 0, NULL);
    free(w.keys);
    if (!zf_ok(s)) return zf_status_prefix(s, "malformed binary GraphDef");
    *out = tensorflow__graph_def__unpack(NULL, len, data);
    if (!*out)
        return zf_invalid_argument("malformed binary GraphDef: protobuf unpack failed "
                                   "(a field has the wrong wire type or invalid contents)");
    if (w.repeated_keys) s = zf_proto_collapse_map_keys(&(*out)->base);
    if (!zf_ok(s)) zf_graphdef_free(out);
    return s;
}

static zf_status_t s_read_pbtxt(const void *data, size_t len, Tensorflow__GraphDef **out)
{
    ProtobufCMessage *msg = NULL;
    ZF_TRY(zf_pbtxt_parse(&tensorflow__graph_def__descriptor, data, len, &msg));
    *out = (Tensorflow__GraphDef *)msg;
    return ZF_STATUS_OK;
}

zf_status_t zf_graphdef_read_mem(const void *data, size_t len, zf_graph_format_t format,
                                 Tensorflow__GraphDef **out)
{
    *out = NULL;
    if (len > ZF_GRAPHDEF_MAX_BYTES)
        return zf_invalid_argument("GraphDef of %zu bytes exceeds the 2 GiB protobuf limit", len);
    if (format == ZF_FORMAT_AUTO) format = zf_graph_format_sniff(data, len);
    return format == ZF_FORMAT_PBTXT ? s_read_pbtxt(data, len, out) : s_read_pb(data, len, out);
}

zf_status_t zf_read_file(const char *path, size_t max_bytes, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return zf_status_new(ZF_NOT_FOUND, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return zf_invalid_argument("'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes) {
        fclose(f);
        return zf_invalid_argument("'%s' is %lld bytes, more than the limit of %zu", path,
                                   (long long)st.st_size, max_bytes);
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        fclose(f);
        return zf_out_of_memory("file contents");
    }
    size_t got = fread(buf, 1, size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != size) {
        free(buf);
        return zf_status_new(ZF_DATA_LOSS, "short read on '%s' (%zu of %zu bytes)", path, got,
                             size);
    }
    buf[size] = '\0';
    *out = buf;
    *len = size;
    return ZF_STATUS_OK;
}

zf_status_t zf_graphdef_read_file(const char *path, zf_graph_format_t format,
                                  Tensorflow__GraphDef **out)
{
    *out = NULL;
    char *data;
    size_t len;
    ZF_TRY(zf_read_file(path, ZF_GRAPHDEF_MAX_BYTES, &data, &len));
    if (format == ZF_FORMAT_AUTO) format = zf_graph_format_from_path(path);
    zf_status_t s = zf_graphdef_read_mem(data, len, format, out);
    free(data);
    return zf_status_prefix(s, "%s", path);
}

/* ---- writing ---------------------------------------------------------- */

zf_status_t zf_graphdef_write_mem(const Tensorflow__GraphDef *gd, zf_graph_format_t format,
                                  void **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (format == ZF_FORMAT_PBTXT) {
        char *text;
        ZF_TRY(zf_pbtxt_format(&gd->base, &text, out_len));
        *out = text;
        return ZF_STATUS_OK;
    }
    size_t n = tensorflow__graph_def__get_packed_size(gd);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return zf_out_of_memory("packed GraphDef");
    *out_len = tensorflow__graph_def__pack(gd, buf);
    *out = buf;
    return ZF_STATUS_OK;
}

zf_status_t zf_graphdef_write_file(const Tensorflow__GraphDef *gd, const char *path,
                                   zf_graph_format_t format)
{
    if (format == ZF_FORMAT_AUTO) format = zf_graph_format_from_path(path);
    if (format == ZF_FORMAT_AUTO) format = ZF_FORMAT_PB;
    void *data;
    size_t len;
    ZF_TRY(zf_graphdef_write_mem(gd, format, &data, &len));
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(data);
        return zf_status_new(ZF_PERMISSION_DENIED, "cannot create '%s': %s", path, strerror(errno));
    }
    size_t put = fwrite(data, 1, len, f);
    int close_err = fclose(f);
    free(data);
    if (put != len || close_err != 0)
        return zf_status_new(ZF_DATA_LOSS, "short write to '%s'", path);
    return ZF_STATUS_OK;
}

void zf_graphdef_free(Tensorflow__GraphDef **gd_p)
{
    if (!gd_p || !*gd_p) return;
    tensorflow__graph_def__free_unpacked(*gd_p, NULL);
    *gd_p = NULL;
}
