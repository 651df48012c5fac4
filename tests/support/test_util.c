/* Definitions of test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

void zf_test_expect_error(zf_status_t s, zf_code_t code, const char *substring)
{
    if (s.code != code)
        fail_msg("expected %s, got %s: %s", zf_code_name(code), zf_code_name(s.code),
                 zf_status_msg(&s));
    if (substring && !strstr(zf_status_msg(&s), substring))
        fail_msg("message '%s' lacks '%s'", zf_status_msg(&s), substring);
    zf_status_clear(&s);
}
