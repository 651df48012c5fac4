/* Definitions of batch_test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "batch_test_util.h"

static void s_grow(zf_test_batch_t *b, size_t more)
{
    if (b->cap - b->len >= more) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < more) cap *= 2;
    uint8_t *grown = realloc(b->bytes, cap);
    assert_non_null(grown);
    b->bytes = grown;
    b->cap = cap;
}

/* The prefix: magic, count, where the entries end, a zero word. */
#define S_PREFIX 16

void zf_test_batch_raw(zf_test_batch_t *b, const void *bytes, size_t len)
{
    s_grow(b, len);
    memcpy(b->bytes + b->len, bytes, len);
    b->len += len;
    if (b->sealed || b->len < S_PREFIX) return;
    for (int i = 0; i < 4; i++) b->bytes[8 + i] = (uint8_t)(b->len >> (8 * i));
}

/* v as width little-endian bytes. */
static void s_le(zf_test_batch_t *b, uint64_t v, int width)
{
    uint8_t out[8];
    for (int i = 0; i < width; i++) out[i] = (uint8_t)(v >> (8 * i));
    zf_test_batch_raw(b, out, (size_t)width);
}

void zf_test_batch_begin(zf_test_batch_t *b, uint32_t count)
{
    memset(b, 0, sizeof *b);
    static const uint8_t magic[4] = {0xc1, 'Z', 'B', 0x03};
    zf_test_batch_raw(b, magic, sizeof magic);
    s_le(b, count, 4);
    s_le(b, 0, 8); /* the entries' end, kept up to date, and the zero word */
}

void zf_test_batch_payloads(zf_test_batch_t *b, const void *payloads, size_t len)
{
    b->sealed = true;
    if (len == 0) return;
    static const uint8_t zeros[8];
    zf_test_batch_raw(b, zeros, (8 - b->len % 8) % 8);
    zf_test_batch_raw(b, payloads, len);
}

void zf_test_batch_add(zf_test_batch_t *b, const zf_test_batch_entry_t *e)
{
    size_t klen = e->key_len ? e->key_len : strlen(e->key);
    uint8_t small[4] = {e->flags, (uint8_t)e->dtype, (uint8_t)e->rank, e->prefix};
    zf_test_batch_raw(b, small, sizeof small);
    s_le(b, klen, 2);
    s_le(b, e->plen, 2);
    s_le(b, (uint64_t)e->step, 8);
    s_le(b, e->len, 8);
    for (int d = 0; d < e->rank; d++) s_le(b, (uint64_t)e->dims[d], 8);
    zf_test_batch_raw(b, e->key, klen);
}

void zf_test_batch_vec(zf_test_batch_t *b, const char *key, int64_t step, int dtype, int64_t n,
                       uint64_t len)
{
    zf_test_batch_add(
        b, &(zf_test_batch_entry_t){
               .dtype = dtype, .rank = 1, .dims = &n, .key = key, .step = step, .len = len});
}

void zf_test_batch_free(zf_test_batch_t *b)
{
    free(b->bytes);
    memset(b, 0, sizeof *b);
}
