/* Tests for common/tensor_frame: tensors over real PUSH/PULL sockets
 * (inproc:// and 127.0.0.1 ephemeral TCP ports) for every dtype and rank,
 * empty, dead and string tensors; zero-copy on both sides; CUDA IPC offers
 * and their replies; batches of tensors, their layout, an entry refused
 * alone and a batch refused whole; and every header and framing violation,
 * each rejected with its message while the socket keeps working. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <msgpack.h>
#include <zmq.h>

#include "common/keys.h"
#include "common/tensor_frame.h"
#include "batch_test_util.h"
#include "test_util.h"

#define WAIT_MS 5000
#define IDLE_MS 200

typedef struct {
    zf_zctx_t *ctx;
    zf_socket_t *push, *pull;
} s_link_t;

static void s_link_open(s_link_t *l, const char *endpoint)
{
    ASSERT_OK(zf_zctx_new(&l->ctx));
    ASSERT_OK(zf_socket_new(l->ctx, ZF_SOCKET_PULL, &l->pull));
    ASSERT_OK(zf_socket_new(l->ctx, ZF_SOCKET_PUSH, &l->push));
    const char *ep = NULL;
    ASSERT_OK(zf_socket_bind(l->pull, endpoint, &ep));
    ASSERT_OK(zf_socket_connect(l->push, ep));
}

static void s_link_close(s_link_t *l)
{
    zf_socket_destroy(&l->push);
    zf_socket_destroy(&l->pull);
    zf_zctx_destroy(&l->ctx);
}

/* A tensor with every byte set from a pattern (any bits are valid values
 * for a bitwise comparison, BOOL included since only the bytes travel). */
static zf_tensor_t *s_patterned(zf_dtype_t dtype, const zf_shape_t *shape, unsigned seed)
{
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new(dtype, shape, &t));
    uint8_t *p = zf_tensor_data(t);
    for (size_t i = 0; i < zf_tensor_nbytes(t); i++) p[i] = (uint8_t)(i * 37u + seed);
    return t;
}

static void s_expect_frame(zf_socket_t *pull, const char *key, int64_t step,
                           const zf_tensor_t *want, zf_tensor_frame_t *f)
{
    ASSERT_OK(zf_tensor_frame_recv(pull, WAIT_MS, f));
    assert_string_equal(f->key, key);
    assert_int_equal(f->step_id, step);
    assert_false(f->is_dead);
    assert_non_null(f->tensor);
    if (!zf_tensor_equal(f->tensor, want)) fail_msg("tensor '%s' changed on the way", key);
}

static void s_round_trip_every_dtype(const char *endpoint)
{
    static const int64_t dims[4] = {2, 1, 3, 2};
    s_link_t l;
    s_link_open(&l, endpoint);
    for (int d = 1; d <= ZF_DTYPE_MAX; d++) {
        if (zf_dtype_size((zf_dtype_t)d) == 0) continue;
        for (int rank = 0; rank <= 4; rank++) {
            zf_shape_t shape = zf_shape_of(rank, dims);
            zf_tensor_t *t = s_patterned((zf_dtype_t)d, &shape, (unsigned)(d * 5 + rank));
            char key[64];
            snprintf(key, sizeof key, "edge_%s_rank%d;0:0", zf_dtype_name(d), rank);
            ASSERT_OK(zf_tensor_frame_send(l.push, key, d * 10 + rank, t, false));
            zf_tensor_frame_t f;
            s_expect_frame(l.pull, key, d * 10 + rank, t, &f);
            zf_tensor_frame_clear(&f);
            zf_tensor_unref(&t);
        }
    }
    s_link_close(&l);
}

static void test_every_fixed_size_dtype_round_trips_at_ranks_0_to_4_inproc(void **state)
{
    (void)state;
    s_round_trip_every_dtype("inproc://test-frame-dtypes");
}

static void test_every_fixed_size_dtype_round_trips_at_ranks_0_to_4_over_tcp(void **state)
{
    (void)state;
    s_round_trip_every_dtype("tcp://127.0.0.1:*");
}

static void test_empty_tensors_round_trip(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    zf_shape_t shapes[3] = {ZF_SHAPE(0), ZF_SHAPE(3, 0), ZF_SHAPE(0, 5, 2)};
    zf_dtype_t dtypes[3] = {ZF_FLOAT, ZF_STRING, ZF_INT64};
    for (int i = 0; i < 3; i++) {
        zf_tensor_t *t = NULL;
        ASSERT_OK(zf_tensor_new(dtypes[i], &shapes[i], &t));
        ASSERT_OK(zf_tensor_frame_send(l.push, "empty", i, t, false));
        zf_tensor_frame_t f;
        s_expect_frame(l.pull, "empty", i, t, &f);
        assert_int_equal(zf_tensor_num_elements(f.tensor), 0);
        zf_tensor_frame_clear(&f);
        zf_tensor_unref(&t);
    }
    s_link_close(&l);
}

static void test_dead_tensors_travel_without_payload(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "inproc://test-frame-dead");
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_scalar_float(1.5f, &t));
    ASSERT_OK(zf_tensor_frame_send(l.push, "dead-with", 3, t, true));
    ASSERT_OK(zf_tensor_frame_send(l.push, "dead-without", 4, NULL, true));
    for (int i = 0; i < 2; i++) {
        zf_tensor_frame_t f;
        ASSERT_OK(zf_tensor_frame_recv(l.pull, WAIT_MS, &f));
        assert_string_equal(f.key, i == 0 ? "dead-with" : "dead-without");
        assert_int_equal(f.step_id, 3 + i);
        assert_true(f.is_dead);
        assert_null(f.tensor);
        zf_tensor_frame_clear(&f);
    }
    assert_int_equal(zf_tensor_refcount(t), 1); /* a dead send keeps no reference */
    zf_tensor_unref(&t);
    s_link_close(&l);
}

static void test_strings_and_resources_round_trip(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    char big[3000];
    memset(big, 'x', sizeof big);
    const char *vals[4] = {"", "a", "bin\0ary", big};
    const size_t lens[4] = {0, 1, 7, sizeof big};
    zf_shape_t shape = ZF_SHAPE(2, 2);
    zf_dtype_t dtypes[2] = {ZF_STRING, ZF_RESOURCE};
    for (int d = 0; d < 2; d++) {
        zf_tensor_t *t = NULL;
        ASSERT_OK(zf_tensor_new(dtypes[d], &shape, &t));
        for (int i = 0; i < 4; i++) ASSERT_OK(zf_tensor_set_string(t, i, vals[i], lens[i]));
        ASSERT_OK(zf_tensor_frame_send(l.push, "strings", d, t, false));
        zf_tensor_frame_t f;
        s_expect_frame(l.pull, "strings", d, t, &f);
        assert_int_equal(zf_tensor_dtype(f.tensor), dtypes[d]);
        assert_false(f.zero_copy);
        assert_memory_equal(zf_tensor_string(f.tensor, 2)->data, "bin\0ary", 7);
        zf_tensor_frame_clear(&f);
        zf_tensor_unref(&t);
    }
    zf_tensor_t *s = NULL;
    ASSERT_OK(zf_tensor_new_scalar_string("hello", 5, &s));
    ASSERT_OK(zf_tensor_frame_send(l.push, "scalar", 9, s, false));
    zf_tensor_frame_t f;
    s_expect_frame(l.pull, "scalar", 9, s, &f);
    zf_tensor_frame_clear(&f);
    zf_tensor_unref(&s);
    s_link_close(&l);
}

/* ---- zero copy ------------------------------------------------------------------- */

typedef struct {
    int frees;
    void *block;
} s_owner_t;

static void s_count_free(void *data, void *hint)
{
    s_owner_t *o = hint;
    (void)data;
    __atomic_add_fetch(&o->frees, 1, __ATOMIC_SEQ_CST);
    free(o->block);
}

/* A FLOAT tensor of n elements over memory whose release is counted. */
static zf_tensor_t *s_counted_tensor(size_t n, s_owner_t *owner)
{
    owner->frees = 0;
    owner->block = aligned_alloc(64, n * sizeof(float) + 64);
    assert_non_null(owner->block);
    float *v = owner->block;
    for (size_t i = 0; i < n; i++) v[i] = (float)i * 0.5f;
    zf_buffer_t *buf = NULL;
    ASSERT_OK(zf_buffer_wrap(owner->block, n * sizeof(float), s_count_free, owner, &buf));
    zf_tensor_t *t = NULL;
    zf_shape_t shape = ZF_SHAPE((int64_t)n);
    ASSERT_OK(zf_tensor_from_buffer(ZF_FLOAT, &shape, buf, 0, &t));
    zf_buffer_unref(&buf);
    return t;
}

static int s_frees(s_owner_t *o)
{
    return __atomic_load_n(&o->frees, __ATOMIC_SEQ_CST);
}

static void s_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_inproc_sender_tensor_lives_until_the_receiver_drops_it(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "inproc://test-frame-zero-copy");
    s_owner_t owner;
    zf_tensor_t *t = s_counted_tensor(1024, &owner);
    const void *sent_bytes = zf_tensor_data(t);
    ASSERT_OK(zf_tensor_frame_send(l.push, "zc", 1, t, false));
    assert_int_equal(zf_tensor_refcount(t), 2); /* ours and the message's */
    zf_tensor_unref(&t);
    assert_int_equal(s_frees(&owner), 0);

    zf_tensor_frame_t f;
    ASSERT_OK(zf_tensor_frame_recv(l.pull, WAIT_MS, &f));
    /* inproc hands over the message content itself: the receiver's tensor
     * views the very bytes the sender's tensor owned */
    assert_true(f.zero_copy);
    assert_ptr_equal(zf_tensor_data(f.tensor), sent_bytes);
    assert_true(((const float *)zf_tensor_data(f.tensor))[1023] == 511.5f);
    assert_int_equal(s_frees(&owner), 0);
    zf_tensor_frame_clear(&f);
    assert_int_equal(s_frees(&owner), 1);
    s_link_close(&l);
}

static void test_tcp_payload_is_sent_and_received_without_copying(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    size_t n = (size_t)1 << 18; /* 1 MiB */
    s_owner_t owner;
    zf_tensor_t *t = s_counted_tensor(n, &owner);
    ASSERT_OK(zf_tensor_frame_send(l.push, "big", 2, t, false));
    zf_tensor_t *want = NULL;
    ASSERT_OK(zf_tensor_copy(t, &want));
    zf_tensor_unref(&t);

    zf_tensor_frame_t f;
    ASSERT_OK(zf_tensor_frame_recv(l.pull, WAIT_MS, &f));
    assert_true(zf_tensor_equal(f.tensor, want));
    /* the buffer is exactly the received message's bytes, not a copy */
    assert_true(f.zero_copy);
    zf_buffer_t *buf = zf_tensor_buffer(f.tensor);
    assert_ptr_equal(zf_buffer_data(buf), zf_tensor_data(f.tensor));
    assert_int_equal(zf_buffer_size(buf), n * sizeof(float));
    /* ZeroMQ released the sender's reference once the bytes were written */
    for (int i = 0; i < 500 && s_frees(&owner) == 0; i++) s_sleep_ms(10);
    assert_int_equal(s_frees(&owner), 1);
    zf_tensor_frame_clear(&f);
    zf_tensor_unref(&want);
    s_link_close(&l);
}

static void test_received_tensor_outlives_its_socket_and_context(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    zf_shape_t shape = ZF_SHAPE(64, 1024); /* 256 KiB: a block of its own */
    zf_tensor_t *t = s_patterned(ZF_FLOAT, &shape, 3);
    ASSERT_OK(zf_tensor_frame_send(l.push, "kept", 1, t, false));
    zf_tensor_frame_t f;
    s_expect_frame(l.pull, "kept", 1, t, &f);
    assert_true(f.zero_copy);
    s_link_close(&l);
    assert_true(zf_tensor_equal(f.tensor, t));
    zf_tensor_frame_clear(&f);
    zf_tensor_unref(&t);
}

static void test_unaligned_small_payloads_are_copied_and_still_correct(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    /* 64-byte payloads land inside ZeroMQ's shared receive batch right after
     * the header, so the key length moves them through every alignment */
    int copied = 0;
    for (int k = 1; k <= 8; k++) {
        char key[16];
        memset(key, 'k', (size_t)k);
        key[k] = '\0';
        zf_shape_t shape = ZF_SHAPE(8);
        zf_tensor_t *t = s_patterned(ZF_DOUBLE, &shape, (unsigned)k);
        ASSERT_OK(zf_tensor_frame_send(l.push, key, k, t, false));
        zf_tensor_frame_t f;
        s_expect_frame(l.pull, key, k, t, &f);
        assert_true((uintptr_t)zf_tensor_data(f.tensor) % 8 == 0);
        copied += !f.zero_copy;
        zf_tensor_frame_clear(&f);
        zf_tensor_unref(&t);
    }
    assert_true(copied >= 1);
    s_link_close(&l);
}

static void test_payload_that_fails_to_send_releases_the_tensor(void **state)
{
    (void)state;
    zf_zctx_t *ctx = NULL;
    zf_socket_t *push = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_PUSH, &push));
    ASSERT_OK(zf_socket_set_send_timeout(push, 0)); /* no peer: the send cannot wait */
    s_owner_t owner;
    zf_tensor_t *t = s_counted_tensor(16, &owner);
    zf_test_expect_error(zf_tensor_frame_send(push, "nowhere", 1, t, false), ZF_DEADLINE_EXCEEDED,
                         "sending tensor 'nowhere' (step 1): timed out");
    assert_int_equal(zf_tensor_refcount(t), 1);
    zf_tensor_unref(&t);
    assert_int_equal(s_frees(&owner), 1);
    zf_socket_destroy(&push);
    zf_zctx_destroy(&ctx);
}

static void test_queued_tensors_are_released_when_the_socket_closes(void **state)
{
    (void)state;
    zf_zctx_t *ctx = NULL;
    zf_socket_t *push = NULL;
    ASSERT_OK(zf_zctx_new(&ctx));
    ASSERT_OK(zf_socket_new(ctx, ZF_SOCKET_PUSH, &push));
    /* connected to nobody: the message waits in the queue */
    ASSERT_OK(zf_socket_connect(push, "tcp://127.0.0.1:1"));
    s_owner_t owner;
    zf_tensor_t *t = s_counted_tensor(16, &owner);
    ASSERT_OK(zf_tensor_frame_send(push, "queued", 1, t, false));
    zf_tensor_unref(&t);
    assert_int_equal(s_frees(&owner), 0);
    zf_socket_destroy(&push);
    zf_zctx_destroy(&ctx);
    assert_int_equal(s_frees(&owner), 1);
}

/* ---- crafted headers -------------------------------------------------------------- */

enum { O_V = 1, O_KEY = 2, O_STEP = 4, O_DTYPE = 8, O_SHAPE = 16, O_DEAD = 32, O_LEN = 64 };

/* A header to pack by hand: the fields, which to omit (O_*), which to
 * send with the wrong msgpack type (as the string "x"), and extras. */
typedef struct {
    int64_t v, step, dtype, len;
    const char *key;
    size_t key_len;
    int rank;
    int64_t dims[20];
    bool dead;
    int omit, wrong_type;
    bool extra_keys, duplicate_len, non_string_key;
} s_spec_t;

static s_spec_t s_spec(void)
{
    s_spec_t s = {.v = 1, .step = 5, .dtype = ZF_FLOAT, .len = 8, .key = "edge;0", .rank = 1};
    s.key_len = strlen(s.key);
    s.dims[0] = 2;
    return s;
}

static void s_pack_int(msgpack_packer *pk, const s_spec_t *s, int field, int64_t v)
{
    if (s->wrong_type & field)
        msgpack_pack_str_with_body(pk, "x", 1);
    else
        msgpack_pack_int64(pk, v);
}

static void s_pack_field(msgpack_packer *pk, const s_spec_t *s, int field)
{
    static const char *const names[] = {"v", "key", "step", "dtype", "shape", "dead", "len"};
    int bit = 0;
    while ((1 << bit) != field) bit++;
    msgpack_pack_str_with_body(pk, names[bit], strlen(names[bit]));
    if (field == O_KEY) {
        if (s->wrong_type & O_KEY)
            msgpack_pack_int(pk, 7);
        else
            msgpack_pack_str_with_body(pk, s->key, s->key_len);
    } else if (field == O_SHAPE) {
        if (s->wrong_type & O_SHAPE) {
            msgpack_pack_str_with_body(pk, "x", 1);
            return;
        }
        msgpack_pack_array(pk, (size_t)s->rank);
        for (int i = 0; i < s->rank; i++) msgpack_pack_int64(pk, s->dims[i]);
    } else if (field == O_DEAD) {
        if (s->wrong_type & O_DEAD)
            msgpack_pack_int(pk, 1);
        else if (s->dead)
            msgpack_pack_true(pk);
        else
            msgpack_pack_false(pk);
    } else {
        int64_t v = field == O_V       ? s->v
                    : field == O_STEP  ? s->step
                    : field == O_DTYPE ? s->dtype
                                       : s->len;
        s_pack_int(pk, s, field, v);
    }
}

/* Packs spec into a malloc'd buffer; caller frees sbuf. */
static void s_pack_spec(const s_spec_t *s, msgpack_sbuffer *sbuf)
{
    msgpack_sbuffer_init(sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sbuf, msgpack_sbuffer_write);
    int n = 0;
    for (int f = O_V; f <= O_LEN; f <<= 1) n += !(s->omit & f);
    n += (s->extra_keys ? 2 : 0) + (s->duplicate_len ? 1 : 0) + (s->non_string_key ? 1 : 0);
    msgpack_pack_map(&pk, (size_t)n);
    if (s->extra_keys) { /* a later version's fields, nested and odd */
        msgpack_pack_str_with_body(&pk, "compression", 11);
        msgpack_pack_map(&pk, 1);
        msgpack_pack_str_with_body(&pk, "algo", 4);
        msgpack_pack_array(&pk, 2);
        msgpack_pack_nil(&pk);
        msgpack_pack_double(&pk, 2.5);
        msgpack_pack_str_with_body(&pk, "trace", 5);
        msgpack_pack_bin_with_body(&pk, "\x01\x02", 2);
    }
    if (s->non_string_key) {
        msgpack_pack_int(&pk, 3);
        msgpack_pack_int(&pk, 4);
    }
    for (int f = O_V; f <= O_LEN; f <<= 1)
        if (!(s->omit & f)) s_pack_field(&pk, s, f);
    if (s->duplicate_len) s_pack_field(&pk, s, O_LEN);
}

static void s_expect_decode_error(const s_spec_t *s, const char *msg)
{
    msgpack_sbuffer sbuf;
    s_pack_spec(s, &sbuf);
    zf_tensor_frame_header_t h;
    zf_test_expect_error(zf_tensor_frame_decode_header(sbuf.data, sbuf.size, &h),
                         ZF_INVALID_ARGUMENT, msg);
    assert_int_equal(h.key[0], '\0');
    msgpack_sbuffer_destroy(&sbuf);
}

static void test_header_encodes_and_decodes_at_the_limits(void **state)
{
    (void)state;
    static zf_tensor_frame_header_t h, back;
    memset(&h, 0, sizeof h);
    memset(h.key, 'k', ZF_TENSOR_FRAME_MAX_KEY);
    h.step_id = -7;
    h.dtype = ZF_COMPLEX128;
    h.shape.rank = ZF_MAX_RANK;
    for (int i = 0; i < ZF_MAX_RANK; i++) h.shape.dims[i] = 1;
    h.shape.dims[3] = 3;
    h.len = 48;
    uint8_t buf[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t len = 0;
    ASSERT_OK(zf_tensor_frame_encode_header(&h, buf, sizeof buf, &len));
    ASSERT_OK(zf_tensor_frame_decode_header(buf, len, &back));
    assert_memory_equal(&h, &back, sizeof h);
    zf_test_expect_error(zf_tensor_frame_encode_header(&h, buf, 100, &len), ZF_INVALID_ARGUMENT,
                         "does not fit in 100 bytes");
    h.len = 47;
    zf_test_expect_error(zf_tensor_frame_encode_header(&h, buf, sizeof buf, &len),
                         ZF_INVALID_ARGUMENT, "field 'len': 47 bytes declared but complex128");
}

static void test_unknown_header_fields_are_ignored(void **state)
{
    (void)state;
    s_spec_t s = s_spec();
    s.extra_keys = true;
    msgpack_sbuffer sbuf;
    s_pack_spec(&s, &sbuf);
    zf_tensor_frame_header_t h;
    ASSERT_OK(zf_tensor_frame_decode_header(sbuf.data, sbuf.size, &h));
    assert_string_equal(h.key, "edge;0");
    assert_int_equal(h.step_id, 5);
    assert_int_equal(h.dtype, ZF_FLOAT);
    assert_int_equal(h.shape.rank, 1);
    assert_int_equal(h.shape.dims[0], 2);
    assert_false(h.is_dead);
    assert_int_equal(h.len, 8);
    msgpack_sbuffer_destroy(&sbuf);
}

static void test_every_header_violation_is_named(void **state)
{
    (void)state;
    s_spec_t s;
    char long_key[ZF_TENSOR_FRAME_MAX_KEY + 1];
    memset(long_key, 'k', sizeof long_key);
#define CASE(change, msg)                                                                          \
    do {                                                                                           \
        s = s_spec();                                                                              \
        change;                                                                                    \
        s_expect_decode_error(&s, msg);                                                            \
    } while (0)
    CASE(s.v = 2, "tensor frame header: version 2 is not supported (this side speaks 1)");
    CASE(s.omit = O_V, "field 'v' is missing");
    CASE(s.omit = O_LEN, "field 'len' is missing");
    CASE(s.omit = O_SHAPE | O_KEY, "field 'key' is missing");
    CASE(s.wrong_type = O_V, "field 'v' must be an integer, not a string");
    CASE(s.wrong_type = O_STEP, "field 'step' must be an integer, not a string");
    CASE(s.wrong_type = O_KEY, "field 'key' must be a string, not an integer");
    CASE(s.wrong_type = O_SHAPE, "field 'shape' must be an array, not a string");
    CASE(s.wrong_type = O_DEAD, "field 'dead' must be a bool, not an integer");
    CASE(s.wrong_type = O_LEN, "field 'len' must be an integer, not a string");
    CASE((s.key = "", s.key_len = 0), "field 'key' is empty");
    CASE((s.key = long_key, s.key_len = sizeof long_key),
         "field 'key' is 4097 bytes; at most 4096 are allowed");
    CASE((s.key = "a\0b", s.key_len = 3), "field 'key' contains a zero byte");
    CASE(s.dtype = 0, "field 'dtype': 0 is not a data type");
    CASE(s.dtype = 24, "field 'dtype': 24 is not a data type");
    CASE(s.dtype = -1, "field 'dtype': -1 is not a data type");
    CASE(s.dtype = 101, "field 'dtype': DT_FLOAT_REF is a reference type");
    CASE(s.dtype = ZF_VARIANT, "field 'dtype': DT_VARIANT tensors have no wire encoding");
    CASE(s.rank = 17, "field 'shape' has rank 17; at most 16 is allowed");
    CASE(s.dims[0] = -1, "field 'shape': dim 0 is -1; dims must be non-negative");
    CASE(s.len = -8, "field 'len' is negative (-8)");
    CASE(s.len = 12, "field 'len': 12 bytes declared but float32 [2] needs 8");
    CASE(s.dead = true, "field 'len': a dead tensor carries no bytes (len 8)");
    CASE(s.duplicate_len = true, "field 'len' appears twice");
    CASE(s.non_string_key = true, "map key 0 is an integer, not a string");
    CASE((s.rank = 2, s.dims[0] = INT64_C(1) << 40, s.dims[1] = INT64_C(1) << 40),
         "field 'shape': shape [1099511627776,1099511627776] has more than 2^63-1 elements");
    CASE((s.dims[0] = INT64_C(1) << 62), "field 'shape': float32 [4611686018427387904] is too "
                                         "large to address");
    CASE((s.dtype = ZF_STRING, s.len = 15), "field 'len': 15 bytes cannot hold 2 strings");
#undef CASE
}

static void test_malformed_msgpack_is_rejected_before_msgpack_allocates(void **state)
{
    (void)state;
    zf_tensor_frame_header_t h;
    /* a map claiming 4 billion entries, an array claiming 4 billion items */
    static const uint8_t huge_map[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'v'};
    zf_test_expect_error(zf_tensor_frame_decode_header(huge_map, sizeof huge_map, &h),
                         ZF_INVALID_ARGUMENT,
                         "container at offset 0 declares 8589934590 items but only 2 bytes "
                         "follow");
    static const uint8_t huge_array[] = {0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff};
    zf_test_expect_error(zf_tensor_frame_decode_header(huge_array, sizeof huge_array, &h),
                         ZF_INVALID_ARGUMENT, "declares 4294967295 items but only 0 bytes");
    static const uint8_t truncated[] = {0x81, 0xa1, 'x', 0xda, 0x01, 0x00, 'a'};
    zf_test_expect_error(zf_tensor_frame_decode_header(truncated, sizeof truncated, &h),
                         ZF_INVALID_ARGUMENT, "not msgpack: truncated at offset 3");
    static const uint8_t never_used[] = {0x81, 0xc1, 0x00};
    zf_test_expect_error(zf_tensor_frame_decode_header(never_used, sizeof never_used, &h),
                         ZF_INVALID_ARGUMENT, "byte 0xc1 at offset 1 is never used");
    static const uint8_t not_a_map[] = {0x93, 0x01, 0x02, 0x03};
    zf_test_expect_error(zf_tensor_frame_decode_header(not_a_map, sizeof not_a_map, &h),
                         ZF_INVALID_ARGUMENT, "tensor frame header: an array, not a map");
    static const uint8_t trailing[] = {0x80, 0x00};
    zf_test_expect_error(zf_tensor_frame_decode_header(trailing, sizeof trailing, &h),
                         ZF_INVALID_ARGUMENT, "1 trailing bytes after the header map");
    uint8_t deep[40];
    memset(deep, 0x91, sizeof deep); /* arrays of one array of ... */
    deep[sizeof deep - 1] = 0x00;
    zf_test_expect_error(zf_tensor_frame_decode_header(deep, sizeof deep, &h), ZF_INVALID_ARGUMENT,
                         "containers nest deeper than 16");
    zf_test_expect_error(zf_tensor_frame_decode_header(deep, 0, &h), ZF_INVALID_ARGUMENT,
                         "the frame is empty");
    uint8_t *big = calloc(1, ZF_TENSOR_FRAME_MAX_HEADER + 1);
    zf_test_expect_error(zf_tensor_frame_decode_header(big, ZF_TENSOR_FRAME_MAX_HEADER + 1, &h),
                         ZF_INVALID_ARGUMENT, "65537 bytes exceed the limit of 65536");
    free(big);
}

static void test_string_payloads_are_checked_element_by_element(void **state)
{
    (void)state;
    zf_tensor_frame_header_t h;
    memset(&h, 0, sizeof h);
    strcpy(h.key, "s");
    h.dtype = ZF_STRING;
    h.shape = ZF_SHAPE(2);
    uint8_t p[32] = {3, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 1, 0, 0, 0, 0, 0, 0, 0, 'z'};
    zf_tensor_t *t = NULL;
    h.len = 20;
    ASSERT_OK(zf_tensor_frame_decode_payload(&h, p, 20, &t));
    assert_memory_equal(zf_tensor_string(t, 0)->data, "abc", 3);
    assert_memory_equal(zf_tensor_string(t, 1)->data, "z", 1);
    zf_tensor_unref(&t);
    zf_test_expect_error(zf_tensor_frame_decode_payload(&h, p, 19, &t), ZF_INVALID_ARGUMENT,
                         "field 'len' declares 20 bytes but the payload frame has 19");
    h.len = 19;
    zf_test_expect_error(zf_tensor_frame_decode_payload(&h, p, 19, &t), ZF_INVALID_ARGUMENT,
                         "string 1 declares 1 bytes but only 0 remain");
    h.len = 22;
    zf_test_expect_error(zf_tensor_frame_decode_payload(&h, p, 22, &t), ZF_INVALID_ARGUMENT,
                         "2 bytes follow the last of 2 strings");
    p[11] = 0xff, p[18] = 0xff; /* a length of 2^64 - 255 */
    h.len = 20;
    zf_test_expect_error(zf_tensor_frame_decode_payload(&h, p, 20, &t), ZF_INVALID_ARGUMENT,
                         "string 1 declares 18374686479671623935 bytes but only 1 remain");
    h.shape = ZF_SHAPE(3);
    h.len = 24;
    memset(p, 0, sizeof p);
    p[0] = 9;
    zf_test_expect_error(zf_tensor_frame_decode_payload(&h, p, 24, &t), ZF_INVALID_ARGUMENT,
                         "string 1 of 3 has no length: the payload ends at byte 24");
    assert_null(t);
}

/* ---- violations over a socket ------------------------------------------------------ */

static void s_send_frames(zf_socket_t *push, const void *const *frames, const size_t *lens, int n)
{
    for (int i = 0; i < n; i++)
        assert_true(
            zmq_send(zf_socket_handle(push), frames[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
}

/* Expects the next message to be rejected with msg, then a good tensor. */
static void s_expect_rejected(s_link_t *l, const char *msg)
{
    zf_tensor_frame_t f;
    memset(&f, 0x5a, sizeof f);
    zf_test_expect_error(zf_tensor_frame_recv(l->pull, WAIT_MS, &f), ZF_INVALID_ARGUMENT, msg);
    assert_null(f.key);
    assert_null(f.tensor);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_scalar_int32(77, &t));
    ASSERT_OK(zf_tensor_frame_send(l->push, "after", 1, t, false));
    s_expect_frame(l->pull, "after", 1, t, &f);
    zf_tensor_frame_clear(&f);
    zf_tensor_unref(&t);
}

static void test_bad_messages_are_drained_and_the_socket_keeps_working(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    s_spec_t s = s_spec();
    msgpack_sbuffer good;
    s_pack_spec(&s, &good);
    static const float payload[2] = {1.0f, 2.0f};
    const void *frames[3] = {good.data, payload, payload};
    size_t lens[3] = {good.size, sizeof payload, sizeof payload};

    s_send_frames(l.push, frames, lens, 3);
    s_expect_rejected(&l, "tensor message has 3 frames; expected 2 (header and payload)");
    s_send_frames(l.push, frames, lens, 1);
    s_expect_rejected(&l, "tensor message has 1 frame; expected 2 (header and payload)");
    lens[1] = 4;
    s_send_frames(l.push, frames, lens, 2);
    s_expect_rejected(&l, "tensor 'edge;0' (step 5): field 'len' declares 8 bytes but the payload "
                          "frame has 4");
    msgpack_sbuffer_destroy(&good);

    s.v = 3;
    msgpack_sbuffer bad;
    s_pack_spec(&s, &bad);
    frames[0] = bad.data;
    lens[0] = bad.size;
    lens[1] = sizeof payload;
    s_send_frames(l.push, frames, lens, 2);
    s_expect_rejected(&l, "version 3 is not supported");
    msgpack_sbuffer_destroy(&bad);

    frames[0] = "\xc1garbage";
    lens[0] = 8;
    s_send_frames(l.push, frames, lens, 2);
    s_expect_rejected(&l, "tensor frame header: not msgpack: byte 0xc1");

    /* 2^40 floats declared, 8 bytes sent: refused on the numbers alone */
    zf_buffer_set_alloc_limit(1 << 20);
    s = s_spec();
    s.dims[0] = INT64_C(1) << 40;
    s.len = INT64_C(4) << 40;
    s_pack_spec(&s, &bad);
    frames[0] = bad.data;
    lens[0] = bad.size;
    s_send_frames(l.push, frames, lens, 2);
    s_expect_rejected(&l, "field 'len' declares 4398046511104 bytes but the payload frame has 8");
    msgpack_sbuffer_destroy(&bad);
    s.dtype = ZF_STRING;
    s.len = 8;
    s_pack_spec(&s, &bad);
    frames[0] = bad.data;
    lens[0] = bad.size;
    s_send_frames(l.push, frames, lens, 2);
    s_expect_rejected(&l, "field 'len': 8 bytes cannot hold 1099511627776 strings");
    msgpack_sbuffer_destroy(&bad);
    zf_buffer_set_alloc_limit(0);
    s_link_close(&l);
}

static void test_recv_times_out_and_send_checks_its_arguments(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "inproc://test-frame-args");
    zf_tensor_frame_t f;
    zf_test_expect_error(zf_tensor_frame_recv(l.pull, IDLE_MS, &f), ZF_DEADLINE_EXCEEDED,
                         "no message within 200 ms");
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_scalar_float(1.0f, &t));
    zf_test_expect_error(zf_tensor_frame_send(l.push, "", 1, t, false), ZF_INVALID_ARGUMENT,
                         "field 'key' is empty");
    zf_test_expect_error(zf_tensor_frame_send(l.push, NULL, 1, t, false), ZF_INVALID_ARGUMENT,
                         "field 'key' is missing");
    char long_key[ZF_TENSOR_FRAME_MAX_KEY + 2];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    zf_test_expect_error(zf_tensor_frame_send(l.push, long_key, 1, t, false), ZF_INVALID_ARGUMENT,
                         "field 'key' is 4097 bytes; at most 4096 are allowed");
    zf_test_expect_error(zf_tensor_frame_send(l.push, "k", 1, NULL, false), ZF_INVALID_ARGUMENT,
                         "tensor 'k': a live tensor is required");
    zf_buffer_t *dev = NULL;
    static float fake_device[4];
    ASSERT_OK(zf_buffer_wrap_memory(fake_device, sizeof fake_device, ZF_MEMORY_DEVICE, 0, NULL,
                                    NULL, &dev));
    zf_tensor_t *on_device = NULL;
    zf_shape_t shape = ZF_SHAPE(4);
    ASSERT_OK(zf_tensor_from_buffer(ZF_FLOAT, &shape, dev, 0, &on_device));
    zf_buffer_unref(&dev);
    zf_test_expect_error(zf_tensor_frame_send(l.push, "gpu", 1, on_device, false),
                         ZF_FAILED_PRECONDITION, "tensor 'gpu' is in device memory");
    ASSERT_OK(zf_tensor_frame_send(l.push, "gpu-dead", 2, on_device, true)); /* no bytes */
    ASSERT_OK(zf_tensor_frame_recv(l.pull, WAIT_MS, &f));
    assert_true(f.is_dead);
    assert_null(f.tensor);
    assert_string_equal(f.key, "gpu-dead");
    zf_tensor_frame_clear(&f);
    zf_tensor_unref(&on_device);
    zf_tensor_unref(&t);
    zf_test_expect_error(zf_tensor_frame_recv(l.pull, 0, &f), ZF_DEADLINE_EXCEEDED, NULL);
    s_link_close(&l);
}

/* ---- CUDA IPC offers and replies ---------------------------------------------- */

static zf_tensor_frame_ipc_t s_ipc(void)
{
    zf_tensor_frame_ipc_t ipc = {.offset = 256, .nbytes = 8, .device = 1, .id = 42};
    for (int i = 0; i < ZF_TENSOR_FRAME_IPC_HANDLE; i++) ipc.handle[i] = (uint8_t)(i * 7 + 1);
    snprintf(ipc.host, sizeof ipc.host, "gpu-host:boot-1");
    return ipc;
}

static void test_ipc_offer_header_round_trips_through_the_codec_and_a_socket(void **state)
{
    (void)state;
    static zf_tensor_frame_header_t h, back;
    zf_tensor_frame_ipc_t ipc = s_ipc();
    zf_shape_t shape = ZF_SHAPE(2);
    ASSERT_OK(zf_tensor_frame_header_for_ipc("edge;0", 5, ZF_FLOAT, &shape, &ipc, &h));
    assert_true(h.has_ipc);
    assert_int_equal(h.len, 0);
    uint8_t buf[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t len = 0;
    ASSERT_OK(zf_tensor_frame_encode_header(&h, buf, sizeof buf, &len));
    ASSERT_OK(zf_tensor_frame_decode_header(buf, len, &back));
    assert_memory_equal(&h, &back, sizeof h);

    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    ASSERT_OK(zf_tensor_frame_send_ipc(l.push, &h));
    zf_tensor_frame_t f;
    ASSERT_OK(zf_tensor_frame_recv(l.pull, WAIT_MS, &f));
    assert_non_null(f.offer);
    assert_null(f.reply);
    assert_null(f.tensor);
    assert_string_equal(f.key, "edge;0");
    assert_int_equal(f.step_id, 5);
    assert_int_equal(f.offer->dtype, ZF_FLOAT);
    assert_true(zf_shape_equal(&f.offer->shape, &shape));
    assert_memory_equal(&f.offer->ipc, &ipc, sizeof ipc);
    zf_tensor_frame_clear(&f);
    s_link_close(&l);
}

static void test_shm_offer_header_round_trips_and_its_limits_are_named(void **state)
{
    (void)state;
    static zf_tensor_frame_header_t h, back;
    zf_tensor_frame_shm_t shm = {.offset = 4096, .nbytes = 8, .id = 3};
    snprintf(shm.name, sizeof shm.name, "/zflow-12-00ff");
    snprintf(shm.host, sizeof shm.host, "host:boot-1");
    zf_shape_t shape = ZF_SHAPE(2);
    ASSERT_OK(zf_tensor_frame_header_for_shm("edge;0", 5, ZF_FLOAT, &shape, &shm, &h));
    assert_true(h.has_shm);
    assert_false(h.has_ipc);
    assert_int_equal(h.len, 0);
    uint8_t buf[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t len = 0;
    ASSERT_OK(zf_tensor_frame_encode_header(&h, buf, sizeof buf, &len));
    ASSERT_OK(zf_tensor_frame_decode_header(buf, len, &back));
    assert_memory_equal(&h, &back, sizeof h);
    zf_tensor_t *t = NULL;
    zf_test_expect_error(zf_tensor_frame_decode_payload(&h, "", 0, &t), ZF_INVALID_ARGUMENT,
                         "a shared-memory offer has no payload");

    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    ASSERT_OK(zf_tensor_frame_send_shm(l.push, &h));
    zf_tensor_frame_t f;
    ASSERT_OK(zf_tensor_frame_recv(l.pull, WAIT_MS, &f));
    assert_non_null(f.offer);
    assert_true(f.offer->is_shm);
    assert_null(f.tensor);
    assert_string_equal(f.key, "edge;0");
    assert_memory_equal(&f.offer->shm, &shm, sizeof shm);
    zf_tensor_frame_clear(&f);
    s_link_close(&l);

    zf_tensor_frame_shm_t bad = shm;
    bad.nbytes = 12;
    zf_test_expect_error(zf_tensor_frame_header_for_shm("e", 1, ZF_FLOAT, &shape, &bad, &h),
                         ZF_INVALID_ARGUMENT, "field 'shm': nbytes 12 but the tensor needs 8");
    bad = shm;
    bad.name[0] = '\0';
    zf_test_expect_error(zf_tensor_frame_header_for_shm("e", 1, ZF_FLOAT, &shape, &bad, &h),
                         ZF_INVALID_ARGUMENT, "field 'name' is empty");
    bad = shm;
    bad.id = 0;
    zf_test_expect_error(zf_tensor_frame_header_for_shm("e", 1, ZF_FLOAT, &shape, &bad, &h),
                         ZF_INVALID_ARGUMENT, "field 'shm': id 0 is out of range");
    zf_test_expect_error(zf_tensor_frame_header_for_shm("e", 1, ZF_STRING, &shape, &shm, &h),
                         ZF_INVALID_ARGUMENT, "field 'shm': string tensors cannot be offered");
    ASSERT_OK(zf_tensor_frame_header_for_shm("e", 1, ZF_FLOAT, &shape, &shm, &h));
    h.has_ipc = true;
    zf_test_expect_error(zf_tensor_frame_encode_header(&h, buf, sizeof buf, &len),
                         ZF_INVALID_ARGUMENT, "fields 'ipc' and 'shm' exclude each other");
}

static void test_replies_round_trip_and_are_not_taken_for_tensors(void **state)
{
    (void)state;
    zf_tensor_frame_reply_t r = {.id = 42, .step_id = -3, .accepted = false}, back;
    snprintf(r.why, sizeof r.why, "the sender's host 'a' is not this host 'b'");
    uint8_t buf[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t len = 0;
    ASSERT_OK(zf_tensor_frame_encode_reply(&r, buf, sizeof buf, &len));
    ASSERT_OK(zf_tensor_frame_decode_reply(buf, len, &back));
    assert_memory_equal(&r, &back, sizeof r);
    zf_tensor_frame_header_t h;
    zf_test_expect_error(zf_tensor_frame_decode_header(buf, len, &h), ZF_INVALID_ARGUMENT,
                         "tensor frame header: a reply, not a tensor");
    assert_int_equal(h.key[0], '\0');
    s_spec_t s = s_spec();
    msgpack_sbuffer sbuf;
    s_pack_spec(&s, &sbuf);
    zf_test_expect_error(zf_tensor_frame_decode_reply(sbuf.data, sbuf.size, &back),
                         ZF_INVALID_ARGUMENT, "tensor frame reply: a tensor, not a reply");
    msgpack_sbuffer_destroy(&sbuf);

    s_link_t l;
    s_link_open(&l, "inproc://replies");
    r.accepted = true;
    memset(r.why, 0, sizeof r.why);
    ASSERT_OK(zf_tensor_frame_send_reply(l.push, &r));
    zf_tensor_frame_t f;
    ASSERT_OK(zf_tensor_frame_recv(l.pull, WAIT_MS, &f));
    assert_non_null(f.reply);
    assert_null(f.offer);
    assert_null(f.key);
    assert_null(f.tensor);
    assert_memory_equal(f.reply, &r, sizeof r);
    zf_tensor_frame_clear(&f);
    r.id = 0;
    zf_test_expect_error(zf_tensor_frame_send_reply(l.push, &r), ZF_INVALID_ARGUMENT,
                         "field 'reply': id 0 is out of range");
    s_link_close(&l);
}

/* A float [2] tensor header with an "ipc" map, each part changeable. */
typedef struct {
    const char *omit; /* an ipc field left out */
    const char *nil;  /* an ipc field sent as nil */
    bool ipc_not_map;
    size_t handle_len;
    int64_t offset, nbytes, device, id, len, dtype;
    const char *host;
    size_t host_len;
    bool dead, extra;
} s_ipc_spec_t;

static s_ipc_spec_t s_ipc_spec(void)
{
    return (s_ipc_spec_t){.handle_len = 64,
                          .offset = 256,
                          .nbytes = 8,
                          .device = 2,
                          .id = 9,
                          .dtype = ZF_FLOAT,
                          .host = "h:1",
                          .host_len = 3};
}

static void s_pack_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str_with_body(pk, s, strlen(s));
}

/* Packs the ipc field's name and value n (0..5) unless omitted. */
static void s_pack_ipc_item(msgpack_packer *pk, const s_ipc_spec_t *s, int n)
{
    static const char *const names[] = {"handle", "offset", "nbytes", "device", "id", "host"};
    uint8_t handle[80];
    for (int i = 0; i < 80; i++) handle[i] = (uint8_t)(i * 7 + 1); /* a pattern, not zeros */
    s_pack_str(pk, names[n]);
    if (s->nil && strcmp(s->nil, names[n]) == 0) {
        msgpack_pack_nil(pk);
        return;
    }
    const int64_t ints[] = {0, s->offset, s->nbytes, s->device, s->id};
    if (n == 0)
        msgpack_pack_bin_with_body(pk, handle, s->handle_len);
    else if (n == 5)
        msgpack_pack_str_with_body(pk, s->host, s->host_len);
    else
        msgpack_pack_int64(pk, ints[n]);
}

static void s_pack_ipc_spec(const s_ipc_spec_t *s, msgpack_sbuffer *sbuf)
{
    msgpack_sbuffer_init(sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sbuf, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 8);
    s_pack_str(&pk, "v");
    msgpack_pack_int(&pk, 1);
    s_pack_str(&pk, "key");
    s_pack_str(&pk, "edge;0");
    s_pack_str(&pk, "step");
    msgpack_pack_int(&pk, 5);
    s_pack_str(&pk, "dtype");
    msgpack_pack_int64(&pk, s->dtype);
    s_pack_str(&pk, "shape");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_int(&pk, 2);
    s_pack_str(&pk, "dead");
    s->dead ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    s_pack_str(&pk, "len");
    msgpack_pack_int64(&pk, s->len);
    s_pack_str(&pk, "ipc");
    if (s->ipc_not_map) {
        msgpack_pack_array(&pk, 0);
        return;
    }
    msgpack_pack_map(&pk, (size_t)(6 - (s->omit ? 1 : 0) + (s->extra ? 1 : 0)));
    if (s->extra) {
        s_pack_str(&pk, "future");
        msgpack_pack_array(&pk, 1);
        msgpack_pack_nil(&pk);
    }
    static const char *const names[] = {"handle", "offset", "nbytes", "device", "id", "host"};
    for (int n = 0; n < 6; n++)
        if (!s->omit || strcmp(s->omit, names[n]) != 0) s_pack_ipc_item(&pk, s, n);
}

static void test_every_ipc_field_violation_is_named(void **state)
{
    (void)state;
    char long_host[ZF_TENSOR_FRAME_MAX_HOST + 1];
    memset(long_host, 'h', sizeof long_host);
    s_ipc_spec_t s = s_ipc_spec();
    msgpack_sbuffer sbuf;
    zf_tensor_frame_header_t h;
    s.extra = true; /* a valid offer with a later version's field */
    s_pack_ipc_spec(&s, &sbuf);
    ASSERT_OK(zf_tensor_frame_decode_header(sbuf.data, sbuf.size, &h));
    assert_true(h.has_ipc);
    assert_int_equal(h.ipc.offset, 256);
    assert_int_equal(h.ipc.device, 2);
    for (int i = 0; i < 64; i++) assert_int_equal(h.ipc.handle[i], (uint8_t)(i * 7 + 1));
    assert_int_equal(h.ipc.nbytes, 8);
    assert_int_equal(h.ipc.id, 9);
    assert_string_equal(h.ipc.host, "h:1");
    msgpack_sbuffer_destroy(&sbuf);
#define CASE(change, msg)                                                                          \
    do {                                                                                           \
        s = s_ipc_spec();                                                                          \
        change;                                                                                    \
        s_pack_ipc_spec(&s, &sbuf);                                                                \
        zf_test_expect_error(zf_tensor_frame_decode_header(sbuf.data, sbuf.size, &h),              \
                             ZF_INVALID_ARGUMENT, msg);                                            \
        assert_false(h.has_ipc);                                                                   \
        msgpack_sbuffer_destroy(&sbuf);                                                            \
    } while (0)
    CASE(s.ipc_not_map = true, "tensor frame header: field 'ipc' must be a map, not an array");
    CASE(s.omit = "handle", "field 'ipc': field 'handle' is missing");
    CASE(s.omit = "host", "field 'ipc': field 'host' is missing");
    CASE(s.nil = "handle", "field 'ipc': field 'handle' must be binary, not nil");
    CASE(s.nil = "offset", "field 'ipc': field 'offset' must be an integer, not nil");
    CASE(s.nil = "host", "field 'ipc': field 'host' must be a string, not nil");
    CASE(s.handle_len = 63, "field 'handle' is 63 bytes; a CUDA IPC handle has 64");
    CASE(s.handle_len = 65, "field 'handle' is 65 bytes; a CUDA IPC handle has 64");
    CASE(s.offset = -1, "field 'ipc': field 'offset' is negative (-1)");
    CASE(s.offset = INT64_MAX - 4, "field 'ipc': offset 9223372036854775803 is out of range");
    CASE(s.nbytes = 12, "field 'ipc': nbytes 12 but the tensor needs 8");
    CASE(s.nbytes = -8, "field 'ipc': field 'nbytes' is negative (-8)");
    CASE(s.device = -1, "field 'ipc': field 'device' -1 is not a CUDA ordinal");
    CASE(s.device = INT64_C(1) << 40, "field 'device' 1099511627776 is not a CUDA ordinal");
    CASE(s.id = 0, "field 'ipc': id 0 is out of range");
    CASE((s.host = "", s.host_len = 0), "field 'host' is empty");
    CASE((s.host = long_host, s.host_len = sizeof long_host),
         "field 'host' is 321 bytes; at most 320 are allowed");
    CASE((s.host = "a\0b", s.host_len = 3), "field 'host' contains a zero byte");
    CASE(s.len = 8, "field 'len': an IPC offer carries no bytes (len 8)");
    CASE(s.dead = true, "field 'ipc': a dead tensor cannot be offered");
    CASE(s.dtype = ZF_STRING, "field 'ipc': string tensors cannot be offered");
#undef CASE
}

static void s_expect_reply_error(const char *omit, const char *nil, int64_t v, int64_t id,
                                 size_t why_len, const char *msg)
{
    static char why[ZF_TENSOR_FRAME_MAX_WHY + 8];
    memset(why, 'w', sizeof why);
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, omit ? 4 : 5);
    static const char *const names[] = {"v", "reply", "step", "accepted", "why"};
    for (int n = 0; n < 5; n++) {
        if (omit && strcmp(omit, names[n]) == 0) continue;
        s_pack_str(&pk, names[n]);
        if (nil && strcmp(nil, names[n]) == 0)
            msgpack_pack_nil(&pk);
        else if (n == 3)
            msgpack_pack_true(&pk);
        else if (n == 4)
            msgpack_pack_str_with_body(&pk, why, why_len);
        else
            msgpack_pack_int64(&pk, n == 0 ? v : n == 1 ? id : 3);
    }
    zf_tensor_frame_reply_t r;
    zf_status_t s = zf_tensor_frame_decode_reply(sbuf.data, sbuf.size, &r);
    msgpack_sbuffer_destroy(&sbuf);
    if (!msg) {
        ASSERT_OK(s);
        assert_true(r.accepted);
        assert_int_equal(r.step_id, 3);
        assert_int_equal(r.id, id);
        assert_int_equal(strlen(r.why), why_len);
        return;
    }
    zf_test_expect_error(s, ZF_INVALID_ARGUMENT, msg);
    assert_int_equal(r.id, 0);
}

static void test_every_reply_violation_is_named(void **state)
{
    (void)state;
    s_expect_reply_error(NULL, NULL, 1, 7, ZF_TENSOR_FRAME_MAX_WHY, NULL);
    s_expect_reply_error(NULL, NULL, 2, 7, 0, "tensor frame reply: version 2 is not supported");
    s_expect_reply_error("v", NULL, 1, 7, 0, "tensor frame header: field 'v' is missing");
    s_expect_reply_error("accepted", NULL, 1, 7, 0,
                         "tensor frame reply: field 'accepted' is missing");
    s_expect_reply_error("why", NULL, 1, 7, 0, "tensor frame reply: field 'why' is missing");
    s_expect_reply_error("step", NULL, 1, 7, 0, "tensor frame reply: field 'step' is missing");
    s_expect_reply_error(NULL, NULL, 1, 0, 0, "tensor frame reply: field 'reply': id 0 is out");
    s_expect_reply_error(NULL, NULL, 1, -4, 0, "field 'reply' is negative (-4)");
    s_expect_reply_error(NULL, "accepted", 1, 7, 0, "field 'accepted' must be a bool, not nil");
    s_expect_reply_error(NULL, "why", 1, 7, 0, "field 'why' must be a string, not nil");
    s_expect_reply_error(NULL, "step", 1, 7, 0, "field 'step' must be an integer, not nil");
    s_expect_reply_error(NULL, NULL, 1, 7, ZF_TENSOR_FRAME_MAX_WHY + 1,
                         "field 'why' is 513 bytes; at most 512 are allowed");
}

static void test_offers_and_replies_with_a_payload_are_refused_and_drained(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "inproc://offer-payload");
    static zf_tensor_frame_header_t h;
    zf_tensor_frame_ipc_t ipc = s_ipc();
    zf_shape_t shape = ZF_SHAPE(2);
    ASSERT_OK(zf_tensor_frame_header_for_ipc("edge;0", 5, ZF_FLOAT, &shape, &ipc, &h));
    uint8_t buf[ZF_TENSOR_FRAME_HEADER_MAX_ENCODED];
    size_t len = 0;
    ASSERT_OK(zf_tensor_frame_encode_header(&h, buf, sizeof buf, &len));
    void *sock = zf_socket_handle(l.push);
    assert_true(zmq_send(sock, buf, len, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(sock, "12345678", 8, 0) == 8);
    zf_tensor_frame_reply_t r = {.id = 1, .accepted = true};
    ASSERT_OK(zf_tensor_frame_encode_reply(&r, buf, sizeof buf, &len));
    assert_true(zmq_send(sock, buf, len, ZMQ_SNDMORE) >= 0);
    assert_true(zmq_send(sock, "x", 1, 0) == 1);
    zf_tensor_frame_t f;
    zf_test_expect_error(zf_tensor_frame_recv(l.pull, WAIT_MS, &f), ZF_INVALID_ARGUMENT,
                         "an IPC offer carries a payload of 8 bytes; it must be empty");
    assert_null(f.key);
    zf_test_expect_error(zf_tensor_frame_recv(l.pull, WAIT_MS, &f), ZF_INVALID_ARGUMENT,
                         "a reply carries a payload of 1 bytes; it must be empty");
    zf_tensor_t *t = s_patterned(ZF_INT64, &shape, 3);
    ASSERT_OK(zf_tensor_frame_send(l.push, "next", 1, t, false));
    s_expect_frame(l.pull, "next", 1, t, &f);
    zf_tensor_frame_clear(&f);
    zf_tensor_unref(&t);
    zf_shape_t three = ZF_SHAPE(3);
    zf_test_expect_error(zf_tensor_frame_header_for_ipc("edge;0", 5, ZF_FLOAT, &three, &ipc, &h),
                         ZF_INVALID_ARGUMENT, "field 'ipc': nbytes 8 but the tensor needs 12");
    assert_false(h.has_ipc);
    s_link_close(&l);
}

/* ---- batches --------------------------------------------------------------------- */

/* A buffer holding a copy of len bytes (NULL for none). */
static zf_buffer_t *s_payload(const void *bytes, size_t len)
{
    if (len == 0) return NULL;
    zf_buffer_t *b = NULL;
    ASSERT_OK(zf_buffer_new(len, &b));
    memcpy(zf_buffer_data(b), bytes, len);
    return b;
}

static void test_batches_carry_every_kind_of_tensor_over_a_socket(void **state)
{
    (void)state;
    zf_shape_t s3 = ZF_SHAPE(3), s5 = ZF_SHAPE(5), s0 = ZF_SHAPE(0), s2 = ZF_SHAPE(2),
               scalar = ZF_SHAPE();
    zf_tensor_t *t[7] = {
        s_patterned(ZF_FLOAT, &s3, 1),
        s_patterned(ZF_INT8, &s5, 2), /* 5 bytes: padding */
        s_patterned(ZF_COMPLEX128, &s2, 3),
        s_patterned(ZF_FLOAT, &s0, 4),
        s_patterned(ZF_DOUBLE, &scalar, 5),
        NULL,
        NULL,
    };
    ASSERT_OK(zf_tensor_new(ZF_STRING, &s2, &t[5]));
    ASSERT_OK(zf_tensor_set_string(t[5], 0, "bin\0ary", 7));
    ASSERT_OK(zf_tensor_set_string(t[5], 1, "", 0));
    t[6] = s_patterned(ZF_INT32, &s3, 6); /* sent dead */
    static const char *const keys[8] = {"f", "i8", "c128", "empty", "d", "str", "dead", "none"};
    zf_tensor_frame_batch_out_t b = {0};
    for (int i = 0; i < 8; i++) {
        bool added = false;
        ASSERT_OK(zf_tensor_frame_batch_out_add(&b, keys[i], 40 + i, i < 7 ? t[i] : NULL, i >= 6,
                                                1024, &added));
        assert_true(added);
    }
    assert_int_equal(b.n, 8);
    /* larger than the limit given: left out, nothing changes */
    zf_shape_t big = ZF_SHAPE(1024);
    zf_tensor_t *large = s_patterned(ZF_FLOAT, &big, 7);
    bool added = true;
    ASSERT_OK(zf_tensor_frame_batch_out_add(&b, "large", 1, large, false, 1024, &added));
    assert_false(added);
    assert_int_equal(b.n, 8);
    /* nor one that would take the payload frame past what a receiver
     * takes: it goes alone */
    zf_shape_t huge = ZF_SHAPE(ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD / 4);
    zf_tensor_t *too_much = NULL;
    ASSERT_OK(zf_tensor_new(ZF_FLOAT, &huge, &too_much));
    ASSERT_OK(zf_tensor_frame_batch_out_add(&b, "too much", 1, too_much, false, SIZE_MAX, &added));
    assert_false(added);
    assert_int_equal(b.n, 8);
    zf_tensor_unref(&too_much);

    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    ASSERT_OK(zf_tensor_frame_batch_out_send(l.push, &b));
    assert_int_equal(b.n, 0);
    assert_null(b.head);
    zf_tensor_frame_t f;
    ASSERT_OK(zf_tensor_frame_recv(l.pull, WAIT_MS, &f));
    assert_non_null(f.batch);
    assert_null(f.key);
    assert_null(f.tensor);
    assert_int_equal(f.batch->n, 8);
    for (int i = 0; i < 8; i++) {
        const zf_tensor_frame_entry_t *e = &f.batch->entries[i];
        if (!zf_ok(e->error)) fail_msg("entry %d: %s", i, zf_status_msg(&e->error));
        assert_string_equal(e->key, keys[i]);
        assert_true(e->has_step);
        assert_int_equal(e->step_id, 40 + i);
        assert_int_equal(e->is_dead, i >= 6);
        if (i >= 6) {
            assert_null(e->tensor);
            continue;
        }
        assert_non_null(e->tensor);
        assert_int_equal(zf_tensor_dtype(e->tensor), zf_tensor_dtype(t[i]));
        assert_true(zf_shape_equal(zf_tensor_shape(e->tensor), zf_tensor_shape(t[i])));
        if (i == 5) {
            assert_int_equal(zf_tensor_string(e->tensor, 0)->len, 7);
            assert_memory_equal(zf_tensor_string(e->tensor, 0)->data, "bin\0ary", 7);
            assert_int_equal(zf_tensor_string(e->tensor, 1)->len, 0);
            continue;
        }
        assert_memory_equal(zf_tensor_data(e->tensor), zf_tensor_data(t[i]),
                            zf_tensor_nbytes(t[i]));
        /* a view of the received payload, aligned for its dtype */
        assert_int_equal((uintptr_t)zf_tensor_data(e->tensor) % ZF_TENSOR_FRAME_BATCH_ALIGN, 0);
    }
    zf_tensor_frame_clear(&f);
    /* an empty batch is not sent; the socket still works */
    zf_test_expect_error(zf_tensor_frame_batch_out_send(l.push, &b), ZF_INVALID_ARGUMENT,
                         "an empty batch");
    ASSERT_OK(zf_tensor_frame_send(l.push, "after", 1, t[0], false));
    s_expect_frame(l.pull, "after", 1, t[0], &f);
    zf_tensor_frame_clear(&f);
    s_link_close(&l);
    for (int i = 0; i < 7; i++) zf_tensor_unref(&t[i]);
    zf_tensor_unref(&large);
}

/* Keys that start alike ("src;incarnation;dst;") share one copy of it:
 * the entries after the first carry the edge name and frame only. */
static void test_batch_keys_share_their_start(void **state)
{
    (void)state;
    static const char *const keys[4] = {"/job:a/device:CPU:0;01;/job:b/device:CPU:0;x:0;0:0",
                                        "/job:a/device:CPU:0;01;/job:b/device:CPU:0;y:0;0:0",
                                        "/job:a/device:CPU:0;01;/job:c/device:CPU:0;z:0;0:0",
                                        "no-separators"};
    zf_shape_t s1 = ZF_SHAPE(1);
    zf_tensor_t *t = s_patterned(ZF_FLOAT, &s1, 1);
    zf_tensor_frame_batch_out_t b = {0};
    size_t whole = 0;
    for (int i = 0; i < 4; i++) {
        bool added = false;
        ASSERT_OK(zf_tensor_frame_batch_out_add(&b, keys[i], 3, t, false, 1024, &added));
        assert_true(added);
        whole += strlen(keys[i]);
    }
    /* 16 bytes before the entries, 24 + 8 (one dim) each, and the keys:
     * the second key without the 43 bytes it shares with the first */
    assert_int_equal(b.head_len, 16 + 4 * 32 + whole - 43);
    assert_int_equal(b.prefixes, 2);
    zf_tensor_frame_batch_prefix(b.n, (uint32_t)b.head_len, b.head);
    zf_buffer_t *payload = s_payload(b.payload, b.payload_len);
    zf_tensor_frame_batch_t bt;
    ASSERT_OK(zf_tensor_frame_decode_batch(b.head, b.head_len, payload, &bt));
    assert_int_equal(bt.n, 4);
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(bt.entries[i].error);
        assert_string_equal(bt.entries[i].key, keys[i]);
        assert_memory_equal(zf_tensor_data(bt.entries[i].tensor), zf_tensor_data(t), 4);
    }
    zf_tensor_frame_batch_clear(&bt);
    zf_buffer_unref(&payload);
    zf_tensor_frame_batch_out_clear(&b);
    zf_tensor_unref(&t);
}

/* A batch stops taking entries before its keys, once their prefixes are
 * put back, would take more than a receiver reads: 4000-byte keys that
 * share 3990 bytes take 42 bytes each in frame 1 but 4001 once read. */
static void test_a_batch_stops_before_its_keys_pass_what_a_receiver_reads(void **state)
{
    (void)state;
    char key[4016];
    memset(key, 'a', 3985);
    memcpy(key + 3985, ";b;c;", 5);
    zf_tensor_frame_batch_out_t b = {0};
    unsigned added_n = 0;
    for (;;) {
        snprintf(key + 3990, 26, "k%09u", added_n % 1000000000u);
        bool added = false;
        ASSERT_OK(zf_tensor_frame_batch_out_add(&b, key, 1, NULL, true, 1024, &added));
        if (!added) break;
        added_n++;
    }
    assert_int_equal(added_n, ZF_TENSOR_FRAME_MAX_BATCH_HEADER / 4001);
    assert_int_equal(b.n, added_n);
    assert_true(b.head_len < 64 * (size_t)added_n);
    zf_tensor_frame_batch_prefix(b.n, (uint32_t)b.head_len, b.head);
    zf_tensor_frame_batch_t bt;
    ASSERT_OK(zf_tensor_frame_decode_batch(b.head, b.head_len, NULL, &bt));
    assert_int_equal(bt.n, (size_t)added_n);
    snprintf(key + 3990, 26, "k%09u", (added_n - 1) % 1000000000u);
    ASSERT_OK(bt.entries[added_n - 1].error);
    assert_string_equal(bt.entries[added_n - 1].key, key);
    zf_tensor_frame_batch_clear(&bt);
    zf_tensor_frame_batch_out_clear(&b);
}

/* The layout written by hand: two prefixes, keys made of them and their
 * own bytes, a dead entry, a scalar. */
static void test_batches_written_by_the_layout_decode_to_their_keys(void **state)
{
    (void)state;
    zf_test_batch_t hb;
    zf_test_batch_begin(&hb, 4);
    int64_t two = 2;
    /* "p1;" + "a": defines prefix 1 as "p1;" */
    zf_test_batch_add(&hb, &(zf_test_batch_entry_t){.flags = ZF_TEST_BATCH_NEW_PREFIX,
                                                    .dtype = ZF_INT32,
                                                    .rank = 1,
                                                    .dims = &two,
                                                    .key = "p1;a",
                                                    .plen = 3,
                                                    .step = 5,
                                                    .len = 8});
    zf_test_batch_add(
        &hb, &(zf_test_batch_entry_t){.flags = ZF_TEST_BATCH_NEW_PREFIX | ZF_TEST_BATCH_DEAD,
                                      .dtype = ZF_FLOAT,
                                      .key = "q2;;b",
                                      .plen = 4,
                                      .step = 6});
    zf_test_batch_add(&hb, &(zf_test_batch_entry_t){
                               .dtype = ZF_DOUBLE, .prefix = 1, .key = "c", .step = -7, .len = 8});
    zf_test_batch_add(&hb, &(zf_test_batch_entry_t){.dtype = ZF_INT8,
                                                    .prefix = 2,
                                                    .key = "dd",
                                                    .step = 8,
                                                    .len = 0,
                                                    .rank = 1,
                                                    .dims = (const int64_t[]){0}});
    uint8_t bytes[16] = {0};
    int32_t ints[2] = {-3, 40};
    double d = 2.5;
    memcpy(bytes, ints, 8);
    memcpy(bytes + 8, &d, 8);
    zf_buffer_t *payload = s_payload(bytes, sizeof bytes);
    zf_tensor_frame_batch_t bt;
    ASSERT_OK(zf_tensor_frame_decode_batch(hb.bytes, hb.len, payload, &bt));
    assert_int_equal(bt.n, 4);
    static const char *const keys[4] = {"p1;a", "q2;;b", "p1;c", "q2;;dd"};
    static const int64_t steps[4] = {5, 6, -7, 8};
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(bt.entries[i].error);
        assert_string_equal(bt.entries[i].key, keys[i]);
        assert_int_equal(bt.entries[i].step_id, steps[i]);
        assert_int_equal(bt.entries[i].is_dead, i == 1);
    }
    assert_memory_equal(zf_tensor_data(bt.entries[0].tensor), ints, 8);
    assert_null(bt.entries[1].tensor);
    assert_int_equal(zf_tensor_shape(bt.entries[2].tensor)->rank, 0);
    assert_true(*(const double *)zf_tensor_data(bt.entries[2].tensor) == 2.5);
    assert_int_equal(zf_tensor_num_elements(bt.entries[3].tensor), 0);
    zf_tensor_frame_batch_clear(&bt);
    zf_buffer_unref(&payload);
    zf_test_batch_free(&hb);
}

static void test_batch_payloads_are_laid_out_aligned_and_copied_when_they_are_not(void **state)
{
    (void)state;
    /* an int8 [3] and a float scalar: the second at offset 8, zeros between */
    zf_test_batch_t hb;
    zf_test_batch_begin(&hb, 2);
    zf_test_batch_vec(&hb, "a", 1, ZF_INT8, 3, 3);
    zf_test_batch_add(&hb,
                      &(zf_test_batch_entry_t){.dtype = ZF_FLOAT, .key = "b", .step = 1, .len = 4});
    static const uint8_t bytes[13] = {1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0x77};
    /* at an odd address, so the decoder copies it to align the views */
    zf_buffer_t *odd = NULL;
    ASSERT_OK(zf_buffer_new(sizeof bytes + 1, &odd));
    memcpy((uint8_t *)zf_buffer_data(odd) + 1, bytes, 12);
    zf_buffer_t *view = NULL;
    ASSERT_OK(zf_buffer_wrap((uint8_t *)zf_buffer_data(odd) + 1, 12, NULL, NULL, &view));
    zf_tensor_frame_batch_t bt;
    ASSERT_OK(zf_tensor_frame_decode_batch(hb.bytes, hb.len, view, &bt));
    assert_int_equal(bt.n, 2);
    ASSERT_OK(bt.entries[0].error);
    ASSERT_OK(bt.entries[1].error);
    assert_memory_equal(zf_tensor_data(bt.entries[0].tensor), bytes, 3);
    float one = 0;
    memcpy(&one, bytes + 8, 4);
    assert_true(*(const float *)zf_tensor_data(bt.entries[1].tensor) == one);
    assert_true(zf_tensor_data(bt.entries[0].tensor) !=
                (void *)((uint8_t *)zf_buffer_data(odd) + 1));
    zf_tensor_frame_batch_clear(&bt);
    zf_buffer_unref(&view);
    /* one byte too many or too few: the whole batch is refused */
    zf_buffer_t *p13 = s_payload(bytes, 13), *p11 = s_payload(bytes, 11);
    zf_test_expect_error(zf_tensor_frame_decode_batch(hb.bytes, hb.len, p13, &bt),
                         ZF_INVALID_ARGUMENT,
                         "tensor frame batch: the payloads end at byte 12 of 13");
    assert_null(bt.entries);
    zf_test_expect_error(zf_tensor_frame_decode_batch(hb.bytes, hb.len, p11, &bt),
                         ZF_INVALID_ARGUMENT,
                         "entry 1 of 2: its 4 bytes at offset 8 are past the end of the "
                         "payloads (11 bytes)");
    zf_buffer_unref(&p13);
    zf_buffer_unref(&p11);
    zf_buffer_unref(&odd);
    zf_test_batch_free(&hb);
}

static void test_a_bad_batch_entry_is_refused_alone_with_its_key_and_step(void **state)
{
    (void)state;
    zf_test_batch_t hb;
    zf_test_batch_begin(&hb, 7);
    zf_test_batch_vec(&hb, "good0", 7, ZF_FLOAT, 3, 12);
    zf_test_batch_vec(&hb, "bad-len", 8, ZF_FLOAT, 3, 16); /* float [3] is 12 */
    zf_test_batch_add(&hb, &(zf_test_batch_entry_t){.dtype = 250, .key = "bad-dtype", .step = 9});
    zf_test_batch_add(&hb, &(zf_test_batch_entry_t){
                               .flags = 0x80, .dtype = ZF_FLOAT, .key = "bad-flags", .step = 10});
    zf_test_batch_add(
        &hb, &(zf_test_batch_entry_t){.dtype = ZF_FLOAT, .prefix = 3, .key = "x", .step = 11});
    zf_test_batch_add(&hb, &(zf_test_batch_entry_t){
                               .dtype = ZF_FLOAT, .key = "nul\0x", .key_len = 5, .step = 12});
    zf_test_batch_vec(&hb, "good1", 7, ZF_FLOAT, 3, 12);
    float v[4 + 4 + 4 + 3] = {1, 2, 3, 0, 9, 9, 9, 9, 4, 5, 6, 0, 0, 0, 0};
    /* good0 at 0 (12), bad-len at 16 (16), the others at 32 (0), good1 at 32 */
    uint8_t bytes[44];
    memset(bytes, 0, sizeof bytes);
    memcpy(bytes, v, 12);
    memcpy(bytes + 16, v + 4, 16);
    memcpy(bytes + 32, v + 8, 12);
    zf_buffer_t *payload = s_payload(bytes, sizeof bytes);
    zf_tensor_frame_batch_t bt;
    ASSERT_OK(zf_tensor_frame_decode_batch(hb.bytes, hb.len, payload, &bt));
    zf_buffer_unref(&payload);
    assert_int_equal(bt.n, 7);
    ASSERT_OK(bt.entries[0].error);
    ASSERT_OK(bt.entries[6].error);
    assert_string_equal(bt.entries[0].key, "good0");
    assert_string_equal(bt.entries[6].key, "good1");
    assert_memory_equal(zf_tensor_data(bt.entries[6].tensor), v + 8, 12);
    static const char *const why[5] = {
        "entry 1 of 7: field 'len': 16 bytes declared but float32 [3] needs 12",
        "entry 2 of 7: field 'dtype': 250 is not a data type",
        "entry 3 of 7: flags 0x80 are unknown",
        "entry 4 of 7: key prefix 3 is used before it is defined (0 so far)",
        "entry 5 of 7: field 'key' contains a zero byte",
    };
    static const char *const keys[5] = {"bad-len", "bad-dtype", "bad-flags", NULL, NULL};
    for (int i = 1; i <= 5; i++) {
        zf_tensor_frame_entry_t *e = &bt.entries[i];
        zf_test_expect_error(e->error, ZF_INVALID_ARGUMENT, why[i - 1]);
        e->error = ZF_STATUS_OK;
        if (keys[i - 1])
            assert_string_equal(e->key, keys[i - 1]);
        else
            assert_null(e->key);
        assert_true(e->has_step);
        assert_int_equal(e->step_id, 7 + i);
        assert_null(e->tensor);
    }
    zf_tensor_frame_batch_clear(&bt);
    zf_test_batch_free(&hb);
}

/* An entry with the fields of the last view made (dtype, shape, length,
 * live) is made like it, without its checks; any other entry is checked
 * whole, and one with unknown flags or another shape is refused however
 * like the last it looks otherwise. */
static void test_batch_entries_like_the_last_view_are_views_at_their_own_offsets(void **state)
{
    (void)state;
    zf_test_batch_t hb;
    zf_test_batch_begin(&hb, 8);
    zf_test_batch_vec(&hb, "a", 1, ZF_FLOAT, 3, 12); /* at 0 */
    zf_test_batch_vec(&hb, "b", 1, ZF_FLOAT, 3, 12); /* at 16: like a */
    zf_test_batch_add(&hb, &(zf_test_batch_entry_t){.flags = 0x80,
                                                    .dtype = ZF_FLOAT,
                                                    .rank = 1,
                                                    .dims = (const int64_t[]){3},
                                                    .key = "c",
                                                    .step = 1,
                                                    .len = 12}); /* at 32, refused */
    zf_test_batch_vec(&hb, "d", 2, ZF_FLOAT, 4, 12);             /* at 48: float [4] is 16 */
    zf_test_batch_vec(&hb, "e", 1, ZF_INT32, 3, 12);             /* at 64: another dtype */
    zf_test_batch_add(&hb, &(zf_test_batch_entry_t){.flags = ZF_TEST_BATCH_DEAD,
                                                    .dtype = ZF_INT32,
                                                    .rank = 1,
                                                    .dims = (const int64_t[]){3},
                                                    .key = "f",
                                                    .step = 1}); /* dead, no bytes */
    zf_test_batch_vec(&hb, "g", 1, ZF_INT32, 3, 12);             /* at 80: like e */
    zf_test_batch_vec(&hb, "h", 3, ZF_FLOAT, 3, 12);             /* at 96: checked whole */
    int32_t w[28];
    for (int i = 0; i < 28; i++) w[i] = 1000 + i;
    zf_buffer_t *payload = s_payload(w, 108);
    zf_tensor_frame_batch_t bt;
    ASSERT_OK(zf_tensor_frame_decode_batch(hb.bytes, hb.len, payload, &bt));
    assert_int_equal(bt.n, 8);
    static const char *const keys[8] = {"a", "b", "c", "d", "e", "f", "g", "h"};
    static const int at[8] = {0, 16, -1, -1, 64, -1, 80, 96}; /* byte offsets; -1: none */
    static const zf_dtype_t dtypes[8] = {ZF_FLOAT, ZF_FLOAT, 0, 0, ZF_INT32, 0, ZF_INT32, ZF_FLOAT};
    for (int i = 0; i < 8; i++) {
        zf_tensor_frame_entry_t *e = &bt.entries[i];
        assert_string_equal(e->key, keys[i]);
        if (at[i] < 0) {
            assert_null(e->tensor);
            continue;
        }
        ASSERT_OK(e->error);
        assert_int_equal(zf_tensor_dtype(e->tensor), dtypes[i]);
        assert_int_equal(zf_tensor_shape(e->tensor)->rank, 1);
        assert_int_equal(zf_tensor_shape(e->tensor)->dims[0], 3);
        assert_int_equal(zf_tensor_nbytes(e->tensor), 12);
        /* a view of the payloads, at the entry's own offset */
        assert_ptr_equal(zf_tensor_data(e->tensor), (uint8_t *)zf_buffer_data(payload) + at[i]);
        assert_memory_equal(zf_tensor_data(e->tensor), w + at[i] / 4, 12);
    }
    zf_test_expect_error(bt.entries[2].error, ZF_INVALID_ARGUMENT,
                         "entry 2 of 8: flags 0x80 are unknown");
    zf_test_expect_error(bt.entries[3].error, ZF_INVALID_ARGUMENT,
                         "entry 3 of 8: field 'len': 12 bytes declared but float32 [4] needs 16");
    bt.entries[2].error = bt.entries[3].error = ZF_STATUS_OK;
    ASSERT_OK(bt.entries[5].error);
    assert_true(bt.entries[5].is_dead);
    zf_buffer_unref(&payload);
    /* the views outlive the batch and the caller's reference */
    zf_tensor_t *h = bt.entries[7].tensor;
    bt.entries[7].tensor = NULL;
    zf_tensor_frame_batch_clear(&bt);
    assert_memory_equal(zf_tensor_data(h), w + 24, 12);
    zf_tensor_unref(&h);
    zf_test_batch_free(&hb);
}

/* A prefix's bytes are checked once, when it is defined: one holding a
 * zero byte is refused with its entry, and the entries using it after. */
static void test_a_batch_key_prefix_holding_a_zero_byte_is_refused(void **state)
{
    (void)state;
    zf_test_batch_t hb;
    zf_test_batch_begin(&hb, 3);
    zf_test_batch_add(&hb, &(zf_test_batch_entry_t){.flags = ZF_TEST_BATCH_NEW_PREFIX,
                                                    .dtype = ZF_FLOAT,
                                                    .key = "p\0;a",
                                                    .key_len = 4,
                                                    .plen = 3,
                                                    .step = 1,
                                                    .len = 4});
    zf_test_batch_add(&hb, &(zf_test_batch_entry_t){
                               .dtype = ZF_FLOAT, .prefix = 1, .key = "b", .step = 1, .len = 4});
    zf_test_batch_add(&hb,
                      &(zf_test_batch_entry_t){.dtype = ZF_FLOAT, .key = "c", .step = 1, .len = 4});
    float v[5] = {1, 0, 2, 0, 3};
    zf_buffer_t *payload = s_payload(v, sizeof v);
    zf_tensor_frame_batch_t bt;
    ASSERT_OK(zf_tensor_frame_decode_batch(hb.bytes, hb.len, payload, &bt));
    zf_buffer_unref(&payload);
    assert_int_equal(bt.n, 3);
    zf_test_expect_error(bt.entries[0].error, ZF_INVALID_ARGUMENT,
                         "entry 0 of 3: a key prefix contains a zero byte");
    zf_test_expect_error(bt.entries[1].error, ZF_INVALID_ARGUMENT,
                         "entry 1 of 3: key prefix 1 is used before it is defined (0 so far)");
    bt.entries[0].error = bt.entries[1].error = ZF_STATUS_OK;
    assert_null(bt.entries[0].tensor);
    assert_null(bt.entries[1].tensor);
    ASSERT_OK(bt.entries[2].error);
    assert_string_equal(bt.entries[2].key, "c");
    assert_true(*(const float *)zf_tensor_data(bt.entries[2].tensor) == 3);
    zf_tensor_frame_batch_clear(&bt);
    zf_test_batch_free(&hb);
}

/* Prefixes that would make keys larger than a batch may hold, or a key
 * longer than any may be. */
static void test_batch_keys_are_bounded_however_they_are_made(void **state)
{
    (void)state;
    char *big = malloc(ZF_TENSOR_FRAME_MAX_KEY);
    assert_non_null(big);
    memset(big, 'p', ZF_TENSOR_FRAME_MAX_KEY);
    /* one 4000-byte prefix, then 4095 entries naming it: 4001 + 4095 * 4002
     * bytes of keys */
    zf_test_batch_t hb;
    zf_test_batch_begin(&hb, ZF_TENSOR_FRAME_MAX_BATCH);
    zf_test_batch_add(
        &hb, &(zf_test_batch_entry_t){.flags = ZF_TEST_BATCH_NEW_PREFIX | ZF_TEST_BATCH_DEAD,
                                      .key = big,
                                      .key_len = 4000,
                                      .plen = 4000});
    for (int i = 1; i < ZF_TENSOR_FRAME_MAX_BATCH; i++)
        zf_test_batch_add(
            &hb, &(zf_test_batch_entry_t){.flags = ZF_TEST_BATCH_DEAD, .prefix = 1, .key = "k"});
    zf_tensor_frame_batch_t bt;
    zf_test_expect_error(zf_tensor_frame_decode_batch(hb.bytes, hb.len, NULL, &bt),
                         ZF_INVALID_ARGUMENT,
                         "tensor frame batch: the keys take 16392191 bytes; a batch's may take "
                         "at most 4194304");
    assert_int_equal(bt.n, 0);
    zf_test_batch_free(&hb);
    /* a prefix and a key that add up past the longest key */
    zf_test_batch_begin(&hb, 2);
    zf_test_batch_add(
        &hb, &(zf_test_batch_entry_t){.flags = ZF_TEST_BATCH_NEW_PREFIX | ZF_TEST_BATCH_DEAD,
                                      .key = big,
                                      .key_len = 4000,
                                      .plen = 4000});
    zf_test_batch_add(
        &hb, &(zf_test_batch_entry_t){
                 .flags = ZF_TEST_BATCH_DEAD, .prefix = 1, .key = big, .key_len = 97, .step = 4});
    ASSERT_OK(zf_tensor_frame_decode_batch(hb.bytes, hb.len, NULL, &bt));
    ASSERT_OK(bt.entries[0].error);
    assert_int_equal(strlen(bt.entries[0].key), 4000);
    zf_test_expect_error(bt.entries[1].error, ZF_INVALID_ARGUMENT,
                         "entry 1 of 2: field 'key' is 4097 bytes; at most 4096 are allowed");
    bt.entries[1].error = ZF_STATUS_OK;
    assert_null(bt.entries[1].key);
    assert_int_equal(bt.entries[1].step_id, 4);
    zf_tensor_frame_batch_clear(&bt);
    zf_test_batch_free(&hb);
    free(big);
}

static void test_every_whole_batch_violation_is_named(void **state)
{
    (void)state;
    zf_tensor_frame_batch_t bt;
    zf_test_batch_t hb;
#define BAD(count, add, payload_len, msg)                                                          \
    do {                                                                                           \
        zf_test_batch_begin(&hb, count);                                                           \
        add;                                                                                       \
        static const uint8_t zeros[64];                                                            \
        zf_buffer_t *pl = s_payload(zeros, payload_len);                                           \
        zf_test_expect_error(zf_tensor_frame_decode_batch(hb.bytes, hb.len, pl, &bt),              \
                             ZF_INVALID_ARGUMENT, msg);                                            \
        assert_int_equal(bt.n, 0);                                                                 \
        assert_null(bt.entries);                                                                   \
        zf_buffer_unref(&pl);                                                                      \
        zf_test_batch_free(&hb);                                                                   \
    } while (0)
    BAD(0, (void)0, 0, "tensor frame batch: 0 entries; 1 to 4096 are allowed");
    BAD(4097, (void)0, 0, "tensor frame batch: 4097 entries; 1 to 4096 are allowed");
    BAD(0xffffffffu, (void)0, 0, "4294967295 entries; 1 to 4096 are allowed");
    BAD(2, zf_test_batch_vec(&hb, "k", 1, ZF_FLOAT, 1, 4), 4,
        "entry 1 of 2 runs past the end of the entries (49 bytes)"); /* the count says 2 */
    BAD(1, zf_test_batch_raw(&hb, "\0\1\1\0\5\0", 6), 0,
        "entry 0 of 1 runs past the end of the entries (22 bytes)"); /* fixed part cut short */
    BAD(1, (zf_test_batch_vec(&hb, "k", 1, ZF_FLOAT, 1, 4), zf_test_batch_raw(&hb, "xyz", 3)), 4,
        "3 bytes follow the last of 1 entries");
    BAD(1, zf_test_batch_vec(&hb, "k", 1, ZF_FLOAT, 2, 8), 4,
        "entry 0 of 1: its 8 bytes at offset 0 are past the end of the payloads (4 bytes)");
    /* a declared size near 2^64 cannot wrap the layout around */
    BAD(2,
        (zf_test_batch_vec(&hb, "a", 1, ZF_FLOAT, 1, 4),
         zf_test_batch_vec(&hb, "b", 1, ZF_FLOAT, 1, UINT64_MAX - 3)),
        16, "entry 1 of 2: its 18446744073709551612 bytes at offset 8 are past the end");
#undef BAD
    /* payloads past the cap, however well laid out */
    {
        int64_t n = ZF_TENSOR_FRAME_MAX_BATCH_PAYLOAD / 4 + 2;
        zf_test_batch_begin(&hb, 1);
        zf_test_batch_vec(&hb, "k", 1, ZF_FLOAT, n, (uint64_t)n * 4);
        zf_buffer_t *pl = NULL;
        ASSERT_OK(zf_buffer_new((size_t)n * 4, &pl));
        zf_test_expect_error(zf_tensor_frame_decode_batch(hb.bytes, hb.len, pl, &bt),
                             ZF_INVALID_ARGUMENT,
                             "tensor frame batch: the payloads take 4194312 bytes; a batch "
                             "carries at most 4194304");
        assert_int_equal(bt.n, 0);
        zf_buffer_unref(&pl);
        zf_test_batch_free(&hb);
    }
    /* not a batch at all: msgpack, or another layout version */
    static const uint8_t map[] = {0x82, 0xa1, 'v', 0x01, 0xa5, 'b', 'a', 't', 'c', 'h', 0x90};
    assert_false(zf_tensor_frame_is_batch(map, sizeof map));
    zf_test_expect_error(zf_tensor_frame_decode_batch(map, sizeof map, NULL, &bt),
                         ZF_INVALID_ARGUMENT,
                         "tensor frame batch: the frame does not start as a batch");
    /* batches of the earlier layouts, as older senders wrote them: named */
    static const struct {
        uint8_t bytes[16];
        size_t len;
        const char *why;
    } old[2] = {
        {{0x82, 0xa1, 'v', 0x01, 0xa5, 'b', 'a', 't', 'c', 'h', 0xdd, 0, 0, 0, 1},
         15,
         "tensor frame batch: layout 1 (msgpack headers, from a sender of an older release) is "
         "no longer read; this receiver reads layout 3"},
        {{0xc1, 'Z', 'B', 0x02, 1, 0, 0, 0}, /* entries and payloads in two frames */
         8,
         "tensor frame batch: layout 2 (two frames, from a sender of an older release) is no "
         "longer read; this receiver reads layout 3"},
    };
    for (int i = 0; i < 2; i++) {
        assert_true(zf_tensor_frame_is_batch(old[i].bytes, old[i].len));
        zf_test_expect_error(zf_tensor_frame_decode_batch(old[i].bytes, old[i].len, NULL, &bt),
                             ZF_INVALID_ARGUMENT, old[i].why);
    }
    static const uint8_t v4[] = {0xc1, 'Z', 'B', 0x04, 1, 0, 0, 0};
    assert_false(zf_tensor_frame_is_batch(v4, sizeof v4));
    static const uint8_t short_[] = {0xc1, 'Z', 'B'};
    assert_false(zf_tensor_frame_is_batch(short_, sizeof short_));
    /* a prefix that disagrees with where the entries end, or whose
     * reserved word is not zero */
    zf_test_batch_begin(&hb, 1);
    zf_test_batch_vec(&hb, "k", 1, ZF_FLOAT, 1, 4);
    hb.bytes[8]++;
    zf_test_expect_error(zf_tensor_frame_decode_batch(hb.bytes, hb.len, NULL, &bt),
                         ZF_INVALID_ARGUMENT,
                         "tensor frame batch: the prefix says the entries end at byte 50 "
                         "(reserved word 0); they end at byte 49");
    hb.bytes[8]--;
    hb.bytes[12] = 1;
    zf_test_expect_error(zf_tensor_frame_decode_batch(hb.bytes, hb.len, NULL, &bt),
                         ZF_INVALID_ARGUMENT, "(reserved word 1); they end at byte 49");
    zf_test_batch_free(&hb);
}

/* Where a received frame divides into entries and payloads, and every
 * way it can fail to. */
static void test_a_batch_frame_splits_at_its_aligned_payloads(void **state)
{
    (void)state;
    zf_test_batch_t hb;
    zf_test_batch_begin(&hb, 1);
    zf_test_batch_vec(&hb, "k", 1, ZF_FLOAT, 1, 4); /* entries end at byte 49 */
    static const float one = 1.0f;
    size_t entries = 0, at = 0;
    /* no payloads: the frame ends with the entries */
    ASSERT_OK(zf_tensor_frame_batch_split(hb.bytes, hb.len, &entries, &at));
    assert_int_equal(entries, 49);
    assert_int_equal(at, 49);
    /* cut inside the padding, or the entries' end past the frame */
    zf_test_expect_error(zf_tensor_frame_batch_split(hb.bytes, 48, &entries, &at),
                         ZF_INVALID_ARGUMENT,
                         "tensor frame batch: its entries end at byte 49 of a 48-byte frame");
    zf_test_batch_payloads(&hb, &one, sizeof one);
    assert_int_equal(hb.len, 60);
    ASSERT_OK(zf_tensor_frame_batch_split(hb.bytes, hb.len, &entries, &at));
    assert_int_equal(entries, 49);
    assert_int_equal(at, 56);
    zf_test_expect_error(zf_tensor_frame_batch_split(hb.bytes, 53, &entries, &at),
                         ZF_INVALID_ARGUMENT,
                         "the 53-byte frame ends between its entries (to byte 49) and its "
                         "payloads (from byte 56)");
    hb.bytes[51] = 7;
    zf_test_expect_error(zf_tensor_frame_batch_split(hb.bytes, hb.len, &entries, &at),
                         ZF_INVALID_ARGUMENT,
                         "tensor frame batch: byte 51 between the entries and the payloads is "
                         "not zero");
    assert_int_equal(entries, 0);
    static const uint8_t layout2[] = {0xc1, 'Z', 'B', 0x02, 1, 0, 0, 0};
    zf_test_expect_error(zf_tensor_frame_batch_split(layout2, sizeof layout2, &entries, &at),
                         ZF_INVALID_ARGUMENT, "layout 2 (two frames");
    zf_test_batch_free(&hb);
}

static void test_a_bad_batch_is_drained_and_the_socket_keeps_working(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    zf_test_batch_t hb;
    zf_test_batch_begin(&hb, 1);
    zf_test_batch_vec(&hb, "k", 1, ZF_FLOAT, 1, 4);
    void *sock = zf_socket_handle(l.push);
    /* its entries in a frame of their own, as layout 2 had them */
    assert_int_equal(zmq_send(sock, hb.bytes, hb.len, ZMQ_SNDMORE), (int)hb.len);
    assert_int_equal(zmq_send(sock, "1234", 4, 0), 4);
    s_expect_rejected(&l, "tensor frame batch: 2 frames; a batch is one");
    /* 5 bytes of payloads, 4 declared */
    zf_test_batch_payloads(&hb, "12345", 5);
    assert_int_equal(zmq_send(sock, hb.bytes, hb.len, 0), (int)hb.len);
    s_expect_rejected(&l, "tensor frame batch: the payloads end at byte 4 of 5");
    /* a batch of layout 2, two frames */
    hb.bytes[3] = 0x02;
    assert_int_equal(zmq_send(sock, hb.bytes, 49, ZMQ_SNDMORE), 49);
    assert_int_equal(zmq_send(sock, "1234", 4, 0), 4);
    s_expect_rejected(&l, "tensor frame batch: layout 2 (two frames, from a sender of an older "
                          "release) is no longer read; this receiver reads layout 3");
    zf_test_batch_free(&hb);
    s_link_close(&l);
}

/* ---- chunks --------------------------------------------------------------------- */

/* A link whose sockets use CurveZMQ keys from a fresh directory (*dir,
 * which the caller removes and frees). */
static void s_secure_link_open(s_link_t *l, char **dir)
{
    *dir = zf_test_tmpdir("zflow-chunk-keys");
    ASSERT_OK(zf_keygen_cluster(*dir));
    ASSERT_OK(zf_zctx_new(&l->ctx));
    ASSERT_OK(zf_zctx_set_keys(l->ctx, *dir, ZF_ROLE_EXECUTOR));
    ASSERT_OK(zf_socket_new(l->ctx, ZF_SOCKET_PULL, &l->pull));
    ASSERT_OK(zf_socket_new(l->ctx, ZF_SOCKET_PUSH, &l->push));
    ASSERT_OK(zf_socket_secure_server(l->pull, ZF_ROLE_EXECUTOR));
    ASSERT_OK(zf_socket_secure_client(l->push, ZF_ROLE_EXECUTOR));
    const char *ep = NULL;
    ASSERT_OK(zf_socket_bind(l->pull, "tcp://127.0.0.1:*", &ep));
    ASSERT_OK(zf_socket_connect(l->push, ep));
}

/* Receives the next message raw: its header decoded into *h, and the
 * sizes of the frames after it (at most cap) into sizes; returns how many
 * frames followed the header. */
static int s_recv_raw(zf_socket_t *pull, zf_tensor_frame_header_t *h, size_t *sizes, int cap)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    assert_true(zmq_msg_recv(&m, zf_socket_handle(pull), 0) >= 0);
    ASSERT_OK(zf_tensor_frame_decode_header(zmq_msg_data(&m), zmq_msg_size(&m), h));
    int n = 0;
    while (zmq_msg_more(&m)) {
        assert_true(zmq_msg_recv(&m, zf_socket_handle(pull), ZMQ_DONTWAIT) >= 0);
        if (n < cap) sizes[n] = zmq_msg_size(&m);
        n++;
    }
    zmq_msg_close(&m);
    return n;
}

static void test_large_tensors_travel_in_chunks_over_curve_and_arrive_whole(void **state)
{
    (void)state;
    char *dir = NULL;
    s_link_t l;
    s_secure_link_open(&l, &dir);
    assert_true(zf_socket_encrypts(l.push));
    assert_true(zf_socket_encrypts(l.pull));
    /* three chunks and 4 KiB: five frames in all */
    size_t nbytes = 3 * (size_t)ZF_TENSOR_FRAME_CURVE_CHUNK + 4096;
    zf_shape_t shape = ZF_SHAPE((int64_t)(nbytes / 4));
    zf_tensor_t *t = s_patterned(ZF_FLOAT, &shape, 11);
    ASSERT_OK(zf_tensor_frame_send(l.push, "big;0", 9, t, false));
    zf_tensor_frame_header_t h;
    size_t sizes[8] = {0};
    assert_int_equal(s_recv_raw(l.pull, &h, sizes, 8), 4);
    assert_int_equal(h.chunk, ZF_TENSOR_FRAME_CURVE_CHUNK);
    assert_int_equal(h.len, nbytes);
    for (int i = 0; i < 3; i++) assert_int_equal(sizes[i], ZF_TENSOR_FRAME_CURVE_CHUNK);
    assert_int_equal(sizes[3], 4096);
    /* the codec puts them back together, byte for byte */
    ASSERT_OK(zf_tensor_frame_send(l.push, "big;0", 10, t, false));
    zf_tensor_frame_t f;
    s_expect_frame(l.pull, "big;0", 10, t, &f);
    assert_false(f.zero_copy);
    zf_tensor_frame_clear(&f);
    /* exactly one chunk's worth goes whole, as do strings */
    zf_shape_t one = ZF_SHAPE(ZF_TENSOR_FRAME_CURVE_CHUNK / 4);
    zf_tensor_t *t1 = s_patterned(ZF_FLOAT, &one, 12);
    ASSERT_OK(zf_tensor_frame_send(l.push, "one;0", 11, t1, false));
    assert_int_equal(s_recv_raw(l.pull, &h, sizes, 8), 1);
    assert_int_equal(h.chunk, 0);
    assert_int_equal(sizes[0], ZF_TENSOR_FRAME_CURVE_CHUNK);
    zf_tensor_unref(&t1);
    s_link_close(&l);
    zf_test_rm_rf(dir);
    free(dir);
    /* without keys the same tensor is one frame */
    s_link_open(&l, "tcp://127.0.0.1:*");
    assert_false(zf_socket_encrypts(l.push));
    ASSERT_OK(zf_tensor_frame_send(l.push, "big;0", 12, t, false));
    assert_int_equal(s_recv_raw(l.pull, &h, sizes, 8), 1);
    assert_int_equal(h.chunk, 0);
    assert_int_equal(sizes[0], nbytes);
    s_link_close(&l);
    zf_tensor_unref(&t);
}

/* A chunked send that fails while it makes its frames (out of memory, by
 * the test hook) sends nothing: the next message arrives intact and alone,
 * not appended to half of the failed one, and no tensor reference stays. */
static void test_a_chunked_send_that_fails_midway_leaves_nothing_on_the_socket(void **state)
{
    (void)state;
    char *dir = NULL;
    s_link_t l;
    s_secure_link_open(&l, &dir);
    size_t nbytes = 3 * (size_t)ZF_TENSOR_FRAME_CURVE_CHUNK + 4096; /* four chunks */
    zf_shape_t shape = ZF_SHAPE((int64_t)(nbytes / 4));
    zf_tensor_t *big = s_patterned(ZF_FLOAT, &shape, 21), *small = NULL;
    ASSERT_OK(zf_tensor_new_scalar_int32(4242, &small));
    zf__tensor_frame_fail_chunk(3);
    zf_test_expect_error(zf_tensor_frame_send(l.push, "big;0", 5, big, false),
                         ZF_RESOURCE_EXHAUSTED,
                         "sending tensor 'big;0' (step 5): out of memory making chunk 3 of 4; "
                         "nothing was sent");
    assert_int_equal(zf_tensor_refcount(big), 1); /* the chunks made were let go */
    ASSERT_OK(zf_tensor_frame_send(l.push, "small;0", 6, small, false));
    zf_tensor_frame_header_t h;
    size_t sizes[8] = {0};
    assert_int_equal(s_recv_raw(l.pull, &h, sizes, 8), 1); /* the header and one payload */
    assert_string_equal(h.key, "small;0");
    assert_int_equal(h.step_id, 6);
    assert_int_equal(sizes[0], 4);
    /* nothing else is waiting, and a chunked send works again */
    zmq_msg_t m;
    zmq_msg_init(&m);
    assert_int_equal(zmq_msg_recv(&m, zf_socket_handle(l.pull), ZMQ_DONTWAIT), -1);
    assert_int_equal(errno, EAGAIN);
    zmq_msg_close(&m);
    ASSERT_OK(zf_tensor_frame_send(l.push, "big;0", 7, big, false));
    ASSERT_OK(zf_tensor_frame_send(l.push, "small;0", 8, small, false));
    zf_tensor_frame_t f;
    s_expect_frame(l.pull, "big;0", 7, big, &f);
    zf_tensor_frame_clear(&f);
    s_expect_frame(l.pull, "small;0", 8, small, &f);
    assert_int_equal(*(const int32_t *)zf_tensor_data(f.tensor), 4242);
    zf_tensor_frame_clear(&f);
    s_link_close(&l);
    zf_test_rm_rf(dir);
    free(dir);
    assert_int_equal(zf_tensor_refcount(big), 1);
    zf_tensor_unref(&big);
    zf_tensor_unref(&small);
}

/* Packs a tensor header map into pk; dims: rank of them. */
static void s_pack_entry(msgpack_packer *pk, const char *key, int64_t step, int dtype, int rank,
                         const int64_t *dims, bool dead, int64_t len)
{
    msgpack_pack_map(pk, 7);
    msgpack_pack_str_with_body(pk, "v", 1);
    msgpack_pack_int(pk, ZF_TENSOR_FRAME_VERSION);
    msgpack_pack_str_with_body(pk, "key", 3);
    msgpack_pack_str_with_body(pk, key, strlen(key));
    msgpack_pack_str_with_body(pk, "step", 4);
    msgpack_pack_int64(pk, step);
    msgpack_pack_str_with_body(pk, "dtype", 5);
    msgpack_pack_int(pk, dtype);
    msgpack_pack_str_with_body(pk, "shape", 5);
    msgpack_pack_array(pk, (size_t)rank);
    for (int i = 0; i < rank; i++) msgpack_pack_int64(pk, dims[i]);
    msgpack_pack_str_with_body(pk, "dead", 4);
    if (dead)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
    msgpack_pack_str_with_body(pk, "len", 3);
    msgpack_pack_int64(pk, len);
}

/* Packs a float [n] header declaring len bytes in chunks of chunk. */
static void s_pack_chunked(msgpack_sbuffer *sb, int64_t n, int64_t len, int64_t chunk)
{
    msgpack_sbuffer_init(sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    s_pack_entry(&pk, "c;0", 3, ZF_FLOAT, 1, &n, false, len);
    /* s_pack_entry wrote a map of 7: make it 8 and add "chunk" */
    assert_int_equal((uint8_t)sb->data[0], 0x87);
    sb->data[0] = (char)0x88;
    msgpack_pack_str_with_body(&pk, "chunk", 5);
    msgpack_pack_int64(&pk, chunk);
}

/* Sends the header in sb (destroyed here) and count chunks of the given
 * sizes, taken from a patterned buffer. */
static void s_send_chunks(s_link_t *l, msgpack_sbuffer *sb, const size_t *sizes, int count,
                          const uint8_t *bytes)
{
    void *sock = zf_socket_handle(l->push);
    assert_int_equal(zmq_send(sock, sb->data, sb->size, ZMQ_SNDMORE), (int)sb->size);
    msgpack_sbuffer_destroy(sb);
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        assert_int_equal(zmq_send(sock, bytes + at, sizes[i], i + 1 < count ? ZMQ_SNDMORE : 0),
                         (int)sizes[i]);
        at += sizes[i];
    }
}

static void test_chunk_streams_that_do_not_match_their_header_are_refused_whole(void **state)
{
    (void)state;
    s_link_t l;
    s_link_open(&l, "tcp://127.0.0.1:*");
    const int64_t c = ZF_TENSOR_FRAME_MIN_CHUNK, n = 37500,
                  len = 4 * n; /* 3 chunks, the last 18928 */
    zf_shape_t shape = ZF_SHAPE(n);
    zf_tensor_t *t = s_patterned(ZF_FLOAT, &shape, 13);
    const uint8_t *bytes = zf_tensor_data(t);
    static uint8_t spare[4 * 65536];
    msgpack_sbuffer sb;

    /* any socket takes a sound chunk stream */
    size_t good[3] = {(size_t)c, (size_t)c, (size_t)(len - 2 * c)};
    s_pack_chunked(&sb, n, len, c);
    s_send_chunks(&l, &sb, good, 3, bytes);
    zf_tensor_frame_t f;
    s_expect_frame(l.pull, "c;0", 3, t, &f);
    zf_tensor_frame_clear(&f);

    size_t short_mid[3] = {(size_t)c, (size_t)c - 4096, (size_t)(len - 2 * c) + 4096};
    s_pack_chunked(&sb, n, len, c);
    s_send_chunks(&l, &sb, short_mid, 3, bytes);
    s_expect_rejected(&l, "tensor 'c;0' (step 3): chunk 2 of 3 has 61440 bytes; expected 65536");

    size_t long_last[3] = {(size_t)c, (size_t)c, (size_t)c};
    s_pack_chunked(&sb, n, len, c);
    s_send_chunks(&l, &sb, long_last, 3, spare);
    s_expect_rejected(&l, "chunk 3 of 3 has 65536 bytes; expected 18928");

    s_pack_chunked(&sb, n, len, c);
    s_send_chunks(&l, &sb, good, 2, bytes);
    s_expect_rejected(&l, "the payload comes in 2 chunks but 150000 bytes in chunks of 65536 "
                          "make 3");

    size_t extra[4] = {(size_t)c, (size_t)c, (size_t)(len - 2 * c), 1};
    s_pack_chunked(&sb, n, len, c);
    s_send_chunks(&l, &sb, extra, 4, spare);
    s_expect_rejected(&l, "the payload comes in 4 chunks but 150000 bytes in chunks of 65536 "
                          "make 3");

    /* the header's own claims, before any chunk is looked at */
    s_pack_chunked(&sb, n, len, 1000);
    s_send_chunks(&l, &sb, good, 3, bytes);
    s_expect_rejected(&l, "tensor frame header: field 'chunk': 1000 bytes; a chunk has at least "
                          "65536");
    s_pack_chunked(&sb, n, len, len);
    s_send_chunks(&l, &sb, good, 1, bytes);
    s_expect_rejected(&l, "field 'chunk': 150000 bytes hold the whole 150000-byte payload; a "
                          "chunked one needs two chunks or more");
    s_pack_chunked(&sb, n, len, -1);
    s_send_chunks(&l, &sb, good, 3, bytes);
    s_expect_rejected(&l, "field 'chunk' is negative");
    /* 2^40 floats declared in 64 KiB chunks, one chunk sent: nothing is
     * allocated for the claim */
    int64_t huge = INT64_C(1) << 40;
    s_pack_chunked(&sb, huge, 4 * huge, c);
    s_send_chunks(&l, &sb, good, 1, bytes);
    s_expect_rejected(&l, "the payload comes in 1 chunks but 4398046511104 bytes in chunks of "
                          "65536 make 67108864");

    /* the checks on both sides */
    zf_tensor_frame_header_t h;
    ASSERT_OK(zf_tensor_frame_header_from_tensor("c;0", 3, t, false, &h));
    h.chunk = (uint64_t)c;
    ASSERT_OK(zf_tensor_frame_check_header(&h));
    h.is_dead = true;
    h.len = 0;
    zf_test_expect_error(zf_tensor_frame_check_header(&h), ZF_INVALID_ARGUMENT,
                         "field 'chunk': only the bytes of a live tensor of a fixed-size dtype "
                         "are sent in chunks");
    zf_tensor_unref(&t);
    s_link_close(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_fixed_size_dtype_round_trips_at_ranks_0_to_4_inproc),
        cmocka_unit_test(test_every_fixed_size_dtype_round_trips_at_ranks_0_to_4_over_tcp),
        cmocka_unit_test(test_empty_tensors_round_trip),
        cmocka_unit_test(test_dead_tensors_travel_without_payload),
        cmocka_unit_test(test_strings_and_resources_round_trip),
        cmocka_unit_test(test_inproc_sender_tensor_lives_until_the_receiver_drops_it),
        cmocka_unit_test(test_tcp_payload_is_sent_and_received_without_copying),
        cmocka_unit_test(test_received_tensor_outlives_its_socket_and_context),
        cmocka_unit_test(test_unaligned_small_payloads_are_copied_and_still_correct),
        cmocka_unit_test(test_payload_that_fails_to_send_releases_the_tensor),
        cmocka_unit_test(test_queued_tensors_are_released_when_the_socket_closes),
        cmocka_unit_test(test_header_encodes_and_decodes_at_the_limits),
        cmocka_unit_test(test_unknown_header_fields_are_ignored),
        cmocka_unit_test(test_every_header_violation_is_named),
        cmocka_unit_test(test_malformed_msgpack_is_rejected_before_msgpack_allocates),
        cmocka_unit_test(test_string_payloads_are_checked_element_by_element),
        cmocka_unit_test(test_bad_messages_are_drained_and_the_socket_keeps_working),
        cmocka_unit_test(test_recv_times_out_and_send_checks_its_arguments),
        cmocka_unit_test(test_ipc_offer_header_round_trips_through_the_codec_and_a_socket),
        cmocka_unit_test(test_shm_offer_header_round_trips_and_its_limits_are_named),
        cmocka_unit_test(test_replies_round_trip_and_are_not_taken_for_tensors),
        cmocka_unit_test(test_every_ipc_field_violation_is_named),
        cmocka_unit_test(test_every_reply_violation_is_named),
        cmocka_unit_test(test_offers_and_replies_with_a_payload_are_refused_and_drained),
        cmocka_unit_test(test_batches_carry_every_kind_of_tensor_over_a_socket),
        cmocka_unit_test(test_batch_keys_share_their_start),
        cmocka_unit_test(test_batches_written_by_the_layout_decode_to_their_keys),
        cmocka_unit_test(test_a_batch_stops_before_its_keys_pass_what_a_receiver_reads),
        cmocka_unit_test(test_batch_payloads_are_laid_out_aligned_and_copied_when_they_are_not),
        cmocka_unit_test(test_batch_keys_are_bounded_however_they_are_made),
        cmocka_unit_test(test_a_bad_batch_entry_is_refused_alone_with_its_key_and_step),
        cmocka_unit_test(test_batch_entries_like_the_last_view_are_views_at_their_own_offsets),
        cmocka_unit_test(test_a_batch_key_prefix_holding_a_zero_byte_is_refused),
        cmocka_unit_test(test_every_whole_batch_violation_is_named),
        cmocka_unit_test(test_a_batch_frame_splits_at_its_aligned_payloads),
        cmocka_unit_test(test_a_bad_batch_is_drained_and_the_socket_keeps_working),
        cmocka_unit_test(test_large_tensors_travel_in_chunks_over_curve_and_arrive_whole),
        cmocka_unit_test(test_a_chunked_send_that_fails_midway_leaves_nothing_on_the_socket),
        cmocka_unit_test(test_chunk_streams_that_do_not_match_their_header_are_refused_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
