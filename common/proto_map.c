/* Protobuf map fields in protobuf-c messages: finding map entry messages
 * through their descriptors and collapsing keys given more than once. */
#include "common/proto_map.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Maps of up to this many entries are checked pairwise, without
 * allocating; longer ones are sorted by key. */
#define S_PAIRWISE_MAX 16

#define S_AT(msg, off) ((void *)((char *)(msg) + (off)))

static bool s_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Key types a map may have: strings and integers (bool included). */
static bool s_key_type(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return false;
    default: return true;
    }
}

bool zf_proto_is_map_entry(const ProtobufCMessageDescriptor *desc)
{
    if (!desc || desc->n_fields != 2) return false;
    const ProtobufCFieldDescriptor *k = &desc->fields[0], *v = &desc->fields[1];
    return k->id == 1 && v->id == 2 && k->label != PROTOBUF_C_LABEL_REPEATED &&
           v->label != PROTOBUF_C_LABEL_REPEATED && s_key_type(k->type) &&
           strcmp(k->name, "key") == 0 && strcmp(v->name, "value") == 0 &&
           s_ends_with(desc->short_name, "Entry");
}

/* A map key: a string, or an integer's bits. */
typedef struct s_key {
    const char *str;
    uint64_t bits;
    size_t index;
} s_key_t;

static s_key_t s_key_of(const ProtobufCFieldDescriptor *kf, const ProtobufCMessage *entry,
                        size_t index)
{
    s_key_t key = {"", 0, index};
    const void *p = S_AT(entry, kf->offset);
    switch (kf->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        key.str = s ? s : "";
        break;
    }
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: memcpy(&key.bits, p, sizeof(uint64_t)); break;
    case PROTOBUF_C_TYPE_BOOL: key.bits = *(const protobuf_c_boolean *)p != 0; break;
    default: {
        uint32_t u;
        memcpy(&u, p, sizeof u);
        key.bits = u;
        break;
    }
    }
    return key;
}

static int s_key_cmp(const s_key_t *a, const s_key_t *b)
{
    int c = strcmp(a->str, b->str);
    if (c == 0) c = (a->bits > b->bits) - (a->bits < b->bits);
    return c;
}

/* Orders keys, and equal keys by position. */
static int s_key_order(const void *pa, const void *pb)
{
    const s_key_t *a = pa, *b = pb;
    int c = s_key_cmp(a, b);
    return c ? c : (a->index > b->index) - (a->index < b->index);
}

/* Frees entry i wherever drop[i] and closes the gaps. */
static void s_drop(ProtobufCMessage **entries, size_t *n, const bool *drop)
{
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
        if (drop[i])
            protobuf_c_message_free_unpacked(entries[i], NULL);
        else
            entries[kept++] = entries[i];
    }
    *n = kept;
}

static void s_collapse_pairwise(const ProtobufCFieldDescriptor *kf, ProtobufCMessage **entries,
                                size_t *n)
{
    bool drop[S_PAIRWISE_MAX] = {false};
    bool any = false;
    for (size_t i = 0; i + 1 < *n; i++) {
        s_key_t a = s_key_of(kf, entries[i], i);
        for (size_t j = i + 1; j < *n && !drop[i]; j++) {
            s_key_t b = s_key_of(kf, entries[j], j);
            drop[i] = s_key_cmp(&a, &b) == 0;
        }
        any |= drop[i];
    }
    if (any) s_drop(entries, n, drop);
}

static zf_status_t s_collapse_sorted(const ProtobufCFieldDescriptor *kf, ProtobufCMessage **entries,
                                     size_t *n)
{
    s_key_t *keys = malloc(*n * sizeof *keys);
    bool *drop = calloc(*n, sizeof *drop);
    if (!keys || !drop) {
        free(keys);
        free(drop);
        return zf_out_of_memory("a map's keys");
    }
    for (size_t i = 0; i < *n; i++) keys[i] = s_key_of(kf, entries[i], i);
    qsort(keys, *n, sizeof *keys, s_key_order);
    bool any = false;
    for (size_t i = 0; i + 1 < *n; i++) {
        /* All but the last of a run of equal keys go. */
        if (s_key_cmp(&keys[i], &keys[i + 1]) == 0) drop[keys[i].index] = any = true;
    }
    if (any) s_drop(entries, n, drop);
    free(keys);
    free(drop);
    return ZF_STATUS_OK;
}

static zf_status_t s_collapse_map(const ProtobufCFieldDescriptor *f, ProtobufCMessage *m)
{
    size_t *n = S_AT(m, f->quantifier_offset);
    ProtobufCMessage **entries = *(ProtobufCMessage ***)S_AT(m, f->offset);
    if (*n < 2 || !entries) return ZF_STATUS_OK;
    const ProtobufCFieldDescriptor *kf =
        &((const ProtobufCMessageDescriptor *)f->descriptor)->fields[0];
    for (size_t i = 0; i < *n; i++)
        if (!entries[i]) return ZF_STATUS_OK; /* not from an unpack: leave it */
    if (*n <= S_PAIRWISE_MAX) {
        s_collapse_pairwise(kf, entries, n);
        return ZF_STATUS_OK;
    }
    return s_collapse_sorted(kf, entries, n);
}

/* The map entry type met last, so the strings of a descriptor are compared
 * once per run of entries rather than once per message. */
typedef struct s_walk {
    const ProtobufCMessageDescriptor *entry;
} s_walk_t;

static bool s_is_map_entry(s_walk_t *w, const ProtobufCMessageDescriptor *desc)
{
    if (desc == w->entry) return true;
    if (!zf_proto_is_map_entry(desc)) return false;
    w->entry = desc;
    return true;
}

static zf_status_t s_walk(s_walk_t *w, ProtobufCMessage *msg)
{
    if (!msg) return ZF_STATUS_OK;
    const ProtobufCMessageDescriptor *d = msg->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (s_is_map_entry(w, f->descriptor)) ZF_TRY(s_collapse_map(f, msg));
            size_t n = *(const size_t *)S_AT(msg, f->quantifier_offset);
            ProtobufCMessage **sub = *(ProtobufCMessage ***)S_AT(msg, f->offset);
            for (size_t k = 0; k < n && sub; k++) ZF_TRY(s_walk(w, sub[k]));
            continue;
        }
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)S_AT(msg, f->quantifier_offset) != f->id)
            continue;
        ZF_TRY(s_walk(w, *(ProtobufCMessage **)S_AT(msg, f->offset)));
    }
    return ZF_STATUS_OK;
}

zf_status_t zf_proto_collapse_map_keys(ProtobufCMessage *msg)
{
    s_walk_t w = {NULL};
    return s_walk(&w, msg);
}
