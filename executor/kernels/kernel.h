/* Kernels: the registry of (op, device type) -> implementation, and the
 * context a kernel computes in.
 *
 * A kernel implements one definition of common/kernel_def.h (op, device
 * type, accepted dtypes, host-memory arguments) with its functions:
 *   create   (optional) reads the node's attrs once, when a partition is
 *            registered, into a private state;
 *   compute  runs synchronously for one step;
 *   compute_async (instead of compute) starts work and calls done later —
 *            used by _Recv;
 *   destroy  frees the state.
 * The placer and the partitioner read the definitions alone (through the op
 * registry, zf_op_has_kernel(), which registering a definition fills in),
 * never this registry: a process without kernels places and partitions.
 *
 * Errors a kernel returns are INVALID_ARGUMENT (bad shapes or dtypes, naming
 * the node and both shapes), UNIMPLEMENTED or RESOURCE_EXHAUSTED; the
 * engine prefixes them with the device. */
#ifndef ZF_KERNEL_H
#define ZF_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/kernel_def.h"
#include "common/status.h"
#include "common/tensor.h"
#include "executor/devices/device.h"
#include "proto/node_def.pb-c.h"

typedef struct zf_resource_mgr zf_resource_mgr_t; /* executor/kernels/resource.h */
typedef struct zf_rendezvous zf_rendezvous_t;     /* executor/rendezvous/rendezvous.h */

/* Everything a kernel sees for one run of one node. The engine fills it;
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
    /* The while-loop frame instance (zf_rendezvous_frame_id(); 0: the root)
     * and iteration the node runs in: _Send and _Recv put them in their keys. */
    uint64_t frame_id;
    int64_t iter_id;
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

/* A kernel: the implementation of one kernel definition
 * (common/kernel_def.h), which it names by op, device type and
 * allowed_types (equal to the definition's). The definition holds what
 * placement needs (type attr, host-memory arguments); the kernel, how it
 * runs. */
typedef struct zf_kernel {
    const char *op;
    const char *device_type;
    uint64_t allowed_types; /* its definition's */
    unsigned flags;
    zf_status_t (*create)(const Tensorflow__NodeDef *node, void **state);
    void (*destroy)(void *state);
    zf_status_t (*compute)(zf_kernel_ctx_t *ctx);
    void (*compute_async)(zf_kernel_ctx_t *ctx, zf_kernel_done_fn done, void *arg);
} zf_kernel_t;

/* Registers k (kept by pointer: it must be static) as the implementation
 * of its definition. NOT_FOUND when no definition has its op, device type
 * and allowed types; ALREADY_EXISTS when another kernel implements it;
 * INVALID_ARGUMENT without a compute function. Start-up only. */
zf_status_t zf_kernel_register(const zf_kernel_t *k);

/* Registers a definition and its kernel in one go: for kernels outside the
 * built-in table (tests, extensions). def must outlive the registry. */
zf_status_t zf_kernel_register_with_def(const zf_kernel_def_t *def, const zf_kernel_t *k);

/* Registers the built-in definitions and every built-in kernel (CPU, plus
 * GPU when built with CUDA and a GPU is visible or compile-only
 * registration is asked for by with_gpu). Idempotent and thread-safe. */
void zf_kernels_register_builtin(bool with_gpu);

/* The first failure registering the built-in kernels so far (a copy), or
 * OK: a kernel without a definition, or two for one definition. */
zf_status_t zf_kernels_builtin_status(void);

/* The kernel for node on device_type, honouring its definition's type
 * constraint. NOT_FOUND: "No OpKernel was registered to support Op '<op>'
 * used by node <name> with these attrs ... on <type>" style message, also
 * when a definition exists but this build implements none. */
zf_status_t zf_kernel_find(const char *device_type, const Tensorflow__NodeDef *node,
                           const zf_kernel_t **out);

/* True if this build implements op on device_type (for some dtype). */
bool zf_kernel_exists(const char *op, const char *device_type);

/* ---- helpers for kernel implementations -------------------------------- */

/* Allocates output i on the context's device and stores it; *out is
 * borrowed (owned by ctx->outputs[i]). */
zf_status_t zf_kernel_alloc_output(zf_kernel_ctx_t *ctx, int i, zf_dtype_t dtype,
                                   const zf_shape_t *shape, zf_tensor_t **out);

/* As zf_kernel_alloc_output, with the elements undefined: only for a
 * kernel that writes every element of the output on every path that
 * returns OK. Saves a zero-fill pass over the output (on CPU). */
zf_status_t zf_kernel_alloc_output_uninit(zf_kernel_ctx_t *ctx, int i, zf_dtype_t dtype,
                                          const zf_shape_t *shape, zf_tensor_t **out);

/* Stores an owned reference to t as output i (takes a new reference). */
void zf_kernel_set_output(zf_kernel_ctx_t *ctx, int i, zf_tensor_t *t);

/* An INVALID_ARGUMENT (or given code) error prefixed with
 * "<node name> (<op>): ". */
zf_status_t zf_kernel_error(const zf_kernel_ctx_t *ctx, zf_code_t code, const char *fmt, ...)
    ZF_PRINTF(3, 4);

#endif
