/* Protobuf text format writer: walks a protobuf-c message through its
 * descriptor and prints it the way TensorFlow's tools do (reader: pbtxt.c). */
#include "common/pbtxt.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto_util.h"

/* ---- shared with the reader ---- */

float zf__pbtxt_double_to_float(double v)
{
    /* Narrowing a double beyond the float range is undefined in C, so the
     * edge is rounded by hand: up to half a unit above FLT_MAX rounds down to
     * it, from there on to infinity. (protobuf sends anything above FLT_MAX
     * to infinity, even 3.4028235e38, FLT_MAX's own shortest spelling.) */
    const double overflow = (double)FLT_MAX + 0x1p103;
    if (v > FLT_MAX) return v < overflow ? FLT_MAX : INFINITY;
    if (v < -FLT_MAX) return v > -overflow ? -FLT_MAX : -INFINITY;
    return (float)v;
}

/* Output buffer. A failed allocation sets oom and later writes become no-ops,
 * so the printing code checks for memory once, at the end. */
typedef struct s_out {
    char *buf;
    size_t len, cap;
    bool oom;
} s_out_t;

static bool s_reserve(s_out_t *o, size_t more)
{
    if (o->oom) return false;
    if (more < o->cap - o->len) return true; /* keeps room for the final NUL */
    size_t cap = o->cap ? o->cap : 1024;
    while (cap - o->len <= more) {
        if (cap > SIZE_MAX / 2) {
            o->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *grown = realloc(o->buf, cap);
    if (!grown) {
        o->oom = true;
        return false;
    }
    o->buf = grown;
    o->cap = cap;
    return true;
}

static void s_put(s_out_t *o, const char *s, size_t n)
{
    if (!s_reserve(o, n)) return;
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void s_puts(s_out_t *o, const char *s)
{
    s_put(o, s, strlen(s));
}

static void s_indent(s_out_t *o, unsigned indent)
{
    if (!s_reserve(o, indent)) return;
    memset(o->buf + o->len, ' ', indent);
    o->len += indent;
}

/* C escapes for quotes, backslash and the common controls; every other byte
 * outside printable ASCII as three octal digits, as protobuf's CEscape does
 * (so UTF-8 text comes out as octal too, like TensorFlow's output). */
static void s_put_escaped(s_out_t *o, const uint8_t *s, size_t n)
{
    s_put(o, "\"", 1);
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && s[run] >= 0x20 && s[run] < 0x7f && s[run] != '"' && s[run] != '\'' &&
               s[run] != '\\')
            run++;
        s_put(o, (const char *)s + i, run - i);
        if (run == n) break;
        char esc[5];
        switch (s[run]) {
        case '\n': s_put(o, "\\n", 2); break;
        case '\r': s_put(o, "\\r", 2); break;
        case '\t': s_put(o, "\\t", 2); break;
        case '"': s_put(o, "\\\"", 2); break;
        case '\'': s_put(o, "\\'", 2); break;
        case '\\': s_put(o, "\\\\", 2); break;
        default:
            snprintf(esc, sizeof esc, "\\%03o", (unsigned)s[run]);
            s_put(o, esc, 4);
            break;
        }
        i = run + 1;
    }
    s_put(o, "\"", 1);
}

/* Non-finite values in the spellings the reader (and protobuf) accept. */
static bool s_format_special(double v, char *buf, size_t cap)
{
    if (isnan(v))
        snprintf(buf, cap, "%s", signbit(v) ? "-nan" : "nan");
    else if (isinf(v))
        snprintf(buf, cap, "%s", v < 0 ? "-inf" : "inf");
    else
        return false;
    return true;
}

/* The shortest %g form that reads back to the same float: 9 significant
 * digits always do, fewer usually, which keeps `0.1` from printing as
 * `0.100000001`. The check narrows exactly as the reader does. */
static void s_format_float(float v, char *buf, size_t cap)
{
    if (s_format_special(v, buf, cap)) return;
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, cap, "%.*g", prec, (double)v);
        if (zf__pbtxt_double_to_float(strtod(buf, NULL)) == v) return;
    }
}

static void s_format_double(double v, char *buf, size_t cap)
{
    if (s_format_special(v, buf, cap)) return;
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static void s_write_scalar(s_out_t *o, const ProtobufCFieldDescriptor *f, const void *slot)
{
    char buf[64];
    const ProtobufCEnumValue *ev;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        snprintf(buf, sizeof buf, "%" PRId32, *(const int32_t *)slot);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        snprintf(buf, sizeof buf, "%" PRIu32, *(const uint32_t *)slot);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(buf, sizeof buf, "%" PRId64, *(const int64_t *)slot);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        snprintf(buf, sizeof buf, "%" PRIu64, *(const uint64_t *)slot);
        break;
    case PROTOBUF_C_TYPE_FLOAT: s_format_float(*(const float *)slot, buf, sizeof buf); break;
    case PROTOBUF_C_TYPE_DOUBLE: s_format_double(*(const double *)slot, buf, sizeof buf); break;
    case PROTOBUF_C_TYPE_BOOL:
        snprintf(buf, sizeof buf, "%s", *(const protobuf_c_boolean *)slot ? "true" : "false");
        break;
    case PROTOBUF_C_TYPE_ENUM:
        /* By name when the schema knows the number, else the number itself
         * (proto3 enums are open), which reads back the same. */
        ev = protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int32_t *)slot);
        if (ev) {
            s_puts(o, ev->name);
            return;
        }
        snprintf(buf, sizeof buf, "%" PRId32, *(const int32_t *)slot);
        break;
    case PROTOBUF_C_TYPE_STRING: {
        const char *str = *(const char *const *)slot;
        if (!str) str = "";
        s_put_escaped(o, (const uint8_t *)str, strlen(str));
        return;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *bd = slot;
        s_put_escaped(o, bd->data, bd->data ? bd->len : 0);
        return;
    }
    case PROTOBUF_C_TYPE_MESSAGE: return;
    }
    s_puts(o, buf);
}

static void s_write_message(s_out_t *o, const ProtobufCMessage *m, unsigned indent);

/* One `name: value` or `name { ... }` line (or block). */
static void s_write_field(s_out_t *o, const ProtobufCFieldDescriptor *f, const void *slot,
                          unsigned indent)
{
    s_indent(o, indent);
    s_puts(o, f->name);
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)slot;
        s_put(o, " {\n", 3);
        if (sub) s_write_message(o, sub, indent + 2);
        s_indent(o, indent);
        s_put(o, "}\n", 2);
        return;
    }
    s_put(o, ": ", 2);
    s_write_scalar(o, f, slot);
    s_put(o, "\n", 1);
}

/* proto3 leaves out a scalar equal to its zero value; this mirrors the test
 * protobuf-c's packer applies, so what is written is what would be packed. */
static bool s_is_zero(const ProtobufCFieldDescriptor *f, const void *slot)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_FLOAT: return *(const float *)slot == 0;
    case PROTOBUF_C_TYPE_DOUBLE: return *(const double *)slot == 0;
    case PROTOBUF_C_TYPE_BOOL: return *(const protobuf_c_boolean *)slot == 0;
    case PROTOBUF_C_TYPE_STRING: {
        const char *str = *(const char *const *)slot;
        return !str || !*str;
    }
    case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)slot)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE: return *(const void *const *)slot == NULL;
    default:
        if (zf_proto_elem_size(f->type) == 8) return *(const uint64_t *)slot == 0;
        return *(const uint32_t *)slot == 0;
    }
}

/* Whether a singular field is present and so written. */
static bool s_is_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    const char *base = (const char *)m;
    const void *slot = base + f->offset;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) return *(const void *const *)slot != NULL;
    switch (f->label) {
    case PROTOBUF_C_LABEL_NONE: return !s_is_zero(f, slot);
    case PROTOBUF_C_LABEL_OPTIONAL:
        /* proto2: strings are present unless NULL or the default; the rest
         * carry a has_ flag. */
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            const char *str = *(const char *const *)slot;
            return str && str != f->default_value;
        }
        return *(const protobuf_c_boolean *)(base + f->quantifier_offset) != 0;
    case PROTOBUF_C_LABEL_REQUIRED:
        return f->type != PROTOBUF_C_TYPE_STRING || *(const char *const *)slot != NULL;
    case PROTOBUF_C_LABEL_REPEATED: return false;
    }
    return false;
}

/* Fields go out in the descriptor's order, which protobuf-c sorts by field
 * number, the order protobuf's own printer uses. */
static void s_write_message(s_out_t *o, const ProtobufCMessage *m, unsigned indent)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields && !o->oom; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            if (s_is_present(m, f)) s_write_field(o, f, base + f->offset, indent);
            continue;
        }
        size_t n = *(const size_t *)(base + f->quantifier_offset);
        const char *arr = *(const char *const *)(base + f->offset);
        size_t esz = zf_proto_elem_size(f->type);
        for (size_t j = 0; j < n && arr; j++) s_write_field(o, f, arr + j * esz, indent);
    }
}

zf_status_t zf_pbtxt_format(const ProtobufCMessage *msg, char **out, size_t *out_len)
{
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!msg || !out || !msg->descriptor ||
        msg->descriptor->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC)
        return zf_invalid_argument("zf_pbtxt_format: NULL or invalid argument");
    s_out_t o = {0};
    s_reserve(&o, 0);
    s_write_message(&o, msg, 0);
    if (o.oom) {
        free(o.buf);
        return zf_out_of_memory("pbtxt output");
    }
    o.buf[o.len] = '\0';
    *out = o.buf;
    if (out_len) *out_len = o.len;
    return ZF_STATUS_OK;
}
