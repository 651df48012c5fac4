/* bench/loop: the engine's cost per while-loop iteration, in-process on one
 * CPU device, and across two executor processes.
 *
 * The loop counts i down from N to 0 with a trivial body:
 *     while (bool(i)) i = Identity(i) - 1
 * (Merge, Cast, LoopCond, Switch, Identity, Sub, NextIteration and a dead
 * Exit per iteration). The baseline is the same body without the loop, as a
 * straight-line graph: Cast -> LoopCond -> Switch -> Identity -> Sub, the
 * body repeated K times in one step so that the step's own cost is spread
 * out. Times are best of reps; reports iterations per second and the ratio
 * of the cost per iteration to the cost per straight-line body (target
 * <= 2x).
 *
 * Across executors: a local cluster (zflow-broker, a zflow-executor for
 * CPU:0 and one for CPU:1, zflow-scheduler; client/cluster.h) runs the same
 * loop with its body (Identity, Sub) on CPU:1 and everything else on CPU:0,
 * so each iteration sends the predicate and the value to CPU:1 and the
 * new value back. The baseline is one scalar round trip between the two
 * executors' rendezvous: a straight-line step that bounces a scalar K times
 * between CPU:0 and CPU:1 (Identity nodes pinned alternately), its time
 * over K. Target: iteration / round trip <= 2x.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "client/cluster.h"
#include "client/zflow_client.h"
#include "common/graphdef_io.h"
#include "executor/engine/engine.h"
#include "executor/kernels/kernel.h"

#define CPU0 "/job:localhost/replica:0/task:0/device:CPU:0"
#define CPU1 "/job:localhost/replica:0/task:0/device:CPU:1"

static void s_check(zf_status_t s, const char *what)
{
    zf_bench_check("loop", what, s);
}

/* Graph text goes to a memory stream; s_parse() reads it back. */
typedef struct {
    FILE *f;
    char *text;
    size_t len;
} s_text_t;

static void s_open(s_text_t *t)
{
    t->f = open_memstream(&t->text, &t->len);
    if (!t->f) exit(1);
}

#define T64 "attr { key: 'T' value { type: DT_INT64 } }"
#define CAST                                                                                       \
    "attr { key: 'SrcT' value { type: DT_INT64 } } attr { key: 'DstT' value { type: DT_BOOL } }"

/* " device: 'dev'" for a pinned node, "" otherwise. */
static const char *s_dev(const char *dev, char *buf, size_t size)
{
    if (!dev) return "";
    snprintf(buf, size, " device: '%s'", dev);
    return buf;
}

static void s_const(FILE *b, const char *name, long long v)
{
    fprintf(b,
            "node { name: '%s' op: 'Const' attr { key: 'dtype' value { type: DT_INT64 } } attr { "
            "key: 'value' value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: %lld } } } "
            "}\n",
            name, v);
}

static void s_enter(FILE *b, const char *name, const char *in, bool constant, const char *dev)
{
    char d[128];
    fprintf(b,
            "node { name: '%s' op: 'Enter' input: '%s'%s " T64
            " attr { key: 'frame_name' value { s: 'loop' } } attr { key: 'is_constant' value { b: "
            "%s } } attr { key: 'parallel_iterations' value { i: 10 } } }\n",
            name, in, s_dev(dev, d, sizeof d), constant ? "true" : "false");
}

static Tensorflow__GraphDef *s_parse(s_text_t *t)
{
    Tensorflow__GraphDef *gd = NULL;
    if (fclose(t->f) != 0) exit(1);
    s_check(zf_graphdef_read_mem(t->text, t->len, ZF_FORMAT_PBTXT, &gd), "parse");
    free(t->text);
    return gd;
}

/* The loop; with body_dev, its body (and the constant it reads) is pinned
 * there and everything else to CPU:0. */
static Tensorflow__GraphDef *s_loop_graph(long long n, const char *body_dev)
{
    const char *ctl = body_dev ? CPU0 : NULL;
    char cbuf[128], dbuf[128];
    s_text_t b;
    s_open(&b);
    s_const(b.f, "start", n);
    s_const(b.f, "one", 1);
    s_enter(b.f, "enter", "start", false, ctl);
    s_enter(b.f, "enter_one", "one", true, body_dev);
    const char *c = s_dev(ctl, cbuf, sizeof cbuf), *d = s_dev(body_dev, dbuf, sizeof dbuf);
    fprintf(b.f,
            "node { name: 'merge' op: 'Merge' input: 'enter' input: 'next'%s " T64
            " attr { key: 'N' value { i: 2 } } }\n",
            c);
    fprintf(b.f, "node { name: 'cast' op: 'Cast' input: 'merge'%s " CAST " }\n", c);
    fprintf(b.f, "node { name: 'cond' op: 'LoopCond' input: 'cast'%s }\n", c);
    fprintf(b.f, "node { name: 'switch' op: 'Switch' input: 'merge' input: 'cond'%s " T64 " }\n",
            c);
    fprintf(b.f, "node { name: 'exit' op: 'Exit' input: 'switch:0'%s " T64 " }\n", c);
    fprintf(b.f, "node { name: 'body' op: 'Identity' input: 'switch:1'%s " T64 " }\n", d);
    fprintf(b.f, "node { name: 'sub' op: 'Sub' input: 'body' input: 'enter_one'%s " T64 " }\n", d);
    fprintf(b.f, "node { name: 'next' op: 'NextIteration' input: 'sub'%s " T64 " }\n", c);
    return s_parse(&b);
}

/* A scalar bounced k times from CPU:0 to CPU:1 and back. */
static Tensorflow__GraphDef *s_pingpong_graph(int k)
{
    s_text_t b;
    s_open(&b);
    s_const(b.f, "p0", 7);
    for (int i = 1; i <= 2 * k; i++)
        fprintf(b.f, "node { name: 'p%d' op: 'Identity' input: 'p%d' device: '%s' " T64 " }\n", i,
                i - 1, i % 2 ? CPU1 : CPU0);
    return s_parse(&b);
}

/* The body k times in a row, without a loop. */
static Tensorflow__GraphDef *s_straight_graph(int k)
{
    s_text_t b;
    s_open(&b);
    s_const(b.f, "v0", 1000000000LL);
    s_const(b.f, "one", 1);
    for (int i = 0; i < k; i++) {
        fprintf(b.f, "node { name: 'cast%d' op: 'Cast' input: 'v%d' " CAST " }\n", i, i);
        fprintf(b.f, "node { name: 'cond%d' op: 'LoopCond' input: 'cast%d' }\n", i, i);
        fprintf(b.f,
                "node { name: 'switch%d' op: 'Switch' input: 'v%d' input: 'cond%d' " T64 " }\n", i,
                i, i);
        fprintf(b.f, "node { name: 'body%d' op: 'Identity' input: 'switch%d:1' " T64 " }\n", i, i);
        fprintf(b.f, "node { name: 'v%d' op: 'Sub' input: 'body%d' input: 'one' " T64 " }\n", i + 1,
                i);
    }
    return s_parse(&b);
}

static double s_best_step(zf_engine_t *ex, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        zf_engine_args_t args = {r, NULL, NULL};
        double t0 = zf_bench_now();
        s_check(zf_engine_run(ex, &args), "step");
        best = zf_bench_min(best, zf_bench_now() - t0);
    }
    return best;
}

/* Best time of reps steps of session fetching fetch. */
static double s_best_remote(zf_client_t *c, const char *session, const char *fetch, int reps)
{
    double best = 1e30;
    const char *fetches[1] = {fetch};
    zf_client_step_t step = {NULL, NULL, 0, fetches, 1, NULL, 0};
    for (int r = 0; r < reps; r++) {
        zf_tensor_t *out = NULL;
        double t0 = zf_bench_now();
        s_check(zf_client_session_run(c, session, &step, 600000, &out), "remote step");
        best = zf_bench_min(best, zf_bench_now() - t0);
        zf_tensor_unref(&out);
    }
    return best;
}

static char *s_session(zf_client_t *c, Tensorflow__GraphDef *gd)
{
    zf_client_session_options_t o = ZF_CLIENT_SESSION_OPTIONS_DEFAULT;
    char *session = NULL;
    s_check(zf_client_session_create(c, gd, &o, &session), "session");
    zf_graphdef_free(&gd);
    return session;
}

static void s_across_executors(const char *bin_dir, int reps)
{
    const long long n = 20000;
    const int k = 2000;
    zf_cluster_options_t o = ZF_CLUSTER_OPTIONS_DEFAULT;
    o.devices = "cpu:2";
    o.bin_dir = bin_dir;
    o.quiet = true;
    zf_cluster_t *cluster = NULL;
    zf_client_t *c = NULL;
    s_check(zf_cluster_start(&o, &cluster), "local cluster");
    s_check(zf_client_connect(zf_cluster_endpoint(cluster), &c), "client");
    zf_client_set_timeout(c, 600000);
    char *loop = s_session(c, s_loop_graph(n, CPU1)), *pingpong = s_session(c, s_pingpong_graph(k));
    char last[32];
    snprintf(last, sizeof last, "p%d", 2 * k);
    double t_loop = s_best_remote(c, loop, "exit", reps);
    double t_pp = s_best_remote(c, pingpong, last, reps);
    double per_iter = t_loop / (double)n * 1e6, per_rt = t_pp / k * 1e6;
    printf("loop across executors: %lld iterations, body on CPU:1, the rest on CPU:0\n", n);
    printf("  loop step               %8.3f ms  (%.3f us/iteration, %.0f iterations/s)\n",
           t_loop * 1e3, per_iter, (double)n / t_loop);
    printf("  scalar round trip x%d   %8.3f ms  (%.3f us/round trip)\n", k, t_pp * 1e3, per_rt);
    printf("  iteration / round trip %.2fx\n", per_iter / per_rt);
    s_check(zf_client_session_close(c, loop), "close");
    s_check(zf_client_session_close(c, pingpong), "close");
    free(loop);
    free(pingpong);
    zf_client_destroy(&c);
    zf_cluster_destroy(&cluster);
}

int main(int argc, char **argv)
{
    (void)argc;
    char bin[4096];
    zf_bench_bin_dir(argv[0], bin, sizeof bin);
    const long long n = 200000;
    const int k = 2000;
    int reps = zf_bench_reps(5);
    zf_kernels_register_builtin(false);
    zf_device_t *dev = NULL;
    s_check(zf_device_cpu_new(CPU0, 0, &dev), "device");
    zf_engine_params_t params = {dev, NULL};
    Tensorflow__GraphDef *loop_gd = s_loop_graph(n, NULL), *straight_gd = s_straight_graph(k);
    zf_engine_t *loop = NULL, *straight = NULL;
    s_check(zf_engine_new(loop_gd, &params, &loop), "loop engine");
    s_check(zf_engine_new(straight_gd, &params, &straight), "straight-line engine");
    double t_loop = s_best_step(loop, reps), t_straight = s_best_step(straight, reps);
    double per_iter = t_loop / (double)n * 1e6, per_body = t_straight / k * 1e6;
    printf("loop: %lld iterations of a trivial body (8 nodes each), best of %d\n", n, reps);
    printf("  loop step               %8.3f ms  (%.3f us/iteration, %.0f iterations/s)\n",
           t_loop * 1e3, per_iter, (double)n / t_loop);
    printf("  straight-line body x%d %8.3f ms  (%.3f us/body)\n", k, t_straight * 1e3, per_body);
    printf("  iteration / straight-line body %.2fx\n", per_iter / per_body);
    zf_engine_destroy(&loop);
    zf_engine_destroy(&straight);
    zf_graphdef_free(&loop_gd);
    zf_graphdef_free(&straight_gd);
    zf_device_destroy(&dev);
    s_across_executors(bin, reps);
    return 0;
}
