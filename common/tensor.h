/* Tensors: shapes (a small value type), reference-counted byte buffers that
 * any owner (malloc, a zmq message, a CUDA allocation) can back through a
 * free callback, and reference-counted typed tensors that view a buffer.
 *
 * Design notes
 * - zf_shape_t is passed by pointer and copied freely; rank -1 means the
 *   rank is unknown and a dim of -1 means that dim is unknown ("partially
 *   known", as in a placeholder's shape attr). A tensor's shape is always
 *   fully known and non-negative.
 * - A zf_buffer_t owns bytes and calls its free callback exactly once, when
 *   its last reference goes. A zf_tensor_t holds one reference on its
 *   buffer, so tensors may share a buffer (reshape, zero-copy receive).
 * - STRING tensors store one zf_tstring_t per element; each element owns a
 *   separate heap copy of its bytes, freed with the buffer.
 * - Reference counts are atomic: ref/unref are thread-safe. The contents of
 *   a tensor are not synchronised; writers must own it exclusively.
 * - Host allocations are zero-filled and 64-byte aligned, and are refused
 *   (RESOURCE_EXHAUSTED) above a process-wide limit so that an absurd shape
 *   from the wire fails cleanly instead of exhausting memory. */
#ifndef ZF_TENSOR_H
#define ZF_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "common/status.h"
#include "proto/tensor_shape.pb-c.h"

/* ---- shapes ------------------------------------------------------------- */

#define ZF_MAX_RANK 16

/* Enough for any shape string, NUL included: "[" + 16 dims of up to 20
 * characters + 15 commas + "]". */
#define ZF_SHAPE_STRING_MAX 352

typedef struct zf_shape {
    int rank;                  /* 0..ZF_MAX_RANK, or -1 when unknown */
    int64_t dims[ZF_MAX_RANK]; /* dims[0..rank-1]; -1 when unknown; rest 0 */
} zf_shape_t;

/* Builds a shape from rank dims (dims may be NULL when rank is 0). Rank must
 * be -1 (unknown; dims ignored) or 0..ZF_MAX_RANK and every dim >= -1;
 * otherwise INVALID_ARGUMENT and *out is left unchanged. */
zf_status_t zf_shape_make(int rank, const int64_t *dims, zf_shape_t *out);

/* The same for shapes written in code: asserts that the arguments are valid
 * (a programmer error otherwise). Use ZF_SHAPE(2, 3) for literals. */
zf_shape_t zf_shape_of(int rank, const int64_t *dims);
#define ZF_SHAPE(...)                                                                              \
    zf_shape_of((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                   \
                (const int64_t[]){__VA_ARGS__})

/* The scalar shape (rank 0) and the unknown-rank shape. */
zf_shape_t zf_shape_scalar(void);
zf_shape_t zf_shape_unknown(void);

/* True when the rank and every dim are known (none is -1). */
bool zf_shape_is_fully_defined(const zf_shape_t *s);

/* The product of the dims (1 for a scalar, 0 if any dim is 0).
 * INVALID_ARGUMENT if the shape is not fully defined or the product does
 * not fit in int64. */
zf_status_t zf_shape_num_elements(const zf_shape_t *s, int64_t *out);

/* Same rank and dims (unknown rank equals unknown rank; -1 equals -1). */
bool zf_shape_equal(const zf_shape_t *a, const zf_shape_t *b);

/* Writes "[2,3]", "[]" for a scalar, "[?,3]" for unknown dims, "<unknown>"
 * for unknown rank into buf (always NUL-terminated when cap > 0). Returns
 * buf, so it can be used inline with a ZF_SHAPE_STRING_MAX buffer. */
char *zf_shape_to_string(const zf_shape_t *s, char *buf, size_t cap);

/* TensorShapeProto <-> zf_shape_t. A NULL proto is the scalar shape (a
 * TensorProto with no tensor_shape is a scalar). unknown_rank gives rank -1.
 * Errors: INVALID_ARGUMENT for rank > ZF_MAX_RANK or a dim below -1. */
zf_status_t zf_shape_from_proto(const Tensorflow__TensorShapeProto *proto, zf_shape_t *out);

/* Caller owns *out: free it with protobuf_c_message_free_unpacked(&(*out)->base,
 * NULL). Errors: RESOURCE_EXHAUSTED on allocation failure. */
zf_status_t zf_shape_to_proto(const zf_shape_t *s, Tensorflow__TensorShapeProto **out);

/* ---- buffers ------------------------------------------------------------ */

#define ZF_BUFFER_ALIGN 64

typedef enum zf_memory_kind {
    ZF_MEMORY_HOST = 0,        /* pageable host memory */
    ZF_MEMORY_HOST_PINNED = 1, /* page-locked host memory (CUDA staging) */
    ZF_MEMORY_DEVICE = 2,      /* accelerator memory; the bytes are not host-addressable */
} zf_memory_kind_t;

typedef void (*zf_free_fn)(void *data, void *hint);

typedef struct zf_buffer zf_buffer_t;

/* A new zero-filled host buffer of size bytes (0 allowed), aligned to
 * ZF_BUFFER_ALIGN. Caller owns the one reference in *out.
 * Errors: RESOURCE_EXHAUSTED when size exceeds zf_buffer_alloc_limit() or
 * the allocation fails. */
zf_status_t zf_buffer_new(size_t size, zf_buffer_t **out);

/* As zf_buffer_new, with bytes left as they are (see host_memory.h): for
 * code that writes all of them before anyone reads them. */
zf_status_t zf_buffer_new_uninit(size_t size, zf_buffer_t **out);

/* Adopts size bytes at data: when the last reference goes, free_fn(data,
 * hint) runs exactly once (free_fn may be NULL for memory that outlives the
 * buffer). If this returns an error, free_fn never runs and the caller still
 * owns data. data may be NULL only when size is 0. */
zf_status_t zf_buffer_wrap(void *data, size_t size, zf_free_fn free_fn, void *hint,
                           zf_buffer_t **out);

/* As zf_buffer_wrap, tagging the memory kind and device ordinal (ignored
 * for host kinds) so kernels and transfers know where the bytes live. */
zf_status_t zf_buffer_wrap_memory(void *data, size_t size, zf_memory_kind_t kind, int device_id,
                                  zf_free_fn free_fn, void *hint, zf_buffer_t **out);

/* Takes another reference; returns buf. Thread-safe. */
zf_buffer_t *zf_buffer_ref(zf_buffer_t *buf);

/* Drops the caller's reference and sets *buf_p to NULL; the last reference
 * frees the bytes. Safe on NULL and on *buf_p == NULL. Thread-safe. */
void zf_buffer_unref(zf_buffer_t **buf_p);

void *zf_buffer_data(const zf_buffer_t *buf);
size_t zf_buffer_size(const zf_buffer_t *buf);
zf_memory_kind_t zf_buffer_memory_kind(const zf_buffer_t *buf);
int zf_buffer_device_id(const zf_buffer_t *buf);
/* The current count; for tests and debugging only (racy by nature). */
int zf_buffer_refcount(const zf_buffer_t *buf);

/* A write counter: code that changes a buffer's bytes in place after others
 * may have read them (variable updates) advances it, so that something
 * derived from the bytes and keyed on the buffer (a kernel's reordered
 * weights) can tell it is stale. Starts at 0; thread-safe. */
uint64_t zf_buffer_version(const zf_buffer_t *buf);
void zf_buffer_bump_version(zf_buffer_t *buf);

/* The process-wide limit on one host allocation by zf_buffer_new and the
 * tensor constructors. The default is the physical memory size (at most
 * 1 TiB); set 0 to restore it. Thread-safe. */
size_t zf_buffer_alloc_limit(void);
void zf_buffer_set_alloc_limit(size_t bytes);

/* ---- tensors ------------------------------------------------------------ */

/* One STRING element: len bytes at data (not necessarily text; a NUL is
 * always stored after them). data is NULL when len is 0. */
typedef struct zf_tstring {
    size_t len;
    char *data;
} zf_tstring_t;

typedef struct zf_tensor zf_tensor_t;

/* A new host tensor with zero-filled storage (empty strings for STRING).
 * shape must be fully defined. Caller owns the reference in *out.
 * Errors: INVALID_ARGUMENT for an invalid or *_REF dtype, a partial shape or
 * a size that overflows; UNIMPLEMENTED for RESOURCE and VARIANT;
 * RESOURCE_EXHAUSTED past the allocation limit or when out of memory. */
zf_status_t zf_tensor_new(zf_dtype_t dtype, const zf_shape_t *shape, zf_tensor_t **out);

/* As zf_tensor_new, with the elements left uninitialised (STRING tensors
 * still hold empty strings): for a producer that writes every element
 * before the tensor is read. */
zf_status_t zf_tensor_new_uninit(zf_dtype_t dtype, const zf_shape_t *shape, zf_tensor_t **out);

/* A new tensor holding a copy of len bytes (fixed-size dtypes only; len must
 * be exactly the tensor's size). Errors as zf_tensor_new, and
 * INVALID_ARGUMENT for a size mismatch or STRING. */
zf_status_t zf_tensor_new_from_bytes(zf_dtype_t dtype, const zf_shape_t *shape, const void *bytes,
                                     size_t len, zf_tensor_t **out);

/* A tensor viewing buf's bytes from offset; takes its own reference on buf
 * (the caller keeps its own). The bytes must cover the shape and, in host
 * memory, be aligned for the element type. A STRING tensor can only view the
 * buffer of another STRING tensor. Errors: INVALID_ARGUMENT. */
zf_status_t zf_tensor_from_buffer(zf_dtype_t dtype, const zf_shape_t *shape, zf_buffer_t *buf,
                                  size_t offset, zf_tensor_t **out);

/* Views of one buffer made together: up to n tensors in one allocation,
 * for a reader that makes many at once (a received batch of small
 * tensors). Each view is a tensor like any other; the block goes when the
 * maker has released it and every view made in it is gone, and holds one
 * reference to the buffer of its first view for every view of that
 * buffer. */
typedef struct zf_tensor_views zf_tensor_views_t;

/* A block for up to n views (n >= 1). Errors: RESOURCE_EXHAUSTED. */
zf_status_t zf_tensor_views_new(size_t n, zf_tensor_views_t **out);

/* As zf_tensor_from_buffer, the tensor made in v; RESOURCE_EXHAUSTED once
 * v holds n views (nothing is made then). */
zf_status_t zf_tensor_views_add(zf_tensor_views_t *v, zf_dtype_t dtype, const zf_shape_t *shape,
                                zf_buffer_t *buf, size_t offset, zf_tensor_t **out);

/* Another view of like's buffer with like's dtype and shape (checked when
 * like was made), at offset: only the bounds and the alignment are
 * checked. Errors: INVALID_ARGUMENT, RESOURCE_EXHAUSTED as above. */
zf_status_t zf_tensor_views_add_like(zf_tensor_views_t *v, const zf_tensor_t *like, size_t offset,
                                     zf_tensor_t **out);

/* Drops the maker's hold on *v and sets it to NULL. NULL-safe. */
void zf_tensor_views_release(zf_tensor_views_t **v);

/* A tensor sharing t's buffer with another shape of the same element count.
 * Errors: INVALID_ARGUMENT. */
zf_status_t zf_tensor_reshape(const zf_tensor_t *t, const zf_shape_t *shape, zf_tensor_t **out);

/* A deep copy into new host memory (strings copied too). t must be in host
 * memory (FAILED_PRECONDITION otherwise). */
zf_status_t zf_tensor_copy(const zf_tensor_t *t, zf_tensor_t **out);

/* Scalars (rank 0). value points at one element of dtype (fixed-size types). */
zf_status_t zf_tensor_new_scalar(zf_dtype_t dtype, const void *value, zf_tensor_t **out);
zf_status_t zf_tensor_new_scalar_float(float v, zf_tensor_t **out);
zf_status_t zf_tensor_new_scalar_double(double v, zf_tensor_t **out);
zf_status_t zf_tensor_new_scalar_int32(int32_t v, zf_tensor_t **out);
zf_status_t zf_tensor_new_scalar_int64(int64_t v, zf_tensor_t **out);
zf_status_t zf_tensor_new_scalar_bool(bool v, zf_tensor_t **out);
zf_status_t zf_tensor_new_scalar_string(const void *bytes, size_t len, zf_tensor_t **out);

/* Takes another reference; returns t. Thread-safe. */
zf_tensor_t *zf_tensor_ref(zf_tensor_t *t);

/* Drops the caller's reference and sets *t_p to NULL; the last one releases
 * the buffer reference. Safe on NULL and on *t_p == NULL. Thread-safe. */
void zf_tensor_unref(zf_tensor_t **t_p);

/* Borrowed views, valid while the caller holds a reference. For STRING the
 * data is an array of zf_tstring_t. In device memory the pointer is a device
 * address. */
void *zf_tensor_data(const zf_tensor_t *t);
size_t zf_tensor_nbytes(const zf_tensor_t *t); /* STRING: elements * sizeof(zf_tstring_t) */
int64_t zf_tensor_num_elements(const zf_tensor_t *t);
zf_dtype_t zf_tensor_dtype(const zf_tensor_t *t);
const zf_shape_t *zf_tensor_shape(const zf_tensor_t *t);
zf_buffer_t *zf_tensor_buffer(const zf_tensor_t *t);
size_t zf_tensor_offset(const zf_tensor_t *t);
zf_memory_kind_t zf_tensor_memory_kind(const zf_tensor_t *t);
int zf_tensor_refcount(const zf_tensor_t *t); /* tests and debugging only */

/* Same dtype, shape and contents: bitwise for fixed-size types (so NaNs with
 * the same bits are equal and 0.0 != -0.0), bytewise per element for STRING.
 * Tensors not in host memory are never equal. */
bool zf_tensor_equal(const zf_tensor_t *a, const zf_tensor_t *b);

/* Replaces element i of a host STRING tensor with a copy of len bytes.
 * Errors: INVALID_ARGUMENT for a non-STRING tensor, OUT_OF_RANGE for i,
 * RESOURCE_EXHAUSTED when out of memory (the old value is then kept). */
zf_status_t zf_tensor_set_string(zf_tensor_t *t, int64_t i, const void *bytes, size_t len);

/* Element i of a STRING tensor (borrowed); NULL if t is not STRING or i is
 * out of range. */
const zf_tstring_t *zf_tensor_string(const zf_tensor_t *t, int64_t i);

/* ---- 16-bit floats ------------------------------------------------------ */

/* IEEE binary16: round to nearest, ties to even; overflow gives infinity,
 * NaN stays NaN (quiet). */
uint16_t zf_float_to_half(float f);
float zf_half_to_float(uint16_t h);

/* bfloat16 (the top half of a float32): rounding to nearest even, or plain
 * truncation (what TensorFlow's bfloat16 Send/Recv cast does). NaN stays
 * NaN in both. */
uint16_t zf_float_to_bfloat16(float f);
uint16_t zf_float_to_bfloat16_truncate(float f);
float zf_bfloat16_to_float(uint16_t b);

#endif
