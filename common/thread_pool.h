/* A fixed-size thread pool: fire-and-forget tasks and a blocking
 * parallel-for that splits a range into chunks. Thread-safe. The caller of
 * zf_thread_pool_parallel_for runs chunks too, so nested use cannot
 * deadlock. */
#ifndef ZF_THREAD_POOL_H
#define ZF_THREAD_POOL_H

#include <stdint.h>

#include "common/status.h"

typedef struct zf_thread_pool zf_thread_pool_t;

/* num_threads 0: one per online core. */
zf_status_t zf_thread_pool_new(int num_threads, zf_thread_pool_t **out);

/* Waits for queued tasks to finish, joins the workers, frees; NULL-safe. */
void zf_thread_pool_destroy(zf_thread_pool_t **pool_p);

int zf_thread_pool_size(const zf_thread_pool_t *pool);

/* Queues fn(arg) to run on a worker. */
zf_status_t zf_thread_pool_submit(zf_thread_pool_t *pool, void (*fn)(void *arg), void *arg);

/* Runs fn(arg, begin, end) over [0, n) split into chunks of at least
 * min_chunk items, on the pool and the calling thread; returns when all
 * chunks are done. pool may be NULL (runs inline). */
void zf_thread_pool_parallel_for(zf_thread_pool_t *pool, int64_t n, int64_t min_chunk,
                                 void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

#endif
