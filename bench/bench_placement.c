/* bench/placement: placement time against GraphDef load time.
 *
 * Builds synthetic GraphDefs of 100k and 1M nodes — chains with fan-in,
 * variables with assigns (reference edges), 10% of nodes colocated by
 * `_class` with another node, 10% with a partial device spec — packs them,
 * then times, best of N runs, over 8 devices (4 CPUs, 4 GPUs):
 *   load:  zf_graphdef_read_mem then zf_graph_new_from_graphdef (baseline);
 *   place: zf_placer_run in balanced mode with soft placement (Relu has no
 *          GPU kernel, and some Relus ask for a GPU), devices loaded unevenly.
 * Targets (docs/design.md, "Performance targets"): place/load <= 1 at 1M nodes,
 * place(1M)/place(100k)
 * <= 12. Kernel availability is registered here (every op on CPU, most on
 * GPU), so the figures do not depend on which kernels are built in. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "common/log.h"
#include "common/op_registry.h"
#include "scheduler/graph/placer.h"

#define S_N_DEVICES 8

static const char *const s_specs[] = {"/device:GPU:*", "/device:CPU:1", "/job:localhost/task:0",
                                      "/device:GPU:2", "/gpu:3",        "/device:CPU"};

static uint64_t s_rng = 88172645463325252ull;

static uint32_t s_rand(uint32_t n)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t)(s_rng % n);
}

/* ---- a synthetic graph, built as unpacked messages then packed ------------- */

static char *s_dup(const char *s)
{
    char *c = strdup(s);
    if (!c) {
        fprintf(stderr, "placement: out of memory\n");
        exit(1);
    }
    return c;
}

static void *s_alloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "placement: out of memory\n");
        exit(1);
    }
    return p;
}

static void s_attr(Tensorflow__NodeDef *nd, const char *key, Tensorflow__AttrValue *v)
{
    Tensorflow__NodeDef__AttrEntry *e = s_alloc(1, sizeof *e);
    tensorflow__node_def__attr_entry__init(e);
    e->key = s_dup(key);
    e->value = v;
    nd->attr[nd->n_attr++] = e;
}

static void s_type_attr(Tensorflow__NodeDef *nd, const char *key, Tensorflow__DataType type)
{
    Tensorflow__AttrValue *v = s_alloc(1, sizeof *v);
    tensorflow__attr_value__init(v);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v->type = type;
    s_attr(nd, key, v);
}

static void s_class_attr(Tensorflow__NodeDef *nd, int other)
{
    Tensorflow__AttrValue *v = s_alloc(1, sizeof *v);
    tensorflow__attr_value__init(v);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
    v->list = s_alloc(1, sizeof *v->list);
    tensorflow__attr_value__list_value__init(v->list);
    v->list->n_s = 1;
    v->list->s = s_alloc(1, sizeof *v->list->s);
    char buf[32];
    snprintf(buf, sizeof buf, "loc:@n%d", other);
    v->list->s[0].data = (uint8_t *)s_dup(buf);
    v->list->s[0].len = strlen(buf);
    s_attr(nd, "_class", v);
}

static void s_input(Tensorflow__NodeDef *nd, int src)
{
    char buf[32];
    snprintf(buf, sizeof buf, "n%d", src);
    nd->input[nd->n_input++] = s_dup(buf);
}

/* Node i: every 64th a Const, every 50th a VariableV2 whose next node is an
 * Assign to it, otherwise AddN of up to 3 earlier nodes or a Relu. */
static void s_node(Tensorflow__NodeDef *nd, int i, int n)
{
    tensorflow__node_def__init(nd);
    char name[32];
    snprintf(name, sizeof name, "n%d", i);
    nd->name = s_dup(name);
    nd->input = s_alloc(3, sizeof *nd->input);
    nd->attr = s_alloc(3, sizeof *nd->attr);
    if (i % 64 == 0) {
        nd->op = s_dup("Const");
        s_type_attr(nd, "dtype", TENSORFLOW__DATA_TYPE__DT_FLOAT);
    } else if (i % 50 == 0 && i > 0) {
        nd->op = s_dup("VariableV2");
        s_type_attr(nd, "dtype", TENSORFLOW__DATA_TYPE__DT_FLOAT);
    } else if (i % 50 == 1 && i > 1) {
        nd->op = s_dup("Assign");
        s_input(nd, i - 1);
        s_input(nd, i - 2);
        s_type_attr(nd, "T", TENSORFLOW__DATA_TYPE__DT_FLOAT);
    } else {
        int fan = i % 4 == 0 ? 1 : 1 + (int)s_rand(3);
        nd->op = s_dup(fan == 1 ? "Relu" : "AddN");
        for (int k = 0; k < fan; k++) s_input(nd, i - 1 - (int)s_rand(i < 16 ? (uint32_t)i : 16));
        s_type_attr(nd, "T", TENSORFLOW__DATA_TYPE__DT_FLOAT);
        if (fan > 1) {
            Tensorflow__AttrValue *v = s_alloc(1, sizeof *v);
            tensorflow__attr_value__init(v);
            v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
            v->i = fan;
            s_attr(nd, "N", v);
        }
    }
    if (i % 10 == 3) s_class_attr(nd, (int)s_rand((uint32_t)n));
    nd->device = s_dup(i % 10 == 7 ? s_specs[s_rand(6)] : "");
}

static uint8_t *s_packed_graph(int n, size_t *len)
{
    Tensorflow__GraphDef gd;
    tensorflow__graph_def__init(&gd);
    gd.n_node = (size_t)n;
    gd.node = s_alloc((size_t)n, sizeof *gd.node);
    for (int i = 0; i < n; i++) {
        gd.node[i] = s_alloc(1, sizeof *gd.node[i]);
        s_node(gd.node[i], i, n);
    }
    *len = tensorflow__graph_def__get_packed_size(&gd);
    uint8_t *buf = s_alloc(*len, 1);
    tensorflow__graph_def__pack(&gd, buf);
    for (int i = 0; i < n; i++) protobuf_c_message_free_unpacked(&gd.node[i]->base, NULL);
    free(gd.node);
    return buf;
}

/* ---- measuring -------------------------------------------------------------- */

static void s_register(void)
{
    const char *ops[] = {"Const", "VariableV2", "Assign", "Relu", "AddN"};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        zf_status_t s = zf_op_register_kernel(ops[k], "CPU");
        if (zf_ok(s) && k != 3) s = zf_op_register_kernel(ops[k], "GPU");
        if (!zf_ok(s)) {
            fprintf(stderr, "placement: %s\n", zf_status_msg(&s));
            exit(1);
        }
    }
}

static void s_devices(zf_placer_device_t *d)
{
    for (int k = 0; k < S_N_DEVICES; k++) {
        zf_status_t s =
            zf_device_name_make("localhost", 0, 0, k < 4 ? "CPU" : "GPU", k % 4, &d[k].name);
        if (!zf_ok(s)) exit(1);
        d[k].load = (k * 7) % 5;
    }
}

typedef struct {
    double load, place;
    size_t bytes;
} s_result_t;

static s_result_t s_measure(int n, int reps)
{
    size_t len = 0;
    uint8_t *buf = s_packed_graph(n, &len);
    zf_placer_device_t devices[S_N_DEVICES];
    s_devices(devices);
    int *assign = s_alloc((size_t)n, sizeof *assign);
    s_result_t r = {1e30, 1e30, len};
    for (int rep = 0; rep < reps; rep++) {
        Tensorflow__GraphDef *gd = NULL;
        zf_graph_t *g = NULL;
        double t0 = zf_bench_now();
        zf_status_t s = zf_graphdef_read_mem(buf, len, ZF_FORMAT_PB, &gd);
        if (zf_ok(s)) s = zf_graph_new_from_graphdef(gd, &g);
        double t1 = zf_bench_now();
        zf_placer_options_t opts = ZF_PLACER_OPTIONS_DEFAULT;
        opts.allow_soft_placement = true;
        if (zf_ok(s)) s = zf_placer_run(g, devices, S_N_DEVICES, &opts, assign);
        double t2 = zf_bench_now();
        if (!zf_ok(s)) {
            fprintf(stderr, "placement: %s\n", zf_status_msg(&s));
            exit(1);
        }
        r.load = zf_bench_min(r.load, t1 - t0);
        r.place = zf_bench_min(r.place, t2 - t1);
        zf_graph_destroy(&g);
        zf_graphdef_free(&gd);
    }
    free(assign);
    free(buf);
    return r;
}

int main(void)
{
    int reps = zf_bench_reps(5);
    zf_log_set_level(ZF_LOG_ERROR); /* soft placement logs each fallback */
    s_register();
    const int sizes[2] = {100000, 1000000};
    s_result_t r[2];
    printf("placement: best of %d runs, %d devices, 10%% colocated, 10%% partial specs\n", reps,
           S_N_DEVICES);
    printf("%9s %10s %12s %12s %8s\n", "nodes", "MiB", "load_ms", "place_ms", "ratio");
    for (int i = 0; i < 2; i++) {
        r[i] = s_measure(sizes[i], i == 0 ? reps : (reps + 1) / 2);
        printf("%9d %10.1f %12.2f %12.2f %8.2f\n", sizes[i], (double)r[i].bytes / (1 << 20),
               r[i].load * 1e3, r[i].place * 1e3, r[i].place / r[i].load);
    }
    printf("place/load at 1M nodes: %.2fx (target <= 1)\n", r[1].place / r[1].load);
    printf("place 1M / place 100k: %.2fx (target <= 12)\n", r[1].place / r[0].place);
    return 0;
}
