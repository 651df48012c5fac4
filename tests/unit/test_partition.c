/* Tests for scheduler/graph/partition: pruning by feeds, fetches and targets, and
 * partitioning with TensorFlow's Send/Recv semantics — one focused test per
 * rule, TensorFlow's two-device example, and every error. Graphs are
 * written as text GraphDefs; placement comes from each node's requested
 * device, so these tests do not depend on the placer. Kernels that declare
 * host memory are registered here (the registry is reset around each test). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/rendezvous_key.h"
#include "common/graphdef_io.h"
#include "common/kernel_def.h"
#include "scheduler/graph/partition.h"

#define CPU0 "/job:localhost/replica:0/task:0/device:CPU:0"
#define CPU1 "/job:localhost/replica:0/task:0/device:CPU:1"
#define GPU0 "/job:localhost/replica:0/task:0/device:GPU:0"
#define GPU1 "/job:localhost/replica:0/task:0/device:GPU:1"

/* ---- fixture ------------------------------------------------------------- */

typedef struct {
    Tensorflow__GraphDef *gd;
    zf_graph_t *g;
    zf_partition_device_t devs[8];
    int n_devs;
    int *assign;
    zf_partition_set_t *set;
} s_fx_t;

static void s_load(s_fx_t *f, const char *pbtxt)
{
    memset(f, 0, sizeof *f);
    zf_status_t s = zf_graphdef_read_mem(pbtxt, strlen(pbtxt), ZF_FORMAT_PBTXT, &f->gd);
    if (!zf_ok(s)) fail_msg("bad test graph: %s", zf_status_msg(&s));
    s = zf_graph_new_from_graphdef(f->gd, &f->g);
    if (!zf_ok(s)) fail_msg("bad test graph: %s", zf_status_msg(&s));
}

/* Devices from full names, incarnation 0x100 + index. */
static void s_devices(s_fx_t *f, int n, ...)
{
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *name = va_arg(ap, const char *);
        zf_status_t s = zf_device_name_parse(name, &f->devs[i].name);
        assert_true(zf_ok(s));
        f->devs[i].incarnation = 0x100u + (unsigned)i;
    }
    va_end(ap);
    f->n_devs = n;
}

/* Places each node on the first device matching its requested device. */
static void s_assign_requested(s_fx_t *f)
{
    int n = zf_graph_num_nodes(f->g);
    f->assign = calloc((size_t)n + 1, sizeof *f->assign);
    assert_non_null(f->assign);
    for (int i = 0; i < n; i++) {
        zf_device_name_t spec;
        zf_status_t s = zf_device_name_parse(zf_graph_node_device(f->g, i), &spec);
        assert_true(zf_ok(s));
        f->assign[i] = -1;
        for (int d = 0; d < f->n_devs && f->assign[i] < 0; d++)
            if (zf_device_name_matches(&spec, &f->devs[d].name)) f->assign[i] = d;
        if (f->assign[i] < 0) fail_msg("no device for %s", zf_graph_node_name(f->g, i));
    }
}

static zf_status_t s_run(s_fx_t *f, const zf_partition_options_t *o)
{
    if (!f->assign) s_assign_requested(f);
    zf_partition_set_destroy(&f->set);
    return zf_partition_graph(f->g, f->devs, f->n_devs, f->assign, o, &f->set);
}

static void s_run_ok(s_fx_t *f, const zf_partition_options_t *o)
{
    zf_status_t s = s_run(f, o);
    if (!zf_ok(s)) fail_msg("partition failed: %s", zf_status_msg(&s));
    assert_non_null(f->set);
}

/* Runs expecting an error; checks the code and that msg is in the message. */
static void s_run_fails(s_fx_t *f, const zf_partition_options_t *o, zf_code_t code, const char *msg)
{
    zf_status_t s = s_run(f, o);
    if (s.code != code || !strstr(zf_status_msg(&s), msg))
        fail_msg("expected %s '%s', got %s '%s'", zf_code_name(code), msg, zf_code_name(s.code),
                 zf_status_msg(&s));
    assert_null(f->set);
    zf_status_clear(&s);
}

static void s_free(s_fx_t *f)
{
    zf_partition_set_destroy(&f->set);
    zf_graph_destroy(&f->g);
    zf_graphdef_free(&f->gd);
    free(f->assign);
}

static const zf_partition_t *s_part(const s_fx_t *f, const char *device)
{
    for (int i = 0; i < f->set->n_parts; i++)
        if (strcmp(f->set->parts[i].device, device) == 0) return &f->set->parts[i];
    fail_msg("no partition for %s", device);
    return NULL;
}

static const Tensorflow__NodeDef *s_node(const zf_partition_t *p, const char *name)
{
    for (size_t i = 0; i < p->graph->n_node; i++)
        if (strcmp(p->graph->node[i]->name, name) == 0) return p->graph->node[i];
    fail_msg("no node %s in partition %s", name, p->device);
    return NULL;
}

/* The partition's node names, in order, space-separated. */
static void s_assert_nodes(const zf_partition_t *p, const char *expected)
{
    char buf[4096] = "";
    size_t used = 0;
    for (size_t i = 0; i < p->graph->n_node; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? " " : "",
                                 p->graph->node[i]->name);
    assert_string_equal(buf, expected);
}

static void s_assert_inputs(const Tensorflow__NodeDef *nd, const char *expected)
{
    char buf[4096] = "";
    size_t used = 0;
    for (size_t i = 0; i < nd->n_input; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? " " : "", nd->input[i]);
    assert_string_equal(buf, expected);
}

static const Tensorflow__AttrValue *s_attr(const Tensorflow__NodeDef *nd, const char *key)
{
    const Tensorflow__AttrValue *v = zf_node_attr(nd, key);
    if (!v) fail_msg("node %s has no attr %s", nd->name, key);
    return v;
}

static void s_assert_attr_s(const Tensorflow__NodeDef *nd, const char *key, const char *want)
{
    const Tensorflow__AttrValue *v = s_attr(nd, key);
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_S);
    assert_int_equal(v->s.len, strlen(want));
    assert_memory_equal(v->s.data, want, v->s.len);
}

static void s_assert_attr_type(const Tensorflow__NodeDef *nd, const char *key, zf_dtype_t want)
{
    const Tensorflow__AttrValue *v = s_attr(nd, key);
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_TYPE);
    assert_int_equal(v->type, want);
}

static int64_t s_attr_i(const Tensorflow__NodeDef *nd, const char *key)
{
    const Tensorflow__AttrValue *v = s_attr(nd, key);
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_I);
    return v->i;
}

static bool s_attr_b(const Tensorflow__NodeDef *nd, const char *key)
{
    const Tensorflow__AttrValue *v = s_attr(nd, key);
    assert_int_equal(v->value_case, TENSORFLOW__ATTR_VALUE__VALUE_B);
    return v->b;
}

/* Checks a cut-edge endpoint: op, device, and TensorFlow's attrs. */
static void s_assert_transfer(const Tensorflow__NodeDef *nd, const char *op, const char *tensor,
                              const char *send_dev, int64_t inc, const char *recv_dev)
{
    assert_string_equal(nd->op, op);
    s_assert_attr_s(nd, "tensor_name", tensor);
    s_assert_attr_s(nd, "send_device", send_dev);
    s_assert_attr_s(nd, "recv_device", recv_dev);
    assert_int_equal(s_attr_i(nd, "send_device_incarnation"), inc);
    assert_false(s_attr_b(nd, "client_terminated"));
    assert_string_equal(nd->device, strstr(op, "Send") ? send_dev : recv_dev);
}

static int s_setup(void **state)
{
    (void)state;
    zf_kernel_def_registry_reset();
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    zf_kernel_def_registry_reset();
    return 0;
}

/* ---- TensorFlow's two-device example ------------------------------------- */

/* Layer 1 on the CPU, layer 2 and the softmax loss on the GPU; an
 * accuracy branch and an init op nobody fetches. */
static const char s_two_layer[] =
    "node { name: 'x' op: 'Placeholder' device: '/cpu:0'\n"
    "  attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'y_' op: 'Placeholder' device: '/gpu:0'\n"
    "  attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
    "node { name: 'W1' op: 'Const' device: '/cpu:0' attr { key: 'dtype' value { type: DT_FLOAT } "
    "}\n"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
    "node { name: 'b1' op: 'Const' device: '/cpu:0' attr { key: 'dtype' value { type: DT_FLOAT } "
    "}\n"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 0 } } } }\n"
    "node { name: 'mm1' op: 'MatMul' input: 'x' input: 'W1' device: '/cpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'add1' op: 'Add' input: 'mm1' input: 'b1' device: '/cpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'relu1' op: 'Relu' input: 'add1' device: '/cpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'W2' op: 'Const' device: '/gpu:0' attr { key: 'dtype' value { type: DT_FLOAT } "
    "}\n"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
    "node { name: 'b2' op: 'Const' device: '/gpu:0' attr { key: 'dtype' value { type: DT_FLOAT } "
    "}\n"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 0 } } } }\n"
    "node { name: 'mm2' op: 'MatMul' input: 'relu1' input: 'W2' device: '/gpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'logits' op: 'Add' input: 'mm2' input: 'b2' device: '/gpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'xent' op: 'SoftmaxCrossEntropyWithLogits' input: 'logits' input: 'y_'\n"
    "  device: '/gpu:0' attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'axis' op: 'Const' device: '/gpu:0' attr { key: 'dtype' value { type: DT_INT32 } "
    "}\n"
    "  attr { key: 'value' value { tensor { dtype: DT_INT32 int_val: 0 } } } }\n"
    "node { name: 'loss' op: 'Mean' input: 'xent' input: 'axis' device: '/gpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'Tidx' value { type: DT_INT32 } } }\n"
    "node { name: 'predict' op: 'ArgMax' input: 'logits' input: 'axis' device: '/gpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'Tidx' value { type: DT_INT32 } }\n"
    "  attr { key: 'output_type' value { type: DT_INT64 } } }\n"
    "node { name: 'init' op: 'NoOp' input: '^W1' device: '/cpu:0' }\n"
    "versions { producer: 27 min_consumer: 12 }\n";

static const char *const s_two_layer_feeds[] = {"x", "y_"};
static const char *const s_two_layer_fetches[] = {"loss"};

static zf_partition_options_t s_two_layer_opts(void)
{
    zf_partition_options_t o = {0};
    o.feeds = s_two_layer_feeds;
    o.n_feeds = 2;
    o.fetches = s_two_layer_fetches;
    o.n_fetches = 1;
    return o;
}

static void test_partition_splits_the_two_layer_model_between_cpu_and_gpu(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, s_two_layer);
    s_devices(&f, 2, CPU0, GPU0);
    zf_partition_options_t o = s_two_layer_opts();
    s_run_ok(&f, &o);
    assert_int_equal(f.set->n_parts, 2);
    const zf_partition_t *cpu = &f.set->parts[0], *gpu = &f.set->parts[1];
    assert_string_equal(cpu->device, CPU0);
    assert_string_equal(gpu->device, GPU0);
    assert_int_equal(cpu->device_index, 0);
    assert_int_equal(gpu->device_index, 1);
    /* x and y_ are fed (replaced by client recvs); predict and init are pruned. */
    s_assert_nodes(cpu, "W1 b1 mm1 add1 relu1 relu1_S0 _recv_x_0");
    s_assert_nodes(gpu, "W2 b2 mm2 relu1_S1 logits xent axis loss _recv_y__0 _send_loss_0");
    s_assert_inputs(s_node(cpu, "mm1"), "_recv_x_0 W1");
    s_assert_inputs(s_node(cpu, "relu1_S0"), "relu1");
    s_assert_inputs(s_node(gpu, "mm2"), "relu1_S1 W2");
    s_assert_inputs(s_node(gpu, "xent"), "logits _recv_y__0");
    s_assert_inputs(s_node(gpu, "_send_loss_0"), "loss");
    s_assert_inputs(s_node(gpu, "relu1_S1"), "");
    /* relu1 -> mm2 is edge 5 (in-edges counted in node order). */
    s_assert_transfer(s_node(cpu, "relu1_S0"), "_Send", "edge_5_relu1", CPU0, 0x100, GPU0);
    s_assert_attr_type(s_node(cpu, "relu1_S0"), "T", ZF_FLOAT);
    s_assert_transfer(s_node(gpu, "relu1_S1"), "_Recv", "edge_5_relu1", CPU0, 0x100, GPU0);
    s_assert_attr_type(s_node(gpu, "relu1_S1"), "tensor_type", ZF_FLOAT);
    assert_string_equal(s_node(gpu, "loss")->device, GPU0);
    assert_int_equal(cpu->n_send, 1);
    assert_int_equal(cpu->n_recv, 0);
    assert_int_equal(gpu->n_send, 0);
    assert_int_equal(gpu->n_recv, 1);
    /* Client endpoints and their rendezvous keys. */
    assert_int_equal(cpu->n_feeds, 1);
    assert_int_equal(cpu->n_fetches, 0);
    assert_string_equal(cpu->feeds[0].tensor_name, "x");
    assert_string_equal(cpu->feeds[0].key, CPU0 ";0000000000000100;" CPU0 ";x;0:0");
    assert_int_equal(gpu->n_feeds, 1);
    assert_string_equal(gpu->feeds[0].tensor_name, "y_");
    assert_string_equal(gpu->feeds[0].key, GPU0 ";0000000000000101;" GPU0 ";y_;0:0");
    assert_int_equal(gpu->n_fetches, 1);
    assert_string_equal(gpu->fetches[0].tensor_name, "loss");
    assert_string_equal(gpu->fetches[0].key, GPU0 ";0000000000000101;" GPU0 ";loss;0:0");
    /* Versions carry over. */
    assert_int_equal(gpu->graph->versions->producer, 27);
    assert_int_equal(cpu->graph->versions->min_consumer, 12);
    s_free(&f);
}

static void test_partition_outputs_reimport_and_are_deterministic(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, s_two_layer);
    s_devices(&f, 2, CPU0, GPU0);
    zf_partition_options_t o = s_two_layer_opts();
    s_run_ok(&f, &o);
    void *first[2] = {NULL, NULL};
    size_t first_len[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        zf_graph_t *pg = NULL;
        zf_status_t s = zf_graph_new_from_graphdef(f.set->parts[i].graph, &pg);
        if (!zf_ok(s)) fail_msg("partition does not reimport: %s", zf_status_msg(&s));
        zf_graph_destroy(&pg);
        s = zf_graphdef_write_mem(f.set->parts[i].graph, ZF_FORMAT_PB, &first[i], &first_len[i]);
        assert_true(zf_ok(s));
    }
    s_run_ok(&f, &o);
    for (int i = 0; i < 2; i++) {
        void *again = NULL;
        size_t len = 0;
        zf_status_t s = zf_graphdef_write_mem(f.set->parts[i].graph, ZF_FORMAT_PB, &again, &len);
        assert_true(zf_ok(s));
        assert_int_equal(len, first_len[i]);
        assert_memory_equal(again, first[i], len);
        free(again);
        free(first[i]);
    }
    s_free(&f);
}

/* ---- feeds, fetches and pruning ------------------------------------------ */

static const char s_chain[] =
    "node { name: 'a' op: 'Const' device: '/cpu:0' attr { key: 'dtype' value { type: DT_FLOAT } }\n"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
    "node { name: 'x' op: 'Neg' input: 'a' device: '/cpu:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'y' op: 'Neg' input: 'x' device: '/cpu:1'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'z' op: 'Neg' input: 'y' input: '^a' device: '/cpu:1'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'w' op: 'Neg' input: 'y' device: '/cpu:1'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n";

static void test_partition_rewrites_feeds_and_fetches_as_client_endpoints(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, s_chain);
    s_devices(&f, 2, CPU0, CPU1);
    const char *feeds[] = {"x:0"}, *fetches[] = {"y"};
    zf_partition_options_t o = {.feeds = feeds, .n_feeds = 1, .fetches = fetches, .n_fetches = 1};
    s_run_ok(&f, &o);
    /* The feed lives on the fed node's device; the fetch beside the fetched node. */
    const zf_partition_t *p0 = s_part(&f, CPU0), *p1 = s_part(&f, CPU1);
    s_assert_nodes(p0, "_recv_x_0_S0 _recv_x_0");
    s_assert_nodes(p1, "y _recv_x_0_S1 _send_y_0");
    const Tensorflow__NodeDef *recv = s_node(p0, "_recv_x_0");
    assert_string_equal(recv->op, "_Recv");
    assert_string_equal(recv->device, CPU0);
    assert_int_equal(recv->n_input, 0);
    assert_true(s_attr_b(recv, "client_terminated"));
    s_assert_attr_s(recv, "tensor_name", "x:0");
    s_assert_attr_s(recv, "send_device", CPU0);
    s_assert_attr_s(recv, "recv_device", CPU0);
    assert_int_equal(s_attr_i(recv, "send_device_incarnation"), 0x100);
    s_assert_attr_type(recv, "tensor_type", ZF_FLOAT);
    const Tensorflow__NodeDef *send = s_node(p1, "_send_y_0");
    assert_string_equal(send->op, "_Send");
    assert_true(s_attr_b(send, "client_terminated"));
    s_assert_attr_s(send, "tensor_name", "y");
    s_assert_attr_s(send, "send_device", CPU1);
    s_assert_attr_s(send, "recv_device", CPU1);
    assert_int_equal(s_attr_i(send, "send_device_incarnation"), 0x101);
    s_assert_attr_type(send, "T", ZF_FLOAT);
    s_assert_inputs(send, "y");
    /* The fed tensor crosses to y's device like any other tensor. */
    s_assert_transfer(s_node(p0, "_recv_x_0_S0"), "_Send", "edge_1__recv_x_0", CPU0, 0x100, CPU1);
    s_assert_inputs(s_node(p0, "_recv_x_0_S0"), "_recv_x_0");
    s_assert_inputs(s_node(p1, "y"), "_recv_x_0_S1");
    assert_string_equal(p0->feeds[0].key, CPU0 ";0000000000000100;" CPU0 ";x:0;0:0");
    assert_string_equal(p1->fetches[0].key, CPU1 ";0000000000000101;" CPU1 ";y;0:0");
    s_free(&f);
}

static void test_partition_names_the_client_side_when_a_client_device_is_given(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, s_chain);
    s_devices(&f, 2, CPU0, CPU1);
    const char *feeds[] = {"x"}, *fetches[] = {"w"};
    zf_partition_options_t o = {
        .feeds = feeds, .n_feeds = 1, .fetches = fetches, .n_fetches = 1, .client_device = CPU1};
    s_run_ok(&f, &o);
    const Tensorflow__NodeDef *recv = s_node(s_part(&f, CPU0), "_recv_x_0");
    s_assert_attr_s(recv, "send_device", CPU1);
    s_assert_attr_s(recv, "recv_device", CPU0);
    assert_int_equal(s_attr_i(recv, "send_device_incarnation"), 0x101);
    const Tensorflow__NodeDef *send = s_node(s_part(&f, CPU1), "_send_w_0");
    s_assert_attr_s(send, "send_device", CPU1);
    s_assert_attr_s(send, "recv_device", CPU1);
    assert_string_equal(s_part(&f, CPU0)->feeds[0].key, CPU1 ";0000000000000101;" CPU0 ";x;0:0");
    /* A client device outside the device set has TensorFlow's illegal incarnation 0. */
    o.client_device = "/job:client/replica:0/task:0/device:CPU:0";
    s_run_ok(&f, &o);
    recv = s_node(s_part(&f, CPU0), "_recv_x_0");
    assert_int_equal(s_attr_i(recv, "send_device_incarnation"), 0);
    assert_string_equal(s_part(&f, CPU0)->feeds[0].key,
                        "/job:client/replica:0/task:0/device:CPU:0;0000000000000000;" CPU0
                        ";x;0:0");
    s_free(&f);
}

static void test_partition_prunes_what_the_fetches_and_targets_do_not_need(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, s_chain);
    s_devices(&f, 2, CPU0, CPU1);
    const char *fetches[] = {"y"}, *targets[] = {"z"};
    zf_partition_options_t o = {.fetches = fetches, .n_fetches = 1};
    s_run_ok(&f, &o);
    s_assert_nodes(s_part(&f, CPU0), "a x x_S0");
    s_assert_nodes(s_part(&f, CPU1), "y x_S1 _send_y_0");
    /* A target runs for its effects: z and its control input come back, w does not. */
    o = (zf_partition_options_t){.targets = targets, .n_targets = 1};
    s_run_ok(&f, &o);
    s_assert_nodes(s_part(&f, CPU0), "a x x_S0 a/ctrl_S2 a_S3");
    s_assert_nodes(s_part(&f, CPU1), "y x_S1 z a_S4 a_S5");
    s_assert_inputs(s_node(s_part(&f, CPU1), "z"), "y ^a_S5");
    /* Pruning stops at fed tensors: feeding y cuts a and x away. */
    const char *feeds[] = {"y"};
    o = (zf_partition_options_t){
        .feeds = feeds, .n_feeds = 1, .fetches = (const char *[]){"w"}, .n_fetches = 1};
    s_run_ok(&f, &o);
    assert_int_equal(f.set->n_parts, 1);
    s_assert_nodes(s_part(&f, CPU1), "w _recv_y_0 _send_w_0");
    s_assert_inputs(s_node(s_part(&f, CPU1), "w"), "_recv_y_0");
    s_free(&f);
}

static void test_partition_keeps_every_node_without_fetches_or_targets(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, s_chain);
    s_devices(&f, 2, CPU0, CPU1);
    s_run_ok(&f, NULL);
    s_assert_nodes(s_part(&f, CPU0), "a x x_S0 a/ctrl_S2 a_S3");
    s_assert_nodes(s_part(&f, CPU1), "y x_S1 z a_S4 a_S5 w");
    s_assert_inputs(s_node(s_part(&f, CPU1), "w"), "y");
    s_free(&f);
}

static void test_partition_moves_control_edges_of_a_fed_placeholder_to_its_feed(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f,
           "node { name: 'p' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
           "node { name: 'c' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }\n"
           "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
           "node { name: 'q' op: 'Neg' input: 'c' input: '^p'\n"
           "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
           "node { name: 'r' op: 'Neg' input: 'c' input: '^q'\n"
           "  attr { key: 'T' value { type: DT_FLOAT } } }\n");
    s_devices(&f, 1, CPU0);
    const char *feeds[] = {"p"}, *feeds2[] = {"q"}, *targets[] = {"q", "r"};
    zf_partition_options_t o = {.feeds = feeds, .n_feeds = 1, .targets = targets, .n_targets = 1};
    s_run_ok(&f, &o);
    s_assert_nodes(&f.set->parts[0], "c q _recv_p_0");
    s_assert_inputs(s_node(&f.set->parts[0], "q"), "c ^_recv_p_0");
    /* Other nodes keep their control out-edges when fed (and a feed nobody
     * reads is pruned). */
    o = (zf_partition_options_t){
        .feeds = feeds2, .n_feeds = 1, .targets = targets + 1, .n_targets = 1};
    s_run_ok(&f, &o);
    s_assert_nodes(&f.set->parts[0], "p c q r");
    assert_int_equal(f.set->parts[0].n_feeds, 0);
    s_assert_inputs(s_node(&f.set->parts[0], "r"), "c ^q");
    s_free(&f);
}

/* ---- send/recv rules ------------------------------------------------------ */

static void test_partition_sends_control_edges_through_a_dummy_const(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, "node { name: 'a' op: 'NoOp' device: '/cpu:0' }\n"
               "node { name: 'b' op: 'NoOp' input: '^a' device: '/cpu:1' }\n"
               "node { name: 'c' op: 'NoOp' input: '^a' device: '/cpu:1' }\n");
    s_devices(&f, 2, CPU0, CPU1);
    s_run_ok(&f, NULL);
    const zf_partition_t *p0 = s_part(&f, CPU0), *p1 = s_part(&f, CPU1);
    s_assert_nodes(p0, "a a/ctrl_S0 a_S1");
    s_assert_nodes(p1, "b a_S2 a_S3 c");
    const Tensorflow__NodeDef *dummy = s_node(p0, "a/ctrl_S0");
    assert_string_equal(dummy->op, "Const");
    assert_string_equal(dummy->device, CPU0);
    s_assert_inputs(dummy, "^a");
    s_assert_attr_type(dummy, "dtype", ZF_FLOAT);
    const Tensorflow__TensorProto *t = s_attr(dummy, "value")->tensor;
    assert_int_equal(t->dtype, ZF_FLOAT);
    assert_int_equal(t->tensor_shape->n_dim, 1);
    assert_int_equal(t->tensor_shape->dim[0]->size, 0);
    s_assert_transfer(s_node(p0, "a_S1"), "_Send", "edge_0_a", CPU0, 0x100, CPU1);
    s_assert_inputs(s_node(p0, "a_S1"), "a/ctrl_S0");
    s_assert_attr_type(s_node(p0, "a_S1"), "T", ZF_FLOAT);
    s_assert_transfer(s_node(p1, "a_S2"), "_Recv", "edge_0_a", CPU0, 0x100, CPU1);
    const Tensorflow__NodeDef *id = s_node(p1, "a_S3");
    assert_string_equal(id->op, "Identity");
    s_assert_inputs(id, "a_S2");
    s_assert_attr_type(id, "T", ZF_FLOAT);
    /* Both control edges share the one transfer. */
    s_assert_inputs(s_node(p1, "b"), "^a_S3");
    s_assert_inputs(s_node(p1, "c"), "^a_S3");
    assert_int_equal(p0->n_send, 1);
    assert_int_equal(p1->n_recv, 1);
    s_free(&f);
}

static void test_partition_dedups_recvs_per_source_tensor_and_destination(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, "node { name: 'a' op: 'Const' device: '/cpu:0' attr { key: 'dtype' value { type: "
               "DT_FLOAT } }\n"
               "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
               "node { name: 'b' op: 'Add' input: 'a' input: 'a' device: '/cpu:1'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
               "node { name: 'c' op: 'Neg' input: 'a' input: '^a' device: '/cpu:1'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
               "node { name: 'd' op: 'Neg' input: 'a' device: '/gpu:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n");
    s_devices(&f, 3, CPU0, CPU1, GPU0);
    s_run_ok(&f, NULL);
    /* One recv of a:0 per destination partition; the control edge is separate. */
    s_assert_nodes(s_part(&f, CPU0), "a a_S0 a/ctrl_S2 a_S3 a_S6");
    s_assert_nodes(s_part(&f, CPU1), "b a_S1 c a_S4 a_S5");
    s_assert_nodes(s_part(&f, GPU0), "d a_S7");
    s_assert_inputs(s_node(s_part(&f, CPU1), "b"), "a_S1 a_S1");
    s_assert_inputs(s_node(s_part(&f, CPU1), "c"), "a_S1 ^a_S5");
    s_assert_transfer(s_node(s_part(&f, CPU0), "a_S0"), "_Send", "edge_0_a", CPU0, 0x100, CPU1);
    s_assert_transfer(s_node(s_part(&f, CPU0), "a_S3"), "_Send", "edge_3_a", CPU0, 0x100, CPU1);
    s_assert_transfer(s_node(s_part(&f, CPU0), "a_S6"), "_Send", "edge_4_a", CPU0, 0x100, GPU0);
    assert_int_equal(s_part(&f, CPU0)->n_send, 3);
    assert_int_equal(s_part(&f, CPU1)->n_recv, 2);
    s_free(&f);
}

static const zf_kernel_def_t s_gpu_reshape = {"Reshape", "GPU", NULL, 0, 1u << 1, 0};
static const zf_kernel_def_t s_gpu_check = {"CheckNumerics", "GPU", NULL, 0, 1u << 0, 0};

static void test_partition_picks_host_send_and_recv_by_memory_type(void **state)
{
    (void)state;
    assert_true(zf_ok(zf_kernel_def_register(&s_gpu_reshape)));
    s_fx_t f;
    /* s (int64) feeds Reshape's shape, which the GPU kernel takes in host
     * memory, and a Neg that takes it in device memory; sh (int32) and str
     * (string) live in host memory on the GPU whatever their kernels say. */
    s_load(&f, "node { name: 't' op: 'Const' device: '/gpu:0' attr { key: 'dtype' value { type: "
               "DT_FLOAT } }\n"
               "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
               "node { name: 's' op: 'Const' device: '/cpu:0' attr { key: 'dtype' value { type: "
               "DT_INT64 } }\n"
               "  attr { key: 'value' value { tensor { dtype: DT_INT64 int64_val: 1 } } } }\n"
               "node { name: 'r' op: 'Reshape' input: 't' input: 's' device: '/gpu:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'Tshape' value { type: "
               "DT_INT64 } } }\n"
               "node { name: 'n' op: 'Neg' input: 's' device: '/gpu:0'\n"
               "  attr { key: 'T' value { type: DT_INT64 } } }\n"
               "node { name: 'r2' op: 'Reshape' input: 't' input: 's' device: '/gpu:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'Tshape' value { type: "
               "DT_INT64 } } }\n"
               "node { name: 'sh' op: 'Shape' input: 't' device: '/gpu:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
               "node { name: 'r3' op: 'Reshape' input: 't' input: 'sh' device: '/gpu:1'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
               "node { name: 'str' op: 'Const' device: '/gpu:0' attr { key: 'dtype' value { type: "
               "DT_STRING } }\n"
               "  attr { key: 'value' value { tensor { dtype: DT_STRING string_val: 'hi' } } } }\n"
               "node { name: 'sid' op: 'Identity' input: 'str' device: '/cpu:0'\n"
               "  attr { key: 'T' value { type: DT_STRING } } }\n");
    s_devices(&f, 3, CPU0, GPU0, GPU1);
    const char *fetches[] = {"r", "n", "r2", "r3", "sid", "sh"};
    zf_partition_options_t o = {.fetches = fetches, .n_fetches = 6};
    s_run_ok(&f, &o);
    const zf_partition_t *cpu = s_part(&f, CPU0), *g0 = s_part(&f, GPU0), *g1 = s_part(&f, GPU1);
    s_assert_nodes(cpu, "s s_S0 s_S2 sid str_S9 _send_sid_0");
    s_assert_nodes(g0, "t r s_S1 n s_S3 r2 sh t_S4 sh_S6 str str_S8 _send_r_0 _send_n_0 "
                       "_send_r2_0 _send_sh_0");
    s_assert_nodes(g1, "r3 t_S5 sh_S7 _send_r3_0");
    /* Host-memory input on the GPU: _HostRecv; CPU sides stay _Send/_Recv. */
    s_assert_transfer(s_node(cpu, "s_S0"), "_Send", "edge_1_s", CPU0, 0x100, GPU0);
    s_assert_transfer(s_node(g0, "s_S1"), "_HostRecv", "edge_1_s", CPU0, 0x100, GPU0);
    s_assert_transfer(s_node(g0, "s_S3"), "_Recv", "edge_2_s", CPU0, 0x100, GPU0);
    s_assert_inputs(s_node(g0, "r2"), "t s_S1");
    s_assert_inputs(s_node(g0, "n"), "s_S3");
    /* INT32 and STRING tensors on a GPU are host memory on both ends. */
    s_assert_transfer(s_node(g0, "sh_S6"), "_HostSend", "edge_7_sh", GPU0, 0x101, GPU1);
    s_assert_transfer(s_node(g1, "sh_S7"), "_HostRecv", "edge_7_sh", GPU0, 0x101, GPU1);
    s_assert_transfer(s_node(g0, "str_S8"), "_HostSend", "edge_8_str", GPU0, 0x101, CPU0);
    s_assert_transfer(s_node(cpu, "str_S9"), "_Recv", "edge_8_str", GPU0, 0x101, CPU0);
    s_assert_attr_type(s_node(g0, "str_S8"), "T", ZF_STRING);
    /* Fetches follow the memory of what they fetch. */
    assert_string_equal(s_node(g0, "_send_sh_0")->op, "_HostSend");
    assert_string_equal(s_node(g0, "_send_r_0")->op, "_Send");
    assert_string_equal(s_node(cpu, "_send_sid_0")->op, "_Send");
    s_free(&f);
}

static void test_partition_pairs_send_and_recv_on_one_device_when_memory_differs(void **state)
{
    (void)state;
    assert_true(zf_ok(zf_kernel_def_register(&s_gpu_check)));
    s_fx_t f;
    s_load(&f, "node { name: 'v' op: 'Const' device: '/gpu:0' attr { key: 'dtype' value { type: "
               "DT_FLOAT } }\n"
               "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
               "node { name: 'k' op: 'CheckNumerics' input: 'v' device: '/gpu:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
               "node { name: 'm' op: 'Neg' input: 'v' device: '/gpu:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n");
    s_devices(&f, 1, GPU0);
    /* bfloat16 applies across devices only: this pair is not cast. */
    zf_partition_options_t o = {.bfloat16_sendrecv = true};
    s_run_ok(&f, &o);
    const zf_partition_t *g0 = s_part(&f, GPU0);
    s_assert_nodes(g0, "v k v_S0 v_S1 m");
    s_assert_transfer(s_node(g0, "v_S0"), "_Send", "edge_0_v", GPU0, 0x100, GPU0);
    s_assert_transfer(s_node(g0, "v_S1"), "_HostRecv", "edge_0_v", GPU0, 0x100, GPU0);
    s_assert_attr_type(s_node(g0, "v_S1"), "tensor_type", ZF_FLOAT);
    s_assert_inputs(s_node(g0, "v_S1"), "^v_S0");
    s_assert_inputs(s_node(g0, "k"), "v_S1");
    s_assert_inputs(s_node(g0, "m"), "v");
    assert_int_equal(g0->n_send, 1);
    assert_int_equal(g0->n_recv, 1);
    s_free(&f);
}

static void test_partition_casts_float_transfers_to_bfloat16_when_asked(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, "node { name: 'a' op: 'Const' device: '/cpu:0' attr { key: 'dtype' value { type: "
               "DT_FLOAT } }\n"
               "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
               "node { name: 'i' op: 'Const' device: '/cpu:0' attr { key: 'dtype' value { type: "
               "DT_INT32 } }\n"
               "  attr { key: 'value' value { tensor { dtype: DT_INT32 int_val: 1 } } } }\n"
               "node { name: 'b' op: 'Neg' input: 'a' device: '/gpu:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
               "node { name: 'j' op: 'Neg' input: 'i' device: '/gpu:0'\n"
               "  attr { key: 'T' value { type: DT_INT32 } } }\n");
    s_devices(&f, 2, CPU0, GPU0);
    zf_partition_options_t o = {.bfloat16_sendrecv = true};
    s_run_ok(&f, &o);
    const zf_partition_t *cpu = s_part(&f, CPU0), *gpu = s_part(&f, GPU0);
    s_assert_nodes(cpu, "a i a_S0 a_S1 i_S4");
    s_assert_nodes(gpu, "b a_S2 a_S3 j i_S5");
    const Tensorflow__NodeDef *down = s_node(cpu, "a_S0");
    assert_string_equal(down->op, "Cast");
    s_assert_inputs(down, "a");
    s_assert_attr_type(down, "SrcT", ZF_FLOAT);
    s_assert_attr_type(down, "DstT", ZF_BFLOAT16);
    assert_true(s_attr_b(down, "Truncate"));
    s_assert_inputs(s_node(cpu, "a_S1"), "a_S0");
    s_assert_attr_type(s_node(cpu, "a_S1"), "T", ZF_BFLOAT16);
    s_assert_attr_type(s_node(gpu, "a_S2"), "tensor_type", ZF_BFLOAT16);
    const Tensorflow__NodeDef *up = s_node(gpu, "a_S3");
    assert_string_equal(up->op, "Cast");
    assert_string_equal(up->device, GPU0);
    s_assert_inputs(up, "a_S2");
    s_assert_attr_type(up, "SrcT", ZF_BFLOAT16);
    s_assert_attr_type(up, "DstT", ZF_FLOAT);
    assert_null(zf_node_attr(up, "Truncate"));
    s_assert_inputs(s_node(gpu, "b"), "a_S3");
    /* Other dtypes travel as they are. */
    s_assert_attr_type(s_node(cpu, "i_S4"), "T", ZF_INT32);
    s_assert_attr_type(s_node(gpu, "i_S5"), "tensor_type", ZF_INT32);
    s_assert_inputs(s_node(gpu, "j"), "i_S5");
    s_free(&f);
}

static void test_partition_never_shares_recvs_of_reference_edges(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, "node { name: 'v' op: 'VariableV2' device: '/cpu:0'\n"
               "  attr { key: 'dtype' value { type: DT_FLOAT } } attr { key: 'shape' value { shape "
               "{ } } } }\n"
               "node { name: 'c' op: 'Const' device: '/cpu:1' attr { key: 'dtype' value { type: "
               "DT_FLOAT } }\n"
               "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
               "node { name: 'a1' op: 'Add' input: 'v' input: 'c' device: '/cpu:1'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
               "node { name: 'a2' op: 'Add' input: 'c' input: 'v' device: '/cpu:1'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n");
    s_devices(&f, 2, CPU0, CPU1);
    s_run_ok(&f, NULL);
    s_assert_nodes(s_part(&f, CPU0), "v v_S0 v_S2");
    s_assert_nodes(s_part(&f, CPU1), "c a1 v_S1 a2 v_S3");
    /* Each read of the variable waits for the reader's other inputs. */
    s_assert_inputs(s_node(s_part(&f, CPU1), "v_S1"), "^c");
    s_assert_inputs(s_node(s_part(&f, CPU1), "v_S3"), "^c");
    s_assert_inputs(s_node(s_part(&f, CPU1), "a1"), "v_S1 c");
    s_assert_inputs(s_node(s_part(&f, CPU1), "a2"), "c v_S3");
    s_assert_attr_type(s_node(s_part(&f, CPU0), "v_S0"), "T", ZF_FLOAT);
    s_assert_attr_type(s_node(s_part(&f, CPU1), "v_S1"), "tensor_type", ZF_FLOAT);
    s_free(&f);
}

static void test_partition_groups_devices_by_task(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, "node { name: 'a' op: 'Const' device: '/job:w/task:0/device:CPU:0'\n"
               "  attr { key: 'dtype' value { type: DT_FLOAT } }\n"
               "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
               "node { name: 'b' op: 'Neg' input: 'a' device: '/job:w/task:0/device:CPU:1'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
               "node { name: 'c' op: 'Neg' input: 'b' device: '/job:w/task:1/device:CPU:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n");
    s_devices(&f, 3, "/job:w/replica:0/task:0/device:CPU:1", "/job:w/replica:0/task:1/device:CPU:0",
              "/job:w/replica:0/task:0/device:CPU:0");
    zf_partition_options_t o = {.by = ZF_PARTITION_BY_TASK};
    s_run_ok(&f, &o);
    assert_int_equal(f.set->n_parts, 2);
    const zf_partition_t *t0 = &f.set->parts[0], *t1 = &f.set->parts[1];
    assert_string_equal(t0->device, "/job:w/replica:0/task:0");
    assert_string_equal(t1->device, "/job:w/replica:0/task:1");
    assert_int_equal(t0->device_index, 0);
    assert_int_equal(t1->device_index, 1);
    /* Devices of one task talk directly; tasks through send/recv. */
    s_assert_nodes(t0, "a b b_S0");
    s_assert_nodes(t1, "c b_S1");
    s_assert_inputs(s_node(t0, "b"), "a");
    assert_string_equal(s_node(t0, "a")->device, "/job:w/replica:0/task:0/device:CPU:0");
    assert_string_equal(s_node(t0, "b")->device, "/job:w/replica:0/task:0/device:CPU:1");
    s_assert_transfer(s_node(t0, "b_S0"), "_Send", "edge_1_b",
                      "/job:w/replica:0/task:0/device:CPU:1", 0x100,
                      "/job:w/replica:0/task:1/device:CPU:0");
    s_free(&f);
}

static void test_partition_fills_incarnations_and_formats_keys(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, s_chain);
    s_devices(&f, 2, CPU0, CPU1);
    f.devs[0].incarnation = 0xfedcba9876543210ull;
    const char *fetches[] = {"y"};
    zf_partition_options_t o = {.fetches = fetches, .n_fetches = 1};
    s_run_ok(&f, &o);
    const Tensorflow__NodeDef *send = s_node(s_part(&f, CPU0), "x_S0");
    assert_int_equal((uint64_t)s_attr_i(send, "send_device_incarnation"), 0xfedcba9876543210ull);
    char *key = zf_rendezvous_key(CPU0, 0xfedcba9876543210ull, CPU1, "edge_1_x");
    assert_string_equal(key, CPU0 ";fedcba9876543210;" CPU1 ";edge_1_x;0:0");
    free(key);
    key = zf_rendezvous_key("/job:a/replica:0/task:0/device:CPU:0", 1, "b", "t");
    assert_string_equal(key, "/job:a/replica:0/task:0/device:CPU:0;0000000000000001;b;t;0:0");
    free(key);
    s_free(&f);
}

static void test_partition_keeps_new_names_unique(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f,
           "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
           "node { name: '_recv_x_0' op: 'NoOp' }\n"
           "node { name: 'a_S1' op: 'NoOp' }\n"
           "node { name: 'a' op: 'Neg' input: 'x' attr { key: 'T' value { type: DT_FLOAT } } }\n"
           "node { name: 'b' op: 'Neg' input: 'a' input: '^_recv_x_0' input: '^a_S1'\n"
           "  device: '/cpu:1' attr { key: 'T' value { type: DT_FLOAT } } }\n");
    s_devices(&f, 2, CPU0, CPU1);
    const char *feeds[] = {"x"}, *fetches[] = {"b"};
    zf_partition_options_t o = {.feeds = feeds, .n_feeds = 1, .fetches = fetches, .n_fetches = 1};
    s_run_ok(&f, &o);
    s_assert_nodes(s_part(&f, CPU0),
                   "_recv_x_0 a_S1 a a_S2 _recv_x_0/ctrl_S4 _recv_x_0_S5 a_S1/ctrl_S8 a_S1_S9 "
                   "_recv_x_0_S0");
    s_assert_inputs(s_node(s_part(&f, CPU0), "a"), "_recv_x_0_S0");
    s_assert_nodes(s_part(&f, CPU1),
                   "b a_S3 _recv_x_0_S6 _recv_x_0_S7 a_S1_S10 a_S1_S11 _send_b_0");
    s_free(&f);
}

static void s_assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle)) fail_msg("expected '%s' in:\n%s", needle, text);
}

static void test_partition_draws_clusters_and_marks_cut_edges(void **state)
{
    (void)state;
    assert_true(zf_ok(zf_kernel_def_register(&s_gpu_check)));
    s_fx_t f;
    s_load(&f, s_chain);
    s_devices(&f, 2, CPU0, CPU1);
    s_assign_requested(&f);
    const char *feeds[] = {"x"}, *fetches[] = {"z"};
    zf_partition_options_t o = {.feeds = feeds, .n_feeds = 1, .fetches = fetches, .n_fetches = 1};
    char *dot = NULL;
    size_t len = 0;
    zf_status_t s = zf_partition_dot(f.g, f.devs, f.n_devs, f.assign, &o, &dot, &len);
    assert_true(zf_ok(s));
    assert_int_equal(len, strlen(dot));
    /* Plan nodes: a=0 x=1 y=2 z=3 w=4, feed x=5, fetch z=6; w is pruned. */
    s_assert_contains(dot, "digraph partitions {\n");
    s_assert_contains(dot, "  subgraph cluster_0 {\n    label=\"" CPU0 "\";\n");
    s_assert_contains(dot, "    n0 [label=\"a\\nConst\"];\n");
    s_assert_contains(dot, "    n5 [label=\"_recv_x_0\\nfeed x\", shape=ellipse");
    s_assert_contains(dot, "  subgraph cluster_1 {\n    label=\"" CPU1 "\";\n");
    s_assert_contains(dot, "    n6 [label=\"_send_z_0\\nfetch z\", shape=ellipse");
    s_assert_contains(dot, "  n5 -> n2 [color=\"#d62728\", penwidth=2.5];\n");
    s_assert_contains(dot, "  n2 -> n3;\n");
    s_assert_contains(dot, "  n0 -> n3 [color=\"#d62728\", penwidth=2.5, style=dashed];\n");
    s_assert_contains(dot, "  n3 -> n6;\n}\n");
    assert_null(strstr(dot, "n4 ["));
    assert_null(strstr(dot, "n1 ["));
    free(dot);
    s_free(&f);
    /* A same-device transfer between memories is orange. */
    s_load(&f, "node { name: 'v' op: 'Const' device: '/gpu:0' attr { key: 'dtype' value { type: "
               "DT_FLOAT } }\n"
               "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
               "node { name: 'k' op: 'CheckNumerics' input: 'v' device: '/gpu:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n");
    s_devices(&f, 1, GPU0);
    s_assign_requested(&f);
    s = zf_partition_dot(f.g, f.devs, f.n_devs, f.assign, NULL, &dot, &len);
    assert_true(zf_ok(s));
    s_assert_contains(dot, "  n0 -> n1 [color=\"#ff7f0e\", penwidth=2.5];\n");
    free(dot);
    /* Errors are zf_partition_graph's. */
    const char *bad[] = {"nope"};
    o = (zf_partition_options_t){.fetches = bad, .n_fetches = 1};
    s = zf_partition_dot(f.g, f.devs, f.n_devs, f.assign, &o, &dot, &len);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_string_equal(zf_status_msg(&s), "FetchOutputs node nope: not found");
    assert_null(dot);
    zf_status_clear(&s);
    s_free(&f);
}

/* ---- errors --------------------------------------------------------------- */

static void test_partition_rejects_bad_feeds_fetches_and_targets(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, s_chain);
    s_devices(&f, 2, CPU0, CPU1);
    const char *bad[] = {"nope:0"};
    zf_partition_options_t o = {.feeds = bad, .n_feeds = 1};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT, "FeedInputs: unable to find feed output nope:0");
    o = (zf_partition_options_t){.fetches = bad, .n_fetches = 1};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT, "FetchOutputs node nope:0: not found");
    const char *targets[] = {"z", "t1", "t2"};
    o = (zf_partition_options_t){.targets = targets, .n_targets = 3};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT, "PruneForTargets: Some target nodes not found: t1 t2");
    const char *port[] = {"x:1"};
    o = (zf_partition_options_t){.feeds = port, .n_feeds = 1};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT, "FeedInputs: x:1 should have output index < 1");
    o = (zf_partition_options_t){.fetches = port, .n_fetches = 1};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT,
                "FetchOutputs x:1: output index too large, must be < 1");
    const char *twice[] = {"x", "y", "x:0"};
    o = (zf_partition_options_t){.feeds = twice, .n_feeds = 3};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT, "Endpoint \"x:0\" fed more than once.");
    o = (zf_partition_options_t){.fetches = twice, .n_fetches = 3};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT, "Endpoint \"x:0\" fetched more than once.");
    o = (zf_partition_options_t){
        .feeds = twice + 1, .n_feeds = 1, .fetches = twice + 1, .n_fetches = 1};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT, "y is both fed and fetched.");
    const char *malformed[] = {"x:abc"}, *control[] = {"^x"};
    o = (zf_partition_options_t){.feeds = malformed, .n_feeds = 1};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT, "Invalid feed 'x:abc': ");
    o = (zf_partition_options_t){.fetches = control, .n_fetches = 1};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT,
                "Invalid fetch '^x': names a control input, not a tensor");
    o = (zf_partition_options_t){.n_feeds = 1};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT, "non-negative counts and arrays");
    s_free(&f);
}

static void test_partition_rejects_fetching_a_node_without_outputs(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, "node { name: 'init' op: 'NoOp' }\n");
    s_devices(&f, 1, CPU0);
    const char *fetches[] = {"init"};
    zf_partition_options_t o = {.fetches = fetches, .n_fetches = 1};
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT,
                "Tried to fetch data for 'init', which produces no output.  To run to a node but "
                "not fetch any data, pass 'init' as an argument to the 'target_node_names' "
                "argument of the Session::Run API.");
    /* As a target it is fine. */
    o = (zf_partition_options_t){.targets = fetches, .n_targets = 1};
    s_run_ok(&f, &o);
    s_assert_nodes(&f.set->parts[0], "init");
    s_free(&f);
}

static void test_partition_rejects_bad_device_sets_and_assignments(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, s_chain);
    s_devices(&f, 2, CPU0, CPU1);
    s_assign_requested(&f);
    f.assign[3] = 2;
    s_run_fails(&f, NULL, ZF_INVALID_ARGUMENT,
                "node 'z' is assigned to device index 2, outside the device set of 2 devices");
    /* A pruned node's assignment does not matter, nor a pruned feed's. */
    const char *fetches[] = {"y"}, *feeds[] = {"z"};
    zf_partition_options_t o = {.feeds = feeds, .n_feeds = 1, .fetches = fetches, .n_fetches = 1};
    f.assign[3] = -1;
    s_run_ok(&f, &o);
    assert_int_equal(s_part(&f, CPU0)->n_feeds + s_part(&f, CPU1)->n_feeds, 0);
    f.assign[3] = 1;
    s_devices(&f, 2, CPU0, CPU0);
    s_run_fails(&f, NULL, ZF_INVALID_ARGUMENT, "device '" CPU0 "' appears twice in the device set");
    o = (zf_partition_options_t){.by = ZF_PARTITION_BY_TASK};
    s_devices(&f, 3, CPU1, CPU0, CPU1);
    s_run_fails(&f, &o, ZF_INVALID_ARGUMENT, "device '" CPU1 "' appears twice in the device set");
    s_devices(&f, 2, CPU0, "/device:CPU:1");
    s_run_fails(&f, NULL, ZF_INVALID_ARGUMENT,
                "device 1 of the device set ('/device:CPU:1') is not a full device name");
    f.n_devs = 0;
    s_run_fails(&f, NULL, ZF_INVALID_ARGUMENT, "no devices to partition over");
    zf_partition_set_t *set = (zf_partition_set_t *)&f;
    zf_status_t s = zf_partition_graph(NULL, f.devs, 1, f.assign, NULL, &set);
    assert_int_equal(s.code, ZF_INVALID_ARGUMENT);
    assert_null(set);
    zf_status_clear(&s);
    s_free(&f);
}

static void test_partition_rejects_incomplete_nodes_and_untyped_cut_edges(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(
        &f,
        "node { name: 'a' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }\n"
        "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
        "node { name: 'sum' op: 'Add' input: 'a' attr { key: 'T' value { type: DT_FLOAT } } }\n");
    s_devices(&f, 1, CPU0);
    s_run_fails(&f, NULL, ZF_INVALID_ARGUMENT, "Incomplete graph, missing 1 inputs for sum");
    s_free(&f);
    s_load(&f, "node { name: 'u' op: 'MysteryOp' }\n"
               "node { name: 'v' op: 'OtherMystery' input: 'u' }\n"
               "node { name: 'w' op: 'OtherMystery' input: 'u' device: '/cpu:1' }\n");
    s_devices(&f, 2, CPU0, CPU1);
    /* Unknown ops are fine inside a partition, not on a cut. */
    const char *targets[] = {"v"};
    zf_partition_options_t o = {.targets = targets, .n_targets = 1};
    s_run_ok(&f, &o);
    s_assert_nodes(&f.set->parts[0], "u v");
    s_run_fails(&f, NULL, ZF_INVALID_ARGUMENT,
                "Cannot partition the edge u:0 -> w:0: its dtype cannot be resolved (op "
                "'MysteryOp' or 'OtherMystery' is unknown");
    s_free(&f);
}

/* TensorFlow's own test graphs, split node by node across two devices:
 * each partitions cleanly or fails with INVALID_ARGUMENT and a message;
 * whatever comes out re-imports. */
static void test_partition_handles_tensorflow_test_graphs(void **state)
{
    (void)state;
    DIR *dir = opendir(ZF_TF_DATA_DIR);
    assert_non_null(dir);
    struct dirent *e;
    int loaded = 0, partitioned = 0;
    while ((e = readdir(dir)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 6, ".pbtxt") != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", ZF_TF_DATA_DIR, e->d_name);
        s_fx_t f;
        memset(&f, 0, sizeof f);
        zf_status_t s = zf_graphdef_read_file(path, ZF_FORMAT_PBTXT, &f.gd);
        if (zf_ok(s)) s = zf_graph_new_from_graphdef(f.gd, &f.g);
        if (!zf_ok(s)) {
            zf_status_clear(&s);
            s_free(&f);
            continue;
        }
        loaded++;
        s_devices(&f, 2, CPU0, CPU1);
        int n = zf_graph_num_nodes(f.g);
        f.assign = calloc((size_t)n + 1, sizeof *f.assign);
        assert_non_null(f.assign);
        for (int i = 0; i < n; i++) f.assign[i] = i % 2;
        s = s_run(&f, NULL);
        if (!zf_ok(s)) {
            if (s.code != ZF_INVALID_ARGUMENT || !*zf_status_msg(&s))
                fail_msg("%s: %s %s", e->d_name, zf_code_name(s.code), zf_status_msg(&s));
            zf_status_clear(&s);
        } else {
            partitioned++;
            for (int p = 0; p < f.set->n_parts; p++) {
                zf_graph_t *pg = NULL;
                s = zf_graph_new_from_graphdef(f.set->parts[p].graph, &pg);
                if (!zf_ok(s)) fail_msg("%s: %s", e->d_name, zf_status_msg(&s));
                zf_graph_destroy(&pg);
            }
        }
        s_free(&f);
    }
    closedir(dir);
    assert_true(loaded >= 20);
    assert_true(partitioned >= 10);
}

/* TensorFlow's graph-while-loop.pbtxt over CPU:0 and dev, every node
 * assigned to CPU:0. */
static void s_load_while_loop(s_fx_t *f, const char *dev)
{
    memset(f, 0, sizeof *f);
    assert_true(zf_ok(
        zf_graphdef_read_file(ZF_TF_DATA_DIR "/graph-while-loop.pbtxt", ZF_FORMAT_PBTXT, &f->gd)));
    assert_true(zf_ok(zf_graph_new_from_graphdef(f->gd, &f->g)));
    s_devices(f, 2, CPU0, dev);
    f->assign = calloc((size_t)zf_graph_num_nodes(f->g), sizeof *f->assign);
    assert_non_null(f->assign);
}

static void test_partition_adds_control_loops_for_loops_cut_across_devices(void **state)
{
    (void)state;
    s_fx_t f;
    s_load_while_loop(&f, CPU1);
    /* Into the loop through its Enter, in the root frame: a plain transfer. */
    f.assign[zf_graph_find_node(f.g, "Const")] = 1;
    s_run_ok(&f, NULL);
    assert_int_equal(s_part(&f, CPU1)->n_send, 1);
    s_assert_transfer(s_node(s_part(&f, CPU1), "Const_S0"), "_Send", "edge_0_Const", CPU1, 0x101,
                      CPU0);
    s_assert_inputs(s_node(s_part(&f, CPU0), "Const_S1"), "");
    zf_partition_set_destroy(&f.set);

    /* Out of the loop's Switch to an Exit elsewhere: inside the frame. CPU:1
     * gets a control loop for the frame, driven by the LoopCond it
     * receives from CPU:0 every iteration, and the Switch's value arrives
     * in the frame, once per iteration. */
    f.assign[zf_graph_find_node(f.g, "Const")] = 0;
    f.assign[zf_graph_find_node(f.g, "while/Exit")] = 1;
    s_run_ok(&f, NULL);
    const zf_partition_t *p1 = s_part(&f, CPU1), *p0 = s_part(&f, CPU0);
    s_assert_nodes(p1, "while/Exit while/LoopCond/_cloop_const_S0 while/LoopCond/_cloop_enter_S1 "
                       "while/LoopCond/_cloop_merge_S2 while/LoopCond/_cloop_switch_S3 "
                       "while/LoopCond/_cloop_next_S4 while/LoopCond_S6 while/Switch_S8");
    assert_int_equal(p1->n_recv, 2);
    assert_int_equal(p0->n_send, 2);
    const Tensorflow__NodeDef *enter = s_node(p1, "while/LoopCond/_cloop_enter_S1");
    assert_string_equal(enter->op, "Enter");
    s_assert_inputs(enter, "while/LoopCond/_cloop_const_S0");
    s_assert_attr_s(enter, "frame_name", "while/while_context");
    assert_false(s_attr_b(enter, "is_constant"));
    assert_int_equal(s_attr_i(enter, "parallel_iterations"), 10);
    s_assert_attr_type(enter, "T", ZF_FLOAT);
    s_assert_inputs(s_node(p1, "while/LoopCond/_cloop_merge_S2"),
                    "while/LoopCond/_cloop_enter_S1 while/LoopCond/_cloop_next_S4");
    s_assert_inputs(s_node(p1, "while/LoopCond/_cloop_switch_S3"),
                    "while/LoopCond/_cloop_merge_S2 while/LoopCond_S6");
    s_assert_inputs(s_node(p1, "while/LoopCond/_cloop_next_S4"),
                    "while/LoopCond/_cloop_switch_S3:1");
    s_assert_transfer(s_node(p1, "while/LoopCond_S6"), "_Recv", "loop_pred_while/LoopCond", CPU0,
                      0x100, CPU1);
    s_assert_attr_type(s_node(p1, "while/LoopCond_S6"), "tensor_type", ZF_BOOL);
    s_assert_inputs(s_node(p1, "while/LoopCond_S6"), "^while/LoopCond/_cloop_merge_S2");
    s_assert_transfer(s_node(p0, "while/LoopCond_S5"), "_Send", "loop_pred_while/LoopCond", CPU0,
                      0x100, CPU1);
    s_assert_inputs(s_node(p0, "while/LoopCond_S5"), "while/LoopCond");
    s_assert_transfer(s_node(p1, "while/Switch_S8"), "_Recv", "edge_14_while/Switch", CPU0, 0x100,
                      CPU1);
    s_assert_inputs(s_node(p1, "while/Switch_S8"), "^while/LoopCond/_cloop_merge_S2");
    s_assert_inputs(s_node(p1, "while/Exit"), "while/Switch_S8");
    /* CPU:0 receives nothing inside the frame: no control loop there. */
    for (size_t i = 0; i < p0->graph->n_node; i++)
        assert_null(strstr(p0->graph->node[i]->name, "_cloop_"));
    s_free(&f);
}

/* ---- two passes: by task, then each task by device ----------------------- */

#define T0C0 "/job:w/replica:0/task:0/device:CPU:0"
#define T0C1 "/job:w/replica:0/task:0/device:CPU:1"
#define T1C0 "/job:w/replica:0/task:1/device:CPU:0"
#define T1C1 "/job:w/replica:0/task:1/device:CPU:1"

static void s_run_two_pass(s_fx_t *f, const zf_partition_options_t *o)
{
    if (!f->assign) s_assign_requested(f);
    zf_partition_set_destroy(&f->set);
    zf_status_t s = zf_partition_graph_two_pass(f->g, f->devs, f->n_devs, f->assign, o, &f->set);
    if (!zf_ok(s)) fail_msg("two-pass partition failed: %s", zf_status_msg(&s));
}

/* Every node name of every partition, once. */
static void s_assert_names_unique(const s_fx_t *f)
{
    for (int p = 0; p < f->set->n_parts; p++)
        for (size_t i = 0; i < f->set->parts[p].graph->n_node; i++)
            for (int q = p; q < f->set->n_parts; q++)
                for (size_t k = q == p ? i + 1 : 0; k < f->set->parts[q].graph->n_node; k++)
                    if (strcmp(f->set->parts[p].graph->node[i]->name,
                               f->set->parts[q].graph->node[k]->name) == 0)
                        fail_msg("node %s twice", f->set->parts[p].graph->node[i]->name);
}

static const char *s_fan_out =
    "node { name: 'a' op: 'Const' device: '/job:w/task:0/device:CPU:0'\n"
    "  attr { key: 'dtype' value { type: DT_FLOAT } }\n"
    "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"
    "node { name: 'b' op: 'Neg' input: 'a' device: '/job:w/task:1/device:CPU:0'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'c' op: 'Neg' input: 'a' device: '/job:w/task:1/device:CPU:1'\n"
    "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
    "node { name: 'a_S1_S3' op: 'NoOp' device: '/job:w/task:0/device:CPU:1' }\n";

/* a on task 0 feeds b and c on the two devices of task 1: by device, two
 * transfers leave task 0; in two passes one does, and task 1 passes the
 * value on between its devices. Fetches land on the devices of their
 * client _Send; names continue from the first pass and skip the
 * original a_S1_S3, which another task holds. */
static void test_partition_two_pass_sends_a_tensor_between_tasks_once(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, s_fan_out);
    s_devices(&f, 4, T0C0, T0C1, T1C0, T1C1);
    const char *fetches[] = {"b", "c"};
    zf_partition_options_t o = {.fetches = fetches, .n_fetches = 2};
    s_run_ok(&f, &o);
    assert_int_equal(s_part(&f, T0C0)->n_send, 2);
    s_run_two_pass(&f, &o);
    assert_int_equal(f.set->n_parts, 3);
    const zf_partition_t *p0 = &f.set->parts[0], *p1 = &f.set->parts[1], *p2 = &f.set->parts[2];
    assert_string_equal(p0->device, T0C0);
    assert_string_equal(p1->device, T1C0);
    assert_string_equal(p2->device, T1C1);
    assert_int_equal(p0->device_index, 0);
    assert_int_equal(p1->device_index, 2);
    assert_int_equal(p2->device_index, 3);
    s_assert_nodes(p0, "a a_S0");
    s_assert_nodes(p1, "b a_S1 a_S1_S2 _send_b_0");
    s_assert_nodes(p2, "c a_S1_S4 _send_c_0");
    s_assert_transfer(s_node(p0, "a_S0"), "_Send", "edge_0_a", T0C0, 0x100, T1C0);
    s_assert_transfer(s_node(p1, "a_S1"), "_Recv", "edge_0_a", T0C0, 0x100, T1C0);
    s_assert_inputs(s_node(p1, "b"), "a_S1");
    s_assert_transfer(s_node(p1, "a_S1_S2"), "_Send", "edge_1_a_S1", T1C0, 0x102, T1C1);
    s_assert_inputs(s_node(p1, "a_S1_S2"), "a_S1");
    s_assert_transfer(s_node(p2, "a_S1_S4"), "_Recv", "edge_1_a_S1", T1C0, 0x102, T1C1);
    s_assert_inputs(s_node(p2, "c"), "a_S1_S4");
    assert_int_equal(p0->n_send, 1);
    assert_int_equal(p0->n_recv, 0);
    assert_int_equal(p1->n_send, 1);
    assert_int_equal(p1->n_recv, 1);
    assert_int_equal(p2->n_send, 0);
    assert_int_equal(p2->n_recv, 1);
    assert_int_equal(p0->n_fetches, 0);
    assert_int_equal(p1->n_fetches, 1);
    assert_int_equal(p2->n_fetches, 1);
    assert_string_equal(p1->fetches[0].tensor_name, "b");
    assert_string_equal(p1->fetches[0].key, T1C0 ";0000000000000102;" T1C0 ";b;0:0");
    assert_string_equal(p2->fetches[0].tensor_name, "c");
    assert_string_equal(p2->fetches[0].key, T1C1 ";0000000000000103;" T1C1 ";c;0:0");
    assert_true(f.set->next_name_id >= 5);
    s_assert_names_unique(&f);
    s_free(&f);
}

/* bfloat16 casts on the transfers between tasks only, and a feed lands
 * on the device of its client _Recv. */
static void test_partition_two_pass_casts_between_tasks_only(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, "node { name: 'x' op: 'Placeholder' device: '/job:w/task:1/device:CPU:1'\n"
               "  attr { key: 'dtype' value { type: DT_FLOAT } } }\n"
               "node { name: 'a' op: 'Neg' input: 'x' device: '/job:w/task:0/device:CPU:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
               "node { name: 'b' op: 'Neg' input: 'a' device: '/job:w/task:1/device:CPU:0'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n"
               "node { name: 'c' op: 'Neg' input: 'b' device: '/job:w/task:1/device:CPU:1'\n"
               "  attr { key: 'T' value { type: DT_FLOAT } } }\n");
    s_devices(&f, 4, T0C0, T0C1, T1C0, T1C1);
    const char *feeds[] = {"x"}, *fetches[] = {"c"};
    zf_partition_options_t o = {.feeds = feeds,
                                .n_feeds = 1,
                                .fetches = fetches,
                                .n_fetches = 1,
                                .bfloat16_sendrecv = true};
    s_run_two_pass(&f, &o);
    int casts_t0 = 0, casts_t1 = 0;
    for (int p = 0; p < f.set->n_parts; p++) {
        const zf_partition_t *part = &f.set->parts[p];
        for (size_t i = 0; i < part->graph->n_node; i++) {
            const Tensorflow__NodeDef *nd = part->graph->node[i];
            if (strstr(nd->op, "Send") && !s_attr_b(nd, "client_terminated")) {
                const Tensorflow__AttrValue *v = s_attr(nd, "recv_device");
                char to[ZF_DEVICE_NAME_MAX];
                snprintf(to, sizeof to, "%.*s", (int)v->s.len, (const char *)v->s.data);
                bool across = strstr(part->device, "task:0") || strstr(to, "task:0");
                s_assert_attr_type(nd, "T", across ? ZF_BFLOAT16 : ZF_FLOAT);
            }
            if (strcmp(nd->op, "Cast") != 0) continue;
            if (strstr(part->device, "task:0"))
                casts_t0++;
            else
                casts_t1++;
        }
    }
    assert_int_equal(casts_t0, 2); /* x arriving, a leaving */
    assert_int_equal(casts_t1, 2); /* x leaving, a arriving */
    assert_int_equal(s_part(&f, T1C1)->n_feeds, 1);
    assert_string_equal(s_part(&f, T1C1)->feeds[0].key, T1C1 ";0000000000000103;" T1C1 ";x;0:0");
    assert_int_equal(s_part(&f, T1C1)->n_fetches, 1);
    s_assert_names_unique(&f);
    s_free(&f);
}

/* A loop whose LoopCond is on task 0 and whose body spans both devices
 * of task 1: the first pass gives task 1 a control loop with a LoopCond
 * of its own, which the second pass splits the frame by. */
static void test_partition_two_pass_splits_a_loop_across_tasks_and_devices(void **state)
{
    (void)state;
    s_fx_t f;
    memset(&f, 0, sizeof f);
    assert_true(zf_ok(
        zf_graphdef_read_file(ZF_TF_DATA_DIR "/graph-while-loop.pbtxt", ZF_FORMAT_PBTXT, &f.gd)));
    assert_true(zf_ok(zf_graph_new_from_graphdef(f.gd, &f.g)));
    s_devices(&f, 4, T0C0, T0C1, T1C0, T1C1);
    f.assign = calloc((size_t)zf_graph_num_nodes(f.g), sizeof *f.assign);
    assert_non_null(f.assign);
    f.assign[zf_graph_find_node(f.g, "while/Identity")] = 2;
    f.assign[zf_graph_find_node(f.g, "while/Add/y")] = 2;
    f.assign[zf_graph_find_node(f.g, "while/Add")] = 3;
    const char *fetches[] = {"while/Exit"};
    zf_partition_options_t o = {.fetches = fetches, .n_fetches = 1};
    s_run_two_pass(&f, &o);
    assert_int_equal(f.set->n_parts, 3);
    const zf_partition_t *p1 = s_part(&f, T1C0), *p2 = s_part(&f, T1C1);
    const Tensorflow__NodeDef *pivot = s_node(p1, "while/LoopCond/_cloop_cond_S7");
    assert_string_equal(pivot->op, "LoopCond");
    s_assert_inputs(pivot, "while/LoopCond_S6");
    s_assert_transfer(s_node(p1, "while/LoopCond_S6"), "_Recv", "loop_pred_while/LoopCond", T0C0,
                      0x100, T1C0);
    s_assert_inputs(s_node(p1, "while/LoopCond/_cloop_switch_S3"),
                    "while/LoopCond/_cloop_merge_S2 while/LoopCond/_cloop_cond_S7");
    /* task 1's second pass: CPU:1 runs the frame in step with the pivot */
    const char *recv = "while/LoopCond/_cloop_cond_S7_S23";
    s_assert_transfer(s_node(p2, recv), "_Recv", "loop_pred_while/LoopCond/_cloop_cond_S7", T1C0,
                      0x102, T1C1);
    s_assert_inputs(s_node(p2, "while/LoopCond/_cloop_cond_S7/_cloop_switch_S20"),
                    "while/LoopCond/_cloop_cond_S7/_cloop_merge_S19 "
                    "while/LoopCond/_cloop_cond_S7_S23");
    s_assert_inputs(s_node(p2, "while/Identity_S25"),
                    "^while/LoopCond/_cloop_cond_S7/_cloop_merge_S19");
    s_assert_inputs(s_node(p2, "while/Add"), "while/Identity_S25 while/Add/y_S27");
    s_assert_names_unique(&f);
    s_free(&f);
}

/* A frame cut across devices needs its LoopCond (TensorFlow's words), and
 * control loops run on CPU devices only. */
static void test_partition_refuses_loops_it_cannot_run_across_devices(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f,
           "node { name: 'c' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
           "  attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }"
           "node { name: 'e' op: 'Enter' input: 'c' attr { key: 'T' value { type: DT_FLOAT } }"
           "  attr { key: 'frame_name' value { s: 'f' } } }"
           "node { name: 'n' op: 'Neg' input: 'e' device: '/cpu:1'"
           "  attr { key: 'T' value { type: DT_FLOAT } } }"
           "node { name: 'x' op: 'Exit' input: 'n' attr { key: 'T' value { type: DT_FLOAT } } }");
    s_devices(&f, 2, CPU0, CPU1);
    s_run_fails(&f, NULL, ZF_INVALID_ARGUMENT,
                "A cross-device loop must have a pivot predicate: f");
    s_free(&f);

    s_load_while_loop(&f, GPU0);
    f.assign[zf_graph_find_node(f.g, "while/Exit")] = 1;
    s_run_fails(&f, NULL, ZF_UNIMPLEMENTED,
                "while-loop frame 'while/while_context' spans devices and reaches " GPU0
                ": a loop runs across devices only through CPU devices");
    s_free(&f);
}

static void test_partition_of_an_empty_graph_has_no_partitions(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, "versions { producer: 1 }\n");
    s_devices(&f, 1, CPU0);
    s_run_ok(&f, NULL);
    assert_int_equal(f.set->n_parts, 0);
    s_free(&f);
}

static void test_partition_set_destroy_is_null_safe(void **state)
{
    (void)state;
    zf_partition_set_t *set = NULL;
    zf_partition_set_destroy(&set);
    zf_partition_set_destroy(NULL);
    assert_null(set);
}

/* Each partition carries the library functions its own nodes reach (through
 * an op or a func attr, and through the bodies of those), not the whole
 * library. */
static void test_partition_carries_only_the_functions_its_nodes_reach(void **state)
{
    (void)state;
    s_fx_t f;
    s_load(&f, "node { name: 'a' op: 'Outer' device: '" CPU0 "' }"
               "node { name: 'b' op: 'NoOp' device: '" CPU1 "' }"
               "library { function { signature { name: 'Outer' }"
               "  node_def { name: 'c' op: 'PartitionedCall'"
               "    attr { key: 'f' value { func { name: 'Inner' } } } } }"
               " function { signature { name: 'Inner' } }"
               " function { signature { name: 'Unused' } } }");
    s_devices(&f, 2, CPU0, CPU1);
    s_run_ok(&f, NULL);
    const Tensorflow__FunctionDefLibrary *lib = s_part(&f, CPU0)->graph->library;
    assert_non_null(lib);
    assert_int_equal(lib->n_function, 2);
    assert_string_equal(lib->function[0]->signature->name, "Outer");
    assert_string_equal(lib->function[1]->signature->name, "Inner");
    assert_null(s_part(&f, CPU1)->graph->library);
    s_free(&f);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, s_setup, s_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_partition_splits_the_two_layer_model_between_cpu_and_gpu),
        T(test_partition_two_pass_sends_a_tensor_between_tasks_once),
        T(test_partition_two_pass_casts_between_tasks_only),
        T(test_partition_two_pass_splits_a_loop_across_tasks_and_devices),
        T(test_partition_outputs_reimport_and_are_deterministic),
        T(test_partition_rewrites_feeds_and_fetches_as_client_endpoints),
        T(test_partition_names_the_client_side_when_a_client_device_is_given),
        T(test_partition_prunes_what_the_fetches_and_targets_do_not_need),
        T(test_partition_keeps_every_node_without_fetches_or_targets),
        T(test_partition_carries_only_the_functions_its_nodes_reach),
        T(test_partition_moves_control_edges_of_a_fed_placeholder_to_its_feed),
        T(test_partition_sends_control_edges_through_a_dummy_const),
        T(test_partition_dedups_recvs_per_source_tensor_and_destination),
        T(test_partition_picks_host_send_and_recv_by_memory_type),
        T(test_partition_pairs_send_and_recv_on_one_device_when_memory_differs),
        T(test_partition_casts_float_transfers_to_bfloat16_when_asked),
        T(test_partition_never_shares_recvs_of_reference_edges),
        T(test_partition_groups_devices_by_task),
        T(test_partition_fills_incarnations_and_formats_keys),
        T(test_partition_keeps_new_names_unique),
        T(test_partition_draws_clusters_and_marks_cut_edges),
        T(test_partition_rejects_bad_feeds_fetches_and_targets),
        T(test_partition_rejects_fetching_a_node_without_outputs),
        T(test_partition_rejects_bad_device_sets_and_assignments),
        T(test_partition_rejects_incomplete_nodes_and_untyped_cut_edges),
        T(test_partition_handles_tensorflow_test_graphs),
        T(test_partition_adds_control_loops_for_loops_cut_across_devices),
        T(test_partition_refuses_loops_it_cannot_run_across_devices),
        T(test_partition_of_an_empty_graph_has_no_partitions),
        T(test_partition_set_destroy_is_null_safe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
