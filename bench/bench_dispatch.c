/* bench/dispatch: the executor's cost per node on a 100k-node Identity
 * chain (Const -> Identity -> ... -> Identity) on one CPU device.
 *
 * Times, best of N steps:
 *   direct:   the Identity kernel's compute called 100k times in a loop,
 *             passing the tensor along by hand (the baseline: kernel work
 *             with no scheduling);
 *   executor: one zf_engine_run() step over the chain.
 * Reports µs per node for both and the executor's dispatch overhead per node
 * (executor - direct). Target (docs/design.md, "Performance targets"): executor <= 1 µs per node.
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
    zf_bench_check("dispatch", what, s);
}

/* The chain as text: node n0 is the Const, n1..n-1 Identities. */
static char *s_chain_text(int n, size_t *len)
{
    size_t cap = (size_t)n * 128 + 512, used = 0;
    char *text = malloc(cap);
    if (!text) exit(1);
    used += (size_t)snprintf(
        text, cap,
        "node { name: 'n0' op: 'Const' "
        "attr { key: 'dtype' value { type: DT_FLOAT } } "
        "attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n");
    for (int i = 1; i < n; i++)
        used += (size_t)snprintf(text + used, cap - used,
                                 "node { name: 'n%d' op: 'Identity' input: 'n%d' "
                                 "attr { key: 'T' value { type: DT_FLOAT } } }\n",
                                 i, i - 1);
    *len = used;
    return text;
}

/* The baseline: the kernel alone, called as the executor would, without
 * any scheduling. */
static double s_direct(const zf_kernel_t *k, Tensorflow__GraphDef *gd, zf_device_t *dev,
                       zf_tensor_t *start, int n)
{
    zf_tensor_t *cur = zf_tensor_ref(start);
    double t0 = zf_bench_now();
    for (int i = 1; i < n; i++) {
        zf_tensor_t *out = NULL;
        zf_kernel_ctx_t ctx = {.node = gd->node[i],
                               .device = dev,
                               .inputs = &cur,
                               .num_inputs = 1,
                               .outputs = &out,
                               .num_outputs = 1};
        s_check(k->compute(&ctx), "direct Identity");
        zf_tensor_unref(&cur);
        cur = out;
    }
    double t = zf_bench_now() - t0;
    zf_tensor_unref(&cur);
    return t;
}

int main(void)
{
    const int n = 100000;
    int reps = zf_bench_reps(10);
    zf_kernels_register_builtin(false);
    zf_device_t *dev = NULL;
    s_check(zf_device_cpu_new(CPU0, 0, &dev), "device");
    size_t len = 0;
    char *text = s_chain_text(n, &len);
    Tensorflow__GraphDef *gd = NULL;
    s_check(zf_graphdef_read_mem(text, len, ZF_FORMAT_PBTXT, &gd), "parse");
    free(text);
    zf_engine_t *ex = NULL;
    zf_engine_params_t params = {dev, NULL};
    double t0 = zf_bench_now();
    s_check(zf_engine_new(gd, &params, &ex), "executor");
    double build = zf_bench_now() - t0;

    const zf_kernel_t *k = NULL;
    s_check(zf_kernel_find("CPU", gd->node[1], &k), "find Identity");
    zf_tensor_t *start = NULL;
    s_check(zf_tensor_new_scalar_float(1.0f, &start), "tensor");
    double direct = 1e30, run = 1e30;
    zf_engine_args_t args = {0, NULL, NULL};
    for (int r = 0; r < reps; r++) {
        direct = zf_bench_min(direct, s_direct(k, gd, dev, start, n));
        args.step_id = r;
        t0 = zf_bench_now();
        s_check(zf_engine_run(ex, &args), "step");
        run = zf_bench_min(run, zf_bench_now() - t0);
    }
    double per_direct = direct / n * 1e6, per_run = run / n * 1e6;
    printf("dispatch: %d-node Identity chain, best of %d\n", n, reps);
    printf("  build (plan + kernels)  %8.3f ms  (%.3f us/node)\n", build * 1e3, build / n * 1e6);
    printf("  direct kernel calls     %8.3f ms  (%.3f us/node)\n", direct * 1e3, per_direct);
    printf("  executor step           %8.3f ms  (%.3f us/node)\n", run * 1e3, per_run);
    printf("  overhead per node       %8.3f us   executor/direct %.2fx\n", per_run - per_direct,
           per_run / per_direct);
    printf("  target executor <= 1 us/node: %s\n", per_run <= 1.0 ? "met" : "NOT met");
    zf_tensor_unref(&start);
    zf_engine_destroy(&ex);
    zf_graphdef_free(&gd);
    zf_device_destroy(&dev);
    return 0;
}
