/* Tests for common/strmap: insert, lookup, duplicates, growth, length-aware
 * lookups, removal, iteration and key copying. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/strmap.h"

static void test_strmap_inserts_and_finds_keys(void **state)
{
    (void)state;
    zf_strmap_t *m = zf_strmap_new(0, 0);
    assert_non_null(m);
    assert_int_equal(zf_strmap_insert(m, "a", 1, NULL), 0);
    assert_int_equal(zf_strmap_insert(m, "bb", 2, NULL), 0);
    assert_int_equal(zf_strmap_insert(m, "", 3, NULL), 0);
    assert_int_equal(zf_strmap_size(m), 3);
    uintptr_t v = 0;
    assert_true(zf_strmap_get(m, "a", &v));
    assert_int_equal(v, 1);
    assert_true(zf_strmap_get(m, "bb", &v));
    assert_int_equal(v, 2);
    assert_true(zf_strmap_get(m, "", &v));
    assert_int_equal(v, 3);
    assert_true(zf_strmap_get(m, "a", NULL));
    assert_false(zf_strmap_get(m, "b", &v));
    assert_false(zf_strmap_get(m, "bbb", &v));
    zf_strmap_destroy(&m);
    assert_null(m);
    zf_strmap_destroy(&m);
    zf_strmap_destroy(NULL);
}

static void test_strmap_insert_reports_an_existing_key(void **state)
{
    (void)state;
    zf_strmap_t *m = zf_strmap_new(4, 0);
    assert_int_equal(zf_strmap_insert(m, "x", 7, NULL), 0);
    uintptr_t old = 0;
    assert_int_equal(zf_strmap_insert(m, "x", 8, &old), -EEXIST);
    assert_int_equal(old, 7);
    assert_int_equal(zf_strmap_insert(m, "x", 9, NULL), -EEXIST);
    uintptr_t v = 0;
    assert_true(zf_strmap_get(m, "x", &v));
    assert_int_equal(v, 7);
    assert_int_equal(zf_strmap_size(m), 1);
    assert_int_equal(zf_strmap_put(m, "x", 10), 0);
    assert_true(zf_strmap_get(m, "x", &v));
    assert_int_equal(v, 10);
    assert_int_equal(zf_strmap_put(m, "y", 11), 0);
    assert_int_equal(zf_strmap_size(m), 2);
    zf_strmap_destroy(&m);
}

static void test_strmap_finds_a_prefix_by_length(void **state)
{
    (void)state;
    zf_strmap_t *m = zf_strmap_new(0, 0);
    assert_int_equal(zf_strmap_insert(m, "node", 1, NULL), 0);
    assert_int_equal(zf_strmap_insert(m, "node:1", 2, NULL), 0);
    const char *ref = "node:1";
    uintptr_t v = 0;
    assert_true(zf_strmap_get_n(m, ref, 4, &v));
    assert_int_equal(v, 1);
    assert_true(zf_strmap_get_n(m, ref, 6, &v));
    assert_int_equal(v, 2);
    assert_false(zf_strmap_get_n(m, ref, 3, &v));
    assert_false(zf_strmap_get_n(m, ref, 5, &v));
    /* A key inserted by length need not be NUL-terminated. */
    assert_int_equal(zf_strmap_insert_n(m, "abcdef", 3, 3, NULL), 0);
    assert_true(zf_strmap_get(m, "abc", &v));
    assert_int_equal(v, 3);
    assert_false(zf_strmap_get(m, "abcdef", &v));
    zf_strmap_destroy(&m);
}

static void test_strmap_grows_and_keeps_every_key(void **state)
{
    (void)state;
    enum { N = 50000 };
    char(*keys)[16] = malloc(N * sizeof *keys);
    assert_non_null(keys);
    zf_strmap_t *m = zf_strmap_new(0, 0);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "n%d", i);
        assert_int_equal(zf_strmap_insert(m, keys[i], (uintptr_t)i, NULL), 0);
    }
    assert_int_equal(zf_strmap_size(m), N);
    for (int i = 0; i < N; i++) {
        uintptr_t v = 0;
        assert_true(zf_strmap_get(m, keys[i], &v));
        assert_int_equal(v, i);
    }
    assert_false(zf_strmap_get(m, "n50000", NULL));
    assert_false(zf_strmap_get(m, "n-1", NULL));
    zf_strmap_destroy(&m);
    free(keys);
}

static void test_strmap_removes_keys_and_keeps_the_rest_reachable(void **state)
{
    (void)state;
    enum { N = 4000 };
    static char keys[N][12];
    zf_strmap_t *m = zf_strmap_new(16, 0);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        assert_int_equal(zf_strmap_insert(m, keys[i], (uintptr_t)i, NULL), 0);
    }
    for (int i = 0; i < N; i += 3) {
        uintptr_t v = 0;
        assert_true(zf_strmap_remove(m, keys[i], &v));
        assert_int_equal(v, i);
        assert_false(zf_strmap_remove(m, keys[i], NULL));
    }
    assert_int_equal(zf_strmap_size(m), N - (N + 2) / 3);
    for (int i = 0; i < N; i++) {
        uintptr_t v = 0;
        bool present = zf_strmap_get(m, keys[i], &v);
        assert_int_equal(present, i % 3 != 0);
        if (present) assert_int_equal(v, i);
    }
    /* Removed keys can come back. */
    assert_int_equal(zf_strmap_insert(m, keys[0], 99, NULL), 0);
    uintptr_t v = 0;
    assert_true(zf_strmap_get(m, keys[0], &v));
    assert_int_equal(v, 99);
    zf_strmap_destroy(&m);
}

/* The hashed forms find, add and remove what the plain ones do. */
static void test_strmap_hashed_forms_agree_with_the_plain_ones(void **state)
{
    (void)state;
    zf_strmap_t *m = zf_strmap_new(16, 0);
    static const char *const keys[3] = {"alpha", "beta;gamma", "d"};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(keys[i]);
        uint64_t h = zf_strmap_hash(keys[i], len);
        assert_int_equal(zf_strmap_insert_hashed(m, keys[i], len, h, (uintptr_t)i + 1, NULL), 0);
    }
    uintptr_t v = 0;
    assert_true(zf_strmap_get(m, "beta;gamma", &v));
    assert_int_equal(v, 2);
    assert_true(zf_strmap_remove_hashed(m, "beta;gamma", 10, zf_strmap_hash("beta;gamma", 10), &v));
    assert_int_equal(v, 2);
    assert_false(zf_strmap_get(m, "beta;gamma", NULL));
    /* a key compared by its bytes, not its hash alone: a prefix is not it */
    assert_false(zf_strmap_remove_hashed(m, "alph", 4, zf_strmap_hash("alph", 4), NULL));
    assert_true(zf_strmap_get(m, "alpha", &v));
    assert_int_equal(v, 1);
    assert_true(zf_strmap_remove_hashed(m, "d", 1, zf_strmap_hash("d", 1), NULL));
    assert_int_equal(zf_strmap_size(m), 1);
    zf_strmap_destroy(&m);
}

static void test_strmap_iterates_over_every_entry_once(void **state)
{
    (void)state;
    zf_strmap_t *m = zf_strmap_new(0, 0);
    const char *names[] = {"alpha", "beta", "gamma", "delta", "epsilon"};
    for (int i = 0; i < 5; i++) assert_int_equal(zf_strmap_insert(m, names[i], 1u << i, NULL), 0);
    size_t iter = 0, len;
    const char *key;
    uintptr_t v, seen = 0;
    int count = 0;
    while (zf_strmap_next(m, &iter, &key, &len, &v)) {
        assert_int_equal(len, strlen(key));
        assert_true(zf_strmap_get(m, key, NULL));
        seen |= v;
        count++;
    }
    assert_int_equal(count, 5);
    assert_int_equal(seen, 31);
    assert_false(zf_strmap_next(m, &iter, NULL, NULL, NULL));
    zf_strmap_destroy(&m);
}

static void test_strmap_copies_keys_when_asked(void **state)
{
    (void)state;
    zf_strmap_t *m = zf_strmap_new(0, ZF_STRMAP_COPY_KEYS);
    char buf[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(buf, sizeof buf, "temp-%d", i);
        assert_int_equal(zf_strmap_insert(m, buf, (uintptr_t)i, NULL), 0);
    }
    /* A key bigger than a storage chunk. */
    size_t big_len = (size_t)200 << 10;
    char *big = malloc(big_len + 1);
    memset(big, 'z', big_len);
    big[big_len] = '\0';
    assert_int_equal(zf_strmap_insert(m, big, 5000, NULL), 0);
    assert_int_equal(zf_strmap_insert(m, "after-big", 5001, NULL), 0);
    memset(buf, 0, sizeof buf);
    uintptr_t v = 0;
    assert_true(zf_strmap_get(m, "temp-0", &v));
    assert_int_equal(v, 0);
    assert_true(zf_strmap_get(m, "temp-999", &v));
    assert_int_equal(v, 999);
    assert_true(zf_strmap_get_n(m, big, big_len, &v));
    assert_int_equal(v, 5000);
    big[0] = 'y';
    assert_false(zf_strmap_get_n(m, big, big_len, &v));
    free(big);
    assert_true(zf_strmap_get(m, "after-big", &v));
    assert_int_equal(v, 5001);
    size_t iter = 0;
    const char *key;
    size_t len;
    while (zf_strmap_next(m, &iter, &key, &len, NULL)) assert_int_equal(strlen(key), len);
    zf_strmap_destroy(&m);
}

static void test_strmap_reserve_keeps_contents(void **state)
{
    (void)state;
    zf_strmap_t *m = zf_strmap_new(0, 0);
    assert_int_equal(zf_strmap_insert(m, "one", 1, NULL), 0);
    assert_int_equal(zf_strmap_reserve(m, 100000), 0);
    assert_int_equal(zf_strmap_reserve(m, 10), 0);
    uintptr_t v = 0;
    assert_true(zf_strmap_get(m, "one", &v));
    assert_int_equal(v, 1);
    zf_strmap_destroy(&m);
}

static void test_strmap_hash_spreads_similar_keys(void **state)
{
    (void)state;
    /* Keys differing in one character land in different low bits. */
    enum { N = 4096, BUCKETS = 1024 };
    static int hits[BUCKETS];
    char buf[32];
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf, "layer_%04d/weights", i);
        hits[zf_strmap_hash(buf, strlen(buf)) & (BUCKETS - 1)]++;
    }
    int max = 0;
    for (int b = 0; b < BUCKETS; b++)
        if (hits[b] > max) max = hits[b];
    assert_true(max <= 20); /* Poisson(4): above 20 is about a one-in-a-million run */
    assert_true(zf_strmap_hash("ab", 2) != zf_strmap_hash("ba", 2));
    assert_true(zf_strmap_hash("a", 1) != zf_strmap_hash("a\0", 2));
}

/* Every byte of a key counts, at every length (each length takes its own
 * path through the rounds and the tail): changing any one bit changes the
 * hash. Long keys that differ only near their end, as a step's
 * rendezvous keys do, spread as short ones do. */
static void test_strmap_hash_reads_every_byte_of_keys_of_every_length(void **state)
{
    (void)state;
    char key[160];
    for (size_t len = 1; len <= sizeof key; len++) {
        for (size_t i = 0; i < len; i++) key[i] = (char)('a' + (len * 7 + i * 13) % 26);
        uint64_t h = zf_strmap_hash(key, len);
        for (size_t i = 0; i < len; i++) {
            key[i] ^= 0x20;
            assert_true(zf_strmap_hash(key, len) != h);
            key[i] ^= 0x20;
        }
        assert_true(zf_strmap_hash(key, len) == h);
        if (len > 1) assert_true(zf_strmap_hash(key, len - 1) != h);
    }
    enum { N = 4096, BUCKETS = 1024 };
    static int hits[BUCKETS];
    char buf[200];
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf,
                 "/job:localhost/replica:0/task:0/device:CPU:0;0000000000000001;"
                 "/job:localhost/replica:0/task:0/device:CPU:1;edge_%d_x:0;0:0",
                 i);
        hits[zf_strmap_hash(buf, strlen(buf)) & (BUCKETS - 1)]++;
    }
    int max = 0;
    for (int b = 0; b < BUCKETS; b++)
        if (hits[b] > max) max = hits[b];
    assert_true(max <= 20); /* Poisson(4), as above */
}

/* Each owned key is freed with its entry: churning 100,000 keys through
 * the map leaves exactly the live ones (LeakSanitizer checks the rest). */
static void test_strmap_frees_owned_keys_as_entries_go(void **state)
{
    (void)state;
    zf_strmap_t *m = zf_strmap_new(0, ZF_STRMAP_OWN_KEYS);
    char buf[32];
    for (int i = 0; i < 100000; i++) {
        snprintf(buf, sizeof buf, "session-%d", i);
        assert_int_equal(zf_strmap_insert(m, buf, (uintptr_t)i, NULL), 0);
        memset(buf, 'x', 8); /* the map holds its own copy */
        if (i >= 3) {
            snprintf(buf, sizeof buf, "session-%d", i - 3);
            uintptr_t v = 0;
            assert_true(zf_strmap_remove(m, buf, &v));
            assert_int_equal(v, (uintptr_t)(i - 3));
        }
    }
    assert_int_equal(zf_strmap_size(m), 3);
    uintptr_t v = 0;
    assert_true(zf_strmap_get(m, "session-99999", &v));
    assert_int_equal(v, 99999);
    assert_false(zf_strmap_get(m, "session-99996", &v));
    zf_strmap_destroy(&m); /* frees the three left */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strmap_inserts_and_finds_keys),
        cmocka_unit_test(test_strmap_insert_reports_an_existing_key),
        cmocka_unit_test(test_strmap_finds_a_prefix_by_length),
        cmocka_unit_test(test_strmap_grows_and_keeps_every_key),
        cmocka_unit_test(test_strmap_removes_keys_and_keeps_the_rest_reachable),
        cmocka_unit_test(test_strmap_hashed_forms_agree_with_the_plain_ones),
        cmocka_unit_test(test_strmap_iterates_over_every_entry_once),
        cmocka_unit_test(test_strmap_copies_keys_when_asked),
        cmocka_unit_test(test_strmap_reserve_keeps_contents),
        cmocka_unit_test(test_strmap_hash_spreads_similar_keys),
        cmocka_unit_test(test_strmap_hash_reads_every_byte_of_keys_of_every_length),
        cmocka_unit_test(test_strmap_frees_owned_keys_as_entries_go),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
