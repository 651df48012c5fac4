/* Property tests for scheduler/graph/partition on seeded random DAGs: random ops
 * and dtypes, control edges, feeds, fetches and targets, placed at random
 * over 1-8 CPU and GPU devices (some in two tasks, some partitioned by
 * task, some by task and then by device, some with bfloat16 transfers).
 * For every graph: the partitions reference only their own nodes, names
 * are unique, every recv has exactly one matching send (and no key is
 * received twice), the kept nodes are exactly those the fetches and
 * targets need, every input traces back through the transfers to the
 * tensor it had in the original graph, the output is deterministic, and
 * each partition re-imports through our loader. Failures print the seed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "common/strmap.h"
#include "common/kernel_def.h"
#include "scheduler/graph/partition.h"

#define MAX_NODES 64
#define MAX_DEVS  8
#define MAX_EPS   4

static uint64_t s_rng;

static uint32_t s_rand(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t)(s_rng >> 11);
}

static int s_pick(int n)
{
    return (int)(s_rand() % (uint32_t)n);
}

/* ---- random graphs -------------------------------------------------------- */

typedef struct {
    int n;
    bool is_int[MAX_NODES];
    bool has_out[MAX_NODES];
    char text[1 << 16];
    size_t len;
    zf_partition_device_t devs[MAX_DEVS];
    int n_devs;
    int assign[MAX_NODES];
    char feed_buf[MAX_EPS][24], fetch_buf[MAX_EPS][24], target_buf[MAX_EPS][24];
    const char *feeds[MAX_EPS], *fetches[MAX_EPS], *targets[MAX_EPS];
    zf_partition_options_t opts;
    bool two_pass; /* zf_partition_graph_two_pass */
} s_case_t;

static void s_emit(s_case_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->text + c->len, sizeof c->text - c->len, fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof c->text - c->len);
    c->len += (size_t)n;
}

/* Node i's name; some look like the partitioner's new names for n0's
 * transfers (`n0_S<k>`), which must then pick other names. */
static const char *s_name(int i)
{
    static char buf[4][32];
    static int next;
    char *b = buf[next++ % 4];
    if (i % 7 == 3)
        snprintf(b, 32, "n0_S%d", i / 7);
    else
        snprintf(b, 32, "n%d", i);
    return b;
}

/* An earlier node with outputs of the given kind, or -1. */
static int s_source(const s_case_t *c, int before, bool is_int)
{
    int cand[MAX_NODES], n = 0;
    for (int j = 0; j < before; j++)
        if (c->has_out[j] && c->is_int[j] == is_int) cand[n++] = j;
    return n ? cand[s_pick(n)] : -1;
}

static void s_gen_node(s_case_t *c, int i)
{
    bool is_int = s_pick(4) == 0;
    const char *type = is_int ? "DT_INT32" : "DT_FLOAT";
    int src = s_source(c, i, is_int), kind = src < 0 ? 0 : 1 + s_pick(5);
    static const char *const ops[] = {"Const", "Neg", "Identity", "Add", "AddN", "NoOp"};
    c->is_int[i] = is_int;
    c->has_out[i] = kind != 5;
    s_emit(c, "node { name: '%s' op: '%s'", s_name(i), ops[kind]);
    int n_in = kind == 1 || kind == 2 ? 1 : kind == 3 ? 2 : kind == 4 ? 1 + s_pick(4) : 0;
    for (int k = 0; k < n_in; k++) {
        int s = k == 0 ? src : s_source(c, i, is_int);
        s_emit(c, " input: '%s'", s_name(s));
    }
    int n_ctl = s_pick(4) == 0 ? 1 + s_pick(2) : 0;
    for (int k = 0; k < n_ctl && i > 0; k++) s_emit(c, " input: '^%s'", s_name(s_pick(i)));
    if (kind == 0)
        s_emit(c,
               " attr { key: 'dtype' value { type: %s } } attr { key: 'value' value { tensor "
               "{ dtype: %s %s: 1 } } }",
               type, type, is_int ? "int_val" : "float_val");
    else if (kind != 5)
        s_emit(c, " attr { key: 'T' value { type: %s } }", type);
    if (kind == 4) s_emit(c, " attr { key: 'N' value { i: %d } }", n_in);
    s_emit(c, " }\n");
}

static void s_gen_devices(s_case_t *c)
{
    c->n_devs = 1 + s_pick(MAX_DEVS);
    bool two_tasks = s_pick(3) == 0;
    for (int d = 0; d < c->n_devs; d++) {
        char name[128];
        snprintf(name, sizeof name, "/job:w/replica:0/task:%d/device:%s:%d", two_tasks ? d % 2 : 0,
                 s_pick(2) ? "GPU" : "CPU", d);
        assert_true(zf_ok(zf_device_name_parse(name, &c->devs[d].name)));
        c->devs[d].incarnation = ((uint64_t)s_rand() << 32) | s_rand() | 1u;
    }
}

/* Feeds, fetches and targets: distinct nodes with outputs for the first two. */
static void s_gen_endpoints(s_case_t *c)
{
    bool used[MAX_NODES] = {false};
    int n_feeds = s_pick(MAX_EPS), n_fetches = s_pick(MAX_EPS), n_targets = s_pick(3);
    c->opts.n_feeds = c->opts.n_fetches = c->opts.n_targets = 0;
    for (int k = 0; k < n_feeds + n_fetches; k++) {
        int v = s_pick(c->n);
        if (used[v] || !c->has_out[v]) continue;
        used[v] = true;
        bool feed = k < n_feeds;
        char *buf = feed ? c->feed_buf[c->opts.n_feeds] : c->fetch_buf[c->opts.n_fetches];
        snprintf(buf, 24, s_pick(2) ? "%s" : "%s:0", s_name(v));
        if (feed)
            c->feeds[c->opts.n_feeds++] = buf;
        else
            c->fetches[c->opts.n_fetches++] = buf;
    }
    for (int k = 0; k < n_targets; k++) {
        snprintf(c->target_buf[k], 24, "%s", s_name(s_pick(c->n)));
        c->targets[c->opts.n_targets++] = c->target_buf[k];
    }
    c->opts.feeds = c->feeds;
    c->opts.fetches = c->fetches;
    c->opts.targets = c->targets;
}

static void s_gen(s_case_t *c)
{
    memset(c, 0, sizeof *c);
    c->n = 1 + s_pick(MAX_NODES);
    for (int i = 0; i < c->n; i++) s_gen_node(c, i);
    s_gen_devices(c);
    for (int i = 0; i < c->n; i++) c->assign[i] = s_pick(c->n_devs);
    s_gen_endpoints(c);
    c->opts.by = s_pick(4) == 0 ? ZF_PARTITION_BY_TASK : ZF_PARTITION_BY_DEVICE;
    c->opts.bfloat16_sendrecv = s_pick(3) == 0;
    c->two_pass = s_pick(4) == 0;
}

static zf_status_t s_partition(const s_case_t *c, const zf_graph_t *g, const int *assign,
                               zf_partition_set_t **out)
{
    return (c->two_pass ? zf_partition_graph_two_pass : zf_partition_graph)(g, c->devs, c->n_devs,
                                                                            assign, &c->opts, out);
}

/* ---- the output, indexed -------------------------------------------------- */

typedef struct {
    const zf_graph_t *g;
    const zf_partition_set_t *set;
    zf_strmap_t *nodes; /* name -> (partition << 32 | node index) */
    zf_strmap_t *sends; /* transfer key -> node (non-client sends) */
    uint64_t seed;
} s_out_t;

static const Tensorflow__NodeDef *s_lookup(const s_out_t *o, const char *name, size_t len,
                                           int *part)
{
    uintptr_t v = 0;
    if (!zf_strmap_get_n(o->nodes, name, len, &v))
        fail_msg("seed %llu: input names unknown node '%.*s'", (unsigned long long)o->seed,
                 (int)len, name);
    *part = (int)(v >> 32);
    return o->set->parts[*part].graph->node[v & 0xffffffffu];
}

static const char *s_attr_s(const Tensorflow__NodeDef *nd, const char *key, char *buf)
{
    const Tensorflow__AttrValue *v = zf_node_attr(nd, key);
    assert_non_null(v);
    memcpy(buf, v->s.data, v->s.len);
    buf[v->s.len] = '\0';
    return buf;
}

static bool s_is_transfer(const Tensorflow__NodeDef *nd, const char *kind)
{
    return nd->op[0] == '_' && strstr(nd->op, kind) != NULL &&
           (!strcmp(nd->op + strlen(nd->op) - 4, "Send") ||
            !strcmp(nd->op + strlen(nd->op) - 4, "Recv"));
}

static bool s_client(const Tensorflow__NodeDef *nd)
{
    const Tensorflow__AttrValue *v = zf_node_attr(nd, "client_terminated");
    return v && v->b;
}

/* send_device;incarnation;recv_device;tensor_name of a transfer node. */
static void s_transfer_key(const Tensorflow__NodeDef *nd, char *key, size_t size)
{
    char a[256], b[256], t[256];
    const Tensorflow__AttrValue *inc = zf_node_attr(nd, "send_device_incarnation");
    assert_non_null(inc);
    snprintf(key, size, "%s;%llx;%s;%s", s_attr_s(nd, "send_device", a), (unsigned long long)inc->i,
             s_attr_s(nd, "recv_device", b), s_attr_s(nd, "tensor_name", t));
}

/* Indexes every node; checks global name uniqueness and that sends and recvs
 * pair one to one. */
static void s_index(s_out_t *o)
{
    o->nodes = zf_strmap_new(256, 0);
    o->sends = zf_strmap_new(256, ZF_STRMAP_COPY_KEYS);
    zf_strmap_t *recvs = zf_strmap_new(256, ZF_STRMAP_COPY_KEYS);
    int n_send = 0, n_recv = 0;
    for (int p = 0; p < o->set->n_parts; p++) {
        const Tensorflow__GraphDef *gd = o->set->parts[p].graph;
        n_send += o->set->parts[p].n_send;
        n_recv += o->set->parts[p].n_recv;
        for (size_t i = 0; i < gd->n_node; i++) {
            const Tensorflow__NodeDef *nd = gd->node[i];
            if (zf_strmap_insert(o->nodes, nd->name, (uintptr_t)p << 32 | i, NULL) != 0)
                fail_msg("seed %llu: node name '%s' is not unique", (unsigned long long)o->seed,
                         nd->name);
            if (s_client(nd) || !(s_is_transfer(nd, "Send") || s_is_transfer(nd, "Recv"))) continue;
            char key[1024];
            s_transfer_key(nd, key, sizeof key);
            bool send = s_is_transfer(nd, "Send");
            if (zf_strmap_insert(send ? o->sends : recvs, key, (uintptr_t)nd, NULL) != 0)
                fail_msg("seed %llu: two %s for key %s", (unsigned long long)o->seed,
                         send ? "sends" : "recvs", key);
        }
    }
    assert_int_equal(zf_strmap_size(o->sends), (size_t)n_send);
    assert_int_equal(zf_strmap_size(recvs), (size_t)n_recv);
    size_t it = 0;
    const char *key;
    size_t len;
    while (zf_strmap_next(recvs, &it, &key, &len, NULL))
        if (!zf_strmap_get_n(o->sends, key, len, NULL))
            fail_msg("seed %llu: recv %.*s has no send", (unsigned long long)o->seed, (int)len,
                     key);
    zf_strmap_destroy(&recvs);
}

/* No node reads a node of another partition. */
static void s_check_locality(const s_out_t *o)
{
    for (int p = 0; p < o->set->n_parts; p++) {
        const Tensorflow__GraphDef *gd = o->set->parts[p].graph;
        for (size_t i = 0; i < gd->n_node; i++) {
            for (size_t k = 0; k < gd->node[i]->n_input; k++) {
                const char *in = gd->node[i]->input[k];
                in += in[0] == '^';
                int at = -1;
                s_lookup(o, in, strcspn(in, ":"), &at);
                if (at != p)
                    fail_msg("seed %llu: %s in %s reads %s from partition %d",
                             (unsigned long long)o->seed, gd->node[i]->name,
                             o->set->parts[p].device, in, at);
            }
        }
    }
}

/* Follows an input of a node in partition part back to an original tensor
 * ("n3:0"), a client feed ("feed n3:0") or, for a control input, an
 * original node ("^n3"). */
static void s_trace(const s_out_t *o, int part, const char *input, char *out, size_t size)
{
    bool control = input[0] == '^';
    const char *name = input + control;
    const char *colon = strchr(name, ':');
    size_t len = colon ? (size_t)(colon - name) : strlen(name);
    int port = colon ? atoi(colon + 1) : 0, at = -1;
    const Tensorflow__NodeDef *nd = s_lookup(o, name, len, &at);
    if (at != part)
        fail_msg("seed %llu: input '%s' of partition %d lives in partition %d",
                 (unsigned long long)o->seed, input, part, at);
    char buf[256];
    if (zf_graph_find_node_n(o->g, name, len) >= 0) {
        snprintf(out, size, control ? "^%.*s" : "%.*s:%d", (int)len, name, port);
    } else if (s_is_transfer(nd, "Recv") && s_client(nd)) {
        snprintf(out, size, "feed %s", s_attr_s(nd, "tensor_name", buf));
    } else if (s_is_transfer(nd, "Recv")) {
        char key[1024];
        uintptr_t send = 0;
        s_transfer_key(nd, key, sizeof key);
        assert_true(zf_strmap_get(o->sends, key, &send));
        const Tensorflow__NodeDef *snd = (const Tensorflow__NodeDef *)send;
        int sp = -1;
        s_lookup(o, snd->name, strlen(snd->name), &sp);
        char inner[300];
        s_trace(o, sp, snd->input[0], inner, sizeof inner);
        snprintf(out, size, "%s%s", control ? "^" : "", inner + (inner[0] == '^'));
    } else if (!strcmp(nd->op, "Cast") || !strcmp(nd->op, "_HostCast") ||
               !strcmp(nd->op, "Identity")) {
        s_trace(o, part, nd->input[0], buf, sizeof buf);
        snprintf(out, size, "%s%s", control ? "^" : "", buf + (buf[0] == '^'));
    } else if (!strcmp(nd->op, "Const") && nd->n_input == 1 && nd->input[0][0] == '^') {
        s_trace(o, part, nd->input[0], out, size); /* the dummy of a control transfer */
    } else {
        fail_msg("seed %llu: cannot trace '%s' (op %s)", (unsigned long long)o->seed, input,
                 nd->op);
    }
}

/* ---- the expected result --------------------------------------------------- */

static int s_fed(const s_case_t *c, const zf_graph_t *g, const char *input)
{
    for (int k = 0; k < c->opts.n_feeds; k++) {
        const char *f = c->feeds[k];
        size_t len = strcspn(f, ":");
        const char *name = input;
        size_t ilen = strcspn(input, ":");
        int iport = input[ilen] ? atoi(input + ilen + 1) : 0;
        if (ilen == len && !memcmp(f, name, len) && iport == 0 && input[0] != '^') return k;
    }
    (void)g;
    return -1;
}

/* Reverse reachability in the original graph, stopping at fed tensors. */
static void s_expected_kept(const s_case_t *c, const zf_graph_t *g, bool *kept, bool *feed_used)
{
    int stack[MAX_NODES * 4], top = 0, n = zf_graph_num_nodes(g);
    memset(kept, 0, (size_t)n);
    memset(feed_used, 0, MAX_EPS);
    bool all = c->opts.n_fetches == 0 && c->opts.n_targets == 0;
    for (int i = 0; i < n && all; i++) stack[top++] = i;
    for (int k = 0; k < c->opts.n_fetches; k++)
        stack[top++] = zf_graph_find_node_n(g, c->fetches[k], strcspn(c->fetches[k], ":"));
    for (int k = 0; k < c->opts.n_targets; k++) stack[top++] = zf_graph_find_node(g, c->targets[k]);
    while (top > 0) {
        int v = stack[--top];
        if (kept[v]) continue;
        kept[v] = true;
        const Tensorflow__NodeDef *nd = zf_graph_node_def(g, v);
        for (size_t k = 0; k < nd->n_input; k++) {
            int f = s_fed(c, g, nd->input[k]);
            if (f >= 0) {
                feed_used[f] = true;
                continue;
            }
            const char *in = nd->input[k] + (nd->input[k][0] == '^');
            stack[top++] = zf_graph_find_node_n(g, in, strcspn(in, ":"));
        }
    }
}

/* Every kept original node appears once with inputs that trace back to its
 * original inputs (fed ones to their feed); nothing else is original. */
static void s_check_nodes(const s_case_t *c, s_out_t *o)
{
    bool kept[MAX_NODES], feed_used[MAX_EPS];
    s_expected_kept(c, o->g, kept, feed_used);
    int n = zf_graph_num_nodes(o->g), found = 0, feeds = 0, fetches = 0, client_feeds = 0;
    for (int p = 0; p < o->set->n_parts; p++) {
        const Tensorflow__GraphDef *gd = o->set->parts[p].graph;
        feeds += o->set->parts[p].n_feeds;
        fetches += o->set->parts[p].n_fetches;
        for (size_t i = 0; i < gd->n_node; i++) {
            const Tensorflow__NodeDef *nd = gd->node[i];
            int v = zf_graph_find_node(o->g, nd->name);
            client_feeds += s_client(nd) && s_is_transfer(nd, "Recv");
            if (s_client(nd) && s_is_transfer(nd, "Send")) {
                char got[300], want[300], tensor[256];
                s_attr_s(nd, "tensor_name", tensor);
                snprintf(want, sizeof want, strchr(tensor, ':') ? "%s" : "%s:0", tensor);
                s_trace(o, p, nd->input[0], got, sizeof got);
                assert_string_equal(got, want);
            }
            if (v < 0) continue;
            if (!kept[v])
                fail_msg("seed %llu: %s should be pruned", (unsigned long long)o->seed, nd->name);
            found++;
            const Tensorflow__NodeDef *orig = zf_graph_node_def(o->g, v);
            assert_int_equal(nd->n_input, orig->n_input);
            for (size_t k = 0; k < nd->n_input; k++) {
                char got[300], want[300];
                s_trace(o, p, nd->input[k], got, sizeof got);
                int f = s_fed(c, o->g, orig->input[k]);
                const char *in = orig->input[k];
                if (f >= 0)
                    snprintf(want, sizeof want, "feed %s", c->feeds[f]);
                else if (in[0] == '^')
                    snprintf(want, sizeof want, "%s", in);
                else
                    snprintf(want, sizeof want, strchr(in, ':') ? "%s" : "%s:0", in);
                if (strcmp(got, want) != 0)
                    fail_msg("seed %llu: input %zu of %s traces to '%s', expected '%s'",
                             (unsigned long long)o->seed, k, nd->name, got, want);
            }
        }
    }
    int want_kept = 0, want_feeds = 0;
    for (int i = 0; i < n; i++) want_kept += kept[i];
    for (int k = 0; k < c->opts.n_feeds; k++) want_feeds += feed_used[k];
    assert_int_equal(found, want_kept);
    assert_int_equal(feeds, want_feeds);
    assert_int_equal(client_feeds, want_feeds);
    assert_int_equal(fetches, c->opts.n_fetches);
}

static void s_check_reimport_and_determinism(const s_case_t *c, s_out_t *o, const zf_graph_t *g,
                                             const int *assign)
{
    zf_partition_set_t *again = NULL;
    zf_status_t s = s_partition(c, g, assign, &again);
    assert_true(zf_ok(s));
    assert_int_equal(again->n_parts, o->set->n_parts);
    for (int p = 0; p < o->set->n_parts; p++) {
        /* Compared before reimporting: loading a partition completes its
         * nodes' default attrs in place. */
        void *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        assert_true(zf_ok(zf_graphdef_write_mem(o->set->parts[p].graph, ZF_FORMAT_PB, &a, &la)));
        assert_true(zf_ok(zf_graphdef_write_mem(again->parts[p].graph, ZF_FORMAT_PB, &b, &lb)));
        assert_int_equal(la, lb);
        assert_memory_equal(a, b, la);
        free(a);
        free(b);
        zf_graph_t *pg = NULL;
        s = zf_graph_new_from_graphdef(o->set->parts[p].graph, &pg);
        if (!zf_ok(s))
            fail_msg("seed %llu: partition %s does not reimport: %s", (unsigned long long)o->seed,
                     o->set->parts[p].device, zf_status_msg(&s));
        zf_graph_destroy(&pg);
    }
    zf_partition_set_destroy(&again);
}

/* A GPU Identity that takes its input in host memory: same-device pairs. */
static const zf_kernel_def_t s_gpu_identity = {"Identity", "GPU", NULL, 0, 1u, 0};

static void test_partition_properties_hold_on_random_dags(void **state)
{
    (void)state;
    zf_kernel_def_registry_reset();
    assert_true(zf_ok(zf_kernel_def_register(&s_gpu_identity)));
    int graphs = 0, cut = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        s_rng = seed * 0x9e3779b97f4a7c15ull;
        s_case_t *c = calloc(1, sizeof *c);
        assert_non_null(c);
        s_gen(c);
        Tensorflow__GraphDef *gd = NULL;
        zf_graph_t *g = NULL;
        assert_true(zf_ok(zf_graphdef_read_mem(c->text, c->len, ZF_FORMAT_PBTXT, &gd)));
        zf_status_t s = zf_graph_new_from_graphdef(gd, &g);
        if (!zf_ok(s))
            fail_msg("seed %llu: %s\n%s", (unsigned long long)seed, zf_status_msg(&s), c->text);
        s_out_t *o = calloc(1, sizeof *o);
        assert_non_null(o);
        o->g = g;
        o->seed = seed;
        zf_partition_set_t *set = NULL;
        s = s_partition(c, g, c->assign, &set);
        if (!zf_ok(s))
            fail_msg("seed %llu: %s\n%s", (unsigned long long)seed, zf_status_msg(&s), c->text);
        o->set = set;
        s_index(o);
        s_check_locality(o);
        s_check_nodes(c, o);
        s_check_reimport_and_determinism(c, o, g, c->assign);
        for (int p = 0; p < set->n_parts; p++) cut += set->parts[p].n_send;
        graphs++;
        zf_strmap_destroy(&o->nodes);
        zf_strmap_destroy(&o->sends);
        zf_partition_set_destroy(&set);
        zf_graph_destroy(&g);
        zf_graphdef_free(&gd);
        free(o);
        free(c);
    }
    assert_int_equal(graphs, 400);
    assert_true(cut > 1000); /* the graphs do cut edges */
    zf_kernel_def_registry_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition_properties_hold_on_random_dags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
