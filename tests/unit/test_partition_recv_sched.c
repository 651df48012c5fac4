/* Tests for recv scheduling (zf_partition_options_t.recv_scheduling;
 * scheduler/graph/partition_sched.c): the ASAP `_start_time` of every recv
 * and the control edge it gets, against times worked out by hand from the
 * cost model (one unit per node, ZF_RECV_SCHED_TRANSFER_COST = 2 more per
 * edge between devices); loops (back edges ignored, an Exit after its whole
 * frame, a loop recv waiting only for a node that runs in every iteration);
 * the error for a frame entered after its Exit;
 * and runs in process on two devices — the MLP example and a while loop
 * across devices — that give the same values with and without the option,
 * and the values worked out independently. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/graphdef_io.h"
#include "scheduler/graph/partition.h"
#include "session/local_session.h"
#include "test_util.h"

#define CPU0     "/job:localhost/replica:0/task:0/device:CPU:0"
#define CPU1     "/job:localhost/replica:0/task:0/device:CPU:1"
#define SUM_LOOP ZF_TEST_DATA_DIR "/sum_loop.pbtxt"
#define MLP      ZF_TEST_DATA_DIR "/../../examples/mlp.pbtxt"

/* ---- partitioning a text graph over CPU:0 and CPU:1 ---------------------- */

typedef struct {
    Tensorflow__GraphDef *gd;
    zf_graph_t *g;
    int *assign;
    zf_partition_set_t *set;
} s_parted_t;

/* Each node goes to CPU:1 when its requested device ends in "1", else to
 * CPU:0. */
static zf_status_t s_partition(const char *text, const zf_partition_options_t *o, s_parted_t *p)
{
    memset(p, 0, sizeof *p);
    zf_status_t s = zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &p->gd);
    if (!zf_ok(s)) fail_msg("bad test graph: %s", zf_status_msg(&s));
    s = zf_graph_new_from_graphdef(p->gd, &p->g);
    if (!zf_ok(s)) fail_msg("bad test graph: %s", zf_status_msg(&s));
    int n = zf_graph_num_nodes(p->g);
    p->assign = calloc((size_t)n + 1, sizeof *p->assign);
    assert_non_null(p->assign);
    for (int i = 0; i < n; i++) {
        const char *dev = zf_graph_node_device(p->g, i);
        p->assign[i] = *dev && dev[strlen(dev) - 1] == '1';
    }
    zf_partition_device_t devs[2];
    assert_true(zf_ok(zf_device_name_parse(CPU0, &devs[0].name)));
    assert_true(zf_ok(zf_device_name_parse(CPU1, &devs[1].name)));
    devs[0].incarnation = 1;
    devs[1].incarnation = 2;
    return zf_partition_graph(p->g, devs, 2, p->assign, o, &p->set);
}

static void s_parted_free(s_parted_t *p)
{
    zf_partition_set_destroy(&p->set);
    zf_graph_destroy(&p->g);
    zf_graphdef_free(&p->gd);
    free(p->assign);
}

static const Tensorflow__GraphDef *s_part(const s_parted_t *p, const char *device)
{
    for (int i = 0; i < p->set->n_parts; i++)
        if (strcmp(p->set->parts[i].device, device) == 0) return p->set->parts[i].graph;
    fail_msg("no partition for %s", device);
    return NULL;
}

static const Tensorflow__NodeDef *s_find(const Tensorflow__GraphDef *gd, const char *name)
{
    for (size_t i = 0; i < gd->n_node; i++)
        if (strcmp(gd->node[i]->name, name) == 0) return gd->node[i];
    fail_msg("no node %s", name);
    return NULL;
}

/* The recv that node reader of partition gd reads at input k. */
static const Tensorflow__NodeDef *s_recv_of(const Tensorflow__GraphDef *gd, const char *reader,
                                            int k)
{
    const Tensorflow__NodeDef *r = s_find(gd, reader);
    assert_true((size_t)k < r->n_input);
    const Tensorflow__NodeDef *recv = s_find(gd, r->input[k]);
    assert_true(strcmp(recv->op, "_Recv") == 0);
    return recv;
}

/* A recv's _start_time, and its control inputs ("^a ^b"). */
static void s_assert_sched(const Tensorflow__NodeDef *recv, int64_t start, const char *controls)
{
    const Tensorflow__AttrValue *t = zf_node_attr(recv, "_start_time");
    if (!t) fail_msg("%s has no _start_time", recv->name);
    assert_int_equal(t->value_case, TENSORFLOW__ATTR_VALUE__VALUE_I);
    if (t->i != start)
        fail_msg("%s: _start_time %lld, want %lld", recv->name, (long long)t->i, (long long)start);
    /* The attrs stay in name order: '_' sorts before the lowercase keys. */
    assert_string_equal(recv->attr[0]->key, "_start_time");
    char buf[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < recv->n_input; i++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", used ? " " : "",
                                 recv->input[i]);
    if (strcmp(buf, controls) != 0)
        fail_msg("%s: inputs '%s', want '%s'", recv->name, buf, controls);
}

/* ---- times by hand ------------------------------------------------------- */

#define F32(name, op, dev, ...)                                                                    \
    "node { name: '" name "' op: '" op "' device: '/cpu:" dev "' " __VA_ARGS__                     \
    " attr { key: 'T' value { type: DT_FLOAT } } }\n"
#define KF(name, dev)                                                                              \
    "node { name: '" name "' op: 'Const' device: '/cpu:" dev "'"                                   \
    " attr { key: 'dtype' value { type: DT_FLOAT } }"                                              \
    " attr { key: 'value' value { tensor { dtype: DT_FLOAT float_val: 1 } } } }\n"

/* cpu:0: a(0) -> b(1) -> c(2); cpu:1: x(0) -> x1(1) -> x2(2) -> x3(3).
 * y = x3 + c on cpu:1 starts at max(3 + 1, 2 + 1 + 2) = 5, u = y * c
 * (listed first, so the recv of c is made for it) at max(5 + 1, 5) = 6;
 * z = c * x3 on cpu:0 at max(2 + 1, 3 + 1 + 2) = 6. The recv of c on
 * cpu:1 starts with its earliest reader, y: 5; its transfer must start by
 * 5 - 2 = 3, so it waits for the last cpu:1 node done by then, x2 (starts
 * at 2, done at 3). The recv of x3 on cpu:0 starts at 6 and waits for the
 * node done by 4: c. */
static const char s_chains[] =
    KF("a", "0") F32("b", "Neg", "0", "input: 'a'") F32("c", "Neg", "0", "input: 'b'") KF("x", "1")
        F32("x1", "Neg", "1", "input: 'x'") F32("x2", "Neg", "1", "input: 'x1'")
            F32("x3", "Neg", "1", "input: 'x2'") F32("u", "Mul", "1", "input: 'y' input: 'c'")
                F32("y", "AddV2", "1", "input: 'x3' input: 'c'")
                    F32("z", "Mul", "0", "input: 'c' input: 'x3'");

static void test_recv_sched_times_and_edges_match_the_hand_computed_ones(void **state)
{
    (void)state;
    zf_partition_options_t o = {.recv_scheduling = true};
    s_parted_t p;
    zf_status_t s = s_partition(s_chains, &o, &p);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    const Tensorflow__GraphDef *g0 = s_part(&p, CPU0), *g1 = s_part(&p, CPU1);
    s_assert_sched(s_recv_of(g1, "u", 1), 5, "^x2");
    assert_string_equal(s_find(g1, "y")->input[1], s_find(g1, "u")->input[1]); /* one recv */
    s_assert_sched(s_recv_of(g0, "z", 1), 6, "^c");
    /* Nothing else gets a time. */
    int timed = 0;
    for (int i = 0; i < p.set->n_parts; i++)
        for (size_t k = 0; k < p.set->parts[i].graph->n_node; k++)
            timed += zf_node_attr(p.set->parts[i].graph->node[k], "_start_time") != NULL;
    assert_int_equal(timed, 2);
    s_parted_free(&p);

    /* Without the option: the same nodes, no times, no edges. */
    s = s_partition(s_chains, NULL, &p);
    assert_true(zf_ok(s));
    const Tensorflow__NodeDef *recv = s_recv_of(s_part(&p, CPU1), "u", 1);
    assert_null(zf_node_attr(recv, "_start_time"));
    assert_int_equal(recv->n_input, 0);
    s_parted_free(&p);
}

/* A control edge across devices: its recv starts with its reader. a (0) on
 * cpu:0 controls k on cpu:1: k starts at 0 + 1 + 2 = 3, the recv waits for
 * the cpu:1 node done by 1: q (0); the fetch of k (4) is never waited for. */
static void test_recv_sched_covers_control_edges(void **state)
{
    (void)state;
    static const char text[] =
        KF("a", "0") KF("q", "1") F32("k", "Neg", "1", "input: 'q' input: '^a'");
    zf_partition_options_t o = {.recv_scheduling = true};
    const char *fetch = "k";
    o.fetches = &fetch;
    o.n_fetches = 1;
    s_parted_t p;
    zf_status_t s = s_partition(text, &o, &p);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    const Tensorflow__GraphDef *g1 = s_part(&p, CPU1);
    const Tensorflow__NodeDef *k = s_find(g1, "k");
    assert_int_equal(k->n_input, 2);
    const Tensorflow__NodeDef *id = s_find(g1, k->input[1] + 1); /* the control edge's Identity */
    assert_string_equal(id->op, "Identity");
    s_assert_sched(s_find(g1, id->input[0]), 3, "^q");
    s_parted_free(&p);
}

/* ---- loops --------------------------------------------------------------- */

static char *s_read_text(const char *path, const char *extra)
{
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    char *buf = calloc(1, 65536);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 65535 - strlen(extra), f);
    fclose(f);
    memcpy(buf + n, extra, strlen(extra) + 1);
    return buf;
}

/* tests/data/sum_loop.pbtxt and, on cpu:1, k1 (7) -> k2 = -k1 and
 * after = s_exit + forty_two + k2: after = n (n + 1) / 2 + 35. */
#define I64(name, op, dev, ...)                                                                    \
    "node { name: '" name "' op: '" op "' device: '" dev "' " __VA_ARGS__ "}\n"
static const char s_loop_extra[] =
    I64("k1", "Const", CPU1,
        "attr { key: 'dtype' value { type: DT_INT64 } } attr { key: 'value' value { tensor { "
        "dtype: DT_INT64 tensor_shape { } int64_val: 7 } } }")
        I64("k2", "Neg", CPU1,
            "input: 'k1' attr { key: 'T' value "
            "{ type: DT_INT64 } }")
            I64("after", "AddN", CPU1,
                "input: 'w/s_exit' input: 'forty_two' input: 'k2' attr { key: 'T' value { type: "
                "DT_INT64 } } attr { key: 'N' value { i: 3 } }");

/* By hand, n fed (0): zero, one, forty_two at 0; the Enters at 1 (w/one on
 * cpu:1 at 0 + 1 + 2 = 3); the Merges at 2 (back edges ignored); less 3,
 * cond 4, the Switches 5; i_body on cpu:1 at 5 + 1 + 2 = 8, s_body 9;
 * i_next, s_next on cpu:0 at 8 + 3 = 11 and 9 + 3 = 12. The frame's last
 * node is done at 13, so the Exits start at 13 (not 6) and after at
 * 13 + 1 + 2 = 16. The recv of one (for w/one, at 3) waits for the cpu:1
 * node done by 1: k1; the recvs for after (16) for the one done by 14: k2
 * (1). Loop recvs keep their control loop's input and may wait for a node
 * of the frame that runs in every iteration: on cpu:0, i_body's (11) and
 * s_body's (12) for the last one done by 9 and 10, w/s_sw (5; w/n is a
 * constant Enter) — not w/once6 (7), which the non-constant w/i_enter
 * runs in the first iteration only. On cpu:1 nothing of the frame is done
 * by 8 - 2 or 9 - 2 (w/one is an Enter). */
#define ONCE(k, in)                                                                                \
    I64("w/once" #k, "Neg", CPU0, "input: '" in "' attr { key: 'T' value { type: DT_INT64 } }")
static const char s_once_chain[] = ONCE(1, "w/i_enter") ONCE(2, "w/once1") ONCE(3, "w/once2")
    ONCE(4, "w/once3") ONCE(5, "w/once4") ONCE(6, "w/once5");

static void test_recv_sched_in_a_loop_across_devices(void **state)
{
    (void)state;
    char extra[4096];
    snprintf(extra, sizeof extra, "%s%s", s_loop_extra, s_once_chain);
    char *text = s_read_text(SUM_LOOP, extra);
    const char *feed = "n", *fetches[] = {"w/s_exit", "after"}, *target = "w/once6";
    zf_partition_options_t o = {.feeds = &feed,
                                .n_feeds = 1,
                                .fetches = fetches,
                                .n_fetches = 2,
                                .targets = &target,
                                .n_targets = 1,
                                .recv_scheduling = true};
    s_parted_t p;
    zf_status_t s = s_partition(text, &o, &p);
    if (!zf_ok(s)) fail_msg("%s", zf_status_msg(&s));
    const Tensorflow__GraphDef *g0 = s_part(&p, CPU0), *g1 = s_part(&p, CPU1);
    s_assert_sched(s_recv_of(g1, "w/one", 0), 3, "^k1");
    s_assert_sched(s_recv_of(g1, "after", 0), 16, "^k2");
    s_assert_sched(s_recv_of(g1, "after", 1), 16, "^k2");
    const Tensorflow__NodeDef *in_loop[] = {
        s_recv_of(g1, "w/i_body", 0), s_recv_of(g1, "w/s_body", 0), s_recv_of(g0, "w/i_next", 0),
        s_recv_of(g0, "w/s_next", 0)};
    const int64_t starts[] = {8, 9, 11, 12};
    for (int i = 0; i < 4; i++) {
        const Tensorflow__NodeDef *r = in_loop[i];
        assert_true(r->n_input >= 1);
        assert_non_null(strstr(r->input[0], "/_cloop_merge_S"));
        char want[256];
        snprintf(want, sizeof want, "%s%s", r->input[0], i < 2 ? "" : " ^w/s_sw");
        s_assert_sched(r, starts[i], want);
    }
    s_parted_free(&p);
    free(text);
}

/* A frame entered again after its Exit: its Exits would have to start
 * after the Enter that comes after them, so there are no ASAP times. (The
 * graph loader already refuses plain cycles.) */
static void test_recv_sched_rejects_a_frame_entered_after_its_exit(void **state)
{
    (void)state;
#define ENTER(name, in)                                                                            \
    F32(name, "Enter", "0", "input: '" in "' attr { key: 'frame_name' value { s: 'f' } }")
    static const char text[] = KF("a", "0") ENTER("e1", "a") F32("x1", "Exit", "0", "input: 'e1'")
        ENTER("e2", "x1") F32("x2", "Exit", "0", "input: 'e2'") F32("y", "Neg", "1", "input: 'x2'");
#undef ENTER
    zf_partition_options_t o = {.recv_scheduling = true};
    s_parted_t p;
    zf_status_t s = s_partition(text, &o, &p);
    zf_test_expect_error(s, ZF_INVALID_ARGUMENT,
                         "recv scheduling: node 'x1' is on or after a cycle that passes no "
                         "NextIteration (or a while-loop frame entered again after its Exit)");
    assert_null(p.set);
    s_parted_free(&p);
}

/* ---- runs ---------------------------------------------------------------- */

/* The recvs of the session's last run that carry a _start_time, as
 * "<start> [^control]..." joined by "; " (partitions in device order),
 * leaving out control-loop inputs; *waiting counts those with a control
 * input left. */
static void s_scheduled(zf_local_session_t *s, char *buf, size_t size, int *waiting)
{
    const zf_partition_set_t *set = zf_local_session_last_partitions(s);
    assert_non_null(set);
    size_t used = 0;
    buf[0] = '\0';
    *waiting = 0;
    for (int i = 0; i < set->n_parts; i++)
        for (size_t k = 0; k < set->parts[i].graph->n_node; k++) {
            const Tensorflow__NodeDef *nd = set->parts[i].graph->node[k];
            const Tensorflow__AttrValue *t = zf_node_attr(nd, "_start_time");
            if (!t) continue;
            used += (size_t)snprintf(buf + used, size - used, "%s%lld", used ? "; " : "",
                                     (long long)t->i);
            bool waits = false;
            for (size_t j = 0; j < nd->n_input; j++) {
                if (nd->input[j][0] != '^' || strstr(nd->input[j], "/_cloop_")) continue;
                used += (size_t)snprintf(buf + used, size - used, " %s", nd->input[j]);
                waits = true;
            }
            *waiting += waits;
        }
}

/* softmax(relu(x W1 + b1) W2 + b2) for this x, computed with NumPy 1.24
 * (float32) from the weights in examples/mlp.pbtxt. */
static const float s_mlp_x[12] = {1, 2, 3, 4, -1, 0.5f, 2, -3, 0.25f, -0.5f, 0.75f, 1};
static const double s_mlp_probs[6] = {0.197816104, 0.802183926, 0.483755708,
                                      0.516244292, 0.484380096, 0.515619934};

/* The MLP with its second layer (and layer1/bias) on cpu:1: the same
 * probabilities, bit for bit, with and without recv scheduling. By hand:
 * the feed, the weights and the biases start at 0, layer1/matmul at 1,
 * layer1/add at 0 + 1 + 2 = 3 (its recv of the bias waits for the last
 * cpu:0 node done by 1: the feed, a node after the graph's), relu at 4 and
 * layer2/matmul at 4 + 1 + 2 = 7 (its recv of relu waits for the last
 * cpu:1 node done by 5: layer2/bias, the last of those at 0). */
static void test_recv_sched_mlp_gives_the_same_values(void **state)
{
    (void)state;
    float got[2][6];
    for (int sched = 0; sched < 2; sched++) {
        Tensorflow__GraphDef *gd = NULL;
        assert_true(zf_ok(zf_graphdef_read_file(MLP, ZF_FORMAT_AUTO, &gd)));
        for (size_t i = 0; i < gd->n_node; i++) {
            Tensorflow__NodeDef *nd = gd->node[i];
            if (strncmp(nd->name, "layer2/", 7) != 0 && strcmp(nd->name, "probs") != 0 &&
                strcmp(nd->name, "layer1/bias") != 0)
                continue;
            if (nd->device != protobuf_c_empty_string) free(nd->device);
            nd->device = strdup(CPU1);
        }
        zf_local_session_t *s = zf_test_local_session_sched(gd, "cpu:2", sched);
        zf_tensor_t *x = NULL, *probs = NULL;
        zf_shape_t shape = ZF_SHAPE(3, 4);
        assert_true(zf_ok(zf_tensor_new_from_bytes(ZF_FLOAT, &shape, s_mlp_x, sizeof s_mlp_x, &x)));
        const char *feed = "x", *fetch = "probs";
        zf_status_t st = zf_local_session_run(s, &feed, &x, 1, &fetch, 1, NULL, 0, &probs);
        if (!zf_ok(st)) fail_msg("%s", zf_status_msg(&st));
        assert_int_equal(zf_local_session_last_num_partitions(s), 2);
        assert_int_equal(zf_tensor_num_elements(probs), 6);
        memcpy(got[sched], zf_tensor_data(probs), sizeof got[sched]);
        for (int i = 0; i < 6; i++)
            if (!(got[sched][i] >= s_mlp_probs[i] - 1e-6 && got[sched][i] <= s_mlp_probs[i] + 1e-6))
                fail_msg("element %d: got %.9g, want %.9g", i, (double)got[sched][i],
                         s_mlp_probs[i]);
        char sched_text[512];
        int waiting = 0;
        s_scheduled(s, sched_text, sizeof sched_text, &waiting);
        assert_string_equal(sched_text, sched ? "3 ^_recv_x_0; 7 ^layer2/bias" : "");
        zf_tensor_unref(&probs);
        zf_tensor_unref(&x);
        zf_local_session_destroy(&s);
        zf_graphdef_free(&gd);
    }
    assert_memory_equal(got[0], got[1], sizeof got[0]);
}

/* The while loop across cpu:0 and cpu:1 with the root nodes above:
 * s = n (n + 1) / 2 and after = s + 35 for n = 0, 1, 10 and 100, with and
 * without recv scheduling; with it, the run's recvs of after wait for k2. */
static void test_recv_sched_loop_gives_the_same_values(void **state)
{
    (void)state;
    char *text = s_read_text(SUM_LOOP, s_loop_extra);
    static const int64_t ns[] = {0, 1, 10, 100};
    for (int sched = 0; sched < 2; sched++) {
        Tensorflow__GraphDef *gd = NULL;
        assert_true(zf_ok(zf_graphdef_read_mem(text, strlen(text), ZF_FORMAT_PBTXT, &gd)));
        zf_local_session_t *s = zf_test_local_session_sched(gd, "cpu:2", sched);
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            zf_tensor_t *n = NULL, *out[2] = {NULL, NULL};
            zf_shape_t scalar = ZF_SHAPE();
            assert_true(
                zf_ok(zf_tensor_new_from_bytes(ZF_INT64, &scalar, &ns[i], sizeof ns[i], &n)));
            const char *feed = "n", *fetches[] = {"w/s_exit", "after"};
            zf_status_t st = zf_local_session_run(s, &feed, &n, 1, fetches, 2, NULL, 0, out);
            if (!zf_ok(st)) fail_msg("n=%lld: %s", (long long)ns[i], zf_status_msg(&st));
            int64_t want = ns[i] * (ns[i] + 1) / 2;
            assert_int_equal(*(const int64_t *)zf_tensor_data(out[0]), want);
            assert_int_equal(*(const int64_t *)zf_tensor_data(out[1]), want + 35);
            zf_tensor_unref(&out[0]);
            zf_tensor_unref(&out[1]);
            zf_tensor_unref(&n);
        }
        /* The seven recvs of test_recv_sched_in_a_loop_across_devices; the
         * three outside the loop and the two on cpu:0 inside wait. */
        char sched_text[512];
        int waiting = 0;
        s_scheduled(s, sched_text, sizeof sched_text, &waiting);
        assert_int_equal(waiting, sched ? 5 : 0);
        assert_int_equal(strlen(sched_text) > 0, sched);
        zf_local_session_destroy(&s);
        zf_graphdef_free(&gd);
    }
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recv_sched_times_and_edges_match_the_hand_computed_ones),
        cmocka_unit_test(test_recv_sched_covers_control_edges),
        cmocka_unit_test(test_recv_sched_in_a_loop_across_devices),
        cmocka_unit_test(test_recv_sched_rejects_a_frame_entered_after_its_exit),
        cmocka_unit_test(test_recv_sched_mlp_gives_the_same_values),
        cmocka_unit_test(test_recv_sched_loop_gives_the_same_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
