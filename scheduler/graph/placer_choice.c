/* The devices a colocation group may use — those matching its merged spec
 * whose type has kernels for every member, relaxed by soft placement —
 * computed once per distinct (spec, types) pair; and, when there are none,
 * TensorFlow's explanation of why. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/graph.h"
#include "common/log.h"
#include "common/op_registry.h"
#include "scheduler/graph/placer_internal.h"

#define S_LOG           "placer"
#define S_LIST_MAX      64 /* device names an error lists */
#define S_MEMBERS_MAX   20 /* group members the debug info lists */
#define S_DEBUG_OPS_MAX 32 /* distinct ops the debug info lists */

/* ---- a growable message ---------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
    bool failed;
} s_text_t;

static void s_append(s_text_t *t, const char *fmt, ...) ZF_PRINTF(2, 3);
static void s_append(s_text_t *t, const char *fmt, ...)
{
    if (t->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || t->len + (size_t)n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (n >= 0 && t->len + (size_t)n + 1 > cap) cap *= 2;
        char *buf = n < 0 ? NULL : realloc(t->buf, cap);
        if (!buf) {
            t->failed = true;
            return;
        }
        t->buf = buf;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static const char *s_text(const s_text_t *t)
{
    return t->buf && !t->failed ? t->buf : "";
}

/* ---- the device list errors show -------------------------------------------- */

static int s_strcmp_p(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *zf__placer_device_list(const zf__placer_t *p)
{
    const char **names = malloc((size_t)p->n_devices * sizeof *names);
    if (!names) return NULL;
    for (int d = 0; d < p->n_devices; d++) names[d] = p->names[d];
    qsort(names, (size_t)p->n_devices, sizeof *names, s_strcmp_p);
    s_text_t t = {0};
    for (int d = 0; d < p->n_devices && d < S_LIST_MAX; d++)
        s_append(&t, "%s%s", d ? ", " : "", names[d]);
    if (p->n_devices > S_LIST_MAX) s_append(&t, ", ... (%d more)", p->n_devices - S_LIST_MAX);
    free(names);
    if (t.failed) free(t.buf);
    return t.failed ? NULL : t.buf;
}

/* ---- debug info ---------------------------------------------------------------- */

static void s_debug_ops(zf__placer_t *p, s_text_t *t, const int *members, int n)
{
    const char *seen[S_DEBUG_OPS_MAX];
    int n_seen = 0;
    for (int k = 0; k < n && n_seen < S_DEBUG_OPS_MAX; k++) {
        const char *op = zf_graph_node_op(p->g, members[k]);
        int j = 0;
        while (j < n_seen && strcmp(seen[j], op) != 0) j++;
        if (j < n_seen) continue;
        seen[n_seen++] = op;
        s_append(t, "\n%s: ", op);
        const zf_op_def_t *def = zf_graph_op_def(p->g, members[k]);
        for (int o = 0; o < p->n_types; o++)
            if (zf_op_has_kernel(def, p->types[p->type_order[o]]))
                s_append(t, "%s ", p->types[p->type_order[o]]);
    }
}

static void s_debug_members(zf__placer_t *p, s_text_t *t, const int *members, int n)
{
    s_append(t, "\n\nColocation members, user-requested devices, and framework assigned "
                "devices, if any:");
    for (int k = 0; k < n && k < S_MEMBERS_MAX; k++) {
        int m = members[k];
        s_append(t, "\n  %s (%s) %s", zf_graph_node_name(p->g, m), zf_graph_node_op(p->g, m),
                 zf_graph_node_device(p->g, m));
        if (p->nodes[m].node_flags & ZF__NODE_ASSIGNED)
            s_append(t, " framework assigned device=%s", p->opts.assigned[m]);
    }
    if (n > S_MEMBERS_MAX) s_append(t, "\n  ... and %d more", n - S_MEMBERS_MAX);
    s_append(t, "\n");
}

zf_status_t zf__placer_debug_info(zf__placer_t *p, zf_status_t s, int root)
{
    int *members = malloc((size_t)p->n * sizeof *members + 1);
    if (!members) return s;
    int n = 0;
    for (int k = 0; k < p->n; k++)
        if (zf__placer_find(p, p->order[k]) == root) members[n++] = p->order[k];
    s_text_t t = {0};
    s_append(&t,
             "%s\nColocation Debug Info:\nColocation group had the following types and "
             "supported devices: ",
             zf_status_msg(&s));
    s_debug_ops(p, &t, members, n);
    s_debug_members(p, &t, members, n);
    free(members);
    if (!t.failed) {
        zf_status_t out = zf_status_new(s.code, "%s", s_text(&t));
        zf_status_clear(&s);
        s = out;
    }
    free(t.buf);
    return s;
}

/* ---- why no device ---------------------------------------------------------------- */

static bool s_any_match(const zf__placer_t *p, const zf_device_name_t *spec)
{
    for (int d = 0; d < p->n_devices; d++)
        if (zf_device_name_matches(spec, &p->devices[d].name)) return true;
    return false;
}

/* The node's own spec equals the group's: the request itself cannot be met. */
static zf_status_t s_own_spec_unmet(zf__placer_t *p, int node, const zf_device_name_t *spec,
                                    const char *list, bool *debug)
{
    const char *req = zf_graph_node_device(p->g, node);
    *debug = s_any_match(p, spec);
    if (!*debug) {
        zf_device_name_t task = *spec;
        task.has_type = task.has_id = false;
        if (!zf_device_name_is_empty(&task) && !s_any_match(p, &task))
            return zf_invalid_argument("Could not satisfy explicit device specification '%s' "
                                       "because no devices matching that specification are "
                                       "registered in this process; available devices: %s",
                                       req, list);
        return zf_invalid_argument("%s was explicitly assigned to %s but available devices are [ "
                                   "%s ]. Make sure the device specification refers to a valid "
                                   "device.",
                                   zf_graph_node_name(p->g, node), req, list);
    }
    if (spec->has_type)
        return zf_invalid_argument("Could not satisfy explicit device specification '%s' because "
                                   "no supported kernel for %s devices is available.",
                                   req, spec->type);
    return zf_invalid_argument("Could not satisfy explicit device specification '%s' because no "
                               "device matching it supports the node and the nodes colocated "
                               "with it.",
                               req);
}

static zf_status_t s_unsatisfiable(zf__placer_t *p, int node, int root)
{
    int own = -1, group = p->nodes[root].spec;
    zf_status_t s = zf__placer_node_spec(p, node, &own);
    if (!zf_ok(s)) return s;
    char *list = zf__placer_device_list(p);
    char spec[ZF_DEVICE_NAME_MAX];
    bool debug = true;
    if (group < 0)
        s = zf_invalid_argument("Node had no OpKernel registered to support this operation: "
                                "Operation was %s",
                                zf_graph_node_op(p->g, node));
    else if (own >= 0 && zf_device_name_equal(&p->specs[own], &p->specs[group]))
        s = s_own_spec_unmet(p, node, &p->specs[own], list ? list : "", &debug);
    else
        s = zf_invalid_argument("Could not satisfy explicit device specification '%s' because the "
                                "node %s was colocated with a group of nodes that required "
                                "incompatible device '%s'. All available devices [%s].",
                                zf_graph_node_device(p->g, node), zf_graph_node_name(p->g, node),
                                zf_device_name_format(&p->specs[group], spec, sizeof spec),
                                list ? list : "");
    free(list);
    if (debug) s = zf__placer_debug_info(p, s, root);
    return zf_status_prefix(s, "Cannot assign a device for operation %s",
                            zf_graph_node_name(p->g, node));
}

/* ---- the choice cache ----------------------------------------------------------------- */

static uint64_t s_key(int spec, uint32_t types)
{
    return ((uint64_t)(uint32_t)(spec + 2) << 32) | types; /* never 0: 0 marks empty slots */
}

/* splitmix64's finaliser: every key bit reaches the low bits. */
static size_t s_slot(uint64_t key, size_t cap)
{
    key = (key ^ (key >> 30)) * 0xBF58476D1CE4E5B9ull;
    key = (key ^ (key >> 27)) * 0x94D049BB133111EBull;
    return (size_t)(key ^ (key >> 31)) & (cap - 1);
}

static int s_lookup(const zf__placer_t *p, uint64_t key)
{
    if (!p->choice_cap) return -1;
    for (size_t h = s_slot(key, p->choice_cap); p->choice_keys[h];
         h = (h + 1) & (p->choice_cap - 1))
        if (p->choice_keys[h] == key) return p->choice_index[h];
    return -1;
}

static zf_status_t s_grow_table(zf__placer_t *p)
{
    size_t cap = p->choice_cap ? p->choice_cap * 2 : 64;
    uint64_t *keys = calloc(cap, sizeof *keys);
    int *index = malloc(cap * sizeof *index);
    if (!keys || !index) {
        free(keys);
        free(index);
        return zf_out_of_memory("placer choices");
    }
    for (size_t i = 0; i < p->choice_cap; i++) {
        if (!p->choice_keys[i]) continue;
        size_t h = s_slot(p->choice_keys[i], cap);
        while (keys[h]) h = (h + 1) & (cap - 1);
        keys[h] = p->choice_keys[i];
        index[h] = p->choice_index[i];
    }
    free(p->choice_keys);
    free(p->choice_index);
    p->choice_keys = keys;
    p->choice_index = index;
    p->choice_cap = cap;
    return ZF_STATUS_OK;
}

static zf_status_t s_insert(zf__placer_t *p, uint64_t key, const zf__placer_choice_t *c, int *index)
{
    if (4 * (p->n_choices_keys + 1) > 3 * p->choice_cap) ZF_TRY(s_grow_table(p));
    if (p->n_choices == p->cap_choices) {
        int cap = p->cap_choices ? p->cap_choices * 2 : 16;
        zf__placer_choice_t *grown = realloc(p->choices, (size_t)cap * sizeof *grown);
        if (!grown) return zf_out_of_memory("placer choices");
        p->choices = grown;
        p->cap_choices = cap;
    }
    *index = p->n_choices;
    p->choices[p->n_choices++] = *c;
    size_t h = s_slot(key, p->choice_cap);
    while (p->choice_keys[h]) h = (h + 1) & (p->choice_cap - 1);
    p->choice_keys[h] = key;
    p->choice_index[h] = *index;
    p->n_choices_keys++;
    return ZF_STATUS_OK;
}

/* ---- computing a choice ----------------------------------------------------------------- */

bool zf__placer_choice_allows(const zf__placer_t *p, const zf__placer_choice_t *c, int device)
{
    if (!(c->types & (1u << p->dev_type[device]))) return false;
    return c->spec < 0 || zf_device_name_matches(&p->specs[c->spec], &p->devices[device].name);
}

/* One pass over the devices in placement order. */
static void s_scan(const zf__placer_t *p, zf__placer_choice_t *c)
{
    c->first = c->balanced = -1;
    for (int k = 0; k < p->n_devices; k++) {
        int d = p->sorted[k];
        if (!zf__placer_choice_allows(p, c, d)) continue;
        if (c->first < 0)
            c->first = c->balanced = d;
        else if (p->dev_type[d] == p->dev_type[c->first] &&
                 p->devices[d].load < p->devices[c->balanced].load)
            c->balanced = d;
    }
}

/* Soft placement: drop the type and id the group asked for. */
static zf_status_t s_soften(zf__placer_t *p, int node, zf__placer_choice_t *c)
{
    zf_device_name_t soft = p->specs[c->spec];
    soft.has_type = soft.has_id = false;
    int id = zf__placer_spec_add(p, &soft);
    if (id < 0) return zf_out_of_memory("placer specs");
    int asked = c->spec;
    c->spec = id;
    s_scan(p, c);
    if (c->first < 0) return ZF_STATUS_OK;
    c->soft = true;
    char spec[ZF_DEVICE_NAME_MAX];
    int chosen = p->opts.mode == ZF_PLACE_FIRST ? c->first : c->balanced;
    zf_log_warn(S_LOG,
                "soft placement: no device matching '%s' has kernels for node %s and the nodes "
                "colocated with it; falling back to the best valid device, %s",
                zf_device_name_format(&p->specs[asked], spec, sizeof spec),
                zf_graph_node_name(p->g, node), p->names[chosen]);
    return ZF_STATUS_OK;
}

zf_status_t zf__placer_choice(zf__placer_t *p, int node, int root, const zf__placer_choice_t **out)
{
    *out = NULL;
    uint64_t key = s_key(p->nodes[root].spec, p->nodes[root].types);
    int index = s_lookup(p, key);
    if (index < 0) {
        zf__placer_choice_t c = {p->nodes[root].spec, p->nodes[root].types, -1, -1, false};
        s_scan(p, &c);
        if (c.first < 0 && c.spec >= 0 && p->opts.allow_soft_placement)
            ZF_TRY(s_soften(p, node, &c));
        if (c.first < 0) return s_unsatisfiable(p, node, root);
        ZF_TRY(s_insert(p, key, &c, &index));
    }
    *out = &p->choices[index];
    return ZF_STATUS_OK;
}
