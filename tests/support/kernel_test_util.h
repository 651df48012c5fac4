/* Kernel test helpers (for tests/unit/test_kernels_*.c): build
 * NodeDefs with attrs and tensors from literals, run one kernel through the
 * registry (find, create, compute, destroy), and check results.
 *
 * Include after <cmocka.h>. Helpers fail the test on setup errors; kt_run()
 * returns the kernel's own status so tests can check errors. */
#ifndef ZF_KERNEL_TEST_UTIL_H
#define ZF_KERNEL_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tensor.h"
#include "common/tensor_proto.h"
#include "executor/devices/device.h"
#include "executor/kernels/kernel.h"
#include "executor/kernels/resource.h"
#include "proto/node_def.pb-c.h"
#include "test_util.h"

/* ---- NodeDefs -------------------------------------------------------------- */

/* A node named name running op, with inputs named "in0", "in1", ... (only
 * their count matters to kernels). Free with kt_node_free(). */
Tensorflow__NodeDef *kt_node_new(const char *name, const char *op, int num_inputs);

void kt_node_free(Tensorflow__NodeDef **node_p);

/* Appends an attr entry and returns its (empty) value to fill in. */
Tensorflow__AttrValue *kt_attr_add(Tensorflow__NodeDef *n, const char *key);

void kt_attr_type(Tensorflow__NodeDef *n, const char *key, zf_dtype_t t);

void kt_attr_int(Tensorflow__NodeDef *n, const char *key, int64_t i);

void kt_attr_bool(Tensorflow__NodeDef *n, const char *key, bool b);

void kt_attr_string(Tensorflow__NodeDef *n, const char *key, const char *s);

void kt_attr_list_int(Tensorflow__NodeDef *n, const char *key, const int64_t *vals, size_t count);
#define KT_ATTR_INTS(n, key, ...)                                                                  \
    kt_attr_list_int((n), (key), (const int64_t[]){__VA_ARGS__},                                   \
                     sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

void kt_attr_shape(Tensorflow__NodeDef *n, const char *key, const zf_shape_t *s);

void kt_attr_tensor(Tensorflow__NodeDef *n, const char *key, const zf_tensor_t *t);

/* ---- tensors ------------------------------------------------------------------ */

/* A tensor of dtype and shape holding count elements copied from vals
 * (count must match the shape). */
zf_tensor_t *kt_tensor(zf_dtype_t dtype, zf_shape_t shape, const void *vals, size_t count);

#define KT_COUNT(T, ...) (sizeof((const T[]){__VA_ARGS__}) / sizeof(T))
#define KT_F32(shape, ...)                                                                         \
    kt_tensor(ZF_FLOAT, (shape), (const float[]){__VA_ARGS__}, KT_COUNT(float, __VA_ARGS__))
#define KT_F64(shape, ...)                                                                         \
    kt_tensor(ZF_DOUBLE, (shape), (const double[]){__VA_ARGS__}, KT_COUNT(double, __VA_ARGS__))
#define KT_I32(shape, ...)                                                                         \
    kt_tensor(ZF_INT32, (shape), (const int32_t[]){__VA_ARGS__}, KT_COUNT(int32_t, __VA_ARGS__))
#define KT_I64(shape, ...)                                                                         \
    kt_tensor(ZF_INT64, (shape), (const int64_t[]){__VA_ARGS__}, KT_COUNT(int64_t, __VA_ARGS__))
#define KT_BOOL(shape, ...)                                                                        \
    kt_tensor(ZF_BOOL, (shape), (const bool[]){__VA_ARGS__}, KT_COUNT(bool, __VA_ARGS__))

/* A STRING tensor of shape holding copies of the NUL-terminated vals (one
 * per element). */
zf_tensor_t *kt_strings(zf_shape_t shape, const char *const *vals);

/* An empty tensor (some dim 0) or one filled from a generator. */
zf_tensor_t *kt_zeros(zf_dtype_t dtype, zf_shape_t shape);

/* Deterministic pseudo-random floats in [-1, 1). */
zf_tensor_t *kt_random_f32(zf_shape_t shape, uint32_t seed);

/* The same values as kt_random_f32() in a FLOAT or DOUBLE tensor. */
zf_tensor_t *kt_random_float(zf_dtype_t dtype, zf_shape_t shape, uint32_t seed);

void kt_unref_all(zf_tensor_t **ts, int n);

/* ---- running a kernel ---------------------------------------------------------- */

/* Runs node's CPU kernel once on inputs: find, create, compute, destroy.
 * outputs[0..num_outputs) start NULL and receive owned references (left
 * NULL on error). resources and device may be NULL. */
zf_status_t kt_run_on(const Tensorflow__NodeDef *node, zf_tensor_t *const *inputs, int num_inputs,
                      zf_tensor_t **outputs, int num_outputs, zf_resource_mgr_t *resources,
                      zf_device_t *device);

zf_status_t kt_run(const Tensorflow__NodeDef *node, zf_tensor_t *const *inputs, int num_inputs,
                   zf_tensor_t **outputs, int num_outputs);

/* ---- checks ---------------------------------------------------------------------- */

void kt_expect_shape(const zf_tensor_t *t, zf_shape_t want);

/* Elements within tol (relative for large values) of want, as doubles. */
void kt_expect_near(const zf_tensor_t *t, zf_shape_t shape, const double *want, double tol);
#define KT_EXPECT_NEAR(t, shape, tol, ...)                                                         \
    kt_expect_near((t), (shape), (const double[]){__VA_ARGS__}, (tol))

/* Exact integer values (INT32, INT64 or BOOL tensors). */
void kt_expect_ints(const zf_tensor_t *t, zf_shape_t shape, const int64_t *want);
#define KT_EXPECT_INTS(t, shape, ...) kt_expect_ints((t), (shape), (const int64_t[]){__VA_ARGS__})

/* What an asynchronous kernel's done callback reported (kt_on_done). */
typedef struct {
    bool fired;
    zf_status_t status;
} kt_done_t;

void kt_on_done(zf_kernel_ctx_t *ctx, zf_status_t status, void *arg);

#endif
