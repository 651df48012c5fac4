/* Protobuf text format reader: a single-pass recursive-descent parser that
 * fills protobuf-c messages through their descriptors (writer: pbtxt_write.c). */
#include "common/pbtxt.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto_map.h"
#include "common/proto_util.h"

/* Field names and type names in error messages are cut to this length, so a
 * megabyte-long identifier does not become a megabyte-long error. */
#define S_MAX_SHOWN 64

typedef struct s_reader {
    const char *text; /* start of input, for line:column in errors */
    const char *p;    /* cursor */
    const char *end;
    char *scratch; /* decoded string literals; reused, grown geometrically */
    size_t scratch_cap;
    char found[S_MAX_SHOWN + 16]; /* what s_describe() last described */
} s_reader_t;

/* One decoded scalar, laid out so its first bytes are what the message
 * stores (every member sits at offset 0). */
typedef union s_value {
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f;
    double d;
    protobuf_c_boolean b;
    char *str;
    ProtobufCBinaryData bytes;
    ProtobufCMessage *msg;
} s_value_t;

static zf_status_t s_parse_body(s_reader_t *r, const ProtobufCMessageDescriptor *d,
                                ProtobufCMessage *m, char closer, const char *open_at,
                                unsigned depth);

/* ---- errors ---- */

static zf_status_t s_error_at(const s_reader_t *r, const char *at, const char *fmt, ...)
    ZF_PRINTF(3, 4);

/* Line and column are counted only when an error is reported, once per
 * failed parse, which keeps the hot path free of bookkeeping. */
static void s_line_col(const s_reader_t *r, const char *at, unsigned long *line, unsigned long *col)
{
    const char *line_start = r->text;
    *line = 1;
    for (const char *q = r->text; q < at;) {
        const char *nl = memchr(q, '\n', (size_t)(at - q));
        if (!nl) break;
        (*line)++;
        q = line_start = nl + 1;
    }
    *col = (unsigned long)(at - line_start) + 1;
}

static zf_status_t s_error_at(const s_reader_t *r, const char *at, const char *fmt, ...)
{
    unsigned long line, col;
    s_line_col(r, at, &line, &col);
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return zf_invalid_argument("%lu:%lu: %s", line, col, what);
}

static bool s_is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool s_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool s_is_alnum(char c)
{
    return s_is_alpha(c) || s_is_digit(c);
}

/* A short description of the token at `at`, for "found X" in messages. */
static const char *s_describe(s_reader_t *r, const char *at)
{
    if (at >= r->end) return "end of input";
    char c = *at;
    if (c == '"' || c == '\'') return "a string";
    if (s_is_alnum(c) || c == '.' || c == '-') {
        const char *q = at;
        while (q < r->end && (s_is_alnum(*q) || *q == '.' || *q == '-' || *q == '+')) q++;
        int n = (int)(q - at);
        snprintf(r->found, sizeof r->found, "'%.*s%s'", n > S_MAX_SHOWN ? S_MAX_SHOWN : n, at,
                 n > S_MAX_SHOWN ? "..." : "");
    } else if (c >= 0x20 && c < 0x7f) {
        snprintf(r->found, sizeof r->found, "'%c'", c);
    } else {
        snprintf(r->found, sizeof r->found, "byte 0x%02x", (unsigned)(unsigned char)c);
    }
    return r->found;
}

/* Shown length of an identifier in a message. */
static int s_shown(size_t n)
{
    return n > S_MAX_SHOWN ? S_MAX_SHOWN : (int)n;
}

/* ---- lexing ---- */

static void s_skip_space(s_reader_t *r)
{
    const char *p = r->p, *end = r->end;
    while (p < end) {
        char c = *p;
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            p++;
        } else if (c == '#') {
            p = memchr(p, '\n', (size_t)(end - p));
            if (!p) p = end;
        } else {
            break;
        }
    }
    r->p = p;
}

static bool s_at(const s_reader_t *r, char c)
{
    return r->p < r->end && *r->p == c;
}

static size_t s_ident_len(const s_reader_t *r)
{
    const char *q = r->p;
    if (q >= r->end || !s_is_alpha(*q)) return 0;
    while (q < r->end && s_is_alnum(*q)) q++;
    return (size_t)(q - r->p);
}

/* Byte-wise comparison of a token with a NUL-terminated name, ordered like
 * strcmp, which is how protobuf-c sorts names in its descriptors. */
static int s_cmp_name(const char *tok, size_t n, const char *name)
{
    int c = strncmp(tok, name, n);
    if (c != 0) return c;
    return name[n] ? -1 : 0;
}

static bool s_ident_is(const char *tok, size_t n, const char *word)
{
    return s_cmp_name(tok, n, word) == 0;
}

static bool s_ident_is_nocase(const char *tok, size_t n, const char *word)
{
    size_t i = 0;
    for (; i < n && word[i]; i++) {
        char c = tok[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != word[i]) return false;
    }
    return i == n && word[i] == '\0';
}

static const ProtobufCFieldDescriptor *s_find_field(const ProtobufCMessageDescriptor *d,
                                                    const char *name, size_t n)
{
    unsigned lo = 0, hi = d->n_fields;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        const ProtobufCFieldDescriptor *f = &d->fields[d->fields_sorted_by_name[mid]];
        int c = s_cmp_name(name, n, f->name);
        if (c == 0) return f;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

static const ProtobufCEnumValue *s_find_enum(const ProtobufCEnumDescriptor *e, const char *name,
                                             size_t n)
{
    unsigned lo = 0, hi = e->n_value_names;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        int c = s_cmp_name(name, n, e->values_by_name[mid].name);
        if (c == 0) return &e->values[e->values_by_name[mid].index];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* ---- numbers ---- */

typedef struct s_number {
    const char *start, *end; /* the token, without a sign */
    bool is_float;           /* has '.', an exponent or an f suffix */
    int base;                /* 8, 10 or 16 when !is_float */
} s_number_t;

static bool s_at_number(const s_reader_t *r)
{
    const char *p = r->p;
    if (p >= r->end) return false;
    if (s_is_digit(*p)) return true;
    return *p == '.' && p + 1 < r->end && s_is_digit(p[1]);
}

static bool s_is_hex(char c)
{
    return s_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned s_hex_val(char c)
{
    if (c <= '9') return (unsigned)(c - '0');
    if (c >= 'a') return (unsigned)(c - 'a' + 10);
    return (unsigned)(c - 'A' + 10);
}

/* Lexes a number at the cursor (s_at_number() is true) and advances. */
static zf_status_t s_lex_number(s_reader_t *r, s_number_t *num)
{
    const char *p = r->p, *end = r->end;
    num->start = p;
    num->is_float = false;
    num->base = 10;
    if (*p == '0' && p + 1 < end && (p[1] == 'x' || p[1] == 'X')) {
        p += 2;
        num->base = 16;
        if (p >= end || !s_is_hex(*p)) return s_error_at(r, num->start, "invalid hex number");
        while (p < end && s_is_hex(*p)) p++;
    } else {
        while (p < end && s_is_digit(*p)) p++;
        if (p < end && *p == '.') {
            num->is_float = true;
            p++;
            while (p < end && s_is_digit(*p)) p++;
        }
        if (p < end && (*p == 'e' || *p == 'E')) {
            num->is_float = true;
            p++;
            if (p < end && (*p == '+' || *p == '-')) p++;
            if (p >= end || !s_is_digit(*p))
                return s_error_at(r, num->start, "invalid number: exponent has no digits");
            while (p < end && s_is_digit(*p)) p++;
        }
        if (p < end && (*p == 'f' || *p == 'F')) {
            num->is_float = true;
            p++;
        }
        if (!num->is_float && *num->start == '0' && p - num->start > 1) {
            num->base = 8;
            for (const char *q = num->start; q < p; q++)
                if (*q > '7')
                    return s_error_at(r, num->start,
                                      "invalid octal number (a leading 0 means octal)");
        }
    }
    if (p < end && (s_is_alnum(*p) || *p == '.')) {
        r->p = p;
        return s_error_at(r, num->start, "invalid number %s", s_describe(r, num->start));
    }
    num->end = p;
    r->p = p;
    return ZF_STATUS_OK;
}

/* The magnitude of an integer token; false when it does not fit 64 bits. */
static bool s_number_to_u64(const s_number_t *num, uint64_t *out)
{
    const char *p = num->start;
    if (num->base == 16) p += 2;
    uint64_t v = 0;
    for (; p < num->end; p++) {
        unsigned digit = s_hex_val(*p);
        if (v > (UINT64_MAX - digit) / (unsigned)num->base) return false;
        v = v * (unsigned)num->base + digit;
    }
    *out = v;
    return true;
}

/* Consumes an optional '-'. Spaces and comments may follow it: protobuf's
 * tokenizer makes the sign a token of its own. */
static bool s_consume_sign(s_reader_t *r)
{
    if (!s_at(r, '-')) return false;
    r->p++;
    s_skip_space(r);
    return true;
}

static const char *s_type_name(ProtobufCType type)
{
    /* In ProtobufCType order. */
    static const char *const names[] = {"int32",    "sint32", "sfixed32", "int64",  "sint64",
                                        "sfixed64", "uint32", "fixed32",  "uint64", "fixed64",
                                        "float",    "double", "bool",     "enum",   "string",
                                        "bytes",    "message"};
    return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

/* Integer fields and enum numbers: sign, magnitude, and a range check for
 * the field's type (enums are int32). */
static zf_status_t s_read_int(s_reader_t *r, const ProtobufCFieldDescriptor *f, s_value_t *v)
{
    const char *at = r->p;
    bool neg = s_consume_sign(r);
    if (!s_at_number(r))
        return s_error_at(r, r->p, "expected integer for field '%s', found %s", f->name,
                          s_describe(r, r->p));
    s_number_t num;
    ZF_TRY(s_lex_number(r, &num));
    if (num.is_float)
        return s_error_at(r, num.start, "expected integer for field '%s', found %s", f->name,
                          s_describe(r, num.start));
    uint64_t mag = 0;
    bool fits = s_number_to_u64(&num, &mag);
    bool is64 = zf_proto_elem_size(f->type) == 8;
    switch (f->type) {
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        fits = fits && !(neg && mag) && (is64 || mag <= UINT32_MAX);
        if (is64)
            v->u64 = mag;
        else
            v->u32 = (uint32_t)mag;
        break;
    default: {
        uint64_t limit = is64 ? (uint64_t)INT64_MAX : (uint64_t)INT32_MAX;
        fits = fits && mag <= limit + (neg ? 1 : 0);
        /* Two's complement negation in unsigned arithmetic avoids the
         * overflow of -INT64_MIN. */
        uint64_t bits = neg ? (uint64_t)0 - mag : mag;
        if (is64)
            v->i64 = (int64_t)bits;
        else
            v->i32 = (int32_t)(uint32_t)bits;
        break;
    }
    }
    if (!fits)
        return s_error_at(r, at, "integer %s%.*s is out of range for %s field '%s'", neg ? "-" : "",
                          s_shown((size_t)(num.end - num.start)), num.start, s_type_name(f->type),
                          f->name);
    return ZF_STATUS_OK;
}

/* Decimal digits go to strtod on a NUL-terminated copy (the input need not be
 * terminated, and strtod alone would also take forms the text format does
 * not, such as hex floats). */
static zf_status_t s_decimal_to_double(const s_number_t *num, double *out)
{
    size_t n = (size_t)(num->end - num->start);
    if (n && (num->end[-1] == 'f' || num->end[-1] == 'F')) n--;
    char small[128];
    char *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf) return zf_out_of_memory("pbtxt number");
    memcpy(buf, num->start, n);
    buf[n] = '\0';
    *out = strtod(buf, NULL);
    if (buf != small) free(buf);
    return ZF_STATUS_OK;
}

static zf_status_t s_read_double(s_reader_t *r, const ProtobufCFieldDescriptor *f, double *out)
{
    bool neg = s_consume_sign(r);
    size_t n = s_ident_len(r);
    double v = 0;
    if (n) {
        if (s_ident_is_nocase(r->p, n, "inf") || s_ident_is_nocase(r->p, n, "infinity")) {
            v = INFINITY;
        } else if (s_ident_is_nocase(r->p, n, "nan")) {
            v = NAN;
        } else {
            return s_error_at(r, r->p, "expected number for field '%s', found %s", f->name,
                              s_describe(r, r->p));
        }
        r->p += n;
    } else if (s_at_number(r)) {
        s_number_t num;
        ZF_TRY(s_lex_number(r, &num));
        /* protobuf takes only decimal integers for floating-point fields. */
        if (!num.is_float && num.base != 10)
            return s_error_at(r, num.start, "expected a decimal number for field '%s', found %s",
                              f->name, s_describe(r, num.start));
        ZF_TRY(s_decimal_to_double(&num, &v));
    } else {
        return s_error_at(r, r->p, "expected number for field '%s', found %s", f->name,
                          s_describe(r, r->p));
    }
    *out = neg ? -v : v;
    return ZF_STATUS_OK;
}

static zf_status_t s_read_bool(s_reader_t *r, const ProtobufCFieldDescriptor *f, s_value_t *v)
{
    const char *at = r->p;
    size_t n = s_ident_len(r);
    if (n) {
        const char *t = r->p;
        if (s_ident_is(t, n, "true") || s_ident_is(t, n, "True") || s_ident_is(t, n, "t")) {
            v->b = 1;
        } else if (s_ident_is(t, n, "false") || s_ident_is(t, n, "False") ||
                   s_ident_is(t, n, "f")) {
            v->b = 0;
        } else {
            return s_error_at(r, at, "invalid value %s for bool field '%s'", s_describe(r, at),
                              f->name);
        }
        r->p += n;
        return ZF_STATUS_OK;
    }
    if (s_at_number(r)) {
        s_number_t num;
        uint64_t mag = 0;
        ZF_TRY(s_lex_number(r, &num));
        if (!num.is_float && s_number_to_u64(&num, &mag) && mag <= 1) {
            v->b = (protobuf_c_boolean)mag;
            return ZF_STATUS_OK;
        }
    }
    return s_error_at(r, at, "invalid value %s for bool field '%s'", s_describe(r, at), f->name);
}

static zf_status_t s_read_enum(s_reader_t *r, const ProtobufCFieldDescriptor *f, s_value_t *v)
{
    size_t n = s_ident_len(r);
    if (!n && (s_at_number(r) || s_at(r, '-')))
        return s_read_int(r, f, v); /* a number; open enums keep unknown ones */
    if (!n)
        return s_error_at(r, r->p, "expected enum value (name or number) for field '%s', found %s",
                          f->name, s_describe(r, r->p));
    const ProtobufCEnumValue *ev = s_find_enum(f->descriptor, r->p, n);
    if (!ev) {
        const ProtobufCEnumDescriptor *e = f->descriptor;
        return s_error_at(r, r->p, "unknown enum value '%.*s%s' for field '%s' of type %s",
                          s_shown(n), r->p, n > S_MAX_SHOWN ? "..." : "", f->name, e->name);
    }
    v->i32 = ev->value;
    r->p += n;
    return ZF_STATUS_OK;
}

/* ---- strings ---- */

static zf_status_t s_scratch_reserve(s_reader_t *r, size_t used, size_t more)
{
    if (more <= r->scratch_cap - used) return ZF_STATUS_OK;
    size_t cap = r->scratch_cap ? r->scratch_cap : 256;
    while (cap - used < more) {
        if (cap > SIZE_MAX / 2) return zf_out_of_memory("pbtxt string");
        cap *= 2;
    }
    char *grown = realloc(r->scratch, cap);
    if (!grown) return zf_out_of_memory("pbtxt string");
    r->scratch = grown;
    r->scratch_cap = cap;
    return ZF_STATUS_OK;
}

/* UTF-8 for a \u or \U escape (protobuf accepts lone surrogates as-is). */
static size_t s_put_utf8(char *dst, uint32_t cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xc0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xe0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        dst[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    dst[0] = (char)(0xf0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    dst[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Reads exactly `digits` hex digits after p; false if they are not there. */
static bool s_hex_run(const s_reader_t *r, const char *p, int digits, uint32_t *out)
{
    uint32_t v = 0;
    if (r->end - p < digits) return false;
    for (int i = 0; i < digits; i++) {
        if (!s_is_hex(p[i])) return false;
        v = v << 4 | s_hex_val(p[i]);
    }
    *out = v;
    return true;
}

/* Decodes the escape at *pp (a backslash, with at least one byte after it)
 * into dst (room for 4 bytes). */
static zf_status_t s_unescape(s_reader_t *r, const char **pp, char *dst, size_t *dlen)
{
    const char *bs = *pp, *p = bs + 1;
    static const char simple_in[] = "ntr\\'\"?abfv";
    static const char simple_out[] = "\n\t\r\\'\"?\a\b\f\v";
    const char *hit = *p ? strchr(simple_in, *p) : NULL;
    if (hit) {
        *dst = simple_out[hit - simple_in];
        *dlen = 1;
        *pp = p + 1;
        return ZF_STATUS_OK;
    }
    if (*p >= '0' && *p <= '7') {
        unsigned v = 0;
        for (int i = 0; i < 3 && p < r->end && *p >= '0' && *p <= '7'; i++, p++)
            v = v * 8 + (unsigned)(*p - '0');
        if (v > 0xff)
            return s_error_at(r, bs, "octal escape '\\%.3s' is out of range (above \\377)", bs + 1);
        *dst = (char)v;
        *dlen = 1;
        *pp = p;
        return ZF_STATUS_OK;
    }
    if (*p == 'x' || *p == 'X') {
        unsigned v = 0;
        int i = 0;
        for (p++; i < 2 && p < r->end && s_is_hex(*p); i++, p++) v = v * 16 + s_hex_val(*p);
        if (i == 0) return s_error_at(r, bs, "invalid escape '\\x' without hex digits");
        *dst = (char)v;
        *dlen = 1;
        *pp = p;
        return ZF_STATUS_OK;
    }
    if (*p == 'u' || *p == 'U') {
        int digits = *p == 'u' ? 4 : 8;
        uint32_t cp, lo;
        if (!s_hex_run(r, p + 1, digits, &cp) || cp > 0x10ffff)
            return s_error_at(r, bs,
                              "invalid unicode escape '\\%c' (needs %d hex digits, at most "
                              "10ffff)",
                              *p, digits);
        p += 1 + digits;
        /* A high surrogate followed by an escaped low one is one code point. */
        if (cp >= 0xd800 && cp < 0xdc00 && r->end - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
            s_hex_run(r, p + 2, 4, &lo) && lo >= 0xdc00 && lo < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            p += 6;
        }
        *dlen = s_put_utf8(dst, cp);
        *pp = p;
        return ZF_STATUS_OK;
    }
    if (*p >= 0x20 && *p < 0x7f) return s_error_at(r, bs, "invalid escape '\\%c'", *p);
    return s_error_at(r, bs, "invalid escape '\\' followed by byte 0x%02x",
                      (unsigned)(unsigned char)*p);
}

/* Decodes one quoted literal at the cursor, appending to scratch at *len. */
static zf_status_t s_read_literal(s_reader_t *r, size_t *len)
{
    const char *open = r->p, *p = r->p + 1, *end = r->end;
    char quote = *open;
    for (;;) {
        const char *run = p;
        while (p < end && *p != quote && *p != '\\' && *p != '\n') p++;
        size_t n = (size_t)(p - run);
        ZF_TRY(s_scratch_reserve(r, *len, n + 4));
        memcpy(r->scratch + *len, run, n);
        *len += n;
        if (p >= end || *p == '\n') return s_error_at(r, open, "unterminated string");
        if (*p == quote) break;
        if (p + 1 >= end) return s_error_at(r, open, "unterminated string");
        size_t dlen = 0;
        ZF_TRY(s_unescape(r, &p, r->scratch + *len, &dlen));
        *len += dlen;
    }
    r->p = p + 1;
    return ZF_STATUS_OK;
}

/* One or more adjacent literals ("ab" 'cd'), decoded into scratch. */
static zf_status_t s_read_string(s_reader_t *r, const ProtobufCFieldDescriptor *f, s_value_t *v)
{
    const char *at = r->p;
    if (!s_at(r, '"') && !s_at(r, '\''))
        return s_error_at(r, at, "expected string for field '%s', found %s", f->name,
                          s_describe(r, at));
    size_t len = 0;
    do {
        ZF_TRY(s_read_literal(r, &len));
        s_skip_space(r);
    } while (s_at(r, '"') || s_at(r, '\''));
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        /* protobuf-c strings are NUL-terminated, so they cannot hold a NUL. */
        if (len && memchr(r->scratch, '\0', len))
            return s_error_at(r, at, "string field '%s' cannot hold a NUL byte (use bytes)",
                              f->name);
        v->str = malloc(len + 1);
        if (!v->str) return zf_out_of_memory("pbtxt string");
        if (len) memcpy(v->str, r->scratch, len);
        v->str[len] = '\0';
        return ZF_STATUS_OK;
    }
    v->bytes.len = len;
    v->bytes.data = NULL; /* as protobuf-c's unpack leaves empty bytes */
    if (len) {
        v->bytes.data = malloc(len);
        if (!v->bytes.data) return zf_out_of_memory("pbtxt bytes");
        memcpy(v->bytes.data, r->scratch, len);
    }
    return ZF_STATUS_OK;
}

/* ---- values into messages ---- */

static zf_status_t s_read_scalar(s_reader_t *r, const ProtobufCFieldDescriptor *f, s_value_t *v)
{
    double d;
    switch (f->type) {
    case PROTOBUF_C_TYPE_FLOAT:
        ZF_TRY(s_read_double(r, f, &d));
        v->f = zf__pbtxt_double_to_float(d);
        return ZF_STATUS_OK;
    case PROTOBUF_C_TYPE_DOUBLE: return s_read_double(r, f, &v->d);
    case PROTOBUF_C_TYPE_BOOL: return s_read_bool(r, f, v);
    case PROTOBUF_C_TYPE_ENUM: return s_read_enum(r, f, v);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES: return s_read_string(r, f, v);
    case PROTOBUF_C_TYPE_MESSAGE: return zf_internal("pbtxt: message field read as scalar");
    default: return s_read_int(r, f, v);
    }
}

static void s_value_free(const ProtobufCFieldDescriptor *f, s_value_t *v)
{
    if (f->type == PROTOBUF_C_TYPE_STRING)
        free(v->str);
    else if (f->type == PROTOBUF_C_TYPE_BYTES)
        free(v->bytes.data);
}

/* Appends one element to a repeated field. Arrays grow geometrically to the
 * next power of two (from 4) at the counts where the implicit capacity is
 * full, so no capacity needs storing beside protobuf-c's n_ count. */
static zf_status_t s_append(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            const s_value_t *v)
{
    size_t *n = (size_t *)((char *)m + f->quantifier_offset);
    void **arr = (void **)((char *)m + f->offset);
    size_t esz = zf_proto_elem_size(f->type);
    if (*n == 0 || (*n >= 4 && (*n & (*n - 1)) == 0)) {
        size_t cap = *n ? *n * 2 : 4;
        if (cap > SIZE_MAX / esz) return zf_out_of_memory("pbtxt repeated field");
        void *grown = realloc(*arr, cap * esz);
        if (!grown) return zf_out_of_memory("pbtxt repeated field");
        *arr = grown;
    }
    memcpy((char *)*arr + *n * esz, v, esz);
    (*n)++;
    return ZF_STATUS_OK;
}

/* Stores a value in a singular field and marks it present: the has_ flag of a
 * proto2 optional scalar, or the case of a oneof. */
static void s_set(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, const s_value_t *v)
{
    memcpy((char *)m + f->offset, v, zf_proto_elem_size(f->type));
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        *(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
    } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
               f->type != PROTOBUF_C_TYPE_MESSAGE) {
        *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
    }
}

/* Takes ownership of *v: it ends up in the message or is freed. */
static zf_status_t s_store(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, s_value_t *v)
{
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
        s_set(m, f, v);
        return ZF_STATUS_OK;
    }
    zf_status_t s = s_append(m, f, v);
    if (!zf_ok(s)) s_value_free(f, v);
    return s;
}

/* A `{ ... }` or `< ... >` value: the submessage is linked into m before its
 * body is read, so a failure part-way leaves one tree to free. */
static zf_status_t s_read_message(s_reader_t *r, ProtobufCMessage *m,
                                  const ProtobufCFieldDescriptor *f, unsigned depth)
{
    const char *open = r->p;
    if (!s_at(r, '{') && !s_at(r, '<'))
        return s_error_at(r, open, "expected '{' or '<' for message field '%s', found %s", f->name,
                          s_describe(r, open));
    if (depth + 1 > ZF_PBTXT_MAX_DEPTH)
        return s_error_at(r, open, "nesting deeper than %d levels", ZF_PBTXT_MAX_DEPTH);
    const ProtobufCMessageDescriptor *sd = f->descriptor;
    s_value_t v;
    v.msg = malloc(sd->sizeof_message);
    if (!v.msg) return zf_out_of_memory("pbtxt message");
    protobuf_c_message_init(sd, v.msg);
    ProtobufCMessage *sub = v.msg;
    zf_status_t s = s_store(m, f, &v);
    if (!zf_ok(s)) {
        free(sub);
        return s;
    }
    r->p++;
    return s_parse_body(r, sd, sub, *open == '{' ? '}' : '>', open, depth + 1);
}

static zf_status_t s_read_element(s_reader_t *r, ProtobufCMessage *m,
                                  const ProtobufCFieldDescriptor *f, unsigned depth)
{
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) return s_read_message(r, m, f, depth);
    s_value_t v;
    ZF_TRY(s_read_scalar(r, f, &v));
    return s_store(m, f, &v);
}

/* `[a, b, ...]` for a repeated field; the cursor is on the '['. */
static zf_status_t s_read_list(s_reader_t *r, ProtobufCMessage *m,
                               const ProtobufCFieldDescriptor *f, unsigned depth)
{
    r->p++;
    s_skip_space(r);
    if (s_at(r, ']')) {
        r->p++;
        return ZF_STATUS_OK;
    }
    for (;;) {
        ZF_TRY(s_read_element(r, m, f, depth));
        s_skip_space(r);
        if (s_at(r, ']')) break;
        if (r->p >= r->end) return s_error_at(r, r->p, "expected ']' but reached end of input");
        if (!s_at(r, ','))
            return s_error_at(r, r->p, "expected ',' or ']' in the list for field '%s', found %s",
                              f->name, s_describe(r, r->p));
        r->p++;
        s_skip_space(r);
    }
    r->p++;
    return ZF_STATUS_OK;
}

/* The checks protobuf's parser makes before a singular field is set: not
 * already set, and no other member of its oneof set. */
static zf_status_t s_check_singular(s_reader_t *r, const ProtobufCMessageDescriptor *d,
                                    const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                                    uint64_t *seen, const char *at)
{
    unsigned idx = (unsigned)(f - d->fields);
    if (seen[idx / 64] & (UINT64_C(1) << (idx % 64)))
        return s_error_at(r, at, "non-repeated field '%s' is set twice in %s", f->name, d->name);
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t current = *(const uint32_t *)((const char *)m + f->quantifier_offset);
        const ProtobufCFieldDescriptor *other =
            current ? protobuf_c_message_descriptor_get_field(d, current) : NULL;
        if (other && other != f)
            return s_error_at(r, at,
                              "fields '%s' and '%s' of %s are in the same oneof; only one may be "
                              "set",
                              other->name, f->name, d->name);
    }
    seen[idx / 64] |= UINT64_C(1) << (idx % 64);
    return ZF_STATUS_OK;
}

/* One `name: value`, `name { ... }` or `name: [ ... ]`, with its optional
 * trailing ';' or ','. */
static zf_status_t s_parse_field(s_reader_t *r, const ProtobufCMessageDescriptor *d,
                                 ProtobufCMessage *m, uint64_t *seen, unsigned depth)
{
    const char *at = r->p;
    size_t n = s_ident_len(r);
    if (!n) {
        if (s_at(r, '['))
            return s_error_at(r, at, "extension and Any fields ('[...]') are not supported");
        return s_error_at(r, at, "expected field name, found %s", s_describe(r, at));
    }
    const ProtobufCFieldDescriptor *f = s_find_field(d, at, n);
    if (!f)
        return s_error_at(r, at, "unknown field '%.*s%s' in %s", s_shown(n), at,
                          n > S_MAX_SHOWN ? "..." : "", d->name);
    r->p += n;
    s_skip_space(r);
    bool colon = s_at(r, ':');
    if (colon) {
        r->p++;
        s_skip_space(r);
    }
    bool is_msg = f->type == PROTOBUF_C_TYPE_MESSAGE;
    if (!colon && !is_msg)
        return s_error_at(r, r->p, "expected ':' after field '%s', found %s", f->name,
                          s_describe(r, r->p));
    if (s_at(r, '[')) {
        if (f->label != PROTOBUF_C_LABEL_REPEATED)
            return s_error_at(r, r->p, "field '%s' is not repeated and cannot take a list",
                              f->name);
        ZF_TRY(s_read_list(r, m, f, depth));
    } else {
        if (f->label != PROTOBUF_C_LABEL_REPEATED) ZF_TRY(s_check_singular(r, d, m, f, seen, at));
        ZF_TRY(s_read_element(r, m, f, depth));
    }
    s_skip_space(r);
    if (s_at(r, ';') || s_at(r, ',')) r->p++;
    return ZF_STATUS_OK;
}

/* proto2 required fields must be present, as protobuf's parser insists. */
static zf_status_t s_check_required(s_reader_t *r, const ProtobufCMessageDescriptor *d,
                                    const uint64_t *seen)
{
    for (unsigned i = 0; i < d->n_fields; i++) {
        if (d->fields[i].label == PROTOBUF_C_LABEL_REQUIRED &&
            !(seen[i / 64] & (UINT64_C(1) << (i % 64))))
            return s_error_at(r, r->p, "missing required field '%s' in %s", d->fields[i].name,
                              d->name);
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_parse_fields(s_reader_t *r, const ProtobufCMessageDescriptor *d,
                                  ProtobufCMessage *m, char closer, const char *open_at,
                                  unsigned depth, uint64_t *seen)
{
    for (;;) {
        s_skip_space(r);
        if (r->p >= r->end) {
            if (!closer) break;
            unsigned long line, col;
            s_line_col(r, open_at, &line, &col);
            return s_error_at(r, r->p,
                              "expected '%c' but reached end of input (the '%c' at %lu:%lu "
                              "opening a %s is not closed)",
                              closer, *open_at, line, col, d->name);
        }
        char c = *r->p;
        if (closer && c == closer) {
            r->p++;
            break;
        }
        if (c == '}' || c == '>') {
            if (closer) return s_error_at(r, r->p, "expected '%c' but found '%c'", closer, c);
            return s_error_at(r, r->p, "unexpected '%c' outside any message", c);
        }
        ZF_TRY(s_parse_field(r, d, m, seen, depth));
    }
    return s_check_required(r, d, seen);
}

/* Reads fields into m until closer (or the end of input when closer is 0).
 * The set of fields already given lives on the stack for the common case. */
static zf_status_t s_parse_body(s_reader_t *r, const ProtobufCMessageDescriptor *d,
                                ProtobufCMessage *m, char closer, const char *open_at,
                                unsigned depth)
{
    uint64_t small[4] = {0};
    uint64_t *seen = small;
    size_t words = (d->n_fields + 63) / 64;
    if (words > sizeof small / sizeof small[0]) {
        seen = calloc(words, sizeof *seen);
        if (!seen) return zf_out_of_memory("pbtxt field set");
    }
    zf_status_t s = s_parse_fields(r, d, m, closer, open_at, depth, seen);
    if (seen != small) free(seen);
    return s;
}

zf_status_t zf_pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                           ProtobufCMessage **out)
{
    if (out) *out = NULL;
    if (!desc || !out || (!text && len) || desc->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC)
        return zf_invalid_argument("zf_pbtxt_parse: NULL or invalid argument");
    ProtobufCMessage *m = malloc(desc->sizeof_message);
    if (!m) return zf_out_of_memory("pbtxt message");
    protobuf_c_message_init(desc, m);
    const char *base = text ? text : "";
    s_reader_t r = {.text = base, .p = base, .end = base + len};
    zf_status_t s = s_parse_body(&r, desc, m, 0, NULL, 0);
    free(r.scratch);
    if (zf_ok(s)) s = zf_proto_collapse_map_keys(m);
    if (!zf_ok(s)) {
        protobuf_c_message_free_unpacked(m, NULL);
        return s;
    }
    *out = m;
    return ZF_STATUS_OK;
}
