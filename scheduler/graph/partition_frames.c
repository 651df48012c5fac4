/* While-loop frames of a graph being partitioned (TensorFlow's control-flow
 * info and AddControlFlow): which frame each node runs in, and the control
 * loops that let a loop run across partitions.
 *
 * A _Recv has no data input, so on its own it would run once, at the top
 * level. Inside a loop it must run once per iteration, in the frame of its
 * _Send. Each partition that receives inside frame F gets a control loop
 * for F: Enter (from a Const, or from the control loop of F's parent
 * frame) -> Merge -> Switch(pred) with Switch:1 -> NextIteration -> Merge,
 * pred being F's LoopCond (received from its partition when it lives
 * elsewhere). The Merge fires once per iteration, for as long as the
 * LoopCond says, and drives the recvs of the frame. Two sources are
 * driven otherwise: a non-constant Enter sends once per frame (iteration
 * 0), so its recvs hang off the control loop's Enter; a NextIteration's
 * value belongs to the next iteration, so its recvs hang off the control
 * loop's NextIteration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/graph/partition_internal.h"

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
    c->frames[c->n_frames] = (zf__frame_t){name, len, parent, 10, -1};
    return c->n_frames++;
}

int zf__pctx_out_frame(const zf__pctx_t *c, int node)
{
    if (!c->frame || node >= c->pruned.n_orig) return 0;
    int f = c->frame[node];
    return zf_op_is(zf_graph_node_op(c->g, node), "Exit") ? c->frames[f].parent : f;
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
    if (!zf_op_is(zf_graph_node_op(c->g, v), "Enter")) return ZF_STATUS_OK;
    const uint8_t *name = NULL;
    size_t len = 0;
    ZF_TRY(zf_node_attr_string(zf_graph_node_def(c->g, v), "frame_name", &name, &len));
    int known = c->n_frames, f = s_intern(c, name, len, from);
    bool fresh = f >= known;
    if (f < 0) return zf_out_of_memory("partition");
    c->frame[v] = f;
    int64_t parallel = 10;
    ZF_TRY(zf_node_attr_int_or(zf_graph_node_def(c->g, v), "parallel_iterations", 10, &parallel));
    if (fresh)
        c->frames[f].parallel = parallel < 1 || parallel > INT32_MAX / 2 ? 10 : (int)parallel;
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
    for (int v = 0; zf_ok(s) && v < c->pruned.n_orig; v++)
        if (strcmp(zf_graph_node_op(c->g, v), "LoopCond") == 0 && c->frame[v] > 0 &&
            c->frames[c->frame[v]].loop_cond < 0)
            c->frames[c->frame[v]].loop_cond = v;
    if (zf_ok(s)) {
        c->cloops = calloc((size_t)c->n_frames * (size_t)c->n_parts, sizeof *c->cloops);
        if (!c->cloops) s = zf_out_of_memory("partition");
    }
    free(order);
    free(seen);
    return s;
}

/* ---- control loops ------------------------------------------------------- */

/* A new control-loop node of frame f on device dev: `<LoopCond>/_cloop_<what>_S<n>`. */
static Tensorflow__NodeDef *s_cnode(zf__pctx_t *c, int f, int dev, const char *what, const char *op)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, "/_cloop_%s", what);
    Tensorflow__NodeDef *nd =
        zf__node_new(zf__pctx_new_name(c, zf_graph_node_name(c->g, c->frames[f].loop_cond), suffix),
                     op, c->devs[dev].name);
    bool typed = strcmp(op, "Const") != 0 && strcmp(op, "LoopCond") != 0;
    if (nd && typed && !zf__node_add_attr(nd, "T", zf__attr_type(ZF_FLOAT))) {
        zf__node_free(nd);
        return NULL;
    }
    return nd;
}

static bool s_inputs(Tensorflow__NodeDef *nd, const char *a, int pa, const char *b, int pb)
{
    return nd && zf__node_add_input(nd, zf__input_string(a, pa)) &&
           (!b || zf__node_add_input(nd, zf__input_string(b, pb)));
}

static zf_status_t s_control_loop(zf__pctx_t *c, int f, int dev, const zf__cloop_t **out);

/* What the control loop's Enter reads: a Const at the top level, or the
 * parent frame's control loop (entered once per parent iteration). */
static zf_status_t s_loop_source(zf__pctx_t *c, int f, int dev, const char **src)
{
    int parent = c->frames[f].parent;
    if (parent > 0) {
        const zf__cloop_t *pl = NULL;
        ZF_TRY(s_control_loop(c, parent, dev, &pl));
        *src = pl->merge;
        return ZF_STATUS_OK;
    }
    Tensorflow__NodeDef *k = s_cnode(c, f, dev, "const", "Const");
    bool ok = k && zf__node_add_attr(k, "dtype", zf__attr_type(ZF_FLOAT)) &&
              zf__node_add_attr(k, "value", zf__attr_empty_float_tensor());
    if (!ok) zf__node_free(k);
    if (!ok || !zf__pctx_push(c, dev, k)) return zf_out_of_memory("partition");
    *src = k->name;
    return ZF_STATUS_OK;
}

static zf_status_t s_frame_name_attr(const zf__pctx_t *c, int f, Tensorflow__NodeDef *nd)
{
    const zf__frame_t *fr = &c->frames[f];
    char *name = malloc(fr->len + 1);
    if (!name) return zf_out_of_memory("partition");
    memcpy(name, fr->name, fr->len);
    name[fr->len] = '\0';
    bool ok = zf__node_add_attr(nd, "frame_name", zf__attr_string(name)) &&
              zf__node_add_attr(nd, "is_constant", zf__attr_bool(false)) &&
              zf__node_add_attr(nd, "parallel_iterations", zf__attr_int(fr->parallel));
    free(name);
    return ok ? ZF_STATUS_OK : zf_out_of_memory("partition");
}

/* A task partition reads a received predicate through a LoopCond of its
 * own: the pivot the partition needs when it is split again by device. */
static zf_status_t s_own_pivot(zf__pctx_t *c, int f, int dev, const char **pred)
{
    Tensorflow__NodeDef *cond = s_cnode(c, f, dev, "cond", "LoopCond");
    if (!s_inputs(cond, *pred, 0, NULL, 0)) {
        zf__node_free(cond);
        return zf_out_of_memory("partition");
    }
    *pred = cond->name;
    return zf__pctx_push(c, dev, cond) ? ZF_STATUS_OK : zf_out_of_memory("partition");
}

/* Frame f's control loop in dev's partition, made (with its parents') when
 * new. */
static zf_status_t s_control_loop(zf__pctx_t *c, int f, int dev, const zf__cloop_t **out)
{
    zf__cloop_t *loop = &c->cloops[(size_t)f * (size_t)c->n_parts + (size_t)c->devs[dev].slot];
    *out = loop;
    if (loop->merge) return ZF_STATUS_OK;
    const zf__frame_t *fr = &c->frames[f];
    if (fr->loop_cond < 0)
        return zf_invalid_argument("A cross-device loop must have a pivot predicate: %.*s",
                                   (int)fr->len, (const char *)fr->name);
    if (!c->devs[dev].cpu)
        return zf_unimplemented("while-loop frame '%.*s' spans devices and reaches %s: a loop "
                                "runs across devices only through CPU devices",
                                (int)fr->len, (const char *)fr->name, c->devs[dev].name);
    const char *src = NULL;
    ZF_TRY(s_loop_source(c, f, dev, &src));
    Tensorflow__NodeDef *enter = s_cnode(c, f, dev, "enter", "Enter");
    if (!enter) return zf_out_of_memory("partition");
    zf_status_t s = s_frame_name_attr(c, f, enter);
    if (!zf_ok(s) || !s_inputs(enter, src, 0, NULL, 0)) {
        zf__node_free(enter);
        return zf_ok(s) ? zf_out_of_memory("partition") : s;
    }
    if (!zf__pctx_push(c, dev, enter)) return zf_out_of_memory("partition");
    Tensorflow__NodeDef *merge = s_cnode(c, f, dev, "merge", "Merge");
    Tensorflow__NodeDef *sw = s_cnode(c, f, dev, "switch", "Switch");
    Tensorflow__NodeDef *next = s_cnode(c, f, dev, "next", "NextIteration");
    bool ok = merge && sw && next && zf__node_add_attr(merge, "N", zf__attr_int(2)) &&
              s_inputs(merge, enter->name, 0, next->name, 0) &&
              s_inputs(next, sw->name, 1, NULL, 0) &&
              zf__node_add_input(sw, zf__input_string(merge->name, 0));
    if (!ok) {
        zf__node_free(merge);
        zf__node_free(sw);
        zf__node_free(next);
        return zf_out_of_memory("partition");
    }
    /* Pushed one by one: a failed push frees its node, the others are the partition's. */
    bool pushed = zf__pctx_push(c, dev, merge);
    pushed = zf__pctx_push(c, dev, sw) && pushed;
    pushed = zf__pctx_push(c, dev, next) && pushed;
    if (!pushed) return zf_out_of_memory("partition");
    *loop = (zf__cloop_t){enter->name, merge->name, next->name};
    /* The predicate: the LoopCond itself, or its value received in the frame. */
    int lc = fr->loop_cond;
    const char *pred = zf_graph_node_name(c->g, lc);
    if (c->devs[c->node_dev[lc]].slot != c->devs[dev].slot) {
        ZF_TRY(zf__pctx_cut_pred(c, lc, dev, loop->merge, &pred));
        if (c->by_task) ZF_TRY(s_own_pivot(c, f, dev, &pred));
    }
    return zf__node_add_input(sw, zf__input_string(pred, 0)) ? ZF_STATUS_OK
                                                             : zf_out_of_memory("partition");
}

static bool s_op_in(const char *op, const char *const *ops, int n)
{
    for (int i = 0; i < n; i++)
        if (zf_op_is(op, ops[i])) return true;
    return false;
}

/* The node whose op says in which iterations src's value is made: src
 * itself, or for a recv that a control loop's Enter or NextIteration
 * drives (an earlier partitioning's, read directly or through the Cast or
 * Identity made after it), that Enter or NextIteration. */
static int s_iteration_source(const zf__pctx_t *c, int src)
{
    static const char *const after_recv[] = {"Cast", "_HostCast", "Identity"};
    static const char *const recvs[] = {"_Recv", "_HostRecv"};
    static const char *const drivers[] = {"Enter", "NextIteration"};
    const zf_edge_t *es = NULL;
    int v = src;
    if (s_op_in(zf_graph_node_op(c->g, v), after_recv, 3) &&
        zf_graph_num_data_inputs(c->g, v) == 1 && zf_graph_in_edges(c->g, v, &es) > 0)
        v = es[0].src;
    if (!s_op_in(zf_graph_node_op(c->g, v), recvs, 2)) return src;
    int n = zf_graph_in_edges(c->g, v, &es);
    for (int k = 0; k < n; k++)
        if (zf_edge_is_control(&es[k]) && s_op_in(zf_graph_node_op(c->g, es[k].src), drivers, 2))
            return es[k].src;
    return src;
}

zf_status_t zf__pctx_loop_driver(zf__pctx_t *c, int src, int dev, const char **driver)
{
    *driver = NULL;
    int f = zf__pctx_out_frame(c, src);
    if (f == 0) return ZF_STATUS_OK;
    const zf__cloop_t *loop = NULL;
    ZF_TRY(s_control_loop(c, f, dev, &loop));
    *driver = loop->merge;
    src = s_iteration_source(c, src);
    if (zf_op_is(zf_graph_node_op(c->g, src), "NextIteration")) {
        *driver = loop->next;
    } else if (zf_op_is(zf_graph_node_op(c->g, src), "Enter")) {
        bool is_constant = false;
        ZF_TRY(
            zf_node_attr_bool_or(zf_graph_node_def(c->g, src), "is_constant", false, &is_constant));
        if (!is_constant) *driver = loop->enter;
    }
    return ZF_STATUS_OK;
}
