/* bench/transport: data-plane bandwidth and message rate against raw
 * ZeroMQ on the same transport, in the same run.
 *
 * For tcp://127.0.0.1 and ipc://, a sender thread pushes FLOAT tensors of
 * 1 MiB and 64 MiB to a receiver thread in the same process (PUSH -> PULL):
 *   raw:   one frame per message, zmq_msg_init_data over a fixed buffer
 *          (zero-copy), received with zmq_msg_recv (the baseline);
 *   zflow: zf_tensor_frame_send / zf_tensor_frame_recv of one tensor (a
 *          msgpack header frame plus the zero-copy payload frame, and a
 *          zero-copy tensor on the receiving side).
 * Best of N runs each, interleaved; GB/s from the first send to the last
 * receive. Target (docs/design.md, "Performance targets"): zflow/raw >= 0.9. Also 64-byte messages
 * per second, where the header frame and validation dominate. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bench/bench_util.h"
#include "common/tensor_frame.h"

typedef struct {
    zf_socket_t *push;
    zf_tensor_t *tensor; /* zflow mode */
    void *bytes;         /* raw mode */
    size_t size;
    int count;
    int failed;
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
        if (s->size >= 64 * 1024)
            zmq_msg_init_data(&msg, s->bytes, s->size, s_no_free, NULL);
        else if (zmq_msg_init_size(&msg, s->size) == 0)
            memcpy(zmq_msg_data(&msg), s->bytes, s->size); /* as a small send would */
        if (zmq_msg_send(&msg, zf_socket_handle(s->push), 0) < 0) {
            zmq_msg_close(&msg);
            s->failed = 1;
            break;
        }
    }
    return NULL;
}

static void *s_send_zflow(void *arg)
{
    s_sender_t *s = arg;
    for (int i = 0; i < s->count; i++) {
        zf_status_t st = zf_tensor_frame_send(s->push, "bench;0:0", i, s->tensor, false);
        if (!zf_ok(st)) {
            fprintf(stderr, "transport: send failed: %s\n", zf_status_msg(&st));
            zf_status_clear(&st);
            s->failed = 1;
            break;
        }
    }
    return NULL;
}

static int s_recv_raw(zf_socket_t *pull, size_t size, int count)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    for (int i = 0; i < count; i++)
        if (zmq_msg_recv(&msg, zf_socket_handle(pull), 0) < 0 || zmq_msg_size(&msg) != size) {
            zmq_msg_close(&msg);
            return -1;
        }
    zmq_msg_close(&msg);
    return 0;
}

static int s_recv_zflow(zf_socket_t *pull, size_t size, int count)
{
    for (int i = 0; i < count; i++) {
        zf_tensor_frame_t f;
        zf_status_t st = zf_tensor_frame_recv(pull, 10000, &f);
        if (!zf_ok(st) || zf_tensor_nbytes(f.tensor) != size) {
            fprintf(stderr, "transport: recv failed: %s\n", zf_status_msg(&st));
            zf_status_clear(&st);
            zf_tensor_frame_clear(&f);
            return -1;
        }
        zf_tensor_frame_clear(&f);
    }
    return 0;
}

/* Seconds to move count messages of the tensor's size, one way. */
static double s_run(zf_socket_t *push, zf_socket_t *pull, zf_tensor_t *t, bool zflow, int count)
{
    s_sender_t s = {push, t, zf_tensor_data(t), zf_tensor_nbytes(t), count, 0};
    pthread_t th;
    double t0 = zf_bench_now();
    if (pthread_create(&th, NULL, zflow ? s_send_zflow : s_send_raw, &s) != 0) exit(1);
    int rc = zflow ? s_recv_zflow(pull, s.size, count) : s_recv_raw(pull, s.size, count);
    double t1 = zf_bench_now();
    pthread_join(th, NULL);
    if (rc != 0 || s.failed) {
        fprintf(stderr, "transport: a %s run failed\n", zflow ? "zflow" : "raw");
        exit(1);
    }
    return t1 - t0;
}

static void s_check(zf_status_t s)
{
    zf_bench_check("transport", NULL, s);
}

typedef struct {
    zf_zctx_t *ctx;
    zf_socket_t *push, *pull;
    const char *endpoint;
} s_link_t;

static void s_link_open(s_link_t *l, const char *bind_to)
{
    s_check(zf_zctx_new(&l->ctx));
    s_check(zf_socket_new(l->ctx, ZF_SOCKET_PULL, &l->pull));
    s_check(zf_socket_new(l->ctx, ZF_SOCKET_PUSH, &l->push));
    s_check(zf_socket_bind(l->pull, bind_to, &l->endpoint));
    s_check(zf_socket_connect(l->push, l->endpoint));
}

static void s_link_close(s_link_t *l)
{
    zf_socket_destroy(&l->push);
    zf_socket_destroy(&l->pull);
    zf_zctx_destroy(&l->ctx);
}

/* Best-of-reps seconds for raw and zflow, interleaved so drift hits both. */
static void s_measure(s_link_t *l, size_t bytes, int count, int reps, double best[2])
{
    zf_tensor_t *t = NULL;
    zf_shape_t shape = ZF_SHAPE((int64_t)(bytes / sizeof(float)));
    s_check(zf_tensor_new(ZF_FLOAT, &shape, &t));
    best[0] = best[1] = 1e30;
    s_run(l->push, l->pull, t, false, count > 4 ? count / 4 : 1); /* warm up the connection */
    for (int r = 0; r < reps; r++)
        for (int z = 0; z < 2; z++)
            best[z] = zf_bench_min(best[z], s_run(l->push, l->pull, t, z, count));
    zf_tensor_unref(&t);
}

int main(void)
{
    int reps = zf_bench_reps(5);
    const char *transports[2] = {"tcp://127.0.0.1:*", "ipc://*"};
    const char *names[2] = {"tcp", "ipc"};
    const size_t sizes[2] = {(size_t)1 << 20, (size_t)64 << 20};
    const int counts[2] = {400, 12};
    printf("transport: best of %d runs, sender and receiver threads in one process\n", reps);
    printf("%-5s %9s %6s %12s %12s %8s\n", "link", "bytes", "msgs", "raw_GB/s", "zflow_GB/s",
           "ratio");
    double worst = 1e30;
    for (int tr = 0; tr < 2; tr++) {
        s_link_t l;
        s_link_open(&l, transports[tr]);
        for (int i = 0; i < 2; i++) {
            double best[2];
            s_measure(&l, sizes[i], counts[i], reps, best);
            double gb = (double)sizes[i] * counts[i] / 1e9;
            double ratio = best[0] / best[1];
            worst = zf_bench_min(worst, ratio);
            printf("%-5s %9zu %6d %12.2f %12.2f %8.2f\n", names[tr], sizes[i], counts[i],
                   gb / best[0], gb / best[1], ratio);
        }
        double best[2];
        int small = 100000;
        s_measure(&l, 64, small, reps, best);
        printf("%-5s %9d %6d %10.0fk/s %10.0fk/s %8.2f  (64-byte messages per second)\n", names[tr],
               64, small, small / best[0] / 1e3, small / best[1] / 1e3, best[0] / best[1]);
        s_link_close(&l);
    }
    printf("worst zflow/raw bandwidth ratio, 1 MiB and 64 MiB: %.2fx (target >= 0.9)\n", worst);
    return 0;
}
