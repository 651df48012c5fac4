/* Index remapping for the CPU kernels that move elements without computing
 * on them (StridedSlice and its gradient, Slice, Tile, Pad, PadV2,
 * MirrorPad, ReverseV2, BroadcastTo): a plan gives, for each dim of a
 * dense index space, which index of a second tensor each position maps
 * to, or ZF_REMAP_FILL. Gathering walks the dense space and reads the
 * mapped elements (the fill value where any dim maps to ZF_REMAP_FILL);
 * scattering writes the dense elements to the mapped positions (the map
 * must then be injective and have no fill). Inner runs that map to
 * contiguous elements are copied with memcpy; rows split over the
 * context's pool. A device with its own gather (zf_device_ops_t's
 * remap_gather, a GPU's) gathers in its memory instead, so the same
 * kernels serve it: they plan on the host and the device moves the
 * elements. Split, SplitV, Unpack and Transpose hand such a device strided
 * gathers instead (zf_remap_strided_gather()).
 *
 * Also the helpers these kernels and the index kernels (Gather, ScatterNd,
 * ...) share: reading index-valued tensors of any shape (int32 or int64),
 * naming an element's position, adding elements of a number type.
 * Stateless and thread-safe. */
#ifndef ZF_KERNELS_REMAP_H
#define ZF_KERNELS_REMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"
#include "executor/kernels/kernel.h"

#define ZF_REMAP_FILL (-1)

typedef struct zf_remap {
    int rank;                  /* at least 1: a rank-0 space is [1] */
    int64_t dims[ZF_MAX_RANK]; /* the dense index space */
    int64_t *idx[ZF_MAX_RANK]; /* idx[k][0..dims[k]): index along dim k, or ZF_REMAP_FILL */
    int64_t *block;            /* owns the idx arrays */
} zf_remap_t;

/* A plan over the dense space of shape dims (which must hold at least one
 * element), every index 0. RESOURCE_EXHAUSTED when out of memory. Free
 * with zf_remap_free(). */
zf_status_t zf_remap_init(zf_remap_t *r, const zf_shape_t *dims);
void zf_remap_free(zf_remap_t *r);

/* dst (dense, r->dims) = src (of dims src_dims[0..r->rank)) at the mapped
 * positions; fill (one element, NULL for zeros) where a dim maps to
 * ZF_REMAP_FILL. Every other index must be within src_dims. src, dst and
 * fill are in the memory of ctx's device: on a device with its own gathers
 * (zf_remap_on_device()) its remap_gather runs, and its errors name the node; on the
 * host it cannot fail. elem is at most 16. r's maps may be changed. */
zf_status_t zf_remap_gather(const zf_kernel_ctx_t *ctx, zf_remap_t *r, const int64_t *src_dims,
                            const void *src, void *dst, size_t elem, const void *fill);

/* True when ctx's device has its own gathers (zf_device_ops_t's
 * remap_gather and strided_gather, a GPU's): the kernels then plan on the
 * host and the device moves the elements in its memory. */
bool zf_remap_on_device(const zf_kernel_ctx_t *ctx);

/* dst (dense over dims[0..rank)) = the elements of src at the sum over k
 * of i_k * strides[k], through the strided gather of ctx's device (only
 * when zf_remap_on_device()); its errors name the node. */
zf_status_t zf_remap_strided_gather(const zf_kernel_ctx_t *ctx, int rank, const int64_t *dims,
                                    const int64_t *strides, const void *src, void *dst,
                                    size_t elem);

/* dst (of dims dst_dims) at the mapped positions = src (dense, r->dims). */
void zf_remap_scatter(const zf_kernel_ctx_t *ctx, zf_remap_t *r, const int64_t *dst_dims,
                      const void *src, void *dst, size_t elem);

/* The product of dims[from..to), INT64_MAX when it overflows (the dims of
 * an empty tensor may: a size taken from it is then refused by the
 * allocator, never wrapped). */
int64_t zf_remap_prod(const int64_t *dims, int from, int to);

/* dst[0..n) += src[0..n) in dtype dt, one of ZF_TYPES_NUMBER
 * (integers wrap; half and bfloat16 add in float and round). */
void zf_remap_add(zf_dtype_t dt, void *dst, const void *src, int64_t n);

/* Element k of an INT32 or INT64 tensor, as int64. */
int64_t zf_remap_index_at(const zf_tensor_t *t, int64_t k);

/* "[1,2]": the multi-index of flat element k in shape s (empty for a
 * scalar) into buf (ZF_SHAPE_STRING_MAX bytes); returns buf. */
const char *zf_remap_index_str(const zf_shape_t *s, int64_t k, char *buf);

/* Reads input i, a shape given as an INT32 or INT64 vector of
 * non-negative dims, into *out; INVALID_ARGUMENT naming it as what. */
zf_status_t zf_remap_input_shape(const zf_kernel_ctx_t *ctx, int i, const char *what,
                                 zf_shape_t *out);

/* A create() state holding one int attr (def when the node lacks it), as
 * an int64_t the kernel frees with free(). */
zf_status_t zf_remap_int_attr_state(const Tensorflow__NodeDef *node, const char *key, int64_t def,
                                    void **state);

/* INVALID_ARGUMENT unless input i is INT32 or INT64, naming it as what. */
zf_status_t zf_remap_check_index_dtype(const zf_kernel_ctx_t *ctx, int i, const char *what);

#endif
