/* Tests for common/status and common/log. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/log.h"
#include "common/status.h"

static zf_status_t s_fails_with(int v)
{
    if (v > 2) return zf_invalid_argument("value %d is too big", v);
    return ZF_STATUS_OK;
}

static zf_status_t s_chain(int v)
{
    ZF_TRY(s_fails_with(v));
    return zf_status_new(ZF_NOT_FOUND, "reached the end with %d", v);
}

static void test_status_error_carries_code_and_message(void **state)
{
    (void)state;
    zf_status_t s = zf_invalid_argument("bad %s at %d", "token", 7);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s), "bad token at 7");
    assert_false(zf_ok(s));
    zf_status_clear(&s);
    assert_int_equal(s.code, ZF_OK);
    assert_null(s.msg);
    assert_string_equal(zf_status_msg(&s), "");
}

static void test_status_try_returns_the_first_error(void **state)
{
    (void)state;
    zf_status_t s = s_chain(3);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s), "value 3 is too big");
    zf_status_clear(&s);
    s = s_chain(1);
    assert_int_equal(s.code, ZF_NOT_FOUND);
    assert_string_equal(zf_status_msg(&s), "reached the end with 1");
    zf_status_clear(&s);
}

static void test_status_prefix_keeps_code(void **state)
{
    (void)state;
    zf_status_t s = zf_status_prefix(zf_unimplemented("op While"), "node %s", "loop");
    assert_int_equal(s.code, ZF_UNIMPLEMENTED);
    assert_string_equal(zf_status_msg(&s), "node loop: op While");
    char *text = zf_status_to_string(&s);
    assert_string_equal(text, "UNIMPLEMENTED: node loop: op While");
    free(text);
    zf_status_clear(&s);
    zf_status_t ok = zf_status_prefix(ZF_STATUS_OK, "ignored");
    assert_true(zf_ok(ok));
    text = zf_status_to_string(&ok);
    assert_string_equal(text, "OK");
    free(text);
}

static void test_status_copy_is_a_status_of_its_own(void **state)
{
    (void)state;
    zf_status_t ok = ZF_STATUS_OK, c = zf_status_copy(&ok);
    assert_true(zf_ok(c));
    zf_status_t e = zf_not_found("graph %d", 7);
    c = zf_status_copy(&e);
    zf_status_clear(&e); /* the copy outlives the original */
    assert_int_equal(c.code, ZF_NOT_FOUND);
    assert_string_equal(zf_status_msg(&c), "graph 7");
    zf_status_clear(&c);
}

static void test_status_code_names_round_trip(void **state)
{
    (void)state;
    for (int c = 0; c <= ZF_CODE_MAX; c++) {
        zf_code_t back;
        assert_true(zf_code_from_name(zf_code_name((zf_code_t)c), &back));
        assert_int_equal(back, c);
    }
    assert_string_equal(zf_code_name(ZF_DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
    assert_string_equal(zf_code_name((zf_code_t)99), "UNKNOWN_CODE");
    zf_code_t c;
    assert_false(zf_code_from_name("NOPE", &c));
}

static void test_status_new_with_ok_code_becomes_unknown(void **state)
{
    (void)state;
    zf_status_t s = zf_status_new(ZF_OK, "oops");
    assert_int_equal(s.code, ZF_UNKNOWN);
    zf_status_clear(&s);
}

static void test_log_level_parses_names(void **state)
{
    (void)state;
    zf_log_level_t l;
    assert_true(zf_log_level_parse("debug", &l));
    assert_int_equal(l, ZF_LOG_DEBUG);
    assert_true(zf_log_level_parse("WARNING", &l));
    assert_int_equal(l, ZF_LOG_WARN);
    assert_true(zf_log_level_parse("off", &l));
    assert_int_equal(l, ZF_LOG_OFF);
    assert_false(zf_log_level_parse("loud", &l));
    zf_log_set_level(ZF_LOG_ERROR);
    assert_int_equal(zf_log_get_level(), ZF_LOG_ERROR);
    zf_log_info("test", "not shown at level error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_error_carries_code_and_message),
        cmocka_unit_test(test_status_try_returns_the_first_error),
        cmocka_unit_test(test_status_prefix_keeps_code),
        cmocka_unit_test(test_status_copy_is_a_status_of_its_own),
        cmocka_unit_test(test_status_code_names_round_trip),
        cmocka_unit_test(test_status_new_with_ok_code_becomes_unknown),
        cmocka_unit_test(test_log_level_parses_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
