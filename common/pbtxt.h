/* Protobuf text format (.pbtxt) reader and writer, generic over protobuf-c
 * descriptors, so TensorFlow's text GraphDefs load into the generated structs.
 *
 * Reader: one linear pass over the text, no per-token allocations beyond the
 * message itself. Accepts what protobuf's own text parser accepts for our
 * schemas: `name: value`, `name { ... }`, `name: { ... }`, `name < ... >`,
 * repeated fields as repeated entries or `[a, b]` lists, map entries as
 * `key`/`value` messages (a key given twice keeps its last value, once, as
 * protobuf's maps do: see proto_map.h), enums by name or number,
 * decimal/hex/octal ints, floats with `inf`/`nan` and an `f` suffix,
 * single- or double-quoted strings with C escapes and adjacent-literal
 * concatenation, `#` comments and optional `;`/`,` separators. Like
 * protobuf's parser it rejects a non-repeated field given twice, two members
 * of one oneof, and hex or octal integers for float fields. Not supported:
 * extensions and `Any` expansions (`[type.googleapis.com/...]`), and a NUL
 * byte in a `string` field (protobuf-c strings are NUL-terminated; `bytes`
 * fields take any byte). Values above FLT_MAX for a float field round
 * correctly (protobuf's parser makes every such value infinity, even
 * FLT_MAX's own shortest spelling 3.4028235e38).
 *
 * Writer: TensorFlow-style output (two-space indent, fields in field-number
 * order, proto3 zero scalars and empty repeated fields left out, a set oneof
 * member always written), strings with C escapes and non-ASCII bytes as octal,
 * floats in the shortest form that reads back to the same value. Map entries
 * are written in stored order (protobuf sorts them by key), so that
 * text -> message -> text -> message gives back the identical message.
 * Unknown fields (from binary input) are not written, and a NaN is written as
 * `nan` or `-nan` without its payload bits.
 *
 * Both functions are thread-safe (no shared state) and need the "C" numeric
 * locale, which is the default for a program that never calls setlocale(). */
#ifndef ZF_PBTXT_H
#define ZF_PBTXT_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "common/status.h"

/* Deepest message nesting the reader accepts; deeper input is an error, which
 * keeps the recursive reader (and protobuf-c's recursive free) off the end of
 * the stack. */
#define ZF_PBTXT_MAX_DEPTH 100

/* Parses text (len bytes, need not be NUL-terminated) into a new message of
 * type desc. On success *out is owned by the caller and has exactly the layout
 * protobuf_c_message_unpack() gives, so it is freed with
 * protobuf_c_message_free_unpacked(*out, NULL). On error *out is NULL and
 * nothing leaks.
 *
 * Errors: ZF_INVALID_ARGUMENT for malformed input, with a message that starts
 * "line:column: " (both 1-based, the column counted in bytes) and says what
 * was expected and what was found, e.g.
 *   "3:7: unknown field 'nodes' in tensorflow.GraphDef"
 *   "5:12: unknown enum value 'DT_FLOOT' for field 'type'"
 * ZF_RESOURCE_EXHAUSTED when memory runs out. */
zf_status_t zf_pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                           ProtobufCMessage **out) ZF_WARN_UNUSED;

/* Writes msg in text format. On success *out is NUL-terminated text owned by
 * the caller (free()), and *out_len (when out_len is not NULL) its length
 * without the NUL. On error *out is NULL. Errors: ZF_INVALID_ARGUMENT for a
 * NULL message, ZF_RESOURCE_EXHAUSTED when memory runs out. */
zf_status_t zf_pbtxt_format(const ProtobufCMessage *msg, char **out,
                            size_t *out_len) ZF_WARN_UNUSED;

/* Internal, shared by the reader and the writer so both narrow a parsed
 * double to a float field the same way: correctly rounded, and infinity
 * beyond the float range rather than C's undefined behaviour. */
float zf__pbtxt_double_to_float(double v);

#endif
