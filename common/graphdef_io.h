/* GraphDef I/O: reads and writes TensorFlow GraphDefs as binary protobuf
 * (.pb) or text format (.pbtxt), from files or memory.
 *
 * Binary input is checked before protobuf-c unpacks it: a walk over the
 * wire format (driven by the message descriptors) rejects truncated fields,
 * bad wire types and nesting deeper than ZF_GRAPHDEF_MAX_DEPTH, and says
 * where, because protobuf-c's own unpack only says "failed". */
#ifndef ZF_GRAPHDEF_IO_H
#define ZF_GRAPHDEF_IO_H

#include <stddef.h>

#include "common/status.h"
#include "proto/graph.pb-c.h"

#define ZF_GRAPHDEF_MAX_DEPTH 100
#define ZF_GRAPHDEF_MAX_BYTES ((size_t)2 << 30) /* protobuf's own 2 GiB limit */

typedef enum zf_graph_format {
    ZF_FORMAT_AUTO = 0, /* by file extension, else by content */
    ZF_FORMAT_PB,       /* binary protobuf */
    ZF_FORMAT_PBTXT,    /* protobuf text format */
} zf_graph_format_t;

/* .pb/.graphdef → PB; .pbtxt/.pbtext/.txt/.prototxt → PBTXT; else AUTO. */
zf_graph_format_t zf_graph_format_from_path(const char *path);

/* Parses a format name: "pb", "pbtxt" (also "binary", "text"). */
zf_status_t zf_graph_format_parse(const char *name, zf_graph_format_t *out);

/* Guesses the format of data: text when every byte is printable ASCII or
 * whitespace (after skipping a leading comment), binary otherwise. */
zf_graph_format_t zf_graph_format_sniff(const void *data, size_t len);

/* Parses a GraphDef. *out is owned by the caller: free with
 * zf_graphdef_free(). In both formats a map key given twice (an attr
 * repeated on one node) keeps its last value, once (proto_map.h). Errors:
 * INVALID_ARGUMENT describing what is wrong and where (byte offset for
 * binary, line:column for text); RESOURCE_EXHAUSTED. */
zf_status_t zf_graphdef_read_mem(const void *data, size_t len, zf_graph_format_t format,
                                 Tensorflow__GraphDef **out);

/* Reads and parses a file; errors are prefixed with the path. NOT_FOUND
 * when the file cannot be opened. */
zf_status_t zf_graphdef_read_file(const char *path, zf_graph_format_t format,
                                  Tensorflow__GraphDef **out);

/* Serialises a GraphDef. *out is owned by the caller (free()). */
zf_status_t zf_graphdef_write_mem(const Tensorflow__GraphDef *gd, zf_graph_format_t format,
                                  void **out, size_t *out_len);

/* Writes to path (AUTO picks by extension, binary when unknown). */
zf_status_t zf_graphdef_write_file(const Tensorflow__GraphDef *gd, const char *path,
                                   zf_graph_format_t format);

/* Checks that data is well-formed wire format for desc (tags, wire types,
 * lengths, packed repeated values, nesting depth) without allocating: the
 * faults of the wire format that protobuf-c's unpack refuses, said with
 * where they are. Used before unpacking any message that arrives from a
 * file or the network, and on its own where a message is kept without
 * being unpacked (a large SubmitJob at the broker). */
zf_status_t zf_proto_check_wire(const ProtobufCMessageDescriptor *desc, const void *data,
                                size_t len);

/* One field of protobuf wire bytes, as zf_proto_next_field() reads it. */
typedef struct zf_proto_field {
    uint32_t number;
    int wire;            /* 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit */
    uint64_t value;      /* a varint's value; a length-delimited field's length */
    const uint8_t *data; /* a length-delimited field's bytes; NULL otherwise */
} zf_proto_field_t;

/* Reads the field at *p (before end) into *f and moves *p past it, without
 * looking inside it: for reading a message's top level (an envelope's
 * header) without unpacking it. False when the field is malformed (a
 * truncated or overlong varint, field number 0, a length past end, a
 * group or an unknown wire type); *p is then undefined. */
bool zf_proto_next_field(const uint8_t **p, const uint8_t *end, zf_proto_field_t *f);

/* The most bytes a varint takes. */
#define ZF_PROTO_VARINT_MAX 10

/* Writes v as a protobuf varint at p (room for ZF_PROTO_VARINT_MAX bytes);
 * returns the bytes written: for writing a message's top level (an
 * envelope's header) around bytes that are not packed again. */
size_t zf_proto_put_varint(uint8_t *p, uint64_t v);

/* Frees a GraphDef from this module (or protobuf-c's unpack); NULL-safe,
 * sets *gd_p to NULL. */
void zf_graphdef_free(Tensorflow__GraphDef **gd_p);

/* Reads a whole file into memory (at most max_bytes). *out is owned by the
 * caller (free()); it is NUL-terminated one byte past *len for text use. */
zf_status_t zf_read_file(const char *path, size_t max_bytes, char **out, size_t *len);

#endif
