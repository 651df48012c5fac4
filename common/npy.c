/* NumPy .npy reading and writing: header dict parsing, dtype mapping,
 * byte order and Fortran-order conversion. */
#include "common/npy.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/byte_order.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c assumes a little-endian host"
#endif

#define S_MAGIC         "\x93NUMPY"
#define S_MAGIC_LEN     6
#define S_ALIGN         64
#define S_MAX_HEADER    (1u << 20) /* NumPy itself refuses headers above 10000 bytes */
#define S_GROWTH_DIGITS 21         /* NumPy leaves room to grow the first axis in place */
#define S_MAX_CHARS     (1u << 24) /* widest 'S' / 'U' element accepted */

static const struct {
    char kind;
    unsigned size;
    zf_dtype_t dtype;
} s_types[] = {
    {'f', 2, ZF_HALF},      {'f', 4, ZF_FLOAT},       {'f', 8, ZF_DOUBLE}, {'i', 1, ZF_INT8},
    {'i', 2, ZF_INT16},     {'i', 4, ZF_INT32},       {'i', 8, ZF_INT64},  {'u', 1, ZF_UINT8},
    {'u', 2, ZF_UINT16},    {'u', 4, ZF_UINT32},      {'u', 8, ZF_UINT64}, {'b', 1, ZF_BOOL},
    {'c', 8, ZF_COMPLEX64}, {'c', 16, ZF_COMPLEX128},
};

/* What the header says. */
typedef struct {
    zf_dtype_t dtype;
    char kind;       /* 'f', 'i', 'u', 'b', 'c', 'S' or 'U' */
    size_t itemsize; /* bytes per element in the file */
    bool swap;       /* big-endian data */
    bool fortran;
    zf_shape_t shape;
    int64_t n;
    size_t nbytes;
} s_header_t;

static zf_status_t s_bad(const char *fmt, ...) ZF_PRINTF(1, 2);
static zf_status_t s_bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    zf_status_t s = zf_status_vnew(ZF_INVALID_ARGUMENT, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- header dict -------------------------------------------------------- */

typedef struct {
    const char *p, *end;
} s_lex_t;

static void s_skip_ws(s_lex_t *lx)
{
    while (lx->p < lx->end && isspace((unsigned char)*lx->p)) lx->p++;
}

static bool s_accept(s_lex_t *lx, char c)
{
    s_skip_ws(lx);
    if (lx->p < lx->end && *lx->p == c) {
        lx->p++;
        return true;
    }
    return false;
}

static bool s_peek(s_lex_t *lx, char c)
{
    s_skip_ws(lx);
    return lx->p < lx->end && *lx->p == c;
}

/* A Python string literal without escapes ('x' or "x") into buf. */
static bool s_parse_str(s_lex_t *lx, char *buf, size_t cap)
{
    s_skip_ws(lx);
    if (lx->p >= lx->end || (*lx->p != '\'' && *lx->p != '"')) return false;
    char quote = *lx->p++;
    size_t n = 0;
    while (lx->p < lx->end && *lx->p != quote) {
        if (*lx->p == '\\' || *lx->p == '\n' || n + 1 >= cap) return false;
        buf[n++] = *lx->p++;
    }
    if (lx->p >= lx->end) return false;
    lx->p++;
    buf[n] = '\0';
    return true;
}

/* An identifier such as True, not followed by more identifier characters. */
static bool s_accept_word(s_lex_t *lx, const char *word)
{
    s_skip_ws(lx);
    size_t n = strlen(word);
    if ((size_t)(lx->end - lx->p) < n || memcmp(lx->p, word, n) != 0) return false;
    if (lx->p + n < lx->end && (isalnum((unsigned char)lx->p[n]) || lx->p[n] == '_')) return false;
    lx->p += n;
    return true;
}

static zf_status_t s_parse_dim(s_lex_t *lx, int64_t *out)
{
    s_skip_ws(lx);
    if (lx->p >= lx->end || !isdigit((unsigned char)*lx->p))
        return s_bad("npy: 'shape' must be a tuple of non-negative integers");
    uint64_t v = 0;
    while (lx->p < lx->end && isdigit((unsigned char)*lx->p)) {
        unsigned d = (unsigned)(*lx->p++ - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10) return s_bad("npy: a shape dim is too large");
        v = v * 10 + d;
    }
    if (lx->p < lx->end && (*lx->p == 'L' || *lx->p == 'l')) lx->p++; /* Python 2 longs */
    *out = (int64_t)v;
    return ZF_STATUS_OK;
}

static zf_status_t s_parse_shape(s_lex_t *lx, zf_shape_t *shape)
{
    if (!s_accept(lx, '(')) return s_bad("npy: 'shape' must be a tuple of non-negative integers");
    int64_t dims[ZF_MAX_RANK];
    int rank = 0;
    bool comma = false;
    while (!s_accept(lx, ')')) {
        if (rank == ZF_MAX_RANK)
            return s_bad("npy: shape rank exceeds the maximum rank %d", ZF_MAX_RANK);
        ZF_TRY(s_parse_dim(lx, &dims[rank++]));
        comma = s_accept(lx, ',');
        if (!comma && !s_peek(lx, ')')) return s_bad("npy: malformed 'shape' tuple");
    }
    if (rank == 1 && !comma) return s_bad("npy: 'shape' must be a tuple, like (3,)");
    return zf_shape_make(rank, dims, shape);
}

static zf_status_t s_parse_descr(const char *descr, s_header_t *h)
{
    const char *p = descr;
    char order = '=';
    if (*p && strchr("<>=|", *p)) order = *p++;
    char kind = *p ? *p++ : '\0';
    if (kind == 'O') return zf_unimplemented("npy: object arrays ('%s') are not supported", descr);
    if (!isdigit((unsigned char)*p) || (kind == '\0'))
        return zf_unimplemented("npy: dtype '%s' is not supported", descr);
    unsigned long size = 0;
    while (isdigit((unsigned char)*p)) {
        size = size * 10 + (unsigned long)(*p++ - '0');
        if (size > S_MAX_CHARS) return zf_unimplemented("npy: dtype '%s' is too wide", descr);
    }
    if (*p) return zf_unimplemented("npy: dtype '%s' is not supported", descr);
    h->kind = kind;
    h->swap = order == '>';
    if (kind == 'S' || kind == 'U') {
        if (size == 0) return s_bad("npy: dtype '%s' has zero width", descr);
        h->dtype = ZF_STRING;
        h->itemsize = kind == 'U' ? 4 * size : size;
        return ZF_STATUS_OK;
    }
    for (size_t i = 0; i < sizeof s_types / sizeof s_types[0]; i++) {
        if (s_types[i].kind == kind && s_types[i].size == size) {
            h->dtype = s_types[i].dtype;
            h->itemsize = size;
            return ZF_STATUS_OK;
        }
    }
    return zf_unimplemented("npy: dtype '%s' is not supported", descr);
}

static zf_status_t s_parse_value(s_lex_t *lx, const char *key, s_header_t *h, char *descr,
                                 size_t descr_cap)
{
    if (strcmp(key, "descr") == 0) {
        if (s_peek(lx, '['))
            return zf_unimplemented("npy: structured dtypes (a list 'descr') are not supported");
        if (!s_parse_str(lx, descr, descr_cap)) return s_bad("npy: 'descr' must be a dtype string");
        return ZF_STATUS_OK;
    }
    if (strcmp(key, "fortran_order") == 0) {
        if (s_accept_word(lx, "True"))
            h->fortran = true;
        else if (s_accept_word(lx, "False"))
            h->fortran = false;
        else
            return s_bad("npy: 'fortran_order' must be True or False");
        return ZF_STATUS_OK;
    }
    if (strcmp(key, "shape") == 0) return s_parse_shape(lx, &h->shape);
    return s_bad("npy: header has an unexpected key '%s'", key);
}

static zf_status_t s_parse_dict(const char *text, size_t len, s_header_t *h)
{
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    bool seen[3] = {false, false, false};
    char descr[64] = "";
    s_lex_t lx = {text, text + len};
    if (!s_accept(&lx, '{')) return s_bad("npy: header is not a dict");
    while (!s_accept(&lx, '}')) {
        char key[32];
        if (!s_parse_str(&lx, key, sizeof key)) return s_bad("npy: header dict has a bad key");
        if (!s_accept(&lx, ':')) return s_bad("npy: header dict: expected ':' after '%s'", key);
        for (int k = 0; k < 3; k++) {
            if (strcmp(key, keys[k]) != 0) continue;
            if (seen[k]) return s_bad("npy: header has key '%s' twice", key);
            seen[k] = true;
        }
        ZF_TRY(s_parse_value(&lx, key, h, descr, sizeof descr));
        if (!s_accept(&lx, ',')) {
            if (!s_accept(&lx, '}')) return s_bad("npy: header dict: expected ',' or '}'");
            break;
        }
    }
    s_skip_ws(&lx);
    if (lx.p != lx.end) return s_bad("npy: unexpected text after the header dict");
    for (int k = 0; k < 3; k++)
        if (!seen[k]) return s_bad("npy: header has no '%s' key", keys[k]);
    return s_parse_descr(descr, h);
}

/* ---- reading ------------------------------------------------------------ */

static zf_status_t s_read_header(const uint8_t *d, size_t len, s_header_t *h, size_t *data_off)
{
    if (len < S_MAGIC_LEN + 2 || memcmp(d, S_MAGIC, S_MAGIC_LEN) != 0)
        return s_bad("npy: bad magic (not a .npy file)");
    unsigned major = d[6], minor = d[7];
    if (major < 1 || major > 3) return s_bad("npy: unsupported format version %u.%u", major, minor);
    size_t hsize = major == 1 ? 2 : 4;
    if (len < S_MAGIC_LEN + 2 + hsize) return s_bad("npy: truncated header length");
    size_t hlen = major == 1 ? (size_t)(d[8] | d[9] << 8) : (size_t)zf_le32(d + 8);
    size_t start = S_MAGIC_LEN + 2 + hsize;
    if (hlen > S_MAX_HEADER) return s_bad("npy: header of %zu bytes is too long", hlen);
    if (hlen > len - start)
        return s_bad("npy: truncated header (%zu bytes declared, %zu present)", hlen, len - start);
    memset(h, 0, sizeof *h);
    ZF_TRY(s_parse_dict((const char *)d + start, hlen, h));
    ZF_TRY(zf_shape_num_elements(&h->shape, &h->n));
    if ((uint64_t)h->n > SIZE_MAX / h->itemsize) return s_bad("npy: array is too large");
    h->nbytes = (size_t)h->n * h->itemsize;
    *data_off = start + hlen;
    return ZF_STATUS_OK;
}

static void s_swap_bytes(uint8_t *p, size_t count, size_t width)
{
    for (size_t i = 0; i < count; i++, p += width)
        for (size_t a = 0, b = width - 1; a < b; a++, b--) {
            uint8_t tmp = p[a];
            p[a] = p[b];
            p[b] = tmp;
        }
}

/* Rewrites Fortran-order items (first index fastest) into C order. */
static void s_fortran_to_c(const uint8_t *src, uint8_t *dst, const zf_shape_t *shape, size_t width)
{
    int rank = shape->rank;
    size_t fstride[ZF_MAX_RANK], idx[ZF_MAX_RANK] = {0};
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        fstride[i] = n;
        n *= (size_t)shape->dims[i];
    }
    size_t off = 0;
    for (size_t k = 0; k < n; k++) {
        memcpy(dst + k * width, src + off * width, width);
        for (int ax = rank - 1; ax >= 0; ax--) {
            off += fstride[ax];
            if (++idx[ax] < (size_t)shape->dims[ax]) break;
            off -= fstride[ax] * idx[ax];
            idx[ax] = 0;
        }
    }
}

static size_t s_utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* 'S' and 'U' items into a STRING tensor; trailing NULs are padding. */
static zf_status_t s_decode_strings(const s_header_t *h, const uint8_t *items, zf_tensor_t *t)
{
    char *utf8 = NULL;
    if (h->kind == 'U' && !(utf8 = malloc(h->itemsize))) return zf_out_of_memory("npy strings");
    zf_status_t s = ZF_STATUS_OK;
    for (int64_t i = 0; i < h->n && zf_ok(s); i++) {
        const uint8_t *item = items + (size_t)i * h->itemsize;
        size_t len = 0;
        if (h->kind == 'S') {
            len = h->itemsize;
            while (len > 0 && item[len - 1] == 0) len--;
            s = zf_tensor_set_string(t, i, item, len);
            continue;
        }
        size_t chars = h->itemsize / 4;
        for (size_t c = 0; c < chars; c++) {
            const uint8_t *q = item + 4 * c;
            uint32_t cp =
                h->swap ? (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]
                        : zf_le32(q);
            if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
                s = s_bad("npy: invalid code point U+%" PRIX32 " in a 'U' array", cp);
                break;
            }
            len += s_utf8_put(cp, utf8 + len);
        }
        /* Trailing U+0000 are padding; each encodes as one zero byte. */
        while (zf_ok(s) && len > 0 && utf8[len - 1] == 0) len--;
        if (zf_ok(s)) s = zf_tensor_set_string(t, i, utf8, len);
    }
    free(utf8);
    return s;
}

static zf_status_t s_decode(const s_header_t *h, const uint8_t *src, zf_tensor_t **out)
{
    uint8_t *tmp = NULL;
    if (h->fortran && h->shape.rank > 1 && h->n > 1) {
        if (!(tmp = malloc(h->nbytes))) return zf_out_of_memory("npy Fortran-order transpose");
        s_fortran_to_c(src, tmp, &h->shape, h->itemsize);
        src = tmp;
    }
    zf_tensor_t *t = NULL;
    zf_status_t s = zf_tensor_new(h->dtype, &h->shape, &t);
    if (zf_ok(s) && h->dtype == ZF_STRING) {
        s = s_decode_strings(h, src, t);
    } else if (zf_ok(s) && h->nbytes > 0) {
        uint8_t *dst = zf_tensor_data(t);
        memcpy(dst, src, h->nbytes);
        if (h->swap && h->kind == 'c')
            s_swap_bytes(dst, (size_t)h->n * 2, h->itemsize / 2);
        else if (h->swap)
            s_swap_bytes(dst, (size_t)h->n, h->itemsize);
        if (h->dtype == ZF_BOOL)
            for (size_t i = 0; i < h->nbytes; i++) dst[i] = dst[i] != 0;
    }
    free(tmp);
    if (!zf_ok(s)) {
        zf_tensor_unref(&t);
        return s;
    }
    *out = t;
    return ZF_STATUS_OK;
}

zf_status_t zf_npy_read_mem(const void *data, size_t len, zf_tensor_t **out)
{
    const uint8_t *d = data;
    s_header_t h;
    size_t off = 0;
    ZF_TRY(s_read_header(d, len, &h, &off));
    size_t avail = len - off;
    if (avail != h.nbytes) {
        char sbuf[ZF_SHAPE_STRING_MAX];
        return s_bad("npy: data has %zu bytes but %s %s needs %zu", avail, zf_dtype_name(h.dtype),
                     zf_shape_to_string(&h.shape, sbuf, sizeof sbuf), h.nbytes);
    }
    return s_decode(&h, d + off, out);
}

static zf_status_t s_file_error(const char *what, const char *path, int err)
{
    zf_code_t code = err == ENOENT   ? ZF_NOT_FOUND
                     : err == EACCES ? ZF_PERMISSION_DENIED
                                     : ZF_UNKNOWN;
    return zf_status_new(code, "npy: cannot %s '%s': %s", what, path, strerror(err));
}

zf_status_t zf_npy_read_file(const char *path, zf_tensor_t **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return s_file_error("open", path, errno);
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int err = errno;
        fclose(f);
        return s_file_error("stat", path, err);
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(f);
        return s_bad("npy: '%s' is not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if ((uint64_t)st.st_size > zf_buffer_alloc_limit()) {
        fclose(f);
        return zf_status_new(ZF_RESOURCE_EXHAUSTED, "npy: '%s' is too large (%zu bytes)", path,
                             size);
    }
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        return zf_out_of_memory("an npy file");
    }
    size_t got = fread(buf, 1, size, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    zf_status_t s = err ? s_file_error("read", path, err) : zf_npy_read_mem(buf, got, out);
    free(buf);
    return s;
}

/* ---- writing ------------------------------------------------------------ */

static zf_status_t s_descr_for(const zf_tensor_t *t, char *descr, size_t cap, size_t *itemsize)
{
    zf_dtype_t dtype = zf_tensor_dtype(t);
    if (dtype == ZF_STRING) {
        size_t width = 1;
        for (int64_t i = 0; i < zf_tensor_num_elements(t); i++) {
            size_t len = zf_tensor_string(t, i)->len;
            if (len > width) width = len;
        }
        snprintf(descr, cap, "|S%zu", width);
        *itemsize = width;
        return ZF_STATUS_OK;
    }
    for (size_t i = 0; i < sizeof s_types / sizeof s_types[0]; i++) {
        if (s_types[i].dtype != dtype) continue;
        snprintf(descr, cap, "%c%c%u", s_types[i].size == 1 ? '|' : '<', s_types[i].kind,
                 s_types[i].size);
        *itemsize = s_types[i].size;
        return ZF_STATUS_OK;
    }
    return zf_unimplemented("npy: NumPy has no dtype for %s tensors", zf_dtype_name(dtype));
}

/* The header text NumPy writes: dict, room to grow, spaces, newline. */
static size_t s_format_header(const char *descr, const zf_shape_t *shape, char *buf, size_t cap)
{
    size_t n =
        (size_t)snprintf(buf, cap, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < shape->rank; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? ", " : "", shape->dims[i]);
    n += (size_t)snprintf(buf + n, cap - n, "%s), }", shape->rank == 1 ? "," : "");
    if (shape->rank > 0) {
        int digits = snprintf(NULL, 0, "%" PRId64, shape->dims[0]);
        for (int i = digits; i < S_GROWTH_DIGITS; i++) buf[n++] = ' ';
    }
    return n;
}

zf_status_t zf_npy_write_mem(const zf_tensor_t *t, uint8_t **data, size_t *len)
{
    if (zf_tensor_memory_kind(t) == ZF_MEMORY_DEVICE)
        return zf_status_new(ZF_FAILED_PRECONDITION, "npy: cannot write a tensor in device memory");
    char descr[32], header[1024];
    size_t itemsize = 1;
    ZF_TRY(s_descr_for(t, descr, sizeof descr, &itemsize));
    const zf_shape_t *shape = zf_tensor_shape(t);
    size_t hlen = s_format_header(descr, shape, header, sizeof header) + 1; /* + '\n' */
    size_t hsize = 2;
    size_t pad = S_ALIGN - (S_MAGIC_LEN + 2 + hsize + hlen) % S_ALIGN;
    if (hlen + pad > 0xffff) {
        hsize = 4;
        pad = S_ALIGN - (S_MAGIC_LEN + 2 + hsize + hlen) % S_ALIGN;
    }
    size_t n = (size_t)zf_tensor_num_elements(t);
    if (n > (SIZE_MAX - 4096) / itemsize) return s_bad("npy: tensor is too large to write");
    size_t prefix = S_MAGIC_LEN + 2 + hsize + hlen + pad, total = prefix + n * itemsize;
    uint8_t *out = calloc(1, total);
    if (!out) return zf_out_of_memory("an npy file");
    memcpy(out, S_MAGIC, S_MAGIC_LEN);
    out[6] = hsize == 2 ? 1 : 2;
    out[7] = 0;
    size_t body = hlen + pad;
    for (size_t i = 0; i < hsize; i++) out[8 + i] = (uint8_t)(body >> (8 * i));
    uint8_t *h = out + S_MAGIC_LEN + 2 + hsize;
    memcpy(h, header, hlen - 1);
    memset(h + hlen - 1, ' ', pad);
    h[hlen - 1 + pad] = '\n';
    if (zf_tensor_dtype(t) == ZF_STRING) {
        for (size_t i = 0; i < n; i++) {
            const zf_tstring_t *s = zf_tensor_string(t, (int64_t)i);
            if (s->len) memcpy(out + prefix + i * itemsize, s->data, s->len);
        }
    } else if (n > 0) {
        memcpy(out + prefix, zf_tensor_data(t), n * itemsize);
    }
    *data = out;
    *len = total;
    return ZF_STATUS_OK;
}

zf_status_t zf_npy_write_file(const char *path, const zf_tensor_t *t)
{
    uint8_t *data;
    size_t len;
    ZF_TRY(zf_npy_write_mem(t, &data, &len));
    FILE *f = fopen(path, "wb");
    if (!f) {
        int err = errno;
        free(data);
        return s_file_error("create", path, err);
    }
    size_t put = fwrite(data, 1, len, f);
    int err = put == len ? 0 : (errno ? errno : EIO);
    free(data);
    if (fclose(f) != 0 && !err) err = errno;
    return err ? s_file_error("write", path, err) : ZF_STATUS_OK;
}
