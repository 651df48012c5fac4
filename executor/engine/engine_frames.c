/* The frames of a partition: a breadth-first walk from the nodes without
 * inputs, each node taking the frame its first reached input's outputs are
 * in, and every later input checked against it. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor/engine/engine_frames.h"

/* The parallel_iterations TensorFlow's Enter defaults to. */
enum { S_DEFAULT_PARALLEL = 10 };

static void s_frame_desc(const zf__eframes_t *f, int32_t k, char *buf, size_t size)
{
    if (k == 0)
        snprintf(buf, size, "the root frame");
    else
        snprintf(buf, size, "frame '%.*s'", (int)f->frames[k].len, (const char *)f->frames[k].name);
}

/* The child frame Enter node v (running in frame parent) opens: found by
 * name, or added. */
static zf_status_t s_child(const zf_graph_t *g, zf__eframes_t *f, int v, int32_t parent,
                           int *first_enter_of, int32_t *out)
{
    const Tensorflow__NodeDef *def = zf_graph_node_def(g, v);
    const uint8_t *name = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string(def, "frame_name", &name, &len));
    int64_t parallel = S_DEFAULT_PARALLEL;
    ZF_TRY(zf_node_attr_int_or(def, "parallel_iterations", S_DEFAULT_PARALLEL, &parallel));
    if (parallel < 1 || parallel > INT32_MAX / 2)
        return zf_invalid_argument(
            "node '%s' (%s): parallel_iterations must be between 1 and %d, got %lld", def->name,
            def->op, INT32_MAX / 2, (long long)parallel);
    for (int32_t k = 1; k < f->num_frames; k++) {
        zf__eframe_t *fr = &f->frames[k];
        if (fr->len != len || memcmp(fr->name, name, len) != 0) continue;
        if (fr->parent != parent) {
            char a[160], b[160];
            s_frame_desc(f, fr->parent, a, sizeof a);
            s_frame_desc(f, parent, b, sizeof b);
            return zf_invalid_argument(
                "frame '%.*s' is entered from two frames: node '%s' (Enter) is in %s, node '%s' "
                "(Enter) is in %s",
                (int)len, (const char *)name, zf_graph_node_name(g, first_enter_of[k]), a,
                zf_graph_node_name(g, v), b);
        }
        *out = k;
        return ZF_STATUS_OK;
    }
    zf__eframe_t *grown = realloc(f->frames, (size_t)(f->num_frames + 1) * sizeof *grown);
    if (!grown) return zf_out_of_memory("engine frames");
    f->frames = grown;
    f->frames[f->num_frames] = (zf__eframe_t){name, len, parent, (int32_t)parallel};
    first_enter_of[f->num_frames] = v;
    *out = f->num_frames++;
    return ZF_STATUS_OK;
}

/* The frame node v's outputs are in, v itself running in frame[v]. */
static zf_status_t s_out_frame(const zf_graph_t *g, zf__eframes_t *f, int v, int *first_enter_of,
                               int32_t *out)
{
    const char *op = zf_graph_node_op(g, v);
    int32_t own = f->node_frame[v];
    *out = own;
    if (zf_op_is(op, "Enter")) return s_child(g, f, v, own, first_enter_of, out);
    bool exit = zf_op_is(op, "Exit");
    if ((exit || zf_op_is(op, "NextIteration")) && own == 0)
        return zf_invalid_argument("node '%s' (%s) is not inside a while-loop frame: no Enter "
                                   "node leads to it",
                                   zf_graph_node_name(g, v), op);
    if (exit) *out = f->frames[own].parent;
    return ZF_STATUS_OK;
}

static zf_status_t s_mismatch(const zf_graph_t *g, const zf__eframes_t *f, int dst, int a,
                              int32_t fa, int b, int32_t fb)
{
    char da[160], db[160];
    s_frame_desc(f, fa, da, sizeof da);
    s_frame_desc(f, fb, db, sizeof db);
    return zf_invalid_argument("node '%s' (%s) has inputs from different frames: input '%s' is in "
                               "%s, input '%s' is in %s",
                               zf_graph_node_name(g, dst), zf_graph_node_op(g, dst),
                               zf_graph_node_name(g, a), da, zf_graph_node_name(g, b), db);
}

static zf_status_t s_walk(const zf_graph_t *g, zf__eframes_t *f, int *queue, int *from,
                          int *first_enter_of)
{
    int n = zf_graph_num_nodes(g), head = 0, tail = 0;
    for (int v = 0; v < n; v++) {
        const zf_edge_t *e = NULL;
        if (zf_graph_in_edges(g, v, &e) == 0) {
            from[v] = v;
            queue[tail++] = v;
        }
    }
    while (head < tail) {
        int v = queue[head++];
        int32_t of = 0;
        ZF_TRY(s_out_frame(g, f, v, first_enter_of, &of));
        f->out_frame[v] = of;
        const zf_edge_t *e = NULL;
        int count = zf_graph_out_edges(g, v, &e);
        for (int k = 0; k < count; k++) {
            int dst = e[k].dst;
            if (from[dst] < 0) {
                from[dst] = v;
                f->node_frame[dst] = of;
                queue[tail++] = dst;
            } else if (f->node_frame[dst] != of) {
                return s_mismatch(g, f, dst, from[dst], f->out_frame[from[dst]], v, of);
            }
        }
    }
    for (int v = 0; v < n; v++)
        if (from[v] < 0)
            return zf_invalid_argument("node '%s' (%s) can never run: every path to it comes "
                                       "around a loop through a NextIteration node",
                                       zf_graph_node_name(g, v), zf_graph_node_op(g, v));
    return ZF_STATUS_OK;
}

zf_status_t zf__eframes_build(const zf_graph_t *g, zf__eframes_t *out)
{
    memset(out, 0, sizeof *out);
    size_t n = (size_t)zf_graph_num_nodes(g) + 1;
    out->node_frame = calloc(n, sizeof *out->node_frame);
    out->out_frame = calloc(n, sizeof *out->out_frame);
    out->frames = calloc(1, sizeof *out->frames);
    int *queue = malloc(n * sizeof *queue), *from = malloc(n * sizeof *from);
    int *first_enter_of = malloc((n + 1) * sizeof *first_enter_of);
    zf_status_t s =
        out->node_frame && out->out_frame && out->frames && queue && from && first_enter_of
            ? ZF_STATUS_OK
            : zf_out_of_memory("engine frames");
    if (zf_ok(s)) {
        out->frames[0] = (zf__eframe_t){NULL, 0, -1, 1};
        out->num_frames = 1;
        for (size_t v = 0; v < n; v++) from[v] = -1;
        s = s_walk(g, out, queue, from, first_enter_of);
    }
    free(queue);
    free(from);
    free(first_enter_of);
    return s;
}

void zf__eframes_free(zf__eframes_t *f)
{
    free(f->node_frame);
    free(f->out_frame);
    free(f->frames);
    memset(f, 0, sizeof *f);
}
