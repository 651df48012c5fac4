/* Generic protobuf-c helpers: repeated-field layout and deep copies driven
 * by message descriptors. */
#include "common/proto_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define S_AT(msg, off) ((void *)((char *)(msg) + (off)))

size_t zf_proto_elem_size(ProtobufCType type)
{
    switch (type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_ENUM: return sizeof(uint32_t);
    case PROTOBUF_C_TYPE_FLOAT: return sizeof(float);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return sizeof(uint64_t);
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* Copies one value of field f from src to dst (both point at the value).
 * Pointers equal to the field's default stay shared, as protobuf-c's free
 * expects. False when out of memory (dst then holds nothing to free). */
static bool s_copy_value(const ProtobufCFieldDescriptor *f, void *dst, const void *src,
                         bool repeated)
{
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        const char *s = *(char *const *)src;
        if (!s || (!repeated && s == f->default_value)) {
            memcpy(dst, src, sizeof s);
            return true;
        }
        char *c = strdup(s);
        *(char **)dst = c;
        return c != NULL;
    }
    if (f->type == PROTOBUF_C_TYPE_BYTES) {
        const ProtobufCBinaryData *b = src;
        ProtobufCBinaryData *d = dst;
        d->len = 0;
        d->data = NULL;
        if (b->len == 0) return true;
        if (!(d->data = malloc(b->len))) return false;
        memcpy(d->data, b->data, b->len);
        d->len = b->len;
        return true;
    }
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const ProtobufCMessage *m = *(ProtobufCMessage *const *)src;
        if (!m || (!repeated && (const void *)m == f->default_value)) {
            memcpy(dst, src, sizeof m);
            return true;
        }
        ProtobufCMessage *c = zf_proto_copy(m);
        *(ProtobufCMessage **)dst = c;
        return c != NULL;
    }
    memcpy(dst, src, zf_proto_elem_size(f->type));
    return true;
}

static bool s_copy_repeated(const ProtobufCFieldDescriptor *f, ProtobufCMessage *dst,
                            const ProtobufCMessage *src)
{
    size_t n = *(const size_t *)S_AT(src, f->quantifier_offset);
    const char *from = *(char *const *)S_AT(src, f->offset);
    if (n == 0 || !from) return true;
    size_t size = zf_proto_elem_size(f->type);
    char *arr = calloc(n, size);
    if (!arr) return false;
    /* The count is set first: calloc'd (NULL) elements are safe to free. */
    *(void **)S_AT(dst, f->offset) = arr;
    *(size_t *)S_AT(dst, f->quantifier_offset) = n;
    bool scalar = f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_BYTES &&
                  f->type != PROTOBUF_C_TYPE_MESSAGE;
    if (scalar) {
        memcpy(arr, from, n * size);
        return true;
    }
    for (size_t i = 0; i < n; i++)
        if (!s_copy_value(f, arr + i * size, from + i * size, true)) return false;
    return true;
}

bool zf_proto_copy_unknown(ProtobufCMessage *dst, const ProtobufCMessage *src)
{
    if (src->n_unknown_fields == 0) return true;
    dst->unknown_fields = calloc(src->n_unknown_fields, sizeof *dst->unknown_fields);
    if (!dst->unknown_fields) return false;
    for (unsigned i = 0; i < src->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &src->unknown_fields[i];
        ProtobufCMessageUnknownField *d = &dst->unknown_fields[i];
        *d = *u;
        d->data = NULL;
        d->len = 0;
        dst->n_unknown_fields = i + 1;
        if (u->len == 0) continue;
        if (!(d->data = malloc(u->len))) return false;
        memcpy(d->data, u->data, u->len);
        d->len = u->len;
    }
    return true;
}

static bool s_copy_fields(ProtobufCMessage *dst, const ProtobufCMessage *src)
{
    const ProtobufCMessageDescriptor *desc = src->descriptor;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (!s_copy_repeated(f, dst, src)) return false;
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which = *(const uint32_t *)S_AT(src, f->quantifier_offset);
            if (which != f->id) continue;
            /* The value first: free reads the case to decide what to free. */
            if (!s_copy_value(f, S_AT(dst, f->offset), S_AT(src, f->offset), false)) return false;
            *(uint32_t *)S_AT(dst, f->quantifier_offset) = which;
            continue;
        }
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset)
            memcpy(S_AT(dst, f->quantifier_offset), S_AT(src, f->quantifier_offset),
                   sizeof(protobuf_c_boolean));
        if (!s_copy_value(f, S_AT(dst, f->offset), S_AT(src, f->offset), false)) return false;
    }
    return zf_proto_copy_unknown(dst, src);
}

/* A message that zf_proto_copy can walk: a message descriptor whose struct
 * holds at least the common header. */
static bool s_valid(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m ? m->descriptor : NULL;
    return d && d->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC &&
           d->sizeof_message >= sizeof(ProtobufCMessage) && d->message_init;
}

ProtobufCMessage *zf_proto_copy(const ProtobufCMessage *m)
{
    if (!s_valid(m)) return NULL;
    const ProtobufCMessageDescriptor *desc = m->descriptor;
    ProtobufCMessage *c = malloc(desc->sizeof_message);
    if (!c) return NULL;
    desc->message_init(c);
    if (!s_copy_fields(c, m)) {
        protobuf_c_message_free_unpacked(c, NULL);
        return NULL;
    }
    return c;
}

zf_status_t zf_proto_clone(const ProtobufCMessage *m, const char *what, ProtobufCMessage **out)
{
    *out = NULL;
    if (!s_valid(m)) return zf_invalid_argument("%s: not a protobuf message", what);
    *out = zf_proto_copy(m);
    return *out ? ZF_STATUS_OK : zf_out_of_memory(what);
}
