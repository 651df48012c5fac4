/* CRC32C by slicing by 8: eight 256-entry tables built once, the first
 * being the classic byte-at-a-time table of the reflected polynomial. */
#include "common/crc32c.h"

#include <pthread.h>

#define S_POLY 0x82f63b78u

static uint32_t s_table[8][256];
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void s_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ S_POLY : c >> 1;
        s_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            s_table[t][i] = (s_table[t - 1][i] >> 8) ^ s_table[0][s_table[t - 1][i] & 0xffu];
}

uint32_t zf_crc32c_extend(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&s_once, s_init);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = s_table[7][lo & 0xffu] ^ s_table[6][(lo >> 8) & 0xffu] ^
            s_table[5][(lo >> 16) & 0xffu] ^ s_table[4][lo >> 24] ^ s_table[3][p[4]] ^
            s_table[2][p[5]] ^ s_table[1][p[6]] ^ s_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ s_table[0][(c ^ *p++) & 0xffu];
    return ~c;
}
