/* bench/optimize: a step of a graph with a large constant sub-graph, with
 * the graph optimizer (opt_level L1, the default) against without (L0),
 * through the in-process session on one CPU, in the same run.
 *
 * The graph: W = 256x256 constants, a chain of 8 MatMuls of W and tanh of
 * them (all constant, folded at L1 into one Const), then y = x * chain for
 * a fed 256x256 x. At L1 a step is one multiplication; at L0 it recomputes
 * the chain. Times are best of reps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "common/graphdef_io.h"
#include "executor/engine/graph_optimizer.h"
#include "session/local_session.h"

#define N     256
#define DEPTH 8

static void s_check(zf_status_t s, const char *what)
{
    zf_bench_check("optimize", what, s);
}

static Tensorflow__GraphDef *s_graph(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) exit(1);
    fprintf(f,
            "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
            "node { name: 'w' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
            " attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape {"
            " dim { size: %d } dim { size: %d } } float_val: 0.01 } } } }\n",
            N, N);
    const char *prev = "w";
    char name[32], prev_buf[32];
    for (int k = 0; k < DEPTH; k++) {
        snprintf(name, sizeof name, "m%d", k);
        fprintf(f,
                "node { name: '%s' op: 'MatMul' input: '%s' input: 'w'"
                " attr { key: 'T' value { type: DT_FLOAT } } }\n",
                name, prev);
        fprintf(f,
                "node { name: 't%d' op: 'Tanh' input: '%s'"
                " attr { key: 'T' value { type: DT_FLOAT } } }\n",
                k, name);
        snprintf(prev_buf, sizeof prev_buf, "t%d", k);
        prev = prev_buf;
    }
    fprintf(f,
            "node { name: 'y' op: 'Mul' input: 'x' input: '%s'"
            " attr { key: 'T' value { type: DT_FLOAT } } }\n",
            prev);
    fclose(f);
    Tensorflow__GraphDef *gd = NULL;
    s_check(zf_graphdef_read_mem(text, len, ZF_FORMAT_PBTXT, &gd), "parse");
    free(text);
    return gd;
}

static double s_best_step(int level, int reps, zf_tensor_t *x)
{
    Tensorflow__GraphDef *gd = s_graph();
    zf_local_session_options_t o = ZF_LOCAL_SESSION_OPTIONS_DEFAULT;
    o.opt_level = level;
    zf_local_session_t *s = NULL;
    s_check(zf_local_session_new(gd, &o, &s), "session");
    const char *feed = "x", *fetch = "y";
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) { /* the first run builds the plan */
        zf_tensor_t *y = NULL;
        double t0 = zf_bench_now();
        s_check(zf_local_session_run(s, &feed, &x, 1, &fetch, 1, NULL, 0, &y), "step");
        if (r > 0) best = zf_bench_min(best, zf_bench_now() - t0);
        zf_tensor_unref(&y);
    }
    zf_local_session_destroy(&s);
    zf_graphdef_free(&gd);
    return best;
}

int main(void)
{
    int reps = zf_bench_reps(20);
    zf_shape_t shape = {.rank = 2, .dims = {N, N}};
    zf_tensor_t *x = NULL;
    s_check(zf_tensor_new(ZF_FLOAT, &shape, &x), "feed");
    zf_bench_fill(zf_tensor_data(x), (size_t)N * N, 7);
    double l0 = s_best_step(ZF_OPT_L0, reps, x), l1 = s_best_step(ZF_OPT_L1, reps, x);
    printf("optimize: a step of x * tanh(...tanh(W W)... W), %d constant %dx%d MatMul+Tanh, best "
           "of %d\n",
           DEPTH, N, N, reps);
    printf("  without the optimizer (L0)  %8.3f ms\n", l0 * 1e3);
    printf("  with it (L1, folded)        %8.3f ms\n", l1 * 1e3);
    printf("  L1 / L0 %.3fx\n", l1 / l0);
    zf_tensor_unref(&x);
    return 0;
}
