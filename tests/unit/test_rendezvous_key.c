/* Tests for rendezvous keys: the five fields a key is made of, parsing a
 * key back into them (every frame and iteration number a key can hold),
 * and the keys zf_rendezvous_key_parse refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/rendezvous_key.h"
#include "test_util.h"

#define CPU0 "/job:a/replica:0/task:0/device:CPU:0"
#define CPU1 "/job:a/replica:0/task:1/device:CPU:0"

static void s_assert_span(const char *s, size_t len, const char *want)
{
    assert_int_equal(len, strlen(want));
    assert_memory_equal(s, want, len);
}

static void test_parse_reads_back_the_fields_of_a_key(void **state)
{
    (void)state;
    char *key = zf_rendezvous_key_in_frame(CPU0, 0xfedcba9876543210ull, CPU1, "edge_1_x", 3, 42);
    assert_non_null(key);
    zf_rendezvous_parsed_key_t p;
    ASSERT_OK(zf_rendezvous_key_parse(key, &p));
    s_assert_span(p.src_device, p.src_len, CPU0);
    assert_true(p.src_incarnation == 0xfedcba9876543210ull);
    s_assert_span(p.dst_device, p.dst_len, CPU1);
    s_assert_span(p.tensor_name, p.name_len, "edge_1_x");
    assert_true(p.frame_id == 3);
    assert_true(p.iter_id == 42);
    free(key);
}

/* A key made with the largest frame and iteration parses back to them. */
static void test_parse_reads_back_the_largest_numbers(void **state)
{
    (void)state;
    char *key = zf_rendezvous_key_in_frame("a", UINT64_MAX, "b", "t", UINT64_MAX, INT64_MAX);
    assert_non_null(key);
    zf_rendezvous_parsed_key_t p;
    ASSERT_OK(zf_rendezvous_key_parse(key, &p));
    assert_true(p.src_incarnation == UINT64_MAX);
    assert_true(p.frame_id == UINT64_MAX);
    assert_true(p.iter_id == INT64_MAX);
    free(key);
}

static void test_parse_refuses_malformed_keys(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "a;1;b;t",                         /* four fields */
        "a;1;b;t;0:0;x",                   /* six fields */
        ";1;b;t;0:0",                      /* no source */
        "a;1;;t;0:0",                      /* no destination */
        "a;1;b;;0:0",                      /* no tensor */
        "a;;b;t;0:0",                      /* no incarnation */
        "a;1G;b;t;0:0",                    /* not hex */
        "a;A;b;t;0:0",                     /* upper-case hex */
        "a;10000000000000000;b;t;0:0",     /* 17 hex digits */
        "a;1;b;t;0",                       /* no iteration */
        "a;1;b;t;:0",                      /* no frame */
        "a;1;b;t;0:",                      /* no iteration */
        "a;1;b;t;0:-1",                    /* negative iteration */
        "a;1;b;t;0:9223372036854775808",   /* iteration past INT64_MAX */
        "a;1;b;t;18446744073709551616:0",  /* frame past UINT64_MAX */
        "a;1;b;t;99999999999999999999:0",  /* frame past UINT64_MAX */
        "a;1;b;t;000000000000000000001:0", /* 21 digits */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        zf_rendezvous_parsed_key_t p;
        zf_status_t s = zf_rendezvous_key_parse(bad[i], &p);
        if (s.code != ZF_INVALID_ARGUMENT) fail_msg("accepted '%s'", bad[i]);
        char want[128];
        snprintf(want, sizeof want, "Invalid rendezvous key: %s", bad[i]);
        assert_string_equal(zf_status_msg(&s), want);
        zf_status_clear(&s);
    }
}

/* Frame ids: the same for the same frame instance on every executor,
 * different for another name, parent or parent iteration, never 0 (the
 * root's). */
static void test_frame_ids_name_frame_instances(void **state)
{
    (void)state;
    const uint8_t *w = (const uint8_t *)"while/while_context", *v = (const uint8_t *)"while/w2";
    uint64_t a = zf_rendezvous_frame_id(0, 0, w, 19);
    assert_true(a != 0);
    assert_true(a == zf_rendezvous_frame_id(0, 0, w, 19));
    assert_true(a != zf_rendezvous_frame_id(0, 0, v, 8));
    assert_true(a != zf_rendezvous_frame_id(0, 0, w, 18)); /* a prefix of the name */
    assert_true(a != zf_rendezvous_frame_id(a, 0, w, 19)); /* nested in itself */
    /* The instances of an inner frame, one per outer iteration: all distinct. */
    uint64_t seen[1000];
    for (int i = 0; i < 1000; i++) {
        seen[i] = zf_rendezvous_frame_id(a, i, v, 8);
        assert_true(seen[i] != 0);
        for (int k = 0; k < i; k++) assert_true(seen[k] != seen[i]);
    }
    assert_true(zf_rendezvous_frame_id(0, 0, NULL, 0) != 0);
}

static void test_src_device_is_the_first_field(void **state)
{
    (void)state;
    const char *src = NULL;
    size_t len = 0;
    assert_true(zf_rendezvous_key_src_device("a;1;b;t;0:0", &src, &len));
    s_assert_span(src, len, "a");
    assert_false(zf_rendezvous_key_src_device("a", &src, &len));
    assert_false(zf_rendezvous_key_src_device(";1;b;t;0:0", &src, &len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_reads_back_the_fields_of_a_key),
        cmocka_unit_test(test_parse_reads_back_the_largest_numbers),
        cmocka_unit_test(test_parse_refuses_malformed_keys),
        cmocka_unit_test(test_frame_ids_name_frame_instances),
        cmocka_unit_test(test_src_device_is_the_first_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
