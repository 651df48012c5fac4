/* Assertions on zf_status_t shared by the cmocka tests. Include after
 * <cmocka.h>. */
#ifndef ZF_TEST_UTIL_H
#define ZF_TEST_UTIL_H

#include <string.h>

#include "common/status.h"

/* Fails the test with the status message when expr is not OK. */
#define ASSERT_OK(expr)                                                                            \
    do {                                                                                           \
        zf_status_t s_ = (expr);                                                                   \
        if (!zf_ok(s_)) fail_msg("%s: %s", #expr, zf_status_msg(&s_));                             \
    } while (0)

/* Checks s has code and (when substring is not NULL) a message containing
 * substring; clears s. */
void zf_test_expect_error(zf_status_t s, zf_code_t code, const char *substring);

#endif
