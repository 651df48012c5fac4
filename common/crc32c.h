/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as TensorFlow's
 * checkpoints and LevelDB-style tables use it, and their masking of stored
 * checksums: a CRC kept inside data that is itself checksummed is stored
 * rotated right by 15 bits plus 0xa282ead8, so that checksumming a
 * checksum does not give a degenerate value.
 *
 * Table-driven (slicing by 8); thread-safe, no state. */
#ifndef ZF_CRC32C_H
#define ZF_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC32C of the bytes before (whose CRC is crc) followed by data[0, n):
 * zf_crc32c_extend(0, d, n) is the CRC of d. data may be NULL when n is 0. */
uint32_t zf_crc32c_extend(uint32_t crc, const void *data, size_t n);

static inline uint32_t zf_crc32c(const void *data, size_t n)
{
    return zf_crc32c_extend(0, data, n);
}

#define ZF_CRC32C_MASK_DELTA 0xa282ead8u

/* The stored (masked) form of crc, and back. */
static inline uint32_t zf_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + ZF_CRC32C_MASK_DELTA;
}

static inline uint32_t zf_crc32c_unmask(uint32_t masked)
{
    uint32_t rot = masked - ZF_CRC32C_MASK_DELTA;
    return (rot >> 17) | (rot << 15);
}

#endif
