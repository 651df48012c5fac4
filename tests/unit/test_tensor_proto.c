/* Tests for common/tensor_proto: TensorProto <-> tensor with TensorFlow's rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/tensor_proto.h"
#include "test_util.h"

/* A TensorProto with a shape, all on the stack. */
typedef struct {
    Tensorflow__TensorProto p;
    Tensorflow__TensorShapeProto shape;
    Tensorflow__TensorShapeProto__Dim dims[ZF_MAX_RANK + 1];
    Tensorflow__TensorShapeProto__Dim *ptrs[ZF_MAX_RANK + 1];
} s_proto_t;

static void s_proto_init(s_proto_t *s, zf_dtype_t dtype, int rank, const int64_t *dims)
{
    tensorflow__tensor_proto__init(&s->p);
    tensorflow__tensor_shape_proto__init(&s->shape);
    for (int i = 0; i < rank; i++) {
        tensorflow__tensor_shape_proto__dim__init(&s->dims[i]);
        s->dims[i].size = dims[i];
        s->ptrs[i] = &s->dims[i];
    }
    s->shape.n_dim = (size_t)rank;
    s->shape.dim = s->ptrs;
    s->p.tensor_shape = &s->shape;
    s->p.dtype = (Tensorflow__DataType)dtype;
}

#define PROTO(var, dtype, ...)                                                                     \
    s_proto_t var;                                                                                 \
    s_proto_init(&var, dtype, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),           \
                 (int64_t[]){__VA_ARGS__})

static zf_tensor_t *s_convert(const s_proto_t *s)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_proto(&s->p, &t));
    return t;
}

/* ---- *_val fields ------------------------------------------------------- */

static void test_tensor_proto_reads_float_val(void **state)
{
    (void)state;
    float v[6] = {1, 2, 3, 4, 5, 6.5f};
    PROTO(s, ZF_FLOAT, 2, 3);
    s.p.float_val = v;
    s.p.n_float_val = 6;
    zf_tensor_t *t = s_convert(&s);
    zf_shape_t want = ZF_SHAPE(2, 3);
    assert_true(zf_shape_equal(zf_tensor_shape(t), &want));
    assert_int_equal(zf_tensor_dtype(t), ZF_FLOAT);
    assert_memory_equal(zf_tensor_data(t), v, sizeof v);
    zf_tensor_unref(&t);
}

static void test_tensor_proto_reads_every_val_field_for_its_dtype(void **state)
{
    (void)state;
    double dv[2] = {1.5, -2.25};
    int32_t iv[2] = {-7, 300};
    int64_t lv[2] = {-5000000000LL, 9};
    protobuf_c_boolean bv[2] = {1, 0};
    uint32_t uv[2] = {4000000000u, 1};
    uint64_t qv[2] = {18000000000000000000ull, 2};
    zf_tensor_t *t;

    PROTO(d, ZF_DOUBLE, 2);
    d.p.double_val = dv;
    d.p.n_double_val = 2;
    t = s_convert(&d);
    assert_memory_equal(zf_tensor_data(t), dv, sizeof dv);
    zf_tensor_unref(&t);

    const zf_dtype_t int_types[] = {ZF_INT32, ZF_QINT32};
    for (size_t k = 0; k < 2; k++) {
        PROTO(s, int_types[k], 2);
        s.p.int_val = iv;
        s.p.n_int_val = 2;
        t = s_convert(&s);
        assert_memory_equal(zf_tensor_data(t), iv, sizeof iv);
        zf_tensor_unref(&t);
    }
    PROTO(i16, ZF_INT16, 2);
    i16.p.int_val = iv;
    i16.p.n_int_val = 2;
    t = s_convert(&i16);
    assert_int_equal(((int16_t *)zf_tensor_data(t))[0], -7);
    assert_int_equal(((int16_t *)zf_tensor_data(t))[1], 300);
    zf_tensor_unref(&t);
    const zf_dtype_t byte_types[] = {ZF_UINT8, ZF_QUINT8};
    for (size_t k = 0; k < 2; k++) {
        PROTO(s, byte_types[k], 2);
        s.p.int_val = iv;
        s.p.n_int_val = 2;
        t = s_convert(&s);
        assert_int_equal(((uint8_t *)zf_tensor_data(t))[0], 249); /* truncated like TensorFlow */
        assert_int_equal(((uint8_t *)zf_tensor_data(t))[1], 44);
        zf_tensor_unref(&t);
    }
    const zf_dtype_t sbyte_types[] = {ZF_INT8, ZF_QINT8};
    for (size_t k = 0; k < 2; k++) {
        PROTO(s, sbyte_types[k], 2);
        s.p.int_val = iv;
        s.p.n_int_val = 2;
        t = s_convert(&s);
        assert_int_equal(((int8_t *)zf_tensor_data(t))[0], -7);
        assert_int_equal(((int8_t *)zf_tensor_data(t))[1], 44);
        zf_tensor_unref(&t);
    }
    const zf_dtype_t u16_types[] = {ZF_UINT16, ZF_QUINT16, ZF_QINT16};
    for (size_t k = 0; k < 3; k++) {
        PROTO(s, u16_types[k], 2);
        s.p.int_val = iv;
        s.p.n_int_val = 2;
        t = s_convert(&s);
        assert_int_equal(((uint16_t *)zf_tensor_data(t))[0], 65529);
        assert_int_equal(((uint16_t *)zf_tensor_data(t))[1], 300);
        zf_tensor_unref(&t);
    }
    PROTO(l, ZF_INT64, 2);
    l.p.int64_val = lv;
    l.p.n_int64_val = 2;
    t = s_convert(&l);
    assert_memory_equal(zf_tensor_data(t), lv, sizeof lv);
    zf_tensor_unref(&t);

    PROTO(b, ZF_BOOL, 2);
    b.p.bool_val = bv;
    b.p.n_bool_val = 2;
    t = s_convert(&b);
    assert_memory_equal(zf_tensor_data(t), "\1\0", 2);
    zf_tensor_unref(&t);

    PROTO(u, ZF_UINT32, 2);
    u.p.uint32_val = uv;
    u.p.n_uint32_val = 2;
    t = s_convert(&u);
    assert_memory_equal(zf_tensor_data(t), uv, sizeof uv);
    zf_tensor_unref(&t);

    PROTO(q, ZF_UINT64, 2);
    q.p.uint64_val = qv;
    q.p.n_uint64_val = 2;
    t = s_convert(&q);
    assert_memory_equal(zf_tensor_data(t), qv, sizeof qv);
    zf_tensor_unref(&t);
}

static void test_tensor_proto_reads_half_and_bfloat16_bits_from_half_val(void **state)
{
    (void)state;
    int32_t hv[2] = {0x3c00, 0xc000};
    PROTO(h, ZF_HALF, 2);
    h.p.half_val = hv;
    h.p.n_half_val = 2;
    zf_tensor_t *t = s_convert(&h);
    const uint16_t *bits = zf_tensor_data(t);
    assert_int_equal(bits[0], 0x3c00);
    assert_true(zf_half_to_float(bits[0]) == 1.0f);
    assert_true(zf_half_to_float(bits[1]) == -2.0f);
    zf_tensor_unref(&t);

    int32_t bf[1] = {0x3f80};
    PROTO(b, ZF_BFLOAT16, 3);
    b.p.half_val = bf;
    b.p.n_half_val = 1;
    t = s_convert(&b);
    bits = zf_tensor_data(t);
    for (int i = 0; i < 3; i++) assert_true(zf_bfloat16_to_float(bits[i]) == 1.0f);
    zf_tensor_unref(&t);
}

static void test_tensor_proto_reads_complex_pairs(void **state)
{
    (void)state;
    float sv[4] = {1, 2, 3, 4};
    PROTO(c, ZF_COMPLEX64, 2);
    c.p.scomplex_val = sv;
    c.p.n_scomplex_val = 4;
    zf_tensor_t *t = s_convert(&c);
    assert_memory_equal(zf_tensor_data(t), sv, sizeof sv);
    zf_tensor_unref(&t);

    double dv[2] = {0.5, -1.5};
    PROTO(z, ZF_COMPLEX128, 3);
    z.p.dcomplex_val = dv;
    z.p.n_dcomplex_val = 2;
    t = s_convert(&z);
    const double *d = zf_tensor_data(t);
    for (int i = 0; i < 3; i++) {
        assert_true(d[2 * i] == 0.5);
        assert_true(d[2 * i + 1] == -1.5);
    }
    zf_tensor_unref(&t);

    c.p.n_scomplex_val = 3;
    zf_test_expect_error(zf_tensor_from_proto(&c.p, &t), ZF_INVALID_ARGUMENT,
                         "scomplex_val has 3 values, not (real, imag) pairs, for complex64 [2]");
}

static void test_tensor_proto_fills_shape_from_single_value(void **state)
{
    (void)state;
    float v = 7.5f;
    PROTO(s, ZF_FLOAT, 2, 3);
    s.p.float_val = &v;
    s.p.n_float_val = 1;
    zf_tensor_t *t = s_convert(&s);
    const float *f = zf_tensor_data(t);
    for (int i = 0; i < 6; i++) assert_true(f[i] == 7.5f);
    zf_tensor_unref(&t);
}

static void test_tensor_proto_fills_remainder_with_last_value(void **state)
{
    (void)state;
    int64_t v[3] = {1, 2, 3};
    PROTO(s, ZF_INT64, 7);
    s.p.int64_val = v;
    s.p.n_int64_val = 3;
    zf_tensor_t *t = s_convert(&s);
    const int64_t want[7] = {1, 2, 3, 3, 3, 3, 3};
    assert_memory_equal(zf_tensor_data(t), want, sizeof want);
    zf_tensor_unref(&t);
}

static void test_tensor_proto_without_values_is_zeros(void **state)
{
    (void)state;
    PROTO(s, ZF_DOUBLE, 4);
    zf_tensor_t *t = s_convert(&s);
    const double *d = zf_tensor_data(t);
    for (int i = 0; i < 4; i++) assert_true(d[i] == 0.0);
    zf_tensor_unref(&t);
    PROTO(e, ZF_FLOAT, 0, 5);
    float v = 1;
    e.p.float_val = &v;
    e.p.n_float_val = 0;
    t = s_convert(&e);
    assert_int_equal(zf_tensor_num_elements(t), 0);
    zf_tensor_unref(&t);
}

/* A few bytes must not ask for gigabytes: a remainder filled from a short
 * list is capped, for numbers and for repeated strings. */
static void test_tensor_proto_caps_what_a_short_value_list_fills(void **state)
{
    (void)state;
    float v = 1;
    PROTO(s, ZF_FLOAT, 268435456); /* 1 GiB from one value */
    s.p.float_val = &v;
    s.p.n_float_val = 1;
    zf_tensor_t *t = NULL;
    zf_test_expect_error(zf_tensor_from_proto(&s.p, &t), ZF_INVALID_ARGUMENT,
                         "float_val has 1 values for float32 [268435456]: repeating the last to "
                         "fill the other 268435455 elements would take more than 256 MiB");
    assert_null(t);
    PROTO(z, ZF_DOUBLE, 1 << 26); /* no values: 512 MiB of zeros */
    zf_test_expect_error(zf_tensor_from_proto(&z.p, &t), ZF_INVALID_ARGUMENT,
                         "send such a tensor as tensor_content");
    static uint8_t big[1 << 20];
    ProtobufCBinaryData sv = {sizeof big, big};
    PROTO(str, ZF_STRING, 400); /* 400 copies of 1 MiB */
    str.p.string_val = &sv;
    str.p.n_string_val = 1;
    zf_test_expect_error(zf_tensor_from_proto(&str.p, &t), ZF_INVALID_ARGUMENT,
                         "string_val has 1 values");
    assert_null(t);
    PROTO(ok, ZF_FLOAT, 1 << 20); /* 4 MiB of one value is fine */
    ok.p.float_val = &v;
    ok.p.n_float_val = 1;
    t = s_convert(&ok);
    assert_true(((const float *)zf_tensor_data(t))[(1 << 20) - 1] == 1.0f);
    zf_tensor_unref(&t);
}

static void test_tensor_proto_rejects_more_values_than_elements(void **state)
{
    (void)state;
    float v[7] = {0};
    PROTO(s, ZF_FLOAT, 2, 3);
    s.p.float_val = v;
    s.p.n_float_val = 7;
    zf_tensor_t *t = NULL;
    zf_test_expect_error(zf_tensor_from_proto(&s.p, &t), ZF_INVALID_ARGUMENT,
                         "float_val has 7 values but float32 [2,3] has only 6 elements");
    assert_null(t);
}

static void test_tensor_proto_without_shape_is_a_scalar(void **state)
{
    (void)state;
    Tensorflow__TensorProto p = TENSORFLOW__TENSOR_PROTO__INIT;
    int32_t v = 42;
    p.dtype = TENSORFLOW__DATA_TYPE__DT_INT32;
    p.int_val = &v;
    p.n_int_val = 1;
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_proto(&p, &t));
    assert_int_equal(zf_tensor_shape(t)->rank, 0);
    assert_int_equal(*(int32_t *)zf_tensor_data(t), 42);
    zf_tensor_unref(&t);
}

/* ---- strings ------------------------------------------------------------ */

static void test_tensor_proto_reads_string_val_and_fills(void **state)
{
    (void)state;
    ProtobufCBinaryData sv[2] = {{3, (uint8_t *)"abc"}, {2, (uint8_t *)"\0z"}};
    PROTO(s, ZF_STRING, 3);
    s.p.string_val = sv;
    s.p.n_string_val = 2;
    zf_tensor_t *t = s_convert(&s);
    assert_int_equal(zf_tensor_string(t, 0)->len, 3);
    assert_memory_equal(zf_tensor_string(t, 0)->data, "abc", 3);
    assert_memory_equal(zf_tensor_string(t, 1)->data, "\0z", 2);
    assert_memory_equal(zf_tensor_string(t, 2)->data, "\0z", 2);
    zf_tensor_unref(&t);
}

static void test_tensor_proto_reads_string_list_tensor_content(void **state)
{
    (void)state;
    uint8_t content[] = {2, 0, 3, 'h', 'i', 'x', 'y', 'z'};
    PROTO(s, ZF_STRING, 3);
    s.p.tensor_content.data = content;
    s.p.tensor_content.len = sizeof content;
    zf_tensor_t *t = s_convert(&s);
    assert_memory_equal(zf_tensor_string(t, 0)->data, "hi", 2);
    assert_int_equal(zf_tensor_string(t, 1)->len, 0);
    assert_memory_equal(zf_tensor_string(t, 2)->data, "xyz", 3);
    zf_tensor_unref(&t);
    s.p.tensor_content.len = sizeof content - 1;
    zf_test_expect_error(zf_tensor_from_proto(&s.p, &t), ZF_INVALID_ARGUMENT,
                         "string [3] has 4 bytes of string data but its lengths add up to 5");
    uint8_t bad_varint[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0, 0};
    s.p.tensor_content.data = bad_varint;
    s.p.tensor_content.len = sizeof bad_varint;
    zf_test_expect_error(zf_tensor_from_proto(&s.p, &t), ZF_INVALID_ARGUMENT, "bad string length");
}

/* ---- tensor_content ----------------------------------------------------- */

static void test_tensor_proto_reads_tensor_content_for_every_fixed_dtype(void **state)
{
    (void)state;
    uint8_t bytes[64];
    for (int i = 0; i < 64; i++) bytes[i] = (uint8_t)(i * 7 + 1);
    for (int dt = 1; dt <= ZF_DTYPE_MAX; dt++) {
        size_t size = zf_dtype_size((zf_dtype_t)dt);
        if (size == 0 || dt == ZF_BOOL) continue;
        PROTO(s, (zf_dtype_t)dt, 2, 2);
        s.p.tensor_content.data = bytes;
        s.p.tensor_content.len = 4 * size;
        zf_tensor_t *t = s_convert(&s);
        assert_int_equal(zf_tensor_dtype(t), dt);
        assert_memory_equal(zf_tensor_data(t), bytes, 4 * size);
        zf_tensor_unref(&t);
    }
    uint8_t flags[3] = {0, 2, 1};
    PROTO(b, ZF_BOOL, 3);
    b.p.tensor_content.data = flags;
    b.p.tensor_content.len = 3;
    zf_tensor_t *t = s_convert(&b);
    assert_memory_equal(zf_tensor_data(t), "\0\1\1", 3);
    zf_tensor_unref(&t);
}

static void test_tensor_proto_tensor_content_wins_over_val_fields(void **state)
{
    (void)state;
    float content[2] = {3, 4}, vals[2] = {1, 2};
    PROTO(s, ZF_FLOAT, 2);
    s.p.float_val = vals;
    s.p.n_float_val = 2;
    s.p.tensor_content.data = (uint8_t *)content;
    s.p.tensor_content.len = sizeof content;
    zf_tensor_t *t = s_convert(&s);
    assert_memory_equal(zf_tensor_data(t), content, sizeof content);
    zf_tensor_unref(&t);
}

static void test_tensor_proto_content_size_mismatch_names_dtype_and_shape(void **state)
{
    (void)state;
    uint8_t bytes[12] = {0};
    PROTO(s, ZF_FLOAT, 2, 3);
    s.p.tensor_content.data = bytes;
    s.p.tensor_content.len = 12;
    zf_tensor_t *t = NULL;
    zf_test_expect_error(zf_tensor_from_proto(&s.p, &t), ZF_INVALID_ARGUMENT,
                         "tensor_content has 12 bytes but float32 [2,3] needs 24");
    assert_null(t);
}

/* ---- bad protos --------------------------------------------------------- */

static void test_tensor_proto_rejects_resource_variant_and_bad_dtypes(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    PROTO(r, ZF_RESOURCE, 1);
    zf_test_expect_error(zf_tensor_from_proto(&r.p, &t), ZF_UNIMPLEMENTED,
                         "DT_RESOURCE: resource tensors are not supported");
    PROTO(v, ZF_VARIANT, 1);
    zf_test_expect_error(zf_tensor_from_proto(&v.p, &t), ZF_UNIMPLEMENTED, "variant");
    PROTO(i, ZF_INVALID, 1);
    zf_test_expect_error(zf_tensor_from_proto(&i.p, &t), ZF_INVALID_ARGUMENT, "invalid dtype 0");
    PROTO(f, (zf_dtype_t)999, 1);
    zf_test_expect_error(zf_tensor_from_proto(&f.p, &t), ZF_INVALID_ARGUMENT, "invalid dtype 999");
    PROTO(ref, (zf_dtype_t)101, 1);
    zf_test_expect_error(zf_tensor_from_proto(&ref.p, &t), ZF_INVALID_ARGUMENT, "DT_FLOAT_REF");
    assert_null(t);
}

static void test_tensor_proto_rejects_partial_shapes(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    PROTO(s, ZF_FLOAT, 2, -1);
    zf_test_expect_error(zf_tensor_from_proto(&s.p, &t), ZF_INVALID_ARGUMENT,
                         "float32 [2,?]: a tensor's shape must be fully defined");
    s.shape.unknown_rank = 1;
    zf_test_expect_error(zf_tensor_from_proto(&s.p, &t), ZF_INVALID_ARGUMENT, "<unknown>");
    s.shape.unknown_rank = 0;
    s.dims[1].size = -7;
    zf_test_expect_error(zf_tensor_from_proto(&s.p, &t), ZF_INVALID_ARGUMENT, "-7");
}

static void test_tensor_proto_absurd_shapes_fail_before_allocating(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    float v = 1;
    PROTO(s, ZF_FLOAT, (int64_t)1 << 40);
    s.p.float_val = &v;
    s.p.n_float_val = 1;
    /* a short value list is refused before the allocation limit is asked */
    zf_test_expect_error(zf_tensor_from_proto(&s.p, &t), ZF_INVALID_ARGUMENT,
                         "float32 [1099511627776]: repeating the last");
    uint8_t bytes[4] = {0};
    s.p.tensor_content.data = bytes;
    s.p.tensor_content.len = 4;
    zf_test_expect_error(
        zf_tensor_from_proto(&s.p, &t), ZF_INVALID_ARGUMENT,
        "tensor_content has 4 bytes but float32 [1099511627776] needs 4398046511104");
    PROTO(o, ZF_DOUBLE, (int64_t)1 << 40, (int64_t)1 << 40);
    zf_test_expect_error(zf_tensor_from_proto(&o.p, &t), ZF_INVALID_ARGUMENT, "2^63-1");
    PROTO(str, ZF_STRING, (int64_t)1 << 40);
    str.p.tensor_content.data = bytes;
    str.p.tensor_content.len = 4;
    zf_test_expect_error(zf_tensor_from_proto(&str.p, &t), ZF_INVALID_ARGUMENT, "too few");
    assert_null(t);
}

/* ---- to proto and round trips ------------------------------------------- */

static zf_tensor_t *s_sample(zf_dtype_t dtype)
{
    zf_shape_t shape = ZF_SHAPE(2, 3);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new(dtype, &shape, &t));
    if (dtype == ZF_STRING) {
        const char *words[6] = {"", "a", "bc", "d\0e", "fgh", "ijkl"};
        for (int i = 0; i < 6; i++) ASSERT_OK(zf_tensor_set_string(t, i, words[i], (size_t)i));
        return t;
    }
    uint8_t *d = zf_tensor_data(t);
    size_t size = zf_dtype_size(dtype);
    for (size_t i = 0; i < zf_tensor_nbytes(t); i++) d[i] = (uint8_t)(i * 37 + 11);
    if (dtype == ZF_BOOL)
        for (size_t i = 0; i < 6; i++) d[i] &= 1;
    if (dtype == ZF_HALF || dtype == ZF_BFLOAT16)
        for (size_t i = 0; i < 6; i++) d[i * size + 1] &= 0x3f; /* finite values */
    return t;
}

static Tensorflow__TensorProto *s_wire(const Tensorflow__TensorProto *p)
{
    size_t len = protobuf_c_message_get_packed_size(&p->base);
    uint8_t *buf = malloc(len ? len : 1);
    protobuf_c_message_pack(&p->base, buf);
    Tensorflow__TensorProto *q = tensorflow__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    assert_non_null(q);
    return q;
}

static void test_tensor_proto_round_trips_every_dtype(void **state)
{
    (void)state;
    for (int dt = 1; dt <= ZF_DTYPE_MAX; dt++) {
        if (dt == ZF_RESOURCE || dt == ZF_VARIANT) continue;
        for (int use_content = 0; use_content < 2; use_content++) {
            zf_tensor_t *t = s_sample((zf_dtype_t)dt), *back = NULL;
            Tensorflow__TensorProto *p = NULL;
            ASSERT_OK(zf_tensor_to_proto(t, &p, use_content));
            assert_int_equal(p->dtype, dt);
            assert_int_equal(p->tensor_shape->n_dim, 2);
            assert_int_equal(p->tensor_shape->dim[1]->size, 3);
            if (dt == ZF_STRING)
                assert_int_equal(p->n_string_val, 6);
            else if (use_content)
                assert_int_equal(p->tensor_content.len, zf_tensor_nbytes(t));
            else
                assert_int_equal(p->tensor_content.len, 0);
            Tensorflow__TensorProto *q = s_wire(p);
            protobuf_c_message_free_unpacked(&p->base, NULL);
            ASSERT_OK(zf_tensor_from_proto(q, &back));
            if (!zf_tensor_equal(t, back))
                fail_msg("%s (use_content %d) did not round trip", zf_dtype_name(dt), use_content);
            tensorflow__tensor_proto__free_unpacked(q, NULL);
            zf_tensor_unref(&t);
            zf_tensor_unref(&back);
        }
    }
}

static void test_tensor_proto_writes_the_dtype_field(void **state)
{
    (void)state;
    zf_tensor_t *t = s_sample(ZF_UINT16);
    Tensorflow__TensorProto *p = NULL;
    ASSERT_OK(zf_tensor_to_proto(t, &p, false));
    assert_int_equal(p->n_int_val, 6);
    for (int i = 0; i < 6; i++) assert_int_equal(p->int_val[i], ((uint16_t *)zf_tensor_data(t))[i]);
    protobuf_c_message_free_unpacked(&p->base, NULL);
    zf_tensor_unref(&t);

    t = s_sample(ZF_COMPLEX64);
    ASSERT_OK(zf_tensor_to_proto(t, &p, false));
    assert_int_equal(p->n_scomplex_val, 12);
    assert_memory_equal(p->scomplex_val, zf_tensor_data(t), zf_tensor_nbytes(t));
    protobuf_c_message_free_unpacked(&p->base, NULL);
    zf_tensor_unref(&t);

    uint16_t h = zf_float_to_half(1.0f);
    ASSERT_OK(zf_tensor_new_scalar(ZF_HALF, &h, &t));
    ASSERT_OK(zf_tensor_to_proto(t, &p, false));
    assert_int_equal(p->n_half_val, 1);
    assert_int_equal(p->half_val[0], 0x3c00);
    assert_int_equal(p->tensor_shape->n_dim, 0);
    protobuf_c_message_free_unpacked(&p->base, NULL);
    zf_tensor_unref(&t);

    zf_shape_t empty = ZF_SHAPE(0);
    ASSERT_OK(zf_tensor_new(ZF_FLOAT, &empty, &t));
    ASSERT_OK(zf_tensor_to_proto(t, &p, true));
    assert_int_equal(p->tensor_content.len, 0);
    protobuf_c_message_free_unpacked(&p->base, NULL);
    zf_tensor_unref(&t);
}

static void test_tensor_proto_refuses_device_memory(void **state)
{
    (void)state;
    static float fake[2];
    zf_buffer_t *b = NULL;
    ASSERT_OK(zf_buffer_wrap_memory(fake, sizeof fake, ZF_MEMORY_DEVICE, 0, NULL, NULL, &b));
    zf_shape_t shape = ZF_SHAPE(2);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_from_buffer(ZF_FLOAT, &shape, b, 0, &t));
    zf_buffer_unref(&b);
    Tensorflow__TensorProto *p = NULL;
    zf_test_expect_error(zf_tensor_to_proto(t, &p, true), ZF_FAILED_PRECONDITION, "device memory");
    assert_null(p);
    zf_tensor_unref(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_proto_reads_float_val),
        cmocka_unit_test(test_tensor_proto_reads_every_val_field_for_its_dtype),
        cmocka_unit_test(test_tensor_proto_reads_half_and_bfloat16_bits_from_half_val),
        cmocka_unit_test(test_tensor_proto_reads_complex_pairs),
        cmocka_unit_test(test_tensor_proto_fills_shape_from_single_value),
        cmocka_unit_test(test_tensor_proto_fills_remainder_with_last_value),
        cmocka_unit_test(test_tensor_proto_without_values_is_zeros),
        cmocka_unit_test(test_tensor_proto_caps_what_a_short_value_list_fills),
        cmocka_unit_test(test_tensor_proto_rejects_more_values_than_elements),
        cmocka_unit_test(test_tensor_proto_without_shape_is_a_scalar),
        cmocka_unit_test(test_tensor_proto_reads_string_val_and_fills),
        cmocka_unit_test(test_tensor_proto_reads_string_list_tensor_content),
        cmocka_unit_test(test_tensor_proto_reads_tensor_content_for_every_fixed_dtype),
        cmocka_unit_test(test_tensor_proto_tensor_content_wins_over_val_fields),
        cmocka_unit_test(test_tensor_proto_content_size_mismatch_names_dtype_and_shape),
        cmocka_unit_test(test_tensor_proto_rejects_resource_variant_and_bad_dtypes),
        cmocka_unit_test(test_tensor_proto_rejects_partial_shapes),
        cmocka_unit_test(test_tensor_proto_absurd_shapes_fail_before_allocating),
        cmocka_unit_test(test_tensor_proto_round_trips_every_dtype),
        cmocka_unit_test(test_tensor_proto_writes_the_dtype_field),
        cmocka_unit_test(test_tensor_proto_refuses_device_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
