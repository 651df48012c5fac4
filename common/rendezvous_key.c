#include "common/rendezvous_key.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *zf_rendezvous_key_in_frame(const char *src_device, uint64_t src_incarnation,
                                 const char *dst_device, const char *tensor_name, uint64_t frame_id,
                                 int64_t iter_id)
{
    size_t size = strlen(src_device) + strlen(dst_device) + strlen(tensor_name) + 64;
    char *key = malloc(size);
    if (key)
        snprintf(key, size, "%s;%016" PRIx64 ";%s;%s;%" PRIu64 ":%" PRId64, src_device,
                 src_incarnation, dst_device, tensor_name, frame_id, iter_id);
    return key;
}

char *zf_rendezvous_key(const char *src_device, uint64_t src_incarnation, const char *dst_device,
                        const char *tensor_name)
{
    return zf_rendezvous_key_in_frame(src_device, src_incarnation, dst_device, tensor_name, 0, 0);
}

static uint64_t s_mix(uint64_t h)
{
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

uint64_t zf_rendezvous_frame_id(uint64_t parent_id, int64_t parent_iter, const uint8_t *name,
                                size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the name */
    for (size_t i = 0; i < len; i++) h = (h ^ name[i]) * 0x100000001b3ull;
    h = s_mix(h ^ s_mix(parent_id + 0x9e3779b97f4a7c15ull));
    h = s_mix(h ^ (uint64_t)parent_iter);
    return h ? h : 1;
}

/* Reads the decimal number s[0..n) (1 to 20 digits, at most UINT64_MAX)
 * into *v. */
static bool s_decimal(const char *s, size_t n, uint64_t *v)
{
    if (n == 0 || n > 20) return false;
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (*v > (UINT64_MAX - d) / 10) return false;
        *v = *v * 10 + d;
    }
    return true;
}

static bool s_hex(const char *s, size_t n, uint64_t *v)
{
    if (n == 0 || n > 16) return false;
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        *v = *v << 4 | (uint64_t)d;
    }
    return true;
}

zf_status_t zf_rendezvous_key_parse(const char *key, zf_rendezvous_parsed_key_t *out)
{
    memset(out, 0, sizeof *out);
    const char *f[5];
    size_t len[5];
    const char *p = key;
    for (int i = 0; i < 5; i++) {
        const char *e = strchr(p, ';');
        if ((e != NULL) != (i < 4)) return zf_invalid_argument("Invalid rendezvous key: %s", key);
        f[i] = p;
        len[i] = e ? (size_t)(e - p) : strlen(p);
        p = e ? e + 1 : p;
    }
    const char *colon = memchr(f[4], ':', len[4]);
    uint64_t iter = 0;
    if (len[0] == 0 || len[2] == 0 || len[3] == 0 || !colon ||
        !s_hex(f[1], len[1], &out->src_incarnation) ||
        !s_decimal(f[4], (size_t)(colon - f[4]), &out->frame_id) ||
        !s_decimal(colon + 1, len[4] - (size_t)(colon + 1 - f[4]), &iter) || iter > INT64_MAX)
        return zf_invalid_argument("Invalid rendezvous key: %s", key);
    out->src_device = f[0];
    out->src_len = len[0];
    out->dst_device = f[2];
    out->dst_len = len[2];
    out->tensor_name = f[3];
    out->name_len = len[3];
    out->iter_id = (int64_t)iter;
    return ZF_STATUS_OK;
}

bool zf_rendezvous_key_src_device(const char *key, const char **src, size_t *len)
{
    size_t n = strcspn(key, ";");
    *src = key;
    *len = n;
    return key[n] == ';' && n > 0;
}

bool zf_rendezvous_key_dst_device(const char *key, const char **dst, size_t *len)
{
    *dst = NULL;
    *len = 0;
    const char *a = strchr(key, ';');
    const char *b = a ? strchr(a + 1, ';') : NULL;
    if (!b) return false;
    const char *e = strchr(b + 1, ';');
    *dst = b + 1;
    *len = e ? (size_t)(e - *dst) : strlen(*dst);
    return *len > 0;
}
