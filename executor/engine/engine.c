/* The dataflow executor: the flat, per-partition layout built once
 * (kernels, slots, edges, pending counts) and the per-step run state
 * (pending counts, input and output slots, deadness, status). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "common/op_registry.h"
#include "executor/engine/engine.h"
#include "executor/kernels/kernel.h"
#include "common/thread_pool.h"

/* ---- the layout ---------------------------------------------------------- */

enum {
    S_EXPENSIVE = 1u << 0,      /* runs on the device's pool */
    S_ASYNC = 1u << 1,          /* compute_async */
    S_TRANSFER = 1u << 2,       /* Send/Recv: runs even when dead, to forward deadness */
    S_SIZED_BY_VALUE = 1u << 3, /* never on an event loop (ZF_KERNEL_SIZED_BY_VALUE) */
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
    bool created;
} s_node_t;

typedef struct {
    int32_t dst;
    int32_t dst_slot; /* input slot, or -1 for a control edge */
    int32_t src_port; /* output index, or -1 for a control edge */
    bool last;        /* the output's last consumer: move, do not ref */
} s_edge_t;

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
    int32_t *multi; /* nodes with two or more inputs: the only counters a step sets */
    int32_t num_multi;
    zf_dtype_t *out_types; /* expected base dtype per output slot; ZF_INVALID: unchecked */
    int32_t total_inputs, total_outputs;
    bool light; /* see zf_engine_is_light() */
};

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
                                                                                  : 0));
    return ZF_STATUS_OK;
}

/* Fills node i's expected output dtypes (base types; refs hold values). */
static void s_layout_out_types(zf_engine_t *ex, int32_t i)
{
    const s_node_t *n = &ex->nodes[i];
    zf_dtype_t *types = &ex->out_types[n->out_start];
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
    ex->multi = calloc(n, sizeof *ex->multi);
    if (!ex->nodes || !ex->edges || !ex->roots || !ex->multi)
        return zf_out_of_memory("engine layout");
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
        if (ex->nodes[i].pending >= 2) ex->multi[ex->num_multi++] = i;
    }
    if (ex->num_nodes > 0 && ex->num_roots == 0)
        return zf_invalid_argument("graph has no node without inputs, so no node can start");
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
    free(ex->multi);
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

typedef struct {
    zf_engine_t *ex;
    int64_t step_id;
    zf_rendezvous_t *rendezvous;
    zf_engine_done_fn done;
    void *done_arg;
    atomic_int_fast64_t outstanding; /* nodes ready or running */
    atomic_bool failed;
    pthread_mutex_t mu; /* guards status */
    zf_status_t status;
    atomic_int *pending;     /* per node */
    atomic_uchar *node_dead; /* per node: some input is dead */
    zf_tensor_t **inputs;    /* per input slot: owned references */
    zf_tensor_t **outputs;   /* per output slot: owned until propagated */
    bool *out_dead;          /* per output slot */
} s_step_t;

/* Nodes made ready and waiting to run on this thread: a stack that starts
 * in place and spills to the heap. */
typedef struct {
    int32_t *items;
    int32_t n, cap;
    int32_t local[32];
} s_worklist_t;

static void s_wl_init(s_worklist_t *wl)
{
    wl->items = wl->local;
    wl->n = 0;
    wl->cap = (int32_t)(sizeof wl->local / sizeof wl->local[0]);
}

static bool s_wl_push(s_worklist_t *wl, int32_t id)
{
    if (wl->n == wl->cap) {
        int32_t cap = wl->cap * 2;
        int32_t *items = malloc((size_t)cap * sizeof *items);
        if (!items) return false;
        memcpy(items, wl->items, (size_t)wl->n * sizeof *items);
        if (wl->items != wl->local) free(wl->items);
        wl->items = items;
        wl->cap = cap;
    }
    wl->items[wl->n++] = id;
    return true;
}

static void s_wl_free(s_worklist_t *wl)
{
    if (wl->items != wl->local) free(wl->items);
}

static void s_process(s_step_t *st, s_worklist_t *wl);

static void s_step_free(s_step_t *st)
{
    const zf_engine_t *ex = st->ex;
    if (atomic_load(&st->failed)) { /* nodes that never ran still hold inputs */
        for (int32_t i = 0; i < ex->total_inputs; i++) zf_tensor_unref(&st->inputs[i]);
        for (int32_t i = 0; i < ex->total_outputs; i++) zf_tensor_unref(&st->outputs[i]);
    }
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
static zf_status_t s_check_outputs(const s_step_t *st, const s_node_t *n)
{
    const zf_engine_t *ex = st->ex;
    for (int32_t k = 0; k < n->num_outputs; k++) {
        const zf_tensor_t *t = st->outputs[n->out_start + k];
        if (!t) {
            if (st->out_dead[n->out_start + k]) continue;
            return zf_internal("%s (%s): kernel produced no value for output %d", n->def->name,
                               n->def->op, k);
        }
        zf_dtype_t want = ex->out_types[n->out_start + k];
        if (want != ZF_INVALID && zf_tensor_dtype(t) != want)
            return zf_internal("%s (%s): kernel produced %s for output %d, expected %s",
                               n->def->name, n->def->op, zf_dtype_name(zf_tensor_dtype(t)), k,
                               zf_dtype_name(want));
    }
    return ZF_STATUS_OK;
}

static void s_release_inputs(s_step_t *st, const s_node_t *n)
{
    for (int32_t k = 0; k < n->num_inputs; k++) zf_tensor_unref(&st->inputs[n->in_start + k]);
}

static void s_run_node(s_step_t *st, int32_t id, s_worklist_t *wl);

/* Runs node id and everything it makes ready inline, on this thread. Used
 * where no worklist exists yet (pool tasks) or a push failed. */
static void s_run_here(s_step_t *st, int32_t id)
{
    s_worklist_t wl;
    s_wl_init(&wl);
    s_run_node(st, id, &wl);
    s_process(st, &wl);
}

typedef struct {
    s_step_t *st;
    int32_t id;
} s_task_t;

static void s_task_run(void *arg)
{
    s_task_t task = *(s_task_t *)arg;
    free(arg);
    s_run_here(task.st, task.id);
}

/* Hands a counted ready node to the device's pool (runs it here when that
 * is impossible). */
static void s_schedule(s_step_t *st, int32_t id)
{
    zf_thread_pool_t *pool = st->ex->device->pool;
    s_task_t *task = pool ? malloc(sizeof *task) : NULL;
    if (task) {
        *task = (s_task_t){st, id};
        zf_status_t s = zf_thread_pool_submit(pool, s_task_run, task);
        if (zf_ok(s)) return;
        zf_status_clear(&s);
        free(task);
    }
    s_run_here(st, id);
}

/* Moves the value edge e carries into its consumer's slot (a reference of
 * its own, or the producer's for the output's last consumer) and marks the
 * consumer dead when the value (or, on a control edge, the node) is. */
static void s_move_output(s_step_t *st, const s_node_t *n, const s_edge_t *e, bool node_dead)
{
    bool dead = node_dead;
    if (e->src_port >= 0) {
        int32_t slot = n->out_start + e->src_port;
        zf_tensor_t *t = st->outputs[slot];
        if (e->last) st->outputs[slot] = NULL;
        st->inputs[e->dst_slot] = e->last || !t ? t : zf_tensor_ref(t);
        dead = st->out_dead[slot];
    }
    if (dead) atomic_store_explicit(&st->node_dead[e->dst], 1, memory_order_relaxed);
}

/* Dispatches dst, just made ready (see s_node_done): the first cheap one
 * inherits the finished node's count; every other one is counted first,
 * then queued here (cheap) or held back for the pool (expensive). */
static void s_dispatch(s_step_t *st, int32_t dst, s_worklist_t *wl, bool *inherited, int32_t *held)
{
    bool expensive = (st->ex->nodes[dst].flags & S_EXPENSIVE) != 0;
    if (!expensive && !*inherited && s_wl_push(wl, dst)) {
        *inherited = true;
        return;
    }
    atomic_fetch_add_explicit(&st->outstanding, 1, memory_order_relaxed);
    if (!expensive) {
        if (!s_wl_push(wl, dst)) s_run_here(st, dst); /* out of memory: run it now */
        return;
    }
    if (*held >= 0) s_schedule(st, *held);
    *held = dst;
}

/* Node id is finished: moves its outputs into its consumers' slots (unless
 * propagate is false, after a failure), dispatches the nodes that became
 * ready and settles the step's outstanding count. The node's own count
 * passes to the first cheap node it makes ready, so a chain costs no
 * atomic operation on it. The last expensive node made ready runs here when
 * nothing else does. When nothing inherits and the count reaches zero, the
 * step ends here. */
static void s_node_done(s_step_t *st, int32_t id, bool propagate, s_worklist_t *wl)
{
    const zf_engine_t *ex = st->ex;
    const s_node_t *n = &ex->nodes[id];
    bool inherited = false;
    bool node_dead = atomic_load_explicit(&st->node_dead[id], memory_order_relaxed);
    int32_t held = -1;
    for (int32_t k = n->edge_start; propagate && k < n->edge_end; k++) {
        const s_edge_t *e = &ex->edges[k];
        s_move_output(st, n, e, node_dead);
        if (ex->nodes[e->dst].pending == 1 ||
            atomic_fetch_sub_explicit(&st->pending[e->dst], 1, memory_order_acq_rel) == 1)
            s_dispatch(st, e->dst, wl, &inherited, &held);
    }
    for (int32_t k = 0; k < n->num_outputs; k++) zf_tensor_unref(&st->outputs[n->out_start + k]);
    if (held >= 0 && (wl->n > 0 || !s_wl_push(wl, held))) s_schedule(st, held);
    if (!inherited && atomic_fetch_sub_explicit(&st->outstanding, 1, memory_order_acq_rel) == 1)
        s_step_finish(st);
}

static void s_after_compute(s_step_t *st, int32_t id, zf_status_t s, s_worklist_t *wl)
{
    const s_node_t *n = &st->ex->nodes[id];
    s_release_inputs(st, n);
    if (zf_ok(s)) s = s_check_outputs(st, n);
    if (zf_ok(s)) {
        s_node_done(st, id, true, wl);
        return;
    }
    s_record_error(st, s);
    s_node_done(st, id, false, wl);
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
    int32_t id;
    atomic_int phase;
    zf_status_t status;
} s_async_t;

static void s_async_resume(void *arg)
{
    s_async_t *a = arg;
    s_step_t *st = a->st;
    int32_t id = a->id;
    zf_status_t s = a->status;
    free(a);
    s_worklist_t wl;
    s_wl_init(&wl);
    s_after_compute(st, id, s, &wl);
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

static void s_start_async(s_step_t *st, int32_t id, const zf_kernel_ctx_t *ctx, s_worklist_t *wl)
{
    s_async_t *a = malloc(sizeof *a);
    if (!a) {
        s_after_compute(st, id, zf_out_of_memory("asynchronous kernel"), wl);
        return;
    }
    a->ctx = *ctx;
    a->st = st;
    a->id = id;
    a->status = ZF_STATUS_OK;
    atomic_init(&a->phase, 0);
    st->ex->nodes[id].kernel->compute_async(&a->ctx, s_async_done, a);
    if (atomic_fetch_add(&a->phase, 1) == 0) return; /* the callback continues */
    zf_status_t s = a->status;
    free(a);
    s_after_compute(st, id, s, wl);
}

static void s_run_node(s_step_t *st, int32_t id, s_worklist_t *wl)
{
    const zf_engine_t *ex = st->ex;
    const s_node_t *n = &ex->nodes[id];
    bool dead = atomic_load_explicit(&st->node_dead[id], memory_order_relaxed);
    if (atomic_load_explicit(&st->failed, memory_order_relaxed)) {
        s_release_inputs(st, n);
        s_node_done(st, id, false, wl);
        return;
    }
    if (dead && !(n->flags & S_TRANSFER)) { /* dead in, dead out, nothing runs */
        s_release_inputs(st, n);
        for (int32_t k = 0; k < n->num_outputs; k++) st->out_dead[n->out_start + k] = true;
        s_node_done(st, id, true, wl);
        return;
    }
    zf_kernel_ctx_t ctx = {
        .node = n->def,
        .state = n->state,
        .device = ex->device,
        .inputs = &st->inputs[n->in_start],
        .num_inputs = n->num_inputs,
        .outputs = &st->outputs[n->out_start],
        .num_outputs = n->num_outputs,
        .resources = ex->resources,
        .rendezvous = st->rendezvous,
        .step_id = st->step_id,
        .is_dead_outputs = &st->out_dead[n->out_start],
        .input_is_dead = dead,
    };
    if (n->flags & S_ASYNC) {
        s_start_async(st, id, &ctx, wl);
        return;
    }
    s_after_compute(st, id, n->kernel->compute(&ctx), wl);
}

/* True when node id, ready, should not run on this thread because it is an
 * event loop and the node may take long: its inputs total more than
 * ZF_ENGINE_INLINE_BYTES (a large constant, or a value grown inside the
 * step), or its output is sized by its inputs' values. A light partition's
 * small nodes stay inline; these go to the pool, and what they make ready
 * continues there. */
static bool s_leaves_the_loop(const s_step_t *st, int32_t id)
{
    if (!s_inline_thread) return false;
    const s_node_t *n = &st->ex->nodes[id];
    if (n->flags & S_SIZED_BY_VALUE) return true;
    /* The inputs' bytes, and the elements of their shapes broadcast together
     * (what an elementwise op of them makes: [n,1] + [1,n] is n*n). */
    double bytes = 0, broadcast = 1, widest = 1;
    int64_t dims[ZF_MAX_RANK] = {0};
    int rank = 0;
    for (int32_t k = 0; k < n->num_inputs; k++) {
        const zf_tensor_t *t = st->inputs[n->in_start + k];
        if (!t) continue;
        bytes += (double)zf_tensor_nbytes(t);
        size_t width = zf_dtype_size(zf_tensor_dtype(t));
        if ((double)width > widest) widest = (double)width;
        const zf_shape_t *sh = zf_tensor_shape(t);
        for (int d = 0; d < sh->rank; d++) { /* right-aligned, as broadcasting is */
            int64_t *to = &dims[ZF_MAX_RANK - sh->rank + d];
            if (sh->dims[d] > *to) *to = sh->dims[d];
        }
        if (sh->rank > rank) rank = sh->rank;
    }
    for (int d = ZF_MAX_RANK - rank; d < ZF_MAX_RANK; d++) broadcast *= (double)dims[d];
    return bytes > ZF_ENGINE_INLINE_BYTES || broadcast * widest > ZF_ENGINE_INLINE_BYTES;
}

static void s_process(s_step_t *st, s_worklist_t *wl)
{
    /* wl only holds counted nodes, so the step outlives every pop. */
    while (wl->n > 0) {
        int32_t id = wl->items[--wl->n];
        if (s_leaves_the_loop(st, id))
            s_schedule(st, id); /* takes the node's count along */
        else
            s_run_node(st, id, wl);
    }
    s_wl_free(wl);
}

static size_t s_align(size_t x)
{
    return (x + 15) & ~(size_t)15;
}

/* One block: the step, then its per-slot and per-node arrays, zeroed. */
static zf_status_t s_step_new(zf_engine_t *ex, const zf_engine_args_t *args, s_step_t **out)
{
    size_t nn = (size_t)ex->num_nodes, ni = (size_t)ex->total_inputs,
           no = (size_t)ex->total_outputs;
    size_t off_in = s_align(sizeof(s_step_t));
    size_t off_out = s_align(off_in + ni * sizeof(zf_tensor_t *));
    size_t off_pending = s_align(off_out + no * sizeof(zf_tensor_t *));
    size_t off_node_dead = s_align(off_pending + nn * sizeof(atomic_int));
    size_t off_out_dead = s_align(off_node_dead + nn * sizeof(atomic_uchar));
    char *block = calloc(1, off_out_dead + no * sizeof(bool));
    if (!block) return zf_out_of_memory("executor step");
    s_step_t *st = (s_step_t *)block;
    st->inputs = (zf_tensor_t **)(block + off_in);
    st->outputs = (zf_tensor_t **)(block + off_out);
    st->pending = (atomic_int *)(block + off_pending);
    st->node_dead = (atomic_uchar *)(block + off_node_dead);
    st->out_dead = (bool *)(block + off_out_dead);
    for (int32_t i = 0; i < ex->num_multi; i++)
        atomic_init(&st->pending[ex->multi[i]], ex->nodes[ex->multi[i]].pending);
    st->ex = ex;
    st->step_id = args->step_id;
    atomic_init(&st->outstanding, ex->num_roots);
    atomic_init(&st->failed, false);
    pthread_mutex_init(&st->mu, NULL);
    zf_status_t s =
        args->rendezvous ? ZF_STATUS_OK : zf_rendezvous_new(args->step_id, &st->rendezvous);
    if (!zf_ok(s)) {
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
        int32_t id = ex->roots[k];
        if (ex->nodes[id].flags & S_EXPENSIVE)
            s_schedule(st, id);
        else if (!s_wl_push(&wl, id))
            s_run_here(st, id);
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
