/* bench/graph_load: GraphDef load time against protobuf-c's own unpack.
 *
 * Builds synthetic GraphDefs (chains with fan-in, attrs on every node) of
 * 100k and 1M nodes, packs them, then times, best of N runs:
 *   unpack: tensorflow__graph_def__unpack alone (the baseline);
 *   load:   zflow's path, zf_graphdef_read_mem (wire check + unpack) then
 *           zf_graph_new_from_graphdef (graph build + validation).
 * Targets (docs/design.md, "Performance targets"): load/unpack <= 2, load(1M)/load(100k) <= 12. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "common/graph.h"
#include "common/graphdef_io.h"

typedef struct {
    Tensorflow__GraphDef gd;
    Tensorflow__NodeDef *nodes;
    Tensorflow__NodeDef **node_ptrs;
    char *names;  /* n names of 16 bytes */
    char *inputs; /* 3 input strings of 24 bytes per node */
    char **input_ptrs;
    Tensorflow__NodeDef__AttrEntry *entries; /* 2 per node */
    Tensorflow__NodeDef__AttrEntry **entry_ptrs;
    Tensorflow__AttrValue *values; /* 2 per node */
} s_synth_t;

/* Node i: Const for every 64th node, otherwise AddN of up to 3 earlier
 * nodes (fan-in), each with attrs T (type) and N (int). */
static void s_synth_build(s_synth_t *s, int n)
{
    tensorflow__graph_def__init(&s->gd);
    s->nodes = calloc((size_t)n, sizeof *s->nodes);
    s->node_ptrs = calloc((size_t)n, sizeof *s->node_ptrs);
    s->names = calloc((size_t)n, 16);
    s->inputs = calloc((size_t)n * 3, 24);
    s->input_ptrs = calloc((size_t)n * 3, sizeof(char *));
    s->entries = calloc((size_t)n * 2, sizeof *s->entries);
    s->entry_ptrs = calloc((size_t)n * 2, sizeof *s->entry_ptrs);
    s->values = calloc((size_t)n * 2, sizeof *s->values);
    if (!s->nodes || !s->node_ptrs || !s->names || !s->inputs || !s->input_ptrs || !s->entries ||
        !s->entry_ptrs || !s->values) {
        fprintf(stderr, "graph_load: out of memory building %d nodes\n", n);
        exit(1);
    }
    for (int i = 0; i < n; i++) {
        Tensorflow__NodeDef *nd = &s->nodes[i];
        tensorflow__node_def__init(nd);
        char *name = s->names + (size_t)i * 16;
        snprintf(name, 16, "n%d", i);
        nd->name = name;
        int fan = (i % 64 == 0) ? 0 : (i < 3 ? i : 1 + i % 3);
        nd->op = fan == 0 ? "Const" : "AddN";
        nd->device = (i % 2) ? "/job:localhost/replica:0/task:0/device:CPU:0" : "";
        nd->n_input = (size_t)fan;
        nd->input = s->input_ptrs + (size_t)i * 3;
        for (int k = 0; k < fan; k++) {
            char *in = s->inputs + ((size_t)i * 3 + (size_t)k) * 24;
            int src = i - 1 - k * 7;
            if (src < 0) src = 0;
            snprintf(in, 24, "n%d", src);
            nd->input[k] = in;
        }
        Tensorflow__AttrValue *v = &s->values[(size_t)i * 2];
        Tensorflow__NodeDef__AttrEntry *e = &s->entries[(size_t)i * 2];
        tensorflow__attr_value__init(&v[0]);
        v[0].value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
        v[0].type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
        tensorflow__node_def__attr_entry__init(&e[0]);
        e[0].key = fan == 0 ? "dtype" : "T";
        e[0].value = &v[0];
        tensorflow__attr_value__init(&v[1]);
        v[1].value_case = TENSORFLOW__ATTR_VALUE__VALUE_I;
        v[1].i = fan;
        tensorflow__node_def__attr_entry__init(&e[1]);
        e[1].key = fan == 0 ? "_seq" : "N";
        e[1].value = &v[1];
        nd->n_attr = 2;
        nd->attr = s->entry_ptrs + (size_t)i * 2;
        nd->attr[0] = &e[0];
        nd->attr[1] = &e[1];
        s->node_ptrs[i] = nd;
    }
    s->gd.n_node = (size_t)n;
    s->gd.node = s->node_ptrs;
}

static void s_synth_free(s_synth_t *s)
{
    free(s->nodes);
    free(s->node_ptrs);
    free(s->names);
    free(s->inputs);
    free(s->input_ptrs);
    free(s->entries);
    free(s->entry_ptrs);
    free(s->values);
}

typedef struct {
    double unpack, load;
    size_t bytes;
} s_result_t;

static s_result_t s_measure(int n, int reps)
{
    s_synth_t synth;
    s_synth_build(&synth, n);
    size_t len = tensorflow__graph_def__get_packed_size(&synth.gd);
    uint8_t *buf = malloc(len);
    if (!buf) exit(1);
    tensorflow__graph_def__pack(&synth.gd, buf);
    s_synth_free(&synth);

    s_result_t r = {1e30, 1e30, len};
    for (int rep = 0; rep < reps; rep++) {
        double t0 = zf_bench_now();
        Tensorflow__GraphDef *gd = tensorflow__graph_def__unpack(NULL, len, buf);
        double t1 = zf_bench_now();
        if (!gd) {
            fprintf(stderr, "graph_load: unpack failed\n");
            exit(1);
        }
        tensorflow__graph_def__free_unpacked(gd, NULL);
        r.unpack = zf_bench_min(r.unpack, t1 - t0);

        t0 = zf_bench_now();
        zf_status_t s = zf_graphdef_read_mem(buf, len, ZF_FORMAT_PB, &gd);
        zf_graph_t *g = NULL;
        if (zf_ok(s)) s = zf_graph_new_from_graphdef(gd, &g);
        t1 = zf_bench_now();
        if (!zf_ok(s)) {
            fprintf(stderr, "graph_load: load failed: %s\n", zf_status_msg(&s));
            exit(1);
        }
        r.load = zf_bench_min(r.load, t1 - t0);
        zf_graph_destroy(&g);
        zf_graphdef_free(&gd);
    }
    free(buf);
    return r;
}

int main(void)
{
    int reps = zf_bench_reps(5);
    const int sizes[2] = {100000, 1000000};
    s_result_t r[2];
    printf("graph_load: best of %d runs\n", reps);
    printf("%9s %10s %12s %12s %8s\n", "nodes", "MiB", "unpack_ms", "load_ms", "ratio");
    for (int i = 0; i < 2; i++) {
        r[i] = s_measure(sizes[i], i == 0 ? reps : (reps + 1) / 2);
        printf("%9d %10.1f %12.2f %12.2f %8.2f\n", sizes[i], (double)r[i].bytes / (1 << 20),
               r[i].unpack * 1e3, r[i].load * 1e3, r[i].load / r[i].unpack);
    }
    printf("load/unpack at 1M nodes: %.2fx (target <= 2)\n", r[1].load / r[1].unpack);
    printf("load 1M / load 100k: %.2fx (target <= 12)\n", r[1].load / r[0].load);
    return 0;
}
