/* What kernels_state.c shares with other kernels on variables
 * (kernels_optimizers.c): finding the variable behind an input, and
 * TensorFlow's text for a resource variable that does not exist. Internal
 * to executor/kernels. */
#ifndef ZF_KERNELS_VARS_H
#define ZF_KERNELS_VARS_H

#include "common/status.h"
#include "executor/kernels/kernel.h"

/* The name of the variable whose ref input i is (from a VariableV2 node);
 * INVALID_ARGUMENT naming the node when it is none, FAILED_PRECONDITION
 * without a resource manager. */
zf_status_t zf__kernels_var_ref_name(const zf_kernel_ctx_t *ctx, int i, const char **name);

/* The name resource handle input i holds; errors as above. */
zf_status_t zf__kernels_var_handle_name(const zf_kernel_ctx_t *ctx, int i, const char **name);

/* FAILED_PRECONDITION "Could not find variable <name>. ..." as TensorFlow
 * says it for a resource variable never assigned. */
zf_status_t zf__kernels_var_not_found(const zf_kernel_ctx_t *ctx, const char *name);

#endif
