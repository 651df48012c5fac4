/* The bounded set of recent step ids (executor/rendezvous/step_set.h), checked against
 * a plain list on long mixed sequences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "executor/rendezvous/step_set.h"
#include "test_util.h"

static void test_step_set_refuses_a_cap_out_of_range(void **state)
{
    (void)state;
    zf_step_set_t *s = NULL;
    zf_test_expect_error(zf_step_set_new(0, &s), ZF_INVALID_ARGUMENT, "1 to 2^30 ids, not 0");
    assert_null(s);
    zf_test_expect_error(zf_step_set_new(((size_t)1 << 30) + 1, &s), ZF_INVALID_ARGUMENT,
                         "not 1073741825");
    assert_null(s);
}

static void test_step_set_forgets_the_oldest_id_first(void **state)
{
    (void)state;
    zf_step_set_t *s = NULL;
    ASSERT_OK(zf_step_set_new(3, &s));
    zf_step_set_add(s, 10);
    zf_step_set_add(s, 11);
    zf_step_set_add(s, 10); /* already there: keeps its age */
    zf_step_set_add(s, 12);
    assert_int_equal(zf_step_set_size(s), 3);
    zf_step_set_add(s, 13); /* forgets 10 */
    assert_false(zf_step_set_has(s, 10));
    assert_true(zf_step_set_has(s, 11) && zf_step_set_has(s, 12) && zf_step_set_has(s, 13));
    zf_step_set_add(s, INT64_MIN);
    zf_step_set_add(s, INT64_MAX);
    assert_false(zf_step_set_has(s, 11) || zf_step_set_has(s, 12));
    assert_true(zf_step_set_has(s, 13) && zf_step_set_has(s, INT64_MIN) &&
                zf_step_set_has(s, INT64_MAX));
    assert_int_equal(zf_step_set_size(s), 3);
    zf_step_set_destroy(&s);
    assert_null(s);
    zf_step_set_destroy(&s); /* NULL-safe */
}

/* Ids from a small range collide and repeat a lot: every probe run is
 * built, broken by evictions and rebuilt. */
static void test_step_set_agrees_with_a_plain_list_on_a_long_random_run(void **state)
{
    (void)state;
    enum { CAP = 37, OPS = 200000, RANGE = 150 };
    zf_step_set_t *s = NULL;
    ASSERT_OK(zf_step_set_new(CAP, &s));
    int64_t model[CAP];
    size_t n = 0, oldest = 0;
    uint64_t x = 88172645463325252u;
    for (int op = 0; op < OPS; op++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t id = (int64_t)(x % RANGE) * 1000003 - 70000000;
        bool in_model = false;
        for (size_t i = 0; i < n; i++) in_model |= model[(oldest + i) % CAP] == id;
        assert_int_equal(zf_step_set_has(s, id), in_model);
        if ((x >> 40) % 3 == 0 || in_model) continue; /* a lookup only */
        zf_step_set_add(s, id);
        if (n == CAP) {
            model[oldest] = id;
            oldest = (oldest + 1) % CAP;
        } else {
            model[(oldest + n++) % CAP] = id;
        }
        assert_int_equal(zf_step_set_size(s), n);
    }
    for (size_t i = 0; i < n; i++) assert_true(zf_step_set_has(s, model[(oldest + i) % CAP]));
    zf_step_set_destroy(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_set_refuses_a_cap_out_of_range),
        cmocka_unit_test(test_step_set_forgets_the_oldest_id_first),
        cmocka_unit_test(test_step_set_agrees_with_a_plain_list_on_a_long_random_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
