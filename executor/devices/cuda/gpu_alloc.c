/* The GPU caching allocator: cudaMalloc'd blocks in size classes, kept on
 * per-class free lists for reuse (contract in gpu_internal.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "executor/devices/cuda/gpu_internal.h"

/* Eight classes per power of two above the smallest block: at most 12.5%
 * of a block is padding. */
#define S_MIN_BLOCK ((size_t)512)
#define S_MAX_BLOCK ((size_t)1 << 48)
#define S_CLASSES   448

typedef struct s_block {
    void *ptr;
    size_t size;
    struct s_block *next;
    zf__gpu_alloc_t *owner;
} s_block_t;

struct zf__gpu_alloc {
    pthread_mutex_t lock;
    int ordinal;
    int refs; /* the device's, plus one per block out */
    bool closed;
    s_block_t *free_lists[S_CLASSES];
    zf_gpu_memory_stats_t stats;
};

/* The class of a request of n bytes (1..S_MAX_BLOCK) and its block size. */
static int s_class(size_t n, size_t *size)
{
    if (n <= S_MIN_BLOCK) {
        *size = S_MIN_BLOCK;
        return 0;
    }
    int lg = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^lg < n <= 2^(lg+1) */
    size_t step = (size_t)1 << (lg - 3);
    size_t q = (n + step - 1) / step; /* 9..16 */
    *size = q * step;
    return 1 + (lg - 9) * 8 + (int)(q - 9);
}

zf_status_t zf__gpu_alloc_new(int ordinal, zf__gpu_alloc_t **out)
{
    *out = NULL;
    zf__gpu_alloc_t *a = calloc(1, sizeof *a);
    if (!a) return zf_out_of_memory("GPU allocator");
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        return zf_internal("GPU allocator: cannot create a mutex");
    }
    a->ordinal = ordinal;
    a->refs = 1;
    *out = a;
    return ZF_STATUS_OK;
}

static void s_cuda_free(int ordinal, void *ptr)
{
    /* Errors are ignored: at process exit the runtime may already be gone,
     * and there is nobody to report to. */
    if (cudaSetDevice(ordinal) != cudaSuccess || cudaFree(ptr) != cudaSuccess) cudaGetLastError();
}

static void s_free_list(int ordinal, s_block_t *b)
{
    while (b) {
        s_block_t *next = b->next;
        s_cuda_free(ordinal, b->ptr);
        free(b);
        b = next;
    }
}

/* Takes every cached block off the lists (caller holds the lock). */
static s_block_t *s_take_cached_locked(zf__gpu_alloc_t *a)
{
    s_block_t *all = NULL;
    for (int c = 0; c < S_CLASSES; c++) {
        while (a->free_lists[c]) {
            s_block_t *b = a->free_lists[c];
            a->free_lists[c] = b->next;
            b->next = all;
            all = b;
        }
    }
    a->stats.bytes_cached = 0;
    return all;
}

static void s_destroy(zf__gpu_alloc_t **a_p)
{
    zf__gpu_alloc_t *a = *a_p;
    *a_p = NULL;
    pthread_mutex_destroy(&a->lock);
    free(a);
}

/* Drops one reference (lock held on entry, released here). */
static void s_unref_unlock(zf__gpu_alloc_t *a)
{
    bool last = --a->refs == 0;
    pthread_mutex_unlock(&a->lock);
    if (last) s_destroy(&a);
}

void zf__gpu_alloc_close(zf__gpu_alloc_t **alloc_p)
{
    if (!alloc_p || !*alloc_p) return;
    zf__gpu_alloc_t *a = *alloc_p;
    *alloc_p = NULL;
    pthread_mutex_lock(&a->lock);
    a->closed = true;
    s_block_t *cached = s_take_cached_locked(a);
    int ordinal = a->ordinal;
    s_unref_unlock(a);
    s_free_list(ordinal, cached);
}

/* The buffer free callback: the block goes back to its list, or to CUDA
 * once the device is gone. */
static void s_block_release(void *data, void *hint)
{
    (void)data;
    s_block_t *b = hint;
    zf__gpu_alloc_t *a = b->owner;
    int ordinal = a->ordinal;
    pthread_mutex_lock(&a->lock);
    a->stats.bytes_in_use -= b->size;
    bool keep = !a->closed;
    if (keep) {
        size_t size = 0;
        int c = s_class(b->size, &size);
        b->next = a->free_lists[c];
        a->free_lists[c] = b;
        a->stats.bytes_cached += b->size;
    }
    s_unref_unlock(a);
    if (!keep) s_free_list(ordinal, b);
}

static zf_status_t s_cuda_malloc(zf__gpu_alloc_t *a, size_t size, void **ptr)
{
    cudaError_t err = cudaSetDevice(a->ordinal);
    if (err == cudaSuccess) err = cudaMalloc(ptr, size);
    if (err == cudaErrorMemoryAllocation) {
        /* Give the cache back to CUDA and try once more. */
        cudaGetLastError();
        pthread_mutex_lock(&a->lock);
        s_block_t *cached = s_take_cached_locked(a);
        pthread_mutex_unlock(&a->lock);
        s_free_list(a->ordinal, cached);
        err = cudaMalloc(ptr, size);
    }
    if (err != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof what, "GPU:%d: allocating %zu bytes", a->ordinal, size);
        return zf__gpu_error(err, what);
    }
    pthread_mutex_lock(&a->lock);
    a->stats.num_cuda_mallocs++;
    pthread_mutex_unlock(&a->lock);
    return ZF_STATUS_OK;
}

/* A block of class size: from the list, else a new cudaMalloc. Counts it
 * as in use and takes a reference for it. */
static zf_status_t s_get_block(zf__gpu_alloc_t *a, size_t nbytes, s_block_t **out)
{
    size_t size = 0;
    int c = s_class(nbytes, &size);
    pthread_mutex_lock(&a->lock);
    s_block_t *b = a->free_lists[c];
    if (b) {
        a->free_lists[c] = b->next;
        a->stats.bytes_cached -= b->size;
    }
    a->stats.bytes_in_use += size;
    a->refs++;
    pthread_mutex_unlock(&a->lock);
    if (!b) {
        void *ptr = NULL;
        zf_status_t s = s_cuda_malloc(a, size, &ptr);
        if (zf_ok(s) && !(b = malloc(sizeof *b))) {
            s_cuda_free(a->ordinal, ptr);
            s = zf_out_of_memory("GPU block");
        }
        if (!zf_ok(s)) {
            pthread_mutex_lock(&a->lock);
            a->stats.bytes_in_use -= size;
            s_unref_unlock(a);
            return s;
        }
        *b = (s_block_t){.ptr = ptr, .size = size, .next = NULL, .owner = a};
    }
    b->next = NULL;
    *out = b;
    return ZF_STATUS_OK;
}

zf_status_t zf__gpu_alloc_buffer(zf__gpu_alloc_t *alloc, size_t nbytes, zf_buffer_t **out)
{
    *out = NULL;
    if (nbytes == 0)
        return zf_buffer_wrap_memory(NULL, 0, ZF_MEMORY_DEVICE, alloc->ordinal, NULL, NULL, out);
    if (nbytes > S_MAX_BLOCK)
        return zf_status_new(ZF_RESOURCE_EXHAUSTED, "GPU:%d: cannot allocate %zu bytes",
                             alloc->ordinal, nbytes);
    s_block_t *b = NULL;
    ZF_TRY(s_get_block(alloc, nbytes, &b));
    zf_status_t s = zf_buffer_wrap_memory(b->ptr, nbytes, ZF_MEMORY_DEVICE, alloc->ordinal,
                                          s_block_release, b, out);
    if (!zf_ok(s)) s_block_release(b->ptr, b);
    return s;
}

void zf__gpu_alloc_stats(zf__gpu_alloc_t *alloc, zf_gpu_memory_stats_t *out)
{
    pthread_mutex_lock(&alloc->lock);
    *out = alloc->stats;
    pthread_mutex_unlock(&alloc->lock);
}
