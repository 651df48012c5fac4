/* TensorProto <-> zf_tensor_t conversion with TensorFlow's filling rules. */
#include "common/tensor_proto.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tensor_content is little-endian; zflow supports little-endian hosts only"
#endif

/* What a TensorProto describes, checked before anything is allocated. */
typedef struct {
    zf_dtype_t dtype;
    zf_shape_t shape;
    int64_t n;
    char desc[ZF_SHAPE_STRING_MAX + 16]; /* "float32 [2,3]" for messages */
} s_spec_t;

static zf_status_t s_read_spec(const Tensorflow__TensorProto *p, s_spec_t *spec)
{
    int dt = (int)p->dtype;
    if (zf_dtype_is_ref(dt) && zf_dtype_valid(dt - ZF_DTYPE_REF_OFFSET))
        return zf_invalid_argument("TensorProto has reference dtype %s; a tensor value needs %s",
                                   zf_dtype_enum_name(dt), zf_dtype_enum_name(dt - 100));
    if (dt == ZF_RESOURCE || dt == ZF_VARIANT)
        return zf_unimplemented("TensorProto of dtype %s: %s tensors are not supported",
                                zf_dtype_enum_name(dt), zf_dtype_name(dt));
    if (!zf_dtype_valid(dt)) return zf_invalid_argument("TensorProto has invalid dtype %d", dt);
    spec->dtype = (zf_dtype_t)dt;
    zf_status_t s = zf_shape_from_proto(p->tensor_shape, &spec->shape);
    if (!zf_ok(s)) return zf_status_prefix(s, "TensorProto of dtype %s", zf_dtype_name(dt));
    char sbuf[ZF_SHAPE_STRING_MAX];
    zf_shape_to_string(&spec->shape, sbuf, sizeof sbuf);
    snprintf(spec->desc, sizeof spec->desc, "%s %s", zf_dtype_name(dt), sbuf);
    if (!zf_shape_is_fully_defined(&spec->shape))
        return zf_invalid_argument("TensorProto %s: a tensor's shape must be fully defined",
                                   spec->desc);
    return zf_shape_num_elements(&spec->shape, &spec->n);
}

/* Copies TensorFlow's string-list encoding (n varint32 lengths, then the
 * bytes) into a new STRING tensor. */
static zf_status_t s_strings_from_content(const s_spec_t *spec, const ProtobufCBinaryData *content,
                                          zf_tensor_t **out)
{
    const uint8_t *p = content->data, *end = p + content->len;
    if ((uint64_t)spec->n > content->len)
        return zf_invalid_argument("tensor_content has %zu bytes, too few for %s", content->len,
                                   spec->desc);
    uint64_t total = 0;
    for (int64_t i = 0; i < spec->n; i++) {
        uint64_t len = 0;
        for (int shift = 0;; shift += 7) {
            if (p == end || shift > 28)
                return zf_invalid_argument("tensor_content of %s has a bad string length",
                                           spec->desc);
            uint8_t b = *p++;
            len |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
        }
        total += len;
    }
    if (total != (uint64_t)(end - p))
        return zf_invalid_argument("tensor_content of %s has %zu bytes of string data but its "
                                   "lengths add up to %" PRIu64,
                                   spec->desc, (size_t)(end - p), total);
    zf_tensor_t *t;
    ZF_TRY(zf_tensor_new(ZF_STRING, &spec->shape, &t));
    const uint8_t *lens = content->data, *bytes = p;
    for (int64_t i = 0; i < spec->n; i++) {
        size_t len = 0;
        for (int shift = 0;; shift += 7) {
            uint8_t b = *lens++;
            len |= (size_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
        }
        zf_status_t s = zf_tensor_set_string(t, i, bytes, len);
        if (!zf_ok(s)) {
            zf_tensor_unref(&t);
            return s;
        }
        bytes += len;
    }
    *out = t;
    return ZF_STATUS_OK;
}

static zf_status_t s_from_content(const s_spec_t *spec, const ProtobufCBinaryData *content,
                                  zf_tensor_t **out)
{
    if (spec->dtype == ZF_STRING) return s_strings_from_content(spec, content, out);
    size_t elem = zf_dtype_size(spec->dtype);
    if ((uint64_t)spec->n > SIZE_MAX / elem)
        return zf_invalid_argument("TensorProto %s is too large", spec->desc);
    size_t need = (size_t)spec->n * elem;
    if (content->len != need)
        return zf_invalid_argument("tensor_content has %zu bytes but %s needs %zu", content->len,
                                   spec->desc, need);
    ZF_TRY(zf_tensor_new_from_bytes(spec->dtype, &spec->shape, content->data, need, out));
    if (spec->dtype == ZF_BOOL) {
        uint8_t *b = zf_tensor_data(*out);
        for (size_t i = 0; i < need; i++) b[i] = b[i] != 0;
    }
    return ZF_STATUS_OK;
}

/* The *_val field a dtype reads from: its name and element count. */
static const char *s_val_field(const Tensorflow__TensorProto *p, zf_dtype_t dtype, size_t *count)
{
    switch (dtype) {
    case ZF_FLOAT: *count = p->n_float_val; return "float_val";
    case ZF_DOUBLE: *count = p->n_double_val; return "double_val";
    case ZF_INT32:
    case ZF_INT16:
    case ZF_INT8:
    case ZF_UINT8:
    case ZF_UINT16:
    case ZF_QINT8:
    case ZF_QUINT8:
    case ZF_QINT16:
    case ZF_QUINT16:
    case ZF_QINT32: *count = p->n_int_val; return "int_val";
    case ZF_INT64: *count = p->n_int64_val; return "int64_val";
    case ZF_BOOL: *count = p->n_bool_val; return "bool_val";
    case ZF_STRING: *count = p->n_string_val; return "string_val";
    case ZF_HALF:
    case ZF_BFLOAT16: *count = p->n_half_val; return "half_val";
    case ZF_COMPLEX64: *count = p->n_scomplex_val; return "scomplex_val";
    case ZF_COMPLEX128: *count = p->n_dcomplex_val; return "dcomplex_val";
    case ZF_UINT32: *count = p->n_uint32_val; return "uint32_val";
    case ZF_UINT64: *count = p->n_uint64_val; return "uint64_val";
    default: *count = 0; return "none";
    }
}

/* Stores value j of the dtype's field as element i of dst. */
static void s_store(const Tensorflow__TensorProto *p, zf_dtype_t dtype, void *dst, size_t i,
                    size_t j)
{
    switch (dtype) {
    case ZF_FLOAT: ((float *)dst)[i] = p->float_val[j]; break;
    case ZF_DOUBLE: ((double *)dst)[i] = p->double_val[j]; break;
    case ZF_INT32:
    case ZF_QINT32: ((int32_t *)dst)[i] = p->int_val[j]; break;
    case ZF_INT16:
    case ZF_QINT16: ((int16_t *)dst)[i] = (int16_t)p->int_val[j]; break;
    case ZF_UINT16:
    case ZF_QUINT16: ((uint16_t *)dst)[i] = (uint16_t)p->int_val[j]; break;
    case ZF_INT8:
    case ZF_QINT8: ((int8_t *)dst)[i] = (int8_t)p->int_val[j]; break;
    case ZF_UINT8:
    case ZF_QUINT8: ((uint8_t *)dst)[i] = (uint8_t)p->int_val[j]; break;
    case ZF_INT64: ((int64_t *)dst)[i] = p->int64_val[j]; break;
    case ZF_BOOL: ((uint8_t *)dst)[i] = p->bool_val[j] != 0; break;
    case ZF_HALF:
    case ZF_BFLOAT16: ((uint16_t *)dst)[i] = (uint16_t)p->half_val[j]; break;
    case ZF_COMPLEX64:
        ((float *)dst)[2 * i] = p->scomplex_val[2 * j];
        ((float *)dst)[2 * i + 1] = p->scomplex_val[2 * j + 1];
        break;
    case ZF_COMPLEX128:
        ((double *)dst)[2 * i] = p->dcomplex_val[2 * j];
        ((double *)dst)[2 * i + 1] = p->dcomplex_val[2 * j + 1];
        break;
    case ZF_UINT32: ((uint32_t *)dst)[i] = p->uint32_val[j]; break;
    case ZF_UINT64: ((uint64_t *)dst)[i] = p->uint64_val[j]; break;
    default: break;
    }
}

/* Repeats element [filled-1] over [filled, n) by doubling copies. */
static void s_fill_tail(uint8_t *data, size_t elem, size_t filled, size_t n)
{
    if (filled == 0 || filled >= n) return;
    memcpy(data + filled * elem, data + (filled - 1) * elem, elem);
    size_t done = filled + 1, block = 1;
    while (done < n) {
        size_t k = block < n - done ? block : n - done;
        memcpy(data + done * elem, data + filled * elem, k * elem);
        done += k;
        block = done - filled;
    }
}

static zf_status_t s_from_vals(const s_spec_t *spec, const Tensorflow__TensorProto *p,
                               zf_tensor_t **out)
{
    size_t count;
    const char *field = s_val_field(p, spec->dtype, &count);
    if (spec->dtype == ZF_COMPLEX64 || spec->dtype == ZF_COMPLEX128) {
        if (count % 2)
            return zf_invalid_argument("%s has %zu values, not (real, imag) pairs, for %s", field,
                                       count, spec->desc);
        count /= 2;
    }
    if ((uint64_t)count > (uint64_t)spec->n)
        return zf_invalid_argument("%s has %zu values but %s has only %" PRId64 " elements", field,
                                   count, spec->desc, spec->n);
    size_t n = (size_t)spec->n;
    if (count < n) { /* the remainder repeats the last value */
        uint64_t per = spec->dtype == ZF_STRING
                           ? sizeof(zf_tstring_t) + (count ? p->string_val[count - 1].len : 0)
                           : zf_dtype_size(spec->dtype);
        if ((uint64_t)(n - count) > ZF_TENSOR_PROTO_MAX_FILL_BYTES / per)
            return zf_invalid_argument(
                "%s has %zu values for %s: repeating the last to fill the other %zu elements "
                "would take more than %u MiB; send such a tensor as tensor_content",
                field, count, spec->desc, n - count, ZF_TENSOR_PROTO_MAX_FILL_BYTES >> 20);
    }
    zf_tensor_t *t;
    ZF_TRY(zf_tensor_new(spec->dtype, &spec->shape, &t));
    if (spec->dtype == ZF_STRING) {
        for (size_t i = 0; i < n && count > 0; i++) {
            const ProtobufCBinaryData *v = &p->string_val[i < count ? i : count - 1];
            zf_status_t s = zf_tensor_set_string(t, (int64_t)i, v->data, v->len);
            if (!zf_ok(s)) {
                zf_tensor_unref(&t);
                return s;
            }
        }
    } else {
        void *data = zf_tensor_data(t);
        for (size_t i = 0; i < count; i++) s_store(p, spec->dtype, data, i, i);
        s_fill_tail(data, zf_dtype_size(spec->dtype), count, n);
    }
    *out = t;
    return ZF_STATUS_OK;
}

zf_status_t zf_tensor_from_proto(const Tensorflow__TensorProto *proto, zf_tensor_t **out)
{
    s_spec_t spec;
    ZF_TRY(s_read_spec(proto, &spec));
    if (proto->tensor_content.len > 0) return s_from_content(&spec, &proto->tensor_content, out);
    return s_from_vals(&spec, proto, out);
}

/* ---- to proto ----------------------------------------------------------- */

/* Allocates a field array of n elements of size bytes, or NULL for n == 0. */
static bool s_alloc_field(void **field, size_t n, size_t size)
{
    *field = NULL;
    if (n == 0) return true;
    *field = malloc(n * size);
    return *field != NULL;
}

static bool s_strings_to_proto(const zf_tensor_t *t, Tensorflow__TensorProto *p)
{
    size_t n = (size_t)zf_tensor_num_elements(t);
    if (!s_alloc_field((void **)&p->string_val, n, sizeof *p->string_val)) return false;
    const zf_tstring_t *src = zf_tensor_data(t);
    for (size_t i = 0; i < n; i++) {
        ProtobufCBinaryData *v = &p->string_val[i];
        v->len = src[i].len;
        v->data = NULL;
        if (v->len) {
            v->data = malloc(v->len);
            if (!v->data) return false;
            memcpy(v->data, src[i].data, v->len);
        }
        p->n_string_val = i + 1;
    }
    return true;
}

#define S_COPY_FIELD(field, ctype, expr)                                                           \
    do {                                                                                           \
        if (!s_alloc_field((void **)&p->field, n, sizeof(ctype))) return false;                    \
        for (size_t i = 0; i < n; i++) p->field[i] = (expr);                                       \
        p->n_##field = n;                                                                          \
    } while (0)

/* Writes every element to the dtype's *_val field. */
static bool s_vals_to_proto(const zf_tensor_t *t, Tensorflow__TensorProto *p)
{
    size_t n = (size_t)zf_tensor_num_elements(t);
    const void *d = zf_tensor_data(t);
    switch (zf_tensor_dtype(t)) {
    case ZF_FLOAT: S_COPY_FIELD(float_val, float, ((const float *)d)[i]); break;
    case ZF_DOUBLE: S_COPY_FIELD(double_val, double, ((const double *)d)[i]); break;
    case ZF_INT32:
    case ZF_QINT32: S_COPY_FIELD(int_val, int32_t, ((const int32_t *)d)[i]); break;
    case ZF_INT16:
    case ZF_QINT16: S_COPY_FIELD(int_val, int32_t, ((const int16_t *)d)[i]); break;
    case ZF_UINT16:
    case ZF_QUINT16: S_COPY_FIELD(int_val, int32_t, ((const uint16_t *)d)[i]); break;
    case ZF_INT8:
    case ZF_QINT8: S_COPY_FIELD(int_val, int32_t, ((const int8_t *)d)[i]); break;
    case ZF_UINT8:
    case ZF_QUINT8: S_COPY_FIELD(int_val, int32_t, ((const uint8_t *)d)[i]); break;
    case ZF_INT64: S_COPY_FIELD(int64_val, int64_t, ((const int64_t *)d)[i]); break;
    case ZF_BOOL: S_COPY_FIELD(bool_val, protobuf_c_boolean, ((const uint8_t *)d)[i] != 0); break;
    case ZF_HALF:
    case ZF_BFLOAT16: S_COPY_FIELD(half_val, int32_t, ((const uint16_t *)d)[i]); break;
    case ZF_UINT32: S_COPY_FIELD(uint32_val, uint32_t, ((const uint32_t *)d)[i]); break;
    case ZF_UINT64: S_COPY_FIELD(uint64_val, uint64_t, ((const uint64_t *)d)[i]); break;
    case ZF_COMPLEX64:
        n *= 2;
        S_COPY_FIELD(scomplex_val, float, ((const float *)d)[i]);
        break;
    case ZF_COMPLEX128:
        n *= 2;
        S_COPY_FIELD(dcomplex_val, double, ((const double *)d)[i]);
        break;
    default: break;
    }
    return true;
}

static bool s_content_to_proto(const zf_tensor_t *t, Tensorflow__TensorProto *p)
{
    size_t len = zf_tensor_nbytes(t);
    if (len == 0) return true;
    p->tensor_content.data = malloc(len);
    if (!p->tensor_content.data) return false;
    memcpy(p->tensor_content.data, zf_tensor_data(t), len);
    p->tensor_content.len = len;
    return true;
}

zf_status_t zf_tensor_to_proto(const zf_tensor_t *t, Tensorflow__TensorProto **out,
                               bool use_tensor_content)
{
    if (zf_tensor_memory_kind(t) == ZF_MEMORY_DEVICE)
        return zf_status_new(ZF_FAILED_PRECONDITION,
                             "cannot build a TensorProto from a tensor in device memory");
    Tensorflow__TensorProto *p = malloc(sizeof *p);
    if (!p) return zf_out_of_memory("a TensorProto");
    tensorflow__tensor_proto__init(p);
    zf_dtype_t dtype = zf_tensor_dtype(t);
    p->dtype = (Tensorflow__DataType)dtype;
    zf_status_t s = zf_shape_to_proto(zf_tensor_shape(t), &p->tensor_shape);
    if (!zf_ok(s)) {
        protobuf_c_message_free_unpacked(&p->base, NULL);
        return s;
    }
    bool ok;
    if (dtype == ZF_STRING)
        ok = s_strings_to_proto(t, p);
    else if (use_tensor_content)
        ok = s_content_to_proto(t, p);
    else
        ok = s_vals_to_proto(t, p);
    if (!ok) {
        protobuf_c_message_free_unpacked(&p->base, NULL);
        return zf_out_of_memory("a TensorProto");
    }
    *out = p;
    return ZF_STATUS_OK;
}
