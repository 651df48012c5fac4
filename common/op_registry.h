/* Op registry: what zflow knows about each op type — its inputs and outputs
 * (arity and dtypes derived from a node's attrs such as T, N, dtype), its
 * properties, and which device types have kernels for it.
 *
 * The table of ops is built in (op_table.c); device types with kernels
 * are added at start-up by registering the kernel definitions
 * (common/kernel_def.h), which every process that places or runs graphs
 * does, and by tests.
 * Lookups are thread-safe once start-up registration is done. Ops that are
 * not in the table are "unknown": graphs keep them and report them, nothing
 * rejects them at load. */
#ifndef ZF_OP_REGISTRY_H
#define ZF_OP_REGISTRY_H

#include <stdbool.h>

#include "common/dtype.h"
#include "common/status.h"
#include "proto/node_def.pb-c.h"

typedef struct zf_op_def zf_op_def_t;

/* Op properties (bit flags). */
enum {
    ZF_OP_STATEFUL = 1u << 0,     /* depends on or changes state beyond its inputs */
    ZF_OP_METADATA = 1u << 1,     /* reads only its input's metadata: Shape, Size, Rank */
    ZF_OP_SOURCE = 1u << 2,       /* takes no data inputs (Const, Placeholder, variables) */
    ZF_OP_CONTROL_FLOW = 1u << 3, /* Switch, Merge, Enter, Exit, NextIteration, LoopCond */
    ZF_OP_FUNCTIONAL = 1u << 4,   /* calls a function (While, If, PartitionedCall, ...) */
    ZF_OP_SEND_RECV = 1u << 5,    /* _Send, _Recv, _HostSend, _HostRecv */
    ZF_OP_UNSUPPORTED = 1u << 6,  /* known to zflow, but running it is not supported */
};

/* The registered definition of op, or NULL if unknown. */
const zf_op_def_t *zf_op_lookup(const char *op);

const char *zf_op_name(const zf_op_def_t *def);
unsigned zf_op_flags(const zf_op_def_t *def);
static inline bool zf_op_has_flag(const zf_op_def_t *def, unsigned flag)
{
    return def && (zf_op_flags(def) & flag) != 0;
}

/* Number of input and output arguments in the op's signature (an argument
 * can expand to several tensors, e.g. N*T). */
int zf_op_num_input_args(const zf_op_def_t *def);
int zf_op_num_output_args(const zf_op_def_t *def);

/* Resolves the node's input (or output) tensor types from its attrs.
 * Writes up to max types to types[] and the full count to *n. Returns
 * INVALID_ARGUMENT naming the node and attr when a needed attr is missing or
 * has the wrong kind (e.g. T is not a type), or when a count is negative or
 * absurd (> 1<<20). Reference-typed arguments give *_REF dtypes.
 * types may be NULL when max is 0 (count only). */
zf_status_t zf_op_input_types(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                              zf_dtype_t *types, int max, int *n);
zf_status_t zf_op_output_types(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                               zf_dtype_t *types, int max, int *n);

/* Attr defaults (TensorFlow's AddDefaultsToNodeDef). The op's definition
 * gives defaults for some of its attrs; a node written with the attrs that
 * hold their defaults left out (as SavedModel's strip_default_attrs writes
 * it) means the same as one that spells them. zf_op_add_default_attrs()
 * appends to node, after its own attrs and in the op's declaration order,
 * an entry for every defaulted attr the node does not have (an entry with
 * the key but no value counts as having it). node must be allocated as
 * protobuf-c's unpack allocates it: the new entries are freed with it.
 * *added (may be NULL) gets the number of entries added. Errors:
 * RESOURCE_EXHAUSTED (node then holds the entries added so far). */
int zf_op_num_default_attrs(const zf_op_def_t *def);
zf_status_t zf_op_add_default_attrs(const zf_op_def_t *def, Tensorflow__NodeDef *node, int *added);

/* Kernel availability by device type ("CPU", "GPU", ...). Registration is
 * for start-up (not thread-safe against concurrent lookups); returns
 * NOT_FOUND for an unknown op and RESOURCE_EXHAUSTED past 16 device types. */
zf_status_t zf_op_register_kernel(const char *op, const char *device_type);
bool zf_op_has_kernel(const zf_op_def_t *def, const char *device_type);

/* Forgets every kernel registration (tests). */
void zf_op_registry_reset_kernels(void);

/* Calls fn for every registered op, in name order. */
void zf_op_foreach(void (*fn)(const zf_op_def_t *def, void *arg), void *arg);

/* The tensor positions [*start, *stop) that the input (or output) argument
 * named arg ("shape" of Reshape, "output_true" of Switch, ...) takes up in
 * the node, as resolved from its attrs (TensorFlow's NameRangesForNode).
 * NOT_FOUND when the op has no such argument; attr errors as above. */
zf_status_t zf_op_input_range(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                              const char *arg, int *start, int *stop);
zf_status_t zf_op_output_range(const zf_op_def_t *def, const Tensorflow__NodeDef *node,
                               const char *arg, int *start, int *stop);

/* Internal: the built-in table of op signatures (op_table.c), one op per
 * string in the syntax described there, NULL-terminated. */
const char *const *zf__op_table(void);

#endif
