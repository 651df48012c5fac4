/* The plan for an element-wise op of up to three inputs under NumPy
 * broadcasting, shared by the CPU kernels and the CUDA launchers (plain C,
 * includable from .cu). */
#ifndef ZF_KERNELS_BROADCAST_H
#define ZF_KERNELS_BROADCAST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most dims a plan holds (ZF_MAX_RANK). */
#define ZF_BROADCAST_MAX_RANK 16

/* A broadcast collapsed to the fewest dims: out has dims[0..rank) (row
 * major); element strides sa/sb of the inputs along each dim, 0 where that
 * input is broadcast. rank 0 is a single element. */
typedef struct zf_broadcast {
    int rank;
    int64_t dims[ZF_BROADCAST_MAX_RANK];
    int64_t sa[ZF_BROADCAST_MAX_RANK];
    int64_t sb[ZF_BROADCAST_MAX_RANK];
} zf_broadcast_t;

/* The most inputs a plan holds (Select's condition, then and else). */
#define ZF_BROADCAST_MAX_INPUTS 3

/* The same for n inputs: element strides st[i] of input i along each dim. */
typedef struct zf_broadcast_n {
    int rank;
    int64_t dims[ZF_BROADCAST_MAX_RANK];
    int64_t st[ZF_BROADCAST_MAX_INPUTS][ZF_BROADCAST_MAX_RANK];
} zf_broadcast_n_t;

struct zf_shape;

/* The plan for out = op(ins[0], ..., ins[n - 1]) (1 <= n <=
 * ZF_BROADCAST_MAX_INPUTS), out being the inputs' broadcast shape
 * (zf_kernels_broadcast_shape): dims of 1 drop out, and neighbouring dims
 * merge when each input either spans both or is broadcast along both. */
void zf_broadcast_plan_n(const struct zf_shape *const *ins, int n, const struct zf_shape *out,
                         zf_broadcast_n_t *plan);

/* The two-input plan, out = op(a, b). */
void zf_broadcast_plan(const struct zf_shape *a, const struct zf_shape *b,
                       const struct zf_shape *out, zf_broadcast_t *plan);

#ifdef __cplusplus
}
#endif

#endif
