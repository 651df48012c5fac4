/* Generic helpers over protobuf-c messages, driven by their descriptors:
 * the layout of repeated fields and deep copies of any message. */
#ifndef ZF_PROTO_UTIL_H
#define ZF_PROTO_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "common/status.h"

/* Bytes per element of a repeated field of this type, as protobuf-c lays out
 * its arrays (also the size of a singular field's slot); 0 if unknown. */
size_t zf_proto_elem_size(ProtobufCType type);

/* A deep copy of m, unknown fields included, allocated as protobuf-c's unpack
 * does (free it with protobuf_c_message_free_unpacked(.., NULL)). Walks the
 * descriptor once, with no encoding and decoding in between, so it stays
 * cheap on large messages such as GraphDefs. NULL when out of memory (nothing
 * is then left allocated) or when m is not a valid message. */
ProtobufCMessage *zf_proto_copy(const ProtobufCMessage *m);

/* The same with a status: *out gets the copy, or NULL on error.
 * Errors: ZF_INVALID_ARGUMENT for a NULL message or one whose descriptor is
 * not a message descriptor; zf_out_of_memory(what) when memory runs out. */
zf_status_t zf_proto_clone(const ProtobufCMessage *m, const char *what,
                           ProtobufCMessage **out) ZF_WARN_UNUSED;

/* Copies src's unknown fields into dst, which must have none. False when out
 * of memory; what was copied so far is then owned by dst. */
bool zf_proto_copy_unknown(ProtobufCMessage *dst, const ProtobufCMessage *src);

#endif
