/* The partition graph optimizer (graph_optimizer.h): constant folding on
 * the CPU kernels, common subexpression elimination and Identity removal,
 * over a table of the graph's nodes and parsed inputs. */
#include "executor/engine/graph_optimizer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "common/op_registry.h"
#include "common/strmap.h"
#include "common/tensor_proto.h"
#include "executor/devices/device.h"
#include "executor/kernels/kernel.h"

#define S_CPU_NAME "/job:localhost/replica:0/task:0/device:CPU:0"

typedef struct {
    int src;  /* node index */
    int port; /* -1: a control input */
} s_in_t;

typedef struct {
    Tensorflow__GraphDef *gd;
    int n;
    zf_strmap_t *names; /* name -> index */
    s_in_t **in;        /* per node: its parsed inputs (gd->node[i]->n_input of them) */
    int *order;         /* topological, NextIteration back edges left out */
    int n_order;
    int *rep;            /* CSE: the node standing for this one (itself when none) */
    s_in_t *fwd;         /* Identity removal: what the node forwards (src -1: none) */
    zf_tensor_t **value; /* Const nodes without inputs: their value, once read */
    bool *is_const;      /* a Const without inputs (also one made by folding) */
    int *consumers_before;
    int *controls_before; /* of those, control inputs */
    zf_device_t *cpu;     /* for folding, made on first use */
    size_t max_bytes;
    zf_optimizer_stats_t stats;
} s_opt_t;

static unsigned s_flags(const Tensorflow__NodeDef *nd)
{
    const zf_op_def_t *def = zf_op_lookup(nd->op);
    return def ? zf_op_flags(def) : ZF_OP_UNSUPPORTED;
}

/* ---- the table --------------------------------------------------------------- */

/* "name", "name:3" or "^name" -> index and port (-1: control); false when
 * it is malformed or names no node. */
static bool s_parse_input(const s_opt_t *o, const char *text, s_in_t *out)
{
    const char *name = NULL;
    size_t len = 0;
    int port = 0;
    zf_status_t s = zf_tensor_name_parse(text, &name, &len, &port);
    bool ok = zf_ok(s);
    zf_status_clear(&s);
    uintptr_t v = 0;
    if (!ok || !zf_strmap_get_n(o->names, name, len, &v)) return false;
    *out = (s_in_t){(int)v, port == ZF_CONTROL_PORT ? -1 : port};
    return true;
}

static bool s_is_back_edge(const s_opt_t *o, s_in_t in)
{
    return zf_op_is(o->gd->node[in.src]->op, "NextIteration");
}

/* Kahn's order; nodes on a cycle without a NextIteration are left out. */
static zf_status_t s_order(s_opt_t *o)
{
    int *pending = calloc((size_t)o->n + 1, sizeof *pending);
    int *out_count = calloc((size_t)o->n + 1, sizeof *out_count);
    int *out_start = calloc((size_t)o->n + 2, sizeof *out_start);
    o->order = malloc(((size_t)o->n + 1) * sizeof *o->order);
    if (!pending || !out_count || !out_start || !o->order) {
        free(pending);
        free(out_count);
        free(out_start);
        return zf_out_of_memory("graph optimizer");
    }
    size_t edges = 0;
    for (int i = 0; i < o->n; i++)
        for (size_t k = 0; k < o->gd->node[i]->n_input; k++)
            if (!s_is_back_edge(o, o->in[i][k])) {
                pending[i]++;
                out_count[o->in[i][k].src]++;
                edges++;
            }
    for (int i = 0; i < o->n; i++) out_start[i + 1] = out_start[i] + out_count[i];
    int *dst = malloc((edges + 1) * sizeof *dst);
    if (!dst) {
        free(pending);
        free(out_count);
        free(out_start);
        return zf_out_of_memory("graph optimizer");
    }
    memset(out_count, 0, (size_t)o->n * sizeof *out_count);
    for (int i = 0; i < o->n; i++)
        for (size_t k = 0; k < o->gd->node[i]->n_input; k++)
            if (!s_is_back_edge(o, o->in[i][k])) {
                int s = o->in[i][k].src;
                dst[out_start[s] + out_count[s]++] = i;
            }
    int head = 0;
    o->n_order = 0;
    for (int i = 0; i < o->n; i++)
        if (pending[i] == 0) o->order[o->n_order++] = i;
    while (head < o->n_order) {
        int v = o->order[head++];
        for (int e = out_start[v]; e < out_start[v + 1]; e++)
            if (--pending[dst[e]] == 0) o->order[o->n_order++] = dst[e];
    }
    free(dst);
    free(pending);
    free(out_count);
    free(out_start);
    return ZF_STATUS_OK;
}

/* Builds the table; *readable false (and OK) when an input names no node. */
static zf_status_t s_table(s_opt_t *o, bool *readable)
{
    *readable = false;
    size_t n = (size_t)o->n + 1;
    o->names = zf_strmap_new(n, 0);
    o->in = calloc(n, sizeof *o->in);
    o->rep = malloc(n * sizeof *o->rep);
    o->fwd = malloc(n * sizeof *o->fwd);
    o->value = calloc(n, sizeof *o->value);
    o->is_const = calloc(n, sizeof *o->is_const);
    o->consumers_before = calloc(n, sizeof *o->consumers_before);
    o->controls_before = calloc(n, sizeof *o->controls_before);
    if (!o->names || !o->in || !o->rep || !o->fwd || !o->value || !o->is_const ||
        !o->consumers_before || !o->controls_before)
        return zf_out_of_memory("graph optimizer");
    for (int i = 0; i < o->n; i++) {
        o->rep[i] = i;
        o->fwd[i] = (s_in_t){-1, 0};
        const Tensorflow__NodeDef *nd = o->gd->node[i];
        if (zf_strmap_insert(o->names, nd->name, (uintptr_t)i, NULL) != 0) return ZF_STATUS_OK;
    }
    for (int i = 0; i < o->n; i++) {
        const Tensorflow__NodeDef *nd = o->gd->node[i];
        o->in[i] = malloc((nd->n_input + 1) * sizeof *o->in[i]);
        if (!o->in[i]) return zf_out_of_memory("graph optimizer");
        for (size_t k = 0; k < nd->n_input; k++) {
            if (!s_parse_input(o, nd->input[k], &o->in[i][k])) return ZF_STATUS_OK;
            o->consumers_before[o->in[i][k].src]++;
            if (o->in[i][k].port < 0) o->controls_before[o->in[i][k].src]++;
        }
        o->is_const[i] = strcmp(nd->op, "Const") == 0 && nd->n_input == 0;
    }
    ZF_TRY(s_order(o));
    *readable = true;
    return ZF_STATUS_OK;
}

static void s_table_free(s_opt_t *o)
{
    for (int i = 0; i < o->n; i++) {
        if (o->in) free(o->in[i]);
        if (o->value) zf_tensor_unref(&o->value[i]);
    }
    zf_strmap_destroy(&o->names);
    free(o->in);
    free(o->order);
    free(o->rep);
    free(o->fwd);
    free(o->value);
    free(o->is_const);
    free(o->consumers_before);
    free(o->controls_before);
    zf_device_destroy(&o->cpu);
}

/* ---- constant folding ------------------------------------------------------------ */

static zf_status_t s_const_value(s_opt_t *o, int i, zf_tensor_t **out)
{
    if (!o->value[i]) {
        const Tensorflow__AttrValue *v = zf_node_attr(o->gd->node[i], "value");
        if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_TENSOR)
            return zf_invalid_argument("Const %s has no value", o->gd->node[i]->name);
        ZF_TRY(zf_tensor_from_proto(v->tensor, &o->value[i]));
    }
    *out = o->value[i];
    return ZF_STATUS_OK;
}

static bool s_foldable(const s_opt_t *o, int i)
{
    const Tensorflow__NodeDef *nd = o->gd->node[i];
    if (nd->n_input == 0 || o->is_const[i]) return false;
    if (s_flags(nd) & (ZF_OP_STATEFUL | ZF_OP_SOURCE | ZF_OP_CONTROL_FLOW | ZF_OP_SEND_RECV |
                       ZF_OP_FUNCTIONAL | ZF_OP_UNSUPPORTED))
        return false;
    for (size_t k = 0; k < nd->n_input; k++)
        if (o->in[i][k].port < 0 || !o->is_const[o->in[i][k].src]) return false;
    const zf_op_def_t *def = zf_op_lookup(nd->op);
    int n_out = 0;
    zf_status_t s = zf_op_output_types(def, nd, NULL, 0, &n_out);
    bool one = zf_ok(s) && n_out == 1;
    zf_status_clear(&s);
    return one;
}

/* Runs node i's CPU kernel on its constant inputs; *out NULL when it cannot
 * (no synchronous CPU kernel, an error: the step will say it). */
static zf_status_t s_evaluate(s_opt_t *o, int i, zf_tensor_t **out)
{
    *out = NULL;
    const Tensorflow__NodeDef *nd = o->gd->node[i];
    const zf_kernel_t *k = NULL;
    zf_status_t s = zf_kernel_find("CPU", nd, &k);
    if (!zf_ok(s) || !k->compute || (k->flags & ZF_KERNEL_ASYNC)) {
        zf_status_clear(&s);
        return ZF_STATUS_OK;
    }
    if (!o->cpu) ZF_TRY(zf_device_cpu_new(S_CPU_NAME, 1, &o->cpu));
    zf_tensor_t *inputs[16], **ins = nd->n_input <= 16 ? inputs : malloc(nd->n_input * sizeof *ins);
    if (!ins) return zf_out_of_memory("graph optimizer");
    for (size_t j = 0; zf_ok(s) && j < nd->n_input; j++)
        s = s_const_value(o, o->in[i][j].src, &ins[j]);
    void *state = NULL;
    if (zf_ok(s) && k->create) s = k->create(nd, &state);
    zf_tensor_t *result = NULL;
    bool dead = false;
    if (zf_ok(s)) {
        zf_kernel_ctx_t ctx = {.node = nd,
                               .state = state,
                               .device = o->cpu,
                               .inputs = ins,
                               .num_inputs = (int)nd->n_input,
                               .outputs = &result,
                               .num_outputs = 1,
                               .is_dead_outputs = &dead};
        s = k->compute(&ctx);
    }
    if (k->destroy && state) k->destroy(state);
    if (ins != inputs) free(ins);
    if (!zf_ok(s) || !result || dead || zf_tensor_nbytes(result) > o->max_bytes) {
        zf_status_clear(&s);
        zf_tensor_unref(&result);
        return ZF_STATUS_OK;
    }
    *out = result;
    return ZF_STATUS_OK;
}

static Tensorflow__NodeDef__AttrEntry *s_attr_entry(const char *key)
{
    Tensorflow__NodeDef__AttrEntry *e = malloc(sizeof *e);
    Tensorflow__AttrValue *v = malloc(sizeof *v);
    char *k = strdup(key);
    if (!e || !v || !k) {
        free(e);
        free(v);
        free(k);
        return NULL;
    }
    tensorflow__node_def__attr_entry__init(e);
    tensorflow__attr_value__init(v);
    e->key = k;
    e->value = v;
    return e;
}

/* Node i becomes Const value (taken), keeping its name and device. */
static zf_status_t s_make_const(s_opt_t *o, int i, zf_tensor_t *value)
{
    Tensorflow__NodeDef *nd = o->gd->node[i];
    Tensorflow__TensorProto *proto = NULL;
    zf_status_t s = zf_tensor_to_proto(value, &proto, true);
    Tensorflow__NodeDef__AttrEntry **attrs = zf_ok(s) ? malloc(2 * sizeof *attrs) : NULL;
    Tensorflow__NodeDef__AttrEntry *dtype = attrs ? s_attr_entry("dtype") : NULL;
    Tensorflow__NodeDef__AttrEntry *val = dtype ? s_attr_entry("value") : NULL;
    char *op = val ? strdup("Const") : NULL;
    if (!op) {
        if (proto) protobuf_c_message_free_unpacked(&proto->base, NULL);
        if (dtype) protobuf_c_message_free_unpacked(&dtype->base, NULL);
        if (val) protobuf_c_message_free_unpacked(&val->base, NULL);
        free(attrs);
        zf_tensor_unref(&value);
        return zf_ok(s) ? zf_out_of_memory("graph optimizer") : s;
    }
    dtype->value->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    dtype->value->type = (Tensorflow__DataType)zf_tensor_dtype(value);
    val->value->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    val->value->tensor = proto;
    attrs[0] = dtype;
    attrs[1] = val;
    for (size_t a = 0; a < nd->n_attr; a++)
        protobuf_c_message_free_unpacked(&nd->attr[a]->base, NULL);
    free(nd->attr);
    nd->attr = attrs;
    nd->n_attr = 2;
    for (size_t k = 0; k < nd->n_input; k++) free(nd->input[k]);
    free(nd->input);
    nd->input = NULL;
    nd->n_input = 0;
    free(nd->op);
    nd->op = op;
    o->value[i] = value;
    o->is_const[i] = true;
    o->stats.folded++;
    return ZF_STATUS_OK;
}

static zf_status_t s_fold(s_opt_t *o)
{
    for (int k = 0; k < o->n_order; k++) {
        int i = o->order[k];
        if (!s_foldable(o, i)) continue;
        zf_tensor_t *value = NULL;
        ZF_TRY(s_evaluate(o, i, &value));
        if (value) ZF_TRY(s_make_const(o, i, value));
    }
    return ZF_STATUS_OK;
}

/* ---- rewiring ------------------------------------------------------------------ */

/* Where input in ends up once duplicates and forwarded nodes are gone. */
static s_in_t s_resolve(const s_opt_t *o, s_in_t in)
{
    for (int guard = 0; guard < o->n + 1; guard++) {
        in.src = o->rep[in.src];
        s_in_t f = o->fwd[in.src];
        if (f.src < 0) break;
        in = (s_in_t){f.src, in.port < 0 ? -1 : f.port};
    }
    return in;
}

/* ---- common subexpressions ------------------------------------------------------- */

static bool s_cse_candidate(const s_opt_t *o, int i)
{
    const Tensorflow__NodeDef *nd = o->gd->node[i];
    unsigned f = s_flags(nd);
    if (f & (ZF_OP_STATEFUL | ZF_OP_CONTROL_FLOW | ZF_OP_SEND_RECV | ZF_OP_FUNCTIONAL |
             ZF_OP_UNSUPPORTED))
        return false;
    return !(f & ZF_OP_SOURCE) || strcmp(nd->op, "Const") == 0;
}

typedef struct {
    char *data;
    size_t len, cap;
} s_key_t;

static bool s_key_add(s_key_t *k, const void *bytes, size_t n)
{
    if (k->len + n > k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 256;
        while (cap < k->len + n) cap *= 2;
        char *d = realloc(k->data, cap);
        if (!d) return false;
        k->data = d;
        k->cap = cap;
    }
    memcpy(k->data + k->len, bytes, n);
    k->len += n;
    return true;
}

static int s_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int s_cmp_attr(const void *a, const void *b)
{
    const Tensorflow__NodeDef__AttrEntry *x = *(Tensorflow__NodeDef__AttrEntry *const *)a;
    const Tensorflow__NodeDef__AttrEntry *y = *(Tensorflow__NodeDef__AttrEntry *const *)b;
    return strcmp(x->key, y->key);
}

/* The node's identity for CSE: op, device, resolved inputs (control inputs
 * sorted) and attrs (sorted, serialized). */
static bool s_cse_key(const s_opt_t *o, int i, s_key_t *k)
{
    const Tensorflow__NodeDef *nd = o->gd->node[i];
    k->len = 0;
    bool ok = s_key_add(k, nd->op, strlen(nd->op) + 1) &&
              s_key_add(k, nd->device ? nd->device : "", strlen(nd->device ? nd->device : "") + 1);
    int *ctrl = malloc((nd->n_input + 1) * sizeof *ctrl);
    size_t n_ctrl = 0;
    ok = ok && ctrl;
    for (size_t j = 0; ok && j < nd->n_input; j++) {
        s_in_t in = s_resolve(o, o->in[i][j]);
        if (in.port < 0)
            ctrl[n_ctrl++] = in.src;
        else
            ok = s_key_add(k, &in, sizeof in);
    }
    if (ok && n_ctrl > 1) { /* as a set: sorted, each once */
        qsort(ctrl, n_ctrl, sizeof *ctrl, s_cmp_int);
        size_t u = 1;
        for (size_t j = 1; j < n_ctrl; j++)
            if (ctrl[j] != ctrl[u - 1]) ctrl[u++] = ctrl[j];
        n_ctrl = u;
    }
    ok = ok && s_key_add(k, "|", 1) && (n_ctrl == 0 || s_key_add(k, ctrl, n_ctrl * sizeof *ctrl));
    free(ctrl);
    Tensorflow__NodeDef__AttrEntry **attrs = ok ? malloc((nd->n_attr + 1) * sizeof *attrs) : NULL;
    if (!attrs) return false;
    if (nd->n_attr) memcpy(attrs, nd->attr, nd->n_attr * sizeof *attrs);
    qsort(attrs, nd->n_attr, sizeof *attrs, s_cmp_attr);
    for (size_t a = 0; ok && a < nd->n_attr; a++) {
        size_t size =
            attrs[a]->value ? protobuf_c_message_get_packed_size(&attrs[a]->value->base) : 0;
        uint8_t *buf = malloc(size + 1);
        ok = buf && s_key_add(k, attrs[a]->key, strlen(attrs[a]->key) + 1);
        if (ok && size) protobuf_c_message_pack(&attrs[a]->value->base, buf);
        ok = ok && s_key_add(k, &size, sizeof size) && s_key_add(k, buf, size);
        free(buf);
    }
    free(attrs);
    return ok;
}

static zf_status_t s_cse(s_opt_t *o)
{
    zf_strmap_t *seen = zf_strmap_new((size_t)o->n_order, ZF_STRMAP_OWN_KEYS);
    if (!seen) return zf_out_of_memory("graph optimizer");
    s_key_t k = {0};
    zf_status_t s = ZF_STATUS_OK;
    for (int x = 0; x < o->n_order && zf_ok(s); x++) {
        int i = o->order[x];
        if (!s_cse_candidate(o, i)) continue;
        if (!s_cse_key(o, i, &k)) {
            s = zf_out_of_memory("graph optimizer");
            break;
        }
        uintptr_t first = 0;
        int r = zf_strmap_insert_n(seen, k.data, k.len, (uintptr_t)i, &first);
        if (r == 0) continue;
        if (r != -EEXIST) {
            s = zf_out_of_memory("graph optimizer");
            break;
        }
        o->rep[i] = (int)first;
        o->stats.merged++;
    }
    free(k.data);
    zf_strmap_destroy(&seen);
    return s;
}

/* ---- Identity removal -------------------------------------------------------------- */

static bool s_forwardable(const s_opt_t *o, int i)
{
    const Tensorflow__NodeDef *nd = o->gd->node[i];
    if (o->rep[i] != i || o->consumers_before[i] == 0 || nd->n_input != 1) return false;
    if (strcmp(nd->op, "Identity") != 0 && strcmp(nd->op, "Snapshot") != 0 &&
        strcmp(nd->op, "StopGradient") != 0 && strcmp(nd->op, "PreventGradient") != 0)
        return false;
    s_in_t in = s_resolve(o, o->in[i][0]);
    if (in.port < 0) return false;
    const Tensorflow__NodeDef *src = o->gd->node[in.src];
    /* Read from a Switch (a branch pivot) or a _Recv, the Identity is what
     * turns a dead value into a dead node, so that a control edge from it
     * carries the deadness: with control consumers it must stay. */
    if ((s_flags(src) & (ZF_OP_CONTROL_FLOW | ZF_OP_SEND_RECV)) && o->controls_before[i] > 0)
        return false;
    const zf_op_def_t *def = zf_op_lookup(src->op);
    zf_dtype_t types[64];
    int n = 0;
    zf_status_t s = zf_op_output_types(def, src, types, 64, &n);
    bool plain = zf_ok(s) && in.port < n && n <= 64 && !zf_dtype_is_ref(types[in.port]);
    zf_status_clear(&s);
    return plain;
}

static void s_forward(s_opt_t *o)
{
    for (int x = 0; x < o->n_order; x++) {
        int i = o->order[x];
        if (!s_forwardable(o, i)) continue;
        o->fwd[i] = s_resolve(o, o->in[i][0]);
        o->stats.forwarded++;
    }
}

/* ---- the rewritten graph ----------------------------------------------------------- */

static char *s_input_text(const s_opt_t *o, s_in_t in)
{
    const char *name = o->gd->node[in.src]->name;
    size_t size = strlen(name) + 16;
    char *text = malloc(size);
    if (!text) return NULL;
    if (in.port < 0)
        snprintf(text, size, "^%s", name);
    else if (in.port == 0)
        snprintf(text, size, "%s", name);
    else
        snprintf(text, size, "%s:%d", name, in.port);
    return text;
}

/* Points every input at what it resolves to. */
static zf_status_t s_rewire(s_opt_t *o)
{
    for (int i = 0; i < o->n; i++) {
        Tensorflow__NodeDef *nd = o->gd->node[i];
        for (size_t k = 0; k < nd->n_input; k++) {
            s_in_t to = s_resolve(o, o->in[i][k]);
            if (to.src == o->in[i][k].src && to.port == o->in[i][k].port) continue;
            char *text = s_input_text(o, to);
            if (!text) return zf_out_of_memory("graph optimizer");
            free(nd->input[k]);
            nd->input[k] = text;
            o->in[i][k] = to;
        }
    }
    return ZF_STATUS_OK;
}

/* Drops the nodes the rewrites left without consumers: duplicates,
 * forwarded nodes, and Consts whose consumers were folded. */
static zf_status_t s_sweep(s_opt_t *o)
{
    int *uses = calloc((size_t)o->n + 1, sizeof *uses);
    bool *gone = calloc((size_t)o->n + 1, sizeof *gone);
    if (!uses || !gone) {
        free(uses);
        free(gone);
        return zf_out_of_memory("graph optimizer");
    }
    for (int i = 0; i < o->n; i++) gone[i] = o->rep[i] != i || o->fwd[i].src >= 0;
    for (int i = 0; i < o->n; i++)
        if (!gone[i])
            for (size_t k = 0; k < o->gd->node[i]->n_input; k++) uses[o->in[i][k].src]++;
    size_t kept = 0;
    for (int i = 0; i < o->n; i++) {
        Tensorflow__NodeDef *nd = o->gd->node[i];
        bool drop = gone[i] || (o->is_const[i] && uses[i] == 0 && o->consumers_before[i] > 0);
        if (drop) {
            protobuf_c_message_free_unpacked(&nd->base, NULL);
            o->stats.removed++;
        } else {
            o->gd->node[kept++] = nd;
        }
    }
    o->gd->n_node = kept;
    free(uses);
    free(gone);
    return ZF_STATUS_OK;
}

zf_status_t zf_optimize_graph(Tensorflow__GraphDef *gd, const zf_optimizer_options_t *opts,
                              zf_optimizer_stats_t *stats)
{
    if (stats) memset(stats, 0, sizeof *stats);
    if (!gd || (opts && opts->opt_level < ZF_OPT_L1) || gd->n_node == 0 ||
        gd->n_node > INT32_MAX / 2)
        return ZF_STATUS_OK;
    s_opt_t o = {.gd = gd, .n = (int)gd->n_node};
    o.max_bytes =
        opts && opts->max_constant_bytes ? opts->max_constant_bytes : ZF_OPT_MAX_CONSTANT_BYTES;
    bool readable = false;
    zf_status_t s = s_table(&o, &readable);
    if (zf_ok(s) && readable) s = s_fold(&o);
    if (zf_ok(s) && readable) s = s_cse(&o);
    if (zf_ok(s) && readable) s_forward(&o);
    if (zf_ok(s) && readable) s = s_rewire(&o);
    if (zf_ok(s) && readable) s = s_sweep(&o);
    if (stats) *stats = o.stats;
    s_table_free(&o);
    return s;
}
