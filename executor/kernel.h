/* Kernels: the registry of (op, device type) -> implementation, and the
 * context a kernel computes in.
 *
 * A kernel definition names its op and device type, the dtypes it accepts
 * (through one type attr, e.g. "T"), which of its inputs and outputs live
 * in host memory on a non-CPU device, and its functions:
 *   create   (optional) reads the node's attrs once, when a partition is
 *            registered, into a private state;
 *   compute  runs synchronously for one step;
 *   compute_async (instead of compute) starts work and calls done later —
 *            used by _Recv;
 *   destroy  frees the state.
 * Registering a kernel also records, in the op registry, that the device
 * type has a kernel for the op — that is what the placer reads.
 *
 * Errors a kernel returns are INVALID_ARGUMENT (bad shapes or dtypes, naming
 * the node and both shapes), UNIMPLEMENTED or RESOURCE_EXHAUSTED; the
 * executor prefixes them with the device. */
#ifndef ZF_KERNEL_H
#define ZF_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/status.h"
#include "common/tensor.h"
#include "executor/device.h"
#include "proto/node_def.pb-c.h"

typedef struct zf_resource_mgr zf_resource_mgr_t; /* executor/resource.h */
typedef struct zf_rendezvous zf_rendezvous_t;     /* executor/rendezvous.h */

/* Everything a kernel sees for one run of one node. The executor fills it;
 * tests may build one by hand. Inputs are borrowed; the kernel stores one
 * owned reference per output in outputs[i] (zf_kernel_set_output()). */
typedef struct zf_kernel_ctx {
    const Tensorflow__NodeDef *node;
    void *state; /* from create(), or NULL */
    zf_device_t *device;
    zf_tensor_t *const *inputs; /* num_inputs borrowed tensors */
    int num_inputs;
    zf_tensor_t **outputs; /* num_outputs slots, NULL on entry */
    int num_outputs;
    zf_resource_mgr_t *resources; /* per-session resources (variables) */
    zf_rendezvous_t *rendezvous;  /* the step's rendezvous (Send/Recv) */
    int64_t step_id;
    bool *is_dead_outputs; /* optional, num_outputs: dead-tensor flags */
    bool input_is_dead;    /* some input is dead (control flow) */
} zf_kernel_ctx_t;

typedef void (*zf_kernel_done_fn)(zf_kernel_ctx_t *ctx, zf_status_t status, void *arg);

enum {
    ZF_KERNEL_EXPENSIVE = 1u << 0, /* run on the device's pool, not inline */
    ZF_KERNEL_ASYNC = 1u << 1,     /* uses compute_async */
    /* Its output's size comes from its input values, not their sizes (Fill):
     * small inputs say nothing of its cost, so it never runs on an event loop. */
    ZF_KERNEL_SIZED_BY_VALUE = 1u << 2,
};

typedef struct zf_kernel_def {
    const char *op;
    const char *device_type;
    const char *type_attr;        /* attr whose dtype is constrained, or NULL */
    uint64_t allowed_types;       /* bit (1 << dtype) per accepted dtype; 0 = any */
    uint32_t host_memory_inputs;  /* bit i: input i lives in host memory */
    uint32_t host_memory_outputs; /* bit i: output i lives in host memory */
    unsigned flags;
    zf_status_t (*create)(const Tensorflow__NodeDef *node, void **state);
    void (*destroy)(void *state);
    zf_status_t (*compute)(zf_kernel_ctx_t *ctx);
    void (*compute_async)(zf_kernel_ctx_t *ctx, zf_kernel_done_fn done, void *arg);
} zf_kernel_def_t;

#define ZF_TYPE_BIT(t) ((uint64_t)1 << (t))

/* Registers def (copied by pointer: it must be static). ALREADY_EXISTS for
 * a second kernel with the same op, device type and overlapping types.
 * Start-up only. */
zf_status_t zf_kernel_register(const zf_kernel_def_t *def);

/* Registers every built-in kernel (CPU, plus GPU when built with CUDA and
 * a GPU is visible or compile-only registration is asked for by
 * with_gpu). Idempotent and thread-safe. */
void zf_kernels_register_builtin(bool with_gpu);

/* The kernel for node on device_type, honouring its type constraint.
 * NOT_FOUND: "No OpKernel was registered to support Op '<op>' used by node
 * <name> with these attrs ... on <type>" style message. */
zf_status_t zf_kernel_find(const char *device_type, const Tensorflow__NodeDef *node,
                           const zf_kernel_def_t **out);

/* False only when kernels for the node's op are registered on device_type
 * and none of them accepts the node's dtype (its type-constraint attr); true
 * when one does, or when none is registered there (availability then rests
 * on the op registry alone). Cheap: no error text is built. The placer uses
 * it so a node never lands on a device type whose kernels reject its dtype. */
bool zf_kernel_accepts_dtype(const char *device_type, const Tensorflow__NodeDef *node);

/* True if any kernel exists for op on device_type (any dtype). */
bool zf_kernel_exists(const char *op, const char *device_type);

/* Forgets every registration (tests). */
void zf_kernel_registry_reset(void);

/* ---- helpers for kernel implementations -------------------------------- */

/* Allocates output i on the context's device and stores it; *out is
 * borrowed (owned by ctx->outputs[i]). */
zf_status_t zf_kernel_alloc_output(zf_kernel_ctx_t *ctx, int i, zf_dtype_t dtype,
                                   const zf_shape_t *shape, zf_tensor_t **out);

/* Stores an owned reference to t as output i (takes a new reference). */
void zf_kernel_set_output(zf_kernel_ctx_t *ctx, int i, zf_tensor_t *t);

/* An INVALID_ARGUMENT (or given code) error prefixed with
 * "<node name> (<op>): ". */
zf_status_t zf_kernel_error(const zf_kernel_ctx_t *ctx, zf_code_t code, const char *fmt, ...)
    ZF_PRINTF(3, 4);

#endif
