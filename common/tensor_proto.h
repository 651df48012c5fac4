/* TensorProto <-> zf_tensor_t, following TensorFlow's rules (shape
 * conversions are in common/tensor.h).
 *
 * Reading: tensor_content (little-endian, packed) wins when non-empty and
 * must hold exactly num_elements * element_size bytes (for STRING it is
 * TensorFlow's string-list encoding: all lengths as varints, then all
 * bytes). Otherwise the dtype's *_val field is used:
 *   float_val FLOAT; double_val DOUBLE; int_val INT32, INT16, INT8, UINT8,
 *   UINT16, QINT8, QUINT8, QINT16, QUINT16, QINT32 (values truncated to the
 *   width, as TensorFlow does); int64_val INT64; bool_val BOOL; string_val
 *   STRING; half_val HALF and BFLOAT16 (bit patterns in the low 16 bits);
 *   scomplex_val COMPLEX64 and dcomplex_val COMPLEX128 (real, imag pairs);
 *   uint32_val UINT32; uint64_val UINT64.
 * An empty field gives zeros; a field shorter than the tensor is padded
 * with its last value (so one value fills the whole tensor); a longer one is
 * INVALID_ARGUMENT. Fields belonging to other dtypes are ignored. */
#ifndef ZF_TENSOR_PROTO_H
#define ZF_TENSOR_PROTO_H

#include <stdbool.h>

#include "common/status.h"
#include "common/tensor.h"
#include "proto/tensor.pb-c.h"

/* Builds a new host tensor from proto (borrowed). Caller owns *out.
 * Errors: INVALID_ARGUMENT for an invalid or *_REF dtype, a shape that is
 * not fully defined, size mismatches and too many values (messages name the
 * dtype and shape); UNIMPLEMENTED for RESOURCE and VARIANT;
 * RESOURCE_EXHAUSTED past the allocation limit. Nothing is allocated for a
 * tensor whose size is absurd. A value list shorter than the shape repeats
 * its last value (no values: zeros); such a filled-in remainder may take at
 * most ZF_TENSOR_PROTO_MAX_FILL_BYTES (INVALID_ARGUMENT past it), so a few
 * bytes on the wire cannot ask for gigabytes; large tensors travel as
 * tensor_content. */
#define ZF_TENSOR_PROTO_MAX_FILL_BYTES (256u << 20)
zf_status_t zf_tensor_from_proto(const Tensorflow__TensorProto *proto, zf_tensor_t **out);

/* Builds a TensorProto holding t (borrowed; host memory only). With
 * use_tensor_content the bytes go to tensor_content (STRING tensors always
 * use string_val); otherwise every element is written to the dtype's *_val
 * field. Caller owns *out and frees it with
 * protobuf_c_message_free_unpacked(&(*out)->base, NULL).
 * Errors: FAILED_PRECONDITION for device memory, RESOURCE_EXHAUSTED. */
zf_status_t zf_tensor_to_proto(const zf_tensor_t *t, Tensorflow__TensorProto **out,
                               bool use_tensor_content);

#endif
