/* Tests for common/npy: NumPy .npy reading and writing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/npy.h"
#include "test_util.h"

/* An .npy image: magic, version major.0, header length, dict + "\n", data. */
static size_t s_build(uint8_t *out, int major, const char *dict, const void *data, size_t len)
{
    size_t hsize = major == 1 ? 2 : 4, dlen = strlen(dict) + 1, at = 0;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (uint8_t)major;
    out[7] = 0;
    for (size_t i = 0; i < hsize; i++) out[8 + i] = (uint8_t)(dlen >> (8 * i));
    at = 8 + hsize;
    memcpy(out + at, dict, dlen - 1);
    at += dlen - 1;
    out[at++] = '\n';
    if (len) memcpy(out + at, data, len);
    return at + len;
}

static zf_status_t s_read_built(int major, const char *dict, const void *data, size_t len,
                                zf_tensor_t **out)
{
    uint8_t buf[4096];
    size_t n = s_build(buf, major, dict, data, len);
    return zf_npy_read_mem(buf, n, out);
}

/* The header NumPy writes, built by hand: dict, 21 - digits(shape[0]) spaces
 * of room to grow (none for scalars), spaces to a 64-byte boundary, "\n". */
static size_t s_expected_header(const char *dict, int first_dim_digits, uint8_t *out)
{
    size_t len = strlen(dict) + (first_dim_digits > 0 ? 21 - (size_t)first_dim_digits : 0);
    size_t total = 10 + len + 1;
    total = (total / 64 + 1) * 64;
    memset(out, ' ', total);
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)((total - 10) & 0xff);
    out[9] = (uint8_t)((total - 10) >> 8);
    memcpy(out + 10, dict, strlen(dict));
    out[total - 1] = '\n';
    return total;
}

static char *s_temp_path(void)
{
    char *path = strdup("/tmp/zflow_test_npy_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    return path;
}

/* ---- writing ------------------------------------------------------------ */

static void test_npy_writes_numpy_header_byte_for_byte(void **state)
{
    (void)state;
    const float v[6] = {1, 2, 3, 4, 5, 6};
    zf_shape_t shape = ZF_SHAPE(2, 3);
    zf_tensor_t *t = NULL;
    ASSERT_OK(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, v, sizeof v, &t));
    uint8_t *data = NULL;
    size_t len = 0;
    ASSERT_OK(zf_npy_write_mem(t, &data, &len));
    uint8_t want[256];
    size_t hlen =
        s_expected_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, want);
    assert_int_equal(hlen, 128); /* what NumPy 1.24 writes for this array */
    assert_int_equal(len, hlen + sizeof v);
    assert_memory_equal(data, want, hlen);
    assert_memory_equal(data + hlen, v, sizeof v);
    free(data);
    zf_tensor_unref(&t);

    int8_t s = -3;
    ASSERT_OK(zf_tensor_new_scalar(ZF_INT8, &s, &t));
    ASSERT_OK(zf_npy_write_mem(t, &data, &len));
    hlen = s_expected_header("{'descr': '|i1', 'fortran_order': False, 'shape': (), }", 0, want);
    assert_int_equal(hlen, 128);
    assert_int_equal(len, 129);
    assert_memory_equal(data, want, hlen);
    assert_int_equal((int8_t)data[128], -3);
    free(data);
    zf_tensor_unref(&t);
}

static void test_npy_header_length_is_a_multiple_of_64_ending_in_newline(void **state)
{
    (void)state;
    for (int64_t d0 = 1; d0 < 100000000000LL; d0 *= 7) {
        zf_shape_t shape = ZF_SHAPE(d0, 0, 12345);
        zf_tensor_t *t = NULL;
        ASSERT_OK(zf_tensor_new(ZF_BOOL, &shape, &t));
        uint8_t *data = NULL;
        size_t len = 0;
        ASSERT_OK(zf_npy_write_mem(t, &data, &len));
        assert_int_equal(len % 64, 0);
        assert_int_equal(data[len - 1], '\n');
        assert_int_equal((size_t)(data[8] | data[9] << 8) + 10, len);
        free(data);
        zf_tensor_unref(&t);
    }
}

static const struct {
    zf_dtype_t dtype;
    const char *descr;
} s_descrs[] = {
    {ZF_FLOAT, "<f4"},     {ZF_DOUBLE, "<f8"},      {ZF_HALF, "<f2"},   {ZF_INT8, "|i1"},
    {ZF_INT16, "<i2"},     {ZF_INT32, "<i4"},       {ZF_INT64, "<i8"},  {ZF_UINT8, "|u1"},
    {ZF_UINT16, "<u2"},    {ZF_UINT32, "<u4"},      {ZF_UINT64, "<u8"}, {ZF_BOOL, "|b1"},
    {ZF_COMPLEX64, "<c8"}, {ZF_COMPLEX128, "<c16"},
};

static void s_shape_tuple(const zf_shape_t *s, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < s->rank; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)s->dims[i]);
    snprintf(buf + n, cap - n, "%s)", s->rank == 1 ? "," : "");
}

static void test_npy_round_trips_every_dtype_and_rank_through_a_file(void **state)
{
    (void)state;
    const int64_t dims[4] = {2, 3, 1, 4};
    char *path = s_temp_path();
    for (size_t k = 0; k < sizeof s_descrs / sizeof s_descrs[0]; k++) {
        for (int rank = 0; rank <= 4; rank++) {
            zf_shape_t shape = zf_shape_of(rank, dims);
            zf_tensor_t *t = NULL, *back = NULL;
            ASSERT_OK(zf_tensor_new(s_descrs[k].dtype, &shape, &t));
            uint8_t *d = zf_tensor_data(t);
            for (size_t i = 0; i < zf_tensor_nbytes(t); i++)
                d[i] = s_descrs[k].dtype == ZF_BOOL ? (uint8_t)(i % 3 == 0) : (uint8_t)(i * 13 + 5);
            ASSERT_OK(zf_npy_write_file(path, t));
            ASSERT_OK(zf_npy_read_file(path, &back));
            if (!zf_tensor_equal(t, back))
                fail_msg("%s rank %d did not round trip", s_descrs[k].descr, rank);

            char tuple[128], dict[256];
            s_shape_tuple(&shape, tuple, sizeof tuple);
            snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     s_descrs[k].descr, tuple);
            uint8_t want[256], *data = NULL;
            size_t len = 0, hlen = s_expected_header(dict, rank ? 1 : 0, want);
            ASSERT_OK(zf_npy_write_mem(t, &data, &len));
            assert_int_equal(len, hlen + zf_tensor_nbytes(t));
            assert_memory_equal(data, want, hlen);
            free(data);
            zf_tensor_unref(&t);
            zf_tensor_unref(&back);
        }
    }
    unlink(path);
    free(path);
}

static void test_npy_writes_strings_as_fixed_width_bytes(void **state)
{
    (void)state;
    zf_shape_t shape = ZF_SHAPE(3);
    zf_tensor_t *t = NULL, *back = NULL;
    ASSERT_OK(zf_tensor_new(ZF_STRING, &shape, &t));
    ASSERT_OK(zf_tensor_set_string(t, 0, "ab", 2));
    ASSERT_OK(zf_tensor_set_string(t, 2, "wxyz", 4));
    uint8_t *data = NULL;
    size_t len = 0;
    ASSERT_OK(zf_npy_write_mem(t, &data, &len));
    uint8_t want[128];
    size_t hlen =
        s_expected_header("{'descr': '|S4', 'fortran_order': False, 'shape': (3,), }", 1, want);
    assert_int_equal(len, hlen + 12);
    assert_memory_equal(data, want, hlen);
    assert_memory_equal(data + hlen, "ab\0\0\0\0\0\0wxyz", 12);
    ASSERT_OK(zf_npy_read_mem(data, len, &back));
    assert_true(zf_tensor_equal(t, back));
    free(data);
    zf_tensor_unref(&t);
    zf_tensor_unref(&back);
}

static void test_npy_refuses_dtypes_numpy_lacks(void **state)
{
    (void)state;
    zf_shape_t shape = ZF_SHAPE(2);
    zf_tensor_t *t = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    ASSERT_OK(zf_tensor_new(ZF_BFLOAT16, &shape, &t));
    zf_test_expect_error(zf_npy_write_mem(t, &data, &len), ZF_UNIMPLEMENTED,
                         "no dtype for bfloat16");
    zf_tensor_unref(&t);
    ASSERT_OK(zf_tensor_new(ZF_QINT8, &shape, &t));
    zf_test_expect_error(zf_npy_write_mem(t, &data, &len), ZF_UNIMPLEMENTED, "qint8");
    zf_tensor_unref(&t);
    assert_null(data);
}

/* ---- reading ------------------------------------------------------------ */

static void test_npy_reads_big_endian_and_native_order(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    const uint8_t be[8] = {0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe};
    ASSERT_OK(
        s_read_built(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be, 8, &t));
    assert_int_equal(((int32_t *)zf_tensor_data(t))[0], 258);
    assert_int_equal(((int32_t *)zf_tensor_data(t))[1], -2);
    zf_tensor_unref(&t);

    const uint8_t bc[8] = {0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0}; /* 1 - 2j, big-endian parts */
    ASSERT_OK(
        s_read_built(1, "{'descr': '>c8', 'fortran_order': False, 'shape': (), }", bc, 8, &t));
    assert_true(((float *)zf_tensor_data(t))[0] == 1.0f);
    assert_true(((float *)zf_tensor_data(t))[1] == -2.0f);
    zf_tensor_unref(&t);

    const double nat = 2.5;
    ASSERT_OK(
        s_read_built(1, "{'descr': '=f8', 'fortran_order': False, 'shape': (), }", &nat, 8, &t));
    assert_true(*(double *)zf_tensor_data(t) == 2.5);
    zf_tensor_unref(&t);

    const uint8_t one[3] = {0xff, 1, 2};
    ASSERT_OK(
        s_read_built(1, "{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", one, 3, &t));
    assert_int_equal(zf_tensor_dtype(t), ZF_INT8);
    assert_int_equal(((int8_t *)zf_tensor_data(t))[0], -1);
    zf_tensor_unref(&t);

    const uint8_t flags[2] = {0, 5};
    ASSERT_OK(
        s_read_built(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", flags, 2, &t));
    assert_memory_equal(zf_tensor_data(t), "\0\1", 2);
    zf_tensor_unref(&t);
}

static void test_npy_reads_fortran_order_into_c_order(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    const int32_t f2[6] = {1, 4, 2, 5, 3, 6}; /* [[1 2 3] [4 5 6]] stored column-major */
    ASSERT_OK(s_read_built(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", f2,
                           sizeof f2, &t));
    const int32_t c2[6] = {1, 2, 3, 4, 5, 6};
    assert_memory_equal(zf_tensor_data(t), c2, sizeof c2);
    zf_tensor_unref(&t);

    int16_t f3[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) f3[i + 2 * j + 6 * k] = (int16_t)(100 * i + 10 * j + k);
    ASSERT_OK(s_read_built(1, "{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3, 4), }", f3,
                           sizeof f3, &t));
    const int16_t *c3 = zf_tensor_data(t);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                assert_int_equal(c3[12 * i + 4 * j + k], 100 * i + 10 * j + k);
    zf_tensor_unref(&t);
}

static void test_npy_reads_versions_2_and_3(void **state)
{
    (void)state;
    const uint16_t v[2] = {7, 65535};
    for (int major = 2; major <= 3; major++) {
        zf_tensor_t *t = NULL;
        ASSERT_OK(s_read_built(major, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }",
                               v, sizeof v, &t));
        assert_int_equal(zf_tensor_dtype(t), ZF_UINT16);
        assert_memory_equal(zf_tensor_data(t), v, sizeof v);
        zf_tensor_unref(&t);
    }
}

static void test_npy_header_parsing_tolerates_spacing_order_and_quotes(void **state)
{
    (void)state;
    const int64_t v[6] = {1, 2, 3, 4, 5, 6};
    const char *dicts[] = {
        "{\"shape\":(2 ,3) ,'fortran_order' :False,  'descr':'<i8' }",
        "  {'fortran_order': False, 'shape': (2L, 3L), 'descr': '<i8',}   ",
        "{'descr':'<i8','fortran_order':False,'shape':(2,3,),}\t",
    };
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        zf_tensor_t *t = NULL;
        ASSERT_OK(s_read_built(1, dicts[i], v, sizeof v, &t));
        zf_shape_t want = ZF_SHAPE(2, 3);
        assert_true(zf_shape_equal(zf_tensor_shape(t), &want));
        assert_memory_equal(zf_tensor_data(t), v, sizeof v);
        zf_tensor_unref(&t);
    }
}

static void test_npy_reads_byte_and_unicode_strings(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    ASSERT_OK(s_read_built(1, "{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }",
                           "ab\0xyz", 6, &t));
    assert_int_equal(zf_tensor_dtype(t), ZF_STRING);
    assert_int_equal(zf_tensor_string(t, 0)->len, 2);
    assert_string_equal(zf_tensor_string(t, 0)->data, "ab");
    assert_string_equal(zf_tensor_string(t, 1)->data, "xyz");
    zf_tensor_unref(&t);

    const uint32_t u[4] = {0xe9, 0, 'a', 0x1f600};
    ASSERT_OK(s_read_built(1, "{'descr': '<U2', 'fortran_order': False, 'shape': (2,), }", u,
                           sizeof u, &t));
    assert_string_equal(zf_tensor_string(t, 0)->data, "\xc3\xa9");
    assert_string_equal(zf_tensor_string(t, 1)->data, "a\xf0\x9f\x98\x80");
    zf_tensor_unref(&t);

    const uint32_t bad[1] = {0xd800};
    zf_test_expect_error(s_read_built(1,
                                      "{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }",
                                      bad, sizeof bad, &t),
                         ZF_INVALID_ARGUMENT, "invalid code point U+D800");
}

/* ---- malformed input ---------------------------------------------------- */

static void test_npy_rejects_bad_magic_and_truncation(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    zf_test_expect_error(zf_npy_read_mem("\x93NUMPZ\x01\x00\x10\x00", 10, &t), ZF_INVALID_ARGUMENT,
                         "npy: bad magic");
    zf_test_expect_error(zf_npy_read_mem("\x93NU", 3, &t), ZF_INVALID_ARGUMENT, "npy: bad magic");
    zf_test_expect_error(zf_npy_read_mem("\x93NUMPY\x01\x00\x10", 9, &t), ZF_INVALID_ARGUMENT,
                         "truncated header length");
    zf_test_expect_error(zf_npy_read_mem("\x93NUMPY\x01\x00\x76\x00{'descr'", 17, &t),
                         ZF_INVALID_ARGUMENT,
                         "npy: truncated header (118 bytes declared, 7 present)");
    zf_test_expect_error(zf_npy_read_mem("\x93NUMPY\x04\x00\x10\x00", 10, &t), ZF_INVALID_ARGUMENT,
                         "unsupported format version 4.0");
    assert_null(t);
}

static void test_npy_rejects_bad_header_dicts_clearly(void **state)
{
    (void)state;
    static const struct {
        const char *dict;
        zf_code_t code;
        const char *msg;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, }", ZF_INVALID_ARGUMENT,
         "npy: header has no 'shape' key"},
        {"{'descr': '<f4', 'shape': (1,), }", ZF_INVALID_ARGUMENT, "no 'fortran_order' key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", ZF_INVALID_ARGUMENT,
         "unexpected key 'x'"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", ZF_INVALID_ARGUMENT,
         "'fortran_order' must be True or False"},
        {"['descr', '<f4']", ZF_INVALID_ARGUMENT, "header is not a dict"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", ZF_INVALID_ARGUMENT,
         "expected ',' or '}'"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", ZF_INVALID_ARGUMENT,
         "expected ':' after 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk", ZF_INVALID_ARGUMENT,
         "unexpected text after the header dict"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
         ZF_INVALID_ARGUMENT, "key 'descr' twice"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", ZF_INVALID_ARGUMENT,
         "must be a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", ZF_INVALID_ARGUMENT,
         "non-negative integers"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2}", ZF_INVALID_ARGUMENT,
         "malformed 'shape' tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
         ZF_INVALID_ARGUMENT, "too large"},
        {"{'descr': '<f4', 'fortran_order': False, "
         "'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)}",
         ZF_INVALID_ARGUMENT, "rank exceeds the maximum rank 16"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", ZF_UNIMPLEMENTED,
         "object arrays ('|O') are not supported"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", ZF_UNIMPLEMENTED,
         "structured dtypes"},
        {"{'descr': '<M8', 'fortran_order': False, 'shape': (1,), }", ZF_UNIMPLEMENTED,
         "dtype '<M8' is not supported"},
        {"{'descr': '<f3', 'fortran_order': False, 'shape': (1,), }", ZF_UNIMPLEMENTED,
         "dtype '<f3' is not supported"},
        {"{'descr': 7, 'fortran_order': False, 'shape': (1,), }", ZF_INVALID_ARGUMENT,
         "'descr' must be a dtype string"},
        {"{'descr': '|S0', 'fortran_order': False, 'shape': (1,), }", ZF_INVALID_ARGUMENT,
         "zero width"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zf_tensor_t *t = NULL;
        zf_status_t s = s_read_built(1, cases[i].dict, "\0\0\0\0", 4, &t);
        if (s.code != cases[i].code || !strstr(zf_status_msg(&s), cases[i].msg))
            fail_msg("dict %s: got %s '%s', want '%s'", cases[i].dict, zf_code_name(s.code),
                     zf_status_msg(&s), cases[i].msg);
        zf_status_clear(&s);
        assert_null(t);
    }
}

static void test_npy_rejects_data_that_does_not_match_the_shape(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    const float v[7] = {0};
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    zf_test_expect_error(s_read_built(1, dict, v, 20, &t), ZF_INVALID_ARGUMENT,
                         "npy: data has 20 bytes but float32 [2,3] needs 24");
    zf_test_expect_error(s_read_built(1, dict, v, 28, &t), ZF_INVALID_ARGUMENT,
                         "npy: data has 28 bytes but float32 [2,3] needs 24");
    zf_test_expect_error(
        s_read_built(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", v,
                     4, &t),
        ZF_INVALID_ARGUMENT, "data has 4 bytes but float32 [1099511627776] needs 4398046511104");
    zf_test_expect_error(s_read_built(1,
                                      "{'descr': '<f4', 'fortran_order': False, "
                                      "'shape': (4294967296, 4294967296), }",
                                      v, 4, &t),
                         ZF_INVALID_ARGUMENT, "more than 2^63-1");
    zf_test_expect_error(s_read_built(1,
                                      "{'descr': '<c16', 'fortran_order': False, "
                                      "'shape': (4611686018427387904,), }",
                                      v, 4, &t),
                         ZF_INVALID_ARGUMENT, "too large");
    assert_null(t);
}

static void test_npy_file_errors_map_to_status_codes(void **state)
{
    (void)state;
    zf_tensor_t *t = NULL;
    zf_test_expect_error(zf_npy_read_file("/nonexistent/zflow.npy", &t), ZF_NOT_FOUND,
                         "npy: cannot open '/nonexistent/zflow.npy'");
    zf_test_expect_error(zf_npy_read_file("/tmp", &t), ZF_INVALID_ARGUMENT, "not a regular file");
    ASSERT_OK(zf_tensor_new_scalar_float(1, &t));
    zf_test_expect_error(zf_npy_write_file("/nonexistent/zflow.npy", t), ZF_NOT_FOUND,
                         "cannot create");
    zf_tensor_unref(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_writes_numpy_header_byte_for_byte),
        cmocka_unit_test(test_npy_header_length_is_a_multiple_of_64_ending_in_newline),
        cmocka_unit_test(test_npy_round_trips_every_dtype_and_rank_through_a_file),
        cmocka_unit_test(test_npy_writes_strings_as_fixed_width_bytes),
        cmocka_unit_test(test_npy_refuses_dtypes_numpy_lacks),
        cmocka_unit_test(test_npy_reads_big_endian_and_native_order),
        cmocka_unit_test(test_npy_reads_fortran_order_into_c_order),
        cmocka_unit_test(test_npy_reads_versions_2_and_3),
        cmocka_unit_test(test_npy_header_parsing_tolerates_spacing_order_and_quotes),
        cmocka_unit_test(test_npy_reads_byte_and_unicode_strings),
        cmocka_unit_test(test_npy_rejects_bad_magic_and_truncation),
        cmocka_unit_test(test_npy_rejects_bad_header_dicts_clearly),
        cmocka_unit_test(test_npy_rejects_data_that_does_not_match_the_shape),
        cmocka_unit_test(test_npy_file_errors_map_to_status_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
