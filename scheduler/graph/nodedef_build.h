/* NodeDef building shared by the graph transforms of this layer (the
 * partitioner, the function transform): new nodes, copies of nodes, attrs
 * and input strings, implemented in partition_node.c. */
#ifndef ZF_NODEDEF_BUILD_H
#define ZF_NODEDEF_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "common/dtype.h"
#include "proto/node_def.pb-c.h"

/* Every builder returns NULL (or false) only when out of memory, leaving
 * nothing allocated; results free with protobuf_c_message_free_unpacked. */

/* A new NodeDef owning name (taken, freed on failure) with copies of op and
 * device. */
Tensorflow__NodeDef *zf__node_new(char *name, const char *op, const char *device);

/* A copy of src's name, op, attrs and experimental fields, on device, with
 * no inputs. */
Tensorflow__NodeDef *zf__node_copy_shell(const Tensorflow__NodeDef *src, const char *device);

/* Appends an attr (value taken; freed on failure). */
bool zf__node_add_attr(Tensorflow__NodeDef *nd, const char *key, Tensorflow__AttrValue *value);
/* Appends an input (taken; freed on failure). */
bool zf__node_add_input(Tensorflow__NodeDef *nd, char *input);

Tensorflow__AttrValue *zf__attr_type(zf_dtype_t dtype);
Tensorflow__AttrValue *zf__attr_string(const char *s);
Tensorflow__AttrValue *zf__attr_int(int64_t i);
Tensorflow__AttrValue *zf__attr_bool(bool b);
/* An empty FLOAT tensor of shape [0] (the payload of control transfers). */
Tensorflow__AttrValue *zf__attr_empty_float_tensor(void);

/* "name" for port 0, "name:port", or "^name" for ZF_CONTROL_PORT. */
char *zf__input_string(const char *name, int port);

void zf__node_free(Tensorflow__NodeDef *nd);

#endif
