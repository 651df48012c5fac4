#include "common/random.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

uint64_t zf_random_id(void)
{
    uint64_t v = 0;
    while (v == 0) {
        if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
            /* No entropy source: mix the clock and the pid, still non-zero. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            v = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
                ((uint64_t)getpid() << 32);
            v ^= v >> 29;
            v *= 0xbf58476d1ce4e5b9ull;
        }
    }
    return v;
}
