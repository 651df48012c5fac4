/* Status: a canonical error code (TensorFlow's numbering) plus a message.
 *
 * A zf_status_t is a small value type returned by every fallible function.
 * An OK status carries no message and owns nothing; an error owns a heap
 * message that zf_status_clear() frees. Pass statuses up by returning them;
 * a caller that drops an error must clear it. */
#ifndef ZF_STATUS_H
#define ZF_STATUS_H

#include <stdarg.h>
#include <stdbool.h>

typedef enum zf_code {
    ZF_OK = 0,
    ZF_CANCELLED = 1,
    ZF_UNKNOWN = 2,
    ZF_INVALID_ARGUMENT = 3,
    ZF_DEADLINE_EXCEEDED = 4,
    ZF_NOT_FOUND = 5,
    ZF_ALREADY_EXISTS = 6,
    ZF_PERMISSION_DENIED = 7,
    ZF_RESOURCE_EXHAUSTED = 8,
    ZF_FAILED_PRECONDITION = 9,
    ZF_ABORTED = 10,
    ZF_OUT_OF_RANGE = 11,
    ZF_UNIMPLEMENTED = 12,
    ZF_INTERNAL = 13,
    ZF_UNAVAILABLE = 14,
    ZF_DATA_LOSS = 15,
    ZF_UNAUTHENTICATED = 16,
} zf_code_t;

#define ZF_CODE_MAX ZF_UNAUTHENTICATED

typedef struct zf_status {
    zf_code_t code;
    char *msg; /* owned; NULL when OK (or when the message could not be allocated) */
} zf_status_t;

#define ZF_STATUS_OK ((zf_status_t){ZF_OK, NULL})

#if defined(__GNUC__)
#define ZF_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#define ZF_WARN_UNUSED              __attribute__((warn_unused_result))
#else
#define ZF_PRINTF(fmt_idx, arg_idx)
#define ZF_WARN_UNUSED
#endif

/* Builds an error status with a printf-formatted message. code must not be
 * ZF_OK (an OK status never carries a message). */
zf_status_t zf_status_new(zf_code_t code, const char *fmt, ...) ZF_PRINTF(2, 3);
zf_status_t zf_status_vnew(zf_code_t code, const char *fmt, va_list ap) ZF_PRINTF(2, 0);

/* Shorthands for the common codes. */
zf_status_t zf_invalid_argument(const char *fmt, ...) ZF_PRINTF(1, 2);
zf_status_t zf_not_found(const char *fmt, ...) ZF_PRINTF(1, 2);
zf_status_t zf_unimplemented(const char *fmt, ...) ZF_PRINTF(1, 2);
zf_status_t zf_internal(const char *fmt, ...) ZF_PRINTF(1, 2);
zf_status_t zf_out_of_memory(const char *what);

/* Frees the message and resets *s to OK. Safe on an OK status and on NULL. */
void zf_status_clear(zf_status_t *s);

static inline bool zf_ok(zf_status_t s)
{
    return s.code == ZF_OK;
}

/* The message, or "" for OK or a message-less error. Borrowed from *s. */
const char *zf_status_msg(const zf_status_t *s);

/* "INVALID_ARGUMENT", ...; "UNKNOWN_CODE" for a value out of range. */
const char *zf_code_name(zf_code_t code);

/* Parses a name from zf_code_name(); returns false if unknown. */
bool zf_code_from_name(const char *name, zf_code_t *out);

/* A status of its own with the same code and message (OK stays OK), for
 * handing one error to several owners. */
zf_status_t zf_status_copy(const zf_status_t *s);

/* Prepends "<formatted>: " to an error's message, keeping its code. Takes
 * the status by value and returns the updated one; OK passes through. */
zf_status_t zf_status_prefix(zf_status_t s, const char *fmt, ...) ZF_PRINTF(2, 3);

/* "OK" or "<CODE>: <message>". Caller owns the result (free()); NULL only on
 * allocation failure. */
char *zf_status_to_string(const zf_status_t *s);

/* Returns the status of expr from the enclosing function when it is an error. */
#define ZF_TRY(expr)                                                                               \
    do {                                                                                           \
        zf_status_t zf__try_s = (expr);                                                            \
        if (zf__try_s.code != ZF_OK) return zf__try_s;                                             \
    } while (0)

#endif
