/* Helpers the CPU kernels share (kernels_*.c): dtype sets for kernel
 * definitions, reading index-valued inputs, NumPy broadcasting, axis
 * normalisation, the element-wise unary loop driver and parallel loops over
 * the device's pool; and the per-file registration entry points that
 * kernels_builtin.c calls.
 *
 * How the CPU kernels are organised
 * - Each kernels_<family>.c holds a static table of zf_kernel_t and one
 *   zf__kernels_register_<family>() that registers it; kernels_builtin.c
 *   lists the families. Adding a kernel is a def in its family's table.
 * - create() parses attrs once into a small immutable state; compute() may
 *   then run concurrently for several steps. Kernels check their inputs'
 *   dtypes and shapes and answer bad ones with INVALID_ARGUMENT naming the
 *   node (zf_kernel_error), never with an assert.
 * - Loops are generated per dtype by macros so they vectorise; integer
 *   arithmetic goes through the unsigned type so overflow wraps (as in
 *   TensorFlow) instead of being undefined.
 * - Large loops split over ctx->device->pool (zf_kernels_parallel_for) and
 *   run inline without a device; GEMMs are left to OpenBLAS's own threads,
 *   oneDNN primitives to OpenMP teams sized from the pool (kernels_dnnl.c).
 *
 * Everything here is stateless and thread-safe. */
#ifndef ZF_KERNELS_UTIL_H
#define ZF_KERNELS_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/status.h"
#include "common/tensor.h"
#include "executor/kernels/kernel.h"

/* A CPU kernel (its definition constrains attr "T"). */
#define ZF_CPU_KERNEL(op_, types_, compute_)                                                       \
    {                                                                                              \
        .op = (op_), .device_type = "CPU", .allowed_types = (types_), .compute = (compute_)        \
    }

/* ---- per-file registration (kernels_builtin.c calls these once) -------- */

zf_status_t zf__kernels_register_defs(const zf_kernel_t *defs, int n);
zf_status_t zf__kernels_register_basic(void);
zf_status_t zf__kernels_register_cwise(void);
zf_status_t zf__kernels_register_matmul(void);
zf_status_t zf__kernels_register_nn(void);
zf_status_t zf__kernels_register_conv(void);
zf_status_t zf__kernels_register_shape(void);
zf_status_t zf__kernels_register_cast(void);
zf_status_t zf__kernels_register_reduce(void);
zf_status_t zf__kernels_register_state(void);
zf_status_t zf__kernels_register_compare(void);
zf_status_t zf__kernels_register_control(void);
zf_status_t zf__kernels_register_activation(void);
zf_status_t zf__kernels_register_loss(void);
zf_status_t zf__kernels_register_random(void);
zf_status_t zf__kernels_register_slice(void);
zf_status_t zf__kernels_register_pad(void);
zf_status_t zf__kernels_register_gather(void);
zf_status_t zf__kernels_register_order(void);
zf_status_t zf__kernels_register_batchnorm(void);
zf_status_t zf__kernels_register_batch_matmul(void);
zf_status_t zf__kernels_register_optimizers(void);
zf_status_t zf__kernels_register_checkpoint(void);
zf_status_t zf__kernels_register_train_extra(void);
zf_status_t zf__kernels_register_einsum(void);
zf_status_t zf__kernels_register_resize(void);

/* AddN's inputs (at least one, checked by the caller) all have input 0's
 * dtype and shape; INVALID_ARGUMENT with TensorFlow's text otherwise
 * (kernels_cwise.c, shared with the GPU kernel). */
zf_status_t zf__kernels_addn_check(const zf_kernel_ctx_t *ctx);

/* BiasAdd's and BiasAddGrad's state (kernels_nn.c): the data_format attr,
 * NHWC (the default) or NCHW, anything else INVALID_ARGUMENT. Destroy with
 * free(). */
typedef struct {
    bool nchw;
} zf__kernels_bias_state_t;
zf_status_t zf__kernels_bias_create(const Tensorflow__NodeDef *node, void **state);

/* BiasAddGrad's channel dim of input 0 (rank 2 or more, else
 * INVALID_ARGUMENT) under the layout of its state
 * (kernels_train_extra.c, shared with the GPU kernel). */
zf_status_t zf__kernels_bias_grad_channel_dim(const zf_kernel_ctx_t *ctx, int *channel_dim);

/* ---- dtypes and attrs --------------------------------------------------- */

/* TensorFlow's short dtype names as its error messages print them:
 * "float", "double", "int32", "int64", "bool", "string", ... */
const char *zf_kernels_dtype_name(int dtype);

/* Reads the type attr key of node (REF types give their base type) and
 * checks it against allowed (a ZF_TYPES_* set; 0 = any). INVALID_ARGUMENT
 * naming node and attr when missing, UNIMPLEMENTED when not allowed. */
zf_status_t zf_kernels_attr_dtype(const Tensorflow__NodeDef *node, const char *key,
                                  uint64_t allowed, zf_dtype_t *out);

/* Reads a "padding" attr: SAME or VALID (anything else UNIMPLEMENTED or
 * INVALID_ARGUMENT), stored as *same. */
zf_status_t zf_kernels_attr_padding(const Tensorflow__NodeDef *node, bool *same);

/* INVALID_ARGUMENT unless the node has at least n data inputs (a malformed
 * graph must not make a kernel read past its inputs):
 * "<node> (<op>): expects 2 inputs, got 1". */
zf_status_t zf_kernels_check_inputs(const zf_kernel_ctx_t *ctx, int n);

/* INVALID_ARGUMENT unless input i has dtype want:
 * "<node> (<op>): input 1 must be float, got int32". */
zf_status_t zf_kernels_check_dtype(const zf_kernel_ctx_t *ctx, int i, zf_dtype_t want);

/* Reads input i — an INT32 or INT64 scalar or vector — as int64 values into
 * vals[0..*n). what names the input in errors ("shape", "axis"); more than
 * max values, another dtype or a rank above 1 is INVALID_ARGUMENT. */
zf_status_t zf_kernels_input_ints(const zf_kernel_ctx_t *ctx, int i, const char *what,
                                  int64_t *vals, int max, int *n);

/* The same for a scalar (or one-element vector) input. */
zf_status_t zf_kernels_input_int(const zf_kernel_ctx_t *ctx, int i, const char *what, int64_t *val);

/* ---- shapes -------------------------------------------------------------- */

/* NumPy broadcasting of two fully defined shapes: dims are aligned from the
 * right and must be equal or 1. False when they are incompatible. */
bool zf_kernels_broadcast_shape(const zf_shape_t *a, const zf_shape_t *b, zf_shape_t *out);

/* The output shape of a binary op with NumPy broadcasting; INVALID_ARGUMENT
 * "both inputs must have the same dtype, got float and double" or
 * "Incompatible shapes: [2,3] vs. [4]". With allow_incompatible (Equal and
 * NotEqual whose incompatible_shape_error is false) shapes that do not
 * broadcast are no error: *incompatible is set and *out is a scalar. */
zf_status_t zf_kernels_binary_shape(const zf_kernel_ctx_t *ctx, bool allow_incompatible,
                                    zf_shape_t *out, bool *incompatible);

/* Select (broadcast false) and SelectV2 (true): checks the inputs
 * (condition, then, else) as TensorFlow does, with its messages, and gives
 * the shape the condition broadcasts as (Select's vector condition becomes
 * [n, 1, ..., 1]) and the output's. */
zf_status_t zf_kernels_select_shapes(const zf_kernel_ctx_t *ctx, bool broadcast, zf_shape_t *cond,
                                     zf_shape_t *out);

/* Maps axis in [-rank, rank) to [0, rank); false when out of range. */
bool zf_kernels_axis(int64_t axis, int rank, int *out);

/* ArgMax's and ArgMin's axis, input 1 (in range, and not empty in input
 * 0), their output shape (input 0's without the axis), and the products
 * of input 0's dims before and after the axis. The CPU and GPU kernels
 * share it (kernels_reduce.c). */
zf_status_t zf_kernels_arg_axis(const zf_kernel_ctx_t *ctx, int *axis, zf_shape_t *shape,
                                int64_t *outer, int64_t *inner);

/* "[2,3]" into buf (ZF_SHAPE_STRING_MAX bytes); returns buf. */
const char *zf_kernels_shape_str(const zf_tensor_t *t, char *buf);

/* ---- loops --------------------------------------------------------------- */

/* Runs fn over [0, n) in chunks of at least min_chunk on the context's
 * device pool (inline when the context has no device). Blocks until done. */
void zf_kernels_parallel_for(const zf_kernel_ctx_t *ctx, int64_t n, int64_t min_chunk,
                             void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

/* out[0..n) = f(in[0..n)) for one dtype. */
typedef void (*zf_kernels_unary_fn)(const void *in, void *out, int64_t n);

/* Allocates output 0 with input 0's dtype and shape and fills it with fn,
 * in parallel chunks for large tensors. */
zf_status_t zf_kernels_run_unary(zf_kernel_ctx_t *ctx, zf_kernels_unary_fn fn);

/* Elements below which a loop is not worth splitting over the pool. */
#define ZF_KERNELS_PARALLEL_MIN 32768

#endif
