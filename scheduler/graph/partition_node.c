/* NodeDef building for the partitioner: deep copies of protobuf-c messages
 * (driven by their descriptors), new nodes, attrs and input strings. Every
 * object built here frees with protobuf_c_message_free_unpacked(.., NULL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/graph/partition_internal.h"

#define S_AT(msg, off) ((void *)((char *)(msg) + (off)))

static size_t s_elem_size(ProtobufCType t)
{
    switch (t) {
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
        ProtobufCMessage *c = zf__proto_copy(m);
        *(ProtobufCMessage **)dst = c;
        return c != NULL;
    }
    memcpy(dst, src, s_elem_size(f->type));
    return true;
}

static bool s_copy_repeated(const ProtobufCFieldDescriptor *f, ProtobufCMessage *dst,
                            const ProtobufCMessage *src)
{
    size_t n = *(const size_t *)S_AT(src, f->quantifier_offset);
    const char *from = *(char *const *)S_AT(src, f->offset);
    if (n == 0 || !from) return true;
    size_t size = s_elem_size(f->type);
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

static bool s_copy_unknown(ProtobufCMessage *dst, const ProtobufCMessage *src)
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
    return s_copy_unknown(dst, src);
}

ProtobufCMessage *zf__proto_copy(const ProtobufCMessage *m)
{
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

void zf__node_free(Tensorflow__NodeDef *nd)
{
    if (nd) protobuf_c_message_free_unpacked(&nd->base, NULL);
}

Tensorflow__NodeDef *zf__node_new(char *name, const char *op, const char *device)
{
    Tensorflow__NodeDef *nd = malloc(sizeof *nd);
    if (!nd) {
        free(name);
        return NULL;
    }
    tensorflow__node_def__init(nd);
    nd->name = name;
    nd->op = strdup(op);
    nd->device = strdup(device);
    if (!nd->name || !nd->op || !nd->device) {
        if (!nd->op) nd->op = (char *)protobuf_c_empty_string;
        if (!nd->device) nd->device = (char *)protobuf_c_empty_string;
        if (!nd->name) nd->name = (char *)protobuf_c_empty_string;
        zf__node_free(nd);
        return NULL;
    }
    return nd;
}

static bool s_copy_attrs(Tensorflow__NodeDef *nd, const Tensorflow__NodeDef *src)
{
    if (src->n_attr == 0) return true;
    nd->attr = calloc(src->n_attr, sizeof *nd->attr);
    if (!nd->attr) return false;
    nd->n_attr = src->n_attr;
    for (size_t i = 0; i < src->n_attr; i++) {
        nd->attr[i] = (Tensorflow__NodeDef__AttrEntry *)zf__proto_copy(&src->attr[i]->base);
        if (!nd->attr[i]) return false;
    }
    return true;
}

Tensorflow__NodeDef *zf__node_copy_shell(const Tensorflow__NodeDef *src, const char *device)
{
    char *name = strdup(src->name);
    if (!name) return NULL;
    Tensorflow__NodeDef *nd = zf__node_new(name, src->op, device);
    if (!nd) return NULL;
    bool ok = s_copy_attrs(nd, src) && s_copy_unknown(&nd->base, &src->base);
    if (ok && src->experimental_debug_info) {
        nd->experimental_debug_info = (Tensorflow__NodeDef__ExperimentalDebugInfo *)zf__proto_copy(
            &src->experimental_debug_info->base);
        ok = nd->experimental_debug_info != NULL;
    }
    if (ok && src->experimental_type) {
        nd->experimental_type =
            (Tensorflow__FullTypeDef *)zf__proto_copy(&src->experimental_type->base);
        ok = nd->experimental_type != NULL;
    }
    if (!ok) {
        zf__node_free(nd);
        return NULL;
    }
    return nd;
}

bool zf__node_add_attr(Tensorflow__NodeDef *nd, const char *key, Tensorflow__AttrValue *value)
{
    if (!value) return false;
    Tensorflow__NodeDef__AttrEntry *e = malloc(sizeof *e);
    Tensorflow__NodeDef__AttrEntry **arr =
        e ? realloc(nd->attr, (nd->n_attr + 1) * sizeof *arr) : NULL;
    if (arr) nd->attr = arr;
    char *k = arr ? strdup(key) : NULL;
    if (!k) {
        free(e);
        protobuf_c_message_free_unpacked(&value->base, NULL);
        return false;
    }
    tensorflow__node_def__attr_entry__init(e);
    e->key = k;
    e->value = value;
    nd->attr[nd->n_attr++] = e;
    return true;
}

bool zf__node_add_input(Tensorflow__NodeDef *nd, char *input)
{
    char **arr = input ? realloc(nd->input, (nd->n_input + 1) * sizeof *arr) : NULL;
    if (!arr) {
        free(input);
        return false;
    }
    nd->input = arr;
    nd->input[nd->n_input++] = input;
    return true;
}

static Tensorflow__AttrValue *s_attr_new(Tensorflow__AttrValue__ValueCase which)
{
    Tensorflow__AttrValue *v = malloc(sizeof *v);
    if (!v) return NULL;
    tensorflow__attr_value__init(v);
    v->value_case = which;
    return v;
}

Tensorflow__AttrValue *zf__attr_type(zf_dtype_t dtype)
{
    Tensorflow__AttrValue *v = s_attr_new(TENSORFLOW__ATTR_VALUE__VALUE_TYPE);
    if (v) v->type = (Tensorflow__DataType)dtype;
    return v;
}

Tensorflow__AttrValue *zf__attr_string(const char *s)
{
    size_t len = strlen(s);
    Tensorflow__AttrValue *v = s_attr_new(TENSORFLOW__ATTR_VALUE__VALUE_S);
    uint8_t *data = v && len ? malloc(len) : NULL;
    if (!v || (len && !data)) {
        free(v);
        return NULL;
    }
    if (len) memcpy(data, s, len);
    v->s.data = data;
    v->s.len = len;
    return v;
}

Tensorflow__AttrValue *zf__attr_int(int64_t i)
{
    Tensorflow__AttrValue *v = s_attr_new(TENSORFLOW__ATTR_VALUE__VALUE_I);
    if (v) v->i = i;
    return v;
}

Tensorflow__AttrValue *zf__attr_bool(bool b)
{
    Tensorflow__AttrValue *v = s_attr_new(TENSORFLOW__ATTR_VALUE__VALUE_B);
    if (v) v->b = b;
    return v;
}

Tensorflow__AttrValue *zf__attr_empty_float_tensor(void)
{
    Tensorflow__TensorProto *t = malloc(sizeof *t);
    Tensorflow__TensorShapeProto *shape = malloc(sizeof *shape);
    Tensorflow__TensorShapeProto__Dim *dim = malloc(sizeof *dim);
    Tensorflow__TensorShapeProto__Dim **dims = malloc(sizeof *dims);
    Tensorflow__AttrValue *v = s_attr_new(TENSORFLOW__ATTR_VALUE__VALUE_TENSOR);
    if (!t || !shape || !dim || !dims || !v) {
        free(t);
        free(shape);
        free(dim);
        free(dims);
        free(v);
        return NULL;
    }
    tensorflow__tensor_shape_proto__dim__init(dim);
    dim->size = 0;
    dims[0] = dim;
    tensorflow__tensor_shape_proto__init(shape);
    shape->n_dim = 1;
    shape->dim = dims;
    tensorflow__tensor_proto__init(t);
    t->dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    t->tensor_shape = shape;
    v->tensor = t;
    return v;
}

char *zf__input_string(const char *name, int port)
{
    size_t len = strlen(name);
    char *s = malloc(len + 14);
    if (!s) return NULL;
    if (port == ZF_CONTROL_PORT) {
        s[0] = '^';
        memcpy(s + 1, name, len + 1);
    } else if (port == 0) {
        memcpy(s, name, len + 1);
    } else {
        memcpy(s, name, len);
        snprintf(s + len, 14, ":%d", port);
    }
    return s;
}
