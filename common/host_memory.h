/* Host memory for tensor buffers.
 *
 * Blocks of at least ZF_HOST_MEMORY_CACHED_MIN bytes are mapped from the
 * kernel in size classes (four per power of two, so at most a quarter of a
 * block is rounded away, and untouched tail pages cost no memory) and, when
 * freed, kept in a process-wide cache up to a byte limit; the next request
 * of the same class takes the most recently freed block, whose pages are
 * already mapped and likely in cache. A step that allocates and frees the
 * same shapes every time therefore pays no page faults after its first run.
 * Smaller blocks come from malloc.
 *
 * A freed block no larger than the limit is always cached: when the cache
 * has no room for it, the blocks freed longest ago, of any class, are
 * unmapped until it fits (evictions). So when the shapes a process uses
 * change, the blocks of the new shapes replace those of the old ones
 * instead of being refused by a cache full of blocks nobody asks for. A
 * block larger than the whole limit is unmapped and evicts nothing. Each
 * free and each allocation costs O(1) list operations under one lock.
 *
 * A block asked for zeroed is zero-filled (a freshly mapped one is zero
 * already and is not written). One asked for uninitialised holds whatever
 * it held: only code that writes every byte may ask for it. In builds with
 * AddressSanitizer, uninitialised blocks are filled with 0xff bytes (NaN for
 * floating point, -1 for integers) so that code reading bytes it did not
 * write shows up in tests; cached blocks are poisoned, so a use after free
 * is still reported, and so is the slack of a block past the bytes asked
 * for, so an overflow is too.
 *
 * The cache limit defaults to an eighth of physical memory, at most 4 GiB;
 * ZFLOW_HOST_CACHE_MB in the environment (read at the first allocation)
 * or zf_host_memory_set_cache_limit() sets it, and 0 turns the cache off.
 * All functions are thread-safe. */
#ifndef ZF_COMMON_HOST_MEMORY_H
#define ZF_COMMON_HOST_MEMORY_H

#include <stdbool.h>
#include <stddef.h>

#define ZF_HOST_MEMORY_CACHED_MIN ((size_t)256 * 1024)

/* size bytes aligned to align (a power of two, at most the page size), or
 * NULL when out of memory. *hint receives what zf_host_memory_free needs. */
void *zf_host_memory_alloc(size_t size, size_t align, bool zeroed, void **hint);

/* Frees memory from zf_host_memory_alloc, given its hint. */
void zf_host_memory_free(void *hint);

/* The byte limit on cached free blocks. Lowering it unmaps the blocks freed
 * longest ago until the rest fit (evictions). */
size_t zf_host_memory_cache_limit(void);
void zf_host_memory_set_cache_limit(size_t bytes);

/* Releases every cached block to the kernel (not counted as evictions);
 * returns their bytes. */
size_t zf_host_memory_trim(void);

typedef struct {
    size_t cached_bytes; /* in free blocks held by the cache */
    size_t cached_blocks;
    size_t mapped_bytes;          /* in blocks mapped and not yet unmapped, in use or cached */
    unsigned long long hits;      /* requests served from the cache */
    unsigned long long misses;    /* requests of a cached size that mapped a new block */
    unsigned long long evictions; /* cached blocks unmapped to make room under the limit */
} zf_host_memory_stats_t;

void zf_host_memory_stats(zf_host_memory_stats_t *out);

/* The machine's physical memory in bytes (its page count times the page
 * size, at most SIZE_MAX), or 0 when the system does not say. */
size_t zf_physical_memory(void);

/* True in builds that fill uninitialised blocks with 0xff (AddressSanitizer). */
bool zf_host_memory_fills_uninit(void);

#endif
