/* Tests for common/tensor_bundle and common/crc32c: CRC32C against
 * published vectors, round trips of every storable dtype and shape, a
 * checkpoint built here byte by byte from TensorFlow's format (with a
 * bitwise CRC32C of its own) that the reader must restore and the writer
 * must reproduce exactly, and truncated, flipped and hostile files, which
 * must fail cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/tensor_bundle.h"
#include "kernel_test_util.h"

/* ---- helpers ------------------------------------------------------------------ */

/* CRC32C one bit at a time, independent of the table-driven one. */
static uint32_t s_crc_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static uint32_t s_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

typedef struct {
    uint8_t b[4096];
    size_t n;
} s_bytes_t;

static void s_add(s_bytes_t *out, const void *p, size_t n)
{
    assert_true(out->n + n <= sizeof out->b);
    memcpy(out->b + out->n, p, n);
    out->n += n;
}

#define S_ADD(out, ...)                                                                            \
    s_add((out), (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__}))

static void s_add_le32(s_bytes_t *out, uint32_t v)
{
    S_ADD(out, (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24));
}

/* A block's type byte (0) and masked CRC32C of block + type. */
static void s_add_trailer(s_bytes_t *out, size_t block_start)
{
    S_ADD(out, 0);
    uint32_t crc = s_crc_bitwise(0, out->b + block_start, out->n - block_start);
    s_add_le32(out, s_mask(crc));
}

static void s_write(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static uint8_t *s_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *buf = malloc(1 << 22);
    assert_non_null(buf);
    *n = fread(buf, 1, 1 << 22, f);
    fclose(f);
    return buf;
}

static zf_tstring_t s_key(const char *k)
{
    return (zf_tstring_t){strlen(k), (char *)k};
}

static void s_expect_code_in(zf_status_t s, const zf_code_t *codes, size_t n)
{
    bool ok = false;
    for (size_t i = 0; i < n; i++) ok = ok || s.code == codes[i];
    if (!ok) fail_msg("unexpected %s: %s", zf_code_name(s.code), zf_status_msg(&s));
    zf_status_clear(&s);
}

/* ---- CRC32C ---------------------------------------------------------------------- */

static void test_crc32c_gives_the_published_check_values(void **state)
{
    (void)state;
    assert_int_equal(zf_crc32c("123456789", 9), 0xe3069283u);
    uint8_t buf[32];
    memset(buf, 0, sizeof buf); /* RFC 3720, B.4 */
    assert_int_equal(zf_crc32c(buf, 32), 0x8a9136aau);
    memset(buf, 0xff, sizeof buf);
    assert_int_equal(zf_crc32c(buf, 32), 0x62a8ab43u);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
    assert_int_equal(zf_crc32c(buf, 32), 0x46dd794eu);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
    assert_int_equal(zf_crc32c(buf, 32), 0x113fdb5cu);
    assert_int_equal(zf_crc32c(NULL, 0), 0);
}

static void test_crc32c_extends_and_matches_a_bitwise_crc_at_every_length(void **state)
{
    (void)state;
    uint8_t buf[300];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 131u + 7u);
    for (size_t n = 0; n <= sizeof buf; n++) {
        uint32_t want = s_crc_bitwise(0, buf, n);
        assert_int_equal(zf_crc32c(buf, n), want);
        size_t cut = n / 3;
        assert_int_equal(zf_crc32c_extend(zf_crc32c(buf, cut), buf + cut, n - cut), want);
        /* from an odd start, so the 8-byte loop sees unaligned data */
        if (n > 0) assert_int_equal(zf_crc32c(buf + 1, n - 1), s_crc_bitwise(0, buf + 1, n - 1));
    }
}

static void test_crc32c_mask_is_tensorflows_and_unmasks(void **state)
{
    (void)state;
    assert_int_equal(zf_crc32c_mask(0), 0xa282ead8u);
    for (uint32_t c = 1; c < 0xf0000000u; c = c * 3u + 0x1234567u) {
        assert_int_equal(zf_crc32c_mask(c), s_mask(c));
        assert_int_equal(zf_crc32c_unmask(zf_crc32c_mask(c)), c);
    }
}

/* ---- round trips ----------------------------------------------------------------- */

static void test_round_trip_of_every_dtype_and_shape(void **state)
{
    (void)state;
    char *dir = zf_test_tmpdir("zflow-bundle"), prefix[256];
    snprintf(prefix, sizeof prefix, "%s/sub/model.ckpt-7", dir); /* sub/ is created */
    const char *strs[] = {"", "a", "hello, world",
                          "\xff"
                          "z"};
    zf_tensor_t *ts[] = {
        KT_F32(ZF_SHAPE(2, 3), 1, -2, 3.5f, 0, -0.0f, 1e30f),
        KT_F64(zf_shape_scalar(), 3.141592653589793),
        KT_I32(ZF_SHAPE(4), 1, -1, 2147483647, -2147483647 - 1),
        KT_I64(ZF_SHAPE(1, 1, 2), INT64_MAX, INT64_MIN),
        KT_BOOL(ZF_SHAPE(3), true, false, true),
        kt_strings(ZF_SHAPE(2, 2), strs),
        kt_strings(zf_shape_scalar(), strs + 2),
        kt_zeros(ZF_FLOAT, ZF_SHAPE(0, 4)),
        kt_zeros(ZF_STRING, ZF_SHAPE(0)),
        kt_zeros(ZF_INT64, zf_shape_scalar()),
        kt_zeros(ZF_UINT8, ZF_SHAPE(5)),
        kt_zeros(ZF_HALF, ZF_SHAPE(2)),
    };
    enum { N = sizeof ts / sizeof ts[0] };
    const char *names[N] = {"layer/kernel", "pi",    "ints",    "longs", "flags", "words",
                            "word",         "empty", "nowords", "step",  "bytes", "halves"};
    zf_tstring_t keys[N];
    for (int i = 0; i < N; i++) keys[i] = s_key(names[i]);
    ASSERT_OK(zf_bundle_write(prefix, keys, (const zf_tensor_t *const *)ts, N));

    zf_bundle_reader_t *r = NULL;
    ASSERT_OK(zf_bundle_reader_open(prefix, &r));
    assert_int_equal(zf_bundle_reader_num_shards(r), 1);
    assert_int_equal(zf_bundle_reader_num_keys(r), N);
    for (size_t i = 1; i < N; i++) /* sorted */
        assert_true(strcmp(zf_bundle_reader_key(r, i - 1, NULL), zf_bundle_reader_key(r, i, NULL)) <
                    0);
    for (int i = 0; i < N; i++) {
        zf_tensor_t *back = NULL;
        ASSERT_OK(zf_bundle_reader_lookup(r, names[i], strlen(names[i]), &back));
        if (!zf_tensor_equal(back, ts[i])) fail_msg("tensor %s changed", names[i]);
        zf_tensor_unref(&back);
    }
    zf_tensor_t *none = NULL;
    zf_test_expect_error(zf_bundle_reader_lookup(r, "nope", 4, &none), ZF_NOT_FOUND,
                         "Key nope not found in checkpoint");
    zf_test_expect_error(zf_bundle_reader_lookup(r, "", 0, &none), ZF_NOT_FOUND, NULL);
    zf_bundle_reader_destroy(&r);
    kt_unref_all(ts, N);
    zf_test_rm_rf(dir);
    free(dir);
}

/* Keys long enough to fill several 256 KiB data blocks: the index block
 * then holds separators, and every key is still found. */
static void test_round_trip_across_several_data_blocks(void **state)
{
    (void)state;
    char *dir = zf_test_tmpdir("zflow-bundle"), prefix[256];
    snprintf(prefix, sizeof prefix, "%s/big", dir);
    enum { N = 400, KLEN = 2000 };
    char **names = calloc(N, sizeof *names);
    zf_tstring_t *keys = calloc(N, sizeof *keys);
    zf_tensor_t **ts = calloc(N, sizeof *ts);
    assert_true(names && keys && ts);
    for (int i = 0; i < N; i++) {
        names[i] = malloc(KLEN + 1);
        assert_non_null(names[i]);
        memset(names[i], 'a' + i % 26, KLEN);
        snprintf(names[i], 8, "%05d", (i * 7919) % N); /* out of order */
        names[i][5] = '/';
        names[i][KLEN] = '\0';
        keys[i] = s_key(names[i]);
        ts[i] = KT_I32(ZF_SHAPE(2), i, -i);
    }
    ASSERT_OK(zf_bundle_write(prefix, keys, (const zf_tensor_t *const *)ts, N));
    zf_bundle_reader_t *r = NULL;
    ASSERT_OK(zf_bundle_reader_open(prefix, &r));
    assert_int_equal(zf_bundle_reader_num_keys(r), N);
    for (int i = 0; i < N; i++) {
        zf_tensor_t *back = NULL;
        ASSERT_OK(zf_bundle_reader_lookup(r, names[i], KLEN, &back));
        assert_true(zf_tensor_equal(back, ts[i]));
        zf_tensor_unref(&back);
    }
    zf_bundle_reader_destroy(&r);
    size_t len = 0;
    char path[300];
    snprintf(path, sizeof path, "%s.index", prefix);
    uint8_t *index = s_read(path, &len);
    assert_true(len > 3 * 262144); /* prefix compression leaves the keys' tails */
    free(index);
    for (int i = 0; i < N; i++) free(names[i]);
    kt_unref_all(ts, N);
    free(names);
    free(keys);
    free(ts);
    zf_test_rm_rf(dir);
    free(dir);
}

static void test_write_refuses_duplicate_and_empty_keys(void **state)
{
    (void)state;
    char *dir = zf_test_tmpdir("zflow-bundle"), prefix[256];
    snprintf(prefix, sizeof prefix, "%s/dup", dir);
    zf_tensor_t *ts[2] = {KT_F32(ZF_SHAPE(1), 1), KT_F32(ZF_SHAPE(1), 2)};
    zf_tstring_t keys[2] = {s_key("a"), s_key("a")};
    zf_test_expect_error(zf_bundle_write(prefix, keys, (const zf_tensor_t *const *)ts, 2),
                         ZF_INVALID_ARGUMENT, "Adding duplicate key: a");
    keys[1] = s_key("");
    zf_test_expect_error(zf_bundle_write(prefix, keys, (const zf_tensor_t *const *)ts, 2),
                         ZF_INVALID_ARGUMENT, "empty");
    char path[300];
    snprintf(path, sizeof path, "%s.index", prefix);
    assert_int_not_equal(access(path, F_OK), 0); /* nothing left behind */
    kt_unref_all(ts, 2);
    zf_test_rm_rf(dir);
    free(dir);
}

/* ---- a checkpoint built by hand ---------------------------------------------------- */

/* The bundle TensorFlow writes for SaveV2 of "wb" = "hi" (a string scalar)
 * then "w" = [1, 2] (float): the data file holds the tensors in that order,
 * the index its keys sorted ("", "w", "wb") in one data block. */
typedef struct {
    s_bytes_t index, data;
} s_hand_t;

static void s_hand_build(s_hand_t *h)
{
    memset(h, 0, sizeof *h);
    /* data: "wb" = varint 2, masked CRC of the length as a uint32, "hi" */
    uint32_t len_crc = s_crc_bitwise(0, (const uint8_t[]){2, 0, 0, 0}, 4);
    S_ADD(&h->data, 2);
    s_add_le32(&h->data, s_mask(len_crc));
    S_ADD(&h->data, 'h', 'i');
    uint32_t wb_crc = s_crc_bitwise(len_crc, h->data.b + 1, 4);
    wb_crc = s_crc_bitwise(wb_crc, (const uint8_t *)"hi", 2);
    /* then "w" = 1.0f, 2.0f */
    S_ADD(&h->data, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40);
    uint32_t w_crc = s_crc_bitwise(0, h->data.b + 7, 8);

    /* BundleHeaderProto {num_shards: 1, version {producer: 1}} */
    const uint8_t header[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
    /* BundleEntryProto {dtype: DT_FLOAT, shape {dim {size: 2}}, offset: 7,
     * size: 8, crc32c} */
    s_bytes_t w = {.n = 0};
    S_ADD(&w, 0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02, 0x20, 0x07, 0x28, 0x08, 0x35);
    s_add_le32(&w, s_mask(w_crc));
    /* {dtype: DT_STRING, shape {}, size: 7, crc32c} */
    s_bytes_t wb = {.n = 0};
    S_ADD(&wb, 0x08, 0x07, 0x12, 0x00, 0x28, 0x07, 0x35);
    s_add_le32(&wb, s_mask(wb_crc));

    s_bytes_t *x = &h->index;
    /* data block: shared, non-shared, value length, key delta, value */
    S_ADD(x, 0, 0, (uint8_t)sizeof header);
    s_add(x, header, sizeof header);
    S_ADD(x, 0, 1, (uint8_t)w.n, 'w');
    s_add(x, w.b, w.n);
    S_ADD(x, 1, 1, (uint8_t)wb.n, 'b'); /* shares "w" */
    s_add(x, wb.b, wb.n);
    s_add_le32(x, 0); /* restart points: [0] */
    s_add_le32(x, 1);
    size_t data_block_size = x->n;
    s_add_trailer(x, 0);
    /* metaindex block: empty */
    size_t meta_off = x->n;
    s_add_le32(x, 0);
    s_add_le32(x, 1);
    s_add_trailer(x, meta_off);
    /* index block: "x" (the short successor of "wb") -> handle of the data block */
    size_t index_off = x->n;
    S_ADD(x, 0, 1, 2, 'x', 0, (uint8_t)data_block_size);
    s_add_le32(x, 0);
    s_add_le32(x, 1);
    size_t index_size = x->n - index_off;
    s_add_trailer(x, index_off);
    /* footer: two handles, padding to 40 bytes, the magic number */
    size_t footer = x->n;
    assert_true(meta_off < 128 && index_off < 128);
    S_ADD(x, (uint8_t)meta_off, 8, (uint8_t)index_off, (uint8_t)index_size);
    while (x->n < footer + 40) S_ADD(x, 0);
    S_ADD(x, 0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb);
}

static void s_hand_files(const s_hand_t *h, const char *prefix)
{
    char path[300];
    snprintf(path, sizeof path, "%s.index", prefix);
    s_write(path, h->index.b, h->index.n);
    snprintf(path, sizeof path, "%s.data-00000-of-00001", prefix);
    s_write(path, h->data.b, h->data.n);
}

static void test_reads_a_checkpoint_built_by_hand_to_the_format(void **state)
{
    (void)state;
    s_hand_t h;
    s_hand_build(&h);
    assert_int_equal(h.index.n, 138);
    char *dir = zf_test_tmpdir("zflow-bundle"), prefix[256];
    snprintf(prefix, sizeof prefix, "%s/hand", dir);
    s_hand_files(&h, prefix);
    zf_bundle_reader_t *r = NULL;
    ASSERT_OK(zf_bundle_reader_open(prefix, &r));
    assert_int_equal(zf_bundle_reader_num_keys(r), 2);
    assert_string_equal(zf_bundle_reader_key(r, 0, NULL), "w");
    assert_string_equal(zf_bundle_reader_key(r, 1, NULL), "wb");
    zf_bundle_entry_t e;
    ASSERT_OK(zf_bundle_reader_entry(r, "w", 1, &e));
    assert_int_equal(e.dtype, ZF_FLOAT);
    assert_int_equal(e.offset, 7);
    assert_int_equal(e.size, 8);
    zf_tensor_t *w = NULL, *wb = NULL;
    ASSERT_OK(zf_bundle_reader_lookup(r, "w", 1, &w));
    KT_EXPECT_NEAR(w, ZF_SHAPE(2), 0, 1, 2);
    ASSERT_OK(zf_bundle_reader_lookup(r, "wb", 2, &wb));
    kt_expect_shape(wb, zf_shape_scalar());
    const zf_tstring_t *str = zf_tensor_string(wb, 0);
    assert_int_equal(str->len, 2);
    assert_memory_equal(str->data, "hi", 2);
    zf_tensor_unref(&w);
    zf_tensor_unref(&wb);
    zf_bundle_reader_destroy(&r);
    zf_test_rm_rf(dir);
    free(dir);
}

static void test_writes_the_hand_built_checkpoint_byte_for_byte(void **state)
{
    (void)state;
    s_hand_t h;
    s_hand_build(&h);
    char *dir = zf_test_tmpdir("zflow-bundle"), prefix[256], path[300];
    snprintf(prefix, sizeof prefix, "%s/ours", dir);
    const char *hi[] = {"hi"};
    zf_tensor_t *ts[2] = {kt_strings(zf_shape_scalar(), hi), KT_F32(ZF_SHAPE(2), 1, 2)};
    zf_tstring_t keys[2] = {s_key("wb"), s_key("w")};
    ASSERT_OK(zf_bundle_write(prefix, keys, (const zf_tensor_t *const *)ts, 2));
    size_t n = 0;
    snprintf(path, sizeof path, "%s.index", prefix);
    uint8_t *got = s_read(path, &n);
    assert_int_equal(n, h.index.n);
    assert_memory_equal(got, h.index.b, n);
    free(got);
    snprintf(path, sizeof path, "%s.data-00000-of-00001", prefix);
    got = s_read(path, &n);
    assert_int_equal(n, h.data.n);
    assert_memory_equal(got, h.data.b, n);
    free(got);
    /* only the two files: the temporary names were renamed away */
    DIR *d = opendir(dir);
    int files = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) files += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(files, 2);
    kt_unref_all(ts, 2);
    zf_test_rm_rf(dir);
    free(dir);
}

/* ---- corrupt and hostile files ----------------------------------------------------- */

static void test_every_truncation_of_an_index_is_data_loss(void **state)
{
    (void)state;
    s_hand_t h;
    s_hand_build(&h);
    const zf_code_t codes[] = {ZF_DATA_LOSS};
    for (size_t len = 0; len < h.index.n; len++) {
        zf_bundle_reader_t *r = NULL;
        zf_status_t s = zf_bundle_reader_open_index("/nonexistent/t", h.index.b, len, &r);
        assert_null(r);
        if (zf_ok(s)) fail_msg("a %zu-byte truncation opened", len);
        if (!strstr(zf_status_msg(&s), "/nonexistent/t.index"))
            fail_msg("message does not name the file: %s", zf_status_msg(&s));
        s_expect_code_in(s, codes, 1);
    }
}

static void test_flipped_bytes_fail_cleanly_or_restore_the_same(void **state)
{
    (void)state;
    s_hand_t h;
    s_hand_build(&h);
    char *dir = zf_test_tmpdir("zflow-bundle"), prefix[256];
    snprintf(prefix, sizeof prefix, "%s/flip", dir);
    s_hand_files(&h, prefix);
    const zf_code_t codes[] = {ZF_DATA_LOSS, ZF_INVALID_ARGUMENT, ZF_UNIMPLEMENTED, ZF_NOT_FOUND};
    const uint8_t masks[] = {0x01, 0x80, 0xff};
    int opened = 0;
    for (size_t i = 0; i < h.index.n; i++) {
        for (size_t m = 0; m < sizeof masks; m++) {
            s_bytes_t bad = h.index;
            bad.b[i] ^= masks[m];
            zf_bundle_reader_t *r = NULL;
            zf_status_t s = zf_bundle_reader_open_index(prefix, bad.b, bad.n, &r);
            if (!zf_ok(s)) {
                s_expect_code_in(s, codes, 4);
                continue;
            }
            /* Only the footer's padding is outside every checksum, and
             * the index handle's last byte 0x0e with its top bit set,
             * followed by padding, is a longer encoding of the same 14. */
            opened++;
            bool same_handle = i == h.index.n - 45 && masks[m] == 0x80;
            if (!same_handle && (i < h.index.n - 44 || i >= h.index.n - 8))
                fail_msg("flipping byte %zu with %#x went unnoticed", i, masks[m]);
            zf_tensor_t *t = NULL;
            ASSERT_OK(zf_bundle_reader_lookup(r, "w", 1, &t));
            zf_tensor_unref(&t);
            zf_bundle_reader_destroy(&r);
        }
    }
    assert_int_equal(opened, 36 * 3 + 1);
    zf_test_rm_rf(dir);
    free(dir);
}

static void test_corrupt_tensor_bytes_are_data_loss(void **state)
{
    (void)state;
    s_hand_t h;
    s_hand_build(&h);
    char *dir = zf_test_tmpdir("zflow-bundle"), prefix[256], path[300];
    snprintf(prefix, sizeof prefix, "%s/bad", dir);
    s_hand_files(&h, prefix);
    snprintf(path, sizeof path, "%s.data-00000-of-00001", prefix);
    zf_bundle_reader_t *r = NULL;
    ASSERT_OK(zf_bundle_reader_open(prefix, &r));
    zf_tensor_t *t = NULL;
    const zf_code_t codes[] = {ZF_DATA_LOSS};
    for (size_t i = 0; i < h.data.n; i++) { /* every flip of the data file */
        s_bytes_t bad = h.data;
        bad.b[i] ^= 0x10;
        s_write(path, bad.b, bad.n);
        zf_status_t s = zf_bundle_reader_lookup(r, i < 7 ? "wb" : "w", i < 7 ? 2 : 1, &t);
        assert_null(t);
        s_expect_code_in(s, codes, 1);
    }
    s_write(path, h.data.b, 11); /* truncated */
    zf_test_expect_error(zf_bundle_reader_lookup(r, "w", 1, &t), ZF_DATA_LOSS, path);
    s_write(path, h.data.b, h.data.n);
    ASSERT_OK(zf_bundle_reader_lookup(r, "w", 1, &t));
    zf_tensor_unref(&t);
    zf_bundle_reader_destroy(&r);
    zf_test_rm_rf(dir);
    free(dir);
}

static void test_bad_magic_and_missing_index_name_the_file(void **state)
{
    (void)state;
    s_hand_t h;
    s_hand_build(&h);
    h.index.b[h.index.n - 1] ^= 1;
    zf_bundle_reader_t *r = NULL;
    zf_test_expect_error(zf_bundle_reader_open_index("/x/ckpt", h.index.b, h.index.n, &r),
                         ZF_DATA_LOSS,
                         "/x/ckpt.index is corrupt: not an sstable (bad magic number)");
    zf_test_expect_error(zf_bundle_reader_open("/nonexistent/ckpt", &r), ZF_NOT_FOUND,
                         "/nonexistent/ckpt.index");
    assert_null(r);
}

/* Entries that lie: a shard past the header's count, a shape of absurd size,
 * a string count larger than the bytes. */
static void test_hostile_entries_are_refused_without_allocating(void **state)
{
    (void)state;
    zf_bundle_entry_t e = {.dtype = ZF_FLOAT, .shape = ZF_SHAPE(1000000, 1000000), .size = 8};
    zf_tensor_t *t = NULL;
    uint8_t bytes[8] = {0};
    zf_test_expect_error(zf_bundle_decode_tensor(&e, bytes, 8, "k", &t), ZF_DATA_LOSS,
                         "Invalid size in bundle entry");
    e = (zf_bundle_entry_t){.dtype = ZF_STRING, .shape = ZF_SHAPE(1000000, 1000000), .size = 8};
    zf_test_expect_error(zf_bundle_decode_tensor(&e, bytes, 8, "k", &t), ZF_DATA_LOSS, NULL);
    e = (zf_bundle_entry_t){.dtype = ZF_STRING, .shape = ZF_SHAPE(1), .size = 8};
    uint8_t huge[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}; /* a 2^56 length */
    zf_test_expect_error(zf_bundle_decode_tensor(&e, huge, 8, "k", &t), ZF_DATA_LOSS, NULL);
    e = (zf_bundle_entry_t){.dtype = ZF_RESOURCE, .shape = ZF_SHAPE(1), .size = 8};
    zf_test_expect_error(zf_bundle_decode_tensor(&e, bytes, 8, "k", &t), ZF_UNIMPLEMENTED, NULL);
    assert_null(t);
}

/* ---- merging ---------------------------------------------------------------------------- */

static void test_merge_joins_bundles_and_renumbers_their_shards(void **state)
{
    (void)state;
    char *dir = zf_test_tmpdir("zflow-bundle"), a[256], b[256], dest[256], path[300];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    snprintf(dest, sizeof dest, "%s/merged", dir);
    zf_tensor_t *ts[2] = {KT_F32(ZF_SHAPE(1), 1), KT_I64(ZF_SHAPE(2), 2, 3)};
    zf_tstring_t ka = s_key("z"), kb = s_key("m");
    ASSERT_OK(zf_bundle_write(a, &ka, (const zf_tensor_t *const *)ts, 1));
    ASSERT_OK(zf_bundle_write(b, &kb, (const zf_tensor_t *const *)ts + 1, 1));
    const char *srcs[2] = {a, b};
    ASSERT_OK(zf_bundle_merge(srcs, 2, dest, false));
    zf_bundle_reader_t *r = NULL;
    ASSERT_OK(zf_bundle_reader_open(dest, &r));
    assert_int_equal(zf_bundle_reader_num_shards(r), 2);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_bundle_reader_lookup(r, "z", 1, &t));
    assert_true(zf_tensor_equal(t, ts[0]));
    zf_tensor_unref(&t);
    ASSERT_OK(zf_bundle_reader_lookup(r, "m", 1, &t));
    assert_true(zf_tensor_equal(t, ts[1]));
    zf_tensor_unref(&t);
    zf_bundle_reader_destroy(&r);
    snprintf(path, sizeof path, "%s.data-00001-of-00002", dest);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s.index", a);
    assert_int_not_equal(access(path, F_OK), 0); /* the old index is gone */
    /* a key in two bundles */
    ASSERT_OK(zf_bundle_write(a, &ka, (const zf_tensor_t *const *)ts, 1));
    ASSERT_OK(zf_bundle_write(b, &ka, (const zf_tensor_t *const *)ts, 1));
    zf_test_expect_error(zf_bundle_merge(srcs, 2, dest, false), ZF_INVALID_ARGUMENT,
                         "Duplicate tensor keyed by z encountered, when merging prefix");
    /* allow_missing skips a prefix without an index, but not all of them */
    char gone[300];
    snprintf(gone, sizeof gone, "%s/gone", dir);
    const char *with_gone[2] = {gone, a};
    zf_test_expect_error(zf_bundle_merge(with_gone, 2, dest, false), ZF_NOT_FOUND, "gone.index");
    ASSERT_OK(zf_bundle_merge(with_gone, 2, dest, true));
    ASSERT_OK(zf_bundle_reader_open(dest, &r));
    assert_int_equal(zf_bundle_reader_num_keys(r), 1);
    zf_bundle_reader_destroy(&r);
    zf_test_expect_error(zf_bundle_merge(with_gone, 1, dest, true), ZF_NOT_FOUND, "none of");
    /* a bundle without tensors adds no shard: the merged one stays readable */
    char none[300];
    snprintf(none, sizeof none, "%s/none", dir);
    ASSERT_OK(zf_bundle_write(none, NULL, NULL, 0));
    ASSERT_OK(zf_bundle_write(a, &ka, (const zf_tensor_t *const *)ts, 1));
    const char *with_none[2] = {none, a};
    ASSERT_OK(zf_bundle_merge(with_none, 2, dest, false));
    ASSERT_OK(zf_bundle_reader_open(dest, &r));
    assert_int_equal(zf_bundle_reader_num_shards(r), 1);
    ASSERT_OK(zf_bundle_reader_lookup(r, "z", 1, &t));
    assert_true(zf_tensor_equal(t, ts[0]));
    zf_tensor_unref(&t);
    zf_bundle_reader_destroy(&r);
    kt_unref_all(ts, 2);
    zf_test_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_gives_the_published_check_values),
        cmocka_unit_test(test_crc32c_extends_and_matches_a_bitwise_crc_at_every_length),
        cmocka_unit_test(test_crc32c_mask_is_tensorflows_and_unmasks),
        cmocka_unit_test(test_round_trip_of_every_dtype_and_shape),
        cmocka_unit_test(test_round_trip_across_several_data_blocks),
        cmocka_unit_test(test_write_refuses_duplicate_and_empty_keys),
        cmocka_unit_test(test_reads_a_checkpoint_built_by_hand_to_the_format),
        cmocka_unit_test(test_writes_the_hand_built_checkpoint_byte_for_byte),
        cmocka_unit_test(test_every_truncation_of_an_index_is_data_loss),
        cmocka_unit_test(test_flipped_bytes_fail_cleanly_or_restore_the_same),
        cmocka_unit_test(test_corrupt_tensor_bytes_are_data_loss),
        cmocka_unit_test(test_bad_magic_and_missing_index_name_the_file),
        cmocka_unit_test(test_hostile_entries_are_refused_without_allocating),
        cmocka_unit_test(test_merge_joins_bundles_and_renumbers_their_shards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
