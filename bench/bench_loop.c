/* bench/loop: the engine's cost per while-loop iteration, in-process on one
 * CPU device.
 *
 * The loop counts i down from N to 0 with a trivial body:
 *     while (bool(i)) i = Identity(i) - 1
 * (Merge, Cast, LoopCond, Switch, Identity, Sub, NextIteration and a dead
 * Exit per iteration). The baseline is the same body without the loop, as a
 * straight-line graph: Cast -> LoopCond -> Switch -> Identity -> Sub, the
 * body repeated K times in one step so that the step's own cost is spread
 * out. Times are best of reps; reports iterations per second and the ratio
 * of the cost per iteration to the cost per straight-line body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "common/graphdef_io.h"
#include "executor/engine/engine.h"
#include "executor/kernels/kernel.h"

#define CPU0 "/job:localhost/replica:0/task:0/device:CPU:0"

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

static void s_const(FILE *b, const char *name, long long v)
{
    fprintf(b,
            "node { name: '%s' op: 'Const' attr { key: 'dtype' value { type: DT_INT64 } } attr { "
            "key: 'value' value { tensor { dtype: DT_INT64 tensor_shape {} int64_val: %lld } } } "
            "}\n",
            name, v);
}

static void s_enter(FILE *b, const char *name, const char *in, bool constant)
{
    fprintf(b,
            "node { name: '%s' op: 'Enter' input: '%s' " T64
            " attr { key: 'frame_name' value { s: 'loop' } } attr { key: 'is_constant' value { b: "
            "%s } } attr { key: 'parallel_iterations' value { i: 10 } } }\n",
            name, in, constant ? "true" : "false");
}

static Tensorflow__GraphDef *s_parse(s_text_t *t)
{
    Tensorflow__GraphDef *gd = NULL;
    if (fclose(t->f) != 0) exit(1);
    s_check(zf_graphdef_read_mem(t->text, t->len, ZF_FORMAT_PBTXT, &gd), "parse");
    free(t->text);
    return gd;
}

static Tensorflow__GraphDef *s_loop_graph(long long n)
{
    s_text_t b;
    s_open(&b);
    s_const(b.f, "start", n);
    s_const(b.f, "one", 1);
    s_enter(b.f, "enter", "start", false);
    s_enter(b.f, "enter_one", "one", true);
    fprintf(b.f, "node { name: 'merge' op: 'Merge' input: 'enter' input: 'next' " T64
                 " attr { key: 'N' value { i: 2 } } }\n");
    fprintf(b.f, "node { name: 'cast' op: 'Cast' input: 'merge' " CAST " }\n");
    fprintf(b.f, "node { name: 'cond' op: 'LoopCond' input: 'cast' }\n");
    fprintf(b.f, "node { name: 'switch' op: 'Switch' input: 'merge' input: 'cond' " T64 " }\n");
    fprintf(b.f, "node { name: 'exit' op: 'Exit' input: 'switch:0' " T64 " }\n");
    fprintf(b.f, "node { name: 'body' op: 'Identity' input: 'switch:1' " T64 " }\n");
    fprintf(b.f, "node { name: 'sub' op: 'Sub' input: 'body' input: 'enter_one' " T64 " }\n");
    fprintf(b.f, "node { name: 'next' op: 'NextIteration' input: 'sub' " T64 " }\n");
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
        zf_engine_args_t args = {r, NULL};
        double t0 = zf_bench_now();
        s_check(zf_engine_run(ex, &args), "step");
        best = zf_bench_min(best, zf_bench_now() - t0);
    }
    return best;
}

int main(void)
{
    const long long n = 200000;
    const int k = 2000;
    int reps = zf_bench_reps(5);
    zf_kernels_register_builtin(false);
    zf_device_t *dev = NULL;
    s_check(zf_device_cpu_new(CPU0, 0, &dev), "device");
    zf_engine_params_t params = {dev, NULL};
    Tensorflow__GraphDef *loop_gd = s_loop_graph(n), *straight_gd = s_straight_graph(k);
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
    return 0;
}
