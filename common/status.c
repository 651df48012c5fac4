/* Status values: canonical codes and owned messages. */
#include "common/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

zf_status_t zf_status_vnew(zf_code_t code, const char *fmt, va_list ap)
{
    zf_status_t s = {code == ZF_OK ? ZF_UNKNOWN : code, NULL};
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return s;
    s.msg = malloc((size_t)n + 1);
    if (s.msg) vsnprintf(s.msg, (size_t)n + 1, fmt, ap);
    return s;
}

zf_status_t zf_status_new(zf_code_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    zf_status_t s = zf_status_vnew(code, fmt, ap);
    va_end(ap);
    return s;
}

#define S_SHORTHAND(fn, code)                                                                      \
    zf_status_t fn(const char *fmt, ...)                                                           \
    {                                                                                              \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        zf_status_t s = zf_status_vnew(code, fmt, ap);                                             \
        va_end(ap);                                                                                \
        return s;                                                                                  \
    }
S_SHORTHAND(zf_invalid_argument, ZF_INVALID_ARGUMENT)
S_SHORTHAND(zf_not_found, ZF_NOT_FOUND)
S_SHORTHAND(zf_unimplemented, ZF_UNIMPLEMENTED)
S_SHORTHAND(zf_internal, ZF_INTERNAL)

zf_status_t zf_out_of_memory(const char *what)
{
    return zf_status_new(ZF_RESOURCE_EXHAUSTED, "out of memory allocating %s", what);
}

void zf_status_clear(zf_status_t *s)
{
    if (!s) return;
    free(s->msg);
    s->msg = NULL;
    s->code = ZF_OK;
}

const char *zf_status_msg(const zf_status_t *s)
{
    return (s && s->msg) ? s->msg : "";
}

const char *zf_code_name(zf_code_t code)
{
    if ((int)code < 0 || code > ZF_CODE_MAX) return "UNKNOWN_CODE";
    return s_code_names[code];
}

bool zf_code_from_name(const char *name, zf_code_t *out)
{
    for (int i = 0; i <= ZF_CODE_MAX; i++) {
        if (strcmp(name, s_code_names[i]) == 0) {
            *out = (zf_code_t)i;
            return true;
        }
    }
    return false;
}

zf_status_t zf_status_copy(const zf_status_t *s)
{
    return zf_ok(*s) ? ZF_STATUS_OK : zf_status_new(s->code, "%s", zf_status_msg(s));
}

zf_status_t zf_status_prefix(zf_status_t s, const char *fmt, ...)
{
    if (s.code == ZF_OK) return s;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    zf_status_t out = zf_status_new(s.code, "%s: %s", prefix, zf_status_msg(&s));
    zf_status_clear(&s);
    return out;
}

char *zf_status_to_string(const zf_status_t *s)
{
    const char *name = zf_code_name(s->code);
    const char *msg = zf_status_msg(s);
    size_t n = strlen(name) + strlen(msg) + 3;
    char *out = malloc(n);
    if (!out) return NULL;
    if (s->code == ZF_OK)
        snprintf(out, n, "%s", name);
    else
        snprintf(out, n, "%s: %s", name, msg);
    return out;
}
