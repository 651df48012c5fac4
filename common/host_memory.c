/* Host memory for tensor buffers: mapped size classes with a cache of
 * freed blocks, malloc below them. See host_memory.h. */
#include "common/host_memory.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define S_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define S_ASAN 1
#endif
#endif
#ifdef S_ASAN
#include <sanitizer/asan_interface.h>
#define S_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define S_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define S_POISON(p, n)   ((void)(p), (void)(n))
#define S_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define S_MIN_LOG   18 /* log2(ZF_HOST_MEMORY_CACHED_MIN) */
#define S_PER_POW   4  /* classes per power of two */
#define S_MAX_LOG   47
#define S_CLASSES   ((S_MAX_LOG - S_MIN_LOG + 1) * S_PER_POW)
#define S_SMALL     (-1) /* from malloc */
#define S_UNCACHED  (-2) /* mapped, past the largest class */
#define S_MAX_CACHE ((size_t)4 << 30)

_Static_assert(ZF_HOST_MEMORY_CACHED_MIN == (size_t)1 << S_MIN_LOG, "the smallest class");

typedef struct s_block {
    void *base;  /* what malloc or mmap returned */
    size_t size; /* mapped bytes (the class size); 0 for S_SMALL */
    int cls;     /* class index, S_SMALL or S_UNCACHED */
    /* while cached: its class's list (most recently freed first) and the
     * list of every cached block (s_newest to s_oldest); next also links
     * the blocks on their way to munmap */
    struct s_block *prev, *next;
    struct s_block *newer, *older;
} s_block_t;

static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static s_block_t *s_free[S_CLASSES];   /* per class, most recently freed first */
static s_block_t *s_newest, *s_oldest; /* every cached block, by when it was freed */
static size_t s_limit, s_cached, s_cached_blocks, s_mapped;
static size_t s_page = 4096; /* the page size, read once */
static unsigned long long s_hits, s_misses, s_evictions;

size_t zf_physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 0;
    if ((unsigned long)pages > SIZE_MAX / (unsigned long)page) return SIZE_MAX;
    return (size_t)pages * (size_t)page;
}

static void s_init(void)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page > 0) s_page = (size_t)page;
    size_t physical = zf_physical_memory();
    size_t limit = physical ? physical / 8 : S_MAX_CACHE;
    if (limit > S_MAX_CACHE) limit = S_MAX_CACHE;
    const char *env = getenv("ZFLOW_HOST_CACHE_MB");
    if (env && *env) {
        char *end = NULL;
        unsigned long long mb = strtoull(env, &end, 10);
        if (end && *end == '\0' && mb <= SIZE_MAX / (1024 * 1024)) limit = (size_t)mb << 20;
    }
    pthread_mutex_lock(&s_mu);
    s_limit = limit;
    pthread_mutex_unlock(&s_mu);
}

static int s_log2(size_t x) /* x > 0 */
{
    return 63 - __builtin_clzll((unsigned long long)x);
}

/* The class of a mapped request of size bytes (>= the smallest class):
 * its index and size, or S_UNCACHED with the size rounded to pages. */
static int s_class(size_t size, size_t *class_size)
{
    int k = s_log2(size);
    size_t step = ((size_t)1 << k) / S_PER_POW;
    if (k > S_MAX_LOG || size > SIZE_MAX - step) {
        size_t page = s_page;
        *class_size = size > SIZE_MAX - page ? 0 : (size + page - 1) / page * page;
        return S_UNCACHED;
    }
    size_t c = (size + step - 1) / step * step;
    int k2 = s_log2(c);
    if (k2 > S_MAX_LOG) {
        *class_size = c;
        return S_UNCACHED;
    }
    *class_size = c;
    return (k2 - S_MIN_LOG) * S_PER_POW +
           (int)((c - ((size_t)1 << k2)) / (((size_t)1 << k2) / S_PER_POW));
}

static void s_unmap(s_block_t *b)
{
    S_UNPOISON(b->base, b->size);
    munmap(b->base, b->size);
    free(b);
}

/* Puts a freed block of a class at the head of its class's list and of the
 * recency list. Under s_mu. */
static void s_cache_push_locked(s_block_t *b)
{
    b->prev = NULL;
    b->next = s_free[b->cls];
    if (b->next) b->next->prev = b;
    s_free[b->cls] = b;
    b->older = s_newest;
    b->newer = NULL;
    if (s_newest) s_newest->newer = b;
    s_newest = b;
    if (!s_oldest) s_oldest = b;
    s_cached += b->size;
    s_cached_blocks++;
}

/* Takes a cached block off both lists. Under s_mu. */
static void s_cache_remove_locked(s_block_t *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        s_free[b->cls] = b->next;
    if (b->next) b->next->prev = b->prev;
    if (b->newer)
        b->newer->older = b->older;
    else
        s_newest = b->older;
    if (b->older)
        b->older->newer = b->newer;
    else
        s_oldest = b->newer;
    b->prev = b->next = b->newer = b->older = NULL;
    s_cached -= b->size;
    s_cached_blocks--;
}

/* Takes cached blocks off the lists, least recently freed first, until at
 * most keep bytes stay cached; returns them linked by next, no longer
 * counted as mapped, and adds how many to *n. Under s_mu. */
static s_block_t *s_evict_locked(size_t keep, unsigned long long *n)
{
    s_block_t *out = NULL;
    while (s_cached > keep) {
        s_block_t *b = s_oldest;
        s_cache_remove_locked(b);
        s_mapped -= b->size;
        b->next = out;
        out = b;
        (*n)++;
    }
    return out;
}

static void s_unmap_all(s_block_t *list)
{
    while (list) {
        s_block_t *next = list->next;
        s_unmap(list);
        list = next;
    }
}

static void *s_small(size_t size, size_t align, bool zeroed, void **hint)
{
    size_t head = (sizeof(s_block_t) + align - 1) / align * align;
    if (size > SIZE_MAX - head - align) return NULL;
    void *raw = zeroed ? calloc(1, head + size + align) : malloc(head + size + align);
    if (!raw) return NULL;
    s_block_t *b = raw;
    b->base = raw;
    b->size = 0;
    b->cls = S_SMALL;
    b->prev = b->next = b->newer = b->older = NULL;
    uintptr_t p = ((uintptr_t)raw + sizeof(s_block_t) + align - 1) & ~(uintptr_t)(align - 1);
    *hint = b;
    return (void *)p;
}

void *zf_host_memory_alloc(size_t size, size_t align, bool zeroed, void **hint)
{
    *hint = NULL;
    pthread_once(&s_once, s_init);
    if (align == 0 || (align & (align - 1)) || align > s_page) return NULL;
    void *p = NULL;
    if (size < ZF_HOST_MEMORY_CACHED_MIN) {
        p = s_small(size, align, zeroed, hint);
#ifdef S_ASAN
        if (p && !zeroed) memset(p, 0xff, size);
#endif
        return p;
    }
    size_t csize = 0;
    int cls = s_class(size, &csize);
    if (csize == 0) return NULL;
    s_block_t *b = NULL;
    pthread_mutex_lock(&s_mu);
    if (cls >= 0 && s_free[cls]) {
        b = s_free[cls];
        s_cache_remove_locked(b);
        s_hits++;
    } else {
        if (cls >= 0) s_misses++;
        s_mapped += csize; /* taken back below if the mapping fails */
    }
    pthread_mutex_unlock(&s_mu);
    if (b) {
        /* a cached block went through zf_host_memory_free, so it may hold
         * anything; a fresh mapping is zero */
        S_UNPOISON(b->base, b->size);
        if (zeroed) memset(b->base, 0, size);
    } else {
        b = malloc(sizeof *b);
        void *m = b ? mmap(NULL, csize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                    : MAP_FAILED;
        if (m == MAP_FAILED) {
            free(b);
            pthread_mutex_lock(&s_mu);
            s_mapped -= csize;
            pthread_mutex_unlock(&s_mu);
            return NULL;
        }
        b->base = m;
        b->size = csize;
        b->cls = cls;
        b->prev = b->next = b->newer = b->older = NULL;
    }
    /* the class's slack past the request is out of bounds, as a
     * malloc'd block's redzone is */
    S_POISON((char *)b->base + size, b->size - size);
#ifdef S_ASAN
    if (!zeroed) memset(b->base, 0xff, size);
#endif
    *hint = b;
    return b->base;
}

void zf_host_memory_free(void *hint)
{
    s_block_t *b = hint;
    if (!b) return;
    if (b->cls == S_SMALL) {
        free(b->base);
        return;
    }
    /* poisoned before another thread can take it from the cache */
    if (b->cls >= 0) S_POISON(b->base, b->size);
    s_block_t *gone = NULL;
    pthread_mutex_lock(&s_mu);
    if (b->cls >= 0 && b->size <= s_limit) {
        /* room is made by the blocks freed longest ago, of any class */
        gone = s_evict_locked(s_limit - b->size, &s_evictions);
        s_cache_push_locked(b);
    } else {
        s_mapped -= b->size;
        b->next = NULL;
        gone = b;
    }
    pthread_mutex_unlock(&s_mu);
    s_unmap_all(gone);
}

size_t zf_host_memory_cache_limit(void)
{
    pthread_once(&s_once, s_init);
    pthread_mutex_lock(&s_mu);
    size_t limit = s_limit;
    pthread_mutex_unlock(&s_mu);
    return limit;
}

void zf_host_memory_set_cache_limit(size_t bytes)
{
    pthread_once(&s_once, s_init);
    pthread_mutex_lock(&s_mu);
    s_limit = bytes;
    s_block_t *gone = s_evict_locked(bytes, &s_evictions);
    pthread_mutex_unlock(&s_mu);
    s_unmap_all(gone);
}

size_t zf_host_memory_trim(void)
{
    unsigned long long n = 0;
    pthread_mutex_lock(&s_mu);
    size_t bytes = s_cached;
    s_block_t *gone = s_evict_locked(0, &n);
    pthread_mutex_unlock(&s_mu);
    s_unmap_all(gone);
    return bytes;
}

bool zf_host_memory_fills_uninit(void)
{
#ifdef S_ASAN
    return true;
#else
    return false;
#endif
}

void zf_host_memory_stats(zf_host_memory_stats_t *out)
{
    pthread_mutex_lock(&s_mu);
    out->cached_bytes = s_cached;
    out->cached_blocks = s_cached_blocks;
    out->mapped_bytes = s_mapped;
    out->hits = s_hits;
    out->misses = s_misses;
    out->evictions = s_evictions;
    pthread_mutex_unlock(&s_mu);
}
