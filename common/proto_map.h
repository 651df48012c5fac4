/* Protobuf map fields in protobuf-c messages.
 *
 * protobuf-c has no map type: a map field is a repeated field of entry
 * messages (a nested "<Name>Entry" message of two fields, key = 1 and
 * value = 2), so a key given twice, on the wire or in text, stays there
 * twice. Protobuf's maps hold each key once, with the last value given.
 * The readers of zflow's formats apply that rule with the function below,
 * so a map read once is carried and written with each key once. */
#ifndef ZF_PROTO_MAP_H
#define ZF_PROTO_MAP_H

#include <protobuf-c/protobuf-c.h>

#include "common/status.h"

/* Whether desc is a map entry message as protoc-c lays it out. */
bool zf_proto_is_map_entry(const ProtobufCMessageDescriptor *desc);

/* Removes from every map of msg, and of every message msg holds, each
 * entry whose key comes again later in the same map: every key keeps its
 * last value, once, and the entries left keep their order. msg must be
 * allocated as protobuf-c's unpack (or zf_pbtxt_parse()) allocates it; the
 * removed entries are freed. Cost: one walk over the message tree, a few
 * key comparisons per map entry, and n log n for a map of more than 16
 * entries. RESOURCE_EXHAUSTED when out of memory (msg stays valid; some
 * maps may still hold repeated keys). */
zf_status_t zf_proto_collapse_map_keys(ProtobufCMessage *msg) ZF_WARN_UNUSED;

#endif
