/* Tests for common/tensor: shapes, buffers, tensors, strings and 16-bit floats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>
#include <cmocka.h>

#include "common/tensor.h"
#include "common/tensor_print.h"
#include "test_util.h"

/* ---- shapes ------------------------------------------------------------- */

static void test_shape_make_accepts_valid_and_rejects_bad_ranks(void **state)
{
    (void)state;
    int64_t dims[ZF_MAX_RANK + 1];
    for (int i = 0; i <= ZF_MAX_RANK; i++) dims[i] = 1;
    zf_shape_t s;
    ASSERT_OK(zf_shape_make(ZF_MAX_RANK, dims, &s));
    assert_int_equal(s.rank, ZF_MAX_RANK);
    zf_test_expect_error(zf_shape_make(ZF_MAX_RANK + 1, dims, &s), ZF_INVALID_ARGUMENT, "rank 17");
    dims[1] = -2;
    zf_test_expect_error(zf_shape_make(3, dims, &s), ZF_INVALID_ARGUMENT, "-2");
    zf_test_expect_error(zf_shape_make(-3, dims, &s), ZF_INVALID_ARGUMENT, "negative");
    ASSERT_OK(zf_shape_make(0, NULL, &s));
    assert_int_equal(s.rank, 0);
}

static void test_shape_counts_elements_and_detects_overflow(void **state)
{
    (void)state;
    int64_t n = -1;
    zf_shape_t s = ZF_SHAPE(2, 3, 4);
    ASSERT_OK(zf_shape_num_elements(&s, &n));
    assert_int_equal(n, 24);
    s = zf_shape_scalar();
    ASSERT_OK(zf_shape_num_elements(&s, &n));
    assert_int_equal(n, 1);
    s = ZF_SHAPE((int64_t)1 << 62, 0, (int64_t)1 << 62);
    ASSERT_OK(zf_shape_num_elements(&s, &n));
    assert_int_equal(n, 0);
    s = ZF_SHAPE((int64_t)1 << 32, (int64_t)1 << 32);
    zf_test_expect_error(zf_shape_num_elements(&s, &n), ZF_INVALID_ARGUMENT, "more than 2^63-1");
    s = ZF_SHAPE(-1, 3);
    zf_test_expect_error(zf_shape_num_elements(&s, &n), ZF_INVALID_ARGUMENT, "[?,3] is not fully");
}

static void test_shape_prints_like_tensorflow(void **state)
{
    (void)state;
    char buf[ZF_SHAPE_STRING_MAX];
    zf_shape_t s = ZF_SHAPE(2, 3);
    assert_string_equal(zf_shape_to_string(&s, buf, sizeof buf), "[2,3]");
    s = zf_shape_scalar();
    assert_string_equal(zf_shape_to_string(&s, buf, sizeof buf), "[]");
    s = ZF_SHAPE(-1, 7);
    assert_string_equal(zf_shape_to_string(&s, buf, sizeof buf), "[?,7]");
    s = zf_shape_unknown();
    assert_string_equal(zf_shape_to_string(&s, buf, sizeof buf), "<unknown>");
    s = ZF_SHAPE(INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX,
                 INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX,
                 INT64_MAX, INT64_MAX);
    zf_shape_to_string(&s, buf, sizeof buf);
    assert_int_equal(strlen(buf), 2 + 16 * 19 + 15);
    char small[6];
    assert_string_equal(zf_shape_to_string(&s, small, sizeof small), "[9223");
}

static void test_shape_equal_and_fully_defined(void **state)
{
    (void)state;
    zf_shape_t a = ZF_SHAPE(2, 3), b = ZF_SHAPE(2, 3), c = ZF_SHAPE(3, 2), d = ZF_SHAPE(2, -1);
    zf_shape_t u = zf_shape_unknown(), u2 = zf_shape_unknown();
    assert_true(zf_shape_equal(&a, &b));
    assert_false(zf_shape_equal(&a, &c));
    assert_false(zf_shape_equal(&a, &d));
    assert_true(zf_shape_equal(&u, &u2));
    assert_true(zf_shape_is_fully_defined(&a));
    assert_false(zf_shape_is_fully_defined(&d));
    assert_false(zf_shape_is_fully_defined(&u));
}

static void test_shape_round_trips_through_proto(void **state)
{
    (void)state;
    zf_shape_t shapes[] = {ZF_SHAPE(2, 3), zf_shape_scalar(), ZF_SHAPE(-1, 5), zf_shape_unknown()};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        Tensorflow__TensorShapeProto *p = NULL;
        ASSERT_OK(zf_shape_to_proto(&shapes[i], &p));
        assert_int_equal(p->unknown_rank, shapes[i].rank < 0);
        uint8_t buf[512];
        size_t len = protobuf_c_message_pack(&p->base, buf);
        protobuf_c_message_free_unpacked(&p->base, NULL);
        Tensorflow__TensorShapeProto *q = tensorflow__tensor_shape_proto__unpack(NULL, len, buf);
        assert_non_null(q);
        zf_shape_t back;
        ASSERT_OK(zf_shape_from_proto(q, &back));
        assert_true(zf_shape_equal(&back, &shapes[i]));
        tensorflow__tensor_shape_proto__free_unpacked(q, NULL);
    }
    zf_shape_t s;
    ASSERT_OK(zf_shape_from_proto(NULL, &s));
    assert_int_equal(s.rank, 0);
}

static void test_shape_from_proto_rejects_rank_17_and_bad_dims(void **state)
{
    (void)state;
    Tensorflow__TensorShapeProto p = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    Tensorflow__TensorShapeProto__Dim dims[17], *ptrs[17];
    for (int i = 0; i < 17; i++) {
        tensorflow__tensor_shape_proto__dim__init(&dims[i]);
        dims[i].size = 1;
        ptrs[i] = &dims[i];
    }
    p.dim = ptrs;
    p.n_dim = 17;
    zf_shape_t s;
    zf_test_expect_error(zf_shape_from_proto(&p, &s), ZF_INVALID_ARGUMENT, "maximum rank 16");
    p.n_dim = 2;
    dims[1].size = -5;
    zf_test_expect_error(zf_shape_from_proto(&p, &s), ZF_INVALID_ARGUMENT, "-5");
}

/* ---- buffers ------------------------------------------------------------ */

typedef struct {
    int calls;
    void *data;
} s_free_record_t;

static void s_record_free(void *data, void *hint)
{
    s_free_record_t *rec = hint;
    rec->calls++;
    rec->data = data;
}

static void test_buffer_free_callback_fires_once_after_last_unref(void **state)
{
    (void)state;
    static char bytes[32];
    s_free_record_t rec = {0, NULL};
    zf_buffer_t *b = NULL;
    ASSERT_OK(zf_buffer_wrap(bytes, sizeof bytes, s_record_free, &rec, &b));
    assert_int_equal(zf_buffer_refcount(b), 1);
    zf_buffer_t *b2 = zf_buffer_ref(b);
    assert_ptr_equal(b2, b);
    assert_int_equal(zf_buffer_refcount(b), 2);
    zf_buffer_unref(&b2);
    assert_null(b2);
    assert_int_equal(rec.calls, 0);
    zf_buffer_unref(&b);
    assert_null(b);
    assert_int_equal(rec.calls, 1);
    assert_ptr_equal(rec.data, bytes);
    zf_buffer_unref(&b); /* safe on NULL */
    zf_buffer_unref(NULL);
    assert_int_equal(rec.calls, 1);
}

static void test_buffer_version_counts_in_place_writes(void **state)
{
    (void)state;
    zf_buffer_t *b = NULL;
    ASSERT_OK(zf_buffer_new(16, &b));
    assert_int_equal(zf_buffer_version(b), 0);
    zf_buffer_bump_version(b);
    zf_buffer_bump_version(b);
    assert_int_equal(zf_buffer_version(b), 2);
    zf_buffer_t *other = zf_buffer_ref(b); /* one buffer, one counter */
    zf_buffer_bump_version(other);
    assert_int_equal(zf_buffer_version(b), 3);
    zf_buffer_unref(&other);
    zf_buffer_unref(&b);
}

static void test_buffer_wrap_error_never_calls_free(void **state)
{
    (void)state;
    s_free_record_t rec = {0, NULL};
    zf_buffer_t *b = NULL;
    zf_test_expect_error(zf_buffer_wrap(NULL, 8, s_record_free, &rec, &b), ZF_INVALID_ARGUMENT,
                         "no data");
    assert_null(b);
    assert_int_equal(rec.calls, 0);
}

static void test_buffer_new_is_aligned_and_zeroed(void **state)
{
    (void)state;
    zf_buffer_t *b = NULL;
    ASSERT_OK(zf_buffer_new(1000, &b));
    assert_int_equal((uintptr_t)zf_buffer_data(b) % ZF_BUFFER_ALIGN, 0);
    assert_int_equal(zf_buffer_size(b), 1000);
    assert_int_equal(zf_buffer_memory_kind(b), ZF_MEMORY_HOST);
    const uint8_t *p = zf_buffer_data(b);
    for (int i = 0; i < 1000; i++) assert_int_equal(p[i], 0);
    zf_buffer_unref(&b);
    ASSERT_OK(zf_buffer_new(0, &b));
    assert_non_null(zf_buffer_data(b));
    zf_buffer_unref(&b);
}

static void test_buffer_respects_the_allocation_limit(void **state)
{
    (void)state;
    zf_buffer_set_alloc_limit(4096);
    assert_int_equal(zf_buffer_alloc_limit(), 4096);
    zf_buffer_t *b = NULL;
    zf_test_expect_error(zf_buffer_new(4097, &b), ZF_RESOURCE_EXHAUSTED, "limit of 4096");
    assert_null(b);
    ASSERT_OK(zf_buffer_new(4096, &b));
    zf_buffer_unref(&b);
    zf_buffer_set_alloc_limit(0);
    assert_true(zf_buffer_alloc_limit() > 4096);
}

static void *s_ref_unref_many(void *arg)
{
    zf_buffer_t *b = arg;
    for (int i = 0; i < 20000; i++) {
        zf_buffer_t *r = zf_buffer_ref(b);
        zf_buffer_unref(&r);
    }
    return NULL;
}

static void test_buffer_refcount_is_thread_safe(void **state)
{
    (void)state;
    static char bytes[8];
    s_free_record_t rec = {0, NULL};
    zf_buffer_t *b = NULL;
    ASSERT_OK(zf_buffer_wrap(bytes, sizeof bytes, s_record_free, &rec, &b));
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, s_ref_unref_many, b), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    assert_int_equal(zf_buffer_refcount(b), 1);
    assert_int_equal(rec.calls, 0);
    zf_buffer_unref(&b);
    assert_int_equal(rec.calls, 1);
}

/* ---- tensors ------------------------------------------------------------ */

static void test_tensor_new_is_zeroed_with_accessors(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    zf_shape_t shape = ZF_SHAPE(2, 3);
    ASSERT_OK(zf_tensor_new(ZF_FLOAT, &shape, &t));
    assert_int_equal(zf_tensor_dtype(t), ZF_FLOAT);
    assert_true(zf_shape_equal(zf_tensor_shape(t), &shape));
    assert_int_equal(zf_tensor_num_elements(t), 6);
    assert_int_equal(zf_tensor_nbytes(t), 24);
    assert_int_equal(zf_tensor_offset(t), 0);
    assert_int_equal(zf_tensor_memory_kind(t), ZF_MEMORY_HOST);
    assert_int_equal((uintptr_t)zf_tensor_data(t) % ZF_BUFFER_ALIGN, 0);
    const float *f = zf_tensor_data(t);
    for (int i = 0; i < 6; i++) assert_true(f[i] == 0.0f);
    assert_int_equal(zf_tensor_refcount(t), 1);
    assert_int_equal(zf_buffer_refcount(zf_tensor_buffer(t)), 1);
    zf_tensor_t *t2 = zf_tensor_ref(t);
    assert_int_equal(zf_tensor_refcount(t), 2);
    zf_tensor_unref(&t2);
    assert_null(t2);
    zf_tensor_unref(&t);
    assert_null(t);
    zf_tensor_unref(&t);
    zf_tensor_unref(NULL);
}

static void test_tensor_resource_handles_are_stored_like_strings(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL, *c = NULL;
    zf_shape_t scalar = ZF_SHAPE();
    ASSERT_OK(zf_tensor_new(ZF_RESOURCE, &scalar, &t));
    ASSERT_OK(zf_tensor_set_string(t, 0, "container|var", 13));
    assert_int_equal(zf_tensor_string(t, 0)->len, 13);
    assert_string_equal(zf_tensor_string(t, 0)->data, "container|var");
    ASSERT_OK(zf_tensor_copy(t, &c));
    assert_true(zf_tensor_equal(t, c));
    char *text = NULL;
    ASSERT_OK(zf_tensor_format(t, &text));
    assert_string_equal(text, "container|var");
    free(text);
    zf_tensor_unref(&c);
    zf_tensor_unref(&t);
}

static void test_tensor_new_rejects_bad_dtypes_and_shapes(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    zf_shape_t shape = ZF_SHAPE(2);
    zf_test_expect_error(zf_tensor_new(ZF_INVALID, &shape, &t), ZF_INVALID_ARGUMENT, "dtype 0");
    zf_test_expect_error(zf_tensor_new((zf_dtype_t)101, &shape, &t), ZF_INVALID_ARGUMENT,
                         "dtype 101");
    zf_test_expect_error(zf_tensor_new(ZF_VARIANT, &shape, &t), ZF_UNIMPLEMENTED, "variant");
    zf_shape_t partial = ZF_SHAPE(-1, 2);
    zf_test_expect_error(zf_tensor_new(ZF_FLOAT, &partial, &t), ZF_INVALID_ARGUMENT,
                         "float32 tensor shape [?,2] is not fully defined");
    assert_null(t);
}

static void test_tensor_new_refuses_absurd_sizes_without_crashing(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    zf_shape_t huge = ZF_SHAPE((int64_t)1 << 40);
    zf_test_expect_error(zf_tensor_new(ZF_FLOAT, &huge, &t), ZF_RESOURCE_EXHAUSTED,
                         "float32 tensor of shape [1099511627776]");
    zf_shape_t overflow = ZF_SHAPE((int64_t)1 << 40, (int64_t)1 << 40);
    zf_test_expect_error(zf_tensor_new(ZF_FLOAT, &overflow, &t), ZF_INVALID_ARGUMENT, "2^63-1");
    zf_shape_t bytes_overflow = ZF_SHAPE((int64_t)1 << 61);
    zf_test_expect_error(zf_tensor_new(ZF_COMPLEX128, &bytes_overflow, &t), ZF_INVALID_ARGUMENT,
                         "too large");
    zf_test_expect_error(zf_tensor_new(ZF_STRING, &huge, &t), ZF_RESOURCE_EXHAUSTED, "string");
    assert_null(t);
}

static void test_tensor_from_bytes_copies_and_checks_size(void **state)
{
    (void)state;
    const int32_t v[4] = {1, -2, 3, -4};
    zf_shape_t shape = ZF_SHAPE(2, 2);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_INT32, &shape, v, sizeof v, &t));
    assert_memory_equal(zf_tensor_data(t), v, sizeof v);
    zf_tensor_unref(&t);
    zf_test_expect_error(zf_tensor_new_from_bytes(ZF_INT32, &shape, v, 12, &t), ZF_INVALID_ARGUMENT,
                         "12 bytes given but int32 [2,2] needs 16");
    zf_test_expect_error(zf_tensor_new_from_bytes(ZF_STRING, &shape, v, 12, &t),
                         ZF_INVALID_ARGUMENT, "string");
}

static void test_tensor_from_buffer_shares_and_frees_once(void **state)
{
    (void)state;
    s_free_record_t rec = {0, NULL};
    double *mem = malloc(8 * sizeof(double));
    for (int i = 0; i < 8; i++) mem[i] = i;
    zf_buffer_t *b = NULL;
    ASSERT_OK(zf_buffer_wrap(mem, 8 * sizeof(double), s_record_free, &rec, &b));
    zf_shape_t shape = ZF_SHAPE(2, 3);
    zf_tensor_t *t = NULL, *u = NULL;
    ASSERT_OK(zf_tensor_from_buffer(ZF_DOUBLE, &shape, b, 2 * sizeof(double), &t));
    assert_ptr_equal(zf_tensor_data(t), mem + 2);
    assert_true(((double *)zf_tensor_data(t))[0] == 2.0);
    zf_shape_t flat = ZF_SHAPE(6);
    ASSERT_OK(zf_tensor_reshape(t, &flat, &u));
    assert_ptr_equal(zf_tensor_data(u), zf_tensor_data(t));
    assert_int_equal(zf_buffer_refcount(b), 3);
    zf_buffer_unref(&b);
    zf_tensor_unref(&t);
    assert_int_equal(rec.calls, 0);
    zf_tensor_unref(&u);
    assert_int_equal(rec.calls, 1);
    free(mem);
}

static void test_tensor_from_buffer_rejects_short_misaligned_and_string_views(void **state)
{
    (void)state;
    zf_buffer_t *b = NULL;
    ASSERT_OK(zf_buffer_new(64, &b));
    zf_shape_t shape = ZF_SHAPE(4, 4);
    zf_tensor_t *t = NULL;
    zf_test_expect_error(zf_tensor_from_buffer(ZF_FLOAT, &shape, b, 4, &t), ZF_INVALID_ARGUMENT,
                         "float32 [4,4] needs 64 bytes but the buffer has 60 after offset 4");
    zf_shape_t small = ZF_SHAPE(2);
    zf_test_expect_error(zf_tensor_from_buffer(ZF_FLOAT, &small, b, 2, &t), ZF_INVALID_ARGUMENT,
                         "not 4-byte aligned");
    zf_test_expect_error(zf_tensor_from_buffer(ZF_FLOAT, &small, b, 100, &t), ZF_INVALID_ARGUMENT,
                         "after offset 100");
    zf_test_expect_error(zf_tensor_from_buffer(ZF_STRING, &small, b, 0, &t), ZF_INVALID_ARGUMENT,
                         "string tensor's buffer");
    ASSERT_OK(zf_tensor_from_buffer(ZF_UINT8, &small, b, 63 - 1, &t));
    zf_tensor_unref(&t);
    zf_buffer_unref(&b);
}

/* Views made together in one block: each views its own part of the
 * buffer, is checked as zf_tensor_from_buffer's are, and lives on its
 * own; the buffer is freed once with the last of them, whenever the
 * maker lets the block go. A full block makes no more. */
static void test_tensor_views_share_a_block_and_outlive_its_maker(void **state)
{
    (void)state;
    s_free_record_t rec = {0, NULL};
    float *mem = malloc(12 * sizeof(float));
    for (int i = 0; i < 12; i++) mem[i] = (float)(10 * i);
    zf_buffer_t *b = NULL;
    ASSERT_OK(zf_buffer_wrap(mem, 12 * sizeof(float), s_record_free, &rec, &b));
    zf_tensor_views_t *v = NULL;
    zf_test_expect_error(zf_tensor_views_new(0, &v), ZF_INVALID_ARGUMENT, "a block of 0");
    ASSERT_OK(zf_tensor_views_new(3, &v));
    zf_shape_t two = ZF_SHAPE(2), four = ZF_SHAPE(2, 2), big = ZF_SHAPE(20);
    zf_tensor_t *t[3] = {NULL}, *extra = NULL;
    ASSERT_OK(zf_tensor_views_add(v, ZF_FLOAT, &two, b, 0, &t[0]));
    /* refused as zf_tensor_from_buffer refuses it, using no room */
    zf_test_expect_error(zf_tensor_views_add(v, ZF_FLOAT, &big, b, 0, &extra), ZF_INVALID_ARGUMENT,
                         "needs 80 bytes but the buffer has 48");
    zf_test_expect_error(zf_tensor_views_add(v, ZF_FLOAT, &two, b, 2, &extra), ZF_INVALID_ARGUMENT,
                         "not 4-byte aligned");
    ASSERT_OK(zf_tensor_views_add(v, ZF_FLOAT, &four, b, 2 * sizeof(float), &t[1]));
    ASSERT_OK(zf_tensor_views_add(v, ZF_INT32, &two, b, 10 * sizeof(float), &t[2]));
    zf_test_expect_error(zf_tensor_views_add(v, ZF_FLOAT, &two, b, 0, &extra),
                         ZF_RESOURCE_EXHAUSTED, "all 3 tensor views of the block are made");
    assert_null(extra);
    zf_tensor_views_release(&v);
    assert_null(v);
    zf_buffer_unref(&b);
    assert_ptr_equal(zf_tensor_data(t[0]), mem);
    assert_ptr_equal(zf_tensor_data(t[1]), mem + 2);
    assert_ptr_equal(zf_tensor_data(t[2]), mem + 10);
    assert_int_equal(zf_tensor_num_elements(t[1]), 4);
    assert_int_equal(zf_tensor_dtype(t[2]), ZF_INT32);
    assert_true(((float *)zf_tensor_data(t[1]))[3] == 50.0f);
    zf_tensor_t *again = zf_tensor_ref(t[1]);
    zf_tensor_unref(&t[1]);
    zf_tensor_unref(&t[0]);
    assert_true(((float *)zf_tensor_data(again))[0] == 20.0f); /* the block is still there */
    zf_tensor_unref(&again);
    assert_int_equal(rec.calls, 0);
    zf_tensor_unref(&t[2]);
    assert_int_equal(rec.calls, 1);
    free(mem);
}

/* A view made like another: its dtype and shape, at its own offset, with
 * only the bounds and alignment checked. A block's views of a second
 * buffer keep that buffer themselves; a view dropped before the maker
 * lets the block go leaves the others. */
static void test_tensor_views_made_like_another_and_of_two_buffers(void **state)
{
    (void)state;
    s_free_record_t rec1 = {0, NULL}, rec2 = {0, NULL};
    float *m1 = malloc(8 * sizeof(float)), *m2 = malloc(4 * sizeof(float));
    for (int i = 0; i < 8; i++) m1[i] = (float)i;
    for (int i = 0; i < 4; i++) m2[i] = (float)(100 + i);
    zf_buffer_t *b1 = NULL, *b2 = NULL;
    ASSERT_OK(zf_buffer_wrap(m1, 8 * sizeof(float), s_record_free, &rec1, &b1));
    ASSERT_OK(zf_buffer_wrap(m2, 4 * sizeof(float), s_record_free, &rec2, &b2));
    zf_tensor_views_t *v = NULL;
    ASSERT_OK(zf_tensor_views_new(5, &v));
    zf_shape_t two = ZF_SHAPE(1, 2);
    zf_tensor_t *a = NULL, *like = NULL, *other = NULL, *gone = NULL, *extra = NULL;
    ASSERT_OK(zf_tensor_views_add(v, ZF_FLOAT, &two, b1, 0, &a));
    ASSERT_OK(zf_tensor_views_add_like(v, a, 6 * sizeof(float), &like));
    zf_test_expect_error(zf_tensor_views_add_like(v, a, 7 * sizeof(float), &extra),
                         ZF_INVALID_ARGUMENT,
                         "a view of 8 bytes at offset 28 runs past the buffer's 32");
    zf_test_expect_error(zf_tensor_views_add_like(v, a, 2, &extra), ZF_INVALID_ARGUMENT,
                         "float32 tensor data at offset 2 is not 4-byte aligned");
    assert_null(extra);
    ASSERT_OK(zf_tensor_views_add(v, ZF_FLOAT, &two, b2, 2 * sizeof(float), &other));
    ASSERT_OK(zf_tensor_views_add_like(v, a, 2 * sizeof(float), &gone));
    zf_tensor_unref(&gone); /* before the maker lets go */
    zf_tensor_views_release(&v);
    zf_buffer_unref(&b1);
    zf_buffer_unref(&b2);
    assert_int_equal(zf_tensor_dtype(like), ZF_FLOAT);
    assert_int_equal(zf_tensor_shape(like)->rank, 2);
    assert_int_equal(zf_tensor_shape(like)->dims[1], 2);
    assert_int_equal(zf_tensor_num_elements(like), 2);
    assert_ptr_equal(zf_tensor_data(like), m1 + 6);
    assert_true(((float *)zf_tensor_data(other))[1] == 103.0f);
    /* the second buffer goes with its last view, the block stays for the rest */
    zf_tensor_unref(&other);
    assert_int_equal(rec2.calls, 1);
    assert_int_equal(rec1.calls, 0);
    zf_tensor_unref(&a);
    assert_true(((float *)zf_tensor_data(like))[1] == 7.0f);
    assert_int_equal(rec1.calls, 0);
    zf_tensor_unref(&like);
    assert_int_equal(rec1.calls, 1);
    free(m1);
    free(m2);
}

static void test_tensor_reshape_checks_element_count(void **state)
{
    (void)state;
    zf_shape_t shape = ZF_SHAPE(2, 3), bad = ZF_SHAPE(4, 2);
    zf_tensor_t *t = NULL, *u = NULL;
    ASSERT_OK(zf_tensor_new(ZF_INT8, &shape, &t));
    zf_test_expect_error(
        zf_tensor_reshape(t, &bad, &u), ZF_INVALID_ARGUMENT,
        "cannot reshape a tensor of shape [2,3] (6 elements) to [4,2] (8 elements)");
    zf_tensor_unref(&t);
}

static void test_tensor_equal_is_bitwise(void **state)
{
    (void)state;
    zf_tensor_t *a = NULL, *b = NULL, *c = NULL;
    ASSERT_OK(zf_tensor_new_scalar_float(NAN, &a));
    ASSERT_OK(zf_tensor_copy(a, &b));
    assert_true(zf_tensor_equal(a, b));
    zf_tensor_unref(&a);
    zf_tensor_unref(&b);
    ASSERT_OK(zf_tensor_new_scalar_float(0.0f, &a));
    ASSERT_OK(zf_tensor_new_scalar_float(-0.0f, &b));
    assert_false(zf_tensor_equal(a, b));
    ASSERT_OK(zf_tensor_new_scalar_int32(0, &c));
    assert_false(zf_tensor_equal(a, c)); /* dtype differs */
    zf_tensor_unref(&a);
    zf_tensor_unref(&b);
    zf_tensor_unref(&c);
}

static void test_tensor_scalars_hold_their_value(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_scalar_double(2.5, &t));
    assert_int_equal(zf_tensor_shape(t)->rank, 0);
    assert_int_equal(zf_tensor_num_elements(t), 1);
    assert_true(*(double *)zf_tensor_data(t) == 2.5);
    zf_tensor_unref(&t);
    ASSERT_OK(zf_tensor_new_scalar_int64(-5000000000LL, &t));
    assert_int_equal(*(int64_t *)zf_tensor_data(t), -5000000000LL);
    zf_tensor_unref(&t);
    ASSERT_OK(zf_tensor_new_scalar_bool(true, &t));
    assert_int_equal(*(uint8_t *)zf_tensor_data(t), 1);
    assert_int_equal(zf_tensor_dtype(t), ZF_BOOL);
    zf_tensor_unref(&t);
    uint16_t h = 0x3c00;
    ASSERT_OK(zf_tensor_new_scalar(ZF_HALF, &h, &t));
    assert_int_equal(*(uint16_t *)zf_tensor_data(t), 0x3c00);
    zf_tensor_unref(&t);
}

static void test_tensor_strings_are_copied_and_freed(void **state)
{
    (void)state;
    zf_shape_t shape = ZF_SHAPE(3);
    zf_tensor_t *t = NULL, *c = NULL, *v = NULL;
    ASSERT_OK(zf_tensor_new(ZF_STRING, &shape, &t));
    assert_int_equal(zf_tensor_nbytes(t), 3 * sizeof(zf_tstring_t));
    const zf_tstring_t *e = zf_tensor_string(t, 1);
    assert_int_equal(e->len, 0);
    assert_null(e->data);
    char text[] = "hello";
    ASSERT_OK(zf_tensor_set_string(t, 0, text, 5));
    text[0] = 'J'; /* the tensor holds its own copy */
    ASSERT_OK(zf_tensor_set_string(t, 2, "a\0b", 3));
    ASSERT_OK(zf_tensor_set_string(t, 2, "xyz\0w", 5)); /* replaces, freeing the old bytes */
    assert_string_equal(zf_tensor_string(t, 0)->data, "hello");
    assert_int_equal(zf_tensor_string(t, 2)->len, 5);
    assert_memory_equal(zf_tensor_string(t, 2)->data, "xyz\0w", 5);
    assert_null(zf_tensor_string(t, 3));
    assert_null(zf_tensor_string(t, -1));
    zf_test_expect_error(zf_tensor_set_string(t, 3, "x", 1), ZF_OUT_OF_RANGE, "index 3");
    ASSERT_OK(zf_tensor_copy(t, &c));
    assert_true(zf_tensor_equal(t, c));
    assert_ptr_not_equal(zf_tensor_string(c, 0)->data, zf_tensor_string(t, 0)->data);
    ASSERT_OK(zf_tensor_set_string(c, 1, "!", 1));
    assert_false(zf_tensor_equal(t, c));
    zf_shape_t one = ZF_SHAPE(1);
    ASSERT_OK(zf_tensor_from_buffer(ZF_STRING, &one, zf_tensor_buffer(t), 0, &v));
    assert_string_equal(zf_tensor_string(v, 0)->data, "hello");
    zf_tensor_unref(&t);
    assert_string_equal(zf_tensor_string(v, 0)->data, "hello"); /* v keeps the buffer alive */
    zf_tensor_unref(&v);
    zf_tensor_unref(&c);
    zf_tensor_t *f = NULL;
    ASSERT_OK(zf_tensor_new_scalar_float(1, &f));
    zf_test_expect_error(zf_tensor_set_string(f, 0, "x", 1), ZF_INVALID_ARGUMENT, "float32");
    assert_null(zf_tensor_string(f, 0));
    zf_tensor_unref(&f);
    ASSERT_OK(zf_tensor_new_scalar_string("abc", 3, &t));
    assert_string_equal(zf_tensor_string(t, 0)->data, "abc");
    zf_tensor_unref(&t);
}

static void test_tensor_in_device_memory_is_tagged_and_not_copied(void **state)
{
    (void)state;
    static float fake_device[4];
    s_free_record_t rec = {0, NULL};
    zf_buffer_t *b = NULL;
    ASSERT_OK(zf_buffer_wrap_memory(fake_device, sizeof fake_device, ZF_MEMORY_DEVICE, 1,
                                    s_record_free, &rec, &b));
    assert_int_equal(zf_buffer_device_id(b), 1);
    zf_shape_t shape = ZF_SHAPE(4);
    zf_tensor_t *t = NULL, *c = NULL;
    ASSERT_OK(zf_tensor_from_buffer(ZF_FLOAT, &shape, b, 0, &t));
    zf_buffer_unref(&b);
    assert_int_equal(zf_tensor_memory_kind(t), ZF_MEMORY_DEVICE);
    assert_false(zf_tensor_equal(t, t));
    zf_test_expect_error(zf_tensor_copy(t, &c), ZF_FAILED_PRECONDITION, "device memory");
    zf_tensor_unref(&t);
    assert_int_equal(rec.calls, 1);
}

/* ---- 16-bit floats ------------------------------------------------------ */

static void test_half_converts_known_values(void **state)
{
    (void)state;
    assert_int_equal(zf_float_to_half(1.0f), 0x3c00);
    assert_int_equal(zf_float_to_half(-2.0f), 0xc000);
    assert_int_equal(zf_float_to_half(0.5f), 0x3800);
    assert_int_equal(zf_float_to_half(65504.0f), 0x7bff);
    assert_int_equal(zf_float_to_half(65519.0f), 0x7bff);
    assert_int_equal(zf_float_to_half(65520.0f), 0x7c00); /* tie rounds to even: infinity */
    assert_int_equal(zf_float_to_half(INFINITY), 0x7c00);
    assert_int_equal(zf_float_to_half(-INFINITY), 0xfc00);
    assert_int_equal(zf_float_to_half(0x1p-24f), 0x0001);        /* smallest subnormal */
    assert_int_equal(zf_float_to_half(0x1p-25f), 0x0000);        /* tie to even zero */
    assert_int_equal(zf_float_to_half(0x1.8p-24f), 0x0002);      /* 1.5 ulp: tie to even 2 */
    assert_int_equal(zf_float_to_half(0x1p-14f), 0x0400);        /* smallest normal */
    assert_int_equal(zf_float_to_half(1.0f + 0x1p-11f), 0x3c00); /* tie to even */
    assert_int_equal(zf_float_to_half(1.0f + 0x3p-11f), 0x3c02); /* tie to even, upwards */
    assert_int_equal(zf_float_to_half(-0.0f), 0x8000);
    uint16_t nan = zf_float_to_half(NAN);
    assert_true((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0);
    assert_true(zf_half_to_float(0x3c00) == 1.0f);
    assert_true(zf_half_to_float(0x0001) == 0x1p-24f);
    assert_true(isnan(zf_half_to_float(0x7e00)));
    assert_true(zf_half_to_float(0xfc00) == -INFINITY);
}

static void test_half_round_trips_every_value(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = zf_half_to_float((uint16_t)h);
        if (isnan(f)) continue;
        if (zf_float_to_half(f) != h)
            fail_msg("half 0x%04x -> %g -> 0x%04x", h, f, zf_float_to_half(f));
    }
}

static void test_bfloat16_rounds_and_truncates(void **state)
{
    (void)state;
    assert_int_equal(zf_float_to_bfloat16(1.0f), 0x3f80);
    assert_int_equal(zf_float_to_bfloat16_truncate(1.0f), 0x3f80);
    assert_true(zf_bfloat16_to_float(0x3f80) == 1.0f);
    assert_int_equal(zf_float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80); /* tie to even */
    assert_int_equal(zf_float_to_bfloat16(1.0f + 0x3p-8f), 0x3f82); /* tie to even, upwards */
    float just_below_next;
    uint32_t bits = 0x3f80ffffu;
    memcpy(&just_below_next, &bits, 4);
    assert_int_equal(zf_float_to_bfloat16(just_below_next), 0x3f81);
    assert_int_equal(zf_float_to_bfloat16_truncate(just_below_next), 0x3f80);
    bits = 0x7f800001u; /* a NaN whose payload is all below bit 16 */
    float nan;
    memcpy(&nan, &bits, 4);
    assert_true(isnan(zf_bfloat16_to_float(zf_float_to_bfloat16_truncate(nan))));
    assert_true(isnan(zf_bfloat16_to_float(zf_float_to_bfloat16(nan))));
    assert_int_equal(zf_float_to_bfloat16(3.4028235e38f), 0x7f80); /* rounds up to infinity */
    assert_int_equal(zf_float_to_bfloat16_truncate(3.4028235e38f), 0x7f7f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_make_accepts_valid_and_rejects_bad_ranks),
        cmocka_unit_test(test_shape_counts_elements_and_detects_overflow),
        cmocka_unit_test(test_shape_prints_like_tensorflow),
        cmocka_unit_test(test_shape_equal_and_fully_defined),
        cmocka_unit_test(test_shape_round_trips_through_proto),
        cmocka_unit_test(test_shape_from_proto_rejects_rank_17_and_bad_dims),
        cmocka_unit_test(test_buffer_free_callback_fires_once_after_last_unref),
        cmocka_unit_test(test_buffer_version_counts_in_place_writes),
        cmocka_unit_test(test_buffer_wrap_error_never_calls_free),
        cmocka_unit_test(test_buffer_new_is_aligned_and_zeroed),
        cmocka_unit_test(test_buffer_respects_the_allocation_limit),
        cmocka_unit_test(test_buffer_refcount_is_thread_safe),
        cmocka_unit_test(test_tensor_new_is_zeroed_with_accessors),
        cmocka_unit_test(test_tensor_new_rejects_bad_dtypes_and_shapes),
        cmocka_unit_test(test_tensor_resource_handles_are_stored_like_strings),
        cmocka_unit_test(test_tensor_new_refuses_absurd_sizes_without_crashing),
        cmocka_unit_test(test_tensor_from_bytes_copies_and_checks_size),
        cmocka_unit_test(test_tensor_from_buffer_shares_and_frees_once),
        cmocka_unit_test(test_tensor_from_buffer_rejects_short_misaligned_and_string_views),
        cmocka_unit_test(test_tensor_views_share_a_block_and_outlive_its_maker),
        cmocka_unit_test(test_tensor_views_made_like_another_and_of_two_buffers),
        cmocka_unit_test(test_tensor_reshape_checks_element_count),
        cmocka_unit_test(test_tensor_equal_is_bitwise),
        cmocka_unit_test(test_tensor_scalars_hold_their_value),
        cmocka_unit_test(test_tensor_strings_are_copied_and_freed),
        cmocka_unit_test(test_tensor_in_device_memory_is_tagged_and_not_copied),
        cmocka_unit_test(test_half_converts_known_values),
        cmocka_unit_test(test_half_round_trips_every_value),
        cmocka_unit_test(test_bfloat16_rounds_and_truncates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
