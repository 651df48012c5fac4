/* Little-endian integers in byte buffers, as the file and wire formats
 * store them (tensor frames, .npy headers, tensor bundles), read and
 * written byte by byte so that neither alignment nor the host's order
 * matters. */
#ifndef ZF_BYTE_ORDER_H
#define ZF_BYTE_ORDER_H

#include <stdint.h>

static inline uint16_t zf_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t zf_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t zf_le64(const uint8_t *p)
{
    return (uint64_t)zf_le32(p) | (uint64_t)zf_le32(p + 4) << 32;
}

static inline void zf_put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void zf_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void zf_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

#endif
