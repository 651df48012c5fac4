/* Random ids: incarnations, step ids, graph handles, scheduler ids. Drawn
 * from the kernel's entropy source (getrandom), so peers cannot guess
 * them; when none is available, a mix of the clock and the pid. */
#ifndef ZF_RANDOM_H
#define ZF_RANDOM_H

#include <stdint.h>

/* A fresh random non-zero 64-bit id. Thread-safe. */
uint64_t zf_random_id(void);

#endif
