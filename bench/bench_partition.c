/* bench/partition: partitioning time against GraphDef load time.
 *
 * Builds synthetic GraphDefs of 100k and 1M nodes (AddN nodes with fan-in
 * from nearby earlier nodes, a Const every 64th node, attrs on every node),
 * packs them, and places the nodes on 8 devices in contiguous blocks with a
 * share moved to another device, so that about 20% of the edges are cut.
 * Then, best of N runs (3N at 100k, where runs are short and noisier), times:
 *   load:      zf_graphdef_read_mem + zf_graph_new_from_graphdef (the baseline);
 *   partition: zf_partition_graph with no fetches or targets (so every node
 *              is kept) building the 8 GraphDefs with their _Send/_Recv pairs.
 * for 8 CPU devices and for 4 CPU + 4 GPU devices (memory types on).
 * Targets (docs/design.md, "Performance targets"): partition/load <= 2 at 1M nodes, and
 * partition(1M)/partition(100k) <= 12. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "common/graph.h"
#include "common/graphdef_io.h"
#include "scheduler/graph/partition.h"

#define N_DEVICES 8

typedef struct {
    Tensorflow__GraphDef gd;
    Tensorflow__NodeDef *nodes;
    Tensorflow__NodeDef **node_ptrs;
    char *names, *inputs;
    char **input_ptrs;
    Tensorflow__NodeDef__AttrEntry *entries, **entry_ptrs;
    Tensorflow__AttrValue *values;
} s_synth_t;

static void *s_alloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        fprintf(stderr, "partition: out of memory\n");
        exit(1);
    }
    return p;
}

static void s_attr(Tensorflow__NodeDef__AttrEntry *e, Tensorflow__AttrValue *v, const char *key)
{
    tensorflow__node_def__attr_entry__init(e);
    e->key = (char *)key;
    e->value = v;
}

/* Node i: a Const when i % 64 == 0, else AddN of 1..3 inputs i-1, i-8, i-15. */
static void s_node(s_synth_t *s, int i)
{
    Tensorflow__NodeDef *nd = &s->nodes[i];
    tensorflow__node_def__init(nd);
    nd->name = s->names + (size_t)i * 16;
    snprintf(nd->name, 16, "n%d", i);
    int fan = i % 64 == 0 ? 0 : 1 + i % 3;
    nd->op = fan ? "AddN" : "Const";
    nd->input = s->input_ptrs + (size_t)i * 3;
    for (int k = 0; k < fan; k++) {
        int src = i - 1 - 7 * k;
        char *in = s->inputs + ((size_t)i * 3 + (size_t)k) * 16;
        snprintf(in, 16, "n%d", src < 0 ? 0 : src);
        nd->input[nd->n_input++] = in;
    }
    Tensorflow__AttrValue *v = &s->values[(size_t)i * 3];
    Tensorflow__NodeDef__AttrEntry *e = &s->entries[(size_t)i * 3];
    nd->attr = s->entry_ptrs + (size_t)i * 3;
    for (int k = 0; k < 3; k++) tensorflow__attr_value__init(&v[k]);
    v[0].value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v[0].type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    s_attr(&e[0], &v[0], fan ? "T" : "dtype");
    v[1].value_case = fan ? TENSORFLOW__ATTR_VALUE__VALUE_I : TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    v[1].i = fan;
    s_attr(&e[1], &v[1], fan ? "N" : "value");
    nd->attr[0] = &e[0];
    nd->attr[1] = &e[1];
    nd->n_attr = 2;
    s->node_ptrs[i] = nd;
}

static uint8_t *s_build_packed(int n, size_t *len)
{
    s_synth_t s;
    tensorflow__graph_def__init(&s.gd);
    s.nodes = s_alloc((size_t)n, sizeof *s.nodes);
    s.node_ptrs = s_alloc((size_t)n, sizeof *s.node_ptrs);
    s.names = s_alloc((size_t)n, 16);
    s.inputs = s_alloc((size_t)n * 3, 16);
    s.input_ptrs = s_alloc((size_t)n * 3, sizeof *s.input_ptrs);
    s.entries = s_alloc((size_t)n * 3, sizeof *s.entries);
    s.entry_ptrs = s_alloc((size_t)n * 3, sizeof *s.entry_ptrs);
    s.values = s_alloc((size_t)n * 3, sizeof *s.values);
    Tensorflow__TensorProto t = TENSORFLOW__TENSOR_PROTO__INIT;
    t.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    float one = 1;
    t.n_float_val = 1;
    t.float_val = &one;
    for (int i = 0; i < n; i++) {
        s_node(&s, i);
        if (i % 64 == 0) s.values[(size_t)i * 3 + 1].tensor = &t;
    }
    s.gd.n_node = (size_t)n;
    s.gd.node = s.node_ptrs;
    *len = tensorflow__graph_def__get_packed_size(&s.gd);
    uint8_t *buf = s_alloc(*len, 1);
    tensorflow__graph_def__pack(&s.gd, buf);
    free(s.nodes);
    free(s.node_ptrs);
    free(s.names);
    free(s.inputs);
    free(s.input_ptrs);
    free(s.entries);
    free(s.entry_ptrs);
    free(s.values);
    return buf;
}

/* Blocks of 4096 nodes per device, round robin; 1 node in 9 moves to the
 * next device. Returns the share of edges cut. */
static double s_assign(const zf_graph_t *g, int *assign)
{
    int n = zf_graph_num_nodes(g);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int d = (i / 4096) % N_DEVICES;
        assign[i] = x % 9 == 0 ? (d + 1 + (int)(x >> 40) % (N_DEVICES - 1)) % N_DEVICES : d;
    }
    long edges = 0, cut = 0;
    for (int i = 0; i < n; i++) {
        const zf_edge_t *es = NULL;
        int k = zf_graph_in_edges(g, i, &es);
        for (int j = 0; j < k; j++) cut += assign[es[j].src] != assign[i];
        edges += k;
    }
    return edges ? (double)cut / (double)edges : 0;
}

static void s_devices(zf_partition_device_t *devs, bool gpus)
{
    for (int d = 0; d < N_DEVICES; d++) {
        bool gpu = gpus && d >= N_DEVICES / 2;
        zf_status_t s = zf_device_name_make("localhost", 0, 0, gpu ? "GPU" : "CPU",
                                            gpu ? d - N_DEVICES / 2 : d, &devs[d].name);
        if (!zf_ok(s)) exit(1);
        devs[d].incarnation = 0x1000u + (uint64_t)d;
    }
}

typedef struct {
    double load, part[2], cut;
    int n_send;
} s_result_t;

static double s_time_partition(const zf_graph_t *g, const int *assign, bool gpus, int reps,
                               int *n_send)
{
    zf_partition_device_t devs[N_DEVICES];
    s_devices(devs, gpus);
    zf_partition_options_t opts = {.by = ZF_PARTITION_BY_DEVICE};
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        zf_partition_set_t *set = NULL;
        double t0 = zf_bench_now();
        zf_status_t s = zf_partition_graph(g, devs, N_DEVICES, assign, &opts, &set);
        double t1 = zf_bench_now();
        if (!zf_ok(s)) {
            fprintf(stderr, "partition: %s\n", zf_status_msg(&s));
            exit(1);
        }
        best = zf_bench_min(best, t1 - t0);
        *n_send = 0;
        for (int p = 0; p < set->n_parts; p++) *n_send += set->parts[p].n_send;
        zf_partition_set_destroy(&set);
    }
    return best;
}

static s_result_t s_measure(int n, int reps)
{
    size_t len = 0;
    uint8_t *buf = s_build_packed(n, &len);
    s_result_t r = {1e30, {0, 0}, 0, 0};
    Tensorflow__GraphDef *gd = NULL;
    zf_graph_t *g = NULL;
    for (int rep = 0; rep < reps; rep++) {
        zf_graph_destroy(&g);
        zf_graphdef_free(&gd);
        double t0 = zf_bench_now();
        zf_status_t s = zf_graphdef_read_mem(buf, len, ZF_FORMAT_PB, &gd);
        if (zf_ok(s)) s = zf_graph_new_from_graphdef(gd, &g);
        double t1 = zf_bench_now();
        if (!zf_ok(s)) {
            fprintf(stderr, "partition: load failed: %s\n", zf_status_msg(&s));
            exit(1);
        }
        r.load = zf_bench_min(r.load, t1 - t0);
    }
    free(buf);
    int *assign = s_alloc((size_t)n, sizeof *assign);
    r.cut = s_assign(g, assign);
    for (int gpus = 0; gpus < 2; gpus++)
        r.part[gpus] = s_time_partition(g, assign, gpus, reps, &r.n_send);
    free(assign);
    zf_graph_destroy(&g);
    zf_graphdef_free(&gd);
    return r;
}

int main(void)
{
    int reps = zf_bench_reps(3);
    const int sizes[2] = {100000, 1000000};
    s_result_t r[2];
    printf("partition: %d devices, best of %d runs\n", N_DEVICES, reps);
    printf("%9s %7s %8s %10s %12s %8s %12s %8s\n", "nodes", "cut", "pairs", "load_ms", "8cpu_ms",
           "ratio", "4cpu4gpu_ms", "ratio");
    for (int i = 0; i < 2; i++) {
        r[i] = s_measure(sizes[i], i == 0 ? 3 * reps : reps);
        printf("%9d %6.1f%% %8d %10.2f %12.2f %8.2f %12.2f %8.2f\n", sizes[i], r[i].cut * 100,
               r[i].n_send, r[i].load * 1e3, r[i].part[0] * 1e3, r[i].part[0] / r[i].load,
               r[i].part[1] * 1e3, r[i].part[1] / r[i].load);
    }
    printf("partition/load at 1M nodes: %.2fx (8 CPU), %.2fx (4 CPU + 4 GPU) (target <= 2)\n",
           r[1].part[0] / r[1].load, r[1].part[1] / r[1].load);
    printf("partition 1M / partition 100k: %.2fx (8 CPU), %.2fx (4 CPU + 4 GPU) (target <= 12)\n",
           r[1].part[0] / r[0].part[0], r[1].part[1] / r[0].part[1]);
    /* The machine's own scaling for the same sizes, to read the line above by. */
    printf("load 1M / load 100k (reference): %.2fx\n", r[1].load / r[0].load);
    return 0;
}
