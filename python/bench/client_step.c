/* The C client's side of python/bench/bench_client.py: on the cluster at
 * BROKER, creates a session for GRAPH and runs REPS steps feeding a float32
 * tensor of shape DIMS (e.g. 2,4) as FEED and fetching FETCH, each timed
 * alone; prints "median_us=M min_us=N". The first WARMUP steps (which build
 * the plan) are not counted.
 *
 *   client_step BROKER GRAPH FEED DIMS FETCH REPS [WARMUP]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "proto/graph.pb-c.h"

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 7 || argc > 8) {
        fprintf(stderr, "usage: client_step BROKER GRAPH FEED DIMS FETCH REPS [WARMUP]\n");
        return 2;
    }
    const char *prog = "client_step";
    int reps = atoi(argv[6]), warmup = argc > 7 ? atoi(argv[7]) : 20;
    if (reps < 1 || warmup < 0) {
        fprintf(stderr, "%s: REPS must be >= 1 and WARMUP >= 0\n", prog);
        return 2;
    }
    int64_t dims[ZF_MAX_RANK];
    int rank = 0;
    for (char *tok = strtok(argv[4], ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        long long d = strtoll(tok, &end, 10);
        if (*end || d < 0 || rank == ZF_MAX_RANK) {
            fprintf(stderr, "%s: DIMS must be sizes separated by commas, such as 2,4\n", prog);
            return 2;
        }
        dims[rank++] = d;
    }
    zf_shape_t shape;
    zf_bench_check(prog, "DIMS", zf_shape_make(rank, dims, &shape));
    Tensorflow__GraphDef *gd = NULL;
    zf_bench_check(prog, argv[2], zf_graphdef_read_file(argv[2], ZF_FORMAT_AUTO, &gd));
    zf_tensor_t *x = NULL;
    zf_bench_check(prog, "feed", zf_tensor_new(ZF_FLOAT, &shape, &x));
    zf_bench_fill(zf_tensor_data(x), (size_t)zf_tensor_num_elements(x), 7);

    zf_client_t *c = NULL;
    zf_bench_check(prog, "connect", zf_client_connect(argv[1], &c));
    char *session = NULL;
    zf_bench_check(prog, "create session", zf_client_session_create(c, gd, NULL, &session));
    const char *feed_names[] = {argv[3]};
    zf_tensor_t *feed_values[] = {x};
    const char *fetches[] = {argv[5]};
    zf_client_step_t step = {feed_names, feed_values, 1, fetches, 1, NULL, 0};
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t) return 1;
    for (int i = 0; i < warmup + reps; i++) {
        zf_tensor_t *out = NULL;
        double t0 = zf_bench_now();
        zf_bench_check(prog, "run", zf_client_session_run(c, session, &step, 0, &out));
        double dt = zf_bench_now() - t0;
        zf_tensor_unref(&out);
        if (i >= warmup) t[i - warmup] = dt;
    }
    qsort(t, (size_t)reps, sizeof *t, s_cmp);
    printf("median_us=%.1f min_us=%.1f\n", t[reps / 2] * 1e6, t[0] * 1e6);
    zf_bench_check(prog, "close session", zf_client_session_close(c, session));
    free(session);
    free(t);
    zf_tensor_unref(&x);
    zf_client_destroy(&c);
    zf_graphdef_free(&gd);
    return 0;
}
