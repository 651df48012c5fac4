/* The cut (docs/design.md, "Pruning and partitioning"): how one in-edge of a partitioned node is
 * wired — directly within a partition, or through a _Send/_Recv pair (host-memory variants by
 * memory type, dummy Const and Identity for control edges, optional bfloat16 casts, recv dedup).
 * Also owns the per-run caches of dtypes and kernel definitions that memory types are read from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/graph/partition_internal.h"

/* ---- dtypes and memory types --------------------------------------------- */

bool zf__grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return true;
    int cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*arr, (size_t)cap2 * elem);
    if (!p) return false;
    *arr = p;
    *cap = cap2;
    return true;
}

static zf_status_t s_op_types(zf__pctx_t *c, int node, bool input, int *n)
{
    const zf_op_def_t *def = zf_graph_op_def(c->g, node);
    const Tensorflow__NodeDef *nd = zf_graph_node_def(c->g, node);
    if (!def) return zf_not_found("op '%s' is not registered", nd->op);
    zf_status_t (*fn)(const zf_op_def_t *, const Tensorflow__NodeDef *, zf_dtype_t *, int, int *) =
        input ? zf_op_input_types : zf_op_output_types;
    ZF_TRY(fn(def, nd, c->scratch, c->cap_scratch, n));
    if (*n <= c->cap_scratch) return ZF_STATUS_OK;
    if (!zf__grow((void **)&c->scratch, &c->cap_scratch, *n, sizeof *c->scratch))
        return zf_out_of_memory("partition");
    return fn(def, nd, c->scratch, c->cap_scratch, n);
}

/* The node's resolved input or output dtypes (see zf__pctx_t), computed once. */
static int64_t s_resolve(zf__pctx_t *c, int node, bool input)
{
    size_t n_orig = (size_t)(c->pruned.n_orig ? c->pruned.n_orig : 1);
    if (!c->out_at && !(c->out_at = calloc(n_orig, sizeof *c->out_at))) return -1;
    if (!c->in_at && !(c->in_at = calloc(n_orig, sizeof *c->in_at))) return -1;
    int64_t *at = input ? c->in_at : c->out_at;
    if (at[node]) return at[node];
    int n = 0;
    zf_status_t s = s_op_types(c, node, input, &n);
    size_t need = c->n_pool + 1 + (size_t)n;
    if (zf_ok(s) && need > c->cap_pool) {
        size_t cap = c->cap_pool ? c->cap_pool : 1024;
        while (cap < need) cap *= 2;
        int32_t *pool = realloc(c->pool, cap * sizeof *pool);
        if (pool) {
            c->pool = pool;
            c->cap_pool = cap;
        } else {
            s = zf_out_of_memory("partition");
        }
    }
    if (!zf_ok(s)) {
        zf_status_clear(&s);
        return at[node] = -1; /* unknown: memory falls back to the kernel's word */
    }
    c->pool[c->n_pool] = n;
    for (int i = 0; i < n; i++) c->pool[c->n_pool + 1 + (size_t)i] = (int32_t)c->scratch[i];
    at[node] = (int64_t)c->n_pool + 1;
    c->n_pool = need;
    return at[node];
}

/* The dtype at a port of a pruned node; false when it cannot be resolved. */
static bool s_type_at(zf__pctx_t *c, int node, bool input, int port, zf_dtype_t *t)
{
    const zf__pruned_t *p = &c->pruned;
    if (node >= p->n_orig) {
        /* A feed outputs, and a fetch takes, the base type of its tensor. */
        const zf__endpoint_t *ep = zf__pruned_is_feed(p, node)
                                       ? &p->feeds[node - p->n_orig]
                                       : &p->fetches[node - p->n_orig - p->n_feeds];
        if (zf__pruned_is_feed(p, node) == input || port != 0) return false;
        if (!s_type_at(c, ep->node, false, ep->port, t)) return false;
        *t = zf_dtype_base(*t);
        return true;
    }
    int64_t at = s_resolve(c, node, input);
    if (at <= 0 || port < 0 || port >= c->pool[at - 1]) return false;
    *t = (zf_dtype_t)c->pool[at + port];
    return true;
}

static const zf_kernel_def_t *s_kernel(zf__pctx_t *c, int node)
{
    if (c->kdef_done[node]) return c->kdefs[node];
    const Tensorflow__NodeDef *nd = zf_graph_node_def(c->g, node);
    const char *type = c->devs[c->node_dev[node]].type;
    const zf_kernel_def_t *def = NULL;
    /* zf_kernel_def_exists first: a miss in zf_kernel_def_find formats an error. */
    if (zf_kernel_def_exists(nd->op, type)) {
        zf_status_t s = zf_kernel_def_find(type, nd, &def, NULL);
        zf_status_clear(&s);
    }
    c->kdef_done[node] = 1;
    return c->kdefs[node] = def;
}

/* On a non-CPU device: host-only dtypes and INT32 live in host memory, and
 * so does whatever the node's kernel declares host memory. */
static bool s_host(zf__pctx_t *c, int node, bool input, int port)
{
    const zf__pruned_t *p = &c->pruned;
    if (zf__pruned_is_feed(p, node)) return c->feed_host[node - p->n_orig];
    if (zf__pruned_is_fetch(p, node)) return c->fetch_host[node - p->n_orig - p->n_feeds];
    zf_dtype_t t = ZF_INVALID;
    if (s_type_at(c, node, input, port, &t)) {
        zf_dtype_t base = zf_dtype_base(t);
        if (zf_dtype_host_only(base) || base == ZF_INT32) return true;
    }
    const zf_kernel_def_t *k = s_kernel(c, node);
    uint32_t mask = k ? (input ? k->host_memory_inputs : k->host_memory_outputs) : 0;
    return port >= 0 && port < 32 && (mask >> port & 1u);
}

bool zf__pctx_out_host(zf__pctx_t *c, int node, int port)
{
    return s_host(c, node, false, port);
}

bool zf__pctx_in_host(zf__pctx_t *c, int node, int port)
{
    return s_host(c, node, true, port);
}

zf_status_t zf__pctx_check_arity(zf__pctx_t *c, int node)
{
    int64_t at = s_resolve(c, node, true);
    if (at <= 0) return ZF_STATUS_OK;
    int want = c->pool[at - 1], have = zf_graph_num_data_inputs(c->g, node);
    if (want > have)
        return zf_invalid_argument("Incomplete graph, missing %d inputs for %s", want - have,
                                   zf_graph_node_name(c->g, node));
    return ZF_STATUS_OK;
}

/* ---- recv dedup ---------------------------------------------------------- */

static uint64_t s_dup_hash(uint64_t a, uint64_t b)
{
    uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static void s_dup_key(int src, int port, int slot, bool on_host, uint64_t *a, uint64_t *b)
{
    *a = (uint64_t)(uint32_t)src << 32 | (uint32_t)(port + 1);
    *b = (uint64_t)(uint32_t)slot << 1 | (on_host ? 1u : 0u);
}

static const zf__dup_slot_t *s_dup_get(const zf__pctx_t *c, int src, int port, int slot,
                                       bool on_host)
{
    uint64_t a, b;
    s_dup_key(src, port, slot, on_host, &a, &b);
    size_t mask = c->dup_cap - 1;
    for (size_t i = s_dup_hash(a, b) & mask; c->dup[i].name; i = (i + 1) & mask)
        if (c->dup[i].a == a && c->dup[i].b == b) return &c->dup[i];
    return NULL;
}

static void s_dup_place(zf__dup_slot_t *slots, size_t cap, zf__dup_slot_t e)
{
    size_t i = s_dup_hash(e.a, e.b) & (cap - 1);
    while (slots[i].name) i = (i + 1) & (cap - 1);
    slots[i] = e;
}

static bool s_dup_put(zf__pctx_t *c, int src, int port, int slot, bool on_host, const char *name,
                      int rec)
{
    if ((c->dup_n + 1) * 4 > c->dup_cap * 3) {
        size_t cap = c->dup_cap * 2;
        zf__dup_slot_t *slots = calloc(cap, sizeof *slots);
        if (!slots) return false;
        for (size_t i = 0; i < c->dup_cap; i++)
            if (c->dup[i].name) s_dup_place(slots, cap, c->dup[i]);
        free(c->dup);
        c->dup = slots;
        c->dup_cap = cap;
    }
    zf__dup_slot_t e = {0, 0, name, rec};
    s_dup_key(src, port, slot, on_host, &e.a, &e.b);
    s_dup_place(c->dup, c->dup_cap, e);
    c->dup_n++;
    return true;
}

zf_status_t zf__pctx_cut_init(zf__pctx_t *c)
{
    c->dup_cap = 1024;
    c->dup = calloc(c->dup_cap, sizeof *c->dup);
    return c->dup ? ZF_STATUS_OK : zf_out_of_memory("partition");
}

void zf__pctx_cut_free(zf__pctx_t *c)
{
    free(c->dup);
    free(c->out_at);
    free(c->in_at);
    free(c->pool);
    free(c->scratch);
    c->dup = NULL;
    c->out_at = c->in_at = NULL;
    c->pool = NULL;
    c->scratch = NULL;
}

/* ---- the node's input list ----------------------------------------------- */

static bool s_push_input(zf__pctx_t *c, const char *name, int port)
{
    char *in = zf__input_string(name, port);
    if (!in || !zf__grow((void **)&c->inputs, &c->cap_inputs, c->n_inputs + 1, sizeof *c->inputs)) {
        free(in);
        return false;
    }
    c->inputs[c->n_inputs++] = in;
    return true;
}

static bool s_push_refc(zf__pctx_t *c, const char *name, int src, int port, bool check)
{
    if (!zf__grow((void **)&c->refc, &c->cap_refc, c->n_refc + 1, sizeof *c->refc)) return false;
    c->refc[c->n_refc++] = (zf__refc_t){name, src, port, check};
    return true;
}

static bool s_src_is_ref(zf__pctx_t *c, int src, int port)
{
    zf_dtype_t t = ZF_INVALID;
    return src < c->pruned.n_orig && s_type_at(c, src, false, port, &t) && zf_dtype_is_ref(t);
}

zf_status_t zf__pctx_read_controls(zf__pctx_t *c)
{
    for (int r = 0; r < c->n_ref_recvs; r++) {
        for (int i = 0; i < c->n_refc; i++) {
            const zf__refc_t *rc = &c->refc[i];
            if (rc->check && s_src_is_ref(c, rc->src, rc->port)) continue;
            if (!zf__node_add_input(c->ref_recvs[r], zf__input_string(rc->name, ZF_CONTROL_PORT)))
                return zf_out_of_memory("partition");
        }
    }
    return ZF_STATUS_OK;
}

/* ---- send and recv ------------------------------------------------------- */

/* What one cut edge needs while its nodes are built. */
typedef struct {
    const zf__pedge_t *e;
    int sd, dd;      /* source and destination devices */
    const char *src; /* the source node's name */
    bool control;
    zf_dtype_t dtype, wire; /* the edge's dtype and the dtype sent (bfloat16 cast) */
    char *tensor;           /* edge_<id>_<src>, or loop_pred_<src> */
} s_cut_t;

static bool s_sendrecv_attrs(Tensorflow__NodeDef *nd, const zf__pctx_t *c, const s_cut_t *k)
{
    const zf__pdev_t *s = &c->devs[k->sd], *d = &c->devs[k->dd];
    return zf__node_add_attr(nd, "client_terminated", zf__attr_bool(false)) &&
           zf__node_add_attr(nd, "recv_device", zf__attr_string(d->name)) &&
           zf__node_add_attr(nd, "send_device", zf__attr_string(s->name)) &&
           zf__node_add_attr(nd, "send_device_incarnation",
                             zf__attr_int((int64_t)s->incarnation)) &&
           zf__node_add_attr(nd, "tensor_name", zf__attr_string(k->tensor));
}

/* A Cast (or _HostCast) from..to on device dev reading input; the new
 * node's name goes to *name (borrowed from the node). */
static bool s_cast(zf__pctx_t *c, const s_cut_t *k, int dev, bool host, const char *input,
                   zf_dtype_t from, zf_dtype_t to, const char **name)
{
    Tensorflow__NodeDef *nd = zf__node_new(zf__pctx_new_name(c, k->src, ""),
                                           host ? "_HostCast" : "Cast", c->devs[dev].name);
    bool ok = nd && zf__node_add_attr(nd, "DstT", zf__attr_type(to)) &&
              zf__node_add_attr(nd, "SrcT", zf__attr_type(from)) &&
              (to != ZF_BFLOAT16 || zf__node_add_attr(nd, "Truncate", zf__attr_bool(true))) &&
              zf__node_add_input(nd, strdup(input));
    if (!ok) {
        zf__node_free(nd);
        return false;
    }
    *name = nd->name;
    return zf__pctx_push(c, dev, nd);
}

/* The dummy Const that carries a control edge; returns its name (owned). */
static char *s_control_source(zf__pctx_t *c, const s_cut_t *k)
{
    const char *dev = c->devs[k->sd].name;
    Tensorflow__NodeDef *dummy = zf__node_new(zf__pctx_new_name(c, k->src, "/ctrl"), "Const", dev);
    bool ok = dummy && zf__node_add_attr(dummy, "dtype", zf__attr_type(ZF_FLOAT)) &&
              zf__node_add_attr(dummy, "value", zf__attr_empty_float_tensor()) &&
              zf__node_add_input(dummy, zf__input_string(k->src, ZF_CONTROL_PORT));
    if (!ok) {
        zf__node_free(dummy);
        return NULL;
    }
    return zf__pctx_push(c, k->sd, dummy) ? strdup(dummy->name) : NULL;
}

/* The source side: [dummy Const for control] [cast] _Send. */
static Tensorflow__NodeDef *s_send_side(zf__pctx_t *c, const s_cut_t *k)
{
    char *from = k->control ? s_control_source(c, k) : zf__input_string(k->src, k->e->src_port);
    bool host =
        !k->control && !c->devs[k->sd].cpu && zf__pctx_out_host(c, k->e->src, k->e->src_port);
    if (from && k->wire != k->dtype) {
        const char *cast = NULL;
        bool ok = s_cast(c, k, k->sd, host, from, k->dtype, k->wire, &cast);
        free(from);
        from = ok ? strdup(cast) : NULL;
    }
    if (!from) return NULL;
    Tensorflow__NodeDef *send = zf__node_new(zf__pctx_new_name(c, k->src, ""),
                                             host ? "_HostSend" : "_Send", c->devs[k->sd].name);
    if (!send || !zf__node_add_attr(send, "T", zf__attr_type(k->wire)) ||
        !s_sendrecv_attrs(send, c, k)) {
        free(from);
        zf__node_free(send);
        return NULL;
    }
    if (!zf__node_add_input(send, from)) {
        zf__node_free(send);
        return NULL;
    }
    return zf__pctx_push(c, k->sd, send) ? send : NULL;
}

/* The destination side: _Recv [cast back | Identity for control]. Returns
 * the recv; *read is the node the destination reads. v is the destination
 * node (-1: a control loop's, on a CPU). */
static Tensorflow__NodeDef *s_recv_side(zf__pctx_t *c, const s_cut_t *k, int v, const char **read)
{
    const char *dev = c->devs[k->dd].name;
    bool host =
        !k->control && !c->devs[k->dd].cpu && v >= 0 && zf__pctx_in_host(c, v, k->e->dst_port);
    Tensorflow__NodeDef *recv =
        zf__node_new(zf__pctx_new_name(c, k->src, ""), host ? "_HostRecv" : "_Recv", dev);
    bool ok = recv && s_sendrecv_attrs(recv, c, k) &&
              zf__node_add_attr(recv, "tensor_type", zf__attr_type(k->wire));
    if (!ok) {
        zf__node_free(recv);
        return NULL;
    }
    if (!zf__pctx_push(c, k->dd, recv)) return NULL;
    *read = recv->name;
    if (k->wire != k->dtype)
        return s_cast(c, k, k->dd, host, recv->name, k->wire, k->dtype, read) ? recv : NULL;
    if (!k->control) return recv;
    Tensorflow__NodeDef *id = zf__node_new(zf__pctx_new_name(c, k->src, ""), "Identity", dev);
    ok = id && zf__node_add_attr(id, "T", zf__attr_type(ZF_FLOAT)) &&
         zf__node_add_input(id, strdup(recv->name));
    if (!ok) {
        zf__node_free(id);
        return NULL;
    }
    *read = id->name;
    return zf__pctx_push(c, k->dd, id) ? recv : NULL;
}

/* The dtype the destination reads: its input's declared type, else the
 * source's output type. */
static zf_status_t s_edge_dtype(zf__pctx_t *c, int v, const zf__pedge_t *e, zf_dtype_t *t)
{
    if (s_type_at(c, v, true, e->dst_port, t) || s_type_at(c, e->src, false, e->src_port, t)) {
        *t = zf_dtype_base(*t);
        return ZF_STATUS_OK;
    }
    return zf_invalid_argument("Cannot partition the edge %s:%d -> %s:%d: its dtype cannot be "
                               "resolved (op '%s' or '%s' is unknown, or their attrs are "
                               "incomplete)",
                               zf__pctx_name(c, e->src), e->src_port, zf__pctx_name(c, v),
                               e->dst_port,
                               zf_graph_node_op(c->g, zf__pruned_origin(&c->pruned, e->src)),
                               zf_graph_node_op(c->g, zf__pruned_origin(&c->pruned, v)));
}

/* Records a new transfer: reference edges are never shared (each read
 * gets its own recv, to be ordered after the reader's other inputs);
 * others are remembered for reuse by later readers. */
static bool s_remember(zf__pctx_t *c, const s_cut_t *k, Tensorflow__NodeDef *recv, const char *read,
                       bool on_host, int rec)
{
    c->parts[c->devs[k->sd].slot].n_send++;
    c->parts[c->devs[k->dd].slot].n_recv++;
    if (!k->control && s_src_is_ref(c, k->e->src, k->e->src_port)) {
        if (!zf__grow((void **)&c->ref_recvs, &c->cap_ref_recvs, c->n_ref_recvs + 1,
                      sizeof *c->ref_recvs))
            return false;
        c->ref_recvs[c->n_ref_recvs++] = recv;
        return true;
    }
    return s_dup_put(c, k->e->src, k->e->src_port, c->devs[k->dd].slot, on_host, read, rec) &&
           s_push_refc(c, read, -1, 0, false);
}

/* Makes k's _Send and _Recv (tensor name `<what>_<src>`), the recv
 * driven by driver inside a loop; *read is what the destination reads. */
static zf_status_t s_transfer(zf__pctx_t *c, s_cut_t *k, int v, const char *what,
                              const char *driver, Tensorflow__NodeDef **recv_out, const char **read)
{
    size_t len = strlen(k->src) + strlen(what) + 2;
    if (!(k->tensor = malloc(len))) return zf_out_of_memory("partition");
    snprintf(k->tensor, len, "%s_%s", what, k->src);
    Tensorflow__NodeDef *send = s_send_side(c, k);
    Tensorflow__NodeDef *recv = send ? s_recv_side(c, k, v, read) : NULL;
    free(k->tensor);
    k->tensor = NULL;
    /* A pair inside one partition: the recv must not be scheduled before the send. */
    bool ok = recv &&
              (c->devs[k->sd].slot != c->devs[k->dd].slot
                   ? !driver || zf__node_add_input(recv, zf__input_string(driver, ZF_CONTROL_PORT))
                   : zf__node_add_input(recv, zf__input_string(send->name, ZF_CONTROL_PORT)));
    *recv_out = recv;
    return ok ? ZF_STATUS_OK : zf_out_of_memory("partition");
}

static zf_status_t s_cut(zf__pctx_t *c, int v, const zf__pedge_t *e, bool on_host)
{
    s_cut_t k = {e,
                 c->node_dev[e->src],
                 c->node_dev[v],
                 zf__pctx_name(c, e->src),
                 e->dst_port == ZF_CONTROL_PORT,
                 ZF_FLOAT,
                 ZF_FLOAT,
                 NULL};
    const char *driver = NULL;
    if (c->frame && c->devs[k.sd].slot != c->devs[k.dd].slot)
        ZF_TRY(zf__pctx_loop_driver(c, e->src, k.dd, &driver));
    if (!k.control) ZF_TRY(s_edge_dtype(c, v, e, &k.dtype));
    /* Only transfers between devices are cast (a same-device pair is not). */
    bool cast = c->opts->bfloat16_sendrecv && !k.control && k.dtype == ZF_FLOAT && k.sd != k.dd;
    k.wire = cast ? ZF_BFLOAT16 : k.dtype;
    char what[24];
    snprintf(what, sizeof what, "edge_%d", e->id);
    const char *read = NULL;
    Tensorflow__NodeDef *recv = NULL;
    ZF_TRY(s_transfer(c, &k, v, what, driver, &recv, &read));
    int rec = -1;
    bool ok = (!c->asap || zf__pctx_note_recv(c, recv, v, e->src, k.sd, k.dd, &rec)) &&
              s_remember(c, &k, recv, read, on_host, rec) &&
              s_push_input(c, read, k.control ? ZF_CONTROL_PORT : 0);
    return ok ? ZF_STATUS_OK : zf_out_of_memory("partition");
}

zf_status_t zf__pctx_cut_pred(zf__pctx_t *c, int src, int dev, const char *driver,
                              const char **read)
{
    int slot = c->devs[dev].slot;
    const zf__dup_slot_t *found = s_dup_get(c, src, 0, slot, true);
    if (found) {
        *read = found->name;
        return ZF_STATUS_OK;
    }
    zf__pedge_t e = {src, 0, 1, -1};
    s_cut_t k = {&e, c->node_dev[src], dev, zf__pctx_name(c, src), false, ZF_BOOL, ZF_BOOL, NULL};
    Tensorflow__NodeDef *recv = NULL;
    ZF_TRY(s_transfer(c, &k, -1, "loop_pred", driver, &recv, read));
    c->parts[c->devs[k.sd].slot].n_send++;
    c->parts[slot].n_recv++;
    return s_dup_put(c, src, 0, slot, true, *read, -1) ? ZF_STATUS_OK
                                                       : zf_out_of_memory("partition");
}

zf_status_t zf__pctx_input(zf__pctx_t *c, int v, const zf__pedge_t *e)
{
    int sd = c->node_dev[e->src], dd = c->node_dev[v];
    const zf__pdev_t *sdev = &c->devs[sd], *ddev = &c->devs[dd];
    bool control = e->dst_port == ZF_CONTROL_PORT;
    /* Same device, different memory types: still a send/recv pair. */
    bool pair = !control && sd == dd && !sdev->cpu &&
                zf__pctx_out_host(c, e->src, e->src_port) != zf__pctx_in_host(c, v, e->dst_port);
    const char *src = zf__pctx_name(c, e->src);
    if (sdev->slot == ddev->slot && !pair) {
        bool ok =
            s_push_input(c, src, e->src_port) && s_push_refc(c, src, e->src, e->src_port, !control);
        return ok ? ZF_STATUS_OK : zf_out_of_memory("partition");
    }
    bool on_host = ddev->cpu || (!control && zf__pctx_in_host(c, v, e->dst_port));
    const zf__dup_slot_t *found = s_dup_get(c, e->src, e->src_port, ddev->slot, on_host);
    if (found) {
        if (c->asap) zf__pctx_note_reader(c, found->rec, v);
        bool ok = s_push_input(c, found->name, control ? ZF_CONTROL_PORT : 0) &&
                  s_push_refc(c, found->name, -1, 0, false);
        return ok ? ZF_STATUS_OK : zf_out_of_memory("partition");
    }
    return s_cut(c, v, e, on_host);
}
