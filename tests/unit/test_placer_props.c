/* Property tests for scheduler/graph/placer on seeded random graphs: every node
 * placed on a device whose type has a kernel for it, every colocation group
 * on one device, every explicit full spec honoured, the same answer for the
 * same inputs in any device order, and the balanced choice spreading
 * independent graphs over equal devices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/log.h"
#include "placer_test_util.h"

#define S_SEEDS 150
#define S_NODES 120

static uint64_t s_rng;

static uint32_t s_rand(uint32_t n)
{
    s_rng += 0x9E3779B97F4A7C15ull;
    uint64_t z = s_rng;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) % n);
}

/* ---- random graphs -------------------------------------------------------- */

enum { S_FLOAT, S_REF, S_RES, S_OTHER }; /* what a node's output is */

typedef struct {
    int kind[S_NODES];
    bool full_spec[S_NODES]; /* device is a full device name */
    char device[S_NODES][96];
} s_meta_t;

static const char *const s_ops[] = {"Const", "VariableV2", "VarHandleOp",    "Relu",
                                    "AddV2", "Assign",     "ReadVariableOp", "AssignVariableOp",
                                    "Shape", "Identity"};

/* An earlier node with output kind, or -1. */
static int s_pick(const s_meta_t *m, int before, int kind)
{
    for (int tries = 0; tries < 8 && before > 0; tries++) {
        int j = (int)s_rand((uint32_t)before);
        if (m->kind[j] == kind || (kind == S_FLOAT && m->kind[j] == S_REF)) return j;
    }
    return -1;
}

/* Requested devices only on nodes off reference edges, so that no spec is
 * overridden and every full spec must be honoured. Strict graphs (for runs
 * without soft placement) ask less often, and only for types with a kernel. */
static void s_random_device(s_meta_t *m, int i, const char *op, const pt_devs_t *devs, bool strict)
{
    if (s_rand(100) >= (strict ? 6u : 20u)) return;
    static const char *const partial[] = {"/job:a/task:0",     "/job:a/replica:0",
                                          "/device:FakeGPU",   "/device:FakeGPU:*",
                                          "/device:FakeCPU:1", "/cpu:0"};
    const zf_device_name_t *d = &devs->d[s_rand((uint32_t)devs->n)].name;
    if (strict && !zf_op_has_kernel(zf_op_lookup(op), d->type)) return;
    if (s_rand(2)) {
        zf_device_name_format(d, m->device[i], sizeof m->device[i]);
        m->full_spec[i] = true;
        return;
    }
    const char *spec = partial[s_rand(strict ? 2 : 6)];
    snprintf(m->device[i], sizeof m->device[i], "%s", spec);
}

static void s_random_class(int i, char *attrs, size_t size)
{
    size_t used = strlen(attrs);
    if (s_rand(100) >= 12) return;
    int target = (int)s_rand(S_NODES + 4);
    if (target >= S_NODES)
        snprintf(attrs + used, size - used, ";_class=[loc:@ghost%d]", target - S_NODES);
    else
        snprintf(attrs + used, size - used, ";_class=[loc:@n%d,other]", target == i ? 0 : target);
}

static void s_random_node(pt_gb_t *b, s_meta_t *m, int i, const pt_devs_t *devs, bool strict)
{
    char name[16], inputs[64] = "", attrs[128];
    snprintf(name, sizeof name, "n%d", i);
    int op = (int)s_rand(10), a = -1, c = -1;
    if (op == 5) a = s_pick(m, i, S_REF);
    if (op == 6 || op == 7 || op == 9) a = s_pick(m, i, S_RES);
    if (op == 3 || op == 4 || op == 8) a = s_pick(m, i, S_FLOAT);
    if (op == 4 || op == 5 || op == 7) c = s_pick(m, i, S_FLOAT);
    if (op >= 3 && (a < 0 || ((op == 4 || op == 5 || op == 7) && c < 0))) op = a = c = 0;
    if (op >= 3) snprintf(inputs, sizeof inputs, "n%d", a);
    if (op >= 3 && c >= 0 && (op == 4 || op == 5 || op == 7))
        snprintf(inputs + strlen(inputs), sizeof inputs - strlen(inputs), ",n%d", c);
    if (i > 0 && s_rand(10) == 0)
        snprintf(inputs + strlen(inputs), sizeof inputs - strlen(inputs), "%s^n%d",
                 *inputs ? "," : "", (int)s_rand((uint32_t)i));
    m->kind[i] = op == 1 || op == 5   ? S_REF
                 : op == 2 || op == 9 ? S_RES
                 : op == 7 || op == 8 ? S_OTHER /* no output; an int32 shape */
                                      : S_FLOAT;
    bool on_ref_edge = op == 1 || op == 2 || op == 5 || op == 6 || op == 7 || op == 9;
    m->full_spec[i] = false;
    m->device[i][0] = '\0';
    if (!on_ref_edge) s_random_device(m, i, s_ops[op], devs, strict);
    bool t_attr = op >= 3 && op != 6 && op != 7;
    snprintf(attrs, sizeof attrs, "%s=%s", t_attr ? "T" : "dtype", op == 9 ? "resource" : "float");
    s_random_class(i, attrs, sizeof attrs);
    pt_gb_node(b, name, s_ops[op], inputs, m->device[i][0] ? m->device[i] : NULL, attrs);
}

static zf_graph_t *s_random_graph(s_meta_t *m, const pt_devs_t *devs, bool strict)
{
    pt_gb_t b = {0};
    for (int i = 0; i < S_NODES; i++) s_random_node(&b, m, i, devs, strict);
    return pt_gb_graph(&b);
}

/* Every op on FakeCPU; each op on FakeGPU with probability 3/5. */
static void s_random_kernels(void)
{
    pt_reset_registry();
    for (size_t k = 0; k < sizeof s_ops / sizeof s_ops[0]; k++) {
        assert_true(zf_ok(zf_op_register_kernel(s_ops[k], "FakeCPU")));
        if (s_rand(5) < 3) assert_true(zf_ok(zf_op_register_kernel(s_ops[k], "FakeGPU")));
    }
}

/* ---- the groups the graph asks for, computed the simple way --------------- */

static int s_root(int *parent, int i)
{
    while (parent[i] != i) i = parent[i];
    return i;
}

static void s_unite(int *parent, int a, int b)
{
    parent[s_root(parent, a)] = s_root(parent, b);
}

static bool s_bytes_eq(const ProtobufCBinaryData *b, const char *s, size_t len)
{
    return b->len == len && memcmp(b->data, s, len) == 0;
}

/* Whether node j is in the `_class` group named by entry c ("loc:@x"). */
static bool s_in_class(const zf_graph_t *g, int j, const ProtobufCBinaryData *c)
{
    const char *name = zf_graph_node_name(g, j);
    if (c->len < 5) return false;
    if (c->len - 5 == strlen(name) && memcmp(c->data + 5, name, c->len - 5) == 0) return true;
    const Tensorflow__AttrValue *w = zf_node_attr(zf_graph_node_def(g, j), "_class");
    for (size_t q = 0; w && w->list && q < w->list->n_s; q++)
        if (s_bytes_eq(&w->list->s[q], (const char *)c->data, c->len)) return true;
    return false;
}

static void s_expected_groups(const zf_graph_t *g, int *parent)
{
    int n = zf_graph_num_nodes(g);
    for (int i = 0; i < n; i++) parent[i] = i;
    for (int i = 0; i < n; i++) {
        const Tensorflow__NodeDef *nd = zf_graph_node_def(g, i);
        const Tensorflow__AttrValue *v = zf_node_attr(nd, "_class");
        for (size_t k = 0; v && v->list && k < v->list->n_s; k++) {
            const ProtobufCBinaryData *c = &v->list->s[k];
            if (c->len < 5 || memcmp(c->data, "loc:@", 5) != 0) continue;
            for (int j = 0; j < n; j++)
                if (s_in_class(g, j, c)) s_unite(parent, i, j);
        }
        zf_dtype_t types[8];
        int nt = 0;
        assert_true(zf_ok(zf_op_input_types(zf_graph_op_def(g, i), nd, types, 8, &nt)));
        const zf_edge_t *in = NULL;
        zf_graph_in_edges(g, i, &in);
        for (int k = 0; k < zf_graph_num_data_inputs(g, i) && k < nt; k++)
            if (zf_dtype_is_ref((int)types[k]) || types[k] == ZF_RESOURCE)
                s_unite(parent, i, in[k].src);
    }
}

/* ---- properties --------------------------------------------------------------- */

static void s_check_placement(const pt_placed_t *r, const s_meta_t *m)
{
    int n = zf_graph_num_nodes(r->g), parent[S_NODES];
    s_expected_groups(r->g, parent);
    for (int i = 0; i < n; i++) {
        int d = r->assign[i];
        assert_true(d >= 0 && d < r->devs->n);
        assert_true(zf_op_has_kernel(zf_graph_op_def(r->g, i), r->devs->d[d].name.type));
        assert_int_equal(d, r->assign[s_root(parent, i)]);
        if (m->full_spec[i]) {
            char name[ZF_DEVICE_NAME_MAX];
            zf_device_name_format(&r->devs->d[d].name, name, sizeof name);
            assert_string_equal(name, m->device[i]);
        }
    }
}

/* The same graph and device set in another order give the same devices. */
static void s_check_order_independence(const pt_placed_t *r)
{
    pt_devs_t rev = {.n = r->devs->n};
    for (int k = 0; k < rev.n; k++) rev.d[k] = r->devs->d[rev.n - 1 - k];
    int n = zf_graph_num_nodes(r->g);
    int *again = calloc((size_t)n, sizeof *again);
    assert_true(zf_ok(zf_placer_run(r->g, rev.d, rev.n, NULL, again)));
    for (int i = 0; i < n; i++) assert_int_equal(rev.n - 1 - again[i], r->assign[i]);
    free(again);
}

static void test_placer_props_hold_on_random_graphs(void **state)
{
    (void)state;
    pt_devs_t devs;
    pt_devs_fake(&devs, 4);
    int placed = 0;
    for (int seed = 0; seed < S_SEEDS; seed++) {
        s_rng = (uint64_t)seed * 7919u;
        s_random_kernels();
        static s_meta_t m;
        pt_placed_t r = pt_place(s_random_graph(&m, &devs, true), &devs, false);
        if (zf_ok(r.status)) {
            placed++;
            s_check_placement(&r, &m);
            s_check_order_independence(&r);
        } else {
            /* Failures are constraint conflicts, never crashes or bad input. */
            assert_int_equal(r.status.code, ZF_INVALID_ARGUMENT);
        }
        pt_placed_free(&r);
    }
    assert_true(placed >= S_SEEDS / 2);
}

static void test_placer_props_soft_placement_places_every_random_graph_validly(void **state)
{
    (void)state;
    pt_devs_t devs;
    pt_devs_fake(&devs, 3);
    for (int seed = 0; seed < S_SEEDS; seed++) {
        s_rng = (uint64_t)seed * 104729u;
        s_random_kernels();
        static s_meta_t m;
        zf_log_set_level(ZF_LOG_ERROR); /* soft placement logs each fallback */
        pt_placed_t r = pt_place(s_random_graph(&m, &devs, false), &devs, true);
        zf_log_set_level(ZF_LOG_INFO);
        if (!zf_ok(r.status)) fail_msg("seed %d: %s", seed, zf_status_msg(&r.status));
        for (int i = 0; i < S_NODES; i++)
            assert_true(zf_op_has_kernel(zf_graph_op_def(r.g, i), devs.d[r.assign[i]].name.type));
        pt_placed_free(&r);
    }
}

/* The scheduler reports each device's placed nodes as its load. */
static void test_placer_props_balanced_spreads_independent_graphs(void **state)
{
    (void)state;
    pt_kernels("Const:FakeCPU,FakeGPU");
    for (int n = 1; n <= 12; n++) {
        pt_devs_t devs = {0};
        for (int k = 0; k < n; k++) pt_devs_add(&devs, "w", 0, k % 3, "FakeGPU", k);
        for (int job = 0; job < n; job++) {
            pt_gb_t b = {0};
            pt_gb_node(&b, "c", "Const", NULL, NULL, "dtype=float");
            pt_placed_t r = pt_place(pt_gb_graph(&b), &devs, false);
            assert_true(zf_ok(r.status));
            devs.d[r.assign[0]].load++;
            pt_placed_free(&r);
        }
        for (int k = 0; k < n; k++) assert_int_equal(devs.d[k].load, 1);
    }
}

static int s_setup(void **state)
{
    (void)state;
    pt_reset_registry();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_placer_props_hold_on_random_graphs, s_setup),
        cmocka_unit_test_setup(test_placer_props_soft_placement_places_every_random_graph_validly,
                               s_setup),
        cmocka_unit_test_setup(test_placer_props_balanced_spreads_independent_graphs, s_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
