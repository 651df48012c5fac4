/* A plan's cost model: per node, its kernel time and output bytes per
 * traced step, averaged over the plan's traced steps (TensorFlow's
 * CostModel, and RunMetadata.cost_graph; scheduler/master/master.h).
 *
 * Design note. A traced step's kernel runs (NodeRun) are folded in twice:
 * first summed per node over the step (a node in a loop runs once per
 * iteration), then that step's sums added to the node's totals. Entries
 * are keyed by device and node name, so a node's entry is its own on each
 * device it ran on; there are at most as many as the plan has nodes. Under
 * m->mu, as plans are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "scheduler/master/master_internal.h"

typedef struct s_cost_node {
    char *node, *device;
    int64_t steps, total_us, total_bytes, total_runs;
    int64_t step_us, step_bytes, step_runs; /* the step being folded in */
    bool touched;
} s_cost_node_t;

struct zf__master_cost {
    zf_strmap_t *index; /* "device\x1fnode" -> entry index */
    s_cost_node_t *nodes;
    int n, cap;
    int *touched; /* the entries the step being folded in ran */
};

void zf__master_cost_free(zf__master_cost_t **c_p)
{
    zf__master_cost_t *c = *c_p;
    *c_p = NULL;
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->nodes[i].node);
        free(c->nodes[i].device);
    }
    free(c->nodes);
    free(c->touched);
    zf_strmap_destroy(&c->index);
    free(c);
}

/* The entry of (device, node), made on first use; -1 when out of memory. */
static int s_entry(zf__master_cost_t *c, const char *device, const char *node)
{
    char key[512];
    int len = snprintf(key, sizeof key, "%s\x1f%s", device, node);
    if (len < 0 || (size_t)len >= sizeof key) return -1; /* names past any device's: not kept */
    uintptr_t v = 0;
    if (zf_strmap_get_n(c->index, key, (size_t)len, &v)) return (int)v;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        s_cost_node_t *nodes = realloc(c->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) return -1;
        c->nodes = nodes;
        int *touched = realloc(c->touched, (size_t)cap * sizeof *touched);
        if (!touched) return -1;
        c->touched = touched;
        c->cap = cap;
    }
    s_cost_node_t *e = &c->nodes[c->n];
    *e = (s_cost_node_t){.node = strdup(node), .device = strdup(device)};
    if (!e->node || !e->device ||
        zf_strmap_insert_n(c->index, key, (size_t)len, (uintptr_t)c->n, NULL) != 0) {
        free(e->node);
        free(e->device);
        return -1;
    }
    return c->n++;
}

void zf__master_cost_add(zf__master_plan_t *p, Zflow__NodeRun *const *runs, size_t n_runs)
{
    if (n_runs == 0) return;
    if (!p->cost && (p->cost = calloc(1, sizeof *p->cost)) != NULL &&
        !(p->cost->index = zf_strmap_new(256, ZF_STRMAP_OWN_KEYS)))
        zf__master_cost_free(&p->cost);
    zf__master_cost_t *c = p->cost;
    if (!c) return; /* out of memory: this step is not counted */
    int n_touched = 0;
    for (size_t k = 0; k < n_runs; k++) {
        const Zflow__NodeRun *r = runs[k];
        if (!r || !r->node || !r->device) continue;
        int i = s_entry(c, r->device, r->node);
        if (i < 0) continue;
        s_cost_node_t *e = &c->nodes[i];
        if (!e->touched) {
            e->touched = true;
            e->step_us = e->step_bytes = e->step_runs = 0;
            c->touched[n_touched++] = i;
        }
        if (r->end_us > r->start_us) e->step_us += r->end_us - r->start_us;
        if (r->output_bytes > 0) e->step_bytes += r->output_bytes;
        e->step_runs++;
    }
    for (int t = 0; t < n_touched; t++) {
        s_cost_node_t *e = &c->nodes[c->touched[t]];
        e->touched = false;
        e->steps++;
        e->total_us += e->step_us;
        e->total_bytes += e->step_bytes;
        e->total_runs += e->step_runs;
    }
}

zf_status_t zf__master_cost_graph(const zf__master_plan_t *p, Zflow__RunStepReply *out)
{
    const zf__master_cost_t *c = p->cost;
    if (!c || c->n == 0) return ZF_STATUS_OK;
    out->cost_graph = calloc((size_t)c->n, sizeof *out->cost_graph);
    if (!out->cost_graph) return zf_out_of_memory("master: the cost graph");
    for (int i = 0; i < c->n; i++) {
        const s_cost_node_t *e = &c->nodes[i];
        Zflow__CostNode *cn = malloc(sizeof *cn);
        if (!cn) return zf_out_of_memory("master: the cost graph");
        zflow__cost_node__init(cn);
        out->cost_graph[out->n_cost_graph++] = cn;
        cn->node = strdup(e->node);
        cn->device = strdup(e->device);
        if (!cn->node || !cn->device) return zf_out_of_memory("master: the cost graph");
        cn->steps = e->steps;
        cn->compute_us = e->steps ? e->total_us / e->steps : 0;
        cn->output_bytes = e->steps ? e->total_bytes / e->steps : 0;
        cn->runs_per_step = e->steps ? e->total_runs / e->steps : 0;
    }
    return ZF_STATUS_OK;
}
