/* GPU test helpers (for tests/unit/test_gpu*.c): skipping a
 * test, with the reason printed, when no GPU is visible; the exit code
 * that tells CTest a program skipped everything (77, the tests'
 * SKIP_RETURN_CODE); and running one GPU kernel on host tensors.
 *
 * Include after <cmocka.h>. */
#ifndef ZF_GPU_TEST_UTIL_H
#define ZF_GPU_TEST_UTIL_H

#include <stdio.h>

#include "executor/devices/gpu.h"
#include "kernel_test_util.h"

#define GT_SKIP_EXIT_CODE 77

/* A pointer to a shape literal, for the APIs that take const zf_shape_t *. */
#define GT_SHAPE(...) (&(zf_shape_t[1]){ZF_SHAPE(__VA_ARGS__)}[0])

/* Tests skipped because no GPU is visible. */
extern int gt_skipped;

/* The first GPU as a device, or the test is skipped (cmocka's skip(),
 * which leaves the test at once) after printing why. */
zf_device_t *gt_gpu_or_skip(void);

/* main's return value: 77 when every one of total tests was skipped for
 * want of a GPU, else the number of failures. */
int gt_exit_code(int failed, int total);

/* Runs node's GPU kernel on dev once (create, compute, destroy) with host
 * tensors in and out: see gt_input() and gt_output(). outputs start NULL
 * and receive owned references (NULL on error). */
zf_status_t gt_run(zf_device_t *dev, const Tensorflow__NodeDef *node, zf_tensor_t *const *inputs,
                   int num_inputs, zf_tensor_t **outputs, int num_outputs);

#endif
