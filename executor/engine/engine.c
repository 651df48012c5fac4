/* The dataflow executor: the flat, per-partition layout built once
 * (kernels, slots, edges, pending counts; with control flow, laid out per
 * while-loop frame) and the per-step run state (pending counts, input and
 * output slots, deadness, status; with control flow, per frame and
 * iteration, see "control flow" below). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/graph.h"
#include "common/op_registry.h"
#include "executor/engine/engine.h"
#include "common/rendezvous_key.h"
#include "executor/engine/engine_frames.h"
#include "executor/kernels/kernel.h"
#include "common/thread_pool.h"

/* ---- the layout ---------------------------------------------------------- */

enum {
    S_EXPENSIVE = 1u << 0,      /* runs on the device's pool */
    S_ASYNC = 1u << 1,          /* compute_async */
    S_TRANSFER = 1u << 2,       /* Send/Recv: runs even when dead, to forward deadness */
    S_SIZED_BY_VALUE = 1u << 3, /* never on an event loop (ZF_KERNEL_SIZED_BY_VALUE) */
    S_NEVER_DEAD = 1u << 4,     /* ControlTrigger: runs live even with dead inputs */
    S_MERGE = 1u << 5,          /* Merge: ready on its first live data input */
    S_SEND = 1u << 6,           /* _Send/_HostSend: batched with the next ready one */
};

/* How a node's outputs travel (control-flow graphs only). */
enum {
    CF_PLAIN,       /* into the node's own iteration */
    CF_ENTER,       /* into iteration 0 of the child frame */
    CF_ENTER_CONST, /* into every iteration of the child frame */
    CF_EXIT,        /* into the parent frame's iteration, once, when live */
    CF_NEXT,        /* into the next iteration, when live */
};

typedef struct {
    const zf_kernel_t *kernel;
    void *state;
    const Tensorflow__NodeDef *def;
    int32_t in_start, num_inputs;   /* data input slots */
    int32_t out_start, num_outputs; /* output slots */
    int32_t edge_start, edge_end;   /* out edges */
    int32_t pending;                /* data + control inputs */
    uint8_t flags;
    uint8_t cf; /* CF_* */
    bool created;
} s_node_t;

/* A node's place in its frame (control-flow graphs only). In-frame slot and
 * node indices count from 0 in every frame. */
typedef struct {
    int32_t local;       /* index among its frame's nodes */
    int32_t frame;       /* the frame it runs in */
    int32_t aux;         /* Enter: its child frame; Exit: its index in its frame's exits */
    int32_t types_start; /* its outputs' dtypes in out_types */
} s_cfnode_t;

typedef struct {
    int32_t dst;
    int32_t dst_slot; /* input slot, or -1 for a control edge */
    int32_t src_port; /* output index, or -1 for a control edge */
    bool last;        /* the output's last consumer: move, do not ref */
} s_edge_t;

/* A while-loop frame's static part. */
typedef struct {
    const uint8_t *name;
    int32_t name_len;
    int32_t parent; /* -1: the root */
    int32_t parallel;
    int32_t num_nodes, total_inputs, total_outputs;
    int32_t merge_slots; /* num_nodes with control flow, else 0 (no Merge) */
    int32_t num_enters;
    int32_t *counters; /* nodes whose count each iteration sets: two or more inputs, or Merge */
    int32_t num_counters;
    int32_t *exits;
    int32_t num_exits;
} s_finfo_t;

struct zf_engine {
    zf_graph_t *graph;
    zf_device_t *device;
    zf_resource_mgr_t *resources;
    s_node_t *nodes;
    int32_t num_nodes;
    s_edge_t *edges;
    int32_t num_edges;
    int32_t *roots; /* nodes with no inputs, in node order */
    int32_t num_roots;
    s_finfo_t *frames; /* frame 0: the root, the whole graph when it has no control flow */
    s_cfnode_t *cfn;   /* per node, with control flow only */
    int32_t num_frames;
    bool has_cf;           /* control-flow ops: frames, iterations and Merge's rule apply */
    zf_dtype_t *out_types; /* expected base dtype per output slot; ZF_INVALID: unchecked */
    int32_t total_inputs, total_outputs;
    bool light; /* see zf_engine_is_light() */
};

/* For the few helpers of the per-node path that several callers share:
 * inlined, so that the plain path costs what it did before it had them. */
#define S_HOT static inline __attribute__((always_inline))

/* Set on event-loop threads (zf_engine_set_inline_thread()). */
static _Thread_local bool s_inline_thread;

static zf_status_t s_too_big(void)
{
    return zf_status_new(ZF_RESOURCE_EXHAUSTED, "partition too large for the executor");
}

/* Resolves node i's kernel, arity and flags; slots are laid out in node order. */
static zf_status_t s_layout_node(zf_engine_t *ex, int32_t i)
{
    s_node_t *n = &ex->nodes[i];
    n->def = zf_graph_node_def(ex->graph, i);
    ZF_TRY(zf_kernel_find(ex->device->type, n->def, &n->kernel));
    int num_outputs = 0;
    ZF_TRY(zf_graph_num_outputs(ex->graph, i, &num_outputs));
    n->num_inputs = zf_graph_num_data_inputs(ex->graph, i);
    n->num_outputs = num_outputs;
    n->pending = n->num_inputs + zf_graph_num_control_inputs(ex->graph, i);
    if ((int64_t)ex->total_inputs + n->num_inputs > INT32_MAX ||
        (int64_t)ex->total_outputs + num_outputs > INT32_MAX)
        return s_too_big();
    n->in_start = ex->total_inputs;
    n->out_start = ex->total_outputs;
    ex->total_inputs += n->num_inputs;
    ex->total_outputs += num_outputs;
    bool is_async =
        n->kernel->compute_async && ((n->kernel->flags & ZF_KERNEL_ASYNC) || !n->kernel->compute);
    n->flags =
        (uint8_t)(((n->kernel->flags & ZF_KERNEL_EXPENSIVE) ? S_EXPENSIVE : 0) |
                  (is_async ? S_ASYNC : 0) |
                  ((n->kernel->flags & ZF_KERNEL_SIZED_BY_VALUE) ? S_SIZED_BY_VALUE : 0) |
                  (zf_op_has_flag(zf_graph_op_def(ex->graph, i), ZF_OP_SEND_RECV) ? S_TRANSFER
                                                                                  : 0) |
                  (strcmp(n->def->op, "ControlTrigger") == 0 ? S_NEVER_DEAD : 0) |
                  (zf_op_is(n->def->op, "Merge") ? S_MERGE : 0) |
                  (strcmp(n->def->op, "_Send") == 0 || strcmp(n->def->op, "_HostSend") == 0 ? S_SEND
                                                                                            : 0));
    if (zf_op_has_flag(zf_graph_op_def(ex->graph, i), ZF_OP_CONTROL_FLOW)) ex->has_cf = true;
    return ZF_STATUS_OK;
}

/* The count a node starts each iteration with: its inputs; for a Merge,
 * twice its control inputs plus one while no live data input came. */
static int32_t s_initial_count(const s_node_t *n)
{
    return (n->flags & S_MERGE) ? 1 + 2 * (n->pending - n->num_inputs) : n->pending;
}

static bool s_is_counter(const s_node_t *n)
{
    return n->pending >= 2 || (n->flags & S_MERGE);
}

/* Fills frame f's lists (counters, exits) from the nodes' frames. */
static zf_status_t s_layout_frame_lists(zf_engine_t *ex)
{
    for (int32_t f = 0; f < ex->num_frames; f++) {
        s_finfo_t *fi = &ex->frames[f];
        fi->merge_slots = ex->has_cf ? fi->num_nodes : 0;
        fi->counters = calloc((size_t)fi->num_nodes + 1, sizeof *fi->counters);
        fi->exits = calloc((size_t)fi->num_nodes + 1, sizeof *fi->exits);
        if (!fi->counters || !fi->exits) return zf_out_of_memory("engine layout");
    }
    for (int32_t i = 0; i < ex->num_nodes; i++) {
        s_node_t *n = &ex->nodes[i];
        s_finfo_t *fi = &ex->frames[ex->cfn ? ex->cfn[i].frame : 0];
        if (s_is_counter(n)) fi->counters[fi->num_counters++] = i;
        if (n->cf == CF_EXIT) {
            ex->cfn[i].aux = fi->num_exits;
            fi->exits[fi->num_exits++] = i;
        }
    }
    return ZF_STATUS_OK;
}

/* Node i's place in its frame: its in-frame index and slots, and how its
 * outputs travel. */
static zf_status_t s_layout_cf_node(zf_engine_t *ex, const zf__eframes_t *fr, int32_t i)
{
    s_node_t *n = &ex->nodes[i];
    s_cfnode_t *c = &ex->cfn[i];
    s_finfo_t *fi = &ex->frames[fr->node_frame[i]];
    c->frame = fr->node_frame[i];
    c->local = fi->num_nodes++;
    c->types_start = n->out_start;
    n->in_start = fi->total_inputs;
    n->out_start = fi->total_outputs;
    fi->total_inputs += n->num_inputs;
    fi->total_outputs += n->num_outputs;
    const char *op = n->def->op;
    if (zf_op_is(op, "Enter")) {
        bool constant = false;
        ZF_TRY(zf_node_attr_bool_or(n->def, "is_constant", false, &constant));
        n->cf = constant ? CF_ENTER_CONST : CF_ENTER;
        c->aux = fr->out_frame[i];
        ex->frames[c->aux].num_enters++;
    } else if (zf_op_is(op, "Exit")) {
        n->cf = CF_EXIT;
    } else if (zf_op_is(op, "NextIteration")) {
        n->cf = CF_NEXT;
    }
    return ZF_STATUS_OK;
}

/* One frame for a graph without control flow (every node's index and slots
 * stay as laid out); otherwise the frames of engine_frames.h, with slots
 * and indices counted per frame. */
static zf_status_t s_layout_frames(zf_engine_t *ex)
{
    zf__eframes_t fr = {0};
    zf_status_t s = ZF_STATUS_OK;
    if (ex->has_cf) s = zf__eframes_build(ex->graph, &fr);
    int32_t count = ex->has_cf ? fr.num_frames : 1;
    ex->frames = zf_ok(s) ? calloc((size_t)count, sizeof *ex->frames) : NULL;
    if (zf_ok(s) && ex->has_cf) ex->cfn = calloc((size_t)ex->num_nodes + 1, sizeof *ex->cfn);
    if (zf_ok(s) && (!ex->frames || (ex->has_cf && !ex->cfn)))
        s = zf_out_of_memory("engine layout");
    if (!zf_ok(s)) {
        zf__eframes_free(&fr);
        return s;
    }
    ex->num_frames = count;
    for (int32_t f = 0; f < count; f++) {
        s_finfo_t *fi = &ex->frames[f];
        fi->parent = ex->has_cf ? fr.frames[f].parent : -1;
        fi->parallel = ex->has_cf ? fr.frames[f].parallel : 1;
        fi->name = ex->has_cf ? fr.frames[f].name : NULL;
        fi->name_len = ex->has_cf ? (int32_t)fr.frames[f].len : 0;
    }
    if (!ex->has_cf) {
        ex->frames[0].num_nodes = ex->num_nodes;
        ex->frames[0].total_inputs = ex->total_inputs;
        ex->frames[0].total_outputs = ex->total_outputs;
    }
    for (int32_t i = 0; i < ex->num_nodes && ex->has_cf && zf_ok(s); i++)
        s = s_layout_cf_node(ex, &fr, i);
    zf__eframes_free(&fr);
    return zf_ok(s) ? s_layout_frame_lists(ex) : s;
}

/* Node i's index among its frame's nodes (in its iterations' arrays). */
static inline int32_t s_local(const zf_engine_t *ex, int32_t i)
{
    return ex->cfn ? ex->cfn[i].local : i;
}

/* Where node i's output dtypes start in out_types. */
static inline int32_t s_types_start(const zf_engine_t *ex, int32_t i)
{
    return ex->cfn ? ex->cfn[i].types_start : ex->nodes[i].out_start;
}

/* Fills node i's expected output dtypes (base types; refs hold values). */
static void s_layout_out_types(zf_engine_t *ex, int32_t i)
{
    const s_node_t *n = &ex->nodes[i];
    zf_dtype_t *types = &ex->out_types[s_types_start(ex, i)];
    for (int k = 0; k < n->num_outputs; k++) types[k] = ZF_INVALID;
    int count = 0;
    zf_status_t s =
        zf_op_output_types(zf_graph_op_def(ex->graph, i), n->def, types, n->num_outputs, &count);
    if (!zf_ok(s) || count != n->num_outputs) {
        zf_status_clear(&s);
        for (int k = 0; k < n->num_outputs; k++) types[k] = ZF_INVALID;
        return;
    }
    for (int k = 0; k < n->num_outputs; k++) types[k] = zf_dtype_base(types[k]);
}

/* Copies node i's out edges; marks each output's last consumer. */
static zf_status_t s_layout_edges(zf_engine_t *ex, int32_t i, bool *seen)
{
    s_node_t *n = &ex->nodes[i];
    const zf_edge_t *e = NULL;
    int count = zf_graph_out_edges(ex->graph, i, &e);
    n->edge_start = ex->num_edges;
    for (int k = 0; k < count; k++) {
        s_edge_t *d = &ex->edges[ex->num_edges++];
        bool control = zf_edge_is_control(&e[k]);
        if (!control && (e[k].src_port < 0 || e[k].src_port >= n->num_outputs))
            return zf_invalid_argument(
                "node '%s' (%s) has %d outputs, but node '%s' reads output %d", n->def->name,
                n->def->op, n->num_outputs, zf_graph_node_name(ex->graph, e[k].dst), e[k].src_port);
        d->dst = e[k].dst;
        d->src_port = control ? -1 : e[k].src_port;
        d->dst_slot = control ? -1 : ex->nodes[e[k].dst].in_start + e[k].dst_port;
        d->last = false;
    }
    n->edge_end = ex->num_edges;
    memset(seen, 0, (size_t)n->num_outputs);
    for (int32_t k = n->edge_end - 1; k >= n->edge_start; k--) {
        s_edge_t *d = &ex->edges[k];
        if (d->src_port >= 0 && !seen[d->src_port]) d->last = seen[d->src_port] = true;
    }
    return ZF_STATUS_OK;
}

static zf_status_t s_layout_alloc(zf_engine_t *ex)
{
    size_t n = (size_t)ex->num_nodes ? (size_t)ex->num_nodes : 1;
    ex->nodes = calloc(n, sizeof *ex->nodes);
    ex->edges = calloc((size_t)zf_graph_num_edges(ex->graph) + 1, sizeof *ex->edges);
    ex->roots = calloc(n, sizeof *ex->roots);
    if (!ex->nodes || !ex->edges || !ex->roots) return zf_out_of_memory("engine layout");
    return ZF_STATUS_OK;
}

static zf_status_t s_layout(zf_engine_t *ex)
{
    ZF_TRY(s_layout_alloc(ex));
    int max_outputs = 0;
    for (int32_t i = 0; i < ex->num_nodes; i++) {
        ZF_TRY(s_layout_node(ex, i));
        if (ex->nodes[i].num_outputs > max_outputs) max_outputs = ex->nodes[i].num_outputs;
        if (ex->nodes[i].pending == 0) ex->roots[ex->num_roots++] = i;
    }
    if (ex->num_nodes > 0 && ex->num_roots == 0)
        return zf_invalid_argument("graph has no node without inputs, so no node can start");
    ZF_TRY(s_layout_frames(ex));
    ex->light = ex->num_nodes <= ZF_ENGINE_LIGHT_NODES;
    for (int32_t i = 0; i < ex->num_nodes && ex->light; i++)
        if (ex->nodes[i].flags & S_EXPENSIVE) ex->light = false;
    ex->out_types = calloc((size_t)ex->total_outputs + 1, sizeof *ex->out_types);
    bool *seen = calloc((size_t)max_outputs + 1, sizeof *seen);
    zf_status_t s = ex->out_types && seen ? ZF_STATUS_OK : zf_out_of_memory("engine layout");
    for (int32_t i = 0; i < ex->num_nodes && zf_ok(s); i++) {
        s_layout_out_types(ex, i);
        s = s_layout_edges(ex, i, seen);
    }
    free(seen);
    return s;
}

/* Creates every kernel's state; only once every kernel was found. */
static zf_status_t s_create_kernels(zf_engine_t *ex)
{
    for (int32_t i = 0; i < ex->num_nodes; i++) {
        s_node_t *n = &ex->nodes[i];
        if (!n->kernel->create) continue;
        zf_status_t s = n->kernel->create(n->def, &n->state);
        if (!zf_ok(s)) return s;
        n->created = true;
    }
    return ZF_STATUS_OK;
}

zf_status_t zf_engine_new(Tensorflow__GraphDef *gd, const zf_engine_params_t *params,
                          zf_engine_t **out)
{
    *out = NULL;
    if (!params || !params->device) return zf_invalid_argument("executor needs a device");
    zf_engine_t *ex = calloc(1, sizeof *ex);
    if (!ex) return zf_out_of_memory("executor");
    ex->device = params->device;
    ex->resources = params->resources;
    zf_status_t s = zf_graph_new_from_graphdef(gd, &ex->graph);
    if (zf_ok(s)) {
        ex->num_nodes = zf_graph_num_nodes(ex->graph);
        s = s_layout(ex);
    }
    if (zf_ok(s)) s = s_create_kernels(ex);
    if (!zf_ok(s)) {
        zf_engine_destroy(&ex);
        return zf_status_prefix(s, "%s", params->device->name_str);
    }
    *out = ex;
    return ZF_STATUS_OK;
}

void zf_engine_adopt_graphdef(zf_engine_t *ex, Tensorflow__GraphDef **gd_p)
{
    zf_graph_adopt_graphdef(ex->graph, gd_p);
}

void zf_engine_destroy(zf_engine_t **ex_p)
{
    if (!ex_p || !*ex_p) return;
    zf_engine_t *ex = *ex_p;
    *ex_p = NULL;
    for (int32_t i = 0; ex->nodes && i < ex->num_nodes; i++)
        if (ex->nodes[i].created && ex->nodes[i].kernel->destroy)
            ex->nodes[i].kernel->destroy(ex->nodes[i].state);
    free(ex->nodes);
    free(ex->edges);
    free(ex->roots);
    for (int32_t f = 0; ex->frames && f < ex->num_frames; f++) {
        free(ex->frames[f].counters);
        free(ex->frames[f].exits);
    }
    free(ex->frames);
    free(ex->cfn);
    free(ex->out_types);
    zf_graph_destroy(&ex->graph);
    free(ex);
}

int zf_engine_num_nodes(const zf_engine_t *ex)
{
    return ex->num_nodes;
}

bool zf_engine_is_light(const zf_engine_t *ex)
{
    return ex->light;
}

void zf_engine_set_inline_thread(bool on)
{
    s_inline_thread = on;
}

/* ---- a step --------------------------------------------------------------- */

typedef struct s_frame s_frame_t;

/* The run state of one iteration of one frame: per node of the frame its
 * count, deadness and (Merge) dead inputs; per slot the values. A graph
 * without control flow has one, the root, inside its step. */
typedef struct s_iter {
    s_frame_t *frame;
    int64_t num;
    int32_t outstanding_ops;    /* its nodes ready or running (under frame->mu) */
    int32_t outstanding_frames; /* child frames started in it and not done */
    s_frame_t *children;        /* those child frames */
    atomic_int *pending;        /* per node */
    atomic_uchar *node_dead;    /* per node: some input is dead */
    int32_t *merge_dead;        /* per node: dead data inputs (Merge) */
    zf_tensor_t **inputs;       /* per input slot: owned references */
    zf_tensor_t **outputs;      /* per output slot: owned until propagated */
    bool *out_dead;             /* per output slot */
} s_iter_t;

/* A value kept by a frame: a loop invariant (a constant Enter's output) or
 * a NextIteration's output waiting for an iteration to start. */
typedef struct {
    int32_t node;
    bool dead;
    zf_tensor_t *t;
} s_value_t;

typedef struct {
    s_value_t *items;
    int32_t n, cap;
} s_values_t;

/* A frame started in one iteration of its parent. Everything but info,
 * parent and parent_iter is under mu. Iterations first..last are alive, at
 * most info->parallel of them, in a ring of ring_size slots that grows with
 * them up to parallel + 1. */
struct s_frame {
    const s_finfo_t *info;
    s_frame_t *parent;
    s_iter_t *parent_iter;
    s_frame_t *next; /* sibling in parent_iter->children */
    uint64_t id;     /* zf_rendezvous_frame_id(): the same on every executor of the loop */
    pthread_mutex_t mu;
    int64_t first, last;
    int32_t live_iters;
    int32_t pending_inputs; /* Enters that have not delivered yet */
    bool finished;
    s_iter_t **ring;
    int64_t ring_size;
    s_values_t invariants, deferred;
    bool *exit_fired; /* per exit: a live value left the frame */
    s_iter_t *spare;  /* a finished iteration's block, for the next one */
};

typedef struct {
    zf_engine_t *ex;
    int64_t step_id;
    zf_rendezvous_t *rendezvous;
    zf_step_trace_t *trace; /* NULL: not traced */
    zf_engine_done_fn done;
    void *done_arg;
    atomic_int_fast64_t outstanding; /* nodes ready or running */
    atomic_bool failed;
    pthread_mutex_t mu; /* guards status */
    zf_status_t status;
    s_iter_t root;
    s_frame_t root_frame;
} s_step_t;

/* The process's control-flow state (zf_engine_cf_stats()). */
static atomic_llong s_live_iters, s_peak_iters, s_live_frames;

void zf_engine_cf_stats(zf_engine_cf_stats_t *out)
{
    out->live_iterations = atomic_load(&s_live_iters);
    out->peak_iterations = atomic_load(&s_peak_iters);
    out->live_frames = atomic_load(&s_live_frames);
}

void zf_engine_cf_stats_reset_peak(void)
{
    atomic_store(&s_peak_iters, atomic_load(&s_live_iters));
}

static void s_count_iter(int delta)
{
    long long now = atomic_fetch_add(&s_live_iters, delta) + delta;
    long long peak = atomic_load(&s_peak_iters);
    while (now > peak && !atomic_compare_exchange_weak(&s_peak_iters, &peak, now)) {
    }
}

/* A node of an iteration. */
typedef struct {
    s_iter_t *it;
    int32_t id;
} s_tagged_t;

/* Nodes made ready and waiting to run on this thread: a stack that starts
 * in place and spills to the heap. Nodes and their iterations are kept
 * apart, each written and read whole (a value written in two halves and
 * read in one stalls the read). */
enum { S_WL_LOCAL = 32 };

typedef struct {
    int32_t *ids;
    s_iter_t **its;
    int32_t n, cap;
    int32_t local_ids[S_WL_LOCAL];
    s_iter_t *local_its[S_WL_LOCAL];
} s_worklist_t;

static void s_wl_init(s_worklist_t *wl)
{
    wl->ids = wl->local_ids;
    wl->its = wl->local_its;
    wl->n = 0;
    wl->cap = S_WL_LOCAL;
}

static void s_wl_free(s_worklist_t *wl)
{
    if (wl->ids != wl->local_ids) free(wl->ids);
    if (wl->its != wl->local_its) free(wl->its);
}

static bool s_wl_grow(s_worklist_t *wl)
{
    int32_t cap = wl->cap * 2;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    s_iter_t **its = malloc((size_t)cap * sizeof *its);
    if (!ids || !its) {
        free(ids);
        free(its);
        return false;
    }
    memcpy(ids, wl->ids, (size_t)wl->n * sizeof *ids);
    memcpy(its, wl->its, (size_t)wl->n * sizeof *its);
    s_wl_free(wl);
    wl->ids = ids;
    wl->its = its;
    wl->cap = cap;
    return true;
}

S_HOT bool s_wl_push(s_worklist_t *wl, s_tagged_t t)
{
    if (wl->n == wl->cap && !s_wl_grow(wl)) return false;
    wl->ids[wl->n] = t.id;
    wl->its[wl->n++] = t.it;
    return true;
}

/* What a finished node's propagation made ready: whether one node took
 * over its count, and the expensive node held back (see s_dispatch). */
typedef struct {
    bool inherited;
    bool has_held;
    s_tagged_t held;
} s_ready_t;

static void s_process(s_step_t *st, s_worklist_t *wl);

/* ---- frames and iterations -------------------------------------------------- */

static void s_values_clear(s_values_t *v)
{
    for (int32_t k = 0; k < v->n; k++) zf_tensor_unref(&v->items[k].t);
    v->n = 0;
}

static bool s_values_push(s_values_t *v, s_value_t x)
{
    if (v->n == v->cap) {
        int32_t cap = v->cap ? v->cap * 2 : 4;
        s_value_t *items = realloc(v->items, (size_t)cap * sizeof *items);
        if (!items) return false;
        v->items = items;
        v->cap = cap;
    }
    v->items[v->n++] = x;
    return true;
}

/* Points it's arrays into block (sized by s_iter_bytes()). */
static size_t s_align(size_t x)
{
    return (x + 15) & ~(size_t)15;
}

static size_t s_iter_layout(const s_finfo_t *fi, s_iter_t *it, char *block)
{
    size_t nn = (size_t)fi->num_nodes, ni = (size_t)fi->total_inputs,
           no = (size_t)fi->total_outputs;
    size_t off_in = 0;
    size_t off_out = s_align(off_in + ni * sizeof(zf_tensor_t *));
    size_t off_pending = s_align(off_out + no * sizeof(zf_tensor_t *));
    size_t off_merge = s_align(off_pending + nn * sizeof(atomic_int));
    size_t off_node_dead = s_align(off_merge + (size_t)fi->merge_slots * sizeof(int32_t));
    size_t off_out_dead = s_align(off_node_dead + nn * sizeof(atomic_uchar));
    size_t end = off_out_dead + no * sizeof(bool);
    if (it) {
        it->inputs = (zf_tensor_t **)(block + off_in);
        it->outputs = (zf_tensor_t **)(block + off_out);
        it->pending = (atomic_int *)(block + off_pending);
        it->merge_dead = (int32_t *)(block + off_merge);
        it->node_dead = (atomic_uchar *)(block + off_node_dead);
        it->out_dead = (bool *)(block + off_out_dead);
    }
    return end;
}

/* Sets the counts of the frame's nodes that have two or more inputs or are
 * Merges; the others are never counted. */
static void s_iter_init_counts(const zf_engine_t *ex, const s_finfo_t *fi, s_iter_t *it)
{
    for (int32_t k = 0; k < fi->num_counters; k++) {
        const s_node_t *n = &ex->nodes[fi->counters[k]];
        atomic_init(&it->pending[s_local(ex, fi->counters[k])], s_initial_count(n));
    }
}

/* Unreferences every value an iteration still holds. */
static void s_iter_release(const s_finfo_t *fi, s_iter_t *it)
{
    for (int32_t i = 0; i < fi->total_inputs; i++) zf_tensor_unref(&it->inputs[i]);
    for (int32_t i = 0; i < fi->total_outputs; i++) zf_tensor_unref(&it->outputs[i]);
}

static s_iter_t *s_iter_new(const zf_engine_t *ex, s_frame_t *f, int64_t num)
{
    const s_finfo_t *fi = f->info;
    size_t head = s_align(sizeof(s_iter_t)), bytes = s_iter_layout(fi, NULL, NULL);
    s_iter_t *it = f->spare;
    f->spare = NULL;
    if (it)
        memset((char *)it + head, 0, bytes);
    else
        it = calloc(1, head + bytes);
    if (!it) return NULL;
    s_iter_layout(fi, it, (char *)it + head);
    it->frame = f;
    it->num = num;
    it->outstanding_ops = it->outstanding_frames = 0;
    it->children = NULL;
    s_iter_init_counts(ex, fi, it);
    s_count_iter(1);
    return it;
}

static void s_frame_free(s_frame_t *f);

/* Frees an iteration, and what child frames it still has (a failed step). */
static void s_iter_free(s_frame_t *f, s_iter_t *it, bool keep)
{
    while (it->children) {
        s_frame_t *c = it->children;
        it->children = c->next;
        s_frame_free(c);
    }
    s_iter_release(f->info, it);
    s_count_iter(-1);
    if (keep && !f->spare) {
        f->spare = it;
        return;
    }
    free(it);
}

static s_iter_t **s_ring(s_frame_t *f, int64_t num)
{
    return &f->ring[num % f->ring_size];
}

/* The ring's first size: parallel_iterations comes with the graph, so the
 * ring grows with the iterations alive instead of holding them all. */
enum { S_RING_START = 8 };

/* Makes room in f's ring for iteration last + 1 (lock held). */
static bool s_ring_reserve(s_frame_t *f)
{
    if (f->last + 1 - f->first < f->ring_size) return true;
    int64_t size = f->ring_size * 2, most = (int64_t)f->info->parallel + 1;
    if (size > most) size = most;
    s_iter_t **ring = calloc((size_t)size, sizeof *ring);
    if (!ring) return false;
    for (int64_t k = f->first; k <= f->last; k++) ring[k % size] = *s_ring(f, k);
    free(f->ring);
    f->ring = ring;
    f->ring_size = size;
    return true;
}

static void s_frame_free(s_frame_t *f)
{
    for (int64_t k = f->first; f->ring && k <= f->last; k++)
        if (*s_ring(f, k)) s_iter_free(f, *s_ring(f, k), false);
    s_values_clear(&f->invariants);
    s_values_clear(&f->deferred);
    free(f->invariants.items);
    free(f->deferred.items);
    free(f->spare);
    free(f->ring);
    pthread_mutex_destroy(&f->mu);
    atomic_fetch_sub(&s_live_frames, 1);
    free(f);
}

/* The child frame with static frame fid started in iteration pit (of
 * frame parent, whose lock the caller holds), started now if new. */
static s_frame_t *s_child_frame(s_step_t *st, s_frame_t *parent, s_iter_t *pit, int32_t fid)
{
    const s_finfo_t *fi = &st->ex->frames[fid];
    for (s_frame_t *c = pit->children; c; c = c->next)
        if (c->info == fi) return c;
    s_frame_t *f = calloc(1, sizeof *f + ((size_t)fi->num_exits + 1) * sizeof(bool));
    if (!f) return NULL;
    f->exit_fired = (bool *)(f + 1);
    f->ring_size = fi->parallel < S_RING_START ? fi->parallel + 1 : S_RING_START;
    f->ring = calloc((size_t)f->ring_size, sizeof *f->ring);
    f->info = fi;
    f->parent = parent;
    f->parent_iter = pit;
    f->id = zf_rendezvous_frame_id(parent->id, pit->num, fi->name, (size_t)fi->name_len);
    f->pending_inputs = fi->num_enters;
    pthread_mutex_init(&f->mu, NULL);
    atomic_fetch_add(&s_live_frames, 1);
    s_iter_t *it = f->ring ? s_iter_new(st->ex, f, 0) : NULL;
    if (!it) {
        s_frame_free(f);
        return NULL;
    }
    f->ring[0] = it;
    f->live_iters = 1;
    f->next = pit->children;
    pit->children = f;
    pit->outstanding_frames++;
    return f;
}

static void s_step_free(s_step_t *st)
{
    const zf_engine_t *ex = st->ex;
    /* After a failure, nodes that never ran still hold inputs; with control
     * flow, so may nodes whose frame never finished. */
    if (ex->has_cf || atomic_load(&st->failed)) {
        while (st->root.children) {
            s_frame_t *c = st->root.children;
            st->root.children = c->next;
            s_frame_free(c);
        }
        s_iter_release(&ex->frames[0], &st->root);
    }
    if (ex->has_cf) pthread_mutex_destroy(&st->root_frame.mu);
    zf_rendezvous_unref(&st->rendezvous);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

static void s_step_finish(s_step_t *st)
{
    zf_status_t status = st->status;
    zf_engine_done_fn done = st->done;
    void *arg = st->done_arg;
    s_step_free(st);
    done(status, arg);
}

/* Records a kernel's failure. The first one is the step's status and aborts
 * the rendezvous; one seen after the rendezvous was aborted was caused by
 * the abort, so the abort's status stands in for it. */
static void s_record_error(s_step_t *st, zf_status_t s)
{
    zf_status_t aborted = zf_rendezvous_status(st->rendezvous);
    bool caused_by_abort = !zf_ok(aborted);
    if (caused_by_abort) {
        zf_status_clear(&s);
        s = aborted;
    } else {
        s = zf_status_prefix(s, "%s", st->ex->device->name_str);
    }
    pthread_mutex_lock(&st->mu);
    bool first = zf_ok(st->status);
    if (first) st->status = s;
    atomic_store(&st->failed, true);
    pthread_mutex_unlock(&st->mu);
    if (!first) {
        zf_status_clear(&s);
        return;
    }
    /* st->status is final and st lives while this node is outstanding. */
    if (!caused_by_abort) zf_rendezvous_start_abort(st->rendezvous, &st->status);
}

/* A kernel must fill every live output, with the dtype its op declares. */
static zf_status_t s_check_outputs(const s_step_t *st, const s_iter_t *it, int32_t id)
{
    const zf_engine_t *ex = st->ex;
    const s_node_t *n = &ex->nodes[id];
    const zf_dtype_t *types = &ex->out_types[s_types_start(ex, id)];
    for (int32_t k = 0; k < n->num_outputs; k++) {
        const zf_tensor_t *t = it->outputs[n->out_start + k];
        if (!t) {
            if (it->out_dead[n->out_start + k]) continue;
            return zf_internal("%s (%s): kernel produced no value for output %d", n->def->name,
                               n->def->op, k);
        }
        zf_dtype_t want = types[k];
        if (want != ZF_INVALID && zf_tensor_dtype(t) != want)
            return zf_internal("%s (%s): kernel produced %s for output %d, expected %s",
                               n->def->name, n->def->op, zf_dtype_name(zf_tensor_dtype(t)), k,
                               zf_dtype_name(want));
    }
    return ZF_STATUS_OK;
}

static void s_release_inputs(s_iter_t *it, const s_node_t *n)
{
    for (int32_t k = 0; k < n->num_inputs; k++) zf_tensor_unref(&it->inputs[n->in_start + k]);
}

static void s_run_node(s_step_t *st, s_tagged_t t, s_worklist_t *wl);

/* Runs node t and everything it makes ready inline, on this thread. Used
 * where no worklist exists yet (pool tasks) or a push failed. */
static void s_run_here(s_step_t *st, s_tagged_t t)
{
    s_worklist_t wl;
    s_wl_init(&wl);
    s_run_node(st, t, &wl);
    s_process(st, &wl);
}

typedef struct {
    s_step_t *st;
    s_tagged_t t;
} s_task_t;

static void s_task_run(void *arg)
{
    s_task_t task = *(s_task_t *)arg;
    free(arg);
    s_run_here(task.st, task.t);
}

/* Hands a counted ready node to the device's pool (runs it here when that
 * is impossible). */
static void s_schedule(s_step_t *st, s_tagged_t t)
{
    zf_thread_pool_t *pool = st->ex->device->pool;
    s_task_t *task = pool ? malloc(sizeof *task) : NULL;
    if (task) {
        *task = (s_task_t){st, t};
        zf_status_t s = zf_thread_pool_submit(pool, s_task_run, task);
        if (zf_ok(s)) return;
        zf_status_clear(&s);
        free(task);
    }
    s_run_here(st, t);
}

/* Moves the value edge e carries into its consumer's slot (a reference of
 * its own, or the producer's for the output's last consumer) and marks the
 * consumer dead when the value (or, on a control edge, the node) is. */
static void s_move_output(s_iter_t *it, const s_node_t *n, const s_edge_t *e, bool node_dead)
{
    bool dead = node_dead;
    if (e->src_port >= 0) {
        int32_t slot = n->out_start + e->src_port;
        zf_tensor_t *t = it->outputs[slot];
        if (e->last) it->outputs[slot] = NULL;
        it->inputs[e->dst_slot] = e->last || !t ? t : zf_tensor_ref(t);
        dead = it->out_dead[slot];
    }
    if (dead) atomic_store_explicit(&it->node_dead[e->dst], 1, memory_order_relaxed);
}

/* Dispatches t, just made ready (see s_node_done): the first cheap one
 * inherits the finished node's count; every other one is counted first,
 * then queued here (cheap) or held back for the pool (expensive). */
S_HOT void s_dispatch(s_step_t *st, s_tagged_t t, s_worklist_t *wl, s_ready_t *r)
{
    bool expensive = (st->ex->nodes[t.id].flags & S_EXPENSIVE) != 0;
    if (!expensive && !r->inherited && s_wl_push(wl, t)) {
        r->inherited = true;
        return;
    }
    atomic_fetch_add_explicit(&st->outstanding, 1, memory_order_relaxed);
    if (!expensive) {
        if (s_wl_push(wl, t)) return;
        if (st->ex->has_cf) /* a frame's lock may be held here */
            s_schedule(st, t);
        else
            s_run_here(st, t); /* out of memory: run it now */
        return;
    }
    if (r->has_held) s_schedule(st, r->held);
    r->held = t;
    r->has_held = true;
}

/* Runs the held expensive node here when nothing else does, and settles
 * the finished node's count: when nothing inherited it and the count
 * reaches zero, the step ends here. */
S_HOT void s_settle(s_step_t *st, s_worklist_t *wl, s_ready_t *r)
{
    if (r->has_held && (wl->n > 0 || !s_wl_push(wl, r->held))) s_schedule(st, r->held);
    if (!r->inherited && atomic_fetch_sub_explicit(&st->outstanding, 1, memory_order_acq_rel) == 1)
        s_step_finish(st);
}

/* Node id is finished: moves its outputs into its consumers' slots (unless
 * propagate is false, after a failure), dispatches the nodes that became
 * ready and settles the step's outstanding count. The node's own count
 * passes to the first cheap node it makes ready, so a chain costs no
 * atomic operation on it. The last expensive node made ready runs here when
 * nothing else does. When nothing inherits and the count reaches zero, the
 * step ends here. */
static void s_plain_node_done(s_step_t *st, s_iter_t *it, int32_t id, bool propagate,
                              s_worklist_t *wl)
{
    const zf_engine_t *ex = st->ex;
    const s_node_t *n = &ex->nodes[id];
    s_ready_t r = {0};
    bool node_dead = atomic_load_explicit(&it->node_dead[id], memory_order_relaxed);
    for (int32_t k = n->edge_start; propagate && k < n->edge_end; k++) {
        const s_edge_t *e = &ex->edges[k];
        s_move_output(it, n, e, node_dead);
        if (ex->nodes[e->dst].pending == 1 ||
            atomic_fetch_sub_explicit(&it->pending[e->dst], 1, memory_order_acq_rel) == 1)
            s_dispatch(st, (s_tagged_t){it, e->dst}, wl, &r);
    }
    for (int32_t k = 0; k < n->num_outputs; k++) zf_tensor_unref(&it->outputs[n->out_start + k]);
    s_settle(st, wl, &r);
}

/* ---- control flow: propagation across frames and iterations ---------------- */

/* Where a finished node's values come from: its iteration's output slots
 * (moved to the last consumer), or a value a frame keeps (referenced). */
typedef struct {
    zf_tensor_t **outs;
    const bool *outs_dead;
    bool node_dead;
    bool may_move;
} s_source_t;

/* Delivers edge e's value into iteration to (whose frame's lock the caller
 * holds) and says whether its consumer became ready. A Merge is ready on
 * its first live data input once its control inputs are in, and dead when
 * every data input is dead (or a dead Enter feeds it: a loop on an untaken
 * branch); later inputs are dropped. */
static bool s_deliver(const zf_engine_t *ex, const s_node_t *n, const s_edge_t *e,
                      const s_source_t *src, s_iter_t *to)
{
    const s_node_t *d = &ex->nodes[e->dst];
    int32_t local = ex->cfn[e->dst].local;
    zf_tensor_t *t = NULL;
    bool dead = src->node_dead;
    if (e->src_port >= 0) {
        zf_tensor_t **slot = &src->outs[e->src_port];
        t = *slot;
        if (src->may_move && e->last)
            *slot = NULL;
        else if (t)
            t = zf_tensor_ref(t);
        dead = src->outs_dead[e->src_port];
    }
    atomic_int *pending = &to->pending[local];
    if (!(d->flags & S_MERGE)) {
        if (e->dst_slot >= 0) {
            zf_tensor_unref(&to->inputs[e->dst_slot]); /* only a malformed graph delivers twice */
            to->inputs[e->dst_slot] = t;
        }
        if (dead) atomic_store_explicit(&to->node_dead[local], 1, memory_order_relaxed);
        return d->pending == 1 || atomic_fetch_sub_explicit(pending, 1, memory_order_relaxed) == 1;
    }
    int p = atomic_load_explicit(pending, memory_order_relaxed);
    bool ready = false;
    if (e->src_port < 0) {
        p -= 2;
        ready = p == 0 || (p == 1 && to->merge_dead[local] == d->num_inputs);
    } else if (!dead) {
        if (p & 1) {
            to->inputs[e->dst_slot] = t;
            t = NULL;
            p -= 1;
            ready = p == 0;
        }
    } else {
        to->merge_dead[local]++;
        ready = p == 1 && (to->merge_dead[local] == d->num_inputs || n->cf == CF_ENTER ||
                           n->cf == CF_ENTER_CONST);
    }
    zf_tensor_unref(&t);
    if (ready && (p & 1)) { /* no live input: dead */
        atomic_store_explicit(&to->node_dead[local], 1, memory_order_relaxed);
        p = 0;
    }
    atomic_store_explicit(pending, p, memory_order_relaxed);
    return ready;
}

/* Delivers node n's values along all its edges into iteration to, under
 * its frame's lock, and dispatches the nodes made ready. */
static void s_activate(s_step_t *st, const s_node_t *n, const s_source_t *src, s_iter_t *to,
                       s_worklist_t *wl, s_ready_t *r)
{
    const zf_engine_t *ex = st->ex;
    for (int32_t k = n->edge_start; k < n->edge_end; k++) {
        const s_edge_t *e = &ex->edges[k];
        if (!s_deliver(ex, n, e, src, to)) continue;
        to->outstanding_ops++;
        s_dispatch(st, (s_tagged_t){to, e->dst}, wl, r);
    }
}

static s_source_t s_outputs_of(const zf_engine_t *ex, s_iter_t *it, const s_node_t *n)
{
    int32_t local = ex->cfn[n - ex->nodes].local;
    return (s_source_t){&it->outputs[n->out_start], &it->out_dead[n->out_start],
                        atomic_load_explicit(&it->node_dead[local], memory_order_relaxed), true};
}

static s_source_t s_kept(s_value_t *v)
{
    return (s_source_t){&v->t, &v->dead, v->dead, false};
}

static void s_fail_oom(s_step_t *st, const char *what)
{
    s_record_error(st, zf_out_of_memory(what));
}

/* Starts iteration last + 1 of f (lock held): the loop invariants flow
 * into it. NULL when out of memory (the step has failed). */
static s_iter_t *s_next_iteration(s_step_t *st, s_frame_t *f, s_worklist_t *wl, s_ready_t *r)
{
    s_iter_t *it = s_ring_reserve(f) ? s_iter_new(st->ex, f, f->last + 1) : NULL;
    if (!it) {
        s_fail_oom(st, "loop iteration");
        return NULL;
    }
    f->last++;
    *s_ring(f, f->last) = it;
    f->live_iters++;
    for (int32_t k = 0; k < f->invariants.n; k++) {
        s_value_t *v = &f->invariants.items[k];
        s_source_t src = s_kept(v);
        s_activate(st, &st->ex->nodes[v->node], &src, it, wl, r);
    }
    return it;
}

/* Frees f's finished iterations, oldest first (lock held): an iteration
 * is finished when none of its nodes is ready or running, no child frame
 * of it is alive, and the one before it is freed (for iteration 0: every
 * Enter has delivered). Each one freed lets a deferred iteration start.
 * True when the whole frame is finished, once. */
static bool s_cleanup(s_step_t *st, s_frame_t *f, s_worklist_t *wl, s_ready_t *r)
{
    if (!f->parent) return false;
    while (f->first <= f->last) {
        s_iter_t *it = *s_ring(f, f->first);
        if (it->outstanding_ops > 0 || it->outstanding_frames > 0) break;
        if (it->num == 0 && f->pending_inputs > 0) break;
        *s_ring(f, f->first) = NULL;
        s_iter_free(f, it, true);
        f->first++;
        f->live_iters--;
        if (f->deferred.n == 0) continue;
        s_iter_t *next = s_next_iteration(st, f, wl, r);
        for (int32_t k = 0; next && k < f->deferred.n; k++) {
            s_value_t *v = &f->deferred.items[k];
            s_source_t src = s_kept(v);
            src.may_move = true;
            s_activate(st, &st->ex->nodes[v->node], &src, next, wl, r);
        }
        s_values_clear(&f->deferred);
    }
    if (f->finished || f->pending_inputs > 0 || f->live_iters > 0) return false;
    f->finished = true;
    return true;
}

/* f is finished: each Exit that gave no live value gives a dead one, the
 * frame leaves its parent iteration, and the parent may finish in turn. */
static void s_frame_done(s_step_t *st, s_frame_t *f, s_worklist_t *wl, s_ready_t *r)
{
    while (f) {
        s_frame_t *parent = f->parent;
        s_iter_t *pit = f->parent_iter;
        pthread_mutex_lock(&parent->mu);
        for (int32_t k = 0; k < f->info->num_exits; k++) {
            if (f->exit_fired[k]) continue;
            s_value_t dead = {.node = f->info->exits[k], .dead = true, .t = NULL};
            s_source_t src = s_kept(&dead);
            s_activate(st, &st->ex->nodes[dead.node], &src, pit, wl, r);
        }
        s_frame_t **p = &pit->children;
        while (*p != f) p = &(*p)->next;
        *p = f->next;
        pit->outstanding_frames--;
        s_frame_free(f);
        bool done = s_cleanup(st, parent, wl, r);
        pthread_mutex_unlock(&parent->mu);
        f = done ? parent : NULL;
    }
}

/* Frees what finished in f, whose lock the caller holds, and releases the
 * lock; a frame that finished is done. */
static void s_cleanup_unlock(s_step_t *st, s_frame_t *f, s_worklist_t *wl, s_ready_t *r)
{
    bool done = s_cleanup(st, f, wl, r);
    pthread_mutex_unlock(&f->mu);
    if (done) s_frame_done(st, f, wl, r);
}

/* The node's own iteration loses one outstanding node. */
static void s_op_finished(s_step_t *st, s_iter_t *it, s_worklist_t *wl, s_ready_t *r)
{
    pthread_mutex_lock(&it->frame->mu);
    it->outstanding_ops--;
    s_cleanup_unlock(st, it->frame, wl, r);
}

/* An Enter: into iteration 0 of its child frame, or, constant, into every
 * iteration of it, now and to come. */
static void s_enter(s_step_t *st, s_iter_t *it, const s_node_t *n, s_worklist_t *wl, s_ready_t *r)
{
    s_frame_t *parent = it->frame;
    pthread_mutex_lock(&parent->mu);
    s_frame_t *f = s_child_frame(st, parent, it, st->ex->cfn[n - st->ex->nodes].aux);
    pthread_mutex_unlock(&parent->mu);
    if (!f) {
        s_fail_oom(st, "loop frame");
        return;
    }
    s_source_t src = s_outputs_of(st->ex, it, n);
    pthread_mutex_lock(&f->mu);
    if (n->cf == CF_ENTER) {
        s_activate(st, n, &src, *s_ring(f, 0), wl, r);
    } else {
        s_value_t v = {.node = (int32_t)(n - st->ex->nodes),
                       .dead = src.outs_dead[0],
                       .t = src.outs[0] ? zf_tensor_ref(src.outs[0]) : NULL};
        if (!s_values_push(&f->invariants, v)) {
            zf_tensor_unref(&v.t);
            s_fail_oom(st, "loop invariant");
        }
        s_source_t kept = s_kept(&v);
        for (int64_t k = f->first; k <= f->last; k++)
            s_activate(st, n, &kept, *s_ring(f, k), wl, r);
    }
    f->pending_inputs--;
    s_cleanup_unlock(st, f, wl, r);
}

/* A live Exit: into the parent frame's iteration, the first time only. */
static void s_exit(s_step_t *st, s_iter_t *it, const s_node_t *n, s_worklist_t *wl, s_ready_t *r)
{
    s_frame_t *f = it->frame;
    pthread_mutex_lock(&f->mu);
    int32_t k = st->ex->cfn[n - st->ex->nodes].aux;
    bool first = !f->exit_fired[k];
    f->exit_fired[k] = true;
    pthread_mutex_unlock(&f->mu);
    if (!first) return;
    s_source_t src = s_outputs_of(st->ex, it, n);
    pthread_mutex_lock(&f->parent->mu);
    s_activate(st, n, &src, f->parent_iter, wl, r);
    pthread_mutex_unlock(&f->parent->mu);
}

/* A live NextIteration: into iteration num + 1, started now when this is
 * the newest one, or deferred while parallel_iterations are alive. */
static void s_next(s_step_t *st, s_iter_t *it, const s_node_t *n, s_worklist_t *wl, s_ready_t *r)
{
    s_frame_t *f = it->frame;
    s_source_t src = s_outputs_of(st->ex, it, n);
    pthread_mutex_lock(&f->mu);
    s_iter_t *to = NULL;
    if (it->num < f->last) {
        to = *s_ring(f, it->num + 1);
    } else if (f->live_iters < f->info->parallel) {
        to = s_next_iteration(st, f, wl, r);
    } else {
        s_value_t v = {.node = (int32_t)(n - st->ex->nodes), .dead = false, .t = src.outs[0]};
        if (s_values_push(&f->deferred, v))
            src.outs[0] = NULL;
        else
            s_fail_oom(st, "deferred loop iteration");
    }
    if (to) s_activate(st, n, &src, to, wl, r);
    pthread_mutex_unlock(&f->mu);
}

/* The control-flow form of s_plain_node_done: values travel between frames
 * and iterations as n's kind says (a dead Exit waits for its frame to
 * finish; a dead NextIteration starts nothing), then the node's iteration
 * loses one outstanding node. */
static void s_cf_node_done(s_step_t *st, s_iter_t *it, int32_t id, bool propagate, s_worklist_t *wl)
{
    const s_node_t *n = &st->ex->nodes[id];
    s_ready_t r = {0};
    bool dead = atomic_load_explicit(&it->node_dead[st->ex->cfn[id].local], memory_order_relaxed);
    if (propagate && n->cf == CF_PLAIN) { /* one critical section for both */
        s_frame_t *f = it->frame;
        s_source_t src = s_outputs_of(st->ex, it, n);
        pthread_mutex_lock(&f->mu);
        s_activate(st, n, &src, it, wl, &r);
        for (int32_t k = 0; k < n->num_outputs; k++)
            zf_tensor_unref(&it->outputs[n->out_start + k]);
        it->outstanding_ops--; /* it may be freed from here on */
        s_cleanup_unlock(st, f, wl, &r);
        s_settle(st, wl, &r);
        return;
    }
    if (propagate) {
        switch (n->cf) {
        case CF_ENTER:
        case CF_ENTER_CONST: s_enter(st, it, n, wl, &r); break;
        case CF_EXIT:
            if (!dead) s_exit(st, it, n, wl, &r);
            break;
        default:
            if (!dead) s_next(st, it, n, wl, &r);
            break;
        }
    }
    for (int32_t k = 0; k < n->num_outputs; k++) zf_tensor_unref(&it->outputs[n->out_start + k]);
    if (propagate && !atomic_load_explicit(&st->failed, memory_order_relaxed))
        s_op_finished(st, it, wl, &r);
    s_settle(st, wl, &r);
}

static void s_node_done(s_step_t *st, s_iter_t *it, int32_t id, bool propagate, s_worklist_t *wl)
{
    if (st->ex->has_cf)
        s_cf_node_done(st, it, id, propagate, wl);
    else
        s_plain_node_done(st, it, id, propagate, wl);
}

static void s_after_compute(s_step_t *st, s_tagged_t t, zf_status_t s, s_worklist_t *wl)
{
    const s_node_t *n = &st->ex->nodes[t.id];
    s_release_inputs(t.it, n);
    if (zf_ok(s)) s = s_check_outputs(st, t.it, t.id);
    if (zf_ok(s)) {
        s_node_done(st, t.it, t.id, true, wl);
        return;
    }
    s_record_error(st, s);
    s_node_done(st, t.it, t.id, false, wl);
}

/* An asynchronous kernel's run. Whichever of the starter and the callback
 * comes second continues the node: the starter inline, when the callback
 * fired before compute_async returned; otherwise the callback, on the pool
 * (not inline on the thread that completed the recv, which may belong to
 * another partition), unless that thread is an event loop and the rest is
 * light (s_continue_inline()). */
typedef struct {
    zf_kernel_ctx_t ctx;
    s_step_t *st;
    s_tagged_t t;
    atomic_int phase;
    zf_status_t status;
    int64_t start_us, end_us; /* traced steps */
} s_async_t;

/* ---- tracing --------------------------------------------------------------------- */

/* Records the run of ctx's node from start_us to end_us. */
static void s_trace_run(s_step_t *st, const zf_kernel_ctx_t *ctx, int64_t start_us, int64_t end_us)
{
    zf_step_trace_t *t = st->trace;
    int64_t bytes = 0;
    for (int k = 0; k < ctx->num_outputs; k++)
        if (ctx->outputs[k]) bytes += (int64_t)zf_tensor_nbytes(ctx->outputs[k]);
    zf_node_run_t run = {
        ctx->node, st->ex->device->name_str, start_us, end_us, ctx->frame_id, ctx->iter_id, bytes};
    zf_step_trace_add(t, &run);
}

static void s_async_resume(void *arg)
{
    s_async_t *a = arg;
    s_step_t *st = a->st;
    if (st->trace) s_trace_run(st, &a->ctx, a->start_us, a->end_us);
    s_tagged_t t = a->t;
    zf_status_t s = a->status;
    free(a);
    s_worklist_t wl;
    s_wl_init(&wl);
    s_after_compute(st, t, s, &wl);
    s_process(st, &wl);
}

/* True when a's node may continue on this thread: an event loop, a light
 * partition, and outputs small enough that what follows stays short. */
static bool s_continue_inline(const s_async_t *a)
{
    if (!s_inline_thread || !a->st->ex->light) return false;
    size_t bytes = 0;
    for (int k = 0; k < a->ctx.num_outputs; k++)
        if (a->ctx.outputs[k]) bytes += zf_tensor_nbytes(a->ctx.outputs[k]);
    return bytes <= ZF_ENGINE_INLINE_BYTES;
}

static void s_async_done(zf_kernel_ctx_t *ctx, zf_status_t status, void *arg)
{
    (void)ctx;
    s_async_t *a = arg;
    a->status = status;
    if (a->st->trace) a->end_us = zf_step_trace_now_us();
    if (atomic_fetch_add(&a->phase, 1) == 0) return; /* the starter continues */
    if (s_continue_inline(a)) {
        s_async_resume(a);
        return;
    }
    zf_thread_pool_t *pool = a->st->ex->device->pool;
    zf_status_t s = pool ? zf_thread_pool_submit(pool, s_async_resume, a) : zf_internal("no pool");
    if (zf_ok(s)) return;
    zf_status_clear(&s);
    s_async_resume(a);
}

static void s_start_async(s_step_t *st, s_tagged_t t, const zf_kernel_ctx_t *ctx, s_worklist_t *wl)
{
    s_async_t *a = malloc(sizeof *a);
    if (!a) {
        s_after_compute(st, t, zf_out_of_memory("asynchronous kernel"), wl);
        return;
    }
    a->ctx = *ctx;
    a->st = st;
    a->t = t;
    a->status = ZF_STATUS_OK;
    a->start_us = st->trace ? zf_step_trace_now_us() : 0;
    atomic_init(&a->phase, 0);
    st->ex->nodes[t.id].kernel->compute_async(&a->ctx, s_async_done, a);
    if (atomic_fetch_add(&a->phase, 1) == 0) return; /* the callback continues */
    if (st->trace) s_trace_run(st, &a->ctx, a->start_us, a->end_us);
    zf_status_t s = a->status;
    free(a);
    s_after_compute(st, t, s, wl);
}

static void s_run_node(s_step_t *st, s_tagged_t t, s_worklist_t *wl)
{
    const zf_engine_t *ex = st->ex;
    const s_node_t *n = &ex->nodes[t.id];
    s_iter_t *it = t.it;
    int32_t local = s_local(ex, t.id);
    bool dead = atomic_load_explicit(&it->node_dead[local], memory_order_relaxed);
    if (atomic_load_explicit(&st->failed, memory_order_relaxed)) {
        s_release_inputs(it, n);
        s_node_done(st, it, t.id, false, wl);
        return;
    }
    if (dead && (n->flags & S_NEVER_DEAD)) { /* ControlTrigger */
        atomic_store_explicit(&it->node_dead[local], 0, memory_order_relaxed);
        dead = false;
    }
    if (dead && !(n->flags & S_TRANSFER)) { /* dead in, dead out, nothing runs */
        s_release_inputs(it, n);
        for (int32_t k = 0; k < n->num_outputs; k++) it->out_dead[n->out_start + k] = true;
        s_node_done(st, it, t.id, true, wl);
        return;
    }
    zf_kernel_ctx_t ctx = {
        .node = n->def,
        .state = n->state,
        .device = ex->device,
        .inputs = &it->inputs[n->in_start],
        .num_inputs = n->num_inputs,
        .outputs = &it->outputs[n->out_start],
        .num_outputs = n->num_outputs,
        .resources = ex->resources,
        .rendezvous = st->rendezvous,
        .step_id = st->step_id,
        .frame_id = it->frame->id,
        .iter_id = it->num,
        .is_dead_outputs = &it->out_dead[n->out_start],
        .input_is_dead = dead,
    };
    if (n->flags & S_ASYNC) {
        s_start_async(st, t, &ctx, wl);
        return;
    }
    if (!st->trace) {
        s_after_compute(st, t, n->kernel->compute(&ctx), wl);
        return;
    }
    int64_t start = zf_step_trace_now_us();
    zf_status_t s = n->kernel->compute(&ctx);
    s_trace_run(st, &ctx, start, zf_step_trace_now_us());
    s_after_compute(st, t, s, wl);
}

/* True when node id, ready, should not run on this thread because it is an
 * event loop and the node may take long: its inputs total more than
 * ZF_ENGINE_INLINE_BYTES (a large constant, or a value grown inside the
 * step), or its output is sized by its inputs' values. A light partition's
 * small nodes stay inline; these go to the pool, and what they make ready
 * continues there. */
static bool s_leaves_the_loop(const s_step_t *st, s_tagged_t t)
{
    if (!s_inline_thread) return false;
    const s_node_t *n = &st->ex->nodes[t.id];
    if (n->flags & S_SIZED_BY_VALUE) return true;
    /* The inputs' bytes, and the elements of their shapes broadcast together
     * (what an elementwise op of them makes: [n,1] + [1,n] is n*n). */
    double bytes = 0, broadcast = 1, widest = 1;
    int64_t dims[ZF_MAX_RANK] = {0};
    int rank = 0;
    for (int32_t k = 0; k < n->num_inputs; k++) {
        const zf_tensor_t *v = t.it->inputs[n->in_start + k];
        if (!v) continue;
        bytes += (double)zf_tensor_nbytes(v);
        size_t width = zf_dtype_size(zf_tensor_dtype(v));
        if ((double)width > widest) widest = (double)width;
        const zf_shape_t *sh = zf_tensor_shape(v);
        for (int d = 0; d < sh->rank; d++) { /* right-aligned, as broadcasting is */
            int64_t *to = &dims[ZF_MAX_RANK - sh->rank + d];
            if (sh->dims[d] > *to) *to = sh->dims[d];
        }
        if (sh->rank > rank) rank = sh->rank;
    }
    for (int d = ZF_MAX_RANK - rank; d < ZF_MAX_RANK; d++) broadcast *= (double)dims[d];
    return bytes > ZF_ENGINE_INLINE_BYTES || broadcast * widest > ZF_ENGINE_INLINE_BYTES;
}

/* Runs the worklist. _Sends ready one after another on it run in a send
 * batch (executor/rendezvous/rendezvous.h), so the small tensors they push
 * to a peer leave in one message: the batch opens when a _Send is followed
 * by another, and ends before anything else runs here or leaves for the
 * pool, and before the last _Send of the run, which goes alone. So the
 * held-back tensors are out before any other node runs, none waits behind
 * a kernel, and the step cannot end (its last _Send is still to run) with
 * a tensor still held: a push that fails aborts the step's rendezvous, and
 * that last _Send reports it. A lone _Send is never held back. */
static void s_process(s_step_t *st, s_worklist_t *wl)
{
    /* A batch some caller up this thread left open (an inline callback of
     * one of its _Sends brought us here) ends first: nothing of this step
     * may wait on that caller. */
    zf_rendezvous_batch_end();
    /* wl only holds counted nodes, so the step outlives every pop. Whether
     * the thread's batch is open is not remembered here (begin and end
     * look): a node's inline callbacks may run this loop again for another
     * step, which ends the batch it finds open. */
    while (wl->n > 0) {
        wl->n--;
        s_tagged_t t = {wl->its[wl->n], wl->ids[wl->n]};
        bool here = !s_leaves_the_loop(st, t);
        bool more = here && (st->ex->nodes[t.id].flags & S_SEND) && wl->n > 0 &&
                    (st->ex->nodes[wl->ids[wl->n - 1]].flags & S_SEND);
        /* begin leaves an open batch as it is, end does nothing without one */
        if (more)
            zf_rendezvous_batch_begin();
        else
            zf_rendezvous_batch_end();
        if (here)
            s_run_node(st, t, wl);
        else
            s_schedule(st, t); /* takes the node's count along */
    }
    zf_rendezvous_batch_end();
    s_wl_free(wl);
}

/* One block: the step, then the root iteration's arrays, zeroed. */
static zf_status_t s_step_new(zf_engine_t *ex, const zf_engine_args_t *args, s_step_t **out)
{
    const s_finfo_t *root = &ex->frames[0];
    size_t head = s_align(sizeof(s_step_t));
    char *block = calloc(1, head + s_iter_layout(root, NULL, NULL));
    if (!block) return zf_out_of_memory("executor step");
    s_step_t *st = (s_step_t *)block;
    s_iter_layout(root, &st->root, block + head);
    s_iter_init_counts(ex, root, &st->root);
    st->root.frame = &st->root_frame;
    st->root_frame.info = root;
    if (ex->has_cf) pthread_mutex_init(&st->root_frame.mu, NULL);
    st->ex = ex;
    st->step_id = args->step_id;
    st->trace = args->trace;
    atomic_init(&st->outstanding, ex->num_roots);
    atomic_init(&st->failed, false);
    pthread_mutex_init(&st->mu, NULL);
    zf_status_t s =
        args->rendezvous ? ZF_STATUS_OK : zf_rendezvous_new(args->step_id, &st->rendezvous);
    if (!zf_ok(s)) {
        if (ex->has_cf) pthread_mutex_destroy(&st->root_frame.mu);
        pthread_mutex_destroy(&st->mu);
        free(block);
        return s;
    }
    if (args->rendezvous) st->rendezvous = zf_rendezvous_ref(args->rendezvous);
    *out = st;
    return ZF_STATUS_OK;
}

void zf_engine_run_async(zf_engine_t *ex, const zf_engine_args_t *args, zf_engine_done_fn done,
                         void *arg)
{
    s_step_t *st = NULL;
    zf_status_t s = s_step_new(ex, args, &st);
    if (!zf_ok(s)) {
        s = zf_status_prefix(s, "%s", ex->device->name_str);
        if (args->rendezvous) zf_rendezvous_start_abort(args->rendezvous, &s);
        done(s, arg);
        return;
    }
    st->done = done;
    st->done_arg = arg;
    if (ex->num_roots == 0) { /* an empty partition */
        s_step_finish(st);
        return;
    }
    s_worklist_t wl;
    s_wl_init(&wl);
    /* Every root is counted already; cheap ones run here, in node order. */
    for (int32_t k = ex->num_roots - 1; k >= 0; k--) {
        s_tagged_t t = {&st->root, ex->roots[k]};
        if (ex->nodes[t.id].flags & S_EXPENSIVE)
            s_schedule(st, t);
        else if (!s_wl_push(&wl, t))
            s_run_here(st, t);
    }
    s_process(st, &wl);
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    zf_status_t status;
} s_sync_t;

static void s_sync_done(zf_status_t status, void *arg)
{
    s_sync_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->status = status;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

zf_status_t zf_engine_run(zf_engine_t *ex, const zf_engine_args_t *args)
{
    s_sync_t w = {.done = false, .status = ZF_STATUS_OK};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    zf_engine_run_async(ex, args, s_sync_done, &w);
    pthread_mutex_lock(&w.mu);
    while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return w.status;
}
