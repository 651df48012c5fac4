/* bench/remote: executor-to-executor rendezvous bandwidth against raw
 * ZeroMQ PUSH/PULL on the same transport, in the same run.
 *
 * Two data planes (executor/rendezvous/remote.h) in one process over tcp://127.0.0.1:
 * a sender thread calls zf_rendezvous_send() on A's step rendezvous with a
 * key whose destination is B's device, so the remote-send hook pushes the
 * tensor; B's receiver thread puts it into B's rendezvous, where the main
 * thread takes it with zf_rendezvous_recv() — the whole path a _Send/_Recv
 * pair across executors takes. The baseline is one zero-copy frame per
 * message between a raw PUSH and PULL, as in bench/transport. Best of N
 * runs each, interleaved; GB/s from the first send to the last receive.
 * Target (docs/design.md, "Performance targets"): remote/raw >= 0.9.
 *
 * The same data planes once more with CurveZMQ keys (a fresh key directory,
 * both sides executors), interleaved with the plain ones: curve/remote is
 * what encrypting and authenticating every frame costs (target >= 0.5 for
 * 64 MiB tensors; a 1 MiB tensor is one chunk, with nothing to overlap).
 * These two pairs have the shared-memory path turned off, so they measure
 * the byte path.
 *
 * A third pair keeps the shared-memory path on (remote.h, "Same-host host
 * memory") with the default arena (the fallbacks to bytes are printed),
 * against memcpy of the same size between two buffers already touched (at
 * 1 MiB both stay in the caches), in the same run: shm/memcpy (target >=
 * 0.5). The shm path is one copy into the arena on the sending side plus
 * an offer, across five threads (the sender, two ZeroMQ I/O threads, the
 * receiving transport's receiver and the taker) where memcpy has one; the
 * receiver lets go of a block by a store into its release word, which the
 * sender reads before its next copy, and reads the bytes in place (this
 * bench does not touch them, nor does memcpy's figure include reading them
 * a second time).
 *
 * A fourth case sends many small tensors per step: 1000 float[16]
 * (64-byte) tensors under 1000 keys, every _Recv waiting already in a
 * claimed step (as the receiving partition's _Recv nodes are, from the
 * step's start on an executor that runs it), against
 * 1000 raw 64-byte ZeroMQ messages on a PUSH/PULL pair of the same
 * context, in the same run: raw/remote time per step (higher is better),
 * with the sends in a send batch as the engine makes them (all but the
 * last held back and pushed in a few messages: 32, 64, 128, then 256
 * tensors each), and with batches off (one message each, as before
 * batches).
 *
 * Arguments name the cases to run (plain, shm, small; default all), and
 * ZFLOW_BENCH_REPS the runs of each. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "common/keys.h"

#include "bench/bench_util.h"
#include "executor/rendezvous/remote.h"

#define DEV_A "/job:localhost/replica:0/task:0/device:CPU:0"
#define DEV_B "/job:localhost/replica:0/task:0/device:CPU:1"
#define KEY   DEV_A ";0000000000000001;" DEV_B ";t:0;0:0"

static void s_check(zf_status_t s)
{
    zf_bench_check("remote", NULL, s);
}

typedef struct {
    zf_zctx_t *ctx;
    zf_rendezvous_mgr_t *mgr_a, *mgr_b;
    zf_remote_t *a, *b;
    zf_socket_t *push, *pull; /* the raw baseline */
    void *src, *dst;          /* the memcpy baseline */
} s_bench_t;

typedef struct {
    s_bench_t *b;
    zf_tensor_t *t;
    int64_t step;
    int count;
} s_sender_t;

static void s_no_free(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

static void *s_send_raw(void *arg)
{
    s_sender_t *s = arg;
    for (int i = 0; i < s->count; i++) {
        zmq_msg_t msg;
        zmq_msg_init_data(&msg, zf_tensor_data(s->t), zf_tensor_nbytes(s->t), s_no_free, NULL);
        if (zmq_msg_send(&msg, zf_socket_handle(s->b->push), 0) < 0) exit(1);
    }
    return NULL;
}

static void *s_send_remote(void *arg)
{
    s_sender_t *s = arg;
    zf_rendezvous_t *r = NULL;
    s_check(zf_rendezvous_mgr_find(s->b->mgr_a, s->step, &r));
    for (int i = 0; i < s->count; i++) s_check(zf_rendezvous_send(r, KEY, s->t, false));
    zf_rendezvous_unref(&r);
    /* shared-memory offers stay held until the receiver answers */
    zf_remote_finish_step(s->b->a, s->step);
    return NULL;
}

static void s_recv_raw(s_bench_t *b, size_t size, int count)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    for (int i = 0; i < count; i++)
        if (zmq_msg_recv(&msg, zf_socket_handle(b->pull), 0) < 0 || zmq_msg_size(&msg) != size)
            exit(1);
    zmq_msg_close(&msg);
}

static void s_recv_remote(s_bench_t *b, int64_t step, size_t size, int count)
{
    zf_rendezvous_t *r = NULL;
    s_check(zf_rendezvous_mgr_find(b->mgr_b, step, &r));
    for (int i = 0; i < count; i++) {
        zf_tensor_t *t = NULL;
        s_check(zf_rendezvous_recv(r, KEY, 10000, &t, NULL));
        if (zf_tensor_nbytes(t) != size) exit(1);
        zf_tensor_unref(&t);
    }
    zf_rendezvous_unref(&r);
    zf_remote_cleanup_step(b->b, step, NULL);
}

/* Seconds to copy count tensors' bytes with memcpy, between buffers
 * already touched. */
static double s_run_memcpy(s_bench_t *b, zf_tensor_t *t, int count)
{
    size_t n = zf_tensor_nbytes(t);
    double t0 = zf_bench_now();
    for (int i = 0; i < count; i++) {
        memcpy(b->dst, b->src, n);
        __asm__ volatile("" : : "r"(b->dst) : "memory"); /* keep every copy */
    }
    return zf_bench_now() - t0;
}

/* Seconds to move count tensors one way. */
static double s_run(s_bench_t *b, zf_tensor_t *t, bool remote, int count)
{
    static int64_t step;
    s_sender_t s = {b, t, ++step, count};
    pthread_t th;
    double t0 = zf_bench_now();
    if (pthread_create(&th, NULL, remote ? s_send_remote : s_send_raw, &s) != 0) exit(1);
    if (remote)
        s_recv_remote(b, s.step, zf_tensor_nbytes(t), count);
    else
        s_recv_raw(b, zf_tensor_nbytes(t), count);
    double t1 = zf_bench_now();
    pthread_join(th, NULL);
    return t1 - t0;
}

/* keys: a key directory for a secure pair (CURVE), NULL for plain;
 * shm_bytes: the sender's shared-memory arena (0: the byte path only). */
static void s_open(s_bench_t *b, const char *keys, size_t shm_bytes)
{
    memset(b, 0, sizeof *b);
    s_check(zf_zctx_new(&b->ctx));
    /* two I/O threads, so that the sending and the receiving side each have
     * one, as two executor processes do (CURVE encrypts and decrypts there) */
    if (zmq_ctx_set(zf_zctx_handle(b->ctx), ZMQ_IO_THREADS, 2) != 0) exit(1);
    if (keys) s_check(zf_zctx_set_keys(b->ctx, keys, ZF_ROLE_EXECUTOR));
    s_check(zf_rendezvous_mgr_new(&b->mgr_a));
    s_check(zf_rendezvous_mgr_new(&b->mgr_b));
    s_check(zf_remote_new(b->ctx, b->mgr_a, NULL, &b->a));
    s_check(zf_remote_new(b->ctx, b->mgr_b, NULL, &b->b));
    zf_remote_set_shm(b->a, shm_bytes, 0);
    s_check(zf_remote_attach(b->a, DEV_A));
    s_check(zf_remote_attach(b->b, DEV_B));
    s_check(zf_remote_set_peer(b->a, DEV_B, zf_remote_endpoint(b->b)));
    /* the receiver answers shared-memory offers on its push socket to A */
    s_check(zf_remote_set_peer(b->b, DEV_A, zf_remote_endpoint(b->a)));
    const char *ep = NULL;
    s_check(zf_socket_new(b->ctx, ZF_SOCKET_PULL, &b->pull));
    s_check(zf_socket_new(b->ctx, ZF_SOCKET_PUSH, &b->push));
    s_check(zf_socket_bind(b->pull, "tcp://127.0.0.1:*", &ep));
    s_check(zf_socket_connect(b->push, ep));
}

static void s_close(s_bench_t *b)
{
    zf_socket_destroy(&b->push);
    zf_socket_destroy(&b->pull);
    zf_remote_destroy(&b->a);
    zf_remote_destroy(&b->b);
    zf_rendezvous_mgr_destroy(&b->mgr_a);
    zf_rendezvous_mgr_destroy(&b->mgr_b);
    zf_zctx_destroy(&b->ctx);
}

/* The shared-memory path against memcpy, 1 MiB and 64 MiB. */
static void s_bench_shm(int reps, const size_t sizes[2], const int counts[2])
{
    printf("\nshm: best of %d runs, rendezvous to rendezvous through the shared-memory arena; "
           "memcpy: the same bytes between two touched buffers\n",
           reps);
    printf("%9s %6s %12s %10s %8s %10s\n", "bytes", "msgs", "memcpy_GB/s", "shm_GB/s", "ratio",
           "fallbacks");
    double worst = 1e30;
    for (int i = 0; i < 2; i++) {
        s_bench_t b;
        s_open(&b, NULL, (size_t)ZF_REMOTE_SHM_MIB << 20);
        b.src = malloc(sizes[i]);
        b.dst = malloc(sizes[i]);
        if (!b.src || !b.dst) exit(1);
        memset(b.src, 1, sizes[i]);
        memset(b.dst, 2, sizes[i]);
        zf_tensor_t *t = NULL;
        zf_shape_t shape = ZF_SHAPE((int64_t)(sizes[i] / sizeof(float)));
        s_check(zf_tensor_new(ZF_FLOAT, &shape, &t));
        memset(zf_tensor_data(t), 1, sizes[i]); /* real pages, as memcpy's source */
        s_run(&b, t, true, counts[i]); /* warm up: touches every page of the arena it uses */
        s_run_memcpy(&b, t, counts[i] / 4 + 1);
        double best[2] = {1e30, 1e30};
        for (int r = 0; r < reps; r++) {
            best[0] = zf_bench_min(best[0], s_run_memcpy(&b, t, counts[i]));
            best[1] = zf_bench_min(best[1], s_run(&b, t, true, counts[i]));
        }
        double gb = (double)sizes[i] * counts[i] / 1e9, ratio = best[0] / best[1];
        worst = zf_bench_min(worst, ratio);
        zf_remote_shm_stats_t st = zf_remote_shm_stats(b.a);
        printf("%9zu %6d %12.2f %10.2f %8.2f %10llu\n", sizes[i], counts[i], gb / best[0],
               gb / best[1], ratio, (unsigned long long)st.shm_fallbacks);
        zf_tensor_unref(&t);
        free(b.src);
        free(b.dst);
        s_close(&b);
    }
    printf("worst shm/memcpy bandwidth ratio, 1 MiB and 64 MiB: %.2fx (target >= 0.5)\n", worst);
}

/* ---- many small tensors ----------------------------------------------------- */

#define SMALL_N     1000
#define SMALL_ELEMS 16 /* floats: 64 bytes */

typedef struct {
    s_bench_t *b;
    zf_tensor_t **t; /* SMALL_N tensors */
    char **keys;     /* SMALL_N keys */
    int64_t step;
} s_small_t;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int got, bad;
} s_small_wait_t;

static void s_small_done(zf_status_t status, zf_tensor_t *tensor, bool is_dead, void *arg)
{
    s_small_wait_t *w = arg;
    bool ok = zf_ok(status) && !is_dead && tensor && zf_tensor_nbytes(tensor) == 64;
    zf_status_clear(&status);
    zf_tensor_unref(&tensor);
    pthread_mutex_lock(&w->mu);
    w->bad += !ok;
    if (++w->got == SMALL_N) pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* The sends as the engine makes them when SMALL_N _Sends are ready at
 * once: in a send batch, but for the last, which goes alone after it. */
static void *s_small_send_remote(void *arg)
{
    s_small_t *s = arg;
    zf_rendezvous_t *r = NULL;
    s_check(zf_rendezvous_mgr_find(s->b->mgr_a, s->step, &r));
    bool batch = zf_rendezvous_batch_begin();
    for (int i = 0; i < SMALL_N; i++) {
        if (i == SMALL_N - 1 && batch) zf_rendezvous_batch_end();
        s_check(zf_rendezvous_send(r, s->keys[i], s->t[i], false));
    }
    zf_rendezvous_unref(&r);
    zf_remote_finish_step(s->b->a, s->step);
    return NULL;
}

static void *s_small_send_raw(void *arg)
{
    s_small_t *s = arg;
    for (int i = 0; i < SMALL_N; i++)
        if (zmq_send(zf_socket_handle(s->b->push), zf_tensor_data(s->t[i]), 64, 0) != 64) exit(1);
    return NULL;
}

/* Seconds for one step of SMALL_N small tensors (remote) or as many raw
 * messages. */
static double s_small_run(s_bench_t *b, zf_tensor_t **t, char **keys, bool remote)
{
    static int64_t step = 1000000;
    s_small_t s = {b, t, keys, ++step};
    s_small_wait_t w = {.got = 0};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    zf_rendezvous_t *r = NULL;
    if (remote) { /* the receiving partition's _Recvs wait from the step's start */
        s_check(zf_remote_claim_step(b->b, s.step, &r)); /* as an executor's running step */
        for (int i = 0; i < SMALL_N; i++)
            s_check(zf_rendezvous_recv_async(r, keys[i], s_small_done, &w, NULL));
    }
    pthread_t th;
    double t0 = zf_bench_now();
    if (pthread_create(&th, NULL, remote ? s_small_send_remote : s_small_send_raw, &s) != 0)
        exit(1);
    if (remote) {
        pthread_mutex_lock(&w.mu);
        while (w.got < SMALL_N) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
    } else {
        char buf[64];
        for (int i = 0; i < SMALL_N; i++)
            if (zmq_recv(zf_socket_handle(b->pull), buf, sizeof buf, 0) != 64) exit(1);
    }
    double t1 = zf_bench_now();
    pthread_join(th, NULL);
    if (w.bad) {
        fprintf(stderr, "remote: %d small tensors arrived wrong\n", w.bad);
        exit(1);
    }
    if (remote) {
        zf_rendezvous_unref(&r);
        zf_remote_cleanup_step(b->b, s.step, NULL);
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return t1 - t0;
}

/* SMALL_N small tensors per step, rendezvous to rendezvous, sent in a
 * batch and one message each (batches off on a second pair), against as
 * many raw ZeroMQ messages. */
static void s_bench_small(int reps)
{
    s_bench_t b, one;
    s_open(&b, NULL, (size_t)ZF_REMOTE_SHM_MIB << 20);
    s_open(&one, NULL, (size_t)ZF_REMOTE_SHM_MIB << 20);
    zf_remote_set_batch(one.a, 0);
    zf_tensor_t *t[SMALL_N];
    char *keys[SMALL_N];
    zf_shape_t shape = ZF_SHAPE(SMALL_ELEMS);
    for (int i = 0; i < SMALL_N; i++) {
        s_check(zf_tensor_new(ZF_FLOAT, &shape, &t[i]));
        float *v = zf_tensor_data(t[i]);
        for (int k = 0; k < SMALL_ELEMS; k++) v[k] = (float)(i + k);
        keys[i] = malloc(256);
        if (!keys[i]) exit(1);
        snprintf(keys[i], 256, "%s;0000000000000001;%s;small%d:0;0:0", DEV_A, DEV_B, i);
    }
    for (int w = 0; w < 3; w++) { /* warm up */
        s_small_run(&b, t, keys, false);
        s_small_run(&b, t, keys, true);
        s_small_run(&one, t, keys, true);
    }
    zf_remote_stats_t st0 = zf_remote_stats(b.a), one0 = zf_remote_stats(one.a);
    double best[3] = {1e30, 1e30, 1e30};
    int steps = reps * 4;
    for (int r = 0; r < steps; r++) {
        best[0] = zf_bench_min(best[0], s_small_run(&b, t, keys, false));
        best[1] = zf_bench_min(best[1], s_small_run(&one, t, keys, true));
        best[2] = zf_bench_min(best[2], s_small_run(&b, t, keys, true));
    }
    zf_remote_stats_t st = zf_remote_stats(b.a), one1 = zf_remote_stats(one.a);
    printf("\nsmall: best of %d steps, %d float[%d] tensors per step rendezvous to rendezvous, "
           "one message each (one) and in send batches (batched); raw: %d 64-byte ZeroMQ "
           "messages\n",
           steps, SMALL_N, SMALL_ELEMS, SMALL_N);
    printf("%8s %8s %8s %10s %10s %10s %12s\n", "tensors", "raw_us", "one_us", "batched_us",
           "raw/one", "raw/batch", "batches/step");
    printf("%8d %8.0f %8.0f %10.0f %10.2f %10.2f %12.1f\n", SMALL_N, best[0] * 1e6, best[1] * 1e6,
           best[2] * 1e6, best[0] / best[1], best[0] / best[2],
           (double)(st.batches_sent - st0.batches_sent) / steps);
    if (one1.batches_sent != one0.batches_sent) exit(1);
    for (int i = 0; i < SMALL_N; i++) {
        zf_tensor_unref(&t[i]);
        free(keys[i]);
    }
    s_close(&one);
    s_close(&b);
}

/* Whether case name is to run: named in argv, or none named. */
static bool s_wanted(int argc, char **argv, const char *name)
{
    if (argc < 2) return true;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return true;
    return false;
}

/* The byte path, plain and with CURVE, against raw ZeroMQ. */
static void s_bench_plain(int reps, const size_t sizes[2], const int counts[2])
{
    char keys[] = "/tmp/zflow-bench-keys-XXXXXX";
    if (!mkdtemp(keys)) exit(1);
    s_check(zf_keygen_cluster(keys));
    s_bench_t b, bs;
    s_open(&b, NULL, 0);
    s_open(&bs, keys, 0);
    printf("remote: best of %d runs, rendezvous to rendezvous over tcp://127.0.0.1 in one "
           "process; curve: the same with CurveZMQ keys\n",
           reps);
    printf("%9s %6s %10s %12s %11s %8s %13s\n", "bytes", "msgs", "raw_GB/s", "remote_GB/s",
           "curve_GB/s", "ratio", "curve/remote");
    double worst = 1e30, curves[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        zf_tensor_t *t = NULL;
        zf_shape_t shape = ZF_SHAPE((int64_t)(sizes[i] / sizeof(float)));
        s_check(zf_tensor_new(ZF_FLOAT, &shape, &t));
        double best[3] = {1e30, 1e30, 1e30};
        s_run(&b, t, false, counts[i] / 4 + 1); /* warm up every connection */
        s_run(&b, t, true, counts[i] / 4 + 1);
        s_run(&bs, t, true, counts[i] / 4 + 1);
        for (int r = 0; r < reps; r++)
            for (int z = 0; z < 3; z++)
                best[z] = zf_bench_min(best[z], s_run(z == 2 ? &bs : &b, t, z >= 1, counts[i]));
        double gb = (double)sizes[i] * counts[i] / 1e9;
        double ratio = best[0] / best[1], curve = best[1] / best[2];
        worst = zf_bench_min(worst, ratio);
        curves[i] = curve;
        printf("%9zu %6d %10.2f %12.2f %11.2f %8.2f %13.2f\n", sizes[i], counts[i], gb / best[0],
               gb / best[1], gb / best[2], ratio, curve);
        zf_tensor_unref(&t);
    }
    zf_remote_stats_t st = zf_remote_stats(b.b);
    printf("delivered %llu, dropped %llu, malformed %llu\n", (unsigned long long)st.delivered,
           (unsigned long long)st.dropped, (unsigned long long)st.malformed);
    printf("worst remote/raw bandwidth ratio, 1 MiB and 64 MiB: %.2fx (target >= 0.9)\n", worst);
    printf("curve/plain remote bandwidth ratio at 64 MiB: %.2fx (target >= 0.5); at 1 MiB, one "
           "chunk: %.2fx (no target)\n",
           curves[1], curves[0]);
    s_close(&bs);
    s_close(&b);
    static const char *const files[] = {"broker", "scheduler", "executor", "client"};
    for (int i = 0; i < 4; i++) {
        char path[64];
        snprintf(path, sizeof path, "%s/%s.key", keys, files[i]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s.pub", keys, files[i]);
        unlink(path);
    }
    rmdir(keys);
}

int main(int argc, char **argv)
{
    int reps = zf_bench_reps(5);
    const size_t sizes[2] = {(size_t)1 << 20, (size_t)64 << 20};
    const int counts[2] = {400, 12};
    if (s_wanted(argc, argv, "plain")) s_bench_plain(reps, sizes, counts);
    if (s_wanted(argc, argv, "shm")) s_bench_shm(reps, sizes, counts);
    if (s_wanted(argc, argv, "small")) s_bench_small(reps);
    return 0;
}
