/* The fixed-size thread pool: a FIFO of tasks served by N workers, and a
 * parallel-for whose caller takes chunks too. Owns its threads and queue. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/thread_pool.h"

typedef struct {
    void (*fn)(void *arg);
    void *arg;
} s_task_t;

struct zf_thread_pool {
    pthread_mutex_t mu;
    pthread_cond_t has_work;
    s_task_t *ring; /* circular queue of cap tasks, head..head+count */
    size_t cap, head, count;
    bool stopping;
    int num_threads;
    pthread_t *threads;
};

static int s_online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 1024 ? 1024 : n) : 1;
}

static void *s_worker_main(void *arg)
{
    zf_thread_pool_t *pool = arg;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (pool->count == 0 && !pool->stopping) pthread_cond_wait(&pool->has_work, &pool->mu);
        if (pool->count == 0) break; /* stopping and drained */
        s_task_t task = pool->ring[pool->head];
        pool->head = (pool->head + 1) % pool->cap;
        pool->count--;
        pthread_mutex_unlock(&pool->mu);
        task.fn(task.arg);
        pthread_mutex_lock(&pool->mu);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

zf_status_t zf_thread_pool_new(int num_threads, zf_thread_pool_t **out)
{
    *out = NULL;
    if (num_threads < 0 || num_threads > 1024)
        return zf_invalid_argument("thread pool size %d is outside 0..1024", num_threads);
    zf_thread_pool_t *pool = calloc(1, sizeof *pool);
    if (!pool) return zf_out_of_memory("thread pool");
    pool->num_threads = num_threads ? num_threads : s_online_cores();
    pool->cap = 64;
    pool->ring = malloc(pool->cap * sizeof *pool->ring);
    pool->threads = calloc((size_t)pool->num_threads, sizeof *pool->threads);
    if (!pool->ring || !pool->threads) {
        free(pool->ring);
        free(pool->threads);
        free(pool);
        return zf_out_of_memory("thread pool");
    }
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->has_work, NULL);
    for (int i = 0; i < pool->num_threads; i++) {
        if (pthread_create(&pool->threads[i], NULL, s_worker_main, pool) != 0) {
            pool->num_threads = i; /* join the ones that started */
            zf_thread_pool_destroy(&pool);
            return zf_status_new(ZF_RESOURCE_EXHAUSTED, "thread pool: cannot start thread %d", i);
        }
    }
    *out = pool;
    return ZF_STATUS_OK;
}

void zf_thread_pool_destroy(zf_thread_pool_t **pool_p)
{
    if (!pool_p || !*pool_p) return;
    zf_thread_pool_t *pool = *pool_p;
    *pool_p = NULL;
    pthread_mutex_lock(&pool->mu);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->has_work);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->num_threads; i++) pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->has_work);
    pthread_mutex_destroy(&pool->mu);
    free(pool->threads);
    free(pool->ring);
    free(pool);
}

int zf_thread_pool_size(const zf_thread_pool_t *pool)
{
    return pool ? pool->num_threads : 0;
}

/* Doubles the ring, unrolling it so the queue starts at index 0. */
static bool s_grow_locked(zf_thread_pool_t *pool)
{
    size_t cap = pool->cap * 2;
    s_task_t *ring = malloc(cap * sizeof *ring);
    if (!ring) return false;
    for (size_t i = 0; i < pool->count; i++) ring[i] = pool->ring[(pool->head + i) % pool->cap];
    free(pool->ring);
    pool->ring = ring;
    pool->cap = cap;
    pool->head = 0;
    return true;
}

zf_status_t zf_thread_pool_submit(zf_thread_pool_t *pool, void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&pool->mu);
    if (pool->stopping) {
        pthread_mutex_unlock(&pool->mu);
        return zf_status_new(ZF_FAILED_PRECONDITION, "thread pool is shutting down");
    }
    if (pool->count == pool->cap && !s_grow_locked(pool)) {
        pthread_mutex_unlock(&pool->mu);
        return zf_out_of_memory("thread pool queue");
    }
    pool->ring[(pool->head + pool->count) % pool->cap] = (s_task_t){fn, arg};
    pool->count++;
    pthread_cond_signal(&pool->has_work);
    pthread_mutex_unlock(&pool->mu);
    return ZF_STATUS_OK;
}

/* ---- parallel for ------------------------------------------------------- */

/* Shared by the caller and its helper tasks. Helpers may start after the
 * caller has returned, so the job lives on the heap and the last of its
 * holders frees it. */
typedef struct {
    void (*fn)(void *arg, int64_t begin, int64_t end);
    void *arg;
    int64_t n, chunk, num_chunks;
    atomic_int_fast64_t next; /* next chunk to claim */
    atomic_int_fast64_t done; /* chunks finished */
    atomic_int refs;
    pthread_mutex_t mu;
    pthread_cond_t all_done;
} s_job_t;

static void s_job_unref(s_job_t **job_p)
{
    s_job_t *job = *job_p;
    *job_p = NULL;
    if (atomic_fetch_sub(&job->refs, 1) != 1) return;
    pthread_cond_destroy(&job->all_done);
    pthread_mutex_destroy(&job->mu);
    free(job);
}

/* Claims and runs chunks until none are left. */
static void s_job_work(s_job_t *job)
{
    for (;;) {
        int64_t c = atomic_fetch_add(&job->next, 1);
        if (c >= job->num_chunks) return;
        int64_t begin = c * job->chunk;
        int64_t end = begin + job->chunk < job->n ? begin + job->chunk : job->n;
        job->fn(job->arg, begin, end);
        if (atomic_fetch_add(&job->done, 1) + 1 == job->num_chunks) {
            pthread_mutex_lock(&job->mu);
            pthread_cond_signal(&job->all_done);
            pthread_mutex_unlock(&job->mu);
        }
    }
}

static void s_job_helper(void *arg)
{
    s_job_t *job = arg;
    s_job_work(job);
    s_job_unref(&job);
}

void zf_thread_pool_parallel_for(zf_thread_pool_t *pool, int64_t n, int64_t min_chunk,
                                 void (*fn)(void *arg, int64_t begin, int64_t end), void *arg)
{
    if (n <= 0) return;
    if (min_chunk < 1) min_chunk = 1;
    int workers = zf_thread_pool_size(pool);
    /* A few chunks per thread so that uneven chunks still balance. */
    int64_t max_chunks = 4 * ((int64_t)workers + 1);
    int64_t num_chunks = (n + min_chunk - 1) / min_chunk;
    if (num_chunks > max_chunks) num_chunks = max_chunks;
    s_job_t *job = workers > 0 && num_chunks > 1 ? malloc(sizeof *job) : NULL;
    if (!job) {
        fn(arg, 0, n);
        return;
    }
    job->fn = fn;
    job->arg = arg;
    job->n = n;
    job->chunk = (n + num_chunks - 1) / num_chunks;
    job->num_chunks = (n + job->chunk - 1) / job->chunk;
    atomic_init(&job->next, 0);
    atomic_init(&job->done, 0);
    atomic_init(&job->refs, 1);
    pthread_mutex_init(&job->mu, NULL);
    pthread_cond_init(&job->all_done, NULL);
    int64_t helpers = job->num_chunks - 1 < workers ? job->num_chunks - 1 : workers;
    for (int64_t i = 0; i < helpers; i++) {
        atomic_fetch_add(&job->refs, 1);
        zf_status_t s = zf_thread_pool_submit(pool, s_job_helper, job);
        if (!zf_ok(s)) { /* the caller does the work alone */
            zf_status_clear(&s);
            atomic_fetch_sub(&job->refs, 1);
            break;
        }
    }
    s_job_work(job);
    pthread_mutex_lock(&job->mu);
    while (atomic_load(&job->done) < job->num_chunks) pthread_cond_wait(&job->all_done, &job->mu);
    pthread_mutex_unlock(&job->mu);
    s_job_unref(&job);
}
