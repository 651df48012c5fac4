/* Kernel definitions: for each op, the device types that can run it, the
 * dtypes each accepts and which arguments live in host memory on a
 * non-CPU device — TensorFlow's KernelDef. Data only, no code: the placer
 * and the partitioner read definitions; the runtime attaches an
 * implementation to each (executor/kernels/kernel.h), so a process that
 * places and partitions but runs nothing (the scheduler) links no kernel.
 *
 * The built-in definitions (kernel_defs.c) cover every kernel zflow
 * implements, for CPU and GPU, whether or not this build has CUDA: a
 * scheduler built without it still places onto GPU executors. Registering
 * a definition also records, in the op registry, that its device type has
 * a kernel for the op.
 *
 * Registration is for start-up; lookups take a read lock only. */
#ifndef ZF_KERNEL_DEF_H
#define ZF_KERNEL_DEF_H

#include <stdbool.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/status.h"
#include "proto/node_def.pb-c.h"

typedef struct zf_kernel_def {
    const char *op;
    const char *device_type;
    const char *type_attr;        /* attr whose dtype is constrained, or NULL */
    uint64_t allowed_types;       /* bit (1 << dtype) per accepted dtype; 0 = any */
    uint32_t host_memory_inputs;  /* bit i: input i lives in host memory */
    uint32_t host_memory_outputs; /* bit i: output i lives in host memory */
} zf_kernel_def_t;

#define ZF_TYPE_BIT(t) ((uint64_t)1 << (t))

/* Dtype sets for allowed_types. */
#define ZF_TYPES_FLOAT (ZF_TYPE_BIT(ZF_FLOAT) | ZF_TYPE_BIT(ZF_DOUBLE))
#define ZF_TYPES_INDEX (ZF_TYPE_BIT(ZF_INT32) | ZF_TYPE_BIT(ZF_INT64))
#define ZF_TYPES_REAL  (ZF_TYPES_FLOAT | ZF_TYPES_INDEX)
/* Every integer type, and every type with an order (comparisons). */
#define ZF_TYPES_INTEGER                                                                           \
    (ZF_TYPE_BIT(ZF_INT8) | ZF_TYPE_BIT(ZF_INT16) | ZF_TYPE_BIT(ZF_INT32) |                        \
     ZF_TYPE_BIT(ZF_INT64) | ZF_TYPE_BIT(ZF_UINT8) | ZF_TYPE_BIT(ZF_UINT16) |                      \
     ZF_TYPE_BIT(ZF_UINT32) | ZF_TYPE_BIT(ZF_UINT64))
#define ZF_TYPES_ORDERED                                                                           \
    (ZF_TYPES_INTEGER | ZF_TYPES_FLOAT | ZF_TYPE_BIT(ZF_HALF) | ZF_TYPE_BIT(ZF_BFLOAT16))
/* Every fixed-size type: what kernels that only move bytes accept. */
#define ZF_TYPES_POD                                                                               \
    (ZF_TYPES_REAL | ZF_TYPE_BIT(ZF_BOOL) | ZF_TYPE_BIT(ZF_UINT8) | ZF_TYPE_BIT(ZF_INT8) |         \
     ZF_TYPE_BIT(ZF_INT16) | ZF_TYPE_BIT(ZF_UINT16) | ZF_TYPE_BIT(ZF_UINT32) |                     \
     ZF_TYPE_BIT(ZF_UINT64) | ZF_TYPE_BIT(ZF_HALF) | ZF_TYPE_BIT(ZF_BFLOAT16) |                    \
     ZF_TYPE_BIT(ZF_COMPLEX64) | ZF_TYPE_BIT(ZF_COMPLEX128))
/* TensorFlow's number types: what kernels that add elements accept. */
#define ZF_TYPES_NUMBER                                                                            \
    (ZF_TYPES_INTEGER | ZF_TYPES_FLOAT | ZF_TYPE_BIT(ZF_HALF) | ZF_TYPE_BIT(ZF_BFLOAT16) |         \
     ZF_TYPE_BIT(ZF_COMPLEX64) | ZF_TYPE_BIT(ZF_COMPLEX128))
/* The GPU kernels' floating types. */
#define ZF_TYPES_GPU_FLOAT (ZF_TYPE_BIT(ZF_HALF) | ZF_TYPE_BIT(ZF_FLOAT) | ZF_TYPE_BIT(ZF_DOUBLE))
/* Every fixed-size type except INT32, which lives in host memory on GPUs. */
#define ZF_TYPES_GPU_DEVICE                                                                        \
    (ZF_TYPES_GPU_FLOAT | ZF_TYPE_BIT(ZF_BFLOAT16) | ZF_TYPE_BIT(ZF_INT64) |                       \
     ZF_TYPE_BIT(ZF_BOOL) | ZF_TYPE_BIT(ZF_UINT8) | ZF_TYPE_BIT(ZF_INT8) | ZF_TYPE_BIT(ZF_INT16) | \
     ZF_TYPE_BIT(ZF_UINT16) | ZF_TYPE_BIT(ZF_UINT32) | ZF_TYPE_BIT(ZF_UINT64) |                    \
     ZF_TYPE_BIT(ZF_COMPLEX64) | ZF_TYPE_BIT(ZF_COMPLEX128))
/* What the GPU comparisons order (TensorFlow's GPU types for Less, ...). */
#define ZF_TYPES_GPU_ORDERED                                                                       \
    (ZF_TYPES_GPU_FLOAT | ZF_TYPE_BIT(ZF_INT8) | ZF_TYPE_BIT(ZF_INT16) | ZF_TYPE_BIT(ZF_INT64) |   \
     ZF_TYPE_BIT(ZF_UINT8))
/* Types whose tensors stay in host memory even on a GPU. */
#define ZF_TYPES_GPU_HOST (ZF_TYPE_BIT(ZF_INT32) | ZF_TYPE_BIT(ZF_STRING))

/* Every input or output in host memory. */
#define ZF_KERNEL_ALL_HOST 0xffffffffu

/* Registers def (kept by pointer: it must outlive the registry).
 * ALREADY_EXISTS for a second definition with the same op, device type and
 * overlapping types; INVALID_ARGUMENT without an op or device type;
 * NOT_FOUND for an op the op registry does not know. */
zf_status_t zf_kernel_def_register(const zf_kernel_def_t *def);

/* Registers the built-in definitions (kernel_defs.c). Idempotent and
 * thread-safe; a definition that fails is logged and skipped. */
void zf_kernel_defs_register_builtin(void);

/* The definition for node on device_type, honouring its type constraint;
 * *impl (may be NULL) receives what the runtime attached to it, or NULL.
 * NOT_FOUND: "No OpKernel was registered to support Op '<op>' used by node
 * <name> on <type> with these attrs: [...]; registered kernels: ...". */
zf_status_t zf_kernel_def_find(const char *device_type, const Tensorflow__NodeDef *node,
                               const zf_kernel_def_t **out, const void **impl);

/* The definition with exactly this op, device type and allowed_types, or
 * NULL: what an implementation is registered against. */
const zf_kernel_def_t *zf_kernel_def_lookup(const char *op, const char *device_type,
                                            uint64_t allowed_types);

/* Attaches the runtime's implementation to def (registered). ALREADY_EXISTS
 * when another one is attached; attaching the same one again is OK. */
zf_status_t zf_kernel_def_attach(const zf_kernel_def_t *def, const void *impl);

/* False only when definitions for the node's op exist on device_type and
 * none of them accepts the node's dtype (its type-constraint attr); true
 * when one does, or when none exists there (availability then rests on the
 * op registry alone). Cheap: no error text is built. */
bool zf_kernel_def_accepts_dtype(const char *device_type, const Tensorflow__NodeDef *node);

/* True if any definition exists for op on device_type (any dtype). */
bool zf_kernel_def_exists(const char *op, const char *device_type);

/* Calls fn for every definition, in registration order. */
void zf_kernel_def_foreach(void (*fn)(const zf_kernel_def_t *def, const void *impl, void *arg),
                           void *arg);

/* Internal: the built-in table (kernel_defs.c) and its length. */
const zf_kernel_def_t *zf__kernel_defs_builtin(int *n);

/* Forgets every definition and attachment (tests). Built-in definitions
 * can be registered again afterwards. */
void zf_kernel_def_registry_reset(void);

#endif
