/* While-loop frames of a graph being partitioned (TensorFlow's control-flow
 * info): which frame each node runs in, so that an edge cut inside a loop
 * is refused. TensorFlow adds "control loops" to run such a loop across
 * devices; zflow does not, and a partition without them would deadlock. */
#include <stdlib.h>
#include <string.h>

#include "scheduler/graph/partition_internal.h"

static bool s_is(const zf_graph_t *g, int v, const char *op, const char *ref_op)
{
    const char *o = zf_graph_node_op(g, v);
    return strcmp(o, op) == 0 || strcmp(o, ref_op) == 0;
}

static bool s_has_loops(const zf_graph_t *g)
{
    for (int k = 0; k < zf_graph_num_ops(g); k++) {
        const char *op = zf_graph_op_stat(g, k).op;
        if (strcmp(op, "Enter") == 0 || strcmp(op, "RefEnter") == 0) return true;
    }
    return false;
}

/* The frame (name, parent), added if new. -1 when out of memory. */
static int s_intern(zf__pctx_t *c, const uint8_t *name, size_t len, int parent)
{
    for (int f = 1; f < c->n_frames; f++)
        if (c->frames[f].parent == parent && c->frames[f].len == len &&
            memcmp(c->frames[f].name, name, len) == 0)
            return f;
    zf__frame_t *grown = realloc(c->frames, (size_t)(c->n_frames + 1) * sizeof *grown);
    if (!grown) return -1;
    c->frames = grown;
    c->frames[c->n_frames] = (zf__frame_t){name, len, parent};
    return c->n_frames++;
}

int zf__pctx_out_frame(const zf__pctx_t *c, int node)
{
    if (!c->frame || node >= c->pruned.n_orig) return 0;
    int f = c->frame[node];
    return s_is(c->g, node, "Exit", "RefExit") ? c->frames[f].parent : f;
}

/* A node runs in the frame its inputs come from; an Enter opens its named
 * frame inside that one. Back edges (out of NextIteration) come later in
 * the order and are skipped. */
static zf_status_t s_assign(zf__pctx_t *c, int v, const uint8_t *seen)
{
    const zf_edge_t *es = NULL;
    int n = zf_graph_in_edges(c->g, v, &es), from = 0;
    for (int k = 0; k < n; k++)
        if (seen[es[k].src]) {
            from = zf__pctx_out_frame(c, es[k].src);
            break;
        }
    c->frame[v] = from;
    if (!s_is(c->g, v, "Enter", "RefEnter")) return ZF_STATUS_OK;
    const uint8_t *name = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string(zf_graph_node_def(c->g, v), "frame_name", &name, &len));
    int f = s_intern(c, name, len, from);
    if (f < 0) return zf_out_of_memory("partition");
    c->frame[v] = f;
    return ZF_STATUS_OK;
}

zf_status_t zf__pctx_frames_init(zf__pctx_t *c)
{
    if (!s_has_loops(c->g)) return ZF_STATUS_OK;
    size_t n = (size_t)(c->pruned.n_orig ? c->pruned.n_orig : 1);
    int *order = malloc(n * sizeof *order);
    uint8_t *seen = calloc(n, 1);
    c->frame = calloc(n, sizeof *c->frame);
    c->frames = calloc(1, sizeof *c->frames); /* frame 0: the root */
    zf_status_t s =
        order && seen && c->frame && c->frames ? ZF_STATUS_OK : zf_out_of_memory("partition");
    if (zf_ok(s)) {
        c->n_frames = 1;
        zf_graph_topo_order(c->g, order);
    }
    for (int i = 0; zf_ok(s) && i < c->pruned.n_orig; i++) {
        s = s_assign(c, order[i], seen);
        seen[order[i]] = 1;
    }
    free(order);
    free(seen);
    return s;
}

zf_status_t zf__pctx_check_frame(const zf__pctx_t *c, int v, const zf__pedge_t *e)
{
    int f = zf__pctx_out_frame(c, e->src);
    if (f == 0) return ZF_STATUS_OK;
    return zf_unimplemented("Cannot partition the edge %s -> %s: it goes from %s to %s inside "
                            "while-loop frame '%.*s', and loops across devices are not supported",
                            zf__pctx_name(c, e->src), zf__pctx_name(c, v),
                            c->devs[c->node_dev[e->src]].name, c->devs[c->node_dev[v]].name,
                            (int)c->frames[f].len, (const char *)c->frames[f].name);
}
